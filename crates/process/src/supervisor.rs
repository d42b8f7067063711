//! Starting agents and test commands in their own process group, and stopping every process in it.
//!
//! An agent is a command line that may start anything: a dev server, a watcher, a grandchild
//! that ignores SIGTERM. It runs directly when it needs no shell and through `sh -c` otherwise
//! ([`command_line`](crate::command_line)). ralph starts it as the leader of a new process group, so the whole tree
//! can be signalled at once. Stopping is always the same sequence: SIGTERM to the group, a grace
//! period, then SIGKILL to the group, and a check that nothing in it is left alive. The check
//! reads the process table rather than trusting `kill(-pgid, 0)`, because orphaned zombies (waiting for
//! init to reap them) still answer to the latter.
//!
//! On the common path (the agent exits and leaves nothing behind) no timer is armed at all: the
//! first check finds the group empty.

use std::ffi::OsStr;
use std::io;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal as Sig, killpg};
use nix::unistd::Pid;
use tokio::io::AsyncWriteExt;

use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};
use tokio::time::{Instant, sleep};

/// A started process group: the leader, its output pipes, and the group id.
#[derive(Debug)]
pub struct Spawned {
    /// The leader (the program itself, or `sh -c ...`).
    pub child: Child,
    /// The process group id (equal to the leader's pid).
    pub pgid: i32,
    /// The leader's stdout.
    pub stdout: ChildStdout,
    /// The leader's stderr.
    pub stderr: ChildStderr,
}

/// Starts `command` in `dir` as the leader of a new process group: its program directly when
/// it needs no shell, else `sh -c command` ([`command_line::command`](crate::command_line::command)).
///
/// `stdin_data` is written to its stdin from a separate task, then stdin is closed; an agent that
/// exits without reading it is not an error (large prompts never stall the loop, and never go
/// through argv, so `ARG_MAX` does not apply).
pub fn spawn_shell<I, K, V>(
    command: &str,
    dir: &Path,
    env: I,
    stdin_data: Option<Vec<u8>>,
) -> io::Result<Spawned>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<OsStr>,
    V: AsRef<OsStr>,
{
    let piped = stdin_data.is_some();
    let (spawned, stdin) = start(command, dir, env, piped)?;
    if let (Some(data), Some(stdin)) = (stdin_data, stdin) {
        feed_stdin(stdin, data);
    }
    Ok(spawned)
}

/// Writes `data` to a child's `stdin` from a task of its own, then closes it; a child that
/// exits without reading it is not an error.
pub fn feed_stdin(mut stdin: ChildStdin, data: Vec<u8>) {
    tokio::spawn(async move {
        // EPIPE here just means the agent did not want its prompt on stdin.
        let _ = stdin.write_all(&data).await;
        let _ = stdin.shutdown().await;
    });
}

/// A process started ahead of the moment it is needed ([`spawn_waiting`]): the leader of its
/// own process group, its output piped, reading its stdin for what to do.
#[derive(Debug)]
pub struct Waiting {
    spawned: Spawned,
    stdin: ChildStdin,
}

/// Starts `command` in `dir` like [`spawn_shell_open`], to be told later, on its stdin, what
/// to do ([`Waiting::go`]) or that it is not needed ([`Waiting::dismiss`]).
pub fn spawn_waiting<I, K, V>(command: &str, dir: &Path, env: I) -> io::Result<Waiting>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<OsStr>,
    V: AsRef<OsStr>,
{
    let (spawned, stdin) = start(command, dir, env, true)?;
    Ok(Waiting {
        spawned,
        stdin: stdin.expect("stdin was piped"),
    })
}

impl Waiting {
    /// Its pid, which is its process group's id.
    pub fn pid(&self) -> i32 {
        self.spawned.pgid
    }

    /// Writes `header` to its stdin and hands it back as started, its stdin still open for
    /// what follows. `Err` when it had already ended (something killed it): it is reaped, and
    /// nothing was started.
    pub async fn go(mut self, header: &[u8]) -> io::Result<(Spawned, ChildStdin)> {
        let ended = |status: &std::process::ExitStatus| {
            io::Error::other(format!(
                "the process started ahead of time had {}",
                describe_exit(status)
            ))
        };
        if let Some(status) = self.spawned.child.try_wait()? {
            return Err(ended(&status));
        }
        if let Err(e) = self.stdin.write_all(header).await {
            // It ended meanwhile (EPIPE).
            let status = self.dismiss(Duration::ZERO).await;
            return Err(status.as_ref().map_or(e, ended));
        }
        Ok((self.spawned, self.stdin))
    }

    /// It is not needed: its stdin is closed, at which it ends, and it is waited for, so
    /// nothing is left of it, not even a zombie. Its group is killed if it has not ended after
    /// `grace`. How it ended, when it could be waited for.
    pub async fn dismiss(self, grace: Duration) -> Option<std::process::ExitStatus> {
        let Waiting { mut spawned, stdin } = self;
        drop(stdin);
        match tokio::time::timeout(grace, spawned.child.wait()).await {
            Ok(status) => status.ok(),
            Err(_) => {
                kill_group_now(spawned.pgid);
                spawned.child.wait().await.ok()
            }
        }
    }
}

/// Starts `command` like [`spawn_shell`], but hands back its stdin, open, for a
/// conversation (an agent that asks its host questions on stdout and reads answers on stdin).
pub fn spawn_shell_open<I, K, V>(
    command: &str,
    dir: &Path,
    env: I,
) -> io::Result<(Spawned, ChildStdin)>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<OsStr>,
    V: AsRef<OsStr>,
{
    let (spawned, stdin) = start(command, dir, env, true)?;
    Ok((spawned, stdin.expect("stdin was piped")))
}

fn start<I, K, V>(
    command: &str,
    dir: &Path,
    env: I,
    piped_stdin: bool,
) -> io::Result<(Spawned, Option<ChildStdin>)>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<OsStr>,
    V: AsRef<OsStr>,
{
    let env: Vec<(K, V)> = env.into_iter().collect();
    let path_var = env
        .iter()
        .rev()
        .find(|(k, _)| k.as_ref() == "PATH")
        .map(|(_, v)| v.as_ref().to_os_string())
        .or_else(|| std::env::var_os("PATH"));
    let mut cmd = crate::command_line::command(command, dir, path_var.as_deref())?;
    // `PWD` as a shell would set it: a program started without one would otherwise see ralph's
    // own, and some (opencode) take that for their working directory.
    let pwd = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    // The agent and the tests work on the repository they run in: a `GIT_DIR` or
    // `GIT_WORK_TREE` inherited by ralph (from a hook, a wrapper) would point them elsewhere,
    // at the user's own checkout when ralph runs in a worktree.
    cmd.current_dir(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env("PWD", pwd)
        .envs(env)
        .process_group(0)
        .stdin(if piped_stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = crate::adopt::spawn(|| cmd.spawn(), Child::id)?;
    let pgid = child.id().map(|p| p as i32).unwrap_or(0);
    let stdin = child.stdin.take();
    let stdout = child.stdout.take().expect("stdout was piped");
    let stderr = child.stderr.take().expect("stderr was piped");
    Ok((
        Spawned {
            child,
            pgid,
            stdout,
            stderr,
        },
        stdin,
    ))
}

/// How stopping a process group went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// Nothing was left running in the group.
    AlreadyGone,
    /// SIGTERM was enough.
    Terminated,
    /// Something ignored SIGTERM and was killed with SIGKILL.
    Killed,
    /// Something survived even SIGKILL (should not happen; reported, never hidden).
    Survived,
}

/// Whether any live (non-zombie) process is in group `pgid`. Blocking: when the group exists,
/// a read of the process table (from async code, run it through `tokio::task::spawn_blocking`).
pub fn group_alive(pgid: i32) -> bool {
    group_exists(pgid) && group_has_live_member(pgid)
}

/// [`group_alive`], with the read of the process table off the runtime's threads
/// ([`blocking`]); the common case, no such group any more, needs no read.
pub(crate) async fn group_alive_async(pgid: i32) -> bool {
    group_exists(pgid) && blocking(move || group_has_live_member(pgid)).await
}

/// Whether group `pgid` has any member, zombies included (one `kill(-pgid, 0)`).
fn group_exists(pgid: i32) -> bool {
    // EPERM: the group exists but is not ours to signal; count it as there.
    pgid > 1 && killpg(Pid::from_raw(pgid), None) != Err(Errno::ESRCH)
}

/// Runs `work`, a read of the process table, on the runtime's blocking threads and waits for
/// it: the portable backend's walk of the whole table takes milliseconds, and the stops that
/// make it run beside the loop's other work (a question shown meanwhile) on its few threads.
pub(crate) async fn blocking<T>(work: impl FnOnce() -> T + Send + 'static) -> T
where
    T: Send + 'static,
{
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => value,
        Err(e) => match e.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            // Cancelled: the runtime is shutting down, and the task waiting here goes with it.
            Err(_) => std::future::pending().await,
        },
    }
}

/// Scans the process table for a member of `pgid` that is not a zombie.
fn group_has_live_member(pgid: i32) -> bool {
    live_members(pgid).is_none_or(|members| !members.is_empty())
}

/// The pids of the members of group `pgid` that are not zombies; `None` if the process table
/// cannot be read.
pub fn live_members(pgid: i32) -> Option<Vec<i32>> {
    let mut members = crate::sys::processes()?;
    members.retain(|(_, s)| s.group == pgid && !s.exited());
    Some(members.into_iter().map(|(pid, _)| pid).collect())
}

/// Sends SIGKILL to the whole group at once (the "second Ctrl-C" path).
pub fn kill_group_now(pgid: i32) {
    if pgid > 1 {
        let _ = killpg(Pid::from_raw(pgid), Sig::SIGKILL);
    }
}

/// The first step of every graceful stop: SIGTERM to the whole group, and SIGCONT, since a
/// stopped process cannot act on SIGTERM.
pub(crate) fn terminate_group(pgid: i32) {
    if pgid > 1 {
        let _ = killpg(Pid::from_raw(pgid), Sig::SIGTERM);
        let _ = killpg(Pid::from_raw(pgid), Sig::SIGCONT);
    }
}

/// Stops every process in group `pgid`: SIGTERM, up to `grace` to exit, then SIGKILL.
///
/// `hurry` resolves when the caller wants to skip the rest of the grace (a second Ctrl-C).
pub async fn stop_group<F>(pgid: i32, grace: Duration, hurry: F) -> Stopped
where
    F: std::future::Future<Output = ()>,
{
    if !group_alive_async(pgid).await {
        return Stopped::AlreadyGone;
    }
    terminate_group(pgid);
    tokio::pin!(hurry);
    let deadline = Instant::now() + grace;
    let mut hurried = false;
    let gone = || async move { !group_alive_async(pgid).await };
    if wait_until(gone, deadline, Some(hurry.as_mut()), &mut hurried).await {
        return Stopped::Terminated;
    }
    let _ = killpg(Pid::from_raw(pgid), Sig::SIGKILL);
    let after_kill = Instant::now() + Duration::from_secs(2);
    if wait_until::<F, _>(gone, after_kill, None, &mut hurried).await {
        Stopped::Killed
    } else {
        Stopped::Survived
    }
}

/// [`stop_group`] from a plain thread, outside any async runtime (and safe to call inside
/// one: the stop runs on a thread of its own): the notification commands' threads, and the
/// drop that stops the ones still running when the run ends.
pub fn stop_group_blocking(pgid: i32, grace: Duration) -> Stopped {
    let stop = move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build();
        match runtime {
            Ok(rt) => rt.block_on(stop_group(pgid, grace, std::future::pending())),
            // No timer to wait with (out of file descriptors): no grace, then.
            Err(_) => {
                kill_group_now(pgid);
                Stopped::Killed
            }
        }
    };
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("ralph-stop-group".into())
            .spawn_scoped(s, stop)
            .map_or_else(
                |_| {
                    kill_group_now(pgid);
                    Stopped::Killed
                },
                |h| h.join().unwrap_or(Stopped::Survived),
            )
    })
}

/// Waits (with short, growing pauses) until `gone` says the processes being stopped are, or
/// `deadline` passes, or `hurry` resolves (`hurried`, which also ends the wait at once when
/// it is already set); whether they are gone.
///
/// There is no notification for "the last process of a group exited" that does not involve
/// reaping other processes' children, so this checks: quickly at first, then at most every
/// 50 ms. It only runs while processes are being stopped, never on the common path.
pub(crate) async fn wait_until<F, G>(
    mut gone: impl FnMut() -> G,
    deadline: Instant,
    mut hurry: Option<std::pin::Pin<&mut F>>,
    hurried: &mut bool,
) -> bool
where
    F: std::future::Future<Output = ()>,
    G: std::future::Future<Output = bool>,
{
    let mut pause = Duration::from_millis(1);
    loop {
        if gone().await {
            return true;
        }
        let now = Instant::now();
        if now >= deadline || *hurried {
            return false;
        }
        let nap = sleep(pause.min(deadline - now));
        match hurry.as_mut() {
            Some(h) => {
                tokio::select! {
                    () = nap => {}
                    () = h.as_mut() => { *hurried = true; }
                }
            }
            None => nap.await,
        }
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// Describes how a process ended, in words for logs and prompts.
pub fn describe_exit(status: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        format!("exited with status {code}")
    } else if let Some(sig) = status.signal() {
        let name = Sig::try_from(sig)
            .map(|s| s.as_str().to_string())
            .unwrap_or_else(|_| format!("signal {sig}"));
        format!("was killed by {name}")
    } else {
        "ended".to_string()
    }
}

/// A group started for a test: `script` in `dir`, once it has said `started` (it is past its
/// `trap`, say).
#[cfg(test)]
pub(crate) async fn started(script: &str, dir: &Path) -> Spawned {
    use tokio::io::AsyncReadExt;
    let mut s = spawn_shell(script, dir, std::iter::empty::<(&str, &str)>(), None).unwrap();
    let mut buf = [0u8; 16];
    let n = s.stdout.read(&mut buf).await.unwrap();
    assert_eq!(&buf[..n], b"started\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_group_that_ignores_sigterm_is_killed_with_its_grandchild() {
        let dir = tempfile::tempdir().unwrap();
        let script = "trap '' TERM; sleep 300 & echo started; wait";
        let mut s = started(script, dir.path()).await;
        assert!(group_alive(s.pgid));
        let how = stop_group(s.pgid, Duration::from_millis(200), std::future::pending()).await;
        assert_eq!(how, Stopped::Killed);
        let _ = s.child.wait().await;
        assert!(!group_alive(s.pgid));
    }

    /// The leader of a command run without a shell is the program itself; it gets its
    /// arguments as the shell would have split them, the environment and stdin, and stopping
    /// its group stops it and what it started.
    #[tokio::test]
    async fn a_program_started_without_a_shell_leads_its_group_and_is_stopped_with_it() {
        use tokio::io::AsyncReadExt;
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("agent");
        std::fs::write(
            &script,
            "#!/bin/sh\nprintf '%s|' \"$@\" \"$RALPH_X\"\nread line\necho \"$line\"\nsleep 300 &\nexec sleep 300\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut s = spawn_shell(
            "./agent 'two words' plain",
            dir.path(),
            [("RALPH_X", "env")],
            Some(b"from stdin\n".to_vec()),
        )
        .unwrap();
        let mut out = Vec::new();
        while !out.ends_with(b"from stdin\n") {
            let mut buf = [0u8; 64];
            let n = s.stdout.read(&mut buf).await.unwrap();
            assert!(n > 0, "agent ended early: {out:?}");
            out.extend_from_slice(&buf[..n]);
        }
        assert_eq!(out, b"two words|plain|env|from stdin\n");
        assert_eq!(s.pgid, s.child.id().unwrap() as i32);
        // No `sh` in between: the leader was `./agent` (a script, so its interpreter), and
        // is `sleep` once the script has exec'd.
        // `ps` rather than `/proc/PID/comm`: the same test on every backend.
        let comm = || {
            let out = std::process::Command::new("ps")
                .args(["-o", "comm=", "-p", &s.pgid.to_string()])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !comm().trim().ends_with("sleep") {
            assert!(std::time::Instant::now() < deadline, "leader is {}", comm());
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let how = stop_group(s.pgid, Duration::from_secs(5), std::future::pending()).await;
        assert_eq!(how, Stopped::Terminated);
        let _ = s.child.wait().await;
        assert!(!group_alive(s.pgid));
    }

    /// opencode, started without a shell, took ralph's own `PWD` for its working directory and
    /// wrote the task's files into the directory ralph was started from.
    #[tokio::test]
    async fn a_program_started_without_a_shell_sees_its_own_directory_as_pwd() {
        use tokio::io::AsyncReadExt;
        let dir = tempfile::tempdir().unwrap();
        let mut s = spawn_shell(
            "printenv PWD",
            dir.path(),
            std::iter::empty::<(&str, &str)>(),
            None,
        )
        .unwrap();
        let mut out = String::new();
        s.stdout.read_to_string(&mut out).await.unwrap();
        let _ = s.child.wait().await;
        assert_eq!(out.trim_end(), dir.path().display().to_string());
    }

    #[tokio::test]
    async fn a_missing_program_is_an_error_not_a_shell_exit_status() {
        let dir = tempfile::tempdir().unwrap();
        let err = spawn_shell(
            "no-such-agent-xyz -p",
            dir.path(),
            [("PATH", "/usr/bin:/bin")],
            None,
        )
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(err.to_string().contains("no-such-agent-xyz"), "{err}");
    }

    /// The notification commands' stop: from inside a runtime (a `Notifier` dropped by the
    /// loop) as from a plain thread, SIGTERM first, so a command that exits on it is never
    /// SIGKILLed.
    #[tokio::test]
    async fn the_blocking_stop_is_the_graceful_one_and_works_inside_a_runtime() {
        let dir = tempfile::tempdir().unwrap();
        let polite = started("sleep 300 & echo started; wait", dir.path()).await;
        let stubborn = started("trap '' TERM; sleep 300 & echo started; wait", dir.path()).await;
        let grace = Duration::from_secs(30);
        assert_eq!(stop_group_blocking(polite.pgid, grace), Stopped::Terminated);
        let how = stop_group_blocking(stubborn.pgid, Duration::from_millis(200));
        assert_eq!(how, Stopped::Killed);
        for mut s in [polite, stubborn] {
            let _ = s.child.wait().await;
            assert!(!group_alive(s.pgid));
        }
    }

    #[tokio::test]
    async fn an_empty_group_needs_no_wait() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = spawn_shell(
            "exit 0",
            dir.path(),
            std::iter::empty::<(&str, &str)>(),
            Some(b"prompt".to_vec()),
        )
        .unwrap();
        s.child.wait().await.unwrap();
        let how = stop_group(s.pgid, Duration::from_secs(5), std::future::pending()).await;
        assert_eq!(how, Stopped::AlreadyGone);
    }

    /// A process started ahead of time gets what `go` writes, then the rest of the pipe, and
    /// leads its group as if it had been started then.
    #[tokio::test]
    async fn a_waiting_process_reads_its_go_then_the_rest_of_its_stdin() {
        use tokio::io::AsyncReadExt;
        let dir = tempfile::tempdir().unwrap();
        let waiting = spawn_waiting(
            "IFS= read -r go || exit 0; echo \"$go|$RALPH_X\"; cat",
            dir.path(),
            [("RALPH_X", "env")],
        )
        .unwrap();
        let pid = waiting.pid();
        let (mut s, stdin) = waiting.go(b"go now\n").await.unwrap();
        assert_eq!(s.pgid, pid);
        feed_stdin(stdin, b"the prompt".to_vec());
        let mut out = String::new();
        s.stdout.read_to_string(&mut out).await.unwrap();
        assert_eq!(out, "go now|env\nthe prompt");
        assert!(s.child.wait().await.unwrap().success());
    }

    /// One never told to go runs nothing, and is gone once dismissed: reaped, not even a
    /// zombie left. One that is gone already is an error for `go`, not a start.
    #[tokio::test]
    async fn a_dismissed_waiting_process_runs_nothing_and_is_reaped() {
        let dir = tempfile::tempdir().unwrap();
        let waiting = spawn_waiting(
            "IFS= read -r go || exit 0; echo ran > ran",
            dir.path(),
            std::iter::empty::<(&str, &str)>(),
        )
        .unwrap();
        let pid = waiting.pid();
        let status = waiting.dismiss(Duration::from_secs(10)).await.unwrap();
        assert!(status.success(), "{status:?}");
        assert!(!dir.path().join("ran").exists());
        assert_eq!(
            nix::sys::signal::kill(Pid::from_raw(pid), None),
            Err(Errno::ESRCH),
            "pid {pid} is still there"
        );

        let gone = spawn_waiting("exit 3", dir.path(), std::iter::empty::<(&str, &str)>()).unwrap();
        let pid = gone.pid();
        while group_alive(pid) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let err = gone.go(b"go\n").await.unwrap_err();
        assert!(err.to_string().contains("exited with status 3"), "{err}");
    }
}
