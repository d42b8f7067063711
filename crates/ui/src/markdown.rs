//! Markdown to styled, wrappable lines, for the agent's question.
//!
//! pulldown-cmark reads the markdown; this module turns its events into [`Para`]s: headings
//! bold and underlined, emphasis italic or bold, lists with bullets or numbers and a hanging
//! indent, code in the code style (blocks indented), links as `text <url>`, quotes behind a
//! bar, tables with aligned columns (laid out at wrap time: [`Table`]). Anything it does not
//! know (HTML, footnotes) is shown as its text. The input must
//! already be sanitized: this module decides looks, not safety.

use pulldown_cmark::{Alignment, CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use ratatui::style::{Modifier, Style};
use ratatui::text::Span;

use crate::theme::Theme;
use crate::wrap::{Align, Para, Table, spans_width};

/// Renders `markdown` into paragraphs styled with `theme`.
pub(crate) fn render(markdown: &str, theme: &Theme) -> Vec<Para> {
    let options =
        Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS | Options::ENABLE_TABLES;
    let mut renderer = Renderer {
        theme,
        out: Vec::new(),
        spans: Vec::new(),
        styles: Vec::new(),
        lists: Vec::new(),
        items: Vec::new(),
        quote_depth: 0,
        code_block: false,
        links: Vec::new(),
        blank_pending: false,
        table: None,
    };
    for event in Parser::new_ext(markdown, options) {
        renderer.event(event);
    }
    renderer.flush();
    renderer.out
}

/// Renders `markdown` as plain text, wrapped to `width` columns: the lines a terminal shows
/// without styles (`ralph status`, plain lines, the scrollback), with lists, quotes, rules and
/// tables laid out as the panel lays them out, and no markup left over. Trailing blanks are
/// trimmed; so are blank lines at either end. The input must already be sanitized.
pub(crate) fn plain_lines(markdown: &str, width: u16) -> Vec<String> {
    let paras = render(markdown, &Theme::monochrome());
    let mut lines: Vec<String> = crate::wrap::wrap(&paras, width)
        .iter()
        .map(|l| l.to_string().trim_end().to_owned())
        .collect();
    while lines.last().is_some_and(String::is_empty) {
        lines.pop();
    }
    let first = lines
        .iter()
        .position(|l| !l.is_empty())
        .unwrap_or(lines.len());
    lines.drain(..first);
    lines
}

/// An open list item: its marker, until the item's first row is written, and its width,
/// which indents the item's further rows and anything nested in it.
struct Item {
    marker: Option<String>,
    width: usize,
}

struct Renderer<'t> {
    theme: &'t Theme,
    out: Vec<Para>,
    /// The row being collected.
    spans: Vec<Span<'static>>,
    /// Inline styles in effect (emphasis, strong, link, heading), innermost last.
    styles: Vec<Style>,
    /// Open lists: the next number of an ordered list, `None` for bullets.
    lists: Vec<Option<u64>>,
    items: Vec<Item>,
    quote_depth: usize,
    code_block: bool,
    /// Open links: the address and where the link text starts in `spans`.
    links: Vec<(String, usize)>,
    /// A block ended; the next block starts after an empty row.
    blank_pending: bool,
    /// The table being read: its rows so far, and the cells of the row being read.
    table: Option<(Table, Vec<Vec<Span<'static>>>)>,
}

impl Renderer<'_> {
    fn style(&self) -> Style {
        self.styles
            .iter()
            .fold(self.theme.text, |acc, style| acc.patch(*style))
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) if self.code_block => self.code_text(&text),
            Event::Text(text) | Event::Html(text) | Event::InlineHtml(text) => self.text(&text),
            Event::InlineMath(text) | Event::DisplayMath(text) => self.text(&text),
            Event::Code(code) => {
                let style = self.style().patch(self.theme.code);
                self.spans.push(Span::styled(code.into_string(), style));
            }
            Event::SoftBreak => self.text(" "),
            Event::HardBreak => self.flush(),
            Event::Rule => {
                self.block_start();
                let (first, _) = self.prefixes();
                self.out.push(Para {
                    first,
                    fill: Some(("─", self.theme.dim)),
                    ..Para::default()
                });
                self.blank_pending = true;
            }
            Event::TaskListMarker(done) => {
                self.spans.push(Span::styled(
                    if done { "[x] " } else { "[ ] " },
                    self.style(),
                ));
            }
            Event::FootnoteReference(label) => self.text(&format!("[^{label}]")),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph | Tag::HtmlBlock => self.block_start(),
            Tag::Heading { level, .. } => {
                self.block_start();
                let style = match level {
                    HeadingLevel::H1 | HeadingLevel::H2 => self.theme.heading,
                    _ => self.theme.heading.remove_modifier(Modifier::UNDERLINED),
                };
                self.styles.push(style);
            }
            Tag::BlockQuote(_) => {
                self.block_start();
                self.quote_depth += 1;
            }
            Tag::CodeBlock(kind) => {
                self.block_start();
                self.code_block = true;
                if let CodeBlockKind::Fenced(lang) = kind
                    && !lang.is_empty()
                {
                    let (first, _) = self.prefixes();
                    self.out.push(Para {
                        first,
                        spans: vec![Span::styled(format!("  {lang}"), self.theme.dim)],
                        ..Para::default()
                    });
                }
            }
            Tag::List(start) => {
                if self.lists.is_empty() {
                    self.block_start();
                } else {
                    // Text of the enclosing item goes on its own row before the nested list.
                    self.flush();
                }
                self.lists.push(start);
            }
            Tag::Item => {
                self.flush();
                if self.blank_pending {
                    self.out.push(Para::blank());
                    self.blank_pending = false;
                }
                let depth = self.lists.len();
                let marker = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        let marker = format!("{n}. ");
                        *n += 1;
                        marker
                    }
                    _ => match depth {
                        0 | 1 => "• ".to_owned(),
                        2 => "◦ ".to_owned(),
                        _ => "▪ ".to_owned(),
                    },
                };
                let width = spans_width(&[Span::raw(marker.as_str())]);
                self.items.push(Item {
                    marker: Some(marker),
                    width,
                });
            }
            Tag::Emphasis => self
                .styles
                .push(Style::new().add_modifier(Modifier::ITALIC)),
            Tag::Strong => self.styles.push(Style::new().add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => self
                .styles
                .push(Style::new().add_modifier(Modifier::CROSSED_OUT)),
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                self.styles.push(self.theme.link);
                self.links.push((dest_url.into_string(), self.spans.len()));
            }
            Tag::Superscript | Tag::Subscript => self.styles.push(Style::new()),
            Tag::FootnoteDefinition(label) => {
                self.block_start();
                self.text(&format!("[^{label}]: "));
            }
            Tag::Table(alignments) => {
                self.block_start();
                let align = alignments
                    .iter()
                    .map(|a| match a {
                        Alignment::None | Alignment::Left => Align::Left,
                        Alignment::Center => Align::Center,
                        Alignment::Right => Align::Right,
                    })
                    .collect();
                let table = Table {
                    align,
                    rows: Vec::new(),
                    rule: self.theme.dim,
                };
                self.table = Some((table, Vec::new()));
            }
            Tag::TableHead => self.styles.push(Style::new().add_modifier(Modifier::BOLD)),
            Tag::TableRow | Tag::TableCell => {}
            // Definition lists and metadata blocks are not enabled, so pulldown-cmark never
            // starts them; their text would still show if it did.
            Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::MetadataBlock(_) => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph | TagEnd::HtmlBlock | TagEnd::FootnoteDefinition => {
                self.block_end();
            }
            TagEnd::TableCell => {
                let cell = std::mem::take(&mut self.spans);
                let cell = self.quoted(cell);
                if let Some((_, row)) = &mut self.table {
                    row.push(cell);
                }
            }
            TagEnd::TableHead | TagEnd::TableRow => {
                if tag == TagEnd::TableHead {
                    self.styles.pop();
                }
                if let Some((table, row)) = &mut self.table {
                    table.rows.push(std::mem::take(row));
                }
            }
            TagEnd::Table => {
                if let Some((table, _)) = self.table.take() {
                    let (first, rest) = self.prefixes();
                    self.out.push(Para {
                        first,
                        rest,
                        table: Some(Box::new(table)),
                        ..Para::default()
                    });
                }
                self.blank_pending = true;
            }
            TagEnd::Heading(_) => {
                self.styles.pop();
                self.block_end();
            }
            TagEnd::BlockQuote(_) => {
                self.flush();
                self.quote_depth = self.quote_depth.saturating_sub(1);
                self.blank_pending = true;
            }
            TagEnd::CodeBlock => {
                self.code_block = false;
                self.blank_pending = true;
            }
            TagEnd::List(_) => {
                self.flush();
                self.lists.pop();
                if self.lists.is_empty() {
                    self.blank_pending = true;
                }
            }
            TagEnd::Item => {
                self.flush();
                self.items.pop();
            }
            TagEnd::Emphasis
            | TagEnd::Strong
            | TagEnd::Strikethrough
            | TagEnd::Superscript
            | TagEnd::Subscript => {
                self.styles.pop();
            }
            TagEnd::Link | TagEnd::Image => {
                self.styles.pop();
                if let Some((url, start)) = self.links.pop() {
                    let text: String = self.spans[start.min(self.spans.len())..]
                        .iter()
                        .map(|s| s.content.as_ref())
                        .collect();
                    // An autolink's text is its address; saying it twice is noise.
                    let bare = url.strip_prefix("mailto:").unwrap_or(&url);
                    if !url.is_empty() && text != url && text != bare {
                        self.spans
                            .push(Span::styled(format!(" <{url}>"), self.theme.dim));
                    }
                }
            }
            TagEnd::DefinitionList
            | TagEnd::DefinitionListTitle
            | TagEnd::DefinitionListDefinition
            | TagEnd::MetadataBlock(_) => {}
        }
    }

    /// A block begins: finish the row in progress and leave a blank row after the previous
    /// block.
    fn block_start(&mut self) {
        self.flush();
        if self.blank_pending && !self.out.is_empty() {
            let (_, rest) = self.prefixes();
            self.out.push(Para {
                first: rest,
                ..Para::default()
            });
        }
        self.blank_pending = false;
    }

    fn block_end(&mut self) {
        self.flush();
        self.blank_pending = true;
    }

    fn text(&mut self, text: &str) {
        let style = self.style();
        let mut lines = text.split('\n');
        if let Some(first) = lines.next()
            && !first.is_empty()
        {
            self.spans.push(Span::styled(first.to_owned(), style));
        }
        for line in lines {
            self.flush();
            if !line.is_empty() {
                self.spans.push(Span::styled(line.to_owned(), style));
            }
        }
    }

    fn code_text(&mut self, text: &str) {
        let style = self.theme.code;
        let text = text.strip_suffix('\n').unwrap_or(text);
        for line in text.split('\n') {
            let (first, rest) = self.prefixes();
            let mut first = first;
            first.push(Span::raw("  "));
            let mut rest = rest;
            rest.push(Span::raw("  "));
            self.out.push(Para {
                first,
                rest,
                spans: vec![Span::styled(line.to_owned(), style)],
                fill: None,
                table: None,
            });
        }
    }

    /// The prefixes for the next row: quote bars, then list indentation, with the current
    /// item's marker on its first row only.
    fn prefixes(&mut self) -> (Vec<Span<'static>>, Vec<Span<'static>>) {
        let mut first = Vec::new();
        let mut rest = Vec::new();
        if self.quote_depth > 0 {
            let bar = Span::styled("│ ".repeat(self.quote_depth), self.theme.quote);
            first.push(bar.clone());
            rest.push(bar);
        }
        let indent: usize = self.items.iter().map(|item| item.width).sum();
        let marker = self.items.last_mut().and_then(|item| item.marker.take());
        match marker {
            Some(marker) => {
                let outer = indent - spans_width(&[Span::raw(marker.as_str())]);
                first.push(Span::raw(" ".repeat(outer)));
                first.push(Span::styled(marker, self.theme.option_number));
            }
            None => first.push(Span::raw(" ".repeat(indent))),
        }
        rest.push(Span::raw(" ".repeat(indent)));
        (first, rest)
    }

    /// `spans` in the quote style (italic) inside a quote: quoted text, a table's cells
    /// included, is italic as well as behind a bar.
    fn quoted(&self, spans: Vec<Span<'static>>) -> Vec<Span<'static>> {
        if self.quote_depth == 0 {
            return spans;
        }
        let quote = self.theme.quote;
        spans
            .into_iter()
            .map(|s| {
                let style = s.style.patch(quote);
                s.style(style)
            })
            .collect()
    }

    /// Ends the row in progress, if it has anything in it. In a table the row is the cell's,
    /// and only the cell's end ends it.
    fn flush(&mut self) {
        if self.spans.is_empty() || self.table.is_some() {
            return;
        }
        let spans = std::mem::take(&mut self.spans);
        let spans = self.quoted(spans);
        let (mut first, rest) = self.prefixes();
        first.retain(|s| !s.content.is_empty());
        self.out.push(Para {
            first,
            rest,
            spans,
            fill: None,
            table: None,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wrap::wrap;

    fn rows(markdown: &str, width: u16) -> Vec<String> {
        wrap(&render(markdown, &Theme::monochrome()), width)
            .iter()
            .map(|l| l.to_string().trim_end().to_owned())
            .collect()
    }

    #[test]
    fn paragraphs_are_separated_by_a_blank_row() {
        assert_eq!(rows("one\ntwo\n\nthree", 40), ["one two", "", "three"]);
    }

    #[test]
    fn lists_get_bullets_numbers_and_hanging_indents() {
        let md = "- alpha beta gamma\n- two\n  - nested\n\n3. three\n4. four";
        assert_eq!(
            rows(md, 12),
            [
                "• alpha beta",
                "  gamma",
                "• two",
                "  ◦ nested",
                "",
                "3. three",
                "4. four"
            ]
        );
    }

    #[test]
    fn code_blocks_are_indented_and_keep_their_spacing() {
        let md = "Run:\n\n```sh\ncargo  test\n  --all\n```\nafter";
        assert_eq!(
            rows(md, 40),
            [
                "Run:",
                "",
                "  sh",
                "  cargo  test",
                "    --all",
                "",
                "after"
            ]
        );
    }

    #[test]
    fn links_show_their_address_once() {
        assert_eq!(
            rows("see [docs](https://x.io) or <https://y.io>", 80),
            ["see docs <https://x.io> or https://y.io"]
        );
    }

    #[test]
    fn headings_and_emphasis_are_styled() {
        let paras = render(
            "# Title\n\nsome *it* and **bold** and `code`",
            &Theme::colored(),
        );
        let heading = &paras[0].spans[0];
        assert!(heading.style.add_modifier.contains(Modifier::BOLD));
        assert!(heading.style.add_modifier.contains(Modifier::UNDERLINED));
        let body = &paras[2].spans;
        let style_of = |text: &str| body.iter().find(|s| s.content == text).unwrap().style;
        assert!(style_of("it").add_modifier.contains(Modifier::ITALIC));
        assert!(style_of("bold").add_modifier.contains(Modifier::BOLD));
        assert_eq!(style_of("code"), Theme::colored().code);
    }

    #[test]
    fn quotes_get_a_bar_on_every_row() {
        assert_eq!(
            rows("> quoted words here", 10),
            ["│ quoted", "│ words", "│ here"]
        );
    }

    #[test]
    fn rules_tasks_and_html_show_as_text() {
        assert_eq!(
            rows("a\n\n---\n\n- [x] done\n- [ ] todo\n\n<b>hi</b>", 6),
            [
                "a",
                "",
                "──────",
                "",
                "• [x]",
                "  done",
                "• [ ]",
                "  todo",
                "",
                "<b>hi<",
                "/b>"
            ]
        );
    }

    const TABLE: &str = "Which store?\n\n| Option | Latency | Notes |\n| --- | ---: | :---: |\n| Redis | 0.2 ms | in memory, needs a server |\n| SQLite | 1 ms | a file |\n\nPick one.";

    #[test]
    fn tables_show_aligned_columns_under_a_ruled_header() {
        assert_eq!(
            rows(TABLE, 60),
            [
                "Which store?",
                "",
                "Option │ Latency │           Notes",
                "───────┼─────────┼──────────────────────────",
                "Redis  │  0.2 ms │ in memory, needs a server",
                "SQLite │    1 ms │          a file",
                "",
                "Pick one.",
            ]
        );
        let lines = wrap(&render(TABLE, &Theme::monochrome()), 60);
        let header = &lines[2].spans;
        let option = header
            .iter()
            .find(|s| s.content == "Option")
            .expect("a header cell");
        assert!(
            option.style.add_modifier.contains(Modifier::BOLD),
            "{header:?}"
        );
    }

    #[test]
    fn a_table_too_wide_wraps_its_widest_columns() {
        assert_eq!(
            rows(TABLE, 34),
            [
                "Which store?",
                "",
                "Option │ Latency │      Notes",
                "───────┼─────────┼────────────────",
                "Redis  │  0.2 ms │   in memory,",
                "       │         │ needs a server",
                "SQLite │    1 ms │     a file",
                "",
                "Pick one.",
            ]
        );
    }

    #[test]
    fn a_table_too_narrow_for_columns_shows_each_row_as_a_record() {
        assert_eq!(
            rows(TABLE, 20),
            [
                "Which store?",
                "",
                "Option: Redis",
                "Latency: 0.2 ms",
                "Notes: in memory,",
                "  needs a server",
                "",
                "Option: SQLite",
                "Latency: 1 ms",
                "Notes: a file",
                "",
                "Pick one.",
            ]
        );
        let lines = wrap(&render(TABLE, &Theme::monochrome()), 20);
        let label = lines[2].spans.iter().find(|s| !s.content.is_empty());
        let label = label.expect("a header");
        assert_eq!(label.content, "Option");
        assert!(
            label.style.add_modifier.contains(Modifier::BOLD),
            "{label:?}"
        );
    }

    #[test]
    fn a_table_in_a_list_item_keeps_the_items_indent() {
        let md = "- compare:\n\n  | a | b |\n  | - | - |\n  | 1 | 2 |\n";
        assert_eq!(
            rows(md, 40),
            ["• compare:", "", "  a │ b", "  ──┼──", "  1 │ 2"]
        );
    }

    #[test]
    fn a_table_in_a_quote_is_behind_the_bar_and_italic_like_the_quote() {
        let md = "> | a | b |\n> | - | - |\n> | 1 | 2 |\n";
        assert_eq!(rows(md, 40), ["│ a │ b", "│ ──┼──", "│ 1 │ 2"]);
        let lines = wrap(&render(md, &Theme::colored()), 40);
        let quote = Theme::colored().quote.add_modifier;
        for (row, line) in lines.iter().enumerate().filter(|(row, _)| *row != 1) {
            let cell = line
                .spans
                .iter()
                .find(|s| s.content.trim() == if row == 0 { "a" } else { "1" })
                .unwrap_or_else(|| panic!("row {row}: {line:?}"));
            assert!(cell.style.add_modifier.contains(quote), "{cell:?}");
        }
    }

    #[test]
    fn empty_markdown_renders_nothing() {
        assert!(render("", &Theme::colored()).is_empty());
    }
}
