//! What ralph says about each loop event: the one place that turns a [`LoopEvent`]'s facts into
//! sentences, for both the terminal view and plain line mode.
//!
//! The front ends decide layout (a `ralph: ` prefix, an indent, a colour, which events earn a
//! line at all); the words come from here, so the two never drift apart. Every function takes
//! agent-written text raw and strips it ([`clean`]) before it reaches a sentence.
//!
//! [`LoopEvent`]: ralph_protocol::LoopEvent

use std::time::Duration;

use ralph_protocol::{Ended, Outcome};
use ralph_signal::{SignalKind, Usage};

use crate::countdown_view::format_span;
use crate::question_panel::clean;

/// `── iteration 2/10 · time limit 10m ──`.
pub(crate) fn iteration_banner(iteration: u32, max: u32, timeout: Option<Duration>) -> String {
    let limit = timeout
        .map(|t| format!(" · time limit {}", format_span(t)))
        .unwrap_or_default();
    format!("── iteration {iteration}/{max}{limit} ──")
}

/// `agent claude · up to 10 iterations · criteria 1/3 checked`, after the task.
pub(crate) fn started_detail(agent: &str, max_iterations: u32, criteria: (usize, usize)) -> String {
    format!(
        "agent {} · {} · criteria {}/{} checked",
        clean(agent),
        crate::up_to_iterations(max_iterations),
        criteria.0,
        criteria.1
    )
}

/// `criteria 2/3 checked`.
pub(crate) fn criteria(checked: usize, total: usize) -> String {
    format!("criteria {checked}/{total} checked")
}

/// `▸ Bash cargo test`.
pub(crate) fn tool_call(name: &str, summary: &str) -> String {
    format!("▸ {} {}", clean(name), clean(summary))
}

/// `↳ error[E0425]: …`: a failed tool call's result (successful ones are noise next to the call).
pub(crate) fn tool_failed(summary: &str) -> String {
    format!("↳ {}", clean(summary))
}

/// `usage $0.0420 · 1200 tokens in, 300 out`, or `None` when the report says nothing.
pub(crate) fn usage(u: &Usage) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(c) = u.cost_usd {
        parts.push(format!("${c:.4}"));
    }
    if let (Some(i), Some(o)) = (u.input_tokens, u.output_tokens) {
        parts.push(format!("{i} tokens in, {o} out"));
    }
    (!parts.is_empty()).then(|| format!("usage {}", parts.join(" · ")))
}

/// The agent's own error report.
pub(crate) fn agent_error(text: &str) -> String {
    format!("the agent reported an error: {}", clean(text))
}

/// The agent's own rate-limit report.
pub(crate) fn agent_rate_limited(message: &str) -> String {
    format!("the agent is rate limited: {}", clean(message))
}

/// `DONE`, `QUESTION`, `GUTTER`.
pub(crate) fn signal_name(kind: SignalKind) -> &'static str {
    match kind {
        SignalKind::Done => "DONE",
        SignalKind::Question => "QUESTION",
        SignalKind::Gutter => "GUTTER",
    }
}

/// `the agent signalled DONE`.
pub(crate) fn signalled(kind: SignalKind) -> String {
    format!("the agent signalled {}", signal_name(kind))
}

/// `iteration 3 ended: the agent exited 0 after 1m 20s`.
pub(crate) fn iteration_ended(iteration: u32, how: &str, elapsed: Duration) -> String {
    format!(
        "iteration {iteration} ended: the agent {} after {}",
        clean(how),
        format_span(elapsed)
    )
}

/// DONE was signalled and the test command runs.
pub(crate) fn tests_started(command: &str) -> String {
    format!("DONE signalled; running the tests: {}", clean(command))
}

/// The test command still runs: for how long, and the last line it printed.
pub(crate) fn tests_running(elapsed: Duration, last_line: Option<&str>) -> String {
    let mut line = format!("the tests have run {}", format_span(elapsed));
    if let Some(last) = last_line {
        line.push_str(&format!(" · {}", clean(last)));
    }
    line
}

/// The verdict's first line; a rejection's reason follows on lines of its own.
pub(crate) fn verdict(accepted: bool, reason: &str) -> String {
    if accepted {
        format!("DONE accepted: {}", clean(reason))
    } else {
        "DONE rejected; the next iteration is told why:".to_owned()
    }
}

/// `the agent asks (iteration 2)`.
pub(crate) fn asks(iteration: u32) -> String {
    format!("the agent asks (iteration {iteration})")
}

/// `Or answer on its page: URL`: the waiting question's link from `ralph serve`, as the
/// terminal view, plain lines and `ralph status` say it.
pub fn answer_link(url: &str) -> String {
    format!("Or answer on its page: {}", clean(url))
}

/// How a question's wait ended, given the question's default.
pub(crate) fn question_closed(how: &Ended, default: Option<&str>) -> String {
    match how {
        Ended::Answered {
            answer, here: true, ..
        } => format!("answer sent to the agent: {}", one_line(&answer.text)),
        Ended::Answered { answer, .. } => format!(
            "answered from {}: {}",
            clean(&answer.source()),
            one_line(&answer.text)
        ),
        Ended::TimedOut => format!(
            "no answer in time; the agent goes on with {}",
            ralph_protocol::fallback_words(default)
        ),
        Ended::Skipped => format!(
            "question skipped; the agent goes on with {}",
            ralph_protocol::fallback_words(default)
        ),
        Ended::Interrupted => {
            "stopping; the question stays pending for the next `ralph run`".to_owned()
        }
    }
}

/// After a timeout, where nothing else says so: the question can still be answered.
pub(crate) const LATE_ANSWER: &str = "a late `ralph answer` still reaches a later iteration";

/// The loop's countdown changed (extended, paused, or no deadline).
pub(crate) fn countdown_now(left: Option<Duration>) -> String {
    match left {
        Some(l) => format!("deadline extended: {} left", format_span(l)),
        None => "no deadline".to_owned(),
    }
}

/// A loop warning.
pub(crate) fn warning(text: &str) -> String {
    format!("warning: {}", clean(text))
}

/// The loop is rate limited (its own agent was, or another loop's of the same agent) and
/// waits `wait` before it runs the agent again.
pub(crate) fn backoff(reason: &str, wait: Duration) -> String {
    format!(
        "the agent is rate limited ({}); the next attempt is in {} (Ctrl-C stops)",
        clean(reason),
        format_span(wait)
    )
}

/// `finished: DONE accepted (exit 0)`.
pub(crate) fn finished(outcome: &Outcome, reason: &str) -> String {
    format!("finished: {} (exit {})", clean(reason), outcome.exit_code())
}

/// An option's label (or description, or the default) on one line: a line break in it would
/// print a line that reads like one of ralph's.
pub fn label(text: &str) -> String {
    ralph_protocol::one_line(&clean(text), LABEL_CHARS)
}

/// The most of a label shown on its line.
const LABEL_CHARS: usize = 500;

/// The first line of `text`, cleaned, with `…` if there was more.
pub(crate) fn one_line(text: &str) -> String {
    let text = clean(text.trim());
    let mut lines = text.lines();
    let first = lines.next().unwrap_or_default().to_owned();
    if lines.next().is_some() {
        format!("{first} …")
    } else {
        first
    }
}

/// `$0.042`, `$1.30`.
pub(crate) fn cost(cost: f64) -> String {
    if cost < 0.995 {
        format!("${cost:.3}")
    } else {
        format!("${cost:.2}")
    }
}

#[cfg(test)]
mod tests {
    use ralph_protocol::{Answer, AnsweredBy};

    use super::*;

    #[test]
    fn both_front_ends_close_a_question_in_the_same_words() {
        assert_eq!(
            question_closed(&Ended::TimedOut, Some("Redis")),
            "no answer in time; the agent goes on with its default (Redis)"
        );
        assert_eq!(
            question_closed(&Ended::Skipped, None),
            "question skipped; the agent goes on with its best guess"
        );
        assert_eq!(
            question_closed(
                &Ended::answered(
                    Answer::new("Memcached\nbecause", AnsweredBy::RalphAnswer, None),
                    false
                ),
                None
            ),
            "answered from `ralph answer`: Memcached …"
        );
    }

    #[test]
    fn a_label_with_a_line_break_stays_on_one_line() {
        assert!(!label("Redis\nralph: DONE accepted").contains('\n'));
    }
}
