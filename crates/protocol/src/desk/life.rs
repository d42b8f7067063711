//! [`Desk`]: the one owner of a question's life in a workspace.
//!
//! Sync, and told everything: the clock ([`Now`]), the human's inputs ([`Input`]), whether an
//! asker is still alive. The loop (async, in `ralph-loop`) and a lone `ralph ask` (blocking)
//! both drive it; neither writes `question.md`, `answer.md`, `ask.json` or
//! `state.json`'s `pending_question` itself. The state is the caller's to save (the loop
//! saves it off its async thread): the Desk changes it and says when a save matters.

use std::collections::HashSet;
use std::time::{Duration, Instant, SystemTime};

use crate::answer::{self, Answer, AnsweredBy, Forged};
use crate::broker;
use crate::clarifications;
use crate::countdown::{Countdown, EXTEND_BY};
use crate::question::{MAX_QUESTION_BYTES, Question};
use crate::state::{AskClaim, PendingQuestion, RaisedBy, State, Status};
use crate::time::{parse_timestamp, timestamp};
use crate::workspace::{self, Workspace, WorkspaceError};

use super::reply::{self, Refusal};
use super::submit::{Submitted, submit};
use super::{Ended, QuestionId};

/// The time, as a monotonic instant (for the countdown) and as the wall clock (for files).
#[derive(Debug, Clone, Copy)]
pub struct Now {
    /// For the countdown.
    pub instant: Instant,
    /// For `state.json` and the record.
    pub wall: SystemTime,
}

impl Now {
    /// The time now.
    pub fn current() -> Now {
        Now {
            instant: Instant::now(),
            wall: SystemTime::now(),
        }
    }

    /// `d` later.
    pub fn after(self, d: Duration) -> Now {
        Now {
            instant: self.instant + d,
            wall: self.wall + d,
        }
    }
}

/// The owner of the questions of one workspace (see the module docs).
#[derive(Debug, Clone)]
pub struct Desk {
    ws: Workspace,
}

/// A question open on the desk: waiting for its answer, deadline, skip or stop.
#[derive(Debug, Clone)]
pub struct Asking {
    /// Which question.
    pub id: QuestionId,
    /// What was asked.
    pub question: Question,
    /// When it was asked.
    pub asked_at: SystemTime,
    /// The one countdown (the front end shows what the desk says).
    pub countdown: Countdown,
    /// How it was raised.
    pub raised_by: RaisedBy,
    /// The iteration that asked.
    pub iteration: u32,
    /// Whether `state.json` last said the countdown holds.
    paused: bool,
}

impl Asking {
    /// When it needs looking at again (its deadline, the end of a typing pause), if ever.
    pub fn wake(&self, now: Instant) -> Option<Instant> {
        if self.countdown.expired(now) {
            return Some(now);
        }
        self.countdown.next_wake(now)
    }
}

/// One thing that moves an open question along.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// Look at the files again (a change in `.ralph/`, or a wake-up at the deadline).
    Look,
    /// An answer typed in the loop's own terminal.
    Typed(String),
    /// The human skipped it: the agent decides.
    Skip,
    /// The human is typing: the countdown holds.
    Typing,
    /// More time: this much, or [`EXTEND_BY`].
    Extend(Option<Duration>),
    /// The loop is stopping.
    Stop,
}

/// What one [`Desk::step`] did.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Stepped {
    /// The question's wait is over, and how.
    pub ended: Option<Ended>,
    /// A typed answer was refused (the question still waits).
    pub refused: Option<Refusal>,
    /// The countdown changed: show it again.
    pub countdown_changed: bool,
    /// `ralph serve` asked for this much more time.
    pub extended_from_afar: Option<Duration>,
    /// `state.json` changed (deadline, pause) and should be saved.
    pub save: bool,
    /// Something in `.ralph/` was wrong and was set right (said to the human).
    pub warning: Option<String>,
    /// An answer ralph did not write was found, refused and removed (said to the human).
    pub forged: Option<Forged>,
}

/// What [`Desk::read_answer`] found in `answer.md`.
#[derive(Debug, Default)]
pub struct Found {
    /// The answer, written by ralph (or by someone this process cannot tell from it: see
    /// [`answer::is_genuine`]).
    pub answer: Option<Answer>,
    /// Something that was not a plain file was there and was set right.
    pub warning: Option<String>,
    /// An answer ralph did not write was there: refused and removed.
    pub forged: Option<Forged>,
}

/// An answer on its way to the agent: taken before (or while) an iteration runs, archived
/// after the iteration that had it ([`Desk::delivered`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// The question it answers; `None` for guidance given with no question.
    pub question: Option<Question>,
    /// `question.md` as it was, so only that question is removed once delivered.
    pub question_raw: Option<Vec<u8>>,
    /// Which question.
    pub id: Option<QuestionId>,
    /// When it was asked (for the record).
    pub asked_at: Option<String>,
    /// The answer.
    pub answer: Answer,
    /// Given after the deadline.
    pub late: bool,
}

/// What [`Desk::pick_up`] found in `answer.md` before an iteration.
#[derive(Debug, Clone, PartialEq)]
pub enum PickUp {
    /// No answer waits.
    Nothing,
    /// An answer ralph did not write was there: it was refused and removed, never delivered.
    Forged(Forged),
    /// A second answer to a question already closed (answered, or skipped when `answered` is
    /// false); it was taken back and is never delivered.
    Refused {
        /// The refused answer.
        answer: Answer,
        /// Whether the question was answered (not skipped).
        answered: bool,
    },
    /// An answer (or guidance) for the iteration about to run.
    Deliver(Box<Delivery>),
}

/// What [`Desk::close`] did with a question whose wait ended.
#[derive(Debug, Default)]
pub struct Closed {
    /// The answer, to deliver ([`Desk::delivered`] after the iteration that has it).
    pub delivery: Option<Delivery>,
    /// `clarifications.md` could not be written (a full disk): the question's fate is in
    /// `state.json` all the same.
    pub archive_failed: Option<WorkspaceError>,
}

/// A `ralph ask` claim the loop has not shown yet ([`Desk::new_claim`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NewClaim {
    /// The question's id.
    pub id: QuestionId,
    /// When it was asked.
    pub asked_at: SystemTime,
    /// What was asked.
    pub question: Question,
    /// How long it may wait, from now (`None`: no deadline).
    pub wait: Option<Duration>,
}

/// What a lone asker should do next ([`Desk::asker_step`]).
#[derive(Debug, Clone, PartialEq)]
pub enum AskerStep {
    /// Its wait is over.
    Ended(Ended),
    /// Wait for a change in `.ralph/`, or until this time (`None`: no deadline).
    Wait(Option<SystemTime>),
    /// An answer ralph did not write was there (a hand-written file, say): refused and
    /// removed; say so, and go on waiting.
    Refused(Forged),
}

/// How a question that timed out is handled ([`Desk::close`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnTimeout {
    /// The agent goes on with its best guess; a late answer still reaches a later iteration.
    GoOn,
    /// The run stops; the question stays for the next run.
    Stop,
}

impl Desk {
    /// The desk of `ws`.
    pub fn new(ws: Workspace) -> Desk {
        Desk { ws }
    }

    /// Its workspace.
    pub fn workspace(&self) -> &Workspace {
        &self.ws
    }

    /// Opens a question: `state` says it waits (and the caller saves that before showing it).
    /// `id` is the question's own when it has one already (a `ralph ask` claim, a question
    /// left by the last run); a new one otherwise.
    #[allow(clippy::too_many_arguments)]
    pub fn open(
        &self,
        state: &mut State,
        question: Question,
        id: Option<QuestionId>,
        asked_at: SystemTime,
        wait: Option<Duration>,
        iteration: u32,
        raised_by: RaisedBy,
        now: Now,
    ) -> Asking {
        let countdown = Countdown::new(wait, now.instant);
        let deadline = countdown.remaining(now.instant).map(|left| now.wall + left);
        let id = id.unwrap_or_default();
        state.pending_question = Some(PendingQuestion::new(
            id.clone(),
            &question,
            asked_at,
            deadline,
            iteration,
            raised_by,
        ));
        state.status = Status::WaitingInput;
        Asking {
            id,
            question,
            asked_at,
            countdown,
            raised_by,
            iteration,
            paused: false,
        }
    }

    /// Moves an open question along by one input; see [`Stepped`].
    pub fn step(
        &self,
        state: &mut State,
        asking: &mut Asking,
        input: Input,
        now: Now,
    ) -> Result<Stepped, WorkspaceError> {
        let mut out = Stepped::default();
        let input = match input {
            // A skip or more time from `ralph serve` counts as the same key in the panel.
            Input::Look => match broker::take_request(&self.ws) {
                Some(r) if r.question == asking.id => match r.extend_by() {
                    None => Input::Skip,
                    Some(by) => {
                        out.extended_from_afar = Some(by);
                        Input::Extend(Some(by))
                    }
                },
                _ => Input::Look,
            },
            other => other,
        };
        let mut deadline_moved = false;
        match input {
            Input::Typed(text) => {
                let text = text.trim();
                if let Err(refused) = reply::check(text) {
                    out.refused = Some(refused);
                    return Ok(out);
                }
                let ans = Answer::new(text, AnsweredBy::Terminal, Some(asking.id.clone()));
                out.ended = Some(match submit(&self.ws, &ans)? {
                    Submitted::Accepted => Ended::answered(ans, true),
                    Submitted::AlreadyAnswered(theirs) => Ended::answered(theirs, false),
                    // Only the desk skips or ends its open question; it has not.
                    Submitted::Skipped | Submitted::RunEnded => Ended::Skipped,
                });
                return Ok(out);
            }
            Input::Skip => {
                out.ended = Some(Ended::Skipped);
                return Ok(out);
            }
            Input::Stop => {
                out.ended = Some(Ended::Interrupted);
                return Ok(out);
            }
            Input::Typing => {
                asking.countdown.typing(now.instant);
                out.countdown_changed = true;
            }
            Input::Extend(by) => {
                asking
                    .countdown
                    .extend(by.unwrap_or(EXTEND_BY), now.instant);
                out.countdown_changed = true;
                deadline_moved = true;
            }
            Input::Look => {}
        }
        // An answer may have landed from elsewhere (`ralph answer`, the page, the bot).
        let found = self.read_answer()?;
        out.warning = found.warning;
        out.forged = found.forged;
        if let Some(ans) = found.answer
            && asking.id.is_answered_by(&ans)
        {
            out.ended = Some(Ended::answered(ans, false));
            return Ok(out);
        }
        if asking.countdown.expired(now.instant) {
            out.ended = Some(Ended::TimedOut);
            return Ok(out);
        }
        // Keep state.json's deadline true while the human types or extends, for `ralph status`
        // and for a `ralph ask` that follows the loop's deadline.
        let paused = asking.countdown.is_paused(now.instant);
        if paused != asking.paused || deadline_moved {
            asking.paused = paused;
            if let Some(p) = state
                .pending_question
                .as_mut()
                .filter(|p| p.id == asking.id)
            {
                p.paused = paused;
                p.deadline = asking
                    .countdown
                    .remaining(now.instant)
                    .map(|left| timestamp(now.wall + left));
            }
            out.save = true;
        }
        Ok(out)
    }

    /// Closes a question whose wait ended as `ended`: the state says how, the record gets it,
    /// and an answer comes back as a [`Delivery`]. A timeout under [`OnTimeout::Stop`] and an
    /// interruption leave the question waiting for the next run.
    pub fn close(
        &self,
        state: &mut State,
        asking: &Asking,
        ended: &Ended,
        on_timeout: OnTimeout,
    ) -> Result<Closed, WorkspaceError> {
        let mut closed = Closed::default();
        let asked_at = timestamp(asking.asked_at);
        match ended {
            Ended::Answered { answer, .. } => {
                state.close_question(&asking.id, Some(answer));
                closed.delivery = Some(Delivery {
                    question: Some(asking.question.clone()),
                    question_raw: self.question_raw(),
                    id: Some(asking.id.clone()),
                    asked_at: Some(asked_at),
                    answer: answer.clone(),
                    late: false,
                });
            }
            Ended::TimedOut if on_timeout == OnTimeout::Stop => {
                self.unpause(state, &asking.id);
                return Ok(closed);
            }
            Ended::TimedOut => {
                closed.archive_failed = self
                    .archive(Some(&asking.question), Some(&asked_at), ended)
                    .err();
                // Kept open for a late answer, which a later iteration gets.
                if let Some(p) = state
                    .pending_question
                    .as_mut()
                    .filter(|p| p.id == asking.id)
                {
                    p.paused = false;
                    p.timed_out = true;
                }
            }
            Ended::Skipped => {
                closed.archive_failed = self
                    .archive(Some(&asking.question), Some(&asked_at), ended)
                    .err();
                state.close_question(&asking.id, None);
                workspace::remove(&self.ws.question())?;
                // Removing the claim is how a waiting `ralph ask` learns it was skipped.
                workspace::remove(&self.ws.ask_claim())?;
            }
            Ended::Interrupted => {
                self.unpause(state, &asking.id);
                return Ok(closed);
            }
        }
        state.status = Status::Running;
        Ok(closed)
    }

    /// Closes what is left of a run that has ended for good (verified DONE, a failure, the
    /// iteration limit): a question that timed out is no longer open, and a late answer to
    /// it is refused as the run having ended. A question that still waits for its answer
    /// (the run was stopped while it waited) stays for the next run.
    pub fn run_ended(&self, state: &mut State) -> Result<(), WorkspaceError> {
        let Some(p) = state.pending_question.clone() else {
            return Ok(());
        };
        if !p.timed_out {
            return Ok(());
        }
        state.close_question(&p.id, None);
        if let Some(c) = state.closed_questions.last_mut() {
            c.run_ended = true;
        }
        workspace::remove(&self.ws.question())?;
        Ok(())
    }

    /// Before an iteration: takes an answer waiting in `answer.md` for it (whoever gave it,
    /// whenever), or refuses a second answer to a question already closed; a question file
    /// nobody waits on is cleared.
    pub fn pick_up(&self, state: &mut State) -> Result<(PickUp, Option<String>), WorkspaceError> {
        let Found {
            answer: found,
            warning,
            forged,
        } = self.read_answer()?;
        let Some(ans) = found else {
            if state.pending_question.as_ref().is_none_or(|p| !p.timed_out) {
                // A question file nobody signalled for (or one already answered and archived)
                // would be shown by mistake on the next QUESTION: clear it.
                workspace::remove(&self.ws.question())?;
            }
            let found = forged.map_or(PickUp::Nothing, PickUp::Forged);
            return Ok((found, warning));
        };
        let pending = state.pending_question.clone();
        let for_pending = pending.as_ref().is_some_and(|p| p.id.is_answered_by(&ans));
        // An answer to a question no longer waiting, which this state remembers closing.
        let closed = ans
            .question
            .as_ref()
            .filter(|_| !for_pending)
            .and_then(|id| state.closed(id).cloned());
        // The very answer that closed it, still here: the run that took it ended (killed, or
        // at max_iterations) before an iteration had it. Delivered now.
        let undelivered = closed
            .as_ref()
            .is_some_and(|c| c.answer_id.is_some() && c.answer_id == ans.id);
        if let Some(closed) = closed.filter(|_| !undelivered) {
            // A second answer: its giver was told it lost (see `submit`) and takes it back.
            // Only that file, if it is still there; best effort (looked at again next time).
            let _ = workspace::remove_if(&self.ws.answer(), workspace::MAX_READ_BYTES, |now| {
                Answer::parse(&String::from_utf8_lossy(now)) == ans
            });
            return Ok((
                PickUp::Refused {
                    answer: ans,
                    answered: closed.answered_by.is_some(),
                },
                warning,
            ));
        }
        let question_raw = (for_pending || undelivered)
            .then(|| self.question_raw())
            .flatten();
        let (question, late, id, asked_at) = match (&pending, for_pending) {
            (Some(p), true) => (
                Some(p.question.clone()),
                p.timed_out,
                Some(p.id.clone()),
                Some(p.asked_at.clone()),
            ),
            // Its question is no longer pending; `question.md` still says what it was (both
            // are archived only once an iteration had the answer).
            _ => match question_raw.as_deref().filter(|_| undelivered) {
                Some(raw) => (
                    Some(Question::parse_bounded(raw)),
                    false,
                    ans.question.clone(),
                    None,
                ),
                None => (None, false, None, None),
            },
        };
        match &id {
            Some(id) => state.close_question(id, Some(&ans)),
            None => state.pending_question = None,
        }
        Ok((
            PickUp::Deliver(Box::new(Delivery {
                question,
                question_raw,
                id,
                asked_at,
                answer: ans,
                late,
            })),
            warning,
        ))
    }

    /// After the iteration that had `d`: archives it, then removes the answer (and its
    /// question, if `question.md` is still that one: the agent may have asked a new one).
    /// The caller has saved the state that says the question closed: a `ralph answer` that
    /// still saw it waiting would otherwise find the file free and win a second time. An
    /// archive that fails (a full disk) is returned; the files go all the same, or the next
    /// run would deliver the answer twice.
    pub fn delivered(&self, d: Delivery) -> Result<Option<WorkspaceError>, WorkspaceError> {
        let ended = Ended::Answered {
            answer: d.answer,
            here: false,
            late: d.late,
        };
        let failed = self
            .archive(d.question.as_ref(), d.asked_at.as_deref(), &ended)
            .err();
        workspace::remove(&self.ws.answer())?;
        if let Some(raw) = &d.question_raw
            && self.question_raw().as_ref() == Some(raw)
        {
            workspace::remove(&self.ws.question())?;
        }
        Ok(failed)
    }

    /// Reads `question.md` for a QUESTION signal; `Err` says why there is no question (the
    /// next iteration is told it was lost).
    pub fn read_question_file(&self) -> Result<Question, String> {
        match workspace::read_bounded(&self.ws.question(), MAX_QUESTION_BYTES) {
            Ok(Some(raw)) => {
                let mut question = Question::parse_bounded(&raw.bytes);
                if let Some(size) = raw.cut_from {
                    let note = format!(
                        "[question cut: the file is {size} bytes, showing the first {}]",
                        raw.bytes.len()
                    );
                    question.warning = Some(match question.warning.take() {
                        Some(w) => format!("{w}; {note}"),
                        None => note,
                    });
                }
                Ok(question)
            }
            Ok(None) => Err("the agent signalled QUESTION but wrote no .ralph/question.md; the next iteration is told its question was lost".into()),
            Err(e) => Err(format!("refused to read the question: {e}")),
        }
    }

    /// A `ralph ask` claim the loop has not shown yet, as a question to open (its id, when it
    /// asked, its question and how long it may wait). A claim whose asker is gone (`stale`)
    /// is removed. `seen` remembers the claims shown, so each is opened once: the claim stays
    /// until its asker has read the answer and exited.
    pub fn new_claim(
        &self,
        state: &State,
        seen: &mut HashSet<QuestionId>,
        stale: impl Fn(&AskClaim) -> bool,
        now: Now,
    ) -> Result<Option<NewClaim>, WorkspaceError> {
        let Some(claim) = AskClaim::read(&self.ws) else {
            return Ok(None);
        };
        if stale(&claim) {
            workspace::remove(&self.ws.ask_claim())?;
            return Ok(None);
        }
        let id = claim.question_id();
        if seen.contains(&id) || state.pending_question.as_ref().is_some_and(|p| p.id == id) {
            return Ok(None);
        }
        let raw = match claim.question.as_deref() {
            Some(q) => q.as_bytes().to_vec(),
            None => match self.question_raw() {
                Some(raw) => raw,
                None => return Ok(None),
            },
        };
        seen.insert(id.clone());
        let asked_at = parse_timestamp(&claim.asked_at).unwrap_or(now.wall);
        let wait = claim
            .deadline
            .as_deref()
            .and_then(parse_timestamp)
            .map(|d| d.duration_since(now.wall).unwrap_or_default());
        Ok(Some(NewClaim {
            id,
            asked_at,
            question: Question::parse_bounded(&raw),
            wait,
        }))
    }

    /// Whether the `ralph ask` that asked `id` is gone without its answer (`stale`); its claim,
    /// left behind, is removed.
    pub fn asker_gone(
        &self,
        id: &QuestionId,
        stale: impl Fn(&AskClaim) -> bool,
    ) -> Result<bool, WorkspaceError> {
        let gone = AskClaim::read(&self.ws).is_some_and(|c| &c.question_id() == id && stale(&c));
        if gone {
            workspace::remove(&self.ws.ask_claim())?;
        }
        Ok(gone)
    }

    /// Removes a claim whose asker is gone (`stale`).
    pub fn clear_stale_claim(
        &self,
        stale: impl Fn(&AskClaim) -> bool,
    ) -> Result<(), WorkspaceError> {
        if AskClaim::read(&self.ws).is_some_and(|c| stale(&c)) {
            workspace::remove(&self.ws.ask_claim())?;
        }
        Ok(())
    }

    /// Reads `answer.md`: the one place an answer is taken. An answer ralph did not write (its
    /// seal does not hold: the agent's own, or a hand-written file) is refused and removed,
    /// never taken ([`Found::forged`]). What is not a plain file is set right and said (the
    /// warning): a symlink (the agent can plant one) is removed unread, never followed; a
    /// directory is moved aside whole; a pipe or a device is removed. `ralph answer` needs the
    /// name free, and an error here would stop every run.
    pub fn read_answer(&self) -> Result<Found, WorkspaceError> {
        let msg = match answer::read(&self.ws) {
            Err(WorkspaceError::Symlink { path }) => {
                workspace::remove(&path)?;
                format!(
                    "{} was a symlink; ralph never reads or writes through links in .ralph/, so it removed the link unread",
                    path.display()
                )
            }
            Err(WorkspaceError::Io { path, error }) => {
                match std::fs::symlink_metadata(&path).map(|m| m.file_type()) {
                    Ok(kind) if kind.is_dir() => {
                        let aside = path.with_file_name(format!(
                            "answer.md.not-a-file-{}",
                            SystemTime::now()
                                .duration_since(SystemTime::UNIX_EPOCH)
                                .unwrap_or_default()
                                .as_millis()
                        ));
                        if let Err(error) = std::fs::rename(&path, &aside) {
                            return Err(WorkspaceError::Io { path, error });
                        }
                        format!(
                            "{} was a directory, not an answer; ralph moved it aside to {} so answers can reach the loop",
                            path.display(),
                            aside.display()
                        )
                    }
                    Ok(kind) if !kind.is_file() && !kind.is_symlink() => {
                        workspace::remove(&path)?;
                        format!(
                            "{} was a pipe or a device, not an answer; ralph removed it so answers can reach the loop",
                            path.display()
                        )
                    }
                    _ => return Err(WorkspaceError::Io { path, error }),
                }
            }
            Ok(Some(ans)) if !answer::is_genuine(&self.ws, &ans) => {
                let path = self.ws.answer();
                // Only that file; best effort (refused again at the next look).
                let _ = workspace::remove_if(&path, workspace::MAX_READ_BYTES, |now| {
                    Answer::parse(&String::from_utf8_lossy(now)).same_as(&ans)
                });
                return Ok(Found {
                    forged: Some(Forged { path, answer: ans }),
                    ..Found::default()
                });
            }
            read => {
                return Ok(Found {
                    answer: read?,
                    ..Found::default()
                });
            }
        };
        Ok(Found {
            warning: Some(msg),
            ..Found::default()
        })
    }

    fn question_raw(&self) -> Option<Vec<u8>> {
        workspace::read_bounded(&self.ws.question(), MAX_QUESTION_BYTES)
            .ok()
            .flatten()
            .map(|b| b.bytes)
    }

    fn unpause(&self, state: &mut State, id: &QuestionId) {
        if let Some(p) = state.pending_question.as_mut().filter(|p| &p.id == id) {
            p.paused = false;
        }
    }

    /// Appends what became of a question to `clarifications.md`.
    pub fn archive(
        &self,
        question: Option<&Question>,
        asked_at: Option<&str>,
        ended: &Ended,
    ) -> Result<(), WorkspaceError> {
        clarifications::record(
            &self.ws,
            &clarifications::Entry {
                question,
                asked_at,
                outcome: ended,
            },
        )
    }
}
