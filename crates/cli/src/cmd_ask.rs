//! `ralph ask`: an agent asks its human a question and waits for the answer, keeping its context.
//!
//! The question's whole life is the [`Desk`]'s: this command claims the one question slot
//! ([`Desk::claim`]), waits on a file watch (no polling) stepping the desk
//! ([`Desk::asker_step`]), and ends it ([`Desk::unclaim`]). What happens meanwhile depends on
//! whether a loop is running in the workspace:
//!
//! - **A loop is running**: it notices the claim, shows the question in its panel and owns
//!   the deadline (which the human may extend or pause by typing). This process follows it.
//! - **No loop is running**: this process stands in for one. It holds the workspace lock,
//!   records the question in `state.json` (so `ralph status` and `ralph answer` work as
//!   usual), and registers on this machine, so `ralph serve`'s dashboard and Telegram show it
//!   and can answer, skip it or give it more time.
//! - **Outside any project**: as with no loop, but the question is kept in ralph's state
//!   directory, never in the directory it was asked from (a `.ralph/` there would make it a
//!   project for every command run below it), and nothing of it is left once it ends.
//!
//! The answer is printed on stdout (exit 0); when the deadline passes or the human skips, one
//! line on stderr tells the agent to go on with its best guess (exit 3).

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use anyhow::{Context as _, anyhow};
use ralph_loop::task::{TaskFile, Wait, parse_wait};
use ralph_protocol::{
    AskerStep, ClaimError, Desk, Ended, Question, QuestionOption, UserDir, Workspace, read_back,
    user_dir,
};

use crate::args::AskArgs;
use crate::{CmdResult, Failure};

/// Exit code when nobody answered in time (or the human skipped).
const NO_ANSWER: u8 = 3;

/// Where a question is asked.
enum Place {
    /// In a project (or the one a loop runs in).
    Project(PathBuf),
    /// Outside any project: a directory of its own in ralph's state directory, removed when
    /// the question ends.
    Outside(PathBuf),
}

/// Asks, waits, prints the answer.
pub fn run(args: &AskArgs) -> CmdResult {
    let place = match (&args.dir, std::env::var_os("RALPH_DIR")) {
        (Some(d), _) => Place::Project(crate::locate::project_root(d)?),
        // Inside a loop: `.ralph/` of the project it runs in, which exists; a stale or made-up
        // value must not make ralph create directories wherever it points.
        (None, Some(dir)) => {
            let dir = PathBuf::from(dir);
            let root = dir
                .parent()
                .ok_or_else(|| Failure::usage(anyhow!("RALPH_DIR has no parent directory")))?;
            Place::Project(crate::locate::existing_dir(
                root,
                "as the parent of RALPH_DIR",
            )?)
        }
        (None, None) => match crate::locate::find_project(Path::new("."))? {
            Some(root) => Place::Project(root),
            None => Place::Outside(outside_root(&crate::locate::project_root(Path::new("."))?)?),
        },
    };
    let root = match &place {
        Place::Project(root) | Place::Outside(root) => root.clone(),
    };
    let result = ask(args, &root, matches!(place, Place::Outside(_)));
    if let Place::Outside(dir) = &place {
        // Nothing is left of a question asked outside any project: no loop will ever take a
        // late answer there.
        let _ = std::fs::remove_dir_all(dir);
    }
    result
}

fn ask(args: &AskArgs, root: &Path, outside: bool) -> CmdResult {
    let text = args.question.trim();
    if text.is_empty() {
        return Err(Failure::usage(anyhow!(
            "the question is empty: ralph ask \"Redis or Memcached?\" --option Redis --option Memcached"
        )));
    }
    let wait = match &args.timeout {
        Some(t) => parse_wait(t).map_err(|e| Failure::usage(anyhow!("--timeout {t}: {e}")))?,
        None => TaskFile::load(&root.join("RALPH_TASK.md"))
            .map(|t| t.question_timeout)
            .unwrap_or(Wait::For(Duration::from_secs(300))),
    };
    let question = Question {
        text: text.to_string(),
        options: args
            .options
            .iter()
            .map(|o| QuestionOption::new(o.clone()))
            .collect(),
        multi_select: args.multi_select,
        default: args.default.clone(),
        context: args.context.clone(),
        warning: None,
    };

    let ws = Workspace::new(root);
    ws.ensure().map_err(Failure::failed)?;
    let desk = Desk::new(ws);
    let asked_at = SystemTime::now();
    let deadline = match wait {
        Wait::Never => None,
        Wait::For(d) => Some(asked_at + d),
    };
    let mut claimed = desk
        .claim(
            question,
            std::process::id(),
            asked_at,
            deadline,
            ralph_loop::asks::claim_is_stale,
        )
        .map_err(|e| match e {
            ClaimError::Busy { .. } | ClaimError::Contended { .. } => Failure::failed(anyhow!(e)),
            other => Failure::failed(anyhow!(other)),
        })?;
    // Alone, this process is the loop `ralph serve` and `ralph status` look for.
    let _registration = claimed
        .is_alone()
        .then(|| ralph_protocol::register(root).ok())
        .flatten();
    // On stderr: stdout is the answer alone, for `ans=$(ralph ask …)`.
    let until = match wait {
        Wait::Never => "no deadline".to_string(),
        Wait::For(d) => format!("up to {}", ralph_ui::fmt_duration(d)),
    };
    let answer_here = if outside {
        // Outside any project, `ralph answer` run anywhere outside one finds it.
        ralph_protocol::answer_hint(&format!("{} answer", crate::program()))
    } else {
        ralph_protocol::answer_hint(&crate::answer_command(root))
    };
    eprintln!(
        "ralph ask: waiting for an answer ({until}); answer from any terminal with: {answer_here}"
    );
    let ended = wait_for_answer(&desk, &mut claimed);
    let alone = claimed.is_alone();
    let question = claimed.question.clone();
    let unclaimed = match &ended {
        Ok(ended) => desk.unclaim(claimed, ended),
        Err(_) => desk.unclaim(claimed, &Ended::Interrupted),
    };
    let ended = ended?;
    unclaimed.map_err(|e| Failure::failed(anyhow!(e)))?;
    match ended {
        Ended::Answered { answer: ans, .. } => {
            if args.json {
                let (picks, note) = read_back(&question, &ans.text);
                println!(
                    "{}",
                    serde_json::json!({
                        "answer": ans.text,
                        "picks": picks,
                        "note": note,
                        "answered_by": ans.by,
                    })
                );
            } else {
                println!("{}", ans.text);
            }
            Ok(0)
        }
        ended => {
            // On stderr, with exit 3: stdout stays empty, so that `ans=$(ralph ask …)` never
            // takes the instruction for the answer.
            eprintln!("ralph: {}", no_answer(&ended, &question, alone, outside));
            Ok(NO_ANSWER)
        }
    }
}

/// What the agent is told when no answer came: in a loop, it records its assumption and a
/// late answer reaches a later iteration; alone, there are no iterations to speak of.
fn no_answer(ended: &Ended, question: &Question, alone: bool, outside: bool) -> String {
    let guess = match &question.default {
        Some(d) => format!("proceed with your default ({d})"),
        None => "proceed with your best guess".to_string(),
    };
    let what = match ended {
        Ended::Skipped => "the human skipped the question and asks you to decide",
        _ => "nobody answered in time",
    };
    let after = match (ended, alone, outside) {
        (_, _, true) => ".".to_string(),
        (Ended::Skipped, _, _) => {
            " and record the assumption in .ralph/progress.md.".to_string()
        }
        (_, false, _) => {
            " and record the assumption in .ralph/progress.md. A late answer will reach a later iteration.".to_string()
        }
        (_, true, _) => {
            " and record the assumption in .ralph/progress.md. A late answer reaches the next `ralph run` here.".to_string()
        }
    };
    format!("{what}; {guess}{after}")
}

/// Waits for the desk to say the question ended: on every change in `.ralph/`, and at the
/// deadline.
fn wait_for_answer(desk: &Desk, claimed: &mut ralph_protocol::Claimed) -> Result<Ended, Failure> {
    let (tx, rx) = mpsc::channel();
    ralph_process::watch_blocking(desk.workspace().dir(), tx)
        .context("could not watch .ralph/ for the answer")?;
    loop {
        let now = SystemTime::now();
        let wait = match desk.asker_step(claimed, now).map_err(Failure::failed)? {
            AskerStep::Ended(ended) => return Ok(ended),
            AskerStep::Wait(Some(until)) => until.duration_since(now).unwrap_or_default(),
            AskerStep::Wait(None) => Duration::from_secs(3600),
            AskerStep::Refused(forged) => {
                eprintln!("ralph: warning: {forged}");
                continue;
            }
        };
        match rx.recv_timeout(wait) {
            Ok(()) | Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(Ended::TimedOut),
        }
    }
}

/// Where a question asked outside any project from `dir` is kept: a directory of its own in
/// ralph's state directory, named for `dir` (its last component, then a hash of the whole
/// path, so two places never share one).
fn outside_root(dir: &Path) -> Result<PathBuf, Failure> {
    use std::hash::{Hash, Hasher};
    let state = user_dir(UserDir::State).ok_or_else(|| {
        Failure::failed(anyhow!(
            "outside any project, a question is kept in ralph's state directory, and there is no home directory to put it in; set RALPH_STATE_DIR, or ask from a project (ralph ask -C DIR)"
        ))
    })?;
    let mut hasher = std::hash::DefaultHasher::new();
    dir.hash(&mut hasher);
    let hash = format!("{:012x}", hasher.finish() >> 16);
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "root".into());
    let root = state.join("asks").join(format!("{name}-{hash}"));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&root)
        .with_context(|| format!("could not create {}", root.display()))?;
    Ok(root)
}
