//! Where a JSON string ends, and how many `\n` escapes it holds, 64 bytes at a time (see
//! `crate::skim`).

/// How far [`json_string`] got in a JSON string body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StringScan {
    /// The closing quote, if it was found.
    pub(crate) quote: Option<usize>,
    /// Where a character or an escape starts, with fewer than 64 bytes after it, when no
    /// closing quote was found: the rest is for a byte-by-byte walk.
    pub(crate) at: usize,
    /// `\n` escapes before `quote` (or `at`).
    pub(crate) newlines: usize,
}

/// The masks of one 64-byte block of a string body: its `"`, its `\\` and its `n`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct StringMasks {
    quote: u64,
    backslash: u64,
    n: u64,
}

/// The bytes of [`StringMasks`], in its order.
const STRING_BYTES: [u8; 3] = [b'"', b'\\', b'n'];

/// What one block of a string body passes on to the next.
struct StringCarry {
    at: usize,
    newlines: usize,
    /// 1 when the block's first byte is escaped (a backslash ended the block before).
    escaped: u64,
}

impl StringCarry {
    /// Takes one block: the quote that ends the string, if the block has it.
    ///
    /// Which bytes are escaped comes from the backslash mask with integer arithmetic
    /// (simdjson's `find_escaped_branchless`): a run of backslashes escapes the byte after it
    /// when it is odd, and adding a run's start to the run carries past its end exactly then.
    #[inline(always)]
    fn block(&mut self, m: StringMasks) -> Option<usize> {
        const EVEN: u64 = 0x5555_5555_5555_5555;
        let backslash = m.backslash & !self.escaped;
        let follows = (backslash << 1) | self.escaped;
        let odd_starts = backslash & !EVEN & !follows;
        let (sum, overflow) = odd_starts.overflowing_add(backslash);
        let escaped = (EVEN ^ (sum << 1)) & follows;
        let quotes = m.quote & !escaped;
        let newlines = m.n & escaped;
        if quotes != 0 {
            let k = quotes.trailing_zeros();
            self.newlines += (newlines & !(!0 << k)).count_ones() as usize;
            return Some(self.at + k as usize);
        }
        self.newlines += newlines.count_ones() as usize;
        self.escaped = u64::from(overflow);
        self.at += 64;
        None
    }

    /// Where the blocks ended: the byte after them is escaped if `escaped`, and is then
    /// taken here.
    fn finish(mut self, s: &[u8]) -> StringScan {
        if self.escaped != 0
            && let Some(&b) = s.get(self.at)
        {
            self.newlines += usize::from(b == b'n');
            self.at += 1;
        }
        StringScan {
            quote: None,
            at: self.at,
            newlines: self.newlines,
        }
    }

    fn found(&self, quote: usize) -> StringScan {
        StringScan {
            quote: Some(quote),
            at: quote,
            newlines: self.newlines,
        }
    }
}

/// Looks for the end of a JSON string whose body goes on at `at` (where a character or an
/// escape starts), 64 bytes at a time, and counts its `\n` escapes on the way.
pub(crate) fn json_string(s: &[u8], at: usize) -> StringScan {
    let mut carry = StringCarry {
        at,
        newlines: 0,
        escaped: 0,
    };
    let (blocks, _) = s.get(at..).unwrap_or_default().as_chunks::<64>();
    #[cfg(target_arch = "x86_64")]
    let quote = if super::cpu::has_avx2() {
        // SAFETY: the CPU has every feature the function enables, just checked.
        unsafe { x86::json_string_avx2(blocks, &mut carry) }
    } else {
        // SAFETY: every x86-64 CPU has SSE2.
        unsafe { x86::json_string_sse2(blocks, &mut carry) }
    };
    #[cfg(not(target_arch = "x86_64"))]
    let quote = json_string_scalar(blocks, &mut carry);
    match quote {
        Some(quote) => carry.found(quote),
        None => carry.finish(s),
    }
}

/// The reference for [`json_string`]'s blocks: masks made one byte at a time.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn json_string_scalar(blocks: &[[u8; 64]], carry: &mut StringCarry) -> Option<usize> {
    blocks.iter().find_map(|block| {
        let mut m = StringMasks::default();
        for (i, &b) in block.iter().enumerate() {
            m.quote |= u64::from(b == b'"') << i;
            m.backslash |= u64::from(b == b'\\') << i;
            m.n |= u64::from(b == b'n') << i;
        }
        carry.block(m)
    })
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::super::cpu::join;
    use super::{STRING_BYTES, StringCarry, StringMasks};

    #[target_feature(enable = "avx2,popcnt,bmi1")]
    pub(super) fn json_string_avx2(blocks: &[[u8; 64]], carry: &mut StringCarry) -> Option<usize> {
        let [quote, backslash, n] = STRING_BYTES.map(|b| _mm256_set1_epi8(b as i8));
        for block in blocks {
            // SAFETY: both loads read 32 bytes inside the 64-byte `block`; `loadu` needs no
            // alignment.
            let (lo, hi) = unsafe {
                let p = block.as_ptr().cast::<__m256i>();
                (_mm256_loadu_si256(p), _mm256_loadu_si256(p.add(1)))
            };
            let eq = |c: __m256i| {
                join(
                    _mm256_movemask_epi8(_mm256_cmpeq_epi8(lo, c)),
                    _mm256_movemask_epi8(_mm256_cmpeq_epi8(hi, c)),
                )
            };
            let m = StringMasks {
                quote: eq(quote),
                backslash: eq(backslash),
                n: eq(n),
            };
            if let Some(end) = carry.block(m) {
                return Some(end);
            }
        }
        None
    }

    #[target_feature(enable = "sse2")]
    pub(super) fn json_string_sse2(blocks: &[[u8; 64]], carry: &mut StringCarry) -> Option<usize> {
        let [quote, backslash, n] = STRING_BYTES.map(|b| _mm_set1_epi8(b as i8));
        for block in blocks {
            let mut m = StringMasks::default();
            for q in 0..4 {
                // SAFETY: the load reads bytes `16 * q..16 * q + 16` of the 64-byte `block`;
                // `loadu` needs no alignment.
                let v = unsafe { _mm_loadu_si128(block.as_ptr().cast::<__m128i>().add(q)) };
                let bits = |c: __m128i| u64::from(_mm_movemask_epi8(_mm_cmpeq_epi8(v, c)) as u16);
                m.quote |= bits(quote) << (16 * q);
                m.backslash |= bits(backslash) << (16 * q);
                m.n |= bits(n) << (16 * q);
            }
            if let Some(end) = carry.block(m) {
                return Some(end);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    #[cfg(target_arch = "x86_64")]
    use super::super::cpu::has_avx2;
    use super::*;

    /// The end of a string body and its `\n` escapes, one byte at a time.
    fn walked(s: &[u8], mut at: usize) -> (Option<usize>, usize) {
        let mut newlines = 0;
        while at < s.len() {
            match s[at] {
                b'"' => return (Some(at), newlines),
                b'\\' => {
                    newlines += usize::from(s.get(at + 1) == Some(&b'n'));
                    at += 2;
                }
                _ => at += 1,
            }
        }
        (None, newlines)
    }

    /// [`json_string`] and a walk of the rest, as the JSON reader uses them.
    fn scanned(s: &[u8], at: usize) -> (Option<usize>, usize) {
        let scan = json_string(s, at);
        match scan.quote {
            Some(q) => (Some(q), scan.newlines),
            None => {
                let (q, rest) = walked(s, scan.at);
                (q, scan.newlines + rest)
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    fn all_implementations(s: &[u8]) -> Vec<(Option<usize>, usize, usize, u64)> {
        let (blocks, _) = s.as_chunks::<64>();
        let new = || StringCarry {
            at: 0,
            newlines: 0,
            escaped: 0,
        };
        let seen = |quote, c: StringCarry| (quote, c.at, c.newlines, c.escaped);
        let mut c = new();
        let mut out = vec![seen(json_string_scalar(blocks, &mut c), c)];
        let mut c = new();
        // SAFETY: every x86-64 CPU has SSE2.
        out.push(seen(unsafe { x86::json_string_sse2(blocks, &mut c) }, c));
        if has_avx2() {
            let mut c = new();
            // SAFETY: the CPU has every feature the function enables, just checked.
            out.push(seen(unsafe { x86::json_string_avx2(blocks, &mut c) }, c));
        }
        out
    }

    #[test]
    fn a_string_ends_at_its_first_unescaped_quote() {
        for body in [&b"plain"[..], br"one \n two", br"\\", br#"\""#, br#"\\\""#] {
            for pad in [0, 1, 60, 61, 62, 63, 64, 127, 200] {
                let mut s = vec![b'x'; pad];
                s.extend_from_slice(body);
                s.extend_from_slice(b"\" tail");
                s.extend(std::iter::repeat_n(b'y', 70));
                assert_eq!(scanned(&s, 0), walked(&s, 0), "{body:?} after {pad}");
            }
        }
    }

    proptest! {
        #[test]
        fn a_string_scan_agrees_with_walking_it(
            bytes in prop::collection::vec(prop::sample::select(vec![
                b'a', b'n', b'"', b'\\', b'\\', b'\\', b' ', 0xc3,
            ]), 0..400),
            from in 0usize..400,
        ) {
            let from = from.min(bytes.len());
            prop_assert_eq!(scanned(&bytes, from), walked(&bytes, from));
        }

        #[cfg(target_arch = "x86_64")]
        #[test]
        fn every_string_implementation_agrees(
            bytes in prop::collection::vec(prop::sample::select(vec![
                b'a', b'n', b'"', b'\\', b'\\', b' ',
            ]), 64..400),
        ) {
            let all = all_implementations(&bytes);
            prop_assert!(all.windows(2).all(|w| w[0] == w[1]), "{all:?}");
        }
    }
}
