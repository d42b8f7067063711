//! The loop: iterations of cleanup, prompt, agent, stream, act, record.
//!
//! [`Runner::run`] owns the `.ralph/` workspace for its whole life (it holds the lock). It talks
//! to a front end only through channels: [`LoopEvent`]s out, [`Control`]s in. Each iteration:
//!
//! 1. **Cleanup**: stray temporary files go; an answer waiting in `.ralph/answer.md` is picked
//!    up for this iteration (never removed before it is delivered).
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

use crate::answer::{self, Answer, AnsweredBy, Submitted};
use crate::clarifications;
use crate::countdown::{Countdown, EXTEND_BY};
use crate::event::{Control, LoopEvent, Outcome, QuestionClosed};
use crate::native::{self, ToolRequest};
use crate::notify::{Notifier, NotifyConfig, QuestionNotice};
use crate::prompt::{self, Carryover, PromptInputs};
use crate::question::{MAX_QUESTION_BYTES, Question};
use crate::registry;
use crate::state::{
    self, AskClaim, PendingQuestion, RaisedBy, State, Status, log_event, timestamp,
};
use crate::supervisor::{self, describe_exit};
use crate::task::{OnQuestionTimeout, TaskFile, Wait};
use crate::workspace::{self, Workspace, WorkspaceError, WorkspaceLock};

/// How to start one run of an agent: the shell command, what goes on its stdin, extra env.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Invocation {
    /// Run with `sh -c`; every piece that came from outside is already shell-quoted.
    pub command: String,
    /// Written to the agent's stdin, which is then closed; `None` gives it no stdin at all.
    pub stdin: Option<Vec<u8>>,
    /// Extra environment variables for this agent.
    pub env: Vec<(String, String)>,
    /// Keep stdin open after `stdin` is written: the agent talks with its host (Claude Code's
    /// stdio permission protocol), and stdin closes when its turn ends.
    pub conversation: bool,
}

/// Builds a fresh run from the prompt (and the path of the file that holds it).
pub type FreshFn = Arc<dyn Fn(&str, &Path) -> Invocation + Send + Sync>;
/// Builds a resumed run from a session id and the new user message (and the prompt file path).
pub type ResumeFn = Arc<dyn Fn(&str, &str, &Path) -> Invocation + Send + Sync>;

/// The agent to run: a name for humans, how to start it, and how to read its output.
#[derive(Clone)]
pub struct AgentSpec {
    /// Shown in the status area and logs.
    pub name: String,
    /// How its stdout is decoded.
    pub format: StreamFormat,
    /// A fresh run with the whole prompt.
    pub fresh: FreshFn,
    /// Continuing a session with a new message, for agents that can (`None` otherwise).
    pub resume: Option<ResumeFn>,
}

impl AgentSpec {
    /// Any command line, run with `sh -c`, the prompt on stdin, its output read as plain text.
    pub fn command(name: impl Into<String>, command: impl Into<String>) -> Self {
        let command = command.into();
        AgentSpec {
            name: name.into(),
            format: StreamFormat::Text,
            fresh: Arc::new(move |prompt, _| Invocation {
                command: command.clone(),
                stdin: Some(prompt.as_bytes().to_vec()),
                ..Invocation::default()
            }),
            resume: None,
        }
    }
}

impl std::fmt::Debug for AgentSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentSpec")
            .field("name", &self.name)
            .field("format", &self.format)
            .field("resume", &self.resume.is_some())
            .finish()
    }
}

/// The knobs of a run: the task file's values with command-line overrides applied.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Stop with exit 3 after this many iterations.
    pub max_iterations: u32,
    /// How long a question waits for an answer.
    pub question_timeout: Wait,
    /// How long one agent run may take.
    pub iteration_timeout: Wait,
    /// How long the test command may take.
    pub test_timeout: Duration,
    /// What to do when a question times out.
    pub on_question_timeout: OnQuestionTimeout,
    /// Stop after this many failed agent runs in a row.
    pub max_consecutive_failures: u32,
    /// After a signal, how long the agent may take to end its turn before it is stopped.
    pub signal_grace: Duration,
    /// Between SIGTERM and SIGKILL when stopping an agent.
    pub kill_grace: Duration,
}

impl Settings {
    /// The task file's settings, with ralph's defaults for the rest.
    pub fn from_task(task: &TaskFile) -> Self {
        Settings {
            max_iterations: task.max_iterations,
            question_timeout: task.question_timeout,
            iteration_timeout: task.iteration_timeout,
            test_timeout: task.test_timeout,
            on_question_timeout: task.on_question_timeout,
            max_consecutive_failures: task.max_consecutive_failures,
            signal_grace: Duration::from_secs(10),
            kill_grace: Duration::from_secs(3),
        }
    }
}

/// Everything a run needs.
#[derive(Debug)]
pub struct RunConfig {
    /// The project and its `.ralph/`.
    pub workspace: Workspace,
    /// The task file (re-read every iteration).
    pub task_path: PathBuf,
    /// The task file as first loaded (already validated).
    pub task: TaskFile,
    /// The agent.
    pub agent: AgentSpec,
    /// The knobs.
    pub settings: Settings,
}

/// Why a run could not go on.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A file in `.ralph/` could not be read or written.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    /// `state.json` could not be read or written.
    #[error(transparent)]
    State(#[from] state::StateError),
    /// The agent could not be started at all.
    #[error(
        "could not start the agent `{command}`: {source}. Check that the command exists and runs by itself."
    )]
    Spawn {
        /// The command line.
        command: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The file watcher on `.ralph/` could not be set up.
    #[error("could not watch {path} for answers: {message}")]
    Watch {
        /// The directory.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

/// An answer on its way to the agent: picked up before an iteration, archived after it.
#[derive(Debug, Clone)]
struct Delivery {
    question: Option<Question>,
    question_raw: Option<Vec<u8>>,
    asked_at: Option<String>,
    answer: Answer,
    late: bool,
}

/// What one run of the agent amounted to.
#[derive(Debug, Default)]
struct AgentRun {
    signals: Vec<SignalKind>,
    exit: Option<ExitStatus>,
    timed_out: bool,
    interrupted: bool,
    /// A `ralph ask` question still open when the agent ended (it was killed while asking).
    asking: Option<OpenQuestion>,
    /// The agent's session id, when its stream reports one.
    session_id: Option<String>,
    /// Errors the agent reported (API errors, failed resumes).
    errors: Vec<String>,
    /// Requests from the agent not yet answered (`control_request` lines).
    requests: Vec<String>,
    /// The agent said its turn is over.
    turn_ended: bool,
    /// The agent reported a rate limit (how long it suggests waiting, and its words).
    rate_limited: Option<(Option<Duration>, String)>,
}

impl AgentRun {
    fn saw(&self, kind: SignalKind) -> bool {
        self.signals.contains(&kind)
    }

    fn describe(&self, timeout: Option<Duration>) -> String {
        if self.interrupted {
            return "was stopped (interrupted)".into();
        }
        if self.timed_out {
            let limit = timeout
                .map(|t| humantime::format_duration(t).to_string())
                .unwrap_or_default();
            return format!("ran past iteration_timeout ({limit}) and was stopped");
        }
        match &self.exit {
            Some(status) => describe_exit(status),
            None => "ended".into(),
        }
    }

    fn failed(&self) -> bool {
        self.timed_out || self.exit.is_some_and(|s| !s.success()) && self.signals.is_empty()
    }
}

/// How a wait for an answer ended, inside the runner.
enum WaitEnd {
    Answered(Answer, bool /* in this terminal */),
    TimedOut,
    Skipped,
    Interrupted,
}

/// Runs the loop; see the module docs.
#[derive(Debug)]
pub struct Runner {
    cfg: RunConfig,
    ws: Workspace,
    state: State,
    events: mpsc::Sender<LoopEvent>,
    controls: mpsc::UnboundedReceiver<Control>,
    controls_open: bool,
    fs_events: mpsc::UnboundedReceiver<()>,
    _watcher: notify::RecommendedWatcher,
    _lock: WorkspaceLock,
    carryover: Vec<Carryover>,
    delivering: Option<Delivery>,
    first_iteration: u32,
    resume_question: Option<PendingQuestion>,
    notifier: Notifier,
    _registration: Option<registry::Registration>,
    /// The last session the agent reported, for resuming it with an answer.
    session_id: Option<String>,
    /// The next iteration resumes that session with the carried answer instead of starting fresh.
    resume_next: bool,
    /// The last iteration was a resume that failed: not the agent's fault, not a failure.
    resume_failed: bool,
}

impl Runner {
    /// Prepares a run: takes the lock, creates `.ralph/`, and reads what a previous run left.
    ///
    /// Nothing in `.ralph/` is written before the lock is held.
    pub fn new(
        cfg: RunConfig,
        events: mpsc::Sender<LoopEvent>,
        controls: mpsc::UnboundedReceiver<Control>,
    ) -> Result<Self, RunError> {
        let ws = cfg.workspace.clone();
        ws.ensure()?;
        let lock = ws.lock()?;
        for (path, initial) in [
            (
                ws.progress(),
                "# Progress\n\nWhat each iteration did, learned and assumed.\n",
            ),
            (
                ws.guardrails(),
                "# Guardrails\n\nRules every iteration must keep.\n",
            ),
        ] {
            if std::fs::symlink_metadata(&path).is_err() {
                workspace::write_atomic(&path, initial.as_bytes())?;
            }
        }

        let previous = State::load(&ws).unwrap_or(None);
        let mut first_iteration = 1;
        let mut resume_question = None;
        if let Some(prev) = &previous {
            if let Some(pgid) = prev.agent_pgid {
                reap_orphaned_agent(pgid, ws.dir());
            }
            if matches!(
                prev.status,
                Status::Running | Status::WaitingInput | Status::Stopped
            ) {
                first_iteration = prev.iteration.saturating_add(1).max(1);
                if let Some(q) = &prev.pending_question
                    && !q.timed_out
                    && ws.question().exists()
                {
                    resume_question = Some(q.clone());
                }
            }
        }
        let pending_from_before = previous.as_ref().and_then(|p| p.pending_question.clone());

        let (fs_tx, fs_events) = mpsc::unbounded_channel();
        let watcher = watch_dir(ws.dir(), fs_tx)?;
        let notify = &cfg.task.notify;
        let notifier = Notifier::new(NotifyConfig {
            desktop: notify.desktop_notification,
            command: notify.notify_command.clone(),
            webhook_url: notify.webhook_url.clone(),
            ..NotifyConfig::default()
        });
        // Best effort: `ralph status --all` is a convenience, never a reason not to run.
        let registration = registry::register(ws.root()).ok();
        let now = SystemTime::now();
        let state = State {
            status: Status::Running,
            iteration: first_iteration.saturating_sub(1),
            max_iterations: cfg.settings.max_iterations,
            pid: std::process::id(),
            agent_pgid: None,
            root: ws.root().display().to_string(),
            task: cfg.task.task.lines().next().unwrap_or("").to_string(),
            agent: cfg.agent.name.clone(),
            started_at: timestamp(now),
            updated_at: timestamp(now),
            pending_question: pending_from_before,
            last_signal: None,
            reason: None,
            total_cost_usd: previous.as_ref().and_then(|p| p.total_cost_usd),
        };
        Ok(Runner {
            cfg,
            ws,
            state,
            events,
            controls,
            controls_open: true,
            fs_events,
            _watcher: watcher,
            _lock: lock,
            carryover: Vec::new(),
            delivering: None,
            first_iteration,
            resume_question,
            notifier,
            _registration: registration,
            session_id: None,
            resume_next: false,
            resume_failed: false,
        })
    }

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
        let max = self.cfg.settings.max_iterations;
        self.state.save(&self.ws)?;
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
        for w in &self.cfg.task.warnings {
            let text = w.to_string();
            self.emit(LoopEvent::Warning(text.clone())).await;
            self.log("warning", json!({"message": text}));
        }

        if let Some(pending) = self.resume_question.take() {
            let asked_at = pending.asked_at_time().unwrap_or_else(SystemTime::now);
            let waited = SystemTime::now()
                .duration_since(asked_at)
                .unwrap_or_default();
            self.emit(LoopEvent::Note(format!(
                "A question from the last run is still waiting (asked {} ago); showing it first.",
                humantime::format_duration(Duration::from_secs(waited.as_secs()))
            )))
            .await;
            let question = pending.question();
            if let Some(outcome) = self
                .present_question(question, asked_at, pending.iteration, pending.raised_by)
                .await?
            {
                return self
                    .finish(outcome, "stopped while a question was waiting")
                    .await;
            }
        }

        let mut failures = 0u32;
        let mut rate_limit_streak = 0u32;
        let mut iteration = self.first_iteration;
        while iteration <= max {
            self.cleanup_before_iteration().await?;
            let task = match TaskFile::load(&self.cfg.task_path) {
                Ok(t) => t,
                Err(e) => {
                    // The agent may have broken the task file; run on the last good copy and
                    // tell it, rather than stopping an unattended loop.
                    let msg =
                        format!("the task file no longer parses, using the last good copy: {e}");
                    self.emit(LoopEvent::Warning(msg.clone())).await;
                    self.log("warning", json!({"message": msg}));
                    self.carryover.push(Carryover::Rejected {
                        reason: format!("RALPH_TASK.md no longer parses. Repair it:\n\n{e}"),
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
                if let Some(outcome) = self.wait_and_close(open).await? {
                    return self
                        .finish(outcome, "stopped while a question was waiting")
                        .await;
                }
            }
            if !self.resume_failed {
                // A failed resume did not really deliver: the fallback iteration needs the file.
                self.after_delivery()?;
            }
            // The agent checks boxes as it goes; show where it got to.
            let now = TaskFile::load(&self.cfg.task_path);
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
            if run.saw(SignalKind::Done) {
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

    async fn finish(mut self, outcome: Outcome, reason: &str) -> Result<Outcome, RunError> {
        self.state.status = outcome.status();
        self.state.reason = Some(reason.to_string());
        self.state.agent_pgid = None;
        self.state.save(&self.ws)?;
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

    /// Step 1: clear what a crash may have left, and pick up an answer that is waiting.
    async fn cleanup_before_iteration(&mut self) -> Result<(), RunError> {
        if let Ok(entries) = std::fs::read_dir(self.ws.dir()) {
            for entry in entries.flatten() {
                // Only stale ones: a `ralph answer` may be writing its temporary file right now.
                let stale = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| t.elapsed().unwrap_or_default() > Duration::from_secs(600));
                if stale && entry.file_name().to_string_lossy().starts_with(".tmp-") {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        // Drain file-watch wake-ups that arrived while the agent ran; we look at the files now.
        while self.fs_events.try_recv().is_ok() {}
        if self.delivering.is_none()
            && let Some(ans) = self.read_answer().await?
        {
            let pending = self.state.pending_question.clone();
            let matches_pending = pending.as_ref().is_some_and(|p| {
                ans.question_asked_at.is_none()
                    || ans.question_asked_at.as_deref() == Some(p.asked_at.as_str())
            });
            let (question, late, asked_at) = match (&pending, matches_pending) {
                (Some(p), true) => (Some(p.question()), p.timed_out, Some(p.asked_at.clone())),
                _ => (None, false, None),
            };
            let question_raw = question
                .as_ref()
                .and_then(|_| {
                    workspace::read_bounded(&self.ws.question(), MAX_QUESTION_BYTES)
                        .ok()
                        .flatten()
                })
                .map(|b| b.bytes);
            match &question {
                Some(q) => self.carryover.push(Carryover::Answer {
                    question: q.clone(),
                    answer: ans.text.clone(),
                    by: ans.by.describe().to_string(),
                    late,
                }),
                None => self.carryover.push(Carryover::Guidance {
                    text: ans.text.clone(),
                }),
            }
            if late {
                self.emit(LoopEvent::Note(format!(
                    "A late answer arrived ({}); this iteration gets it.",
                    ans.by.describe()
                )))
                .await;
            }
            self.log(
                "answer_delivering",
                json!({"late": late, "by": ans.by, "guidance": question.is_none()}),
            );
            self.state.pending_question = None;
            self.delivering = Some(Delivery {
                question,
                question_raw,
                asked_at,
                answer: ans,
                late,
            });
        } else if self.delivering.is_none()
            && self
                .state
                .pending_question
                .as_ref()
                .is_none_or(|p| !p.timed_out)
        {
            // A question file nobody signalled for (or one already answered and archived)
            // would be shown by mistake on the next QUESTION: clear it.
            workspace::remove(&self.ws.question())?;
        }
        Ok(())
    }

    /// Reads `.ralph/answer.md`. A symlink there (the agent can plant one) is refused: removed
    /// unread, never followed, and reported; stopping the loop over it would let an agent end an
    /// unattended run, and the next run would stop on it again.
    async fn read_answer(&mut self) -> Result<Option<Answer>, RunError> {
        match answer::read(&self.ws) {
            Err(WorkspaceError::Symlink { path }) => {
                workspace::remove(&path)?;
                let msg = format!(
                    "{} was a symlink; ralph never reads or writes through links in .ralph/, so it removed the link unread",
                    path.display()
                );
                self.emit(LoopEvent::Warning(msg.clone())).await;
                self.log("warning", json!({"message": msg}));
                Ok(None)
            }
            read => Ok(read?),
        }
    }

    /// After the iteration that received an answer: archive it, then remove the files.
    fn after_delivery(&mut self) -> Result<(), RunError> {
        let Some(d) = self.delivering.take() else {
            return Ok(());
        };
        clarifications::record(
            &self.ws,
            &clarifications::Entry {
                question: d.question.as_ref(),
                asked_at: d.asked_at.as_deref(),
                outcome: clarifications::How::Answered {
                    text: &d.answer.text,
                    by: d.answer.by,
                    at: d.answer.at,
                    late: d.late,
                },
            },
        )?;
        workspace::remove(&self.ws.answer())?;
        // Remove the question only if it is the one answered: the agent may have asked a new one.
        if let Some(raw) = &d.question_raw
            && let Ok(Some(now)) = workspace::read_bounded(&self.ws.question(), MAX_QUESTION_BYTES)
            && &now.bytes == raw
        {
            workspace::remove(&self.ws.question())?;
        }
        self.log("answer_delivered", json!({"late": d.late}));
        Ok(())
    }

    /// Steps 2 and 3: build the prompt, run the agent, stream its output.
    async fn run_iteration(&mut self, iteration: u32) -> Result<AgentRun, RunError> {
        let settings = self.cfg.settings.clone();
        let progress = workspace::read_text(&self.ws.progress())?.unwrap_or_default();
        let guardrails = workspace::read_text(&self.ws.guardrails())?.unwrap_or_default();
        let template = workspace::read_text(&self.ws.prompt_template())?;
        let carryover = std::mem::take(&mut self.carryover);
        let stem = format!("iter-{iteration:04}");
        let prompt_path = self.ws.logs().join(format!("{stem}.prompt.md"));
        // After an answer, an agent that can resume its session gets the answer as a new
        // message in the same conversation; otherwise (or if that fails) a fresh prompt.
        let resume = match (
            std::mem::take(&mut self.resume_next),
            &self.cfg.agent.resume,
            &self.session_id,
        ) {
            (true, Some(resume), Some(session)) => Some((resume.clone(), session.clone())),
            _ => None,
        };
        let (prompt, invocation) = match &resume {
            Some((resume, session)) => {
                let message = prompt::resume_message(&carryover);
                let invocation = resume(session, &message, &prompt_path);
                self.emit(LoopEvent::Note(format!(
                    "resuming the agent's session {session} with the answer"
                )))
                .await;
                (message, invocation)
            }
            None => {
                let prompt = prompt::build(&PromptInputs {
                    task: &self.cfg.task,
                    iteration,
                    max_iterations: settings.max_iterations,
                    progress: &progress,
                    guardrails: &guardrails,
                    carryover: &carryover,
                    template: template.as_deref(),
                });
                let invocation = (self.cfg.agent.fresh)(&prompt, &prompt_path);
                (prompt, invocation)
            }
        };
        workspace::write_atomic(&prompt_path, prompt.as_bytes())?;

        let started = Instant::now();
        let timeout = wait_duration(settings.iteration_timeout);
        self.state.status = Status::Running;
        self.state.iteration = iteration;
        self.emit(LoopEvent::IterationStarted {
            iteration,
            max_iterations: settings.max_iterations,
            at: started.into_std(),
            timeout,
        })
        .await;
        self.log(
            "iteration_start",
            json!({"iteration": iteration, "prompt": prompt_path.display().to_string(), "carryover": carryover.len(), "resumed_session": resume.as_ref().map(|r| r.1.clone())}),
        );

        let mut env = agent_env(&self.ws, &self.cfg.task_path, iteration, &prompt_path);
        env.extend(invocation.env.iter().cloned());
        let spawn_error = |source| RunError::Spawn {
            command: invocation.command.clone(),
            source,
        };
        let (spawned, conversation) = if invocation.conversation {
            let (spawned, mut stdin) =
                supervisor::spawn_shell_open(&invocation.command, self.ws.root(), env)
                    .map_err(spawn_error)?;
            if let Some(first) = &invocation.stdin {
                // An agent that dies before reading shows up when it exits; nothing to do here.
                let _ = stdin.write_all(first).await;
                let _ = stdin.flush().await;
            }
            (spawned, Some(stdin))
        } else {
            let stdin = invocation.stdin.clone();
            let spawned = supervisor::spawn_shell(&invocation.command, self.ws.root(), env, stdin)
                .map_err(spawn_error)?;
            (spawned, None)
        };
        self.state.agent_pgid = Some(spawned.pgid);
        self.state.save(&self.ws)?;

        let run = self
            .stream_agent(spawned, conversation, iteration, started, timeout)
            .await?;
        if let Some(id) = &run.session_id {
            self.session_id = Some(id.clone());
        }
        if let Some((_, session)) = &resume
            && !run.interrupted
            && run.signals.is_empty()
            && (run.timed_out || run.exit.is_some_and(|s| !s.success()))
        {
            // The resume did not take (an expired session, say): nothing is lost, the next
            // iteration starts fresh and carries the answer in its prompt.
            let why = run
                .errors
                .last()
                .cloned()
                .unwrap_or_else(|| run.describe(timeout));
            self.emit(LoopEvent::Warning(format!(
                "resuming session {session} failed ({why}); the next iteration starts fresh and carries the answer"
            )))
            .await;
            self.log(
                "resume_failed",
                json!({"iteration": iteration, "session": session, "why": why}),
            );
            self.carryover = carryover;
            self.resume_failed = true;
        }

        self.state.agent_pgid = None;
        self.state.save(&self.ws)?;
        let how = run.describe(timeout);
        let elapsed = started.elapsed();
        self.emit(LoopEvent::IterationEnded {
            iteration,
            how: how.clone(),
            elapsed,
        })
        .await;
        self.log(
            "iteration_end",
            json!({"iteration": iteration, "how": how, "seconds": elapsed.as_secs_f64(), "signals": run.signals, "timed_out": run.timed_out, "interrupted": run.interrupted}),
        );
        Ok(run)
    }

    async fn stream_agent(
        &mut self,
        spawned: supervisor::Spawned,
        mut conversation: Option<ChildStdin>,
        iteration: u32,
        started: Instant,
        timeout: Option<Duration>,
    ) -> Result<AgentRun, RunError> {
        let supervisor::Spawned {
            mut child,
            pgid,
            mut stdout,
            mut stderr,
        } = spawned;
        let settings = self.cfg.settings.clone();
        let stem = format!("iter-{iteration:04}");
        let mut out_log = LogFile::create(self.ws.logs().join(format!("{stem}.out")));
        let mut err_log = LogFile::create(self.ws.logs().join(format!("{stem}.err")));

        let mut decoder = Decoder::new(self.cfg.agent.format);
        let mut decoded = Vec::with_capacity(64);
        let mut stderr_lines = LineSplitter::default();
        let mut out_buf = vec![0u8; 64 * 1024];
        let mut err_buf = vec![0u8; 16 * 1024];
        let (mut out_open, mut err_open) = (true, true);
        let mut run = AgentRun::default();

        let far = started + Duration::from_secs(100 * 365 * 24 * 3600);
        let iteration_deadline = timeout.map(|t| started + t).unwrap_or(far);
        let mut grace_deadline = far;
        let mut kill_at = far;
        let mut drain_deadline = far;
        let mut term_sent = false;
        let mut asking: Option<OpenQuestion> = None;

        loop {
            if run.exit.is_some() && !out_open && !err_open {
                break;
            }
            let ask_wake = asking.as_ref().map(OpenQuestion::wake).unwrap_or(far);
            tokio::select! {
                r = stdout.read(&mut out_buf), if out_open => match r {
                    Ok(0) | Err(_) => {
                        out_open = false;
                        decoder.finish(&mut decoded);
                        self.forward(&mut decoded, &mut run, &mut grace_deadline, settings.signal_grace).await;
                        self.serve_agent(&mut run, &mut conversation, &mut asking, iteration).await?;
                    }
                    Ok(n) => {
                        out_log.write(&out_buf[..n]);
                        decoder.feed(&out_buf[..n], &mut decoded);
                        self.forward(&mut decoded, &mut run, &mut grace_deadline, settings.signal_grace).await;
                        self.serve_agent(&mut run, &mut conversation, &mut asking, iteration).await?;
                    }
                },
                r = stderr.read(&mut err_buf), if err_open => match r {
                    Ok(0) | Err(_) => {
                        err_open = false;
                        if let Some(line) = stderr_lines.finish() {
                            self.emit(LoopEvent::Stderr(line)).await;
                        }
                    }
                    Ok(n) => {
                        err_log.write(&err_buf[..n]);
                        for line in stderr_lines.feed(&err_buf[..n]) {
                            self.emit(LoopEvent::Stderr(line)).await;
                        }
                    }
                },
                status = child.wait(), if run.exit.is_none() => {
                    run.exit = status.ok();
                    if run.exit.is_none() {
                        // Could not wait (should not happen); make sure nothing is left behind.
                        supervisor::kill_group_now(pgid);
                    }
                    if (out_open || err_open) && !term_sent {
                        // Something the agent started still holds its output open.
                        term_sent = true;
                        term_group(pgid);
                        kill_at = Instant::now() + settings.kill_grace;
                    }
                    drain_deadline = drain_deadline.min(Instant::now() + settings.kill_grace + Duration::from_secs(2));
                },
                () = tokio::time::sleep_until(iteration_deadline), if run.exit.is_none() && !run.timed_out => {
                    run.timed_out = true;
                    let msg = format!("iteration {iteration} ran past iteration_timeout; stopping the agent");
                    self.emit(LoopEvent::Warning(msg)).await;
                    if !term_sent {
                        term_sent = true;
                        term_group(pgid);
                        kill_at = Instant::now() + settings.kill_grace;
                    }
                },
                () = tokio::time::sleep_until(grace_deadline), if run.exit.is_none() && !term_sent => {
                    self.emit(LoopEvent::Note("the agent did not end its turn after its signal; stopping it".into())).await;
                    term_sent = true;
                    term_group(pgid);
                    kill_at = Instant::now() + settings.kill_grace;
                },
                () = tokio::time::sleep_until(kill_at) => {
                    supervisor::kill_group_now(pgid);
                    self.log("agent_killed", json!({"iteration": iteration, "pgid": pgid}));
                    kill_at = far;
                    drain_deadline = drain_deadline.min(Instant::now() + Duration::from_secs(2));
                },
                () = tokio::time::sleep_until(drain_deadline) => {
                    // The pipes are held open by something outside the group; stop reading.
                    break;
                },
                Some(()) = self.fs_events.recv() => {
                    match asking.as_mut() {
                        None => asking = self.notice_ask(iteration).await?,
                        Some(open) => {
                            if let Some(end) = self.question_step(open, Step::Files).await? {
                                let open = asking.take().expect("checked above");
                                asking = self.end_asking(open, end, &mut conversation, iteration).await?;
                            }
                        }
                    }
                },
                () = tokio::time::sleep_until(ask_wake) => {
                    if let Some(open) = asking.as_mut()
                        && let Some(end) = self.question_step(open, Step::Wake).await?
                    {
                        let open = asking.take().expect("checked above");
                        asking = self.end_asking(open, end, &mut conversation, iteration).await?;
                    }
                },
                c = self.controls.recv(), if self.controls_open => match c {
                    None => self.controls_open = false,
                    Some(c @ (Control::Answer(_) | Control::Skip | Control::Typing | Control::Extend)) => {
                        if let Some(open) = asking.as_mut()
                            && let Some(end) = self.question_step(open, Step::Control(c)).await?
                        {
                            let open = asking.take().expect("checked above");
                            asking = self.end_asking(open, end, &mut conversation, iteration).await?;
                        }
                    }
                    Some(Control::Stop) if !run.interrupted => {
                        run.interrupted = true;
                        self.emit(LoopEvent::Note("stopping the agent (Ctrl-C again to kill it now)".into())).await;
                        if !term_sent {
                            term_sent = true;
                            term_group(pgid);
                            kill_at = Instant::now() + settings.kill_grace;
                        }
                    }
                    Some(Control::Stop | Control::Kill) => {
                        run.interrupted = true;
                        supervisor::kill_group_now(pgid);
                        kill_at = far;
                        drain_deadline = drain_deadline.min(Instant::now() + Duration::from_secs(2));
                    }
                },
            }
        }
        out_log.finish();
        err_log.finish();
        if run.exit.is_none() {
            run.exit = child.try_wait().ok().flatten();
            if run.exit.is_none() {
                supervisor::kill_group_now(pgid);
                run.exit = child.wait().await.ok();
            }
        }
        // Anything still alive in the group (it closed its output, or ignored SIGTERM).
        let hurry = async {
            if self.controls_open {
                while let Some(c) = self.controls.recv().await {
                    if matches!(c, Control::Stop | Control::Kill) {
                        run.interrupted = true;
                        return;
                    }
                }
            }
            std::future::pending::<()>().await
        };
        let stopped = supervisor::stop_group(pgid, settings.kill_grace, hurry).await;
        if stopped != supervisor::Stopped::AlreadyGone {
            let msg = format!("processes the agent left behind were stopped ({stopped:?})");
            self.emit(LoopEvent::Note(msg.clone())).await;
            self.log(
                "leftovers_stopped",
                json!({"iteration": iteration, "how": format!("{stopped:?}")}),
            );
        }
        run.asking = asking;
        Ok(run)
    }

    /// Sends decoded agent events on, noting signals and arming the post-signal grace.
    async fn forward(
        &mut self,
        decoded: &mut Vec<AgentEvent>,
        run: &mut AgentRun,
        grace_deadline: &mut Instant,
        grace: Duration,
    ) {
        for event in decoded.drain(..) {
            match event {
                AgentEvent::Signal(signal) => {
                    if run.signals.is_empty() {
                        *grace_deadline = Instant::now() + grace;
                    }
                    run.signals.push(signal.kind);
                    self.state.last_signal = Some(format!("{:?}", signal.kind).to_uppercase());
                    self.log(
                        "signal",
                        json!({"iteration": self.state.iteration, "signal": signal.kind, "line": signal.line, "line_number": signal.line_number}),
                    );
                    let _ = self.events.send(LoopEvent::Signal(signal)).await;
                }
                AgentEvent::Usage(usage) => {
                    if let Some(cost) = usage.cost_usd {
                        *self.state.total_cost_usd.get_or_insert(0.0) += cost;
                    }
                    self.log(
                        "usage",
                        json!({"iteration": self.state.iteration, "usage": usage}),
                    );
                    let _ = self
                        .events
                        .send(LoopEvent::Agent(AgentEvent::Usage(usage)))
                        .await;
                }
                AgentEvent::ControlRequest(line) => run.requests.push(line),
                AgentEvent::RateLimited {
                    retry_after,
                    message,
                } => {
                    self.log(
                        "rate_limited",
                        json!({"iteration": self.state.iteration, "message": message, "retry_after_seconds": retry_after.map(|d| d.as_secs_f64())}),
                    );
                    // Keep the longest wait any report suggested; a later report may not say.
                    let known = run.rate_limited.as_ref().and_then(|(after, _)| *after);
                    let after = match (known, retry_after) {
                        (Some(a), Some(b)) => Some(a.max(b)),
                        (a, b) => a.or(b),
                    };
                    run.rate_limited = Some((after, message.clone()));
                    let _ = self
                        .events
                        .send(LoopEvent::Agent(AgentEvent::RateLimited {
                            retry_after,
                            message,
                        }))
                        .await;
                }
                AgentEvent::TurnEnd { result } => {
                    run.turn_ended = true;
                    let _ = self
                        .events
                        .send(LoopEvent::Agent(AgentEvent::TurnEnd { result }))
                        .await;
                }
                AgentEvent::SessionId(id) => {
                    run.session_id = Some(id.clone());
                    let _ = self
                        .events
                        .send(LoopEvent::Agent(AgentEvent::SessionId(id)))
                        .await;
                }
                AgentEvent::Error(e) => {
                    self.log(
                        "agent_error",
                        json!({"iteration": self.state.iteration, "message": e}),
                    );
                    run.errors.push(e.clone());
                    let _ = self
                        .events
                        .send(LoopEvent::Agent(AgentEvent::Error(e)))
                        .await;
                }
                other => {
                    let _ = self.events.send(LoopEvent::Agent(other)).await;
                }
            }
        }
    }

    /// DONE: every criterion checked, and the test command passes within its timeout.
    ///
    /// `None` when the human stopped the loop (Ctrl-C, SIGTERM, SIGHUP) while the tests ran.
    async fn verify(&mut self) -> Option<(bool, String)> {
        let task = match TaskFile::load(&self.cfg.task_path) {
            Ok(t) => t,
            Err(e) => {
                return Some((
                    false,
                    format!("RALPH_TASK.md could not be read to check the criteria: {e}"),
                ));
            }
        };
        let open: Vec<_> = task.unchecked().collect();
        if !open.is_empty() {
            let mut reason = format!(
                "{} of {} criteria in RALPH_TASK.md are not checked yet:\n",
                open.len(),
                task.criteria.len()
            );
            for c in &open {
                reason.push_str(&format!("- [ ] {} (line {})\n", c.text, c.line));
            }
            return Some((false, reason));
        }
        let Some(command) = task.test_command.clone() else {
            return Some((
                true,
                "every criterion is checked (no test_command set)".into(),
            ));
        };
        self.emit(LoopEvent::TestsStarted {
            command: command.clone(),
        })
        .await;
        let result = run_tests(
            &command,
            self.ws.root(),
            task.test_timeout,
            self.cfg.settings.kill_grace,
            stop_requested(&mut self.controls, self.controls_open),
        )
        .await;
        self.cfg.task = task;
        Some(match result {
            Ok((status, _)) if status.success() => (
                true,
                format!("every criterion is checked and `{command}` passed"),
            ),
            Ok((status, tail)) => (
                false,
                format!(
                    "The test command `{command}` {}. The last lines of its output:\n\n```\n{}\n```",
                    describe_exit(&status),
                    tail.trim_end()
                ),
            ),
            Err(TestError::TimedOut(tail)) => (
                false,
                format!(
                    "The test command `{command}` ran past test_timeout ({}) and was stopped. The last lines of its output:\n\n```\n{}\n```",
                    humantime::format_duration(self.cfg.settings.test_timeout),
                    tail.trim_end()
                ),
            ),
            Err(TestError::Spawn(e)) => (
                false,
                format!("The test command `{command}` could not be started: {e}"),
            ),
            Err(TestError::Interrupted) => return None,
        })
    }

    /// QUESTION: read `.ralph/question.md` and wait for an answer; `Some` when the run must end.
    async fn handle_question_signal(
        &mut self,
        iteration: u32,
    ) -> Result<Option<Outcome>, RunError> {
        let raw = match workspace::read_bounded(&self.ws.question(), MAX_QUESTION_BYTES) {
            Ok(Some(raw)) => raw,
            Ok(None) => {
                let msg = "the agent signalled QUESTION but wrote no .ralph/question.md; the next iteration is told its question was lost".to_string();
                self.emit(LoopEvent::Warning(msg.clone())).await;
                self.log(
                    "question_lost",
                    json!({"iteration": iteration, "message": msg}),
                );
                self.carryover.push(Carryover::QuestionLost);
                return Ok(None);
            }
            Err(e) => {
                let msg = format!("refused to read the question: {e}");
                self.emit(LoopEvent::Warning(msg.clone())).await;
                self.log(
                    "question_lost",
                    json!({"iteration": iteration, "message": msg}),
                );
                self.carryover.push(Carryover::QuestionLost);
                return Ok(None);
            }
        };
        let mut question = Question::parse_bounded(&raw.bytes);
        if let Some(size) = raw.cut_from {
            let note = format!(
                "[question cut: the file is {size} bytes, showing the first {}]",
                raw.bytes.len()
            );
            question.warning = Some(match question.warning.take() {
                Some(w) => format!("{w}; {note}"),
                None => note,
            });
        }
        if let Some(w) = &question.warning {
            let msg = format!(".ralph/question.md: {w}");
            self.emit(LoopEvent::Warning(msg.clone())).await;
            self.log("warning", json!({"message": msg}));
        }
        self.present_question(question, SystemTime::now(), iteration, RaisedBy::Signal)
            .await
    }

    /// Shows a question and waits for its answer, deadline, skip or interruption.
    async fn present_question(
        &mut self,
        question: Question,
        asked_at: SystemTime,
        iteration: u32,
        raised_by: RaisedBy,
    ) -> Result<Option<Outcome>, RunError> {
        let wait = self.question_wait();
        let open = self
            .open_question(question, asked_at, None, wait, iteration, raised_by)
            .await?;
        self.wait_and_close(open).await
    }

    /// Waits on an open question until it ends, then acts on how it ended.
    async fn wait_and_close(
        &mut self,
        mut open: OpenQuestion,
    ) -> Result<Option<Outcome>, RunError> {
        // Look before waiting: the answer may already be there, or the wait may be zero.
        let mut step = Step::Wake;
        let end = loop {
            if let Some(end) = self.question_step(&mut open, step).await? {
                break end;
            }
            let wake = open.wake();
            step = tokio::select! {
                () = tokio::time::sleep_until(wake) => Step::Wake,
                Some(()) = self.fs_events.recv() => Step::Files,
                c = self.controls.recv(), if self.controls_open => match c {
                    None => { self.controls_open = false; Step::Wake }
                    Some(c) => Step::Control(c),
                },
            };
        };
        self.close_question(open, end).await
    }

    /// Records a question as waiting (state first, then the log, the front end, notifications).
    async fn open_question(
        &mut self,
        question: Question,
        asked_at: SystemTime,
        asked_at_text: Option<String>,
        wait: Option<Duration>,
        iteration: u32,
        raised_by: RaisedBy,
    ) -> Result<OpenQuestion, RunError> {
        let now = std::time::Instant::now();
        let countdown = Countdown::new(wait, now);
        let deadline = countdown
            .remaining(now)
            .map(|left| SystemTime::now() + left);
        let mut pending = PendingQuestion::new(&question, asked_at, deadline, iteration, raised_by);
        if let Some(text) = asked_at_text {
            pending.asked_at = text;
        }
        let asked_at_text = pending.asked_at.clone();
        // Written before anything is shown: `ralph status`, `ralph answer` and `ralph ask` rely on it.
        self.state.pending_question = Some(pending);
        self.state.status = Status::WaitingInput;
        self.state.save(&self.ws)?;
        self.log(
            "question",
            json!({"iteration": iteration, "raised_by": raised_by, "text": question.text, "options": question.options, "default": question.default, "deadline": deadline.map(timestamp)}),
        );
        self.emit(LoopEvent::QuestionAsked {
            question: question.clone(),
            countdown: countdown.clone(),
            asked_at,
            raised_by,
            iteration,
        })
        .await;
        self.notify_question(&question, deadline, iteration);
        Ok(OpenQuestion {
            question,
            asked_at: asked_at_text,
            countdown,
            raised_by,
            iteration,
            paused: false,
            carry: true,
            native: None,
        })
    }

    /// Waits out a rate limit; `true` if the human stopped the loop meanwhile.
    async fn back_off(&mut self, wait: Duration, reason: &str) -> bool {
        let until = Instant::now() + wait;
        self.log(
            "backoff",
            json!({"iteration": self.state.iteration, "seconds": wait.as_secs_f64(), "reason": reason}),
        );
        self.emit(LoopEvent::Backoff {
            until: until.into_std(),
            reason: reason.to_string(),
        })
        .await;
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(until) => return false,
                c = self.controls.recv(), if self.controls_open => match c {
                    None => self.controls_open = false,
                    Some(Control::Stop | Control::Kill) => return true,
                    Some(_) => {}
                },
            }
        }
    }

    /// How long a question may wait under the current settings (`None`: no deadline).
    fn question_wait(&self) -> Option<Duration> {
        match self.cfg.settings.on_question_timeout {
            OnQuestionTimeout::Wait => None,
            _ => wait_duration(self.cfg.settings.question_timeout),
        }
    }

    /// Answers what a conversing agent asked of its host: its question tool goes to the human,
    /// any other tool is allowed (the loop runs unattended). Closes stdin once the turn is over.
    async fn serve_agent(
        &mut self,
        run: &mut AgentRun,
        stdin: &mut Option<ChildStdin>,
        asking: &mut Option<OpenQuestion>,
        iteration: u32,
    ) -> Result<(), RunError> {
        for line in std::mem::take(&mut run.requests) {
            let Some(request) = ToolRequest::parse(&line) else {
                self.log(
                    "control_request_ignored",
                    json!({"line": line.chars().take(200).collect::<String>()}),
                );
                continue;
            };
            if request.tool_name != native::ASK_TOOL {
                write_line(stdin, &request.allow()).await;
                continue;
            }
            let mut questions: std::collections::VecDeque<Question> = request.questions().into();
            let Some(first) = questions.pop_front() else {
                write_line(
                    stdin,
                    &request.deny("The question had no text; ask again with a question."),
                )
                .await;
                continue;
            };
            if asking.is_some() {
                write_line(
                    stdin,
                    &request.deny(
                        "Another question is already waiting for the human; ask one at a time.",
                    ),
                )
                .await;
                continue;
            }
            // The answer this iteration started with has been read; free the answer file.
            self.after_delivery()?;
            let wait = self.question_wait();
            let mut open = self
                .open_question(
                    first,
                    SystemTime::now(),
                    None,
                    wait,
                    iteration,
                    RaisedBy::Tool,
                )
                .await?;
            open.carry = false;
            open.native = Some(NativeAsk {
                request,
                rest: questions,
                answers: Vec::new(),
            });
            *asking = Some(open);
        }
        if run.turn_ended && asking.is_none() {
            // Its turn is over: closing stdin is how a stream-json agent is told to exit.
            *stdin = None;
        }
        Ok(())
    }

    /// Ends a question asked while the agent runs; for the agent's own question tool, answers
    /// it on stdin (or asks the request's next question, which is returned).
    async fn end_asking(
        &mut self,
        mut open: OpenQuestion,
        end: WaitEnd,
        stdin: &mut Option<ChildStdin>,
        iteration: u32,
    ) -> Result<Option<OpenQuestion>, RunError> {
        let native = open.native.take();
        let text = open.question.text.clone();
        let answer = match &end {
            WaitEnd::Answered(a, _) => Some(a.text.clone()),
            _ => None,
        };
        let refusal = match &end {
            WaitEnd::Skipped => native::SKIPPED,
            _ => native::NO_ANSWER,
        };
        self.close_question(open, end).await?;
        let Some(mut ask) = native else {
            return Ok(None);
        };
        let Some(answer) = answer else {
            write_line(stdin, &ask.request.deny(refusal)).await;
            return Ok(None);
        };
        ask.answers.push((text, answer));
        if let Some(next) = ask.rest.pop_front() {
            // One answer file at a time: archive this one before asking the next.
            self.after_delivery()?;
            let wait = self.question_wait();
            let mut open = self
                .open_question(
                    next,
                    SystemTime::now(),
                    None,
                    wait,
                    iteration,
                    RaisedBy::Tool,
                )
                .await?;
            open.carry = false;
            open.native = Some(ask);
            return Ok(Some(open));
        }
        write_line(stdin, &ask.request.answer(&ask.answers)).await;
        Ok(None)
    }

    /// Tells the human through every channel they configured; never waits for any of them.
    fn notify_question(&self, question: &Question, deadline: Option<SystemTime>, iteration: u32) {
        let root = self.ws.root().display().to_string();
        let notice = QuestionNotice {
            answer_command: format!("ralph answer -C {} \"your answer\"", shell_quote(&root)),
            root,
            question: question.text.clone(),
            options: question.options.iter().map(|o| o.label.clone()).collect(),
            default: question.default.clone(),
            deadline: deadline.map(timestamp),
            iteration,
        };
        let warnings = self.notifier.question_raised(&notice);
        let events = self.events.clone();
        let ws = self.ws.clone();
        // Failures arrive later (a webhook timing out); pass them on without holding the loop.
        // A plain thread, not `spawn_blocking`: the runtime waits for those when it shuts down,
        // and a dead webhook must not hold ralph's exit either.
        let _ = std::thread::Builder::new()
            .name("notify-warnings".into())
            .spawn(move || {
                while let Ok(warning) = warnings.recv() {
                    let _ = log_event(&ws, "notify_failed", json!({"message": warning}));
                    let _ = events.blocking_send(LoopEvent::Warning(warning));
                }
            });
    }

    /// Advances an open question by one step; `Some` when its wait is over.
    async fn question_step(
        &mut self,
        open: &mut OpenQuestion,
        step: Step,
    ) -> Result<Option<WaitEnd>, RunError> {
        let now = std::time::Instant::now();
        let mut deadline_moved = false;
        match step {
            Step::Control(Control::Answer(text)) => {
                let text = text.trim().to_string();
                if text.is_empty() {
                    self.emit(LoopEvent::AnswerRefused {
                        reason: "an empty answer is not an answer: type one, or skip to let the agent decide".into(),
                    })
                    .await;
                    return Ok(None);
                }
                let ans = Answer::new(text, AnsweredBy::Terminal, Some(open.asked_at.clone()));
                return Ok(Some(match answer::submit(&self.ws, &ans)? {
                    Submitted::Accepted => WaitEnd::Answered(ans, true),
                    Submitted::AlreadyAnswered(theirs) => WaitEnd::Answered(theirs, false),
                }));
            }
            Step::Control(Control::Skip) => return Ok(Some(WaitEnd::Skipped)),
            Step::Control(Control::Stop | Control::Kill) => return Ok(Some(WaitEnd::Interrupted)),
            Step::Control(Control::Typing) => {
                open.countdown.typing(now);
                self.emit(LoopEvent::Countdown(open.countdown.clone()))
                    .await;
            }
            Step::Control(Control::Extend) => {
                open.countdown.extend(EXTEND_BY, now);
                self.emit(LoopEvent::Countdown(open.countdown.clone()))
                    .await;
                deadline_moved = true;
            }
            Step::Wake | Step::Files => {}
        }
        // An answer may have landed from elsewhere (`ralph answer`, a hand-written file).
        if let Some(ans) = self.read_answer().await?
            && ans
                .question_asked_at
                .as_deref()
                .is_none_or(|a| a == open.asked_at)
        {
            return Ok(Some(WaitEnd::Answered(ans, false)));
        }
        if open.countdown.expired(now) {
            return Ok(Some(WaitEnd::TimedOut));
        }
        // Keep state.json's deadline true while the human types or extends, for `ralph status`
        // and for a `ralph ask` that follows the loop's deadline.
        let paused = open.countdown.is_paused(now);
        if paused != open.paused || deadline_moved {
            open.paused = paused;
            if let Some(p) = self.state.pending_question.as_mut() {
                p.paused = paused;
                p.deadline = open
                    .countdown
                    .remaining(now)
                    .map(|left| timestamp(SystemTime::now() + left));
            }
            self.state.save(&self.ws)?;
        }
        Ok(None)
    }

    /// Acts on how a question's wait ended; `Some` when the run must end.
    async fn close_question(
        &mut self,
        open: OpenQuestion,
        end: WaitEnd,
    ) -> Result<Option<Outcome>, RunError> {
        let OpenQuestion {
            question,
            asked_at,
            raised_by,
            iteration,
            carry,
            ..
        } = open;
        let question_raw = workspace::read_bounded(&self.ws.question(), MAX_QUESTION_BYTES)
            .ok()
            .flatten()
            .map(|b| b.bytes);
        match end {
            WaitEnd::Answered(ans, here) => {
                let closed = if here {
                    QuestionClosed::Answered {
                        text: ans.text.clone(),
                    }
                } else {
                    QuestionClosed::AnsweredElsewhere {
                        by: ans.by.describe().to_string(),
                        text: ans.text.clone(),
                    }
                };
                self.emit(LoopEvent::QuestionClosed(closed)).await;
                self.log(
                    "answer",
                    json!({"iteration": iteration, "by": ans.by, "text": ans.text, "raised_by": raised_by}),
                );
                if carry {
                    self.carryover.push(Carryover::Answer {
                        question: question.clone(),
                        answer: ans.text.clone(),
                        by: ans.by.describe().to_string(),
                        late: false,
                    });
                    self.resume_next = true;
                }
                self.delivering = Some(Delivery {
                    question: Some(question),
                    question_raw,
                    asked_at: Some(asked_at),
                    answer: ans,
                    late: false,
                });
                self.state.pending_question = None;
            }
            WaitEnd::TimedOut => {
                self.emit(LoopEvent::QuestionClosed(QuestionClosed::TimedOut))
                    .await;
                self.log(
                    "question_timeout",
                    json!({"iteration": iteration, "policy": self.cfg.settings.on_question_timeout, "raised_by": raised_by}),
                );
                if let Some(p) = self.state.pending_question.as_mut() {
                    p.paused = false;
                }
                if carry && self.cfg.settings.on_question_timeout == OnQuestionTimeout::Stop {
                    return Ok(Some(Outcome::QuestionTimeoutStop));
                }
                clarifications::record(
                    &self.ws,
                    &clarifications::Entry {
                        question: Some(&question),
                        asked_at: Some(&asked_at),
                        outcome: clarifications::How::Unanswered,
                    },
                )?;
                if carry {
                    self.carryover.push(Carryover::Unanswered { question });
                }
                // Keep the question open for a late answer, which a later iteration will get.
                if let Some(p) = self.state.pending_question.as_mut() {
                    p.timed_out = true;
                }
            }
            WaitEnd::Skipped => {
                self.emit(LoopEvent::QuestionClosed(QuestionClosed::Skipped))
                    .await;
                self.log(
                    "question_skipped",
                    json!({"iteration": iteration, "raised_by": raised_by}),
                );
                clarifications::record(
                    &self.ws,
                    &clarifications::Entry {
                        question: Some(&question),
                        asked_at: Some(&asked_at),
                        outcome: clarifications::How::Skipped,
                    },
                )?;
                if carry {
                    self.carryover.push(Carryover::Skipped { question });
                }
                self.state.pending_question = None;
                workspace::remove(&self.ws.question())?;
                // Removing the claim is how a waiting `ralph ask` learns it was skipped.
                workspace::remove(&self.ws.ask_claim())?;
            }
            WaitEnd::Interrupted => {
                self.emit(LoopEvent::QuestionClosed(QuestionClosed::Interrupted))
                    .await;
                if let Some(p) = self.state.pending_question.as_mut() {
                    p.paused = false;
                }
                return Ok(Some(Outcome::Interrupted));
            }
        }
        self.state.status = Status::Running;
        self.state.save(&self.ws)?;
        Ok(None)
    }

    /// A `ralph ask` may have written its claim while the agent runs: show its question now.
    async fn notice_ask(&mut self, iteration: u32) -> Result<Option<OpenQuestion>, RunError> {
        let Some(claim) = AskClaim::read(&self.ws) else {
            return Ok(None);
        };
        if self
            .state
            .pending_question
            .as_ref()
            .is_some_and(|p| p.asked_at == claim.asked_at)
        {
            return Ok(None);
        }
        let Ok(Some(raw)) = workspace::read_bounded(&self.ws.question(), MAX_QUESTION_BYTES) else {
            return Ok(None);
        };
        // The agent has had the answer this iteration started with; archive it now, so that
        // `.ralph/answer.md` is free for the new question's answer.
        self.after_delivery()?;
        let question = Question::parse_bounded(&raw.bytes);
        let asked_at = state::parse_timestamp(&claim.asked_at).unwrap_or_else(SystemTime::now);
        let wait = claim
            .deadline
            .as_deref()
            .and_then(state::parse_timestamp)
            .map(|d| d.duration_since(SystemTime::now()).unwrap_or_default());
        let mut open = self
            .open_question(
                question,
                asked_at,
                Some(claim.asked_at),
                wait,
                iteration,
                RaisedBy::Ask,
            )
            .await?;
        // The agent is blocked in `ralph ask` and gets the answer from it directly.
        open.carry = false;
        Ok(Some(open))
    }
}

/// A question being waited on.
#[derive(Debug)]
struct OpenQuestion {
    question: Question,
    asked_at: String,
    countdown: Countdown,
    raised_by: RaisedBy,
    iteration: u32,
    /// Whether `state.json` last said the countdown was paused.
    paused: bool,
    /// Whether the answer (or its absence) goes into the next prompt: not when the agent that
    /// asked with `ralph ask` is still there to receive it directly.
    carry: bool,
    /// For a question from the agent's own tool: the request to answer on its stdin.
    native: Option<NativeAsk>,
}

/// An `AskUserQuestion` request being answered, one question at a time.
#[derive(Debug)]
struct NativeAsk {
    request: ToolRequest,
    /// Questions of the same request still to ask.
    rest: std::collections::VecDeque<Question>,
    /// Answers so far, keyed by question text (as the tool wants them).
    answers: Vec<(String, String)>,
}

impl OpenQuestion {
    /// When the question needs looking at again (expiry, or the end of a typing pause).
    fn wake(&self) -> Instant {
        let now = std::time::Instant::now();
        if self.countdown.expired(now) {
            return Instant::now();
        }
        self.countdown
            .next_wake(now)
            .map(Instant::from_std)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(365 * 24 * 3600))
    }
}

/// One thing that can move a waiting question along.
#[derive(Debug)]
enum Step {
    Control(Control),
    Wake,
    Files,
}

/// The first wait after a rate limit that does not say how long to wait.
const BACKOFF_START: Duration = Duration::from_secs(30);
/// The longest wait between retries after rate limits.
const BACKOFF_MAX: Duration = Duration::from_secs(15 * 60);

/// Writes one line to a conversing agent's stdin; an agent that has gone is seen when it exits.
async fn write_line(stdin: &mut Option<ChildStdin>, line: &str) {
    if let Some(pipe) = stdin.as_mut()
        && (pipe.write_all(line.as_bytes()).await.is_err() || pipe.flush().await.is_err())
    {
        *stdin = None;
    }
}

/// The time a [`Wait`] allows, or `None` for no limit.
pub fn wait_duration(wait: Wait) -> Option<Duration> {
    match wait {
        Wait::Never => None,
        Wait::For(d) => Some(d),
    }
}

/// Criteria checked and total, from the task body (or the frontmatter list when the body has none).
fn criteria_counts(task: &TaskFile) -> (usize, usize) {
    let total = task.criteria.len();
    let open = task.unchecked().count();
    (total - open, total)
}

fn term_group(pgid: i32) {
    use nix::sys::signal::{Signal as Sig, killpg};
    let _ = killpg(nix::unistd::Pid::from_raw(pgid), Sig::SIGTERM);
    let _ = killpg(nix::unistd::Pid::from_raw(pgid), Sig::SIGCONT);
}

/// Quotes `s` for `sh` if it needs it (for commands shown to the human).
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The environment an agent runs with, on top of ralph's own.
fn agent_env(
    ws: &Workspace,
    task_path: &std::path::Path,
    iteration: u32,
    prompt_path: &std::path::Path,
) -> Vec<(String, String)> {
    let abs = |p: &std::path::Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let mut env = vec![
        ("RALPH_DIR".to_string(), abs(ws.dir()).display().to_string()),
        ("RALPH_ITERATION".to_string(), iteration.to_string()),
        (
            "RALPH_TASK_FILE".to_string(),
            abs(task_path).display().to_string(),
        ),
        (
            "RALPH_PROMPT_FILE".to_string(),
            abs(prompt_path).display().to_string(),
        ),
    ];
    // So the agent can run `ralph ask` even when ralph is not on its PATH.
    if let Ok(exe) = std::env::current_exe() {
        env.push(("RALPH_BIN".to_string(), exe.display().to_string()));
        if let Some(dir) = exe.parent() {
            let path = std::env::var("PATH").unwrap_or_default();
            env.push(("PATH".to_string(), format!("{}:{path}", dir.display())));
        }
    }
    env
}

/// After a crash of ralph itself, the agent it started may still be running: stop it, but only
/// if it really is ours (its environment names this `.ralph/`), since a pgid can be reused.
///
/// Any member of the group will do: the agent itself may have exited, leaving a background
/// process behind (see the regression test
/// `an_orphaned_grandchild_whose_agent_had_exited_survived_the_next_run`).
fn reap_orphaned_agent(pgid: i32, dir: &std::path::Path) {
    if !supervisor::group_alive(pgid) {
        return;
    }
    let needle = format!(
        "RALPH_DIR={}",
        std::path::absolute(dir)
            .unwrap_or_else(|_| dir.to_path_buf())
            .display()
    );
    let ours = supervisor::live_members(pgid)
        .unwrap_or_default()
        .into_iter()
        .any(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()))
        });
    if ours {
        supervisor::kill_group_now(pgid);
    }
}

/// Raw output of one agent run, on disk; capped so a runaway agent cannot fill the disk.
struct LogFile {
    file: Option<std::io::BufWriter<std::fs::File>>,
    written: u64,
    path: PathBuf,
}

/// Per-stream cap on what `.ralph/logs/` keeps of one iteration.
const LOG_CAP: u64 = 256 * 1024 * 1024;

impl LogFile {
    fn create(path: PathBuf) -> Self {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&path)
            .ok()
            .map(|f| std::io::BufWriter::with_capacity(256 * 1024, f));
        LogFile {
            file,
            written: 0,
            path,
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        use std::io::Write;
        let Some(file) = self.file.as_mut() else {
            return;
        };
        let room = LOG_CAP.saturating_sub(self.written) as usize;
        let take = bytes.len().min(room);
        if file.write_all(&bytes[..take]).is_err() {
            self.file = None;
            return;
        }
        self.written += take as u64;
        if take < bytes.len() {
            let _ = write!(
                file,
                "\n[ralph: log cut at {LOG_CAP} bytes; see {}]\n",
                self.path.display()
            );
            self.file = None;
        }
    }

    fn finish(&mut self) {
        use std::io::Write;
        if let Some(f) = self.file.as_mut() {
            let _ = f.flush();
        }
    }
}

/// Splits stderr into display lines: bounded, sanitized.
#[derive(Default)]
struct LineSplitter {
    partial: Vec<u8>,
}

const STDERR_LINE_CAP: usize = 4096;

impl LineSplitter {
    fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut lines = Vec::new();
        let mut rest = bytes;
        while let Some(i) = memchr_newline(rest) {
            self.push_capped(&rest[..i]);
            lines.push(self.take());
            rest = &rest[i + 1..];
        }
        self.push_capped(rest);
        lines
    }

    fn push_capped(&mut self, bytes: &[u8]) {
        let room = STDERR_LINE_CAP.saturating_sub(self.partial.len());
        self.partial
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    fn take(&mut self) -> String {
        let line = ralph_signal::sanitize(&String::from_utf8_lossy(&self.partial));
        self.partial.clear();
        line
    }

    fn finish(&mut self) -> Option<String> {
        (!self.partial.is_empty()).then(|| self.take())
    }
}

fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|b| *b == b'\n')
}

/// Why a test run produced no verdict of its own.
enum TestError {
    TimedOut(String),
    Spawn(std::io::Error),
    /// The human stopped the loop while the tests ran.
    Interrupted,
}

/// Resolves when the human asks the loop to stop (Ctrl-C, SIGTERM, SIGHUP); other controls
/// (nothing is being asked) are dropped.
async fn stop_requested(controls: &mut mpsc::UnboundedReceiver<Control>, open: bool) {
    if open {
        while let Some(c) = controls.recv().await {
            if matches!(c, Control::Stop | Control::Kill) {
                return;
            }
        }
    }
    std::future::pending::<()>().await
}

/// Runs `test_command` in its own process group with stderr merged into stdout; keeps the tail.
async fn run_tests(
    command: &str,
    dir: &std::path::Path,
    timeout: Duration,
    kill_grace: Duration,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(ExitStatus, String), TestError> {
    let script = format!("exec 2>&1\n{command}");
    let spawned = supervisor::spawn_shell(&script, dir, std::iter::empty::<(&str, &str)>(), None)
        .map_err(TestError::Spawn)?;
    let supervisor::Spawned {
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
    tokio::pin!(stop);
    let timed_out = loop {
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
                    // A background process still holds the output: stop the group.
                    supervisor::stop_group(pgid, kill_grace, std::future::pending()).await;
                }
            },
            () = tokio::time::sleep_until(deadline) => break true,
            () = &mut stop => {
                interrupted = true;
                break true;
            },
        }
    };
    supervisor::stop_group(pgid, kill_grace, std::future::pending()).await;
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

    fn text(&self) -> String {
        let (a, b) = self.buf.as_slices();
        let mut v = Vec::with_capacity(a.len() + b.len());
        v.extend_from_slice(a);
        v.extend_from_slice(b);
        ralph_signal::sanitize(&String::from_utf8_lossy(&v))
    }
}

/// Watches `.ralph/` and sends a wake-up for every change; the runner then looks at the files.
fn watch_dir(
    dir: &std::path::Path,
    tx: mpsc::UnboundedSender<()>,
) -> Result<notify::RecommendedWatcher, RunError> {
    use notify::Watcher;
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        // Only the question and answer files matter; the loop's own writes (state, events)
        // would otherwise wake it for nothing.
        if let Ok(event) = res
            && !matches!(event.kind, notify::EventKind::Access(_))
            && event.paths.iter().any(|p| {
                p.file_name()
                    .is_some_and(|n| n == "answer.md" || n == "question.md" || n == "ask.json")
            })
        {
            let _ = tx.send(());
        }
    })
    .map_err(|e| RunError::Watch {
        path: dir.to_path_buf(),
        message: e.to_string(),
    })?;
    watcher
        .watch(dir, notify::RecursiveMode::NonRecursive)
        .map_err(|e| RunError::Watch {
            path: dir.to_path_buf(),
            message: e.to_string(),
        })?;
    Ok(watcher)
}
