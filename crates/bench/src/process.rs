//! Whole process, huge output: `ralph run --no-tui` while the fake agent streams hundreds of
//! megabytes, next to the same agent piped through `cat`; wall time and peak memory.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ralph_bench::corpus::Corpus;

use crate::setup::{Bins, Measured, Project, measure, q};

/// One size and format.
#[derive(Debug, Clone)]
pub struct Throughput {
    pub format: &'static str,
    pub bytes: u64,
    pub runs: usize,
    /// Median wall time of `ralph run` (stdout to /dev/null).
    pub ralph: Duration,
    /// Median wall time of the agent piped through `cat` to /dev/null.
    pub pipe: Duration,
    /// Largest peak RSS of ralph (and the small processes it reaped) over the runs, KiB.
    pub ralph_rss_kb: u64,
    /// The same for the agent and `cat` alone: what is not ralph's.
    pub pipe_rss_kb: u64,
    /// Every run's (ralph, pipe) wall times, measured back to back.
    pub pairs: Vec<(Duration, Duration)>,
}

impl Throughput {
    /// The median over runs of ralph's time over the pipe's, each pair measured back to back
    /// so that both saw the same load.
    pub fn ratio(&self) -> f64 {
        let mut ratios: Vec<f64> = self
            .pairs
            .iter()
            .map(|(r, p)| r.as_secs_f64() / p.as_secs_f64())
            .collect();
        ratios.sort_by(f64::total_cmp);
        ratios[ratios.len() / 2]
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "format": self.format,
            "bytes": self.bytes,
            "runs": self.runs,
            "ralph_s": self.ralph.as_secs_f64(),
            "pipe_s": self.pipe.as_secs_f64(),
            "ratio_to_pipe": self.ratio(),
            "runs_ralph_s": self.pairs.iter().map(|p| p.0.as_secs_f64()).collect::<Vec<_>>(),
            "runs_pipe_s": self.pairs.iter().map(|p| p.1.as_secs_f64()).collect::<Vec<_>>(),
            "ralph_mb_per_s": self.bytes as f64 / self.ralph.as_secs_f64() / 1e6,
            "ralph_peak_rss_kb": self.ralph_rss_kb,
            "agent_and_cat_peak_rss_kb": self.pipe_rss_kb,
        })
    }
}

const MIB: u64 = 1 << 20;

/// Plain text (`flood`) and Claude stream-json (`cat` of a generated stream) at each size.
pub fn run(bins: &Bins, sizes_mib: &[u64], runs: usize) -> Vec<Throughput> {
    let mut results = Vec::new();
    // Stream-json is a generated file `cat` copies (as often as a size needs): `cat` keeps the
    // agent's own memory small, so the peak RSS measured is ralph's.
    let json_dir = tempfile::tempdir().expect("a directory for the stream");
    for &mib in sizes_mib {
        let text = format!("no-stdin\nflood {}\n", mib * MIB);
        results.push(one(bins, "plain text", mib * MIB, &text, false, runs));

        let piece = (mib * MIB).min(256 * MIB);
        let copies = (mib * MIB).div_ceil(piece);
        let json_file = json_dir.path().join(format!("claude-{piece}.jsonl"));
        if !json_file.exists() {
            let data = Corpus::ClaudeStreamJson.generate(piece as usize, false);
            std::fs::write(&json_file, data).expect("write the stream-json corpus");
        }
        let piece_len = std::fs::metadata(&json_file).expect("corpus").len();
        let mut script = String::from("no-stdin\n");
        for _ in 0..copies {
            script.push_str(&format!("run cat {}\n", q(&json_file)));
        }
        results.push(one(
            bins,
            "claude stream-json",
            copies * piece_len,
            &script,
            true,
            runs,
        ));
    }
    results
}

/// What printing to a real terminal costs: `ralph run --no-tui` and the plain pipe, both with
/// their output going to a tmux pane (a terminal emulator that parses and keeps every byte).
#[derive(Debug, Clone)]
pub struct Terminal {
    pub mib: u64,
    pub ralph: Duration,
    pub cat: Duration,
    /// ralph's peak RSS while a terminal slower than the agent holds its output back, KiB.
    pub ralph_rss_kb: u64,
}

/// Measures [`Terminal`]; `None` without tmux.
pub fn terminal(bins: &Bins, mib: u64) -> Option<Terminal> {
    Command::new("tmux").arg("-V").output().ok()?;
    let p = Project::new(1, "");
    let agent = p.agent(
        bins,
        "script.txt",
        &format!("no-stdin\nflood {}\n", mib * MIB),
    );
    // A tmux server of our own per run (it exits with its last session).
    let time = |line: String, name: &str| -> Option<Duration> {
        let socket = format!("ralph-bench-{name}-{}", std::process::id());
        let tmux = |args: &[&str]| {
            Command::new("tmux")
                .args(["-L", &socket])
                .args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        let start = Instant::now();
        let session = format!("{line}; tmux -L {socket} wait-for -S done");
        let ok = tmux(&["new-session", "-d", "-x", "160", "-y", "50", &session])
            && tmux(&["wait-for", "done"]);
        let elapsed = start.elapsed();
        let _ = tmux(&["kill-server"]);
        ok.then_some(elapsed)
    };
    let usage = p.path().join("rusage.txt");
    let ralph = time(
        format!(
            "{} __rusage {} -- {} run --no-tui -C {} --agent-cmd {} < /dev/null",
            q(&bins.me),
            q(&usage),
            q(&bins.ralph),
            q(p.path()),
            q(Path::new(&agent))
        ),
        "ralph",
    );
    let cat = time(format!("{agent} < /dev/null | cat"), "cat");
    let ralph_rss_kb = std::fs::read_to_string(&usage)
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0);
    let t = Terminal {
        mib,
        ralph: ralph?,
        cat: cat?,
        ralph_rss_kb,
    };
    eprintln!(
        "  {mib} MiB plain text to a terminal (tmux): ralph {:.2} s, peak RSS {:.1} MiB; cat {:.2} s",
        t.ralph.as_secs_f64(),
        t.ralph_rss_kb as f64 / 1024.0,
        t.cat.as_secs_f64()
    );
    Some(t)
}

fn one(
    bins: &Bins,
    format: &'static str,
    bytes: u64,
    script: &str,
    claude: bool,
    runs: usize,
) -> Throughput {
    let mut ralph = Vec::new();
    let mut pipe = Vec::new();
    let (mut ralph_rss, mut pipe_rss) = (0, 0);
    for _ in 0..runs {
        let p = Project::new(1, "");
        let (agent_cmd, path) = if claude {
            let path = p.fake_claude(bins, script);
            ("claude".to_string(), path)
        } else {
            (
                p.agent(bins, "script.txt", script),
                std::env::var("PATH").unwrap_or_default(),
            )
        };
        let dir = p.path().display().to_string();
        let ralph_bin = bins.ralph.display().to_string();
        let mut args = vec![ralph_bin.as_str(), "run", "--no-tui", "-C", dir.as_str()];
        if claude {
            args.extend(["--agent", "claude"]);
        } else {
            args.extend(["--agent-cmd", agent_cmd.as_str()]);
        }
        let m = measure(bins, &args, &[("PATH", &path)], Stdio::null());
        check(&m, 3, "ralph run (max_iterations reached)");
        ralph_rss = ralph_rss.max(m.maxrss_kb);
        ralph.push(m.wall);

        let line = format!("{agent_cmd} < /dev/null | cat > /dev/null");
        let m = measure(
            bins,
            &["sh", "-c", &line],
            &[("PATH", &path)],
            Stdio::null(),
        );
        check(&m, 0, "the agent piped through cat");
        pipe_rss = pipe_rss.max(m.maxrss_kb);
        pipe.push(m.wall);
        // `p` (and the 200 MiB+ output log in it) goes away here.
    }
    let pairs = ralph.iter().copied().zip(pipe.iter().copied()).collect();
    let r = Throughput {
        format,
        bytes,
        runs,
        pairs,
        ralph: median(&mut ralph),
        pipe: median(&mut pipe),
        ralph_rss_kb: ralph_rss,
        pipe_rss_kb: pipe_rss,
    };
    eprintln!(
        "  {format}, {} MiB: ralph {:.3} s, pipe {:.3} s ({:.2}x), peak RSS {:.1} MiB",
        bytes / MIB,
        r.ralph.as_secs_f64(),
        r.pipe.as_secs_f64(),
        r.ratio(),
        r.ralph_rss_kb as f64 / 1024.0
    );
    r
}

fn check(m: &Measured, code: i32, what: &str) {
    if m.code != code {
        eprintln!("  warning: {what} exited with {} (expected {code})", m.code);
    }
}

pub fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}
