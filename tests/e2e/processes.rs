//! Agent processes: timeouts and Ctrl-C leave nothing behind, whatever the agent does.

use std::time::Duration;

use super::util::*;

const STUBBORN: &str = "\
[iteration *]
ignore-sigterm
spawn-grandchild 300s --pid-file grandchild.pid
print started
hang
";

fn grandchild(p: &Project) -> i32 {
    wait_until(Duration::from_secs(20), "grandchild.pid", || {
        std::fs::read_to_string(p.path("grandchild.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    })
}

#[test]
fn iteration_timeout_kills_an_agent_that_ignores_sigterm_and_its_grandchild() {
    let p = Project::with_task(
        "task: Stubborn\nmax_iterations: 1\niteration_timeout: 1s",
        "- [ ] x\n",
    );
    let agent = p.agent(STUBBORN);
    let run = p.run(&agent, &[]);
    run.expect_code(3);
    let pid = grandchild(&p);
    assert!(
        !pid_alive(pid),
        "the grandchild {pid} outlived the iteration"
    );
    assert!(run.stdout.contains("iteration_timeout"), "{}", run.stdout);
    assert!(p.events().iter().any(|e| e["event"] == "agent_killed"));
}

/// Runs an agent that ignores SIGTERM and has a grandchild, sends ralph `signals` (100 ms
/// apart), and checks the whole group is gone and ralph exited 130 with its state saved.
/// Returns how long ralph took after the last signal.
fn stop_a_stubborn_agent(signals: &[nix::sys::signal::Signal]) -> Duration {
    let p = Project::with_task("task: Stubborn\nmax_iterations: 1", "- [ ] x\n");
    let agent = p.agent(STUBBORN);
    let child = p.start(&agent, &[]);
    let pid = grandchild(&p);
    assert!(pid_alive(pid));
    let ralph = nix::unistd::Pid::from_raw(child.id() as i32);
    for (i, &sig) in signals.iter().enumerate() {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(100));
        }
        nix::sys::signal::kill(ralph, sig).unwrap();
    }
    let start = std::time::Instant::now();
    Run::finish(child, Duration::from_secs(30)).expect_code(130);
    let took = start.elapsed();
    assert!(!pid_alive(pid), "the grandchild {pid} outlived ralph");
    assert_eq!(p.state()["status"], "stopped");
    took
}

#[test]
fn ctrl_c_stops_an_agent_that_ignores_sigterm_and_its_grandchild_and_exits_130() {
    stop_a_stubborn_agent(&[nix::sys::signal::Signal::SIGINT]);
}

#[test]
fn a_second_ctrl_c_kills_at_once() {
    use nix::sys::signal::Signal::SIGINT;
    let took = stop_a_stubborn_agent(&[SIGINT, SIGINT]);
    // Well under the 3 s SIGTERM grace: the second Ctrl-C did not wait for it.
    assert!(took < Duration::from_millis(2500), "{took:?}");
}

#[test]
fn sigquit_kills_the_agent_group_at_once_saves_state_and_exits_130() {
    // Regression: SIGQUIT (Ctrl-\ in a plain terminal) ended ralph on the spot; the agent,
    // in its own process group, ran on.
    let took = stop_a_stubborn_agent(&[nix::sys::signal::Signal::SIGQUIT]);
    // Well under the 3 s SIGTERM grace: no waiting on an agent that ignores SIGTERM.
    assert!(took < Duration::from_millis(2500), "{took:?}");
}

#[test]
fn leftover_background_processes_are_stopped_when_the_agent_exits() {
    let p = Project::with_task("task: Leaky\nmax_iterations: 1", "- [ ] x\n");
    let agent = p.agent(
        "[iteration 1]\nspawn-grandchild 300s --pid-file grandchild.pid --quiet\nprint bye\n",
    );
    p.run(&agent, &[]).expect_code(3);
    let pid = grandchild(&p);
    assert!(
        !pid_alive(pid),
        "the background process {pid} outlived its iteration"
    );
}

#[test]
fn an_agent_that_exits_without_reading_a_huge_prompt_does_not_stall_the_loop() {
    let p = Project::with_task("task: Big prompt\nmax_iterations: 1", "- [ ] x\n");
    // 4 MiB of progress notes make a prompt far larger than a pipe buffer.
    p.write(
        ".ralph/progress.md",
        &"progress line that is fairly long\n".repeat(120_000),
    );
    let agent = p.agent("[iteration 1]\nno-stdin\nprint not reading\n");
    p.run(&agent, &[]).expect_code(3);
}
