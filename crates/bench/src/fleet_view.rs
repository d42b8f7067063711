//! The fleet view: how fast a new question shows among twenty waiting loops.
//!
//! Nineteen loops of the fake agent ask a question each and wait; then `ralph status --all
//! --watch` starts (stdout on a pipe: its plain mode, one line per change of a row, which
//! wakes and reads the rows as the terminal view does), then a twentieth loop asks question
//! after question, each answered with `ralph answer` once shown. The time is from the fake
//! agent's stamp just before it signals the question to the moment the view's line for it
//! arrives on the pipe. Every process runs with a state and data directory of its own, so the
//! view lists these twenty loops and nothing of the machine's.

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::setup::{Bins, Project, Stats, now_ns, read_stamps, stats_ms};

/// How many loops wait while the measured one asks.
const LOOPS: usize = 20;

/// A new question shown in the fleet view, among [`LOOPS`] waiting loops.
#[derive(Debug, Clone)]
pub struct FleetShown {
    /// From the signal leaving the agent to the view's line for it, ms.
    pub shown: Stats,
}

impl FleetShown {
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({"loops": LOOPS, "question_shown_in_fleet_view": self.shown.json()})
    }

    pub fn table(&self) -> String {
        format!(
            "fleet view, a new question shown among {LOOPS} waiting loops: {:.2} ms median, {:.2} ms p99, {:.2} ms max over {} (target: 50 ms p99){}",
            self.shown.median,
            self.shown.p99,
            self.shown.max,
            self.shown.n,
            if self.shown.p99 <= 50.0 { "" } else { "  MISS" }
        )
    }
}

/// `ralph ARGS` with this bench's own state and data directories.
fn ralph(bins: &Bins, dirs: &Path) -> Command {
    let mut cmd = Command::new(&bins.ralph);
    cmd.env("RALPH_STATE_DIR", dirs.join("state"))
        .env("XDG_DATA_HOME", dirs.join("data"))
        .env("XDG_CONFIG_HOME", dirs.join("config"))
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

fn start_loop(bins: &Bins, dirs: &Path, p: &Project, agent: &str) -> Child {
    ralph(bins, dirs)
        .args(["run", "--no-tui", "-C"])
        .arg(p.path())
        .args(["--agent-cmd", agent])
        .stdout(Stdio::null())
        .spawn()
        .expect("start ralph run")
}

/// Waits until the loop in `p` waits for an answer.
fn wait_asking(p: &Project) {
    let until = Instant::now() + Duration::from_secs(60);
    while Instant::now() < until {
        let state = std::fs::read_to_string(p.path().join(".ralph/state.json")).unwrap_or_default();
        if state.contains("\"waiting_input\"") {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!("  warning: {} did not ask within 60 s", p.path().display());
}

pub fn run(bins: &Bins, trials: u32) -> FleetShown {
    let dirs = tempfile::tempdir().expect("a temporary directory");
    let mut children = Vec::new();
    let mut idle = Vec::new();
    for k in 1..LOOPS {
        let p = Project::new(2, "question_timeout: 10m\n");
        let agent = p.agent(
            bins,
            "script.txt",
            &format!("[iteration 1]\nquestion \"Idle loop {k}: which way?\" --option Left --option Right\nsignal QUESTION\n"),
        );
        children.push(start_loop(bins, dirs.path(), &p, &agent));
        idle.push(p);
    }
    for p in &idle {
        wait_asking(p);
    }

    let active = Project::new(trials + 2, "question_timeout: 10m\n");
    let view_err = dirs.path().join("view-stderr.txt");
    let mut view = ralph(bins, dirs.path())
        .args(["status", "--all", "--watch"])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&view_err).expect("a file for the view's errors"))
        .spawn()
        .expect("start ralph status --all --watch");
    let stdout = view.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    let mine = format!("{}:", active.path().display());
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if std::env::var_os("BENCH_FLEET_LINES").is_some() {
                eprintln!("  view: {line}");
            }
            if line.starts_with(&mine) && line.contains(": needs you") {
                let _ = tx.send(now_ns());
            }
        }
    });
    // The view has listed the nineteen before the measured loop starts.
    std::thread::sleep(Duration::from_millis(500));

    // The first question is asked before the view has heard of the loop (it watches a loop's
    // directory from its first row on): a warm-up, not counted.
    let stamps = active.path().join("stamps.txt");
    let script = crate::reaction::script(bins, &stamps, trials + 1);
    let agent = active.agent(bins, "script.txt", &script);
    let loop_err = dirs.path().join("loop-stderr.txt");
    let mut measured = ralph(bins, dirs.path())
        .args(["run", "--no-tui", "-C"])
        .arg(active.path())
        .args(["--agent-cmd", &agent])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&loop_err).expect("a file for the loop's errors"))
        .spawn()
        .expect("start ralph run");
    let mut shown = Vec::new();
    for _ in 0..=trials {
        let Ok(t) = rx.recv_timeout(Duration::from_secs(60)) else {
            eprintln!(
                "  warning: no question shown in the view within 60 s; stopping early. The view said: {}; the loop said: {}",
                std::fs::read_to_string(&view_err).unwrap_or_default(),
                std::fs::read_to_string(&loop_err).unwrap_or_default()
            );
            break;
        };
        shown.push(t);
        let _ = ralph(bins, dirs.path())
            .args(["answer", "-C"])
            .arg(active.path())
            .arg("Alpha")
            .stdout(Stdio::null())
            .status();
    }
    let _ = measured.wait();
    let _ = view.kill();
    let _ = view.wait();
    for p in &idle {
        let _ = ralph(bins, dirs.path())
            .args(["stop", "-C"])
            .arg(p.path())
            .stdout(Stdio::null())
            .status();
    }
    for mut c in children {
        let _ = c.wait();
    }

    let stamps = read_stamps(&stamps);
    let mut to_shown: Vec<f64> = shown
        .iter()
        .enumerate()
        .skip(1)
        .filter_map(|(k, &s)| {
            let ask = stamps
                .iter()
                .find(|(l, i, _)| l == "ask" && *i == k as u32 + 1)?
                .2;
            Some(s.saturating_sub(ask) as f64 / 1e6)
        })
        .collect();
    let r = FleetShown {
        shown: stats_ms(&mut to_shown),
    };
    eprintln!("  {}", r.table());
    r
}
