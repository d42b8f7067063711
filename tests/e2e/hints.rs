//! Issue 34, item 9: hints ralph printed that were wrong where a user met them. Each is now a
//! command that works as written, or a pointer that exists.

use std::time::Duration;

use super::remote::Broker;
use super::util::*;

/// `ralph ARGS` in `p` with only `bin` on PATH: no agent is installed.
fn without_agents(p: &Project, args: &[&str]) -> Run {
    let bin = p.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let mut cmd = p.ralph();
    cmd.args(args)
        .env("PATH", &bin)
        .env("TERM", "xterm-256color")
        .env_remove("TMUX")
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("DBUS_SESSION_BUS_ADDRESS");
    Run::from_output(cmd.output().unwrap())
}

/// `ralph run --agent demo` is refused outside the demo, yet doctor and agents recommended it;
/// and doctor failed (exit 1) on a machine that runs its agent with --agent-cmd, where nothing
/// is wrong.
#[test]
fn with_no_agent_installed_doctor_passes_and_neither_recommends_agent_demo() {
    let p = Project::new();
    let doctor = without_agents(&p, &["doctor"]);
    doctor.expect_code(0);
    assert!(doctor.stdout.contains("--agent-cmd"), "{}", doctor.stdout);
    assert!(doctor.stdout.contains("`ralph demo`"), "{}", doctor.stdout);
    assert!(
        doctor.stdout.ends_with("No problems found.\n"),
        "{}",
        doctor.stdout
    );
    let agents = without_agents(&p, &["agents"]);
    agents.expect_code(0);
    assert!(agents.stdout.contains("`ralph demo`"), "{}", agents.stdout);
    for out in [&doctor.stdout, &agents.stdout] {
        assert!(!out.contains("--agent demo"), "{out}");
    }
    // An `agent:` that is not installed is still a problem.
    p.write(
        "RALPH_TASK.md",
        "---\ntask: X\nagent: gemini\n---\n- [ ] x\n",
    );
    let doctor = without_agents(&p, &["doctor"]);
    doctor.expect_code(1);
    assert!(doctor.stdout.contains("1 problem:"), "{}", doctor.stdout);
}

/// `ralph status` said `ralph answer -C ... 1`, with a literal `...`.
#[test]
fn status_s_pick_by_number_hint_is_a_command_that_answers() {
    let p = Project::with_task(
        "task: Cache\nmax_iterations: 2\nquestion_timeout: 1m",
        "- [ ] cache\n",
    );
    let agent = p.agent(
        "[iteration 1]\nquestion \"Redis or Memcached?\" --option Redis --option Memcached\nsignal QUESTION\n[iteration 2]\nsave-prompt prompt-2.txt\n",
    );
    let child = p.start(&agent, &[]);
    p.wait_for_status("waiting_input", Duration::from_secs(30));
    let status = p.exec(&["status"]);
    status.expect_code(0);
    let hint = status
        .stdout
        .split("(or pick an option by number: ")
        .nth(1)
        .and_then(|rest| rest.split(")\n").next())
        .unwrap_or_else(|| panic!("{}", status.stdout))
        .to_owned();
    assert!(!hint.contains("..."), "{hint}");
    let answered = Run::from_output(
        std::process::Command::new("sh")
            .args(["-c", &hint.replacen(" 1", " 2", 1)])
            .envs(p.user_env())
            .current_dir("/")
            .output()
            .unwrap(),
    );
    answered.expect_code(0);
    Run::finish(child, Duration::from_secs(30)).expect_code(3);
    assert!(p.read("prompt-2.txt").contains("Memcached"));
}

/// The no-task hint named RALPH_TASK.md.example, a file only ralph's own repository has; so
/// did the fixes for a file without frontmatter or with TOML's.
#[test]
fn the_hints_for_a_missing_or_wrong_task_file_name_no_file_the_user_lacks() {
    let p = Project::new();
    let none = p.exec(&["run", "--no-tui", "--agent-cmd", "true"]);
    none.expect_code(2);
    assert!(none.stderr.contains("ralph init"), "{}", none.stderr);
    for (file, text) in [
        ("no-frontmatter.md", "just words\n"),
        ("toml.md", "+++\ntask = \"x\"\n+++\n"),
    ] {
        p.write(file, text);
        let bad = p.exec(&["run", "--no-tui", "--agent-cmd", "true", "--task", file]);
        bad.expect_code(2);
        assert!(
            !bad.stderr.contains("RALPH_TASK.md.example"),
            "{}",
            bad.stderr
        );
    }
    assert!(
        !none.stderr.contains("RALPH_TASK.md.example"),
        "{}",
        none.stderr
    );
}

/// A demo stopped with Ctrl-C could not be resumed: `ralph run` in its directory found no
/// agent (the demo's was not recorded).
#[test]
fn a_stopped_demo_resumes_with_its_own_agent() {
    let p = Project::new();
    let mut cmd = p.ralph();
    cmd.args(["demo", "--no-tui", "--question-timeout", "60s", "--dir"])
        .arg(p.root());
    let child = spawn(cmd);
    p.wait_for_status("waiting_input", Duration::from_secs(30));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    Run::finish(child, Duration::from_secs(30)).expect_code(130);
    let resumed = p.exec(&["run", "--no-tui", "--question-timeout", "0"]);
    resumed.expect_code(0);
    assert!(
        resumed
            .stderr
            .contains("resuming with demo, the agent this loop started with"),
        "{}",
        resumed.stderr
    );
    assert!(
        resumed.stdout.contains("DONE accepted"),
        "{}",
        resumed.stdout
    );
}

/// `ralph serve pair telegram` without a token printed `[telegram]\ntoken = "..."` with a
/// literal backslash-n.
#[test]
fn pair_telegram_without_a_token_shows_the_two_lines_to_write() {
    let config = tempfile::tempdir().unwrap();
    let broker = Broker::start_with_env(&[], &[("XDG_CONFIG_HOME", config.path())]);
    let out = Run::from_output(
        ralph_in(broker.state.path())
            .args(["serve", "pair", "telegram"])
            .env("XDG_CONFIG_HOME", config.path())
            .output()
            .unwrap(),
    );
    assert_ne!(out.code, Some(0));
    assert!(!out.stderr.contains("\\n"), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("\n    [telegram]\n    token = \"...\"\n"),
        "{}",
        out.stderr
    );
}
