//! After an answer, an agent that can resume gets the answer in the same session; if the
//! resume fails, a fresh iteration carries the answer instead. Nothing is lost either way.

use std::time::Duration;

use super::util::*;

/// A Claude stream-json turn that asks a question in session `sess-42`.
const ASKING_TURN: &str = r#"{"type":"system","subtype":"init","session_id":"sess-42"}
{"type":"assistant","message":{"content":[{"type":"text","text":"I need a decision first.\n<ralph>QUESTION</ralph>"}]},"session_id":"sess-42"}
{"type":"result","subtype":"success","is_error":false,"result":"asked","session_id":"sess-42","total_cost_usd":0.01}
"#;

/// A failed resume, as Claude Code reports it.
const FAILED_RESUME: &str = r#"{"type":"result","subtype":"error_during_execution","is_error":true,"session_id":"sess-42","errors":["No conversation found with session ID: sess-42"]}
"#;

fn setup(resume_script: &str) -> (Project, String, String) {
    let p = Project::with_task(
        "task: Resume\nmax_iterations: 3\nquestion_timeout: 1m",
        "- [ ] x\n",
    );
    p.write("turn-1.jsonl", ASKING_TURN);
    p.write("failed-resume.jsonl", FAILED_RESUME);
    let script = format!(
        "[call 1]\nquestion \"Redis or Memcached?\" --option Redis --option Memcached\nstream-json turn-1.jsonl\n{resume_script}"
    );
    p.write("agent-script.txt", &script);
    let base = format!(
        "'{}' --script '{}' --counter '{}'",
        fake_agent_bin().display(),
        p.path("agent-script.txt").display(),
        p.path("counter").display()
    );
    let resume = format!("RALPH_RESUMED_SESSION={{session_id}} {base}");
    (p, base, resume)
}

fn run_and_answer(p: &Project, base: &str, resume: &str) -> Run {
    let mut cmd = p.ralph();
    cmd.args([
        "run",
        "--no-tui",
        "--agent-cmd",
        base,
        "--agent-format",
        "claude",
        "--agent-resume-cmd",
        resume,
    ]);
    let child = spawn(cmd);
    p.wait_for_status("waiting_input", Duration::from_secs(20));
    p.exec(&["answer", "Use Redis"]).expect_code(0);
    Run::finish(child, Duration::from_secs(30))
}

#[test]
fn an_answer_resumes_the_same_session_as_a_new_message() {
    let (p, base, resume) = setup(
        "[call 2]\nsave-prompt resumed-stdin.txt\nsave-env resumed-env.txt\n[call 3..]\nprint fresh\n",
    );
    let run = run_and_answer(&p, &base, &resume);
    run.expect_code(3);
    let env = p.read("resumed-env.txt");
    assert!(
        env.contains("RALPH_RESUMED_SESSION=sess-42"),
        "resumed with the session id: {env}"
    );
    let message = p.read("resumed-stdin.txt");
    assert!(message.contains("> Use Redis"), "{message}");
    assert!(message.contains("> Redis or Memcached?"), "{message}");
    assert!(
        !message.contains("## Criteria still open"),
        "a resume sends only what changed: {message}"
    );
    let events = p.events();
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "iteration_start" && e["resumed_session"] == "sess-42")
    );
}

#[test]
fn a_failed_resume_falls_back_to_a_fresh_iteration_that_carries_the_answer() {
    let (p, base, resume) = setup(
        "[call 2]\nstream-json failed-resume.jsonl\neprint No conversation found with session ID: sess-42\nexit 1\n\
         [call 3]\nsave-prompt fresh-prompt.txt\ncopy .ralph/answer.md answer-in-fallback.md\n",
    );
    let run = run_and_answer(&p, &base, &resume);
    run.expect_code(3);
    assert!(
        run.stderr.contains("resuming session sess-42 failed"),
        "{}",
        run.stderr
    );
    let prompt = p.read("fresh-prompt.txt");
    assert!(prompt.contains("Your question was answered"), "{prompt}");
    assert!(prompt.contains("> Use Redis"), "{prompt}");
    assert!(
        prompt.contains("## Criteria still open"),
        "a full fresh prompt: {prompt}"
    );
    assert!(p.events().iter().any(|e| e["event"] == "resume_failed"));
    assert!(
        p.read("answer-in-fallback.md").contains("Use Redis"),
        "the answer file is there for the fallback run"
    );
    assert!(
        !p.exists(".ralph/answer.md"),
        "archived after the run that really got it"
    );
}

#[test]
fn max_cost_usd_stops_the_loop_once_the_reported_cost_passes_it() {
    let p = Project::with_task(
        "task: Costly\nmax_iterations: 10\nmax_cost_usd: 1.0",
        "- [ ] x\n",
    );
    p.write(
        "turn.jsonl",
        r#"{"type":"system","subtype":"init","session_id":"s"}
{"type":"assistant","message":{"content":[{"type":"text","text":"working"}]},"session_id":"s"}
{"type":"result","subtype":"success","is_error":false,"result":"working","session_id":"s","total_cost_usd":0.6}
"#,
    );
    let agent = p.agent("[iteration *]\nstream-json turn.jsonl\n");
    let mut cmd = p.ralph();
    cmd.args([
        "run",
        "--no-tui",
        "--agent-cmd",
        &agent,
        "--agent-format",
        "claude",
    ]);
    let run = Run::finish(spawn(cmd), Duration::from_secs(30));
    run.expect_code(1);
    assert!(run.stdout.contains("max_cost_usd"), "{}", run.stdout);
    let state = p.state();
    assert_eq!(state["iteration"], 2);
    assert_eq!(state["status"], "failed");
    assert!((state["total_cost_usd"].as_f64().unwrap() - 1.2).abs() < 1e-9);
}

#[test]
fn a_rate_limited_run_backs_off_and_retries_the_same_iteration_without_counting_a_failure() {
    let p = Project::with_task(
        "task: Limited\nmax_iterations: 1\nmax_consecutive_failures: 1",
        "- [x] done\n",
    );
    p.write(
        "limited.jsonl",
        r#"{"type":"system","subtype":"init","session_id":"r1"}
{"type":"system","subtype":"api_retry","attempt":1,"max_retries":0,"retry_delay_ms":200,"error_status":429,"error":"rate_limit","session_id":"r1"}
{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"API Error: 429 rate limited","session_id":"r1","total_cost_usd":0}
"#,
    );
    p.write(
        "works.jsonl",
        r#"{"type":"assistant","message":{"content":[{"type":"text","text":"<ralph>DONE</ralph>"}]},"session_id":"r1"}
"#,
    );
    p.write(
        "agent-script.txt",
        "[call 1]\nstream-json limited.jsonl\nexit 1\n[call 2]\nstream-json works.jsonl\n",
    );
    let run = Run::finish(spawn(p.run_counted_as("claude")), Duration::from_secs(30));
    // One iteration allowed and one failure allowed: only a retry of the same iteration that
    // did not count the rate limit as a failure can reach DONE.
    run.expect_code(0);
    assert!(run.stdout.contains("rate limited"), "{}", run.stdout);
    let events = p.events();
    assert!(events.iter().any(|e| e["event"] == "backoff"));
    let starts = events
        .iter()
        .filter(|e| e["event"] == "iteration_start")
        .count();
    assert_eq!(starts, 2, "the same iteration ran twice");
    assert_eq!(p.state()["iteration"], 1);
    // Each attempt keeps its own raw output (the retry used to overwrite the first).
    assert!(p.read(".ralph/logs/run-0001-iter-0001.out").contains("429"));
    let retry = p.read(".ralph/logs/run-0001-iter-0001-2.out");
    assert!(retry.contains("DONE") && !retry.contains("429"), "{retry}");
    assert!(p.exists(".ralph/logs/run-0001-iter-0001-2.prompt.md"));
}

/// Issue 34, item 7: Claude's `rate_limit_event` says when the limit resets; ralph retried
/// every ~30 s regardless and printed "it resets at Unix time 1795889551". It waits until the
/// reset (plus a little jitter) and says when that is, in local time.
#[test]
fn a_rate_limit_with_a_stated_reset_waits_until_then_and_says_when_in_local_time() {
    let p = Project::with_task("task: Limited\nmax_iterations: 1", "- [x] done\n");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let reset = now + 2 * 3600 + 5 * 60 + 30;
    p.write(
        "limited.jsonl",
        &format!(
            r#"{{"type":"system","subtype":"init","session_id":"r1"}}
{{"type":"rate_limit_event","rate_limit_info":{{"status":"rejected","resetsAt":{reset},"rateLimitType":"five_hour"}},"session_id":"r1"}}
{{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"API Error: 429 rate limited","session_id":"r1","total_cost_usd":0}}
"#
        ),
    );
    p.write(
        "agent-script.txt",
        "[iteration *]\nstream-json limited.jsonl\nexit 1\n",
    );
    let agent = format!(
        "'{}' --script '{}'",
        fake_agent_bin().display(),
        p.path("agent-script.txt").display(),
    );
    let mut cmd = p.ralph();
    // The local time shown is the TZ's.
    cmd.env("TZ", "Asia/Kolkata").args([
        "run",
        "--no-tui",
        "--agent-cmd",
        &agent,
        "--agent-format",
        "claude",
    ]);
    let child = spawn(cmd);
    let backoff = wait_until(Duration::from_secs(30), "the backoff", || {
        p.exists(".ralph/events.jsonl")
            .then(|| p.events_of("backoff").into_iter().next())
            .flatten()
    });
    let seconds = backoff["seconds"].as_f64().unwrap();
    // The reset is 2h 05m 30s away (less the seconds this test took), plus up to 30 s.
    assert!(
        (2.0 * 3600.0 + 5.0 * 60.0..=2.0 * 3600.0 + 6.0 * 60.0 + 30.0).contains(&seconds),
        "{backoff}"
    );
    let zone = jiff::tz::TimeZone::get("Asia/Kolkata").unwrap();
    let at = jiff::Timestamp::from_second(reset as i64)
        .unwrap()
        .to_zoned(zone.clone());
    let today = jiff::Timestamp::now().to_zoned(zone).date() == at.date();
    let kolkata = at
        .strftime(if today { "%H:%M" } else { "%a %-d %b %H:%M" })
        .to_string();
    let reason = backoff["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!("it resets at {kolkata}, in 2h 0")),
        "{reason}"
    );
    assert!(!reason.contains("Unix time"), "{reason}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let run = Run::finish(child, Duration::from_secs(30));
    run.expect_code(130);
    assert!(
        run.stdout.contains(&format!("resets at {kolkata}")),
        "{}",
        run.stdout
    );
}
