//! The messages between the loop and whatever shows it (plain lines or the terminal UI).
//!
//! The loop sends [`LoopEvent`]s and receives [`Control`]s, over channels. Neither side shares
//! state with the other: the UI keeps its own copy of what it displays (including its own copy
//! of the question's [`Countdown`]), updated from events and from its own key presses.

use std::time::{Duration, Instant, SystemTime};

use ralph_signal::{AgentEvent, Signal};

use crate::countdown::Countdown;
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
    /// The agent's reported cost passed `max_cost_usd`.
    CostLimit,
    /// A question timed out under the `stop` policy; the question is kept for the next run.
    QuestionTimeoutStop,
    /// Ctrl-C, SIGTERM or SIGHUP.
    Interrupted,
}

impl Outcome {
    /// The process exit code documented in `ralph --help` and the README.
    pub fn exit_code(&self) -> i32 {
        match self {
            Outcome::Done => 0,
            Outcome::Gutter
            | Outcome::TooManyFailures
            | Outcome::CostLimit
            | Outcome::QuestionTimeoutStop => 1,
            Outcome::MaxIterations => 3,
            Outcome::Interrupted => 130,
        }
    }

    /// The final status written to `state.json`.
    pub fn status(&self) -> Status {
        match self {
            Outcome::Done => Status::Done,
            Outcome::Gutter | Outcome::TooManyFailures | Outcome::CostLimit => Status::Failed,
            Outcome::MaxIterations => Status::MaxIterations,
            Outcome::QuestionTimeoutStop | Outcome::Interrupted => Status::Stopped,
        }
    }
}

/// How a question's wait ended.
#[derive(Debug, Clone, PartialEq)]
pub enum QuestionClosed {
    /// Answered in this terminal.
    Answered {
        /// The answer.
        text: String,
    },
    /// Answered from somewhere else (`ralph answer`, a hand-written file).
    AnsweredElsewhere {
        /// Who, in words.
        by: String,
        /// The answer.
        text: String,
    },
    /// The deadline passed.
    TimedOut,
    /// The human pressed Esc: the agent decides.
    Skipped,
    /// The loop is stopping; the question stays pending for the next run.
    Interrupted,
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
        /// The loop's countdown at the moment of asking (the UI keeps a copy).
        countdown: Countdown,
        /// When it was first asked (earlier than now when re-presented after a restart).
        asked_at: SystemTime,
        /// How it was raised.
        raised_by: RaisedBy,
        /// The iteration that asked.
        iteration: u32,
    },
    /// The question's deadline moved (extended, or paused while typing), as the loop sees it.
    Countdown(Countdown),
    /// The wait for an answer ended.
    QuestionClosed(QuestionClosed),
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
    /// Add [`crate::countdown::EXTEND_BY`] to the deadline.
    Extend,
    /// Stop gracefully: SIGTERM to the agent, grace, save state (first Ctrl-C).
    Stop,
    /// Stop now: SIGKILL to the agent (second Ctrl-C).
    Kill,
}
