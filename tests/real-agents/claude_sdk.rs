//! `ralph run --agent claude-sdk` with the real Claude Code CLI: the model calls its own
//! `AskUserQuestion` tool, the CLI asks ralph (its host) with a `control_request`, and ralph
//! answers on the CLI's stdin with what the human chose, or refuses when nobody answered.

use std::time::Instant;

use serde_json::Value;

use crate::harness::*;

/// The question the scripted model asks (`scenarios/ask_tool.json`).
const QUESTION: &str = "Which cache backend should the session store use?";

/// The `AskUserQuestion` tool_result the CLI sent the mock, from the first request that
/// carries one: its content as text, and whether it is an error.
fn ask_result(p: &Project) -> (String, bool) {
    let requests = p.mock.requests();
    requests
        .iter()
        .flat_map(|r| {
            r["body"]["messages"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_array().cloned())
        .flatten()
        .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == "toolu_ask_cache")
        .map(|b| {
            let text = match &b["content"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .filter_map(|p| p["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
                _ => String::new(),
            };
            (text, b["is_error"] == true)
        })
        .unwrap_or_else(|| panic!("no request carries the question's tool_result: {requests:#?}"))
}

#[test]
#[ignore = "needs the real Claude Code CLI: run `make e2e`"]
fn ask_user_question_is_answered_from_another_process() {
    let p = Project::new(
        "ask_tool",
        "task: Choose the session store's cache backend.\nmax_iterations: 2\nquestion_timeout: 2m\ntest_command: \"true\"",
        "- [x] the cache backend is chosen\n",
    );
    let started = Instant::now();
    let child = p.spawn_agent("claude-sdk", &[]);

    let state = p.wait_for_status("waiting_input", RUN_LIMIT);
    let asked_after = started.elapsed();
    let status = Run::from_output(p.ralph().args(["status", "--json"]).output().unwrap());
    status.expect_code(0);
    let json: Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(json["status"], "waiting_input", "{json:#}");
    let question = &json["pending_question"];
    assert_eq!(question["raised_by"], "tool", "{json:#}");
    assert_eq!(question["text"], QUESTION, "{json:#}");
    assert_eq!(question["options"][1]["label"], "Memcached", "{state:#}");

    // The CLI is blocked on ralph's answer: the tool has no result yet.
    let before = p.mock.requests().len();
    assert_eq!(before, 1, "{:#?}", p.mock.requests());

    Run::from_output(p.ralph().args(["answer", "2"]).output().unwrap()).expect_code(0);
    let run = child.finish(RUN_LIMIT);
    run.expect_code(0);
    eprintln!(
        "claude-sdk question: asked after {asked_after:?}, whole run {:?}",
        started.elapsed()
    );

    // The next request carries the tool's result, with the chosen label, in the same session:
    // no resume, no second iteration.
    let (result, is_error) = ask_result(&p);
    assert!(!is_error, "{result}");
    assert!(
        result.starts_with("Your questions have been answered: ")
            && result.contains(&format!("\"{QUESTION}\"=\"Memcached\"")),
        "{result}"
    );
    let requests = p.mock.requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    assert!(
        requests[1]["last_user"]
            .as_str()
            .unwrap_or("")
            .starts_with("[tool_result toolu_ask_cache]"),
        "{:#}",
        requests[1]
    );
    assert_eq!(p.state()["status"], "done");
    assert_eq!(p.events_of("iteration_start").len(), 1);
    let answered = p.events_of("answer");
    assert_eq!(answered.len(), 1, "{:#?}", p.events());
    assert_eq!(answered[0]["raised_by"], "tool", "{answered:#?}");
}

#[test]
#[ignore = "needs the real Claude Code CLI: run `make e2e`"]
fn ask_user_question_unanswered_in_time_is_refused_with_a_best_guess_note() {
    let p = Project::new(
        "ask_tool",
        "task: Choose the session store's cache backend.\nmax_iterations: 2\nquestion_timeout: 1s\ntest_command: \"true\"",
        "- [x] the cache backend is chosen\n",
    );
    let run = p.spawn_agent("claude-sdk", &[]).finish(RUN_LIMIT);
    eprintln!(
        "claude-sdk question timeout: ralph ran for {:?}",
        run.elapsed
    );
    run.expect_code(0);

    let (result, is_error) = ask_result(&p);
    assert!(is_error, "a refusal is an error tool_result: {result}");
    assert!(result.contains("best guess"), "{result}");
    assert!(!result.contains("have been answered"), "{result}");
    assert_eq!(p.mock.requests().len(), 2, "{:#?}", p.mock.requests());
    assert_eq!(
        p.events_of("question_timeout").len(),
        1,
        "{:#?}",
        p.events()
    );
    assert_eq!(p.state()["status"], "done");
}
