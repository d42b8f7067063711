//! `ralph`: the command-line entry point. Thin glue over `ralph-loop` and `ralph-ui`.
//!
//! `main` parses the arguments, calls [`run`], and turns the result into a documented exit code
//! (see `ralph --help`). Errors print as `ralph: {err:#}` on stderr.

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
mod cmd_answer;
mod cmd_ask;
mod cmd_init;
mod cmd_run;
mod cmd_serve;
mod cmd_status;
mod demo;

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};

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
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            eprintln!("ralph: {:#}", f.error);
            ExitCode::from(f.code)
        }
    }
}

fn run(cli: Cli) -> CmdResult {
    match cli.command {
        Command::Init(a) => cmd_init::run(&a),
        Command::Run(a) => cmd_run::run(&a),
        Command::Status(a) => cmd_status::run(&a),
        Command::Answer(a) => cmd_answer::run(&a),
        Command::Ask(a) => cmd_ask::run(&a),
        Command::Serve(a) => cmd_serve::run(&a),
        Command::Demo(a) => demo::run(&a),
        Command::DemoAgent => demo::agent(),
        Command::Guard {
            ralph_dir,
            terminal,
            run,
        } => {
            ralph_loop::guard::main(&ralph_dir, terminal, run.as_deref());
            Ok(0)
        }
    }
}
