//! Turning a scripted model turn into what the Messages API sends: Server-Sent Events for a
//! streaming request, one JSON message otherwise.
//!
//! The events are the ones Claude Code 2.1.x consumes: `message_start`, `ping`, then per block
//! `content_block_start`, `content_block_delta` (`text_delta`, or `input_json_delta` with the
//! input's JSON in pieces), `content_block_stop`; then `message_delta` with the stop reason and
//! `message_stop`. Text and JSON are split across two deltas so a client that does not join
//! them would show it.

use serde_json::{Value, json};

use crate::scenario::{Block, ErrorReply};

/// A model turn ready to send: blocks with their ids settled and `{cwd}` substituted.
#[derive(Debug, Clone)]
pub struct Turn {
    /// `msg_mock_<n>`.
    pub id: String,
    /// Echoes the request's model.
    pub model: String,
    /// A rough token count of the request, for `usage`.
    pub input_tokens: u64,
    /// The content blocks as the API returns them (`text` or `tool_use`).
    pub blocks: Vec<Value>,
}

impl Turn {
    /// Builds turn number `n` from scripted blocks, substituting `{cwd}`.
    pub fn new(n: usize, model: &str, input_tokens: u64, blocks: &[Block], cwd: &str) -> Turn {
        let blocks = blocks
            .iter()
            .enumerate()
            .map(|(i, b)| match b {
                Block::Text(t) => json!({"type": "text", "text": t.replace("{cwd}", cwd)}),
                Block::ToolUse(t) => json!({
                    "type": "tool_use",
                    "id": t.id.clone().unwrap_or_else(|| format!("toolu_mock_{n}_{i}")),
                    "name": t.name,
                    "input": crate::scenario::substitute(&t.input, cwd),
                }),
            })
            .collect();
        Turn {
            id: format!("msg_mock_{n}"),
            model: model.to_string(),
            input_tokens,
            blocks,
        }
    }

    /// `tool_use` when the turn calls a tool, `end_turn` otherwise.
    pub fn stop_reason(&self) -> &'static str {
        if self.blocks.iter().any(|b| b["type"] == "tool_use") {
            "tool_use"
        } else {
            "end_turn"
        }
    }

    fn output_tokens(&self) -> u64 {
        let chars: usize = self.blocks.iter().map(|b| b.to_string().len()).sum();
        (chars as u64 / 4).max(1)
    }

    /// The whole turn as one non-streaming response body.
    pub fn to_message(&self) -> Value {
        json!({
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": self.blocks,
            "stop_reason": self.stop_reason(),
            "stop_sequence": null,
            "usage": {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens()},
        })
    }

    /// The turn as a Server-Sent Events body.
    pub fn to_sse(&self) -> String {
        let mut out = String::new();
        event(
            &mut out,
            "message_start",
            &json!({"type": "message_start", "message": {
                "id": self.id, "type": "message", "role": "assistant", "model": self.model,
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": self.input_tokens, "output_tokens": 1},
            }}),
        );
        event(&mut out, "ping", &json!({"type": "ping"}));
        for (index, block) in self.blocks.iter().enumerate() {
            let (start, deltas) = if block["type"] == "tool_use" {
                let input = block["input"].to_string();
                (
                    json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                    halves(&input)
                        .into_iter()
                        .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                        .collect::<Vec<_>>(),
                )
            } else {
                let text = block["text"].as_str().unwrap_or("");
                (
                    json!({"type": "text", "text": ""}),
                    halves(text)
                        .into_iter()
                        .map(|p| json!({"type": "text_delta", "text": p}))
                        .collect(),
                )
            };
            event(
                &mut out,
                "content_block_start",
                &json!({"type": "content_block_start", "index": index, "content_block": start}),
            );
            for delta in deltas {
                event(
                    &mut out,
                    "content_block_delta",
                    &json!({"type": "content_block_delta", "index": index, "delta": delta}),
                );
            }
            event(
                &mut out,
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": index}),
            );
        }
        event(
            &mut out,
            "message_delta",
            &json!({"type": "message_delta",
                   "delta": {"stop_reason": self.stop_reason(), "stop_sequence": null},
                   "usage": {"output_tokens": self.output_tokens()}}),
        );
        event(&mut out, "message_stop", &json!({"type": "message_stop"}));
        out
    }
}

/// The body of an error response, as the real API shapes it.
pub fn error_body(e: &ErrorReply) -> Value {
    json!({"type": "error", "error": {"type": e.kind(), "message": e.message}})
}

fn event(out: &mut String, name: &str, data: &Value) {
    out.push_str("event: ");
    out.push_str(name);
    out.push_str("\ndata: ");
    out.push_str(&data.to_string());
    out.push_str("\n\n");
}

/// `s` in two pieces split at a character boundary near the middle (one piece when short).
fn halves(s: &str) -> Vec<&str> {
    if s.len() < 2 {
        return vec![s];
    }
    let mut mid = s.len() / 2;
    while !s.is_char_boundary(mid) {
        mid += 1;
    }
    if mid == s.len() {
        return vec![s];
    }
    vec![&s[..mid], &s[mid..]]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::ToolUse;

    fn turn() -> Turn {
        Turn::new(
            3,
            "claude-x",
            10,
            &[
                Block::Text("héllo <ralph>DONE</ralph>".into()),
                Block::ToolUse(ToolUse {
                    id: None,
                    name: "Write".into(),
                    input: json!({"file_path": "{cwd}/a.txt", "content": "x"}),
                }),
            ],
            "/w",
        )
    }

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
        let t = turn();
        let evs = events(&t.to_sse());
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
        assert_eq!(evs[0]["message"]["model"], "claude-x");
    }

    #[test]
    fn a_text_only_turn_ends_the_turn() {
        let t = Turn::new(0, "m", 1, &[Block::Text("hi".into())], "/w");
        assert_eq!(t.stop_reason(), "end_turn");
        assert_eq!(t.to_message()["content"][0]["text"], "hi");
    }

    #[test]
    fn halves_respect_char_boundaries() {
        assert_eq!(halves("é"), ["é"]);
        assert_eq!(halves("aéb").concat(), "aéb");
        assert_eq!(halves(""), [""]);
    }
}
