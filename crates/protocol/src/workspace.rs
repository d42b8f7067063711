//! The `.ralph/` directory: where each file lives, and the only ways ralph writes or reads them.
//!
//! Every file another process reads is written atomically: a temporary file in the same
//! directory, flushed, then renamed over the target. A rename replaces a symlink rather than
//! writing through it, so an agent that swaps `.ralph/answer.md` for a link to `~/.bashrc` gets
//! its link replaced, never the file behind it. Reads refuse symlinks too (`O_NOFOLLOW`), and a
//! `.ralph/` that is itself a symlink is refused outright, so nothing outside the workspace is
//! read into a prompt or shown on screen by way of a link.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, flock};
use rustix::io::Errno;

/// Name of the workspace directory, relative to the project root.
pub const DIR_NAME: &str = ".ralph";

/// The largest file ralph reads whole from `.ralph/` (progress, guardrails, answers).
///
/// Bigger files are cut (with a note) rather than loaded, so a runaway agent cannot make the
/// harness allocate gigabytes.
pub(crate) const MAX_READ_BYTES: usize = 1024 * 1024;

/// What `.ralph/.gitignore` says: everything in the directory, itself included, is ignored.
const GITIGNORE: &str = "# Written by ralph: .ralph/ is this machine's loop state (lock, logs, config), not for git.\n*\n";

/// Errors from workspace file operations; each names the path it concerns.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// `.ralph/` or one of its files is a symlink, which ralph refuses to follow.
    #[error(
        "{path}: is a symlink; ralph never reads or writes through links in .ralph/. Remove it and run again."
    )]
    Symlink {
        /// The offending path.
        path: PathBuf,
    },
    /// Another `ralph run` holds the workspace lock.
    #[error("{}", busy("ralph", dir, root, pid))]
    Locked {
        /// The `.ralph/` directory.
        dir: PathBuf,
        /// The project root, for the hint.
        root: PathBuf,
        /// The pid recorded by the holder (`?` when unreadable).
        pid: String,
    },
    /// Any other I/O failure.
    #[error("{path}: {error}")]
    Io {
        /// The path being read or written.
        path: PathBuf,
        /// What the OS said (not a `source`: it is already in the message).
        error: io::Error,
    },
}

impl WorkspaceError {
    fn io(path: &Path, source: io::Error) -> Self {
        if source.raw_os_error() == Some(Errno::LOOP.raw_os_error()) {
            return WorkspaceError::Symlink {
                path: path.to_path_buf(),
            };
        }
        WorkspaceError::Io {
            path: path.to_path_buf(),
            error: source,
        }
    }
}

type Result<T, E = WorkspaceError> = std::result::Result<T, E>;

/// A project root and its `.ralph/` directory, with typed paths for every file in it.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
    dir: PathBuf,
    /// ralph's state directory, where it is not the user's (tests).
    state_dir: Option<PathBuf>,
}

impl Workspace {
    /// Describes the workspace of the project at `root` without touching the disk.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        let dir = root.join(DIR_NAME);
        Workspace {
            root,
            dir,
            state_dir: None,
        }
    }

    /// The same workspace, with ralph's state directory (where the key that seals answers is
    /// kept, [`crate::ANSWER_KEY_FILE`]) at `dir` instead of the user's: for tests, which never
    /// touch the user's.
    pub fn with_state_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.state_dir = Some(dir.into());
        self
    }

    /// ralph's state directory as this workspace's answers are sealed under: the one given by
    /// [`Workspace::with_state_dir`], else the user's (`$RALPH_STATE_DIR`, else
    /// `~/.local/state/ralph`); `None` when there is no home directory to find it in.
    pub fn state_dir(&self) -> Option<PathBuf> {
        self.state_dir.clone().or_else(crate::broker::state_dir)
    }

    /// The project root (where the agent runs).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The `.ralph/` directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `.ralph/progress.md`: the agent's running notes, carried from one iteration to the next.
    pub fn progress(&self) -> PathBuf {
        self.dir.join("progress.md")
    }

    /// `.ralph/guardrails.md`: rules the agent must keep, written by the human or the agent.
    pub fn guardrails(&self) -> PathBuf {
        self.dir.join("guardrails.md")
    }

    /// `.ralph/question.md`: the agent's question (written by the agent or `ralph ask`).
    pub fn question(&self) -> PathBuf {
        self.dir.join("question.md")
    }

    /// `.ralph/answer.md`: the human's answer (written once, by whoever answers first).
    pub fn answer(&self) -> PathBuf {
        self.dir.join("answer.md")
    }

    /// `.ralph/ask.json`: the claim of a waiting `ralph ask` (its pid, when it asked, its deadline).
    pub fn ask_claim(&self) -> PathBuf {
        self.dir.join("ask.json")
    }

    /// `.ralph/state.json`: the loop's status, for `ralph status` and for resuming.
    pub fn state(&self) -> PathBuf {
        self.dir.join("state.json")
    }

    /// `.ralph/events.jsonl`: one line per thing that happened.
    pub fn events(&self) -> PathBuf {
        self.dir.join("events.jsonl")
    }

    /// `.ralph/clarifications.md`: every question and its answer, for the record.
    pub fn clarifications(&self) -> PathBuf {
        self.dir.join("clarifications.md")
    }

    /// `.ralph/prompt.md`: the user's own prompt template, if any.
    pub fn prompt_template(&self) -> PathBuf {
        self.dir.join("prompt.md")
    }

    /// `.ralph/logs/`: per-iteration prompts and agent output.
    pub fn logs(&self) -> PathBuf {
        self.dir.join("logs")
    }

    /// `.ralph/stop`: another process asks the running loop to stop (see [`crate::request_stop`]).
    pub fn stop_request(&self) -> PathBuf {
        self.dir.join(crate::stop::FILE_NAME)
    }

    /// `.ralph/lock`: held by the running loop.
    pub fn lock_path(&self) -> PathBuf {
        self.dir.join("lock")
    }

    /// `.ralph/.gitignore`: keeps the whole directory out of git.
    pub fn gitignore(&self) -> PathBuf {
        self.dir.join(".gitignore")
    }

    /// Writes `.ralph/.gitignore` (ignore everything, itself included) unless one is there.
    ///
    /// `.ralph/` holds this machine's run: the lock, state, logs of everything the agent
    /// printed, perhaps a webhook URL in `config.toml`. None of it belongs in a commit, and a
    /// `git add -A` by the agent or the human would otherwise take it all. One edited by the
    /// user (to share `guardrails.md`, say) is left as it is.
    pub fn ensure_gitignore(&self) -> Result<()> {
        let path = self.gitignore();
        create_atomic(&path, GITIGNORE.as_bytes()).map(|_| ())
    }

    /// Creates `.ralph/` and `.ralph/logs/` if needed, refusing a symlinked `.ralph/`; a
    /// `.ralph/` made here gets its `.gitignore` ([`Workspace::ensure_gitignore`]).
    pub fn ensure(&self) -> Result<()> {
        for dir in [self.dir.clone(), self.logs()] {
            match fs::symlink_metadata(&dir) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    return Err(WorkspaceError::Symlink { path: dir });
                }
                Ok(meta) if meta.is_dir() => {}
                Ok(_) => {
                    return Err(WorkspaceError::io(
                        &dir,
                        io::Error::new(
                            io::ErrorKind::AlreadyExists,
                            "is a file, where ralph keeps this project's state in a directory; move or rename it, then run again",
                        ),
                    ));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    fs::create_dir_all(&dir).map_err(|e| WorkspaceError::io(&dir, e))?;
                    if dir == self.dir {
                        self.ensure_gitignore()?;
                    }
                }
                Err(e) => return Err(WorkspaceError::io(&dir, e)),
            }
        }
        Ok(())
    }

    /// Checks that `.ralph/`, if present, is a real directory (for read-only commands).
    pub fn check_not_symlink(&self) -> Result<()> {
        match fs::symlink_metadata(&self.dir) {
            Ok(meta) if meta.file_type().is_symlink() => Err(WorkspaceError::Symlink {
                path: self.dir.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// Takes the workspace lock, so that only one `ralph run` works here at a time.
    ///
    /// The lock is an `flock` on `.ralph/lock`, released by the kernel when the process dies,
    /// so a crashed run never leaves a stale lock behind.
    pub fn lock(&self) -> Result<WorkspaceLock> {
        let path = self.lock_path();
        let file = open_plain(
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false),
            &path,
        )
        .map_err(|e| WorkspaceError::io(&path, e))?;
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {
                let mut lock = file;
                lock.set_len(0).map_err(|e| WorkspaceError::io(&path, e))?;
                writeln!(lock, "{}", std::process::id())
                    .map_err(|e| WorkspaceError::io(&path, e))?;
                Ok(WorkspaceLock { _lock: lock })
            }
            Err(_) => {
                let pid = holder_pid(&path);
                Err(WorkspaceError::Locked {
                    dir: self.dir.clone(),
                    root: self.root.clone(),
                    pid,
                })
            }
        }
    }

    /// The pid of the process holding the workspace lock right now (`?` when it cannot be
    /// read), or `None` when nobody holds it: for a command that would take the lock to refuse
    /// before it does anything else.
    pub fn lock_holder(&self) -> Option<String> {
        self.is_locked().then(|| holder_pid(&self.lock_path()))
    }

    /// Whether some process holds the workspace lock right now.
    pub fn is_locked(&self) -> bool {
        let Ok(file) = open_plain(OpenOptions::new().read(true), &self.lock_path()) else {
            return false;
        };
        flock(&file, FlockOperation::NonBlockingLockShared).is_err()
    }
}

/// What a second `ralph run` is told about the loop already running in `root` (its `.ralph/`
/// is `dir`, its pid `pid`), with the commands that show and stop it; `program` is how the
/// reader runs ralph (see [`answer_command`](crate::answer_command)).
pub fn busy(program: &str, dir: &Path, root: &Path, pid: &str) -> String {
    let root = crate::shell_quote(&root.display().to_string());
    format!(
        "{}: another ralph run (pid {pid}) is already working here. See what it is doing with `{program} status -C {root}`, or stop it with `{program} stop -C {root}` (its state is saved), then run again.",
        dir.display()
    )
}

/// The pid written in the lock file by the process holding it (`?` if it cannot be read).
///
/// The holder writes its pid just after taking the lock, so a run started at the same moment
/// may find the file still empty, or still naming a dead previous holder: it looks again, for
/// a quarter of a second at most, until the file names a live process.
fn holder_pid(path: &Path) -> String {
    let read = || {
        fs::read_to_string(path)
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    };
    let live = |pid: &str| pid.parse::<u32>().is_ok_and(pid_exists);
    let mut pid = read();
    for _ in 0..50 {
        if pid.as_deref().is_some_and(live) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
        pid = read();
    }
    pid.unwrap_or_else(|| "?".into())
}

/// Proof that this process owns the workspace; dropping it (closing the file) releases the
/// lock.
#[derive(Debug)]
pub struct WorkspaceLock {
    _lock: File,
}

/// Whether a process with this pid exists (`kill(pid, 0)`; `EPERM` means it does, owned by
/// someone else). An exited process not yet reaped still exists by this test: what ralph's
/// process crate adds to it (`/proc`), the formats do not need.
pub(crate) fn pid_exists(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    match rustix::process::test_kill_process(pid) {
        Ok(()) => true,
        Err(e) => e == Errno::PERM,
    }
}

/// Writes `contents` to `path` atomically: readers see the old file or the new one, never half.
///
/// The temporary file lives beside the target so the rename stays on one filesystem. A symlink
/// at `path` is replaced, not followed. The contents are on disk (`fdatasync`) before the
/// rename, so after a power loss `path` holds the old contents or the new, never a torn file.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<()> {
    let held = beneath(path)?;
    let target = held.as_ref().map_or(path, |b| b.path.as_path());
    let tmp = temp_beside(target, path, contents)?;
    tmp.persist(target)
        .map_err(|e| WorkspaceError::io(path, e.error))?;
    Ok(())
}

/// [`write_atomic`] without the `fdatasync`: as safe for readers, but after a power loss the
/// file may be missing or empty.
///
/// For records nothing depends on after a crash (each iteration's prompt in `.ralph/logs/`):
/// a sync costs 0.5 ms or more on a real disk, once per iteration.
pub fn write_atomic_unsynced(path: &Path, contents: &[u8]) -> Result<()> {
    SpareFile::new_in(parent(path))?.write_to(path, contents)
}

/// An empty temporary file made ahead of time, so that writing a file later costs a write and
/// a rename but no file creation.
///
/// Creating a file is the costly part of [`write_atomic_unsynced`] on ext4 (allocating an inode:
/// 0.1 to 0.3 ms here, against 0.01 ms on tmpfs); the loop makes the next iteration's prompt
/// file this way while the current agent runs, off the path from one agent to the next. If it
/// is never used, dropping it removes it; a crash leaves a `.tmp-` file that the loop's sweep
/// removes later.
#[derive(Debug)]
pub struct SpareFile {
    // Declared first, so dropped (and removed, by its path) while `_dir` still holds the
    // directory that path goes through.
    file: tempfile::NamedTempFile,
    _dir: Option<Beneath>,
}

impl SpareFile {
    /// Makes one in `dir` (which must be where it will be renamed to), with the mode any
    /// program's new file gets: read and write for all, less the umask (`rw-r--r--` under the
    /// usual 022). A temporary file's own default, owner only, would have made every file ralph
    /// writes, `RALPH_TASK.md` included, unreadable to anyone else.
    pub fn new_in(dir: &Path) -> Result<SpareFile> {
        use std::os::unix::fs::PermissionsExt;
        let held = beneath(&dir.join(".tmp-"))?;
        let through = held.as_ref().map_or(dir, |b| parent(&b.path));
        let file = tempfile::Builder::new()
            .prefix(".tmp-")
            .permissions(fs::Permissions::from_mode(0o666))
            .tempfile_in(through)
            .map_err(|e| WorkspaceError::io(dir, e))?;
        Ok(SpareFile { file, _dir: held })
    }

    /// [`write_atomic_unsynced`] into this file: `path` must be in the directory it was made in.
    pub fn write_to(mut self, path: &Path, contents: &[u8]) -> Result<()> {
        self.file
            .write_all(contents)
            .map_err(|e| WorkspaceError::io(path, e))?;
        let held = beneath(path)?;
        let target = held.as_ref().map_or(path, |b| b.path.as_path());
        self.file
            .persist(target)
            .map_err(|e| WorkspaceError::io(path, e.error))?;
        Ok(())
    }
}

/// Writes `contents` to `path` atomically only if `path` does not exist yet.
///
/// Returns `Ok(false)` when another writer got there first; exactly one of any number of
/// racing writers sees `Ok(true)`.
pub(crate) fn create_atomic(path: &Path, contents: &[u8]) -> Result<bool> {
    let held = beneath(path)?;
    let target = held.as_ref().map_or(path, |b| b.path.as_path());
    let tmp = temp_beside(target, path, contents)?;
    match tmp.persist_noclobber(target) {
        Ok(_) => Ok(true),
        Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(WorkspaceError::io(path, e.error)),
    }
}

/// The directory `path` is in.
fn parent(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new("."))
}

/// A directory in `.ralph/`, held open, and a path to a file in it that goes through the held
/// handle (`/proc/self/fd/N/name`), so that what the path names cannot change under ralph.
#[derive(Debug)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
struct Beneath {
    _dir: OwnedFd,
    path: PathBuf,
}

/// `path`'s directory, when `path` is a file inside a `.ralph/`, opened from the project root
/// (the directory that holds `.ralph/`) with `openat2` and `RESOLVE_BENEATH |
/// RESOLVE_NO_SYMLINKS`: no step may be a symlink or leave the project root, so an agent that
/// swaps `.ralph/` or `.ralph/logs/` for a link mid-run gets a refusal, not ralph's files
/// written where the link points. `None` for a path outside any `.ralph/` (`RALPH_TASK.md`),
/// and on a kernel without `openat2` (before Linux 5.6) or without `/proc`, where only the
/// last step is checked (`O_NOFOLLOW`).
#[cfg(target_os = "linux")]
fn beneath(path: &Path) -> Result<Option<Beneath>> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    use std::path::Component;
    let parts: Vec<Component<'_>> = path.components().collect();
    let Some(at) = parts.iter().rposition(|c| c.as_os_str() == DIR_NAME) else {
        return Ok(None);
    };
    let (Some(name), true) = (path.file_name(), at + 1 < parts.len()) else {
        return Ok(None);
    };
    let root: PathBuf = parts[..at].iter().collect();
    let inside: PathBuf = parts[at..parts.len() - 1].iter().collect();
    let root = if root.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        root
    };
    let dir_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let opened = rustix::fs::open(&root, dir_flags, Mode::empty()).and_then(|root| {
        rustix::fs::openat2(
            &root,
            &inside,
            dir_flags,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS,
        )
    });
    let dir = match opened {
        Ok(dir) => dir,
        Err(Errno::NOSYS) => return Ok(None),
        Err(e) if e == Errno::XDEV => {
            return Err(WorkspaceError::Symlink {
                path: root.join(&inside),
            });
        }
        Err(e) => return Err(WorkspaceError::io(&root.join(&inside), e.into())),
    };
    use std::os::fd::AsRawFd;
    let through = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
    if !through.is_dir() {
        return Ok(None);
    }
    Ok(Some(Beneath {
        path: through.join(name),
        _dir: dir,
    }))
}

/// Where there is no `openat2` (macOS, the BSDs), only the last step is checked
/// (`O_NOFOLLOW`); see docs/platforms.md.
#[cfg(not(target_os = "linux"))]
#[allow(clippy::unnecessary_wraps)]
fn beneath(_path: &Path) -> Result<Option<Beneath>> {
    Ok(None)
}

/// A synced temporary file beside `target` holding `contents`, to be renamed to it; errors name
/// `path` (what `target` reaches, through a held directory).
fn temp_beside(target: &Path, path: &Path, contents: &[u8]) -> Result<tempfile::NamedTempFile> {
    use std::os::unix::fs::PermissionsExt;
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .permissions(fs::Permissions::from_mode(0o666))
        .tempfile_in(parent(target))
        .map_err(|e| WorkspaceError::io(path, e))?;
    tmp.write_all(contents)
        .map_err(|e| WorkspaceError::io(path, e))?;
    tmp.as_file()
        .sync_data()
        .map_err(|e| WorkspaceError::io(path, e))?;
    Ok(tmp)
}

/// Appends `contents` to `path` (created if missing) without following a symlink, nor into a
/// file with another name (a hard link: [`open_plain`]), whole or not at all.
///
/// Used for logs that only ralph writes (`events.jsonl`, `clarifications.md`); each call is one
/// `write`, so a reader never sees half a line. Should the write fail part way (the disk is
/// full), the file is cut back to where it was, or removed if this call created it: a failed
/// append leaves no half entry and no empty file behind.
pub fn append(path: &Path, contents: &[u8]) -> Result<()> {
    append_with(path, contents, |file, bytes| file.write_all(bytes))
}

/// [`append`], with the write itself given: the seam through which a test makes it fail.
pub(crate) fn append_with(
    path: &Path,
    contents: &[u8],
    write: impl FnOnce(&mut File, &[u8]) -> io::Result<()>,
) -> Result<()> {
    let existed = fs::symlink_metadata(path).is_ok();
    let (mut file, start) = open_plain_sized(OpenOptions::new().append(true).create(true), path)
        .map_err(|e| WorkspaceError::io(path, e))?;
    let Err(error) = write(&mut file, contents) else {
        return Ok(());
    };
    // Best effort: what cannot be undone is reported with the write's own error.
    if existed {
        let _ = file.set_len(start);
    } else {
        drop(file);
        let _ = fs::remove_file(path);
    }
    Err(WorkspaceError::io(path, error))
}

/// What [`read_bounded`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Bounded {
    /// The bytes read, at most the limit.
    pub bytes: Vec<u8>,
    /// The file's full size, when it was larger than the limit.
    pub cut_from: Option<u64>,
}

impl Bounded {
    /// The contents as text (invalid UTF-8 replaced), with a note when the file was cut.
    pub(crate) fn text_with_note(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.bytes).into_owned();
        if let Some(size) = self.cut_from {
            text.push_str(&format!(
                "\n\n[ralph: this file is {size} bytes; only the first {} are shown]\n",
                self.bytes.len()
            ));
        }
        text
    }
}

/// Opens `path` with `options` as a plain file: never through a symlink, at any step below the
/// project root (the directories through `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`
/// where Linux has it, the file itself with `O_NOFOLLOW`; `ELOOP`, reported as
/// [`WorkspaceError::Symlink`]), never a file
/// with more than one name (a hard link), and never a pipe, device or directory, which could block the
/// open or every read after it (an agent can plant a FIFO in `.ralph/`): those are refused at
/// once, without waiting for a partner.
pub fn open_plain(options: &mut OpenOptions, path: &Path) -> io::Result<File> {
    open_plain_sized(options, path).map(|(file, _)| file)
}

/// [`open_plain`], with the file's size from the same `fstat`.
fn open_plain_sized(options: &mut OpenOptions, path: &Path) -> io::Result<(File, u64)> {
    let not_plain = || {
        io::Error::other(
            "not a plain file (a pipe, a device or a directory); ralph reads and writes only plain files in .ralph/. Remove it and run again",
        )
    };
    let held = beneath(path).map_err(|e| match e {
        WorkspaceError::Symlink { .. } => io::Error::from_raw_os_error(Errno::LOOP.raw_os_error()),
        WorkspaceError::Io { error, .. } => error,
        WorkspaceError::Locked { .. } => io::Error::other(e.to_string()),
    })?;
    let path = held.as_ref().map_or(path, |b| b.path.as_path());
    let file = options
        .custom_flags(
            (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK)
                .bits()
                .cast_signed(),
        )
        .open(path)
        // A FIFO opened to write, with no reader: refused at once (`ENXIO`).
        .map_err(|e| match e.raw_os_error() {
            Some(e) if e == Errno::NXIO.raw_os_error() => not_plain(),
            _ => e,
        })?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(not_plain());
    }
    {
        use std::os::unix::fs::MetadataExt;
        // Another name for the same file may be anywhere on this filesystem, `~/.bashrc`
        // included: writing or appending here would change it, reading would show it.
        if meta.nlink() > 1 {
            return Err(io::Error::other(format!(
                "has {} hard links: another name for this file may be outside the workspace, so ralph neither reads nor writes it. Remove it and run again",
                meta.nlink()
            )));
        }
    }
    Ok((file, meta.len()))
}

/// [`open_plain`] to read, with the file's size; `Ok(None)` if it does not exist.
fn open_to_read(path: &Path) -> Result<Option<(File, u64)>> {
    match open_plain_sized(OpenOptions::new().read(true), path) {
        Ok(opened) => Ok(Some(opened)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(WorkspaceError::io(path, e)),
    }
}

/// Reads at most `limit` bytes of `path`, refusing symlinks and anything but a plain file;
/// `Ok(None)` if it does not exist.
pub(crate) fn read_bounded(path: &Path, limit: usize) -> Result<Option<Bounded>> {
    let Some((file, size)) = open_to_read(path)? else {
        return Ok(None);
    };
    let mut bytes = Vec::with_capacity(size.min(limit as u64) as usize);
    file.take(limit as u64)
        .read_to_end(&mut bytes)
        .map_err(|e| WorkspaceError::io(path, e))?;
    let cut_from = (size > limit as u64).then_some(size);
    Ok(Some(Bounded { bytes, cut_from }))
}

/// Reads a small text file from `.ralph/` (cut, with a note, at 1 MiB: a runaway agent cannot
/// make ralph allocate gigabytes); `None` if missing.
pub fn read_text(path: &Path) -> Result<Option<String>> {
    Ok(read_bounded(path, MAX_READ_BYTES)?.map(|b| b.text_with_note()))
}

/// Reads the end of a text log from `.ralph/` that grows at its end (`progress.md`): at most
/// the last 1 MiB, from the first line that starts within it, with a note first when
/// older lines were left out; `None` if missing. The newest notes matter most: a log cut at
/// its start, as [`read_text`] cuts, would lose exactly those.
pub fn read_text_tail(path: &Path) -> Result<Option<String>> {
    read_tail(path, MAX_READ_BYTES)
}

fn read_tail(path: &Path, limit: usize) -> Result<Option<String>> {
    let Some((mut file, size)) = open_to_read(path)? else {
        return Ok(None);
    };
    let io_err = |e| WorkspaceError::io(path, e);
    let skip = size.saturating_sub(limit as u64);
    io::Seek::seek(&mut file, io::SeekFrom::Start(skip)).map_err(io_err)?;
    let mut bytes = Vec::with_capacity(size.min(limit as u64) as usize);
    // The file may grow while it is read: what is past `limit` now is for the next read.
    file.take(limit as u64)
        .read_to_end(&mut bytes)
        .map_err(io_err)?;
    if skip == 0 {
        return Ok(Some(String::from_utf8_lossy(&bytes).into_owned()));
    }
    // Whole lines only: from just after the first newline (a line longer than the limit is
    // shown from a character's start).
    let from = bytes.iter().position(|&b| b == b'\n').map_or_else(
        || {
            bytes
                .iter()
                .position(|&b| !(0x80..0xC0).contains(&b))
                .unwrap_or(bytes.len())
        },
        |nl| nl + 1,
    );
    let shown = &bytes[from..];
    Ok(Some(format!(
        "[ralph: this file is {size} bytes; only its last {} are shown, its oldest lines left out]\n\n{}",
        shown.len(),
        String::from_utf8_lossy(shown)
    )))
}

/// Removes `path` if it exists (a symlink is removed itself, never its target).
pub(crate) fn remove(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(WorkspaceError::io(path, e)),
    }
}

/// Removes `path` if what it holds now (its first `limit` bytes) passes `unchanged`: a file
/// this process wrote or read, taken back only if nobody has replaced it since. Whether it was
/// removed.
pub(crate) fn remove_if(
    path: &Path,
    limit: usize,
    unchanged: impl FnOnce(&[u8]) -> bool,
) -> Result<bool> {
    match read_bounded(path, limit)? {
        Some(now) if unchanged(&now.bytes) => remove(path).map(|()| true),
        _ => Ok(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_tail_keeps_the_newest_whole_lines_of_a_long_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("progress.md");
        assert_eq!(read_tail(&path, 16).unwrap(), None);
        fs::write(&path, "short\n").unwrap();
        assert_eq!(read_tail(&path, 16).unwrap().as_deref(), Some("short\n"));

        fs::write(&path, "old line one\nold two\nnewest\n").unwrap();
        let tail = read_tail(&path, 16).unwrap().unwrap();
        assert!(
            tail.starts_with("[ralph: this file is 28 bytes; only its last 15 are shown"),
            "{tail}"
        );
        assert!(tail.ends_with("]\n\nold two\nnewest\n"), "{tail}");
        let tail = read_tail(&path, 14).unwrap().unwrap();
        assert!(tail.ends_with("]\n\nnewest\n"), "{tail}");

        // One line longer than the limit: its end, from a character's start.
        fs::write(&path, "ééééééééé").unwrap();
        let tail = read_tail(&path, 5).unwrap().unwrap();
        assert!(tail.ends_with("\n\néé"), "{tail}");
    }

    /// Regression: files came out `rw-------` whatever the umask, `RALPH_TASK.md` included.
    #[test]
    fn files_written_get_the_mode_any_new_file_gets() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let mode = |name: &str| {
            fs::metadata(dir.path().join(name))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        fs::write(dir.path().join("plain"), "x").unwrap();
        write_atomic(&dir.path().join("atomic"), b"x").unwrap();
        write_atomic_unsynced(&dir.path().join("unsynced"), b"x").unwrap();
        assert!(create_atomic(&dir.path().join("created"), b"x").unwrap());
        let expected = mode("plain");
        for name in ["atomic", "unsynced", "created"] {
            assert_eq!(mode(name), expected, "{name}: {:o}", mode(name));
        }
    }

    #[test]
    fn write_atomic_replaces_a_symlink_instead_of_writing_through_it() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside.txt");
        fs::write(&outside, "precious").unwrap();
        let link = dir.path().join("answer.md");
        std::os::unix::fs::symlink(&outside, &link).unwrap();

        write_atomic(&link, b"answer").unwrap();

        assert_eq!(fs::read_to_string(&outside).unwrap(), "precious");
        assert!(
            !fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read_to_string(&link).unwrap(), "answer");
    }

    /// A prompt file made ahead of time becomes the file, like `write_atomic_unsynced`
    /// (replacing a symlink, not following it); unused, it leaves nothing behind.
    #[test]
    fn a_spare_file_becomes_the_file_or_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside.txt");
        fs::write(&outside, "precious").unwrap();
        let link = dir.path().join("iter-0001.prompt.md");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        SpareFile::new_in(dir.path())
            .unwrap()
            .write_to(&link, b"the prompt")
            .unwrap();
        assert_eq!(fs::read_to_string(&link).unwrap(), "the prompt");
        assert_eq!(fs::read_to_string(&outside).unwrap(), "precious");
        drop(SpareFile::new_in(dir.path()).unwrap());
        let mut names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["iter-0001.prompt.md", "outside.txt"]);
    }

    #[test]
    fn read_refuses_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("secret");
        fs::write(&outside, "secret").unwrap();
        let link = dir.path().join("question.md");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        let err = read_bounded(&link, 100).unwrap_err();
        assert!(matches!(err, WorkspaceError::Symlink { .. }), "{err}");
    }

    #[test]
    fn read_bounded_cuts_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        fs::write(&path, vec![b'a'; 1000]).unwrap();
        let b = read_bounded(&path, 10).unwrap().unwrap();
        assert_eq!(b.bytes.len(), 10);
        assert_eq!(b.cut_from, Some(1000));
        assert!(b.text_with_note().contains("1000 bytes"));
    }

    /// A write that stops part way with ENOSPC, as on a full disk.
    fn disk_full(file: &mut File, bytes: &[u8]) -> io::Result<()> {
        file.write_all(&bytes[..bytes.len() / 2])?;
        Err(io::Error::from_raw_os_error(Errno::NOSPC.raw_os_error()))
    }

    #[test]
    fn an_append_that_fails_part_way_leaves_the_file_as_it_was_or_no_file() {
        // Regression: a full disk left clarifications.md at 0 bytes, and every later entry
        // without its title.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("clarifications.md");
        let err = append_with(&path, b"# Title\n\nfirst entry\n", disk_full).unwrap_err();
        assert!(err.to_string().contains("No space left on device"), "{err}");
        assert!(!path.exists(), "a file it created is removed");

        append(&path, b"# Title\n\nfirst entry\n").unwrap();
        append_with(&path, b"\nsecond entry, cut\n", disk_full).unwrap_err();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "# Title\n\nfirst entry\n"
        );
    }

    #[test]
    fn create_atomic_lets_exactly_one_writer_win() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("answer.md");
        let wins: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..16)
                .map(|i| {
                    let path = &path;
                    s.spawn(move || create_atomic(path, format!("{i}").as_bytes()).unwrap())
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap() as usize)
                .sum()
        });
        assert_eq!(wins, 1);
    }

    #[test]
    fn ensure_refuses_a_symlinked_ralph_dir() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), dir.path().join(DIR_NAME)).unwrap();
        let ws = Workspace::new(dir.path());
        assert!(matches!(ws.ensure(), Err(WorkspaceError::Symlink { .. })));
    }

    #[test]
    fn second_lock_names_the_first_holder() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path());
        ws.ensure().unwrap();
        let _held = ws.lock().unwrap();
        assert!(ws.is_locked());
        match ws.lock() {
            Err(WorkspaceError::Locked { pid, .. }) => {
                assert_eq!(pid, std::process::id().to_string())
            }
            other => panic!("expected Locked, got {other:?}"),
        }
    }
}
