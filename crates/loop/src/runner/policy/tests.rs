//! Every way an iteration ends, decided without a process.

use std::os::unix::process::ExitStatusExt;

use std::process::ExitStatus;
use std::time::Duration;

use ralph_protocol::Outcome;

use super::{
    AgentEnd, Facts, LeftQuestion, Limits, Next, RateLimit, Signals, Stop, Tally, Verdict, decide,
    question_next,
};
use crate::prompt::Carryover;
use crate::runner::rate_limit::{BACKOFF_MAX, BACKOFF_START};

const LIMITS: Limits = Limits {
    max_iterations: 10,
    max_failures: 3,
    max_cost_usd: Some(5.0),
};

fn exit(code: i32) -> AgentEnd {
    AgentEnd::Exited(ExitStatus::from_raw(code << 8))
}

/// The facts of an iteration the runner has recorded, with `signals`.
fn ended(end: AgentEnd, signals: Signals) -> Facts {
    Facts {
        signals,
        recorded: true,
        ..Facts::new(2, end, "exited with status 0".into())
    }
}

const DONE: Signals = Signals {
    done: true,
    question: false,
    gutter: false,
};
const QUESTION: Signals = Signals {
    done: false,
    question: true,
    gutter: false,
};
const GUTTER: Signals = Signals {
    done: false,
    question: false,
    gutter: true,
};
const NONE: Signals = Signals {
    done: false,
    question: false,
    gutter: false,
};

fn outcome(next: Next) -> Outcome {
    match next {
        Next::Stop(Stop { outcome, .. }) => outcome,
        other => panic!("expected a stop, got {other:?}"),
    }
}

fn carried(next: Next) -> (Vec<Carryover>, Tally) {
    match next {
        Next::Continue { carry, tally } => (carry, tally),
        other => panic!("expected to go on, got {other:?}"),
    }
}

#[test]
fn an_iteration_is_recorded_before_anything_else_is_decided() {
    let facts = Facts {
        signals: DONE,
        ..Facts::new(1, exit(0), String::new())
    };
    let next = decide(&facts, Tally::default(), &LIMITS);
    assert_eq!(
        next,
        Next::Record {
            archive_answer: true
        }
    );
}

#[test]
fn an_answer_is_not_delivered_by_a_failed_resume_or_an_interrupted_iteration() {
    for (end, resume_failed) in [(AgentEnd::Interrupted, false), (exit(1), true)] {
        let facts = Facts {
            resume_failed,
            ..Facts::new(1, end, String::new())
        };
        let next = decide(&facts, Tally::default(), &LIMITS);
        assert_eq!(
            next,
            Next::Record {
                archive_answer: false
            }
        );
    }
}

#[test]
fn done_is_verified_then_ends_the_run() {
    let mut facts = ended(exit(0), DONE);
    assert_eq!(decide(&facts, Tally::default(), &LIMITS), Next::Verify);
    facts.verdict = Some(Verdict::Accepted("every criterion is checked".into()));
    let next = decide(&facts, Tally::default(), &LIMITS);
    assert_eq!(
        next,
        Next::Stop(Stop {
            outcome: Outcome::Done,
            reason: "DONE verified".into()
        })
    );
}

#[test]
fn done_with_open_criteria_is_refused_and_the_reason_goes_to_the_next_prompt() {
    let facts = Facts {
        verdict: Some(Verdict::OpenCriteria(
            "1 of 2 criteria ... not checked".into(),
        )),
        ..ended(exit(0), DONE)
    };
    let (carry, tally) = carried(decide(&facts, Tally::default(), &LIMITS));
    assert_eq!(
        carry,
        vec![Carryover::Rejected {
            reason: "1 of 2 criteria ... not checked".into()
        }]
    );
    assert_eq!(tally.failures, 0);
    assert!(!tally.first_run);
}

#[test]
fn done_with_failing_tests_is_refused_and_not_counted_as_a_failure() {
    let facts = Facts {
        verdict: Some(Verdict::TestsFailed(
            "`make test` exited with status 2".into(),
        )),
        ..ended(exit(0), DONE)
    };
    let tally = Tally {
        failures: 2,
        ..Tally::default()
    };
    let (carry, tally) = carried(decide(&facts, tally, &LIMITS));
    assert!(matches!(&carry[..], [Carryover::Rejected { reason }] if reason.contains("make test")));
    assert_eq!(tally.failures, 0, "a run that signalled is not a failure");
}

#[test]
fn ctrl_c_while_the_tests_run_stops_the_run() {
    let facts = Facts {
        verdict: Some(Verdict::Interrupted),
        ..ended(exit(0), DONE)
    };
    assert_eq!(
        outcome(decide(&facts, Tally::default(), &LIMITS)),
        Outcome::Interrupted
    );
}

#[test]
fn a_question_is_asked_and_its_answer_goes_to_the_next_iteration() {
    let mut facts = ended(exit(0), QUESTION);
    assert_eq!(decide(&facts, Tally::default(), &LIMITS), Next::Ask);
    facts.asked = Some(None);
    let (carry, _) = carried(decide(&facts, Tally::default(), &LIMITS));
    assert!(carry.is_empty());
}

#[test]
fn a_question_that_times_out_under_stop_ends_the_run_and_says_it_is_kept() {
    let facts = Facts {
        asked: Some(Some(Outcome::QuestionTimeoutStop)),
        ..ended(exit(0), QUESTION)
    };
    match decide(&facts, Tally::default(), &LIMITS) {
        Next::Stop(Stop { outcome, reason }) => {
            assert_eq!(outcome, Outcome::QuestionTimeoutStop);
            assert!(reason.contains("kept for the next run"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let facts = Facts {
        asked: Some(Some(Outcome::Interrupted)),
        ..ended(exit(0), QUESTION)
    };
    assert_eq!(
        outcome(decide(&facts, Tally::default(), &LIMITS)),
        Outcome::Interrupted
    );
}

#[test]
fn question_and_done_in_one_turn_asks_and_never_verifies() {
    let signals = Signals {
        done: true,
        question: true,
        gutter: false,
    };
    let mut facts = ended(exit(0), signals);
    assert!(facts.done_set_aside());
    assert_eq!(decide(&facts, Tally::default(), &LIMITS), Next::Ask);
    facts.asked = Some(None);
    let (carry, _) = carried(decide(&facts, Tally::default(), &LIMITS));
    assert!(carry.is_empty(), "DONE was neither accepted nor rejected");
}

#[test]
fn gutter_stops_the_run() {
    let facts = ended(exit(0), GUTTER);
    assert_eq!(
        outcome(decide(&facts, Tally::default(), &LIMITS)),
        Outcome::Gutter
    );
}

#[test]
fn gutter_outranks_done() {
    let facts = ended(
        exit(0),
        Signals {
            done: true,
            question: false,
            gutter: true,
        },
    );
    assert_eq!(
        outcome(decide(&facts, Tally::default(), &LIMITS)),
        Outcome::Gutter
    );
}

#[test]
fn the_last_iteration_without_done_ends_the_run() {
    let facts = Facts {
        iteration: LIMITS.max_iterations,
        ..ended(exit(0), NONE)
    };
    match decide(&facts, Tally::default(), &LIMITS) {
        Next::Stop(Stop { outcome, reason }) => {
            assert_eq!(outcome, Outcome::MaxIterations);
            assert_eq!(
                reason,
                "max_iterations (10) reached without a verified DONE"
            );
        }
        other => panic!("{other:?}"),
    }
    let facts = Facts {
        iteration: LIMITS.max_iterations - 1,
        ..ended(exit(0), NONE)
    };
    carried(decide(&facts, Tally::default(), &LIMITS));
}

#[test]
fn a_failed_run_is_told_to_the_next_and_counted() {
    let facts = Facts {
        how: "exited with status 1".into(),
        ..ended(exit(1), NONE)
    };
    let (carry, tally) = carried(decide(&facts, Tally::default(), &LIMITS));
    assert_eq!(
        carry,
        vec![Carryover::AgentFailed {
            how: "It exited with status 1".into()
        }]
    );
    assert_eq!(tally.failures, 1);
}

#[test]
fn a_crash_counts_as_a_failure() {
    let killed = AgentEnd::Exited(ExitStatus::from_raw(9));
    let facts = Facts {
        how: "was killed by SIGKILL".into(),
        ..ended(killed, NONE)
    };
    let (carry, tally) = carried(decide(&facts, Tally::default(), &LIMITS));
    assert!(matches!(&carry[..], [Carryover::AgentFailed { how }] if how.contains("SIGKILL")));
    assert_eq!(tally.failures, 1);
}

#[test]
fn a_timed_out_run_is_a_failure_even_with_a_signal() {
    let facts = ended(AgentEnd::TimedOut, QUESTION);
    assert!(facts.failed());
    let facts = ended(exit(1), QUESTION);
    assert!(
        !facts.failed(),
        "it signalled: its exit status is not held against it"
    );
}

#[test]
fn too_many_failures_in_a_row_end_the_run() {
    let facts = Facts {
        how: "exited with status 1".into(),
        ..ended(exit(1), NONE)
    };
    let tally = Tally {
        failures: LIMITS.max_failures - 1,
        first_run: false,
        ..Tally::default()
    };
    match decide(&facts, tally, &LIMITS) {
        Next::Stop(Stop { outcome, reason }) => {
            assert_eq!(outcome, Outcome::TooManyFailures);
            assert!(reason.contains("failed 3 times in a row"), "{reason}");
            assert!(reason.contains("last: it exited with status 1"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_good_run_resets_the_failure_count() {
    let tally = Tally {
        failures: 2,
        ..Tally::default()
    };
    let (_, tally) = carried(decide(&ended(exit(0), NONE), tally, &LIMITS));
    assert_eq!(tally.failures, 0);
}

#[test]
fn a_failed_resume_is_not_counted_as_a_failure() {
    let facts = Facts {
        resume_failed: true,
        ..ended(exit(1), NONE)
    };
    let tally = Tally {
        failures: 2,
        ..Tally::default()
    };
    let (carry, tally) = carried(decide(&facts, tally, &LIMITS));
    assert!(carry.is_empty());
    assert_eq!(tally.failures, 2);
}

#[test]
fn a_command_not_found_on_the_first_run_ends_the_run_and_later_is_a_failure() {
    let facts = Facts {
        not_runnable: Some("the agent's command was not found".into()),
        ..ended(exit(127), NONE)
    };
    assert_eq!(
        outcome(decide(&facts, Tally::default(), &LIMITS)),
        Outcome::AgentNotRunnable
    );
    let later = Tally {
        first_run: false,
        ..Tally::default()
    };
    let (_, tally) = carried(decide(&facts, later, &LIMITS));
    assert_eq!(tally.failures, 1);
}

#[test]
fn a_rate_limit_waits_as_told_and_retries_the_same_iteration() {
    let facts = Facts {
        rate_limit: Some(RateLimit {
            resets_at: None,
            retry_after: Some(Duration::from_secs(90)),
            message: "slow down".into(),
        }),
        ..ended(exit(1), NONE)
    };
    match decide(&facts, Tally::default(), &LIMITS) {
        Next::BackOff {
            wait,
            message,
            tally,
        } => {
            assert_eq!(wait, Duration::from_secs(90));
            assert_eq!(message, "slow down");
            assert_eq!(tally.rate_limits, 1);
            assert_eq!(tally.failures, 0, "a rate limit is not the agent's failure");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_rate_limit_without_a_wait_doubles_the_wait_up_to_the_cap() {
    let facts = Facts {
        rate_limit: Some(RateLimit {
            resets_at: None,
            retry_after: None,
            message: String::new(),
        }),
        ..ended(exit(1), NONE)
    };
    let wait = |rate_limits| match decide(
        &facts,
        Tally {
            rate_limits,
            ..Tally::default()
        },
        &LIMITS,
    ) {
        Next::BackOff { wait, .. } => wait,
        other => panic!("{other:?}"),
    };
    assert_eq!(wait(0), BACKOFF_START);
    assert_eq!(wait(1), BACKOFF_START * 2);
    assert_eq!(wait(20), BACKOFF_MAX);
}

#[test]
fn a_rate_limit_with_a_signal_is_acted_on_as_the_signal() {
    let facts = Facts {
        rate_limit: Some(RateLimit {
            resets_at: None,
            retry_after: None,
            message: String::new(),
        }),
        ..ended(exit(0), GUTTER)
    };
    assert_eq!(
        outcome(decide(&facts, Tally::default(), &LIMITS)),
        Outcome::Gutter
    );
}

#[test]
fn the_rate_limit_streak_ends_with_a_run_that_was_not_limited() {
    let tally = Tally {
        rate_limits: 4,
        ..Tally::default()
    };
    let (_, tally) = carried(decide(&ended(exit(0), NONE), tally, &LIMITS));
    assert_eq!(tally.rate_limits, 0);
}

#[test]
fn ctrl_c_during_the_agent_stops_the_run_whatever_it_signalled() {
    let facts = ended(AgentEnd::Interrupted, DONE);
    assert_eq!(
        outcome(decide(&facts, Tally::default(), &LIMITS)),
        Outcome::Interrupted
    );
}

#[test]
fn past_the_cost_cap_the_run_stops() {
    let facts = Facts {
        spent_usd: Some(5.01),
        ..ended(exit(0), NONE)
    };
    match decide(&facts, Tally::default(), &LIMITS) {
        Next::Stop(Stop { outcome, reason }) => {
            assert_eq!(outcome, Outcome::CostLimit);
            assert_eq!(
                reason,
                "the agent has cost $5.01, past max_cost_usd ($5.00)"
            );
        }
        other => panic!("{other:?}"),
    }
    let at_the_cap = Facts {
        spent_usd: Some(5.0),
        ..ended(exit(0), NONE)
    };
    carried(decide(&at_the_cap, Tally::default(), &LIMITS));
}

#[test]
fn a_question_left_open_by_a_killed_agent_is_waited_on_unless_interrupted() {
    let facts = Facts {
        left_question: LeftQuestion::Open,
        ..Facts::new(1, exit(137), String::new())
    };
    assert_eq!(
        decide(&facts, Tally::default(), &LIMITS),
        Next::AwaitLeftQuestion
    );
    let facts = Facts {
        left_question: LeftQuestion::Open,
        ..Facts::new(1, AgentEnd::Interrupted, String::new())
    };
    match decide(&facts, Tally::default(), &LIMITS) {
        Next::Stop(Stop { outcome, reason }) => {
            assert_eq!(outcome, Outcome::Interrupted);
            assert_eq!(reason, "interrupted while a question was waiting");
        }
        other => panic!("{other:?}"),
    }
    let facts = Facts {
        left_question: LeftQuestion::Closed(Some(Outcome::QuestionTimeoutStop)),
        ..Facts::new(1, exit(137), String::new())
    };
    assert_eq!(
        outcome(decide(&facts, Tally::default(), &LIMITS)),
        Outcome::QuestionTimeoutStop
    );
    let facts = Facts {
        left_question: LeftQuestion::Closed(None),
        ..Facts::new(1, exit(137), String::new())
    };
    assert!(matches!(
        decide(&facts, Tally::default(), &LIMITS),
        Next::Record { .. }
    ));
}

#[test]
fn a_lost_exit_status_is_neither_a_failure_nor_an_interruption() {
    let facts = ended(AgentEnd::Lost, NONE);
    let (carry, tally) = carried(decide(&facts, Tally::default(), &LIMITS));
    assert!(carry.is_empty());
    assert_eq!(tally.failures, 0);
}

#[test]
fn a_question_comes_next_only_when_the_human_will_be_asked() {
    let asked = |facts: Facts| question_next(&facts);
    // Not yet recorded: recording comes first, then the question.
    assert!(asked(Facts {
        signals: QUESTION,
        ..Facts::new(2, exit(0), String::new())
    }));
    assert!(asked(ended(exit(1), QUESTION)));
    let both = Signals {
        done: true,
        question: true,
        gutter: false,
    };
    assert!(asked(ended(exit(0), both)));
    assert!(asked(Facts {
        left_question: LeftQuestion::Open,
        ..ended(exit(0), NONE)
    }));
    // Nothing is asked: the run stops, is checked, or goes on.
    assert!(!asked(ended(AgentEnd::Interrupted, QUESTION)));
    assert!(!asked(Facts {
        left_question: LeftQuestion::Open,
        ..ended(AgentEnd::Interrupted, NONE)
    }));
    let stuck = Signals {
        question: true,
        gutter: true,
        done: false,
    };
    assert!(!asked(ended(exit(0), stuck)));
    assert!(!asked(ended(exit(0), DONE)));
    assert!(!asked(ended(exit(0), NONE)));
    assert!(!asked(ended(exit(0), GUTTER)));
}
