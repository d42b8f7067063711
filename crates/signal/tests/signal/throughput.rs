//! Rough throughput measurements, ignored by default. Run them in release mode:
//! `cargo test -p ralph-signal --release -- --ignored --nocapture throughput`.

use std::hint::black_box;
use std::time::Instant;

use memchr::memmem;
use ralph_signal::{AgentEvent, Decoder, StreamFormat};

const CHUNK: usize = 64 * 1024;

/// About `size` bytes of agent-like markdown: prose, lists, inline code, fenced code.
fn text_corpus(size: usize) -> Vec<u8> {
    let block = "\
## Progress

I looked at `src/cache.rs` and found that the TTL is never checked on read, so stale entries
are served after expiry. The fix is small: compare the entry's timestamp with `now` in `get`.

1. Change `Cache::get` to drop expired entries.
2. Add a regression test, `stale_entries_are_not_served`.
3. Run the whole suite with `cargo test --workspace`.

```rust
pub fn get(&mut self, key: &str, now: Instant) -> Option<&V> {
    if self.map.get(key).is_some_and(|e| e.expires <= now) {
        self.map.remove(key);
    }
    self.map.get(key).map(|e| &e.value)
}
```

Running the tests now. All 42 pass, clippy is clean, and the docs build without warnings.
";
    let mut out = Vec::with_capacity(size + block.len());
    while out.len() < size {
        out.extend_from_slice(block.as_bytes());
    }
    out.extend_from_slice(b"<ralph>DONE</ralph>\n");
    out
}

fn mb_per_s(bytes: usize, secs: f64) -> f64 {
    bytes as f64 / secs / 1e6
}

/// Best of three runs, in seconds.
fn best_of_three(mut run: impl FnMut()) -> f64 {
    (0..3)
        .map(|_| {
            let start = Instant::now();
            run();
            start.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn decode_timed(format: StreamFormat, data: &[u8]) -> (f64, usize) {
    let mut signals = 0;
    let secs = best_of_three(|| {
        let mut decoder = Decoder::new(format);
        let mut out = Vec::new();
        signals = 0;
        for chunk in data.chunks(CHUNK) {
            decoder.feed(chunk, &mut out);
            signals += out
                .iter()
                .filter(|e| matches!(e, AgentEvent::Signal(_)))
                .count();
            out.clear();
        }
        decoder.finish(&mut out);
        signals += out
            .iter()
            .filter(|e| matches!(e, AgentEvent::Signal(_)))
            .count();
    });
    (secs, signals)
}

#[test]
#[ignore = "a measurement; run in release mode"]
fn throughput_plain_text_vs_memmem() {
    measure_plain_text(
        "agent markdown, ~41-byte lines",
        &text_corpus(200 * 1024 * 1024),
    );
    measure_plain_text(
        "~2 KiB lines (minified output, logs)",
        &long_line_corpus(200 * 1024 * 1024),
    );
}

/// About `size` bytes of 2 KiB lines of mixed ASCII and UTF-8 text.
fn long_line_corpus(size: usize) -> Vec<u8> {
    let mut line = String::new();
    while line.len() < 2048 {
        line.push_str("{\"id\":42,\"name\":\"caché → ok\",\"tags\":[\"a\",\"b\"],\"v\":3.5} ");
    }
    line.push('\n');
    let mut out = Vec::with_capacity(size + line.len());
    while out.len() < size {
        out.extend_from_slice(line.as_bytes());
    }
    out.extend_from_slice(b"<ralph>DONE</ralph>\n");
    out
}

fn measure_plain_text(what: &str, data: &[u8]) {
    let finder = memmem::Finder::new("<ralph>");
    let mut hits = 0;
    let memmem_secs = best_of_three(|| hits = black_box(finder.find_iter(data).count()));
    let (decode_secs, signals) = decode_timed(StreamFormat::Text, data);
    assert_eq!((hits, signals), (1, 1));
    println!(
        "plain text, {what}, {} MB: memmem {:.0} MB/s, decoder {:.0} MB/s, ratio {:.2}",
        data.len() / 1_000_000,
        mb_per_s(data.len(), memmem_secs),
        mb_per_s(data.len(), decode_secs),
        memmem_secs / decode_secs
    );
}

/// About `size` bytes of Claude stream-json: text blocks, tool calls with file bodies, tool
/// results with file contents echoed in `tool_use_result`, results.
fn claude_corpus(size: usize) -> Vec<u8> {
    let file: String = (0..400)
        .map(|i| format!("    let value_{i} = compute(\"input {i}\", &mut state)?; // step {i}\n"))
        .collect();
    let text = String::from_utf8(text_corpus(0))
        .unwrap()
        .replace("<ralph>DONE</ralph>\n", "");
    let lines = [
        serde_json::json!({"type":"assistant","message":{"id":"m","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":text}],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"s","uuid":"u"}),
        serde_json::json!({"type":"assistant","message":{"id":"m","type":"message","role":"assistant","model":"claude","content":[{"type":"tool_use","id":"t1","name":"Read","input":{"file_path":"/w/src/lib.rs"}}],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"s","uuid":"u"}),
        serde_json::json!({"type":"user","message":{"role":"user","content":[{"tool_use_id":"t1","type":"tool_result","content":file}]},"parent_tool_use_id":null,"session_id":"s","uuid":"u","timestamp":"2026-01-01T00:00:00Z","tool_use_result":{"type":"text","file":{"filePath":"/w/src/lib.rs","content":file,"numLines":400}}}),
        serde_json::json!({"type":"assistant","message":{"id":"m","type":"message","role":"assistant","model":"claude","content":[{"type":"tool_use","id":"t2","name":"Write","input":{"file_path":"/w/src/new.rs","content":file}}],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"s","uuid":"u"}),
        serde_json::json!({"type":"user","message":{"role":"user","content":[{"tool_use_id":"t2","type":"tool_result","content":"File created successfully at: /w/src/new.rs"}]},"parent_tool_use_id":null,"session_id":"s","uuid":"u","tool_use_result":{"type":"create","filePath":"/w/src/new.rs","content":file,"structuredPatch":[],"originalFile":null}}),
        serde_json::json!({"type":"result","subtype":"success","is_error":false,"num_turns":2,"result":"ok","session_id":"s","total_cost_usd":0.1,"usage":{"input_tokens":100,"output_tokens":20}}),
    ];
    let block: String = lines.iter().map(|l| l.to_string() + "\n").collect();
    let mut out = Vec::with_capacity(size + block.len());
    while out.len() < size {
        out.extend_from_slice(block.as_bytes());
    }
    out
}

/// The baseline a later benchmark compares with: every line into a `serde_json::Value`,
/// then a substring search of the assistant text.
fn value_baseline(data: &[u8]) -> usize {
    let mut hits = 0;
    for line in data.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let value: serde_json::Value = serde_json::from_slice(line).unwrap();
        if value["type"] == "assistant"
            && let Some(blocks) = value["message"]["content"].as_array()
        {
            for block in blocks {
                if let Some(text) = block["text"].as_str() {
                    hits += usize::from(text.contains("<ralph>"));
                }
            }
        }
    }
    hits
}

#[test]
#[ignore = "a measurement; run in release mode"]
fn throughput_claude_stream_json_vs_value() {
    let data = claude_corpus(200 * 1024 * 1024);
    let mut hits = 0;
    let value_secs = best_of_three(|| hits = black_box(value_baseline(&data)));
    let (decode_secs, signals) = decode_timed(StreamFormat::ClaudeStreamJson, &data);
    assert_eq!((hits, signals), (0, 0));
    println!(
        "claude stream-json, {} MB: serde_json::Value {:.0} MB/s, decoder {:.0} MB/s, speed-up {:.2}x",
        data.len() / 1_000_000,
        mb_per_s(data.len(), value_secs),
        mb_per_s(data.len(), decode_secs),
        value_secs / decode_secs
    );
}
