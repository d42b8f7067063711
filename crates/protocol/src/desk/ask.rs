//! The asker's side of the [`Desk`]: a `ralph ask` claims the one question slot, waits, and,
//! with no loop running, stands in for one.

use std::time::SystemTime;

use crate::question::Question;
use crate::state::{AskClaim, PendingQuestion, RaisedBy, State, Status};
use crate::workspace::{self, WorkspaceError, WorkspaceLock};

use super::life::{AskerStep, Desk};
use super::{Ended, QuestionId};

/// A question a `ralph ask` holds: its claim, and the workspace lock when no loop runs (then
/// the asker owns `state.json` until it ends).
#[derive(Debug)]
pub struct Claimed {
    /// The claim written in `ask.json`.
    pub claim: AskClaim,
    /// The question.
    pub question: Question,
    /// The workspace lock, when no loop was running.
    pub alone: Option<WorkspaceLock>,
    /// The state before this question (restored, with the question's fate, at the end).
    previous: Option<State>,
    pending: PendingQuestion,
    /// The deadline in force alone (moved by "more time" from `ralph serve`).
    deadline: Option<SystemTime>,
}

/// Why a question could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// Another question already waits (its first line, and the pid of a `ralph ask` holding it).
    #[error(
        "another question is already waiting in {root} (\"{first_line}\"{}); one question waits at a time: wait for its answer, then ask again",
        .pid.map(|p| format!(", pid {p}")).unwrap_or_default()
    )]
    Busy {
        /// The project root.
        root: String,
        /// The waiting question's first line.
        first_line: String,
        /// The `ralph ask` that asked it, if one did.
        pid: Option<u32>,
    },
    /// Other askers keep taking the claim.
    #[error("could not claim {path}: other `ralph ask` processes keep taking it; try again")]
    Contended {
        /// `ask.json`.
        path: String,
    },
    /// A file could not be read or written.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    /// `state.json` could not be read or written.
    #[error(transparent)]
    State(#[from] crate::state::StateError),
}

impl Desk {
    /// Asks `question` as the process `pid` (a `ralph ask`), with `deadline` (`None`: none):
    /// takes `ask.json` (refused while another live asker holds it, `stale` telling a dead
    /// one), writes `question.md`, and with no loop running takes the lock and records the
    /// question as waiting in `state.json`.
    pub fn claim(
        &self,
        question: Question,
        pid: u32,
        asked_at: SystemTime,
        deadline: Option<SystemTime>,
        stale: impl Fn(&AskClaim) -> bool,
    ) -> Result<Claimed, ClaimError> {
        let ws = self.workspace();
        let root = ws.root().display().to_string();
        let previous = State::load(ws).ok().flatten();
        // A question still waits, unless it is a lone asker's whose process is gone (nothing
        // holds the workspace: it was killed, and its question with it).
        if let Some(p) = previous.as_ref().and_then(|s| s.pending_question.as_ref())
            && !p.timed_out
            && ws.question().exists()
            && (p.raised_by != RaisedBy::Ask || ws.is_locked())
        {
            return Err(ClaimError::Busy {
                root,
                first_line: p.question.text.lines().next().unwrap_or("").to_string(),
                pid: None,
            });
        }
        let id = QuestionId::new();
        let pending = PendingQuestion::new(
            id.clone(),
            &question,
            asked_at,
            deadline,
            previous.as_ref().map_or(0, |s| s.iteration),
            RaisedBy::Ask,
        );
        let markdown = question.to_markdown();
        let claim = AskClaim {
            pid,
            asked_at: pending.asked_at.clone(),
            id: Some(id),
            deadline: pending.deadline.clone(),
            question: Some(markdown.clone()),
        };
        // The claim first, and only one: of two askers, the second is refused here, before it
        // has written anything another asker or the loop could take for its own.
        self.take_claim(&claim, &stale)?;
        let alone = if ws.is_locked() { None } else { ws.lock().ok() };
        let written = workspace::write_atomic(&ws.question(), markdown.as_bytes())
            .map_err(ClaimError::from)
            .and_then(|()| match &alone {
                Some(_) => {
                    let mut st = previous.clone().unwrap_or_else(|| no_run_yet(ws));
                    st.status = Status::WaitingInput;
                    st.pid = pid;
                    st.pending_question = Some(pending.clone());
                    st.save(ws).map_err(ClaimError::from)
                }
                None => Ok(()),
            });
        if let Err(e) = written {
            let _ = workspace::remove(&ws.ask_claim());
            return Err(e);
        }
        Ok(Claimed {
            claim,
            question,
            alone,
            previous,
            pending,
            deadline,
        })
    }

    fn take_claim(
        &self,
        claim: &AskClaim,
        stale: &impl Fn(&AskClaim) -> bool,
    ) -> Result<(), ClaimError> {
        let ws = self.workspace();
        for _ in 0..3 {
            if claim.create(ws)? {
                return Ok(());
            }
            let Some(raw) = workspace::read_bounded(&ws.ask_claim(), workspace::MAX_READ_BYTES)?
            else {
                continue;
            };
            let theirs: Option<AskClaim> = serde_json::from_slice(&raw.bytes).ok();
            if let Some(theirs) = theirs.filter(|c| !stale(c)) {
                let text = theirs
                    .question
                    .as_deref()
                    .map(|q| Question::parse_bounded(q.as_bytes()).text)
                    .unwrap_or_default();
                return Err(ClaimError::Busy {
                    root: ws.root().display().to_string(),
                    first_line: text.lines().next().unwrap_or("").to_string(),
                    pid: Some(theirs.pid),
                });
            }
            workspace::remove_if(&ws.ask_claim(), workspace::MAX_READ_BYTES, |now| {
                now == raw.bytes.as_slice()
            })?;
        }
        Err(ClaimError::Contended {
            path: ws.ask_claim().display().to_string(),
        })
    }

    /// Where a waiting asker stands at `now`: answered, skipped, timed out, or still waiting
    /// (until when). A loop, when one runs, owns the deadline (extensions, pauses) and removes
    /// the claim on a skip; alone, the asker keeps its own deadline and takes what `ralph
    /// serve`'s page and bot ask of it (skip, more time), as a loop would.
    pub fn asker_step(
        &self,
        claimed: &mut Claimed,
        now: SystemTime,
    ) -> Result<AskerStep, WorkspaceError> {
        let ws = self.workspace();
        let id = claimed.claim.question_id();
        let found = self.read_answer()?;
        if let Some(forged) = found.forged {
            return Ok(AskerStep::Refused(forged));
        }
        if let Some(ans) = found.answer
            && id.is_answered_by(&ans)
        {
            return Ok(AskerStep::Ended(Ended::answered(ans, false)));
        }
        let deadline = if claimed.alone.is_none() {
            if !ws.ask_claim().exists() {
                return Ok(AskerStep::Ended(Ended::Skipped));
            }
            match State::load(ws)
                .ok()
                .flatten()
                .and_then(|s| s.pending_question)
            {
                Some(p) if p.id == id && p.timed_out => {
                    return Ok(AskerStep::Ended(Ended::TimedOut));
                }
                Some(p) if p.id == id && p.paused => None,
                Some(p) if p.id == id => p.deadline_time(),
                _ => claimed.deadline,
            }
        } else {
            if let Some(r) = crate::broker::take_request(ws).filter(|r| r.question == id) {
                let Some(by) = r.extend_by() else {
                    return Ok(AskerStep::Ended(Ended::Skipped));
                };
                // More time: from now when the deadline passed or there was none.
                let from = claimed.deadline.filter(|d| *d > now).unwrap_or(now);
                claimed.deadline = Some(from + by);
                claimed.pending.deadline = claimed.deadline.map(crate::time::timestamp);
                let mut st = claimed.previous.clone().unwrap_or_else(|| no_run_yet(ws));
                st.status = Status::WaitingInput;
                st.pid = claimed.claim.pid;
                st.pending_question = Some(claimed.pending.clone());
                // Best effort: the deadline in force is the asker's own either way.
                let _ = st.save(ws);
            }
            claimed.deadline
        };
        Ok(match deadline {
            Some(d) if d <= now => AskerStep::Ended(Ended::TimedOut),
            d => AskerStep::Wait(d),
        })
    }

    /// Ends a lone asker's question: the claim goes, and with no loop running the asker cleans
    /// up as the loop would have (the record, the state, the files). An answer went straight
    /// to the agent; a question not answered stays open for a late answer, which the next
    /// `ralph run` delivers.
    pub fn unclaim(&self, claimed: Claimed, ended: &Ended) -> Result<(), ClaimError> {
        let ws = self.workspace();
        let _ = workspace::remove(&ws.ask_claim());
        let Claimed {
            question,
            alone,
            previous,
            mut pending,
            ..
        } = claimed;
        let Some(_lock) = alone else {
            return Ok(());
        };
        self.archive(Some(&question), Some(&pending.asked_at), ended)?;
        let mut st = previous.unwrap_or_else(|| no_run_yet(ws));
        if st.status == Status::WaitingInput {
            st.status = Status::Stopped;
        }
        if let Some(a) = ended.answer() {
            // The state says so before the file goes, or a `ralph answer` that still saw the
            // question waiting would find the file free and win a second time.
            let id = pending.id.clone();
            st.pending_question = Some(pending);
            st.close_question(&id, Some(a));
            st.save(ws)?;
            workspace::remove(&ws.answer())?;
            workspace::remove(&ws.question())?;
            return Ok(());
        }
        pending.timed_out = true;
        st.pending_question = Some(pending);
        st.save(ws)?;
        Ok(())
    }
}

impl Claimed {
    /// Whether no loop runs in the workspace: the asker stands in for one.
    pub fn is_alone(&self) -> bool {
        self.alone.is_some()
    }
}

/// The state of a workspace where no loop has run: `ralph ask` stands in for one while it
/// waits, and leaves it `stopped`, with the question's fate, when it ends.
fn no_run_yet(ws: &crate::workspace::Workspace) -> State {
    let mut st = State::fresh(ws, "ralph ask", 0);
    st.status = Status::Stopped;
    st
}
