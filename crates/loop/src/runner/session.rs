//! [`Session`]: what carries from one iteration to the next: where the run started, what the
//! next prompt is told, and the agent's session to resume with an answer.

use crate::prompt::Carryover;

/// What carries between iterations (see the module docs).
#[derive(Debug)]
pub(super) struct Session {
    /// The first iteration of this run (after the last run's, when it goes on from one).
    pub(super) first_iteration: u32,
    /// What the next prompt is told: answers, rejections, failures.
    pub(super) carryover: Vec<Carryover>,
    /// The last session the agent reported, for resuming it with an answer.
    pub(super) id: Option<String>,
    /// The next iteration resumes that session with the carried answer instead of starting
    /// fresh.
    pub(super) resume_next: bool,
}
