//! `make test` and the developer's own files: the suite runs under tests/untouched-home.sh,
//! which gives it a HOME and XDG directories of its own and fails if ralph's files appear
//! there. These tests prove that check can fail, and that the way tests start ralph passes it.

use std::process::Command;

use super::util::*;

const DONE_AT_ONCE: &str = "[iteration 1]\ncheck-all\nsignal DONE\n";

fn untouched_home() -> Command {
    Command::new(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/untouched-home.sh"))
}

/// Issue 34, item 2: the terminal-view tests ran `ralph run` in tmux with the developer's
/// environment, and their loops joined the developer's registry. The check `make test` runs
/// under catches a run without its own state directory.
#[test]
fn untouched_home_fails_when_a_run_writes_to_the_home_it_was_given() {
    let p = Project::with_task("task: Leak\nmax_iterations: 1", "- [ ] x\n");
    let agent = p.agent(DONE_AT_ONCE);
    let out = Run::from_output(
        untouched_home()
            .arg(ralph_bin())
            .arg("-C")
            .arg(p.root())
            .args(["run", "--no-tui", "--agent-cmd", &agent])
            .output()
            .unwrap(),
    );
    out.expect_code(1);
    assert!(out.stderr.contains(".local/state/ralph"), "{}", out.stderr);
}

#[test]
fn a_run_with_the_test_helpers_environment_leaves_the_home_untouched() {
    let p = Project::with_task("task: Kept apart\nmax_iterations: 1", "- [ ] x\n");
    let agent = p.agent(DONE_AT_ONCE);
    let mut cmd = untouched_home();
    cmd.arg("env");
    for (key, value) in p.user_env() {
        cmd.arg(format!("{key}={}", value.display()));
    }
    let out = Run::from_output(
        cmd.arg(ralph_bin())
            .arg("-C")
            .arg(p.root())
            .args(["run", "--no-tui", "--agent-cmd", &agent])
            .output()
            .unwrap(),
    );
    out.expect_code(0);
    assert_eq!(p.state()["status"], "done");
}

#[test]
fn make_test_runs_the_suite_under_untouched_home() {
    let makefile =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("Makefile"))
            .unwrap();
    let recipe = makefile
        .split("\ntest:")
        .nth(1)
        .and_then(|rest| rest.lines().nth(1))
        .unwrap();
    assert!(
        recipe
            .trim_start()
            .starts_with("tests/untouched-home.sh $(CARGO) test"),
        "{recipe}"
    );
}
