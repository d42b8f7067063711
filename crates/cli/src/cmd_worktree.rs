//! `ralph run --worktree`'s set-up, and `ralph worktree list|discard|remove`: a loop in a
//! worktree of its own (the work is in `ralph_git::worktree`).

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use ralph_git::Git;
use ralph_git::worktree::{self, LandState, LoopInfo, NewWorktree};
use ralph_loop::task::TaskFile;
use ralph_protocol::{State, UserDir, Workspace, user_dir};

use crate::args::{WorktreeArgs, WorktreeCommand};
use crate::{CmdResult, Failure};

/// ralph's data directory, where worktrees live.
pub fn data_dir() -> Result<PathBuf, Failure> {
    user_dir(UserDir::Data).ok_or_else(|| {
        Failure::usage(anyhow!(
            "no home directory to keep worktrees in; set XDG_DATA_HOME"
        ))
    })
}

/// For `ralph run --worktree`: the loop's worktree (made now, or the one made before for the
/// same task), the task file's path in it, and the task read from there.
pub fn enter(
    root: &Path,
    task_path: &Path,
    task: &TaskFile,
    onto: Option<&str>,
) -> Result<(LoopInfo, PathBuf), Failure> {
    if let Some(info) = LoopInfo::load(&root.join(".ralph")) {
        // Already inside a loop's worktree: run there.
        return Ok((info, task_path.to_path_buf()));
    }
    let top = Git::toplevel(root).ok_or_else(|| {
        Failure::usage(anyhow!(
            "{} is not in a git repository: --worktree needs one",
            root.display()
        ))
    })?;
    let abs = std::path::absolute(task_path).unwrap_or_else(|_| task_path.to_path_buf());
    let top_real = std::fs::canonicalize(&top).unwrap_or(top.clone());
    let abs_real = std::fs::canonicalize(&abs).unwrap_or(abs.clone());
    let rel = abs_real
        .strip_prefix(&top_real)
        .map(Path::to_path_buf)
        .map_err(|_| {
            Failure::usage(anyhow!(
                "the task file {} is outside the repository {}: --worktree needs it inside",
                abs.display(),
                top.display()
            ))
        })?;
    let data = data_dir()?;
    let slug = worktree::slug(&task.task);
    let info = worktree::create(&NewWorktree {
        from: root,
        data: &data,
        slug: &slug,
        setup: task.git.worktree_setup.as_deref(),
        task_file: Some(&rel),
        onto,
    })
    .map_err(Failure::failed)?;
    let task_in = info.worktree.join(&rel);
    eprintln!(
        "ralph: working in {} on branch {} (from {} at {}); your checkout is not touched",
        info.worktree.display(),
        info.branch,
        info.target.as_deref().unwrap_or("a detached HEAD"),
        short(&info.base)
    );
    Ok((info, task_in))
}

/// The loop a command names: `name` (a task slug or a worktree path) among the loops of the
/// repository `dir` is in, else the loop whose worktree `dir` is in.
pub fn find(dir: &Path, name: Option<&str>) -> Result<LoopInfo, Failure> {
    let root = crate::locate::run_root(dir)?;
    if name.is_none()
        && let Some(info) = LoopInfo::load(&root.join(".ralph"))
    {
        return Ok(info);
    }
    let top = Git::toplevel(&root)
        .ok_or_else(|| Failure::usage(anyhow!("{} is not in a git repository", root.display())))?;
    let all = worktree::loops(&data_dir()?, &top);
    let names: Vec<String> = all.iter().map(slug_of).collect();
    match name {
        Some(n) => all
            .into_iter()
            .find(|i| slug_of(i) == n || i.worktree == Path::new(n))
            .ok_or_else(|| {
                Failure::usage(anyhow!(
                    "no loop named {n} in {}; the loops in worktrees here: {}",
                    top.display(),
                    if names.is_empty() {
                        "none".into()
                    } else {
                        names.join(", ")
                    }
                ))
            }),
        None => Err(Failure::usage(anyhow!(
            "{} is not a loop's worktree: name the loop (one of: {})",
            root.display(),
            if names.is_empty() {
                "none".into()
            } else {
                names.join(", ")
            }
        ))),
    }
}

/// `ralph WHAT -C REPO NAME`: a command about the loop `info` that works as written from any
/// directory, not only from inside its repository.
pub fn loop_command(info: &LoopInfo, what: &str) -> String {
    format!(
        "{} {what} -C {} {}",
        crate::program(),
        ralph_protocol::shell_quote(&info.repo.display().to_string()),
        slug_of(info)
    )
}

/// A loop's name: its task slug, the last part of its worktree's path.
pub fn slug_of(info: &LoopInfo) -> String {
    info.worktree
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The state `ralph status` shows for a loop: its landing's, once one began, else the loop's.
pub fn state_of(info: &LoopInfo) -> String {
    if let Some(l) = info.land {
        return l.as_str().to_owned();
    }
    let ws = Workspace::new(&info.worktree);
    match State::load(&ws).ok().flatten() {
        Some(s) if ws.is_locked() || !matches!(s.status, ralph_protocol::Status::Running) => {
            crate::cmd_status::status_word(s.status).to_owned()
        }
        Some(_) => "failed".to_owned(),
        None => "not started".to_owned(),
    }
}

/// `ralph worktree ...`.
pub fn run(args: &WorktreeArgs) -> CmdResult {
    match &args.command {
        WorktreeCommand::List { dir } => {
            let root = crate::locate::run_root(&dir.dir)?;
            let top = Git::toplevel(&root).ok_or_else(|| {
                Failure::usage(anyhow!("{} is not in a git repository", root.display()))
            })?;
            let all = worktree::loops(&data_dir()?, &top);
            if all.is_empty() {
                outln!("No loop has a worktree for {}.", top.display());
            }
            for info in all {
                outln!(
                    "{:<28} {:<13} {} (base {}) {}",
                    slug_of(&info),
                    state_of(&info),
                    info.branch,
                    short(&info.base),
                    info.worktree.display()
                );
            }
            Ok(0)
        }
        WorktreeCommand::Discard { dir, name } => {
            let mut info = find(&dir.dir, Some(name))?;
            let ws = Workspace::new(&info.worktree);
            if ws.is_locked() {
                return Err(Failure::failed(anyhow!(
                    "the loop {name} is running: stop it first"
                )));
            }
            info.set_land(
                ws.dir(),
                LandState::Discarded,
                Some("discarded by its human".into()),
            )
            .map_err(Failure::failed)?;
            outln!(
                "Discarded {name}: its branch {} keeps its commits; `{}` removes its worktree.",
                info.branch,
                loop_command(&info, "worktree remove")
            );
            Ok(0)
        }
        WorktreeCommand::Remove { dir, name } => {
            let info = find(&dir.dir, Some(name))?;
            if !matches!(info.land, Some(LandState::Landed | LandState::Discarded)) {
                return Err(Failure::failed(anyhow!(
                    "the loop {name} is {}, neither landed nor discarded: its worktree stays. Land it (`{}`) or discard it (`{}`) first",
                    state_of(&info),
                    loop_command(&info, "land"),
                    loop_command(&info, "worktree discard")
                )));
            }
            let unsaved = worktree::unsaved(&info).map_err(Failure::failed)?;
            if !unsaved.is_empty() {
                return Err(Failure::failed(anyhow!(
                    "the worktree of {name} has changes that are in no commit, so it stays: {}. Commit them on {} (in {}) or delete them, then remove it",
                    unsaved.join(", "),
                    info.branch,
                    info.worktree.display()
                )));
            }
            let path = info.worktree.to_string_lossy().into_owned();
            worktree::remove(&info).map_err(Failure::failed)?;
            outln!(
                "Removed the worktree {path}; the branch {} is kept (its commits stay reachable).",
                info.branch
            );
            Ok(0)
        }
    }
}

pub fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

/// The loops in worktrees of the git repository `dir` is in (none outside one).
pub fn repo_loops(dir: &Path) -> Vec<LoopInfo> {
    let Ok(data) = data_dir() else {
        return Vec::new();
    };
    // No worktree loop anywhere (the usual case): no need to ask git where the repository is,
    // which would be most of `ralph status`'s time.
    if !worktree::any_recorded(&data) {
        return Vec::new();
    }
    let Some(top) = Git::toplevel(dir) else {
        return Vec::new();
    };
    worktree::loops(&data, &top)
}

/// `ralph status`'s lines about worktrees: for a loop in one, where it is and where its
/// landing stands; for a repository, its loops in worktrees.
pub fn status_lines(root: &Path) -> Vec<String> {
    if let Some(info) = LoopInfo::load(&root.join(".ralph")) {
        let mut lines = vec![
            format!("worktree: {}", info.worktree.display()),
            format!(
                "branch: {} (base {}, lands on {})",
                info.branch,
                short(&info.base),
                info.target.as_deref().unwrap_or("no branch")
            ),
            format!("state: {}", state_of(&info)),
        ];
        if let Some(r) = &info.reason {
            lines.push(format!("landing: {}", ralph_protocol::clean(r)));
        }
        return lines;
    }
    repo_loops(root)
        .iter()
        .map(|i| {
            format!(
                "loop in a worktree: {} ({}) on {}, in {}",
                slug_of(i),
                state_of(i),
                i.branch,
                i.worktree.display()
            )
        })
        .collect()
}

/// `ralph status --json`'s `worktree` object, for a loop in one.
pub fn status_json(root: &Path) -> Option<serde_json::Value> {
    let info = LoopInfo::load(&root.join(".ralph"))?;
    Some(serde_json::json!({
        "path": info.worktree,
        "repo": info.repo,
        "branch": info.branch,
        "base": info.base,
        "target": info.target,
        "state": state_of(&info),
        "reason": info.reason,
        "landed": info.landed,
    }))
}
