//! Helpers shared by the tests: decoding under any chunking, and a readable event listing.

use std::fmt::Write as _;
use std::path::PathBuf;

use ralph_signal::{AgentEvent, Decoder, SignalKind, StreamFormat};

/// `fixtures/streams` at the root of the repository.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/streams")
}

/// The bytes of `fixtures/streams/<path>`.
pub fn fixture(path: &str) -> Vec<u8> {
    let path = fixtures_dir().join(path);
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Decodes `chunks` in order, then finishes; checks nothing stays buffered.
pub fn decode_chunks<'a>(
    format: StreamFormat,
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> Vec<AgentEvent> {
    let mut decoder = Decoder::new(format);
    let mut out = Vec::new();
    for chunk in chunks {
        decoder.feed(chunk, &mut out);
    }
    decoder.finish(&mut out);
    assert_eq!(decoder.buffered_len(), 0, "buffered after finish");
    one_text_per_line(out)
}

/// `events` with each [`AgentEvent::Text`] split into one event per line.
///
/// A `Text` carries every line one `feed` showed, so how lines group into events depends on
/// the chunking; what is shown, and in which order, must not.
pub fn one_text_per_line(events: Vec<AgentEvent>) -> Vec<AgentEvent> {
    let mut lines = Vec::with_capacity(events.len());
    for event in events {
        match event {
            AgentEvent::Text(t) if t.contains('\n') => {
                lines.extend(t.split('\n').map(|l| AgentEvent::Text(l.to_owned())));
            }
            other => lines.push(other),
        }
    }
    lines
}

/// Decodes `bytes` in one feed.
pub fn decode(format: StreamFormat, bytes: &[u8]) -> Vec<AgentEvent> {
    decode_chunks(format, [bytes])
}

/// The signals among `events`, as (kind, line number).
pub fn signals(events: &[AgentEvent]) -> Vec<(SignalKind, u64)> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Signal(s) => Some((s.kind, s.line_number)),
            _ => None,
        })
        .collect()
}

/// One event per line, strings in Debug form so control characters would show.
pub fn render(events: &[AgentEvent]) -> String {
    let mut out = String::new();
    for event in events {
        let _ = match event {
            AgentEvent::Text(t) => writeln!(out, "Text {t:?}"),
            AgentEvent::Signal(s) => writeln!(
                out,
                "Signal {:?} at line {}: {:?}",
                s.kind, s.line_number, s.line
            ),
            AgentEvent::ToolCall { name, summary } => {
                writeln!(out, "ToolCall {name:?} {summary:?}")
            }
            AgentEvent::ToolResult { summary, is_error } => {
                let error = if *is_error { " (error)" } else { "" };
                writeln!(out, "ToolResult{error} {summary:?}")
            }
            AgentEvent::SessionId(id) => writeln!(out, "SessionId {id:?}"),
            AgentEvent::Usage(u) => writeln!(
                out,
                "Usage cost={:?} in={:?} out={:?}",
                u.cost_usd, u.input_tokens, u.output_tokens
            ),
            AgentEvent::Error(e) => writeln!(out, "Error {e:?}"),
            AgentEvent::TurnEnd { result } => writeln!(out, "TurnEnd {result:?}"),
            AgentEvent::RateLimited {
                retry_after,
                resets_at: None,
                message,
            } => writeln!(out, "RateLimited retry_after={retry_after:?} {message:?}"),
            AgentEvent::RateLimited {
                retry_after,
                resets_at: Some(at),
                message,
            } => writeln!(
                out,
                "RateLimited retry_after={retry_after:?} resets_at={at} {message:?}"
            ),
            AgentEvent::Unknown(u) => writeln!(out, "Unknown {u:?}"),
            AgentEvent::ControlRequest(c) => writeln!(out, "ControlRequest {c:?}"),
        };
    }
    out
}

/// A small deterministic generator (xorshift64*), so failures replay.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Splits `bytes` at the sorted cut points `cuts`.
pub fn split_at<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut pieces = Vec::with_capacity(cuts.len() + 1);
    let mut start = 0;
    for &cut in cuts {
        pieces.push(&bytes[start..cut]);
        start = cut;
    }
    pieces.push(&bytes[start..]);
    pieces
}

/// Decodes `bytes` whole, one byte at a time, in chunks of every size up to 64, split in two
/// at every cut point, and split at random points; asserts the events are always the same.
/// Returns them.
///
/// Modelled on ripgrep's searcher test utilities, which run every search at every buffer size.
pub fn assert_chunking_invariant(
    format: StreamFormat,
    bytes: &[u8],
    name: &str,
) -> Vec<AgentEvent> {
    let whole = decode(format, bytes);

    let bytewise = decode_chunks(format, bytes.chunks(1));
    assert_eq!(bytewise, whole, "{name}: one byte at a time");

    for size in 2..=64 {
        let chunked = decode_chunks(format, bytes.chunks(size));
        assert_eq!(chunked, whole, "{name}: chunks of {size} bytes");
    }

    // Every cut point: the costly part, so spread over the cores.
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    std::thread::scope(|scope| {
        for first in 0..threads {
            let whole = &whole;
            scope.spawn(move || {
                for cut in (first..=bytes.len()).step_by(threads) {
                    let (a, b) = bytes.split_at(cut);
                    let split = decode_chunks(format, [a, b]);
                    assert_eq!(split, *whole, "{name}: split at byte {cut}");
                }
            });
        }
    });

    let mut rng = Rng::new(bytes.len() as u64 ^ name.len() as u64);
    for round in 0..50 {
        let mut cuts: Vec<usize> = (0..1 + rng.below(8))
            .map(|_| rng.below(bytes.len() + 1))
            .collect();
        cuts.sort_unstable();
        let split = decode_chunks(format, split_at(bytes, &cuts));
        assert_eq!(split, whole, "{name}: random split {round} at {cuts:?}");
    }
    whole
}
