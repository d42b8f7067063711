//! The plain-text scanner: splits bytes into lines, shows each line, and finds the signals
//! that are not inside code.
//!
//! Lines that arrive whole within a chunk are handled in place, without copying; only the
//! unfinished line at the end of a chunk is kept, up to [`LINE_CAP`] bytes. Newlines are found
//! with `memchr` and tags with one `memmem` pass per chunk. Whether bytes need sanitizing is
//! decided for long stretches at once (`PlainRegion`): one vectorized pass finds the next byte
//! a terminal could act on, and one UTF-8 validation covers everything before it. So a line
//! with no `<ralph>` costs its share of those passes, a newline search, a glance at its first
//! byte for fences, and the copy into its `Text` event, which is the one allocation a line
//! must cost. Whether a tag sits inside code needs the whole line, so a line's signals are
//! decided, and emitted, when the line ends.
//!
//! Lines are judged as the user sees them, after [`sanitize()`](crate::sanitize()). Lines
//! whose only control sequences are CSI (colours, cursor moves) are cleaned here without the
//! full terminal parser (`strip_csi`), with the same result; anything else goes through
//! `sanitize`. The one exception is a line longer than [`LINE_CAP`]: its bytes are scanned raw
//! as they pass (see `long_line`), and only its start is shown.

use std::borrow::Cow;
use std::ops::Range;

use memchr::{memchr, memchr_iter};

use crate::long_line::LongLine;
use crate::markdown::{FenceState, code_spans};
use crate::sanitize::{clean_line, cut, display_line};
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
                self.plain_line(line, tagged, out);
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
        let clean = strip_csi(line).unwrap_or_else(|| clean_line(line));
        // Sanitizing can join a tag that escape sequences had split.
        let tagged = match clean {
            Cow::Borrowed(_) => tagged,
            Cow::Owned(ref s) => OPEN_FINDER.find(s.as_bytes()).is_some(),
        };
        self.clean_line(clean, tagged, out);
    }

    /// The common case, kept short: a line from a plain region (nothing to sanitize, no
    /// `\r\n`). Without a tag, whether it is code only matters for the fence state.
    #[inline]
    fn plain_line(&mut self, line: &str, tagged: bool, out: &mut Vec<AgentEvent>) {
        if tagged || line.len() > DISPLAY_CAP {
            return self.clean_line(Cow::Borrowed(line), tagged, out);
        }
        if self.fence.may_change(line.as_bytes()) {
            self.fence.line(line.as_bytes());
        }
        self.line_number += 1;
        out.push(AgentEvent::Text(line.to_owned()));
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
            suspicious: next_unclean(bytes, 0),
        };
        region.restart(0);
        region
    }

    /// Starts the region at `from`, a line start.
    fn restart(&mut self, from: usize) {
        if from > self.suspicious {
            self.suspicious = next_unclean(self.bytes, from);
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

/// Bytes a terminal could act on: C0 controls but tab and newline, and DEL; and `0xC2`, the
/// first byte of the C1 controls in UTF-8, which [`first_unclean`] then looks at closely.
#[inline(always)]
const fn maybe_unclean(b: u8) -> bool {
    ((b < 0x20) & (b != b'\t') & (b != b'\n')) | (b == 0x7F) | (b == 0xC2)
}

/// The position of the first byte at or after `from` that sanitizing might change, or
/// `bytes.len()`. Newlines, tabs and the `\r` of a CRLF pair do not count; a C1 control
/// (U+0080–U+009F, `C2 80`–`C2 9F` in UTF-8) does, other non-ASCII text does not.
///
/// Looks at 32 bytes per step with a test the compiler turns into a few SIMD instructions;
/// only a block that holds a candidate is looked at byte by byte.
pub(crate) fn next_unclean(bytes: &[u8], from: usize) -> usize {
    const BLOCK: usize = 32;
    let mut i = from;
    while let Some(block) = bytes.get(i..i + BLOCK) {
        let block: &[u8; BLOCK] = block.try_into().expect("a whole block");
        if block.iter().fold(false, |acc, &b| acc | maybe_unclean(b))
            && let Some(p) = first_unclean(bytes, i, i + BLOCK)
        {
            return p;
        }
        i += BLOCK;
    }
    first_unclean(bytes, i, bytes.len()).unwrap_or(bytes.len())
}

/// The exact, byte-at-a-time test of [`next_unclean`] over `bytes[from..to]`.
fn first_unclean(bytes: &[u8], from: usize, to: usize) -> Option<usize> {
    /// [`maybe_unclean`] as a table: one load per byte in the loop below.
    static MAYBE: [bool; 256] = {
        let mut t = [false; 256];
        let mut b = 0;
        while b < 256 {
            t[b] = maybe_unclean(b as u8);
            b += 1;
        }
        t
    };
    let mut p = from;
    while p < to {
        p += bytes[p..to].iter().position(|&b| MAYBE[usize::from(b)])?;
        let next = bytes.get(p + 1).copied();
        let unclean = match bytes[p] {
            b'\r' => next != Some(b'\n'),
            0xC2 => next.is_none_or(|n| (0x80..=0x9F).contains(&n)),
            _ => true,
        };
        if unclean {
            return Some(p);
        }
        p += 1;
    }
    None
}

/// `line` (no newline) as [`sanitize`](crate::sanitize()) would show it, when it holds
/// nothing but text and CSI sequences (`ESC [` parameters, intermediates, a final byte:
/// colours, cursor moves, erase): borrowed if there is nothing to strip. `None` for anything
/// else (other escapes, other controls, invalid UTF-8), which the full parser handles.
///
/// A terminal (and `vte`) consumes such a CSI sequence whole, printing nothing; the text
/// around it prints as it is. Colour is the control sequence agents print most, so this keeps
/// coloured tool output off the slow path.
fn strip_csi(line: &[u8]) -> Option<Cow<'_, str>> {
    let text = std::str::from_utf8(line).ok()?;
    let mut at = next_unclean(line, 0);
    if at == line.len() {
        return Some(Cow::Borrowed(text));
    }
    let mut out = String::with_capacity(line.len());
    let mut start = 0;
    loop {
        if line[at] != 0x1B || line.get(at + 1) != Some(&b'[') {
            return None;
        }
        out.push_str(&text[start..at]);
        let body = &line[at + 2..];
        let params = body
            .iter()
            .take_while(|b| (0x20..=0x3F).contains(*b))
            .count();
        let fin = *body.get(params)?;
        if !(0x40..=0x7E).contains(&fin) {
            return None;
        }
        start = at + 2 + params + 1;
        at = next_unclean(line, start);
        if at == line.len() {
            out.push_str(&text[start..]);
            return Some(Cow::Owned(out));
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::sanitize::sanitize_bytes;

    /// Pieces of agent output, including every kind of control sequence.
    fn piece() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            4 => "[a-zA-Z0-9 .,:;`~<>/\\-]{0,40}".prop_map(String::into_bytes),
            1 => Just("é → ✓ \u{a0}°".as_bytes().to_vec()),
            2 => ("[0-9;]{0,12}", "[@A-Za-z~]").prop_map(|(p, f)| format!("\x1b[{p}{f}").into_bytes()),
            1 => ("[ -?]{0,6}", 0x40u8..=0x7E).prop_map(|(p, f)| {
                let mut v = format!("\x1b[{p}").into_bytes();
                v.push(f);
                v
            }),
            1 => Just(b"\t".to_vec()),
            1 => prop::sample::select(vec![
                &b"\x1b]0;title\x07"[..], b"\x1b", b"\x1b[", b"\x1b[31", b"\x1b(B", b"\r", b"\x07",
                b"\x7f", b"\x00", "\u{9b}31m".as_bytes(), "\u{85}".as_bytes(), b"\xc2", b"\xff",
                b"\x1b[1\x07m", b"\x1b[1\tm", "\x1b[1\u{e9}m".as_bytes(),
            ]).prop_map(<[u8]>::to_vec),
        ]
    }

    fn line() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(piece(), 0..8).prop_map(|p| p.concat())
    }

    /// The obvious definition: the first byte a terminal could act on.
    fn reference(bytes: &[u8], from: usize) -> usize {
        (from..bytes.len())
            .find(|&p| match bytes[p] {
                b'\t' | b'\n' => false,
                b'\r' => bytes.get(p + 1) != Some(&b'\n'),
                0xC2 => bytes.get(p + 1).is_none_or(|n| (0x80..=0x9F).contains(n)),
                b => b < 0x20 || b == 0x7F,
            })
            .unwrap_or(bytes.len())
    }

    #[test]
    fn next_unclean_finds_each_unclean_byte_at_every_position() {
        for len in [1, 31, 32, 33, 64, 100] {
            for at in 0..len {
                for bad in [
                    &[0u8][..],
                    b"\r",
                    b"\x1b",
                    b"\x7f",
                    "\u{85}".as_bytes(),
                    "\u{9f}".as_bytes(),
                ] {
                    let mut text = vec![b'a'; len];
                    text.splice(at..(at + bad.len()).min(len), bad.iter().copied());
                    assert_eq!(next_unclean(&text, 0), at, "{bad:?} at {at} of {len}");
                }
                for fine in [
                    &b"\t"[..],
                    b"\n",
                    b"\r\n",
                    "é".as_bytes(),
                    "\u{a0}".as_bytes(),
                    "→".as_bytes(),
                ] {
                    let mut text = vec![b'a'; len + 3];
                    text.splice(at..at + fine.len(), fine.iter().copied());
                    assert_eq!(
                        next_unclean(&text, 0),
                        text.len(),
                        "{fine:?} at {at} of {len}"
                    );
                }
            }
        }
    }

    #[test]
    fn strip_csi_removes_colours_and_leaves_other_escapes_to_the_parser() {
        let stripped = |s: &str| strip_csi(s.as_bytes()).map(Cow::into_owned);
        assert_eq!(stripped("plain"), Some("plain".into()));
        assert_eq!(
            stripped("\x1b[1m\x1b[32m   Compiling\x1b[0m x"),
            Some("   Compiling x".into())
        );
        assert_eq!(
            stripped("test ... \x1b[32mok\x1b[0m"),
            Some("test ... ok".into())
        );
        assert_eq!(
            stripped("\x1b[38;2;255;0;0mtrue\x1b[m\x1b[?25l"),
            Some("true".into())
        );
        assert_eq!(stripped("\x1b]0;title\x07after"), None);
        assert_eq!(stripped("cut \x1b[31"), None);
        assert_eq!(stripped("50%\r100%"), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        #[test]
        fn next_unclean_agrees_with_the_obvious_definition(
            bytes in prop::collection::vec(prop::sample::select(vec![
                b'a', b' ', b'\t', b'\n', b'\r', 0, 0x1b, 0x7f, 0x80, 0x85, 0x9f, 0xa0, 0xc2, 0xc3, 0xe2, 0xff,
            ]), 0..200),
            from in 0usize..200,
        ) {
            let from = from.min(bytes.len());
            prop_assert_eq!(next_unclean(&bytes, from), reference(&bytes, from));
        }

        #[test]
        fn a_clean_line_is_what_sanitize_shows(line in line()) {
            if next_unclean(&line, 0) == line.len()
                && let Ok(text) = std::str::from_utf8(&line)
            {
                prop_assert_eq!(sanitize_bytes(&line), text);
            }
        }

        #[test]
        fn strip_csi_agrees_with_sanitize_whenever_it_answers(line in line()) {
            if let Some(clean) = strip_csi(&line) {
                let want = sanitize_bytes(&line);
                prop_assert_eq!(clean.as_ref(), want.as_str());
            }
        }
    }
}
