//! Checkpoints: the work tree's state after each iteration, as a commit under a hidden ref.
//!
//! A checkpoint is made with plumbing only, against an index of ralph's own
//! (`.ralph/checkpoint.index`, which git ignores with the rest of `.ralph/`):
//!
//! 1. the first time, that index is a copy of the checkout's own index (or `HEAD`'s tree read
//!    into it), so the files git has already hashed keep their cached stat data;
//! 2. `git status` lists what differs from it in the work tree: tracked files changed or
//!    deleted, untracked files git does not ignore. Only files whose stat data changed since
//!    the last checkpoint are read and hashed, and only directories whose mtime changed are
//!    read (the untracked cache, kept in ralph's index); `update-index` then brings just those
//!    paths into the index;
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
        // A `.git` right here (a directory, or the file of a worktree) makes `root` the top of
        // its work tree: no git process needed to say so.
        if root.join(".git").exists() {
            return Some(Checkpointer {
                git: Git::new(root),
                index,
            });
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
        // The diff stat needs only the two trees: it runs while the commit and its ref are
        // made, which on a busy machine costs one wait for the CPU instead of two.
        let from = parent.as_deref().unwrap_or(EMPTY_TREE);
        let numstat = self
            .git
            .command(numstat_args(from, &tree))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|source| GitError::Spawn { source })?;
        let reference = format!("{}{label}", run_prefix(run));
        let made = self.commit(&tree, parent.as_deref(), message, &reference);
        let out = numstat
            .wait_with_output()
            .map_err(|source| GitError::Spawn { source })?;
        let commit = made?;
        if !out.status.success() {
            let args: Vec<std::ffi::OsString> =
                numstat_args(from, &tree).iter().map(Into::into).collect();
            return Err(self.git.failed(&args, &out));
        }
        let stat = parse_numstat(&String::from_utf8_lossy(&out.stdout));
        Ok(Checkpoint {
            reference,
            commit,
            stat,
        })
    }

    /// Commits `tree` (its parent `parent`) and creates `reference` for it, never moving an
    /// existing one.
    fn commit(
        &self,
        tree: &str,
        parent: Option<&str>,
        message: &str,
        reference: &str,
    ) -> Result<String, GitError> {
        let mut args = vec!["commit-tree", tree];
        if let Some(p) = parent {
            args.extend(["-p", p]);
        }
        args.extend(["-m", message]);
        let commit = self.git.with_identity().run(&args)?;
        if !self
            .git
            .compare_and_swap(reference, &commit, None, "ralph: checkpoint")?
        {
            return Err(GitError::Other(format!(
                "{reference} already exists: a checkpoint is never overwritten"
            )));
        }
        Ok(commit)
    }

    /// The work tree's tree: ralph's index brought up to date, then written.
    fn tree(&self) -> Result<String, GitError> {
        let git = self.own_index();
        if !self.index.exists() {
            self.seed()?;
        }
        let changed = self.changed_paths(&git)?;
        if !changed.is_empty() {
            self.stage(&git, &changed)?;
        }
        git.run(["write-tree"])
    }

    /// Commands on ralph's own index, with what makes them fast there: the untracked cache
    /// (directories whose mtime did not change are not read again), no checksum of the index
    /// (only ralph reads it), and the index written back with what `status` learnt (the stat
    /// data of files it found unchanged, the untracked cache), which `GIT_OPTIONAL_LOCKS=0`
    /// would forbid. None of it applies to the user's index.
    fn own_index(&self) -> Git {
        self.git
            .with_index(&self.index)
            .with_env("GIT_OPTIONAL_LOCKS", "1")
    }

    /// The paths whose work tree differs from ralph's index: changed, deleted, in conflict,
    /// or untracked and not ignored. One `git status`, which reads only the directories that
    /// changed and hashes only files whose stat data changed.
    fn changed_paths(&self, git: &Git) -> Result<Vec<Vec<u8>>, GitError> {
        let out = git.output([
            "-c",
            "core.untrackedCache=true",
            "-c",
            "index.skipHash=true",
            // The cache is kept for one way of listing untracked files: `-uall`'s.
            "-c",
            "status.showUntrackedFiles=all",
            "-c",
            "status.renames=false",
            "status",
            "--porcelain=v2",
            "-z",
            "--untracked-files=all",
            "--no-renames",
            "--ignore-submodules=dirty",
        ])?;
        if !out.status.success() {
            return Err(self.git.failed(&["status".into()], &out));
        }
        Ok(worktree_changes(&out.stdout))
    }

    /// Brings `paths` in ralph's index to the work tree: added or hashed again if they exist,
    /// removed if not, a file replacing a directory (or the reverse) allowed.
    fn stage(&self, git: &Git, paths: &[Vec<u8>]) -> Result<(), GitError> {
        let args = [
            "-c",
            "index.skipHash=true",
            "update-index",
            "--add",
            "--remove",
            "--replace",
            "-z",
            "--stdin",
        ];
        let mut input = Vec::new();
        for p in paths {
            input.extend_from_slice(p);
            input.push(0);
        }
        git.run_fed(&args, &input)
    }

    /// Starts ralph's index as a copy of the checkout's, whose stat data spares hashing every
    /// file again; else as `HEAD`'s tree.
    fn seed(&self) -> Result<(), GitError> {
        if let Some(dir) = self.index.parent() {
            std::fs::create_dir_all(dir).map_err(|e| GitError::io(dir, e))?;
        }
        let theirs = self.git.git_path("index")?;
        let tmp = self.index.with_extension("seed");
        if crate::git::copy_index(&theirs, &tmp).is_ok() {
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

/// The paths `git status --porcelain=v2 -z` reports as different in the work tree from the
/// index (ordinary entries whose work-tree column is not `.`, unmerged entries, untracked
/// files); what differs only between `HEAD` and the index is ralph's index already.
fn worktree_changes(status: &[u8]) -> Vec<Vec<u8>> {
    let mut paths = Vec::new();
    for record in status.split(|&b| b == 0).filter(|r| !r.is_empty()) {
        // The fields before the path: `1 XY sub mH mI mW hH hI path`,
        // `u XY sub m1 m2 m3 mW h1 h2 h3 path`, `? path`.
        let (fields, wanted) = match record[0] {
            b'1' => (8, record.get(3).is_some_and(|&y| y != b'.')),
            b'u' => (10, true),
            b'?' => (1, true),
            _ => continue,
        };
        if !wanted {
            continue;
        }
        if let Some(path) = record.splitn(fields + 1, |&b| b == b' ').nth(fields) {
            paths.push(path.to_vec());
        }
    }
    paths
}

/// git's empty tree, the parent of a first checkpoint in a repository with no commit.
pub const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

/// Lines added and deleted between two commits (or trees).
pub fn diff_stat(git: &Git, from: &str, to: &str) -> Result<DiffStat, GitError> {
    Ok(parse_numstat(&git.run(numstat_args(from, to))?))
}

fn numstat_args<'a>(from: &'a str, to: &'a str) -> [&'a str; 6] {
    ["diff-tree", "-r", "--numstat", "--no-renames", from, to]
}

/// What `git diff-tree --numstat` printed, summed.
pub(crate) fn parse_numstat(out: &str) -> DiffStat {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) -> String {
        Git::new(dir)
            .run(
                ["-c", "user.name=t", "-c", "user.email=t@localhost"]
                    .iter()
                    .chain(args),
            )
            .unwrap()
    }

    /// The tree `git add -A` gives in a fresh index: what a checkpoint must hold.
    fn reference_tree(dir: &Path) -> String {
        let tmp = tempfile::tempdir().unwrap();
        let g = Git::new(dir).with_index(&tmp.path().join("index"));
        g.run(["read-tree", "HEAD"]).unwrap();
        g.run(["add", "-A", "--", "."]).unwrap();
        g.run(["write-tree"]).unwrap()
    }

    fn tree_of(dir: &Path, commit: &str) -> String {
        git(dir, &["rev-parse", &format!("{commit}^{{tree}}")])
    }

    #[test]
    fn each_checkpoint_holds_what_add_all_would_changes_deletions_new_files_and_type_changes() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        git(dir, &["init", "-q", "-b", "main"]);
        std::fs::create_dir_all(dir.join("src/deep")).unwrap();
        for (p, text) in [
            ("a.txt", "a\n"),
            ("gone.txt", "bye\n"),
            ("src/deep/b.txt", "b\n"),
            ("becomes-dir", "file\n"),
            (".gitignore", ".ralph/\n*.log\n"),
        ] {
            std::fs::write(dir.join(p), text).unwrap();
        }
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-q", "-m", "base"]);
        let ralph = dir.join(".ralph");
        let cp = |it: u32, previous: Option<&str>| {
            after_iteration(dir, &ralph, "r", it, previous, "t")
                .unwrap()
                .unwrap()
        };
        let first = cp(0, None);
        assert_eq!(tree_of(dir, &first.commit), reference_tree(dir));
        assert_eq!(first.stat.files, 0);

        std::fs::write(dir.join("a.txt"), "a\nmore\n").unwrap();
        std::fs::remove_file(dir.join("gone.txt")).unwrap();
        std::fs::write(dir.join("src/deep/new file.txt"), "new\n").unwrap();
        std::fs::create_dir_all(dir.join("fresh/dir")).unwrap();
        std::fs::write(dir.join("fresh/dir/c.txt"), "c\n").unwrap();
        std::fs::write(dir.join("noise.log"), "ignored\n").unwrap();
        std::fs::remove_file(dir.join("becomes-dir")).unwrap();
        std::fs::create_dir_all(dir.join("becomes-dir")).unwrap();
        std::fs::write(dir.join("becomes-dir/inside.txt"), "in\n").unwrap();
        let second = cp(1, Some(&first.commit));
        assert_eq!(tree_of(dir, &second.commit), reference_tree(dir));
        assert_eq!(second.stat.files, 6, "{:?}", second.stat);
        let files = git(dir, &["ls-tree", "-r", "--name-only", &second.commit]);
        assert!(!files.contains("noise.log"), "an ignored file: {files}");

        // Nothing changed: the same tree, found without hashing anything.
        let third = cp(2, Some(&second.commit));
        assert_eq!(tree_of(dir, &third.commit), tree_of(dir, &second.commit));

        // A change inside a directory the untracked cache knows, and the directory back to a
        // file.
        std::fs::write(dir.join("fresh/dir/d.txt"), "d\n").unwrap();
        std::fs::remove_dir_all(dir.join("becomes-dir")).unwrap();
        std::fs::write(dir.join("becomes-dir"), "file again\n").unwrap();
        let fourth = cp(3, Some(&third.commit));
        assert_eq!(tree_of(dir, &fourth.commit), reference_tree(dir));
        assert_eq!(fourth.stat.files, 3, "{:?}", fourth.stat);
    }

    #[test]
    fn the_user_s_index_is_left_byte_for_byte() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        git(dir, &["init", "-q", "-b", "main"]);
        std::fs::write(dir.join("a.txt"), "a\n").unwrap();
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-q", "-m", "base"]);
        std::fs::write(dir.join("a.txt"), "changed\n").unwrap();
        std::fs::write(dir.join("b.txt"), "new\n").unwrap();
        let index = std::fs::read(dir.join(".git/index")).unwrap();
        after_iteration(dir, &dir.join(".ralph"), "r", 1, None, "t")
            .unwrap()
            .unwrap();
        assert_eq!(std::fs::read(dir.join(".git/index")).unwrap(), index);
    }

    /// Regression: ralph's index began as a copy of the user's stamped with the time of the
    /// copy, so git trusted the cached stat data of a file changed (size unchanged) in the
    /// user's index's last clock tick, and the checkpoint kept the old content.
    #[test]
    fn a_file_changed_in_the_index_s_last_moment_is_in_the_checkpoint() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        git(dir, &["init", "-q", "-b", "main"]);
        std::fs::write(dir.join("a.txt"), "one\n").unwrap();
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-q", "-m", "base"]);
        crate::git::racy_write(dir, "a.txt", "two\n");
        let cp = after_iteration(dir, &dir.join(".ralph"), "r", 1, None, "t")
            .unwrap()
            .unwrap();
        let a = git(dir, &["show", &format!("{}:a.txt", cp.commit)]);
        assert_eq!(a, "two");
    }

    #[test]
    fn status_records_are_read_for_work_tree_changes_only() {
        let status = b"1 M. N... 100644 100644 100644 aa bb staged only.txt\0\
1 .M N... 100644 100644 100644 aa aa with space.txt\0\
1 .D N... 100644 100644 000000 aa aa gone\0\
u UU N... 100644 100644 100644 100644 a b c both.txt\0\
? new dir/f.txt\0";
        let paths: Vec<String> = worktree_changes(status)
            .into_iter()
            .map(|p| String::from_utf8(p).unwrap())
            .collect();
        assert_eq!(
            paths,
            ["with space.txt", "gone", "both.txt", "new dir/f.txt"]
        );
    }
}
