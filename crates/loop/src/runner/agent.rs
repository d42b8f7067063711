//! Starting one agent: its prompt or resume message, its log names, its environment, its
//! process group; then [`stream`](super::stream) reads it, and what it amounted to is an
//! [`AgentRun`].

use ralph_protocol::{
    LoopEvent, SpareFile, Status, Workspace, read_text, read_text_tail, write_atomic_unsynced,
};
use serde_json::json;
use tokio::time::Instant;

use super::agent_run::AgentRun;
use super::groups::marks;
use super::policy::AgentEnd;
use super::settings::wait_duration;
use super::{RunError, Runner};
use crate::logs;
use crate::prompt::{self, PromptInputs};

impl Runner {
    /// The name of this attempt's files in `.ralph/logs/`: `run-0003-iter-0007`, and
    /// `run-0003-iter-0007-2`, `-3`, … for further attempts at the same iteration (a retry
    /// after a rate limit), so no attempt's raw output overwrites another's (see [`logs`]).
    pub(super) fn log_stem(&mut self, iteration: u32) -> String {
        let run = self.record.log_run;
        if self.record.log_attempt.0 != iteration {
            // A new iteration: its first attempt, unless files by that name are there already
            // (one `stat`, answered from the dentry cache).
            let mut attempt = 1;
            while self
                .ws
                .logs()
                .join(format!("{}.prompt.md", logs::stem(run, iteration, attempt)))
                .exists()
            {
                attempt += 1;
            }
            self.record.log_attempt = (iteration, attempt);
        }
        logs::stem(run, iteration, self.record.log_attempt.1)
    }

    /// Steps 2 and 3: build the prompt, run the agent, stream its output.
    pub(super) async fn run_iteration(&mut self, iteration: u32) -> Result<AgentRun, RunError> {
        let settings = self.cfg.settings.clone();
        let progress = read_text_tail(&self.ws.progress())?.unwrap_or_default();
        let guardrails = read_text(&self.ws.guardrails())?.unwrap_or_default();
        let template = read_text(&self.ws.prompt_template())?;
        let carryover = std::mem::take(&mut self.session.carryover);
        let stem = self.log_stem(iteration);
        let prompt_path = self.ws.logs().join(format!("{stem}.prompt.md"));
        // After an answer (or a landing sent back), an agent that can resume its session gets
        // it as a new message in the same conversation; otherwise (or if that fails) a fresh
        // prompt.
        let resume = match (
            std::mem::take(&mut self.session.resume_next),
            &self.cfg.agent.resume,
            &self.session.id,
        ) {
            (true, Some(resume), Some(session)) => Some((resume.clone(), session.clone())),
            _ => None,
        };
        let (prompt, invocation) = match &resume {
            Some((resume, session)) => {
                let message = prompt::resume_message(&carryover);
                let invocation = resume(session, &message, &prompt_path);
                self.emit(LoopEvent::Note(format!(
                    "resuming the agent's session {session} with what happened since its last turn"
                )))
                .await;
                (message, invocation)
            }
            None => {
                let task_name = self.task_name();
                let prompt = prompt::build(&PromptInputs {
                    task: &self.cfg.task,
                    task_name: &task_name,
                    iteration,
                    max_iterations: settings.max_iterations,
                    progress: &progress,
                    guardrails: &guardrails,
                    carryover: &carryover,
                    template: template.as_deref(),
                });
                let invocation = (self.cfg.agent.fresh)(&prompt, &prompt_path);
                (prompt, invocation)
            }
        };
        // A record the agent reads, not state: readers need the rename, not a sync. Into the
        // file made while the previous agent ran, when there is one.
        let spare = match self.record.prompt_spare.take() {
            Some(made) => made.await.ok().and_then(Result::ok),
            None => None,
        };
        match spare.map(|f| f.write_to(&prompt_path, prompt.as_bytes())) {
            Some(Ok(())) => {}
            Some(Err(_)) | None => write_atomic_unsynced(&prompt_path, prompt.as_bytes())?,
        }

        let started = Instant::now();
        let timeout = wait_duration(settings.iteration_timeout);
        self.state.status = Status::Running;
        self.state.iteration = iteration;
        self.emit(LoopEvent::IterationStarted {
            iteration,
            max_iterations: settings.max_iterations,
            at: started.into_std(),
            timeout,
        })
        .await;
        self.log(
            "iteration_start",
            json!({"iteration": iteration, "prompt": prompt_path.display().to_string(), "carryover": carryover.len(), "resumed_session": resume.as_ref().map(|r| r.1.clone())}),
        );

        let mut env = agent_env(&self.ws, &self.cfg.task_path, iteration, &prompt_path);
        env.extend(invocation.env.iter().cloned());
        let (spawned, conversation) = self.start_agent(&invocation, env).await?;
        self.group_started(spawned.pgid);
        self.save_state_soon().await?;
        // The next iteration's prompt file, made now rather than between two agents.
        let logs = self.ws.logs();
        self.record.prompt_spare = Some(tokio::task::spawn_blocking(move || {
            SpareFile::new_in(&logs)
        }));

        let mut run = self
            .stream_agent(spawned, conversation, iteration, started, timeout)
            .await?;
        run.command = invocation.command.clone();
        if let Some(id) = &run.session_id {
            self.session.id = Some(id.clone());
            self.state.agent_session = Some(id.clone());
        }
        if let Some((_, session)) = &resume
            && run.resume_did_not_take()
        {
            // The resume did not take (an expired session, say): nothing is lost, the next
            // iteration starts fresh and carries the answer in its prompt.
            let why = run
                .errors
                .last()
                .cloned()
                .unwrap_or_else(|| run.describe(timeout));
            self.emit(LoopEvent::Warning(format!(
                "resuming session {session} failed ({why}); the next iteration starts fresh with the same message in its prompt"
            )))
            .await;
            self.log(
                "resume_failed",
                json!({"iteration": iteration, "session": session, "why": why}),
            );
            // What this iteration added (an answer whose asker was gone) goes after it.
            let added = std::mem::replace(&mut self.session.carryover, carryover);
            self.session.carryover.extend(added);
            run.resume_failed = true;
        }

        self.group_ended();
        if !run.leads_straight_on() {
            self.save_state_soon().await?;
        }
        let how = run.describe(timeout);
        let elapsed = started.elapsed();
        self.emit(LoopEvent::IterationEnded {
            iteration,
            how: how.clone(),
            elapsed,
        })
        .await;
        self.log(
            "iteration_end",
            json!({"iteration": iteration, "how": how, "seconds": elapsed.as_secs_f64(), "signals": run.signals, "timed_out": run.end() == AgentEnd::TimedOut, "interrupted": run.end() == AgentEnd::Interrupted}),
        );
        Ok(run)
    }
}

/// The environment an agent runs with, on top of ralph's own.
pub(super) fn agent_env(
    ws: &Workspace,
    task_path: &std::path::Path,
    iteration: u32,
    prompt_path: &std::path::Path,
) -> Vec<(String, String)> {
    let abs = |p: &std::path::Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let mut env: Vec<(String, String)> = marks(ws.dir())
        .into_iter()
        .map(|(name, value)| (name.to_string(), value))
        .collect();
    env.extend([
        ("RALPH_ITERATION".to_string(), iteration.to_string()),
        (
            "RALPH_TASK_FILE".to_string(),
            abs(task_path).display().to_string(),
        ),
        (
            "RALPH_PROMPT_FILE".to_string(),
            abs(prompt_path).display().to_string(),
        ),
    ]);
    // So the agent can run `ralph ask` even when ralph is not on its PATH. Looked up once: the
    // path stays right if the binary is replaced while the loop runs (the link would then end
    // in " (deleted)").
    static EXE: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    if let Some(exe) = EXE.get_or_init(|| std::env::current_exe().ok()) {
        env.push(("RALPH_BIN".to_string(), exe.display().to_string()));
        if let Some(dir) = exe.parent() {
            let path = std::env::var("PATH").unwrap_or_default();
            env.push(("PATH".to_string(), format!("{}:{path}", dir.display())));
        }
    }
    env
}
