//! The presets themselves, in detection order, and finding one by name or on `PATH`.

use std::ffi::OsStr;

use ralph_signal::StreamFormat;

use super::preset::Arg::{Extra, Lit, Model, Prompt, Resume, Session};
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
        args: &[
            Lit("-p"),
            Lit("--output-format"),
            Lit("stream-json"),
            Lit("--verbose"),
            Lit("--dangerously-skip-permissions"),
            Resume,
            Model,
            Extra,
        ],
        resume: Some(&[Lit("--resume"), Session]),
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
        args: &[
            Lit("-p"),
            Lit("--input-format"),
            Lit("stream-json"),
            Lit("--output-format"),
            Lit("stream-json"),
            Lit("--verbose"),
            Lit("--permission-prompt-tool"),
            Lit("stdio"),
            Lit("--dangerously-skip-permissions"),
            Resume,
            Model,
            Extra,
        ],
        resume: Some(&[Lit("--resume"), Session]),
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
        args: &[
            Lit("exec"),
            Lit("--json"),
            Lit("--dangerously-bypass-approvals-and-sandbox"),
            Lit("--skip-git-repo-check"),
            Model,
            Extra,
            Resume,
            Lit("-"),
        ],
        // `resume` takes no `-s`/`-C`: the exec flags (and the user's) go before it.
        resume: Some(&[Lit("resume"), Session]),
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
        args: &[
            Lit("-p"),
            Lit("--output-format"),
            Lit("stream-json"),
            Lit("--trust"),
            Lit("--force"),
            Resume,
            Model,
            Extra,
            Prompt,
        ],
        resume: Some(&[Lit("--resume"), Session]),
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
        args: &[
            Lit("-o"),
            Lit("stream-json"),
            Lit("--yolo"),
            Lit("--skip-trust"),
            Resume,
            Model,
            Extra,
            Lit("-p"),
            Lit(GEMINI_P),
        ],
        resume: Some(&[Lit("--resume"), Session]),
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
        args: &[
            Lit("run"),
            Lit("--format"),
            Lit("json"),
            Lit("--auto"),
            Resume,
            Model,
            Extra,
        ],
        resume: Some(&[Lit("--session"), Session]),
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
        args: &[
            Resume,
            Lit("-x"),
            Lit("--stream-json"),
            Lit("--dangerously-allow-all"),
            Model,
            Extra,
        ],
        resume: Some(&[Lit("threads"), Lit("continue"), Session]),
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
        args: &[Lit("__demo-agent")],
        resume: None,
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
