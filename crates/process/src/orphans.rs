//! Processes that left the agent's process group, and the orphans ralph adopts.
//!
//! Stopping the agent's group ([`supervisor`]) reaches every process that
//! stayed in it. A process that left it would outlive its iteration: one started with
//! `setsid`, by a shell with job control, or by Claude Code's Bash tool, which runs every
//! command in a session of its own. When its parent exits, such a process is handed to
//! init, and nothing of ralph's can find it again short of reading every process's
//! environment.
//!
//! So `ralph run` makes itself the subreaper of everything it starts ([`adopt`]): an orphan
//! of the agent's tree becomes ralph's child instead of init's. At the end of every agent
//! run and test run, [`sweep`] looks at ralph's children (`/proc/self/task/*/children`,
//! a few small reads): a live one that carries this loop's mark (`RALPH_DIR` in its
//! environment, as every agent and test command and all they start do) is stopped like a
//! group: SIGTERM to it and its group, the grace, SIGKILL; an adopted one that has exited is
//! reaped.
//!
//! Where there is no subreaper (the portable backend: macOS, the BSDs, Linux built with
//! `portable`; see [`sys`]), an orphan goes to init, and the sweep walks the whole
//! process table instead: a live process that carries the loop's mark and either descends
//! from ralph (by parent pid) or carries this run's id too (`RALPH_RUN`) is stopped the same
//! way. It is not ralph's child, so init, not ralph, reaps it. What neither finds is a process
//! that left the group, lost its parent and cleared its environment (a daemon that
//! double-forks and execs with a clean environment): the Linux backend finds it as ralph's
//! adopted child, the portable one cannot.
//!
//! A stop's walks of the whole table (the portable sweep's look, and whether what it signalled
//! is gone, every few milliseconds) run on tokio's blocking threads, not on the thread that
//! polls the stop: the stop runs beside the loop's other work (a question shown meanwhile), and
//! a walk takes milliseconds. The Linux sweep's look, a few small reads of ralph's own
//! children, is done where the stop runs: a hand-off would cost more than it.
//!
//! Reaping is where this could hurt: a zombie that tokio or the standard library is about
//! to wait for must be left to it, or that `wait` fails and the agent's exit status is lost.
//! Every process ralph starts is therefore started through [`spawn`], which records its pid
//! under the lock the sweep holds while it looks: a child the record does not hold was not
//! started by ralph, so it was adopted. Outside `ralph run` (no [`adopt`]), the sweep does
//! nothing at all: a test binary's children are not ours to reap.
//!
//! [`adopt`]: fn@crate::adopt
//! [`spawn`]: crate::spawn

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::FusedFuture;
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Pid, getpgrp, getpid};
use tokio::time::Instant;

use crate::adopt::{adopting, started};

use crate::supervisor::{self, Stopped, blocking};
use crate::sys;

/// How many times a sweep goes back for the orphans of the processes it just stopped.
const ROUNDS: usize = 8;

/// The variable that tells the processes of one `ralph run` from those of any other: every
/// agent and test command it starts, and all they start, carry `RALPH_RUN=`[`run_id`].
pub const RUN_VAR: &str = "RALPH_RUN";

/// This process's run id, made once: its pid and the time it was first asked for, which no
/// other run has had.
pub fn run_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        format!("{}-{nanos:x}", std::process::id())
    })
}

/// The environment entry that marks the processes of the run with id `id`.
pub fn run_mark(id: &str) -> Vec<u8> {
    format!("{RUN_VAR}={id}").into_bytes()
}

/// What a [`sweep`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Swept {
    /// The processes of this loop found outside its groups, and stopped, each once.
    pub stopped: Vec<i32>,
    /// How stopping them went (the worst of the rounds); `None` when there were none.
    pub how: Option<Stopped>,
    /// Adopted processes that had exited, reaped.
    pub reaped: usize,
}

/// Stops the processes marked `mark` (`RALPH_DIR=...`, as a whole `NAME=value` entry of the
/// environment) that ralph adopted, outside `group` (the group of the agent or the tests,
/// which [`supervisor::stop_group`] stops), with `grace` between SIGTERM and SIGKILL (cut short when
/// `hurry` resolves), and reaps the adopted processes that have exited. Goes back for the
/// orphans of the ones it stopped, up to `ROUNDS` (8) times (not after one outlived SIGKILL).
/// Does nothing unless [`adopt`](fn@crate::adopt) took effect.
pub async fn sweep<F>(mark: &[u8], group: i32, grace: Duration, hurry: F) -> Swept
where
    F: Future<Output = ()>,
{
    if !adopting() {
        return Swept::default();
    }
    let mark: Arc<[u8]> = mark.into();
    let find = || look_async(Arc::clone(&mark), group);
    rounds(find, true, grace, hurry).await
}

/// How stopping a process group and what left it went ([`stop_and_sweep`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cleared {
    /// What was still in the group.
    pub group: Stopped,
    /// What had left the group, stopped outside it.
    pub swept: Swept,
    /// Whether `hurry` resolved meanwhile, cutting the graces short.
    pub hurried: bool,
}

/// Stops what an agent or a test command left when its run ended: what is still in its group
/// `pgid` ([`supervisor::stop_group`]: it closed its output, or ignored SIGTERM), then what
/// left the group and carries `mark` ([`sweep`]); `grace` between SIGTERM and SIGKILL for each.
/// Once `hurry` resolves (the human asked to stop), the rest of the graces is skipped.
pub async fn stop_and_sweep<F>(pgid: i32, mark: &[u8], grace: Duration, hurry: F) -> Cleared
where
    F: Future<Output = ()>,
{
    let hurry = hurry.fuse();
    tokio::pin!(hurry);
    let group = supervisor::stop_group(pgid, grace, hurry.as_mut()).await;
    let grace = if hurry.is_terminated() {
        Duration::ZERO
    } else {
        grace
    };
    let swept = sweep(mark, pgid, grace, hurry.as_mut()).await;
    Cleared {
        group,
        swept,
        hurried: hurry.is_terminated(),
    }
}

/// Stops what `find` finds ([`stop`]), reaps them when they are adopted children of this
/// process (`adopted`: never otherwise, or a `wait` elsewhere would lose its child), and goes
/// back for what they left, up to [`ROUNDS`] times, until `find` finds nothing (or one
/// outlived SIGKILL).
async fn rounds<F, L>(
    mut find: impl FnMut() -> L,
    adopted: bool,
    grace: Duration,
    hurry: F,
) -> Swept
where
    F: Future<Output = ()>,
    L: Future<Output = Found>,
{
    let mut swept = Swept::default();
    let hurry = hurry.fuse();
    tokio::pin!(hurry);
    let mut hurried = false;
    for _ in 0..ROUNDS {
        let Found { escapees, reaped } = find().await;
        swept.reaped += reaped;
        if escapees.is_empty() {
            break;
        }
        swept.note(&escapees);
        let how = stop(&escapees, grace, hurry.as_mut(), &mut hurried).await;
        if adopted {
            swept.reaped += escapees.iter().filter(|e| reap(e.pid)).count();
        }
        swept.how = Some(swept.how.map_or(how, |was| worse(was, how)));
        if how == Stopped::Survived {
            // Past SIGKILL (a process stuck in the kernel): another round would only wait
            // as long again.
            break;
        }
    }
    swept
}

/// Stops every process on the machine whose environment holds `mark` (`RALPH_RUN=ID`, one
/// run's [`run_mark`]), wherever it is now, as [`sweep`] stops the ones it adopted: SIGTERM to
/// it and its group (unless it has none), `grace`, SIGKILL, and again for any it started
/// meanwhile. A group in `spare` is never signalled, nor is any process in it. For the guard
/// once ralph has died without a goodbye, and for the next run once ralph and its guard both
/// have: what ralph had adopted, or had not swept yet, then belongs to init, and only its mark
/// is left to find it by. Reads the environment of every process this user may read, once a
/// round: a few milliseconds, once, after a crash.
pub async fn stop_everywhere(mark: &[u8], spare: &[i32], grace: Duration) -> Swept {
    let (mark, spare): (Arc<[u8]>, Arc<[i32]>) = (mark.into(), spare.into());
    let find = || {
        let (mark, spare) = (Arc::clone(&mark), Arc::clone(&spare));
        blocking(move || everywhere(&mark, &spare))
    };
    rounds(find, false, grace, std::future::pending()).await
}

/// The live processes marked `mark`, other than this one and those in a group in `spare`,
/// with their groups.
fn everywhere(mark: &[u8], spare: &[i32]) -> Found {
    let escapees = sys::marked(&[mark], getpid().as_raw())
        .into_iter()
        .filter(|(_, s)| !s.exited() && !spare.contains(&s.group))
        .map(|(pid, s)| Escapee {
            pid,
            group: (s.group > 1).then_some(s.group),
        })
        .collect();
    Found {
        escapees,
        reaped: 0,
    }
}

/// The process groups of this process and of each of its ancestors: the ones a cleanup of
/// another run's processes spares ([`stop_everywhere`]). Started from a shell that a process
/// of that run had started (a terminal in the `tmux` its agent left running), this process,
/// that shell and the `tmux` all carry the run's mark too.
pub fn lineage_groups() -> Vec<i32> {
    let mut groups = vec![getpgrp().as_raw()];
    let mut pid = getpid().as_raw();
    // One read of each process's stat gives its group and its parent. Bounded: a parent read
    // after its child's pid was reused could point anywhere.
    for _ in 0..64 {
        let Some(sys::ProcStat { parent, group, .. }) = stat_of(pid) else {
            break;
        };
        if !groups.contains(&group) {
            groups.push(group);
        }
        if parent <= 1 {
            break;
        }
        pid = parent;
    }
    groups
}

/// Sends SIGTERM (and SIGCONT) to the processes marked `mark` that ralph adopted outside
/// `group`, and their groups, without waiting for them, and reaps the adopted processes that have exited: for
/// when the agent or the tests have exited but something they started still holds their
/// output open. A [`sweep`] after it finishes the job.
pub fn terminate(mark: &[u8], group: i32) -> Swept {
    let mut swept = Swept::default();
    if !adopting() {
        return swept;
    }
    let Found { escapees, reaped } = look(mark, group);
    swept.reaped = reaped;
    if !escapees.is_empty() {
        signal(&escapees, Signal::SIGTERM);
        signal(&escapees, Signal::SIGCONT);
        swept.note(&escapees);
        swept.how = Some(Stopped::Terminated);
    }
    swept
}

impl Swept {
    /// What `self` and then `later` did, together.
    #[must_use]
    pub fn and(mut self, later: Swept) -> Swept {
        for pid in later.stopped {
            if !self.stopped.contains(&pid) {
                self.stopped.push(pid);
            }
        }
        self.how = match (self.how, later.how) {
            (Some(a), Some(b)) => Some(worse(a, b)),
            (a, b) => a.or(b),
        };
        self.reaped += later.reaped;
        self
    }

    /// Notes `escapees` as stopped (a process signalled before, and found still dying,
    /// counts once).
    fn note(&mut self, escapees: &[Escapee]) {
        for e in escapees {
            if !self.stopped.contains(&e.pid) {
                self.stopped.push(e.pid);
            }
        }
    }
}

/// The worse of two ways stopping went.
fn worse(a: Stopped, b: Stopped) -> Stopped {
    let rank = |s: Stopped| match s {
        Stopped::AlreadyGone => 0,
        Stopped::Terminated => 1,
        Stopped::Killed => 2,
        Stopped::Survived => 3,
    };
    if rank(a) >= rank(b) { a } else { b }
}

/// A live, marked process ralph adopted, and its group when that is neither ralph's own
/// nor none.
#[derive(Debug, Clone, Copy)]
struct Escapee {
    pid: i32,
    group: Option<i32>,
}

/// [`look`] where a sweep runs when it reads this process's children (a few small reads, less
/// than a hand-off to another thread costs); on the blocking threads when it walks the whole
/// table (no subreaper).
async fn look_async(mark: Arc<[u8]>, stopped_group: i32) -> Found {
    if sys::SUBREAPER {
        look(&mark, stopped_group)
    } else {
        blocking(move || look(&mark, stopped_group)).await
    }
}

/// What one look for processes to stop found.
#[derive(Debug, Default)]
struct Found {
    /// The live ones to stop.
    escapees: Vec<Escapee>,
    /// Adopted ones that had exited, reaped on the way.
    reaped: usize,
}

/// One look at this process's children (or, without a subreaper, at the processes of this
/// loop anywhere, [`strays`]): reaps the adopted ones that have exited and returns the live,
/// marked ones outside `stopped_group` (members of the group being stopped, still dying when
/// their parent is gone, are the group's to stop). Blocking ([`look_async`]).
fn look(mark: &[u8], stopped_group: i32) -> Found {
    let mut started = started();
    let found = if sys::SUBREAPER {
        let children = sys::own_children();
        // A child its starter has reaped is no longer one of ours: forget it, so that its
        // pid, should it come back as an adopted orphan's, is not mistaken for it.
        started.retain(|pid| children.contains(pid));
        children
    } else {
        // The same, asked of the few children it started, one by one: the table is read once,
        // by `strays`, not once more for the children (a read of every process's stat, which
        // the question shown after an agent run waited for).
        let me = getpid().as_raw();
        started.retain(|&pid| stat_of(pid).is_some_and(|s| s.parent == me));
        strays(mark)
    };
    let own_group = getpgrp().as_raw();
    let mut escapees = Vec::new();
    let mut reaped = 0;
    for pid in found {
        if started.contains(&pid) {
            continue;
        }
        let Some((state, group)) = state_and_group(pid) else {
            continue;
        };
        match state {
            'Z' => reaped += usize::from(reap(pid)),
            'X' => {}
            _ if group == stopped_group => {}
            _ if marked(pid, mark) => escapees.push(Escapee {
                pid,
                group: (group > 1 && group != own_group).then_some(group),
            }),
            // Adopted, but not this loop's (a notification command's background job): left
            // to run, and reaped once it has exited.
            _ => {}
        }
    }
    Found { escapees, reaped }
}

/// Without a subreaper: the processes marked `mark` that descend from this one (by parent
/// pid) or carry this run's id ([`run_mark`]), wherever they are now. One read of the table,
/// one of the environments.
fn strays(mark: &[u8]) -> Vec<i32> {
    let me = getpid().as_raw();
    // What this run's agents and tests started, started after this process did: only the
    // environments of those are read.
    let marked = match sys::started_at(std::process::id()) {
        Some(start) => sys::marked_since(&[mark], me, start),
        None => sys::marked(&[mark], me),
    };
    // The common case, nothing left behind: no more reads.
    if marked.is_empty() {
        return Vec::new();
    }
    let parents: std::collections::HashMap<i32, i32> = sys::processes()
        .unwrap_or_default()
        .into_iter()
        .map(|(pid, s)| (pid, s.parent))
        .collect();
    let descends = |pid: i32| {
        let mut at = pid;
        // Bounded: a parent read after its child's pid was reused could point anywhere.
        for _ in 0..64 {
            match parents.get(&at) {
                Some(&parent) if parent == me => return true,
                Some(&parent) if parent > 1 => at = parent,
                _ => return false,
            }
        }
        false
    };
    let run = run_mark(run_id());
    marked
        .into_iter()
        .map(|(pid, _)| pid)
        .filter(|&pid| descends(pid) || sys::environ_holds(pid, &run))
        .collect()
}

/// Reaps child `pid` if it has exited; whether it did.
fn reap(pid: i32) -> bool {
    matches!(
        waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)),
        Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..))
    )
}

/// SIGTERM (and SIGCONT) to each escapee and its group, up to `grace` for them to exit,
/// then SIGKILL.
async fn stop<F>(
    escapees: &[Escapee],
    grace: Duration,
    mut hurry: std::pin::Pin<&mut futures_util::future::Fuse<F>>,
    hurried: &mut bool,
) -> Stopped
where
    F: Future<Output = ()>,
{
    signal(escapees, Signal::SIGTERM);
    signal(escapees, Signal::SIGCONT);
    let watched: Arc<[Escapee]> = escapees.into();
    let gone = || {
        let watched = Arc::clone(&watched);
        blocking(move || all_gone(&watched))
    };
    let deadline = Instant::now() + grace;
    if supervisor::wait_until(gone, deadline, Some(hurry.as_mut()), hurried).await {
        return Stopped::Terminated;
    }
    signal(escapees, Signal::SIGKILL);
    let deadline = Instant::now() + Duration::from_secs(2);
    if supervisor::wait_until::<F, _>(gone, deadline, None, hurried).await {
        Stopped::Killed
    } else {
        Stopped::Survived
    }
}

fn signal(escapees: &[Escapee], signal: Signal) {
    for e in escapees {
        let _ = kill(Pid::from_raw(e.pid), signal);
        if let Some(group) = e.group {
            let _ = killpg(Pid::from_raw(group), signal);
        }
    }
}

/// Whether every escapee has exited (a zombie, or reaped) and nothing lives on in its group.
/// Blocking: run it through [`blocking`].
fn all_gone(escapees: &[Escapee]) -> bool {
    escapees.iter().all(|e| {
        state_and_group(e.pid).is_none_or(|(state, _)| matches!(state, 'Z' | 'X'))
            && e.group.is_none_or(|g| !supervisor::group_alive(g))
    })
}

/// What the system says of process `pid`.
fn stat_of(pid: i32) -> Option<sys::ProcStat> {
    sys::stat(u32::try_from(pid).ok()?)
}

/// The state and the group of process `pid`.
fn state_and_group(pid: i32) -> Option<(char, i32)> {
    stat_of(pid).map(|s| (s.state, s.group))
}

/// Whether process `pid`'s environment holds `mark`, whole.
pub(crate) fn marked(pid: i32, mark: &[u8]) -> bool {
    sys::environ_holds(pid, mark)
}

/// Whether group `pgid` is alive and one of its members is an agent or test command of the
/// `.ralph/` at `dir` (its environment names it): what the next run and the guard
/// ([`guard_main`](crate::guard_main)) check before they stop a group, since a pgid can be
/// reused.
pub fn group_is_ours(pgid: i32, dir: &std::path::Path) -> bool {
    if !supervisor::group_alive(pgid) {
        return false;
    }
    let mark = mark_of(dir);
    supervisor::live_members(pgid)
        .unwrap_or_default()
        .into_iter()
        .any(|pid| marked(pid, &mark))
}

/// `RALPH_DIR`'s value for the `.ralph/` at `dir`: what marks an agent, or a test command, as
/// this loop's, and what [`group_is_ours`] looks for; one function, so they agree.
pub fn ralph_dir_value(dir: &std::path::Path) -> String {
    std::path::absolute(dir)
        .unwrap_or_else(|_| dir.to_path_buf())
        .display()
        .to_string()
}

/// The whole `RALPH_DIR=...` entry that marks a process's environment as the `.ralph/` at
/// `dir`'s: what [`group_is_ours`] and [`sweep`] look for.
pub fn mark_of(dir: &std::path::Path) -> Vec<u8> {
    format!("RALPH_DIR={}", ralph_dir_value(dir)).into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_children_of_this_process_are_listed() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        assert!(sys::own_children().contains(&pid));
        assert_eq!(stat_of(pid).map(|s| s.parent), Some(getpid().as_raw()));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!sys::own_children().contains(&pid));
        assert_eq!(stat_of(pid), None);
    }

    #[test]
    fn the_mark_must_be_a_whole_entry() {
        let child = std::process::Command::new("sleep")
            .arg("5")
            .env("RALPH_DIR", "/p/.ralph")
            .env("OTHER", "RALPH_DIR=/q/.ralph")
            .spawn();
        let mut child = child.unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        // The environment is readable once the child has exec'd.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !marked(pid, b"RALPH_DIR=/p/.ralph") && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(marked(pid, b"RALPH_DIR=/p/.ralph"));
        assert!(!marked(pid, b"RALPH_DIR=/q/.ralph"));
        assert!(!marked(pid, b"RALPH_DIR=/p"));
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn the_lineage_holds_the_groups_of_this_process_and_its_parent() {
        let lineage = lineage_groups();
        assert_eq!(lineage[0], getpgrp().as_raw());
        let parent = stat_of(getpid().as_raw()).unwrap().parent;
        if parent > 1 {
            let group = stat_of(parent).unwrap().group;
            assert!(lineage.contains(&group), "{lineage:?}");
        }
    }

    #[test]
    fn a_spared_group_is_left_alone_with_every_process_in_it() {
        use std::os::unix::process::CommandExt;
        let id = format!("orphans-test-{}", std::process::id());
        let sleeper = || {
            let mut cmd = std::process::Command::new("sleep");
            cmd.arg("300").process_group(0).env(RUN_VAR, &id);
            cmd.spawn().unwrap()
        };
        let (mut spared, mut stopped) = (sleeper(), sleeper());
        let spare = [i32::try_from(spared.id()).unwrap()];
        let pid = i32::try_from(stopped.id()).unwrap();
        // Both marked (their environment is readable once they have exec'd).
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while ![spare[0], pid].iter().all(|&p| marked(p, &run_mark(&id)))
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        let swept = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(stop_everywhere(
                &run_mark(&id),
                &spare,
                Duration::from_secs(2),
            ));
        let alive = spared.try_wait().unwrap().is_none();
        let _ = spared.kill();
        let _ = spared.wait();
        let _ = stopped.wait();
        assert!(alive, "a process in a spared group was stopped");
        assert_eq!(swept.stopped, [pid]);
    }

    /// What stays in the group and ignores SIGTERM gets the grace until the human hurries the
    /// stop, then SIGKILL at once; the stop says it was hurried.
    #[tokio::test]
    async fn a_hurry_cuts_the_grace_of_a_stop_and_sweep_short() {
        let dir = tempfile::tempdir().unwrap();
        let script = "trap '' TERM; echo started; while :; do sleep 1; done";
        let mut s = supervisor::started(script, dir.path()).await;
        let start = std::time::Instant::now();
        let hurry = tokio::time::sleep(Duration::from_millis(200));
        let grace = Duration::from_secs(120);
        let cleared = stop_and_sweep(s.pgid, b"RALPH_DIR=/x", grace, hurry).await;
        let _ = s.child.wait().await;
        assert_eq!(cleared.group, Stopped::Killed);
        assert!(cleared.hurried);
        assert_eq!(cleared.swept, Swept::default());
        assert!(start.elapsed() < Duration::from_secs(60), "{cleared:?}");
        assert!(!supervisor::group_alive(s.pgid));
    }

    #[test]
    fn without_adopt_a_sweep_does_nothing() {
        // This test binary never adopts: its children are the tests' own.
        let swept = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(sweep(
                b"RALPH_DIR=/x",
                0,
                Duration::ZERO,
                std::future::pending(),
            ));
        assert_eq!(swept, Swept::default());
    }
}
