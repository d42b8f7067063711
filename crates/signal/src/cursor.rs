//! Cursor CLI's `cursor-agent -p --output-format stream-json` stream.
//!
//! One JSON object per line (see `fixtures/streams/cursor/`; shapes from cursor.com's
//! output-format page and a live capture of CLI 2026.09.10, Sirdar
//! `docs/research/11-cursor-wire-formats.md`; not run here: Cursor has no local backend):
//!
//! | line | events |
//! | --- | --- |
//! | `system` `init` | `SessionId` (its `cwd` also makes tool paths relative) |
//! | `assistant` (the whole message, one line) | its text as `Text` lines, plus `Signal`s |
//! | `tool_call` `started` | `ToolCall`, named by the key of `tool_call` (`readToolCall` is `read`) |
//! | `tool_call` `completed` | `ToolCall` if it was not started, then `ToolResult` (`is_error` for `rejected`, `error`, a non-zero `exitCode`) |
//! | `result` | `Usage` (tokens only: there is no cost), `RateLimited` and `Error` if `is_error`, `TurnEnd` |
//! | `user`, `thinking` | nothing |
//! | anything else | `Unknown` |
//!
//! With `--stream-partial-output` Cursor also sends every token as an `assistant` line of the
//! same shape, then the whole message again; ralph's preset does not pass that flag, and text
//! would show twice with it. A failure (an unusable model, a quota refusal) often ends the
//! stream with no `result` at all, the reason only on stderr.

use crate::json::{JsonFormat, Obj, clean_id, start_of};
use crate::rate_limit;
use crate::sanitize::sanitize;
use crate::skim::Raw;
use crate::summary::{ToolInput, first_line, first_line_of_string, relative, short};
use crate::text::TextScanner;
use crate::{AgentEvent, Usage};

/// Decodes `cursor-agent --output-format stream-json` output, one line at a time.
#[derive(Debug, Default)]
pub(crate) struct Cursor {
    text: TextScanner,
    cwd: Option<String>,
    /// `call_id`s whose `ToolCall` was shown at `started`.
    started: Vec<String>,
}

impl JsonFormat for Cursor {
    fn object(&mut self, line: &[u8], out: &mut Vec<AgentEvent>) {
        let Some(obj) = Obj::line_or_report(line, out) else {
            return;
        };
        let kind = obj.str("type").unwrap_or_default();
        let subtype = obj.str("subtype").unwrap_or_default();
        match (kind.as_ref(), subtype.as_ref()) {
            ("system", "init") => {
                if let Some(cwd) = obj.str("cwd") {
                    self.cwd = Some(cwd.into_owned());
                }
                if let Some(id) = obj.str("session_id") {
                    out.push(AgentEvent::SessionId(clean_id(&id)));
                }
            }
            ("assistant", _) => self.assistant(&obj, out),
            ("tool_call", "started" | "completed") => {
                let completed = subtype == "completed";
                self.tool_call(&obj, completed, line, out);
            }
            ("result", _) => self.result(&obj, out),
            ("user" | "thinking", _) => {}
            _ => out.push(AgentEvent::Unknown(start_of(line))),
        }
    }
}

impl Cursor {
    fn assistant(&mut self, obj: &Obj<'_>, out: &mut Vec<AgentEvent>) {
        let Some(content) = obj.obj("message").and_then(|m| m.get("content")) else {
            return;
        };
        if let Some(text) = content.str() {
            self.say(&text, out);
            return;
        }
        let mut r = content.reader();
        let Ok(mut blocks) = r.array() else { return };
        while let Ok(true) = blocks.next(&mut r) {
            let Ok(block) = r.value() else { break };
            let block = Obj::of(block).unwrap_or_default();
            match block.str("type").as_deref() {
                Some("text") => self.say(&block.str("text").unwrap_or_default(), out),
                Some("thinking") => {}
                other => out.push(AgentEvent::Unknown(format!(
                    "assistant content block of type {}",
                    clean_id(other.unwrap_or("(none)"))
                ))),
            }
        }
    }

    fn say(&mut self, text: &str, out: &mut Vec<AgentEvent>) {
        self.text.feed(text.as_bytes(), out);
        self.text.finish(out);
    }

    fn tool_call(
        &mut self,
        obj: &Obj<'_>,
        completed: bool,
        line: &[u8],
        out: &mut Vec<AgentEvent>,
    ) {
        let call = obj.obj("tool_call").unwrap_or_default();
        let Some((key, body)) = call
            .members()
            .find(|(key, _)| key.ends_with(b"ToolCall"))
            .and_then(|(key, body)| Some((key, Obj::of(body)?)))
        else {
            out.push(AgentEvent::Unknown(start_of(line)));
            return;
        };
        let key = String::from_utf8_lossy(key);
        let name = key.strip_suffix("ToolCall").unwrap_or(&key);
        let id = obj.str("call_id").unwrap_or_default();
        let seen = self.started.iter().position(|s| *s == id);
        if seen.is_none() {
            let summary = body
                .get("args")
                .and_then(|args| ToolInput::read(&mut args.reader()).ok())
                .map(|input| input.summary(name, self.cwd.as_deref()))
                .unwrap_or_default();
            out.push(AgentEvent::ToolCall {
                name: short(&sanitize(name)),
                summary: relative(&summary, self.cwd.as_deref()),
            });
        }
        if !completed {
            if seen.is_none() {
                self.started.push(id.into_owned());
            }
            return;
        }
        if let Some(at) = seen {
            self.started.swap_remove(at);
        }
        let (summary, is_error) = body.obj("result").map(|r| outcome(&r)).unwrap_or_default();
        out.push(AgentEvent::ToolResult { summary, is_error });
    }

    fn result(&mut self, obj: &Obj<'_>, out: &mut Vec<AgentEvent>) {
        let usage = obj.obj("usage");
        let count = |key: &str| usage.as_ref().and_then(|u| u.u64(key));
        out.push(AgentEvent::Usage(Usage {
            cost_usd: None,
            input_tokens: count("inputTokens"),
            output_tokens: count("outputTokens"),
        }));
        let result = obj.str("result");
        if obj.bool("is_error") == Some(true) {
            let message = match result.as_deref().map(first_line) {
                Some(line) if !line.is_empty() => line,
                _ => format!(
                    "the agent reported an error ({})",
                    clean_id(&obj.str("subtype").unwrap_or_default())
                ),
            };
            if let Some(event) = rate_limit::from_message(&message) {
                out.push(event);
            }
            out.push(AgentEvent::Error(message));
        }
        self.started.clear();
        out.push(AgentEvent::TurnEnd {
            result: result.map(|r| sanitize(&r)),
        });
    }
}

/// A tool's `result`: `{"success": {...}}`, `{"rejected": {...}}`, `{"error": ...}`.
fn outcome(result: &Obj<'_>) -> (String, bool) {
    if let Some(success) = result.obj("success") {
        let exit = success.get("exitCode").and_then(Raw::f64);
        let summary = [
            "message",
            "stdout",
            "output",
            "content",
            "interleavedOutput",
            "stderr",
        ]
        .iter()
        .filter_map(|key| success.get(key).and_then(first_line_of_string))
        .find(|s| !s.is_empty())
        .unwrap_or_default();
        return (summary, exit.is_some_and(|c| c != 0.0));
    }
    if let Some(rejected) = result.obj("rejected") {
        let reason = rejected.str("reason").map(|r| first_line(&r));
        return (
            match reason {
                Some(reason) if !reason.is_empty() => format!("rejected: {reason}"),
                _ => "rejected".to_owned(),
            },
            true,
        );
    }
    for key in ["error", "failure"] {
        if let Some(raw) = result.get(key) {
            let message = raw
                .str()
                .or_else(|| Obj::of(raw).and_then(|e| e.str("message").or_else(|| e.str("error"))))
                .map(|m| first_line(&m))
                .unwrap_or_else(|| key.to_owned());
            return (message, true);
        }
    }
    (String::new(), false)
}
