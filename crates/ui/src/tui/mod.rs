//! The loop view: the agent's output scrolling by, with the status and any question pinned
//! below it.
//!
//! # Theory of operation
//!
//! The view owns the bottom few rows of the terminal, an *inline viewport*, and leaves the
//! rest to the terminal: the agent's output, tool calls and ralph's notes are written above the
//! viewport as ordinary text and scroll into the terminal's own scrollback, so they survive
//! exit and work with the terminal's search and tmux copy mode. The viewport holds the status
//! area (task, iteration and its clock, criteria, signal, cost) and, while the agent waits for
//! an answer, the [`QuestionPanel`](crate::QuestionPanel) above it; it grows and shrinks with
//! the panel.
//!
//! The pieces, by idea:
//!
//! - `app`: the state, how loop events and keys change it and what the keys ask of the loop,
//!   with no terminal in sight.
//! - `view`: drawing the status area and the panel from that state.
//! - `screen`: the inline viewport, recreated whenever its height changes or output goes
//!   above it, and `backend`, the ratatui backend under it that tracks the cursor instead of
//!   asking the terminal (the reason is in its docs).
//! - `terminal`: raw mode, bracketed paste, the panic hook and restoring the terminal.
//! - `event_loop`: one `select!` over loop events, keys and the next clock tick.
//!
//! # Keys
//!
//! With a question open, keys go to the panel (see [`question_panel`](crate::question_panel)
//! for its keys: `Enter` sends, `Esc` skips, `Ctrl+E` adds five minutes, ...). Always:
//!
//! | key | effect |
//! | --- | --- |
//! | `Ctrl+C` | stop the loop gracefully (the agent gets SIGTERM and a grace period); with a question open, asks first: `y` stops, anything else keeps waiting |
//! | `Ctrl+C` again | kill the agent now |
//!
//! Pastes arrive whole (bracketed paste) and go into the answer editor.

mod app;
mod backend;
mod event_loop;
mod screen;
mod terminal;
mod view;

#[cfg(test)]
mod app_tests;
#[cfg(test)]
mod loop_tests;
#[cfg(test)]
mod status_snapshots;
#[cfg(test)]
mod vt;

use std::io;
use std::panic::AssertUnwindSafe;

use futures_util::FutureExt;

use ralph_protocol::{Control, LoopEvent};
use tokio::sync::mpsc;

use crate::plain;
use crate::theme::Theme;
use crate::tui::app::App;
use crate::tui::backend::TrackedBackend;
use crate::tui::screen::Screen;
use crate::tui::terminal::{Found, Guard, TermInput, TermOut};

/// How the loop view behaves.
#[derive(Debug, Clone)]
pub struct TuiOptions {
    /// `ralph answer -C DIR` for this loop ([`ralph_protocol::answer_command`]), for the
    /// hint under a question.
    pub answer_command: String,
    /// Ring the terminal bell when a question arrives.
    pub bell: bool,
    /// Also ask the terminal for a desktop notification (OSC 9 / OSC 777) when a question arrives.
    pub desktop: bool,
    /// Colours, or none under `NO_COLOR` ([`Theme::from_env`]).
    pub theme: Theme,
}

impl TuiOptions {
    /// Options with the theme the environment asks for.
    pub fn new(answer_command: String, bell: bool) -> Self {
        Self {
            answer_command,
            bell,
            desktop: false,
            theme: Theme::from_env(),
        }
    }
}

/// A terminal taken over for the loop view: [`Tui::start`], then [`Tui::run`].
///
/// Starting is separate from running so a caller can fall back to
/// [`run_plain`](crate::run_plain) with the same channels when there is no usable terminal.
#[derive(Debug)]
pub struct Tui {
    guard: Guard,
    found: Found,
    opts: TuiOptions,
}

impl Tui {
    /// Takes over the terminal (raw mode, bracketed paste, a panic hook that gives it back),
    /// or says why it cannot: no terminal on standard input or output, `TERM` unset or `dumb`,
    /// raw mode refused, or no answer to the cursor position query. On error the terminal is
    /// as it was.
    pub fn start(opts: TuiOptions) -> io::Result<Tui> {
        let (guard, found) = terminal::enter()?;
        Ok(Tui { guard, found, opts })
    }

    /// Shows the loop until it finishes (or its event channel closes), forwarding answers,
    /// skips, typing, extensions and Ctrl+C as [`Control`]s, then gives the terminal back.
    ///
    /// If the terminal fails part-way (it was closed, say) or the view panics, the terminal
    /// is given back, the error goes to standard error and the rest of the run is shown in
    /// plain mode.
    pub async fn run(
        self,
        mut events: mpsc::Receiver<LoopEvent>,
        controls: mpsc::UnboundedSender<Control>,
    ) -> io::Result<()> {
        let Tui { guard, found, opts } = self;
        let mut app = App::new(opts.theme.clone(), opts.answer_command.clone(), opts.bell);
        app.desktop_notifications = opts.desktop;
        let backend = TrackedBackend::new(TermOut::default(), found.size, found.cursor);
        let view = async {
            let height = app.height(found.size.width, found.size.height);
            let mut screen = Screen::new(backend, height)?;
            let mut input = TermInput::default();
            event_loop::run(&mut app, &mut screen, &mut input, &mut events, &controls).await
        };
        // A bug in the view must not leave the loop running with nobody watching: the panic
        // hook has given the terminal back and printed the panic; plain mode takes over.
        let result = match AssertUnwindSafe(view).catch_unwind().await {
            Ok(result) => result,
            Err(_) => Err(io::Error::other("it crashed")),
        };
        drop(guard);
        if let Err(e) = result {
            eprintln!("ralph: the terminal view failed ({e}); going on in plain mode");
            let opts = plain::PlainOptions {
                answer_command: opts.answer_command,
                bell: opts.bell,
                desktop: opts.desktop,
            };
            // Plain mode only knows what it is told: show it the open question again first.
            let events = match app.open_question_event() {
                Some(open) => prepend(open, events),
                None => events,
            };
            plain::run_plain(events, controls, opts).await;
        }
        Ok(())
    }
}

/// A channel that yields `first`, then whatever `rest` yields.
fn prepend(first: LoopEvent, mut rest: mpsc::Receiver<LoopEvent>) -> mpsc::Receiver<LoopEvent> {
    let (tx, rx) = mpsc::channel(rest.max_capacity());
    tokio::spawn(async move {
        if tx.send(first).await.is_err() {
            return;
        }
        while let Some(event) = rest.recv().await {
            if tx.send(event).await.is_err() {
                break;
            }
        }
    });
    rx
}
