//! `ralph stop`: stop the loop running in a project from any terminal, as Ctrl-C in its own
//! terminal would: the agent is stopped gracefully, the state saved, a waiting question kept,
//! and `ralph run` resumes.
//!
//! It leaves `.ralph/stop` ([`ralph_protocol::request_stop`]); the loop, which watches `.ralph/`,
//! takes it and stops. This command then waits, woken by the loop's writes to `.ralph/`, until
//! the loop has let go of the workspace.

use std::time::{Duration, Instant};

use ralph_protocol::{State, StopBy, Workspace, request_stop};

use crate::args::StopArgs;
use crate::{CmdResult, Failure};

/// How long `ralph stop` waits for the loop to end: the agent's grace after SIGTERM, the test
/// command's, and the save, with room to spare.
const WAIT: Duration = Duration::from_secs(120);

/// Asks the loop in `-C DIR` to stop and waits until it has.
pub fn run(args: &StopArgs) -> CmdResult {
    let root = crate::cmd_logs::project(&args.dir.dir, "there is no loop to stop")?;
    let ws = Workspace::new(&root);
    ws.check_not_symlink().map_err(Failure::failed)?;
    if !ws.is_locked() {
        return Err(Failure::failed(anyhow::anyhow!(
            "no loop is running in {}: nothing to stop",
            root.display()
        )));
    }
    let (tx, rx) = std::sync::mpsc::channel();
    // Before the request: the loop's answer to it must not be missed.
    ralph_process::watch_blocking(ws.dir(), tx).map_err(|e| {
        Failure::failed(anyhow::anyhow!("cannot watch {}: {e}", ws.dir().display()))
    })?;
    request_stop(&ws, StopBy::Command).map_err(Failure::failed)?;
    eprintln!(
        "ralph: asked the loop in {} to stop; waiting for it to save its state…",
        root.display()
    );
    let start = Instant::now();
    while ws.is_locked() {
        if start.elapsed() > WAIT {
            return Err(Failure::failed(anyhow::anyhow!(
                "the loop in {} has not stopped after {}s; it may be waiting for its agent to end. Ctrl-C in its terminal, or `kill {}`, stops it",
                root.display(),
                WAIT.as_secs(),
                State::load(&ws)
                    .ok()
                    .flatten()
                    .map_or("<pid>".into(), |s| s.pid.to_string())
            )));
        }
        // Woken by the loop's last writes; the lock itself goes without an event, so look
        // again a little later too.
        let _ = rx.recv_timeout(Duration::from_millis(100));
    }
    let iteration = State::load(&ws)
        .ok()
        .flatten()
        .map(|s| format!(" at iteration {}", s.iteration))
        .unwrap_or_default();
    outln!(
        "Stopped the loop in {}{iteration}; its state is saved. `{}` resumes it.",
        root.display(),
        crate::run_command(&root)
    );
    Ok(0)
}
