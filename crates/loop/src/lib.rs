//! ralph's loop: runs an agent against a task file until the task is really done.
//!
//! Placeholder overview; rewritten once the runner lands.

pub mod countdown;
pub mod question;
pub mod task;
