//! Reading `RALPH_TASK.md` again only when it changed.
//!
//! The loop looks at the task file at the start of every iteration, after the agent ends (for
//! the criteria count) and before verifying a DONE; most of those times nothing has touched it
//! since the last look. A parse is reused while the file's identity, size and times stay the
//! same, unless it was changed so recently that a second change within the same clock tick
//! could hide behind equal times (the same guard `git` uses for racily clean files).

use std::time::SystemTime;

use super::Runner;
use super::task_stamp::Stamp;
use crate::task::TaskError;
use crate::task::TaskFile;

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
