//! `.ralph/answer.md`: the human's answer, written once by whoever answers first.
//!
//! The file is created with "no clobber" semantics ([`crate::desk::submit`]): the
//! loop's inline prompt, `ralph answer` from another terminal and any number of racing
//! `ralph answer` calls all try to create it, and exactly one succeeds. The others are told who
//! won. The file carries a short YAML header (who answered, when, and which question, by its [`QuestionId`]) above the
//! answer itself, so an agent reading it sees plain words and ralph can still tell a late answer
//! from a fresh one.
//!
//! # Sealed
//!
//! The agent can write `.ralph/` (it must: its question goes there), so it could write
//! `answer.md` itself and answer its own question in the name of someone else. So whoever gives
//! an answer for real (the loop's panel, `ralph answer`, `ralph serve`'s page and bot: all
//! through [`crate::desk::submit`]) seals it: the header's `seal` is an HMAC-SHA-256 of its
//! fields and text under a key of 256 random bits in ralph's state directory (`answer.key`,
//! mode 0600), which the sandbox never gives the agent. The desk takes only a sealed answer
//! ([`is_genuine`]); any other (hand-written, made up, or changed after it was sealed) is
//! refused as [`Forged`], removed and never delivered. A process that cannot read the key
//! (a `ralph ask` inside the sandbox) cannot tell, and takes what it finds: the loop, outside,
//! is the one that decides what the agent is given and what is recorded.

use std::fmt;
use std::path::PathBuf;
use std::time::SystemTime;

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};

use crate::desk::QuestionId;
use crate::frontmatter::{self, Found};
use crate::time::{parse_timestamp, timestamp};
use crate::workspace::{self, Workspace, WorkspaceError};

/// Who gave an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnsweredBy {
    /// Typed into the running loop's terminal.
    Terminal,
    /// Given with `ralph answer` from another terminal or script.
    RalphAnswer,
    /// Written into `.ralph/answer.md` by hand (no header).
    File,
    /// Sent from the web page of `ralph serve` (an answer link or a paired device).
    Web,
    /// Sent from the Telegram bot of `ralph serve`.
    Telegram,
}

impl AnsweredBy {
    /// How `clarifications.md` and the UI name this source.
    pub fn describe(self) -> &'static str {
        match self {
            AnsweredBy::Terminal => "the terminal running the loop",
            AnsweredBy::RalphAnswer => "`ralph answer`",
            AnsweredBy::File => "a hand-written .ralph/answer.md",
            AnsweredBy::Web => "the web page of `ralph serve`",
            AnsweredBy::Telegram => "Telegram",
        }
    }
}

/// An answer, as stored in `.ralph/answer.md`.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The answer itself.
    pub text: String,
    /// Who gave it.
    pub by: AnsweredBy,
    /// When it was given.
    pub at: SystemTime,
    /// The question it answers; `None` for guidance given with no question (or a
    /// hand-written file, which answers whatever question waits).
    pub question: Option<QuestionId>,
    /// This answer's identity (process and time of writing); `None` for a hand-written file.
    pub id: Option<String>,
    /// Which person or device among those of its kind gave it (`answer link`, a paired
    /// device's name, a Telegram user id); `None` when the kind says it all.
    pub who: Option<String>,
    /// The seal of whoever wrote it (see the module docs); `None` for an answer not yet
    /// written, or a file without one.
    pub seal: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct Header {
    answered_by: AnsweredBy,
    answered_at: String,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "question_asked_at"
    )]
    question_id: Option<QuestionId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    answer_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    answered_by_who: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    seal: Option<String>,
}

impl Answer {
    /// A new answer given now.
    pub fn new(text: impl Into<String>, by: AnsweredBy, question: Option<QuestionId>) -> Self {
        let at = SystemTime::now();
        let nanos = at
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        Answer {
            text: text.into(),
            by,
            at,
            question,
            id: Some(format!("{}-{nanos}", std::process::id())),
            who: None,
            seal: None,
        }
    }

    /// The same answer, saying which person or device gave it.
    pub fn with_who(mut self, who: impl Into<String>) -> Self {
        self.who = Some(who.into());
        self
    }

    /// Who gave it, as `clarifications.md` and the UI say it: the kind, and who among them.
    pub fn source(&self) -> String {
        match &self.who {
            Some(who) => format!("{} ({who})", self.by.describe()),
            None => self.by.describe().to_string(),
        }
    }

    /// The file's contents: a YAML header, then the answer.
    pub fn to_file(&self) -> String {
        let header = Header {
            answered_by: self.by,
            answered_at: timestamp(self.at),
            question_id: self.question.clone(),
            answer_id: self.id.clone(),
            answered_by_who: self.who.clone(),
            seal: self.seal.clone(),
        };
        let yaml = serde_yaml_ng::to_string(&header).expect("header serializes");
        format!("---\n{yaml}---\n{}\n", self.text.trim_end())
    }

    /// Reads a file's contents; a file without a header is a hand-written answer.
    pub fn parse(raw: &str) -> Answer {
        let raw = raw.strip_prefix('\u{feff}').unwrap_or(raw);
        if let Found::At(f) = frontmatter::split(raw, false)
            && let Ok(header) = serde_yaml_ng::from_str::<Header>(&raw[f.yaml_start..f.close_start])
        {
            return Answer {
                text: raw[f.body_start..].trim().to_string(),
                by: header.answered_by,
                at: parse_timestamp(&header.answered_at).unwrap_or_else(SystemTime::now),
                question: header.question_id,
                id: header.answer_id,
                who: header.answered_by_who,
                seal: header.seal,
            };
        }
        Answer {
            text: raw.trim().to_string(),
            by: AnsweredBy::File,
            at: SystemTime::now(),
            question: None,
            id: None,
            who: None,
            seal: None,
        }
    }

    /// Whether `other` is this answer read again: the same in all but the time of a file
    /// without a header, which is the time it was read.
    pub fn same_as(&self, other: &Answer) -> bool {
        let at = SystemTime::UNIX_EPOCH;
        Answer { at, ..self.clone() }
            == Answer {
                at,
                ..other.clone()
            }
    }

    /// The same answer, sealed under `key`.
    pub fn sealed(mut self, key: &[u8]) -> Answer {
        self.seal = Some(hex(&self.mac(key)));
        self
    }

    /// Whether its seal is the one `key` gives its fields and text: written by ralph, and not
    /// changed since.
    pub fn seal_holds(&self, key: &[u8]) -> bool {
        use subtle::ConstantTimeEq;
        self.seal
            .as_deref()
            .is_some_and(|seal| bool::from(seal.as_bytes().ct_eq(hex(&self.mac(key)).as_bytes())))
    }

    /// The HMAC of every field the file carries, each length-prefixed, as the file spells it
    /// (the time to the millisecond, the text trimmed), so what is read back checks.
    fn mac(&self, key: &[u8]) -> Vec<u8> {
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(key).expect("HMAC takes any key");
        let by = serde_json::to_string(&self.by).expect("a source serializes");
        let fields = [
            "ralph answer 1",
            &by,
            &timestamp(self.at),
            self.question.as_ref().map_or("", |q| q.as_str()),
            self.id.as_deref().unwrap_or(""),
            self.who.as_deref().unwrap_or(""),
            self.text.trim(),
        ];
        for field in fields {
            mac.update(&(field.len() as u64).to_be_bytes());
            mac.update(field.as_bytes());
        }
        mac.finalize().into_bytes().to_vec()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The file in ralph's state directory that holds the key answers are sealed with.
pub const KEY_FILE: &str = "answer.key";

/// The key answers in `ws` are sealed with, made on first use: `Ok(None)` when there is no
/// state directory to keep it in (no home directory), so nothing can be sealed or checked;
/// an error when it cannot be read or made (inside the sandbox, which is refused it).
pub fn key(ws: &Workspace) -> std::io::Result<Option<Vec<u8>>> {
    match ws.state_dir() {
        Some(dir) => crate::broker::state_key(&dir, KEY_FILE).map(Some),
        None => Ok(None),
    }
}

/// Whether `answer` was written by ralph (see the module docs): its seal holds. `true` as well
/// where this process cannot tell (no state directory, or a key it may not read: the sandbox).
pub fn is_genuine(ws: &Workspace, answer: &Answer) -> bool {
    match key(ws) {
        Ok(Some(key)) => answer.seal_holds(&key),
        Ok(None) | Err(_) => true,
    }
}

/// An answer found in `answer.md` that ralph did not write: no seal, or one that does not hold
/// (hand-written, or made up by the agent). It is removed and never delivered.
#[derive(Debug, Clone, PartialEq)]
pub struct Forged {
    /// The file it was found in.
    pub path: PathBuf,
    /// What it said of itself (its source may be a lie).
    pub answer: Answer,
}

impl fmt::Display for Forged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = if self.answer.seal.is_some() {
            "its seal does not match"
        } else {
            "it has no seal"
        };
        let claim = match self.answer.by {
            AnsweredBy::File => String::new(),
            _ => format!(
                ", in the name of {}",
                crate::text::clean(&self.answer.source())
            ),
        };
        write!(
            f,
            "refused {}: ralph did not write it ({why}), so it may be the agent answering its own question{claim}; it was removed and not delivered. To answer, use `ralph answer`, the panel or `ralph serve`",
            self.path.display(),
        )
    }
}

/// Reads `.ralph/answer.md`, if there is one.
pub fn read(ws: &Workspace) -> Result<Option<Answer>, WorkspaceError> {
    Ok(workspace::read_text(&ws.answer())?.map(|raw| Answer::parse(&raw)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_the_file() {
        let a = Answer::new(
            "Use Redis: we need pub/sub later.\n$(rm -rf ~) stays text",
            AnsweredBy::RalphAnswer,
            Some(QuestionId::new()),
        );
        let b = Answer::parse(&a.to_file());
        assert_eq!(b.text, a.text);
        assert_eq!(b.by, a.by);
        assert_eq!(b.question, a.question);
    }

    #[test]
    fn a_file_without_header_is_hand_written() {
        let a = Answer::parse("just use redis\n");
        assert_eq!(a.text, "just use redis");
        assert_eq!(a.by, AnsweredBy::File);
    }
}
