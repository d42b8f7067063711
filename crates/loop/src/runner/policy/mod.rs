//! What an iteration's end means: the loop's decisions, as one pure function.
//!
//! [`decide`] is told what happened in an iteration ([`Facts`]) and what the run has seen so
//! far ([`Tally`]), and answers with the one thing to do next ([`Next`]). Some answers are
//! work the runner does and reports back (verify DONE, ask the human, wait for a question
//! whose asker is gone): the runner fills in the matching fact and asks again, until the
//! answer is to go on to the next iteration, to retry this one, or to stop. The runner does
//! the work and the logging; every decision is here, and tested without a process.

use std::process::ExitStatus;
use std::time::{Duration, SystemTime};

use ralph_protocol::Outcome;

use crate::prompt::Carryover;

/// How one run of the agent ended, first match wins: a human's stop outranks a timeout,
/// which outranks how the process then exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AgentEnd {
    /// The human stopped the loop (Ctrl-C, SIGTERM, SIGHUP) while the agent ran.
    Interrupted,
    /// The agent ran past `iteration_timeout` and was stopped.
    TimedOut,
    /// The agent's process exited on its own.
    Exited(ExitStatus),
    /// The agent's exit status could not be read (its process was killed to be sure).
    Lost,
}

/// Signals the agent gave in one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Signals {
    /// DONE: the agent says the task is finished.
    pub(crate) done: bool,
    /// QUESTION: the agent wrote `.ralph/question.md` and waits for an answer.
    pub(crate) question: bool,
    /// GUTTER: the agent is stuck and asks to stop.
    pub(crate) gutter: bool,
}

impl Signals {
    /// Whether the agent gave any signal at all.
    pub(crate) fn any(self) -> bool {
        self.done || self.question || self.gutter
    }
}

pub(crate) use super::rate_limit::RateLimit;

/// How checking a DONE came out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Every criterion is checked and the test command (if any) passed.
    Accepted(String),
    /// Some criteria are still open; the reason lists them.
    OpenCriteria(String),
    /// The test command failed, timed out or could not start; the reason says how.
    TestsFailed(String),
    /// The human stopped the loop while the tests ran.
    Interrupted,
}

impl Verdict {
    /// Accepted, and the reason in words, as the front end and the event log show it.
    pub(crate) fn shown(&self) -> Option<(bool, &str)> {
        match self {
            Verdict::Accepted(r) => Some((true, r)),
            Verdict::OpenCriteria(r) | Verdict::TestsFailed(r) => Some((false, r)),
            Verdict::Interrupted => None,
        }
    }
}

/// A question the agent left open when its run ended (a `ralph ask` whose agent was killed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LeftQuestion {
    /// No question was left open.
    None,
    /// One was, and has not been waited on yet.
    Open,
    /// It was waited on; `Some` when that wait ended the run.
    Closed(Option<Outcome>),
}

/// What happened in one iteration, as far as the loop knows it so far.
#[derive(Debug, Clone)]
pub(crate) struct Facts {
    /// The iteration's number (from 1).
    pub(crate) iteration: u32,
    /// How the agent's run ended.
    pub(crate) end: AgentEnd,
    /// What the agent signalled.
    pub(crate) signals: Signals,
    /// A rate limit the agent reported, if any.
    pub(crate) rate_limit: Option<RateLimit>,
    /// When the run ended, for a rate limit's stated reset.
    pub(crate) now: SystemTime,
    /// Added after a stated reset, so that loops limited together do not retry as one.
    pub(crate) jitter: Duration,
    /// A resume of the agent's session that did not take: not the agent's failure.
    pub(crate) resume_failed: bool,
    /// Why the agent's command could not be started, when exit status 126/127 says so.
    pub(crate) not_runnable: Option<String>,
    /// How the run ended, in words ("exited with status 1").
    pub(crate) how: String,
    /// What the agent has cost so far, in US dollars, when it reports cost.
    pub(crate) spent_usd: Option<f64>,
    /// The question the agent left open, and what came of it.
    pub(crate) left_question: LeftQuestion,
    /// Whether the iteration has been recorded (its delivered answer archived).
    pub(crate) recorded: bool,
    /// The DONE check, once made.
    pub(crate) verdict: Option<Verdict>,
    /// The QUESTION's wait, once over; `Some(Some(_))` when it ended the run.
    pub(crate) asked: Option<Option<Outcome>>,
}

impl Facts {
    /// The facts of a run before the runner has acted on any of them.
    pub(crate) fn new(iteration: u32, end: AgentEnd, how: String) -> Self {
        Facts {
            iteration,
            end,
            signals: Signals::default(),
            rate_limit: None,
            now: SystemTime::UNIX_EPOCH,
            jitter: Duration::ZERO,
            resume_failed: false,
            not_runnable: None,
            how,
            spent_usd: None,
            left_question: LeftQuestion::None,
            recorded: false,
            verdict: None,
            asked: None,
        }
    }

    /// Whether the agent's run failed: it timed out, or it exited unsuccessfully without
    /// signalling anything.
    pub(crate) fn failed(&self) -> bool {
        match self.end {
            AgentEnd::TimedOut => true,
            AgentEnd::Exited(status) => !status.success() && !self.signals.any(),
            AgentEnd::Interrupted | AgentEnd::Lost => false,
        }
    }

    /// DONE and QUESTION in one turn: the question comes first, DONE is set aside.
    pub(crate) fn done_set_aside(&self) -> bool {
        self.signals.done && self.signals.question
    }
}

/// What the run has seen across iterations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tally {
    /// Failed agent runs in a row.
    pub(crate) failures: u32,
    /// Rate limits in a row (each wait doubles).
    pub(crate) rate_limits: u32,
    /// No iteration has ended yet in this run (126/127 means "not runnable" only then).
    pub(crate) first_run: bool,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            failures: 0,
            rate_limits: 0,
            first_run: true,
        }
    }
}

/// The run's limits, from the task file and the command line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Limits {
    /// `max_iterations`.
    pub(crate) max_iterations: u32,
    /// `max_consecutive_failures`.
    pub(crate) max_failures: u32,
    /// `max_cost_usd`, when set.
    pub(crate) max_cost_usd: Option<f64>,
}

/// What the runner does next.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Next {
    /// Wait for the answer to the question the agent left open (then set
    /// [`Facts::left_question`] to `Closed`).
    AwaitLeftQuestion,
    /// Record the iteration: archive the answer it was given when `archive_answer` (a resume
    /// that failed did not deliver it, nor did an iteration cut short by Ctrl-C), and show
    /// the criteria's progress (then set [`Facts::recorded`]).
    Record {
        /// Whether the answer this iteration started with counts as delivered.
        archive_answer: bool,
    },
    /// Check DONE: criteria, then the test command (then set [`Facts::verdict`]).
    Verify,
    /// Show the agent's question and wait for its answer (then set [`Facts::asked`]).
    Ask,
    /// Wait out a rate limit, then run the same iteration again.
    BackOff {
        /// How long to wait.
        wait: Duration,
        /// The agent's words about the limit.
        message: String,
        /// The tally to go on with.
        tally: Tally,
    },
    /// Go on to the next iteration.
    Continue {
        /// What the next prompt is told about this iteration.
        carry: Vec<Carryover>,
        /// The tally to go on with.
        tally: Tally,
    },
    /// End the run.
    Stop(Stop),
}

/// How a run ends, and why.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Stop {
    /// How it ended.
    pub(crate) outcome: Outcome,
    /// Why, in words, for `state.json`, the log and the front end.
    pub(crate) reason: String,
}

fn stop(outcome: Outcome, reason: impl Into<String>) -> Next {
    Next::Stop(Stop {
        outcome,
        reason: reason.into(),
    })
}

/// The stop when a question's wait ends the run.
pub(crate) fn question_stop(outcome: Outcome) -> Stop {
    let reason = match outcome {
        Outcome::QuestionTimeoutStop => {
            "a question timed out and on_question_timeout is `stop`; it is kept for the next run"
        }
        _ => "stopped while a question was waiting",
    };
    Stop {
        outcome,
        reason: reason.into(),
    }
}

/// The stop when `max_iterations` ran out (also before the first iteration of a resumed run).
pub(crate) fn out_of_iterations(max: u32) -> Stop {
    Stop {
        outcome: Outcome::MaxIterations,
        reason: format!("max_iterations ({max}) reached without a verified DONE"),
    }
}

/// The stop when the human stops the loop while it waits out a rate limit.
pub(crate) fn interrupted_backing_off() -> Stop {
    Stop {
        outcome: Outcome::Interrupted,
        reason: "interrupted while backing off".into(),
    }
}

/// Whether the next thing the human sees of this run is a question: the agent's QUESTION, or a
/// `ralph ask` it left open. Recording the run comes first either way, and nothing the limits
/// or the tally say is looked at before the question is.
///
/// What the agent left behind is then stopped while the question waits rather than before it
/// is shown: its grace (a process that ignores SIGTERM) and the portable backend's walk of the
/// process table would otherwise hold the question up.
pub(crate) fn question_next(facts: &Facts) -> bool {
    let recorded = Facts {
        recorded: true,
        ..facts.clone()
    };
    let unlimited = Limits {
        max_iterations: u32::MAX,
        max_failures: u32::MAX,
        max_cost_usd: None,
    };
    matches!(
        decide(&recorded, Tally::default(), &unlimited),
        Next::Ask | Next::AwaitLeftQuestion
    )
}

/// The stop when the human stops the loop while what an agent left is still being stopped.
pub(crate) fn interrupted_stopping_leftovers() -> Stop {
    Stop {
        outcome: Outcome::Interrupted,
        reason: "interrupted while stopping what the agent left running".into(),
    }
}

/// What to do next after an iteration, given what is known of it so far.
pub(crate) fn decide(facts: &Facts, tally: Tally, limits: &Limits) -> Next {
    let interrupted = facts.end == AgentEnd::Interrupted;
    match &facts.left_question {
        // Kept pending in state.json: the next `ralph run` shows it again.
        LeftQuestion::Open if interrupted => {
            return stop(
                Outcome::Interrupted,
                "interrupted while a question was waiting",
            );
        }
        // The agent that asked is gone; its question still deserves an answer, which the
        // next iteration gets.
        LeftQuestion::Open => return Next::AwaitLeftQuestion,
        LeftQuestion::Closed(Some(outcome)) => {
            return stop(outcome.clone(), "stopped while a question was waiting");
        }
        LeftQuestion::Closed(None) | LeftQuestion::None => {}
    }
    if !facts.recorded {
        return Next::Record {
            archive_answer: !facts.resume_failed && !interrupted,
        };
    }
    if interrupted {
        return stop(Outcome::Interrupted, "interrupted");
    }
    if let Some(limit) = &facts.rate_limit
        && !facts.signals.any()
    {
        // Not the agent's failure and not an iteration's worth of work: wait, then run the
        // same iteration again: until a stated reset, else doubling while the limit lasts
        // (see `rate_limit`).
        let (wait, message) = limit.wait(tally.rate_limits, facts.now, facts.jitter);
        return Next::BackOff {
            wait,
            message,
            tally: Tally {
                rate_limits: tally.rate_limits + 1,
                ..tally
            },
        };
    }
    if facts.signals.gutter {
        return stop(
            Outcome::Gutter,
            "the agent signalled GUTTER: it is stuck and asked to stop",
        );
    }
    let mut carry = Vec::new();
    // QUESTION wins over DONE in the same turn: an agent that still asks is not sure it is
    // done, and checking DONE first would end the run with the question unseen. The answer
    // goes to the next iteration, which signals DONE again if it still is.
    if facts.signals.done && !facts.signals.question {
        match &facts.verdict {
            None => return Next::Verify,
            Some(Verdict::Interrupted) => {
                return stop(Outcome::Interrupted, "interrupted while the tests ran");
            }
            Some(Verdict::Accepted(_)) => return stop(Outcome::Done, "DONE verified"),
            Some(Verdict::OpenCriteria(reason) | Verdict::TestsFailed(reason)) => {
                carry.push(Carryover::Rejected {
                    reason: reason.clone(),
                });
            }
        }
    }
    if facts.signals.question {
        match &facts.asked {
            None => return Next::Ask,
            Some(Some(outcome)) => return Next::Stop(question_stop(outcome.clone())),
            Some(None) => {}
        }
    }
    if tally.first_run
        && let Some(reason) = &facts.not_runnable
    {
        return stop(Outcome::AgentNotRunnable, reason.clone());
    }
    let failures = if facts.resume_failed {
        // Not counted: the fallback iteration is what matters.
        tally.failures
    } else if facts.failed() {
        let failures = tally.failures + 1;
        carry.push(Carryover::AgentFailed {
            how: format!("It {}", facts.how),
        });
        if failures >= limits.max_failures {
            return stop(
                Outcome::TooManyFailures,
                format!(
                    "the agent failed {failures} times in a row (max_consecutive_failures); last: it {}",
                    facts.how
                ),
            );
        }
        failures
    } else {
        0
    };
    if let (Some(limit), Some(spent)) = (limits.max_cost_usd, facts.spent_usd)
        && spent > limit
    {
        return stop(
            Outcome::CostLimit,
            format!("the agent has cost ${spent:.2}, past max_cost_usd (${limit:.2})"),
        );
    }
    if facts.iteration >= limits.max_iterations {
        return Next::Stop(out_of_iterations(limits.max_iterations));
    }
    Next::Continue {
        carry,
        tally: Tally {
            failures,
            rate_limits: 0,
            first_run: false,
        },
    }
}

#[cfg(test)]
mod tests;
