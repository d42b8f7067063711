//! Every loop running on this machine, for `ralph status --all`.
//!
//! # How it works
//!
//! Each running loop keeps one small JSON file, `{root, pid, started_at}`, in the registry
//! directory ([`registry_dir`]). The file is named by a stable hash of the project's absolute
//! path, so a loop always finds its own entry and two projects never share one; it is written
//! atomically (a temporary file in the same directory, then a rename), so a reader sees the
//! whole entry or none. [`register`] writes it and the returned [`Registration`] removes it when
//! dropped.
//!
//! A loop that crashes cannot remove its entry, so [`list`] checks every pid it reads and
//! removes the entries of processes that are gone: the registry cleans itself up the next time
//! anyone looks. Nothing here blocks on another process: there is no lock, only whole-file
//! writes and renames.

use std::fs;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::user_dirs::{STATE_DIR_ENV, UserDir, user_dir};

/// The largest entry file [`list`] reads; anything bigger is not one of ours.
const MAX_ENTRY_BYTES: u64 = 64 * 1024;

/// One running loop, as recorded in the registry.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LoopEntry {
    /// The project root (absolute).
    pub root: PathBuf,
    /// The pid of the `ralph run` process.
    pub pid: u32,
    /// When it registered (RFC 3339).
    pub started_at: String,
}

/// This process's entry in the registry; dropping it removes the entry.
#[derive(Debug)]
#[must_use = "the entry is removed as soon as the Registration is dropped"]
pub struct Registration {
    path: PathBuf,
    pid: u32,
}

impl Registration {
    /// The entry file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // Only remove the entry if it is still ours; every error is ignored, since a leftover
        // entry is pruned by the next `list` anyway and Drop must never panic.
        if read_entry(&self.path).is_some_and(|entry| entry.pid == self.pid) {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// The registry directory: `loops` in ralph's state directory ([`UserDir::State`]:
/// `$RALPH_STATE_DIR/loops`, else `~/.local/state/ralph/loops` on Linux). `None` when there
/// is no home directory to put it in.
pub fn registry_dir() -> Option<PathBuf> {
    Some(user_dir(UserDir::State)?.join("loops"))
}

/// Records this process as the loop working in `root`, until the [`Registration`] is dropped.
pub fn register(root: &Path) -> io::Result<Registration> {
    let dir = registry_dir().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("no home directory to keep the list of running loops in; set {STATE_DIR_ENV}"),
        )
    })?;
    register_in(&dir, root)
}

/// Every loop whose process is still alive; entries of dead processes are removed on the way.
///
/// Unreadable or malformed files are skipped (and left alone: they may be a newer ralph's).
/// The order is by project root.
pub fn list() -> Vec<LoopEntry> {
    registry_dir().map_or_else(Vec::new, |dir| list_in(&dir))
}

/// [`register`] with the registry in `dir`.
fn register_in(dir: &Path, root: &Path) -> io::Result<Registration> {
    fs::DirBuilder::new()
        .recursive(true)
        // The registry lists the user's projects; other users have no business reading it.
        .mode(0o700)
        .create(dir)?;
    let root = absolute(root);
    let entry = LoopEntry {
        root: root.clone(),
        pid: std::process::id(),
        started_at: crate::time::timestamp(SystemTime::now()),
    };
    let path = dir.join(entry_file_name(&root));
    let mut json = serde_json::to_vec_pretty(&entry).map_err(io::Error::other)?;
    json.push(b'\n');
    let mut tmp = tempfile::Builder::new().prefix(".tmp-").tempfile_in(dir)?;
    tmp.write_all(&json)?;
    tmp.as_file().sync_data()?;
    tmp.persist(&path).map_err(|e| e.error)?;
    Ok(Registration {
        path,
        pid: entry.pid,
    })
}

/// [`list`] with the registry in `dir`.
pub fn list_in(dir: &Path) -> Vec<LoopEntry> {
    let Ok(read_dir) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut live = Vec::new();
    for dirent in read_dir.flatten() {
        let path = dirent.path();
        // Temporary files of a registration in progress start with a dot; skip them.
        let name = dirent.file_name();
        if name.as_bytes().starts_with(b".") || path.extension().is_none_or(|ext| ext != "json") {
            continue;
        }
        let Some(entry) = read_entry(&path) else {
            continue;
        };
        if crate::workspace::pid_exists(entry.pid) {
            live.push(entry);
        } else {
            // A crashed loop's leftover; whoever looks first cleans it up.
            let _ = fs::remove_file(&path);
        }
    }
    live.sort_by(|a, b| a.root.cmp(&b.root));
    live
}

/// Reads one entry file; `None` when it is missing, too big or not an entry.
fn read_entry(path: &Path) -> Option<LoopEntry> {
    use std::io::Read;
    // Never a pipe or device, whose open could block: the registry is read by every front end.
    let file = crate::workspace::open_plain(fs::OpenOptions::new().read(true), path).ok()?;
    let mut raw = Vec::new();
    file.take(MAX_ENTRY_BYTES).read_to_end(&mut raw).ok()?;
    serde_json::from_slice(&raw).ok()
}

/// `root` made absolute (symlinks resolved when it exists), so that one project always gets
/// one entry however it was spelled.
fn absolute(root: &Path) -> PathBuf {
    fs::canonicalize(root)
        .or_else(|_| std::path::absolute(root))
        .unwrap_or_else(|_| root.to_path_buf())
}

/// The entry's file name: a stable hash of the absolute path, in hex.
fn entry_file_name(root: &Path) -> String {
    format!(
        "{}.json",
        crate::budget::stable_hash(root.as_os_str().as_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_loop_is_listed_until_dropped() {
        let state = tempfile::tempdir().unwrap();
        let dir = state.path().join("loops");
        let project = tempfile::tempdir().unwrap();

        let registration = register_in(&dir, project.path()).unwrap();

        let entries = list_in(&dir);
        assert_eq!(entries.len(), 1, "{entries:?}");
        assert_eq!(entries[0].root, fs::canonicalize(project.path()).unwrap());
        assert_eq!(entries[0].pid, std::process::id());
        assert!(crate::time::parse_timestamp(&entries[0].started_at).is_some());
        assert!(registration.path().starts_with(&dir));

        drop(registration);
        assert_eq!(list_in(&dir), Vec::new());
        assert_eq!(
            fs::read_dir(&dir).unwrap().count(),
            0,
            "the file is gone too"
        );
    }

    #[test]
    fn a_dead_loops_entry_is_pruned_by_list() {
        let state = tempfile::tempdir().unwrap();
        let dir = state.path().join("loops");
        fs::create_dir_all(&dir).unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead_pid = child.id();
        child.wait().unwrap();
        let stale = dir.join(entry_file_name(Path::new("/crashed/project")));
        let entry = LoopEntry {
            root: "/crashed/project".into(),
            pid: dead_pid,
            started_at: "2026-01-01T00:00:00.000Z".into(),
        };
        fs::write(&stale, serde_json::to_vec(&entry).unwrap()).unwrap();
        let project = tempfile::tempdir().unwrap();
        let _live = register_in(&dir, project.path()).unwrap();

        let entries = list_in(&dir);

        assert_eq!(entries.len(), 1, "{entries:?}");
        assert_eq!(entries[0].pid, std::process::id());
        assert!(!stale.exists(), "the stale entry was removed");
    }

    #[test]
    fn two_roots_coexist_and_the_same_root_reuses_its_entry() {
        let state = tempfile::tempdir().unwrap();
        let dir = state.path().join("loops");
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();

        let reg_a = register_in(&dir, a.path()).unwrap();
        let reg_b = register_in(&dir, b.path()).unwrap();

        let mut roots: Vec<PathBuf> = list_in(&dir).into_iter().map(|e| e.root).collect();
        let mut expected = vec![
            fs::canonicalize(a.path()).unwrap(),
            fs::canonicalize(b.path()).unwrap(),
        ];
        roots.sort();
        expected.sort();
        assert_eq!(roots, expected);
        assert_ne!(reg_a.path(), reg_b.path());

        // The same project, spelled differently, lands on the same file.
        let again = register_in(&dir, &a.path().join(".")).unwrap();
        assert_eq!(again.path(), reg_a.path());
        assert_eq!(list_in(&dir).len(), 2);
    }

    #[test]
    fn junk_in_the_registry_is_skipped_not_removed() {
        let state = tempfile::tempdir().unwrap();
        let dir = state.path().join("loops");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("0123456789abcdef.json"), "not json").unwrap();
        fs::write(dir.join(".tmp-half"), "{").unwrap();

        assert_eq!(list_in(&dir), Vec::new());
        assert!(dir.join("0123456789abcdef.json").exists());
    }

    #[test]
    fn a_missing_registry_lists_nothing() {
        let state = tempfile::tempdir().unwrap();
        assert_eq!(list_in(&state.path().join("loops")), Vec::new());
    }

    #[test]
    fn entry_names_are_stable_across_runs() {
        // Regression guard: the name must never depend on a per-process seed or Rust version,
        // or a new ralph would not find (or clean up) an old ralph's entry.
        assert_eq!(entry_file_name(Path::new("")), "cbf29ce484222325.json");
        assert_eq!(entry_file_name(Path::new("a")), "af63dc4c8601ec8c.json");
    }
}
