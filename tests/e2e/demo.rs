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

#[test]
fn the_commands_the_demo_prints_work_where_ralph_is_not_on_path() {
    // A fresh clone: `ralph` is target/debug/ralph, on no PATH. `ralph -C DIR demo` runs the
    // demo in DIR.
    let p = Project::new();
    let path = "/usr/bin:/bin";
    let mut cmd = p.ralph();
    cmd.arg("-C")
        .arg(p.root())
        .args(["demo", "--no-tui", "--question-timeout", "60s"])
        .current_dir("/")
        .env("PATH", path);
    let child = spawn(cmd);
    p.wait_for_status("waiting_input", Duration::from_secs(30));
    // The answer command `ralph status` prints, run as a user would paste it, from elsewhere.
    let status = Run::from_output(
        p.ralph()
            .args(["status", "--json"])
            .env("PATH", path)
            .output()
            .unwrap(),
    );
    let hint = serde_json::from_str::<serde_json::Value>(&status.stdout).unwrap()
        ["pending_question"]["answer_command"]
        .as_str()
        .unwrap()
        .to_owned();
    let ralph = std::fs::canonicalize(ralph_bin()).unwrap();
    assert!(
        hint.starts_with(&format!("{} answer -C ", ralph.display())),
        "{hint}"
    );
    // The command a script adds its answer to.
    assert!(!hint.contains("your answer"), "{hint}");
    let answer = format!("{hint} 2");
    let sh = |line: &str| {
        Run::from_output(
            std::process::Command::new("sh")
                .args(["-c", line])
                .current_dir("/")
                .envs(p.user_env())
                .env("PATH", path)
                .output()
                .unwrap(),
        )
    };
    sh(&answer).expect_code(0);
    let run = Run::finish(child, Duration::from_secs(60));
    run.expect_code(0);
    // The demo printed that same command, with the question (issue 34, item 9: not before
    // it, when it could only fail), and the answer (option 2) reached its agent.
    let shown = run
        .stdout
        .find(&format!("\n    {hint} \"your answer\"\n"))
        .unwrap_or_else(|| panic!("{hint}\n{}", run.stdout));
    let asked = run.stdout.find("Which language").unwrap();
    assert!(asked < shown, "{}", run.stdout);
    assert_eq!(
        run.stdout.matches(" answer -C ").count(),
        1,
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("The human answered: \"Français\""),
        "{}",
        run.stdout
    );
    // And the command it ends with.
    let try_status = run
        .stdout
        .split("Try `")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap_or_else(|| panic!("{}", run.stdout));
    let status = sh(try_status);
    status.expect_code(0);
    assert!(status.stdout.contains("done"), "{}", status.stdout);
}

#[test]
fn with_ralph_on_path_the_demo_says_ralph() {
    let p = Project::new();
    let bin_dir = tempfile::tempdir().unwrap();
    let bin = bin_dir.path();
    std::os::unix::fs::symlink(ralph_bin(), bin.join("ralph")).unwrap();
    let mut cmd = demo(&p, &["--question-timeout", "0"]);
    cmd.env("PATH", format!("{}:/usr/bin:/bin", bin.display()));
    let run = Run::finish(spawn(cmd), Duration::from_secs(60));
    run.expect_code(0);
    assert!(
        run.stdout.contains("\n    ralph answer -C "),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("Try `ralph status -C "),
        "{}",
        run.stdout
    );
}
