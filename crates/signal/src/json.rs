//! What every JSON-lines format shares: the line framing, what to do with blank, non-JSON and
//! over-long lines, and a small view of an object's members.
//!
//! A format is a [`JsonFormat`]: it is handed each line that looks like a JSON object and
//! decides what it means. [`JsonDecoder`] does the rest, the same way for every format:
//! - blank lines are ignored;
//! - a line that does not start with `{` (a warning a CLI printed to stdout) is shown as
//!   [`AgentEvent::Text`], never scanned for signals;
//! - a line longer than [`JSON_LINE_CAP`] is dropped as it streams past, with an
//!   [`AgentEvent::Unknown`] note.

use std::borrow::Cow;
use std::fmt;

use crate::jsonl::{JsonLines, Line};
use crate::sanitize::{clean_str, display_line, sanitize};
use crate::skim::{Error, Raw, Reader};
use crate::summary::{SUMMARY_CAP, short};
use crate::{AgentEvent, JSON_LINE_CAP};

/// One JSON-lines stream format: what each object line means.
pub(crate) trait JsonFormat: fmt::Debug + Send {
    /// A trimmed line that starts with `{` (not necessarily valid JSON).
    fn object(&mut self, line: &[u8], out: &mut Vec<AgentEvent>);

    /// A trimmed, non-blank line that is not a JSON object: shown as it is.
    fn not_json(&mut self, line: &[u8], out: &mut Vec<AgentEvent>) {
        out.push(AgentEvent::Text(display_line(line, 0)));
    }

    /// The end of the stream: anything still pending is pushed.
    fn end(&mut self, _out: &mut Vec<AgentEvent>) {}

    /// The end of one chunk of the stream: what was held to be handled in one piece (text
    /// deltas) is handled now, so nothing waits for the next read to be shown.
    fn chunk_end(&mut self, _out: &mut Vec<AgentEvent>) {}

    /// Bytes the format holds between lines (text still open across lines).
    fn buffered_len(&self) -> usize {
        0
    }
}

/// A decoder for one JSON-lines format: framing plus the format's meaning of each line.
#[derive(Debug)]
pub(crate) struct JsonDecoder {
    lines: JsonLines,
    format: Box<dyn JsonFormat>,
}

impl JsonDecoder {
    pub(crate) fn new(format: Box<dyn JsonFormat>) -> Self {
        JsonDecoder {
            lines: JsonLines::default(),
            format,
        }
    }

    /// Decodes the next chunk of the stream.
    pub(crate) fn feed(&mut self, bytes: &[u8], out: &mut Vec<AgentEvent>) {
        let format = self.format.as_mut();
        self.lines.feed(bytes, |line| dispatch(format, line, out));
        format.chunk_end(out);
    }

    /// Ends the stream, decoding an unterminated last line and anything the format holds.
    pub(crate) fn finish(&mut self, out: &mut Vec<AgentEvent>) {
        let format = self.format.as_mut();
        self.lines.finish(|line| dispatch(format, line, out));
        format.end(out);
    }

    /// Bytes held between calls.
    pub(crate) fn buffered_len(&self) -> usize {
        self.lines.buffered_len() + self.format.buffered_len()
    }
}

fn dispatch(format: &mut dyn JsonFormat, line: Line<'_>, out: &mut Vec<AgentEvent>) {
    match line {
        Line::Whole(line) => {
            let line = line.trim_ascii();
            match line.first() {
                None => {}
                Some(b'{') => format.object(line, out),
                Some(_) => format.not_json(line, out),
            }
        }
        Line::Skipped(len) => out.push(AgentEvent::Unknown(format!(
            "skipped a {len}-byte line: longer than the {} MiB a JSON line may take",
            JSON_LINE_CAP >> 20
        ))),
    }
}

/// A JSON object's members, as raw values, in order. Values are read only when asked for.
#[derive(Debug, Clone, Default)]
pub(crate) struct Obj<'a> {
    /// The first members: the objects of agent streams have a handful (a Codex command item
    /// has six), and a line is read for every event, so they are kept without allocating;
    /// not more, as an `Obj` is moved a few times per line.
    first: [Member<'a>; FIRST],
    len: usize,
    /// Members beyond the first [`FIRST`].
    more: Vec<Member<'a>>,
}

type Member<'a> = (&'a [u8], Raw<'a>);

const FIRST: usize = 6;

impl<'a> Obj<'a> {
    /// Reads a whole line as one object; anything after it is an error.
    #[inline]
    pub(crate) fn line(line: &'a [u8]) -> Result<Self, Error> {
        let mut r = Reader::new(line);
        let obj = Self::read(&mut r)?;
        r.end()?;
        Ok(obj)
    }

    /// Reads a whole line as one object, and the object under `key` in the same pass: what
    /// `Obj::line(line)?.obj(key)` gives, without reading that object twice (it is most of
    /// the line when it holds a tool's output).
    pub(crate) fn line_with(line: &'a [u8], key: &str) -> Result<(Self, Option<Self>), Error> {
        let mut r = Reader::new(line);
        let mut obj = Obj::default();
        let mut nested = None;
        let mut seen = false;
        let mut object = r.object()?;
        while let Some(k) = object.next_key(&mut r)? {
            if k == key.as_bytes() && !std::mem::replace(&mut seen, true) && r.peek() == Some(b'{')
            {
                // An object that does not read as one is skipped as any value is, and is
                // not one, as for `Obj::of`.
                let mut ahead = r.clone();
                if let Ok((raw, inner)) = ahead.read_value(Self::read) {
                    r = ahead;
                    nested = Some(inner);
                    obj.push((k, raw));
                    continue;
                }
            }
            obj.push((k, r.value()?));
        }
        r.end()?;
        Ok((obj, nested))
    }

    /// Reads a whole line as one object, as [`Obj::line`] does, but hands each member to
    /// `visit` as it is read instead of keeping it: a format that wants the same few keys of
    /// every line picks them out in this one pass, rather than searching the members for each.
    #[inline]
    pub(crate) fn visit_line(
        line: &'a [u8],
        mut visit: impl FnMut(&'a [u8], Raw<'a>),
    ) -> Result<(), Error> {
        let mut r = Reader::new(line);
        let mut object = r.object()?;
        while let Some(key) = object.next_key(&mut r)? {
            visit(key, r.value()?);
        }
        r.end()
    }

    /// Reads a line, or reports it as malformed and gives `None`.
    pub(crate) fn line_or_report(line: &'a [u8], out: &mut Vec<AgentEvent>) -> Option<Self> {
        match Self::line(line) {
            Ok(obj) => Some(obj),
            Err(err) => {
                out.push(malformed(line, err));
                None
            }
        }
    }

    #[inline]
    fn read(r: &mut Reader<'a>) -> Result<Self, Error> {
        let mut obj = Obj::default();
        let mut object = r.object()?;
        while let Some(key) = object.next_key(r)? {
            obj.push((key, r.value()?));
        }
        Ok(obj)
    }

    fn push(&mut self, member: Member<'a>) {
        match self.first.get_mut(self.len) {
            Some(slot) => {
                *slot = member;
                self.len += 1;
            }
            None => self.more.push(member),
        }
    }

    /// The object `raw` holds; `None` for any other value.
    pub(crate) fn of(raw: Raw<'a>) -> Option<Self> {
        if raw.text.first() != Some(&b'{') {
            return None;
        }
        Self::read(&mut raw.reader()).ok()
    }

    /// The raw value of `key` (its first occurrence).
    // Inlined, as the getters below are, so that the key is a constant where it is compared.
    #[inline]
    pub(crate) fn get(&self, key: &str) -> Option<Raw<'a>> {
        self.members()
            .find(|(k, _)| *k == key.as_bytes())
            .map(|(_, v)| v)
    }

    /// The text of `key`, if it is a string.
    #[inline]
    pub(crate) fn str(&self, key: &str) -> Option<Cow<'a, str>> {
        self.get(key)?.str()
    }

    /// The text of `key` as bytes, if it is a string, to compare with names ([`Raw::tag`]).
    #[inline]
    pub(crate) fn tag(&self, key: &str) -> Option<Cow<'a, [u8]>> {
        self.get(key)?.tag()
    }

    /// The object under `key`, if it is one.
    pub(crate) fn obj(&self, key: &str) -> Option<Obj<'a>> {
        Obj::of(self.get(key)?)
    }

    /// `key` as a whole non-negative number.
    pub(crate) fn u64(&self, key: &str) -> Option<u64> {
        self.get(key)?.u64()
    }

    /// `key` as a number.
    pub(crate) fn f64(&self, key: &str) -> Option<f64> {
        self.get(key)?.f64()
    }

    /// `key` as `true` or `false`.
    #[inline]
    pub(crate) fn bool(&self, key: &str) -> Option<bool> {
        self.get(key)?.bool()
    }

    /// The members, in order.
    pub(crate) fn members(&self) -> impl Iterator<Item = (&'a [u8], Raw<'a>)> + '_ {
        self.first[..self.len].iter().chain(&self.more).copied()
    }
}

/// The `Unknown` event for a line that is not valid JSON.
pub(crate) fn malformed(line: &[u8], err: Error) -> AgentEvent {
    AgentEvent::Unknown(format!("malformed JSON: {err}: {}", start_of(line)))
}

/// The start of `line`, sanitized and cut, for an `Unknown` event.
pub(crate) fn start_of(line: &[u8]) -> String {
    let start = String::from_utf8_lossy(&line[..line.len().min(4 * SUMMARY_CAP)]);
    short(&sanitize(&start))
}

/// Shows text line by line without looking for signals in it.
pub(crate) fn show_lines(text: &str, out: &mut Vec<AgentEvent>) {
    for line in text.split('\n') {
        out.push(AgentEvent::Text(display_line(line.as_bytes(), 0)));
    }
}

/// A short, sanitized one-line form of an id or name from the stream.
pub(crate) fn clean_id(id: &str) -> String {
    // Names and ids rarely hold anything to strip: the check is much cheaper than `vte`.
    short(&clean_str(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn obj_reads_members_lazily_and_by_type() {
        let obj =
            Obj::line(br#"{"a":"x\ny","n":7,"f":-1.5,"b":true,"o":{"k":"v"},"z":null}"#).unwrap();
        assert_eq!(obj.str("a").unwrap(), "x\ny");
        assert_eq!(obj.u64("n"), Some(7));
        assert_eq!(obj.f64("f"), Some(-1.5));
        assert_eq!(obj.bool("b"), Some(true));
        assert_eq!(obj.obj("o").unwrap().str("k").unwrap(), "v");
        assert!(obj.obj("a").is_none());
        assert!(obj.str("n").is_none());
        assert!(obj.get("missing").is_none());
        assert_eq!(obj.members().count(), 6);
    }

    #[test]
    fn malformed_lines_are_reported_not_fatal() {
        let mut out = Vec::new();
        assert!(Obj::line_or_report(br#"{"a":1"#, &mut out).is_none());
        assert!(Obj::line_or_report(br#"{"a":1} x"#, &mut out).is_none());
        assert_eq!(out.len(), 2);
        assert!(
            matches!(&out[0], AgentEvent::Unknown(u) if u.starts_with("malformed JSON")),
            "{out:?}"
        );
    }
}
