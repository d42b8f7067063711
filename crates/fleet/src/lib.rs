//! The fleet: many ordinary ralph loops at once.
//!
//! Every loop of a fleet is a whole `ralph run --worktree` process with its own guard, state,
//! registry entry, questions and landing; this crate only schedules them, lists them as rows
//! for the view, `ralph status --all` and the dashboard, and lands the finished ones one at a
//! time per repository. If the fleet process dies the loops go on.

pub mod rows;
