//! How to start an agent: the command line for a fresh run or a resumed session, what goes on
//! its stdin, and how its output is read. The presets ([`agents`](crate::agents)) build
//! these; the runner runs them.

use std::path::Path;
use std::sync::Arc;

use ralph_signal::StreamFormat;

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
