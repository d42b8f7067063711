//! The Linux backend of [`sys`](super): `/proc` read directly, and the child subreaper.

use std::io;
use std::time::{Duration, SystemTime};

use super::ProcStat;

/// `/proc/PID/stat` of process `pid`; `None` where there is no such file (no such process).
pub(super) fn stat(pid: u32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text).map(|(stat, _)| stat)
}

/// Parses a `/proc/PID/stat` line, with the start time in clock ticks after boot (field 22).
/// The command name, in parentheses, may itself hold spaces and parentheses: the fields are
/// read after the last `)`.
fn parse_stat(text: &str) -> Option<(ProcStat, u64)> {
    let (_, rest) = text.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let parent = fields.next()?.parse().ok()?;
    let group = fields.next()?.parse().ok()?;
    // Fields 6 to 21, then the start time.
    let start_ticks = fields.nth(16)?.parse().ok()?;
    Some((
        ProcStat {
            state,
            parent,
            group,
        },
        start_ticks,
    ))
}

/// Every process there is, with what `/proc` says of it; `None` where `/proc` cannot be read.
pub(super) fn processes() -> Option<Vec<(i32, ProcStat)>> {
    let entries = std::fs::read_dir("/proc").ok()?;
    Some(
        entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter_map(|pid| Some((pid, stat(u32::try_from(pid).ok()?)?)))
            .collect(),
    )
}

/// When process `pid` started: field 22 of `/proc/PID/stat` (clock ticks after boot) plus
/// `btime` of `/proc/stat`, to the second; `None` where that cannot be read.
pub(super) fn started_at(pid: u32) -> Option<SystemTime> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, ticks) = parse_stat(&text)?;
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

/// Whether process `pid`'s environment (`/proc/PID/environ`) holds `mark`, whole.
pub(super) fn environ_holds(pid: i32, mark: &[u8]) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|&b| b == 0).any(|kv| kv == mark))
}

/// The processes marked with every one of `marks`, other than `except`.
pub(super) fn marked(marks: &[&[u8]], except: i32) -> Vec<(i32, ProcStat)> {
    let mut found = processes().unwrap_or_default();
    found.retain(|&(pid, _)| pid != except && marks.iter().all(|m| environ_holds(pid, m)));
    found
}

/// The processes marked with every one of `marks`, other than `except`; all of them, whenever
/// they started (the start time would cost a read of each `stat` as well).
pub(super) fn marked_since(
    marks: &[&[u8]],
    except: i32,
    _since: SystemTime,
) -> Vec<(i32, ProcStat)> {
    marked(marks, except)
}

/// The children of this process: listed by each of its threads in `/proc` (an orphan is
/// handed to one of them); where the kernel does not list them, every process whose parent
/// this one is.
pub(super) fn own_children() -> Vec<i32> {
    let mut children = Vec::new();
    let listed = std::fs::read_dir("/proc/self/task").is_ok_and(|tasks| {
        tasks.flatten().all(|task| {
            std::fs::read_to_string(task.path().join("children")).is_ok_and(|list| {
                children.extend(
                    list.split_ascii_whitespace()
                        .filter_map(|p| p.parse::<i32>().ok()),
                );
                true
            }) || !task.path().exists()
        })
    });
    if listed {
        return children;
    }
    super::children_in_table()
}

/// Makes this process the subreaper of every process it starts (`PR_SET_CHILD_SUBREAPER`).
pub(super) fn become_subreaper() -> io::Result<()> {
    nix::sys::prctl::set_child_subreaper(true)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_is_read_after_the_last_parenthesis() {
        let line = "4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 123456 1000 10 18446744073709551615";
        assert_eq!(
            parse_stat(line),
            Some((
                ProcStat {
                    state: 'S',
                    parent: 1,
                    group: 4242,
                },
                123456
            ))
        );
        assert_eq!(parse_stat("4242 (cut"), None);
    }
}
