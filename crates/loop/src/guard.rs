//! The guard: a small process that stops the agent when ralph itself is killed outright.
//!
//! ralph stops every process group it starts (an agent, `test_command`) on every exit it lives
//! through: the run's end, an error, Ctrl-C, SIGTERM, SIGHUP, a panic. SIGKILL (`kill -9`, the
//! OOM killer) gives it no chance, and the group, which is not ralph's own, would run on
//! unattended until the next `ralph run` found it. So `ralph run` starts a guard first
//! (`ralph __guard DIR`): a second process, in a group of its own so that no terminal signal
//! meant for ralph reaches it, reading one end of a pipe. ralph writes `+PGID GRACE_MS` on it
//! when it starts a group (one runs at a time) and `-PGID` once it is gone. End of file on the
//! pipe means ralph has exited, however it died; the guard then stops the group still running,
//! if it is ralph's (a member's environment names this `.ralph/`, as the next run's check does):
//! SIGTERM, up to the grace, SIGKILL, as the loop itself stops one. Then it exits.
//!
//! While ralph runs, the guard sleeps in one blocking read: no polling, no timer. ralph's side
//! is one `write` of a few bytes per group started or ended.

use std::io::{self, BufRead, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use crate::supervisor;

/// ralph's end of the guard: tells it which groups are running.
#[derive(Debug)]
pub struct Guard {
    child: Child,
    /// The pipe; `None` once a write failed (the guard is gone: nothing to tell).
    pipe: Option<ChildStdin>,
}

impl Guard {
    /// Starts `program` with `args` as the guard, reading its end of a new pipe.
    ///
    /// `program` is meant to run [`serve`]: `ralph __guard DIR` from the `ralph` binary.
    pub fn start(program: &Path, args: &[&std::ffi::OsStr]) -> io::Result<Guard> {
        use std::os::unix::process::CommandExt;
        let mut child = Command::new(program)
            .arg0("ralph-guard")
            .args(args)
            // Its own group: Ctrl-C, Ctrl-\ and a hangup go to ralph's group, and ralph handles
            // them; the guard must outlive ralph's handling of them.
            .process_group(0)
            // Hold no directory busy.
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let pipe = child.stdin.take();
        Ok(Guard { child, pipe })
    }

    /// Tells the guard that group `pgid` runs, to be given `grace` between SIGTERM and SIGKILL.
    pub fn started(&mut self, pgid: i32, grace: Duration) {
        self.send(&format!("+{pgid} {}\n", grace.as_millis()));
    }

    /// Tells the guard that group `pgid` is gone (or stopped by ralph).
    pub fn ended(&mut self, pgid: i32) {
        self.send(&format!("-{pgid}\n"));
    }

    fn send(&mut self, message: &str) {
        // One write of a few bytes: the pipe takes it whole, at once. A guard that is gone
        // (killed on its own) gets no more: the next run's check still stops an orphaned group.
        if let Some(pipe) = &mut self.pipe
            && pipe.write_all(message.as_bytes()).is_err()
        {
            self.pipe = None;
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // Closing the pipe ends the guard; it is reaped here if it is already gone, and by
        // init after ralph exits otherwise.
        drop(self.pipe.take());
        let _ = self.child.try_wait();
    }
}

/// The guard's side, until end of file on `input`: follows which group runs (one at a time,
/// as `state.json` records it), then stops it if it is still listed and belongs to the
/// `.ralph/` at `ralph_dir`, as the loop stops a group: [`supervisor::stop_group`].
pub fn serve(input: impl BufRead, ralph_dir: &Path) {
    let mut running: Option<(i32, Duration)> = None;
    for line in input.lines() {
        let Ok(line) = line else { break };
        if let Some((pgid, grace)) = line.strip_prefix('+').and_then(|r| r.split_once(' ')) {
            if let (Ok(pgid), Ok(grace)) = (pgid.parse(), grace.parse()) {
                running = Some((pgid, Duration::from_millis(grace)));
            }
        } else if let Some(pgid) = line.strip_prefix('-').and_then(|p| p.parse::<i32>().ok())
            && running.is_some_and(|(p, _)| p == pgid)
        {
            running = None;
        }
    }
    let Some((pgid, grace)) = running.filter(|(p, _)| crate::runner::group_is_ours(*p, ralph_dir))
    else {
        return;
    };
    // A runtime of this one thread, for the supervisor's own stop (its timers).
    if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        rt.block_on(supervisor::stop_group(pgid, grace, std::future::pending()));
    } else {
        supervisor::kill_group_now(pgid);
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;
    use std::time::Instant;

    use super::*;

    /// A process group of its own (`sh` and a `sleep` in it), marked as the loop's at `dir`
    /// when `ours`; the leader, to wait on.
    fn group(dir: &Path, ours: bool) -> Child {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 300 & wait"]).process_group(0);
        if ours {
            cmd.env("RALPH_DIR", dir);
        }
        let child = cmd.spawn().unwrap();
        // Until the shell has started its `sleep`, the group has one member.
        let pgid = child.id() as i32;
        let start = Instant::now();
        while supervisor::live_members(pgid).unwrap().len() < 2 {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "sleep never started"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        child
    }

    fn gone(child: &mut Child) -> bool {
        let pgid = child.id() as i32;
        let _ = child.try_wait();
        !supervisor::group_alive(pgid)
    }

    #[test]
    fn at_end_of_file_the_group_still_running_is_stopped_if_it_is_ours() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().join(".ralph");
        let mut ended = group(&dir, true);
        let mut foreign = group(&dir, false);
        let mut running = group(&dir, true);
        let (e, f, r) = (ended.id(), foreign.id(), running.id());
        // The group ralph said had ended is left alone.
        serve(format!("+{e} 2000\n-{e}\n").as_bytes(), &dir);
        // So is one that is not the loop's.
        serve(format!("+{f} 2000\n").as_bytes(), &dir);
        // The last one started, still running: stopped, whatever came after it that is not
        // a message, or ends another group.
        let input = format!("+{e} 2000\n+{r} 2000\nnot a message\n+{r}\n-{e}\n");
        serve(input.as_bytes(), &dir);
        let _ = running.wait();
        assert!(gone(&mut running), "the group still listed was not stopped");
        assert!(
            !gone(&mut ended),
            "a group ralph said had ended was stopped"
        );
        assert!(
            !gone(&mut foreign),
            "a group that is not the loop's was stopped"
        );
        for child in [&mut ended, &mut foreign] {
            supervisor::kill_group_now(child.id() as i32);
            let _ = child.wait();
        }
    }

    #[test]
    fn a_group_that_ignores_sigterm_is_killed_after_the_grace() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().join(".ralph");
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "trap '' TERM; sleep 300 & wait; wait"])
            .process_group(0)
            .env("RALPH_DIR", &dir);
        let mut stubborn = cmd.spawn().unwrap();
        let pgid = stubborn.id() as i32;
        while supervisor::live_members(pgid).unwrap().len() < 2 {
            std::thread::sleep(Duration::from_millis(5));
        }
        let start = Instant::now();
        serve(format!("+{pgid} 300\n").as_bytes(), &dir);
        let _ = stubborn.wait();
        assert!(!supervisor::group_alive(pgid), "it survived the guard");
        assert!(
            start.elapsed() >= Duration::from_millis(300),
            "SIGKILL came before the grace was over"
        );
    }
}
