//! Finds ralph's signals in what an agent prints, without doing any I/O.
//!
//! # Theory of operation
//!
//! An agent's output arrives as bytes in chunks of any size. A [`Decoder`] is fed those chunks
//! (`feed`) and, at end of stream, told so (`finish`). It pushes [`AgentEvent`]s into a caller's
//! vector: display text, tool calls, usage, and [`Signal`]s. It never reads or writes anything
//! itself, so the same code serves the live loop, the tests and the benchmarks.
//!
//! A signal is `<ralph>DONE</ralph>`, `<ralph>QUESTION</ralph>` or `<ralph>GUTTER</ralph>`
//! (`<ralph>COMPLETE</ralph>` is read as DONE). It counts only when the agent itself says it:
//! in plain text, outside fenced code blocks and inline code spans; in structured streams, only
//! in assistant text, never in tool results, file contents or an echoed prompt.
//!
//! Memory stays bounded whatever the input: partial lines are kept only up to a cap, and a
//! longer line is scanned as it streams past rather than buffered.

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
