//! Cuts a task file into its YAML frontmatter and markdown body, after checking the encoding.
//!
//! A UTF-8 byte order mark is dropped and CRLF line endings are fine: both are what some
//! editors on Windows write, and neither changes what the file means. Delimiter lines are
//! exactly `---`, with optional trailing spaces.

use ralph_protocol::{Frontmatter, is_fence};

use super::FRONTMATTER_SIZE_LIMIT;
use super::error::Problem;
use super::yaml::{Located, key_lines};

/// The two halves of a task file.
#[derive(Debug, PartialEq)]
pub(super) struct Parts<'a> {
    /// The text between the `---` lines.
    pub(super) yaml: &'a str,
    /// The file line `yaml` starts on (1-based).
    pub(super) yaml_first_line: usize,
    /// Everything after the closing `---` line.
    pub(super) body: &'a str,
    /// The file line `body` starts on (1-based).
    pub(super) body_first_line: usize,
}

/// The file's text: valid UTF-8 with any byte order mark removed.
pub(super) fn decode(bytes: &[u8]) -> Result<&str, Located> {
    if bytes.starts_with(&[0xFF, 0xFE]) || bytes.starts_with(&[0xFE, 0xFF]) {
        return Err((1, 1, Problem::Utf16));
    }
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    std::str::from_utf8(bytes).map_err(|e| {
        let good = &bytes[..e.valid_up_to()];
        // The prefix is valid by definition, so this cannot fail.
        let good = std::str::from_utf8(good).unwrap_or_default();
        let line = good.matches('\n').count() + 1;
        let column = good.rsplit('\n').next().unwrap_or("").chars().count() + 1;
        (
            line,
            column,
            Problem::InvalidUtf8 {
                byte: bytes[e.valid_up_to()],
            },
        )
    })
}

/// Splits decoded text at its `---` lines.
pub(super) fn split(text: &str) -> Result<Parts<'_>, Located> {
    if text.trim().is_empty() {
        return Err((1, 1, Problem::EmptyFile));
    }
    let f = match ralph_protocol::split_frontmatter(text, false) {
        Frontmatter::At(f) => f,
        Frontmatter::Unclosed => return Err((1, 1, Problem::UnterminatedFrontmatter)),
        Frontmatter::None => return Err((1, 1, why_no_frontmatter(text))),
    };
    let yaml = &text[f.yaml_start..f.close_start];
    let body_first_line = text[..f.body_start].matches('\n').count() + 1;
    if yaml.len() > FRONTMATTER_SIZE_LIMIT {
        return Err((1, 1, Problem::FrontmatterTooLarge { size: yaml.len() }));
    }
    let only_comments = yaml
        .lines()
        .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'));
    if only_comments {
        return Err((1, 1, Problem::EmptyFrontmatter));
    }
    Ok(Parts {
        yaml,
        yaml_first_line: 2,
        body: &text[f.body_start..],
        body_first_line,
    })
}

/// Picks the most helpful "no frontmatter" problem for a file not starting with `---`.
fn why_no_frontmatter(text: &str) -> Problem {
    let mut non_blank = text.lines().filter(|l| !l.trim().is_empty());
    let first = non_blank.next().unwrap_or("");
    if is_fence(first) {
        return Problem::BlankLinesBeforeFrontmatter;
    }
    if first.trim_end() == "+++" {
        return Problem::TomlFrontmatter;
    }
    // Keys with no `---` above them: the first line is `key:` for a key ralph knows.
    let keys = key_lines(first);
    if keys.keys().any(|k| super::key::Key::from_name(k).is_some()) {
        return Problem::MissingOpeningDelimiter;
    }
    Problem::NoFrontmatter
}
