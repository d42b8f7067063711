//! OpenAI Responses, as Codex calls it through a `model_providers` entry with
//! `wire_api = "responses"`: `POST {base_url}/responses`, always streamed.
//!
//! A streamed turn is `response.created`; per block `response.output_item.added`, the text
//! (`response.output_text.delta`) or arguments (`response.function_call_arguments.delta`) in
//! pieces, `response.output_item.done` with the whole item; then `response.completed` with the
//! usage. A tool call is a `function_call` item; its result comes back in the next request's
//! `input` as a `function_call_output` naming the `call_id`.

use serde_json::{Value, json};

use super::{content_text, push_line};
use crate::reply::{Turn, TurnBlock, halves, sse_event};

/// The `input` items after the model's last output (the user's words, or the outputs of the
/// tools it called), as text to match on.
pub fn digest(body: &Value) -> String {
    let items = body["input"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let model_output = |i: &Value| {
        matches!(
            i["type"].as_str(),
            Some("function_call" | "reasoning" | "custom_tool_call" | "local_shell_call")
        ) || (i["type"] == "message" && i["role"] == "assistant")
    };
    let since = items.iter().rposition(model_output).map_or(0, |i| i + 1);
    let mut out = String::new();
    for item in &items[since..] {
        match item["type"].as_str() {
            Some("message") if item["role"] == "user" => {
                push_line(&mut out, &content_text(&item["content"]));
            }
            Some("function_call_output" | "custom_tool_call_output") => {
                let id = item["call_id"].as_str().unwrap_or("");
                push_line(&mut out, &format!("[tool_result {id}]"));
                push_line(&mut out, &content_text(&item["output"]));
            }
            _ => {}
        }
    }
    out
}

/// The working directory Codex names in its environment context (`<cwd>/abs</cwd>`).
pub fn working_dir(body: &Value) -> Option<String> {
    fn find(v: &Value) -> Option<String> {
        match v {
            Value::String(s) => {
                let start = s.find("<cwd>")? + "<cwd>".len();
                let end = s[start..].find("</cwd>")? + start;
                Some(s[start..end].trim().to_string())
            }
            Value::Array(items) => items.iter().find_map(find),
            Value::Object(map) => map.values().find_map(find),
            _ => None,
        }
    }
    find(&body["input"])
}

fn usage(turn: &Turn) -> Value {
    let out = turn.output_tokens();
    json!({
        "input_tokens": turn.input_tokens, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": out, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": turn.input_tokens + out,
    })
}

/// The output items of the turn, whole.
fn items(turn: &Turn) -> Vec<Value> {
    turn.blocks
        .iter()
        .enumerate()
        .map(|(i, b)| match b {
            TurnBlock::Text(text) => json!({
                "type": "message", "id": format!("{}_{i}", turn.id()), "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }),
            TurnBlock::ToolUse { id, name, input } => json!({
                "type": "function_call", "id": format!("fc_mock_{}_{i}", turn.n),
                "status": "completed", "call_id": id, "name": name,
                "arguments": input.to_string(),
            }),
        })
        .collect()
}

fn response_object(turn: &Turn, status: &str, output: Vec<Value>) -> Value {
    json!({"id": format!("resp_mock_{}", turn.n), "object": "response", "status": status,
           "model": turn.model, "output": Value::Array(output), "usage": usage(turn)})
}

/// The whole turn as one `response` object.
pub fn response(turn: &Turn) -> Value {
    response_object(turn, "completed", items(turn))
}

/// The turn as a Server-Sent Events body.
pub fn sse(turn: &Turn) -> String {
    let mut out = String::new();
    let mut seq = 0;
    let mut event = |mut data: Value| {
        data["sequence_number"] = seq.into();
        seq += 1;
        let name = data["type"].as_str().unwrap_or("").to_string();
        sse_event(&mut out, Some(&name), &data);
    };
    let mut created = response_object(turn, "in_progress", Vec::new());
    created["usage"] = Value::Null;
    event(json!({"type": "response.created", "response": created}));
    let whole = items(turn);
    for (index, (block, item)) in turn.blocks.iter().zip(&whole).enumerate() {
        let item_id = item["id"].clone();
        match block {
            TurnBlock::Text(text) => {
                let mut empty = item.clone();
                empty["content"] = json!([]);
                empty["status"] = "in_progress".into();
                event(
                    json!({"type": "response.output_item.added", "output_index": index,
                             "item": empty}),
                );
                for piece in halves(text) {
                    event(
                        json!({"type": "response.output_text.delta", "item_id": item_id,
                                 "output_index": index, "content_index": 0, "delta": piece}),
                    );
                }
            }
            TurnBlock::ToolUse { input, .. } => {
                let mut empty = item.clone();
                empty["arguments"] = "".into();
                empty["status"] = "in_progress".into();
                event(
                    json!({"type": "response.output_item.added", "output_index": index,
                             "item": empty}),
                );
                let args = input.to_string();
                for piece in halves(&args) {
                    event(json!({"type": "response.function_call_arguments.delta",
                                 "item_id": item_id, "output_index": index, "delta": piece}));
                }
            }
        }
        event(json!({"type": "response.output_item.done", "output_index": index, "item": item}));
    }
    event(json!({"type": "response.completed", "response": response(turn)}));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::test_turn;

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
        let evs = events(&sse(&test_turn()));
        assert_eq!(evs[0]["type"], "response.created");
        let text: String = evs
            .iter()
            .filter(|e| e["type"] == "response.output_text.delta")
            .map(|e| e["delta"].as_str().unwrap())
            .collect();
        assert_eq!(text, "héllo <ralph>DONE</ralph>");
        let done: Vec<&Value> = evs
            .iter()
            .filter(|e| e["type"] == "response.output_item.done")
            .map(|e| &e["item"])
            .collect();
        assert_eq!(done[0]["content"][0]["text"], "héllo <ralph>DONE</ralph>");
        assert_eq!(done[1]["call_id"], "toolu_mock_3_1");
        assert_eq!(
            serde_json::from_str::<Value>(done[1]["arguments"].as_str().unwrap()).unwrap(),
            json!({"file_path": "/w/a.txt", "content": "x"})
        );
        let last = evs.last().unwrap();
        assert_eq!(last["type"], "response.completed");
        assert!(last["response"]["usage"]["total_tokens"].as_u64().unwrap() > 0);
    }

    #[test]
    fn the_digest_is_what_came_after_the_models_last_output() {
        let body = json!({"input": [
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "<environment_context>\n  <cwd>/tmp/p</cwd>\n</environment_context>"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "do it"}]},
            {"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "done\n"}
        ]});
        assert_eq!(digest(&body), "[tool_result call_1]\ndone\n");
        assert_eq!(working_dir(&body).as_deref(), Some("/tmp/p"));
    }
}
