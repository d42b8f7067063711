//! What the agent's sandbox adds to an iteration: the same agent (one that stamps the time
//! and exits) run by `ralph run` with the sandbox (the default) and with `--no-sandbox`, in
//! alternating rounds so a change in the machine's load weighs on both alike.
//!
//! The difference of the median gaps between consecutive agent starts is the sandbox's cost:
//! one more exec (`ralph __sandbox`, which applies the Landlock ruleset and execs the agent)
//! and the ruleset's making (an open per path).

use std::path::Path;
use std::process::{Command, Stdio};

use crate::iterations::gaps;
use crate::setup::{Bins, Project, Stats, q, read_stamps, stats_ms};

/// Gaps between agent starts with the sandbox and without.
#[derive(Debug, Clone)]
pub struct SandboxCost {
    pub iterations: u32,
    /// With the sandbox, ms.
    pub on: Stats,
    /// With `--no-sandbox`, ms.
    pub off: Stats,
}

impl SandboxCost {
    /// Median extra time per iteration, ms.
    pub fn median_ms(&self) -> f64 {
        self.on.median - self.off.median
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "iterations": self.iterations,
            "median_added_ms": self.median_ms(),
            "sandboxed_gap": self.on.json(),
            "unsandboxed_gap": self.off.json(),
        })
    }
}

/// Runs `iterations` iterations each way, in projects under `parent`.
pub fn run(bins: &Bins, parent: &Path, iterations: u32) -> SandboxCost {
    const ROUNDS: u32 = 5;
    let per_round = (iterations / ROUNDS).max(2);
    let (mut on, mut off) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS * 2 {
        let sandboxed = round % 2 == 0;
        let p = Project::new_in(parent, per_round, "");
        let stamps = p.path().join("stamps.txt");
        let script = format!("run {} __stamp {} start\n", q(&bins.me), q(&stamps));
        let agent = p.agent(bins, "script.txt", &script);
        let status = Command::new(&bins.ralph)
            .args(["run", "--no-tui", "-C"])
            .arg(p.path())
            .args(["--agent-cmd", &agent])
            .args((!sandboxed).then_some("--no-sandbox"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("run ralph");
        if status.code() != Some(3) {
            eprintln!("  warning: ralph run exited with {status} (expected 3, max_iterations)");
        }
        let found = gaps(&read_stamps(&stamps));
        if sandboxed { &mut on } else { &mut off }.extend(found);
    }
    let cost = SandboxCost {
        iterations: per_round * ROUNDS,
        on: stats_ms(&mut on),
        off: stats_ms(&mut off),
    };
    eprintln!(
        "  {} iterations each way: gap {:.2} ms sandboxed, {:.2} ms with --no-sandbox: the sandbox adds {:.2} ms (median)",
        cost.iterations,
        cost.on.median,
        cost.off.median,
        cost.median_ms()
    );
    cost
}
