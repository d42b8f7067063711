//! `ralph answer`: answer the waiting question from any terminal or script.
//!
//! The answer is created in `.ralph/answer.md` with first-writer-wins semantics, so it cannot
//! race the loop's own prompt or another `ralph answer`: exactly one answer is taken and every
//! other caller is told who got there first. A running loop watches the file and moves on at
//! once; with no loop running, the next `ralph run` delivers it.

use std::io::Read;

use anyhow::{Context as _, anyhow};
use ralph_protocol::{
    ANSWER_PLACEHOLDER, AnsweredBy, DeskError, MAX_ANSWER_BYTES, Picks, Refusal, Reply, State,
    Submitted, Workspace, answer_question, guide, shell_quote,
};

use crate::args::AnswerArgs;
use crate::locate::{self, Target};
use crate::{CmdResult, Failure};

/// Writes the answer for the loop in `-C DIR`.
pub fn run(args: &AnswerArgs) -> CmdResult {
    let root = match locate::target(&args.dir.dir)? {
        Target::Project(root) => root,
        Target::OnlyWaiting(root) => {
            eprintln!("ralph: {}", locate::acting_on(&root));
            root
        }
        Target::Nowhere { dir, waiting } => {
            return Err(locate::nowhere(
                &dir,
                &waiting,
                "there is no question here to answer (and --force leaves guidance only in a project)",
            ));
        }
    };
    let ws = Workspace::new(&root);
    ws.check_not_symlink().map_err(Failure::failed)?;
    let state = State::load(&ws).map_err(Failure::failed)?;
    let last_closed = state
        .as_ref()
        .and_then(|s| s.closed_questions.last().cloned());
    let pending = state.and_then(|s| s.pending_question);
    if pending.is_none() && !args.force {
        return Err(refused(DeskError::NotWaiting {
            root: root.display().to_string(),
            closed: last_closed,
        }));
    }

    let mut text = if args.stdin || args.text.as_deref() == Some("-") {
        read_capped_stdin()?
    } else if args.edit {
        edit(pending.as_ref())?
    } else {
        args.text.clone().unwrap_or_default()
    };

    if !args.as_text && text.trim() == ANSWER_PLACEHOLDER {
        let answer = crate::answer_command(&root);
        return Err(Failure::usage(anyhow!(
            "\"{ANSWER_PLACEHOLDER}\" stands for your answer in the command ralph printed: replace it with your own, in quotes{}. To send these words as they are: {answer} --as-text {}",
            if pending
                .as_ref()
                .is_some_and(|p| !p.question.options.is_empty())
            {
                format!(", or pick an option by number: {answer} 1")
            } else {
                String::new()
            },
            shell_quote(ANSWER_PLACEHOLDER)
        )));
    }

    // Option numbers alone pick options (`2`; `1,3` where several may be picked), as typed in
    // the plain view: the agent gets the labels.
    let question = pending.as_ref().map(|p| &p.question);
    let options = question.map_or(0, |q| q.options.len());
    if args.option.is_none()
        && !args.as_text
        && let Some(picks) = question.and_then(|q| q.picks(&text))
    {
        text = match picks {
            Picks::Labels(labels) => labels,
            Picks::OutOfRange(n) => {
                return Err(Failure::usage(anyhow!(
                    "option {n} is out of range: the question has options 1 to {options}. To answer with the number itself: {} --as-text {}",
                    crate::answer_command(&root),
                    shell_quote(text.trim())
                )));
            }
            Picks::NotOne(count) => {
                return Err(Failure::usage(anyhow!(
                    "the question takes one option, and {} names {count}: pick one ({answer} 1). To answer with these numbers as text: {answer} --as-text {}",
                    shell_quote(text.trim()),
                    shell_quote(text.trim()),
                    answer = crate::answer_command(&root),
                )));
            }
        };
    }
    let reply = match args.option {
        Some(n) => Reply::Picks(vec![n], text),
        None => Reply::Text(text),
    };

    ws.ensure().map_err(Failure::failed)?;
    let submitted = match &pending {
        // The question may close between the look above and the answer (the asker took
        // another front end's answer): the loser is told who won all the same.
        Some(_) => answer_question(&ws, None, &reply, AnsweredBy::RalphAnswer, None),
        // --force: guidance for the next iteration, with no question to answer.
        None => match &reply {
            Reply::Text(text) => guide(&ws, text, AnsweredBy::RalphAnswer),
            Reply::Picks(..) => Err(DeskError::Refused(Refusal::NoOptions)),
        },
    }
    .map_err(refused)?;
    match submitted {
        Submitted::Accepted => {
            let live = ws.is_locked();
            match (&pending, live) {
                (Some(q), true) if q.timed_out => outln!(
                    "Answered (late: the deadline had passed). The loop in {} gives it to the next iteration.",
                    root.display()
                ),
                (Some(_), true) => {
                    outln!("Answered. The loop in {} picks it up now.", root.display())
                }
                (None, true) => outln!(
                    "Guidance left. The next iteration of the loop in {} gets it.",
                    root.display()
                ),
                (_, false) => outln!(
                    "Answer saved in {}. No loop is running there; the next `{}` delivers it.",
                    ws.answer().display(),
                    crate::command_in(&root, "run")
                ),
            }
            Ok(0)
        }
        Submitted::AlreadyAnswered(theirs) => Err(Failure::failed(anyhow!(
            "someone answered first ({}{}); your answer was not used.{}",
            theirs.by.describe(),
            if theirs.text.is_empty() {
                String::new()
            } else {
                format!(": \"{}\"", first_line(&theirs.text))
            },
            " Their answer reaches the agent."
        ))),
        Submitted::Skipped => Err(Failure::failed(anyhow!(
            "the question was skipped before your answer arrived; your answer was not used and the agent decides on its own. To leave guidance for the next iteration anyway, add --force."
        ))),
        Submitted::RunEnded => Err(Failure::failed(anyhow!(
            "the run that asked the question has ended, so nobody waits for your answer; it was not used. To leave guidance for the next run anyway, add --force."
        ))),
    }
}

/// The failure for an answer the desk did not take: a refusal of the answer itself is a usage
/// error (exit 2), the rest (no question waits, a file that cannot be written) a failure.
fn refused(e: DeskError) -> Failure {
    match e {
        DeskError::Refused(why) => Failure::usage(anyhow!(why)),
        other => Failure::failed(anyhow!(other)),
    }
}

/// The refusal of an answer of `size` bytes.
fn too_long(size: u64) -> Failure {
    Failure::usage(anyhow!(Refusal::TooLong { size }))
}

/// Standard input as the answer, read to its end but kept only up to the cap (a bigger one is
/// refused with its whole size).
fn read_capped_stdin() -> Result<String, Failure> {
    let mut kept = Vec::new();
    let mut size: u64 = 0;
    let mut buf = vec![0u8; 64 * 1024];
    let mut stdin = std::io::stdin().lock();
    loop {
        let n = match stdin.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(Failure::failed(
                    anyhow!(e).context("could not read the answer from standard input"),
                ));
            }
        };
        size += n as u64;
        let room = (MAX_ANSWER_BYTES + 1).saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
    }
    if size > MAX_ANSWER_BYTES as u64 {
        return Err(too_long(size));
    }
    String::from_utf8(kept)
        .map_err(|_| Failure::usage(anyhow!("the answer on standard input is not UTF-8 text")))
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// Opens `$VISUAL` or `$EDITOR` on a file that shows the question; lines starting with `#` are dropped.
fn edit(q: Option<&ralph_protocol::PendingQuestion>) -> Result<String, Failure> {
    // Set but empty counts as unset, as in git and most shells' tools.
    let set = |name| {
        std::env::var(name)
            .ok()
            .filter(|v: &String| !v.trim().is_empty())
    };
    let editor = set("VISUAL")
        .or_else(|| set("EDITOR"))
        .unwrap_or_else(|| "vi".into());
    let mut file = tempfile::Builder::new()
        .prefix("ralph-answer-")
        .suffix(".md")
        .tempfile()
        .context("could not create a file to edit")?;
    let mut template =
        String::from("\n# Write your answer above. Lines starting with '#' are ignored.\n");
    if let Some(q) = q {
        template.push_str("#\n# The question:\n");
        for l in q.question.text.lines() {
            template.push_str(&format!("#   {l}\n"));
        }
        for (i, o) in q.question.options.iter().enumerate() {
            template.push_str(&format!("#   {}. {}\n", i + 1, o.label));
        }
    }
    use std::io::Write;
    file.write_all(template.as_bytes())?;
    file.flush()?;
    // The editor variable may carry arguments (`code --wait`), so it goes through the shell; the
    // file name is passed as a separate argument, never spliced into the command string.
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("sh")
        .arg(file.path())
        .status()
        .with_context(|| format!("could not start the editor `{editor}`"))?;
    if !status.success() {
        return Err(Failure::failed(anyhow!(
            "the editor `{editor}` failed; nothing was answered"
        )));
    }
    let text = std::fs::read_to_string(file.path())?;
    Ok(text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n"))
}
