mod util;

mod bad_tasks;
mod commands;
mod loop_basics;
mod processes;
mod questions;
mod resume;
mod tui;
