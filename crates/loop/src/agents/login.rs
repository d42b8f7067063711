//! Whether an agent's login rotates: the warning `ralph doctor` and `ralph fleet` give before
//! many loops share one login.
//!
//! An OAuth login keeps a refresh token that is replaced each time it is used. One session
//! refreshing it is fine; ten sessions refreshing the same one race, and the losers are logged
//! out mid-run (anthropics/claude-code#88947 with 10-24 sessions; openai/codex#17340 "refresh
//! token was already used"). A credential that does not rotate (an API key, Claude Code's
//! `claude setup-token` token in `CLAUDE_CODE_OAUTH_TOKEN`) is safe for any number of loops.
//!
//! What is looked at (nothing is sent anywhere, and no secret is kept or shown):
//!
//! - **Claude Code**: `ANTHROPIC_API_KEY`, `ANTHROPIC_AUTH_TOKEN`, `CLAUDE_CODE_OAUTH_TOKEN` or
//!   the Bedrock/Vertex switches in the environment mean no rotating login is used. Otherwise
//!   the claude.ai login lives in `$CLAUDE_CONFIG_DIR/.credentials.json` (default
//!   `~/.claude/.credentials.json`) on Linux, as `{"claudeAiOauth": {"refreshToken": ...}}`.
//!   On macOS it is in the Keychain, which ralph does not open: there the warning says it
//!   cannot tell.
//! - **Codex**: `$CODEX_HOME/auth.json` (default `~/.codex/auth.json`) holds a ChatGPT login
//!   as `tokens.refresh_token`, and an API key login as `OPENAI_API_KEY` with no tokens.
//!
//! The file layouts are the CLIs' own, as documented by their users and tools (not read from
//! the CLIs' sources, nor from a real login on the machine these notes were written on); an
//! apiKeyHelper in Claude Code's settings, Gemini's Google login and the other agents' logins
//! are not looked at.

use std::path::{Path, PathBuf};

use ralph_signal::StreamFormat;

use crate::agent_spec::AgentSpec;

/// The largest credentials file read.
const MAX_CREDENTIALS_BYTES: u64 = 256 * 1024;

/// A warning when `agent`'s login is one that rotates (see the module docs); `None` when it
/// does not, or when ralph cannot tell for this agent.
pub fn login_rotates(agent: &AgentSpec) -> Option<String> {
    login_rotates_with(
        agent.format,
        |name| std::env::var(name).ok(),
        cfg!(target_os = "macos"),
    )
}

/// [`login_rotates`] for an agent read as `format`, with `env` for the environment; `keychain`
/// when the platform keeps Claude Code's login in a keychain.
pub(crate) fn login_rotates_with(
    format: StreamFormat,
    env: impl Fn(&str) -> Option<String>,
    keychain: bool,
) -> Option<String> {
    let set = |name: &str| env(name).is_some_and(|v| !v.is_empty());
    let home_dir = |var: &str, default: &str| -> Option<PathBuf> {
        env(var)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                env("HOME")
                    .filter(|h| !h.is_empty())
                    .map(|h| Path::new(&h).join(default))
            })
    };
    match format {
        StreamFormat::ClaudeStreamJson => {
            let keyed = [
                "ANTHROPIC_API_KEY",
                "ANTHROPIC_AUTH_TOKEN",
                "CLAUDE_CODE_OAUTH_TOKEN",
                "CLAUDE_CODE_USE_BEDROCK",
                "CLAUDE_CODE_USE_VERTEX",
            ];
            if keyed.iter().any(|v| set(v)) {
                return None;
            }
            let file = home_dir("CLAUDE_CONFIG_DIR", ".claude")?.join(".credentials.json");
            let rotates = read_json(&file).is_some_and(|creds| {
                creds["claudeAiOauth"]["refreshToken"]
                    .as_str()
                    .is_some_and(|t| !t.is_empty())
            });
            let fix = "for many loops at once use a credential that does not rotate: run `claude setup-token` and set CLAUDE_CODE_OAUTH_TOKEN to the token it prints, or set ANTHROPIC_API_KEY";
            if rotates {
                Some(format!(
                    "Claude Code is logged in with a claude.ai account ({}): that login's token is replaced each time it is refreshed, and many sessions refreshing it at once log each other out; {fix}",
                    file.display()
                ))
            } else if keychain {
                Some(format!(
                    "Claude Code keeps a claude.ai login in the macOS Keychain, which ralph does not open, so it cannot tell whether one is used here; such a login's token is replaced each time it is refreshed, and many sessions refreshing it at once log each other out; {fix}"
                ))
            } else {
                None
            }
        }
        StreamFormat::CodexJson => {
            let file = home_dir("CODEX_HOME", ".codex")?.join("auth.json");
            let auth = read_json(&file)?;
            let chatgpt = auth["tokens"]["refresh_token"]
                .as_str()
                .is_some_and(|t| !t.is_empty());
            chatgpt.then(|| {
                format!(
                    "Codex is logged in with ChatGPT ({}): its refresh token can be used only once, and many sessions refreshing it at once fail with \"refresh token was already used\"; for many loops at once log Codex in with an API key: `printenv OPENAI_API_KEY | codex login --with-api-key`",
                    file.display()
                )
            })
        }
        _ => None,
    }
}

/// A JSON file, when it is a plain readable file of reasonable size that parses.
fn read_json(path: &Path) -> Option<serde_json::Value> {
    use std::io::Read;
    let file = ralph_protocol::open_plain(std::fs::OpenOptions::new().read(true), path).ok()?;
    let mut raw = Vec::new();
    file.take(MAX_CREDENTIALS_BYTES)
        .read_to_end(&mut raw)
        .ok()?;
    serde_json::from_slice(&raw).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &Path)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.display().to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    fn home_with(file: &str, text: &str) -> tempfile::TempDir {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        home
    }

    const CLAUDE_LOGIN: &str = r#"{"claudeAiOauth":{"accessToken":"sk-ant-oat01-x","refreshToken":"sk-ant-ort01-y","expiresAt":1800000000000}}"#;

    #[test]
    fn a_claude_ai_login_rotates_and_the_warning_says_what_to_use_instead() {
        let home = home_with(".claude/.credentials.json", CLAUDE_LOGIN);
        let said = login_rotates_with(
            StreamFormat::ClaudeStreamJson,
            env(&[("HOME", home.path())]),
            false,
        )
        .unwrap();
        assert!(said.contains(".claude/.credentials.json"), "{said}");
        assert!(
            said.contains("claude setup-token") && said.contains("CLAUDE_CODE_OAUTH_TOKEN"),
            "{said}"
        );
        assert!(!said.contains("sk-ant"), "no secret in the warning: {said}");
        // CLAUDE_CONFIG_DIR moves the login.
        let moved = home_with("cfg/.credentials.json", CLAUDE_LOGIN);
        let cfg = moved.path().join("cfg");
        assert!(
            login_rotates_with(
                StreamFormat::ClaudeStreamJson,
                env(&[
                    ("HOME", Path::new("/nonexistent")),
                    ("CLAUDE_CONFIG_DIR", &cfg)
                ]),
                false
            )
            .is_some()
        );
    }

    #[test]
    fn a_key_or_setup_token_in_the_environment_is_safe_whatever_the_files_say() {
        let home = home_with(".claude/.credentials.json", CLAUDE_LOGIN);
        for var in [
            "ANTHROPIC_API_KEY",
            "CLAUDE_CODE_OAUTH_TOKEN",
            "ANTHROPIC_AUTH_TOKEN",
        ] {
            let said = login_rotates_with(
                StreamFormat::ClaudeStreamJson,
                env(&[("HOME", home.path()), (var, Path::new("k"))]),
                true,
            );
            assert_eq!(said, None, "{var}");
        }
    }

    #[test]
    fn no_login_file_is_no_warning_except_where_the_keychain_hides_it() {
        let home = tempfile::tempdir().unwrap();
        let vars = [("HOME", home.path())];
        assert_eq!(
            login_rotates_with(StreamFormat::ClaudeStreamJson, env(&vars), false),
            None
        );
        let mac = login_rotates_with(StreamFormat::ClaudeStreamJson, env(&vars), true).unwrap();
        assert!(mac.contains("cannot tell"), "{mac}");
        // Junk in the credentials file is no login.
        let junk = home_with(".claude/.credentials.json", "{not json");
        assert_eq!(
            login_rotates_with(
                StreamFormat::ClaudeStreamJson,
                env(&[("HOME", junk.path())]),
                false
            ),
            None
        );
    }

    #[test]
    fn codex_s_chatgpt_login_rotates_and_its_api_key_login_does_not() {
        let chatgpt = home_with(
            ".codex/auth.json",
            r#"{"OPENAI_API_KEY":null,"tokens":{"id_token":"a","access_token":"b","refresh_token":"c","account_id":"d"},"last_refresh":"2026-11-01T00:00:00Z"}"#,
        );
        let said = login_rotates_with(
            StreamFormat::CodexJson,
            env(&[("HOME", chatgpt.path())]),
            false,
        )
        .unwrap();
        assert!(said.contains("codex login --with-api-key"), "{said}");
        let keyed = home_with(".codex/auth.json", r#"{"OPENAI_API_KEY":"sk-x"}"#);
        assert_eq!(
            login_rotates_with(
                StreamFormat::CodexJson,
                env(&[("HOME", keyed.path())]),
                false
            ),
            None
        );
        // CODEX_HOME moves it.
        let codex_home = chatgpt.path().join(".codex");
        assert!(
            login_rotates_with(
                StreamFormat::CodexJson,
                env(&[
                    ("HOME", Path::new("/nonexistent")),
                    ("CODEX_HOME", &codex_home)
                ]),
                false
            )
            .is_some()
        );
        // Other agents: nothing is known, nothing is said.
        assert_eq!(
            login_rotates_with(
                StreamFormat::GeminiStreamJson,
                env(&[("HOME", chatgpt.path())]),
                true
            ),
            None
        );
    }
}
