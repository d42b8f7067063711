//! Memory stays bounded whatever the input.

use ralph_signal::SignalKind::{Done, Gutter};
use ralph_signal::{AgentEvent, Decoder, JSON_LINE_CAP, LINE_CAP, StreamFormat};

use crate::util::signals;

const CHUNK: usize = 64 * 1024;

/// A 100 MB line, fed in 64 KiB chunks, with one tag straddling a chunk boundary in the
/// middle and one at the very end: both are found, and the decoder never holds more than a
/// line's cap plus a tag's tail.
#[test]
fn a_100_mb_line_is_scanned_in_bounded_memory() {
    let total = 100 * 1024 * 1024;
    let mut decoder = Decoder::new(StreamFormat::Text);
    let mut out = Vec::new();
    let filler = vec![b'a'; CHUNK];
    let gutter = b"<ralph>GUTTER</ralph>";
    let done = b"<ralph>DONE</ralph>";
    let middle = total / 2;
    let mut fed = 0;
    let mut max_buffered = 0;
    while fed < total {
        let mut chunk = filler.clone();
        // The GUTTER tag starts 7 bytes before this chunk's end and ends in the next chunk.
        if fed + CHUNK == middle {
            chunk[CHUNK - 7..].copy_from_slice(&gutter[..7]);
        }
        if fed == middle {
            chunk[..gutter.len() - 7].copy_from_slice(&gutter[7..]);
        }
        if fed + CHUNK == total {
            chunk[CHUNK - done.len()..].copy_from_slice(done);
        }
        decoder.feed(&chunk, &mut out);
        fed += CHUNK;
        max_buffered = max_buffered.max(decoder.buffered_len());
        assert!(out.is_empty(), "nothing is emitted before the line ends");
    }
    decoder.feed(b"\n", &mut out);
    decoder.finish(&mut out);

    assert!(
        max_buffered <= LINE_CAP + 32,
        "buffered {max_buffered} bytes"
    );
    assert_eq!(signals(&out), [(Gutter, 1), (Done, 1)]);
    let AgentEvent::Text(text) = &out[0] else {
        panic!("{:?}", out[0])
    };
    assert!(
        text.ends_with(&format!(" … [{} more bytes]", total - 4096)),
        "{}",
        &text[4000..]
    );
}

/// A JSON line over the cap is skipped, not buffered, and the stream goes on.
#[test]
fn an_over_long_json_line_is_skipped_in_bounded_memory() {
    let mut decoder = Decoder::new(StreamFormat::ClaudeStreamJson);
    let mut out = Vec::new();
    let head = br#"{"type":"assistant","message":{"content":[{"type":"text","text":""#;
    decoder.feed(head, &mut out);
    let filler = vec![b'x'; CHUNK];
    let mut fed = head.len();
    let mut max_buffered = 0;
    while fed < JSON_LINE_CAP + 4 * CHUNK {
        decoder.feed(&filler, &mut out);
        fed += CHUNK;
        max_buffered = max_buffered.max(decoder.buffered_len());
    }
    decoder.feed(b"<ralph>DONE</ralph>\"}]}}\n", &mut out);
    decoder.feed(
        br#"{"type":"assistant","message":{"content":[{"type":"text","text":"after <ralph>DONE</ralph>"}]}}"#,
        &mut out,
    );
    decoder.finish(&mut out);

    assert!(
        max_buffered <= JSON_LINE_CAP,
        "buffered {max_buffered} bytes"
    );
    assert_eq!(decoder.buffered_len(), 0);
    assert!(
        matches!(&out[0], AgentEvent::Unknown(u) if u.starts_with("skipped a ")),
        "{:?}",
        out[0]
    );
    assert_eq!(
        signals(&out),
        [(Done, 1)],
        "only the line after the skipped one"
    );
}

/// Gemini text with no newline, in 10 MB of deltas, is held only up to the caps while its
/// message stays open; the signal at its end is found.
#[test]
fn an_endless_gemini_message_is_held_in_bounded_memory() {
    let mut decoder = Decoder::new(StreamFormat::GeminiStreamJson);
    let mut out = Vec::new();
    let piece = "a".repeat(CHUNK);
    let line = format!(
        "{{\"type\":\"message\",\"role\":\"assistant\",\"content\":\"{piece}\",\"delta\":true}}\n"
    );
    let mut max_buffered = 0;
    for _ in 0..160 {
        decoder.feed(line.as_bytes(), &mut out);
        max_buffered = max_buffered.max(decoder.buffered_len());
    }
    decoder.feed(
        b"{\"type\":\"message\",\"role\":\"assistant\",\"content\":\" <ralph>DONE</ralph>\",\"delta\":true}\n",
        &mut out,
    );
    decoder.finish(&mut out);
    assert!(
        max_buffered <= 2 * LINE_CAP + 64,
        "buffered {max_buffered} bytes"
    );
    assert_eq!(decoder.buffered_len(), 0);
    assert_eq!(signals(&out), [(Done, 1)]);
}
