//! The scenario file: which reply each Messages API request gets.
//!
//! A scenario is a list of rules, tried in order for every `POST /v1/messages`; the first rule
//! whose conditions all hold gives the reply:
//!
//! ```json
//! {"rules": [
//!   {"match": "toolu_question", "reply": {"content": [{"text": "<ralph>QUESTION</ralph>"}]}},
//!   {"request": 0, "times": 1, "reply": {"content": [
//!     {"text": "I have a question."},
//!     {"tool_use": {"id": "toolu_question", "name": "Write",
//!       "input": {"file_path": "{cwd}/.ralph/question.md", "content": "Redis or Memcached?"}}}
//!   ]}},
//!   {"reply": {"error": {"status": 500, "message": "overloaded"}}}
//! ]}
//! ```
//!
//! - `request`: the 0-based number of this Messages API call since the mock started.
//! - `match`: a substring of the request's last user message, as [`last_user_digest`] renders
//!   it: its text, and each tool result's `tool_use_id` and content. Matching a tool_use id the
//!   scenario chose is the robust way to say "after that tool ran".
//! - `times`: how many requests the rule may answer; unlimited when absent.
//!
//! In every string of a reply, `{cwd}` becomes the working directory Claude Code names in its
//! system prompt (`Primary working directory: /abs/path`), since its file tools want absolute
//! paths. A request no rule matches gets a text reply saying so, and the log records it.

use serde::Deserialize;
use serde_json::Value;

/// A whole scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Tried in order; the first that matches answers.
    pub rules: Vec<Rule>,
}

/// One reply and the conditions under which it is given.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Only this Messages API call (0-based).
    #[serde(default)]
    pub request: Option<usize>,
    /// Only when the last user message's digest contains this.
    #[serde(default, rename = "match")]
    pub matches: Option<String>,
    /// At most this many times.
    #[serde(default)]
    pub times: Option<usize>,
    /// What to answer.
    pub reply: Reply,
}

/// What the mock answers.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Reply {
    /// A model turn: these blocks, in order. The stop reason is `tool_use` when there is a
    /// tool_use block, `end_turn` otherwise.
    Content(Vec<Block>),
    /// An HTTP error with an Anthropic-style error body.
    Error(ErrorReply),
}

/// One content block of a model turn.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Block {
    /// Text the model says.
    Text(String),
    /// A tool call.
    ToolUse(ToolUse),
}

/// A tool call: `name` and `input` as Claude Code's tools expect them.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolUse {
    /// The tool_use id; one is made up when absent. Give one to `match` its result later.
    #[serde(default)]
    pub id: Option<String>,
    /// `Write`, `Read`, `Edit`, `Bash`, ...
    pub name: String,
    /// The tool's input object.
    #[serde(default = "empty_object")]
    pub input: Value,
}

/// An HTTP error status and the error the body carries.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorReply {
    /// The HTTP status, e.g. 400, 429, 500, 529.
    pub status: u16,
    /// The error's `type`; derived from the status when absent.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// The error's `message`.
    #[serde(default = "default_error_message")]
    pub message: String,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

fn default_error_message() -> String {
    "mock error".into()
}

impl ErrorReply {
    /// The error `type` the real API uses for this status.
    pub fn kind(&self) -> &str {
        if let Some(k) = &self.kind {
            return k;
        }
        match self.status {
            400 => "invalid_request_error",
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            529 => "overloaded_error",
            _ => "api_error",
        }
    }
}

impl Scenario {
    /// Reads a scenario from JSON text.
    pub fn from_json(text: &str) -> Result<Scenario, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The index of the rule that answers Messages API call number `request`, whose last user
    /// message renders as `digest`; `uses[i]` counts the requests rule `i` has answered so far.
    pub fn pick(&self, request: usize, digest: &str, uses: &[usize]) -> Option<usize> {
        self.rules.iter().enumerate().position(|(i, rule)| {
            rule.request.is_none_or(|n| n == request)
                && rule.matches.as_deref().is_none_or(|m| digest.contains(m))
                && rule
                    .times
                    .is_none_or(|t| uses.get(i).copied().unwrap_or(0) < t)
        })
    }
}

/// The last `role: user` message of a Messages request, as text to match on: its text blocks,
/// and for each tool_result `[tool_result <id>]` and its content, one per line.
///
/// Claude Code puts a `role: system` message after the user turn, so this is not simply the
/// last message.
pub fn last_user_digest(body: &Value) -> String {
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

fn push_line(out: &mut String, s: &str) {
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(s);
}

/// The working directory Claude Code names in its system prompt, if any.
pub fn working_dir(body: &Value) -> Option<String> {
    const MARK: &str = "Primary working directory: ";
    // The system prompt first, then anywhere (versions move it around).
    find_in_strings(&body["system"], MARK).or_else(|| find_in_strings(body, MARK))
}

fn find_in_strings(v: &Value, mark: &str) -> Option<String> {
    match v {
        Value::String(s) => s.find(mark).map(|at| {
            let rest = &s[at + mark.len()..];
            rest.lines().next().unwrap_or("").trim().to_string()
        }),
        Value::Array(items) => items.iter().find_map(|i| find_in_strings(i, mark)),
        Value::Object(map) => map.values().find_map(|i| find_in_strings(i, mark)),
        _ => None,
    }
}

/// `v` with `{cwd}` replaced by `cwd` in every string.
pub fn substitute(v: &Value, cwd: &str) -> Value {
    match v {
        Value::String(s) => Value::String(s.replace("{cwd}", cwd)),
        Value::Array(items) => Value::Array(items.iter().map(|i| substitute(i, cwd)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), substitute(v, cwd)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scenario() -> Scenario {
        Scenario::from_json(
            r#"{"rules": [
                {"match": "toolu_q", "reply": {"content": [{"text": "asked"}]}},
                {"request": 0, "times": 1, "reply": {"content": [
                    {"tool_use": {"id": "toolu_q", "name": "Write", "input": {"file_path": "{cwd}/q.md"}}}
                ]}},
                {"reply": {"error": {"status": 500}}}
            ]}"#,
        )
        .unwrap()
    }

    #[test]
    fn the_first_rule_whose_conditions_hold_answers() {
        let s = scenario();
        assert_eq!(s.pick(0, "do the task", &[0, 0, 0]), Some(1));
        assert_eq!(s.pick(1, "[tool_result toolu_q]\nok", &[0, 1, 0]), Some(0));
        assert_eq!(s.pick(2, "something else", &[1, 1, 0]), Some(2));
    }

    #[test]
    fn a_rule_used_up_no_longer_matches() {
        assert_eq!(scenario().pick(0, "do the task", &[0, 1, 0]), Some(2));
    }

    #[test]
    fn no_rule_matching_is_none() {
        let s = Scenario::from_json(r#"{"rules": [{"request": 3, "reply": {"content": []}}]}"#)
            .unwrap();
        assert_eq!(s.pick(0, "", &[0]), None);
    }

    #[test]
    fn unknown_keys_are_errors() {
        let err = Scenario::from_json(r#"{"rules": [{"when": 1, "reply": {"content": []}}]}"#)
            .unwrap_err();
        assert!(err.to_string().contains("unknown field `when`"), "{err}");
    }

    #[test]
    fn the_error_type_follows_the_status() {
        let s = scenario();
        let Reply::Error(e) = &s.rules[2].reply else {
            panic!("not an error")
        };
        assert_eq!(
            (e.status, e.kind(), e.message.as_str()),
            (500, "api_error", "mock error")
        );
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
            last_user_digest(&body),
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

    #[test]
    fn cwd_is_substituted_in_every_string() {
        let v = json!({"file_path": "{cwd}/a", "n": 1, "list": ["{cwd}"]});
        assert_eq!(
            substitute(&v, "/w"),
            json!({"file_path": "/w/a", "n": 1, "list": ["/w"]})
        );
    }
}
