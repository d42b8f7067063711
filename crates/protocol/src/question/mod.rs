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
//!
//! The file's parts live by idea: `read.rs` (the file in, never failing),
//! `write.rs` (the file out, for `ralph ask`) and `picks.rs` (option numbers typed as an
//! answer).

use serde::{Deserialize, Serialize};

mod picks;
mod read;
mod write;

pub use picks::Picks;

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

    /// The option a 1-based number refers to, as typed by a person (`1` is the first).
    pub fn resolve_option(&self, n: usize) -> Option<&QuestionOption> {
        n.checked_sub(1).and_then(|i| self.options.get(i))
    }

    /// The 0-based index of the option whose label is the default answer, if there is one.
    pub fn default_option(&self) -> Option<usize> {
        let default = self.default.as_deref()?;
        self.options.iter().position(|o| o.label == default)
    }
}

/// What the agent goes on with when nobody answers a question whose default is `default`:
/// `its default (Redis)` or `its best guess`, in every front end's words (the label cleaned
/// and on one line).
pub fn fallback_words(default: Option<&str>) -> String {
    match default {
        Some(default) => format!(
            "its default ({})",
            crate::one_line(&crate::clean(default), FALLBACK_LABEL_CHARS)
        ),
        None => "its best guess".to_owned(),
    }
}

/// The most of a default's label [`fallback_words`] shows.
const FALLBACK_LABEL_CHARS: usize = 500;

#[cfg(test)]
pub(crate) fn opts(labels: &[&str]) -> Vec<QuestionOption> {
    labels.iter().map(|l| QuestionOption::new(*l)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
