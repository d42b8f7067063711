//! A conversing agent (Claude Code's stdio permission protocol): its requests answered on its
//! stdin, its own question tool put to the human one question at a time.

use std::collections::VecDeque;
use std::time::SystemTime;

use ralph_protocol::{Ended, Question, RaisedBy};
use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;

use super::agent_run::AgentRun;
use super::questions::{NativeAsk, Open};
use super::{RunError, Runner};
use crate::native::{self, ToolRequest};

impl Runner {
    /// Answers what a conversing agent asked of its host: its question tool goes to the human,
    /// any other tool is allowed (the loop runs unattended). Closes stdin once the turn is over.
    pub(super) async fn serve_agent(
        &mut self,
        run: &mut AgentRun,
        stdin: &mut Option<ChildStdin>,
        asking: &mut Option<Open>,
        iteration: u32,
    ) -> Result<(), RunError> {
        for line in std::mem::take(&mut run.requests) {
            let Some(request) = ToolRequest::parse(&line) else {
                self.log(
                    "control_request_ignored",
                    json!({"line": line.chars().take(200).collect::<String>()}),
                );
                continue;
            };
            if request.tool_name != native::ASK_TOOL {
                write_line(stdin, &request.allow()).await;
                continue;
            }
            let mut questions: VecDeque<Question> = request.questions().into();
            let Some(first) = questions.pop_front() else {
                write_line(
                    stdin,
                    &request.deny("The question had no text; ask again with a question."),
                )
                .await;
                continue;
            };
            if asking.is_some() {
                write_line(
                    stdin,
                    &request.deny(
                        "Another question is already waiting for the human; ask one at a time.",
                    ),
                )
                .await;
                continue;
            }
            let ask = NativeAsk {
                request,
                rest: questions,
                answers: Vec::new(),
            };
            *asking = Some(self.open_native(first, ask, iteration).await?);
        }
        if run.turn_ended && asking.is_none() {
            // Its turn is over: closing stdin is how a stream-json agent is told to exit.
            *stdin = None;
        }
        Ok(())
    }

    /// Ends a question asked while the agent runs; for the agent's own question tool, answers
    /// it on stdin (or asks the request's next question, which is returned).
    pub(super) async fn end_asking(
        &mut self,
        mut open: Open,
        end: Ended,
        stdin: &mut Option<ChildStdin>,
        iteration: u32,
    ) -> Result<Option<Open>, RunError> {
        let native = open.native.take();
        let text = open.asking.question.text.clone();
        let answer = match &end {
            Ended::Answered { answer, .. } => Some(answer.text.clone()),
            _ => None,
        };
        let refusal = match &end {
            Ended::Skipped => native::SKIPPED,
            _ => native::NO_ANSWER,
        };
        self.close_question(open, end).await?;
        let Some(mut ask) = native else {
            return Ok(None);
        };
        let Some(answer) = answer else {
            write_line(stdin, &ask.request.deny(refusal)).await;
            return Ok(None);
        };
        ask.answers.push((text, answer));
        if let Some(next) = ask.rest.pop_front() {
            return Ok(Some(self.open_native(next, ask, iteration).await?));
        }
        write_line(stdin, &ask.request.answer(&ask.answers)).await;
        Ok(None)
    }

    /// Opens one question of an `AskUserQuestion` request. The answer file holds one answer at a
    /// time: the one this iteration started with (or the request's previous answer) is archived
    /// first.
    async fn open_native(
        &mut self,
        question: Question,
        ask: NativeAsk,
        iteration: u32,
    ) -> Result<Open, RunError> {
        self.after_delivery().await?;
        let wait = self.question_wait();
        let mut open = self
            .open_question(
                question,
                SystemTime::now(),
                None,
                wait,
                iteration,
                RaisedBy::Tool,
            )
            .await?;
        // The agent is waiting on its stdin for this answer; it does not go into a prompt.
        open.carry = false;
        open.native = Some(ask);
        Ok(open)
    }
}

/// Writes one line to a conversing agent's stdin; an agent that has gone is seen when it exits.
async fn write_line(stdin: &mut Option<ChildStdin>, line: &str) {
    if let Some(pipe) = stdin.as_mut()
        && (pipe.write_all(line.as_bytes()).await.is_err() || pipe.flush().await.is_err())
    {
        *stdin = None;
    }
}
