//! Claude Code's `--output-format stream-json --verbose` stream.
//!
//! One JSON object per line (see `fixtures/streams/claude/real-2.1.197-*.jsonl`):
//!
//! | line | events |
//! | --- | --- |
//! | `system` `init` | `SessionId` (its `cwd` also makes tool paths relative) |
//! | `assistant`, one content block each | `text`: its lines as `Text`, plus `Signal`s; `tool_use`: `ToolCall` |
//! | `assistant` with an `error` field (a synthetic API-error message) | `Error` |
//! | `user` with `tool_result` blocks | `ToolResult` |
//! | `result` | `Usage`, then `Error` if `is_error` (unless it repeats the API error just shown), then `TurnEnd` |
//! | `stream_event`, `system` `status` | nothing: partial deltas repeat the `assistant` lines |
//! | anything else (`control_request`, `rate_limit_event`, …) | `Unknown` |
//! | malformed JSON | `Unknown("malformed JSON: …")` |
//! | a line that is not a JSON object (a warning) | `Text` |
//!
//! Signals are looked for only in the main agent's assistant text. Tool results, file
//! contents, user messages, subagent text (`parent_tool_use_id` set) and the `result` text
//! (which repeats the assistant's last words) are never scanned.
//!
//! Speed: each line is read in one pass by the [`skim`](crate::skim) reader, whatever its key
//! order (2.1.330 no longer puts `type` first). Only the fields used are decoded; file bodies
//! and command output are skipped with a quote search, a tool's output is summarized from its
//! raw text, and a `user` line is read only up to its `message` (what follows is
//! `tool_use_result`, often a second copy of a file).

use std::borrow::Cow;

use crate::jsonl::{JsonLines, Line};
use crate::sanitize::{cut, display_line, sanitize};
use crate::skim::{Error, Raw, Reader};
use crate::summary::{SUMMARY_CAP, ToolInput, first_line, short, tool_output};
use crate::text::TextScanner;
use crate::{AgentEvent, DISPLAY_CAP, JSON_LINE_CAP, Usage};

/// Decodes Claude Code's stream-json output.
#[derive(Debug, Default)]
pub(crate) struct ClaudeDecoder {
    lines: JsonLines,
    state: State,
}

/// What persists between lines.
#[derive(Debug, Default)]
struct State {
    /// The agent's working directory, from `system` `init`.
    cwd: Option<String>,
    /// Scans assistant text; reused so each text block does not allocate a new one.
    text: TextScanner,
    /// The last API error reported by an assistant line, which the `result` line repeats.
    api_error: Option<String>,
}

impl ClaudeDecoder {
    /// Decodes the next chunk of the stream.
    pub(crate) fn feed(&mut self, bytes: &[u8], out: &mut Vec<AgentEvent>) {
        let state = &mut self.state;
        self.lines.feed(bytes, |line| state.line(line, out));
    }

    /// Ends the stream, decoding an unterminated last line.
    pub(crate) fn finish(&mut self, out: &mut Vec<AgentEvent>) {
        let state = &mut self.state;
        self.lines.finish(|line| state.line(line, out));
    }

    /// Bytes held between calls.
    pub(crate) fn buffered_len(&self) -> usize {
        self.lines.buffered_len()
    }
}

/// The top-level fields of a line that some line type uses, as raw JSON.
#[derive(Default)]
struct Fields<'a> {
    kind: Option<Raw<'a>>,
    subtype: Option<Raw<'a>>,
    session_id: Option<Raw<'a>>,
    cwd: Option<Raw<'a>>,
    message: Vec<Block<'a>>,
    /// Set when a subagent (Task) speaks, not the agent itself.
    parent_tool_use_id: Option<Raw<'a>>,
    /// Set on the synthetic message Claude Code prints for an API error.
    error: Option<Raw<'a>>,
    is_error: Option<Raw<'a>>,
    result: Option<Raw<'a>>,
    total_cost_usd: Option<Raw<'a>>,
    usage: Option<Raw<'a>>,
    errors: Option<Raw<'a>>,
}

impl<'a> Fields<'a> {
    fn read(line: &'a [u8]) -> Result<Self, Error> {
        let mut r = Reader::new(line);
        let mut f = Fields::default();
        let mut members = r.object()?;
        while let Some(key) = members.next_key(&mut r)? {
            let slot = match key {
                b"type" => &mut f.kind,
                b"subtype" => &mut f.subtype,
                b"session_id" => &mut f.session_id,
                b"cwd" => &mut f.cwd,
                b"parent_tool_use_id" => &mut f.parent_tool_use_id,
                b"error" => &mut f.error,
                b"is_error" => &mut f.is_error,
                b"result" => &mut f.result,
                b"total_cost_usd" => &mut f.total_cost_usd,
                b"usage" => &mut f.usage,
                b"errors" => &mut f.errors,
                b"message" => {
                    f.message = read_message(&mut r)?;
                    // A user line needs nothing after its message, and Claude Code puts
                    // `tool_use_result` there: often a second copy of a whole file (for an
                    // edit, the original file too). Not reading it halves the work on
                    // tool-heavy streams; the rest of the line is then not validated.
                    if f.kind.is_some_and(|k| k.0 == br#""user""#) {
                        return Ok(f);
                    }
                    continue;
                }
                _ => {
                    r.skip()?;
                    continue;
                }
            };
            *slot = Some(r.value()?);
        }
        r.end()?;
        Ok(f)
    }
}

/// One content block. Which fields are set depends on `type`.
#[derive(Default)]
struct Block<'a> {
    kind: Option<Raw<'a>>,
    /// A `text` block's text.
    text: Option<Raw<'a>>,
    /// A `tool_use` block's tool.
    name: Option<Raw<'a>>,
    /// A `tool_use` block's input, summarized as it was read.
    input: ToolInput,
    /// A `tool_result` block's output.
    content: Option<Raw<'a>>,
    /// Whether a `tool_result` is an error.
    is_error: Option<Raw<'a>>,
}

impl Block<'_> {
    fn kind(&self) -> Option<Cow<'_, str>> {
        self.kind.and_then(Raw::str)
    }
}

/// A message's content blocks: an array of blocks, or a bare string (one text block).
fn read_message<'a>(r: &mut Reader<'a>) -> Result<Vec<Block<'a>>, Error> {
    let mut blocks = Vec::new();
    if r.peek() != Some(b'{') {
        r.skip()?;
        return Ok(blocks);
    }
    let mut members = r.object()?;
    while let Some(key) = members.next_key(r)? {
        if key != b"content" {
            r.skip()?;
            continue;
        }
        match r.peek() {
            Some(b'"') => blocks.push(Block {
                kind: Some(Raw(br#""text""#)),
                text: Some(r.value()?),
                ..Block::default()
            }),
            Some(b'[') => {
                let mut items = r.array()?;
                while items.next(r)? {
                    if r.peek() == Some(b'{') {
                        blocks.push(read_block(r)?);
                    } else {
                        r.skip()?;
                    }
                }
            }
            _ => r.skip()?,
        }
    }
    Ok(blocks)
}

fn read_block<'a>(r: &mut Reader<'a>) -> Result<Block<'a>, Error> {
    let mut block = Block::default();
    let mut members = r.object()?;
    while let Some(key) = members.next_key(r)? {
        let slot = match key {
            b"type" => &mut block.kind,
            b"text" => &mut block.text,
            b"name" => &mut block.name,
            b"content" => &mut block.content,
            b"is_error" => &mut block.is_error,
            b"input" => {
                block.input = ToolInput::read(r)?;
                continue;
            }
            _ => {
                r.skip()?;
                continue;
            }
        };
        *slot = Some(r.value()?);
    }
    Ok(block)
}

/// A field's text, or `""`.
fn text<'a>(raw: Option<Raw<'a>>) -> Cow<'a, str> {
    raw.and_then(Raw::str).unwrap_or_default()
}

impl State {
    fn line(&mut self, line: Line<'_>, out: &mut Vec<AgentEvent>) {
        match line {
            Line::Whole(line) => self.whole_line(line, out),
            Line::Skipped(len) => out.push(AgentEvent::Unknown(format!(
                "skipped a {len}-byte line: longer than the {} MiB a JSON line may take",
                JSON_LINE_CAP >> 20
            ))),
        }
    }

    fn whole_line(&mut self, line: &[u8], out: &mut Vec<AgentEvent>) {
        let line = line.trim_ascii();
        if line.is_empty() {
            return;
        }
        if line[0] != b'{' {
            out.push(AgentEvent::Text(display_line(line, 0)));
            return;
        }
        // The whole line is read before any event is made, so a malformed line gives only
        // its Unknown.
        let fields = match Fields::read(line) {
            Ok(fields) => fields,
            Err(err) => {
                out.push(AgentEvent::Unknown(format!(
                    "malformed JSON: {err}: {}",
                    start_of(line)
                )));
                return;
            }
        };
        match text(fields.kind).as_ref() {
            "assistant" => self.assistant(&fields, out),
            "user" => user(&fields, out),
            "system" => self.system(&fields, line, out),
            "result" => self.result(&fields, out),
            "stream_event" => {}
            _ => out.push(AgentEvent::Unknown(start_of(line))),
        }
    }

    fn system(&mut self, fields: &Fields<'_>, line: &[u8], out: &mut Vec<AgentEvent>) {
        match text(fields.subtype).as_ref() {
            "init" => {
                if let Some(cwd) = fields.cwd.and_then(Raw::str) {
                    self.cwd = Some(cwd.into_owned());
                }
                if let Some(id) = fields.session_id.and_then(Raw::str) {
                    out.push(AgentEvent::SessionId(short(&sanitize(&id))));
                }
            }
            "status" => {}
            _ => out.push(AgentEvent::Unknown(start_of(line))),
        }
    }

    fn assistant(&mut self, fields: &Fields<'_>, out: &mut Vec<AgentEvent>) {
        let blocks = &fields.message;
        if fields.error.is_some_and(|e| !e.is_null()) {
            let text: Vec<Cow<'_, str>> = blocks.iter().map(|b| text(b.text)).collect();
            let text = sanitize(&text.join("\n"));
            let error = cut(Cow::Borrowed(text.trim()), DISPLAY_CAP, 0);
            out.push(AgentEvent::Error(error.clone()));
            self.api_error = Some(error);
            return;
        }
        let from_subagent = fields.parent_tool_use_id.is_some_and(|p| !p.is_null());
        for block in blocks {
            match block.kind().as_deref() {
                Some("text") => {
                    let text = text(block.text);
                    if from_subagent {
                        show_lines(&text, out);
                    } else {
                        self.text.feed(text.as_bytes(), out);
                        self.text.finish(out);
                    }
                }
                Some("tool_use" | "server_tool_use") => {
                    let name = text(block.name);
                    out.push(AgentEvent::ToolCall {
                        summary: block.input.summary(&name, self.cwd.as_deref()),
                        name: short(&sanitize(&name)),
                    });
                }
                Some("thinking" | "redacted_thinking") => {}
                other => out.push(AgentEvent::Unknown(format!(
                    "assistant content block of type {}",
                    short(&sanitize(other.unwrap_or("(none)")))
                ))),
            }
        }
    }

    fn result(&mut self, fields: &Fields<'_>, out: &mut Vec<AgentEvent>) {
        let (input_tokens, output_tokens) = fields.usage.map(tokens).unwrap_or_default();
        out.push(AgentEvent::Usage(Usage {
            cost_usd: fields.total_cost_usd.and_then(Raw::f64),
            input_tokens,
            output_tokens,
        }));
        let result = fields.result.and_then(Raw::str);
        if fields.is_error.and_then(Raw::bool) == Some(true) {
            let mut what = fields.errors.map(error_list).unwrap_or_default();
            if what.is_empty()
                && let Some(result) = result.as_deref()
            {
                what.push(first_line(result));
            }
            let subtype = short(&sanitize(&text(fields.subtype)));
            let subtype = if subtype.is_empty() {
                "error".into()
            } else {
                subtype
            };
            // "success" with is_error is how Claude Code reports an API error: the word
            // would only mislead.
            let message = match (subtype.as_str(), what.is_empty()) {
                ("success", false) => what.join("; "),
                (_, false) => format!("{subtype}: {}", what.join("; ")),
                (_, true) => format!("the agent reported an error ({subtype})"),
            };
            // The result restates an API error already reported; once is enough.
            if self.api_error.as_ref() != Some(&message) {
                out.push(AgentEvent::Error(message));
            }
        }
        self.api_error = None;
        out.push(AgentEvent::TurnEnd {
            result: result.map(|r| sanitize(&r)),
        });
    }
}

fn user(fields: &Fields<'_>, out: &mut Vec<AgentEvent>) {
    for block in &fields.message {
        // Text blocks here are the prompt or notes the CLI adds ("[Request interrupted by
        // user]"): not the agent's words, and not worth a line of their own.
        if block.kind().as_deref() == Some("tool_result") {
            out.push(AgentEvent::ToolResult {
                summary: block.content.and_then(tool_output).unwrap_or_default(),
                is_error: block.is_error.and_then(Raw::bool).unwrap_or(false),
            });
        }
    }
}

/// `usage.input_tokens` and `usage.output_tokens`.
fn tokens(usage: Raw<'_>) -> (Option<u64>, Option<u64>) {
    let mut r = usage.reader();
    let mut found = (None, None);
    let Ok(mut members) = r.object() else {
        return found;
    };
    while let Ok(Some(key)) = members.next_key(&mut r) {
        let Ok(value) = r.value() else { break };
        match key {
            b"input_tokens" => found.0 = value.u64(),
            b"output_tokens" => found.1 = value.u64(),
            _ => {}
        }
    }
    found
}

/// The strings of an `errors` array, each as one line.
fn error_list(errors: Raw<'_>) -> Vec<String> {
    let mut r = errors.reader();
    let mut found = Vec::new();
    let Ok(mut items) = r.array() else {
        return found;
    };
    while let Ok(true) = items.next(&mut r) {
        let Ok(value) = r.value() else { break };
        if let Some(error) = value.str() {
            found.push(first_line(&error));
        }
    }
    found
}

/// Shows text without looking for signals in it.
fn show_lines(text: &str, out: &mut Vec<AgentEvent>) {
    for line in text.split('\n') {
        out.push(AgentEvent::Text(display_line(line.as_bytes(), 0)));
    }
}

/// The start of `line`, sanitized and cut, for an `Unknown` event.
fn start_of(line: &[u8]) -> String {
    let start = String::from_utf8_lossy(&line[..line.len().min(4 * SUMMARY_CAP)]);
    short(&sanitize(&start))
}
