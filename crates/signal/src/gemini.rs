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

use memchr::memchr;

use crate::json::{JsonFormat, Obj, clean_id, malformed, start_of};
use crate::rate_limit;
use crate::sanitize::{cut, display_line, floor_char_boundary, sanitize};
use crate::skim::{Raw, Reader};
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
    unscanned: Vec<u8>,
    /// The text (UTF-8) of the open (or last) assistant message, for `TurnEnd`, at most
    /// [`LINE_CAP`] bytes.
    message: Vec<u8>,
    /// Bytes of the message beyond what `message` keeps.
    message_unseen: u64,
    /// Where a delta with escapes is decoded, kept from one line to the next.
    decoded: Vec<u8>,
}

/// The most a kept [`Gemini::decoded`] buffer may hold.
const DECODED_KEEP: usize = 64 * 1024;

impl JsonFormat for Gemini {
    fn object(&mut self, line: &[u8], out: &mut Vec<AgentEvent>) {
        if let Some(content) = laid_out_delta(line) {
            self.delta(Some(content), out);
            return;
        }
        let mut obj = Members::default();
        if let Err(err) = Obj::visit_line(line, |key, value| obj.see(key, value)) {
            // The open message ended before this line.
            self.close(out);
            out.push(malformed(line, err));
            return;
        }
        let kind = obj.kind.and_then(Raw::tag).unwrap_or_default();
        if *kind == *b"message" && is(obj.role, "assistant") {
            self.delta(obj.content, out);
            if obj.delta.and_then(Raw::bool) != Some(true) {
                self.close(out);
            }
            return;
        }
        self.close(out);
        match kind.as_ref() {
            b"init" => {
                if let Some(id) = obj.session_id.and_then(Raw::str) {
                    out.push(AgentEvent::SessionId(clean_id(&id)));
                }
            }
            b"message" => {}
            b"tool_use" => {
                let name = obj.tool_name.and_then(Raw::str).unwrap_or_default();
                let summary = obj
                    .parameters
                    .and_then(|p| ToolInput::read(&mut p.reader()).ok())
                    .map(|input| input.summary(&name, None))
                    .unwrap_or_default();
                out.push(AgentEvent::ToolCall {
                    name: clean_id(&name),
                    summary,
                });
            }
            b"tool_result" => {
                let is_error = !is(obj.status, "success");
                let output = obj.output.and_then(first_line_of_string);
                let error = error_message(&obj);
                let summary = match (output, error) {
                    (Some(output), _) if !output.is_empty() => output,
                    (_, Some(error)) => error,
                    (output, None) => output.unwrap_or_default(),
                };
                out.push(AgentEvent::ToolResult { summary, is_error });
            }
            b"error" => {
                let message = first_line(&obj.message.and_then(Raw::str).unwrap_or_default());
                if let Some(event) = rate_limit::from_message(&message) {
                    out.push(event);
                } else if obj.severity.and_then(Raw::str).as_deref() == Some("error") {
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
    /// Adds a piece of assistant text, the `content` of a line, to the open message, opening
    /// one if needed.
    fn delta(&mut self, content: Option<Raw<'_>>, out: &mut Vec<AgentEvent>) {
        let mut buf = std::mem::take(&mut self.decoded);
        let text = content.and_then(|c| c.text_in(&mut buf));
        self.push_text(text.unwrap_or_default(), out);
        // A huge delta's buffer is not kept for the rest of the run.
        if buf.capacity() <= DECODED_KEEP {
            buf.clear();
            self.decoded = buf;
        }
    }

    /// Adds a piece of assistant text (UTF-8) to the open message, opening one if needed.
    fn push_text(&mut self, content: &[u8], out: &mut Vec<AgentEvent>) {
        if !self.open {
            self.open = true;
            self.message.clear();
            self.message_unseen = 0;
        }
        if self.unscanned.len() + content.len() > LINE_CAP {
            self.scan(out);
        }
        self.unscanned.extend_from_slice(content);
        let room = LINE_CAP.saturating_sub(self.message.len());
        if content.len() <= room {
            self.message.extend_from_slice(content);
        } else {
            // `content` is UTF-8, and `message` is kept so.
            let keep = floor_char_boundary(content, room);
            self.message.extend_from_slice(&content[..keep]);
            self.message_unseen += (content.len() - keep) as u64;
        }
    }

    /// Scans the deltas held so far.
    fn scan(&mut self, out: &mut Vec<AgentEvent>) {
        if !self.unscanned.is_empty() {
            self.text.feed(&self.unscanned, out);
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

    fn result(&mut self, obj: &Members<'_>, out: &mut Vec<AgentEvent>) {
        let stats = obj.stats.and_then(Obj::of);
        let stat = |key: &str| stats.as_ref().and_then(|s| s.u64(key));
        out.push(AgentEvent::Usage(Usage {
            cost_usd: None,
            input_tokens: stat("input_tokens"),
            output_tokens: stat("output_tokens"),
        }));
        if is(obj.status, "error") {
            let message = error_message(obj).unwrap_or_else(|| "the turn failed".to_owned());
            if let Some(event) = rate_limit::from_message(&message) {
                out.push(event);
            }
            out.push(AgentEvent::Error(message));
        }
        let result = (!self.message.is_empty()).then(|| {
            // `message` is whole chars of UTF-8 deltas: validated with SIMD, as it can be long.
            let text = match simdutf8::basic::from_utf8(&self.message) {
                Ok(text) => sanitize(text),
                Err(_) => sanitize(&String::from_utf8_lossy(&self.message)),
            };
            cut(Cow::Owned(text), LINE_CAP, self.message_unseen)
        });
        self.message.clear();
        self.message_unseen = 0;
        out.push(AgentEvent::TurnEnd { result });
    }
}

/// The `content` of a line that is an assistant delta laid out exactly as gemini-cli writes
/// one (`JSON.stringify` of an object literal, so its members always come in this order):
/// most lines are, and they are read without looking their keys up. `None` for any other
/// line (or layout), which is read member by member, to the same effect.
#[inline]
fn laid_out_delta(line: &[u8]) -> Option<Raw<'_>> {
    let mut r = Reader::new(line);
    if !r.literal(br#"{"type":"message","timestamp":"#) {
        return None;
    }
    r.skip().ok()?;
    if !r.literal(br#","role":"assistant","content":"#) {
        return None;
    }
    // The content ends where the line's tail starts if no quote comes before that one and
    // it is not escaped: one search for a quote, not a walk over every quote and escape.
    let rest = r.rest();
    if let Some(body) = rest
        .strip_prefix(b"\"")
        .and_then(|rest| rest.strip_suffix(br#"","delta":true}"#))
        && memchr(b'"', body).is_none()
        && body.iter().rev().take_while(|&&b| b == b'\\').count() % 2 == 0
    {
        return Some(Raw::new(&rest[..body.len() + 2]));
    }
    let content = r.value().ok()?;
    (r.literal(br#","delta":true}"#) && r.end().is_ok()).then_some(content)
}

/// The members of a line that Gemini reads, each the first of its key (as [`Obj::get`]
/// gives), picked out as the line is read: most lines are small deltas, and looking their
/// keys up one by one cost more than reading them.
#[derive(Debug, Default)]
struct Members<'a> {
    kind: Option<Raw<'a>>,
    role: Option<Raw<'a>>,
    content: Option<Raw<'a>>,
    delta: Option<Raw<'a>>,
    session_id: Option<Raw<'a>>,
    tool_name: Option<Raw<'a>>,
    parameters: Option<Raw<'a>>,
    status: Option<Raw<'a>>,
    output: Option<Raw<'a>>,
    error: Option<Raw<'a>>,
    message: Option<Raw<'a>>,
    severity: Option<Raw<'a>>,
    stats: Option<Raw<'a>>,
}

impl<'a> Members<'a> {
    #[inline]
    fn see(&mut self, key: &[u8], value: Raw<'a>) {
        let slot = match key {
            b"type" => &mut self.kind,
            b"role" => &mut self.role,
            b"content" => &mut self.content,
            b"delta" => &mut self.delta,
            b"session_id" => &mut self.session_id,
            b"tool_name" => &mut self.tool_name,
            b"parameters" => &mut self.parameters,
            b"status" => &mut self.status,
            b"output" => &mut self.output,
            b"error" => &mut self.error,
            b"message" => &mut self.message,
            b"severity" => &mut self.severity,
            b"stats" => &mut self.stats,
            _ => return,
        };
        slot.get_or_insert(value);
    }
}

/// Whether `value` is the string `want` ([`Raw::is_str`]).
fn is(value: Option<Raw<'_>>, want: &str) -> bool {
    value.is_some_and(|value| value.is_str(want))
}

/// `error.message` (with `error.type` when it says more than "unknown"), as one line.
fn error_message(obj: &Members<'_>) -> Option<String> {
    let error = Obj::of(obj.error?)?;
    let message = first_line(&error.str("message")?);
    Some(match error.str("type").as_deref() {
        None | Some("" | "unknown") => message,
        Some(kind) => format!("{}: {message}", clean_id(kind)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::JsonDecoder;

    fn events(lines: &[String]) -> Vec<AgentEvent> {
        let mut decoder = JsonDecoder::new(Box::new(Gemini::default()));
        let mut out = Vec::new();
        for line in lines {
            decoder.feed(format!("{line}\n").as_bytes(), &mut out);
        }
        decoder.finish(&mut out);
        out
    }

    /// Deltas laid out as gemini-cli writes them take a shortcut; the same members laid out
    /// any other way are read one by one. Both must give the same events.
    #[test]
    fn laid_out_deltas_read_as_any_other_layout() {
        let contents = [
            r#""plain text""#,
            r#""line\nand <ralph>DONE</ralph>\n""#,
            r#""quote \" and backslash \\ and \u00e9\ud83d\ude00""#,
            "\"caf\u{e9} \u{1F600} \\\"<ralph>\"",
            r#""""#,
            "12",
            r#"{"not":"text"}"#,
            r#""ends in a backslash \\""#,
            r#""a long delta that runs well past the thirty-two bytes looked at in place, \"quoted\"""#,
        ];
        let layouts: [fn(&str) -> String; 3] = [
            |c| {
                format!(
                    r#"{{"type":"message","timestamp":"2026-11-22T10:02:00.010Z","role":"assistant","content":{c},"delta":true}}"#
                )
            },
            |c| {
                format!(
                    r#"{{"type": "message", "timestamp": "2026-11-22T10:02:00.010Z", "role": "assistant", "content": {c}, "delta": true}}"#
                )
            },
            |c| format!(r#"{{"delta":true,"content":{c},"role":"assistant","type":"message"}}"#),
        ];
        let turn = r#"{"type":"result","status":"success","stats":{"input_tokens":1}}"#;
        for content in contents {
            let [laid_out, spaced, reordered] = layouts.map(|layout| {
                let line = layout(content);
                events(&[line.clone(), line, turn.to_owned()])
            });
            assert!(laid_out_delta(layouts[0](content).as_bytes()).is_some());
            assert!(laid_out_delta(layouts[1](content).as_bytes()).is_none());
            assert_eq!(laid_out, spaced, "{content}");
            assert_eq!(laid_out, reordered, "{content}");
        }
    }

    /// A line that starts as a laid-out delta but is not one is read, and reported, as any
    /// other line.
    #[test]
    fn broken_laid_out_deltas_are_read_the_long_way() {
        for line in [
            r#"{"type":"message","timestamp":"t","role":"assistant","content":"x","delta":true}x"#,
            r#"{"type":"message","timestamp":"t","role":"assistant","content":"x","delta":false}"#,
            r#"{"type":"message","timestamp":"t","role":"assistant","content":"x"}"#,
            r#"{"type":"message","timestamp":"t","role":"assistant","content":"x,"delta":true}"#,
            r#"{"type":"message","timestamp":,"role":"assistant","content":"x","delta":true}"#,
            r#"{"type":"message","timestamp":"t","role":"assistant","content":"x\","delta":true}"#,
        ] {
            assert!(laid_out_delta(line.as_bytes()).is_none(), "{line}");
        }
        let got = events(&[
            r#"{"type":"message","timestamp":"t","role":"assistant","content":"x","delta":true}x"#
                .to_owned(),
        ]);
        assert!(
            matches!(&got[..], [AgentEvent::Unknown(u)] if u.starts_with("malformed JSON")),
            "{got:?}"
        );
    }
}
