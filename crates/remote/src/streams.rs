//! The broker's event streams: one watch of the loops shared by every stream, and caps on how
//! many streams run.
//!
//! Every open page (a question's, the dashboard) holds a stream that tells it when something
//! changed. They all listen to one [`Streams`]: one inotify instance for the registry, every
//! registered loop and the loops of open answer links (a lone `ralph ask` is not registered),
//! whatever the number of streams. A stream needs a place among [`MAX_STREAMS`] in all and
//! [`MAX_STREAMS_PER_HOLDER`] for its link or device; its place is given back when its client
//! goes (the stream is dropped with the connection, at the latest at the next keep-alive), and
//! every stream ends when the broker stops ([`Streams::close`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ralph_protocol::Workspace;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio::task::AbortHandle;

/// The most event streams open at once, over every link and device.
pub const MAX_STREAMS: usize = 64;

/// The most event streams open at once for one answer link or one paired device.
pub const MAX_STREAMS_PER_HOLDER: usize = 4;

const WATCHED: &[&str] = &["state.json", "answer.md"];

/// One watch of every loop, shared by all event streams.
#[derive(Debug)]
pub struct Streams {
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
    pub fn new(registry: PathBuf) -> std::io::Result<Streams> {
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
                for dir in wanted {
                    // A loop without `.ralph/` yet has no state to show; its registering again
                    // (or any later entry) brings it back here.
                    if !dirs.contains(&dir) {
                        let _ = dirs.add(&dir, Some(WATCHED), loop_tx.clone());
                    }
                }
                // Sent once the watches are in place: what a stream reads next is never older.
                changed_tx.send_replace(());
                loop {
                    tokio::select! {
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
    pub fn open(&self, holder: &str, root: Option<&Path>) -> Option<Subscription> {
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
    pub fn close(&self) {
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
pub struct Subscription {
    changed: watch::Receiver<()>,
    _place: Place,
}

impl Subscription {
    /// Waits for the next change to any watched loop; `None` once the broker stops.
    pub async fn next(&mut self) -> Option<()> {
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
}
