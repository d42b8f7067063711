//! What a run is given: the agent (how to start it fresh or resumed), the settings, and the
//! errors that end a run.

use super::*;

/// How to start one run of an agent: the shell command, what goes on its stdin, extra env.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Invocation {
    /// Run with `sh -c`; every piece that came from outside is already shell-quoted.
    pub command: String,
    /// Written to the agent's stdin, which is then closed; `None` gives it no stdin at all.
    pub stdin: Option<Vec<u8>>,
    /// Extra environment variables for this agent.
    pub env: Vec<(String, String)>,
    /// Keep stdin open after `stdin` is written: the agent talks with its host (Claude Code's
    /// stdio permission protocol), and stdin closes when its turn ends.
    pub conversation: bool,
}

/// Builds a fresh run from the prompt (and the path of the file that holds it).
pub type FreshFn = Arc<dyn Fn(&str, &Path) -> Invocation + Send + Sync>;
/// Builds a resumed run from a session id and the new user message (and the prompt file path).
pub type ResumeFn = Arc<dyn Fn(&str, &str, &Path) -> Invocation + Send + Sync>;

/// The agent to run: a name for humans, how to start it, and how to read its output.
#[derive(Clone)]
pub struct AgentSpec {
    /// Shown in the status area and logs.
    pub name: String,
    /// How its stdout is decoded.
    pub format: StreamFormat,
    /// A fresh run with the whole prompt.
    pub fresh: FreshFn,
    /// Continuing a session with a new message, for agents that can (`None` otherwise).
    pub resume: Option<ResumeFn>,
}

impl AgentSpec {
    /// Any command line, run with `sh -c`, the prompt on stdin, its output read as plain text.
    pub fn command(name: impl Into<String>, command: impl Into<String>) -> Self {
        let command = command.into();
        AgentSpec {
            name: name.into(),
            format: StreamFormat::Text,
            fresh: Arc::new(move |prompt, _| Invocation {
                command: command.clone(),
                stdin: Some(prompt.as_bytes().to_vec()),
                ..Invocation::default()
            }),
            resume: None,
        }
    }
}

impl std::fmt::Debug for AgentSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentSpec")
            .field("name", &self.name)
            .field("format", &self.format)
            .field("resume", &self.resume.is_some())
            .finish()
    }
}

/// The knobs of a run: the task file's values with command-line overrides applied.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Stop with exit 3 after this many iterations.
    pub max_iterations: u32,
    /// How long a question waits for an answer.
    pub question_timeout: Wait,
    /// How long one agent run may take.
    pub iteration_timeout: Wait,
    /// How long the test command may take.
    pub test_timeout: Duration,
    /// What to do when a question times out.
    pub on_question_timeout: OnQuestionTimeout,
    /// Stop after this many failed agent runs in a row.
    pub max_consecutive_failures: u32,
    /// After a signal, how long the agent may take to end its turn before it is stopped.
    pub signal_grace: Duration,
    /// Between SIGTERM and SIGKILL when stopping an agent.
    pub kill_grace: Duration,
    /// How much of `.ralph/logs/` is kept.
    pub log_budget: logs::LogBudget,
}

impl Settings {
    /// The task file's settings, with ralph's defaults for the rest.
    pub fn from_task(task: &TaskFile) -> Self {
        Settings {
            max_iterations: task.max_iterations,
            question_timeout: task.question_timeout,
            iteration_timeout: task.iteration_timeout,
            test_timeout: task.test_timeout,
            on_question_timeout: task.on_question_timeout,
            max_consecutive_failures: task.max_consecutive_failures,
            signal_grace: Duration::from_secs(10),
            kill_grace: Duration::from_secs(3),
            log_budget: logs::LogBudget::default(),
        }
    }
}

/// Everything a run needs.
#[derive(Debug)]
pub struct RunConfig {
    /// The project and its `.ralph/`.
    pub workspace: Workspace,
    /// The task file (re-read every iteration).
    pub task_path: PathBuf,
    /// The task file as first loaded (already validated).
    pub task: TaskFile,
    /// The agent.
    pub agent: AgentSpec,
    /// How the agent was chosen, recorded in `state.json` for a later run to resume with.
    pub agent_choice: Option<AgentChoice>,
    /// The knobs.
    pub settings: Settings,
}

/// Why a run could not go on.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A file in `.ralph/` could not be read or written.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    /// `state.json` could not be read or written.
    #[error(transparent)]
    State(#[from] state::StateError),
    /// The agent could not be started at all.
    #[error(
        "could not start the agent `{command}`: {reason}. Check that the command exists and runs by itself."
    )]
    Spawn {
        /// The command line.
        command: String,
        /// What the OS said; part of the message, not a separate cause, so it is said once.
        reason: std::io::Error,
    },
    /// The file watcher on `.ralph/` could not be set up.
    #[error("could not watch {path} for answers: {message}")]
    Watch {
        /// The directory.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

/// The time a [`Wait`] allows, or `None` for no limit.
pub fn wait_duration(wait: Wait) -> Option<Duration> {
    match wait {
        Wait::Never => None,
        Wait::For(d) => Some(d),
    }
}
