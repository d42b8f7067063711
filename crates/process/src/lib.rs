//! ralph's process groups: every process ralph starts runs in a group of its own and is stopped
//! the same way, whoever stops it.
//!
//! # Theory of operation
//!
//! An agent (or a test command) is a shell command that may start anything. ralph starts it
//! as the leader of a new process group ([`spawn_shell`], [`stop_group`]; [`Group`] for an owner that reads the group's output while it stops), so one signal reaches its whole tree,
//! and stops it with one sequence: SIGTERM to the group, a grace period, SIGKILL, and rounds
//! for escapees. What leaves the group (`setsid`, a shell with job control) is found by the
//! [`sweep`]: every process ralph starts carries a mark in its environment, and on Linux
//! ralph is also the subreaper of everything it starts. Should ralph itself be killed
//! outright, the [`Guard`], a second small process, stops what is left.
//!
//! # Backends
//!
//! What the operating system says about a pid (alive, a zombie, when it started, its parent,
//! its group, its environment) is read in one place, the `sys` module ([`stat`], [`is_alive`]);
//! what changes in a directory (`.ralph/`, the registry) is learnt in one other, `watch`
//! ([`DirWatch`], [`DirsWatch`]). Each has two backends behind
//! one API: the Linux one (`/proc`, `PR_SET_CHILD_SUBREAPER`, inotify) and the portable one
//! (`sysinfo`, a walk of the process table, `notify`), built on every other target and, on
//! Linux, with the `portable` feature, so CI runs it too. [`BACKEND`] names the one
//! built.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod adopt;
mod command_line;
mod group;
mod guard;
mod orphans;
mod reader;
mod sandbox;
mod supervisor;
mod sys;
mod watch;

pub use adopt::{adopt, adopting, spawn};
pub use command_line::{command, direct_words, resolve, std_command};
pub use group::{Group, GroupDue, GroupState};
pub use guard::{Guard, GuardedRun, SavedTerminal, guard_main};
pub use orphans::{
    Cleared, RUN_VAR, Swept, group_is_ours, lineage_groups, mark_of, ralph_dir_value, run_id,
    run_mark, stop_and_sweep, stop_everywhere, sweep, terminate,
};
pub use reader::wait_until_reader_gone;
pub use sandbox::{
    AgentStdin as SandboxStdin, COMMAND_ENV as SANDBOX_COMMAND_ENV, Exec as SandboxExec,
    HELPER as SANDBOX_HELPER, POLICY_ENV as SANDBOX_POLICY_ENV, Policy as SandboxPolicy,
    Start as SandboxStart, Support as SandboxSupport, TEST_ABI_ENV as SANDBOX_TEST_ABI_ENV,
    main as sandbox_main, support as sandbox_support,
};
pub use supervisor::{
    Spawned, Stopped, Waiting, describe_exit, feed_stdin, group_alive, kill_group_now,
    live_members, spawn_shell, spawn_shell_open, spawn_waiting, stop_group, stop_group_blocking,
};
pub use sys::{
    BACKEND, ProcStat, SUBREAPER, gone_since, is_alive, is_executable, processes, started_at, stat,
};
pub use watch::{DirWatch, DirsWatch, watch_async, watch_blocking};
