//! The plain-text scanner: splits bytes into lines, shows each line, and finds the signals
//! that are not inside code.
//!
//! Lines that arrive whole within a chunk are handled in place, without copying; only the
//! unfinished line at the end of a chunk is kept, up to [`LINE_CAP`] bytes. Newlines are found
//! with `memchr` and tags with one `memmem` pass per chunk, so a line with no `<ralph>` costs a
//! newline search, a vectorized control-byte check, UTF-8 validation and the copy into its
//! `Text` event. Whether a tag sits inside code needs the whole line, so a line's signals are
//! decided, and emitted, when the line ends.
//!
//! Lines are judged as the user sees them, after [`sanitize()`](crate::sanitize()). The one
//! exception is a line longer than [`LINE_CAP`]: its bytes are scanned raw as they pass (see
//! `long_line`), and only its start is shown.

use std::borrow::Cow;
use std::ops::Range;

use memchr::{memchr, memchr_iter};

use crate::long_line::LongLine;
use crate::markdown::{FenceState, code_spans};
use crate::sanitize::{clean_line, cut, display_line, find_suspicious};
use crate::tag::{KindSet, OPEN_FINDER, match_tag};
use crate::{AgentEvent, DISPLAY_CAP, LINE_CAP, Signal};

/// Splits plain text into [`AgentEvent::Text`] lines and finds [`Signal`]s in them.
#[derive(Debug, Default)]
pub(crate) struct TextScanner {
    /// The start of the current, unfinished line, at most [`LINE_CAP`] bytes.
    partial: Vec<u8>,
    /// Present once the current line outgrew [`LINE_CAP`].
    long: Option<LongLine>,
    /// Bytes of the current line beyond `partial`.
    unseen: u64,
    /// Lines completed so far.
    line_number: u64,
    fence: FenceState,
    /// Scratch for code spans, kept to avoid an allocation per tagged line.
    spans: Vec<Range<usize>>,
}

impl TextScanner {
    /// Scans the next chunk of text.
    pub(crate) fn feed(&mut self, bytes: &[u8], out: &mut Vec<AgentEvent>) {
        let mut rest = bytes;
        if !self.partial.is_empty() {
            let Some(nl) = memchr(b'\n', rest) else {
                self.extend_partial(rest);
                return;
            };
            self.extend_partial(&rest[..nl]);
            self.end_partial_line(out);
            rest = &rest[nl + 1..];
        }

        let mut next_tag = OPEN_FINDER.find(rest);
        let mut plain = PlainRegion::new(rest);
        let mut start = 0;
        for nl in memchr_iter(b'\n', rest) {
            let tagged = next_tag.is_some_and(|t| t < nl);
            if nl - start > LINE_CAP {
                // The same path as a long line arriving in pieces, so chunking cannot matter.
                self.extend_partial(&rest[start..nl]);
                self.end_partial_line(out);
            } else if let Some(line) = plain.line(start, nl) {
                self.clean_line(Cow::Borrowed(line), tagged, out);
            } else {
                self.whole_line(&rest[start..nl], tagged, out);
            }
            if tagged {
                next_tag = OPEN_FINDER.find(&rest[nl + 1..]).map(|t| t + nl + 1);
            }
            start = nl + 1;
        }
        self.extend_partial(&rest[start..]);
    }

    /// Ends the text: an unterminated last line is emitted. The scanner is then ready for a
    /// new, independent text (line numbers and fences start over).
    pub(crate) fn finish(&mut self, out: &mut Vec<AgentEvent>) {
        if !self.partial.is_empty() {
            self.end_partial_line(out);
        }
        self.line_number = 0;
        self.fence = FenceState::default();
    }

    /// Bytes held between calls.
    pub(crate) fn buffered_len(&self) -> usize {
        self.partial.len() + self.long.as_ref().map_or(0, LongLine::buffered_len)
    }

    fn extend_partial(&mut self, piece: &[u8]) {
        if let Some(long) = &mut self.long {
            long.push(piece);
            self.unseen += piece.len() as u64;
            return;
        }
        let room = LINE_CAP - self.partial.len();
        if piece.len() <= room {
            self.partial.extend_from_slice(piece);
            return;
        }
        self.partial.extend_from_slice(&piece[..room]);
        let mut long = LongLine::default();
        long.push(&self.partial);
        long.push(&piece[room..]);
        self.unseen = (piece.len() - room) as u64;
        self.long = Some(long);
    }

    fn end_partial_line(&mut self, out: &mut Vec<AgentEvent>) {
        let line = std::mem::take(&mut self.partial);
        match self.long.take() {
            Some(long) => self.long_line(&line, long, out),
            None => self.whole_line(&line, OPEN_FINDER.find(&line).is_some(), out),
        }
        self.partial = line;
        self.partial.clear();
        self.unseen = 0;
        if self.partial.capacity() > 2 * LINE_CAP {
            self.partial.shrink_to(LINE_CAP);
        }
    }

    /// Handles one raw line of at most [`LINE_CAP`] bytes; `tagged` says whether `<ralph>`
    /// occurs in its raw bytes.
    ///
    /// Fences, code spans and tags are read from the sanitized line, what the user sees: a tag
    /// wrapped in colour codes counts, one hidden in a terminal title does not.
    fn whole_line(&mut self, line: &[u8], tagged: bool, out: &mut Vec<AgentEvent>) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let clean = clean_line(line);
        // Sanitizing can join a tag that escape sequences had split.
        let tagged = match clean {
            Cow::Borrowed(_) => tagged,
            Cow::Owned(ref s) => OPEN_FINDER.find(s.as_bytes()).is_some(),
        };
        self.clean_line(clean, tagged, out);
    }

    /// Handles one line as the user sees it (no `\r\n`); `tagged` says whether `<ralph>`
    /// occurs in it.
    fn clean_line(&mut self, clean: Cow<'_, str>, tagged: bool, out: &mut Vec<AgentEvent>) {
        self.line_number += 1;
        let is_code = self.fence.line(clean.as_bytes());
        let kinds = if tagged && !is_code {
            self.signals_outside_spans(clean.as_bytes())
        } else {
            KindSet::default()
        };
        self.emit(cut(clean, DISPLAY_CAP, 0), kinds, out);
    }

    fn long_line(&mut self, prefix: &[u8], long: LongLine, out: &mut Vec<AgentEvent>) {
        self.line_number += 1;
        let (kinds, more_backtick_runs) = long.finish();
        let other_backticks = more_backtick_runs || !FenceState::starts_with_backtick_fence(prefix);
        let is_code = self.fence.long_line(prefix, other_backticks);
        let text = display_line(prefix, self.unseen);
        let kinds = if is_code { KindSet::default() } else { kinds };
        self.emit(text, kinds, out);
    }

    fn emit(&self, text: String, kinds: KindSet, out: &mut Vec<AgentEvent>) {
        if kinds.is_empty() {
            out.push(AgentEvent::Text(text));
            return;
        }
        out.push(AgentEvent::Text(text.clone()));
        for kind in kinds.iter() {
            out.push(AgentEvent::Signal(Signal {
                kind,
                line: text.clone(),
                line_number: self.line_number,
            }));
        }
    }

    /// The signals of a whole prose line that are not inside a code span.
    fn signals_outside_spans(&mut self, line: &[u8]) -> KindSet {
        let mut kinds = KindSet::default();
        let mut spans_known = false;
        for p in OPEN_FINDER.find_iter(line) {
            let Some((kind, _)) = match_tag(&line[p..]) else {
                continue;
            };
            if !spans_known {
                self.spans.clear();
                code_spans(line, &mut self.spans);
                spans_known = true;
            }
            if !self.spans.iter().any(|s| s.contains(&p)) {
                kinds.insert(kind);
            }
        }
        kinds
    }
}

/// The stretch of a chunk, from a line start, that is valid UTF-8 and needs no sanitizing:
/// lines inside it are shown as they are, without a per-line check. Found once per stretch, so
/// ordinary text costs one vectorized pass and one UTF-8 validation per chunk.
struct PlainRegion<'a> {
    bytes: &'a [u8],
    /// Where the region starts in `bytes`.
    start: usize,
    text: &'a str,
    /// The next byte at or after `start` that sanitizing might change.
    suspicious: usize,
}

impl<'a> PlainRegion<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        let mut region = PlainRegion {
            bytes,
            start: 0,
            text: "",
            suspicious: find_suspicious(bytes, 0),
        };
        region.restart(0);
        region
    }

    /// Starts the region at `from`, a line start.
    fn restart(&mut self, from: usize) {
        if from > self.suspicious {
            self.suspicious = find_suspicious(self.bytes, from);
        }
        let candidate = &self.bytes[from..self.suspicious.max(from)];
        self.text = match std::str::from_utf8(candidate) {
            Ok(text) => text,
            Err(e) => std::str::from_utf8(&candidate[..e.valid_up_to()]).unwrap_or_default(),
        };
        self.start = from;
    }

    /// The line `start..nl` as text if it lies in the region, `\r` of CRLF removed. Otherwise
    /// `None`, and the region restarts at the next line.
    fn line(&mut self, start: usize, nl: usize) -> Option<&'a str> {
        if start >= self.start && nl <= self.start + self.text.len() {
            let line = &self.text[start - self.start..nl - self.start];
            return Some(line.strip_suffix('\r').unwrap_or(line));
        }
        self.restart(nl + 1);
        None
    }
}
