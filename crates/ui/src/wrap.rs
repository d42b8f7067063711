//! Word wrapping for styled text, with hanging prefixes.
//!
//! The panel needs to know how many rows its text takes before drawing it (so the inline
//! viewport can size itself), and list items and quotes need a prefix that differs between
//! the first row and the rest. ratatui's `Paragraph` wraps but neither reports its height in
//! a stable API nor supports hanging prefixes, so wrapping happens here, once, into plain
//! [`Line`]s that are then drawn without further wrapping.

use ratatui::style::Style;
use ratatui::text::{Line, Span};

/// One logical line: a paragraph, a list item's text, a code line, a rule.
#[derive(Debug, Clone, Default)]
pub(crate) struct Para {
    /// Drawn before the first row (a bullet, a quote bar).
    pub first: Vec<Span<'static>>,
    /// Drawn before every further row (usually spaces as wide as `first`).
    pub rest: Vec<Span<'static>>,
    /// The text to wrap.
    pub spans: Vec<Span<'static>>,
    /// Instead of text, repeat this symbol across the row (a horizontal rule).
    pub fill: Option<(&'static str, Style)>,
}

impl Para {
    /// A line of text with no prefix.
    pub fn text(spans: Vec<Span<'static>>) -> Self {
        Self {
            spans,
            ..Self::default()
        }
    }

    /// An empty line.
    pub fn blank() -> Self {
        Self::default()
    }

    /// `first` before the first row, and as many spaces before the others.
    pub fn hanging(first: Vec<Span<'static>>, spans: Vec<Span<'static>>) -> Self {
        let indent = spans_width(&first);
        Self {
            first,
            rest: vec![Span::raw(" ".repeat(indent))],
            spans,
            fill: None,
        }
    }
}

/// Display width of some spans, in columns.
pub(crate) fn spans_width(spans: &[Span<'_>]) -> usize {
    spans.iter().map(Span::width).sum()
}

/// Display width of a string, in columns.
pub(crate) fn str_width(s: &str) -> usize {
    Span::raw(s).width()
}

/// Wraps every paragraph to `width` columns. A zero width yields no rows.
pub(crate) fn wrap(paras: &[Para], width: u16) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    if width == 0 {
        return out;
    }
    for para in paras {
        wrap_one(para, usize::from(width), &mut out);
    }
    out
}

/// A grapheme with its style and width, owned so rows can outlive the source spans.
struct Cell {
    symbol: String,
    style: Style,
    width: usize,
    space: bool,
}

struct Rows<'a> {
    para: &'a Para,
    width: usize,
    out: &'a mut Vec<Line<'static>>,
    row: Vec<Cell>,
    row_width: usize,
    rows_done: usize,
}

impl Rows<'_> {
    /// The prefix of the current row and the width left after it. A prefix that leaves no
    /// room is dropped rather than leaving no room for text.
    fn prefix(&self) -> (&[Span<'static>], usize) {
        let prefix = if self.rows_done == 0 {
            &self.para.first
        } else {
            &self.para.rest
        };
        let prefix_width = spans_width(prefix);
        if prefix_width < self.width {
            (prefix, self.width - prefix_width)
        } else {
            (&[], self.width)
        }
    }

    fn available(&self) -> usize {
        self.prefix().1
    }

    fn push_row(&mut self) {
        let (prefix, _) = self.prefix();
        let mut spans: Vec<Span<'static>> = prefix.to_vec();
        let mut current: Option<(String, Style)> = None;
        for cell in self.row.drain(..) {
            match &mut current {
                Some((text, style)) if *style == cell.style => text.push_str(&cell.symbol),
                _ => {
                    if let Some((text, style)) = current.take() {
                        spans.push(Span::styled(text, style));
                    }
                    current = Some((cell.symbol, cell.style));
                }
            }
        }
        if let Some((text, style)) = current {
            spans.push(Span::styled(text, style));
        }
        self.out.push(Line::from(spans));
        self.row_width = 0;
        self.rows_done += 1;
    }

    fn push_cell(&mut self, cell: Cell) {
        self.row_width += cell.width;
        self.row.push(cell);
    }

    /// Places a word that does not fit on an empty row, breaking it between graphemes.
    fn push_long_word(&mut self, word: Vec<Cell>) {
        for cell in word {
            if !self.row.is_empty() && self.row_width + cell.width > self.available() {
                self.push_row();
            }
            self.push_cell(cell);
        }
    }
}

fn wrap_one(para: &Para, width: usize, out: &mut Vec<Line<'static>>) {
    let mut rows = Rows {
        para,
        width,
        out,
        row: Vec::new(),
        row_width: 0,
        rows_done: 0,
    };
    if let Some((symbol, style)) = para.fill {
        let available = rows.available();
        let count = available / str_width(symbol).max(1);
        rows.row.push(Cell {
            symbol: symbol.repeat(count),
            style,
            width: available,
            space: false,
        });
        rows.push_row();
        return;
    }

    let line = Line::from(para.spans.clone());
    let mut word: Vec<Cell> = Vec::new();
    let mut spaces: Vec<Cell> = Vec::new();
    let flush_word = |rows: &mut Rows<'_>, word: &mut Vec<Cell>, spaces: &mut Vec<Cell>| {
        if word.is_empty() {
            return;
        }
        let word_width: usize = word.iter().map(|c| c.width).sum();
        let space_width: usize = spaces.iter().map(|c| c.width).sum();
        if rows.row_width + space_width + word_width <= rows.available() {
            for cell in spaces.drain(..).chain(word.drain(..)) {
                rows.push_cell(cell);
            }
            return;
        }
        // Spaces at a break vanish, as in any word wrap.
        spaces.clear();
        if !rows.row.is_empty() {
            rows.push_row();
        }
        if word_width <= rows.available() {
            for cell in word.drain(..) {
                rows.push_cell(cell);
            }
        } else {
            rows.push_long_word(std::mem::take(word));
        }
    };
    for grapheme in line.styled_graphemes(Style::new()) {
        let space = grapheme.symbol.chars().all(char::is_whitespace);
        let cell = Cell {
            symbol: grapheme.symbol.to_owned(),
            style: grapheme.style,
            width: str_width(grapheme.symbol),
            space,
        };
        if cell.space {
            flush_word(&mut rows, &mut word, &mut spaces);
            // Leading spaces of a continuation row are dropped; those of the first row are
            // indentation and stay.
            if rows.row.is_empty() && rows.rows_done > 0 && spaces.is_empty() && word.is_empty() {
                continue;
            }
            spaces.push(cell);
        } else {
            word.push(cell);
        }
    }
    flush_word(&mut rows, &mut word, &mut spaces);
    rows.push_row();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(lines: &[Line<'_>]) -> Vec<String> {
        lines.iter().map(ToString::to_string).collect()
    }

    fn para(s: &str) -> Para {
        Para::text(vec![Span::raw(s.to_owned())])
    }

    #[test]
    fn wraps_at_word_boundaries() {
        let lines = wrap(&[para("the quick brown fox jumps")], 10);
        assert_eq!(texts(&lines), ["the quick", "brown fox", "jumps"]);
    }

    #[test]
    fn breaks_words_longer_than_the_row() {
        let lines = wrap(&[para("abcdefghij klm")], 4);
        assert_eq!(texts(&lines), ["abcd", "efgh", "ij", "klm"]);
    }

    #[test]
    fn keeps_leading_indentation_on_the_first_row() {
        let lines = wrap(&[para("    let x = 1;")], 40);
        assert_eq!(texts(&lines), ["    let x = 1;"]);
    }

    #[test]
    fn hanging_prefix_repeats_as_indent() {
        let p = Para::hanging(vec![Span::raw("• ")], vec![Span::raw("one two three four")]);
        let lines = wrap(&[p], 10);
        assert_eq!(texts(&lines), ["• one two", "  three", "  four"]);
    }

    #[test]
    fn wide_characters_count_as_two_columns() {
        let lines = wrap(&[para("日本語の文章")], 6);
        assert_eq!(texts(&lines), ["日本語", "の文章"]);
    }

    #[test]
    fn keeps_styles_across_breaks() {
        let bold = Style::new().add_modifier(ratatui::style::Modifier::BOLD);
        let p = Para::text(vec![Span::raw("aa "), Span::styled("bb cc", bold)]);
        let lines = wrap(&[p], 5);
        assert_eq!(texts(&lines), ["aa bb", "cc"]);
        assert_eq!(lines[1].spans[0].style, bold);
    }

    #[test]
    fn rule_fills_the_row_and_blank_is_one_row() {
        let rule = Para {
            fill: Some(("─", Style::new())),
            ..Para::default()
        };
        let lines = wrap(&[rule, Para::blank()], 5);
        assert_eq!(texts(&lines), ["─────", ""]);
    }

    #[test]
    fn tiny_widths_never_loop_or_panic() {
        assert!(wrap(&[para("abc")], 0).is_empty());
        assert_eq!(texts(&wrap(&[para("ab c")], 1)), ["a", "b", "c"]);
        assert_eq!(texts(&wrap(&[para("日本")], 1)), ["日", "本"]);
        let p = Para::hanging(vec![Span::raw("10. ")], vec![Span::raw("xy")]);
        assert_eq!(texts(&wrap(&[p], 3)), ["xy"]);
    }
}
