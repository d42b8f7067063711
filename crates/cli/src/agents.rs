//! Choosing the agent: `--agent-cmd`, `--agent NAME`, or `agent:` in the task file.
//!
//! A preset knows how to start an agent non-interactively with the prompt on stdin, and how to
//! read its output. Anything else is a command line run through `sh -c`, read as plain text.

use ralph_loop::runner::AgentSpec;
use ralph_signal::StreamFormat;

/// The presets, in the order ralph looks for them when no agent is given.
pub const PRESETS: &[(&str, &str)] = &[
    ("claude", "Claude Code (`claude -p`, stream-json output)"),
    ("demo", "the built-in demo agent (needs nothing installed)"),
];

/// Turns the user's choice into something the loop can start.
pub fn resolve(
    agent: Option<&str>,
    agent_cmd: Option<&str>,
    from_task: Option<&str>,
) -> Result<AgentSpec, String> {
    if let Some(cmd) = agent_cmd {
        return command(cmd);
    }
    let name = match agent.or(from_task) {
        Some(n) => n.trim(),
        None => return detect(),
    };
    match preset(name) {
        Some(spec) => Ok(spec),
        // `agent:` in the task file may be a whole command line.
        None if agent.is_none() && (name.contains(char::is_whitespace) || name.contains('/')) => {
            command(name)
        }
        None => Err(format!(
            "unknown agent preset '{name}'. The presets are: {}. For any other agent, pass the command that runs it: --agent-cmd \"my-agent --flags\"",
            PRESETS
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

fn command(cmd: &str) -> Result<AgentSpec, String> {
    if cmd.trim().is_empty() {
        return Err("--agent-cmd is empty: give the command that runs your agent, for example --agent-cmd \"my-agent --yes\"".into());
    }
    Ok(AgentSpec::command(
        cmd.split_whitespace().next().unwrap_or(cmd),
        cmd,
    ))
}

fn preset(name: &str) -> Option<AgentSpec> {
    match name {
        "demo" => {
            let exe = std::env::current_exe().ok()?;
            Some(AgentSpec::command(
                "demo",
                format!("{} __demo-agent", shell_quote(&exe.display().to_string())),
            ))
        }
        "claude" => Some(AgentSpec {
            format: StreamFormat::ClaudeStreamJson,
            ..AgentSpec::command(
                "claude",
                "claude -p --output-format stream-json --verbose --dangerously-skip-permissions",
            )
        }),
        _ => None,
    }
}

/// With no agent given: the first preset whose program is installed.
fn detect() -> Result<AgentSpec, String> {
    if which("claude") {
        return preset("claude").ok_or_else(String::new);
    }
    Err("no agent given and none found on PATH. Pass --agent-cmd \"my-agent --flags\", --agent demo to try ralph, or set `agent:` in RALPH_TASK.md".into())
}

fn which(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            let p = dir.join(program);
            std::fs::metadata(&p).is_ok_and(|m| m.is_file())
        })
    })
}

pub use ralph_loop::runner::shell_quote;
