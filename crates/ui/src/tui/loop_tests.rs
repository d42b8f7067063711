//! The whole view, event loop included, against a fake terminal: loop events and keys in,
//! controls and bytes out, the bytes replayed through a small terminal emulator.

use std::cell::RefCell;
use std::io::{self, Write};
use std::rc::Rc;
use std::time::{Duration, Instant};

use ralph_protocol::{Control, LoopEvent};
use ralph_signal::AgentEvent;
use ratatui::crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::{Position, Size};
use tokio::sync::mpsc;

use crate::tui::app::App;
use crate::tui::app_tests::{
    answered_here, app, asked, cache_question, finished, iteration, started,
};
use crate::tui::backend::TrackedBackend;
use crate::tui::event_loop;
use crate::tui::screen::Screen;
use crate::tui::terminal::Input;
use crate::tui::vt::{Tap, Vt};

/// The emulator and the wire into it.
#[derive(Clone)]
struct Wire {
    vt: Rc<RefCell<Vt>>,
    tap: Tap,
}

impl Wire {
    /// Replays what was written so far.
    fn sync(&self) -> std::cell::RefMut<'_, Vt> {
        let bytes = self.tap.take();
        let mut vt = self.vt.borrow_mut();
        vt.feed(&bytes);
        vt
    }
}

struct FakeInput {
    keys: mpsc::UnboundedReceiver<Event>,
    wire: Wire,
}

impl Input for FakeInput {
    async fn next(&mut self) -> Option<io::Result<Event>> {
        self.keys.recv().await.map(Ok)
    }

    fn cursor_position(&mut self) -> Option<Position> {
        Some(self.wire.sync().cursor())
    }

    fn size(&mut self) -> Option<Size> {
        None
    }
}

/// The test's side: the loop's events in, keys in, controls out, the screen.
struct Harness {
    events: mpsc::Sender<LoopEvent>,
    keys: mpsc::UnboundedSender<Event>,
    controls: mpsc::UnboundedReceiver<Control>,
    wire: Wire,
}

impl Harness {
    async fn send(&self, event: LoopEvent) {
        self.events.send(event).await.unwrap();
    }

    fn key(&self, code: KeyCode) {
        self.keys
            .send(Event::Key(KeyEvent::new(code, KeyModifiers::NONE)))
            .unwrap();
    }

    fn type_str(&self, text: &str) {
        text.chars().for_each(|c| self.key(KeyCode::Char(c)));
    }

    /// Lets the view catch up and draw a frame.
    async fn settle(&self) {
        tokio::time::sleep(Duration::from_millis(40)).await;
    }

    /// Every control sent so far.
    fn controls(&mut self) -> Vec<Control> {
        std::iter::from_fn(|| self.controls.try_recv().ok()).collect()
    }

    fn screen(&self) -> String {
        self.wire.sync().to_string()
    }
}

/// A view on a `width` x `height` terminal whose cursor starts at `row`.
fn start(
    mut app: App,
    width: u16,
    height: u16,
    row: u16,
) -> (Harness, impl Future<Output = io::Result<()>>) {
    let tap = Tap::default();
    let wire = Wire {
        vt: Rc::new(RefCell::new(Vt::new(width, height, (0, row)))),
        tap: tap.clone(),
    };
    let (events_tx, mut events) = mpsc::channel(1024);
    let (keys_tx, keys) = mpsc::unbounded_channel();
    let (controls, controls_rx) = mpsc::unbounded_channel();
    let mut input = FakeInput {
        keys,
        wire: wire.clone(),
    };
    let view = async move {
        let backend = TrackedBackend::new(tap, Size::new(width, height), Position::new(0, row));
        let mut screen = Screen::new(backend, app.height(width, height))?;
        event_loop::run(&mut app, &mut screen, &mut input, &mut events, &controls).await
    };
    let harness = Harness {
        events: events_tx,
        keys: keys_tx,
        controls: controls_rx,
        wire,
    };
    (harness, view)
}

fn text(s: &str) -> LoopEvent {
    LoopEvent::Agent(AgentEvent::Text(s.into()))
}

#[tokio::test]
async fn an_answer_typed_in_the_view_reaches_the_loop_and_the_terminal_is_left_clean() {
    let (mut h, view) = start(app(), 80, 24, 2);
    let script = async {
        h.send(started()).await;
        h.send(iteration(1, Instant::now(), None)).await;
        h.send(text("I need to pick a cache backend.")).await;
        h.send(text(&format!("A long line: {}", "abc ".repeat(20))))
            .await;
        h.send(asked(cache_question(), None, Instant::now())).await;
        h.settle().await;
        let screen = h.screen();
        assert!(screen.contains("The agent asks"), "{screen}");
        assert!(screen.contains("1. Redis"), "{screen}");
        assert!(screen.contains("Ctrl+C stop"), "{screen}");
        assert_eq!(h.wire.vt.borrow().bells(), 1);
        assert!(!h.wire.vt.borrow().cursor_visible());

        h.type_str("Redis, with a TTL");
        h.key(KeyCode::Enter);
        h.settle().await;
        let controls = h.controls();
        assert_eq!(
            controls.last(),
            Some(&Control::Answer("Redis, with a TTL".into()))
        );
        assert!(h.screen().contains("sending your answer…"));

        h.send(LoopEvent::QuestionClosed(answered_here(
            "Redis, with a TTL",
        )))
        .await;
        h.send(text("Using Redis.")).await;
        h.send(finished()).await;
    };
    let (result, ()) = tokio::join!(view, script);
    result.unwrap();
    let vt = h.wire.sync();
    assert!(vt.cursor_visible());
    // The prompt comes right under the last line: the viewport is gone.
    let cursor = vt.cursor();
    assert_eq!(cursor.x, 0);
    assert!(vt.row(cursor.y - 1).starts_with("ralph: finished"), "{vt}");
    insta::assert_snapshot!("loop_answered", vt.to_string());
}

#[tokio::test]
async fn a_resize_in_the_middle_of_an_answer_loses_nothing() {
    let (mut h, view) = start(app(), 70, 20, 0);
    let script = async {
        h.send(started()).await;
        for i in 0..30 {
            h.send(text(&format!("output line {i}"))).await;
        }
        h.send(asked(cache_question(), None, Instant::now())).await;
        h.settle().await;
        h.type_str("Red");
        h.settle().await;
        // The terminal shrinks under the view; the resize event comes after, as with SIGWINCH.
        h.wire.sync().resize(50, 14);
        h.keys.send(Event::Resize(50, 14)).unwrap();
        h.type_str("is");
        h.settle().await;
        let screen = h.screen();
        // Fourteen rows: the first option, the note of the second, and the editor (without its
        // border) holding all that was typed on both sides of the resize.
        assert!(screen.contains("\n> Redis"), "{screen}");
        assert!(screen.contains("1. Redis"), "{screen}");
        assert!(screen.contains("… 1 more option (↑↓"), "{screen}");
        h.key(KeyCode::Enter);
        h.settle().await;
        assert_eq!(h.controls().last(), Some(&Control::Answer("Redis".into())));
        h.send(LoopEvent::QuestionClosed(answered_here("Redis")))
            .await;
        h.send(finished()).await;
    };
    let (result, ()) = tokio::join!(view, script);
    result.unwrap();
    let vt = h.wire.sync();
    let screen = vt.to_string();
    let after_resize = screen.split("~~~~ screen ~~~~").nth(1).unwrap();
    // Nothing of the old viewport is left on screen, and the output is in order.
    assert!(!after_resize.contains("1. Redis"), "{screen}");
    assert!(!after_resize.contains("Ctrl+C stop"), "{screen}");
    let lines: Vec<&str> = screen.lines().filter(|l| !l.trim().is_empty()).collect();
    let at = |needle: &str| lines.iter().position(|l| l.starts_with(needle)).unwrap();
    assert!(at("output line 29") < at("ralph: the agent asks"));
    assert!(at("ralph: the agent asks") < at("ralph: answer sent"));
    assert!(at("ralph: answer sent") < at("ralph: finished"));
}

#[tokio::test]
async fn the_view_ends_when_the_loop_goes_away() {
    let (h, view) = start(app(), 40, 10, 0);
    let Harness {
        events, wire, keys, ..
    } = h;
    let script = async move {
        events.send(started()).await.unwrap();
        drop(events);
        keys
    };
    let (result, _keys) = tokio::join!(view, script);
    result.unwrap();
    let vt = Wire::sync(&wire);
    assert!(
        vt.to_string()
            .contains("ralph: the loop stopped; why follows")
    );
    assert!(vt.cursor_visible());
}

/// Counts what reaches the terminal: bytes and flushes (each a system call or two in the
/// real view, whose output buffer writes only on flush).
#[derive(Clone, Default)]
struct Meter(Rc<RefCell<(usize, usize)>>);

impl Write for Meter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.borrow_mut().1 += 1;
        Ok(())
    }
}

/// Pushes `bytes` of agent output through the view in 100-byte lines; returns the time it
/// took, the bytes written to the terminal and the number of flushes.
async fn flood(bytes: usize) -> (Duration, usize, usize) {
    let meter = Meter::default();
    let (width, height) = (120, 40);
    let (events_tx, mut events) = mpsc::channel(1024);
    let (_keys_tx, keys) = mpsc::unbounded_channel();
    let (controls, _controls_rx) = mpsc::unbounded_channel();
    let wire = Wire {
        vt: Rc::new(RefCell::new(Vt::new(1, 1, (0, 0)))),
        tap: Tap::default(),
    };
    let mut input = FakeInput { keys, wire };
    let mut app = app();
    let out = meter.clone();
    let view = async move {
        let backend = TrackedBackend::new(out, Size::new(width, height), Position::new(0, 0));
        let mut screen = Screen::new(backend, app.height(width, height))?;
        event_loop::run(&mut app, &mut screen, &mut input, &mut events, &controls).await
    };
    let line = "x".repeat(99);
    let lines = bytes / 100;
    let producer = async move {
        events_tx.send(started()).await.unwrap();
        events_tx
            .send(iteration(1, Instant::now(), Some(Duration::from_secs(600))))
            .await
            .unwrap();
        for _ in 0..lines {
            events_tx.send(text(&line)).await.unwrap();
        }
        events_tx.send(finished()).await.unwrap();
    };
    let start = Instant::now();
    let (result, ()) = tokio::join!(view, producer);
    result.unwrap();
    let (written, flushes) = *meter.0.borrow();
    (start.elapsed(), written, flushes)
}

#[tokio::test]
async fn a_flood_of_output_is_written_in_few_large_pieces() {
    let bytes = 5 << 20;
    let (took, written, flushes) = flood(bytes).await;
    assert!(written >= bytes, "{written}");
    // One flush per frame, at most one frame every 16 ms: the lines go out in batches.
    let lines = bytes / 100;
    assert!(
        flushes * 200 < lines,
        "{flushes} flushes for {lines} lines in {took:?}"
    );
}

/// `cargo test -p ralph-ui --release -- --ignored flood_of_50_mb --nocapture`
#[tokio::test]
#[ignore = "a measurement; run it in release mode"]
async fn flood_of_50_mb() {
    let (took, written, flushes) = flood(50 << 20).await;
    let mb = written as f64 / f64::from(1 << 20);
    println!(
        "50 MB of agent output: {took:?}, {mb:.0} MB written in {flushes} flushes, {:.0} MB/s",
        mb / took.as_secs_f64()
    );
}

#[tokio::test]
async fn a_viewport_larger_than_the_terminal_still_works() {
    // Four rows: the panel wants more than there is.
    let (mut h, view) = start(app(), 30, 4, 3);
    let script = async {
        h.send(started()).await;
        h.send(asked(cache_question(), None, Instant::now())).await;
        h.settle().await;
        h.type_str("x");
        h.key(KeyCode::Enter);
        h.settle().await;
        assert_eq!(h.controls().last(), Some(&Control::Answer("x".into())));
        h.send(finished()).await;
    };
    let (result, ()) = tokio::join!(view, script);
    result.unwrap();
}
