//! The checklist in the markdown body: every `- [ ]` / `- [x]` item is a criterion.
//!
//! The body is parsed as CommonMark with GitHub task lists, so only real list items count:
//! a checkbox in a fenced or indented code block or in an HTML block is text to the parser,
//! and one inside a blockquote (usually a quote of some other file) is skipped on purpose.
//! Nested items count like any other. A criterion's text is its first paragraph with the
//! inline markup flattened (`**bold**` → `bold`, links → their text, code spans → their code);
//! nested lists and later paragraphs of the item are not part of it.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use serde::{Deserialize, Serialize};

/// One checkbox item of the body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Criterion {
    /// The item's text as plain text, whitespace collapsed.
    pub text: String,
    /// Whether the box is ticked (`[x]` or `[X]`).
    pub checked: bool,
    /// The 1-based line of the item's list marker, in the whole file.
    pub line: usize,
}

/// Reads the criteria of a markdown body whose first line is line `first_body_line` of the
/// file (1-based), so the returned lines are file lines.
///
/// Used by [`TaskFile::parse`](super::TaskFile::parse), and by the loop to re-read the
/// checklist after the agent has edited the file.
pub fn parse_criteria(body: &str, first_body_line: usize) -> Vec<Criterion> {
    let lines = LineIndex::new(body);
    let mut criteria: Vec<Criterion> = Vec::new();
    // Start offsets of the list items we are inside, innermost last.
    let mut items: Vec<usize> = Vec::new();
    let mut quote_depth = 0usize;
    // The criterion whose text is being gathered, if any.
    let mut gathering: Option<usize> = None;

    let parser = Parser::new_ext(body, Options::ENABLE_TASKLISTS).into_offset_iter();
    for (event, range) in parser {
        match event {
            Event::Start(Tag::BlockQuote(_)) => {
                quote_depth += 1;
                gathering = None;
            }
            Event::End(TagEnd::BlockQuote(_)) => quote_depth = quote_depth.saturating_sub(1),
            Event::Start(Tag::Item) => {
                items.push(range.start);
                gathering = None;
            }
            Event::End(TagEnd::Item) => {
                items.pop();
                gathering = None;
            }
            Event::TaskListMarker(checked) if quote_depth == 0 => {
                let start = items.last().copied().unwrap_or(range.start);
                criteria.push(Criterion {
                    text: String::new(),
                    checked,
                    line: first_body_line + lines.line_of(start),
                });
                gathering = Some(criteria.len() - 1);
            }
            Event::Text(text) | Event::Code(text) | Event::InlineMath(text) => {
                if let Some(i) = gathering {
                    criteria[i].text.push_str(&text);
                }
            }
            Event::SoftBreak | Event::HardBreak => {
                if let Some(i) = gathering {
                    criteria[i].text.push(' ');
                }
            }
            // Inline markup (emphasis, links, images' alt text) keeps gathering; a new block
            // inside the item or the end of its first paragraph ends the criterion's text.
            Event::Start(
                Tag::Paragraph
                | Tag::Emphasis
                | Tag::Strong
                | Tag::Strikethrough
                | Tag::Link { .. }
                | Tag::Image { .. }
                | Tag::Superscript
                | Tag::Subscript,
            ) => {}
            Event::Start(_) | Event::End(TagEnd::Paragraph) => gathering = None,
            _ => {}
        }
    }
    for criterion in &mut criteria {
        criterion.text = criterion
            .text
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
    }
    criteria
}

/// Maps byte offsets to 0-based line numbers.
struct LineIndex {
    newlines: Vec<usize>,
}

impl LineIndex {
    fn new(text: &str) -> LineIndex {
        LineIndex {
            newlines: text
                .bytes()
                .enumerate()
                .filter(|(_, b)| *b == b'\n')
                .map(|(i, _)| i)
                .collect(),
        }
    }

    /// How many lines precede the one holding `offset`.
    fn line_of(&self, offset: usize) -> usize {
        self.newlines.partition_point(|&nl| nl < offset)
    }
}
