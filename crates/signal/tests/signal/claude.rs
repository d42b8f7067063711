//! Claude Code stream-json: which signals and events each fixture must yield.

use ralph_signal::SignalKind::{Done, Question};
use ralph_signal::{AgentEvent, SignalKind, StreamFormat, Usage};

use crate::util::{decode, fixture, signals};

fn events(name: &str) -> Vec<AgentEvent> {
    decode(
        StreamFormat::ClaudeStreamJson,
        &fixture(&format!("claude/{name}")),
    )
}

/// The expected signals of every Claude fixture, stated here so that accepting a snapshot
/// blindly cannot hide a wrong answer.
#[test]
fn each_claude_fixture_yields_exactly_its_signals() {
    let expected: &[(&str, &[(SignalKind, u64)])] = &[
        ("claude-api-error.jsonl", &[]),
        ("claude-error-results.jsonl", &[]),
        ("claude-question-write-then-signal.jsonl", &[(Question, 3)]),
        ("claude-rate-limit.jsonl", &[]),
        ("claude-signal-in-code-fence.jsonl", &[(Done, 2)]),
        ("claude-signal-in-tool-result.jsonl", &[]),
        ("claude-subagent-text.jsonl", &[]),
        ("claude-tool-calls-commands.jsonl", &[]),
        ("claude-tool-calls-files.jsonl", &[]),
        ("claude-tool-calls-web-mcp-thinking.jsonl", &[]),
        ("claude-unknown-and-malformed.jsonl", &[]),
        ("claude-user-echo.jsonl", &[]),
        ("real-2.1.197-01_write_question.jsonl", &[(Question, 3)]),
        ("real-2.1.197-02_resume.jsonl", &[(Done, 3)]),
        ("real-2.1.197-03_askuser_print.jsonl", &[(Question, 3)]),
        ("real-2.1.197-04_askuser_sdk_allow.jsonl", &[(Question, 3)]),
        ("real-2.1.197-05_askuser_sdk_deny.jsonl", &[(Question, 3)]),
        ("real-2.1.332-01_write_question.jsonl", &[(Question, 3)]),
        ("real-2.1.332-02_resume.jsonl", &[(Done, 3)]),
    ];
    let mut names: Vec<String> = std::fs::read_dir(crate::util::fixtures_dir().join("claude"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let listed: Vec<&str> = expected.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names, listed,
        "every claude fixture has expected signals here"
    );
    for (name, want) in expected {
        assert_eq!(signals(&events(name)), *want, "{name}");
    }
}

#[test]
fn real_write_question_capture_decodes_fully() {
    let events = events("real-2.1.197-01_write_question.jsonl");
    assert_eq!(
        events[0],
        AgentEvent::SessionId("794db700-2a44-4c47-9ae7-6a0ad430ea93".into())
    );
    assert_eq!(
        events[1],
        AgentEvent::Text("I have a question; writing it down.".into())
    );
    assert_eq!(
        events[2],
        AgentEvent::ToolCall {
            name: "Write".into(),
            summary: ".ralph/question.md".into()
        }
    );
    assert!(
        matches!(&events[3], AgentEvent::ToolResult { summary, is_error: false }
        if summary.starts_with("File created successfully at: /home/dev/shop/.ralph/question.md"))
    );
    let tail = &events[events.len() - 2..];
    assert_eq!(
        tail,
        [
            AgentEvent::Usage(Usage {
                cost_usd: Some(0.19636),
                input_tokens: Some(39072),
                output_tokens: Some(40),
            }),
            AgentEvent::TurnEnd {
                result: Some(
                    "I wrote the question to .ralph/question.md and need a human answer.\n\n<ralph>QUESTION</ralph>"
                        .into()
                )
            },
        ]
    );
}

/// Claude Code 2.1.332 (recorded against the mock with `CLAUDE_CODE_DISABLE_EXPERIMENTAL_BETAS=1`,
/// as `make e2e` runs it): its `result` line starts with `duration_api_ms`, not `type`, and
/// still ends the turn with its cost and final text.
#[test]
fn a_result_line_whose_type_comes_late_still_ends_the_turn() {
    let result_line = std::str::from_utf8(&fixture("claude/real-2.1.332-02_resume.jsonl"))
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .to_owned();
    assert!(
        result_line.starts_with("{\"duration_api_ms\":"),
        "{result_line}"
    );
    let events = events("real-2.1.332-02_resume.jsonl");
    assert_eq!(
        events[0],
        AgentEvent::SessionId("88bce8d4-c642-4043-9c62-5e3c8726f914".into())
    );
    let tail = &events[events.len() - 2..];
    assert!(
        matches!(&tail[0], AgentEvent::Usage(Usage { cost_usd: Some(c), .. }) if (c - 0.31724).abs() < 1e-9),
        "{tail:?}"
    );
    assert_eq!(
        tail[1],
        AgentEvent::TurnEnd {
            result: Some("Recorded the choice in cache.txt.\n\n<ralph>DONE</ralph>".into())
        }
    );
}

#[test]
fn ask_user_question_is_a_tool_call_and_control_requests_are_kept() {
    let events = events("real-2.1.197-04_askuser_sdk_allow.jsonl");
    assert!(events.contains(&AgentEvent::ToolCall {
        name: "AskUserQuestion".into(),
        summary: "Redis or Memcached?".into()
    }));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AgentEvent::ControlRequest(c) if c.contains("can_use_tool") && c.contains("Redis or Memcached?")))
    );
    let denied = crate::claude::events("real-2.1.197-03_askuser_print.jsonl");
    assert!(denied.iter().any(
        |e| matches!(e, AgentEvent::ToolResult { is_error: true, summary }
        if summary.contains("No such tool available: AskUserQuestion"))
    ));
}

#[test]
fn api_errors_and_error_results_become_errors() {
    let errors = |name| -> Vec<String> {
        events(name)
            .into_iter()
            .filter_map(|e| match e {
                AgentEvent::Error(e) => Some(e),
                _ => None,
            })
            .collect()
    };
    assert_eq!(
        errors("claude-api-error.jsonl"),
        ["API Error: 400 mock bad request"]
    );
    assert_eq!(
        errors("claude-error-results.jsonl"),
        [
            "error_max_turns: Reached maximum number of turns (1)",
            "error_during_execution: No conversation found with session ID: 0000"
        ]
    );
}

#[test]
fn result_events_come_in_order_usage_error_turn_end() {
    let events = events("claude-error-results.jsonl");
    let tail: Vec<_> = events[events.len() - 3..]
        .iter()
        .map(std::mem::discriminant)
        .collect();
    assert_eq!(
        tail,
        [
            std::mem::discriminant(&AgentEvent::Usage(Usage::default())),
            std::mem::discriminant(&AgentEvent::Error(String::new())),
            std::mem::discriminant(&AgentEvent::TurnEnd { result: None }),
        ]
    );
}

#[test]
fn unknown_and_malformed_lines_are_kept_short_and_never_fatal() {
    let events = events("claude-unknown-and-malformed.jsonl");
    let unknown: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Unknown(u) => Some(u.as_str()),
            _ => None,
        })
        .collect();
    assert!(unknown.iter().all(|u| u.len() <= 400), "{unknown:?}");
    assert!(
        unknown
            .iter()
            .any(|u| u.starts_with("malformed JSON: unterminated string")),
        "{unknown:?}"
    );
    assert!(unknown.iter().any(|u| u.contains("rate_limit_event")));
    assert!(unknown.iter().any(|u| u.contains("api_retry")));
    assert!(events.contains(&AgentEvent::Text(
        "Warning: an open stdin pipe with no data; continuing after 3s".into()
    )));
    assert!(events.contains(&AgentEvent::Text("type comes last".into())));
    // The 2.1.330 key order: "type" is not the first key of the result.
    assert!(events.contains(&AgentEvent::TurnEnd {
        result: Some("Hello from mock. <ralph>DONE</ralph>".into())
    }));
}

#[test]
fn tool_call_summaries_are_short_safe_lines() {
    let mut events = Vec::new();
    for name in [
        "claude-tool-calls-commands.jsonl",
        "claude-tool-calls-files.jsonl",
        "claude-tool-calls-web-mcp-thinking.jsonl",
    ] {
        events.extend(crate::claude::events(name));
    }
    let calls: Vec<(String, String)> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolCall { name, summary } => Some((name.clone(), summary.clone())),
            _ => None,
        })
        .collect();
    let want = [
        ("Bash", "cargo test --workspace [+1 lines]"),
        ("Grep", "fn get\\("),
        ("Glob", "**/*.rs"),
        ("Bash", "printf '\\033]0;pwned\\007'"),
        ("Edit", "src/cache.rs"),
        ("Read", "src/store.rs"),
        ("Write", "big.txt"),
        ("WebFetch", "https://docs.rs/memchr"),
        ("TodoWrite", ""),
        ("mcp__github__create_issue", "dev"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(n, s)| (n.to_string(), s.to_string()))
        .collect();
    assert_eq!(calls, want);
    for event in &events {
        let text = format!("{event:?}");
        assert!(!text.contains("\\u{1b}"), "an escape survived: {text}");
    }
}
