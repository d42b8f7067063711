//! Delivering an answer: picking it up before an iteration (whoever gave it, whenever), and
//! archiving it after the iteration that had it, exactly once.

use super::*;

/// An answer on its way to the agent: picked up before an iteration, archived after it.
#[derive(Debug, Clone)]
pub(super) struct Delivery {
    pub(super) question: Option<Question>,
    pub(super) question_raw: Option<Vec<u8>>,
    pub(super) asked_at: Option<String>,
    pub(super) answer: Answer,
    pub(super) late: bool,
    /// Taken while an agent ran, for the iteration after it (its asker was gone): the end of
    /// the running iteration must not archive it.
    pub(super) for_next: bool,
}

impl Runner {
    /// Picks up an answer waiting in `.ralph/answer.md` for the iteration about to run, or
    /// refuses a second answer to a question already closed; clears a question file nobody
    /// signalled for.
    pub(super) async fn pick_up_answer(&mut self) -> Result<(), RunError> {
        if self.questions.delivering.is_none()
            && let Some(ans) = self.read_answer().await?
        {
            let pending = self.state.pending_question.clone();
            // An answer to a question no longer waiting, which this state remembers closing.
            let closed = ans
                .question_asked_at
                .as_ref()
                .filter(|asked_at| pending.as_ref().is_none_or(|p| &p.asked_at != *asked_at))
                .and_then(|asked_at| self.state.closed(asked_at));
            // The very answer that closed it, still here: the run that took it ended (killed,
            // or at max_iterations) before an iteration had it. It is delivered now, not taken
            // for a second answer.
            let undelivered =
                closed.is_some_and(|c| c.answer_id.is_some() && c.answer_id == ans.id);
            if let Some(closed) = closed.filter(|_| !undelivered)
                && let Some(asked_at) = &ans.question_asked_at
            {
                // A second answer to a question already answered or skipped: its giver was
                // told it lost (see `desk::submit`) and takes it back; it is never delivered.
                let msg = format!(
                    "A second answer to a question already {} arrived ({}); it was not used.",
                    if closed.answered_by.is_some() {
                        "answered"
                    } else {
                        "skipped"
                    },
                    ans.source()
                );
                // Only that file, if it is still there (its giver may have taken it back and
                // someone answered anew). Best effort, as the read above: what cannot be read
                // or removed now is looked at again before the next iteration.
                let _ = workspace::remove_if(&self.ws.answer(), workspace::MAX_READ_BYTES, |now| {
                    Answer::parse(&String::from_utf8_lossy(now)) == ans
                });
                self.emit(LoopEvent::Note(msg)).await;
                self.log(
                    "answer_refused",
                    json!({"by": ans.by, "asked_at": asked_at}),
                );
                return Ok(());
            }
            let matches_pending = pending.as_ref().is_some_and(|p| {
                ans.question_asked_at.is_none()
                    || ans.question_asked_at.as_deref() == Some(p.asked_at.as_str())
            });
            let question_raw = (matches_pending || undelivered)
                .then(|| workspace::read_bounded(&self.ws.question(), MAX_QUESTION_BYTES))
                .and_then(|read| read.ok().flatten())
                .map(|b| b.bytes);
            let (question, late, asked_at) = match (&pending, matches_pending) {
                (Some(p), true) => (Some(p.question()), p.timed_out, Some(p.asked_at.clone())),
                // Its question is no longer pending; `question.md` still says what it was
                // (both are archived only once an iteration had the answer).
                _ => match question_raw.as_deref().filter(|_| undelivered) {
                    Some(raw) => (
                        Some(Question::parse_bounded(raw)),
                        false,
                        ans.question_asked_at.clone(),
                    ),
                    None => (None, false, None),
                },
            };
            match &question {
                Some(q) => self.session.carryover.push(Carryover::Answer {
                    question: q.clone(),
                    answer: ans.text.clone(),
                    by: ans.source(),
                    late,
                }),
                None => self.session.carryover.push(Carryover::Guidance {
                    text: ans.text.clone(),
                }),
            }
            if late {
                self.emit(LoopEvent::Note(format!(
                    "A late answer arrived ({}); this iteration gets it.",
                    ans.source()
                )))
                .await;
            }
            self.log(
                "answer_delivering",
                json!({"late": late, "by": ans.by, "who": ans.who, "guidance": question.is_none()}),
            );
            match &asked_at {
                Some(a) => self.state.close_question(a, Some(&ans)),
                None => self.state.pending_question = None,
            }
            self.questions.delivering = Some(Delivery {
                question,
                question_raw,
                asked_at,
                answer: ans,
                late,
                for_next: false,
            });
        } else if self.questions.delivering.is_none()
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
    /// unattended run, and the next run would stop on it again. Anything else that is not a
    /// plain file is moved aside (a directory, kept whole) or removed (a pipe or a device, which
    /// hold nothing), and reported: `ralph answer` needs the name free, and an error here
    /// would stop every run.
    pub(super) async fn read_answer(&mut self) -> Result<Option<Answer>, RunError> {
        let msg = match answer::read(&self.ws) {
            Err(WorkspaceError::Symlink { path }) => {
                workspace::remove(&path)?;
                format!(
                    "{} was a symlink; ralph never reads or writes through links in .ralph/, so it removed the link unread",
                    path.display()
                )
            }
            // Refused as not a plain file (`workspace::open_plain`): only then is it looked at.
            Err(WorkspaceError::Io { path, error }) => {
                match std::fs::symlink_metadata(&path).map(|m| m.file_type()) {
                    Ok(kind) if kind.is_dir() => {
                        let aside = path.with_file_name(format!(
                            "answer.md.not-a-file-{}",
                            SystemTime::now()
                                .duration_since(SystemTime::UNIX_EPOCH)
                                .unwrap_or_default()
                                .as_millis()
                        ));
                        if let Err(error) = std::fs::rename(&path, &aside) {
                            return Err(WorkspaceError::Io { path, error }.into());
                        }
                        format!(
                            "{} was a directory, not an answer; ralph moved it aside to {} so answers can reach the loop",
                            path.display(),
                            aside.display()
                        )
                    }
                    Ok(kind) if !kind.is_file() && !kind.is_symlink() => {
                        workspace::remove(&path)?;
                        format!(
                            "{} was a pipe or a device, not an answer; ralph removed it so answers can reach the loop",
                            path.display()
                        )
                    }
                    _ => return Err(WorkspaceError::Io { path, error }.into()),
                }
            }
            read => return Ok(read?),
        };
        self.emit(LoopEvent::Warning(msg.clone())).await;
        self.log("warning", json!({"message": msg}));
        Ok(None)
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
        let late = d.late;
        let ended = Ended::Answered {
            answer: d.answer,
            here: false,
            late,
        };
        let entry = clarifications::Entry {
            question: d.question.as_ref(),
            asked_at: d.asked_at.as_deref(),
            outcome: &ended,
        };
        // The answer has been delivered whether or not the record can be written: the file
        // goes all the same (removing frees space, even on a full disk), or the next run would
        // deliver it a second time.
        self.archive(&entry).await;
        workspace::remove(&self.ws.answer())?;
        // Remove the question only if it is the one answered: the agent may have asked a new one.
        if let Some(raw) = &d.question_raw
            && let Ok(Some(now)) = workspace::read_bounded(&self.ws.question(), MAX_QUESTION_BYTES)
            && &now.bytes == raw
        {
            workspace::remove(&self.ws.question())?;
        }
        self.log("answer_delivered", json!({"late": late}));
        Ok(())
    }
}
