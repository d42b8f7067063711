//! Checkpoints: the work tree's state after each iteration, as a commit under a hidden ref.
//!
//! A checkpoint is made with plumbing only, against an index of ralph's own
//! (`.ralph/checkpoint.index`, which git ignores with the rest of `.ralph/`):
//!
//! 1. the first time, that index is a copy of the checkout's own index (or `HEAD`'s tree read
//!    into it), so the files git has already hashed keep their cached stat data;
//! 2. `git add -A` brings it to the work tree: tracked and untracked files git does not ignore.
//!    Only files whose stat data changed since the last checkpoint are read and hashed again;
//! 3. `write-tree`, then `commit-tree` with the previous checkpoint (or `HEAD`) as parent;
//! 4. `update-ref refs/ralph/<run>/<iteration> COMMIT 0000…`: created, never moved.
//!
//! None of these runs a hook, signs, or touches the user's index, `HEAD`, branches or stashes.

use std::path::{Path, PathBuf};

use crate::git::{Git, GitError};

/// Where a run's checkpoints live: `refs/ralph/<run>/`.
pub fn run_prefix(run: &str) -> String {
    format!("refs/ralph/{run}/")
}

/// How much one checkpoint changed against the one before.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DiffStat {
    /// Files added, changed or deleted.
    pub files: usize,
    /// Lines added.
    pub insertions: u64,
    /// Lines deleted.
    pub deletions: u64,
}

impl std::fmt::Display for DiffStat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "+{} -{}", self.insertions, self.deletions)
    }
}

/// One checkpoint made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// Its ref, `refs/ralph/<run>/<label>`.
    pub reference: String,
    /// The commit.
    pub commit: String,
    /// What it changed against its parent.
    pub stat: DiffStat,
}

/// Makes checkpoints of one work tree.
#[derive(Debug, Clone)]
pub struct Checkpointer {
    git: Git,
    index: PathBuf,
}

impl Checkpointer {
    /// Checkpoints of the work tree at `root`, with ralph's index kept at `index` (a file in
    /// `.ralph/`). `None` when `root` is not the top of a git work tree.
    pub fn new(root: &Path, index: PathBuf) -> Option<Checkpointer> {
        // Most projects that are not repositories are told apart without starting git (each
        // iteration asks): no `.git` here or above.
        if !root.ancestors().any(|d| d.join(".git").exists()) {
            return None;
        }
        let top = Git::toplevel(root)?;
        let same = std::fs::canonicalize(&top).ok()? == std::fs::canonicalize(root).ok()?;
        // A project inside a bigger repository (a subdirectory) would checkpoint the whole
        // repository's tree; take only a project that is a work tree of its own.
        same.then(|| Checkpointer {
            git: Git::new(root),
            index,
        })
    }

    /// The repository.
    pub fn git(&self) -> &Git {
        &self.git
    }

    /// Checkpoints the work tree as `refs/ralph/<run>/<label>`, its parent `parent` (a
    /// commit), or else `HEAD`, or else none.
    pub fn take(
        &self,
        run: &str,
        label: &str,
        parent: Option<&str>,
        message: &str,
    ) -> Result<Checkpoint, GitError> {
        let tree = self.tree()?;
        let parent = match parent {
            Some(p) => Some(p.to_owned()),
            None => self.git.resolve("HEAD")?,
        };
        let mut args = vec!["commit-tree".to_owned(), tree];
        if let Some(p) = &parent {
            args.extend(["-p".to_owned(), p.clone()]);
        }
        args.extend(["-m".to_owned(), message.to_owned()]);
        let commit = self.git.with_identity().run(&args)?;
        let reference = format!("{}{label}", run_prefix(run));
        if !self
            .git
            .compare_and_swap(&reference, &commit, None, "ralph: checkpoint")?
        {
            return Err(GitError::Other(format!(
                "{reference} already exists: a checkpoint is never overwritten"
            )));
        }
        let stat = match &parent {
            Some(p) => diff_stat(&self.git, p, &commit)?,
            None => diff_stat(&self.git, EMPTY_TREE, &commit)?,
        };
        Ok(Checkpoint {
            reference,
            commit,
            stat,
        })
    }

    /// The work tree's tree: ralph's index brought up to date, then written.
    fn tree(&self) -> Result<String, GitError> {
        let git = self.git.with_index(&self.index);
        if !self.index.exists() {
            self.seed()?;
        }
        // The untracked cache (kept in ralph's index) spares reading every directory that
        // did not change since the last checkpoint; no checksum of the index is computed,
        // since only ralph reads it.
        git.run([
            "-c",
            "core.untrackedCache=true",
            "-c",
            "index.skipHash=true",
            "add",
            "-A",
            "--",
            ".",
        ])?;
        git.run(["write-tree"])
    }

    /// Starts ralph's index as a copy of the checkout's, whose stat data spares hashing every
    /// file again; else as `HEAD`'s tree.
    fn seed(&self) -> Result<(), GitError> {
        if let Some(dir) = self.index.parent() {
            std::fs::create_dir_all(dir).map_err(|e| GitError::io(dir, e))?;
        }
        let theirs = self.git.git_path("index")?;
        let tmp = self.index.with_extension("seed");
        if std::fs::copy(&theirs, &tmp).is_ok() {
            return std::fs::rename(&tmp, &self.index).map_err(|e| GitError::io(&self.index, e));
        }
        if self.git.resolve("HEAD")?.is_some() {
            self.git
                .with_index(&self.index)
                .run(["read-tree", "HEAD"])?;
        }
        Ok(())
    }
}

/// git's empty tree, the parent of a first checkpoint in a repository with no commit.
pub const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

/// Lines added and deleted between two commits (or trees).
pub fn diff_stat(git: &Git, from: &str, to: &str) -> Result<DiffStat, GitError> {
    let out = git.run(["diff-tree", "-r", "--numstat", "--no-renames", from, to])?;
    Ok(numstat(&out))
}

/// What `git diff --numstat` printed, summed.
pub(crate) fn numstat(out: &str) -> DiffStat {
    let mut stat = DiffStat::default();
    for line in out.lines() {
        let mut cols = line.splitn(3, '\t');
        let (Some(add), Some(del)) = (cols.next(), cols.next()) else {
            continue;
        };
        stat.files += 1;
        // Binary files show `-`: a file changed, no lines counted.
        stat.insertions += add.parse::<u64>().unwrap_or(0);
        stat.deletions += del.parse::<u64>().unwrap_or(0);
    }
    stat
}

/// One checkpoint of a run, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The label after `refs/ralph/<run>/`: an iteration number, or `before-undo-…`.
    pub label: String,
    /// The commit.
    pub commit: String,
}

impl Listed {
    /// The iteration, when the label is one.
    pub fn iteration(&self) -> Option<u32> {
        let number = self
            .label
            .split_once('.')
            .map_or(self.label.as_str(), |(n, _)| n);
        number.parse().ok()
    }
}

/// Every checkpoint of run `run`, iterations first in order, then the others by name.
pub fn list(git: &Git, run: &str) -> Result<Vec<Listed>, GitError> {
    let prefix = run_prefix(run);
    let out = git.run([
        "for-each-ref",
        "--format=%(objectname) %(refname)",
        prefix.as_str(),
    ])?;
    let mut all: Vec<Listed> = out
        .lines()
        .filter_map(|l| {
            let (commit, name) = l.split_once(' ')?;
            Some(Listed {
                label: name.strip_prefix(&prefix)?.to_owned(),
                commit: commit.to_owned(),
            })
        })
        .collect();
    all.sort_by_key(|c| (c.iteration().is_none(), c.iteration(), c.label.clone()));
    Ok(all)
}

/// The checkpoint after `iteration` of run `run` in the work tree at `root`, whose `.ralph/`
/// is `ralph_dir`: `refs/ralph/<run>/<iteration>` (`<iteration>.2`, ... when that iteration
/// ran again after a rate limit), its parent `previous` or `HEAD`. `Ok(None)` when `root` is
/// not a git work tree.
pub fn after_iteration(
    root: &Path,
    ralph_dir: &Path,
    run: &str,
    iteration: u32,
    previous: Option<&str>,
    task: &str,
) -> Result<Option<Checkpoint>, GitError> {
    let Some(cp) = Checkpointer::new(root, ralph_dir.join("checkpoint.index")) else {
        return Ok(None);
    };
    let what = if iteration == 0 {
        "before the first iteration".to_owned()
    } else {
        format!("after iteration {iteration}")
    };
    let message = format!("ralph checkpoint {what}\n\nTask: {task}\nRun: {run}\n");
    let label = iteration.to_string();
    // The usual case in one try. A failure means the ref is there already (the iteration ran
    // again after a rate limit) or the parent is gone: see which, below, at the cost of the
    // git commands the usual case saves.
    if let Ok(taken) = cp.take(run, &label, previous, &message) {
        return Ok(Some(taken));
    }
    let taken: Vec<String> = list(cp.git(), run)?.into_iter().map(|l| l.label).collect();
    let mut label = label;
    let mut again = 1;
    while taken.contains(&label) {
        again += 1;
        label = format!("{iteration}.{again}");
    }
    // A parent git no longer has (a pruned run) gives way to HEAD.
    let previous = match previous {
        Some(p) if cp.git().resolve(p)?.is_some() => Some(p),
        _ => None,
    };
    cp.take(run, &label, previous, &message).map(Some)
}
