//! The races a hostile agent (or an unlucky human) can run against one question: two askers at
//! once, an asker killed before its answer came, QUESTION and DONE in one turn, a full disk
//! while the answer is archived.

use std::time::{Duration, Instant};

use super::util::*;

/// Waits for the first of `children` to exit; its index and how it ended.
fn first_to_exit(children: &mut [Guarded], limit: Duration) -> (usize, std::process::ExitStatus) {
    let start = Instant::now();
    loop {
        for (i, c) in children.iter_mut().enumerate() {
            if let Some(status) = c.0.try_wait().unwrap() {
                return (i, status);
            }
        }
        assert!(start.elapsed() < limit, "neither asker ended");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn two_ralph_asks_started_together_one_waits_and_the_other_is_refused_at_once() {
    // Regression: both wrote question.md and ask.json; one question was shown, and the other
    // asker got exit 3 "the human skipped" for a question nobody saw, or exit 0 with the
    // other question's answer.
    let p = Project::empty();
    let mut askers: Vec<Guarded> = ["Postgres or SQLite?", "Tabs or spaces?"]
        .iter()
        .map(|q| {
            let mut cmd = p.ralph();
            cmd.args(["ask", q, "--timeout", "1m"]);
            spawn(cmd)
        })
        .collect();
    let (refused, status) = first_to_exit(&mut askers, Duration::from_secs(20));
    assert_eq!(status.code(), Some(1), "refused with exit 1");
    let waiting = 1 - refused;
    let loser = Run::finish(askers.remove(refused), Duration::from_secs(5));
    assert!(loser.stderr.contains("already waiting"), "{}", loser.stderr);
    assert!(loser.stdout.is_empty(), "{}", loser.stdout);

    let state = p.wait_for_status("waiting_input", Duration::from_secs(20));
    let shown = state["pending_question"]["text"]
        .as_str()
        .unwrap()
        .to_string();
    let asked = ["Postgres or SQLite?", "Tabs or spaces?"][waiting];
    assert_eq!(shown, asked, "{state}");
    assert!(
        loser.stderr.contains(asked),
        "names the question waiting: {}",
        loser.stderr
    );
    p.exec(&["answer", "the answer to the one shown"])
        .expect_code(0);
    let winner = Run::finish(askers.remove(0), Duration::from_secs(20));
    winner.expect_code(0);
    assert_eq!(winner.stdout.trim(), "the answer to the one shown");
    let log = p.read(".ralph/clarifications.md");
    assert!(log.contains(asked), "{log}");
    assert!(
        !log.contains(["Postgres or SQLite?", "Tabs or spaces?"][refused]),
        "{log}"
    );
}

#[test]
fn an_answer_after_the_askers_tool_timeout_killed_it_reaches_the_next_prompt_and_answer_md() {
    // Regression: the human was told the loop picks it up, the loop logged it as delivered,
    // and no prompt ever contained it (the agent's tool had killed `ralph ask`).
    let p = Project::with_task(
        "task: Ask inline\nmax_iterations: 2\nquestion_timeout: 1m",
        "- [ ] x\n",
    );
    let agent = p.agent(
        "[iteration 1]\nrun timeout 1 ralph ask \"Which database?\" --option Postgres --option SQLite --timeout 1m\nsleep 3s\n\
         [iteration 2]\nsave-prompt prompt-2.txt\ncopy .ralph/answer.md answer-2.md\n",
    );
    let child = p.start(&agent, &[]);
    let state = p.wait_for_status("waiting_input", Duration::from_secs(20));
    assert_eq!(state["pending_question"]["raised_by"], "ask", "{state}");
    let claim: serde_json::Value = serde_json::from_str(&p.read(".ralph/ask.json")).unwrap();
    let pid = i32::try_from(claim["pid"].as_i64().unwrap()).unwrap();
    wait_until(
        Duration::from_secs(10),
        "the tool timeout to kill ralph ask",
        || (!pid_alive(pid)).then_some(()),
    );
    p.exec(&["answer", "SQLite, it is small"]).expect_code(0);
    Run::finish(child, Duration::from_secs(30)).expect_code(3);
    let prompt = p.read("prompt-2.txt");
    assert!(prompt.contains("> SQLite, it is small"), "{prompt}");
    assert!(
        p.read("answer-2.md").contains("SQLite, it is small"),
        "answer.md is there for the iteration that has the answer"
    );
    let log = p.read(".ralph/clarifications.md");
    assert_eq!(log.matches("SQLite, it is small").count(), 1, "{log}");
    assert!(!p.exists(".ralph/answer.md") && !p.exists(".ralph/ask.json"));
}

#[test]
fn question_and_done_in_the_same_turn_the_question_is_asked_and_done_waits_for_the_answer() {
    // Regression: DONE was accepted and the question vanished: not shown, not logged, not
    // archived.
    let p = Project::with_task(
        "task: Cache\nmax_iterations: 2\nquestion_timeout: 1m",
        "- [ ] cache\n",
    );
    let agent = p.agent(
        "[iteration 1]\ncheck-all\nquestion \"Redis or Memcached?\" --option Redis --option Memcached\nsignal QUESTION\nsignal DONE\n\
         [iteration 2]\nsave-prompt prompt-2.txt\nsignal DONE\n",
    );
    let child = p.start(&agent, &[]);
    let state = p.wait_for_status("waiting_input", Duration::from_secs(20));
    assert_eq!(state["pending_question"]["text"], "Redis or Memcached?");
    p.exec(&["answer", "Redis"]).expect_code(0);
    let run = Run::finish(child, Duration::from_secs(30));
    run.expect_code(0);
    assert!(
        run.stdout.contains("the question comes first"),
        "{}",
        run.stdout
    );
    assert!(p.read("prompt-2.txt").contains("> Redis"));
    assert_eq!(p.events_of("done_set_aside").len(), 1);
    assert_eq!(p.events_of("question").len(), 1);
    assert!(p.read(".ralph/clarifications.md").contains("Redis"));
}

/// A small tmpfs mounted on a directory, unmounted when dropped.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    /// Mounts `size` of tmpfs on `dir`; `None` where this process may not mount (not root).
    fn mount(dir: &std::path::Path, size: &str) -> Option<SmallDisk> {
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| SmallDisk(dir.to_path_buf()))
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

#[test]
fn a_full_disk_while_archiving_leaves_no_truncated_record_says_so_and_delivers_once() {
    // Regression: clarifications.md was left at 0 bytes (later entries lacked its title),
    // and the next run delivered the answer a second time.
    let p = Project::with_task(
        "task: Cache\nmax_iterations: 2\nquestion_timeout: 1m",
        "- [ ] cache\n",
    );
    std::fs::create_dir_all(p.path(".ralph")).unwrap();
    let Some(_disk) = SmallDisk::mount(&p.path(".ralph"), "512k") else {
        eprintln!("skipped: mounting a tmpfs needs root (CAP_SYS_ADMIN)");
        return;
    };
    let agent = p.agent(
        "[iteration 1]\nquestion \"Redis or Memcached?\" --option Redis --option Memcached\nsignal QUESTION\n\
         [iteration 2]\nsave-prompt prompt-2.txt\nrun sh -c \"head -c 1000000 /dev/zero > .ralph/filler; true\"\n",
    );
    let child = p.start(&agent, &[]);
    p.wait_for_status("waiting_input", Duration::from_secs(20));
    p.exec(&["answer", "Redis"]).expect_code(0);
    let run = Run::finish(child, Duration::from_secs(30));
    assert!(p.read("prompt-2.txt").contains("> Redis"));
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(said.contains("No space left on device"), "{said}");
    assert!(said.contains("clarifications.md"), "{said}");
    if p.exists(".ralph/clarifications.md") {
        let log = p.read(".ralph/clarifications.md");
        assert!(log.starts_with("# Clarifications"), "{log:?}");
    }
    assert!(
        !p.exists(".ralph/answer.md"),
        "delivered: not left for the next run"
    );

    std::fs::remove_file(p.path(".ralph/filler")).unwrap();
    let agent = p.agent("[iteration 1]\nsave-prompt prompt-next.txt\n");
    p.run(&agent, &[]);
    let prompt = p.read("prompt-next.txt");
    assert!(
        !prompt.contains("> Redis"),
        "delivered a second time: {prompt}"
    );
}
