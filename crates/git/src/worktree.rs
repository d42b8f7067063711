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

use crate::checkpoint::DiffStat;
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

/// Whether any repository has a worktree loop recorded under `data` (`<data>/worktrees/`): a
/// look at one directory, so that a caller can skip asking git where a repository is when no
/// loop could be found there anyway.
pub fn any_recorded(data: &Path) -> bool {
    std::fs::read_dir(data.join("worktrees")).is_ok_and(|mut repos| repos.next().is_some())
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
    {
        // Two `git worktree add` at once in one repository fail: each reads the other's
        // half-made `.git/worktrees/<name>/` ("failed to read .../commondir"). A fleet starts
        // many loops at once.
        let _adding = repo_lock(&git, "ralph-worktree.lock")?;
        git.run(["worktree", "add", "-b", &branch, &dir_s, &base])?;
    }
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

/// A lock file `name` in the repository's common git directory, held with `flock` (waiting
/// for whoever holds it) for as long as the returned value lives.
pub fn repo_lock(git: &Git, name: &str) -> Result<nix::fcntl::Flock<std::fs::File>, GitError> {
    let path = common_dir(git)?.join(name);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| GitError::io(&path, e))?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| GitError::io(&path, e.into()))
}

/// The repository's common git directory (the same for every worktree of it).
fn common_dir(git: &Git) -> Result<PathBuf, GitError> {
    let common = PathBuf::from(git.run(["rev-parse", "--git-common-dir"])?);
    Ok(if common.is_absolute() {
        common
    } else {
        git.dir().join(common)
    })
}

/// The fast-forwards ralph's own landings made of a user's checkout (`<git common
/// dir>/ralph-checkout-moves`, one `checkout\tfrom\tto` line each, the last [`MOVES_KEPT`]):
/// what lets the other loops of the repository tell a landing's move of the checkout from an
/// agent reaching into it.
const MOVES_FILE: &str = "ralph-checkout-moves";
const MOVES_KEPT: usize = 200;

/// Records that a landing fast-forwarded the checkout at `checkout` from `from` to `to`.
/// Called under the landing lock, so the file has one writer at a time.
pub(crate) fn record_checkout_move(
    git: &Git,
    checkout: &Path,
    from: &str,
    to: &str,
) -> Result<(), GitError> {
    let path = common_dir(git)?.join(MOVES_FILE);
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    let mut lines: Vec<String> = old.lines().map(str::to_owned).collect();
    lines.push(format!("{}\t{from}\t{to}", checkout.display()));
    let skip = lines.len().saturating_sub(MOVES_KEPT);
    let text = lines[skip..].join("\n") + "\n";
    ralph_protocol::write_atomic(&path, text.as_bytes())
        .map_err(|e| GitError::io(&path, std::io::Error::other(e.to_string())))
}

/// Whether ralph's landings alone moved the checkout at `checkout` from `from` to `to`: a chain
/// of recorded fast-forwards leads from one to the other.
fn moved_by_landings(repo: &Path, from: &str, to: &str) -> bool {
    let Ok(dir) = common_dir(&Git::new(repo)) else {
        return false;
    };
    let text = std::fs::read_to_string(dir.join(MOVES_FILE)).unwrap_or_default();
    let here = |c: &str| {
        Path::new(c) == repo
            || std::fs::canonicalize(c).ok().as_deref()
                == std::fs::canonicalize(repo).ok().as_deref()
    };
    let mut at = from.to_owned();
    for line in text.lines() {
        let mut cols = line.splitn(3, '\t');
        let (Some(c), Some(f), Some(t)) = (cols.next(), cols.next(), cols.next()) else {
            continue;
        };
        if f == at && here(c) {
            at = t.to_owned();
            if at == to {
                return true;
            }
        }
    }
    false
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

    /// Whether the only change from `before` is ralph's landings fast-forwarding the branch
    /// checked out at `repo` (its HEAD and, with it, its index; nothing else).
    fn only_landed_since(&self, before: &Snapshot, repo: &Path) -> bool {
        self.branch == before.branch
            && self.status == before.status
            && self.stash == before.stash
            && match (&before.head, &self.head) {
                (Some(from), Some(to)) if from != to => moved_by_landings(repo, from, to),
                _ => false,
            }
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
    let before = before?;
    let mut now = now;
    if now != before && !now.only_landed_since(&before, &info.repo) {
        // A landing may be half way (its swap done, the checkout's files not yet moved): once
        // no landing runs, look again.
        if let Ok(_landing) = crate::land::lock(&Git::new(&info.repo))
            && let Ok(again) = Snapshot::take(&info.repo)
        {
            now = again;
            let json = serde_json::to_vec(&now).expect("serializes");
            let _ = ralph_protocol::write_atomic(&path, &json);
        }
    }
    if now.only_landed_since(&before, &info.repo) {
        return None;
    }
    let changed = now.changes_since(&before);
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

/// How much the work tree at `dir` differs from the commit `base`, uncommitted and untracked
/// (not ignored) work included: what a loop has done so far, for the fleet's rows.
///
/// Reads only: `git diff --numstat` against `base` for the files git knows, and the lines of
/// each untracked file (a binary one, or one over a mebibyte, counts as a file without lines).
/// No object is written and the index is not touched.
pub fn work_stat(dir: &Path, base: &str) -> Result<DiffStat, GitError> {
    const MAX_READ: u64 = 1 << 20;
    let git = Git::new(dir);
    let out = git.run([
        "diff",
        "--numstat",
        "--no-renames",
        "--no-ext-diff",
        base,
        "--",
    ])?;
    let mut stat = crate::checkpoint::parse_numstat(&out);
    let untracked = git.run(["ls-files", "-z", "--others", "--exclude-standard"])?;
    for path in untracked.split('\0').filter(|p| !p.is_empty()) {
        stat.files += 1;
        let path = dir.join(path);
        let small =
            std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() && m.len() <= MAX_READ);
        if let Some(bytes) = small.then(|| std::fs::read(&path).ok()).flatten()
            && !bytes.contains(&0)
        {
            let lines = bytecount_lines(&bytes);
            stat.insertions += lines;
        }
    }
    Ok(stat)
}

/// The patch [`work_stat`] counts: the work tree at `dir` against `base`, each untracked (not
/// ignored) file as a new file, with one `--stat` over all of them at the top; in colour when
/// `color`. Neither the checkout's index nor any ref changes: the untracked files are marked
/// "intent to add" in a temporary copy of the index, which git then diffs with the rest.
pub fn work_patch(dir: &Path, base: &str, color: bool) -> Result<Vec<u8>, GitError> {
    let git = Git::new(dir);
    let color = if color {
        "--color=always"
    } else {
        "--color=never"
    };
    let tmp = tempfile::tempdir().map_err(|source| GitError::Io {
        path: std::env::temp_dir(),
        source,
    })?;
    let index = tmp.path().join("index");
    // From the checkout's own index, so the tracked files are as git knows them (a missing
    // one, before the first `git add`, is an empty index).
    let _ = crate::git::copy_index(&git.git_path("index")?, &index);
    let copy = git.with_index(&index);
    let untracked = git.output(["ls-files", "-z", "--others", "--exclude-standard"])?;
    if !untracked.stdout.is_empty() {
        copy.run_fed(
            &[
                "--literal-pathspecs",
                "add",
                "--intent-to-add",
                "--pathspec-from-file=-",
                "--pathspec-file-nul",
            ],
            &untracked.stdout,
        )?;
    }
    let out = copy.output([
        "diff",
        color,
        "--stat",
        "--patch",
        "--no-renames",
        "--no-ext-diff",
        base,
        "--",
    ])?;
    Ok(out.stdout)
}

/// The lines of a text, a last line without a newline counted.
fn bytecount_lines(bytes: &[u8]) -> u64 {
    let newlines = bytes.iter().filter(|&&b| b == b'\n').count() as u64;
    newlines + u64::from(!bytes.is_empty() && !bytes.ends_with(b"\n"))
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

#[cfg(test)]
mod work_stat_tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) -> String {
        Git::new(dir).with_identity().run(args).unwrap()
    }

    /// A repository in `d` whose one commit (the base, returned) holds `a.txt` with `a` and
    /// a `.gitignore` that ignores `target/`.
    fn based(d: &Path, a: &str) -> String {
        git(d, &["init", "-q"]);
        std::fs::write(d.join("a.txt"), a).unwrap();
        std::fs::write(d.join(".gitignore"), "target/\n").unwrap();
        git(d, &["add", "-A"]);
        git(d, &["commit", "-q", "-m", "base"]);
        git(d, &["rev-parse", "HEAD"])
    }

    #[test]
    fn counts_committed_uncommitted_and_untracked_work_against_the_base() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let base = based(d, "one\ntwo\nthree\n");
        assert_eq!(work_stat(d, &base).unwrap(), DiffStat::default());

        // A commit on top, an uncommitted edit, an untracked file, a binary and an ignored one.
        std::fs::write(d.join("a.txt"), "one\n2\nthree\nfour\n").unwrap();
        git(d, &["commit", "-q", "-am", "work"]);
        std::fs::write(d.join("a.txt"), "one\n2\nthree\nfour\nfive\n").unwrap();
        std::fs::write(d.join("new.rs"), "fn main() {}\n// no newline").unwrap();
        std::fs::write(d.join("blob.bin"), [0u8, 1, 2, b'\n']).unwrap();
        std::fs::create_dir(d.join("target")).unwrap();
        std::fs::write(d.join("target/out"), "ignored\n").unwrap();
        let stat = work_stat(d, &base).unwrap();
        assert_eq!(
            stat,
            DiffStat {
                files: 3,
                insertions: 3 + 2,
                deletions: 1
            }
        );
        assert_eq!(stat.to_string(), "+5 -1");
        // Nothing was staged or written.
        assert_eq!(git(d, &["status", "--porcelain"]).lines().count(), 3);
    }

    /// Regression: the patch `d` pages in the fleet view began with a `--stat` of the tracked
    /// files alone ("1 file changed") over a patch that went on with the new ones.
    #[test]
    fn the_patch_s_stat_counts_new_files_and_the_checkout_s_index_stays() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let base = based(d, "one\n");
        // Changed in the index's last moment: a copy of the index must keep its time, or the
        // change is not seen (it failed so whenever the test ran within one clock tick).
        crate::git::racy_write(d, "a.txt", "two\n");
        std::fs::create_dir(d.join("src")).unwrap();
        std::fs::write(d.join("src/new file.rs"), "fn a() {}\nfn b() {}\n").unwrap();
        std::fs::write(d.join(":(glob)*"), "odd name\n").unwrap();
        std::fs::create_dir(d.join("target")).unwrap();
        std::fs::write(d.join("target/out"), "ignored\n").unwrap();
        let index = std::fs::read(d.join(".git/index")).unwrap();
        let patch = String::from_utf8(work_patch(d, &base, false).unwrap()).unwrap();
        let stat = patch.lines().find(|l| l.contains("changed")).unwrap();
        assert_eq!(
            stat.trim(),
            "3 files changed, 4 insertions(+), 1 deletion(-)",
            "{patch}"
        );
        assert!(patch.contains("+fn b() {}"), "{patch}");
        assert!(patch.contains("+odd name"), "{patch}");
        assert!(!patch.contains("ignored"), "{patch}");
        assert_eq!(
            work_stat(d, &base).unwrap().to_string(),
            "+4 -1",
            "the row's figures and the pager's agree"
        );
        // The checkout's index is byte for byte as it was; nothing new is staged.
        assert_eq!(std::fs::read(d.join(".git/index")).unwrap(), index);
        assert_eq!(git(d, &["diff", "--cached", "--name-only"]), "");
    }
}
