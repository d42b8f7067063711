//! Races: many answers at once, an answer in the same millisecond as the deadline, several
//! `ralph run`s started together. Whatever the interleaving, exactly one thing wins and nothing
//! is lost or delivered twice.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::util::*;

const ASK: &str = "\
[iteration 1]
question \"Redis or Memcached?\" --option Redis --option Memcached --default Redis
signal QUESTION
[iteration 2]
save-prompt prompt-2.txt
";

#[test]
fn fifty_concurrent_answers_have_exactly_one_winner_and_the_rest_are_told() {
    let p = Project::with_task(
        "task: Cache\nmax_iterations: 2\nquestion_timeout: 2m",
        "- [ ] cache\n",
    );
    let agent = p.agent(ASK);
    let child = p.start(&agent, &[]);
    p.wait_for_status("waiting_input", Duration::from_secs(20));
    // Start them all before waiting for any; half pick an option, half write text.
    let racers: Vec<_> = (0..50)
        .map(|i| {
            let mut c = p.ralph();
            if i % 2 == 0 {
                c.args(["answer", &format!("racer {i} says Redis")]);
            } else {
                c.args(["answer", "--option", "2", &format!("racer {i}")]);
            }
            spawn(c)
        })
        .collect();
    let results: Vec<Run> = racers
        .into_iter()
        .map(|c| Run::finish(c, Duration::from_secs(60)))
        .collect();
    let winners: Vec<usize> = (0..50).filter(|i| results[*i].code == Some(0)).collect();
    assert_eq!(winners.len(), 1, "{results:#?}");
    for (i, r) in results.iter().enumerate() {
        if r.code == Some(0) {
            continue;
        }
        assert_eq!(r.code, Some(1), "racer {i}: {r:?}");
        assert!(
            r.stderr.contains("answered first") || r.stderr.contains("no question is waiting"),
            "racer {i} is told why: {}",
            r.stderr
        );
    }
    Run::finish(child, Duration::from_secs(30)).expect_code(3);
    let prompt = p.read("prompt-2.txt");
    let winner = winners[0];
    assert_eq!(prompt.matches("racer ").count(), 1, "{prompt}");
    assert!(
        prompt.contains(&format!("racer {winner}")),
        "the winner's answer: {prompt}"
    );
    let log = p.read(".ralph/clarifications.md");
    assert_eq!(log.matches("racer ").count(), 1, "{log}");
}

/// Seconds since the epoch of an RFC 3339 UTC timestamp as ralph writes it
/// (`2026-11-22T14:00:00.123Z`).
fn parse_utc(s: &str) -> SystemTime {
    let num = |r: std::ops::Range<usize>| s[r].parse::<i64>().unwrap();
    let (y, m, d) = (num(0..4), num(5..7), num(8..10));
    let (hh, mm, ss) = (num(11..13), num(14..16), num(17..19));
    let millis = s[19..]
        .strip_prefix('.')
        .map(|f| {
            let digits: String = f.chars().take_while(char::is_ascii_digit).collect();
            format!("{digits:0<3}")[..3].parse::<u64>().unwrap()
        })
        .unwrap_or(0);
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss;
    UNIX_EPOCH + Duration::from_secs(secs as u64) + Duration::from_millis(millis)
}

#[test]
fn parse_utc_reads_ralphs_timestamps() {
    assert_eq!(
        parse_utc("1970-01-02T00:00:01.5Z"),
        UNIX_EPOCH + Duration::from_millis(86_401_500)
    );
    assert_eq!(
        parse_utc("2026-11-22T14:00:00.123Z")
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
        1_795_356_000_123
    );
}

/// How many deadline trials to run: `RALPH_RACE_TRIALS`, or a handful for `make test`.
fn trials() -> u32 {
    std::env::var("RALPH_RACE_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8)
}

/// One trial: an answer fired `offset_ms` from the question's deadline (negative: before).
/// Returns how it was delivered ("on time" or "late").
fn deadline_trial(trial: u32, offset_ms: i64) -> &'static str {
    let p = Project::with_task(
        "task: Deadline\nmax_iterations: 3\nquestion_timeout: 200ms",
        "- [ ] x\n",
    );
    let agent = p.agent(
        "[iteration 1]\n\
         question \"Deadline race?\" --default guess\n\
         signal QUESTION\n\
         [iteration 2]\n\
         expect-file answer-fired --wait 20s\n\
         save-prompt prompt-2.txt\n\
         [iteration 3]\n\
         save-prompt prompt-3.txt\n",
    );
    let child = p.start(&agent, &[]);
    let state = p.wait_for_status("waiting_input", Duration::from_secs(20));
    let deadline = parse_utc(state["pending_question"]["deadline"].as_str().unwrap());
    let fire_at = if offset_ms >= 0 {
        deadline + Duration::from_millis(offset_ms as u64)
    } else {
        deadline - Duration::from_millis(offset_ms.unsigned_abs())
    };
    if let Ok(wait) = fire_at.duration_since(SystemTime::now()) {
        std::thread::sleep(wait);
    }
    let text = format!("ANSWER-{trial}-at-{offset_ms}ms");
    let answered = p.exec(&["answer", &text]);
    p.write("answer-fired", "");
    let run = Run::finish(child, Duration::from_secs(60));
    let context = format!(
        "trial {trial}, {offset_ms} ms from the deadline\n--- ralph answer\n{answered:?}\n--- ralph run\n{}",
        run.stdout
    );
    assert_eq!(answered.code, Some(0), "the answer was refused: {context}");
    assert_eq!(run.code, Some(3), "{context}");
    let needle = format!("> {text}");
    let in_2 = p.read("prompt-2.txt").matches(&needle).count();
    let in_3 = p.read("prompt-3.txt").matches(&needle).count();
    assert_eq!(in_2 + in_3, 1, "delivered {in_2} + {in_3} times: {context}");
    let log = p.read(".ralph/clarifications.md");
    assert_eq!(
        log.matches(&text).count(),
        1,
        "archived once: {log}\n{context}"
    );
    assert!(
        !p.exists(".ralph/answer.md"),
        "delivered and cleared: {context}"
    );
    let delivered = p
        .events()
        .iter()
        .filter(|e| e["event"] == "answer_delivered")
        .count();
    assert_eq!(delivered, 1, "{context}");
    let late = p
        .events()
        .iter()
        .any(|e| e["event"] == "answer_delivered" && e["late"] == true);
    // Late means the prompt says so, and it came to the iteration after the timeout at the
    // earliest.
    let prompt = if in_2 == 1 {
        "prompt-2.txt"
    } else {
        "prompt-3.txt"
    };
    assert_eq!(
        p.read(prompt).contains("answered (late)"),
        late,
        "{}\n{context}",
        p.read(prompt)
    );
    if late { "late" } else { "on time" }
}

#[test]
fn an_answer_at_the_deadline_is_delivered_exactly_once_either_on_time_or_late() {
    let n = trials();
    let mut on_time = 0;
    let mut late = 0;
    for trial in 0..n {
        // Spread from 30 ms before the deadline to 30 ms after (the answer command itself
        // takes a few milliseconds to start).
        let offset = -30 + (60 * i64::from(trial)) / i64::from(n.max(2) - 1);
        match deadline_trial(trial, offset) {
            "late" => late += 1,
            _ => on_time += 1,
        }
    }
    eprintln!("deadline races: {n} trials, {on_time} delivered on time, {late} late");
}

/// Regression: a run that lost the race for the lock by a hair read the lock file before the
/// winner had written its pid into it, and said "another ralph run (pid ?)" (or, in a reused
/// workspace, named the dead previous holder). The loser now waits a moment for a live pid.
#[test]
fn runs_started_together_in_one_workspace_have_exactly_one_winner_named_by_the_rest() {
    for round in 0..6 {
        let p = Project::with_task("task: Crowded\nmax_iterations: 1", "- [ ] x\n");
        let agent = p.agent("[iteration 1]\nsleep 1s\nprint done\n");
        let runs: Vec<_> = (0..6)
            .map(|_| {
                let mut cmd = p.ralph();
                cmd.args(["run", "--no-tui", "--agent-cmd", &agent]);
                spawn(cmd)
            })
            .collect();
        let pids: Vec<u32> = runs.iter().map(|c| c.id()).collect();
        let results: Vec<Run> = runs
            .into_iter()
            .map(|c| Run::finish(c, Duration::from_secs(60)))
            .collect();
        let winners: Vec<usize> = (0..6).filter(|i| results[*i].code == Some(3)).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:#?}");
        let winner_pid = pids[winners[0]];
        for (i, r) in results.iter().enumerate() {
            if i == winners[0] {
                continue;
            }
            assert_eq!(r.code, Some(1), "round {round}: {r:?}");
            assert!(
                r.stderr.contains(&format!("(pid {winner_pid})")),
                "round {round}: the loser names the winner's pid {winner_pid}: {}",
                r.stderr
            );
        }
        assert_eq!(p.state()["pid"], winner_pid);
        assert_eq!(
            p.events()
                .iter()
                .filter(|e| e["event"] == "run_start")
                .count(),
            1,
            "round {round}"
        );
    }
}

/// A second `answer.md` for a question the loop already closed (a racer that lost, but died
/// before taking its file back) reaches no agent: the next iteration does not get it as
/// guidance, and the run says why.
#[test]
fn a_second_answer_to_a_closed_question_is_never_delivered() {
    let p = Project::with_task(
        "task: Cache\nmax_iterations: 4\nquestion_timeout: 2m",
        "- [ ] cache\n",
    );
    let agent = p.agent(
        "\
[iteration 1]
question \"Redis or Memcached?\" --option Redis --option Memcached
signal QUESTION
[iteration 2]
save-prompt prompt-2.txt
[iteration 3]
sleep 1500ms
[iteration 4]
save-prompt prompt-4.txt
",
    );
    let child = p.start(&agent, &[]);
    let state = p.wait_for_status("waiting_input", Duration::from_secs(20));
    let asked_at = state["pending_question"]["asked_at"]
        .as_str()
        .unwrap()
        .to_string();
    let id = state["pending_question"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    p.exec(&["answer", "Redis, the winner"]).expect_code(0);
    wait_until(Duration::from_secs(20), "iteration 3", || {
        (p.state()["iteration"] == 3).then_some(())
    });
    // Sealed as `ralph answer` seals it: the loop takes no other (see the test of forgeries).
    let ws = ralph_protocol::Workspace::new(p.root()).with_state_dir(p.state_path());
    let key = ralph_protocol::answer_key(&ws).unwrap().unwrap();
    let loser = ralph_protocol::Answer::parse(&format!(
        "---\nanswered_by: ralph-answer\nanswered_at: {asked_at}\nquestion_id: {id}\nanswer_id: 1-2\n---\nMemcached, the loser\n"
    ))
    .sealed(&key);
    p.write(".ralph/answer.md", &loser.to_file());
    let run = Run::finish(child, Duration::from_secs(30));
    run.expect_code(3);
    assert!(p.read("prompt-2.txt").contains("Redis, the winner"));
    let prompt = p.read("prompt-4.txt");
    assert!(!prompt.contains("the loser"), "{prompt}");
    assert!(run.stdout.contains("was not used"), "{}", run.stdout);
    assert!(!p.exists(".ralph/answer.md"));
    assert!(!p.read(".ralph/clarifications.md").contains("the loser"));
}
