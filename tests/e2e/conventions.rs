//! What a CLI user expects around the loop: completions, man pages, `-C` anywhere, "did you
//! mean", `ralph doctor` and `ralph agents`, a user config file, the license.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::util::*;

/// Writes an executable shell script `name` into `dir`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn bash_completion_loads_and_completes_a_subcommand_and_a_flag() {
    let p = Project::new();
    let run = p.exec(&["completions", "bash"]);
    run.expect_code(0);
    p.write("ralph.bash", &run.stdout);
    // What bash does on Tab: the words so far in COMP_WORDS, then the function `complete`
    // registered for `ralph`.
    let complete = |words: &str| {
        let out = Command::new("bash")
            .arg("--norc")
            .arg("-c")
            .arg(format!(
                r#"source ./ralph.bash || exit 9
spec=$(complete -p ralph) || exit 8
fn=$(echo "$spec" | sed -n 's/.*-F \([^ ]*\).*/\1/p')
COMP_WORDS=({words}); COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
COMP_LINE="{words}"; COMP_POINT=${{#COMP_LINE}}
"$fn" ralph "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\n' "${{COMPREPLY[@]}}""#
            ))
            .current_dir(p.root())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let got = complete("ralph do");
    let mut words = got.split_whitespace().collect::<Vec<_>>();
    words.sort_unstable();
    assert_eq!(words, ["docs", "doctor"], "{got}");
    let got = complete("ralph an");
    assert_eq!(
        got.split_whitespace().collect::<Vec<_>>(),
        ["answer"],
        "{got}"
    );
    let got = complete("ralph run --agent-c");
    assert!(got.split_whitespace().any(|w| w == "--agent-cmd"), "{got}");
    // Issue 34, item 17: `--agent <TAB>` offered nothing. The presets, not the demo's (it runs
    // only in `ralph demo`).
    let got = complete("ralph run --agent cl");
    assert_eq!(
        got.split_whitespace().collect::<Vec<_>>(),
        ["claude", "claude-sdk"],
        "{got}"
    );
    let got = complete("ralph run --agent d");
    assert!(got.trim().is_empty(), "{got}");
    // The hidden commands stay hidden.
    let got = complete("ralph __");
    assert!(got.trim().is_empty(), "{got}");
}

#[test]
fn every_shell_gets_a_completion_script() {
    let p = Project::new();
    for (shell, mark) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef ralph"),
        ("fish", "complete -c ralph"),
        ("elvish", "edit:completion:arg-completer[ralph]"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let run = p.exec(&["completions", shell]);
        run.expect_code(0);
        assert!(run.stdout.contains(mark), "{shell}: {}", run.stdout);
        assert!(run.stdout.contains("doctor"), "{shell}");
    }
    let run = p.exec(&["completions", "tcsh"]);
    run.expect_code(2);
    assert!(run.stderr.contains("possible values"), "{}", run.stderr);
}

/// `man -l FILE`, rendered as plain text.
fn render_man(page: &Path) -> String {
    let out = Command::new("man")
        .arg("-l")
        .arg(page)
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .env("MANWIDTH", "100")
        .env("MAN_KEEP_FORMATTING", "0")
        .output()
        .expect("man (man-db) is installed: .ci/run installs it");
    assert!(out.status.success(), "{out:?}");
    // Bold and underline come as overstrikes (`r\x08r`) when the output is not a terminal.
    let text = String::from_utf8_lossy(&out.stdout);
    let mut plain = String::new();
    for c in text.chars() {
        if c == '\u{8}' {
            plain.pop();
        } else {
            plain.push(c);
        }
    }
    plain
}

#[test]
fn the_man_pages_render_with_man() {
    let p = Project::new();
    let run = p.exec(&["man"]);
    run.expect_code(0);
    p.write("ralph.1", &run.stdout);
    let page = render_man(&p.path("ralph.1"));
    assert!(page.contains("NAME"), "{page}");
    assert!(page.contains("Runs an AI coding agent in a loop"), "{page}");
    for sub in ["doctor", "completions", "answer"] {
        assert!(page.contains(sub), "{sub}: {page}");
    }

    let run = p.exec(&["man", "--out-dir", "pages"]);
    run.expect_code(0);
    assert!(run.stdout.contains("ralph-run.1"), "{}", run.stdout);
    let mut pages: Vec<String> = std::fs::read_dir(p.path("pages"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    pages.sort();
    for want in ["ralph.1", "ralph-run.1", "ralph-answer.1", "ralph-doctor.1"] {
        assert!(pages.iter().any(|p| p == want), "{want}: {pages:?}");
    }
    assert!(!pages.iter().any(|p| p.contains("__")), "hidden: {pages:?}");
    let run_page = render_man(&p.path("pages/ralph-run.1"));
    assert!(run_page.contains("--agent-cmd"), "{run_page}");
}

#[test]
fn dash_c_works_before_the_subcommand_too() {
    let p = Project::with_task("task: t\nmax_iterations: 1", "- [ ] x\n");
    let elsewhere = tempfile::tempdir().unwrap();
    let in_other_dir = |args: &[&str]| {
        let mut cmd = p.ralph();
        cmd.current_dir(elsewhere.path()).args(args);
        Run::from_output(cmd.output().unwrap())
    };
    let root = p.root().to_str().unwrap();
    let before = in_other_dir(&["-C", root, "status"]);
    before.expect_code(0);
    assert!(
        before.stdout.contains("No loop has run in"),
        "{}",
        before.stdout
    );
    let after = in_other_dir(&["status", "-C", root]);
    assert_eq!(before.stdout, after.stdout);
    // `-C` then a relative `-C`: taken from the first, as git does.
    let parent = p.root().parent().unwrap().to_str().unwrap();
    let name = p.root().file_name().unwrap().to_str().unwrap();
    let chained = in_other_dir(&["-C", parent, "status", "-C", name]);
    assert_eq!(before.stdout, chained.stdout);
    let missing = in_other_dir(&["-C", "/nonexistent/ralph-dir", "status"]);
    missing.expect_code(2);
    assert!(
        missing.stderr.contains("no such directory (given with -C)"),
        "{}",
        missing.stderr
    );
    let all = in_other_dir(&["-C", root, "status", "--all"]);
    all.expect_code(2);
}

#[test]
fn a_misspelt_agent_preset_gets_a_suggestion() {
    let p = Project::with_task("task: t\nmax_iterations: 1", "- [ ] x\n");
    let run = p.exec(&["run", "--no-tui", "--agent", "cladue"]);
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("unknown agent preset 'cladue'. Did you mean claude?"),
        "{}",
        run.stderr
    );
    assert!(!p.exists(".ralph"));
}

/// `ralph ARGS` in `p` with `PATH` set to `bin` alone, and the state and config directories in
/// the project, so the machine's own agents and settings stay out.
fn on_path(p: &Project, bin: &Path, args: &[&str]) -> Run {
    let mut cmd = p.ralph();
    cmd.args(args)
        .env("PATH", bin)
        .env("HOME", p.path("home"))
        .env("XDG_CONFIG_HOME", p.path("config"))
        .env("RALPH_STATE_DIR", p.path("state"))
        .env("TERM", "xterm-256color")
        .env_remove("TMUX")
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("DBUS_SESSION_BUS_ADDRESS");
    Run::from_output(cmd.output().unwrap())
}

/// A directory of fake agents that print their version as the real ones do.
fn fake_agents(p: &Project) -> PathBuf {
    let bin = p.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    script(
        &bin,
        "claude",
        r#"[ "$1" = --version ] && echo "2.1.332 (Claude Code)""#,
    );
    script(
        &bin,
        "codex",
        r#"[ "$1" = --version ] && echo "codex-cli 0.171.0""#,
    );
    bin
}

#[test]
fn doctor_with_agents_installed_finds_them_and_no_problem() {
    let p = Project::new();
    let bin = fake_agents(&p);
    let run = on_path(&p, &bin, &["doctor"]);
    run.expect_code(0);
    let out = &run.stdout;
    for want in [
        format!("2.1.332, {}", bin.join("claude").display()),
        format!("0.171.0, {}", bin.join("codex").display()),
        "not installed (`gemini` is not on PATH)".into(),
        "`ralph run` with no --agent runs: claude".into(),
        "--dangerously-bypass-approvals-and-sandbox".into(),
        "TERM: xterm-256color".into(),
        "tmux: not inside tmux".into(),
        format!("state: {}", p.path("state").display()),
        "Broker (ralph serve)\n  none running".into(),
    ] {
        assert!(out.contains(&want), "{want}: {out}");
    }
    assert!(out.ends_with("No problems found.\n"), "{out}");
}

#[test]
fn doctor_with_no_agent_and_tmux_holding_notifications_lists_each_problem_and_fails() {
    let p = Project::new();
    let bin = p.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    // A tmux that keeps passthrough off.
    script(
        &bin,
        "tmux",
        r#"case "$1" in -V) echo "tmux 3.4" ;; show-options) echo off ;; esac"#,
    );
    p.write(
        "config/ralph/config.toml",
        "webhok_url = \"https://h.example/x\"\n",
    );
    let mut cmd = p.ralph();
    cmd.args(["doctor"])
        .env("PATH", &bin)
        .env("HOME", p.path("home"))
        .env("XDG_CONFIG_HOME", p.path("config"))
        .env("RALPH_STATE_DIR", p.path("state"))
        .env("TMUX", "/tmp/tmux-0/default,1,0");
    let run = Run::from_output(cmd.output().unwrap());
    run.expect_code(1);
    let out = &run.stdout;
    assert!(
        out.contains("`ralph run` with no --agent runs: nothing, none is installed"),
        "{out}"
    );
    assert!(out.contains("tmux 3.4, allow-passthrough off"), "{out}");
    assert!(
        out.contains("fix: tmux set -g allow-passthrough on"),
        "{out}"
    );
    assert!(out.contains("did you mean 'webhook_url'?"), "{out}");
    assert!(out.contains("2 problems:"), "{out}");
}

#[test]
fn doctor_reports_a_live_broker_and_ignores_a_dead_ones_lock() {
    let p = Project::new();
    let bin = fake_agents(&p);
    p.write(
        "state/serve.lock",
        &format!(
            r#"{{"pid": {}, "url": "http://127.0.0.1:7777"}}"#,
            std::process::id()
        ),
    );
    let run = on_path(&p, &bin, &["doctor"]);
    run.expect_code(0);
    assert!(
        run.stdout.contains(&format!(
            "running: pid {}, http://127.0.0.1:7777",
            std::process::id()
        )),
        "{}",
        run.stdout
    );
    // A pid that has ended (ours exits at once).
    let gone = Command::new("true").spawn().unwrap();
    let pid = gone.id();
    let _ = { gone }.wait();
    p.write(
        "state/serve.lock",
        &format!(r#"{{"pid": {pid}, "url": "http://x"}}"#),
    );
    let run = on_path(&p, &bin, &["doctor"]);
    run.expect_code(0);
    assert!(run.stdout.contains("none running ("), "{}", run.stdout);
    assert!(
        run.stdout
            .contains(&format!("names pid {pid}, which has ended")),
        "{}",
        run.stdout
    );
}

#[test]
fn agents_lists_every_preset_installed_or_not() {
    let p = Project::new();
    let bin = fake_agents(&p);
    let run = on_path(&p, &bin, &["agents"]);
    run.expect_code(0);
    let line = |name: &str| {
        run.stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name}: {}", run.stdout))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(
        line("claude"),
        format!(
            "claude yes, picked 2.1.332 yes no {}",
            bin.join("claude").display()
        )
    );
    assert_eq!(
        line("claude-sdk"),
        format!(
            "claude-sdk yes 2.1.332 yes yes {}",
            bin.join("claude").display()
        )
    );
    assert_eq!(
        line("codex"),
        format!("codex yes 0.171.0 yes no {}", bin.join("codex").display())
    );
    assert_eq!(line("gemini"), "gemini no - yes no gemini");
    assert!(line("demo").starts_with("demo yes"), "{}", run.stdout);
    assert!(
        run.stdout
            .contains("ralph runs claude, the first installed"),
        "{}",
        run.stdout
    );

    let empty = p.path("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let run = on_path(&p, &empty, &["agents"]);
    run.expect_code(0);
    assert!(run.stdout.contains("None is installed"), "{}", run.stdout);
}

#[test]
fn the_user_config_sits_under_the_task_file_and_ralph_config_over_it() {
    // Three fake agents, each saying who chose it.
    let p = Project::with_task("task: t\nmax_iterations: 1", "- [ ] x\n");
    let says = |who: &str, file: &str| {
        p.write(file, &format!("[iteration 1]\nprint chosen by {who}\n"));
        format!(
            "'{}' --script '{}'",
            fake_agent_bin().display(),
            p.path(file).display()
        )
    };
    let user = says("the user config", "user.txt");
    p.write(
        "config/ralph/config.toml",
        &format!("agent = {user:?}\nbel = false\n"),
    );
    let run_here = || {
        let mut cmd = p.ralph();
        cmd.args(["run", "--no-tui"])
            .env("XDG_CONFIG_HOME", p.path("config"));
        Run::finish(spawn(cmd), std::time::Duration::from_secs(60))
    };
    let run = run_here();
    run.expect_code(3);
    assert!(
        run.stdout.contains("chosen by the user config"),
        "{}",
        run.stdout
    );
    assert!(
        run.stderr
            .contains("ralph/config.toml:2:1: unknown key 'bel': did you mean 'bell'?"),
        "{}",
        run.stderr
    );

    std::fs::remove_dir_all(p.path(".ralph")).unwrap();
    let task = says("the task file", "task.txt");
    p.write(
        "RALPH_TASK.md",
        &format!("---\ntask: t\nmax_iterations: 1\nagent: {task:?}\n---\n- [ ] x\n"),
    );
    let run = run_here();
    assert!(
        run.stdout.contains("chosen by the task file"),
        "{}",
        run.stdout
    );

    std::fs::remove_dir_all(p.path(".ralph")).unwrap();
    let project = says(".ralph/config.toml", "project.txt");
    p.write(".ralph/config.toml", &format!("agent = {project:?}\n"));
    let run = run_here();
    assert!(
        run.stdout.contains("chosen by .ralph/config.toml"),
        "{}",
        run.stdout
    );
}

#[test]
fn the_license_file_is_the_one_cargo_toml_names() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    assert!(manifest.contains("\nlicense = \"MIT\"\n"), "{manifest}");
    assert!(
        !manifest.contains("example.invalid"),
        "a repository that is not real"
    );
    let license = std::fs::read_to_string(root.join("LICENSE")).unwrap();
    assert!(license.starts_with("MIT License\n"), "{license}");
}

/// Runs `openssl ARGS` in `dir`; the test needs it (`.ci/run` installs it).
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl is installed: .ci/run installs it");
    assert!(out.status.success(), "openssl {args:?}: {out:?}");
}

/// A certificate authority of its own (`NAME.pem`, `NAME.key`) in `dir`, as a company's proxy
/// has.
fn make_ca(dir: &Path, name: &str) {
    let (pem, key) = (format!("{name}.pem"), format!("{name}.key"));
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &pem,
            "-days",
            "2",
            "-subj",
            &format!("/CN=ralph test {name}"),
        ],
    );
}

#[test]
fn the_webhook_trusts_the_certificate_authorities_of_the_system_store() {
    let certs = tempfile::tempdir().unwrap();
    let dir = certs.path();
    make_ca(dir, "company-ca");
    make_ca(dir, "other-ca");
    // The server's certificate for 127.0.0.1, signed by company-ca.
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    );
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "company-ca.pem",
            "-CAkey",
            "company-ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "server.ext",
        ],
    );
    // A TLS server that writes what it receives to a file. Its stdin stays open (a pipe
    // nobody writes to): at end of file it would close each connection at once.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let received = dir.join("received.txt");
    let server = Guarded(
        Command::new("openssl")
            .args([
                "s_server",
                "-quiet",
                "-cert",
                "server.pem",
                "-key",
                "server.key",
            ])
            .arg("-accept")
            .arg(format!("127.0.0.1:{port}"))
            .current_dir(dir)
            .stdin(std::process::Stdio::piped())
            .stdout(std::fs::File::create(&received).unwrap())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_until(
        std::time::Duration::from_secs(10),
        "s_server listening",
        || std::net::TcpStream::connect(("127.0.0.1", port)).ok(),
    );

    let run_with_ca = |ca: &str| {
        let p = Project::with_task(
            &format!(
                "task: Hook\nmax_iterations: 2\nquestion_timeout: 0\nwebhook_url: https://127.0.0.1:{port}/hook"
            ),
            "- [ ] x\n",
        );
        // The second iteration gives the webhook's warning time to be shown.
        let agent = p.agent(
            "[iteration 1]\nquestion \"Ship it?\"\nsignal QUESTION\n[iteration 2]\nsleep 2s\n",
        );
        let mut cmd = p.ralph();
        cmd.args(["run", "--no-tui", "--agent-cmd", &agent])
            .env("SSL_CERT_FILE", dir.join(ca))
            .env_remove("SSL_CERT_DIR");
        let run = Run::finish(spawn(cmd), std::time::Duration::from_secs(60));
        run.expect_code(3);
        format!("{}{}", run.stdout, run.stderr)
    };

    // Not trusted: the machine's store holds another CA only.
    let output = run_with_ca("other-ca.pem");
    assert!(
        output.contains(&format!("webhook https://127.0.0.1:{port}/…: "))
            && output.contains("certificate"),
        "{output}"
    );
    assert!(
        !std::fs::read_to_string(&received)
            .unwrap()
            .contains("POST /hook")
    );

    // Trusted once the company's CA is in the store.
    let output = run_with_ca("company-ca.pem");
    assert!(!output.contains("certificate"), "{output}");
    let body = wait_until(std::time::Duration::from_secs(10), "the POST", || {
        let text = std::fs::read_to_string(&received).ok()?;
        text.contains("Ship it?").then_some(text)
    });
    assert!(body.starts_with("POST /hook"), "{body}");
    drop(server);
}

/// Issue 34, item 17: the loop's warnings went to stdout with its output; as git and cargo
/// warn, they go to stderr, so `ralph run > log` still shows them.
#[test]
fn the_loop_s_warnings_go_to_stderr() {
    let p = Project::with_task(
        "task: Warned\nmax_iterations: 1\nmax_iteration: 3",
        "- [ ] x\n",
    );
    let agent = p.agent("[iteration 1]\nprint working\n");
    let run = p.run(&agent, &[]);
    run.expect_code(3);
    assert!(
        run.stderr.contains("ralph: warning: ") && run.stderr.contains("max_iteration"),
        "{}",
        run.stderr
    );
    assert!(!run.stdout.contains("warning"), "{}", run.stdout);
    assert!(run.stdout.contains("working"), "{}", run.stdout);
}

/// Issue 34, item 17: `make demo` in a terminal left cargo's progress bar on the first screen
/// of the demo. Its build shows the lines, not the bar.
#[test]
fn make_demo_builds_without_a_progress_bar() {
    let makefile =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Makefile")).unwrap();
    let recipe: Vec<&str> = makefile
        .split("\ndemo:\n")
        .nth(1)
        .unwrap()
        .lines()
        .take_while(|l| l.starts_with('\t'))
        .collect();
    let build = recipe
        .iter()
        .find(|l| l.contains("$(CARGO) build"))
        .unwrap();
    assert!(
        build.contains("CARGO_TERM_PROGRESS_WHEN=never"),
        "{recipe:?}"
    );
}

/// Issue 34, item 16: the man pages put examples and exit codes under "EXTRA", had no
/// ENVIRONMENT or FILES, and named pages (`ralph-help(1)`, or every subcommand's from the lone
/// `ralph man`) that were not written.
#[test]
fn the_man_pages_have_their_sections_and_name_only_pages_that_exist() {
    let p = Project::new();
    p.exec(&["man", "--out-dir", "pages"]).expect_code(0);
    let written: Vec<String> = std::fs::read_dir(p.path("pages"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let top = render_man(&p.path("pages/ralph.1"));
    for section in [
        "\nCOMMANDS\n",
        "\nEXIT STATUS\n",
        "\nENVIRONMENT\n",
        "\nFILES\n",
        "\nSEE ALSO\n",
    ] {
        assert!(top.contains(section), "{section}: {top}");
    }
    assert!(
        top.contains("RALPH_STATE_DIR") && top.contains("test_command"),
        "{top}"
    );
    let run = render_man(&p.path("pages/ralph-run.1"));
    for section in ["\nEXAMPLES\n", "\nEXIT STATUS\n", "\nSEE ALSO\n"] {
        assert!(run.contains(section), "{section}: {run}");
    }
    assert!(
        run.contains("ralph run --agent claude --question-timeout 30s"),
        "{run}"
    );
    for page in &written {
        let text = std::fs::read_to_string(p.path("pages").join(page)).unwrap();
        assert!(!text.contains("EXTRA"), "{page}");
        for (i, _) in text.match_indices("(1)") {
            let name: String = text[..i]
                .chars()
                .rev()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '\\')
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<String>()
                .replace('\\', "");
            if name.starts_with("ralph") {
                assert!(
                    written.contains(&format!("{name}.1")),
                    "{page} names {name}(1)"
                );
            }
        }
    }
    // Alone, `ralph man` names no other page.
    let alone = p.exec(&["man"]);
    assert!(!alone.stdout.contains("ralph\\-run(1)") && !alone.stdout.contains("ralph-run(1)"));
}
