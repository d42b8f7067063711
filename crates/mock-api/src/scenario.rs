//! The scenario file: which reply each model call gets.
//!
//! A scenario is a list of rules, tried in order for every model call; the first rule whose
//! conditions all hold gives the reply:
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
//! - `request`: the 0-based number of this model call since the mock started.
//! - `match`: a substring of the call's newest user input, as [`crate::api::Api::digest`]
//!   renders it: the user's words, and each tool result as `[tool_result <id>]` and its
//!   output. Matching a tool call id the scenario chose is the robust way to say "after that
//!   tool ran".
//! - `times`: how many calls the rule may answer; unlimited when absent.
//!
//! The format is the same whatever the API; a `tool_use` names one of the CLI's own tools
//! (`Write` for Claude Code, `write` for opencode, `exec_command` for Codex, `write_file` for
//! Gemini CLI) with the arguments that tool takes. In every string of a reply, `{cwd}` becomes
//! the working directory the CLI names in its system prompt, since file tools want absolute
//! paths. A call no rule matches gets a text reply saying so, and the log records it.

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
    /// Only this model call (0-based).
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

/// A tool call: `name` and `input` as the CLI's tool expects them.
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
    /// The error's `type` (Anthropic, OpenAI) or `status` (Gemini); derived from the HTTP
    /// status when absent.
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
    /// The error `type` the Anthropic API uses for this status.
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

    /// The index of the rule that answers model call number `request`, whose newest user
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
    fn cwd_is_substituted_in_every_string() {
        let v = json!({"file_path": "{cwd}/a", "n": 1, "list": ["{cwd}"]});
        assert_eq!(
            substitute(&v, "/w"),
            json!({"file_path": "/w/a", "n": 1, "list": ["/w"]})
        );
    }
}
