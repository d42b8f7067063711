//! The plain-text scanner's classes: newlines, bytes to sanitize or `<`, fence bytes, and
//! from them the candidates for a closer look (see `crate::text`).

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

/// Whether `b` is one of [`TextMasks::special`]'s bytes.
pub(crate) const fn is_special(b: u8) -> bool {
    (b < 0x20 && b != b'\n' && b != b'\t') || b == 0x7F || b == 0xC2 || b == b'<'
}

/// One block of a window of whole lines, classified for the plain-text scanner.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TextBlock {
    pub(crate) masks: TextMasks,
    /// The bytes that may make their line need a closer look: `special` bytes, the
    /// last of three fence bytes in a row, and the newline that ends a line longer than the
    /// `long_line` given to [`text_blocks`].
    pub(crate) candidates: u64,
    /// Newlines in the window before this block.
    pub(crate) lines_before: u32,
}

/// What one block passes on to the next.
#[derive(Default)]
struct Carry {
    fence: u64,
    /// Bytes of the current line before the block.
    run: usize,
    lines: u32,
}

impl Carry {
    /// The rest of a [`TextBlock`], from its masks. Inlined into each implementation below, so
    /// that `count_ones`, `trailing_zeros` and `leading_zeros` are one instruction each where
    /// the CPU has them (`popcnt` alone would otherwise be a dozen).
    #[inline(always)]
    fn block(&mut self, masks: TextMasks, long_line: usize) -> TextBlock {
        let f = masks.fence;
        let triple = f & (f << 1 | self.fence >> 63) & (f << 2 | self.fence >> 62);
        self.fence = f;
        let lines_before = self.lines;
        self.lines += masks.newline.count_ones();
        let mut long = 0;
        if masks.newline == 0 {
            self.run += 64;
        } else {
            // A line that has run for fewer bytes is not too long, wherever its end is.
            if self.run + 63 > long_line {
                let first = masks.newline.trailing_zeros() as usize;
                if self.run + first > long_line {
                    long = 1 << first;
                }
            }
            self.run = masks.newline.leading_zeros() as usize;
        }
        TextBlock {
            masks,
            candidates: masks.special | triple | long,
            lines_before,
        }
    }
}

/// Classifies `bytes`, a window of whole lines, into `out`: one [`TextBlock`] per 64 bytes; a
/// last, shorter block is read as if padded with spaces (which are in no class).
pub(crate) fn text_blocks(bytes: &[u8], long_line: usize, out: &mut Vec<TextBlock>) {
    TextPass::default().push(bytes, long_line, out);
}

/// The pass over one window, which may take the window's bytes in more than one piece (each
/// but the last a whole number of blocks): the blocks of each piece go on from where the
/// last piece's ended, as if the window had been classified at once.
#[derive(Default)]
pub(crate) struct TextPass {
    carry: Carry,
    /// Blocks classified so far.
    blocks: usize,
    /// Whether the last piece ended in a padded block: no piece can follow.
    padded: bool,
}

impl TextPass {
    /// Classifies `bytes`, the window's next piece, into `out` after the blocks of the pieces
    /// before it; `out` ends with the piece's last block.
    pub(crate) fn push(&mut self, bytes: &[u8], long_line: usize, out: &mut Vec<TextBlock>) {
        debug_assert!(!self.padded, "a piece after one that was not whole blocks");
        let (blocks, tail) = bytes.as_chunks::<64>();
        let at = self.blocks;
        self.blocks += bytes.len().div_ceil(64);
        // Every block is written below: only new ones need a value first.
        out.resize(self.blocks, TextBlock::default());
        let (whole, last) = out[at..].split_at_mut(blocks.len());
        classify(blocks, &mut self.carry, long_line, whole);
        if !tail.is_empty() {
            let mut padded = [b' '; 64];
            padded[..tail.len()].copy_from_slice(tail);
            classify(&[padded], &mut self.carry, long_line, last);
            self.padded = true;
        }
    }
}

/// [`text_blocks`] for whole blocks, with the best implementation this CPU has.
fn classify(blocks: &[[u8; 64]], carry: &mut Carry, long_line: usize, out: &mut [TextBlock]) {
    #[cfg(target_arch = "x86_64")]
    {
        if super::cpu::has_avx2() {
            // SAFETY: the CPU has every feature the function enables, just checked.
            unsafe { x86::classify_avx2(blocks, carry, long_line, out) }
        } else {
            // SAFETY: every x86-64 CPU has SSE2.
            unsafe { x86::classify_sse2(blocks, carry, long_line, out) }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    classify_scalar(blocks, carry, long_line, out);
}

/// The reference: one byte at a time.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn classify_scalar(
    blocks: &[[u8; 64]],
    carry: &mut Carry,
    long_line: usize,
    out: &mut [TextBlock],
) {
    for (block, out) in blocks.iter().zip(out) {
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
        *out = carry.block(masks, long_line);
    }
}

/// [`TextMasks::special`] by nibbles: bit `k` of `SPECIAL_BY_LOW[l]` and of
/// `SPECIAL_BY_HIGH[h]` are both set exactly when `0xhl` is special, for one class `k` of
/// special bytes: `0x00`-`0x08` and `0x0B`-`0x0F`; `0x10`-`0x1F`; `DEL`; `0xC2`; `<`.
const SPECIAL_BY_LOW: [u8; 16] = {
    let mut t = [0u8; 16];
    let mut l = 0;
    while l < 16 {
        t[l] = 0x02
            | if l != 0x9 && l != 0xA { 0x01 } else { 0 }
            | if l == 0xF { 0x04 } else { 0 }
            | if l == 0x2 { 0x08 } else { 0 }
            | if l == 0xC { 0x10 } else { 0 };
        l += 1;
    }
    t
};

/// See [`SPECIAL_BY_LOW`].
const SPECIAL_BY_HIGH: [u8; 16] = {
    let mut t = [0u8; 16];
    t[0x0] = 0x01;
    t[0x1] = 0x02;
    t[0x7] = 0x04;
    t[0xC] = 0x08;
    t[0x3] = 0x10;
    t
};

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::super::cpu::join;
    use super::{Carry, SPECIAL_BY_HIGH, SPECIAL_BY_LOW, TextBlock, TextMasks};

    /// A table of 16 bytes as a vector.
    #[inline(always)]
    fn table_vector(table: &[u8; 16]) -> __m128i {
        // SAFETY: the load reads the 16 bytes of `table`; `loadu` needs no alignment.
        unsafe { _mm_loadu_si128(table.as_ptr().cast::<__m128i>()) }
    }

    #[target_feature(enable = "avx2,popcnt,bmi1,lzcnt")]
    pub(super) fn classify_avx2(
        blocks: &[[u8; 64]],
        carry: &mut Carry,
        long_line: usize,
        out: &mut [TextBlock],
    ) {
        let newline = _mm256_set1_epi8(b'\n' as i8);
        let backtick = _mm256_set1_epi8(b'`' as i8);
        let tilde = _mm256_set1_epi8(b'~' as i8);
        let low_nibble = _mm256_set1_epi8(0x0F);
        let by_low = _mm256_broadcastsi128_si256(table_vector(&SPECIAL_BY_LOW));
        let by_high = _mm256_broadcastsi128_si256(table_vector(&SPECIAL_BY_HIGH));
        let half = |v: __m256i| {
            // A byte is special when the classes its two nibbles allow meet.
            let low = _mm256_shuffle_epi8(by_low, _mm256_and_si256(v, low_nibble));
            let high = _mm256_and_si256(_mm256_srli_epi16(v, 4), low_nibble);
            let high = _mm256_shuffle_epi8(by_high, high);
            let plain = _mm256_cmpeq_epi8(_mm256_and_si256(low, high), _mm256_setzero_si256());
            let fence =
                _mm256_or_si256(_mm256_cmpeq_epi8(v, backtick), _mm256_cmpeq_epi8(v, tilde));
            [
                _mm256_movemask_epi8(_mm256_cmpeq_epi8(v, newline)),
                !_mm256_movemask_epi8(plain),
                _mm256_movemask_epi8(fence),
            ]
        };
        for (block, out) in blocks.iter().zip(out.iter_mut()) {
            // SAFETY: both loads read 32 bytes inside the 64-byte `block`; `loadu` needs no
            // alignment.
            let (lo, hi) = unsafe {
                let p = block.as_ptr().cast::<__m256i>();
                (_mm256_loadu_si256(p), _mm256_loadu_si256(p.add(1)))
            };
            let [n0, s0, f0] = half(lo);
            let [n1, s1, f1] = half(hi);
            out.masks = TextMasks {
                newline: join(n0, n1),
                special: join(s0, s1),
                fence: join(f0, f1),
            };
        }
        // A second loop: in the first, LLVM rebuilds the compare results byte by byte to
        // feed the integer work (10x the instructions).
        for out in out.iter_mut() {
            *out = carry.block(out.masks, long_line);
        }
    }

    #[target_feature(enable = "sse2")]
    pub(super) fn classify_sse2(
        blocks: &[[u8; 64]],
        carry: &mut Carry,
        long_line: usize,
        out: &mut [TextBlock],
    ) {
        let newline = _mm_set1_epi8(b'\n' as i8);
        let tab = _mm_set1_epi8(b'\t' as i8);
        let below_space = _mm_set1_epi8(0x1F);
        let del = _mm_set1_epi8(0x7F);
        let c1_lead = _mm_set1_epi8(0xC2_u8 as i8);
        let open = _mm_set1_epi8(b'<' as i8);
        let backtick = _mm_set1_epi8(b'`' as i8);
        let tilde = _mm_set1_epi8(b'~' as i8);
        let quarter = |v: __m128i| {
            let nl = _mm_cmpeq_epi8(v, newline);
            let control = _mm_cmpeq_epi8(_mm_min_epu8(v, below_space), v);
            let allowed = _mm_or_si128(nl, _mm_cmpeq_epi8(v, tab));
            let special = _mm_or_si128(
                _mm_or_si128(_mm_andnot_si128(allowed, control), _mm_cmpeq_epi8(v, open)),
                _mm_or_si128(_mm_cmpeq_epi8(v, del), _mm_cmpeq_epi8(v, c1_lead)),
            );
            let fence = _mm_or_si128(_mm_cmpeq_epi8(v, backtick), _mm_cmpeq_epi8(v, tilde));
            [
                _mm_movemask_epi8(nl) as u16,
                _mm_movemask_epi8(special) as u16,
                _mm_movemask_epi8(fence) as u16,
            ]
        };
        for (block, out) in blocks.iter().zip(out.iter_mut()) {
            let mut all = [0u64; 3];
            for q in 0..4 {
                // SAFETY: the load reads bytes `16 * q..16 * q + 16` of the 64-byte `block`;
                // `loadu` needs no alignment.
                let v = unsafe { _mm_loadu_si128(block.as_ptr().cast::<__m128i>().add(q)) };
                for (mask, bits) in all.iter_mut().zip(quarter(v)) {
                    *mask |= u64::from(bits) << (16 * q);
                }
            }
            let [newline, special, fence] = all;
            out.masks = TextMasks {
                newline,
                special,
                fence,
            };
        }
        for out in out.iter_mut() {
            *out = carry.block(out.masks, long_line);
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::cpu::has_avx2;
    use super::*;

    /// A small limit, so that short inputs have long lines too.
    const LONG: usize = 100;

    fn scalar(bytes: &[u8]) -> Vec<TextBlock> {
        let (blocks, tail) = bytes.as_chunks::<64>();
        let mut all: Vec<[u8; 64]> = blocks.to_vec();
        if !tail.is_empty() {
            let mut padded = [b' '; 64];
            padded[..tail.len()].copy_from_slice(tail);
            all.push(padded);
        }
        let mut out = vec![TextBlock::default(); all.len()];
        classify_scalar(&all, &mut Carry::default(), LONG, &mut out);
        out
    }

    fn blocks(bytes: &[u8]) -> Vec<TextBlock> {
        let mut out = Vec::new();
        text_blocks(bytes, LONG, &mut out);
        out
    }

    #[test]
    fn every_byte_value_lands_in_its_classes_at_every_position() {
        for b in 0..=255u8 {
            for at in [0, 1, 15, 16, 31, 32, 33, 47, 63, 64, 100] {
                let mut bytes = vec![b'a'; 128];
                bytes[at] = b;
                assert_eq!(blocks(&bytes), scalar(&bytes), "byte {b:#04x} at {at}");
            }
        }
    }

    /// The scalar loop itself, against the definitions, byte by byte.
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

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn sse2_and_avx2_agree_with_the_scalar_loop() {
        let bytes: Vec<u8> = (0..4096u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let (whole, _) = bytes.as_chunks::<64>();
        let want = scalar(&bytes[..whole.len() * 64]);
        let mut sse2 = vec![TextBlock::default(); whole.len()];
        // SAFETY: every x86-64 CPU has SSE2.
        unsafe { x86::classify_sse2(whole, &mut Carry::default(), LONG, &mut sse2) };
        assert_eq!(sse2, want);
        if has_avx2() {
            let mut avx2 = vec![TextBlock::default(); whole.len()];
            // SAFETY: the CPU has every feature the function enables, just checked.
            unsafe { x86::classify_avx2(whole, &mut Carry::default(), LONG, &mut avx2) };
            assert_eq!(avx2, want);
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
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c * 64).filter(|&c| c < bytes.len()).collect();
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
