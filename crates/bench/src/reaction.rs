//! Questions: how fast one is shown, how fast an answer starts the next iteration, and what a
//! loop costs while it waits.
//!
//! Times come from one clock shared by every process (`CLOCK_REALTIME`, in nanoseconds): the
//! fake agent runs `ralph-bench __stamp` just before it prints `<ralph>QUESTION</ralph>` (so
//! the helper's exit is counted against ralph, a conservative bias of about a millisecond),
//! and again as the first thing of each iteration; the driver stamps the moment the question's
//! header line arrives on ralph's stdout pipe and the moment `ralph answer` returns.

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::setup::{Bins, Project, Stats, now_ns, q, read_stamps, stats_ms};

/// Reaction times over many questions.
#[derive(Debug, Clone)]
pub struct Reaction {
    /// From the signal leaving the agent to the question on ralph's stdout, ms.
    pub shown: Stats,
    /// From `ralph answer` returning to the next agent's first instruction, ms.
    pub next_start: Stats,
}

impl Reaction {
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({"signal_to_question_shown": self.shown.json(), "answer_to_next_agent_start": self.next_start.json()})
    }
}

/// The fake agent's script: iterations 1 to `asks` write a question and signal it; later
/// iterations only stamp their start.
///
/// Each question's text differs: ralph removes a question file identical to the one just
/// answered (it takes it for the answered one), so an agent repeating itself word for word
/// would lose its second question.
pub(crate) fn script(bins: &Bins, stamps: &Path, asks: u32) -> String {
    let stamp = |label: &str| format!("run {} __stamp {} {label}\n", q(&bins.me), q(stamps));
    let mut s = String::new();
    for i in 1..=asks {
        s.push_str(&format!(
            "[iteration {i}]\n{}question \"Which option should the benchmark take? (question {i})\" --option Alpha --option Beta --default Alpha\n{}signal QUESTION\n\n",
            stamp("start"),
            stamp("ask"),
        ));
    }
    s.push_str(&format!("[default]\n{}", stamp("start")));
    s
}

pub fn run(bins: &Bins, trials: u32) -> Reaction {
    let p = Project::new(trials + 1, "question_timeout: 10m\n");
    let stamps = p.path().join("stamps.txt");
    let agent = p.agent(bins, "script.txt", &script(bins, &stamps, trials));
    let (mut child, shown_rx) = spawn_plain(bins, p.path(), &agent);

    let mut shown = Vec::new();
    let mut answered = Vec::new();
    for _ in 0..trials {
        let Ok(t) = shown_rx.recv_timeout(Duration::from_secs(60)) else {
            eprintln!("  warning: no question shown within 60 s; stopping early");
            break;
        };
        shown.push(t);
        let status = Command::new(&bins.ralph)
            .args(["answer", "-C"])
            .arg(p.path())
            .arg("Alpha")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("run ralph answer");
        answered.push(now_ns());
        if !status.success() {
            eprintln!("  warning: ralph answer exited with {status}");
        }
    }
    let _ = child.wait();

    let stamps = read_stamps(&stamps);
    let at = |label: &str, iteration: u32| {
        stamps
            .iter()
            .find(|(l, i, _)| l == label && *i == iteration)
            .map(|s| s.2)
    };
    let mut to_shown = Vec::new();
    let mut to_start = Vec::new();
    for (k, (&s, &a)) in shown.iter().zip(&answered).enumerate() {
        let it = k as u32 + 1;
        if let Some(ask) = at("ask", it) {
            to_shown.push(s.saturating_sub(ask) as f64 / 1e6);
        }
        if let Some(start) = at("start", it + 1) {
            to_start.push(start.saturating_sub(a) as f64 / 1e6);
        }
    }
    let r = Reaction {
        shown: stats_ms(&mut to_shown),
        next_start: stats_ms(&mut to_start),
    };
    eprintln!(
        "  {} questions: shown after {:.2} ms median, {:.2} ms p99; next agent {:.2} ms median, {:.2} ms p99 after `ralph answer`",
        r.shown.n, r.shown.median, r.shown.p99, r.next_start.median, r.next_start.p99
    );
    r
}

/// Starts `ralph run --no-tui` with its stdout on a pipe; the receiver gets the time each
/// question header line arrives.
fn spawn_plain(bins: &Bins, dir: &Path, agent: &str) -> (Child, mpsc::Receiver<u128>) {
    let mut child = Command::new(&bins.ralph)
        .args(["run", "--no-tui", "-C"])
        .arg(dir)
        .args(["--agent-cmd", agent])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start ralph run");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line.contains("the agent asks") {
                let _ = tx.send(now_ns());
            }
        }
    });
    (child, rx)
}

/// What a loop costs while a question waits with nobody answering.
#[derive(Debug, Clone)]
pub struct Idle {
    pub front_end: &'static str,
    pub seconds: f64,
    /// User + system CPU time of the ralph process (all threads) over the window.
    pub cpu_s: f64,
    /// Context switches of all its threads: each is a wake-up (or a preemption).
    pub context_switches: u64,
    /// Syscalls counted by `strace -c -f`, when strace is there: (name, count), most first.
    pub syscalls: Option<Vec<(String, u64)>>,
}

impl Idle {
    pub fn syscalls_total(&self) -> Option<u64> {
        self.syscalls
            .as_ref()
            .map(|s| s.iter().map(|(_, n)| n).sum())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "front_end": self.front_end,
            "seconds": self.seconds,
            "cpu_s": self.cpu_s,
            "context_switches": self.context_switches,
            "wakeups_per_s": self.context_switches as f64 / self.seconds,
            "syscalls_total": self.syscalls_total(),
            "syscalls": self.syscalls.as_ref().map(|s| s.iter().map(|(n, c)| serde_json::json!({"name": n, "count": c})).collect::<Vec<_>>()),
        })
    }
}

/// Plain mode: a question waits `seconds` while ralph is watched.
pub fn idle_plain(bins: &Bins, seconds: u64) -> Option<Idle> {
    let p = Project::new(1, "question_timeout: 10m\n");
    let stamps = p.path().join("stamps.txt");
    let agent = p.agent(bins, "script.txt", &script(bins, &stamps, 1));
    let (mut child, shown) = spawn_plain(bins, p.path(), &agent);
    let result = shown
        .recv_timeout(Duration::from_secs(60))
        .ok()
        .map(|_| watch("plain (--no-tui)", child.id(), seconds));
    stop(child.id());
    let _ = child.wait();
    result
}

/// The terminal UI under tmux: a question waits `seconds` with its countdown drawn.
pub fn idle_tui(bins: &Bins, seconds: u64) -> Option<Idle> {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("  tmux is not installed: skipping the TUI idle measurement");
        return None;
    }
    let p = Project::new(1, "question_timeout: 10m\n");
    let stamps = p.path().join("stamps.txt");
    let agent = p.agent(bins, "script.txt", &script(bins, &stamps, 1));
    let socket = format!("ralph-bench-{}", std::process::id());
    let tmux = |args: &[&str]| {
        Command::new("tmux")
            .args(["-L", &socket])
            .args(args)
            .stderr(Stdio::null())
            .output()
    };
    let line = format!(
        "exec {} run -C {} --agent-cmd {}",
        q(&bins.ralph),
        q(p.path()),
        q(Path::new(&agent))
    );
    tmux(&[
        "new-session",
        "-d",
        "-x",
        "120",
        "-y",
        "40",
        "-s",
        "bench",
        &line,
    ])
    .ok()?;
    let pid: Option<u32> = tmux(&["list-panes", "-t", "bench", "-F", "#{pane_pid}"])
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok());
    let mut result = None;
    if let Some(pid) = pid {
        // Wait for the question panel (the driver polls; ralph is not being measured yet).
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            let screen = tmux(&["capture-pane", "-p", "-t", "bench"])
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            if screen.contains("Which option should the benchmark take?") {
                result = Some(watch("terminal UI (tmux)", pid, seconds));
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if result.is_none() {
            eprintln!("  warning: the TUI did not show the question within 60 s");
        }
        stop(pid);
        std::thread::sleep(Duration::from_millis(500));
    }
    let _ = tmux(&["kill-server"]);
    result
}

fn stop(pid: u32) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
}

/// CPU time and context switches of `pid` over `seconds`, with `strace -c -f` attached if
/// it is installed.
fn watch(front_end: &'static str, pid: u32, seconds: u64) -> Idle {
    let summary = tempfile::NamedTempFile::new().expect("strace output");
    let strace = Command::new("strace")
        .args(["-c", "-f", "-q", "-o"])
        .arg(summary.path())
        .args(["-p", &pid.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok();
    // Let strace attach before the window opens.
    std::thread::sleep(Duration::from_millis(300));
    let (cpu0, cs0) = (cpu_ticks(pid), switches(pid));
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs(seconds));
    let (cpu1, cs1) = (cpu_ticks(pid), switches(pid));
    let elapsed = start.elapsed().as_secs_f64();
    let syscalls = strace.map(|mut s| {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(s.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        );
        let _ = s.wait();
        parse_strace(&std::fs::read_to_string(summary.path()).unwrap_or_default())
    });
    let idle = Idle {
        front_end,
        seconds: elapsed,
        cpu_s: (cpu1.saturating_sub(cpu0)) as f64 / ticks_per_s(),
        context_switches: cs1.saturating_sub(cs0),
        syscalls,
    };
    eprintln!(
        "  idle {front_end}, {:.0} s: CPU {:.3} s, {} context switches, {} syscalls{}",
        idle.seconds,
        idle.cpu_s,
        idle.context_switches,
        idle.syscalls_total().map_or("?".into(), |n| n.to_string()),
        idle.syscalls
            .as_ref()
            .map(|s| format!(
                " ({})",
                s.iter()
                    .map(|(n, c)| format!("{n} {c}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            .unwrap_or_default()
    );
    idle
}

/// utime + stime of the whole process, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which may hold spaces and ends with ')'.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let get = |i: usize| {
        fields
            .get(i)
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    get(11) + get(12)
}

fn ticks_per_s() -> f64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .map_or(100.0, |t| t as f64)
}

/// Voluntary plus involuntary context switches of every thread of `pid`.
fn switches(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .map(|t| {
            std::fs::read_to_string(t.path().join("status"))
                .unwrap_or_default()
                .lines()
                .filter(|l| l.contains("ctxt_switches"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>()
        })
        .sum()
}

/// The rows of an `strace -c` summary: (syscall, calls).
fn parse_strace(text: &str) -> Vec<(String, u64)> {
    let mut rows: Vec<(String, u64)> = text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // % time, seconds, usecs/call, calls, [errors], syscall
            if f.len() < 5 || f[0].starts_with('-') || f[0] == "%" || f.last() == Some(&"total") {
                return None;
            }
            let calls = f[3].parse().ok()?;
            Some((f.last()?.to_string(), calls))
        })
        .collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.1));
    rows
}
