//! The portable backend of [`watch`](super): the `notify` crate (FSEvents on macOS, kqueue on
//! the BSDs, inotify on Linux). Its events come on a thread of notify's own; each wanted one
//! is sent on the channel from there. Opens and closes (`Access` events, which notify asks
//! Linux for) are dropped here by kind.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

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

/// Many directories watched through one watcher, each for the files it names (or for any
/// change), each sending on a channel of its own; directories come and go while it runs.
/// Dropped, it stops.
#[derive(Debug)]
pub struct DirsWatch {
    watcher: RecommendedWatcher,
    /// Keyed by the directory as the events name it (its canonical path: FSEvents reports
    /// `/private/var/...` for `/var/...`).
    targets: Arc<Mutex<HashMap<PathBuf, Target>>>,
    /// The directories as given, and their keys in `targets`.
    by_dir: HashMap<PathBuf, PathBuf>,
}

#[derive(Debug)]
struct Target {
    names: Option<&'static [&'static str]>,
    tx: mpsc::UnboundedSender<()>,
}

impl DirsWatch {
    /// A watcher watching nothing yet.
    pub fn new() -> io::Result<DirsWatch> {
        let targets: Arc<Mutex<HashMap<PathBuf, Target>>> = Arc::default();
        let seen = Arc::clone(&targets);
        let watcher = notify::recommended_watcher(move |event: notify::Result<Event>| {
            let Ok(event) = event else { return };
            let targets = seen.lock().unwrap_or_else(|p| p.into_inner());
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
        Ok(DirsWatch {
            watcher,
            targets,
            by_dir: HashMap::new(),
        })
    }

    /// Watches `dir` (not its subdirectories): `()` on `tx` for every change to a file named
    /// one of `names`, or to any entry when `names` is `None`.
    pub fn add(
        &mut self,
        dir: &Path,
        names: Option<&'static [&'static str]>,
        tx: mpsc::UnboundedSender<()>,
    ) -> io::Result<()> {
        let key = std::fs::canonicalize(dir)?;
        self.watcher
            .watch(dir, RecursiveMode::NonRecursive)
            .map_err(error)?;
        let mut targets = self.targets.lock().unwrap_or_else(|p| p.into_inner());
        targets.insert(key.clone(), Target { names, tx });
        self.by_dir.insert(dir.to_path_buf(), key);
        Ok(())
    }

    /// Stops watching `dir`.
    pub fn remove(&mut self, dir: &Path) {
        if let Some(key) = self.by_dir.remove(dir) {
            let mut targets = self.targets.lock().unwrap_or_else(|p| p.into_inner());
            targets.remove(&key);
            // Gone already when the directory was removed; nothing more to do then.
            let _ = self.watcher.unwatch(dir);
        }
    }

    /// Whether `dir` is watched.
    pub fn contains(&self, dir: &Path) -> bool {
        self.by_dir.contains_key(dir)
    }

    /// The directories watched.
    pub fn dirs(&self) -> impl Iterator<Item = &Path> {
        self.by_dir.keys().map(PathBuf::as_path)
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
