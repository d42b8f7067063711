//! `ralph-bench`: runs the release `ralph` with the fake agent, collects criterion's decoder
//! estimates, prints one table and writes `target/bench/results.json`.
//!
//! ```text
//! ralph-bench [SECTION…]     sections: decode process overhead sandbox reaction idle startup remote
//!                            git fleet fleet_view (all by default; `decode` only reads what `cargo bench` wrote;
//!                            `git` alone needs no release build of ralph)
//! ralph-bench time CORPUS [MiB]     quick in-process timing of one corpus, best of five
//! ralph-bench profile CORPUS [MiB] [N]  N decode passes (1), for `valgrind --tool=callgrind`
//!                                       or `perf record`
//! ralph-bench peers [--iterations N] [--overhead N] [--mib N] [--rounds N]
//!                   ralph beside the peers `make bench-peers` installs; writes
//!                   `target/bench/peers.json` (see `peers.rs`)
//! ```
//!
//! `BENCH_QUICK=1` shrinks everything for a run of a minute or two. Numbers are reported,
//! never asserted: a miss is a row marked MISS, not a failure.

#![forbid(unsafe_code)]

mod fleet;
mod fleet_view;
mod git;
mod iterations;
mod peers;
mod process;
mod reaction;
mod remote;
mod report;
mod sandbox;
mod setup;
mod startup;

use std::process::ExitCode;
use std::time::Instant;

use ralph_bench::corpus::Corpus;
use ralph_bench::quick;

use crate::report::Results;
use crate::setup::{Bins, loadavg};

const SECTIONS: [&str; 11] = [
    "decode",
    "process",
    "overhead",
    "sandbox",
    "reaction",
    "idle",
    "startup",
    "remote",
    "git",
    "fleet",
    "fleet_view",
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("__rusage") => {
            let status = setup::rusage_helper(&args[1..]);
            ExitCode::from(u8::from(status.code().is_none()))
        }
        Some("__stamp") => {
            setup::stamp_helper(&args[1..]);
            ExitCode::SUCCESS
        }
        Some(cmd @ ("time" | "profile")) => in_process(cmd, &args[1..]),
        Some("peers") => match run_peers(&args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("ralph-bench peers: {e}");
                ExitCode::FAILURE
            }
        },
        Some("-h" | "--help") => {
            eprintln!(
                "usage: ralph-bench [{}]…\n       ralph-bench time|profile CORPUS [MiB] [N]\n       ralph-bench peers [--iterations N] [--overhead N] [--mib N] [--rounds N]",
                SECTIONS.join("|")
            );
            ExitCode::SUCCESS
        }
        _ => match run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("ralph-bench: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

fn run(args: &[String]) -> Result<(), String> {
    for a in args {
        if !SECTIONS.contains(&a.as_str()) {
            return Err(format!(
                "unknown section '{a}'; the sections are {}",
                SECTIONS.join(", ")
            ));
        }
    }
    let wanted = |s: &str| args.is_empty() || args.iter().any(|a| a == s);
    if args == ["git"] {
        // In process: no release binaries needed.
        let costs = git_costs(quick());
        println!("\n{}", costs.table());
        return Ok(());
    }
    let bins = Bins::locate()?;
    let quick = quick();
    let load_before = loadavg();
    let started = Instant::now();
    let mut results = Results::default();

    if wanted("decode") {
        results.decode = report::read_criterion(&bins.target);
        if results.decode.is_empty() {
            eprintln!(
                "no decoder estimates in {}: run `cargo bench -p ralph-bench` first",
                bins.target.join("criterion").display()
            );
        }
    }
    if wanted("process") {
        eprintln!("whole process, huge output:");
        let (sizes, runs): (&[u64], usize) = if quick {
            (&[200], 1)
        } else {
            (&[200, 1024], 3)
        };
        results.throughput = process::run(&bins, sizes, runs);
        let mib = if quick { 50 } else { 200 };
        results.terminal = process::terminal(&bins, mib);
    }
    if wanted("overhead") {
        eprintln!("overhead per iteration:");
        let n = if quick { 200 } else { 1000 };
        // On the disk temporary files go to, where fsync is real; and on tmpfs, where it is
        // free, which shows what durability costs.
        results
            .overhead
            .push(iterations::run(&bins, &std::env::temp_dir(), n));
        let shm = std::path::Path::new("/dev/shm");
        if iterations::filesystem(shm) == "tmpfs" {
            results.overhead.push(iterations::run(&bins, shm, n));
        }
    }
    if wanted("sandbox") {
        eprintln!("what the agent's sandbox adds per iteration:");
        let n = if quick { 100 } else { 500 };
        results.sandbox = Some(sandbox::run(&bins, &std::env::temp_dir(), n));
    }
    if wanted("reaction") {
        eprintln!("reaction to a question and to its answer:");
        let trials = if quick { 20 } else { 100 };
        results.reaction = Some(reaction::run(&bins, trials));
        // The same with the portable backend (notify's watcher, sysinfo's table), where
        // `make bench` built it.
        if let Some(portable) = &bins.ralph_portable {
            eprintln!("the same, portable backend ({}):", portable.display());
            let bins = setup::Bins {
                ralph: portable.clone(),
                ..bins.clone()
            };
            results.reaction_portable = Some(reaction::run(&bins, trials));
        }
    }
    if wanted("idle") {
        let seconds = if quick { 5 } else { 60 };
        eprintln!("idle while a question waits ({seconds} s each):");
        results.idle.extend(reaction::idle_plain(&bins, seconds));
        results.idle.extend(reaction::idle_tui(&bins, seconds));
    }
    if wanted("startup") {
        eprintln!("start-up:");
        results.startup = startup::run(&bins, if quick { 50 } else { 300 });
    }
    let mut served = None;
    if wanted("remote") {
        eprintln!("ralph serve (answer links):");
        match remote::run(
            &bins,
            if quick { 20 } else { 100 },
            if quick { 5 } else { 10 },
        ) {
            Ok(r) => served = Some(r),
            Err(e) => eprintln!("  warning: {e}"),
        }
    }

    let fleet = wanted("fleet").then(|| {
        eprintln!("ralph fleet:");
        if quick {
            fleet::run(&bins, 5, 5)
        } else {
            fleet::run(&bins, 30, 30)
        }
    });
    let fleet_view = wanted("fleet_view").then(|| {
        eprintln!("the fleet view:");
        fleet_view::run(&bins, if quick { 20 } else { 100 })
    });

    let git = wanted("git").then(|| git_costs(quick));
    let machine = machine(quick, load_before, started.elapsed().as_secs_f64());
    println!("\n{}", results.table());
    if let Some(r) = &served {
        println!("{}", r.table());
    }
    if let Some(f) = &fleet {
        println!("{}", f.table());
    }
    if let Some(g) = &git {
        println!("{}", g.table());
    }
    if let Some(f) = &fleet_view {
        println!("{}", f.table());
    }
    println!(
        "machine: {} ({} CPUs, {} GiB RAM), Linux {}, /tmp on {}; load average {:.2} before, {:.2} after{}",
        machine["cpu"].as_str().unwrap_or("?"),
        machine["cpus"],
        machine["memory_gib"],
        machine["kernel"].as_str().unwrap_or("?"),
        machine["tmp_filesystem"].as_str().unwrap_or("?"),
        load_before,
        loadavg(),
        if quick {
            "; BENCH_QUICK: small sizes, few trials"
        } else {
            ""
        }
    );
    let dir = bins.target.join("bench");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join("results.json");
    let mut json = results.json(&machine);
    if let Some(r) = &served {
        json["remote"] = r.json();
    }
    if let Some(f) = &fleet {
        json["fleet"] = f.json();
    }
    if let Some(g) = &git {
        json["git"] = g.json();
    }
    if let Some(f) = &fleet_view {
        json["fleet_view"] = f.json();
    }
    let json = serde_json::to_string_pretty(&json).expect("results serialize");
    std::fs::write(&path, json + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
    println!("results: {}", path.display());
    Ok(())
}

/// The `git` section (see `git.rs`).
fn git_costs(quick: bool) -> git::GitCosts {
    eprintln!("git: checkpoints and landing:");
    if quick {
        git::run(10_000, 10, 2)
    } else {
        git::run(10_000, 100, 10)
    }
}

/// `peers`: ralph beside the peers, one table, `target/bench/peers.json`.
fn run_peers(args: &[String]) -> Result<(), String> {
    let plan = peers::Plan::parse(args)?;
    let bins = Bins::locate()?;
    let load_before = loadavg();
    let started = Instant::now();
    let mut json = peers::run(&bins, plan)?;
    let machine = machine(false, load_before, started.elapsed().as_secs_f64());
    println!(
        "machine: {} ({} CPUs, {} GiB RAM), Linux {}; load average {:.2} before, {:.2} after; {:.0} s",
        machine["cpu"].as_str().unwrap_or("?"),
        machine["cpus"],
        machine["memory_gib"],
        machine["kernel"].as_str().unwrap_or("?"),
        load_before,
        loadavg(),
        started.elapsed().as_secs_f64()
    );
    json["machine"] = machine;
    json["date"] = serde_json::json!(
        std::process::Command::new("date")
            .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    );
    let dir = bins.target.join("bench");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join("peers.json");
    let text = serde_json::to_string_pretty(&json).expect("results serialize");
    std::fs::write(&path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
    println!("results: {}", path.display());
    Ok(())
}

/// What the numbers were measured on.
fn machine(quick: bool, load_before: f64, seconds: f64) -> serde_json::Value {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpu = read("/proc/cpuinfo")
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let mem_kb: u64 = read("/proc/meminfo")
        .lines()
        .find(|l| l.starts_with("MemTotal"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0);
    let fs = std::process::Command::new("stat")
        .args([
            "-f",
            "-c",
            "%T",
            &std::env::temp_dir().display().to_string(),
        ])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    serde_json::json!({
        "cpu": cpu,
        "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "memory_gib": (mem_kb as f64 / 1048576.0).round(),
        "kernel": read("/proc/sys/kernel/osrelease").trim(),
        "tmp_filesystem": fs,
        "load_average_before": load_before,
        "load_average_after": loadavg(),
        "quick": quick,
        "seconds": seconds,
    })
}

/// `time` and `profile`: one corpus, in process, without criterion.
fn in_process(cmd: &str, args: &[String]) -> ExitCode {
    let Some(corpus) = Corpus::ALL
        .into_iter()
        .find(|c| Some(c.name()) == args.first().map(String::as_str))
    else {
        let names: Vec<_> = Corpus::ALL.iter().map(|c| c.name()).collect();
        eprintln!("ralph-bench {cmd}: name a corpus: {}", names.join(", "));
        return ExitCode::FAILURE;
    };
    let mib: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(32);
    let data = corpus.generate(mib << 20, true);
    if cmd == "profile" {
        // Decoded more than once, the corpus's generation drops out of a `perf` profile.
        let times: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
        for _ in 1..times {
            std::hint::black_box(ralph_bench::decode(corpus.format(), &data));
        }
        println!("{:?}", ralph_bench::decode(corpus.format(), &data));
        return ExitCode::SUCCESS;
    }
    let best = |f: &dyn Fn() -> usize| {
        (0..5)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(f());
                t.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min)
    };
    let gbps = |s: f64| data.len() as f64 / s / 1e9;
    let m = best(&|| ralph_bench::baseline::memmem(&data));
    let d = best(&|| ralph_bench::decode(corpus.format(), &data).events);
    println!(
        "{}: memmem {:.2} GB/s, decoder {:.2} GB/s ({:.1}% of memmem)",
        corpus.name(),
        gbps(m),
        gbps(d),
        100.0 * m / d
    );
    if corpus.format() == ralph_signal::StreamFormat::Text {
        let v = best(&|| ralph_bench::baseline::validate_and_copy(&data));
        println!(
            "  UTF-8 check + copy alone {:.2} GB/s ({:.1}% of memmem)",
            gbps(v),
            100.0 * m / v
        );
    } else {
        let n = best(&|| ralph_bench::baseline::naive(corpus, &data));
        println!("  naive {:.2} GB/s; decoder {:.2}x naive", gbps(n), n / d);
    }
    ExitCode::SUCCESS
}
