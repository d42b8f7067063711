//! The messages between the loop and whatever shows it (plain lines or the terminal UI).
//!
//! The loop sends [`LoopEvent`]s and receives [`Control`]s, over channels. Neither side shares
//! state with the other: the UI keeps what it displays, updated from events. The question's
//! [`Countdown`] is the loop's alone: a front end asks for a pause or more time with a
//! [`Control`], and shows the countdown the loop sends back ([`LoopEvent::Countdown`]).

use std::time::{Duration, Instant, SystemTime};

use ralph_signal::{AgentEvent, Signal};

use crate::countdown::{Countdown, EXTEND_BY};
use crate::desk::Ended;
use crate::question::Question;
use crate::state::{RaisedBy, Status};

/// How a run of the loop ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// DONE was signalled, every criterion is checked and the test command passed.
    Done,
    /// The agent signalled GUTTER: it is stuck.
    Gutter,
    /// `max_iterations` ran out first.
    MaxIterations,
    /// Too many agent runs in a row failed.
    TooManyFailures,
    /// The agent's command could not be started at all (not found, or not executable): a
    /// configuration error, which no number of retries mends.
    AgentNotRunnable,
    /// The agent's reported cost passed `max_cost_usd`.
    CostLimit,
    /// A question timed out under the `stop` policy; the question is kept for the next run.
    QuestionTimeoutStop,
    /// Ctrl-C, SIGTERM or SIGHUP.
    Interrupted,
    /// The loop runs in a worktree of its own and the user's checkout changed while the agent
    /// ran: it stopped before anything more happened there.
    CheckoutTouched,
}

impl Outcome {
    /// The process exit code documented in `ralph --help` and the README.
    pub fn exit_code(&self) -> i32 {
        match self {
            Outcome::Done => 0,
            Outcome::Gutter
            | Outcome::TooManyFailures
            | Outcome::CostLimit
            | Outcome::QuestionTimeoutStop
            | Outcome::CheckoutTouched => 1,
            Outcome::MaxIterations => 3,
            Outcome::AgentNotRunnable => 2,
            Outcome::Interrupted => 130,
        }
    }

    /// The final status written to `state.json`.
    pub fn status(&self) -> Status {
        match self {
            Outcome::Done => Status::Done,
            Outcome::Gutter
            | Outcome::TooManyFailures
            | Outcome::CostLimit
            | Outcome::AgentNotRunnable
            | Outcome::CheckoutTouched => Status::Failed,
            Outcome::MaxIterations => Status::MaxIterations,
            Outcome::QuestionTimeoutStop | Outcome::Interrupted => Status::Stopped,
        }
    }
}

/// Something the loop wants shown.
#[derive(Debug, Clone)]
pub enum LoopEvent {
    /// The run began.
    Started {
        /// The task's summary.
        task: String,
        /// The agent's name.
        agent: String,
        /// The iteration limit.
        max_iterations: u32,
        /// Criteria checked / total at the start.
        criteria: (usize, usize),
    },
    /// An iteration is starting.
    IterationStarted {
        /// 1-based.
        iteration: u32,
        /// The limit.
        max_iterations: u32,
        /// When it started.
        at: Instant,
        /// Its time limit, if any.
        timeout: Option<Duration>,
    },
    /// Something the agent printed or did, decoded from its stdout.
    Agent(AgentEvent),
    /// Several such things, in order: what one read of the agent's output decoded to. One
    /// message per read instead of per line keeps a flood of output cheap.
    AgentBatch(Vec<AgentEvent>),
    /// A line the agent printed on stderr (control sequences already stripped).
    Stderr(String),
    /// A signal was recognised.
    Signal(Signal),
    /// An iteration ended.
    IterationEnded {
        /// 1-based.
        iteration: u32,
        /// How the agent process ended, in words.
        how: String,
        /// How long it ran.
        elapsed: Duration,
    },
    /// The test command started, for a DONE.
    TestsStarted {
        /// The command.
        command: String,
    },
    /// The test command still runs (sent every second while it does).
    TestsProgress {
        /// How long it has run, in whole seconds.
        elapsed: Duration,
        /// The last line it printed, sanitized, if any.
        last_line: Option<String>,
    },
    /// DONE was judged.
    Verdict {
        /// Whether DONE was accepted.
        accepted: bool,
        /// Why (open criteria, test result).
        reason: String,
    },
    /// Criteria checked / total changed.
    Criteria {
        /// Checked.
        checked: usize,
        /// Total.
        total: usize,
    },
    /// A question is waiting for an answer.
    QuestionAsked {
        /// The question.
        question: Question,
        /// The loop's countdown at the moment of asking.
        countdown: Countdown,
        /// When it was first asked (earlier than now when re-presented after a restart).
        asked_at: SystemTime,
        /// How it was raised.
        raised_by: RaisedBy,
        /// The iteration that asked.
        iteration: u32,
    },
    /// The waiting question's answer link, when `ralph serve` runs: the page that answers it
    /// from a phone. Sent after [`LoopEvent::QuestionAsked`]; the same link the notifications
    /// carry.
    AnswerLink(String),
    /// The question's countdown changed (extended, or paused while the human types): the
    /// loop's, the one a front end shows. Sent after every [`Control::Typing`] and
    /// [`Control::Extend`], and for an extension asked from elsewhere.
    Countdown(Countdown),
    /// The wait for an answer ended, and how. Under the `stop` timeout policy a timeout is
    /// [`Ended::Interrupted`]: the loop stops and the question stays for the next run.
    QuestionClosed(Ended),
    /// An answer typed inline was not taken (for example: empty).
    AnswerRefused {
        /// Why.
        reason: String,
    },
    /// Something worth a line: a warning about the task file, a lost question, a kill.
    Warning(String),
    /// A neutral note for the log view.
    Note(String),
    /// The agent was rate limited: the loop waits, then retries the same iteration.
    Backoff {
        /// When the retry starts.
        until: Instant,
        /// Why, in the agent's words.
        reason: String,
    },
    /// The run ended.
    Finished {
        /// How.
        outcome: Outcome,
        /// Why, in one line.
        reason: String,
    },
}

/// Something the human (through a front end) or a signal handler asks of the loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// The answer to the waiting question.
    Answer(String),
    /// Skip the waiting question: the agent decides.
    Skip,
    /// The human is typing an answer: hold the countdown.
    Typing,
    /// Add [`EXTEND_BY`] to the deadline.
    Extend,
    /// Stop gracefully: SIGTERM to the agent, grace, save state (first Ctrl-C).
    Stop,
    /// Stop now: SIGKILL to the agent (second Ctrl-C).
    Kill,
}

impl Control {
    /// What the loop does to its question's countdown on this control, at `now`:
    /// [`Control::Typing`] holds it, [`Control::Extend`] adds [`EXTEND_BY`]; the others leave
    /// it. Whether it was one of those two.
    pub fn change_countdown(&self, countdown: &mut Countdown, now: Instant) -> bool {
        match self {
            Control::Typing => countdown.typing(now),
            Control::Extend => countdown.extend(EXTEND_BY, now),
            Control::Answer(_) | Control::Skip | Control::Stop | Control::Kill => return false,
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_typing_and_extend_change_the_countdown() {
        let t0 = Instant::now();
        let start = Countdown::new(Some(Duration::from_secs(60)), t0);
        let now = t0 + Duration::from_secs(10);
        for control in [
            Control::Answer("Redis".into()),
            Control::Skip,
            Control::Stop,
            Control::Kill,
        ] {
            let mut c = start.clone();
            assert!(!control.change_countdown(&mut c, now), "{control:?}");
            assert_eq!(c, start, "{control:?}");
        }
        let mut c = start.clone();
        assert!(Control::Typing.change_countdown(&mut c, now));
        assert!(c.is_paused(now));
        let mut c = start;
        assert!(Control::Extend.change_countdown(&mut c, now));
        assert_eq!(c.remaining(now), Some(Duration::from_secs(350)));
    }
}
