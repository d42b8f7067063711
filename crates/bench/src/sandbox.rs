//! What the agent's sandbox adds to an iteration: the same agent (one that stamps the time
//! and exits) run by `ralph run` with the sandbox (the default: the small `ralph-sandbox`
//! beside `ralph`), with the sandbox applied by `ralph __sandbox` (a `ralph` alone in a
//! directory, as where `ralph-sandbox` is not installed), and with `--no-sandbox`, in rounds
//! taken in turn so a change in the machine's load weighs on all alike.
//!
//! The difference of the median gaps between consecutive agent starts is what the sandbox
//! adds between two agents. Its process (one more exec, and the ruleset's making: an open per
//! path) is started ahead of the agent, as the iteration before it is acted on: what is left
//! on the way is its header's write and its wake-up, and the CPU it takes beside (these
//! projects have no git, so no checkpoint to hide it behind).

use std::path::Path;
use std::process::{Command, Stdio};

use crate::iterations::gaps;
use crate::setup::{Bins, Project, Stats, q, read_stamps, stats_ms};

/// Gaps between agent starts with the sandbox and without.
#[derive(Debug, Clone)]
pub struct SandboxCost {
    pub iterations: u32,
    /// With the sandbox (`ralph-sandbox`), ms.
    pub on: Stats,
    /// With the sandbox applied by `ralph __sandbox`, ms; `None` when `ralph-sandbox` is not
    /// there (then `on` is this).
    pub fallback: Option<Stats>,
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
            "ralph_sandbox_subcommand_gap": self.fallback.as_ref().map(Stats::json),
            "median_added_ms_by_ralph_sandbox_subcommand": self.fallback.as_ref().map(|f| f.median - self.off.median),
            "unsandboxed_gap": self.off.json(),
        })
    }
}

/// Runs `iterations` iterations each way, in projects under `parent`.
pub fn run(bins: &Bins, parent: &Path, iterations: u32) -> SandboxCost {
    const ROUNDS: u32 = 5;
    let per_round = (iterations / ROUNDS).max(2);
    // `ralph` alone in a directory (a hard link: `current_exe` names it), where no
    // `ralph-sandbox` is beside it: `ralph __sandbox` applies the sandbox.
    let helper = bins.ralph.with_file_name("ralph-sandbox").is_file();
    let alone = helper.then(|| {
        let dir = tempfile::Builder::new()
            .prefix("ralph-alone-")
            .tempdir_in(&bins.target)
            .expect("a directory in target/");
        let ralph = dir.path().join("ralph");
        std::fs::hard_link(&bins.ralph, &ralph)
            .or_else(|_| std::fs::copy(&bins.ralph, &ralph).map(drop))
            .expect("ralph alone");
        (dir, ralph)
    });
    let (mut on, mut fallback, mut off) = (Vec::new(), Vec::new(), Vec::new());
    let ways: &[Way] = if helper {
        &[Way::Helper, Way::Subcommand, Way::Off]
    } else {
        &[Way::Helper, Way::Off]
    };
    for round in 0..ROUNDS * ways.len() as u32 {
        let way = ways[round as usize % ways.len()];
        let p = Project::new_in(parent, per_round, "");
        let stamps = p.path().join("stamps.txt");
        let script = format!("run {} __stamp {} start\n", q(&bins.me), q(&stamps));
        let agent = p.agent(bins, "script.txt", &script);
        let ralph = match (way, &alone) {
            (Way::Subcommand, Some((_, ralph))) => ralph,
            _ => &bins.ralph,
        };
        let status = Command::new(ralph)
            .args(["run", "--no-tui", "-C"])
            .arg(p.path())
            .args(["--agent-cmd", &agent])
            .args((way == Way::Off).then_some("--no-sandbox"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("run ralph");
        if status.code() != Some(3) {
            eprintln!("  warning: ralph run exited with {status} (expected 3, max_iterations)");
        }
        let found = gaps(&read_stamps(&stamps));
        match way {
            Way::Helper => &mut on,
            Way::Subcommand => &mut fallback,
            Way::Off => &mut off,
        }
        .extend(found);
    }
    let cost = SandboxCost {
        iterations: per_round * ROUNDS,
        on: stats_ms(&mut on),
        fallback: helper.then(|| stats_ms(&mut fallback)),
        off: stats_ms(&mut off),
    };
    eprintln!(
        "  {} iterations each way: gap {:.2} ms sandboxed, {:.2} ms with --no-sandbox: the sandbox adds {:.2} ms (median)",
        cost.iterations,
        cost.on.median,
        cost.off.median,
        cost.median_ms()
    );
    if let Some(f) = &cost.fallback {
        eprintln!(
            "  through `ralph __sandbox` instead of ralph-sandbox: gap {:.2} ms, {:.2} ms added (median)",
            f.median,
            f.median - cost.off.median
        );
    }
    cost
}

/// How an iteration's agent is started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    /// Sandboxed by `ralph-sandbox`, the default.
    Helper,
    /// Sandboxed by `ralph __sandbox`.
    Subcommand,
    /// `--no-sandbox`.
    Off,
}
