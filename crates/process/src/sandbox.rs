//! The agent's sandbox, as the rest of ralph uses it: the Landlock ruleset, the kernel's
//! support, and the small process that applies it and execs the agent. They live in the
//! `ralph-sandbox` crate (std and landlock only), whose binary starts once per agent start,
//! ahead of it.

pub use ralph_sandbox::{
    AgentStdin, COMMAND_ENV, Exec, HELPER, POLICY_ENV, Policy, Start, Support, TEST_ABI_ENV, main,
    support,
};
