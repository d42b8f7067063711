//! `ralph status`: what the loop is doing, with a waiting question first and loudest.
//!
//! The loop's facts (status, iteration, agent, cost) are `state.json`'s; the question waiting
//! and an answer given to it are the desk's ([`question_waiting`]), as the panel, `ralph
//! answer` and `ralph serve` see them.

use std::path::PathBuf;
use std::time::SystemTime;

use ralph_protocol::{
    Answer, Channel, PendingQuestion, State, Status, Waiting, Workspace, answer_url, clean,
    question_waiting,
};
use serde_json::json;

use crate::args::StatusArgs;
use crate::locate::{self, Target};
use crate::{CmdResult, Failure};
use ralph_ui::{fmt_duration, label};

/// Prints the state of the loop in `-C DIR`, as text or JSON.
pub fn run(args: &StatusArgs) -> CmdResult {
    if args.all {
        return all(args.json, args.watch);
    }
    let target = locate::target(&args.dir.dir)?;
    if !matches!(target, Target::Project(_)) {
        // A checkout whose loops all run in worktrees (a fleet's) has no loop of its own:
        // its loops are the ones asked about, not the machine's nor one waiting elsewhere.
        let loops = crate::cmd_worktree::repo_loops(&args.dir.dir);
        let worktrees: Vec<PathBuf> = loops
            .iter()
            .map(|i| i.worktree.clone())
            .filter(|w| w.exists())
            .collect();
        if let Some(info) = loops.first()
            && !worktrees.is_empty()
        {
            eprintln!(
                "ralph: {}: no loop of its own; its loops in worktrees, those waiting for an answer first (`{} status -C WORKTREE` shows one):",
                info.repo.display(),
                crate::program()
            );
            return rows(args.json, Some(&worktrees));
        }
    }
    let root = match target {
        Target::Project(root) => root,
        Target::OnlyWaiting(root) => {
            eprintln!("ralph: {}", locate::acting_on(&root));
            root
        }
        Target::Nowhere { dir, waiting } if waiting.is_empty() => dir,
        Target::Nowhere { dir, .. } => {
            eprintln!(
                "ralph: {}: not inside a project; the loops running on this machine, those waiting for an answer first:",
                dir.display()
            );
            return all(args.json, false);
        }
    };
    let ws = Workspace::new(&root);
    ws.check_not_symlink().map_err(Failure::failed)?;
    let state = State::load(&ws).map_err(Failure::failed)?;
    let waiting = question_waiting(&ws).map_err(Failure::failed)?;
    let live = ws.is_locked();
    let command = crate::answer_command(&root);
    if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&state_json(
                &ws,
                state.as_ref(),
                waiting.as_ref(),
                live,
                &command
            ))?
        );
        return Ok(0);
    }
    let Some(state) = state else {
        let elsewhere = crate::cmd_worktree::status_lines(&root);
        if elsewhere.is_empty() {
            outln!(
                "No loop has run in {} yet. Start one with `{}` (or try `{} demo`).",
                root.display(),
                crate::command_in(&root, "run"),
                crate::program()
            );
        }
        for line in elsewhere {
            outln!("{line}");
        }
        return Ok(0);
    };
    let active = matches!(state.status, Status::Running | Status::WaitingInput);
    // A state no loop has run in (only `ralph ask` asked here) has no iterations to count.
    let mut facts = Vec::new();
    if state.max_iterations > 0 {
        facts.push(format!(
            "iteration {} of {}",
            state.iteration, state.max_iterations
        ));
    }
    if live {
        facts.push(format!("pid {}", state.pid));
    }
    let facts = match facts.is_empty() {
        true => String::new(),
        false => format!(" ({})", facts.join(", ")),
    };
    if active && !live {
        outln!(
            "{}: not running: the last run ended without saying so{facts}; `{}` resumes",
            root.display(),
            crate::command_in(&root, "run")
        );
    } else {
        outln!("{}: {}{facts}", root.display(), describe(state.status));
    }
    if let Some(w) = &waiting {
        print_question(&root, &w.pending, w.answer.as_ref(), live, &command);
    }
    if !state.task.is_empty() {
        outln!("  task:  {}", clean(&state.task));
    }
    outln!("  agent: {}", state.agent);
    if live {
        for line in running_lines(&ws, &state) {
            outln!("  {line}");
        }
    }
    if let Some(sig) = &state.last_signal {
        outln!("  last signal: {sig}");
    }
    if let Some(cost) = state.total_cost_usd {
        outln!("  cost so far: ${cost:.4}");
    }
    if let Some(reason) = &state.reason
        && !active
    {
        outln!("  why: {}", clean(reason));
    }
    for line in crate::cmd_worktree::status_lines(&root) {
        outln!("  {line}");
    }
    Ok(0)
}

/// A loop's status in one word or three, as the states of a loop in a worktree are named.
pub fn status_word(status: Status) -> &'static str {
    match status {
        Status::Running => "running",
        Status::WaitingInput => "waiting for an answer",
        Status::Done => "done",
        Status::Failed | Status::MaxIterations => "failed",
        Status::Stopped => "stopped",
    }
}
/// While the loop runs: how long it has run, and the agent's last line.
fn running_lines(ws: &Workspace, state: &State) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(started) = ralph_protocol::parse_timestamp(&state.started_at)
        && let Ok(elapsed) = SystemTime::now().duration_since(started)
    {
        lines.push(format!("elapsed: {}", fmt_duration(elapsed)));
    }
    let format = crate::cmd_logs::agent_format(Some(state));
    if let Some(last) = crate::cmd_logs::last_line(ws, format) {
        lines.push(format!("last line: {last}"));
    }
    lines
}

/// `--all`: every loop on this machine, running or resting in a worktree, the ones that need
/// their human first: the fleet view's rows (`ralph_fleet::rows`), as text, JSON, or live
/// (`--watch`).
fn all(json_out: bool, watch: bool) -> CmdResult {
    if watch {
        crate::fleet_view::show(crate::fleet_view::ShowOptions {
            plain: false,
            only: None,
            extra: Box::new(Vec::new),
            finished: Box::new(|| false),
            leave_on_signal: false,
        })?;
        return Ok(0);
    }
    rows(json_out, None)
}

/// The rows of the loops in `only` (else every loop on this machine), as text or JSON: each
/// on one line, a waiting question in full under its loop's.
fn rows(json_out: bool, only: Option<&[PathBuf]>) -> CmdResult {
    let rows = ralph_fleet::rows::collect(only, crate::fleet_view::last_said());
    if json_out {
        let items: Vec<serde_json::Value> = rows
            .iter()
            .map(|row| {
                let mut v = serde_json::to_value(row).unwrap_or_default();
                if row.question_id.is_some() {
                    v["answer_command"] = json!(crate::answer_command(&row.root));
                }
                v
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&items)?);
        return Ok(0);
    }
    if rows.is_empty() {
        match only {
            None => outln!("No ralph loop on this machine: `ralph run` starts one."),
            Some(_) => outln!("No loop has begun in them yet."),
        }
    }
    let waiting = ralph_fleet::rows::needing_you(&rows);
    if waiting > 0 {
        outln!(
            "{waiting} of {} loops {} you:",
            rows.len(),
            if waiting == 1 { "needs" } else { "need" }
        );
    }
    for row in &rows {
        outln!("{}", ralph_ui::row_line(row));
        let ws = Workspace::new(&row.root);
        if row.state == ralph_fleet::rows::RowState::NeedsYou
            && let Some(q) = State::load(&ws)
                .ok()
                .flatten()
                .and_then(|s| s.pending_question)
        {
            let command = crate::answer_command(&row.root);
            print_question(
                &row.root,
                &q,
                answer_waiting(&ws, &q).as_ref(),
                true,
                &command,
            );
        }
    }
    Ok(0)
}

fn describe(status: Status) -> &'static str {
    match status {
        Status::Running => "running",
        Status::WaitingInput => "WAITING FOR YOUR ANSWER",
        Status::Done => "done, DONE verified",
        Status::Failed => "failed",
        Status::Stopped => "stopped",
        Status::MaxIterations => "stopped at max_iterations",
    }
}

/// The answer given to `q` and waiting to be delivered, as the desk sees it.
fn answer_waiting(ws: &Workspace, q: &PendingQuestion) -> Option<Answer> {
    question_waiting(ws)
        .ok()
        .flatten()
        .filter(|w| w.pending.id == q.id)
        .and_then(|w| w.answer)
}

/// The question, and how to answer it, or the answer already given when one waits to be
/// delivered (`live`: by the running loop; otherwise by the next `ralph run`).
/// `command` answers it (`ralph answer -C DIR`, without the answer).
fn print_question(
    root: &std::path::Path,
    q: &PendingQuestion,
    answered: Option<&Answer>,
    live: bool,
    command: &str,
) {
    let hint = ralph_protocol::answer_hint(command);
    let now = SystemTime::now();
    let waited = q
        .asked_at_time()
        .and_then(|t| now.duration_since(t).ok())
        .map(fmt_duration)
        .unwrap_or_else(|| "?".into());
    let left = match (q.timed_out, q.deadline_time()) {
        _ if answered.is_some() => "answered".to_string(),
        // No loop runs the countdown: the words must not say one ticks.
        (true, _) if !live => {
            "timed out; the agent went on with its best guess, and the loop is not running"
                .to_string()
        }
        (false, _) if !live => "no deadline runs: the loop is not running".to_string(),
        (true, _) => {
            "timed out; the agent went on with its best guess, but a late answer still reaches it"
                .to_string()
        }
        (false, Some(d)) => match d.duration_since(now) {
            Ok(left) => format!("{} left", fmt_duration(left)),
            Err(_) => "deadline passed".to_string(),
        },
        (false, None) => "no deadline".to_string(),
    };
    let from = match q.iteration {
        0 => String::new(),
        n => format!(" from iteration {n}"),
    };
    outln!("\n  Question{from} (waiting {waited}; {left}):\n");
    // The agent wrote all of this: rendered from its markdown with no control sequence left.
    for line in ralph_ui::markdown_lines(&q.question.text, ralph_ui::TEXT_WIDTH) {
        outln!("    {line}");
    }
    if let Some(c) = &q.question.context {
        // Every line indented, so none passes for one of ralph's own.
        let lines = ralph_ui::markdown_lines(c, ralph_ui::TEXT_WIDTH);
        outln!("    ({})", lines.join("\n     "));
    }
    if !q.question.options.is_empty() {
        outln!();
        for (i, o) in q.question.options.iter().enumerate() {
            let default = if q.question.default.as_deref() == Some(o.label.as_str()) {
                " (default)"
            } else {
                ""
            };
            outln!("      {}. {}{default}", i + 1, label(&o.label));
        }
    }
    if let Some(a) = answered {
        let first = a.text.lines().next().unwrap_or("");
        let when = if live {
            "the loop delivers it"
        } else {
            "the next `ralph run` delivers it"
        };
        outln!(
            "\n  Answered with {}: {}\n  {when}.\n",
            a.source(),
            clean(first)
        );
        return;
    }
    if let Some(d) = &q.question.default {
        outln!("\n    Default if nobody answers: {}", label(d));
    }
    if live {
        outln!("\n  Answer it with:\n    {hint}");
        // The link `--json` gives too: one way to make it.
        if let Some(url) = answer_url(root, &q.id, Channel::Status) {
            outln!("  {}", ralph_ui::answer_link(&url));
        }
    } else {
        outln!("\n  An answer reaches the agent when `ralph run` runs again:\n    {hint}");
    }
    if !q.question.options.is_empty() {
        outln!("    (or pick an option by number: {command} 1)");
    }
    outln!();
}

/// One loop as `--json` gives it: `state.json`, with what the desk says of its question.
fn state_json(
    ws: &Workspace,
    state: Option<&State>,
    waiting: Option<&Waiting>,
    live: bool,
    command: &str,
) -> serde_json::Value {
    let root = ws.root();
    let Some(state) = state else {
        return json!({"status": "none", "root": root.display().to_string(), "running": false, "iteration": 0, "max_iterations": null, "pid": null, "pending_question": null});
    };
    let mut v = serde_json::to_value(state).unwrap_or_default();
    v["running"] = json!(live);
    // One word for what the loop is, with a worktree's landing states: running, waiting
    // for an answer, done, landing, landed, needs-land, needs-review, failed, discarded.
    v["state"] = json!(status_word(state.status));
    if let Some(w) = crate::cmd_worktree::status_json(root) {
        v["state"] = w["state"].clone();
        v["worktree"] = w;
    }
    if live {
        let elapsed = ralph_protocol::parse_timestamp(&state.started_at)
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .map(|d| d.as_secs());
        v["elapsed_seconds"] = json!(elapsed);
        let format = crate::cmd_logs::agent_format(Some(state));
        v["last_line"] = json!(crate::cmd_logs::last_line(ws, format));
    }
    v["pending_question"] = serde_json::Value::Null;
    if let Some(w) = waiting {
        let q = &w.pending;
        v["pending_question"] = serde_json::to_value(q).unwrap_or_default();
        let now = SystemTime::now();
        let waited = q
            .asked_at_time()
            .and_then(|t| now.duration_since(t).ok())
            .map(|d| d.as_secs());
        // No countdown runs without a loop.
        let left = q
            .deadline_time()
            .filter(|_| live)
            .map(|d| d.duration_since(now).map(|l| l.as_secs()).unwrap_or(0));
        v["pending_question"]["waited_seconds"] = json!(waited);
        v["pending_question"]["seconds_left"] = json!(left);
        // As `status --all --json` gives it: what a script adds its answer to.
        v["pending_question"]["answer_command"] = json!(command);
        // A link only while the question can still be answered (one is minted per call).
        let url = w
            .answer
            .is_none()
            .then(|| answer_url(root, &q.id, Channel::Status))
            .flatten();
        v["pending_question"]["answer_url"] = json!(url);
        v["pending_question"]["answer_waiting"] = match &w.answer {
            Some(a) => json!({"text": a.text, "by": a.source()}),
            None => serde_json::Value::Null,
        };
    }
    v
}
