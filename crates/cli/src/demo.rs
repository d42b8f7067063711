//! `ralph demo` and the built-in demo agent: a whole loop that needs nothing installed.
//!
//! The demo agent is ralph itself, run as `ralph __demo-agent`. It follows the same protocol a
//! real agent does, reading its prompt on stdin and the `RALPH_*` variables, so the demo shows
//! the real loop: visible work, a real question through `.ralph/question.md`, the answer (or
//! its default) used in the next iteration, a premature DONE that ralph rejects, and a final
//! DONE that passes the task's `test_command`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use ralph_loop::runner::{RunConfig, RunSettings};
use ralph_loop::task::{TaskFile, parse_wait};
use ralph_protocol::{
    AgentChoice, Answer, Question, QuestionOption, Workspace, append, read_text, shell_quote,
    write_atomic,
};

use crate::args::DemoArgs;
use crate::demo_task::{DEMO_TASK, is_demo_task};
use crate::{CmdResult, Failure, agents, cmd_run};

/// Runs a loop with the demo agent in a fresh directory.
pub fn run(args: &DemoArgs) -> CmdResult {
    let question_timeout = parse_wait(&args.question_timeout).map_err(|e| {
        Failure::usage(anyhow!("--question-timeout {}: {e}", args.question_timeout))
    })?;
    let dir = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d)
                .with_context(|| format!("could not create {}", d.display()))?;
            let dir = crate::locate::project_root(d)?;
            // The demo writes its own files: none of the user's may be in the way.
            let mut entries = std::fs::read_dir(&dir)
                .with_context(|| format!("could not read {}", dir.display()))?;
            if entries.next().is_some() {
                return Err(Failure::usage(anyhow!(
                    "{} is not empty; give `ralph demo --dir` an empty or new directory (the demo \
                     writes RALPH_TASK.md, greeting.txt, NOTES.md and .ralph/ there)",
                    dir.display()
                )));
            }
            dir
        }
        None => tempfile::Builder::new()
            .prefix("ralph-demo-")
            .tempdir()
            .context("could not create a temporary directory for the demo")?
            .keep(),
    };
    let task_path = dir.join("RALPH_TASK.md");
    std::fs::write(&task_path, DEMO_TASK)
        .with_context(|| format!("could not write {}", task_path.display()))?;
    let task = TaskFile::load(&task_path).map_err(Failure::failed)?;
    let mut settings = RunSettings::from_task(&task);
    settings.question_timeout = question_timeout;
    let resolved = agents::resolve_with(Some("demo"), None, None, &[], None)
        .map_err(|e| Failure::failed(anyhow!(e)))?;
    let quoted = shell_quote(&dir.display().to_string());
    outln!(
        "ralph demo: a scripted agent works on a small task in {quoted}.\n\
         It will ask you a question. Answer it here, or from another terminal with the command\n\
         shown with the question, or let the {} run out and watch it go on with its default.\n",
        args.question_timeout
    );
    eprintln!("ralph: {}", resolved.allows);
    let cfg = RunConfig {
        workspace: Workspace::new(&dir),
        task_path,
        task,
        agent: resolved.spec,
        // Recorded, so that `ralph run` in the demo's directory resumes a stopped demo with it.
        agent_choice: Some(AgentChoice::Preset {
            name: "demo".into(),
        }),
        settings,
        fleet: None,
        sent_back: None,
    };
    let code = cmd_run::run_loop(cfg, None, cmd_run::wants_tui(args.no_tui))?;
    if code == 0 {
        outln!(
            "\nralph demo: the files it made are in {quoted}: greeting.txt, NOTES.md, and .ralph/ (progress, clarifications, events, logs).\nTry `{} status -C {quoted}` too.",
            crate::program()
        );
    } else {
        // Stopped (Ctrl-C) or cut short: it made what it got to, and can go on.
        outln!(
            "\nralph demo: stopped before it was done; what it made so far is in {quoted}.\n`{}` goes on from there (a question it asked is asked again); `{} status -C {quoted}` shows where it is.",
            crate::run_command(&dir),
            crate::program()
        );
    }
    Ok(code)
}

/// The demo agent's main: decide from the prompt and the files what this iteration does.
pub fn agent() -> CmdResult {
    let mut prompt = String::new();
    std::io::stdin().read_to_string(&mut prompt)?;
    let ralph_dir = PathBuf::from(
        std::env::var("RALPH_DIR")
            .context("RALPH_DIR is not set: the demo agent runs inside `ralph run`")?,
    );
    let task_file =
        PathBuf::from(std::env::var("RALPH_TASK_FILE").context("RALPH_TASK_FILE is not set")?);
    // `ralph run` refuses it elsewhere; this is for a command line that names it directly.
    if !TaskFile::load(&task_file).is_ok_and(|task| is_demo_task(&task)) {
        return Err(Failure::usage(anyhow!(
            "{}: not the demo's task; the demo agent works only in the directory `ralph demo` makes, and changed nothing here",
            task_file.display()
        )));
    }
    let root = ralph_dir
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let ws = Workspace::new(&root);
    let iteration = std::env::var("RALPH_ITERATION").unwrap_or_default();

    say(&format!(
        "Iteration {iteration}. Reading the task and .ralph/progress.md…"
    ));
    if prompt.contains("Your DONE was not accepted") {
        say("My last DONE was rejected. The prompt says why:");
        // Only the rejection's own lines, not the open-criteria list above it.
        let reason = prompt
            .split("### Your DONE was not accepted")
            .nth(1)
            .unwrap_or("")
            .split("\n#")
            .next()
            .unwrap_or("");
        for line in reason.lines().filter(|l| l.starts_with("- [ ]")) {
            say(&format!("  {line}"));
        }
        say("Writing NOTES.md, which I forgot last time.");
        std::fs::write(
            root.join("NOTES.md"),
            "# Notes\n\nThe greeting was written by ralph's demo agent, in the language its human picked (or its default when nobody answered in time).\n",
        )?;
        check_all(&task_file)?;
        progress(&ws, "Wrote NOTES.md and checked the last criterion.")?;
        say("Every box is checked; the tests should pass now.");
        println!("<ralph>DONE</ralph>");
        return Ok(0);
    }

    let answer = read_text(&ws.answer())?.map(|raw| Answer::parse(&raw).text);
    let gave_up_waiting = prompt.contains("Your question went unanswered")
        || prompt.contains("skipped your question");
    if answer.is_none() && !gave_up_waiting {
        say(
            "Two criteria are open. The greeting needs a language, and a wrong guess would mean redoing it.",
        );
        say("Asking the human (they can answer in the panel, with `ralph answer`, or not at all).");
        let q = Question {
            text: "Which language should the greeting for our new teammate be in?".into(),
            options: ["English", "Français", "Deutsch"]
                .iter()
                .map(|l| QuestionOption::new(*l))
                .collect(),
            multi_select: false,
            default: Some("English".into()),
            context: Some("The team writes in English, but the new teammate is from Lyon.".into()),
            warning: None,
        };
        write_atomic(&ws.question(), q.to_markdown().as_bytes())?;
        progress(
            &ws,
            "Asked which language the greeting should be in (default: English).",
        )?;
        println!("<ralph>QUESTION</ralph>");
        return Ok(0);
    }

    let language = answer.clone().unwrap_or_else(|| "English".into());
    match &answer {
        Some(a) => say(&format!(
            "The human answered: \"{a}\". Writing the greeting."
        )),
        None => say(no_answer_line(&prompt)),
    }
    let greeting = greeting_in(&language);
    std::fs::write(root.join("greeting.txt"), format!("{greeting}\n"))?;
    say(&format!("greeting.txt: {greeting}"));
    check_first(&task_file)?;
    let note = match &answer {
        Some(a) => format!("Wrote greeting.txt in {a}, as the human answered."),
        None if skipped(&prompt) => {
            "Wrote greeting.txt in English: ASSUMPTION, the human skipped the language question."
                .to_string()
        }
        None => "Wrote greeting.txt in English: ASSUMPTION, nobody answered the language question."
            .to_string(),
    };
    progress(&ws, &note)?;
    say("That looks done to me.");
    println!("<ralph>DONE</ralph>");
    Ok(0)
}

/// Whether the prompt says the human skipped the question (Esc, `/skip`), as opposed to the
/// deadline passing with nobody there.
fn skipped(prompt: &str) -> bool {
    prompt.contains("skipped your question")
}

/// What the demo agent says when it goes on without an answer: why there is none.
fn no_answer_line(prompt: &str) -> &'static str {
    if skipped(prompt) {
        "You skipped the question and left it to me. Going on with my default, English, and noting the assumption."
    } else {
        "Nobody answered in time. Going on with my default, English, and noting the assumption."
    }
}

fn greeting_in(language: &str) -> String {
    let l = language.to_lowercase();
    if l.contains("fran") || l.contains("french") {
        "Bienvenue dans l'équipe ! On est ravis de t'avoir avec nous.".into()
    } else if l.contains("deutsch") || l.contains("german") {
        "Willkommen im Team! Schön, dass du da bist.".into()
    } else if l.contains("english") {
        "Welcome to the team! We're glad you're here.".into()
    } else {
        format!("Welcome to the team! (The human asked for: {language})")
    }
}

/// One line of visible work, paced so a person can follow it.
fn say(line: &str) {
    println!("{line}");
    let _ = std::io::stdout().flush();
    std::thread::sleep(Duration::from_millis(250));
}

fn progress(ws: &Workspace, line: &str) -> Result<(), Failure> {
    let iteration = std::env::var("RALPH_ITERATION").unwrap_or_default();
    append(
        &ws.progress(),
        format!("- iteration {iteration}: {line}\n").as_bytes(),
    )?;
    Ok(())
}

fn check_first(task_file: &Path) -> Result<(), Failure> {
    let text = std::fs::read_to_string(task_file)?;
    let text = text.replacen("- [ ]", "- [x]", 1);
    write_atomic(task_file, text.as_bytes())?;
    Ok(())
}

fn check_all(task_file: &Path) -> Result<(), Failure> {
    let text = std::fs::read_to_string(task_file)?;
    write_atomic(task_file, text.replace("- [ ]", "- [x]").as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (issue 25, item 14): after Esc the demo agent said nobody answered in time.
    #[test]
    fn after_a_skip_the_demo_agent_says_it_was_skipped() {
        use ralph_loop::prompt::{Carryover, PromptInputs, build};
        let task = TaskFile::parse(Path::new("RALPH_TASK.md"), DEMO_TASK.as_bytes()).unwrap();
        let question = Question::plain("Which language?");
        let prompt_after = |carryover: Carryover| {
            build(&PromptInputs {
                task: &task,
                task_name: "RALPH_TASK.md",
                iteration: 2,
                max_iterations: 5,
                progress: "",
                guardrails: "",
                carryover: &[carryover],
                template: None,
            })
        };
        let skipped = prompt_after(Carryover::Skipped {
            question: question.clone(),
        });
        assert!(no_answer_line(&skipped).starts_with("You skipped the question"));
        let timed_out = prompt_after(Carryover::Unanswered { question });
        assert!(no_answer_line(&timed_out).starts_with("Nobody answered in time"));
    }

    #[test]
    fn the_demo_task_is_recognised_by_its_task() {
        let task = TaskFile::parse(Path::new("RALPH_TASK.md"), DEMO_TASK.as_bytes()).unwrap();
        assert!(is_demo_task(&task));
    }
}
