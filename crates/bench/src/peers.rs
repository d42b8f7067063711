//! `ralph-bench peers`: ralph beside the other loops on the same fake agents, in one run.
//!
//! Each peer is started as a user would start it, with the fake agent standing in for the agent
//! CLI it calls, and measured in alternation with ralph (one ralph measurement, then each
//! peer's, round after round) so that a change in the machine's load weighs on all alike:
//!
//! - many iterations of an agent that exits at once, printing nothing;
//! - the overhead per iteration on each tool's fastest path (the agent does what the tool
//!   waits for), from `__stamp` gaps minus those of a bare loop running the same argv with the
//!   same prompt on stdin;
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
//!
//! ralph-orchestrator 2.10.1 (crates.io `ralph-cli`) runs `ralph run --no-tui` in a directory
//! with a `ralph.yml` ([`orchestrator_config`]): the `custom` backend starting the fake agent
//! directly with the prompt on stdin (its default, `arg`, would put a prompt over 7000
//! characters in a temporary file and pass the agent a sentence naming it), or the `claude`
//! backend with a fake `claude` first on `PATH` for stream-json. Its loop reads events only from
//! the JSONL file it names in `RALPH_EVENTS_FILE` (what `ralph emit` appends to): after an
//! iteration with no event it polls that file 5 times 50 ms before it starts the next one, and a
//! completion (`LOOP_COMPLETE`) is looked for only after the iteration limit is checked, so a
//! run that should end on a completion gets a limit of 2. Its fastest path is an agent that
//! appends an event each iteration (with a fresh payload: the same event three times in a row
//! stops the loop as stale).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use ralph_bench::corpus::Corpus;

use crate::iterations;
use crate::process;
use crate::setup::{Bins, Measured, Project, loadavg, measure, q, read_stamps, stats_ms};
use crate::startup::time_runs;

const MIB: u64 = 1 << 20;

/// ralph-orchestrator's completion promise (its default), which its agent emits to end a run.
const COMPLETE: &str = "LOOP_COMPLETE";

/// What ralph-orchestrator's fastest-path agent emits each iteration: an event its loop routes
/// to the next iteration at once, which ends nothing.
const PROGRESS: &str = "task.progress";

/// The sizes of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub iterations: u32,
    pub overhead_iterations: u32,
    pub mib: u64,
    pub rounds: usize,
}

impl Plan {
    pub const DEFAULT: Plan = Plan {
        iterations: 100,
        overhead_iterations: 1000,
        mib: 200,
        rounds: 3,
    };

    /// `--iterations N --overhead N --mib N --rounds N`, each optional, over the defaults.
    pub fn parse(args: &[String]) -> Result<Plan, String> {
        let mut plan = Plan::DEFAULT;
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            if !["--iterations", "--overhead", "--mib", "--rounds"].contains(&flag.as_str()) {
                return Err(format!(
                    "unknown option '{flag}'; the options are --iterations, --overhead, --mib, --rounds"
                ));
            }
            let value: u64 = it
                .next()
                .and_then(|v| v.parse().ok())
                .filter(|&v| v > 0)
                .ok_or_else(|| format!("{flag} needs a positive number"))?;
            let small = || u32::try_from(value).map_err(|_| format!("{flag} {value} is too large"));
            match flag.as_str() {
                "--iterations" => plan.iterations = small()?,
                "--overhead" => plan.overhead_iterations = small()?,
                "--mib" => plan.mib = value,
                _ => plan.rounds = small()? as usize,
            }
        }
        Ok(plan)
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "iterations": self.iterations,
            "overhead_iterations": self.overhead_iterations,
            "mib": self.mib,
            "rounds": self.rounds,
        })
    }
}

/// A peer, in the order of the table's columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    Pyralph,
    Orchestrator,
}

impl Peer {
    pub const ALL: [Peer; 2] = [Peer::Pyralph, Peer::Orchestrator];

    fn name(self) -> &'static str {
        match self {
            Peer::Pyralph => "pyralph 0.1.0",
            Peer::Orchestrator => "ralph-orchestrator 2.10.1",
        }
    }

    /// Its key in `peers.json`.
    fn key(self) -> &'static str {
        match self {
            Peer::Pyralph => "pyralph",
            Peer::Orchestrator => "ralph_orchestrator",
        }
    }

    /// Where `make bench-peers` installs it, relative to the target directory.
    fn installed_at(self) -> &'static str {
        match self {
            Peer::Pyralph => "peers/pyralph-venv/bin/ralph",
            Peer::Orchestrator => "peers/ralph-orchestrator/bin/ralph",
        }
    }

    /// The fake-agent lines that end the peer's loop after the agent's output: pyralph reads
    /// its success marker in the output, ralph-orchestrator its completion event in its events
    /// file (its own `ralph emit`, first on the agent's `PATH`).
    fn finish(self) -> String {
        match self {
            Peer::Pyralph => "print STATUS: SUCCESS\n".into(),
            Peer::Orchestrator => format!("run ralph emit {COMPLETE} done\n"),
        }
    }
}

/// One row: ralph's value and each peer's (`None`: not measured), lower is better.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub what: String,
    pub unit: &'static str,
    pub ralph: f64,
    /// By [`Peer`], in [`Peer::ALL`]'s order.
    pub peers: [Option<f64>; 2],
}

impl Row {
    /// ralph's value over the peer's: below 1, ralph is faster or smaller.
    pub fn ratio(&self, peer: Peer) -> Option<f64> {
        self.peers[peer as usize].map(|v| self.ralph / v)
    }

    fn cell(&self, peer: Peer) -> String {
        match (self.peers[peer as usize], self.ratio(peer)) {
            (Some(v), Some(r)) => format!("{} ({r:.2}x)", fmt(v, self.unit)),
            _ => "-".into(),
        }
    }

    fn json(&self) -> serde_json::Value {
        let mut row = serde_json::json!({
            "measure": self.what,
            "unit": self.unit,
            "ralph": self.ralph,
        });
        for peer in Peer::ALL {
            row[peer.key()] = serde_json::json!(self.peers[peer as usize]);
            row[format!("ralph_over_{}", peer.key())] = serde_json::json!(self.ratio(peer));
        }
        row
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

/// The table, with ralph/peer ratios in brackets.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::from("| | ralph |");
    for peer in Peer::ALL {
        out.push_str(&format!(" {} (ralph/peer) |", peer.name()));
    }
    out.push_str("\n| --- | --- | --- | --- |\n");
    for r in rows {
        out.push_str(&format!("| {} | {} |", r.what, fmt(r.ralph, r.unit)));
        for peer in Peer::ALL {
            out.push_str(&format!(" {} |", r.cell(peer)));
        }
        out.push('\n');
    }
    out
}

/// What `peers.json` holds (the caller adds `machine` and `date`).
pub fn report(plan: Plan, installed: &[Option<PathBuf>; 2], rows: &[Row]) -> serde_json::Value {
    let mut peers = serde_json::Map::new();
    for peer in Peer::ALL {
        let path = installed[peer as usize].as_ref();
        peers.insert(
            peer.key().into(),
            serde_json::json!(path.map(|p| p.display().to_string())),
        );
    }
    serde_json::json!({
        "plan": plan.json(),
        "peers": peers,
        "rows": rows.iter().map(Row::json).collect::<Vec<_>>(),
    })
}

/// The peers installed under `target`, by [`Peer`].
struct Peers([Option<PathBuf>; 2]);

impl Peers {
    fn get(&self, peer: Peer) -> Option<&Path> {
        self.0[peer as usize].as_deref()
    }
}

/// Values gathered round after round: ralph's and each peer's.
#[derive(Default)]
struct Samples {
    ralph: Vec<f64>,
    peers: [Vec<f64>; 2],
}

impl Samples {
    fn push(&mut self, peer: Peer, v: f64) {
        self.peers[peer as usize].push(v);
    }

    /// The row of medians (`largest`: the largest values instead).
    fn row(mut self, what: String, unit: &'static str, largest: bool) -> Row {
        let pick = |v: &mut Vec<f64>| {
            (!v.is_empty()).then(|| {
                let s = stats_ms(v);
                if largest { s.max } else { s.median }
            })
        };
        let [py, orch] = &mut self.peers;
        Row {
            what,
            unit,
            ralph: pick(&mut self.ralph).unwrap_or(f64::NAN),
            peers: [pick(py), pick(orch)],
        }
    }
}

/// Runs everything; prints the table and returns what goes to `target/bench/peers.json`.
pub fn run(bins: &Bins, plan: Plan) -> Result<serde_json::Value, String> {
    let found = |peer: Peer| Some(bins.target.join(peer.installed_at())).filter(|p| p.is_file());
    let peers = Peers([found(Peer::Pyralph), found(Peer::Orchestrator)]);
    for peer in Peer::ALL {
        match peers.get(peer) {
            Some(p) => eprintln!("{}: {}", peer.name(), p.display()),
            None => eprintln!(
                "{} is not installed ({}): `make bench-peers` installs it",
                peer.name(),
                bins.target.join(peer.installed_at()).display()
            ),
        }
    }
    let mut rows = Vec::new();
    // The machine is shared: the load as each section starts goes next to the numbers.
    let mut loads = Vec::new();
    let mut section = |name: String| {
        let load = loadavg();
        eprintln!("{name} (load average {load:.2}):");
        loads.push(serde_json::json!({"section": name, "load_average": load}));
    };

    section(format!(
        "{} iterations, agent exits at once",
        plan.iterations
    ));
    rows.push(iterations_row(bins, &peers, plan));

    section("overhead per iteration on each tool's fastest path".into());
    rows.push(overhead_row(bins, &peers, plan));

    section(format!("{} MiB through each", plan.mib));
    rows.extend(stream_rows(bins, &peers, plan));

    section("start-up".into());
    rows.push(startup_row(bins, &peers));

    println!("\n{}", table(&rows));
    let mut json = report(plan, &peers.0, &rows);
    json["load_by_section"] = loads.into();
    Ok(json)
}

fn measure_argv(bins: &Bins, argv: &[String], path: &str) -> Measured {
    let args: Vec<&str> = argv.iter().map(String::as_str).collect();
    measure(bins, &args, &[("PATH", path)], Stdio::null())
}

fn warn_unless(m: &Measured, code: i32, what: &str) {
    if m.code != code {
        eprintln!("  warning: {what} exited with {} (expected {code})", m.code);
    }
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

/// `run ME __stamp STAMPS start`, and with `emit` the event the helper appends too.
fn stamp_script(me: &Path, stamps: &Path, emit: Option<&str>) -> String {
    let emit = emit.map(|t| format!(" --emit {t}")).unwrap_or_default();
    format!("run {} __stamp {} start{emit}\n", q(me), q(stamps))
}

/// The fake-agent scripts of the two stream rows for `peer`: `bytes` of plain text, and a copy
/// of the stream-json file `json`, each followed by what ends the peer's loop.
fn stream_scripts(peer: Peer, bytes: u64, json: &Path) -> [String; 2] {
    [
        format!("flood {bytes}\n{}", peer.finish()),
        format!("run cat {}\n{}", q(json), peer.finish()),
    ]
}

// ---------------------------------------------------------------------------------------------
// pyralph

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

/// pyralph's median gap between agent starts with `n` stories each done at the first try, less
/// a bare loop's running the same `claude` argv.
fn pyralph_overhead(bins: &Bins, bin: &Path, n: u32) -> f64 {
    let (p, path) = pyralph_project(bins, n, "");
    let stamps = p.path().join("stamps.txt");
    p.write(
        "claude-script.txt",
        &format!(
            "{}{}",
            stamp_script(&bins.me, &stamps, None),
            Peer::Pyralph.finish()
        ),
    );
    let m = measure_argv(bins, &pyralph_argv(bin, p.path(), 1), &path);
    warn_unless(&m, 0, "pyralph");
    let mut tool = iterations::gaps(&read_stamps(&stamps));
    std::fs::remove_file(&stamps).ok();
    let claude = p.path().join("bin/claude").display().to_string();
    let argv = [claude, "-p".into(), "--dangerously-skip-permissions".into()];
    // A prompt of the size pyralph's developer template renders to here (its log shows 20 KiB).
    let prompt = vec![b'x'; 20 * 1024];
    let mut alone = Vec::new();
    iterations::bare_loop(&p, &argv, &[], &prompt, n, &stamps, &mut alone);
    let (t, a) = (stats_ms(&mut tool).median, stats_ms(&mut alone).median);
    eprintln!(
        "  pyralph, {n} stories: gap {t:.2} ms, alone {a:.2} ms: overhead {:.2} ms",
        t - a
    );
    t - a
}

// ---------------------------------------------------------------------------------------------
// ralph-orchestrator

/// The agent ralph-orchestrator is given.
#[derive(Debug, Clone, Copy)]
enum Backend<'a> {
    /// Its `custom` backend running this argv directly, the prompt on stdin.
    Custom(&'a [String]),
    /// Its `claude` preset (stream-json), with whatever `claude` is first on `PATH`.
    Claude,
}

/// ralph-orchestrator's `ralph.yml`, as JSON (which YAML reads as it is, quoting included): the
/// backend, `PROMPT.md` as the prompt, the completion promise and an iteration limit; a runtime
/// limit of a day so that no run stops on time.
fn orchestrator_config(backend: Backend, max_iterations: u32) -> serde_json::Value {
    let cli = match backend {
        Backend::Custom(argv) => serde_json::json!({
            "backend": "custom",
            "command": argv[0],
            "args": argv[1..],
            "prompt_mode": "stdin",
        }),
        Backend::Claude => serde_json::json!({"backend": "claude"}),
    };
    serde_json::json!({
        "cli": cli,
        "event_loop": {
            "prompt_file": "PROMPT.md",
            "completion_promise": COMPLETE,
            "max_iterations": max_iterations,
            "max_runtime_seconds": 86400,
        },
    })
}

/// A ralph-orchestrator project whose agent runs `script`: `ralph.yml` and `PROMPT.md` (the
/// task ralph's projects get). Returns the project and the `PATH` to run it with.
fn orchestrator_project(
    bins: &Bins,
    claude: bool,
    max_iterations: u32,
    script: &str,
) -> (Project, String) {
    let p = Project::new(max_iterations, "");
    p.write(
        "PROMPT.md",
        "# Benchmark ralph-orchestrator with a scripted agent\n\n- [ ] never done\n",
    );
    let (config, path) = if claude {
        let path = p.fake_claude(bins, script);
        (orchestrator_config(Backend::Claude, max_iterations), path)
    } else {
        p.write("script.txt", script);
        let argv = p.agent_argv(bins, "script.txt");
        let config = orchestrator_config(Backend::Custom(&argv), max_iterations);
        (config, std::env::var("PATH").unwrap_or_default())
    };
    let text = serde_json::to_string_pretty(&config).expect("the config serializes");
    p.write("ralph.yml", &(text + "\n"));
    (p, path)
}

/// How a user runs ralph-orchestrator's loop unattended in `dir`: no terminal UI (the agent
/// gets pipes, not a terminal), and its opt-in preflight checks kept off.
fn orchestrator_argv(bin: &Path, dir: &Path) -> Vec<String> {
    let mut argv: Vec<String> = vec!["env".into(), "-C".into(), dir.display().to_string()];
    argv.push(bin.display().to_string());
    argv.extend(["run", "-c", "ralph.yml", "--no-tui", "--skip-preflight"].map(String::from));
    argv
}

/// ralph-orchestrator's median gap between agent starts over `n` iterations of an agent that
/// emits an event each time, less a bare loop's running the same argv with the prompt it got.
fn orchestrator_overhead(bins: &Bins, bin: &Path, n: u32) -> f64 {
    let path = std::env::var("PATH").unwrap_or_default();
    // The prompt it gives from the second iteration on, where its events are in it.
    let sample = Project::new(1, "");
    let saved = sample.path().join("prompt.txt");
    let script = format!(
        "save-prompt {}\n{}",
        q(&saved),
        stamp_script(&bins.me, &sample.path().join("stamps.txt"), Some(PROGRESS))
    );
    let (p, _) = orchestrator_project(bins, false, 3, &script);
    let m = measure_argv(bins, &orchestrator_argv(bin, p.path()), &path);
    warn_unless(&m, 2, "ralph-orchestrator (max_iterations reached)");
    let prompt = std::fs::read(&saved).unwrap_or_default();

    let stamps = sample.path().join("stamps.txt");
    std::fs::remove_file(&stamps).ok();
    let (p, _) = orchestrator_project(
        bins,
        false,
        n,
        &stamp_script(&bins.me, &stamps, Some(PROGRESS)),
    );
    let m = measure_argv(bins, &orchestrator_argv(bin, p.path()), &path);
    warn_unless(&m, 2, "ralph-orchestrator (max_iterations reached)");
    let mut tool = iterations::gaps(&read_stamps(&stamps));
    if tool.len() + 1 != n as usize {
        eprintln!(
            "  warning: ralph-orchestrator started the agent {} times, not {n}",
            tool.len() + 1
        );
    }
    std::fs::remove_file(&stamps).ok();
    let argv = p.agent_argv(bins, "script.txt");
    let events = p.path().join("bare-events.jsonl");
    let mut alone = Vec::new();
    iterations::bare_loop(
        &p,
        &argv,
        &[("RALPH_EVENTS_FILE", &events)],
        &prompt,
        n,
        &stamps,
        &mut alone,
    );
    let (t, a) = (stats_ms(&mut tool).median, stats_ms(&mut alone).median);
    eprintln!(
        "  ralph-orchestrator, {n} iterations ({} KiB prompt): gap {t:.2} ms, alone {a:.2} ms: overhead {:.2} ms",
        prompt.len() / 1024,
        t - a
    );
    t - a
}

// ---------------------------------------------------------------------------------------------
// The rows

fn iterations_row(bins: &Bins, peers: &Peers, plan: Plan) -> Row {
    let n = plan.iterations;
    let path = std::env::var("PATH").unwrap_or_default();
    let mut seen = Samples::default();
    for _ in 0..plan.rounds {
        let p = Project::new(n, "");
        let agent = p.agent(bins, "script.txt", "");
        let m = measure_argv(bins, &ralph_argv(bins, &p, &["--agent-cmd", &agent]), &path);
        warn_unless(&m, 3, "ralph (max_iterations reached)");
        seen.ralph.push(m.wall.as_secs_f64());
        if let Some(bin) = peers.get(Peer::Pyralph) {
            let (p, path) = pyralph_project(bins, 1, "");
            let m = measure_argv(bins, &pyralph_argv(bin, p.path(), n), &path);
            seen.push(Peer::Pyralph, m.wall.as_secs_f64());
        }
        if let Some(bin) = peers.get(Peer::Orchestrator) {
            let (p, path) = orchestrator_project(bins, false, n, "");
            let m = measure_argv(bins, &orchestrator_argv(bin, p.path()), &path);
            warn_unless(&m, 2, "ralph-orchestrator (max_iterations reached)");
            seen.push(Peer::Orchestrator, m.wall.as_secs_f64());
        }
    }
    let row = seen.row(
        format!(
            "{n} iterations, agent exits at once (wall, median of {})",
            plan.rounds
        ),
        "s",
        false,
    );
    eprintln!("  ralph {:.2} s, peers {:?}", row.ralph, row.peers);
    row
}

fn overhead_row(bins: &Bins, peers: &Peers, plan: Plan) -> Row {
    let per_round = (plan.overhead_iterations / plan.rounds as u32).max(10);
    let mut seen = Samples::default();
    for _ in 0..plan.rounds {
        let o = iterations::run(bins, &std::env::temp_dir(), per_round);
        seen.ralph.push(o.median_ms());
        if let Some(bin) = peers.get(Peer::Pyralph) {
            seen.push(Peer::Pyralph, pyralph_overhead(bins, bin, per_round));
        }
        if let Some(bin) = peers.get(Peer::Orchestrator) {
            seen.push(
                Peer::Orchestrator,
                orchestrator_overhead(bins, bin, per_round),
            );
        }
    }
    seen.row(
        format!(
            "overhead per iteration, fastest path ({} iterations, median of {} rounds)",
            per_round * plan.rounds as u32,
            plan.rounds
        ),
        "ms",
        false,
    )
}

fn stream_rows(bins: &Bins, peers: &Peers, plan: Plan) -> Vec<Row> {
    let bytes = plan.mib * MIB;
    let dir = tempfile::tempdir().expect("a directory for the stream");
    let json = dir.path().join("claude.jsonl");
    std::fs::File::create(&json)
        .and_then(|mut f| f.write_all(&Corpus::ClaudeStreamJson.generate(bytes as usize, false)))
        .expect("write the stream-json corpus");
    let names = ["plain text", "Claude stream-json"];
    // By format: wall times, then peak RSS.
    let mut wall: [Samples; 2] = Default::default();
    let mut rss: [Samples; 2] = Default::default();
    for _ in 0..plan.rounds {
        for t in process::run(bins, &[plan.mib], 1) {
            let i = usize::from(t.format != "plain text");
            wall[i].ralph.push(t.ralph.as_secs_f64());
            rss[i].ralph.push(t.ralph_rss_kb as f64 / 1024.0);
        }
        for peer in Peer::ALL {
            let Some(bin) = peers.get(peer) else { continue };
            for (i, script) in stream_scripts(peer, bytes, &json).iter().enumerate() {
                let start = Instant::now();
                let (m, code) = match peer {
                    Peer::Pyralph => {
                        let (p, path) = pyralph_project(bins, 1, script);
                        (
                            measure_argv(bins, &pyralph_argv(bin, p.path(), 1), &path),
                            0,
                        )
                    }
                    Peer::Orchestrator => {
                        let (p, path) = orchestrator_project(bins, i == 1, 2, script);
                        (
                            measure_argv(bins, &orchestrator_argv(bin, p.path()), &path),
                            0,
                        )
                    }
                };
                warn_unless(&m, code, peer.name());
                eprintln!(
                    "  {}, {}: {:.2} s, peak RSS {:.1} MiB ({:.1} s with setup)",
                    peer.name(),
                    names[i],
                    m.wall.as_secs_f64(),
                    m.maxrss_kb as f64 / 1024.0,
                    start.elapsed().as_secs_f64()
                );
                wall[i].push(peer, m.wall.as_secs_f64());
                rss[i].push(peer, m.maxrss_kb as f64 / 1024.0);
            }
        }
    }
    let mut rows = Vec::new();
    for (i, (w, r)) in wall.into_iter().zip(rss).enumerate() {
        let name = names[i];
        rows.push(w.row(
            format!("{} MiB {name}, wall (median of {})", plan.mib, plan.rounds),
            "s",
            false,
        ));
        rows.push(r.row(
            format!("{} MiB {name}, peak RSS (largest)", plan.mib),
            "MiB",
            true,
        ));
    }
    rows
}

fn startup_row(bins: &Bins, peers: &Peers) -> Row {
    const RUNS: usize = 50;
    let mut seen = Samples::default();
    for _ in 0..3 {
        seen.ralph
            .push(time_runs(&bins.ralph, &["--version"], RUNS).median);
        for peer in Peer::ALL {
            if let Some(bin) = peers.get(peer) {
                seen.push(peer, time_runs(bin, &["--version"], RUNS).median);
            }
        }
    }
    seen.row(format!("`--version` (median of 3 x {RUNS})"), "ms", false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn no_options_is_the_default_plan() {
        assert_eq!(Plan::parse(&[]), Ok(Plan::DEFAULT));
        assert_eq!(Plan::DEFAULT.iterations, 100);
        assert_eq!(Plan::DEFAULT.overhead_iterations, 1000);
        assert_eq!(Plan::DEFAULT.mib, 200);
        assert_eq!(Plan::DEFAULT.rounds, 3);
    }

    #[test]
    fn each_option_sets_its_own_size() {
        let plan = Plan::parse(&args(
            "--iterations 7 --overhead 30 --mib 5000000000 --rounds 2",
        ))
        .expect("valid options");
        assert_eq!(
            plan,
            Plan {
                iterations: 7,
                overhead_iterations: 30,
                mib: 5_000_000_000,
                rounds: 2,
            }
        );
        // The last of a repeated option wins; the others keep their defaults.
        let plan = Plan::parse(&args("--mib 1 --mib 9")).expect("valid options");
        assert_eq!(plan.mib, 9);
        assert_eq!(plan.rounds, Plan::DEFAULT.rounds);
    }

    #[test]
    fn bad_options_are_refused_with_the_reason() {
        let err = |s: &str| Plan::parse(&args(s)).expect_err(s);
        assert!(
            err("--laps 3").contains("unknown option '--laps'"),
            "{}",
            err("--laps 3")
        );
        assert!(err("--laps").contains("unknown option"));
        assert_eq!(err("--rounds"), "--rounds needs a positive number");
        assert_eq!(err("--rounds 0"), "--rounds needs a positive number");
        assert_eq!(err("--rounds -1"), "--rounds needs a positive number");
        assert_eq!(err("--mib ten"), "--mib needs a positive number");
        assert_eq!(
            err("--iterations 4294967296"),
            "--iterations 4294967296 is too large"
        );
    }

    fn row(ralph: f64, py: Option<f64>, orch: Option<f64>) -> Row {
        Row {
            what: "w".into(),
            unit: "ms",
            ralph,
            peers: [py, orch],
        }
    }

    #[test]
    fn the_ratio_is_ralph_over_the_peer() {
        let r = row(0.5, Some(2.0), None);
        assert_eq!(r.ratio(Peer::Pyralph), Some(0.25));
        assert_eq!(r.ratio(Peer::Orchestrator), None);
        assert_eq!(
            row(3.0, None, Some(1.5)).ratio(Peer::Orchestrator),
            Some(2.0)
        );
    }

    #[test]
    fn the_table_has_a_column_per_peer_and_a_dash_for_one_not_measured() {
        let rows = [
            row(0.5, Some(2.0), Some(0.4)),
            Row {
                what: "200 MiB plain text, peak RSS (largest)".into(),
                unit: "MiB",
                ralph: 8.25,
                peers: [Some(1016.0), None],
            },
        ];
        assert_eq!(
            table(&rows),
            "| | ralph | pyralph 0.1.0 (ralph/peer) | ralph-orchestrator 2.10.1 (ralph/peer) |\n\
             | --- | --- | --- | --- |\n\
             | w | 0.50 ms | 2.00 ms (0.25x) | 0.40 ms (1.25x) |\n\
             | 200 MiB plain text, peak RSS (largest) | 8.2 MiB | 1016.0 MiB (0.01x) | - |\n"
        );
    }

    #[test]
    fn samples_give_medians_or_the_largest() {
        let mut s = Samples::default();
        s.ralph.extend([3.0, 1.0, 2.0]);
        s.push(Peer::Orchestrator, 10.0);
        s.push(Peer::Orchestrator, 30.0);
        s.push(Peer::Orchestrator, 20.0);
        let r = s.row("m".into(), "s", false);
        assert_eq!((r.ralph, r.peers), (2.0, [None, Some(20.0)]));

        let mut s = Samples::default();
        s.ralph.extend([3.0, 1.0, 2.0]);
        s.push(Peer::Pyralph, 7.0);
        let r = s.row("m".into(), "MiB", true);
        assert_eq!((r.ralph, r.peers), (3.0, [Some(7.0), None]));
    }

    #[test]
    fn peers_json_has_the_plan_the_peers_and_a_row_per_measure_with_ratios() {
        let installed = [Some(PathBuf::from("/t/peers/pyralph-venv/bin/ralph")), None];
        let json = report(Plan::DEFAULT, &installed, &[row(1.0, Some(4.0), None)]);
        assert_eq!(
            json,
            serde_json::json!({
                "plan": {"iterations": 100, "overhead_iterations": 1000, "mib": 200, "rounds": 3},
                "peers": {
                    "pyralph": "/t/peers/pyralph-venv/bin/ralph",
                    "ralph_orchestrator": null,
                },
                "rows": [{
                    "measure": "w",
                    "unit": "ms",
                    "ralph": 1.0,
                    "pyralph": 4.0,
                    "ralph_over_pyralph": 0.25,
                    "ralph_orchestrator": null,
                    "ralph_over_ralph_orchestrator": null,
                }],
            })
        );
    }

    #[test]
    fn each_peers_agent_ends_its_loop_the_way_that_peer_waits_for() {
        let json = Path::new("/d/it's.jsonl");
        assert_eq!(
            stream_scripts(Peer::Pyralph, 1024, json),
            [
                "flood 1024\nprint STATUS: SUCCESS\n".to_string(),
                "run cat '/d/it'\\''s.jsonl'\nprint STATUS: SUCCESS\n".to_string(),
            ]
        );
        assert_eq!(
            stream_scripts(Peer::Orchestrator, 1024, json),
            [
                "flood 1024\nrun ralph emit LOOP_COMPLETE done\n".to_string(),
                "run cat '/d/it'\\''s.jsonl'\nrun ralph emit LOOP_COMPLETE done\n".to_string(),
            ]
        );
    }

    #[test]
    fn the_fastest_path_agent_stamps_and_for_ralph_orchestrator_emits_an_event() {
        let (me, stamps) = (Path::new("/b/ralph-bench"), Path::new("/p/stamps.txt"));
        assert_eq!(
            stamp_script(me, stamps, None),
            "run '/b/ralph-bench' __stamp '/p/stamps.txt' start\n"
        );
        assert_eq!(
            stamp_script(me, stamps, Some(PROGRESS)),
            "run '/b/ralph-bench' __stamp '/p/stamps.txt' start --emit task.progress\n"
        );
    }

    #[test]
    fn ralph_orchestrators_config_runs_the_fake_agent_directly_with_the_prompt_on_stdin() {
        let argv = args("/b/ralph-fake-agent --script /p/script.txt");
        assert_eq!(
            orchestrator_config(Backend::Custom(&argv), 100),
            serde_json::json!({
                "cli": {
                    "backend": "custom",
                    "command": "/b/ralph-fake-agent",
                    "args": ["--script", "/p/script.txt"],
                    "prompt_mode": "stdin",
                },
                "event_loop": {
                    "prompt_file": "PROMPT.md",
                    "completion_promise": "LOOP_COMPLETE",
                    "max_iterations": 100,
                    "max_runtime_seconds": 86400,
                },
            })
        );
        let claude = orchestrator_config(Backend::Claude, 2);
        assert_eq!(claude["cli"], serde_json::json!({"backend": "claude"}));
        assert_eq!(claude["event_loop"]["max_iterations"], 2);
    }

    #[test]
    fn ralph_orchestrators_project_holds_its_config_prompt_and_script() {
        let bins = Bins {
            ralph: "/b/ralph".into(),
            ralph_portable: None,
            fake: "/b/fake agent".into(),
            me: "/b/ralph-bench".into(),
            target: "/t".into(),
        };
        let (p, _) = orchestrator_project(&bins, false, 5, "print hi\n");
        let read = |name: &str| std::fs::read_to_string(p.path().join(name)).expect(name);
        assert_eq!(read("script.txt"), "print hi\n");
        assert!(read("PROMPT.md").contains("- [ ] never done"));
        let config: serde_json::Value = serde_json::from_str(&read("ralph.yml")).expect("JSON");
        assert_eq!(config["cli"]["command"], "/b/fake agent");
        let script = p.path().join("script.txt").display().to_string();
        assert_eq!(
            config["cli"]["args"],
            serde_json::json!(["--script", script])
        );
        assert_eq!(config["event_loop"]["max_iterations"], 5);

        let (p, path) = orchestrator_project(&bins, true, 2, "print hi\n");
        assert!(path.starts_with(&format!("{}:", p.path().join("bin").display())));
        assert!(p.path().join("bin/claude").is_file());
        let config: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(p.path().join("ralph.yml")).expect("config"),
        )
        .expect("JSON");
        assert_eq!(config["cli"]["backend"], "claude");
    }

    #[test]
    fn ralph_orchestrator_runs_unattended_in_its_project() {
        assert_eq!(
            orchestrator_argv(Path::new("/t/o/ralph"), Path::new("/p")),
            args("env -C /p /t/o/ralph run -c ralph.yml --no-tui --skip-preflight")
        );
    }

    #[test]
    fn an_emitted_event_is_one_json_line_in_ralph_emits_shape() {
        let line = crate::setup::orchestrator_event(
            "task.progress",
            "start 12",
            1_700_000_000_000_000_123,
        );
        assert!(
            line.ends_with('\n') && line.matches('\n').count() == 1,
            "{line:?}"
        );
        let v: serde_json::Value = serde_json::from_str(&line).expect("JSON");
        assert_eq!(
            v,
            serde_json::json!({"topic": "task.progress", "payload": "start 12", "ts": "1700000000.000000123"})
        );
    }
}
