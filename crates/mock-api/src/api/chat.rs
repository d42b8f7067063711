//! OpenAI Chat Completions, as opencode's `@ai-sdk/openai-compatible` provider calls it:
//! `POST {baseURL}/chat/completions` with `stream: true` and `stream_options.include_usage`.
//!
//! A streamed turn is `chat.completion.chunk`s: the role, the text in pieces, each tool call
//! (its id and name first, then its arguments in pieces), the `finish_reason` (`tool_calls`
//! or `stop`), a last chunk with no choices and the `usage`, then `data: [DONE]`.

use serde_json::{Value, json};

use super::{content_text, find_after, push_line};
use crate::reply::{Turn, TurnBlock, halves, sse_event};
use crate::scenario::ErrorReply;

/// The messages after the model's last turn (the user's words, or the results of the tools
/// it called), as text to match on. Tool results are `role: tool` messages naming their
/// `tool_call_id`.
pub fn digest(body: &Value) -> String {
    let messages = body["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let since = messages
        .iter()
        .rposition(|m| m["role"] == "assistant")
        .map_or(0, |i| i + 1);
    let mut out = String::new();
    for m in &messages[since..] {
        match m["role"].as_str() {
            Some("user") => push_line(&mut out, &content_text(&m["content"])),
            Some("tool") => {
                let id = m["tool_call_id"].as_str().unwrap_or("");
                push_line(&mut out, &format!("[tool_result {id}]"));
                push_line(&mut out, &content_text(&m["content"]));
            }
            _ => {}
        }
    }
    out
}

/// The working directory opencode names in its system prompt (`Working directory: /abs`).
pub fn working_dir(body: &Value) -> Option<String> {
    find_after(&body["messages"], "Working directory: ")
}

fn finish_reason(turn: &Turn) -> &'static str {
    if turn.calls_tools() {
        "tool_calls"
    } else {
        "stop"
    }
}

fn usage(turn: &Turn) -> Value {
    let out = turn.output_tokens();
    json!({"prompt_tokens": turn.input_tokens, "completion_tokens": out,
           "total_tokens": turn.input_tokens + out})
}

fn tool_calls(turn: &Turn) -> Vec<Value> {
    turn.blocks
        .iter()
        .filter_map(|b| match b {
            TurnBlock::ToolUse { id, name, input } => Some(json!({
                "id": id, "type": "function",
                "function": {"name": name, "arguments": input.to_string()},
            })),
            TurnBlock::Text(_) => None,
        })
        .collect()
}

/// The whole turn as one `chat.completion`.
pub fn completion(turn: &Turn) -> Value {
    let calls = tool_calls(turn);
    let mut message = json!({"role": "assistant", "content": turn.text()});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    json!({
        "id": turn.id(), "object": "chat.completion", "created": 0, "model": turn.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(turn)}],
        "usage": usage(turn),
    })
}

/// The turn as a stream of `chat.completion.chunk`s.
pub fn sse(turn: &Turn) -> String {
    let mut out = String::new();
    let mut chunk = |choices: Value, usage: Option<Value>| {
        let mut c = json!({"id": turn.id(), "object": "chat.completion.chunk", "created": 0,
                           "model": turn.model, "choices": choices});
        if let Some(u) = usage {
            c["usage"] = u;
        }
        sse_event(&mut out, None, &c);
    };
    let delta = |d: Value| json!([{"index": 0, "delta": d, "finish_reason": null}]);
    chunk(delta(json!({"role": "assistant", "content": ""})), None);
    let mut call_index = 0;
    for block in &turn.blocks {
        match block {
            TurnBlock::Text(text) => {
                for piece in halves(text) {
                    chunk(delta(json!({"content": piece})), None);
                }
            }
            TurnBlock::ToolUse { id, name, input } => {
                chunk(
                    delta(json!({"tool_calls": [{"index": call_index, "id": id,
                        "type": "function", "function": {"name": name, "arguments": ""}}]})),
                    None,
                );
                let args = input.to_string();
                for piece in halves(&args) {
                    chunk(
                        delta(json!({"tool_calls": [{"index": call_index,
                            "function": {"arguments": piece}}]})),
                        None,
                    );
                }
                call_index += 1;
            }
        }
    }
    chunk(
        json!([{"index": 0, "delta": {}, "finish_reason": finish_reason(turn)}]),
        None,
    );
    chunk(json!([]), Some(usage(turn)));
    out.push_str("data: [DONE]\n\n");
    out
}

/// An OpenAI-style error body (Chat Completions and Responses share it).
pub fn error(e: &ErrorReply) -> Value {
    let kind = match e.status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        429 => "rate_limit_exceeded",
        _ => "server_error",
    };
    let kind = e.kind.as_deref().unwrap_or(kind);
    json!({"error": {"message": e.message, "type": kind, "param": null, "code": kind}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::test_turn;

    fn chunks(body: &str) -> Vec<Value> {
        let mut datas: Vec<&str> = body
            .split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| e.strip_prefix("data: ").unwrap())
            .collect();
        assert_eq!(datas.pop(), Some("[DONE]"));
        datas
            .into_iter()
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    }

    #[test]
    fn a_stream_rebuilds_into_the_turn() {
        let cs = chunks(&sse(&test_turn()));
        let text: String = cs
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
            .collect();
        assert_eq!(text, "héllo <ralph>DONE</ralph>");
        let calls: Vec<&Value> = cs
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].get(0))
            .collect();
        assert_eq!(calls[0]["id"], "toolu_mock_3_1");
        assert_eq!(calls[0]["function"]["name"], "Write");
        let args: String = calls
            .iter()
            .filter_map(|c| c["function"]["arguments"].as_str())
            .collect();
        assert_eq!(
            serde_json::from_str::<Value>(&args).unwrap(),
            json!({"file_path": "/w/a.txt", "content": "x"})
        );
        let n = cs.len();
        assert_eq!(cs[n - 2]["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(cs[n - 1]["choices"], json!([]));
        assert!(cs[n - 1]["usage"]["total_tokens"].as_u64().unwrap() > 0);
    }

    #[test]
    fn a_completion_has_the_text_and_the_calls() {
        let c = completion(&test_turn());
        let m = &c["choices"][0]["message"];
        assert_eq!(m["content"], "héllo <ralph>DONE</ralph>");
        assert_eq!(m["tool_calls"][0]["function"]["name"], "Write");
    }

    #[test]
    fn the_digest_is_what_came_after_the_models_last_turn() {
        let body = json!({"messages": [
            {"role": "system", "content": "Working directory: /tmp/p\nPlatform: linux"},
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1"}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "file text"},
            {"role": "user", "content": [{"type": "text", "text": "and more"}]}
        ]});
        assert_eq!(digest(&body), "[tool_result call_1]\nfile text\nand more");
        assert_eq!(working_dir(&body).as_deref(), Some("/tmp/p"));
    }
}
