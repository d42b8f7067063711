//! What an agent leaves running when its run ends, and how it is stopped: what is still in its
//! process group (it closed its output, or ignored SIGTERM), then what left the group (see
//! [`ralph_process::sweep`]). SIGTERM, the grace, SIGKILL; one Ctrl-C more cuts both graces
//! short.
//!
//! After most runs this is done at once, before anything else ([`Runner::stop_leftovers`]).
//! After a run whose next step is a question ([`policy::question_next`]), the question is shown
//! first and the stop runs beside it, on a thread of its own, while the question's wait takes
//! every control as usual: a process that ignores SIGTERM (the grace) and the portable backend's
//! walk of the whole process table would otherwise hold the question up. Either way it is over
//! before the next agent starts and before the run ends ([`Runner::settle_leftovers`]).
//!
//! [`policy::question_next`]: super::policy::question_next

use std::future::Future;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::FusedFuture;
use ralph_process::{Stopped, Swept, stop_group, sweep};
use ralph_protocol::LoopEvent;
use serde_json::json;
use tokio::sync::oneshot;

use super::Runner;

/// What an agent run left that is still to be stopped.
#[derive(Debug, Clone)]
pub(super) struct Leftovers {
    /// The agent's process group.
    pub(super) pgid: i32,
    /// The loop's mark, which everything the agent started carries ([`Runner::mark`]).
    pub(super) mark: Vec<u8>,
    /// Between SIGTERM and SIGKILL.
    pub(super) grace: Duration,
    /// What was already stopped outside the group while the agent ran.
    pub(super) early: Swept,
    /// The iteration whose agent left them.
    pub(super) iteration: u32,
}

/// How stopping [`Leftovers`] went.
#[derive(Debug)]
pub(super) struct Cleared {
    /// What was still in the agent's group.
    stopped: Stopped,
    /// What was stopped outside it, during the run and after.
    swept: Swept,
    /// Whether the human asked to stop meanwhile, cutting the graces short.
    pub(super) hurried: bool,
    iteration: u32,
}

impl Leftovers {
    /// Stops them; `hurry` resolves when the human asks to stop (the rest of the graces is
    /// skipped).
    async fn stop(self, hurry: impl Future<Output = ()>) -> Cleared {
        let hurry = hurry.fuse();
        tokio::pin!(hurry);
        let stopped = stop_group(self.pgid, self.grace, hurry.as_mut()).await;
        let grace = if hurry.is_terminated() {
            Duration::ZERO
        } else {
            self.grace
        };
        let swept = sweep(&self.mark, self.pgid, grace, hurry.as_mut()).await;
        Cleared {
            stopped,
            swept: self.early.and(swept),
            hurried: hurry.is_terminated(),
            iteration: self.iteration,
        }
    }
}

/// [`Leftovers`] being stopped on a thread of their own.
#[derive(Debug)]
pub(super) struct Stopping {
    /// Sent (or dropped) to cut the graces short.
    hurry: Option<oneshot::Sender<()>>,
    done: oneshot::Receiver<Cleared>,
    /// What the thread stops: stopped again here should the thread die without a word.
    leftovers: Leftovers,
}

impl Stopping {
    /// Starts stopping `leftovers` on a thread with a runtime of its own (the portable walk of
    /// the process table is blocking work, kept off the loop's threads); gives them back when
    /// neither can be made, to be stopped where the caller is.
    fn start(leftovers: Leftovers) -> Result<Stopping, Leftovers> {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
        else {
            return Err(leftovers);
        };
        let (hurry_tx, hurry_rx) = oneshot::channel::<()>();
        let (done_tx, done) = oneshot::channel();
        let theirs = leftovers.clone();
        let started = std::thread::Builder::new()
            .name("ralph-leftovers".into())
            .spawn(move || {
                // A runner that is gone (its end of `hurry` dropped) wants them gone now.
                let hurry = async {
                    let _ = hurry_rx.await;
                };
                let _ = done_tx.send(runtime.block_on(theirs.stop(hurry)));
            });
        match started {
            Ok(_) => Ok(Stopping {
                hurry: Some(hurry_tx),
                done,
                leftovers,
            }),
            Err(_) => Err(leftovers),
        }
    }
}

/// What the last agent run left, from its end until it is all stopped.
#[derive(Debug)]
pub(super) enum Left {
    /// Kept until the question that comes next is shown.
    Waiting(Leftovers),
    /// Being stopped beside the question.
    Stopping(Stopping),
}

/// Resolves when the leftovers being stopped beside a question are stopped (`None`: the thread
/// stopping them died); never while none are. A free function over the one field, so that a
/// `select!` can wait on it beside the runner's channels.
pub(super) async fn stopped(left: &mut Option<Left>) -> Option<Cleared> {
    match left {
        Some(Left::Stopping(s)) => (&mut s.done).await.ok(),
        _ => std::future::pending().await,
    }
}

impl Runner {
    /// Stops what the agent left, now; `true` when the human asked to stop meanwhile.
    pub(super) async fn stop_leftovers(&mut self, leftovers: Leftovers) -> bool {
        let cleared = leftovers.stop(self.io.controls.stop_requested()).await;
        let hurried = cleared.hurried;
        self.report_cleared(cleared).await;
        hurried
    }

    /// Keeps what the agent left to be stopped once the question that comes next is shown
    /// ([`Runner::start_stopping_leftovers`]).
    pub(super) fn stop_leftovers_beside_the_question(&mut self, leftovers: Leftovers) {
        self.processes.left = Some(Left::Waiting(leftovers));
    }

    /// The question is shown: what the agent left is stopped beside it from now on.
    pub(super) fn start_stopping_leftovers(&mut self) {
        if let Some(Left::Waiting(leftovers)) = self.processes.left.take() {
            self.processes.left = Some(match Stopping::start(leftovers) {
                Ok(stopping) => Left::Stopping(stopping),
                // No thread: stopped before the next agent starts, all the same.
                Err(leftovers) => Left::Waiting(leftovers),
            });
        }
    }

    /// The human asked to stop: what the agent left gets no more grace.
    pub(super) fn hurry_leftovers(&mut self) {
        match &mut self.processes.left {
            Some(Left::Stopping(stopping)) => {
                if let Some(hurry) = stopping.hurry.take() {
                    let _ = hurry.send(());
                }
            }
            Some(Left::Waiting(leftovers)) => leftovers.grace = Duration::ZERO,
            None => {}
        }
    }

    /// What [`stopped`] said: the stop is over, and said; or its thread died, and it is done
    /// again before the next agent starts.
    pub(super) async fn leftovers_stopped(&mut self, cleared: Option<Cleared>) {
        let Some(Left::Stopping(stopping)) = self.processes.left.take() else {
            return;
        };
        match cleared {
            Some(cleared) => self.report_cleared(cleared).await,
            None => self.processes.left = Some(Left::Waiting(stopping.leftovers)),
        }
    }

    /// Waits until what the agent left is stopped (stopping it now if that has not started),
    /// and says what was stopped; `true` when the human asked to stop meanwhile. Before the
    /// next agent starts, and before the run ends.
    pub(super) async fn settle_leftovers(&mut self) -> bool {
        let mut stopping = match self.processes.left.take() {
            None => return false,
            Some(Left::Waiting(leftovers)) => return self.stop_leftovers(leftovers).await,
            Some(Left::Stopping(stopping)) => stopping,
        };
        let mut hurried = false;
        let cleared = tokio::select! {
            cleared = &mut stopping.done => cleared,
            () = self.io.controls.stop_requested() => {
                hurried = true;
                if let Some(hurry) = stopping.hurry.take() {
                    let _ = hurry.send(());
                }
                (&mut stopping.done).await
            }
        };
        match cleared {
            Ok(cleared) => {
                let hurried = hurried || cleared.hurried;
                self.report_cleared(cleared).await;
                hurried
            }
            Err(_) => {
                let mut leftovers = stopping.leftovers;
                if hurried {
                    leftovers.grace = Duration::ZERO;
                }
                self.stop_leftovers(leftovers).await || hurried
            }
        }
    }

    /// Says what stopping the leftovers stopped, when it stopped anything.
    async fn report_cleared(&self, cleared: Cleared) {
        let Cleared {
            stopped,
            swept,
            iteration,
            ..
        } = cleared;
        if stopped != Stopped::AlreadyGone {
            let msg = format!("processes the agent left behind were stopped ({stopped:?})");
            self.emit(LoopEvent::Note(msg)).await;
            self.log(
                "leftovers_stopped",
                json!({"iteration": iteration, "how": format!("{stopped:?}")}),
            );
        }
        self.report_swept(swept, iteration, "agent").await;
    }
}
