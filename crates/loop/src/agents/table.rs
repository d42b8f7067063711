//! The presets themselves, in detection order, and finding one by name or on `PATH`.

use std::ffi::OsStr;

use ralph_signal::StreamFormat;

use super::preset::Arg::{Extra, Lit, Model, Prompt, Session};
use super::preset::{Preset, Program, PromptVia, Unattended};

/// What every coding-agent CLI's "do not ask" flag amounts to.
const ANY_COMMAND: &str = "can run any command and change any file you can, without asking";

/// What Gemini's `-p` says: the prompt itself comes on stdin, before this.
const GEMINI_P: &str = "Follow the instructions above.";

static PRESETS: [Preset; 8] = [
    Preset {
        name: "claude",
        about: "Claude Code (`claude -p`, stream-json)",
        program: Program::Path("claude"),
        format: StreamFormat::ClaudeStreamJson,
        prompt: PromptVia::Stdin,
        fresh_args: &[
            Lit("-p"),
            Lit("--output-format"),
            Lit("stream-json"),
            Lit("--verbose"),
            Lit("--dangerously-skip-permissions"),
            Model,
            Extra,
        ],
        resume_args: Some(&[
            Lit("-p"),
            Lit("--output-format"),
            Lit("stream-json"),
            Lit("--verbose"),
            Lit("--dangerously-skip-permissions"),
            Lit("--resume"),
            Session,
            Model,
            Extra,
        ]),
        model_flag: Some("--model"),
        env: &[],
        root_env: &[("IS_SANDBOX", "1")],
        native_questions: false,
        unattended: Some(Unattended {
            flag: "--dangerously-skip-permissions",
            allows: ANY_COMMAND,
        }),
    },
    Preset {
        name: "claude-sdk",
        about: "Claude Code as the Agent SDK drives it: its own AskUserQuestion tool, answered in ralph's panel",
        program: Program::Path("claude"),
        format: StreamFormat::ClaudeStreamJson,
        prompt: PromptVia::StreamJson,
        fresh_args: &[
            Lit("-p"),
            Lit("--input-format"),
            Lit("stream-json"),
            Lit("--output-format"),
            Lit("stream-json"),
            Lit("--verbose"),
            Lit("--permission-prompt-tool"),
            Lit("stdio"),
            Lit("--dangerously-skip-permissions"),
            Model,
            Extra,
        ],
        resume_args: Some(&[
            Lit("-p"),
            Lit("--input-format"),
            Lit("stream-json"),
            Lit("--output-format"),
            Lit("stream-json"),
            Lit("--verbose"),
            Lit("--permission-prompt-tool"),
            Lit("stdio"),
            Lit("--dangerously-skip-permissions"),
            Lit("--resume"),
            Session,
            Model,
            Extra,
        ]),
        model_flag: Some("--model"),
        env: &[],
        root_env: &[("IS_SANDBOX", "1")],
        native_questions: true,
        unattended: Some(Unattended {
            flag: "--dangerously-skip-permissions",
            allows: ANY_COMMAND,
        }),
    },
    Preset {
        name: "codex",
        about: "OpenAI Codex CLI (`codex exec --json`)",
        program: Program::Path("codex"),
        format: StreamFormat::CodexJson,
        prompt: PromptVia::Stdin,
        fresh_args: &[
            Lit("exec"),
            Lit("--json"),
            Lit("--dangerously-bypass-approvals-and-sandbox"),
            Lit("--skip-git-repo-check"),
            Model,
            Extra,
            Lit("-"),
        ],
        // `resume` takes no `-s`/`-C`: the exec flags (and the user's) go before it.
        resume_args: Some(&[
            Lit("exec"),
            Lit("--json"),
            Lit("--dangerously-bypass-approvals-and-sandbox"),
            Lit("--skip-git-repo-check"),
            Model,
            Extra,
            Lit("resume"),
            Session,
            Lit("-"),
        ]),
        model_flag: Some("--model"),
        env: &[],
        root_env: &[],
        native_questions: false,
        unattended: Some(Unattended {
            flag: "--dangerously-bypass-approvals-and-sandbox",
            allows: "can run any command and change any file you can, without asking and outside any sandbox",
        }),
    },
    Preset {
        name: "cursor",
        about: "Cursor CLI (`cursor-agent -p`, stream-json)",
        program: Program::Path("cursor-agent"),
        format: StreamFormat::CursorStreamJson,
        prompt: PromptVia::Argv,
        fresh_args: &[
            Lit("-p"),
            Lit("--output-format"),
            Lit("stream-json"),
            Lit("--trust"),
            Lit("--force"),
            Model,
            Extra,
            Prompt,
        ],
        resume_args: Some(&[
            Lit("-p"),
            Lit("--output-format"),
            Lit("stream-json"),
            Lit("--trust"),
            Lit("--force"),
            Lit("--resume"),
            Session,
            Model,
            Extra,
            Prompt,
        ]),
        model_flag: Some("--model"),
        env: &[],
        root_env: &[],
        native_questions: false,
        unattended: Some(Unattended {
            flag: "--force",
            allows: ANY_COMMAND,
        }),
    },
    Preset {
        name: "gemini",
        about: "Gemini CLI (`gemini -o stream-json`)",
        program: Program::Path("gemini"),
        format: StreamFormat::GeminiStreamJson,
        prompt: PromptVia::Stdin,
        fresh_args: &[
            Lit("-o"),
            Lit("stream-json"),
            Lit("--yolo"),
            Lit("--skip-trust"),
            Model,
            Extra,
            Lit("-p"),
            Lit(GEMINI_P),
        ],
        resume_args: Some(&[
            Lit("-o"),
            Lit("stream-json"),
            Lit("--yolo"),
            Lit("--skip-trust"),
            Lit("--resume"),
            Session,
            Model,
            Extra,
            Lit("-p"),
            Lit(GEMINI_P),
        ]),
        model_flag: Some("--model"),
        env: &[],
        root_env: &[],
        native_questions: false,
        unattended: Some(Unattended {
            flag: "--yolo",
            allows: ANY_COMMAND,
        }),
    },
    Preset {
        name: "opencode",
        about: "opencode (`opencode run --format json`)",
        program: Program::Path("opencode"),
        format: StreamFormat::OpencodeJson,
        prompt: PromptVia::Stdin,
        fresh_args: &[
            Lit("run"),
            Lit("--format"),
            Lit("json"),
            Lit("--auto"),
            Model,
            Extra,
        ],
        resume_args: Some(&[
            Lit("run"),
            Lit("--format"),
            Lit("json"),
            Lit("--auto"),
            Lit("--session"),
            Session,
            Model,
            Extra,
        ]),
        model_flag: Some("--model"),
        env: &[],
        root_env: &[],
        native_questions: false,
        unattended: Some(Unattended {
            flag: "--auto",
            allows: ANY_COMMAND,
        }),
    },
    Preset {
        name: "amp",
        about: "Amp (`amp -x --stream-json`; needs AMP_API_KEY)",
        program: Program::Path("amp"),
        format: StreamFormat::AmpStreamJson,
        prompt: PromptVia::Stdin,
        fresh_args: &[
            Lit("-x"),
            Lit("--stream-json"),
            Lit("--dangerously-allow-all"),
            Model,
            Extra,
        ],
        resume_args: Some(&[
            Lit("threads"),
            Lit("continue"),
            Session,
            Lit("-x"),
            Lit("--stream-json"),
            Lit("--dangerously-allow-all"),
            Model,
            Extra,
        ]),
        model_flag: Some("--mode"),
        env: &[],
        root_env: &[],
        native_questions: false,
        unattended: Some(Unattended {
            flag: "--dangerously-allow-all",
            allows: ANY_COMMAND,
        }),
    },
    Preset {
        name: "demo",
        about: "the built-in demo agent (needs nothing installed)",
        program: Program::Ralph,
        format: StreamFormat::Text,
        prompt: PromptVia::Stdin,
        fresh_args: &[Lit("__demo-agent")],
        resume_args: None,
        model_flag: None,
        env: &[],
        root_env: &[],
        native_questions: false,
        unattended: None,
    },
];

/// Every preset, in detection order (the demo last).
pub fn presets() -> &'static [Preset] {
    &PRESETS
}

/// The preset called `name`.
pub fn find(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

/// The first preset whose program is installed: an executable file of that name in a
/// directory of `path_env` (a `PATH` value), trying the presets in order.
pub fn detect(path_env: Option<&OsStr>) -> Option<&'static Preset> {
    PRESETS
        .iter()
        .find(|preset| preset.program != Program::Ralph && preset.missing(path_env).is_none())
}
