//! A tiny terminal emulator for tests: enough of a VT100 to replay what the loop view writes
//! and check where the cursor went, what the screen shows and what scrolled into history.
//!
//! It understands printing with autowrap (wide characters included), CR, LF, BEL, cursor
//! moves (`CUP`, `CUU`..`CUB`), erasing (`ED`, `EL`) and showing and hiding the cursor; styles are parsed and ignored.

use std::cell::RefCell;
use std::fmt;
use std::io::{self, Write};
use std::rc::Rc;

use vte::{Params, Parser, Perform};

use crate::wrap::str_width;

/// The emulated terminal.
pub(crate) struct Vt {
    parser: Parser,
    state: State,
}

struct State {
    width: u16,
    height: u16,
    /// One string per cell; the cell right of a wide character holds "".
    grid: Vec<Vec<String>>,
    x: u16,
    y: u16,
    /// The last column was written: the next printable character wraps first.
    pending_wrap: bool,
    /// Rows that scrolled off the top, oldest first.
    history: Vec<String>,
    cursor_visible: bool,
    bells: usize,
}

impl Vt {
    /// A blank `width` x `height` terminal with its cursor at `cursor`.
    pub(super) fn new(width: u16, height: u16, cursor: (u16, u16)) -> Self {
        Self {
            parser: Parser::new(),
            state: State {
                width,
                height,
                grid: vec![vec![" ".to_owned(); usize::from(width)]; usize::from(height)],
                x: cursor.0,
                y: cursor.1,
                pending_wrap: false,
                history: Vec::new(),
                cursor_visible: true,
                bells: 0,
            },
        }
    }

    /// Feeds bytes written to the terminal.
    pub(super) fn feed(&mut self, bytes: &[u8]) {
        self.parser.advance(&mut self.state, bytes);
    }

    /// The cursor.
    pub(super) fn cursor(&self) -> ratatui::layout::Position {
        ratatui::layout::Position::new(self.state.x, self.state.y)
    }

    /// Row `y` of the screen, padded to the width.
    pub(super) fn row(&self, y: u16) -> String {
        self.state.grid[usize::from(y)].concat()
    }

    /// How many rows scrolled into history.
    pub(super) fn scrolled(&self) -> usize {
        self.state.history.len()
    }

    /// Whether the cursor is shown.
    pub(super) fn cursor_visible(&self) -> bool {
        self.state.cursor_visible
    }

    /// Resizes the screen the way tmux does without re-flowing: rows are cut or padded on
    /// the right; a shorter screen first drops blank rows below the cursor, then pushes rows
    /// from the top into history (the cursor moves up with its row); a taller one adds rows
    /// at the bottom.
    pub(super) fn resize(&mut self, width: u16, height: u16) {
        let s = &mut self.state;
        for row in &mut s.grid {
            row.resize(usize::from(width), " ".to_owned());
        }
        s.width = width;
        while s.grid.len() > usize::from(height) {
            let last = s.grid.len() - 1;
            if usize::from(s.y) < last && s.grid[last].iter().all(|c| c == " ") {
                s.grid.pop();
            } else {
                let top = s.grid.remove(0);
                s.history.push(top.concat());
                s.y = s.y.saturating_sub(1);
            }
        }
        while s.grid.len() < usize::from(height) {
            s.grid.push(vec![" ".to_owned(); usize::from(width)]);
        }
        s.height = height;
        s.x = s.x.min(width - 1);
        s.pending_wrap = false;
    }

    /// How many times the bell rang.
    pub(super) fn bells(&self) -> usize {
        self.state.bells
    }
}

/// The history, then the screen, each row trimmed on the right, with a marker between.
impl fmt::Display for Vt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for row in &self.state.history {
            writeln!(f, "{}", row.trim_end())?;
        }
        writeln!(f, "~~~~ screen ~~~~")?;
        for y in 0..self.state.height {
            writeln!(f, "{}", self.row(y).trim_end())?;
        }
        Ok(())
    }
}

impl State {
    fn line_feed(&mut self) {
        if self.y + 1 >= self.height {
            let top = self.grid.remove(0);
            self.history.push(top.concat());
            self.grid
                .push(vec![" ".to_owned(); usize::from(self.width)]);
        } else {
            self.y += 1;
        }
    }

    fn blank(&mut self, y: u16, from: u16, to: u16) {
        for x in from..to.min(self.width) {
            self.grid[usize::from(y)][usize::from(x)] = " ".to_owned();
        }
    }
}

fn param(params: &Params, i: usize, default: u16) -> u16 {
    params
        .iter()
        .nth(i)
        .and_then(|p| p.first().copied())
        .filter(|&v| v != 0)
        .unwrap_or(default)
}

impl Perform for State {
    fn print(&mut self, c: char) {
        let mut buf = [0u8; 4];
        let w = str_width(c.encode_utf8(&mut buf)) as u16;
        if w == 0 {
            return;
        }
        if self.pending_wrap || self.x + w > self.width {
            self.x = 0;
            self.line_feed();
            self.pending_wrap = false;
        }
        let (x, y) = (usize::from(self.x), usize::from(self.y));
        self.grid[y][x] = c.to_string();
        if w == 2 && x + 1 < usize::from(self.width) {
            self.grid[y][x + 1] = String::new();
        }
        self.x += w;
        if self.x >= self.width {
            self.x = self.width - 1;
            self.pending_wrap = true;
        }
    }

    fn execute(&mut self, byte: u8) {
        match byte {
            b'\n' => {
                self.line_feed();
                self.pending_wrap = false;
            }
            b'\r' => {
                self.x = 0;
                self.pending_wrap = false;
            }
            0x07 => self.bells += 1,
            0x08 => self.x = self.x.saturating_sub(1),
            _ => {}
        }
    }

    fn csi_dispatch(&mut self, params: &Params, intermediates: &[u8], _ignore: bool, action: char) {
        let (w, h) = (self.width, self.height);
        if intermediates == b"?" {
            if param(params, 0, 0) == 25 {
                self.cursor_visible = action == 'h';
            }
            return;
        }
        self.pending_wrap = matches!(action, 'm') && self.pending_wrap;
        match action {
            'H' | 'f' => {
                self.y = (param(params, 0, 1) - 1).min(h - 1);
                self.x = (param(params, 1, 1) - 1).min(w - 1);
            }
            'A' => self.y = self.y.saturating_sub(param(params, 0, 1)),
            'B' => self.y = (self.y + param(params, 0, 1)).min(h - 1),
            'C' => self.x = (self.x + param(params, 0, 1)).min(w - 1),
            'D' => self.x = self.x.saturating_sub(param(params, 0, 1)),
            'G' => self.x = (param(params, 0, 1) - 1).min(w - 1),
            'J' => match params
                .iter()
                .next()
                .and_then(|p| p.first().copied())
                .unwrap_or(0)
            {
                0 => {
                    self.blank(self.y, self.x, w);
                    for y in self.y + 1..h {
                        self.blank(y, 0, w);
                    }
                }
                1 => {
                    for y in 0..self.y {
                        self.blank(y, 0, w);
                    }
                    self.blank(self.y, 0, self.x + 1);
                }
                _ => {
                    for y in 0..h {
                        self.blank(y, 0, w);
                    }
                }
            },
            'K' => match params
                .iter()
                .next()
                .and_then(|p| p.first().copied())
                .unwrap_or(0)
            {
                0 => self.blank(self.y, self.x, w),
                1 => self.blank(self.y, 0, self.x + 1),
                _ => self.blank(self.y, 0, w),
            },
            _ => {}
        }
    }
}

/// A writer whose bytes the test can take: the terminal's end of the wire.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tap(Rc<RefCell<Vec<u8>>>);

impl Tap {
    /// Everything written since the last take.
    pub(super) fn take(&self) -> Vec<u8> {
        std::mem::take(&mut self.0.borrow_mut())
    }
}

impl Write for Tap {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
