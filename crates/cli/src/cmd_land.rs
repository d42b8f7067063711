//! `ralph land`: a finished loop's work onto its target branch, tested on the combined tree
//! (the work is in `ralph_git::land`); a conflict or a failing test goes back to the loop's own
//! agent, at most `land_attempts` times, before the loop needs its human's review.

use anyhow::anyhow;
use ralph_git::Git;
use ralph_git::land::{self, Landing, Method, Options};
use ralph_git::worktree::{LandState, LoopInfo};
use ralph_loop::runner::SentBack;
use ralph_loop::task::{LandWith, TaskFile};
use ralph_protocol::LandMode;
use ralph_protocol::{AgentChoice, State, Status, Workspace, clean};

use crate::args::{AgentFlags, DirArg, LandArgs, RunArgs};
use crate::cmd_worktree::{self, short, slug_of};
use crate::{CmdResult, Failure};

/// `ralph land [LOOP]`.
pub fn run(args: &LandArgs) -> CmdResult {
    let info = cmd_worktree::find(&args.dir.dir, args.name.as_deref())?;
    land_loop(info, args.pr)
}

/// Lands the loop `info` describes, which must be done; 0 only when it landed.
pub fn land_loop(mut info: LoopInfo, pr: bool) -> CmdResult {
    let name = slug_of(&info);
    let ws = Workspace::new(&info.worktree);
    if ws.is_locked() {
        return Err(Failure::failed(anyhow!(
            "the loop {name} is still running: it lands once it is done"
        )));
    }
    if info.land == Some(LandState::Landed) {
        outln!(
            "{name} has landed already{}.",
            info.landed
                .as_deref()
                .map(|c| format!(" ({})", short(c)))
                .unwrap_or_default()
        );
        return Ok(0);
    }
    if info.land == Some(LandState::NeedsLand)
        && let Some(commit) = land::finished_by_hand(&info)
    {
        let reason = format!(
            "landed on {} at {} (by the command needs-land printed)",
            info.target.as_deref().unwrap_or("its branch"),
            short(&commit)
        );
        info.landed = Some(commit);
        info.set_land(ws.dir(), LandState::Landed, Some(reason.clone()))
            .map_err(Failure::failed)?;
        outln!("{name}: {reason}.");
        return Ok(0);
    }
    let state = State::load(&ws).map_err(Failure::failed)?;
    if state.as_ref().map(|s| s.status) != Some(Status::Done) {
        return Err(Failure::failed(anyhow!(
            "the loop {name} is not done (it is {}): only work whose DONE was verified lands. `{} run -C {}` goes on with it",
            cmd_worktree::state_of(&info),
            crate::program(),
            info.worktree.display()
        )));
    }
    let task_rel = info
        .task_file
        .clone()
        .unwrap_or_else(|| "RALPH_TASK.md".into());
    let task = TaskFile::load(&info.worktree.join(&task_rel)).map_err(Failure::usage)?;
    let opts = Options {
        method: match task.git.land_with {
            LandWith::Merge => Method::Merge,
            LandWith::Rebase => Method::Rebase,
        },
        test_command: task.test_command.clone(),
        test_timeout: task.test_timeout,
        task_file: Some(task_rel.clone()),
        message: format!(
            "{}\n\nThe work of the ralph loop {name}, from {}.",
            task.task,
            short(&info.base)
        ),
        data: cmd_worktree::data_dir()?,
    };
    if pr || task.git.land == LandMode::PullRequest {
        return pull_request(&mut info, &opts, &task);
    }
    let target = info.target.clone().unwrap_or_default();
    loop {
        info.set_land(ws.dir(), LandState::Landing, None)
            .map_err(Failure::failed)?;
        let landing = match land::land(&info, &opts) {
            Ok(l) => l,
            Err(e) => {
                let reason = format!("landing failed: {e}");
                let _ = info.set_land(ws.dir(), LandState::NeedsReview, Some(reason.clone()));
                return Err(Failure::failed(anyhow!(reason)));
            }
        };
        let (what, onto) = match landing {
            Landing::Landed {
                commit,
                previous,
                backup,
            } => {
                info.landed = Some(commit.clone());
                let reason = format!(
                    "landed on {target} at {} (it was at {}; kept as {backup})",
                    short(&commit),
                    short(&previous)
                );
                info.set_land(ws.dir(), LandState::Landed, Some(reason.clone()))
                    .map_err(Failure::failed)?;
                outln!("{name}: {reason}.");
                outln!(
                    "Its worktree can go: {}",
                    cmd_worktree::loop_command(&info, "worktree remove")
                );
                return Ok(0);
            }
            Landing::NeedsLand { checkout, command } => {
                let reason = format!(
                    "combined and tested, but {target} is checked out in {} with changes, so ralph does not move it. To finish: {command}",
                    checkout.display()
                );
                info.set_land(ws.dir(), LandState::NeedsLand, Some(reason.clone()))
                    .map_err(Failure::failed)?;
                outln!("{name}: needs-land: {reason}");
                outln!(
                    "Then `{}` records it as landed.",
                    cmd_worktree::loop_command(&info, "land")
                );
                return Ok(1);
            }
            Landing::Conflict { files, hunks, onto } => (
                format!(
                    "your branch {} does not apply to {target}: these files conflict: {}\n\n```diff\n{hunks}\n```",
                    info.branch,
                    files.join(", ")
                ),
                onto,
            ),
            Landing::TestsFailed { output, onto } => (
                format!(
                    "the tests failed on your work combined with {target}:\n\n```\n{output}\n```"
                ),
                onto,
            ),
        };
        if info.attempts >= task.git.land_attempts {
            let reason = format!(
                "{} after {} tries by the agent; the worktree {} is kept for you to look at",
                first_line(&what),
                info.attempts,
                info.worktree.display()
            );
            info.set_land(ws.dir(), LandState::NeedsReview, Some(reason.clone()))
                .map_err(Failure::failed)?;
            return Err(Failure::failed(anyhow!("{name}: needs-review: {reason}")));
        }
        info.attempts += 1;
        info.save(ws.dir()).map_err(Failure::failed)?;
        // The state the loop's last run left: its agent, and the session to resume.
        let state = State::load(&ws).map_err(Failure::failed)?;
        let back = SentBack {
            failure: format!(
                "Landing your work failed: {what}\n\n{target} is now at {onto}. In this worktree, bring your branch up to date with it (for example `git merge {onto}`), resolve every conflict, make sure the tests pass, commit, and signal DONE again."
            ),
            session: state.as_ref().and_then(|s| s.agent_session.clone()),
        };
        let how = match (&back.session, resumes(state.as_ref())) {
            (Some(session), true) => format!("resuming its session {session}"),
            (None, true) => "as a fresh run: it reported no session to resume".to_owned(),
            (_, false) => "as a fresh run: its agent cannot resume a session".to_owned(),
        };
        eprintln!(
            "ralph: {name}: landing failed ({}); back to its agent, {} (try {} of {})",
            clean(first_line(&what)),
            clean(&how),
            info.attempts,
            task.git.land_attempts
        );
        let code = again(&info, &task_rel, state.as_ref(), back)?;
        if code != 0 {
            let reason = format!(
                "the agent was asked to fix a failed landing and its loop ended with exit {code}; the worktree {} is kept",
                info.worktree.display()
            );
            info.set_land(ws.dir(), LandState::NeedsReview, Some(reason.clone()))
                .map_err(Failure::failed)?;
            return Err(Failure::failed(anyhow!("{name}: needs-review: {reason}")));
        }
    }
}

/// Whether the agent the loop ran with can resume a session (every preset but the demo's; a
/// command given with `--agent-resume-cmd`).
fn resumes(state: Option<&State>) -> bool {
    match state.and_then(|s| s.agent_choice.as_ref()) {
        Some(AgentChoice::Preset { name }) => {
            ralph_loop::agents::find(name).is_some_and(|p| p.can_resume())
        }
        Some(AgentChoice::Command { resume_command, .. }) => resume_command.is_some(),
        None => false,
    }
}

/// Runs the loop in its worktree again, with the agent it ran with, told what failed.
fn again(
    info: &LoopInfo,
    task: &std::path::Path,
    state: Option<&State>,
    back: SentBack,
) -> CmdResult {
    let mut args = RunArgs {
        dir: DirArg {
            dir: info.worktree.clone(),
        },
        task: task.to_path_buf(),
        agent_flags: AgentFlags::default(),
        no_tui: true,
        worktree: false,
        onto: None,
        // Sent back with what failed: a task verified done before is run again all the same.
        again: true,
        land: None,
        accept_sandbox: false,
    };
    match state.and_then(|s| s.agent_choice.clone()) {
        Some(AgentChoice::Preset { name }) => args.agent_flags.agent = Some(name),
        Some(AgentChoice::Command {
            command,
            format,
            resume_command,
        }) => {
            args.agent_flags.agent_cmd = Some(command);
            args.agent_flags.agent_format = format;
            args.agent_flags.agent_resume_cmd = resume_command;
        }
        None => {}
    }
    crate::cmd_run::run_sent_back(&args, back)
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// `--pr` / `land: pr`: pushes the branch and opens a pull request with `gh`.
fn pull_request(info: &mut LoopInfo, opts: &Options, task: &TaskFile) -> CmdResult {
    let name = slug_of(info);
    let ws = Workspace::new(&info.worktree);
    let target = info.target.clone().ok_or_else(|| {
        Failure::failed(anyhow!(
            "the loop started on a detached HEAD: no branch to open a pull request against"
        ))
    })?;
    land::commit_work(info, opts).map_err(Failure::failed)?;
    let git = Git::new(&info.worktree);
    git.run(["push", "-u", "origin", &info.branch])
        .map_err(Failure::failed)?;
    let body = format!(
        "{}\n\nMade by a ralph loop from {} ({}).",
        task.task,
        short(&info.base),
        target
    );
    let out = std::process::Command::new("gh")
        .args(["pr", "create", "--head", &info.branch, "--base", &target, "--title", &task.task, "--body", &body])
        .current_dir(&info.worktree)
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| Failure::failed(anyhow!("could not run gh ({e}): install the GitHub CLI and `gh auth login`, or land without --pr")))?;
    if !out.status.success() {
        let reason = format!(
            "gh pr create failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        let _ = info.set_land(ws.dir(), LandState::NeedsReview, Some(reason.clone()));
        return Err(Failure::failed(anyhow!("{name}: {reason}")));
    }
    let url = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let reason = format!("pull request opened: {url}");
    info.set_land(ws.dir(), LandState::Landed, Some(reason.clone()))
        .map_err(Failure::failed)?;
    outln!("{name}: {}", clean(&reason));
    Ok(0)
}
