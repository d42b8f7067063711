//! Where a fleet's loop stands, read from disk: its worktree's `.ralph/state.json` and
//! `worktree.json`, its workspace lock, and whether the `ralph run` the fleet started for it
//! is alive. The fleet never asks a loop anything: the files are the truth, which is what lets
//! a second `ralph fleet` pick up the loops of a first one that died.

use std::path::Path;

use ralph_git::worktree::{LandState, LoopInfo};
use ralph_protocol::{State, Status, Workspace};

/// A loop's phase, for scheduling and the summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Never started: no worktree, or one whose loop never ran.
    NotStarted,
    /// Its `ralph run` is alive (iterating, waiting for an answer, or landing).
    Running,
    /// Nobody runs it now, and it did not end: it crashed or its machine went down. Running it
    /// again resumes it.
    Interrupted,
    /// It ended.
    Ended(End),
}

/// How a loop ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// DONE verified, not landed (or not yet).
    Done,
    /// Landed on its target (or its pull request is open).
    Landed,
    /// Tested and ready; the target is checked out with changes: the reason says the command.
    NeedsLand(String),
    /// Landing failed more than its agent could fix.
    NeedsReview(String),
    /// Given up on by its human.
    Discarded,
    /// `max_iterations` ran out.
    Limit(String),
    /// Stopped by its human (`ralph stop`, `x` in the view).
    Stopped(String),
    /// GUTTER, too many failures, `max_cost_usd` or the fleet's cost cap, an error.
    Failed(String),
}

impl End {
    /// The one word the summary and the docs use.
    pub fn word(&self) -> &'static str {
        match self {
            End::Done => "done",
            End::Landed => "landed",
            End::NeedsLand(_) => "needs-land",
            End::NeedsReview(_) => "needs-review",
            End::Discarded => "discarded",
            End::Limit(_) => "out of iterations",
            End::Stopped(_) => "stopped",
            End::Failed(_) => "failed",
        }
    }

    /// Why, when there is more to say than the word.
    pub fn reason(&self) -> Option<&str> {
        match self {
            End::NeedsLand(r)
            | End::NeedsReview(r)
            | End::Limit(r)
            | End::Stopped(r)
            | End::Failed(r) => Some(r.as_str()).filter(|r| !r.is_empty()),
            _ => None,
        }
    }
}

/// Where the loop in `worktree` stands; `alive` says whether a `ralph run` the fleet started
/// for it is still running (the workspace lock is released while a loop lands, so the process
/// is the better witness then).
pub fn phase(worktree: &Path, alive: bool) -> Phase {
    let ws = Workspace::new(worktree);
    if alive || ws.is_locked() {
        return Phase::Running;
    }
    let info = LoopInfo::load(ws.dir());
    match info.as_ref().and_then(|i| i.land) {
        Some(LandState::Landed) => return Phase::Ended(End::Landed),
        Some(LandState::Discarded) => return Phase::Ended(End::Discarded),
        Some(LandState::NeedsLand) => {
            return Phase::Ended(End::NeedsLand(reason(info.as_ref())));
        }
        Some(LandState::NeedsReview) => {
            return Phase::Ended(End::NeedsReview(reason(info.as_ref())));
        }
        // A landing whose process is gone: the target is unchanged or landed (the
        // compare-and-swap is atomic), and `ralph land` finds out which.
        Some(LandState::Landing) | None => {}
    }
    let Some(state) = State::load(&ws).ok().flatten() else {
        return Phase::NotStarted;
    };
    let why = state.reason.clone().unwrap_or_default();
    match state.status {
        Status::Done => Phase::Ended(End::Done),
        Status::Running | Status::WaitingInput => Phase::Interrupted,
        Status::MaxIterations => Phase::Ended(End::Limit(why)),
        Status::Stopped => Phase::Ended(End::Stopped(why)),
        Status::Failed => Phase::Ended(End::Failed(why)),
    }
}

fn reason(info: Option<&LoopInfo>) -> String {
    info.and_then(|i| i.reason.clone()).unwrap_or_default()
}

/// Whether the process `pid` is alive (and not a zombie waiting to be reaped by someone else).
pub fn pid_alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    if nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None).is_err() {
        return false;
    }
    // A zombie still answers kill(0); its /proc stat says `Z`.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .is_none_or(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A loop's worktree whose `state.json` says `status` (and `reason`).
    fn worktree(status: &str, reason: Option<&str>) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".ralph")).unwrap();
        let state = serde_json::json!({
            "status": status, "iteration": 2, "max_iterations": 5, "pid": 1,
            "root": dir.path(), "task": "t", "agent": "fake",
            "started_at": "2026-11-28T00:00:00Z", "updated_at": "2026-11-28T00:00:00Z",
            "pending_question": null, "reason": reason,
        });
        std::fs::write(dir.path().join(".ralph/state.json"), state.to_string()).unwrap();
        dir
    }

    fn land(dir: &Path, state: LandState, reason: &str) {
        let mut info = crate::test_support::loop_info(dir, "ralph/t");
        info.set_land(&dir.join(".ralph"), state, Some(reason.into()))
            .unwrap();
    }

    #[test]
    fn a_loop_s_phase_comes_from_its_files() {
        let none = tempfile::tempdir().unwrap();
        assert_eq!(phase(none.path(), false), Phase::NotStarted);
        assert_eq!(phase(none.path(), true), Phase::Running);
        let done = worktree("done", None);
        assert_eq!(phase(done.path(), false), Phase::Ended(End::Done));
        // A `running` state nobody holds the lock of: its process died.
        let crashed = worktree("running", None);
        assert_eq!(phase(crashed.path(), false), Phase::Interrupted);
        let out = worktree("max_iterations", Some("5 iterations"));
        assert_eq!(
            phase(out.path(), false),
            Phase::Ended(End::Limit("5 iterations".into()))
        );
        let gutter = worktree("failed", Some("GUTTER"));
        assert_eq!(
            phase(gutter.path(), false),
            Phase::Ended(End::Failed("GUTTER".into()))
        );
        // Where its landing stands comes first.
        land(done.path(), LandState::Landed, "landed on main");
        assert_eq!(phase(done.path(), false), Phase::Ended(End::Landed));
        land(done.path(), LandState::NeedsReview, "tests failed\nmore");
        let end = phase(done.path(), false);
        assert_eq!(
            end,
            Phase::Ended(End::NeedsReview("tests failed\nmore".into()))
        );
        // A landing whose process is gone: as the state says, for `ralph land` to finish.
        land(done.path(), LandState::Landing, "");
        assert_eq!(phase(done.path(), false), Phase::Ended(End::Done));
    }

    /// Regression: a loop out of iterations was summed up as "limit: max_iterations (2)
    /// reached…", a word found nowhere in the docs, where the view says it failed.
    #[test]
    fn every_word_the_summary_uses_is_the_docs_word() {
        let docs = include_str!("../../../docs/fleet.md");
        let r = String::new;
        for end in [
            End::Done,
            End::Landed,
            End::NeedsLand(r()),
            End::NeedsReview(r()),
            End::Discarded,
            End::Limit(r()),
            End::Stopped(r()),
            End::Failed(r()),
        ] {
            assert!(docs.contains(end.word()), "{:?}: {}", end, end.word());
        }
    }

    #[test]
    fn this_process_is_alive_and_a_made_up_one_is_not() {
        assert!(pid_alive(std::process::id()));
        assert!(!pid_alive(u32::MAX));
    }
}
