//! The Anthropic Messages API, as Claude Code 2.1.x calls it: `POST /v1/messages?beta=true`.
//!
//! A streamed turn is `message_start`, `ping`, then per block `content_block_start`,
//! `content_block_delta` (`text_delta`, or `input_json_delta` with the input's JSON in pieces),
//! `content_block_stop`; then `message_delta` with the stop reason, and `message_stop`.

use serde_json::{Value, json};

use super::{find_after, push_line};
use crate::reply::{Turn, TurnBlock, halves, sse_event};
use crate::scenario::ErrorReply;

/// The last `role: user` message, as text to match on: its text blocks, and for each
/// tool_result `[tool_result <id>]` and its content, one per line.
///
/// Claude Code puts a `role: system` message after the user turn, so this is not simply the
/// last message.
pub fn digest(body: &Value) -> String {
    let Some(msg) = body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
    else {
        return String::new();
    };
    let mut out = String::new();
    digest_content(&msg["content"], &mut out);
    out
}

fn digest_content(content: &Value, out: &mut String) {
    match content {
        Value::String(s) => push_line(out, s),
        Value::Array(blocks) => {
            for block in blocks {
                match block["type"].as_str() {
                    Some("text") => push_line(out, block["text"].as_str().unwrap_or("")),
                    Some("tool_result") => {
                        let id = block["tool_use_id"].as_str().unwrap_or("");
                        push_line(out, &format!("[tool_result {id}]"));
                        digest_content(&block["content"], out);
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// The working directory Claude Code names in its system prompt
/// (`Primary working directory: /abs/path`).
pub fn working_dir(body: &Value) -> Option<String> {
    const MARK: &str = "Primary working directory: ";
    // The system prompt first, then anywhere (versions move it around).
    find_after(&body["system"], MARK).or_else(|| find_after(body, MARK))
}

fn stop_reason(turn: &Turn) -> &'static str {
    if turn.calls_tools() {
        "tool_use"
    } else {
        "end_turn"
    }
}

fn content(turn: &Turn) -> Vec<Value> {
    turn.blocks
        .iter()
        .map(|b| match b {
            TurnBlock::Text(t) => json!({"type": "text", "text": t}),
            TurnBlock::ToolUse { id, name, input } => {
                json!({"type": "tool_use", "id": id, "name": name, "input": input})
            }
        })
        .collect()
}

/// The whole turn as one non-streaming response body.
pub fn message(turn: &Turn) -> Value {
    json!({
        "id": turn.id(),
        "type": "message",
        "role": "assistant",
        "model": turn.model,
        "content": content(turn),
        "stop_reason": stop_reason(turn),
        "stop_sequence": null,
        "usage": {"input_tokens": turn.input_tokens, "output_tokens": turn.output_tokens()},
    })
}

/// The turn as a Server-Sent Events body.
pub fn sse(turn: &Turn) -> String {
    let mut out = String::new();
    let mut event = |data: Value| {
        let name = data["type"].as_str().unwrap_or("").to_string();
        sse_event(&mut out, Some(&name), &data);
    };
    event(json!({"type": "message_start", "message": {
        "id": turn.id(), "type": "message", "role": "assistant", "model": turn.model,
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": turn.input_tokens, "output_tokens": 1},
    }}));
    event(json!({"type": "ping"}));
    for (index, block) in turn.blocks.iter().enumerate() {
        let (start, deltas) = match block {
            TurnBlock::ToolUse { id, name, input } => {
                let input = input.to_string();
                (
                    json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                    halves(&input)
                        .into_iter()
                        .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                        .collect::<Vec<_>>(),
                )
            }
            TurnBlock::Text(text) => (
                json!({"type": "text", "text": ""}),
                halves(text)
                    .into_iter()
                    .map(|p| json!({"type": "text_delta", "text": p}))
                    .collect(),
            ),
        };
        event(json!({"type": "content_block_start", "index": index, "content_block": start}));
        for delta in deltas {
            event(json!({"type": "content_block_delta", "index": index, "delta": delta}));
        }
        event(json!({"type": "content_block_stop", "index": index}));
    }
    event(json!({"type": "message_delta",
        "delta": {"stop_reason": stop_reason(turn), "stop_sequence": null},
        "usage": {"output_tokens": turn.output_tokens()}}));
    event(json!({"type": "message_stop"}));
    out
}

/// The body of an error response, as the real API shapes it.
pub fn error(e: &ErrorReply) -> Value {
    json!({"type": "error", "error": {"type": e.kind(), "message": e.message}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::test_turn;
    use crate::scenario::Block;

    /// Parses an SSE body back into its `data` objects, checking each `event:` matches `type`.
    fn events(body: &str) -> Vec<Value> {
        body.split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| {
                let (name, data) = e.split_once('\n').unwrap();
                let v: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
                assert_eq!(name.strip_prefix("event: ").unwrap(), v["type"]);
                v
            })
            .collect()
    }

    #[test]
    fn a_stream_rebuilds_into_the_turn() {
        let t = test_turn();
        let evs = events(&sse(&t));
        let types: Vec<_> = evs.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            types,
            [
                "message_start",
                "ping",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        let text: String = evs[3..5]
            .iter()
            .map(|e| e["delta"]["text"].as_str().unwrap())
            .collect();
        assert_eq!(text, "héllo <ralph>DONE</ralph>");
        assert_eq!(evs[6]["content_block"]["id"], "toolu_mock_3_1");
        let json: String = evs[7..9]
            .iter()
            .map(|e| e["delta"]["partial_json"].as_str().unwrap())
            .collect();
        assert_eq!(
            serde_json::from_str::<Value>(&json).unwrap(),
            json!({"file_path": "/w/a.txt", "content": "x"})
        );
        assert_eq!(evs[10]["delta"]["stop_reason"], "tool_use");
        assert_eq!(evs[0]["message"]["model"], "model-x");
    }

    #[test]
    fn a_text_only_turn_ends_the_turn() {
        let t = Turn::new(0, "m", 1, &[Block::Text("hi".into())], "/w");
        let m = message(&t);
        assert_eq!(m["stop_reason"], "end_turn");
        assert_eq!(m["content"][0]["text"], "hi");
    }

    #[test]
    fn the_digest_is_the_last_user_message_not_the_system_one_after_it() {
        let body = json!({"messages": [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "file text"},
                {"type": "tool_result", "tool_use_id": "toolu_2",
                 "content": [{"type": "text", "text": "cmd output"}]},
                {"type": "text", "text": "and more"}
            ]},
            {"role": "system", "content": "a reminder"}
        ]});
        assert_eq!(
            digest(&body),
            "[tool_result toolu_1]\nfile text\n[tool_result toolu_2]\ncmd output\nand more"
        );
    }

    #[test]
    fn the_working_dir_comes_from_the_system_prompt() {
        let body = json!({"system": [
            {"type": "text", "text": "You are Claude Code."},
            {"type": "text", "text": "Env:\n - Primary working directory: /tmp/p x\n - Platform: linux"}
        ]});
        assert_eq!(working_dir(&body).as_deref(), Some("/tmp/p x"));
        assert_eq!(working_dir(&json!({"messages": []})), None);
    }
}
