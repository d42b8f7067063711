mod util;

mod bad_tasks;
mod commands;
mod conventions;
mod crashes;
mod demo;
mod hostile;
mod loop_basics;
mod native;
mod processes;
mod question_races;
mod questions;
mod races;
mod resume;
mod safety;
mod tui;
