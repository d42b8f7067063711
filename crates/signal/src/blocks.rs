//! Byte classes of 64-byte blocks as bit masks, for the plain-text scanner (see `crate::text`).
//!
//! A scanner that asks several questions of every byte (is it a newline? could a terminal act
//! on it? could it start a tag? is it a fence character?) pays for one pass over the bytes per
//! question when each is a library search. Here one pass answers them all: each 64-byte block
//! is classified once, and each answer comes back as a `u64` whose bit `i` stands for the
//! block's byte `i`. The scanner then works on the masks with ordinary integer code
//! (`trailing_zeros`, shifts, `count_ones`).
//!
//! The pass is plain safe Rust written so that the compiler vectorizes it: a loop over the
//! block's bytes that turns each byte into a byte of class bits (one compare per class, no
//! branch), then eight bytes at a time gathered into the masks with one multiply each. Most
//! blocks hold no special or fence byte, and gather only their newlines.

/// What the plain-text scanner wants to know of each byte of a block; bit `i` of each mask is
/// byte `i` of the block.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TextMasks {
    /// `\n`.
    pub(crate) newline: u64,
    /// A byte sanitizing might act on, or the start of one: a C0 control other than `\n` and
    /// `\t` (so `\r` and `ESC`), `DEL`, and `0xC2`, the first byte of every C1 control; and
    /// `<`, which every tag starts with. One mask for both: each is rare, and the byte itself
    /// tells which it is.
    pub(crate) special: u64,
    /// `` ` `` and `~`, the bytes fences are made of.
    pub(crate) fence: u64,
}

/// Whether `b` is one of [`TextMasks::special`]'s bytes: the tests' reference.
#[cfg(test)]
pub(crate) const fn is_special(b: u8) -> bool {
    (b < 0x20 && b != b'\n' && b != b'\t') || b == 0x7F || b == 0xC2 || b == b'<'
}

/// One block of a window of whole lines, classified for the plain-text scanner.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TextBlock {
    pub(crate) masks: TextMasks,
    /// The bytes that may make their line need a closer look: `special` bytes, the
    /// last of three fence bytes in a row, and the newline that ends a line longer than the
    /// `long_line` given to [`TextPass::push`].
    pub(crate) candidates: u64,
    /// Newlines in the window before this block.
    pub(crate) lines_before: u32,
}

/// What one block passes on to the next.
#[derive(Debug, Default)]
struct Carry {
    fence: u64,
    /// Bytes of the current line before the block.
    run: usize,
    lines: u32,
}

impl Carry {
    /// The rest of a [`TextBlock`], from its masks.
    #[inline(always)]
    fn block(&mut self, masks: TextMasks, long_line: usize) -> TextBlock {
        let f = masks.fence;
        let triple = f & (f << 1 | self.fence >> 63) & (f << 2 | self.fence >> 62);
        self.fence = f;
        let lines_before = self.lines;
        self.lines += masks.newline.count_ones();
        let mut long = 0;
        // A line that has run for fewer bytes is not too long, wherever its end is: rare.
        if self.run + 63 > long_line && masks.newline != 0 {
            let first = masks.newline.trailing_zeros() as usize;
            if self.run + first > long_line {
                long = 1 << first;
            }
        }
        // Without a branch: whether a block holds a newline flips from block to block in
        // text of short lines, and a mispredicted branch costs more than both arms.
        self.run = std::hint::select_unpredictable(
            masks.newline == 0,
            self.run + 64,
            masks.newline.leading_zeros() as usize,
        );
        TextBlock {
            masks,
            candidates: masks.special | triple | long,
            lines_before,
        }
    }
}

/// The pass over one window, which may take the window's bytes in more than one piece (each
/// but the last a whole number of blocks): the blocks of each piece go on from where the
/// last piece's ended, as if the window had been classified at once.
#[derive(Debug, Default)]
pub(crate) struct TextPass {
    carry: Carry,
    /// Blocks classified so far.
    blocks: usize,
    /// Whether the last piece ended in a padded block: no piece can follow.
    padded: bool,
}

impl TextPass {
    /// Classifies `bytes`, the window's next piece, into `out` after the blocks of the pieces
    /// before it; `out` ends with the piece's last block. A last, shorter block is read as if
    /// padded with spaces (which are in no class).
    pub(crate) fn push(&mut self, bytes: &[u8], long_line: usize, out: &mut Vec<TextBlock>) {
        debug_assert!(!self.padded, "a piece after one that was not whole blocks");
        let (blocks, tail) = bytes.as_chunks::<64>();
        let at = self.blocks;
        self.blocks += bytes.len().div_ceil(64);
        // Every block is written below: only new ones need a value first.
        out.resize(self.blocks, TextBlock::default());
        let (whole, last) = out[at..].split_at_mut(blocks.len());
        for (block, out) in blocks.iter().zip(whole) {
            *out = self.carry.block(masks(block), long_line);
        }
        if !tail.is_empty() {
            let mut padded = [b' '; 64];
            padded[..tail.len()].copy_from_slice(tail);
            last[0] = self.carry.block(masks(&padded), long_line);
            self.padded = true;
        }
    }
}

/// Class bits of one byte, as [`masks`] makes them.
const NEWLINE: u8 = 1;
const SPECIAL: u8 = 2;
const FENCE: u8 = 4;

/// The masks of one block.
#[inline(always)]
fn masks(block: &[u8; 64]) -> TextMasks {
    // Each class is a compare the compiler turns into a vector compare, 16 bytes at a time.
    let mut classes = [0u8; 64];
    for (c, &b) in classes.iter_mut().zip(block) {
        let control = (b < 0x20) & (b != b'\n') & (b != b'\t');
        let special = control | (b == 0x7F) | (b == 0xC2) | (b == b'<');
        let fence = (b == b'`') | (b == b'~');
        *c = (u8::from(b == b'\n') * NEWLINE)
            | (u8::from(special) * SPECIAL)
            | (u8::from(fence) * FENCE);
    }
    let words = classes.as_chunks::<8>().0;
    let mut m = TextMasks::default();
    let mut any = 0;
    for (i, word) in words.iter().enumerate() {
        let word = u64::from_le_bytes(*word);
        any |= word;
        m.newline |= gather(word, NEWLINE) << (8 * i);
    }
    // Most blocks of text have no special byte and no fence byte: their masks stay 0.
    if any & u64::from_le_bytes([SPECIAL | FENCE; 8]) != 0 {
        for (i, word) in words.iter().enumerate() {
            let word = u64::from_le_bytes(*word);
            m.special |= gather(word, SPECIAL) << (8 * i);
            m.fence |= gather(word, FENCE) << (8 * i);
        }
    }
    m
}

/// Bit `k` set when byte `k` of `word` has the class bit `class`: each byte's bit moved to
/// bit 0 of its byte, then all eight multiplied into the top byte at once (no two products
/// land on the same bit, so nothing carries).
#[inline(always)]
fn gather(word: u64, class: u8) -> u64 {
    let bits = (word >> class.trailing_zeros()) & 0x0101_0101_0101_0101;
    bits.wrapping_mul(0x0102_0408_1020_4080) >> 56
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// A small limit, so that short inputs have long lines too.
    const LONG: usize = 100;

    /// The reference: one byte at a time, one bit at a time.
    fn scalar(bytes: &[u8]) -> Vec<TextBlock> {
        let (blocks, tail) = bytes.as_chunks::<64>();
        let mut all: Vec<[u8; 64]> = blocks.to_vec();
        if !tail.is_empty() {
            let mut padded = [b' '; 64];
            padded[..tail.len()].copy_from_slice(tail);
            all.push(padded);
        }
        let mut carry = Carry::default();
        all.iter()
            .map(|block| {
                let mut masks = TextMasks::default();
                for (i, &b) in block.iter().enumerate() {
                    let bit = 1u64 << i;
                    if b == b'\n' {
                        masks.newline |= bit;
                    }
                    if is_special(b) {
                        masks.special |= bit;
                    }
                    if b == b'`' || b == b'~' {
                        masks.fence |= bit;
                    }
                }
                carry.block(masks, LONG)
            })
            .collect()
    }

    fn blocks(bytes: &[u8]) -> Vec<TextBlock> {
        let mut out = Vec::new();
        TextPass::default().push(bytes, LONG, &mut out);
        out
    }

    #[test]
    fn every_byte_value_lands_in_its_classes_at_every_position() {
        for b in 0..=255u8 {
            for at in [0, 1, 7, 8, 15, 16, 31, 32, 33, 47, 56, 63, 64, 100] {
                let mut bytes = vec![b'a'; 128];
                bytes[at] = b;
                assert_eq!(blocks(&bytes), scalar(&bytes), "byte {b:#04x} at {at}");
            }
        }
    }

    /// The reference itself, against the definitions, byte by byte.
    #[test]
    fn the_scalar_loop_marks_what_the_definitions_say() {
        let text = b"a\tb\r\n```x~~`\x1b[0m <ralph>\xc2\x85\n".repeat(3);
        let mut long = vec![b'y'; LONG + 1];
        long.push(b'\n');
        let bytes = [&text[..], &long[..], b"~~~\n"].concat();
        let got = scalar(&bytes);
        let bit = |i: usize, f: fn(&TextBlock) -> u64| f(&got[i / 64]) >> (i % 64) & 1 == 1;
        let mut lines = 0;
        for (i, &b) in bytes.iter().enumerate() {
            assert_eq!(bit(i, |t| t.masks.newline), b == b'\n', "newline at {i}");
            let special =
                (b < 0x20 && b != b'\n' && b != b'\t') || b == 0x7f || b == 0xc2 || b == b'<';
            assert_eq!(bit(i, |t| t.masks.special), special, "special at {i}");
            assert_eq!(
                bit(i, |t| t.masks.fence),
                b == b'`' || b == b'~',
                "fence at {i}"
            );
            let triple = i >= 2 && bytes[i - 2..=i].iter().all(|&c| c == b'`' || c == b'~');
            let line_start = bytes[..i]
                .iter()
                .rposition(|&c| c == b'\n')
                .map_or(0, |p| p + 1);
            let long_end = b == b'\n' && i - line_start > LONG;
            let candidate = special || triple || long_end;
            assert_eq!(bit(i, |t| t.candidates), candidate, "candidate at {i}");
            if i % 64 == 0 {
                assert_eq!(got[i / 64].lines_before, lines, "lines before {i}");
            }
            lines += u32::from(b == b'\n');
        }
    }

    proptest! {
        #[test]
        fn blocks_agree_with_the_scalar_loop(
            bytes in prop::collection::vec(prop::sample::select(vec![
                b'a', b' ', b'\t', b'\n', b'\r', 0, 0x1b, 0x1f, 0x20, 0x7f, 0x80, 0xc2, 0xc3, 0xff,
                b'<', b'`', b'~', b'r',
            ]), 0..400),
        ) {
            prop_assert_eq!(blocks(&bytes), scalar(&bytes));
        }

        /// A window classified in pieces has the blocks it has classified at once: every
        /// piece goes on from the fence run, the line's length and the line count before it.
        #[test]
        fn a_window_in_pieces_has_the_blocks_of_the_whole(
            bytes in prop::collection::vec(prop::sample::select(vec![
                b'a', b'\n', b'`', b'~', b'<', 0x1b,
            ]), 0..700),
            cuts in prop::collection::vec(0usize..12, 0..4),
        ) {
            let mut pass = TextPass::default();
            // Stale blocks from an earlier window, longer than this one: they must not show.
            let mut got = vec![TextBlock { candidates: !0, ..TextBlock::default() }; 20];
            let mut cuts: Vec<usize> = cuts
                .into_iter()
                .map(|c| c * 64)
                .filter(|&c| c < bytes.len())
                .collect();
            cuts.sort_unstable();
            cuts.dedup();
            let mut from = 0;
            for cut in cuts.into_iter().chain([bytes.len()]) {
                pass.push(&bytes[from..cut], LONG, &mut got);
                from = cut;
            }
            prop_assert_eq!(got, scalar(&bytes));
        }
    }
}
