//! Reads the frontmatter's YAML into [`Settings`], giving every problem a line and column.
//!
//! # How positions are found
//!
//! `serde_yaml_ng` reports a position only inside an error: when a visitor returns an error,
//! the deserializer stamps it with the start of the YAML node being visited (1-based line,
//! column counted in characters), unless the error already carries one. So the visitors
//! here check each value *while visiting it*: a bad value becomes an error in `visit_*`,
//! which serde_yaml_ng then places exactly. Because a `serde` error only carries a string,
//! the typed [`Problem`] waits in [`Ctx::problem`] and the error string is ignored.
//!
//! Three things have no position in serde_yaml_ng: the alias "repetition limit", a second
//! YAML document, and keys that parsed fine (unknown keys become warnings, which need a
//! line). For those, [`key_lines`] scans the text for top-level `key:` lines; it is exact for
//! the block style task files use, and falls back to the frontmatter's first line otherwise.
//!
//! # Hostile input
//!
//! libyaml's scanner costs O(tokens × flow depth), so 16 000 unclosed `[` take seconds and
//! 250 000 take minutes. [`check_nesting`] refuses more than [`MAX_FLOW_NESTING`] open
//! brackets before the text reaches libyaml. Alias bombs hit serde_yaml_ng's repetition limit
//! (100 alias expansions per event): values of unknown keys are walked with `deserialize_any`,
//! which follows aliases, rather than skipped with `IgnoredAny`, which would let a bomb pass
//! unnoticed.

use std::collections::{HashMap, HashSet};
use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor,
};

use super::MAX_FLOW_NESTING;
use super::error::Problem;
use super::key::Key;
use super::keys::{Node, Settings};

/// serde_yaml_ng's fixed nesting limit (`remaining_depth` in its deserializer).
const YAML_RECURSION_LIMIT: usize = 128;

/// A problem and where it is, 1-based, in file coordinates.
pub(super) type Located = (usize, usize, Problem);

/// What the frontmatter said.
#[derive(Debug)]
pub(super) struct Frontmatter {
    /// The known keys' values, defaults elsewhere.
    pub(super) settings: Settings,
    /// Keys ralph does not know, with their line and column in the file.
    pub(super) unknown: Vec<(String, usize, usize)>,
    /// Each top-level key's line and column in the file, where [`key_lines`] finds it.
    pub(super) positions: HashMap<String, (usize, usize)>,
}

/// Reads `yaml`, whose first line is line `first_line` of the file.
pub(super) fn read(yaml: &str, first_line: usize) -> Result<Frontmatter, Located> {
    let to_file = |(line, column): (usize, usize)| (first_line + line - 1, column);
    if let Some(at) = check_nesting(yaml) {
        let (line, column) = to_file(at);
        return Err((
            line,
            column,
            Problem::TooDeep {
                limit: MAX_FLOW_NESTING,
            },
        ));
    }
    let keys = key_lines(yaml);
    let mut ctx = Ctx {
        settings: Settings::default(),
        problem: None,
        seen: HashSet::new(),
        unknown: Vec::new(),
        current: None,
        keys: &keys,
        first_line,
    };
    let result =
        RootSeed { ctx: &mut ctx }.deserialize(serde_yaml_ng::Deserializer::from_str(yaml));
    if let Err(error) = result {
        let (at, problem) = locate(&error, &mut ctx, yaml, first_line);
        let (line, column) = to_file(at);
        return Err((line, column, problem));
    }
    let unknown = ctx
        .unknown
        .into_iter()
        .map(|key| {
            let (line, column) = to_file(keys.get(&key).copied().unwrap_or((1, 1)));
            (key, line, column)
        })
        .collect();
    let positions = keys
        .iter()
        .map(|(key, at)| (key.clone(), to_file(*at)))
        .collect();
    Ok(Frontmatter {
        settings: ctx.settings,
        unknown,
        positions,
    })
}

/// Turns a serde_yaml_ng error into a problem at a YAML-relative position.
fn locate(
    error: &serde_yaml_ng::Error,
    ctx: &mut Ctx<'_>,
    yaml: &str,
    first_line: usize,
) -> ((usize, usize), Problem) {
    let mark = error.location().map(|l| (l.line(), l.column()));
    // Where the key whose value was being read starts, for errors without a mark.
    let near = ctx
        .current
        .as_ref()
        .and_then(|key| ctx.keys.get(key).copied())
        .unwrap_or((1, 1));
    if let Some(problem) = ctx.problem.take() {
        return (mark.unwrap_or(near), problem);
    }
    let message = error.to_string();
    if message.starts_with("repetition limit exceeded") {
        return (near, Problem::AliasBomb);
    }
    if message.starts_with("recursion limit exceeded") {
        let limit = YAML_RECURSION_LIMIT;
        return (mark.unwrap_or(near), Problem::TooDeep { limit });
    }
    if message.starts_with("deserializing from YAML containing more than one document") {
        let end = yaml
            .lines()
            .position(|l| l.trim_end().starts_with("..."))
            .map_or(near, |i| (i + 1, 1));
        return (end, Problem::MultipleDocuments);
    }
    let syntax = SyntaxMessage::parse(&message);
    let mut at = mark.unwrap_or(near);
    if let Some(offset) = syntax.offset {
        at = position_of(yaml, offset);
    }
    // At the end of the text, the place that matters is where the unclosed thing opened.
    if syntax.problem.contains("end of stream")
        && let Some(start) = syntax.context_at
    {
        at = start;
    }
    if let Some(tab) = tab_indent(yaml, at.0) {
        return (tab, Problem::TabIndent);
    }
    let detail = match (syntax.context, syntax.context_at) {
        (Some(context), Some(start)) if start != at => format!(
            "{} ({context} that starts at line {}, column {})",
            syntax.problem,
            first_line + start.0 - 1,
            start.1
        ),
        (Some(context), _) => format!("{} ({context})", syntax.problem),
        (None, _) => syntax.problem.to_owned(),
    };
    (at, Problem::Yaml { detail })
}

/// A libyaml error message taken apart.
///
/// serde_yaml_ng only exposes libyaml errors through `Display`, which reads
/// `problem at line L column C, context at line L2 column C2`, or `problem at position N` for
/// errors found while decoding the text (N is a byte offset). The first position is what
/// `Error::location` returns; the context's position is only in the text.
#[derive(Debug, PartialEq)]
struct SyntaxMessage<'m> {
    problem: &'m str,
    offset: Option<usize>,
    context: Option<&'m str>,
    context_at: Option<(usize, usize)>,
}

impl<'m> SyntaxMessage<'m> {
    fn parse(message: &'m str) -> SyntaxMessage<'m> {
        const AT_LINE: &str = " at line ";
        const AT_POSITION: &str = " at position ";
        let message = message.trim_end_matches('.');
        let mut parsed = SyntaxMessage {
            problem: message,
            offset: None,
            context: None,
            context_at: None,
        };
        let rest = if let Some(i) = message.find(AT_POSITION) {
            parsed.problem = &message[..i];
            let (number, rest) = leading_number(&message[i + AT_POSITION.len()..]);
            parsed.offset = number;
            rest
        } else if let Some(i) = message.find(AT_LINE) {
            parsed.problem = &message[..i];
            line_and_column(&message[i + AT_LINE.len()..]).1
        } else {
            return parsed;
        };
        let Some(context) = rest.strip_prefix(", ") else {
            return parsed;
        };
        match context.find(AT_LINE) {
            Some(i) => {
                parsed.context = Some(&context[..i]);
                parsed.context_at = line_and_column(&context[i + AT_LINE.len()..]).0;
            }
            None => parsed.context = Some(context),
        }
        parsed
    }
}

/// Reads `L column C` at the start of `s`; returns it and what follows.
fn line_and_column(s: &str) -> (Option<(usize, usize)>, &str) {
    let (line, rest) = leading_number(s);
    let Some(rest) = rest.strip_prefix(" column ") else {
        return (None, rest);
    };
    let (column, rest) = leading_number(rest);
    (line.zip(column), rest)
}

/// Reads the decimal number at the start of `s`; returns it and what follows.
fn leading_number(s: &str) -> (Option<usize>, &str) {
    let end = s.bytes().take_while(u8::is_ascii_digit).count();
    (s[..end].parse().ok(), &s[end..])
}

/// The 1-based line and column (in characters) of a byte offset.
fn position_of(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    (line, column)
}

/// A tab in the indentation of the line `line` or the one above it, where libyaml stopped.
///
/// libyaml's wording for tab trouble varies ("found character that cannot start any token",
/// "found a tab character that violates indentation"), so the tab is looked for rather than
/// recognised from the message. Earlier lines are not searched: a tab inside a block scalar
/// is legal and must not take the blame for a later error.
fn tab_indent(yaml: &str, line: usize) -> Option<(usize, usize)> {
    let first = line.saturating_sub(2);
    yaml.lines()
        .enumerate()
        .skip(first)
        .take(line - first)
        .find_map(|(i, text)| {
            let indent_len = text.len() - text.trim_start_matches([' ', '\t']).len();
            let (indent, rest) = text.split_at(indent_len);
            let column = indent.find('\t')?;
            (!rest.trim_end_matches('\r').is_empty()).then_some((i + 1, column + 1))
        })
}

/// The position of the first `[` or `{` nested deeper than [`MAX_FLOW_NESTING`].
///
/// Brackets inside quotes and comments are counted too: a value would need dozens of unclosed
/// brackets to trip this, and counting them keeps the check simple and linear.
pub(super) fn check_nesting(yaml: &str) -> Option<(usize, usize)> {
    let mut depth = 0usize;
    let (mut line, mut column) = (1, 0);
    for c in yaml.chars() {
        column += 1;
        match c {
            '\n' => (line, column) = (line + 1, 0),
            '[' | '{' => {
                depth += 1;
                if depth > MAX_FLOW_NESTING {
                    return Some((line, column));
                }
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// The first line and column of each top-level `key:` in block-style YAML.
pub(super) fn key_lines(yaml: &str) -> HashMap<String, (usize, usize)> {
    let mut found = HashMap::new();
    let mut root_indent = None;
    for (i, line) in yaml.lines().enumerate() {
        let content = line.trim_start_matches(' ');
        if content.trim().is_empty() || content.starts_with('#') {
            continue;
        }
        let indent = line.len() - content.len();
        let root = *root_indent.get_or_insert(indent);
        if indent != root {
            continue;
        }
        if let Some(key) = key_of(content) {
            found.entry(key).or_insert((i + 1, indent + 1));
        }
    }
    found
}

/// The key of a `key: value` line, unquoted, if the line is one.
fn key_of(content: &str) -> Option<String> {
    let bytes = content.as_bytes();
    let end = (0..bytes.len())
        .find(|&i| bytes[i] == b':' && bytes.get(i + 1).is_none_or(|b| b.is_ascii_whitespace()))?;
    let raw = content[..end].trim();
    let quoted = ['"', '\'']
        .iter()
        .find_map(|q| raw.strip_prefix(*q).and_then(|r| r.strip_suffix(*q)));
    match quoted {
        Some(inner) => Some(inner.to_owned()),
        None if raw.is_empty()
            || raw.starts_with(['-', '?', '[', '{', '&', '*', '!', '|', '>']) =>
        {
            None
        }
        None => Some(raw.to_owned()),
    }
}

/// State shared by the visitors while one frontmatter is read.
struct Ctx<'k> {
    settings: Settings,
    /// The typed problem behind the error being returned, if a visitor found one.
    problem: Option<Problem>,
    seen: HashSet<String>,
    unknown: Vec<String>,
    /// The key whose value is being read.
    current: Option<String>,
    keys: &'k HashMap<String, (usize, usize)>,
    first_line: usize,
}

impl Ctx<'_> {
    /// Records `problem` and returns the error that carries it up to [`read`].
    fn fail<E: de::Error>(&mut self, problem: Problem) -> E {
        self.problem = Some(problem);
        E::custom("the problem is recorded in Ctx::problem")
    }

    /// Passes on a check's verdict, recording a problem as the error.
    fn check<E: de::Error>(&mut self, verdict: Result<(), Problem>) -> Result<(), E> {
        verdict.map_err(|p| self.fail(p))
    }
}

/// Which key a mapping entry is.
enum KeyName {
    Known(Key),
    Unknown(String),
}

/// The whole frontmatter: must be a mapping.
struct RootSeed<'c, 'k> {
    ctx: &'c mut Ctx<'k>,
}

impl<'de> DeserializeSeed<'de> for RootSeed<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for RootSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("'key: value' lines")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let ctx = self.ctx;
        while let Some(name) = map.next_key_seed(KeySeed { ctx: &mut *ctx })? {
            match name {
                KeyName::Known(key) => {
                    ctx.current = Some(key.name().to_owned());
                    map.next_value_seed(ValueSeed {
                        ctx: &mut *ctx,
                        key,
                        item: false,
                    })?;
                }
                KeyName::Unknown(key) => {
                    ctx.current = Some(key.clone());
                    ctx.unknown.push(key);
                    map.next_value_seed(Walk)?;
                }
            }
            ctx.current = None;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _seq: A) -> Result<(), A::Error> {
        Err(self.ctx.fail(Problem::NotAMapping {
            found: "a list".to_owned(),
        }))
    }

    fn visit_str<E: de::Error>(self, _v: &str) -> Result<(), E> {
        Err(self.ctx.fail(Problem::NotAMapping {
            found: "a single piece of text".to_owned(),
        }))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.visit_str(&v.to_string())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.visit_str(&v.to_string())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        self.visit_str(&v.to_string())
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.visit_str(&v.to_string())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Err(self.ctx.fail(Problem::EmptyFrontmatter))
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.visit_unit()
    }

    fn visit_enum<A: EnumAccess<'de>>(self, _data: A) -> Result<(), A::Error> {
        Err(self.ctx.fail(Problem::YamlTag))
    }
}

/// A mapping key: must be a name, and must not repeat.
struct KeySeed<'c, 'k> {
    ctx: &'c mut Ctx<'k>,
}

impl<'de> DeserializeSeed<'de> for KeySeed<'_, '_> {
    type Value = KeyName;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<KeyName, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_, '_> {
    type Value = KeyName;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key name")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<KeyName, E> {
        if !self.ctx.seen.insert(v.to_owned()) {
            let first_line = self
                .ctx
                .keys
                .get(v)
                .map(|(line, _)| self.ctx.first_line + line - 1);
            return Err(self.ctx.fail(Problem::DuplicateKey {
                key: v.to_owned(),
                first_line,
            }));
        }
        Ok(match Key::from_name(v) {
            Some(key) => KeyName::Known(key),
            None => KeyName::Unknown(v.to_owned()),
        })
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<KeyName, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<KeyName, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<KeyName, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<KeyName, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_unit<E: de::Error>(self) -> Result<KeyName, E> {
        Err(self.ctx.fail(Problem::KeyNotText {
            found: "an empty key".to_owned(),
        }))
    }

    fn visit_none<E: de::Error>(self) -> Result<KeyName, E> {
        self.visit_unit()
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _seq: A) -> Result<KeyName, A::Error> {
        Err(self.ctx.fail(Problem::KeyNotText {
            found: "a list".to_owned(),
        }))
    }

    fn visit_map<A: MapAccess<'de>>(self, _map: A) -> Result<KeyName, A::Error> {
        Err(self.ctx.fail(Problem::KeyNotText {
            found: "a mapping".to_owned(),
        }))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, _data: A) -> Result<KeyName, A::Error> {
        Err(self.ctx.fail(Problem::YamlTag))
    }
}

/// The value of a known key, or (with `item`) one item of a list key's value.
struct ValueSeed<'c, 'k> {
    ctx: &'c mut Ctx<'k>,
    key: Key,
    item: bool,
}

impl ValueSeed<'_, '_> {
    fn accept<E: de::Error>(&mut self, node: Node<'_>) -> Result<(), E> {
        let verdict = if self.item {
            self.ctx.settings.push(self.key, node)
        } else {
            self.ctx.settings.set(self.key, node)
        };
        self.ctx.check(verdict)
    }
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a value for {}", self.key.name())
    }

    fn visit_bool<E: de::Error>(mut self, v: bool) -> Result<(), E> {
        self.accept(Node::Bool(v))
    }

    fn visit_i64<E: de::Error>(mut self, v: i64) -> Result<(), E> {
        self.accept(Node::Int(v.into()))
    }

    fn visit_u64<E: de::Error>(mut self, v: u64) -> Result<(), E> {
        self.accept(Node::Int(v.into()))
    }

    fn visit_i128<E: de::Error>(mut self, v: i128) -> Result<(), E> {
        self.accept(Node::Int(v))
    }

    fn visit_u128<E: de::Error>(mut self, v: u128) -> Result<(), E> {
        self.accept(Node::Int(i128::try_from(v).unwrap_or(i128::MAX)))
    }

    fn visit_f64<E: de::Error>(mut self, v: f64) -> Result<(), E> {
        self.accept(Node::Float(v))
    }

    fn visit_str<E: de::Error>(mut self, v: &str) -> Result<(), E> {
        self.accept(Node::Str(v))
    }

    fn visit_unit<E: de::Error>(mut self) -> Result<(), E> {
        self.accept(Node::Null)
    }

    fn visit_none<E: de::Error>(mut self) -> Result<(), E> {
        self.accept(Node::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        if self.item || !self.key.takes_list() {
            // Always refused: a list is never a valid scalar or list item.
            self.accept::<A::Error>(Node::List)?;
            while seq.next_element::<de::IgnoredAny>()?.is_some() {}
            return Ok(());
        }
        if self.key == Key::SandboxNet {
            // A list of no ports still says something: no outgoing TCP.
            let opened = self.ctx.settings.push(self.key, Node::List);
            self.ctx.check::<A::Error>(opened)?;
        }
        while seq
            .next_element_seed(ValueSeed {
                ctx: &mut *self.ctx,
                key: self.key,
                item: true,
            })?
            .is_some()
        {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        // Always refused: no key takes a mapping.
        self.accept::<A::Error>(Node::Mapping)?;
        while map
            .next_entry::<de::IgnoredAny, de::IgnoredAny>()?
            .is_some()
        {}
        Ok(())
    }

    fn visit_enum<A: EnumAccess<'de>>(self, _data: A) -> Result<(), A::Error> {
        Err(self.ctx.fail(Problem::YamlTag))
    }
}

/// Walks a value ralph ignores, following aliases so that the repetition and recursion
/// limits still apply to it.
struct Walk;

impl<'de> DeserializeSeed<'de> for Walk {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_i128<E: de::Error>(self, _: i128) -> Result<(), E> {
        Ok(())
    }

    fn visit_u128<E: de::Error>(self, _: u128) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Walk)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key_seed(Walk)?.is_some() {
            map.next_value_seed(Walk)?;
        }
        Ok(())
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
        let (de::IgnoredAny, variant) = data.variant()?;
        variant.newtype_variant_seed(Walk)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libyaml_messages_come_apart() {
        let m = SyntaxMessage::parse(
            "did not find expected ',' or ']' at line 2 column 1, while parsing a flow \
             sequence at line 1 column 7",
        );
        assert_eq!(m.problem, "did not find expected ',' or ']'");
        assert_eq!(m.offset, None);
        assert_eq!(m.context, Some("while parsing a flow sequence"));
        assert_eq!(m.context_at, Some((1, 7)));

        let m = SyntaxMessage::parse("control characters are not allowed at position 11");
        assert_eq!(m.problem, "control characters are not allowed");
        assert_eq!(m.offset, Some(11));
        assert_eq!(m.context, None);

        let m = SyntaxMessage::parse("unknown anchor at line 1 column 7");
        assert_eq!((m.problem, m.context), ("unknown anchor", None));

        let m = SyntaxMessage::parse("something new");
        assert_eq!(m.problem, "something new");
    }

    #[test]
    fn key_lines_finds_top_level_keys_only() {
        let keys = key_lines(
            "# comment\ntask: x\ncompletion_criteria:\n  - a: b\n  nested: 1\n\"quoted\": 2\n\
             'single': 3\nurl: http://x\n- item\n? complex\n",
        );
        assert_eq!(keys.get("task"), Some(&(2, 1)));
        assert_eq!(keys.get("completion_criteria"), Some(&(3, 1)));
        assert_eq!(keys.get("quoted"), Some(&(6, 1)));
        assert_eq!(keys.get("single"), Some(&(7, 1)));
        assert_eq!(keys.get("url"), Some(&(8, 1)));
        assert_eq!(keys.get("nested"), None);
        assert_eq!(keys.len(), 5);
        // An indented root mapping is still the root.
        assert_eq!(
            key_lines("  task: x\n  bell: true\n").get("bell"),
            Some(&(2, 3))
        );
    }

    #[test]
    fn nesting_check_counts_open_brackets() {
        assert_eq!(check_nesting(&"[".repeat(MAX_FLOW_NESTING)), None);
        assert_eq!(
            check_nesting(&format!("a\n{}", "[".repeat(MAX_FLOW_NESTING + 1))),
            Some((2, MAX_FLOW_NESTING + 1))
        );
        assert_eq!(check_nesting(&"[]".repeat(10_000)), None);
    }
}
