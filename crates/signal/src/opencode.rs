//! opencode's `opencode run --format json` stream.
//!
//! One JSON object per line, `{type, timestamp, sessionID, part | error}` (see
//! `fixtures/streams/opencode/`; source anomalyco/opencode `packages/opencode/src/cli/cmd/run.ts`):
//!
//! | line | events |
//! | --- | --- |
//! | any line with a new `sessionID` | `SessionId`, first |
//! | `text` (a whole text part) | its lines as `Text`, plus `Signal`s |
//! | `tool_use` (sent once the tool has finished) | `ToolCall`, then `ToolResult` (`is_error` when `state.status` is `error`) |
//! | `step_finish` | `Usage` (that step's `cost` and `tokens`); `TurnEnd` unless `reason` is `tool-calls` |
//! | `error` | `RateLimited` (HTTP 429, with `retry-after`, or a message that reads like one), then `Error` |
//! | `done` (newer versions) | `TurnEnd`, unless a `step_finish` already ended the turn |
//! | `step_start`, `reasoning` | nothing |
//! | anything else | `Unknown` |
//!
//! Usage is per step, so the `Usage` events of a run add up to its cost and tokens. Input
//! tokens are `tokens.input` (cache reads are counted apart by opencode and not included).

use std::time::Duration;

use crate::json::{JsonFormat, Obj, clean_id, start_of};
use crate::rate_limit;
use crate::sanitize::sanitize;
use crate::summary::{ToolInput, first_line, first_line_of_string};
use crate::text::TextScanner;
use crate::{AgentEvent, Usage};

/// Decodes `opencode run --format json` output, one line at a time.
#[derive(Debug, Default)]
pub(crate) struct Opencode {
    text: TextScanner,
    session: Option<String>,
    /// A step has run since the turn last ended.
    turn_open: bool,
    /// The last text part, for `TurnEnd`.
    last_text: Option<String>,
}

impl JsonFormat for Opencode {
    fn object(&mut self, line: &[u8], out: &mut Vec<AgentEvent>) {
        let Some(obj) = Obj::line_or_report(line, out) else {
            return;
        };
        if let Some(id) = obj.str("sessionID")
            && self.session.as_deref() != Some(&id)
        {
            out.push(AgentEvent::SessionId(clean_id(&id)));
            self.session = Some(id.into_owned());
        }
        let kind = obj.str("type").unwrap_or_default();
        let part = obj.obj("part");
        let part = match (kind.as_ref(), part) {
            (_, Some(part)) => part,
            ("text" | "tool_use" | "step_finish", None) => {
                out.push(AgentEvent::Unknown(start_of(line)));
                return;
            }
            (_, None) => Obj::default(),
        };
        match kind.as_ref() {
            "step_start" => self.turn_open = true,
            "reasoning" => {}
            "text" => {
                let text = part.str("text").unwrap_or_default();
                self.text.feed(text.as_bytes(), out);
                self.text.finish(out);
                // Kept as it came: only the last text of a turn is shown, sanitized then.
                self.last_text = Some(text.into_owned());
            }
            "tool_use" => tool_use(&part, out),
            "step_finish" => {
                let tokens = part.obj("tokens");
                let count = |key: &str| tokens.as_ref().and_then(|t| t.u64(key));
                out.push(AgentEvent::Usage(Usage {
                    cost_usd: part.f64("cost"),
                    input_tokens: count("input"),
                    output_tokens: count("output"),
                }));
                if part.str("reason").as_deref() != Some("tool-calls") {
                    self.end_turn(out);
                }
            }
            "error" => error(&obj, out),
            "done" => {
                if self.turn_open {
                    self.end_turn(out);
                }
            }
            _ => out.push(AgentEvent::Unknown(start_of(line))),
        }
    }
}

impl Opencode {
    fn end_turn(&mut self, out: &mut Vec<AgentEvent>) {
        self.turn_open = false;
        out.push(AgentEvent::TurnEnd {
            result: self.last_text.take().map(|t| sanitize(&t)),
        });
    }
}

fn tool_use(part: &Obj<'_>, out: &mut Vec<AgentEvent>) {
    let name = part.str("tool").unwrap_or_default();
    let state = part.obj("state").unwrap_or_default();
    let mut summary = state
        .get("input")
        .and_then(|input| ToolInput::read(&mut input.reader()).ok())
        .map(|input| input.summary(&name, None))
        .unwrap_or_default();
    if summary.is_empty() {
        summary = state
            .str("title")
            .map(|t| first_line(&t))
            .unwrap_or_default();
    }
    out.push(AgentEvent::ToolCall {
        name: clean_id(&name),
        summary,
    });
    let is_error = state.str("status").as_deref() == Some("error");
    let result = if is_error {
        state.get("error").and_then(first_line_of_string)
    } else {
        state.get("output").and_then(first_line_of_string)
    };
    out.push(AgentEvent::ToolResult {
        summary: result.unwrap_or_default(),
        is_error,
    });
}

/// An `error` line: `{name, data: {message, statusCode, responseHeaders}}`.
fn error(obj: &Obj<'_>, out: &mut Vec<AgentEvent>) {
    let error = obj.obj("error").unwrap_or_default();
    let data = error.obj("data").unwrap_or_default();
    let name = error.str("name").unwrap_or_default();
    let message = match data.str("message") {
        Some(message) if !message.trim().is_empty() => first_line(&message),
        _ if !name.is_empty() => first_line(&name),
        _ => "the agent reported an error".to_owned(),
    };
    let status = data.u64("statusCode");
    if status == Some(429) {
        let retry_after = data
            .obj("responseHeaders")
            .and_then(|headers| retry_after_header(&headers))
            .or_else(|| rate_limit::retry_after_in(&message));
        out.push(AgentEvent::RateLimited {
            retry_after,
            resets_at: None,
            message: message.clone(),
        });
    } else if let Some(event) = rate_limit::from_message(&message) {
        out.push(event);
    }
    let message = match status {
        Some(status) => format!("{message} (HTTP {status})"),
        None => message,
    };
    out.push(AgentEvent::Error(message));
}

/// `retry-after-ms` or `retry-after` (seconds) from response headers, any case.
fn retry_after_header(headers: &Obj<'_>) -> Option<Duration> {
    let mut found = None;
    for (key, value) in headers.members() {
        let key = String::from_utf8_lossy(key).to_ascii_lowercase();
        let Some(value) = value.str() else { continue };
        let number = value
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite() && *n >= 0.0);
        match (key.as_str(), number) {
            ("retry-after-ms", Some(ms)) => return Some(Duration::from_secs_f64(ms / 1000.0)),
            ("retry-after", Some(secs)) => found = Some(Duration::from_secs_f64(secs)),
            _ => {}
        }
    }
    found
}
