//! A ratatui backend that knows where the cursor is without asking the terminal.
//!
//! ratatui's inline viewport asks its backend for the cursor position whenever a terminal is
//! created, cleared or resized. Crossterm answers by writing a `ESC[6n` query and reading the
//! reply from stdin; while crossterm's `EventStream` is reading stdin too, the two race and the
//! query stalls for two seconds, then fails (crossterm#672, #963). ralph recreates its terminal
//! every time the viewport changes height and every time it writes output above it, so it
//! cannot ask each time.
//!
//! [`TrackedBackend`] is told the real position once, before input is read (and again after a
//! resize, with input paused), and from then on follows every byte it writes: cursor moves,
//! drawn cells, line feeds, and the text it writes into the scrollback. It also queues
//! everything: nothing reaches the terminal until [`TrackedBackend::commit`], so a frame
//! arrives in one piece and ratatui's own mid-frame flushes cost no system calls.

use std::io::{self, Write};

use ratatui::backend::{Backend, ClearType, CrosstermBackend, IntoCrossterm, WindowSize};
use ratatui::buffer::Cell;
use ratatui::crossterm::cursor::{Hide, MoveTo, Show};
use ratatui::crossterm::queue;
use ratatui::crossterm::style::{Attribute, Print, SetAttribute, SetStyle};
use ratatui::crossterm::terminal::{Clear, ClearType as CtClearType};
use ratatui::layout::{Position, Size};
use ratatui::style::Style;
use ratatui::text::Line;

use crate::wrap::str_width;

/// A crossterm backend that tracks the cursor instead of querying it, and writes only when
/// told to.
pub(crate) struct TrackedBackend<W: Write> {
    /// `None` once [`detach`](Self::detach) handed the output on: ratatui has no way to give a
    /// backend back from a `Terminal`, so the old terminal keeps an inert shell.
    inner: Option<CrosstermBackend<W>>,
    size: Size,
    cursor: Position,
    cursor_hidden: bool,
}

impl<W: Write> std::fmt::Debug for TrackedBackend<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrackedBackend")
            .field("attached", &self.inner.is_some())
            .field("size", &self.size)
            .field("cursor", &self.cursor)
            .field("cursor_hidden", &self.cursor_hidden)
            .finish()
    }
}

impl<W: Write> TrackedBackend<W> {
    /// A backend writing to `out`, for a terminal of `size` whose cursor is at `cursor`.
    pub(super) fn new(out: W, size: Size, cursor: Position) -> Self {
        let mut backend = Self {
            inner: Some(CrosstermBackend::new(out)),
            size,
            cursor: Position::ORIGIN,
            cursor_hidden: false,
        };
        backend.cursor = backend.clamp(cursor);
        backend
    }

    /// Where the cursor is, as far as this backend knows.
    pub(super) fn cursor(&self) -> Position {
        self.cursor
    }

    /// The terminal's size, as last told.
    pub(super) fn screen(&self) -> Size {
        self.size
    }

    /// The terminal changed size; `cursor` is where it really is now (asked, not guessed).
    pub(super) fn resized(&mut self, size: Size, cursor: Position) {
        self.size = size;
        self.cursor = self.clamp(cursor);
    }

    /// Moves the output and the tracked state into a new backend, leaving this one inert
    /// (every call succeeds and does nothing), so a new `Terminal` can take over.
    pub(super) fn detach(&mut self) -> Self {
        Self {
            inner: self.inner.take(),
            size: self.size,
            cursor: self.cursor,
            cursor_hidden: self.cursor_hidden,
        }
    }

    /// Writes everything queued to the terminal.
    pub(super) fn commit(&mut self) -> io::Result<()> {
        match &mut self.inner {
            Some(inner) => Write::flush(inner),
            None => Ok(()),
        }
    }

    /// Queues raw bytes that do not move the cursor (the bell).
    pub(super) fn write_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        match &mut self.inner {
            Some(inner) => inner.write_all(bytes),
            None => Ok(()),
        }
    }

    /// Writes `lines` as text from the cursor, which must be at the start of a row, each
    /// followed by a line break: the terminal wraps long lines itself (so they re-flow on
    /// resize and copy as one line) and scrolls what leaves the screen into its scrollback.
    /// The cursor ends at the start of the row after the last line.
    ///
    /// Control characters are dropped and tabs expanded, whatever the lines contain.
    pub(super) fn write_lines(&mut self, lines: &[Line<'_>]) -> io::Result<()> {
        let width = usize::from(self.size.width);
        let Some(inner) = &mut self.inner else {
            return Ok(());
        };
        let out = inner;
        let mut rows = 0usize;
        let mut text = String::new();
        for line in lines {
            let mut col = 0usize;
            let mut line_rows = 1usize;
            for span in &line.spans {
                text.clear();
                clean_into(&span.content, &mut text);
                if text.is_empty() {
                    continue;
                }
                advance(&text, width, &mut col, &mut line_rows);
                let style = line.style.patch(span.style);
                if style == Style::default() {
                    queue!(out, Print(&text))?;
                } else {
                    queue!(
                        out,
                        SetStyle(style.into_crossterm()),
                        Print(&text),
                        SetAttribute(Attribute::Reset)
                    )?;
                }
            }
            out.write_all(b"\r\n")?;
            rows += line_rows;
        }
        let bottom = usize::from(self.size.height.saturating_sub(1));
        let y = (usize::from(self.cursor.y) + rows).min(bottom);
        self.cursor = Position::new(0, y as u16);
        Ok(())
    }

    fn clamp(&self, p: Position) -> Position {
        Position::new(
            p.x.min(self.size.width.saturating_sub(1)),
            p.y.min(self.size.height.saturating_sub(1)),
        )
    }
}

/// Follows the terminal's autowrap over `text`: `col` is the column after the last cell
/// written, `rows` how many rows the line has taken so far.
fn advance(text: &str, width: usize, col: &mut usize, rows: &mut usize) {
    if width == 0 {
        return;
    }
    let mut step = |w: usize| {
        if w == 0 {
            return;
        }
        // A character that does not fit goes to the next row whole, as terminals do with
        // wide characters in the last column.
        if *col + w > width {
            *rows += 1;
            *col = 0;
        }
        *col += w;
    };
    if text.is_ascii() {
        // Fast path for the common case, a flood of plain ASCII: one column per byte.
        let mut left = text.len();
        while left > 0 {
            if *col >= width {
                *rows += 1;
                *col = 0;
            }
            let take = left.min(width - *col);
            *col += take;
            left -= take;
        }
        return;
    }
    let line = Line::raw(text);
    for g in line.styled_graphemes(Style::new()) {
        step(str_width(g.symbol));
    }
}

/// Appends `text` without control characters (tabs become four spaces): the last guard
/// before anything reaches the terminal.
fn clean_into(text: &str, out: &mut String) {
    if text.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        out.push_str(text);
        return;
    }
    for c in text.chars() {
        match c {
            '\t' => out.push_str("    "),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
}

impl<W: Write> Backend for TrackedBackend<W> {
    type Error = io::Error;

    fn draw<'a, I>(&mut self, content: I) -> io::Result<()>
    where
        I: Iterator<Item = (u16, u16, &'a Cell)>,
    {
        let Some(inner) = &mut self.inner else {
            return Ok(());
        };
        let mut last = None;
        inner.draw(content.inspect(|(x, y, cell)| {
            last = Some((*x, *y, str_width(cell.symbol())));
        }))?;
        if let Some((x, y, w)) = last {
            // After the last cell the cursor sits right of it, or stays in the last column
            // (with a wrap pending that the next move cancels).
            let w = w.max(1) as u16;
            self.cursor = self.clamp(Position::new(x.saturating_add(w), y));
        }
        Ok(())
    }

    fn append_lines(&mut self, n: u16) -> io::Result<()> {
        let Some(inner) = &mut self.inner else {
            return Ok(());
        };
        // Raw mode: a line feed moves down (scrolling at the bottom) and keeps the column.
        for _ in 0..n {
            inner.write_all(b"\n")?;
        }
        let bottom = self.size.height.saturating_sub(1);
        self.cursor.y = self.cursor.y.saturating_add(n).min(bottom);
        Ok(())
    }

    fn hide_cursor(&mut self) -> io::Result<()> {
        let Some(inner) = &mut self.inner else {
            return Ok(());
        };
        if !self.cursor_hidden {
            queue!(inner, Hide)?;
            self.cursor_hidden = true;
        }
        Ok(())
    }

    fn show_cursor(&mut self) -> io::Result<()> {
        let Some(inner) = &mut self.inner else {
            return Ok(());
        };
        if self.cursor_hidden {
            queue!(inner, Show)?;
            self.cursor_hidden = false;
        }
        Ok(())
    }

    fn get_cursor_position(&mut self) -> io::Result<Position> {
        Ok(self.cursor)
    }

    fn set_cursor_position<P: Into<Position>>(&mut self, position: P) -> io::Result<()> {
        let position = self.clamp(position.into());
        if let Some(inner) = &mut self.inner {
            queue!(inner, MoveTo(position.x, position.y))?;
            self.cursor = position;
        }
        Ok(())
    }

    fn clear(&mut self) -> io::Result<()> {
        self.clear_region(ClearType::All)
    }

    fn clear_region(&mut self, clear_type: ClearType) -> io::Result<()> {
        let Some(inner) = &mut self.inner else {
            return Ok(());
        };
        let kind = match clear_type {
            ClearType::All => CtClearType::All,
            ClearType::AfterCursor => CtClearType::FromCursorDown,
            ClearType::BeforeCursor => CtClearType::FromCursorUp,
            ClearType::CurrentLine => CtClearType::CurrentLine,
            ClearType::UntilNewLine => CtClearType::UntilNewLine,
        };
        queue!(inner, Clear(kind))
    }

    fn size(&self) -> io::Result<Size> {
        Ok(self.size)
    }

    fn window_size(&mut self) -> io::Result<WindowSize> {
        Ok(WindowSize {
            columns_rows: self.size,
            pixels: Size::default(),
        })
    }

    /// Deferred: ratatui flushes at the end of `draw`, before the owner has parked the
    /// cursor; [`TrackedBackend::commit`] writes the whole frame at once.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use ratatui::layout::Rect;
    use ratatui::style::{Color, Stylize};
    use ratatui::text::Span;
    use ratatui::{Terminal, TerminalOptions, Viewport};

    use super::*;
    use crate::tui::vt::{Tap, Vt};

    fn backend(w: u16, h: u16, cursor: (u16, u16)) -> (TrackedBackend<Tap>, Tap) {
        let tap = Tap::default();
        let b = TrackedBackend::new(tap.clone(), Size::new(w, h), cursor.into());
        (b, tap)
    }

    #[test]
    fn rows_follow_autowrap() {
        let rows = |text: &str, width| {
            let (mut col, mut rows) = (0, 1);
            advance(text, width, &mut col, &mut rows);
            rows
        };
        assert_eq!(rows("", 10), 1);
        assert_eq!(rows("0123456789", 10), 1, "an exact fit does not wrap");
        assert_eq!(rows("0123456789a", 10), 2);
        assert_eq!(rows(&"x".repeat(31), 10), 4);
        // A wide character that would straddle the edge moves to the next row whole.
        assert_eq!(rows("012345678世", 10), 2);
        assert_eq!(rows("01234567世", 10), 1);
        assert_eq!(rows("éééééééééé", 10), 1);
        assert_eq!(rows("ééééééééééé", 10), 2);
    }

    #[test]
    fn control_characters_never_reach_the_terminal() {
        let (mut b, tap) = backend(40, 5, (0, 0));
        let line = Line::from(vec![
            Span::raw("a\x1b[2Jb\tc\x07d\u{9b}e\r"),
            Span::raw(" ok").red(),
        ]);
        b.write_lines(&[line]).unwrap();
        let text = String::from_utf8(tap.take()).unwrap();
        assert!(text.starts_with("a[2Jb    cde"), "{text:?}");
        assert!(
            !text.contains('\x07') && !text.contains('\u{9b}'),
            "{text:?}"
        );
        // The only escape sequences are the ones ralph wrote: the span's colour and its reset.
        assert_eq!(text.matches('\x1b').count(), 2, "{text:?}");
        assert!(text.ends_with("\r\n"));
    }

    #[test]
    fn tracked_cursor_matches_a_terminal_through_output_and_viewports() {
        // Start mid-screen, write enough to scroll, open inline viewports of changing height
        // and draw into them; after every step the tracked cursor must be where a terminal
        // put it.
        let (w, h) = (20u16, 8u16);
        let mut vt = Vt::new(w, h, (0, 3));
        let (mut b, tap) = backend(w, h, (0, 3));
        let long = "x".repeat(45);
        let mut top = 3;
        for step in 0..6u16 {
            b.set_cursor_position((0, top)).unwrap();
            b.clear_region(ClearType::AfterCursor).unwrap();
            let lines: Vec<Line> = (0..=step)
                .map(|i| {
                    if i % 2 == 0 {
                        Line::raw(format!("line {step}.{i}"))
                    } else {
                        Line::raw(long.clone()).fg(Color::Green)
                    }
                })
                .collect();
            b.write_lines(&lines).unwrap();
            vt.feed(&tap.take());
            assert_eq!(b.cursor(), vt.cursor(), "after writing, step {step}");

            let height = 2 + step % 3;
            let mut term = Terminal::with_options(
                b.detach(),
                TerminalOptions {
                    viewport: Viewport::Inline(height),
                },
            )
            .unwrap();
            term.draw(|f| {
                let area = f.area();
                f.buffer_mut()
                    .set_string(area.x, area.y, "status", Style::new());
                f.buffer_mut()
                    .set_string(area.x + 14, area.bottom() - 1, "世界", Style::new());
            })
            .unwrap();
            let area: Rect = term.get_frame().area();
            top = area.y;
            assert_eq!(area.height, height);
            assert!(area.bottom() <= h, "{area:?}");
            b = term.backend_mut().detach();
            vt.feed(&tap.take());
            assert_eq!(b.cursor(), vt.cursor(), "after drawing, step {step}");
            assert_eq!(vt.row(area.y), format!("{:<20}", "status"));
        }
        // Everything written went somewhere: the last lines sit right above the viewport.
        assert!(vt.row(top - 1).starts_with("xxxxx "), "{vt}");
        assert!(vt.scrolled() > 0, "{vt}");
    }

    #[test]
    fn an_inert_backend_writes_nothing() {
        let (mut b, tap) = backend(10, 5, (0, 0));
        let _moved = b.detach();
        b.set_cursor_position((3, 3)).unwrap();
        b.show_cursor().unwrap();
        b.append_lines(3).unwrap();
        b.write_lines(&[Line::raw("lost")]).unwrap();
        b.commit().unwrap();
        assert_eq!(b.cursor(), Position::ORIGIN);
        assert!(tap.take().is_empty());
    }
}
