//! What the crate's tests share.

use std::path::Path;

use ralph_git::worktree::LoopInfo;

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
