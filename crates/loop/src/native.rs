//! Claude Code's own question tool, `AskUserQuestion`, answered by ralph as the agent's host.
//!
//! In the mode the Agent SDK uses (`--input-format stream-json --permission-prompt-tool
//! stdio`), Claude Code asks its host before using a tool: it prints a `control_request` line
//! (`can_use_tool`) and waits for a `control_response` on its stdin. For `AskUserQuestion`, ralph
//! shows the questions to its human and answers with their choices; for any other tool it allows
//! the use, since the loop runs unattended. This module is the protocol's pure half: parsing the
//! requests and writing the responses. The runner does the I/O.

use serde_json::{Value, json};

use ralph_protocol::{Question, QuestionOption};

/// The name of Claude Code's question tool.
pub const ASK_TOOL: &str = "AskUserQuestion";

/// What a refusal tells the model when nobody answered in time.
pub const NO_ANSWER: &str = "Nobody answered in time. Proceed on your best guess, and record the assumption in .ralph/progress.md so a human can correct it later.";

/// What a refusal tells the model when the human skipped the question.
pub const SKIPPED: &str = "The human skipped this question and asks you to decide. Proceed on your best guess, and record the assumption in .ralph/progress.md.";

/// A `can_use_tool` request from the agent.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRequest {
    /// Echoed in the response.
    pub request_id: String,
    /// The tool the agent wants to use.
    pub tool_name: String,
    /// The tool's input, echoed (with answers added) in an allow.
    pub input: Value,
}

impl ToolRequest {
    /// Parses a `control_request` line; `None` for anything that is not `can_use_tool`.
    pub fn parse(line: &str) -> Option<ToolRequest> {
        let v: Value = serde_json::from_str(line).ok()?;
        if v["type"] != "control_request" || v["request"]["subtype"] != "can_use_tool" {
            return None;
        }
        Some(ToolRequest {
            request_id: v["request_id"].as_str()?.to_string(),
            tool_name: v["request"]["tool_name"].as_str()?.to_string(),
            input: v["request"]["input"].clone(),
        })
    }

    /// The questions of an `AskUserQuestion` request, as ralph's own question type.
    pub fn questions(&self) -> Vec<Question> {
        let Some(items) = self.input["questions"].as_array() else {
            return Vec::new();
        };
        items
            .iter()
            .filter_map(|q| {
                let text = q["question"].as_str()?.trim().to_string();
                let options = q["options"]
                    .as_array()
                    .map(|opts| {
                        opts.iter()
                            .filter_map(|o| {
                                let label = o["label"].as_str()?.to_string();
                                let description = o["description"]
                                    .as_str()
                                    .filter(|d| !d.is_empty())
                                    .map(str::to_string);
                                Some(QuestionOption { label, description })
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                Some(Question {
                    text,
                    options,
                    multi_select: q["multiSelect"].as_bool().unwrap_or(false),
                    default: None,
                    context: q["header"]
                        .as_str()
                        .filter(|h| !h.is_empty())
                        .map(str::to_string),
                    warning: None,
                })
            })
            .collect()
    }

    /// Allows the tool use as asked (for tools other than the question tool).
    pub fn allow(&self) -> String {
        response(
            &self.request_id,
            json!({"behavior": "allow", "updatedInput": self.input}),
        )
    }

    /// Allows `AskUserQuestion` with the human's answers, keyed by question text.
    pub fn answer(&self, answers: &[(String, String)]) -> String {
        let mut input = self.input.clone();
        let map: serde_json::Map<String, Value> = answers
            .iter()
            .map(|(q, a)| (q.clone(), Value::String(a.clone())))
            .collect();
        input["answers"] = Value::Object(map);
        response(
            &self.request_id,
            json!({"behavior": "allow", "updatedInput": input}),
        )
    }

    /// Refuses the tool use, with a message the model reads as the tool's result.
    pub fn deny(&self, message: &str) -> String {
        response(
            &self.request_id,
            json!({"behavior": "deny", "message": message}),
        )
    }
}

fn response(request_id: &str, body: Value) -> String {
    let mut response = serde_json::Map::new();
    response.insert("subtype".into(), "success".into());
    response.insert("request_id".into(), request_id.into());
    response.insert("response".into(), body);
    let mut line = json!({"type": "control_response", "response": response}).to_string();
    line.push('\n');
    line
}

/// A user message for `--input-format stream-json`: how the prompt (or a follow-up) is sent.
pub fn user_message(text: &str) -> String {
    let mut line = json!({
        "type": "user",
        "message": {"role": "user", "content": text},
        "parent_tool_use_id": null,
        "session_id": "",
    })
    .to_string();
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Verbatim from Claude Code 2.1.197 (shared/fixtures/claude-code-2.1.197/04_askuser_sdk_allow).
    const REAL: &str = r#"{"type":"control_request","request_id":"c83776ac-0989-492e-b387-aa0e7c17d0ee","request":{"subtype":"can_use_tool","tool_name":"AskUserQuestion","display_name":"AskUserQuestion","input":{"questions":[{"question":"Redis or Memcached?","header":"Cache","options":[{"label":"Redis","description":"Persistent, rich data structures"},{"label":"Memcached","description":"Simple, multi-threaded, volatile"}],"multiSelect":false}]},"tool_use_id":"toolu_03e6bf18528b41379b9f2554"}}"#;

    #[test]
    fn reads_a_real_ask_user_question_request() {
        let r = ToolRequest::parse(REAL).unwrap();
        assert_eq!(r.tool_name, ASK_TOOL);
        let qs = r.questions();
        assert_eq!(qs.len(), 1);
        assert_eq!(qs[0].text, "Redis or Memcached?");
        assert_eq!(qs[0].context.as_deref(), Some("Cache"));
        assert_eq!(qs[0].options[1].label, "Memcached");
        assert_eq!(
            qs[0].options[1].description.as_deref(),
            Some("Simple, multi-threaded, volatile")
        );
    }

    #[test]
    fn answers_echo_the_input_with_answers_keyed_by_question() {
        let r = ToolRequest::parse(REAL).unwrap();
        let line = r.answer(&[("Redis or Memcached?".into(), "Redis".into())]);
        assert!(line.ends_with('\n'));
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["type"], "control_response");
        assert_eq!(
            v["response"]["request_id"],
            "c83776ac-0989-492e-b387-aa0e7c17d0ee"
        );
        let body = &v["response"]["response"];
        assert_eq!(body["behavior"], "allow");
        assert_eq!(
            body["updatedInput"]["answers"]["Redis or Memcached?"],
            "Redis"
        );
        assert_eq!(body["updatedInput"]["questions"][0]["header"], "Cache");
    }

    #[test]
    fn a_refusal_carries_its_message() {
        let r = ToolRequest::parse(REAL).unwrap();
        let v: Value = serde_json::from_str(&r.deny(NO_ANSWER)).unwrap();
        assert_eq!(v["response"]["response"]["behavior"], "deny");
        assert_eq!(v["response"]["response"]["message"], NO_ANSWER);
    }

    #[test]
    fn other_lines_are_not_tool_requests() {
        assert!(
            ToolRequest::parse(
                r#"{"type":"control_request","request_id":"x","request":{"subtype":"interrupt"}}"#
            )
            .is_none()
        );
        assert!(ToolRequest::parse("not json").is_none());
        assert!(ToolRequest::parse(r#"{"type":"assistant"}"#).is_none());
    }

    #[test]
    fn a_user_message_is_one_json_line() {
        let line = user_message("line one\n\"quoted\" $(rm -rf ~)");
        assert_eq!(line.matches('\n').count(), 1);
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["message"]["content"], "line one\n\"quoted\" $(rm -rf ~)");
    }
}
