//! The mock over real HTTP, with a plain client: the probe, a streamed turn, rule matching on
//! a tool result, errors, the request log, and the same scenario served in every API.

use std::path::Path;

use ralph_mock_api::{Scenario, Server};
use serde_json::{Value, json};

const SCENARIO: &str = r#"{"rules": [
    {"match": "toolu_w", "reply": {"content": [{"text": "written <ralph>DONE</ralph>"}]}},
    {"match": "please fail", "reply": {"error": {"status": 529, "message": "busy"}}},
    {"request": 0, "reply": {"content": [
        {"text": "Writing."},
        {"tool_use": {"id": "toolu_w", "name": "Write",
                      "input": {"file_path": "{cwd}/a.txt", "content": "hi"}}}
    ]}}
]}"#;

fn start(log: &Path) -> Server {
    Server::start(
        Scenario::from_json(SCENARIO).unwrap(),
        Some(log.to_path_buf()),
        0,
    )
    .unwrap()
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

/// A request body shaped like Claude Code's: a system prompt naming the working directory,
/// and a `role: system` message after the last user turn.
fn request(user: &Value, stream: bool) -> String {
    json!({
        "model": "claude-test",
        "stream": stream,
        "system": [{"type": "text", "text": "Env:\nPrimary working directory: /tmp/proj\nPlatform: linux"}],
        "messages": [{"role": "user", "content": user}, {"role": "system", "content": "reminder"}],
    })
    .to_string()
}

fn post(server: &Server, body: String) -> (u16, String, String) {
    let mut resp = agent()
        .post(format!("{}/v1/messages?beta=true", server.url()))
        .header("content-type", "application/json")
        .header("x-api-key", "sk-test")
        .send(body)
        .unwrap();
    let ct = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let status = resp.status().as_u16();
    (status, ct, resp.body_mut().read_to_string().unwrap())
}

/// The `data:` objects of an SSE body.
fn events(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

fn log_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_scripted_conversation_streams_and_is_logged() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.jsonl");
    let server = start(&log);

    let head = agent().head(format!("{}/", server.url())).call().unwrap();
    assert_eq!(head.status().as_u16(), 200);

    let (status, ct, body) = post(&server, request(&json!("do the task"), true));
    assert_eq!((status, ct.as_str()), (200, "text/event-stream"));
    let evs = events(&body);
    assert_eq!(evs.first().unwrap()["type"], "message_start");
    assert_eq!(evs.last().unwrap()["type"], "message_stop");
    let tool_start = evs
        .iter()
        .find(|e| e["content_block"]["type"] == "tool_use")
        .unwrap();
    assert_eq!(tool_start["content_block"]["name"], "Write");
    let input: String = evs
        .iter()
        .filter_map(|e| e["delta"]["partial_json"].as_str())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&input).unwrap()["file_path"],
        "/tmp/proj/a.txt",
        "{{cwd}} is the system prompt's working directory"
    );
    let stop = evs.iter().find(|e| e["type"] == "message_delta").unwrap();
    assert_eq!(stop["delta"]["stop_reason"], "tool_use");

    // The tool's result comes back; the rule matching its id answers.
    let result =
        json!([{"type": "tool_result", "tool_use_id": "toolu_w", "content": "File created"}]);
    let (_, _, body) = post(&server, request(&result, true));
    let text: String = events(&body)
        .iter()
        .filter_map(|e| e["delta"]["text"].as_str())
        .collect();
    assert_eq!(text, "written <ralph>DONE</ralph>");

    let lines = log_lines(&log);
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["method"], "HEAD");
    assert_eq!(
        (&lines[1]["request"], &lines[1]["rule"]),
        (&json!(0), &json!(2))
    );
    assert_eq!(lines[1]["working_dir"], "/tmp/proj");
    assert_eq!(lines[1]["body"]["messages"][0]["content"], "do the task");
    assert_eq!(
        (&lines[2]["request"], &lines[2]["rule"]),
        (&json!(1), &json!(0))
    );
    assert_eq!(lines[2]["last_user"], "[tool_result toolu_w]\nFile created");
}

#[test]
fn an_error_rule_answers_with_its_status_and_an_api_error_body() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(&dir.path().join("log.jsonl"));
    let (status, ct, body) = post(&server, request(&json!("please fail"), true));
    assert_eq!((status, ct.as_str()), (529, "application/json"));
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}})
    );
}

#[test]
fn an_unmatched_request_gets_a_text_saying_so_and_a_non_stream_gets_json() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.jsonl");
    let server = start(&log);
    // Request 0 is taken by this one, so the `request: 0` rule is spent afterwards.
    post(&server, request(&json!("first"), true));
    let (status, ct, body) = post(&server, request(&json!("second"), false));
    assert_eq!((status, ct.as_str()), (200, "application/json"));
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["content"][0]["text"],
        "ralph-mock-api: no scenario rule matches request 1."
    );
    assert_eq!(v["stop_reason"], "end_turn");
    assert_eq!(log_lines(&log)[1]["rule"], Value::Null);
}

/// POSTs `body` to `path` and returns the status, content type and body.
fn post_to(server: &Server, path: &str, body: &Value) -> (u16, String, String) {
    let mut resp = agent()
        .post(format!("{}{path}", server.url()))
        .header("content-type", "application/json")
        .send(body.to_string())
        .unwrap();
    let ct = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (
        resp.status().as_u16(),
        ct,
        resp.body_mut().read_to_string().unwrap(),
    )
}

#[test]
fn one_scenario_serves_every_api_by_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.jsonl");
    let server = start(&log);

    // OpenAI Responses (Codex), request 0: the working directory is in the environment
    // context.
    let responses = json!({"model": "m", "stream": true, "input": [
        {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "<environment_context>\n  <cwd>/tmp/cx</cwd>\n</environment_context>"},
            {"type": "input_text", "text": "do the task"}]}]});
    let (status, ct, body) = post_to(&server, "/v1/responses", &responses);
    assert_eq!((status, ct.as_str()), (200, "text/event-stream"));
    let call = events(&body)
        .into_iter()
        .find(|e| e["type"] == "response.output_item.done" && e["item"]["type"] == "function_call")
        .unwrap();
    let args: Value = serde_json::from_str(call["item"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args["file_path"], "/tmp/cx/a.txt");

    // OpenAI Chat Completions (opencode): a tool result is a `role: tool` message.
    let chat = json!({"model": "m", "stream": true, "messages": [
        {"role": "system", "content": "<env>\n  Working directory: /tmp/oc\n</env>"},
        {"role": "user", "content": "do the task"},
        {"role": "assistant", "tool_calls": [{"id": "toolu_w"}]},
        {"role": "tool", "tool_call_id": "toolu_w", "content": "File created"}]});
    let (status, ct, body) = post_to(&server, "/v1/chat/completions", &chat);
    assert_eq!((status, ct.as_str()), (200, "text/event-stream"));
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    let text: String = events(&body[..body.len() - "data: [DONE]\n\n".len()])
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "written <ralph>DONE</ralph>");

    // Gemini: the model is in the path; an error has Google's shape.
    let gemini = json!({"contents": [{"role": "user", "parts": [{"text": "please fail"}]}]});
    let (status, _, body) = post_to(
        &server,
        "/v1beta/models/gemini-x:streamGenerateContent?alt=sse",
        &gemini,
    );
    assert_eq!(status, 529);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["message"], "busy");

    let lines = log_lines(&log);
    let apis: Vec<&str> = lines.iter().map(|l| l["api"].as_str().unwrap()).collect();
    assert_eq!(apis, ["responses", "chat", "gemini"]);
    let rules: Vec<&Value> = lines.iter().map(|l| &l["rule"]).collect();
    assert_eq!(rules, [&json!(2), &json!(0), &json!(1)]);
    assert_eq!(lines[1]["working_dir"], "/tmp/oc");
    assert_eq!(lines[1]["last_user"], "[tool_result toolu_w]\nFile created");
}

#[test]
fn the_binary_prints_its_url_and_serves() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("s.json");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ralph-mock-api"))
        .arg("--scenario")
        .arg(&scenario)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().to_string();
    let status = agent().head(format!("{url}/")).call().map(|r| r.status());
    let _ = child.kill();
    let _ = child.wait();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    assert_eq!(status.unwrap().as_u16(), 200);
}

#[test]
fn the_binary_names_a_bad_scenario_file() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("bad.json");
    std::fs::write(&scenario, r#"{"rules": [{"reply": {"contents": []}}]}"#).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ralph-mock-api"))
        .arg("--scenario")
        .arg(&scenario)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("bad.json") && err.contains("contents"),
        "{err}"
    );
}
