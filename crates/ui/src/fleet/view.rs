//! Drawing the fleet view, and the words for a row that plain lines and `ralph status --all`
//! print.
//!
//! A loop takes two lines: its state (what its human must do), task, iteration, elapsed time,
//! cost, criteria and diff; then, indented, its question when it waits on one, else the last
//! thing the agent said, else why it stopped. The rows come cleaned (`ralph_fleet::rows`);
//! they are cut to the width here, never wrapped, so a row is always two lines.

use std::time::{Duration, Instant};

use ralph_fleet::rows::{LoopRow, RowState, needing_you, state_words};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Widget};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

use super::FleetView;
use crate::countdown_view::format_span;
use crate::wrap::{Para, wrap};

/// The keys, at the foot of the view, in order, each with its rank: on a narrow terminal the
/// highest ranks are left out first, and `q quit` never.
const KEYS: [(&str, u8); 7] = [
    ("↑↓ select", 1),
    ("Enter answer", 0),
    ("d diff", 3),
    ("l land", 4),
    ("x stop", 2),
    ("r retry", 5),
    ("q quit", 0),
];
/// The key of its own the view adds while a question is open (the panel shows its keys), and
/// its short form for a narrow terminal.
const PANEL_KEYS: [&str; 2] = [
    "Ctrl+C back to the list (the question keeps waiting)",
    "Ctrl+C back to the list",
];
/// The most lines a note under the rows takes (a needs-land reason, with the command that
/// finishes the landing, takes four at 80 columns).
const NOTE_LINES: usize = 5;
/// The fewest columns the task keeps before the figures start going.
const TASK_MIN: usize = 20;

/// The row on one line, for plain mode and `ralph status --all`:
/// `ROOT: needs you · Fix the login · iteration 2/10 · 3m 12s · $0.42 · criteria 1/3 · +12 -3 ·
/// asks: Which database?`.
pub fn row_line(row: &LoopRow) -> String {
    let mut parts = vec![state_words(row)];
    if !row.task.is_empty() {
        parts.push(row.task.clone());
    }
    if row.max_iterations > 0 {
        parts.push(format!(
            "iteration {}/{}",
            row.iteration, row.max_iterations
        ));
    }
    if let Some(s) = row.elapsed_seconds {
        parts.push(format_span(Duration::from_secs(s)));
    }
    if let Some(c) = row.cost_usd {
        parts.push(format!("${c:.2}"));
    }
    if let (Some(d), Some(t)) = (row.criteria_done, row.criteria_total) {
        parts.push(format!("criteria {d}/{t}"));
    }
    if let Some(d) = row.diff {
        parts.push(d.to_string());
    }
    if let Some(detail) = detail(row) {
        parts.push(detail.prefix.to_owned() + &detail.text);
    }
    format!("{}: {}", row.root.display(), parts.join(" · "))
}

/// What a row's second line says, whole (the line cuts it to the width): for the note `Enter`
/// shows on a loop with no question waiting.
pub(super) fn whole_detail(row: &LoopRow) -> String {
    match detail(row) {
        Some(d) => format!(
            "No question waits in {} ({}); {}{}",
            row.name(),
            state_words(row),
            d.prefix,
            d.text
        ),
        None => format!("No question waits in {}.", row.name()),
    }
}

/// The second line of a row: what waits on its human, what the agent said, or why it stands.
struct Detail {
    prefix: &'static str,
    text: String,
    asks: bool,
}

fn detail(row: &LoopRow) -> Option<Detail> {
    if let Some(q) = &row.question
        && row.state == RowState::NeedsYou
    {
        return Some(Detail {
            prefix: "asks: ",
            // Markdown, as the agent wrote it: shown rendered, as the panel shows it.
            text: crate::markdown_first_line(q),
            asks: true,
        });
    }
    let quiet = matches!(row.state, RowState::Running | RowState::RateLimited);
    let (prefix, text) = match (&row.reason, &row.last_line) {
        (Some(r), _) if !quiet => ("why: ", r),
        (_, Some(l)) => ("said: ", l),
        (Some(r), None) => ("why: ", r),
        (None, None) => return None,
    };
    Some(Detail {
        prefix,
        text: text.clone(),
        asks: false,
    })
}

/// `s` cut to `width` columns (an ellipsis marks the cut), padded to it when `pad`.
fn fit(s: &str, width: usize, pad: bool) -> String {
    let mut out = String::new();
    let mut used = 0;
    if s.width() <= width {
        out.push_str(s);
        used = s.width();
    } else if width > 0 {
        for c in s.chars() {
            let w = c.width().unwrap_or(0);
            if used + w + 1 > width {
                break;
            }
            out.push(c);
            used += w;
        }
        out.push('…');
        used += 1;
    }
    if pad {
        out.extend(std::iter::repeat_n(' ', width.saturating_sub(used)));
    }
    out
}

/// The columns of a row's first line after the task, right-aligned, as cells.
fn figures(row: &LoopRow) -> [String; 5] {
    let iter = match row.max_iterations {
        0 => String::new(),
        max => format!("{}/{max}", row.iteration),
    };
    let elapsed = row
        .elapsed_seconds
        .map(|s| format_span(Duration::from_secs(s)))
        .unwrap_or_default();
    let cost = row.cost_usd.map(|c| format!("${c:.2}")).unwrap_or_default();
    let criteria = match (row.criteria_done, row.criteria_total) {
        (Some(d), Some(t)) => format!("{d}/{t}"),
        _ => String::new(),
    };
    let diff = row.diff.map(|d| d.to_string()).unwrap_or_default();
    [iter, elapsed, cost, criteria, diff]
}

/// The figures' widths and headings.
const FIGURES: [(&str, usize); 5] = [
    ("ITER", 5),
    ("TIME", 7),
    ("COST", 6),
    ("CRIT", 5),
    ("DIFF", 11),
];

/// The order the figures go in when the task would have fewer than [`TASK_MIN`] columns
/// (indices into [`FIGURES`]): cost, diff, criteria, time, and the iteration last.
const DROP_ORDER: [usize; 5] = [2, 4, 3, 1, 0];

/// The columns of a view `width` wide with a state column `state_w` wide: which figures show
/// (`shown[i]` for `FIGURES[i]`), and the task's width.
fn columns(width: usize, state_w: usize) -> ([bool; 5], usize) {
    let mut shown = [true; 5];
    let task_w = |shown: &[bool; 5]| {
        let figures_w: usize = FIGURES
            .iter()
            .zip(shown)
            .filter(|(_, s)| **s)
            .map(|((_, w), _)| w + 1)
            .sum();
        width.saturating_sub(2 + state_w + 1 + figures_w)
    };
    for i in DROP_ORDER {
        if task_w(&shown) >= TASK_MIN {
            break;
        }
        shown[i] = false;
    }
    let task = task_w(&shown).max(8);
    (shown, task)
}

/// The keys line for `width` columns: every key that fits, by rank, in their order.
fn keys_line(width: usize) -> String {
    let line = |max_rank: u8| {
        KEYS.iter()
            .filter(|(_, rank)| *rank <= max_rank)
            .map(|(k, _)| *k)
            .collect::<Vec<_>>()
            .join(" · ")
    };
    let most = KEYS.iter().map(|(_, r)| *r).max().unwrap_or(0);
    (0..=most)
        .rev()
        .map(line)
        .find(|l| l.width() <= width)
        .unwrap_or_else(|| line(0))
}

impl FleetView {
    fn state_style(&self, state: RowState) -> Style {
        let t = &self.theme;
        match state {
            RowState::NeedsYou => t.warning.add_modifier(Modifier::BOLD),
            RowState::Failed | RowState::NeedsReview => t.error,
            RowState::NeedsLand | RowState::Done => t.option_number,
            RowState::Landed => t.closed,
            RowState::Stopped | RowState::Queued => t.dim,
            RowState::Running | RowState::RateLimited | RowState::Landing => t.text,
        }
    }

    /// The header: how many loops, how many need their human.
    fn header(&self) -> Line<'static> {
        let t = &self.theme;
        let waiting = needing_you(&self.rows);
        let loops = match self.rows.len() {
            1 => "1 loop".to_owned(),
            n => format!("{n} loops"),
        };
        let need = match waiting {
            0 => Span::styled("nothing needs you", t.dim),
            1 => Span::styled("1 needs you", t.warning.add_modifier(Modifier::BOLD)),
            n => Span::styled(
                format!("{n} need you"),
                t.warning.add_modifier(Modifier::BOLD),
            ),
        };
        Line::from(vec![
            Span::styled("ralph fleet", t.title),
            Span::styled(" · ", t.dim),
            need,
            Span::styled(format!(" · {loops}"), t.dim),
        ])
    }

    /// A row's two lines at `width`, with the state column `state_w` wide.
    fn row_lines(&self, row: &LoopRow, width: usize, state_w: usize) -> [Line<'static>; 2] {
        let t = &self.theme;
        let selected = self.selected.as_ref() == Some(&row.root);
        let marker = if selected { "› " } else { "  " };
        let (shown, task_w) = columns(width, state_w);
        let task = if row.task.is_empty() {
            row.name()
        } else {
            row.task.clone()
        };
        let mut first = vec![
            Span::styled(marker, t.option_cursor),
            Span::styled(
                fit(&state_words(row), state_w, true),
                self.state_style(row.state),
            ),
            Span::raw(" "),
            Span::styled(fit(&task, task_w, true), t.text),
        ];
        for (((_, w), cell), _) in FIGURES
            .iter()
            .zip(figures(row))
            .zip(shown)
            .filter(|(_, shown)| *shown)
        {
            first.push(Span::styled(format!(" {cell:>w$}", w = *w), t.dim));
        }
        let mut first = Line::from(first);
        if selected {
            first = first.patch_style(Style::new().add_modifier(Modifier::BOLD));
        }
        let second = match detail(row) {
            Some(d) => {
                let style = if d.asks { t.warning } else { t.dim };
                let room = width.saturating_sub(4 + d.prefix.len());
                Line::from(vec![
                    Span::raw("    "),
                    Span::styled(d.prefix, t.dim),
                    Span::styled(fit(&d.text, room, false), style),
                ])
            }
            None => Line::from(""),
        };
        [first, second]
    }

    /// The column headings.
    fn headings(&self, width: usize, state_w: usize) -> Line<'static> {
        let (shown, task_w) = columns(width, state_w);
        let mut s = format!(
            "  {} {}",
            fit("STATE", state_w, true),
            fit("TASK", task_w, true)
        );
        for ((name, w), _) in FIGURES.iter().zip(shown).filter(|(_, shown)| *shown) {
            s.push_str(&format!(" {name:>w$}"));
        }
        Line::styled(s, self.theme.dim)
    }

    /// The rows that fit in `height` lines (two each), scrolled to keep the selection in view;
    /// the index of the first.
    fn visible(&self, height: usize) -> (usize, &[LoopRow]) {
        let fit = (height / 2).max(1);
        let at = self
            .selected
            .as_ref()
            .and_then(|s| self.rows.iter().position(|r| &r.root == s))
            .unwrap_or(0);
        let start = at
            .saturating_sub(fit - 1)
            .min(self.rows.len().saturating_sub(fit));
        let end = (start + fit).min(self.rows.len());
        (start, &self.rows[start..end])
    }

    /// Draws the view into `area` as it looks at `now`.
    pub fn render(&self, area: Rect, buf: &mut Buffer, now: Instant) {
        let area = area.intersection(buf.area);
        if area.is_empty() {
            return;
        }
        Clear.render(area, buf);
        let width = usize::from(area.width);
        let state_w = self
            .rows
            .iter()
            .map(|r| state_words(r).width())
            .max()
            .unwrap_or(0)
            .clamp(9, 24);
        let mut lines: Vec<Line<'static>> = vec![self.header()];
        // Wrapped, not cut: a note may end with the path of a log to read.
        let foot: Vec<Line<'static>> = match &self.note {
            Some(n) => {
                let para = Para::text(vec![Span::styled(n.clone(), self.theme.warning)]);
                let mut lines = wrap(&[para], area.width);
                lines.truncate(NOTE_LINES);
                lines
            }
            None => Vec::new(),
        };
        let keys = match self.open.is_some() {
            true => PANEL_KEYS
                .iter()
                .find(|k| k.width() <= width)
                .unwrap_or(&PANEL_KEYS[1])
                .to_string(),
            false => keys_line(width),
        };
        let keys = Line::styled(fit(&keys, width, false), self.theme.dim);
        let mut y = area.y;
        let put = |line: &Line<'static>, y: &mut u16, buf: &mut Buffer| {
            if *y < area.bottom() {
                line.render(Rect::new(area.x, *y, area.width, 1), buf);
                *y += 1;
            }
        };
        if let Some(open) = &self.open {
            // The loop the question is from, then the panel in the rest.
            if let Some(row) = self.rows.iter().find(|r| r.root == open.root) {
                lines.extend(self.row_lines(row, width, state_w));
            }
            for l in &lines {
                put(l, &mut y, buf);
            }
            let panel_h = area.bottom().saturating_sub(y + 1);
            open.panel
                .render(Rect::new(area.x, y, area.width, panel_h), buf, now);
            keys.render(Rect::new(area.x, area.bottom() - 1, area.width, 1), buf);
            return;
        }
        if self.rows.is_empty() {
            lines.push(Line::from(""));
            let empty = Para::text(vec![Span::styled(
                "No ralph loop on this machine yet: `ralph run` or `ralph fleet TASK.md...` starts one.",
                self.theme.dim,
            )]);
            lines.extend(wrap(&[empty], area.width));
        } else {
            lines.push(self.headings(width, state_w));
        }
        let room = usize::from(area.height).saturating_sub(lines.len() + foot.len() + 1);
        let (first, shown) = self.visible(room);
        if shown.len() < self.rows.len() {
            // Some rows are out of view: say which are in it, so none is taken for gone.
            lines[0].spans.push(Span::styled(
                format!(" · {}-{} shown", first + 1, first + shown.len()),
                self.theme.dim,
            ));
        }
        for row in shown {
            lines.extend(self.row_lines(row, width, state_w));
        }
        for l in lines.iter().chain(&foot) {
            put(l, &mut y, buf);
        }
        keys.render(Rect::new(area.x, area.bottom() - 1, area.width, 1), buf);
    }
}
