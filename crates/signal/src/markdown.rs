//! Just enough CommonMark to tell prose from code: fenced code blocks across lines, code spans
//! within a line.
//!
//! Not modelled, on purpose: indented code blocks (an agent's indented prose is far more common
//! than a four-space code block holding a signal), fences inside block quotes, and fences
//! indented more than three spaces inside list items. Those cases lean towards counting a
//! signal, which a human then sees in the log.

use std::ops::Range;

use memchr::memchr;

/// An open fenced code block: its fence character and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fence {
    ch: u8,
    len: usize,
}

/// A line that starts like a fence: up to three spaces, then three or more `` ` `` or `~`.
struct Marker<'a> {
    ch: u8,
    len: usize,
    /// What follows the run: the info string of an opener, spaces for a closer.
    rest: &'a [u8],
}

fn marker(line: &[u8]) -> Option<Marker<'_>> {
    let indent = line.iter().take(4).take_while(|&&b| b == b' ').count();
    if indent > 3 {
        return None;
    }
    let ch = *line.get(indent)?;
    if ch != b'`' && ch != b'~' {
        return None;
    }
    let len = line[indent..].iter().take_while(|&&b| b == ch).count();
    (len >= 3).then(|| Marker {
        ch,
        len,
        rest: &line[indent + len..],
    })
}

/// Tracks whether the text is inside a fenced code block, line after line.
#[derive(Debug, Clone, Default)]
pub(crate) struct FenceState {
    open: Option<Fence>,
}

impl FenceState {
    /// Takes one whole line (no newline) and says whether it is code: a fence line or a line
    /// inside a fenced block.
    pub(crate) fn line(&mut self, line: &[u8]) -> bool {
        let marker = marker(line);
        match (self.open, marker) {
            (Some(open), Some(m)) => {
                let closes = m.ch == open.ch
                    && m.len >= open.len
                    && m.rest.iter().all(|&b| matches!(b, b' ' | b'\t' | b'\r'));
                if closes {
                    self.open = None;
                }
                true
            }
            (Some(_), None) => true,
            (None, Some(m)) => {
                // A backtick fence's info string may not hold a backtick; such a line is
                // a paragraph with code spans (```` ```foo``` ````).
                if m.ch == b'`' && memchr(b'`', m.rest).is_some() {
                    return false;
                }
                self.open = Some(Fence {
                    ch: m.ch,
                    len: m.len,
                });
                true
            }
            (None, None) => false,
        }
    }

    /// Like [`FenceState::line`] for a line too long to keep: only its first bytes (`prefix`)
    /// are known, plus whether a backtick run other than the leading one appeared in it.
    ///
    /// Such a line never closes a fence: a closing fence is a short line.
    pub(crate) fn long_line(&mut self, prefix: &[u8], other_backticks: bool) -> bool {
        if self.open.is_some() {
            return true;
        }
        match marker(prefix) {
            Some(m) if m.ch == b'~' || !other_backticks => {
                self.open = Some(Fence {
                    ch: m.ch,
                    len: m.len,
                });
                true
            }
            _ => false,
        }
    }

    /// Whether `prefix` starts with a backtick fence marker (so its first run is the fence).
    pub(crate) fn starts_with_backtick_fence(prefix: &[u8]) -> bool {
        marker(prefix).is_some_and(|m| m.ch == b'`')
    }
}

/// Length of the backtick run starting at `at`.
fn run_len(line: &[u8], at: usize) -> usize {
    line[at..].iter().take_while(|&&b| b == b'`').count()
}

/// The byte ranges of the code spans of one whole line, backticks included, in order.
///
/// CommonMark: a backtick run opens a span closed by the next run of exactly the same length;
/// a run with no such closer is literal text. A backslash escapes a backtick outside a span;
/// inside one it is literal.
pub(crate) fn code_spans(line: &[u8], spans: &mut Vec<Range<usize>>) {
    // A run length that found no closer will find none later either: every later run of that
    // length would have been its closer. Remembering them keeps pathological lines linear-ish.
    let mut unclosed: Vec<usize> = Vec::new();
    let mut i = 0;
    while let Some(off) = memchr(b'`', &line[i..]) {
        let mut start = i + off;
        let mut n = run_len(line, start);
        let backslashes = line[i..start]
            .iter()
            .rev()
            .take_while(|&&b| b == b'\\')
            .count();
        if backslashes % 2 == 1 {
            start += 1;
            n -= 1;
            if n == 0 {
                i = start;
                continue;
            }
        }
        let after = start + n;
        let mut closer = None;
        if !unclosed.contains(&n) {
            let mut j = after;
            while let Some(off) = memchr(b'`', &line[j..]) {
                let s = j + off;
                let m = run_len(line, s);
                if m == n {
                    closer = Some(s + m);
                    break;
                }
                j = s + m;
            }
        }
        match closer {
            Some(end) => {
                spans.push(start..end);
                i = end;
            }
            None => {
                unclosed.push(n);
                i = after;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(line: &str) -> Vec<&str> {
        let mut out = Vec::new();
        code_spans(line.as_bytes(), &mut out);
        out.into_iter().map(|r| &line[r]).collect()
    }

    fn code_lines(text: &str) -> Vec<bool> {
        let mut fence = FenceState::default();
        text.lines().map(|l| fence.line(l.as_bytes())).collect()
    }

    #[test]
    fn code_spans_follow_commonmark_run_lengths() {
        assert_eq!(spans("a `b` c"), ["`b`"]);
        assert_eq!(spans("a ``b ` c`` d"), ["``b ` c``"]);
        assert_eq!(spans("`a` and `b`"), ["`a`", "`b`"]);
        // An unclosed run is literal, and scanning goes on after it.
        assert_eq!(spans("`` a `b`"), ["`b`"]);
        assert_eq!(spans("no closer `here"), Vec::<&str>::new());
        // A longer run does not close a shorter one.
        assert_eq!(spans("`a`` b"), Vec::<&str>::new());
    }

    #[test]
    fn code_spans_honour_backslash_escapes_outside_spans_only() {
        assert_eq!(spans(r"\`not code\` `code`"), ["`code`"]);
        assert_eq!(spans(r"\\`code`"), ["`code`"]);
        assert_eq!(spans(r"`a\` b"), [r"`a\`"]);
    }

    #[test]
    fn fences_open_and_close_per_commonmark() {
        let text = "prose\n```rust\ncode\n```\nprose";
        assert_eq!(code_lines(text), [false, true, true, true, false]);
        // A shorter or different fence does not close; a longer one does.
        let text = "````\n```\n~~~~\n`````\nprose";
        assert_eq!(code_lines(text), [true, true, true, true, false]);
        // Up to three spaces of indent; four is not a fence.
        let text = "   ~~~\n   ~~~\n    ~~~\nprose";
        assert_eq!(code_lines(text), [true, true, false, false]);
        // A closing fence takes no info string.
        let text = "```\n``` rust\n```\nprose";
        assert_eq!(code_lines(text), [true, true, true, false]);
        // Two backticks are no fence, a backtick in the info string makes it inline code.
        let text = "``\n```a`b\nprose";
        assert_eq!(code_lines(text), [false, false, false]);
    }

    /// The plain-text scanner stops only at lines holding ```` ``` ```` or `~~~` for fences:
    /// no other line may change the state.
    #[test]
    fn only_lines_with_three_fence_characters_change_state() {
        let lines = [
            "prose", "", "  ```", "```rust", "~~~", "   ~~~", "    ```", "`code`", "- item", "```",
            "text", "``", "~~", "```", "> quote", " `` ` ``", "~~~~", "a ~~~ b", "~~~",
        ];
        let mut fence = FenceState::default();
        for line in lines {
            let before = fence.open;
            fence.line(line.as_bytes());
            if !line.contains("```") && !line.contains("~~~") {
                assert_eq!(fence.open, before, "{line:?}");
            }
        }
    }

    #[test]
    fn closing_fence_may_end_in_carriage_return() {
        let mut fence = FenceState::default();
        assert!(fence.line(b"```\r"));
        assert!(fence.line(b"code\r"));
        assert!(fence.line(b"```\r"));
        assert!(!fence.line(b"prose\r"));
    }

    #[test]
    fn long_lines_open_but_never_close() {
        let mut fence = FenceState::default();
        assert!(!fence.long_line(b"prose", false));
        assert!(fence.long_line(b"```rust", false));
        assert!(fence.long_line(b"```", false));
        let mut fence = FenceState::default();
        assert!(!fence.long_line(b"```a", true));
        assert!(fence.long_line(b"~~~a", true));
    }
}
