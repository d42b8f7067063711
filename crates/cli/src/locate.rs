//! Which loop a command means: the project it is run in, found by searching upward as git
//! finds its repository; outside any project, the one loop on this machine waiting for an
//! answer.
//!
//! A project is a directory holding `.ralph/` or `RALPH_TASK.md`. `ralph run`, `ralph status`
//! and `ralph answer` look for one in their directory (`-C DIR`, or the current one) and then
//! in each parent, so they work from anywhere inside the project. Outside any project,
//! `ralph status` and `ralph answer` fall back to the machine's registry of running loops
//! (`ralph_protocol::registry`): with exactly one waiting for an answer they act on it and say
//! which; with several they list them, each with the command that answers it.

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use ralph_protocol::{DIR_NAME, State, Status, Workspace, registered_loops};

use crate::Failure;

/// The project `dir` is in: `dir` or its nearest ancestor holding `.ralph/` or
/// `RALPH_TASK.md`; `None` outside any project. `dir` must exist (a usage error otherwise).
pub fn find_project(dir: &Path) -> Result<Option<PathBuf>, Failure> {
    let start = project_root(dir)?;
    Ok(start
        .ancestors()
        .find(|d| is_project(d))
        .map(Path::to_path_buf))
}

/// Whether `dir` holds `.ralph/` (as anything: a symlink there is refused later, by name) or
/// `RALPH_TASK.md`.
fn is_project(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir.join(DIR_NAME)).is_ok()
        || std::fs::symlink_metadata(dir.join("RALPH_TASK.md")).is_ok()
}

/// The project `ralph run` works in: the one `dir` is in, else `dir` itself (where a missing
/// task file is then reported).
pub fn run_root(dir: &Path) -> Result<PathBuf, Failure> {
    match find_project(dir)? {
        Some(root) => Ok(root),
        None => project_root(dir),
    }
}

/// Where `ralph status` or `ralph answer` acts, for `dir` (`-C`, or the current directory).
#[derive(Debug)]
pub enum Target {
    /// The project `dir` is in.
    Project(PathBuf),
    /// Outside any project: the only loop on this machine waiting for an answer.
    OnlyWaiting(PathBuf),
    /// Outside any project, and no single loop to act on (none or several waiting, listed).
    Nowhere {
        /// `dir`, made absolute.
        dir: PathBuf,
        /// The roots of the loops waiting for an answer on this machine.
        waiting: Vec<PathBuf>,
    },
}

/// The loop `dir` means: see the module docs.
pub fn target(dir: &Path) -> Result<Target, Failure> {
    if let Some(root) = find_project(dir)? {
        return Ok(Target::Project(root));
    }
    let mut waiting = waiting_loops();
    Ok(match waiting.len() {
        1 => Target::OnlyWaiting(waiting.remove(0)),
        _ => Target::Nowhere {
            dir: project_root(dir)?,
            waiting,
        },
    })
}

/// The roots of the running loops on this machine whose question waits for an answer.
fn waiting_loops() -> Vec<PathBuf> {
    registered_loops()
        .into_iter()
        .filter(|entry| {
            State::load(&Workspace::new(&entry.root))
                .ok()
                .flatten()
                .is_some_and(|s| s.status == Status::WaitingInput && s.pending_question.is_some())
        })
        .map(|entry| entry.root)
        .collect()
}

/// The line that says which loop a command outside any project acts on.
pub fn acting_on(root: &Path) -> String {
    format!(
        "not inside a project: the one loop waiting for an answer on this machine is in {}",
        root.display()
    )
}

/// The error for a command that needs a project, run outside any: what was searched, and the
/// loops waiting elsewhere with the command that answers each.
pub fn nowhere(dir: &Path, waiting: &[PathBuf], what: &str) -> Failure {
    let mut msg = format!(
        "{}: not inside a project (no {DIR_NAME}/ or RALPH_TASK.md there or in any directory above it), so {what}.",
        dir.display()
    );
    if waiting.is_empty() {
        msg.push_str(" No loop on this machine is waiting for an answer either.");
    } else {
        msg.push_str(&format!(
            " {} loops on this machine are waiting for an answer; name one with -C:",
            waiting.len()
        ));
        for root in waiting {
            msg.push_str(&format!(
                "\n  {}",
                ralph_protocol::answer_hint(&crate::answer_command(root))
            ));
        }
    }
    Failure::failed(anyhow!(msg))
}

/// The project directory given with `-C`, made absolute; a usage error if it is not a directory.
pub fn project_root(dir: &Path) -> Result<PathBuf, Failure> {
    existing_dir(dir, "with -C")
}

/// `dir`, made absolute, when it is an existing directory; `given` says where it came from
/// (`with -C`), for the error.
pub fn existing_dir(dir: &Path, given: &str) -> Result<PathBuf, Failure> {
    let abs = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let problem = match std::fs::metadata(&abs) {
        Ok(m) if m.is_dir() => return Ok(abs),
        Ok(_) => "not a directory".to_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "no such directory".to_owned(),
        Err(e) => e.to_string(),
    };
    Err(Failure::usage(anyhow::anyhow!(
        "{}: {problem} (given {given})",
        abs.display()
    )))
}
