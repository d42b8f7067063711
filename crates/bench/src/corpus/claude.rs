//! Claude Code stream-json lines shaped like a recorded Claude Code 2.1.197 session.

use std::fmt::Write as _;
use std::sync::LazyLock;

use super::{Buf, Rng, json, markdown_block, source_file, test_output};

const RECORDED: &str =
    include_str!("../../../../fixtures/streams/claude/real-2.1.197-01_write_question.jsonl");

/// The recorded session's lines: system, assistant text, tool_use, tool_result, text,
/// result.
static LINES: LazyLock<Vec<&'static str>> = LazyLock::new(|| RECORDED.lines().collect());

pub(super) static SYSTEM: LazyLock<&'static str> = LazyLock::new(|| LINES[0]);

/// The recorded line `index`, cut around its `"content":[…]` array: (before, after).
fn around_content(index: usize, after_marker: &str) -> (&'static str, &'static str) {
    let line = LINES[index];
    let start = line
        .find("\"content\":")
        .expect("recorded line has content")
        + 10;
    let end = line[start..]
        .find(after_marker)
        .map(|e| start + e)
        .expect("recorded line has the marker");
    (&line[..start], &line[end..])
}

/// An assistant line with `content` (a JSON array) as its content.
fn assistant(out: &mut Vec<u8>, content: &str) {
    let (before, after) = around_content(1, ",\"stop_reason\"");
    out.extend_from_slice(before.as_bytes());
    out.extend_from_slice(content.as_bytes());
    out.extend_from_slice(after.as_bytes());
    out.push(b'\n');
}

/// A user line carrying a tool result, and Claude Code's `tool_use_result` echo.
fn tool_result(out: &mut Vec<u8>, id: &str, content: &str, echo: &str) {
    let (before, _) = around_content(3, "]},\"parent_tool_use_id\"");
    let _ = writeln!(
        Buf(out),
        "{before}[{{\"tool_use_id\":\"{id}\",\"type\":\"tool_result\",\"content\":{}}}]}},\"parent_tool_use_id\":null,\"session_id\":\"794db700-2a44-4c47-9ae7-6a0ad430ea93\",\"uuid\":\"1e5c5afd-0c7c-4038-9388-ff329ead5bda\",\"timestamp\":\"2026-11-22T09:33:36.516Z\",\"tool_use_result\":{echo}}}",
        json(content)
    );
}

/// One turn of a working session: say something, read a file, edit it, run the tests.
pub(super) fn turn(out: &mut Vec<u8>, rng: &mut Rng, n: u64) {
    let mut text = Vec::new();
    markdown_block(&mut text, rng, n);
    let text = String::from_utf8(text).expect("markdown is UTF-8");
    assistant(
        out,
        &format!("[{{\"type\":\"text\",\"text\":{}}}]", json(&text)),
    );
    if n.is_multiple_of(3) {
        assistant(
            out,
            &format!(
                "[{{\"type\":\"thinking\",\"thinking\":{},\"signature\":\"EqoBCkgIBxABGAIqQ{n}\"}}]",
                json(
                    "The tests pass, but should I print <ralph>DONE</ralph> yet? Not before the docs."
                )
            ),
        );
    }

    let path = format!("/home/dev/shop/src/module_{}.rs", n % 40);
    let lines = 150 + rng.below(500);
    let file = source_file(rng, n, lines);
    let id = format!("toolu_{n:024x}");
    assistant(
        out,
        &format!(
            "[{{\"type\":\"tool_use\",\"id\":\"{id}\",\"name\":\"Read\",\"input\":{{\"file_path\":{}}}}}]",
            json(&path)
        ),
    );
    let numbered: String = file
        .lines()
        .enumerate()
        .map(|(i, l)| format!("{:>6}\u{2192}{l}\n", i + 1))
        .collect();
    let echo = format!(
        "{{\"type\":\"text\",\"file\":{{\"filePath\":{},\"content\":{},\"numLines\":{},\"startLine\":1,\"totalLines\":{}}}}}",
        json(&path),
        json(&file),
        file.lines().count(),
        file.lines().count()
    );
    tool_result(out, &id, &numbered, &echo);

    let old = &file[..file.len().min(600)];
    let new = old.replace("compute(", "compute_checked(");
    let id = format!("toolu_{:024x}", (n << 32) + 1);
    assistant(
        out,
        &format!(
            "[{{\"type\":\"tool_use\",\"id\":\"{id}\",\"name\":\"Edit\",\"input\":{{\"file_path\":{},\"old_string\":{},\"new_string\":{}}}}}]",
            json(&path),
            json(old),
            json(&new)
        ),
    );
    let echo = format!(
        "{{\"filePath\":{},\"oldString\":{},\"newString\":{},\"originalFile\":{},\"structuredPatch\":[{{\"oldStart\":1,\"oldLines\":12,\"newStart\":1,\"newLines\":12,\"lines\":[]}}],\"userModified\":false,\"replaceAll\":false}}",
        json(&path),
        json(old),
        json(&new),
        json(&file)
    );
    tool_result(
        out,
        &id,
        &format!(
            "The file {path} has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n{new}"
        ),
        &echo,
    );

    let id = format!("toolu_{:024x}", (n << 32) + 2);
    assistant(
        out,
        &format!(
            "[{{\"type\":\"tool_use\",\"id\":\"{id}\",\"name\":\"Bash\",\"input\":{{\"command\":\"cargo test 2>&1 | tail -200\",\"description\":\"Run the tests\"}}}}]"
        ),
    );
    let output = test_output(rng, n);
    let echo = format!(
        "{{\"stdout\":{},\"stderr\":\"\",\"interrupted\":false,\"isImage\":false}}",
        json(&output)
    );
    tool_result(out, &id, &output, &echo);

    if n % 8 == 7 {
        // A turn ends; its `result` repeats text that may hold a tag, and never counts.
        out.extend_from_slice(LINES[5].as_bytes());
        out.push(b'\n');
    }
}

/// The one real signal: an assistant text block saying DONE.
pub(super) fn final_signal(out: &mut Vec<u8>) {
    assistant(
        out,
        &format!(
            "[{{\"type\":\"text\",\"text\":{}}}]",
            json("All criteria are met.\n\n<ralph>DONE</ralph>")
        ),
    );
}
