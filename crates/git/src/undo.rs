//! Putting the work tree back to a checkpoint, touching only what differs.
//!
//! The caller checkpoints the present first (so an undo can be undone), then [`restore`]
//! compares that checkpoint's tree with the target's and, file by file, writes back the
//! target's content (`checkout-index` from an index of ralph's own, so the user's index never
//! changes) or deletes a file the target does not have. Files git ignores are in neither tree
//! and are never touched; nor is anything the two trees agree on.

use std::path::Path;

use crate::git::{Git, GitError};

/// What [`restore`] did to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Written back with the checkpoint's content (it was changed or deleted since).
    Restored(String),
    /// Deleted: the checkpoint did not have it.
    Removed(String),
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::Restored(p) => write!(f, "restored {p}"),
            Change::Removed(p) => write!(f, "removed  {p}"),
        }
    }
}

/// Makes the work tree at `git.dir()` what `target` holds where it differs from `present` (a
/// checkpoint of it as it is now). `scratch` is a file in `.ralph/` for a temporary index.
pub fn restore(
    git: &Git,
    present: &str,
    target: &str,
    scratch: &Path,
) -> Result<Vec<Change>, GitError> {
    let out = git.run([
        "diff-tree",
        "-r",
        "-z",
        "--no-renames",
        "--name-status",
        present,
        target,
    ])?;
    let mut fields = out.split('\0').filter(|s| !s.is_empty());
    let mut write = Vec::new();
    let mut changes = Vec::new();
    while let (Some(status), Some(path)) = (fields.next(), fields.next()) {
        if status == "D" {
            let file = git.dir().join(path);
            match std::fs::remove_file(&file) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(GitError::io(&file, e)),
            }
            remove_empty_parents(git.dir(), &file);
            changes.push(Change::Removed(path.to_owned()));
        } else {
            write.push(path.to_owned());
            changes.push(Change::Restored(path.to_owned()));
        }
    }
    if !write.is_empty() {
        let _ = std::fs::remove_file(scratch);
        let theirs = git.with_index(scratch);
        theirs.run(["read-tree", target])?;
        let mut cmd = theirs.command(["checkout-index", "-f", "-z", "--stdin"]);
        let mut child = cmd
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|source| GitError::Spawn { source })?;
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().expect("piped");
            let list: Vec<u8> = write
                .iter()
                .flat_map(|p| [p.as_bytes(), b"\0"].concat())
                .collect();
            stdin
                .write_all(&list)
                .map_err(|e| GitError::io(scratch, e))?;
        }
        let out = child
            .wait_with_output()
            .map_err(|source| GitError::Spawn { source })?;
        let _ = std::fs::remove_file(scratch);
        if !out.status.success() {
            return Err(GitError::Other(format!(
                "git checkout-index failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
    }
    changes.sort_by(|a, b| path_of(a).cmp(path_of(b)));
    Ok(changes)
}

fn path_of(c: &Change) -> &str {
    match c {
        Change::Restored(p) | Change::Removed(p) => p,
    }
}

/// Removes the directories a deleted file leaves empty, up to (not including) `root`.
fn remove_empty_parents(root: &Path, file: &Path) {
    let mut dir = file.parent();
    while let Some(d) = dir {
        if d == root || !d.starts_with(root) || std::fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
}
