//! Finds ralph's signals in what an agent prints, and decodes agent stream formats, without
//! doing any I/O.
//!
//! # Theory of operation
//!
//! An agent's output arrives as bytes in chunks of any size. A [`Decoder`] is fed those chunks
//! ([`Decoder::feed`]) and, at end of stream, told so ([`Decoder::finish`]). It pushes
//! [`AgentEvent`]s into a caller's vector: display text, tool calls, usage, and [`Signal`]s. It
//! never reads or writes anything itself, so the same code serves the live loop, the tests and
//! the benchmarks. How the bytes were cut into chunks never changes the events: a signal split
//! across two `feed` calls at any byte is found exactly once.
//!
//! A signal is `<ralph>DONE</ralph>`, `<ralph>QUESTION</ralph>` or `<ralph>GUTTER</ralph>`
//! (`<ralph>COMPLETE</ralph>` is read as DONE), written exactly so: case and spacing matter. It
//! counts only when the agent itself says it: in plain text, outside fenced code blocks and
//! inline code spans (CommonMark rules); in structured streams, only in the main agent's
//! assistant text, never in tool calls, tool results, file contents, an echoed prompt or the
//! final `result` summary (which repeats the assistant text). Each kind counts at most once per
//! line, and a [`Signal`] event comes right after the [`AgentEvent::Text`] that ends with its
//! line.
//!
//! ## Formats
//!
//! [`StreamFormat::Text`] treats the stream as markdown-ish plain text: every line is shown,
//! fences are tracked across lines, code spans within a line. The lines one `feed` completes
//! go out together, joined by `\n`, in one [`AgentEvent::Text`] (split only where a signal
//! must follow its line): an event per line would cost more than finding the lines.
//!
//! The other formats are JSON lines, one module each, written by a coding-agent CLI:
//!
//! | format | CLI | module |
//! | --- | --- | --- |
//! | [`StreamFormat::ClaudeStreamJson`] | `claude -p --output-format stream-json --verbose` | `claude` |
//! | [`StreamFormat::AmpStreamJson`] | `amp -x --stream-json` (Claude-compatible) | `claude` (Amp dialect) |
//! | [`StreamFormat::CodexJson`] | `codex exec --json` | `codex` |
//! | [`StreamFormat::GeminiStreamJson`] | `gemini -o stream-json` | `gemini` |
//! | [`StreamFormat::OpencodeJson`] | `opencode run --format json` | `opencode` |
//! | [`StreamFormat::CursorStreamJson`] | `cursor-agent -p --output-format stream-json` | `cursor` |
//!
//! Each line is read in one pass by a small borrowing JSON reader that decodes the few fields
//! it needs and skips the rest (file bodies, command output) with a quote search. The agent's
//! own text (and only it) goes through the same plain-text scanner as [`StreamFormat::Text`],
//! so fences and code spans count the same way; where a CLI streams text in pieces (Gemini's
//! deltas) the pieces of one message go through one continuing scanner, so a signal cut
//! between two events is found once. Each module's docs table which line gives which events.
//! A new format is a module implementing the JSON-lines format trait, a [`StreamFormat`]
//! variant and one arm in the decoder; the line framing, blank, non-JSON and over-long lines
//! are handled for it.
//!
//! ## Usage, errors and rate limits
//!
//! [`AgentEvent::Usage`] events are increments: what a run cost is the sum of its `Usage`
//! events (each module says where its figures come from; Codex's cumulative thread totals are
//! turned into per-turn figures). A failed turn gives an [`AgentEvent::Error`]; a rate limit
//! or quota refusal also gives an [`AgentEvent::RateLimited`] first (or alone, when the CLI
//! retries by itself). Notices a CLI recovers from are [`AgentEvent::Unknown`], for the log.
//!
//! ## Bounds
//!
//! Memory stays bounded whatever the input. A plain-text line is kept only up to
//! [`LINE_CAP`] bytes; the rest of a longer line is scanned for signals as it streams past (with
//! a small tail kept for tags that straddle chunks) and dropped. A JSON line longer than
//! [`JSON_LINE_CAP`] is skipped with an [`AgentEvent::Unknown`] note. Display text is cut to
//! [`DISPLAY_CAP`] bytes. [`Decoder::buffered_len`] reports what is held.
//!
//! ## Safety of displayed text
//!
//! Everything meant for display goes through [`sanitize()`]: terminal control sequences are
//! stripped, invalid UTF-8 becomes U+FFFD, so an agent (or a file it cats) cannot retitle,
//! clear or hyperlink the user's terminal.

#![forbid(unsafe_code)]

mod blocks;
mod claude;
mod codex;
mod cursor;
mod decoder;
mod gemini;
mod json;
mod jsonl;
mod long_line;
mod markdown;
mod opencode;
mod rate_limit;
mod sanitize;
mod skim;
mod summary;
mod tag;
mod text;

pub use decoder::{Decoder, StreamFormat};
pub use sanitize::{sanitize, sanitize_bytes};
pub use tag::without_tags;

/// Longest plain-text line, in bytes, that is kept whole; longer lines are streamed.
pub const LINE_CAP: usize = 64 * 1024;

/// Longest display text, in bytes, before it is cut with a " … [N more bytes]" note.
pub const DISPLAY_CAP: usize = 4 * 1024;

/// Longest JSON line, in bytes, that a JSON decoder buffers; longer lines are skipped.
pub const JSON_LINE_CAP: usize = 8 * 1024 * 1024;

/// What the agent asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SignalKind {
    /// `<ralph>DONE</ralph>` (or the older `<ralph>COMPLETE</ralph>`): the agent thinks the task is done.
    Done,
    /// `<ralph>QUESTION</ralph>`: the agent wrote `.ralph/question.md` and wants an answer.
    Question,
    /// `<ralph>GUTTER</ralph>`: the agent is stuck and wants the loop to stop.
    Gutter,
}

/// One signal, with the line that carried it (for the log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signal {
    /// Which signal it was.
    pub kind: SignalKind,
    /// The line of agent text that carried the signal, control sequences stripped, cut to a
    /// bounded length.
    pub line: String,
    /// 1-based line number within the text the signal was found in.
    pub line_number: u64,
}

/// Token and cost figures an agent reported: what one turn (or step) added.
///
/// The `Usage` events of a run add up to what it spent. For Claude Code these come from the
/// `result` line: `total_cost_usd` (cumulative for the process, which runs one turn),
/// `usage.input_tokens` (not counting cache reads and writes) and `usage.output_tokens`. Each
/// format's module says where its figures come from; only Claude Code and opencode report a
/// cost.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Usage {
    /// Cost in US dollars, if the agent reported one.
    pub cost_usd: Option<f64>,
    /// Input tokens, if reported.
    pub input_tokens: Option<u64>,
    /// Output tokens, if reported.
    pub output_tokens: Option<u64>,
}

/// One thing the agent did, decoded from its output.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// Lines of the agent's own words for display, joined by `\n` (no trailing newline):
    /// control sequences stripped, each line cut to [`DISPLAY_CAP`] bytes with a
    /// " … [N more bytes]" note. How lines group into events follows how the output arrived;
    /// the lines themselves do not.
    Text(String),
    /// A signal the agent gave; it follows the `Text` of the line that carried it.
    Signal(Signal),
    /// A tool call, as a short one-line summary: name "Edit", summary "src/cache.rs"; name
    /// "Bash", summary "cargo test".
    ToolCall {
        /// The tool's name as the agent reported it.
        name: String,
        /// One sanitized line saying what the call is about; may be empty.
        summary: String,
    },
    /// A tool's result: its first non-blank line, cut, and whether it was an error.
    ToolResult {
        /// One sanitized line, with a " [+N lines]" note when the output had more.
        summary: String,
        /// Whether the tool reported failure.
        is_error: bool,
    },
    /// The agent's session id, for resuming it later.
    SessionId(String),
    /// Token and cost figures.
    Usage(Usage),
    /// An error the agent or its API reported (a result with `is_error`, an API error message).
    Error(String),
    /// The agent's API refused for a rate limit or quota (HTTP 429 and the like).
    ///
    /// The CLI may be retrying by itself (Claude Code's `api_retry`); when the turn fails
    /// because of it, an [`AgentEvent::Error`] follows.
    RateLimited {
        /// How long the agent or its API said to wait, when it said.
        retry_after: Option<std::time::Duration>,
        /// When the limit resets (Unix seconds), when the agent said (Claude's
        /// `rate_limit_event` `resetsAt`): the wait, which needs the clock, is the loop's.
        resets_at: Option<u64>,
        /// What was said, as one sanitized line.
        message: String,
    },
    /// The agent's turn ended (Claude's `result` line), with the final result text if any.
    TurnEnd {
        /// The final text the agent reported for the turn, sanitized.
        result: Option<String>,
    },
    /// A line the decoder did not recognise (unknown type, malformed JSON), kept short for the
    /// log. Never fatal.
    Unknown(String),
    /// A request the agent's host must answer on the agent's stdin, as the raw JSON line:
    /// Claude Code's `control_request` (for example `can_use_tool` for its AskUserQuestion
    /// tool) when it runs with `--permission-prompt-tool stdio`.
    ControlRequest(String),
}
