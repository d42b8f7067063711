//! A new user's first day: every command ralph prints for them to copy, run as they would paste
//! it, from the shell they ran ralph in (often another directory than the project's, named with
//! `-C`, and with a space in its name), and what bad input gets.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::util::*;

/// `script` run by `sh -c` in `dir` with `p`'s user directories: a command pasted into the
/// user's shell.
fn pasted(p: &Project, dir: &Path, script: &str) -> Run {
    Run::from_output(
        std::process::Command::new("sh")
            .args(["-c", script])
            .envs(p.user_env())
            .env_remove("RALPH_DIR")
            .env("NO_COLOR", "1")
            .current_dir(dir)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap(),
    )
}

/// `ralph ARGS`, run to the end from the user's shell in `dir`.
fn ralph_from(p: &Project, dir: &Path, args: &[&str]) -> Run {
    Run::from_output(p.ralph().current_dir(dir).args(args).output().unwrap())
}

/// The text between the first backtick after `after` in `text` and the next backtick: a
/// command ralph quoted for the user.
fn quoted_after(text: &str, after: &str) -> String {
    text.split(after)
        .nth(1)
        .and_then(|rest| rest.split('`').nth(1))
        .unwrap_or_else(|| panic!("no `command` after {after:?} in:\n{text}"))
        .to_owned()
}

/// A project directory with a space in its name, inside `p`, and another directory beside it
/// for the user's shell.
fn spaced_project(p: &Project) -> (PathBuf, PathBuf) {
    let root = p.path("my project");
    let elsewhere = p.path("elsewhere");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    (root, elsewhere)
}

/// `ralph run --no-tui` of `agent` in `root`, on a task of `frontmatter` and one checkbox,
/// once its state says `status`.
fn start_in(p: &Project, root: &Path, frontmatter: &str, agent: &str, status: &str) -> Guarded {
    std::fs::write(
        root.join("RALPH_TASK.md"),
        format!("---\n{frontmatter}\n---\n- [ ] x\n"),
    )
    .unwrap();
    let mut run = p.ralph();
    run.current_dir(root)
        .args(["run", "--no-tui", "--agent-cmd", agent]);
    let child = spawn(run);
    wait_until(Duration::from_secs(30), status, || {
        std::fs::read_to_string(root.join(".ralph/state.json"))
            .ok()
            .filter(|s| s.contains(&format!("\"{status}\"")))
    });
    child
}

/// A loop in [`spaced_project`] waiting on the question of `question` (the fake agent's
/// words), whose next prompt goes to `prompt-2.txt`; with the directory beside it.
fn question_waiting(question: &str) -> (Project, PathBuf, PathBuf, Guarded) {
    let p = Project::new();
    let (root, elsewhere) = spaced_project(&p);
    let agent = p.agent(&format!(
        "[iteration 1]\nquestion {question}\nsignal QUESTION\n[iteration 2]\nsave-prompt prompt-2.txt\n"
    ));
    let child = start_in(
        &p,
        &root,
        "task: Cache\nmax_iterations: 2\nquestion_timeout: 1m",
        &agent,
        "waiting_input",
    );
    (p, root, elsewhere, child)
}

/// `ralph init -C DIR` told the user to run `ralph init --force` and `ralph run …`, which act
/// on the shell's directory, not DIR: pasted, the one wrote a task file where none was wanted
/// and the other found none.
#[test]
fn init_s_next_steps_act_on_the_directory_given_with_dash_c() {
    let p = Project::new();
    let (root, elsewhere) = spaced_project(&p);
    let root_arg = root.to_str().unwrap();
    let init = ralph_from(&p, &elsewhere, &["init", "-C", root_arg]);
    init.expect_code(0);
    let next = quoted_after(&init.stdout, "Next:");
    assert!(next.ends_with("--agent-cmd \"your-agent\""), "{next}");

    // The user describes a task, then pastes the command with their agent in it.
    std::fs::write(
        root.join("RALPH_TASK.md"),
        "---\ntask: Write the notes\nmax_iterations: 2\n---\n- [ ] notes\n",
    )
    .unwrap();
    let agent = p.agent("check-all\nsignal DONE\n");
    let run = pasted(
        &p,
        &elsewhere,
        &format!(
            "{} --no-tui",
            next.replace(
                "\"your-agent\"",
                &format!("\"{}\"", agent.replace('"', "\\\""))
            )
        ),
    );
    run.expect_code(0);
    assert!(run.stdout.contains("DONE accepted"), "{}", run.stdout);

    // Run again, init refuses and says how to start over: pasted, it starts over there.
    let again = ralph_from(&p, &elsewhere, &["init", "-C", root_arg]);
    again.expect_code(1);
    let force = quoted_after(&again.stderr, "or run");
    pasted(&p, &elsewhere, &force).expect_code(0);
    assert!(
        std::fs::read_to_string(root.join("RALPH_TASK.md"))
            .unwrap()
            .contains("# RALPH_TASK.md: what the agent should do"),
    );
    assert!(!elsewhere.join("RALPH_TASK.md").exists());

    // In the project itself, the hints stay short.
    let here = ralph_from(&p, &root, &["init"]);
    here.expect_code(1);
    assert!(!here.stderr.contains("-C"), "{}", here.stderr);
}

/// A second `ralph run` in a busy project said which agent it was "switching" to and what its
/// sandbox allowed before it was refused, and its hint, `ralph status -C /my project`, was not
/// quoted: pasted, it looked at `/my`.
#[test]
fn a_second_run_is_refused_first_and_its_commands_work_pasted() {
    let p = Project::new();
    let (root, elsewhere) = spaced_project(&p);
    let agent = p.agent("sleep 60s\n");
    let first = start_in(
        &p,
        &root,
        "task: Wait\nmax_iterations: 2",
        &agent,
        "running",
    );
    let ws = || root.join(".ralph/state.json");

    let second = Run::from_output(
        p.ralph()
            .current_dir(&elsewhere)
            .args(["run", "--no-tui", "--agent-cmd", "true", "-C"])
            .arg(&root)
            .output()
            .unwrap(),
    );
    second.expect_code(1);
    assert!(
        second.stderr.contains("another ralph run (pid"),
        "{}",
        second.stderr
    );
    for said in ["switching agents", "sandbox", "runs as"] {
        assert!(!second.stderr.contains(said), "{}", second.stderr);
    }
    let status = quoted_after(&second.stderr, "doing with");
    let shown = pasted(&p, &elsewhere, &status);
    shown.expect_code(0);
    assert!(shown.stdout.contains("Wait"), "{}", shown.stdout);
    let stop = quoted_after(&second.stderr, "stop it with");
    pasted(&p, &elsewhere, &stop).expect_code(0);
    Run::finish(first, Duration::from_secs(30)).expect_code(130);
    // The refused run changed nothing the first one recorded.
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ws()).unwrap()).unwrap();
    assert_eq!(state["agent_choice"]["command"], agent.as_str());
}

/// `ralph answer -C DIR 7` (a question with two options) said to send the number as text with
/// `ralph answer --as-text 7`, which, pasted in the shell it came from, found no project.
#[test]
fn answer_s_as_text_hint_answers_the_loop_it_was_given() {
    let (p, root, elsewhere, child) =
        question_waiting("\"How many shards?\" --option Two --option Four");
    let out_of_range = Run::from_output(
        p.ralph()
            .current_dir(&elsewhere)
            .args(["answer", "7", "-C"])
            .arg(&root)
            .output()
            .unwrap(),
    );
    out_of_range.expect_code(2);
    let hint = out_of_range
        .stderr
        .split("To answer with the number itself: ")
        .nth(1)
        .unwrap_or_else(|| panic!("{}", out_of_range.stderr))
        .trim()
        .to_owned();
    pasted(&p, &elsewhere, &hint).expect_code(0);
    Run::finish(child, Duration::from_secs(30)).expect_code(3);
    assert!(p.read("my project/prompt-2.txt").contains("> 7\n"));
}

/// The command printed with a question, pasted as it is: `ralph answer -C DIR "your answer"`
/// (the terminal view printed `"…"`) sent the placeholder to the agent as the human's answer.
/// It is refused, nothing is written, and the command it suggests picks an option.
#[test]
fn the_answer_hint_pasted_as_printed_is_refused_not_sent() {
    let (p, root, elsewhere, child) =
        question_waiting("\"Redis or Memcached?\" --option Redis --option Memcached");
    let status = ralph_from(&p, &elsewhere, &["status", "-C", root.to_str().unwrap()]);
    let hint = status
        .stdout
        .lines()
        .map(str::trim)
        .find(|l| l.ends_with(" \"your answer\""))
        .unwrap_or_else(|| panic!("{}", status.stdout))
        .to_owned();
    let pasted_as_is = pasted(&p, &elsewhere, &hint);
    pasted_as_is.expect_code(2);
    assert!(
        pasted_as_is.stderr.contains("stands for your answer"),
        "{}",
        pasted_as_is.stderr
    );
    assert!(!root.join(".ralph/answer.md").exists());
    let pick = pasted_as_is
        .stderr
        .split("pick an option by number: ")
        .nth(1)
        .and_then(|rest| rest.split(". To send").next())
        .unwrap_or_else(|| panic!("{}", pasted_as_is.stderr))
        .to_owned();
    pasted(&p, &elsewhere, &pick).expect_code(0);
    Run::finish(child, Duration::from_secs(30)).expect_code(3);
    let prompt = p.read("my project/prompt-2.txt");
    assert!(prompt.contains("> Redis\n"), "{prompt}");
    assert!(!prompt.contains("your answer"), "{prompt}");
}

/// Three task files that cost a newcomer a whole run: one with no checkbox and no test_command
/// ended "DONE accepted" on the agent's word alone, one whose test_command is not installed
/// rejected every DONE until max_iterations, and one whose `- [] item` was no checkbox was done
/// without it. Each is now said before the first iteration,
/// with the file, line and fix, by `ralph run` and by `ralph doctor` (exit 1).
#[test]
fn a_task_that_cannot_be_checked_is_said_before_the_loop_starts() {
    for (frontmatter, body, line, says) in [
        (
            "task: Tidy up\nmax_iterations: 1",
            "Make it nicer.\n",
            5,
            "nothing checks this task's DONE",
        ),
        (
            "task: Tidy up\nmax_iterations: 1\ntest_command: no-such-test-runner --all",
            "- [x] tidy\n",
            4,
            "test_command runs `no-such-test-runner`, which is not on PATH here",
        ),
        (
            "task: Tidy up\nmax_iterations: 1",
            "- [x] tidy\n- [] and document it\n",
            6,
            "this line looks like a checkbox but is not one, so ralph does not count it as a criterion. Write it as: - [ ] and document it",
        ),
    ] {
        let p = Project::with_task(frontmatter, body);
        let run = p.run("echo '<ralph>DONE</ralph>'", &[]);
        let at = format!(
            "warning: {}:{line}:1: {says}",
            p.path("RALPH_TASK.md").display()
        );
        assert!(run.stderr.contains(&at), "{at}\n{}", run.stderr);
        let doctor = p.exec(&["doctor"]);
        doctor.expect_code(1);
        // The doctor gives the fix a line of its own.
        let what = says.split(". Write it as").next().unwrap();
        assert!(doctor.stdout.contains(what), "{}", doctor.stdout);
        assert!(doctor.stdout.contains("    fix: "), "{}", doctor.stdout);
    }
}

/// `ralph status -C DIR` and `ralph logs -C DIR` in a project no loop has run in said to start
/// one with `ralph run`, which, pasted where they were run, found no task file.
#[test]
fn status_and_logs_say_how_to_start_the_loop_of_the_directory_they_looked_at() {
    let p = Project::new();
    let (root, elsewhere) = spaced_project(&p);
    std::fs::write(
        root.join("RALPH_TASK.md"),
        "---\ntask: Notes\nmax_iterations: 1\n---\n- [x] notes\n",
    )
    .unwrap();
    let root_arg = root.to_str().unwrap();
    let status = ralph_from(&p, &elsewhere, &["status", "-C", root_arg]);
    status.expect_code(0);
    let start = quoted_after(&status.stdout, "Start one with");
    std::fs::create_dir(root.join(".ralph")).unwrap();
    let logs = ralph_from(&p, &elsewhere, &["logs", "-C", root_arg]);
    logs.expect_code(0);
    assert_eq!(quoted_after(&logs.stdout, "start a loop with"), start);
    let run = pasted(
        &p,
        &elsewhere,
        &format!("{start} --no-tui --agent-cmd \"echo '<ralph>DONE</ralph>'\""),
    );
    run.expect_code(0);
    assert!(run.stdout.contains("DONE accepted"), "{}", run.stdout);
}

/// `ralph answer -C DIR --force "…"` with no loop running there said the next `ralph run`
/// delivers it: pasted where it was said, that found no task file.
#[test]
fn guidance_left_from_elsewhere_names_the_run_that_delivers_it() {
    let p = Project::new();
    let (root, elsewhere) = spaced_project(&p);
    std::fs::write(
        root.join("RALPH_TASK.md"),
        "---\ntask: Notes\nmax_iterations: 1\n---\n- [ ] notes\n",
    )
    .unwrap();
    std::fs::create_dir(root.join(".ralph")).unwrap();
    let left = ralph_from(
        &p,
        &elsewhere,
        &[
            "answer",
            "--force",
            "Prefer small commits",
            "-C",
            root.to_str().unwrap(),
        ],
    );
    left.expect_code(0);
    let run = quoted_after(&left.stdout, "the next");
    let agent = p.agent("save-prompt prompt.txt\n");
    pasted(
        &p,
        &elsewhere,
        &format!(
            "{run} --no-tui --agent-cmd \"{}\"",
            agent.replace('"', "\\\"")
        ),
    )
    .expect_code(3);
    assert!(
        p.read("my project/prompt.txt")
            .contains("Prefer small commits")
    );
}

/// A file named `.ralph` in the project: `ralph run` blamed `.ralph/config.toml` ("Not a
/// directory (os error 20)") and `ralph init` said only that it "exists and is not a
/// directory". Both now say what is in the way and what to do, and leave the file as it was.
#[test]
fn a_file_where_ralph_keeps_its_state_is_named_with_the_fix() {
    let p = Project::with_task("task: Notes\nmax_iterations: 1", "- [ ] notes\n");
    p.write(".ralph", "my notes\n");
    let run = p.run("true", &[]);
    let init = p.exec(&["init", "--force"]);
    for (out, code) in [(&run, 1), (&init, 2)] {
        out.expect_code(code);
        assert!(
            out.stderr.contains(&format!(
                "{}: is a file, where ralph keeps this project's state in a directory; move or rename it",
                p.path(".ralph").display()
            )),
            "{}",
            out.stderr
        );
        assert!(!out.stderr.contains("config.toml"), "{}", out.stderr);
    }
    assert_eq!(p.read(".ralph"), "my notes\n");
}

/// A demo stopped with Ctrl-C while its question waited said "the files it made are in DIR:
/// greeting.txt, NOTES.md", which it had not made, and not how to go on.
#[test]
fn a_stopped_demo_says_how_to_go_on_and_the_command_does() {
    let p = Project::new();
    let demo_dir = p.path("demo");
    let mut cmd = p.ralph();
    cmd.args(["demo", "--no-tui", "--question-timeout", "60s", "--dir"])
        .arg(&demo_dir);
    let child = spawn(cmd);
    wait_until(Duration::from_secs(30), "the demo's question", || {
        std::fs::read_to_string(demo_dir.join(".ralph/state.json"))
            .ok()
            .filter(|s| s.contains("\"waiting_input\""))
    });
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let stopped = Run::finish(child, Duration::from_secs(30));
    stopped.expect_code(130);
    assert!(
        !stopped.stdout.contains("greeting.txt, NOTES.md"),
        "{}",
        stopped.stdout
    );
    let go_on = quoted_after(&stopped.stdout, "stopped before it was done");
    let elsewhere = p.path("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let resumed = pasted(
        &p,
        &elsewhere,
        &format!("{go_on} --no-tui --question-timeout 0"),
    );
    resumed.expect_code(0);
    assert!(
        resumed.stdout.contains("DONE accepted"),
        "{}",
        resumed.stdout
    );
}
