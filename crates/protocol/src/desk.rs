//! The question desk, as any process sees it: read the question waiting in a workspace, answer
//! it, and say how to answer it from elsewhere.
//!
//! # Theory of operation
//!
//! A question lives in four files: `question.md` (what the agent asked), `state.json`'s
//! `pending_question` (that it waits, its deadline, whether the countdown holds, who raised
//! it), `ask.json` (a waiting `ralph ask`'s claim on it) and `answer.md` (the answer, first
//! writer wins). The loop, or a lone `ralph ask` standing in for one, owns the question's
//! life: it raises it, keeps its deadline, and archives it once delivered. Every other
//! process is a client of that owner and uses two calls:
//!
//! - [`waiting`]: the question waiting, with its state and any answer already given;
//! - [`answer`]: submit an answer to it. The first answer wins, whoever gives it: the
//!   loop's own panel, `ralph answer`, a remote broker. The winner is recorded (`answered_by`
//!   in `answer.md`, then in `state.json` and `clarifications.md`); every later caller is
//!   told who answered first ([`Submitted::AlreadyAnswered`]).
//!
//! [`answer_command`] is the one spelling of "answer it from any terminal".

use std::path::Path;

use crate::answer::{self, Answer, AnsweredBy, Submitted};
use crate::question::Question;
use crate::state::{PendingQuestion, State, StateError};
use crate::text::shell_quote;
use crate::workspace::{Workspace, WorkspaceError};

/// How a question's wait ended: the one answer to that, for the loop and for `ralph ask`.
#[derive(Debug, Clone, PartialEq)]
pub enum Ended {
    /// Answered.
    Answered {
        /// The answer taken (the first one given).
        answer: Answer,
        /// Whether it was given here (the loop's own terminal), not from elsewhere.
        here: bool,
    },
    /// The deadline passed with no answer; a late answer is still taken.
    TimedOut,
    /// The human skipped it: the agent decides.
    Skipped,
    /// The loop was stopped while it waited; the question stays for the next run.
    Interrupted,
}

/// The question waiting in a workspace, as a front end shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Waiting {
    /// The question.
    pub question: Question,
    /// Its state: when it was asked, its deadline, whether the countdown holds or has run
    /// out, how it was raised.
    pub pending: PendingQuestion,
    /// An answer already given and not yet delivered, if any.
    pub answer: Option<Answer>,
    /// Whether a loop (or a lone `ralph ask`) is running in the workspace right now; if not,
    /// the next `ralph run` delivers an answer.
    pub live: bool,
}

/// Why an answer could not be submitted.
#[derive(Debug, thiserror::Error)]
pub enum DeskError {
    /// No question waits in the workspace.
    #[error(
        "no question is waiting in {root}. To leave guidance for the next iteration anyway, add --force."
    )]
    NoQuestion {
        /// The project root.
        root: String,
    },
    /// The answer is empty.
    #[error("the answer is empty")]
    Empty,
    /// `state.json` could not be read.
    #[error(transparent)]
    State(#[from] StateError),
    /// `answer.md` could not be written.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
}

/// The question waiting in `ws` and its state; `Ok(None)` when none waits.
pub fn waiting(ws: &Workspace) -> Result<Option<Waiting>, StateError> {
    let Some(pending) = State::load(ws)?.and_then(|s| s.pending_question) else {
        return Ok(None);
    };
    let answer = answer::read(ws)?
        .filter(|a| a.question_asked_at.as_deref() == Some(pending.asked_at.as_str()));
    Ok(Some(Waiting {
        question: pending.question(),
        pending,
        answer,
        live: ws.is_locked(),
    }))
}

/// Submits `text` as `by`'s answer to the question waiting in `ws`. The first answer wins;
/// a later one is told who answered first and is not used. Safe to call from any process,
/// any number of times at once.
pub fn answer(ws: &Workspace, text: &str, by: AnsweredBy) -> Result<Submitted, DeskError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(DeskError::Empty);
    }
    let Some(pending) = State::load(ws)?.and_then(|s| s.pending_question) else {
        return Err(DeskError::NoQuestion {
            root: ws.root().display().to_string(),
        });
    };
    Ok(answer::submit(
        ws,
        &Answer::new(text, by, Some(pending.asked_at)),
    )?)
}

/// `ralph answer -C ROOT`, the root quoted for a shell: how to answer the question of the loop
/// in `root` from any terminal (the answer itself follows).
pub fn answer_command(root: &Path) -> String {
    format!(
        "ralph answer -C {}",
        shell_quote(&root.display().to_string())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::RaisedBy;
    use std::time::SystemTime;

    fn asked(ws: &Workspace) -> PendingQuestion {
        let q = Question::parse("Redis or Memcached?");
        let pending = PendingQuestion::new(&q, SystemTime::now(), None, 1, RaisedBy::Signal);
        let mut st = State::fresh(ws, "agent", 3);
        st.pending_question = Some(pending.clone());
        st.save(ws).unwrap();
        pending
    }

    #[test]
    fn the_first_answer_wins_and_the_second_is_told_who_answered() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path());
        ws.ensure().unwrap();
        assert!(matches!(
            answer(&ws, "Redis", AnsweredBy::RalphAnswer),
            Err(DeskError::NoQuestion { .. })
        ));
        let pending = asked(&ws);
        assert_eq!(waiting(&ws).unwrap().unwrap().answer, None);
        assert!(matches!(
            answer(&ws, "  ", AnsweredBy::RalphAnswer),
            Err(DeskError::Empty)
        ));
        assert_eq!(
            answer(&ws, "Redis", AnsweredBy::Terminal).unwrap(),
            Submitted::Accepted
        );
        match answer(&ws, "Memcached", AnsweredBy::RalphAnswer).unwrap() {
            Submitted::AlreadyAnswered(theirs) => {
                assert_eq!(theirs.text, "Redis");
                assert_eq!(theirs.by, AnsweredBy::Terminal);
            }
            other => panic!("{other:?}"),
        }
        let now = waiting(&ws).unwrap().unwrap();
        assert_eq!(now.pending, pending);
        assert_eq!(now.question.text, "Redis or Memcached?");
        assert_eq!(now.answer.unwrap().text, "Redis");
        assert!(!now.live);
    }

    #[test]
    fn the_answer_command_quotes_the_root() {
        assert_eq!(
            answer_command(Path::new("/tmp/my project")),
            "ralph answer -C '/tmp/my project'"
        );
        assert_eq!(
            answer_command(Path::new("/srv/shop")),
            "ralph answer -C /srv/shop"
        );
    }
}
