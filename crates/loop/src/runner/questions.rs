//! Questions: showing one, waiting for its answer or its deadline, and acting on the outcome.
//!
//! One set of steps serves every way a question arrives (a QUESTION signal after the agent
//! ends, `ralph ask` while it runs, the agent's own question tool over stdin): open it (state
//! first, then the front end and notifications), advance it on each input, close it.

use super::*;

impl Runner {
    /// QUESTION: read `.ralph/question.md` and wait for an answer; `Some` when the run must end.
    pub(super) async fn handle_question_signal(
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
                self.session.carryover.push(Carryover::QuestionLost);
                return Ok(None);
            }
            Err(e) => {
                let msg = format!("refused to read the question: {e}");
                self.emit(LoopEvent::Warning(msg.clone())).await;
                self.log(
                    "question_lost",
                    json!({"iteration": iteration, "message": msg}),
                );
                self.session.carryover.push(Carryover::QuestionLost);
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
    pub(super) async fn present_question(
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
    pub(super) async fn wait_and_close(
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
                Some(()) = self.io.fs_events.recv() => Step::Files,
                c = self.io.controls.next() => Step::Control(c),
            };
        };
        self.close_question(open, end).await
    }

    /// Records a question as waiting (state first, then the log, the front end, notifications).
    pub(super) async fn open_question(
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
        self.save_state().await?;
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
        // One link for the front end and every notification.
        let answer_url =
            ralph_protocol::broker::answer_url(self.ws.root(), &asked_at_text, ralph_protocol::broker::Channel::Notify);
        if let Some(url) = &answer_url {
            self.emit(LoopEvent::AnswerLink(url.clone())).await;
        }
        self.notify_question(&question, deadline, iteration, answer_url);
        Ok(OpenQuestion {
            question,
            asked_at: asked_at_text,
            countdown,
            raised_by,
            iteration,
            paused: false,
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
    pub(super) fn notify_question(
        &self,
        question: &Question,
        deadline: Option<SystemTime>,
        iteration: u32,
        answer_url: Option<String>,
    ) {
        let root = self.ws.root().display().to_string();
        let notice = QuestionNotice {
            answer_url,
            answer_command: format!(
                "{} \"your answer\"",
                ralph_protocol::desk::answer_command("ralph", self.ws.root())
            ),
            root,
            question: question.text.clone(),
            options: question.options.iter().map(|o| o.label.clone()).collect(),
            default: question.default.clone(),
            deadline: deadline.map(timestamp),
            iteration,
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
        open: &mut OpenQuestion,
        step: Step,
    ) -> Result<Option<Ended>, RunError> {
        let now = std::time::Instant::now();
        let mut deadline_moved = false;
        // A skip or more time from `ralph serve` (page or bot) counts as the same key in the
        // panel; the time is the request's own (Telegram's "+1 h").
        let mut remote_extend = None;
        let step = match step {
            Step::Files => match ralph_protocol::broker::take_request(&self.ws) {
                Some(r) if r.asked_at == open.asked_at => match r.extend_by() {
                    None => Step::Control(Control::Skip),
                    Some(by) => {
                        remote_extend = Some(by);
                        self.emit(LoopEvent::Note(format!(
                            "{} more to answer, asked from `ralph serve`",
                            ralph_protocol::broker::describe_span(by)
                        )))
                        .await;
                        Step::Control(Control::Extend)
                    }
                },
                _ => Step::Files,
            },
            other => other,
        };
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
                return Ok(Some(match ralph_protocol::desk::submit(&self.ws, &ans)? {
                    Submitted::Accepted => Ended::answered(ans, true),
                    Submitted::AlreadyAnswered(theirs) => Ended::answered(theirs, false),
                    // Only this loop skips its open question; it has not.
                    Submitted::Skipped => Ended::Skipped,
                }));
            }
            Step::Control(Control::Skip) => return Ok(Some(Ended::Skipped)),
            Step::Control(Control::Stop | Control::Kill) => return Ok(Some(Ended::Interrupted)),
            Step::Control(c @ (Control::Typing | Control::Extend)) => {
                // The one countdown: the front end shows what is sent back here. A request from
                // `ralph serve` adds its own amount; a key press, Control's.
                match remote_extend {
                    Some(by) if c == Control::Extend => open.countdown.extend(by, now),
                    _ => {
                        c.change_countdown(&mut open.countdown, now);
                    }
                }
                self.emit(LoopEvent::Countdown(open.countdown.clone()))
                    .await;
                deadline_moved = c == Control::Extend;
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
            return Ok(Some(Ended::answered(ans, false)));
        }
        if open.countdown.expired(now) {
            return Ok(Some(Ended::TimedOut));
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
            self.save_state().await?;
        }
        Ok(None)
    }

    /// Acts on how a question's wait ended; `Some` when the run must end.
    pub(super) async fn close_question(
        &mut self,
        open: OpenQuestion,
        end: Ended,
    ) -> Result<Option<Outcome>, RunError> {
        let OpenQuestion {
            question,
            asked_at,
            raised_by,
            iteration,
            mut carry,
            mut for_next,
            ..
        } = open;
        let question_raw = workspace::read_bounded(&self.ws.question(), MAX_QUESTION_BYTES)
            .ok()
            .flatten()
            .map(|b| b.bytes);
        match end {
            Ended::Answered {
                answer: ans, here, ..
            } => {
                // A `ralph ask` killed while it waited (the agent's tool timeout) cannot print
                // the answer: the next iteration gets it, as any answer whose asker is gone.
                if !carry && raised_by == RaisedBy::Ask && self.asker_gone(&asked_at)? {
                    carry = true;
                    for_next = true;
                    self.emit(LoopEvent::Note(
                        "the `ralph ask` that asked is gone (killed while it waited); the next iteration gets the answer".into(),
                    ))
                    .await;
                }
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
                        question: question.clone(),
                        answer: ans.text.clone(),
                        by: ans.source(),
                        late: false,
                    });
                    self.session.resume_next = true;
                }
                self.state.close_question(&asked_at, Some(&ans));
                self.questions.delivering = Some(Delivery {
                    question: Some(question),
                    question_raw,
                    asked_at: Some(asked_at),
                    answer: ans,
                    late: false,
                    for_next,
                });
            }
            Ended::TimedOut => {
                let stop =
                    carry && self.cfg.settings.on_question_timeout == OnQuestionTimeout::Stop;
                // Under `stop` nobody goes on with a guess: the loop stops, and the question
                // stays for the next run (not "the agent goes on with its default").
                let closed = match stop {
                    true => Ended::Interrupted,
                    false => Ended::TimedOut,
                };
                self.emit(LoopEvent::QuestionClosed(closed)).await;
                self.log(
                    "question_timeout",
                    json!({"iteration": iteration, "policy": self.cfg.settings.on_question_timeout, "raised_by": raised_by}),
                );
                if let Some(p) = self.state.pending_question.as_mut() {
                    p.paused = false;
                }
                if stop {
                    return Ok(Some(Outcome::QuestionTimeoutStop));
                }
                self.archive_question(&question, &asked_at, &Ended::TimedOut)
                    .await;
                if carry {
                    self.session
                        .carryover
                        .push(Carryover::Unanswered { question });
                }
                // Keep the question open for a late answer, which a later iteration will get.
                if let Some(p) = self.state.pending_question.as_mut() {
                    p.timed_out = true;
                }
            }
            Ended::Skipped => {
                self.emit(LoopEvent::QuestionClosed(Ended::Skipped)).await;
                self.log(
                    "question_skipped",
                    json!({"iteration": iteration, "raised_by": raised_by}),
                );
                self.archive_question(&question, &asked_at, &Ended::Skipped)
                    .await;
                if carry {
                    self.session.carryover.push(Carryover::Skipped { question });
                }
                self.state.close_question(&asked_at, None);
                workspace::remove(&self.ws.question())?;
                // Removing the claim is how a waiting `ralph ask` learns it was skipped.
                workspace::remove(&self.ws.ask_claim())?;
            }
            Ended::Interrupted => {
                self.emit(LoopEvent::QuestionClosed(Ended::Interrupted))
                    .await;
                if let Some(p) = self.state.pending_question.as_mut() {
                    p.paused = false;
                }
                return Ok(Some(Outcome::Interrupted));
            }
        }
        self.state.status = Status::Running;
        self.save_state().await?;
        Ok(None)
    }

    /// A `ralph ask` may have written its claim while the agent runs: show its question now.
    pub(super) async fn notice_ask(
        &mut self,
        iteration: u32,
    ) -> Result<Option<OpenQuestion>, RunError> {
        let Some(claim) = AskClaim::read(&self.ws) else {
            return Ok(None);
        };
        // A `ralph ask` killed while it waited (with its agent, by Ctrl-C) leaves its claim:
        // taken for live, it would pass a later file-protocol question off as that old one,
        // with its wait and deadline.
        if crate::asks::claim_is_stale(&claim) {
            workspace::remove(&self.ws.ask_claim())?;
            return Ok(None);
        }
        // One claim is one question. The claim stays until `ralph ask` has read its answer and
        // exited, so a later file event must not open it again: that would archive the answer
        // before `ralph ask` read it, and both would then wait forever (regression test:
        // `ralph_ask_inside_a_running_loop_is_shown_and_answered_while_the_agent_waits`, which
        // hung under load).
        if self.questions.asks_seen.contains(&claim.asked_at)
            || self
                .state
                .pending_question
                .as_ref()
                .is_some_and(|p| p.asked_at == claim.asked_at)
        {
            return Ok(None);
        }
        // The claim says what was asked; `question.md` (written after the claim is won) only
        // for a claim from before it did.
        let raw = match claim.question.as_deref() {
            Some(q) => q.as_bytes().to_vec(),
            None => match workspace::read_bounded(&self.ws.question(), MAX_QUESTION_BYTES) {
                Ok(Some(raw)) => raw.bytes,
                _ => return Ok(None),
            },
        };
        self.questions.asks_seen.insert(claim.asked_at.clone());
        // The agent has had the answer this iteration started with; archive it now, so that
        // `.ralph/answer.md` is free for the new question's answer.
        self.after_delivery().await?;
        let question = Question::parse_bounded(&raw);
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

impl Runner {
    /// Whether the `ralph ask` that asked the question asked at `asked_at` is gone without
    /// its answer; its claim, left behind, is removed.
    fn asker_gone(&self, asked_at: &str) -> Result<bool, RunError> {
        let gone = AskClaim::read(&self.ws)
            .is_some_and(|c| c.asked_at == asked_at && crate::asks::claim_is_stale(&c));
        if gone {
            workspace::remove(&self.ws.ask_claim())?;
        }
        Ok(gone)
    }

    /// Records what became of a question in `.ralph/clarifications.md`.
    async fn archive_question(&self, question: &Question, asked_at: &str, how: &Ended) {
        let entry = clarifications::Entry {
            question: Some(question),
            asked_at: Some(asked_at),
            outcome: how,
        };
        self.archive(&entry).await;
    }

    /// Appends `entry` to `.ralph/clarifications.md`; a failure (a full disk) is said plainly
    /// and the loop goes on: the record is a log, and the question's fate is in `state.json`
    /// and `events.jsonl` all the same.
    pub(super) async fn archive(&self, entry: &clarifications::Entry<'_>) {
        if let Err(e) = clarifications::record(&self.ws, entry) {
            let msg = format!(
                "could not add this question's outcome to .ralph/clarifications.md ({e}); the file is left as it was, and the answer is not delivered again"
            );
            self.emit(LoopEvent::Warning(msg.clone())).await;
            self.log("archive_failed", json!({"message": msg}));
        }
    }
}

/// A question being waited on.
#[derive(Debug)]
pub(super) struct OpenQuestion {
    pub(super) question: Question,
    pub(super) asked_at: String,
    pub(super) countdown: Countdown,
    pub(super) raised_by: RaisedBy,
    pub(super) iteration: u32,
    /// Whether `state.json` last said the countdown was paused.
    pub(super) paused: bool,
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

impl OpenQuestion {
    /// When the question needs looking at again (expiry, or the end of a typing pause).
    pub(super) fn wake(&self) -> Instant {
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
pub(super) enum Step {
    Control(Control),
    Wake,
    Files,
}
