//! The harness: a throwaway project with a task file and a fake-agent script, and ways to run
//! `ralph` in it and look at what it left.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

#[path = "../support/common.rs"]
mod support;
use support::built;
pub use support::read_to_end_in_background;

/// The `ralph` binary under test.
pub fn ralph_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_ralph"))
}

/// The scripted fake agent, built by `make test` (or here, once, if it is missing).
pub fn fake_agent_bin() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            built(
                ralph_bin().with_file_name("ralph-fake-agent"),
                &["build", "-p", "ralph-fake-agent"],
            )
        })
        .clone()
}

/// A temporary project directory.
pub struct Project {
    dir: tempfile::TempDir,
    /// `RALPH_STATE_DIR` for every `ralph` run here: the machine's registry of running loops,
    /// kept apart from other tests' loops (and the user's), or shared on purpose. Its `xdg/`
    /// holds the XDG base directories of these runs.
    state: std::sync::Arc<tempfile::TempDir>,
}

/// The per-user directories of every process a test starts (ralph, a shell in tmux, a
/// broker): `RALPH_STATE_DIR` is `state`, and each XDG base directory is under `state/xdg`, so
/// no test reads the developer's config or adds a loop to their registry. `make test` checks
/// it (tests/untouched-home.sh).
pub fn user_dirs_env(state: &Path) -> Vec<(&'static str, PathBuf)> {
    let xdg = state.join("xdg");
    vec![
        ("RALPH_STATE_DIR", state.to_path_buf()),
        ("XDG_CONFIG_HOME", xdg.join("config")),
        ("XDG_STATE_HOME", xdg.join("state")),
        ("XDG_DATA_HOME", xdg.join("data")),
        ("XDG_CACHE_HOME", xdg.join("cache")),
    ]
}

/// `ralph`, with [`user_dirs_env`] of `state` (set other variables after this to override).
pub fn ralph_in(state: &Path) -> Command {
    let mut cmd = Command::new(ralph_bin());
    cmd.env_remove("RALPH_DIR").envs(user_dirs_env(state));
    cmd
}

impl Project {
    /// An empty project.
    pub fn new() -> Self {
        Project {
            dir: tempfile::Builder::new()
                .prefix("ralph-e2e-")
                .tempdir()
                .unwrap(),
            state: std::sync::Arc::new(tempfile::tempdir().unwrap()),
        }
    }

    /// An empty project: a directory holding an empty `.ralph/`, as `ralph init` or a first
    /// `ralph run` leaves it, with no task file. (An empty directory is outside any project,
    /// where a lone `ralph ask` keeps its question in the state directory instead.)
    pub fn empty() -> Self {
        let p = Project::new();
        std::fs::create_dir(p.path(".ralph")).unwrap();
        p
    }

    /// The state directory its `ralph` runs use (`RALPH_STATE_DIR`).
    pub fn state_path(&self) -> &Path {
        self.state.path()
    }

    /// Another empty directory on the same "machine": its `ralph` runs see the same registry
    /// of running loops as this project's.
    pub fn beside(&self) -> Project {
        Project {
            state: std::sync::Arc::clone(&self.state),
            ..Project::new()
        }
    }

    /// A project with a task file: `frontmatter` lines (without the `---`) and a body.
    pub fn with_task(frontmatter: &str, body: &str) -> Self {
        let p = Project::new();
        p.write(
            "RALPH_TASK.md",
            &format!("---\n{}\n---\n{body}", frontmatter.trim()),
        );
        p
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// The environment of every process started for this project: [`user_dirs_env`].
    pub fn user_env(&self) -> Vec<(&'static str, PathBuf)> {
        user_dirs_env(self.state.path())
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub fn write(&self, rel: &str, text: &str) {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    pub fn exists(&self, rel: &str) -> bool {
        self.path(rel).exists()
    }

    /// Writes the fake agent's script and returns the `--agent-cmd` that runs it.
    pub fn agent(&self, script: &str) -> String {
        self.write("agent-script.txt", script);
        format!(
            "'{}' --script '{}'",
            fake_agent_bin().display(),
            self.path("agent-script.txt").display()
        )
    }

    /// The `--agent-cmd` of the fake agent replaying `agent-script.txt` (already written), its
    /// starts counted in `counter` for `[call N]` sections.
    pub fn counted_agent(&self) -> String {
        format!(
            "'{}' --script '{}' --counter '{}'",
            fake_agent_bin().display(),
            self.path("agent-script.txt").display(),
            self.path("counter").display()
        )
    }

    /// `ralph run --no-tui` of [`Project::counted_agent`], its output read as `format`
    /// (`--agent-format`).
    pub fn run_counted_as(&self, format: &str) -> Command {
        let mut cmd = self.ralph();
        cmd.args(["run", "--no-tui", "--agent-cmd", &self.counted_agent()])
            .args(["--agent-format", format]);
        cmd
    }

    /// `ralph ARGS -C ROOT`-style command, with a clean environment for reproducible output.
    pub fn ralph(&self) -> Command {
        let mut cmd = ralph_in(self.state.path());
        cmd.current_dir(self.root())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null());
        cmd
    }

    /// Runs `ralph run --no-tui` with the given agent and extra args; fails the test on a hang.
    pub fn run(&self, agent_cmd: &str, extra: &[&str]) -> Run {
        let mut cmd = self.ralph();
        cmd.args(["run", "--no-tui", "--agent-cmd", agent_cmd])
            .args(extra);
        Run::finish(spawn(cmd), Duration::from_secs(60))
    }

    /// Starts `ralph run --no-tui` with `agent_cmd` (and `extra` flags) in the background.
    pub fn start(&self, agent_cmd: &str, extra: &[&str]) -> Guarded {
        let mut cmd = self.ralph();
        cmd.args(["run", "--no-tui", "--agent-cmd", agent_cmd])
            .args(extra);
        spawn(cmd)
    }

    /// Runs `ralph ARGS` here to the end (for the quick commands: answer, status, init).
    pub fn exec(&self, args: &[&str]) -> Run {
        Run::from_output(self.ralph().args(args).output().unwrap())
    }

    /// `state.json` as JSON.
    pub fn state(&self) -> serde_json::Value {
        serde_json::from_str(&self.read(".ralph/state.json")).unwrap()
    }

    /// Every line of `events.jsonl`.
    pub fn events(&self) -> Vec<serde_json::Value> {
        self.read(".ralph/events.jsonl")
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The lines of `events.jsonl` whose event is `kind`.
    pub fn events_of(&self, kind: &str) -> Vec<serde_json::Value> {
        let mut events = self.events();
        events.retain(|e| e["event"] == kind);
        events
    }

    /// Waits until `state.json` says `status`, or fails after `limit`.
    pub fn wait_for_status(&self, status: &str, limit: Duration) -> serde_json::Value {
        wait_until(limit, &format!("state.json status {status}"), || {
            let text = std::fs::read_to_string(self.path(".ralph/state.json")).ok()?;
            let v: serde_json::Value = serde_json::from_str(&text).ok()?;
            (v["status"] == status).then_some(v)
        })
    }
}

/// `ralph init`'s example task file with each of its checkboxes replaced by `criterion`: what
/// a user who described their own criteria has.
pub fn with_own_criteria(example: &str, criterion: &str) -> String {
    example
        .lines()
        .map(|l| match l.strip_prefix("- [ ] ") {
            Some(_) => format!("- [ ] {criterion}\n"),
            None => format!("{l}\n"),
        })
        .collect()
}

/// Starts `cmd` with piped output; the process is killed if the test ends (or fails) first.
pub fn spawn(mut cmd: Command) -> Guarded {
    Guarded(
        cmd.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

/// A child process that cannot outlive its test: dropped while still running, it is killed.
///
/// Regression: tests that failed between starting `ralph run` and waiting for it left the loop
/// (and its agent) running after the test binary moved on.
pub struct Guarded(pub Child);

impl std::ops::Deref for Guarded {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Guarded {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Calls `f` until it returns `Some`, with short pauses; panics after `limit`.
pub fn wait_until<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A finished `ralph` run.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Waits for `child` (killing it and failing after `limit`) and collects its output.
    pub fn finish(mut child: Guarded, limit: Duration) -> Run {
        let out_t = read_to_end_in_background(child.stdout.take().unwrap());
        let err_t = read_to_end_in_background(child.stderr.take().unwrap());
        let start = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if start.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                let stdout = out_t.join().unwrap();
                panic!("ralph did not finish within {limit:?}; its output:\n{stdout}");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        Run {
            code: status.code(),
            stdout: out_t.join().unwrap(),
            stderr: err_t.join().unwrap(),
        }
    }

    pub fn from_output(o: Output) -> Run {
        let text = |bytes: Vec<u8>| {
            String::from_utf8(bytes)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
        };
        Run {
            code: o.status.code(),
            stdout: text(o.stdout),
            stderr: text(o.stderr),
        }
    }

    /// Asserts the exit code, showing the output when it is wrong.
    #[track_caller]
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code,
            Some(code),
            "unexpected exit code\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout,
            self.stderr
        );
        self
    }
}

/// Whether a process with this pid is alive (and not a zombie): asked of ralph's own process
/// layer, so that the same test runs against either backend, and on macOS.
pub fn pid_alive(pid: i32) -> bool {
    u32::try_from(pid).is_ok_and(ralph_process::is_alive)
}

/// The pid a process of the test wrote to `file` in the project, once it is there.
pub fn read_pid(p: &Project, file: &str) -> i32 {
    wait_until(Duration::from_secs(20), file, || {
        std::fs::read_to_string(p.path(file))
            .ok()?
            .trim()
            .parse()
            .ok()
    })
}

/// Guards still running for this project's `.ralph/`.
pub fn guards_of(p: &Project) -> Vec<i32> {
    let arg = format!("\0{}\0", p.path(".ralph").display());
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let ours = cmdline.starts_with(b"ralph-guard\0")
                && cmdline.windows(arg.len()).any(|w| w == arg.as_bytes());
            (ours && pid_alive(pid)).then_some(pid)
        })
        .collect()
}
