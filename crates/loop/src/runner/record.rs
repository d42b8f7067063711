//! [`Record`]: what the runner keeps of the run on disk besides `state.json`'s contents: the
//! lock, the save in flight, `.ralph/logs/` names and upkeep, the task file's last parse, and
//! the run's entry in the registry.

use std::sync::Arc;

use ralph_protocol::{Registration, SpareFile, WorkspaceError, WorkspaceLock};
use tokio::task::JoinHandle;

use super::task_stamp::Stamp;
use crate::task::TaskFile;

/// The run's bookkeeping on disk (see the module docs).
#[derive(Debug)]
pub(super) struct Record {
    /// Shared with a save in flight, which keeps the workspace locked until it is written.
    pub(super) lock: Arc<WorkspaceLock>,
    /// The save of `state.json` still in flight, if any (see `save.rs`).
    pub(super) state_saving: Option<JoinHandle<Result<(), WorkspaceError>>>,
    /// This run's number in `.ralph/logs/` names (see [`logs`](crate::logs)).
    pub(super) log_run: u32,
    /// The iteration whose files `.ralph/logs/` names now, and which attempt at it (from 1).
    pub(super) log_attempt: (u32, u32),
    /// The next prompt file, being made while the agent runs (see [`SpareFile`]).
    pub(super) prompt_spare: Option<JoinHandle<Result<SpareFile, WorkspaceError>>>,
    /// The last parse of the task file, and the version of the file it came from.
    pub(super) task_seen: Option<(Stamp, TaskFile)>,
    /// When `.ralph/` was last swept of stale temporary files.
    pub(super) last_sweep: Option<std::time::Instant>,
    /// The run's entry in the registry (`ralph status --all`), removed when dropped.
    pub(super) _registration: Option<Registration>,
    /// What the loop shares with the machine's other loops: rate limits, a fleet's spend.
    pub(super) shared: super::shared::Shared,
}
