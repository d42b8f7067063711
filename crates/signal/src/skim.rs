//! A one-pass JSON reader for decoders that need a few fields of long lines.
//!
//! Agent streams are mostly long, escape-dense strings (file bodies, command output) that a
//! decoder only skips. serde_json checks every byte of a string it skips and decodes the
//! ones it borrows; this reader finds a string's end with `memchr` (the next quote or
//! backslash), descends only into the values it is asked to, and decodes only the strings it
//! is given.
//!
//! Structure is validated (brackets, commas, colons, quotes, no trailing bytes); the inside of
//! a skipped string is not, and a string that is decoded is decoded leniently (invalid UTF-8
//! and lone surrogates become U+FFFD). Nesting of skipped values is tracked with a counter,
//! not recursion, so hostile depth costs nothing.

use std::borrow::Cow;
use std::fmt;

use memchr::memchr;

/// Why a line is not the JSON it should be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Error {
    what: &'static str,
    at: usize,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.what, self.at)
    }
}

/// Reads JSON values from a byte slice, front to back.
#[derive(Debug, Clone)]
pub(crate) struct Reader<'a> {
    s: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `s`.
    pub(crate) fn new(s: &'a [u8]) -> Self {
        Reader { s, pos: 0 }
    }

    fn error<T>(&self, what: &'static str) -> Result<T, Error> {
        Err(Error { what, at: self.pos })
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\r' | b'\n') = self.s.get(self.pos) {
            self.pos += 1;
        }
    }

    /// The first byte of the next value, after whitespace.
    pub(crate) fn peek(&mut self) -> Option<u8> {
        self.skip_whitespace();
        self.s.get(self.pos).copied()
    }

    #[inline]
    fn expect(&mut self, byte: u8, what: &'static str) -> Result<(), Error> {
        // Agents write compact JSON: the byte is most often right here.
        if self.s.get(self.pos) == Some(&byte) {
            self.pos += 1;
            return Ok(());
        }
        if self.peek() != Some(byte) {
            return self.error(what);
        }
        self.pos += 1;
        Ok(())
    }

    /// Steps over `text` if it comes next, byte for byte, whitespace included: a line laid out
    /// as its writer always lays it out is read without looking at each key.
    #[inline]
    pub(crate) fn literal(&mut self, text: &[u8]) -> bool {
        let found = self.s[self.pos..].starts_with(text);
        if found {
            self.pos += text.len();
        }
        found
    }

    /// What is left to read.
    pub(crate) fn rest(&self) -> &'a [u8] {
        &self.s[self.pos..]
    }

    /// Checks that nothing but whitespace is left.
    pub(crate) fn end(&mut self) -> Result<(), Error> {
        match self.peek() {
            None => Ok(()),
            Some(_) => self.error("trailing characters"),
        }
    }

    /// Skips the next value and returns its text.
    // Inlined, as `Object::next_key` is: every member of every line goes through both, and
    // the calls (their results returned through memory) cost as much as their work.
    #[inline]
    pub(crate) fn value(&mut self) -> Result<Raw<'a>, Error> {
        let start = match self.peek() {
            None => return self.error("unexpected end of line"),
            Some(_) => self.pos,
        };
        match self.s[start] {
            b'"' => self.skip_string()?,
            b'{' | b'[' => self.skip_container()?,
            _ => self.skip_scalar()?,
        }
        Ok(Raw::new(&self.s[start..self.pos]))
    }

    /// Reads the next value with `read`, which must take exactly one value, and returns its
    /// text along with what `read` made of it.
    pub(crate) fn read_value<T>(
        &mut self,
        read: impl FnOnce(&mut Self) -> Result<T, Error>,
    ) -> Result<(Raw<'a>, T), Error> {
        self.skip_whitespace();
        let start = self.pos;
        let value = read(self)?;
        Ok((Raw::new(&self.s[start..self.pos]), value))
    }

    /// Skips the next value.
    pub(crate) fn skip(&mut self) -> Result<(), Error> {
        self.value().map(drop)
    }

    /// Skips a string; the reader is at its opening quote.
    #[inline]
    fn skip_string(&mut self) -> Result<(), Error> {
        match string_end(self.s, self.pos + 1) {
            Some(quote) => {
                self.pos = quote + 1;
                Ok(())
            }
            None => self.error("unterminated string"),
        }
    }

    /// Skips an object or array; the reader is at its opening bracket.
    fn skip_container(&mut self) -> Result<(), Error> {
        let mut depth = 0usize;
        loop {
            // Between strings there are only short keys' colons, commas and scalars.
            let Some(off) = self.s[self.pos..]
                .iter()
                .position(|b| matches!(b, b'"' | b'{' | b'}' | b'[' | b']'))
            else {
                return self.error("unterminated object or array");
            };
            self.pos += off;
            match self.s[self.pos] {
                b'"' => self.skip_string()?,
                b'{' | b'[' => {
                    depth += 1;
                    self.pos += 1;
                }
                _ => {
                    depth -= 1;
                    self.pos += 1;
                    if depth == 0 {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Skips a number or `true`, `false`, `null`.
    fn skip_scalar(&mut self) -> Result<(), Error> {
        let len = self.s[self.pos..]
            .iter()
            .take_while(|&&b| SCALAR[usize::from(b)])
            .count();
        if len == 0 {
            return self.error("expected a value");
        }
        self.pos += len;
        Ok(())
    }

    /// Enters the object that comes next.
    pub(crate) fn object(&mut self) -> Result<Object, Error> {
        self.expect(b'{', "expected an object")?;
        Ok(Object { first: true })
    }

    /// Enters the array that comes next.
    pub(crate) fn array(&mut self) -> Result<Array, Error> {
        self.expect(b'[', "expected an array")?;
        Ok(Array { first: true })
    }
}

/// The bytes a number, `true`, `false` or `null` is skipped over by, looked up rather than
/// tested a range at a time: the `"delta": true` of every Gemini line goes through it.
static SCALAR: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric() || matches!(c, b'-' | b'+' | b'.');
        b += 1;
    }
    table
};

/// The closing quote of the string whose body starts at `at` (where a character or an
/// escape starts, not inside an escape); `None` if the string does not end.
///
/// A search for quotes alone: a tool's output has a `\n` escape on every line, and an escaped
/// quote far less often, so stopping at backslashes too would stop every few dozen bytes.
fn string_end(s: &[u8], at: usize) -> Option<usize> {
    let mut from = at;
    loop {
        let quote = from + memchr(b'"', s.get(from..)?)?;
        // Escaped when an odd run of backslashes, inside the body, precedes it.
        let run = s[at..quote]
            .iter()
            .rev()
            .take_while(|&&b| b == b'\\')
            .count();
        if run % 2 == 0 {
            return Some(quote);
        }
        from = quote + 1;
    }
}

/// An object being read: call [`Object::next_key`], then read or skip the value.
#[derive(Debug)]
pub(crate) struct Object {
    first: bool,
}

impl Object {
    /// The next key, as raw bytes between its quotes, with the reader before its value; `None`
    /// after the closing brace.
    #[inline]
    pub(crate) fn next_key<'a>(&mut self, r: &mut Reader<'a>) -> Result<Option<&'a [u8]>, Error> {
        let mut next = r.peek();
        if next == Some(b'}') {
            r.pos += 1;
            return Ok(None);
        }
        if !std::mem::take(&mut self.first) {
            if next != Some(b',') {
                return r.error("expected `,` or `}`");
            }
            r.pos += 1;
            next = r.peek();
        }
        if next != Some(b'"') {
            return r.error("expected a key");
        }
        let start = r.pos;
        r.skip_string()?;
        let key = &r.s[start + 1..r.pos - 1];
        r.expect(b':', "expected `:`")?;
        Ok(Some(key))
    }
}

/// An array being read: call [`Array::next`], then read or skip the element.
#[derive(Debug)]
pub(crate) struct Array {
    first: bool,
}

impl Array {
    /// Whether another element follows (the reader is then before it).
    pub(crate) fn next(&mut self, r: &mut Reader<'_>) -> Result<bool, Error> {
        if r.peek() == Some(b']') {
            r.pos += 1;
            return Ok(false);
        }
        if !std::mem::take(&mut self.first) {
            r.expect(b',', "expected `,` or `]`")?;
        }
        Ok(true)
    }
}

/// The text of one JSON value, as it appears in the line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Raw<'a> {
    /// The value's text.
    pub(crate) text: &'a [u8],
}

impl<'a> Raw<'a> {
    /// The value whose text is `text`.
    pub(crate) const fn new(text: &'a [u8]) -> Self {
        Raw { text }
    }

    /// A reader over this value, to descend into it.
    pub(crate) fn reader(self) -> Reader<'a> {
        Reader::new(self.text)
    }

    /// The body of a string value (between the quotes, escapes intact), as bytes: a long
    /// string that is only searched need not be validated as UTF-8.
    pub(crate) fn string_bytes(self) -> Option<&'a [u8]> {
        self.text.strip_prefix(b"\"")?.strip_suffix(b"\"")
    }

    /// The body of a string value (between the quotes, escapes intact), as text.
    pub(crate) fn string_body(self) -> Option<Cow<'a, str>> {
        let body = self.string_bytes()?;
        // Validating is much faster than the lossy walk, and agents print valid UTF-8.
        Some(match std::str::from_utf8(body) {
            Ok(body) => Cow::Borrowed(body),
            Err(_) => String::from_utf8_lossy(body),
        })
    }

    /// The decoded text of a string value; `None` for any other value.
    pub(crate) fn str(self) -> Option<Cow<'a, str>> {
        match self.string_body()? {
            Cow::Borrowed(body) if !has_backslash(body.as_bytes()) => Some(Cow::Borrowed(body)),
            body => Some(Cow::Owned(unescape(&body))),
        }
    }

    /// The decoded text of a string value as UTF-8 bytes, as [`Raw::str`] gives it, but
    /// decoded into `buf` (cleared first) when it has escapes: a format that decodes a string
    /// on most lines keeps one buffer for them rather than allocating for each. An ASCII body
    /// is not validated as UTF-8, which walks a short string a byte at a time.
    pub(crate) fn text_in<'b>(self, buf: &'b mut Vec<u8>) -> Option<&'b [u8]>
    where
        'a: 'b,
    {
        let body = self.string_bytes()?;
        let text = if body.is_ascii() {
            Cow::Borrowed(body)
        } else {
            match self.string_body()? {
                Cow::Borrowed(text) => Cow::Borrowed(text.as_bytes()),
                Cow::Owned(text) => Cow::Owned(text.into_bytes()),
            }
        };
        match text {
            Cow::Borrowed(text) if !has_backslash(text) => Some(text),
            text => {
                buf.clear();
                unescape_bytes(&text, buf);
                Some(buf)
            }
        }
    }

    /// The text of a string value as bytes, to compare with names: what [`Raw::str`] gives,
    /// without checking UTF-8 when there is no escape to decode. (Bytes that are not UTF-8
    /// equal no name, and neither does the U+FFFD they would decode to.)
    pub(crate) fn tag(self) -> Option<Cow<'a, [u8]>> {
        let body = self.string_bytes()?;
        if !has_backslash(body) {
            return Some(Cow::Borrowed(body));
        }
        Some(Cow::Owned(self.str()?.into_owned().into_bytes()))
    }

    /// Whether the value is the string `want` (a name: no backslash in it): what comparing
    /// [`Raw::str`] gives, but the body is compared as it is unless it has an escape.
    pub(crate) fn is_str(self, want: &str) -> bool {
        match self.string_bytes() {
            Some(body) if body == want.as_bytes() => true,
            Some(body) => has_backslash(body) && self.str().as_deref() == Some(want),
            None => false,
        }
    }

    /// The value of `true` or `false`.
    pub(crate) fn bool(self) -> Option<bool> {
        match self.text {
            b"true" => Some(true),
            b"false" => Some(false),
            _ => None,
        }
    }

    /// A number that is a whole, non-negative integer.
    pub(crate) fn u64(self) -> Option<u64> {
        std::str::from_utf8(self.text).ok()?.parse().ok()
    }

    /// A number.
    pub(crate) fn f64(self) -> Option<f64> {
        let text = std::str::from_utf8(self.text).ok()?;
        // Rust also reads "inf" and "NaN", which are not JSON.
        text.starts_with(|c: char| c == '-' || c.is_ascii_digit())
            .then(|| text.parse().ok())?
    }

    /// Whether the value is `null`.
    pub(crate) fn is_null(self) -> bool {
        self.text == b"null"
    }
}

/// Whether `s` holds a backslash.
fn has_backslash(s: &[u8]) -> bool {
    find_backslash(s).is_some()
}

/// The first backslash in `s`.
fn find_backslash(s: &[u8]) -> Option<usize> {
    memchr(b'\\', s)
}

/// Decodes the escapes of a JSON string body. (Checking that the result is UTF-8, which it
/// always is, costs less than a second decoder for `String`s.)
pub(crate) fn unescape(body: &str) -> String {
    let mut out = Vec::with_capacity(body.len());
    unescape_bytes(body.as_bytes(), &mut out);
    String::from_utf8(out).expect("UTF-8 text with its escapes decoded is UTF-8")
}

/// Decodes the escapes of a JSON string body that is UTF-8, given as bytes, onto the end of
/// `out` (UTF-8 too), as [`Units`] would.
fn unescape_bytes(body: &[u8], out: &mut Vec<u8>) {
    let mut from = 0;
    while let Some(off) = find_backslash(&body[from..]) {
        let at = from + off;
        out.extend_from_slice(&body[from..at]);
        // The escapes of text are mostly a newline, a quote or a backslash: one byte, as
        // `decode_escape` would give it.
        if let Some(&byte @ (b'n' | b'"' | b'\\')) = body.get(at + 1) {
            out.push(if byte == b'n' { b'\n' } else { byte });
            from = at + 2;
            continue;
        }
        let (c, len) = decode_escape(&body[at..]);
        out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
        from = at + len;
    }
    out.extend_from_slice(&body[from..]);
}

/// A piece of a JSON string body: a run of literal text, or one escaped character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit<'a> {
    Plain(&'a str),
    Char(char),
}

/// Walks a JSON string body (between the quotes) as literal runs and escapes, decoding only
/// the escapes.
#[derive(Debug, Clone)]
pub(crate) struct Units<'a> {
    body: &'a str,
    pos: usize,
}

impl<'a> Units<'a> {
    pub(crate) fn new(body: &'a str) -> Self {
        Units { body, pos: 0 }
    }

    /// What is left to walk.
    pub(crate) fn rest(&self) -> &'a str {
        &self.body[self.pos..]
    }

    /// The next piece, or `None` at the end.
    pub(crate) fn next(&mut self) -> Option<Unit<'a>> {
        let rest = self.rest();
        if rest.is_empty() {
            return None;
        }
        let Some(at) = memchr(b'\\', rest.as_bytes()) else {
            self.pos = self.body.len();
            return Some(Unit::Plain(rest));
        };
        if at > 0 {
            self.pos += at;
            return Some(Unit::Plain(&rest[..at]));
        }
        let (c, len) = decode_escape(rest.as_bytes());
        self.pos += len;
        Some(Unit::Char(c))
    }
}

/// Decodes the escape at the start of `s` (which starts with a backslash): the character and
/// the escape's length. A lone surrogate or a broken escape becomes U+FFFD.
pub(crate) fn decode_escape(s: &[u8]) -> (char, usize) {
    let hex = |at: usize| {
        s.get(at..at + 4)?.iter().try_fold(0u32, |n, &b| {
            let digit = char::from(b).to_digit(16)?;
            Some(n << 4 | digit)
        })
    };
    match s.get(1) {
        Some(b'n') => ('\n', 2),
        Some(b't') => ('\t', 2),
        Some(b'r') => ('\r', 2),
        Some(b'b') => ('\u{8}', 2),
        Some(b'f') => ('\u{c}', 2),
        Some(b'u') => match hex(2) {
            Some(hi @ 0xD800..=0xDBFF) => match (s.get(6..8), hex(8)) {
                (Some(b"\\u"), Some(lo @ 0xDC00..=0xDFFF)) => {
                    let c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                    (char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER), 12)
                }
                _ => (char::REPLACEMENT_CHARACTER, 6),
            },
            Some(c) => (char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER), 6),
            None => (char::REPLACEMENT_CHARACTER, 2),
        },
        Some(&c) if c.is_ascii() => (c as char, 2),
        _ => (char::REPLACEMENT_CHARACTER, 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads `json` fully, descending into every object and array, and re-serializes it
    /// compactly: a round trip through the reader.
    fn echo(r: &mut Reader<'_>, out: &mut String) -> Result<(), Error> {
        match r.peek() {
            Some(b'{') => {
                let mut obj = r.object()?;
                out.push('{');
                let mut first = true;
                while let Some(key) = obj.next_key(r)? {
                    if !std::mem::take(&mut first) {
                        out.push(',');
                    }
                    out.push_str(&format!("\"{}\":", std::str::from_utf8(key).unwrap()));
                    echo(r, out)?;
                }
                out.push('}');
            }
            Some(b'[') => {
                let mut arr = r.array()?;
                out.push('[');
                let mut first = true;
                while arr.next(r)? {
                    if !std::mem::take(&mut first) {
                        out.push(',');
                    }
                    echo(r, out)?;
                }
                out.push(']');
            }
            _ => {
                let raw = r.value()?;
                out.push_str(std::str::from_utf8(raw.text).unwrap());
            }
        }
        Ok(())
    }

    fn roundtrip(json: &str) -> Result<String, Error> {
        let mut r = Reader::new(json.as_bytes());
        let mut out = String::new();
        echo(&mut r, &mut out)?;
        r.end()?;
        Ok(out)
    }

    #[test]
    fn reads_nested_values_whitespace_and_escapes() {
        let json = r#" { "a" : [1, -2.5e3, true, null, "x\"y\\", {"b": {}}], "c": "\\\\" } "#;
        assert_eq!(
            roundtrip(json).unwrap(),
            r#"{"a":[1,-2.5e3,true,null,"x\"y\\",{"b":{}}],"c":"\\\\"}"#
        );
    }

    #[test]
    fn skipping_agrees_with_serde_on_structure() {
        let json = r#"{"t":"assistant","m":{"c":[{"x":"a]}\"[{"},{"y":[[[]]]}]},"z":0}"#;
        let mut r = Reader::new(json.as_bytes());
        let raw = r.value().unwrap();
        r.end().unwrap();
        assert_eq!(raw.text, json.as_bytes());
        let want: serde_json::Value = serde_json::from_str(json).unwrap();
        let got: serde_json::Value = serde_json::from_str(&roundtrip(json).unwrap()).unwrap();
        assert_eq!(got, want);
    }

    #[test]
    fn malformed_json_is_an_error_not_a_panic() {
        for bad in [
            "",
            "{",
            "{\"a\"",
            "{\"a\":",
            "{\"a\":1",
            "{\"a\":1,}",
            "{a:1}",
            "[1,]",
            "[1 2]",
            "{\"a\":\"unterminated}",
            "{\"a\":1}x",
            "{\"a\":}",
            "\"\\\"",
            "{\"a\":[}",
        ] {
            assert!(
                roundtrip(bad).is_err(),
                "{bad:?} read as {:?}",
                roundtrip(bad)
            );
        }
    }

    #[test]
    fn raw_values_decode() {
        let raw = |s: &'static str| Raw::new(s.as_bytes());
        assert_eq!(raw(r#""plain""#).str().unwrap(), "plain");
        assert!(matches!(raw(r#""plain""#).str(), Some(Cow::Borrowed(_))));
        assert_eq!(
            raw(r#""a\nb\u00e9\ud83d\ude00\"""#).str().unwrap(),
            "a\nbé😀\""
        );
        assert_eq!(raw(r#""\ud800x""#).str().unwrap(), "\u{fffd}x");
        assert_eq!(raw("12").str(), None);
        assert_eq!(raw("true").bool(), Some(true));
        assert_eq!(raw("\"true\"").bool(), None);
        assert_eq!(raw("39072").u64(), Some(39072));
        assert_eq!(raw("-1").u64(), None);
        assert_eq!(raw("0.19636").f64(), Some(0.19636));
        assert_eq!(raw("1e2").f64(), Some(100.0));
        assert_eq!(raw("inf").f64(), None);
        assert!(raw("null").is_null());
    }

    #[test]
    fn text_in_a_buffer_is_what_str_decodes() {
        let mut buf = Vec::new();
        for body in [
            &b""[..],
            b"plain",
            b"caf\xc3\xa9 \\n and \\\"quotes\\\"",
            b"not UTF-8: \xff\xfe, then \\u00e9",
            b"\\ud83d\\ude00 \\ud800 lone",
            b"\\\\",
        ] {
            // Around the 8-byte words and the 64 bytes looked at in place.
            for pad in [0, 1, 7, 8, 9, 56, 63, 64, 65, 100] {
                let text = [&b"\""[..], &b"x".repeat(pad), body, b"\""].concat();
                let raw = Raw::new(&text);
                let want = raw.str().unwrap();
                assert_eq!(raw.text_in(&mut buf).unwrap(), want.as_bytes(), "{text:?}");
            }
        }
        assert_eq!(Raw::new(b"12").text_in(&mut buf), None);
    }

    #[test]
    fn names_compare_as_decoded_text() {
        let raw = |s: &'static [u8]| Raw::new(s);
        assert!(raw(br#""assistant""#).is_str("assistant"));
        assert!(raw(br#""assist\u0061nt""#).is_str("assistant"));
        assert!(!raw(br#""user""#).is_str("assistant"));
        assert!(!raw(br#""assistant\n""#).is_str("assistant"));
        assert!(!raw(b"12").is_str("12"));
        assert!(!raw(b"\"\xffx\"").is_str("\u{fffd}x"));
        assert_eq!(raw(br#""a\u0062""#).tag().as_deref(), Some(&b"ab"[..]));
        assert_eq!(raw(b"\"\xff\"").tag().as_deref(), Some(&b"\xff"[..]));
        assert_eq!(raw(b"true").tag(), None);
    }

    #[test]
    fn deep_nesting_is_skipped_without_recursion() {
        let deep = format!("{}{}", "[".repeat(1_000_000), "]".repeat(1_000_000));
        let mut r = Reader::new(deep.as_bytes());
        r.skip().unwrap();
        r.end().unwrap();
    }

    /// [`string_end`] the simple way: byte by byte, an escape flag carried from one to the
    /// next.
    fn string_end_simple(s: &[u8], from: usize) -> Option<usize> {
        let mut escape = false;
        for (at, &b) in s.iter().enumerate().skip(from) {
            if escape {
                escape = false;
            } else if b == b'\\' {
                escape = true;
            } else if b == b'"' {
                return Some(at);
            }
        }
        None
    }

    #[test]
    fn strings_that_end_across_blocks_are_scanned_exactly() {
        // Runs of backslashes before a quote, an `n` and an escape, at every offset, from
        // strings that start at different places.
        for run in 0..6 {
            for after in [&br#""x"#[..], br#"n\n"x"#, br#"\"n""#, br#"\\""#] {
                let tail = [&b"\\".repeat(run)[..], after].concat();
                for pad in 0..3 * 64 + 2 {
                    for start in 0..4 {
                        let s = [&b"{".repeat(start)[..], b"\"", &b"a".repeat(pad), &tail].concat();
                        assert_eq!(
                            string_end(&s, start + 1),
                            string_end_simple(&s, start + 1),
                            "{start} {pad} {tail:?}"
                        );
                    }
                }
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]
        /// The end of a string, on any bytes: runs of backslashes,
        /// escaped and bare quotes, `n` with and without a backslash, from any start.
        #[test]
        fn scanning_a_string_agrees_with_walking_it(
            bytes in proptest::collection::vec(0u8..32, 0..400),
            backslashes in 1u8..10,
            quote_every in 1usize..400,
            from in 0usize..400,
        ) {
            // Backslashes as dense as `backslashes` says (from a few to many runs of three);
            // bare quotes rare, as in what is scanned: most tests reach far.
            let mut bytes: Vec<u8> = bytes
                .iter()
                .enumerate()
                .map(|(i, &v)| match v {
                    v if v < backslashes => b'\\',
                    v => match v % 6 {
                        0 if i % quote_every == 0 => b'"',
                        0 => b'x',
                        1 => b'n',
                        2 => b' ',
                        3 => b'u',
                        4 => 0xC3,
                        _ => b'a',
                    },
                })
                .collect();
            // The string's opening quote, just before where it is scanned from.
            let from = from.min(bytes.len());
            if let Some(quote) = from.checked_sub(1) {
                bytes[quote] = b'"';
            }
            proptest::prop_assert_eq!(string_end(&bytes, from), string_end_simple(&bytes, from));
            // Through the reader: where the string ends.
            let line = [&b"\""[..], &bytes].concat();
            let mut r = Reader::new(&line);
            match (r.value(), string_end_simple(&line, 1)) {
                (Ok(raw), Some(quote)) => proptest::prop_assert_eq!(raw.text.len(), quote + 1),
                (Err(_), None) => {}
                (got, want) => proptest::prop_assert!(false, "{got:?} but {want:?}"),
            }
        }
    }

    proptest::proptest! {
        /// Any JSON serde_json writes, the reader reads back to the same value.
        #[test]
        fn reads_back_what_serde_writes(
            v in proptest::collection::vec(
                ("[a-z\"\\\\/\n\t\u{1}é😀]{0,8}", proptest::num::i64::ANY, proptest::bool::ANY),
                0..6,
            )
        ) {
            let value = serde_json::json!({
                "list": v.iter().map(|(s, n, b)| serde_json::json!([s, n, b, {"s": s}])).collect::<Vec<_>>(),
                "text": v.iter().map(|(s, _, _)| s.as_str()).collect::<String>(),
            });
            let json = value.to_string();
            let back: serde_json::Value = serde_json::from_str(&roundtrip(&json).unwrap()).unwrap();
            proptest::prop_assert_eq!(&back, &value);
            let mut r = Reader::new(json.as_bytes());
            let mut obj = r.object().unwrap();
            while let Some(key) = obj.next_key(&mut r).unwrap() {
                let raw = r.value().unwrap();
                if key == b"text" {
                    proptest::prop_assert_eq!(raw.str().unwrap(), value["text"].as_str().unwrap());
                }
            }
        }
    }
}
