//! Choosing the agent: `--agent-cmd`, `--agent NAME`, or `agent:` in the task file.
//!
//! The presets (how to run Claude Code, Codex, Cursor, Gemini, opencode, Amp and the demo
//! agent) are data in [`ralph_loop::agents`]. Anything else is a command line run through
//! `sh -c` with the prompt on stdin, read as plain text.

use ralph_loop::agent_spec::AgentSpec;
use ralph_loop::agents::{self, Preset};

/// The agent to run, and how it was chosen when nobody said.
#[derive(Debug)]
pub struct Resolved {
    /// What the loop starts.
    pub spec: AgentSpec,
    /// Set when no agent was given and one was found on `PATH`: a line saying which.
    pub detected: Option<String>,
    /// The preset, when it is one (not `--agent-cmd` or a command line in `agent:`).
    pub preset: Option<&'static Preset>,
    /// The command line, when it is not a preset.
    pub command: Option<String>,
    /// Which agent runs and, in plain words, what its flags let it do: for the run's first
    /// lines.
    pub allows: String,
}

impl Resolved {
    fn preset(preset: &'static Preset, spec: AgentSpec, detected: Option<String>) -> Self {
        let allows = match preset.unattended {
            Some(u) => format!("{} runs with {}: it {}", preset.name, u.flag, u.allows),
            None => format!("{} runs: {}", preset.name, preset.about),
        };
        Resolved {
            spec,
            detected,
            preset: Some(preset),
            command: None,
            allows,
        }
    }

    fn command(cmd: &str) -> Result<Self, String> {
        Ok(Resolved {
            spec: command(cmd)?,
            detected: None,
            preset: None,
            command: Some(cmd.trim().to_owned()),
            allows: format!(
                "the agent runs as `{}`, as you: it can do whatever that command allows itself; ralph does not limit it",
                cmd.trim()
            ),
        })
    }
}

/// Turns the user's choice into something the loop can start.
///
/// - `agent_cmd` (`--agent-cmd`): any command line, read as plain text;
/// - else `agent` (`--agent NAME`): a preset;
/// - else `from_task` (`agent:`): a preset name, or a command line (it has a space or a `/`);
/// - else the first preset installed on `PATH`, in [`agents::presets`] order.
///
/// `agent_args` and `model` (from the task file) apply to presets; a command line is run as
/// given. The error is the message for the user (exit 2).
pub fn resolve_with(
    agent: Option<&str>,
    agent_cmd: Option<&str>,
    from_task: Option<&str>,
    agent_args: &[String],
    model: Option<&str>,
) -> Result<Resolved, String> {
    let path = std::env::var_os("PATH");
    resolve_in(
        agent,
        agent_cmd,
        from_task,
        agent_args,
        model,
        path.as_deref(),
    )
}

/// [`resolve_with`], the programs looked up in `path` (a `PATH` value).
fn resolve_in(
    agent: Option<&str>,
    agent_cmd: Option<&str>,
    from_task: Option<&str>,
    agent_args: &[String],
    model: Option<&str>,
    path: Option<&std::ffi::OsStr>,
) -> Result<Resolved, String> {
    let spec = |preset: &'static Preset| preset.spec(agent_args.to_vec(), model.map(str::to_owned));
    if let Some(cmd) = agent_cmd {
        return Resolved::command(cmd);
    }
    let Some(name) = agent.or(from_task).map(str::trim) else {
        return match agents::detect(path) {
            Some(preset) => Ok(Resolved::preset(
                preset,
                spec(preset),
                Some(format!(
                    "no agent given: using {} ({}), the first found on PATH",
                    preset.name, preset.about
                )),
            )),
            None => Err(format!(
                "no agent given and none found on PATH (looked for {}). Pass --agent-cmd \"my-agent --flags\" or set `agent:` in RALPH_TASK.md; to try ralph first, run `ralph demo`, which works in a directory of its own",
                searched()
            )),
        };
    };
    match agents::find(name) {
        // Refused before anything runs. Regression: every iteration failed at once (`sh`:
        // not found, exit 127), and the loop went through all of them in milliseconds.
        Some(preset) => match preset.missing(path) {
            Some(program) => Err(format!(
                "agent preset '{name}' runs `{program}`, which is not on PATH. Install it, or add the directory that holds it to PATH"
            )),
            None => Ok(Resolved::preset(preset, spec(preset), None)),
        },
        // `agent:` in the task file may be a whole command line.
        None if agent.is_none() && (name.contains(char::is_whitespace) || name.contains('/')) => {
            Resolved::command(name)
        }
        None => {
            let presets: Vec<&str> = choosable().map(|p| p.name).collect();
            let hint = match ralph_loop::task::nearest(name, &presets) {
                Some(near) => format!(" Did you mean {near}?"),
                None => String::new(),
            };
            Err(format!(
                "unknown agent preset '{name}'.{hint} The presets are: {}. For any other agent, pass the command that runs it: --agent-cmd \"my-agent --flags\"",
                names()
            ))
        }
    }
}

/// The presets a user may pick for their own task: not the demo's agent, which works only on
/// the demo's task (`ralph demo`).
fn choosable() -> impl Iterator<Item = &'static agents::Preset> {
    agents::presets()
        .iter()
        .filter(|p| p.program != agents::Program::Ralph)
}

/// The preset names a user may pick, comma-separated, for messages.
pub fn names() -> String {
    choosable().map(|p| p.name).collect::<Vec<_>>().join(", ")
}

/// The programs detection looks for, in order.
fn searched() -> String {
    let mut programs: Vec<&str> = Vec::new();
    // Two presets may run the same program (`claude` and `claude-sdk`): name it once.
    for preset in agents::presets() {
        if let agents::Program::Path(program) = preset.program
            && !programs.contains(&program)
        {
            programs.push(program);
        }
    }
    programs.join(", ")
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A `PATH` of one directory holding an executable `claude` and `codex`.
    fn fake_path() -> (tempfile::TempDir, std::ffi::OsString) {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        for program in ["claude", "codex"] {
            let path = dir.path().join(program);
            std::fs::write(&path, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let path = dir.path().as_os_str().to_owned();
        (dir, path)
    }

    #[test]
    fn a_preset_whose_program_is_not_on_path_is_refused() {
        let (_dir, path) = fake_path();
        let with = |name| resolve_in(Some(name), None, None, &[], None, Some(&path));
        assert_eq!(with("codex").unwrap().spec.name, "codex");
        let err = with("gemini").unwrap_err();
        assert!(
            err.contains("agent preset 'gemini' runs `gemini`, which is not on PATH"),
            "{err}"
        );
        // The same for `agent:` in the task file, and with no PATH at all.
        let err = resolve_in(None, None, Some("opencode"), &[], None, None).unwrap_err();
        assert!(err.contains("`opencode`, which is not on PATH"), "{err}");
        // ralph's own demo agent needs nothing on PATH.
        assert!(resolve_in(Some("demo"), None, None, &[], None, None).is_ok());
    }

    #[test]
    fn presets_commands_and_unknown_names() {
        let (_dir, path) = fake_path();
        let spec = resolve_in(Some("codex"), None, None, &[], None, Some(&path))
            .unwrap()
            .spec;
        assert_eq!(spec.name, "codex");
        assert!(spec.resume.is_some());
        let resolve =
            |agent, cmd, task| resolve_in(agent, cmd, task, &[], None, None).map(|r| r.spec);
        let spec = resolve(None, None, Some("my-agent --yes")).unwrap();
        assert_eq!(spec.name, "my-agent");
        let spec = resolve(Some("demo"), Some("custom --flag"), None).unwrap();
        assert_eq!(spec.name, "custom");
        let err = resolve(Some("clade"), None, None).unwrap_err();
        assert!(
            err.contains(
                "The presets are: claude, claude-sdk, codex, cursor, gemini, opencode, amp. "
            ),
            "{err}"
        );
        // The demo's agent is refused outside the demo: neither listed nor suggested.
        let err = resolve(Some("dem"), None, None).unwrap_err();
        assert!(!err.contains("demo"), "{err}");
        let err = resolve(Some("cladue"), None, None).unwrap_err();
        assert!(
            err.starts_with("unknown agent preset 'cladue'. Did you mean claude? "),
            "{err}"
        );
        let err = resolve(Some("opencod"), None, None).unwrap_err();
        assert!(err.contains("Did you mean opencode?"), "{err}");
        let err = resolve(Some("vim"), None, None).unwrap_err();
        assert!(!err.contains("Did you mean"), "{err}");
        // `--agent` is always a preset name, never a command line.
        assert!(resolve(Some("my agent"), None, None).is_err());
        assert!(resolve(None, Some("  "), None).is_err());
    }

    #[test]
    fn task_args_and_model_reach_the_preset() {
        let (_dir, path) = fake_path();
        let resolved = resolve_in(
            None,
            None,
            Some("claude"),
            &["--max-turns".into(), "5".into()],
            Some("opus"),
            Some(&path),
        )
        .unwrap();
        let run = (resolved.spec.fresh)("prompt", std::path::Path::new("p.md"));
        assert!(
            run.command.ends_with("--model opus --max-turns 5"),
            "{}",
            run.command
        );
        assert_eq!(resolved.detected, None);
    }
}
