//! The fleet view (`ralph status --all --watch`) in a real terminal, and `ralph status --all`'s
//! rows: loops of the scripted fake agent, each in a project of its own on one "machine" (one
//! state directory).

use std::time::Duration;

use super::tui::{ASK_THEN_SAVE, Tmux, assert_stty_sane};
use super::util::*;

/// A project whose loop (task `task`) asks [`ASK_THEN_SAVE`]'s question, started in the
/// background, once it waits.
fn waiting_loop(p: &Project, task: &str) -> Guarded {
    p.write(
        "RALPH_TASK.md",
        &format!("---\ntask: {task}\nmax_iterations: 2\nquestion_timeout: 10m\n---\n- [ ] cache\n"),
    );
    let agent = p.agent(ASK_THEN_SAVE);
    let child = p.start(&agent, &[]);
    p.wait_for_status("waiting_input", Duration::from_secs(60));
    child
}

/// The line of `screen` that shows `needle`.
fn line_of(screen: &str, needle: &str) -> usize {
    screen
        .lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line shows {needle:?}:\n{screen}"))
}

#[test]
fn enter_on_a_waiting_loop_answers_it_and_its_row_moves_down() {
    let alpha = Project::new();
    let beta = alpha.beside();
    let _a = waiting_loop(&alpha, "Alpha cache");
    let _b = waiting_loop(&beta, "Beta cache");

    let tmux = Tmux::start(&alpha);
    tmux.cmd(&["resize-window", "-t", "0", "-x", "80", "-y", "24"]);
    alpha.write(
        "watch.sh",
        &format!(
            "'{}' status --all --watch\necho \"view exited: $?\"\n",
            ralph_bin().display()
        ),
    );
    tmux.type_text("sh watch.sh");
    tmux.key("Enter");
    let screen = tmux.wait_for("2 need you", Duration::from_secs(30));
    // Alpha first (both wait; by task), and selected.
    let (a, b) = (
        line_of(&screen, "Alpha cache"),
        line_of(&screen, "Beta cache"),
    );
    assert!(a < b, "{screen}");
    assert!(screen.contains("› needs you Alpha cache"), "{screen}");
    assert!(
        screen.contains("asks: Should the session cache use Redis or Memcached?"),
        "{screen}"
    );

    // Enter opens the question in the panel of `ralph run`; 1 picks Redis, Enter sends it.
    tmux.key("Enter");
    tmux.wait_for("The agent asks", Duration::from_secs(10));
    tmux.type_text("1");
    tmux.key("Enter");
    let screen = tmux.wait_for("1 needs you", Duration::from_secs(30));
    assert!(
        screen.contains("Answered alpha") || screen.contains("Answered "),
        "{screen}"
    );
    // The answer reached the loop, which finished with it.
    alpha.wait_for_status("done", Duration::from_secs(60));
    assert!(alpha.read("prompt-2.txt").contains("Redis"));
    // Alpha's row moved below Beta's, which still waits.
    let screen = tmux.wait_for("done ", Duration::from_secs(30));
    let visible = tmux.screen();
    let (a, b) = (
        line_of(&visible, "Alpha cache"),
        line_of(&visible, "Beta cache"),
    );
    assert!(b < a, "Alpha did not move down:\n{screen}");

    // x stops Beta (selected: the selection stayed on the first row's loop... Alpha moved, so
    // go to Beta, now first); r runs it again with the same agent, and it asks again.
    tmux.key("Home");
    tmux.key("x");
    tmux.wait_for("Asked ", Duration::from_secs(10));
    beta.wait_for_status("stopped", Duration::from_secs(30));
    tmux.wait_for("nothing needs you", Duration::from_secs(30));
    tmux.key("r");
    tmux.wait_for("Running ", Duration::from_secs(10));
    beta.wait_for_status("waiting_input", Duration::from_secs(60));
    tmux.wait_for("1 needs you", Duration::from_secs(30));

    // q leaves the view; the loops go on (Beta waits).
    tmux.key("q");
    tmux.wait_for("view exited: 0", Duration::from_secs(10));
    assert_eq!(beta.state()["status"], "waiting_input");
    // The run `r` started is no child of this test: stopped here, so no loop outlives it.
    beta.exec(&["stop"]).expect_code(0);
    beta.wait_for_status("stopped", Duration::from_secs(30));
    wait_until(Duration::from_secs(30), "the retried run to end", || {
        let status = beta.exec(&["status", "--json"]).stdout;
        status.contains("\"running\": false").then_some(())
    });
    tmux.assert_sane();
    assert_stty_sane(&alpha);
}

/// `ralph status --all --watch` in tmux (80x24) beside `alpha`'s waiting loop, once it shows
/// the loop, with the variables `env` (`NAME='value' ...`, or nothing); the view's pid. The
/// shell prints the view's exit code after it.
fn watching_in_tmux(alpha: &Project, env: &str) -> (Tmux, String) {
    let tmux = Tmux::start(alpha);
    tmux.cmd(&["resize-window", "-t", "0", "-x", "80", "-y", "24"]);
    alpha.write(
        "watch.sh",
        &format!(
            "{env}sh -c 'echo $$ > view.pid; exec \"$0\" status --all --watch' '{}'\necho \"view exited: $?\"\n",
            ralph_bin().display()
        ),
    );
    tmux.type_text("sh watch.sh");
    tmux.key("Enter");
    tmux.wait_for("1 needs you", Duration::from_secs(30));
    let pid = alpha.read("view.pid").trim().to_owned();
    (tmux, pid)
}

/// `kill` (or a closed ssh session's SIGHUP) used to end the view in raw mode on the
/// alternate screen: the shell behind it then echoed nothing and ignored Enter.
#[test]
fn a_terminal_view_sent_sigterm_closes_as_on_q_and_gives_the_terminal_back() {
    let alpha = Project::new();
    let _a = waiting_loop(&alpha, "Alpha cache");
    let (tmux, pid) = watching_in_tmux(&alpha, "");
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    tmux.wait_for("view exited: 0", Duration::from_secs(10));
    // The loop goes on, as after `q`.
    assert_eq!(alpha.state()["status"], "waiting_input");
    tmux.assert_sane();
    assert_stty_sane(&alpha);
}

/// Sends SIGTERM, SIGINT and SIGHUP to `pid` one right after the other, from one shell, so
/// the second and third arrive while the first is still being acted on.
pub(super) fn three_signals_at_once(pid: &str) {
    let sent = std::process::Command::new("sh")
        .args(["-c", "kill -TERM $0; kill -INT $0; kill -HUP $0", pid])
        .status()
        .expect("sh runs");
    assert!(sent.success());
}

/// Regression: a second signal arriving while the terminal view was closing on the first
/// (a double Ctrl-C, a `kill` next to a closing ssh session) ended the process at once, in
/// raw mode with the cursor hidden: the shell behind it then echoed nothing.
#[test]
fn signals_in_a_burst_leave_the_terminal_view_with_the_terminal_given_back() {
    let alpha = Project::new();
    let _a = waiting_loop(&alpha, "Alpha cache");
    let (tmux, pid) = watching_in_tmux(&alpha, "");
    three_signals_at_once(&pid);
    let screen = tmux.wait_for("view exited: ", Duration::from_secs(10));
    // The first closes the view as `q` does (0); a second one leaves at once (130).
    assert!(
        screen.contains("view exited: 0") || screen.contains("view exited: 130"),
        "{screen}"
    );
    assert_eq!(alpha.state()["status"], "waiting_input");
    tmux.assert_sane();
    assert_stty_sane(&alpha);
}

/// While `d`'s pager has the terminal, a Ctrl-C is typed for the pager (the terminal sends it
/// to the view too): the view stays. A SIGTERM ends the pager first, then the view, as `q`
/// would, with the terminal given back; before, the second signal left at once (130) with the
/// pager still running on the terminal the shell took back.
#[test]
fn signals_while_the_pager_runs_spare_it_a_ctrl_c_and_end_it_before_the_view() {
    let alpha = Project::new();
    alpha.write("README.md", "alpha\n");
    git(alpha.root(), &["init", "-q"]);
    git(alpha.root(), &["add", "-A"]);
    git(alpha.root(), &["commit", "-q", "-m", "base"]);
    let _a = waiting_loop(&alpha, "Alpha cache");
    alpha.write("notes.txt", "a change to page\n");
    alpha.write(
        "pager.sh",
        "echo $$ > pager.pid\ncat > paged.txt\nexec sleep 60\n",
    );
    let (tmux, view) = watching_in_tmux(&alpha, "GIT_PAGER='exec sh pager.sh' ");
    let view: i32 = view.parse().unwrap();
    tmux.key("d");
    let pager = wait_until(Duration::from_secs(10), "the pager", || {
        let read = |f: &str| std::fs::read_to_string(alpha.path(f)).ok();
        let pid = read("pager.pid")?.trim().parse::<i32>().ok()?;
        read("paged.txt")?
            .contains("a change to page")
            .then_some(pid)
    });
    let signal =
        |pid: i32, sig| nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig).unwrap();
    signal(view, nix::sys::signal::Signal::SIGINT);
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        pid_alive(pager) && pid_alive(view),
        "a Ctrl-C for the pager ended it or the view"
    );
    signal(view, nix::sys::signal::Signal::SIGTERM);
    tmux.wait_for("view exited: 0", Duration::from_secs(15));
    assert!(!pid_alive(pager), "the pager outlived the view");
    tmux.assert_sane();
    assert_stty_sane(&alpha);
}

#[test]
fn status_all_json_gives_the_rows_needs_you_first() {
    let alpha = Project::new();
    let beta = alpha.beside();
    let _a = waiting_loop(&alpha, "Alpha cache");
    beta.write(
        "RALPH_TASK.md",
        "---\ntask: Beta done\nmax_iterations: 1\n---\n- [ ] x\n",
    );
    let agent = beta.agent("[iteration 1]\nprint \"all \\e[31mdone\"\ncheck-all\nsignal DONE\n");
    beta.run(&agent, &[]).expect_code(0);

    let out = beta.exec(&["status", "--all", "--json"]);
    out.expect_code(0);
    let rows: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    // Only the running loop is in the registry; a finished plain loop is not listed.
    assert_eq!(rows.len(), 1, "{rows:?}");
    let a = &rows[0];
    assert_eq!(a["state"], "needs-you");
    assert_eq!(a["task"], "Alpha cache");
    assert_eq!(a["iteration"], 1);
    assert_eq!(a["max_iterations"], 2);
    assert_eq!(a["criteria_total"], 1);
    assert_eq!(a["criteria_done"], 0);
    assert_eq!(
        a["question"],
        "Should the session cache use **Redis** or *Memcached*?"
    );
    assert!(a["question_id"].is_string());
    assert!(a["answer_command"].as_str().unwrap().contains("answer -C"));
    assert_eq!(a["running"], true);
    // What the agent said last, read from its log as `ralph status` reads it.
    assert_eq!(
        a["last_line"],
        "I need to choose a cache backend before going on."
    );

    let text = beta.exec(&["status", "--all"]);
    assert!(
        text.stdout.contains("1 of 1 loops needs you"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains(": needs you · Alpha cache · iteration 1/2"),
        "{}",
        text.stdout
    );
}

/// `git ARGS` in `dir`, with an identity of its own.
fn git(dir: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The `ralph serve` dashboard in chromium shows the fleet, with each loop's diff stat, and
/// a waiting loop's state links to its question's page, which answers it.
#[test]
fn the_dashboard_in_chromium_shows_the_fleet_with_diff_stats() {
    use fantoccini::Locator;

    use super::browser::{have_chromium, in_chromium};
    use super::remote::{Broker, pairing_link, start_asking};

    if !have_chromium() {
        return;
    }
    let broker = Broker::start();
    // A loop in a git repository that wrote two lines, then asked.
    let p = Project::with_task(
        "task: Cache in a repo\nmax_iterations: 2\nquestion_timeout: 5m",
        "- [ ] cache\n",
    );
    git(p.root(), &["init", "-q"]);
    git(p.root(), &["add", "-A"]);
    git(p.root(), &["commit", "-q", "-m", "base"]);
    // The agent's script is the test's, not the loop's work: not in its diff.
    p.write(".git/info/exclude", "agent-script.txt\n");
    let _child = start_asking(
        &broker,
        &p,
        &format!(
            "[iteration 1]\nwrite cache.rs \"fn a() {{}}\\nfn b() {{}}\\n\"\n{}",
            ASK_THEN_SAVE.trim_start_matches("[iteration 1]\n")
        ),
    );

    let (link, _) = pairing_link(&broker);
    in_chromium((420, 900), &link, async |c| {
        // The page's stream replaces what `<main>` holds: look again until it settles.
        let mut text = String::new();
        for _ in 0..100 {
            if let Ok(t) = c.find(Locator::Css("main.dashboard section.fleet")).await
                && let Ok(got) = t.text().await
            {
                text = got;
                if text.contains("+2 -0") {
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(text.contains("The fleet: 1 loop, 1 needs you"), "{text}");
        assert!(text.contains("Cache in a repo"), "{text}");
        assert!(text.contains("+2 -0"), "no diff stat:\n{text}");
        assert!(text.contains("1/2"), "{text}");
        // The state links to the question's page, which answers it as today.
        let mut href = None;
        for _ in 0..100 {
            if let Ok(a) = c
                .find(Locator::Css("section.fleet tr.needs-you td.state a"))
                .await
                && let (Ok(t), Ok(h)) = (a.text().await, a.attr("href").await)
            {
                assert_eq!(t, "needs you");
                href = h;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let href = href.expect("the waiting loop's state links to its question");
        c.goto(&format!("{}{href}", broker.url.trim_end_matches('/')))
            .await
            .unwrap();
        let page_text = c
            .find(Locator::Css("body"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(
            page_text.contains("Should the session cache use"),
            "{page_text}"
        );
    });
}
