//! What the decoders are measured against, on the same bytes.

use memchr::memmem;

use crate::corpus::Corpus;

/// The limit: one SIMD pass over the bytes looking for `<ralph>`, nothing else (no lines, no
/// code detection, no display text). Returns how many it saw.
pub fn memmem(data: &[u8]) -> usize {
    memmem::find_iter(data, b"<ralph>").count()
}

/// The naive way to read a JSON-lines stream: every line into a `serde_json::Value`, then a
/// substring search of each piece of the assistant's own text. Returns how many pieces held
/// `<ralph>`; 0 for a plain-text corpus.
///
/// It finds tags a real decoder must ignore (in code), misses tags split across deltas, and
/// skips lines that do not parse.
pub fn naive(corpus: Corpus, data: &[u8]) -> usize {
    let mut hits = 0;
    for line in data.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(line) else {
            continue;
        };
        let mut check = |text: &serde_json::Value| {
            hits += usize::from(text.as_str().is_some_and(|t| t.contains("<ralph>")));
        };
        match corpus {
            Corpus::ClaudeStreamJson if v["type"] == "assistant" => {
                for block in v["message"]["content"].as_array().into_iter().flatten() {
                    if block["type"] == "text" {
                        check(&block["text"]);
                    }
                }
            }
            Corpus::CodexJson if v["item"]["type"] == "agent_message" => check(&v["item"]["text"]),
            Corpus::GeminiStreamJson if v["type"] == "message" && v["role"] == "assistant" => {
                check(&v["content"]);
            }
            _ => {}
        }
    }
    hits
}
