//! `.ralph/answer.md`: the human's answer, written once by whoever answers first.
//!
//! The file is created with "no clobber" semantics ([`crate::desk::submit`]): the
//! loop's inline prompt, `ralph answer` from another terminal and any number of racing
//! `ralph answer` calls all try to create it, and exactly one succeeds. The others are told who
//! won. The file carries a short YAML header (who answered, when, and which question, by its [`QuestionId`]) above the
//! answer itself, so an agent reading it sees plain words and ralph can still tell a late answer
//! from a fresh one.

use std::time::SystemTime;

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
            };
        }
        Answer {
            text: raw.trim().to_string(),
            by: AnsweredBy::File,
            at: SystemTime::now(),
            question: None,
            id: None,
            who: None,
        }
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
