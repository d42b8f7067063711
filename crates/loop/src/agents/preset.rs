//! What a preset is: the program, its arguments as a template, how the prompt gets in, how its
//! output is read.

use ralph_signal::StreamFormat;

/// One piece of a preset's command-line template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    /// This word, as it is.
    Lit(&'static str),
    /// The id of the session to resume.
    Session,
    /// The preset's model flag and the model, when a model is set; nothing otherwise.
    Model,
    /// The user's extra arguments (`agent_args`), each as one word.
    Extra,
    /// The prompt (or a pointer to its file), for a CLI that takes it only as an argument.
    Prompt,
    /// Where a resumed run's words go (the preset's `resume`); nothing in a fresh run.
    Resume,
}

/// How the prompt reaches the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptVia {
    /// Written to stdin, which is then closed.
    Stdin,
    /// As an argument ([`Arg::Prompt`]); stdin gets nothing.
    Argv,
    /// As a stream-json user message on stdin, which stays open: the agent asks its host
    /// (ralph) before using tools, and ralph answers on stdin ([`crate::native`]).
    StreamJson,
}

/// The program a preset runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Program {
    /// A program looked up on `PATH`.
    Path(&'static str),
    /// The running ralph executable itself (the demo agent).
    Ralph,
}

/// How to run one coding-agent CLI: see the module docs.
#[derive(Debug)]
pub struct Preset {
    /// The name in `--agent NAME` and `agent:`.
    pub name: &'static str,
    /// What it is, for help and error messages.
    pub about: &'static str,
    /// The program to run (and to detect on `PATH`).
    pub program: Program,
    /// How its stdout is decoded.
    pub format: StreamFormat,
    /// How the prompt gets in.
    pub prompt: PromptVia,
    /// The arguments of a run, fresh or resumed.
    pub args: &'static [Arg],
    /// The words that continue a session with a new message, in place of [`Arg::Resume`]
    /// (with [`Arg::Session`]); `None` if it cannot.
    pub resume: Option<&'static [Arg]>,
    /// The flag that selects the model; `None` if a model cannot be chosen.
    pub model_flag: Option<&'static str>,
    /// Extra environment variables, always.
    pub env: &'static [(&'static str, &'static str)],
    /// Extra environment variables when ralph runs as root.
    pub root_env: &'static [(&'static str, &'static str)],
    /// Whether the CLI can ask a structured question headless (Claude Code's AskUserQuestion,
    /// over `--input-format stream-json`); the others ask with `<ralph>QUESTION</ralph>`.
    pub native_questions: bool,
    /// Its flag for "do not ask", and what that lets the agent do; `None` for the demo agent.
    pub unattended: Option<Unattended>,
}

/// A preset's "do not ask" flag, in plain words: every run says it on its first lines, so
/// nobody starts an agent that may run any command without knowing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unattended {
    /// The flag as it appears on the command line.
    pub flag: &'static str,
    /// What it lets the agent do, as a clause after "it".
    pub allows: &'static str,
}
