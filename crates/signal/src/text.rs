//! The plain-text scanner: splits bytes into lines, shows each line, and finds the signals
//! that are not inside code.
//!
//! Most lines need nothing but to be shown, and the scanner never looks at those one by one.
//! A chunk is worked through in windows of whole lines. One pass over a window
//! ([`blocks::TextPass`]) marks, in bit masks, every byte a terminal could act on, every `<`,
//! every run of three fence characters and the newline of every line longer than
//! [`DISPLAY_CAP`], and counts the newlines; `simdutf8` checks that the window is valid
//! UTF-8. Only the lines those
//! candidates confirm stop the scanner: one holding `<ralph>`, ```` ``` ```` or `~~~` (every
//! fence line does), something to sanitize (a CRLF ending included), or too many bytes. A stop
//! line shown as it is (a fence line, a line whose tags sit in code) only has its fence state
//! and signals taken; the lines up to the next line shown otherwise are copied, as one piece,
//! into the chunk's display text. One [`AgentEvent::Text`] carries every line one `feed` shows,
//! joined by `\n`, until a signal needs an event of its own right after its line.
//!
//! Lines are judged as the user sees them, after [`sanitize()`](crate::sanitize()). A line
//! with anything to sanitize is looked at on its own: if its only control sequences are CSI
//! (colours, cursor moves) it is cleaned here without the full terminal parser (`strip_csi`),
//! with the same result; anything else goes through `sanitize`. Only the unfinished line at the
//! end of a chunk is kept, up to [`LINE_CAP`] bytes; a longer line's bytes are scanned raw as
//! they pass (see `long_line`), and only its start is shown. Whether a tag sits inside code
//! needs the whole line, so a line's signals are decided, and emitted, when the line ends.

use std::borrow::Cow;
use std::ops::Range;

use memchr::{memchr, memrchr};

use crate::blocks::{self, TextBlock};
use crate::long_line::LongLine;
use crate::markdown::{FenceState, code_spans};
use crate::sanitize::{clean_line, cut, cut_into, display_line};
use crate::tag::{KindSet, OPEN, OPEN_FINDER, match_tag};
use crate::{AgentEvent, DISPLAY_CAP, LINE_CAP, Signal};

/// Splits plain text into lines for [`AgentEvent::Text`] and finds [`Signal`]s in them.
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
    /// Display lines not yet sent, each followed by `\n`.
    shown: String,
    /// Scratch for a window's classes, kept between windows.
    blocks: Vec<TextBlock>,
    /// Scratch for a line with its colour codes stripped.
    stripped: String,
}

/// Where the lines that need a closer look are, in one window: one pass
/// ([`blocks::TextPass`]) classifies every byte and marks the candidates; a candidate is
/// confirmed byte by byte when the scanner gets to it.
struct Stops<'a> {
    bytes: &'a [u8],
    blocks: &'a [TextBlock],
}

impl<'a> Stops<'a> {
    /// The first byte at or after `pos`, before `end`, of a line that must be looked at on
    /// its own; `end` if there is none.
    fn next(&self, pos: usize, end: usize) -> usize {
        let mut block = pos / 64;
        let mut bits = self.blocks[block].candidates & (!0 << (pos % 64));
        loop {
            while bits != 0 {
                let at = block * 64 + bits.trailing_zeros() as usize;
                if at >= end {
                    return end;
                }
                if self.confirmed(at) {
                    return at;
                }
                bits &= bits - 1;
            }
            block += 1;
            if block * 64 >= end {
                return end;
            }
            bits = self.blocks[block].candidates;
        }
    }

    /// Whether the candidate at `at` really stops its line.
    fn confirmed(&self, at: usize) -> bool {
        let bytes = self.bytes;
        match bytes[at] {
            b'<' => bytes[at..].starts_with(OPEN),
            // The third of three fence characters in a row: they must be the same.
            f @ (b'`' | b'~') => bytes[at - 2] == f && bytes[at - 1] == f,
            // The end of a long line, or a `\r` (of a CRLF line end, or a lone one).
            b'\n' | b'\r' => true,
            0xC2 => is_c1_lead(bytes, at),
            _ => true,
        }
    }

    /// What the special bytes of the line `bytes[start..nl]` say about it, in one pass.
    fn facts(&self, start: usize, nl: usize) -> LineFacts {
        let bytes = self.bytes;
        let mut facts = LineFacts::default();
        for at in self.special(start, nl) {
            match bytes[at] {
                b'<' => {
                    facts.open = true;
                    facts.tagged |= bytes[at..].starts_with(OPEN);
                }
                b'\r' if at + 1 == nl => facts.crlf = true,
                0xC2 if !is_c1_lead(bytes, at) => {}
                _ => facts.unclean = true,
            }
        }
        facts
    }

    /// The special bytes (`TextMasks::special` in `blocks`) in `from..to`, in order.
    fn special(&self, from: usize, to: usize) -> SpecialBytes<'a> {
        if from >= to {
            return SpecialBytes {
                blocks: self.blocks,
                block: 0,
                last: 0,
                last_bits: 0,
                bits: 0,
            };
        }
        let (block, last) = (from / 64, (to - 1) / 64);
        let last_bits = !0 >> (63 - (to - 1) % 64);
        let mut bits = self.blocks[block].masks.special & (!0 << (from % 64));
        if block == last {
            bits &= last_bits;
        }
        SpecialBytes {
            blocks: self.blocks,
            block,
            last,
            last_bits,
            bits,
        }
    }

    /// Where the line holding `pos` starts: just after the newline before `pos`, or 0.
    fn line_start(&self, pos: usize) -> usize {
        let (mut block, bit) = (pos / 64, pos % 64);
        let mut bits = self.blocks[block].masks.newline & !(!0 << bit);
        while bits == 0 {
            if block == 0 {
                return 0;
            }
            block -= 1;
            bits = self.blocks[block].masks.newline;
        }
        block * 64 + 63 - bits.leading_zeros() as usize + 1
    }

    /// The newline that ends the line holding `pos` (the window ends in one).
    fn line_end(&self, pos: usize) -> usize {
        let (mut block, bit) = (pos / 64, pos % 64);
        let mut bits = self.blocks[block].masks.newline & (!0 << bit);
        while bits == 0 {
            block += 1;
            bits = self.blocks[block].masks.newline;
        }
        block * 64 + bits.trailing_zeros() as usize
    }

    /// Newlines in `bytes[from..to]`: lines completed.
    fn newlines(&self, from: usize, to: usize) -> u64 {
        self.newlines_before(to) - self.newlines_before(from)
    }

    /// Newlines in `bytes[..pos]`.
    fn newlines_before(&self, pos: usize) -> u64 {
        let (block, bit) = (pos / 64, pos % 64);
        let Some(b) = self.blocks.get(block) else {
            return self.blocks.last().map_or(0, |b| {
                u64::from(b.lines_before) + u64::from(b.masks.newline.count_ones())
            });
        };
        u64::from(b.lines_before) + u64::from((b.masks.newline & !(!0 << bit)).count_ones())
    }
}

/// What a line's special bytes say about it: [`Stops::facts`].
#[derive(Debug, Default, Clone, Copy)]
struct LineFacts {
    /// It holds `<`.
    open: bool,
    /// It holds `<ralph>`.
    tagged: bool,
    /// It holds something sanitizing acts on, other than the `\r` of a CRLF end.
    unclean: bool,
    /// It ends in `\r` (of a CRLF end).
    crlf: bool,
}

impl LineFacts {
    /// Whether the line, `len` bytes, is shown exactly as it is: nothing to sanitize (not
    /// even the `\r` of a CRLF end), not too long.
    fn shown_as_is(self, len: usize) -> bool {
        len <= DISPLAY_CAP && !self.unclean && !self.crlf
    }
}

/// Where the special bytes of a span of a window are: [`Stops::special`].
struct SpecialBytes<'a> {
    blocks: &'a [TextBlock],
    block: usize,
    /// The span's last block, and which of its bits stand for bytes in the span.
    last: usize,
    last_bits: u64,
    /// The block's special bytes in the span, not given yet.
    bits: u64,
}

impl Iterator for SpecialBytes<'_> {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        while self.bits == 0 {
            if self.block >= self.last {
                return None;
            }
            self.block += 1;
            self.bits = self.blocks[self.block].masks.special;
            if self.block == self.last {
                self.bits &= self.last_bits;
            }
        }
        let at = self.block * 64 + self.bits.trailing_zeros() as usize;
        self.bits &= self.bits - 1;
        Some(at)
    }
}

/// The length of the CSI sequence (`ESC [`, parameters and intermediates, a final byte) at
/// the start of `bytes`, which starts with `ESC`; `None` if it is not one.
fn csi_len(bytes: &[u8]) -> Option<usize> {
    if bytes.get(1) != Some(&b'[') {
        return None;
    }
    let params = bytes[2..]
        .iter()
        .take_while(|b| (0x20..=0x3F).contains(*b))
        .count();
    let fin = *bytes.get(2 + params)?;
    (0x40..=0x7E).contains(&fin).then_some(2 + params + 1)
}

/// Whether the `0xC2` at `at` starts a C1 control (`C2 80`–`C2 9F`), as
/// [`next_unclean`](crate::sanitize::next_unclean) judges it.
fn is_c1_lead(bytes: &[u8], at: usize) -> bool {
    bytes.get(at + 1).is_none_or(|n| (0x80..=0x9F).contains(n))
}

/// How many bytes of lines the scanner works through at a time: every pass over them then
/// reads from the L1 cache.
const WINDOW: usize = 16 * 1024;

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
            self.line_number += 1;
            rest = &rest[nl + 1..];
        }

        self.shown.reserve(rest.len());
        // Every pass over a window finds it in the L1 cache; over a whole chunk they would
        // each read it from L2. A window is some `WINDOW` bytes and the rest of the line they
        // end in, classified in two pieces: finding its end first, from the back, would read
        // memory not yet in any cache, and a window cut at the last newline of the first piece
        // would leave bytes to classify twice.
        let mut blocks = std::mem::take(&mut self.blocks);
        let mut pos = 0;
        while pos < rest.len() {
            let cap = (pos + WINDOW).min(rest.len());
            let mut pass = blocks::TextPass::default();
            pass.push(&rest[pos..cap], DISPLAY_CAP, &mut blocks);
            let window_end = match memchr(b'\n', &rest[cap..]) {
                Some(nl) => {
                    pass.push(&rest[cap..cap + nl + 1], DISPLAY_CAP, &mut blocks);
                    cap + nl + 1
                }
                // What follows the last newline waits for the next chunk (the pass classified
                // it with the window; the UTF-8 check stops at the window's end).
                None => match last_newline(&blocks) {
                    Some(i) => pos + i + 1,
                    None => break,
                },
            };
            self.classified_lines(&rest[pos..window_end], &blocks, out);
            pos = window_end;
        }
        self.blocks = blocks;
        self.flush(out);
        self.extend_partial(&rest[pos..]);
    }

    /// Complete lines, each ending in a newline: a window of a chunk.
    ///
    /// Lines are counted once for the whole window, except where a signal needs the number
    /// of its line: `counted` is where the count stands, `self.line_number` the lines before it.
    fn lines(&mut self, window: &[u8], out: &mut Vec<AgentEvent>) {
        let mut blocks = std::mem::take(&mut self.blocks);
        blocks::TextPass::default().push(window, DISPLAY_CAP, &mut blocks);
        self.classified_lines(window, &blocks, out);
        self.blocks = blocks;
    }

    /// [`lines`](Self::lines) once the pass has classified `window` into `blocks`, which may
    /// go on past its end.
    fn classified_lines(&mut self, window: &[u8], blocks: &[TextBlock], out: &mut Vec<AgentEvent>) {
        let end = window.len();
        let stops = Stops {
            bytes: window,
            blocks,
        };
        let mut counted = 0;
        let mut pos = 0;
        while pos < end {
            let base = pos;
            let valid = valid_prefix(&window[pos..]);
            let valid_end = if valid.len() == end - pos {
                end
            } else {
                memrchr(b'\n', valid.as_bytes()).map_or(pos, |i| pos + i + 1)
            };
            // Where the lines not yet copied start (`pos`), and where the search goes on
            // (`from`). A line shown as it is (a fence line, a line whose tags sit in code)
            // stays in the copy: only its fence state and its signals are taken, in order.
            let mut from = pos;
            while from < valid_end {
                let stop = stops.next(from, valid_end);
                if stop >= valid_end {
                    break;
                }
                let start = stops.line_start(stop).max(from);
                let nl = stops.line_end(stop);
                from = nl + 1;
                if window[stop] == 0x1B
                    && self.coloured_line(
                        &valid[pos - base..nl - base],
                        start - pos,
                        stops.special(start, nl).map(|at| at - pos),
                    )
                {
                    pos = nl + 1;
                    continue;
                }
                let facts = stops.facts(start, nl);
                if facts.shown_as_is(nl - start) {
                    let line = &window[start..nl];
                    let is_code = self.fence.line(line);
                    if is_code || !facts.tagged {
                        continue;
                    }
                    // The window's pass found every `<` already.
                    let opens = stops.special(start, nl).map(|at| at - start);
                    let kinds = self.signals_outside_spans(line, opens);
                    if kinds.is_empty() {
                        continue;
                    }
                    self.shown.push_str(&valid[pos - base..nl + 1 - base]);
                    self.line_number += stops.newlines(counted, start);
                    self.signals(&valid[start - base..nl - base], kinds, out);
                    self.line_number += 1;
                    counted = nl + 1;
                } else {
                    self.shown.push_str(&valid[pos - base..start - base]);
                    let line = Line {
                        start,
                        nl,
                        text: Some(&valid[start - base..nl - base]),
                    };
                    self.stop_line(window, line, facts, &stops, &mut counted, out);
                }
                pos = nl + 1;
            }
            if pos < valid_end {
                self.shown.push_str(&valid[pos - base..valid_end - base]);
                pos = valid_end;
            }
            if pos < end {
                // A line that is not valid UTF-8.
                let nl = stops.line_end(pos);
                let line = Line {
                    start: pos,
                    nl,
                    text: None,
                };
                let facts = stops.facts(pos, nl);
                self.stop_line(window, line, facts, &stops, &mut counted, out);
                pos = nl + 1;
            }
        }
        self.line_number += stops.newlines(counted, end);
    }

    /// Shows `text`, lines shown as they are up to `line_at` and then one line (no newline; a
    /// CRLF's `\r` is left off), when all the line holds to sanitize is CSI sequences
    /// (colours) and it holds no `<`: the commonest line to clean in tool output, stripped
    /// straight into the lines shown in one walk over its special bytes (`special`, as
    /// offsets in `text`), the lines before it copied in the same piece as its first
    /// characters. `false`, with nothing shown, for any other line.
    fn coloured_line(
        &mut self,
        text: &str,
        line_at: usize,
        special: impl Iterator<Item = usize>,
    ) -> bool {
        let text = text.strip_suffix('\r').unwrap_or(text);
        if text.len() - line_at > DISPLAY_CAP {
            return false;
        }
        let mark = self.shown.len();
        let end = text.len();
        if strip_csi(text, special.take_while(|&at| at < end), &mut self.shown) != Some(false) {
            self.shown.truncate(mark);
            return false;
        }
        self.fence.line(&self.shown.as_bytes()[mark + line_at..]);
        self.shown.push('\n');
        true
    }

    /// One line of a window that needs a closer look.
    fn stop_line(
        &mut self,
        window: &[u8],
        line: Line<'_>,
        facts: LineFacts,
        stops: &Stops<'_>,
        counted: &mut usize,
        out: &mut Vec<AgentEvent>,
    ) {
        let raw = &window[line.start..line.nl];
        let tagged = facts.tagged;
        let clean = line.text.filter(|_| !facts.unclean);
        // Sanitizing only removes bytes: a line with no `<` cannot come to hold a tag.
        let may_signal = tagged || raw.len() > LINE_CAP || (clean.is_none() && facts.open);
        if may_signal {
            self.line_number += stops.newlines(*counted, line.start);
        }
        match clean {
            _ if raw.len() > LINE_CAP => {
                // The same path as a long line arriving in pieces, so chunking cannot matter.
                self.extend_partial(raw);
                self.end_partial_line(out);
            }
            Some(text) => {
                let text = text.strip_suffix('\r').unwrap_or(text);
                self.clean_line(Cow::Borrowed(text), tagged, out);
            }
            None => {
                let specials = |text: &str| {
                    stops
                        .special(line.start, line.start + text.len())
                        .map(|at| at - line.start)
                };
                let text = line.text.map(|t| t.strip_suffix('\r').unwrap_or(t));
                if let Some(text) = text
                    && !may_signal
                    && text.len() <= DISPLAY_CAP
                {
                    // No tag can form, nothing to cut: colours alone take the short path, and
                    // anything else (stripping would fail the same way) the full parser.
                    if !self.coloured_line(text, 0, specials(text)) {
                        self.whole_line(raw, tagged, out);
                    }
                    return;
                }
                let mut stripped = std::mem::take(&mut self.stripped);
                stripped.clear();
                match text {
                    Some(text) if strip_csi(text, specials(text), &mut stripped).is_some() => {
                        // Stripping can join a tag that colour codes had split.
                        let tagged = may_signal && OPEN_FINDER.find(stripped.as_bytes()).is_some();
                        self.clean_line(Cow::Borrowed(&stripped), tagged, out);
                    }
                    _ => self.whole_line(raw, tagged, out),
                }
                self.stripped = stripped;
            }
        }
        if may_signal {
            self.line_number += 1;
            *counted = line.nl + 1;
        }
    }

    /// Ends the text: an unterminated last line is emitted. The scanner is then ready for a
    /// new, independent text (line numbers and fences start over).
    pub(crate) fn finish(&mut self, out: &mut Vec<AgentEvent>) {
        if !self.partial.is_empty() {
            self.end_partial_line(out);
        }
        self.flush(out);
        self.line_number = 0;
        self.fence = FenceState::default();
    }

    /// Bytes held between calls.
    pub(crate) fn buffered_len(&self) -> usize {
        self.partial.len() + self.long.as_ref().map_or(0, LongLine::buffered_len)
    }

    /// Sends the lines shown so far as one event.
    fn flush(&mut self, out: &mut Vec<AgentEvent>) {
        if self.shown.pop().is_some() {
            out.push(AgentEvent::Text(std::mem::take(&mut self.shown)));
        }
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
        let mut line = std::mem::take(&mut self.partial);
        match self.long.take() {
            Some(long) => self.long_line(&line, long, out),
            None => {
                // Whole now, the line takes the path of a window's lines; the caller counts it.
                line.push(b'\n');
                self.lines(&line, out);
                self.line_number -= 1;
            }
        }
        self.partial = line;
        self.partial.clear();
        self.unseen = 0;
        if self.partial.capacity() > 2 * LINE_CAP {
            self.partial.shrink_to(LINE_CAP);
        }
    }

    /// Handles one raw line of at most [`LINE_CAP`] bytes with something to sanitize other
    /// than colours (a line with colours alone is cleaned by [`strip_csi`]), or that is not
    /// valid UTF-8; `tagged` says whether `<ralph>` occurs in its raw bytes.
    ///
    /// Fences, code spans and tags are read from the sanitized line, what the user sees: a tag
    /// wrapped in colour codes counts, one hidden in a terminal title does not.
    fn whole_line(&mut self, line: &[u8], tagged: bool, out: &mut Vec<AgentEvent>) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let clean = clean_line(line);
        // Sanitizing can join a tag that escape sequences had split; it only removes bytes,
        // so without a `<` there is none to join.
        let tagged = match clean {
            Cow::Borrowed(_) => tagged,
            Cow::Owned(ref s) => {
                memchr(b'<', line).is_some() && OPEN_FINDER.find(s.as_bytes()).is_some()
            }
        };
        self.clean_line(clean, tagged, out);
    }

    /// Handles one line as the user sees it (no `\r\n`); `tagged` says whether `<ralph>`
    /// occurs in it.
    fn clean_line(&mut self, clean: Cow<'_, str>, tagged: bool, out: &mut Vec<AgentEvent>) {
        let is_code = self.fence.line(clean.as_bytes());
        let kinds = if tagged && !is_code {
            self.signals_outside_spans(clean.as_bytes(), OPEN_FINDER.find_iter(clean.as_bytes()))
        } else {
            KindSet::default()
        };
        if clean.len() <= DISPLAY_CAP {
            self.emit(&clean, kinds, out);
        } else if kinds.is_empty() {
            cut_into(&mut self.shown, &clean, DISPLAY_CAP, 0);
            self.shown.push('\n');
        } else {
            self.emit(&cut(clean, DISPLAY_CAP, 0), kinds, out);
        }
    }

    fn long_line(&mut self, prefix: &[u8], long: LongLine, out: &mut Vec<AgentEvent>) {
        let (kinds, more_backtick_runs) = long.finish();
        let other_backticks = more_backtick_runs || !FenceState::starts_with_backtick_fence(prefix);
        let is_code = self.fence.long_line(prefix, other_backticks);
        let text = display_line(prefix, self.unseen);
        let kinds = if is_code { KindSet::default() } else { kinds };
        self.emit(&text, kinds, out);
    }

    /// Shows one line; its signals, if any, follow the event that holds it. The line is
    /// number `self.line_number + 1`.
    fn emit(&mut self, text: &str, kinds: KindSet, out: &mut Vec<AgentEvent>) {
        // One allocation for the line and its newline when `shown` was just handed on (each
        // small delta of a streaming agent ends one), not one and a regrowth.
        self.shown.reserve(text.len() + 1);
        self.shown.push_str(text);
        self.shown.push('\n');
        if !kinds.is_empty() {
            self.signals(text, kinds, out);
        }
    }

    /// Sends the lines shown so far, the last of them `text`, and then `text`'s signals. The
    /// line is number `self.line_number + 1`.
    fn signals(&mut self, text: &str, kinds: KindSet, out: &mut Vec<AgentEvent>) {
        self.flush(out);
        for kind in kinds.iter() {
            out.push(AgentEvent::Signal(Signal {
                kind,
                line: text.to_owned(),
                line_number: self.line_number + 1,
            }));
        }
    }

    /// The signals of a whole prose line that are not inside a code span; `opens` holds,
    /// in order, every place a tag starts in `line` (other places are passed over).
    fn signals_outside_spans(
        &mut self,
        line: &[u8],
        opens: impl IntoIterator<Item = usize>,
    ) -> KindSet {
        let mut kinds = KindSet::default();
        let mut spans_known = false;
        for p in opens {
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

/// Where the last newline of the bytes `blocks` classify is.
fn last_newline(blocks: &[TextBlock]) -> Option<usize> {
    let (i, b) = blocks
        .iter()
        .enumerate()
        .rev()
        .find(|(_, b)| b.masks.newline != 0)?;
    Some(i * 64 + 63 - b.masks.newline.leading_zeros() as usize)
}

/// The longest prefix of `bytes` that is valid UTF-8.
///
/// `simdutf8` validates with SIMD chosen at run time (AVX2 here), several times faster than
/// `std::str::from_utf8` on text with non-ASCII characters in it, which is most agent output.
fn valid_prefix(bytes: &[u8]) -> &str {
    match simdutf8::basic::from_utf8(bytes) {
        Ok(text) => text,
        // Only the slower `compat` validator says where the valid part ends.
        Err(_) => match simdutf8::compat::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default(),
        },
    }
}

/// A line of a window, `start..nl`, and its text when it is valid UTF-8.
#[derive(Clone, Copy)]
struct Line<'a> {
    start: usize,
    nl: usize,
    text: Option<&'a str>,
}

/// `text` (one line, valid UTF-8, no line end) appended to `out` as
/// [`sanitize`](crate::sanitize()) would show it, when all it holds to sanitize is CSI
/// sequences (`ESC [` parameters, intermediates, a final byte: colours, cursor moves, erase),
/// and whether it holds a `<` outside them; `None` for anything else (other escapes, other
/// controls), which the full parser handles, with `out` holding part of `text` to be cut off.
/// `special` gives, in order, where the special bytes of `text` are
/// (`TextMasks::special` in `blocks`): the window's pass has found them already.
///
/// A terminal (and `vte`) consumes such a CSI sequence whole, printing nothing; the text
/// around it prints as it is. Colour is the control sequence agents print most, so this keeps
/// coloured tool output off the slow path.
fn strip_csi(text: &str, special: impl Iterator<Item = usize>, out: &mut String) -> Option<bool> {
    let line = text.as_bytes();
    let mut open = false;
    // Where the text not yet copied starts: a special byte before it is inside a sequence.
    let mut copied = 0;
    for at in special {
        if at < copied {
            continue;
        }
        match line[at] {
            0x1B => {
                let len = csi_len(&line[at..])?;
                if at > copied {
                    out.push_str(&text[copied..at]);
                }
                copied = at + len;
            }
            // Valid UTF-8: a `C2` has its second byte in the line.
            0xC2 if !is_c1_lead(line, at) => {}
            b'<' => open = true,
            _ => return None,
        }
    }
    if copied < line.len() {
        out.push_str(&text[copied..]);
    }
    Some(open)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::sanitize::{next_unclean, sanitize_bytes};

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

    /// [`strip_csi`] of `text`, its special bytes found one at a time.
    fn stripped(text: &str) -> Option<String> {
        let special = text
            .bytes()
            .enumerate()
            .filter(|&(_, b)| blocks::is_special(b));
        let mut out = String::new();
        strip_csi(text, special.map(|(at, _)| at), &mut out).map(|_| out)
    }

    fn line() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(piece(), 0..8).prop_map(|p| p.concat())
    }

    #[test]
    fn strip_csi_removes_colours_and_leaves_other_escapes_to_the_parser() {
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
        fn a_clean_line_is_what_sanitize_shows(line in line()) {
            if next_unclean(&line, 0) == line.len()
                && let Ok(text) = std::str::from_utf8(&line)
            {
                prop_assert_eq!(sanitize_bytes(&line), text);
            }
        }

        #[test]
        fn strip_csi_agrees_with_sanitize_whenever_it_answers(line in line()) {
            if let Some(clean) = std::str::from_utf8(&line).ok().and_then(stripped) {
                let want = sanitize_bytes(&line);
                prop_assert_eq!(clean, want);
            }
        }
    }

    /// The lines a scanner shows when fed `pieces`, one `Text` line each.
    fn shown_lines(pieces: &[&[u8]]) -> Vec<String> {
        let mut scanner = TextScanner::default();
        let mut out = Vec::new();
        for piece in pieces {
            scanner.feed(piece, &mut out);
        }
        scanner.finish(&mut out);
        out.iter()
            .filter_map(|e| match e {
                AgentEvent::Text(t) => Some(t.split('\n').map(str::to_owned).collect::<Vec<_>>()),
                _ => None,
            })
            .flatten()
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Windows end near every 16 KiB, or after the line that crosses it, and a chunk's
        /// last window before its unfinished line: however the text is cut into chunks
        /// (inside a character too), the lines shown are the same, and the same as the text
        /// shown in one piece.
        #[test]
        fn any_cut_into_chunks_shows_the_same_lines(
            lines in prop::collection::vec(
                prop_oneof![
                    4 => (0usize..120).prop_map(|n| "é → ✓ ".repeat(n)),
                    1 => (2000usize..3000).prop_map(|n| "caché→".repeat(n)),
                    1 => Just("```".to_owned()),
                    1 => Just("\x1b[32mok\x1b[0m é".to_owned()),
                ],
                1..60,
            ),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 1..6),
        ) {
            let text = lines.join("\n").into_bytes();
            let mut at: Vec<usize> = cuts.iter().map(|c| c.index(text.len() + 1)).collect();
            at.sort_unstable();
            let mut pieces = Vec::new();
            let mut from = 0;
            for cut in at.into_iter().chain([text.len()]) {
                pieces.push(&text[from..cut]);
                from = cut;
            }
            // A newline ends a line; it does not start one.
            let body = text.strip_suffix(b"\n").unwrap_or(&text);
            let want: Vec<String> = if text.is_empty() {
                Vec::new()
            } else {
                body.split(|&b| b == b'\n')
                    .map(|l| cut(Cow::Owned(sanitize_bytes(l)), DISPLAY_CAP, 0))
                    .collect()
            };
            prop_assert_eq!(shown_lines(&[&text[..]]), want);
            prop_assert_eq!(shown_lines(&pieces), shown_lines(&[&text[..]]));
        }
    }

    proptest! {
        // Texts of up to 40 lines, some of them kilobytes long: fewer cases.
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// The lines shown in bulk are exactly what showing each line on its own gives: the
        /// line sanitized, its `\r\n` ending removed, cut to [`DISPLAY_CAP`].
        #[test]
        fn every_line_is_shown_as_sanitize_shows_it(
            lines in prop::collection::vec(
                prop_oneof![
                    6 => line(),
                    1 => Just(b"```rust".to_vec()),
                    1 => Just(b"~~~".to_vec()),
                    1 => Just(b"say <ralph>DONE</ralph> `<ralph>GUTTER</ralph>`".to_vec()),
                    1 => Just(b"\x1b[1m<ral\x1b[0mph>QUESTION</ralph>".to_vec()),
                    1 => (1usize..3 * DISPLAY_CAP).prop_map(|n| vec![b'x'; n]),
                    1 => line().prop_map(|mut l| { l.extend_from_slice(b"\r"); l }),
                ],
                0..40,
            ),
            cut_at in 0usize..4096,
        ) {
            let text = lines.join(&b'\n');
            let mut scanner = TextScanner::default();
            let mut out = Vec::new();
            let cut_at = cut_at.min(text.len());
            scanner.feed(&text[..cut_at], &mut out);
            scanner.feed(&text[cut_at..], &mut out);
            scanner.finish(&mut out);
            let shown: Vec<String> = out
                .iter()
                .filter_map(|e| match e {
                    AgentEvent::Text(t) => Some(t.split('\n').map(str::to_owned).collect::<Vec<_>>()),
                    _ => None,
                })
                .flatten()
                .collect();
            // A newline ends a line; it does not start one.
            let body = text.strip_suffix(b"\n").unwrap_or(&text);
            let want: Vec<String> = if text.is_empty() {
                Vec::new()
            } else {
                body.split(|&b| b == b'\n')
                    .map(|l| {
                        let l = l.strip_suffix(b"\r").unwrap_or(l);
                        cut(Cow::Owned(sanitize_bytes(l)), DISPLAY_CAP, 0)
                    })
                    .collect()
            };
            // A signal's line number points at its line.
            for e in &out {
                if let AgentEvent::Signal(signal) = e {
                    let n = usize::try_from(signal.line_number).unwrap();
                    prop_assert_eq!(shown.get(n.wrapping_sub(1)), Some(&signal.line));
                }
            }
            prop_assert_eq!(shown, want);
        }

    }
}
