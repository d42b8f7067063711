//! Line framing for JSON-lines formats, with a cap on how much one line may hold.
//!
//! Lines that arrive whole within a chunk are passed on in place; only the unfinished line at
//! the end of a chunk is copied. A line that outgrows [`JSON_LINE_CAP`] is dropped as it
//! streams past and reported, once it ends, as [`Line::Skipped`].

use memchr::{memchr, memchr_iter};

use crate::JSON_LINE_CAP;

/// One line, as handed to a format's decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Line<'a> {
    /// A whole line, without its newline.
    Whole(&'a [u8]),
    /// A line longer than the cap, of this many bytes, that was not kept.
    Skipped(u64),
}

/// Splits a byte stream into lines of at most [`JSON_LINE_CAP`] bytes.
#[derive(Debug, Default)]
pub(crate) struct JsonLines {
    partial: Vec<u8>,
    /// Bytes of the current line dropped so far, once it outgrew the cap.
    skipped: Option<u64>,
}

impl JsonLines {
    /// Splits the next chunk, calling `on_line` for every line it ends.
    pub(crate) fn feed(&mut self, bytes: &[u8], mut on_line: impl FnMut(Line<'_>)) {
        let mut rest = bytes;
        if !self.partial.is_empty() || self.skipped.is_some() {
            let Some(nl) = memchr(b'\n', rest) else {
                self.extend(rest);
                return;
            };
            self.extend(&rest[..nl]);
            self.end_line(&mut on_line);
            rest = &rest[nl + 1..];
        }
        let mut start = 0;
        for nl in memchr_iter(b'\n', rest) {
            let line = &rest[start..nl];
            if line.len() > JSON_LINE_CAP {
                on_line(Line::Skipped(line.len() as u64));
            } else {
                on_line(Line::Whole(line));
            }
            start = nl + 1;
        }
        self.extend(&rest[start..]);
    }

    /// Ends the stream, passing on an unterminated last line.
    pub(crate) fn finish(&mut self, mut on_line: impl FnMut(Line<'_>)) {
        if !self.partial.is_empty() || self.skipped.is_some() {
            self.end_line(&mut on_line);
        }
    }

    /// Bytes held between calls.
    pub(crate) fn buffered_len(&self) -> usize {
        self.partial.len()
    }

    fn extend(&mut self, piece: &[u8]) {
        if let Some(skipped) = &mut self.skipped {
            *skipped += piece.len() as u64;
        } else if self.partial.len() + piece.len() > JSON_LINE_CAP {
            self.skipped = Some((self.partial.len() + piece.len()) as u64);
            self.partial = Vec::new();
        } else {
            self.partial.extend_from_slice(piece);
        }
    }

    fn end_line(&mut self, on_line: &mut impl FnMut(Line<'_>)) {
        match self.skipped.take() {
            Some(len) => on_line(Line::Skipped(len)),
            None => on_line(Line::Whole(&self.partial)),
        }
        self.partial.clear();
        // One huge line should not pin megabytes for the rest of the run.
        if self.partial.capacity() > 1024 * 1024 {
            self.partial = Vec::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(pieces: &[&[u8]]) -> Vec<String> {
        let mut framing = JsonLines::default();
        let mut got = Vec::new();
        let mut record = |line: Line<'_>| {
            got.push(match line {
                Line::Whole(l) => String::from_utf8_lossy(l).into_owned(),
                Line::Skipped(n) => format!("skipped {n}"),
            })
        };
        for piece in pieces {
            framing.feed(piece, &mut record);
        }
        framing.finish(&mut record);
        got
    }

    #[test]
    fn splits_lines_whatever_the_chunking() {
        let want = ["{\"a\":1}", "", "{\"b\":2}"];
        assert_eq!(lines(&[b"{\"a\":1}\n\n{\"b\":2}"]), want);
        assert_eq!(lines(&[b"{\"a\"", b":1}\n", b"\n{\"b\":2}\n"]), want);
    }

    #[test]
    fn over_long_lines_are_skipped_without_being_kept() {
        let big = vec![b'x'; JSON_LINE_CAP + 1];
        assert_eq!(
            lines(&[&big, b"\nnext"]),
            [format!("skipped {}", JSON_LINE_CAP + 1), "next".to_owned()]
        );
        let mut framing = JsonLines::default();
        let half = vec![b'x'; JSON_LINE_CAP / 2 + 1];
        framing.feed(&half, |_| {});
        framing.feed(&half, |_| {});
        framing.feed(&half, |_| {});
        assert_eq!(framing.buffered_len(), 0);
        let mut got = Vec::new();
        framing.finish(|l| got.push(l == Line::Skipped(3 * half.len() as u64)));
        assert_eq!(got, [true]);
    }
}
