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
//! [`Ended`] is the one word for how a question ended, whoever acts on it or shows it.
//! [`answer_command`] is the one spelling of "answer it from any terminal".

use std::path::Path;

use std::time::SystemTime;

use crate::answer::{self, Answer, AnsweredBy};
use crate::question::Question;
use crate::state::{PendingQuestion, State, StateError};
use crate::text::shell_quote;
use crate::workspace::{self, Workspace, WorkspaceError};

/// How a question ended: the one answer to that, for the loop, `ralph ask`, the loop's
/// events (`LoopEvent::QuestionClosed`), the front ends' words and `clarifications.md`.
#[derive(Debug, Clone, PartialEq)]
pub enum Ended {
    /// Answered.
    Answered {
        /// The answer taken (the first one given): its text, who gave it and when.
        answer: Answer,
        /// Whether it was given here (the loop's own terminal), not from elsewhere.
        here: bool,
        /// Whether it came after the deadline had passed: the agent had gone on without it,
        /// and a later iteration got it.
        late: bool,
    },
    /// The deadline passed with no answer; a late answer is still taken.
    TimedOut,
    /// The human skipped it: the agent decides.
    Skipped,
    /// The loop was stopped while it waited; the question stays for the next run.
    Interrupted,
}

impl Ended {
    /// Answered in time with `answer`; `here` when given in the loop's own terminal.
    pub fn answered(answer: Answer, here: bool) -> Self {
        Ended::Answered {
            answer,
            here,
            late: false,
        }
    }

    /// The answer, if it was answered.
    pub fn answer(&self) -> Option<&Answer> {
        match self {
            Ended::Answered { answer, .. } => Some(answer),
            Ended::TimedOut | Ended::Skipped | Ended::Interrupted => None,
        }
    }
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
    Ok(submit(ws, &Answer::new(text, by, Some(pending.asked_at)))?)
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
pub fn submit(ws: &Workspace, answer: &Answer) -> Result<Submitted, WorkspaceError> {
    let contents = answer.to_file();
    if workspace::create_atomic(&ws.answer(), contents.as_bytes())? {
        let Some(asked_at) = &answer.question_asked_at else {
            return Ok(Submitted::Accepted);
        };
        let lost = match State::load(ws) {
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
    Ok(match answer::read(ws)? {
        Some(existing) => Submitted::AlreadyAnswered(existing),
        // The winner's file vanished between our attempt and our read (the loop archived it):
        // it was delivered, and ours came second all the same.
        None => Submitted::AlreadyAnswered(Answer::new("", AnsweredBy::File, None)),
    })
}

/// `PROGRAM answer -C ROOT`, the root quoted for a shell: how to answer the question of the loop
/// in `root` from any terminal (the answer itself follows). `program` is how the reader runs
/// ralph: `ralph` where it is on `PATH`, its full path where it is not.
pub fn answer_command(program: &str, root: &Path) -> String {
    format!(
        "{program} answer -C {}",
        shell_quote(&root.display().to_string())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answer::read;
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
            answer_command("ralph", Path::new("/tmp/my project")),
            "ralph answer -C '/tmp/my project'"
        );
        assert_eq!(
            answer_command("ralph", Path::new("/srv/shop")),
            "ralph answer -C /srv/shop"
        );
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
        State::fresh(&ws, "agent", 3).save(&ws).unwrap();
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
        State::fresh(&ws, "agent", 3).save(&ws).unwrap();
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
        let mut st = State::fresh(ws, "agent", 3);
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
