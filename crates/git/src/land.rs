//! Landing: a finished loop's branch onto its target, tested on the combined tree, with the
//! target moved by one compare-and-swap.
//!
//! [`land`] never checks out, merges or resets in the user's checkout. In order:
//!
//! 1. The lock: one landing at a time per repository (`<git common dir>/ralph-land.lock`).
//! 2. The loop's work tree is committed onto its branch (plumbing, an index of its own), so
//!    what lands is exactly what the loop left.
//! 3. A backup ref of the target, `refs/ralph/backup/<target>/<time>`, before anything else.
//! 4. A temporary detached worktree at the target's tip (in ralph's data directory, beside the
//!    loop's), where the branch's commits are replayed (`cherry-pick`, for `land_with: rebase`)
//!    or merged (`merge --no-ff`). A conflict ends the landing with [`Landing::Conflict`].
//! 5. `test_command` runs there, on the combined tree; a failure is [`Landing::TestsFailed`].
//! 6. The target moves by `update-ref refs/heads/T NEW OLD`. If it moved meanwhile, the landing
//!    starts again from its new tip. If the target is checked out in a checkout, it lands only
//!    as a fast-forward of a clean one (`read-tree -m -u OLD NEW`, git's own two-tree
//!    fast-forward); a checkout with changes gives [`Landing::NeedsLand`] and the command that
//!    finishes it, the combined commit kept under `refs/ralph/land/<branch>`.
//!
//! The only write to the target is the compare-and-swap, which git makes atomic: a crash or a
//! `kill -9` at any step leaves the target where it was or landed, and the backup ref in place.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::git::{Git, GitError};
use crate::worktree::{LandState, LoopInfo};

/// How the loop's branch is combined with the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Its commits replayed on the target's tip.
    Rebase,
    /// A merge commit.
    Merge,
}

/// What [`land`] needs besides the loop's record.
#[derive(Debug, Clone)]
pub struct Options {
    /// Rebase or merge.
    pub method: Method,
    /// The tests to run on the combined tree (`sh -c`).
    pub test_command: Option<String>,
    /// How long they may take.
    pub test_timeout: Duration,
    /// The task file, relative to the worktree, left out of what lands when the base did not
    /// have it (it is ralph's, not the project's).
    pub task_file: Option<PathBuf>,
    /// The commit message for the loop's uncommitted work.
    pub message: String,
    /// ralph's data directory, where the temporary worktree goes.
    pub data: PathBuf,
}

/// How a landing ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Landing {
    /// The target is at `commit`.
    Landed {
        /// The target's new tip.
        commit: String,
        /// The target's tip before, kept as `backup`.
        previous: String,
        /// The backup ref.
        backup: String,
    },
    /// Combined and tested, but the target is checked out in a checkout with changes.
    NeedsLand {
        /// The checkout.
        checkout: PathBuf,
        /// The command that finishes it.
        command: String,
    },
    /// The branch does not apply to the target's tip.
    Conflict {
        /// The files in conflict.
        files: Vec<String>,
        /// Their conflicting hunks, with git's conflict markers (`git diff` of the unmerged
        /// files), cut to the first [`HUNK_LINES`] lines.
        hunks: String,
        /// The target's tip it was tried on.
        onto: String,
    },
    /// `test_command` failed on the combined tree.
    TestsFailed {
        /// The end of its output.
        output: String,
        /// The target's tip it was tried on.
        onto: String,
    },
}

/// A lock file held with `flock` for as long as this lives.
#[derive(Debug)]
pub struct RepoLock(#[allow(dead_code)] nix::fcntl::Flock<std::fs::File>);

/// After `needs-land`: the combined commit, when the target branch now contains it (the user
/// ran the command that finishes the landing). Reads only.
pub fn finished_by_hand(info: &LoopInfo) -> Option<String> {
    let repo = Git::new(&info.repo);
    let combined = repo
        .resolve(&format!("refs/ralph/land/{}", info.branch))
        .ok()??;
    let target = format!("refs/heads/{}", info.target.as_deref()?);
    let contains = repo
        .output(["merge-base", "--is-ancestor", &combined, &target])
        .ok()?
        .status
        .success();
    contains.then_some(combined)
}

/// Takes the repository's landing lock, waiting for another landing to finish.
pub fn lock(git: &Git) -> Result<RepoLock, GitError> {
    crate::worktree::repo_lock(git, "ralph-land.lock").map(RepoLock)
}

/// Commits the loop's work tree onto its branch, when it has changes no commit holds yet.
pub fn commit_work(info: &LoopInfo, opts: &Options) -> Result<String, GitError> {
    let wt = Git::new(&info.worktree);
    let branch_ref = format!("refs/heads/{}", info.branch);
    let tip = wt
        .resolve(&branch_ref)?
        .ok_or_else(|| GitError::Other(format!("the loop's branch {} is gone", info.branch)))?;
    let index = info.worktree.join(".ralph").join("land.index");
    let _ = std::fs::remove_file(&index);
    let scratch = wt.with_index(&index);
    scratch.run(["read-tree", &tip])?;
    scratch.run(["add", "-A", "--", "."])?;
    if let Some(task) = &opts.task_file {
        let task = task.to_string_lossy();
        let in_base = wt
            .try_run(["cat-file", "-e", &format!("{}:{task}", info.base)])?
            .is_some();
        if !in_base {
            scratch.run(["update-index", "--force-remove", "--", &task])?;
        }
    }
    let tree = scratch.run(["write-tree"])?;
    let _ = std::fs::remove_file(&index);
    if tree == wt.run(["rev-parse", &format!("{tip}^{{tree}}")])? {
        return Ok(tip);
    }
    let commit = wt
        .with_identity()
        .run(["commit-tree", &tree, "-p", &tip, "-m", &opts.message])?;
    if !wt.compare_and_swap(&branch_ref, &commit, Some(&tip), "ralph: the loop's work")? {
        return Err(GitError::Other(format!(
            "{} moved while ralph committed the loop's work; run ralph land again",
            info.branch
        )));
    }
    // The worktree's index follows its branch (it is the loop's own, not the user's).
    wt.run(["read-tree", "HEAD"])?;
    Ok(commit)
}

/// Lands the loop `info` describes; see the module docs.
pub fn land(info: &LoopInfo, opts: &Options) -> Result<Landing, GitError> {
    let target = info.target.clone().ok_or_else(|| {
        GitError::Other(
            "the loop started on a detached HEAD, so it has no branch to land on".into(),
        )
    })?;
    let repo = Git::new(&info.repo);
    let _lock = lock(&repo)?;
    let tip = commit_work(info, opts)?;
    let target_ref = format!("refs/heads/{target}");
    loop {
        let old = repo
            .resolve(&target_ref)?
            .ok_or_else(|| GitError::Other(format!("the target branch {target} does not exist")))?;
        let backup = backup(&repo, &target, &old)?;
        let scratch = Scratch::new(&repo, &opts.data, &old)?;
        let combined = match combine(&scratch.git, &old, &tip, info, opts)? {
            Ok(c) => c,
            Err((files, hunks)) => {
                return Ok(Landing::Conflict {
                    files,
                    hunks,
                    onto: old,
                });
            }
        };
        if let Some(cmd) = &opts.test_command
            && let Err(output) = run_tests(scratch.git.dir(), cmd, opts.test_timeout)
        {
            return Ok(Landing::TestsFailed { output, onto: old });
        }
        drop(scratch);
        let keep = format!("refs/ralph/land/{}", info.branch);
        repo.run([
            "update-ref",
            "-m",
            "ralph: combined and tested",
            &keep,
            &combined,
        ])?;
        if let Some(checkout) = checked_out(&repo, &target_ref)? {
            let co = Git::new(&checkout);
            let clean = co
                .run(["status", "--porcelain=v1", "--untracked-files=no"])?
                .is_empty();
            if !clean {
                let command = format!(
                    "git -C {} merge --ff-only {keep}",
                    shell_words_quote(&checkout.to_string_lossy())
                );
                return Ok(Landing::NeedsLand { checkout, command });
            }
            // The other loops of this repository check the checkout after every iteration: the
            // move is recorded as ralph's own before it happens (the swap moves its HEAD).
            crate::worktree::record_checkout_move(&repo, &checkout, &old, &combined)?;
            if !repo.compare_and_swap(&target_ref, &combined, Some(&old), "ralph: land")? {
                continue;
            }
            // git's own fast-forward of an index and work tree: refuses to lose a change.
            co.run(["read-tree", "-m", "-u", &old, &combined])?;
        } else if !repo.compare_and_swap(&target_ref, &combined, Some(&old), "ralph: land")? {
            continue;
        }
        return Ok(Landing::Landed {
            commit: combined,
            previous: old,
            backup,
        });
    }
}

/// Saves `old` as `refs/ralph/backup/<target>/<ms>`.
fn backup(repo: &Git, target: &str, old: &str) -> Result<String, GitError> {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let name = format!("refs/ralph/backup/{target}/{ms}");
    repo.compare_and_swap(&name, old, None, "ralph: backup before landing")?;
    Ok(name)
}

/// How much of the conflicting hunks a [`Landing::Conflict`] keeps: enough for the agent to
/// see what collided, not a whole rewritten file.
pub const HUNK_LINES: usize = 200;

/// The combined commit, or the files in conflict and their hunks.
fn combine(
    git: &Git,
    old: &str,
    tip: &str,
    info: &LoopInfo,
    opts: &Options,
) -> Result<Result<String, (Vec<String>, String)>, GitError> {
    let git = git.with_identity();
    let mb = git.run(["merge-base", old, tip])?;
    if mb == old {
        // The target has not moved past the branch: the branch is the combined tree.
        git.run(["checkout", "-q", "--detach", tip])?;
        return Ok(Ok(tip.to_owned()));
    }
    let ok = match opts.method {
        Method::Merge => git
            .output([
                "merge",
                "--no-ff",
                "--no-edit",
                "-m",
                &format!("Merge {} (ralph)", info.branch),
                tip,
            ])?
            .status
            .success(),
        Method::Rebase => {
            let list = git.run([
                "rev-list",
                "--reverse",
                "--no-merges",
                &format!("{mb}..{tip}"),
            ])?;
            let commits: Vec<&str> = list.lines().collect();
            commits.is_empty()
                || git
                    .output(
                        ["cherry-pick", "--allow-empty"]
                            .into_iter()
                            .chain(commits.iter().copied()),
                    )?
                    .status
                    .success()
        }
    };
    if ok {
        return Ok(Ok(git.run(["rev-parse", "HEAD"])?));
    }
    let files = git
        .run(["diff", "--name-only", "--diff-filter=U"])?
        .lines()
        .map(str::to_owned)
        .collect();
    let diff = git.run(["diff", "--no-color", "--no-ext-diff", "--diff-filter=U"])?;
    let lines: Vec<&str> = diff.lines().collect();
    let mut hunks = lines[..lines.len().min(HUNK_LINES)].join("\n");
    if lines.len() > HUNK_LINES {
        hunks.push_str(&format!(
            "\n[... {} more lines: see `git diff` after merging]",
            lines.len() - HUNK_LINES
        ));
    }
    Ok(Err((files, hunks)))
}

/// Runs `cmd` in `dir`; the end of its output when it fails or takes longer than `timeout`.
fn run_tests(dir: &Path, cmd: &str, timeout: Duration) -> Result<(), String> {
    use std::process::{Command, Stdio};
    let log = dir.with_extension("log");
    let file = std::fs::File::create(&log).map_err(|e| e.to_string())?;
    let err = file.try_clone().map_err(|e| e.to_string())?;
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("could not start `{cmd}`: {e}"))?;
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| e.to_string())? {
            break Some(s);
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let tail: String = {
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    };
    match status {
        Some(s) if s.success() => {
            let _ = std::fs::remove_file(&log);
            Ok(())
        }
        Some(s) => Err(format!("`{cmd}` failed ({s}):\n{tail}")),
        None => Err(format!("`{cmd}` took longer than {timeout:?}:\n{tail}")),
    }
}

/// The checkout (other than a landing's own) that has `branch_ref` checked out, if any.
fn checked_out(repo: &Git, branch_ref: &str) -> Result<Option<PathBuf>, GitError> {
    let list = repo.run(["worktree", "list", "--porcelain"])?;
    let mut path = None;
    for line in list.lines() {
        if let Some(p) = line.strip_prefix("worktree ") {
            path = Some(PathBuf::from(p));
        } else if line.strip_prefix("branch ") == Some(branch_ref) {
            return Ok(path);
        }
    }
    Ok(None)
}

/// A temporary detached worktree of ralph's own, removed when dropped.
struct Scratch {
    repo: Git,
    git: Git,
}

impl Scratch {
    fn new(repo: &Git, data: &Path, at: &str) -> Result<Scratch, GitError> {
        let top = Git::toplevel(repo.dir()).unwrap_or_else(|| repo.dir().to_path_buf());
        let dir =
            crate::worktree::repo_dir(data, &top).join(format!(".landing-{}", std::process::id()));
        if dir.exists() {
            // Left by a landing of this pid's namesake that was killed: ours to remove.
            let _ = repo.output(["worktree", "remove", "--force", &dir.to_string_lossy()]);
            let _ = std::fs::remove_dir_all(&dir);
        }
        if let Some(parent) = dir.parent() {
            std::fs::create_dir_all(parent).map_err(|e| GitError::io(parent, e))?;
        }
        repo.run([
            "worktree",
            "add",
            "--detach",
            "-q",
            &dir.to_string_lossy(),
            at,
        ])?;
        Ok(Scratch {
            repo: repo.clone(),
            git: Git::new(dir),
        })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let dir = self.git.dir().to_string_lossy().into_owned();
        let _ = self.repo.output(["worktree", "remove", "--force", &dir]);
    }
}

/// `s` quoted for a POSIX shell when it needs it.
fn shell_words_quote(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+:@".contains(c))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

impl LoopInfo {
    /// Records where landing stands.
    pub fn set_land(
        &mut self,
        ralph_dir: &Path,
        state: LandState,
        reason: Option<String>,
    ) -> Result<(), GitError> {
        self.land = Some(state);
        self.reason = reason;
        self.save(ralph_dir)
    }
}
