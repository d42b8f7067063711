//! The loop's spine: DONE is verified, rejections reach the next prompt, limits hold.

use super::util::*;

const TWO_CRITERIA: &str = "# Work\n\n- [ ] first thing\n- [ ] second thing\n";

#[test]
fn done_with_every_criterion_checked_and_passing_tests_exits_0() {
    let p = Project::with_task(
        "task: Do the work\nmax_iterations: 3\ntest_command: test -f built.txt",
        TWO_CRITERIA,
    );
    let agent =
        p.agent("[iteration 1]\nprint working on it\nwrite built.txt ok\ncheck-all\nsignal DONE\n");
    let run = p.run(&agent, &[]);
    run.expect_code(0);
    assert!(run.stdout.contains("working on it"), "{}", run.stdout);
    assert!(run.stdout.contains("DONE accepted"), "{}", run.stdout);
    assert_eq!(p.state()["status"], "done");
    let events = p.events();
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "signal" && e["signal"] == "DONE")
    );
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "verification" && e["accepted"] == true)
    );
}

#[test]
fn done_with_open_criteria_is_rejected_and_the_next_prompt_says_which() {
    let p = Project::with_task("task: Do the work\nmax_iterations: 3", TWO_CRITERIA);
    let agent = p.agent(
        "[iteration 1]\ncheck 1\nsignal DONE\n\
         [iteration 2]\nsave-prompt prompt-2.txt\ncheck-all\nsignal DONE\n",
    );
    let run = p.run(&agent, &[]);
    run.expect_code(0);
    assert!(run.stdout.contains("DONE rejected"), "{}", run.stdout);
    let prompt = p.read("prompt-2.txt");
    assert!(prompt.contains("Your DONE was not accepted"), "{prompt}");
    assert!(prompt.contains("- [ ] second thing"), "{prompt}");
    assert!(
        !prompt.contains("- [ ] first thing"),
        "a checked criterion is not open: {prompt}"
    );
}

#[test]
fn a_task_file_given_with_task_is_the_one_the_prompt_and_the_rejection_name() {
    let p = Project::new();
    p.write(
        "tasks/cache.md",
        "---\ntask: Add a cache\nmax_iterations: 3\n---\n- [ ] it caches\n",
    );
    let agent = p.agent(
        "[iteration 1]\nsave-prompt prompt-1.txt\nsignal DONE\n\
         [iteration 2]\nsave-prompt prompt-2.txt\ncheck-all\nsignal DONE\n",
    );
    p.run(&agent, &["--task", "tasks/cache.md"]).expect_code(0);
    let first = p.read("prompt-1.txt");
    assert!(
        first.contains("- [ ] it caches (tasks/cache.md line 5)"),
        "{first}"
    );
    assert!(first.contains("check it in tasks/cache.md"), "{first}");
    assert!(
        !first.contains("RALPH_TASK.md"),
        "no such file here: {first}"
    );
    let second = p.read("prompt-2.txt");
    assert!(
        second.contains("1 of 1 criteria in tasks/cache.md is not checked yet"),
        "{second}"
    );
}

#[test]
fn done_with_failing_tests_is_rejected_and_the_next_prompt_carries_the_output_tail() {
    let p = Project::with_task(
        "task: Do the work\nmax_iterations: 3\ntest_command: \"echo 'assertion failed: left == right' >&2; test -f fixed.txt\"",
        "- [ ] it works\n",
    );
    let agent = p.agent(
        "[iteration 1]\ncheck-all\nsignal DONE\n\
         [iteration 2]\nsave-prompt prompt-2.txt\nwrite fixed.txt yes\nsignal DONE\n",
    );
    let run = p.run(&agent, &[]);
    run.expect_code(0);
    let prompt = p.read("prompt-2.txt");
    assert!(prompt.contains("Your DONE was not accepted"), "{prompt}");
    assert!(prompt.contains("exited with status 1"), "{prompt}");
    assert!(
        prompt.contains("assertion failed: left == right"),
        "stderr of the tests is in the tail: {prompt}"
    );
}

#[test]
fn max_iterations_exits_3() {
    let p = Project::with_task(
        "task: Never finishes\nmax_iterations: 2",
        "- [ ] impossible\n",
    );
    let agent = p.agent("[iteration *]\nprint still going\n");
    let run = p.run(&agent, &[]);
    run.expect_code(3);
    assert_eq!(p.state()["status"], "max_iterations");
    assert_eq!(p.state()["iteration"], 2);
    assert!(p.exists(".ralph/logs/run-0001-iter-0002.out"));
    assert!(!p.exists(".ralph/logs/run-0001-iter-0003.out"));
}

#[test]
fn the_max_iterations_flag_overrides_the_task_file() {
    let p = Project::with_task(
        "task: Never finishes\nmax_iterations: 50",
        "- [ ] impossible\n",
    );
    let agent = p.agent("[iteration *]\nprint still going\n");
    p.run(&agent, &["--max-iterations", "1"]).expect_code(3);
    assert_eq!(p.state()["iteration"], 1);
}

#[test]
fn gutter_stops_with_exit_1() {
    let p = Project::with_task("task: Stuck\nmax_iterations: 5", "- [ ] impossible\n");
    let agent = p.agent("[iteration 1]\nprint I cannot reach the database\nsignal GUTTER\n");
    let run = p.run(&agent, &[]);
    run.expect_code(1);
    assert!(run.stdout.contains("GUTTER"), "{}", run.stdout);
    assert_eq!(p.state()["status"], "failed");
}

#[test]
fn a_signal_inside_a_code_block_does_not_count() {
    let p = Project::with_task("task: Careful\nmax_iterations: 1", "- [x] done already\n");
    let agent = p.agent(
        "[iteration 1]\nprint \"Here is how to finish:\"\nprint \"```\"\nprint \"<ralph>DONE</ralph>\"\nprint \"```\"\nprint \"and inline: `<ralph>DONE</ralph>`\"\n",
    );
    p.run(&agent, &[]).expect_code(3);
    assert!(!p.events().iter().any(|e| e["event"] == "signal"));
}

#[test]
fn consecutive_agent_failures_stop_the_loop() {
    let p = Project::with_task(
        "task: Broken agent\nmax_iterations: 10\nmax_consecutive_failures: 2",
        "- [ ] x\n",
    );
    let agent = p.agent("[iteration *]\neprint boom\nexit 4\n");
    let run = p.run(&agent, &[]);
    run.expect_code(1);
    assert!(
        run.stdout.contains("failed 2 times in a row"),
        "{}",
        run.stdout
    );
    assert_eq!(p.state()["iteration"], 2);
}

#[test]
fn the_agent_gets_its_environment_and_the_prompt_on_stdin() {
    let p = Project::with_task("task: Look around\nmax_iterations: 1", "- [ ] look\n");
    let agent = p.agent("[iteration 1]\nsave-env env.txt\nsave-prompt prompt.txt\n");
    p.run(&agent, &[]).expect_code(3);
    let env = p.read("env.txt");
    let root = std::fs::canonicalize(p.root()).unwrap();
    assert!(env.contains("RALPH_ITERATION=1"), "{env}");
    assert!(
        env.contains(&format!("RALPH_DIR={}", root.join(".ralph").display())),
        "{env}"
    );
    assert!(
        env.contains(&format!(
            "RALPH_TASK_FILE={}",
            root.join("RALPH_TASK.md").display()
        )),
        "{env}"
    );
    let prompt_file = env
        .lines()
        .find_map(|l| l.strip_prefix("RALPH_PROMPT_FILE="))
        .expect("RALPH_PROMPT_FILE is set");
    assert_eq!(
        std::fs::read_to_string(prompt_file).unwrap(),
        p.read("prompt.txt")
    );
    let prompt = p.read("prompt.txt");
    assert!(prompt.contains("Look around"));
    assert!(prompt.contains("- [ ] look"));
    assert!(
        prompt.contains("<ralph>DONE</ralph>"),
        "the protocol is taught"
    );
}

#[test]
fn progress_and_guardrails_reach_the_prompt() {
    let p = Project::with_task("task: Remember\nmax_iterations: 2", "- [ ] x\n");
    p.write(".ralph/guardrails.md", "Never touch vendor/.\n");
    let agent = p.agent(
        "[iteration 1]\nappend .ralph/progress.md \"learned: the build needs make\\n\"\n\
         [iteration 2]\nsave-prompt prompt-2.txt\n",
    );
    p.run(&agent, &[]).expect_code(3);
    let prompt = p.read("prompt-2.txt");
    assert!(prompt.contains("learned: the build needs make"), "{prompt}");
    assert!(prompt.contains("Never touch vendor/."), "{prompt}");
}

#[test]
fn a_progress_log_over_a_mebibyte_reaches_the_prompt_by_its_newest_notes() {
    // Regression: the log was cut at 1 MiB from its start, so once it grew past that, every
    // note an iteration appended was left out of every later prompt.
    let p = Project::with_task("task: Remember\nmax_iterations: 2", "- [ ] x\n");
    let old = "iteration 0: an old note, long since acted on\n".repeat(30_000);
    p.write(".ralph/progress.md", &format!("FIRST NOTE\n{old}"));
    let agent = p.agent(
        "[iteration 1]\nappend .ralph/progress.md \"learned: the build needs make\\n\"\n\
         [iteration 2]\nsave-prompt prompt-2.txt\n",
    );
    p.run(&agent, &[]).expect_code(3);
    let prompt = p.read("prompt-2.txt");
    assert!(
        prompt.contains("learned: the build needs make"),
        "the newest note"
    );
    assert!(
        !prompt.contains("FIRST NOTE"),
        "the oldest lines are the ones left out"
    );
    assert!(
        prompt.contains("only its last 1048") && prompt.contains("oldest lines left out"),
        "the agent is told"
    );
    assert!(
        prompt.contains("\n\niteration 0: an old note"),
        "whole lines only"
    );
}

#[test]
fn a_custom_prompt_template_is_used() {
    let p = Project::with_task("task: Templated\nmax_iterations: 1", "- [ ] x\n");
    p.write(
        ".ralph/prompt.md",
        "MY TEMPLATE for {{task}} ({{iteration}}/{{max_iterations}})\n{{criteria}}",
    );
    let agent = p.agent("[iteration 1]\nsave-prompt prompt.txt\n");
    p.run(&agent, &[]).expect_code(3);
    let prompt = p.read("prompt.txt");
    assert!(
        prompt.starts_with("MY TEMPLATE for Templated (1/1)"),
        "{prompt}"
    );
    assert!(prompt.contains("- [ ] x"), "{prompt}");
}

#[test]
fn a_second_run_in_the_same_workspace_refuses_and_names_the_first() {
    let p = Project::with_task("task: Busy\nmax_iterations: 1", "- [ ] x\n");
    let agent = p.agent("[iteration 1]\nhang\n");
    let mut cmd = p.ralph();
    cmd.args(["run", "--no-tui", "--agent-cmd", &agent]);
    let mut first = spawn(cmd);
    p.wait_for_status("running", std::time::Duration::from_secs(20));
    let second = p.run(&agent, &[]);
    second.expect_code(1);
    assert!(
        second.stderr.contains(&format!("pid {}", first.id())),
        "{}",
        second.stderr
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(first.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = first.wait().unwrap();
    assert_eq!(status.code(), Some(130));
}

/// A new run counts from 1 again after a finished one; the earlier run's logs stay, named by run.
#[test]
fn a_second_run_keeps_the_first_runs_logs() {
    let p = Project::with_task("task: Twice\nmax_iterations: 1", "- [ ] never\n");
    let first = p.agent("[iteration 1]\nprint first run\n");
    p.run(&first, &[]).expect_code(3);
    let second = p.agent("[iteration 1]\nprint second run\n");
    p.run(&second, &[]).expect_code(3);
    assert!(
        p.read(".ralph/logs/run-0001-iter-0001.out")
            .contains("first run")
    );
    assert!(
        p.read(".ralph/logs/run-0002-iter-0001.out")
            .contains("second run")
    );
    assert!(p.exists(".ralph/logs/run-0002-iter-0001.prompt.md"));
}

/// Issue 34, item 4: running a task that was already done started again at iteration 1, and an
/// agent that did not say DONE burned every iteration. Done and unchanged, it is not run; a
/// changed task file is a new run, and `--again` runs it anyway.
#[test]
fn a_task_already_done_is_not_run_again_unless_changed_or_asked() {
    let p = Project::with_task("task: Greet\nmax_iterations: 1", "- [ ] greet\n");
    let agent = |name: &str, script: &str| {
        p.write(name, script);
        format!(
            "'{}' --script '{}'",
            fake_agent_bin().display(),
            p.path(name).display()
        )
    };
    let done = agent("done-script.txt", "[iteration 1]\ncheck-all\nsignal DONE\n");
    p.run(&done, &[]).expect_code(0);

    let busy = agent("busy-script.txt", "[iteration 1]\nsave-prompt ran.txt\n");
    let again = p.run(&busy, &[]);
    again.expect_code(0);
    assert!(
        again.stdout.contains("RALPH_TASK.md is already done"),
        "{}",
        again.stdout
    );
    let command = format!("run --again -C {}", p.root().display());
    assert!(again.stdout.contains(&command), "{}", again.stdout);
    assert!(!p.exists("ran.txt"), "the agent was started");
    assert_eq!(p.state()["status"], "done");

    // --again: the agent runs (and, saying nothing, uses up its one iteration).
    p.run(&busy, &["--again"]).expect_code(3);
    assert!(p.exists("ran.txt"));
    std::fs::remove_file(p.path("ran.txt")).unwrap();

    // Done again, then the task changes: a new run, from iteration 1.
    p.run(&done, &[]).expect_code(0);
    let task = p.read("RALPH_TASK.md");
    p.write("RALPH_TASK.md", &format!("{task}- [ ] and say goodbye\n"));
    p.run(&busy, &[]).expect_code(3);
    assert!(p.read("ran.txt").contains("say goodbye"));
}

/// Issue 34, item 13: while `test_command` ran, plain mode said nothing for as long as it
/// took. It says how long the tests have run, with their last line, every 10 s.
#[test]
fn a_long_test_command_shows_its_time_and_last_line() {
    let p = Project::with_task(
        "task: Slow tests\nmax_iterations: 1\ntest_command: echo compiling; sleep 1; echo 'running 3 tests'; sleep 10",
        "- [ ] x\n",
    );
    let agent = p.agent("[iteration 1]\ncheck-all\nsignal DONE\n");
    let run = p.run(&agent, &[]);
    run.expect_code(0);
    assert!(
        run.stdout
            .contains("ralph: the tests have run 10s · running 3 tests\n"),
        "{}",
        run.stdout
    );
    let progress = run.stdout.find("the tests have run").unwrap();
    assert!(progress < run.stdout.find("DONE accepted").unwrap());
}
