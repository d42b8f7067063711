//! The loop view's state, and how loop events and keys change it.
//!
//! [`App`] is pure: it takes a [`LoopEvent`] or a key with the current instant,
//! updates what the status area and the question panel show, and queues lines for the
//! scrollback. Drawing is in `view`; the terminal is the event loop's business. So every state
//! can be built in a test, without a terminal or a clock.
//!
//! Keys: with a question open, they go to the [`QuestionPanel`] and its actions become
//! [`Control`]s (`act`): an answer, a skip, "typing" (hold the countdown), "more time". The
//! last two are requests: the panel shows their effect when the loop sends its countdown back.
//! `Ctrl+C` is the loop view's own: the first stops the loop gracefully and the second kills
//! the agent; with a question open the first asks before stopping, because stopping leaves the
//! question pending and a stray `Ctrl+C` should not throw away a half-typed answer.

use std::time::{Duration, Instant};

use ralph_protocol::Control;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use ralph_protocol::{Ended, LoopEvent, Outcome, RaisedBy};
use ralph_signal::{AgentEvent, SignalKind};
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use crate::question_panel::clean;
use crate::theme::Theme;
use crate::{PanelAction, QuestionPanel, words};

/// Rows of the status area.
pub(crate) const STATUS_ROWS: u16 = 3;
/// Fewest rows the question panel gets, however short the terminal: countdown, question,
/// editor, hints.
const PANEL_MIN_ROWS: u16 = 4;
/// The most of the terminal's height the bottom area takes with the panel open, in percent.
const MAX_SHARE: u32 = 70;

/// What the status area and the question panel show, and what waits for the scrollback.
#[derive(Debug)]
pub(crate) struct App {
    pub theme: Theme,
    /// `ralph answer -C DIR` for this loop, for the hint.
    answer_command: String,
    bell_enabled: bool,
    /// Whether a question also asks the terminal for a desktop notification.
    pub desktop_notifications: bool,
    /// The text of a desktop notification not yet sent.
    notice: Option<String>,
    pub status: Status,
    pub question: Option<OpenQuestion>,
    /// "Stop the loop? y/N" is showing.
    pub confirm_stop: bool,
    pub stop: Stop,
    /// How the run ended, once it has.
    pub finished: Option<(Outcome, String)>,
    /// The loop went away without saying it finished.
    disconnected: bool,
    /// Lines for the scrollback, oldest first.
    out: Vec<Line<'static>>,
    bell: bool,
}

/// The facts the status area shows.
#[derive(Debug, Default)]
pub(crate) struct Status {
    pub task: Option<String>,
    pub agent: Option<String>,
    pub max_iterations: Option<u32>,
    pub iteration: Option<Iteration>,
    pub criteria: Option<(usize, usize)>,
    /// The last signal, and the verdict on it if it was a judged DONE.
    pub signal: Option<SignalKind>,
    pub verdict: Option<bool>,
    pub cost_usd: Option<f64>,
    pub tokens: Option<(u64, u64)>,
    pub activity: Activity,
}

/// The current (or last) iteration's clock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Iteration {
    pub number: u32,
    pub max: u32,
    pub started: Instant,
    pub timeout: Option<Duration>,
    /// How long it ran, once it ended; the clock stops.
    pub ended: Option<Duration>,
}

impl Iteration {
    /// Time since it started (frozen once it ended).
    pub(super) fn elapsed(&self, now: Instant) -> Duration {
        self.ended
            .unwrap_or_else(|| now.saturating_duration_since(self.started))
    }

    /// Time left before its time limit, while it runs and has one.
    pub(super) fn left(&self, now: Instant) -> Option<Duration> {
        if self.ended.is_some() {
            return None;
        }
        Some(self.timeout?.saturating_sub(self.elapsed(now)))
    }
}

/// What the loop is doing, for the status area's last line.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) enum Activity {
    /// Before the first iteration.
    #[default]
    Starting,
    /// The agent runs; its last tool call, if any.
    Working { tool: Option<String> },
    /// The test command runs: for how long, and the last line it printed.
    Testing {
        command: String,
        elapsed: Duration,
        last_line: Option<String>,
    },
    /// An iteration ended.
    Ended {
        iteration: u32,
        how: String,
        elapsed: Duration,
    },
    /// DONE was judged; the reason's first line.
    Judged { accepted: bool, reason: String },
    /// Rate limited: waiting until `until` before the agent runs again.
    Backoff { until: Instant },
}

/// A question on screen.
#[derive(Debug)]
pub(crate) struct OpenQuestion {
    pub panel: QuestionPanel,
    pub iteration: u32,
    pub raised_by: RaisedBy,
    /// An answer or a skip went to the loop; input waits for the loop to close the question.
    pub sending: Option<Sending>,
    /// Why the loop refused the last answer.
    pub refused: Option<String>,
}

/// What was sent for the open question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sending {
    Answer,
    Skip,
}

/// How far stopping has gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    Running,
    /// `Control::Stop` was sent (first Ctrl+C).
    Stopping,
    /// `Control::Kill` was sent (second Ctrl+C).
    Killing,
}

impl App {
    /// An empty view: nothing known until the loop says `Started`.
    pub(super) fn new(theme: Theme, answer_command: String, bell: bool) -> Self {
        Self {
            theme,
            answer_command,
            bell_enabled: bell,
            desktop_notifications: false,
            notice: None,
            status: Status::default(),
            question: None,
            confirm_stop: false,
            stop: Stop::Running,
            finished: None,
            disconnected: false,
            out: Vec::new(),
            bell: false,
        }
    }

    /// Whether the view should close: the loop finished or went away.
    pub(super) fn is_done(&self) -> bool {
        self.finished.is_some() || self.disconnected
    }

    /// The loop's event channel closed.
    pub(super) fn disconnected(&mut self) {
        if self.finished.is_none() {
            self.disconnected = true;
            self.note(self.theme.warning, "the loop stopped; why follows".into());
        }
    }

    /// The open question as the event that opened it (with the countdown as it is now), for
    /// a front end taking over mid-question.
    pub(super) fn open_question_event(&self) -> Option<LoopEvent> {
        let q = self.question.as_ref()?;
        Some(LoopEvent::QuestionAsked {
            question: q.panel.question().clone(),
            countdown: q.panel.countdown().clone(),
            asked_at: q.panel.asked_at(),
            raised_by: q.raised_by,
            iteration: q.iteration,
        })
    }

    /// Lines waiting for the scrollback, oldest first.
    pub(super) fn take_output(&mut self) -> Vec<Line<'static>> {
        std::mem::take(&mut self.out)
    }

    /// Whether to ring the bell (once per question).
    pub(super) fn take_bell(&mut self) -> bool {
        std::mem::take(&mut self.bell)
    }

    /// The desktop notification to send, if a question just arrived (once per question).
    pub(super) fn take_notice(&mut self) -> Option<String> {
        self.notice.take()
    }

    /// Applies an event from the loop.
    pub(super) fn on_event(&mut self, event: LoopEvent, now: Instant) {
        match event {
            LoopEvent::Started {
                task,
                agent,
                max_iterations,
                criteria,
            } => {
                let task = clean(&task);
                self.out.push(Line::from(vec![
                    Span::styled("ralph: ", self.theme.title),
                    Span::styled(task.clone(), self.theme.title),
                    Span::styled(
                        format!(
                            " · {}",
                            words::started_detail(&agent, max_iterations, criteria)
                        ),
                        self.theme.dim,
                    ),
                ]));
                self.status.task = Some(task);
                self.status.agent = Some(clean(&agent));
                self.status.max_iterations = Some(max_iterations);
                self.status.criteria = Some(criteria);
            }
            LoopEvent::IterationStarted {
                iteration,
                max_iterations,
                at,
                timeout,
            } => {
                self.out.push(Line::styled(
                    words::iteration_banner(iteration, max_iterations, timeout),
                    self.theme.title,
                ));
                self.status.iteration = Some(Iteration {
                    number: iteration,
                    max: max_iterations,
                    started: at,
                    timeout,
                    ended: None,
                });
                self.status.max_iterations = Some(max_iterations);
                self.status.activity = Activity::Working { tool: None };
                // A signal and its verdict belong to the iteration that gave them.
                self.status.signal = None;
                self.status.verdict = None;
            }
            LoopEvent::Agent(event) => self.on_agent(event),
            LoopEvent::AgentBatch(events) => {
                for event in events {
                    self.on_agent(event);
                }
            }
            LoopEvent::Stderr(line) => self.out.push(Line::styled(line, self.theme.dim)),
            LoopEvent::Signal(signal) => {
                self.status.signal = Some(signal.kind);
                self.status.verdict = None;
                self.note(self.theme.text, words::signalled(signal.kind));
            }
            LoopEvent::IterationEnded {
                iteration,
                how,
                elapsed,
            } => {
                if let Some(it) = self.status.iteration.as_mut() {
                    it.ended = Some(elapsed);
                }
                self.note(
                    self.theme.dim,
                    words::iteration_ended(iteration, &how, elapsed),
                );
                self.status.activity = Activity::Ended {
                    iteration,
                    how: clean(&how),
                    elapsed,
                };
            }
            LoopEvent::TestsStarted { command } => {
                self.note(self.theme.text, words::tests_started(&command));
                self.status.activity = Activity::Testing {
                    command: clean(&command),
                    elapsed: Duration::ZERO,
                    last_line: None,
                };
                // The iteration is not over until DONE is judged: its clock runs on.
                if let Some(it) = self.status.iteration.as_mut() {
                    it.ended = None;
                }
            }
            LoopEvent::TestsProgress {
                elapsed: now_at,
                last_line: last,
            } => {
                if let Activity::Testing {
                    elapsed, last_line, ..
                } = &mut self.status.activity
                {
                    *elapsed = now_at;
                    *last_line = last.map(|l| clean(&l));
                }
            }
            LoopEvent::Verdict { accepted, reason } => {
                // The clock that ran on through the tests stops with their verdict.
                if let Some(it) = self.status.iteration.as_mut()
                    && it.ended.is_none()
                    && matches!(self.status.activity, Activity::Testing { .. })
                {
                    it.ended = Some(now.saturating_duration_since(it.started));
                }
                let style = if accepted {
                    self.theme.closed
                } else {
                    self.theme.warning
                };
                self.note(style, words::verdict(accepted, &reason));
                let reason = clean(&reason);
                if !accepted {
                    for line in reason.lines() {
                        self.out
                            .push(Line::styled(format!("  {line}"), self.theme.warning));
                    }
                }
                self.status.signal = Some(SignalKind::Done);
                self.status.verdict = Some(accepted);
                self.status.activity = Activity::Judged {
                    accepted,
                    reason: reason.lines().next().unwrap_or_default().to_owned(),
                };
            }
            LoopEvent::Criteria { checked, total } => {
                self.status.criteria = Some((checked, total));
            }
            LoopEvent::QuestionAsked {
                question,
                countdown,
                asked_at,
                iteration,
                raised_by,
            } => {
                let first = crate::plain::markdown_first_line(&question.text);
                self.note(
                    self.theme.title,
                    format!("{}: {first}", words::asks(iteration)),
                );
                self.note(
                    self.theme.dim,
                    format!(
                        "answer below, or from any terminal: {}",
                        ralph_protocol::answer_hint(&self.answer_command)
                    ),
                );
                if self.desktop_notifications {
                    self.notice = Some(first);
                }
                let panel = QuestionPanel::new(question, countdown, asked_at, now)
                    .with_theme(self.theme.clone());
                self.question = Some(OpenQuestion {
                    panel,
                    iteration,
                    raised_by,
                    sending: None,
                    refused: None,
                });
                self.bell = self.bell_enabled;
            }
            LoopEvent::AnswerLink(url) => {
                self.note(self.theme.dim, words::answer_link(&url));
            }
            LoopEvent::Countdown(countdown) => {
                // The one countdown, the loop's: it answers our Typing and Extend, and the
                // extensions asked from elsewhere (`ralph serve`'s page).
                if let Some(q) = self.question.as_mut() {
                    q.panel.show_countdown(countdown, now);
                }
            }
            LoopEvent::QuestionClosed(how) => self.close_question(&how),
            LoopEvent::AnswerRefused { reason } => {
                let reason = clean(&reason);
                match self.question.as_mut() {
                    Some(q) => {
                        q.sending = None;
                        q.refused = Some(reason);
                    }
                    None => self.note(self.theme.warning, reason),
                }
            }
            LoopEvent::Warning(text) => {
                self.note(self.theme.warning, words::warning(&text));
            }
            LoopEvent::Note(text) => self.note(self.theme.text, clean(&text)),
            LoopEvent::Backoff { until, reason } => {
                let wait = until.saturating_duration_since(now);
                self.note(self.theme.warning, words::backoff(&reason, wait));
                self.status.activity = Activity::Backoff { until };
            }
            LoopEvent::Finished { outcome, reason } => {
                let style = match outcome {
                    Outcome::Done => self.theme.closed,
                    Outcome::Interrupted | Outcome::MaxIterations => self.theme.warning,
                    _ => self.theme.error,
                };
                let mut summary = words::finished(&outcome, &reason);
                if let Some(cost) = self.status.cost_usd {
                    summary.push_str(&format!(" · {}", words::cost(cost)));
                }
                self.note(style, summary);
                if let Some(it) = self.status.iteration.as_mut()
                    && it.ended.is_none()
                {
                    it.ended = Some(now.saturating_duration_since(it.started));
                }
                self.question = None;
                self.confirm_stop = false;
                self.finished = Some((outcome, clean(&reason)));
            }
        }
    }

    fn on_agent(&mut self, event: AgentEvent) {
        match event {
            // One event carries every line one read of the agent's output showed.
            AgentEvent::Text(text) => {
                for line in text.split('\n') {
                    self.out
                        .push(Line::styled(line.to_owned(), self.theme.text));
                }
            }
            AgentEvent::ToolCall { name, summary } => {
                let name = clean(&name);
                let summary = clean(&summary);
                let said = words::tool_call(&name, &summary);
                // The tool's name stands out; what it was given does not.
                let (call, args) = said.split_at("▸ ".len() + name.len());
                self.out.push(Line::from(vec![
                    Span::styled(call.to_owned(), self.theme.option_number),
                    Span::styled(args.to_owned(), self.theme.dim),
                ]));
                let tool = if summary.is_empty() {
                    name
                } else {
                    format!("{name} {summary}")
                };
                self.status.activity = Activity::Working { tool: Some(tool) };
            }
            // Successful results are noise next to the calls; failures are worth a line.
            AgentEvent::ToolResult {
                summary,
                is_error: true,
            } => self.out.push(Line::styled(
                format!("  {}", words::tool_failed(&summary)),
                self.theme.error,
            )),
            AgentEvent::Usage(usage) => {
                if let Some(cost) = usage.cost_usd {
                    *self.status.cost_usd.get_or_insert(0.0) += cost;
                }
                if usage.input_tokens.is_some() || usage.output_tokens.is_some() {
                    let (i, o) = self.status.tokens.get_or_insert((0, 0));
                    *i += usage.input_tokens.unwrap_or(0);
                    *o += usage.output_tokens.unwrap_or(0);
                }
            }
            AgentEvent::Error(text) => self.out.push(Line::styled(
                format!("✗ {}", words::agent_error(&text)),
                self.theme.error,
            )),
            // Signals arrive as `LoopEvent::Signal`; the rest is for the log.
            AgentEvent::ToolResult { .. }
            | AgentEvent::Signal(_)
            | AgentEvent::SessionId(_)
            | AgentEvent::TurnEnd { .. }
            | AgentEvent::Unknown(_)
            | AgentEvent::ControlRequest(_) => {}
            AgentEvent::RateLimited { message, .. } => self.out.push(Line::styled(
                format!("✗ {}", words::agent_rate_limited(&message)),
                self.theme.error,
            )),
        }
    }

    fn close_question(&mut self, how: &Ended) {
        self.confirm_stop = false;
        let Some(q) = self.question.take() else {
            return;
        };
        // Options picked and text typed are never dropped in silence: whatever closes the
        // question, they stay in the scrollback, with how to send them still when that helps.
        let unsent = q.panel.unsent();
        let (keep_unsent, late) = match how {
            Ended::Answered { here: true, .. } => (false, false),
            Ended::Answered { .. } | Ended::Skipped => (true, false),
            Ended::TimedOut | Ended::Interrupted => (true, true),
        };
        let said = words::question_closed(how, q.panel.question().default.as_deref());
        let style = match how {
            Ended::Answered { .. } => self.theme.closed,
            Ended::TimedOut | Ended::Interrupted => self.theme.warning,
            Ended::Skipped => self.theme.text,
        };
        self.note(style, said);
        if let Some(unsent) = unsent.filter(|_| keep_unsent) {
            // Whole, every line of it: it may be all the human wrote.
            let unsent = clean(&unsent);
            let mut lines = unsent.lines();
            let first = lines.next().unwrap_or_default();
            self.note(self.theme.dim, format!("your draft was not sent: {first}"));
            for line in lines {
                self.out
                    .push(Line::styled(format!("       {line}"), self.theme.dim));
            }
            if late {
                self.note(
                    self.theme.dim,
                    format!(
                        "to send it still: {}",
                        ralph_protocol::answer_hint(&self.answer_command)
                    ),
                );
            }
        }
    }

    /// The next instant the view changes by itself: the countdown's next tick, or the
    /// iteration clock's next second. `None` when nothing moves without an event.
    pub(super) fn next_tick(&self, now: Instant) -> Option<Instant> {
        if self.is_done() {
            return None;
        }
        let panel = self
            .question
            .as_ref()
            .and_then(|q| q.panel.next_redraw(now));
        let clock = match self.status.activity {
            // The backoff countdown ticks every second until the retry.
            Activity::Backoff { until } if until > now => {
                // When the whole seconds shown change.
                let left = until - now;
                let fraction = left - Duration::from_secs(left.as_secs());
                Some(
                    now + if fraction.is_zero() {
                        Duration::from_secs(1)
                    } else {
                        fraction
                    },
                )
            }
            _ => self
                .status
                .iteration
                .filter(|it| it.ended.is_none())
                .map(|it| {
                    let elapsed = now.saturating_duration_since(it.started);
                    it.started + Duration::from_secs(elapsed.as_secs() + 1)
                }),
        };
        match (panel, clock) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Rows the bottom area wants on a `width` x `screen_height` terminal: the status area,
    /// and the question panel's full height if open, all capped at [`MAX_SHARE`] percent of
    /// the terminal (but never so low the panel is unusable).
    pub(super) fn height(&self, width: u16, screen_height: u16) -> u16 {
        let Some(q) = &self.question else {
            return STATUS_ROWS.min(screen_height).max(1);
        };
        let cap = (u32::from(screen_height) * MAX_SHARE / 100) as u16;
        let panel = q
            .panel
            .desired_height(width)
            .min(cap.saturating_sub(STATUS_ROWS).max(PANEL_MIN_ROWS));
        (STATUS_ROWS + panel).min(screen_height).max(1)
    }

    /// Queues a line of ralph's own.
    fn note(&mut self, style: Style, text: String) {
        self.out.push(Line::from(vec![
            Span::styled("ralph: ", self.theme.title),
            Span::styled(text, style),
        ]));
    }

    /// Applies a key press; the control to send to the loop, if any.
    pub(super) fn on_key(&mut self, key: KeyEvent, now: Instant) -> Option<Control> {
        if key.kind == KeyEventKind::Release || self.is_done() {
            return None;
        }
        let ctrl_c = matches!(key.code, KeyCode::Char('c' | 'C'))
            && key.modifiers.contains(KeyModifiers::CONTROL);
        if self.confirm_stop {
            self.confirm_stop = false;
            // Anything but yes keeps waiting; a second Ctrl+C means yes.
            let yes = ctrl_c || matches!(key.code, KeyCode::Char('y' | 'Y'));
            return yes.then(|| self.stop_now());
        }
        if ctrl_c {
            return match self.stop {
                Stop::Running if self.question.is_some() => {
                    self.confirm_stop = true;
                    None
                }
                Stop::Running => Some(self.stop_now()),
                Stop::Stopping | Stop::Killing => {
                    self.stop = Stop::Killing;
                    Some(Control::Kill)
                }
            };
        }
        if self.stop != Stop::Running {
            return None;
        }
        let q = self.question.as_mut()?;
        if q.sending.is_some() {
            return None;
        }
        let action = q.panel.handle_key(key, now);
        self.act(action)
    }

    /// Applies pasted text; the control to send, if any.
    pub(super) fn on_paste(&mut self, text: &str) -> Option<Control> {
        if self.confirm_stop {
            self.confirm_stop = false;
            return None;
        }
        if self.stop != Stop::Running || self.is_done() {
            return None;
        }
        let q = self.question.as_mut()?;
        if q.sending.is_some() {
            return None;
        }
        let action = q.panel.handle_paste(text);
        self.act(action)
    }

    fn stop_now(&mut self) -> Control {
        self.stop = Stop::Stopping;
        Control::Stop
    }

    fn act(&mut self, action: PanelAction) -> Option<Control> {
        let q = self.question.as_mut()?;
        match action {
            PanelAction::Submit(text) => {
                q.sending = Some(Sending::Answer);
                q.refused = None;
                Some(Control::Answer(text))
            }
            PanelAction::Skip => {
                q.sending = Some(Sending::Skip);
                q.refused = None;
                Some(Control::Skip)
            }
            PanelAction::Typing => {
                q.refused = None;
                Some(Control::Typing)
            }
            PanelAction::Extend => Some(Control::Extend),
            PanelAction::None | PanelAction::Redraw | PanelAction::RefusedEmpty => None,
        }
    }
}
