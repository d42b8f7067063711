//! `ralph fleet TASK.md...`: one ordinary `ralph run --worktree` per task file, at most `-j`
//! at a time, shown in one view; and `ralph fleet prune`. The scheduling, the fleet's record,
//! the ports and the pruning are in `ralph_fleet`; this is the glue: the task files checked
//! before anything starts, the scheduler on a thread of its own, the view, the summary and the
//! exit code.

use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::anyhow;
use ralph_fleet::fleet_file::{self, Fleet, Member};
use ralph_fleet::observe::{End, Phase};
use ralph_fleet::prune::{self, Verdict};
use ralph_fleet::schedule::{self, Launch, MemberOutcome, Scheduler};
use ralph_git::Git;
use ralph_git::worktree::{self, LoopInfo};
use ralph_loop::task::TaskFile;
use ralph_protocol::LandMode;
use ralph_protocol::{State, UserDir, Workspace, clean, shell_quote, user_dir};

use crate::args::{FleetArgs, FleetCommand, LandArg};
use crate::cmd_worktree::{data_dir, slug_of};
use crate::{CmdResult, Failure};

/// How often the scheduler looks at its loops: a loop that ends waits at most this long for
/// the next to start in its place, and 20 idle loops cost the fleet next to nothing.
const TICK: Duration = Duration::from_millis(500);

/// `ralph fleet ...`.
pub fn run(args: &FleetArgs) -> CmdResult {
    match &args.command {
        Some(FleetCommand::Prune { dir }) => prune(&dir.dir),
        None => start(args),
    }
}

/// ralph's state directory, where fleets and port blocks are recorded.
fn state_dir() -> Result<PathBuf, Failure> {
    user_dir(UserDir::State).ok_or_else(|| {
        Failure::usage(anyhow!(
            "no home directory to keep the fleet's record in; set RALPH_STATE_DIR"
        ))
    })
}

/// One task file, read and placed, with the agent preset its loop will run, if it names one.
fn member(
    path: &Path,
    land: Option<LandArg>,
    data: &Path,
) -> Result<(Member, Option<String>), Failure> {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let abs = std::fs::canonicalize(&abs).map_err(|e| {
        Failure::usage(anyhow!(
            "{}: {e}; give the path of an existing task file",
            abs.display()
        ))
    })?;
    let task = TaskFile::load(&abs).map_err(Failure::usage)?;
    if let Some(left) = crate::cmd_init::example_left(&task, &abs) {
        return Err(Failure::usage(anyhow!(left)));
    }
    let dir = abs.parent().unwrap_or(Path::new("/"));
    let repo = Git::toplevel(dir).ok_or_else(|| {
        Failure::usage(anyhow!(
            "{} is not in a git repository: a fleet's loops run in worktrees, so keep the task file in the repository they work on (tasks/*.md, say)",
            abs.display()
        ))
    })?;
    let repo_real = std::fs::canonicalize(&repo).unwrap_or_else(|_| repo.clone());
    let task_rel = abs
        .strip_prefix(&repo_real)
        .map(Path::to_path_buf)
        .unwrap_or_else(|_| abs.clone());
    let worktree = worktree::repo_dir(data, &repo).join(worktree::slug(&task.task));
    let must_land = land.map_or(task.git.land, LandArg::mode) != LandMode::Manual;
    // `agent:` is a preset's name, or a command line (with a space or a `/`).
    let preset = task.agent.clone().filter(|a| !a.contains([' ', '/']));
    let member = Member {
        task_file: abs,
        task_rel,
        repo,
        task: task.task,
        worktree,
        port: None,
        pid: None,
        started: false,
        must_land,
        failed_to_start: None,
    };
    Ok((member, preset))
}

/// Every task file checked, before anything starts: a bad one is a usage error that names it.
/// With them, the agent presets the loops will run (`--agent`, else the task files' own).
fn members(args: &FleetArgs, data: &Path) -> Result<(Vec<Member>, BTreeSet<String>), Failure> {
    let mut out: Vec<Member> = Vec::new();
    let mut presets = BTreeSet::new();
    let flags = &args.agent_flags;
    for path in &args.tasks {
        let (m, preset) = member(path, args.land, data)?;
        if flags.agent_cmd.is_none() {
            presets.extend(flags.agent.clone().or(preset));
        }
        if out.iter().any(|o| o.task_file == m.task_file) {
            continue;
        }
        if let Some(o) = out.iter().find(|o| o.worktree == m.worktree) {
            return Err(Failure::usage(anyhow!(
                "{} and {} have the same task (\"{}\"), so their loops would share the worktree {}: make the first lines differ",
                o.task_file.display(),
                m.task_file.display(),
                clean(&m.task),
                m.worktree.display()
            )));
        }
        out.push(m);
    }
    Ok((out, presets))
}

fn start(args: &FleetArgs) -> CmdResult {
    let data = data_dir()?;
    let state = state_dir()?;
    let (mut members, presets) = members(args, &data)?;
    let files: Vec<PathBuf> = members.iter().map(|m| m.task_file.clone()).collect();
    let id = fleet_file::fleet_id(&files);
    let dir = fleet_file::fleets_dir(&state);
    let held = fleet_file::hold(&dir, &id)
        .map_err(|e| Failure::failed(anyhow!("{}: {e}", dir.display())))?;
    let before = Fleet::load(&dir, &id);
    let Some(_held) = held else {
        return Err(Failure::failed(anyhow!(
            "these task files are already a fleet, scheduled by another `ralph fleet`{}; use that one, or close it and run this again to attach to its loops",
            before
                .map(|b| format!(" (pid {})", b.pid))
                .unwrap_or_default()
        )));
    };
    if let Some(before) = before {
        // The loops an earlier run of this fleet started: their processes and ports.
        for m in &mut members {
            if let Some(old) = before.members.iter().find(|o| o.task_file == m.task_file) {
                m.pid = old.pid;
                m.port = old.port;
                m.started = old.started;
            }
        }
    }
    let fleet = Fleet {
        id,
        jobs: usize::from(args.jobs),
        land: args.land.map(LandArg::mode),
        max_cost_usd: args.max_cost_usd,
        pid: std::process::id(),
        members,
        run_args: run_args(args)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
    };
    warn_of_rotating_logins(&presets);
    let program = std::env::current_exe()
        .map_err(|e| Failure::failed(anyhow!("cannot find the ralph program itself: {e}")))?;
    let mut scheduler = Scheduler::new(
        fleet,
        Launch {
            program,
            state_dir: state,
        },
    )
    .map_err(Failure::failed)?;
    let id = scheduler.fleet().id.clone();
    let roots: Vec<PathBuf> = scheduler
        .fleet()
        .members
        .iter()
        .map(|m| m.worktree.clone())
        .collect();
    let attached = scheduler
        .outcomes()
        .iter()
        .filter(|o| o.phase == Phase::Running)
        .count();
    if attached > 0 {
        eprintln!(
            "ralph: fleet {id}: {attached} of its loops still run, started by an earlier `ralph fleet`: attached to them"
        );
    }

    let finished = Arc::new(AtomicBool::new(false));
    let leave = Arc::new(AtomicBool::new(false));
    let worker = {
        let (finished, leave) = (finished.clone(), leave.clone());
        std::thread::spawn(move || -> std::io::Result<Scheduler> {
            loop {
                // Checked before a tick, which may start queued loops: none starts once its
                // human has left.
                if leave.load(Ordering::Acquire) {
                    return Ok(scheduler);
                }
                let done = scheduler.tick();
                let done = match done {
                    Ok(d) => d,
                    Err(e) => {
                        finished.store(true, Ordering::Release);
                        return Err(e);
                    }
                };
                if done {
                    finished.store(true, Ordering::Release);
                    return Ok(scheduler);
                }
                std::thread::sleep(TICK);
            }
        })
    };
    let view = View {
        plain: args.no_tui || !std::io::stdout().is_terminal(),
        jobs: args.jobs,
        only: roots,
        queued: {
            Box::new(move || {
                Fleet::load(&dir, &id)
                    .map(|f| {
                        f.members
                            .into_iter()
                            .filter(|m| !m.started || m.failed_to_start.is_some() || starting(m))
                            .collect()
                    })
                    .unwrap_or_default()
            })
        },
        finished: Box::new(move || finished.load(Ordering::Acquire)),
    };
    let shown = show(view);
    leave.store(true, Ordering::Release);
    let scheduler = worker
        .join()
        .map_err(|_| Failure::failed(anyhow!("the fleet's scheduler panicked")))?
        .map_err(|e| Failure::failed(anyhow!("the fleet could not start a loop: {e}")))?;
    shown.map_err(|e| Failure::failed(anyhow!("the fleet's view failed: {e}")))?;
    let outcomes = scheduler.outcomes();
    summary(&outcomes, args);
    Ok(schedule::exit_code(&outcomes))
}

/// The flags every loop's `ralph run` gets besides its task: `--onto` and the agent flags.
fn run_args(args: &FleetArgs) -> Vec<std::ffi::OsString> {
    let mut out = Vec::new();
    if let Some(onto) = &args.onto {
        out.push("--onto".into());
        out.push(onto.into());
    }
    out.extend(args.agent_flags.to_args());
    out
}

/// The view of the fleet's loops, and what it needs.
struct View {
    /// One line per change instead of the terminal view.
    plain: bool,
    /// How many loops run at once (`-j`), for what a queued row says.
    jobs: u16,
    /// The worktrees of the fleet's loops.
    only: Vec<PathBuf>,
    /// The tasks with no loop to show: still waiting for a place (`started` false: the view's
    /// queued rows), or whose `ralph run` ended before its loop began (`failed_to_start`: failed
    /// rows, with the reason).
    queued: Box<dyn Fn() -> Vec<Member> + Send>,
    /// Whether every loop has ended: the view closes then.
    finished: Box<dyn Fn() -> bool + Send>,
}

/// Shows the fleet until every loop has ended, or until its human leaves the view (`q`, or
/// Ctrl-C: the loops go on): the view of `ralph status --all --watch`, with the fleet's loops only and a row for
/// each task still queued (or whose `ralph run` ended before its loop began, with the reason).
fn show(view: View) -> std::io::Result<()> {
    use ralph_fleet::rows::{LoopRow, RowState};
    let View {
        plain,
        jobs,
        only,
        queued,
        finished,
    } = view;
    crate::fleet_view::show(crate::fleet_view::ShowOptions {
        plain,
        only: Some(only),
        finished,
        // Ctrl-C leaves the fleet as `q` leaves its terminal view: the loops go on, and the
        // summary says where each stands.
        leave_on_signal: true,
        extra: Box::new(move || {
            queued()
                .into_iter()
                .map(|m| {
                    let failed = m.failed_to_start.clone();
                    let (state, reason) = match failed {
                        Some(why) => (RowState::Failed, why),
                        None if m.started => (RowState::Running, "starting its loop".into()),
                        None => (RowState::Queued, waits_for_a_place(jobs)),
                    };
                    let mut row = LoopRow::bare(m.worktree, &m.task, state);
                    row.task_file = Some(m.task_file);
                    row.reason = Some(reason);
                    row
                })
                .collect()
        }),
    })
}

/// Why a queued task has not started: the places it waits for.
fn waits_for_a_place(jobs: u16) -> String {
    let places = if jobs == 1 { "place is" } else { "places is" };
    format!(
        "starts once one of the fleet's {jobs} {places} free (-j {jobs}); a loop waiting for your answer keeps its place"
    )
}

/// Whether `m`'s `ralph run` was started but has not yet written its loop's state: between the
/// two its worktree alone would read as a loop never started.
fn starting(m: &Member) -> bool {
    m.started && !m.worktree.join(".ralph/state.json").exists()
}

/// Says, once per agent, when an agent preset the fleet runs signs in with a login that many
/// sessions at once wear out (a rotating OAuth refresh token), and what to use instead. The
/// check is the one `ralph doctor` makes (`ralph_loop::agents::login_rotates`); this is the
/// one place the fleet calls it.
fn warn_of_rotating_logins(presets: &BTreeSet<String>) {
    for name in presets {
        if let Some(preset) = ralph_loop::agents::find(name)
            && let Some(warning) = ralph_loop::agents::login_rotates(&preset.spec(Vec::new(), None))
        {
            eprintln!("ralph: warning: {warning}");
        }
    }
}

/// One line per loop, then what to do next.
fn summary(outcomes: &[MemberOutcome], args: &FleetArgs) {
    let width = outcomes
        .iter()
        .map(|o| name(&o.member).len())
        .max()
        .unwrap_or(0);
    let mut spent = 0.0;
    let mut to_land = Vec::new();
    for o in outcomes {
        let name = name(&o.member);
        if let Some(cost) = State::load(&Workspace::new(&o.member.worktree))
            .ok()
            .flatten()
            .and_then(|s| s.total_cost_usd)
        {
            spent += cost;
        }
        let (word, why) = match &o.phase {
            Phase::Ended(end) => (end.word(), end.reason().map(first_line)),
            Phase::Running => ("running", Some("it goes on without the fleet")),
            Phase::Interrupted => ("interrupted", Some("the fleet starts it again")),
            Phase::NotStarted => ("not started", None),
        };
        if o.phase == Phase::Ended(End::Done) {
            to_land.push((name.clone(), o.member.worktree.clone()));
        }
        let why = why.map(|w| format!(": {}", clean(w))).unwrap_or_default();
        outln!(
            "{name:<width$}  {word}{why}  ({})",
            o.member.worktree.display()
        );
    }
    if spent > 0.0 {
        outln!("The fleet's loops cost ${spent:.2} in all.");
    }
    let program = crate::program();
    for (name, worktree) in to_land {
        outln!(
            "{name} is done: `{program} land -C {}` lands it (tested on the combined tree).",
            shell_quote(&worktree.display().to_string())
        );
    }
    if outcomes.iter().any(|o| o.phase == Phase::Running) {
        outln!(
            "Loops still run: `{program} fleet {}` attaches to them again.",
            again(args)
        );
    }
}

/// The arguments of a `ralph fleet` that takes up this fleet again: the same task files (which
/// name the fleet) and the same flags, so the tasks it still starts start as these would have.
fn again(args: &FleetArgs) -> String {
    let mut words: Vec<std::ffi::OsString> = args.tasks.iter().map(Into::into).collect();
    if args.jobs != 4 {
        words.extend(["-j".into(), args.jobs.to_string().into()]);
    }
    if let Some(land) = args
        .land
        .and_then(|l| clap::ValueEnum::to_possible_value(&l))
    {
        words.extend(["--land".into(), land.get_name().into()]);
    }
    if let Some(cap) = args.max_cost_usd {
        words.extend(["--max-cost-usd".into(), cap.to_string().into()]);
    }
    if args.no_tui {
        words.push("--no-tui".into());
    }
    words.extend(run_args(args));
    let words: Vec<String> = words
        .iter()
        .map(|w| shell_quote(&w.to_string_lossy()))
        .collect();
    words.join(" ")
}

fn name(m: &Member) -> String {
    m.worktree
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// `ralph fleet prune`.
fn prune(dir: &Path) -> CmdResult {
    let root = crate::locate::run_root(dir)?;
    let top = Git::toplevel(&root)
        .ok_or_else(|| Failure::usage(anyhow!("{} is not in a git repository", root.display())))?;
    // Inside a loop's worktree, its repository is the user's checkout it came from.
    let top = LoopInfo::load(&root.join(".ralph")).map_or(top, |i| i.repo);
    let hint = |info: &LoopInfo| {
        format!(
            "`{}` lands it",
            crate::cmd_worktree::loop_command(info, "land")
        )
    };
    let pruned = prune::prune(&data_dir()?, &state_dir()?, &top, &hint);
    if pruned.is_empty() {
        outln!("No loop has a worktree for {}.", top.display());
    }
    for p in &pruned {
        let name = slug_of(&p.info);
        match &p.verdict {
            Verdict::Removed { saved_as } => outln!(
                "removed  {name}: its worktree and the branch {} (its last commit is kept as {saved_as})",
                p.info.branch
            ),
            Verdict::Kept(why) => outln!("kept     {name}: {}", clean(why)),
        }
    }
    Ok(0)
}
