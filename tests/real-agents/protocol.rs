//! The scenarios every CLI runs through ralph's file protocol, whatever its API: DONE after
//! real tool calls, a question answered from another process and delivered by resuming the
//! CLI's session, and an API error reported and not looped on.
//!
//! Each CLI's module calls these with its preset and its scenarios
//! (`scenarios/<cli>/done.json`, `question.json`); the tool names and arguments there are the
//! CLI's own, the tool call ids (`call_write_hello`, `call_write_question`, ...) the same.

use std::time::Instant;

use serde_json::Value;

use crate::harness::*;

/// The signal kinds ralph recorded in `events.jsonl`.
pub fn signals(p: &Project) -> Vec<String> {
    p.events_of("signal")
        .iter()
        .filter_map(|e| e["signal"].as_str().map(str::to_lowercase))
        .collect()
}

/// How many iterations ralph started.
pub fn iterations(p: &Project) -> usize {
    p.events_of("iteration_start").len()
}

/// Whether any string inside `v` contains `needle`.
fn mentions(v: &Value, needle: &str) -> bool {
    match v {
        Value::String(s) => s.contains(needle),
        Value::Array(items) => items.iter().any(|i| mentions(i, needle)),
        Value::Object(map) => map.values().any(|i| mentions(i, needle)),
        _ => false,
    }
}

/// The model calls that are the agent's own turns, not opencode's side call that names a new
/// session ("Generate a title for this conversation: ...", answered by its own rule).
fn turns(p: &Project) -> Vec<Value> {
    p.mock
        .requests()
        .into_iter()
        .filter(|r| {
            !r["last_user"]
                .as_str()
                .unwrap_or("")
                .contains("Generate a title")
        })
        .collect()
}

/// `scenarios/<cli>/done.json`: the model writes hello.txt, checks the box with a shell
/// command, and says DONE; ralph verifies and exits 0. Returns the project for more checks.
pub fn done(cli: Cli, agent: &str) -> Project {
    let p = Project::with_cli(
        cli,
        &format!("{}/done", cli.program()),
        "task: Write hello.txt containing the word hello.\nmax_iterations: 2\ntest_command: grep -qx hello hello.txt",
        "# Hello\n\n- [ ] hello.txt says hello\n",
    );
    let run = p.spawn_agent(agent, &[]).finish(RUN_LIMIT);
    eprintln!("{agent} done: ralph ran for {:?}", run.elapsed);
    run.expect_code(0);

    // The CLI really ran the tools the mock asked for.
    assert_eq!(p.read("hello.txt"), "hello\n");
    assert!(
        p.read("RALPH_TASK.md")
            .contains("- [x] hello.txt says hello"),
        "{}",
        p.read("RALPH_TASK.md")
    );
    assert_eq!(p.state()["status"], "done");
    assert_eq!(iterations(&p), 1);
    assert_eq!(signals(&p), ["done"]);

    let requests = p.mock.requests();
    for r in &requests {
        assert!(r["rule"].is_number(), "a request no rule expected: {r:#}");
    }
    let turns = turns(&p);
    assert_eq!(turns.len(), 3, "write, shell, done: {requests:#?}");
    for r in &turns {
        assert_eq!(r["working_dir"], p.root().display().to_string(), "{r:#}");
    }
    // The prompt went to the model through the CLI's stdin, verbatim.
    let first = turns[0]["last_user"].as_str().unwrap();
    assert!(first.contains("hello.txt says hello"), "{first}");
    assert!(
        first.contains("<ralph>DONE</ralph>"),
        "the protocol: {first}"
    );
    p
}

/// `scenarios/<cli>/question.json`: the model writes `.ralph/question.md` and says QUESTION;
/// the test answers with `ralph answer` from another process; ralph resumes the CLI's session
/// with the answer, and the model acts on it.
pub fn question_answered_by_resume(cli: Cli, agent: &str) {
    let p = Project::with_cli(
        cli,
        &format!("{}/question", cli.program()),
        "task: Choose the session store's cache backend and record it in cache.txt.\nmax_iterations: 3\nquestion_timeout: 2m\ntest_command: grep -qx Redis cache.txt",
        "- [x] the cache backend is chosen\n",
    );
    let started = Instant::now();
    let child = p.spawn_agent(agent, &[]);

    let state = p.wait_for_status("waiting_input", RUN_LIMIT);
    let asked_after = started.elapsed();
    let question = &state["pending_question"];
    assert!(
        question["text"]
            .as_str()
            .unwrap_or("")
            .contains("Redis or Memcached?"),
        "{state:#}"
    );
    assert_eq!(question["raised_by"], "signal", "{state:#}");
    assert_eq!(question["options"][1]["label"], "Memcached", "{state:#}");

    let status = Run::from_output(p.ralph().args(["status", "--json"]).output().unwrap());
    status.expect_code(0);
    let json: Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(json["status"], "waiting_input");

    // Nothing the mock saw so far carries the answer: the prompt must not contain it by chance.
    let before = p.mock.requests().len();
    for r in p.mock.requests() {
        assert!(
            !mentions(&r["body"], "Use Redis"),
            "a request before the answer already says 'Use Redis': {r:#}"
        );
    }

    Run::from_output(p.ralph().args(["answer", "Use Redis"]).output().unwrap()).expect_code(0);
    let run = child.finish(RUN_LIMIT);
    eprintln!(
        "{agent} question: asked after {asked_after:?}, whole run {:?}",
        started.elapsed()
    );
    run.expect_code(0);
    assert_eq!(p.read("cache.txt"), "Redis\n");

    // Resumed: the second iteration continued the first one's session...
    let starts = p.events_of("iteration_start");
    assert_eq!(starts.len(), 2, "{starts:#?}");
    assert!(starts[0]["resumed_session"].is_null(), "{starts:#?}");
    assert!(
        starts[1]["resumed_session"].is_string(),
        "the answer was not delivered by resuming the session: {starts:#?}\n{}",
        run.all_output()
    );
    // ...so the first request after the answer replays the first iteration (the question's
    // write and its result) and has the answer as its newest user input.
    let requests = p.mock.requests();
    let delivered = requests[before..]
        .iter()
        .find(|r| {
            !r["last_user"]
                .as_str()
                .unwrap_or("")
                .contains("Generate a title")
        })
        .unwrap_or_else(|| panic!("the mock got nothing after the answer: {requests:#?}"));
    assert!(
        mentions(&delivered["body"], "call_write_question"),
        "the resumed request does not replay the question's tool call: {delivered:#}"
    );
    let newest = delivered["last_user"].as_str().unwrap_or("");
    assert!(
        newest.contains("Use Redis") && !newest.contains("[tool_result"),
        "the answer is not the newest user input of the resumed session: {delivered:#}"
    );
    assert_eq!(signals(&p), ["question", "done"]);
}

/// Every model call fails with HTTP `status`: ralph shows the error (`shown` is a piece of
/// what it prints), counts the failed iterations, and stops at `max_consecutive_failures`.
pub fn api_error_stops(cli: Cli, agent: &str, status: u16, shown: &str) {
    let p = Project::with_cli(
        cli,
        &format!("api_error_{status}"),
        "task: Anything.\nmax_iterations: 5\nmax_consecutive_failures: 2\ntest_command: \"true\"",
        "- [ ] something\n",
    );
    let run = p.spawn_agent(agent, &[]).finish(RUN_LIMIT);
    eprintln!(
        "{agent} API error {status}: ralph ran for {:?}",
        run.elapsed
    );
    run.expect_code(1);
    let output = run.all_output();
    assert!(
        output.contains(shown),
        "ralph's output does not show the API error ({shown:?}):\n{output}"
    );
    assert!(
        output.contains("max_consecutive_failures"),
        "ralph's output does not say why it stopped:\n{output}"
    );
    assert_eq!(iterations(&p), 2, "{:#?}", p.events());
    assert_eq!(p.state()["status"], "failed");
    // One agent turn per iteration: no retries behind ralph's back.
    assert_eq!(turns(&p).len(), 2, "{:#?}", p.mock.requests());
}
