mod util;

mod bad_tasks;
mod browser;
mod commands;
mod crashes;
mod demo;
mod hostile;
mod loop_basics;
mod native;
mod processes;
mod questions;
mod races;
mod remote;
mod resume;
mod telegram;
mod tui;
