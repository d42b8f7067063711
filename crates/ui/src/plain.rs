//! Plain line mode: the loop as lines of text, for pipes, CI, dumb terminals and `--no-tui`.
//!
//! Every line the agent printed comes out as it arrives (control sequences already stripped by
//! the decoder); ralph's own lines start with `ralph:`. When a question waits, it is printed in
//! full with the time left and the command that answers it from elsewhere. If standard input is
//! a terminal, a line typed here answers it (a number picks an option); otherwise the loop
//! simply waits for `ralph answer` or the deadline.

use std::io::{BufRead, IsTerminal, Write};
use std::time::{Duration, Instant};

use ralph_protocol::{Control, Countdown, Ended, LoopEvent, Picks, Question, clean};
use ralph_signal::AgentEvent;
use tokio::sync::mpsc;

use crate::words::{self, label};

/// How the plain front end behaves.
#[derive(Debug, Clone)]
pub struct PlainOptions {
    /// `ralph answer -C DIR` for this loop ([`ralph_protocol::answer_command`]), for the
    /// hint.
    pub answer_command: String,
    /// Ring the terminal bell when a question arrives.
    pub bell: bool,
    /// Ask the terminal for a desktop notification (OSC 9 / OSC 777) when a question arrives.
    pub desktop: bool,
}

struct Open {
    question: Question,
    countdown: Countdown,
    reminders: Vec<Duration>,
}

/// Shows loop events as lines until the loop finishes; forwards typed answers and signals.
pub async fn run_plain(
    mut events: mpsc::Receiver<LoopEvent>,
    controls: mpsc::UnboundedSender<Control>,
    opts: PlainOptions,
) {
    let stdout_tty = std::io::stdout().is_terminal();
    let mut lines = stdin_lines();
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout());
    let mut open: Option<Open> = None;
    let never = tokio::time::Instant::now() + Duration::from_secs(365 * 24 * 3600);
    loop {
        let reminder_at = open
            .as_ref()
            .and_then(|o| next_reminder(o, Instant::now()))
            .map(tokio::time::Instant::from_std)
            .unwrap_or(never);
        tokio::select! {
            ev = events.recv() => {
                let Some(ev) = ev else { break };
                let mut finished = matches!(ev, LoopEvent::Finished { .. });
                show(&mut out, ev, &mut open, &opts, stdout_tty);
                // Batch what is already queued into one write; flush when caught up. A
                // `Finished` among them ends the view too: the loop may keep the channel open a
                // while longer (a notification thread holding a sender), and the view must not
                // wait for it.
                while !finished && let Ok(ev) = events.try_recv() {
                    finished = matches!(ev, LoopEvent::Finished { .. });
                    show(&mut out, ev, &mut open, &opts, stdout_tty);
                }
                let _ = out.flush();
                if finished { break; }
            }
            Some(line) = recv_opt(&mut lines) => {
                if let Some(o) = &open {
                    match interpret(&o.question, &line) {
                        Typed::Answer(text) => { let _ = controls.send(Control::Answer(text)); }
                        Typed::Skip => { let _ = controls.send(Control::Skip); }
                        Typed::Empty => {
                            let _ = writeln!(out, "ralph: type an answer and press Enter (a number picks an option), or /skip to let the agent decide");
                        }
                        Typed::OutOfRange(n) => {
                            let _ = writeln!(out, "ralph: there is no option {n}; the options are 1 to {} (/text {} sends that as the answer itself)", o.question.options.len(), line.trim());
                        }
                        Typed::NotOne => {
                            let _ = writeln!(out, "ralph: the question takes one option: type one number (/text {} sends that as the answer itself)", line.trim());
                        }
                    }
                    let _ = out.flush();
                }
            }
            () = tokio::time::sleep_until(reminder_at) => {
                if let Some(o) = open.as_mut() {
                    let now = Instant::now();
                    if let Some(left) = o.countdown.remaining(now) {
                        let _ = writeln!(out, "ralph: {} left to answer", fmt_duration(left));
                        let _ = out.flush();
                    }
                    o.reminders.retain(|r| o.countdown.remaining(now).is_some_and(|left| left > *r + Duration::from_millis(500)));
                }
            }
        }
    }
    let _ = out.flush();
}

fn next_reminder(open: &Open, now: Instant) -> Option<Instant> {
    let left = open.countdown.remaining(now)?;
    let next = open.reminders.iter().filter(|r| **r < left).max()?;
    Some(now + (left - *next))
}

async fn recv_opt(rx: &mut Option<mpsc::UnboundedReceiver<String>>) -> Option<String> {
    match rx {
        Some(rx) => match rx.recv().await {
            Some(line) => Some(line),
            None => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}

/// Lines typed on a terminal; `None` when stdin is not one (then nobody is there to type).
fn stdin_lines() -> Option<mpsc::UnboundedReceiver<String>> {
    if !std::io::stdin().is_terminal() {
        return None;
    }
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::Builder::new()
        .name("stdin-lines".into())
        .spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        })
        .ok()?;
    Some(rx)
}

#[derive(Debug, PartialEq, Eq)]
enum Typed {
    Answer(String),
    Skip,
    Empty,
    OutOfRange(String),
    NotOne,
}

/// A typed line: `/skip`, option numbers (`2`, or `1,3` for multi-select), `/text` and the
/// answer (a number meant as itself, as `ralph answer --as-text`), or free text.
fn interpret(q: &Question, line: &str) -> Typed {
    let line = line.trim();
    if line.is_empty() {
        return Typed::Empty;
    }
    if line == "/skip" {
        return Typed::Skip;
    }
    if let Some(text) = line.strip_prefix("/text ").map(str::trim)
        && !text.is_empty()
    {
        return Typed::Answer(text.to_string());
    }
    match q.picks(line) {
        Some(Picks::Labels(labels)) => Typed::Answer(labels),
        Some(Picks::OutOfRange(n)) => Typed::OutOfRange(n),
        Some(Picks::NotOne(_)) => Typed::NotOne,
        None => Typed::Answer(line.to_string()),
    }
}

fn show(
    out: &mut impl Write,
    ev: LoopEvent,
    open: &mut Option<Open>,
    opts: &PlainOptions,
    tty: bool,
) {
    let _ = match ev {
        LoopEvent::Started {
            task,
            agent,
            max_iterations,
            criteria,
        } => writeln!(
            out,
            "ralph: {}\nralph: {}",
            clean(&task),
            words::started_detail(&agent, max_iterations, criteria)
        ),
        LoopEvent::IterationStarted {
            iteration,
            max_iterations,
            timeout,
            ..
        } => writeln!(
            out,
            "ralph: {}",
            words::iteration_banner(iteration, max_iterations, timeout)
        ),
        LoopEvent::Agent(event) => agent_event(out, &event),
        LoopEvent::AgentBatch(events) => {
            for event in events {
                show(out, LoopEvent::Agent(event), open, opts, tty);
            }
            Ok(())
        }
        LoopEvent::Stderr(line) => writeln!(out, "  stderr: {line}"),
        LoopEvent::Signal(s) => writeln!(
            out,
            "ralph: {} (output line {})",
            words::signalled(s.kind),
            s.line_number
        ),
        LoopEvent::IterationEnded {
            iteration,
            how,
            elapsed,
        } => writeln!(
            out,
            "ralph: {}",
            words::iteration_ended(iteration, &how, elapsed)
        ),
        LoopEvent::TestsStarted { command } => {
            writeln!(out, "ralph: {}", words::tests_started(&command))
        }
        // Every 10 s: a line a second would bury the agent's output.
        LoopEvent::TestsProgress { elapsed, last_line } if elapsed.as_secs() % 10 == 0 => {
            writeln!(
                out,
                "ralph: {}",
                words::tests_running(elapsed, last_line.as_deref())
            )
        }
        LoopEvent::TestsProgress { .. } => Ok(()),
        LoopEvent::Verdict { accepted, reason } => {
            let _ = writeln!(out, "ralph: {}", words::verdict(accepted, &reason));
            if !accepted {
                for l in clean(&reason).lines() {
                    let _ = writeln!(out, "  {l}");
                }
            }
            Ok(())
        }
        LoopEvent::Criteria { checked, total } => {
            writeln!(out, "ralph: {}", words::criteria(checked, total))
        }
        LoopEvent::QuestionAsked {
            question,
            countdown,
            iteration,
            ..
        } => {
            let now = Instant::now();
            if opts.bell && tty {
                let _ = write!(out, "\x07");
            }
            if opts.desktop && tty {
                let first = markdown_first_line(&question.text);
                let _ = write!(
                    out,
                    "{}",
                    crate::terminal_notification::terminal_notification(
                        "ralph: the agent asks",
                        &first
                    )
                );
            }
            let _ = writeln!(out, "ralph: ──── {} ────", words::asks(iteration));
            for l in markdown_lines(&question.text, TEXT_WIDTH) {
                let _ = writeln!(out, "  {l}");
            }
            if let Some(c) = &question.context {
                // Every line indented, so none passes for one of ralph's own.
                let lines = markdown_lines(c, TEXT_WIDTH);
                let _ = writeln!(out, "  ({})", lines.join("\n   "));
            }
            for (i, o) in question.options.iter().enumerate() {
                let default = if question.default.as_deref() == Some(o.label.as_str()) {
                    " (default)"
                } else {
                    ""
                };
                let desc = o
                    .description
                    .as_deref()
                    .map(|d| format!(" — {}", label(d)))
                    .unwrap_or_default();
                let _ = writeln!(out, "    {}. {}{default}{desc}", i + 1, label(&o.label));
            }
            if let Some(d) = &question.default
                && !question.options.iter().any(|o| &o.label == d)
            {
                let _ = writeln!(out, "  Default if nobody answers: {}", label(d));
            }
            let left = match countdown.remaining(now) {
                Some(l) if l.is_zero() => "no time to wait (question_timeout is 0)".to_string(),
                Some(l) => format!("{} left", fmt_duration(l)),
                None => "no deadline".to_string(),
            };
            let how = if std::io::stdin().is_terminal() {
                "Type your answer and press Enter (a number picks an option, /skip lets the agent decide), or answer from any terminal:"
            } else {
                "Answer from any terminal:"
            };
            let _ = writeln!(
                out,
                "  {how}\n    {}\n  {left}",
                ralph_protocol::answer_hint(&opts.answer_command)
            );
            let reminders = match countdown.remaining(now) {
                Some(total) => [Duration::from_secs(60), Duration::from_secs(10)]
                    .into_iter()
                    .filter(|r| *r < total)
                    .collect(),
                None => Vec::new(),
            };
            *open = Some(Open {
                question,
                countdown,
                reminders,
            });
            Ok(())
        }
        LoopEvent::AnswerLink(url) => writeln!(out, "  {}", words::answer_link(&url)),
        LoopEvent::Countdown(c) => {
            let line = words::countdown_now(c.remaining(Instant::now()));
            if let Some(o) = open.as_mut() {
                o.countdown = c;
            }
            writeln!(out, "ralph: {line}")
        }
        LoopEvent::QuestionClosed(how) => {
            let default = open.take().and_then(|o| o.question.default);
            let _ = writeln!(
                out,
                "ralph: {}",
                words::question_closed(&how, default.as_deref())
            );
            if how == Ended::TimedOut {
                let _ = writeln!(out, "ralph: {}", words::LATE_ANSWER);
            }
            Ok(())
        }
        LoopEvent::AnswerRefused { reason } => writeln!(out, "ralph: {}", clean(&reason)),
        // On stderr, as git and cargo warn: `ralph run > log` keeps them on the screen. What
        // came before goes out first, so the order on a terminal stays.
        LoopEvent::Warning(w) => {
            let _ = out.flush();
            writeln!(std::io::stderr(), "ralph: {}", words::warning(&w))
        }
        LoopEvent::Note(n) => writeln!(out, "ralph: {}", clean(&n)),
        LoopEvent::Backoff { until, reason } => writeln!(
            out,
            "ralph: {}",
            words::backoff(
                &reason,
                until.saturating_duration_since(tokio::time::Instant::now().into_std())
            )
        ),
        LoopEvent::Finished { outcome, reason } => {
            writeln!(out, "ralph: {}", words::finished(&outcome, &reason))
        }
    };
}

/// Writes what the agent did as plain lines: its words as they are, a tool call or a failed
/// tool indented, usage and errors as ralph's own lines; the rest (session ids, turn ends)
/// shows nothing. The loop's plain view and `ralph logs` both show the agent this way.
pub fn agent_event(out: &mut impl Write, event: &AgentEvent) -> std::io::Result<()> {
    match event {
        AgentEvent::Text(line) => writeln!(out, "{line}"),
        AgentEvent::ToolCall { name, summary } => {
            writeln!(out, "  {}", words::tool_call(name, summary))
        }
        AgentEvent::ToolResult {
            summary,
            is_error: true,
        } => writeln!(out, "    {}", words::tool_failed(summary)),
        AgentEvent::Usage(u) => match words::usage(u) {
            Some(usage) => writeln!(out, "ralph: {usage}"),
            None => Ok(()),
        },
        AgentEvent::Error(e) => writeln!(out, "ralph: {}", words::agent_error(e)),
        _ => Ok(()),
    }
}

/// The agent's last line worth showing in a one-line summary (`ralph status`, the fleet's
/// rows): the last line of its words, or its last tool call, among `events`. A line that
/// carried a signal is shown without the tag (the loop's state says it better), and skipped
/// when nothing else was on it.
pub fn last_line(events: &[AgentEvent]) -> Option<String> {
    // A signal comes right after the text whose last line carried it.
    let mut signalled = false;
    for e in events.iter().rev() {
        match e {
            AgentEvent::Signal(_) => signalled = true,
            AgentEvent::Text(text) => {
                let mut lines = text.lines().rev();
                let last = lines.next().map(|l| match signalled {
                    true => ralph_signal::without_tags(l),
                    false => l.to_owned(),
                });
                let found = last
                    .iter()
                    .map(String::as_str)
                    .chain(lines)
                    .map(str::trim)
                    .find(|l| !l.is_empty())
                    .map(clean);
                if found.is_some() {
                    return found;
                }
                signalled = false;
            }
            AgentEvent::ToolCall { name, summary } => return Some(words::tool_call(name, summary)),
            _ => {}
        }
    }
    None
}

/// How wide plain renderings of a question's markdown are (the indent comes on top).
pub const TEXT_WIDTH: u16 = 96;

/// A question's markdown (the agent's question, its context) as plain lines `width` wide:
/// rendered, not shown raw (`**Redis**` is `Redis`), control characters stripped.
pub fn markdown_lines(markdown: &str, width: u16) -> Vec<String> {
    crate::markdown::plain_lines(&clean(markdown), width)
}

/// The first line of a question's markdown, rendered, for a one-line mention (the
/// scrollback's, a notification's).
pub fn markdown_first_line(markdown: &str) -> String {
    markdown_lines(markdown, u16::MAX)
        .into_iter()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.trim().to_owned())
        .unwrap_or_default()
}

/// `4m 12s`, `1h 05m`, `9s`: what a person reads at a glance, as the terminal view shows it.
pub fn fmt_duration(d: Duration) -> String {
    crate::countdown_view::format_span(d)
}

#[cfg(test)]
mod tests {
    use ralph_protocol::Outcome;

    use super::*;

    #[test]
    fn the_last_line_is_the_agent_s_words_not_the_signal_tag_that_ended_them() {
        let signal = |line: &str| {
            AgentEvent::Signal(ralph_signal::Signal {
                kind: ralph_signal::SignalKind::Question,
                line: line.into(),
                line_number: 2,
            })
        };
        let text = |t: &str| AgentEvent::Text(t.into());
        let asked = [
            text("I need to choose a cache backend.\n<ralph>QUESTION</ralph>"),
            signal("<ralph>QUESTION</ralph>"),
        ];
        assert_eq!(
            last_line(&asked).as_deref(),
            Some("I need to choose a cache backend.")
        );
        let said_with_it = [
            text("first\nAll green <ralph>DONE</ralph>"),
            signal("All green <ralph>DONE</ralph>"),
        ];
        assert_eq!(last_line(&said_with_it).as_deref(), Some("All green"));
        // A text of only the tag: the words before it, in an earlier text.
        let alone = [
            text("Tests pass."),
            text("<ralph>DONE</ralph>"),
            signal("<ralph>DONE</ralph>"),
        ];
        assert_eq!(last_line(&alone).as_deref(), Some("Tests pass."));
        // No signal followed (a tag in a code span is not one): shown as written.
        let quoted = [text("I print `<ralph>DONE</ralph>` when done")];
        assert_eq!(
            last_line(&quoted).as_deref(),
            Some("I print `<ralph>DONE</ralph>` when done")
        );
    }

    #[test]
    fn typed_lines_are_picks_skips_or_text() {
        use ralph_protocol::QuestionOption;
        let q = Question {
            options: ["Redis", "Memcached", "LRU"]
                .map(QuestionOption::new)
                .to_vec(),
            ..Question::plain("Which cache?")
        };
        let answer = |s: &str| Typed::Answer(s.to_string());
        assert_eq!(interpret(&q, " 2 "), answer("Memcached"));
        assert_eq!(interpret(&q, "16"), Typed::OutOfRange("16".into()));
        assert_eq!(interpret(&q, "1,2"), Typed::NotOne);
        assert_eq!(interpret(&q, "/text 16"), answer("16"));
        assert_eq!(interpret(&q, "/text  2 "), answer("2"));
        assert_eq!(interpret(&q, "/text"), answer("/text"));
        assert_eq!(interpret(&q, "/skip"), Typed::Skip);
        assert_eq!(interpret(&q, "  "), Typed::Empty);
        assert_eq!(interpret(&q, "use Redis"), answer("use Redis"));
    }

    /// Regression: a `Finished` read from the queue behind another event ended only the inner
    /// batch, and the view then waited for the channel to close, which a notification thread
    /// still holding a sender (a dead webhook) kept open for seconds.
    #[tokio::test]
    async fn a_finished_event_queued_behind_another_ends_the_view_with_the_channel_open() {
        let (tx, rx) = mpsc::channel(8);
        let (controls, _controls_rx) = mpsc::unbounded_channel();
        tx.send(LoopEvent::Agent(AgentEvent::Text("last words".into())))
            .await
            .unwrap();
        tx.send(LoopEvent::Finished {
            outcome: Outcome::MaxIterations,
            reason: "max_iterations reached".into(),
        })
        .await
        .unwrap();
        let opts = PlainOptions {
            answer_command: String::new(),
            bell: false,
            desktop: false,
        };
        let ended =
            tokio::time::timeout(Duration::from_secs(10), run_plain(rx, controls, opts)).await;
        assert!(ended.is_ok(), "the view waited for the channel to close");
        drop(tx);
    }
}
