//! Running one agent: its prompt or resume message, its process, its output, its requests.
//!
//! The agent streams; ralph decodes as it reads, forwards what it decoded to the front end,
//! answers what a conversing agent asks of its host, and stops the whole process group when
//! the run ends, times out, or the human stops the loop.

use super::*;

impl Runner {
    /// The name of this attempt's files in `.ralph/logs/`: `run-0003-iter-0007`, and
    /// `run-0003-iter-0007-2`, `-3`, … for further attempts at the same iteration (a retry
    /// after a rate limit), so no attempt's raw output overwrites another's (see [`logs`]).
    fn log_stem(&mut self, iteration: u32) -> String {
        let run = self.log_run;
        if self.log_attempt.0 != iteration {
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
            self.log_attempt = (iteration, attempt);
        }
        logs::stem(run, iteration, self.log_attempt.1)
    }

    /// Steps 2 and 3: build the prompt, run the agent, stream its output.
    pub(super) async fn run_iteration(&mut self, iteration: u32) -> Result<AgentRun, RunError> {
        let settings = self.cfg.settings.clone();
        let progress = workspace::read_text_tail(&self.ws.progress())?.unwrap_or_default();
        let guardrails = workspace::read_text(&self.ws.guardrails())?.unwrap_or_default();
        let template = workspace::read_text(&self.ws.prompt_template())?;
        let carryover = std::mem::take(&mut self.carryover);
        let stem = self.log_stem(iteration);
        let prompt_path = self.ws.logs().join(format!("{stem}.prompt.md"));
        // After an answer, an agent that can resume its session gets the answer as a new
        // message in the same conversation; otherwise (or if that fails) a fresh prompt.
        let resume = match (
            std::mem::take(&mut self.resume_next),
            &self.cfg.agent.resume,
            &self.session_id,
        ) {
            (true, Some(resume), Some(session)) => Some((resume.clone(), session.clone())),
            _ => None,
        };
        let (prompt, invocation) = match &resume {
            Some((resume, session)) => {
                let message = prompt::resume_message(&carryover);
                let invocation = resume(session, &message, &prompt_path);
                self.emit(LoopEvent::Note(format!(
                    "resuming the agent's session {session} with the answer"
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
        let spare = match self.prompt_spare.take() {
            Some(made) => made.await.ok().and_then(Result::ok),
            None => None,
        };
        match spare.map(|f| f.write_to(&prompt_path, prompt.as_bytes())) {
            Some(Ok(())) => {}
            Some(Err(_)) | None => {
                workspace::write_atomic_unsynced(&prompt_path, prompt.as_bytes())?
            }
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
        let spawn_error = |reason| RunError::Spawn {
            command: invocation.command.clone(),
            reason,
        };
        let (spawned, conversation) = if invocation.conversation {
            let (spawned, mut stdin) =
                supervisor::spawn_shell_open(&invocation.command, self.ws.root(), env)
                    .map_err(spawn_error)?;
            if let Some(first) = &invocation.stdin {
                // An agent that dies before reading shows up when it exits; nothing to do here.
                let _ = stdin.write_all(first).await;
                let _ = stdin.flush().await;
            }
            (spawned, Some(stdin))
        } else {
            let stdin = invocation.stdin.clone();
            let spawned = supervisor::spawn_shell(&invocation.command, self.ws.root(), env, stdin)
                .map_err(spawn_error)?;
            (spawned, None)
        };
        self.group_started(spawned.pgid);
        self.save_state_soon().await?;
        // The next iteration's prompt file, made now rather than between two agents.
        let logs = self.ws.logs();
        self.prompt_spare = Some(tokio::task::spawn_blocking(move || {
            workspace::SpareFile::new_in(&logs)
        }));

        let mut run = self
            .stream_agent(spawned, conversation, iteration, started, timeout)
            .await?;
        run.command = invocation.command.clone();
        if let Some(id) = &run.session_id {
            self.session_id = Some(id.clone());
        }
        if let Some((_, session)) = &resume
            && !run.interrupted
            && run.signals.is_empty()
            && (run.timed_out || run.exit.is_some_and(|s| !s.success()))
        {
            // The resume did not take (an expired session, say): nothing is lost, the next
            // iteration starts fresh and carries the answer in its prompt.
            let why = run
                .errors
                .last()
                .cloned()
                .unwrap_or_else(|| run.describe(timeout));
            self.emit(LoopEvent::Warning(format!(
                "resuming session {session} failed ({why}); the next iteration starts fresh and carries the answer"
            )))
            .await;
            self.log(
                "resume_failed",
                json!({"iteration": iteration, "session": session, "why": why}),
            );
            // What this iteration added (an answer whose asker was gone) goes after it.
            let added = std::mem::replace(&mut self.carryover, carryover);
            self.carryover.extend(added);
            self.resume_failed = true;
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
            json!({"iteration": iteration, "how": how, "seconds": elapsed.as_secs_f64(), "signals": run.signals, "timed_out": run.timed_out, "interrupted": run.interrupted}),
        );
        Ok(run)
    }

    pub(super) async fn stream_agent(
        &mut self,
        spawned: supervisor::Spawned,
        mut conversation: Option<ChildStdin>,
        iteration: u32,
        started: Instant,
        timeout: Option<Duration>,
    ) -> Result<AgentRun, RunError> {
        let supervisor::Spawned {
            mut child,
            pgid,
            mut stdout,
            mut stderr,
        } = spawned;
        let settings = self.cfg.settings.clone();
        let stem = self.log_stem(iteration);
        let mut out_log = LogFile::new(self.ws.logs().join(format!("{stem}.out")));
        let mut err_log = LogFile::new(self.ws.logs().join(format!("{stem}.err")));

        let mut decoder = Decoder::new(self.cfg.agent.format);
        let mut decoded = Vec::with_capacity(64);
        let mut stderr_lines = LineSplitter::default();
        let mut out_buf = vec![0u8; 64 * 1024];
        let mut err_buf = vec![0u8; 16 * 1024];
        let (mut out_open, mut err_open) = (true, true);
        let mut run = AgentRun::default();

        let far = started + Duration::from_secs(100 * 365 * 24 * 3600);
        let iteration_deadline = timeout.map(|t| started + t).unwrap_or(far);
        let mut grace_deadline = far;
        let mut kill_at = far;
        let mut drain_deadline = far;
        // What was stopped outside the agent's group before the end (see `orphans`), and
        // what marks the processes to look for.
        let mut early = orphans::Swept::default();
        let mark = self.mark();
        let mut term_sent = false;
        let mut asking: Option<Open> = None;

        loop {
            if run.exit.is_some() && !out_open && !err_open {
                break;
            }
            let ask_wake = asking.as_ref().map(Open::wake).unwrap_or(far);
            tokio::select! {
                r = stdout.read(&mut out_buf), if out_open => match r {
                    Ok(0) | Err(_) => {
                        out_open = false;
                        decoder.finish(&mut decoded);
                        self.forward(&mut decoded, &mut run, &mut grace_deadline, settings.signal_grace).await;
                        self.serve_agent(&mut run, &mut conversation, &mut asking, iteration).await?;
                    }
                    Ok(n) => {
                        out_log.write(&out_buf[..n]);
                        decoder.feed(&out_buf[..n], &mut decoded);
                        self.forward(&mut decoded, &mut run, &mut grace_deadline, settings.signal_grace).await;
                        self.serve_agent(&mut run, &mut conversation, &mut asking, iteration).await?;
                    }
                },
                r = stderr.read(&mut err_buf), if err_open => match r {
                    Ok(0) | Err(_) => {
                        err_open = false;
                        if let Some(line) = stderr_lines.finish() {
                            self.emit(LoopEvent::Stderr(line)).await;
                        }
                    }
                    Ok(n) => {
                        err_log.write(&err_buf[..n]);
                        for line in stderr_lines.feed(&err_buf[..n]) {
                            self.emit(LoopEvent::Stderr(line)).await;
                        }
                    }
                },
                status = child.wait(), if run.exit.is_none() => {
                    run.exit = status.ok();
                    if run.exit.is_none() {
                        // Could not wait (should not happen); make sure nothing is left behind.
                        supervisor::kill_group_now(pgid);
                    }
                    if out_open || err_open {
                        // Something the agent started still holds its output open: in its
                        // group, or outside it (see `orphans`).
                        early = early.and(orphans::terminate(&mark, pgid));
                        if !term_sent {
                            term_sent = true;
                            term_group(pgid);
                            kill_at = Instant::now() + settings.kill_grace;
                        }
                    }
                    drain_deadline = drain_deadline.min(Instant::now() + settings.kill_grace + Duration::from_secs(2));
                },
                () = tokio::time::sleep_until(iteration_deadline), if run.exit.is_none() && !run.timed_out => {
                    run.timed_out = true;
                    let msg = format!("iteration {iteration} ran past iteration_timeout; stopping the agent");
                    self.emit(LoopEvent::Warning(msg)).await;
                    if !term_sent {
                        term_sent = true;
                        term_group(pgid);
                        kill_at = Instant::now() + settings.kill_grace;
                    }
                },
                () = tokio::time::sleep_until(grace_deadline), if run.exit.is_none() && !term_sent => {
                    self.emit(LoopEvent::Note("the agent did not end its turn after its signal; stopping it".into())).await;
                    term_sent = true;
                    term_group(pgid);
                    kill_at = Instant::now() + settings.kill_grace;
                },
                () = tokio::time::sleep_until(kill_at) => {
                    supervisor::kill_group_now(pgid);
                    self.log("agent_killed", json!({"iteration": iteration, "pgid": pgid}));
                    kill_at = far;
                    drain_deadline = drain_deadline.min(Instant::now() + Duration::from_secs(2));
                },
                () = tokio::time::sleep_until(drain_deadline) => {
                    // The pipes are held open by something outside the group; stop reading.
                    break;
                },
                Some(()) = self.fs_events.recv() => {
                    match asking.as_mut() {
                        None => asking = self.notice_ask(iteration).await?,
                        Some(open) => {
                            if let Some(end) = self.question_step(open, Step::Files).await? {
                                let open = asking.take().expect("checked above");
                                asking = self.end_asking(open, end, &mut conversation, iteration).await?;
                            }
                        }
                    }
                },
                () = tokio::time::sleep_until(ask_wake) => {
                    if let Some(open) = asking.as_mut()
                        && let Some(end) = self.question_step(open, Step::Wake).await?
                    {
                        let open = asking.take().expect("checked above");
                        asking = self.end_asking(open, end, &mut conversation, iteration).await?;
                    }
                },
                c = self.controls.next() => match c {
                    c @ (Control::Answer(_) | Control::Skip | Control::Typing | Control::Extend) => {
                        if let Some(open) = asking.as_mut()
                            && let Some(end) = self.question_step(open, Step::Control(c)).await?
                        {
                            let open = asking.take().expect("checked above");
                            asking = self.end_asking(open, end, &mut conversation, iteration).await?;
                        }
                    }
                    Control::Stop if !run.interrupted => {
                        run.interrupted = true;
                        self.emit(LoopEvent::Note("stopping the agent (Ctrl-C again to kill it now)".into())).await;
                        if !term_sent {
                            term_sent = true;
                            term_group(pgid);
                            kill_at = Instant::now() + settings.kill_grace;
                        }
                    }
                    Control::Stop | Control::Kill => {
                        run.interrupted = true;
                        supervisor::kill_group_now(pgid);
                        kill_at = far;
                        drain_deadline = drain_deadline.min(Instant::now() + Duration::from_secs(2));
                    }
                },
            }
        }
        out_log.finish();
        err_log.finish();
        if run.exit.is_none() {
            run.exit = child.try_wait().ok().flatten();
            if run.exit.is_none() {
                supervisor::kill_group_now(pgid);
                run.exit = child.wait().await.ok();
            }
        }
        // Anything still alive in the group (it closed its output, or ignored SIGTERM), then
        // what left the group (see `orphans`): one Ctrl-C more cuts both graces short.
        let (stopped, swept) = {
            use futures_util::FutureExt;
            let hurried = std::sync::atomic::AtomicBool::new(false);
            let hurry = async {
                self.controls.stop_requested().await;
                run.interrupted = true;
                hurried.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            .fuse();
            tokio::pin!(hurry);
            let stopped = supervisor::stop_group(pgid, settings.kill_grace, hurry.as_mut()).await;
            let grace = if hurried.load(std::sync::atomic::Ordering::Relaxed) {
                Duration::ZERO
            } else {
                settings.kill_grace
            };
            (stopped, orphans::sweep(&mark, pgid, grace, hurry).await)
        };
        if stopped != supervisor::Stopped::AlreadyGone {
            let msg = format!("processes the agent left behind were stopped ({stopped:?})");
            self.emit(LoopEvent::Note(msg.clone())).await;
            self.log(
                "leftovers_stopped",
                json!({"iteration": iteration, "how": format!("{stopped:?}")}),
            );
        }
        self.report_swept(early.and(swept), iteration, "agent")
            .await;
        run.asking = asking;
        Ok(run)
    }

    /// Sends decoded agent events on, noting signals and arming the post-signal grace.
    ///
    /// Everything for display goes out as one batch per call, in order; a signal flushes the
    /// batch first so the front end sees the line that carried it before the signal itself.
    pub(super) async fn forward(
        &mut self,
        decoded: &mut Vec<AgentEvent>,
        run: &mut AgentRun,
        grace_deadline: &mut Instant,
        grace: Duration,
    ) {
        let mut batch = Vec::with_capacity(decoded.len());
        for event in decoded.drain(..) {
            match event {
                AgentEvent::Signal(signal) => {
                    if run.signals.is_empty() {
                        *grace_deadline = Instant::now() + grace;
                    }
                    run.signals.push(signal.kind);
                    self.state.last_signal = Some(format!("{:?}", signal.kind).to_uppercase());
                    self.log(
                        "signal",
                        json!({"iteration": self.state.iteration, "signal": signal.kind, "line": signal.line, "line_number": signal.line_number}),
                    );
                    self.flush(&mut batch).await;
                    let _ = self.events.send(LoopEvent::Signal(signal)).await;
                }
                AgentEvent::Usage(usage) => {
                    if let Some(cost) = usage.cost_usd {
                        *self.state.total_cost_usd.get_or_insert(0.0) += cost;
                    }
                    self.log(
                        "usage",
                        json!({"iteration": self.state.iteration, "usage": usage}),
                    );
                    batch.push(AgentEvent::Usage(usage));
                }
                AgentEvent::ControlRequest(line) => run.requests.push(line),
                AgentEvent::RateLimited {
                    retry_after,
                    message,
                } => {
                    self.log(
                        "rate_limited",
                        json!({"iteration": self.state.iteration, "message": message, "retry_after_seconds": retry_after.map(|d| d.as_secs_f64())}),
                    );
                    // Keep the longest wait any report suggested; a later report may not say.
                    let known = run.rate_limited.as_ref().and_then(|(after, _)| *after);
                    let after = match (known, retry_after) {
                        (Some(a), Some(b)) => Some(a.max(b)),
                        (a, b) => a.or(b),
                    };
                    run.rate_limited = Some((after, message.clone()));
                    batch.push(AgentEvent::RateLimited {
                        retry_after,
                        message,
                    });
                }
                AgentEvent::TurnEnd { result } => {
                    run.turn_ended = true;
                    batch.push(AgentEvent::TurnEnd { result });
                }
                AgentEvent::SessionId(id) => {
                    run.session_id = Some(id.clone());
                    batch.push(AgentEvent::SessionId(id));
                }
                AgentEvent::Error(e) => {
                    self.log(
                        "agent_error",
                        json!({"iteration": self.state.iteration, "message": e}),
                    );
                    run.errors.push(e.clone());
                    batch.push(AgentEvent::Error(e));
                }
                other => batch.push(other),
            }
        }
        self.flush(&mut batch).await;
    }

    /// Sends what `forward` gathered as one message.
    async fn flush(&self, batch: &mut Vec<AgentEvent>) {
        match batch.len() {
            0 => {}
            1 => {
                let event = batch.pop().expect("one event");
                let _ = self.events.send(LoopEvent::Agent(event)).await;
            }
            _ => {
                let _ = self
                    .events
                    .send(LoopEvent::AgentBatch(std::mem::take(batch)))
                    .await;
            }
        }
    }

    /// Waits out a rate limit; `true` if the human stopped the loop meanwhile.
    pub(super) async fn back_off(&mut self, wait: Duration, reason: &str) -> bool {
        let until = Instant::now() + wait;
        self.log(
            "backoff",
            json!({"iteration": self.state.iteration, "seconds": wait.as_secs_f64(), "reason": reason}),
        );
        self.emit(LoopEvent::Backoff {
            until: until.into_std(),
            reason: reason.to_string(),
        })
        .await;
        tokio::select! {
            () = tokio::time::sleep_until(until) => false,
            () = self.controls.stop_requested() => true,
        }
    }

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
            let mut questions: std::collections::VecDeque<Question> = request.questions().into();
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
}

/// Writes one line to a conversing agent's stdin; an agent that has gone is seen when it exits.
pub(super) async fn write_line(stdin: &mut Option<ChildStdin>, line: &str) {
    if let Some(pipe) = stdin.as_mut()
        && (pipe.write_all(line.as_bytes()).await.is_err() || pipe.flush().await.is_err())
    {
        *stdin = None;
    }
}

pub(super) fn term_group(pgid: i32) {
    use nix::sys::signal::{Signal as Sig, killpg};
    let _ = killpg(nix::unistd::Pid::from_raw(pgid), Sig::SIGTERM);
    let _ = killpg(nix::unistd::Pid::from_raw(pgid), Sig::SIGCONT);
}

/// Raw output of one agent run, on disk; capped so a runaway agent cannot fill the disk.
///
/// The file is created when the first bytes arrive, not before the agent starts: on a busy
/// ext4 disk a create waits for the journal (a millisecond or more), which would otherwise sit
/// between one agent and the next; and an agent that prints nothing on a stream leaves no
/// empty file for it.
struct LogFile {
    file: Option<std::io::BufWriter<std::fs::File>>,
    /// Whether creating the file was tried (it is tried once).
    opened: bool,
    written: u64,
    path: PathBuf,
}

/// Per-stream cap on what `.ralph/logs/` keeps of one iteration.
const LOG_CAP: u64 = 256 * 1024 * 1024;

impl LogFile {
    fn new(path: PathBuf) -> Self {
        LogFile {
            file: None,
            opened: false,
            written: 0,
            path,
        }
    }

    fn open(path: &Path) -> Option<std::io::BufWriter<std::fs::File>> {
        crate::workspace::open_plain(
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true),
            path,
        )
        .ok()
        .map(|f| std::io::BufWriter::with_capacity(256 * 1024, f))
    }

    fn write(&mut self, bytes: &[u8]) {
        use std::io::Write;
        if !self.opened && !bytes.is_empty() {
            self.opened = true;
            self.file = Self::open(&self.path);
        }
        let Some(file) = self.file.as_mut() else {
            return;
        };
        let room = LOG_CAP.saturating_sub(self.written) as usize;
        let take = bytes.len().min(room);
        if file.write_all(&bytes[..take]).is_err() {
            self.file = None;
            return;
        }
        self.written += take as u64;
        if take < bytes.len() {
            let _ = write!(
                file,
                "\n[ralph: log cut at {LOG_CAP} bytes; see {}]\n",
                self.path.display()
            );
            self.file = None;
        }
    }

    fn finish(&mut self) {
        use std::io::Write;
        if let Some(f) = self.file.as_mut() {
            let _ = f.flush();
        }
    }
}

/// Splits stderr into display lines: bounded, sanitized.
#[derive(Default)]
struct LineSplitter {
    partial: Vec<u8>,
}

const STDERR_LINE_CAP: usize = 4096;

impl LineSplitter {
    fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut lines = Vec::new();
        let mut rest = bytes;
        while let Some(i) = memchr_newline(rest) {
            self.push_capped(&rest[..i]);
            lines.push(self.take());
            rest = &rest[i + 1..];
        }
        self.push_capped(rest);
        lines
    }

    fn push_capped(&mut self, bytes: &[u8]) {
        let room = STDERR_LINE_CAP.saturating_sub(self.partial.len());
        self.partial
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    fn take(&mut self) -> String {
        let line = ralph_signal::sanitize(&String::from_utf8_lossy(&self.partial));
        self.partial.clear();
        line
    }

    fn finish(&mut self) -> Option<String> {
        (!self.partial.is_empty()).then(|| self.take())
    }
}

pub(super) fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|b| *b == b'\n')
}

impl Runner {
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

/// What one run of the agent amounted to.
#[derive(Debug, Default)]
pub(super) struct AgentRun {
    /// The command line `sh -c` was given.
    pub(super) command: String,
    pub(super) signals: Vec<SignalKind>,
    pub(super) exit: Option<ExitStatus>,
    pub(super) timed_out: bool,
    pub(super) interrupted: bool,
    /// A `ralph ask` question still open when the agent ended (it was killed while asking).
    pub(super) asking: Option<Open>,
    /// The agent's session id, when its stream reports one.
    pub(super) session_id: Option<String>,
    /// Errors the agent reported (API errors, failed resumes).
    pub(super) errors: Vec<String>,
    /// Requests from the agent not yet answered (`control_request` lines).
    pub(super) requests: Vec<String>,
    /// The agent said its turn is over.
    pub(super) turn_ended: bool,
    /// The agent reported a rate limit (how long it suggests waiting, and its words).
    pub(super) rate_limited: Option<(Option<Duration>, String)>,
}

impl AgentRun {
    pub(super) fn saw(&self, kind: SignalKind) -> bool {
        self.signals.contains(&kind)
    }

    pub(super) fn describe(&self, timeout: Option<Duration>) -> String {
        if self.interrupted {
            return "was stopped (interrupted)".into();
        }
        if self.timed_out {
            let limit = timeout
                .map(|t| humantime::format_duration(t).to_string())
                .unwrap_or_default();
            return format!("ran past iteration_timeout ({limit}) and was stopped");
        }
        match &self.exit {
            Some(status) => describe_exit(status),
            None => "ended".into(),
        }
    }

    /// Whether the loop goes straight on from this run to the next agent (or to the final
    /// save): no signal to act on, no question, no rate limit to wait out, no interruption.
    ///
    /// After such a run `state.json` is not saved until the next agent starts, a millisecond
    /// later: what it would record (no agent running) matters to nobody in between, and a
    /// crash in that window leaves a process group that the next run finds gone.
    pub(super) fn leads_straight_on(&self) -> bool {
        self.signals.is_empty()
            && self.rate_limited.is_none()
            && self.asking.is_none()
            && !self.interrupted
    }

    pub(super) fn failed(&self) -> bool {
        self.timed_out || self.exit.is_some_and(|s| !s.success()) && self.signals.is_empty()
    }

    /// Why the agent's command could not be started, when that is how this run ended: `sh`
    /// exits 127 for a command not found and 126 for one it cannot execute. Asked of the
    /// first run only: an agent that once ran may exit 127 for reasons of its own.
    pub(super) fn not_runnable(&self) -> Option<String> {
        if !self.signals.is_empty() || self.interrupted || self.timed_out {
            return None;
        }
        let program = self.command.split_whitespace().next().unwrap_or("");
        let program = program.trim_matches(|c| c == '\'' || c == '"');
        let what = match self.exit?.code()? {
            127 => "was not found",
            126 => "was found but cannot be run (not executable, or not a program)",
            _ => return None,
        };
        Some(format!(
            "the agent's command {what}: `{program}` (the first word of `{}`; exit {} from sh). Check --agent-cmd or agent: in the task file, and PATH",
            self.command,
            self.exit?.code()?
        ))
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
