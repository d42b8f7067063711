//! Harness overhead per iteration: many iterations of an agent that exits at once, against the
//! same agent started as many times by a bare loop.
//!
//! The agent is the fake agent running one helper, `ralph-bench __stamp`, that appends the
//! time; ralph's per-iteration cost is the gap between consecutive stamps, and the bare loop's
//! gaps (the same agent, spawned with its prompt on stdin and its output read, nothing else)
//! are subtracted. Durable state stays on: ralph fsyncs `state.json` once an iteration (on a
//! blocking thread while the agent runs), and [`fsync_cost`] measures what one such atomic
//! write costs on this disk.

use std::io::{Read as _, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::setup::{Bins, Project, Stats, q, read_stamps, stats_ms};

/// What ralph costs per iteration beyond the agent's own run.
#[derive(Debug, Clone)]
pub struct Overhead {
    /// Where the project lived: its file system decides what an fsync costs.
    pub filesystem: String,
    pub iterations: u32,
    /// Gaps between agent starts under ralph, ms.
    pub ralph: Stats,
    /// Gaps between agent starts in the bare loop, ms.
    pub alone: Stats,
    /// Total wall time of `ralph run`, and of the bare loop.
    pub ralph_total: Duration,
    pub alone_total: Duration,
    /// One atomic write with fsync (temp file, write, fdatasync, rename), ms, median.
    pub fsync_write_ms: f64,
}

impl Overhead {
    /// Median extra time per iteration, ms.
    pub fn median_ms(&self) -> f64 {
        self.ralph.median - self.alone.median
    }

    /// Mean extra time per iteration from the totals, ms (includes ralph's start-up once).
    pub fn mean_ms(&self) -> f64 {
        (self.ralph_total.as_secs_f64() - self.alone_total.as_secs_f64()) * 1e3
            / f64::from(self.iterations)
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "filesystem": self.filesystem,
            "iterations": self.iterations,
            "median_overhead_ms": self.median_ms(),
            "mean_overhead_ms": self.mean_ms(),
            "ralph_gap": self.ralph.json(),
            "agent_alone_gap": self.alone.json(),
            "ralph_total_s": self.ralph_total.as_secs_f64(),
            "agent_alone_total_s": self.alone_total.as_secs_f64(),
            "atomic_fsync_write_ms": self.fsync_write_ms,
        })
    }
}

/// Runs the measurement with the project under `parent`.
///
/// In five rounds, each a bare loop, a `ralph run`, and a bare loop again, so that a change
/// in the machine's load (others share it) weighs on both sides alike.
pub fn run(bins: &Bins, parent: &Path, iterations: u32) -> Overhead {
    const ROUNDS: u32 = 5;
    let per_round = (iterations / ROUNDS).max(2);
    let mut ralph = Vec::new();
    let mut alone = Vec::new();
    let mut ralph_total = Duration::ZERO;
    let mut alone_total = Duration::ZERO;
    let mut fsync = Vec::new();
    for _ in 0..ROUNDS {
        let p = Project::new_in(parent, per_round, "");
        let stamps = p.path().join("stamps.txt");
        let script = format!("run {} __stamp {} start\n", q(&bins.me), q(&stamps));
        let agent = p.agent(bins, "script.txt", &script);
        let prompt = sample_prompt(bins, &p, &agent);
        // ralph starts a command line of plain words without a shell, so the bare loop does too.
        let argv = p.agent_argv(bins, "script.txt");

        alone_total += bare_loop(&p, &argv, &[], &prompt, per_round / 2, &stamps, &mut alone);
        let start = Instant::now();
        let status = Command::new(&bins.ralph)
            .args(["run", "--no-tui", "-C"])
            .arg(p.path())
            .args(["--agent-cmd", &agent])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("run ralph");
        ralph_total += start.elapsed();
        if status.code() != Some(3) {
            eprintln!("  warning: ralph run exited with {status} (expected 3, max_iterations)");
        }
        ralph.extend(gaps(&read_stamps(&stamps)));
        std::fs::remove_file(&stamps).ok();
        alone_total += bare_loop(
            &p,
            &argv,
            &[],
            &prompt,
            per_round - per_round / 2,
            &stamps,
            &mut alone,
        );
        fsync.push(fsync_cost(p.path()));
    }

    let o = Overhead {
        filesystem: filesystem(parent),
        iterations: per_round * ROUNDS,
        ralph: stats_ms(&mut ralph),
        alone: stats_ms(&mut alone),
        ralph_total,
        alone_total,
        fsync_write_ms: stats_ms(&mut fsync).median,
    };
    eprintln!(
        "  {} iterations on {}: ralph gap {:.2} ms, alone {:.2} ms: overhead median {:.2} ms, mean {:.2} ms; one atomic fsync write {:.2} ms",
        o.iterations,
        o.filesystem,
        o.ralph.median,
        o.alone.median,
        o.median_ms(),
        o.mean_ms(),
        o.fsync_write_ms
    );
    o
}

/// The prompt ralph gives the agent, from a one-iteration run in a scratch project beside `p`.
fn sample_prompt(bins: &Bins, p: &Project, agent: &str) -> Vec<u8> {
    let scratch = Project::new_in(p.path(), 1, "");
    let _ = Command::new(&bins.ralph)
        .args(["run", "--no-tui", "-C"])
        .arg(scratch.path())
        .args(["--agent-cmd", agent])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let prompt = std::fs::read(
        scratch
            .path()
            .join(".ralph/logs/run-0001-iter-0001.prompt.md"),
    )
    .unwrap_or_default();
    std::fs::remove_file(p.path().join("stamps.txt")).ok();
    prompt
}

/// The agent (`argv`, started directly, with `env` added) run `n` times in a row, as bare as it
/// gets: the prompt on stdin, its output read to the end. Appends the gaps between starts;
/// returns the wall time.
pub fn bare_loop(
    p: &Project,
    argv: &[String],
    env: &[(&str, &Path)],
    prompt: &[u8],
    n: u32,
    stamps: &Path,
    gaps_out: &mut Vec<f64>,
) -> Duration {
    let start = Instant::now();
    for i in 1..=n {
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .current_dir(p.path())
            .env("RALPH_ITERATION", i.to_string())
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the agent");
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(prompt).ok();
        drop(stdin);
        let mut sink = Vec::new();
        child
            .stdout
            .take()
            .expect("stdout")
            .read_to_end(&mut sink)
            .ok();
        child
            .stderr
            .take()
            .expect("stderr")
            .read_to_end(&mut sink)
            .ok();
        child.wait().expect("wait for the agent");
    }
    let wall = start.elapsed();
    gaps_out.extend(gaps(&read_stamps(stamps)));
    std::fs::remove_file(stamps).ok();
    wall
}

/// The file system type of `dir` (`ext2/ext3` is how `stat -f` names ext4, `tmpfs`, …).
pub fn filesystem(dir: &Path) -> String {
    Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(dir)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// Milliseconds between consecutive `start` stamps.
pub fn gaps(stamps: &[(String, u32, u128)]) -> Vec<f64> {
    stamps
        .windows(2)
        .map(|w| (w[1].2.saturating_sub(w[0].2)) as f64 / 1e6)
        .collect()
}

/// The median cost of one atomic durable write (what `state.json` gets), on the project's disk.
fn fsync_cost(dir: &std::path::Path) -> f64 {
    let mut times: Vec<f64> = (0..20)
        .map(|_| {
            let start = Instant::now();
            let mut tmp = tempfile::NamedTempFile::new_in(dir).expect("temp file");
            tmp.write_all(&[b'x'; 600]).expect("write");
            tmp.as_file().sync_data().expect("fdatasync");
            tmp.persist(dir.join("probe.json")).expect("rename");
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    stats_ms(&mut times).median
}
