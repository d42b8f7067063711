//! ralph's process groups: every process ralph starts runs in a group of its own and is stopped
//! the same way, whoever stops it.
//!
//! # Theory of operation
//!
//! An agent (or a test command) is a shell command that may start anything. ralph starts it
//! as the leader of a new process group ([`supervisor`]), so one signal reaches its whole tree,
//! and stops it with one sequence: SIGTERM to the group, a grace period, SIGKILL, and rounds
//! for escapees. What leaves the group (`setsid`, a shell with job control) is found by the
//! [`orphans`] sweep: ralph is the subreaper of everything it starts, and every process it
//! starts carries a mark in its environment. Should ralph itself be killed outright, the
//! [`guard`], a second small process, stops what is left.
//!
//! What the operating system says about a pid (alive, a zombie, when it started, its group)
//! is read in one place, [`sys`]: the Linux-specific module (`/proc`). What changes in a
//! directory (`.ralph/`, the registry) is learnt from inotify in [`watch`], the other.

#![forbid(unsafe_code)]

mod adopt;
pub mod command_line;
pub mod group;
pub mod guard;
pub mod orphans;
pub mod supervisor;
pub mod sys;
pub mod watch;
