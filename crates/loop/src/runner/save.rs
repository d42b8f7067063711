//! Saving `state.json` without making the agent wait for the disk.
//!
//! Every save is atomic and durable ([`State::save`](ralph_protocol::State::save)): written to a temporary file, synced,
//! renamed. A sync costs 0.5 ms or more on a real disk (several when others write), so the
//! loop's one save per ordinary iteration (the agent's process group, once it has started) is
//! made on a blocking thread while the agent runs. Order is kept by allowing one such save in
//! flight: any later save, in the background or not, first waits for it. So after a crash or
//! a power loss `state.json` is whole, never older than what it replaced, and at most one save
//! behind; the saves that must be durable before anything else happens (a question before it
//! is shown, the final status) wait for the disk.
//!
//! The save after an agent ends is made only when something follows that takes time (a
//! verification, a question, a back-off): see `AgentRun::leads_straight_on`.

use std::sync::Arc;

use ralph_protocol::{WorkspaceError, write_atomic};

use super::Runner;
use super::error::RunError;

impl Runner {
    /// Saves `state.json` durably now, after the save still in flight, if any.
    pub(super) async fn save_state(&mut self) -> Result<(), RunError> {
        self.settle_state().await?;
        self.state.save(&self.ws)?;
        Ok(())
    }

    /// Starts a durable save of `state.json` on a blocking thread and returns without waiting
    /// for the disk (only for the save before it, if that one is still in flight).
    pub(super) async fn save_state_soon(&mut self) -> Result<(), RunError> {
        self.settle_state().await?;
        let json = self.state.stamp_and_encode();
        let path = self.ws.state();
        // The workspace stays locked until the write is done, even if the runner is dropped
        // first (an error return): no other loop can write `state.json` under it.
        let lock = Arc::clone(&self.record.lock);
        self.record.state_saving = Some(tokio::task::spawn_blocking(move || {
            let written = write_atomic(&path, &json);
            drop(lock);
            written
        }));
        Ok(())
    }

    /// Waits for the save in flight, if any, and reports how it went.
    pub(super) async fn settle_state(&mut self) -> Result<(), RunError> {
        let Some(saving) = self.record.state_saving.take() else {
            return Ok(());
        };
        match saving.await {
            Ok(written) => Ok(written?),
            Err(e) => Err(RunError::Workspace(WorkspaceError::Io {
                path: self.ws.state(),
                error: std::io::Error::other(e),
            })),
        }
    }
}
