//! The plain-text scanner's classes: newlines, bytes to sanitize or `<`, fence bytes, and
//! from them the candidates for a closer look (see `crate::text`).

use std::ops::Range;

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
    /// `long_line` given to [`TextPass::push`].
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
        // The last block's top bits go through `opaque`: as `f << 2 | last >> 62`, LLVM
        // makes double shifts (`shld`), which cost the decoder 3-4% on markdown and long
        // lines here (an AMD EPYC) against the plain shifts they replace.
        let (last1, last2) = (opaque(self.fence >> 63), opaque(self.fence >> 62));
        let triple = f & (f << 1 | last1) & (f << 2 | last2);
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

/// `x`, which the optimizer can no longer see through: it must take the value as it is,
/// in a register, instead of rewriting how it was made.
#[inline(always)]
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
fn opaque(mut x: u64) -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the instruction string is empty (a comment naming the register): the asm
    // reads and writes nothing, and `x` comes out as it went in.
    unsafe {
        std::arch::asm!("/* {0} */", inout(reg) x, options(pure, nomem, nostack, preserves_flags));
    }
    x
}

/// Classifies `bytes`, a window of whole lines, into `out`: one [`TextBlock`] per 64 bytes; a
/// last, shorter block is read as if padded with spaces (which are in no class).
#[cfg(test)]
pub(crate) fn text_blocks(bytes: &[u8], long_line: usize, out: &mut Vec<TextBlock>) {
    TextPass::default().push(bytes, long_line, out);
}

/// The pass over one window, which may take the window's bytes in more than one piece (each
/// but the last a whole number of blocks): the blocks of each piece go on from where the
/// last piece's ended, as if the window had been classified at once.
#[derive(Default)]
pub(crate) struct TextPass {
    carry: Carry,
    utf8: Utf8Check,
    /// Blocks classified so far.
    blocks: usize,
    /// Whether the last piece ended in a padded block: no piece can follow.
    padded: bool,
    /// Where the bytes classified are in memory, as addresses: [`text`](Self::text) vouches
    /// for these bytes alone.
    span: Range<usize>,
}

impl TextPass {
    /// A pass whose UTF-8 check looks at every block in full (`every_block`), or first asks
    /// whether a block is all ASCII and skips it if so. Which is faster depends on the text:
    /// the question costs little on text that is mostly ASCII, and a mispredicted branch on
    /// every other block where blocks with and without other characters alternate (a third
    /// of markdown's blocks: `→`, `é`). [`dense_utf8`](Self::dense_utf8) says which suits
    /// the text the pass has seen.
    pub(crate) fn new(every_block: bool) -> Self {
        TextPass {
            utf8: Utf8Check {
                every_block,
                ..Utf8Check::default()
            },
            ..TextPass::default()
        }
    }

    /// Whether more than one block in eight held a byte that is not ASCII: the next window
    /// is best checked with `every_block`.
    pub(crate) fn dense_utf8(&self) -> bool {
        self.utf8.non_ascii as usize * 8 > self.blocks
    }

    /// Classifies `bytes`, the window's next piece, into `out` after the blocks of the pieces
    /// before it; `out` ends with the piece's last block.
    pub(crate) fn push(&mut self, bytes: &[u8], long_line: usize, out: &mut Vec<TextBlock>) {
        debug_assert!(!self.padded, "a piece after one that was not whole blocks");
        let span = bytes.as_ptr_range();
        let span = span.start as usize..span.end as usize;
        if self.blocks == 0 {
            self.span = span;
        } else {
            // A piece that does not follow the last in memory: its bytes were classified
            // alright, but the check cannot vouch for text that spans the gap.
            if span.start != self.span.end {
                self.utf8.error = [0xFF; 32];
            }
            self.span.end = span.end;
        }
        let (blocks, tail) = bytes.as_chunks::<64>();
        let at = self.blocks;
        self.blocks += bytes.len().div_ceil(64);
        // Every block is written below: only new ones need a value first.
        out.resize(self.blocks, TextBlock::default());
        let (whole, last) = out[at..].split_at_mut(blocks.len());
        classify(blocks, &mut self.carry, &mut self.utf8, long_line, whole);
        if !tail.is_empty() {
            let mut padded = [b' '; 64];
            padded[..tail.len()].copy_from_slice(tail);
            classify(&[padded], &mut self.carry, &mut self.utf8, long_line, last);
            self.padded = true;
        }
    }

    /// `bytes`, part of what the pass classified, as text, when the pass found all it
    /// classified to be valid UTF-8; `None` when it did not (or did not check, without
    /// AVX2), and the caller must.
    pub(crate) fn text<'a>(&self, bytes: &'a [u8]) -> Option<&'a str> {
        let span = bytes.as_ptr_range();
        let inside = self.span.start <= span.start as usize && span.end as usize <= self.span.end;
        if !inside || self.valid_utf8() != Some(true) {
            return None;
        }
        // Within valid UTF-8, a slice that starts with no continuation byte and ends in an
        // ASCII byte starts and ends at a character's edge (ralph's windows end in `\n`).
        let starts = bytes.first().is_none_or(|&b| !(0x80..0xC0).contains(&b));
        if !starts || !bytes.last().is_none_or(u8::is_ascii) {
            return None;
        }
        debug_assert!(std::str::from_utf8(bytes).is_ok());
        // SAFETY: the bytes from the pass's first to its last are valid UTF-8 (checked with
        // the algorithm the tests below hold to `std`'s answers), and `bytes`, within them,
        // starts and ends at a character's edge.
        Some(unsafe { std::str::from_utf8_unchecked(bytes) })
    }

    /// Whether every byte the pass classified is valid UTF-8, a sequence cut off at the end
    /// counting as invalid; `None` where the pass does not check (without AVX2), and the
    /// caller must.
    fn valid_utf8(&self) -> Option<bool> {
        self.utf8.checked.then(|| {
            self.utf8
                .error
                .iter()
                .chain(&self.utf8.incomplete)
                .all(|&b| b == 0)
        })
    }
}

/// What the UTF-8 check in the AVX2 pass carries from one block to the next: the lookup
/// algorithm of Keiser and Lemire ("Validating UTF-8 In Less Than One Instruction Per Byte",
/// 2021), as `simdutf8` (MIT or Apache-2.0) and simdjson run it. Every byte is checked with
/// the three before it, by three 16-entry tables indexed by nibbles; a block of ASCII only
/// checks that no sequence was left unfinished before it. Run in the pass, it reads each
/// block while the classes are worked out, not in a second pass over the window.
#[derive(Clone, Copy, Default)]
struct Utf8Check {
    /// Whether the pass ran the check.
    checked: bool,
    /// Whether every block is checked in full, ASCII or not ([`TextPass::new`]).
    every_block: bool,
    /// Blocks that held a byte that is not ASCII.
    non_ascii: u32,
    /// The last 32 bytes of the last block checked in full.
    prev: [u8; 32],
    /// Nonzero where `prev` ends in a sequence not finished yet.
    incomplete: [u8; 32],
    /// Nonzero once an error was seen.
    error: [u8; 32],
}

/// [`TextPass::push`] for whole blocks, with the best implementation this CPU has.
fn classify(
    blocks: &[[u8; 64]],
    carry: &mut Carry,
    utf8: &mut Utf8Check,
    long_line: usize,
    out: &mut [TextBlock],
) {
    #[cfg(target_arch = "x86_64")]
    {
        if super::cpu::has_avx2() {
            // SAFETY: the CPU has every feature the function enables, just checked.
            unsafe {
                if utf8.every_block {
                    x86::classify_avx2::<true>(blocks, carry, utf8, long_line, out);
                } else {
                    x86::classify_avx2::<false>(blocks, carry, utf8, long_line, out);
                }
            }
        } else {
            // SAFETY: every x86-64 CPU has SSE2.
            unsafe { x86::classify_sse2(blocks, carry, long_line, out) }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = utf8;
        classify_scalar(blocks, carry, long_line, out);
    }
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

/// The UTF-8 check's error bits ([`Utf8Check`]); a byte is in error when the three tables
/// looked up for it share a bit.
mod utf8_bits {
    pub(super) const TOO_SHORT: u8 = 1 << 0;
    pub(super) const TOO_LONG: u8 = 1 << 1;
    pub(super) const OVERLONG_3: u8 = 1 << 2;
    pub(super) const TOO_LARGE: u8 = 1 << 3;
    pub(super) const SURROGATE: u8 = 1 << 4;
    pub(super) const OVERLONG_2: u8 = 1 << 5;
    pub(super) const TOO_LARGE_1000: u8 = 1 << 6;
    pub(super) const OVERLONG_4: u8 = 1 << 6;
    pub(super) const TWO_CONTS: u8 = 1 << 7;
    pub(super) const CARRY: u8 = TOO_SHORT | TOO_LONG | TWO_CONTS;
}

/// What the byte before says, by its high nibble.
const UTF8_PREV_HIGH: [u8; 16] = {
    use utf8_bits::*;
    let mut t = [TOO_LONG; 16];
    t[0x8] = TWO_CONTS;
    t[0x9] = TWO_CONTS;
    t[0xA] = TWO_CONTS;
    t[0xB] = TWO_CONTS;
    t[0xC] = TOO_SHORT | OVERLONG_2;
    t[0xD] = TOO_SHORT;
    t[0xE] = TOO_SHORT | OVERLONG_3 | SURROGATE;
    t[0xF] = TOO_SHORT | TOO_LARGE | TOO_LARGE_1000 | OVERLONG_4;
    t
};

/// What the byte before says, by its low nibble.
const UTF8_PREV_LOW: [u8; 16] = {
    use utf8_bits::*;
    let mut t = [CARRY | TOO_LARGE | TOO_LARGE_1000; 16];
    t[0x0] = CARRY | OVERLONG_3 | OVERLONG_2 | OVERLONG_4;
    t[0x1] = CARRY | OVERLONG_2;
    t[0x2] = CARRY;
    t[0x3] = CARRY;
    t[0x4] = CARRY | TOO_LARGE;
    t[0xD] = CARRY | TOO_LARGE | TOO_LARGE_1000 | SURROGATE;
    t
};

/// What the byte itself says, by its high nibble.
const UTF8_HIGH: [u8; 16] = {
    use utf8_bits::*;
    let mut t = [TOO_SHORT; 16];
    t[0x8] = TOO_LONG | OVERLONG_2 | TWO_CONTS | OVERLONG_3 | TOO_LARGE_1000 | OVERLONG_4;
    t[0x9] = TOO_LONG | OVERLONG_2 | TWO_CONTS | OVERLONG_3 | TOO_LARGE;
    t[0xA] = TOO_LONG | OVERLONG_2 | TWO_CONTS | SURROGATE | TOO_LARGE;
    t[0xB] = TOO_LONG | OVERLONG_2 | TWO_CONTS | SURROGATE | TOO_LARGE;
    t
};

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::super::cpu::join;
    use super::opaque;
    use super::{
        Carry, SPECIAL_BY_HIGH, SPECIAL_BY_LOW, TextBlock, TextMasks, UTF8_HIGH, UTF8_PREV_HIGH,
        UTF8_PREV_LOW, Utf8Check,
    };

    /// A table of 16 bytes as a vector.
    #[inline(always)]
    fn table_vector(table: &[u8; 16]) -> __m128i {
        // SAFETY: the load reads the 16 bytes of `table`; `loadu` needs no alignment.
        unsafe { _mm_loadu_si128(table.as_ptr().cast::<__m128i>()) }
    }

    /// The UTF-8 errors of `input` (32 bytes), which follows `prev`: nonzero bytes where the
    /// bytes before it make it wrong. A sequence `input` leaves unfinished is not one.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn utf8_errors(input: __m256i, prev: __m256i) -> __m256i {
        let low_nibble = _mm256_set1_epi8(0x0F);
        let table = |t: &[u8; 16]| _mm256_broadcastsi128_si256(table_vector(t));
        let high = |v: __m256i| _mm256_and_si256(_mm256_srli_epi16(v, 4), low_nibble);
        // The bytes 1, 2 and 3 places back, across the two lanes.
        let back = _mm256_permute2x128_si256(prev, input, 0x21);
        let prev1 = _mm256_alignr_epi8(input, back, 16 - 1);
        let prev2 = _mm256_alignr_epi8(input, back, 16 - 2);
        let prev3 = _mm256_alignr_epi8(input, back, 16 - 3);
        let special = _mm256_and_si256(
            _mm256_and_si256(
                _mm256_shuffle_epi8(table(&UTF8_PREV_HIGH), high(prev1)),
                _mm256_shuffle_epi8(table(&UTF8_PREV_LOW), _mm256_and_si256(prev1, low_nibble)),
            ),
            _mm256_shuffle_epi8(table(&UTF8_HIGH), high(input)),
        );
        // The third and fourth bytes of a sequence, which must be continuations: the tables
        // only look one byte back.
        let third = _mm256_subs_epu8(prev2, _mm256_set1_epi8((0b1110_0000u8 - 1) as i8));
        let fourth = _mm256_subs_epu8(prev3, _mm256_set1_epi8((0b1111_0000u8 - 1) as i8));
        let must_continue =
            _mm256_cmpgt_epi8(_mm256_or_si256(third, fourth), _mm256_setzero_si256());
        _mm256_xor_si256(
            _mm256_and_si256(must_continue, _mm256_set1_epi8(0x80u8 as i8)),
            special,
        )
    }

    /// Nonzero where `input` (32 bytes) ends in a sequence that needs more bytes.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn utf8_incomplete(input: __m256i) -> __m256i {
        const LAST: [u8; 32] = {
            let mut t = [0xFF; 32];
            t[29] = 0b1111_0000 - 1;
            t[30] = 0b1110_0000 - 1;
            t[31] = 0b1100_0000 - 1;
            t
        };
        // SAFETY: the load reads the 32 bytes of `LAST`; `loadu` needs no alignment.
        let last = unsafe { _mm256_loadu_si256(LAST.as_ptr().cast::<__m256i>()) };
        _mm256_subs_epu8(input, last)
    }

    /// `EVERY_BLOCK`: see [`TextPass::new`].
    #[target_feature(enable = "avx2,popcnt,bmi1,lzcnt")]
    pub(super) fn classify_avx2<const EVERY_BLOCK: bool>(
        blocks: &[[u8; 64]],
        carry: &mut Carry,
        utf8: &mut Utf8Check,
        long_line: usize,
        out: &mut [TextBlock],
    ) {
        // SAFETY: each load or store reads or writes the 32 bytes of an array of 32.
        let (mut prev, mut incomplete, mut error, mut non_ascii) = unsafe {
            (
                _mm256_loadu_si256(utf8.prev.as_ptr().cast::<__m256i>()),
                _mm256_loadu_si256(utf8.incomplete.as_ptr().cast::<__m256i>()),
                _mm256_loadu_si256(utf8.error.as_ptr().cast::<__m256i>()),
                utf8.non_ascii,
            )
        };
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
            // The masks reach the integer work through `opaque`: seeing where they come
            // from, LLVM would rebuild them from the compare results byte by byte, at ten
            // times the instructions.
            let masks = TextMasks {
                newline: opaque(join(n0, n1)),
                special: opaque(join(s0, s1)),
                fence: opaque(join(f0, f1)),
            };
            *out = carry.block(masks, long_line);
            let ascii = _mm256_movemask_epi8(_mm256_or_si256(lo, hi)) == 0;
            // With `EVERY_BLOCK` the test folds away: no branch.
            if EVERY_BLOCK || !ascii {
                error = _mm256_or_si256(error, utf8_errors(lo, prev));
                error = _mm256_or_si256(error, utf8_errors(hi, lo));
                prev = hi;
                non_ascii += u32::from(!ascii);
            } else {
                // Nothing to check in ASCII but a sequence left unfinished before it.
                error = _mm256_or_si256(error, incomplete);
            }
            if !EVERY_BLOCK && !ascii {
                incomplete = utf8_incomplete(hi);
            }
        }
        if EVERY_BLOCK {
            incomplete = utf8_incomplete(prev);
        }
        utf8.non_ascii = non_ascii;
        // SAFETY: as for the loads above.
        unsafe {
            _mm256_storeu_si256(utf8.prev.as_mut_ptr().cast::<__m256i>(), prev);
            _mm256_storeu_si256(utf8.incomplete.as_mut_ptr().cast::<__m256i>(), incomplete);
            _mm256_storeu_si256(utf8.error.as_mut_ptr().cast::<__m256i>(), error);
        }
        utf8.checked = true;
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
            for every_block in [false, true] {
                let mut avx2 = vec![TextBlock::default(); whole.len()];
                let (carry, utf8) = (&mut Carry::default(), &mut Utf8Check::default());
                // SAFETY: the CPU has every feature the function enables, just checked.
                unsafe {
                    if every_block {
                        x86::classify_avx2::<true>(whole, carry, utf8, LONG, &mut avx2);
                    } else {
                        x86::classify_avx2::<false>(whole, carry, utf8, LONG, &mut avx2);
                    }
                };
                assert_eq!(avx2, want);
            }
        }
    }

    /// What the pass says of `bytes`' UTF-8, classified in pieces cut at `cuts` (block
    /// multiples), against `std`'s answer.
    fn utf8_agrees(bytes: &[u8], cuts: &[usize]) -> Result<(), String> {
        utf8_agrees_in(TextPass::new(false), bytes, cuts)?;
        utf8_agrees_in(TextPass::new(true), bytes, cuts)
    }

    fn utf8_agrees_in(mut pass: TextPass, bytes: &[u8], cuts: &[usize]) -> Result<(), String> {
        let mut out = Vec::new();
        let mut from = 0;
        for &cut in cuts.iter().filter(|&&c| c % 64 == 0 && c < bytes.len()) {
            if cut > from {
                pass.push(&bytes[from..cut], LONG, &mut out);
                from = cut;
            }
        }
        pass.push(&bytes[from..], LONG, &mut out);
        let want = std::str::from_utf8(bytes).is_ok();
        match pass.valid_utf8() {
            Some(got) if got != want => Err(format!("said {got} of {bytes:02x?}")),
            None if has_avx2() => Err("no answer with AVX2".into()),
            _ => Ok(()),
        }
    }

    /// Every sequence of one to four bytes from the bytes that decide UTF-8 (each boundary
    /// of each class), at every place around a block's halves and its end.
    #[test]
    fn the_pass_checks_utf8_as_std_does() {
        let edges: Vec<u8> = vec![
            0x00, 0x0A, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF,
            0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF,
        ];
        let mut seqs: Vec<Vec<u8>> = edges.iter().map(|&a| vec![a]).collect();
        for a in &edges {
            for b in &edges {
                seqs.push(vec![*a, *b]);
            }
        }
        // Past the lead, only a continuation's range decides.
        let second = [0x41u8, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0];
        for lead in [0xE0u8, 0xE1, 0xED, 0xEF, 0xF0, 0xF1, 0xF4, 0xF5] {
            for b in &second {
                for c in [0x41u8, 0x80, 0x9F, 0xA0, 0xBF, 0xC0] {
                    seqs.push(vec![lead, *b, c]);
                    for d in [0x41u8, 0x80, 0xBF, 0xC0] {
                        seqs.push(vec![lead, *b, c, d]);
                    }
                }
            }
        }
        for seq in &seqs {
            for at in [0, 1, 29, 30, 31, 32, 33, 60, 61, 62, 63, 64, 65, 125] {
                // After the sequence: nothing, ASCII, a character, and a block of ASCII
                // before one (an ASCII block must not forget a sequence left unfinished).
                let ascii_block = [&[b'a'; 70][..], "é".as_bytes()].concat();
                for tail in [&b""[..], b"a\n", "é".as_bytes(), &ascii_block] {
                    let mut bytes = vec![b'a'; at];
                    if at >= 40 {
                        // Not ASCII before: the block is checked byte by byte.
                        bytes[3..5].copy_from_slice("é".as_bytes());
                    }
                    bytes.extend_from_slice(seq);
                    bytes.extend_from_slice(tail);
                    utf8_agrees(&bytes, &[64]).unwrap();
                    utf8_agrees(&bytes, &[]).unwrap();
                }
            }
        }
    }

    /// A sequence cut by a block of ASCII, its last bytes at the start of the block after:
    /// the check must not join the two halves over the ASCII between.
    #[test]
    fn an_ascii_block_between_a_sequences_halves_is_an_error() {
        let halves: [(&[u8], &[u8]); 6] = [
            (b"\xe2", b"\x82\xac"),
            (b"\xe2\x82", b"\xac"),
            (b"\xc3", b"\xa9"),
            (b"\xf0", b"\x9f\x98\x80"),
            (b"\xf0\x9f", b"\x98\x80"),
            (b"\xf0\x9f\x98", b"\x80"),
        ];
        for (start, end) in halves {
            let mut bytes = "é".as_bytes().to_vec();
            bytes.resize(64 - start.len(), b'a');
            bytes.extend_from_slice(start);
            bytes.extend_from_slice(&[b'a'; 64]);
            bytes.extend_from_slice(end);
            bytes.extend_from_slice(b"a\n");
            assert_eq!(bytes.len(), 128 + end.len() + 2);
            utf8_agrees(&bytes, &[]).unwrap();
            utf8_agrees(&bytes, &[64, 128]).unwrap();
        }
    }

    /// The pass vouches for text only inside what it checked, at a character's edges.
    #[test]
    fn the_pass_hands_out_only_text_it_checked() {
        if !has_avx2() {
            return;
        }
        let bytes = "é → ✓ plain\n".repeat(10).into_bytes();
        let mut pass = TextPass::default();
        pass.push(&bytes, LONG, &mut Vec::new());
        assert_eq!(pass.text(&bytes).map(str::len), Some(bytes.len()));
        assert!(pass.text(&bytes[..4]).is_none(), "ends inside `→`");
        assert!(pass.text(&bytes[1..]).is_none(), "starts inside `é`");
        assert_eq!(pass.text(&bytes[3..]).map(str::len), Some(bytes.len() - 3));
        let other = bytes.clone();
        assert!(pass.text(&other).is_none(), "bytes it did not check");

        // Pieces that do not follow each other in memory.
        let (a, b) = (vec![b'a'; 64], b"b\n".to_vec());
        let mut pass = TextPass::default();
        pass.push(&a, LONG, &mut Vec::new());
        pass.push(&b, LONG, &mut Vec::new());
        assert!(pass.text(&a).is_none());

        // Invalid bytes anywhere in the pass: no text at all.
        let mut bad = bytes.clone();
        bad[100] = 0xFF;
        let mut pass = TextPass::default();
        pass.push(&bad, LONG, &mut Vec::new());
        assert!(pass.text(&bad[..10]).is_none());
    }

    proptest! {
        #[test]
        fn the_pass_checks_utf8_as_std_does_in_any_text(
            chars in prop::collection::vec(any::<char>(), 0..120),
            flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
            cuts in prop::collection::vec(0usize..8, 0..3),
        ) {
            let mut bytes = String::from_iter(chars).into_bytes();
            if !bytes.is_empty() {
                for (at, b) in flips {
                    let i = at.index(bytes.len());
                    bytes[i] = b;
                }
            }
            let cuts: Vec<usize> = cuts.into_iter().map(|c| c * 64).collect();
            prop_assert_eq!(utf8_agrees(&bytes, &cuts), Ok(()));
        }

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
