//! Byte classes of 64-byte blocks as bit masks, with SIMD: the one module where ralph uses
//! `unsafe` code.
//!
//! A scanner that asks several questions of every byte (is it a newline? could a terminal act
//! on it? could it start a tag? is it an escaped quote?) pays for one pass over the bytes per
//! question when each is a library search. Here one pass answers them all: each 64-byte block
//! is loaded once and compared against every byte of interest, and each answer comes back as a
//! `u64` whose bit `i` stands for the block's byte `i`. The scanners then work on the masks
//! with ordinary integer code (`trailing_zeros`, shifts, `count_ones`). Two scanners use it:
//! the plain-text scanner ([`text`]) and the JSON reader's long strings ([`string`]).
//!
//! Each has three implementations that give the same results: AVX2, chosen at run time where
//! the CPU has it; SSE2, which every x86-64 CPU has; and a plain loop, which the other two are
//! tested against (and which serves every other platform). The `unsafe` code is the unaligned
//! loads (each reads 32 or 16 bytes inside a `&[u8; 64]`, or a 16-byte table), the calls
//! into the `target_feature` functions after the CPU was checked, the text the plain-text
//! pass hands out as UTF-8 it has checked already ([`TextPass::text`]), and an empty `asm!`
//! that hides a value from the optimizer (`opaque` in `text`).
#![allow(unsafe_code)]

mod string;
mod text;

pub(crate) use string::json_string;
#[cfg(test)]
pub(crate) use text::is_special;
pub(crate) use text::{TextBlock, TextPass};

/// What the x86-64 implementations share.
#[cfg(target_arch = "x86_64")]
mod cpu {
    /// Two 32-bit halves of a block's mask as one.
    #[inline(always)]
    pub(super) fn join(lo: i32, hi: i32) -> u64 {
        u64::from(lo as u32) | (u64::from(hi as u32) << 32)
    }

    /// Whether the CPU has what the AVX2 implementations enable.
    #[inline(always)]
    pub(super) fn has_avx2() -> bool {
        std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("popcnt")
            && std::arch::is_x86_feature_detected!("bmi1")
            && std::arch::is_x86_feature_detected!("lzcnt")
    }
}
