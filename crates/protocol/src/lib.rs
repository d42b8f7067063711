//! ralph's plain data and the `.ralph/` formats: what every process that takes part in a loop
//! reads and writes, and nothing else.
//!
//! # Theory of operation
//!
//! A loop (`ralph run`) and its front ends (the terminal panel, `ralph answer`, `ralph ask`,
//! `ralph status`, a remote broker) are separate processes that meet in one directory,
//! `.ralph/`. This crate is that meeting place: the file formats, and the rules for writing
//! them so that no reader ever sees half a file and no two writers both win.
//!
//! - [`workspace`] names every file under `.ralph/` and owns the only ways to touch them:
//!   atomic, symlink-refusing writes, bounded reads, no-clobber creation, and the lock that
//!   keeps two loops out of one workspace.
//! - [`question`] is the agent's question (`question.md`); [`answer`] is the human's answer
//!   (`answer.md`, first writer wins); [`countdown`] is the deadline; [`clarifications`] is
//!   the record of every question and its answer.
//! - [`state`] is `state.json` and `events.jsonl`: what other processes read about the loop.
//! - [`desk`] is the one owner of a question's life (`Desk`: open, step, close, deliver,
//!   archive; the loop and a lone `ralph ask` drive it, sync and told the clock), and how any
//!   other process reads the question waiting and answers it (one encoding, one size limit,
//!   first answer wins, who answered recorded).
//! - [`registry`] lists the loops running on this machine, one small file each;
//!   [`user_dirs`] says where a person's config and ralph's state live outside any project.
//! - [`broker`] is `ralph serve`'s share of the state directory: its lock, the answer links
//!   (hashes only) and the requests (skip, more time) it leaves in a loop's `.ralph/`.
//! - [`stop`] is `.ralph/stop`: another process (`ralph stop`, the broker) asks the loop to
//!   stop as Ctrl-C would.
//! - [`event`] is the vocabulary between a loop and its front end: events out, controls in.
//! - [`time`] is how the files write time (RFC 3339, UTC, milliseconds).
//! - [`text`] makes untrusted text safe to show on one line; [`frontmatter`] splits a file's
//!   YAML header from its body.
//!
//! No tokio, no process control: a front end that only reads and answers depends on this
//! crate and `ralph-signal`, not on the runner.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod answer;
pub mod broker;
pub mod budget;
pub mod clarifications;
pub mod countdown;
pub mod desk;
pub mod event;
pub mod frontmatter;
pub mod question;
pub mod registry;
pub mod state;
pub mod stop;
pub mod text;
pub mod time;
pub mod user_dirs;
pub mod workspace;
