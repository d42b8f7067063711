//! Word wrapping for styled text, with hanging prefixes.
//!
//! The panel needs to know how many rows its text takes before drawing it (so the inline
//! viewport can size itself), and list items and quotes need a prefix that differs between
//! the first row and the rest. ratatui's `Paragraph` wraps but neither reports its height in
//! a stable API nor supports hanging prefixes, so wrapping happens here, once, into plain
//! [`Line`]s that are then drawn without further wrapping.
//!
//! Tables are laid out here too, since how wide their columns can be depends on the width
//! ([`Table`]).

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
    /// Instead of text, a table.
    pub table: Option<Box<Table>>,
}

/// How a column's cells sit in their width, as the table's delimiter row says (`:--`,
/// `:-:`, `--:`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Align {
    #[default]
    Left,
    Center,
    Right,
}

/// A table, laid out when the width is known. Columns as wide as their widest cell when
/// the table fits. When it does not, the narrow columns keep their width and the wide ones
/// share the rest equally, their cells wrapped, but no column gets less than its longest
/// word. When not even the longest words fit, each row is shown as a record: every cell on
/// its own row after its column's header.
#[derive(Debug, Clone, Default)]
pub(crate) struct Table {
    /// Each column's alignment; a row has a cell for each.
    pub align: Vec<Align>,
    /// The header row first, then the body's rows.
    pub rows: Vec<Vec<Vec<Span<'static>>>>,
    /// The lines between columns and under the header.
    pub rule: Style,
}

impl Table {
    /// A longer word may be broken to keep the columns: a URL should not turn a table
    /// into records.
    const LONGEST_WORD: usize = 16;
    /// Between two columns.
    const GAP: &'static str = " │ ";
    /// Under the header, where a gap crosses it.
    const CROSS: &'static str = "─┼─";
}

impl Para {
    /// A line of text with no prefix.
    pub(crate) fn text(spans: Vec<Span<'static>>) -> Self {
        Self {
            spans,
            ..Self::default()
        }
    }

    /// An empty line.
    pub(crate) fn blank() -> Self {
        Self::default()
    }

    /// `first` before the first row, and as many spaces before the others.
    pub(crate) fn hanging(first: Vec<Span<'static>>, spans: Vec<Span<'static>>) -> Self {
        let indent = spans_width(&first);
        Self {
            first,
            rest: vec![Span::raw(" ".repeat(indent))],
            spans,
            fill: None,
            table: None,
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
    if let Some(table) = &para.table {
        wrap_table(para, table, width, out);
        return;
    }
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

/// Lays out `table` in `width` columns, behind `para`'s prefixes: see [`Table`].
/// Drops the blanks a row of table cells ends in: the last cell's padding, the gap before an
/// empty last cell, a right-aligned empty cell's padding (selecting or copying the row took
/// them too).
fn trim_end(spans: &mut Vec<Span<'static>>) {
    while let Some(last) = spans.last_mut() {
        let kept = last.content.trim_end_matches(' ').len();
        if kept > 0 {
            if kept < last.content.len() {
                last.content = last.content[..kept].to_owned().into();
            }
            return;
        }
        spans.pop();
    }
}

fn wrap_table(para: &Para, table: &Table, width: usize, out: &mut Vec<Line<'static>>) {
    let columns = table.rows.iter().map(Vec::len).max().unwrap_or(0);
    if columns == 0 {
        return;
    }
    let prefix = spans_width(&para.first).max(spans_width(&para.rest));
    // A prefix that leaves no room is dropped, as for text.
    let (first, rest, room) = if prefix < width {
        (&para.first[..], &para.rest[..], width - prefix)
    } else {
        (&[][..], &[][..], width)
    };
    let natural: Vec<usize> = (0..columns)
        .map(|j| {
            let widest = table.rows.iter().map(|row| spans_width(cell(row, j)));
            widest.max().unwrap_or(0).max(1)
        })
        .collect();
    let least: Vec<usize> = (0..columns)
        .map(|j| {
            let words = table.rows.iter().flat_map(|row| {
                let text: String = cell(row, j).iter().map(|s| s.content.as_ref()).collect();
                let words: Vec<usize> = text.split_whitespace().map(str_width).collect();
                words
            });
            words.max().unwrap_or(0).clamp(1, Table::LONGEST_WORD)
        })
        .collect();
    let gaps = str_width(Table::GAP) * (columns - 1);
    let widths = room
        .checked_sub(gaps)
        .and_then(|budget| column_widths(&natural, &least, budget));
    let mut lines = Vec::new();
    match widths {
        Some(widths) => {
            for (i, row) in table.rows.iter().enumerate() {
                let cells: Vec<Vec<Line<'static>>> = (0..columns)
                    .map(|j| wrap(&[Para::text(cell(row, j).to_vec())], widths[j] as u16))
                    .collect();
                let height = cells.iter().map(Vec::len).max().unwrap_or(0).max(1);
                for r in 0..height {
                    let mut spans = Vec::new();
                    for (j, lines) in cells.iter().enumerate() {
                        if j > 0 {
                            spans.push(Span::styled(Table::GAP, table.rule));
                        }
                        let line = lines.get(r);
                        let pad = widths[j].saturating_sub(line.map_or(0, Line::width));
                        let align = table.align.get(j).copied().unwrap_or_default();
                        let (before, after) = match align {
                            Align::Left => (0, pad),
                            Align::Center => (pad / 2, pad - pad / 2),
                            Align::Right => (pad, 0),
                        };
                        if before > 0 {
                            spans.push(Span::raw(" ".repeat(before)));
                        }
                        spans.extend(line.into_iter().flat_map(|l| l.spans.iter().cloned()));
                        if after > 0 {
                            spans.push(Span::raw(" ".repeat(after)));
                        }
                    }
                    trim_end(&mut spans);
                    lines.push(spans);
                }
                if i == 0 && table.rows.len() > 1 {
                    let rule: Vec<String> = widths.iter().map(|w| "─".repeat(*w)).collect();
                    lines.push(vec![Span::styled(rule.join(Table::CROSS), table.rule)]);
                }
            }
        }
        None => {
            // Too narrow for columns: each row a record, a cell a row after its header.
            let header = &table.rows[0];
            let body = if table.rows.len() > 1 {
                &table.rows[1..]
            } else {
                &table.rows[..]
            };
            for (i, row) in body.iter().enumerate() {
                if i > 0 {
                    lines.push(Vec::new());
                }
                for j in 0..columns {
                    // The header, as styled in the header row, is text, not a prefix, so
                    // that no width hides it; the rows a cell wraps onto are indented under it.
                    let mut spans = Vec::new();
                    if table.rows.len() > 1 && spans_width(cell(header, j)) > 0 {
                        spans.extend_from_slice(cell(header, j));
                        spans.push(Span::styled(": ", table.rule));
                    }
                    spans.extend_from_slice(cell(row, j));
                    let record = Para {
                        rest: vec![Span::raw("  ")],
                        spans,
                        ..Para::default()
                    };
                    lines.extend(wrap(&[record], room as u16).into_iter().map(|l| l.spans));
                }
            }
        }
    }
    for (i, spans) in lines.into_iter().enumerate() {
        let prefix = if i == 0 { first } else { rest };
        let mut row = prefix.to_vec();
        row.extend(spans);
        out.push(Line::from(row));
    }
}

/// Cell `j` of `row`; a short row's missing cells are empty.
fn cell<'a>(row: &'a [Vec<Span<'static>>], j: usize) -> &'a [Span<'static>] {
    row.get(j).map_or(&[], Vec::as_slice)
}

/// Column widths that add up to at most `budget`: each column's `natural` width if they all
/// fit; otherwise the columns narrower than some level keep their width, the others get the
/// level, and none gets less than its `least` (the highest level that fits, and what is
/// left below the next one a column at a time). `None` when not even the `least` widths fit.
fn column_widths(natural: &[usize], least: &[usize], budget: usize) -> Option<Vec<usize>> {
    let at = |level: usize| -> Vec<usize> {
        natural
            .iter()
            .zip(least)
            .map(|(&n, &l)| n.min(level).max(l))
            .collect()
    };
    let fits = |level: usize| at(level).iter().sum::<usize>() <= budget;
    if natural.iter().sum::<usize>() <= budget {
        return Some(natural.to_vec());
    }
    if !fits(0) {
        return None;
    }
    // The highest level that fits, between 0 (fits) and the widest column (does not).
    let (mut low, mut high) = (0, natural.iter().copied().max().unwrap_or(0));
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if fits(mid) { low = mid } else { high = mid }
    }
    let mut widths = at(low);
    let mut left = budget - widths.iter().sum::<usize>();
    for (w, &n) in widths.iter_mut().zip(natural) {
        if left > 0 && *w == low && low < n {
            *w += 1;
            left -= 1;
        }
    }
    Some(widths)
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

    fn table(rows: &[&[&str]]) -> Para {
        let rows = rows
            .iter()
            .map(|row| row.iter().map(|c| vec![Span::raw(c.to_string())]).collect())
            .collect();
        Para {
            first: vec![Span::raw("• ")],
            rest: vec![Span::raw("  ")],
            table: Some(Box::new(Table {
                align: vec![Align::Left, Align::Right, Align::Center],
                rows,
                rule: Style::new(),
            })),
            ..Para::default()
        }
    }

    #[test]
    fn narrow_columns_keep_their_width_and_wide_ones_share_the_rest() {
        assert_eq!(
            column_widths(&[4, 30, 50], &[4, 8, 6], 90),
            Some(vec![4, 30, 50])
        );
        // The narrow column keeps its width, the wide ones share the rest.
        assert_eq!(
            column_widths(&[4, 30, 50], &[4, 8, 6], 40),
            Some(vec![4, 18, 18])
        );
        // None gets less than its longest word.
        assert_eq!(
            column_widths(&[4, 30, 50], &[4, 20, 6], 40),
            Some(vec![4, 20, 16])
        );
        assert_eq!(
            column_widths(&[4, 30, 50], &[4, 8, 6], 18),
            Some(vec![4, 8, 6])
        );
        assert_eq!(
            column_widths(&[4, 30, 50], &[4, 8, 6], 17),
            None,
            "a word would break"
        );
        // What is left below the next level goes a column at a time.
        assert_eq!(
            column_widths(&[10, 10, 10], &[1, 1, 1], 20),
            Some(vec![7, 7, 6])
        );
    }

    #[test]
    fn a_table_row_with_missing_cells_gets_empty_ones() {
        let lines = wrap(&[table(&[&["a", "b", "c"], &["1"]])], 40);
        assert_eq!(texts(&lines), ["• a │ b │ c", "  ──┼───┼──", "  1 │   │"]);
    }

    #[test]
    fn a_table_row_ends_in_its_last_character_not_in_blanks() {
        // Regression: the gap before an empty last cell left a trailing space, and an empty
        // right-aligned last column its padding.
        let mut t = table(&[&["a", "b"], &["1", ""], &["2", "long"]]);
        if let Some(table) = &mut t.table {
            table.align = vec![Align::Left, Align::Right];
        }
        let lines = wrap(&[t], 40);
        assert_eq!(
            texts(&lines),
            ["• a │    b", "  ──┼─────", "  1 │", "  2 │ long"]
        );
    }

    proptest::proptest! {
        /// Whatever the cells and the width, no row of a table is wider than the width, and
        /// every word of every cell is shown.
        #[test]
        fn a_table_never_overflows_and_loses_no_word(
            cells in proptest::collection::vec("[a-z]{1,12}( [a-zé日]{1,9}){0,4}", 1..13),
            columns in 1usize..4,
            // From 12 on: a character two columns wide cannot fit a row with one column left
            // after its prefixes, in a table or not.
            width in 12u16..70,
        ) {
            let rows: Vec<Vec<&str>> = cells.chunks(columns).map(|r| r.iter().map(String::as_str).collect()).collect();
            let rows: Vec<&[&str]> = rows.iter().map(Vec::as_slice).collect();
            let lines = wrap(&[table(&rows)], width);
            for line in &lines {
                proptest::prop_assert!(line.width() <= usize::from(width), "{line:?} in {width}");
            }
            // Every character of every cell is shown (a header maybe once per record).
            let mut shown: Vec<char> = texts(&lines).concat().chars().filter(|c| c.is_alphanumeric()).collect();
            shown.sort_unstable();
            let mut wanted: Vec<char> = cells.concat().chars().filter(|c| c.is_alphanumeric()).collect();
            wanted.sort_unstable();
            let mut left = shown.iter().peekable();
            for c in &wanted {
                while left.next_if(|s| *s < c).is_some() {}
                proptest::prop_assert_eq!(left.next(), Some(c), "{:?} in {:?}", c, lines);
            }
        }
    }
}
