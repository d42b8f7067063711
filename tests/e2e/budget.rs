//! The budget loops share across the machine: a rate limit one loop hits pauses every loop of
//! the same agent account until its reset (and no loop counts it as a failure); a fleet's cost
//! cap stops every loop of the fleet as `max_cost_usd` stops one. Loops "on the same machine"
//! share a `RALPH_STATE_DIR` (`Project::beside`). Fixtures: `fixtures/budget/`.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::util::*;

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/budget")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn secs_of(rfc3339: &serde_json::Value) -> f64 {
    let ts: jiff::Timestamp = rfc3339.as_str().unwrap().parse().unwrap();
    ts.as_millisecond() as f64 / 1000.0
}

/// A project whose fake Claude Code runs `script`, with the budget fixtures beside it; the
/// limit in `limited.jsonl` resets at `resets_at`.
fn claude_project(p: Project, script: &str, resets_at: u64) -> Project {
    p.write(
        "limited.jsonl",
        &fixture("rate-limit-rejected.jsonl").replace("RESETS_AT", &resets_at.to_string()),
    );
    p.write("done.jsonl", &fixture("done.jsonl"));
    p.write("costly.jsonl", &fixture("costly-turn.jsonl"));
    p.write("agent-script.txt", script);
    p
}

/// `ralph run --no-tui` of the project's fake Claude Code (its starts counted in `counter`).
fn claude_run(p: &Project) -> Command {
    p.run_counted_as("claude")
}

const DONE_NOW: &str = "[call *]\nstream-json done.jsonl\n";

fn task(name: &str) -> Project {
    Project::with_task(
        &format!("task: {name}\nmax_iterations: 1\nmax_consecutive_failures: 1"),
        "- [x] done\n",
    )
}

fn beside(first: &Project, name: &str) -> Project {
    let p = first.beside();
    p.write(
        "RALPH_TASK.md",
        &format!(
            "---\ntask: {name}\nmax_iterations: 1\nmax_consecutive_failures: 1\n---\n- [x] done\n"
        ),
    );
    p
}

/// The issue's case (laurigates/claude-plugins#1490): a server-side limit hit one of seven
/// parallel agents after another, each was marked failed. Here one loop's limit pauses the
/// other loop of the same agent until the stated reset, a loop of another account runs on,
/// and no loop counts a failure (each allows one iteration and one failure).
#[test]
fn a_rate_limit_in_one_loop_pauses_every_loop_of_the_same_agent_until_its_reset() {
    let reset = now_secs() + 12;
    let a = claude_project(task("A"), &fixture("limited-then-done.txt"), reset);
    let a_child = spawn(claude_run(&a));
    let backoff = wait_until(Duration::from_secs(30), "A's backoff", || {
        a.exists(".ralph/events.jsonl")
            .then(|| a.events_of("backoff").into_iter().next())
            .flatten()
    });
    assert!(
        backoff["agent_key"]
            .as_str()
            .unwrap()
            .starts_with("claude-")
    );

    // B: the same agent on the same machine, started while A waits.
    let b = claude_project(beside(&a, "B"), DONE_NOW, reset);
    let mut b_cmd = claude_run(&b);
    b_cmd.env("TZ", "Asia/Kolkata");
    let b_child = spawn(b_cmd);
    // B waits, says until when, and has not started its agent.
    let waiting = wait_until(Duration::from_secs(30), "B waiting on A's limit", || {
        let text = std::fs::read_to_string(b.path(".ralph/state.json")).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        v["rate_limited_until"].is_string().then_some(v)
    });
    let until = secs_of(&waiting["rate_limited_until"]);
    assert!(
        (reset as f64..reset as f64 + 2.0).contains(&until),
        "B waits until A's reset: {waiting}"
    );
    assert_eq!(waiting["iteration"], 0, "{waiting}");
    assert_eq!(waiting["status"], "running", "{waiting}");
    assert!(!b.exists("counter"), "B's agent has not started");

    // C: the same agent with another account (another base URL) is not paused.
    let c = claude_project(beside(&a, "C"), DONE_NOW, reset);
    let mut c_cmd = claude_run(&c);
    c_cmd.env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9");
    let c_run = Run::finish(spawn(c_cmd), Duration::from_secs(30));
    c_run.expect_code(0);
    assert!(c.events_of("shared_limit").is_empty());
    let c_start = secs_of(&c.events_of("iteration_start")[0]["at"]);
    assert!(
        c_start < reset as f64,
        "C ran before A's limit reset, so it was not paused (started {c_start}, reset {reset})"
    );

    // D: another agent altogether (plain text) is not paused either.
    let d = claude_project(beside(&a, "D"), "[call *]\nsignal DONE\n", reset);
    Run::finish(spawn(d.run_counted_as("text")), Duration::from_secs(30)).expect_code(0);
    assert!(d.events_of("shared_limit").is_empty());
    assert!(secs_of(&d.events_of("iteration_start")[0]["at"]) < reset as f64);

    let b_run = Run::finish(b_child, Duration::from_secs(60));
    b_run.expect_code(0);
    let a_run = Run::finish(a_child, Duration::from_secs(60));
    a_run.expect_code(0);

    // B's one iteration started after the reset, and said until when it waited, in local time.
    let b_start = secs_of(&b.events_of("iteration_start")[0]["at"]);
    assert!(
        b_start >= reset as f64,
        "B started at {b_start}, before {reset}"
    );
    let local = jiff::Timestamp::from_millisecond((until * 1000.0) as i64)
        .unwrap()
        .to_zoned(jiff::tz::TimeZone::get("Asia/Kolkata").unwrap())
        .strftime("%H:%M")
        .to_string();
    let said = b
        .events_of("shared_limit")
        .into_iter()
        .next()
        .expect("B logged the wait");
    assert_eq!(said["root"], a.root().display().to_string());
    assert!(
        b_run.stdout.contains(&format!(
            "Claude Code's limit, hit by the loop in {}",
            a.root().display()
        )),
        "{}",
        b_run.stdout
    );
    assert!(
        b_run.stdout.contains(&format!("it ends at {local}")),
        "{}",
        b_run.stdout
    );
    let b_state = b.state();
    assert_eq!(b_state["status"], "done");
    assert!(b_state["rate_limited_until"].is_null(), "{b_state}");
    // Neither counted a failure: one iteration each, one failure allowed, both DONE.
    let a_state = a.state();
    assert_eq!(a_state["status"], "done");
    assert_eq!(a_state["iteration"], 1);
    assert_eq!(
        a.events_of("iteration_start").len(),
        2,
        "A retried the same iteration"
    );
    assert_eq!(b_state["iteration"], 1);
    assert_eq!(
        std::fs::read_to_string(b.path("counter")).unwrap().trim(),
        "1"
    );
}

/// The key of the fake Claude Code's account in `first`'s state directory: a loop whose limit
/// is already over runs once, and its `backoff` event names it.
fn learn_agent_key(first: &Project) -> String {
    let a = claude_project(
        beside(first, "Learn"),
        &fixture("limited-then-done.txt"),
        now_secs() - 60,
    );
    Run::finish(spawn(claude_run(&a)), Duration::from_secs(30)).expect_code(0);
    a.events_of("backoff")[0]["agent_key"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A limit record as another loop (`pid`) writes it, ending at `until` (Unix seconds).
fn write_limit(state: &Path, key: &str, pid: u32, until: u64) {
    let until = jiff::Timestamp::from_second(until as i64).unwrap();
    let record = format!(
        r#"{{"agent":"claude","until":"{until}","reason":"the usage limit is reached (five_hour)","root":"/elsewhere/{pid}","pid":{pid},"recorded_at":"{until}"}}"#
    );
    let dir = state.join("limits");
    std::fs::create_dir_all(&dir).unwrap();
    let tmp = dir.join(format!(".tmp-{pid}"));
    std::fs::write(&tmp, record).unwrap();
    std::fs::rename(tmp, dir.join(format!("{key}.{pid}.json"))).unwrap();
}

/// A longer limit recorded by another loop while one waits lengthens its wait: the waiting
/// loop looks again, shows the new end, and starts only after it.
#[test]
fn a_longer_limit_recorded_while_a_loop_waits_lengthens_its_wait() {
    let first = Project::new();
    let key = learn_agent_key(&first);
    let short = now_secs() + 6;
    write_limit(first.state_path(), &key, 900_001, short);
    let b = claude_project(beside(&first, "B"), DONE_NOW, 0);
    let child = spawn(claude_run(&b));
    let waiting = |at_least: u64| {
        wait_until(Duration::from_secs(30), "B waiting", || {
            let text = std::fs::read_to_string(b.path(".ralph/state.json")).ok()?;
            let v: serde_json::Value = serde_json::from_str(&text).ok()?;
            v["rate_limited_until"].as_str()?;
            (secs_of(&v["rate_limited_until"]) >= at_least as f64).then_some(())
        })
    };
    waiting(short);
    let long = now_secs() + 12;
    write_limit(first.state_path(), &key, 900_002, long);
    // Seen at the next look (every 10 s, or when the shorter wait ends).
    waiting(long);
    let run = Run::finish(child, Duration::from_secs(60));
    run.expect_code(0);
    let start = secs_of(&b.events_of("iteration_start")[0]["at"]);
    assert!(start >= long as f64, "B started at {start}, before {long}");
    let waits = b.events_of("shared_limit");
    assert_eq!(waits.len(), 2, "{waits:?}");
    assert_eq!(waits[1]["root"], "/elsewhere/900002");
}

/// Junk in the limits directory (files with a loop's record name that are not records, a
/// pipe, a directory, a record whose name and pid disagree) never pauses a loop, and an
/// expired record is tidied away by the next loop that looks.
#[test]
fn junk_in_the_limits_directory_is_ignored() {
    let a = Project::new();
    let key = learn_agent_key(&a);
    let limits = a.state_path().join("limits");
    let in_an_hour = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_hours(1))
        .unwrap();
    let junk: [(String, String); 6] = [
        (format!("{key}.101.json"), "not json".into()),
        (format!("{key}.102.json"), String::new()),
        (format!("{key}.103.json"), r#"{"until": 12}"#.into()),
        (format!("{key}.nope.json"), "{}".into()),
        // A record's shape, but its pid is not its name's: not a loop's record.
        (
            format!("{key}.104.json"),
            format!(
                r#"{{"agent":"claude","until":"{in_an_hour}","reason":"x","root":"/p","pid":1,"recorded_at":"{in_an_hour}"}}"#
            ),
        ),
        (".tmp-half".into(), "{\"agent\":".into()),
    ];
    std::fs::create_dir_all(&limits).unwrap();
    for (name, text) in &junk {
        std::fs::write(limits.join(name), text).unwrap();
    }
    std::fs::create_dir(limits.join(format!("{key}.105.json"))).unwrap();
    nix::unistd::mkfifo(
        &limits.join(format!("{key}.106.json")),
        nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR,
    )
    .unwrap();
    // An expired record of a loop long gone.
    std::fs::write(
        limits.join(format!("{key}.107.json")),
        r#"{"agent":"claude","until":"2020-01-01T00:00:00Z","reason":"x","root":"/p","pid":107,"recorded_at":"2020-01-01T00:00:00Z"}"#,
    )
    .unwrap();

    let b = claude_project(beside(&a, "B"), DONE_NOW, 0);
    let run = Run::finish(spawn(claude_run(&b)), Duration::from_secs(30));
    run.expect_code(0);
    assert!(b.events_of("shared_limit").is_empty(), "{}", run.stdout);
    assert!(
        !limits.join(format!("{key}.107.json")).exists(),
        "expired record removed"
    );
    for (name, _) in &junk {
        assert!(limits.join(name).exists(), "junk left alone: {name}");
    }
}

/// `--max-cost-usd` on a fleet: each loop (started by `ralph fleet` with `RALPH_FLEET` and
/// `RALPH_FLEET_MAX_COST_USD`) records its spend, and once the fleet's total reaches the cap,
/// no loop of the fleet starts another iteration: they stop as after `max_cost_usd`.
#[test]
fn the_fleet_cost_cap_stops_its_loops_as_max_cost_usd_does() {
    let fleet = |p: &Project| {
        let mut cmd = claude_run(p);
        cmd.env("RALPH_FLEET", "f1")
            .env("RALPH_FLEET_MAX_COST_USD", "1.00");
        cmd
    };
    const COSTLY: &str = "[call *]\nstream-json costly.jsonl\n";
    let task = |p: &Project, name: &str| {
        p.write(
            "RALPH_TASK.md",
            &format!("---\ntask: {name}\nmax_iterations: 5\n---\n- [ ] x\n"),
        );
    };
    // A: one iteration ($0.60 of the $1.00), then its own max_iterations.
    let a = claude_project(Project::new(), COSTLY, 0);
    a.write(
        "RALPH_TASK.md",
        "---\ntask: A\nmax_iterations: 1\n---\n- [ ] x\n",
    );
    Run::finish(spawn(fleet(&a)), Duration::from_secs(30)).expect_code(3);
    // B: its first iteration brings the fleet to $1.20; it starts no second.
    let b = claude_project(a.beside(), COSTLY, 0);
    task(&b, "B");
    let run = Run::finish(spawn(fleet(&b)), Duration::from_secs(30));
    run.expect_code(1);
    let state = b.state();
    assert_eq!(state["iteration"], 1, "{state}");
    assert_eq!(state["status"], "failed", "as after max_cost_usd: {state}");
    let reason = state["reason"].as_str().unwrap();
    assert!(
        reason.contains("the fleet f1 has cost $1.20") && reason.contains("cap"),
        "{reason}"
    );
    assert!(run.stdout.contains("the fleet f1"), "{}", run.stdout);
    // C, of the same fleet, starts after the cap was reached: no iteration at all.
    let c = claude_project(a.beside(), COSTLY, 0);
    task(&c, "C");
    Run::finish(spawn(fleet(&c)), Duration::from_secs(30)).expect_code(1);
    assert!(!c.exists("counter"), "C's agent never started");
    // A loop of another fleet, or of none, is not stopped by f1's cap.
    let d = claude_project(beside(&a, "D"), DONE_NOW, 0);
    let mut cmd = claude_run(&d);
    cmd.env("RALPH_FLEET", "f2")
        .env("RALPH_FLEET_MAX_COST_USD", "1.00");
    Run::finish(spawn(cmd), Duration::from_secs(30)).expect_code(0);
    let spent = std::fs::read_dir(a.state_path().join("fleets/f1/spent"))
        .unwrap()
        .count();
    assert_eq!(spent, 2, "A's and B's spend recorded (C spent nothing)");
}

/// A bad `RALPH_FLEET_MAX_COST_USD` is a usage error that names the variable, before any
/// iteration runs.
#[test]
fn a_bad_fleet_cap_is_refused_naming_the_variable() {
    let p = claude_project(task("A"), DONE_NOW, 0);
    let mut cmd = claude_run(&p);
    cmd.env("RALPH_FLEET", "f1")
        .env("RALPH_FLEET_MAX_COST_USD", "lots");
    let run = Run::finish(spawn(cmd), Duration::from_secs(30));
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("RALPH_FLEET_MAX_COST_USD=\"lots\" is not a cost"),
        "{}",
        run.stderr
    );
    assert!(!p.exists("counter"));
}

/// `ralph doctor` warns when Claude Code is logged in with a claude.ai account, whose token
/// rotates (many sessions refreshing it log each other out), says what to use instead, and
/// does not count it a problem; with `CLAUDE_CODE_OAUTH_TOKEN` (`claude setup-token`) set, it
/// does not warn.
#[test]
fn doctor_warns_when_claude_code_s_login_rotates() {
    use std::os::unix::fs::PermissionsExt;
    let p = Project::new();
    let bin = p.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let claude = bin.join("claude");
    std::fs::write(&claude, "#!/bin/sh\necho '2.1.197 (Claude Code)'\n").unwrap();
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
    p.write(
        "home/.claude/.credentials.json",
        &fixture("claude-ai-login-credentials.json"),
    );
    let doctor = |token: Option<&str>| {
        let mut cmd = p.ralph();
        cmd.arg("doctor")
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .env("HOME", p.path("home"))
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("ANTHROPIC_AUTH_TOKEN")
            .env_remove("CLAUDE_CONFIG_DIR")
            .env_remove("CLAUDE_CODE_USE_BEDROCK")
            .env_remove("CLAUDE_CODE_USE_VERTEX")
            .env_remove("CLAUDE_CODE_OAUTH_TOKEN");
        if let Some(token) = token {
            cmd.env("CLAUDE_CODE_OAUTH_TOKEN", token);
        }
        Run::from_output(cmd.output().unwrap())
    };
    let warned = doctor(None);
    let out = &warned.stdout;
    assert!(
        out.contains("warning: Claude Code is logged in with a claude.ai account"),
        "{out}"
    );
    assert!(out.contains("claude setup-token"), "{out}");
    assert!(!out.contains("sk-ant-ort01"), "no secret shown: {out}");
    // A warning, not one of the problems listed at the end.
    assert!(
        !out.lines()
            .any(|l| l.trim_start().starts_with("- Claude Code is logged in")),
        "{out}"
    );
    let safe = doctor(Some("sk-ant-oat01-long-lived"));
    assert!(
        !safe.stdout.contains("warning: Claude Code"),
        "{}",
        safe.stdout
    );
    assert!(
        safe.stdout
            .contains("no installed agent uses a login ralph knows to rotate"),
        "{}",
        safe.stdout
    );
}
