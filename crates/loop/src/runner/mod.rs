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

use crate::answer::{self, Answer, AnsweredBy};
use crate::clarifications;
use crate::countdown::{Countdown, EXTEND_BY};
use crate::event::{Control, LoopEvent, Outcome, QuestionClosed};
use crate::guard::Guard;
use crate::native::{self, ToolRequest};
use crate::notify::{Notifier, NotifyConfig, QuestionNotice};
use crate::orphans;
use crate::prompt::{self, Carryover, PromptInputs};
use crate::question::{MAX_QUESTION_BYTES, Question};
use crate::registry;
use crate::state::{
    self, AgentChoice, AskClaim, PendingQuestion, RaisedBy, State, Status, log_event, timestamp,
};
use crate::supervisor::{self, describe_exit};
use crate::task::{OnQuestionTimeout, TaskFile, Wait};
use crate::workspace::{self, Workspace, WorkspaceError, WorkspaceLock};
use ralph_protocol::desk::Ended;
use ralph_protocol::desk::Submitted;

mod agent;
mod delivery;
pub mod logs;
mod questions;
mod recovery;
mod save;
mod task_file;
mod verify;

use delivery::Delivery;
use recovery::{KilledRun, reap_orphaned_agent};

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
    /// How much of `.ralph/logs/` is kept.
    pub log_budget: logs::LogBudget,
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
            log_budget: logs::LogBudget::default(),
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
    /// How the agent was chosen, recorded in `state.json` for a later run to resume with.
    pub agent_choice: Option<AgentChoice>,
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
        "could not start the agent `{command}`: {reason}. Check that the command exists and runs by itself."
    )]
    Spawn {
        /// The command line.
        command: String,
        /// What the OS said; part of the message, not a separate cause, so it is said once.
        reason: std::io::Error,
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

/// What one run of the agent amounted to.
#[derive(Debug, Default)]
struct AgentRun {
    /// The command line `sh -c` was given.
    command: String,
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

    /// Whether the loop goes straight on from this run to the next agent (or to the final
    /// save): no signal to act on, no question, no rate limit to wait out, no interruption.
    ///
    /// After such a run `state.json` is not saved until the next agent starts, a millisecond
    /// later: what it would record (no agent running) matters to nobody in between, and a
    /// crash in that window leaves a process group that the next run finds gone.
    fn leads_straight_on(&self) -> bool {
        self.signals.is_empty()
            && self.rate_limited.is_none()
            && self.asking.is_none()
            && !self.interrupted
    }

    fn failed(&self) -> bool {
        self.timed_out || self.exit.is_some_and(|s| !s.success()) && self.signals.is_empty()
    }

    /// Why the agent's command could not be started, when that is how this run ended: `sh`
    /// exits 127 for a command not found and 126 for one it cannot execute. Asked of the
    /// first run only: an agent that once ran may exit 127 for reasons of its own.
    fn not_runnable(&self) -> Option<String> {
        if !self.signals.is_empty() || self.interrupted || self.timed_out {
            return None;
        }
        let program = self.command.split_whitespace().next().unwrap_or("");
        let program = program.trim_matches(|c| c == '\'' || c == '"');
        let what = match self.exit?.code()? {
            127 => "was not found",
            126 => "was found but cannot be run (not executable, or not a program)",
            _ => return None,
        };
        Some(format!(
            "the agent's command {what}: `{program}` (the first word of `{}`; exit {} from sh). Check --agent-cmd or agent: in the task file, and PATH",
            self.command,
            self.exit?.code()?
        ))
    }
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
    /// `ralph ask` claims already shown (by `asked_at`), so each is asked once.
    asks_seen: std::collections::HashSet<String>,
    /// The guard that stops the running group if ralph is killed outright, when there is one.
    guard: Option<Guard>,
    /// The last run, when it was killed with a group running: that group was stopped as
    /// this run started, and what it left outside it is stopped before anything else (see
    /// [`Runner::stop_what_the_killed_run_left`]).
    killed_run: Option<KilledRun>,
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
        // Before anything is written: a state file that cannot be read stops the run, naming
        // it. Taken for no state, it would be overwritten, and with it the question it records
        // as waiting, the answers it closed, and the agent group to reap.
        let previous = State::load(&ws)?;
        let log_run = logs::next_run(&ws.logs());
        logs::prune(&ws.logs(), log_run, 1, cfg.settings.log_budget);
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

        let mut first_iteration = 1;
        let mut resume_question = None;
        let mut killed_run = None;
        if let Some(prev) = &previous {
            // The lock was free, so a run that says it is still going was killed: with a group
            // running, or with none (waiting for an answer, its `notify_command` perhaps still
            // running, which carries the run's id too).
            let killed = matches!(prev.status, Status::Running | Status::WaitingInput);
            if prev.agent_pgid.is_some() || killed {
                killed_run = Some(KilledRun {
                    id: prev.run_id.clone(),
                    iteration: prev.iteration,
                    group: prev
                        .agent_pgid
                        .filter(|&pgid| reap_orphaned_agent(pgid, ws.dir())),
                });
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
            run_id: Some(orphans::run_id().to_string()),
            root: ws.root().display().to_string(),
            task: cfg.task.task.lines().next().unwrap_or("").to_string(),
            agent: cfg.agent.name.clone(),
            agent_choice: cfg.agent_choice.clone(),
            started_at: timestamp(now),
            updated_at: timestamp(now),
            pending_question: pending_from_before,
            last_signal: None,
            reason: None,
            total_cost_usd: previous.as_ref().and_then(|p| p.total_cost_usd),
            closed_questions: previous
                .as_ref()
                .map(|p| p.closed_questions.clone())
                .unwrap_or_default(),
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
            lock: Arc::new(lock),
            state_saving: None,
            prompt_spare: None,
            log_run,
            log_attempt: (0, 0),
            task_seen: None,
            last_sweep: None,
            carryover: Vec::new(),
            delivering: None,
            first_iteration,
            resume_question,
            notifier,
            _registration: registration,
            session_id: None,
            resume_next: false,
            resume_failed: false,
            asks_seen: std::collections::HashSet::new(),
            guard: None,
            killed_run,
        })
    }

    /// Has `guard` stop the group running when ralph is killed outright (see
    /// [`guard`](crate::guard)). Without one, only the next `ralph run` stops such a group.
    pub fn set_guard(&mut self, guard: Guard) {
        self.guard = Some(guard);
    }

    /// `.ralph/`, for the guard to know which groups are this loop's.
    pub fn ralph_dir(&self) -> &Path {
        self.ws.dir()
    }

    /// A group (the agent's, or `test_command`'s) was started: recorded in `state.json` for
    /// the next run, and told to the guard.
    fn group_started(&mut self, pgid: i32) {
        self.state.agent_pgid = Some(pgid);
        if let Some(guard) = &mut self.guard {
            guard.started(pgid, self.cfg.settings.kill_grace);
        }
    }

    /// The group started last is gone, or was stopped.
    fn group_ended(&mut self) {
        if let (Some(pgid), Some(guard)) = (self.state.agent_pgid.take(), &mut self.guard) {
            guard.ended(pgid);
        }
    }

    /// This loop's mark (`RALPH_DIR=...`), as it stands in the environment of every agent and
    /// test command it starts, and of all they start.
    fn mark(&self) -> Vec<u8> {
        orphans::mark_of(self.ws.dir())
    }

    /// Tells what a [`orphans::sweep`] after the `what` (agent or tests) of `iteration` did,
    /// when it stopped anything.
    async fn report_swept(&self, swept: orphans::Swept, iteration: u32, what: &str) {
        // After every agent run and test run: nothing to say, nothing to format.
        if swept.how.is_none() {
            return;
        }
        let whose = format!("the {what} started outside its process group");
        self.report_stopped(swept, iteration, what, &whose).await;
    }

    /// Tells what `swept` stopped, when it stopped anything: "N processes `whose` were
    /// stopped", and `escapees_stopped` in `events.jsonl`, `from` the agent or the tests of
    /// `iteration` (or the last run).
    async fn report_stopped(&self, swept: orphans::Swept, iteration: u32, from: &str, whose: &str) {
        let Some(how) = swept.how else {
            return;
        };
        let n = swept.stopped.len();
        let msg = format!(
            "{n} process{} {whose} {} stopped ({how:?})",
            if n == 1 { "" } else { "es" },
            if n == 1 { "was" } else { "were" },
        );
        self.emit(LoopEvent::Note(msg)).await;
        self.log(
            "escapees_stopped",
            json!({"iteration": iteration, "from": from, "count": n, "pids": swept.stopped, "how": format!("{how:?}"), "reaped": swept.reaped}),
        );
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
        let mut first_run = true;
        let mut rate_limit_streak = 0u32;
        let mut iteration = self.first_iteration;
        while iteration <= max {
            self.cleanup_before_iteration().await?;
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

    /// Step 1: clear what a crash may have left, and pick up an answer that is waiting.
    async fn cleanup_before_iteration(&mut self) -> Result<(), RunError> {
        // Only files older than ten minutes go, so looking once a minute removes the same ones
        // barely later, without listing `.ralph/` (and waking its watcher) every iteration.
        let sweep = self
            .last_sweep
            .is_none_or(|at| at.elapsed() >= Duration::from_secs(60));
        // `logs/` only once, before this run made any: a temporary file there is a prompt file
        // made ahead of time (`workspace::SpareFile`), and only a crashed run leaves one.
        let logs_too = self.last_sweep.is_none();
        if sweep && let Ok(entries) = std::fs::read_dir(self.ws.dir()) {
            self.last_sweep = Some(std::time::Instant::now());
            let pruned = logs::prune(
                &self.ws.logs(),
                self.log_run,
                self.state.iteration,
                self.cfg.settings.log_budget,
            );
            if pruned.files > 0 {
                self.log(
                    "logs_pruned",
                    json!({"files": pruned.files, "bytes": pruned.bytes}),
                );
            }
            let logs = logs_too
                .then(|| std::fs::read_dir(self.ws.logs()).ok())
                .flatten()
                .into_iter()
                .flatten();
            // A claim left by a `ralph ask` that is gone (killed with its agent). A file event
            // while an agent runs also clears it (`notice_ask`), but an agent may end before
            // one arrives.
            if AskClaim::read(&self.ws).is_some_and(|claim| crate::asks::claim_is_stale(&claim)) {
                workspace::remove(&self.ws.ask_claim())?;
            }
            for entry in entries.chain(logs).flatten() {
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
        self.pick_up_answer().await
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
    /// Whether its answer is for the iteration after the one running (or just ended), whose
    /// end must not archive it.
    for_next: bool,
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

pub use ralph_protocol::text::shell_quote;

/// What marks every agent and test command, and all they start, as this loop's
/// (`RALPH_DIR`: the next run's check, the sweep) and this run's (`RALPH_RUN`: the guard).
fn marks(dir: &std::path::Path) -> [(&'static str, String); 2] {
    [
        ("RALPH_DIR", orphans::ralph_dir_value(dir)),
        (orphans::RUN_VAR, orphans::run_id().to_string()),
    ]
}

/// The environment an agent runs with, on top of ralph's own.
fn agent_env(
    ws: &Workspace,
    task_path: &std::path::Path,
    iteration: u32,
    prompt_path: &std::path::Path,
) -> Vec<(String, String)> {
    let abs = |p: &std::path::Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let mut env: Vec<(String, String)> = marks(ws.dir())
        .into_iter()
        .map(|(name, value)| (name.to_string(), value))
        .collect();
    env.extend([
        ("RALPH_ITERATION".to_string(), iteration.to_string()),
        (
            "RALPH_TASK_FILE".to_string(),
            abs(task_path).display().to_string(),
        ),
        (
            "RALPH_PROMPT_FILE".to_string(),
            abs(prompt_path).display().to_string(),
        ),
    ]);
    // So the agent can run `ralph ask` even when ralph is not on its PATH. Looked up once: the
    // path stays right if the binary is replaced while the loop runs (the link would then end
    // in " (deleted)").
    static EXE: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    if let Some(exe) = EXE.get_or_init(|| std::env::current_exe().ok()) {
        env.push(("RALPH_BIN".to_string(), exe.display().to_string()));
        if let Some(dir) = exe.parent() {
            let path = std::env::var("PATH").unwrap_or_default();
            env.push(("PATH".to_string(), format!("{}:{path}", dir.display())));
        }
    }
    env
}

/// Watches `.ralph/` and sends a wake-up for every change to the question, the answer, a
/// `ralph ask` claim or a request from `ralph serve` (skip, extend); the runner then looks at the files. The loop's own writes there (state,
/// events) do not wake it ([`crate::watch`]).
fn watch_dir(
    dir: &std::path::Path,
    tx: mpsc::UnboundedSender<()>,
) -> Result<crate::watch::DirWatch, RunError> {
    crate::watch::watch_async(
        dir,
        &[
            "answer.md",
            "question.md",
            "ask.json",
            crate::broker::REQUEST_FILE,
        ],
        tx,
    )
    .map_err(|e| RunError::Watch {
        path: dir.to_path_buf(),
        message: e.to_string(),
    })
}
