//! `orphans`: a test binary of its own, because [`adopt`] makes the whole process a
//! subreaper. The tests take turns (`SERIAL`): a sweep reaps every adopted zombie it sees.
//!
//! The same tests run against both backends (`--features portable`): with the Linux one the
//! orphans are this process's adopted children, found among its children and reaped here;
//! with the portable one they go to init, are found in the process table by their marks
//! (`RALPH_DIR`, and `RALPH_RUN` as the loop sets it) and are reaped by init.

use ralph_process::{adopt, spawn, terminate};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ralph_process::Stopped;
use ralph_process::Swept;

static SERIAL: Mutex<()> = Mutex::new(());

const MARK: &str = "/tmp/orphans-test/.ralph";

fn mark() -> Vec<u8> {
    format!("RALPH_DIR={MARK}").into_bytes()
}

/// Takes this test's turn, with nothing adopted left over from the one before.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    let guard = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    adopt().expect("PR_SET_CHILD_SUBREAPER");
    sweep(Duration::ZERO);
    guard
}

fn sweep(grace: Duration) -> Swept {
    sweep_outside(0, grace)
}

/// A sweep that leaves `group` (the group being stopped) alone.
fn sweep_outside(group: i32, grace: Duration) -> Swept {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(ralph_process::sweep(
            &mark(),
            group,
            grace,
            std::future::pending(),
        ))
}

/// Runs `script` under `sh` (marked or not) through `spawn`, waits for it, and
/// returns the pids it wrote to `$PIDS`, a line each: processes it left behind, now adopted.
fn leave_behind(script: &str, marked: bool) -> Vec<i32> {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script])
        .env("PIDS", &pids)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    if marked {
        cmd.env("RALPH_DIR", MARK)
            .env(ralph_process::RUN_VAR, ralph_process::run_id());
    }
    let mut child = spawn(|| cmd.spawn(), |c| Some(c.id())).unwrap();
    assert!(child.wait().unwrap().success(), "{script}");
    let got = read_pids(&pids, script.matches("$PIDS").count());
    assert!(!got.is_empty());
    got
}

/// The pids written to `file`, a line each, once there are `want` of them.
fn read_pids(file: &std::path::Path, want: usize) -> Vec<i32> {
    let mut got = Vec::new();
    wait_for("the pids", || {
        got = std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .filter_map(|p| p.parse().ok())
            .collect();
        got.len() >= want
    });
    got
}

/// The process's state letter, if there is such a process.
fn state(pid: i32) -> Option<char> {
    ralph_process::stat(u32::try_from(pid).ok()?).map(|s| s.state)
}

/// Whether `pid` has exited: a zombie, or gone (reaped here, or by init when this process is
/// not its subreaper).
fn exited(pid: i32) -> bool {
    state(pid).is_none_or(|s| s == 'Z')
}

/// Whether `pid` was reaped: by a sweep here, or by init when this process is not its
/// subreaper (give it a moment then).
fn reaped(pid: i32) -> bool {
    if !ralph_process::SUBREAPER {
        wait_for("init to reap it", || state(pid).is_none());
    }
    state(pid).is_none()
}

/// How many processes a sweep reaped where this process adopts them; none where it does not.
fn adopted(n: usize) -> usize {
    if ralph_process::SUBREAPER { n } else { 0 }
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Whether `pid` runs `program` (and so has exec'd it): `ps`, on every backend.
fn runs(pid: i32, program: &str) -> bool {
    Command::new("ps")
        .args(["-o", "comm=", "-p", &pid.to_string()])
        .output()
        .is_ok_and(|out| {
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .ends_with(program)
        })
}

/// Until `pid` has exec'd `program`.
fn wait_for_exec(pid: i32, program: &str) {
    wait_for(program, || runs(pid, program));
}

#[test]
fn a_marked_process_in_a_session_of_its_own_is_stopped_and_reaped() {
    let _serial = serial();
    let pids = leave_behind("setsid sleep 300 & echo $! >> $PIDS", true);
    wait_for_exec(pids[0], "sleep");
    assert_eq!(state(pids[0]).map(|s| s != 'Z'), Some(true));
    let swept = sweep(Duration::from_secs(5));
    assert_eq!(swept.stopped.len(), 1, "{swept:?}");
    assert_eq!(swept.how, Some(Stopped::Terminated));
    assert!(reaped(pids[0]), "stopped, and reaped");
    assert_eq!(sweep(Duration::from_secs(5)), Swept::default());
}

#[test]
fn a_marked_process_that_ignores_sigterm_is_killed_with_its_group() {
    let _serial = serial();
    // The child of the process in the new session shares its group: the group goes too.
    let pids = leave_behind(
        "setsid sh -c 'trap \"\" TERM; sleep 300 & echo $! >> $PIDS; wait' & echo $! >> $PIDS",
        true,
    );
    assert_eq!(pids.len(), 2, "{pids:?}");
    wait_for("the sleep", || pids.iter().any(|&p| runs(p, "sleep")));
    let started = Instant::now();
    let swept = sweep(Duration::from_millis(200));
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(swept.how, Some(Stopped::Killed), "{swept:?}");
    for pid in pids {
        assert!(
            state(pid).is_none_or(|s| s == 'Z'),
            "{pid} lives on: {:?}",
            state(pid)
        );
    }
    // The shell's child was adopted when the shell died: the next look reaps it.
    sweep(Duration::ZERO);
}

#[test]
fn what_a_stopped_process_left_in_another_session_is_stopped_in_the_next_round() {
    let _serial = serial();
    let pids = leave_behind(
        "setsid sh -c 'setsid sleep 300 & echo $! >> $PIDS; exec sleep 300' & echo $! >> $PIDS",
        true,
    );
    assert_eq!(pids.len(), 2, "{pids:?}");
    wait_for("both sleeps", || pids.iter().all(|&p| runs(p, "sleep")));
    let swept = sweep(Duration::from_secs(5));
    assert_eq!(swept.stopped.len(), 2, "{swept:?}");
    for pid in pids {
        assert!(reaped(pid), "{pid}");
    }
}

#[test]
fn an_unmarked_process_is_left_running_and_reaped_once_it_exits() {
    let _serial = serial();
    let pids = leave_behind("setsid sleep 0.5 & echo $! >> $PIDS", false);
    wait_for_exec(pids[0], "sleep");
    let swept = sweep(Duration::from_secs(5));
    assert_eq!(swept, Swept::default());
    assert_eq!(state(pids[0]).map(|s| s != 'Z'), Some(true));
    wait_for("the sleep to exit", || exited(pids[0]));
    let swept = sweep(Duration::from_secs(5));
    assert_eq!(swept.reaped, adopted(1), "{swept:?}");
    assert!(reaped(pids[0]));
}

#[test]
fn a_child_ralph_started_is_left_to_whoever_waits_for_it() {
    let _serial = serial();
    let mut exited: Child = spawn(
        || Command::new("sh").args(["-c", "exit 7"]).spawn(),
        |c| Some(c.id()),
    )
    .unwrap();
    let mut running: Child = spawn(
        || {
            Command::new("sleep")
                .arg("300")
                .env("RALPH_DIR", MARK)
                .spawn()
        },
        |c| Some(c.id()),
    )
    .unwrap();
    let pid = i32::try_from(exited.id()).unwrap();
    wait_for("the shell to exit", || state(pid) == Some('Z'));
    wait_for_exec(i32::try_from(running.id()).unwrap(), "sleep");
    assert_eq!(sweep(Duration::from_secs(5)), Swept::default());
    // Its exit status is still there for its own `wait`.
    assert_eq!(exited.wait().unwrap().code(), Some(7));
    assert!(
        running.try_wait().unwrap().is_none(),
        "a child of ours was stopped"
    );
    running.kill().unwrap();
    running.wait().unwrap();
}

#[test]
fn terminate_signals_at_once_and_a_sweep_reaps() {
    let _serial = serial();
    let pids = leave_behind("setsid sleep 300 & echo $! >> $PIDS", true);
    wait_for_exec(pids[0], "sleep");
    let early = terminate(&mark(), 0);
    assert_eq!(early.stopped.len(), 1);
    wait_for("the sleep to exit", || exited(pids[0]));
    let swept = early.and(sweep(Duration::from_secs(5)));
    assert_eq!(swept.stopped.len(), 1, "{swept:?}");
    assert_eq!(swept.reaped, adopted(1), "{swept:?}");
    assert!(reaped(pids[0]));
}

#[test]
fn a_process_in_the_group_being_stopped_is_left_to_that_group() {
    let _serial = serial();
    // Left in this process's group by the shell, which had no group of its own.
    let pids = leave_behind("sleep 300 & echo $! >> $PIDS", true);
    wait_for_exec(pids[0], "sleep");
    let group = nix::unistd::getpgrp().as_raw();
    assert_eq!(
        sweep_outside(group, Duration::from_secs(5)),
        Swept::default()
    );
    assert_eq!(state(pids[0]).map(|s| s != 'Z'), Some(true));
    // Outside that group, it is an escapee.
    let swept = sweep(Duration::from_secs(5));
    assert_eq!(swept.stopped, pids, "{swept:?}");
    assert!(reaped(pids[0]));
}

/// Starts `script` under `sh` through `orphans::spawn` with `env`, and waits for the pids it
/// writes to `$PIDS` (`want` of them); the shell runs on.
fn start_with(script: &str, env: &[(&str, &str)], want: usize) -> (Child, Vec<i32>) {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script])
        .env("PIDS", &pids)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    let child = ralph_process::spawn(|| cmd.spawn(), |c| Some(c.id())).unwrap();
    (child, read_pids(&pids, want))
}

#[test]
fn without_a_subreaper_a_marked_descendant_is_found_by_its_parent_pid() {
    if ralph_process::SUBREAPER {
        return;
    }
    let _serial = serial();
    // In a session of its own, without the run's id, its parent (the shell) alive: only the
    // walk up the parent pids ties it to this process.
    let (mut shell, pids) = start_with(
        "setsid sleep 300 & echo $! >> $PIDS; wait",
        &[("RALPH_DIR", MARK)],
        1,
    );
    wait_for_exec(pids[0], "sleep");
    let swept = sweep(Duration::from_secs(5));
    let _ = shell.wait();
    assert_eq!(swept.stopped, pids, "{swept:?}");
    assert!(exited(pids[0]));
}

#[test]
fn without_a_subreaper_a_process_of_another_run_is_left_alone() {
    if ralph_process::SUBREAPER {
        return;
    }
    let _serial = serial();
    // The same `.ralph/`, another run's id, and init's now: not this run's to stop.
    let other = format!("{}-other", ralph_process::run_id());
    let pids = {
        let (mut shell, pids) = start_with(
            "setsid sleep 300 & echo $! >> $PIDS",
            &[("RALPH_DIR", MARK), (ralph_process::RUN_VAR, &other)],
            1,
        );
        let _ = shell.wait();
        pids
    };
    wait_for_exec(pids[0], "sleep");
    let swept = sweep(Duration::from_secs(5));
    let alive = !exited(pids[0]);
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pids[0]),
        nix::sys::signal::Signal::SIGKILL,
    );
    assert_eq!(swept, Swept::default());
    assert!(alive, "another run's process was stopped");
}
