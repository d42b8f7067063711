//! A one-pass JSON reader for decoders that need a few fields of long lines.
//!
//! Agent streams are mostly long, escape-dense strings (file bodies, command output) that a
//! decoder only skips. serde_json checks every byte of a string it skips and stops at every
//! escape; this reader finds a string's end by looking for quotes alone (a quote ends the
//! string when an even run of backslashes precedes it), descends only into the values it is
//! asked to, and decodes only the strings it is given. Measured on tool-heavy Claude streams,
//! that is several times faster than skipping with serde_json.
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

    fn expect(&mut self, byte: u8, what: &'static str) -> Result<(), Error> {
        if self.peek() != Some(byte) {
            return self.error(what);
        }
        self.pos += 1;
        Ok(())
    }

    /// Checks that nothing but whitespace is left.
    pub(crate) fn end(&mut self) -> Result<(), Error> {
        match self.peek() {
            None => Ok(()),
            Some(_) => self.error("trailing characters"),
        }
    }

    /// Skips the next value and returns its text.
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
        Ok(Raw(&self.s[start..self.pos]))
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
        Ok((Raw(&self.s[start..self.pos]), value))
    }

    /// Skips the next value.
    pub(crate) fn skip(&mut self) -> Result<(), Error> {
        self.value().map(drop)
    }

    /// Skips a string; the reader is at its opening quote.
    fn skip_string(&mut self) -> Result<(), Error> {
        let mut from = self.pos + 1;
        loop {
            let Some(quote) = find_quote(self.s, from) else {
                return self.error("unterminated string");
            };
            if !escaped(self.s, quote) {
                self.pos = quote + 1;
                return Ok(());
            }
            from = quote + 1;
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
            .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.'))
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

/// The first quote in `s` at or after `from`.
///
/// Most strings are short (keys, ids), and long ones (source code) are dense with escaped
/// quotes, each a stop: so the next few 16-byte blocks are looked at in place, in a loop the
/// compiler vectorizes, before `memchr`, whose set-up costs more than those blocks.
fn find_quote(s: &[u8], from: usize) -> Option<usize> {
    let rest = &s[from..];
    let near = rest.len().min(64) / 16 * 16;
    for (i, block) in rest[..near].chunks_exact(16).enumerate() {
        if let Ok(block) = <&[u8; 16]>::try_from(block)
            && block.iter().fold(false, |any, &b| any | (b == b'"'))
        {
            return Some(from + 16 * i + first_quote_in(block));
        }
    }
    memchr(b'"', &rest[near..]).map(|at| from + near + at)
}

/// Where the first quote of a block that has one is, eight bytes at a time: the lowest byte
/// that was a quote is the lowest one flagged (a borrow only flags bytes above it).
fn first_quote_in(block: &[u8; 16]) -> usize {
    let flags = |half: [u8; 8]| {
        let x = u64::from_le_bytes(half) ^ u64::from_le_bytes([b'"'; 8]);
        x.wrapping_sub(0x0101_0101_0101_0101) & !x & 0x8080_8080_8080_8080
    };
    let (low, high) = block.split_at(8);
    match (low.try_into().map(flags), high.try_into().map(flags)) {
        (Ok(low), _) if low != 0 => low.trailing_zeros() as usize / 8,
        (_, Ok(high)) => 8 + high.trailing_zeros() as usize / 8,
        _ => 16,
    }
}

/// Whether the quote at `quote` is escaped: an odd run of backslashes precedes it.
fn escaped(s: &[u8], quote: usize) -> bool {
    s[..quote].iter().rev().take_while(|&&b| b == b'\\').count() % 2 == 1
}

/// An object being read: call [`Object::next_key`], then read or skip the value.
#[derive(Debug)]
pub(crate) struct Object {
    first: bool,
}

impl Object {
    /// The next key, as raw bytes between its quotes, with the reader before its value; `None`
    /// after the closing brace.
    pub(crate) fn next_key<'a>(&mut self, r: &mut Reader<'a>) -> Result<Option<&'a [u8]>, Error> {
        if r.peek() == Some(b'}') {
            r.pos += 1;
            return Ok(None);
        }
        if !std::mem::take(&mut self.first) {
            r.expect(b',', "expected `,` or `}`")?;
        }
        if r.peek() != Some(b'"') {
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
pub(crate) struct Raw<'a>(pub(crate) &'a [u8]);

impl<'a> Raw<'a> {
    /// A reader over this value, to descend into it.
    pub(crate) fn reader(self) -> Reader<'a> {
        Reader::new(self.0)
    }

    /// The body of a string value (between the quotes, escapes intact), as bytes: a long
    /// string that is only searched need not be validated as UTF-8.
    pub(crate) fn string_bytes(self) -> Option<&'a [u8]> {
        self.0.strip_prefix(b"\"")?.strip_suffix(b"\"")
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

    /// The value of `true` or `false`.
    pub(crate) fn bool(self) -> Option<bool> {
        match self.0 {
            b"true" => Some(true),
            b"false" => Some(false),
            _ => None,
        }
    }

    /// A number that is a whole, non-negative integer.
    pub(crate) fn u64(self) -> Option<u64> {
        std::str::from_utf8(self.0).ok()?.parse().ok()
    }

    /// A number.
    pub(crate) fn f64(self) -> Option<f64> {
        let text = std::str::from_utf8(self.0).ok()?;
        // Rust also reads "inf" and "NaN", which are not JSON.
        text.starts_with(|c: char| c == '-' || c.is_ascii_digit())
            .then(|| text.parse().ok())?
    }

    /// Whether the value is `null`.
    pub(crate) fn is_null(self) -> bool {
        self.0 == b"null"
    }
}

/// Whether `s` holds a backslash. Most values are short, and `memchr` costs more to set up
/// than a short string takes to check in place.
fn has_backslash(s: &[u8]) -> bool {
    if s.len() <= 32 {
        s.iter().fold(false, |any, &b| any | (b == b'\\'))
    } else {
        memchr(b'\\', s).is_some()
    }
}

/// Decodes the escapes of a JSON string body.
pub(crate) fn unescape(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let mut units = Units::new(body);
    while let Some(unit) = units.next() {
        match unit {
            Unit::Plain(text) => out.push_str(text),
            Unit::Char(c) => out.push(c),
        }
    }
    out
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
                out.push_str(std::str::from_utf8(raw.0).unwrap());
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
        assert_eq!(raw.0, json.as_bytes());
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
        let raw = |s: &'static str| Raw(s.as_bytes());
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
    fn deep_nesting_is_skipped_without_recursion() {
        let deep = format!("{}{}", "[".repeat(1_000_000), "]".repeat(1_000_000));
        let mut r = Reader::new(deep.as_bytes());
        r.skip().unwrap();
        r.end().unwrap();
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
