//! Safe from the first run (issue 25): what a newcomer, a hostile agent and a full disk could
//! break, each guarded here by the test named after it.

use std::path::Path;
use std::time::Duration;

use super::util::*;

/// A directory holding an executable `name` that prints nothing and exits 0.
fn fake_program(dir: &Path, name: &str) {
    let path = dir.join(name);
    std::fs::write(&path, "#!/bin/sh\ncat >/dev/null\n").unwrap();
    fake_program_mode(&path);
}

/// Makes `path` executable.
fn fake_program_mode(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Regression (item 1): `ralph init` then `ralph run` started the detected agent, with
/// `--dangerously-skip-permissions`, on the template's made-up task in the user's repository,
/// and nothing said what that agent was allowed to do.
#[test]
fn an_untouched_template_is_refused_and_a_run_says_what_its_agent_may_do() {
    let p = Project::new();
    p.exec(&["init"]).expect_code(0);
    let bin = tempfile::tempdir().unwrap();
    fake_program(bin.path(), "claude");
    let path = format!("{}:/usr/bin:/bin", bin.path().display());
    let run_claude = || {
        let mut cmd = p.ralph();
        cmd.args(["run", "--no-tui", "--max-iterations", "1"])
            .env("PATH", &path);
        Run::from_output(cmd.output().unwrap())
    };
    let refused = run_claude();
    refused.expect_code(2);
    assert!(
        refused
            .stderr
            .contains("RALPH_TASK.md is still the example: describe your task"),
        "{}",
        refused.stderr
    );
    assert!(!p.exists(".ralph/state.json"), "nothing ran");

    // Issue 34, item 5: only `task:` edited, the example's checkboxes stayed and became the
    // agent's criteria. Refused while any of them is left, naming its line.
    let example = p.read("RALPH_TASK.md");
    let half = example.replace(
        "Add a --json flag to `todo list` so scripts can read the task list",
        "Tidy the README",
    );
    p.write("RALPH_TASK.md", &half);
    let refused = run_claude();
    refused.expect_code(2);
    let line = half.lines().position(|l| l.starts_with("- [ ] ")).unwrap() + 1;
    assert!(
        refused.stderr.contains(&format!(
            "RALPH_TASK.md:{line}: still the example's criterion \"todo list --json prints a JSON array of all items\" and 4 more"
        )),
        "{}",
        refused.stderr
    );
    assert!(!p.exists(".ralph/state.json"), "nothing ran");
    p.write(
        "RALPH_TASK.md",
        &with_own_criteria(&half, "the README says how to install"),
    );
    let ran = run_claude();
    ran.expect_code(3);
    let first: Vec<&str> = ran.stderr.lines().take(2).collect();
    assert_eq!(
        first,
        [
            "ralph: no agent given: using claude (Claude Code (`claude -p`, stream-json)), the first found on PATH",
            "ralph: claude runs with --dangerously-skip-permissions: it can run any command and change any file you can, without asking, inside the sandbox below",
        ],
        "{}",
        ran.stderr
    );

    // A command of the user's own: said too, as what it is.
    let agent = p.agent("[iteration *]\nprint ok\n");
    let ran = p.run(&agent, &["--max-iterations", "1"]);
    assert!(
        ran.stderr.starts_with(&format!(
            "ralph: the agent runs as `{agent}`, as you: it can do whatever that command allows itself"
        )),
        "{}",
        ran.stderr
    );
}

/// Regression (item 2): the "no agent found" error suggested `--agent demo` to try ralph; in
/// a real project the demo agent ticked the project's real checkboxes, wrote its files and
/// reported DONE.
#[test]
fn the_demo_agent_works_only_on_the_demo_s_own_task() {
    let body = "- [ ] the real work\n";
    let p = Project::with_task("task: Ship the real thing\nmax_iterations: 2", body);
    let empty = tempfile::tempdir().unwrap();
    let mut cmd = p.ralph();
    cmd.args(["run", "--no-tui"]).env("PATH", empty.path());
    let none = Run::from_output(cmd.output().unwrap());
    none.expect_code(2);
    assert!(none.stderr.contains("run `ralph demo`"), "{}", none.stderr);
    assert!(!none.stderr.contains("--agent demo"), "{}", none.stderr);

    let refused = p.exec(&["run", "--no-tui", "--agent", "demo"]);
    refused.expect_code(2);
    assert!(
        refused
            .stderr
            .contains("the demo agent works only on the demo's own task"),
        "{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains("run `ralph demo`"),
        "{}",
        refused.stderr
    );
    assert!(!p.exists(".ralph"), "nothing written");

    // Named as a command line, it refuses itself and touches nothing.
    let demo = format!("'{}' __demo-agent", ralph_bin().display());
    p.run(&demo, &[]);
    assert!(p.read("RALPH_TASK.md").ends_with(body));
    assert!(!p.exists("greeting.txt") && !p.exists(".ralph/question.md"));
    let err = p.read(".ralph/logs/run-0001-iter-0001.err");
    assert!(err.contains("not the demo's task"), "{err}");
}

/// Regression (item 3): after Ctrl-C (or any stop), a plain `ralph run` forgot the agent the
/// loop had started with: it refused, or, with Claude Code installed, switched agents
/// mid-task.
#[test]
fn a_plain_run_resumes_with_the_agent_the_loop_started_with() {
    let p = Project::with_task(
        "task: Cache\nmax_iterations: 5\nquestion_timeout: 200ms\non_question_timeout: stop",
        "- [ ] cache\n",
    );
    let agent = p.agent(
        "[iteration 1]\nquestion \"Redis or Memcached?\" --option Redis\nsignal QUESTION\n\
         [iteration 2]\nquestion \"Which TTL?\"\nsignal QUESTION\n\
         [iteration 3]\ncheck-all\nsignal DONE\n",
    );
    p.run(&agent, &[]).expect_code(1);
    assert_eq!(p.state()["status"], "stopped");
    assert_eq!(p.state()["agent_choice"]["command"], agent.as_str());

    // Claude Code is installed: a plain run must not switch to it.
    let bin = tempfile::tempdir().unwrap();
    std::fs::write(
        bin.path().join("claude"),
        format!("#!/bin/sh\ntouch '{}'\n", p.path("claude-ran").display()),
    )
    .unwrap();
    fake_program_mode(&bin.path().join("claude"));
    p.exec(&["answer", "Redis"]).expect_code(0);
    let mut cmd = p.ralph();
    cmd.args(["run", "--no-tui"])
        .env("PATH", format!("{}:/usr/bin:/bin", bin.path().display()));
    let resumed = Run::from_output(cmd.output().unwrap());
    resumed.expect_code(1);
    assert!(
        resumed.stderr.starts_with(&format!(
            "ralph: resuming with `{agent}`, the agent this loop started with (recorded in .ralph/state.json); pass --agent or --agent-cmd to change it\n"
        )),
        "{}",
        resumed.stderr
    );
    assert!(!p.exists("claude-ran"), "switched to claude");
    assert_eq!(p.state()["iteration"], 2);

    // Changing it takes a flag, and is said.
    p.exec(&["answer", "60s"]).expect_code(0);
    let other = format!("env {agent}");
    let switched = p.run(&other, &[]);
    switched.expect_code(0);
    assert!(
        switched.stderr.starts_with(&format!(
            "ralph: switching agents: this loop started with `{agent}`; it goes on with `{other}`, as the command line says\n"
        )),
        "{}",
        switched.stderr
    );
    assert_eq!(p.state()["agent_choice"]["command"], other.as_str());
}

/// Regression (item 4): an agent command that was not found failed every iteration at once
/// (`sh: 1: my-agnt: not found`, exit 127) and was retried until the failure limit.
#[test]
fn an_agent_command_that_cannot_start_stops_the_loop_at_once_naming_it() {
    let p = Project::with_task(
        "task: x\nmax_iterations: 20\nmax_consecutive_failures: 10",
        "- [ ] x\n",
    );
    let run = p.run("my-agnt --yes", &[]);
    run.expect_code(2);
    // Started directly (no shell metacharacters), so ralph itself finds no program to run.
    assert!(
        run.stderr.contains(
            "could not start the agent `my-agnt --yes`: no executable `my-agnt` in any directory of PATH"
        ),
        "{}",
        run.stderr
    );
    assert_eq!(p.events_of("iteration_start").len(), 1, "not retried");
    assert_eq!(p.state()["status"], "failed");

    // Found, but not a program: the same, with what is wrong.
    p.write("agent.sh", "echo hi\n");
    let agent = p.path("agent.sh").display().to_string();
    let run = p.run(&agent, &[]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("was found but cannot be run"),
        "{}",
        run.stderr
    );
    assert_eq!(p.state()["status"], "failed");

    // Through `sh` (a metacharacter), the same from sh's exit 127.
    let run = p.run("my-agnt --yes 2>&1", &[]);
    run.expect_code(2);
    assert!(
        run.stdout.contains(
            "the agent's command was not found: `my-agnt` (the first word of `my-agnt --yes 2>&1`; exit 127 from sh)"
        ),
        "{}",
        run.stdout
    );

    // An agent that ran before may exit 127 for its own reasons: an ordinary failure.
    let agent = p.agent("[iteration 1]\nprint working\n[iteration 2..]\nexit 127\n");
    let run = p.run(&agent, &["--max-iterations", "3"]);
    run.expect_code(3);
}

/// Regression (item 5): commands worked only in the project's root. From a subdirectory
/// `ralph answer 1` said no question was waiting and suggested `--force`, which then made a
/// stray `.ralph/` there.
#[test]
fn commands_find_their_loop_upward_and_outside_any_project_the_one_waiting() {
    let task = "---\ntask: Pick\nmax_iterations: 3\nquestion_timeout: 60s\n---\n- [ ] x\n";
    let script = "[iteration 1]\nquestion \"Yes or no?\" --option Yes --option No\nsignal QUESTION\n[iteration 2]\ncheck-all\nsignal DONE\n";
    let a = Project::new();
    a.write("RALPH_TASK.md", task);
    let b = a.beside();
    b.write("RALPH_TASK.md", task);
    let outside = a.beside();
    a.write("src/deep/main.rs", "");
    let in_dir = |p: &Project, dir: &Path, args: &[&str]| {
        Run::from_output(p.ralph().current_dir(dir).args(args).output().unwrap())
    };
    // Outside any project, with no loop waiting: refused, and nothing is made.
    let refused = outside.exec(&["answer", "--force", "hello"]);
    refused.expect_code(1);
    assert!(
        refused.stderr.contains("not inside a project"),
        "{}",
        refused.stderr
    );
    assert!(!outside.exists(".ralph"), "no stray .ralph/");

    let run_a = a.start(&a.agent(script), &[]);
    a.wait_for_status("waiting_input", Duration::from_secs(30));
    let status = in_dir(&a, &a.path("src/deep"), &["status"]);
    status.expect_code(0);
    assert!(
        status
            .stdout
            .starts_with(&format!("{}: WAITING FOR YOUR ANSWER", a.root().display())),
        "{}",
        status.stdout
    );
    // Outside any project, the one loop waiting: acted on, and named.
    let status = outside.exec(&["status"]);
    status.expect_code(0);
    let named = format!(
        "ralph: not inside a project: the one loop waiting for an answer on this machine is in {}",
        a.root().display()
    );
    assert!(status.stderr.starts_with(&named), "{}", status.stderr);
    assert!(status.stdout.contains("Yes or no?"), "{}", status.stdout);

    // Two waiting: listed, not guessed.
    let run_b = b.start(&b.agent(script), &[]);
    b.wait_for_status("waiting_input", Duration::from_secs(30));
    let refused = outside.exec(&["answer", "1"]);
    refused.expect_code(1);
    for p in [&a, &b] {
        let hint = format!("ralph answer -C {} \"your answer\"", p.root().display());
        assert!(refused.stderr.contains(&hint), "{}", refused.stderr);
    }
    let listed = outside.exec(&["status"]);
    listed.expect_code(0);
    assert!(
        listed.stdout.contains(&a.root().display().to_string())
            && listed.stdout.contains(&b.root().display().to_string()),
        "{}",
        listed.stdout
    );

    // From deep inside B: B's loop.
    in_dir(&b, &b.path("src/deep").tap_mkdir(), &["answer", "2"]).expect_code(0);
    Run::finish(run_b, Duration::from_secs(30)).expect_code(0);
    assert!(b.read(".ralph/clarifications.md").contains("No"));
    assert!(!b.exists("src/deep/.ralph"));
    // Now A is the only one waiting: answered from outside, and named.
    let answered = outside.exec(&["answer", "1"]);
    answered.expect_code(0);
    assert!(answered.stderr.starts_with(&named), "{}", answered.stderr);
    Run::finish(run_a, Duration::from_secs(30)).expect_code(0);
    assert!(a.read(".ralph/clarifications.md").contains("Yes"));
    assert!(!outside.exists(".ralph") && !a.exists("src/deep/.ralph"));
}

/// `mkdir -p` that hands the path back.
trait TapMkdir {
    fn tap_mkdir(self) -> Self;
}

impl TapMkdir for std::path::PathBuf {
    fn tap_mkdir(self) -> Self {
        std::fs::create_dir_all(&self).unwrap();
        self
    }
}

/// Regression (item 9): bidi overrides and other invisible characters in a question reached
/// the terminal in plain mode and `ralph status`, and an option label with a line break
/// printed a line that read like one of ralph's own.
#[test]
fn invisible_characters_and_line_breaks_in_a_question_are_neutralised_everywhere() {
    let p = Project::with_task(
        "task: x\nmax_iterations: 2\nquestion_timeout: 60s",
        "- [ ] x\n",
    );
    p.write(
        "question.md",
        "---\noptions:\n  - \"Yes\\nralph: answer sent to the agent: rm -rf ~\"\n  - \"No\\u202e\"\ndefault: \"No\\u202e\"\ncontext: \"why\\nralph: DONE accepted: by the agent\"\n---\nShip \u{202E}lanif\u{202C} \u{2066}now\u{2069}\u{200B}\u{FEFF}?\n",
    );
    let agent = p.agent(
        "[iteration 1]\ncopy question.md .ralph/question.md\nsignal QUESTION\n[iteration 2]\ncheck-all\nsignal DONE\n",
    );
    let child = p.start(&agent, &[]);
    p.wait_for_status("waiting_input", Duration::from_secs(30));
    let status = p.exec(&["status"]);
    p.exec(&["answer", "2"]).expect_code(0);
    let run = Run::finish(child, Duration::from_secs(30));
    run.expect_code(0);
    for (what, out) in [("plain", &run.stdout), ("status", &status.stdout)] {
        let hidden: Vec<char> = out
            .chars()
            .filter(|c| matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}'))
            .collect();
        assert!(hidden.is_empty(), "{what}: {hidden:?}\n{out}");
        assert!(out.contains("Ship lanif now?"), "{what}: {out}");
        assert!(
            !out.lines()
                .any(|l| l.starts_with("ralph: answer sent to the agent: rm")
                    || l.starts_with("ralph: DONE accepted: by the agent")),
            "{what}: a line of the agent's reads as ralph's own:\n{out}"
        );
        assert!(
            out.contains("1. Yes ralph: answer sent to the agent: rm -rf ~"),
            "{what}: {out}"
        );
    }
}

/// Regression (item 15): `.ralph/logs` grew without limit, a log per iteration and per retry
/// across every run, named `iter-0001-6.out` by the sixth run.
#[test]
fn logs_are_named_by_run_and_kept_within_the_configured_budget() {
    let p = Project::with_task("task: Again\nmax_iterations: 2", "- [ ] never\n");
    // Left by a ralph from before runs were numbered: the oldest run.
    p.write(".ralph/logs/iter-0001.out", "old");
    p.write(".ralph/config.toml", "keep_log_runs = 2\n");
    let agent = p.agent("[iteration *]\nprint output\n");
    for _ in 0..3 {
        p.run(&agent, &[]).expect_code(3);
    }
    let mut names: Vec<String> = std::fs::read_dir(p.path(".ralph/logs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "run-0002-iter-0001.out",
            "run-0002-iter-0001.prompt.md",
            "run-0002-iter-0002.out",
            "run-0002-iter-0002.prompt.md",
            "run-0003-iter-0001.out",
            "run-0003-iter-0001.prompt.md",
            "run-0003-iter-0002.out",
            "run-0003-iter-0002.prompt.md",
        ]
    );
    p.write(".ralph/config.toml", "keep_log_runs = 0\n");
    let refused = p.run(&agent, &[]);
    refused.expect_code(2);
    assert!(
        refused.stderr.contains("keep_log_runs must be 1 or more"),
        "{}",
        refused.stderr
    );
}

/// Issue 35: `max_log_mib = 1` still let one iteration write 256 MiB per stream; each stream
/// of an iteration now keeps half the budget at most, and says where it was cut.
#[test]
fn a_small_log_budget_caps_what_one_iteration_writes() {
    let p = Project::with_task("task: Flood\nmax_iterations: 1", "- [ ] never\n");
    p.write(".ralph/config.toml", "max_log_mib = 1\n");
    let agent = p.agent("[iteration 1]\nflood 3M --line-len 200\nprint the end\n");
    p.run(&agent, &[]).expect_code(3);
    let out = std::fs::read(p.path(".ralph/logs/run-0001-iter-0001.out")).unwrap();
    assert!(
        out.len() <= 512 * 1024 + 200,
        "{} bytes kept of one stream under a 1 MiB budget",
        out.len()
    );
    let tail = String::from_utf8_lossy(&out[out.len() - 150..]).into_owned();
    assert!(tail.contains("[ralph: log cut at 524288 bytes"), "{tail}");
}

/// Regression (item 7): swapping `.ralph/logs` for a symlink, or `events.jsonl` for a hard
/// link, while ralph ran made ralph write prompts, output and events into the link's target,
/// outside the workspace: the symlink checks ran only at start-up, and no-follow covered only
/// the last path component. Now each is refused, and the refusal is said.
#[test]
fn a_hostile_agent_cannot_redirect_ralphs_writes_through_links() {
    let outside = tempfile::tempdir().unwrap();
    let precious = outside.path().join("precious");
    std::fs::write(&precious, "precious\n").unwrap();
    let p = Project::with_task("task: x\nmax_iterations: 3", "- [ ] x\n");
    let script = format!(
        "[iteration 1]\nrun ln -f {precious} .ralph/events.jsonl\nprint linked\n\
         [iteration 2]\nrun mv .ralph/logs .ralph/logs-real\nrun ln -s {out} .ralph/logs\nprint swapped\n",
        precious = precious.display(),
        out = outside.path().display()
    );
    // Unsandboxed: the sandbox refuses the hard link to a file outside the project itself
    // (docs/sandbox.md); this is ralph's own defence, for a run without it.
    let run = p.run(&p.agent(&script), &["--no-sandbox"]);
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "precious\n");
    let mut outside_names: Vec<_> = std::fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    outside_names.sort();
    assert_eq!(
        outside_names,
        ["precious"],
        "nothing written through the link"
    );
    assert!(
        run.stderr.contains("events.jsonl: has 2 hard links"),
        "the refusal is said:\n{}",
        run.stderr
    );
    run.expect_code(1);
    assert!(
        run.stderr.contains(".ralph/logs: is a symlink"),
        "{}",
        run.stderr
    );
}

/// Regression (item 13): `ralph ask` printed its "nobody answered, use your default"
/// instruction on stdout, so `ans=$(ralph ask ...)` took the sentence for the answer; and,
/// standalone, it printed nothing while it waited.
#[test]
fn ralph_ask_keeps_stdout_for_the_answer_and_says_on_stderr_that_it_waits() {
    let p = Project::with_task("task: x", "- [ ] x\n");
    let mut cmd = p.ralph();
    cmd.args([
        "ask",
        "Redis or Memcached?",
        "--default",
        "Redis",
        "--timeout",
        "300ms",
    ]);
    let timed_out = Run::finish(spawn(cmd), Duration::from_secs(20));
    timed_out.expect_code(3);
    assert_eq!(
        timed_out.stdout, "",
        "stdout is the answer, and there is none"
    );
    let waiting = timed_out.stderr.lines().next().unwrap_or("");
    assert!(
        waiting.starts_with("ralph ask: waiting for an answer (up to ")
            && waiting.contains("; answer from any terminal with: ")
            // `ralph`, or its full path where it is not on `PATH` (as under `cargo test`).
            && waiting.ends_with(&format!(
                " answer -C {} \"your answer\"",
                p.root().display()
            )),
        "{}",
        timed_out.stderr
    );
    assert!(
        timed_out
            .stderr
            .contains("nobody answered in time; proceed with your default (Redis)"),
        "{}",
        timed_out.stderr
    );

    let mut cmd = p.ralph();
    cmd.args(["ask", "Which port?", "--timeout", "1m"]);
    let asker = spawn(cmd);
    p.wait_for_status("waiting_input", Duration::from_secs(20));
    p.exec(&["answer", "8080"]).expect_code(0);
    let answered = Run::finish(asker, Duration::from_secs(20));
    answered.expect_code(0);
    assert_eq!(answered.stdout, "8080\n");
}

/// Regression (item 10): `ralph answer 1,2` on a single-choice question was sent as the text
/// "1,2" (while `ralph answer 5` was refused), and `ralph answer 99999999999999999999` as
/// text too. Numbers are picks, always; one that picks nothing is refused with the hint.
#[test]
fn numbers_that_pick_no_single_option_are_refused_with_the_as_text_hint() {
    let p = Project::with_task("task: x", "- [ ] x\n");
    let mut cmd = p.ralph();
    cmd.args([
        "ask",
        "Which one?",
        "--option",
        "A",
        "--option",
        "B",
        "--timeout",
        "1m",
    ]);
    let asker = spawn(cmd);
    p.wait_for_status("waiting_input", Duration::from_secs(20));
    for (typed, says) in [
        ("1,2", "the question takes one option, and 1,2 names 2"),
        (
            "99999999999999999999",
            "option 99999999999999999999 is out of range",
        ),
    ] {
        let refused = p.exec(&["answer", typed]);
        refused.expect_code(2);
        assert!(refused.stderr.contains(says), "{}", refused.stderr);
        assert!(
            refused.stderr.contains(&format!(
                " answer -C {} --as-text {typed}",
                p.root().display()
            )),
            "{}",
            refused.stderr
        );
        assert!(!p.exists(".ralph/answer.md"), "{typed}: nothing sent");
    }
    p.exec(&["answer", "--as-text", "1,2"]).expect_code(0);
    let asked = Run::finish(asker, Duration::from_secs(20));
    asked.expect_code(0);
    assert_eq!(asked.stdout, "1,2\n");
}

/// Regression (item 11): a 20 MB `--stdin` answer was accepted in silence, but only its first
/// 1 MiB reached the prompt or `clarifications.md`, and the whole was deleted after the
/// iteration.
#[test]
fn an_answer_over_the_cap_is_refused_with_its_size_and_the_cap() {
    use std::io::Write;
    let p = Project::with_task("task: x", "- [ ] x\n");
    let answer = |bytes: usize| {
        let mut child = p
            .ralph()
            .args(["answer", "--force", "--stdin"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(&vec![b'a'; bytes]);
        });
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap();
        Run::from_output(out)
    };
    let refused = answer(20 * 1024 * 1024);
    refused.expect_code(2);
    assert!(
        refused.stderr.contains(
            "the answer is too long: 20971520 bytes, more than the 16384 bytes an answer may have"
        ),
        "{}",
        refused.stderr
    );
    assert!(!p.exists(".ralph/answer.md"), "nothing sent");
    answer(16_385).expect_code(2);
    answer(16_384).expect_code(0);
    assert!(p.read(".ralph/answer.md").len() > 16_384);
}

/// Regression (item 12): the options picked on a multi-select question were joined with `, `,
/// so two picks read the same as one label with a comma in it. Now one label per line in the
/// prompt and `answer.md`, and `ralph ask --json` lists them.
#[test]
fn multi_select_picks_are_one_label_per_line_and_ralph_ask_json_lists_them() {
    let p = Project::with_task(
        "task: Cache\nmax_iterations: 2\nquestion_timeout: 1m",
        "- [ ] cache\n",
    );
    let agent = p.agent(
        "[iteration 1]\nquestion \"Which caches?\" --option \"Redis, clustered\" --option Memcached --option none --multi-select\nsignal QUESTION\n\
         [iteration 2]\nsave-prompt prompt-2.txt\nrun cp .ralph/answer.md answer-seen.md\n",
    );
    let child = p.start(&agent, &[]);
    p.wait_for_status("waiting_input", Duration::from_secs(30));
    p.exec(&["answer", "1,2"]).expect_code(0);
    Run::finish(child, Duration::from_secs(60)).expect_code(3);
    let prompt = p.read("prompt-2.txt");
    assert!(
        prompt.contains("> Redis, clustered\n> Memcached\n"),
        "{prompt}"
    );
    assert!(
        p.read("answer-seen.md")
            .ends_with("---\nRedis, clustered\nMemcached\n"),
        "{}",
        p.read("answer-seen.md")
    );

    let ask = |answer: &[&str]| {
        let mut cmd = p.ralph();
        cmd.args([
            "ask",
            "Which caches?",
            "--option",
            "Redis, clustered",
            "--option",
            "Memcached",
            "--multi-select",
            "--timeout",
            "1m",
            "--json",
        ]);
        let asker = spawn(cmd);
        p.wait_for_status("waiting_input", Duration::from_secs(20));
        p.exec(&[&["answer"], answer].concat()).expect_code(0);
        let asked = Run::finish(asker, Duration::from_secs(20));
        asked.expect_code(0);
        serde_json::from_str::<serde_json::Value>(&asked.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", asked.stdout))
    };
    assert_eq!(
        ask(&["2 1"]),
        serde_json::json!({
            "answer": "Memcached\nRedis, clustered",
            "picks": ["Memcached", "Redis, clustered"],
            "note": null,
            "answered_by": "ralph-answer",
        })
    );
    assert_eq!(
        ask(&["--option", "1", "with a TTL, please"]),
        serde_json::json!({
            "answer": "Redis, clustered\n\nwith a TTL, please",
            "picks": ["Redis, clustered"],
            "note": "with a TTL, please",
            "answered_by": "ralph-answer",
        })
    );
    assert_eq!(
        ask(&["Redis, Memcached"])["picks"],
        serde_json::json!([]),
        "text that is no label picks nothing"
    );
}

/// Regression (item 14): on a stopped loop `ralph status` showed the question's countdown
/// ("4m 59s left") and "Answer it with", as if a loop were waiting; nobody ran the countdown.
#[test]
fn ralph_status_shows_no_countdown_when_no_loop_runs() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let p = Project::with_task(
        "task: x\nmax_iterations: 1\nquestion_timeout: 5m",
        "- [ ] x\n",
    );
    let agent = p.agent("[iteration 1]\nquestion \"Which port?\"\nsignal QUESTION\n");
    let child = p.start(&agent, &[]);
    p.wait_for_status("waiting_input", Duration::from_secs(30));
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    Run::finish(child, Duration::from_secs(30));
    assert_eq!(p.state()["status"], "stopped");
    let status = p.exec(&["status"]);
    status.expect_code(0);
    let out = &status.stdout;
    assert!(out.contains("Which port?"), "{out}");
    assert!(!out.contains(" left)"), "{out}");
    assert!(!out.contains("Answer it with"), "{out}");
    assert!(
        out.contains("no deadline runs: the loop is not running"),
        "{out}"
    );
    assert!(
        out.contains("An answer reaches the agent when `ralph run` runs again"),
        "{out}"
    );
    let json = p.exec(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(
        v["pending_question"]["seconds_left"],
        serde_json::Value::Null
    );
}

/// Regression (item 14): a second `ralph answer` after the first was delivered was told "no
/// question is waiting", not who answered first.
#[test]
fn a_second_answer_after_delivery_is_told_who_answered_first() {
    let p = Project::with_task(
        "task: x\nmax_iterations: 2\nquestion_timeout: 1m",
        "- [ ] x\n",
    );
    let agent = p.agent(
        "[iteration 1]\nquestion \"Which port?\"\nsignal QUESTION\n[iteration 2]\nsave-prompt prompt-2.txt\n",
    );
    let child = p.start(&agent, &[]);
    p.wait_for_status("waiting_input", Duration::from_secs(30));
    p.exec(&["answer", "8080"]).expect_code(0);
    Run::finish(child, Duration::from_secs(60)).expect_code(3);
    let late = p.exec(&["answer", "9090"]);
    late.expect_code(1);
    assert!(
        late.stderr
            .contains("the question was already answered by `ralph answer` (8080)"),
        "{}",
        late.stderr
    );
}
