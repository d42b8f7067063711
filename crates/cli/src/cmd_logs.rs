//! `ralph logs [-f]`: the running iteration's output, from any terminal.
//!
//! The loop writes what the agent prints, raw, to `.ralph/logs/run-NNNN-iter-NNNN.out`
//! (flushed whenever it has caught up with the agent). This reads the newest such file,
//! decodes it as the loop does (the agent's stream format, from `state.json`) and prints it as
//! the loop's plain view would. With `-f` it follows: the file watch on `.ralph/logs/` wakes it
//! for each write and for the next iteration's file, until the loop ends.

use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::Path;
use std::time::Duration;

use ralph_loop::logs::{self, OutputFile};
use ralph_protocol::{AgentChoice, State, Status, Workspace};
use ralph_signal::{AgentEvent, Decoder, StreamFormat};

use crate::args::LogsArgs;
use crate::locate;
use crate::{CmdResult, Failure};

/// Prints the newest iteration's output, and with `-f` what follows.
pub fn run(args: &LogsArgs) -> CmdResult {
    let root = project(&args.dir.dir, "there are no logs to show")?;
    let ws = Workspace::new(&root);
    ws.check_not_symlink().map_err(Failure::failed)?;
    let state = State::load(&ws).map_err(Failure::failed)?;
    let format = agent_format(state.as_ref());
    let (tx, rx) = std::sync::mpsc::channel();
    // Only a running loop is followed (else what is there is all there is), so `.ralph/`
    // exists: nothing is created in a project where no loop runs.
    if args.follow && ws.is_locked() {
        // Both: the logs for output, `.ralph/` for the loop's end (its last `state.json`).
        if let Err(e) = std::fs::create_dir(ws.logs())
            && e.kind() != std::io::ErrorKind::AlreadyExists
        {
            return Err(Failure::failed(anyhow::anyhow!(
                "cannot make {}: {e}",
                ws.logs().display()
            )));
        }
        for dir in [ws.logs(), ws.dir().to_path_buf()] {
            ralph_process::watch_blocking(&dir, tx.clone()).map_err(|e| {
                Failure::failed(anyhow::anyhow!("cannot watch {}: {e}", dir.display()))
            })?;
        }
    }
    let mut shown: Option<Following> = None;
    loop {
        let newest = logs::latest_output(&ws.logs());
        if let Some(newest) = newest
            && shown.as_ref().is_none_or(|f| f.file != newest)
        {
            if let Some(mut old) = shown.take() {
                old.read_rest(true);
            }
            crate::report(format_args!(
                "ralph: iteration {} of run {}{} ({})",
                newest.iteration,
                newest.run,
                match newest.attempt {
                    1 => String::new(),
                    n => format!(", attempt {n}"),
                },
                newest.path.display()
            ));
            shown = Some(Following::new(newest, format));
        }
        let running = ws.is_locked();
        if let Some(f) = shown.as_mut() {
            // The loop is gone: what is in the file is all there will be.
            f.read_rest(!running);
        }
        if !args.follow || !running {
            if shown.is_none() {
                outln!(
                    "ralph: no agent output in {} yet{}",
                    ws.logs().display(),
                    if running {
                        String::new()
                    } else {
                        format!("; start a loop with `{}`", crate::command_in(&root, "run"))
                    }
                );
            } else if args.follow {
                outln!("ralph: the loop is not running: {}", ended(&ws));
            }
            return Ok(0);
        }
        // Woken by a write; the timeout only notices a loop killed outright, whose end
        // writes nothing.
        let _ = rx.recv_timeout(Duration::from_secs(1));
        while rx.try_recv().is_ok() {}
    }
}

/// How the loop ended, from `state.json`.
fn ended(ws: &Workspace) -> String {
    match State::load(ws).ok().flatten() {
        Some(s) if matches!(s.status, Status::Running | Status::WaitingInput) => {
            format!(
                "it ended without saying so; `{}` resumes",
                crate::command_in(ws.root(), "run")
            )
        }
        Some(s) => format!(
            "{}{}",
            s.status.as_str(),
            s.reason
                .map(|r| format!(" ({})", ralph_protocol::clean(&r)))
                .unwrap_or_default()
        ),
        None => "no state recorded".into(),
    }
}

/// The project `dir` is in, or an error saying `what` cannot be done outside one.
pub fn project(dir: &Path, what: &str) -> Result<std::path::PathBuf, Failure> {
    match locate::find_project(dir)? {
        Some(root) => Ok(root),
        None => Err(Failure::failed(anyhow::anyhow!(
            "{}: not inside a project (no .ralph/ or RALPH_TASK.md there or in any directory above it), so {what}; name one with -C DIR",
            locate::project_root(dir)?.display()
        ))),
    }
}

/// How the loop's agent prints: its preset's format, the format given with its command, or
/// plain text.
pub fn agent_format(state: Option<&State>) -> StreamFormat {
    match state.and_then(|s| s.agent_choice.as_ref()) {
        Some(AgentChoice::Preset { name }) => ralph_loop::agents::find(name)
            .map(ralph_loop::agents::Preset::format)
            .unwrap_or(StreamFormat::Text),
        Some(AgentChoice::Command {
            format: Some(f), ..
        }) => StreamFormat::from_name(f).unwrap_or(StreamFormat::Text),
        _ => StreamFormat::Text,
    }
}

/// The agent's last line in its newest output file (read from the last 64 KiB), for
/// `ralph status`.
pub fn last_line(ws: &Workspace, format: StreamFormat) -> Option<String> {
    const TAIL: u64 = 64 * 1024;
    let file = logs::latest_output(&ws.logs())?;
    let mut f = std::fs::File::open(&file.path).ok()?;
    let len = f.metadata().ok()?.len();
    let from = len.saturating_sub(TAIL);
    f.seek(SeekFrom::Start(from)).ok()?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).ok()?;
    // Cut mid-line: the decoder starts at the first whole line.
    let start = match from {
        0 => 0,
        _ => bytes
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |i| i + 1),
    };
    let mut decoder = Decoder::new(format);
    let mut events = Vec::new();
    decoder.feed(&bytes[start..], &mut events);
    decoder.finish(&mut events);
    ralph_ui::last_line(&events)
}

/// One output file being shown: how far it has been read, and its decoder.
struct Following {
    file: OutputFile,
    offset: u64,
    decoder: Decoder,
}

impl Following {
    fn new(file: OutputFile, format: StreamFormat) -> Self {
        Following {
            file,
            offset: 0,
            decoder: Decoder::new(format),
        }
    }

    /// Prints what was written since the last read; `last`: nothing more will come, so a line
    /// without its newline is shown too.
    fn read_rest(&mut self, last: bool) {
        const CHUNK: u64 = 1024 * 1024;
        loop {
            let mut bytes = Vec::new();
            if let Ok(mut f) = std::fs::File::open(&self.file.path)
                && f.seek(SeekFrom::Start(self.offset)).is_ok()
                && let Ok(n) = f.take(CHUNK).read_to_end(&mut bytes)
            {
                self.offset += n as u64;
            }
            let more = bytes.len() as u64 == CHUNK;
            let mut events: Vec<AgentEvent> = Vec::new();
            self.decoder.feed(&bytes, &mut events);
            if last && !more {
                self.decoder.finish(&mut events);
            }
            let mut out = Vec::new();
            for e in &events {
                let _ = ralph_ui::agent_event(&mut out, e);
            }
            write_out(&out);
            if !more {
                return;
            }
        }
    }
}

/// Writes `bytes` to stdout now; a reader gone away (`ralph logs -f | head`) ends the command
/// quietly, as [`crate::report`] does.
fn write_out(bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            eprintln!("ralph: cannot write to standard output: {e}");
            std::process::exit(1);
        }
    }
}
