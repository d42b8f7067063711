//! What the loop asks of other processes by pid, and of programs on disk: whether a process
//! lives, when it started, its parent and group, what its environment holds, whether a file
//! can be run.
//!
//! Two backends answer, behind this one API: `linux` reads `/proc` directly and makes ralph
//! the subreaper of what it starts; `portable` (macOS, the BSDs, and Linux with the
//! `portable` feature) reads the process table through `sysinfo` and has no subreaper. Which
//! one is built is [`BACKEND`].

use std::io;
use std::path::Path;
use std::time::{Duration, SystemTime};

#[cfg(all(target_os = "linux", not(feature = "portable")))]
mod linux;
#[cfg(all(target_os = "linux", not(feature = "portable")))]
use linux as backend;
#[cfg(any(not(target_os = "linux"), feature = "portable"))]
mod portable;
#[cfg(any(not(target_os = "linux"), feature = "portable"))]
use portable as backend;

/// The backend built in: `"linux"` (`/proc`, the child subreaper, inotify) or `"portable"`
/// (`sysinfo`, a walk of the process table, `notify`).
pub const BACKEND: &str = if cfg!(all(target_os = "linux", not(feature = "portable"))) {
    "linux"
} else {
    "portable"
};

/// Whether an orphan of what ralph starts is handed to ralph (its subreaper once
/// [`adopt`](fn@crate::adopt) ran): with the Linux backend it is; with the portable one it goes
/// to init, and only the table finds it.
pub const SUBREAPER: bool = cfg!(all(target_os = "linux", not(feature = "portable")));

/// Whether a process with this pid exists and has not exited.
///
/// `kill(pid, 0)` says whether the pid exists (EPERM means it does, owned by someone else).
/// A zombie (exited, not yet reaped) still exists by that test, so its state is checked too.
pub fn is_alive(pid: u32) -> bool {
    // 0 and negative pids mean process groups to kill(2): never a process of ours.
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    if raw <= 0 {
        return false;
    }
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None) {
        Ok(()) | Err(nix::errno::Errno::EPERM) => stat(pid).is_none_or(|s| s.state != 'Z'),
        Err(_) => false,
    }
}

/// What the system says of a process: the fields ralph uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// The state, as `/proc` letters it: `R`, `S`, `Z` (a zombie), `X` (dead), ...
    pub state: char,
    /// The parent's pid (0 when unknown).
    pub parent: i32,
    /// The process group (0 when unknown).
    pub group: i32,
}

impl ProcStat {
    /// Whether the process has exited (a zombie not yet reaped, or dead).
    pub fn exited(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }
}

/// What the system says of process `pid`; `None` where it has no such process (or cannot
/// say).
pub fn stat(pid: u32) -> Option<ProcStat> {
    backend::stat(pid)
}

/// Every process there is, with its [`ProcStat`]; `None` where the table cannot be read.
pub fn processes() -> Option<Vec<(i32, ProcStat)>> {
    backend::processes()
}

/// When process `pid` started, to the second; `None` where that cannot be read.
pub fn started_at(pid: u32) -> Option<SystemTime> {
    backend::started_at(pid)
}

/// Whether process `pid`'s environment holds `mark` (`NAME=value`), as a whole entry.
pub(crate) fn environ_holds(pid: i32, mark: &[u8]) -> bool {
    backend::environ_holds(pid, mark)
}

/// The processes, other than `except`, whose environment holds every one of `marks` as a
/// whole entry, with their [`ProcStat`]s.
pub(crate) fn marked(marks: &[&[u8]], except: i32) -> Vec<(i32, ProcStat)> {
    backend::marked(marks, except)
}

/// [`marked`], among the processes that started at `since` or later (where the backend can
/// tell cheaply: the portable one reads only their environments).
pub(crate) fn marked_since(
    marks: &[&[u8]],
    except: i32,
    since: SystemTime,
) -> Vec<(i32, ProcStat)> {
    backend::marked_since(marks, except, since)
}

/// The pids of this process's children.
pub(crate) fn own_children() -> Vec<i32> {
    backend::own_children()
}

/// Every process in the table whose parent this process is.
fn children_in_table() -> Vec<i32> {
    let me = nix::unistd::getpid().as_raw();
    processes()
        .unwrap_or_default()
        .into_iter()
        .filter(|(_, s)| s.parent == me)
        .map(|(pid, _)| pid)
        .collect()
}

/// Makes this process the subreaper of every process it starts where the backend can
/// ([`SUBREAPER`]); elsewhere does nothing.
pub(crate) fn become_subreaper() -> io::Result<()> {
    backend::become_subreaper()
}

/// Whether the process that had `pid` at `since` is gone: no process has the pid now, or the
/// one that has it started after `since` (the pid was reused). Start times are known to a
/// second, so "after" means more than two seconds after.
pub fn gone_since(pid: u32, since: SystemTime) -> bool {
    if !is_alive(pid) {
        return true;
    }
    started_at(pid).is_some_and(|start| start > since + Duration::from_secs(2))
}

/// Whether `path` is a file anyone may execute.
pub fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_zero_and_dead_pids_are_not_alive() {
        assert!(!is_alive(0));
        assert!(!is_alive(u32::MAX));
        // Above any pid_max (2^22 at most): no such process.
        assert!(!is_alive(1 << 23));
        assert!(is_alive(std::process::id()));
    }

    #[test]
    fn started_at_is_the_start_of_this_process() {
        let start = started_at(std::process::id()).unwrap();
        let age = SystemTime::now().duration_since(start).unwrap();
        assert!(age < Duration::from_secs(3600), "{age:?}");
        assert_eq!(started_at(1 << 23), None);
    }

    #[test]
    fn a_process_is_gone_once_its_pid_is_gone_or_reused() {
        let me = std::process::id();
        assert!(!gone_since(me, SystemTime::now()), "alive");
        // Since long before this process started: its pid was reused.
        let long_ago = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        assert!(gone_since(me, long_ago), "reused");
        // Above any pid_max (2^22 at most): no such process.
        assert!(gone_since(1 << 23, SystemTime::now()), "gone");
        assert!(gone_since(u32::MAX, SystemTime::now()), "not a pid");
    }

    #[test]
    fn this_process_is_in_the_table_with_its_parent_and_group() {
        let me = stat(std::process::id()).unwrap();
        assert!(!me.exited());
        assert_eq!(me.group, nix::unistd::getpgrp().as_raw());
        assert_eq!(me.parent, nix::unistd::getppid().as_raw());
        let table = processes().unwrap();
        let pid = nix::unistd::getpid().as_raw();
        assert!(table.iter().any(|&(p, s)| p == pid && s == me), "{BACKEND}");
    }

    #[test]
    fn a_zombie_is_not_alive() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Exited, not yet reaped: a zombie until the wait below.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while is_alive(pid) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let alive = is_alive(pid);
        child.wait().unwrap();
        assert!(!alive, "a zombie counted as alive ({BACKEND})");
    }

    #[test]
    fn only_executable_files_are_executable() {
        assert!(is_executable(Path::new("/bin/sh")));
        assert!(!is_executable(Path::new("/")));
        assert!(!is_executable(Path::new("/etc/hostname-that-is-not-there")));
    }
}
