//! The format-dispatching [`Decoder`].

use crate::AgentEvent;
use crate::claude::ClaudeDecoder;
use crate::text::TextScanner;

/// How an agent's output is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamFormat {
    /// Plain text, read as markdown: every line is shown, signals count outside code.
    Text,
    /// Claude Code's `-p --output-format stream-json --verbose`: one JSON object per line.
    ClaudeStreamJson,
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

/// One decoder per format. Adding a format is a module, a variant here and in
/// [`StreamFormat`], and its arms below.
#[derive(Debug)]
enum Inner {
    Text(TextScanner),
    Claude(ClaudeDecoder),
}

impl Decoder {
    /// A decoder for a stream in `format`.
    pub fn new(format: StreamFormat) -> Self {
        let inner = match format {
            StreamFormat::Text => Inner::Text(TextScanner::default()),
            StreamFormat::ClaudeStreamJson => Inner::Claude(ClaudeDecoder::default()),
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
            Inner::Claude(d) => d.feed(bytes, out),
        }
    }

    /// Ends the stream: an unterminated last line is decoded and its events pushed.
    ///
    /// The decoder can then read a new stream.
    pub fn finish(&mut self, out: &mut Vec<AgentEvent>) {
        match &mut self.inner {
            Inner::Text(d) => d.finish(out),
            Inner::Claude(d) => d.finish(out),
        }
    }

    /// How many bytes of input the decoder holds between calls (an unfinished line).
    ///
    /// Bounded by [`LINE_CAP`](crate::LINE_CAP) plus a few bytes for plain text and by
    /// [`JSON_LINE_CAP`](crate::JSON_LINE_CAP) for JSON formats, whatever the input.
    pub fn buffered_len(&self) -> usize {
        match &self.inner {
            Inner::Text(d) => d.buffered_len(),
            Inner::Claude(d) => d.buffered_len(),
        }
    }
}
