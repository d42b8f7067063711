//! Fuzzing every stream decoder and the sanitizer with mutated fixtures (see `mutate.rs`).
//!
//! Each decoder, on any bytes cut at any points: never panics; gives the same events however
//! the bytes were cut; holds no more than its documented bound between calls and nothing after
//! `finish`; and emits display text with no terminal control in it and within its length cap.

mod mutate;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use ralph_signal::{AgentEvent, DISPLAY_CAP, Decoder, JSON_LINE_CAP, LINE_CAP, StreamFormat};

use mutate::{corpus, fuzz, mutated, repo};

/// Pieces of every format's syntax, and of what hostile agents print.
const TOKENS: &[&[u8]] = &[
    b"<ralph>DONE</ralph>",
    b"<ralph>QUESTION</ralph>",
    b"<ralph>GUTTER</ralph>",
    b"<ralph>",
    b"</ralph>",
    b"\n",
    b"\r\n",
    b"\r",
    b"```\n",
    b"~~~",
    b"`",
    b"    ",
    b"\x1b[2J",
    b"\x1b]0;t\x07",
    b"\x1b]8;;http://x\x1b\\",
    b"\x1bP",
    b"\xc2\x9b",
    b"\x9b",
    b"\xff",
    b"\x00",
    b"\xe2\x82",
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b"\\",
    b"\\u0000",
    b"\\u001b",
    b"\\ud800",
    b"\\\"",
    b":",
    b",",
    b"null",
    b"true",
    b"1e999",
    b"-0",
    b"{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"",
    b"\"}]}}\n",
    b"{\"type\":\"result\",\"result\":\"",
    b"{\"type\":\"user\",\"message\":{\"content\":[{\"type\":\"tool_result\",\"content\":\"",
    b"\"type\":\"text\"",
    b"\"type\":\"tool_use\"",
    b"\"type\":",
    b"\"text\":",
    b"\"delta\":",
    b"\"item\":",
    b"\"part\":",
];

fn seeds() -> Vec<Vec<u8>> {
    let mut seeds = corpus(&repo().join("fixtures/streams"));
    seeds.extend(corpus(&repo().join("fixtures/hostile")));
    seeds
}

/// Cut points for `len` bytes.
fn cuts(raw: &[usize], len: usize) -> Vec<usize> {
    let mut c: Vec<usize> = raw.iter().map(|c| c % (len + 1)).collect();
    c.sort_unstable();
    c
}

fn decode(
    format: StreamFormat,
    bytes: &[u8],
    cuts: &[usize],
) -> Result<Vec<AgentEvent>, TestCaseError> {
    let bound = match format {
        StreamFormat::Text => LINE_CAP + 64,
        _ => JSON_LINE_CAP + 64,
    };
    let mut d = Decoder::new(format);
    let mut out = Vec::new();
    let mut last = 0;
    for &c in cuts.iter().chain(std::iter::once(&bytes.len())) {
        d.feed(&bytes[last..c], &mut out);
        last = c;
        prop_assert!(
            d.buffered_len() <= bound,
            "{format:?} holds {}",
            d.buffered_len()
        );
    }
    d.finish(&mut out);
    prop_assert_eq!(d.buffered_len(), 0, "{:?} holds bytes after finish", format);
    // How lines group into `Text` events follows the chunking; the lines must not.
    Ok(out
        .into_iter()
        .flat_map(|e| match e {
            AgentEvent::Text(t) => t
                .split('\n')
                .map(|l| AgentEvent::Text(l.to_owned()))
                .collect::<Vec<_>>(),
            other => vec![other],
        })
        .collect())
}

/// Whether `s` has something a terminal acts on (newlines and tabs are text).
fn control(s: &str) -> Option<char> {
    s.chars()
        .find(|c| matches!(c, '\0'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}'))
}

fn check_display(format: StreamFormat, events: &[AgentEvent]) -> Result<(), TestCaseError> {
    // The note on a cut line: " … [N more bytes]".
    let cap = DISPLAY_CAP + 64;
    for e in events {
        let shown: Vec<&str> = match e {
            // One line per `\n`, each cut on its own.
            AgentEvent::Text(t) => {
                let lines: Vec<&str> = t.split('\n').collect();
                for line in &lines {
                    prop_assert!(
                        line.len() <= cap,
                        "{format:?}: a line of {} bytes",
                        line.len()
                    );
                }
                lines
            }
            AgentEvent::Signal(s) => vec![&s.line],
            AgentEvent::ToolCall { name, summary } => vec![name, summary],
            AgentEvent::ToolResult { summary, .. } => vec![summary],
            AgentEvent::Error(m) => vec![m],
            AgentEvent::TurnEnd { result } => result.iter().map(String::as_str).collect(),
            _ => vec![],
        };
        for s in shown {
            prop_assert!(
                control(s).is_none(),
                "{:?}: a control character {:?} in {:?}",
                format,
                control(s),
                e
            );
        }
    }
    Ok(())
}

#[test]
fn fuzz_every_decoder_with_mutated_fixtures() {
    let strategy = (
        0..StreamFormat::ALL.len(),
        mutated(seeds(), TOKENS),
        prop::collection::vec(any::<usize>(), 0..10),
    );
    fuzz("decoders", strategy, |(f, bytes, raw_cuts)| {
        let format = StreamFormat::ALL[f];
        let whole = decode(format, &bytes, &[])?;
        let chunked = decode(format, &bytes, &cuts(&raw_cuts, bytes.len()))?;
        prop_assert_eq!(
            &chunked,
            &whole,
            "{:?}: the chunking changed the events",
            format
        );
        check_display(format, &whole)
    });
}

/// Every format reads every other format's streams (an agent configured with the wrong
/// preset) without a panic, byte by byte as well as whole.
#[test]
fn every_decoder_reads_every_fixture_byte_by_byte() {
    let seeds = seeds();
    let mut runs = 0;
    for format in StreamFormat::ALL {
        for seed in &seeds {
            let seed = &seed[..seed.len().min(4096)];
            let whole = decode(format, seed, &[]).unwrap();
            let every: Vec<usize> = (1..seed.len()).collect();
            let bytewise = decode(format, seed, &every).unwrap();
            assert_eq!(bytewise, whole, "{format:?}");
            check_display(format, &whole).unwrap();
            runs += 1;
        }
    }
    eprintln!("fuzz decoders byte by byte: {runs} executions");
}

fn hostile_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(prop::sample::select(TOKENS.to_vec()), 0..40)
            .prop_map(|parts| parts.concat()),
        prop::collection::vec(any::<u8>(), 0..200),
    ]
}

#[test]
fn fuzz_sanitize_leaves_no_control_and_is_idempotent() {
    fuzz("sanitize", hostile_bytes(), |bytes| {
        let once = ralph_signal::sanitize_bytes(&bytes);
        prop_assert!(control(&once).is_none(), "{:?} -> {:?}", bytes, once);
        prop_assert!(!once.contains('\r'), "{:?} -> {:?}", bytes, once);
        let twice = ralph_signal::sanitize(&once);
        prop_assert_eq!(&twice, &once, "not idempotent for {:?}", bytes);
        Ok(())
    });
}
