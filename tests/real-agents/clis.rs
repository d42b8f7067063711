//! What each real CLI needs to run offline against the mock: its program in
//! `target/real-agents/bin`, the config files in the scratch `HOME`, and the environment that
//! points it at the mock and switches its other traffic off. The facts behind each choice are
//! in the comments; each was measured with the pinned version `install.sh` installs.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A real CLI under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cli {
    /// Claude Code: the `claude` and `claude-sdk` presets.
    Claude,
    /// opencode: the `opencode` preset, over OpenAI Chat Completions.
    Opencode,
    /// Codex: the `codex` preset, over OpenAI Responses.
    Codex,
    /// Gemini CLI: the `gemini` preset, over the Gemini API.
    Gemini,
}

/// Variables a developer's own setup may carry that would point a CLI elsewhere.
const FOREIGN_ENV: &[&str] = &[
    "ANTHROPIC_",
    "CLAUDE_",
    "RALPH_",
    "OPENCODE_",
    "OPENAI_",
    "CODEX_",
    "GEMINI_",
    "GOOGLE_",
    "XDG_",
];

impl Cli {
    /// The program's name on `PATH`.
    pub fn program(self) -> &'static str {
        match self {
            Cli::Claude => "claude",
            Cli::Opencode => "opencode",
            Cli::Codex => "codex",
            Cli::Gemini => "gemini",
        }
    }

    /// The directory holding the program install.sh linked, checked to be there.
    pub fn bin_dir(self) -> PathBuf {
        let dir = std::env::var_os("REAL_AGENTS_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/real-agents")
            })
            .join("bin");
        let program = dir.join(self.program());
        assert!(
            program.exists(),
            "{} is missing: run tests/real-agents/install.sh first (`make e2e` does)",
            program.display()
        );
        dir
    }

    /// The version install.sh installed (the pin, or with `--latest` the newest release), from
    /// the `bin/<program>.version` it leaves.
    pub fn installed_version(self) -> String {
        let file = self.bin_dir().join(format!("{}.version", self.program()));
        std::fs::read_to_string(&file)
            .unwrap_or_else(|e| {
                panic!(
                    "{}: {e}; run tests/real-agents/install.sh again (`make e2e` does)",
                    file.display()
                )
            })
            .trim()
            .to_owned()
    }

    /// What `<program> --version` prints, run in a scratch `HOME`.
    pub fn version(self) -> String {
        let home = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(self.bin_dir().join(self.program()));
        scrub(&mut cmd);
        let out = cmd
            .arg("--version")
            .env("HOME", home.path())
            .env("TMPDIR", home.path())
            .env("DISABLE_AUTOUPDATER", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Writes the CLI's configuration into the scratch `home`, pointing it at the mock.
    pub fn configure(self, home: &Path, mock_url: &str) {
        match self {
            Cli::Claude => {}
            Cli::Opencode => {
                // A provider of our own: `@ai-sdk/openai-compatible` posts to
                // {baseURL}/chat/completions. The package is built into the binary: nothing is
                // installed from npm.
                let config = serde_json::json!({
                    "$schema": "https://opencode.ai/config.json",
                    "provider": {"mock": {
                        "npm": "@ai-sdk/openai-compatible",
                        "name": "Mock",
                        "options": {"baseURL": format!("{mock_url}/v1"), "apiKey": "mock-key"},
                        "models": {"mock-model": {"name": "Mock Model"}},
                    }},
                    "model": "mock/mock-model",
                    "small_model": "mock/mock-model",
                    "autoupdate": false,
                    "share": "disabled",
                });
                write(
                    &home.join(".config/opencode/opencode.json"),
                    &serde_json::to_string_pretty(&config).unwrap(),
                );
            }
            Cli::Codex => {
                // A provider of our own speaking Responses over plain HTTP SSE (the built-in
                // one tries a WebSocket first), posting to {base_url}/responses, without
                // retries. Plugins off: their sync calls github.com and chatgpt.com.
                let config = format!(
                    r#"model = "mock-model"
model_provider = "mock"
check_for_update_on_startup = false

[model_providers.mock]
name = "Mock Responses API"
base_url = "{mock_url}/v1"
env_key = "MOCK_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[features]
plugins = false

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"
"#
                );
                write(&home.join(".codex/config.toml"), &config);
            }
            Cli::Gemini => {
                // With only GOOGLE_GEMINI_BASE_URL the auth type is "gateway", which headless
                // mode refuses (exit 41). Usage statistics go to play.googleapis.com unless
                // switched off. A failed call is retried up to 10 times with backoff unless
                // maxAttempts says otherwise.
                let settings = serde_json::json!({
                    "security": {"auth": {"selectedType": "gemini-api-key"}},
                    "privacy": {"usageStatisticsEnabled": false},
                    "telemetry": {"enabled": false},
                    "general": {"disableAutoUpdate": true, "maxAttempts": 1},
                });
                write(
                    &home.join(".gemini/settings.json"),
                    &serde_json::to_string_pretty(&settings).unwrap(),
                );
            }
        }
    }

    /// Sets the environment that keeps the CLI offline and on the mock, with `home` as its
    /// `HOME` and `tmp` as its `TMPDIR`. `ralph` passes its environment on to the agent.
    pub fn env(self, cmd: &mut Command, home: &Path, tmp: &Path, mock_url: &str) {
        scrub(cmd);
        let path = std::env::join_paths(std::iter::once(self.bin_dir()).chain(
            std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
        ))
        .unwrap();
        // TMPDIR: Gemini CLI writes a report of every API error to the temporary directory.
        cmd.env("PATH", path)
            .env("HOME", home)
            .env("TMPDIR", tmp)
            .env("NO_COLOR", "1");
        match self {
            Cli::Claude => {
                cmd.env("ANTHROPIC_BASE_URL", mock_url)
                    .env("ANTHROPIC_API_KEY", "sk-test")
                    // Without these the CLI looks up and calls api.anthropic.com (and more).
                    .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
                    .env("DISABLE_TELEMETRY", "1")
                    .env("DISABLE_ERROR_REPORTING", "1")
                    .env("DISABLE_AUTOUPDATER", "1")
                    // As root, --dangerously-skip-permissions is refused without it.
                    .env("IS_SANDBOX", "1")
                    // A 5xx is otherwise retried 10 times with backoff.
                    .env("CLAUDE_CODE_MAX_RETRIES", "0")
                    // Since 2.1.33x a 400 is retried up to six times, the experimental beta
                    // headers dropped one by one, whatever CLAUDE_CODE_MAX_RETRIES says, unless
                    // the betas are off from the start.
                    .env("CLAUDE_CODE_DISABLE_EXPERIMENTAL_BETAS", "1");
            }
            Cli::Opencode => {
                // Its config, sessions (sqlite) and logs all live under these.
                cmd.env("XDG_CONFIG_HOME", home.join(".config"))
                    .env("XDG_DATA_HOME", home.join(".local/share"))
                    .env("XDG_CACHE_HOME", home.join(".cache"))
                    .env("XDG_STATE_HOME", home.join(".local/state"))
                    // Without these it calls models.opencode.ai, registry.npmjs.org and more.
                    .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
                    .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
                    .env("OPENCODE_DISABLE_SHARE", "1")
                    .env("OPENCODE_DISABLE_LSP_DOWNLOAD", "1")
                    .env("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1")
                    // Nothing from a Claude Code setup (~/.claude skills and prompts).
                    .env("OPENCODE_DISABLE_CLAUDE_CODE", "1");
            }
            Cli::Codex => {
                // Config, sessions (which `codex exec resume` reads) and logs.
                cmd.env("CODEX_HOME", home.join(".codex"))
                    .env("MOCK_API_KEY", "mock-key");
            }
            Cli::Gemini => {
                cmd.env("GOOGLE_GEMINI_BASE_URL", mock_url)
                    .env("GEMINI_API_KEY", "mock-key")
                    // A model of its own: the default, "auto", first asks a router model
                    // (`:generateContent`) for JSON, and retries for minutes on anything else.
                    .env("GEMINI_MODEL", "gemini-2.5-pro");
            }
        }
    }
}

/// Removes from `cmd`'s environment what a developer's own setup may carry ([`FOREIGN_ENV`]).
fn scrub(cmd: &mut Command) {
    for (name, _) in std::env::vars_os() {
        let n = name.to_string_lossy();
        if FOREIGN_ENV.iter().any(|prefix| n.starts_with(prefix)) {
            cmd.env_remove(&name);
        }
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}
