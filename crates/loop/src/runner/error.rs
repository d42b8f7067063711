//! [`RunError`]: why a run could not go on.

use std::path::PathBuf;

use ralph_protocol::{StateError, WorkspaceError};

/// Why a run could not go on.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A file in `.ralph/` could not be read or written.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    /// `state.json` could not be read or written.
    #[error(transparent)]
    State(#[from] StateError),
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
