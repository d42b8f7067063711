//! Watching `.ralph/` for what other processes write there: an answer from `ralph answer`,
//! the agent's question, a `ralph ask` claim, the loop's state; and the registry, for the
//! broker.
//!
//! Two backends behind one API, built as [`sys`](crate::sys) is: `linux` (inotify) on Linux (a mask
//! of changes only, read in the loop's own runtime), and `portable` (the `notify` crate:
//! FSEvents on macOS, kqueue on the BSDs, inotify on Linux with the `portable` feature)
//! elsewhere. Either way a change to a watched file sends `()` on a channel and the receiver
//! looks at the files; reads never do.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::mpsc;

#[cfg(all(target_os = "linux", not(feature = "portable")))]
mod linux;
#[cfg(all(target_os = "linux", not(feature = "portable")))]
use linux as backend;
#[cfg(any(not(target_os = "linux"), feature = "portable"))]
mod portable;
#[cfg(any(not(target_os = "linux"), feature = "portable"))]
use portable as backend;

pub use backend::{DirWatch, watch_async, watch_blocking};

/// Many directories watched through one backend watcher (one inotify instance, one `notify`
/// watcher), each for the files it names (or for any change), each sending on a channel of its
/// own; directories come and go while it runs.
///
/// One instance however many directories: the kernel allows a user 128 inotify instances by
/// default (`fs.inotify.max_user_instances`) and far more watches, and a broker following fifty
/// loops beside the fifty loops' own watches would run out of instances with one each. Dropped,
/// it stops. Must be made in a Tokio runtime (the Linux backend reads the events there).
#[derive(Debug)]
pub struct DirsWatch {
    watcher: backend::Dirs,
    /// Keyed as the backend's events name a directory.
    targets: Targets<backend::Key>,
    /// The directories as given, and their keys in `targets`.
    by_dir: HashMap<PathBuf, backend::Key>,
}

/// What one watched directory wants: changes to the files it names (to any entry when
/// `None`), said on its channel.
#[derive(Debug)]
struct Target {
    names: Option<&'static [&'static str]>,
    tx: mpsc::UnboundedSender<()>,
}

/// The watched directories, shared with the backend's reader of events.
type Targets<K> = Arc<Mutex<HashMap<K, Target>>>;

fn lock<K>(targets: &Targets<K>) -> MutexGuard<'_, HashMap<K, Target>> {
    targets.lock().unwrap_or_else(|p| p.into_inner())
}

impl DirsWatch {
    /// An instance watching nothing yet.
    pub fn new() -> io::Result<DirsWatch> {
        let targets = Targets::default();
        Ok(DirsWatch {
            watcher: backend::Dirs::new(Arc::clone(&targets))?,
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
        let key = self.watcher.watch(dir)?;
        lock(&self.targets).insert(key.clone(), Target { names, tx });
        self.by_dir.insert(dir.to_path_buf(), key);
        Ok(())
    }

    /// Stops watching `dir`.
    pub fn remove(&mut self, dir: &Path) {
        if let Some(key) = self.by_dir.remove(dir) {
            lock(&self.targets).remove(&key);
            self.watcher.unwatch(dir, key);
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::sync::mpsc;

    use super::*;

    const NAMES: &[&str] = &["answer.md", "question.md"];

    /// Whether a wake-up comes within `ms`.
    async fn woken(rx: &mut mpsc::UnboundedReceiver<()>, ms: u64) -> bool {
        let got = tokio::time::timeout(Duration::from_millis(ms), rx.recv()).await;
        // Drain what else the same change sent, including what a backend delivers a little
        // later (notify's thread, under load).
        tokio::time::sleep(Duration::from_millis(50)).await;
        while rx.try_recv().is_ok() {}
        matches!(got, Ok(Some(())))
    }

    #[tokio::test]
    async fn wakes_for_changes_to_the_named_files_and_not_for_reads_or_other_files() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let _watch = watch_async(dir.path(), NAMES, tx).unwrap();
        let answer = dir.path().join("answer.md");

        // Written in place, and replaced by a rename (as every atomic write does).
        std::fs::write(&answer, "Redis").unwrap();
        assert!(woken(&mut rx, 2000).await, "a new answer.md");
        let tmp = dir.path().join(".tmp-x");
        std::fs::write(&tmp, "Memcached").unwrap();
        std::fs::rename(&tmp, dir.path().join("question.md")).unwrap();
        assert!(woken(&mut rx, 2000).await, "question.md renamed into place");
        std::fs::remove_file(&answer).unwrap();
        assert!(woken(&mut rx, 2000).await, "answer.md removed");

        // Reads, and changes to other files (the loop's own appends), send nothing.
        std::fs::write(&answer, "again").unwrap();
        assert!(woken(&mut rx, 2000).await);
        let _ = std::fs::read(&answer).unwrap();
        let _ = std::fs::read(dir.path().join("question.md")).unwrap();
        std::fs::write(dir.path().join("events.jsonl"), "{}\n").unwrap();
        assert!(
            !woken(&mut rx, 200).await,
            "woken by a read or another file"
        );
    }

    #[tokio::test]
    async fn one_instance_watches_many_directories_each_for_its_own_names() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (a_tx, mut a_rx) = mpsc::unbounded_channel();
        let (b_tx, mut b_rx) = mpsc::unbounded_channel();
        let mut dirs = DirsWatch::new().unwrap();
        dirs.add(a.path(), Some(NAMES), a_tx).unwrap();
        dirs.add(b.path(), None, b_tx).unwrap();
        assert!(dirs.contains(a.path()) && dirs.dirs().count() == 2);

        std::fs::write(a.path().join("answer.md"), "Redis").unwrap();
        assert!(woken(&mut a_rx, 2000).await, "a named file in a");
        assert!(!woken(&mut b_rx, 200).await, "b woken by a's change");
        std::fs::write(a.path().join("events.jsonl"), "{}").unwrap();
        assert!(
            !woken(&mut a_rx, 200).await,
            "a woken by a file it does not name"
        );
        std::fs::write(b.path().join("3f9c.json"), "{}").unwrap();
        assert!(woken(&mut b_rx, 2000).await, "any file in b");
        assert!(!woken(&mut a_rx, 200).await, "a woken by b's change");

        dirs.remove(a.path());
        std::fs::write(a.path().join("answer.md"), "Memcached").unwrap();
        assert!(
            !woken(&mut a_rx, 200).await,
            "a still watched after its removal"
        );
        assert!(!dirs.contains(a.path()));
    }

    #[tokio::test]
    async fn dropped_it_stops_sending() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let watch = watch_async(dir.path(), NAMES, tx).unwrap();
        drop(watch);
        // The task is gone, and with it the sender.
        let closed = tokio::time::timeout(Duration::from_secs(2), rx.recv()).await;
        assert_eq!(closed, Ok(None));
    }

    #[test]
    fn a_blocking_watch_wakes_for_anything_in_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        watch_blocking(dir.path(), tx).unwrap();
        std::fs::write(dir.path().join("state.json"), "{}").unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(2)), Ok(()));
    }
}
