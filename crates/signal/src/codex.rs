//! OpenAI Codex CLI's `codex exec --json` stream.
//!
//! One JSON object per line (see `fixtures/streams/codex/`; schema in openai/codex
//! `codex-rs/exec/src/exec_events.rs`):
//!
//! | line | events |
//! | --- | --- |
//! | `thread.started` | `SessionId` (the thread id, which `codex exec resume` takes) |
//! | `item.completed` `agent_message` | its lines as `Text`, plus `Signal`s |
//! | `item.started` of a tool item (`command_execution`, `file_change`, `mcp_tool_call`, `web_search`, `todo_list`, `collab_tool_call`) | `ToolCall` |
//! | `item.completed` of a tool item | `ToolCall` if it was not started, then `ToolResult` (commands, file changes, MCP calls) |
//! | `item.completed` `plan` | its lines as `Text`, not scanned |
//! | `item.completed` `error` (a non-fatal warning) | `RateLimited` if it reads like one, else `Unknown` |
//! | `error` (a retry notice: "Reconnecting... 2/5") | `RateLimited` if it reads like one, else `Unknown` |
//! | `turn.completed` | `Usage` (what this turn added), `TurnEnd` with the last agent message |
//! | `turn.failed` | `RateLimited` if it reads like one (and was not just reported), `Error`, `TurnEnd` |
//! | `turn.started`, `item.updated`, `reasoning` items | nothing |
//! | anything else (`item.plan.delta`, `request_user_input`, …) | `Unknown` |
//!
//! Only `turn.failed` is fatal: a top-level `error` is a notice the CLI may recover from.
//!
//! **Tokens.** Codex reports, on `turn.completed`, the thread's *cumulative* totals (history
//! of earlier runs included when the thread was resumed). The `Usage` of a turn is what it
//! added since the previous `turn.completed` of the same thread in this stream; the first
//! turn of a stream is reported as the totals so far, since the stream does not say what an
//! earlier run used. So on a fresh thread every figure is exact; on a resumed thread the first
//! figure also holds the earlier runs' tokens, which is exactly the sum of the `Usage` those
//! runs reported: a caller that wants per-run figures subtracts it. Input tokens are Codex's
//! `input_tokens` (cached input included). There is no cost.

use std::borrow::Cow;

use crate::json::{JsonFormat, Obj, clean_id, malformed, show_lines, start_of};
use crate::rate_limit;
use crate::sanitize::sanitize;
use crate::skim::Raw;
use crate::summary::{ToolInput, first_line, first_line_of_string, short, tool_output};
use crate::text::TextScanner;
use crate::{AgentEvent, Usage};

/// Decodes `codex exec --json` output, one line at a time.
#[derive(Debug, Default)]
pub(crate) struct Codex {
    text: TextScanner,
    thread: Option<String>,
    /// The thread's input and output token totals at the last `turn.completed`.
    totals: Option<(u64, u64)>,
    /// Ids of tool items whose `ToolCall` was shown at `item.started`.
    started: Vec<String>,
    /// The text of the turn's last agent message, for `TurnEnd`: kept as it came, and
    /// sanitized only if it is still the last one when the turn ends.
    last_message: Option<String>,
    /// The last rate-limit message reported, so `turn.failed` repeating it is not reported
    /// twice.
    rate_limited: Option<String>,
}

impl JsonFormat for Codex {
    fn object(&mut self, line: &[u8], out: &mut Vec<AgentEvent>) {
        // The item, when there is one, is most of the line: it is read in the same pass.
        let (obj, item) = match Obj::line_with(line, "item") {
            Ok(read) => read,
            Err(err) => {
                out.push(malformed(line, err));
                return;
            }
        };
        match obj.tag("type").as_deref().unwrap_or_default() {
            b"thread.started" => {
                if let Some(id) = obj.str("thread_id") {
                    if self.thread.as_deref() != Some(&id) {
                        self.totals = None;
                        self.thread = Some(id.clone().into_owned());
                    }
                    out.push(AgentEvent::SessionId(clean_id(&id)));
                }
            }
            b"turn.started" | b"item.updated" => {}
            b"item.started" => self.item(item, false, line, out),
            b"item.completed" => self.item(item, true, line, out),
            b"turn.completed" => self.turn_completed(&obj, out),
            b"turn.failed" => {
                let message = obj
                    .obj("error")
                    .and_then(|e| e.str("message").map(Cow::into_owned))
                    .unwrap_or_else(|| "the turn failed".to_owned());
                let message = first_line(&message);
                if self.rate_limited.as_ref() != Some(&message)
                    && let Some(event) = rate_limit::from_message(&message)
                {
                    out.push(event);
                }
                out.push(AgentEvent::Error(message));
                self.end_turn(None, out);
            }
            b"error" => {
                let message = obj.str("message").unwrap_or_default();
                self.notice(&message, line, out);
            }
            _ => out.push(AgentEvent::Unknown(start_of(line))),
        }
    }
}

impl Codex {
    fn item(
        &mut self,
        item: Option<Obj<'_>>,
        completed: bool,
        line: &[u8],
        out: &mut Vec<AgentEvent>,
    ) {
        let Some(item) = item else {
            out.push(AgentEvent::Unknown(start_of(line)));
            return;
        };
        let kind = item.str("type").unwrap_or_default();
        match kind.as_ref() {
            "agent_message" if completed => {
                let text = item.str("text").unwrap_or_default();
                self.text.feed(text.as_bytes(), out);
                self.text.finish(out);
                self.last_message = Some(text.into_owned());
            }
            "plan" if completed => show_lines(&item.str("text").unwrap_or_default(), out),
            "agent_message" | "plan" | "reasoning" => {}
            "error" => {
                if completed {
                    self.notice(&item.str("message").unwrap_or_default(), line, out);
                }
            }
            "command_execution" | "file_change" | "mcp_tool_call" | "web_search" | "todo_list"
            | "collab_tool_call" => {
                let id = item.str("id").unwrap_or_default();
                let seen = self.started.iter().position(|s| *s == id);
                if seen.is_none() {
                    out.push(tool_call(&kind, &item));
                }
                if completed {
                    if let Some(at) = seen {
                        self.started.swap_remove(at);
                    }
                    if let Some(result) = tool_result(&kind, &item) {
                        out.push(result);
                    }
                } else if seen.is_none() {
                    self.started.push(id.into_owned());
                }
            }
            other => out.push(AgentEvent::Unknown(format!(
                "item of type {}",
                clean_id(if other.is_empty() { "(none)" } else { other })
            ))),
        }
    }

    /// An `error` line or item: a notice, unless it is a rate limit.
    fn notice(&mut self, message: &str, line: &[u8], out: &mut Vec<AgentEvent>) {
        match rate_limit::from_message(message) {
            Some(event) => {
                self.rate_limited = Some(first_line(message));
                out.push(event);
            }
            None => out.push(AgentEvent::Unknown(start_of(line))),
        }
    }

    fn turn_completed(&mut self, obj: &Obj<'_>, out: &mut Vec<AgentEvent>) {
        let usage = obj.obj("usage");
        let total = |key: &str| usage.as_ref().and_then(|u| u.u64(key));
        let (input, output) = (total("input_tokens"), total("output_tokens"));
        let (before_in, before_out) = self.totals.unwrap_or((0, 0));
        out.push(AgentEvent::Usage(Usage {
            cost_usd: None,
            input_tokens: input.map(|n| n.saturating_sub(before_in)),
            output_tokens: output.map(|n| n.saturating_sub(before_out)),
        }));
        if input.is_some() || output.is_some() {
            self.totals = Some((input.unwrap_or(before_in), output.unwrap_or(before_out)));
        }
        let result = self.last_message.as_deref().map(sanitize);
        self.end_turn(result, out);
    }

    fn end_turn(&mut self, result: Option<String>, out: &mut Vec<AgentEvent>) {
        self.started.clear();
        self.last_message = None;
        self.rate_limited = None;
        out.push(AgentEvent::TurnEnd { result });
    }
}

/// The `ToolCall` for a tool item.
fn tool_call(kind: &str, item: &Obj<'_>) -> AgentEvent {
    let field = |key: &str| item.str(key).map(|s| first_line(&s)).unwrap_or_default();
    let (name, summary) = match kind {
        "command_execution" => (
            "shell".to_owned(),
            first_line(&unwrap_shell(&item.str("command").unwrap_or_default())),
        ),
        "file_change" => ("file_change".to_owned(), file_changes(item)),
        "mcp_tool_call" => {
            let tool = format!("{}/{}", field("server"), field("tool"));
            let summary = item
                .get("arguments")
                .and_then(|args| ToolInput::read(&mut args.reader()).ok())
                .map(|input| input.summary(&tool, None))
                .unwrap_or_default();
            (tool, summary)
        }
        "web_search" => ("web_search".to_owned(), field("query")),
        "todo_list" => {
            let count = item.get("items").map_or(0, count_items);
            ("todo_list".to_owned(), format!("{count} items"))
        }
        _ => (kind.to_owned(), field("tool")),
    };
    AgentEvent::ToolCall {
        name: clean_id(&name),
        summary,
    }
}

/// The `ToolResult` of a completed tool item, for the kinds that have one.
fn tool_result(kind: &str, item: &Obj<'_>) -> Option<AgentEvent> {
    let status = item.str("status").unwrap_or_default();
    let failed = matches!(status.as_ref(), "failed" | "declined");
    let (summary, is_error) = match kind {
        "command_execution" => {
            let exit = item.get("exit_code").and_then(Raw::f64);
            let output = item
                .get("aggregated_output")
                .and_then(first_line_of_string)
                .unwrap_or_default();
            let summary = match (output.is_empty(), exit) {
                (true, Some(code)) if code != 0.0 => format!("exit code {code}"),
                _ => output,
            };
            (summary, failed || exit.is_some_and(|c| c != 0.0))
        }
        "file_change" => (short(&sanitize(&status)), failed),
        "mcp_tool_call" => {
            let error = item
                .obj("error")
                .and_then(|e| e.str("message").map(|m| first_line(&m)));
            let output = item
                .obj("result")
                .and_then(|r| r.get("content"))
                .and_then(tool_output);
            let is_error = failed || error.is_some();
            (error.or(output).unwrap_or_default(), is_error)
        }
        _ => return None,
    };
    Some(AgentEvent::ToolResult { summary, is_error })
}

/// "src/a.rs (+2 more)" for a `file_change` item's `changes`.
fn file_changes(item: &Obj<'_>) -> String {
    let Some(changes) = item.get("changes") else {
        return String::new();
    };
    let mut r = changes.reader();
    let (mut first, mut count) = (None, 0usize);
    if let Ok(mut entries) = r.array() {
        while let Ok(true) = entries.next(&mut r) {
            let Ok(entry) = r.value() else { break };
            count += 1;
            if first.is_none() {
                first = Obj::of(entry).and_then(|e| e.str("path").map(|p| first_line(&p)));
            }
        }
    }
    match (first, count) {
        (Some(path), 1) => path,
        (Some(path), n) => format!("{path} (+{} more)", n - 1),
        (None, _) => String::new(),
    }
}

/// The number of elements of an array value.
fn count_items(raw: Raw<'_>) -> usize {
    let mut r = raw.reader();
    let mut count = 0;
    if let Ok(mut items) = r.array() {
        while let Ok(true) = items.next(&mut r) {
            if r.skip().is_err() {
                break;
            }
            count += 1;
        }
    }
    count
}

/// The command inside Codex's shell wrapper: `/bin/bash -lc 'cargo test'` is `cargo test`.
fn unwrap_shell(command: &str) -> Cow<'_, str> {
    let inner = [
        "/bin/bash -lc ",
        "bash -lc ",
        "/bin/zsh -lc ",
        "zsh -lc ",
        "/bin/sh -c ",
        "sh -c ",
    ]
    .iter()
    .find_map(|prefix| command.strip_prefix(prefix));
    let Some(inner) = inner else {
        return Cow::Borrowed(command);
    };
    match inner.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')) {
        // `'\''` is how a quote is written inside single quotes.
        Some(body) => Cow::Owned(body.replace(r"'\''", "'")),
        None => Cow::Borrowed(inner),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_wrappers_are_removed_from_command_summaries() {
        assert_eq!(unwrap_shell("/bin/bash -lc 'echo hi'"), "echo hi");
        assert_eq!(unwrap_shell(r"bash -lc 'echo '\''q'\'''"), "echo 'q'");
        assert_eq!(unwrap_shell("/bin/bash -lc ls"), "ls");
        assert_eq!(unwrap_shell("cargo test"), "cargo test");
    }
}
