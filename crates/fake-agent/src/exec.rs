//! Runs the commands of one section, in order, against the real process environment.
//!
//! Every print is flushed at once: tests look at exactly when bytes arrive (a signal split
//! across two writes with a sleep between them must really arrive in two pieces).

use std::ffi::OsString;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};

use crate::command::{Command, IgnoredSignal, Stream};
use crate::ralph_files::{question_markdown, tick};
use crate::script::Section;

/// Exit code when a command could not do its job (a file it could not write, a program it
/// could not start): the fake itself failed, not the scenario the test scripted.
pub const EXIT_FAILED: u8 = 96;
/// Exit code of a failed `expect-file`.
pub const EXIT_EXPECT_FILE: u8 = 97;
/// Exit code of a failed `expect-prompt-contains`.
pub const EXIT_EXPECT_PROMPT: u8 = 98;

/// Why a run stopped early: the exit code and the message for stderr.
#[derive(Debug)]
pub struct Failure {
    /// The process exit code.
    pub code: u8,
    /// What went wrong, already prefixed with `script:line:`.
    pub message: String,
}

/// What a command asks the run to do next.
enum Flow {
    Continue,
    Exit(u8),
}

/// Runs `section` with the prompt read from stdin; returns the exit code `exit` asked for,
/// or 0 when the section runs out.
pub fn run(section: &Section, prompt: &[u8], script_name: &str) -> Result<u8, Failure> {
    for (line, command) in &section.commands {
        let flow = step(command, prompt).map_err(|(code, message)| Failure {
            code,
            message: format!("{script_name}:{line}: {message}"),
        })?;
        if let Flow::Exit(code) = flow {
            return Ok(code);
        }
    }
    Ok(0)
}

/// A command's failure: exit code and message.
type StepError = (u8, String);

fn failed(what: impl std::fmt::Display) -> StepError {
    (EXIT_FAILED, what.to_string())
}

fn step(command: &Command, prompt: &[u8]) -> Result<Flow, StepError> {
    match command {
        Command::Print {
            stream,
            text,
            newline,
        } => {
            let mut bytes = text.clone();
            if *newline {
                bytes.push(b'\n');
            }
            emit(*stream, &bytes)?;
        }
        Command::Signal(kind) => emit(
            Stream::Stdout,
            format!("<ralph>{kind}</ralph>\n").as_bytes(),
        )?,
        Command::Write { path, text, append } => {
            create_parent(path)?;
            let mut file = OpenOptions::new()
                .create(true)
                .write(true)
                .append(*append)
                .truncate(!*append)
                .open(path)
                .map_err(|e| failed(format!("cannot open {}: {e}", path.display())))?;
            file.write_all(text)
                .map_err(|e| failed(format!("cannot write {}: {e}", path.display())))?;
        }
        Command::Question(question) => {
            let path = ralph_dir()?.join("question.md");
            let body = question_markdown(question);
            write_atomic(&path, body.as_bytes())?;
        }
        Command::Check(n) => check_boxes(*n)?,
        Command::SavePrompt(path) => write_new(path, prompt)?,
        Command::SaveEnv(path) => {
            let mut vars: Vec<(OsString, OsString)> = std::env::vars_os()
                .filter(|(k, _)| k.as_encoded_bytes().starts_with(b"RALPH_"))
                .collect();
            vars.sort();
            let mut out = Vec::new();
            for (key, value) in vars {
                out.extend_from_slice(key.as_encoded_bytes());
                out.push(b'=');
                out.extend_from_slice(value.as_encoded_bytes());
                out.push(b'\n');
            }
            write_new(path, &out)?;
        }
        Command::Copy { src, dst } => {
            create_parent(dst)?;
            fs::copy(src, dst).map_err(|e| {
                failed(format!(
                    "cannot copy {} to {}: {e}",
                    src.display(),
                    dst.display()
                ))
            })?;
        }
        Command::ExpectFile { path, wait } => {
            let deadline = Instant::now() + *wait;
            while !path.exists() {
                if Instant::now() >= deadline {
                    let waited = if wait.is_zero() {
                        String::new()
                    } else {
                        format!(" (waited {wait:?})")
                    };
                    return Err((
                        EXIT_EXPECT_FILE,
                        format!(
                            "expected {} to exist, but it does not{waited}",
                            path.display()
                        ),
                    ));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        Command::ExpectPromptContains(text) => {
            if !contains(prompt, text) {
                return Err((
                    EXIT_EXPECT_PROMPT,
                    format!(
                        "expected the prompt to contain '{}'; it was {} bytes starting '{}'",
                        String::from_utf8_lossy(text),
                        prompt.len(),
                        String::from_utf8_lossy(&prompt[..prompt.len().min(200)]),
                    ),
                ));
            }
        }
        Command::Sleep(duration) => std::thread::sleep(*duration),
        Command::Exit(code) => return Ok(Flow::Exit(*code)),
        // Acted on before the run started, when stdin was (not) read.
        Command::NoStdin => {}
        Command::IgnoreSignal(signal) => {
            // Blocking rather than ignoring: nix's `signal(SIG_IGN)` cannot be called from safe
            // code, the only code the workspace allows. A blocked SIGTERM stays pending forever,
            // which looks the same from outside. Like an ignored signal, the block is inherited
            // by programs that `run` starts; the grandchild clears it (see `--sleep` in main).
            let signal = match signal {
                IgnoredSignal::Term => Signal::SIGTERM,
                IgnoredSignal::Int => Signal::SIGINT,
            };
            let mut set = SigSet::empty();
            set.add(signal);
            sigprocmask(SigmaskHow::SIG_BLOCK, Some(&set), None)
                .map_err(|e| failed(format!("cannot block {signal}: {e}")))?;
        }
        Command::SpawnGrandchild {
            lifetime,
            pid_file,
            quiet,
            new_session,
            ignore_sigterm,
        } => spawn_grandchild(
            *lifetime,
            pid_file.as_deref(),
            *quiet,
            *new_session,
            *ignore_sigterm,
        )?,
        Command::CloseStdout => {
            // Point fd 1 at /dev/null instead of closing it: the pipe's write end goes away
            // (the reader sees EOF), but a file opened later cannot land on fd 1, and later
            // prints quietly go nowhere.
            let _ = io::stdout().flush();
            let null = OpenOptions::new()
                .write(true)
                .open("/dev/null")
                .map_err(|e| failed(format!("cannot open /dev/null: {e}")))?;
            nix::unistd::dup2_stdout(&null)
                .map_err(|e| failed(format!("cannot close stdout: {e}")))?;
        }
        Command::ReadLine(path) => {
            let mut line = String::new();
            std::io::BufRead::read_line(&mut std::io::stdin().lock(), &mut line)
                .map_err(|e| failed(format!("cannot read stdin: {e}")))?;
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| failed(format!("{}: {e}", path.display())))?;
            std::io::Write::write_all(&mut file, line.as_bytes())
                .map_err(|e| failed(format!("{}: {e}", path.display())))?;
        }
        Command::Hang => loop {
            std::thread::sleep(Duration::from_secs(3600));
        },
        Command::Flood {
            bytes,
            line_len,
            signal_at_end,
        } => {
            flood(*bytes, *line_len)?;
            if *signal_at_end {
                emit(Stream::Stdout, b"<ralph>DONE</ralph>\n")?;
            }
        }
        Command::StreamFile { path, line_delay } => {
            let content = fs::read(path)
                .map_err(|e| failed(format!("cannot read {}: {e}", path.display())))?;
            match line_delay {
                None => emit(Stream::Stdout, &content)?,
                Some(delay) => {
                    for line in content.split_inclusive(|&b| b == b'\n') {
                        emit(Stream::Stdout, line)?;
                        std::thread::sleep(*delay);
                    }
                }
            }
        }
        Command::Run {
            capture,
            program,
            args,
        } => run_program(capture.as_deref(), program, args)?,
    }
    Ok(Flow::Continue)
}

/// Writes and flushes, so the reader gets these bytes now.
fn emit(stream: Stream, bytes: &[u8]) -> Result<(), StepError> {
    let result = match stream {
        Stream::Stdout => {
            let mut out = io::stdout().lock();
            out.write_all(bytes).and_then(|()| out.flush())
        }
        Stream::Stderr => io::stderr().lock().write_all(bytes),
    };
    result.map_err(|e| failed(format!("cannot write to {stream:?}: {e}")))
}

fn ralph_dir() -> Result<PathBuf, StepError> {
    std::env::var_os("RALPH_DIR")
        .map(PathBuf::from)
        .ok_or_else(|| {
            failed("RALPH_DIR is not set; ralph sets it, a test running the fake directly must too")
        })
}

fn create_parent(path: &Path) -> Result<(), StepError> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => fs::create_dir_all(dir)
            .map_err(|e| failed(format!("cannot create {}: {e}", dir.display()))),
        _ => Ok(()),
    }
}

/// Writes a file the test owns, creating its directory.
fn write_new(path: &Path, bytes: &[u8]) -> Result<(), StepError> {
    create_parent(path)?;
    fs::write(path, bytes).map_err(|e| failed(format!("cannot write {}: {e}", path.display())))
}

/// Writes via a temp file and rename, for files ralph may read while we write them.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StepError> {
    create_parent(path)?;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".fake-agent-{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    fs::write(&tmp, bytes)
        .and_then(|()| fs::rename(&tmp, path))
        .map_err(|e| failed(format!("cannot write {}: {e}", path.display())))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

/// Ticks the `n`-th open checkbox in `$RALPH_TASK_FILE`, or all of them for `None`.
fn check_boxes(n: Option<usize>) -> Result<(), StepError> {
    let path = std::env::var_os("RALPH_TASK_FILE")
        .map(PathBuf::from)
        .ok_or_else(|| failed("RALPH_TASK_FILE is not set; ralph sets it, a test running the fake directly must too"))?;
    let text = fs::read_to_string(&path)
        .map_err(|e| failed(format!("cannot read {}: {e}", path.display())))?;
    let (ticked, open) = tick(&text, n);
    if let Some(n) = n
        && n > open
    {
        return Err(failed(format!(
            "cannot tick open checkbox {n}: {} has only {open}",
            path.display()
        )));
    }
    write_atomic(&path, ticked.as_bytes())
}

fn spawn_grandchild(
    lifetime: Duration,
    pid_file: Option<&Path>,
    quiet: bool,
    new_session: bool,
    ignore_sigterm: bool,
) -> Result<(), StepError> {
    let exe =
        std::env::current_exe().map_err(|e| failed(format!("cannot find my own binary: {e}")))?;
    let mut command = std::process::Command::new(exe);
    command
        .arg("--sleep")
        .arg(lifetime.as_millis().to_string())
        .stdin(Stdio::null());
    if quiet {
        command.stdout(Stdio::null()).stderr(Stdio::null());
    }
    if new_session {
        command.arg("--setsid");
    }
    if ignore_sigterm {
        command.arg("--ignore-sigterm");
    }
    // Not waited on, on purpose: the grandchild must outlive us, as an agent's stray server
    // would. Unless in a new session, it stays in our process group, so that a group kill
    // reaches it.
    let child = command
        .spawn()
        .map_err(|e| failed(format!("cannot start the grandchild: {e}")))?;
    if new_session {
        // Only once it has left our session is it out of reach of our group's signals.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while session_of(child.id()) != Some(child.id()) {
            if std::time::Instant::now() > deadline {
                return Err(failed("the grandchild did not leave our session"));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let pid_file = match pid_file {
        Some(path) => path.to_owned(),
        None => match std::env::var_os("RALPH_DIR").map(PathBuf::from) {
            Some(dir) => dir.parent().unwrap_or(&dir).join("grandchild.pid"),
            None => PathBuf::from("grandchild.pid"),
        },
    };
    write_atomic(&pid_file, format!("{}\n", child.id()).as_bytes())
}

/// The session of process `pid` (getsid(2): the same on Linux and macOS).
fn session_of(pid: u32) -> Option<u32> {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).ok()?);
    let session = nix::unistd::getsid(Some(pid)).ok()?;
    u32::try_from(session.as_raw()).ok()
}

/// Writes `total` bytes of filler lines, `line_len` bytes each with the newline, in big writes.
fn flood(total: u64, line_len: usize) -> Result<(), StepError> {
    const FILLER: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut line: Vec<u8> = FILLER.iter().copied().cycle().take(line_len - 1).collect();
    line.push(b'\n');
    let lines_per_chunk = (256 * 1024 / line_len).max(1);
    let chunk = line.repeat(lines_per_chunk);
    let mut left = total;
    let mut out = io::stdout().lock();
    let mut write = |bytes: &[u8]| {
        out.write_all(bytes)
            .map_err(|e| failed(format!("cannot write to stdout: {e}")))
    };
    while left >= chunk.len() as u64 {
        write(&chunk)?;
        left -= chunk.len() as u64;
    }
    if left > 0 {
        // End on a newline even when the total cuts a line short.
        let left = left as usize;
        write(&chunk[..left - 1])?;
        write(b"\n")?;
    }
    out.flush()
        .map_err(|e| failed(format!("cannot write to stdout: {e}")))
}

fn run_program(
    capture: Option<&Path>,
    program: &OsString,
    args: &[OsString],
) -> Result<(), StepError> {
    let name = Path::new(program).display();
    let mut command = std::process::Command::new(program);
    command
        .args(args)
        .stdin(Stdio::inherit())
        .stderr(Stdio::inherit());
    let code_of = |status: std::process::ExitStatus| {
        status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
    };
    let Some(capture) = capture else {
        let status = command
            .status()
            .map_err(|e| failed(format!("cannot start '{name}': {e}")))?;
        if !status.success() {
            eprintln!("ralph-fake-agent: '{name}' exited with {}", code_of(status));
        }
        return Ok(());
    };
    let output = command
        .stdout(Stdio::piped())
        .output()
        .map_err(|e| failed(format!("cannot start '{name}': {e}")))?;
    write_new(capture, &output.stdout)?;
    let mut code_path = capture.as_os_str().to_owned();
    code_path.push(".code");
    write_new(
        Path::new(&code_path),
        format!("{}\n", code_of(output.status)).as_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substring_search() {
        assert!(contains(b"hello world", b"o w"));
        assert!(contains(b"abc", b""));
        assert!(!contains(b"ab", b"abc"));
    }
}
