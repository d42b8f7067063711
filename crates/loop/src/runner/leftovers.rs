//! What an agent leaves running when its run ends, and how it is stopped: what is still in its
//! process group (it closed its output, or ignored SIGTERM), then what left the group (see
//! [`ralph_process::sweep`]). SIGTERM, the grace, SIGKILL; one Ctrl-C more cuts both graces
//! short.
//!
//! After most runs this is done at once, before anything else ([`Runner::stop_leftovers`]).
//! After a run whose next step is a question ([`policy::question_next`]), the question is shown
//! first and the stop runs beside it, as a task of its own, while the question's wait takes
//! every control as usual: a process that ignores SIGTERM (the grace) and the portable backend's
//! walk of the whole process table (done on the runtime's blocking threads, see
//! [`ralph_process::stop_and_sweep`]) would otherwise hold the question up. Either way it is over
//! before the next agent starts and before the run ends ([`Runner::settle_leftovers`]).
//!
//! [`policy::question_next`]: super::policy::question_next

use std::future::Future;
use std::time::Duration;

use ralph_process::{Cleared, Stopped, Swept, stop_and_sweep};
use ralph_protocol::LoopEvent;
use serde_json::json;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

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

impl Leftovers {
    /// Stops them; `hurry` resolves when the human asks to stop (the rest of the graces is
    /// skipped). What was stopped outside the group counts what was stopped while the agent ran.
    async fn stop(self, hurry: impl Future<Output = ()>) -> Cleared {
        let mut cleared = stop_and_sweep(self.pgid, &self.mark, self.grace, hurry).await;
        cleared.swept = self.early.and(cleared.swept);
        cleared
    }
}

/// [`Leftovers`] being stopped by a task of their own.
#[derive(Debug)]
pub(super) struct Stopping {
    /// Sent (or dropped) to cut the graces short.
    hurry: Option<oneshot::Sender<()>>,
    task: JoinHandle<Cleared>,
    /// What the task stops: stopped again here should the task panic.
    leftovers: Leftovers,
}

impl Stopping {
    /// Starts stopping `leftovers` in a task of their own, on the loop's runtime.
    fn start(leftovers: Leftovers) -> Stopping {
        let (hurry, hurry_rx) = oneshot::channel::<()>();
        // A runner that is gone (its end of `hurry` dropped) wants them gone now.
        let hurried = async {
            let _ = hurry_rx.await;
        };
        Stopping {
            hurry: Some(hurry),
            task: tokio::spawn(leftovers.clone().stop(hurried)),
            leftovers,
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

/// Resolves when the leftovers being stopped beside a question are stopped (`None`: the task
/// stopping them panicked); never while none are. A free function over the one field, so that
/// a `select!` can wait on it beside the runner's channels.
pub(super) async fn stopped(left: &mut Option<Left>) -> Option<Cleared> {
    match left {
        Some(Left::Stopping(s)) => (&mut s.task).await.ok(),
        _ => std::future::pending().await,
    }
}

impl Runner {
    /// Stops what the agent left, now; `true` when the human asked to stop meanwhile.
    pub(super) async fn stop_leftovers(&mut self, leftovers: Leftovers) -> bool {
        let iteration = leftovers.iteration;
        let cleared = leftovers.stop(self.io.controls.stop_requested()).await;
        let hurried = cleared.hurried;
        self.report_cleared(cleared, iteration).await;
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
            self.processes.left = Some(Left::Stopping(Stopping::start(leftovers)));
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

    /// What [`stopped`] said: the stop is over, and said; or its task panicked, and it is done
    /// again before the next agent starts.
    pub(super) async fn leftovers_stopped(&mut self, cleared: Option<Cleared>) {
        let Some(Left::Stopping(stopping)) = self.processes.left.take() else {
            return;
        };
        match cleared {
            Some(cleared) => {
                let iteration = stopping.leftovers.iteration;
                self.report_cleared(cleared, iteration).await;
            }
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
            cleared = &mut stopping.task => cleared,
            () = self.io.controls.stop_requested() => {
                hurried = true;
                if let Some(hurry) = stopping.hurry.take() {
                    let _ = hurry.send(());
                }
                (&mut stopping.task).await
            }
        };
        match cleared {
            Ok(cleared) => {
                let hurried = hurried || cleared.hurried;
                let iteration = stopping.leftovers.iteration;
                self.report_cleared(cleared, iteration).await;
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

    /// Says what stopping the leftovers of `iteration` stopped, when it stopped anything.
    async fn report_cleared(&self, cleared: Cleared, iteration: u32) {
        let Cleared {
            group: stopped,
            swept,
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
