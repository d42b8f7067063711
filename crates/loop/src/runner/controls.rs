//! The controls channel: what front ends send the loop (answers, skips, Ctrl-C).
//!
//! Every wait of the runner (the agent running, a question open, the tests, a rate-limit
//! backoff, the stop of what the agent left) reads controls through [`Controls`], so what a
//! closed channel means (no front end any more: nothing more will come, the wait goes on) and
//! what "the human asked to stop" means are decided here once.

use tokio::sync::mpsc;

use ralph_protocol::event::Control;

/// The receiving end of the front ends' controls.
#[derive(Debug)]
pub(super) struct Controls {
    rx: mpsc::UnboundedReceiver<Control>,
    open: bool,
}

impl Controls {
    pub(super) fn new(rx: mpsc::UnboundedReceiver<Control>) -> Self {
        Self { rx, open: true }
    }

    /// The next control. Once every front end has gone, this never resolves: the loop goes on
    /// unattended, as it would with nobody at the terminal.
    pub(super) async fn next(&mut self) -> Control {
        if self.open {
            if let Some(c) = self.rx.recv().await {
                return c;
            }
            self.open = false;
        }
        std::future::pending().await
    }

    /// Resolves when the human asks the loop to stop (Ctrl-C, SIGTERM, SIGHUP): `Stop` or
    /// `Kill`. Other controls arrive while nothing is being asked, and are dropped.
    pub(super) async fn stop_requested(&mut self) {
        loop {
            if matches!(self.next().await, Control::Stop | Control::Kill) {
                return;
            }
        }
    }
}
