//! Drawing the question panel, and deciding what fits.
//!
//! From top to bottom: a title rule, the question (with context and notes), the options, the
//! answer editor, the countdown, and a line of key hints. When the area is shorter than
//! [`QuestionPanel::desired_height`], parts shrink in an order that keeps the panel usable:
//! the countdown, one row of the question, the hints and one row of editor come first; then
//! a few question rows, up to five rows of options, the editor's border, the editor's full
//! height, the title, the rest of the question (it scrolls with `PgUp`/`PgDn`); the rest of
//! the options last (the list scrolls with the cursor, and its last row says how many more
//! there are). Nothing here
//! panics on any area, however small.

use std::time::{Duration, Instant};

use ralph_protocol::Ended;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Padding, Widget};
use ratatui_textarea::TextArea;

use crate::countdown_view;
use crate::question_panel::{Focus, QuestionPanel, clean};
use crate::wrap::{Para, str_width, wrap};

/// Most rows the editor grows to before it scrolls.
const EDITOR_MAX_ROWS: u16 = 6;

/// Rows the options get before the editor's border and full height, the title and the rest
/// of the question; the list scrolls with the cursor, and any more rows come last.
const OPTIONS_FIRST: u16 = 5;

/// The panel drawn at a given instant; `frame.render_widget(panel.view(now), area)`.
#[derive(Debug, Clone, Copy)]
pub struct PanelView<'a> {
    panel: &'a QuestionPanel,
    now: Instant,
}

impl Widget for PanelView<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        self.panel.render(area, buf, self.now);
    }
}

/// Rows given to each part of the panel.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Plan {
    title: u16,
    body: u16,
    gap: u16,
    options: u16,
    /// Editor rows inside the border.
    editor: u16,
    border: bool,
    countdown: u16,
    /// Key hints, the empty-answer hint, or the closing line.
    footer: u16,
}

/// Rows each part would like.
#[derive(Debug, Clone, Copy)]
struct Wants {
    body: u16,
    options: u16,
    editor: u16,
}

impl Plan {
    fn total(&self) -> u16 {
        self.title
            + self.body
            + self.gap
            + self.options
            + self.editor
            + if self.border { 2 } else { 0 }
            + self.countdown
            + self.footer
    }

    fn fit(open: bool, height: u16, wants: Wants) -> Plan {
        let mut budget = Budget(height);
        let mut plan = Plan::default();
        if open {
            plan.countdown = budget.take(1);
            plan.body = budget.take(wants.body.min(1));
            plan.footer = budget.take(1);
            plan.editor = budget.take(1);
        } else {
            plan.footer = budget.take(1);
            plan.body = budget.take(wants.body.min(1));
        }
        plan.body += budget.take(wants.body.min(3).saturating_sub(plan.body));
        // The options before the editor's border: a border drawn where no option fits left
        // a question with options showing none of them.
        plan.options = budget.take(wants.options.min(OPTIONS_FIRST));
        plan.border = open && budget.take_all(2);
        if open {
            plan.editor += budget.take(wants.editor.saturating_sub(plan.editor));
        }
        plan.title = budget.take(1);
        plan.gap = budget.take(u16::from(plan.body > 0 && plan.options > 0));
        plan.body += budget.take(wants.body.saturating_sub(plan.body));
        plan.options += budget.take(wants.options.saturating_sub(plan.options));
        plan
    }
}

/// Rows not yet given out.
struct Budget(u16);

impl Budget {
    /// Up to `want` rows.
    fn take(&mut self, want: u16) -> u16 {
        let got = want.min(self.0);
        self.0 -= got;
        got
    }

    /// Exactly `want` rows, or none.
    fn take_all(&mut self, want: u16) -> bool {
        let ok = self.0 >= want;
        if ok {
            self.0 -= want;
        }
        ok
    }
}

impl QuestionPanel {
    /// The panel as a widget drawn at `now`.
    pub fn view(&self, now: Instant) -> PanelView<'_> {
        PanelView { panel: self, now }
    }

    /// Rows the panel needs at `width` to show everything without scrolling. The caller
    /// caps it (at most part of the terminal) and may draw into less.
    pub fn desired_height(&self, width: u16) -> u16 {
        if width == 0 {
            return 0;
        }
        let wants = self.wants(width);
        let open = self.closed.is_none();
        let unbounded = Plan::fit(open, u16::MAX, wants);
        unbounded.total()
    }

    fn wants(&self, width: u16) -> Wants {
        let body = self.wrapped_body(width).len();
        let options = wrap(&self.option_paras(), width).len();
        Wants {
            body: clamp_u16(body),
            options: clamp_u16(options),
            editor: self.editor_rows(width.saturating_sub(4)),
        }
    }

    /// Rows the typed text takes at `width`, between one and [`EDITOR_MAX_ROWS`].
    fn editor_rows(&self, width: u16) -> u16 {
        let width = usize::from(width.max(1));
        let rows: usize = self
            .editor
            .borrow()
            .lines()
            .iter()
            // The cursor after the last character needs a cell too.
            .map(|line| (str_width(line) + 1).div_ceil(width).max(1))
            .sum();
        clamp_u16(rows).clamp(1, EDITOR_MAX_ROWS)
    }

    /// Draws the panel into `area` as it looks at `now`.
    pub fn render(&self, area: Rect, buf: &mut Buffer, now: Instant) {
        let area = area.intersection(buf.area);
        if area.is_empty() {
            return;
        }
        // The caller may draw over an older frame's content; start from a clean area.
        Clear.render(area, buf);
        let open = self.closed.is_none();
        let wants = self.wants(area.width);
        let plan = Plan::fit(open, area.height, wants);
        let mut y = area.y;
        let mut next = |rows: u16| {
            let rect = Rect::new(area.x, y, area.width, rows);
            y += rows;
            rect
        };

        let title = next(plan.title);
        if !title.is_empty() {
            self.render_title(title, buf, now);
        }
        let body = next(plan.body);
        self.render_body(body, buf);
        next(plan.gap);
        let options = next(plan.options);
        self.render_options(options, buf);
        let editor = next(plan.editor + if plan.border { 2 } else { 0 });
        if open {
            self.render_editor(editor, plan.border, buf);
        }
        let countdown = next(plan.countdown);
        countdown_view::render(
            &self.countdown,
            self.extension_pending(),
            now,
            &self.theme,
            countdown,
            buf,
        );
        let footer = next(plan.footer);
        if !footer.is_empty() {
            let line = match &self.closed {
                Some(closed) => self.closing_line(closed),
                None if self.refused => Line::from(Span::styled(
                    match self.options.is_empty() {
                        true => "Type an answer — Esc skips and lets the agent guess",
                        false => {
                            "Type an answer or pick an option — Esc skips and lets the agent guess"
                        }
                    },
                    self.theme.error,
                )),
                None => self.hint_line(usize::from(area.width), wants.body > plan.body),
            };
            buf.set_line(footer.x, footer.y, &line, footer.width);
        }
    }

    fn render_title(&self, area: Rect, buf: &mut Buffer, now: Instant) {
        let age = format!(" asked {} ", format_age(self.age(now)));
        let mut block = Block::new()
            .borders(Borders::TOP)
            .border_style(self.theme.border)
            .title(Line::from(vec![
                Span::styled("─", self.theme.border),
                Span::styled(" The agent asks ", self.theme.title),
            ]));
        if area.width as usize > str_width(&age) + 20 {
            block = block.title(Line::from(Span::styled(age, self.theme.dim)).right_aligned());
        }
        block.render(area, buf);
    }

    fn render_body(&self, area: Rect, buf: &mut Buffer) {
        let lines = self.wrapped_body(area.width);
        let shown = usize::from(area.height);
        let max_scroll = lines.len().saturating_sub(shown);
        let scroll = self.scroll.min(max_scroll);
        self.last_body.set((shown, lines.len()));
        for (row, line) in lines.iter().skip(scroll).take(shown).enumerate() {
            buf.set_line(area.x, area.y + row as u16, line, area.width);
        }
        // Say there is more rather than cut the question off silently.
        let below = lines.len().saturating_sub(scroll + shown);
        if below > 0 && shown >= 5 {
            // The note takes the last row, so that row is hidden too.
            let hidden = below + 1;
            let more = Line::from(Span::styled(
                format!("… {hidden} more lines (PgDn)"),
                self.theme.dim,
            ));
            let y = area.bottom() - 1;
            for x in area.left()..area.right() {
                buf[(x, y)].reset();
            }
            buf.set_line(area.x, y, &more, area.width);
        }
    }

    /// One paragraph per option: highlight, pick marker, number, label, description, and
    /// "(default)".
    fn option_paras(&self) -> Vec<Para> {
        let theme = &self.theme;
        let default = self.question.default_option();
        let focused = self.focus == Focus::Options && self.closed.is_none();
        self.options
            .iter()
            .enumerate()
            .map(|(i, (label, description))| {
                let under_cursor = focused && i == self.cursor;
                let (on, off) = if self.question.multi_select {
                    ("[x] ", "[ ] ")
                } else {
                    ("(•) ", "( ) ")
                };
                // Once closed, picks are history, not the answer: show the options only.
                let chosen = self.chosen[i] && self.closed.is_none();
                // Only the row under the cursor carries the cursor's style: in the monochrome
                // theme it is reverse video, which would draw a block before every option.
                let mut first = vec![if under_cursor {
                    Span::styled("› ", theme.option_cursor)
                } else {
                    Span::styled("  ", theme.text)
                }];
                if self.closed.is_none() {
                    first.push(Span::styled(
                        if chosen { on } else { off },
                        if chosen { theme.chosen } else { theme.dim },
                    ));
                }
                first.push(Span::styled(format!("{}. ", i + 1), theme.option_number));
                let label_style = match (under_cursor, chosen) {
                    (true, _) => theme.option_cursor,
                    (false, true) => theme.chosen,
                    (false, false) => theme.text,
                };
                let mut spans = vec![Span::styled(label.clone(), label_style)];
                if let Some(description) = description.as_deref().filter(|d| !d.is_empty()) {
                    spans.push(Span::styled(format!(" — {description}"), theme.dim));
                }
                if default == Some(i) {
                    spans.push(Span::styled(" (default)", theme.dim));
                }
                Para::hanging(first, spans)
            })
            .collect()
    }

    fn render_options(&self, area: Rect, buf: &mut Buffer) {
        if area.is_empty() {
            return;
        }
        // Wrap each option on its own to know which rows belong to the highlighted one, and
        // scroll the list so it stays in view.
        let mut rows: Vec<(usize, Line<'static>)> = Vec::new();
        for (i, para) in self.option_paras().iter().enumerate() {
            rows.extend(
                wrap(std::slice::from_ref(para), area.width)
                    .into_iter()
                    .map(|l| (i, l)),
            );
        }
        // Say there are more rather than cut the list off silently: the last row says so.
        let cut = rows.len() > usize::from(area.height) && area.height >= 2;
        let shown = usize::from(area.height) - usize::from(cut);
        let first_of_cursor = rows
            .iter()
            .position(|(i, _)| *i == self.cursor)
            .unwrap_or(0);
        let last_of_cursor = rows
            .iter()
            .rposition(|(i, _)| *i == self.cursor)
            .unwrap_or(0);
        let start = if last_of_cursor >= shown {
            (last_of_cursor + 1 - shown).min(first_of_cursor)
        } else {
            0
        };
        for (row, (_, line)) in rows.iter().skip(start).take(shown).enumerate() {
            buf.set_line(area.x, area.y + row as u16, line, area.width);
        }
        if rows.len() > shown && shown == 1 {
            // One row, no room for the note below: where the list stands goes at the row's end.
            let at = format!(" {}/{} ↑↓", self.cursor + 1, self.options.len());
            let width = str_width(&at) as u16;
            if area.width >= width + 12 {
                let tag = Line::from(Span::styled(at, self.theme.dim));
                buf.set_line(area.right() - width, area.y, &tag, width);
            }
        }
        if cut {
            let visible = &rows[start..(start + shown).min(rows.len())];
            let seen =
                visible.last().map_or(0, |(i, _)| i + 1) - visible.first().map_or(0, |(i, _)| *i);
            let more = self.options.len() - seen;
            let more = Line::from(Span::styled(
                format!(
                    "  … {more} more option{} (↑↓ in the list)",
                    if more == 1 { "" } else { "s" }
                ),
                self.theme.dim,
            ));
            buf.set_line(area.x, area.bottom() - 1, &more, area.width);
        }
    }

    fn render_editor(&self, area: Rect, border: bool, buf: &mut Buffer) {
        if area.is_empty() {
            return;
        }
        let inner = if border {
            let focused = self.focus == Focus::Editor;
            let title = match self.chosen_labels() {
                labels if labels.is_empty() => " Your answer ".to_owned(),
                labels => format!(" Note for {} (optional) ", labels.join(", ")),
            };
            let block = Block::bordered()
                .border_type(BorderType::Rounded)
                .padding(Padding::horizontal(1))
                .border_style(if focused {
                    self.theme.border_focused
                } else {
                    self.theme.border
                })
                .title(Line::from(Span::styled(
                    title,
                    if focused {
                        self.theme.border_focused
                    } else {
                        self.theme.dim
                    },
                )));
            let inner = block.inner(area);
            block.render(area, buf);
            inner
        } else {
            // No room for a border: a prompt marks the input row instead.
            let prompt = Line::from(Span::styled("> ", self.theme.border_focused));
            buf.set_line(area.x, area.y, &prompt, area.width);
            Rect {
                x: area.x.saturating_add(2).min(area.right()),
                width: area.width.saturating_sub(2),
                ..area
            }
        };
        if !inner.is_empty() {
            let mut editor = self.editor.borrow_mut();
            settle(&mut editor, inner);
            (&*editor).render(inner, buf);
        }
    }

    fn chosen_labels(&self) -> Vec<String> {
        self.options
            .iter()
            .zip(&self.chosen)
            .filter(|(_, chosen)| **chosen)
            .map(|((label, _), _)| label.clone())
            .collect()
    }

    /// Key hints that fit in `width`, most important first, shown in a fixed order.
    fn hint_line(&self, width: usize, scrolls: bool) -> Line<'static> {
        let has_options = !self.options.is_empty();
        let pick = if self.question.multi_select {
            "Space/1-9 toggle"
        } else {
            "1-9 pick"
        };
        let deadline = self.countdown.total().is_some();
        // (priority, text): lower priority numbers are kept first when space is short.
        let items: Vec<(u8, &str)> = [
            (0, "Enter send", true),
            (6, "Alt+Enter newline", true),
            (3, pick, has_options),
            // With options, Tab is how a pick gets a note; that matters more than newlines.
            (5, "Tab list/answer", has_options),
            // A cut-off question must say how to read the rest.
            (2, "PgUp/PgDn scroll", scrolls),
            (4, "Ctrl+E +5m", deadline),
            (1, "Esc skip", true),
        ]
        .into_iter()
        .filter(|(_, _, show)| *show)
        .map(|(p, text, _)| (p, text))
        .collect();
        let mut by_priority: Vec<&(u8, &str)> = items.iter().collect();
        by_priority.sort_by_key(|(p, _)| *p);
        let mut kept: Vec<u8> = Vec::new();
        let mut used = 0;
        for (p, text) in by_priority {
            let extra = str_width(text) + if kept.is_empty() { 0 } else { 3 };
            if used + extra <= width {
                used += extra;
                kept.push(*p);
            }
        }
        let mut spans = Vec::new();
        for (p, text) in &items {
            if kept.contains(p) {
                if !spans.is_empty() {
                    spans.push(Span::styled(" · ", self.theme.dim));
                }
                spans.push(Span::styled(*text, self.theme.dim));
            }
        }
        Line::from(spans)
    }

    fn closing_line(&self, closed: &Ended) -> Line<'static> {
        let fallback = match &self.question.default {
            Some(default) => format!("the agent goes with its default: {}", clean(default)),
            None => "the agent makes its best guess".to_owned(),
        };
        let text = match closed {
            Ended::Answered { here: true, .. } => "✓ Answer sent".to_owned(),
            Ended::Answered { answer, .. } => format!("✓ Answered by {}", clean(&answer.source())),
            Ended::TimedOut => format!("Time's up — {fallback}"),
            Ended::Skipped => format!("Skipped — {fallback}"),
            Ended::Interrupted => {
                "Stopped — the question stays for the next `ralph run`".to_owned()
            }
        };
        Line::from(Span::styled(text, self.theme.closed))
    }
}

/// `just now`, `12s ago`, `3m ago`, `1h 05m ago`: seconds under a minute, so a question
/// shown again after a restart reads as old as the scrollback's "asked 12s ago" says.
fn format_age(age: Duration) -> String {
    let secs = age.as_secs();
    let mins = secs / 60;
    match mins {
        0 if secs < JUST_NOW.as_secs() => "just now".to_owned(),
        0 => format!("{secs}s ago"),
        1..60 => format!("{mins}m ago"),
        _ => format!("{}h {:02}m ago", mins / 60, mins % 60),
    }
}

/// How young a question is "just now".
const JUST_NOW: Duration = Duration::from_secs(5);

fn clamp_u16(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
}

/// Scrolls `editor` back up when rows of its text are hidden above while rows below it stand
/// empty: after the area it is drawn into grew (a resize, a longer answer's room), which
/// `ratatui_textarea` does not do itself (it only scrolls to keep the cursor in view, so the
/// first lines stayed hidden until the cursor went up to them). The cursor stays where it is.
fn settle(editor: &mut TextArea<'static>, area: Rect) {
    if editor.scroll_offset().0 == 0 {
        return;
    }
    // A draw off screen: the editor takes `area`'s size, and scrolls to keep the cursor in it.
    (&*editor).render(area, &mut Buffer::empty(area));
    let top = usize::from(editor.scroll_offset().0);
    let height = usize::from(area.height);
    // The text's last row on screen: past it, every row maps to where the last one starts.
    let last = (top..top + height)
        .find(|&row| editor.screen_to_data(row + 1, 0) == editor.screen_to_data(row, 0))
        .unwrap_or(top + height);
    let cursor = editor.screen_cursor().row;
    let want = (last + 1)
        .saturating_sub(height)
        .max((cursor + 1).saturating_sub(height));
    if want < top {
        let up = i16::try_from(top - want).unwrap_or(i16::MAX);
        editor.scroll((-up, 0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wants(body: u16, options: u16, editor: u16) -> Wants {
        Wants {
            body,
            options,
            editor,
        }
    }

    #[test]
    fn a_tall_area_gets_everything() {
        let plan = Plan::fit(true, 100, wants(5, 2, 1));
        assert_eq!(
            plan,
            Plan {
                title: 1,
                body: 5,
                gap: 1,
                options: 2,
                editor: 1,
                border: true,
                countdown: 1,
                footer: 1
            }
        );
        assert_eq!(plan.total(), 14);
    }

    #[test]
    fn a_short_area_keeps_countdown_question_hint_and_editor() {
        let plan = Plan::fit(true, 4, wants(20, 3, 2));
        assert_eq!(
            (
                plan.countdown,
                plan.body,
                plan.footer,
                plan.editor,
                plan.border
            ),
            (1, 1, 1, 1, false)
        );
        assert_eq!(plan.total(), 4);
        let plan = Plan::fit(true, 2, wants(20, 3, 2));
        assert_eq!((plan.countdown, plan.body, plan.total()), (1, 1, 2));
    }

    #[test]
    fn options_come_before_the_editors_border() {
        // Regression: six rows for a one-line question with two options drew the editor's
        // border and no option at all; five rows showed one.
        let plan = Plan::fit(true, 6, wants(1, 2, 1));
        assert_eq!((plan.options, plan.border), (2, false));
        let plan = Plan::fit(true, 8, wants(1, 2, 1));
        assert_eq!((plan.options, plan.border), (2, true));
    }

    #[test]
    fn never_plans_more_than_the_height() {
        for height in 0..40 {
            for open in [true, false] {
                let plan = Plan::fit(open, height, wants(30, 5, 4));
                assert!(plan.total() <= height, "{height} {plan:?}");
            }
        }
    }

    #[test]
    fn ages_read_naturally() {
        assert_eq!(format_age(Duration::from_secs(4)), "just now");
        // Regression (issue 25, item 14): after a restart the panel said "asked just now"
        // while the scrollback said "asked 12s ago".
        assert_eq!(format_age(Duration::from_secs(12)), "12s ago");
        assert_eq!(format_age(Duration::from_secs(59)), "59s ago");
        assert_eq!(format_age(Duration::from_secs(60)), "1m ago");
        assert_eq!(format_age(Duration::from_secs(3900)), "1h 05m ago");
    }
}
