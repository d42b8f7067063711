//! What a run is given: the workspace, the task, the agent, and the settings.

use std::path::PathBuf;
use std::time::Duration;

use ralph_protocol::{AgentChoice, Workspace};

use crate::agent_spec::AgentSpec;
use crate::logs::LogBudget;
use crate::task::{OnQuestionTimeout, TaskFile, Wait};

/// The knobs of a run: the task file's values with command-line overrides applied.
#[derive(Debug, Clone)]
pub struct RunSettings {
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
    pub log_budget: LogBudget,
}

impl RunSettings {
    /// The task file's settings, with ralph's defaults for the rest.
    pub fn from_task(task: &TaskFile) -> Self {
        RunSettings {
            max_iterations: task.max_iterations,
            question_timeout: task.question_timeout,
            iteration_timeout: task.iteration_timeout,
            test_timeout: task.test_timeout,
            on_question_timeout: task.on_question_timeout,
            max_consecutive_failures: task.max_consecutive_failures,
            signal_grace: Duration::from_secs(10),
            kill_grace: Duration::from_secs(3),
            log_budget: LogBudget::default(),
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
    pub settings: RunSettings,
    /// The fleet the loop belongs to (`ralph fleet` says so in its environment), if any.
    pub fleet: Option<crate::budget::FleetBudget>,
    /// Set when `ralph land` sends a finished loop back to its agent with what failed.
    pub sent_back: Option<SentBack>,
}

/// A finished loop sent back to its agent because its landing failed (a conflict, or tests
/// failing on the combined tree).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentBack {
    /// What failed, in full: the files and hunks in conflict, or the end of the tests' output.
    pub failure: String,
    /// The agent's last session (`state.json`'s `agent_session`): the first iteration resumes
    /// it with the failure when the agent can resume, else it starts fresh with the failure in
    /// its prompt.
    pub session: Option<String>,
}

/// The time a [`Wait`] allows, or `None` for no limit.
pub fn wait_duration(wait: Wait) -> Option<Duration> {
    match wait {
        Wait::Never => None,
        Wait::For(d) => Some(d),
    }
}
