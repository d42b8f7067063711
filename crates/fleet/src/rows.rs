//! The fleet's rows: one per loop on this machine, what it needs from its human first.
//!
//! # How it works
//!
//! [`Collector::collect`] reads, for every loop, only what the loops themselves publish: the
//! registry (the loops running now), `ralph_git::worktree::all_loops` (the loops that rest in a
//! worktree: done, landing, landed, needing a landing or a review), each loop's
//! `.ralph/state.json` and `.ralph/worktree.json`, the question waiting and whether it is
//! answered as the desk tells it ([`ralph_protocol::question_waiting_as`], as `ralph status`: only
//! an answer ralph sealed counts), its task file's checklist, and its work tree's diff against
//! its base. It writes nothing and talks to no loop, so any number of
//! views, `ralph status --all` and the dashboard can read at once.
//!
//! The diff stat is the one part that costs a process (`git diff`), so a [`Collector`] keeps
//! it for [`DIFF_MAX_AGE`] per loop: a view that collects on every change of every loop's
//! state (a new question must show at once) does not run twenty `git` processes each time.
//!
//! What the agent said last comes from the agent's logs, decoded by the agent's stream format
//! and worded as the loop's own view words it; both live above this crate, so the caller
//! passes them in ([`LastSaid`]).
//!
//! Everything the agent wrote (its last line, the task's summary, the question, the reason a
//! loop ended) is cleaned of control and bidirectional characters here, once, with
//! `ralph_protocol::one_line`; every front end shows the rows as they are.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use ralph_git::worktree::{self, LandState, LoopInfo};
use ralph_protocol::{
    State, Status, UserDir, Waiting, Workspace, one_line, parse_timestamp, question_waiting_as,
    registered_loops, user_dir,
};
use serde::{Deserialize, Serialize};

/// How long a [`Collector`] keeps a running loop's diff stat before it asks git again.
pub const DIFF_MAX_AGE: Duration = Duration::from_secs(5);

/// How long it keeps the diff stat of a loop whose agent is not at work (it waits on its
/// human, or has ended) while the loop's state stays the same: its work tree hardly changes.
pub const RESTING_DIFF_MAX_AGE: Duration = Duration::from_secs(60);

/// How long a [`Collector`] keeps what a working loop's agent said last before it decodes its
/// log again (a loop whose agent is not at work: until its state changes).
pub const SAID_MAX_AGE: Duration = Duration::from_secs(2);

/// The longest a cleaned one-line text of the agent's is kept (the view cuts it to its width).
const LINE_MAX: usize = 300;

/// What a loop needs from its human, or where it is: the first column of the view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RowState {
    /// A question waits for an answer.
    NeedsYou,
    /// An iteration is running.
    Running,
    /// Waiting out an agent's rate limit until [`LoopRow::rate_limited_until`].
    RateLimited,
    /// DONE was signalled and verified; nothing landed yet.
    Done,
    /// `ralph land` is at work.
    Landing,
    /// The work is on its target branch (or in a pull request).
    Landed,
    /// Tested and ready, but the target is checked out and not clean: `ralph land` finishes it.
    NeedsLand,
    /// Landing met conflicts or failing tests the agent could not fix.
    NeedsReview,
    /// The loop gave up (GUTTER, too many failures, its iterations ran out, it died).
    Failed,
    /// Stopped by its human (or discarded).
    Stopped,
    /// A task the fleet has not started yet (only the fleet makes these rows).
    Queued,
}

impl RowState {
    /// The state's name in JSON and in plain lines.
    pub fn as_str(self) -> &'static str {
        match self {
            RowState::NeedsYou => "needs-you",
            RowState::Running => "running",
            RowState::RateLimited => "rate-limited",
            RowState::Done => "done",
            RowState::Landing => "landing",
            RowState::Landed => "landed",
            RowState::NeedsLand => "needs-land",
            RowState::NeedsReview => "needs-review",
            RowState::Failed => "failed",
            RowState::Stopped => "stopped",
            RowState::Queued => "queued",
        }
    }

    /// Where rows in this state go: what needs the human first, finished work last.
    pub fn rank(self) -> u8 {
        match self {
            RowState::NeedsYou => 0,
            RowState::NeedsReview => 1,
            RowState::NeedsLand => 2,
            RowState::Failed => 3,
            RowState::Done => 4,
            RowState::RateLimited => 5,
            RowState::Running => 6,
            RowState::Landing => 7,
            RowState::Queued => 8,
            RowState::Stopped => 9,
            RowState::Landed => 10,
        }
    }
}

/// Lines added and removed, and files touched, against a loop's base.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diff {
    /// Lines added.
    pub added: u64,
    /// Lines removed.
    pub removed: u64,
    /// Files added, changed or deleted.
    pub files: usize,
}

impl std::fmt::Display for Diff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "+{} -{}", self.added, self.removed)
    }
}

/// One loop, as the view, `ralph status --all --json` and the dashboard show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoopRow {
    /// The loop's project root: its worktree for a worktree loop.
    pub root: PathBuf,
    /// Its task file, when known (a worktree loop's, relative to the worktree).
    pub task_file: Option<PathBuf>,
    /// The task's one-line summary, cleaned.
    pub task: String,
    /// What it needs, or where it is.
    pub state: RowState,
    /// Whether a `ralph run` process works in it now.
    pub running: bool,
    /// The current (or last) iteration.
    pub iteration: u32,
    /// Its iteration limit (0 when no loop has run).
    pub max_iterations: u32,
    /// When its run started (RFC 3339).
    pub started_at: Option<String>,
    /// Seconds since it started (while it runs), or how long its last run took.
    pub elapsed_seconds: Option<u64>,
    /// Dollars spent, when the agent reports cost.
    pub cost_usd: Option<f64>,
    /// Criteria of its task file ticked.
    pub criteria_done: Option<usize>,
    /// Criteria of its task file in all.
    pub criteria_total: Option<usize>,
    /// The last thing the agent said, cleaned to one line.
    pub last_line: Option<String>,
    /// The last signal the agent gave (`DONE`, `QUESTION`...), cleaned.
    pub last_signal: Option<String>,
    /// Its work against its base (a worktree loop's base commit; a plain loop's `HEAD`).
    pub diff: Option<Diff>,
    /// The waiting question's id, while one waits.
    pub question_id: Option<String>,
    /// The waiting question's first line, cleaned.
    pub question: Option<String>,
    /// When the waiting question's wait ends (RFC 3339); `None` for no deadline.
    pub question_deadline: Option<String>,
    /// While it waits out a rate limit: until when (RFC 3339).
    pub rate_limited_until: Option<String>,
    /// Why it stands where it stands (why it failed or stopped, what a landing needs), cleaned.
    pub reason: Option<String>,
    /// Its branch, for a worktree loop.
    pub branch: Option<String>,
}

impl LoopRow {
    /// A row for a loop of which nothing is known but its root and state (the fleet's queued
    /// tasks).
    pub fn bare(root: PathBuf, task: &str, state: RowState) -> LoopRow {
        LoopRow {
            root,
            task_file: None,
            task: one_line(task, LINE_MAX),
            state,
            running: false,
            iteration: 0,
            max_iterations: 0,
            started_at: None,
            elapsed_seconds: None,
            cost_usd: None,
            criteria_done: None,
            criteria_total: None,
            last_line: None,
            last_signal: None,
            diff: None,
            question_id: None,
            question: None,
            question_deadline: None,
            rate_limited_until: None,
            reason: None,
            branch: None,
        }
    }

    /// The loop's short name: the last part of its root.
    pub fn name(&self) -> String {
        self.root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.root.display().to_string())
    }
}

/// What the loop's human must do, or where it is, in a few words: `needs you`, `rate
/// limited until 14:05`, `needs review`.
pub fn state_words(row: &LoopRow) -> String {
    match row.state {
        RowState::NeedsYou => "needs you".into(),
        RowState::Running => "running".into(),
        RowState::RateLimited => {
            match row.rate_limited_until.as_deref().and_then(parse_timestamp) {
                Some(at) => format!(
                    "rate limited until {}",
                    ralph_protocol::local_time(at, SystemTime::now())
                ),
                None => "rate limited".into(),
            }
        }
        RowState::Done => "done".into(),
        RowState::Landing => "landing".into(),
        RowState::Landed => "landed".into(),
        RowState::NeedsLand => "needs land".into(),
        RowState::NeedsReview => "needs review".into(),
        RowState::Failed => "failed".into(),
        RowState::Stopped => "stopped".into(),
        RowState::Queued => "queued".into(),
    }
}

/// Reads what the agent said last in a loop (its newest log, decoded in its stream format).
pub type LastSaid = dyn Fn(&Workspace, &State) -> Option<String> + Send;

/// Reads the rows, keeping each loop's diff stat for [`DIFF_MAX_AGE`].
pub struct Collector {
    said: Box<LastSaid>,
    /// Every loop this collector has listed: a plain loop that ends leaves the registry, and a
    /// view that showed it keeps showing how it ended.
    seen: Vec<PathBuf>,
    /// Each loop's diff stat: when it was read, and the loop's state's `updated_at` then.
    diffs: HashMap<PathBuf, (Instant, String, Option<Diff>)>,
    /// What each loop's agent said last, when that was read, and its state's `updated_at`
    /// then.
    said_at: HashMap<PathBuf, (Instant, String, Option<String>)>,
    /// Each task file's criteria, by its size and modification time.
    criteria: HashMap<PathBuf, (FileStamp, Option<(usize, usize)>)>,
    data: Option<PathBuf>,
    /// The state directory whose key answers are sealed under; `None`: the user's.
    state_dir: Option<PathBuf>,
}

/// A file's size and modification time: whether it changed since it was read.
type FileStamp = Option<(u64, SystemTime)>;

fn stamp(path: &Path) -> FileStamp {
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.modified().ok()?))
}

impl std::fmt::Debug for Collector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collector")
            .field("diffs", &self.diffs.len())
            .finish_non_exhaustive()
    }
}

impl Collector {
    /// A collector over the loops of this machine (ralph's state and data directories).
    pub fn new(said: Box<LastSaid>) -> Collector {
        Collector {
            said,
            seen: Vec::new(),
            diffs: HashMap::new(),
            said_at: HashMap::new(),
            criteria: HashMap::new(),
            data: user_dir(UserDir::Data),
            state_dir: None,
        }
    }

    /// The same collector, telling a sealed answer from a forged one by the key in `dir`
    /// rather than the one in the user's state directory (see [`Workspace::with_state_dir`]).
    pub fn with_state_dir(mut self, dir: impl Into<PathBuf>) -> Collector {
        self.state_dir = Some(dir.into());
        self
    }

    /// The roots of every loop this machine knows: running ones, those resting in a worktree,
    /// and those listed before; with `only`, those of `only` (whether known yet or not).
    pub fn roots(&self, only: Option<&[PathBuf]>) -> Vec<PathBuf> {
        if let Some(only) = only {
            let mut roots: Vec<PathBuf> = Vec::new();
            for r in only.iter().map(|r| canonical(r)) {
                if !roots.contains(&r) {
                    roots.push(r);
                }
            }
            return roots;
        }
        let mut roots: Vec<PathBuf> = registered_loops().into_iter().map(|e| e.root).collect();
        if let Some(data) = &self.data {
            for info in worktree::all_loops(data) {
                let w = canonical(&info.worktree);
                if !roots.contains(&w) {
                    roots.push(w);
                }
            }
        }
        for r in &self.seen {
            if !roots.contains(r) {
                roots.push(r.clone());
            }
        }
        roots
    }

    /// Every loop's row (with `only`: those loops'), what needs the human first.
    pub fn collect(&mut self, only: Option<&[PathBuf]>, now: Instant) -> Vec<LoopRow> {
        let roots = self.roots(only);
        let mut rows: Vec<LoopRow> = roots.iter().filter_map(|r| self.row(r, now)).collect();
        self.diffs.retain(|root, _| roots.contains(root));
        self.said_at.retain(|root, _| roots.contains(root));
        self.seen = rows.iter().map(|r| r.root.clone()).collect();
        sort(&mut rows);
        rows
    }

    /// One loop's row; `None` when nothing there was ever a loop.
    fn row(&mut self, root: &Path, now: Instant) -> Option<LoopRow> {
        let ws = match &self.state_dir {
            Some(dir) => Workspace::new(root).with_state_dir(dir),
            None => Workspace::new(root),
        };
        let Read {
            mut row,
            state,
            info,
        } = read_files(&ws)?;
        if let Some(state) = &state {
            // While the agent works its log grows; otherwise only a new state can change it.
            let at_work = row.running && state.status == Status::Running;
            row.last_line = match self.said_at.get(root) {
                Some((at, version, said))
                    if *version == state.updated_at
                        && (!at_work || now.saturating_duration_since(*at) < SAID_MAX_AGE) =>
                {
                    said.clone()
                }
                _ => {
                    let said = (self.said)(&ws, state).map(|l| one_line(&l, LINE_MAX));
                    let version = state.updated_at.clone();
                    self.said_at
                        .insert(root.to_path_buf(), (now, version, said.clone()));
                    said
                }
            };
        }
        let task_file = match &info {
            Some(i) => i.task_file.as_ref().map(|t| root.join(t)),
            None => Some(root.join("RALPH_TASK.md")),
        };
        let checks = task_file.and_then(|t| {
            let now_stamp = stamp(&t);
            match self.criteria.get(&t) {
                Some((was, checks)) if *was == now_stamp => *checks,
                _ => {
                    let checks = criteria(&t);
                    self.criteria.insert(t, (now_stamp, checks));
                    checks
                }
            }
        });
        if let Some(checks) = checks {
            row.criteria_done = Some(checks.0);
            row.criteria_total = Some(checks.1);
        }
        let version = state
            .as_ref()
            .map(|s| s.updated_at.clone())
            .unwrap_or_default();
        let at_work = matches!(row.state, RowState::Running | RowState::Landing);
        row.diff = self.diff(root, info.as_ref(), (&version, at_work), now);
        Some(row)
    }

    /// The loop's diff stat, from the cache while it is fresh.
    fn diff(
        &mut self,
        root: &Path,
        info: Option<&LoopInfo>,
        (version, at_work): (&str, bool),
        now: Instant,
    ) -> Option<Diff> {
        let max_age = match at_work {
            true => DIFF_MAX_AGE,
            false => RESTING_DIFF_MAX_AGE,
        };
        if let Some((at, was, diff)) = self.diffs.get(root)
            && was == version
            && now.saturating_duration_since(*at) < max_age
        {
            return *diff;
        }
        let diff = work_diff(root, info);
        self.diffs
            .insert(root.to_path_buf(), (now, version.to_owned(), diff));
        diff
    }
}

/// The row of the loop in `ws` as its own files say it (`state.json`, `worktree.json`, its
/// lock, the desk's question), without what costs a process or a log's reading: no diff, no
/// last line, no criteria (a [`Collector`] adds them). `None` when nothing there was ever a
/// loop. Cheap enough for every request of a page.
pub fn read(ws: &Workspace) -> Option<LoopRow> {
    read_files(ws).map(|r| r.row)
}

/// A row read by [`read_files`], with the files it was read from.
struct Read {
    row: LoopRow,
    state: Option<State>,
    info: Option<LoopInfo>,
}

fn read_files(ws: &Workspace) -> Option<Read> {
    let root = ws.root();
    let info = LoopInfo::load(ws.dir());
    let state = State::load(ws).ok().flatten();
    if state.is_none() && info.is_none() {
        return None;
    }
    let live = ws.is_locked();
    // The question and whether it is answered are the desk's, as `ralph status` sees them:
    // an answer counts only when ralph sealed it (the agent can write `answer.md` too).
    let waiting = match (&state, live) {
        (Some(state), true) => question_waiting_as(ws, state).ok().flatten(),
        _ => None,
    };
    let mut row = LoopRow::bare(root.to_path_buf(), "", RowState::Stopped);
    row.running = live;
    row.branch = info.as_ref().map(|i| i.branch.clone());
    row.task_file = info.as_ref().and_then(|i| i.task_file.clone());
    if let Some(state) = &state {
        row.task = one_line(&state.task, LINE_MAX);
        row.iteration = state.iteration;
        row.max_iterations = state.max_iterations;
        row.started_at = Some(state.started_at.clone());
        row.elapsed_seconds = elapsed(state, live);
        row.cost_usd = state.total_cost_usd;
        row.last_signal = state.last_signal.as_deref().map(|s| one_line(s, LINE_MAX));
        row.rate_limited_until = state.rate_limited_until.clone().filter(|_| live);
        row.reason = state.reason.as_deref().map(|r| one_line(r, LINE_MAX));
        if let Some(q) = waiting.as_ref().map(|w| &w.pending) {
            row.question_id = Some(q.id.as_str().to_owned());
            row.question = Some(one_line(&q.question.text, LINE_MAX));
            row.question_deadline = q.deadline.clone();
        }
    }
    row.state = row_state(state.as_ref(), info.as_ref(), live, waiting.as_ref());
    let died = state
        .as_ref()
        .is_some_and(|s| matches!(s.status, Status::Running | Status::WaitingInput));
    if row.state == RowState::Failed && died {
        row.reason = Some("the last run ended without saying so; `ralph run` resumes".into());
    }
    if state.is_none() && !live {
        row.reason = Some("not started".into());
    }
    if let Some(i) = &info
        && i.land.is_some()
    {
        row.reason = i.reason.as_deref().map(|r| one_line(r, LINE_MAX));
        // The user ran the command the reason gave: saying to run it again would be stale.
        if i.land == Some(LandState::NeedsLand) && ralph_git::land::finished_by_hand(i).is_some() {
            row.reason = Some(format!(
                "its work is on {} now (the command that finishes the landing ran): `ralph land` (`l` in the fleet view) records it as landed",
                i.target.as_deref().unwrap_or("its branch")
            ));
        }
    }
    Some(Read { row, state, info })
}

/// Every loop's row (with `only`: those loops'), what needs the human first: a one-off
/// [`Collector::collect`].
pub fn collect(only: Option<&[PathBuf]>, said: Box<LastSaid>) -> Vec<LoopRow> {
    Collector::new(said).collect(only, Instant::now())
}

/// Sorts rows: by [`RowState::rank`]; questions that waited longest first; then by task.
pub fn sort(rows: &mut [LoopRow]) {
    rows.sort_by(|a, b| {
        (a.state.rank(), &a.task, &a.root).cmp(&(b.state.rank(), &b.task, &b.root))
    });
}

/// How many rows need their human to answer a question.
pub fn needing_you(rows: &[LoopRow]) -> usize {
    rows.iter()
        .filter(|r| r.state == RowState::NeedsYou)
        .count()
}

/// The row's state from the loop's state, its worktree record, whether it runs and the
/// question waiting in it (the desk's).
fn row_state(
    state: Option<&State>,
    info: Option<&LoopInfo>,
    live: bool,
    waiting: Option<&Waiting>,
) -> RowState {
    if let Some(land) = info.and_then(|i| i.land) {
        return match land {
            LandState::Landing => RowState::Landing,
            LandState::Landed => RowState::Landed,
            LandState::NeedsLand => RowState::NeedsLand,
            LandState::NeedsReview => RowState::NeedsReview,
            LandState::Discarded => RowState::Stopped,
        };
    }
    let Some(state) = state else {
        return if live {
            RowState::Running
        } else {
            RowState::Stopped
        };
    };
    match state.status {
        Status::WaitingInput | Status::Running if live => {
            if waiting.is_some_and(|w| w.answer.is_none()) {
                RowState::NeedsYou
            } else if state.rate_limited_until.is_some() {
                RowState::RateLimited
            } else {
                RowState::Running
            }
        }
        // Its process is gone without saying how it ended.
        Status::WaitingInput | Status::Running => RowState::Failed,
        Status::Done => RowState::Done,
        Status::Failed | Status::MaxIterations => RowState::Failed,
        Status::Stopped => RowState::Stopped,
    }
}

/// Seconds since the run started while it runs, else from its start to its last save.
fn elapsed(state: &State, live: bool) -> Option<u64> {
    let started = parse_timestamp(&state.started_at)?;
    let until = match live {
        true => SystemTime::now(),
        false => parse_timestamp(&state.updated_at)?,
    };
    until.duration_since(started).ok().map(|d| d.as_secs())
}

/// The task file's criteria: (ticked, all).
fn criteria(task_file: &Path) -> Option<(usize, usize)> {
    // Bounded, as every file ralph reads for display: a runaway agent edits this file too.
    let text = ralph_protocol::read_text(task_file).ok().flatten()?;
    let criteria = ralph_protocol::criteria_of(&text)?;
    let done = criteria.iter().filter(|c| c.checked).count();
    Some((done, criteria.len()))
}

/// The work tree's diff against the loop's base: a worktree loop's base commit, a plain loop's
/// `HEAD` (its uncommitted work).
fn work_diff(root: &Path, info: Option<&LoopInfo>) -> Option<Diff> {
    let base = match info {
        Some(i) => i.base.clone(),
        None if root.join(".git").exists() => "HEAD".to_owned(),
        None => return None,
    };
    let stat = worktree::work_stat(root, &base).ok()?;
    Some(Diff {
        added: stat.insertions,
        removed: stat.deletions,
        files: stat.files,
    })
}

/// `path` with symlinks resolved, as the registry names roots.
fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests;
