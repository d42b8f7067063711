//! `ralph fleet prune`: the worktrees and branches of landed and discarded loops, removed;
//! every other loop kept, with the reason.
//!
//! Nothing else is touched, and nothing repository-wide runs: each worktree goes by
//! [`ralph_git::worktree::remove`] (after [`ralph_git::worktree::unsaved`] found nothing, and
//! `git worktree remove` refuses changes itself); each branch is first saved under
//! `refs/ralph/pruned/<branch>` (so a discarded loop's commits stay reachable, and the branch
//! can be made again from there), then deleted by compare-and-swap
//! (`update-ref -d refs/heads/<branch> <its commit>`), which does nothing if it moved. The
//! loop's block of ports is given back.

use std::path::Path;

use ralph_git::Git;
use ralph_git::worktree::{self, LandState, LoopInfo};
use ralph_protocol::Workspace;

use crate::observe::{self, End, Phase};
use crate::ports;

/// What prune did with one loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Its worktree and branch are gone; the branch's last commit is kept under `saved_as`.
    Removed {
        /// The ref that keeps the branch's last commit.
        saved_as: String,
    },
    /// Kept, and why.
    Kept(String),
}

/// One loop and what prune did with it.
#[derive(Debug, Clone)]
pub struct Pruned {
    /// The loop.
    pub info: LoopInfo,
    /// What happened.
    pub verdict: Verdict,
}

/// Prunes the loops of the repository at `repo` (its top); `data` is ralph's data directory
/// and `state` its state directory (for the ports). `land_hint` says how to land a loop by
/// name, for the reasons of the ones kept.
pub fn prune(
    data: &Path,
    state: &Path,
    repo: &Path,
    land_hint: &dyn Fn(&LoopInfo) -> String,
) -> Vec<Pruned> {
    let ports_dir = ports::ports_dir(state);
    let out = worktree::loops(data, repo)
        .into_iter()
        .map(|info| {
            let verdict = match why_kept(&info, land_hint) {
                Some(reason) => Verdict::Kept(reason),
                None => match remove(&info) {
                    Ok(saved_as) => {
                        ports::release(&ports_dir, &info.worktree);
                        Verdict::Removed { saved_as }
                    }
                    Err(e) => Verdict::Kept(format!("could not be removed: {e}")),
                },
            };
            Pruned { info, verdict }
        })
        .collect();
    ports::release_orphans(&ports_dir);
    out
}

/// Why the loop stays, or `None` when it may go.
fn why_kept(info: &LoopInfo, land_hint: &dyn Fn(&LoopInfo) -> String) -> Option<String> {
    if Workspace::new(&info.worktree).is_locked() {
        return Some("running".into());
    }
    match info.land {
        Some(LandState::Landed | LandState::Discarded) => {}
        Some(LandState::Landing) => return Some("landing".into()),
        Some(LandState::NeedsLand) | Some(LandState::NeedsReview) => {
            let word = info.land.map(LandState::as_str).unwrap_or_default();
            return Some(match &info.reason {
                Some(r) => format!("{word}: {}", first_line(r)),
                None => word.to_owned(),
            });
        }
        None => {
            return Some(match observe::phase(&info.worktree, false) {
                Phase::Ended(End::Done) => format!("done, not landed: {}", land_hint(info)),
                Phase::Ended(end) => {
                    let mut s = format!("{}, not landed or discarded", end.word());
                    if let Some(r) = end.reason() {
                        s.push_str(&format!(" ({})", first_line(r)));
                    }
                    s
                }
                Phase::Running => "running".into(),
                Phase::Interrupted => "interrupted: running it again resumes it".into(),
                Phase::NotStarted => "not started".into(),
            });
        }
    }
    match worktree::unsaved(info) {
        Ok(files) if files.is_empty() => None,
        Ok(files) => Some(format!(
            "its worktree has changes in no commit: {}",
            files.join(", ")
        )),
        Err(e) => Some(format!("could not look at its worktree: {e}")),
    }
}

/// Removes the worktree, then the branch (saved first).
fn remove(info: &LoopInfo) -> Result<String, ralph_git::GitError> {
    worktree::remove(info)?;
    let git = Git::new(&info.repo);
    let branch_ref = format!("refs/heads/{}", info.branch);
    let saved_as = format!("refs/ralph/pruned/{}", info.branch);
    let Some(tip) = git.resolve(&branch_ref)? else {
        return Ok(saved_as);
    };
    git.run([
        "update-ref",
        "-m",
        "ralph fleet prune: the branch's last commit",
        &saved_as,
        &tip,
    ])?;
    git.run([
        "update-ref",
        "-m",
        "ralph fleet prune",
        "-d",
        &branch_ref,
        &tip,
    ])?;
    Ok(saved_as)
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}
