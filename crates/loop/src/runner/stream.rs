//! The agent while it runs: its output read, logged and decoded as it streams, its questions
//! served, and its process group stopped when the run ends, times out, or the human stops it.
//!
//! The group's life (SIGTERM once, SIGKILL after the grace, how long output is still read)
//! is [`Group`]'s, in `ralph-process`; this module decides when to ask for a stop, and reads.

use ralph_process::{Swept, kill_group_now, terminate};
use std::time::Duration;

use ralph_process::{Group, GroupDue};

use ralph_process::Spawned;
use ralph_protocol::{Control, LoopEvent};
use ralph_signal::{AgentEvent, Decoder};
use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};
use tokio::time::Instant;

use super::agent_run::{AgentRun, Cut};
use super::leftovers::Leftovers;
use super::policy;
use super::questions::{Open, Step};
use super::raw_log::RawLog;
use super::stderr_lines::StderrLines;
use super::{RunError, Runner};

/// The agent's two output pipes: read, logged raw, and decoded (stdout) or split into display
/// lines (stderr), until each reaches its end.
struct Output {
    stdout: ChildStdout,
    stderr: ChildStderr,
    out_open: bool,
    err_open: bool,
    out_buf: Vec<u8>,
    err_buf: Vec<u8>,
    out_log: RawLog,
    err_log: RawLog,
    decoder: Decoder,
    decoded: Vec<AgentEvent>,
    stderr_lines: StderrLines,
}

impl Output {
    /// Whether either pipe is still open.
    fn open(&self) -> bool {
        self.out_open || self.err_open
    }
}

/// The instants at which the runner stops an agent of its own accord.
#[derive(Debug, Default)]
pub(super) struct StopAt {
    /// `iteration_timeout` runs out.
    timeout: Option<Instant>,
    /// The agent signalled and `signal_grace` has passed without its turn ending.
    after_signal: Option<Instant>,
}

impl StopAt {
    /// After a signal, the agent has `grace` to end its turn (armed by the first signal only).
    pub(super) fn signalled(&mut self, grace: Duration) {
        self.after_signal
            .get_or_insert_with(|| Instant::now() + grace);
    }
}

/// Sleeps until `at`, or forever when there is no `at`.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

impl Runner {
    /// Step 3: reads the agent until it ends and its output is drained, serving what it asks
    /// on the way, then stops what it left behind.
    pub(super) async fn stream_agent(
        &mut self,
        spawned: Spawned,
        mut conversation: Option<ChildStdin>,
        iteration: u32,
        started: Instant,
        timeout: Option<Duration>,
    ) -> Result<AgentRun, RunError> {
        let Spawned {
            mut child,
            pgid,
            stdout,
            stderr,
        } = spawned;
        let settings = self.cfg.settings.clone();
        let stem = self.log_stem(iteration);
        let logs = self.ws.logs();
        let log_cap = settings.log_budget.stream_cap();
        let mut out = Output {
            stdout,
            stderr,
            out_open: true,
            err_open: true,
            out_buf: vec![0u8; 64 * 1024],
            err_buf: vec![0u8; 16 * 1024],
            out_log: RawLog::new(logs.join(format!("{stem}.out")), log_cap),
            err_log: RawLog::new(logs.join(format!("{stem}.err")), log_cap),
            decoder: Decoder::new(self.cfg.agent.format),
            decoded: Vec::with_capacity(64),
            stderr_lines: StderrLines::default(),
        };
        let mut group = Group::new(pgid, settings.kill_grace);
        let mut run = AgentRun::default();
        let mut stop_at = StopAt {
            timeout: timeout.map(|t| started + t),
            after_signal: None,
        };
        // What was stopped outside the agent's group before the end (see `orphans`), and
        // what marks the processes to look for.
        let mut early = Swept::default();
        let mark = self.mark();
        let mut asking: Option<Open> = None;

        while !group.leader_exited() || out.open() {
            let running = !group.leader_exited();
            let ask_wake = asking.as_ref().map(Open::wake);
            tokio::select! {
                r = out.stdout.read(&mut out.out_buf), if out.out_open => {
                    match r {
                        Ok(0) | Err(_) => {
                            out.out_open = false;
                            out.decoder.finish(&mut out.decoded);
                        }
                        Ok(n) => {
                            out.out_log.write(&out.out_buf[..n]);
                            self.note_denials(false, &out.out_buf[..n]).await;
                            if n < out.out_buf.len() {
                                // Caught up with the agent: what it printed is in the log for
                                // `ralph logs -f` now, not when 256 KiB have gathered. A flood
                                // (full reads) is still written in big blocks.
                                out.out_log.flush();
                            }
                            out.decoder.feed(&out.out_buf[..n], &mut out.decoded);
                        }
                    }
                    self.forward(&mut out.decoded, &mut run, &mut stop_at, settings.signal_grace).await;
                    self.serve_agent(&mut run, &mut conversation, &mut asking, iteration).await?;
                },
                r = out.stderr.read(&mut out.err_buf), if out.err_open => match r {
                    Ok(0) | Err(_) => {
                        out.err_open = false;
                        if let Some(line) = out.stderr_lines.finish() {
                            self.emit(LoopEvent::Stderr(line)).await;
                        }
                    }
                    Ok(n) => {
                        out.err_log.write(&out.err_buf[..n]);
                        self.note_denials(true, &out.err_buf[..n]).await;
                        for line in out.stderr_lines.feed(&out.err_buf[..n]) {
                            self.emit(LoopEvent::Stderr(line)).await;
                        }
                    }
                },
                status = child.wait(), if running => {
                    run.exit = status.ok();
                    if out.open() {
                        // Something the agent started still holds its output open: in its
                        // group, or outside it (see `orphans`).
                        early = early.and(terminate(&mark, pgid));
                    }
                    group.exited(run.exit.is_some(), out.open(), Instant::now());
                },
                () = sleep_until(stop_at.timeout), if running && run.cut.is_none() => {
                    run.cut = Some(Cut::TimedOut);
                    let msg = format!("iteration {iteration} ran past iteration_timeout; stopping the agent");
                    self.emit(LoopEvent::Warning(msg)).await;
                    group.terminate(Instant::now());
                },
                () = sleep_until(stop_at.after_signal), if running && !group.stopping() => {
                    self.emit(LoopEvent::Note("the agent did not end its turn after its signal; stopping it".into())).await;
                    group.terminate(Instant::now());
                },
                () = sleep_until(group.deadline()) => match group.on_deadline(Instant::now()) {
                    GroupDue::Killed => self.log("agent_killed", json!({"iteration": iteration, "pgid": pgid})),
                    // The pipes are held open by something outside the group; stop reading.
                    GroupDue::StopReading => break,
                    GroupDue::Nothing => {}
                },
                Some(()) = self.io.fs_events.recv() => {
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
                () = sleep_until(ask_wake) => {
                    if let Some(open) = asking.as_mut()
                        && let Some(end) = self.question_step(open, Step::Wake).await?
                    {
                        let open = asking.take().expect("checked above");
                        asking = self.end_asking(open, end, &mut conversation, iteration).await?;
                    }
                },
                c = self.io.controls.next() => match c {
                    c @ (Control::Answer(_) | Control::Skip | Control::Typing | Control::Extend) => {
                        if let Some(open) = asking.as_mut()
                            && let Some(end) = self.question_step(open, Step::Control(c)).await?
                        {
                            let open = asking.take().expect("checked above");
                            asking = self.end_asking(open, end, &mut conversation, iteration).await?;
                        }
                    }
                    Control::Stop if run.cut != Some(Cut::Interrupted) => {
                        run.cut = Some(Cut::Interrupted);
                        self.emit(LoopEvent::Note("stopping the agent (Ctrl-C again to kill it now)".into())).await;
                        group.terminate(Instant::now());
                    }
                    Control::Stop | Control::Kill => {
                        run.cut = Some(Cut::Interrupted);
                        group.kill(Instant::now());
                    }
                },
            }
        }
        out.out_log.finish();
        out.err_log.finish();
        if !group.leader_exited() {
            run.exit = child.try_wait().ok().flatten();
            if run.exit.is_none() {
                kill_group_now(pgid);
                run.exit = child.wait().await.ok();
            }
        }
        run.asking = asking;
        // Anything still alive in the group (it closed its output, or ignored SIGTERM), then
        // what left the group (see `orphans`): stopped now, or beside the question that comes
        // next (see `leftovers`).
        let leftovers = Leftovers {
            pgid,
            mark,
            grace: settings.kill_grace,
            early,
            iteration,
        };
        let facts = run.facts(iteration, self.state.total_cost_usd, &settings);
        if policy::question_next(&facts) {
            self.stop_leftovers_beside_the_question(leftovers);
        } else if self.stop_leftovers(leftovers).await {
            run.cut = Some(Cut::Interrupted);
        }
        Ok(run)
    }

    /// Sends decoded agent events on, noting signals and arming the post-signal grace.
    ///
    /// Everything for display goes out as one batch per call, in order; a signal flushes the
    /// batch first so the front end sees the line that carried it before the signal itself.
    async fn forward(
        &mut self,
        decoded: &mut Vec<AgentEvent>,
        run: &mut AgentRun,
        stop_at: &mut StopAt,
        grace: Duration,
    ) {
        let mut batch = Vec::with_capacity(decoded.len());
        for event in decoded.drain(..) {
            match event {
                AgentEvent::Signal(signal) => {
                    stop_at.signalled(grace);
                    run.signals.push(signal.kind);
                    self.state.last_signal = Some(format!("{:?}", signal.kind).to_uppercase());
                    self.log(
                        "signal",
                        json!({"iteration": self.state.iteration, "signal": signal.kind, "line": signal.line, "line_number": signal.line_number}),
                    );
                    self.flush(&mut batch).await;
                    let _ = self.io.events.send(LoopEvent::Signal(signal)).await;
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
                    resets_at,
                    message,
                } => {
                    self.log(
                        "rate_limited",
                        json!({"iteration": self.state.iteration, "message": message, "retry_after_seconds": retry_after.map(|d| d.as_secs_f64()), "resets_at": resets_at}),
                    );
                    run.rate_limited = Some(super::rate_limit::RateLimit::merged(
                        run.rate_limited.as_ref(),
                        retry_after,
                        resets_at,
                        message.clone(),
                    ));
                    batch.push(AgentEvent::RateLimited {
                        retry_after,
                        resets_at,
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
                let _ = self.io.events.send(LoopEvent::Agent(event)).await;
            }
            _ => {
                let _ = self
                    .io
                    .events
                    .send(LoopEvent::AgentBatch(std::mem::take(batch)))
                    .await;
            }
        }
    }
}
