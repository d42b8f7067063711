//! `ralph serve`: how fast an answer POSTed to an answer link starts the next agent, how fast a
//! question closed elsewhere reaches an open page, and the broker's peak memory.
//!
//! One `ralph serve` (release) with its own state directory, one loop whose fake agent asks a
//! question every iteration. Odd questions are answered by a POST to their answer link; the
//! time runs from the POST's reply to the next agent's first instruction (its `__stamp`).
//! Even questions have their page's event stream open while `ralph answer` answers them from a
//! terminal; the time runs from starting `ralph answer` to the `closed` event arriving (so it
//! counts that command's own start-up too: the loop often closes the question before the
//! command has even exited).

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::setup::{Bins, Project, Stats, now_ns, q, read_stamps, stats_ms};

/// What the broker measured.
#[derive(Debug, Clone)]
pub struct Remote {
    /// From the answer link's POST returning to the next agent's first instruction, ms.
    pub post_to_next_start: Stats,
    /// From starting `ralph answer` to the open page's `closed` event, ms.
    pub closed_pushed: Stats,
    /// `ralph serve`'s peak resident memory, KiB.
    pub serve_peak_rss_kib: u64,
}

impl Remote {
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "post_to_next_agent_start": self.post_to_next_start.json(),
            "closed_elsewhere_to_page": self.closed_pushed.json(),
            "serve_peak_rss_kib": self.serve_peak_rss_kib,
        })
    }

    /// The rows for the table, with the issue's targets.
    pub fn table(&self) -> String {
        let row = |what: &str, s: &Stats, target: f64| {
            format!(
                "{what:<52} {:>8.2} ms median {:>8.2} ms p99  (target p99 ≤ {target} ms: {})\n",
                s.median,
                s.p99,
                if s.p99 <= target { "ok" } else { "MISS" }
            )
        };
        let mib = self.serve_peak_rss_kib as f64 / 1024.0;
        format!(
            "{}{}{:<52} {mib:>8.1} MiB peak RSS            (target < 16 MiB: {})\n",
            row(
                "ralph serve: POST answer link -> next agent starts",
                &self.post_to_next_start,
                20.0
            ),
            row(
                "ralph serve: `ralph answer` run -> open page told",
                &self.closed_pushed,
                50.0
            ),
            "ralph serve: memory",
            if mib < 16.0 { "ok" } else { "MISS" }
        )
    }
}

fn http() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

pub fn run(bins: &Bins, trials: u32) -> Result<Remote, String> {
    let state = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut serve = Command::new(&bins.ralph)
        .args(["serve", "--bind", "127.0.0.1:0"])
        .env("RALPH_STATE_DIR", state.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("start ralph serve: {e}"))?;
    let serve_pid = serve.id();
    let result = measure(bins, state.path(), trials, serve_pid);
    let _ = serve.kill();
    let _ = serve.wait();
    result
}

fn measure(bins: &Bins, state: &Path, trials: u32, serve_pid: u32) -> Result<Remote, String> {
    let lock = state.join("serve.lock");
    wait(Duration::from_secs(20), || {
        std::fs::read_to_string(&lock)
            .ok()
            .filter(|s| s.contains("url"))
    })
    .ok_or("ralph serve never said where it listens")?;

    let p = Project::new(trials + 1, "question_timeout: 10m\n");
    let stamps = p.path().join("stamps.txt");
    let stamp = |label: &str| format!("run {} __stamp {} {label}\n", q(&bins.me), q(&stamps));
    let mut script = String::new();
    for i in 1..=trials {
        script.push_str(&format!(
            "[iteration {i}]\n{}question \"Which option should the benchmark take? (question {i})\" --option Alpha --option Beta --default Alpha\nsignal QUESTION\n\n",
            stamp("start"),
        ));
    }
    script.push_str(&format!("[default]\n{}", stamp("start")));
    let agent = p.agent(bins, "script.txt", &script);
    let mut child = Command::new(&bins.ralph)
        .args(["run", "--no-tui", "-C"])
        .arg(p.path())
        .args(["--agent-cmd", &agent])
        .env("RALPH_STATE_DIR", state)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("start ralph run: {e}"))?;

    let mut posted = Vec::new();
    let mut pushed = Vec::new();
    for i in 1..=trials {
        let waiting = wait(Duration::from_secs(60), || {
            let raw = std::fs::read_to_string(p.path().join(".ralph/state.json")).ok()?;
            let v: serde_json::Value = serde_json::from_str(&raw).ok()?;
            (v["status"] == "waiting_input" && v["iteration"] == i).then_some(())
        });
        if waiting.is_none() {
            eprintln!("  warning: question {i} never came; stopping early");
            break;
        }
        let out = Command::new(&bins.ralph)
            .args(["status", "--json", "-C"])
            .arg(p.path())
            .env("RALPH_STATE_DIR", state)
            .output()
            .map_err(|e| e.to_string())?;
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let Some(url) = json["pending_question"]["answer_url"].as_str() else {
            return Err(format!("no answer_url in `ralph status --json`: {json}"));
        };
        if i % 2 == 1 {
            let origin = url.split("/a/").next().unwrap_or_default();
            let resp = http()
                .post(url)
                .header("content-type", "application/json")
                .header("origin", origin)
                .send(r#"{"option": 1}"#);
            posted.push((i, now_ns()));
            if !resp.is_ok_and(|r| r.status() == 200) {
                eprintln!("  warning: the POST to question {i}'s link was not taken");
            }
        } else {
            let (tx, rx) = mpsc::channel();
            let events = format!("{url}/events");
            let reader = std::thread::spawn(move || {
                let Ok(mut resp) = http().get(&events).call() else {
                    return;
                };
                let _ = tx.send(None);
                let lines = BufReader::new(resp.body_mut().as_reader()).lines();
                for line in lines.map_while(Result::ok) {
                    if line.starts_with("event: closed") {
                        let _ = tx.send(Some(now_ns()));
                        return;
                    }
                }
            });
            // The stream is open (its headers came) before the terminal answers.
            if rx.recv_timeout(Duration::from_secs(10)).is_err() {
                eprintln!("  warning: question {i}'s event stream did not open");
                continue;
            }
            let answered = now_ns();
            let status = Command::new(&bins.ralph)
                .args(["answer", "-C"])
                .arg(p.path())
                .arg("Alpha")
                .env("RALPH_STATE_DIR", state)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map_err(|e| e.to_string())?;
            if !status.success() {
                eprintln!("  warning: ralph answer exited with {status}");
            }
            match rx.recv_timeout(Duration::from_secs(10)) {
                Ok(Some(t)) => pushed.push(t.saturating_sub(answered) as f64 / 1e6),
                _ => eprintln!("  warning: question {i}'s page was never told it closed"),
            }
            let _ = reader.join();
        }
    }
    let _ = child.wait();
    let peak = peak_rss_kib(serve_pid);

    let stamps = read_stamps(&stamps);
    let mut to_start: Vec<f64> = posted
        .iter()
        .filter_map(|&(i, t)| {
            let start = stamps
                .iter()
                .find(|(l, it, _)| l == "start" && *it == i + 1)?
                .2;
            Some(start.saturating_sub(t) as f64 / 1e6)
        })
        .collect();
    let r = Remote {
        post_to_next_start: stats_ms(&mut to_start),
        closed_pushed: stats_ms(&mut pushed),
        serve_peak_rss_kib: peak,
    };
    eprintln!(
        "  {} POSTs: next agent {:.2} ms median, {:.2} ms p99; {} pages told {:.2} ms median, {:.2} ms p99; serve peak {} KiB",
        r.post_to_next_start.n,
        r.post_to_next_start.median,
        r.post_to_next_start.p99,
        r.closed_pushed.n,
        r.closed_pushed.median,
        r.closed_pushed.p99,
        r.serve_peak_rss_kib
    );
    Ok(r)
}

/// `VmHWM` of `pid`: its peak resident set so far.
fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Polls `f` every 2 ms until it gives a value or `limit` passes.
fn wait<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(v) = f() {
            return Some(v);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    None
}
