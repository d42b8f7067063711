//! `ralph-bench peers`: ralph beside the other loops on the same fake agents, in one run.
//!
//! Each peer is started as a user would start it, with the fake agent standing in for the agent
//! CLI it calls, and measured in alternation with ralph (one ralph measurement, then the
//! peer's, round after round) so that a change in the machine's load weighs on both alike:
//!
//! - many iterations of an agent that exits at once, printing nothing;
//! - the overhead per iteration on each tool's fastest path (the agent says what the tool
//!   waits for), from `__stamp` gaps minus those of a bare loop running the same argv;
//! - a huge plain-text output and a huge Claude stream-json output, wall time and peak RSS;
//! - start-up (`--version`).
//!
//! The peers come from `make bench-peers`, which installs them under `target/peers`. One that is
//! not installed is reported as such, never guessed.
//!
//! pyralph 0.1.0 (PyPI) runs a PRD (`.ralph/prd.json`): its `execute` phase gives each user
//! story to `claude -p --dangerously-skip-permissions` (prompt on stdin, output captured whole),
//! and retries a story whose output lacks `STATUS: SUCCESS` up to `--retries` times. So "N
//! iterations, agent exits at once" is one story with `--retries N`; its fastest path is N
//! stories whose agent prints `STATUS: SUCCESS`, with `--skip-verify` (no test command to run,
//! as ralph's tasks here have none).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use ralph_bench::corpus::Corpus;

use crate::iterations;
use crate::process::{self, median};
use crate::setup::{Bins, Project, measure, q, read_stamps, stats_ms};
use crate::startup::time_runs;

const MIB: u64 = 1 << 20;

/// What `make bench-peers` installs, relative to the target directory.
const PYRALPH: &str = "peers/pyralph-venv/bin/ralph";
const ORCHESTRATOR: &str = "peers/ralph-orchestrator/bin/ralph";

/// The sizes of one run.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub iterations: u32,
    pub overhead_iterations: u32,
    pub mib: u64,
    pub rounds: usize,
}

/// One row: ralph's value and each peer's (`None`: not measured), lower is better.
#[derive(Debug, Clone)]
pub struct Row {
    pub what: String,
    pub unit: &'static str,
    pub ralph: f64,
    pub pyralph: Option<f64>,
    pub orchestrator: Option<f64>,
}

impl Row {
    fn cell(v: Option<f64>, ralph: f64, unit: &str) -> String {
        match v {
            Some(v) => format!("{} ({:.2}x)", fmt(v, unit), ralph / v),
            None => "-".into(),
        }
    }

    fn json(&self) -> serde_json::Value {
        let ratio = |v: Option<f64>| v.map(|v| self.ralph / v);
        serde_json::json!({
            "measure": self.what,
            "unit": self.unit,
            "ralph": self.ralph,
            "pyralph": self.pyralph,
            "ralph_over_pyralph": ratio(self.pyralph),
            "ralph_orchestrator": self.orchestrator,
            "ralph_over_ralph_orchestrator": ratio(self.orchestrator),
        })
    }
}

fn fmt(v: f64, unit: &str) -> String {
    match unit {
        "s" => format!("{v:.2} s"),
        "ms" => format!("{v:.2} ms"),
        "MiB" => format!("{v:.1} MiB"),
        _ => format!("{v:.3} {unit}"),
    }
}

/// The peers installed under `target`.
struct Peers {
    pyralph: Option<PathBuf>,
    orchestrator: Option<PathBuf>,
}

/// Runs everything; prints the table and writes `target/bench/peers.json`.
pub fn run(bins: &Bins, plan: Plan) -> Result<serde_json::Value, String> {
    let found = |rel: &str| Some(bins.target.join(rel)).filter(|p| p.is_file());
    let peers = Peers {
        pyralph: found(PYRALPH),
        orchestrator: found(ORCHESTRATOR),
    };
    if peers.pyralph.is_none() {
        eprintln!(
            "pyralph is not installed ({}): `make bench-peers` installs it",
            bins.target.join(PYRALPH).display()
        );
    }
    if let Some(o) = &peers.orchestrator {
        // Installed but not driven yet: say so instead of leaving a silent gap.
        eprintln!(
            "ralph-orchestrator is installed ({}) but this harness does not drive it yet",
            o.display()
        );
    }
    let mut rows = Vec::new();

    eprintln!("{} iterations, agent exits at once:", plan.iterations);
    rows.push(iterations_row(bins, &peers, plan));

    eprintln!("overhead per iteration on each tool's fastest path:");
    rows.push(overhead_row(bins, &peers, plan));

    eprintln!("{} MiB through each:", plan.mib);
    rows.extend(stream_rows(bins, &peers, plan));

    eprintln!("start-up:");
    rows.push(startup_row(bins, &peers));

    println!("\n{}", table(&rows));
    Ok(serde_json::json!({
        "plan": {
            "iterations": plan.iterations,
            "overhead_iterations": plan.overhead_iterations,
            "mib": plan.mib,
            "rounds": plan.rounds,
        },
        "peers": {
            "pyralph": peers.pyralph.as_ref().map(|p| p.display().to_string()),
            "ralph_orchestrator": peers.orchestrator.as_ref().map(|p| p.display().to_string()),
        },
        "rows": rows.iter().map(Row::json).collect::<Vec<_>>(),
    }))
}

fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| | ralph | pyralph 0.1.0 (ralph/peer) | ralph-orchestrator 2.10.1 (ralph/peer) |\n| --- | --- | --- | --- |\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            r.what,
            fmt(r.ralph, r.unit),
            Row::cell(r.pyralph, r.ralph, r.unit),
            Row::cell(r.orchestrator, r.ralph, r.unit),
        ));
    }
    out
}

/// A pyralph project: `stories` pending user stories in `.ralph/prd.json`, and a fake `claude`
/// running `script` first on PATH. Returns the project and that PATH.
fn pyralph_project(bins: &Bins, stories: u32, script: &str) -> (Project, String) {
    let p = Project::new(1, "");
    let stories: Vec<_> = (1..=stories)
        .map(|i| {
            serde_json::json!({
                "id": format!("US-{i:04}"),
                "description": "never done",
                "acceptanceCriteria": [],
                "status": "pending",
            })
        })
        .collect();
    let prd = serde_json::json!({
        "id": "bench",
        "description": "Benchmark pyralph with a scripted agent",
        "userStories": stories,
    });
    std::fs::create_dir_all(p.path().join(".ralph")).expect("the .ralph directory");
    p.write(".ralph/prd.json", &prd.to_string());
    let path = p.fake_claude(bins, script);
    (p, path)
}

/// How a user runs pyralph's loop, non-interactively, in `dir` (`env -C`: it works in its
/// current directory).
fn pyralph_argv(bin: &Path, dir: &Path, retries: u32) -> Vec<String> {
    let mut argv: Vec<String> = vec!["env".into(), "-C".into(), dir.display().to_string()];
    argv.push(bin.display().to_string());
    argv.extend(
        [
            "execute",
            "-y",
            "--non-interactive",
            "--no-color",
            "--skip-verify",
            "--no-archive",
            "--retries",
        ]
        .map(String::from),
    );
    argv.push(retries.to_string());
    argv
}

fn measure_argv(bins: &Bins, argv: &[String], path: &str) -> crate::setup::Measured {
    let args: Vec<&str> = argv.iter().map(String::as_str).collect();
    measure(bins, &args, &[("PATH", path)], Stdio::null())
}

fn ralph_argv(bins: &Bins, p: &Project, agent: &[&str]) -> Vec<String> {
    let mut argv = vec![
        bins.ralph.display().to_string(),
        "run".into(),
        "--no-tui".into(),
        "-C".into(),
        p.path().display().to_string(),
    ];
    argv.extend(agent.iter().map(|s| s.to_string()));
    argv
}

fn iterations_row(bins: &Bins, peers: &Peers, plan: Plan) -> Row {
    let n = plan.iterations;
    let path = std::env::var("PATH").unwrap_or_default();
    let (mut ralph, mut py) = (Vec::new(), Vec::new());
    for _ in 0..plan.rounds {
        let p = Project::new(n, "");
        let agent = p.agent(bins, "script.txt", "");
        let m = measure_argv(bins, &ralph_argv(bins, &p, &["--agent-cmd", &agent]), &path);
        ralph.push(m.wall);
        if let Some(bin) = &peers.pyralph {
            let (p, path) = pyralph_project(bins, 1, "");
            let m = measure_argv(bins, &pyralph_argv(bin, p.path(), n), &path);
            py.push(m.wall);
        }
    }
    let secs = |v: &mut Vec<Duration>| (!v.is_empty()).then(|| median(v).as_secs_f64());
    let row = Row {
        what: format!(
            "{n} iterations, agent exits at once (wall, median of {})",
            plan.rounds
        ),
        unit: "s",
        ralph: median(&mut ralph).as_secs_f64(),
        pyralph: secs(&mut py),
        orchestrator: None,
    };
    eprintln!("  ralph {:.2} s, pyralph {:?}", row.ralph, row.pyralph);
    row
}

fn overhead_row(bins: &Bins, peers: &Peers, plan: Plan) -> Row {
    let per_round = (plan.overhead_iterations / plan.rounds as u32).max(10);
    let (mut ralph, mut py) = (Vec::new(), Vec::new());
    for _ in 0..plan.rounds {
        ralph.push(iterations::run(bins, &std::env::temp_dir(), per_round).median_ms());
        if let Some(bin) = &peers.pyralph {
            py.push(pyralph_overhead(bins, bin, per_round));
        }
    }
    let mid = |v: &mut Vec<f64>| (!v.is_empty()).then(|| stats_ms(v).median);
    Row {
        what: format!(
            "overhead per iteration, fastest path ({} iterations, median of {} rounds)",
            per_round * plan.rounds as u32,
            plan.rounds
        ),
        unit: "ms",
        ralph: mid(&mut ralph).unwrap_or(f64::NAN),
        pyralph: mid(&mut py),
        orchestrator: None,
    }
}

/// pyralph's median gap between agent starts with `n` stories each done at the first try, less
/// a bare loop's running the same `claude` argv.
fn pyralph_overhead(bins: &Bins, bin: &Path, n: u32) -> f64 {
    let stamps_name = "stamps.txt";
    let (p, path) = pyralph_project(bins, n, "");
    let stamps = p.path().join(stamps_name);
    p.write(
        "claude-script.txt",
        &format!(
            "run {} __stamp {} start\nprint STATUS: SUCCESS\n",
            q(&bins.me),
            q(&stamps)
        ),
    );
    let m = measure_argv(bins, &pyralph_argv(bin, p.path(), 1), &path);
    if m.code != 0 {
        eprintln!("  warning: pyralph exited with {}", m.code);
    }
    let mut tool = iterations::gaps(&read_stamps(&stamps));
    std::fs::remove_file(&stamps).ok();
    let claude = p.path().join("bin/claude").display().to_string();
    let argv = [claude, "-p".into(), "--dangerously-skip-permissions".into()];
    // A prompt of the size pyralph's developer template renders to here (its log shows 20 KiB).
    let prompt = vec![b'x'; 20 * 1024];
    let mut alone = Vec::new();
    iterations::bare_loop(&p, &argv, &prompt, n, &stamps, &mut alone);
    let (t, a) = (stats_ms(&mut tool).median, stats_ms(&mut alone).median);
    eprintln!(
        "  pyralph, {n} stories: gap {t:.2} ms, alone {a:.2} ms: overhead {:.2} ms",
        t - a
    );
    t - a
}

fn stream_rows(bins: &Bins, peers: &Peers, plan: Plan) -> Vec<Row> {
    let bytes = plan.mib * MIB;
    let dir = tempfile::tempdir().expect("a directory for the stream");
    let json = dir.path().join("claude.jsonl");
    std::fs::File::create(&json)
        .and_then(|mut f| f.write_all(&Corpus::ClaudeStreamJson.generate(bytes as usize, false)))
        .expect("write the stream-json corpus");
    let scripts = [
        format!("flood {bytes}\nprint STATUS: SUCCESS\n"),
        format!("run cat {}\nprint STATUS: SUCCESS\n", q(&json)),
    ];
    // [format][ralph wall, ralph rss, py wall, py rss]
    let mut seen: [[Vec<f64>; 4]; 2] = Default::default();
    for _ in 0..plan.rounds {
        for t in process::run(bins, &[plan.mib], 1) {
            let i = usize::from(t.format != "plain text");
            seen[i][0].push(t.ralph.as_secs_f64());
            seen[i][1].push(t.ralph_rss_kb as f64 / 1024.0);
        }
        if let Some(bin) = &peers.pyralph {
            for (i, script) in scripts.iter().enumerate() {
                let (p, path) = pyralph_project(bins, 1, script);
                let start = Instant::now();
                let m = measure_argv(bins, &pyralph_argv(bin, p.path(), 1), &path);
                eprintln!(
                    "  pyralph, {}: {:.2} s, peak RSS {:.1} MiB (exit {}, {:.1} s with setup)",
                    ["plain text", "claude stream-json"][i],
                    m.wall.as_secs_f64(),
                    m.maxrss_kb as f64 / 1024.0,
                    m.code,
                    start.elapsed().as_secs_f64()
                );
                seen[i][2].push(m.wall.as_secs_f64());
                seen[i][3].push(m.maxrss_kb as f64 / 1024.0);
            }
        }
    }
    let mid = |v: &mut Vec<f64>| (!v.is_empty()).then(|| stats_ms(v).median);
    let max = |v: &[f64]| v.iter().copied().reduce(f64::max);
    let mut rows = Vec::new();
    for (i, name) in ["plain text", "Claude stream-json"].iter().enumerate() {
        let [rw, rr, pw, pr] = &mut seen[i];
        rows.push(Row {
            what: format!("{} MiB {name}, wall (median of {})", plan.mib, plan.rounds),
            unit: "s",
            ralph: mid(rw).unwrap_or(f64::NAN),
            pyralph: mid(pw),
            orchestrator: None,
        });
        rows.push(Row {
            what: format!("{} MiB {name}, peak RSS (largest)", plan.mib),
            unit: "MiB",
            ralph: max(rr).unwrap_or(f64::NAN),
            pyralph: max(pr),
            orchestrator: None,
        });
    }
    rows
}

fn startup_row(bins: &Bins, peers: &Peers) -> Row {
    const RUNS: usize = 50;
    let (mut ralph, mut py) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        ralph.push(time_runs(&bins.ralph, &["--version"], RUNS).median);
        if let Some(bin) = &peers.pyralph {
            py.push(time_runs(bin, &["--version"], RUNS).median);
        }
    }
    let mid = |v: &mut Vec<f64>| (!v.is_empty()).then(|| stats_ms(v).median);
    Row {
        what: format!("`--version` (median of 3 x {RUNS})"),
        unit: "ms",
        ralph: mid(&mut ralph).unwrap_or(f64::NAN),
        pyralph: mid(&mut py),
        orchestrator: None,
    }
}
