//! The portable backend of [`sys`](super): the process table through `sysinfo` (sysctl and
//! libproc on macOS, sysctl on FreeBSD, `/proc` inside sysinfo on Linux), and no subreaper.
//!
//! Without a subreaper, a process that leaves the agent's group and outlives its parent is
//! handed to init (launchd on macOS), not to ralph, so the orphan sweep cannot find it among
//! ralph's children: it walks the whole table instead, by parent pid and by the marks in each
//! process's environment (see [`orphans`](crate::orphans)).

use std::io;
use std::time::{Duration, SystemTime};

use sysinfo::{
    Pid, Process, ProcessRefreshKind, ProcessStatus, ProcessesToUpdate, System, UpdateKind,
};

use super::ProcStat;

/// The table, or the processes in `which`, as sysinfo reads them: pid, parent, state and start
/// time always; the environment only when `environ`.
fn snapshot(which: ProcessesToUpdate<'_>, environ: bool) -> System {
    // Without tasks: on Linux sysinfo would otherwise list every thread as a process of its
    // own, reading each process's `task/` directory (the question-shown bench went from a few
    // milliseconds to 190 ms with them on a loaded machine).
    let kind = ProcessRefreshKind::nothing().without_tasks();
    let kind = if environ {
        kind.with_environ(UpdateKind::Always)
    } else {
        kind
    };
    // On Linux sysinfo keeps each process's `stat` file open between refreshes, up to half
    // the descriptor limit: hundreds of descriptors during a snapshot that is dropped at
    // once. None kept: a snapshot opens and closes each file.
    static NO_OPEN_FILES: std::sync::Once = std::sync::Once::new();
    NO_OPEN_FILES.call_once(|| {
        sysinfo::set_open_files_limit(0);
    });
    let mut system = System::new();
    system.refresh_processes_specifics(which, true, kind);
    system
}

/// The `/proc`-style state letter of a sysinfo status: `Z` for a zombie and `X` for a dead
/// process are the ones ralph acts on.
fn letter(status: ProcessStatus) -> char {
    match status {
        ProcessStatus::Zombie => 'Z',
        ProcessStatus::Dead => 'X',
        ProcessStatus::Run => 'R',
        ProcessStatus::Sleep | ProcessStatus::Idle => 'S',
        ProcessStatus::Stop => 'T',
        ProcessStatus::UninterruptibleDiskSleep => 'D',
        _ => '?',
    }
}

fn raw(pid: Pid) -> i32 {
    i32::try_from(pid.as_u32()).unwrap_or(0)
}

fn stat_of(pid: Pid, process: &Process) -> ProcStat {
    // sysinfo does not read the process group; getpgid(2) does, on every Unix.
    let group = nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(raw(pid))))
        .map_or(0, nix::unistd::Pid::as_raw);
    ProcStat {
        state: letter(process.status()),
        parent: process.parent().map_or(0, raw),
        group,
    }
}

/// What the table says of process `pid`; `None` where it has no such process.
pub(super) fn stat(pid: u32) -> Option<ProcStat> {
    let pid = Pid::from_u32(pid);
    let system = snapshot(ProcessesToUpdate::Some(&[pid]), false);
    system.process(pid).map(|p| stat_of(pid, p))
}

/// Every process in the table, with what it says of each; `None` where the table is empty
/// (sysinfo cannot read it on this system).
pub(super) fn processes() -> Option<Vec<(i32, ProcStat)>> {
    let system = snapshot(ProcessesToUpdate::All, false);
    let table: Vec<(i32, ProcStat)> = system
        .processes()
        .iter()
        .map(|(&pid, p)| (raw(pid), stat_of(pid, p)))
        .collect();
    (!table.is_empty()).then_some(table)
}

/// When process `pid` started, to the second.
pub(super) fn started_at(pid: u32) -> Option<SystemTime> {
    let pid = Pid::from_u32(pid);
    let system = snapshot(ProcessesToUpdate::Some(&[pid]), false);
    let seconds = system.process(pid)?.start_time();
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(seconds))
}

/// Whether `process`'s environment holds `mark`, whole.
fn holds(process: &Process, mark: &[u8]) -> bool {
    process
        .environ()
        .iter()
        .any(|kv| kv.as_encoded_bytes() == mark)
}

/// Whether process `pid`'s environment holds `mark`, whole; `false` where it cannot be read
/// (another user's process, one that has exited).
pub(super) fn environ_holds(pid: i32, mark: &[u8]) -> bool {
    let Ok(pid) = u32::try_from(pid).map(Pid::from_u32) else {
        return false;
    };
    let system = snapshot(ProcessesToUpdate::Some(&[pid]), true);
    system.process(pid).is_some_and(|p| holds(p, mark))
}

/// The processes marked with every one of `marks`, other than `except`: one read of the
/// table with the environments.
pub(super) fn marked(marks: &[&[u8]], except: i32) -> Vec<(i32, ProcStat)> {
    let system = snapshot(ProcessesToUpdate::All, true);
    system
        .processes()
        .iter()
        .filter(|&(&pid, p)| raw(pid) != except && marks.iter().all(|m| holds(p, m)))
        .map(|(&pid, p)| (raw(pid), stat_of(pid, p)))
        .collect()
}

/// The processes marked with every one of `marks`, other than `except`, among those that
/// started at `since` or later: one read of the table without environments, then the
/// environments of the few that started since.
pub(super) fn marked_since(
    marks: &[&[u8]],
    except: i32,
    since: SystemTime,
) -> Vec<(i32, ProcStat)> {
    let since = since
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let system = snapshot(ProcessesToUpdate::All, false);
    let recent: Vec<Pid> = system
        .processes()
        .iter()
        .filter(|&(&pid, p)| raw(pid) != except && p.start_time() >= since)
        .map(|(&pid, _)| pid)
        .collect();
    if recent.is_empty() {
        return Vec::new();
    }
    let system = snapshot(ProcessesToUpdate::Some(&recent), true);
    system
        .processes()
        .iter()
        .filter(|&(_, p)| marks.iter().all(|m| holds(p, m)))
        .map(|(&pid, p)| (raw(pid), stat_of(pid, p)))
        .collect()
}

/// The children of this process: every process whose parent it is.
pub(super) fn own_children() -> Vec<i32> {
    super::children_in_table()
}

/// No subreaper: macOS has none (FreeBSD's `procctl(PROC_REAP_ACQUIRE)` is not used), so an
/// orphan goes to init, and the sweep finds it in the table by its marks instead.
pub(super) fn become_subreaper() -> io::Result<()> {
    Ok(())
}
