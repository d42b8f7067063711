//! The loop view's update logic: loop events into state and scrollback lines, keys into
//! controls, and the Ctrl+C flow. Time is injected; nothing sleeps.

use std::time::{Duration, Instant, SystemTime};

use ralph_protocol::{
    Answer, AnsweredBy, Control, Countdown, Ended, LoopEvent, Outcome, Question, QuestionOption,
    RaisedBy,
};
use ralph_signal::{AgentEvent, Signal, SignalKind, Usage};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::text::Line;

use crate::theme::Theme;
use crate::tui::app::{Activity, App, STATUS_ROWS, Sending, Stop};

pub(crate) const fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

pub(crate) fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

pub(crate) fn ctrl_c() -> KeyEvent {
    KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)
}

pub(crate) fn app() -> App {
    App::new(
        Theme::monochrome(),
        "ralph answer -C /work/cache".into(),
        true,
    )
}

pub(crate) fn started() -> LoopEvent {
    LoopEvent::Started {
        task: "Add a session cache".into(),
        agent: "claude".into(),
        max_iterations: 10,
        criteria: (1, 4),
    }
}

pub(crate) fn iteration(n: u32, at: Instant, timeout: Option<Duration>) -> LoopEvent {
    LoopEvent::IterationStarted {
        iteration: n,
        max_iterations: 10,
        at,
        timeout,
    }
}

pub(crate) fn cache_question() -> Question {
    Question {
        options: vec![
            QuestionOption {
                label: "Redis".into(),
                description: Some("already deployed in staging".into()),
            },
            QuestionOption::new("Memcached"),
        ],
        default: Some("Redis".into()),
        ..Question::plain("Should the session cache use **Redis** or *Memcached*?")
    }
}

pub(crate) fn asked(question: Question, wait: Option<Duration>, now: Instant) -> LoopEvent {
    LoopEvent::QuestionAsked {
        question,
        countdown: Countdown::new(wait, now),
        asked_at: SystemTime::now(),
        raised_by: RaisedBy::Signal,
        iteration: 1,
    }
}

pub(crate) fn finished() -> LoopEvent {
    LoopEvent::Finished {
        outcome: Outcome::Done,
        reason: "every criterion is checked and the tests pass".into(),
    }
}

/// The question answered in the view's own terminal with `text`, as the loop says so.
pub(crate) fn answered_here(text: &str) -> Ended {
    Ended::answered(Answer::new(text, AnsweredBy::Terminal, None), true)
}

/// Presses `key` in the view. A pause or an extension it asks of the loop is answered as the
/// loop answers it: its countdown, changed, comes back as `LoopEvent::Countdown`.
pub(crate) fn press(app: &mut App, key: KeyEvent, now: Instant) -> Option<Control> {
    let control = app.on_key(key, now)?;
    if let Some(q) = &app.question {
        // The view shows the loop's countdown as last sent: the loop's own, in this test.
        let mut theirs = q.panel.countdown().clone();
        if control.change_countdown(&mut theirs, now) {
            app.on_event(LoopEvent::Countdown(theirs), now);
        }
    }
    Some(control)
}

/// The bottom area as drawn at `now` on an 80 x 40 terminal.
fn drawn(app: &App, now: Instant) -> String {
    let backend = TestBackend::new(80, app.height(80, 40));
    let mut terminal = Terminal::new(backend).unwrap();
    terminal
        .draw(|f| app.render(f.area(), f.buffer_mut(), now))
        .unwrap();
    terminal.backend().to_string()
}

fn text(lines: &[Line]) -> Vec<String> {
    lines
        .iter()
        .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
        .collect()
}

fn type_str(app: &mut App, s: &str, now: Instant) -> Vec<Control> {
    s.chars()
        .filter_map(|c| app.on_key(key(KeyCode::Char(c)), now))
        .collect()
}

#[test]
fn events_fill_the_status_and_the_scrollback() {
    let t0 = Instant::now();
    let mut app = app();
    app.on_event(started(), t0);
    app.on_event(iteration(1, t0, Some(secs(600))), t0);
    app.on_event(
        LoopEvent::Agent(AgentEvent::Text("Reading the code.\n\nIt is short.".into())),
        t0,
    );
    app.on_event(
        LoopEvent::Agent(AgentEvent::ToolCall {
            name: "Edit".into(),
            summary: "src/cache.rs".into(),
        }),
        t0,
    );
    app.on_event(
        LoopEvent::Agent(AgentEvent::ToolResult {
            summary: "ok".into(),
            is_error: false,
        }),
        t0,
    );
    app.on_event(
        LoopEvent::Agent(AgentEvent::ToolResult {
            summary: "error[E0425]: cannot find value `ttl`".into(),
            is_error: true,
        }),
        t0,
    );
    app.on_event(LoopEvent::Stderr("warning: unused import".into()), t0);
    for _ in 0..2 {
        app.on_event(
            LoopEvent::Agent(AgentEvent::Usage(Usage {
                cost_usd: Some(0.25),
                input_tokens: Some(1000),
                output_tokens: Some(500),
            })),
            t0,
        );
    }
    app.on_event(
        LoopEvent::Criteria {
            checked: 3,
            total: 4,
        },
        t0,
    );
    assert_eq!(
        text(&app.take_output()),
        [
            "ralph: Add a session cache · agent claude · up to 10 iterations · criteria 1/4 checked",
            "── iteration 1/10 · time limit 10m ──",
            "Reading the code.",
            "",
            "It is short.",
            "▸ Edit src/cache.rs",
            "  ↳ error[E0425]: cannot find value `ttl`",
            "warning: unused import",
        ]
    );
    let s = &app.status;
    assert_eq!(s.task.as_deref(), Some("Add a session cache"));
    assert_eq!(s.criteria, Some((3, 4)));
    assert_eq!(s.cost_usd, Some(0.5));
    assert_eq!(s.tokens, Some((2000, 1000)));
    assert_eq!(
        s.activity,
        Activity::Working {
            tool: Some("Edit src/cache.rs".into())
        }
    );
    let it = s.iteration.unwrap();
    assert_eq!(it.left(t0 + secs(100)), Some(secs(500)));
    assert!(app.take_output().is_empty(), "taken once");
}

/// Regression (issue 25, item 14): the status line kept showing `QUESTION` during the next
/// iteration, as if the agent had asked again.
#[test]
fn the_status_line_forgets_the_last_iteration_s_signal() {
    let t0 = Instant::now();
    let mut app = app();
    app.on_event(started(), t0);
    app.on_event(iteration(1, t0, None), t0);
    app.on_event(
        LoopEvent::Signal(Signal {
            kind: SignalKind::Question,
            line: "<ralph>QUESTION</ralph>".into(),
            line_number: 3,
        }),
        t0,
    );
    let line = |app: &App| {
        app.status_lines(120, t0)
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(line(&app).contains("QUESTION"), "{}", line(&app));
    app.on_event(iteration(2, t0, None), t0);
    assert_eq!(app.status.signal, None);
    assert!(!line(&app).contains("QUESTION"), "{}", line(&app));
}

#[test]
fn a_rejected_done_shows_in_the_status_and_the_reason_in_the_scrollback() {
    let t0 = Instant::now();
    let mut app = app();
    app.on_event(started(), t0);
    app.on_event(iteration(1, t0, None), t0);
    app.on_event(
        LoopEvent::Signal(Signal {
            kind: SignalKind::Done,
            line: "<ralph>DONE</ralph>".into(),
            line_number: 12,
        }),
        t0,
    );
    assert_eq!(app.status.signal, Some(SignalKind::Done));
    assert_eq!(app.status.verdict, None);
    app.on_event(
        LoopEvent::IterationEnded {
            iteration: 1,
            how: "exited 0".into(),
            elapsed: secs(65),
        },
        t0 + secs(65),
    );
    // The clock stops when the iteration ends.
    assert_eq!(
        app.status.iteration.unwrap().elapsed(t0 + secs(500)),
        secs(65)
    );
    app.on_event(
        LoopEvent::Verdict {
            accepted: false,
            reason: "2 criteria are still open:\n- [ ] expire entries".into(),
        },
        t0,
    );
    assert_eq!(app.status.verdict, Some(false));
    assert_eq!(
        app.status.activity,
        Activity::Judged {
            accepted: false,
            reason: "2 criteria are still open:".into()
        }
    );
    let out = text(&app.take_output());
    assert_eq!(
        out[out.len() - 3..],
        [
            "ralph: DONE rejected; the next iteration is told why:",
            "  2 criteria are still open:",
            "  - [ ] expire entries",
        ]
    );
}

#[test]
fn a_question_opens_the_panel_rings_once_and_sends_the_answer() {
    let t0 = Instant::now();
    let mut app = app();
    app.on_event(started(), t0);
    assert_eq!(app.height(80, 40), STATUS_ROWS);
    app.on_event(asked(cache_question(), Some(secs(300)), t0), t0);
    assert!(app.question.is_some());
    assert!(app.take_bell());
    assert!(!app.take_bell(), "the bell rings once per question");
    assert!(app.height(80, 40) > STATUS_ROWS);
    let out = text(&app.take_output());
    assert!(
        // Rendered, not raw (issue 34, item 14: the scrollback echoed `**Redis**`).
        out.contains(&"ralph: the agent asks (iteration 1): Should the session cache use Redis or Memcached?".to_owned()),
        "{out:?}"
    );
    assert!(
        out.iter()
            .any(|l| l.contains("ralph answer -C /work/cache")),
        "{out:?}"
    );

    // Typing asks the loop to hold the countdown; Ctrl+E asks it for more time.
    let controls = type_str(&mut app, "Redis, with a TTL", t0 + secs(5));
    assert!(
        controls.iter().all(|c| *c == Control::Typing),
        "{controls:?}"
    );
    assert_eq!(
        app.on_key(KeyEvent::new(KeyCode::Char('e'), KeyModifiers::CONTROL), t0),
        Some(Control::Extend)
    );
    assert_eq!(
        app.on_key(key(KeyCode::Enter), t0 + secs(6)),
        Some(Control::Answer("Redis, with a TTL".into()))
    );
    // The panel stays, saying it is sending, and takes no more keys until the loop answers.
    let q = app.question.as_ref().unwrap();
    assert_eq!(q.sending, Some(Sending::Answer));
    assert_eq!(app.on_key(key(KeyCode::Char('x')), t0), None);
    app.on_event(
        LoopEvent::QuestionClosed(answered_here("Redis, with a TTL")),
        t0,
    );
    assert!(app.question.is_none());
    assert_eq!(app.height(80, 40), STATUS_ROWS);
    assert_eq!(
        text(&app.take_output()),
        ["ralph: answer sent to the agent: Redis, with a TTL"]
    );
}

#[test]
fn a_refused_answer_shows_why_and_lets_the_person_try_again() {
    let t0 = Instant::now();
    let mut app = app();
    app.on_event(asked(Question::plain("Which port?"), None, t0), t0);
    type_str(&mut app, "8080", t0);
    assert!(matches!(
        app.on_key(key(KeyCode::Enter), t0),
        Some(Control::Answer(_))
    ));
    app.on_event(
        LoopEvent::AnswerRefused {
            reason: "an empty answer is not an answer".into(),
        },
        t0,
    );
    let q = app.question.as_ref().unwrap();
    assert_eq!(q.sending, None);
    assert_eq!(
        q.refused.as_deref(),
        Some("an empty answer is not an answer")
    );
    assert_eq!(
        app.on_key(key(KeyCode::Char('1')), t0),
        Some(Control::Typing)
    );
    assert_eq!(app.question.as_ref().unwrap().refused, None);
}

#[test]
fn esc_skips_and_the_closing_note_names_the_default() {
    let t0 = Instant::now();
    let mut app = app();
    app.on_event(asked(cache_question(), Some(secs(60)), t0), t0);
    app.take_output();
    assert_eq!(app.on_key(key(KeyCode::Esc), t0), Some(Control::Skip));
    assert_eq!(app.question.as_ref().unwrap().sending, Some(Sending::Skip));
    app.on_event(LoopEvent::QuestionClosed(Ended::Skipped), t0);
    assert_eq!(
        text(&app.take_output()),
        ["ralph: question skipped; the agent goes on with its default (Redis)"]
    );
}

#[test]
fn closing_notes_say_what_happened() {
    let t0 = Instant::now();
    let cases = [
        // Regression: a draft was dropped in silence when the deadline passed, or on Esc or
        // Ctrl-C.
        (
            Ended::TimedOut,
            vec![
                "ralph: no answer in time; the agent goes on with its default (Redis)",
                "ralph: your draft was not sent: Red",
                "ralph: to send it still: ralph answer -C /work/cache \"your answer\"",
            ],
        ),
        (
            Ended::Skipped,
            vec![
                "ralph: question skipped; the agent goes on with its default (Redis)",
                "ralph: your draft was not sent: Red",
            ],
        ),
        (
            Ended::answered(
                Answer::new(
                    "Memcached\nbecause it is simpler",
                    AnsweredBy::RalphAnswer,
                    None,
                ),
                false,
            ),
            vec![
                "ralph: answered from `ralph answer`: Memcached …",
                "ralph: your draft was not sent: Red",
            ],
        ),
        (
            Ended::Interrupted,
            vec![
                "ralph: stopping; the question stays pending for the next `ralph run`",
                "ralph: your draft was not sent: Red",
                "ralph: to send it still: ralph answer -C /work/cache \"your answer\"",
            ],
        ),
        (
            answered_here("Red"),
            vec!["ralph: answer sent to the agent: Red"],
        ),
    ];
    for (how, expected) in cases {
        let mut app = app();
        app.on_event(asked(cache_question(), Some(secs(60)), t0), t0);
        type_str(&mut app, "Red", t0);
        app.take_output();
        app.on_event(LoopEvent::QuestionClosed(how), t0);
        assert!(app.question.is_none());
        assert_eq!(text(&app.take_output()), expected);
    }
}

#[test]
fn a_picked_option_and_a_note_of_several_lines_outlive_the_deadline_whole() {
    let t0 = Instant::now();
    let mut app = app();
    app.on_event(asked(cache_question(), Some(secs(60)), t0), t0);
    type_str(&mut app, "2", t0);
    app.on_key(key(KeyCode::Tab), t0);
    type_str(&mut app, "only in staging", t0);
    app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT), t0);
    type_str(&mut app, "never in prod", t0);
    app.take_output();
    app.on_event(LoopEvent::QuestionClosed(Ended::TimedOut), t0);
    assert_eq!(
        text(&app.take_output()),
        [
            "ralph: no answer in time; the agent goes on with its default (Redis)",
            "ralph: your draft was not sent: Memcached",
            "       ",
            "       only in staging",
            "       never in prod",
            "ralph: to send it still: ralph answer -C /work/cache \"your answer\"",
        ]
    );
}

/// Regression (issue 24): the panel kept a countdown of its own, changed by its keys, and
/// the loop's changes and the panel's overwrote each other. The loop's is the only one.
#[test]
fn the_panel_shows_the_loops_countdown_and_only_that() {
    let t0 = Instant::now();
    let mut app = app();
    app.on_event(asked(cache_question(), Some(secs(60)), t0), t0);
    let mut theirs = Countdown::new(Some(secs(60)), t0);
    let countdown = |app: &App| app.question.as_ref().unwrap().panel.countdown().clone();

    // Keys are requests: nothing moves until the loop sends its countdown back.
    let typing = app.on_key(key(KeyCode::Tab), t0 + secs(10)).unwrap();
    assert_eq!(typing, Control::Typing);
    assert!(!countdown(&app).is_paused(t0 + secs(10)));
    assert!(typing.change_countdown(&mut theirs, t0 + secs(10)));
    app.on_event(LoopEvent::Countdown(theirs.clone()), t0 + secs(10));
    assert!(countdown(&app).is_paused(t0 + secs(11)));

    let ctrl_e = KeyEvent::new(KeyCode::Char('e'), KeyModifiers::CONTROL);
    let extend = app.on_key(ctrl_e, t0 + secs(12)).unwrap();
    assert_eq!(extend, Control::Extend);
    assert_eq!(countdown(&app), theirs, "asked, not granted");
    let screen = drawn(&app, t0 + secs(12));
    assert!(screen.contains("50s left · asking for +5m"), "{screen}");
    assert!(extend.change_countdown(&mut theirs, t0 + secs(12)));
    app.on_event(LoopEvent::Countdown(theirs.clone()), t0 + secs(12));
    assert_eq!(countdown(&app), theirs);
    let screen = drawn(&app, t0 + secs(12));
    assert!(screen.contains("5m 50s left (+5m extended)"), "{screen}");
    assert!(!screen.contains("asking"), "{screen}");

    // A change from elsewhere (`ralph serve`'s page) is shown the same way.
    theirs.extend(secs(300), t0 + secs(20));
    app.on_event(LoopEvent::Countdown(theirs.clone()), t0 + secs(20));
    assert_eq!(countdown(&app), theirs);
}

#[test]
fn ctrl_c_stops_then_kills() {
    let t0 = Instant::now();
    let mut app = app();
    app.on_event(started(), t0);
    assert_eq!(app.on_key(ctrl_c(), t0), Some(Control::Stop));
    assert_eq!(app.stop, Stop::Stopping);
    let activity = app.status_lines(80, t0)[2].to_string();
    assert!(
        activity.contains("stopping… Ctrl+C again kills now"),
        "{activity}"
    );
    assert_eq!(app.on_key(ctrl_c(), t0), Some(Control::Kill));
    assert_eq!(app.stop, Stop::Killing);
    assert_eq!(app.on_key(ctrl_c(), t0), Some(Control::Kill));
}

#[test]
fn ctrl_c_with_a_question_open_asks_first() {
    let t0 = Instant::now();
    let mut app = app();
    app.on_event(asked(cache_question(), Some(secs(60)), t0), t0);
    type_str(&mut app, "Red", t0);

    // No: anything but y keeps waiting, and the key does not reach the panel (Esc would skip).
    assert_eq!(app.on_key(ctrl_c(), t0), None);
    assert!(app.confirm_stop);
    let activity = app.status_lines(80, t0)[2].to_string();
    assert!(
        activity.contains("Stop the loop? The question stays pending"),
        "{activity}"
    );
    assert_eq!(app.on_key(key(KeyCode::Esc), t0), None);
    assert!(!app.confirm_stop);
    assert_eq!(app.stop, Stop::Running);
    assert_eq!(app.question.as_ref().unwrap().sending, None);
    assert_eq!(app.question.as_ref().unwrap().panel.draft(), "Red");

    // Yes.
    assert_eq!(app.on_key(ctrl_c(), t0), None);
    assert_eq!(app.on_key(key(KeyCode::Char('y')), t0), Some(Control::Stop));
    assert_eq!(app.stop, Stop::Stopping);
    // While stopping, keys no longer edit the answer; Ctrl+C kills.
    assert_eq!(app.on_key(key(KeyCode::Char('x')), t0), None);
    assert_eq!(app.on_key(ctrl_c(), t0), Some(Control::Kill));

    // Ctrl+C twice is a yes too.
    let mut app = self::app();
    app.on_event(asked(cache_question(), Some(secs(60)), t0), t0);
    assert_eq!(app.on_key(ctrl_c(), t0), None);
    assert_eq!(app.on_key(ctrl_c(), t0), Some(Control::Stop));
}

#[test]
fn a_paste_goes_into_the_answer_whole() {
    let t0 = Instant::now();
    let mut app = app();
    app.on_event(asked(Question::plain("Why?"), None, t0), t0);
    assert_eq!(
        app.on_paste("first line\nsecond line"),
        Some(Control::Typing)
    );
    assert_eq!(
        app.on_key(key(KeyCode::Enter), t0),
        Some(Control::Answer("first line\nsecond line".into()))
    );
}

#[test]
fn finishing_ends_the_view_with_a_summary() {
    let t0 = Instant::now();
    let mut app = app();
    app.on_event(started(), t0);
    app.on_event(
        LoopEvent::Agent(AgentEvent::Usage(Usage {
            cost_usd: Some(1.5),
            ..Usage::default()
        })),
        t0,
    );
    app.take_output();
    assert!(!app.is_done());
    app.on_event(finished(), t0);
    assert!(app.is_done());
    assert_eq!(
        text(&app.take_output()),
        ["ralph: finished: every criterion is checked and the tests pass (exit 0) · $1.50"]
    );
    assert_eq!(app.on_key(ctrl_c(), t0), None, "nothing left to stop");
    assert_eq!(app.next_tick(t0), None);
}

#[test]
fn a_closed_channel_ends_the_view_too() {
    let mut app = app();
    app.disconnected();
    assert!(app.is_done());
    assert_eq!(
        text(&app.take_output()),
        ["ralph: the loop stopped; why follows"]
    );
}

#[test]
fn ticks_follow_the_iteration_clock_and_the_countdown_only() {
    let t0 = Instant::now();
    let mut app = app();
    app.on_event(started(), t0);
    assert_eq!(app.next_tick(t0), None, "idle: nothing to wake up for");
    app.on_event(iteration(1, t0, Some(secs(600))), t0);
    assert_eq!(
        app.next_tick(t0 + Duration::from_millis(1500)),
        Some(t0 + secs(2))
    );
    app.on_event(
        LoopEvent::IterationEnded {
            iteration: 1,
            how: "exited 0".into(),
            elapsed: secs(3),
        },
        t0 + secs(3),
    );
    assert_eq!(app.next_tick(t0 + secs(3)), None);
    app.on_event(asked(cache_question(), Some(secs(60)), t0), t0);
    let tick = app.next_tick(t0).unwrap();
    assert!(tick > t0 && tick <= t0 + secs(1), "{tick:?}");
}

#[test]
fn the_bottom_area_grows_with_the_panel_up_to_most_of_the_terminal() {
    let t0 = Instant::now();
    let mut app = app();
    let long = Question::plain(
        (1..=60)
            .map(|i| format!("Paragraph {i} of a very long question."))
            .collect::<Vec<_>>()
            .join("\n\n"),
    );
    app.on_event(asked(long, Some(secs(60)), t0), t0);
    assert_eq!(app.height(80, 40), 28, "70% of 40 rows");
    // A tiny terminal still gets a usable panel.
    assert_eq!(app.height(80, 8), 7);
    assert_eq!(app.height(80, 5), 5);
}

#[test]
fn a_question_asks_for_one_desktop_notification_only_when_enabled() {
    let t0 = Instant::now();
    let mut quiet = app();
    quiet.on_event(started(), t0);
    quiet.on_event(asked(cache_question(), Some(secs(300)), t0), t0);
    assert_eq!(
        quiet.take_notice(),
        None,
        "off unless desktop_notification is on"
    );

    let mut loud = app();
    loud.desktop_notifications = true;
    loud.on_event(started(), t0);
    loud.on_event(asked(cache_question(), Some(secs(300)), t0), t0);
    let notice = loud.take_notice().expect("a notice for the question");
    assert!(notice.contains("Redis"), "{notice}");
    assert_eq!(loud.take_notice(), None, "once per question");
}

/// Regression (issue 25, item 9): a bidi override in a question reached the scrollback line
/// as it was, making the line read differently from what it said.
#[test]
fn the_scrollback_line_of_a_question_shows_no_invisible_characters() {
    let t0 = Instant::now();
    let mut app = app();
    app.on_event(started(), t0);
    let q = Question::plain("Deploy \u{202E}lanif\u{202C} \u{2066}now\u{2069}\u{200B}?");
    app.on_event(asked(q, Some(secs(300)), t0), t0);
    let out = text(&app.take_output());
    assert!(
        out.contains(&"ralph: the agent asks (iteration 1): Deploy lanif now?".to_owned()),
        "{out:?}"
    );
}
