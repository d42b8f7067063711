//! Snapshots of every state of the question panel, drawn through ratatui's `TestBackend`.
//!
//! Time is injected: each test builds the panel at `t0` and draws it at `t0 + offset`, never
//! sleeping. Keys are pressed as the loop view presses them ([`press`]): a pause or an
//! extension goes to the loop, and the panel shows the countdown the loop sends back. Plain-text snapshots cannot show colour, so the states where colour carries the
//! meaning (the last ten seconds, monochrome) also assert on cell styles.

use std::time::{Duration, Instant, SystemTime};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ralph_protocol::{Answer, AnsweredBy, Control, Countdown, Ended, Question, QuestionOption};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier};

use crate::theme::Theme;
use crate::{PanelAction, QuestionPanel};

const WIDTH: u16 = 72;
const WAIT: Duration = Duration::from_secs(300);

const fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

/// Presses `key` in the panel, and lets the loop answer a request to pause or extend its
/// countdown, as it does, by sending the countdown back.
fn press(panel: &mut QuestionPanel, key: KeyEvent, now: Instant) -> PanelAction {
    let action = panel.handle_key(key, now);
    let control = match action {
        PanelAction::Typing => Control::Typing,
        PanelAction::Extend => Control::Extend,
        _ => return action,
    };
    let mut theirs = panel.countdown().clone();
    control.change_countdown(&mut theirs, now);
    panel.show_countdown(theirs, now);
    action
}

fn type_str(panel: &mut QuestionPanel, text: &str, now: Instant) {
    for c in text.chars() {
        press(panel, key(KeyCode::Char(c)), now);
    }
}

fn plain() -> Question {
    Question::plain("Should the session cache use **Redis** or *Memcached*?")
}

fn cache_options() -> Question {
    Question {
        options: vec![
            QuestionOption {
                label: "Redis".into(),
                description: Some("persistent, already deployed in staging".into()),
            },
            QuestionOption::new("Memcached"),
            QuestionOption {
                label: "In-process LRU".into(),
                description: Some("no new service, lost on restart".into()),
            },
        ],
        default: Some("Redis".into()),
        context: Some("Both crates are already in Cargo.toml.".into()),
        ..plain()
    }
}

fn open(question: Question, wait: Option<Duration>, t0: Instant) -> QuestionPanel {
    QuestionPanel::new(question, Countdown::new(wait, t0), SystemTime::now(), t0)
}

/// Draws `panel` at `now` into a `width` x `height` terminal (its desired height if `None`).
fn draw(panel: &QuestionPanel, width: u16, height: Option<u16>, now: Instant) -> TestBackend {
    let height = height.unwrap_or_else(|| panel.desired_height(width));
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal
        .draw(|frame| frame.render_widget(panel.view(now), frame.area()))
        .unwrap();
    terminal.backend().clone()
}

macro_rules! snapshot {
    ($name:literal, $panel:expr, $now:expr) => {
        insta::assert_snapshot!($name, draw(&$panel, WIDTH, None, $now))
    };
    ($name:literal, $panel:expr, $now:expr, $width:expr, $height:expr) => {
        insta::assert_snapshot!($name, draw(&$panel, $width, $height, $now))
    };
}

/// The first cell whose symbol starts `text` on some row, for style checks.
fn find(buffer: &Buffer, text: &str) -> (u16, u16) {
    find_any(buffer, text).unwrap_or_else(|| panic!("{text:?} not on screen"))
}

/// Where `text` starts on the screen, if it is there.
fn find_any(buffer: &Buffer, text: &str) -> Option<(u16, u16)> {
    let area = buffer.area;
    (area.top()..area.bottom()).find_map(|y| {
        let row: String = (area.left()..area.right())
            .map(|x| buffer[(x, y)].symbol())
            .collect();
        let byte = row.find(text)?;
        Some((row[..byte].chars().count() as u16, y))
    })
}

#[test]
fn empty() {
    let t0 = Instant::now();
    let panel = open(plain(), Some(WAIT), t0);
    snapshot!("empty", panel, t0);
}

#[test]
fn typed_and_resumed() {
    let t0 = Instant::now();
    let mut panel = open(plain(), Some(WAIT), t0);
    type_str(&mut panel, "Redis, it is already deployed.", t0 + secs(10));
    // Ten seconds after the last key the countdown runs again: 290 s left at the pause,
    // 5 s of it spent since resuming.
    snapshot!("typed", panel, t0 + secs(20));
}

#[test]
fn multi_line_typed() {
    let t0 = Instant::now();
    let mut panel = open(plain(), Some(WAIT), t0);
    type_str(&mut panel, "Redis.", t0);
    press(
        &mut panel,
        KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT),
        t0,
    );
    type_str(&mut panel, "Reuse the staging instance", t0);
    press(
        &mut panel,
        KeyEvent::new(KeyCode::Char('j'), KeyModifiers::CONTROL),
        t0,
    );
    type_str(&mut panel, "and set a 5 minute TTL.", t0);
    snapshot!("multi_line_typed", panel, t0 + secs(60));
}

#[test]
fn options() {
    let t0 = Instant::now();
    let panel = open(cache_options(), Some(WAIT), t0);
    snapshot!("options", panel, t0);
}

#[test]
fn option_picked() {
    let t0 = Instant::now();
    let mut panel = open(cache_options(), Some(WAIT), t0);
    assert_eq!(
        press(&mut panel, key(KeyCode::Char('2')), t0),
        PanelAction::Typing
    );
    snapshot!("option_picked", panel, t0 + secs(30));
}

#[test]
fn multi_select_two_toggled() {
    let t0 = Instant::now();
    let mut panel = open(
        Question {
            multi_select: true,
            default: None,
            ..cache_options()
        },
        Some(WAIT),
        t0,
    );
    press(&mut panel, key(KeyCode::Char(' ')), t0);
    press(&mut panel, key(KeyCode::Down), t0);
    press(&mut panel, key(KeyCode::Down), t0);
    press(&mut panel, key(KeyCode::Char('3')), t0);
    snapshot!("multi_select_two_toggled", panel, t0 + secs(30));
    assert_eq!(
        press(&mut panel, key(KeyCode::Enter), t0),
        PanelAction::Submit("Redis\nIn-process LRU".into())
    );
}

#[test]
fn option_with_annotation() {
    let t0 = Instant::now();
    let mut panel = open(cache_options(), Some(WAIT), t0);
    press(&mut panel, key(KeyCode::Char('1')), t0);
    press(&mut panel, key(KeyCode::Tab), t0);
    type_str(&mut panel, "but reuse the staging instance", t0);
    snapshot!("option_with_annotation", panel, t0 + secs(30));
    assert_eq!(
        press(&mut panel, key(KeyCode::Enter), t0),
        PanelAction::Submit("Redis\n\nbut reuse the staging instance".into())
    );
}

const LONG: &str = "\
# Session cache

The login flow re-reads the session on every request, which is slow. Caching it needs one of these, and each has a cost worth thinking about before we commit:

- **Redis**: persistent, already deployed in staging, one more thing to run locally
- *Memcached*: simpler, but loses everything on restart
  1. nested point one
  2. nested point two

```toml
[dependencies]
redis = \"0.27\"
```

See [the design doc](https://example.com/design/cache) and `src/session.rs`.";

#[test]
fn long_markdown_question() {
    let t0 = Instant::now();
    let panel = open(Question::plain(LONG), Some(WAIT), t0);
    snapshot!("long_markdown", panel, t0);
}

#[test]
fn long_markdown_question_cut_to_fit_and_scrolled() {
    let t0 = Instant::now();
    let mut panel = open(Question::plain(LONG), Some(WAIT), t0);
    snapshot!("long_markdown_cut", panel, t0, WIDTH, Some(14));
    assert_eq!(
        press(&mut panel, key(KeyCode::PageDown), t0),
        PanelAction::Redraw
    );
    snapshot!("long_markdown_scrolled", panel, t0, WIDTH, Some(14));
}

/// A question that compares its choices in a table, as agents often do.
const TABLE: &str = "\
Which store should the session cache use?

| Store | Latency (p99) | Survives a restart | Cost |
|:--|--:|:-:|--|
| Redis | 0.4 ms | yes, with AOF | one more service to run and watch |
| In-process LRU | 0.01 ms | no | none |
| SQLite | 2 ms | yes | a file on the node's disk |

I lean to **Redis**.";

#[test]
fn table_question() {
    let t0 = Instant::now();
    let panel = open(Question::plain(TABLE), Some(WAIT), t0);
    snapshot!("table", panel, t0);
}

#[test]
fn table_question_narrow_wraps_its_widest_column() {
    let t0 = Instant::now();
    let panel = open(Question::plain(TABLE), Some(WAIT), t0);
    snapshot!("table_narrow", panel, t0, 56, None);
}

#[test]
fn table_question_at_forty_columns_shows_records() {
    let t0 = Instant::now();
    let panel = open(Question::plain(TABLE), Some(WAIT), t0);
    snapshot!("table_forty_columns", panel, t0, 40, None);
}

#[test]
fn paused() {
    let t0 = Instant::now();
    let mut panel = open(plain(), Some(WAIT), t0);
    type_str(&mut panel, "Redis", t0 + secs(48));
    assert!(panel.countdown().is_paused(t0 + secs(50)));
    snapshot!("paused", panel, t0 + secs(50));
}

#[test]
fn last_fifth() {
    let t0 = Instant::now();
    let panel = open(cache_options(), Some(WAIT), t0);
    snapshot!("last_fifth", panel, t0 + secs(250));
    let buffer = draw(&panel, WIDTH, None, t0 + secs(250)).buffer().clone();
    let (x, y) = find(&buffer, "50s left");
    assert_eq!(buffer[(x, y)].fg, Color::Yellow);
}

#[test]
fn last_ten_seconds_are_red_and_bold() {
    let t0 = Instant::now();
    let panel = open(cache_options(), Some(WAIT), t0);
    let now = t0 + secs(292);
    snapshot!("last_ten_seconds", panel, now);
    let backend = draw(&panel, WIDTH, None, now);
    let buffer = backend.buffer();
    let (x, y) = find(buffer, "8s left");
    let label = &buffer[(x, y)];
    assert_eq!(label.fg, Color::Red);
    assert!(label.modifier.contains(Modifier::BOLD));
    // The bar's filled part too, not just the words.
    let (bar, _) = find(buffer, "━");
    assert_eq!(buffer[(bar, y)].fg, Color::Red);
}

#[test]
fn extended() {
    let t0 = Instant::now();
    let mut panel = open(plain(), Some(WAIT), t0);
    let ctrl_e = KeyEvent::new(KeyCode::Char('e'), KeyModifiers::CONTROL);
    assert_eq!(
        press(&mut panel, ctrl_e, t0 + secs(280)),
        PanelAction::Extend
    );
    snapshot!("extended", panel, t0 + secs(290));
}

#[test]
fn extension_asked_and_not_granted_yet() {
    let t0 = Instant::now();
    let mut panel = open(plain(), Some(WAIT), t0);
    let ctrl_e = KeyEvent::new(KeyCode::Char('e'), KeyModifiers::CONTROL);
    // The request alone: the loop has not sent its countdown back yet, so the time left is
    // still the loop's, and the five minutes show as asked for.
    assert_eq!(
        panel.handle_key(ctrl_e, t0 + secs(250)),
        PanelAction::Extend
    );
    snapshot!("extension_pending", panel, t0 + secs(260));
}

#[test]
fn no_deadline() {
    let t0 = Instant::now();
    let panel = open(cache_options(), None, t0);
    snapshot!("no_deadline", panel, t0 + secs(3700));
}

#[test]
fn refused_empty() {
    let t0 = Instant::now();
    let mut panel = open(plain(), Some(WAIT), t0);
    assert_eq!(
        press(&mut panel, key(KeyCode::Enter), t0),
        PanelAction::RefusedEmpty
    );
    snapshot!("refused_empty", panel, t0 + secs(5));
}

#[test]
fn refused_empty_with_options() {
    let t0 = Instant::now();
    let mut panel = open(cache_options(), Some(WAIT), t0);
    press(&mut panel, key(KeyCode::Tab), t0);
    assert_eq!(
        press(&mut panel, key(KeyCode::Enter), t0),
        PanelAction::RefusedEmpty
    );
    snapshot!("refused_empty_with_options", panel, t0 + secs(5));
}

#[test]
fn answered_elsewhere() {
    let t0 = Instant::now();
    let mut panel = open(cache_options(), Some(WAIT), t0);
    type_str(&mut panel, "2", t0);
    let theirs = Answer::new("Memcached", AnsweredBy::RalphAnswer, None).with_who("laptop");
    panel.set_closed(Ended::answered(theirs, false));
    snapshot!("answered_elsewhere", panel, t0 + secs(60));
}

#[test]
fn timed_out() {
    let t0 = Instant::now();
    let mut panel = open(cache_options(), Some(WAIT), t0);
    panel.set_closed(Ended::TimedOut);
    snapshot!("timed_out", panel, t0 + secs(300));
}

#[test]
fn skipped() {
    let t0 = Instant::now();
    let mut panel = open(plain(), Some(WAIT), t0);
    panel.set_closed(Ended::Skipped);
    snapshot!("skipped", panel, t0 + secs(12));
}

#[test]
fn forty_columns() {
    let t0 = Instant::now();
    let mut panel = open(cache_options(), Some(WAIT), t0);
    type_str(&mut panel, "1", t0);
    press(&mut panel, key(KeyCode::Tab), t0);
    type_str(&mut panel, "with a TTL", t0);
    snapshot!("forty_columns", panel, t0 + secs(4), 40, None);
}

#[test]
fn forty_columns_and_short() {
    let t0 = Instant::now();
    let panel = open(Question::plain(LONG), Some(WAIT), t0);
    snapshot!("forty_columns_short", panel, t0 + secs(100), 40, Some(6));
}

#[test]
fn monochrome() {
    let t0 = Instant::now();
    let mut panel = open(cache_options(), Some(WAIT), t0).with_theme(Theme::monochrome());
    type_str(&mut panel, "1", t0);
    // Picking paused the countdown until t0 + 5 s, so 5 s are left at t0 + 300 s.
    let now = t0 + secs(300);
    snapshot!("monochrome", panel, now);
    let backend = draw(&panel, WIDTH, None, now);
    let buffer = backend.buffer();
    for cell in &buffer.content {
        assert_eq!((cell.fg, cell.bg), (Color::Reset, Color::Reset), "{cell:?}");
    }
    // Reverse video marks the option under the cursor and nothing before the others.
    for row in ["2. Memcached", "3. In-process LRU"] {
        let (x, y) = find(buffer, row);
        for x in 0..x {
            assert!(
                !buffer[(x, y)].modifier.contains(Modifier::REVERSED),
                "column {x} before {row:?} is reverse video"
            );
        }
    }
    let (x, y) = find(buffer, "› (•) 1. Redis");
    assert!(buffer[(x, y)].modifier.contains(Modifier::REVERSED));
    // Urgency shows as bold reverse instead of red.
    let (x, y) = find(buffer, "5s left");
    assert!(
        buffer[(x, y)]
            .modifier
            .contains(Modifier::BOLD | Modifier::REVERSED)
    );
}

#[test]
fn invalid_frontmatter_warning() {
    let t0 = Instant::now();
    let question = Question::parse("---\noptions: [Redis\n---\nWhich cache?");
    let panel = open(question, Some(WAIT), t0);
    snapshot!("invalid_frontmatter", panel, t0);
}

#[test]
fn default_that_is_not_an_option() {
    let t0 = Instant::now();
    let question = Question {
        default: Some("whichever is cheaper".into()),
        ..cache_options()
    };
    let panel = open(question, Some(WAIT), t0);
    snapshot!("default_not_an_option", panel, t0);
}

#[test]
fn control_sequences_from_the_agent_are_not_drawn() {
    let t0 = Instant::now();
    let question = Question {
        options: vec![QuestionOption::new("evil\u{1b}[2Joption")],
        context: Some("\u{1b}]0;pwned\u{7}context".into()),
        ..Question::plain("Clear \u{1b}[2J\u{1b}[Hthe screen?\u{9b}31m")
    };
    let panel = open(question, Some(WAIT), t0);
    let backend = draw(&panel, WIDTH, None, t0);
    for cell in &backend.buffer().content {
        assert!(
            !cell.symbol().chars().any(|c| c.is_control()),
            "control character drawn: {cell:?}"
        );
    }
    snapshot!("control_sequences", panel, t0);
}

#[test]
fn tiny_areas_never_panic() {
    let t0 = Instant::now();
    let mut panel = open(cache_options(), Some(WAIT), t0);
    type_str(&mut panel, "1", t0);
    press(&mut panel, key(KeyCode::Tab), t0);
    type_str(&mut panel, "a long note that will not fit anywhere", t0);
    for (w, h) in [
        (0, 0),
        (1, 1),
        (0, 5),
        (5, 0),
        (2, 2),
        (3, 1),
        (10, 3),
        (10, 1),
        (20, 4),
    ] {
        draw(&panel, w, Some(h), t0);
        // Also into an area that is not at the origin and larger than the buffer.
        let mut buffer = Buffer::empty(Rect::new(0, 0, w, h));
        panel.render(Rect::new(1, 1, w + 5, h + 5), &mut buffer, t0);
    }
    for closed in [Ended::TimedOut, Ended::Skipped] {
        let mut p = open(plain(), Some(WAIT), t0);
        p.set_closed(closed);
        for (w, h) in [(0, 0), (1, 1), (10, 3)] {
            draw(&p, w, Some(h), t0);
        }
    }
    snapshot!("ten_by_three", panel, t0, 10, Some(3));
}

#[test]
fn desired_height_fits_everything() {
    let t0 = Instant::now();
    let panel = open(cache_options(), Some(WAIT), t0);
    for width in [40, 72, 120] {
        let height = panel.desired_height(width);
        let backend = draw(&panel, width, Some(height), t0);
        let text = backend.to_string();
        assert!(text.contains("Esc skip"), "{width}:\n{text}");
        assert!(text.contains("In-process"), "{width}:\n{text}");
        // One more row would be empty: the panel asked for exactly what it uses.
        let taller = draw(&panel, width, Some(height + 1), t0).to_string();
        let last = taller.lines().last().unwrap();
        assert!(last.trim_matches('"').trim().is_empty(), "{width}: {last}");
    }
    assert_eq!(panel.desired_height(0), 0);
}

/// Regression: twelve options took every row a short panel had after the essentials, and the
/// title and the rest of the question (what happens without an answer) went.
#[test]
fn many_options_in_a_short_panel() {
    let t0 = Instant::now();
    let question = Question {
        options: (1..=12)
            .map(|n| QuestionOption::new(format!("region {n}")))
            .collect(),
        default: Some("region 1".into()),
        context: Some("Latency matters more than cost.".into()),
        ..Question::plain("Which region should the staging cluster run in?")
    };
    let mut panel = open(question, Some(WAIT), t0);
    snapshot!("many_options_short", panel, t0 + secs(10), WIDTH, Some(16));
    snapshot!("many_options_tall", panel, t0 + secs(10));
    // Down to the last option: the list scrolls with it.
    for _ in 0..11 {
        press(&mut panel, key(KeyCode::Down), t0);
    }
    snapshot!(
        "many_options_short_last",
        panel,
        t0 + secs(10),
        WIDTH,
        Some(16)
    );
}

/// Regression: with room for one option row, a question with three showed the first alone
/// and nothing said there were more.
#[test]
fn one_row_of_options_says_where_the_list_stands() {
    let t0 = Instant::now();
    let mut panel = open(cache_options(), Some(WAIT), t0);
    // The shortest panel that shows an option shows one row of them.
    let height = (4..20)
        .find(|&h| on_screen(draw(&panel, 60, Some(h), t0).buffer(), "1. Redis"))
        .unwrap();
    let screen = draw(&panel, 60, Some(height), t0).buffer().clone();
    assert!(on_screen(&screen, "1/3 ↑↓"), "{screen:?}");
    press(&mut panel, key(KeyCode::Down), t0);
    let screen = draw(&panel, 60, Some(height), t0).buffer().clone();
    assert!(on_screen(&screen, "2/3 ↑↓"), "{screen:?}");
    assert!(on_screen(&screen, "Memcached"), "{screen:?}");
}

/// Whether `text` is anywhere on the screen.
fn on_screen(buffer: &Buffer, text: &str) -> bool {
    find_any(buffer, text).is_some()
}

#[test]
fn an_answer_scrolled_in_a_short_editor_shows_whole_once_the_terminal_grows() {
    let t0 = Instant::now();
    let mut panel = open(plain(), Some(WAIT), t0);
    for (i, line) in ["first line", "second line", "third line"]
        .iter()
        .enumerate()
    {
        if i > 0 {
            press(
                &mut panel,
                KeyEvent::new(KeyCode::Char('j'), KeyModifiers::CONTROL),
                t0,
            );
        }
        type_str(&mut panel, line, t0);
    }
    // A short terminal: one row of editor, scrolled to the cursor on the third line.
    let short = draw(&panel, WIDTH, Some(6), t0);
    assert!(on_screen(short.buffer(), "third line"), "{short}");
    assert!(!on_screen(short.buffer(), "first line"), "{short}");
    // Taller again: the editor has room for all three lines, and shows them, the cursor
    // still on the third.
    let tall = draw(&panel, WIDTH, None, t0);
    for line in ["first line", "second line", "third line"] {
        assert!(on_screen(tall.buffer(), line), "{line:?} hidden:\n{tall}");
    }
    assert_eq!(panel.editor.borrow().cursor(), (2, 10));
    // The cursor stays where it was, and typing goes on there.
    type_str(&mut panel, "!", t0);
    assert_eq!(panel.draft(), "first line\nsecond line\nthird line!");
}
