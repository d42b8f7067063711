//! The prompt each iteration starts from: the task, what is left, what was learned, what changed.
//!
//! Every iteration starts the agent with a fresh context, so everything it needs must be in the
//! prompt: the task, its unchecked criteria, `.ralph/progress.md`, `.ralph/guardrails.md`, the
//! protocol for talking to ralph, and whatever the previous iteration left for this one (an
//! answer, a note that a question went unanswered, the reason a DONE was rejected).
//!
//! Users can replace the template with `.ralph/prompt.md`; `{{name}}` placeholders there are
//! filled with the same sections (see [`PLACEHOLDERS`]).

use std::fmt::Write as _;

use crate::task::TaskFile;
use ralph_protocol::Question;

/// Something the previous iteration (or a human) left for the next prompt.
#[derive(Debug, Clone, PartialEq)]
pub enum Carryover {
    /// A question was answered.
    Answer {
        /// The question as asked.
        question: Question,
        /// The answer.
        answer: String,
        /// Who answered, in words.
        by: String,
        /// The answer came after the deadline, when the agent had already gone on without it.
        late: bool,
    },
    /// A question's deadline passed with no answer.
    Unanswered {
        /// The question as asked.
        question: Question,
    },
    /// The human skipped the question (Esc), asking the agent to decide.
    Skipped {
        /// The question as asked.
        question: Question,
    },
    /// The agent signalled QUESTION but wrote no `.ralph/question.md`.
    QuestionLost,
    /// The agent signalled DONE but ralph did not accept it.
    Rejected {
        /// Why, in full: open criteria, failing test output.
        reason: String,
    },
    /// The human left guidance with `ralph answer --force` when no question was waiting.
    Guidance {
        /// The guidance.
        text: String,
    },
    /// The previous run of the agent failed.
    AgentFailed {
        /// How it ended, in words.
        how: String,
    },
    /// `ralph land` could not land the work the agent finished, and sent it back.
    LandingFailed {
        /// What failed and what to do, in full.
        what: String,
    },
}

/// Placeholders a custom `.ralph/prompt.md` may use.
pub const PLACEHOLDERS: &[&str] = &[
    "task",
    "criteria",
    "test_command",
    "progress",
    "guardrails",
    "carryover",
    "protocol",
    "iteration",
    "max_iterations",
];

/// Everything a prompt is built from.
#[derive(Debug)]
pub struct PromptInputs<'a> {
    /// The task file as it is now.
    pub task: &'a TaskFile,
    /// The task file's name as the agent should use it ([`TaskFile::name_in`] the project).
    pub task_name: &'a str,
    /// This iteration, 1-based.
    pub iteration: u32,
    /// The limit.
    pub max_iterations: u32,
    /// `.ralph/progress.md`.
    pub progress: &'a str,
    /// `.ralph/guardrails.md`.
    pub guardrails: &'a str,
    /// What the last iteration left.
    pub carryover: &'a [Carryover],
    /// `.ralph/prompt.md`, if the user wrote one.
    pub template: Option<&'a str>,
}

/// Builds the prompt text.
pub fn build(inputs: &PromptInputs<'_>) -> String {
    let sections = Sections::new(inputs);
    match inputs.template {
        Some(template) => fill(template, &sections),
        None => default_prompt(inputs, &sections),
    }
}

struct Sections {
    task: String,
    criteria: String,
    test_command: String,
    progress: String,
    guardrails: String,
    carryover: String,
    protocol: String,
    iteration: String,
    max_iterations: String,
}

impl Sections {
    fn new(inputs: &PromptInputs<'_>) -> Self {
        let (task, name) = (inputs.task, inputs.task_name);
        let mut criteria = String::new();
        for c in task.unchecked() {
            let _ = writeln!(criteria, "- [ ] {} ({name} line {})", c.text, c.line);
        }
        if criteria.is_empty() {
            if task.criteria.is_empty() {
                for c in &task.completion_criteria {
                    let _ = writeln!(criteria, "- {c}");
                }
            } else {
                let _ = writeln!(
                    criteria,
                    "All criteria in {name} are checked. Make sure they really hold, run the tests, then signal DONE."
                );
            }
        }
        Sections {
            task: task.task.trim().to_string(),
            criteria,
            test_command: task.test_command.clone().unwrap_or_default(),
            progress: or_none(inputs.progress, "(empty: this is a fresh start)"),
            guardrails: or_none(inputs.guardrails, "(none yet)"),
            carryover: render_carryover(inputs.carryover),
            protocol: protocol(task, name),
            iteration: inputs.iteration.to_string(),
            max_iterations: inputs.max_iterations.to_string(),
        }
    }

    fn get(&self, name: &str) -> Option<&str> {
        Some(match name {
            "task" => &self.task,
            "criteria" => &self.criteria,
            "test_command" => &self.test_command,
            "progress" => &self.progress,
            "guardrails" => &self.guardrails,
            "carryover" => &self.carryover,
            "protocol" => &self.protocol,
            "iteration" => &self.iteration,
            "max_iterations" => &self.max_iterations,
            _ => return None,
        })
    }
}

fn or_none(text: &str, none: &str) -> String {
    let t = text.trim();
    if t.is_empty() {
        none.to_string()
    } else {
        t.to_string()
    }
}

/// Replaces `{{name}}` with its section; unknown placeholders are left as written.
fn fill(template: &str, sections: &Sections) -> String {
    let mut out = String::with_capacity(template.len() + 4096);
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find("}}") {
            Some(end) => {
                let name = after[..end].trim();
                match sections.get(name) {
                    Some(value) => out.push_str(value),
                    None => out.push_str(&rest[start..start + 2 + end + 2]),
                }
                rest = &after[end + 2..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

fn default_prompt(inputs: &PromptInputs<'_>, s: &Sections) -> String {
    let mut p = String::with_capacity(8192);
    let _ = writeln!(
        p,
        "# Task (ralph iteration {} of {})\n\n{}\n",
        inputs.iteration, inputs.max_iterations, s.task
    );
    let _ = writeln!(p, "## Criteria still open\n\n{}", s.criteria);
    if !s.test_command.is_empty() {
        let _ = writeln!(
            p,
            "## Test command\n\nDONE is accepted only when this exits 0:\n\n```sh\n{}\n```\n",
            s.test_command
        );
    }
    if !s.carryover.is_empty() {
        let _ = writeln!(p, "## From the previous iteration\n\n{}", s.carryover);
    }
    let _ = writeln!(
        p,
        "## Progress so far (.ralph/progress.md)\n\n{}\n",
        s.progress
    );
    let _ = writeln!(
        p,
        "## Guardrails (.ralph/guardrails.md)\n\n{}\n",
        s.guardrails
    );
    p.push_str(&s.protocol);
    p
}

/// The message that resumes an agent's session: after its question was answered, or when
/// `ralph land` sends its finished work back.
///
/// The agent still has the task and the protocol in its context; it needs only what changed.
pub fn resume_message(carryover: &[Carryover]) -> String {
    let mut m = String::from("ralph: here is what happened since your last turn.\n\n");
    m.push_str(&render_carryover(carryover));
    m.push_str("Continue the task with this in mind. The protocol is unchanged: update .ralph/progress.md, and signal when you are done or need to ask again.\n");
    m
}

fn render_carryover(items: &[Carryover]) -> String {
    let mut out = String::new();
    for item in items {
        match item {
            Carryover::Answer {
                question,
                answer,
                by,
                late,
            } => {
                let _ = writeln!(
                    out,
                    "### Your question was answered{}\n",
                    if *late { " (late)" } else { "" }
                );
                quote_question(&mut out, question);
                let _ = writeln!(out, "Answer (from {by}):\n\n{}\n", quote(answer));
                if *late {
                    out.push_str("This answer arrived after the deadline, so an earlier iteration went on with its best guess. Check the assumption recorded in .ralph/progress.md and change course if the answer says otherwise.\n\n");
                }
                out.push_str(
                    "The answer is also in .ralph/answer.md while this iteration runs.\n\n",
                );
            }
            Carryover::Unanswered { question } => {
                out.push_str("### Your question went unanswered\n\n");
                quote_question(&mut out, question);
                unanswered_instruction(&mut out, question);
            }
            Carryover::Skipped { question } => {
                out.push_str("### Your human skipped your question and asks you to decide\n\n");
                quote_question(&mut out, question);
                unanswered_instruction(&mut out, question);
            }
            Carryover::QuestionLost => {
                out.push_str("### Your question was lost\n\nYou signalled QUESTION, but there was no .ralph/question.md to show. Nobody saw a question. If you still need an answer, write the question to .ralph/question.md first, then signal QUESTION again; otherwise go on with your best guess and record it in .ralph/progress.md.\n\n");
            }
            Carryover::Rejected { reason } => {
                let _ = writeln!(
                    out,
                    "### Your DONE was not accepted\n\n{}\n\nFix this before you signal DONE again.\n",
                    reason.trim_end()
                );
            }
            Carryover::Guidance { text } => {
                let _ = writeln!(out, "### Guidance from your human\n\n{}\n", quote(text));
            }
            Carryover::LandingFailed { what } => {
                let _ = writeln!(
                    out,
                    "### Landing your finished work failed\n\n{}\n",
                    what.trim_end()
                );
            }
            Carryover::AgentFailed { how } => {
                let _ = writeln!(
                    out,
                    "### The previous run of the agent failed\n\n{how}. Check the state of the workspace before you go on.\n"
                );
            }
        }
    }
    out
}

fn quote_question(out: &mut String, q: &Question) {
    let _ = writeln!(out, "Question:\n\n{}\n", quote(&q.text));
    if !q.options.is_empty() {
        out.push_str("Options you offered:\n");
        for (i, o) in q.options.iter().enumerate() {
            let _ = writeln!(out, "{}. {}", i + 1, o.label);
        }
        out.push('\n');
    }
}

fn unanswered_instruction(out: &mut String, q: &Question) {
    match &q.default {
        Some(d) => {
            let _ = writeln!(
                out,
                "Proceed with your stated default, \"{d}\", as your best guess. Record the assumption in .ralph/progress.md (so a human can correct it later) and keep going.\n"
            );
        }
        None => out.push_str("Proceed on your best guess. Record the assumption in .ralph/progress.md (so a human can correct it later) and keep going.\n\n"),
    }
    out.push_str("A late answer, if one comes, will reach a later iteration.\n\n");
}

fn quote(text: &str) -> String {
    text.trim_end()
        .lines()
        .map(|l| {
            if l.is_empty() {
                ">".to_string()
            } else {
                format!("> {l}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The rules of talking to ralph, as the agent reads them; `task_name` is the task file's
/// name in the project.
///
/// The signal tags are shown inside fenced code blocks on purpose: an agent that echoes its
/// prompt then echoes them inside a fence, where they do not count.
pub fn protocol(task: &TaskFile, task_name: &str) -> String {
    let mut p = format!(
        "## How to work inside ralph\n\n\
You are one iteration of a loop. Each iteration starts with a fresh context and this prompt; the files are your memory.\n\n\
1. Work on the open criteria. When one is really met, check it in {task_name} (change `- [ ]` to `- [x]`).\n\
2. Before you end your turn, append what you did, what you learned and any assumption you made to .ralph/progress.md. Add lasting rules (\"never edit generated files\") to .ralph/guardrails.md.\n\
3. When every criterion is checked",
    );
    if task.test_command.is_some() {
        p.push_str(" and the test command passes");
    }
    p.push_str(
        ", print this on a line of its own and end your turn:\n\n\
```\n<ralph>DONE</ralph>\n```\n\n\
ralph checks the criteria and runs the tests itself; if anything fails, the next iteration is told why.\n\
4. If you are stuck in a way another iteration cannot fix (missing access, contradictory task), explain why, then print this on a line of its own:\n\n\
```\n<ralph>GUTTER</ralph>\n```\n\n\
### Asking your human a question\n\n\
Ask only when a wrong guess would be costly (hard to undo, or a real product decision); otherwise decide, and record the assumption in .ralph/progress.md. To ask:\n\n\
- Write the question to .ralph/question.md. Plain markdown is enough; to offer choices, start the file with YAML frontmatter:\n\n\
```markdown\n---\noptions: [Redis, Memcached]\ndefault: Redis\ncontext: Both are already in Cargo.toml.\n---\nShould the session cache use Redis or Memcached?\n```\n\n\
- Then print this on a line of its own and end your turn:\n\n\
```\n<ralph>QUESTION</ralph>\n```\n\n\
  The answer comes in the next prompt and in .ralph/answer.md. If nobody answers in time, the next prompt says so: proceed with your default.\n\
- Or, if you would rather keep your context, run `ralph ask \"Redis or Memcached?\" --option Redis --option Memcached --default Redis`. It waits for the answer and prints it; if it exits with status 3, nobody answered: proceed with your default.\n",
    );
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_replaces_known_placeholders_and_keeps_unknown_ones() {
        let s = Sections {
            task: "T".into(),
            criteria: "C".into(),
            test_command: "make test".into(),
            progress: "P".into(),
            guardrails: "G".into(),
            carryover: String::new(),
            protocol: "PROTO".into(),
            iteration: "2".into(),
            max_iterations: "9".into(),
        };
        assert_eq!(
            fill(
                "{{task}}/{{ criteria }}/{{nope}}/{{iteration}} of {{max_iterations}}/{{",
                &s
            ),
            "T/C/{{nope}}/2 of 9/{{"
        );
    }
}
