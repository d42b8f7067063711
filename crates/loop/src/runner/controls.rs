//! The controls channel: what front ends send the loop (answers, skips, Ctrl-C).
//!
//! Every wait of the runner (the agent running, a question open, the tests, a rate-limit
//! backoff, the stop of what the agent left) reads controls through [`Controls`], so what a
//! closed channel means (no front end any more: nothing more will come, the wait goes on) and
//! what "the human asked to stop" means are decided here once.

use tokio::sync::mpsc;

use ralph_protocol::Control;

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

/// Watches `ws`'s `.ralph/` for a stop request from another process (`ralph stop`, the
/// broker: see [`ralph_protocol::request_stop`]) and turns each into the stop a first Ctrl-C sends,
/// with a note to the front end saying who asked. A request left from before this call is
/// dropped first: it was meant for a loop that has ended. Must be called in a Tokio runtime.
pub fn forward_stop_requests(
    ws: &ralph_protocol::Workspace,
    controls: mpsc::UnboundedSender<Control>,
    events: mpsc::Sender<ralph_protocol::LoopEvent>,
) -> std::io::Result<StopRequests> {
    use ralph_protocol::{STOP_FILE, StopBy, take_stop};
    let _ = take_stop(ws);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let watch = ralph_process::watch_async(ws.dir(), &[STOP_FILE], tx)?;
    let ws = ws.clone();
    let task = tokio::spawn(async move {
        while rx.recv().await.is_some() {
            let Some(by) = take_stop(&ws) else { continue };
            let who = by.map_or("another process", StopBy::as_str);
            let _ = ralph_protocol::log_event(
                &ws,
                "stop_requested",
                serde_json::json!({"by": by.map(StopBy::as_str)}),
            );
            let _ = events
                .send(ralph_protocol::LoopEvent::Note(format!(
                    "stopping, as asked by {who}: the agent is stopped and the state saved; `ralph run` resumes"
                )))
                .await;
            if controls.send(Control::Stop).is_err() {
                break;
            }
        }
    });
    Ok(StopRequests {
        _watch: watch,
        task: task.abort_handle(),
    })
}

/// The watch for stop requests; dropped, it ends, and lets go of the front end's events (a
/// front end that waits for its channel to close must not wait for it).
#[derive(Debug)]
pub struct StopRequests {
    _watch: ralph_process::DirWatch,
    task: tokio::task::AbortHandle,
}

impl Drop for StopRequests {
    fn drop(&mut self) {
        self.task.abort();
    }
}
