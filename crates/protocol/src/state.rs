//! `.ralph/state.json` and `.ralph/events.jsonl`: what the loop is doing, for other processes.
//!
//! The running loop is the only writer of `state.json`; `ralph status`, `ralph answer` and
//! `ralph ask` only read it. It is rewritten atomically at every change of status, so a reader
//! never sees half a file. `events.jsonl` is append-only, one JSON object per line.
//!
//! # Durability
//!
//! Every save of `state.json` is synced before it is renamed into place: after a crash or a
//! power loss the file is one the loop wrote, whole. The loop keeps at most one save in flight
//! and makes the ordinary per-iteration save while the agent runs (see `runner/save.rs`), so
//! after a power loss `state.json` is at most one save behind; a pending question and the final
//! status are durable before anyone is told about them. `events.jsonl` and the logs are not
//! synced: after a power loss their last lines may be missing.

use std::path::Path;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::time::{parse_timestamp, timestamp};

use crate::desk::QuestionId;
use crate::question::Question;
use crate::workspace::{self, Workspace, WorkspaceError};

/// Where the loop is, as `ralph status` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// An iteration is running (or about to).
    Running,
    /// A question is waiting for a human.
    WaitingInput,
    /// DONE was signalled and verified.
    Done,
    /// The loop stopped without completing: GUTTER, too many failures, a fatal error.
    Failed,
    /// The loop was stopped by its human (Ctrl-C, SIGTERM, the `stop` timeout policy).
    Stopped,
    /// `max_iterations` ran out.
    MaxIterations,
}

impl Status {
    /// The lowercase name used in JSON and in `ralph status`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::WaitingInput => "waiting_input",
            Status::Done => "done",
            Status::Failed => "failed",
            Status::Stopped => "stopped",
            Status::MaxIterations => "max_iterations",
        }
    }
}

/// How a question reached ralph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RaisedBy {
    /// The agent wrote `.ralph/question.md` and printed `<ralph>QUESTION</ralph>`.
    Signal,
    /// The agent ran `ralph ask`.
    Ask,
    /// The agent's own question tool (Claude Code's AskUserQuestion, answered on its stdin).
    Tool,
}

/// A question waiting for (or past waiting for) an answer, as stored in `state.json`.
///
/// Written only by the [`crate::desk::Desk`]; everyone else reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "PendingFile")]
pub struct PendingQuestion {
    /// Which question it is.
    pub id: QuestionId,
    /// The question (its fields sit beside these in the file).
    #[serde(flatten)]
    pub question: Question,
    /// When it was asked (RFC 3339), for showing how long it has waited; never its identity.
    pub asked_at: String,
    /// When the wait ends (RFC 3339), or `None` for no deadline.
    pub deadline: Option<String>,
    /// The iteration that asked.
    pub iteration: u32,
    /// How it was raised.
    pub raised_by: RaisedBy,
    /// `true` once the deadline passed without an answer (a late answer is still taken).
    #[serde(default)]
    pub timed_out: bool,
    /// `true` while the human is typing an answer: the countdown holds, `deadline` is stale.
    #[serde(default)]
    pub paused: bool,
}

/// [`PendingQuestion`] as read: a file written before questions had ids names its question by
/// `asked_at`, which is then its id.
#[derive(Deserialize)]
struct PendingFile {
    #[serde(default)]
    id: Option<QuestionId>,
    #[serde(flatten)]
    question: Question,
    asked_at: String,
    deadline: Option<String>,
    iteration: u32,
    raised_by: RaisedBy,
    #[serde(default)]
    timed_out: bool,
    #[serde(default)]
    paused: bool,
}

impl From<PendingFile> for PendingQuestion {
    fn from(f: PendingFile) -> Self {
        PendingQuestion {
            id: f
                .id
                .unwrap_or_else(|| QuestionId::from_file(f.asked_at.clone())),
            question: f.question,
            asked_at: f.asked_at,
            deadline: f.deadline,
            iteration: f.iteration,
            raised_by: f.raised_by,
            timed_out: f.timed_out,
            paused: f.paused,
        }
    }
}

impl PendingQuestion {
    /// The stored form of `question`, asked as `id`.
    pub fn new(
        id: QuestionId,
        question: &Question,
        asked_at: SystemTime,
        deadline: Option<SystemTime>,
        iteration: u32,
        raised_by: RaisedBy,
    ) -> Self {
        PendingQuestion {
            id,
            question: Question {
                warning: None,
                ..question.clone()
            },
            asked_at: timestamp(asked_at),
            deadline: deadline.map(timestamp),
            iteration,
            raised_by,
            timed_out: false,
            paused: false,
        }
    }

    /// `asked_at` as a time, if it parses.
    pub fn asked_at_time(&self) -> Option<SystemTime> {
        parse_timestamp(&self.asked_at)
    }

    /// `deadline` as a time, if set and it parses.
    pub fn deadline_time(&self) -> Option<SystemTime> {
        self.deadline.as_deref().and_then(parse_timestamp)
    }
}

/// The whole of `state.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// Where the loop is.
    pub status: Status,
    /// The current (or last) iteration, 1-based; 0 before the first.
    pub iteration: u32,
    /// The iteration limit in force.
    pub max_iterations: u32,
    /// The pid of the `ralph run` that wrote this.
    pub pid: u32,
    /// The process group of the running agent, so a later run can clean up after a crash.
    #[serde(default)]
    pub agent_pgid: Option<i32>,
    /// This run's id (`RALPH_RUN` in the environment of every agent and test command it
    /// starts, see `ralph_process::run_id`), so that a later run can also stop what they
    /// started outside that group, should ralph and its guard both be killed outright. `None`
    /// in files from before it was recorded, and when no loop wrote the file.
    #[serde(default)]
    pub run_id: Option<String>,
    /// The project root.
    pub root: String,
    /// The task's one-line summary.
    pub task: String,
    /// The agent's name (preset or command).
    pub agent: String,
    /// How the agent was chosen, so that a plain `ralph run` resuming this loop starts the
    /// same one. `None` in files from before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_choice: Option<AgentChoice>,
    /// When this run started (RFC 3339).
    pub started_at: String,
    /// When this file was last written (RFC 3339).
    pub updated_at: String,
    /// The question waiting for an answer, if any.
    pub pending_question: Option<PendingQuestion>,
    /// The last signal the agent gave.
    #[serde(default)]
    pub last_signal: Option<String>,
    /// A one-line reason for the final status (why it stopped or failed).
    #[serde(default)]
    pub reason: Option<String>,
    /// Dollars spent so far, when the agent reports cost.
    #[serde(default)]
    pub total_cost_usd: Option<f64>,
    /// The last few questions closed by an answer or a skip, newest last: how a `ralph answer`
    /// that found `answer.md` free learns whether the loop took its answer or an earlier one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub closed_questions: Vec<ClosedQuestion>,
    /// The last checkpoint of the work tree (a commit under `refs/ralph/<run>/`), when the
    /// project is a git repository and checkpoints are on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
    /// The task file's [`task_digest`] when the loop ended with DONE verified: the same task,
    /// run again unchanged, has nothing left to do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done_task: Option<String>,
    /// While the loop waits out an agent's rate limit: when the limit resets (RFC 3339), so
    /// `ralph status` and the fleet view can say until when. `None` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limited_until: Option<String>,
    /// The last session id the agent reported (Claude's `session_id`, Codex's thread id...),
    /// so a loop `ralph land` sends back can resume that conversation. `None` until the agent
    /// reports one, and for agents that never do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_session: Option<String>,
}

/// A task file's fingerprint (SHA-256 of its bytes, in hex), recorded as [`State::done_task`].
pub fn task_digest(task_file: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(task_file)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl State {
    /// Whether this loop ended with DONE verified on exactly this task file.
    pub fn done_with(&self, task_file: &[u8]) -> bool {
        self.status == Status::Done && self.done_task.as_deref() == Some(&task_digest(task_file))
    }
}

/// How a run's agent was chosen: a preset by name, or a command line and how to read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum AgentChoice {
    /// A preset (`--agent NAME`, `agent: NAME`, or the one found on `PATH`).
    Preset {
        /// Its name.
        name: String,
    },
    /// A command line (`--agent-cmd`, or a command line in `agent:`).
    Command {
        /// The command line, run with `sh -c`.
        command: String,
        /// `--agent-format`, when given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        format: Option<String>,
        /// `--agent-resume-cmd`, when given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resume_command: Option<String>,
    },
}

impl AgentChoice {
    /// How a person would name it: the preset's name, or the command line.
    pub fn describe(&self) -> String {
        match self {
            AgentChoice::Preset { name } => name.clone(),
            AgentChoice::Command { command, .. } => format!("`{command}`"),
        }
    }
}

/// A question that is no longer waiting, and what closed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClosedQuestion {
    /// Which question it was.
    #[serde(rename = "question_id", alias = "asked_at")]
    pub id: QuestionId,
    /// Who answered it; `None` when it was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<crate::answer::AnsweredBy>,
    /// The `answer_id` of the answer taken (`None` for a hand-written file or a skip).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_id: Option<String>,
    /// The answer's first line, cut to 200 characters, to tell a later answer who won.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_line: Option<String>,
    /// Closed because its run ended (it had timed out, and the run then finished): a late
    /// answer is refused as too late, not as second.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub run_ended: bool,
}

/// How many closed questions `state.json` remembers.
const CLOSED_KEPT: usize = 8;

impl State {
    /// A state for a workspace where no loop has run yet (used by `ralph ask` without a loop).
    pub fn fresh(ws: &Workspace, agent: &str, max_iterations: u32) -> State {
        let now = timestamp(SystemTime::now());
        State {
            status: Status::Running,
            iteration: 0,
            max_iterations,
            pid: std::process::id(),
            agent_pgid: None,
            run_id: None,
            root: ws.root().display().to_string(),
            task: String::new(),
            agent: agent.to_string(),
            agent_choice: None,
            started_at: now.clone(),
            updated_at: now,
            pending_question: None,
            last_signal: None,
            reason: None,
            closed_questions: Vec::new(),
            checkpoint: None,
            total_cost_usd: None,
            done_task: None,
            rate_limited_until: None,
            agent_session: None,
        }
    }

    /// Closes the waiting question `id`: answered by `answer`, or skipped. Called by the
    /// [`crate::desk::Desk`] only (so the compiler holds it to that: crate-private).
    pub(crate) fn close_question(
        &mut self,
        id: &QuestionId,
        answer: Option<&crate::answer::Answer>,
    ) {
        if self.pending_question.as_ref().is_some_and(|p| &p.id == id) {
            self.pending_question = None;
        }
        self.closed_questions.retain(|c| &c.id != id);
        if self.closed_questions.len() >= CLOSED_KEPT {
            self.closed_questions.remove(0);
        }
        self.closed_questions.push(ClosedQuestion {
            id: id.clone(),
            answered_by: answer.map(|a| a.by),
            answer_id: answer.and_then(|a| a.id.clone()),
            answer_line: answer.map(|a| {
                a.text
                    .lines()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(200)
                    .collect()
            }),
            run_ended: false,
        });
    }

    /// What closed the question `id`, if this state remembers it.
    pub fn closed(&self, id: &QuestionId) -> Option<&ClosedQuestion> {
        self.closed_questions.iter().find(|c| &c.id == id)
    }

    /// Reads `state.json`; `Ok(None)` when there is none yet.
    pub fn load(ws: &Workspace) -> Result<Option<State>, StateError> {
        let path = ws.state();
        let Some(text) = workspace::read_text(&path)? else {
            return Ok(None);
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|problem| StateError::Corrupt {
                path: path.display().to_string(),
                problem,
            })
    }

    /// Writes `state.json` atomically and durably, stamping `updated_at`.
    ///
    /// The new contents reach the disk before the rename, so after a power loss the file is the
    /// old state or the new one, never a torn or empty one.
    pub fn save(&mut self, ws: &Workspace) -> Result<(), StateError> {
        let json = self.stamp_and_encode();
        workspace::write_atomic(&ws.state(), &json)?;
        Ok(())
    }

    /// Stamps `updated_at` and returns what [`State::save`] writes, for a save made elsewhere
    /// (the running loop saves on a blocking thread while the agent runs).
    pub fn stamp_and_encode(&mut self) -> Vec<u8> {
        self.updated_at = timestamp(SystemTime::now());
        let mut json = serde_json::to_vec_pretty(self).expect("state serializes");
        json.push(b'\n');
        json
    }
}

/// Errors reading or writing the state file.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// `state.json` is not valid JSON of the expected shape.
    #[error(
        "{path}: not a ralph state file ({problem}). Repair it, or delete it to start afresh: the iteration count starts again at 1, and a question it records as waiting is no longer shown first."
    )]
    Corrupt {
        /// The file.
        path: String,
        /// The JSON error: in the message, and deliberately not a `source`, which `{:#}`
        /// would print a second time after it.
        problem: serde_json::Error,
    },
    /// Reading or writing failed.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
}

/// `.ralph/ask.json`: a waiting `ralph ask` process's claim on the question it wrote.
///
/// Written by `ralph ask` (its only writer) after `question.md`; a running loop reads it to show
/// the question while the agent waits, and removes it to tell `ralph ask` the human skipped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AskClaim {
    /// The `ralph ask` process.
    pub pid: u32,
    /// When it asked (RFC 3339): with the pid, whether this process is still the asker.
    pub asked_at: String,
    /// The question it asked; `None` in claims from before questions had ids (their
    /// `asked_at` is the id then: [`AskClaim::question_id`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<QuestionId>,
    /// The deadline it was given (RFC 3339), or `None` for none.
    pub deadline: Option<String>,
    /// The question itself (the markdown of `question.md`), so that the claim alone says what
    /// was asked: `question.md` is written after the claim is won. `None` in claims written
    /// before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
}

impl AskClaim {
    /// The question it asked.
    pub fn question_id(&self) -> QuestionId {
        self.id
            .clone()
            .unwrap_or_else(|| QuestionId::from_file(self.asked_at.clone()))
    }

    /// Creates the claim unless one is there already: `Ok(false)` when another `ralph ask`
    /// holds it. Two askers started in the same instant both try, and exactly one wins.
    pub fn create(&self, ws: &Workspace) -> Result<bool, WorkspaceError> {
        let json = serde_json::to_vec(self).expect("claim serializes");
        workspace::create_atomic(&ws.ask_claim(), &json)
    }

    /// Writes the claim atomically.
    pub fn write(&self, ws: &Workspace) -> Result<(), WorkspaceError> {
        let json = serde_json::to_vec(self).expect("claim serializes");
        workspace::write_atomic(&ws.ask_claim(), &json)
    }

    /// Reads the claim, if there is one and it parses.
    pub fn read(ws: &Workspace) -> Option<AskClaim> {
        let text = workspace::read_text(&ws.ask_claim()).ok()??;
        serde_json::from_str(&text).ok()
    }
}

/// Appends one event to `.ralph/events.jsonl`: `{"at": ..., "event": kind, ...fields}`.
///
/// `fields` must serialize to a JSON object; its keys are merged into the line.
pub fn log_event(
    ws: &Workspace,
    kind: &str,
    fields: serde_json::Value,
) -> Result<(), WorkspaceError> {
    let mut line = serde_json::Map::new();
    line.insert("at".into(), timestamp(SystemTime::now()).into());
    line.insert("event".into(), kind.into());
    if let serde_json::Value::Object(map) = fields {
        line.extend(map);
    }
    let mut bytes = serde_json::to_vec(&line).expect("event serializes");
    bytes.push(b'\n');
    workspace::append(&ws.events(), &bytes)
}

/// Reads every event from an `events.jsonl` (tests and `ralph status` use it).
pub fn read_events(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_id_is_saved_and_loaded_and_a_file_from_before_it_still_loads() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path());
        ws.ensure().unwrap();
        let mut state = State::fresh(&ws, "fake", 3);
        state.agent_pgid = Some(4242);
        state.run_id = Some("4242-18c0ffee".into());
        state.save(&ws).unwrap();
        assert_eq!(State::load(&ws).unwrap(), Some(state.clone()));

        // Written before the run's id was recorded: the next run still finds the group.
        let mut old: serde_json::Value = serde_json::from_slice(&state.stamp_and_encode()).unwrap();
        old.as_object_mut().unwrap().remove("run_id");
        workspace::write_atomic(&ws.state(), old.to_string().as_bytes()).unwrap();
        let loaded = State::load(&ws).unwrap().unwrap();
        assert_eq!(loaded.run_id, None);
        assert_eq!(loaded.agent_pgid, Some(4242));
    }
}
