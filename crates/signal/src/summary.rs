//! One-line summaries of tool calls and tool outputs, read from raw JSON in the same pass
//! that skips them.
//!
//! A multi-megabyte file body in a tool call is skipped and never copied; a tool's output is
//! taken raw and only its first line is decoded. Any field may have any JSON type: a field
//! changing shape in a new agent version gives an empty summary rather than an error.

use std::borrow::Cow;
use std::sync::LazyLock;

use memchr::{memchr, memchr_iter, memmem};

use crate::sanitize::{clean_str, floor_char_boundary};
use crate::skim::{self, Error, Raw, Reader, Unit, Units};

/// Longest summary, in bytes, before it is cut with "…".
pub(crate) const SUMMARY_CAP: usize = 200;

/// How much of a line is kept to make a summary of: sanitizing may shrink it, cutting to
/// [`SUMMARY_CAP`] comes after.
const LINE_KEEP: usize = 4 * SUMMARY_CAP;

/// Cuts `s` to [`SUMMARY_CAP`] bytes on a char boundary, marking a cut with "…".
pub(crate) fn short(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(SUMMARY_CAP + '…'.len_utf8()));
    push_short(&mut out, s);
    out
}

/// [`short`] of `s`, onto the end of `out`.
fn push_short(out: &mut String, s: &str) {
    let end = floor_char_boundary(s.as_bytes(), SUMMARY_CAP);
    out.push_str(&s[..end]);
    if end < s.len() {
        out.push('…');
    }
}

/// The first non-blank line of `s`, sanitized and cut, with a " [+N lines]" note when more
/// lines follow.
pub(crate) fn first_line(s: &str) -> String {
    // Skip blank lines; `start..end` is then the first line with something on it.
    let mut start = 0;
    let mut end = s.len();
    for nl in memchr_iter(b'\n', s.as_bytes()) {
        if !s[start..nl].trim().is_empty() {
            end = nl;
            break;
        }
        start = nl + 1;
    }
    let line = &s[start..end];
    let rest = s.get(end + 1..).unwrap_or("").trim_end();
    let more = if rest.trim_start().is_empty() {
        0
    } else {
        memchr_iter(b'\n', rest.as_bytes()).count() + 1
    };
    summary_of(
        &line[..floor_char_boundary(line.as_bytes(), LINE_KEEP)],
        more,
    )
}

fn summary_of(line: &str, more_lines: usize) -> String {
    let clean = clean_str(line);
    let line = clean.trim();
    if more_lines == 0 {
        return short(line);
    }
    // Built in one buffer of the right size: a summary is made for every tool call and
    // result, and formatting the note on its own, then growing the summary for it, cost
    // more than the rest.
    let mut number = itoa::Buffer::new();
    let number = number.format(more_lines);
    let mut summary =
        String::with_capacity(line.len().min(SUMMARY_CAP) + "… [+ lines]".len() + number.len());
    push_short(&mut summary, line);
    summary.push_str(" [+");
    summary.push_str(number);
    summary.push_str(" lines]");
    summary
}

/// [`first_line`] of a string value, without decoding all of it: a tool's output can be
/// megabytes, and only its first line is shown. `None` if `raw` is not a string.
pub(crate) fn first_line_of_string(raw: Raw<'_>) -> Option<String> {
    Some(first_line_of_body(raw.string_bytes()?, LONG_LINE))
}

/// [`first_line`] of the string whose JSON body (between the quotes) is `body`.
#[cfg(test)]
fn first_line_of_json_string(body: impl AsRef<[u8]>) -> String {
    first_line_of_body(body.as_ref(), LONG_LINE)
}

/// A line longer than this is decoded from a prefix first: [`LINE_KEEP`] bytes of text take
/// at most six bytes of escapes each.
const LONG_LINE: usize = 8 * 1024;

/// [`first_line`] of the string whose JSON body (between the quotes) is `body`, decoding
/// lines longer than `long` from a prefix first.
///
/// Only the lines up to the first one with something on it are validated and decoded; the
/// lines after it are counted on the raw bytes. Invalid UTF-8 (U+FFFD
/// once decoded) changes neither: every byte that matters here is ASCII, and a lossy
/// decoding keeps ASCII bytes.
fn first_line_of_body(body: &[u8], long: usize) -> String {
    let mut start = 0;
    loop {
        let (end, next) = match next_newline(body, start) {
            Some((end, next)) => (end, Some(next)),
            None => (body.len(), None),
        };
        let (line, blank) = decode_line(&body[start..end], long);
        let Some(next) = next else {
            return summary_of(&line, 0);
        };
        if blank {
            start = next;
            continue;
        }
        // Lines after it, up to the last one with something on it: counted, not decoded.
        let rest = trim_end_escaped(&body[next..]);
        let more = if rest.is_empty() {
            0
        } else {
            count_newline_escapes(rest) + 1
        };
        return summary_of(&line, more);
    }
}

/// The next newline escape (`\n`, or `\u000a` as other encoders write it) at or after `from`,
/// which is where an escape or literal text starts: where the escape starts and ends.
fn next_newline(body: &[u8], mut from: usize) -> Option<(usize, usize)> {
    while let Some(off) = memchr(b'\\', &body[from..]) {
        let at = from + off;
        let (c, len) = skim::decode_escape(&body[at..]);
        if c == '\n' {
            return Some((at, at + len));
        }
        from = at + len;
    }
    None
}

/// One line of a JSON string body (it holds no newline escape), decoded and cut to
/// [`LINE_KEEP`] bytes, and whether all of it is blank.
fn decode_line(raw: &[u8], long: usize) -> (String, bool) {
    if raw.len() > long {
        // Of a prefix, only a verdict reached well before its end counts: its last escape
        // may be cut (a surrogate pair is 12 bytes).
        let (line, blank, left) = decode_units(&raw[..utf8_cut(raw, long)]);
        if !blank && left >= 12 {
            return (line, false);
        }
    }
    let (line, blank, _) = decode_units(raw);
    (line, blank)
}

/// The start of the text `raw` holds, cut to [`LINE_KEEP`] bytes; whether all of it is
/// blank; and how many bytes of it were left unread, once it was known not to be blank and
/// too long to keep.
fn decode_units(raw: &[u8]) -> (String, bool, usize) {
    // Validating first is much faster than the lossy walk, and agents print valid UTF-8.
    let text = match std::str::from_utf8(raw) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(raw),
    };
    if memchr(b'\\', raw).is_none() {
        // No escape, as in most first lines: the walk below would see one piece of text.
        let keep = floor_char_boundary(text.as_bytes(), LINE_KEEP);
        return (text[..keep].to_owned(), text.trim().is_empty(), 0);
    }
    let mut units = Units::new(&text);
    let mut line = String::new();
    let mut keeping = true;
    let mut blank = true;
    while let Some(unit) = units.next() {
        match unit {
            Unit::Char(c) => {
                blank &= c.is_whitespace();
                if keeping && line.len() + c.len_utf8() <= LINE_KEEP {
                    line.push(c);
                } else {
                    keeping = false;
                }
            }
            Unit::Plain(text) => {
                blank &= text.trim().is_empty();
                if keeping {
                    let room = floor_char_boundary(text.as_bytes(), LINE_KEEP - line.len());
                    line.push_str(&text[..room]);
                    keeping = room == text.len();
                }
            }
        }
        if !keeping && !blank {
            return (line, false, units.rest().len());
        }
    }
    (line, blank, 0)
}

/// `at`, moved back to where a char starts, so that decoding `s[..at]` lossily gives a
/// prefix of what decoding all of `s` gives. A char is at most four bytes, and its first
/// byte is never a continuation byte: after three continuation bytes, a fourth one starts
/// nothing and ends nothing, and a cut before it is safe too.
fn utf8_cut(s: &[u8], mut at: usize) -> usize {
    for _ in 0..3 {
        if at == 0 || !s.get(at).is_some_and(|&b| is_continuation(b)) {
            break;
        }
        at -= 1;
    }
    at
}

fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// Whether the escape whose letter is at `at` is real: an odd run of backslashes precedes it.
fn escaped(body: &[u8], at: usize) -> bool {
    body[..at].iter().rev().take_while(|&&b| b == b'\\').count() % 2 == 1
}

/// The number of `\n` escapes in a JSON string body that starts where an escape or literal
/// text does. (`\u000a` is not counted: JSON encoders write `\n`.)
fn count_newline_escapes(body: &[u8]) -> usize {
    // Every backslash followed by `n`, counted in a loop the compiler vectorizes; then those
    // that are not escapes but the second half of an escaped backslash (`\\n`, a backslash
    // and the letter n), which end an even run of backslashes. Such runs are rare, and
    // searching for two backslashes in a row finds them fast.
    let mut pairs = backslash_n_pairs(body);
    if pairs == 0 {
        return 0;
    }
    static TWO_BACKSLASHES: LazyLock<memmem::Finder<'static>> =
        LazyLock::new(|| memmem::Finder::new(b"\\\\"));
    let mut from = 0;
    while let Some(off) = TWO_BACKSLASHES.find(&body[from..]) {
        let start = from + off;
        let run = body[start..].iter().take_while(|&&b| b == b'\\').count();
        from = start + run;
        if run % 2 == 0 && body.get(from) == Some(&b'n') {
            pairs -= 1;
        }
    }
    pairs
}

/// How many times a backslash is followed by `n` in `s`, escape or not.
fn backslash_n_pairs(s: &[u8]) -> usize {
    let Some(next) = s.get(1..) else {
        return 0;
    };
    // In pieces of 192 pairs, so that a byte-sized count cannot overflow: the compiler
    // vectorizes that, not a count into a `usize`. (192 is a whole number of vectors: a piece
    // of 255 left 15 pairs to count one at a time.)
    let mut pairs = 0;
    for (first, second) in s.chunks(192).zip(next.chunks(192)) {
        let n = first.iter().zip(second).fold(0u8, |n, (&a, &b)| {
            n + (u8::from(a == b'\\') & u8::from(b == b'n'))
        });
        pairs += usize::from(n);
    }
    pairs
}

/// A JSON string body without its trailing whitespace, literal or escaped.
fn trim_end_escaped(mut body: &[u8]) -> &[u8] {
    loop {
        let trimmed = trim_end_whitespace(body);
        let n = trimmed.len();
        let cut = if n >= 2
            && matches!(trimmed[n - 1], b'n' | b't' | b'r' | b'f')
            && escaped(trimmed, n - 1)
        {
            n - 2
        } else if n >= 6
            && trimmed[n - 5] == b'u'
            && escaped(trimmed, n - 5)
            && skim::decode_escape(&trimmed[n - 6..]).0.is_whitespace()
        {
            n - 6
        } else {
            return trimmed;
        };
        body = &trimmed[..cut];
    }
}

/// `s` without the trailing whitespace that `str::trim_end` would take off its lossy
/// decoding. The last char starts at the last byte that is not a continuation byte; if it
/// does not decode, it would be U+FFFD, which is not whitespace.
fn trim_end_whitespace(s: &[u8]) -> &[u8] {
    let mut end = s.len();
    while let Some(&last) = s[..end].last() {
        let start = if last.is_ascii() {
            end - 1
        } else {
            match (end.saturating_sub(4)..end)
                .rev()
                .find(|&i| !is_continuation(s[i]))
            {
                Some(start) => start,
                None => break,
            }
        };
        match std::str::from_utf8(&s[start..end]) {
            Ok(c) if c.chars().all(char::is_whitespace) => end = start,
            _ => break,
        }
    }
    &s[..end]
}

/// The summary of a tool's output: a string, or the first text part of an array of content
/// parts (`[{"type":"image",…}, {"type":"text","text":…}]`).
pub(crate) fn tool_output(raw: Raw<'_>) -> Option<String> {
    match raw.text.first() {
        Some(b'"') => first_line_of_string(raw),
        Some(b'[') => first_text_part(raw).ok().flatten(),
        _ => None,
    }
}

fn first_text_part(raw: Raw<'_>) -> Result<Option<String>, Error> {
    let mut r = raw.reader();
    let mut parts = r.array()?;
    while parts.next(&mut r)? {
        if r.peek() != Some(b'{') {
            r.skip()?;
            continue;
        }
        let mut part = r.object()?;
        while let Some(key) = part.next_key(&mut r)? {
            let value = r.value()?;
            if key == b"text"
                && let Some(text) = first_line_of_string(value)
            {
                return Ok(Some(text));
            }
        }
    }
    Ok(None)
}

/// The fields of a tool call's input that make a good summary, gathered in one pass whatever
/// the key order (the tool's name may come after its input).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct ToolInput {
    file_path: Option<String>,
    command: Option<String>,
    pattern: Option<String>,
    url: Option<String>,
    query: Option<String>,
    description: Option<String>,
    /// The first question of an AskUserQuestion call.
    question: Option<String>,
    /// The first string-valued field, in key order, of any other shape of input.
    first_string: Option<String>,
}

/// Keys that hold bulk content: never a summary, so never decoded.
const BULK_KEYS: [&[u8]; 6] = [
    b"content",
    b"old_string",
    b"new_string",
    b"new_source",
    b"edits",
    b"todos",
];

impl ToolInput {
    /// Reads a tool call's input, whatever its shape.
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, Error> {
        let mut input = ToolInput::default();
        if r.peek() != Some(b'{') {
            r.skip()?;
            return Ok(input);
        }
        let mut fields = r.object()?;
        while let Some(key) = fields.next_key(r)? {
            let slot = match key {
                // Claude's names first; `path` (Amp, Cursor, Claude's LS), `filePath`
                // (opencode) and `absolute_path` (Gemini) name a file or directory too.
                b"file_path" | b"notebook_path" | b"path" | b"filePath" | b"absolute_path" => {
                    &mut input.file_path
                }
                b"command" => &mut input.command,
                b"pattern" => &mut input.pattern,
                b"url" => &mut input.url,
                b"query" => &mut input.query,
                b"description" => &mut input.description,
                b"questions" => {
                    input.question = first_question(r)?;
                    continue;
                }
                k if BULK_KEYS.contains(&k) => {
                    r.skip()?;
                    continue;
                }
                _ => {
                    let value = r.value()?;
                    if input.first_string.is_none() {
                        input.first_string = value.str().map(|s| first_line(&s));
                    }
                    continue;
                }
            };
            *slot = r.value()?.str().map(|s| first_line(&s));
            if input.first_string.is_none() {
                input.first_string.clone_from(slot);
            }
        }
        Ok(input)
    }

    /// The summary for a call of the tool `name`; paths under `cwd` are shown relative to it.
    pub(crate) fn summary(&self, name: &str, cwd: Option<&str>) -> String {
        let path = |p: &String| relative(p, cwd);
        let by_name = match name {
            "Write" | "Edit" | "MultiEdit" | "Read" | "NotebookEdit" | "NotebookRead" => {
                self.file_path.as_ref().map(path)
            }
            "Bash" | "BashOutput" => self.command.clone(),
            "Grep" | "Glob" => self.pattern.clone(),
            "WebFetch" => self.url.clone(),
            "WebSearch" => self.query.clone(),
            "Task" | "Agent" => self.description.clone(),
            "AskUserQuestion" => self.question.clone(),
            _ => None,
        };
        by_name
            .or_else(|| self.file_path.as_ref().map(path))
            .or_else(|| self.command.clone())
            .or_else(|| self.pattern.clone())
            .or_else(|| self.first_string.clone())
            .unwrap_or_default()
    }
}

/// The `question` of the first entry of AskUserQuestion's `questions` array.
fn first_question(r: &mut Reader<'_>) -> Result<Option<String>, Error> {
    if r.peek() != Some(b'[') {
        r.skip()?;
        return Ok(None);
    }
    let mut question = None;
    let mut entries = r.array()?;
    while entries.next(r)? {
        if question.is_some() || r.peek() != Some(b'{') {
            r.skip()?;
            continue;
        }
        let mut fields = r.object()?;
        while let Some(key) = fields.next_key(r)? {
            let value = r.value()?;
            if key == b"question" {
                question = value.str().map(|s| first_line(&s));
            }
        }
    }
    Ok(question)
}

/// `path` relative to `cwd` when it lies under it.
pub(crate) fn relative(path: &str, cwd: Option<&str>) -> String {
    cwd.map(|c| c.trim_end_matches('/'))
        .filter(|c| !c.is_empty())
        .and_then(|c| path.strip_prefix(c))
        .and_then(|p| p.strip_prefix('/'))
        .filter(|p| !p.is_empty())
        .unwrap_or(path)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_line_takes_the_first_non_blank_line_and_counts_the_rest() {
        assert_eq!(first_line("one"), "one");
        assert_eq!(first_line("one\n"), "one");
        assert_eq!(first_line("\n\n  two  \nthree\nfour\n"), "two [+2 lines]");
        assert_eq!(first_line("one\n\n"), "one");
        assert_eq!(first_line(""), "");
        assert_eq!(first_line("\x1b[31mred\x1b[0m\nmore"), "red [+1 lines]");
    }

    #[test]
    fn first_line_cuts_long_lines() {
        let long = "y".repeat(10_000);
        let got = first_line(&long);
        assert_eq!(got, format!("{}…", "y".repeat(SUMMARY_CAP)));
    }

    fn input(json: &str) -> ToolInput {
        let mut r = Reader::new(json.as_bytes());
        let input = ToolInput::read(&mut r).unwrap();
        r.end().unwrap();
        input
    }

    /// [`first_line_of_json_string`] of a string as serde_json encodes it.
    fn first_line_encoded(s: &str) -> String {
        first_line_of_string(Raw::new(serde_json::to_string(s).unwrap().as_bytes())).unwrap()
    }

    #[test]
    fn tool_input_summaries_by_tool() {
        let cwd = Some("/home/dev/shop");
        let write = input(r#"{"file_path":"/home/dev/shop/src/cache.rs","content":"a\nb"}"#);
        assert_eq!(write.summary("Write", cwd), "src/cache.rs");
        assert_eq!(write.summary("Write", None), "/home/dev/shop/src/cache.rs");
        assert_eq!(
            input(r#"{"file_path":"/etc/passwd"}"#).summary("Read", cwd),
            "/etc/passwd"
        );
        let bash = input(r#"{"description":"Run tests","command":"cargo test\necho done"}"#);
        assert_eq!(bash.summary("Bash", cwd), "cargo test [+1 lines]");
        assert_eq!(
            input(r#"{"pattern":"fn main","path":"src"}"#).summary("Grep", cwd),
            "fn main"
        );
        let ask = input(
            r#"{"questions":[{"question":"Redis or Memcached?","header":"Cache","options":[]}]}"#,
        );
        assert_eq!(ask.summary("AskUserQuestion", cwd), "Redis or Memcached?");
        let mcp = input(r#"{"owner":7,"repo":"ralph","title":"Bug"}"#);
        assert_eq!(mcp.summary("mcp__github__create_issue", cwd), "ralph");
        assert_eq!(
            input(r#"{"todos":[{"content":"x"}]}"#).summary("TodoWrite", cwd),
            ""
        );
    }

    #[test]
    fn tool_input_of_any_shape_decodes() {
        assert_eq!(input("null"), ToolInput::default());
        assert_eq!(input(r#""text""#), ToolInput::default());
        assert_eq!(input("[1,2]"), ToolInput::default());
        assert_eq!(
            input(r#"{"command":{"nested":true}}"#).summary("Bash", None),
            ""
        );
    }

    #[test]
    fn first_line_of_json_string_agrees_with_first_line() {
        let cases = [
            "",
            "one",
            "one\n",
            "\n\n  two  \nthree\nfour\n",
            "one\n\n",
            "one\n \t\n",
            "\u{1b}[31mred\u{1b}[0m\nmore",
            "quote \" and backslash \\ and \u{e9}\u{1F600}\nx",
            "   \n\t\n",
            "a\r\nb\r\n",
            "\u{a0}\nnbsp above",
        ];
        for s in cases {
            assert_eq!(first_line_encoded(s), first_line(s), "{s:?}");
        }
        let long = format!("{}\nmore\nlines", "y€".repeat(1000));
        assert_eq!(first_line_encoded(&long), first_line(&long));
        // Escapes other encoders write: \u000a is a newline, \/ a slash, surrogate pairs.
        assert_eq!(first_line_of_json_string(r"a\/b\u000ac"), "a/b [+1 lines]");
        assert_eq!(
            first_line_of_json_string(r"a\nb\\nc\n\u0020\t\n"),
            "a [+1 lines]"
        );
        assert_eq!(
            first_line_of_json_string(r"\ud83d\ude00 \ud800x"),
            "\u{1F600} \u{fffd}x"
        );
    }

    /// The first version of [`first_line_of_json_string`], which decoded the whole body
    /// lossily first: the new one must give the same summary for any bytes.
    mod reference {
        use super::super::{LINE_KEEP, floor_char_boundary, skim, summary_of};
        use crate::skim::{Unit, Units};

        pub(super) fn first_line_of_json_string(body: &str) -> String {
            let mut units = Units::new(body);
            let mut line = String::new();
            let mut ended_by_newline;
            loop {
                line.clear();
                let mut keeping = true;
                let mut blank = true;
                ended_by_newline = false;
                while let Some(unit) = units.next() {
                    match unit {
                        Unit::Char('\n') => {
                            ended_by_newline = true;
                            break;
                        }
                        Unit::Char(c) => {
                            blank &= c.is_whitespace();
                            if keeping && line.len() + c.len_utf8() <= LINE_KEEP {
                                line.push(c);
                            } else {
                                keeping = false;
                            }
                        }
                        Unit::Plain(text) => {
                            blank &= text.trim().is_empty();
                            if keeping {
                                let room =
                                    floor_char_boundary(text.as_bytes(), LINE_KEEP - line.len());
                                line.push_str(&text[..room]);
                                keeping = room == text.len();
                            }
                        }
                    }
                    if !keeping && !blank {
                        ended_by_newline = skip_line(&mut units);
                        break;
                    }
                }
                if !blank || !ended_by_newline {
                    break;
                }
            }
            let rest = trim_end_escaped(units.rest());
            let more = if !ended_by_newline || rest.is_empty() {
                0
            } else {
                count_newline_escapes(rest) + 1
            };
            summary_of(&line, more)
        }

        fn skip_line(units: &mut Units<'_>) -> bool {
            while let Some(unit) = units.next() {
                if unit == Unit::Char('\n') {
                    return true;
                }
            }
            false
        }

        fn escaped(body: &[u8], at: usize) -> bool {
            body[..at].iter().rev().take_while(|&&b| b == b'\\').count() % 2 == 1
        }

        pub(super) fn count_newline_escapes(body: &str) -> usize {
            let body = body.as_bytes();
            memchr::memmem::find_iter(body, b"\\n")
                .filter(|&p| escaped(body, p + 1))
                .count()
        }

        fn trim_end_escaped(mut body: &str) -> &str {
            loop {
                let trimmed = body.trim_end();
                let bytes = trimmed.as_bytes();
                let n = bytes.len();
                let cut = if n >= 2
                    && matches!(bytes[n - 1], b'n' | b't' | b'r' | b'f')
                    && escaped(bytes, n - 1)
                {
                    n - 2
                } else if n >= 6
                    && bytes[n - 5] == b'u'
                    && escaped(bytes, n - 5)
                    && skim::decode_escape(&bytes[n - 6..]).0.is_whitespace()
                {
                    n - 6
                } else {
                    return trimmed;
                };
                body = &trimmed[..cut];
            }
        }
    }

    /// Pieces of JSON string bodies that make the summary work hard: escapes of newlines,
    /// whitespace and backslashes, surrogates, Unicode whitespace, invalid UTF-8.
    const PIECES: [&[u8]; 26] = [
        b"a",
        b"n",
        b" ",
        b"\t",
        b"\\n",
        b"\\\\",
        b"\\t",
        b"\\r",
        b"\\f",
        b"\\\"",
        b"\\u000a",
        b"\\u000A",
        b"\\u0020",
        b"\\u00a0",
        b"\\ud83d",
        b"\\ude00",
        b"\\u00",
        b"\\",
        "\u{a0}".as_bytes(),
        "\u{3000}".as_bytes(),
        "\u{e9}".as_bytes(),
        b"\x80",
        b"\xe2\x80",
        b"\xc3",
        b"\xf0\x9f\x98",
        b"xyz ",
    ];

    proptest::proptest! {
        #[test]
        fn first_line_of_json_string_agrees_with_decoding_it_all_on_any_bytes(
            pieces in proptest::collection::vec(0..PIECES.len(), 0..60),
            long in 0usize..80,
        ) {
            let body: Vec<u8> = pieces.iter().flat_map(|&i| PIECES[i].iter().copied()).collect();
            let want = reference::first_line_of_json_string(&String::from_utf8_lossy(&body));
            proptest::prop_assert_eq!(&first_line_of_body(&body, long), &want);
            proptest::prop_assert_eq!(&first_line_of_json_string(&body), &want);
        }

        #[test]
        fn newline_escapes_are_found_and_counted_exactly(
            pieces in proptest::collection::vec(0..PIECES.len(), 0..600),
        ) {
            let body: Vec<u8> = pieces.iter().flat_map(|&i| PIECES[i].iter().copied()).collect();
            let text = String::from_utf8_lossy(&body);
            proptest::prop_assert_eq!(
                count_newline_escapes(&body),
                reference::count_newline_escapes(&text)
            );
            let (mut units, mut want) = (Units::new(&text), 0);
            while let Some(unit) = units.next() {
                want += usize::from(unit == Unit::Char('\n'));
            }
            let (mut from, mut found) = (0, 0);
            while let Some((_, next)) = next_newline(&body, from) {
                (from, found) = (next, found + 1);
            }
            proptest::prop_assert_eq!(found, want);
        }
    }

    proptest::proptest! {
        #[test]
        fn first_line_of_json_string_agrees_with_first_line_on_any_text(
            s in "[a-c \t\r\n\\\\\"\u{1b}\u{a0}é😀]{0,40}",
        ) {
            proptest::prop_assert_eq!(first_line_encoded(&s), first_line(&s));
        }
    }

    #[test]
    fn tool_output_reads_strings_and_content_parts() {
        let text = |json: &str| tool_output(Raw::new(json.as_bytes()));
        assert_eq!(text(r#""ok\nmore""#).as_deref(), Some("ok [+1 lines]"));
        assert_eq!(
            text(r#"[{"type":"image","source":{}},{"type":"text","text":"hi"}]"#).as_deref(),
            Some("hi")
        );
        assert_eq!(
            text(r#"["odd", 1, {"text": 2}, {"text": "ok"}]"#).as_deref(),
            Some("ok")
        );
        assert_eq!(text("null"), None);
        assert_eq!(text(r#"{"weird":1}"#), None);
    }
}
