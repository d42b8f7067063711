//! The demo's own task: the task file `ralph demo` writes, and the one task the demo agent
//! agrees to work on.

use ralph_loop::task::TaskFile;

/// The task file `ralph demo` writes.
pub const DEMO_TASK: &str = r#"---
# The demo's task file. `ralph init` writes a fully commented one for your own projects.
task: Write a greeting for a new teammate into greeting.txt, in the language the human picks
max_iterations: 5
test_command: test -s greeting.txt && grep -q "ralph" NOTES.md
question_timeout: 20s
iteration_timeout: 2m
---
# Demo: a greeting for a new teammate

The loop ends when every box below is checked and `test_command` passes.

- [ ] greeting.txt greets the new teammate in the language the human picked
- [ ] NOTES.md says what was done and why
"#;

/// The `task:` of [`DEMO_TASK`].
const DEMO_TASK_SUMMARY: &str =
    "Write a greeting for a new teammate into greeting.txt, in the language the human picks";

/// Whether `task` is the demo's own: the only task the demo agent works on. Anywhere else it
/// would tick a real project's checkboxes, write its files there and report DONE.
pub fn is_demo_task(task: &TaskFile) -> bool {
    task.task == DEMO_TASK_SUMMARY
}
