//! The process groups a run starts (the agent's, `test_command`'s): recorded for the next run
//! and the guard, marked as this loop's, and what the sweep stopped outside them reported.

use ralph_process::{RUN_VAR, Swept, mark_of, ralph_dir_value, run_id};

use ralph_protocol::LoopEvent;
use serde_json::json;

use super::Runner;

impl Runner {
    /// A group (the agent's, or `test_command`'s) was started: recorded in `state.json` for
    /// the next run, and told to the guard.
    pub(super) fn group_started(&mut self, pgid: i32) {
        self.state.agent_pgid = Some(pgid);
        if let Some(guard) = &mut self.processes.guard {
            guard.started(pgid, self.cfg.settings.kill_grace);
        }
    }

    /// The group started last is gone, or was stopped.
    pub(super) fn group_ended(&mut self) {
        if let (Some(pgid), Some(guard)) = (self.state.agent_pgid.take(), &mut self.processes.guard)
        {
            guard.ended(pgid);
        }
    }

    /// This loop's mark (`RALPH_DIR=...`), as it stands in the environment of every agent and
    /// test command it starts, and of all they start.
    pub(super) fn mark(&self) -> Vec<u8> {
        mark_of(self.ws.dir())
    }

    /// Tells what a [`ralph_process::sweep`] after the `what` (agent or tests) of `iteration` did,
    /// when it stopped anything.
    pub(super) async fn report_swept(&self, swept: Swept, iteration: u32, what: &str) {
        // After every agent run and test run: nothing to say, nothing to format.
        if swept.how.is_none() {
            return;
        }
        let whose = format!("the {what} started outside its process group");
        self.report_stopped(swept, iteration, what, &whose).await;
    }

    /// Tells what `swept` stopped, when it stopped anything: "N processes `whose` were
    /// stopped", and `escapees_stopped` in `events.jsonl`, `from` the agent or the tests of
    /// `iteration` (or the last run).
    pub(super) async fn report_stopped(
        &self,
        swept: Swept,
        iteration: u32,
        from: &str,
        whose: &str,
    ) {
        let Some(how) = swept.how else {
            return;
        };
        let n = swept.stopped.len();
        let msg = format!(
            "{n} process{} {whose} {} stopped ({how:?})",
            if n == 1 { "" } else { "es" },
            if n == 1 { "was" } else { "were" },
        );
        self.emit(LoopEvent::Note(msg)).await;
        self.log(
            "escapees_stopped",
            json!({"iteration": iteration, "from": from, "count": n, "pids": swept.stopped, "how": format!("{how:?}"), "reaped": swept.reaped}),
        );
    }
}

/// What marks every agent and test command, and all they start, as this loop's
/// (`RALPH_DIR`: the next run's check, the sweep) and this run's (`RALPH_RUN`: the guard).
pub(super) fn marks(dir: &std::path::Path) -> [(&'static str, String); 2] {
    [
        ("RALPH_DIR", ralph_dir_value(dir)),
        (RUN_VAR, run_id().to_string()),
    ]
}
