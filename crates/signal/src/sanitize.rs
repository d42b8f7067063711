//! Strips terminal control sequences from agent text before it is displayed.
//!
//! The engine is the `vte` parser (the one Alacritty uses), so a sequence is removed whole,
//! parameters and all, exactly where a terminal would consume it. What is removed: CSI (colours,
//! cursor moves, clear screen), OSC (titles, OSC 8 hyperlinks, whose link text is kept, OSC 52
//! clipboard writes), DCS, SOS, PM and APC strings, bare ESC and two-byte ESC sequences, C1
//! controls (U+0080–U+009F; the 8-bit CSI, OSC, DCS, SOS, PM, APC and ST introducers are read
//! as their 7-bit forms first, so their parameters go too), DEL, and every C0 control except
//! tab and newline. Invalid UTF-8 becomes U+FFFD.
//!
//! A carriage return is what a progress bar uses to redraw its line, so the text after the
//! last `\r` of a line replaces the text before it, as a terminal would show it (a `\r` at the
//! end of a line, as in CRLF, changes nothing).
//!
//! A sequence left open at the end of the input (an OSC with no terminator) swallows the rest
//! of that input, but each call starts afresh: a stray ESC in one line cannot hide the next.

use std::borrow::Cow;

use memchr::memchr_iter;

use crate::DISPLAY_CAP;

/// Returns `text` with every terminal control sequence stripped (newlines and tabs kept).
pub fn sanitize(text: &str) -> String {
    // Most text has nothing to strip: two vector passes, not the terminal parser. (The `\r`
    // of a CRLF, which `next_unclean` lets through, becomes a plain newline here.)
    let bytes = text.as_bytes();
    if next_unclean(bytes, 0) == bytes.len() && memchr::memchr(b'\r', bytes).is_none() {
        return text.to_owned();
    }
    sanitize_bytes(text.as_bytes())
}

/// Returns `bytes`, read as lossy UTF-8, with every terminal control sequence stripped
/// (newlines and tabs kept).
pub fn sanitize_bytes(bytes: &[u8]) -> String {
    let bytes = seven_bit_introducers(bytes);
    let (complete, cut_char) = split_incomplete_char(&bytes);
    let mut strip = Strip {
        out: String::with_capacity(complete.len()),
        line_start: 0,
        after_cr: false,
    };
    vte::Parser::new().advance(&mut strip, complete);
    if cut_char {
        vte::Perform::print(&mut strip, char::REPLACEMENT_CHARACTER);
    }
    strip.out
}

/// vte holds back a UTF-8 sequence cut by the end of its input, waiting for more; this input
/// is all there is, so that sequence is split off here and shown as U+FFFD.
fn split_incomplete_char(bytes: &[u8]) -> (&[u8], bool) {
    let start = bytes.len().saturating_sub(3);
    for i in (start..bytes.len()).rev() {
        let b = bytes[i];
        if b & 0xC0 == 0x80 {
            continue;
        }
        let need = match b {
            0xC2..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF4 => 4,
            _ => return (bytes, false),
        };
        return if bytes.len() - i < need {
            (&bytes[..i], true)
        } else {
            (bytes, false)
        };
    }
    (bytes, false)
}

/// Rewrites the UTF-8-encoded C1 introducers (U+009B CSI, U+009D OSC, …) as ESC plus their
/// 7-bit final byte, so vte parses and drops their parameters instead of printing them.
fn seven_bit_introducers(bytes: &[u8]) -> Cow<'_, [u8]> {
    let is_introducer = |b: Option<&u8>| matches!(b, Some(0x90 | 0x98 | 0x9B..=0x9F));
    if !memchr_iter(0xC2, bytes).any(|i| is_introducer(bytes.get(i + 1))) {
        return Cow::Borrowed(bytes);
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == 0xC2 && is_introducer(bytes.get(i + 1)) {
            out.extend_from_slice(&[0x1B, bytes[i + 1] - 0x40]);
            i += 2;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Cow::Owned(out)
}

/// A vte performer that keeps printable text and drops everything else.
struct Strip {
    out: String,
    /// Where the current line starts in `out`, for carriage returns.
    line_start: usize,
    /// A `\r` was seen; the next printed character starts the line over.
    after_cr: bool,
}

impl Strip {
    fn push(&mut self, c: char) {
        if self.after_cr {
            self.out.truncate(self.line_start);
            self.after_cr = false;
        }
        self.out.push(c);
    }
}

impl vte::Perform for Strip {
    fn print(&mut self, c: char) {
        if c != '\u{7f}' {
            self.push(c);
        }
    }

    fn execute(&mut self, byte: u8) {
        match byte {
            b'\t' => self.push('\t'),
            b'\n' => {
                self.out.push('\n');
                self.line_start = self.out.len();
                self.after_cr = false;
            }
            b'\r' => self.after_cr = true,
            _ => {}
        }
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
/// Looks at 64 bytes per step with a test the compiler turns into a few SIMD instructions;
/// only a block that holds a candidate is looked at byte by byte.
pub(crate) fn next_unclean(bytes: &[u8], from: usize) -> usize {
    const BLOCK: usize = 64;
    let test = |block: &[u8; BLOCK]| block.iter().fold(false, |acc, &b| acc | maybe_unclean(b));
    let mut i = from;
    while let Some(block) = bytes.get(i..i + BLOCK) {
        if test(block.try_into().expect("a whole block"))
            && let Some(p) = first_unclean(bytes, i, i + BLOCK)
        {
            return p;
        }
        i += BLOCK;
    }
    // The tail, padded to a whole block: the rest of a short line is the common case, and
    // the vector test is cheaper than the byte loop even then.
    let tail = &bytes[i.min(bytes.len())..];
    let mut padded = [b' '; BLOCK];
    padded[..tail.len()].copy_from_slice(tail);
    if test(&padded) {
        first_unclean(bytes, i, bytes.len()).unwrap_or(bytes.len())
    } else {
        bytes.len()
    }
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

/// One line (no newline) as the user would see it: borrowed when nothing needed stripping,
/// which is the common case and costs one vectorized pass plus UTF-8 validation.
pub(crate) fn clean_line(line: &[u8]) -> Cow<'_, str> {
    match (next_unclean(line, 0) == line.len()).then(|| std::str::from_utf8(line)) {
        Some(Ok(s)) => Cow::Borrowed(s),
        _ => Cow::Owned(sanitize_bytes(line)),
    }
}

/// [`clean_line`] of text already known to be UTF-8: it is not validated again.
pub(crate) fn clean_str(text: &str) -> Cow<'_, str> {
    if next_unclean(text.as_bytes(), 0) == text.len() {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(sanitize_bytes(text.as_bytes()))
    }
}

/// Sanitizes one line (no newline) for display and cuts it to [`DISPLAY_CAP`] bytes.
///
/// `unseen` counts bytes of the line that were never kept; they are added to the note.
pub(crate) fn display_line(line: &[u8], unseen: u64) -> String {
    cut(clean_line(line), DISPLAY_CAP, unseen)
}

/// Cuts `s` to at most `cap` bytes (on a char boundary) plus a note of what was left out.
#[inline]
pub(crate) fn cut(s: Cow<'_, str>, cap: usize, unseen: u64) -> String {
    if s.len() <= cap && unseen == 0 {
        return s.into_owned();
    }
    let mut out = String::new();
    cut_into(&mut out, &s, cap, unseen);
    out
}

/// [`cut`], appended to `out`: a long line goes into the lines shown without a `String` of
/// its own.
pub(crate) fn cut_into(out: &mut String, s: &str, cap: usize, unseen: u64) {
    if s.len() <= cap && unseen == 0 {
        out.push_str(s);
        return;
    }
    let end = floor_char_boundary(s.as_bytes(), cap);
    let more = (s.len() - end) as u64 + unseen;
    let mut number = itoa::Buffer::new();
    let number = number.format(more);
    out.reserve(end + number.len() + 20);
    out.push_str(&s[..end]);
    out.push_str(" … [");
    out.push_str(number);
    out.push_str(" more bytes]");
}

/// The largest char boundary of `s`, UTF-8, at or below `at`.
pub(crate) fn floor_char_boundary(s: &[u8], at: usize) -> usize {
    if at >= s.len() {
        return s.len();
    }
    // A char starts at any byte but a continuation byte (`10xxxxxx`).
    (0..=at).rev().find(|&i| s[i] & 0xC0 != 0x80).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn plain_text_is_untouched() {
        assert_eq!(sanitize("hello, wörld → ok\ttab"), "hello, wörld → ok\ttab");
        assert_eq!(sanitize("two\nlines"), "two\nlines");
    }

    #[test]
    fn csi_colours_cursor_moves_and_clears_are_stripped() {
        assert_eq!(sanitize("\x1b[1;31mred\x1b[0m"), "red");
        assert_eq!(sanitize("a\x1b[2J\x1b[Hb"), "ab");
        assert_eq!(sanitize("a\x1b[10;20Hb\x1b[?25l"), "ab");
        assert_eq!(sanitize("\x1b[38;2;255;0;0mtrue\x1b[m"), "true");
    }

    #[test]
    fn osc_titles_hyperlinks_and_clipboard_are_stripped() {
        assert_eq!(sanitize("\x1b]0;evil title\x07after"), "after");
        assert_eq!(sanitize("\x1b]2;title\x1b\\after"), "after");
        assert_eq!(
            sanitize("see \x1b]8;;https://evil.example/\x1b\\the docs\x1b]8;;\x1b\\ now"),
            "see the docs now"
        );
        assert_eq!(sanitize("\x1b]52;c;cm0gLXJmIH4=\x07x"), "x");
        // An OSC with no terminator swallows the rest of the input, as in a terminal.
        assert_eq!(sanitize("a\x1b]0;unterminated"), "a");
    }

    #[test]
    fn dcs_sos_pm_apc_strings_are_stripped() {
        assert_eq!(sanitize("a\x1bP1$r0m\x1b\\b"), "ab");
        assert_eq!(sanitize("a\x1bXsos\x1b\\b"), "ab");
        assert_eq!(sanitize("a\x1b^pm\x1b\\b"), "ab");
        assert_eq!(sanitize("a\x1b_Gf=100;AAAA\x1b\\b"), "ab");
    }

    #[test]
    fn c1_controls_are_stripped_with_their_parameters() {
        assert_eq!(sanitize("\u{9b}31mred\u{9b}0m"), "red");
        assert_eq!(sanitize("\u{9d}0;title\u{9c}after"), "after");
        assert_eq!(sanitize("\u{90}q\u{9c}x"), "x");
        assert_eq!(sanitize("a\u{85}b\u{8d}c"), "abc");
        // Raw 8-bit C1 bytes are invalid UTF-8; they are dropped.
        assert_eq!(sanitize_bytes(b"a\x9bb"), "ab");
    }

    #[test]
    fn bare_escape_bell_backspace_del_and_c0_are_stripped() {
        assert_eq!(sanitize("a\x1bb"), "a");
        assert_eq!(sanitize("a\x1b"), "a");
        assert_eq!(
            sanitize("a\x07b\x08c\x7fd\x00e\x01f\x0bg\x0ch\x1ai"),
            "abcdefghi"
        );
        assert_eq!(sanitize("\x1b7saved\x1b8"), "saved");
    }

    #[test]
    fn carriage_return_keeps_what_a_terminal_shows() {
        assert_eq!(sanitize("50%\r100%"), "100%");
        assert_eq!(sanitize("a\rb\rc"), "c");
        assert_eq!(sanitize("line\r"), "line");
        assert_eq!(sanitize("crlf\r\nnext"), "crlf\nnext");
        assert_eq!(sanitize("one\rtwo\nthree"), "two\nthree");
    }

    #[test]
    fn invalid_utf8_and_nul_become_safe_text() {
        assert_eq!(sanitize_bytes(b"a\xffb\0c"), "a\u{fffd}bc");
        assert_eq!(sanitize_bytes(b"cut \xe2\x86"), "cut \u{fffd}");
        assert_eq!(sanitize_bytes(b"\xe2\x86\x92"), "→");
    }

    #[test]
    fn display_line_cuts_with_a_note() {
        let long = "x".repeat(DISPLAY_CAP + 10);
        let shown = display_line(long.as_bytes(), 0);
        assert_eq!(
            shown,
            format!("{} … [10 more bytes]", "x".repeat(DISPLAY_CAP))
        );
        assert_eq!(display_line(b"short", 5), "short … [5 more bytes]");
        assert_eq!(display_line(b"\x1b[1mbold\x1b[0m", 0), "bold");
    }

    #[test]
    fn cut_respects_char_boundaries() {
        let s = "é".repeat(10);
        assert_eq!(cut(Cow::Borrowed(&s), 5, 0), "éé … [16 more bytes]");
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

        /// `sanitize`'s shortcut for text with nothing to strip changes nothing it returns.
        #[test]
        fn sanitize_agrees_with_the_terminal_parser(
            chars in prop::collection::vec(prop::sample::select(vec![
                'a', ' ', '\t', '\n', '\r', '\0', '\x1b', '\x7f', '\u{80}', '\u{85}', '\u{9f}',
                '\u{a0}', 'é', '→', '[', ']', ';', 'm', '7', '\u{7}', '\u{feff}', '😀',
            ]), 0..120),
        ) {
            let text: String = chars.into_iter().collect();
            prop_assert_eq!(sanitize(&text), sanitize_bytes(text.as_bytes()));
        }
    }
}
