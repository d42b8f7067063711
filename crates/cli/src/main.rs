//! `ralph`: the command-line entry point. Thin glue over `ralph-loop`, `ralph-protocol` and
//! `ralph-ui`.
//!
//! `main` parses the arguments, calls [`run`], and turns the result into a documented exit code
//! (see `ralph --help`). Errors print as `ralph: {err:#}` on stderr.

#![forbid(unsafe_code)]

/// `println!` for a command's report, except that a reader gone away (`ralph status | head -3`)
/// ends the command quietly, as it ends `cat`, where `println!` would panic: see [`report`].
macro_rules! outln {
    () => {
        $crate::report(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::report(format_args!($($arg)*))
    };
}

mod agents;
mod args;
mod cmd_agents;
mod cmd_answer;
mod cmd_ask;
mod cmd_docs;
mod cmd_doctor;
mod cmd_fleet;
mod cmd_history;
mod cmd_init;
mod cmd_land;
mod cmd_logs;
mod cmd_run;
mod cmd_serve;
mod cmd_status;
mod cmd_stop;
mod cmd_worktree;
mod demo;
mod demo_task;
mod fleet_view;
mod locate;

use std::process::ExitCode;

use clap::Parser;
use ralph_protocol::shell_quote;

use crate::args::{Cli, Command, Internal, InternalCli};

/// An error with the exit code it should end the process with.
#[derive(Debug)]
pub struct Failure {
    code: u8,
    error: anyhow::Error,
}

impl Failure {
    /// A usage or configuration error: exit 2.
    pub fn usage(error: impl Into<anyhow::Error>) -> Self {
        Failure {
            code: 2,
            error: error.into(),
        }
    }

    /// A command that could not do its job: exit 1.
    pub fn failed(error: impl Into<anyhow::Error>) -> Self {
        Failure {
            code: 1,
            error: error.into(),
        }
    }

    /// Any exit code.
    pub fn with_code(code: u8, error: impl Into<anyhow::Error>) -> Self {
        Failure {
            code,
            error: error.into(),
        }
    }
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(error: E) -> Self {
        Failure::failed(error)
    }
}

/// Prints one line of a command's report on stdout.
///
/// Rust ignores `SIGPIPE`, so a closed pipe is an error on write, and `println!` panics on it.
/// Here the reader is gone: nothing more can be shown, so the process ends at once with 0.
/// The commands that use this report after their work is done (an answer saved, files
/// written, the demo's loop ended), or, for the demo's opening lines, before any starts. Any
/// other write error ends it with 1 and a message on stderr. `ralph run` and `ralph ask` do
/// not use this: they see a closed pipe to or from an agent as an error to handle, not a
/// reason to stop.
pub fn report(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_fmt(line).and_then(|()| out.write_all(b"\n")) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            eprintln!("ralph: cannot write to standard output: {e}");
            std::process::exit(1);
        }
    }
}

/// What a command returns: the exit code on success, or a failure with its own.
pub type CmdResult = Result<u8, Failure>;

fn main() -> ExitCode {
    let _ = START_DIR.set(std::env::current_dir().ok());
    let internal = std::env::args_os()
        .nth(1)
        .is_some_and(|a| a.as_encoded_bytes().starts_with(b"__"));
    let result = if internal {
        run_internal(InternalCli::parse().command)
    } else {
        run(Cli::parse())
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            eprintln!("ralph: {:#}", f.error);
            ExitCode::from(f.code)
        }
    }
}

fn run(cli: Cli) -> CmdResult {
    let command = match cli.dir {
        Some(dir) => in_dir(&dir, cli.command)?,
        None => cli.command,
    };
    match command {
        Command::Init(a) => cmd_init::run(&a),
        Command::Run(a) => cmd_run::run(&a),
        Command::Status(a) => cmd_status::run(&a),
        Command::Logs(a) => cmd_logs::run(&a),
        Command::Stop(a) => cmd_stop::run(&a),
        Command::Answer(a) => cmd_answer::run(&a),
        Command::Ask(a) => cmd_ask::run(&a),
        Command::Serve(a) => cmd_serve::run(&a),
        Command::Demo(a) => demo::run(&a),
        Command::Doctor(a) => cmd_doctor::run(&a),
        Command::Agents => cmd_agents::run(),
        Command::Log(a) => cmd_history::log(&a),
        Command::Diff(a) => cmd_history::diff(&a),
        Command::Undo(a) => cmd_history::undo(&a),
        Command::Land(a) => cmd_land::run(&a),
        Command::Worktree(a) => cmd_worktree::run(&a),
        Command::Fleet(a) => cmd_fleet::run(&a),
        Command::Docs(a) => cmd_docs::docs(&a),
        Command::Completions(a) => cmd_docs::completions(&a),
        Command::Man(a) => cmd_docs::man(&a),
    }
}

/// The commands ralph starts itself: the demo agent and the guard.
fn run_internal(command: Internal) -> CmdResult {
    match command {
        Internal::DemoAgent => demo::agent(),
        Internal::Guard {
            ralph_dir,
            terminal,
            run,
        } => {
            ralph_process::guard_main(&ralph_dir, terminal, run.as_deref());
            Ok(0)
        }
        Internal::Sandbox => Ok(u8::try_from(ralph_process::sandbox_main()).unwrap_or(1)),
    }
}

/// `ralph -C DIR <command>`: what `git -C` does. The process moves to DIR, so every relative
/// path (a subcommand's own `-C`, `--task`) is taken from there; `ralph demo` runs in DIR.
fn in_dir(dir: &std::path::Path, mut command: Command) -> Result<Command, Failure> {
    let dir = locate::existing_dir(dir, "with -C")?;
    match &mut command {
        Command::Status(a) if a.all => {
            return Err(Failure::usage(anyhow::anyhow!(
                "-C and status --all do not go together: --all lists the loops of every directory"
            )));
        }
        Command::Demo(a) => {
            a.dir = Some(a.dir.take().map_or_else(|| dir.clone(), |d| dir.join(d)));
        }
        _ => {}
    }
    std::env::set_current_dir(&dir)
        .map_err(|e| Failure::usage(anyhow::anyhow!("{}: {e} (given with -C)", dir.display())))?;
    Ok(command)
}

/// How to run this ralph from a shell, for the commands ralph prints for you to copy: `ralph`
/// when that name on `PATH` is this program, else its full path (in a fresh clone,
/// `/…/target/debug/ralph`), shell-quoted.
pub fn program() -> String {
    static PROGRAM: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PROGRAM
        .get_or_init(|| {
            let Ok(me) = std::env::current_exe().and_then(std::fs::canonicalize) else {
                return "ralph".into();
            };
            let on_path = std::env::var_os("PATH").and_then(|path| {
                std::env::split_paths(&path)
                    .map(|dir| dir.join("ralph"))
                    .find(|p| p.is_file())
            });
            match on_path.and_then(|p| std::fs::canonicalize(p).ok()) {
                Some(found) if found == me => "ralph".into(),
                _ => shell_quote(&me.display().to_string()),
            }
        })
        .clone()
}

/// The directory ralph was started in, before `-C` moved it: where the user's shell is.
static START_DIR: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();

/// `ralph SUBCOMMAND`, with `-C ROOT` unless `root` is the directory the user ran ralph in:
/// a command ralph prints for the user to copy into the shell they ran it from (`ralph init
/// -C /dir --force`), which must act on `root` from there.
pub fn command_in(root: &std::path::Path, subcommand: &str) -> String {
    let same = |dir: &std::path::Path| {
        let canonical = |p: &std::path::Path| std::fs::canonicalize(p).ok();
        canonical(dir).is_some() && canonical(dir) == canonical(root)
    };
    match START_DIR.get().and_then(Option::as_deref) {
        Some(start) if same(start) => format!("{} {subcommand}", program()),
        _ => format!(
            "{} {subcommand} -C {}",
            program(),
            shell_quote(&root.display().to_string())
        ),
    }
}

/// The command that answers the loop in `root`, without the answer: `ralph answer -C /dir`.
pub fn answer_command(root: &std::path::Path) -> String {
    ralph_protocol::answer_command(&program(), root)
}

/// The command that runs (and resumes) the loop in `root`: `ralph run -C /dir`.
pub fn run_command(root: &std::path::Path) -> String {
    format!(
        "{} run -C {}",
        program(),
        shell_quote(&root.display().to_string())
    )
}
