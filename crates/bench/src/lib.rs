//! ralph's benchmarks: how fast the stream decoders are, and what the whole `ralph` binary costs
//! a user, each next to a baseline measured in the same run.
//!
//! # Theory of operation
//!
//! Two halves, both behind `make bench`:
//!
//! - **In process** (`benches/decode.rs`, criterion): the [`ralph_signal::Decoder`] reads large
//!   generated streams ([`corpus`]) in 64 KiB chunks, as the loop reads a pipe. Next to it, on
//!   the same bytes, the limit (one `memchr::memmem` pass for `<ralph>`, [`baseline::memmem`])
//!   and, for JSON formats, the naive approach (every line into a `serde_json::Value`, then a
//!   substring search, [`baseline::naive`]).
//! - **Whole process** (`src/main.rs`, the `ralph-bench` driver): runs the release `ralph`
//!   binary with the scripted fake agent and measures what a user waits for: throughput and
//!   peak memory on huge outputs (next to a plain pipe through `cat`), overhead per iteration,
//!   how fast a question is shown and an answer delivered, what a waiting loop costs while
//!   idle, and start-up time. It then collects criterion's estimates, prints one table and
//!   writes `target/bench/results.json`.
//!
//! Nothing here asserts on time: the numbers are reported, never tested, so `make test` stays
//! deterministic. The corpora are checked for correctness (the planted signal is found exactly
//! once) before anything is timed.

#![forbid(unsafe_code)]

pub mod baseline;
pub mod corpus;

use ralph_signal::{AgentEvent, Decoder, StreamFormat};

/// The read size of the loop's pipe reader, used for every in-process measurement.
pub const CHUNK: usize = 64 * 1024;

/// What one pass of a decoder over a corpus produced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Decoded {
    /// Every event pushed.
    pub events: usize,
    /// The signal events among them.
    pub signals: usize,
}

/// Decodes `data` in [`CHUNK`]-sized pieces, draining the events after each piece as the loop
/// does (so they are built and dropped, not accumulated).
pub fn decode(format: StreamFormat, data: &[u8]) -> Decoded {
    let mut decoder = Decoder::new(format);
    let mut out = Vec::with_capacity(1024);
    let mut seen = Decoded::default();
    let mut count = |out: &mut Vec<AgentEvent>| {
        seen.events += out.len();
        seen.signals += out
            .iter()
            .filter(|e| matches!(e, AgentEvent::Signal(_)))
            .count();
        out.clear();
    };
    for chunk in data.chunks(CHUNK) {
        decoder.feed(chunk, &mut out);
        count(&mut out);
    }
    decoder.finish(&mut out);
    count(&mut out);
    seen
}

/// Whether a quick run was asked for (`BENCH_QUICK=1`): smaller corpora, fewer trials.
pub fn quick() -> bool {
    std::env::var("BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0")
}
