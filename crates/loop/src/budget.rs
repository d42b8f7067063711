//! The loop's side of the machine-wide budget: which agent account a loop uses, and the
//! fleet it belongs to.
//!
//! The files are `ralph_protocol::budget`'s; the runner reads and writes them (before each
//! iteration, and after one that hit a rate limit or cost money). This module says what they
//! are keyed by.
//!
//! # "The same agent"
//!
//! A rate limit is the provider's, on one account: two loops share a limit exactly when their
//! requests go to the same service with the same credential. ralph cannot see the account, so
//! it keys a limit by what picks it, all of which the agent inherits from ralph's environment:
//!
//! - the **service**, from how the agent's output is read: Claude Code (the `claude` and
//!   `claude-sdk` presets, or any `--agent-format claude` command), Codex, Gemini, Cursor,
//!   opencode, Amp; a plain-text command is its own service, named by its program;
//! - the service's **endpoint and credential** variables ([`credential_vars`]): for Claude Code
//!   `ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY`, `ANTHROPIC_AUTH_TOKEN`,
//!   `CLAUDE_CODE_OAUTH_TOKEN`, the Bedrock and Vertex switches, and `CLAUDE_CONFIG_DIR`
//!   (where a login lives); for Codex `CODEX_HOME`, `OPENAI_API_KEY`, `CODEX_API_KEY`; ...;
//!   and `HOME`, under which every CLI keeps its login.
//!
//! Their values are hashed (SHA-256, 16 hex digits kept: `ralph_protocol::budget::limits::AgentKey`),
//! so no secret reaches the disk. Two loops of Claude Code with the same login pause together;
//! a loop pointed at another base URL, or with another API key, or of another agent, does not.
//! The model is not part of the key: a subscription's limits span its models, and waiting when
//! one model's limit would have allowed another costs minutes, where retrying into a shared
//! limit costs failures.

use ralph_protocol::{
    budget::fleet::FLEET_ENV, budget::fleet::FLEET_MAX_COST_ENV, budget::fleet::check_fleet_id,
    budget::limits::AgentKey,
};
use ralph_signal::StreamFormat;

use crate::agent_spec::AgentSpec;

/// The variables that pick the endpoint and the credential of an agent read as `format`.
pub fn credential_vars(format: StreamFormat) -> &'static [&'static str] {
    match format {
        StreamFormat::ClaudeStreamJson => &[
            "ANTHROPIC_BASE_URL",
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_AUTH_TOKEN",
            "CLAUDE_CODE_OAUTH_TOKEN",
            "CLAUDE_CODE_USE_BEDROCK",
            "CLAUDE_CODE_USE_VERTEX",
            "CLAUDE_CONFIG_DIR",
            "HOME",
        ],
        StreamFormat::CodexJson => &[
            "CODEX_HOME",
            "OPENAI_API_KEY",
            "CODEX_API_KEY",
            "OPENAI_BASE_URL",
            "HOME",
        ],
        StreamFormat::GeminiStreamJson => &[
            "GOOGLE_GEMINI_BASE_URL",
            "GEMINI_API_KEY",
            "GOOGLE_API_KEY",
            "GOOGLE_CLOUD_PROJECT",
            "GOOGLE_GENAI_USE_VERTEXAI",
            "HOME",
        ],
        StreamFormat::CursorStreamJson => &["CURSOR_API_KEY", "CURSOR_API_ENDPOINT", "HOME"],
        StreamFormat::AmpStreamJson => &["AMP_API_KEY", "AMP_URL", "HOME"],
        // opencode picks its provider from its config, and its keys from there or the usual
        // variables.
        StreamFormat::OpencodeJson => &[
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "XDG_CONFIG_HOME",
            "XDG_DATA_HOME",
            "HOME",
        ],
        StreamFormat::Text => &["HOME"],
    }
}

/// The account `agent` uses, as the limits are keyed (see the module docs); `env` reads a
/// variable of the environment the agent runs in.
pub fn agent_key(agent: &AgentSpec, env: impl Fn(&str) -> Option<String>) -> AgentKey {
    let service = match agent.format {
        StreamFormat::Text => format!("text-{}", program_name(&agent.name)),
        format => format.name().to_string(),
    };
    let values: Vec<(&str, Option<String>)> = credential_vars(agent.format)
        .iter()
        .map(|&name| (name, env(name).filter(|v| !v.is_empty())))
        .collect();
    let mut parts: Vec<(&str, Option<&str>)> =
        values.iter().map(|(n, v)| (*n, v.as_deref())).collect();
    if agent.format == StreamFormat::Text {
        // Any command's account is its own: the same program with the same home.
        parts.push(("program", Some(&agent.name)));
    }
    AgentKey::new(&service, &parts)
}

/// The service's name for people: `Claude Code`, `Codex`, ...; a plain-text command's program.
pub fn service_name(agent: &AgentSpec) -> String {
    match agent.format {
        StreamFormat::ClaudeStreamJson => "Claude Code".into(),
        StreamFormat::CodexJson => "Codex".into(),
        StreamFormat::GeminiStreamJson => "Gemini CLI".into(),
        StreamFormat::CursorStreamJson => "Cursor CLI".into(),
        StreamFormat::AmpStreamJson => "Amp".into(),
        StreamFormat::OpencodeJson => "opencode".into(),
        StreamFormat::Text => program_name(&agent.name).to_string(),
    }
}

/// The last part of a command's first word, for a readable file name (`my-agent`).
fn program_name(word: &str) -> &str {
    let word = word.trim_matches(|c| c == '\'' || c == '"');
    word.rsplit('/').next().unwrap_or(word)
}

/// The fleet a loop belongs to, and the fleet's cap.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetBudget {
    /// The fleet's id (`RALPH_FLEET`).
    pub id: String,
    /// The most the fleet's loops may cost together, in US dollars (`RALPH_FLEET_MAX_COST_USD`).
    pub max_cost_usd: Option<f64>,
}

impl FleetBudget {
    /// The fleet `ralph fleet` started this loop in, from `RALPH_FLEET` and
    /// `RALPH_FLEET_MAX_COST_USD` as `env` reads them; `None` outside a fleet. An error says
    /// which variable is wrong and how.
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> Result<Option<FleetBudget>, String> {
        let id = env(FLEET_ENV).filter(|v| !v.is_empty());
        let cap = env(FLEET_MAX_COST_ENV).filter(|v| !v.is_empty());
        let Some(id) = id else {
            return match cap {
                Some(_) => Err(format!(
                    "{FLEET_MAX_COST_ENV} is set but {FLEET_ENV} is not: the cap is a fleet's; set {FLEET_ENV} to the fleet's id, or use max_cost_usd in the task file for one loop"
                )),
                None => Ok(None),
            };
        };
        check_fleet_id(&id).map_err(|e| e.to_string())?;
        let max_cost_usd = match cap {
            None => None,
            Some(text) => Some(
                text.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|c| c.is_finite() && *c >= 0.0)
                    .ok_or_else(|| {
                        format!(
                            "{FLEET_MAX_COST_ENV}={text:?} is not a cost: give US dollars as a number, e.g. 5 or 12.50"
                        )
                    })?,
            ),
        };
        Ok(Some(FleetBudget { id, max_cost_usd }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    fn spec(name: &str, format: StreamFormat) -> AgentSpec {
        AgentSpec {
            format,
            ..AgentSpec::command(name, name)
        }
    }

    #[test]
    fn loops_of_one_claude_login_share_a_key_whatever_their_command() {
        let home = [("HOME", "/home/me")];
        let preset = agent_key(&spec("claude", StreamFormat::ClaudeStreamJson), env(&home));
        let custom = agent_key(
            &spec("'/opt/fake-claude'", StreamFormat::ClaudeStreamJson),
            env(&home),
        );
        assert_eq!(preset, custom);
        assert!(preset.as_str().starts_with("claude-"), "{preset:?}");
        // Variables of other services do not matter to Claude's account.
        let with_openai = agent_key(
            &spec("claude", StreamFormat::ClaudeStreamJson),
            env(&[("HOME", "/home/me"), ("OPENAI_API_KEY", "sk-o")]),
        );
        assert_eq!(preset, with_openai);
        // An empty variable is an unset one.
        let empty = agent_key(
            &spec("claude", StreamFormat::ClaudeStreamJson),
            env(&[("HOME", "/home/me"), ("ANTHROPIC_API_KEY", "")]),
        );
        assert_eq!(preset, empty);
    }

    #[test]
    fn another_endpoint_credential_home_or_agent_is_another_account() {
        let claude = spec("claude", StreamFormat::ClaudeStreamJson);
        let base = agent_key(&claude, env(&[("HOME", "/home/me")]));
        let others = [
            agent_key(
                &claude,
                env(&[
                    ("HOME", "/home/me"),
                    ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9"),
                ]),
            ),
            agent_key(
                &claude,
                env(&[("HOME", "/home/me"), ("ANTHROPIC_API_KEY", "k")]),
            ),
            agent_key(
                &claude,
                env(&[("HOME", "/home/me"), ("CLAUDE_CODE_OAUTH_TOKEN", "t")]),
            ),
            agent_key(&claude, env(&[("HOME", "/home/you")])),
            agent_key(
                &spec("codex", StreamFormat::CodexJson),
                env(&[("HOME", "/home/me")]),
            ),
            agent_key(
                &spec("my-agent", StreamFormat::Text),
                env(&[("HOME", "/home/me")]),
            ),
        ];
        for other in &others {
            assert_ne!(&base, other);
        }
        let text = agent_key(&spec("'/usr/bin/my-agent'", StreamFormat::Text), env(&[]));
        assert!(text.as_str().starts_with("text-my-agent-"), "{text:?}");
    }

    #[test]
    fn the_fleet_comes_from_its_two_variables_and_bad_values_are_named() {
        assert_eq!(FleetBudget::from_env(env(&[])), Ok(None));
        assert_eq!(
            FleetBudget::from_env(env(&[("RALPH_FLEET", "f1")])),
            Ok(Some(FleetBudget {
                id: "f1".into(),
                max_cost_usd: None
            }))
        );
        assert_eq!(
            FleetBudget::from_env(env(&[
                ("RALPH_FLEET", "f1"),
                ("RALPH_FLEET_MAX_COST_USD", "12.5")
            ])),
            Ok(Some(FleetBudget {
                id: "f1".into(),
                max_cost_usd: Some(12.5)
            }))
        );
        for (vars, says) in [
            (
                &[("RALPH_FLEET", "f1"), ("RALPH_FLEET_MAX_COST_USD", "ten")][..],
                "RALPH_FLEET_MAX_COST_USD=\"ten\" is not a cost",
            ),
            (
                &[("RALPH_FLEET", "f1"), ("RALPH_FLEET_MAX_COST_USD", "-1")][..],
                "is not a cost",
            ),
            (&[("RALPH_FLEET", "../up")][..], "is not a fleet id"),
            (
                &[("RALPH_FLEET_MAX_COST_USD", "5")][..],
                "RALPH_FLEET is not",
            ),
        ] {
            let err = FleetBudget::from_env(env(vars)).unwrap_err();
            assert!(err.contains(says), "{err}");
        }
    }
}
