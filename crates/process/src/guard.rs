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
//! SIGTERM, up to the grace, SIGKILL, as the loop itself stops one. Then, unless ralph said
//! goodbye, it stops the same way every process still alive that carries the run's id
//! (`RALPH_RUN`, see [`orphans::run_id`]) in its environment: what the agent or the tests
//! started outside their group, which ralph would have stopped with its iteration. Then it
//! exits.
//!
//! While ralph runs, the guard sleeps in one blocking read: no polling, no timer. ralph's side
//! is one `write` of a few bytes per group started or ended.
//!
//! The guard also gives the terminal back when ralph dies with its terminal view up
//! ([`SavedTerminal`]): a killed ralph leaves the terminal in raw mode with the cursor hidden, and a
//! shell that does not restore the settings itself (`sh`, or any shell when ralph ran under
//! `make` or a script) is left with no echo and no line editing. ralph says goodbye (`.`) on
//! every exit it lives through, after which the terminal is its own business.

use std::fs::File;
use std::io::{self, BufRead, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use nix::sys::signal::{SigSet, Signal};
use nix::sys::termios::{self, OutputFlags, SetArg, Termios};
use nix::unistd::{getpgid, getpgrp, getppid};

use crate::{orphans, supervisor};

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
    /// `program` is meant to run [`guard_main`]: `ralph __guard DIR` from the `ralph` binary. With
    /// `terminal`, it is also given `--terminal`, and this returns once the guard has read the
    /// terminal's settings ([`SavedTerminal::save`]): before ralph's view changes them.
    pub fn start(program: &Path, args: &[&std::ffi::OsStr], terminal: bool) -> io::Result<Guard> {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(program);
        cmd.arg0("ralph-guard")
            .args(args)
            .args(terminal.then_some("--terminal"))
            // Its own group: Ctrl-C, Ctrl-\ and a hangup go to ralph's group, and ralph handles
            // them; the guard must outlive ralph's handling of them.
            .process_group(0)
            // Hold no directory busy.
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(if terminal {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stderr(Stdio::null());
        let mut child = crate::adopt::spawn(|| cmd.spawn(), |c| Some(c.id()))?;
        if let Some(mut ready) = child.stdout.take() {
            // One byte once the settings are read, or end of file if the guard died first.
            let _ = ready.read(&mut [0]);
        }
        let pipe = child.stdin.take();
        Ok(Guard { child, pipe })
    }

    /// The guard's process group (one of its own): never to be signalled by ralph's cleanups.
    pub fn group(&self) -> i32 {
        i32::try_from(self.child.id()).unwrap_or(0)
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
        // ralph lives: the terminal, if its view has it, is given back by the view itself.
        self.send(".\n");
        // Closing the pipe ends the guard; it is reaped here if it is already gone, and by
        // init after ralph exits otherwise.
        drop(self.pipe.take());
        let _ = self.child.try_wait();
    }
}

/// The terminal ralph's view takes over, as it was before: what the guard needs to give it
/// back if ralph is killed with the view up.
#[derive(Debug)]
pub struct SavedTerminal {
    tty: File,
    saved: Termios,
}

impl SavedTerminal {
    /// The controlling terminal (`/dev/tty`) and its settings now; `None` without one.
    pub fn save() -> Option<SavedTerminal> {
        let tty = File::options()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .ok()?;
        let saved = termios::tcgetattr(&tty).ok()?;
        Some(SavedTerminal { tty, saved })
    }

    /// Gives the terminal back after ralph died without doing so.
    ///
    /// If it is still in raw mode (no output processing: ralph's; a shell's line editor keeps
    /// it), the settings saved are put back, colours and bracketed paste turned off and the
    /// cursor moved below everything on the screen, where the shell's prompt then comes. If it
    /// is not, a shell has taken it back already (bash and zsh restore the settings of a job
    /// killed by a signal), and only the cursor, which no shell shows again, is shown.
    fn give_back(&mut self) {
        // The guard is in a background group: SIGTTOU, which would stop it for changing the
        // settings or writing, is blocked, and the call goes through.
        let _ = SigSet::from(Signal::SIGTTOU).thread_block();
        let Ok(now) = termios::tcgetattr(&self.tty) else {
            return;
        };
        let out: &[u8] = if now.output_flags.contains(OutputFlags::OPOST) {
            SHOW_CURSOR
        } else {
            let _ = termios::tcsetattr(&self.tty, SetArg::TCSANOW, &self.saved);
            GIVE_BACK
        };
        let _ = self.tty.write_all(out);
    }
}

/// Shows the cursor.
const SHOW_CURSOR: &[u8] = b"\x1b[?25h";
/// Resets colours, turns bracketed paste off, moves to the screen's last row and a new line
/// below it, and shows the cursor.
const GIVE_BACK: &[u8] = b"\x1b[0m\x1b[?2004l\x1b[999;1H\r\n\x1b[?25h";

/// `ralph __guard DIR [--terminal] [--run ID]`: with `terminal`, saves the terminal's
/// settings and says so (one byte on standard output, which [`Guard::start`] waits for);
/// then stands guard over standard input (`stand_guard`), for the run with id `run` when given.
pub fn guard_main(ralph_dir: &Path, terminal: bool, run: Option<&str>) {
    // Before anything else: while ralph lives it is the parent, and its group is known.
    let run = run.map(GuardedRun::new);
    let saved = terminal.then(SavedTerminal::save).flatten();
    if terminal {
        let mut out = io::stdout();
        let _ = out.write_all(b".").and_then(|()| out.flush());
    }
    stand_guard(io::stdin().lock(), ralph_dir, saved, run.as_ref());
}

/// The processes of one `ralph run`, for the guard to stop after a crash: those whose
/// environment holds the run's mark ([`orphans::run_mark`]).
#[derive(Debug, Clone)]
pub struct GuardedRun {
    mark: Vec<u8>,
    /// The groups never signalled with them, nor any process in them: the guard's own and
    /// ralph's (the shell's job, where a pipe's other commands, `tee` say, may live on).
    spare: Vec<i32>,
}

impl GuardedRun {
    /// The run with id `id`, as seen from the guard while ralph, its parent, lives.
    pub fn new(id: &str) -> GuardedRun {
        let own = getpgrp();
        let ralph = getpgid(Some(getppid())).unwrap_or(own);
        GuardedRun {
            mark: orphans::run_mark(id),
            spare: vec![own.as_raw(), ralph.as_raw()],
        }
    }
}

/// How long what is still running gets between SIGTERM and SIGKILL when ralph never said
/// (it started no group): ralph's own default.
const DEFAULT_GRACE: Duration = Duration::from_secs(3);

/// The guard's side, until end of file on `input`: follows which group runs (one at a time,
/// as `state.json` records it), then stops it if it is still listed and belongs to the
/// `.ralph/` at `ralph_dir`, as the loop stops a group: [`supervisor::stop_group`]. Before
/// that, if ralph did not say goodbye (`.`), gives `terminal` back; after it, if ralph did not
/// say goodbye, stops every process of `run` still alive wherever it is
/// ([`orphans::stop_everywhere`]): one that had left the agent's group, which ralph, killed
/// before it could, had adopted or not yet found.
fn stand_guard(
    input: impl BufRead,
    ralph_dir: &Path,
    mut terminal: Option<SavedTerminal>,
    run: Option<&GuardedRun>,
) {
    // The group running, and the grace the last one started was given.
    let mut running: Option<i32> = None;
    let mut grace = DEFAULT_GRACE;
    let mut goodbye = false;
    for line in input.lines() {
        let Ok(line) = line else { break };
        if line == "." {
            goodbye = true;
        } else if let Some((pgid, ms)) = line.strip_prefix('+').and_then(|r| r.split_once(' ')) {
            if let (Ok(pgid), Ok(ms)) = (pgid.parse(), ms.parse()) {
                grace = Duration::from_millis(ms);
                running = Some(pgid);
            }
        } else if let Some(pgid) = line.strip_prefix('-').and_then(|p| p.parse::<i32>().ok())
            && running == Some(pgid)
        {
            running = None;
        }
    }
    if let Some(terminal) = terminal.as_mut().filter(|_| !goodbye) {
        terminal.give_back();
    }
    let group = running.filter(|&pgid| orphans::group_is_ours(pgid, ralph_dir));
    let run = run.filter(|_| !goodbye);
    if group.is_none() && run.is_none() {
        return;
    }
    // A runtime of this one thread, for the supervisor's own stop (its timers).
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    else {
        if let Some(pgid) = group {
            supervisor::kill_group_now(pgid);
        }
        return;
    };
    rt.block_on(async {
        if let Some(pgid) = group {
            supervisor::stop_group(pgid, grace, std::future::pending()).await;
        }
        if let Some(run) = run {
            orphans::stop_everywhere(&run.mark, &run.spare, grace).await;
        }
    });
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
        stand_guard(format!("+{e} 2000\n-{e}\n").as_bytes(), &dir, None, None);
        // So is one that is not the loop's.
        stand_guard(format!("+{f} 2000\n").as_bytes(), &dir, None, None);
        // The last one started, still running: stopped, whatever came after it that is not
        // a message, or ends another group.
        let input = format!("+{e} 2000\n+{r} 2000\nnot a message\n+{r}\n-{e}\n");
        stand_guard(input.as_bytes(), &dir, None, None);
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

    /// A pseudo-terminal put in raw mode as ralph's view puts it, with the settings from
    /// before saved as the guard saves them; and the side a terminal emulator reads.
    fn raw_terminal() -> (SavedTerminal, File) {
        let pty = nix::pty::openpty(None, None).unwrap();
        let tty = File::from(pty.slave);
        let saved = termios::tcgetattr(&tty).unwrap();
        let mut raw = saved.clone();
        termios::cfmakeraw(&mut raw);
        termios::tcsetattr(&tty, SetArg::TCSANOW, &raw).unwrap();
        (SavedTerminal { tty, saved }, File::from(pty.master))
    }

    fn settings(terminal: &SavedTerminal) -> Termios {
        termios::tcgetattr(&terminal.tty).unwrap()
    }

    /// What the terminal was sent: all the emulator's side reads up to a mark written after.
    fn sent(master: &mut File, mut tty: &File) -> Vec<u8> {
        tty.write_all(b"|").unwrap();
        let mut out = Vec::new();
        let mut byte = [0];
        while out.last() != Some(&b'|') {
            master.read_exact(&mut byte).unwrap();
            out.push(byte[0]);
        }
        out.pop();
        out
    }

    #[test]
    fn without_a_goodbye_the_terminal_is_given_back_and_with_one_it_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().join(".ralph");

        // ralph said goodbye: its view gives the terminal back itself.
        let (terminal, mut master) = raw_terminal();
        let raw = settings(&terminal);
        let tty = terminal.tty.try_clone().unwrap();
        stand_guard(".\n".as_bytes(), &dir, Some(terminal), None);
        assert_eq!(termios::tcgetattr(&tty).unwrap(), raw);
        assert_eq!(sent(&mut master, &tty), b"");

        // ralph died with the terminal in raw mode: settings back, cursor below and shown.
        let (terminal, mut master) = raw_terminal();
        let (saved, tty) = (terminal.saved.clone(), terminal.tty.try_clone().unwrap());
        stand_guard("+1 10\n-1\n".as_bytes(), &dir, Some(terminal), None);
        assert_eq!(termios::tcgetattr(&tty).unwrap(), saved);
        // Written after the settings came back: the line discipline turns `\n` into `\r\n`.
        let expected = String::from_utf8_lossy(GIVE_BACK).replace('\n', "\r\n");
        assert_eq!(String::from_utf8_lossy(&sent(&mut master, &tty)), expected);

        // A shell has the terminal back already, its line editor's settings in place (output
        // processing kept): they stay, and the cursor is shown.
        let (terminal, mut master) = raw_terminal();
        let mut shell = terminal.saved.clone();
        shell
            .local_flags
            .remove(termios::LocalFlags::ICANON | termios::LocalFlags::ECHO);
        termios::tcsetattr(&terminal.tty, SetArg::TCSANOW, &shell).unwrap();
        let tty = terminal.tty.try_clone().unwrap();
        stand_guard("".as_bytes(), &dir, Some(terminal), None);
        assert_eq!(termios::tcgetattr(&tty).unwrap(), shell);
        assert_eq!(sent(&mut master, &tty), SHOW_CURSOR);
    }

    /// `sleep 300` in a group of its own, with `env` added to its environment.
    fn sleeper(env: &[(&str, &str)]) -> Child {
        let mut cmd = Command::new("sleep");
        cmd.arg("300").process_group(0).envs(env.iter().copied());
        cmd.spawn().unwrap()
    }

    /// Whether `child` has exited (it is reaped if so).
    fn exited(child: &mut Child) -> bool {
        child.try_wait().unwrap().is_some()
    }

    #[test]
    fn without_a_goodbye_every_process_of_the_run_is_stopped_wherever_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().join(".ralph");
        let id = format!("guard-test-{}", std::process::id());
        let run = GuardedRun {
            mark: orphans::run_mark(&id),
            spare: vec![getpgrp().as_raw()],
        };
        let mut ours = sleeper(&[("RALPH_RUN", &id)]);
        let mut other_run = sleeper(&[("RALPH_RUN", &format!("{id}-2"))]);
        let mut unmarked = sleeper(&[]);
        // ralph said goodbye: it stopped what it started itself.
        stand_guard(".\n".as_bytes(), &dir, None, Some(&run));
        std::thread::sleep(Duration::from_millis(100));
        let after_goodbye = exited(&mut ours);
        // ralph was killed: no group was running, but a process of the run lives on. The
        // guard returns once it is gone.
        stand_guard("+1 300\n-1\n".as_bytes(), &dir, None, Some(&run));
        let after_crash = exited(&mut ours);
        let spared = [exited(&mut other_run), exited(&mut unmarked)];
        for child in [&mut ours, &mut other_run, &mut unmarked] {
            let _ = child.kill();
            let _ = child.wait();
        }
        assert!(!after_goodbye, "stopped after a goodbye");
        assert!(after_crash, "the run's process outlived the guard");
        assert_eq!(
            spared,
            [false, false],
            "a process not of this run was stopped"
        );
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
        stand_guard(format!("+{pgid} 300\n").as_bytes(), &dir, None, None);
        let _ = stubborn.wait();
        assert!(!supervisor::group_alive(pgid), "it survived the guard");
        assert!(
            start.elapsed() >= Duration::from_millis(300),
            "SIGKILL came before the grace was over"
        );
    }
}
