//! `ralph demo`, the README's first command: a whole loop with the built-in demo agent.

use std::time::Duration;

use super::util::*;

/// `ralph demo --dir ROOT --no-tui` with `extra` flags.
fn demo(p: &Project, extra: &[&str]) -> std::process::Command {
    let mut cmd = p.ralph();
    cmd.args(["demo", "--no-tui", "--dir"])
        .arg(p.root())
        .args(extra);
    cmd
}

#[test]
fn nobody_answering_the_demo_goes_on_with_its_default_and_ends_done() {
    let p = Project::new();
    let run = Run::finish(
        spawn(demo(&p, &["--question-timeout", "1s"])),
        Duration::from_secs(60),
    );
    run.expect_code(0);
    assert!(run.stdout.contains("Which language"), "{}", run.stdout);
    assert!(
        run.stdout.contains("Nobody answered in time"),
        "{}",
        run.stdout
    );
    // The first DONE is rejected (NOTES.md is still open), the second accepted.
    assert!(run.stdout.contains("DONE rejected"), "{}", run.stdout);
    assert!(run.stdout.contains("DONE accepted"), "{}", run.stdout);
    assert_eq!(
        p.read("greeting.txt"),
        "Welcome to the team! We're glad you're here.\n"
    );
    assert!(p.read("NOTES.md").starts_with("# Notes"));
    assert!(p.read(".ralph/progress.md").contains("ASSUMPTION"));
    assert_eq!(p.state()["status"], "done");
}

#[test]
fn an_answer_from_another_terminal_reaches_the_demo_agent() {
    let p = Project::new();
    let child = spawn(demo(&p, &["--question-timeout", "60s"]));
    p.wait_for_status("waiting_input", Duration::from_secs(30));
    p.exec(&["answer", "2"]).expect_code(0);
    let run = Run::finish(child, Duration::from_secs(60));
    run.expect_code(0);
    assert!(
        run.stdout.contains("The human answered: \"Français\""),
        "{}",
        run.stdout
    );
    assert!(
        p.read("greeting.txt")
            .starts_with("Bienvenue dans l'équipe")
    );
    assert!(p.read(".ralph/clarifications.md").contains("Français"));
}

#[test]
fn the_demo_refuses_a_directory_that_is_not_empty_and_changes_nothing() {
    // Regression: only an existing RALPH_TASK.md stopped it; the user's NOTES.md or
    // greeting.txt were overwritten.
    let p = Project::new();
    p.write("NOTES.md", "my own notes\n");
    let run = Run::finish(spawn(demo(&p, &[])), Duration::from_secs(30));
    run.expect_code(2);
    assert!(run.stderr.contains("is not empty"), "{}", run.stderr);
    assert_eq!(p.read("NOTES.md"), "my own notes\n");
    assert!(!p.exists("RALPH_TASK.md"));
    assert!(!p.exists(".ralph"));
}

#[test]
fn a_bad_question_timeout_for_the_demo_writes_nothing() {
    let p = Project::new();
    let run = Run::finish(
        spawn(demo(&p, &["--question-timeout", "soon"])),
        Duration::from_secs(30),
    );
    run.expect_code(2);
    assert!(run.stderr.contains("--question-timeout"), "{}", run.stderr);
    assert!(!p.exists("RALPH_TASK.md"));
}
