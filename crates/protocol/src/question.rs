//! The question file, `.ralph/question.md`: what the agent asks its human.
//!
//! The agent writes the file and then prints `<ralph>QUESTION</ralph>`. Plain markdown is a
//! complete question: the whole file is the question. An optional YAML frontmatter adds
//! structure:
//!
//! ```text
//! ---
//! options: [Redis, Memcached]        # suggested answers; free text is always allowed
//! multi_select: false                # true: the answer may pick several options
//! default: Redis                     # the agent's best guess, used if nobody answers
//! context: Both are in Cargo.toml.   # optional, shown under the question
//! ---
//! Should the session cache use Redis or Memcached?
//! ```
//!
//! Options may also be maps (`- label: Redis` with an optional `description:`), or the
//! one-key shorthand `- Redis: in-memory, persistent`.
//!
//! Reading never fails. The file is written by an agent that may get the format wrong, and a
//! question shown with a note beats a question lost: a frontmatter that does not parse makes
//! the raw file the question text, and [`Question::warning`] says what was wrong and on which
//! line. Nothing here strips terminal control sequences; whoever displays the text does that.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

/// Largest question file shown in full; [`Question::parse_bounded`] cuts bigger files.
pub const MAX_QUESTION_BYTES: usize = 256 * 1024;

/// A question from the agent, as read from `.ralph/question.md`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Question {
    /// The question itself, as markdown (trimmed).
    pub text: String,
    /// Suggested answers; free text is always allowed too.
    pub options: Vec<QuestionOption>,
    /// Whether the answer may pick several options.
    pub multi_select: bool,
    /// The agent's best guess, used when nobody answers in time.
    pub default: Option<String>,
    /// Background shown under the question.
    pub context: Option<String>,
    /// What was wrong with the file, if anything (shown with the question, never fatal).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub warning: Option<String>,
}

/// One suggested answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuestionOption {
    /// What the answer says when this option is picked.
    pub label: String,
    /// A longer explanation shown next to the label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl QuestionOption {
    /// An option with a label and no description.
    pub fn new(label: impl Into<String>) -> Self {
        Self {
            label: label.into(),
            description: None,
        }
    }
}

impl Question {
    /// A plain question with no options, default or context.
    pub fn plain(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            options: Vec::new(),
            multi_select: false,
            default: None,
            context: None,
            warning: None,
        }
    }

    /// Reads a question file's contents. Never fails: problems end up in [`Question::warning`].
    pub fn parse(raw: &str) -> Question {
        let normalized = normalize(raw);
        let mut question = match split_frontmatter(&normalized) {
            Split::Plain => Question::plain(normalized.trim()),
            Split::Unclosed => Question {
                warning: Some(
                    "the frontmatter opened with `---` on line 1 is never closed with a `---` line, \
                     so the whole file is shown as the question"
                        .to_owned(),
                ),
                ..Question::plain(normalized.trim())
            },
            Split::Frontmatter { yaml, body } => match parse_frontmatter(yaml) {
                Ok((frontmatter, warning)) => Question {
                    warning,
                    ..frontmatter.into_question(body.trim())
                },
                Err(err) => Question {
                    warning: Some(format!(
                        "the frontmatter is not valid ({err}), so the whole file is shown as the question"
                    )),
                    ..Question::plain(normalized.trim())
                },
            },
        };
        if question.text.is_empty() {
            let note = if normalized.trim().is_empty() {
                "the question file is empty"
            } else {
                "the question file has no question text after the frontmatter"
            };
            add_warning(&mut question.warning, note);
        }
        question
    }

    /// Reads a question file's bytes, however big or broken: invalid UTF-8 is replaced, and a
    /// file over [`MAX_QUESTION_BYTES`] is cut (on a character boundary) with a note in
    /// [`Question::warning`].
    pub fn parse_bounded(bytes: &[u8]) -> Question {
        if bytes.len() <= MAX_QUESTION_BYTES {
            return Question::parse(&String::from_utf8_lossy(bytes));
        }
        let mut cut = MAX_QUESTION_BYTES;
        // Back off past UTF-8 continuation bytes (at most three) so the cut does not split a
        // character into a replacement glyph.
        while cut > MAX_QUESTION_BYTES - 4 && is_continuation(bytes[cut]) {
            cut -= 1;
        }
        let mut question = Question::parse(&String::from_utf8_lossy(&bytes[..cut]));
        let note = format!(
            "[question cut: {} bytes, showing the first {}]",
            group_thousands(bytes.len()),
            group_thousands(cut)
        );
        add_warning(&mut question.warning, &note);
        question
    }

    /// Writes the question in the file format [`Question::parse`] reads (used by `ralph ask`).
    ///
    /// The frontmatter is left out when there is nothing to put in it. `warning` is not
    /// written. For a question without a warning whose text is trimmed and non-empty,
    /// `Question::parse(&q.to_markdown()) == q`.
    pub fn to_markdown(&self) -> String {
        let frontmatter = FrontmatterOut {
            options: self
                .options
                .iter()
                .map(|option| match &option.description {
                    None => OptionOut::Label(&option.label),
                    Some(description) => OptionOut::Full {
                        label: &option.label,
                        description,
                    },
                })
                .collect(),
            multi_select: self.multi_select,
            default: self.default.as_deref(),
            context: self.context.as_deref(),
        };
        let empty = frontmatter.options.is_empty()
            && !frontmatter.multi_select
            && frontmatter.default.is_none()
            && frontmatter.context.is_none();
        // A text that itself starts with a `---` line would be read back as frontmatter, and
        // one that starts with a byte-order mark would lose it, so both get an explicit (empty)
        // frontmatter in front.
        if empty
            && !crate::frontmatter::is_fence(self.text.split('\n').next().unwrap_or_default())
            && !self.text.starts_with('\u{feff}')
        {
            return format!("{}\n", self.text);
        }
        let mut yaml = if empty {
            String::new()
        } else {
            // Serializing plain strings, bools and options cannot fail.
            serde_yaml_ng::to_string(&frontmatter).unwrap_or_default()
        };
        // The YAML writer may end on a line break of its own (U+2028 at the end of a block
        // scalar) rather than a newline, and the closing fence must start a line.
        if !yaml.is_empty() && !yaml.ends_with('\n') {
            yaml.push('\n');
        }
        format!("---\n{yaml}---\n{}\n", self.text)
    }

    /// The option a 1-based number refers to, as typed by a person (`1` is the first).
    pub fn resolve_option(&self, n: usize) -> Option<&QuestionOption> {
        n.checked_sub(1).and_then(|i| self.options.get(i))
    }

    /// The options a typed answer picks, when it is option numbers and nothing else: one
    /// (`2`), or for a multi-select question several (`1,3` or `1 3`). One rule for every
    /// such answer: numbers (digits, separated by commas or spaces) are always picks, and a
    /// pick that names no option ([`Picks::OutOfRange`], however big the number) or several
    /// for a question that takes one ([`Picks::NotOne`]) is refused, never sent as text. `None`
    /// for any other text, and for any text when the question offers no options. Each way of
    /// answering (`ralph answer`, the plain view, the panel's list) reads numbers this way.
    pub fn picks(&self, text: &str) -> Option<Picks> {
        if self.options.is_empty() {
            return None;
        }
        let words: Vec<&str> = text
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|s| !s.is_empty())
            .collect();
        if words.is_empty() || !words.iter().all(|w| w.bytes().all(|b| b.is_ascii_digit())) {
            return None;
        }
        if words.len() > 1 && !self.multi_select {
            return Some(Picks::NotOne(words.len()));
        }
        let mut labels: Vec<&str> = Vec::new();
        for word in words {
            let Some(option) = word.parse().ok().and_then(|n| self.resolve_option(n)) else {
                return Some(Picks::OutOfRange(word.to_owned()));
            };
            if !labels.contains(&option.label.as_str()) {
                labels.push(&option.label);
            }
        }
        Some(Picks::Labels(crate::desk::encode(&labels, "")))
    }

    /// The 0-based index of the option whose label is the default answer, if there is one.
    pub fn default_option(&self) -> Option<usize> {
        let default = self.default.as_deref()?;
        self.options.iter().position(|o| o.label == default)
    }
}

/// What option numbers typed as an answer pick: [`Question::picks`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Picks {
    /// The labels of the options picked, in the order typed, one per line
    /// ([`crate::desk::encode`]).
    Labels(String),
    /// A number that is no option's, as typed (it may be too big for any number type).
    OutOfRange(String),
    /// Several numbers (how many) for a question that takes one option.
    NotOne(usize),
}

/// Drops a byte-order mark and turns CRLF line ends into LF, so line numbers and fences work
/// the same for files written on any platform.
fn normalize(raw: &str) -> String {
    raw.strip_prefix('\u{feff}')
        .unwrap_or(raw)
        .replace("\r\n", "\n")
}

enum Split<'a> {
    Plain,
    Unclosed,
    /// `yaml` includes the opening `---` line: YAML reads it as a document start, and error
    /// line numbers then match the file's.
    Frontmatter {
        yaml: &'a str,
        body: &'a str,
    },
}

fn split_frontmatter(text: &str) -> Split<'_> {
    match crate::frontmatter::split(text, true) {
        crate::frontmatter::Found::None => Split::Plain,
        crate::frontmatter::Found::Unclosed => Split::Unclosed,
        crate::frontmatter::Found::At(f) => Split::Frontmatter {
            yaml: &text[..f.close_start],
            body: &text[f.body_start..],
        },
    }
}

/// Reads the frontmatter; the `String` is a warning about keys it ignored.
fn parse_frontmatter(yaml: &str) -> Result<(Frontmatter, Option<String>), serde_yaml_ng::Error> {
    // An empty or comment-only frontmatter is a null document: no fields at all.
    let frontmatter: Option<Frontmatter> = serde_yaml_ng::from_str(yaml)?;
    let frontmatter = frontmatter.unwrap_or_default();
    let warning = (!frontmatter.extra.is_empty()).then(|| {
        let keys: Vec<&str> = frontmatter.extra.keys().map(String::as_str).collect();
        format!(
            "ignored unknown frontmatter keys: {} (known: options, multi_select, default, context)",
            keys.join(", ")
        )
    });
    Ok((frontmatter, warning))
}

fn add_warning(warning: &mut Option<String>, note: &str) {
    match warning {
        Some(existing) => {
            existing.push('\n');
            existing.push_str(note);
        }
        None => *warning = Some(note.to_owned()),
    }
}

fn is_continuation(byte: u8) -> bool {
    byte & 0xC0 == 0x80
}

/// `52428800` -> `52,428,800`.
fn group_thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The frontmatter as the agent wrote it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Frontmatter {
    options: Vec<OptionIn>,
    // Agents trained on other tools' question formats write these spellings too.
    #[serde(alias = "multiSelect", alias = "multi-select")]
    multi_select: bool,
    default: Option<DefaultIn>,
    context: Option<Scalar>,
    /// Used as the question text when the body is empty.
    question: Option<Scalar>,
    #[serde(flatten)]
    extra: BTreeMap<String, IgnoredAny>,
}

impl Frontmatter {
    fn into_question(self, body: &str) -> Question {
        let text = match self.question {
            Some(Scalar(question)) if body.is_empty() => question.trim().to_owned(),
            _ => body.to_owned(),
        };
        Question {
            text,
            options: self.options.into_iter().map(|o| o.0).collect(),
            multi_select: self.multi_select,
            default: self.default.map(|d| d.0),
            context: self.context.map(|c| c.0),
            warning: None,
        }
    }
}

/// A YAML scalar read as text: agents write `options: [1, 2]` or `default: yes` and mean the
/// words, not a number or a boolean.
#[derive(Debug)]
struct Scalar(String);

struct ScalarVisitor;

impl Visitor<'_> for ScalarVisitor {
    type Value = Scalar;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("text")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar, E> {
        Ok(Scalar(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Scalar, E> {
        Ok(Scalar(v))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Scalar, E> {
        Ok(Scalar(v.to_string()))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar, E> {
        Ok(Scalar(v.to_string()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar, E> {
        Ok(Scalar(v.to_string()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scalar, E> {
        Ok(Scalar(v.to_string()))
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ScalarVisitor)
    }
}

/// `default:` is text, or a list of texts for a multi-select default (joined with ", ", the
/// way a multi-select answer is written).
#[derive(Debug)]
struct DefaultIn(String);

impl<'de> Deserialize<'de> for DefaultIn {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DefaultVisitor;
        impl<'de> Visitor<'de> for DefaultVisitor {
            type Value = DefaultIn;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("text or a list of texts")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<DefaultIn, E> {
                ScalarVisitor.visit_str(v).map(|s| DefaultIn(s.0))
            }

            fn visit_string<E: de::Error>(self, v: String) -> Result<DefaultIn, E> {
                Ok(DefaultIn(v))
            }

            fn visit_bool<E: de::Error>(self, v: bool) -> Result<DefaultIn, E> {
                ScalarVisitor.visit_bool(v).map(|s| DefaultIn(s.0))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<DefaultIn, E> {
                ScalarVisitor.visit_i64(v).map(|s| DefaultIn(s.0))
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<DefaultIn, E> {
                ScalarVisitor.visit_u64(v).map(|s| DefaultIn(s.0))
            }

            fn visit_f64<E: de::Error>(self, v: f64) -> Result<DefaultIn, E> {
                ScalarVisitor.visit_f64(v).map(|s| DefaultIn(s.0))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<DefaultIn, A::Error> {
                let mut parts = Vec::new();
                while let Some(Scalar(part)) = seq.next_element()? {
                    parts.push(part);
                }
                Ok(DefaultIn(parts.join(", ")))
            }
        }
        deserializer.deserialize_any(DefaultVisitor)
    }
}

/// One entry of `options:`: a bare label, `{label, description}`, or the one-key shorthand
/// `Redis: in-memory, persistent`.
#[derive(Debug)]
struct OptionIn(QuestionOption);

impl<'de> Deserialize<'de> for OptionIn {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct OptionVisitor;
        impl<'de> Visitor<'de> for OptionVisitor {
            type Value = OptionIn;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an option: a label, or a map with `label` and `description`")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<OptionIn, E> {
                Ok(OptionIn(QuestionOption::new(v)))
            }

            fn visit_bool<E: de::Error>(self, v: bool) -> Result<OptionIn, E> {
                Ok(OptionIn(QuestionOption::new(v.to_string())))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<OptionIn, E> {
                Ok(OptionIn(QuestionOption::new(v.to_string())))
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<OptionIn, E> {
                Ok(OptionIn(QuestionOption::new(v.to_string())))
            }

            fn visit_f64<E: de::Error>(self, v: f64) -> Result<OptionIn, E> {
                Ok(OptionIn(QuestionOption::new(v.to_string())))
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<OptionIn, A::Error> {
                let mut label = None;
                let mut description = None;
                let mut others: Vec<(String, Option<String>)> = Vec::new();
                while let Some(Scalar(key)) = map.next_key()? {
                    let value: Option<Scalar> = map.next_value()?;
                    let value = value.map(|v| v.0);
                    match key.as_str() {
                        "label" => label = value,
                        "description" => description = value,
                        _ => others.push((key, value)),
                    }
                }
                match (label, others.len()) {
                    (Some(label), _) => Ok(OptionIn(QuestionOption { label, description })),
                    (None, 1) if description.is_none() => {
                        let (label, description) = others.remove(0);
                        Ok(OptionIn(QuestionOption { label, description }))
                    }
                    (None, _) => Err(de::Error::missing_field("label")),
                }
            }
        }
        deserializer.deserialize_any(OptionVisitor)
    }
}

/// The frontmatter as `to_markdown` writes it: only what is set, options as bare labels
/// unless they have a description.
#[derive(Serialize)]
struct FrontmatterOut<'a> {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    options: Vec<OptionOut<'a>>,
    #[serde(skip_serializing_if = "is_false")]
    multi_select: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    default: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    context: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum OptionOut<'a> {
    Label(&'a str),
    Full {
        label: &'a str,
        description: &'a str,
    },
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(labels: &[&str]) -> Vec<QuestionOption> {
        labels.iter().map(|l| QuestionOption::new(*l)).collect()
    }

    #[test]
    fn plain_markdown_is_the_whole_question() {
        let q = Question::parse("\n# Cache?\n\nShould we use *Redis*?\n\n");
        assert_eq!(q, Question::plain("# Cache?\n\nShould we use *Redis*?"));
    }

    #[test]
    fn frontmatter_adds_structure() {
        let raw = "---\n\
                   options: [Redis, Memcached]\n\
                   multi_select: false\n\
                   default: Redis\n\
                   context: Both are in Cargo.toml.\n\
                   ---\n\
                   Should the session cache use Redis or Memcached?\n";
        let q = Question::parse(raw);
        assert_eq!(
            q,
            Question {
                text: "Should the session cache use Redis or Memcached?".into(),
                options: opts(&["Redis", "Memcached"]),
                multi_select: false,
                default: Some("Redis".into()),
                context: Some("Both are in Cargo.toml.".into()),
                warning: None,
            }
        );
        assert_eq!(q.default_option(), Some(0));
    }

    #[test]
    fn options_may_be_maps() {
        let raw = "---\n\
                   options:\n  \
                     - label: Redis\n    \
                       description: in-memory, persistent\n  \
                     - label: Memcached\n  \
                     - Sled: embedded\n  \
                     - SQLite\n\
                   multi_select: true\n\
                   ---\nWhich stores?";
        let q = Question::parse(raw);
        assert_eq!(q.warning, None);
        assert!(q.multi_select);
        assert_eq!(
            q.options,
            vec![
                QuestionOption {
                    label: "Redis".into(),
                    description: Some("in-memory, persistent".into())
                },
                QuestionOption::new("Memcached"),
                QuestionOption {
                    label: "Sled".into(),
                    description: Some("embedded".into())
                },
                QuestionOption::new("SQLite"),
            ]
        );
    }

    #[test]
    fn scalars_read_as_text() {
        let q = Question::parse("---\noptions: [1, 2, true]\ndefault: 2\n---\nHow many?");
        assert_eq!(q.options, opts(&["1", "2", "true"]));
        assert_eq!(q.default.as_deref(), Some("2"));
    }

    #[test]
    fn multi_select_default_list_is_joined_and_camel_case_is_accepted() {
        let q = Question::parse("---\nmultiSelect: true\ndefault: [a, b]\n---\nPick");
        assert!(q.multi_select);
        assert_eq!(q.default.as_deref(), Some("a, b"));
        assert_eq!(q.warning, None);
    }

    #[test]
    fn invalid_frontmatter_becomes_text_with_a_warning_naming_the_line() {
        let raw = "---\noptions: [Redis\ndefault: Redis\n---\nWhich cache?\n";
        let q = Question::parse(raw);
        assert_eq!(q.text, raw.trim());
        assert!(q.options.is_empty());
        let warning = q.warning.unwrap();
        assert!(warning.contains("frontmatter is not valid"), "{warning}");
        assert!(warning.contains("line 3"), "{warning}");
    }

    #[test]
    fn wrong_type_in_frontmatter_names_the_line() {
        let q = Question::parse("---\ncontext: ok\nmulti_select: maybe\n---\nQ?");
        let warning = q.warning.unwrap();
        assert!(warning.contains("multi_select"), "{warning}");
        assert!(warning.contains("line 3"), "{warning}");
        assert!(q.text.starts_with("---\ncontext"));
    }

    #[test]
    fn option_map_without_label_is_invalid() {
        let q = Question::parse("---\noptions:\n  - description: x\n    other: y\n---\nQ?");
        let warning = q.warning.unwrap();
        assert!(warning.contains("label"), "{warning}");
    }

    #[test]
    fn unclosed_frontmatter_is_text_with_a_warning() {
        let q = Question::parse("---\noptions: [a]\nWhich?");
        assert_eq!(q.text, "---\noptions: [a]\nWhich?");
        assert!(q.warning.unwrap().contains("never closed"));
    }

    #[test]
    fn unknown_keys_are_ignored_with_a_warning() {
        let q = Question::parse("---\ntitle: Cache\noptions: [a]\n---\nWhich?");
        assert_eq!(q.options, opts(&["a"]));
        assert_eq!(q.text, "Which?");
        assert!(q.warning.unwrap().contains("title"));
    }

    #[test]
    fn crlf_line_ends_are_read_like_lf() {
        let q = Question::parse("---\r\noptions: [a, b]\r\n---\r\nWhich?\r\nReally?\r\n");
        assert_eq!(q.options, opts(&["a", "b"]));
        assert_eq!(q.text, "Which?\nReally?");
        assert_eq!(q.warning, None);
    }

    #[test]
    fn byte_order_mark_is_dropped() {
        let q = Question::parse("\u{feff}---\ndefault: a\n---\nWhich?");
        assert_eq!(q.default.as_deref(), Some("a"));
        assert_eq!(q.text, "Which?");
        assert_eq!(Question::parse("\u{feff}Hi").text, "Hi");
    }

    #[test]
    fn empty_file_is_an_empty_question_with_a_warning() {
        for raw in ["", "  \n\n", "\u{feff}"] {
            let q = Question::parse(raw);
            assert_eq!(q.text, "");
            assert_eq!(q.warning.as_deref(), Some("the question file is empty"));
        }
    }

    #[test]
    fn frontmatter_only_file_keeps_the_structure_and_warns() {
        let q = Question::parse("---\noptions: [a, b]\n---\n");
        assert_eq!(q.options, opts(&["a", "b"]));
        assert_eq!(q.text, "");
        assert!(q.warning.unwrap().contains("no question text"));
    }

    #[test]
    fn frontmatter_question_key_is_the_text_when_the_body_is_empty() {
        let q = Question::parse("---\nquestion: Which cache?\noptions: [a]\n---\n");
        assert_eq!(q.text, "Which cache?");
        assert_eq!(q.warning, None);
    }

    #[test]
    fn empty_frontmatter_is_fine() {
        let q = Question::parse("---\n---\nHi");
        assert_eq!(q, Question::plain("Hi"));
        let q = Question::parse("---\n# just a comment\n---\nHi");
        assert_eq!(q, Question::plain("Hi"));
    }

    #[test]
    fn a_later_rule_is_not_a_fence() {
        let q = Question::parse("Intro\n---\nMore");
        assert_eq!(q, Question::plain("Intro\n---\nMore"));
    }

    #[test]
    fn resolve_option_is_one_based() {
        let q = Question {
            options: opts(&["a", "b"]),
            ..Question::plain("Q")
        };
        assert_eq!(q.resolve_option(0), None);
        assert_eq!(q.resolve_option(1).unwrap().label, "a");
        assert_eq!(q.resolve_option(2).unwrap().label, "b");
        assert_eq!(q.resolve_option(3), None);
    }

    #[test]
    fn picks_reads_option_numbers_and_nothing_else() {
        let one = Question {
            options: opts(&["Redis", "Memcached", "none"]),
            ..Question::plain("Q")
        };
        let labels = |s: &str| Some(Picks::Labels(s.into()));
        assert_eq!(one.picks("2"), labels("Memcached"));
        assert_eq!(one.picks(" 3\n"), labels("none"));
        assert_eq!(one.picks("4"), Some(Picks::OutOfRange("4".into())));
        assert_eq!(one.picks("0"), Some(Picks::OutOfRange("0".into())));
        // Regression (issue 25, item 10): a number too big for any option, and several
        // numbers for a question that takes one, were sent as the answer's text.
        let huge = "99999999999999999999";
        assert_eq!(one.picks(huge), Some(Picks::OutOfRange(huge.into())));
        assert_eq!(one.picks("1,3"), Some(Picks::NotOne(2)));
        for text in ["", "Redis", "2 nodes", "-1", "1.5"] {
            assert_eq!(one.picks(text), None, "{text:?}");
        }
        assert_eq!(Question::plain("Q").picks("1"), None);

        let many = Question {
            multi_select: true,
            ..one
        };
        assert_eq!(many.picks("1,3"), labels("Redis\nnone"));
        assert_eq!(many.picks("3 1, 3"), labels("none\nRedis"));
        assert_eq!(many.picks("1,5"), Some(Picks::OutOfRange("5".into())));
        assert_eq!(many.picks(" , "), None);
    }

    #[test]
    fn parse_bounded_cuts_big_files_on_a_char_boundary() {
        // "é" is two bytes; an odd prefix puts the cap in the middle of one.
        let mut bytes = b"x".to_vec();
        while bytes.len() < MAX_QUESTION_BYTES + 10 {
            bytes.extend_from_slice("é".as_bytes());
        }
        let q = Question::parse_bounded(&bytes);
        assert!(!q.text.contains('\u{fffd}'));
        assert_eq!(q.text.len(), MAX_QUESTION_BYTES - 1);
        let warning = q.warning.unwrap();
        assert_eq!(
            warning,
            format!(
                "[question cut: {} bytes, showing the first 262,143]",
                group_thousands(bytes.len())
            )
        );
    }

    #[test]
    fn parse_bounded_note_reads_like_the_spec() {
        let bytes = vec![b'a'; 52_428_800];
        let q = Question::parse_bounded(&bytes);
        assert_eq!(
            q.warning.as_deref(),
            Some("[question cut: 52,428,800 bytes, showing the first 262,144]")
        );
        assert_eq!(q.text.len(), MAX_QUESTION_BYTES);
    }

    #[test]
    fn parse_bounded_replaces_invalid_utf8() {
        let q = Question::parse_bounded(b"caf\xff?");
        assert_eq!(q.text, "caf\u{fffd}?");
        assert_eq!(q.warning, None);
    }

    #[test]
    fn group_thousands_groups() {
        assert_eq!(group_thousands(0), "0");
        assert_eq!(group_thousands(999), "999");
        assert_eq!(group_thousands(1000), "1,000");
        assert_eq!(group_thousands(262_144), "262,144");
        assert_eq!(group_thousands(52_428_800), "52,428,800");
    }

    #[test]
    fn plain_question_writes_no_frontmatter() {
        assert_eq!(Question::plain("Why?").to_markdown(), "Why?\n");
    }

    #[test]
    fn to_markdown_writes_the_documented_format() {
        let q = Question {
            options: vec![
                QuestionOption::new("Redis"),
                QuestionOption {
                    label: "Memcached".into(),
                    description: Some("simpler".into()),
                },
            ],
            default: Some("Redis".into()),
            ..Question::plain("Which?")
        };
        assert_eq!(
            q.to_markdown(),
            "---\noptions:\n- Redis\n- label: Memcached\n  description: simpler\ndefault: Redis\n---\nWhich?\n"
        );
    }

    const TRICKY: &[&str] = &[
        "plain",
        "with: colon",
        "key: value: more",
        "\"double quoted\"",
        "'single'",
        "it's",
        "# not a comment",
        "a # b",
        "line one\nline two",
        "trailing newline\n",
        "$(rm -rf ~)",
        "`backticks`",
        "- dash",
        "---",
        "...",
        "[flow, seq]",
        "{flow: map}",
        "yes",
        "no",
        "null",
        "~",
        "1",
        "1.10",
        "0x1F",
        " leading space",
        "trailing space ",
        "tab\there",
        "&anchor",
        "*alias",
        "!tag",
        "%directive",
        "@at",
        "|pipe",
        ">fold",
        "ünïcödé ✓ 日本",
        "",
    ];

    fn assert_round_trips(q: &Question) {
        let written = q.to_markdown();
        assert_eq!(&Question::parse(&written), q, "written as:\n{written}");
    }

    #[test]
    fn to_markdown_round_trips_tricky_labels() {
        for (i, label) in TRICKY.iter().enumerate() {
            let other = TRICKY[(i + 7) % TRICKY.len()];
            let q = Question {
                options: vec![
                    QuestionOption::new(*label),
                    QuestionOption {
                        label: other.to_string(),
                        description: Some(label.to_string()),
                    },
                ],
                multi_select: i % 2 == 0,
                default: Some(label.to_string()),
                context: Some(other.to_string()),
                ..Question::plain("Which one?")
            };
            assert_round_trips(&q);
        }
    }

    #[test]
    fn to_markdown_round_trips_tricky_texts() {
        for text in [
            "---\nlooks like frontmatter\n---\nbut is text",
            "---",
            "# Heading\n\n- list\n\n```sh\n$(rm -rf ~)\n```",
            "Question with: colon?",
            "...\nstarts with dots",
        ] {
            assert_round_trips(&Question::plain(text));
            assert_round_trips(&Question {
                options: vec![QuestionOption::new("a")],
                ..Question::plain(text)
            });
        }
    }

    /// A small deterministic fuzz: random questions built from characters YAML and markdown
    /// care about must survive a write and a read.
    #[test]
    fn to_markdown_round_trips_generated_questions() {
        const ALPHABET: &[char] = &[
            'a', 'Z', '0', '9', ' ', ':', '#', '-', '\'', '"', '\n', '\t', '$', '(', ')', '~', '[',
            ']', '{', '}', ',', '&', '*', '!', '|', '>', '%', '@', '`', '?', '.', '\\', 'é', '✓',
        ];
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move |bound: usize| {
            // xorshift64: enough randomness for a test, no dependency.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % bound as u64) as usize
        };
        let word = |next: &mut dyn FnMut(usize) -> usize| -> String {
            let len = next(12);
            (0..len).map(|_| ALPHABET[next(ALPHABET.len())]).collect()
        };
        for _ in 0..500 {
            let options = (0..next(4))
                .map(|_| QuestionOption {
                    label: word(&mut next),
                    description: (next(2) == 0).then(|| word(&mut next)),
                })
                .collect();
            let mut text = word(&mut next).trim().to_owned();
            if text.is_empty() {
                text = "Q?".into();
            }
            let q = Question {
                text,
                options,
                multi_select: next(2) == 0,
                default: (next(2) == 0).then(|| word(&mut next)),
                context: (next(2) == 0).then(|| word(&mut next)),
                warning: None,
            };
            assert_round_trips(&q);
        }
    }

    #[test]
    fn question_serializes_without_an_absent_warning() {
        let json = serde_json::to_string(&Question::plain("Q")).unwrap();
        assert_eq!(
            json,
            r#"{"text":"Q","options":[],"multi_select":false,"default":null,"context":null}"#
        );
    }
}
