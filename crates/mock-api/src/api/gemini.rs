//! The Gemini API, as Gemini CLI calls it with `GOOGLE_GEMINI_BASE_URL`:
//! `POST /v1beta/models/<model>:streamGenerateContent?alt=sse`.
//!
//! A streamed turn is a series of `data:` objects with `candidates[0].content.parts`: the text
//! in pieces, then each `functionCall` whole; the last carries `finishReason: STOP` and the
//! `usageMetadata`. A tool's result comes back as a `functionResponse` part in the next
//! request's last `user` content.

use serde_json::{Value, json};

use super::{content_text, find_after, push_line};
use crate::reply::{Turn, TurnBlock, halves, sse_event};
use crate::scenario::ErrorReply;

/// The model named in the path: `/v1beta/models/<model>:streamGenerateContent`.
pub fn model(path: &str) -> String {
    path.rsplit('/')
        .next()
        .and_then(|m| m.split(':').next())
        .unwrap_or("gemini-mock")
        .to_string()
}

/// The last `user` content, as text to match on: its text parts, and for each
/// `functionResponse` `[tool_result <id or name>]` and its output.
pub fn digest(body: &Value) -> String {
    let Some(content) = body["contents"]
        .as_array()
        .and_then(|c| c.iter().rev().find(|c| c["role"] == "user"))
    else {
        return String::new();
    };
    let mut out = String::new();
    for part in content["parts"].as_array().into_iter().flatten() {
        if let Some(text) = part["text"].as_str() {
            push_line(&mut out, text);
        } else if let Some(r) = part.get("functionResponse") {
            let id = r["id"].as_str().or(r["name"].as_str()).unwrap_or("");
            push_line(&mut out, &format!("[tool_result {id}]"));
            let response = &r["response"];
            let output = match (response.get("output"), response.get("error")) {
                (Some(o), _) => content_text(o),
                (None, Some(e)) => content_text(e),
                (None, None) => response.to_string(),
            };
            push_line(&mut out, &output);
        }
    }
    out
}

/// The working directory Gemini CLI names in its session context: the first of its
/// "Workspace Directories" (0.61), or "I'm currently working in the directory: /abs" (older).
pub fn working_dir(body: &Value) -> Option<String> {
    find_after(&body["contents"], "**Workspace Directories:**\n  - ").or_else(|| {
        find_after(
            &body["contents"],
            "I'm currently working in the directory: ",
        )
    })
}

fn usage(turn: &Turn) -> Value {
    let out = turn.output_tokens();
    json!({"promptTokenCount": turn.input_tokens, "candidatesTokenCount": out,
           "totalTokenCount": turn.input_tokens + out})
}

fn chunk(turn: &Turn, parts: Vec<Value>, last: bool) -> Value {
    let mut candidate =
        json!({"content": {"parts": Value::Array(parts), "role": "model"}, "index": 0});
    let mut c = json!({"candidates": [], "modelVersion": turn.model, "responseId": turn.id()});
    if last {
        candidate["finishReason"] = "STOP".into();
        c["usageMetadata"] = usage(turn);
    }
    c["candidates"] = json!([candidate]);
    c
}

fn call(id: &str, name: &str, input: &Value) -> Value {
    json!({"functionCall": {"id": id, "name": name, "args": input}})
}

/// The whole turn as one `GenerateContentResponse`.
pub fn response(turn: &Turn) -> Value {
    let parts = turn
        .blocks
        .iter()
        .map(|b| match b {
            TurnBlock::Text(t) => json!({"text": t}),
            TurnBlock::ToolUse { id, name, input } => call(id, name, input),
        })
        .collect();
    chunk(turn, parts, true)
}

/// The turn as a Server-Sent Events body: text in pieces, each call whole, then an empty
/// last chunk with the finish reason and usage.
pub fn sse(turn: &Turn) -> String {
    let mut out = String::new();
    for block in &turn.blocks {
        match block {
            TurnBlock::Text(text) => {
                for piece in halves(text) {
                    sse_event(
                        &mut out,
                        None,
                        &chunk(turn, vec![json!({"text": piece})], false),
                    );
                }
            }
            TurnBlock::ToolUse { id, name, input } => {
                sse_event(
                    &mut out,
                    None,
                    &chunk(turn, vec![call(id, name, input)], false),
                );
            }
        }
    }
    sse_event(
        &mut out,
        None,
        &chunk(turn, vec![json!({"text": ""})], true),
    );
    out
}

/// A Google-style error body.
pub fn error(e: &ErrorReply) -> Value {
    let status = match e.status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        _ => "INTERNAL",
    };
    let status = e.kind.as_deref().unwrap_or(status);
    json!({"error": {"code": e.status, "message": e.message, "status": status}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::test_turn;

    #[test]
    fn a_stream_rebuilds_into_the_turn() {
        let body = sse(&test_turn());
        let chunks: Vec<Value> = body
            .split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| serde_json::from_str(e.strip_prefix("data: ").unwrap()).unwrap())
            .collect();
        let parts: Vec<&Value> = chunks
            .iter()
            .flat_map(|c| c["candidates"][0]["content"]["parts"].as_array().unwrap())
            .collect();
        let text: String = parts.iter().filter_map(|p| p["text"].as_str()).collect();
        assert_eq!(text, "héllo <ralph>DONE</ralph>");
        let call = parts.iter().find_map(|p| p.get("functionCall")).unwrap();
        assert_eq!(call["name"], "Write");
        assert_eq!(call["args"]["file_path"], "/w/a.txt");
        let last = chunks.last().unwrap();
        assert_eq!(last["candidates"][0]["finishReason"], "STOP");
        assert!(last["usageMetadata"]["totalTokenCount"].as_u64().unwrap() > 0);
    }

    #[test]
    fn the_digest_is_the_last_user_content() {
        let body = json!({"contents": [
            {"role": "user", "parts": [{"text": "<session_context>\n- **Workspace Directories:**\n  - /tmp/p\n- **Directory Structure:**"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "write_file", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {"id": "call_1", "name": "write_file",
                "response": {"output": "Wrote the file."}}}]}
        ]});
        assert_eq!(digest(&body), "[tool_result call_1]\nWrote the file.");
        assert_eq!(working_dir(&body).as_deref(), Some("/tmp/p"));
        assert_eq!(
            model("/v1beta/models/gemini-x:streamGenerateContent"),
            "gemini-x"
        );
    }
}
