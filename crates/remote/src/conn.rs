//! How the broker takes connections: a cap on how many it serves at once, a limit on how long
//! one may stay silent, and HTTP/1 only, the same over plain http and TLS (all counted below
//! the TLS handshake, so a handshake that never ends holds a place only until its timeout).
//!
//! hyper limits the time to send a request's headers once they started; a connection that
//! sends nothing at all, or nothing more between two requests, is closed here after
//! [`IDLE_TIMEOUT`] without a byte either way (an event stream's keep-alive counts, so open
//! pages stay open). The HTTP/2 preface on the plain port is refused: hyper's automatic
//! protocol detection would otherwise serve it.

use std::future::{Ready, ready};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum_server::accept::Accept;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep, sleep};

/// How long a connection may go without a byte either way before it is closed: longer than an
/// event stream's keep-alive (15 s).
pub(crate) const IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// How an HTTP/2 connection with prior knowledge starts.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0";

/// An acceptor that serves at most so many connections at once and closes the others at once.
#[derive(Debug, Clone)]
pub(crate) struct Capped {
    places: Arc<Semaphore>,
}

impl Capped {
    /// At most `max` connections at once.
    pub(crate) fn new(max: usize) -> Capped {
        Capped {
            places: Arc::new(Semaphore::new(max)),
        }
    }
}

impl<I, S> Accept<I, S> for Capped {
    type Stream = Counted<I>;
    type Service = S;
    type Future = Ready<io::Result<(Counted<I>, S)>>;

    fn accept(&self, stream: I, service: S) -> Self::Future {
        ready(match Arc::clone(&self.places).try_acquire_owned() {
            Ok(place) => Ok((
                Counted {
                    inner: stream,
                    _place: place,
                    idle: Box::pin(sleep(IDLE_TIMEOUT)),
                    preface: 0,
                },
                service,
            )),
            // Dropping the stream closes the connection: a client over the cap is told at once.
            Err(_) => Err(io::Error::other("too many connections")),
        })
    }
}

/// A connection holding its place among [`Capped`]'s until it is dropped.
#[derive(Debug)]
pub(crate) struct Counted<I> {
    inner: I,
    _place: OwnedSemaphorePermit,
    /// When the connection has been silent too long.
    idle: Pin<Box<Sleep>>,
    /// How many of the first bytes read matched [`H2_PREFACE`] (past its length: no match).
    preface: usize,
}

impl<I> Counted<I> {
    fn touch(&mut self) {
        self.idle.as_mut().reset(Instant::now() + IDLE_TIMEOUT);
    }

    /// Whether the bytes read so far are the HTTP/2 preface.
    fn is_h2(&mut self, read: &[u8]) -> bool {
        for b in read {
            match H2_PREFACE.get(self.preface) {
                Some(want) if want == b => self.preface += 1,
                _ => {
                    self.preface = usize::MAX;
                    return false;
                }
            }
            if self.preface == H2_PREFACE.len() {
                return true;
            }
        }
        false
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Counted<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Pending if this.idle.as_mut().poll(cx).is_ready() => Poll::Ready(Err(
                io::Error::new(io::ErrorKind::TimedOut, "the client went silent"),
            )),
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(())) => {
                this.touch();
                if this.preface < H2_PREFACE.len() && this.is_h2(&buf.filled()[before..]) {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "HTTP/2 is not served",
                    )));
                }
                Poll::Ready(Ok(()))
            }
            ready => ready,
        }
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Counted<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let wrote = Pin::new(&mut this.inner).poll_write(cx, buf);
        if matches!(wrote, Poll::Ready(Ok(n)) if n > 0) {
            this.touch();
        }
        wrote
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let wrote = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if matches!(wrote, Poll::Ready(Ok(n)) if n > 0) {
            this.touch();
        }
        wrote
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
