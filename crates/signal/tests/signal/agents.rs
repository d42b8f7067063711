//! Codex, Gemini, opencode, Amp and Cursor streams: which signals and events each fixture
//! must yield, and the rules of each format that the fixtures alone do not pin down.

use std::time::Duration;

use ralph_signal::SignalKind::{Done, Question};
use ralph_signal::{AgentEvent, SignalKind, StreamFormat, Usage};

use crate::util::{decode, decode_chunks, fixture, fixtures_dir, signals};

type Expected<'a> = &'a [(&'a str, &'a [(SignalKind, u64)])];

/// Checks that `dir` holds exactly the fixtures listed, and that each yields its signals.
///
/// The expected signals are stated here so that accepting a snapshot blindly cannot hide a
/// wrong answer.
fn check_signals(dir: &str, format: StreamFormat, expected: Expected<'_>) {
    let mut names: Vec<String> = std::fs::read_dir(fixtures_dir().join(dir))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    names.sort();
    let listed: Vec<&str> = expected.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names, listed,
        "every {dir} fixture has expected signals here"
    );
    for (name, want) in expected {
        let events = decode(format, &fixture(&format!("{dir}/{name}")));
        assert_eq!(signals(&events), *want, "{dir}/{name}");
    }
}

fn read(format: StreamFormat, path: &str) -> Vec<AgentEvent> {
    decode(format, &fixture(path))
}

fn errors(events: &[AgentEvent]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Error(e) => Some(e.as_str()),
            _ => None,
        })
        .collect()
}

fn rate_limits(events: &[AgentEvent]) -> Vec<(Option<Duration>, &str)> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::RateLimited {
                retry_after,
                message,
                ..
            } => Some((*retry_after, message.as_str())),
            _ => None,
        })
        .collect()
}

fn usages(events: &[AgentEvent]) -> Vec<Usage> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Usage(u) => Some(u.clone()),
            _ => None,
        })
        .collect()
}

fn tokens(input: u64, output: u64) -> Usage {
    Usage {
        cost_usd: None,
        input_tokens: Some(input),
        output_tokens: Some(output),
    }
}

fn turn_ends(events: &[AgentEvent]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, AgentEvent::TurnEnd { .. }))
        .count()
}

#[test]
fn each_codex_fixture_yields_exactly_its_signals() {
    check_signals(
        "codex",
        StreamFormat::CodexJson,
        &[
            ("codex-error.jsonl", &[]),
            ("codex-rate-limit.jsonl", &[]),
            ("codex-resume.jsonl", &[(Done, 4)]),
            ("codex-signal-in-tool-output.jsonl", &[]),
            ("codex-text.jsonl", &[(Done, 1)]),
            ("codex-tool-calls.jsonl", &[(Question, 2)]),
            ("codex-unknown-and-malformed.jsonl", &[(Done, 1)]),
        ],
    );
}

#[test]
fn each_gemini_fixture_yields_exactly_its_signals() {
    check_signals(
        "gemini",
        StreamFormat::GeminiStreamJson,
        &[
            ("gemini-deltas-fences-across-pieces.jsonl", &[(Question, 7)]),
            ("gemini-error.jsonl", &[]),
            ("gemini-rate-limit.jsonl", &[]),
            ("gemini-resume.jsonl", &[(Done, 2)]),
            ("gemini-signal-in-tool-result.jsonl", &[]),
            ("gemini-split-signal-deltas.jsonl", &[(Done, 1)]),
            ("gemini-tool-calls.jsonl", &[(Question, 2)]),
            (
                "gemini-unknown-and-malformed.jsonl",
                &[(Done, 1), (Question, 1)],
            ),
        ],
    );
}

#[test]
fn each_opencode_fixture_yields_exactly_its_signals() {
    check_signals(
        "opencode",
        StreamFormat::OpencodeJson,
        &[
            ("opencode-error.jsonl", &[]),
            ("opencode-rate-limit.jsonl", &[]),
            ("opencode-resume.jsonl", &[(Done, 3)]),
            ("opencode-signal-in-tool-result.jsonl", &[]),
            ("opencode-text.jsonl", &[(Done, 1)]),
            ("opencode-tool-calls.jsonl", &[(Question, 3)]),
            ("opencode-unknown-and-malformed.jsonl", &[(Done, 1)]),
        ],
    );
}

#[test]
fn each_amp_fixture_yields_exactly_its_signals() {
    check_signals(
        "amp",
        StreamFormat::AmpStreamJson,
        &[
            ("amp-docs-example.jsonl", &[]),
            ("amp-error.jsonl", &[]),
            ("amp-rate-limit.jsonl", &[]),
            ("amp-resume.jsonl", &[(Done, 2)]),
            ("amp-signal-in-tool-result.jsonl", &[]),
            ("amp-tool-calls.jsonl", &[(Question, 2)]),
        ],
    );
}

#[test]
fn each_cursor_fixture_yields_exactly_its_signals() {
    check_signals(
        "cursor",
        StreamFormat::CursorStreamJson,
        &[
            ("cursor-docs-example.jsonl", &[]),
            ("cursor-error.jsonl", &[]),
            ("cursor-rate-limit.jsonl", &[]),
            ("cursor-resume.jsonl", &[(Done, 2)]),
            ("cursor-signal-in-tool-result.jsonl", &[]),
            ("cursor-tool-calls.jsonl", &[(Question, 2)]),
            ("cursor-truncated-failure.jsonl", &[]),
            ("cursor-unknown-and-malformed.jsonl", &[(Done, 1)]),
        ],
    );
}

#[test]
fn every_format_reports_its_session_id_first() {
    for (format, path, id) in [
        (
            StreamFormat::CodexJson,
            "codex/codex-resume.jsonl",
            "01a202ad-8829-7a91-888b-a80cd75ae4d3",
        ),
        (
            StreamFormat::GeminiStreamJson,
            "gemini/gemini-resume.jsonl",
            "751d9fe9-b238-4ba5-b6bf-ab1ff525c761",
        ),
        (
            StreamFormat::OpencodeJson,
            "opencode/opencode-resume.jsonl",
            "ses_dfd4f4cd2ffe2ZpzItk8SIdyZ2",
        ),
        (
            StreamFormat::AmpStreamJson,
            "amp/amp-resume.jsonl",
            "T-2775dc92-90ed-4f85-8b73-8f9766029e83",
        ),
        (
            StreamFormat::CursorStreamJson,
            "cursor/cursor-resume.jsonl",
            "60c30226-5b1f-4c2e-9f0a-2d7e8c4b1a93",
        ),
    ] {
        let events = read(format, path);
        assert_eq!(events[0], AgentEvent::SessionId(id.into()), "{path}");
        assert_eq!(turn_ends(&events), 1, "{path}");
    }
}

/// Codex reports thread totals; a second turn in the same stream reports only what it added.
#[test]
fn codex_usage_is_what_each_turn_added() {
    let stream = br#"{"type":"thread.started","thread_id":"t-1"}
{"type":"turn.completed","usage":{"input_tokens":240,"cached_input_tokens":40,"output_tokens":34}}
{"type":"turn.completed","usage":{"input_tokens":360,"cached_input_tokens":60,"output_tokens":51}}
{"type":"thread.started","thread_id":"t-2"}
{"type":"turn.completed","usage":{"input_tokens":100,"output_tokens":10}}
"#;
    let events = decode(StreamFormat::CodexJson, stream);
    assert_eq!(
        usages(&events),
        [tokens(240, 34), tokens(120, 17), tokens(100, 10)]
    );
    // The first turn of a resumed thread carries the thread's totals so far.
    let resumed = read(StreamFormat::CodexJson, "codex/codex-resume.jsonl");
    assert_eq!(usages(&resumed), [tokens(360, 51)]);
}

#[test]
fn codex_notices_are_kept_and_only_turn_failed_is_an_error() {
    let events = read(StreamFormat::CodexJson, "codex/codex-error.jsonl");
    assert_eq!(
        errors(&events),
        ["We’re currently experiencing high demand, which may cause temporary errors."]
    );
    let unknown = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::Unknown(u) if u.contains("Reconnecting")))
        .count();
    assert_eq!(unknown, 1);
    assert!(rate_limits(&events).is_empty());
}

#[test]
fn codex_rate_limit_is_reported_once_then_the_failure() {
    let events = read(StreamFormat::CodexJson, "codex/codex-rate-limit.jsonl");
    let message = "exceeded retry limit, last status: 429 Too Many Requests, request id: 9c84b52ce87fbe62-SJC";
    assert_eq!(rate_limits(&events), [(None, message)]);
    assert_eq!(errors(&events), [message]);
}

#[test]
fn codex_tool_items_are_one_call_and_one_result_each() {
    let events = read(StreamFormat::CodexJson, "codex/codex-tool-calls.jsonl");
    let calls: Vec<(&str, &str)> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolCall { name, summary } => Some((name.as_str(), summary.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("shell", "echo hi-from-tool"),
            ("todo_list", "2 items"),
            ("shell", "cargo test -q"),
            ("file_change", "src/cache.rs (+2 more)"),
            ("github/create_issue", "ralph"),
            ("web_search", "rust lru cache crate"),
        ]
    );
    assert!(events.contains(&AgentEvent::ToolResult {
        summary: "running 3 tests [+3 lines]".into(),
        is_error: true,
    }));
}

/// The captured Gemini stream split the tag as `<ral` + `ph>DONE</ralph>`: found once.
#[test]
fn gemini_signal_split_across_deltas_is_found_exactly_once() {
    let events = read(
        StreamFormat::GeminiStreamJson,
        "gemini/gemini-split-signal-deltas.jsonl",
    );
    assert_eq!(signals(&events), [(Done, 1)]);
    assert!(events.contains(&AgentEvent::Text(
        "Hello from mock. <ralph>DONE</ralph>".into()
    )));
}

/// The assistant text of a Gemini message, cut into deltas anywhere, gives the same text and
/// signal events as the whole text read as plain text.
#[test]
fn gemini_deltas_read_like_the_whole_text() {
    let text = "Intro line\n```\n<ralph>DONE</ralph>\n```\nInline `<ralph>GUTTER</ralph>` here.\n\
                Asking: <ralph>QUESTION</ralph> and <ralph>DONE</ralph>\nlast <ralph>GUTTER</ralph>";
    let want = decode(StreamFormat::Text, text.as_bytes());
    let mut rng = crate::util::Rng::new(7);
    for round in 0..200 {
        let mut cuts: Vec<usize> = (0..rng.below(12))
            .map(|_| rng.below(text.len() + 1))
            .filter(|&c| text.is_char_boundary(c))
            .collect();
        cuts.sort_unstable();
        let mut stream = String::new();
        for piece in crate::util::split_at(text.as_bytes(), &cuts) {
            let piece = std::str::from_utf8(piece).unwrap();
            let line = serde_json::json!({"type": "message", "role": "assistant", "content": piece, "delta": true});
            stream.push_str(&format!("{line}\n"));
        }
        let got: Vec<AgentEvent> = decode(StreamFormat::GeminiStreamJson, stream.as_bytes())
            .into_iter()
            .filter(|e| matches!(e, AgentEvent::Text(_) | AgentEvent::Signal(_)))
            .collect();
        assert_eq!(got, want, "round {round}, cuts {cuts:?}");
    }
}

#[test]
fn gemini_errors_rate_limits_and_results() {
    let events = read(StreamFormat::GeminiStreamJson, "gemini/gemini-error.jsonl");
    assert_eq!(
        errors(&events),
        [
            "Model stream ended with an invalid chunk.",
            r#"[API Error: {"error":{"code":400,"message":"mock bad request","status":"INVALID_ARGUMENT"}}]"#,
            "FatalTurnLimitedError: Reached max session turns for this session. Increase the number of turns by specifying maxSessionTurns in settings.json.",
        ]
    );
    let limited = read(
        StreamFormat::GeminiStreamJson,
        "gemini/gemini-rate-limit.jsonl",
    );
    let limits = rate_limits(&limited);
    assert_eq!(limits.len(), 2);
    assert_eq!(limits[0].0, Some(Duration::from_millis(5200)));
    assert_eq!(errors(&limited).len(), 1);
}

#[test]
fn gemini_turn_end_carries_the_last_message() {
    let events = read(
        StreamFormat::GeminiStreamJson,
        "gemini/gemini-tool-calls.jsonl",
    );
    assert_eq!(
        events.last(),
        Some(&AgentEvent::TurnEnd {
            result: Some("Tool said: hi-from-tool\n<ralph>QUESTION</ralph>".into())
        })
    );
    assert_eq!(usages(&events), [tokens(240, 34)]);
}

#[test]
fn opencode_usage_is_per_step_and_the_turn_ends_once() {
    let events = read(
        StreamFormat::OpencodeJson,
        "opencode/opencode-tool-calls.jsonl",
    );
    let usage = usages(&events);
    assert_eq!(usage.len(), 2);
    assert_eq!(usage[0].input_tokens, Some(120));
    assert_eq!(usage[0].cost_usd, Some(0.0));
    assert_eq!(turn_ends(&events), 1);
    // The newer `done` line after a finished step does not end the turn again.
    let text = read(StreamFormat::OpencodeJson, "opencode/opencode-text.jsonl");
    assert_eq!(turn_ends(&text), 1);
    assert_eq!(usages(&text)[0].cost_usd, Some(0.00123));
}

#[test]
fn opencode_errors_and_rate_limits() {
    let events = read(StreamFormat::OpencodeJson, "opencode/opencode-error.jsonl");
    assert_eq!(
        errors(&events),
        ["mock internal error (HTTP 500)", "ProviderAuthError"]
    );
    assert!(rate_limits(&events).is_empty());
    let limited = read(
        StreamFormat::OpencodeJson,
        "opencode/opencode-rate-limit.jsonl",
    );
    assert_eq!(
        rate_limits(&limited),
        [(
            Some(Duration::from_secs(20)),
            "Rate limit reached for requests"
        )]
    );
    assert_eq!(
        errors(&limited),
        ["Rate limit reached for requests (HTTP 429)"]
    );
}

#[test]
fn opencode_rejected_permission_is_an_error_result() {
    let events = read(
        StreamFormat::OpencodeJson,
        "opencode/opencode-tool-calls.jsonl",
    );
    assert!(events.contains(&AgentEvent::ToolResult {
        summary: "The user rejected permission to use this specific tool call.".into(),
        is_error: true,
    }));
}

/// Amp puts usage on each assistant message and none on the result: they are summed, a
/// message whose blocks come on separate lines (same id) counted once.
#[test]
fn amp_tokens_are_summed_over_messages_once_each() {
    let events = read(StreamFormat::AmpStreamJson, "amp/amp-tool-calls.jsonl");
    assert_eq!(usages(&events), [tokens(3300, 95)]);
    let split = br#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"a"}],"usage":{"input_tokens":10,"output_tokens":1}},"session_id":"T-1"}
{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t","name":"Bash","input":{"cmd":"ls"}}],"usage":{"input_tokens":10,"output_tokens":1}},"session_id":"T-1"}
{"type":"assistant","message":{"id":"m2","content":[{"type":"text","text":"b"}],"usage":{"input_tokens":20,"output_tokens":2}},"session_id":"T-1"}
{"type":"result","subtype":"success","is_error":false,"result":"b","session_id":"T-1"}
"#;
    assert_eq!(
        usages(&decode(StreamFormat::AmpStreamJson, split)),
        [tokens(30, 3)]
    );
    // Claude's assistant lines repeat a message's start usage: never summed.
    let claude = decode(StreamFormat::ClaudeStreamJson, split);
    assert_eq!(
        usages(&claude),
        [Usage {
            cost_usd: None,
            input_tokens: None,
            output_tokens: None
        }]
    );
}

#[test]
fn amp_and_cursor_errors_and_rate_limits() {
    let amp = read(StreamFormat::AmpStreamJson, "amp/amp-rate-limit.jsonl");
    assert_eq!(rate_limits(&amp).len(), 1);
    assert_eq!(rate_limits(&amp)[0].0, Some(Duration::from_secs(30)));
    assert_eq!(errors(&amp).len(), 1);
    let cursor = read(
        StreamFormat::CursorStreamJson,
        "cursor/cursor-rate-limit.jsonl",
    );
    assert_eq!(
        rate_limits(&cursor)[0].0,
        Some(Duration::from_secs(2 * 3600 + 5 * 60))
    );
    let cursor = read(StreamFormat::CursorStreamJson, "cursor/cursor-error.jsonl");
    assert_eq!(
        errors(&cursor),
        ["Connection to the model provider failed."]
    );
    assert!(rate_limits(&cursor).is_empty());
    // A failed Cursor run may stop with no result at all: only the session is known.
    let truncated = read(
        StreamFormat::CursorStreamJson,
        "cursor/cursor-truncated-failure.jsonl",
    );
    assert_eq!(truncated.len(), 1);
}

#[test]
fn cursor_tool_calls_are_named_by_their_key_and_paths_are_relative() {
    let events = read(
        StreamFormat::CursorStreamJson,
        "cursor/cursor-tool-calls.jsonl",
    );
    let calls: Vec<(&str, &str)> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolCall { name, summary } => Some((name.as_str(), summary.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("edit", "a.txt"),
            ("shell", "touch x"),
            ("shell", "cargo test -q")
        ]
    );
    let results: Vec<bool> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolResult { is_error, .. } => Some(*is_error),
            _ => None,
        })
        .collect();
    assert_eq!(results, [false, true, true]);
    assert_eq!(usages(&events), [tokens(13112, 28)]);
}

#[test]
fn claude_rate_limits_are_reported_once_per_cause() {
    let events = read(
        StreamFormat::ClaudeStreamJson,
        "claude/claude-rate-limit.jsonl",
    );
    let limits = rate_limits(&events);
    assert_eq!(limits.len(), 4, "{limits:?}");
    assert_eq!(
        limits[0],
        (
            Some(Duration::from_millis(524)),
            "the API is rate limiting (HTTP 429); retry 1 of 10"
        )
    );
    assert!(limits[1].1.contains("five_hour"));
    // The synthetic assistant message and its result: one RateLimited, one Error.
    assert!(limits[2].1.starts_with("API Error: 429"));
    assert_eq!(errors(&events).len(), 2);
}

/// Tool results and file contents never carry signals, in any format, whatever the chunking.
#[test]
fn signals_in_tool_output_never_count_in_any_format() {
    for (format, path) in [
        (
            StreamFormat::CodexJson,
            "codex/codex-signal-in-tool-output.jsonl",
        ),
        (
            StreamFormat::GeminiStreamJson,
            "gemini/gemini-signal-in-tool-result.jsonl",
        ),
        (
            StreamFormat::OpencodeJson,
            "opencode/opencode-signal-in-tool-result.jsonl",
        ),
        (
            StreamFormat::AmpStreamJson,
            "amp/amp-signal-in-tool-result.jsonl",
        ),
        (
            StreamFormat::CursorStreamJson,
            "cursor/cursor-signal-in-tool-result.jsonl",
        ),
    ] {
        let bytes = fixture(path);
        for size in [1, 7, 64, 4096] {
            let events = decode_chunks(format, bytes.chunks(size));
            assert_eq!(signals(&events), [], "{path} in chunks of {size}");
        }
    }
}
