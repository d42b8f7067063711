//! `ralph run`: validate everything, then hand the loop to a front end.
//!
//! All checks that can fail on bad input (the task file, the flags, the agent) happen before
//! anything is written to `.ralph/`, so a mistake costs nothing but an error message.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use ralph_loop::agents::Program;
use ralph_loop::config;
use ralph_process::Guard;
use ralph_protocol::{AgentChoice, Control, LoopEvent, State, Status, shell_quote};
use std::sync::Arc;

use ralph_loop::agent_spec::{AgentSpec, Invocation};
use ralph_loop::runner::{RunConfig, RunError, RunSettings, Runner, SentBack};
use ralph_loop::sandbox::{self, Sandbox};
use ralph_loop::task::{TaskFile, parse_limit, parse_wait};
use ralph_protocol::Workspace;
use ralph_signal::{StreamFormat, sanitize};
use tokio::sync::mpsc;

use crate::args::{LandArg, RunArgs};
use ralph_protocol::LandMode;
use ralph_ui::{PlainOptions, Tui, TuiOptions, run_plain};

use crate::demo_task::is_demo_task;
use crate::{CmdResult, Failure, agents};

/// Runs the loop in `args.dir` (in a worktree of its own with `--worktree` or `worktree: true`,
/// landed after a verified DONE under `land: auto` or `land: pr`).
pub fn run(args: &RunArgs) -> CmdResult {
    run_with(args, None)
}

/// [`run`], for a loop `ralph land` sends back with what failed (it lands the loop itself when
/// it is done again).
pub fn run_sent_back(args: &RunArgs, sent_back: SentBack) -> CmdResult {
    run_with(args, Some(sent_back))
}

/// Runs the loop; `sent_back` when `ralph land` sent it back, which also means it does not
/// land here.
fn run_with(args: &RunArgs, sent_back: Option<SentBack>) -> CmdResult {
    let may_land = sent_back.is_none();
    let root = crate::locate::run_root(&args.dir.dir)?;
    let task_path = root.join(&args.task);
    let task = TaskFile::load(&task_path).map_err(Failure::usage)?;
    if !(args.worktree || task.git.worktree) {
        if args.onto.is_some() || args.land.is_some() {
            return Err(Failure::usage(anyhow::anyhow!(
                "--onto and --land are for a loop in a worktree, whose work lands on a branch: add --worktree (or `worktree: true` in the task file)"
            )));
        }
        return run_here(args, &root, task_path, task, sent_back);
    }
    let (info, task_path) =
        crate::cmd_worktree::enter(&root, &task_path, &task, args.onto.as_deref())?;
    let task = TaskFile::load(&task_path).map_err(Failure::usage)?;
    let land = args.land.map_or(task.git.land, LandArg::mode);
    let code = run_here(args, &info.worktree, task_path, task, sent_back)?;
    if code == 0 && may_land && land != LandMode::Manual {
        return crate::cmd_land::land_loop(info, land == LandMode::PullRequest);
    }
    if code == 0 && may_land {
        eprintln!(
            "ralph: done in {}; `{} land {}` brings the work onto {} (tested on the combined tree first)",
            info.worktree.display(),
            crate::program(),
            crate::cmd_worktree::slug_of(&info),
            info.target.as_deref().unwrap_or("its branch")
        );
    }
    Ok(code)
}

fn run_here(
    args: &RunArgs,
    root: &Path,
    task_path: PathBuf,
    mut task: TaskFile,
    sent_back: Option<SentBack>,
) -> CmdResult {
    if let Some(left) = crate::cmd_init::example_left(&task, &task_path) {
        return Err(Failure::usage(anyhow::anyhow!(left)));
    }
    // Before anything is said about the run (its agent, its sandbox) or decided for it: a
    // second run here would only be refused when it takes the lock.
    let ws = Workspace::new(root);
    if let Some(pid) = ws.lock_holder() {
        return Err(Failure::failed(anyhow::anyhow!(ralph_protocol::busy(
            &crate::program(),
            ws.dir(),
            root,
            &pid
        ))));
    }
    if !args.again
        && let Some(done) = already_done(root, &task_path)
    {
        println!(
            "ralph: {} is already done: DONE was verified at iteration {} ({}), and the file has not changed since. Nothing to do; the agent was not started.\nralph: change the task for a new run, or run it again as it is: {}",
            args.task.display(),
            done.iteration,
            done.updated_at,
            again_command(root, &args.task),
        );
        return Ok(0);
    }
    let log_budget = config::apply_all(&Workspace::new(root), &mut task, Default::default())
        .map_err(Failure::usage)?;
    let unrunnable = task.test_command_warning(std::env::var_os("PATH").as_deref());
    task.warnings.extend(unrunnable);
    let warnings = task.warnings.clone();
    match configure(args, root, task_path, task) {
        Ok((mut cfg, sandbox, notes)) => {
            cfg.settings.log_budget = log_budget;
            cfg.sent_back = sent_back;
            for note in notes {
                eprintln!("ralph: {note}");
            }
            run_loop(cfg, sandbox, wants_tui(args.no_tui))
        }
        Err(failure) => {
            // The loop would show these as it starts; a run refused before that must show
            // them too, since an unknown key (`agent_cmd:` for `agent:`) may be the cause.
            for w in warnings {
                eprintln!("ralph: warning: {}", sanitize(&w.with_fix()));
            }
            Err(failure)
        }
    }
}

/// The loop's configuration from the arguments and the loaded task file, with the agent's
/// sandbox and the lines the run starts with (which agent runs, and what it may do), or the
/// usage error that refuses the run.
fn configure(
    args: &RunArgs,
    root: &Path,
    task_path: PathBuf,
    task: TaskFile,
) -> Result<(RunConfig, Option<Sandbox>, Vec<String>), Failure> {
    let mut settings = RunSettings::from_task(&task);
    if let Some(n) = args.agent_flags.max_iterations {
        settings.max_iterations = n;
    }
    if let Some(s) = &args.agent_flags.question_timeout {
        settings.question_timeout = parse_wait(s)
            .map_err(|e| Failure::usage(anyhow::anyhow!("--question-timeout {s}: {e}")))?;
    }
    if let Some(s) = &args.agent_flags.iteration_timeout {
        settings.iteration_timeout = parse_limit(s)
            .map_err(|e| Failure::usage(anyhow::anyhow!("--iteration-timeout {s}: {e}")))?;
    }
    let mut notes = Vec::new();
    let recorded = recorded_choice(root);
    let chosen_now = args.agent_flags.agent.is_some() || args.agent_flags.agent_cmd.is_some();
    let (agent_name, agent_cmd, format, resume_cmd) = match &recorded {
        Some(choice) if !chosen_now => {
            notes.push(format!(
                "resuming with {}, the agent this loop started with (recorded in .ralph/state.json); pass --agent or --agent-cmd to change it",
                choice.describe()
            ));
            match choice {
                AgentChoice::Preset { name } => (
                    Some(name.as_str()),
                    None,
                    args.agent_flags.agent_format.as_deref(),
                    args.agent_flags.agent_resume_cmd.as_deref(),
                ),
                AgentChoice::Command {
                    command,
                    format,
                    resume_command,
                } => (
                    None,
                    Some(command.as_str()),
                    args.agent_flags
                        .agent_format
                        .as_deref()
                        .or(format.as_deref()),
                    args.agent_flags
                        .agent_resume_cmd
                        .as_deref()
                        .or(resume_command.as_deref()),
                ),
            }
        }
        _ => (
            args.agent_flags.agent.as_deref(),
            args.agent_flags.agent_cmd.as_deref(),
            args.agent_flags.agent_format.as_deref(),
            args.agent_flags.agent_resume_cmd.as_deref(),
        ),
    };
    let resolved = agents::resolve_with(
        agent_name,
        agent_cmd,
        task.agent.as_deref(),
        &task.agent_args,
        task.model.as_deref(),
    )
    .map_err(|e| match &recorded {
        Some(choice) if !chosen_now => Failure::usage(anyhow::anyhow!(
            "{e}. This loop started with {}, recorded in .ralph/state.json; to go on with another agent, pass --agent or --agent-cmd",
            choice.describe()
        )),
        _ => Failure::usage(anyhow::anyhow!(e)),
    })?;
    if resolved.preset.is_some_and(|p| p.program == Program::Ralph) && !is_demo_task(&task) {
        return Err(Failure::usage(anyhow::anyhow!(
            "the demo agent works only on the demo's own task, in a directory of its own: it would tick this task's checkboxes and write files here. To try ralph, run `ralph demo`"
        )));
    }
    let choice = match (resolved.preset, &resolved.command) {
        (Some(preset), _) => AgentChoice::Preset {
            name: preset.name.to_owned(),
        },
        (None, command) => AgentChoice::Command {
            command: command.clone().unwrap_or_default(),
            format: format.map(str::to_owned),
            resume_command: resume_cmd.map(str::to_owned),
        },
    };
    if let Some(before) = recorded.as_ref().filter(|before| **before != choice) {
        notes.push(format!(
            "switching agents: this loop started with {}; it goes on with {}, as the command line says",
            before.describe(),
            choice.describe()
        ));
    }
    notes.extend(resolved.detected);
    let agent = customize(resolved.spec, format, resume_cmd)?;
    // `ralph fleet` starts its loops with these variables.
    let fleet = ralph_loop::budget::FleetBudget::from_env(|name| std::env::var(name).ok())
        .map_err(|e| Failure::usage(anyhow::anyhow!(e)))?;
    let workspace = Workspace::new(root);
    workspace.check_not_symlink().map_err(Failure::usage)?;
    let mut fence = Vec::new();
    let sandbox = sandbox(
        args,
        &task,
        &task_path,
        root,
        resolved.preset,
        &agent,
        &mut fence,
    )?;
    // What the agent's flags let it do holds only inside the sandbox, when there is one.
    notes.push(match &sandbox {
        Some(_) => format!(
            "{}, inside the sandbox below",
            resolved
                .allows
                .trim_end_matches("; ralph does not limit it")
        ),
        None => resolved.allows,
    });
    notes.extend(fence);
    Ok((
        RunConfig {
            workspace,
            task_path,
            task,
            agent,
            agent_choice: Some(choice),
            settings,
            fleet,
            sent_back: None,
        },
        sandbox,
        notes,
    ))
}

/// The agent's sandbox for this run (see `ralph_loop::sandbox`), with its line (and any
/// warnings) added to `notes`; a usage error when `sandbox: required` cannot be met.
fn sandbox(
    args: &RunArgs,
    task: &TaskFile,
    task_path: &Path,
    root: &Path,
    preset: Option<&ralph_loop::agents::Preset>,
    agent: &AgentSpec,
    notes: &mut Vec<String>,
) -> Result<Option<Sandbox>, Failure> {
    let mut settings = task.sandbox.clone();
    let off_by = if args.agent_flags.no_sandbox {
        settings.mode = sandbox::Mode::Off;
        "--no-sandbox"
    } else {
        "sandbox: false in the task file"
    };
    // The settings are the human's: weaker than the last run's, they wait for the human's word.
    if !args.agent_flags.no_sandbox
        && let Some(state) = ralph_protocol::broker_state_dir()
    {
        match sandbox::record::check_and_record(
            &state,
            root,
            task_path,
            &task.sandbox,
            args.accept_sandbox,
        ) {
            Ok(Ok(())) => {}
            Ok(Err(weakened)) => return Err(Failure::usage(anyhow::anyhow!(weakened))),
            Err(e) => notes.push(format!(
                "warning: could not record the sandbox settings in {}: {e}; the next run cannot tell whether they were weakened",
                state.display()
            )),
        }
    }
    // The agent's program, from its command line as it starts.
    let command = (agent.fresh)("", Path::new("")).command;
    let (plan, warnings) = sandbox::plan(&sandbox::Inputs {
        settings: &settings,
        off_by,
        root,
        task_file: task_path,
        preset: preset.map(|p| p.name),
        command: &command,
    })
    .map_err(|e| Failure::usage(anyhow::anyhow!(e)))?;
    notes.extend(warnings.into_iter().map(|w| format!("warning: {w}")));
    Ok(match plan {
        sandbox::Plan::On(sandbox) => {
            notes.push(sandbox.describe());
            Some(*sandbox)
        }
        sandbox::Plan::Off { line, warn } => {
            notes.push(if warn {
                format!("warning: {line}")
            } else {
                line
            });
            None
        }
    })
}

/// `ralph run --again -C ROOT [--task FILE]`, as the user can paste it from anywhere.
fn again_command(root: &Path, task: &Path) -> String {
    let mut command = format!(
        "{} run --again -C {}",
        crate::program(),
        shell_quote(&root.display().to_string())
    );
    if task != Path::new("RALPH_TASK.md") {
        command.push_str(" --task ");
        command.push_str(&shell_quote(&task.display().to_string()));
    }
    command
}

/// The state of the last run here when it ended with DONE verified on the task file as it is
/// now: running it again would start an agent with nothing to do.
fn already_done(root: &Path, task_path: &Path) -> Option<State> {
    let state = State::load(&Workspace::new(root)).ok()??;
    let task = std::fs::read(task_path).ok()?;
    state.done_with(&task).then_some(state)
}

/// The agent a plain `ralph run` resumes with: the one a stopped or killed loop recorded.
/// A `state.json` that cannot be read is the runner's to report, naming it.
fn recorded_choice(root: &Path) -> Option<AgentChoice> {
    let previous = State::load(&Workspace::new(root)).ok()??;
    matches!(
        previous.status,
        Status::Running | Status::WaitingInput | Status::Stopped
    )
    .then_some(previous.agent_choice?)
}

/// The terminal view, unless asked for plain lines or there is no terminal to draw on.
pub fn wants_tui(no_tui: bool) -> bool {
    !no_tui
        && std::io::stdout().is_terminal()
        && std::env::var("TERM").is_ok_and(|t| !t.is_empty() && t != "dumb")
}

/// Applies `--agent-format` and `--agent-resume-cmd` to a custom command agent.
fn customize(
    mut agent: AgentSpec,
    format: Option<&str>,
    resume: Option<&str>,
) -> Result<AgentSpec, Failure> {
    if let Some(name) = format {
        agent.format = StreamFormat::from_name(name).ok_or_else(|| {
            let names: Vec<_> = StreamFormat::ALL.iter().map(|f| f.name()).collect();
            Failure::usage(anyhow::anyhow!(
                "--agent-format {name}: unknown format; use one of: {}",
                names.join(", ")
            ))
        })?;
    }
    if let Some(template) = resume {
        if !template.contains("{session_id}") {
            return Err(Failure::usage(anyhow::anyhow!(
                "--agent-resume-cmd must contain {{session_id}}, where the session to resume goes"
            )));
        }
        let template = template.to_string();
        agent.resume = Some(Arc::new(move |session, message, _| Invocation {
            command: template.replace("{session_id}", &shell_quote(session)),
            stdin: Some(message.as_bytes().to_vec()),
            ..Invocation::default()
        }));
    }
    Ok(agent)
}

/// Starts the guard that stops the agent if this process is killed outright (see
/// `ralph_process::Guard`): this binary again, as `ralph __guard`. Run from `/proc/self/exe` on
/// Linux, which names this binary even when its file was replaced since (elsewhere, from the
/// path the system gives for it). Without a guard the loop
/// still runs (the next `ralph run` stops an orphaned group), with a warning. With `terminal`
/// (the terminal view is about to take the terminal), the guard also gives the terminal back
/// if this process is killed with the view up.
fn start_guard(runner: &mut Runner, terminal: bool) {
    let dir = std::path::absolute(runner.ralph_dir()).unwrap_or_else(|_| runner.ralph_dir().into());
    // The run's id: after a crash, the guard stops what still carries it.
    let args = [
        std::ffi::OsStr::new("__guard"),
        dir.as_os_str(),
        std::ffi::OsStr::new("--run"),
        std::ffi::OsStr::new(ralph_process::run_id()),
    ];
    let program = if cfg!(target_os = "linux") {
        std::path::PathBuf::from("/proc/self/exe")
    } else {
        std::env::current_exe().unwrap_or_else(|_| "ralph".into())
    };
    match Guard::start(&program, &args, terminal) {
        Ok(guard) => runner.set_guard(guard),
        Err(e) => eprintln!(
            "ralph: warning: could not start the guard ({e}); if ralph is killed with SIGKILL, the agent runs on until the next `ralph run` stops it"
        ),
    }
}

/// Starts the runtime, the loop and its front end; returns the loop's exit code.
pub fn run_loop(cfg: RunConfig, sandbox: Option<Sandbox>, tui: bool) -> CmdResult {
    let bell = cfg.task.notify.bell;
    let desktop = cfg.task.notify.desktop_notification;
    // Before anything is started: what the agent starts outside its process group is then
    // ralph's to find and stop (see `ralph_process::sweep`).
    if let Err(e) = ralph_process::adopt() {
        eprintln!(
            "ralph: warning: could not become the subreaper of the agent's processes ({e}); a process the agent starts in a session of its own may outlive its iteration"
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("could not start the async runtime")?;
    let answer_command = crate::answer_command(cfg.workspace.root());
    let workspace = cfg.workspace.clone();
    rt.block_on(async move {
        // Each message can hold a whole 64 KiB read of agent output: a short queue keeps
        // memory flat when the terminal is slower than the agent (1024 of them once let a
        // slow tmux pane push ralph to 115 MiB); the agent is simply slowed to the screen.
        let (event_tx, event_rx) = mpsc::channel::<LoopEvent>(16);
        let (control_tx, control_rx) = mpsc::unbounded_channel::<Control>();
        let stop_events = event_tx.clone();
        let mut runner = Runner::new(cfg, event_tx, control_rx).map_err(Failure::failed)?;
        if let Some(sandbox) = sandbox {
            runner.set_sandbox(sandbox);
        }
        // `ralph stop`, the page and the bot stop the loop as Ctrl-C does.
        let stop_requests =
            ralph_loop::runner::forward_stop_requests(&workspace, control_tx.clone(), stop_events)
                .map_err(|e| {
                    eprintln!(
                        "ralph: warning: cannot watch .ralph/ for `ralph stop` ({e}); Ctrl-C still stops the loop"
                    )
                })
                .ok();
        // Before the view: the guard saves the terminal's settings as they are now.
        let terminal = tui && std::io::stdin().is_terminal();
        start_guard(&mut runner, terminal);
        let signals = tokio::spawn(forward_signals(control_tx.clone()));
        stop_when_output_is_unread(control_tx.clone());
        // The terminal view when there is a terminal for it; plain lines otherwise.
        let view = tui.then(|| {
            let mut opts = TuiOptions::new(answer_command.clone(), bell);
            opts.desktop = desktop;
            Tui::start(opts)
        });
        let front = match view {
            Some(Ok(view)) => tokio::spawn(async move {
                let _ = view.run(event_rx, control_tx).await;
            }),
            view => {
                if let Some(Err(e)) = view {
                    eprintln!(
                        "ralph: cannot start the terminal view ({e}); showing plain lines instead"
                    );
                }
                tokio::spawn(run_plain(
                    event_rx,
                    control_tx,
                    PlainOptions {
                        answer_command,
                        bell,
                        desktop,
                    },
                ))
            }
        };
        // On a worker thread, not this one: the worker that sees the agent's pipes and exit
        // become ready then runs the loop itself, where `block_on` needs a second thread woken
        // to pass them on (a context switch on every step of every iteration).
        let outcome = match tokio::spawn(runner.run()).await {
            Ok(outcome) => outcome,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        };
        signals.abort();
        drop(stop_requests);
        let _ = front.await;
        // An agent command that cannot be started at all is a usage error (exit 2), as is one
        // that `sh` could not find or run: the fix is in the command line, not the task.
        let outcome = outcome.map_err(|e| match e {
            RunError::Spawn { .. } => Failure::usage(e),
            e => Failure::failed(e),
        })?;
        Ok(outcome.exit_code() as u8)
    })
}

/// A closed standard output (`ralph run | head`, once `head` has its lines) stops the loop as
/// Ctrl-C would: the state is saved and the next `ralph run` goes on from it.
fn stop_when_output_is_unread(controls: mpsc::UnboundedSender<Control>) {
    let watch = move || {
        if ralph_process::wait_until_reader_gone(std::io::stdout()) {
            eprintln!(
                "ralph: nobody reads the output any more (its pipe closed); stopping as Ctrl-C would, with the state saved"
            );
            let _ = controls.send(Control::Stop);
        }
    };
    // Without the thread, only the next write finds the pipe closed, when the agent prints.
    let _ = std::thread::Builder::new()
        .name("stdout-reader".into())
        .spawn(watch);
}

/// SIGINT, SIGTERM and SIGHUP stop the loop gracefully; a second one kills the agent now.
/// SIGQUIT (Ctrl-\) kills the agent now the first time: whoever sends it wants out at once.
/// Regression: SIGQUIT was left to its default, which ended ralph on the spot and left the
/// agent (in its own process group, out of the terminal's reach) running.
async fn forward_signals(controls: mpsc::UnboundedSender<Control>) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term), Ok(mut hup), Ok(mut quit)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
        signal(SignalKind::quit()),
    ) else {
        return;
    };
    let mut seen = 0;
    loop {
        let now = tokio::select! {
            _ = int.recv() => false,
            _ = term.recv() => false,
            _ = hup.recv() => false,
            _ = quit.recv() => true,
        };
        seen += 1;
        if seen == 1 {
            let _ = controls.send(Control::Stop);
        }
        if seen > 1 || now {
            let _ = controls.send(Control::Kill);
        }
    }
}
