//! `ralph serve`: how fast an answer POSTed to an answer link starts the next agent, how fast a
//! question closed elsewhere reaches an open page, how fast a new question reaches an open
//! dashboard, what the broker does while nothing happens, and its peak memory.
//!
//! One `ralph serve` (release) with its own state directory, one loop whose fake agent asks a
//! question every iteration. Odd questions are answered by a POST to their answer link; the
//! time runs from the POST's reply to the next agent's first instruction (its `__stamp`).
//! Even questions have their page's event stream open while `ralph answer` answers them from a
//! terminal; the time runs from starting `ralph answer` to the `closed` event arriving (so it
//! counts that command's own start-up too: the loop often closes the question before the
//! command has even exited). A paired dashboard's event stream is open all along: for every
//! question, the time runs from the loop's `state.json` with the question landing (seen by an
//! inotify watch of this process on `.ralph/`, as the broker's own watch sees it) to the
//! dashboard's `loops` event that shows it.
//!
//! Idle: a second `ralph serve` with fifty registered loops (registry entries and `state.json`
//! files written here; five of them waiting on a question) and its Telegram bot pointed at the
//! mock Bot API of `ralph-mock-api`, whose `getUpdates` holds for its whole timeout as
//! Telegram's does. Once the bot has sent the five questions and the broker has settled, its
//! threads' context switches (`/proc/PID/task/*/status`) are counted over a window: every one
//! is a wake-up. The target is none but the long poll's (the `telegram-poll` thread).

use std::collections::HashMap;
use std::io::{BufRead as _, BufReader};
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use crate::setup::{Bins, Project, Stats, now_ns, q, read_stamps, stats_ms};

/// What the broker measured.
#[derive(Debug, Clone)]
pub struct Remote {
    /// From the answer link's POST returning to the next agent's first instruction, ms.
    pub post_to_next_start: Stats,
    /// From starting `ralph answer` to the open page's `closed` event, ms.
    pub closed_pushed: Stats,
    /// From the loop's `state.json` with a new question landing to an open dashboard's event
    /// showing it, ms.
    pub question_pushed: Stats,
    /// `ralph serve`'s peak resident memory, KiB.
    pub serve_peak_rss_kib: u64,
    /// The broker waiting with fifty loops, if that part ran.
    pub idle: Option<Idle>,
}

/// The broker waiting with [`IDLE_LOOPS`] loops registered and its Telegram bot long-polling.
#[derive(Debug, Clone)]
pub struct Idle {
    /// How long the wake-ups were counted, s.
    pub seconds: u64,
    /// Context switches of every thread but the long poll's: the wake-ups that should not be.
    pub other_wakeups: u64,
    /// Context switches of the `telegram-poll` thread.
    pub poll_wakeups: u64,
    /// `getUpdates` calls the mock answered in the window.
    pub polls: u64,
    /// Threads that started or ended in the window.
    pub threads_changed: u64,
}

impl Remote {
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "post_to_next_agent_start": self.post_to_next_start.json(),
            "closed_elsewhere_to_page": self.closed_pushed.json(),
            "new_question_to_dashboard": self.question_pushed.json(),
            "serve_peak_rss_kib": self.serve_peak_rss_kib,
            "idle_50_loops": self.idle.as_ref().map(|i| serde_json::json!({
                "loops": IDLE_LOOPS,
                "seconds": i.seconds,
                "other_wakeups": i.other_wakeups,
                "poll_thread_wakeups": i.poll_wakeups,
                "get_updates_calls": i.polls,
                "threads_started_or_ended": i.threads_changed,
            })),
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
        let idle = match &self.idle {
            Some(i) => format!(
                "{:<52} {:>8} wake-ups in {} s; long poll: {} getUpdates, {} wake-ups (target: none but the long poll's: {})\n",
                format!("ralph serve: waiting, {IDLE_LOOPS} loops, Telegram on"),
                i.other_wakeups + i.threads_changed,
                i.seconds,
                i.polls,
                i.poll_wakeups,
                if i.other_wakeups + i.threads_changed == 0 {
                    "ok"
                } else {
                    "MISS"
                }
            ),
            None => String::new(),
        };
        format!(
            "{}{}{}{idle}{:<52} {mib:>8.1} MiB peak RSS            (target < 16 MiB: {})\n",
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
            row(
                "ralph serve: new question -> open dashboard told",
                &self.question_pushed,
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

/// How many loops the idle broker has registered.
pub const IDLE_LOOPS: usize = 50;

pub fn run(bins: &Bins, trials: u32, idle_secs: u64) -> Result<Remote, String> {
    let idle = match idle(bins, idle_secs) {
        Ok(i) => Some(i),
        Err(e) => {
            eprintln!("  warning: the idle broker: {e}");
            None
        }
    };
    let mut r = answers(bins, trials)?;
    r.idle = idle;
    Ok(r)
}

fn answers(bins: &Bins, trials: u32) -> Result<Remote, String> {
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
    let written = question_landings(&p.path().join(".ralph"))?;
    let shown = dashboard_showings(bins, state)?;
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
    let written = written.lock().map(|w| w.clone()).unwrap_or_default();
    let shown = shown.lock().map(|s| s.clone()).unwrap_or_default();
    let mut to_dashboard: Vec<f64> = written
        .iter()
        .filter_map(|(i, at)| {
            let seen = shown.get(i)?;
            Some(seen.saturating_sub(*at) as f64 / 1e6)
        })
        .collect();
    let r = Remote {
        post_to_next_start: stats_ms(&mut to_start),
        closed_pushed: stats_ms(&mut pushed),
        question_pushed: stats_ms(&mut to_dashboard),
        serve_peak_rss_kib: peak,
        idle: None,
    };
    eprintln!(
        "  {} POSTs: next agent {:.2} ms median, {:.2} ms p99; {} pages told {:.2} ms median, {:.2} ms p99; {} questions on the dashboard {:.2} ms median, {:.2} ms p99; serve peak {} KiB",
        r.post_to_next_start.n,
        r.post_to_next_start.median,
        r.post_to_next_start.p99,
        r.closed_pushed.n,
        r.closed_pushed.median,
        r.closed_pushed.p99,
        r.question_pushed.n,
        r.question_pushed.median,
        r.question_pushed.p99,
        r.serve_peak_rss_kib
    );
    Ok(r)
}

/// Question number -> when (ns) it was first seen.
type Seen = Arc<Mutex<HashMap<u32, u128>>>;

/// Watches `dot_ralph` for `state.json` landing (renamed into place, as every save is) and
/// notes when each iteration's question first shows there.
fn question_landings(dot_ralph: &Path) -> Result<Seen, String> {
    std::fs::create_dir_all(dot_ralph).map_err(|e| e.to_string())?;
    let mut inotify = inotify::Inotify::init().map_err(|e| e.to_string())?;
    inotify
        .watches()
        .add(
            dot_ralph,
            inotify::WatchMask::MOVED_TO | inotify::WatchMask::CLOSE_WRITE,
        )
        .map_err(|e| e.to_string())?;
    let seen = Seen::default();
    let out = Arc::clone(&seen);
    let state = dot_ralph.join("state.json");
    std::thread::spawn(move || {
        let mut buffer = vec![0u8; 4096];
        // Ends when the project is removed (the watch goes, and with it the events).
        while let Ok(events) = inotify.read_events_blocking(&mut buffer) {
            let now = now_ns();
            let landed = events
                .into_iter()
                .any(|e| e.name.is_some_and(|n| n == "state.json"));
            if !landed {
                continue;
            }
            let Some(v) = std::fs::read_to_string(&state)
                .ok()
                .and_then(|raw| serde_json::from_str::<serde_json::Value>(&raw).ok())
            else {
                continue;
            };
            if v["status"] == "waiting_input"
                && let Some(i) = v["iteration"].as_u64().and_then(|i| u32::try_from(i).ok())
                && let Ok(mut seen) = out.lock()
            {
                seen.entry(i).or_insert(now);
            }
        }
    });
    Ok(seen)
}

/// Pairs a dashboard with the broker in `state` and keeps its event stream open, noting when
/// each question (by its number in the text) first shows in a `loops` event.
fn dashboard_showings(bins: &Bins, state: &Path) -> Result<Seen, String> {
    let out = Command::new(&bins.ralph)
        .args(["serve", "pair", "web"])
        .env("RALPH_STATE_DIR", state)
        .output()
        .map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let link = stdout
        .split_whitespace()
        .find(|w| w.contains("/pair/"))
        .ok_or_else(|| format!("`ralph serve pair web` printed no link: {stdout}"))?;
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .into();
    let paired = agent.get(link).call().map_err(|e| e.to_string())?;
    let cookie = paired
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|c| c.split(';').next())
        .ok_or("pairing set no cookie")?
        .to_string();
    let events = format!("{}/events", link.split("/pair/").next().unwrap_or_default());
    let resp = http()
        .get(&events)
        .header("cookie", &cookie)
        .call()
        .map_err(|e| e.to_string())?;
    if resp.status() != 200 {
        return Err(format!("the dashboard's stream answered {}", resp.status()));
    }
    let seen = Seen::default();
    let out = Arc::clone(&seen);
    std::thread::spawn(move || {
        let lines = BufReader::new(resp.into_body().into_reader()).lines();
        for line in lines.map_while(Result::ok) {
            let now = now_ns();
            let Some(data) = line.strip_prefix("data: ") else {
                continue;
            };
            // "(question 12)": the closing parenthesis keeps 1 from matching 12.
            for part in data.split("(question ").skip(1) {
                if let Some(i) = part.split(')').next().and_then(|n| n.parse::<u32>().ok())
                    && let Ok(mut seen) = out.lock()
                {
                    seen.entry(i).or_insert(now);
                }
            }
        }
    });
    Ok(seen)
}

/// The broker waiting with [`IDLE_LOOPS`] loops and its Telegram bot on: its wake-ups over
/// `seconds`.
fn idle(bins: &Bins, seconds: u64) -> Result<Idle, String> {
    let mock = ralph_mock_api::telegram::TelegramMock::start().map_err(|e| e.to_string())?;
    let state = tempfile::tempdir().map_err(|e| e.to_string())?;
    let config = tempfile::tempdir().map_err(|e| e.to_string())?;
    let projects = tempfile::tempdir().map_err(|e| e.to_string())?;
    let remote_toml = config.path().join("ralph/remote.toml");
    std::fs::create_dir_all(config.path().join("ralph")).map_err(|e| e.to_string())?;
    std::fs::write(
        &remote_toml,
        format!(
            "[telegram]\ntoken = \"1:bench\"\napi_url = \"{}\"\n",
            mock.url()
        ),
    )
    .map_err(|e| e.to_string())?;
    std::fs::set_permissions(&remote_toml, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| e.to_string())?;
    // Paired already: the bot sends the waiting questions to chat 1.
    std::fs::write(
        state.path().join("telegram.json"),
        r#"{"user_id": 1, "chat_id": 1, "paired_at": "2026-01-01T00:00:00.000Z"}"#,
    )
    .map_err(|e| e.to_string())?;
    let registry = state.path().join("loops");
    std::fs::create_dir_all(&registry).map_err(|e| e.to_string())?;
    // The loops' pid is this process's: alive for as long as the measurement.
    let pid = std::process::id();
    let waiting = 5;
    for n in 0..IDLE_LOOPS {
        let root = projects.path().join(format!("loop-{n:02}"));
        std::fs::create_dir_all(root.join(".ralph")).map_err(|e| e.to_string())?;
        let question = (n < waiting).then(|| {
            serde_json::json!({
                "text": format!("Idle question {n}?"),
                "options": [{"label": "Alpha"}, {"label": "Beta"}],
                "default": "Alpha",
                "multi_select": false,
                "asked_at": "2026-01-01T00:00:00.000Z",
                "deadline": null,
                "iteration": 3,
                "raised_by": "signal",
            })
        });
        let loop_state = serde_json::json!({
            "status": if question.is_some() { "waiting_input" } else { "running" },
            "iteration": 3,
            "max_iterations": 50,
            "pid": pid,
            "root": root,
            "task": format!("Idle loop {n}"),
            "agent": "fake",
            "started_at": "2026-01-01T00:00:00.000Z",
            "updated_at": "2026-01-01T00:00:00.000Z",
            "pending_question": question,
        });
        std::fs::write(root.join(".ralph/state.json"), loop_state.to_string())
            .map_err(|e| e.to_string())?;
        let entry =
            serde_json::json!({"root": root, "pid": pid, "started_at": "2026-01-01T00:00:00.000Z"});
        std::fs::write(registry.join(format!("{n:02}.json")), entry.to_string())
            .map_err(|e| e.to_string())?;
    }
    let mut serve = Command::new(&bins.ralph)
        .args(["serve", "--bind", "127.0.0.1:0"])
        .env("RALPH_STATE_DIR", state.path())
        .env("XDG_CONFIG_HOME", config.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("start ralph serve: {e}"))?;
    let pid = serve.id();
    let result = (|| {
        let sent = wait(Duration::from_secs(30), || {
            let n = mock
                .calls()
                .iter()
                .filter(|c| c.method == "sendMessage")
                .count();
            (n >= waiting).then_some(n)
        });
        if sent.is_none() {
            return Err(format!(
                "the bot did not send the {waiting} waiting questions: {:?}",
                mock.calls()
            ));
        }
        // Threads the start-up used (Tokio's blocking pool) end after 10 s of rest; they are
        // start-up, not waiting.
        std::thread::sleep(Duration::from_secs(12));
        let (before, polls_before) = (switches(pid), mock.polls());
        std::thread::sleep(Duration::from_secs(seconds));
        let (after, polls_after) = (switches(pid), mock.polls());
        let mut idle = Idle {
            seconds,
            other_wakeups: 0,
            poll_wakeups: 0,
            polls: polls_after - polls_before,
            threads_changed: 0,
        };
        for (tid, (name, n)) in &after {
            match before.get(tid) {
                Some((_, m)) if name == "telegram-poll" => idle.poll_wakeups += n - m,
                Some((_, m)) => idle.other_wakeups += n - m,
                None => idle.threads_changed += 1,
            }
        }
        idle.threads_changed += before.keys().filter(|t| !after.contains_key(*t)).count() as u64;
        Ok(idle)
    })();
    let _ = serve.kill();
    let _ = serve.wait();
    if let Ok(i) = &result {
        eprintln!(
            "  waiting with {IDLE_LOOPS} loops for {} s: {} wake-ups besides the long poll, {} threads started or ended; long poll: {} getUpdates, {} wake-ups",
            i.seconds, i.other_wakeups, i.threads_changed, i.polls, i.poll_wakeups
        );
    }
    result
}

/// Each thread of `pid`: its name and context switches so far (voluntary and not).
fn switches(pid: u32) -> HashMap<u32, (String, u64)> {
    let mut out = HashMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        let n: u64 = status
            .lines()
            .filter(|l| l.contains("ctxt_switches:"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum();
        out.insert(tid, (name.trim().to_string(), n));
    }
    out
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
