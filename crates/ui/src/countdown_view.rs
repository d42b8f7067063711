//! The countdown as a person sees it: time left in words and a bar that changes colour.
//!
//! The words come first and the bar takes what width is left, so a narrow terminal still
//! says how long there is. What is drawn is the loop's countdown; time asked for and not yet
//! granted by the loop is said apart, as asked for, never added to the time left. The bar is yellow in the last 20% of the time and red and bold in
//! the last ten seconds; the monochrome theme uses bold and reverse instead.

use std::time::{Duration, Instant};

use ralph_protocol::{Countdown, IDLE_RESUME};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{LineGauge, Widget};

use crate::theme::Theme;
use crate::wrap::str_width;

/// Time left in the last stretch that turns the countdown red.
pub(crate) const URGENT: Duration = Duration::from_secs(10);

/// `4m 12s`, `42s`, `1h 05m`: whole seconds, rounded up so `0s` only shows at the end.
pub(crate) fn format_left(d: Duration) -> String {
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m {:02}s", secs / 60, secs % 60),
        _ => format!("{}h {:02}m", secs / 3600, secs % 3600 / 60),
    }
}

/// `5m`, `1h 05m`, `30s`: a span of time rounded down, without zero parts; under a second in
/// milliseconds (`250ms`), so a short limit or a quick agent does not read `0s`.
pub(crate) fn format_span(d: Duration) -> String {
    let secs = d.as_secs();
    if secs == 0 && !d.is_zero() {
        return format!("{}ms", d.as_millis());
    }
    match (secs / 3600, secs % 3600 / 60, secs % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m {s:02}s"),
        (h, m, _) => format!("{h}h {m:02}m"),
    }
}

/// How urgent the countdown looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Urgency {
    Calm,
    Paused,
    /// Last 20% of the total.
    Low,
    /// Last ten seconds, or over.
    Urgent,
}

pub(crate) fn urgency(countdown: &Countdown, now: Instant) -> Urgency {
    let (Some(left), Some(total)) = (countdown.remaining(now), countdown.total()) else {
        return Urgency::Calm;
    };
    if left <= URGENT {
        Urgency::Urgent
    } else if left.as_secs_f64() <= total.as_secs_f64() * 0.2 {
        Urgency::Low
    } else if countdown.is_paused(now) {
        Urgency::Paused
    } else {
        Urgency::Calm
    }
}

/// Draws the countdown line into `area` (one row is used); `asked` is time asked for that
/// the loop has not granted yet.
pub(crate) fn render(
    countdown: &Countdown,
    asked: Option<Duration>,
    now: Instant,
    theme: &Theme,
    area: Rect,
    buf: &mut Buffer,
) {
    if area.is_empty() {
        return;
    }
    let area = Rect { height: 1, ..area };
    let Some(left) = countdown.remaining(now) else {
        let line = Line::from(Span::styled(
            "no deadline — the agent waits for your answer",
            theme.dim,
        ));
        buf.set_line(area.x, area.y, &line, area.width);
        return;
    };
    let style = style_for(urgency(countdown, now), theme);
    let label = label(countdown, asked, left, now, usize::from(area.width));
    let ratio = match countdown.total() {
        Some(total) if !total.is_zero() => {
            (left.as_secs_f64() / total.as_secs_f64()).clamp(0.0, 1.0)
        }
        _ => 0.0,
    };
    LineGauge::default()
        .label(Line::from(Span::styled(label, style)))
        .ratio(ratio)
        .filled_symbol("━")
        .unfilled_symbol("─")
        .filled_style(style)
        .unfilled_style(theme.gauge_track)
        .render(area, buf);
}

/// The words of the countdown: the longest variant that leaves room for a short bar, or the
/// shortest one when none does.
fn label(
    countdown: &Countdown,
    asked: Option<Duration>,
    left: Duration,
    now: Instant,
    width: usize,
) -> String {
    if left.is_zero() {
        return "time's up".to_owned();
    }
    let mut time = format!("{} left", format_left(left));
    if !countdown.extended_by().is_zero() {
        time.push_str(&format!(
            " (+{} extended)",
            format_span(countdown.extended_by())
        ));
    }
    if let Some(asked) = asked {
        time.push_str(&format!(" · asking for +{}", format_span(asked)));
    }
    let variants: Vec<String> = if countdown.is_paused(now) {
        vec![
            format!(
                "{time} · paused while you type — resumes {} after you stop",
                format_span(IDLE_RESUME)
            ),
            format!("{time} · paused while you type"),
            format!("{} left · paused", format_left(left)),
        ]
    } else {
        vec![time, format!("{} left", format_left(left))]
    };
    let mut variants = variants;
    variants.push(format_left(left));
    const MIN_BAR: usize = 8;
    variants
        .iter()
        .find(|v| str_width(v) + 1 + MIN_BAR <= width)
        .or(variants.last())
        .cloned()
        .unwrap_or_default()
}

/// The next instant at which the countdown line looks different: a whole second of the time
/// left passes, or the countdown pauses, resumes or expires.
pub(crate) fn next_change(countdown: &Countdown, now: Instant) -> Option<Instant> {
    let wake = countdown.next_wake(now);
    if countdown.is_paused(now) {
        return wake;
    }
    let tick = countdown
        .remaining(now)
        .filter(|d| !d.is_zero())
        .map(|left| {
            let fraction = Duration::from_nanos(u64::from(left.subsec_nanos()));
            now + if fraction.is_zero() {
                Duration::from_secs(1)
            } else {
                fraction
            }
        });
    match (wake, tick) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The style of the countdown's words and filled bar.
pub(crate) fn style_for(urgency: Urgency, theme: &Theme) -> Style {
    match urgency {
        Urgency::Calm => theme.gauge,
        Urgency::Paused => theme.gauge_paused,
        Urgency::Low => theme.gauge_low,
        Urgency::Urgent => theme.gauge_urgent,
    }
}

#[cfg(test)]
mod tests {
    use ralph_protocol::EXTEND_BY;

    use super::*;

    const fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn time_left_reads_naturally() {
        assert_eq!(format_left(Duration::ZERO), "0s");
        assert_eq!(format_left(Duration::from_millis(1)), "1s");
        assert_eq!(format_left(secs(42)), "42s");
        assert_eq!(format_left(secs(252)), "4m 12s");
        assert_eq!(format_left(secs(300)), "5m 00s");
        assert_eq!(format_left(secs(3900)), "1h 05m");
        assert_eq!(format_span(secs(300)), "5m");
        assert_eq!(format_span(secs(5)), "5s");
        assert_eq!(format_span(secs(330)), "5m 30s");
        assert_eq!(format_span(secs(3900)), "1h 05m");
        assert_eq!(format_span(Duration::from_millis(250)), "250ms");
        assert_eq!(format_span(Duration::from_micros(300)), "0ms");
        assert_eq!(format_span(Duration::ZERO), "0s");
    }

    #[test]
    fn urgency_follows_the_time_left() {
        let t0 = Instant::now();
        let c = Countdown::new(Some(secs(100)), t0);
        assert_eq!(urgency(&c, t0), Urgency::Calm);
        assert_eq!(urgency(&c, t0 + secs(80)), Urgency::Low);
        assert_eq!(urgency(&c, t0 + secs(90)), Urgency::Urgent);
        assert_eq!(urgency(&c, t0 + secs(200)), Urgency::Urgent);
        let mut paused = c;
        paused.typing(t0 + secs(10));
        assert_eq!(urgency(&paused, t0 + secs(11)), Urgency::Paused);
        assert_eq!(urgency(&Countdown::new(None, t0), t0), Urgency::Calm);
    }

    #[test]
    fn next_change_is_the_next_whole_second_or_the_pause_edge() {
        let t0 = Instant::now();
        let mut c = Countdown::new(Some(Duration::from_millis(4300)), t0);
        assert_eq!(next_change(&c, t0), Some(t0 + Duration::from_millis(300)));
        let t1 = t0 + Duration::from_millis(300);
        assert_eq!(next_change(&c, t1), Some(t1 + secs(1)));
        c.typing(t1);
        assert_eq!(next_change(&c, t1), Some(t1 + IDLE_RESUME));
        c.extend(EXTEND_BY, t1);
        assert_eq!(next_change(&Countdown::new(None, t0), t0), None);
        let done = Countdown::new(Some(Duration::ZERO), t0);
        assert_eq!(next_change(&done, t0), None);
    }
}
