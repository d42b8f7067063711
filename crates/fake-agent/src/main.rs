//! `ralph-fake-agent`: a scripted stand-in for an AI coding agent, for ralph's tests.
//!
//! ralph runs it exactly as it would run a real agent (its command, prompt on stdin, `RALPH_*`
//! environment). The fake reads a script (`--script PATH` or `RALPH_FAKE_SCRIPT`), picks the
//! section for this run, and replays its commands: print text and signals, write files, ask a
//! question, tick checkboxes, misbehave (ignore SIGTERM, leave a grandchild behind, hang, flood).
//!
//! How a run goes:
//! 1. The whole script is parsed ([`script`] for sections, [`command`] for each line, with
//!    words split by [`lex`]); any error exits 2.
//! 2. The run's key is found: the counter file's new value if there is one (`[call N]`
//!    sections), otherwise `RALPH_ITERATION` (`[iteration N]` sections).
//! 3. Stdin is read to the end (the prompt), unless the section says `no-stdin`.
//! 4. The section's commands run in order ([`exec`]).
//!
//! The command reference is README.md, which `--help` prints verbatim so the two never drift.

#![forbid(unsafe_code)]

mod command;
mod exec;
mod lex;
mod ralph_files;
mod script;

use std::fs::OpenOptions;
use std::io::{Read, Seek, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use nix::fcntl::{Flock, FlockArg};
use nix::sys::signal::{SigSet, SigmaskHow, sigprocmask};

use crate::command::Command;
use crate::script::{Key, Script};

/// Exit code for a bad command line or a bad script.
const EXIT_USAGE: u8 = 2;

const HELP: &str = include_str!("../README.md");

/// The validated command line.
#[derive(Debug, Default)]
struct Args {
    script: Option<PathBuf>,
    counter: Option<PathBuf>,
    help: bool,
    /// Hidden: be a grandchild that sleeps this many milliseconds.
    sleep_ms: Option<u64>,
    /// Hidden: as that grandchild, first leave for a session of its own.
    setsid: bool,
    /// Hidden: as that grandchild, keep SIGTERM blocked.
    ignore_sigterm: bool,
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => ExitCode::from(code),
        Err((code, message)) => {
            eprintln!("ralph-fake-agent: {message}");
            ExitCode::from(code)
        }
    }
}

fn run() -> Result<u8, (u8, String)> {
    let args = parse_args(std::env::args_os().skip(1))
        .map_err(|e| (EXIT_USAGE, format!("{e} (see --help)")))?;
    if args.help {
        print!("{HELP}");
        return Ok(0);
    }
    if let Some(ms) = args.sleep_ms {
        // A grandchild spawned after `ignore-sigterm` inherits the blocked mask (std does not
        // reset it on spawn); start from a clean one so the grandchild is an ordinary process,
        // unless it is to be a stubborn one.
        let mut mask = SigSet::empty();
        if args.ignore_sigterm {
            mask.add(nix::sys::signal::Signal::SIGTERM);
        }
        let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&mask), None);
        if args.setsid {
            nix::unistd::setsid().map_err(|e| (EXIT_USAGE, format!("setsid: {e}")))?;
        }
        std::thread::sleep(Duration::from_millis(ms));
        return Ok(0);
    }

    let script_path = args
        .script
        .or_else(|| std::env::var_os("RALPH_FAKE_SCRIPT").map(PathBuf::from))
        .ok_or((
            EXIT_USAGE,
            "no script: pass --script PATH or set RALPH_FAKE_SCRIPT (see --help)".to_owned(),
        ))?;
    let name = script_path.display().to_string();
    let text = std::fs::read_to_string(&script_path)
        .map_err(|e| (EXIT_USAGE, format!("cannot read script {name}: {e}")))?;
    let script = Script::parse(&text).map_err(|e| (EXIT_USAGE, format!("{name}:{e}")))?;

    let counter = args
        .counter
        .or_else(|| std::env::var_os("RALPH_FAKE_COUNTER").map(PathBuf::from));
    let key = match counter {
        Some(path) => Key::Call(bump_counter(&path).map_err(|e| (exec::EXIT_FAILED, e))?),
        None if script.uses_calls() => {
            return Err((
                EXIT_USAGE,
                format!(
                    "{name} has [call N] sections but no counter: pass --counter PATH or set RALPH_FAKE_COUNTER"
                ),
            ));
        }
        None => Key::Iteration(iteration()?),
    };

    let section = script.select(key);
    let wants_stdin =
        section.is_none_or(|s| !s.commands.iter().any(|(_, c)| *c == Command::NoStdin));
    let mut prompt = Vec::new();
    if wants_stdin {
        // A closed or unreadable stdin is just an empty prompt; the writer must not block on us.
        let _ = std::io::stdin().read_to_end(&mut prompt);
    }
    let Some(section) = section else {
        eprintln!(
            "ralph-fake-agent: {name} has no section for {}; doing nothing",
            describe(key)
        );
        return Ok(0);
    };
    exec::run(section, &prompt, &name).map_err(|f| (f.code, f.message))
}

fn parse_args(mut argv: impl Iterator<Item = std::ffi::OsString>) -> Result<Args, String> {
    let mut args = Args::default();
    while let Some(arg) = argv.next() {
        let mut value = |flag: &str| argv.next().ok_or_else(|| format!("{flag} needs a value"));
        match arg.to_str() {
            Some("--script") => args.script = Some(value("--script")?.into()),
            Some("--counter") => args.counter = Some(value("--counter")?.into()),
            Some("--help" | "-h") => args.help = true,
            Some("--setsid") => args.setsid = true,
            Some("--ignore-sigterm") => args.ignore_sigterm = true,
            Some("--sleep") => {
                let ms = value("--sleep")?;
                args.sleep_ms = Some(
                    ms.to_string_lossy()
                        .parse()
                        .map_err(|_| "--sleep needs milliseconds")?,
                );
            }
            _ => return Err(format!("unexpected argument '{}'", arg.to_string_lossy())),
        }
    }
    Ok(args)
}

/// `RALPH_ITERATION`, if set; a value that is not a number is a usage error.
fn iteration() -> Result<Option<u64>, (u8, String)> {
    let Some(value) = std::env::var_os("RALPH_ITERATION") else {
        return Ok(None);
    };
    let value = value.to_string_lossy();
    value.trim().parse().map(Some).map_err(|_| {
        (
            EXIT_USAGE,
            format!("RALPH_ITERATION is '{value}', not a number"),
        )
    })
}

/// Adds one to the counter file under an exclusive lock, so concurrent starts each get their
/// own number; a missing or empty file counts as 0, so the first start is call 1.
fn bump_counter(path: &std::path::Path) -> Result<u64, String> {
    let err = |e: &dyn std::fmt::Display| format!("counter file {}: {e}", path.display());
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| err(&e))?;
    let mut file = Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, e)| err(&e))?;
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(|e| err(&e))?;
    let text = text.trim();
    let previous: u64 = if text.is_empty() {
        0
    } else {
        text.parse()
            .map_err(|_| err(&format!("'{text}' is not a number")))?
    };
    let next = previous + 1;
    file.set_len(0).map_err(|e| err(&e))?;
    file.rewind().map_err(|e| err(&e))?;
    writeln!(file, "{next}").map_err(|e| err(&e))?;
    Ok(next)
}

fn describe(key: Key) -> String {
    match key {
        Key::Iteration(Some(n)) => format!("iteration {n}"),
        Key::Iteration(None) => "this run (RALPH_ITERATION is not set)".to_owned(),
        Key::Call(n) => format!("call {n}"),
    }
}
