//! Start-up: `ralph --version`, and `ralph status` in a project a loop has run in.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::setup::{Bins, Project, Stats, stats_ms};

/// Wall time of one short command, over many runs.
#[derive(Debug, Clone)]
pub struct Startup {
    pub command: &'static str,
    pub stats: Stats,
}

impl Startup {
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({"command": self.command, "wall": self.stats.json()})
    }
}

pub fn run(bins: &Bins, runs: usize) -> Vec<Startup> {
    // A project with state, events and logs from a finished one-iteration loop.
    let p = Project::new(1, "");
    let agent = p.agent(bins, "script.txt", "print working\n");
    let _ = Command::new(&bins.ralph)
        .args(["run", "--no-tui", "-C"])
        .arg(p.path())
        .args(["--agent-cmd", &agent])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let dir = p.path().display().to_string();
    let ralph = bins.ralph.display().to_string();
    let cases: [(&'static str, &str, Vec<&str>); 3] = [
        ("ralph --version", &ralph, vec!["--version"]),
        ("ralph status", &ralph, vec!["status", "-C", &dir]),
        // The floor: starting any process at all from this driver.
        ("true (any process)", "true", vec![]),
    ];
    cases
        .into_iter()
        .map(|(command, program, args)| {
            let s = Startup {
                command,
                stats: time_runs(program, &args, runs),
            };
            eprintln!(
                "  {command}: {:.2} ms median, {:.2} ms p99 over {runs} runs",
                s.stats.median, s.stats.p99
            );
            s
        })
        .collect()
}

/// Wall time of `program args…` (output discarded) over `runs` runs, after five to warm the page
/// cache.
pub fn time_runs(program: impl AsRef<Path>, args: &[&str], runs: usize) -> Stats {
    let program = program.as_ref();
    let mut times: Vec<f64> = (0..runs + 5)
        .map(|_| {
            let start = Instant::now();
            let status = Command::new(program)
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("run the command");
            let t = start.elapsed().as_secs_f64() * 1e3;
            assert!(status.code().is_some(), "{} was killed", program.display());
            t
        })
        .skip(5)
        .collect();
    stats_ms(&mut times)
}
