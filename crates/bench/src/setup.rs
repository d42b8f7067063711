//! What every whole-process measurement needs: the binaries, a throwaway project, and two
//! tiny helpers the driver runs as child processes of itself (`__rusage`, `__stamp`).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The release binaries under test, found next to this one.
#[derive(Debug, Clone)]
pub struct Bins {
    pub ralph: PathBuf,
    /// `ralph` built with the portable process backend (`--features portable`), copied to
    /// `ralph-portable` by `make bench`; measured beside `ralph` where it is there.
    pub ralph_portable: Option<PathBuf>,
    pub fake: PathBuf,
    /// `ralph-bench` itself, for its helpers.
    pub me: PathBuf,
    /// The cargo target directory (`target/`): results go to `bench/`, criterion's to `criterion/`.
    pub target: PathBuf,
}

impl Bins {
    /// Finds `ralph` and `ralph-fake-agent` beside this executable.
    pub fn locate() -> Result<Bins, String> {
        let me = std::env::current_exe().map_err(|e| format!("cannot find myself: {e}"))?;
        let dir = me.parent().ok_or("no parent directory")?.to_path_buf();
        let bins = Bins {
            ralph: dir.join("ralph"),
            ralph_portable: Some(dir.join("ralph-portable")).filter(|p| p.is_file()),
            fake: dir.join("ralph-fake-agent"),
            target: dir.parent().ok_or("no target directory")?.to_path_buf(),
            me,
        };
        for b in [&bins.ralph, &bins.fake] {
            if !b.is_file() {
                return Err(format!(
                    "{} is missing: build it first (`cargo build --release --bins`, or `make bench`)",
                    b.display()
                ));
            }
        }
        Ok(bins)
    }
}

/// A fresh project directory with a task that never completes.
#[derive(Debug)]
pub struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    /// A project whose `RALPH_TASK.md` has one open criterion, no test command, no bell and no
    /// desktop notification; `extra` adds frontmatter lines.
    pub fn new(max_iterations: u32, extra: &str) -> Project {
        Project::new_in(&std::env::temp_dir(), max_iterations, extra)
    }

    /// [`Project::new`] in a directory under `parent` (to pick the file system).
    pub fn new_in(parent: &Path, max_iterations: u32, extra: &str) -> Project {
        let dir = tempfile::Builder::new()
            .prefix("ralph-bench-")
            .tempdir_in(parent)
            .expect("a temporary directory");
        let p = Project { dir };
        p.write(
            "RALPH_TASK.md",
            &format!(
                "---\ntask: Benchmark ralph with a scripted agent\nmax_iterations: {max_iterations}\nbell: false\ndesktop_notification: false\n{extra}---\n\n- [ ] never done\n"
            ),
        );
        p
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `name` in the project; returns its path.
    pub fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, contents).expect("write into the project");
        path
    }

    /// A fake-agent script in the project, and the `--agent-cmd` that runs it.
    pub fn agent(&self, bins: &Bins, name: &str, script: &str) -> String {
        let path = self.write(name, script);
        format!("{} --script {}", q(&bins.fake), q(&path))
    }

    /// The argv of [`Project::agent`]'s command for the script `name`, as started without a shell.
    pub fn agent_argv(&self, bins: &Bins, name: &str) -> Vec<String> {
        vec![
            bins.fake.display().to_string(),
            "--script".into(),
            self.dir.path().join(name).display().to_string(),
        ]
    }

    /// A fake `claude` on a PATH directory of the project that runs `script`, so `--agent
    /// claude` (the stream-json preset) runs the fake agent. Returns the PATH to use.
    pub fn fake_claude(&self, bins: &Bins, script: &str) -> String {
        use std::os::unix::fs::PermissionsExt as _;
        let script = self.write("claude-script.txt", script);
        let bin = self.dir.path().join("bin");
        std::fs::create_dir_all(&bin).expect("bin dir");
        let claude = bin.join("claude");
        std::fs::write(
            &claude,
            format!(
                "#!/bin/sh\nexec {} --script {}\n",
                q(&bins.fake),
                q(&script)
            ),
        )
        .expect("write fake claude");
        std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }
}

/// Single-quotes a path for `sh -c`.
pub fn q(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

/// One measured child process.
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    pub wall: Duration,
    /// Peak resident set of the process and everything it waited for, in KiB.
    pub maxrss_kb: u64,
    pub code: i32,
}

/// Runs `cmd` under the `__rusage` helper: wall time from spawn to exit, and the peak RSS of
/// the whole tree it reaped (`getrusage(RUSAGE_CHILDREN)` in a process that ran only `cmd`).
pub fn measure(bins: &Bins, cmd: &[&str], env: &[(&str, &str)], stdout: Stdio) -> Measured {
    let out = tempfile::NamedTempFile::new().expect("a result file");
    let status = Command::new(&bins.me)
        .arg("__rusage")
        .arg(out.path())
        .arg("--")
        .args(cmd)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(stdout)
        .status()
        .expect("run the rusage helper");
    assert!(status.success(), "the rusage helper failed: {status}");
    let text = std::fs::read_to_string(out.path()).expect("helper result");
    let mut it = text
        .split_whitespace()
        .map(|s| s.parse::<i64>().unwrap_or(-1));
    let (wall, rss, code) = (it.next(), it.next(), it.next());
    Measured {
        wall: Duration::from_nanos(wall.unwrap_or(0) as u64),
        maxrss_kb: rss.unwrap_or(0) as u64,
        code: code.unwrap_or(-1) as i32,
    }
}

/// The `__rusage OUT -- CMD…` helper: runs CMD, then writes `wall_ns maxrss_kb exit_code`.
pub fn rusage_helper(args: &[String]) -> ExitStatus {
    let out = &args[0];
    let cmd = &args[2..];
    let start = Instant::now();
    let status = Command::new(&cmd[0])
        .args(&cmd[1..])
        .status()
        .expect("spawn the measured command");
    let wall = start.elapsed();
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .expect("getrusage");
    std::fs::write(
        out,
        format!(
            "{} {} {}\n",
            wall.as_nanos(),
            usage.max_rss(),
            status.code().unwrap_or(-1)
        ),
    )
    .expect("write the helper result");
    status
}

/// Nanoseconds since the Unix epoch: one clock every process on the machine shares.
pub fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos()
}

/// The `__stamp FILE LABEL [--emit TOPIC]` helper: appends `LABEL ITERATION NANOS` (one
/// `write`, `O_APPEND`); with `--emit`, also appends an event on TOPIC to the events file
/// ralph-orchestrator names in `RALPH_EVENTS_FILE`, as its `ralph emit` does, in the same
/// process (so the agent that stamps and the one that also emits cost the same).
pub fn stamp_helper(args: &[String]) {
    let t = now_ns();
    let iteration = std::env::var("RALPH_ITERATION").unwrap_or_else(|_| "0".into());
    let line = format!("{} {iteration} {t}\n", args[1]);
    append(Path::new(&args[0]), &line);
    if let [_, label, flag, topic] = args
        && flag == "--emit"
    {
        let events = std::env::var_os("RALPH_EVENTS_FILE")
            .expect("--emit needs RALPH_EVENTS_FILE (ralph-orchestrator sets it)");
        append(
            Path::new(&events),
            &orchestrator_event(topic, &format!("{label} {t}"), t),
        );
    }
}

/// One line of ralph-orchestrator's events file, as `ralph emit TOPIC PAYLOAD` writes it. Its
/// loop stops a run that emits the same topic and payload three times in a row, so the caller
/// makes the payload unique.
pub fn orchestrator_event(topic: &str, payload: &str, now_ns: u128) -> String {
    let ts = format!("{}.{:09}", now_ns / 1_000_000_000, now_ns % 1_000_000_000);
    let event = serde_json::json!({"topic": topic, "payload": payload, "ts": ts});
    format!("{event}\n")
}

/// Appends `line` to `path` in one `write`.
fn append(path: &Path, line: &str) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    f.write_all(line.as_bytes()).expect("append a line");
}

/// The stamps in FILE: (label, iteration, nanos).
pub fn read_stamps(path: &Path) -> Vec<(String, u32, u128)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            Some((
                it.next()?.to_string(),
                it.next()?.parse().ok()?,
                it.next()?.parse().ok()?,
            ))
        })
        .collect()
}

/// Median, p99 and max of durations in milliseconds (sorted in place).
pub fn stats_ms(values: &mut [f64]) -> Stats {
    values.sort_by(f64::total_cmp);
    let at = |p: f64| {
        if values.is_empty() {
            f64::NAN
        } else {
            values[((values.len() - 1) as f64 * p).round() as usize]
        }
    };
    Stats {
        n: values.len(),
        median: at(0.5),
        p99: at(0.99),
        max: at(1.0),
    }
}

/// Summary of a set of timings, in milliseconds.
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    pub n: usize,
    pub median: f64,
    pub p99: f64,
    pub max: f64,
}

impl Stats {
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({"n": self.n, "median_ms": self.median, "p99_ms": self.p99, "max_ms": self.max})
    }
}

/// The 1-minute load average, to print next to numbers it may have spoiled.
pub fn loadavg() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}
