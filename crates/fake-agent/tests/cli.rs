//! Runs the built `ralph-fake-agent` the way ralph does: in a workspace directory, with the
//! prompt on stdin and the `RALPH_*` environment, and checks what it prints, writes and does.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const FAKE: &str = env!("CARGO_BIN_EXE_ralph-fake-agent");
const PROMPT: &str = "You are ralph's agent.\nTASK: build the thing\n";
const TASK: &str = "# Task\n\n- [ ] first\n- [x] already done\n- [ ] second\n- [ ] third\n";

/// A workspace with `.ralph/` and a task file, like the one ralph runs the agent in.
struct Workspace {
    dir: tempfile::TempDir,
}

impl Workspace {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".ralph")).unwrap();
        std::fs::write(dir.path().join("RALPH_TASK.md"), TASK).unwrap();
        Workspace { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    /// The fake, set up as ralph would start it, with `script` as its script.
    fn command(&self, script: &str, iteration: Option<u32>) -> Command {
        let script_path = self.path("script.txt");
        std::fs::write(&script_path, script).unwrap();
        self.command_with(&script_path, iteration)
    }

    /// The fake, set up as ralph would start it, with the script already at `script_path`.
    fn command_with(&self, script_path: &Path, iteration: Option<u32>) -> Command {
        let mut cmd = Command::new(FAKE);
        cmd.arg("--script")
            .arg(script_path)
            .current_dir(self.dir.path());
        // Tests may themselves run under ralph; start from a clean RALPH_* slate.
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("RALPH_") {
                cmd.env_remove(key);
            }
        }
        cmd.env("RALPH_DIR", self.path(".ralph"))
            .env("RALPH_TASK_FILE", self.path("RALPH_TASK.md"))
            .env("RALPH_PROMPT_FILE", self.path(".ralph/prompt.md"));
        if let Some(n) = iteration {
            cmd.env("RALPH_ITERATION", n.to_string());
        }
        cmd
    }

    /// Runs the fake to the end with the prompt on stdin.
    fn run(&self, script: &str, iteration: Option<u32>) -> Output {
        run_with_prompt(self.command(script, iteration))
    }
}

fn run_with_prompt(mut cmd: Command) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A script with no-stdin never reads; the write may then fail, which is fine.
    let _ = child.stdin.take().unwrap().write_all(PROMPT.as_bytes());
    child.wait_with_output().unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Starts the fake in its own process group (as ralph does) and waits for its first line.
fn start_until_first_line(
    ws: &Workspace,
    script: &str,
) -> (Child, BufReader<std::process::ChildStdout>) {
    let mut child = ws
        .command(script, Some(1))
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(
        !line.is_empty(),
        "the fake exited before printing its first line"
    );
    (child, out)
}

fn pid_of(child: &Child) -> Pid {
    Pid::from_raw(child.id() as i32)
}

/// Whether `pid` is a live process (a zombie nobody has reaped yet counts as dead).
fn is_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) if Path::new("/proc/self").exists() => false,
        Err(_) => kill(Pid::from_raw(pid), None).is_ok(),
    }
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn prints_text_and_signals() {
    let ws = Workspace::new();
    let out = ws.run(
        "print hello world\neprint \"to stderr\"\nsignal DONE\n",
        Some(1),
    );
    assert_eq!(stdout(&out), "hello world\n<ralph>DONE</ralph>\n");
    assert_eq!(stderr(&out), "to stderr\n");
    assert!(out.status.success());
}

#[test]
fn print_raw_writes_exact_bytes() {
    let ws = Workspace::new();
    let out = ws.run(r#"print-raw "\e[2J<ralph>DO" \xff\r\n"#, None);
    assert_eq!(out.stdout, b"\x1b[2J<ralph>DO \xff\r\n");
}

#[test]
fn runs_the_section_for_the_iteration() {
    let ws = Workspace::new();
    let script =
        "[iteration 1]\nprint one\n[iteration 2..3]\nprint two-three\n[default]\nprint other\n";
    assert_eq!(stdout(&ws.run(script, Some(1))), "one\n");
    assert_eq!(stdout(&ws.run(script, Some(3))), "two-three\n");
    assert_eq!(stdout(&ws.run(script, Some(4))), "other\n");
}

#[test]
fn no_matching_section_does_nothing_and_exits_0() {
    let ws = Workspace::new();
    let out = ws.run("[iteration 1]\nwrite marker.txt x\n", Some(2));
    assert!(out.status.success());
    assert_eq!(stdout(&out), "");
    assert!(
        stderr(&out).contains("no section for iteration 2"),
        "{}",
        stderr(&out)
    );
    assert!(!ws.path("marker.txt").exists());
}

#[test]
fn call_sections_follow_the_counter() {
    let ws = Workspace::new();
    let script = "[call 1]\nprint first\n[call 2]\nprint second\n[call *]\nprint later\n";
    let counter = ws.path("counter");
    let outputs: Vec<String> = (0..3)
        .map(|_| {
            let mut cmd = ws.command(script, Some(1));
            cmd.env("RALPH_FAKE_COUNTER", &counter);
            stdout(&run_with_prompt(cmd))
        })
        .collect();
    assert_eq!(outputs, ["first\n", "second\n", "later\n"]);
    assert_eq!(ws.read("counter"), "3\n");
}

#[test]
fn concurrent_starts_each_get_their_own_call_number() {
    let ws = Workspace::new();
    let script: String = (1..=8)
        .map(|n| format!("[call {n}]\nprint {n}\n"))
        .collect();
    let counter = ws.path("counter");
    // Written once: rewriting it per start would race with the fakes reading it.
    let script_path = ws.path("script.txt");
    std::fs::write(&script_path, script).unwrap();
    let children: Vec<Child> = (0..8)
        .map(|_| {
            let mut cmd = ws.command_with(&script_path, None);
            cmd.env("RALPH_FAKE_COUNTER", &counter)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut calls: Vec<u32> = children
        .into_iter()
        .map(|c| {
            stdout(&c.wait_with_output().unwrap())
                .trim()
                .parse()
                .unwrap()
        })
        .collect();
    calls.sort();
    assert_eq!(calls, (1..=8).collect::<Vec<_>>());
}

#[test]
fn call_sections_without_a_counter_are_a_usage_error() {
    let ws = Workspace::new();
    let out = ws.run("[call 1]\nprint first\n", Some(1));
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--counter"), "{}", stderr(&out));
}

#[test]
fn unknown_command_names_file_and_line() {
    let ws = Workspace::new();
    let out = ws.run("[default]\nprint fine\n\n# comment\nfoo bar\n", Some(1));
    assert_eq!(out.status.code(), Some(2));
    let script = ws.path("script.txt");
    assert_eq!(
        stderr(&out),
        format!(
            "ralph-fake-agent: {}:5: unknown command 'foo'\n",
            script.display()
        )
    );
    // The whole script is checked before anything runs.
    assert_eq!(stdout(&out), "");
}

#[test]
fn exit_stops_the_script() {
    let ws = Workspace::new();
    let out = ws.run("print before\nexit 7\nprint after\n", Some(1));
    assert_eq!(out.status.code(), Some(7));
    assert_eq!(stdout(&out), "before\n");
}

#[test]
fn writes_files_relative_to_the_workspace() {
    let ws = Workspace::new();
    let script = r#"
        write out/a.txt "line 1\n"
        append out/a.txt line 2
        save-prompt saved/prompt.txt
        save-env saved/env.txt
        copy out/a.txt out/b.txt
    "#;
    assert!(ws.run(script, Some(4)).status.success());
    assert_eq!(ws.read("out/a.txt"), "line 1\nline 2");
    assert_eq!(ws.read("out/b.txt"), "line 1\nline 2");
    assert_eq!(ws.read("saved/prompt.txt"), PROMPT);
    let env = ws.read("saved/env.txt");
    assert!(env.contains("RALPH_ITERATION=4\n"), "{env}");
    assert!(
        env.contains(&format!("RALPH_DIR={}\n", ws.path(".ralph").display())),
        "{env}"
    );
}

#[test]
fn check_ticks_open_boxes_in_the_task_file() {
    let ws = Workspace::new();
    assert!(ws.run("check 2\n", Some(1)).status.success());
    assert_eq!(
        ws.read("RALPH_TASK.md"),
        "# Task\n\n- [ ] first\n- [x] already done\n- [x] second\n- [ ] third\n"
    );
    assert!(ws.run("check-all\n", Some(2)).status.success());
    assert_eq!(
        ws.read("RALPH_TASK.md"),
        "# Task\n\n- [x] first\n- [x] already done\n- [x] second\n- [x] third\n"
    );
    let out = ws.run("check 1\n", Some(3));
    assert_eq!(out.status.code(), Some(96), "no open box is left to tick");
}

#[test]
fn question_writes_question_md() {
    let ws = Workspace::new();
    let script = r#"question "Which DB?" --option Postgres --option SQLite --default SQLite
signal QUESTION"#;
    let out = ws.run(script, Some(1));
    assert_eq!(stdout(&out), "<ralph>QUESTION</ralph>\n");
    assert_eq!(
        ws.read(".ralph/question.md"),
        "---\noptions:\n  - \"Postgres\"\n  - \"SQLite\"\ndefault: \"SQLite\"\n---\nWhich DB?\n"
    );
}

#[test]
fn expectations_fail_with_their_own_exit_codes() {
    let ws = Workspace::new();
    assert!(
        ws.run("expect-prompt-contains \"TASK: build\"\n", Some(1))
            .status
            .success()
    );
    let out = ws.run("expect-prompt-contains nowhere\n", Some(1));
    assert_eq!(out.status.code(), Some(98));
    assert!(stderr(&out).contains("nowhere"));

    let out = ws.run("expect-file .ralph/answer.md\n", Some(1));
    assert_eq!(out.status.code(), Some(97));
    assert!(stderr(&out).contains("answer.md"));
    std::fs::write(ws.path(".ralph/answer.md"), "SQLite").unwrap();
    assert!(
        ws.run("expect-file .ralph/answer.md\n", Some(1))
            .status
            .success()
    );
}

#[test]
fn no_stdin_leaves_the_prompt_unread() {
    let ws = Workspace::new();
    let out = ws.run("no-stdin\nsave-prompt p.txt\n", Some(1));
    assert!(out.status.success());
    assert_eq!(ws.read("p.txt"), "");
}

#[test]
fn flood_writes_exactly_the_bytes_asked_for() {
    let ws = Workspace::new();
    let out = ws.run("flood 1M --line-len 64 --signal-at-end\n", Some(1));
    assert!(out.status.success());
    let text = stdout(&out);
    let (filler, signal) = text.split_at(1 << 20);
    assert_eq!(signal, "<ralph>DONE</ralph>\n");
    assert!(filler.ends_with('\n'));
    assert!(filler.lines().all(|l| l.len() == 63));
    assert!(!filler.contains("<ralph>"));
}

#[test]
fn stream_json_copies_the_file_verbatim() {
    let ws = Workspace::new();
    let events = "{\"type\":\"text\",\"text\":\"hi\"}\n{\"type\":\"result\"}\n";
    std::fs::write(ws.path("events.jsonl"), events).unwrap();
    assert_eq!(
        stdout(&ws.run("stream-json events.jsonl\n", Some(1))),
        events
    );
    let out = ws.run("stream-json events.jsonl --line-delay 1ms\n", Some(1));
    assert_eq!(stdout(&out), events);
}

#[test]
fn run_capture_saves_stdout_and_exit_code() {
    let ws = Workspace::new();
    let out = ws.run(
        r#"run-capture out/cap.txt sh -c "echo captured; exit 3""#,
        Some(1),
    );
    assert!(out.status.success());
    assert_eq!(ws.read("out/cap.txt"), "captured\n");
    assert_eq!(ws.read("out/cap.txt.code"), "3\n");

    let out = ws.run("run definitely-not-a-program-here\n", Some(1));
    assert_eq!(out.status.code(), Some(96));
}

#[test]
fn sigterm_kills_the_fake_by_default() {
    let ws = Workspace::new();
    let (mut child, _out) = start_until_first_line(&ws, "print ready\nhang\n");
    kill(pid_of(&child), Signal::SIGTERM).unwrap();
    assert_eq!(child.wait().unwrap().signal(), Some(Signal::SIGTERM as i32));
}

#[test]
fn ignore_sigterm_survives_sigterm_but_not_sigkill() {
    let ws = Workspace::new();
    let (mut child, _out) = start_until_first_line(&ws, "ignore-sigterm\nprint ready\nhang\n");
    kill(pid_of(&child), Signal::SIGTERM).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "SIGTERM should have been ignored"
    );
    kill(pid_of(&child), Signal::SIGKILL).unwrap();
    assert_eq!(child.wait().unwrap().signal(), Some(Signal::SIGKILL as i32));
}

#[test]
fn grandchild_outlives_the_fake_in_its_process_group() {
    let ws = Workspace::new();
    // ignore-sigterm first: the grandchild must still die of SIGTERM, as a real one would.
    let script = "ignore-sigterm\nspawn-grandchild 60s --quiet\nprint started\n";
    let (mut child, _out) = start_until_first_line(&ws, script);
    let fake_pid = child.id() as i32;
    assert!(child.wait().unwrap().success());

    // The default pid file sits next to .ralph/.
    let pid: i32 = ws.read("grandchild.pid").trim().parse().unwrap();
    assert!(is_alive(pid), "the grandchild should outlive the fake");
    let group = nix::unistd::getpgid(Some(Pid::from_raw(pid))).unwrap();
    assert_eq!(
        group.as_raw(),
        fake_pid,
        "the grandchild should be in the fake's process group"
    );

    kill(Pid::from_raw(pid), Signal::SIGTERM).unwrap();
    wait_until("the grandchild dies of SIGTERM", || !is_alive(pid));
}

#[test]
fn close_stdout_gives_eof_while_the_fake_keeps_running() {
    let ws = Workspace::new();
    let (mut child, mut out) = start_until_first_line(
        &ws,
        "print before\nclose-stdout\nsleep 1s\nprint lost\nwrite after.txt done\n",
    );
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert_eq!(rest, "", "stdout should hit EOF with nothing more");
    assert!(
        child.try_wait().unwrap().is_none(),
        "the fake should still be running"
    );
    assert!(child.wait().unwrap().success());
    assert_eq!(ws.read("after.txt"), "done");
}

#[test]
fn help_prints_the_readme() {
    let out = Command::new(FAKE).arg("--help").output().unwrap();
    assert!(out.status.success());
    assert_eq!(stdout(&out), include_str!("../README.md"));
}

#[test]
fn missing_script_is_a_usage_error() {
    let out = Command::new(FAKE)
        .env_remove("RALPH_FAKE_SCRIPT")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("RALPH_FAKE_SCRIPT"));
}

#[test]
fn fixture_ask_then_done_plays_both_iterations() {
    let ws = Workspace::new();
    let script = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/scripts/ask-then-done.txt"
    ))
    .unwrap();
    let first = ws.run(&script, Some(1));
    assert!(stdout(&first).ends_with("<ralph>QUESTION</ralph>\n"));
    assert!(ws.read(".ralph/question.md").contains("Which database"));

    std::fs::write(ws.path(".ralph/answer.md"), "SQLite\n").unwrap();
    let second = ws.run(&script, Some(2));
    assert!(second.status.success(), "{}", stderr(&second));
    assert!(stdout(&second).ends_with("<ralph>DONE</ralph>\n"));
    assert_eq!(ws.read("answer-seen.md"), "SQLite\n");
    assert!(!ws.read("RALPH_TASK.md").contains("- [ ]"));
}

#[test]
fn fixture_ignore_sigterm_with_grandchild_needs_a_group_sigkill() {
    let ws = Workspace::new();
    let script = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/scripts/ignore-sigterm-with-grandchild.txt"
    ))
    .unwrap();
    let (mut child, mut out) = start_until_first_line(&ws, &script);
    let group = Pid::from_raw(-(child.id() as i32));
    let grandchild: i32 = ws.read("grandchild.pid").trim().parse().unwrap();

    kill(group, Signal::SIGTERM).unwrap();
    wait_until("the grandchild dies of SIGTERM", || !is_alive(grandchild));
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the fake should ignore SIGTERM"
    );

    kill(group, Signal::SIGKILL).unwrap();
    assert_eq!(child.wait().unwrap().signal(), Some(Signal::SIGKILL as i32));
    // Both holders of the pipe are gone, so stdout ends.
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert_eq!(rest, "");
}
