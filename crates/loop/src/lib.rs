//! ralph's loop: runs an agent against a task file until the task is really done.
//!
//! # Theory of operation
//!
//! A run is a [`runner::Runner`], made from a [`runner::RunConfig`] (the project, the task file,
//! the agent, the settings) and two channels to a front end: `LoopEvent`s out, `Control`s in
//! (both `ralph_protocol::event`). [`runner::Runner::run`] owns the project's `.ralph/` for the
//! whole run: it holds the workspace lock, and nothing else writes the loop's files. It goes
//! round one loop:
//!
//! 1. **Prompt.** The task file is read again ([`task`]: the agent ticks its boxes as it goes)
//!    and the prompt built ([`prompt`]) from it, `.ralph/progress.md`, `.ralph/guardrails.md`
//!    and what the last iteration left for this one (an answer, a rejected DONE, a failure:
//!    a [`prompt::Carryover`]).
//! 2. **Agent.** The agent, an [`agent_spec::AgentSpec`] (a preset from [`agents`], or any
//!    command line), starts in a process group of its own; `ralph-process` owns that group's
//!    life and its stop (SIGTERM, a grace, SIGKILL, what escaped the group). Its stdout is
//!    decoded as it streams (`ralph-signal`), both streams are logged raw ([`logs`]), and what
//!    it asks on the way is served: `ralph ask` through the watch on `.ralph/` ([`asks`]),
//!    Claude's own question tool on its stdin ([`native`]).
//! 3. **Decide.** What the run amounted to goes to the runner's policy, one pure function:
//!    record the iteration, verify a DONE (every criterion checked, then `test_command`),
//!    show a QUESTION and wait for its answer (with [`notify`] ringing the human), back off
//!    after a rate limit, go on, or stop: a verified DONE, GUTTER, `max_iterations`, too many
//!    failures in a row, the cost cap, Ctrl-C. The runner does what it says and logs it.
//! 4. **Record.** `state.json` and `events.jsonl` tell other processes (`ralph status`,
//!    `ralph answer`, the broker) where the run is; `clarifications.md` keeps every question
//!    and its answer.
//!
//! # Who owns what
//!
//! - The `.ralph/` formats, the question, the answer and the loop's events belong to
//!   `ralph-protocol`; process groups, the guard and the orphan sweep to `ralph-process`. This
//!   crate uses them and re-exports neither: a caller names an item by its owner.
//! - The runner owns one run; nothing below it knows it exists. [`agents`] builds
//!   [`agent_spec::AgentSpec`]s, [`config`] reads `config.toml`, [`logs`] names and prunes
//!   `.ralph/logs/`, [`task`] parses the task file, [`prompt`] writes prompts, [`native`] and
//!   [`asks`] are the pure halves of the agent's questions, and [`notify`] tells a human a
//!   question waits: none of them imports the runner.
//!
//! The crate does no terminal I/O: front ends live in `ralph-ui`, the binary in `crates/cli`.

#![forbid(unsafe_code)]

pub mod agent_spec;
pub mod agents;
pub mod asks;
pub mod budget;
pub mod config;
pub mod logs;
pub mod native;
pub mod notify;
pub mod prompt;
pub mod runner;
pub mod sandbox;
pub mod task;
