//! The loop: iterations of cleanup, prompt, agent, stream, then what the policy says.
//!
//! [`Runner::run`] owns the `.ralph/` workspace for its whole life (it holds the lock). It talks
//! to a front end only through channels: `LoopEvent`s out, `Control`s in. Each iteration:
//!
//! 1. **Cleanup**: stray temporary files go; an answer waiting in `.ralph/answer.md` is picked
//!    up for this iteration (never removed before it is delivered; `questions.rs`, through the
//!    question desk, `ralph_protocol::Desk`).
//! 2. **Prompt**: built from the task file as it is now (the agent edits it), progress,
//!    guardrails and whatever the previous iteration left ([`Carryover`]).
//! 3. **Agent** (`agent.rs`, `stream.rs`): started in its own process group, its stdout
//!    decoded as it streams, stderr drained alongside, both logged raw to `.ralph/logs/`;
//!    what it amounted to is an `AgentRun`.
//! 4. **Decide** (`policy.rs`): `policy::decide` says what the run means, one step at a time:
//!    record it, verify a DONE, ask the agent's QUESTION, back off, go on, or stop. `run_loop`
//!    is a dispatcher: it does each step, logs it, and tells the policy what it found.
//! 5. **Record**: `state.json`, `events.jsonl`, `clarifications.md` for delivered answers.
//!
//! Nothing here sleeps for a fixed time: every wait is on a process, a pipe, a channel, a file
//! watch or an exact deadline.

use std::time::{Duration, SystemTime};

use ralph_protocol::{LoopEvent, Outcome, State, Status, Workspace, log_event};
use serde_json::json;
use tokio::time::Instant;

use crate::prompt::Carryover;
use crate::task::TaskFile;

mod agent;
mod agent_run;
mod cleanup;
mod controls;
mod conversation;
mod error;
mod git;
mod groups;
mod io;
mod leftovers;
mod policy;
mod processes;
mod questions;
mod rate_limit;
mod raw_log;
mod ready;
mod record;
mod recovery;
mod save;
mod session;
mod settings;
mod shared;
mod start;
mod stderr_lines;
mod stream;
mod task_file;
mod task_stamp;
mod verify;

pub use controls::{StopRequests, forward_stop_requests};
pub use error::RunError;
use io::Io;
use policy::Next;
use processes::Processes;
use questions::Questions;
use record::Record;
use session::Session;
pub use settings::{RunConfig, RunSettings, SentBack, wait_duration};

/// Runs the loop; see the module docs.
#[derive(Debug)]
pub struct Runner {
    /// What the run was given.
    cfg: RunConfig,
    /// The project and its `.ralph/`.
    ws: Workspace,
    /// `state.json`, as the run keeps it.
    state: State,
    /// Events out, controls in, wake-ups from `.ralph/`.
    io: Io,
    /// The lock, saves in flight, logs, the task file's last parse.
    record: Record,
    /// What carries from one iteration to the next.
    session: Session,
    /// The desk that owns this workspace's questions, and what the loop keeps between steps.
    questions: Questions,
    /// The process groups the run starts, and what a killed run left.
    processes: Processes,
}

impl Runner {
    async fn emit(&self, event: LoopEvent) {
        // A front end that has gone away must not stop the loop.
        let _ = self.io.events.send(event).await;
    }

    fn log(&self, kind: &str, fields: serde_json::Value) {
        if let Err(e) = log_event(&self.ws, kind, fields) {
            // The event log is a record, not a dependency: say so and carry on.
            let _ = self.io.events.try_send(LoopEvent::Warning(format!(
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
            ralph_process::kill_group_now(pgid);
            self.group_ended();
        }
        self.hurry_leftovers();
        self.settle_leftovers().await;
        self.dismiss_ready().await;
        let reason = format!("ralph stopped on an error: {e}");
        self.state.status = Status::Failed;
        let _ = self.questions.desk.run_ended(&mut self.state);
        self.state.reason = Some(reason.clone());
        let _ = self.save_state().await;
        self.log("run_end", json!({"outcome": "failed", "reason": reason}));
    }

    /// The run's start: what a killed run left is stopped, the run is recorded and announced,
    /// and a question the last run left waiting is shown first; `Some` when that ends the run.
    async fn begin(&mut self) -> Result<Option<policy::Stop>, RunError> {
        // Before the first save, which forgets the killed run: should this one be killed
        // before it is done, the next still knows whose processes to look for.
        let killed = self.processes.killed_run.take();
        let swept = match killed.as_ref().and_then(|k| k.id.as_deref()) {
            Some(id) => Some(self.stop_what_the_killed_run_left(id).await),
            None => None,
        };
        self.save_state().await?;
        let counts = criteria_counts(&self.cfg.task);
        self.emit(LoopEvent::Started {
            task: self.state.task.clone(),
            agent: self.cfg.agent.name.clone(),
            max_iterations: self.cfg.settings.max_iterations,
            criteria: counts,
        })
        .await;
        self.log(
            "run_start",
            json!({"pid": self.state.pid, "agent": self.cfg.agent.name, "max_iterations": self.cfg.settings.max_iterations, "first_iteration": self.session.first_iteration}),
        );
        if let Some(killed) = killed {
            self.report_killed_run(&killed, swept).await;
        }
        // The sandbox's process for the first agent, ready while the work tree is checkpointed.
        self.get_agent_ready();
        // The work tree as the run found it: `ralph diff` compares against it.
        let start = self.session.first_iteration.saturating_sub(1);
        if let Some(stop) = self.checkpoint_and_check(start, true).await {
            return Ok(Some(stop));
        }
        for w in &self.cfg.task.warnings {
            let text = w.with_fix();
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
                return Ok(Some(policy::question_stop(outcome)));
            }
        }
        Ok(None)
    }

    /// The iterations, each run then acted on as [`policy::decide`] says.
    async fn run_loop(&mut self) -> Result<Outcome, RunError> {
        if let Some(stop) = self.begin().await? {
            return self.finish(stop).await;
        }
        let max = self.cfg.settings.max_iterations;
        let mut tally = policy::Tally::default();
        let mut iteration = self.session.first_iteration;
        if iteration > max {
            return self.finish(policy::out_of_iterations(max)).await;
        }
        loop {
            // What the last agent left is stopped before the next one starts (it may still be
            // going, beside the question that came after it).
            if self.settle_leftovers().await {
                return self.finish(policy::interrupted_stopping_leftovers()).await;
            }
            // Another loop of this agent may have hit a limit that holds for this one too.
            if self.wait_out_shared_limit().await? {
                return self.finish(policy::interrupted_backing_off()).await;
            }
            if let Some(stop) = self.fleet_cap_reached() {
                return self.finish(stop).await;
            }
            self.cleanup_before_iteration().await?;
            // An answer waiting in `.ralph/answer.md` goes to this iteration (`questions.rs`).
            self.pick_up_answer().await?;
            self.reload_task().await;
            let mut run = self.run_iteration(iteration).await?;
            if let Some(stop) = self.checkpoint_and_check(iteration, false).await {
                return self.finish(stop).await;
            }
            self.record_fleet_spend();
            let mut facts = run.facts(iteration, self.state.total_cost_usd, &self.cfg.settings);
            let limits = policy::Limits {
                max_iterations: max,
                max_failures: self.cfg.settings.max_consecutive_failures,
                max_cost_usd: self.cfg.task.max_cost_usd,
            };
            loop {
                match policy::decide(&facts, tally, &limits) {
                    Next::AwaitLeftQuestion => {
                        let mut open = run.asking.take().expect("the policy saw it open");
                        open.carry = true;
                        open.for_next = true;
                        let stop = self.wait_and_close(open).await?;
                        facts.left_question = policy::LeftQuestion::Closed(stop);
                    }
                    Next::Record { archive_answer } => {
                        self.record_iteration(archive_answer).await?;
                        facts.recorded = true;
                    }
                    Next::Verify => {
                        // The tests run with nothing of the agent's left (it may have asked
                        // with `ralph ask`, and what it left been stopped beside the question).
                        if self.settle_leftovers().await {
                            return self.finish(policy::interrupted_stopping_leftovers()).await;
                        }
                        facts.verdict = Some(self.verify_and_tell(iteration).await);
                    }
                    Next::Ask => {
                        if facts.done_set_aside() {
                            self.tell_done_set_aside(iteration).await;
                        }
                        facts.asked = Some(self.handle_question_signal(iteration).await?);
                    }
                    Next::BackOff {
                        wait,
                        message,
                        tally: next,
                    } => {
                        tally = next;
                        // The retry writes its own log files.
                        self.record.log_attempt.1 += 1;
                        let words = facts.rate_limit.as_ref().map_or(&message, |r| &r.message);
                        let until = self.share_limit(wait, words);
                        if self.back_off(wait, until, &message).await? {
                            return self.finish(policy::interrupted_backing_off()).await;
                        }
                        break;
                    }
                    Next::Continue { carry, tally: next } => {
                        tally = next;
                        self.session.carryover.extend(carry);
                        iteration += 1;
                        break;
                    }
                    Next::Stop(stop) => return self.finish(stop).await,
                }
            }
        }
    }

    /// Records an iteration: its answer archived as delivered when `archive_answer`, and how
    /// far the agent got with the criteria (it checks boxes as it goes).
    async fn record_iteration(&mut self, archive_answer: bool) -> Result<(), RunError> {
        if archive_answer {
            self.after_delivery().await?;
        }
        let now = self.load_task();
        let (checked, total) = criteria_counts(now.as_ref().unwrap_or(&self.cfg.task));
        self.emit(LoopEvent::Criteria { checked, total }).await;
        Ok(())
    }

    /// Checks a DONE and tells the front end and the event log the verdict.
    async fn verify_and_tell(&mut self, iteration: u32) -> policy::Verdict {
        let verdict = self.verify().await;
        if let Some((accepted, reason)) = verdict.shown() {
            let reason = reason.to_string();
            self.log(
                "verification",
                json!({"iteration": iteration, "accepted": accepted, "reason": reason}),
            );
            self.emit(LoopEvent::Verdict { accepted, reason }).await;
        }
        verdict
    }

    /// Says that DONE and QUESTION came in one turn, and that the question goes first.
    async fn tell_done_set_aside(&self, iteration: u32) {
        let msg = "the agent signalled DONE and QUESTION in the same turn: the question comes first; DONE is checked when an iteration that has the answer signals it again";
        self.emit(LoopEvent::Note(msg.into())).await;
        self.log("done_set_aside", json!({"iteration": iteration}));
    }

    /// Re-reads the task file for the next iteration; the agent may have broken it, in which
    /// case the run goes on with the last good copy and the agent is told to repair it, rather
    /// than stopping an unattended loop.
    async fn reload_task(&mut self) {
        match self.load_task() {
            Ok(task) => self.cfg.task = task,
            Err(e) => {
                let msg = format!("the task file no longer parses, using the last good copy: {e}");
                self.emit(LoopEvent::Warning(msg.clone())).await;
                self.log("warning", json!({"message": msg}));
                self.session.carryover.push(Carryover::Rejected {
                    reason: format!("{} no longer parses. Repair it:\n\n{e}", self.task_name()),
                });
            }
        }
    }

    /// Waits out a rate limit (until `until`, `wait` from now), with `rate_limited_until` in
    /// `state.json` meanwhile; `true` if the human stopped the loop.
    async fn back_off(
        &mut self,
        wait: Duration,
        until_time: SystemTime,
        reason: &str,
    ) -> Result<bool, RunError> {
        let until = Instant::now() + wait;
        self.state.rate_limited_until = Some(ralph_protocol::timestamp(until_time));
        self.save_state().await?;
        self.log(
            "backoff",
            json!({"iteration": self.state.iteration, "seconds": wait.as_secs_f64(), "reason": reason, "agent_key": self.record.shared.key.as_str()}),
        );
        self.emit(LoopEvent::Backoff {
            until: until.into_std(),
            reason: reason.to_string(),
        })
        .await;
        let stopped = tokio::select! {
            () = tokio::time::sleep_until(until) => false,
            () = self.io.controls.stop_requested() => true,
        };
        if !stopped {
            self.state.rate_limited_until = None;
        }
        Ok(stopped)
    }

    /// Ends the run: how and why in `state.json`, the event log and the front end.
    async fn finish(&mut self, stop: policy::Stop) -> Result<Outcome, RunError> {
        let policy::Stop { outcome, reason } = stop;
        let reason = reason.as_str();
        // Stopped (Ctrl-C) while a question waited beside them: no more grace for them.
        if outcome == Outcome::Interrupted {
            self.hurry_leftovers();
        }
        self.settle_leftovers().await;
        self.state.status = outcome.status();
        self.state.rate_limited_until = None;
        if self.state.status != Status::Stopped {
            // Ended for good: a question left open for a late answer closes with the run.
            self.questions.desk.run_ended(&mut self.state)?;
        }
        self.state.reason = Some(reason.to_string());
        if outcome == Outcome::Done {
            let task = std::fs::read(&self.cfg.task_path).ok();
            self.state.done_task = task.map(|bytes| ralph_protocol::task_digest(&bytes));
        }
        self.group_ended();
        self.dismiss_ready().await;
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

/// Criteria checked and total, from the task body (or the frontmatter list when the body has none).
fn criteria_counts(task: &TaskFile) -> (usize, usize) {
    let total = task.criteria.len();
    let open = task.unchecked().count();
    (total - open, total)
}
