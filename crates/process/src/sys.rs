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

/// The fields of `/proc/PID/stat` after the command name, from the state (field 3) on; `None`
/// where there is no such file.
pub fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name, in parentheses, may itself hold spaces and parentheses: look after
    // the last `)`.
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// Whether `/proc` says the process is a zombie; `false` where there is no `/proc`.
fn is_zombie(pid: u32) -> bool {
    stat_fields(pid).is_some_and(|f| f.first().is_some_and(|state| state == "Z"))
}

/// When process `pid` started: field 22 of `/proc/PID/stat` (clock ticks after boot) plus
/// `btime` of `/proc/stat`, to the second; `None` where that cannot be read.
pub fn started_at(pid: u32) -> Option<SystemTime> {
    let ticks: u64 = stat_fields(pid)?.get(19)?.parse().ok()?;
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
    fn only_executable_files_are_executable() {
        assert!(is_executable(Path::new("/bin/sh")));
        assert!(!is_executable(Path::new("/")));
        assert!(!is_executable(Path::new("/etc/hostname-that-is-not-there")));
    }
}
