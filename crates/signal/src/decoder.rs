//! The format-dispatching [`Decoder`].

use crate::AgentEvent;
use crate::claude::{Claude, Dialect};
use crate::codex::Codex;
use crate::cursor::Cursor;
use crate::gemini::Gemini;
use crate::json::{JsonDecoder, JsonFormat};
use crate::opencode::Opencode;
use crate::text::TextScanner;

/// How an agent's output is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamFormat {
    /// Plain text, read as markdown: every line is shown, signals count outside code.
    Text,
    /// Claude Code's `-p --output-format stream-json --verbose`: one JSON object per line.
    ClaudeStreamJson,
    /// Amp's `-x --stream-json`: Claude Code's format, with usage on assistant messages.
    AmpStreamJson,
    /// OpenAI Codex CLI's `codex exec --json`: JSON lines of thread, turn and item events.
    CodexJson,
    /// Gemini CLI's `-o stream-json`: JSON lines, assistant text in deltas.
    GeminiStreamJson,
    /// opencode's `run --format json`: JSON lines of message parts.
    OpencodeJson,
    /// Cursor CLI's `cursor-agent -p --output-format stream-json`: JSON lines, Claude-like.
    CursorStreamJson,
}

impl StreamFormat {
    /// Every format, [`StreamFormat::Text`] first.
    pub const ALL: [StreamFormat; 7] = [
        StreamFormat::Text,
        StreamFormat::ClaudeStreamJson,
        StreamFormat::AmpStreamJson,
        StreamFormat::CodexJson,
        StreamFormat::GeminiStreamJson,
        StreamFormat::OpencodeJson,
        StreamFormat::CursorStreamJson,
    ];

    /// A short name for the format, as a command-line value: `text`, `claude`, `amp`,
    /// `codex`, `gemini`, `opencode`, `cursor`.
    pub fn name(self) -> &'static str {
        match self {
            StreamFormat::Text => "text",
            StreamFormat::ClaudeStreamJson => "claude",
            StreamFormat::AmpStreamJson => "amp",
            StreamFormat::CodexJson => "codex",
            StreamFormat::GeminiStreamJson => "gemini",
            StreamFormat::OpencodeJson => "opencode",
            StreamFormat::CursorStreamJson => "cursor",
        }
    }

    /// The format called `name` (see [`StreamFormat::name`]).
    pub fn from_name(name: &str) -> Option<StreamFormat> {
        StreamFormat::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// Turns an agent's output bytes, in chunks of any size, into [`AgentEvent`]s.
///
/// Feed it every chunk with [`Decoder::feed`] and call [`Decoder::finish`] at end of stream;
/// the events are the same however the bytes were cut.
#[derive(Debug)]
pub struct Decoder {
    format: StreamFormat,
    inner: Inner,
}

/// Plain text, or one of the JSON-lines formats. Adding a format is a module implementing
/// [`JsonFormat`], a variant of [`StreamFormat`] and its arm in [`Decoder::new`].
#[derive(Debug)]
enum Inner {
    Text(TextScanner),
    Json(JsonDecoder),
}

impl Decoder {
    /// A decoder for a stream in `format`.
    pub fn new(format: StreamFormat) -> Self {
        let json = |f: Box<dyn JsonFormat>| Inner::Json(JsonDecoder::new(f));
        let inner = match format {
            StreamFormat::Text => Inner::Text(TextScanner::default()),
            StreamFormat::ClaudeStreamJson => json(Box::new(Claude::new(Dialect::Claude))),
            StreamFormat::AmpStreamJson => json(Box::new(Claude::new(Dialect::Amp))),
            StreamFormat::CodexJson => json(Box::<Codex>::default()),
            StreamFormat::GeminiStreamJson => json(Box::<Gemini>::default()),
            StreamFormat::OpencodeJson => json(Box::<Opencode>::default()),
            StreamFormat::CursorStreamJson => json(Box::<Cursor>::default()),
        };
        Decoder { format, inner }
    }

    /// The format this decoder reads.
    pub fn format(&self) -> StreamFormat {
        self.format
    }

    /// Decodes the next chunk, pushing the events it completes onto `out`.
    ///
    /// Events for a line come when the line ends, so a chunk may complete none.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<AgentEvent>) {
        match &mut self.inner {
            Inner::Text(d) => d.feed(bytes, out),
            Inner::Json(d) => d.feed(bytes, out),
        }
    }

    /// Ends the stream: an unterminated last line is decoded and its events pushed.
    ///
    /// The decoder can then read a new stream.
    pub fn finish(&mut self, out: &mut Vec<AgentEvent>) {
        match &mut self.inner {
            Inner::Text(d) => d.finish(out),
            Inner::Json(d) => d.finish(out),
        }
    }

    /// How many bytes of input the decoder holds between calls (an unfinished line).
    ///
    /// Bounded by [`LINE_CAP`](crate::LINE_CAP) plus a few bytes for plain text and by
    /// [`JSON_LINE_CAP`](crate::JSON_LINE_CAP) (plus [`LINE_CAP`](crate::LINE_CAP) of open
    /// message text) for JSON formats, whatever the input.
    pub fn buffered_len(&self) -> usize {
        match &self.inner {
            Inner::Text(d) => d.buffered_len(),
            Inner::Json(d) => d.buffered_len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_has_a_name_that_reads_back() {
        for format in StreamFormat::ALL {
            assert_eq!(StreamFormat::from_name(format.name()), Some(format));
        }
        assert_eq!(StreamFormat::from_name("nope"), None);
    }
}
