//! Reading `RALPH_TASK.md` again only when it changed.
//!
//! The loop looks at the task file at the start of every iteration, after the agent ends (for
//! the criteria count) and before verifying a DONE; most of those times nothing has touched it
//! since the last look. A parse is reused while the file's identity, size and times stay the
//! same, unless it was changed so recently that a second change within the same clock tick
//! could hide behind equal times (the same guard `git` uses for racily clean files).

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use super::Runner;
use crate::task::TaskError;
use crate::task::TaskFile;

/// How recent a change must be for a parse of the file not to be reused.
const RACY: Duration = Duration::from_secs(2);

/// What identifies one version of the task file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(path: &Path) -> Option<Stamp> {
        let m = std::fs::metadata(path).ok()?;
        Some(Stamp {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        })
    }

    /// Whether the file last changed long enough before `now` that a later change would
    /// show in its times.
    fn settled(&self, now: SystemTime) -> bool {
        let Ok(now) = now.duration_since(SystemTime::UNIX_EPOCH) else {
            return false;
        };
        let latest = self.mtime.max(self.ctime);
        let Ok(secs) = u64::try_from(latest.0) else {
            return false;
        };
        let changed = Duration::new(secs, u32::try_from(latest.1).unwrap_or(0));
        changed + RACY < now
    }
}

impl Runner {
    /// The task file's name as the agent (working in the project) should use it.
    pub(super) fn task_name(&self) -> String {
        self.cfg.task.name_in(self.cfg.workspace.root())
    }

    /// The task file as it is now: parsed again only when it changed since the last parse.
    pub(super) fn load_task(&mut self) -> Result<TaskFile, TaskError> {
        let before = Stamp::of(&self.cfg.task_path);
        if let (Some(now), Some((seen, task))) = (before, &self.record.task_seen)
            && now == *seen
        {
            return Ok(task.clone());
        }
        let read_at = SystemTime::now();
        let task = TaskFile::load(&self.cfg.task_path)?;
        // Kept only when the file did not change while it was read, and not just before.
        self.record.task_seen = match (before, Stamp::of(&self.cfg.task_path)) {
            (Some(b), Some(a)) if a == b && b.settled(read_at) => Some((b, task.clone())),
            _ => None,
        };
        Ok(task)
    }
}
