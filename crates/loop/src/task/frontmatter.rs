//! Cuts a task file into its YAML frontmatter and markdown body, after checking the encoding.
//!
//! A UTF-8 byte order mark is dropped and CRLF line endings are fine: both are what some
//! editors on Windows write, and neither changes what the file means. Delimiter lines are
//! exactly `---`, with optional trailing spaces.

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
    // Each line with its ending, and the byte offset it starts at.
    let mut lines = text.split_inclusive('\n').scan(0, |at, line| {
        let start = *at;
        *at += line.len();
        Some((line, start))
    });
    let Some((first, _)) = lines.next() else {
        return Err((1, 1, Problem::EmptyFile));
    };
    if !is_delimiter(first) {
        return Err((1, 1, why_no_frontmatter(text)));
    }
    let yaml_start = first.len();
    let close = lines.find(|(line, _)| is_delimiter(line));
    let Some((close_line, close_start)) = close else {
        return Err((1, 1, Problem::UnterminatedFrontmatter));
    };
    let yaml = &text[yaml_start..close_start];
    let close_end = close_start + close_line.len();
    let body_first_line = text[..close_end].matches('\n').count() + 1;
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
        body: &text[close_end..],
        body_first_line,
    })
}

/// Picks the most helpful "no frontmatter" problem for a file not starting with `---`.
fn why_no_frontmatter(text: &str) -> Problem {
    let mut non_blank = text.lines().filter(|l| !l.trim().is_empty());
    let first = non_blank.next().unwrap_or("");
    if is_delimiter(first) {
        return Problem::BlankLinesBeforeFrontmatter;
    }
    if first.trim_end() == "+++" {
        return Problem::TomlFrontmatter;
    }
    // Keys with no `---` above them: the first line is `key:` for a key ralph knows.
    let keys = key_lines(first);
    if keys
        .keys()
        .any(|k| super::keys::Key::from_name(k).is_some())
    {
        return Problem::MissingOpeningDelimiter;
    }
    Problem::NoFrontmatter
}

fn is_delimiter(line: &str) -> bool {
    line.trim_end_matches(['\n', '\r', ' ', '\t']) == "---"
}
