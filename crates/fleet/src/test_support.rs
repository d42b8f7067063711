//! What the crate's tests share.

use std::path::Path;

use ralph_git::worktree::LoopInfo;
use ralph_protocol::LandMode;

use crate::fleet_file::{Fleet, Member};

/// The `worktree.json` of a loop in `worktree` on `branch`: started from the repository `/r` at
/// an all-zero base, to land on `main`, with no landing begun. Tests change what they need.
pub(crate) fn loop_info(worktree: &Path, branch: &str) -> LoopInfo {
    LoopInfo {
        repo: "/r".into(),
        worktree: worktree.to_path_buf(),
        branch: branch.into(),
        base: "0".repeat(40),
        target: Some("main".into()),
        land: None,
        reason: None,
        landed: None,
        attempts: 0,
        task_file: None,
    }
}

/// Fleet `abc` of `members`: one at a time, landing `auto`, capped at $2.50, its loops run
/// with `--no-sandbox`.
pub(crate) fn fleet(members: Vec<Member>) -> Fleet {
    Fleet {
        id: "abc".into(),
        jobs: 1,
        land: Some(LandMode::Auto),
        max_cost_usd: Some(2.5),
        pid: 1,
        members,
        run_args: vec!["--no-sandbox".into()],
    }
}
