//! Codex CLI `exec --json` lines, shaped like the recorded fixtures in `fixtures/streams/codex`.

use std::fmt::Write as _;

use super::{Buf, Rng, json, markdown_block, source_file, test_output};

/// A thread and its first turn begin.
pub(super) fn start(out: &mut Vec<u8>) {
    out.extend_from_slice(
        b"{\"type\":\"thread.started\",\"thread_id\":\"01a202ad-8829-7a91-888b-a80cd75ae4d3\"}\n{\"type\":\"turn.started\"}\n",
    );
}

fn item(out: &mut Vec<u8>, event: &str, body: &str) {
    let _ = writeln!(Buf(out), "{{\"type\":\"item.{event}\",\"item\":{body}}}");
}

/// A command run: started with empty output, completed with all of it.
fn command(out: &mut Vec<u8>, id: u64, command: &str, output: &str, exit: i32) {
    let command = json(command);
    item(
        out,
        "started",
        &format!(
            "{{\"id\":\"item_{id}\",\"type\":\"command_execution\",\"command\":{command},\"aggregated_output\":\"\",\"exit_code\":null,\"status\":\"in_progress\"}}"
        ),
    );
    item(
        out,
        "completed",
        &format!(
            "{{\"id\":\"item_{id}\",\"type\":\"command_execution\",\"command\":{command},\"aggregated_output\":{},\"exit_code\":{exit},\"status\":\"completed\"}}",
            json(output)
        ),
    );
}

/// One turn: think, read a file, run the tests, change files, report.
pub(super) fn turn(out: &mut Vec<u8>, rng: &mut Rng, n: u64) {
    let id = n * 10;
    item(
        out,
        "completed",
        &format!(
            "{{\"id\":\"item_{id}\",\"type\":\"reasoning\",\"text\":{}}}",
            json(
                "**Planning the fix**\n\nRun the tests first; only say <ralph>DONE</ralph> once they pass."
            )
        ),
    );
    let lines = 150 + rng.below(500);
    let file = source_file(rng, n, lines);
    command(
        out,
        id + 1,
        &format!("/bin/bash -lc 'cat src/module_{}.rs'", n % 40),
        &file,
        0,
    );
    let tests = test_output(rng, n);
    command(
        out,
        id + 2,
        "/bin/bash -lc 'cargo test 2>&1 | tail -200'",
        &tests,
        0,
    );
    item(
        out,
        "completed",
        &format!(
            "{{\"id\":\"item_{}\",\"type\":\"file_change\",\"changes\":[{{\"path\":\"src/module_{}.rs\",\"kind\":\"update\"}}],\"status\":\"completed\"}}",
            id + 3,
            n % 40
        ),
    );
    let mut text = Vec::new();
    markdown_block(&mut text, rng, n);
    let text = String::from_utf8(text).expect("markdown is UTF-8");
    item(
        out,
        "completed",
        &format!(
            "{{\"id\":\"item_{}\",\"type\":\"agent_message\",\"text\":{}}}",
            id + 4,
            json(&text)
        ),
    );
    if n % 8 == 7 {
        out.extend_from_slice(b"{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":240,\"cached_input_tokens\":40,\"cache_write_input_tokens\":0,\"output_tokens\":34,\"reasoning_output_tokens\":0}}\n{\"type\":\"turn.started\"}\n");
    }
}

/// The one real signal, in an agent message.
pub(super) fn final_signal(out: &mut Vec<u8>) {
    item(
        out,
        "completed",
        &format!(
            "{{\"id\":\"item_final\",\"type\":\"agent_message\",\"text\":{}}}",
            json("All criteria are met.\n\n<ralph>DONE</ralph>")
        ),
    );
}
