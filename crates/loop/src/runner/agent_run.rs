//! [`AgentRun`]: what one run of the agent amounted to, as the runner gathered it while the
//! agent streamed, and as [`policy`](super::policy) is told it.

use std::process::ExitStatus;
use std::time::Duration;

use ralph_process::describe_exit;
use ralph_signal::SignalKind;

use super::policy::{AgentEnd, Facts, LeftQuestion, RateLimit, Signals};
use super::questions::Open;
use super::settings::{RunSettings, wait_duration};

/// Why ralph cut an agent's run short; a human's stop outranks a timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cut {
    /// It ran past `iteration_timeout`.
    TimedOut,
    /// The human stopped the loop (Ctrl-C, SIGTERM, SIGHUP).
    Interrupted,
}

/// What one run of the agent amounted to.
#[derive(Debug, Default)]
pub(super) struct AgentRun {
    /// The command line `sh -c` was given.
    pub(super) command: String,
    /// The signals the agent gave, in order.
    pub(super) signals: Vec<SignalKind>,
    /// The leader's exit status, once reaped (`None` if waiting on it failed).
    pub(super) exit: Option<ExitStatus>,
    /// Why ralph cut the run short, if it did.
    pub(super) cut: Option<Cut>,
    /// A `ralph ask` question still open when the agent ended (it was killed while asking).
    pub(super) asking: Option<Open>,
    /// The agent's session id, when its stream reports one.
    pub(super) session_id: Option<String>,
    /// Errors the agent reported (API errors, failed resumes).
    pub(super) errors: Vec<String>,
    /// Requests from the agent not yet answered (`control_request` lines).
    pub(super) requests: Vec<String>,
    /// The agent said its turn is over.
    pub(super) turn_ended: bool,
    /// The agent reported a rate limit (how long it suggests waiting, and its words).
    pub(super) rate_limited: Option<RateLimit>,
    /// This run resumed the agent's session and the resume did not take.
    pub(super) resume_failed: bool,
}

impl AgentRun {
    /// Whether the agent gave signal `kind`.
    pub(super) fn saw(&self, kind: SignalKind) -> bool {
        self.signals.contains(&kind)
    }

    /// How the run ended, as one value.
    pub(super) fn end(&self) -> AgentEnd {
        match (self.cut, self.exit) {
            (Some(Cut::Interrupted), _) => AgentEnd::Interrupted,
            (Some(Cut::TimedOut), _) => AgentEnd::TimedOut,
            (None, Some(status)) => AgentEnd::Exited(status),
            (None, None) => AgentEnd::Lost,
        }
    }

    /// What the loop's policy needs to know of this run.
    pub(super) fn facts(
        &self,
        iteration: u32,
        spent_usd: Option<f64>,
        settings: &RunSettings,
    ) -> Facts {
        Facts {
            signals: Signals {
                done: self.saw(SignalKind::Done),
                question: self.saw(SignalKind::Question),
                gutter: self.saw(SignalKind::Gutter),
            },
            rate_limit: self.rate_limited.clone(),
            now: std::time::SystemTime::now(),
            jitter: super::rate_limit::jitter(),
            resume_failed: self.resume_failed,
            not_runnable: self.not_runnable(),
            spent_usd,
            left_question: match self.asking {
                Some(_) => LeftQuestion::Open,
                None => LeftQuestion::None,
            },
            ..Facts::new(
                iteration,
                self.end(),
                self.describe(wait_duration(settings.iteration_timeout)),
            )
        }
    }

    /// How the run ended, in words for logs and prompts ("exited with status 1").
    pub(super) fn describe(&self, timeout: Option<Duration>) -> String {
        match self.end() {
            AgentEnd::Interrupted => "was stopped (interrupted)".into(),
            AgentEnd::TimedOut => {
                let limit = timeout
                    .map(|t| humantime::format_duration(t).to_string())
                    .unwrap_or_default();
                format!("ran past iteration_timeout ({limit}) and was stopped")
            }
            AgentEnd::Exited(status) => describe_exit(&status),
            AgentEnd::Lost => "ended".into(),
        }
    }

    /// A resumed session that did not take: no signal, and the agent timed out or failed.
    pub(super) fn resume_did_not_take(&self) -> bool {
        self.signals.is_empty()
            && match self.end() {
                AgentEnd::TimedOut => true,
                AgentEnd::Exited(status) => !status.success(),
                AgentEnd::Interrupted | AgentEnd::Lost => false,
            }
    }

    /// Whether the loop goes straight on from this run to the next agent (or to the final
    /// save): no signal to act on, no question, no rate limit to wait out, no interruption.
    ///
    /// After such a run `state.json` is not saved until the next agent starts, a millisecond
    /// later: what it would record (no agent running) matters to nobody in between, and a
    /// crash in that window leaves a process group that the next run finds gone.
    pub(super) fn leads_straight_on(&self) -> bool {
        self.signals.is_empty()
            && self.rate_limited.is_none()
            && self.asking.is_none()
            && self.cut != Some(Cut::Interrupted)
    }

    /// Why the agent's command could not be started, when that is how this run ended: `sh`
    /// exits 127 for a command not found and 126 for one it cannot execute. Asked of the
    /// first run only: an agent that once ran may exit 127 for reasons of its own.
    pub(super) fn not_runnable(&self) -> Option<String> {
        if !self.signals.is_empty() || self.cut.is_some() {
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
