//! Every fixture under `fixtures/streams`: its decoded events are snapshotted, and must not
//! depend on how the bytes were split.

use std::path::Path;

use ralph_signal::StreamFormat;

use crate::util::{assert_chunking_invariant, render};

fn check(path: &Path, format: StreamFormat) {
    let bytes = std::fs::read(path).unwrap();
    let name = path.file_name().unwrap().to_string_lossy();
    let events = assert_chunking_invariant(format, &bytes, &name);
    insta::assert_snapshot!(render(&events));
}

#[test]
fn text_fixtures_decode_the_same_at_every_split() {
    insta::glob!("../../../../fixtures/streams/text", "*.{txt,bin}", |path| {
        check(path, StreamFormat::Text);
    });
}

#[test]
fn claude_fixtures_decode_the_same_at_every_split() {
    insta::glob!("../../../../fixtures/streams/claude", "*.jsonl", |path| {
        check(path, StreamFormat::ClaudeStreamJson);
    });
}

#[test]
fn codex_fixtures_decode_the_same_at_every_split() {
    insta::glob!("../../../../fixtures/streams/codex", "*.jsonl", |path| {
        check(path, StreamFormat::CodexJson);
    });
}

#[test]
fn gemini_fixtures_decode_the_same_at_every_split() {
    insta::glob!("../../../../fixtures/streams/gemini", "*.jsonl", |path| {
        check(path, StreamFormat::GeminiStreamJson);
    });
}

#[test]
fn opencode_fixtures_decode_the_same_at_every_split() {
    insta::glob!("../../../../fixtures/streams/opencode", "*.jsonl", |path| {
        check(path, StreamFormat::OpencodeJson);
    });
}

#[test]
fn amp_fixtures_decode_the_same_at_every_split() {
    insta::glob!("../../../../fixtures/streams/amp", "*.jsonl", |path| {
        check(path, StreamFormat::AmpStreamJson);
    });
}

#[test]
fn cursor_fixtures_decode_the_same_at_every_split() {
    insta::glob!("../../../../fixtures/streams/cursor", "*.jsonl", |path| {
        check(path, StreamFormat::CursorStreamJson);
    });
}
