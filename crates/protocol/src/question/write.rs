//! Writing `question.md` (for `ralph ask`): the format [`Question::parse`] reads back.

use serde::Serialize;

use super::Question;

impl Question {
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
    use crate::question::QuestionOption;

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
