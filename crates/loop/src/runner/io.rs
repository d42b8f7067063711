//! [`Io`]: how the runner talks to the world while it runs: events out to the front end,
//! controls in from it, and wake-ups from the watch on `.ralph/`.

use ralph_process::DirWatch;
use ralph_protocol::LoopEvent;
use tokio::sync::mpsc;

use super::controls::Controls;

/// The runner's channels (see the module docs).
#[derive(Debug)]
pub(super) struct Io {
    /// Events for the front end; a front end that has gone away never stops the loop.
    pub(super) events: mpsc::Sender<LoopEvent>,
    /// Answers, skips and stops from the front ends.
    pub(super) controls: Controls,
    /// A wake-up for every change to the question files and the broker's requests.
    pub(super) fs_events: mpsc::UnboundedReceiver<()>,
    /// The watch that sends `fs_events`; it stops when dropped.
    pub(super) _watcher: DirWatch,
}
