use ralph_protocol::{Control, QuestionOption};

use super::*;
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ralph_protocol::EXTEND_BY;

const fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

fn question(options: &[&str], multi: bool) -> Question {
    Question {
        options: options.iter().map(|o| QuestionOption::new(*o)).collect(),
        multi_select: multi,
        ..Question::plain("Which cache?")
    }
}

fn panel(q: Question, t0: Instant) -> QuestionPanel {
    QuestionPanel::new(
        q,
        Countdown::new(Some(secs(300)), t0),
        SystemTime::now(),
        t0,
    )
}

fn type_str(p: &mut QuestionPanel, s: &str, now: Instant) {
    for c in s.chars() {
        p.handle_key(key(KeyCode::Char(c)), now);
    }
}

#[test]
fn enter_sends_free_text() {
    let t0 = Instant::now();
    let mut p = panel(question(&[], false), t0);
    type_str(&mut p, "use Redis", t0);
    assert_eq!(
        p.handle_key(key(KeyCode::Enter), t0),
        PanelAction::Submit("use Redis".into())
    );
}

#[test]
fn empty_answer_is_refused_with_a_hint_until_the_next_edit() {
    let t0 = Instant::now();
    let mut p = panel(question(&[], false), t0);
    assert_eq!(
        p.handle_key(key(KeyCode::Enter), t0),
        PanelAction::RefusedEmpty
    );
    assert!(p.refused);
    type_str(&mut p, "   ", t0);
    assert!(!p.refused);
    assert_eq!(
        p.handle_key(key(KeyCode::Enter), t0),
        PanelAction::RefusedEmpty
    );
}

#[test]
fn alt_enter_shift_enter_and_ctrl_j_insert_newlines() {
    let t0 = Instant::now();
    let mut p = panel(question(&[], false), t0);
    type_str(&mut p, "a", t0);
    assert_eq!(
        p.handle_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT), t0),
        PanelAction::Typing
    );
    type_str(&mut p, "b", t0);
    p.handle_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::SHIFT), t0);
    type_str(&mut p, "c", t0);
    assert_eq!(p.handle_key(ctrl('j'), t0), PanelAction::Typing);
    type_str(&mut p, "d", t0);
    assert_eq!(
        p.handle_key(key(KeyCode::Enter), t0),
        PanelAction::Submit("a\nb\nc\nd".into())
    );
}

#[test]
fn esc_skips_even_with_text() {
    let t0 = Instant::now();
    let mut p = panel(question(&["a"], false), t0);
    type_str(&mut p, "x", t0);
    assert_eq!(p.handle_key(key(KeyCode::Esc), t0), PanelAction::Skip);
}

/// The loop's side of a question: its countdown, changed only as the loop changes it.
struct Loop(Countdown);

impl Loop {
    fn new(t0: Instant) -> Self {
        Loop(Countdown::new(Some(secs(300)), t0))
    }

    /// The loop takes `control` and sends its countdown back to the panel.
    fn hears(&mut self, control: &Control, p: &mut QuestionPanel, now: Instant) {
        assert!(control.change_countdown(&mut self.0, now));
        p.show_countdown(self.0.clone(), now);
    }
}

#[test]
fn ctrl_e_asks_the_loop_and_shows_the_time_pending_until_the_loop_grants_it() {
    let t0 = Instant::now();
    let mut p = panel(question(&[], false), t0);
    let mut the_loop = Loop::new(t0);
    let now = t0 + secs(10);
    assert_eq!(p.handle_key(ctrl('e'), now), PanelAction::Extend);
    assert_eq!(p.handle_key(ctrl('e'), now), PanelAction::Extend);
    // Asked, not granted: the time left is the loop's.
    assert_eq!(p.countdown().remaining(now), Some(secs(290)));
    assert_eq!(p.extension_pending(), Some(EXTEND_BY * 2));
    the_loop.hears(&Control::Extend, &mut p, now);
    assert_eq!(p.countdown().remaining(now), Some(secs(590)));
    assert_eq!(p.extension_pending(), Some(EXTEND_BY));
    the_loop.hears(&Control::Extend, &mut p, now);
    assert_eq!(p.countdown().remaining(now), Some(secs(890)));
    assert_eq!(p.extension_pending(), None);
}

#[test]
fn an_extension_the_loop_cannot_grant_stops_being_pending() {
    let t0 = Instant::now();
    let mut p = panel(question(&[], false), t0);
    assert_eq!(p.handle_key(ctrl('e'), t0 + secs(299)), PanelAction::Extend);
    // The deadline passed before the loop heard it: it sends its countdown, run out.
    let mut theirs = Countdown::new(Some(secs(300)), t0);
    Control::Extend.change_countdown(&mut theirs, t0 + secs(300));
    p.show_countdown(theirs, t0 + secs(300));
    assert_eq!(p.extension_pending(), None);
}

#[test]
fn the_loops_countdown_is_shown_whoever_changed_it() {
    let t0 = Instant::now();
    let mut p = panel(question(&[], false), t0);
    // Extended from `ralph serve`'s page: nothing was asked here.
    let mut theirs = Countdown::new(Some(secs(300)), t0);
    theirs.extend(EXTEND_BY, t0 + secs(5));
    p.show_countdown(theirs.clone(), t0 + secs(5));
    assert_eq!(p.countdown(), &theirs);
    assert_eq!(p.extension_pending(), None);
}

#[test]
fn ctrl_e_does_nothing_without_a_deadline_or_after_it() {
    let t0 = Instant::now();
    let mut p = QuestionPanel::new(
        question(&[], false),
        Countdown::new(None, t0),
        SystemTime::now(),
        t0,
    );
    assert_eq!(p.handle_key(ctrl('e'), t0), PanelAction::None);
    let mut p = panel(question(&[], false), t0);
    assert_eq!(p.handle_key(ctrl('e'), t0 + secs(301)), PanelAction::None);
}

/// Regression (issue 24): the panel paused a copy of the countdown of its own, which
/// the loop's and the panel's changes each overwrote.
#[test]
fn typing_asks_the_loop_to_pause_and_the_pause_shows_once_the_loop_has_it() {
    let t0 = Instant::now();
    let mut p = panel(question(&[], false), t0);
    let mut the_loop = Loop::new(t0);
    let now = t0 + secs(100);
    assert_eq!(
        p.handle_key(key(KeyCode::Char('x')), now),
        PanelAction::Typing
    );
    assert!(!p.countdown().is_paused(now), "the panel pauses nothing");
    the_loop.hears(&Control::Typing, &mut p, now);
    assert!(p.countdown().is_paused(t0 + secs(101)));
    assert_eq!(p.countdown().remaining(t0 + secs(104)), Some(secs(200)));
}

#[test]
fn number_keys_pick_and_enter_sends_the_label() {
    let t0 = Instant::now();
    let mut p = panel(question(&["Redis", "Memcached"], false), t0);
    assert_eq!(
        p.handle_key(key(KeyCode::Char('2')), t0),
        PanelAction::Typing
    );
    assert_eq!(p.chosen, [false, true]);
    assert_eq!(
        p.handle_key(key(KeyCode::Char('1')), t0),
        PanelAction::Typing
    );
    assert_eq!(p.chosen, [true, false]);
    p.handle_key(key(KeyCode::Tab), t0);
    assert_eq!(
        p.handle_key(key(KeyCode::Enter), t0),
        PanelAction::Submit("Redis".into())
    );
}

#[test]
fn number_keys_beyond_the_options_are_typed() {
    let t0 = Instant::now();
    let mut p = panel(question(&["a", "b"], false), t0);
    p.handle_key(key(KeyCode::Tab), t0);
    type_str(&mut p, "3", t0);
    assert_eq!(p.draft(), "3");
    assert_eq!(p.chosen, [false, false]);
}

/// Regression: `16` typed with three options was option 1 with the note `6`.
#[test]
fn a_number_that_names_no_option_is_typed_whole() {
    let t0 = Instant::now();
    for (multi, tab) in [(false, false), (false, true), (true, false), (true, true)] {
        let mut p = panel(question(&["a", "b", "c"], multi), t0);
        // One pick already made: the undone digit gives it back.
        p.handle_key(key(KeyCode::Char('2')), t0);
        p.handle_key(key(KeyCode::Down), t0);
        if tab {
            p.handle_key(key(KeyCode::Tab), t0);
        }
        let before = (p.chosen.clone(), p.cursor);
        type_str(&mut p, "16", t0);
        assert_eq!(p.draft(), "16", "multi {multi}, editor {tab}");
        assert_eq!(
            (p.chosen.clone(), p.cursor),
            before,
            "multi {multi}, editor {tab}"
        );
        assert_eq!(p.focus, Focus::Editor);
        assert_eq!(
            p.handle_key(key(KeyCode::Enter), t0),
            PanelAction::Submit("b\n\n16".into()),
            "multi {multi}, editor {tab}"
        );
    }
    // A second digit that names an option is a second pick, as before.
    let mut p = panel(question(&["a", "b", "c"], false), t0);
    type_str(&mut p, "13", t0);
    assert_eq!(
        (p.chosen.as_slice(), p.draft().as_str()),
        (&[false, false, true][..], "")
    );
    // Only right after: a key between them ends the number.
    let mut p = panel(question(&["a", "b", "c"], false), t0);
    type_str(&mut p, "1", t0);
    p.handle_key(key(KeyCode::Tab), t0);
    type_str(&mut p, "6", t0);
    assert_eq!(
        (p.chosen.as_slice(), p.draft().as_str()),
        (&[true, false, false][..], "6")
    );
}

#[test]
fn number_keys_type_once_the_editor_has_text() {
    let t0 = Instant::now();
    let mut p = panel(question(&["a", "b"], false), t0);
    p.handle_key(key(KeyCode::Tab), t0);
    type_str(&mut p, "x1", t0);
    assert_eq!(p.draft(), "x1");
    assert_eq!(p.chosen, [false, false]);
}

#[test]
fn up_down_and_enter_pick_from_the_list() {
    let t0 = Instant::now();
    let mut p = panel(question(&["a", "b", "c"], false), t0);
    assert_eq!(p.focus, Focus::Options);
    p.handle_key(key(KeyCode::Down), t0);
    p.handle_key(key(KeyCode::Down), t0);
    p.handle_key(key(KeyCode::Up), t0);
    assert_eq!(
        p.handle_key(key(KeyCode::Enter), t0),
        PanelAction::Submit("b".into())
    );
}

#[test]
fn the_highlight_starts_on_the_default() {
    let t0 = Instant::now();
    let q = Question {
        default: Some("c".into()),
        ..question(&["a", "b", "c"], false)
    };
    let mut p = panel(q, t0);
    assert_eq!(
        p.handle_key(key(KeyCode::Enter), t0),
        PanelAction::Submit("c".into())
    );
}

#[test]
fn down_past_the_last_option_enters_the_editor_and_up_returns() {
    let t0 = Instant::now();
    let mut p = panel(question(&["a", "b"], false), t0);
    p.handle_key(key(KeyCode::Down), t0);
    p.handle_key(key(KeyCode::Down), t0);
    assert_eq!(p.focus, Focus::Editor);
    p.handle_key(key(KeyCode::Up), t0);
    assert_eq!((p.focus, p.cursor), (Focus::Options, 1));
}

#[test]
fn typing_a_letter_in_the_list_answers_in_words() {
    let t0 = Instant::now();
    let mut p = panel(question(&["a", "b"], false), t0);
    type_str(&mut p, "neither", t0);
    assert_eq!(p.focus, Focus::Editor);
    assert_eq!(
        p.handle_key(key(KeyCode::Enter), t0),
        PanelAction::Submit("neither".into())
    );
}

#[test]
fn multi_select_toggles_and_sends_one_label_per_line() {
    let t0 = Instant::now();
    let mut p = panel(question(&["a", "b", "c"], true), t0);
    type_str(&mut p, "13", t0);
    p.handle_key(key(KeyCode::Char('1')), t0);
    p.handle_key(key(KeyCode::Char('1')), t0);
    assert_eq!(p.chosen, [true, false, true]);
    p.handle_key(key(KeyCode::Down), t0);
    assert_eq!(
        p.handle_key(key(KeyCode::Enter), t0),
        PanelAction::Submit("a\nc".into())
    );
}

/// Issue 31: the panel sends what every other front end sends for the same picks and note
/// (`desk::compose`, which the page, Telegram and `ralph answer` go through), so the agent
/// gets the same `answer.md` and `ralph ask --json` the same picks.
#[test]
fn the_panel_sends_the_desks_encoding_of_its_picks_and_note() {
    use ralph_protocol::{Reply, compose_answer, read_back};
    let t0 = Instant::now();
    let q = question(&["Redis", "Memcached", "Valkey"], true);
    let mut p = panel(q.clone(), t0);
    type_str(&mut p, "13", t0);
    p.handle_key(key(KeyCode::Tab), t0);
    type_str(&mut p, "both, for now", t0);
    let PanelAction::Submit(sent) = p.handle_key(key(KeyCode::Enter), t0) else {
        panic!("not sent")
    };
    let composed = compose_answer(Some(&q), &Reply::Picks(vec![1, 3], "both, for now".into()));
    assert_eq!(Ok(sent.clone()), composed);
    assert_eq!(
        read_back(&q, &sent),
        (vec!["Redis", "Valkey"], Some("both, for now"))
    );
}

#[test]
fn multi_select_space_toggles_in_the_list_and_in_an_empty_editor() {
    let t0 = Instant::now();
    let mut p = panel(question(&["a", "b", "c"], true), t0);
    p.handle_key(key(KeyCode::Char(' ')), t0);
    p.handle_key(key(KeyCode::Down), t0);
    p.handle_key(key(KeyCode::Tab), t0);
    p.handle_key(key(KeyCode::Char(' ')), t0);
    assert_eq!(p.chosen, [true, true, false]);
    assert_eq!(p.draft(), "");
}

#[test]
fn multi_select_enter_with_nothing_toggled_sends_the_highlight() {
    let t0 = Instant::now();
    let mut p = panel(question(&["a", "b"], true), t0);
    p.handle_key(key(KeyCode::Down), t0);
    assert_eq!(
        p.handle_key(key(KeyCode::Enter), t0),
        PanelAction::Submit("b".into())
    );
}

#[test]
fn a_picked_option_can_be_annotated() {
    let t0 = Instant::now();
    let mut p = panel(question(&["Redis", "Memcached"], false), t0);
    p.handle_key(key(KeyCode::Char('1')), t0);
    p.handle_key(key(KeyCode::Tab), t0);
    type_str(&mut p, "with a 5m TTL", t0);
    assert_eq!(
        p.handle_key(key(KeyCode::Enter), t0),
        PanelAction::Submit("Redis\n\nwith a 5m TTL".into())
    );
}

#[test]
fn a_multi_line_note_goes_under_the_labels() {
    let t0 = Instant::now();
    let mut p = panel(question(&["a", "b"], true), t0);
    type_str(&mut p, "12", t0);
    p.handle_key(key(KeyCode::Tab), t0);
    p.handle_paste("line one\r\nline two");
    assert_eq!(
        p.handle_key(key(KeyCode::Enter), t0),
        PanelAction::Submit("a\nb\n\nline one\nline two".into())
    );
}

#[test]
fn paste_inserts_text_and_drops_control_characters() {
    let t0 = Instant::now();
    let mut p = panel(question(&["a"], false), t0);
    assert_eq!(
        p.handle_paste("hi\u{1b}[31m there\tyou"),
        PanelAction::Typing
    );
    assert_eq!(p.focus, Focus::Editor);
    assert_eq!(p.draft(), "hi[31m there\tyou");
    assert_eq!(p.handle_paste(""), PanelAction::None);
}

#[test]
fn a_closed_panel_ignores_input() {
    let t0 = Instant::now();
    let mut p = panel(question(&["a"], false), t0);
    p.set_closed(Ended::TimedOut);
    assert_eq!(p.handle_key(key(KeyCode::Enter), t0), PanelAction::None);
    assert_eq!(p.handle_key(key(KeyCode::Esc), t0), PanelAction::None);
    assert_eq!(p.handle_paste("x"), PanelAction::None);
    assert_eq!(p.next_redraw(t0), None);
}

#[test]
fn key_releases_and_ctrl_c_are_ignored() {
    let t0 = Instant::now();
    let mut p = panel(question(&[], false), t0);
    let mut release = key(KeyCode::Char('x'));
    release.kind = KeyEventKind::Release;
    assert_eq!(p.handle_key(release, t0), PanelAction::None);
    assert_eq!(p.handle_key(ctrl('c'), t0), PanelAction::None);
    assert_eq!(p.draft(), "");
}

#[test]
fn next_redraw_follows_the_countdown() {
    let t0 = Instant::now();
    let p = panel(question(&[], false), t0);
    let later = t0 + Duration::from_millis(2500);
    assert_eq!(
        p.next_redraw(later),
        Some(later + Duration::from_millis(500))
    );
    // With no countdown, the title's age still ticks: by the second in its first
    // minute ("asked 12s ago"), then by the minute.
    let mut q = question(&[], false);
    q.text = "No deadline".into();
    // Asked "in the future" (a clock set back) counts as asked at open: an exact age.
    let asked_at = SystemTime::now() + Duration::from_secs(3600);
    let p = QuestionPanel::new(q, Countdown::new(None, t0), asked_at, t0);
    let at = |s: u64| t0 + Duration::from_millis(s * 1000 + 300);
    assert_eq!(
        p.next_redraw(at(12)),
        Some(at(12) + Duration::from_millis(700))
    );
    assert_eq!(
        p.next_redraw(at(75)),
        Some(at(75) + Duration::from_millis(44_700))
    );
}

/// Regression (issue 34, item 14): the context line showed the agent's markdown raw.
#[test]
fn the_context_line_is_markdown_rendered() {
    let q = Question {
        context: Some("Both **crates** are in `Cargo.toml`.".into()),
        ..Question::plain("Which?")
    };
    let lines: Vec<String> = crate::wrap::wrap(&body_paras(&q, &Theme::monochrome()), 80)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("Both crates are in Cargo.toml.")),
        "{lines:?}"
    );
    assert!(!lines.iter().any(|l| l.contains("**")), "{lines:?}");
}
