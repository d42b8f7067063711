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
    read_pid(p, "grandchild.pid")
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

/// Claude Code's Bash tool runs each command in a session of its own: a signal to the
/// agent's group does not reach it, and when the agent exits it would be init's.
#[test]
fn a_process_the_agent_started_in_a_session_of_its_own_is_stopped_with_its_iteration() {
    let p = Project::with_task("task: Leaky\nmax_iterations: 1", "- [ ] x\n");
    let agent = p.agent(
        "[iteration 1]\nspawn-grandchild 300s --pid-file grandchild.pid --quiet --new-session\nprint bye\n",
    );
    let run = p.run(&agent, &[]);
    run.expect_code(3);
    let pid = grandchild(&p);
    assert!(!pid_alive(pid), "{pid} outlived its iteration");
    assert!(
        run.stdout
            .contains("1 process the agent started outside its process group was stopped"),
        "{}",
        run.stdout
    );
    let swept = p.events_of("escapees_stopped");
    assert_eq!(swept.len(), 1, "{swept:?}");
    assert_eq!(swept[0]["from"], "agent");
    assert_eq!(swept[0]["how"], "Terminated");
}

/// A process outside the agent's group that holds the agent's output open is stopped as soon
/// as the agent exits: the iteration does not wait out the grace and the drain (3 s + 2 s)
/// for an end of file that cannot come.
#[test]
fn a_process_outside_the_group_holding_the_output_does_not_hold_up_the_iteration() {
    let p = Project::with_task("task: Leaky\nmax_iterations: 1", "- [ ] x\n");
    let agent = p.agent(
        "[iteration 1]\nspawn-grandchild 300s --pid-file grandchild.pid --new-session\nprint bye\n",
    );
    p.run(&agent, &[]).expect_code(3);
    let pid = grandchild(&p);
    assert!(!pid_alive(pid), "{pid} outlived its iteration");
    let end = p
        .events()
        .into_iter()
        .find(|e| e["event"] == "iteration_end")
        .unwrap();
    let seconds = end["seconds"].as_f64().unwrap();
    assert!(seconds < 2.5, "the iteration took {seconds} s");
}

/// The same while the agent still runs when its time is up: the process is found once the
/// agent's group is gone.
#[test]
fn iteration_timeout_stops_what_a_stubborn_agent_started_in_a_session_of_its_own() {
    let p = Project::with_task(
        "task: Stubborn\nmax_iterations: 1\niteration_timeout: 1s",
        "- [ ] x\n",
    );
    let agent = p.agent(&STUBBORN.replace("grandchild.pid", "grandchild.pid --new-session"));
    let run = p.run(&agent, &[]);
    run.expect_code(3);
    let pid = grandchild(&p);
    assert!(!pid_alive(pid), "{pid} outlived the iteration");
    // Stopped as soon as the agent was killed (it holds the agent's output), then found
    // dying by the sweep at the end: one process, counted once.
    assert!(
        run.stdout
            .contains("1 process the agent started outside its process group was stopped"),
        "{}",
        run.stdout
    );
}

/// A process that left the agent's session and then exited on its own is reaped by ralph,
/// which adopted it: no zombie waits under ralph for the rest of the run.
#[test]
fn an_adopted_process_that_exited_is_reaped_before_the_next_iteration() {
    // Only ralph's adopted children are its to reap: without a subreaper (the portable
    // backend) the grandchild is init's, and init reaps it when it will.
    if !ralph_process::SUBREAPER {
        return;
    }
    let p = Project::with_task("task: Leaky\nmax_iterations: 2", "- [ ] x\n");
    let agent = p.agent(concat!(
        "[iteration 1]\n",
        "spawn-grandchild 10ms --pid-file grandchild.pid --quiet --new-session\n",
        "sleep 300ms\n",
        "[iteration 2]\n",
        "run sh -c \"if [ -e /proc/$(cat grandchild.pid) ]; then echo left; else echo reaped; fi > seen\"\n",
    ));
    p.run(&agent, &[]).expect_code(3);
    assert_eq!(p.read("seen").trim(), "reaped");
}

/// What `test_command` starts in a session of its own goes the same way as the agent's.
#[test]
fn a_process_the_test_command_started_in_a_session_of_its_own_is_stopped() {
    // The tests end once the sleeper has left their session, and so their group (it leads a
    // group of its own, whose id `ps` shows on Linux and macOS alike): before, it would go
    // with the tests' group.
    let p = Project::with_task(
        "task: Leaky tests\nmax_iterations: 1\ntest_command: sh leaky-tests.sh",
        "- [ ] x\n",
    );
    p.write(
        "leaky-tests.sh",
        &format!(
            "{} --sleep 300000 --setsid & pid=$!\n\
             until [ \"$(ps -o pgid= -p $pid | tr -d ' ')\" = $pid ]; do sleep 0.01; done\n\
             echo $pid > tests.pid\n",
            fake_agent_bin().display()
        ),
    );
    let agent = p.agent("[iteration 1]\ncheck-all\nsignal DONE\n");
    p.run(&agent, &[]).expect_code(0);
    let pid: i32 = p.read("tests.pid").trim().parse().unwrap();
    assert!(!pid_alive(pid), "{pid} outlived the tests");
    assert!(
        p.events()
            .iter()
            .any(|e| e["event"] == "escapees_stopped" && e["from"] == "test command")
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

/// An agent that leaves a process in a session of its own that ignores SIGTERM (its stop takes
/// the whole 3 s grace), then asks; the next iteration saves its prompt and finishes.
const STUBBORN_THEN_ASK: &str = "\
[iteration 1]
spawn-grandchild 300s --pid-file stubborn.pid --quiet --new-session --ignore-sigterm
question \"Redis or Memcached?\" --option Redis --option Memcached --default Redis
signal QUESTION
[iteration 2]
save-prompt prompt-2.txt
check-all
signal DONE
";

/// A loop whose agent ([`STUBBORN_THEN_ASK`]) has asked, with the stubborn process it left
/// still alive: what the agent left is stopped while its question waits, not before the
/// question is shown. Returns the process's pid.
fn asked_beside_a_stubborn_process() -> (Project, Guarded, i32) {
    let p = Project::with_task(
        "task: Cache\nmax_iterations: 2\nquestion_timeout: 5m",
        "- [ ] cache\n",
    );
    let agent = p.agent(STUBBORN_THEN_ASK);
    let child = p.start(&agent, &[]);
    p.wait_for_status("waiting_input", Duration::from_secs(20));
    let pid = read_pid(&p, "stubborn.pid");
    // Regression: the question was shown only once the sweep after the agent had stopped
    // everything it left, here after the whole grace (and, without a subreaper, after a walk
    // of the whole process table).
    assert!(
        pid_alive(pid),
        "the question was shown only after what the agent left was stopped"
    );
    (p, child, pid)
}

/// The position of the first event `kind` in `events` (of iteration `iteration`, if given).
fn position(events: &[serde_json::Value], kind: &str, iteration: Option<u32>) -> usize {
    events
        .iter()
        .position(|e| e["event"] == kind && iteration.is_none_or(|i| e["iteration"] == i))
        .unwrap_or_else(|| panic!("no {kind} event in {events:#?}"))
}

#[test]
fn an_answer_given_while_what_the_agent_left_is_stopped_reaches_the_next_iteration() {
    let (p, child, pid) = asked_beside_a_stubborn_process();
    p.exec(&["answer", "Memcached, it is already deployed"])
        .expect_code(0);
    let run = Run::finish(child, Duration::from_secs(60));
    run.expect_code(0);
    assert!(!pid_alive(pid), "{pid} outlived its iteration");
    let prompt = p.read("prompt-2.txt");
    assert!(
        prompt.contains("> Memcached, it is already deployed"),
        "{prompt}"
    );
    // Shown and answered while the process was being stopped; stopped (killed, after the
    // grace) before the next agent started.
    let events = p.events();
    let asked = position(&events, "question", None);
    let answered = position(&events, "answer", None);
    let stopped = position(&events, "escapees_stopped", Some(1));
    let next = position(&events, "iteration_start", Some(2));
    assert!(
        asked < answered && answered < stopped && stopped < next,
        "{events:#?}"
    );
    assert_eq!(events[stopped]["how"], "Killed", "{events:#?}");
    assert!(
        run.stdout
            .contains("1 process the agent started outside its process group was stopped (Killed)"),
        "{}",
        run.stdout
    );
}

#[test]
fn ctrl_c_while_a_question_waits_beside_a_stubborn_leftover_kills_it_at_once() {
    let (p, child, pid) = asked_beside_a_stubborn_process();
    let ralph = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(ralph, nix::sys::signal::Signal::SIGINT).unwrap();
    let start = std::time::Instant::now();
    Run::finish(child, Duration::from_secs(30)).expect_code(130);
    // Well under the 3 s grace: the Ctrl-C that ended the question's wait cut it short.
    let took = start.elapsed();
    assert!(took < Duration::from_millis(2500), "{took:?}");
    assert!(!pid_alive(pid), "{pid} outlived ralph");
    let state = p.state();
    assert_eq!(state["status"], "stopped");
    // The question is kept for the next run.
    assert_eq!(state["pending_question"]["text"], "Redis or Memcached?");
}
