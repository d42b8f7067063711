//! `ralph init`: a commented RALPH_TASK.md and the `.ralph/` scaffolding.

use anyhow::anyhow;
use ralph_loop::task::TaskFile;
use ralph_protocol::workspace::{self, Workspace};

use crate::args::InitArgs;
use crate::locate::project_root;
use crate::{CmdResult, Failure};

/// The commented example every new task file starts from.
pub const EXAMPLE: &str = include_str!("../../../RALPH_TASK.md.example");

/// The `task:` of [`EXAMPLE`]: a task file that still says it was never edited.
const EXAMPLE_TASK: &str = "Add a --json flag to `todo list` so scripts can read the task list";

/// Whether `task` is still the example `ralph init` wrote: its made-up task, which no agent
/// should be let loose on in a real repository.
pub fn is_example(task: &TaskFile) -> bool {
    task.task == EXAMPLE_TASK
}

/// Writes the task file (unless one exists and `--force` is not given) and `.ralph/`.
pub fn run(args: &InitArgs) -> CmdResult {
    let root = project_root(&args.dir.dir)?;
    let task = root.join("RALPH_TASK.md");
    let existing = std::fs::symlink_metadata(&task).ok();
    // Not even with --force: replacing a directory would throw away what is in it. Checked
    // before anything is written. Regression: --force made `.ralph/`, then failed with EISDIR.
    if existing.as_ref().is_some_and(std::fs::Metadata::is_dir) {
        return Err(Failure::failed(anyhow!(
            "{}: is a directory, not a task file; ralph init will not replace it, even with --force. Move or rename it, then run ralph init again.",
            task.display()
        )));
    }
    if existing.is_some() && !args.force {
        return Err(Failure::failed(anyhow!(
            "{}: already exists; ralph init will not overwrite it. Edit it, or run `ralph init --force` to start from the example again.",
            task.display()
        )));
    }
    let ws = Workspace::new(&root);
    ws.ensure().map_err(Failure::usage)?;
    // A `.ralph/` from before ralph wrote one, or made by hand.
    ws.ensure_gitignore()?;
    workspace::write_atomic(&task, EXAMPLE.as_bytes())?;
    for (path, text) in [
        (
            ws.progress(),
            "# Progress\n\nWhat each iteration did, learned and assumed.\n",
        ),
        (
            ws.guardrails(),
            "# Guardrails\n\nRules every iteration must keep.\n",
        ),
    ] {
        if std::fs::symlink_metadata(&path).is_err() {
            workspace::write_atomic(&path, text.as_bytes())?;
        }
    }
    outln!(
        "Wrote {} and {}/.\nNext: edit the task and its criteria, then run `ralph run --agent-cmd \"your-agent\"` (or `ralph run --agent claude`).",
        task.display(),
        ws.dir().display()
    );
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_is_recognised_by_its_task() {
        let path = std::path::Path::new("RALPH_TASK.md");
        let example = TaskFile::parse(path, EXAMPLE.as_bytes()).unwrap();
        assert!(is_example(&example));
        let edited = EXAMPLE.replace(EXAMPLE_TASK, "Fix the flaky login test");
        assert!(!is_example(
            &TaskFile::parse(path, edited.as_bytes()).unwrap()
        ));
    }
}
