//! `notify_command`: the user's own command, the question only in its environment, stopped
//! with its process group when it runs past its limit.

use ralph_process::stop_group_blocking;
use std::io::{self, Read};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Sender};
use std::thread;
use std::time::{Duration, Instant};

use ralph_protocol::one_line;

use super::notice::{Groups, QuestionNotice, STOP_GRACE, warn};

/// How long to wait for a finished child's output when something it started in the
/// background still holds the pipe open.
const OUTPUT_GRACE: Duration = Duration::from_millis(500);

/// How much of a failed child's output is kept for the warning.
const OUTPUT_KEEP: usize = 4 * 1024;

/// The longest environment variable value ralph passes. Linux refuses a single string longer
/// than 128 KiB in `execve` (`MAX_ARG_STRLEN`), which would make the spawn fail outright.
const ENV_VALUE_BYTES: usize = 64 * 1024;

pub(super) fn notify_command(
    command: &str,
    notice: &QuestionNotice,
    limit: Duration,
    groups: &Groups,
    tx: &Sender<String>,
) {
    let options: Vec<String> = notice
        .options
        .iter()
        .map(|o| o.replace(['\r', '\n'], " "))
        .collect();
    let vars: [(&str, String); 8] = [
        ("RALPH_QUESTION", notice.question.clone()),
        ("RALPH_QUESTION_OPTIONS", options.join("\n")),
        (
            "RALPH_QUESTION_DEFAULT",
            notice.default.clone().unwrap_or_default(),
        ),
        (
            "RALPH_QUESTION_DEADLINE",
            notice.deadline.clone().unwrap_or_default(),
        ),
        ("RALPH_QUESTION_ITERATION", notice.iteration.to_string()),
        ("RALPH_ANSWER_COMMAND", notice.answer_command.clone()),
        (
            "RALPH_ANSWER_URL",
            notice.answer_url.clone().unwrap_or_default(),
        ),
        ("RALPH_ROOT", notice.root.clone()),
    ];
    let mut cmd = Command::new("sh");
    // The command line is the user's own; the question is only ever in the environment.
    cmd.arg("-c").arg(command);
    for (name, value) in vars {
        cmd.env(name, env_value(&value));
    }
    if !notice.root.is_empty() {
        cmd.current_dir(&notice.root);
    }
    // Marked as the agent is: after a SIGKILL of ralph, the guard or the next run stops it.
    cmd.env(ralph_process::RUN_VAR, ralph_process::run_id());
    if let Err(e) = run_limited(cmd, limit, groups) {
        warn(
            tx,
            &format!("notify_command `{}`: {e}", one_line(command, 80)),
        );
    }
}

/// Makes `value` safe to pass in the environment: no NUL (which would make the spawn fail)
/// and no longer than [`ENV_VALUE_BYTES`].
fn env_value(value: &str) -> String {
    let value = strip_nul(value);
    let mut end = value.len().min(ENV_VALUE_BYTES);
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    value[..end].to_string()
}

pub(super) fn strip_nul(text: &str) -> String {
    text.replace('\0', "")
}

/// Runs `cmd` with stdin closed and stdout and stderr captured, for at most `limit`.
///
/// The child leads a process group of its own, so that on timeout the whole group is killed
/// (a `sh -c` with a pipeline has children of its own). The error says how it failed, with the
/// start of its output when it exited non-zero.
pub(super) fn run_limited(
    mut cmd: Command,
    limit: Duration,
    groups: &Groups,
) -> Result<(), String> {
    let (mut reader, writer) = io::pipe().map_err(|e| format!("could not make a pipe: {e}"))?;
    let writer_2 = writer
        .try_clone()
        .map_err(|e| format!("could not make a pipe: {e}"))?;
    cmd.stdin(Stdio::null())
        .stdout(writer)
        .stderr(writer_2)
        .process_group(0);
    let program = cmd.get_program().to_owned();
    let spawned = ralph_process::spawn(|| cmd.spawn(), |c| Some(c.id()));
    // `cmd` holds the pipe's write ends; until it is gone, the reader never sees end of file.
    drop(cmd);
    let mut child = spawned.map_err(|e| format!("could not run {}: {e}", program.display()))?;
    let Ok(pgid) = i32::try_from(child.id()) else {
        return Err("its pid is out of range".into());
    };
    groups
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(pgid);

    let (out_tx, out_rx) = mpsc::channel();
    // Without this reader thread the child would get SIGPIPE or block on a full pipe; if the
    // thread cannot be had, the child is still bounded by the limit and its output is lost.
    let _ = thread::Builder::new()
        .name("ralph-notify-output".into())
        .spawn(move || {
            let _ = out_tx.send(read_capped(&mut reader, OUTPUT_KEEP));
        });

    let status = match wait_until(&mut child, Instant::now() + limit, pgid, groups) {
        Ok(Some(status)) => status,
        Ok(None) => {
            // The group id is the child's pid (process_group(0)); a group already gone is fine.
            stop_group_blocking(pgid, STOP_GRACE);
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "still running after {}, so it was stopped",
                humantime::format_duration(limit)
            ));
        }
        Err(e) => return Err(format!("could not wait for it: {e}")),
    };
    if status.success() {
        return Ok(());
    }
    // Something the child started in the background may still hold the pipe open: wait a
    // little for the output, then report without it rather than wait for that to end.
    let output = out_rx.recv_timeout(OUTPUT_GRACE).unwrap_or_default();
    Err(describe_failure(status, &output))
}

/// Polls `child` until it exits or `deadline` passes (`Ok(None)`).
///
/// Polling, not a blocking wait, so the same thread can kill it at the deadline; it runs on a
/// notification thread, never the loop's. Once it is reaped, its group (`pgid`) leaves
/// `groups`, in the same step, under the lock.
fn wait_until(
    child: &mut Child,
    deadline: Instant,
    pgid: i32,
    groups: &Groups,
) -> io::Result<Option<ExitStatus>> {
    loop {
        let reaped = {
            let mut listed = groups
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let reaped = child.try_wait();
            if !matches!(reaped, Ok(None)) {
                listed.retain(|&g| g != pgid);
            }
            reaped
        };
        if let Some(status) = reaped? {
            return Ok(Some(status));
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(None);
        }
        thread::sleep((deadline - now).min(Duration::from_millis(20)));
    }
}

/// Reads to end of file, keeping the first `keep` bytes (the rest is drained so the writer
/// never blocks on a full pipe).
fn read_capped(reader: &mut impl Read, keep: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let room = keep.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    kept
}

fn describe_failure(status: ExitStatus, output: &[u8]) -> String {
    let output = one_line(&String::from_utf8_lossy(output), 200);
    if output.is_empty() {
        format!("failed ({status})")
    } else {
        format!("failed ({status}): {output}")
    }
}
