//! The fleet's own record, `$RALPH_STATE_DIR/fleets/<fleet-id>.json`: which task files it runs,
//! which worktree each became, which are still queued, their port blocks, the landing mode and
//! the cost cap.
//!
//! This module owns the file. The id is a digest of the task files' absolute paths, so
//! `ralph fleet` run again on the same task files finds the same record (and the loops it
//! started) instead of starting a second fleet. The file is written atomically; the fleet
//! process is its only writer, and a second `ralph fleet` on the same tasks takes it over.

use std::path::{Path, PathBuf};

use ralph_protocol::LandMode;
use serde::{Deserialize, Serialize};

/// One task file of a fleet, and the loop it became.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Member {
    /// The task file (absolute).
    pub task_file: PathBuf,
    /// The task file relative to its repository's top (what `ralph run --task` gets).
    pub task_rel: PathBuf,
    /// The repository the loop works on (its top).
    pub repo: PathBuf,
    /// The task's one-line summary.
    pub task: String,
    /// The loop's worktree (made by its `ralph run --worktree`; it may not exist yet).
    pub worktree: PathBuf,
    /// The first of the loop's ten ports (`RALPH_PORT`), once it has them.
    #[serde(default)]
    pub port: Option<u16>,
    /// The `ralph run` process the fleet started for it, while it may still run.
    #[serde(default)]
    pub pid: Option<u32>,
    /// Started (by this fleet or an earlier run of it), rather than still queued.
    #[serde(default)]
    pub started: bool,
    /// Whether its work must land for the loop to count as finished well (`--land auto|pr`,
    /// else the task file's `land:`).
    #[serde(default)]
    pub must_land: bool,
    /// Why its `ralph run` ended before its loop began (a worktree that could not be made, a
    /// bad agent), with where its output is: it has no loop to show, so the view shows this.
    #[serde(default)]
    pub failed_to_start: Option<String>,
}

/// `$RALPH_STATE_DIR/fleets/<id>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fleet {
    /// The fleet's id ([`fleet_id`]): `RALPH_FLEET` in each loop's environment.
    pub id: String,
    /// At most this many loops run at once.
    pub jobs: usize,
    /// How finished work lands; `None`: as each task file says.
    pub land: Option<LandMode>,
    /// The cap on the fleet's total spend, in dollars.
    pub max_cost_usd: Option<f64>,
    /// The `ralph fleet` process scheduling it now.
    pub pid: u32,
    /// Its loops, in the order the task files were given.
    pub members: Vec<Member>,
    /// The flags each loop's `ralph run` gets besides its task (`--onto`, the agent flags,
    /// `--no-sandbox`): a view that runs one of its loops again gives them too.
    #[serde(default)]
    pub run_args: Vec<String>,
}

/// The id of the fleet of these task files (absolute paths): the same whatever their order.
pub fn fleet_id(task_files: &[PathBuf]) -> String {
    let mut paths: Vec<String> = task_files
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    paths.sort();
    paths.dedup();
    let digest = ralph_protocol::task_digest(paths.join("\0").as_bytes());
    digest[..12].to_owned()
}

/// Where fleets keep their files: `<state dir>/fleets`.
pub fn fleets_dir(state: &Path) -> PathBuf {
    state.join("fleets")
}

impl Fleet {
    /// The record's file in the fleets directory `dir`.
    pub fn path(dir: &Path, id: &str) -> PathBuf {
        dir.join(format!("{id}.json"))
    }

    /// The fleet's directory of per-fleet files (`logs/` here; the budget's `spent/`).
    pub fn own_dir(dir: &Path, id: &str) -> PathBuf {
        dir.join(id)
    }

    /// The record of fleet `id`, if there is one.
    pub fn load(dir: &Path, id: &str) -> Option<Fleet> {
        let text = std::fs::read_to_string(Fleet::path(dir, id)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Writes the record atomically.
    pub fn save(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let json = serde_json::to_vec_pretty(self).expect("serializes");
        ralph_protocol::write_atomic(&Fleet::path(dir, &self.id), &json)
            .map_err(std::io::Error::other)
    }

    /// Its loop in `worktree` (the same directory, however spelled), if it has one.
    pub fn member(&self, worktree: &Path) -> Option<&Member> {
        let same = |a: &Path| {
            a == worktree
                || std::fs::canonicalize(a)
                    .is_ok_and(|a| std::fs::canonicalize(worktree).is_ok_and(|w| a == w))
        };
        self.members.iter().find(|m| same(&m.worktree))
    }

    /// The tasks not started yet, in order: the view's queued rows.
    pub fn queued(&self) -> impl Iterator<Item = &Member> {
        self.members.iter().filter(|m| !m.started)
    }
}

/// The fleet's lock, `<id>.lock` beside its record, held by the one `ralph fleet` that
/// schedules it for as long as that process lives (the kernel lets go when it dies), so that a
/// second one on the same task files cannot start a loop twice.
#[derive(Debug)]
pub struct Held(#[allow(dead_code)] nix::fcntl::Flock<std::fs::File>);

/// Takes fleet `id`'s lock; `Ok(None)` when another process holds it.
pub fn hold(dir: &Path, id: &str) -> std::io::Result<Option<Held>> {
    std::fs::create_dir_all(dir)?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(format!("{id}.lock")))?;
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(Some(Held(lock))),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, e)) => Err(e.into()),
    }
}

/// The fleet on record in `dir` that has a loop in `worktree`, if any.
pub fn of_worktree(dir: &Path, worktree: &Path) -> Option<Fleet> {
    all(dir).into_iter().find(|f| f.member(worktree).is_some())
}

/// Every fleet on record in `dir`.
pub fn all(dir: &Path) -> Vec<Fleet> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .filter_map(|e| {
            let text = std::fs::read_to_string(e.path()).ok()?;
            serde_json::from_str(&text).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_task_files_in_any_order_make_the_same_fleet() {
        let a = fleet_id(&["/r/tasks/a.md".into(), "/r/tasks/b.md".into()]);
        let b = fleet_id(&["/r/tasks/b.md".into(), "/r/tasks/a.md".into()]);
        let c = fleet_id(&["/r/tasks/a.md".into()]);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.len(), 12);
    }

    #[test]
    fn a_fleet_file_round_trips_and_lists_its_queued_tasks() {
        let dir = tempfile::tempdir().unwrap();
        let member = |name: &str, started| Member {
            task_file: format!("/r/{name}.md").into(),
            task_rel: format!("{name}.md").into(),
            repo: "/r".into(),
            task: name.into(),
            worktree: format!("/d/{name}").into(),
            port: None,
            pid: None,
            started,
            must_land: false,
            failed_to_start: None,
        };
        let fleet = crate::test_support::fleet(vec![member("one", true), member("two", false)]);
        fleet.save(dir.path()).unwrap();
        let back = Fleet::load(dir.path(), "abc").unwrap();
        assert_eq!(back, fleet);
        let queued: Vec<_> = back.queued().map(|m| m.task.as_str()).collect();
        assert_eq!(queued, ["two"]);
        assert_eq!(all(dir.path()).len(), 1);
        assert_eq!(
            of_worktree(dir.path(), Path::new("/d/two")).map(|f| f.run_args),
            Some(vec!["--no-sandbox".to_owned()])
        );
        assert!(of_worktree(dir.path(), Path::new("/d/three")).is_none());
    }

    #[test]
    fn one_process_at_a_time_holds_a_fleet() {
        let dir = tempfile::tempdir().unwrap();
        let held = hold(dir.path(), "abc").unwrap();
        assert!(held.is_some());
        assert!(hold(dir.path(), "abc").unwrap().is_none(), "held twice");
        assert!(hold(dir.path(), "other").unwrap().is_some());
        drop(held);
        assert!(hold(dir.path(), "abc").unwrap().is_some());
    }
}
