//! The loop view's event loop: loop events, terminal input and the clock, in one `select!`.
//!
//! It sleeps until something happens: a loop event, a key, a resize, or the next instant the
//! screen changes by itself (the countdown's next tick, the iteration clock's next second).
//! Nothing polls. Frames are drawn at most every [`FRAME`]: when the agent floods output, the
//! events that arrive meanwhile are applied and their lines go into the scrollback together,
//! in one write, with the next frame.
//!
//! It is generic over the output and the input so tests drive it with a fake terminal.

use std::io::{self, Write};
use std::time::{Duration, Instant};

use ralph_protocol::{Control, LoopEvent};
use ratatui::crossterm::event::{Event, KeyEventKind};
use ratatui::layout::Size;
use tokio::sync::mpsc;

use crate::tui::app::App;
use crate::tui::screen::Screen;
use crate::tui::terminal::Input;

/// Shortest time between two frames.
const FRAME: Duration = Duration::from_millis(16);
/// Most loop events applied before looking at the keyboard again.
const BATCH: usize = 4096;

/// Runs the view until the loop finishes (or its channel closes), then erases the viewport.
pub(crate) async fn run<W: Write, I: Input>(
    app: &mut App,
    screen: &mut Screen<W>,
    input: &mut I,
    events: &mut mpsc::Receiver<LoopEvent>,
    controls: &mpsc::UnboundedSender<Control>,
) -> io::Result<()> {
    let mut input_open = true;
    let mut last_frame: Option<Instant> = None;
    // Draw the first frame right away.
    let mut dirty = true;
    loop {
        let now = Instant::now();
        if dirty && last_frame.is_none_or(|at| now >= at + FRAME) {
            frame(app, screen, now)?;
            last_frame = Some(now);
            dirty = false;
        }
        if app.is_done() {
            break;
        }
        let frame_at = dirty.then(|| last_frame.map_or(now, |at| at + FRAME));
        let wake = match (frame_at, app.next_tick(now)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let sleep = async {
            match wake {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            event = events.recv() => {
                let now = Instant::now();
                match event {
                    Some(event) => {
                        app.on_event(event, now);
                        // Apply what is already queued before drawing anything.
                        for _ in 0..BATCH {
                            match events.try_recv() {
                                Ok(event) => app.on_event(event, now),
                                Err(_) => break,
                            }
                            if app.is_done() {
                                break;
                            }
                        }
                    }
                    None => app.disconnected(),
                }
                dirty = true;
            }
            terminal_event = input.next(), if input_open => {
                match terminal_event {
                    Some(Ok(event)) => {
                        on_terminal_event(app, screen, input, controls, event)?;
                        dirty = true;
                    }
                    // Input is gone (the terminal closed): keep showing the loop until it ends.
                    Some(Err(_)) | None => input_open = false,
                }
            }
            () = sleep => dirty = true,
        }
    }
    // The last lines (the finish line among them) take the viewport's place.
    screen.finish(&app.take_output())
}

fn on_terminal_event<W: Write, I: Input>(
    app: &mut App,
    screen: &mut Screen<W>,
    input: &mut I,
    controls: &mpsc::UnboundedSender<Control>,
    event: Event,
) -> io::Result<()> {
    let now = Instant::now();
    let control = match event {
        Event::Key(key) if key.kind != KeyEventKind::Release => app.on_key(key, now),
        Event::Paste(text) => app.on_paste(&text),
        Event::Resize(width, height) => {
            let size = input.size().unwrap_or(Size::new(width, height));
            let cursor = input.cursor_position();
            screen.resize(size, cursor)?;
            None
        }
        _ => None,
    };
    if let Some(control) = control {
        // The loop may be gone already; there is nobody left to tell.
        let _ = controls.send(control);
    }
    Ok(())
}

/// Writes pending output above the viewport, fits the viewport to what it shows, draws.
fn frame<W: Write>(app: &mut App, screen: &mut Screen<W>, now: Instant) -> io::Result<()> {
    let size = screen.size();
    screen.update(&app.take_output(), app.height(size.width, size.height))?;
    if app.take_bell() {
        screen.bell()?;
    }
    if let Some(text) = app.take_notice() {
        screen.notify("ralph: the agent asks", &text)?;
    }
    screen.draw(|f| app.render(f.area(), f.buffer_mut(), now))
}
