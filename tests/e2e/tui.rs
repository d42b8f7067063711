//! The terminal view in a real terminal: `ralph run` inside tmux, driven with `send-keys` and
//! read with `capture-pane`.
//!
//! tmux is required (CI installs it); without it these tests fail and say so rather than skip.

use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::util::*;

pub(super) const ASK_THEN_SAVE: &str = "\
[iteration 1]
print \"I need to choose a cache backend before going on.\"
question \"Should the session cache use **Redis** or *Memcached*?\" --option Redis --option Memcached --default Redis
signal QUESTION
[iteration 2]
save-prompt prompt-2.txt
print \"Using the answer.\"
check-all
signal DONE
";

/// A tmux server of our own (its own socket), killed when dropped, even when the test fails.
pub(super) struct Tmux {
    socket: String,
    /// The socket file, removed after the server (tmux leaves it behind).
    socket_path: Option<String>,
    /// Given to the server when the first command starts it.
    env: Vec<(&'static str, std::path::PathBuf)>,
}

impl Tmux {
    /// Starts a detached 100x30 session running `sh` in `p`'s directory, with `p`'s own
    /// state and XDG directories (the server's environment is its sessions').
    pub(super) fn start(p: &Project) -> Tmux {
        static N: AtomicUsize = AtomicUsize::new(0);
        let socket = format!(
            "ralph-e2e-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        );
        let mut tmux = Tmux {
            socket,
            socket_path: None,
            env: p.user_env(),
        };
        let out = tmux.try_cmd(&[
            "new-session",
            "-d",
            "-x",
            "100",
            "-y",
            "30",
            "-c",
            &p.root().display().to_string(),
            "sh",
        ]);
        let out = match out {
            Ok(out) => out,
            Err(e) => panic!(
                "these tests need tmux, which could not be run ({e}); install it (apt-get install tmux)"
            ),
        };
        assert!(
            out.status.success(),
            "tmux new-session failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        tmux.socket_path = Some(
            tmux.cmd(&["display", "-p", "#{socket_path}"])
                .trim()
                .to_owned(),
        );
        tmux
    }

    pub(super) fn try_cmd(&self, args: &[&str]) -> std::io::Result<Output> {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .env_remove("TMUX")
            .env_remove("RALPH_DIR")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("TERM", "xterm-256color")
            .output()
    }

    pub(super) fn cmd(&self, args: &[&str]) -> String {
        let out = self.try_cmd(args).expect("tmux runs");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Types `text` literally.
    pub(super) fn type_text(&self, text: &str) {
        self.cmd(&["send-keys", "-t", "0", "-l", text]);
    }

    /// Presses a key by tmux name (`Enter`, `C-c`).
    pub(super) fn key(&self, key: &str) {
        self.cmd(&["send-keys", "-t", "0", key]);
    }

    /// What the pane shows.
    pub(super) fn screen(&self) -> String {
        self.cmd(&["capture-pane", "-p", "-t", "0"])
    }

    /// The pane's visible screen and its history.
    pub(super) fn everything(&self) -> String {
        self.cmd(&["capture-pane", "-p", "-t", "0", "-S", "-"])
    }

    /// Waits until the pane shows `needle`, or fails with what it shows.
    pub(super) fn wait_for(&self, needle: &str, limit: Duration) -> String {
        let start = std::time::Instant::now();
        loop {
            let screen = self.everything();
            if screen.contains(needle) {
                return screen;
            }
            assert!(
                start.elapsed() < limit,
                "timed out waiting for {needle:?}; the pane shows:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Checks the terminal is back to normal after ralph exited: line editing and echo on
    /// (`stty`), the cursor shown.
    pub(super) fn assert_sane(&self) {
        assert_eq!(
            self.cmd(&["display", "-p", "-t", "0", "#{cursor_flag}"])
                .trim(),
            "1",
            "the cursor is hidden after exit:\n{}",
            self.screen()
        );
        self.type_text("stty -a > stty.txt; echo stty-done");
        self.key("Enter");
        self.wait_for("\nstty-done", Duration::from_secs(10));
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.try_cmd(&["kill-server"]);
        if let Some(path) = &self.socket_path {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Starts `ralph run` with `agent` and `flags` (none: the terminal view) in the pane; the
/// shell prints the exit code after it.
fn run_ralph(tmux: &Tmux, p: &Project, agent: &str, flags: &str) {
    p.write(
        "run.sh",
        &format!(
            "'{}' run {flags} --agent-cmd \"{agent}\"\necho \"ralph exited: $?\"\n",
            ralph_bin().display()
        ),
    );
    tmux.type_text("sh run.sh");
    tmux.key("Enter");
}

/// A loop in the terminal view (in tmux) whose agent has asked its question, with
/// `question_timeout` set to `timeout`; and the screen once the question shows.
fn asked_in_the_terminal_view(timeout: &str) -> (Project, Tmux, String) {
    let p = Project::with_task(
        &format!("task: Cache\nmax_iterations: 2\nquestion_timeout: {timeout}"),
        "- [ ] cache\n",
    );
    let agent = p.agent(ASK_THEN_SAVE);
    let tmux = Tmux::start(&p);
    run_ralph(&tmux, &p, &agent, "");
    let screen = tmux.wait_for("The agent asks", Duration::from_secs(30));
    (p, tmux, screen)
}

/// The terminal is as it was before ralph ran: the pane is sane and line editing is back.
fn assert_restored(tmux: &Tmux, p: &Project) {
    tmux.assert_sane();
    assert_stty_sane(p);
}

pub(super) fn assert_stty_sane(p: &Project) {
    let stty = p.read("stty.txt");
    let flags: Vec<&str> = stty.split([' ', ';', '\n']).collect();
    assert!(
        flags.contains(&"icanon"),
        "line editing is off after exit:\n{stty}"
    );
    assert!(flags.contains(&"echo"), "echo is off after exit:\n{stty}");
}

#[test]
fn an_answer_typed_in_the_terminal_view_reaches_the_next_iteration() {
    let (p, tmux, screen) = asked_in_the_terminal_view("5m");
    assert!(screen.contains("1. Redis"), "{screen}");
    assert!(screen.contains("left ━"), "no countdown:\n{screen}");
    assert!(screen.contains("Ctrl+C stop"), "no status area:\n{screen}");

    // Half the answer, a resize in the middle of it (the view asks the cursor position
    // again), the other half: nothing typed is lost.
    tmux.type_text("Use Redis, we need ");
    std::thread::sleep(Duration::from_millis(300));
    tmux.cmd(&["resize-window", "-t", "0", "-x", "72", "-y", "24"]);
    std::thread::sleep(Duration::from_millis(300));
    tmux.type_text("pub/sub later");
    let screen = tmux.wait_for("pub/sub later", Duration::from_secs(10));
    assert!(
        screen.contains("Use Redis, we need pub/sub later"),
        "{screen}"
    );
    // Regression: a failed cursor query after the resize left the old viewport's re-flowed
    // title on screen above the new one.
    let visible = tmux.screen();
    assert_eq!(visible.matches("The agent asks").count(), 1, "{visible}");
    tmux.key("Enter");
    let screen = tmux.wait_for("ralph exited: 0", Duration::from_secs(30));
    assert!(
        screen.contains("ralph: answer sent to the agent: Use Redis, we need pub/sub later"),
        "{screen}"
    );
    // The view is gone: only the scrollback remains.
    assert!(!screen.contains("Ctrl+C stop"), "{screen}");

    let prompt = p.read("prompt-2.txt");
    assert!(
        prompt.contains("> Use Redis, we need pub/sub later"),
        "{prompt}"
    );
    assert_restored(&tmux, &p);
}

/// Issue 25, item 14: an answer typed in plain line mode, in the loop's own terminal, was said
/// to be logged as `ralph-answer`. It is the terminal's, in `events.jsonl`, `state.json`'s
/// closed question and `clarifications.md`.
#[test]
fn an_answer_typed_in_plain_mode_is_logged_as_the_terminal_s() {
    let p = Project::with_task(
        "task: Cache\nmax_iterations: 2\nquestion_timeout: 5m",
        "- [ ] cache\n",
    );
    let agent = p.agent(ASK_THEN_SAVE);
    let tmux = Tmux::start(&p);
    run_ralph(&tmux, &p, &agent, "--no-tui");
    tmux.wait_for("Type your answer and press Enter", Duration::from_secs(30));
    tmux.type_text("2");
    tmux.key("Enter");
    tmux.wait_for("ralph exited: 0", Duration::from_secs(30));
    let answers = p.events_of("answer");
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0]["by"], "terminal", "{answers:?}");
    assert_eq!(answers[0]["text"], "Memcached", "{answers:?}");
    assert_eq!(p.state()["closed_questions"][0]["answered_by"], "terminal");
    assert!(
        p.read(".ralph/clarifications.md")
            .contains("**Answer** from the terminal running the loop"),
        "{}",
        p.read(".ralph/clarifications.md")
    );
}

#[test]
fn a_long_burst_of_typing_is_taken_whole_without_waiting_for_another_key() {
    // Regression: crossterm's default input source reads 1 KiB per readiness edge, so a
    // burst longer than that (a paste into a terminal without bracketed paste) stopped after
    // its first KiB until the next key arrived: Enter looked ignored.
    let (p, tmux, _) = asked_in_the_terminal_view("5m");
    let words = ["cache", "redis", "pubsub", "later", "staging", "prod"];
    let burst: String = (0..600)
        .map(|i| words[i * 7 % words.len()])
        .collect::<Vec<_>>()
        .join(" ");
    assert!(burst.len() > 3000);
    tmux.type_text(&burst);
    std::thread::sleep(Duration::from_millis(300));
    tmux.key("Enter");
    tmux.wait_for("ralph exited: 0", Duration::from_secs(30));
    let prompt = p.read("prompt-2.txt");
    let quoted: String = prompt
        .lines()
        .filter_map(|l| l.strip_prefix("> "))
        .collect::<Vec<_>>()
        .join(" ");
    assert!(quoted.contains(&burst), "{prompt}");
}

#[test]
fn an_unanswered_question_in_the_terminal_view_lets_the_loop_go_on() {
    let (p, tmux, _) = asked_in_the_terminal_view("2s");
    let screen = tmux.wait_for("ralph exited: 0", Duration::from_secs(30));
    assert!(
        screen.contains("no answer in time; the agent goes on with its default (Redis)"),
        "{screen}"
    );
    let prompt = p.read("prompt-2.txt");
    assert!(prompt.contains("Your question went unanswered"), "{prompt}");
    assert_restored(&tmux, &p);
}

#[test]
fn ctrl_c_in_the_terminal_view_asks_then_stops_and_restores_the_terminal() {
    let (p, tmux, _) = asked_in_the_terminal_view("5m");
    tmux.key("C-c");
    tmux.wait_for(
        "Stop the loop? The question stays pending",
        Duration::from_secs(10),
    );
    tmux.key("y");
    let screen = tmux.wait_for("ralph exited: 130", Duration::from_secs(30));
    assert!(
        screen.contains("the question stays pending for the next `ralph run`"),
        "{screen}"
    );
    assert!(!p.exists("prompt-2.txt"));
    assert_restored(&tmux, &p);
}

#[test]
fn sigterm_while_a_question_is_open_stops_the_loop_and_restores_the_terminal() {
    let (p, tmux, _) = asked_in_the_terminal_view("5m");
    let pid = p.state()["pid"]
        .as_i64()
        .expect("state.json has ralph's pid") as i32;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let screen = tmux.wait_for("ralph exited: 130", Duration::from_secs(30));
    assert!(
        screen.contains("the question stays pending for the next `ralph run`"),
        "{screen}"
    );
    assert_restored(&tmux, &p);
}

/// SIGTERM, SIGINT and SIGHUP in a burst: the first stops the loop, the next kill the agent
/// at once; whatever moment each arrives, the terminal comes back.
#[test]
fn signals_in_a_burst_while_a_question_is_open_still_restore_the_terminal() {
    let (p, tmux, _) = asked_in_the_terminal_view("5m");
    let pid = p.state()["pid"]
        .as_i64()
        .expect("state.json has ralph's pid")
        .to_string();
    super::fleet_view::three_signals_at_once(&pid);
    tmux.wait_for("ralph exited: 130", Duration::from_secs(30));
    assert_restored(&tmux, &p);
}

/// Regression: ralph killed outright (`kill -9`, the OOM killer) with its view up left the
/// terminal in raw mode with the cursor hidden, and a shell that does not restore a killed
/// job's settings (`sh` here, any shell when ralph ran under `make` or a script) had no echo
/// and no line editing. ralph's guard gives the terminal back.
#[test]
fn after_sigkill_of_ralph_in_the_terminal_view_its_guard_gives_the_terminal_back() {
    let (p, tmux, _) = asked_in_the_terminal_view("5m");
    let pid = p.state()["pid"]
        .as_i64()
        .expect("state.json has ralph's pid") as i32;
    assert_eq!(guards_of(&p).len(), 1, "ralph runs with a guard");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    tmux.wait_for("ralph exited: 137", Duration::from_secs(30));
    wait_until(Duration::from_secs(10), "the guard to exit", || {
        guards_of(&p).is_empty().then_some(())
    });
    assert_restored(&tmux, &p);
}

#[test]
fn esc_skips_the_question_and_the_agent_is_told_to_decide() {
    let (p, tmux, _) = asked_in_the_terminal_view("5m");
    tmux.key("Escape");
    tmux.wait_for("ralph exited: 0", Duration::from_secs(30));
    let prompt = p.read("prompt-2.txt");
    assert!(
        prompt.contains("skipped your question and asks you to decide"),
        "{prompt}"
    );
    assert!(
        prompt.contains("Proceed with your stated default, \"Redis\""),
        "{prompt}"
    );
    let log = p.read(".ralph/clarifications.md");
    assert!(log.contains("**Skipped**"), "{log}");
    assert_restored(&tmux, &p);
}

#[test]
fn esc_on_a_ralph_ask_question_tells_the_waiting_agent_it_was_skipped() {
    // Regression: `ralph ask` said "nobody answered in time" when the human had skipped.
    let p = Project::with_task(
        "task: Cache\nmax_iterations: 1\nquestion_timeout: 5m",
        "- [ ] cache\n",
    );
    let agent = p.agent(
        "[iteration 1]\nrun-capture ask-out.txt ralph ask \"Which database?\" --option Postgres --default Postgres\n",
    );
    let tmux = Tmux::start(&p);
    run_ralph(&tmux, &p, &agent, "");
    tmux.wait_for("Which database?", Duration::from_secs(30));
    tmux.key("Escape");
    tmux.wait_for("ralph exited: 3", Duration::from_secs(30));
    // The instruction is on stderr (the agent's, in its log); stdout, the answer, is empty.
    assert_eq!(p.read("ask-out.txt"), "");
    let said = p.read(".ralph/logs/run-0001-iter-0001.err");
    assert!(said.contains("skipped the question"), "{said}");
    assert!(
        said.contains("proceed with your default (Postgres)"),
        "{said}"
    );
    assert!(!said.contains("in time"), "{said}");
    assert_eq!(p.read("ask-out.txt.code").trim(), "3");
}

/// Regression: in tmux, the usual way to watch a loop over ssh, the question's desktop
/// notification (OSC 9) never left the pane: tmux swallows OSC 9 itself. It now goes in
/// tmux's passthrough and reaches the terminal tmux runs in, where tmux allows it. Here that
/// terminal is `script`, inside a second tmux, which records every byte the inner tmux's
/// client is sent.
#[test]
fn in_tmux_the_questions_desktop_notification_reaches_the_terminal_tmux_runs_in() {
    let p = Project::with_task(
        "task: Cache\nmax_iterations: 2\nquestion_timeout: 30s",
        "- [ ] cache\n",
    );
    let agent = p.agent(ASK_THEN_SAVE);
    let inner = Tmux::start(&p);
    inner.cmd(&["set", "-g", "allow-passthrough", "on"]);
    let outer = Tmux::start(&p);
    outer.type_text(&format!(
        "script -q -f -c 'env -u TMUX tmux -L {} -f /dev/null attach' raw.log",
        inner.socket
    ));
    outer.key("Enter");
    wait_until(Duration::from_secs(10), "the inner tmux's client", || {
        (!inner.cmd(&["list-clients"]).trim().is_empty()).then_some(())
    });
    run_ralph(&inner, &p, &agent, "");
    inner.wait_for("The agent asks", Duration::from_secs(30));
    let raw = wait_until(Duration::from_secs(10), "the notification", || {
        let raw = std::fs::read(p.path("raw.log")).ok()?;
        let raw = String::from_utf8_lossy(&raw).into_owned();
        raw.contains("\x1b]9;ralph: the agent asks").then_some(raw)
    });
    let at = raw.find("\x1b]9;").unwrap();
    let osc = &raw[at..raw[at..].find('\x07').map_or(raw.len(), |end| at + end)];
    assert!(osc.contains("Should the session cache use"), "{osc:?}");
    // Nothing of it shows in the pane itself.
    assert!(!inner.screen().contains("9;ralph"), "{}", inner.screen());
}

/// Regression (issue 34, item 11): with `ralph serve` running, the terminal view told how to
/// answer from another terminal but not the page that answers from a phone.
#[test]
fn with_serve_running_the_terminal_view_shows_the_questions_link() {
    let broker = super::remote::Broker::start();
    let p = Project::with_task(
        "task: Cache\nmax_iterations: 2\nquestion_timeout: 1m",
        "- [ ] cache\n",
    );
    let agent = p.agent(ASK_THEN_SAVE);
    let tmux = Tmux::start(&p);
    p.write(
        "run.sh",
        &format!(
            "RALPH_STATE_DIR='{}' XDG_CONFIG_HOME='{}' '{}' run --agent-cmd \"{agent}\"\necho \"ralph exited: $?\"\n",
            broker.state.path().display(),
            p.path(".no-user-config").display(),
            ralph_bin().display()
        ),
    );
    tmux.type_text("sh run.sh");
    tmux.key("Enter");
    let screen = tmux.wait_for("Or answer on its page: http", Duration::from_secs(30));
    // The scrollback's echo of the question is rendered too (issue 34, item 14).
    assert!(
        screen.contains("asks (iteration 1): Should the session cache use Redis or Memcached?"),
        "{screen}"
    );
    let link = screen
        .split("Or answer on its page: ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap()
        .to_string();
    let page = super::remote::get(&link);
    assert_eq!(page.status, 200, "{screen}");
    assert!(page.body.contains("Redis"), "{}", page.body);
    tmux.key("Escape");
    tmux.wait_for("ralph exited: 0", Duration::from_secs(30));
}

/// An answer typed while what the agent left is still being stopped (a process that ignores
/// SIGTERM: the whole 3 s grace) reaches the next iteration: the question's wait takes the
/// keys, and nothing drops them meanwhile.
#[test]
fn an_answer_typed_while_what_the_agent_left_is_stopped_reaches_the_next_iteration() {
    let p = Project::with_task(
        "task: Cache\nmax_iterations: 2\nquestion_timeout: 5m",
        "- [ ] cache\n",
    );
    let agent = p.agent(
        "[iteration 1]\n\
         spawn-grandchild 300s --pid-file stubborn.pid --quiet --new-session --ignore-sigterm\n\
         question \"Redis or Memcached?\" --option Redis --option Memcached --default Redis\n\
         signal QUESTION\n\
         [iteration 2]\n\
         save-prompt prompt-2.txt\n\
         check-all\n\
         signal DONE\n",
    );
    let tmux = Tmux::start(&p);
    run_ralph(&tmux, &p, &agent, "--no-tui");
    tmux.wait_for("Type your answer and press Enter", Duration::from_secs(30));
    let pid = read_pid(&p, "stubborn.pid");
    // Regression: the question was shown only once everything the agent left was stopped.
    assert!(
        pid_alive(pid),
        "the question was shown only after what the agent left was stopped"
    );
    tmux.type_text("Memcached, typed");
    tmux.key("Enter");
    tmux.wait_for("ralph exited: 0", Duration::from_secs(30));
    assert!(!pid_alive(pid), "{pid} outlived its iteration");
    let answers = p.events_of("answer");
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0]["by"], "terminal", "{answers:?}");
    let prompt = p.read("prompt-2.txt");
    assert!(prompt.contains("> Memcached, typed"), "{prompt}");
    let events = p.events();
    let at = |kind: &str| events.iter().position(|e| e["event"] == kind).unwrap();
    assert!(at("answer") < at("escapees_stopped"), "{events:#?}");
}
