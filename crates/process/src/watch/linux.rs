//! The Linux backend of [`watch`](super): inotify, with a mask of changes only.
//!
//! A file created, written, its attributes changed, renamed in or out, removed. Not opens and
//! closes: the loop's own reads and appends in `.ralph/` (the progress and guardrails files,
//! `events.jsonl`, the state's temporary file) make a dozen of those an iteration, and each
//! woke a waiting thread only to be dropped by name. The `notify` crate (the portable backend)
//! always asks the kernel for opens and closes; with them the harness's overhead per iteration
//! (`make bench`) was 0.3 to 0.5 ms higher on a 2-core machine. The loop reads the events in
//! its own runtime, so a burst of them costs one read, not a thread's wake-up each.

use std::ffi::OsStr;
use std::io;
use std::path::Path;

use super::Targets;

use futures_util::StreamExt as _;
use inotify::{EventMask, Inotify, WatchMask};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

/// What the watch asks the kernel for: every change to an entry of the directory, and the
/// directory itself going away.
fn changes() -> WatchMask {
    WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MODIFY
        | WatchMask::ATTRIB
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
}

/// Whether an event is one the watcher wants: a change to one of `names`, or a lost queue
/// (the kernel dropped events: any file may have changed).
fn wanted(mask: EventMask, name: Option<&OsStr>, names: &[&str]) -> bool {
    mask.contains(EventMask::Q_OVERFLOW) || name.is_some_and(|n| names.iter().any(|w| n == *w))
}

/// A watch on a directory, read in the async runtime; dropped, it stops.
#[derive(Debug)]
pub struct DirWatch {
    task: AbortHandle,
}

impl Drop for DirWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Watches `dir` (not its subdirectories) and sends `()` on `tx` for every change to a file
/// named one of `names`; the receiver then looks at the files. Must be called in a Tokio
/// runtime, which reads the events.
pub fn watch_async(
    dir: &Path,
    names: &'static [&'static str],
    tx: mpsc::UnboundedSender<()>,
) -> io::Result<DirWatch> {
    watch_with(dir, tx, move |mask, name| wanted(mask, name, names))
}

fn watch_with(
    dir: &Path,
    tx: mpsc::UnboundedSender<()>,
    wanted: impl Fn(EventMask, Option<&OsStr>) -> bool + Send + 'static,
) -> io::Result<DirWatch> {
    let inotify = Inotify::init()?;
    inotify.watches().add(dir, changes())?;
    let mut events = inotify.into_event_stream(vec![0u8; 4096])?;
    let task = tokio::spawn(async move {
        while let Some(Ok(event)) = events.next().await {
            if wanted(event.mask, event.name.as_deref()) && tx.send(()).is_err() {
                break;
            }
        }
    });
    Ok(DirWatch {
        task: task.abort_handle(),
    })
}

/// [`DirsWatch`](super::DirsWatch)'s inotify instance: one for every directory, its events
/// read by a task that says which directory each was for.
#[derive(Debug)]
pub(super) struct Dirs {
    watches: inotify::Watches,
    task: AbortHandle,
}

/// A directory, as inotify's events name it.
pub(super) type Key = inotify::WatchDescriptor;

impl Drop for Dirs {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Dirs {
    pub(super) fn new(targets: Targets<Key>) -> io::Result<Dirs> {
        let inotify = Inotify::init()?;
        let mut events = inotify.into_event_stream(vec![0u8; 4096])?;
        let watches = events.watches();
        let task = tokio::spawn(async move {
            while let Some(Ok(event)) = events.next().await {
                let targets = super::lock(&targets);
                let overflow = event.mask.contains(EventMask::Q_OVERFLOW);
                let id = event.wd.get_watch_descriptor_id();
                for (wd, t) in targets.iter() {
                    let mine = wd.get_watch_descriptor_id() == id;
                    let wanted = match t.names {
                        None => mine,
                        Some(names) => mine && wanted(event.mask, event.name.as_deref(), names),
                    };
                    if overflow || wanted {
                        let _ = t.tx.send(());
                    }
                }
            }
        });
        Ok(Dirs {
            watches,
            task: task.abort_handle(),
        })
    }

    pub(super) fn watch(&mut self, dir: &Path) -> io::Result<Key> {
        self.watches.add(dir, changes())
    }

    pub(super) fn unwatch(&mut self, _dir: &Path, key: Key) {
        // Gone already when the directory was removed; nothing more to do then.
        let _ = self.watches.remove(key);
    }
}

/// Watches `dir` for a process without a runtime (`ralph ask`): a thread sends `()` on `tx`
/// for every batch of changes to anything in it, until `tx`'s receiver is gone.
pub fn watch_blocking(dir: &Path, tx: std::sync::mpsc::Sender<()>) -> io::Result<()> {
    let mut inotify = Inotify::init()?;
    inotify.watches().add(dir, changes())?;
    std::thread::Builder::new()
        .name("ralph-watch".into())
        .spawn(move || {
            let mut buffer = vec![0u8; 4096];
            while inotify.read_events_blocking(&mut buffer).is_ok() {
                if tx.send(()).is_err() {
                    break;
                }
            }
        })?;
    Ok(())
}
