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

/// The criteria of a whole task file's `text` (frontmatter, then the body); `None` when it has
/// no closed frontmatter, so no body to read them from. What the fleet's rows count: they need
/// the checklist, not the rest of the task file's checks.
pub fn criteria_of(text: &str) -> Option<Vec<Criterion>> {
    match crate::frontmatter::split(text, false) {
        crate::frontmatter::Found::At(f) => {
            let first_body_line = text[..f.body_start].matches('\n').count() + 1;
            Some(parse_criteria(&text[f.body_start..], first_body_line))
        }
        crate::frontmatter::Found::None | crate::frontmatter::Found::Unclosed => None,
    }
}

/// Reads the criteria of a markdown body whose first line is line `first_body_line` of the
/// file (1-based), so the returned lines are file lines.
///
/// Used by the task file's parser (`ralph_loop::task::TaskFile`), by the loop to re-read the
/// checklist after the agent has edited the file, and through [`criteria_of`] by the fleet's
/// rows.
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

#[cfg(test)]
mod tests {
    use super::{Criterion, criteria_of};

    #[test]
    fn a_task_file_s_criteria_are_its_body_s_with_file_lines_and_none_without_frontmatter() {
        let text = "---\ntask: t\n---\n\n- [x] done\n- [ ] open\n```\n- [ ] in code\n```\n";
        let criterion = |text: &str, checked, line| Criterion {
            text: text.into(),
            checked,
            line,
        };
        assert_eq!(
            criteria_of(text),
            Some(vec![
                criterion("done", true, 5),
                criterion("open", false, 6)
            ])
        );
        assert_eq!(criteria_of("- [ ] no frontmatter\n"), None);
        assert_eq!(criteria_of("---\ntask: t\n- [ ] unclosed\n"), None);
    }
}
