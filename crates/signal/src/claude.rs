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
//! | `system` `api_retry` with `error_status` 429 | `RateLimited` (other retries: `Unknown`) |
//! | `rate_limit_event` whose status is `rejected` | `RateLimited` (others: `Unknown`) |
//! | `control_request` (the SDK's stdio permission protocol) | `ControlRequest` (the raw line) |
//! | anything else | `Unknown` |
//! | malformed JSON | `Unknown("malformed JSON: …")` |
//! | a line that is not a JSON object (a warning) | `Text` |
//!
//! Signals are looked for only in the main agent's assistant text. Tool results, file
//! contents, user messages, subagent text (`parent_tool_use_id` set) and the `result` text
//! (which repeats the assistant's last words) are never scanned.
//!
//! A rate-limited turn (an assistant line with `error: "rate_limit"`, or a result with
//! `api_error_status: 429`) gives one `RateLimited` before its `Error`.
//!
//! Amp's `--stream-json` is this format ("Claude Code-compatible"), read with
//! [`Dialect::Amp`]: the same events, except that Amp's `result` carries no usage, so tokens
//! are summed from the assistant messages' `usage` (once per message id). Claude's assistant
//! lines repeat the *start* usage of a message on every content block, so for Claude tokens
//! come from `result` only.
//!
//! Speed: each line is read in one pass by the [`skim`](crate::skim) reader, whatever its key
//! order (2.1.330 no longer puts `type` first). Only the fields used are decoded; file bodies
//! and command output are skipped with a quote search, a tool's output is summarized from its
//! raw text, and a `user` line is read only up to its `message` (what follows is
//! `tool_use_result`, often a second copy of a file).

use std::borrow::Cow;
use std::time::Duration;

use crate::json::{JsonFormat, clean_id, malformed, show_lines, start_of};
use crate::rate_limit;
use crate::sanitize::{cut, sanitize};
use crate::skim::{Error, Raw, Reader};
use crate::summary::{ToolInput, first_line, short, tool_output};
use crate::text::TextScanner;
use crate::{AgentEvent, DISPLAY_CAP, Usage};

/// Which CLI writes the stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// Claude Code.
    #[default]
    Claude,
    /// Amp (`amp -x --stream-json`): tokens come from the assistant messages.
    Amp,
}

/// Decodes Claude Code's (or Amp's) stream-json output, one line at a time.
#[derive(Debug, Default)]
pub(crate) struct Claude {
    dialect: Dialect,
    /// The agent's working directory, from `system` `init`.
    cwd: Option<String>,
    /// Scans assistant text; reused so each text block does not allocate a new one.
    text: TextScanner,
    /// The last API error reported by an assistant line, which the `result` line repeats.
    api_error: Option<String>,
    /// A rate limit was already reported for this turn's failure.
    rate_limited: bool,
    /// Amp: input and output tokens summed over the turn's assistant messages.
    amp_tokens: (Option<u64>, Option<u64>),
    /// Amp: the id of the last message counted (a message's blocks may share one usage).
    amp_message: Option<String>,
}

impl Claude {
    /// A decoder for `dialect`.
    pub(crate) fn new(dialect: Dialect) -> Self {
        Claude {
            dialect,
            ..Claude::default()
        }
    }
}

impl JsonFormat for Claude {
    fn object(&mut self, line: &[u8], out: &mut Vec<AgentEvent>) {
        // The whole line is read before any event is made, so a malformed line gives only
        // its Unknown.
        let fields = match Fields::read(line) {
            Ok(fields) => fields,
            Err(err) => {
                out.push(malformed(line, err));
                return;
            }
        };
        match text(fields.kind).as_ref() {
            "assistant" => self.assistant(&fields, out),
            "user" => user(&fields, out),
            "system" => self.system(&fields, line, out),
            "result" => self.result(&fields, out),
            "rate_limit_event" => rate_limit_event(&fields, line, out),
            "stream_event" => {}
            // The host answers these; the JSON is small and goes up whole.
            "control_request" => out.push(AgentEvent::ControlRequest(
                String::from_utf8_lossy(line).into_owned(),
            )),
            _ => out.push(AgentEvent::Unknown(start_of(line))),
        }
    }
}

/// The top-level fields of a line that some line type uses, as raw JSON.
#[derive(Default)]
struct Fields<'a> {
    kind: Option<Raw<'a>>,
    subtype: Option<Raw<'a>>,
    session_id: Option<Raw<'a>>,
    cwd: Option<Raw<'a>>,
    message: Message<'a>,
    /// Set when a subagent (Task) speaks, not the agent itself.
    parent_tool_use_id: Option<Raw<'a>>,
    /// Set on the synthetic message Claude Code prints for an API error.
    error: Option<Raw<'a>>,
    is_error: Option<Raw<'a>>,
    result: Option<Raw<'a>>,
    total_cost_usd: Option<Raw<'a>>,
    usage: Option<Raw<'a>>,
    errors: Option<Raw<'a>>,
    /// A `result`'s HTTP status, when an API error ended the turn.
    api_error_status: Option<Raw<'a>>,
    /// `api_retry`: the HTTP status that is being retried, attempt, and the wait.
    error_status: Option<Raw<'a>>,
    attempt: Option<Raw<'a>>,
    max_retries: Option<Raw<'a>>,
    retry_delay_ms: Option<Raw<'a>>,
    /// `rate_limit_event`: the limit's state.
    rate_limit_info: Option<Raw<'a>>,
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
                b"api_error_status" => &mut f.api_error_status,
                b"error_status" => &mut f.error_status,
                b"attempt" => &mut f.attempt,
                b"max_retries" => &mut f.max_retries,
                b"retry_delay_ms" => &mut f.retry_delay_ms,
                b"rate_limit_info" => &mut f.rate_limit_info,
                b"message" => {
                    f.message = read_message(&mut r)?;
                    // A user line needs nothing after its message, and Claude Code puts
                    // `tool_use_result` there: often a second copy of a whole file (for an
                    // edit, the original file too). Not reading it halves the work on
                    // tool-heavy streams; the rest of the line is then not validated.
                    if f.kind.is_some_and(|k| k.text == br#""user""#) {
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

/// A message: its content blocks, and (for Amp's token count) its id and usage.
#[derive(Default)]
struct Message<'a> {
    blocks: Vec<Block<'a>>,
    id: Option<Raw<'a>>,
    usage: Option<Raw<'a>>,
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

/// A message: content blocks (an array of blocks, or a bare string: one text block), id and
/// usage.
fn read_message<'a>(r: &mut Reader<'a>) -> Result<Message<'a>, Error> {
    let mut message = Message::default();
    if r.peek() != Some(b'{') {
        r.skip()?;
        return Ok(message);
    }
    let mut members = r.object()?;
    while let Some(key) = members.next_key(r)? {
        match key {
            b"content" => {}
            b"id" => {
                message.id = Some(r.value()?);
                continue;
            }
            b"usage" => {
                message.usage = Some(r.value()?);
                continue;
            }
            _ => {
                r.skip()?;
                continue;
            }
        }
        match r.peek() {
            Some(b'"') => message.blocks.push(Block {
                kind: Some(Raw::new(br#""text""#)),
                text: Some(r.value()?),
                ..Block::default()
            }),
            Some(b'[') => {
                let mut items = r.array()?;
                while items.next(r)? {
                    if r.peek() == Some(b'{') {
                        message.blocks.push(read_block(r)?);
                    } else {
                        r.skip()?;
                    }
                }
            }
            _ => r.skip()?,
        }
    }
    Ok(message)
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

impl Claude {
    fn system(&mut self, fields: &Fields<'_>, line: &[u8], out: &mut Vec<AgentEvent>) {
        match text(fields.subtype).as_ref() {
            "init" => {
                if let Some(cwd) = fields.cwd.and_then(Raw::str) {
                    self.cwd = Some(cwd.into_owned());
                }
                if let Some(id) = fields.session_id.and_then(Raw::str) {
                    out.push(AgentEvent::SessionId(clean_id(&id)));
                }
            }
            "api_retry" if api_retry_is_rate_limit(fields) => {
                let attempt = fields.attempt.and_then(Raw::u64).unwrap_or(0);
                let message = match fields.max_retries.and_then(Raw::u64) {
                    Some(max) => {
                        format!("the API is rate limiting (HTTP 429); retry {attempt} of {max}")
                    }
                    None => format!("the API is rate limiting (HTTP 429); retry {attempt}"),
                };
                out.push(AgentEvent::RateLimited {
                    retry_after: fields
                        .retry_delay_ms
                        .and_then(Raw::u64)
                        .map(Duration::from_millis),
                    resets_at: None,
                    message,
                });
            }
            "status" => {}
            _ => out.push(AgentEvent::Unknown(start_of(line))),
        }
    }

    fn assistant(&mut self, fields: &Fields<'_>, out: &mut Vec<AgentEvent>) {
        let blocks = &fields.message.blocks;
        if self.dialect == Dialect::Amp {
            self.count_amp_tokens(&fields.message);
        }
        if fields.error.is_some_and(|e| !e.is_null()) {
            let text: Vec<Cow<'_, str>> = blocks.iter().map(|b| text(b.text)).collect();
            let text = sanitize(&text.join("\n"));
            let error = cut(Cow::Borrowed(text.trim()), DISPLAY_CAP, 0);
            let kind = fields.error.and_then(Raw::str).unwrap_or_default();
            if kind == "rate_limit" || rate_limit::mentions_rate_limit(&error) {
                out.push(AgentEvent::RateLimited {
                    retry_after: rate_limit::retry_after_in(&error),
                    resets_at: None,
                    message: first_line(&error),
                });
                self.rate_limited = true;
            }
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
                        name: clean_id(&name),
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

    /// Amp reports usage per assistant message; a message split over lines is counted once.
    fn count_amp_tokens(&mut self, message: &Message<'_>) {
        let Some(usage) = message.usage else { return };
        let id = message.id.and_then(Raw::str);
        if id.is_some() && id.as_deref() == self.amp_message.as_deref() {
            return;
        }
        self.amp_message = id.map(Cow::into_owned);
        let (input, output) = tokens(usage);
        let add = |sum: &mut Option<u64>, n: Option<u64>| {
            if let Some(n) = n {
                *sum = Some(sum.unwrap_or(0).saturating_add(n));
            }
        };
        add(&mut self.amp_tokens.0, input);
        add(&mut self.amp_tokens.1, output);
    }

    fn result(&mut self, fields: &Fields<'_>, out: &mut Vec<AgentEvent>) {
        let (mut input_tokens, mut output_tokens) = fields.usage.map(tokens).unwrap_or_default();
        if self.dialect == Dialect::Amp {
            let (input, output) = std::mem::take(&mut self.amp_tokens);
            input_tokens = input_tokens.or(input);
            output_tokens = output_tokens.or(output);
            self.amp_message = None;
        }
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
            let status = fields.api_error_status.and_then(Raw::u64);
            if !self.rate_limited
                && (status == Some(429) || rate_limit::mentions_rate_limit(&message))
            {
                out.push(AgentEvent::RateLimited {
                    retry_after: rate_limit::retry_after_in(&message),
                    resets_at: None,
                    message: message.clone(),
                });
            }
            // The result restates an API error already reported; once is enough.
            if self.api_error.as_ref() != Some(&message) {
                out.push(AgentEvent::Error(message));
            }
        }
        self.api_error = None;
        self.rate_limited = false;
        out.push(AgentEvent::TurnEnd {
            result: result.map(|r| sanitize(&r)),
        });
    }
}

/// An `api_retry` line retrying a rate limit (HTTP 429, or an error named so).
fn api_retry_is_rate_limit(fields: &Fields<'_>) -> bool {
    fields.error_status.and_then(Raw::u64) == Some(429)
        || fields
            .error
            .and_then(Raw::str)
            .is_some_and(|e| e == "rate_limit")
}

/// A `rate_limit_event`: a `RateLimited` when the limit now refuses requests, else kept as
/// `Unknown` (it is also sent while requests are still allowed).
fn rate_limit_event(fields: &Fields<'_>, line: &[u8], out: &mut Vec<AgentEvent>) {
    let info = fields.rate_limit_info.and_then(|raw| {
        let mut r = raw.reader();
        let mut members = r.object().ok()?;
        let (mut status, mut kind, mut resets_at) = (None, None, None);
        while let Ok(Some(key)) = members.next_key(&mut r) {
            let value = r.value().ok()?;
            match key {
                b"status" => status = value.str().map(Cow::into_owned),
                b"rateLimitType" => kind = value.str().map(Cow::into_owned),
                b"resetsAt" => resets_at = value.u64(),
                _ => {}
            }
        }
        Some((status, kind, resets_at))
    });
    match info {
        Some((Some(status), kind, resets_at)) if status == "rejected" => {
            let mut message = String::from("the usage limit is reached");
            if let Some(kind) = kind {
                message.push_str(&format!(" ({})", clean_id(&kind)));
            }
            out.push(AgentEvent::RateLimited {
                retry_after: None,
                resets_at,
                message,
            });
        }
        _ => out.push(AgentEvent::Unknown(start_of(line))),
    }
}

fn user(fields: &Fields<'_>, out: &mut Vec<AgentEvent>) {
    for block in &fields.message.blocks {
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
