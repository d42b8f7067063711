//! Properties: signals are found wherever they are put and however the bytes are cut.

use proptest::prelude::*;
use ralph_signal::{SignalKind, StreamFormat};

use crate::util::{decode, decode_chunks, signals, split_at};

const TAGS: [(&str, SignalKind); 4] = [
    ("<ralph>DONE</ralph>", SignalKind::Done),
    ("<ralph>QUESTION</ralph>", SignalKind::Question),
    ("<ralph>GUTTER</ralph>", SignalKind::Gutter),
    ("<ralph>COMPLETE</ralph>", SignalKind::Done),
];

#[derive(Debug, Clone)]
enum Piece {
    /// Prose with no markdown code syntax and no tag in it.
    Words(String),
    Newline,
    Tag(usize),
}

fn piece() -> impl Strategy<Value = Piece> {
    prop_oneof![
        4 => "[a-zA-Z0-9 .,:;!?/()>-]{0,12}".prop_map(Piece::Words),
        2 => Just(Piece::Newline),
        1 => (0..TAGS.len()).prop_map(Piece::Tag),
    ]
}

/// The text, and the signals it must yield: per line, each kind once, in order.
fn build(pieces: &[Piece], crlf: bool) -> (Vec<u8>, Vec<(SignalKind, u64)>) {
    let mut text = String::new();
    let mut want = Vec::new();
    let mut line = 1;
    let mut line_kinds: Vec<SignalKind> = Vec::new();
    for piece in pieces {
        match piece {
            Piece::Words(w) => text.push_str(w),
            Piece::Newline => {
                text.push_str(if crlf { "\r\n" } else { "\n" });
                line += 1;
                line_kinds.clear();
            }
            Piece::Tag(i) => {
                let (tag, kind) = TAGS[*i];
                text.push_str(tag);
                if !line_kinds.contains(&kind) {
                    line_kinds.push(kind);
                    want.push((kind, line));
                }
            }
        }
    }
    (text.into_bytes(), want)
}

/// Cut points derived from arbitrary numbers, sorted, within `len`.
fn cuts(raw: &[usize], len: usize) -> Vec<usize> {
    let mut cuts: Vec<usize> = raw.iter().map(|c| c % (len + 1)).collect();
    cuts.sort_unstable();
    cuts
}

/// Bytes drawn mostly from markdown's and terminals' special characters.
fn hostile_bytes() -> impl Strategy<Value = Vec<u8>> {
    let atoms: Vec<&'static [u8]> = vec![
        b"<ralph>",
        b"DONE</ralph>",
        b"QUESTION</ralph>",
        b"<ralph>GUTTER</ralph>",
        b"`",
        b"``",
        b"```",
        b"~~~",
        b"   ",
        b"\n",
        b"\r",
        b"\r\n",
        b"\\",
        b"\x1b[1m",
        b"\x1b]0;",
        b"\x07",
        b"\xc2\x9b",
        b"\xff",
        b"\x00",
        b"\xe2\x82",
        b"word",
        b" ",
    ];
    prop::collection::vec(prop::sample::select(atoms), 0..60).prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn inserted_signals_are_found_whatever_the_chunking(
        pieces in prop::collection::vec(piece(), 0..80),
        crlf in any::<bool>(),
        raw_cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let (text, want) = build(&pieces, crlf);
        let cuts = cuts(&raw_cuts, text.len());
        let events = decode_chunks(StreamFormat::Text, split_at(&text, &cuts));
        prop_assert_eq!(signals(&events), want);
    }

    #[test]
    fn any_bytes_decode_the_same_whatever_the_chunking(
        bytes in hostile_bytes(),
        raw_cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let whole = decode(StreamFormat::Text, &bytes);
        let cuts = cuts(&raw_cuts, bytes.len());
        prop_assert_eq!(decode_chunks(StreamFormat::Text, split_at(&bytes, &cuts)), whole);
    }

    /// Claude's assistant text goes through the same scanner: the same text gives the same
    /// signals as plain text, whatever the chunking of the JSON line.
    #[test]
    fn claude_assistant_text_finds_what_plain_text_finds(
        pieces in prop::collection::vec(piece(), 0..40),
        raw_cuts in prop::collection::vec(any::<usize>(), 0..6),
    ) {
        let (text, want) = build(&pieces, false);
        let text = String::from_utf8(text).unwrap();
        let line = serde_json::json!({
            "type": "assistant",
            "message": {"content": [{"type": "text", "text": text}]},
        })
        .to_string()
            + "\n";
        let cuts = cuts(&raw_cuts, line.len());
        let events = decode_chunks(StreamFormat::ClaudeStreamJson, split_at(line.as_bytes(), &cuts));
        prop_assert_eq!(signals(&events), want);
    }

    /// Each format's agent text goes through the same scanner: the same text, written as each
    /// CLI writes it, gives the same signals as plain text. Gemini's text is also cut into
    /// deltas at arbitrary points.
    #[test]
    fn every_format_finds_in_agent_text_what_plain_text_finds(
        pieces in prop::collection::vec(piece(), 0..40),
        raw_cuts in prop::collection::vec(any::<usize>(), 0..6),
        raw_deltas in prop::collection::vec(any::<usize>(), 0..6),
    ) {
        let (text, want) = build(&pieces, false);
        let text = String::from_utf8(text).unwrap();
        let mut streams = vec![
            (StreamFormat::CodexJson, serde_json::json!({
                "type": "item.completed", "item": {"id": "i", "type": "agent_message", "text": text},
            }).to_string()),
            (StreamFormat::OpencodeJson, serde_json::json!({
                "type": "text", "sessionID": "s", "part": {"type": "text", "text": text},
            }).to_string()),
            (StreamFormat::CursorStreamJson, serde_json::json!({
                "type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
            }).to_string()),
            (StreamFormat::AmpStreamJson, serde_json::json!({
                "type": "assistant", "message": {"content": [{"type": "text", "text": text}]},
            }).to_string()),
        ];
        let deltas = cuts(&raw_deltas, text.len());
        let gemini: Vec<String> = split_at(text.as_bytes(), &deltas)
            .into_iter()
            .map(|piece| serde_json::json!({
                "type": "message", "role": "assistant", "delta": true,
                "content": std::str::from_utf8(piece).unwrap(),
            }).to_string())
            .collect();
        streams.push((StreamFormat::GeminiStreamJson, gemini.join("\n")));
        for (format, stream) in streams {
            let stream = stream + "\n";
            let cuts = cuts(&raw_cuts, stream.len());
            let events = decode_chunks(format, split_at(stream.as_bytes(), &cuts));
            prop_assert_eq!(signals(&events), want.clone(), "{:?}", format);
        }
    }

    /// Whatever bytes come, no format panics, and none depends on the chunking.
    #[test]
    fn any_json_ish_bytes_decode_the_same_in_every_format(
        atoms in prop::collection::vec(prop::sample::select(JSON_ATOMS.to_vec()), 0..60),
        raw_cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let bytes = atoms.concat();
        let cuts = cuts(&raw_cuts, bytes.len());
        for format in StreamFormat::ALL {
            let whole = decode(format, &bytes);
            prop_assert_eq!(decode_chunks(format, split_at(&bytes, &cuts)), whole, "{:?}", format);
        }
    }
}

/// Pieces of the lines agents write, and of broken ones.
const JSON_ATOMS: [&[u8]; 24] = [
    br#"{"type":"message","role":"assistant","content":""#,
    br#"","delta":true}"#,
    br#"{"type":"item.completed","item":{"id":"i","type":"agent_message","text":""#,
    br#"{"type":"item.started","item":{"id":"i","type":"command_execution","command":""#,
    br#""}}"#,
    br#"{"type":"text","sessionID":"s","part":{"text":""#,
    br#"{"type":"assistant","message":{"content":[{"type":"text","text":""#,
    br#""}]}}"#,
    br#"{"type":"tool_call","subtype":"completed","call_id":"c","tool_call":{"readToolCall":{"args":{"path":""#,
    br#"{"type":"result","status":"error","is_error":true,"result":""#,
    br#"{"type":"turn.completed","usage":{"input_tokens":5}}"#,
    br#"{"type":"step_finish","part":{"reason":"stop","cost":0.5}}"#,
    b"<ralph>",
    b"DONE</ralph>",
    b"```",
    b"`",
    br"\n",
    br#"\""#,
    br"\\",
    br"\u00e9",
    b"\n",
    b"\"",
    b"{",
    b"429 Too Many Requests",
];
