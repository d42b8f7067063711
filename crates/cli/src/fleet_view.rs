//! The fleet view's glue: the rows (`ralph_fleet::rows`), the watches that wake the view when
//! a loop writes, and what its keys do (answer through the question's desk, stop, land, retry,
//! the diff in the pager). Used by `ralph fleet` and `ralph status --all --watch`.

use std::collections::HashSet;
use std::ffi::OsString;
use std::io::{self, IsTerminal};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{self, Sender};
use std::time::{Instant, SystemTime};

use ralph_fleet::rows::{Collector, LastSaid, LoopRow, sort};
use ralph_git::worktree::LoopInfo;
use ralph_protocol::{
    AnsweredBy, QuestionId, Reply, Request, StopBy, Submitted, Workspace, answer_question,
    describe_span, question_waiting, registry_dir, request_stop, send_request,
};
use ralph_ui::{FleetAction, FleetHost, FleetView};

/// How to show the loops.
pub struct ShowOptions {
    /// `--no-tui`, or standard output is not a terminal: one line per change of a row.
    pub plain: bool,
    /// The loop roots to show; `None` shows every loop on the machine.
    pub only: Option<Vec<PathBuf>>,
    /// Rows of the caller's own, shown with the loops' (a fleet's queued tasks).
    pub extra: Box<dyn Fn() -> Vec<LoopRow> + Send>,
    /// Whether the view should close by itself (the caller's loops have all ended).
    pub finished: Box<dyn Fn() -> bool + Send>,
    /// Whether Ctrl-C (SIGINT), SIGTERM or SIGHUP closes the plain view as `q` closes the
    /// terminal one, so that the caller can still say how its loops stand; a second one exits
    /// at once (130). Without it they end a plain view's process, as they end any command;
    /// the terminal view always closes on them as on `q`, so the terminal is put back.
    pub leave_on_signal: bool,
}

/// What the agent said last in a loop: its newest log, decoded in its stream format, worded
/// as `ralph status` words it.
pub fn last_said() -> Box<LastSaid> {
    Box::new(|ws, state| crate::cmd_logs::last_line(ws, crate::cmd_logs::agent_format(Some(state))))
}

/// Shows the loops until `q` (or until `finished` says so); the loops go on either way.
pub fn show(opts: ShowOptions) -> io::Result<()> {
    let (tx, changes) = mpsc::channel();
    let wake = tx.clone();
    let watcher = spawn_watcher(tx)?;
    let dumb = std::env::var("TERM").map_or(true, |t| t.is_empty() || t == "dumb");
    let plain = opts.plain || dumb || !io::stdout().is_terminal() || !io::stdin().is_terminal();
    let mut finished = opts.finished;
    // The terminal view always leaves on a signal, as on `q`, so that a `kill` (or a closed
    // ssh session) never leaves the terminal in raw mode on the alternate screen.
    if !plain || opts.leave_on_signal {
        let left = Arc::new(AtomicBool::new(false));
        leave_on_signal(left.clone(), wake, plain)?;
        finished = Box::new(move || left.load(Ordering::Acquire) || finished());
    }
    let mut host = Host {
        collector: Collector::new(last_said()),
        only: opts.only,
        extra: opts.extra,
        finished,
        watched: HashSet::new(),
        watcher,
    };
    // A loop that starts registers here: the view hears of it at once.
    if let Some(dir) = registry_dir()
        // As the registry makes it: it lists the user's projects, for the user alone.
        && std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .is_ok()
    {
        host.watch(&dir);
    }
    if plain {
        return ralph_ui::run_fleet_plain(&mut host, &changes, &mut io::stdout());
    }
    ralph_ui::run_fleet_tui(&mut host, changes)
}

/// The pager `d` runs (its pid), while it runs; 0 otherwise.
static PAGER: AtomicU32 = AtomicU32::new(0);

/// Sets `left` and wakes the view (`wake`) on the first SIGINT, SIGTERM or SIGHUP, saying so
/// on stderr when `say` (a terminal view says nothing over its screen); leaves at once with
/// 130 on the next, the terminal given back ([`ralph_ui::leave_fleet_now`]). The handlers are
/// in place when this returns.
///
/// While the pager runs, a SIGINT is the Ctrl-C typed for the pager (it shares the
/// terminal's foreground group), not for the view; a SIGTERM or SIGHUP ends the pager too, as
/// the view cannot close before the pager has given the terminal back.
fn leave_on_signal(left: Arc<AtomicBool>, wake: Sender<()>, say: bool) -> io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (mut int, mut term, mut hup) = {
        let _in_runtime = rt.enter();
        (
            signal(SignalKind::interrupt())?,
            signal(SignalKind::terminate())?,
            signal(SignalKind::hangup())?,
        )
    };
    std::thread::Builder::new()
        .name("ralph-fleet-signals".into())
        .spawn(move || {
            rt.block_on(async move {
                loop {
                    let typed = tokio::select! {
                        _ = int.recv() => true,
                        _ = term.recv() => false,
                        _ = hup.recv() => false,
                    };
                    if PAGER.load(Ordering::Acquire) != 0 {
                        if typed {
                            continue;
                        }
                        end_pager();
                    }
                    if left.swap(true, Ordering::AcqRel) {
                        end_pager();
                        ralph_ui::leave_fleet_now(130);
                    }
                    if say {
                        eprintln!(
                            "ralph: leaving; the loops go on without the fleet (Ctrl-C again leaves at once)"
                        );
                    }
                    let _ = wake.send(());
                }
            });
        })?;
    Ok(())
}

/// Ends the pager `d` runs, if it runs, and waits (a moment at most) until it has ended and
/// so given the terminal back.
fn end_pager() {
    let pid = PAGER.load(Ordering::Acquire);
    let Ok(pid) = i32::try_from(pid) else { return };
    if pid == 0 {
        return;
    }
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    );
    let until = Instant::now() + std::time::Duration::from_secs(2);
    while PAGER.load(Ordering::Acquire) != 0 && Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

struct Host {
    collector: Collector,
    only: Option<Vec<PathBuf>>,
    extra: Box<dyn Fn() -> Vec<LoopRow> + Send>,
    finished: Box<dyn Fn() -> bool + Send>,
    /// The directories watched so far.
    watched: HashSet<PathBuf>,
    /// Asks the watch thread to watch one more directory.
    watcher: tokio::sync::mpsc::UnboundedSender<PathBuf>,
}

/// The thread that watches the loops' directories: one inotify instance for all of them (the
/// kernel allows a user only 128, and twenty loops use some of their own), each change a `()`
/// on `changes`. Directories to watch are sent on the returned channel.
fn spawn_watcher(changes: Sender<()>) -> io::Result<tokio::sync::mpsc::UnboundedSender<PathBuf>> {
    let (add_tx, mut add_rx) = tokio::sync::mpsc::unbounded_channel::<PathBuf>();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("ralph-fleet-watch".into())
        .spawn(move || {
            rt.block_on(async move {
                let Ok(mut watch) = ralph_process::DirsWatch::new() else {
                    // No watch: the view still reads the rows at every tick.
                    while add_rx.recv().await.is_some() {}
                    return;
                };
                let (wake_tx, mut wake_rx) = tokio::sync::mpsc::unbounded_channel();
                loop {
                    tokio::select! {
                        dir = add_rx.recv() => match dir {
                            Some(dir) => {
                                if !watch.contains(&dir) {
                                    let _ = watch.add(&dir, None, wake_tx.clone());
                                }
                            }
                            None => return,
                        },
                        Some(()) = wake_rx.recv() => {
                            if changes.send(()).is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        })?;
    Ok(add_tx)
}

impl Host {
    /// Wakes the view on every change in `dir` (once per directory).
    fn watch(&mut self, dir: &Path) {
        if self.watched.contains(dir) || !dir.is_dir() {
            return;
        }
        if self.watcher.send(dir.to_path_buf()).is_ok() {
            self.watched.insert(dir.to_path_buf());
        }
    }
}

impl FleetHost for Host {
    fn rows(&mut self, now: Instant) -> Vec<LoopRow> {
        // The caller's own row of a loop says more than its files yet do (a task queued to
        // resume in the worktree it left, a run that is starting): it takes the loop's place.
        // Asked first, so a loop's files read after it are never older than what it says.
        let extra = (self.extra)();
        let mut rows = self.collector.collect(self.only.as_deref(), now);
        rows.retain(|r| !extra.iter().any(|e| same_dir(&e.root, &r.root)));
        rows.extend(extra);
        sort(&mut rows);
        for row in &rows {
            self.watch(&row.root.join(".ralph"));
        }
        rows
    }

    fn act(&mut self, action: FleetAction, view: &mut FleetView, now: Instant) {
        let note = match action {
            FleetAction::Open(root) => match question_waiting(&Workspace::new(&root)) {
                Ok(Some(w)) => {
                    view.open_question(&root, &w.pending, now, SystemTime::now());
                    return;
                }
                Ok(None) => format!("No question waits in {} any more.", name(&root)),
                Err(e) => format!("{e}"),
            },
            FleetAction::Answer { root, id, text } => {
                view.close_question();
                answer(&root, &id, text)
            }
            FleetAction::Skip { root, id } => {
                view.close_question();
                request(
                    &root,
                    &Request::skip(&id),
                    "Skipped: the agent goes on with its best guess.",
                )
            }
            FleetAction::Extend { root, id, by } => match Request::extend(&id, by) {
                Ok(req) => request(
                    &root,
                    &req,
                    &format!("Asked {} for {} more.", name(&root), describe_span(by)),
                ),
                Err(why) => why,
            },
            FleetAction::Stop(root) => {
                match request_stop(&Workspace::new(&root), StopBy::Command) {
                    Ok(()) => format!("Asked {} to stop; `r` runs it again.", name(&root)),
                    Err(e) => format!("Could not ask {} to stop: {e}", name(&root)),
                }
            }
            FleetAction::Land(root) => {
                let args: Vec<OsString> = vec!["land".into(), "-C".into(), root.clone().into()];
                match ralph_in(&root, &args).and_then(|cmd| spawn_detached(&root, "land", cmd)) {
                    Ok((log, mut child)) => {
                        // Reaped when it ends, so no zombie stays while the view runs.
                        std::thread::spawn(move || child.wait());
                        format!("Landing {} (output: {}).", name(&root), log.display())
                    }
                    Err(e) => format!("Could not start `ralph land` for {}: {e}", name(&root)),
                }
            }
            FleetAction::Retry(root) => retry(&root),
            FleetAction::Diff(root) => match show_diff(&root) {
                Ok(None) => return,
                Ok(Some(note)) => note,
                Err(e) => format!("Could not show the diff of {}: {e}", name(&root)),
            },
            FleetAction::None | FleetAction::Redraw | FleetAction::Quit => return,
        };
        view.set_note(note);
    }

    fn finished(&mut self) -> bool {
        (self.finished)()
    }
}

/// Whether `a` and `b` name the same directory.
fn same_dir(a: &Path, b: &Path) -> bool {
    a == b || std::fs::canonicalize(a).is_ok_and(|a| std::fs::canonicalize(b).is_ok_and(|b| a == b))
}

/// A loop's name: the last part of its root.
fn name(root: &Path) -> String {
    root.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| root.display().to_string())
}

/// Answers the question `id` of the loop in `root` through its desk; what happened, in words.
fn answer(root: &Path, id: &QuestionId, text: String) -> String {
    let ws = Workspace::new(root);
    let first = ralph_protocol::one_line(text.lines().next().unwrap_or(""), 60);
    match answer_question(
        &ws,
        Some(id),
        &Reply::Text(text),
        AnsweredBy::RalphAnswer,
        None,
    ) {
        Ok(Submitted::Accepted) => format!("Answered {}: {first}", name(root)),
        Ok(Submitted::AlreadyAnswered(a)) => format!(
            "{} was already answered by {}: your answer was not sent.",
            name(root),
            a.source()
        ),
        Ok(Submitted::Skipped) => "The question was skipped before your answer arrived.".into(),
        Ok(Submitted::RunEnded) => format!(
            "The run in {} that asked has ended: nobody waits for this answer.",
            name(root)
        ),
        Err(e) => format!("{e}"),
    }
}

/// Sends the loop in `root` a request for its waiting question (skip, more time).
fn request(root: &Path, req: &Request, done: &str) -> String {
    match send_request(&Workspace::new(root), req) {
        Ok(()) => done.to_owned(),
        Err(e) => format!("Could not reach the loop in {}: {e}", name(root)),
    }
}

/// Runs the loop in `root` again, detached, as its last run was started: a fleet's loop as
/// its fleet started it (its flags, ports and the fleet's environment, so the fleet's cost cap
/// counts it again), any other with the agent its last run had; what happened, in words (a
/// run that refuses to start says why at once).
fn retry(root: &Path) -> String {
    let started = retry_command(root).and_then(|cmd| spawn_detached(root, "run", cmd));
    let (log, mut child) = match started {
        Ok(started) => started,
        Err(e) => return format!("Could not start `ralph run` in {}: {e}", name(root)),
    };
    // A run that cannot start (a bad task file, a missing agent) ends at once: say why here.
    let until = Instant::now() + std::time::Duration::from_millis(700);
    while Instant::now() < until {
        if let Ok(Some(status)) = child.try_wait() {
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            let last = said
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            return format!(
                "`ralph run` in {} ended at once ({status}): {}",
                name(root),
                ralph_protocol::one_line(last, 200)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Reaped when it ends, so no zombie stays while the view runs.
    std::thread::spawn(move || child.wait());
    format!("Running {} again (output: {}).", name(root), log.display())
}

/// The `ralph run` that runs the loop in `root` again: a fleet's member exactly as its fleet
/// starts it (`ralph_fleet::schedule::member_command`), any other loop in its own directory.
fn retry_command(root: &Path) -> io::Result<Command> {
    let state = ralph_protocol::user_dir(ralph_protocol::UserDir::State)
        .ok_or_else(|| io::Error::other("no state directory; set RALPH_STATE_DIR"))?;
    if let Some(cmd) = ralph_fleet::schedule::rerun(&std::env::current_exe()?, &state, root) {
        return cmd;
    }
    ralph_in(root, &retry_args(root))
}

/// `ralph ARGS` run in `root`, in a process group of its own.
fn ralph_in(root: &Path, args: &[OsString]) -> io::Result<Command> {
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(args)
        .current_dir(root)
        .stdin(Stdio::null())
        .process_group(0);
    Ok(cmd)
}

/// The arguments of the `ralph run` that runs a loop of no fleet in `root` again: in its
/// worktree with its task file for a worktree loop, with the agent its last run had.
fn retry_args(root: &Path) -> Vec<OsString> {
    use ralph_protocol::{AgentChoice, State};
    let mut args: Vec<OsString> = vec!["run".into(), "-C".into(), root.into(), "--no-tui".into()];
    if let Some(task) = LoopInfo::load(&root.join(".ralph")).and_then(|i| i.task_file) {
        args.extend(["--worktree".into(), "--task".into(), task.into()]);
    }
    match State::load(&Workspace::new(root))
        .ok()
        .flatten()
        .and_then(|s| s.agent_choice)
    {
        Some(AgentChoice::Preset { name }) => args.extend(["--agent".into(), name.into()]),
        Some(AgentChoice::Command {
            command,
            format,
            resume_command,
        }) => {
            args.extend(["--agent-cmd".into(), command.into()]);
            if let Some(f) = format {
                args.extend(["--agent-format".into(), f.into()]);
            }
            if let Some(r) = resume_command {
                args.extend(["--agent-resume-cmd".into(), r.into()]);
            }
        }
        None => {}
    }
    args
}

/// Starts `cmd` (a `ralph` command for the loop in `root`, in a process group of its own, so
/// it outlives the view and no Ctrl-C typed here reaches it) with its output in a file in
/// ralph's state directory. The file's path, and the child (the caller reaps it).
fn spawn_detached(
    root: &Path,
    what: &str,
    mut cmd: Command,
) -> io::Result<(PathBuf, std::process::Child)> {
    let dir = ralph_protocol::user_dir(ralph_protocol::UserDir::State)
        .ok_or_else(|| io::Error::other("no state directory; set RALPH_STATE_DIR"))?
        .join("fleet-view");
    std::fs::create_dir_all(&dir)?;
    let log_path = dir.join(format!("{}-{what}.log", name(root)));
    let log = std::fs::File::create(&log_path)?;
    let child = cmd.stdout(log.try_clone()?).stderr(log).spawn()?;
    Ok((log_path, child))
}

/// The loop's work against its base (a worktree loop's base commit, a plain loop's `HEAD`),
/// untracked files included, through the user's pager (git's: `GIT_PAGER`, `core.pager`,
/// `PAGER`, else `less`), which waits for its `q` even when the diff is short.
fn show_diff(root: &Path) -> io::Result<Option<String>> {
    use std::io::Write;
    let base = LoopInfo::load(&root.join(".ralph"))
        .map(|i| i.base)
        .unwrap_or_else(|| "HEAD".into());
    let patch = ralph_git::worktree::work_patch(root, &base, true).map_err(io::Error::other)?;
    if patch.is_empty() {
        return Ok(Some(format!(
            "{} has changed nothing against its base yet.",
            name(root)
        )));
    }
    let pager = ralph_git::Git::new(root)
        .run(["var", "GIT_PAGER"])
        .unwrap_or_else(|_| "less".into());
    // The user's own pager command line, run as git runs it; the diff goes on its stdin.
    let mut child = Command::new("sh")
        .args(["-c", &pager])
        .env(
            "LESS",
            std::env::var("LESS").unwrap_or_else(|_| "RX".into()),
        )
        .stdin(Stdio::piped())
        .spawn()?;
    PAGER.store(child.id(), Ordering::Release);
    if let Some(mut stdin) = child.stdin.take() {
        // A pager quit before the end closes its stdin: not an error.
        let _ = stdin.write_all(&patch);
    }
    let waited = child.wait();
    PAGER.store(0, Ordering::Release);
    waited?;
    Ok(None)
}
