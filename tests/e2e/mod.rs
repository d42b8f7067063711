mod util;

mod bad_tasks;
mod loop_basics;
mod processes;
mod questions;
mod resume;
mod tui;
