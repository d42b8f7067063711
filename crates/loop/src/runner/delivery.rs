//! Delivering an answer: picking it up before an iteration (whoever gave it, whenever), and
//! archiving it after the iteration that had it, exactly once. The [`Desk`] does both; this
//! file tells the human and the next prompt.
//!
//! [`Desk`]: ralph_protocol::desk::Desk

use ralph_protocol::desk::PickUp;
use ralph_protocol::event::LoopEvent;
use serde_json::json;

use super::questions::Delivering;
use super::{RunError, Runner};
use crate::prompt::Carryover;

impl Runner {
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
                let ans = &delivery.answer;
                match &delivery.question {
                    Some(q) => self.carryover.push(Carryover::Answer {
                        question: q.clone(),
                        answer: ans.text.clone(),
                        by: ans.source(),
                        late: delivery.late,
                    }),
                    None => self.carryover.push(Carryover::Guidance {
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
