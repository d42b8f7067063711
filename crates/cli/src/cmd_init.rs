//! `ralph init`: a commented RALPH_TASK.md and the `.ralph/` scaffolding.

use anyhow::anyhow;
use ralph_loop::task::TaskFile;
use ralph_protocol::{Workspace, write_atomic};

use crate::args::InitArgs;
use crate::locate::project_root;
use crate::{CmdResult, Failure};

/// The commented example every new task file starts from.
pub const EXAMPLE: &str = include_str!("../../../RALPH_TASK.md.example");

/// The `task:` of [`EXAMPLE`]: a task file that still says it was never edited.
const EXAMPLE_TASK: &str = "Add a --json flag to `todo list` so scripts can read the task list";

/// What is still the example `ralph init` wrote in `task` (at `shown`, the path as the user
/// gave it), which no agent should be let loose on in a real repository: its made-up `task:`,
/// or any of its checkboxes, left behind when only `task:` was edited. The error that says
/// which and where, or `None` when the task is the user's own.
pub fn example_left(task: &TaskFile, shown: &std::path::Path) -> Option<String> {
    if task.task == EXAMPLE_TASK {
        return Some(format!(
            "{} is still the example: describe your task. Write what the agent should do in `task:` and its criteria as the checkboxes below it, then run again",
            shown.display()
        ));
    }
    let example = TaskFile::parse(std::path::Path::new("RALPH_TASK.md"), EXAMPLE.as_bytes())
        .map(|t| t.criteria)
        .unwrap_or_default();
    let left: Vec<_> = task
        .criteria
        .iter()
        .filter(|c| example.iter().any(|e| e.text == c.text))
        .collect();
    let first = left.first()?;
    let more = match left.len() - 1 {
        0 => String::new(),
        1 => " and 1 more".into(),
        n => format!(" and {n} more"),
    };
    Some(format!(
        "{}:{}: still the example's criterion \"{}\"{more}: these are `ralph init`'s made-up task, and the agent would work on them. Replace the example's checkboxes with your own criteria, then run again",
        shown.display(),
        first.line,
        first.text
    ))
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
            "{}: is a directory, not a task file; ralph init will not replace it, even with --force. Move or rename it, then run `{}` again.",
            task.display(),
            crate::command_in(&root, "init")
        )));
    }
    if existing.is_some() && !args.force {
        return Err(Failure::failed(anyhow!(
            "{}: already exists; ralph init will not overwrite it. Edit it, or run `{} --force` to start from the example again.",
            task.display(),
            crate::command_in(&root, "init")
        )));
    }
    let ws = Workspace::new(&root);
    ws.ensure().map_err(Failure::usage)?;
    // A `.ralph/` from before ralph wrote one, or made by hand.
    ws.ensure_gitignore()?;
    write_atomic(&task, EXAMPLE.as_bytes())?;
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
            write_atomic(&path, text.as_bytes())?;
        }
    }
    outln!(
        "Wrote {} and {}/.\nNext: edit the task and its criteria, then run `{run} --agent-cmd \"your-agent\"` (or `{run} --agent claude`).",
        task.display(),
        ws.dir().display(),
        run = crate::command_in(&root, "run"),
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
        let left = example_left(&example, path).unwrap();
        assert!(
            left.starts_with("RALPH_TASK.md is still the example"),
            "{left}"
        );
    }

    /// Issue 34, item 5: with only `task:` edited, the example's five checkboxes became the
    /// criteria, and the agent got them.
    #[test]
    fn the_example_s_criteria_left_behind_are_refused_by_line() {
        let path = std::path::Path::new("RALPH_TASK.md");
        let edited = EXAMPLE.replace(EXAMPLE_TASK, "Fix the flaky login test");
        let task = TaskFile::parse(path, edited.as_bytes()).unwrap();
        let line = edited
            .lines()
            .position(|l| l.starts_with("- [ ] "))
            .unwrap()
            + 1;
        let left = example_left(&task, path).unwrap();
        assert!(
            left.starts_with(&format!(
                "RALPH_TASK.md:{line}: still the example's criterion \"todo list --json prints a JSON array of all items\" and 4 more"
            )),
            "{left}"
        );

        // One left is one too many; none left, and the task is the user's.
        let mut own = edited.clone();
        for l in edited.lines().filter(|l| l.starts_with("- [ ] ")).skip(1) {
            own = own.replace(l, "- [ ] the login test passes 100 times in a row");
        }
        let one = example_left(&TaskFile::parse(path, own.as_bytes()).unwrap(), path).unwrap();
        assert!(one.contains("all items\": these are"), "{one}");
        let first = edited.lines().find(|l| l.starts_with("- [ ] ")).unwrap();
        let own = own.replace(first, "- [ ] no sleep() in the test");
        assert_eq!(
            example_left(&TaskFile::parse(path, own.as_bytes()).unwrap(), path),
            None
        );
    }
}
