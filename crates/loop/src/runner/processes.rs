//! [`Processes`]: the process groups of a run, as the runner keeps them: the guard, what a
//! killed run left, and the sandbox's process waiting for the next agent.

use ralph_process::Guard;

/// The process groups of a run: the guard that stops the running one should ralph be killed
/// outright, and what the last run left when it was.
#[derive(Debug)]
pub(super) struct Processes {
    /// The guard that stops the running group if ralph is killed outright, when there is one.
    pub(super) guard: Option<Guard>,
    /// The last run, when it was killed with a group running: that group was stopped as
    /// this run started, and what it left outside it is stopped before anything else (see
    /// [`Runner::stop_what_the_killed_run_left`](super::Runner::stop_what_the_killed_run_left)).
    pub(super) killed_run: Option<KilledRun>,
    /// What the last agent left running, until it is stopped (see `leftovers`).
    pub(super) left: Option<super::leftovers::Left>,
    /// The sandbox every agent of this run starts in, when there is one.
    pub(super) sandbox: Option<crate::sandbox::Sandbox>,
    /// The sandbox's process for the next agent start, being started or waiting
    /// ([`Runner::get_agent_ready`](super::Runner::get_agent_ready)).
    pub(super) ready: Option<tokio::task::JoinHandle<std::io::Result<ralph_process::Waiting>>>,
}

/// The last run, killed with a group running ([`Processes::killed_run`]).
#[derive(Debug)]
pub(super) struct KilledRun {
    /// Its id (`RALPH_RUN`), when its state recorded one.
    pub(super) id: Option<String>,
    /// The iteration it was at.
    pub(super) iteration: u32,
    /// Its group, when it was still running and this run stopped it.
    pub(super) group: Option<i32>,
}
