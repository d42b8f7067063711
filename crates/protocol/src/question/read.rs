//! Reading `question.md`: never fails; what was wrong goes in [`Question::warning`].

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::{MAX_QUESTION_BYTES, Question, QuestionOption};

impl Question {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::question::opts;

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
}
