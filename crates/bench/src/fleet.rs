//! The `fleet` section: `ralph fleet` at work with the fake agent, in a small repository and
//! with ralph's state, data and git config in a directory of the bench's own.
//!
//! - From a verified DONE to landed: one loop per trial, `ralph fleet --land auto`, its
//!   `test_command: true` stamping the time when it passed in the loop's worktree (the last
//!   step before DONE counts as verified); landed is when `.ralph/worktree.json` was last
//!   written (it says `landed`). Between the two: the loop's own landing under the
//!   repository's lock, the rebase in a temporary worktree, the tests on the combined tree,
//!   the backup ref and the compare-and-swap. Median and p99.
//! - 20 loops waiting for an answer at once (`ralph fleet -j 20`): the fleet process's peak
//!   RSS (`VmHWM`) and its CPU time over a window while every loop waits (targets: under
//!   20 MiB, under 1% of a core). The loops themselves are separate processes, not counted.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, UNIX_EPOCH};

use crate::setup::{Bins, Stats, q, stats_ms};

/// The targets for 20 waiting loops.
const RSS_TARGET_MIB: f64 = 20.0;
const CPU_TARGET_PERCENT: f64 = 1.0;

/// The section's numbers.
#[derive(Debug)]
pub struct FleetCosts {
    /// From a verified DONE to landed, per trial.
    pub done_to_landed: Stats,
    /// 20 loops waiting, when it could be measured.
    pub waiting: Option<Waiting>,
}

/// The fleet process while its loops all wait for an answer.
#[derive(Debug)]
pub struct Waiting {
    pub loops: usize,
    pub seconds: f64,
    pub cpu_percent: f64,
    pub peak_rss_mib: f64,
}

/// A repository with one commit, and the environment every command of the section runs in.
struct Bench {
    dir: tempfile::TempDir,
}

impl Bench {
    fn new() -> Bench {
        let dir = tempfile::Builder::new()
            .prefix("ralph-bench-fleet-")
            .tempdir()
            .expect("a temporary directory");
        let b = Bench { dir };
        std::fs::create_dir_all(b.repo().join("tasks")).unwrap();
        std::fs::write(
            b.dir.path().join("gitconfig"),
            "[user]\n\tname = bench\n\temail = bench@localhost\n[commit]\n\tgpgsign = false\n",
        )
        .unwrap();
        b.git(&["init", "-q", "-b", "main"]);
        std::fs::write(b.repo().join("README"), "bench\n").unwrap();
        std::fs::write(b.repo().join(".gitignore"), "tasks/\n").unwrap();
        b.git(&["add", "-A"]);
        b.git(&["commit", "-q", "-m", "first"]);
        // main is not checked out: a landing moves only the ref, as for a user on a branch.
        b.git(&["checkout", "-q", "--detach"]);
        b
    }

    fn repo(&self) -> PathBuf {
        self.dir.path().join("repo")
    }

    fn env(&self, cmd: &mut Command) {
        let home = self.dir.path();
        cmd.env("RALPH_STATE_DIR", home.join("state"))
            .env("XDG_DATA_HOME", home.join("data"))
            .env("XDG_CONFIG_HOME", home.join("config"))
            .env("XDG_STATE_HOME", home.join("xdg-state"))
            .env("GIT_CONFIG_GLOBAL", home.join("gitconfig"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE");
    }

    fn git(&self, args: &[&str]) {
        let mut cmd = Command::new("git");
        cmd.arg("-C").arg(self.repo()).args(args);
        self.env(&mut cmd);
        let out = cmd.output().expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Writes `tasks/<name>.md` with its own scripted agent; returns its path.
    fn task(&self, bins: &Bins, name: &str, frontmatter: &str, script: &str) -> String {
        let script_path = self.dir.path().join(format!("{name}.script"));
        std::fs::write(&script_path, script).unwrap();
        let agent = format!("{} --script {}", q(&bins.fake), q(&script_path));
        let rel = format!("tasks/{name}.md");
        std::fs::write(
            self.repo().join(&rel),
            format!(
                "---\ntask: Bench {name}\nmax_iterations: 3\nbell: false\ndesktop_notification: false\nsandbox: false\nagent: \"{}\"\n{frontmatter}---\n\n- [ ] {name}\n",
                agent.replace('\\', "\\\\").replace('"', "\\\"")
            ),
        )
        .unwrap();
        rel
    }

    fn fleet(&self, bins: &Bins, args: &[&str]) -> Command {
        let mut cmd = Command::new(&bins.ralph);
        cmd.arg("fleet")
            .arg("--no-tui")
            .args(args)
            .current_dir(self.repo())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        self.env(&mut cmd);
        cmd
    }

    fn worktree(&self, slug: &str) -> Option<PathBuf> {
        let repos = self.dir.path().join("data/ralph/worktrees");
        let repo = std::fs::read_dir(repos).ok()?.flatten().next()?.path();
        Some(repo.join(slug))
    }
}

/// Runs the section: `trials` landings, then 20 loops waiting for `seconds`.
pub fn run(bins: &Bins, trials: usize, seconds: u64) -> FleetCosts {
    FleetCosts {
        done_to_landed: done_to_landed(bins, trials),
        waiting: waiting(bins, 20, seconds),
    }
}

fn done_to_landed(bins: &Bins, trials: usize) -> Stats {
    let b = Bench::new();
    let mut times = Vec::new();
    for n in 0..trials {
        let name = format!("landing {n}");
        let stamp = b.dir.path().join(format!("verified-{n}"));
        let test = format!(
            "test_command: case \"$PWD\" in *.landing-*) ;; *) date +%s%N > {} ;; esac\n",
            q(&stamp)
        );
        let rel = b.task(
            bins,
            &name.replace(' ', "-"),
            &test,
            &format!("write landed-{n}.txt work\\n\ncheck-all\nsignal DONE\n"),
        );
        let out = b
            .fleet(bins, &["--land", "auto", "--onto", "main", &rel])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .expect("ralph fleet runs");
        let status = out.status;
        let wt = b.worktree(&format!("bench-landing-{n}"));
        let landed = wt
            .as_ref()
            .and_then(|wt| std::fs::metadata(wt.join(".ralph/worktree.json")).ok())
            .and_then(|m| m.modified().ok());
        let verified: Option<u128> = std::fs::read_to_string(&stamp)
            .ok()
            .and_then(|s| s.trim().parse().ok());
        match (status.success(), landed, verified) {
            (true, Some(landed), Some(verified)) => {
                let landed = landed.duration_since(UNIX_EPOCH).unwrap().as_nanos();
                times.push(landed.saturating_sub(verified) as f64 / 1e6);
            }
            _ => eprintln!(
                "  warning: trial {n} did not land ({status}): {}{}",
                String::from_utf8_lossy(&out.stdout).trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        }
    }
    let stats = stats_ms(&mut times);
    eprintln!(
        "  from a verified DONE to landed: median {:.1} ms, p99 {:.1} ms ({} trials)",
        stats.median, stats.p99, stats.n
    );
    stats
}

fn waiting(bins: &Bins, loops: usize, seconds: u64) -> Option<Waiting> {
    let b = Bench::new();
    let tasks: Vec<String> = (0..loops)
        .map(|n| {
            b.task(
                bins,
                &format!("waiting-{n}"),
                "question_timeout: never\n",
                "question \"Go on?\" --option yes --option no\nsignal QUESTION\n",
            )
        })
        .collect();
    let jobs = loops.to_string();
    let mut args = vec!["-j", jobs.as_str()];
    args.extend(tasks.iter().map(String::as_str));
    let mut fleet = b.fleet(bins, &args).spawn().expect("ralph fleet starts");
    let all_wait = |b: &Bench| {
        (0..loops).all(|n| {
            b.worktree(&format!("bench-waiting-{n}"))
                .and_then(|wt| std::fs::read_to_string(wt.join(".ralph/state.json")).ok())
                .is_some_and(|s| s.contains("\"waiting_input\""))
        })
    };
    let deadline = Instant::now() + Duration::from_secs(180);
    while !all_wait(&b) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    let result = if all_wait(&b) {
        let pid = fleet.id();
        let cpu0 = cpu_ticks(pid);
        let start = Instant::now();
        std::thread::sleep(Duration::from_secs(seconds));
        let cpu1 = cpu_ticks(pid);
        let elapsed = start.elapsed().as_secs_f64();
        let cpu_s = cpu1.saturating_sub(cpu0) as f64 / 100.0;
        let w = Waiting {
            loops,
            seconds: elapsed,
            cpu_percent: 100.0 * cpu_s / elapsed,
            peak_rss_mib: peak_rss_kib(pid) as f64 / 1024.0,
        };
        eprintln!(
            "  {loops} loops waiting, {:.0} s: the fleet process used {:.2}% of a core, peak RSS {:.1} MiB",
            w.seconds, w.cpu_percent, w.peak_rss_mib
        );
        Some(w)
    } else {
        eprintln!("  warning: the {loops} loops did not all ask within 3 minutes");
        None
    };
    stop_all(bins, &b, &mut fleet, loops);
    result
}

/// Ends the fleet, then every loop (each is a process group of its own).
fn stop_all(bins: &Bins, b: &Bench, fleet: &mut Child, loops: usize) {
    let _ = fleet.kill();
    let _ = fleet.wait();
    for n in 0..loops {
        let Some(wt) = b.worktree(&format!("bench-waiting-{n}")) else {
            continue;
        };
        let mut stop = Command::new(&bins.ralph);
        stop.args(["stop", "-C"])
            .arg(&wt)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        b.env(&mut stop);
        let _ = stop.status();
    }
}

/// utime + stime of `pid`, in clock ticks (100 a second on Linux).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3, utime 14 and stime 15 (1-based over the whole line).
    let at = |i: usize| fields.get(i - 3).and_then(|s| s.parse::<u64>().ok());
    at(14).unwrap_or(0) + at(15).unwrap_or(0)
}

/// The peak resident set of `pid` (`VmHWM`), in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

impl FleetCosts {
    /// The section's table.
    pub fn table(&self) -> String {
        let d = &self.done_to_landed;
        let mut out = format!(
            "fleet                                   median    p99       max\n\
             from a verified DONE to landed         {:>6.1} ms {:>6.1} ms {:>6.1} ms  ({} trials)\n",
            d.median, d.p99, d.max, d.n
        );
        if let Some(w) = &self.waiting {
            let verdict = |ok: bool| if ok { "ok" } else { "MISS" };
            out.push_str(&format!(
                "{} loops waiting: the fleet process     peak RSS {:.1} MiB (< {RSS_TARGET_MIB} MiB {}), CPU {:.2}% of a core (< {CPU_TARGET_PERCENT}% {})\n",
                w.loops,
                w.peak_rss_mib,
                verdict(w.peak_rss_mib < RSS_TARGET_MIB),
                w.cpu_percent,
                verdict(w.cpu_percent < CPU_TARGET_PERCENT),
            ));
        }
        out
    }

    /// The section's JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "done_to_landed": self.done_to_landed.json(),
            "waiting": self.waiting.as_ref().map(|w| serde_json::json!({
                "loops": w.loops,
                "seconds": w.seconds,
                "cpu_percent": w.cpu_percent,
                "peak_rss_mib": w.peak_rss_mib,
            })),
        })
    }
}
