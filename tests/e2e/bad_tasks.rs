//! Every bad task file in `fixtures/bad-tasks/` is refused with exit 2, file:line, and no writes.

use super::util::*;

#[test]
fn every_bad_task_file_exits_2_with_file_and_line_and_writes_nothing() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/bad-tasks");
    let mut cases = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "md") {
            continue;
        }
        cases += 1;
        let p = Project::new();
        std::fs::copy(&path, p.path("RALPH_TASK.md")).unwrap();
        let run = p.exec(&["run", "--no-tui", "--agent-cmd", "true"]);
        assert_eq!(run.code, Some(2), "{}: {}", path.display(), run.stderr);
        assert!(
            run.stderr.contains("RALPH_TASK.md:"),
            "{}: the message names the file and line: {}",
            path.display(),
            run.stderr
        );
        assert!(
            !p.exists(".ralph"),
            "{}: nothing may be written",
            path.display()
        );
    }
    assert!(cases >= 40, "only {cases} cases in {}", dir.display());
}

#[test]
fn a_missing_task_file_says_how_to_make_one() {
    let p = Project::new();
    let run = p.exec(&["run", "--agent-cmd", "true"]);
    run.expect_code(2);
    assert!(run.stderr.contains("ralph init"), "{}", run.stderr);
    assert!(!p.exists(".ralph"));
}

#[test]
fn a_bad_flag_value_exits_2_and_writes_nothing() {
    let p = Project::with_task("task: x", "- [ ] x\n");
    let run = p.exec(&[
        "run",
        "--agent-cmd",
        "true",
        "--question-timeout",
        "5 minutes",
    ]);
    run.expect_code(2);
    assert!(run.stderr.contains("--question-timeout"), "{}", run.stderr);
    assert!(!p.exists(".ralph"));
}

#[test]
fn flags_are_held_to_the_limits_of_the_keys_they_override() {
    // `max_iterations: 0` or over 1,000,000 and `iteration_timeout: 0` are refused in the task
    // file; the flags that override them are refused the same way, before anything is written.
    let p = Project::with_task("task: x", "- [ ] x\n");
    for (flag, value, says) in [
        ("--max-iterations", "0", "not in 1..=1000000"),
        ("--max-iterations", "-1", "not in 1..=1000000"),
        ("--max-iterations", "1000001", "not in 1..=1000000"),
        ("--max-iterations", "4294967295", "not in 1..=1000000"),
        ("--iteration-timeout", "0", "longer than 0"),
        ("--iteration-timeout", "0s", "longer than 0"),
    ] {
        let run = p.exec(&["run", "--agent-cmd", "true", flag, value]);
        run.expect_code(2);
        assert!(run.stderr.contains(flag), "{flag} {value}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{flag} {value}: {}", run.stderr);
        assert!(!p.exists(".ralph"), "{flag} {value}");
    }
}

#[test]
fn a_run_refused_before_it_starts_still_shows_the_task_files_warnings() {
    // A misspelt key can be why the run is refused: `agent_cmd:` is not `agent:`, so no
    // agent is set, and none is installed on this PATH.
    let p = Project::with_task("task: x\nagent_cmd: my-agent --yes", "- [ ] x\n");
    let empty = tempfile::tempdir().unwrap();
    let out = p
        .ralph()
        .args(["run", "--no-tui"])
        .env("PATH", empty.path())
        .output()
        .unwrap();
    let run = Run::from_output(out);
    run.expect_code(2);
    let warning = run.stderr.find("unknown key 'agent_cmd'");
    let error = run.stderr.find("no agent given");
    assert!(
        warning.is_some() && error.is_some() && warning < error,
        "{}",
        run.stderr
    );
    // Each program detection looks for is named once (`claude` runs two presets).
    assert_eq!(run.stderr.matches("claude, ").count(), 1, "{}", run.stderr);
    assert!(!p.exists(".ralph"));
}
