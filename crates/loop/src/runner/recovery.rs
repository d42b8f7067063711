//! After ralph itself was killed outright (`kill -9`, the OOM killer) with the agent or the
//! tests running, and its guard with it (`pkill -9 ralph` hits both): what the next run finds
//! in `state.json` (the group that ran, the run's id) and stops before its first iteration,
//! and what it says about it.

use ralph_process::Guard;
use ralph_process::{
    Swept, group_is_ours, kill_group_now, lineage_groups, run_mark, stop_everywhere,
};

use ralph_protocol::LoopEvent;
use serde_json::json;

use super::Runner;
use super::processes::KilledRun;

impl Runner {
    /// After the last run was killed outright with a group running: stops every process still
    /// alive that carries that run's id (`RALPH_RUN`), wherever it is now, as its guard does
    /// ([`stop_everywhere`]); should the guard have been killed too (`pkill -9 ralph`
    /// hits both), nothing else would. The group itself was killed when this run started
    /// ([`reap_orphaned_agent`]); what its agent or tests started outside it (in a session of
    /// its own, as Claude Code's Bash tool starts every command) has init for its parent now.
    /// Never signals this process, its ancestors or their groups
    /// ([`lineage_groups`]), nor this run's guard: they carry the id too when this run
    /// was started from a process of that one. Reads every process's environment, once, and
    /// only after such a crash.
    pub(super) async fn stop_what_the_killed_run_left(&self, id: &str) -> Swept {
        let mut spare = lineage_groups();
        spare.extend(self.processes.guard.as_ref().map(Guard::group));
        let mark = run_mark(id);
        stop_everywhere(&mark, &spare, self.cfg.settings.kill_grace).await
    }

    /// Says what was stopped of the killed run: its group, when it was still running, and
    /// what its id found elsewhere (`swept`).
    pub(super) async fn report_killed_run(&self, killed: &KilledRun, swept: Option<Swept>) {
        if let Some(pgid) = killed.group {
            let msg = format!(
                "the last run was killed while its agent or tests ran (iteration {}); \
                 what was still running of them (process group {pgid}) was stopped",
                killed.iteration
            );
            self.emit(LoopEvent::Note(msg)).await;
            self.log(
                "orphan_group_stopped",
                json!({"iteration": killed.iteration, "pgid": pgid}),
            );
        }
        if let Some(swept) = swept {
            let whose = "the last run left running when it was killed";
            self.report_stopped(swept, killed.iteration, "last run", whose)
                .await;
        }
    }
}

/// After a crash of ralph itself, the agent it started may still be running: stop it, but only
/// if it really is ours (its environment names this `.ralph/`), since a pgid can be reused.
///
/// Any member of the group will do: the agent itself may have exited, leaving a background
/// process behind (see the regression test
/// `an_orphaned_grandchild_whose_agent_had_exited_survived_the_next_run`). Whether it stopped
/// one.
pub(super) fn reap_orphaned_agent(pgid: i32, dir: &std::path::Path) -> bool {
    let ours = group_is_ours(pgid, dir);
    if ours {
        kill_group_now(pgid);
    }
    ours
}
