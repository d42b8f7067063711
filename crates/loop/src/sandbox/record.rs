//! The sandbox's settings are the human's: a run does not take a weaker sandbox from the task
//! file than the last run of the same project started with, unless the human says so.
//!
//! The agent may edit the task file (it ticks its criteria there) and `.ralph/config.toml`, so
//! it could write `sandbox: false`, or widen `sandbox_write:`, for the next run. ralph reads
//! the settings once, as a run starts; so each run records the settings it starts with in
//! ralph's state directory (`sandbox/`, one file per project, named by a hash of its root),
//! which the sandbox never gives the agent. The next run compares: settings as strong or
//! stronger start and are recorded; weaker ones ([`weakened`]: the sandbox off, or from
//! `required` to `true`, a path added to `sandbox_write:` or `sandbox_read:`, a port added to
//! `sandbox_net:` or the list removed) refuse the run, naming each key, until the human
//! confirms with `ralph run --accept-sandbox` (or restores them). Whoever edited the file, and
//! whenever (during an iteration, or later, by a process the agent left behind), the next run
//! asks.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{Mode, SandboxSettings};

/// The directory of the records, in ralph's state directory.
const DIR: &str = "sandbox";

/// What a project's last run started with, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Record {
    /// The project root, for whoever reads the file.
    root: PathBuf,
    /// `sandbox:`: `true`, `false` or `required`.
    sandbox: String,
    sandbox_write: Vec<String>,
    sandbox_read: Vec<String>,
    /// `None`: any port.
    sandbox_net: Option<Vec<u16>>,
}

impl Record {
    fn of(root: &Path, s: &SandboxSettings) -> Record {
        Record {
            root: root.to_path_buf(),
            sandbox: mode_word(s.mode).into(),
            sandbox_write: s.write.clone(),
            sandbox_read: s.read.clone(),
            sandbox_net: s.net.clone(),
        }
    }

    fn settings(&self) -> SandboxSettings {
        SandboxSettings {
            mode: match self.sandbox.as_str() {
                "false" => Mode::Off,
                "required" => Mode::Required,
                _ => Mode::On,
            },
            write: self.sandbox_write.clone(),
            read: self.sandbox_read.clone(),
            net: self.sandbox_net.clone(),
        }
    }
}

/// How the task file spells `mode`.
fn mode_word(mode: Mode) -> &'static str {
    match mode {
        Mode::On => "true",
        Mode::Off => "false",
        Mode::Required => "required",
    }
}

/// How strong a mode is: `false` < `true` < `required`.
fn rank(mode: Mode) -> u8 {
    match mode {
        Mode::Off => 0,
        Mode::On => 1,
        Mode::Required => 2,
    }
}

/// Each way `now` lets the agent do more than `before` did, one line per key, as the task file
/// spells it: `sandbox: true -> false`, `sandbox_write: adds ~/src/other`.
pub fn weakened(before: &SandboxSettings, now: &SandboxSettings) -> Vec<String> {
    let mut out = Vec::new();
    if rank(now.mode) < rank(before.mode) {
        out.push(format!(
            "sandbox: {} -> {}",
            mode_word(before.mode),
            mode_word(now.mode)
        ));
    }
    for (key, was, is) in [
        ("sandbox_write", &before.write, &now.write),
        ("sandbox_read", &before.read, &now.read),
    ] {
        let added: Vec<&str> = is
            .iter()
            .filter(|p| !was.contains(p))
            .map(String::as_str)
            .collect();
        if !added.is_empty() {
            out.push(format!("{key}: adds {}", added.join(", ")));
        }
    }
    match (&before.net, &now.net) {
        (Some(_), None) => out.push("sandbox_net: removed (every port)".into()),
        (Some(was), Some(is)) => {
            let added: Vec<String> = is
                .iter()
                .filter(|p| !was.contains(p))
                .map(u16::to_string)
                .collect();
            if !added.is_empty() {
                out.push(format!("sandbox_net: adds {}", added.join(", ")));
            }
        }
        (None, _) => {}
    }
    out
}

/// The sandbox settings in the task file are weaker than those the last run started with.
#[derive(Debug, thiserror::Error)]
#[error(
    "the sandbox settings in {task} are weaker than those the last run of this project started with ({}). The agent can edit that file, so ralph does not take a weaker sandbox from it without you: if you made this change, run again with --accept-sandbox; if not, restore the settings (and look at what else the agent changed)",
    .changes.join("; ")
)]
pub struct Weakened {
    /// The task file.
    pub task: String,
    /// Each change, as [`weakened`] says it.
    pub changes: Vec<String>,
}

/// Where `root`'s record is kept in `state_dir`.
fn path(state_dir: &Path, root: &Path) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let hash = Sha256::digest(root.as_os_str().as_bytes());
    let name: String = hash[..16].iter().map(|b| format!("{b:02x}")).collect();
    state_dir.join(DIR).join(format!("{name}.json"))
}

/// Checks `settings` (the task file's, `task` naming it) against the last run of `root`, then
/// records them as this run's: refused when weaker, unless `accept` (the human's
/// `--accept-sandbox`). A record that cannot be read counts as none; one that cannot be
/// written is an error (the next run could not check).
pub fn check_and_record(
    state_dir: &Path,
    root: &Path,
    task: &Path,
    settings: &SandboxSettings,
    accept: bool,
) -> Result<Result<(), Weakened>, io::Error> {
    let file = path(state_dir, root);
    let before = fs::read(&file)
        .ok()
        .and_then(|raw| serde_json::from_slice::<Record>(&raw).ok());
    if let Some(before) = &before {
        let changes = weakened(&before.settings(), settings);
        if !changes.is_empty() && !accept {
            return Ok(Err(Weakened {
                task: task.display().to_string(),
                changes,
            }));
        }
    }
    let now = Record::of(root, settings);
    if before.as_ref() != Some(&now) {
        let dir = state_dir.join(DIR);
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)?;
        let mut tmp = tempfile::Builder::new().prefix(".tmp-").tempfile_in(&dir)?;
        tmp.write_all(&serde_json::to_vec_pretty(&now).map_err(io::Error::other)?)?;
        tmp.persist(&file).map_err(|e| e.error)?;
        prune(&dir);
    }
    Ok(Ok(()))
}

/// Removes the records of projects that are gone (a temporary directory, a removed worktree):
/// best effort, when a record is written.
fn prune(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let gone = fs::read(&path)
            .ok()
            .and_then(|raw| serde_json::from_slice::<Record>(&raw).ok())
            .is_some_and(|r| !r.root.exists());
        if gone {
            let _ = fs::remove_file(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(mode: Mode, write: &[&str], net: Option<Vec<u16>>) -> SandboxSettings {
        SandboxSettings {
            mode,
            write: write.iter().map(|s| s.to_string()).collect(),
            read: Vec::new(),
            net,
        }
    }

    #[test]
    fn weaker_is_named_key_by_key_and_stronger_is_not() {
        let before = settings(Mode::Required, &["~/a"], Some(vec![443]));
        assert_eq!(weakened(&before, &before), Vec::<String>::new());
        let stronger = settings(Mode::Required, &[], Some(vec![]));
        assert_eq!(weakened(&before, &stronger), Vec::<String>::new());
        let weaker = settings(Mode::Off, &["~/a", "~/", "/"], None);
        assert_eq!(
            weakened(&before, &weaker),
            vec![
                "sandbox: required -> false",
                "sandbox_write: adds ~/, /",
                "sandbox_net: removed (every port)"
            ]
        );
        assert_eq!(
            weakened(&before, &settings(Mode::On, &["~/a"], Some(vec![443, 22]))),
            vec!["sandbox: required -> true", "sandbox_net: adds 22"]
        );
    }

    #[test]
    fn a_weaker_run_is_refused_until_accepted_and_then_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let project = tempfile::tempdir().unwrap();
        let root = project.path();
        let task = &root.join("RALPH_TASK.md");
        let on = settings(Mode::On, &[], None);
        let off = settings(Mode::Off, &[], None);
        check_and_record(dir.path(), root, task, &on, false)
            .unwrap()
            .unwrap();
        let refused = check_and_record(dir.path(), root, task, &off, false)
            .unwrap()
            .unwrap_err();
        assert_eq!(refused.changes, vec!["sandbox: true -> false"]);
        assert!(refused.to_string().contains("--accept-sandbox"));
        // Another project has its own record (this one is gone).
        check_and_record(dir.path(), Path::new("/no/such/project"), task, &off, false)
            .unwrap()
            .unwrap();
        check_and_record(dir.path(), root, task, &off, true)
            .unwrap()
            .unwrap();
        check_and_record(dir.path(), root, task, &off, false)
            .unwrap()
            .unwrap();
        // The record of a project that is gone goes when another is written.
        assert!(!path(dir.path(), Path::new("/no/such/project")).exists());
        // Back to the sandbox: stronger, taken, and the bar is raised again.
        check_and_record(dir.path(), root, task, &on, false)
            .unwrap()
            .unwrap();
        assert!(
            check_and_record(dir.path(), root, task, &off, false)
                .unwrap()
                .is_err()
        );
    }
}
