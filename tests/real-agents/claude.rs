//! `ralph run --agent claude` with the real Claude Code CLI: DONE, a question answered from
//! another process, a signal that only appears in a tool result, and API errors.

use std::time::Instant;

use serde_json::Value;

use crate::harness::*;
use crate::protocol::{iterations, signals};

#[test]
#[ignore = "needs the real Claude Code CLI: run `make e2e`"]
fn done_with_the_box_checked_and_passing_tests_exits_0() {
    let p = Project::new(
        "done",
        "task: Write hello.txt containing the word hello.\nmax_iterations: 2\ntest_command: grep -qx hello hello.txt",
        "# Hello\n\n- [ ] hello.txt says hello\n",
    );
    let run = p.run(&[]);
    run.expect_code(0);
    eprintln!("done: ralph ran for {:?}", run.elapsed);

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

    // The prompt went to the model through the CLI's stdin, and the CLI ran in the project.
    let requests = p.mock.requests();
    assert_eq!(requests.len(), 3, "write+read, edit, done: {requests:#?}");
    for r in &requests {
        assert_eq!(r["working_dir"], p.root().display().to_string());
        assert!(r["rule"].is_number(), "a request no rule expected: {r:#}");
    }
    let first = user_texts(&requests[0]["body"]).join("\n");
    assert!(first.contains("hello.txt says hello"), "{first}");
    assert!(
        first.contains("<ralph>DONE</ralph>"),
        "the protocol: {first}"
    );
}

#[test]
#[ignore = "needs the real Claude Code CLI: run `make e2e`"]
fn a_question_answered_from_another_process_reaches_the_agent() {
    let p = Project::new(
        "question",
        "task: Choose the session store's cache backend and record it in cache.txt.\nmax_iterations: 3\nquestion_timeout: 2m\ntest_command: grep -qx Redis cache.txt",
        "- [x] the cache backend is chosen\n",
    );
    let started = Instant::now();
    let child = p.spawn_run(&[]);

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
    assert_eq!(question["options"][1]["label"], "Memcached");

    let status = Run::from_output(p.ralph().args(["status", "--json"]).output().unwrap());
    status.expect_code(0);
    let json: Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(json["status"], "waiting_input");

    // Nothing the mock saw so far carries the answer: the prompt must not contain it by chance.
    let before = p.mock.requests().len();
    for r in p.mock.requests() {
        assert!(
            !r["body"].to_string().contains("Use Redis"),
            "a request before the answer already says 'Use Redis': {r:#}"
        );
    }

    Run::from_output(p.ralph().args(["answer", "Use Redis"]).output().unwrap()).expect_code(0);
    let run = child.finish(RUN_LIMIT);
    run.expect_code(0);
    assert_eq!(p.read("cache.txt"), "Redis\n");

    // The first request after the answer carries it, in a user message.
    let requests = p.mock.requests();
    let after = &requests[before..];
    let delivered = after
        .first()
        .unwrap_or_else(|| panic!("the mock got nothing after the answer: {requests:#?}"));
    let texts = user_texts(&delivered["body"]);
    assert!(
        texts.iter().any(|t| t.contains("Use Redis")),
        "the answer is in no user message of the next request: {delivered:#}"
    );
    // Resumed: the request replays the first iteration (the question's Write) and the answer
    // is the newest user message. Fresh: a new conversation whose prompt carries the answer.
    let resumed = replays_tool_use(&delivered["body"], "toolu_write_question");
    if resumed {
        assert!(
            delivered["last_user"]
                .as_str()
                .unwrap_or("")
                .contains("Use Redis"),
            "a resumed session gets the answer as its newest user message: {delivered:#}"
        );
        let starts = p.events_of("iteration_start");
        assert!(
            starts.iter().any(|e| e["resumed_session"].is_string()),
            "{starts:#?}"
        );
    } else {
        assert_eq!(
            texts.len(),
            1,
            "a fresh session has one user message, the prompt: {delivered:#}"
        );
    }
    eprintln!(
        "question: asked after {asked_after:?}, whole run {:?}; the answer reached Claude Code {}",
        started.elapsed(),
        if resumed {
            "by resuming its session (the request replays the earlier turns)"
        } else {
            "in a fresh session's prompt (no earlier turns replayed)"
        }
    );
    assert_eq!(signals(&p), ["question", "done"]);
}

#[test]
#[ignore = "needs the real Claude Code CLI: run `make e2e`"]
fn a_signal_inside_a_tool_result_or_file_does_not_count() {
    // Everything is in place for DONE to be accepted, so if the tag in the file counted, the
    // run would exit 0.
    let p = Project::new(
        "signal_in_tool_result",
        "task: Keep a note.\nmax_iterations: 1\ntest_command: \"true\"",
        "- [x] the note exists\n",
    );
    let run = p.run(&[]);
    eprintln!("signal in a tool result: ralph ran for {:?}", run.elapsed);
    run.expect_code(3);
    assert_eq!(p.state()["status"], "max_iterations");
    assert!(signals(&p).is_empty(), "{:#?}", p.events());

    // The tag really went through the stream: in the Write's input, and in the output of
    // `cat` and Read that came back to the model.
    let requests = p.mock.requests();
    assert_eq!(requests.len(), 3, "{requests:#?}");
    let results = requests[2]["last_user"].as_str().unwrap();
    assert!(
        results.contains("[tool_result toolu_cat_notes]")
            && results.contains("[tool_result toolu_read_notes]"),
        "{results}"
    );
    assert_eq!(
        results.matches("<ralph>DONE</ralph>").count(),
        4,
        "{results}"
    );
    let out = p.read(".ralph/logs/run-0001-iter-0001.out");
    assert!(out.contains("<ralph>DONE</ralph>"), "{out}");
}

/// An API error every time: reported, and the loop stops at `max_consecutive_failures`.
fn api_error_stops_after_consecutive_failures(scenario: &str, status: u16) {
    let p = Project::new(
        scenario,
        "task: Anything.\nmax_iterations: 5\nmax_consecutive_failures: 2\ntest_command: \"true\"",
        "- [ ] something\n",
    );
    let run = p.run(&[]);
    eprintln!("API error {status}: ralph ran for {:?}", run.elapsed);
    run.expect_code(1);
    let output = run.all_output();
    assert!(
        output.contains(&format!("API Error: {status}")),
        "ralph's output does not show the API error:\n{output}"
    );
    assert!(
        output.contains("max_consecutive_failures"),
        "ralph's output does not say why it stopped:\n{output}"
    );
    assert_eq!(iterations(&p), 2, "{:#?}", p.events());
    assert_eq!(p.state()["status"], "failed");
    // One call per iteration: no retries behind ralph's back (CLAUDE_CODE_MAX_RETRIES=0).
    assert_eq!(p.mock.requests().len(), 2);
}

#[test]
#[ignore = "needs the real Claude Code CLI: run `make e2e`"]
fn an_api_error_500_is_reported_and_not_looped_on() {
    api_error_stops_after_consecutive_failures("api_error_500", 500);
}

#[test]
#[ignore = "needs the real Claude Code CLI: run `make e2e`"]
fn an_api_error_400_is_reported_and_not_looped_on() {
    api_error_stops_after_consecutive_failures("api_error_400", 400);
}

#[test]
#[ignore = "needs the real Claude Code CLI: run `make e2e`"]
fn the_cli_under_test_is_the_version_installed() {
    // `claude --version` prints "2.1.332 (Claude Code)".
    let version = Cli::Claude.version();
    let installed = Cli::Claude.installed_version();
    assert!(version.starts_with(&format!("{installed} ")), "{version}");
}
