//! Drawing the bottom area: the question panel (when open) above the status area.
//!
//! The status area is three rows:
//!
//! 1. a rule with the task on the left and the iteration, its clock and its time left on the
//!    right;
//! 2. the facts: agent, criteria, last signal (and the verdict on it), cost, tokens;
//! 3. what is going on now, or what ralph needs from the person, and the key for stopping.
//!
//! Each row is fitted to the width by dropping the least important parts first, so a
//! 40-column terminal still shows the iteration, the time left, the criteria and what is
//! going on.

use std::time::Instant;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use crate::countdown_view::{format_left, format_span};
use crate::tui::app::{Activity, App, STATUS_ROWS, Sending, Stop};
use crate::words::{cost as format_cost, signal_name};
use crate::wrap::str_width;

/// Fewest columns the task name keeps on the first row before the iteration text shrinks.
const MIN_TASK: usize = 10;

impl App {
    /// Draws the bottom area into `area` as it looks at `now`.
    pub(super) fn render(&self, area: Rect, buf: &mut Buffer, now: Instant) {
        let area = area.intersection(buf.area);
        if area.is_empty() {
            return;
        }
        let status_rows = if self.question.is_some() {
            // A short terminal gives the panel its rows first: the question matters more.
            area.height.saturating_sub(4).clamp(1, STATUS_ROWS)
        } else {
            STATUS_ROWS
        }
        .min(area.height);
        let panel_area = Rect {
            height: area.height - status_rows,
            ..area
        };
        let status_area = Rect {
            y: area.y + panel_area.height,
            height: status_rows,
            ..area
        };
        if let Some(q) = &self.question
            && !panel_area.is_empty()
        {
            q.panel.view(now).render(panel_area, buf);
        }
        let [rule, facts, activity] = self.status_lines(area.width, now);
        let rows: &[&Line] = match status_rows {
            1 => &[&activity],
            2 => &[&rule, &activity],
            _ => &[&rule, &facts, &activity],
        };
        for (i, line) in rows.iter().enumerate() {
            let y = status_area.y + i as u16;
            for x in status_area.left()..status_area.right() {
                buf[(x, y)].reset();
            }
            buf.set_line(status_area.x, y, line, status_area.width);
        }
    }

    /// The status area's three rows at `width` columns.
    pub(crate) fn status_lines(&self, width: u16, now: Instant) -> [Line<'static>; 3] {
        let width = usize::from(width);
        [
            self.rule_line(width, now),
            self.facts_line(width),
            self.activity_line(width, now),
        ]
    }

    /// `─ Task ───────── iteration 2/10 · 1m 05s · 8m 55s left ─`
    fn rule_line(&self, width: usize, now: Instant) -> Line<'static> {
        let theme = &self.theme;
        let s = &self.status;
        let task = s.task.clone().unwrap_or_else(|| "ralph".to_owned());
        let mut variants: Vec<Vec<Span<'static>>> = Vec::new();
        match s.iteration {
            Some(it) => {
                let n = format!("{}/{}", it.number, it.max);
                let elapsed = format_span(it.elapsed(now));
                let left = it.left(now).map(|left| {
                    let style = if left.as_secs() < 60 {
                        theme.warning
                    } else {
                        theme.text
                    };
                    Span::styled(format!("{} left", format_left(left)), style)
                });
                let dot = || Span::styled(" · ", theme.dim);
                let long = Span::styled(format!("iteration {n}"), theme.text);
                let short = Span::styled(n, theme.text);
                let clock = Span::styled(elapsed, theme.dim);
                match left {
                    Some(left) => {
                        variants.push(vec![long.clone(), dot(), clock, dot(), left.clone()]);
                        variants.push(vec![long, dot(), left.clone()]);
                        variants.push(vec![short.clone(), dot(), left]);
                    }
                    None => {
                        variants.push(vec![long.clone(), dot(), clock.clone()]);
                        variants.push(vec![short.clone(), dot(), clock]);
                        variants.push(vec![long]);
                    }
                }
                variants.push(vec![short]);
            }
            None => {
                if let Some(max) = s.max_iterations {
                    variants.push(vec![Span::styled(crate::up_to_iterations(max), theme.dim)]);
                    variants.push(vec![Span::styled(format!("0/{max}"), theme.dim)]);
                }
            }
        }
        // "─ " + task + " " ... " " + right + " ─"
        let frame = 2 + 1 + 1 + 2;
        let task_w = str_width(&task).min(MIN_TASK);
        let right = variants
            .iter()
            .find(|v| spans_w(v) + task_w + frame <= width)
            .or(variants.last())
            .cloned()
            .unwrap_or_default();
        let right_w = if right.is_empty() {
            0
        } else {
            spans_w(&right) + 3
        };
        let task = truncate(&task, width.saturating_sub(right_w + 4));
        let mut spans = vec![
            Span::styled("─ ", theme.border),
            Span::styled(task, theme.title),
            Span::styled(" ", theme.border),
        ];
        let used = spans_w(&spans) + right_w;
        spans.push(Span::styled(
            "─".repeat(width.saturating_sub(used)),
            theme.border,
        ));
        if !right.is_empty() {
            spans.push(Span::styled(" ", theme.border));
            spans.extend(right);
            spans.push(Span::styled(" ─", theme.border));
        }
        Line::from(spans)
    }

    /// `claude · criteria 3/5 · DONE rejected · $0.42 · 12.3k in / 4.1k out tokens`
    fn facts_line(&self, width: usize) -> Line<'static> {
        let theme = &self.theme;
        let s = &self.status;
        // (priority, spans): lower numbers stay when space is short; shown in this order.
        let mut items: Vec<(u8, Vec<Span<'static>>)> = Vec::new();
        if let Some(agent) = &s.agent {
            items.push((4, vec![Span::styled(agent.clone(), theme.text)]));
        }
        if let Some((checked, total)) = s.criteria {
            let style = if total > 0 && checked == total {
                theme.closed
            } else {
                theme.text
            };
            items.push((
                1,
                vec![
                    Span::styled("criteria ", theme.dim),
                    Span::styled(format!("{checked}/{total}"), style),
                ],
            ));
        }
        if let Some(kind) = s.signal {
            let name = signal_name(kind);
            let spans = match s.verdict {
                Some(true) => vec![Span::styled(format!("{name} accepted"), theme.closed)],
                Some(false) => vec![Span::styled(format!("{name} rejected"), theme.warning)],
                None => vec![
                    Span::styled("signal ", theme.dim),
                    Span::styled(name, theme.text),
                ],
            };
            items.push((2, spans));
        }
        if let Some(cost) = s.cost_usd {
            items.push((3, vec![Span::styled(format_cost(cost), theme.text)]));
        }
        if let Some((input, output)) = s.tokens {
            items.push((
                5,
                vec![Span::styled(
                    format!(
                        "{} in / {} out tokens",
                        format_count(input),
                        format_count(output)
                    ),
                    theme.dim,
                )],
            ));
        }
        if items.is_empty() {
            return Line::default();
        }
        let sep = Span::styled(" · ", theme.dim);
        let mut by_priority: Vec<usize> = (0..items.len()).collect();
        by_priority.sort_by_key(|&i| items[i].0);
        let mut kept = vec![false; items.len()];
        let mut used = 0;
        for i in by_priority {
            let extra = spans_w(&items[i].1) + if used == 0 { 0 } else { 3 };
            if used + extra <= width {
                used += extra;
                kept[i] = true;
            }
        }
        let mut spans = Vec::new();
        for (i, (_, item)) in items.into_iter().enumerate() {
            if kept[i] {
                if !spans.is_empty() {
                    spans.push(sep.clone());
                }
                spans.extend(item);
            }
        }
        Line::from(spans)
    }

    /// What is going on, left; the key that stops the loop, right.
    fn activity_line(&self, width: usize, now: Instant) -> Line<'static> {
        let theme = &self.theme;
        let (text, style, hint): (String, Style, &str) = if self.confirm_stop {
            (
                "Stop the loop? The question stays pending for the next run. y/N".into(),
                theme.warning,
                "",
            )
        } else if self.stop == Stop::Killing {
            ("killing the agent…".into(), theme.error, "")
        } else if self.stop == Stop::Stopping {
            ("stopping… Ctrl+C again kills now".into(), theme.warning, "")
        } else if let Some((_, reason)) = &self.finished {
            (format!("finished: {reason}"), theme.closed, "")
        } else if let Some(q) = &self.question {
            match (&q.refused, q.sending) {
                (Some(reason), _) => (reason.clone(), theme.error, "Ctrl+C stop"),
                (None, Some(Sending::Answer)) => {
                    ("sending your answer…".into(), theme.dim, "Ctrl+C stop")
                }
                (None, Some(Sending::Skip)) => ("skipping…".into(), theme.dim, "Ctrl+C stop"),
                (None, None) => (
                    format!(
                        "the agent waits for your answer (iteration {})",
                        q.iteration
                    ),
                    theme.title,
                    "Ctrl+C stop",
                ),
            }
        } else {
            let (text, style) = match &self.status.activity {
                Activity::Starting => ("starting…".to_owned(), theme.dim),
                Activity::Working { tool: None } => ("the agent is working…".into(), theme.dim),
                Activity::Working { tool: Some(tool) } => (format!("▸ {tool}"), theme.dim),
                Activity::Testing {
                    command,
                    elapsed,
                    last_line,
                } => {
                    let mut text =
                        format!("running the tests ({}): {command}", format_span(*elapsed));
                    if let Some(last) = last_line {
                        text.push_str(&format!(" · {last}"));
                    }
                    (text, theme.text)
                }
                Activity::Ended {
                    iteration,
                    how,
                    elapsed,
                } => (
                    format!(
                        "iteration {iteration} ended: the agent {how} after {}",
                        format_span(*elapsed)
                    ),
                    theme.dim,
                ),
                Activity::Judged {
                    accepted: true,
                    reason,
                } => (format!("DONE accepted: {reason}"), theme.closed),
                Activity::Judged {
                    accepted: false,
                    reason,
                } => (format!("DONE rejected: {reason}"), theme.warning),
                Activity::Backoff { until } => (
                    format!(
                        "rate limited: next attempt in {}",
                        format_span(until.saturating_duration_since(now))
                    ),
                    theme.warning,
                ),
            };
            (text, style, "Ctrl+C stop")
        };
        let hint_w = str_width(hint);
        // Keep the hint only if the message keeps a useful width beside it.
        let show_hint = hint_w > 0 && width >= hint_w + 3 + 16.min(str_width(&text));
        let text_room = if show_hint { width - hint_w - 3 } else { width };
        let text = truncate(&text, text_room);
        let mut spans = vec![Span::styled(text, style)];
        if show_hint {
            let gap = width - spans_w(&spans) - hint_w;
            spans.push(Span::raw(" ".repeat(gap)));
            spans.push(Span::styled(hint, theme.dim));
        }
        Line::from(spans)
    }
}

fn spans_w(spans: &[Span<'_>]) -> usize {
    spans.iter().map(Span::width).sum()
}

/// `text` cut to `width` columns, ending in `…` when cut.
pub(crate) fn truncate(text: &str, width: usize) -> String {
    if str_width(text) <= width {
        return text.to_owned();
    }
    if width == 0 {
        return String::new();
    }
    let mut out = String::new();
    let mut used = 0;
    for g in Line::raw(text).styled_graphemes(Style::new()) {
        let w = str_width(g.symbol);
        if used + w + 1 > width {
            break;
        }
        used += w;
        out.push_str(g.symbol);
    }
    out.push('…');
    out
}

/// `950`, `12.3k`, `1.2M`.
fn format_count(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}
