//! `ralph ask`: an agent asks its human a question and waits for the answer, keeping its context.
//!
//! The question is written to `.ralph/question.md`, then `.ralph/ask.json` (this process's
//! claim: pid, when asked, the deadline it was given). What happens next depends on whether a
//! loop is running in the workspace:
//!
//! - **A loop is running** (it holds the workspace lock): it notices `ask.json` through its file
//!   watch, shows the question in its panel and owns `state.json`, including the deadline (which
//!   the human may extend or pause by typing). This process follows that deadline.
//! - **No loop is running**: this process takes the workspace lock itself and writes the
//!   pending question to `state.json`, so `ralph status` and `ralph answer` work as usual.
//!
//! Either way this process waits on a file watch (no polling) for `.ralph/answer.md`, prints the
//! answer on stdout and exits 0; or, when the deadline passes (or the human skips), prints one
//! line telling the agent to go on with its default and exits 3.

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use anyhow::{Context as _, anyhow};
use ralph_loop::task::{TaskFile, Wait, parse_wait};
use ralph_protocol::answer;
use ralph_protocol::clarifications;
use ralph_protocol::desk::Ended;
use ralph_protocol::question::{Question, QuestionOption};
use ralph_protocol::state::{self, AskClaim, PendingQuestion, RaisedBy, State, Status};
use ralph_protocol::workspace::{self, Workspace};

use crate::args::AskArgs;
use crate::{CmdResult, Failure};

/// Exit code when nobody answered in time (or the human skipped).
const NO_ANSWER: u8 = 3;

/// Asks, waits, prints the answer.
pub fn run(args: &AskArgs) -> CmdResult {
    let root = match (&args.dir, std::env::var_os("RALPH_DIR")) {
        (Some(d), _) => crate::locate::project_root(d)?,
        // Inside a loop: `.ralph/` of the project it runs in, which exists; a stale or made-up
        // value must not make ralph create directories wherever it points.
        (None, Some(dir)) => {
            let dir = PathBuf::from(dir);
            let root = dir
                .parent()
                .ok_or_else(|| Failure::usage(anyhow!("RALPH_DIR has no parent directory")))?;
            crate::locate::existing_dir(root, "as the parent of RALPH_DIR")?
        }
        (None, None) => crate::locate::run_root(std::path::Path::new("."))?,
    };
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

    let ws = Workspace::new(&root);
    ws.ensure().map_err(Failure::failed)?;
    let previous = State::load(&ws).ok().flatten();
    if let Some(p) = previous.as_ref().and_then(|s| s.pending_question.as_ref())
        && !p.timed_out
        && ws.question().exists()
    {
        return Err(Failure::failed(anyhow!(
            "another question is already waiting in {} (\"{}\"); wait for it to be answered first",
            root.display(),
            p.text.lines().next().unwrap_or("")
        )));
    }

    let asked_at = SystemTime::now();
    let deadline = match wait {
        Wait::Never => None,
        Wait::For(d) => Some(asked_at + d),
    };
    let pending = PendingQuestion::new(
        &question,
        asked_at,
        deadline,
        previous.as_ref().map_or(0, |s| s.iteration),
        RaisedBy::Ask,
    );
    let markdown = question.to_markdown();
    let claim = AskClaim {
        pid: std::process::id(),
        asked_at: pending.asked_at.clone(),
        deadline: pending.deadline.clone(),
        question: Some(markdown.clone()),
    };
    // The claim first, and only one: of two askers, the second is refused here, before it
    // has written anything another asker or the loop could take for its own.
    take_claim(&ws, &claim, &root)?;
    // Without a loop, this process stands in for it: it holds the lock and owns state.json.
    let own_lock = if ws.is_locked() { None } else { ws.lock().ok() };
    let written = workspace::write_atomic(&ws.question(), markdown.as_bytes())
        .map_err(Failure::failed)
        .and_then(|()| match own_lock {
            Some(_) => {
                let mut st = previous.clone().unwrap_or_else(|| no_run_yet(&ws));
                st.status = Status::WaitingInput;
                st.pid = std::process::id();
                st.pending_question = Some(pending.clone());
                st.save(&ws).map_err(Failure::failed)
            }
            None => Ok(()),
        });
    if let Err(e) = written {
        let _ = workspace::remove(&ws.ask_claim());
        return Err(e);
    }
    // On stderr: stdout is the answer alone, for `ans=$(ralph ask …)`.
    let until = match wait {
        Wait::Never => "no deadline".to_string(),
        Wait::For(d) => format!("up to {}", ralph_ui::fmt_duration(d)),
    };
    eprintln!(
        "ralph ask: waiting for an answer ({until}); answer from any terminal with: {} \"your answer\"",
        crate::answer_command(&root)
    );
    let outcome = wait_for_answer(&ws, &claim, own_lock.is_some());
    let _ = workspace::remove(&ws.ask_claim());

    let ended = outcome?;
    if let Some(_lock) = &own_lock {
        finish_alone(&ws, previous, &question, pending, &ended)?;
    }
    match ended {
        Ended::Answered { answer: ans, .. } => {
            if args.json {
                println!("{}", answer_json(&question, &ans));
            } else {
                println!("{}", ans.text);
            }
            Ok(0)
        }
        ended => {
            let guess = match &question.default {
                Some(d) => format!("proceed with your default ({d})"),
                None => "proceed with your best guess".to_string(),
            };
            // On stderr, with exit 3: stdout stays empty, so that `ans=$(ralph ask …)` never
            // takes the instruction for the answer.
            if matches!(ended, Ended::Skipped) {
                eprintln!(
                    "ralph: the human skipped the question and asks you to decide; {guess} and record the assumption in .ralph/progress.md."
                );
            } else {
                eprintln!(
                    "ralph: nobody answered in time; {guess} and record the assumption in .ralph/progress.md. A late answer will reach a later iteration."
                );
            }
            Ok(NO_ANSWER)
        }
    }
}

/// `ralph ask --json`'s answer: the whole text, the options it picked (one label per line at
/// its start, [`ralph_protocol::question::picked_answer`]) as a list, the rest as the note.
fn answer_json(question: &Question, ans: &answer::Answer) -> serde_json::Value {
    let (picks, note) = question.read_answer(&ans.text);
    serde_json::json!({
        "answer": ans.text,
        "picks": picks,
        "note": note,
        "answered_by": ans.by,
    })
}

/// Takes `.ralph/ask.json` for this process, or refuses (exit 1) while another `ralph ask`
/// that is still alive holds it. A claim whose asker is gone (killed) is removed, that one
/// only, and the claim taken again.
fn take_claim(ws: &Workspace, claim: &AskClaim, root: &std::path::Path) -> Result<(), Failure> {
    for _ in 0..3 {
        if claim.create(ws).map_err(Failure::failed)? {
            return Ok(());
        }
        let raw = workspace::read_bounded(&ws.ask_claim(), workspace::MAX_READ_BYTES)
            .map_err(Failure::failed)?;
        let Some(raw) = raw else { continue };
        let theirs: Option<AskClaim> = serde_json::from_slice(&raw.bytes).ok();
        if let Some(theirs) = theirs.filter(|c| !ralph_loop::asks::claim_is_stale(c)) {
            let text = theirs
                .question
                .as_deref()
                .map(|q| Question::parse_bounded(q.as_bytes()).text)
                .unwrap_or_default();
            return Err(Failure::failed(anyhow!(
                "another `ralph ask` is already waiting in {} (\"{}\", pid {}); one question waits at a time: wait for its answer, then ask again",
                root.display(),
                text.lines().next().unwrap_or(""),
                theirs.pid
            )));
        }
        workspace::remove_if(&ws.ask_claim(), workspace::MAX_READ_BYTES, |now| {
            now == raw.bytes.as_slice()
        })
        .map_err(Failure::failed)?;
    }
    Err(Failure::failed(anyhow!(
        "could not claim {}: other `ralph ask` processes keep taking it; try again",
        ws.ask_claim().display()
    )))
}

/// Waits for an answer to this claim, the deadline, or a skip (the loop removed the claim).
fn wait_for_answer(ws: &Workspace, claim: &AskClaim, alone: bool) -> Result<Ended, Failure> {
    let (tx, rx) = mpsc::channel();
    ralph_process::watch_blocking(ws.dir(), tx)
        .context("could not watch .ralph/ for the answer")?;
    let asked_at = state::parse_timestamp(&claim.asked_at).unwrap_or_else(SystemTime::now);
    let mut deadline = claim.deadline.as_deref().and_then(state::parse_timestamp);
    loop {
        if let Some(ans) = answer::read(ws)?
            && answer_is_for(&ans, claim, asked_at)
        {
            return Ok(Ended::answered(ans, false));
        }
        if !alone {
            // The loop owns the deadline (extensions, pauses) and removes the claim on a skip.
            if !ws.ask_claim().exists() {
                return Ok(Ended::Skipped);
            }
            if let Ok(Some(st)) = State::load(ws)
                && let Some(p) = st.pending_question
                && p.asked_at == claim.asked_at
            {
                if p.timed_out {
                    return Ok(Ended::TimedOut);
                }
                deadline = if p.paused { None } else { p.deadline_time() };
            }
        }
        let wait = match deadline {
            Some(d) => match d.duration_since(SystemTime::now()) {
                Ok(left) => left,
                Err(_) => return Ok(Ended::TimedOut),
            },
            None => Duration::from_secs(3600),
        };
        match rx.recv_timeout(wait) {
            Ok(()) | Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(Ended::TimedOut),
        }
    }
}

/// An answer belongs to this question if it names it, or (hand-written) came after it was asked.
fn answer_is_for(ans: &answer::Answer, claim: &AskClaim, asked_at: SystemTime) -> bool {
    match &ans.question_asked_at {
        Some(a) => a == &claim.asked_at,
        None => ans.at >= asked_at,
    }
}

/// The state of a workspace where no loop has run: `ralph ask` stands in for one while it waits,
/// and leaves it `stopped`, with the question's fate, when it ends.
fn no_run_yet(ws: &Workspace) -> State {
    let mut st = State::fresh(ws, "ralph ask", 0);
    st.status = Status::Stopped;
    st
}

/// With no loop running, this process cleans up as the loop would have.
fn finish_alone(
    ws: &Workspace,
    previous: Option<State>,
    question: &Question,
    mut pending: PendingQuestion,
    ended: &Ended,
) -> Result<(), Failure> {
    let asked_at = pending.asked_at.clone();
    let asked_at = asked_at.as_str();
    clarifications::record(
        ws,
        &clarifications::Entry {
            question: Some(question),
            asked_at: Some(asked_at),
            outcome: ended,
        },
    )?;
    // The state as it was while the question waited: the one before, with this question.
    let mut st = previous.unwrap_or_else(|| no_run_yet(ws));
    if st.status == Status::WaitingInput {
        st.status = Status::Stopped;
    }
    if let Some(a) = ended.answer() {
        // The answer went straight to the agent that asked: nothing is left to deliver. The
        // state says so before the file goes, or a `ralph answer` that still saw the question
        // waiting would find the file free and win a second time (see `desk::submit`).
        st.pending_question = Some(pending);
        st.close_question(asked_at, Some(a));
        st.save(ws)?;
        workspace::remove(&ws.answer())?;
        workspace::remove(&ws.question())?;
        return Ok(());
    }
    // Keep the question open: a late `ralph answer` reaches the next `ralph run`.
    pending.timed_out = true;
    st.pending_question = Some(pending);
    st.save(ws)?;
    Ok(())
}
