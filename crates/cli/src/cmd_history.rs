//! `ralph log`, `ralph diff` and `ralph undo`: a run's checkpoints, what each changed, and
//! the work tree put back to one of them.
//!
//! The checkpoints are commits under `refs/ralph/<run>/<iteration>` (see `ralph_git`); the
//! run is the current (or last) one, named by `.ralph/state.json`; what the agent signalled
//! comes from `.ralph/events.jsonl`.

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use ralph_git::Git;
use ralph_git::checkpoint::{self, Checkpointer, Listed};
use ralph_protocol::{State, Workspace, clean, read_events};
use serde_json::json;

use crate::args::{DiffArgs, LogArgs, UndoArgs};
use crate::{CmdResult, Failure};

/// The project, its run and that run's checkpoints.
struct History {
    root: PathBuf,
    ws: Workspace,
    git: Git,
    run: String,
    checkpoints: Vec<Listed>,
}

impl History {
    fn open(dir: &Path) -> Result<History, Failure> {
        let root = crate::locate::run_root(dir)?;
        let ws = Workspace::new(&root);
        let state = State::load(&ws).map_err(Failure::failed)?;
        let Some(run) = state.and_then(|s| s.run_id) else {
            return Err(Failure::failed(anyhow!(
                "no loop has run in {} yet, so there are no checkpoints: start one with `ralph run`",
                root.display()
            )));
        };
        if Git::toplevel(&root).is_none() {
            return Err(Failure::failed(anyhow!(
                "{} is not in a git repository: checkpoints need one (`git init`, then `ralph run`)",
                root.display()
            )));
        }
        let git = Git::new(&root);
        let checkpoints = checkpoint::list(&git, &run).map_err(Failure::failed)?;
        Ok(History {
            root,
            ws,
            git,
            run,
            checkpoints,
        })
    }

    /// The iterations' checkpoints, in order (the undo ones left out).
    fn iterations(&self) -> impl Iterator<Item = &Listed> {
        self.checkpoints.iter().filter(|c| c.iteration().is_some())
    }

    /// The latest checkpoint of iteration `n`.
    fn of(&self, n: u32) -> Option<&Listed> {
        self.iterations()
            .filter(|c| c.iteration() == Some(n))
            .last()
    }

    fn none_yet(&self) -> Failure {
        Failure::failed(anyhow!(
            "the last run in {} made no checkpoint (is `checkpoints: false` set?)",
            self.root.display()
        ))
    }

    /// Iteration `n`'s checkpoint, or a usage error listing the ones there are.
    fn need(&self, n: u32) -> Result<&Listed, Failure> {
        self.of(n).ok_or_else(|| {
            let have: Vec<String> = self.iterations().map(|c| c.label.clone()).collect();
            Failure::usage(anyhow!(
                "the last run has no checkpoint after iteration {n}; it has: {} (0 is where it started)",
                if have.is_empty() { "none".into() } else { have.join(", ") }
            ))
        })
    }
}

/// `ralph log`.
pub fn log(args: &LogArgs) -> CmdResult {
    let h = History::open(&args.dir.dir)?;
    let events = read_events(&h.ws.events());
    // This run's events: those after its `run_start`.
    let from = events
        .iter()
        .rposition(|e| e["event"] == "run_start")
        .unwrap_or(0);
    let events = &events[from..];
    let mut rows = Vec::new();
    for cp in h.iterations() {
        let n = cp.iteration().unwrap_or(0);
        let made = events
            .iter()
            .find(|e| e["event"] == "checkpoint" && e["commit"] == cp.commit.as_str());
        let ended = events
            .iter()
            .rev()
            .find(|e| e["event"] == "iteration_end" && e["iteration"] == n);
        let signals: Vec<String> = ended
            .and_then(|e| e["signals"].as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let stat = made.map_or_else(Default::default, |e| checkpoint::DiffStat {
            files: e["files"].as_u64().unwrap_or(0) as usize,
            insertions: e["insertions"].as_u64().unwrap_or(0),
            deletions: e["deletions"].as_u64().unwrap_or(0),
        });
        let at = made.and_then(|e| e["at"].as_str()).unwrap_or("").to_owned();
        rows.push(json!({
            "iteration": n,
            "label": cp.label,
            "at": at,
            "signals": signals,
            "files": stat.files,
            "insertions": stat.insertions,
            "deletions": stat.deletions,
            "checkpoint": cp.commit,
            "ref": format!("{}{}", checkpoint::run_prefix(&h.run), cp.label),
        }));
    }
    if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&json!({"run": h.run, "iterations": rows}))?
        );
        return Ok(0);
    }
    if rows.is_empty() {
        return Err(h.none_yet());
    }
    outln!("run {} in {}", h.run, h.root.display());
    outln!(
        "{:>5}  {:<24}  {:<9}  {:>5}  {:>13}  checkpoint",
        "iter",
        "time",
        "signal",
        "files",
        "lines"
    );
    for r in &rows {
        let label = r["label"].as_str().unwrap_or("");
        let signals = r["signals"].as_array().map_or(String::new(), |a| {
            a.iter()
                .filter_map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(",")
        });
        let signal = if label == "0" || r["iteration"] == 0 {
            "(start)".to_owned()
        } else if signals.is_empty() {
            "-".to_owned()
        } else {
            clean(&signals)
        };
        let lines = format!("+{} -{}", r["insertions"], r["deletions"]);
        let commit = r["checkpoint"].as_str().unwrap_or("");
        outln!(
            "{:>5}  {:<24}  {:<9}  {:>5}  {:>13}  {}",
            label,
            r["at"].as_str().unwrap_or(""),
            signal,
            r["files"].as_u64().unwrap_or(0),
            lines,
            &commit[..commit.len().min(12)]
        );
    }
    outln!(
        "`{} N` shows what iteration N changed; `{} N` goes back to it.",
        command_for(&h.root, "diff"),
        command_for(&h.root, "undo")
    );
    Ok(0)
}

/// `ralph diff [N]`.
pub fn diff(args: &DiffArgs) -> CmdResult {
    let h = History::open(&args.dir.dir)?;
    let (from, to) = match args.iteration {
        Some(n) => {
            let cp = h.need(n)?;
            (format!("{}^", cp.commit), cp.commit.clone())
        }
        None => {
            let mut it = h.iterations();
            let (Some(first), Some(last)) = (it.next(), h.iterations().last()) else {
                return Err(h.none_yet());
            };
            (first.commit.clone(), last.commit.clone())
        }
    };
    let mut cmd = h.git.command(["diff", from.as_str(), to.as_str()]);
    cmd.args(args.paths_sep()).args(&args.paths);
    let status = cmd
        .status()
        .map_err(|e| Failure::failed(anyhow!("could not run git diff: {e}")))?;
    Ok(if status.success() { 0 } else { 1 })
}

/// `ralph undo [N]`.
pub fn undo(args: &UndoArgs) -> CmdResult {
    let h = History::open(&args.dir.dir)?;
    if h.ws.is_locked() {
        return Err(Failure::failed(anyhow!(
            "a loop is running in {}: stop it first (Ctrl-C in its terminal), then undo",
            h.root.display()
        )));
    }
    let (target, name) = match &args.to {
        Some(to) => match to.parse::<u32>() {
            Ok(n) => (h.need(n)?.commit.clone(), format!("after iteration {n}")),
            Err(_) => {
                let commit = h.git.resolve(to).map_err(Failure::failed)?.ok_or_else(|| {
                    Failure::usage(anyhow!(
                        "{to} is neither an iteration number nor a checkpoint's commit"
                    ))
                })?;
                (commit, format!("checkpoint {}", short(to)))
            }
        },
        None => {
            let last = h
                .iterations()
                .filter_map(Listed::iteration)
                .max()
                .ok_or_else(|| h.none_yet())?;
            let before = last.saturating_sub(1);
            (
                h.need(before)?.commit.clone(),
                format!("before iteration {last} (after iteration {before})"),
            )
        }
    };
    let cp = Checkpointer::new(&h.root, h.ws.dir().join("checkpoint.index")).ok_or_else(|| {
        Failure::failed(anyhow!(
            "{} is not the top of a git work tree",
            h.root.display()
        ))
    })?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let present = cp
        .take(
            &h.run,
            &format!("before-undo-{stamp}"),
            h.checkpoints.last().map(|c| c.commit.as_str()),
            &format!("ralph checkpoint before `ralph undo` to {name}"),
        )
        .map_err(Failure::failed)?;
    let changes = ralph_git::undo::restore(
        &h.git,
        &present.commit,
        &target,
        &h.ws.dir().join("undo.index"),
    )
    .map_err(Failure::failed)?;
    if changes.is_empty() {
        outln!("The work tree is already as it was {name}: nothing changed.");
    } else {
        outln!("Put the work tree back to how it was {name}:");
        for c in &changes {
            outln!("  {}", clean(&c.to_string()));
        }
    }
    outln!(
        "Files git ignores were not touched. To undo this undo: {} {}",
        command_for(&h.root, "undo"),
        short(&present.commit)
    );
    Ok(0)
}

/// `ralph WHAT -C ROOT`: a command about the run in `root` that works from any directory (a
/// worktree loop's, say, asked about from the user's checkout).
fn command_for(root: &Path, what: &str) -> String {
    format!(
        "{} {what} -C {}",
        crate::program(),
        ralph_protocol::shell_quote(&root.display().to_string())
    )
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}
