//! Crashes and stops: agents that misbehave as processes, and ralph itself stopped or killed
//! mid-iteration. Afterwards nothing of the agent is left running, the state on disk says what
//! happened, and the next `ralph run` picks up where the last one left off.
//!
//! `processes.rs` has the basics (iteration timeout and Ctrl-C against an agent that ignores
//! SIGTERM, a second Ctrl-C, leftover background processes, a huge unread prompt).

use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::hostile::{run_agent_watched, watch};
use super::util::*;

/// Every live process whose environment names this project's `.ralph/` (the agent, its
/// children, anything it left behind).
pub fn agent_processes(p: &Project) -> Vec<i32> {
    let root = p.root().display().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        let ours = env.split(|b| *b == 0).any(|kv| {
            kv.strip_prefix(b"RALPH_DIR=")
                .is_some_and(|v| String::from_utf8_lossy(v).starts_with(&root))
        });
        if ours && pid_alive(pid) {
            found.push(pid);
        }
    }
    found
}

/// Waits until no process of the agent is left, or fails naming the survivors.
#[track_caller]
fn assert_no_agent_processes(p: &Project, within: Duration) {
    let start = Instant::now();
    loop {
        let left = agent_processes(p);
        if left.is_empty() {
            return;
        }
        if start.elapsed() > within {
            let described: Vec<String> = left
                .iter()
                .map(|pid| {
                    let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                    format!(
                        "{pid}: {}",
                        String::from_utf8_lossy(&cmd).replace('\0', " ")
                    )
                })
                .collect();
            // Do not leak them into the rest of the test run.
            for pid in &left {
                let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
            }
            panic!("agent processes outlived ralph: {described:#?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The agent's process group, once `state.json` records it.
fn agent_pgid(p: &Project) -> i32 {
    wait_until(Duration::from_secs(20), "agent_pgid in state.json", || {
        let text = std::fs::read_to_string(p.path(".ralph/state.json")).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        v["agent_pgid"].as_i64().map(|g| g as i32)
    })
}

fn start_run(p: &Project, agent: &str, extra: &[&str]) -> Guarded {
    let mut cmd = p.ralph();
    cmd.args(["run", "--no-tui", "--agent-cmd", agent])
        .args(extra);
    spawn(cmd)
}

fn signal(child: &std::process::Child, sig: Signal) {
    kill(Pid::from_raw(child.id() as i32), sig).unwrap();
}

/// The guard of the `ralph run` with pid `ralph` (`ralph __guard`, its child), once started.
fn guard_of(ralph: u32) -> i32 {
    wait_until(Duration::from_secs(10), "ralph's guard", || {
        std::fs::read_dir("/proc")
            .ok()?
            .flatten()
            .find_map(|entry| {
                let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
                let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
                let ppid: u32 = stat[stat.rfind(')')? + 2..]
                    .split(' ')
                    .nth(1)?
                    .parse()
                    .ok()?;
                let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
                (ppid == ralph && cmdline.starts_with(b"ralph-guard\0__guard\0")).then_some(pid)
            })
    })
}

/// SIGKILL to ralph and to its guard first (`kill -9` of both, `pkill -9 ralph`): nothing of
/// ralph is left to stop the agent, and only the next run can.
fn kill_ralph_and_its_guard(child: &std::process::Child) {
    kill(Pid::from_raw(guard_of(child.id())), Signal::SIGKILL).unwrap();
    signal(child, Signal::SIGKILL);
}

/// An agent that ignores SIGTERM, leaves a grandchild in its group, and never ends.
const STUBBORN: &str = "\
[iteration 1]
ignore-sigterm
spawn-grandchild 300s --pid-file grandchild.pid
print started
hang
[iteration 2]
save-env resumed-env.txt
[iteration 3..]
print resumed
";

// ---------------------------------------------------------------------------------------------
// Agents that misbehave as processes.

#[test]
fn an_agent_that_closes_stdout_but_keeps_running_is_stopped_at_iteration_timeout() {
    let p = Project::with_task(
        "task: Closes stdout\nmax_iterations: 1\niteration_timeout: 1s",
        "- [ ] x\n",
    );
    let agent = p.agent(
        "[iteration 1]\nprint before closing\nclose-stdout\nspawn-grandchild 300s --pid-file grandchild.pid --quiet\nhang\n",
    );
    let start = Instant::now();
    let run = run_agent_watched(&p, &agent, &[], Duration::from_secs(60));
    run.expect_code(3);
    assert!(run.stdout().contains("before closing"), "{}", run.stdout());
    assert!(
        run.stdout().contains("iteration_timeout"),
        "{}",
        run.stdout()
    );
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "{:?}",
        start.elapsed()
    );
    assert!(!pid_alive(read_pid(&p, "grandchild.pid")));
    assert_no_agent_processes(&p, Duration::from_secs(5));
}

#[test]
fn an_agent_that_closes_stdout_then_exits_ends_its_iteration_normally() {
    let p = Project::with_task("task: Closes stdout\nmax_iterations: 2", "- [ ] x\n");
    let agent = p.agent(
        "[iteration 1]\nprint bye\nclose-stdout\nsleep 300ms\nexit 0\n[iteration 2]\nprint second\n",
    );
    let run = run_agent_watched(&p, &agent, &[], Duration::from_secs(60));
    run.expect_code(3);
    let out = run.stdout();
    assert!(
        out.contains("iteration 1 ended: the agent exited with status 0"),
        "{out}"
    );
    assert!(out.contains("second"), "{out}");
    assert_no_agent_processes(&p, Duration::from_secs(5));
}

/// Neither reads its prompt (4 MiB, far past a pipe buffer, so ralph's writer blocks) nor
/// prints anything, three times over: every iteration times out, and ralph's open files do
/// not pile up.
#[test]
fn an_agent_that_never_reads_stdin_and_hangs_is_stopped_each_time_without_leaking_files() {
    let p = Project::with_task(
        "task: Silent\nmax_iterations: 3\niteration_timeout: 500ms\nmax_consecutive_failures: 5",
        "- [ ] x\n",
    );
    p.write(
        ".ralph/progress.md",
        &"a long line of notes\n".repeat(200_000),
    );
    let agent = p.agent("[iteration *]\nno-stdin\nhang\n");
    let run = run_agent_watched(&p, &agent, &[], Duration::from_secs(60));
    run.expect_code(3);
    assert_eq!(
        run.stdout()
            .matches("ended: the agent ran past iteration_timeout")
            .count(),
        3,
        "{}",
        run.stdout()
    );
    assert!(run.max_fds < 64, "ralph had {} files open", run.max_fds);
    assert_no_agent_processes(&p, Duration::from_secs(5));
}

#[test]
fn an_agent_that_exits_at_once_without_reading_stdin_does_not_count_as_a_hang() {
    let p = Project::with_task(
        "task: Quick exit\nmax_iterations: 2\nmax_consecutive_failures: 2",
        "- [ ] x\n",
    );
    let agent = p.agent("[iteration *]\nno-stdin\nexit 7\n");
    let start = Instant::now();
    let run = run_agent_watched(&p, &agent, &[], Duration::from_secs(60));
    run.expect_code(1);
    assert!(
        run.stdout().contains("exited with status 7"),
        "{}",
        run.stdout()
    );
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
}

// ---------------------------------------------------------------------------------------------
// ralph stopped by a signal.

#[test]
fn sigterm_and_sighup_mid_iteration_stop_the_whole_agent_group_and_the_next_run_resumes() {
    for sig in [Signal::SIGTERM, Signal::SIGHUP] {
        let p = Project::with_task("task: Stubborn\nmax_iterations: 3", "- [ ] x\n");
        let agent = p.agent(STUBBORN);
        let child = start_run(&p, &agent, &[]);
        let grandchild = read_pid(&p, "grandchild.pid");
        let leader = agent_pgid(&p);
        signal(&child, sig);
        let run = Run::finish(child, Duration::from_secs(30));
        run.expect_code(130);
        assert!(
            !pid_alive(grandchild),
            "{sig}: the grandchild outlived ralph"
        );
        assert!(!pid_alive(leader), "{sig}: the agent outlived ralph");
        assert_no_agent_processes(&p, Duration::from_secs(5));
        let state = p.state();
        assert_eq!(state["status"], "stopped", "{sig}: {state}");
        assert!(state["agent_pgid"].is_null(), "{sig}: {state}");
        assert_eq!(state["iteration"], 1, "{sig}: {state}");

        let second = p.run(&agent, &[]);
        second.expect_code(3);
        assert!(
            p.read("resumed-env.txt").contains("RALPH_ITERATION=2"),
            "{sig}"
        );
        let starts: Vec<_> = p
            .events()
            .into_iter()
            .filter(|e| e["event"] == "iteration_start")
            .map(|e| e["iteration"].as_u64().unwrap())
            .collect();
        assert_eq!(starts, [1, 2, 3], "{sig}: numbering goes on");
    }
}

/// Regression: Ctrl-C (or SIGTERM, SIGHUP) while `test_command` ran was not seen until the
/// tests finished, up to `test_timeout` (10 minutes by default) later, and then the loop went
/// on as if nothing had happened: a stop request during `sleep 300` ended, 300 s later, with
/// "DONE accepted" and exit 0. Now the tests' group is stopped at once and ralph exits 130.
#[test]
fn a_stop_while_the_tests_ran_was_ignored_until_they_finished() {
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        let p = Project::with_task(
            "task: Slow tests\nmax_iterations: 2\ntest_command: echo $$ > tests.pid; sleep 300",
            "- [x] x\n",
        );
        let agent = p.agent("[iteration *]\nsignal DONE\n");
        let child = start_run(&p, &agent, &[]);
        let tests = read_pid(&p, "tests.pid");
        let start = Instant::now();
        signal(&child, sig);
        let run = Run::finish(child, Duration::from_secs(60));
        run.expect_code(130);
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{sig}: took {:?}",
            start.elapsed()
        );
        assert!(
            !run.stdout.contains("DONE accepted"),
            "{sig}: {}",
            run.stdout
        );
        assert!(!pid_alive(tests), "{sig}: the test command outlived ralph");
        assert_eq!(p.state()["status"], "stopped", "{sig}");
    }
}

/// Regression: a second Ctrl-C while the tests' group had its grace (a test runner that
/// ignores SIGTERM) was not seen until the grace ran out, where a second Ctrl-C during the
/// agent kills at once.
#[test]
fn a_second_ctrl_c_while_the_tests_stop_kills_them_at_once() {
    let p = Project::with_task(
        "task: Stubborn tests\nmax_iterations: 2\ntest_command: trap '' TERM; echo $$ > tests.pid; sleep 300",
        "- [x] x\n",
    );
    let agent = p.agent("[iteration *]\nsignal DONE\n");
    let child = start_run(&p, &agent, &[]);
    let tests = read_pid(&p, "tests.pid");
    signal(&child, Signal::SIGINT);
    std::thread::sleep(Duration::from_millis(100));
    signal(&child, Signal::SIGINT);
    let start = Instant::now();
    let run = Run::finish(child, Duration::from_secs(60));
    run.expect_code(130);
    // Well under the 3 s SIGTERM grace: the second Ctrl-C did not wait for it.
    assert!(
        start.elapsed() < Duration::from_millis(2500),
        "took {:?}",
        start.elapsed()
    );
    assert!(!pid_alive(tests), "the test command outlived ralph");
}

// ---------------------------------------------------------------------------------------------
// ralph killed outright (SIGKILL): its guard stops the agent group; with the guard killed too,
// the next run cleans up.

#[test]
fn after_sigkill_of_ralph_its_guard_stops_the_agent_group_and_the_next_run_resumes() {
    let p = Project::with_task("task: Stubborn\nmax_iterations: 2", "- [ ] x\n");
    let agent = p.agent(STUBBORN);
    let child = start_run(&p, &agent, &[]);
    let grandchild = read_pid(&p, "grandchild.pid");
    let leader = agent_pgid(&p);
    let guard = guard_of(child.id());
    assert_eq!(guards_of(&p), [guard], "one guard, for this project");
    signal(&child, Signal::SIGKILL);
    Run::finish(child, Duration::from_secs(10));
    // No other run: the guard sends SIGTERM, which the agent ignores, waits the 3 s grace,
    // sends SIGKILL, and exits.
    assert_no_agent_processes(&p, Duration::from_secs(20));
    // A process killed a moment ago may still be on its way out: its environment is gone
    // (so the scan above no longer finds it) before it is a zombie.
    wait_until(
        Duration::from_secs(10),
        "the agent and its grandchild to end",
        || (!pid_alive(leader) && !pid_alive(grandchild)).then_some(()),
    );
    wait_until(Duration::from_secs(10), "the guard to exit", || {
        (!pid_alive(guard)).then_some(())
    });
    assert_eq!(p.state()["status"], "running", "as ralph left it");

    p.run(&agent, &[]).expect_code(3);
    assert!(p.read("resumed-env.txt").contains("RALPH_ITERATION=2"));
    // The run's guard exits once the run closes its pipe.
    wait_until(Duration::from_secs(5), "no guard left", || {
        guards_of(&p).is_empty().then_some(())
    });
}

#[test]
fn after_sigkill_of_ralph_its_guard_stops_what_the_agent_started_in_a_session_of_its_own() {
    let p = Project::with_task("task: Escapes\nmax_iterations: 2", "- [ ] x\n");
    // The process in a session of its own is not in the agent's group: stopping the group,
    // as the guard did before, left it running for good, with init as its parent.
    let agent = p.agent(
        "[iteration 1]\nspawn-grandchild 300s --pid-file grandchild.pid --quiet --new-session\nprint started\nhang\n",
    );
    let child = start_run(&p, &agent, &[]);
    let escapee = read_pid(&p, "grandchild.pid");
    let leader = agent_pgid(&p);
    let guard = guard_of(child.id());
    signal(&child, Signal::SIGKILL);
    Run::finish(child, Duration::from_secs(10));
    wait_until(Duration::from_secs(20), "the guard to exit", || {
        (!pid_alive(guard)).then_some(())
    });
    let left = pid_alive(escapee);
    if left {
        let _ = kill(Pid::from_raw(escapee), Signal::SIGKILL);
    }
    assert!(
        !left,
        "the process in a session of its own outlived ralph and its guard"
    );
    assert!(!pid_alive(leader));
    assert_no_agent_processes(&p, Duration::from_secs(5));
}

#[test]
fn after_sigkill_of_ralph_while_the_tests_run_its_guard_stops_them() {
    let (_p, _agent, tests) = killed_while_the_tests_run(|child| signal(child, Signal::SIGKILL));
    wait_until(
        Duration::from_secs(10),
        "the guard to stop the tests",
        || (!pid_alive(tests)).then_some(()),
    );
}

/// A run whose `test_command` (`sleep 300`) runs, once `state.json` names the tests' group,
/// ended by `kill`; the project, its agent and the tests' pid.
fn killed_while_the_tests_run(kill: impl FnOnce(&std::process::Child)) -> (Project, String, i32) {
    let p = Project::with_task(
        "task: Tested\nmax_iterations: 2\ntest_command: echo $$ > tests.pid; exec sleep 300",
        "- [ ] x\n",
    );
    let agent = p.agent("[iteration 1]\ncheck-all\nsignal DONE\n[iteration 2]\nprint resumed\n");
    let child = start_run(&p, &agent, &[]);
    let tests = read_pid(&p, "tests.pid");
    wait_until(
        Duration::from_secs(10),
        "the tests' group in state.json",
        || (p.state()["agent_pgid"] == tests).then_some(()),
    );
    kill(&child);
    Run::finish(child, Duration::from_secs(10));
    (p, agent, tests)
}

#[test]
fn after_sigkill_mid_iteration_the_next_run_kills_the_orphaned_agent_group_and_resumes() {
    let p = Project::with_task("task: Stubborn\nmax_iterations: 2", "- [ ] x\n");
    let agent = p.agent(STUBBORN);
    let child = start_run(&p, &agent, &[]);
    let grandchild = read_pid(&p, "grandchild.pid");
    let leader = agent_pgid(&p);
    let first_pid = child.id();
    kill_ralph_and_its_guard(&child);
    let killed = Run::finish(child, Duration::from_secs(10));
    assert_eq!(killed.code, None, "killed by a signal");
    // SIGKILL cannot be caught: the agent is orphaned, the state still says running.
    assert!(
        pid_alive(leader) && pid_alive(grandchild),
        "nothing stopped the agent"
    );
    assert_eq!(p.state()["status"], "running");
    assert_eq!(p.read(".ralph/lock").trim(), first_pid.to_string());

    let second = p.run(&agent, &[]);
    second.expect_code(3);
    assert!(
        !second.stderr.contains("already working here"),
        "the dead run's lock is not held: {}",
        second.stderr
    );
    assert!(!pid_alive(leader), "the orphaned agent was not killed");
    assert!(
        !pid_alive(grandchild),
        "the orphaned grandchild was not killed"
    );
    assert_no_agent_processes(&p, Duration::from_secs(5));
    assert!(p.read("resumed-env.txt").contains("RALPH_ITERATION=2"));
    // Said, not done in silence: the user learns why an agent they may have seen vanished.
    let said = format!("what was still running of them (process group {leader}) was stopped");
    assert!(second.stdout.contains(&said), "{}", second.stdout);
    let stopped = p.events_of("orphan_group_stopped");
    assert_eq!(stopped.len(), 1, "{stopped:?}");
    assert_eq!(
        (&stopped[0]["iteration"], &stopped[0]["pgid"]),
        (&serde_json::json!(1), &serde_json::json!(leader))
    );
    let state = p.state();
    assert_eq!(state["status"], "max_iterations", "{state}");
    assert!(state["agent_pgid"].is_null(), "{state}");
    // Every event line survived the kill whole.
    assert!(p.events().iter().all(|e| e["event"].is_string()));
}

/// Regression: after ralph was killed, the next run killed the orphaned agent group only if
/// its leader was still alive, because that is whose environment it read to make sure the group
/// was its own. An agent that had exited, leaving a background process in its group (a dev
/// server, a watcher), left that process running forever.
#[test]
fn an_orphaned_grandchild_whose_agent_had_exited_survived_the_next_run() {
    let p = Project::with_task("task: Leaky\nmax_iterations: 2", "- [ ] x\n");
    let agent = p.agent(
        "[iteration 1]\nspawn-grandchild 300s --pid-file grandchild.pid --quiet\nsleep 1s\n\
         [iteration 2]\nprint resumed\n",
    );
    let child = start_run(&p, &agent, &[]);
    let grandchild = read_pid(&p, "grandchild.pid");
    let leader = agent_pgid(&p);
    kill_ralph_and_its_guard(&child);
    Run::finish(child, Duration::from_secs(10));
    wait_until(Duration::from_secs(10), "the agent to exit", || {
        (!pid_alive(leader)).then_some(())
    });
    assert!(
        pid_alive(grandchild),
        "the grandchild is orphaned, still running"
    );

    p.run(&agent, &[]).expect_code(3);
    assert!(
        !pid_alive(grandchild),
        "the orphaned grandchild {grandchild} survived"
    );
    assert_no_agent_processes(&p, Duration::from_secs(5));
}

/// The value of `name` in the environment of process `pid`, once it has one.
fn env_var(pid: i32, name: &str) -> String {
    let prefix = format!("{name}=");
    wait_until(Duration::from_secs(10), &prefix, || {
        let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
        env.split(|b| *b == 0).find_map(|kv| {
            let value = kv.strip_prefix(prefix.as_bytes())?;
            Some(String::from_utf8_lossy(value).into_owned())
        })
    })
}

/// `sleep 300` in a group of its own, with `env` added to its environment, once it has it.
fn bystander(env: &[(&str, &str)]) -> Guarded {
    let mut cmd = std::process::Command::new("sleep");
    cmd.arg("300").process_group(0).envs(env.iter().copied());
    let child = spawn(cmd);
    let (name, value) = env[0];
    assert_eq!(env_var(child.id() as i32, name), value);
    child
}

/// A run killed outright with its guard, and what it left.
struct Killed {
    p: Project,
    agent: String,
    /// The agent's group.
    leader: i32,
    /// The process the agent started in a session of its own, still alive.
    escapee: i32,
    /// The run's id (its `RALPH_RUN`).
    run: String,
}

/// A run killed outright with its guard (`pkill -9 ralph` hits both) while its agent hangs,
/// after the agent started a process in a session of its own, which nothing of ralph is then
/// left to stop.
fn killed_with_a_process_outside_its_group() -> Killed {
    let p = Project::with_task("task: Escapes\nmax_iterations: 2", "- [ ] x\n");
    let agent = p.agent(
        "[iteration 1]\nspawn-grandchild 300s --pid-file grandchild.pid --quiet --new-session\nprint started\nhang\n\
         [iteration 2]\nprint resumed\n",
    );
    let child = start_run(&p, &agent, &[]);
    let escapee = read_pid(&p, "grandchild.pid");
    let leader = agent_pgid(&p);
    let run = env_var(escapee, "RALPH_RUN");
    kill_ralph_and_its_guard(&child);
    Run::finish(child, Duration::from_secs(10));
    assert!(pid_alive(escapee), "nothing of ralph stopped it");
    Killed {
        p,
        agent,
        leader,
        escapee,
        run,
    }
}

/// Kills `pid` if it is alive, and says whether it was.
fn kill_if_alive(pid: i32) -> bool {
    let alive = pid_alive(pid);
    if alive {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
    alive
}

/// The pids named by the one `escapees_stopped` event, which must be the next run's report on
/// the last run.
fn stopped_from_the_last_run(p: &Project) -> serde_json::Value {
    let stopped = p.events_of("escapees_stopped");
    assert_eq!(stopped.len(), 1, "{stopped:?}");
    assert_eq!(stopped[0]["from"], "last run");
    assert_eq!(stopped[0]["iteration"], 1);
    stopped[0]["pids"].clone()
}

/// Regression: once ralph and its guard were both killed outright (`pkill -9 ralph` hits
/// both), the next run stopped the agent's group alone: what the agent had started in a
/// session of its own (as Claude Code's Bash tool starts every command) ran on for good, with
/// init as its parent. The next run now stops every process that carries the killed run's id
/// (`RALPH_RUN`, which `state.json` records), and no other.
#[test]
fn after_sigkill_of_ralph_and_its_guard_what_left_the_group_survived_the_next_run() {
    let Killed {
        p,
        agent,
        leader,
        escapee,
        run,
    } = killed_with_a_process_outside_its_group();
    let recorded = p.state()["run_id"].clone();
    // Of this loop, but of another run (its id begins like the killed one's), or of none.
    let dir = p.path(".ralph").display().to_string();
    let other_run = format!("{run}0");
    let mut others = [
        bystander(&[("RALPH_RUN", &other_run), ("RALPH_DIR", &dir)]),
        bystander(&[("RALPH_DIR", &dir)]),
    ];

    let second = p.run(&agent, &[]);
    let left = kill_if_alive(escapee);
    let spared = others.each_mut().map(|c| c.try_wait().unwrap().is_none());
    drop(others);
    second.expect_code(3);
    assert!(
        !left,
        "the process the killed run's agent started in a session of its own survived the next run"
    );
    assert_eq!(
        spared,
        [true, true],
        "a process of no or another run was stopped"
    );
    assert!(!pid_alive(leader));
    assert_eq!(recorded, run.as_str(), "state.json records the run's id");
    assert!(
        second
            .stdout
            .contains("1 process the last run left running when it was killed was stopped"),
        "{}",
        second.stdout
    );
    assert_eq!(stopped_from_the_last_run(&p), serde_json::json!([escapee]));
    assert_no_agent_processes(&p, Duration::from_secs(5));
}

/// The next run started from a shell that carries the killed run's id (one in a `tmux` its
/// agent left running, say) carries it too, as does its guard: it stops what the killed run
/// left, but not itself, its guard, nor the shell, in a group of its own above it.
#[test]
fn the_next_run_started_from_a_process_of_the_killed_run_spares_itself_its_guard_and_its_shell() {
    let Killed {
        p,
        agent,
        escapee,
        run,
        ..
    } = killed_with_a_process_outside_its_group();
    // `sh` stays above ralph (no `exec`), in a group of its own; ralph, in a session of its
    // own, is in another.
    let mut sh = std::process::Command::new("sh");
    sh.args(["-c", "setsid -w \"$@\"", "sh"])
        .arg(ralph_bin())
        .args(["run", "--no-tui", "--agent-cmd", &agent])
        .current_dir(p.root())
        .env_remove("RALPH_DIR")
        .envs(p.user_env())
        .env("RALPH_RUN", &run)
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .process_group(0);
    let second = Run::finish(spawn(sh), Duration::from_secs(60));
    let left = kill_if_alive(escapee);
    // Killed, `sh` would have no exit code, and ralph killed would not have exited 3.
    second.expect_code(3);
    assert!(!left, "the process the killed run left survived");
    assert_eq!(stopped_from_the_last_run(&p), serde_json::json!([escapee]));
}

#[test]
fn after_sigkill_while_a_question_waits_the_next_run_asks_it_again() {
    let p = Project::with_task(
        "task: Cache\nmax_iterations: 2\nquestion_timeout: 1m",
        "- [ ] cache\n",
    );
    let agent = p.agent(
        "[iteration 1]\nquestion \"Redis or Memcached?\" --option Redis --option Memcached\nsignal QUESTION\n\
         [iteration 2]\nsave-prompt prompt-2.txt\n",
    );
    let child = start_run(&p, &agent, &[]);
    p.wait_for_status("waiting_input", Duration::from_secs(20));
    signal(&child, Signal::SIGKILL);
    Run::finish(child, Duration::from_secs(10));
    let first = p.state();
    assert_eq!(first["status"], "waiting_input");

    let child = start_run(&p, &agent, &[]);
    let pid = child.id();
    // The same question, shown first (the agent is not run again to ask it).
    let again = wait_until(Duration::from_secs(20), "the question again", || {
        let s = p.state();
        (s["status"] == "waiting_input" && s["pid"] == pid).then_some(s)
    });
    // Asked when it was, with the whole minute to answer from now: the loop was down.
    let (first, again) = (&first["pending_question"], &again["pending_question"]);
    assert_eq!(again["asked_at"], first["asked_at"]);
    assert!(
        again["deadline"].as_str() > first["deadline"].as_str(),
        "{first} then {again}"
    );
    p.exec(&["answer", "2"]).expect_code(0);
    let second = watch(child, Duration::from_secs(60));
    second.expect_code(3);
    let out = second.stdout();
    assert!(out.contains("still waiting"), "{out}");
    assert!(out.contains("Redis or Memcached?"), "{out}");
    assert!(
        !out.contains("iteration 1/"),
        "iteration 1 is not run again: {out}"
    );
    assert!(p.read("prompt-2.txt").contains("> Memcached"));
    assert_eq!(
        p.read(".ralph/clarifications.md")
            .matches("Redis or Memcached?")
            .count(),
        1,
        "archived once"
    );
}

#[test]
fn after_sigkill_during_the_tests_the_next_run_verifies_again() {
    let p = Project::with_task(
        "task: Tests killed\nmax_iterations: 3\ntest_command: test -f pass || { echo $$ > tests.pid; touch pass; sleep 300; }",
        "- [x] x\n",
    );
    let agent = p.agent("[iteration *]\nsignal DONE\n");
    let child = start_run(&p, &agent, &[]);
    wait_until(Duration::from_secs(20), "the tests to start", || {
        p.exists("pass").then_some(())
    });
    kill_ralph_and_its_guard(&child);
    Run::finish(child, Duration::from_secs(10));
    let second = p.run(&agent, &[]);
    second.expect_code(0);
    assert!(second.stdout.contains("DONE accepted"), "{}", second.stdout);
    assert_eq!(p.state()["status"], "done");
    // The second run stopped the killed run's tests before verifying (the next test checks
    // that); `sleep 300` is not left behind if it ever did not.
    let tests = read_pid(&p, "tests.pid");
    let _ = nix::sys::signal::killpg(Pid::from_raw(tests), Signal::SIGKILL);
}

/// Regression: ralph killed outright while `test_command` ran left the tests running forever;
/// only an agent's group was recorded for the next run to stop.
#[test]
fn after_sigkill_while_the_tests_run_the_next_run_stops_them() {
    let (p, agent, tests) = killed_while_the_tests_run(kill_ralph_and_its_guard);
    assert!(
        pid_alive(tests),
        "SIGKILL stops nothing: the tests are orphaned"
    );

    p.run(&agent, &[]).expect_code(3);
    assert!(!pid_alive(tests), "the orphaned tests {tests} survived");
}

/// Regression (issue 25, item 8): `notify_command` outlived ralph. Its 30 s limit was a thread
/// inside ralph and it did not carry `RALPH_RUN`, so after a SIGKILL of ralph it ran on for
/// ever. Now the guard stops it; with the guard killed too, the next run does.
#[test]
fn after_sigkill_of_ralph_its_notify_command_is_stopped_by_the_guard_or_the_next_run() {
    for guard_too in [false, true] {
        let p = Project::with_task(
            "task: Notify\nmax_iterations: 2\nquestion_timeout: 1h\nnotify_command: echo $$ > notify.pid; exec sleep 300",
            "- [ ] x\n",
        );
        let agent = p.agent(
            "[iteration 1]\nquestion \"Still there?\"\nsignal QUESTION\n[iteration 2..]\nprint resumed\n",
        );
        let child = start_run(&p, &agent, &[]);
        let notify = read_pid(&p, "notify.pid");
        assert!(pid_alive(notify));
        if guard_too {
            kill_ralph_and_its_guard(&child);
        } else {
            signal(&child, Signal::SIGKILL);
        }
        drop(child);
        if guard_too {
            std::thread::sleep(Duration::from_millis(500));
            assert!(pid_alive(notify), "nothing was left to stop it");
            p.exec(&["answer", "yes"]).expect_code(0);
            p.run(&agent, &[]).expect_code(3);
        }
        let deadline = Instant::now() + Duration::from_secs(15);
        while pid_alive(notify) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            !kill_if_alive(notify),
            "notify_command outlived the killed run (guard killed too: {guard_too})"
        );
    }
}

/// Issue 34, item 10: `ralph run | head` went on for minutes after `head` had its lines and
/// left, the agent working for nobody. A closed standard output stops the loop as Ctrl-C
/// would, even while the agent prints nothing: exit 130, the agent stopped, the state saved.
#[test]
fn a_closed_stdout_stops_the_run_as_ctrl_c_would() {
    use std::io::BufRead;
    let p = Project::with_task("task: Piped\nmax_iterations: 3", "- [ ] x\n");
    let agent = p.agent("[iteration 1]\nprint \"line 1\"\nprint \"line 2\"\nhang\n");
    let mut child = p.start(&agent, &[]);
    let err = read_to_end_in_background(child.stderr.take().unwrap());
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("line 2") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "no line 2");
    }
    let closed = Instant::now();
    drop(out);
    let status = wait_until(Duration::from_secs(30), "ralph to stop", || {
        child.try_wait().unwrap()
    });
    let stderr = err.join().unwrap();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(closed.elapsed() < Duration::from_secs(20));
    assert!(stderr.contains("nobody reads the output"), "{stderr}");
    let state = p.state();
    assert_eq!(state["status"], "stopped", "{state}");
    assert!(state["agent_pgid"].is_null(), "{state}");
    assert_no_agent_processes(&p, Duration::from_secs(5));
}
