//! DONE, verified: every criterion checked, and the test command passing within its timeout.

use super::policy::Verdict;
use ralph_process::{Spawned, Swept, spawn_shell, stop_and_sweep, stop_group, sweep};
use std::process::ExitStatus;
use std::time::Duration;

use ralph_process::describe_exit;
use ralph_protocol::LoopEvent;
use tokio::io::AsyncReadExt;
use tokio::time::Instant;

use super::Runner;
use super::controls::Controls;
use super::groups::marks;

impl Runner {
    /// DONE: every criterion checked, and the test command passes within its timeout.
    ///
    /// [`Verdict::Interrupted`] when the human stopped the loop (Ctrl-C, SIGTERM, SIGHUP)
    /// while the tests ran.
    pub(super) async fn verify(&mut self) -> Verdict {
        let task = match self.load_task() {
            Ok(t) => t,
            Err(e) => {
                return Verdict::OpenCriteria(format!(
                    "{} could not be read to check the criteria: {e}",
                    self.task_name()
                ));
            }
        };
        let open: Vec<_> = task.unchecked().collect();
        if !open.is_empty() {
            let mut reason = format!(
                "{} of {} criteria in {} {} not checked yet:\n",
                open.len(),
                task.criteria.len(),
                self.task_name(),
                if open.len() == 1 { "is" } else { "are" },
            );
            for c in &open {
                reason.push_str(&format!("- [ ] {} (line {})\n", c.text, c.line));
            }
            return Verdict::OpenCriteria(reason);
        }
        let Some(command) = task.test_command.clone() else {
            return Verdict::Accepted("every criterion is checked (no test_command set)".into());
        };
        self.emit(LoopEvent::TestsStarted {
            command: command.clone(),
        })
        .await;
        let script = format!("exec 2>&1\n{command}");
        // The marks make the tests this loop's and this run's, and `agent_pgid` names their
        // group: a run after ralph was killed outright stops them as it stops an orphaned
        // agent.
        let mut env: Vec<(String, String)> = marks(self.ws.dir())
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value))
            .collect();
        // In the agent's sandbox: the tests run code the agent wrote.
        let wrapped = match &self.processes.sandbox {
            Some(sandbox) => sandbox.wrap(&script, self.ws.root(), &mut env),
            None => Ok(script),
        };
        let started = wrapped.and_then(|script| spawn_shell(&script, self.ws.root(), env, None));
        let result = match started {
            Err(e) => Err(TestError::Spawn(e)),
            Ok(spawned) => {
                let pgid = spawned.pgid;
                self.group_started(pgid);
                let _ = self.save_state_soon().await;
                let mark = self.mark();
                let mut early = Swept::default();
                let result = run_tests(
                    spawned,
                    task.test_timeout,
                    self.cfg.settings.kill_grace,
                    &mut self.io.controls,
                    &mark,
                    &mut early,
                    &self.io.events,
                )
                .await;
                self.group_ended();
                let grace = if matches!(result, Err(TestError::Interrupted)) {
                    Duration::ZERO
                } else {
                    self.cfg.settings.kill_grace
                };
                let hurry = self.io.controls.stop_requested();
                let swept = early.and(sweep(&mark, pgid, grace, hurry).await);
                self.report_swept(swept, self.state.iteration, "test command")
                    .await;
                result
            }
        };
        self.cfg.task = task;
        match result {
            Ok((status, _)) if status.success() => {
                Verdict::Accepted(format!("every criterion is checked and `{command}` passed"))
            }
            Ok((status, tail)) => Verdict::TestsFailed(format!(
                "The test command `{command}` {}. The last lines of its output:\n\n```\n{}\n```",
                describe_exit(&status),
                tail.trim_end()
            )),
            Err(TestError::TimedOut(tail)) => Verdict::TestsFailed(format!(
                "The test command `{command}` ran past test_timeout ({}) and was stopped. The last lines of its output:\n\n```\n{}\n```",
                humantime::format_duration(self.cfg.settings.test_timeout),
                tail.trim_end()
            )),
            Err(TestError::Spawn(e)) => Verdict::TestsFailed(format!(
                "The test command `{command}` could not be started: {e}"
            )),
            Err(TestError::Interrupted) => Verdict::Interrupted,
        }
    }
}

/// Why a test run produced no verdict of its own.
enum TestError {
    TimedOut(String),
    Spawn(std::io::Error),
    /// The human stopped the loop while the tests ran.
    Interrupted,
}

/// Runs `test_command` in its own process group with stderr merged into stdout; keeps the
/// tail, and tells `progress` every second how long it has run and its last line. What it
/// stops outside that group (the processes marked `mark`, see `orphans`) is added to `early`.
/// A stop from `controls` ends the run; a second one cuts the group's grace short, as a second
/// Ctrl-C does for the agent.
async fn run_tests(
    spawned: Spawned,
    timeout: Duration,
    kill_grace: Duration,
    controls: &mut Controls,
    mark: &[u8],
    early: &mut Swept,
    progress: &tokio::sync::mpsc::Sender<LoopEvent>,
) -> Result<(ExitStatus, String), TestError> {
    let Spawned {
        mut child,
        pgid,
        mut stdout,
        stderr: _,
    } = spawned;
    let mut tail = Tail::new(8 * 1024);
    let mut buf = vec![0u8; 32 * 1024];
    let deadline = Instant::now() + timeout;
    let mut status = None;
    let mut open = true;
    let mut interrupted = false;
    let mut seconds = 0u64;
    let mut ticks = tokio::time::interval_at(
        Instant::now() + Duration::from_secs(1),
        Duration::from_secs(1),
    );
    // The stop's borrow of `controls` ends with the run: a second stop is asked for below.
    let timed_out = {
        let stop = controls.stop_requested();
        tokio::pin!(stop);
        loop {
            if status.is_some() && !open {
                break false;
            }
            tokio::select! {
                r = stdout.read(&mut buf), if open => match r {
                    Ok(0) | Err(_) => open = false,
                    Ok(n) => tail.push(&buf[..n]),
                },
                s = child.wait(), if status.is_none() => {
                    status = s.ok();
                    if open {
                        // A background process still holds the output: stop the group,
                        // and what left it.
                        let pending = std::future::pending();
                        let cleared = stop_and_sweep(pgid, mark, kill_grace, pending).await;
                        *early = std::mem::take(early).and(cleared.swept);
                    }
                },
                _ = ticks.tick(), if status.is_none() => {
                    seconds += 1;
                    // Never blocks the tests on a slow screen: a tick the view misses,
                    // the next one repeats.
                    let _ = progress.try_send(LoopEvent::TestsProgress {
                        elapsed: Duration::from_secs(seconds),
                        last_line: tail.last_line(),
                    });
                },
                () = tokio::time::sleep_until(deadline) => break true,
                () = &mut stop => {
                    interrupted = true;
                    break true;
                },
            }
        }
    };
    if interrupted {
        stop_group(pgid, kill_grace, controls.stop_requested()).await;
    } else {
        stop_group(pgid, kill_grace, std::future::pending()).await;
    }
    if interrupted {
        let _ = child.wait().await;
        return Err(TestError::Interrupted);
    }
    if timed_out {
        let _ = child.wait().await;
        return Err(TestError::TimedOut(tail.text()));
    }
    let status = match status {
        Some(s) => s,
        None => child.wait().await.map_err(TestError::Spawn)?,
    };
    Ok((status, tail.text()))
}

/// The last `cap` bytes of a stream.
struct Tail {
    buf: std::collections::VecDeque<u8>,
    cap: usize,
}

impl Tail {
    fn new(cap: usize) -> Self {
        Tail {
            buf: std::collections::VecDeque::with_capacity(cap),
            cap,
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        let bytes = &bytes[bytes.len().saturating_sub(self.cap)..];
        let overflow = (self.buf.len() + bytes.len()).saturating_sub(self.cap);
        self.buf.drain(..overflow);
        self.buf.extend(bytes);
    }

    /// The last line with something on it, sanitized.
    fn last_line(&self) -> Option<String> {
        let text = self.text();
        let line = text.lines().rev().find(|l| !l.trim().is_empty())?;
        Some(line.trim().chars().take(200).collect())
    }

    fn text(&self) -> String {
        let (a, b) = self.buf.as_slices();
        let mut v = Vec::with_capacity(a.len() + b.len());
        v.extend_from_slice(a);
        v.extend_from_slice(b);
        ralph_signal::sanitize(&String::from_utf8_lossy(&v))
    }
}
