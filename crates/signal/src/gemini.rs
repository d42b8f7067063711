//! Gemini CLI's `-o stream-json` stream.
//!
//! One JSON object per line (see `fixtures/streams/gemini/`; schema in google-gemini/gemini-cli
//! `packages/core/src/output/types.ts`):
//!
//! | line | events |
//! | --- | --- |
//! | `init` | `SessionId` |
//! | `message` `role: assistant` | its text, as `Text` lines plus `Signal`s (see below) |
//! | `message` `role: user` | nothing: the prompt, echoed |
//! | `tool_use` | `ToolCall` |
//! | `tool_result` | `ToolResult` (`is_error` unless `status` is `success`) |
//! | `error` | `RateLimited` if it reads like one; else `Error` (severity `error`) or `Unknown` (a warning) |
//! | `result` | `Usage` (from `stats`), then `RateLimited` and `Error` when `status` is `error`, then `TurnEnd` |
//! | anything else | `Unknown` |
//!
//! **Deltas.** Assistant text arrives in pieces (`"delta": true`), cut anywhere: a signal can
//! be split across two events (`<ral` + `ph>DONE</ralph>` was captured). The pieces of one
//! message are fed to one continuing text scanner, so a line, and its signal, is complete when
//! its newline arrives or when the message ends. A message ends at the next line that is not
//! an assistant delta (a tool call, the result), at a message without `delta`, or at the end
//! of the stream. So each signal is found exactly once, however the text was cut.
//!
//! `result` has no final text: `TurnEnd` carries the text of the last assistant message.
//! Tokens are `stats.input_tokens` (cached input included) and `stats.output_tokens`; there
//! is no cost.

use std::borrow::Cow;

use crate::json::{JsonFormat, Obj, clean_id, malformed, start_of};
use crate::rate_limit;
use crate::sanitize::{cut, display_line, floor_char_boundary, sanitize};
use crate::summary::{ToolInput, first_line, first_line_of_string};
use crate::text::TextScanner;
use crate::{AgentEvent, LINE_CAP, Usage};

/// Decodes `gemini -o stream-json` output, one line at a time.
#[derive(Debug, Default)]
pub(crate) struct Gemini {
    /// The assistant message being streamed, if one is open.
    text: TextScanner,
    open: bool,
    /// Deltas of the open message not yet scanned: the deltas of one read are scanned in one
    /// piece, as the lines of plain text are (a scan per delta cost a thousand instructions).
    unscanned: String,
    /// The text of the open (or last) assistant message, for `TurnEnd`, at most
    /// [`LINE_CAP`] bytes.
    message: String,
    /// Bytes of the message beyond what `message` keeps.
    message_unseen: u64,
}

impl JsonFormat for Gemini {
    fn object(&mut self, line: &[u8], out: &mut Vec<AgentEvent>) {
        let obj = match Obj::line(line) {
            Ok(obj) => obj,
            Err(err) => {
                // The open message ended before this line.
                self.close(out);
                out.push(malformed(line, err));
                return;
            }
        };
        let kind = obj.tag("type").unwrap_or_default();
        if *kind == *b"message" && obj.is("role", "assistant") {
            let content = obj.str("content").unwrap_or_default();
            self.delta(&content, out);
            if obj.bool("delta") != Some(true) {
                self.close(out);
            }
            return;
        }
        self.close(out);
        match kind.as_ref() {
            b"init" => {
                if let Some(id) = obj.str("session_id") {
                    out.push(AgentEvent::SessionId(clean_id(&id)));
                }
            }
            b"message" => {}
            b"tool_use" => {
                let name = obj.str("tool_name").unwrap_or_default();
                let summary = obj
                    .get("parameters")
                    .and_then(|p| ToolInput::read(&mut p.reader()).ok())
                    .map(|input| input.summary(&name, None))
                    .unwrap_or_default();
                out.push(AgentEvent::ToolCall {
                    name: clean_id(&name),
                    summary,
                });
            }
            b"tool_result" => {
                let is_error = !obj.is("status", "success");
                let output = obj.get("output").and_then(first_line_of_string);
                let error = error_message(&obj);
                let summary = match (output, error) {
                    (Some(output), _) if !output.is_empty() => output,
                    (_, Some(error)) => error,
                    (output, None) => output.unwrap_or_default(),
                };
                out.push(AgentEvent::ToolResult { summary, is_error });
            }
            b"error" => {
                let message = first_line(&obj.str("message").unwrap_or_default());
                if let Some(event) = rate_limit::from_message(&message) {
                    out.push(event);
                } else if obj.str("severity").as_deref() == Some("error") {
                    out.push(AgentEvent::Error(message));
                } else {
                    out.push(AgentEvent::Unknown(start_of(line)));
                }
            }
            b"result" => self.result(&obj, out),
            _ => out.push(AgentEvent::Unknown(start_of(line))),
        }
    }

    fn not_json(&mut self, line: &[u8], out: &mut Vec<AgentEvent>) {
        self.close(out);
        out.push(AgentEvent::Text(display_line(line, 0)));
    }

    fn end(&mut self, out: &mut Vec<AgentEvent>) {
        self.close(out);
        self.message.clear();
        self.message_unseen = 0;
    }

    fn chunk_end(&mut self, out: &mut Vec<AgentEvent>) {
        self.scan(out);
    }

    fn buffered_len(&self) -> usize {
        self.text.buffered_len() + self.message.len() + self.unscanned.len()
    }
}

impl Gemini {
    /// Adds a piece of assistant text to the open message, opening one if needed.
    fn delta(&mut self, content: &str, out: &mut Vec<AgentEvent>) {
        if !self.open {
            self.open = true;
            self.message.clear();
            self.message_unseen = 0;
        }
        if self.unscanned.len() + content.len() > LINE_CAP {
            self.scan(out);
        }
        self.unscanned.push_str(content);
        let room = LINE_CAP.saturating_sub(self.message.len());
        if content.len() <= room {
            self.message.push_str(content);
        } else {
            let keep = floor_char_boundary(content, room);
            self.message.push_str(&content[..keep]);
            self.message_unseen += (content.len() - keep) as u64;
        }
    }

    /// Scans the deltas held so far.
    fn scan(&mut self, out: &mut Vec<AgentEvent>) {
        if !self.unscanned.is_empty() {
            self.text.feed(self.unscanned.as_bytes(), out);
            self.unscanned.clear();
        }
    }

    /// Ends the open assistant message: its last, unterminated line is scanned now.
    fn close(&mut self, out: &mut Vec<AgentEvent>) {
        if std::mem::take(&mut self.open) {
            self.scan(out);
            self.text.finish(out);
        }
    }

    fn result(&mut self, obj: &Obj<'_>, out: &mut Vec<AgentEvent>) {
        let stats = obj.obj("stats");
        let stat = |key: &str| stats.as_ref().and_then(|s| s.u64(key));
        out.push(AgentEvent::Usage(Usage {
            cost_usd: None,
            input_tokens: stat("input_tokens"),
            output_tokens: stat("output_tokens"),
        }));
        if obj.is("status", "error") {
            let message = error_message(obj).unwrap_or_else(|| "the turn failed".to_owned());
            if let Some(event) = rate_limit::from_message(&message) {
                out.push(event);
            }
            out.push(AgentEvent::Error(message));
        }
        let result = (!self.message.is_empty()).then(|| {
            let text = sanitize(&self.message);
            cut(Cow::Owned(text), LINE_CAP, self.message_unseen)
        });
        self.message.clear();
        self.message_unseen = 0;
        out.push(AgentEvent::TurnEnd { result });
    }
}

/// `error.message` (with `error.type` when it says more than "unknown"), as one line.
fn error_message(obj: &Obj<'_>) -> Option<String> {
    let error = obj.obj("error")?;
    let message = first_line(&error.str("message")?);
    Some(match error.str("type").as_deref() {
        None | Some("" | "unknown") => message,
        Some(kind) => format!("{}: {message}", clean_id(kind)),
    })
}
