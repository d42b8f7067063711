//! The smaller commands: init, status, and the question-timeout policies seen through them.

use std::time::Duration;

use super::util::*;

#[test]
fn init_writes_a_valid_task_file_and_refuses_to_overwrite_it() {
    let p = Project::new();
    p.exec(&["init"]).expect_code(0);
    assert!(p.exists("RALPH_TASK.md"));
    assert!(p.exists(".ralph/progress.md") && p.exists(".ralph/guardrails.md"));
    let again = p.exec(&["init"]);
    again.expect_code(1);
    assert!(again.stderr.contains("--force"), "{}", again.stderr);
    p.write("RALPH_TASK.md", "edited");
    p.exec(&["init", "--force"]).expect_code(0);
    assert_ne!(p.read("RALPH_TASK.md"), "edited");
    // The file it writes is one `ralph run` accepts, once its task and criteria are described.
    let example = p.read("RALPH_TASK.md").replace(
        "Add a --json flag to `todo list` so scripts can read the task list",
        "Add a --json flag to our own tool",
    );
    p.write(
        "RALPH_TASK.md",
        &with_own_criteria(&example, "`tool --json` prints JSON"),
    );
    let agent = p.agent("[iteration *]\nprint ok\n");
    p.run(&agent, &["--max-iterations", "1"]).expect_code(3);
}

/// Regression (issue 25, item 6): `ralph init` left `.ralph/` (the lock, state, logs of all
/// the agent printed, maybe a webhook URL) to be committed by the first `git add -A`.
#[test]
fn init_keeps_ralph_dir_out_of_git_from_the_start() {
    let p = Project::new();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(p.root())
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    git(&["init", "-q"]);
    p.exec(&["init"]).expect_code(0);
    p.write(".ralph/state.json", "{}");
    p.write(
        ".ralph/config.toml",
        "webhook_url = \"https://hooks.example/secret\"\n",
    );
    p.write(".ralph/logs/iter-0001.out", "output");
    let status = git(&["status", "--porcelain", "--untracked-files=all"]);
    assert_eq!(
        status, "?? RALPH_TASK.md\n",
        "only the task file is for git"
    );

    // A `.ralph/` made before, by an older ralph or by hand: init adds the ignore file, and
    // leaves one the user edited alone.
    std::fs::remove_file(p.path(".ralph/.gitignore")).unwrap();
    p.exec(&["init", "--force"]).expect_code(0);
    assert_eq!(git(&["status", "--porcelain"]), "?? RALPH_TASK.md\n");
    p.write(".ralph/.gitignore", "*\n!guardrails.md\n");
    p.exec(&["init", "--force"]).expect_code(0);
    assert_eq!(p.read(".ralph/.gitignore"), "*\n!guardrails.md\n");

    // A `.ralph/` that `ralph run` makes is ignored too.
    let q = Project::with_task("task: x\nmax_iterations: 1", "- [ ] x\n");
    let agent = q.agent("[iteration *]\nprint ok\n");
    q.run(&agent, &[]).expect_code(3);
    assert!(q.read(".ralph/.gitignore").lines().any(|l| l == "*"));
}

#[test]
fn init_refuses_a_directory_in_the_task_file_s_place_and_writes_nothing() {
    let p = Project::new();
    std::fs::create_dir(p.path("RALPH_TASK.md")).unwrap();
    p.write("RALPH_TASK.md/notes.txt", "mine");
    for args in [&["init"][..], &["init", "--force"]] {
        let run = p.exec(args);
        run.expect_code(1);
        assert!(run.stderr.contains("is a directory"), "{}", run.stderr);
        assert!(run.stderr.contains("Move or rename it"), "{}", run.stderr);
    }
    assert_eq!(p.read("RALPH_TASK.md/notes.txt"), "mine");
    assert!(!p.exists(".ralph"), "nothing written");
}

#[test]
fn init_works_with_dash_c() {
    let p = Project::new();
    let sub = p.path("sub");
    std::fs::create_dir(&sub).unwrap();
    Run::from_output(p.ralph().args(["init", "-C"]).arg(&sub).output().unwrap()).expect_code(0);
    assert!(sub.join("RALPH_TASK.md").exists());
}

#[test]
fn status_before_any_run_says_so() {
    let p = Project::new();
    let s = p.exec(&["status"]);
    s.expect_code(0);
    assert!(s.stdout.contains("No loop has run"), "{}", s.stdout);
    let j = p.exec(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&j.stdout).unwrap();
    assert_eq!(v["status"], "none");
    assert!(v["pending_question"].is_null());
}

#[test]
fn status_shows_a_waiting_question_first_with_the_command_that_answers_it() {
    let p = Project::with_task(
        "task: Cache\nmax_iterations: 2\nquestion_timeout: 1m",
        "- [ ] cache\n",
    );
    let agent = p.agent(
        "[iteration 1]\nquestion \"Redis or Memcached?\" --option Redis --option Memcached --default Redis\nsignal QUESTION\n",
    );
    let mut child = p.start(&agent, &[]);
    p.wait_for_status("waiting_input", Duration::from_secs(20));
    let s = p.exec(&["status"]);
    s.expect_code(0);
    let out = &s.stdout;
    assert!(out.contains("WAITING FOR YOUR ANSWER"), "{out}");
    let q = out
        .find("Redis or Memcached?")
        .expect("the question is shown");
    assert!(
        q < out.find("task:").unwrap(),
        "the question comes first: {out}"
    );
    assert!(
        out.contains("1. Redis (default)") && out.contains("2. Memcached"),
        "{out}"
    );
    assert!(out.contains("left"), "time left: {out}");
    // ralph is not on PATH here: the command names it by its path, so it works as printed.
    let answer = format!(
        "{} answer -C",
        std::fs::canonicalize(ralph_bin()).unwrap().display()
    );
    assert!(out.contains(&answer), "{out}");
    let j = p.exec(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&j.stdout).unwrap();
    assert!(v["pending_question"]["seconds_left"].as_u64().unwrap() <= 60);
    assert!(
        v["pending_question"]["answer_command"]
            .as_str()
            .unwrap()
            .starts_with(&answer)
    );
    // What a script adds its answer to, as `status --all --json` gives it.
    assert!(
        !v["pending_question"]["answer_command"]
            .as_str()
            .unwrap()
            .contains("your answer")
    );
    assert!(v["pid"].as_u64().unwrap() > 0);
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn the_stop_policy_saves_the_question_exits_1_and_the_next_run_asks_again() {
    let p = Project::with_task(
        "task: Cache\nmax_iterations: 3\nquestion_timeout: 200ms\non_question_timeout: stop",
        "- [ ] cache\n",
    );
    let agent = p.agent(
        "[iteration 1]\nquestion \"Redis or Memcached?\" --option Redis\nsignal QUESTION\n[iteration 2]\nsave-prompt prompt-2.txt\n",
    );
    let first = p.run(&agent, &[]);
    first.expect_code(1);
    // Regression: it said "the agent goes on with its default" just before stopping.
    assert!(!first.stdout.contains("goes on with"), "{}", first.stdout);
    assert!(
        first
            .stdout
            .contains("the question stays pending for the next `ralph run`"),
        "{}",
        first.stdout
    );
    let state = p.state();
    assert_eq!(state["status"], "stopped");
    assert_eq!(state["pending_question"]["text"], "Redis or Memcached?");
    assert!(p.exists(".ralph/question.md"));

    // The next run shows it again first; this time it is answered.
    let mut cmd = p.ralph();
    cmd.args([
        "run",
        "--no-tui",
        "--agent-cmd",
        &agent,
        "--question-timeout",
        "1m",
    ]);
    let child = spawn(cmd);
    p.wait_for_status("waiting_input", Duration::from_secs(20));
    p.exec(&["answer", "Redis"]).expect_code(0);
    Run::finish(child, Duration::from_secs(30)).expect_code(3);
    assert!(p.read("prompt-2.txt").contains("> Redis"));
}

#[test]
fn the_wait_policy_has_no_deadline() {
    let p = Project::with_task(
        "task: Cache\nmax_iterations: 2\nquestion_timeout: 100ms\non_question_timeout: wait",
        "- [ ] cache\n",
    );
    let agent = p.agent(
        "[iteration 1]\nquestion \"Redis or Memcached?\"\nsignal QUESTION\n[iteration 2]\nsave-prompt prompt-2.txt\n",
    );
    let child = p.start(&agent, &[]);
    let state = p.wait_for_status("waiting_input", Duration::from_secs(20));
    assert!(state["pending_question"]["deadline"].is_null(), "{state}");
    // Well past the 100 ms question_timeout, it still waits.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(p.state()["status"], "waiting_input");
    p.exec(&["answer", "Memcached"]).expect_code(0);
    Run::finish(child, Duration::from_secs(30)).expect_code(3);
    assert!(p.read("prompt-2.txt").contains("> Memcached"));
}

#[test]
fn ralph_config_toml_sets_notifications_and_a_bad_one_is_refused_before_anything_runs() {
    let p = Project::with_task(
        "task: Notify\nmax_iterations: 1\nquestion_timeout: 0",
        "- [ ] x\n",
    );
    p.write(".ralph/config.toml", "\nbell = \"yes\"\n");
    let agent = p.agent("[iteration 1]\nquestion \"Ship?\"\nsignal QUESTION\n");
    let bad = p.run(&agent, &[]);
    bad.expect_code(2);
    assert!(
        bad.stderr.contains("config.toml:2:8:") && bad.stderr.contains("bool"),
        "{}",
        bad.stderr
    );
    assert!(!p.exists(".ralph/state.json"), "nothing written");

    // A misspelt key is a warning with a suggestion, as in the task file; the loop runs.
    p.write(".ralph/config.toml", "notify_comand = \"touch notified\"\n");
    let warned = p.run(&agent, &[]);
    warned.expect_code(3);
    // Shown where the task file's warnings are: on stderr, as the loop's warnings are.
    assert!(
        warned.stderr.contains(
            "config.toml:1:1: unknown key 'notify_comand': did you mean 'notify_command'?"
        ),
        "{}",
        warned.stderr
    );
    assert!(!p.exists("notified"));
    std::fs::remove_dir_all(p.path(".ralph/logs")).unwrap();

    p.write(
        ".ralph/config.toml",
        "notify_command = \"printf '%s' \\\"$RALPH_QUESTION\\\" > notified.txt\"\n",
    );
    p.run(&agent, &[]).expect_code(3);
    let text = wait_until(Duration::from_secs(10), "notified.txt", || {
        std::fs::read_to_string(p.path("notified.txt")).ok()
    });
    assert_eq!(text, "Ship?");
}

#[test]
fn a_reader_gone_away_ends_the_short_commands_quietly() {
    // `ralph status | head -1`: once the reader is gone, the report stops without a panic.
    let p = Project::with_task("task: x", "- [ ] x\n");
    for args in [
        &["status"][..],
        &["init", "--force"],
        &["answer", "--force", "go on"],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = p
            .ralph()
            .args(args)
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    // The answer was saved before it was reported.
    assert!(p.read(".ralph/answer.md").contains("go on"));
}

#[test]
fn a_corrupt_state_file_is_named_with_its_fix_and_its_cause_once() {
    let p = Project::new();
    p.write(".ralph/state.json", "{not json\n");
    for args in [&["status"][..], &["answer", "yes"]] {
        let run = p.exec(args);
        run.expect_code(1);
        assert!(
            run.stderr.contains("state.json: not a ralph state file")
                && run.stderr.contains("delete it to start afresh"),
            "{args:?}: {}",
            run.stderr
        );
        // Regression: the JSON error was printed again after the fix.
        assert_eq!(
            run.stderr.matches("line 1 column 2").count(),
            1,
            "{args:?}: {}",
            run.stderr
        );
    }
    assert_eq!(p.read(".ralph/state.json"), "{not json\n");

    // `ralph run` stops on it too, before its agent starts or anything is written.
    // Regression: it started from iteration 1 and overwrote the file.
    let p = Project::with_task("task: Resume\nmax_iterations: 1", "- [ ] x\n");
    p.write(
        ".ralph/state.json",
        "{\"status\": \"waiting_input\",\n  oops\n",
    );
    let run = p.run(&p.agent("[iteration 1]\nwrite started yes\n"), &[]);
    run.expect_code(1);
    assert!(
        run.stderr.contains("state.json: not a ralph state file")
            && run.stderr.contains("line 2 column 3")
            && run.stderr.contains("Repair it, or delete it"),
        "{}",
        run.stderr
    );
    assert!(!p.exists("started"), "no agent ran");
    assert!(!p.exists(".ralph/progress.md"), "nothing written");
    assert_eq!(
        p.read(".ralph/state.json"),
        "{\"status\": \"waiting_input\",\n  oops\n"
    );
}

#[test]
fn answer_edit_uses_editor_when_visual_is_set_but_empty() {
    // Regression: `VISUAL=` (set, empty) ran an empty command instead of falling back to
    // $EDITOR.
    let p = Project::with_task("task: x", "- [ ] x\n");
    p.write(
        "editor.sh",
        "#!/bin/sh\nprintf 'written in the editor\\n# a comment\\n' > \"$1\"\n",
    );
    let editor = p.path("editor.sh");
    std::fs::set_permissions(&editor, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let run = Run::from_output(
        p.ralph()
            .args(["answer", "--force", "--edit"])
            .env("VISUAL", "")
            .env("EDITOR", &editor)
            .output()
            .unwrap(),
    );
    run.expect_code(0);
    let answer = p.read(".ralph/answer.md");
    assert!(answer.contains("written in the editor"), "{answer}");
    assert!(!answer.contains("a comment"), "{answer}");
}

#[test]
fn a_preset_agent_that_is_not_installed_is_refused_before_anything_runs() {
    // Regression: every iteration failed at once (`sh: codex: not found`), and the loop ran
    // through all of them in milliseconds.
    let p = Project::with_task("task: x\nmax_iterations: 50", "- [ ] x\n");
    let empty = tempfile::tempdir().unwrap();
    let mut cmd = p.ralph();
    cmd.args(["run", "--no-tui", "--agent", "codex"])
        .env("PATH", empty.path());
    let run = Run::from_output(cmd.output().unwrap());
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("agent preset 'codex' runs `codex`, which is not on PATH"),
        "{}",
        run.stderr
    );
    assert!(!p.exists(".ralph"), "nothing written");
}
