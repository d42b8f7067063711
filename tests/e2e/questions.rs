//! Questions: answered from another process, unanswered, late, re-presented after a restart.

use std::time::Duration;

use super::util::*;

const ASK_THEN_LOOK: &str = "\
[iteration 1]
question \"Redis or Memcached?\" --option Redis --option Memcached --default Redis
signal QUESTION
[iteration 2]
save-prompt prompt-2.txt
copy .ralph/answer.md answer-during-run.md
sleep 200ms
copy .ralph/answer.md answer-late-in-run.md
";

/// A loop of `max_iterations` whose agent ([`ASK_THEN_LOOK`]) has asked its question, with a
/// minute to answer it; and `state.json` as it says so.
fn cache_question_waiting(max_iterations: u32) -> (Project, Guarded, serde_json::Value) {
    let p = Project::with_task(
        &format!("task: Cache\nmax_iterations: {max_iterations}\nquestion_timeout: 1m"),
        "- [ ] cache\n",
    );
    let agent = p.agent(ASK_THEN_LOOK);
    let child = p.start(&agent, &[]);
    let state = p.wait_for_status("waiting_input", Duration::from_secs(20));
    (p, child, state)
}

#[test]
fn an_answer_from_ralph_answer_reaches_the_next_iteration_as_file_and_prompt() {
    let (p, child, state) = cache_question_waiting(2);
    let q = &state["pending_question"];
    assert_eq!(q["text"], "Redis or Memcached?");
    assert_eq!(q["options"][0]["label"], "Redis");
    assert_eq!(q["default"], "Redis");
    assert!(q["deadline"].is_string());

    let status = p.exec(&["status", "--json"]);
    status.expect_code(0);
    let json: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(json["status"], "waiting_input");
    assert_eq!(json["pending_question"]["text"], "Redis or Memcached?");
    assert_eq!(json["running"], true);

    let answered = p.exec(&["answer", "Use Redis, we need pub/sub later"]);
    answered.expect_code(0);

    let run = Run::finish(child, Duration::from_secs(30));
    run.expect_code(3);
    assert!(
        run.stdout.contains("answered from `ralph answer`"),
        "{}",
        run.stdout
    );
    let during = p.read("answer-during-run.md");
    assert!(
        during.contains("Use Redis, we need pub/sub later"),
        "{during}"
    );
    assert!(
        p.read("answer-late-in-run.md").contains("Use Redis"),
        "the file stays for the whole run"
    );
    let prompt = p.read("prompt-2.txt");
    assert!(prompt.contains("Your question was answered"), "{prompt}");
    assert!(
        prompt.contains("> Use Redis, we need pub/sub later"),
        "{prompt}"
    );
    assert!(prompt.contains("> Redis or Memcached?"), "{prompt}");
    // Delivered, then archived and removed.
    assert!(!p.exists(".ralph/answer.md"));
    assert!(!p.exists(".ralph/question.md"));
    let log = p.read(".ralph/clarifications.md");
    assert!(
        log.contains("Redis or Memcached?") && log.contains("Use Redis, we need pub/sub later"),
        "{log}"
    );
    assert!(log.contains("`ralph answer`"), "{log}");
}

#[test]
fn an_answer_by_option_number_is_the_option_label() {
    let (p, child, _) = cache_question_waiting(2);
    let out_of_range = p.exec(&["answer", "3"]);
    out_of_range.expect_code(2);
    assert!(
        out_of_range.stderr.contains("option 3 is out of range")
            && out_of_range
                .stderr
                .contains(&format!(" answer -C {} --as-text 3", p.root().display())),
        "{}",
        out_of_range.stderr
    );
    // Several numbers are text where only one option may be picked.
    assert!(p.state()["pending_question"]["multi_select"] != true);
    p.exec(&["answer", "2"]).expect_code(0);
    Run::finish(child, Duration::from_secs(30)).expect_code(3);
    assert!(p.read("prompt-2.txt").contains("> Memcached"));
}

#[test]
fn a_number_sent_as_text_is_not_an_option_pick() {
    let (p, child, _) = cache_question_waiting(2);
    p.exec(&["answer", "--as-text", "3"]).expect_code(0);
    Run::finish(child, Duration::from_secs(30)).expect_code(3);
    let prompt = p.read("prompt-2.txt");
    assert!(prompt.contains("\n> 3\n"), "{prompt}");
}

/// Regression: `ralph answer 1,3` on a multi-select question sent the agent "1,3", where the
/// plain view sends the labels.
#[test]
fn option_numbers_for_a_multi_select_question_send_their_labels() {
    let p = Project::empty();
    let mut cmd = p.ralph();
    cmd.args([
        "ask",
        "Which databases?",
        "--option",
        "Postgres",
        "--option",
        "SQLite",
        "--option",
        "MySQL",
        "--multi-select",
        "--timeout",
        "1m",
    ]);
    let asker = spawn(cmd);
    p.wait_for_status("waiting_input", Duration::from_secs(20));
    let out_of_range = p.exec(&["answer", "1,4"]);
    out_of_range.expect_code(2);
    assert!(
        out_of_range.stderr.contains("option 4 is out of range"),
        "{}",
        out_of_range.stderr
    );
    p.exec(&["answer", "3, 1"]).expect_code(0);
    let asked = Run::finish(asker, Duration::from_secs(20));
    asked.expect_code(0);
    // One label per line (issue 25, item 12).
    assert_eq!(asked.stdout.trim(), "MySQL\nPostgres");
}

#[test]
fn an_unanswered_question_lets_the_loop_go_on_and_the_next_prompt_says_so() {
    let p = Project::with_task(
        "task: Cache\nmax_iterations: 2\nquestion_timeout: 300ms",
        "- [ ] cache\n",
    );
    let agent = p.agent(ASK_THEN_LOOK);
    let run = p.run(&agent, &[]);
    run.expect_code(3);
    assert!(run.stdout.contains("no answer in time"), "{}", run.stdout);
    let prompt = p.read("prompt-2.txt");
    assert!(prompt.contains("Your question went unanswered"), "{prompt}");
    assert!(
        prompt.contains("Proceed with your stated default, \"Redis\""),
        "{prompt}"
    );
    assert!(prompt.contains(".ralph/progress.md"), "{prompt}");
    assert!(
        !p.exists("answer-during-run.md"),
        "no answer file when nobody answered"
    );
    assert!(p.read(".ralph/clarifications.md").contains("Unanswered"));
    assert!(p.events().iter().any(|e| e["event"] == "question_timeout"));
}

#[test]
fn question_timeout_zero_does_not_wait() {
    let p = Project::with_task(
        "task: Cache\nmax_iterations: 2\nquestion_timeout: 0",
        "- [ ] cache\n",
    );
    let agent = p.agent(ASK_THEN_LOOK);
    let start = std::time::Instant::now();
    p.run(&agent, &[]).expect_code(3);
    assert!(start.elapsed() < Duration::from_secs(20));
    assert!(
        p.read("prompt-2.txt")
            .contains("Your question went unanswered")
    );
}

#[test]
fn a_late_answer_reaches_a_later_iteration_marked_late() {
    let p = Project::with_task(
        "task: Cache\nmax_iterations: 3\nquestion_timeout: 200ms",
        "- [ ] cache\n",
    );
    let script = "\
[iteration 1]
question \"Redis or Memcached?\" --option Redis --option Memcached --default Redis
signal QUESTION
[iteration 2]
expect-file late-answer-given --wait 20s
[iteration 3]
save-prompt prompt-3.txt
";
    let agent = p.agent(script);
    let child = p.start(&agent, &[]);
    // Wait for the timeout to have happened: iteration 2 is running.
    wait_until(Duration::from_secs(20), "iteration 2", || {
        p.exists(".ralph/logs/run-0001-iter-0002.prompt.md")
            .then_some(())
    });
    let state = p.state();
    assert_eq!(state["pending_question"]["timed_out"], true, "{state}");
    let answered = p.exec(&["answer", "Memcached after all"]);
    answered.expect_code(0);
    assert!(answered.stdout.contains("late"), "{}", answered.stdout);
    p.write("late-answer-given", "");
    Run::finish(child, Duration::from_secs(30)).expect_code(3);
    let prompt = p.read("prompt-3.txt");
    assert!(
        prompt.contains("Your question was answered (late)"),
        "{prompt}"
    );
    assert!(prompt.contains("> Memcached after all"), "{prompt}");
    let log = p.read(".ralph/clarifications.md");
    assert!(log.contains("Unanswered") && log.contains("late"), "{log}");
}

#[test]
fn a_question_signal_without_a_question_file_is_reported_and_the_next_prompt_says_it_was_lost() {
    let p = Project::with_task("task: Forgetful\nmax_iterations: 2", "- [ ] x\n");
    let agent =
        p.agent("[iteration 1]\nsignal QUESTION\n[iteration 2]\nsave-prompt prompt-2.txt\n");
    let run = p.run(&agent, &[]);
    run.expect_code(3);
    assert!(
        run.stderr.contains("wrote no .ralph/question.md"),
        "{}",
        run.stderr
    );
    assert!(p.read("prompt-2.txt").contains("Your question was lost"));
}

#[test]
fn a_pending_question_is_shown_again_after_a_restart() {
    let (p, child, _) = cache_question_waiting(3);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let first = Run::finish(child, Duration::from_secs(20));
    first.expect_code(130);
    let state = p.state();
    assert_eq!(state["status"], "stopped");
    assert_eq!(state["pending_question"]["text"], "Redis or Memcached?");

    // The second run shows the same question first; answer it from outside.
    let child = p.start(&p.agent(ASK_THEN_LOOK), &[]);
    p.wait_for_status("waiting_input", Duration::from_secs(20));
    p.exec(&["answer", "1"]).expect_code(0);
    let second = Run::finish(child, Duration::from_secs(30));
    assert!(second.stdout.contains("still waiting"), "{}", second.stdout);
    assert!(
        second.stdout.contains("Redis or Memcached?"),
        "{}",
        second.stdout
    );
    // Iteration numbering resumes: the answer goes to iteration 2.
    assert!(p.read("prompt-2.txt").contains("> Redis"));
}

#[test]
fn answering_with_no_question_waiting_is_refused_unless_forced() {
    let p = Project::with_task("task: Quiet\nmax_iterations: 1", "- [ ] x\n");
    let refused = p.exec(&["answer", "hello"]);
    refused.expect_code(1);
    assert!(
        refused.stderr.contains("no question is waiting"),
        "{}",
        refused.stderr
    );
    assert!(!p.exists(".ralph/answer.md"));

    p.exec(&["answer", "--force", "Prefer small commits"])
        .expect_code(0);
    let agent = p.agent("[iteration 1]\nsave-prompt prompt.txt\n");
    p.run(&agent, &[]).expect_code(3);
    let prompt = p.read("prompt.txt");
    assert!(
        prompt.contains("Guidance from your human") && prompt.contains("Prefer small commits"),
        "{prompt}"
    );
}

#[test]
fn an_empty_answer_is_refused() {
    let (p, mut child, _) = cache_question_waiting(2);
    let empty = p.exec(&["answer", "   "]);
    empty.expect_code(2);
    assert!(empty.stderr.contains("empty"), "{}", empty.stderr);
    assert!(!p.exists(".ralph/answer.md"));
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn racing_answers_have_exactly_one_winner() {
    let (p, child, _) = cache_question_waiting(2);
    let racers: Vec<_> = (0..20)
        .map(|i| {
            let mut c = p.ralph();
            c.args(["answer", &format!("answer number {i}")]);
            spawn(c)
        })
        .collect();
    let results: Vec<Run> = racers
        .into_iter()
        .map(|c| Run::finish(c, Duration::from_secs(30)))
        .collect();
    let winners = results.iter().filter(|r| r.code == Some(0)).count();
    assert_eq!(winners, 1, "{results:#?}");
    for loser in results.iter().filter(|r| r.code != Some(0)) {
        assert_eq!(loser.code, Some(1));
        assert!(
            loser.stderr.contains("answered first")
                || loser.stderr.contains("no question is waiting"),
            "{}",
            loser.stderr
        );
    }
    Run::finish(child, Duration::from_secs(30)).expect_code(3);
    let prompt = p.read("prompt-2.txt");
    assert_eq!(prompt.matches("> answer number").count(), 1, "{prompt}");
}

#[test]
fn ralph_ask_without_a_loop_is_answered_by_ralph_answer() {
    let p = Project::empty();
    let mut cmd = p.ralph();
    cmd.args([
        "ask",
        "Which database?",
        "--option",
        "Postgres",
        "--option",
        "SQLite",
        "--timeout",
        "1m",
    ]);
    let asker = spawn(cmd);
    let state = p.wait_for_status("waiting_input", Duration::from_secs(20));
    assert_eq!(state["pending_question"]["raised_by"], "ask");
    let status = p.exec(&["status"]);
    assert!(
        status.stdout.contains("Which database?"),
        "{}",
        status.stdout
    );
    p.exec(&["answer", "2"]).expect_code(0);
    let asked = Run::finish(asker, Duration::from_secs(20));
    asked.expect_code(0);
    assert_eq!(asked.stdout.trim(), "SQLite");
    assert!(
        !p.exists(".ralph/question.md")
            && !p.exists(".ralph/answer.md")
            && !p.exists(".ralph/ask.json")
    );
    assert!(p.read(".ralph/clarifications.md").contains("SQLite"));
    assert!(p.state()["pending_question"].is_null());
    // Regression: the state it left said `running` with no loop, "iteration 0 of 0".
    assert_eq!(p.state()["status"], "stopped");
    let status = p.exec(&["status"]);
    status.expect_code(0);
    assert!(
        !status.stdout.contains("running") && !status.stdout.contains("iteration 0"),
        "{}",
        status.stdout
    );
}

#[test]
fn ralph_ask_without_a_loop_times_out_with_exit_3_and_a_hint() {
    let p = Project::empty();
    let asked = p.exec(&[
        "ask",
        "Which database?",
        "--option",
        "Postgres",
        "--default",
        "Postgres",
        "--timeout",
        "300ms",
    ]);
    asked.expect_code(3);
    // On stderr: stdout is for the answer alone.
    assert_eq!(asked.stdout, "");
    assert!(
        asked
            .stderr
            .contains("proceed with your default (Postgres)"),
        "{}",
        asked.stderr
    );
    assert!(p.read(".ralph/clarifications.md").contains("Unanswered"));
    // The question stays open, as the hint says: a late answer is taken, `ralph status` shows
    // it waiting for the next run, and that run delivers it.
    // Regression: the state lost the question, and `ralph answer` said none was waiting.
    assert_eq!(p.state()["status"], "stopped");
    assert_eq!(p.state()["pending_question"]["timed_out"], true);
    p.exec(&["answer", "SQLite after all"]).expect_code(0);
    let status = p.exec(&["status"]);
    assert!(
        status
            .stdout
            .contains("Answered with `ralph answer`: SQLite after all"),
        "{}",
        status.stdout
    );
    assert!(
        status.stdout.contains("the next `ralph run` delivers it"),
        "{}",
        status.stdout
    );
    assert!(
        !status.stdout.contains("Answer it with"),
        "{}",
        status.stdout
    );
    p.write(
        "RALPH_TASK.md",
        "---\ntask: Pick a database\nmax_iterations: 1\n---\n- [ ] x\n",
    );
    let agent = p.agent("[iteration 1]\nsave-prompt prompt-1.txt\n");
    p.run(&agent, &[]).expect_code(3);
    let prompt = p.read("prompt-1.txt");
    assert!(prompt.contains("> SQLite after all"), "{prompt}");
    assert!(prompt.contains("after the deadline"), "{prompt}");
}

#[test]
fn ralph_ask_inside_a_running_loop_is_shown_and_answered_while_the_agent_waits() {
    let p = Project::with_task("task: Ask inline\nmax_iterations: 1", "- [ ] x\n");
    let agent = p.agent(
        "[iteration 1]\nrun-capture ask-out.txt ralph ask \"Which database?\" --option Postgres --option SQLite --timeout 1m\nprint asked and got an answer\n",
    );
    let child = p.start(&agent, &[]);
    let state = p.wait_for_status("waiting_input", Duration::from_secs(20));
    assert_eq!(state["pending_question"]["raised_by"], "ask");
    assert_eq!(state["pending_question"]["text"], "Which database?");
    p.exec(&["answer", "SQLite, it is small"]).expect_code(0);
    let run = Run::finish(child, Duration::from_secs(30));
    run.expect_code(3);
    assert_eq!(p.read("ask-out.txt").trim(), "SQLite, it is small");
    assert_eq!(p.read("ask-out.txt.code").trim(), "0");
    assert!(
        run.stdout.contains("asked and got an answer"),
        "{}",
        run.stdout
    );
    assert!(
        p.read(".ralph/clarifications.md")
            .contains("SQLite, it is small")
    );
    assert!(!p.exists(".ralph/answer.md"));
}

#[test]
fn ralph_ask_inside_a_running_loop_times_out_and_the_agent_goes_on() {
    let p = Project::with_task("task: Ask inline\nmax_iterations: 1", "- [ ] x\n");
    let agent = p.agent(
        "[iteration 1]\nrun-capture ask-out.txt ralph ask \"Which database?\" --default Postgres --timeout 400ms\nprint went on\n",
    );
    let run = p.run(&agent, &[]);
    run.expect_code(3);
    assert_eq!(p.read("ask-out.txt.code").trim(), "3");
    // The instruction is on the agent's stderr (its log); stdout, the answer, is empty.
    assert_eq!(p.read("ask-out.txt"), "");
    assert!(
        p.read(".ralph/logs/run-0001-iter-0001.err")
            .contains("proceed with your default (Postgres)")
    );
    assert!(run.stdout.contains("went on"), "{}", run.stdout);
}

#[test]
fn notify_command_gets_the_question_in_its_environment_and_runs_nothing_from_it() {
    let p = Project::with_task(
        "task: Notify\nmax_iterations: 2\nquestion_timeout: 0\nnotify_command: printf '%s' \"$RALPH_QUESTION\" > notified.txt",
        "- [ ] x\n",
    );
    let agent = p.agent(
        "[iteration 1]\nquestion \"Delete $(touch pwned) and `touch pwned2`?\"\nsignal QUESTION\n[iteration 2]\nsave-prompt prompt-2.txt\n",
    );
    p.run(&agent, &[]).expect_code(3);
    let text = wait_until(Duration::from_secs(10), "notified.txt", || {
        std::fs::read_to_string(p.path("notified.txt")).ok()
    });
    assert_eq!(text, "Delete $(touch pwned) and `touch pwned2`?");
    assert!(
        !p.exists("pwned") && !p.exists("pwned2"),
        "nothing in the question may run"
    );
    assert!(
        p.read("prompt-2.txt")
            .contains("Delete $(touch pwned) and `touch pwned2`?"),
        "delivered verbatim"
    );
}

#[test]
fn the_webhook_is_posted_and_a_dead_one_does_not_hold_the_loop() {
    use std::io::{Read as _, Write as _};
    // A live webhook: reads one request, answers 200, hands the body over.
    let live = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let live_port = live.local_addr().unwrap().port();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (mut s, _) = live.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        while let Ok(n) = s.read(&mut chunk) {
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&buf);
            if let Some(i) = text.find("\r\n\r\n") {
                let len: usize = text
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse().unwrap())
                    })
                    .unwrap_or(0);
                if buf.len() >= i + 4 + len {
                    break;
                }
            }
        }
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
        let _ = tx.send(String::from_utf8_lossy(&buf).into_owned());
    });
    let p = Project::with_task(
        &format!(
            "task: Hook\nmax_iterations: 2\nquestion_timeout: 0\nwebhook_url: http://127.0.0.1:{live_port}/hook"
        ),
        "- [ ] x\n",
    );
    let agent =
        p.agent("[iteration 1]\nquestion \"Ship it?\" --option yes --option no\nsignal QUESTION\n");
    p.run(&agent, &[]).expect_code(3);
    let request = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the webhook was called");
    assert!(request.starts_with("POST /hook"), "{request}");
    assert!(request.contains("\"question\":\"Ship it?\""), "{request}");

    // A dead webhook: accepts the connection and never answers. The same loop without a
    // webhook first, for how long the run takes on this machine right now: waiting for the
    // webhook would add its whole 5 s timeout to that, however loaded the machine is.
    let agent_script =
        "[iteration 1]\nquestion \"Ship it?\"\nsignal QUESTION\n[iteration 2]\nprint second\n";
    let p = Project::with_task(
        "task: Hook\nmax_iterations: 2\nquestion_timeout: 0",
        "- [ ] x\n",
    );
    let agent = p.agent(agent_script);
    let start = std::time::Instant::now();
    p.run(&agent, &[]).expect_code(3);
    let without_webhook = start.elapsed();

    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_port = dead.local_addr().unwrap().port();
    let p = Project::with_task(
        &format!(
            "task: Hook\nmax_iterations: 2\nquestion_timeout: 0\nwebhook_url: http://127.0.0.1:{dead_port}/hook"
        ),
        "- [ ] x\n",
    );
    let agent = p.agent(agent_script);
    let start = std::time::Instant::now();
    let run = p.run(&agent, &[]);
    run.expect_code(3);
    // The webhook's own timeout is 5 s; the loop did not wait for it.
    assert!(
        start.elapsed() < without_webhook + Duration::from_secs(4),
        "{:?} with a dead webhook, {without_webhook:?} without one",
        start.elapsed()
    );
    drop(dead);
}

#[test]
fn ralph_ask_with_a_ralph_dir_that_does_not_exist_creates_nothing() {
    // Regression: a stale RALPH_DIR made `ralph ask` create the whole path it named.
    let p = Project::empty();
    let ralph_dir = p.path("gone/deeper/.ralph");
    let run = Run::from_output(
        p.ralph()
            .args(["ask", "Still there?", "--timeout", "0"])
            .env("RALPH_DIR", &ralph_dir)
            .output()
            .unwrap(),
    );
    run.expect_code(2);
    assert!(run.stderr.contains("no such directory"), "{}", run.stderr);
    assert!(run.stderr.contains("RALPH_DIR"), "{}", run.stderr);
    assert!(!p.exists("gone"));
}

#[test]
fn an_answer_taken_by_a_run_that_ended_before_delivering_it_reaches_the_next_run() {
    // The question comes in the last iteration: the answer closes it, the run ends at
    // max_iterations with the answer not yet delivered. Regression: the next run took it for
    // a second answer to a closed question, and removed it unseen.
    let p = Project::with_task(
        "task: Cache\nmax_iterations: 1\nquestion_timeout: 1m",
        "- [ ] cache\n",
    );
    let agent = p.agent(
        "[iteration 1]\nquestion \"Redis or Memcached?\" --option Redis --option Memcached\nsignal QUESTION\n",
    );
    let child = p.start(&agent, &[]);
    p.wait_for_status("waiting_input", Duration::from_secs(20));
    p.exec(&["answer", "Memcached, for the shared pool"])
        .expect_code(0);
    Run::finish(child, Duration::from_secs(30)).expect_code(3);
    assert!(p.exists(".ralph/answer.md"), "kept for the next run");

    // A new run after max_iterations counts from 1 again.
    let agent = p.agent("[iteration 1]\nsave-prompt prompt-next.txt\n");
    let run = p.run(&agent, &[]);
    run.expect_code(3);
    assert!(!run.stdout.contains("not used"), "{}", run.stdout);
    let prompt = p.read("prompt-next.txt");
    assert!(
        prompt.contains("> Memcached, for the shared pool"),
        "{prompt}"
    );
    assert!(prompt.contains("> Redis or Memcached?"), "{prompt}");
    let log = p.read(".ralph/clarifications.md");
    assert!(log.contains("Memcached, for the shared pool"), "{log}");
    assert!(!p.exists(".ralph/answer.md"));
}

#[test]
fn a_claim_left_by_a_killed_ralph_ask_does_not_take_over_a_later_question() {
    // Regression: the stale `.ralph/ask.json` made a later file-protocol question look like
    // that old `ralph ask` (its wait, its 10-minute deadline), and the next prompt said the
    // question was both answered and lost.
    let p = Project::with_task(
        "task: Cache\nmax_iterations: 2\nquestion_timeout: 1m",
        "- [ ] cache\n",
    );
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    p.write(
        ".ralph/ask.json",
        &format!(
            r#"{{"pid":{pid},"asked_at":"2026-01-01T00:00:00.000Z","deadline":"2026-01-01T00:10:00.000Z"}}"#
        ),
    );
    let agent = p.agent(
        "[iteration 1]\nquestion \"Redis or Memcached?\" --option Redis --option Memcached\nsignal QUESTION\n\
         [iteration 2]\nsave-prompt prompt-2.txt\n",
    );
    let child = p.start(&agent, &[]);
    let state = p.wait_for_status("waiting_input", Duration::from_secs(20));
    assert_eq!(state["pending_question"]["raised_by"], "signal", "{state}");
    assert_ne!(
        state["pending_question"]["asked_at"], "2026-01-01T00:00:00.000Z",
        "{state}"
    );
    p.exec(&["answer", "Redis"]).expect_code(0);
    Run::finish(child, Duration::from_secs(30)).expect_code(3);
    let prompt = p.read("prompt-2.txt");
    assert!(prompt.contains("> Redis"), "{prompt}");
    assert!(!prompt.contains("was lost"), "{prompt}");
    assert!(!p.exists(".ralph/ask.json"));
}

/// The question of iteration 1 answered with "Redis", then the run stopped by `stop` while
/// iteration 2 has the answer: the next run's first iteration must get it, archived once.
fn answer_survives_a_stop_while_delivering(stop: impl FnOnce(Guarded)) {
    let p = Project::with_task(
        "task: Cache\nmax_iterations: 4\nquestion_timeout: 1m",
        "- [ ] cache\n",
    );
    let agent = p.agent(
        "[iteration 1]\nquestion \"Redis or Memcached?\" --option Redis --option Memcached\nsignal QUESTION\n\
         [iteration 2]\nwrite delivering yes\nsleep 30s\n\
         [iteration 3]\nsave-prompt prompt-3.txt\n",
    );
    let child = p.start(&agent, &[]);
    p.wait_for_status("waiting_input", Duration::from_secs(20));
    p.exec(&["answer", "Redis"]).expect_code(0);
    wait_until(Duration::from_secs(20), "iteration 2", || {
        p.exists("delivering").then_some(())
    });
    stop(child);
    assert!(p.exists(".ralph/answer.md"), "kept for the next run");

    // The next run's first iteration is 3, or 2 again when ralph was killed before its save
    // of iteration 2 landed (it runs beside the agent's start): either must have the answer.
    let agent = p.agent(
        "[iteration 2]\nsave-prompt prompt-2.txt\n[iteration 3]\nsave-prompt prompt-3.txt\n",
    );
    let run = p.run(&agent, &[]);
    run.expect_code(3);
    assert!(!run.stdout.contains("not used"), "{}", run.stdout);
    let first = ["prompt-2.txt", "prompt-3.txt"]
        .into_iter()
        .find(|f| p.exists(f));
    let prompt = p.read(first.expect("a prompt saved"));
    assert!(prompt.contains("> Redis\n"), "{prompt}");
    assert!(prompt.contains("> Redis or Memcached?"), "{prompt}");
    let log = p.read(".ralph/clarifications.md");
    assert_eq!(log.matches("Redis or Memcached?").count(), 1, "{log}");
    assert!(!p.exists(".ralph/answer.md"));
}

#[test]
fn an_answer_whose_run_was_killed_while_delivering_it_reaches_the_next_run() {
    // SIGKILL: nothing of ralph's own runs to finish the delivery.
    answer_survives_a_stop_while_delivering(|mut child| {
        child.kill().unwrap();
        child.wait().unwrap();
    });
}

#[test]
fn an_answer_whose_iteration_was_stopped_by_ctrl_c_reaches_the_next_run() {
    // The agent may not have done anything with the answer yet. Regression: it was archived
    // as delivered and removed; the next run's agent never saw it.
    answer_survives_a_stop_while_delivering(|child| {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        )
        .unwrap();
        Run::finish(child, Duration::from_secs(30)).expect_code(130);
    });
}

/// Regression (issue 34, item 6; issue 35, item 7): a lone `ralph ask` outside any project
/// created `.ralph/` where it was run (which then made every directory below it a project for
/// the upward search), talked of loops and iterations, and did not register, so `ralph serve`
/// and `ralph status` elsewhere never saw it. It now keeps its question in the state
/// directory, registers, and leaves nothing behind.
#[test]
fn a_lone_ralph_ask_outside_any_project_leaves_nothing_and_is_seen_from_elsewhere() {
    let p = Project::new();
    let mut cmd = p.ralph();
    cmd.args([
        "ask",
        "Which databases?",
        "--option",
        "Postgres",
        "--option",
        "SQLite",
        "--multi-select",
        "--json",
        "--timeout",
        "1m",
    ]);
    let asker = spawn(cmd);
    // Seen from another directory outside any project, through the registry.
    let elsewhere = p.beside();
    let status = wait_until(
        Duration::from_secs(20),
        "the question in ralph status",
        || {
            let run = elsewhere.exec(&["status"]);
            run.stdout.contains("Which databases?").then_some(run)
        },
    );
    assert!(!p.exists(".ralph"), "{}", status.stdout);
    elsewhere.exec(&["answer", "1,2"]).expect_code(0);
    let asked = Run::finish(asker, Duration::from_secs(20));
    asked.expect_code(0);
    let json: serde_json::Value = serde_json::from_str(asked.stdout.trim()).unwrap();
    assert_eq!(json["picks"], serde_json::json!(["Postgres", "SQLite"]));
    assert!(!asked.stderr.contains("iteration"), "{}", asked.stderr);
    assert!(!p.exists(".ralph"));
    let asks = p.state_path().join("asks");
    let left: Vec<_> = std::fs::read_dir(&asks)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
    // Timed out alone, outside any project: no word of iterations, loops or `.ralph/`.
    let timed_out = p.exec(&["ask", "Still there?", "--timeout", "1s"]);
    timed_out.expect_code(3);
    for word in ["iteration", "loop", ".ralph"] {
        assert!(
            !timed_out.stderr.contains(word),
            "{word}: {}",
            timed_out.stderr
        );
    }
    assert!(!p.exists(".ralph"));
}

/// Regression (issue 34, item 3): after `DONE verified`, `ralph status` still showed the
/// iteration-1 question that had timed out (its waiting time still ticking), and
/// `ralph answer 2` was accepted "for the next run". A finished run has no open question, and
/// a late answer to it is refused, saying the run ended.
#[test]
fn a_finished_run_has_no_open_question_and_a_late_answer_is_refused() {
    let p = Project::with_task(
        "task: Cache\nmax_iterations: 3\nquestion_timeout: 300ms",
        "- [ ] cache\n",
    );
    let agent = p.agent(
        "[iteration 1]\nquestion \"Redis or Memcached?\" --option Redis --option Memcached\nsignal QUESTION\n\
         [iteration 2]\ncheck-all\nsignal DONE\n",
    );
    p.run(&agent, &[]).expect_code(0);
    let state = p.state();
    assert_eq!(state["status"], "done", "{state}");
    assert!(state["pending_question"].is_null(), "{state}");
    let status = p.exec(&["status"]);
    assert!(
        !status.stdout.contains("Redis or Memcached?"),
        "{}",
        status.stdout
    );
    let late = p.exec(&["answer", "2"]);
    late.expect_code(1);
    assert!(
        late.stderr.contains("the run that asked it has ended"),
        "{}",
        late.stderr
    );
    assert!(!p.exists(".ralph/answer.md"));
    assert!(!p.exists(".ralph/question.md"));
}
