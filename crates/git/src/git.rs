//! Running `git`: one place that builds every command ralph gives it.
//!
//! Every command is the `git` program with an explicit argv (never a shell), the repository
//! named with `-C`, `GIT_TERMINAL_PROMPT=0` (a prompt for a password would hang an unattended
//! loop), `commit.gpgsign`/`tag.gpgsign` off (a signing program that waits for a pinentry would
//! too), and none of the `GIT_*` variables that point git at another repository or index
//! inherited from ralph's own environment.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// What went wrong talking to git.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// `git` could not be started at all.
    #[error("could not run git: {source} (is git installed and on PATH?)")]
    Spawn {
        /// Why.
        source: std::io::Error,
    },
    /// A git command exited non-zero.
    #[error("`git {args}` failed in {dir}: {stderr}")]
    Failed {
        /// The arguments, joined for the message.
        args: String,
        /// Where it ran.
        dir: PathBuf,
        /// What git said.
        stderr: String,
    },
    /// A file ralph reads or writes beside git.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Anything else, said in words.
    #[error("{0}")]
    Other(String),
}

impl GitError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> GitError {
        GitError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// The variables that would point git elsewhere than the repository named with `-C`.
const REPOSITORY_VARS: [&str; 8] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
];

/// A repository (or one of its worktrees) that commands run in.
#[derive(Debug, Clone)]
pub struct Git {
    dir: PathBuf,
    env: Vec<(OsString, OsString)>,
}

/// Copies a git index file with its modification time. Git trusts an entry's cached stat data
/// only when the file is older than the index itself ("racy git"); a copy stamped now would
/// pass a file changed, size unchanged, in the index's last second as unchanged. The time is
/// read first: should the index be replaced meanwhile, the newer copy gets the older time,
/// which only makes git look at more files.
pub(crate) fn copy_index(from: &Path, to: &Path) -> std::io::Result<()> {
    let modified = std::fs::metadata(from)?.modified()?;
    std::fs::copy(from, to)?;
    std::fs::File::options()
        .write(true)
        .open(to)?
        .set_modified(modified)
}

/// Writes `text` (the same length as the tracked file's) to `path` in the repository `dir` so
/// that only content tells the change, as when it is written in the clock tick of the index's
/// last write: the file keeps its modification time, and the index's own is set to it, the
/// "racy" case git settles by reading the file, where a copy of the index stamped later would
/// not.
#[cfg(test)]
pub(crate) fn racy_write(dir: &Path, path: &str, text: &str) {
    let git = Git::new(dir);
    // The inode's change time cannot be set back: git is told not to look at it.
    git.run(["config", "core.trustctime", "false"]).unwrap();
    let file = dir.join(path);
    assert_eq!(std::fs::metadata(&file).unwrap().len(), text.len() as u64);
    let stamp = |p: &Path, at: std::time::SystemTime| {
        std::fs::File::options()
            .write(true)
            .open(p)
            .unwrap()
            .set_modified(at)
            .unwrap();
    };
    // Cached well before the index's last write, so that write did not mark it racy itself.
    let then = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    stamp(&file, then);
    git.run(["update-index", "--refresh"]).unwrap();
    std::fs::write(&file, text).unwrap();
    stamp(&file, then);
    stamp(&dir.join(".git/index"), then);
}

impl Git {
    /// Commands run in `dir` (`git -C dir ...`).
    pub fn new(dir: impl Into<PathBuf>) -> Git {
        Git {
            dir: dir.into(),
            env: Vec::new(),
        }
    }

    /// The directory commands run in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The same repository with `GIT_INDEX_FILE` set: commands read and write that index
    /// instead of the checkout's own.
    pub fn with_index(&self, index: &Path) -> Git {
        let mut g = self.clone();
        g.env
            .push(("GIT_INDEX_FILE".into(), index.as_os_str().to_owned()));
        g
    }

    /// The same repository with one more environment variable for its commands.
    pub fn with_env(&self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Git {
        let mut g = self.clone();
        g.env
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        g
    }

    /// The command, not yet run: for callers that need its output streamed (a pager).
    pub fn command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = Command::new("git");
        cmd.arg("-C")
            .arg(&self.dir)
            .args(["-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"])
            // No hook runs for ralph: not post-checkout on a new worktree, nor any other.
            .args(["-c", "core.hooksPath=/dev/null"])
            .args(args)
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_OPTIONAL_LOCKS", "0");
        for var in REPOSITORY_VARS {
            cmd.env_remove(var);
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Runs `git ARGS` and returns its output whatever its exit status.
    pub fn output<I, S>(&self, args: I) -> Result<Output, GitError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.command(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|source| GitError::Spawn { source })
    }

    /// Runs `git ARGS`, which must succeed; its stdout with the last newline trimmed.
    pub fn run<I, S>(&self, args: I) -> Result<String, GitError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let args: Vec<OsString> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
        let out = self.output(&args)?;
        if !out.status.success() {
            return Err(self.failed(&args, &out));
        }
        let mut s = String::from_utf8_lossy(&out.stdout).into_owned();
        if s.ends_with('\n') {
            s.pop();
        }
        Ok(s)
    }

    /// Runs `git ARGS`; `Some(stdout)` when it succeeds, `None` when it exits non-zero.
    pub fn try_run<I, S>(&self, args: I) -> Result<Option<String>, GitError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let out = self.output(args)?;
        if !out.status.success() {
            return Ok(None);
        }
        let s = String::from_utf8_lossy(&out.stdout);
        Ok(Some(s.strip_suffix('\n').unwrap_or(&s).to_owned()))
    }

    pub(crate) fn failed(&self, args: &[OsString], out: &Output) -> GitError {
        GitError::Failed {
            args: args
                .iter()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" "),
            dir: self.dir.clone(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        }
    }

    /// Runs `git ARGS` with `input` on its stdin; it must succeed. Its output is dropped.
    pub(crate) fn run_fed(&self, args: &[&str], input: &[u8]) -> Result<(), GitError> {
        use std::io::Write;
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| GitError::Spawn { source })?;
        // A git that died early shows in its exit status, below.
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(input);
        }
        let out = child
            .wait_with_output()
            .map_err(|source| GitError::Spawn { source })?;
        if !out.status.success() {
            let args: Vec<OsString> = args.iter().map(Into::into).collect();
            return Err(self.failed(&args, &out));
        }
        Ok(())
    }

    /// The commit `rev` names, or `None` when it names none.
    pub fn resolve(&self, rev: &str) -> Result<Option<String>, GitError> {
        self.try_run([
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{rev}^{{commit}}"),
        ])
    }

    /// A path of git's own (`index`, `ORIG_HEAD`, ...) as this checkout sees it.
    pub fn git_path(&self, name: &str) -> Result<PathBuf, GitError> {
        let p = PathBuf::from(self.run(["rev-parse", "--git-path", name])?);
        Ok(if p.is_absolute() { p } else { self.dir.join(p) })
    }

    /// The top of the work tree `dir` is in, or `None` when it is in no git work tree.
    pub fn toplevel(dir: &Path) -> Option<PathBuf> {
        Git::new(dir)
            .try_run(["rev-parse", "--show-toplevel"])
            .ok()
            .flatten()
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
    }

    /// Moves `reference` to `new` only if it is at `old` now (`None`: only if it does not
    /// exist): git's compare-and-swap. `false` when it was not where expected.
    pub fn compare_and_swap(
        &self,
        reference: &str,
        new: &str,
        old: Option<&str>,
        why: &str,
    ) -> Result<bool, GitError> {
        const NO_REF: &str = "0000000000000000000000000000000000000000";
        let out = self.output([
            "update-ref",
            "-m",
            why,
            reference,
            new,
            old.unwrap_or(NO_REF),
        ])?;
        Ok(out.status.success())
    }

    /// Who commits: the user's identity when git has one, else ralph's own, so a repository
    /// with no `user.email` still gets checkpoints.
    pub fn with_identity(&self) -> Git {
        // Asked once per directory per process: a loop checkpoints the same one every
        // iteration, and each question is a git process.
        static KNOWN: std::sync::Mutex<Vec<(PathBuf, bool)>> = std::sync::Mutex::new(Vec::new());
        let cached = KNOWN
            .lock()
            .ok()
            .and_then(|k| k.iter().find(|(d, _)| *d == self.dir).map(|(_, c)| *c));
        let configured = cached.unwrap_or_else(|| {
            let configured = self
                .try_run(["config", "user.email"])
                .ok()
                .flatten()
                .is_some_and(|s| !s.is_empty());
            if let Ok(mut k) = KNOWN.lock() {
                k.push((self.dir.clone(), configured));
            }
            configured
        });
        if configured {
            return self.clone();
        }
        let mut g = self.clone();
        for (k, v) in [
            ("GIT_AUTHOR_NAME", "ralph"),
            ("GIT_AUTHOR_EMAIL", "ralph@localhost"),
            ("GIT_COMMITTER_NAME", "ralph"),
            ("GIT_COMMITTER_EMAIL", "ralph@localhost"),
        ] {
            g = g.with_env(k, v);
        }
        g
    }
}
