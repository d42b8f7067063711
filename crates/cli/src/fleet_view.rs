//! The fleet view's glue: the rows (`ralph_fleet::rows`), the watches that wake the view when
//! a loop writes, and what its keys do (answer through the question's desk, stop, land, retry,
//! the diff in the pager). Used by `ralph fleet` and `ralph status --all --watch`.

use std::collections::HashSet;
use std::ffi::OsString;
use std::io::{self, IsTerminal};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, Sender};
use std::time::{Instant, SystemTime};

use ralph_fleet::rows::{Collector, LastSaid, LoopRow, sort};
use ralph_git::worktree::LoopInfo;
use ralph_protocol::answer::AnsweredBy;
use ralph_protocol::desk::{self, QuestionId, Reply, Submitted};
use ralph_protocol::workspace::Workspace;
use ralph_protocol::{broker, registry, stop};
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
}

/// What the agent said last in a loop: its newest log, decoded in its stream format, worded
/// as `ralph status` words it.
pub fn last_said() -> Box<LastSaid> {
    Box::new(|ws, state| crate::cmd_logs::last_line(ws, crate::cmd_logs::agent_format(Some(state))))
}

/// Shows the loops until `q` (or until `finished` says so); the loops go on either way.
pub fn show(opts: ShowOptions) -> io::Result<()> {
    let (tx, changes) = mpsc::channel();
    let dumb = std::env::var("TERM").map_or(true, |t| t.is_empty() || t == "dumb");
    let plain = opts.plain || dumb || !io::stdout().is_terminal() || !io::stdin().is_terminal();
    let mut host = Host {
        collector: Collector::new(last_said()),
        only: opts.only,
        extra: opts.extra,
        finished: opts.finished,
        watched: HashSet::new(),
        tx,
    };
    // A loop that starts registers here: the view hears of it at once.
    if let Some(dir) = registry::registry_dir()
        && std::fs::create_dir_all(&dir).is_ok()
    {
        host.watch(&dir);
    }
    if plain {
        return ralph_ui::run_fleet_plain(&mut host, &changes, &mut io::stdout());
    }
    ralph_ui::run_fleet_tui(&mut host, changes)
}

struct Host {
    collector: Collector,
    only: Option<Vec<PathBuf>>,
    extra: Box<dyn Fn() -> Vec<LoopRow> + Send>,
    finished: Box<dyn Fn() -> bool + Send>,
    /// The directories watched so far.
    watched: HashSet<PathBuf>,
    tx: Sender<()>,
}

impl Host {
    /// Wakes the view on every change in `dir` (once per directory).
    fn watch(&mut self, dir: &Path) {
        if self.watched.contains(dir) || !dir.is_dir() {
            return;
        }
        if ralph_process::watch_blocking(dir, self.tx.clone()).is_ok() {
            self.watched.insert(dir.to_path_buf());
        }
    }
}

impl FleetHost for Host {
    fn rows(&mut self, now: Instant) -> Vec<LoopRow> {
        let mut rows = self.collector.collect(self.only.as_deref(), now);
        rows.extend((self.extra)());
        sort(&mut rows);
        for row in &rows {
            self.watch(&row.root.join(".ralph"));
        }
        rows
    }

    fn act(&mut self, action: FleetAction, view: &mut FleetView, now: Instant) {
        let note = match action {
            FleetAction::Open(root) => match desk::waiting(&Workspace::new(&root)) {
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
                    &broker::Request::skip(&id),
                    "Skipped: the agent goes on with its best guess.",
                )
            }
            FleetAction::Extend { root, id, by } => match broker::Request::extend(&id, by) {
                Ok(req) => request(
                    &root,
                    &req,
                    &format!(
                        "Asked {} for {} more.",
                        name(&root),
                        broker::describe_span(by)
                    ),
                ),
                Err(why) => why,
            },
            FleetAction::Stop(root) => {
                match stop::request(&Workspace::new(&root), stop::StopBy::Command) {
                    Ok(()) => format!(
                        "Asked {} to stop: its state is kept; `r` (or `ralph run` there) resumes it.",
                        name(&root)
                    ),
                    Err(e) => format!("Could not ask {} to stop: {e}", name(&root)),
                }
            }
            FleetAction::Land(root) => {
                let args: Vec<OsString> = vec!["land".into(), "-C".into(), root.clone().into()];
                match spawn_detached(&root, "land", &args) {
                    Ok(log) => format!(
                        "Landing {} (one landing at a time per repository; its output: {}).",
                        name(&root),
                        log.display()
                    ),
                    Err(e) => format!("Could not start `ralph land` for {}: {e}", name(&root)),
                }
            }
            FleetAction::Retry(root) => {
                let mut args: Vec<OsString> = vec![
                    "run".into(),
                    "-C".into(),
                    root.clone().into(),
                    "--no-tui".into(),
                ];
                let info = LoopInfo::load(&root.join(".ralph"));
                if let Some(task) = info.as_ref().and_then(|i| i.task_file.clone()) {
                    args.extend(["--worktree".into(), "--task".into(), task.into()]);
                }
                match spawn_detached(&root, "run", &args) {
                    Ok(log) => format!(
                        "Running {} again (its output: {}).",
                        name(&root),
                        log.display()
                    ),
                    Err(e) => format!("Could not start `ralph run` in {}: {e}", name(&root)),
                }
            }
            FleetAction::Diff(root) => match show_diff(&root) {
                Ok(()) => return,
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

/// A loop's name: the last part of its root.
fn name(root: &Path) -> String {
    root.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| root.display().to_string())
}

/// Answers the question `id` of the loop in `root` through its desk; what happened, in words.
fn answer(root: &Path, id: &QuestionId, text: String) -> String {
    let ws = Workspace::new(root);
    let first = ralph_protocol::text::one_line(text.lines().next().unwrap_or(""), 60);
    match desk::answer(
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
fn request(root: &Path, req: &broker::Request, done: &str) -> String {
    match broker::request(&Workspace::new(root), req) {
        Ok(()) => done.to_owned(),
        Err(e) => format!("Could not reach the loop in {}: {e}", name(root)),
    }
}

/// Starts `ralph ARGS` for the loop in `root` in a process group of its own, so it outlives
/// the view and no Ctrl-C typed here reaches it; its output goes to a file in ralph's state
/// directory, whose path is returned.
fn spawn_detached(root: &Path, what: &str, args: &[OsString]) -> io::Result<PathBuf> {
    let dir = ralph_protocol::user_dirs::user_dir(ralph_protocol::user_dirs::UserDir::State)
        .ok_or_else(|| io::Error::other("no state directory; set RALPH_STATE_DIR"))?
        .join("fleet-view");
    std::fs::create_dir_all(&dir)?;
    let log_path = dir.join(format!("{}-{what}.log", name(root)));
    let log = std::fs::File::create(&log_path)?;
    let mut child = Command::new(std::env::current_exe()?)
        .args(args)
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .spawn()?;
    // Reaped when it ends, so no zombie stays while the view runs.
    std::thread::spawn(move || child.wait());
    Ok(log_path)
}

/// The loop's work against its base (a worktree loop's base commit, a plain loop's `HEAD`)
/// through git's pager (`GIT_PAGER`, `core.pager`, `PAGER`, else `less`).
fn show_diff(root: &Path) -> io::Result<()> {
    let base = LoopInfo::load(&root.join(".ralph"))
        .map(|i| i.base)
        .unwrap_or_else(|| "HEAD".into());
    let status = ralph_git::Git::new(root)
        .command(["--paginate", "diff", "--stat", "--patch", &base, "--"])
        .status()?;
    match status.success() {
        true => Ok(()),
        false => Err(io::Error::other(format!("git diff exited with {status}"))),
    }
}
