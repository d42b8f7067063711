//! Large, realistic agent output, generated deterministically so every run reads the same bytes.
//!
//! Each corpus is built from repeated, varied blocks of what agents really print: markdown
//! reports with code fences and inline code, long minified lines, coloured tool output, and
//! Claude Code stream-json whose line shapes are taken from a recorded session
//! (`fixtures/streams/claude/real-2.1.197-01_write_question.jsonl`). Most of a stream-json
//! session's bytes are tool results (file bodies, command output), so most of this one's are
//! too. `<ralph>` tags appear where they must not count (code, tool results, file bodies, the
//! final `result`); one real signal can be planted at the very end, so a decoder that finds
//! exactly one signal has read everything right.

mod claude;
mod codex;
mod gemini;

use std::fmt::Write as _;

use ralph_signal::StreamFormat;

/// One kind of stream to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Corpus {
    /// An agent's markdown in plain text: prose, lists, headings, fenced code, inline code.
    /// Short lines (about 60 bytes on average).
    TextMarkdown,
    /// Plain text of long lines (1 to 8 KiB): minified JSON and log lines, some non-ASCII.
    TextLongLines,
    /// Build and test output with ANSI colours on a third of the lines, as a CLI agent relays it.
    TextAnsi,
    /// Claude Code `--output-format stream-json --verbose`: assistant text, thinking, tool calls,
    /// and large tool results (file bodies echoed twice, as Claude Code does, command output).
    ClaudeStreamJson,
    /// Codex CLI `exec --json`: reasoning, agent messages, command executions whose output
    /// holds file bodies and test runs, file changes.
    CodexJson,
    /// Gemini CLI `-o stream-json`: assistant text in small deltas, tool calls and results.
    GeminiStreamJson,
}

impl Corpus {
    /// Every corpus, in report order.
    pub const ALL: [Corpus; 6] = [
        Corpus::TextMarkdown,
        Corpus::TextLongLines,
        Corpus::TextAnsi,
        Corpus::ClaudeStreamJson,
        Corpus::CodexJson,
        Corpus::GeminiStreamJson,
    ];

    /// A short name, used as criterion's group name and in the report.
    pub fn name(self) -> &'static str {
        match self {
            Corpus::TextMarkdown => "text_markdown",
            Corpus::TextLongLines => "text_long_lines",
            Corpus::TextAnsi => "text_ansi",
            Corpus::ClaudeStreamJson => "claude_stream_json",
            Corpus::CodexJson => "codex_json",
            Corpus::GeminiStreamJson => "gemini_stream_json",
        }
    }

    /// How the decoder reads it.
    pub fn format(self) -> StreamFormat {
        match self {
            Corpus::ClaudeStreamJson => StreamFormat::ClaudeStreamJson,
            Corpus::CodexJson => StreamFormat::CodexJson,
            Corpus::GeminiStreamJson => StreamFormat::GeminiStreamJson,
            _ => StreamFormat::Text,
        }
    }

    /// At least `size` bytes of this corpus, whole lines only. With `signal`, a real
    /// `<ralph>DONE</ralph>` ends it (the only one a decoder may find); without, there is none.
    pub fn generate(self, size: usize, signal: bool) -> Vec<u8> {
        let mut out = Vec::with_capacity(size + 64 * 1024);
        let mut rng = Rng(0x5eed_cafe_f00d_beef);
        let mut n = 0u64;
        match self {
            Corpus::ClaudeStreamJson => {
                out.extend_from_slice(claude::SYSTEM.as_bytes());
                out.push(b'\n');
            }
            Corpus::CodexJson => codex::start(&mut out),
            Corpus::GeminiStreamJson => gemini::start(&mut out),
            _ => {}
        }
        while out.len() < size {
            match self {
                Corpus::TextMarkdown => markdown_block(&mut out, &mut rng, n),
                Corpus::TextLongLines => long_lines_block(&mut out, &mut rng, n),
                Corpus::TextAnsi => ansi_block(&mut out, &mut rng, n),
                Corpus::ClaudeStreamJson => claude::turn(&mut out, &mut rng, n),
                Corpus::CodexJson => codex::turn(&mut out, &mut rng, n),
                Corpus::GeminiStreamJson => gemini::turn(&mut out, &mut rng, n),
            }
            n += 1;
        }
        if signal {
            match self {
                Corpus::ClaudeStreamJson => claude::final_signal(&mut out),
                Corpus::CodexJson => codex::final_signal(&mut out),
                Corpus::GeminiStreamJson => gemini::final_signal(&mut out),
                _ => out.extend_from_slice(b"All criteria are met.\n<ralph>DONE</ralph>\n"),
            }
        }
        out
    }
}

/// xorshift64*: enough variety that no two blocks are byte-identical, no dependency.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const WORDS: &[&str] = &[
    "the",
    "cache",
    "entry",
    "is",
    "read",
    "after",
    "expiry",
    "so",
    "stale",
    "values",
    "are",
    "served",
    "I",
    "changed",
    "`Cache::get`",
    "to",
    "compare",
    "timestamp",
    "with",
    "`now`",
    "and",
    "added",
    "a",
    "regression",
    "test",
    "for",
    "it",
    "which",
    "fails",
    "before",
    "fix",
    "passes",
    "now",
    "whole",
    "suite",
    "runs",
    "in",
    "seconds",
    "clippy",
    "clean",
    "→",
    "café",
    "`src/store.rs`",
    "handler",
    "returns",
    "early",
    "when",
    "lock",
    "held",
    "by",
    "another",
    "writer",
    "this",
    "keeps",
    "behaviour",
    "unchanged",
    "callers",
];

const CODE: &[&str] = &[
    "pub fn get(&mut self, key: &str, now: Instant) -> Option<&V> {",
    "    if self.map.get(key).is_some_and(|e| e.expires <= now) {",
    "        self.map.remove(key);",
    "    }",
    "    self.map.get(key).map(|e| &e.value)",
    "}",
    "let cfg = Config::load(&path).context(\"reading the config\")?;",
    "for (i, line) in text.lines().enumerate() {",
    "    println!(\"{i:>4} {line}\");",
    "assert_eq!(parse(\"<ralph>DONE</ralph>\"), Some(Done));",
    "// the prompt says to print `<ralph>DONE</ralph>` when done",
];

/// A sentence of `min` to `min + spread - 1` words, ending in a period.
fn sentence(out: &mut Vec<u8>, rng: &mut Rng, min: usize, spread: usize) {
    let words = min + rng.below(spread);
    for i in 0..words {
        if i > 0 {
            out.push(b' ');
        }
        let w = rng.pick(WORDS);
        if i == 0 && w.as_bytes()[0].is_ascii_lowercase() {
            out.push(w.as_bytes()[0].to_ascii_uppercase());
            out.extend_from_slice(&w.as_bytes()[1..]);
        } else {
            out.extend_from_slice(w.as_bytes());
        }
    }
    out.push(b'.');
}

/// One section of an agent's markdown report.
fn markdown_block(out: &mut Vec<u8>, rng: &mut Rng, n: u64) {
    let _ = writeln!(
        Buf(out),
        "## Step {n}: {}\n",
        rng.pick(&["Findings", "Changes", "Tests", "Next"])
    );
    // A paragraph: agents rarely wrap, so some lines are long.
    for _ in 0..1 + rng.below(3) {
        sentence(out, rng, 6, 30);
        out.push(b' ');
        sentence(out, rng, 4, 12);
        out.push(b'\n');
    }
    out.push(b'\n');
    for i in 1..=2 + rng.below(4) {
        let _ = write!(Buf(out), "{i}. ");
        sentence(out, rng, 5, 10);
        out.push(b'\n');
    }
    out.push(b'\n');
    if rng.below(2) == 0 {
        out.extend_from_slice(b"```rust\n");
        for _ in 0..3 + rng.below(10) {
            out.extend_from_slice(rng.pick(CODE).as_bytes());
            out.push(b'\n');
        }
        out.extend_from_slice(b"```\n\n");
    }
    if rng.below(4) == 0 {
        // A tag in a code span does not count.
        out.extend_from_slice(b"I will print `<ralph>DONE</ralph>` once every box is checked.\n\n");
    }
    let _ = writeln!(
        Buf(out),
        "Ran `cargo test`: {} passed, 0 failed.\n",
        40 + n % 50
    );
}

/// A few long lines: minified JSON, then a log line.
fn long_lines_block(out: &mut Vec<u8>, rng: &mut Rng, n: u64) {
    let items = 12 + rng.below(100);
    out.push(b'[');
    for i in 0..items {
        if i > 0 {
            out.push(b',');
        }
        let _ = write!(
            Buf(out),
            r#"{{"id":{},"name":"caché → {}","tags":["a","b"],"ok":true,"v":{}.5}}"#,
            n * 1000 + i as u64,
            rng.pick(WORDS).trim_matches('`'),
            rng.below(1000)
        );
    }
    out.extend_from_slice(b"]\n");
    let _ = write!(
        Buf(out),
        "2026-11-22T09:33:{:02}Z INFO request done",
        n % 60
    );
    for _ in 0..20 + rng.below(80) {
        let _ = write!(
            Buf(out),
            " {}={}",
            rng.pick(WORDS).trim_matches('`'),
            rng.below(99_999)
        );
    }
    out.push(b'\n');
}

/// Coloured build and test output, as `cargo` prints it to a terminal.
fn ansi_block(out: &mut Vec<u8>, rng: &mut Rng, n: u64) {
    let _ = writeln!(
        Buf(out),
        "\x1b[1m\x1b[32m   Compiling\x1b[0m crate-{n} v0.{}.0 (/home/dev/shop/crates/crate-{n})",
        n % 9
    );
    let _ = writeln!(Buf(out), "running {} tests", 8 + n % 8);
    for i in 0..8 + rng.below(8) {
        let name = rng.pick(WORDS).trim_matches('`');
        if i % 3 == 0 {
            let _ = writeln!(Buf(out), "test tests::{name}_{i} ... \x1b[32mok\x1b[0m");
        } else {
            let _ = writeln!(Buf(out), "test tests::{name}_{i}_works_with_{n} ... ok");
        }
    }
    out.push(b'\n');
    let _ = writeln!(
        Buf(out),
        "test result: ok. {} passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.{:02}s",
        8 + n % 8,
        n % 100
    );
    out.push(b'\n');
}

/// `s` as a JSON string literal.
fn json(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// A Rust source file of about `lines` lines, with the quotes, escapes, backticks and
/// non-ASCII that make JSON strings work hard.
fn source_file(rng: &mut Rng, n: u64, lines: usize) -> String {
    let mut s = String::with_capacity(lines * 64);
    let _ = writeln!(
        s,
        "//! Module {n}: the `Cache` and its expiry rules → see docs.\n"
    );
    for i in 0..lines {
        match i % 9 {
            0 => {
                let _ = writeln!(
                    s,
                    "/// Returns the value for `key` if it has not expired (step {i})."
                );
            }
            1 => {
                let _ = writeln!(
                    s,
                    "pub fn step_{i}(&mut self, input: &str) -> Result<(), Error> {{"
                );
            }
            2 => {
                let _ = writeln!(
                    s,
                    "    let value_{i} = compute(\"input {i}\\n\", &mut state)?; // café {}",
                    rng.below(1000)
                );
            }
            3 => {
                let _ = writeln!(
                    s,
                    "\tif value_{}.is_empty() {{ return Err(Error::Empty); }}",
                    i - 1
                );
            }
            4 => {
                let _ = writeln!(
                    s,
                    "    log::debug!(\"{{}} → {{:?}}\", \"key\", value_{});",
                    i - 2
                );
            }
            5 => s.push_str("    // Prints \"<ralph>DONE</ralph>\" in tests only; not a signal.\n"),
            6 => s.push_str("    Ok(())\n"),
            7 => s.push_str("}\n"),
            _ => s.push('\n'),
        }
    }
    s
}

/// Output of `cargo test`: a tool result full of short lines.
fn test_output(rng: &mut Rng, n: u64) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "   Compiling shop v0.{n}.0 (/home/dev/shop)\n    Finished `test` profile [unoptimized + debuginfo] target(s) in 3.{}s",
        n % 10
    );
    let tests = 20 + rng.below(60);
    let _ = writeln!(
        s,
        "     Running unittests src/lib.rs (target/debug/deps/shop-1a2b3c)\n\nrunning {tests} tests"
    );
    for i in 0..tests {
        let _ = writeln!(
            s,
            "test cache::tests::case_{i}_{} ... ok",
            WORDS[i % WORDS.len()].trim_matches('`')
        );
    }
    let _ = writeln!(
        s,
        "\ntest result: ok. {tests} passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.02s"
    );
    s
}

/// `write!` into a byte vector.
struct Buf<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for Buf<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_corpus_carries_exactly_the_planted_signal() {
        for corpus in Corpus::ALL {
            for signal in [false, true] {
                let data = corpus.generate(256 * 1024, signal);
                assert!(data.len() >= 256 * 1024);
                assert_eq!(data.last(), Some(&b'\n'), "{corpus:?} ends a line");
                let seen = crate::decode(corpus.format(), &data);
                assert_eq!(
                    seen.signals,
                    usize::from(signal),
                    "{corpus:?} signal={signal}"
                );
                // Plain text comes as one event per chunk's lines (64 KiB chunks); JSON as
                // events per line, most of the bytes in a few big tool results.
                let least = if corpus.format() == StreamFormat::Text {
                    4
                } else {
                    20
                };
                assert!(seen.events >= least, "{corpus:?}: {} events", seen.events);
            }
        }
    }

    #[test]
    fn json_corpora_are_valid_json_lines_mostly_tool_output() {
        for (corpus, is_tool) in [
            (
                Corpus::ClaudeStreamJson,
                (|v: &serde_json::Value| v["type"] == "user") as fn(&serde_json::Value) -> bool,
            ),
            (Corpus::CodexJson, |v| {
                v["item"]["type"] == "command_execution"
            }),
            (Corpus::GeminiStreamJson, |v| v["type"] == "tool_result"),
        ] {
            let data = corpus.generate(512 * 1024, true);
            let mut tool_bytes = 0;
            for line in data.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                let v: serde_json::Value = serde_json::from_slice(line).unwrap();
                if is_tool(&v) {
                    tool_bytes += line.len();
                }
            }
            assert!(
                tool_bytes * 2 > data.len(),
                "{corpus:?}: tool output dominates"
            );
        }
    }
}
