//! Snapshots of every state of the status area, and of the whole bottom area with the question
//! panel open, drawn through ratatui's `TestBackend`.
//!
//! Time is injected: events carry `t0` and drawing happens at `t0 + offset`. The question's
//! age ("asked just now") is the one thing read from the wall clock, once, when the panel
//! opens; these tests draw within a minute of that.

use std::time::{Duration, Instant};

use ralph_protocol::{Control, LoopEvent, Outcome};
use ralph_signal::{AgentEvent, Signal, SignalKind, Usage};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::crossterm::event::KeyCode;
use ratatui::style::Modifier;

use crate::tui::app::App;
use crate::tui::app_tests::{
    app, asked, cache_question, ctrl_c, finished, iteration, key, press, secs, started,
};

/// Draws the bottom area as the view would size it on a `width` x 40 terminal.
fn draw(app: &App, width: u16, now: Instant) -> TestBackend {
    let height = app.height(width, 40);
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal
        .draw(|f| app.render(f.area(), f.buffer_mut(), now))
        .unwrap();
    terminal.backend().clone()
}

/// Whether the text `needle` is drawn bold somewhere: the monochrome theme's mark for
/// warnings, which a plain-text snapshot cannot show.
fn is_bold(buffer: &Buffer, needle: &str) -> bool {
    let area = buffer.area;
    (area.top()..area.bottom()).any(|y| {
        let row: String = (area.left()..area.right())
            .map(|x| buffer[(x, y)].symbol())
            .collect();
        row.find(needle).is_some_and(|byte| {
            let x = row[..byte].chars().count() as u16;
            buffer[(x, y)].modifier.contains(Modifier::BOLD)
        })
    })
}

macro_rules! snapshot {
    ($name:literal, $app:expr, $now:expr) => {
        insta::assert_snapshot!($name, draw(&$app, 80, $now))
    };
    ($name:literal, $app:expr, $now:expr, $width:expr) => {
        insta::assert_snapshot!($name, draw(&$app, $width, $now))
    };
}

fn running(t0: Instant, timeout: Option<Duration>) -> App {
    let mut app = app();
    app.on_event(started(), t0);
    app.on_event(iteration(2, t0, timeout), t0);
    app
}

fn with_usage(mut app: App, t0: Instant) -> App {
    app.on_event(
        LoopEvent::Agent(AgentEvent::ToolCall {
            name: "Edit".into(),
            summary: "src/cache.rs".into(),
        }),
        t0,
    );
    app.on_event(
        LoopEvent::Agent(AgentEvent::Usage(Usage {
            cost_usd: Some(0.4213),
            input_tokens: Some(12_345),
            output_tokens: Some(4_100),
        })),
        t0,
    );
    app.on_event(
        LoopEvent::Criteria {
            checked: 3,
            total: 4,
        },
        t0,
    );
    app
}

fn done_signal() -> LoopEvent {
    LoopEvent::Signal(Signal {
        kind: SignalKind::Done,
        line: "<ralph>DONE</ralph>".into(),
        line_number: 40,
    })
}

#[test]
fn before_the_first_iteration() {
    let t0 = Instant::now();
    let mut app = app();
    snapshot!("status_nothing_yet", app, t0);
    app.on_event(started(), t0);
    snapshot!("status_started", app, t0);
}

/// Waiting before an iteration on a limit another loop of the same agent hit: the status says
/// how long is left, the scrollback whose limit it is and until when (issue 33, item 3).
#[test]
fn waiting_on_another_loop_s_rate_limit() {
    let t0 = Instant::now();
    let mut app = app();
    app.on_event(started(), t0);
    let _ = app.take_output();
    app.on_event(
        LoopEvent::Backoff {
            until: t0 + secs(12 * 60),
            reason: "Claude Code's limit, hit by the loop in /home/me/shop, holds for every loop of it on this machine: the usage limit is reached (five_hour); it ends at 14:05, in 12m".into(),
        },
        t0,
    );
    let lines: Vec<String> = app.take_output().iter().map(|l| l.to_string()).collect();
    assert_eq!(
        lines,
        [
            "ralph: the agent is rate limited (Claude Code's limit, hit by the loop in /home/me/shop, holds for every loop of it on this machine: the usage limit is reached (five_hour); it ends at 14:05, in 12m); the next attempt is in 12m (Ctrl-C stops)"
        ]
    );
    snapshot!("status_waiting_on_a_shared_limit", app, t0 + secs(60));
}

#[test]
fn running_with_a_time_limit() {
    let t0 = Instant::now();
    let app = running(t0, Some(secs(600)));
    snapshot!("status_running_timeout", app, t0 + secs(65));
    // The last minute is flagged.
    snapshot!("status_running_last_minute", app, t0 + secs(550));
    assert!(!is_bold(
        draw(&app, 80, t0 + secs(65)).buffer(),
        "8m 55s left"
    ));
    assert!(is_bold(draw(&app, 80, t0 + secs(550)).buffer(), "50s left"));
}

#[test]
fn running_without_a_time_limit() {
    let t0 = Instant::now();
    let app = running(t0, None);
    snapshot!("status_running_no_timeout", app, t0 + secs(3725));
}

#[test]
fn with_cost_and_tokens() {
    let t0 = Instant::now();
    let app = with_usage(running(t0, Some(secs(600))), t0);
    snapshot!("status_cost_tokens", app, t0 + secs(65));
}

#[test]
fn after_a_signal() {
    let t0 = Instant::now();
    let mut app = with_usage(running(t0, Some(secs(600))), t0);
    app.on_event(done_signal(), t0);
    app.on_event(
        LoopEvent::IterationEnded {
            iteration: 2,
            how: "exited 0".into(),
            elapsed: secs(95),
        },
        t0 + secs(95),
    );
    snapshot!("status_after_signal", app, t0 + secs(100));
    app.on_event(
        LoopEvent::TestsStarted {
            command: "cargo test --workspace".into(),
        },
        t0,
    );
    snapshot!("status_running_tests", app, t0 + secs(100));

    // Issue 34, item 13: the tests' time and last line, and the iteration's clock running on
    // (it stopped at the agent's exit).
    app.on_event(
        LoopEvent::TestsProgress {
            elapsed: secs(12),
            last_line: Some("test cache::expiry ... ok".into()),
        },
        t0 + secs(112),
    );
    snapshot!("status_tests_progress", app, t0 + secs(112));
    let screen = format!("{:?}", draw(&app, 100, t0 + secs(112)).buffer());
    assert!(
        screen.contains(
            "running the tests (12s): cargo test --workspace · test cache::expiry ... ok"
        ),
        "{screen}"
    );
    assert!(
        screen.contains("1m 52s"),
        "the iteration's clock stopped: {screen}"
    );
}

#[test]
fn after_a_rejected_done() {
    let t0 = Instant::now();
    let mut app = with_usage(running(t0, Some(secs(600))), t0);
    app.on_event(done_signal(), t0);
    app.on_event(
        LoopEvent::Verdict {
            accepted: false,
            reason: "1 criterion is still open: expire entries after 5 minutes\nand more".into(),
        },
        t0,
    );
    snapshot!("status_done_rejected", app, t0 + secs(100));
    assert!(is_bold(draw(&app, 80, t0).buffer(), "DONE rejected"));
}

#[test]
fn stopping() {
    let t0 = Instant::now();
    let mut app = running(t0, Some(secs(600)));
    app.on_key(ctrl_c(), t0);
    snapshot!("status_stopping", app, t0 + secs(5));
    app.on_key(ctrl_c(), t0);
    snapshot!("status_killing", app, t0 + secs(5));
}

#[test]
fn finished_state() {
    let t0 = Instant::now();
    let mut app = with_usage(running(t0, Some(secs(600))), t0);
    app.on_event(
        LoopEvent::Criteria {
            checked: 4,
            total: 4,
        },
        t0,
    );
    app.on_event(finished(), t0 + secs(200));
    snapshot!("status_finished", app, t0 + secs(300));
    let mut app = running(t0, None);
    app.on_event(
        LoopEvent::Finished {
            outcome: Outcome::MaxIterations,
            reason: "10 iterations ran out before the task was done".into(),
        },
        t0 + secs(20),
    );
    snapshot!("status_finished_max_iterations", app, t0 + secs(30));
}

#[test]
fn forty_columns() {
    let t0 = Instant::now();
    let mut app = with_usage(running(t0, Some(secs(600))), t0);
    app.on_event(done_signal(), t0);
    snapshot!("status_40_columns", app, t0 + secs(65), 40);
    app.on_key(ctrl_c(), t0);
    snapshot!("status_40_columns_stopping", app, t0 + secs(65), 40);
}

#[test]
fn panel_open() {
    let t0 = Instant::now();
    let mut app = with_usage(running(t0, Some(secs(600))), t0);
    app.on_event(asked(cache_question(), Some(secs(300)), t0), t0);
    snapshot!("bottom_panel_open", app, t0 + secs(12));
    // The person picked an option and is typing a note.
    press(&mut app, key(KeyCode::Char('2')), t0 + secs(13));
    press(&mut app, key(KeyCode::Tab), t0 + secs(13));
    for c in "because it is simpler".chars() {
        press(&mut app, key(KeyCode::Char(c)), t0 + secs(14));
    }
    snapshot!("bottom_panel_typing", app, t0 + secs(15));
    assert_eq!(
        app.on_key(key(KeyCode::Enter), t0 + secs(16)),
        Some(Control::Answer("Memcached\n\nbecause it is simpler".into()))
    );
    snapshot!("bottom_panel_sending", app, t0 + secs(16));
}

#[test]
fn panel_open_asking_to_stop() {
    let t0 = Instant::now();
    let mut app = running(t0, None);
    app.on_event(asked(cache_question(), Some(secs(300)), t0), t0);
    app.on_key(ctrl_c(), t0);
    snapshot!("bottom_panel_confirm_stop", app, t0 + secs(2));
}

#[test]
fn panel_open_answer_refused() {
    let t0 = Instant::now();
    let mut app = running(t0, None);
    app.on_event(asked(cache_question(), None, t0), t0);
    app.on_key(key(KeyCode::Enter), t0);
    app.on_event(
        LoopEvent::AnswerRefused {
            reason: "the question was answered from `ralph answer` a moment ago".into(),
        },
        t0,
    );
    snapshot!("bottom_panel_refused", app, t0 + secs(1));
}

#[test]
fn panel_open_forty_columns() {
    let t0 = Instant::now();
    let mut app = with_usage(running(t0, Some(secs(600))), t0);
    app.on_event(asked(cache_question(), Some(secs(300)), t0), t0);
    snapshot!("bottom_panel_40_columns", app, t0 + secs(12), 40);
}
