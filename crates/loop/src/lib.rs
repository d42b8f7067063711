//! ralph's loop: runs an agent against a task file until the task is really done.
//!
//! # Theory of operation
//!
//! [`runner::Runner`] drives iterations; see its module docs for the steps. Around it:
//!
//! - [`task`] reads `RALPH_TASK.md` (YAML frontmatter and a markdown body of `- [ ]` criteria)
//!   and says exactly what is wrong with a bad one.
//! - [`workspace`] owns the `.ralph/` directory: atomic, symlink-refusing writes, bounded reads,
//!   and the lock that keeps two loops out of one workspace.
//! - [`state`] is `state.json` and `events.jsonl`, what other processes read about the loop.
//! - [`question`], [`answer`], [`countdown`] and [`clarifications`] are the question lifecycle:
//!   the agent's question file, the human's answer file (first writer wins), the deadline, and
//!   the record of both.
//! - [`prompt`] builds each iteration's prompt; [`supervisor`] starts and stops process groups,
//!   and the [`guard`], a second process, stops them if ralph itself is killed outright.
//! - [`event`] is the vocabulary between the loop and a front end: events out, controls in.
//!
//! The crate does no terminal I/O: front ends live in `ralph-ui`.

#![forbid(unsafe_code)]

pub mod agent_spec;
pub mod agents;
pub mod asks;
pub mod config;
pub mod logs;
pub mod native;
pub mod notify;
pub mod prompt;
pub mod runner;
pub mod task;
