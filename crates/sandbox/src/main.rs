//! `ralph-sandbox`: applies the agent's Landlock ruleset to itself and execs the agent
//! ([`ralph_sandbox::main`]). Started by `ralph run` only: once per agent start, ahead of it.

fn main() {
    std::process::exit(ralph_sandbox::main());
}
