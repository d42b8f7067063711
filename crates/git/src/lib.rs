//! ralph's git: checkpoints, undo, worktrees and landing, through the `git` CLI.
//!
//! # Theory of operation
//!
//! Everything here is a few git commands with an explicit argv, run by [`Git`] (which names
//! the repository with `-C`, turns prompts and signing off, and ignores `GIT_DIR` and friends
//! from ralph's own environment). Nothing uses a porcelain command that could run a hook or
//! change the user's index, `HEAD`, branches or stashes:
//!
//! - [`checkpoint`]: the work tree after each iteration, as a commit under
//!   `refs/ralph/<run>/<iteration>`, from a temporary index.
//! - [`undo`]: the work tree put back to a checkpoint, file by file, ignored files untouched.
//! - [`worktree`]: a loop's own worktree outside the repository, its record, and the check that
//!   the user's checkout is left alone.
//!
//! - [`land`]: a finished loop's branch onto its target, tested on the combined tree, the
//!   target moved by compare-and-swap after a backup ref.
//!
//! Refs move only by compare-and-swap ([`Git::compare_and_swap`]). Each item has one path: the
//! modules are the namespaces (`checkpoint::Checkpointer`, `worktree::LoopInfo`), and only
//! [`Git`] and [`GitError`] sit at the root.

#![forbid(unsafe_code)]

pub mod checkpoint;
mod git;
pub mod land;
pub mod undo;
pub mod worktree;

pub use git::{Git, GitError};
