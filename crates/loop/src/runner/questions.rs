//! Questions, as the loop drives them: the [`Desk`] owns every question's life (its files,
//! its state, its record); this file feeds it the loop's inputs (file changes, keys from the
//! front end, wake-ups) and passes on what it says (events, the log, notifications, the next
//! prompt). The answer's way to the agent is here too: picked up before an iteration
//! (whoever gave it, whenever), archived after the iteration that had it, exactly once.
//!
//! One set of steps serves every way a question arrives (a QUESTION signal after the agent
//! ends, `ralph ask` while it runs, the agent's own question tool over stdin): open it (state
//! first, then the front end and notifications), step it on each input, close it.

use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use ralph_protocol::{
    Asking, Control, Delivery, Desk, DeskInput, Ended, Forged, LoopEvent, Now, OnTimeout, Outcome,
    PendingQuestion, PickUp, Question, QuestionId, RaisedBy, Stepped, log_event, timestamp,
};
use serde_json::json;
use tokio::time::Instant;

use super::{RunError, Runner, leftovers, wait_duration};
use crate::native::ToolRequest;
use crate::notify::QuestionNotice;
use crate::prompt::Carryover;
use crate::task::OnQuestionTimeout;

/// The loop's questions: the desk, and what the loop keeps between its steps.
#[derive(Debug)]
pub(super) struct Questions {
    pub(super) desk: Desk,
    /// The answer on its way to the agent: taken before (or while) an iteration runs, archived
    /// after the iteration that had it.
    pub(super) delivering: Option<Delivering>,
    /// `ralph ask` claims already shown, so each is asked once.
    pub(super) asks_seen: HashSet<QuestionId>,
    /// A question the last run left waiting, shown first.
    pub(super) resume: Option<PendingQuestion>,
    /// Bell, desktop notification, command and webhook for a question.
    pub(super) notifier: crate::notify::Notifier,
}

/// An answer on its way, and whether it is for the iteration after the one running.
#[derive(Debug)]
pub(super) struct Delivering {
    pub(super) delivery: Delivery,
    /// Taken while an agent ran, for the iteration after it (its asker was gone): the end of
    /// the running iteration must not archive it.
    pub(super) for_next: bool,
}

/// A question being waited on by the loop.
#[derive(Debug)]
pub(super) struct Open {
    pub(super) asking: Asking,
    /// Whether the answer (or its absence) goes into the next prompt: not when the agent that
    /// asked with `ralph ask` is still there to receive it directly.
    pub(super) carry: bool,
    /// For a question from the agent's own tool: the request to answer on its stdin.
    pub(super) native: Option<NativeAsk>,
    /// Whether its answer is for the iteration after the one running (or just ended), whose
    /// end must not archive it.
    pub(super) for_next: bool,
}

/// An `AskUserQuestion` request being answered, one question at a time.
#[derive(Debug)]
pub(super) struct NativeAsk {
    pub(super) request: ToolRequest,
    /// Questions of the same request still to ask.
    pub(super) rest: std::collections::VecDeque<Question>,
    /// Answers so far, keyed by question text (as the tool wants them).
    pub(super) answers: Vec<(String, String)>,
}

impl Open {
    /// When the question needs looking at again (expiry, or the end of a typing pause).
    pub(super) fn wake(&self) -> Instant {
        let now = std::time::Instant::now();
        self.asking
            .wake(now)
            .map(Instant::from_std)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(365 * 24 * 3600))
    }
}

/// One thing that can move a waiting question along.
#[derive(Debug)]
pub(super) enum Step {
    Control(Control),
    Wake,
    Files,
}

/// Whether the `ralph ask` that wrote a claim is gone (killed while it waited).
fn asker_is_gone(claim: &ralph_protocol::AskClaim) -> bool {
    crate::asks::claim_is_stale(claim)
}

impl Runner {
    /// QUESTION: read `.ralph/question.md` and wait for an answer; `Some` when the run must end.
    pub(super) async fn handle_question_signal(
        &mut self,
        iteration: u32,
    ) -> Result<Option<Outcome>, RunError> {
        let question = match self.questions.desk.read_question_file() {
            Ok(q) => q,
            Err(msg) => {
                self.emit(LoopEvent::Warning(msg.clone())).await;
                self.log(
                    "question_lost",
                    json!({"iteration": iteration, "message": msg}),
                );
                self.session.carryover.push(Carryover::QuestionLost);
                return Ok(None);
            }
        };
        if let Some(w) = &question.warning {
            let msg = format!(".ralph/question.md: {w}");
            self.emit(LoopEvent::Warning(msg.clone())).await;
            self.log("warning", json!({"message": msg}));
        }
        self.present_question(
            question,
            None,
            SystemTime::now(),
            iteration,
            RaisedBy::Signal,
        )
        .await
    }

    /// Shows a question and waits for its answer, deadline, skip or interruption.
    pub(super) async fn present_question(
        &mut self,
        question: Question,
        id: Option<QuestionId>,
        asked_at: SystemTime,
        iteration: u32,
        raised_by: RaisedBy,
    ) -> Result<Option<Outcome>, RunError> {
        let wait = self.question_wait();
        let open = self
            .open_question(question, asked_at, id, wait, iteration, raised_by)
            .await?;
        self.wait_and_close(open).await
    }

    /// Waits on an open question until it ends, then acts on how it ended.
    pub(super) async fn wait_and_close(
        &mut self,
        mut open: Open,
    ) -> Result<Option<Outcome>, RunError> {
        // The question is shown: what the agent left is stopped beside it (see `leftovers`),
        // while the wait below takes every control.
        self.start_stopping_leftovers();
        // Look before waiting: the answer may already be there, or the wait may be zero.
        let mut step = Some(Step::Wake);
        let end = loop {
            if let Some(step) = step.take()
                && let Some(end) = self.question_step(&mut open, step).await?
            {
                break end;
            }
            let wake = open.wake();
            step = tokio::select! {
                () = tokio::time::sleep_until(wake) => Some(Step::Wake),
                Some(()) = self.io.fs_events.recv() => Some(Step::Files),
                c = self.io.controls.next() => {
                    if matches!(c, Control::Stop | Control::Kill) {
                        self.hurry_leftovers();
                    }
                    Some(Step::Control(c))
                }
                cleared = leftovers::stopped(&mut self.processes.left) => {
                    self.leftovers_stopped(cleared).await;
                    None
                }
            };
        };
        self.close_question(open, end).await
    }

    /// Opens a question on the desk (state saved first, then the log, the front end,
    /// notifications).
    pub(super) async fn open_question(
        &mut self,
        question: Question,
        asked_at: SystemTime,
        id: Option<QuestionId>,
        wait: Option<Duration>,
        iteration: u32,
        raised_by: RaisedBy,
    ) -> Result<Open, RunError> {
        let now = Now::current();
        let asking = self.questions.desk.open(
            &mut self.state,
            question,
            id,
            asked_at,
            wait,
            iteration,
            raised_by,
            now,
        );
        let deadline = asking
            .countdown
            .remaining(now.instant)
            .map(|left| now.wall + left);
        // Saved before anything is shown: `ralph status`, `ralph answer` and `ralph ask` rely on it.
        self.save_state().await?;
        let question = &asking.question;
        self.log(
            "question",
            json!({"iteration": iteration, "raised_by": raised_by, "text": question.text, "options": question.options, "default": question.default, "deadline": deadline.map(timestamp)}),
        );
        self.emit(LoopEvent::QuestionAsked {
            question: question.clone(),
            countdown: asking.countdown.clone(),
            asked_at,
            raised_by,
            iteration,
        })
        .await;
        // One link for the front end and every notification.
        let answer_url =
            ralph_protocol::answer_url(self.ws.root(), &asking.id, ralph_protocol::Channel::Notify);
        if let Some(url) = &answer_url {
            self.emit(LoopEvent::AnswerLink(url.clone())).await;
        }
        self.notify_question(&asking, deadline, answer_url);
        Ok(Open {
            asking,
            carry: true,
            native: None,
            for_next: false,
        })
    }

    /// How long a question may wait under the current settings (`None`: no deadline).
    pub(super) fn question_wait(&self) -> Option<Duration> {
        match self.cfg.settings.on_question_timeout {
            OnQuestionTimeout::Wait => None,
            _ => wait_duration(self.cfg.settings.question_timeout),
        }
    }

    /// Tells the human through every channel they configured; never waits for any of them.
    fn notify_question(
        &self,
        asking: &Asking,
        deadline: Option<SystemTime>,
        answer_url: Option<String>,
    ) {
        let question = &asking.question;
        let notice = QuestionNotice {
            answer_url,
            answer_command: ralph_protocol::answer_hint(&ralph_protocol::answer_command(
                "ralph",
                self.ws.root(),
            )),
            root: self.ws.root().display().to_string(),
            question: question.text.clone(),
            options: question.options.iter().map(|o| o.label.clone()).collect(),
            default: question.default.clone(),
            deadline: deadline.map(timestamp),
            iteration: asking.iteration,
        };
        let warnings = self.questions.notifier.question_raised(&notice);
        // Weak: a front end reads until every sender is gone, and a dead webhook must not keep
        // it (and ralph's exit) waiting after the loop has ended.
        let events = self.io.events.downgrade();
        let ws = self.ws.clone();
        // Failures arrive later (a webhook timing out); pass them on without holding the loop.
        // A plain thread, not `spawn_blocking`: the runtime waits for those when it shuts down,
        // and a dead webhook must not hold ralph's exit either.
        let _ = std::thread::Builder::new()
            .name("notify-warnings".into())
            .spawn(move || {
                while let Ok(warning) = warnings.recv() {
                    let _ = log_event(&ws, "notify_failed", json!({"message": warning}));
                    if let Some(events) = events.upgrade() {
                        let _ = events.blocking_send(LoopEvent::Warning(warning));
                    }
                }
            });
    }

    /// Advances an open question by one step; `Some` when its wait is over.
    pub(super) async fn question_step(
        &mut self,
        open: &mut Open,
        step: Step,
    ) -> Result<Option<Ended>, RunError> {
        let input = match step {
            Step::Files | Step::Wake => DeskInput::Look,
            Step::Control(Control::Answer(text)) => DeskInput::Typed(text),
            Step::Control(Control::Skip) => DeskInput::Skip,
            Step::Control(Control::Stop | Control::Kill) => DeskInput::Stop,
            Step::Control(Control::Typing) => DeskInput::Typing,
            Step::Control(Control::Extend) => DeskInput::Extend(None),
        };
        let stepped: Stepped =
            self.questions
                .desk
                .step(&mut self.state, &mut open.asking, input, Now::current())?;
        if let Some(msg) = stepped.warning {
            self.emit(LoopEvent::Warning(msg.clone())).await;
            self.log("warning", json!({"message": msg}));
        }
        if let Some(forged) = stepped.forged {
            self.refuse_forged(forged).await;
        }
        if let Some(by) = stepped.extended_from_afar {
            self.emit(LoopEvent::Note(format!(
                "{} more to answer, asked from `ralph serve`",
                ralph_protocol::describe_span(by)
            )))
            .await;
        }
        if let Some(refused) = stepped.refused {
            self.emit(LoopEvent::AnswerRefused {
                reason: refused.to_string(),
            })
            .await;
            return Ok(None);
        }
        if stepped.countdown_changed {
            self.emit(LoopEvent::Countdown(open.asking.countdown.clone()))
                .await;
        }
        if stepped.ended.is_none() && stepped.save {
            self.save_state().await?;
        }
        Ok(stepped.ended)
    }

    /// Acts on how a question's wait ended; `Some` when the run must end.
    pub(super) async fn close_question(
        &mut self,
        open: Open,
        end: Ended,
    ) -> Result<Option<Outcome>, RunError> {
        let Open {
            asking,
            mut carry,
            mut for_next,
            ..
        } = open;
        let (iteration, raised_by) = (asking.iteration, asking.raised_by);
        let stop = carry && self.cfg.settings.on_question_timeout == OnQuestionTimeout::Stop;
        let policy = if stop {
            OnTimeout::Stop
        } else {
            OnTimeout::GoOn
        };
        // A `ralph ask` killed while it waited (the agent's tool timeout) cannot print the
        // answer: the next iteration gets it, as any answer whose asker is gone.
        if matches!(end, Ended::Answered { .. })
            && !carry
            && raised_by == RaisedBy::Ask
            && self.questions.desk.asker_gone(&asking.id, asker_is_gone)?
        {
            carry = true;
            for_next = true;
            self.emit(LoopEvent::Note(
                "the `ralph ask` that asked is gone (killed while it waited); the next iteration gets the answer".into(),
            ))
            .await;
        }
        let closed = self
            .questions
            .desk
            .close(&mut self.state, &asking, &end, policy)?;
        if let Some(e) = closed.archive_failed {
            self.archive_failed(&e).await;
        }
        let question = asking.question;
        match end {
            Ended::Answered {
                answer: ans, here, ..
            } => {
                self.emit(LoopEvent::QuestionClosed(Ended::answered(
                    ans.clone(),
                    here,
                )))
                .await;
                self.log(
                    "answer",
                    json!({"iteration": iteration, "by": ans.by, "who": ans.who, "text": ans.text, "raised_by": raised_by}),
                );
                if carry {
                    self.session.carryover.push(Carryover::Answer {
                        question,
                        answer: ans.text.clone(),
                        by: ans.source(),
                        late: false,
                    });
                    self.session.resume_next = true;
                }
                self.questions.delivering = closed
                    .delivery
                    .map(|delivery| Delivering { delivery, for_next });
            }
            Ended::TimedOut => {
                // Under `stop` nobody goes on with a guess: the loop stops, and the question
                // stays for the next run (not "the agent goes on with its default").
                let said = if stop {
                    Ended::Interrupted
                } else {
                    Ended::TimedOut
                };
                self.emit(LoopEvent::QuestionClosed(said)).await;
                self.log(
                    "question_timeout",
                    json!({"iteration": iteration, "policy": self.cfg.settings.on_question_timeout, "raised_by": raised_by}),
                );
                if stop {
                    return Ok(Some(Outcome::QuestionTimeoutStop));
                }
                if carry {
                    self.session
                        .carryover
                        .push(Carryover::Unanswered { question });
                }
            }
            Ended::Skipped => {
                self.emit(LoopEvent::QuestionClosed(Ended::Skipped)).await;
                self.log(
                    "question_skipped",
                    json!({"iteration": iteration, "raised_by": raised_by}),
                );
                if carry {
                    self.session.carryover.push(Carryover::Skipped { question });
                }
            }
            Ended::Interrupted => {
                self.emit(LoopEvent::QuestionClosed(Ended::Interrupted))
                    .await;
                return Ok(Some(Outcome::Interrupted));
            }
        }
        self.save_state().await?;
        Ok(None)
    }

    /// A `ralph ask` may have written its claim while the agent runs: show its question now.
    pub(super) async fn notice_ask(&mut self, iteration: u32) -> Result<Option<Open>, RunError> {
        let found = self.questions.desk.new_claim(
            &self.state,
            &mut self.questions.asks_seen,
            asker_is_gone,
            Now::current(),
        )?;
        let Some(ralph_protocol::NewClaim {
            id,
            asked_at,
            question,
            wait,
        }) = found
        else {
            return Ok(None);
        };
        // The agent has had the answer this iteration started with; archive it now, so that
        // `.ralph/answer.md` is free for the new question's answer.
        self.after_delivery().await?;
        let mut open = self
            .open_question(question, asked_at, Some(id), wait, iteration, RaisedBy::Ask)
            .await?;
        // The agent is blocked in `ralph ask` and gets the answer from it directly.
        open.carry = false;
        Ok(Some(open))
    }

    /// Says that `clarifications.md` could not be written (a full disk); the loop goes on: the
    /// record is a log, and the question's fate is in `state.json` and `events.jsonl` all the
    /// same.
    pub(super) async fn archive_failed(&self, e: &ralph_protocol::WorkspaceError) {
        let msg = format!(
            "could not add this question's outcome to .ralph/clarifications.md ({e}); the file is left as it was, and the answer is not delivered again"
        );
        self.emit(LoopEvent::Warning(msg.clone())).await;
        self.log("archive_failed", json!({"message": msg}));
    }
}

impl Runner {
    /// Says that an answer ralph did not write was found in `answer.md` and refused: a warning
    /// naming the file, and `answer_forged` in the events.
    async fn refuse_forged(&mut self, forged: Forged) {
        let msg = forged.to_string();
        self.emit(LoopEvent::Warning(msg.clone())).await;
        self.log(
            "answer_forged",
            json!({
                "message": msg,
                "file": forged.path,
                "claimed_by": forged.answer.by,
                "question": forged.answer.question,
                "sealed": forged.answer.seal.is_some(),
            }),
        );
    }

    /// Picks up an answer waiting in `.ralph/answer.md` for the iteration about to run, or
    /// refuses a second answer to a question already closed.
    pub(super) async fn pick_up_answer(&mut self) -> Result<(), RunError> {
        if self.questions.delivering.is_some() {
            return Ok(());
        }
        let (found, warning) = self.questions.desk.pick_up(&mut self.state)?;
        if let Some(msg) = warning {
            self.emit(LoopEvent::Warning(msg.clone())).await;
            self.log("warning", json!({"message": msg}));
        }
        match found {
            PickUp::Nothing => {}
            PickUp::Forged(forged) => self.refuse_forged(forged).await,
            PickUp::Refused { answer, answered } => {
                let msg = format!(
                    "A second answer to a question already {} arrived ({}); it was not used.",
                    if answered { "answered" } else { "skipped" },
                    answer.source()
                );
                self.emit(LoopEvent::Note(msg)).await;
                self.log(
                    "answer_refused",
                    json!({"by": answer.by, "question": answer.question}),
                );
            }
            PickUp::Deliver(delivery) => {
                let delivery = *delivery;
                let ans = &delivery.answer;
                match &delivery.question {
                    Some(q) => self.session.carryover.push(Carryover::Answer {
                        question: q.clone(),
                        answer: ans.text.clone(),
                        by: ans.source(),
                        late: delivery.late,
                    }),
                    None => self.session.carryover.push(Carryover::Guidance {
                        text: ans.text.clone(),
                    }),
                }
                if delivery.late {
                    self.emit(LoopEvent::Note(format!(
                        "A late answer arrived ({}); this iteration gets it.",
                        ans.source()
                    )))
                    .await;
                }
                self.log(
                    "answer_delivering",
                    json!({"late": delivery.late, "by": ans.by, "who": ans.who, "guidance": delivery.question.is_none()}),
                );
                self.questions.delivering = Some(Delivering {
                    delivery,
                    for_next: false,
                });
            }
        }
        Ok(())
    }

    /// After the iteration that received an answer: archive it, then remove the files.
    pub(super) async fn after_delivery(&mut self) -> Result<(), RunError> {
        let Some(mut d) = self.questions.delivering.take() else {
            return Ok(());
        };
        if std::mem::take(&mut d.for_next) {
            // Not this iteration's: the next one has it, and it is archived after that one.
            self.questions.delivering = Some(d);
            return Ok(());
        }
        // `state.json` must say no question is waiting before the answer file goes: a
        // `ralph answer` that still saw the question there would find the file free and win a
        // second time (see `desk::submit`). The save saying so may still be in flight.
        self.settle_state().await?;
        let late = d.delivery.late;
        if let Some(e) = self.questions.desk.delivered(d.delivery)? {
            self.archive_failed(&e).await;
        }
        self.log("answer_delivered", json!({"late": late}));
        Ok(())
    }
}
