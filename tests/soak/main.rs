//! Soak tests, run by `make soak` (release build): a thousand short iterations with random
//! kills of the agent and of ralph, and a gigabyte of agent output.
//!
//! They are too slow for `make test`: this target has `test = false`, so `cargo test` skips it
//! unless asked for by name. `SOAK_ITERATIONS` and `SOAK_SEED` change the length and the
//! random schedule (the seed is printed, so a failing schedule can be replayed).
//!
//! The harness and the output and process checks are the end-to-end tests' own.

#[path = "../e2e/util.rs"]
#[allow(dead_code)]
mod util;

// Only for their helpers (`watch`, `OutputCheck`, `agent_processes`); `make soak` runs the
// `soak_` tests alone.
#[path = "../e2e/crashes.rs"]
#[allow(dead_code)]
mod crashes;
#[path = "../e2e/hostile.rs"]
#[allow(dead_code)]
mod hostile;

use std::collections::BTreeSet;
use std::process::Child;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::crashes::agent_processes;
use crate::hostile::{open_fds, peak_rss_kib, run_agent_watched};
use crate::util::*;

/// A small xorshift generator: no dependency, and a seed replays a schedule exactly.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// One iteration's behaviour, drawn at random: mostly quick and well behaved, sometimes
/// leaving processes behind, failing, asking, or giving the killer time to strike.
fn section(rng: &mut Rng, iteration: u64) -> String {
    let body = match rng.below(20) {
        0..=5 => "print working\nprint still working\n".to_string(),
        6 => "spawn-grandchild 300s --quiet\nprint left a background process\n".to_string(),
        7 => "spawn-grandchild 300s\nprint a background process holds my output\n".to_string(),
        8 => "print failing\nexit 3\n".to_string(),
        9 => "question \"Go on?\" --option yes --option no --default yes\nsignal QUESTION\n"
            .to_string(),
        10 => "signal DONE\n".to_string(),
        11 => "no-stdin\nprint not reading my prompt\n".to_string(),
        12..=15 => format!("print napping\nsleep {}ms\n", 50 + rng.below(400)),
        16 => "print closing my output\nclose-stdout\nsleep 100ms\n".to_string(),
        17 => "flood 2M --line-len 200\n".to_string(),
        18 => "ignore-sigterm\nprint stubborn\nsleep 300ms\n".to_string(),
        _ => "print hanging until someone stops me\nhang\n".to_string(),
    };
    format!("[iteration {iteration}]\n{body}")
}

/// What the killer did.
#[derive(Debug, Default)]
struct Kills {
    agent_sigkill: u32,
    agent_sigterm: u32,
    ralph_graceful: u32,
    ralph_sigkill: u32,
}

#[test]
#[ignore = "slow; run by `make soak`"]
fn soak_a_thousand_iterations_with_random_kills_leak_no_process_or_file() {
    let iterations = env_u64("SOAK_ITERATIONS").unwrap_or(1000);
    let seed = env_u64("SOAK_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            | 1
    });
    eprintln!("soak: {iterations} iterations, SOAK_SEED={seed}");
    let mut rng = Rng(seed);
    let p = Project::with_task(
        "task: Soak\nmax_iterations: 1000000\nquestion_timeout: 0\nmax_consecutive_failures: 1000000\niteration_timeout: 2s",
        "- [ ] never done\n",
    );
    let script: String = (1..=iterations).map(|i| section(&mut rng, i)).collect();
    let agent = p.agent(&script);
    let max = iterations.to_string();

    let started = Instant::now();
    let mut kills = Kills::default();
    let mut max_fds = 0usize;
    let mut peak_kib = 0u64;
    let mut lifetimes = 0u32;
    let mut fds_by_lifetime = Vec::new();
    loop {
        lifetimes += 1;
        let mut cmd = p.ralph();
        cmd.args([
            "run",
            "--no-tui",
            "--agent-cmd",
            &agent,
            "--max-iterations",
            &max,
        ]);
        // Output goes to a file, not a pipe nobody reads.
        let log = std::fs::File::create(p.path(format!("ralph-{lifetimes}.out").as_str())).unwrap();
        cmd.stdout(log.try_clone().unwrap()).stderr(log);
        let mut child: Child = cmd.spawn().unwrap();
        let pid = child.id();
        let mut lifetime_fds: Vec<usize> = Vec::new();
        let mut next_strike = Instant::now() + Duration::from_millis(100 + rng.below(600));
        let mut killed_hard = false;
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if let Some(n) = open_fds(pid) {
                lifetime_fds.push(n);
            }
            if let Some(kib) = peak_rss_kib(pid) {
                peak_kib = peak_kib.max(kib);
            }
            if Instant::now() >= next_strike {
                next_strike = Instant::now() + Duration::from_millis(100 + rng.below(600));
                match rng.below(100) {
                    // ralph itself, rarely, so that most lifetimes are long enough to leak.
                    0..=2 => {
                        let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
                        kills.ralph_sigkill += 1;
                        killed_hard = true;
                    }
                    3..=5 => {
                        let sig = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP]
                            [rng.below(3) as usize];
                        let _ = kill(Pid::from_raw(pid as i32), sig);
                        kills.ralph_graceful += 1;
                    }
                    n => {
                        let victims = agent_processes(&p);
                        if !victims.is_empty() {
                            let v = victims[rng.below(victims.len() as u64) as usize];
                            if n % 2 == 0 {
                                let _ = kill(Pid::from_raw(v), Signal::SIGKILL);
                                kills.agent_sigkill += 1;
                            } else {
                                let _ = kill(Pid::from_raw(v), Signal::SIGTERM);
                                kills.agent_sigterm += 1;
                            }
                        }
                    }
                }
            }
            assert!(
                started.elapsed() < Duration::from_secs(3600),
                "the soak ran for an hour"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        if let Some(&m) = lifetime_fds.iter().max() {
            max_fds = max_fds.max(m);
        }
        fds_by_lifetime.push(lifetime_fds);
        let out = std::fs::read_to_string(p.path(format!("ralph-{lifetimes}.out").as_str()))
            .unwrap_or_default();
        assert!(
            !out.contains("already working here"),
            "lifetime {lifetimes}: a dead run's lock was not recovered:\n{out}"
        );
        let state = p.state();
        match status.code() {
            Some(3) => {
                assert_eq!(state["status"], "max_iterations", "{state}");
                break;
            }
            Some(130) => {
                assert_eq!(state["status"], "stopped", "lifetime {lifetimes}: {state}");
                assert!(state["agent_pgid"].is_null(), "{state}");
                // A graceful stop leaves nothing of the agent behind.
                let start = Instant::now();
                while !agent_processes(&p).is_empty() {
                    assert!(
                        start.elapsed() < Duration::from_secs(5),
                        "lifetime {lifetimes}: agent processes outlived a graceful stop: {:?}",
                        agent_processes(&p)
                    );
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            None if killed_hard => {}
            other => panic!(
                "lifetime {lifetimes}: ralph ended with {other:?} ({status:?}):\n{}",
                &out[out.len().saturating_sub(4000)..]
            ),
        }
    }

    // Nothing of any agent is left, including the orphans of the runs killed outright.
    let start = Instant::now();
    while !agent_processes(&p).is_empty() {
        let left = agent_processes(&p);
        if start.elapsed() > Duration::from_secs(5) {
            for pid in &left {
                let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
            }
            panic!("agent processes outlived the soak: {left:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }

    // The record is whole: every line parses, every iteration started, none was skipped.
    let text = p.read(".ralph/events.jsonl");
    let mut torn = 0;
    let mut starts = Vec::new();
    for line in text.lines() {
        match serde_json::from_str::<serde_json::Value>(line) {
            Ok(v) if v["event"] == "iteration_start" => {
                starts.push(v["iteration"].as_u64().unwrap())
            }
            Ok(_) => {}
            Err(_) => torn += 1,
        }
    }
    let unique: BTreeSet<u64> = starts.iter().copied().collect();
    assert_eq!(
        unique,
        (1..=iterations).collect::<BTreeSet<u64>>(),
        "every iteration from 1 to {iterations} started"
    );
    assert_eq!(torn, 0, "torn lines in events.jsonl");
    let logs = std::fs::read_dir(p.path(".ralph/logs")).unwrap().count();

    // File descriptors: bounded, and no growth within a long lifetime.
    let longest = fds_by_lifetime
        .iter()
        .max_by_key(|v| v.len())
        .cloned()
        .unwrap_or_default();
    let early = longest
        .iter()
        .take(longest.len() / 4)
        .max()
        .copied()
        .unwrap_or(0);
    let late = longest
        .iter()
        .skip(3 * longest.len() / 4)
        .max()
        .copied()
        .unwrap_or(0);
    eprintln!(
        "soak: {iterations} iterations in {:?} over {lifetimes} ralph lifetimes; kills: {kills:?}; \
         {} iteration starts ({} restarted after a kill); max fds {max_fds} (longest lifetime: \
         {early} early, {late} late); peak RSS {peak_kib} KiB; {logs} log files",
        started.elapsed(),
        starts.len(),
        starts.len() - unique.len(),
    );
    assert!(max_fds < 64, "ralph had {max_fds} files open");
    assert!(
        late <= early + 8,
        "file descriptors grew: {early} early, {late} late"
    );
    assert!(peak_kib < 96 * 1024, "ralph peaked at {peak_kib} KiB");
}

#[test]
#[ignore = "slow; run by `make soak`"]
fn soak_a_gigabyte_of_output_in_bounded_memory_and_clean() {
    let p = Project::with_task("task: Gigabyte\nmax_iterations: 1", "- [ ] x\n");
    // Lines with escapes, invalid UTF-8 and CRs between the filler, then a gigabyte of filler.
    let agent = p.agent(
        "[iteration 1]\n\
         print \"\\e]0;pwned\\x07\\e[2Jtitle\\xff\\0\\rover\"\n\
         flood 1G --line-len 100\n\
         print \"\\e]52;c;cm0=\\x07 at the end\"\n\
         check-all\n\
         signal DONE\n",
    );
    let run = run_agent_watched(&p, &agent, &[], Duration::from_secs(1800));
    eprintln!(
        "soak: 1 GB through ralph in {:?}; {} bytes shown; peak RSS {} KiB; max fds {}",
        run.elapsed, run.out.total, run.peak_kib, run.max_fds
    );
    run.expect_code(0);
    run.out.assert_clean();
    assert!(run.out.total > 1_000_000_000, "{} bytes", run.out.total);
    assert!(
        run.peak_kib < 96 * 1024,
        "ralph peaked at {} KiB",
        run.peak_kib
    );
    let log = std::fs::metadata(p.path(".ralph/logs/run-0001-iter-0001.out"))
        .unwrap()
        .len();
    assert!(
        log <= 256 * 1024 * 1024 + 4096,
        "the raw log is capped: {log} bytes"
    );
}
