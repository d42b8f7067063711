//! What the loop asks of other processes by pid, and of programs on disk: whether a process
//! lives, when it started, whether a file can be run. Linux's `/proc` answers what `kill(2)`
//! cannot; where there is no `/proc`, the answers lean towards "alive" and "unknown".

use std::path::Path;
use std::time::{Duration, SystemTime};

/// Whether a process with this pid exists and has not exited.
///
/// `kill(pid, 0)` says whether the pid exists (EPERM means it does, owned by someone else).
/// A zombie (exited, not yet reaped) still exists by that test, so its state in `/proc` is
/// checked too.
pub fn is_alive(pid: u32) -> bool {
    // 0 and negative pids mean process groups to kill(2): never a process of ours.
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    if raw <= 0 {
        return false;
    }
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None) {
        Ok(()) | Err(nix::errno::Errno::EPERM) => !is_zombie(pid),
        Err(_) => false,
    }
}

/// What `/proc/PID/stat` says of a process: the fields ralph uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// The state (field 3): `R`, `S`, `Z` (a zombie), `X` (dead), ...
    pub state: char,
    /// The parent's pid (field 4).
    pub parent: i32,
    /// The process group (field 5).
    pub group: i32,
    /// When it started, in clock ticks after boot (field 22).
    pub start_ticks: u64,
}

impl ProcStat {
    /// Whether the process has exited (a zombie not yet reaped, or dead).
    pub fn exited(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }
}

/// `/proc/PID/stat` of process `pid`; `None` where there is no such file (no such process, or
/// no `/proc`).
pub fn stat(pid: u32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// Parses a `/proc/PID/stat` line. The command name, in parentheses, may itself hold spaces
/// and parentheses: the fields are read after the last `)`.
fn parse_stat(text: &str) -> Option<ProcStat> {
    let (_, rest) = text.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let parent = fields.next()?.parse().ok()?;
    let group = fields.next()?.parse().ok()?;
    // Fields 6 to 21, then the start time.
    let start_ticks = fields.nth(16)?.parse().ok()?;
    Some(ProcStat {
        state,
        parent,
        group,
        start_ticks,
    })
}

/// The pids in `/proc`: every process there is; `None` where `/proc` cannot be read.
pub fn pids() -> Option<Vec<i32>> {
    let entries = std::fs::read_dir("/proc").ok()?;
    Some(
        entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .collect(),
    )
}

/// Whether `/proc` says the process is a zombie; `false` where there is no `/proc`.
fn is_zombie(pid: u32) -> bool {
    stat(pid).is_some_and(|s| s.state == 'Z')
}

/// When process `pid` started: field 22 of `/proc/PID/stat` (clock ticks after boot) plus
/// `btime` of `/proc/stat`, to the second; `None` where that cannot be read.
pub fn started_at(pid: u32) -> Option<SystemTime> {
    let ticks = stat(pid)?.start_ticks;
    let per_second = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .and_then(|t| u64::try_from(t).ok())
        .filter(|&t| t > 0)?;
    let boot: u64 = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    let millis = ticks.checked_mul(1000)? / per_second;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(boot) + Duration::from_millis(millis))
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
    fn a_stat_line_is_read_after_the_last_parenthesis() {
        let line = "4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 123456 1000 10 18446744073709551615";
        assert_eq!(
            parse_stat(line),
            Some(ProcStat {
                state: 'S',
                parent: 1,
                group: 4242,
                start_ticks: 123456
            })
        );
        assert_eq!(parse_stat("4242 (cut"), None);
        let me = stat(std::process::id()).unwrap();
        assert!(!me.exited());
        assert_eq!(me.group, nix::unistd::getpgrp().as_raw());
    }

    #[test]
    fn only_executable_files_are_executable() {
        assert!(is_executable(Path::new("/bin/sh")));
        assert!(!is_executable(Path::new("/")));
        assert!(!is_executable(Path::new("/etc/hostname-that-is-not-there")));
    }
}
