//! A loop in a worktree of its own: making it, what it records, and the watch on the user's
//! checkout.
//!
//! [`create`] makes `$XDG_DATA_HOME/ralph/worktrees/<repo>-<hash>/<slug>` (never a temporary
//! directory, never inside the repository) with `git worktree add -b ralph/<slug>` from the
//! checkout's `HEAD`, copies the ignored files `.worktreeinclude` names, runs
//! `worktree_setup`, and writes `.ralph/worktree.json` ([`LoopInfo`]), which this module owns:
//! where the loop came from (the repository, its base commit, the target branch) and, once it
//! is landed or not, how that went ([`LandState`]).
//!
//! [`check_checkout`] is called by the loop after every iteration: it compares the user's
//! checkout (HEAD, branch, index, status, stashes) with what it was when the iteration started,
//! and says what changed.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::git::{Git, GitError};

/// Where a loop stands once its agent is done with it, as `ralph status` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LandState {
    /// `ralph land` is at work.
    Landing,
    /// The work is on its target branch (or in a pull request).
    Landed,
    /// Tested and ready, but the target is checked out in the user's checkout and not clean:
    /// the one command in `reason` finishes it.
    NeedsLand,
    /// Conflicts or failing tests the agent could not fix in `land_attempts` tries.
    NeedsReview,
    /// Given up on by its human: its worktree may be removed.
    Discarded,
}

impl LandState {
    /// The name `ralph status` shows.
    pub fn as_str(self) -> &'static str {
        match self {
            LandState::Landing => "landing",
            LandState::Landed => "landed",
            LandState::NeedsLand => "needs-land",
            LandState::NeedsReview => "needs-review",
            LandState::Discarded => "discarded",
        }
    }
}

/// `.ralph/worktree.json` in a loop's worktree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoopInfo {
    /// The user's checkout the loop was started from.
    pub repo: PathBuf,
    /// The loop's worktree.
    pub worktree: PathBuf,
    /// The loop's branch, `ralph/<slug>`.
    pub branch: String,
    /// The commit the branch started from.
    pub base: String,
    /// The branch the work lands on: the one checked out when the loop started.
    pub target: Option<String>,
    /// Where landing stands, once it began.
    #[serde(default)]
    pub land: Option<LandState>,
    /// Why it stands there (the command that finishes a `needs-land`, what failed).
    #[serde(default)]
    pub reason: Option<String>,
    /// The target's commit after landing.
    #[serde(default)]
    pub landed: Option<String>,
    /// Landings that went back to the agent so far.
    #[serde(default)]
    pub attempts: u32,
    /// The task file, relative to the worktree.
    #[serde(default)]
    pub task_file: Option<PathBuf>,
}

impl LoopInfo {
    /// The file in the `.ralph/` directory `ralph_dir`.
    pub fn path(ralph_dir: &Path) -> PathBuf {
        ralph_dir.join("worktree.json")
    }

    /// The loop's record, if `ralph_dir` is a worktree loop's.
    pub fn load(ralph_dir: &Path) -> Option<LoopInfo> {
        let text = std::fs::read_to_string(LoopInfo::path(ralph_dir)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Writes the record atomically.
    pub fn save(&self, ralph_dir: &Path) -> Result<(), GitError> {
        let path = LoopInfo::path(ralph_dir);
        let json = serde_json::to_vec_pretty(self).expect("serializes");
        ralph_protocol::write_atomic(&path, &json).map_err(|e| GitError::Other(e.to_string()))
    }
}

/// The directory every worktree of the repository at `repo` goes in:
/// `<data>/worktrees/<repo name>-<hash of its path>`.
pub fn repo_dir(data: &Path, repo: &Path) -> PathBuf {
    let name = repo
        .file_name()
        .map(|n| slug(&n.to_string_lossy()))
        .unwrap_or_else(|| "repo".into());
    let mut h = DefaultHasher::new();
    repo.hash(&mut h);
    let hash = format!("{:016x}", h.finish());
    data.join("worktrees")
        .join(format!("{name}-{}", &hash[..8]))
}

/// A task's one-line summary as a branch and directory name: lowercase words joined by `-`,
/// at most 40 bytes.
pub fn slug(task: &str) -> String {
    let mut out = String::new();
    for word in task
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if out.len() + word.len() + 1 > 40 {
            break;
        }
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(&word.to_ascii_lowercase());
    }
    if out.is_empty() { "task".into() } else { out }
}

/// What [`create`] needs.
#[derive(Debug, Clone)]
pub struct NewWorktree<'a> {
    /// The user's checkout (any directory inside it).
    pub from: &'a Path,
    /// ralph's data directory (`$XDG_DATA_HOME/ralph`).
    pub data: &'a Path,
    /// The task's slug ([`slug`]).
    pub slug: &'a str,
    /// `worktree_setup`, run once in the new worktree.
    pub setup: Option<&'a str>,
    /// The task file, relative to the repository's top: copied into the worktree when it is
    /// not there as it is in the checkout.
    pub task_file: Option<&'a Path>,
    /// The branch to land on, when not the one checked out.
    pub onto: Option<&'a str>,
}

/// Makes a loop's worktree, or finds the one made before for the same task (a loop resumed).
pub fn create(new: &NewWorktree<'_>) -> Result<LoopInfo, GitError> {
    let repo = Git::toplevel(new.from).ok_or_else(|| {
        GitError::Other(format!(
            "{} is not in a git repository: --worktree needs one (git init, and a first commit)",
            new.from.display()
        ))
    })?;
    let git = Git::new(&repo);
    let dir = repo_dir(new.data, &repo).join(new.slug);
    let ralph_dir = dir.join(".ralph");
    if let Some(info) = LoopInfo::load(&ralph_dir) {
        return Ok(info);
    }
    let base = git.resolve("HEAD")?.ok_or_else(|| {
        GitError::Other("the repository has no commit yet: make one, then run again".into())
    })?;
    let target = match new.onto {
        Some(b) if git.resolve(&format!("refs/heads/{b}"))?.is_some() => Some(b.to_owned()),
        Some(b) => {
            return Err(GitError::Other(format!(
                "--onto {b}: there is no branch {b} in {}",
                repo.display()
            )));
        }
        None => git.try_run(["symbolic-ref", "-q", "--short", "HEAD"])?,
    };
    let branch = format!("ralph/{}", new.slug);
    if git.resolve(&format!("refs/heads/{branch}"))?.is_some() {
        return Err(GitError::Other(format!(
            "the branch {branch} exists already, from another loop on the same task; land or discard that one (`ralph worktree remove`), or change the task's first line"
        )));
    }
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).map_err(|e| GitError::io(parent, e))?;
    }
    let dir_s = dir.to_string_lossy().into_owned();
    git.run(["worktree", "add", "-b", &branch, &dir_s, &base])?;
    copy_included(&repo, &dir)?;
    if let Some(rel) = new.task_file {
        let (src, dst) = (repo.join(rel), dir.join(rel));
        if std::fs::read(&src).ok() != std::fs::read(&dst).ok() {
            if let Some(parent) = dst.parent() {
                std::fs::create_dir_all(parent).map_err(|e| GitError::io(parent, e))?;
            }
            std::fs::copy(&src, &dst).map_err(|e| GitError::io(&src, e))?;
        }
    }
    ralph_protocol::Workspace::new(&dir)
        .ensure()
        .map_err(|e| GitError::Other(e.to_string()))?;
    if let Some(cmd) = new.setup {
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .current_dir(&dir)
            .env("RALPH_ROOT_PATH", &repo)
            .env("RALPH_WORKTREE", &dir)
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE")
            .status()
            .map_err(|e| GitError::Other(format!("worktree_setup could not start: {e}")))?;
        if !status.success() {
            return Err(GitError::Other(format!(
                "worktree_setup `{cmd}` failed ({status}) in {}; fix it, then run again (the worktree is kept)",
                dir.display()
            )));
        }
    }
    let info = LoopInfo {
        repo,
        worktree: dir,
        branch,
        base,
        target,
        land: None,
        reason: None,
        landed: None,
        attempts: 0,
        task_file: new.task_file.map(Path::to_path_buf),
    };
    info.save(&ralph_dir)?;
    Ok(info)
}

/// Copies into `dir` the files the repository ignores that its `.worktreeinclude` names
/// (gitignore syntax; the format Claude Code reads).
fn copy_included(repo: &Path, dir: &Path) -> Result<(), GitError> {
    let list = repo.join(".worktreeinclude");
    if !list.is_file() {
        return Ok(());
    }
    let git = Git::new(repo);
    let ignored = git.run([
        "ls-files",
        "-z",
        "--others",
        "--ignored",
        "--exclude-standard",
    ])?;
    let from = format!("--exclude-from={}", list.display());
    let named = git.run(["ls-files", "-z", "--others", "--ignored", from.as_str()])?;
    let ignored: std::collections::HashSet<&str> = ignored.split('\0').collect();
    for rel in named
        .split('\0')
        .filter(|p| !p.is_empty() && ignored.contains(p))
    {
        let (src, dst) = (repo.join(rel), dir.join(rel));
        if let Some(parent) = dst.parent() {
            std::fs::create_dir_all(parent).map_err(|e| GitError::io(parent, e))?;
        }
        std::fs::copy(&src, &dst).map_err(|e| GitError::io(&src, e))?;
    }
    Ok(())
}

/// The user's checkout as the loop must leave it: HEAD, branch, index, status, stashes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    head: Option<String>,
    branch: Option<String>,
    index: u64,
    status: u64,
    stash: Option<String>,
}

impl Snapshot {
    /// The checkout at `repo` now. Reads only: `GIT_OPTIONAL_LOCKS=0` keeps `git status` from
    /// refreshing the index.
    pub fn take(repo: &Path) -> Result<Snapshot, GitError> {
        let git = Git::new(repo);
        let hash = |s: String| {
            let mut h = DefaultHasher::new();
            s.hash(&mut h);
            h.finish()
        };
        Ok(Snapshot {
            head: git.resolve("HEAD")?,
            branch: git.try_run(["symbolic-ref", "-q", "HEAD"])?,
            index: hash(git.run(["ls-files", "--stage", "-z"])?),
            status: hash(git.run(["status", "--porcelain=v1", "-z"])?),
            stash: git.resolve("refs/stash")?,
        })
    }

    /// What differs from `before`, in words.
    pub fn changes_since(&self, before: &Snapshot) -> Vec<&'static str> {
        let mut what = Vec::new();
        if self.head != before.head {
            what.push("HEAD moved");
        }
        if self.branch != before.branch {
            what.push("another branch is checked out");
        }
        if self.index != before.index {
            what.push("the index changed");
        }
        if self.status != before.status {
            what.push("files changed");
        }
        if self.stash != before.stash {
            what.push("the stash list changed");
        }
        what
    }
}

/// For a loop in a worktree (`ralph_dir` holds `worktree.json`): at the `start` of a run,
/// records the user's checkout; after an iteration, says what the iteration changed there, if
/// anything (and records it as it is now). `None` for a loop not in a worktree.
pub fn check_checkout(ralph_dir: &Path, start: bool) -> Option<String> {
    let info = LoopInfo::load(ralph_dir)?;
    let path = ralph_dir.join("checkout.json");
    let now = match Snapshot::take(&info.repo) {
        Ok(s) => s,
        Err(e) => return Some(format!("could not look at {}: {e}", info.repo.display())),
    };
    let before: Option<Snapshot> = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    let json = serde_json::to_vec(&now).expect("serializes");
    let _ = ralph_protocol::write_atomic(&path, &json);
    if start {
        return None;
    }
    let changed = now.changes_since(&before?);
    (!changed.is_empty()).then(|| format!("{} in {}", changed.join(", "), info.repo.display()))
}

/// Every loop's worktree of the repository at `repo` (its top), by task slug.
pub fn loops(data: &Path, repo: &Path) -> Vec<LoopInfo> {
    let Ok(entries) = std::fs::read_dir(repo_dir(data, repo)) else {
        return Vec::new();
    };
    let mut all: Vec<LoopInfo> = entries
        .flatten()
        .filter_map(|e| LoopInfo::load(&e.path().join(".ralph")))
        .collect();
    all.sort_by(|a, b| a.worktree.cmp(&b.worktree));
    all
}

/// Removes a loop's worktree (its branch stays), once [`unsaved`] found nothing: the task file
/// ralph copied in first, then `git worktree remove`, which itself refuses a worktree with
/// changes.
pub fn remove(info: &LoopInfo) -> Result<(), GitError> {
    if let Some(task) = &info.task_file
        && !in_base(info, task)?
    {
        let path = info.worktree.join(task);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(GitError::io(&path, e)),
        }
    }
    let dir = info.worktree.to_string_lossy().into_owned();
    Git::new(&info.repo).run(["worktree", "remove", &dir])?;
    Ok(())
}

/// Whether the loop's base commit has `path`.
fn in_base(info: &LoopInfo, path: &Path) -> Result<bool, GitError> {
    Ok(Git::new(&info.worktree)
        .try_run([
            "cat-file",
            "-e",
            &format!("{}:{}", info.base, path.display()),
        ])?
        .is_some())
}

/// Every loop's worktree on this machine (under `<data>/worktrees/`), of every repository.
pub fn all_loops(data: &Path) -> Vec<LoopInfo> {
    let Ok(repos) = std::fs::read_dir(data.join("worktrees")) else {
        return Vec::new();
    };
    let mut all: Vec<LoopInfo> = repos
        .flatten()
        .filter_map(|r| std::fs::read_dir(r.path()).ok())
        .flat_map(|loops| loops.flatten())
        .filter_map(|e| LoopInfo::load(&e.path().join(".ralph")))
        .collect();
    all.sort_by(|a, b| a.worktree.cmp(&b.worktree));
    all
}

/// The files of a loop's worktree that are in no ref: changed or untracked (not ignored)
/// files, against its branch (which holds its commits, and is kept).
pub fn unsaved(info: &LoopInfo) -> Result<Vec<String>, GitError> {
    let git = Git::new(&info.worktree);
    let out: Vec<String> = git
        .run(["status", "--porcelain=v1", "-z", "--untracked-files=all"])?
        .split('\0')
        .filter(|l| l.len() > 3)
        .map(|l| l[3..].to_owned())
        .collect();
    // The task file ralph copied in (the base did not have it) is ralph's: its last state is
    // in the run's checkpoints, and the original is in the user's checkout.
    let out = match &info.task_file {
        Some(task) if !in_base(info, task)? => out
            .into_iter()
            .filter(|p| Path::new(p) != task.as_path())
            .collect(),
        _ => out,
    };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slug_is_lowercase_words_joined_by_dashes_and_short() {
        assert_eq!(
            slug("Add a --json flag to `todo list`!"),
            "add-a-json-flag-to-todo-list"
        );
        assert_eq!(slug("???"), "task");
        assert!(slug(&"word ".repeat(40)).len() <= 40);
        assert_eq!(slug("Ünïcode straße"), "n-code-stra-e");
    }

    #[test]
    fn a_repository_s_worktrees_share_a_directory_named_for_it() {
        let a = repo_dir(Path::new("/data"), Path::new("/src/app"));
        let b = repo_dir(Path::new("/data"), Path::new("/other/app"));
        assert!(a.starts_with("/data/worktrees"));
        assert!(a.file_name().unwrap().to_string_lossy().starts_with("app-"));
        assert_ne!(a, b, "two repositories of the same name do not share");
    }
}
