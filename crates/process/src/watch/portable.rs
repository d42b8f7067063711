//! The portable backend of [`watch`](super): the `notify` crate (FSEvents on macOS, kqueue on
//! the BSDs, inotify on Linux). Its events come on a thread of notify's own; each wanted one
//! is sent on the channel from there. Opens and closes (`Access` events, which notify asks
//! Linux for) are dropped here by kind.

use std::io;
use std::path::{Path, PathBuf};

use super::Targets;

use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;

/// Whether an event is a change (not a read) to a file named one of `names` (any file when
/// `None`), or a lost queue (notify asks for a rescan: any file may have changed).
fn wanted(event: &Event, names: Option<&[&str]>) -> bool {
    if event.need_rescan() {
        return true;
    }
    if !matches!(
        event.kind,
        EventKind::Any | EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_)
    ) {
        return false;
    }
    let Some(names) = names else { return true };
    event
        .paths
        .iter()
        .any(|p| p.file_name().is_some_and(|n| names.iter().any(|w| n == *w)))
}

fn error(e: notify::Error) -> io::Error {
    match e.kind {
        notify::ErrorKind::Io(e) => e,
        notify::ErrorKind::PathNotFound => io::Error::new(io::ErrorKind::NotFound, e.to_string()),
        _ => io::Error::other(e.to_string()),
    }
}

/// A watch on a directory; dropped, it stops.
#[derive(Debug)]
pub struct DirWatch {
    _watcher: RecommendedWatcher,
}

/// Watches `dir` (not its subdirectories) and sends `()` on `tx` for every change to a file
/// named one of `names`; the receiver then looks at the files.
pub fn watch_async(
    dir: &Path,
    names: &'static [&'static str],
    tx: mpsc::UnboundedSender<()>,
) -> io::Result<DirWatch> {
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<Event>| {
        if event.is_ok_and(|e| wanted(&e, Some(names))) {
            let _ = tx.send(());
        }
    })
    .map_err(error)?;
    watcher
        .watch(dir, RecursiveMode::NonRecursive)
        .map_err(error)?;
    Ok(DirWatch { _watcher: watcher })
}

/// [`DirsWatch`](super::DirsWatch)'s watcher: one for every directory, its events (on
/// notify's thread) sent on to the directory each was for.
#[derive(Debug)]
pub(super) struct Dirs {
    watcher: RecommendedWatcher,
}

/// A directory, as the events name it: its canonical path (FSEvents reports `/private/var/...`
/// for `/var/...`).
pub(super) type Key = PathBuf;

impl Dirs {
    pub(super) fn new(targets: Targets<Key>) -> io::Result<Dirs> {
        let watcher = notify::recommended_watcher(move |event: notify::Result<Event>| {
            let Ok(event) = event else { return };
            let targets = super::lock(&targets);
            let rescan = event.need_rescan();
            for (dir, t) in targets.iter() {
                let mine = event
                    .paths
                    .iter()
                    .any(|p| p.parent() == Some(dir.as_path()));
                if rescan || (mine && wanted(&event, t.names)) {
                    let _ = t.tx.send(());
                }
            }
        })
        .map_err(error)?;
        Ok(Dirs { watcher })
    }

    pub(super) fn watch(&mut self, dir: &Path) -> io::Result<Key> {
        let key = std::fs::canonicalize(dir)?;
        self.watcher
            .watch(dir, RecursiveMode::NonRecursive)
            .map_err(error)?;
        Ok(key)
    }

    pub(super) fn unwatch(&mut self, dir: &Path, _key: Key) {
        // Gone already when the directory was removed; nothing more to do then.
        let _ = self.watcher.unwatch(dir);
    }
}

/// Watches `dir` for a process without a runtime (`ralph ask`): a thread sends `()` on `tx`
/// for every change to anything in it, until `tx`'s receiver is gone.
pub fn watch_blocking(dir: &Path, tx: std::sync::mpsc::Sender<()>) -> io::Result<()> {
    let (events_tx, events) = std::sync::mpsc::channel::<()>();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<Event>| {
        if event.is_ok_and(|e| wanted(&e, None)) {
            let _ = events_tx.send(());
        }
    })
    .map_err(error)?;
    watcher
        .watch(dir, RecursiveMode::NonRecursive)
        .map_err(error)?;
    std::thread::Builder::new()
        .name("ralph-watch".into())
        .spawn(move || {
            // Owns the watcher: it stops once `tx`'s receiver is gone.
            let _watcher = watcher;
            while events.recv().is_ok() {
                if tx.send(()).is_err() {
                    break;
                }
            }
        })?;
    Ok(())
}
