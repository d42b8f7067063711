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
use ralph_protocol::event::{Control, LoopEvent};
use ralph_protocol::state::{AgentChoice, State, Status};
use ralph_protocol::text::shell_quote;
use std::sync::Arc;

use ralph_loop::agent_spec::{AgentSpec, Invocation};
use ralph_loop::runner::{RunConfig, RunError, RunSettings, Runner};
use ralph_loop::task::{TaskFile, parse_limit, parse_wait};
use ralph_protocol::workspace::Workspace;
use ralph_signal::{StreamFormat, sanitize};
use tokio::sync::mpsc;

use crate::args::RunArgs;
use ralph_ui::{PlainOptions, Tui, TuiOptions, run_plain};

use crate::demo_task::is_demo_task;
use crate::{CmdResult, Failure, agents};

/// Runs the loop in `args.dir`.
pub fn run(args: &RunArgs) -> CmdResult {
    let root = crate::locate::run_root(&args.dir.dir)?;
    let task_path = root.join(&args.task);
    let mut task = TaskFile::load(&task_path).map_err(Failure::usage)?;
    if crate::cmd_init::is_example(&task) {
        return Err(Failure::usage(anyhow::anyhow!(
            "{} is still the example: describe your task. Write what the agent should do in `task:` and its criteria as the checkboxes below it (in {}), then run again",
            args.task.display(),
            task_path.display()
        )));
    }
    let log_budget = config::apply_all(&Workspace::new(&root), &mut task, Default::default())
        .map_err(Failure::usage)?;
    let warnings = task.warnings.clone();
    match configure(args, &root, task_path, task) {
        Ok((mut cfg, notes)) => {
            cfg.settings.log_budget = log_budget;
            for note in notes {
                eprintln!("ralph: {note}");
            }
            run_loop(cfg, wants_tui(args.no_tui))
        }
        Err(failure) => {
            // The loop would show these as it starts; a run refused before that must show
            // them too, since an unknown key (`agent_cmd:` for `agent:`) may be the cause.
            for w in warnings {
                eprintln!("ralph: warning: {}", sanitize(&w.to_string()));
            }
            Err(failure)
        }
    }
}

/// The loop's configuration from the arguments and the loaded task file, with the lines the
/// run starts with (which agent runs, and what it may do), or the usage error that refuses the
/// run.
fn configure(
    args: &RunArgs,
    root: &Path,
    task_path: PathBuf,
    task: TaskFile,
) -> Result<(RunConfig, Vec<String>), Failure> {
    let mut settings = RunSettings::from_task(&task);
    if let Some(n) = args.max_iterations {
        settings.max_iterations = n;
    }
    if let Some(s) = &args.question_timeout {
        settings.question_timeout = parse_wait(s)
            .map_err(|e| Failure::usage(anyhow::anyhow!("--question-timeout {s}: {e}")))?;
    }
    if let Some(s) = &args.iteration_timeout {
        settings.iteration_timeout = parse_limit(s)
            .map_err(|e| Failure::usage(anyhow::anyhow!("--iteration-timeout {s}: {e}")))?;
    }
    let mut notes = Vec::new();
    let recorded = recorded_choice(root);
    let chosen_now = args.agent.is_some() || args.agent_cmd.is_some();
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
                    args.agent_format.as_deref(),
                    args.agent_resume_cmd.as_deref(),
                ),
                AgentChoice::Command {
                    command,
                    format,
                    resume_command,
                } => (
                    None,
                    Some(command.as_str()),
                    args.agent_format.as_deref().or(format.as_deref()),
                    args.agent_resume_cmd
                        .as_deref()
                        .or(resume_command.as_deref()),
                ),
            }
        }
        _ => (
            args.agent.as_deref(),
            args.agent_cmd.as_deref(),
            args.agent_format.as_deref(),
            args.agent_resume_cmd.as_deref(),
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
    notes.push(resolved.allows);
    let agent = customize(resolved.spec, format, resume_cmd)?;
    let workspace = Workspace::new(root);
    workspace.check_not_symlink().map_err(Failure::usage)?;
    Ok((
        RunConfig {
            workspace,
            task_path,
            task,
            agent,
            agent_choice: Some(choice),
            settings,
        },
        notes,
    ))
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
/// `ralph_process::guard`): this binary again, as `ralph __guard`. Run from `/proc/self/exe`,
/// which names this binary even when its file was replaced since. Without a guard the loop
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
    match Guard::start(std::path::Path::new("/proc/self/exe"), &args, terminal) {
        Ok(guard) => runner.set_guard(guard),
        Err(e) => eprintln!(
            "ralph: warning: could not start the guard ({e}); if ralph is killed with SIGKILL, the agent runs on until the next `ralph run` stops it"
        ),
    }
}

/// Starts the runtime, the loop and its front end; returns the loop's exit code.
pub fn run_loop(cfg: RunConfig, tui: bool) -> CmdResult {
    let bell = cfg.task.notify.bell;
    let desktop = cfg.task.notify.desktop_notification;
    // Before anything is started: what the agent starts outside its process group is then
    // ralph's to find and stop (see `ralph_process::orphans`).
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
    rt.block_on(async move {
        // Each message can hold a whole 64 KiB read of agent output: a short queue keeps
        // memory flat when the terminal is slower than the agent (1024 of them once let a
        // slow tmux pane push ralph to 115 MiB); the agent is simply slowed to the screen.
        let (event_tx, event_rx) = mpsc::channel::<LoopEvent>(16);
        let (control_tx, control_rx) = mpsc::unbounded_channel::<Control>();
        let mut runner = Runner::new(cfg, event_tx, control_rx).map_err(Failure::failed)?;
        // Before the view: the guard saves the terminal's settings as they are now.
        let terminal = tui && std::io::stdin().is_terminal();
        start_guard(&mut runner, terminal);
        let signals = tokio::spawn(forward_signals(control_tx.clone()));
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
