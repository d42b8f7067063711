//! Snapshots of the fleet view at 80x24, drawn through ratatui's `TestBackend`.

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ralph_fleet::rows::{Diff, LoopRow, RowState, sort};
use ralph_protocol::{PendingQuestion, Question, QuestionId, QuestionOption, RaisedBy};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

use super::{FleetAction, FleetView};
use crate::theme::Theme;

fn row(name: &str, task: &str, state: RowState) -> LoopRow {
    let mut r = LoopRow::bare(PathBuf::from(format!("/work/{name}")), task, state);
    r.running = matches!(
        state,
        RowState::NeedsYou | RowState::Running | RowState::RateLimited
    );
    r.iteration = 3;
    r.max_iterations = 10;
    r.elapsed_seconds = Some(192);
    r.cost_usd = Some(0.42);
    r.criteria_done = Some(1);
    r.criteria_total = Some(3);
    r.diff = Some(Diff {
        added: 12,
        removed: 3,
        files: 2,
    });
    r.branch = Some(format!("ralph/{name}"));
    r
}

/// Five loops, two of them waiting, in the order `rows::collect` gives.
fn fleet() -> Vec<LoopRow> {
    let mut running = row("add-cache", "Add a session cache", RowState::Running);
    running.last_line = Some("▸ Bash cargo test --workspace".into());
    let mut waiting = row("fix-login", "Fix the login redirect", RowState::NeedsYou);
    waiting.question = Some("Should the redirect keep the query string?".into());
    waiting.question_id = Some("q-login".into());
    let mut second = row("docs", "Write the API docs", RowState::NeedsYou);
    second.question = Some("Which version do the docs describe, 2.x or 3.x?".into());
    second.question_id = Some("q-docs".into());
    let mut failed = row("flaky", "Fix the flaky upload test", RowState::Failed);
    failed.reason = Some("GUTTER: the agent said it is stuck".into());
    let mut landed = row("readme", "Update the README", RowState::Landed);
    landed.reason = Some("landed on main at 3f2c1a9".into());
    let mut rows = vec![running, waiting, second, failed, landed];
    sort(&mut rows);
    rows
}

fn draw(view: &FleetView, width: u16, height: u16, now: Instant) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal
        .draw(|f| view.render(f.area(), f.buffer_mut(), now))
        .unwrap();
    let buffer = terminal.backend().buffer().clone();
    let mut out = String::new();
    for y in 0..buffer.area.height {
        let line: String = (0..buffer.area.width)
            .map(|x| buffer[(x, y)].symbol().to_string())
            .collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

#[test]
fn needs_you_first_with_the_header_count_at_80x24() {
    let now = Instant::now();
    let mut view = FleetView::new(Theme::monochrome());
    view.set_rows(fleet(), now);
    let screen = draw(&view, 80, 24, now);
    insta::assert_snapshot!("fleet_80x24", screen);
    assert!(screen.lines().next().unwrap().contains("2 need you"));
    let states: Vec<RowState> = view.rows().iter().map(|r| r.state).collect();
    assert_eq!(
        states,
        [
            RowState::NeedsYou,
            RowState::NeedsYou,
            RowState::Failed,
            RowState::Running,
            RowState::Landed
        ]
    );
}

#[test]
fn a_long_agent_line_with_control_and_bidi_characters_is_cut_and_clean() {
    let now = Instant::now();
    let mut r = row(
        "hostile",
        "Parse \u{1b}[31mthe\u{202e} logs",
        RowState::Running,
    );
    // What `rows::collect` gives: the agent's text through `one_line`.
    let raw = format!(
        "\u{1b}]0;pwned\u{7}done with \u{202e}evil\u{202c} step\r\n{}",
        "and a very long line ".repeat(10)
    );
    r.last_line = Some(ralph_protocol::one_line(&raw, 300));
    r.task = ralph_protocol::one_line(&r.task, 300);
    let mut view = FleetView::new(Theme::monochrome());
    view.set_rows(vec![r], now);
    let screen = draw(&view, 80, 24, now);
    insta::assert_snapshot!("fleet_hostile_line", screen);
    assert!(!screen.contains('\u{1b}') && !screen.contains('\u{202e}'));
    assert!(screen.contains("said: done with evil step and a very long line"));
}

#[test]
fn selection_follows_its_loop_and_enter_opens_only_a_waiting_question() {
    let now = Instant::now();
    let mut view = FleetView::new(Theme::monochrome());
    view.set_rows(fleet(), now);
    assert_eq!(view.selected().unwrap().name(), "fix-login");
    assert_eq!(
        view.handle_key(key(KeyCode::Enter), now),
        FleetAction::Open("/work/fix-login".into())
    );
    // Down to the running loop: Enter has no question to open; x stops it.
    view.handle_key(key(KeyCode::Down), now);
    view.handle_key(key(KeyCode::Down), now);
    view.handle_key(key(KeyCode::Down), now);
    assert_eq!(view.selected().unwrap().name(), "add-cache");
    assert_eq!(
        view.handle_key(key(KeyCode::Enter), now),
        FleetAction::Redraw
    );
    let screen = draw(&view, 80, 24, now);
    assert!(
        screen.contains("No question waits in add-cache (running); said:"),
        "{screen}"
    );
    assert_eq!(
        view.handle_key(key(KeyCode::Char('x')), now),
        FleetAction::Stop("/work/add-cache".into())
    );
    // The waiting loop's question is answered: it moves down, the selection stays.
    let mut rows = fleet();
    rows.iter_mut()
        .find(|r| r.name() == "fix-login")
        .map(|r| {
            r.state = RowState::Running;
            r.question = None;
        })
        .unwrap();
    sort(&mut rows);
    view.set_rows(rows, now);
    assert_eq!(view.selected().unwrap().name(), "add-cache");
    assert!(
        draw(&view, 80, 24, now)
            .lines()
            .next()
            .unwrap()
            .contains("1 needs you")
    );
    // r retries the failed one; l refuses a running loop; q quits.
    view.handle_key(key(KeyCode::Up), now);
    assert_eq!(view.selected().unwrap().name(), "flaky");
    assert_eq!(
        view.handle_key(key(KeyCode::Char('r')), now),
        FleetAction::Retry("/work/flaky".into())
    );
    assert_eq!(
        view.handle_key(key(KeyCode::Char('d')), now),
        FleetAction::Diff("/work/flaky".into())
    );
    assert_eq!(
        view.handle_key(key(KeyCode::Char('l')), now),
        FleetAction::Redraw
    );
    assert_eq!(
        view.handle_key(key(KeyCode::Char('q')), now),
        FleetAction::Quit
    );
}

#[test]
fn the_question_opens_in_the_run_panel_and_its_answer_goes_to_its_loop() {
    let now = Instant::now();
    let mut view = FleetView::new(Theme::monochrome());
    view.set_rows(fleet(), now);
    let question = Question {
        options: vec![
            QuestionOption::new("Keep it"),
            QuestionOption::new("Drop it"),
        ],
        ..Question::plain("Should the redirect keep the **query string**?")
    };
    let id = QuestionId::from_file("q-login");
    let wall = SystemTime::now();
    let pending = PendingQuestion::new(
        id.clone(),
        &question,
        wall - Duration::from_secs(30),
        Some(wall + Duration::from_secs(270)),
        3,
        RaisedBy::Signal,
    );
    view.open_question("/work/fix-login".as_ref(), &pending, now, wall);
    let screen = draw(&view, 80, 24, now);
    insta::assert_snapshot!("fleet_question_open", screen);
    assert_eq!(
        view.handle_key(key(KeyCode::Char('2')), now),
        FleetAction::Redraw
    );
    assert_eq!(
        view.handle_key(key(KeyCode::Enter), now),
        FleetAction::Answer {
            root: "/work/fix-login".into(),
            id: id.clone(),
            text: "Drop it".into()
        }
    );
    // Ctrl+C goes back to the list, the question left waiting.
    view.handle_key(
        KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL),
        now,
    );
    assert!(!view.question_open());
    view.open_question("/work/fix-login".as_ref(), &pending, now, wall);
    assert_eq!(
        view.handle_key(key(KeyCode::Esc), now),
        FleetAction::Skip {
            root: "/work/fix-login".into(),
            id
        }
    );
    // Answered elsewhere: the panel closes and says so.
    let mut rows = fleet();
    rows.retain(|r| r.name() != "fix-login");
    view.set_rows(rows, now);
    assert!(!view.question_open());
}

/// Regression: below 80 columns the figures kept their places and the task was squeezed to
/// "Add a s…" while the headings ran off the edge ("COS"), and the keys line was cut before
/// `q quit`. Now the figures that matter least go first (cost, diff, criteria, time), the task
/// keeps room to be read, and the keys that matter least go before `q quit` does.
#[test]
fn narrow_terminals_drop_figures_before_the_task_and_keep_q_quit() {
    let now = Instant::now();
    let mut view = FleetView::new(Theme::monochrome());
    view.set_rows(fleet(), now);
    for (width, name) in [
        (60, "fleet_60x12"),
        (50, "fleet_50x12"),
        (40, "fleet_40x12"),
    ] {
        let screen = draw(&view, width, 12, now);
        insta::assert_snapshot!(name, screen);
        let lines: Vec<&str> = screen.lines().collect();
        // The headings are whole words, each over its column.
        let headings = lines[1];
        assert!(
            headings
                .split_whitespace()
                .all(|h| ["STATE", "TASK", "ITER", "TIME", "COST", "CRIT", "DIFF"].contains(&h)),
            "{width}: {headings}"
        );
        assert!(
            screen.contains("Fix the login redirect"),
            "{width}: the task is cut to nothing:\n{screen}"
        );
        let keys = lines.last().unwrap();
        assert!(keys.ends_with("q quit"), "{width}: {keys}");
        assert!(!keys.contains('…'), "{width}: {keys}");
    }
    // With a question open, the key of its own is whole too.
    view.open_question(
        &PathBuf::from("/work/fix-login"),
        &PendingQuestion::new(
            QuestionId::new(),
            &Question::plain("Keep the query string?"),
            SystemTime::now(),
            None,
            3,
            RaisedBy::Signal,
        ),
        now,
        SystemTime::now(),
    );
    let screen = draw(&view, 40, 16, now);
    let keys = screen.lines().last().unwrap();
    assert!(!keys.contains('…'), "{keys}");
    assert!(keys.contains("Ctrl+C"), "{keys}");
}

/// Regression: a note was cut at the width, so "Landing docs (output: /…/fleet-view/do" hid
/// the path of the log it pointed to. It wraps now.
#[test]
fn a_long_note_wraps_so_the_log_path_it_names_is_whole() {
    let now = Instant::now();
    let mut view = FleetView::new(Theme::monochrome());
    view.set_rows(fleet(), now);
    let path = "/home/someone/.local/state/ralph/fleet-view/write-the-api-docs-land.log";
    view.set_note(format!("Landing write-the-api-docs (output: {path})."));
    let screen = draw(&view, 80, 24, now);
    let joined: String = screen.lines().map(str::trim).collect::<Vec<_>>().join(" ");
    assert!(joined.contains(path), "{screen}");
    assert!(
        screen.lines().last().unwrap().ends_with("q quit"),
        "{screen}"
    );
}

/// Regression: with more loops than the terminal's height holds, the view scrolled with the
/// selection and nothing said rows were out of view (a waiting loop scrolled off looked gone).
#[test]
fn a_short_terminal_says_which_rows_are_shown() {
    let now = Instant::now();
    let mut view = FleetView::new(Theme::monochrome());
    view.set_rows(fleet(), now);
    let screen = draw(&view, 80, 10, now);
    insta::assert_snapshot!("fleet_80x10_top", screen);
    assert!(
        screen.starts_with("ralph fleet · 2 need you · 5 loops · 1-3 shown"),
        "{screen}"
    );
    view.handle_key(key(KeyCode::End), now);
    let screen = draw(&view, 80, 10, now);
    assert!(
        screen
            .lines()
            .next()
            .unwrap()
            .ends_with("5 loops · 3-5 shown"),
        "{screen}"
    );
    let screen = draw(&view, 80, 24, now);
    assert!(
        screen.lines().next().unwrap().ends_with("5 loops"),
        "{screen}"
    );
}

/// Regression: with no loop at all, the line saying how to start one ran past 80 columns and
/// was cut before "starts one."
#[test]
fn with_no_loop_the_view_says_how_to_start_one_whole() {
    let now = Instant::now();
    let mut view = FleetView::new(Theme::monochrome());
    view.set_rows(Vec::new(), now);
    for width in [80, 40] {
        let screen = draw(&view, width, 10, now);
        let joined: String = screen.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            joined.contains("`ralph run` or `ralph fleet TASK.md...` starts one."),
            "{screen}"
        );
    }
    insta::assert_snapshot!("fleet_empty_40x10", draw(&view, 40, 10, now));
}

/// Regression: a row's second line is cut to the width, and a needs-land row's reason ends with
/// the command that finishes the landing: the view showed no way to read it. Enter on a loop
/// with no question shows the line whole.
#[test]
fn enter_on_a_loop_without_a_question_shows_its_reason_whole() {
    let now = Instant::now();
    let mut view = FleetView::new(Theme::monochrome());
    let command =
        "git -C /home/someone/src/app merge --ff-only refs/ralph/land/ralph/add-a-session-cache";
    let mut row = row("add-cache", "Add a session cache", RowState::NeedsLand);
    row.reason = Some(format!(
        "combined and tested, but main is checked out in /home/someone/src/app with changes, so ralph does not move it. To finish: {command}"
    ));
    view.set_rows(vec![row], now);
    let before = draw(&view, 80, 24, now);
    assert!(!before.contains(command), "{before}");
    view.handle_key(key(KeyCode::Enter), now);
    let screen = draw(&view, 80, 24, now);
    let joined: String = screen.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(joined.contains(command), "{screen}");
    assert!(
        joined.contains("No question waits in add-cache (needs land); why: combined"),
        "{screen}"
    );
}
