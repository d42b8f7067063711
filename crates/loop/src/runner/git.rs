//! The loop's two moments with git (all the work is in `ralph-git`): a checkpoint of the
//! work tree before the first iteration and after each, and, for a loop in a worktree, the
//! check that the agent left the user's own checkout alone.

use serde_json::json;

use ralph_protocol::{LoopEvent, Outcome};

use super::Runner;
use super::policy::Stop;

impl Runner {
    /// Checkpoints the work tree as it is after `iteration` (at the `start` of a run: before
    /// the first) and, in a worktree, checks the user's checkout. `Some(stop)` when the loop
    /// must stop.
    pub(super) async fn checkpoint_and_check(
        &mut self,
        iteration: u32,
        start: bool,
    ) -> Option<Stop> {
        let root = self.ws.root().to_path_buf();
        let dir = self.ws.dir().to_path_buf();
        let run = self.state.run_id.clone().unwrap_or_default();
        let previous = self.state.checkpoint.clone();
        let task = self.state.task.clone();
        let enabled = self.cfg.task.git.checkpoints;
        let (taken, touched) = tokio::task::spawn_blocking(move || {
            // Two repositories' worth of `lstat`s (the worktree's, the user's checkout's),
            // independent of each other: side by side.
            std::thread::scope(|scope| {
                let touched = scope.spawn(|| ralph_git::worktree::check_checkout(&dir, start));
                let taken = enabled.then(|| {
                    ralph_git::checkpoint::after_iteration(
                        &root,
                        &dir,
                        &run,
                        iteration,
                        previous.as_deref(),
                        &task,
                    )
                });
                (taken, touched.join().unwrap_or(None))
            })
        })
        .await
        .unwrap_or((None, None));
        match taken {
            Some(Ok(Some(cp))) => {
                self.log(
                    "checkpoint",
                    json!({"iteration": iteration, "ref": cp.reference, "commit": cp.commit, "files": cp.stat.files, "insertions": cp.stat.insertions, "deletions": cp.stat.deletions}),
                );
                self.state.checkpoint = Some(cp.commit);
            }
            Some(Err(e)) => {
                let msg = format!("could not checkpoint the work tree: {e}");
                self.emit(LoopEvent::Warning(msg.clone())).await;
                self.log("warning", json!({"message": msg}));
            }
            Some(Ok(None)) | None => {}
        }
        let touched = touched?;
        let reason = format!(
            "the user's checkout changed while the agent ran in its worktree: {touched}. The loop stopped so that nothing more happens there; look at the checkout, then `ralph run` in the worktree to go on"
        );
        self.emit(LoopEvent::Warning(reason.clone())).await;
        Some(Stop {
            outcome: Outcome::CheckoutTouched,
            reason,
        })
    }
}
