//! The inline viewport: the bottom area drawn in place, with output scrolling up above it.
//!
//! ratatui's inline viewport cannot change height, so [`Screen`] recreates the `Terminal`
//! whenever it must: when the height changes (the question panel opens, closes or grows), after
//! writing output above the viewport (which pushes the viewport down), and after a resize. Each
//! time the old viewport is erased and a new one opens at the cursor, which ratatui scrolls up
//! if the rows below are too few. The backend answers ratatui's cursor queries from what it
//! tracked, so none of this talks to the terminal's input side.
//!
//! Output goes above the viewport as text written from the viewport's top row, which the
//! terminal wraps and scrolls into its scrollback like any program's output: it survives exit,
//! re-flows on resize and copies as whole lines in tmux copy mode. A batch of lines is one
//! write, however many lines it holds.
//!
//! Between frames the (hidden) cursor rests at the viewport's top-left corner. When the
//! terminal is resized it moves that row wherever it moves it (re-flowing, pushing rows into
//! history), so asking for the cursor afterwards says exactly where the old viewport begins.

use std::io::{self, Write};

use ratatui::backend::{Backend, ClearType};
use ratatui::layout::{Position, Rect, Size};
use ratatui::text::Line;
use ratatui::{Frame, Terminal, TerminalOptions, Viewport};

use crate::tui::backend::TrackedBackend;
use crate::tui::terminal::set_viewport;

/// The inline viewport and the output above it.
#[derive(Debug)]
pub(crate) struct Screen<W: Write> {
    terminal: Terminal<TrackedBackend<W>>,
    /// The height asked for (the viewport is smaller on a short terminal).
    height: u16,
}

impl<W: Write> Screen<W> {
    /// Opens a viewport of `height` rows at the cursor's row, or below it if the cursor is in
    /// the middle of a line.
    pub(super) fn new(mut backend: TrackedBackend<W>, height: u16) -> io::Result<Self> {
        let cursor = backend.cursor();
        if cursor.x != 0 {
            backend.set_cursor_position((0, cursor.y))?;
            backend.append_lines(1)?;
        }
        Ok(Self {
            terminal: open(backend, height)?,
            height,
        })
    }

    /// Where the viewport is.
    pub(super) fn area(&mut self) -> Rect {
        self.terminal.get_frame().area()
    }

    /// The terminal's size.
    pub(super) fn size(&self) -> Size {
        self.terminal.backend().screen()
    }

    /// Writes `lines` above the viewport (which moves down, or the screen scrolls) and makes
    /// the viewport `height` rows high, keeping its top row where it is if it fits.
    pub(super) fn update(&mut self, lines: &[Line<'_>], height: u16) -> io::Result<()> {
        if lines.is_empty() && height == self.height {
            return Ok(());
        }
        self.clear_viewport()?;
        self.terminal.backend_mut().write_lines(lines)?;
        self.reopen(height)
    }

    /// The terminal is now `size`; `cursor` is where it really is, if known. The cursor was
    /// resting at the viewport's top-left, so that is where the viewport starts again; without
    /// an answer, its old row is the best guess.
    pub(super) fn resize(&mut self, size: Size, cursor: Option<Position>) -> io::Result<()> {
        let old = self.area();
        let cursor = cursor.unwrap_or(Position::new(0, old.y));
        let backend = self.terminal.backend_mut();
        backend.resized(size, cursor);
        // Clear whatever the terminal made of the old viewport (re-flowed or cut rows).
        backend.set_cursor_position((0, backend.cursor().y))?;
        backend.clear_region(ClearType::AfterCursor)?;
        self.reopen(self.height)
    }

    /// Draws a frame, rests the cursor at the viewport's top-left and writes it all out.
    pub(super) fn draw(&mut self, render: impl FnOnce(&mut Frame<'_>)) -> io::Result<()> {
        self.terminal.draw(render)?;
        let top = self.area().y;
        let backend = self.terminal.backend_mut();
        backend.set_cursor_position((0, top))?;
        backend.commit()
    }

    /// Rings the terminal's bell with the next frame.
    pub(super) fn bell(&mut self) -> io::Result<()> {
        self.terminal.backend_mut().write_raw(b"\x07")
    }

    /// Asks the terminal for a desktop notification (OSC 9 or OSC 777; the text is sanitized).
    pub(super) fn notify(&mut self, title: &str, body: &str) -> io::Result<()> {
        let seq = crate::terminal_notification::terminal_notification(title, body);
        self.terminal.backend_mut().write_raw(seq.as_bytes())
    }

    /// Erases the viewport, writes the last `lines` in its place and shows the cursor under
    /// them, where the shell prompt will appear.
    pub(super) fn finish(&mut self, lines: &[Line<'_>]) -> io::Result<()> {
        self.clear_viewport()?;
        let backend = self.terminal.backend_mut();
        backend.write_lines(lines)?;
        set_viewport(backend.cursor().y, 0);
        backend.show_cursor()?;
        backend.commit()
    }

    fn clear_viewport(&mut self) -> io::Result<()> {
        let top = self.area().y;
        let backend = self.terminal.backend_mut();
        backend.set_cursor_position((0, top))?;
        backend.clear_region(ClearType::AfterCursor)
    }

    /// Replaces the terminal by one whose viewport of `height` rows opens at the cursor.
    fn reopen(&mut self, height: u16) -> io::Result<()> {
        let backend = self.terminal.backend_mut().detach();
        self.terminal = open(backend, height)?;
        self.height = height;
        Ok(())
    }
}

fn open<W: Write>(
    backend: TrackedBackend<W>,
    height: u16,
) -> io::Result<Terminal<TrackedBackend<W>>> {
    let mut terminal = Terminal::with_options(
        backend,
        TerminalOptions {
            viewport: Viewport::Inline(height.max(1)),
        },
    )?;
    let area = terminal.get_frame().area();
    set_viewport(area.y, area.height);
    Ok(terminal)
}
