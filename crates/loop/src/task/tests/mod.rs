//! Tests of the task-file parser: the fixture corpora, generated hostile input, and units.
//!
//! `fixtures/bad-tasks/NAME.md` must fail; `NAME.md.expect` holds one fragment per line that
//! the message must contain (the first is the `:line:column:`). `fixtures/good-tasks/*.md`
//! must parse; `good.rs` checks what each one means. Adding a bad case is adding two files.

mod bad;
mod good;
mod units;

use std::path::{Path, PathBuf};

use super::{TaskError, TaskFile};

/// A fixture directory at the repository root.
fn fixtures(dir: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(dir)
}

/// The `*.md` files of a fixture directory, sorted.
fn markdown_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    files.sort();
    files
}

/// Parses text as a task file named `RALPH_TASK.md`.
fn parse(text: &str) -> Result<TaskFile, TaskError> {
    TaskFile::parse(Path::new("RALPH_TASK.md"), text.as_bytes())
}

/// The error message for text that must not parse.
fn error(text: &str) -> String {
    match parse(text) {
        Ok(task) => panic!("expected an error, parsed {task:?}"),
        Err(e) => e.to_string(),
    }
}
