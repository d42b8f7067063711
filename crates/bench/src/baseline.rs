//! What the decoders are measured against, on the same bytes.

use memchr::memmem;

use crate::CHUNK;
use crate::corpus::Corpus;

/// The limit: one SIMD pass over the bytes looking for `<ralph>`, nothing else (no lines, no
/// code detection, no display text). Returns how many it saw.
pub fn memmem(data: &[u8]) -> usize {
    memmem::find_iter(data, b"<ralph>").count()
}

/// What any decoder that shows plain text must do at least, and nothing else: check that the
/// bytes are UTF-8 (`simdutf8`, with AVX2 where the CPU has it) and copy them into the text
/// shown, in [`CHUNK`]-sized chunks of 16 KiB windows, as the plain-text decoder reads them.
/// No lines, no control sequences, no fences, no tags. Returns how many windows were valid.
///
/// It tells how far the limit ([`memmem()`]) is from a decoder's reach on this machine: the
/// decoder does all of this and more.
pub fn validate_and_copy(data: &[u8]) -> usize {
    const WINDOW: usize = 16 * 1024;
    let mut valid = 0;
    for chunk in data.chunks(CHUNK) {
        // A new buffer per chunk, as the decoder hands each chunk's text out in an event.
        let mut shown = Vec::with_capacity(chunk.len());
        for window in chunk.chunks(WINDOW) {
            valid += usize::from(simdutf8::basic::from_utf8(window).is_ok());
            shown.extend_from_slice(window);
        }
        std::hint::black_box(shown);
    }
    valid
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_and_copy_counts_the_windows_that_are_utf8() {
        // 40 KiB of two-byte characters: three windows, none cutting a character.
        assert_eq!(validate_and_copy("é".repeat(20 * 1024).as_bytes()), 3);
        let mut bytes = "é".repeat(20 * 1024).into_bytes();
        bytes[20_000] = 0xFF;
        assert_eq!(validate_and_copy(&bytes), 2);
        assert_eq!(validate_and_copy(b""), 0);
    }

    #[test]
    fn the_naive_search_cannot_tell_code_from_prose() {
        for corpus in [
            Corpus::ClaudeStreamJson,
            Corpus::CodexJson,
            Corpus::GeminiStreamJson,
        ] {
            let data = corpus.generate(512 * 1024, true);
            // It sees the planted tag and more: the tags in code the decoders ignore.
            assert!(naive(corpus, &data) > 1, "{corpus:?}");
        }
        // Plain text has no JSON lines to look into.
        let text = Corpus::TextMarkdown.generate(64 * 1024, true);
        assert_eq!(naive(Corpus::TextMarkdown, &text), 0);
    }
}
