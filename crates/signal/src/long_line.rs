//! Signal scanning for a line too long to keep: bytes are looked at once, as they stream past.
//!
//! Tags are found with the same SIMD search as elsewhere; a tag cut by a chunk boundary is
//! found through a tail of the last [`TAG_MAX`]` - 1` bytes. Code spans are approximated: the
//! first backtick run opens a tentative span that the next run of the same length closes;
//! runs of other lengths inside it are ignored, and if it never closes, the tags after it
//! count (CommonMark would also treat the opener as literal, but could then find other spans
//! among the runs we ignored). On ordinary lines the exact rules apply instead.

use memchr::memchr_iter;

use crate::tag::{KindSet, OPEN_FINDER, TAG_MAX, match_tag};

/// The state of one long line being streamed.
#[derive(Debug, Default)]
pub(crate) struct LongLine {
    /// The last bytes seen, for tags that straddle two chunks.
    tail: Vec<u8>,
    /// Length of a backtick run that reached the end of the last chunk.
    run: usize,
    /// Backtick runs seen so far (a fence line has exactly one).
    runs: u64,
    /// The length of the run that opened a tentative code span.
    open: Option<usize>,
    /// Tags seen outside any span.
    found: KindSet,
    /// Tags seen inside the tentative span: they count only if it never closes.
    pending: KindSet,
}

impl LongLine {
    /// Scans the next bytes of the line.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.straddling_tags(bytes);

        let mut tags = OPEN_FINDER
            .find_iter(bytes)
            .filter_map(|p| match_tag(&bytes[p..]).map(|(kind, _)| (p, kind)))
            .peekable();
        let mut last: Option<usize> = None;
        for q in memchr_iter(b'`', bytes) {
            let continues = match last {
                Some(l) => l + 1 == q,
                None => q == 0 && self.run > 0,
            };
            if !continues {
                self.end_run();
                while let Some(&(p, kind)) = tags.peek() {
                    if p > q {
                        break;
                    }
                    self.tag(kind);
                    tags.next();
                }
            }
            self.run += 1;
            last = Some(q);
        }
        if last.is_none_or(|l| l + 1 < bytes.len()) {
            self.end_run();
        }
        for (_, kind) in tags {
            self.tag(kind);
        }

        if bytes.len() >= TAG_MAX - 1 {
            self.tail.clear();
            self.tail
                .extend_from_slice(&bytes[bytes.len() - (TAG_MAX - 1)..]);
        } else {
            self.tail.extend_from_slice(bytes);
            let excess = self.tail.len().saturating_sub(TAG_MAX - 1);
            self.tail.drain(..excess);
        }
    }

    /// Counts the tags that began in the tail and end in `bytes`. They precede every byte of
    /// `bytes`, and the tail ends in tag text, not a backtick run, so their span state is
    /// already known.
    fn straddling_tags(&mut self, bytes: &[u8]) {
        if self.tail.is_empty() {
            return;
        }
        let mut joined = [0u8; 2 * TAG_MAX];
        let head = &bytes[..bytes.len().min(TAG_MAX - 1)];
        let joined_len = self.tail.len() + head.len();
        joined[..self.tail.len()].copy_from_slice(&self.tail);
        joined[self.tail.len()..joined_len].copy_from_slice(head);
        let joined = &joined[..joined_len];
        let found: Vec<_> = OPEN_FINDER
            .find_iter(joined)
            .take_while(|&p| p < self.tail.len())
            .filter_map(|p| match_tag(&joined[p..]).filter(|&(_, len)| p + len > self.tail.len()))
            .map(|(kind, _)| kind)
            .collect();
        for kind in found {
            self.tag(kind);
        }
    }

    fn end_run(&mut self) {
        let n = std::mem::take(&mut self.run);
        if n == 0 {
            return;
        }
        self.runs += 1;
        match self.open {
            None => self.open = Some(n),
            Some(m) if m == n => {
                self.open = None;
                self.pending = KindSet::default();
            }
            Some(_) => {}
        }
    }

    fn tag(&mut self, kind: crate::SignalKind) {
        if self.open.is_some() {
            self.pending.insert(kind);
        } else {
            self.found.insert(kind);
        }
    }

    /// Ends the line. Returns the signals it carried and whether it had a backtick run besides
    /// its first one (which decides whether a leading ```` ``` ```` makes it a fence).
    pub(crate) fn finish(mut self) -> (KindSet, bool) {
        self.end_run();
        let mut kinds = self.found;
        if self.open.is_some() {
            kinds.extend(self.pending);
        }
        (kinds, self.runs > 1)
    }

    /// Bytes held (the tail).
    pub(crate) fn buffered_len(&self) -> usize {
        self.tail.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SignalKind;

    fn scan(pieces: &[&[u8]]) -> (Vec<SignalKind>, bool) {
        let mut line = LongLine::default();
        for piece in pieces {
            line.push(piece);
        }
        let (kinds, other) = line.finish();
        (kinds.iter().collect(), other)
    }

    fn scan_every_split(line: &[u8]) -> (Vec<SignalKind>, bool) {
        let whole = scan(&[line]);
        let bytewise: Vec<&[u8]> = line.chunks(1).collect();
        assert_eq!(scan(&bytewise), whole, "one byte at a time");
        for cut in 0..=line.len() {
            let (a, b) = line.split_at(cut);
            assert_eq!(scan(&[a, b]), whole, "cut at {cut}");
        }
        whole
    }

    #[test]
    fn finds_tags_at_every_split() {
        let (kinds, _) = scan_every_split(b"x <ralph>DONE</ralph> y <ralph>GUTTER</ralph>");
        assert_eq!(kinds, [SignalKind::Done, SignalKind::Gutter]);
    }

    #[test]
    fn tags_in_a_closed_span_do_not_count() {
        let (kinds, other) = scan_every_split(b"a ``x <ralph>DONE</ralph>`` b");
        assert_eq!(kinds, []);
        assert!(other);
        let (kinds, _) = scan_every_split(b"`x` <ralph>DONE</ralph> ``y``");
        assert_eq!(kinds, [SignalKind::Done]);
    }

    #[test]
    fn tags_after_an_unclosed_run_count() {
        let (kinds, _) = scan_every_split(b"a `` b <ralph>QUESTION</ralph> ` c");
        assert_eq!(kinds, [SignalKind::Question]);
    }

    #[test]
    fn tail_stays_small() {
        let mut line = LongLine::default();
        for _ in 0..1000 {
            line.push(b"0123456789");
            assert!(line.buffered_len() < TAG_MAX);
        }
    }
}
