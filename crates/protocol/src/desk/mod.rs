//! The question desk: the one owner of a question's life, and every front end's way in.
//!
//! # Theory of operation
//!
//! A question lives in four files: `question.md` (what the agent asked), `state.json`'s
//! `pending_question` (that it waits, its deadline, whether the countdown holds, who raised
//! it), `ask.json` (a waiting `ralph ask`'s claim on it) and `answer.md` (the answer, first
//! writer wins). [`Desk`] is the only code that writes or removes them. It is sync and takes
//! the clock and every input as arguments, so each step and each race is a unit test:
//!
//! - [`Desk::open`] records a question as waiting (from `question.md`, a `ralph ask` claim
//!   found by [`Desk::new_claim`], or the agent's own question tool);
//! - [`Desk::step`] moves it along on one [`Input`] (an answer typed here, a skip, more time,
//!   a typing pause, a look at the files, a stop) and says when its wait is over ([`Ended`]);
//! - [`Desk::close`] acts on how it ended; [`Desk::pick_up`] hands an answer to the next
//!   iteration and [`Desk::delivered`] archives it in `clarifications.md` once it was had;
//!   [`Desk::run_ended`] closes what a finished run leaves;
//! - [`Desk::claim`], [`Desk::asker_step`] and [`Desk::unclaim`] are the same life seen from a
//!   `ralph ask`, which stands in for the loop when none runs.
//!
//! The loop and a lone `ralph ask` drive the desk; the front ends (the panel, `ralph answer`,
//! `ralph status`, `ralph serve`'s page and bot) use two calls:
//!
//! - [`waiting`]: the question waiting, with its state and any answer already given;
//! - [`answer()`]: answer it with a [`Reply`] ([`compose`] writes and checks the text: one
//!   encoding, one size limit, one set of refusals). The first answer wins, whoever gives it;
//!   every later caller is told who answered first ([`Submitted::AlreadyAnswered`]).
//!
//! A question is named everywhere by its [`QuestionId`]; [`QuestionId::is_answered_by`] is
//! the one rule for "this answer is for that question". [`Ended`] is the one word for how a
//! question ended. [`answer_command`] is the one spelling of "answer it from any terminal".

use std::path::Path;

use crate::answer::{self, Answer, AnsweredBy};
use crate::question::Question;
use crate::state::{ClosedQuestion, PendingQuestion, State, StateError};
use crate::text::shell_quote;
use crate::workspace::{Workspace, WorkspaceError};

mod ask;
mod id;
mod life;
mod reply;
mod submit;

pub use ask::{ClaimError, Claimed};
pub use id::QuestionId;
pub use life::{
    AskerStep, Asking, Closed, Delivery, Desk, Found, Input, NewClaim, Now, OnTimeout, PickUp,
    Stepped,
};
pub use reply::{MAX_ANSWER_BYTES, Refusal, Reply, compose, encode, read_back};
pub use submit::{Submitted, submit};

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
    /// Its state: which question, when it was asked, its deadline, whether the countdown holds
    /// or has run out, how it was raised.
    pub pending: PendingQuestion,
    /// An answer already given and not yet delivered, if any.
    pub answer: Option<Answer>,
    /// Whether a loop (or a lone `ralph ask`) is running in the workspace right now; if not,
    /// the next `ralph run` delivers an answer.
    pub live: bool,
}

impl Waiting {
    /// The question.
    pub fn question(&self) -> &Question {
        &self.pending.question
    }
}

/// Why an answer was not taken.
#[derive(Debug, thiserror::Error)]
pub enum DeskError {
    /// No question waits (or not the one answered); how the last one closed, if known.
    #[error("{}no question is waiting in {root}. To leave guidance for the next iteration anyway, add --force.", closed.as_ref().map(|c| format!("{}; ", c.how())).unwrap_or_default())]
    NotWaiting {
        /// The project root.
        root: String,
        /// How the question answered (or the last one) closed, if the state remembers.
        closed: Option<ClosedQuestion>,
    },
    /// The answer itself was refused.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// `state.json` could not be read.
    #[error(transparent)]
    State(#[from] StateError),
    /// `answer.md` could not be written.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
}

/// The question waiting in `ws` and its state; `Ok(None)` when none waits.
pub fn waiting(ws: &Workspace) -> Result<Option<Waiting>, StateError> {
    match State::load(ws)? {
        Some(state) => Ok(waiting_as(ws, &state)?),
        None => Ok(None),
    }
}

/// [`waiting`], for a caller that has just loaded `ws`'s `state` itself (the fleet's rows read
/// each loop's state once).
pub fn waiting_as(ws: &Workspace, state: &State) -> Result<Option<Waiting>, WorkspaceError> {
    let Some(pending) = state.pending_question.clone() else {
        return Ok(None);
    };
    let answer = answer_to(ws, &pending.id)?;
    Ok(Some(Waiting {
        pending,
        answer,
        live: ws.is_locked(),
    }))
}

/// The answer to the question `id` waiting in `ws`'s `answer.md` to be delivered, if one is
/// there: for that question, and sealed by ralph (an answer the agent wrote itself is not one).
/// The one rule every reader of a waiting answer goes by.
pub fn answer_to(ws: &Workspace, id: &QuestionId) -> Result<Option<Answer>, WorkspaceError> {
    Ok(answer::read(ws)?.filter(|a| id.is_answered_by(a) && answer::is_genuine(ws, a)))
}

/// Answers the question waiting in `ws` (`to`: only if it is that one) with `reply`, as `by`
/// (and `who` among them). The text is composed and checked here ([`compose`]), the same for
/// every front end. The first answer wins; a later one is told who answered first. Safe to
/// call from any process, any number of times at once.
pub fn answer(
    ws: &Workspace,
    to: Option<&crate::desk::QuestionId>,
    reply: &Reply,
    by: AnsweredBy,
    who: Option<String>,
) -> Result<Submitted, DeskError> {
    let state = State::load(ws)?;
    let pending = state.as_ref().and_then(|s| s.pending_question.as_ref());
    let Some(pending) = pending.filter(|p| to.is_none_or(|id| &p.id == id)) else {
        let closed = state.as_ref().and_then(|s| match to {
            Some(id) => s.closed(id).cloned(),
            None => s.closed_questions.last().cloned(),
        });
        return Err(DeskError::NotWaiting {
            root: ws.root().display().to_string(),
            closed,
        });
    };
    let text = compose(Some(&pending.question), reply)?;
    let mut ans = Answer::new(text, by, Some(pending.id.clone()));
    ans.who = who;
    Ok(submit(ws, &ans)?)
}

/// Leaves `text` as guidance for the next iteration, with no question to answer
/// (`ralph answer --force`); checked as any answer.
pub fn guide(ws: &Workspace, text: &str, by: AnsweredBy) -> Result<Submitted, DeskError> {
    let text = compose(None, &Reply::Text(text.to_string()))?;
    Ok(submit(ws, &Answer::new(text, by, None))?)
}

impl ClosedQuestion {
    /// How it closed, in words: "it was answered by X (first line)", "it was skipped", "the
    /// run that asked it has ended".
    pub fn how(&self) -> String {
        if self.run_ended {
            return "the run that asked it has ended, so nobody waits for an answer any more"
                .into();
        }
        match self.answered_by {
            Some(by) => format!(
                "the question was already answered by {} ({})",
                by.describe(),
                crate::text::clean(self.answer_line.as_deref().unwrap_or("")).trim()
            ),
            None => "the question was skipped, so the agent decided".into(),
        }
    }
}

/// What stands for the answer in the commands ralph prints for the user to copy
/// ([`answer_hint`]); `ralph answer` refuses it as an answer.
pub const ANSWER_PLACEHOLDER: &str = "your answer";

/// `ralph answer -C DIR "your answer"`: `answer_command` with [`ANSWER_PLACEHOLDER`] where the
/// user's answer goes, the one spelling every front end prints.
pub fn answer_hint(answer_command: &str) -> String {
    format!("{answer_command} \"{ANSWER_PLACEHOLDER}\"")
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
mod tests;
