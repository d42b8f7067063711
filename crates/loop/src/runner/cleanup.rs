//! Step 1 of every iteration: clear what a crash may have left.

use std::time::Duration;

use serde_json::json;

use super::Runner;
use super::error::RunError;
use crate::logs;

impl Runner {
    /// Step 1: clear what a crash may have left.
    pub(super) async fn cleanup_before_iteration(&mut self) -> Result<(), RunError> {
        // Only files older than ten minutes go, so looking once a minute removes the same ones
        // barely later, without listing `.ralph/` (and waking its watcher) every iteration.
        let sweep = self
            .record
            .last_sweep
            .is_none_or(|at| at.elapsed() >= Duration::from_secs(60));
        // `logs/` only once, before this run made any: a temporary file there is a prompt file
        // made ahead of time (`workspace::SpareFile`), and only a crashed run leaves one.
        let logs_too = self.record.last_sweep.is_none();
        if sweep && let Ok(entries) = std::fs::read_dir(self.ws.dir()) {
            self.record.last_sweep = Some(std::time::Instant::now());
            let pruned = logs::prune(
                &self.ws.logs(),
                self.record.log_run,
                self.state.iteration,
                self.cfg.settings.log_budget,
            );
            if pruned.files > 0 {
                self.log(
                    "logs_pruned",
                    json!({"files": pruned.files, "bytes": pruned.bytes}),
                );
            }
            let logs = logs_too
                .then(|| std::fs::read_dir(self.ws.logs()).ok())
                .flatten()
                .into_iter()
                .flatten();
            // A claim left by a `ralph ask` that is gone (killed with its agent). A file event
            // while an agent runs also clears it (`notice_ask`), but an agent may end before
            // one arrives.
            self.questions
                .desk
                .clear_stale_claim(crate::asks::claim_is_stale)?;
            for entry in entries.chain(logs).flatten() {
                // Only stale ones: a `ralph answer` may be writing its temporary file right now.
                let stale = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| t.elapsed().unwrap_or_default() > Duration::from_secs(600));
                if stale && entry.file_name().to_string_lossy().starts_with(".tmp-") {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        // Drain file-watch wake-ups that arrived while the agent ran; we look at the files now.
        while self.io.fs_events.try_recv().is_ok() {}
        Ok(())
    }
}
