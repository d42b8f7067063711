//! The fleet: many ordinary ralph loops at once.
//!
//! Every loop of a fleet is a whole `ralph run --worktree` process with its own guard, state,
//! registry entry, questions and landing; this crate only schedules them, lists them as rows
//! for the view, `ralph status --all` and the dashboard, and lands the finished ones one at a
//! time per repository. If the fleet process dies the loops go on.
//!
//! - [`fleet_file`]: the fleet's record (`$RALPH_STATE_DIR/fleets/<id>.json`).
//! - [`schedule`]: `-j N` loops at a time, each in a process group of its own; attaching to
//!   the loops of an earlier `ralph fleet` on the same task files.
//! - [`observe`]: where a loop stands, from its files alone.
//! - [`ports`]: each loop's block of ten ports (`RALPH_PORT`).
//! - [`rows`]: every loop as one row for the view, `ralph status --all` and the dashboard,
//!   the ones that need the human first.
//! - [`prune`]: the worktrees and branches of landed and discarded loops, removed.

#![forbid(unsafe_code)]

pub mod fleet_file;
pub mod observe;
pub mod ports;
pub mod prune;
pub mod rows;
pub mod schedule;

#[cfg(test)]
mod test_support;
