//! The fleet view in a terminal, and its plain-line mode.
//!
//! The view runs in an inline viewport (the shell's scrollback stays above it), as the loop
//! view does. Three things wake it: a key (read by a thread of its own), a change to a loop's
//! files (the host's watches send `()` on `changes`: a new question shows as soon as the loop
//! has written it), and a slow tick for what changes without a file event (elapsed time, a new
//! loop's directory). Between them it sleeps.
//!
//! `d` runs the user's pager outside the view: the input thread stops reading, the terminal is
//! given back, the host runs the pager, and the view takes the terminal again. Every way out
//! (`q`, an error, a panic, [`leave_fleet_now`] from another thread) gives the terminal back.
//!
//! The terminal the view has taken lives behind one lock, held while it is taken, drawn on
//! and given back: [`leave_fleet_now`] (a second Ctrl-C, say) takes the lock, so it waits for a
//! draw or a giving back in progress to finish, gives the terminal back if the view still
//! has it, and ends the process holding the lock, so the view can neither take the terminal
//! again nor draw after it.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crossterm::event::{self, DisableBracketedPaste, EnableBracketedPaste, Event};
use crossterm::execute;
use ralph_fleet::rows::LoopRow;
use ratatui::{DefaultTerminal, TerminalOptions, Viewport};

use super::{FleetAction, FleetView, row_line};
use crate::theme::Theme;

/// How often the rows are read again with no file event (elapsed time, new loops).
pub const TICK: Duration = Duration::from_secs(2);

/// What the view needs from its owner: the rows, and the actions carried out.
pub trait FleetHost {
    /// The rows now, in order (`ralph_fleet::rows::Collector::collect`, plus the owner's own).
    fn rows(&mut self, now: Instant) -> Vec<LoopRow>;
    /// Carries out `action` (never `None`, `Redraw` or `Quit`), telling the person through
    /// `view` ([`FleetView::set_note`], [`FleetView::open_question`]). A `Diff` runs with the
    /// terminal given back.
    fn act(&mut self, action: FleetAction, view: &mut FleetView, now: Instant);
    /// Whether the view should close by itself (every loop of a fleet ended).
    fn finished(&mut self) -> bool;
}

enum Wake {
    Input(Event),
    Changed,
}

/// Reads keys on a thread of its own while `reading` is set.
fn read_input(tx: &Sender<Wake>, reading: &AtomicBool, alive: &AtomicBool) {
    while alive.load(Ordering::Relaxed) {
        if !reading.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        match event::poll(Duration::from_millis(100)) {
            Ok(true) => match event::read() {
                Ok(e) => {
                    if tx.send(Wake::Input(e)).is_err() {
                        return;
                    }
                }
                Err(_) => return,
            },
            Ok(false) => {}
            Err(_) => return,
        }
    }
}

/// The terminal while the view has it taken; `None` while it is given back.
static SCREEN: Mutex<Option<DefaultTerminal>> = Mutex::new(None);

/// The lock on [`SCREEN`], also after a panic while it was held (a panic in a draw): the
/// terminal must still be given back.
fn screen() -> MutexGuard<'static, Option<DefaultTerminal>> {
    SCREEN
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Gives `terminal` back: the viewport goes, so the shell's prompt comes back where the view
/// began, at the start of its line. Ignores errors (the terminal may be gone).
fn give_back(mut terminal: DefaultTerminal) {
    let top = terminal.get_frame().area().y;
    let _ = terminal.clear();
    let _ = terminal.set_cursor_position((0, top));
    let _ = terminal.show_cursor();
    let _ = execute!(io::stdout(), DisableBracketedPaste);
    let _ = crossterm::terminal::disable_raw_mode();
}

/// Gives the terminal back if the fleet view has it, then ends the process with `code`.
///
/// Safe to call from any thread at any moment: it waits for a draw, a taking or a giving
/// back in progress (each takes a moment) and never returns, so nothing draws after it.
pub fn leave_fleet_now(code: i32) -> ! {
    let mut screen = screen();
    if let Some(terminal) = screen.take() {
        give_back(terminal);
    }
    let _ = io::stdout().flush();
    // The lock stays held until the process is gone.
    std::process::exit(code)
}

/// The terminal, taken; given back when dropped.
struct Taken(());

impl Taken {
    fn take() -> io::Result<Taken> {
        let mut screen = screen();
        let (_, rows) = crossterm::terminal::size()?;
        let height = rows.saturating_sub(1).clamp(6, 40);
        let terminal = ratatui::try_init_with_options(TerminalOptions {
            viewport: Viewport::Inline(height),
        })
        .inspect_err(|_| {
            // Raw mode is on when the cursor query fails.
            let _ = crossterm::terminal::disable_raw_mode();
        })?;
        // Stored before anything else can fail, so the terminal is given back whatever fails.
        *screen = Some(terminal);
        execute!(io::stdout(), EnableBracketedPaste)?;
        Ok(Taken(()))
    }

    /// Draws a frame with `render`.
    fn draw(&mut self, render: impl FnOnce(&mut ratatui::Frame<'_>)) -> io::Result<()> {
        if let Some(terminal) = screen().as_mut() {
            terminal.draw(render)?;
        }
        Ok(())
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        if let Some(terminal) = screen().take() {
            give_back(terminal);
        }
    }
}

/// Runs the view in the terminal until `q` or the host says it is finished.
pub fn run_fleet_tui(host: &mut dyn FleetHost, changes: Receiver<()>) -> io::Result<()> {
    let (tx, rx) = mpsc::channel();
    let reading = Arc::new(AtomicBool::new(true));
    let alive = Arc::new(AtomicBool::new(true));
    {
        let (tx, reading, alive) = (tx.clone(), reading.clone(), alive.clone());
        std::thread::Builder::new()
            .name("ralph-fleet-keys".into())
            .spawn(move || read_input(&tx, &reading, &alive))?;
    }
    std::thread::Builder::new()
        .name("ralph-fleet-changes".into())
        .spawn(move || {
            while changes.recv().is_ok() {
                if tx.send(Wake::Changed).is_err() {
                    return;
                }
            }
        })?;
    let result = drive(host, &rx, &reading);
    alive.store(false, Ordering::Relaxed);
    result
}

fn drive(host: &mut dyn FleetHost, rx: &Receiver<Wake>, reading: &AtomicBool) -> io::Result<()> {
    let mut view = FleetView::new(Theme::from_env());
    let mut term = Taken::take()?;
    let mut next_tick = Instant::now();
    loop {
        let now = Instant::now();
        if now >= next_tick {
            view.set_rows(host.rows(now), now);
            next_tick = now + TICK;
            if host.finished() {
                return Ok(());
            }
        }
        term.draw(|f| view.render(f.area(), f.buffer_mut(), now))?;
        let until = view
            .next_redraw(now)
            .map_or(next_tick, |r| r.min(next_tick));
        let wake = match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(w) => w,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return Ok(()),
        };
        let now = Instant::now();
        let action = match wake {
            // A loop's files changed: read the rows now, not at the next tick.
            Wake::Changed => {
                // One read for a burst of changes (an iteration writes several files).
                while let Ok(Wake::Changed) = rx.try_recv() {}
                next_tick = now;
                continue;
            }
            Wake::Input(Event::Key(k)) => view.handle_key(k, now),
            Wake::Input(Event::Paste(p)) => view.handle_paste(&p),
            Wake::Input(Event::Resize(..)) => FleetAction::Redraw,
            Wake::Input(_) => FleetAction::None,
        };
        match action {
            FleetAction::None | FleetAction::Redraw => {}
            FleetAction::Quit => return Ok(()),
            FleetAction::Diff(_) => {
                // The pager gets the terminal and the keys.
                reading.store(false, Ordering::Release);
                std::thread::sleep(Duration::from_millis(150));
                drop(term);
                host.act(action, &mut view, now);
                term = Taken::take()?;
                reading.store(true, Ordering::Release);
                next_tick = Instant::now();
            }
            action => {
                host.act(action, &mut view, now);
                next_tick = Instant::now();
            }
        }
    }
}

/// Plain mode: a line for each row whenever what it says changes (its state, iteration,
/// criteria, question or reason; not its clock), until the host says it is finished.
pub fn run_fleet_plain(
    host: &mut dyn FleetHost,
    changes: &Receiver<()>,
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut seen: std::collections::HashMap<std::path::PathBuf, String> = Default::default();
    loop {
        let now = Instant::now();
        let rows = host.rows(now);
        for row in &rows {
            let key = change_key(row);
            if seen.get(&row.root) != Some(&key) {
                writeln!(out, "{}", row_line(row))?;
                seen.insert(row.root.clone(), key);
            }
        }
        out.flush()?;
        if host.finished() {
            return Ok(());
        }
        match changes.recv_timeout(TICK) {
            Ok(()) => while changes.try_recv().is_ok() {},
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => std::thread::sleep(TICK),
        }
    }
}

/// What a plain line is printed again for.
fn change_key(row: &LoopRow) -> String {
    format!(
        "{:?}|{}|{}|{:?}|{:?}|{:?}|{:?}",
        row.state,
        row.iteration,
        row.max_iterations,
        row.criteria_done,
        row.question_id,
        row.reason,
        row.rate_limited_until
    )
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use ralph_fleet::rows::RowState;

    use super::*;

    /// Rows that change by a script: each call to `rows` gives the next set.
    struct Scripted {
        sets: Vec<Vec<LoopRow>>,
        at: usize,
    }

    impl FleetHost for Scripted {
        fn rows(&mut self, _now: Instant) -> Vec<LoopRow> {
            let rows = self.sets[self.at.min(self.sets.len() - 1)].clone();
            self.at += 1;
            rows
        }
        fn act(&mut self, _: FleetAction, _: &mut FleetView, _: Instant) {}
        fn finished(&mut self) -> bool {
            self.at >= self.sets.len()
        }
    }

    fn row(state: RowState, elapsed: u64) -> LoopRow {
        let mut r = LoopRow::bare(PathBuf::from("/w/a"), "Task A", state);
        r.elapsed_seconds = Some(elapsed);
        r.iteration = 1;
        r.max_iterations = 3;
        r
    }

    #[test]
    fn plain_mode_prints_a_line_per_change_of_a_row_and_none_for_its_clock() {
        let mut host = Scripted {
            sets: vec![
                vec![row(RowState::Running, 1)],
                vec![row(RowState::Running, 3)],
                vec![row(RowState::NeedsYou, 5)],
                vec![row(RowState::NeedsYou, 7)],
            ],
            at: 0,
        };
        let (tx, changes) = mpsc::channel();
        for _ in 0..4 {
            tx.send(()).unwrap();
        }
        let mut out = Vec::new();
        run_fleet_plain(&mut host, &changes, &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert_eq!(
            out,
            "/w/a: running · Task A · iteration 1/3 · 1s\n/w/a: needs you · Task A · iteration 1/3 · 5s\n"
        );
    }
}
