//! The loop: iterations of cleanup, prompt, agent, stream, act, record.
//!
//! [`Runner::run`] owns the `.ralph/` workspace for its whole life (it holds the lock). It talks
//! to a front end only through channels: [`LoopEvent`]s out, [`Control`]s in. Each iteration:
//!
//! 1. **Cleanup**: stray temporary files go; an answer waiting in `.ralph/answer.md` is picked
//!    up for this iteration (never removed before it is delivered; `questions.rs`, through the
//!    question desk, `ralph_protocol::desk::Desk`).
//! 2. **Prompt**: built from the task file as it is now (the agent edits it), progress,
//!    guardrails and whatever the previous iteration left ([`Carryover`]).
//! 3. **Agent**: started in its own process group, its stdout decoded as it streams, stderr
//!    drained alongside, both logged raw to `.ralph/logs/`.
//! 4. **Act**: GUTTER stops; DONE is verified (every criterion checked, `test_command` passes)
//!    and either ends the run or is rejected with the reason carried to the next prompt;
//!    QUESTION shows `.ralph/question.md` and waits for an answer until its deadline.
//! 5. **Record**: `state.json`, `events.jsonl`, `clarifications.md` for delivered answers.
//!
//! Nothing here sleeps for a fixed time: every wait is on a process, a pipe, a channel, a file
//! watch or an exact deadline.

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use ralph_signal::{AgentEvent, Decoder, SignalKind, StreamFormat};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::ChildStdin;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::event::{Control, LoopEvent, Outcome};
use crate::guard::Guard;
use crate::native::{self, ToolRequest};
use crate::notify::{Notifier, NotifyConfig};
use crate::orphans;
use crate::prompt::{self, Carryover, PromptInputs};
use crate::question::Question;
use crate::registry;
use crate::state::{self, AgentChoice, RaisedBy, State, Status, log_event, timestamp};
use crate::supervisor::{self, describe_exit};
use crate::task::{OnQuestionTimeout, TaskFile, Wait};
use crate::workspace::{self, Workspace, WorkspaceError, WorkspaceLock};
use ralph_protocol::desk::Ended;

mod agent;
mod cleanup;
mod config;
mod controls;
mod groups;
pub mod logs;
mod questions;
mod recovery;
mod save;
mod start;
mod task_file;
mod verify;

pub use config::{
    AgentSpec, FreshFn, Invocation, ResumeFn, RunConfig, RunError, Settings, wait_duration,
};
use controls::Controls;
use groups::marks;
use questions::{NativeAsk, Open, Questions, Step};
use recovery::{KilledRun, reap_orphaned_agent};

/// Runs the loop; see the module docs.
#[derive(Debug)]
pub struct Runner {
    cfg: RunConfig,
    ws: Workspace,
    state: State,
    events: mpsc::Sender<LoopEvent>,
    controls: Controls,
    fs_events: mpsc::UnboundedReceiver<()>,
    _watcher: crate::watch::DirWatch,
    /// Shared with a save in flight, which keeps the workspace locked until it is written.
    lock: Arc<WorkspaceLock>,
    /// The save of `state.json` still in flight, if any (see `save.rs`).
    state_saving: Option<tokio::task::JoinHandle<Result<(), WorkspaceError>>>,
    /// This run's number in `.ralph/logs/` names (see [`logs`]).
    log_run: u32,
    /// The iteration whose files `.ralph/logs/` names now, and which attempt at it (from 1).
    log_attempt: (u32, u32),
    /// The next prompt file, being made while the agent runs (see [`workspace::SpareFile`]).
    prompt_spare: Option<tokio::task::JoinHandle<Result<workspace::SpareFile, WorkspaceError>>>,
    /// The last parse of the task file, and the version of the file it came from.
    task_seen: Option<(task_file::Stamp, TaskFile)>,
    /// When `.ralph/` was last swept of stale temporary files.
    last_sweep: Option<std::time::Instant>,
    carryover: Vec<Carryover>,
    /// The desk that owns this workspace's questions, and what the loop keeps between steps.
    questions: Questions,
    first_iteration: u32,
    notifier: Notifier,
    _registration: Option<registry::Registration>,
    /// The last session the agent reported, for resuming it with an answer.
    session_id: Option<String>,
    /// The next iteration resumes that session with the carried answer instead of starting fresh.
    resume_next: bool,
    /// The last iteration was a resume that failed: not the agent's fault, not a failure.
    resume_failed: bool,
    /// The guard that stops the running group if ralph is killed outright, when there is one.
    guard: Option<Guard>,
    /// The last run, when it was killed with a group running: that group was stopped as
    /// this run started, and what it left outside it is stopped before anything else (see
    /// [`Runner::stop_what_the_killed_run_left`]).
    killed_run: Option<KilledRun>,
}

impl Runner {
    async fn emit(&self, event: LoopEvent) {
        // A front end that has gone away must not stop the loop.
        let _ = self.events.send(event).await;
    }

    fn log(&self, kind: &str, fields: serde_json::Value) {
        if let Err(e) = log_event(&self.ws, kind, fields) {
            // The event log is a record, not a dependency: say so and carry on.
            let _ = self.events.try_send(LoopEvent::Warning(format!(
                "could not write the event log: {e}"
            )));
        }
    }

    /// Runs iterations until the task is done, the agent gives up, or a limit is reached.
    pub async fn run(mut self) -> Result<Outcome, RunError> {
        let result = self.run_loop().await;
        if let Err(e) = &result {
            self.fail(e).await;
        }
        result
    }

    /// After an error that ends the run (a file ralph cannot read or write, an agent it cannot
    /// start): stop what may still run, and leave `state.json` saying why, not `running`, for
    /// `ralph status` and the next `ralph run`. Best effort: the error itself may be the disk.
    async fn fail(&mut self, e: &RunError) {
        if let Some(pgid) = self.state.agent_pgid {
            supervisor::kill_group_now(pgid);
            self.group_ended();
        }
        let reason = format!("ralph stopped on an error: {e}");
        self.state.status = Status::Failed;
        let _ = self.questions.desk.run_ended(&mut self.state);
        self.state.reason = Some(reason.clone());
        let _ = self.save_state().await;
        self.log("run_end", json!({"outcome": "failed", "reason": reason}));
    }

    async fn run_loop(&mut self) -> Result<Outcome, RunError> {
        let max = self.cfg.settings.max_iterations;
        // Before the first save, which forgets the killed run: should this one be killed
        // before it is done, the next still knows whose processes to look for.
        let killed = self.killed_run.take();
        let swept = match killed.as_ref().and_then(|k| k.id.as_deref()) {
            Some(id) => Some(self.stop_what_the_killed_run_left(id).await),
            None => None,
        };
        self.save_state().await?;
        let counts = criteria_counts(&self.cfg.task);
        self.emit(LoopEvent::Started {
            task: self.state.task.clone(),
            agent: self.cfg.agent.name.clone(),
            max_iterations: max,
            criteria: counts,
        })
        .await;
        self.log(
            "run_start",
            json!({"pid": self.state.pid, "agent": self.cfg.agent.name, "max_iterations": max, "first_iteration": self.first_iteration}),
        );
        if let Some(killed) = killed {
            self.report_killed_run(&killed, swept).await;
        }
        for w in &self.cfg.task.warnings {
            let text = w.to_string();
            self.emit(LoopEvent::Warning(text.clone())).await;
            self.log("warning", json!({"message": text}));
        }

        if let Some(pending) = self.questions.resume.take() {
            let asked_at = pending.asked_at_time().unwrap_or_else(SystemTime::now);
            let waited = SystemTime::now()
                .duration_since(asked_at)
                .unwrap_or_default();
            self.emit(LoopEvent::Note(format!(
                "A question from the last run is still waiting (asked {} ago); showing it first.",
                humantime::format_duration(Duration::from_secs(waited.as_secs()))
            )))
            .await;
            if let Some(outcome) = self
                .present_question(
                    pending.question,
                    Some(pending.id),
                    asked_at,
                    pending.iteration,
                    pending.raised_by,
                )
                .await?
            {
                return self
                    .finish(outcome, "stopped while a question was waiting")
                    .await;
            }
        }

        let mut failures = 0u32;
        let mut first_run = true;
        let mut rate_limit_streak = 0u32;
        let mut iteration = self.first_iteration;
        while iteration <= max {
            self.cleanup_before_iteration().await?;
            // An answer waiting in `.ralph/answer.md` goes to this iteration (`questions.rs`).
            self.pick_up_answer().await?;
            let task = match self.load_task() {
                Ok(t) => t,
                Err(e) => {
                    // The agent may have broken the task file; run on the last good copy and
                    // tell it, rather than stopping an unattended loop.
                    let msg =
                        format!("the task file no longer parses, using the last good copy: {e}");
                    self.emit(LoopEvent::Warning(msg.clone())).await;
                    self.log("warning", json!({"message": msg}));
                    self.carryover.push(Carryover::Rejected {
                        reason: format!("{} no longer parses. Repair it:\n\n{e}", self.task_name()),
                    });
                    self.cfg.task.clone()
                }
            };
            self.cfg.task = task;

            let mut run = self.run_iteration(iteration).await?;
            if let Some(mut open) = run.asking.take() {
                if run.interrupted {
                    // Kept pending in state.json: the next `ralph run` shows it again.
                    return self
                        .finish(
                            Outcome::Interrupted,
                            "interrupted while a question was waiting",
                        )
                        .await;
                }
                // The agent that asked is gone; its question still deserves an answer, which
                // the next iteration gets.
                open.carry = true;
                open.for_next = true;
                if let Some(outcome) = self.wait_and_close(open).await? {
                    return self
                        .finish(outcome, "stopped while a question was waiting")
                        .await;
                }
            }
            if !self.resume_failed && !run.interrupted {
                // A failed resume did not really deliver: the fallback iteration needs the file.
                // Nor did an iteration stopped by Ctrl-C: its agent may have had no time to act
                // on the answer, and the next run's prompt would not have it. The answer stays,
                // recorded as the one that closed its question, and the next run delivers it.
                self.after_delivery().await?;
            }
            // The agent checks boxes as it goes; show where it got to.
            let now = self.load_task();
            let (checked, total) = criteria_counts(now.as_ref().unwrap_or(&self.cfg.task));
            self.emit(LoopEvent::Criteria { checked, total }).await;

            if run.interrupted {
                return self.finish(Outcome::Interrupted, "interrupted").await;
            }
            if let Some((retry_after, message)) = run.rate_limited.clone()
                && run.signals.is_empty()
            {
                // Not the agent's failure and not an iteration's worth of work: wait, then run
                // the same iteration again. The wait doubles while the limit lasts.
                let wait = retry_after
                    .unwrap_or_else(|| {
                        BACKOFF_START * 2u32.saturating_pow(rate_limit_streak.min(8))
                    })
                    .min(BACKOFF_MAX);
                rate_limit_streak += 1;
                // The retry writes its own log files.
                self.log_attempt.1 += 1;
                if self.back_off(wait, &message).await {
                    return self
                        .finish(Outcome::Interrupted, "interrupted while backing off")
                        .await;
                }
                continue;
            }
            rate_limit_streak = 0;
            if run.saw(SignalKind::Gutter) {
                return self
                    .finish(
                        Outcome::Gutter,
                        "the agent signalled GUTTER: it is stuck and asked to stop",
                    )
                    .await;
            }
            // QUESTION wins over DONE in the same turn: an agent that still asks is not sure
            // it is done, and checking DONE first would end the run with the question unseen.
            // The answer goes to the next iteration, which signals DONE again if it still is.
            let done = run.saw(SignalKind::Done) && !run.saw(SignalKind::Question);
            if run.saw(SignalKind::Done) && !done {
                let msg = "the agent signalled DONE and QUESTION in the same turn: the question comes first; DONE is checked when an iteration that has the answer signals it again";
                self.emit(LoopEvent::Note(msg.into())).await;
                self.log("done_set_aside", json!({"iteration": iteration}));
            }
            if done {
                let Some((accepted, reason)) = self.verify().await else {
                    return self
                        .finish(Outcome::Interrupted, "interrupted while the tests ran")
                        .await;
                };
                self.emit(LoopEvent::Verdict {
                    accepted,
                    reason: reason.clone(),
                })
                .await;
                self.log(
                    "verification",
                    json!({"iteration": iteration, "accepted": accepted, "reason": reason}),
                );
                if accepted {
                    return self.finish(Outcome::Done, "DONE verified").await;
                }
                self.carryover.push(Carryover::Rejected { reason });
            }
            if run.saw(SignalKind::Question)
                && let Some(outcome) = self.handle_question_signal(iteration).await?
            {
                let reason = match outcome {
                    Outcome::QuestionTimeoutStop => {
                        "a question timed out and on_question_timeout is `stop`; it is kept for the next run"
                    }
                    _ => "stopped while a question was waiting",
                };
                return self.finish(outcome, reason).await;
            }
            if std::mem::take(&mut first_run)
                && let Some(reason) = run.not_runnable()
            {
                return self.finish(Outcome::AgentNotRunnable, &reason).await;
            }
            if std::mem::take(&mut self.resume_failed) {
                // Not counted: the fallback iteration is what matters.
            } else if run.failed() {
                failures += 1;
                self.carryover.push(Carryover::AgentFailed {
                    how: format!(
                        "It {}",
                        run.describe(wait_duration(self.cfg.settings.iteration_timeout))
                    ),
                });
                if failures >= self.cfg.settings.max_consecutive_failures {
                    let reason = format!(
                        "the agent failed {failures} times in a row (max_consecutive_failures); last: it {}",
                        run.describe(wait_duration(self.cfg.settings.iteration_timeout))
                    );
                    return self.finish(Outcome::TooManyFailures, &reason).await;
                }
            } else {
                failures = 0;
            }
            if let (Some(limit), Some(spent)) =
                (self.cfg.task.max_cost_usd, self.state.total_cost_usd)
                && spent > limit
            {
                let reason =
                    format!("the agent has cost ${spent:.2}, past max_cost_usd (${limit:.2})");
                return self.finish(Outcome::CostLimit, &reason).await;
            }
            iteration += 1;
        }
        let reason = format!("max_iterations ({max}) reached without a verified DONE");
        self.finish(Outcome::MaxIterations, &reason).await
    }

    async fn finish(&mut self, outcome: Outcome, reason: &str) -> Result<Outcome, RunError> {
        self.state.status = outcome.status();
        if self.state.status != Status::Stopped {
            // Ended for good: a question left open for a late answer closes with the run.
            self.questions.desk.run_ended(&mut self.state)?;
        }
        self.state.reason = Some(reason.to_string());
        self.group_ended();
        self.save_state().await?;
        self.log(
            "run_end",
            json!({"outcome": self.state.status.as_str(), "reason": reason}),
        );
        self.emit(LoopEvent::Finished {
            outcome: outcome.clone(),
            reason: reason.to_string(),
        })
        .await;
        Ok(outcome)
    }
}

/// The first wait after a rate limit that does not say how long to wait.
const BACKOFF_START: Duration = Duration::from_secs(30);
/// The longest wait between retries after rate limits.
const BACKOFF_MAX: Duration = Duration::from_secs(15 * 60);

/// Criteria checked and total, from the task body (or the frontmatter list when the body has none).
fn criteria_counts(task: &TaskFile) -> (usize, usize) {
    let total = task.criteria.len();
    let open = task.unchecked().count();
    (total - open, total)
}

pub use ralph_protocol::text::shell_quote;
