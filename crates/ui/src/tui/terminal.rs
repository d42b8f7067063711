//! Taking over the terminal and giving it back, on every way out.
//!
//! [`enter`] checks that there is a terminal to take over, turns on raw mode, asks where the
//! cursor is (the one cursor query ralph makes while nothing else reads stdin) and turns on
//! bracketed paste. The returned [`Guard`] restores the terminal when dropped, whether the loop
//! view returned normally, failed with an error, or is unwinding from a panic; a panic hook
//! restores it even earlier, before the panic message is printed, so the message is readable.
//!
//! Restoring never panics and ignores errors (the terminal may be gone): it turns off raw mode
//! and bracketed paste, shows the cursor and leaves it below the viewport (or where the
//! viewport was, once the view has cleared it), so the shell prompt comes back in a sane place.
//!
//! Also here: [`TermOut`], the buffered standard output the view writes through, and
//! [`TermInput`], crossterm's event stream with the one thing ralph adds: asking the cursor
//! position after a resize, with the stream paused so the two do not race.

use std::io::{self, IsTerminal, Write};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use ratatui::crossterm::cursor::{MoveTo, Show};
use ratatui::crossterm::event::{
    self, DisableBracketedPaste, EnableBracketedPaste, Event, EventStream,
};
use ratatui::crossterm::style::{Attribute, SetAttribute};
use ratatui::crossterm::terminal::{disable_raw_mode, enable_raw_mode};
use ratatui::crossterm::{cursor, execute, terminal};
use ratatui::layout::{Position, Size};

/// Whether ralph has the terminal in raw mode right now (so restoring has work to do).
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// The viewport's top row (high 16 bits) and height (low 16 bits), for restoring from a panic
/// hook, which cannot reach the view's state; [`UNKNOWN`] before the cursor was found.
static VIEWPORT: AtomicU32 = AtomicU32::new(UNKNOWN);
const UNKNOWN: u32 = u32::MAX;

/// Records where the viewport is, for [`restore`].
pub(crate) fn set_viewport(top: u16, height: u16) {
    VIEWPORT.store(
        (u32::from(top) << 16) | u32::from(height),
        Ordering::Relaxed,
    );
}

/// The terminal as found at start-up.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Found {
    /// Columns and rows.
    pub size: Size,
    /// Where the cursor was.
    pub cursor: Position,
}

/// Restores the terminal when dropped.
#[derive(Debug)]
pub(crate) struct Guard(());

impl Drop for Guard {
    fn drop(&mut self) {
        restore();
    }
}

/// Takes over the terminal: raw mode, the cursor's position, bracketed paste, the panic hook.
///
/// Fails, with the terminal left as it was, when there is no usable terminal: standard input
/// or output is not one, `TERM` is unset or `dumb`, raw mode cannot be set, or the terminal
/// does not answer the cursor position query.
pub(crate) fn enter() -> io::Result<(Guard, Found)> {
    if !io::stdout().is_terminal() {
        return Err(io::Error::other("standard output is not a terminal"));
    }
    if !io::stdin().is_terminal() {
        return Err(io::Error::other("standard input is not a terminal"));
    }
    match std::env::var("TERM") {
        Ok(t) if !t.is_empty() && t != "dumb" => {}
        _ => return Err(io::Error::other("TERM is unset or dumb")),
    }
    let (width, height) = terminal::size()?;
    if width == 0 || height == 0 {
        return Err(io::Error::other("the terminal reports no size"));
    }
    install_panic_hook();
    VIEWPORT.store(UNKNOWN, Ordering::Relaxed);
    enable_raw_mode()?;
    ACTIVE.store(true, Ordering::SeqCst);
    let guard = Guard(());
    // Nothing reads stdin yet, so the query cannot race an event reader.
    let (x, y) = cursor::position()?;
    set_viewport(y, 0);
    execute!(io::stdout(), EnableBracketedPaste)?;
    let found = Found {
        size: Size::new(width, height),
        cursor: Position::new(x, y),
    };
    Ok((guard, found))
}

/// Gives the terminal back; does nothing when it was not taken or was already given back.
/// Never panics.
pub(crate) fn restore() {
    if !ACTIVE.swap(false, Ordering::SeqCst) {
        return;
    }
    let packed = VIEWPORT.load(Ordering::Relaxed);
    let (top, height) = ((packed >> 16) as u16, (packed & 0xffff) as u16);
    let mut out = io::stdout();
    let _ = execute!(out, SetAttribute(Attribute::Reset), DisableBracketedPaste);
    if packed == UNKNOWN {
        // Nothing was drawn: the cursor is still where the shell left it.
    } else if height > 0 {
        // Keep what the viewport shows (it may explain the failure) and continue below it.
        let _ = execute!(out, MoveTo(0, top.saturating_add(height - 1)));
        let _ = out.write_all(b"\r\n");
    } else {
        let _ = execute!(out, MoveTo(0, top));
    }
    let _ = execute!(out, Show);
    let _ = out.flush();
    let _ = disable_raw_mode();
}

/// Chains a hook that restores the terminal before the previous hook prints the panic.
fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}

/// Standard output, buffered until [`flush`](Write::flush): the view flushes once per frame.
///
/// Dropping it discards what was not flushed, on purpose: during a panic the buffer holds
/// half a frame that would land after the restored terminal and the panic message.
#[derive(Debug, Default)]
pub(crate) struct TermOut {
    buf: Vec<u8>,
}

impl Write for TermOut {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        // A flood of output is written in large pieces rather than held.
        if self.buf.len() >= 1 << 20 {
            self.flush()?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let mut out = io::stdout().lock();
        let result = out.write_all(&self.buf).and_then(|()| out.flush());
        self.buf.clear();
        result
    }
}

/// Keys, pastes and resizes, and the real cursor position when a resize makes the tracked one
/// doubtful.
pub(crate) trait Input {
    /// The next terminal event; `None` when input has ended.
    fn next(&mut self) -> impl Future<Output = Option<io::Result<Event>>>;

    /// Where the cursor really is, if that can be found out.
    fn cursor_position(&mut self) -> Option<Position>;

    /// The terminal's real size, if that can be found out.
    fn size(&mut self) -> Option<Size>;
}

/// Crossterm's event stream.
#[derive(Debug, Default)]
pub(crate) struct TermInput {
    /// `None` while paused for a cursor query.
    stream: Option<EventStream>,
}

impl Input for TermInput {
    async fn next(&mut self) -> Option<io::Result<Event>> {
        self.stream
            .get_or_insert_with(EventStream::new)
            .next()
            .await
    }

    fn cursor_position(&mut self) -> Option<Position> {
        // Dropping the stream stops its reader thread, which would otherwise hold crossterm's
        // input lock and make the query time out. Keys typed meanwhile stay queued inside
        // crossterm and come out of the next stream.
        self.stream = None;
        // The drop wakes the reader thread; if it was between two reads, the wake stays
        // pending and cuts the query's wait short. A short poll takes it, leaving keys queued
        // (not a zero one: crossterm's `/dev/tty` source, see Cargo.toml, does not look at its
        // descriptors at all for a zero timeout).
        // Regression: the query failed at once after a resize, and the view redrew at its old
        // row, leaving the re-flowed remains of the old viewport on screen.
        let _ = event::poll(Duration::from_millis(1));
        let pos = cursor::position().ok();
        pos.map(|(x, y)| Position::new(x, y))
    }

    fn size(&mut self) -> Option<Size> {
        terminal::size().ok().map(|(w, h)| Size::new(w, h))
    }
}
