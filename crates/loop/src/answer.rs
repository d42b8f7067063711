//! `.ralph/answer.md`: the human's answer, written once by whoever answers first.
//!
//! The file is created with "no clobber" semantics ([`crate::workspace::create_atomic`]): the
//! loop's inline prompt, `ralph answer` from another terminal and any number of racing
//! `ralph answer` calls all try to create it, and exactly one succeeds. The others are told who
//! won. The file carries a short YAML header (who answered, when, and which question) above the
//! answer itself, so an agent reading it sees plain words and ralph can still tell a late answer
//! from a fresh one.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::state::{parse_timestamp, timestamp};
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
    /// `asked_at` of the question it answers; `None` for guidance given with no question.
    pub question_asked_at: Option<String>,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    question_asked_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    answer_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    answered_by_who: Option<String>,
}

impl Answer {
    /// A new answer given now.
    pub fn new(text: impl Into<String>, by: AnsweredBy, question_asked_at: Option<String>) -> Self {
        let at = SystemTime::now();
        let nanos = at
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        Answer {
            text: text.into(),
            by,
            at,
            question_asked_at,
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
            question_asked_at: self.question_asked_at.clone(),
            answer_id: self.id.clone(),
            answered_by_who: self.who.clone(),
        };
        let yaml = serde_yaml_ng::to_string(&header).expect("header serializes");
        format!("---\n{yaml}---\n{}\n", self.text.trim_end())
    }

    /// Reads a file's contents; a file without a header is a hand-written answer.
    pub fn parse(raw: &str) -> Answer {
        let raw = raw.strip_prefix('\u{feff}').unwrap_or(raw);
        if let Some(rest) = raw.strip_prefix("---\n")
            && let Some(end) = rest.find("\n---\n")
            && let Ok(header) = serde_yaml_ng::from_str::<Header>(&rest[..end])
        {
            return Answer {
                text: rest[end + 5..].trim().to_string(),
                by: header.answered_by,
                at: parse_timestamp(&header.answered_at).unwrap_or_else(SystemTime::now),
                question_asked_at: header.question_asked_at,
                id: header.answer_id,
                who: header.answered_by_who,
            };
        }
        Answer {
            text: raw.trim().to_string(),
            by: AnsweredBy::File,
            at: SystemTime::now(),
            question_asked_at: None,
            id: None,
            who: None,
        }
    }
}

/// What happened when an answer was submitted.
#[derive(Debug, Clone, PartialEq)]
pub enum Submitted {
    /// This answer is the one.
    Accepted,
    /// Someone answered first; here is their answer (its text may be just the first line, or
    /// empty when it is no longer known).
    AlreadyAnswered(Answer),
    /// The question was skipped before this answer arrived.
    Skipped,
}

/// Creates `.ralph/answer.md` unless an answer is already there.
///
/// An answer to a given question (`question_asked_at`) that finds the file free has not won
/// yet: the caller looked at `state.json` before writing, and in between a loop (or a lone
/// `ralph ask`) may have taken another answer, closed the question and removed the file. So it
/// looks at `state.json` again. Whoever takes an answer records the question as closed, with
/// the taken answer's id, before removing the file; so the state now says either that the
/// question still waits (this answer is first), that it was closed by this very answer (the
/// loop was that fast: the file must stay until the agent has it), or that it was closed by
/// another answer or a skip: then this answer takes its own file back and is told. With no
/// record of the question and no loop running, it was closed some other way and the answer
/// is taken back too; with a loop running, the loop decides (it delivers it as guidance).
/// (Regression test: `fifty_concurrent_answers_have_exactly_one_winner_and_the_rest_are_told`,
/// which saw second winners twice: with no loop left, and with the loop still ending.)
pub fn submit(ws: &Workspace, answer: &Answer) -> Result<Submitted, WorkspaceError> {
    let contents = answer.to_file();
    if workspace::create_atomic(&ws.answer(), contents.as_bytes())? {
        let Some(asked_at) = &answer.question_asked_at else {
            return Ok(Submitted::Accepted);
        };
        let lost = match crate::state::State::load(ws) {
            Ok(Some(state)) => {
                if state
                    .pending_question
                    .as_ref()
                    .is_some_and(|p| &p.asked_at == asked_at)
                {
                    None
                } else if let Some(closed) = state.closed(asked_at) {
                    match (&closed.answer_id, closed.answered_by) {
                        (Some(id), _) if answer.id.as_ref() == Some(id) => None,
                        (_, Some(by)) => Some(Submitted::AlreadyAnswered(Answer {
                            text: closed.answer_line.clone().unwrap_or_default(),
                            by,
                            at: SystemTime::now(),
                            question_asked_at: Some(asked_at.clone()),
                            id: closed.answer_id.clone(),
                            who: None,
                        })),
                        (_, None) => Some(Submitted::Skipped),
                    }
                } else if ws.is_locked() {
                    None
                } else {
                    Some(Submitted::AlreadyAnswered(Answer::new(
                        "",
                        AnsweredBy::File,
                        None,
                    )))
                }
            }
            // Nothing readable to contradict the caller.
            Ok(None) | Err(_) => None,
        };
        let Some(lost) = lost else {
            return Ok(Submitted::Accepted);
        };
        workspace::remove_if(&ws.answer(), workspace::MAX_READ_BYTES, |now| {
            now == contents.as_bytes()
        })?;
        return Ok(lost);
    }
    Ok(match read(ws)? {
        Some(existing) => Submitted::AlreadyAnswered(existing),
        // The winner's file vanished between our attempt and our read (the loop archived it):
        // it was delivered, and ours came second all the same.
        None => Submitted::AlreadyAnswered(Answer::new("", AnsweredBy::File, None)),
    })
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
            Some("2026-11-22T14:00:00.000Z".into()),
        );
        let b = Answer::parse(&a.to_file());
        assert_eq!(b.text, a.text);
        assert_eq!(b.by, a.by);
        assert_eq!(b.question_asked_at, a.question_asked_at);
    }

    #[test]
    fn a_file_without_header_is_hand_written() {
        let a = Answer::parse("just use redis\n");
        assert_eq!(a.text, "just use redis");
        assert_eq!(a.by, AnsweredBy::File);
    }

    #[test]
    fn second_submit_is_told_who_won() {
        let (_dir, ws) = workspace();
        let first = Answer::new("first", AnsweredBy::Terminal, None);
        let second = Answer::new("second", AnsweredBy::RalphAnswer, None);
        assert_eq!(submit(&ws, &first).unwrap(), Submitted::Accepted);
        match submit(&ws, &second).unwrap() {
            Submitted::AlreadyAnswered(a) => {
                assert_eq!(a.text, "first");
                assert_eq!(a.by, AnsweredBy::Terminal);
            }
            other => panic!("{other:?}"),
        }
    }

    /// Regression: with a loop running, an answer whose question is no longer waiting stays.
    /// The loop may have taken this very answer between the file's creation and the re-check
    /// (inotify is that fast), and the agent still needs the file.
    #[test]
    fn an_answer_the_running_loop_already_took_stays() {
        let (_dir, ws) = workspace();
        // The loop: holds the lock; its state shows no question waiting any more.
        let _loop = ws.lock().unwrap();
        crate::state::State::fresh(&ws, "agent", 3)
            .save(&ws)
            .unwrap();
        let ours = Answer::new(
            "use Redis",
            AnsweredBy::RalphAnswer,
            Some("2026-11-22T14:00:00.000Z".into()),
        );
        assert_eq!(submit(&ws, &ours).unwrap(), Submitted::Accepted);
        assert_eq!(read(&ws).unwrap().map(|a| a.text), Some("use Redis".into()));
    }

    /// With no loop running, an answer to a question that is no longer waiting is taken back:
    /// it read `state.json` before a loop took another answer, closed the question and ended.
    #[test]
    fn a_late_answer_with_no_loop_running_is_taken_back() {
        let (_dir, ws) = workspace();
        crate::state::State::fresh(&ws, "agent", 3)
            .save(&ws)
            .unwrap();
        let late = Answer::new(
            "use Memcached",
            AnsweredBy::RalphAnswer,
            Some("2026-11-22T14:00:00.000Z".into()),
        );
        assert!(matches!(
            submit(&ws, &late).unwrap(),
            Submitted::AlreadyAnswered(_)
        ));
        assert_eq!(read(&ws).unwrap(), None);
    }

    fn workspace() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path());
        ws.ensure().unwrap();
        (dir, ws)
    }

    /// A state whose question (asked at `asked_at`) a loop closed with `taken`, or skipped.
    fn closed_by(ws: &Workspace, asked_at: &str, taken: Option<&Answer>) {
        let mut st = crate::state::State::fresh(ws, "agent", 3);
        st.close_question(asked_at, taken);
        st.save(ws).unwrap();
    }

    /// Regression (CI, `fifty_concurrent_answers...`): with the loop still running, a racer
    /// that read `state.json` before the winner's answer was taken, and created the file after
    /// the loop removed it, won a second time. The state now names the answer taken.
    #[test]
    fn with_a_loop_running_an_answer_after_the_winners_was_removed_is_told_and_taken_back() {
        let (_dir, ws) = workspace();
        let _loop = ws.lock().unwrap();
        let asked_at = "2026-11-22T14:00:00.000Z";
        let winner = Answer::new(
            "Redis\nbecause",
            AnsweredBy::Terminal,
            Some(asked_at.into()),
        );
        closed_by(&ws, asked_at, Some(&winner));
        let late = Answer::new("Memcached", AnsweredBy::RalphAnswer, Some(asked_at.into()));
        match submit(&ws, &late).unwrap() {
            Submitted::AlreadyAnswered(theirs) => {
                assert_eq!(theirs.by, AnsweredBy::Terminal);
                assert_eq!(theirs.text, "Redis");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(read(&ws).unwrap(), None, "the loser's file is gone");
    }

    /// The loop took this very answer and closed the question before the re-check: it stays.
    #[test]
    fn an_answer_the_state_names_as_taken_stays() {
        let (_dir, ws) = workspace();
        let asked_at = "2026-11-22T14:00:00.000Z";
        let ours = Answer::new("use Redis", AnsweredBy::RalphAnswer, Some(asked_at.into()));
        closed_by(&ws, asked_at, Some(&ours));
        // With or without a loop running.
        assert_eq!(submit(&ws, &ours).unwrap(), Submitted::Accepted);
        assert_eq!(read(&ws).unwrap().map(|a| a.text), Some("use Redis".into()));
    }

    #[test]
    fn an_answer_to_a_skipped_question_is_told_and_taken_back() {
        let (_dir, ws) = workspace();
        let _loop = ws.lock().unwrap();
        let asked_at = "2026-11-22T14:00:00.000Z";
        closed_by(&ws, asked_at, None);
        let late = Answer::new("Memcached", AnsweredBy::RalphAnswer, Some(asked_at.into()));
        assert_eq!(submit(&ws, &late).unwrap(), Submitted::Skipped);
        assert_eq!(read(&ws).unwrap(), None);
    }

    #[test]
    fn ids_differ_and_survive_the_file() {
        let a = Answer::new("x", AnsweredBy::RalphAnswer, None);
        let b = Answer::new("x", AnsweredBy::RalphAnswer, None);
        assert_ne!(a.id, b.id);
        assert_eq!(Answer::parse(&a.to_file()).id, a.id);
        assert_eq!(Answer::parse("hand written").id, None);
    }
}
