//! The broker's event streams: one watch of the loops shared by every stream, and caps on how
//! many streams run.
//!
//! Every open page (a question's, the dashboard) holds a stream that tells it when something
//! changed. They all listen to one [`Streams`]: one inotify instance for the registry, every
//! registered loop and the loops of open answer links (a lone `ralph ask` is not registered),
//! whatever the number of streams. A stream needs a place among [`MAX_STREAMS`] in all and
//! [`MAX_STREAMS_PER_HOLDER`] for its link or device; its place is given back when its client
//! goes (the stream is dropped with the connection, at the latest at the next keep-alive), and
//! every stream ends when the broker stops ([`Streams::close`]). A loop whose `.ralph/` cannot
//! be watched (not made yet, or the system out of inotify watches: that one is reported) is
//! looked at every [`POLL_UNWATCHED`] instead, and its watch tried again.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ralph_protocol::Workspace;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio::task::AbortHandle;

/// The most event streams open at once, over every link and device.
pub const MAX_STREAMS: usize = 64;

/// The most event streams open at once for one answer link or one paired device.
pub const MAX_STREAMS_PER_HOLDER: usize = 4;

const WATCHED: &[&str] = &["state.json", "answer.md"];

/// How often streams look at a loop whose directory could not be watched (not there yet, or
/// the system out of inotify watches).
pub const POLL_UNWATCHED: Duration = Duration::from_secs(2);

/// One watch of every loop, shared by all event streams.
#[derive(Debug)]
pub(crate) struct Streams {
    changed: watch::Receiver<()>,
    shared: Arc<Shared>,
    total: Arc<Semaphore>,
    task: AbortHandle,
}

#[derive(Debug, Default)]
struct Shared {
    counts: Mutex<Counts>,
    /// Wakes the watching task when the loops to watch changed.
    poke: Notify,
}

#[derive(Debug, Default)]
struct Counts {
    /// Loop roots watched for open answer links, with how many streams want each.
    pinned: HashMap<PathBuf, usize>,
    /// Open streams by link or device.
    holders: HashMap<String, usize>,
}

impl Drop for Streams {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Streams {
    /// Starts watching the loop registry in `registry` and the loops in it. Must be called in
    /// a Tokio runtime.
    pub(crate) fn new(registry: PathBuf) -> std::io::Result<Streams> {
        // Made as a loop makes it, so that the broker can watch it before the first loop starts.
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&registry)?;
        }
        let mut dirs = ralph_process::DirsWatch::new()?;
        let (registry_tx, mut registry_rx) = mpsc::unbounded_channel();
        dirs.add(&registry, None, registry_tx)?;
        let (loop_tx, mut loop_rx) = mpsc::unbounded_channel();
        let (changed_tx, changed) = watch::channel(());
        let shared = Arc::new(Shared::default());
        let seen = Arc::clone(&shared);
        let task = tokio::spawn(async move {
            let mut reported = std::collections::HashSet::new();
            loop {
                let pinned: Vec<PathBuf> = seen.lock().pinned.keys().cloned().collect();
                let dir = registry.clone();
                let listed = tokio::task::spawn_blocking(move || {
                    ralph_protocol::registered_loops_in(&dir)
                        .into_iter()
                        .map(|e| e.root)
                        .chain(pinned)
                        .map(|root| Workspace::new(&root).dir().to_path_buf())
                        .collect::<Vec<_>>()
                })
                .await;
                let Ok(wanted) = listed else { return };
                let gone: Vec<PathBuf> = dirs
                    .dirs()
                    .filter(|d| *d != registry && !wanted.iter().any(|w| w == d))
                    .map(Path::to_path_buf)
                    .collect();
                for dir in gone {
                    dirs.remove(&dir);
                }
                let mut unwatched = false;
                for dir in wanted {
                    if dirs.contains(&dir) {
                        continue;
                    }
                    match dirs.add(&dir, Some(WATCHED), loop_tx.clone()) {
                        Ok(()) => {
                            reported.remove(&dir);
                        }
                        Err(e) => {
                            unwatched = true;
                            // A loop without `.ralph/` yet has nothing to show: no news.
                            let absent = matches!(
                                e.kind(),
                                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                            );
                            if !absent && reported.insert(dir.clone()) {
                                eprintln!(
                                    "ralph serve: cannot watch {} ({e}); open pages look at it every {} s instead. If the system is out of inotify watches, raise fs.inotify.max_user_watches.",
                                    dir.display(),
                                    POLL_UNWATCHED.as_secs()
                                );
                            }
                        }
                    }
                }
                // Sent once the watches are in place: what a stream reads next is never older.
                changed_tx.send_replace(());
                let poll_at = tokio::time::Instant::now() + POLL_UNWATCHED;
                loop {
                    tokio::select! {
                        // A loop that could not be watched is looked at again (and its watch
                        // tried again) now and then, so no stream misses its changes.
                        () = tokio::time::sleep_until(poll_at), if unwatched => break,
                        got = registry_rx.recv() => {
                            if got.is_none() { return }
                            while registry_rx.try_recv().is_ok() {}
                            break;
                        }
                        () = seen.poke.notified() => break,
                        got = loop_rx.recv() => {
                            if got.is_none() { return }
                            // A save is a few events in a row (temp file, rename).
                            while loop_rx.try_recv().is_ok() {}
                            changed_tx.send_replace(());
                        }
                    }
                }
            }
        });
        Ok(Streams {
            changed,
            shared,
            total: Arc::new(Semaphore::new(MAX_STREAMS)),
            task: task.abort_handle(),
        })
    }

    /// A place for one more stream of `holder` (a link's hash, a device), watching `root` too
    /// when it is given (a link's loop, which may not be registered); `None` when the caps are
    /// reached.
    pub(crate) fn open(&self, holder: &str, root: Option<&Path>) -> Option<Subscription> {
        let permit = Arc::clone(&self.total).try_acquire_owned().ok()?;
        let mut counts = self.shared.lock();
        let mine = counts.holders.entry(holder.to_string()).or_default();
        if *mine >= MAX_STREAMS_PER_HOLDER {
            return None;
        }
        *mine += 1;
        let mut pinned_new = false;
        if let Some(root) = root {
            let n = counts.pinned.entry(root.to_path_buf()).or_default();
            *n += 1;
            pinned_new = *n == 1;
        }
        drop(counts);
        if pinned_new {
            self.shared.poke.notify_one();
        }
        let mut changed = self.changed.clone();
        // The first wait returns at once: look now.
        changed.mark_changed();
        Some(Subscription {
            changed,
            _place: Place {
                shared: Arc::clone(&self.shared),
                holder: holder.to_string(),
                root: root.map(Path::to_path_buf),
                _permit: permit,
            },
        })
    }

    /// Ends every stream (the broker stops).
    pub(crate) fn close(&self) {
        self.task.abort();
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One stream's place: the changes it waits for, given back when dropped.
#[derive(Debug)]
pub(crate) struct Subscription {
    changed: watch::Receiver<()>,
    _place: Place,
}

impl Subscription {
    /// Waits for the next change to any watched loop; `None` once the broker stops.
    pub(crate) async fn next(&mut self) -> Option<()> {
        self.changed.changed().await.ok()
    }
}

#[derive(Debug)]
struct Place {
    shared: Arc<Shared>,
    holder: String,
    root: Option<PathBuf>,
    _permit: OwnedSemaphorePermit,
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut counts = self.shared.lock();
        if let Some(n) = counts.holders.get_mut(&self.holder) {
            *n -= 1;
            if *n == 0 {
                counts.holders.remove(&self.holder);
            }
        }
        let mut unpinned = false;
        if let Some(root) = &self.root
            && let Some(n) = counts.pinned.get_mut(root)
        {
            *n -= 1;
            if *n == 0 {
                counts.pinned.remove(root);
                unpinned = true;
            }
        }
        drop(counts);
        if unpinned {
            self.shared.poke.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn streams_are_capped_per_holder_and_in_all_and_given_back() {
        let dir = tempfile::tempdir().unwrap();
        let streams = Streams::new(dir.path().join("registry")).unwrap();
        let mut one_link: Vec<_> = (0..MAX_STREAMS_PER_HOLDER)
            .map(|_| streams.open("link a", None).expect("within the cap"))
            .collect();
        assert!(streams.open("link a", None).is_none(), "the link's cap");
        one_link.pop();
        assert!(
            streams.open("link a", None).is_some(),
            "given back when dropped"
        );
        let others: Vec<_> = (0..MAX_STREAMS - one_link.len())
            .map(|i| {
                streams
                    .open(&format!("link {i}"), None)
                    .expect("within the cap")
            })
            .collect();
        assert!(streams.open("link z", None).is_none(), "the cap over all");
        drop(others);
        let mut last = streams.open("link z", None).unwrap();
        assert_eq!(
            last.next().await,
            Some(()),
            "the first wait returns at once"
        );
        streams.close();
        assert_eq!(last.next().await, None, "closed, every stream ends");
    }

    /// A registered loop whose `.ralph/` came after its registry entry was never watched (the
    /// failed watch was dropped), and no stream heard of its changes until another loop
    /// registered.
    #[tokio::test]
    async fn a_loop_that_could_not_be_watched_is_still_looked_at() {
        let dir = tempfile::tempdir().unwrap();
        let registry = dir.path().join("registry");
        let root = dir.path().join("project");
        std::fs::create_dir_all(&root).unwrap();
        let streams = Streams::new(registry.clone()).unwrap();
        let entry = serde_json::json!({
            "root": root, "pid": std::process::id(), "started_at": "2026-01-01T00:00:00Z",
        });
        std::fs::write(registry.join("project.json"), entry.to_string()).unwrap();
        let mut changes = streams.open("link", None).unwrap();
        assert_eq!(changes.next().await, Some(()), "the first look");
        // The watch task sees the entry and fails to watch the missing `.ralph/`.
        tokio::time::sleep(Duration::from_millis(300)).await;
        while tokio::time::timeout(Duration::from_millis(50), changes.next())
            .await
            .is_ok()
        {}
        let ralph = Workspace::new(&root).dir().to_path_buf();
        std::fs::create_dir_all(&ralph).unwrap();
        std::fs::write(ralph.join("state.json"), "{}").unwrap();
        let heard = tokio::time::timeout(POLL_UNWATCHED * 3, changes.next()).await;
        assert_eq!(heard, Ok(Some(())), "the new state was never looked at");
        // Watched from now on: a change is heard at once, not at the next look.
        tokio::time::sleep(POLL_UNWATCHED + Duration::from_millis(500)).await;
        while tokio::time::timeout(Duration::from_millis(50), changes.next())
            .await
            .is_ok()
        {}
        std::fs::write(ralph.join("state.json"), "{ }").unwrap();
        let heard = tokio::time::timeout(Duration::from_secs(1), changes.next()).await;
        assert_eq!(heard, Ok(Some(())), "the watch was not tried again");
    }
}
