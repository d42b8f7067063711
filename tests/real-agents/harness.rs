//! The harness: a scratch project and `HOME`, a mock API serving one scenario, and `ralph run
//! --agent NAME` with the environment that keeps the real CLI offline and on the mock
//! ([`crate::clis`]).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

#[path = "../support/common.rs"]
mod support;
use support::{built, read_to_end_in_background};

pub use crate::clis::Cli;

/// How long one `ralph run` may take before the test fails. A scripted run of a real CLI
/// takes about a second (Claude Code, Codex) to 5 s (Gemini CLI, opencode, which start
/// slowly), three times that on a loaded machine; this leaves room beyond.
pub const RUN_LIMIT: Duration = Duration::from_secs(120);

/// The `ralph` binary next to this test's target directory, built once if missing.
pub fn ralph_bin() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            // target/<profile>/deps/real_agents-HASH -> target/<profile>/ralph
            let exe = std::env::current_exe().unwrap();
            let path = exe.parent().unwrap().parent().unwrap().join("ralph");
            built(path, &["build", "--bin", "ralph"])
        })
        .clone()
}

/// `ralph-mock-api` serving a scenario from `tests/real-agents/scenarios/`, killed on drop.
#[derive(Debug)]
pub struct Mock {
    child: Child,
    url: String,
    log: PathBuf,
}

impl Mock {
    /// Starts the mock on `scenarios/<name>.json` (`name` may be `cli/name`), logging to
    /// `dir/requests.jsonl`.
    pub fn start(name: &str, dir: &Path) -> Mock {
        let scenario = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/real-agents/scenarios")
            .join(format!("{name}.json"));
        let log = dir.join("requests.jsonl");
        let mut child = Command::new(env!("CARGO_BIN_EXE_ralph-mock-api"))
            .arg("--scenario")
            .arg(&scenario)
            .arg("--log")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("ralph-mock-api starts");
        let mut url = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut url)
            .unwrap();
        let url = url.trim().to_string();
        assert!(
            url.starts_with("http://127.0.0.1:"),
            "ralph-mock-api did not start on {}: {url:?}",
            scenario.display()
        );
        Mock { child, url, log }
    }

    /// Every request the mock received, probes included, in order.
    pub fn log(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The model calls only.
    pub fn requests(&self) -> Vec<Value> {
        self.log()
            .into_iter()
            .filter(|r| r["request"].is_number())
            .collect()
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A scratch project with a task file, its own `HOME`, and a mock API for its agent.
#[derive(Debug)]
pub struct Project {
    // Declared first so the mock stops before its directory goes.
    pub mock: Mock,
    dir: tempfile::TempDir,
    cli: Cli,
}

impl Project {
    /// A Claude Code project: see [`Project::with_cli`].
    pub fn new(scenario: &str, frontmatter: &str, body: &str) -> Project {
        Project::with_cli(Cli::Claude, scenario, frontmatter, body)
    }

    /// A project whose RALPH_TASK.md has `frontmatter` (without the `---`) and `body`, and
    /// whose agent, `cli`, talks to a mock serving `scenario`.
    pub fn with_cli(cli: Cli, scenario: &str, frontmatter: &str, body: &str) -> Project {
        let dir = tempfile::Builder::new()
            .prefix("ralph-real-")
            .tempdir()
            .unwrap();
        std::fs::create_dir_all(dir.path().join("project")).unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::create_dir_all(dir.path().join("tmp")).unwrap();
        let mock = Mock::start(scenario, dir.path());
        cli.configure(&dir.path().join("home"), &mock.url);
        let p = Project { mock, dir, cli };
        p.write(
            "RALPH_TASK.md",
            &format!("---\n{}\n---\n{body}", frontmatter.trim()),
        );
        p
    }

    /// The project directory (the agent's working directory).
    pub fn root(&self) -> PathBuf {
        self.dir.path().join("project")
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    pub fn write(&self, rel: &str, text: &str) {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    /// `ralph` in the project, with the environment the real CLI needs to run offline against
    /// the mock.
    pub fn ralph(&self) -> Command {
        let mut cmd = Command::new(ralph_bin());
        cmd.current_dir(self.root()).stdin(Stdio::null());
        let scratch = self.dir.path();
        self.cli.env(
            &mut cmd,
            &scratch.join("home"),
            &scratch.join("tmp"),
            &self.mock.url,
        );
        cmd
    }

    /// `ralph run --no-tui --agent claude EXTRA` started in the background.
    pub fn spawn_run(&self, extra: &[&str]) -> Running {
        self.spawn_agent("claude", extra)
    }

    /// `ralph run --no-tui --agent AGENT EXTRA` started in the background.
    pub fn spawn_agent(&self, agent: &str, extra: &[&str]) -> Running {
        let mut cmd = self.ralph();
        cmd.args(["run", "--no-tui", "--agent", agent])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        Running(Some(cmd.spawn().unwrap()))
    }

    /// `ralph run --no-tui --agent claude EXTRA` to the end.
    pub fn run(&self, extra: &[&str]) -> Run {
        self.spawn_run(extra).finish(RUN_LIMIT)
    }

    /// Every line of `.ralph/events.jsonl`.
    pub fn events(&self) -> Vec<Value> {
        self.read(".ralph/events.jsonl")
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The events of one kind.
    pub fn events_of(&self, kind: &str) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|e| e["event"] == kind || e["type"] == kind || e["kind"] == kind)
            .collect()
    }

    /// `state.json` as JSON.
    pub fn state(&self) -> Value {
        serde_json::from_str(&self.read(".ralph/state.json")).unwrap()
    }

    /// Waits until `state.json` says `status`; fails after `limit`.
    pub fn wait_for_status(&self, status: &str, limit: Duration) -> Value {
        let start = Instant::now();
        loop {
            if let Ok(text) = std::fs::read_to_string(self.path(".ralph/state.json"))
                && let Ok(v) = serde_json::from_str::<Value>(&text)
                && v["status"] == status
            {
                return v;
            }
            assert!(
                start.elapsed() < limit,
                "timed out waiting for state.json status {status}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A `ralph run` in the background. Dropped unfinished (a test failed), it is stopped with
/// SIGTERM, which makes ralph stop its agent too.
#[derive(Debug)]
pub struct Running(Option<Child>);

impl Running {
    /// Waits for the end (failing the test after `limit`) and collects the output.
    pub fn finish(mut self, limit: Duration) -> Run {
        let run = Run::finish(self.0.take().unwrap(), limit);
        // Every CLI runs in its sandbox (docs/sandbox.md), whose profile is what it needs: a
        // refusal ralph names is a profile to widen (or a CLI that changed).
        assert!(
            run.stderr.contains("ralph: sandboxed: writes only to "),
            "not sandboxed:\n{}",
            run.stderr
        );
        assert!(
            !run.stdout.contains("ralph: warning: sandbox: the agent"),
            "the sandbox refused the CLI something:\n{}",
            run.stdout
        );
        run
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            terminate(&child);
            let _ = child.wait();
        }
    }
}

/// SIGTERM to a child we started.
fn terminate(child: &Child) {
    let _ = Command::new("kill").arg(child.id().to_string()).status();
}

/// A finished command.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Run {
    /// Waits for `child` (killing it and failing after `limit`) and collects its output.
    pub fn finish(mut child: Child, limit: Duration) -> Run {
        let start = Instant::now();
        let out_t = read_to_end_in_background(child.stdout.take().unwrap());
        let err_t = read_to_end_in_background(child.stderr.take().unwrap());
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if start.elapsed() > limit {
                // SIGTERM first so ralph stops its agent's process group too.
                terminate(&child);
                std::thread::sleep(Duration::from_secs(5));
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "ralph did not finish within {limit:?}; its output:\n{}\n{}",
                    out_t.join().unwrap(),
                    err_t.join().unwrap()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Run {
            code: status.code(),
            stdout: out_t.join().unwrap(),
            stderr: err_t.join().unwrap(),
            elapsed: start.elapsed(),
        }
    }

    /// A command run to the end with `output()`.
    pub fn from_output(out: Output) -> Run {
        Run {
            code: out.status.code(),
            stdout: String::from_utf8(out.stdout).expect("UTF-8 output"),
            stderr: String::from_utf8(out.stderr).expect("UTF-8 output"),
            elapsed: Duration::ZERO,
        }
    }

    /// Fails the test, showing the whole output, unless the exit code is `code`.
    pub fn expect_code(&self, code: i32) -> &Run {
        assert_eq!(
            self.code,
            Some(code),
            "exit code; stdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    /// stdout and stderr together.
    pub fn all_output(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
}

/// All the text of the `role: user` messages of a request body, one block per line.
pub fn user_texts(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        })
        .collect()
}

/// Whether a request body replays an assistant turn that called the tool with this id.
pub fn replays_tool_use(body: &Value, id: &str) -> bool {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "assistant")
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .any(|b| b["type"] == "tool_use" && b["id"] == id)
}
