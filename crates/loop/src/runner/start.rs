//! Starting a run: the lock, `.ralph/`, what the previous run left, the watch on the question
//! files.

use ralph_process::run_id;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use ralph_process::Guard;
use serde_json::json;

use ralph_protocol::{Control, LoopEvent, State, Status, register, timestamp, write_atomic};
use tokio::sync::mpsc;

use super::Runner;
use super::controls::Controls;
use super::error::RunError;
use super::io::Io;
use super::processes::{KilledRun, Processes};
use super::questions::Questions;
use super::record::Record;
use super::recovery::reap_orphaned_agent;
use super::session::Session;
use super::settings::RunConfig;
use crate::logs;
use crate::notify::{Notifier, NotifyConfig};
use crate::prompt::Carryover;

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
        let desk_ws = ws.clone();
        let sent_back = cfg.sent_back.clone();
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
                write_atomic(&path, initial.as_bytes())?;
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
        let registration = register(ws.root()).ok();
        let now = SystemTime::now();
        let state = State {
            status: Status::Running,
            iteration: first_iteration.saturating_sub(1),
            max_iterations: cfg.settings.max_iterations,
            pid: std::process::id(),
            agent_pgid: None,
            run_id: Some(run_id().to_string()),
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
            checkpoint: previous.as_ref().and_then(|p| p.checkpoint.clone()),
            done_task: None,
            rate_limited_until: None,
            agent_session: None,
        };
        let shared = super::shared::Shared {
            // The agent runs with ralph's environment: what picks its account is here.
            key: crate::budget::agent_key(&cfg.agent, |name| std::env::var(name).ok()),
            limits_dir: ralph_protocol::budget::limits::limits_dir().ok(),
            fleet: cfg.fleet.clone(),
            recorded_spend: None,
        };
        Ok(Runner {
            cfg,
            ws,
            state,
            io: Io {
                events,
                controls: Controls::new(controls),
                fs_events,
                _watcher: watcher,
            },
            record: Record {
                lock: Arc::new(lock),
                state_saving: None,
                log_run,
                log_attempt: (0, 0),
                prompt_spare: None,
                task_seen: None,
                last_sweep: None,
                _registration: registration,
                shared,
            },
            session: Session {
                first_iteration,
                // A loop sent back by `ralph land`: its first iteration is told what failed,
                // in the agent's last session when it can resume one.
                carryover: sent_back
                    .iter()
                    .map(|s| Carryover::LandingFailed {
                        what: s.failure.clone(),
                    })
                    .collect(),
                resume_next: sent_back.as_ref().is_some_and(|s| s.session.is_some()),
                id: sent_back.and_then(|s| s.session),
            },
            questions: Questions {
                desk: ralph_protocol::Desk::new(desk_ws),
                delivering: None,
                asks_seen: std::collections::HashSet::new(),
                resume: resume_question,
                notifier,
            },
            processes: Processes {
                guard: None,
                killed_run,
                left: None,
                sandbox: None,
                ready: None,
            },
        })
    }

    /// Has `guard` stop the group running when ralph is killed outright (see
    /// [`guard`](ralph_process::Guard)). Without one, only the next `ralph run` stops such a group.
    pub fn set_guard(&mut self, guard: Guard) {
        self.processes.guard = Some(guard);
    }

    /// Runs every agent of this run in `sandbox` (see [`crate::sandbox`]); without one, the
    /// agent runs as ralph does.
    pub fn set_sandbox(&mut self, sandbox: crate::sandbox::Sandbox) {
        self.processes.sandbox = Some(sandbox);
    }

    /// The lines ralph adds for what the sandbox refused the agent, from a piece of its output
    /// (`stderr`, or stdout); see [`crate::sandbox::Sandbox::denials`].
    pub(super) async fn note_denials(&mut self, stderr: bool, bytes: &[u8]) {
        let Some(sandbox) = self.processes.sandbox.as_mut() else {
            return;
        };
        for line in sandbox.denials(stderr, bytes) {
            self.log(
                "sandbox_denied",
                json!({"iteration": self.state.iteration, "line": line}),
            );
            self.emit(LoopEvent::Warning(line)).await;
        }
    }

    /// `.ralph/`, for the guard to know which groups are this loop's.
    pub fn ralph_dir(&self) -> &Path {
        self.ws.dir()
    }
}

/// Watches `.ralph/` and sends a wake-up for every change to the question, the answer, a
/// `ralph ask` claim or a request from `ralph serve` (skip, extend); the runner then looks at
/// the files. The loop's own writes there (state, events) do not wake it ([`ralph_process::DirWatch`]).
fn watch_dir(
    dir: &std::path::Path,
    tx: mpsc::UnboundedSender<()>,
) -> Result<ralph_process::DirWatch, RunError> {
    const FILES: [&str; 4] = [
        "answer.md",
        "question.md",
        "ask.json",
        ralph_protocol::REQUEST_FILE,
    ];
    ralph_process::watch_async(dir, &FILES, tx).map_err(|e| RunError::Watch {
        path: dir.to_path_buf(),
        message: e.to_string(),
    })
}
