//! First answer wins: how any process puts an answer in `answer.md`, and learns whether it won.

use std::time::SystemTime;

use crate::answer::{self, Answer, AnsweredBy};
use crate::state::State;
use crate::workspace::{self, Workspace, WorkspaceError};

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
    /// The run it was asked in has ended (verified done, failed, out of iterations): nobody
    /// waits for this answer any more.
    RunEnded,
}

/// Creates `.ralph/answer.md` unless an answer is already there.
///
/// An answer to a given question (its [`crate::desk::QuestionId`]) that finds the file free has not won
/// yet: the caller looked at `state.json` before writing, and in between a loop (or a lone
/// `ralph ask`) may have taken another answer, closed the question and removed the file. So it
/// looks at `state.json` again. Whoever takes an answer records the question as closed, with
/// the taken answer's id, before removing the file; so the state now says either that the
/// question still waits (this answer is first), that it was closed by this very answer (the
/// loop was that fast: the file must stay until the agent has it), or that it was closed by
/// another answer or a skip: then this answer takes its own file back and is told. With no
/// record of the question and no loop running, it was closed some other way and the answer
/// is taken back too; with a loop running, the loop decides (it delivers it as guidance).
///
/// The answer is sealed here ([`Answer::sealed`]), under the key in ralph's state directory
/// ([`crate::answer_key`]). A
/// file already there that ralph did not write (the agent's, or a hand-written one) is not an
/// answer: it is removed, and this one takes its place.
pub fn submit(ws: &Workspace, answer: &Answer) -> Result<Submitted, WorkspaceError> {
    let answer = &match answer::key(ws) {
        Ok(Some(key)) => answer.clone().sealed(&key),
        Ok(None) => answer.clone(),
        Err(error) => {
            return Err(WorkspaceError::Io {
                path: ws.state_dir().unwrap_or_default().join(answer::KEY_FILE),
                error,
            });
        }
    };
    let contents = answer.to_file();
    // A file in the way that ralph did not write is removed (only that one), then tried again.
    for _ in 0..3 {
        if workspace::create_atomic(&ws.answer(), contents.as_bytes())? {
            return settle(ws, answer, &contents);
        }
        let Some(raw) = workspace::read_bounded(&ws.answer(), workspace::MAX_READ_BYTES)? else {
            continue;
        };
        let existing = Answer::parse(&String::from_utf8_lossy(&raw.bytes));
        if answer::is_genuine(ws, &existing) {
            return Ok(Submitted::AlreadyAnswered(existing));
        }
        workspace::remove_if(&ws.answer(), workspace::MAX_READ_BYTES, |now| {
            now == raw.bytes.as_slice()
        })?;
    }
    Ok(match answer::read(ws)? {
        Some(existing) => Submitted::AlreadyAnswered(existing),
        // The winner's file vanished between our attempt and our read (the loop archived it):
        // it was delivered, and ours came second all the same.
        None => Submitted::AlreadyAnswered(Answer::new("", AnsweredBy::File, None)),
    })
}

/// After `answer` was created as `contents`: whether it won, or must be taken back.
fn settle(ws: &Workspace, answer: &Answer, contents: &str) -> Result<Submitted, WorkspaceError> {
    let Some(question) = &answer.question else {
        return Ok(Submitted::Accepted);
    };
    let lost = match State::load(ws) {
        Ok(Some(state)) => {
            if state
                .pending_question
                .as_ref()
                .is_some_and(|p| &p.id == question)
            {
                None
            } else if let Some(closed) = state.closed(question) {
                match (&closed.answer_id, closed.answered_by) {
                    (Some(id), _) if answer.id.as_ref() == Some(id) => None,
                    _ if closed.run_ended => Some(Submitted::RunEnded),
                    (_, Some(by)) => Some(Submitted::AlreadyAnswered(Answer {
                        text: closed.answer_line.clone().unwrap_or_default(),
                        by,
                        at: SystemTime::now(),
                        question: Some(question.clone()),
                        id: closed.answer_id.clone(),
                        who: None,
                        seal: None,
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
    Ok(lost)
}
