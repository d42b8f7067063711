//! Gemini CLI `-o stream-json` lines, shaped like the recorded fixtures in
//! `fixtures/streams/gemini`: the assistant's text arrives as deltas cut anywhere.

use std::fmt::Write as _;

use super::{Buf, Rng, json, markdown_block, source_file, test_output};

const TS: &str = "2026-11-22T09:56:49.560Z";

/// The session begins.
pub(super) fn start(out: &mut Vec<u8>) {
    let _ = writeln!(
        Buf(out),
        "{{\"type\":\"init\",\"timestamp\":\"{TS}\",\"session_id\":\"751d9fe9-b238-4ba5-b6bf-ab1ff525c761\",\"model\":\"gemini-2.5-pro\"}}"
    );
}

/// `text` as assistant deltas of a few words each, cut at char boundaries.
fn deltas(out: &mut Vec<u8>, rng: &mut Rng, text: &str) {
    let mut rest = text;
    while !rest.is_empty() {
        let mut cut = (8 + rng.below(60)).min(rest.len());
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        let (piece, tail) = rest.split_at(cut);
        let _ = writeln!(
            Buf(out),
            "{{\"type\":\"message\",\"timestamp\":\"{TS}\",\"role\":\"assistant\",\"content\":{},\"delta\":true}}",
            json(piece)
        );
        rest = tail;
    }
}

fn tool(out: &mut Vec<u8>, name: &str, id: &str, parameters: &str, output: &str) {
    let _ = writeln!(
        Buf(out),
        "{{\"type\":\"tool_use\",\"timestamp\":\"{TS}\",\"tool_name\":\"{name}\",\"tool_id\":\"{id}\",\"parameters\":{parameters}}}"
    );
    let _ = writeln!(
        Buf(out),
        "{{\"type\":\"tool_result\",\"timestamp\":\"{TS}\",\"tool_id\":\"{id}\",\"status\":\"success\",\"output\":{}}}",
        json(output)
    );
}

/// One turn: say something in deltas, read a file, run the tests.
pub(super) fn turn(out: &mut Vec<u8>, rng: &mut Rng, n: u64) {
    let mut text = Vec::new();
    markdown_block(&mut text, rng, n);
    let text = String::from_utf8(text).expect("markdown is UTF-8");
    deltas(out, rng, &text);
    let lines = 150 + rng.below(500);
    let file = source_file(rng, n, lines);
    let path = format!("/home/dev/shop/src/module_{}.rs", n % 40);
    tool(
        out,
        "read_file",
        &format!("read_file__read_file_{n}_0"),
        &format!("{{\"absolute_path\":{}}}", json(&path)),
        &file,
    );
    let tests = test_output(rng, n);
    tool(
        out,
        "run_shell_command",
        &format!("run_shell_command__run_shell_command_{n}_1"),
        "{\"command\":\"cargo test 2>&1 | tail -200\",\"description\":\"Run the tests\"}",
        &tests,
    );
    if n % 8 == 7 {
        let _ = writeln!(
            Buf(out),
            "{{\"type\":\"result\",\"timestamp\":\"{TS}\",\"status\":\"success\",\"stats\":{{\"total_tokens\":274,\"input_tokens\":240,\"output_tokens\":34,\"cached\":40,\"input\":200,\"duration_ms\":105,\"tool_calls\":2}}}}"
        );
    }
}

/// The one real signal, split across two deltas as a streaming model would.
pub(super) fn final_signal(out: &mut Vec<u8>) {
    let mut rng = Rng(7);
    deltas(
        out,
        &mut rng,
        "All criteria are met.\n\n<ralph>DONE</ralph>\n",
    );
}
