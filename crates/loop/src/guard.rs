//! The guard: a small process that stops the agent when ralph itself is killed outright.
//!
//! ralph stops every process group it starts (an agent, `test_command`) on every exit it lives
//! through: the run's end, an error, Ctrl-C, SIGTERM, SIGHUP, a panic. SIGKILL (`kill -9`, the
//! OOM killer) gives it no chance, and the group, which is not ralph's own, would run on
//! unattended until the next `ralph run` found it. So `ralph run` starts a guard first
//! (`ralph __guard DIR`): a second process, in a group of its own so that no terminal signal
//! meant for ralph reaches it, reading one end of a pipe. ralph writes `+PGID GRACE_MS` on it
//! when it starts a group and `-PGID` once the group is gone. End of file on the pipe means
//! ralph has exited, however it died; the guard then stops every group still listed that is
//! ralph's (a member's environment names this `.ralph/`, as the next run's check does):
//! SIGTERM, up to the grace, SIGKILL. Then it exits.
//!
//! While ralph runs, the guard sleeps in one blocking read: no polling, no timer. ralph's side
//! is one `write` of a few bytes per group started or ended.

use std::io::{self, BufRead, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

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

/// The guard's side, until end of file on `input`: keeps the list of running groups, then
/// stops those still listed that belong to the `.ralph/` at `ralph_dir`.
pub fn serve(input: impl BufRead, ralph_dir: &Path) {
    let mut running: Vec<(i32, Duration)> = Vec::new();
    for line in input.lines() {
        let Ok(line) = line else { break };
        if let Some(rest) = line.strip_prefix('+') {
            let mut parts = rest.split(' ');
            let pgid = parts.next().and_then(|p| p.parse::<i32>().ok());
            let grace = parts.next().and_then(|g| g.parse::<u64>().ok());
            if let (Some(pgid), Some(grace)) = (pgid, grace) {
                running.retain(|(p, _)| *p != pgid);
                running.push((pgid, Duration::from_millis(grace)));
            }
        } else if let Some(pgid) = line.strip_prefix('-').and_then(|p| p.parse::<i32>().ok()) {
            running.retain(|(p, _)| *p != pgid);
        }
    }
    running.retain(|(pgid, _)| crate::runner::group_is_ours(*pgid, ralph_dir));
    stop_groups(&running);
}

/// SIGTERM (and SIGCONT) to every group, up to the longest grace for them all to go, then
/// SIGKILL to what is left.
fn stop_groups(groups: &[(i32, Duration)]) {
    if groups.is_empty() {
        return;
    }
    for &(pgid, _) in groups {
        let _ = killpg(Pid::from_raw(pgid), Signal::SIGTERM);
        let _ = killpg(Pid::from_raw(pgid), Signal::SIGCONT);
    }
    let grace = groups.iter().map(|(_, g)| *g).max().unwrap_or_default();
    let deadline = Instant::now() + grace;
    // Checks with short, growing pauses, as the supervisor's: no event says a group is empty.
    let mut pause = Duration::from_millis(1);
    while groups.iter().any(|(p, _)| supervisor::group_alive(*p)) {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(50));
    }
    for &(pgid, _) in groups {
        supervisor::kill_group_now(pgid);
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;

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
    fn at_end_of_file_the_groups_still_listed_and_ours_are_stopped_and_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().join(".ralph");
        let mut running = group(&dir, true);
        let mut ended = group(&dir, true);
        let mut foreign = group(&dir, false);
        let (r, e, f) = (running.id(), ended.id(), foreign.id());
        let input = format!("+{r} 2000\n+{e} 2000\n+{f} 2000\n-{e}\nnot a message\n+{r}\n");
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
