//! Agent presets: how to run each coding-agent CLI unattended, read its stream, and resume its
//! session with a new message.
//!
//! A [`Preset`] is data: the program, its arguments as a template of [`Arg`]s, how the prompt
//! gets in, the [`StreamFormat`](ralph_signal::StreamFormat) of its output, and (for the CLIs
//! that have one) the template that continues a session. [`Preset::fresh`] and
//! [`Preset::resume`] fill the template in and give the runner an
//! [`Invocation`](crate::agent_spec::Invocation): a command for `sh -c` in which every piece
//! that came from outside (session id, model, the user's `agent_args`, a prompt passed as an
//! argument) is shell-quoted, so nothing in them is expanded or split. [`Preset::spec`] wraps
//! both into the runner's [`AgentSpec`](crate::agent_spec::AgentSpec).
//!
//! | preset | program | prompt | resume | format |
//! | --- | --- | --- | --- | --- |
//! | `claude` | `claude -p --output-format stream-json --verbose --dangerously-skip-permissions` | stdin | `--resume <id>` | Claude stream-json |
//! | `codex` | `codex exec --json --dangerously-bypass-approvals-and-sandbox --skip-git-repo-check … -` | stdin (`-`) | `… resume <id> -` | Codex JSONL |
//! | `cursor` | `cursor-agent -p --output-format stream-json --trust --force … <prompt>` | argv only | `--resume <id>` | Cursor stream-json |
//! | `gemini` | `gemini -o stream-json --yolo --skip-trust … -p <short text>` | stdin | `--resume <id>` | Gemini stream-json |
//! | `opencode` | `opencode run --format json --auto` | stdin | `--session <id>` | opencode JSON |
//! | `amp` | `amp -x --stream-json --dangerously-allow-all` | stdin | `amp threads continue <id> -x …` | Amp stream-json |
//! | `demo` | `<this ralph> __demo-agent` | stdin | no | plain text |
//!
//! Why each choice (from running Claude Code 2.1.197, Codex 0.169.0, Gemini CLI 0.61.0 and
//! opencode 1.18.33 against local mocks; Cursor and Amp from their docs and `--help`):
//!
//! - **The prompt goes on stdin**, never in argv: a prompt can pass the kernel's limit on one
//!   argument (128 KiB on Linux). The runner writes stdin and closes it; Codex and opencode
//!   wait for that end of file.
//! - **Cursor** takes the prompt only as an argument. Up to [`ARGV_PROMPT_MAX`] bytes it is
//!   passed whole (one quoted word); a longer prompt is replaced by a short sentence pointing
//!   at the prompt file (the file the runner also names in `$RALPH_PROMPT_FILE`), which the
//!   agent reads with its own tools. A prompt starting with `-` gets a leading space so that it
//!   cannot be read as a flag.
//! - **Gemini** runs headless only with `-p`; its text is appended after what stdin brings,
//!   so `-p` carries a short sentence and the prompt comes on stdin.
//! - **opencode** wraps a positional prompt containing spaces in quotes before sending it; on
//!   stdin it arrives verbatim.
//! - **Permissions** are unattended: each CLI's flag for "do not ask". Claude Code refuses
//!   `--dangerously-skip-permissions` as root unless `IS_SANDBOX=1` is set, so the `claude`
//!   preset sets it, **only when ralph runs as root** (a container).
//! - **Model**: `model:` in the task file becomes `--model <model>` (for Amp, which picks models
//!   by mode, `--mode <model>`: `low`, `medium`, `high`, `ultra`); the demo agent ignores it.
//! - **`agent_args`** are appended after the preset's own flags (before the prompt argument or
//!   the trailing `-`), each as one word. Codex's `resume` takes no `-s`/`-C`, so for Codex they
//!   go before `resume`.
//! - **Resume** reuses the session id the stream reported and must run in the same working
//!   directory (and, for Claude Code, the same `HOME`): sessions are stored per directory.
//!
//! Detection ([`detect`]) looks for the programs on `PATH` in the table's order: `claude`,
//! `codex`, `cursor-agent`, `gemini`, `opencode`, `amp`. The demo is never detected.

mod command;
mod login;
mod preset;
mod table;

pub use command::ARGV_PROMPT_MAX;
pub use login::login_rotates;
pub use preset::{Arg, Preset, Program, PromptVia, Unattended};
pub use table::{detect, find, presets};

#[cfg(test)]
mod tests;
