//! The model APIs the mock speaks, one module each, chosen by the request's path.
//!
//! | API | path | client |
//! | --- | --- | --- |
//! | [`anthropic`] Messages | `POST /v1/messages` | Claude Code |
//! | [`chat`] OpenAI Chat Completions | `POST …/chat/completions` | opencode (`@ai-sdk/openai-compatible`) |
//! | [`responses`] OpenAI Responses | `POST …/responses` | Codex (`wire_api = "responses"`) |
//! | [`gemini`] Gemini `generateContent` | `POST …/models/<m>:streamGenerateContent` | Gemini CLI |
//!
//! Each module answers the same questions about a request (what its newest user input says,
//! the working directory its system prompt names) and spells a [`Turn`] and an
//! [`ErrorReply`] the way its clients expect, so one scenario format serves every CLI; only
//! the tool names and arguments in a scenario are the CLI's own.

pub mod anthropic;
pub mod chat;
pub mod gemini;
pub mod responses;

use serde_json::Value;

use crate::reply::Turn;
use crate::scenario::ErrorReply;

/// One of the APIs the mock speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Chat Completions.
    Chat,
    /// OpenAI Responses.
    Responses,
    /// Gemini `generateContent` / `streamGenerateContent`.
    Gemini,
}

/// A response: status, content type and body.
pub type Response = (u16, &'static str, String);

impl Api {
    /// The API a `POST` to `path` (query removed) is a model call of, if any.
    pub fn route(method: &str, path: &str) -> Option<Api> {
        if method != "POST" {
            return None;
        }
        if path == "/v1/messages" {
            Some(Api::Anthropic)
        } else if path.ends_with("/chat/completions") {
            Some(Api::Chat)
        } else if path.ends_with("/responses") {
            Some(Api::Responses)
        } else if path.contains("/models/")
            && (path.ends_with(":streamGenerateContent") || path.ends_with(":generateContent"))
        {
            Some(Api::Gemini)
        } else {
            None
        }
    }

    /// Its name in the request log.
    pub fn name(self) -> &'static str {
        match self {
            Api::Anthropic => "anthropic",
            Api::Chat => "chat",
            Api::Responses => "responses",
            Api::Gemini => "gemini",
        }
    }

    /// The request's newest user input as text to match rules on: what the user said, and
    /// each tool result as `[tool_result <id>]` followed by its output, one per line.
    pub fn digest(self, body: &Value) -> String {
        match self {
            Api::Anthropic => anthropic::digest(body),
            Api::Chat => chat::digest(body),
            Api::Responses => responses::digest(body),
            Api::Gemini => gemini::digest(body),
        }
    }

    /// The working directory the client's system prompt names, for `{cwd}`.
    pub fn working_dir(self, body: &Value) -> Option<String> {
        match self {
            Api::Anthropic => anthropic::working_dir(body),
            Api::Chat => chat::working_dir(body),
            Api::Responses => responses::working_dir(body),
            Api::Gemini => gemini::working_dir(body),
        }
    }

    /// The model the request names (Gemini names it in the path).
    pub fn model(self, path: &str, body: &Value) -> String {
        match self {
            Api::Gemini => gemini::model(path),
            _ => body["model"].as_str().unwrap_or("mock-model").to_string(),
        }
    }

    /// Whether the client asked for a stream.
    pub fn streams(self, path: &str, body: &Value) -> bool {
        match self {
            Api::Gemini => path.ends_with(":streamGenerateContent"),
            _ => body["stream"] == true,
        }
    }

    /// The turn as this API sends it.
    pub fn turn(self, turn: &Turn, stream: bool) -> Response {
        const SSE: &str = "text/event-stream";
        const JSON: &str = "application/json";
        match (self, stream) {
            (Api::Anthropic, true) => (200, SSE, anthropic::sse(turn)),
            (Api::Anthropic, false) => (200, JSON, anthropic::message(turn).to_string()),
            (Api::Chat, true) => (200, SSE, chat::sse(turn)),
            (Api::Chat, false) => (200, JSON, chat::completion(turn).to_string()),
            (Api::Responses, true) => (200, SSE, responses::sse(turn)),
            (Api::Responses, false) => (200, JSON, responses::response(turn).to_string()),
            (Api::Gemini, true) => (200, SSE, gemini::sse(turn)),
            (Api::Gemini, false) => (200, JSON, gemini::response(turn).to_string()),
        }
    }

    /// An HTTP error as this API shapes its body.
    pub fn error(self, e: &ErrorReply) -> Response {
        let body = match self {
            Api::Anthropic => anthropic::error(e),
            Api::Chat | Api::Responses => chat::error(e),
            Api::Gemini => gemini::error(e),
        };
        (e.status, "application/json", body.to_string())
    }

    /// A request whose body is not JSON.
    pub fn bad_json(self, why: &str) -> Response {
        self.error(&ErrorReply {
            status: 400,
            kind: None,
            message: format!("ralph-mock-api: the body is not JSON: {why}"),
        })
    }
}

/// Appends `s` to `out` on a line of its own.
fn push_line(out: &mut String, s: &str) {
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(s);
}

/// The rest of the line after the first `mark` in any string inside `v`, trimmed.
fn find_after(v: &Value, mark: &str) -> Option<String> {
    match v {
        Value::String(s) => s.find(mark).map(|at| {
            let rest = &s[at + mark.len()..];
            rest.lines().next().unwrap_or("").trim().to_string()
        }),
        Value::Array(items) => items.iter().find_map(|i| find_after(i, mark)),
        Value::Object(map) => map.values().find_map(|i| find_after(i, mark)),
        _ => None,
    }
}

/// Text content as a string: a string as it is, an array of parts as their `text`s joined.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_api_is_routed_by_its_path() {
        let cases = [
            ("/v1/messages", Some(Api::Anthropic)),
            ("/v1/chat/completions", Some(Api::Chat)),
            ("/chat/completions", Some(Api::Chat)),
            ("/v1/responses", Some(Api::Responses)),
            (
                "/v1beta/models/gemini-x:streamGenerateContent",
                Some(Api::Gemini),
            ),
            ("/v1beta/models/gemini-x:generateContent", Some(Api::Gemini)),
            ("/v1beta/models/gemini-x:countTokens", None),
            ("/v1/models", None),
        ];
        for (path, want) in cases {
            assert_eq!(Api::route("POST", path), want, "{path}");
        }
        assert_eq!(Api::route("GET", "/v1/messages"), None);
    }
}
