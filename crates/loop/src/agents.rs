//! Agent presets: how to run each coding-agent CLI unattended, read its stream, and resume its
//! session with a new message.
//!
//! A [`Preset`] is data: the program, its arguments as a template of [`Arg`]s, how the prompt
//! gets in, the [`StreamFormat`] of its output, and (for the CLIs that have one) the template
//! that continues a session. [`Preset::fresh`] and [`Preset::resume`] fill the template in and
//! give the runner an [`Invocation`]: a command for `sh -c` in which every piece that came
//! from outside (session id, model, the user's `agent_args`, a prompt passed as an argument) is
//! shell-quoted, so nothing in them is expanded or split. [`Preset::spec`] wraps both into the
//! runner's [`AgentSpec`].
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

use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;

use ralph_signal::StreamFormat;

use crate::agent_spec::{AgentSpec, FreshFn, Invocation, ResumeFn};
use ralph_process::sys::is_executable;
use ralph_protocol::text::shell_quote;

/// One piece of a preset's command-line template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    /// This word, as it is.
    Lit(&'static str),
    /// The id of the session to resume.
    Session,
    /// The preset's model flag and the model, when a model is set; nothing otherwise.
    Model,
    /// The user's extra arguments (`agent_args`), each as one word.
    Extra,
    /// The prompt (or a pointer to its file), for a CLI that takes it only as an argument.
    Prompt,
}

/// How the prompt reaches the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptVia {
    /// Written to stdin, which is then closed.
    Stdin,
    /// As an argument ([`Arg::Prompt`]); stdin gets nothing.
    Argv,
    /// As a stream-json user message on stdin, which stays open: the agent asks its host
    /// (ralph) before using tools, and ralph answers on stdin ([`crate::native`]).
    StreamJson,
}

/// The program a preset runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Program {
    /// A program looked up on `PATH`.
    Path(&'static str),
    /// The running ralph executable itself (the demo agent).
    Ralph,
}

/// How to run one coding-agent CLI: see the module docs.
#[derive(Debug)]
pub struct Preset {
    /// The name in `--agent NAME` and `agent:`.
    pub name: &'static str,
    /// What it is, for help and error messages.
    pub about: &'static str,
    /// The program to run (and to detect on `PATH`).
    pub program: Program,
    /// How its stdout is decoded.
    pub format: StreamFormat,
    /// How the prompt gets in.
    pub prompt: PromptVia,
    /// The arguments of a fresh run.
    pub fresh_args: &'static [Arg],
    /// The arguments that continue a session with a new message; `None` if it cannot.
    pub resume_args: Option<&'static [Arg]>,
    /// The flag that selects the model; `None` if a model cannot be chosen.
    pub model_flag: Option<&'static str>,
    /// Extra environment variables, always.
    pub env: &'static [(&'static str, &'static str)],
    /// Extra environment variables when ralph runs as root.
    pub root_env: &'static [(&'static str, &'static str)],
    /// Whether the CLI can ask a structured question headless (Claude Code's AskUserQuestion,
    /// over `--input-format stream-json`); the others ask with `<ralph>QUESTION</ralph>`.
    pub native_questions: bool,
    /// Its flag for "do not ask", and what that lets the agent do; `None` for the demo agent.
    pub unattended: Option<Unattended>,
}

/// A preset's "do not ask" flag, in plain words: every run says it on its first lines, so
/// nobody starts an agent that may run any command without knowing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unattended {
    /// The flag as it appears on the command line.
    pub flag: &'static str,
    /// What it lets the agent do, as a clause after "it".
    pub allows: &'static str,
}

/// What every coding-agent CLI's "do not ask" flag amounts to.
const ANY_COMMAND: &str = "can run any command and change any file you can, without asking";

use Arg::{Extra, Lit, Model, Prompt, Session};

/// Longest prompt passed whole as an argument (Cursor), in bytes: well under Linux's 128 KiB
/// limit on one argument, leaving room for the environment.
pub const ARGV_PROMPT_MAX: usize = 32 * 1024;

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

/// What the user adds to a preset: `agent_args` and `model` from the task file.
#[derive(Debug, Clone, Copy, Default)]
struct Options<'a> {
    extra_args: &'a [String],
    model: Option<&'a str>,
}

impl Preset {
    /// Its program's name when it cannot be started: no executable file of that name in a
    /// directory of `path_env` (a `PATH` value). Never for ralph's own demo agent.
    pub fn missing(&self, path_env: Option<&OsStr>) -> Option<&'static str> {
        let Program::Path(program) = self.program else {
            return None;
        };
        self.locate(path_env).is_none().then_some(program)
    }

    /// Where its program is: the first executable file of that name in a directory of
    /// `path_env`. `None` for ralph's own demo agent, and when it is not installed.
    pub fn locate(&self, path_env: Option<&OsStr>) -> Option<std::path::PathBuf> {
        let Program::Path(program) = self.program else {
            return None;
        };
        std::env::split_paths(path_env?)
            .map(|dir| dir.join(program))
            .find(|p| is_executable(p))
    }

    /// A fresh run with `prompt` (whose text is also in `prompt_file`).
    pub fn fresh(
        &self,
        prompt: &str,
        prompt_file: &Path,
        extra_args: &[String],
        model: Option<&str>,
    ) -> Invocation {
        let options = Options { extra_args, model };
        self.invocation(self.fresh_args, None, prompt, prompt_file, options)
    }

    /// A run that continues `session_id` with `message` (whose text is also in `prompt_file`);
    /// `None` if the CLI cannot resume.
    pub fn resume(
        &self,
        session_id: &str,
        message: &str,
        prompt_file: &Path,
        extra_args: &[String],
        model: Option<&str>,
    ) -> Option<Invocation> {
        let options = Options { extra_args, model };
        let args = self.resume_args?;
        Some(self.invocation(args, Some(session_id), message, prompt_file, options))
    }

    /// How its stdout is decoded.
    pub fn format(&self) -> StreamFormat {
        self.format
    }

    /// Whether it can continue a session with a new message.
    pub fn can_resume(&self) -> bool {
        self.resume_args.is_some()
    }

    /// The runner's [`AgentSpec`] for this preset with the task's `agent_args` and `model`.
    pub fn spec(&'static self, extra_args: Vec<String>, model: Option<String>) -> AgentSpec {
        let extra_args = Arc::new(extra_args);
        let model = model.map(Arc::<str>::from);
        let fresh: FreshFn = {
            let (extra_args, model) = (Arc::clone(&extra_args), model.clone());
            Arc::new(move |prompt, file| self.fresh(prompt, file, &extra_args, model.as_deref()))
        };
        let resume = self.resume_args.map(|args| -> ResumeFn {
            Arc::new(move |session, message, file| {
                let options = Options {
                    extra_args: &extra_args,
                    model: model.as_deref(),
                };
                self.invocation(args, Some(session), message, file, options)
            })
        });
        AgentSpec {
            name: self.name.to_owned(),
            format: self.format,
            fresh,
            resume,
        }
    }

    /// The words of the command line, unquoted: the program, then `args` filled in.
    fn words(
        &self,
        args: &[Arg],
        session: Option<&str>,
        prompt: &str,
        prompt_file: &Path,
        options: Options<'_>,
    ) -> Vec<String> {
        let mut words = vec![match self.program {
            Program::Path(program) => program.to_owned(),
            Program::Ralph => std::env::current_exe()
                .map(|exe| exe.display().to_string())
                .unwrap_or_else(|_| "ralph".to_owned()),
        }];
        for arg in args {
            match arg {
                Lit(word) => words.push((*word).to_owned()),
                Session => words.push(session.unwrap_or_default().to_owned()),
                Model => {
                    if let (Some(flag), Some(model)) = (self.model_flag, options.model) {
                        words.extend([flag.to_owned(), model.to_owned()]);
                    }
                }
                Extra => words.extend(options.extra_args.iter().cloned()),
                Prompt => words.push(argv_prompt(prompt, prompt_file)),
            }
        }
        words
    }

    fn invocation(
        &self,
        args: &[Arg],
        session: Option<&str>,
        prompt: &str,
        prompt_file: &Path,
        options: Options<'_>,
    ) -> Invocation {
        let words = self.words(args, session, prompt, prompt_file, options);
        let command = words
            .iter()
            .map(|w| shell_quote(w))
            .collect::<Vec<_>>()
            .join(" ");
        let mut env: Vec<(String, String)> = self
            .env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        if running_as_root() {
            env.extend(
                self.root_env
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
            );
        }
        Invocation {
            command,
            stdin: match self.prompt {
                PromptVia::Stdin => Some(prompt.as_bytes().to_vec()),
                PromptVia::Argv => None,
                PromptVia::StreamJson => Some(crate::native::user_message(prompt).into_bytes()),
            },
            env,
            conversation: self.prompt == PromptVia::StreamJson,
        }
    }
}

/// The prompt as one argument: whole when short, else a pointer to the file that holds it.
fn argv_prompt(prompt: &str, prompt_file: &Path) -> String {
    if prompt.len() > ARGV_PROMPT_MAX || prompt.contains('\0') {
        let file = std::path::absolute(prompt_file).unwrap_or_else(|_| prompt_file.to_owned());
        return format!(
            "Your instructions are in the file {}: read all of it and follow it.",
            file.display()
        );
    }
    if prompt.starts_with('-') {
        // So that the CLI cannot take it for a flag.
        format!(" {prompt}")
    } else {
        prompt.to_owned()
    }
}

fn running_as_root() -> bool {
    nix::unistd::geteuid().is_root()
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::process::Command;

    use super::*;

    /// A prompt, id, model and arguments that a shell would mangle if any went unquoted.
    const NASTY: &str = "it's \"quoted\" $(touch pwned) `touch pwned2` $HOME\n; rm -rf / &\\ *";

    /// Runs `command` under `sh -c` with its program replaced by `printf '%s\0'`: the words
    /// the program would have received. Fails if the shell expanded anything.
    fn words_seen(command: &str, program: &str) -> Vec<String> {
        let rest = command
            .strip_prefix(program)
            .unwrap_or_else(|| panic!("{command:?} does not start with {program:?}"));
        let dir = tempfile::tempdir().unwrap();
        let output = Command::new("sh")
            .arg("-c")
            .arg(format!("printf '%s\\0' {rest}"))
            .current_dir(dir.path())
            .env("HOME", "/home/expanded")
            .output()
            .unwrap();
        assert!(output.status.success(), "{command}: {output:?}");
        assert!(
            std::fs::read_dir(dir.path()).unwrap().next().is_none(),
            "the command created a file: {command}"
        );
        let out = String::from_utf8(output.stdout).unwrap();
        let mut words: Vec<String> = out.split('\0').map(str::to_owned).collect();
        assert_eq!(words.pop().as_deref(), Some(""));
        words
    }

    fn program_word(preset: &Preset) -> String {
        match preset.program {
            Program::Path(p) => p.to_owned(),
            Program::Ralph => shell_quote(&std::env::current_exe().unwrap().display().to_string()),
        }
    }

    fn extra() -> Vec<String> {
        vec!["--flag".to_owned(), NASTY.to_owned(), String::new()]
    }

    /// The flag a run's first lines name is the one the preset really passes: every coding
    /// agent's "do not ask" flag is said, and only the demo has none.
    #[test]
    fn every_preset_s_unattended_flag_is_one_it_passes() {
        for preset in presets() {
            match preset.unattended {
                Some(u) => assert!(
                    preset.fresh_args.contains(&Lit(u.flag))
                        && preset
                            .resume_args
                            .is_none_or(|args| args.contains(&Lit(u.flag))),
                    "{}: {}",
                    preset.name,
                    u.flag
                ),
                None => assert_eq!(preset.program, Program::Ralph, "{}", preset.name),
            }
        }
    }

    #[test]
    fn every_preset_quotes_everything_that_came_from_outside() {
        let file = PathBuf::from("/tmp/ralph test/.ralph/logs/iter-0001.prompt.md");
        for preset in presets() {
            let program = program_word(preset);
            let fresh = preset.fresh(NASTY, &file, &extra(), Some(NASTY));
            let words = words_seen(&fresh.command, &program);
            let want = preset.words(
                preset.fresh_args,
                None,
                NASTY,
                &file,
                Options {
                    extra_args: &extra(),
                    model: Some(NASTY),
                },
            );
            assert_eq!(words, want[1..], "{}: {}", preset.name, fresh.command);
            if preset.name != "demo" {
                assert!(
                    words.windows(3).any(|w| w == ["--flag", NASTY, ""]),
                    "{}: extra args kept whole and in order: {words:?}",
                    preset.name
                );
                assert!(
                    words.iter().any(|w| w == NASTY),
                    "{}: model passed",
                    preset.name
                );
            }
            match preset.prompt {
                PromptVia::Stdin => {
                    assert_eq!(fresh.stdin.as_deref(), Some(NASTY.as_bytes()));
                }
                PromptVia::Argv => {
                    assert_eq!(fresh.stdin, None);
                    assert_eq!(words.last().map(String::as_str), Some(NASTY));
                }
                PromptVia::StreamJson => {
                    let line = String::from_utf8(fresh.stdin.clone().unwrap()).unwrap();
                    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
                    assert_eq!(
                        v["message"]["content"], NASTY,
                        "the prompt, whole, as a user message"
                    );
                    assert!(fresh.conversation, "stdin stays open for the host protocol");
                }
            }

            let resumed = preset.resume(NASTY, NASTY, &file, &extra(), Some(NASTY));
            assert_eq!(resumed.is_some(), preset.can_resume(), "{}", preset.name);
            if let Some(resumed) = resumed {
                let words = words_seen(&resumed.command, &program);
                assert!(
                    words.iter().filter(|w| *w == NASTY).count() >= 2,
                    "{}: session id and model each one word: {words:?}",
                    preset.name
                );
            }
        }
    }

    #[test]
    fn fresh_and_resume_commands_are_what_each_cli_expects() {
        let file = Path::new("/w/.ralph/logs/iter-0003.prompt.md");
        let args = vec!["--max-turns".to_owned(), "5".to_owned()];
        let cmd = |name: &str| {
            let p = find(name).unwrap();
            let fresh = p.fresh("Fix it", file, &args, Some("big")).command;
            let resume = p
                .resume("S-1", "Use Redis", file, &args, Some("big"))
                .map(|i| i.command);
            (fresh, resume)
        };
        assert_eq!(
            cmd("claude"),
            (
                "claude -p --output-format stream-json --verbose --dangerously-skip-permissions --model big --max-turns 5".into(),
                Some("claude -p --output-format stream-json --verbose --dangerously-skip-permissions --resume S-1 --model big --max-turns 5".into())
            )
        );
        assert_eq!(
            cmd("codex"),
            (
                "codex exec --json --dangerously-bypass-approvals-and-sandbox --skip-git-repo-check --model big --max-turns 5 -".into(),
                Some("codex exec --json --dangerously-bypass-approvals-and-sandbox --skip-git-repo-check --model big --max-turns 5 resume S-1 -".into())
            )
        );
        assert_eq!(
            cmd("cursor"),
            (
                "cursor-agent -p --output-format stream-json --trust --force --model big --max-turns 5 'Fix it'".into(),
                Some("cursor-agent -p --output-format stream-json --trust --force --resume S-1 --model big --max-turns 5 'Use Redis'".into())
            )
        );
        assert_eq!(
            cmd("gemini"),
            (
                "gemini -o stream-json --yolo --skip-trust --model big --max-turns 5 -p 'Follow the instructions above.'".into(),
                Some("gemini -o stream-json --yolo --skip-trust --resume S-1 --model big --max-turns 5 -p 'Follow the instructions above.'".into())
            )
        );
        assert_eq!(
            cmd("opencode"),
            (
                "opencode run --format json --auto --model big --max-turns 5".into(),
                Some(
                    "opencode run --format json --auto --session S-1 --model big --max-turns 5"
                        .into()
                )
            )
        );
        assert_eq!(
            cmd("amp"),
            (
                "amp -x --stream-json --dangerously-allow-all --mode big --max-turns 5".into(),
                Some("amp threads continue S-1 -x --stream-json --dangerously-allow-all --mode big --max-turns 5".into())
            )
        );
        let (demo, demo_resume) = cmd("demo");
        assert!(demo.ends_with(" __demo-agent"), "{demo}");
        assert_eq!(demo_resume, None);
    }

    #[test]
    fn stdin_presets_send_the_prompt_on_stdin_and_resume_sends_the_message() {
        let file = Path::new("p.md");
        for preset in presets().iter().filter(|p| p.prompt == PromptVia::Stdin) {
            let fresh = preset.fresh("the prompt", file, &[], None);
            assert_eq!(fresh.stdin.as_deref(), Some(&b"the prompt"[..]));
            assert!(!fresh.command.contains("the prompt"), "{}", preset.name);
            if let Some(resumed) = preset.resume("id", "the answer", file, &[], None) {
                assert_eq!(resumed.stdin.as_deref(), Some(&b"the answer"[..]));
            }
        }
    }

    /// Cursor takes the prompt only in argv: a long one would pass the kernel's limit on one
    /// argument, so it points to the prompt file instead.
    #[test]
    fn cursor_points_to_the_prompt_file_when_the_prompt_is_long() {
        let cursor = find("cursor").unwrap();
        let file = Path::new("/w/.ralph/logs/it's.prompt.md");
        let long = "x".repeat(ARGV_PROMPT_MAX + 1);
        let run = cursor.fresh(&long, file, &[], None);
        assert!(run.command.len() < 1024, "{}", run.command);
        let words = words_seen(&run.command, "cursor-agent");
        assert_eq!(
            words.last().unwrap(),
            "Your instructions are in the file /w/.ralph/logs/it's.prompt.md: read all of it and follow it."
        );
        let flag_like = cursor.fresh("--help me", file, &[], None);
        let words = words_seen(&flag_like.command, "cursor-agent");
        assert_eq!(words.last().unwrap(), " --help me");
    }

    #[test]
    fn claude_gets_is_sandbox_only_as_root() {
        let claude = find("claude").unwrap();
        let env = claude.fresh("p", Path::new("p"), &[], None).env;
        let want: Vec<(String, String)> = if running_as_root() {
            vec![("IS_SANDBOX".into(), "1".into())]
        } else {
            Vec::new()
        };
        assert_eq!(env, want);
        for other in presets().iter().filter(|p| !p.name.starts_with("claude")) {
            assert!(other.fresh("p", Path::new("p"), &[], None).env.is_empty());
        }
    }

    #[test]
    fn presets_are_found_by_name_and_list_in_detection_order() {
        let names: Vec<&str> = presets().iter().map(|p| p.name).collect();
        assert_eq!(
            names,
            [
                "claude",
                "claude-sdk",
                "codex",
                "cursor",
                "gemini",
                "opencode",
                "amp",
                "demo"
            ]
        );
        assert_eq!(find("codex").unwrap().format(), StreamFormat::CodexJson);
        assert!(find("nope").is_none());
        let native: Vec<&str> = presets()
            .iter()
            .filter(|p| p.native_questions)
            .map(|p| p.name)
            .collect();
        assert_eq!(native, ["claude-sdk"]);
    }

    fn touch(dir: &Path, name: &str, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(name);
        std::fs::write(&path, b"").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn detection_takes_the_first_installed_preset_in_order() {
        let root = tempfile::tempdir().unwrap();
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let path =
            std::env::join_paths([a.as_path(), Path::new("/nonexistent"), b.as_path()]).unwrap();
        let detected = || detect(Some(&path)).map(|p| p.name);

        assert_eq!(detected(), None);
        assert_eq!(detect(None).map(|p| p.name), None);
        // Not executable, or not a file: not installed.
        touch(&a, "claude", 0o644);
        std::fs::create_dir(b.join("codex")).unwrap();
        assert_eq!(detected(), None);

        touch(&b, "amp", 0o755);
        assert_eq!(detected(), Some("amp"));
        touch(&a, "opencode", 0o755);
        assert_eq!(detected(), Some("opencode"));
        touch(&b, "gemini", 0o700);
        assert_eq!(detected(), Some("gemini"));
        touch(&a, "cursor-agent", 0o755);
        assert_eq!(detected(), Some("cursor"));
        touch(&b, "codex-cli", 0o755);
        assert_eq!(detected(), Some("cursor"));
        std::fs::remove_dir(b.join("codex")).unwrap();
        touch(&b, "codex", 0o755);
        assert_eq!(detected(), Some("codex"));
        touch(&b, "claude", 0o755);
        assert_eq!(detected(), Some("claude"));
        // The demo agent is built in: never "detected", whatever is on PATH.
        touch(&a, "demo", 0o755);
        touch(&a, "__demo-agent", 0o755);
        assert_eq!(detected(), Some("claude"));
    }

    #[test]
    fn spec_builds_the_same_invocations() {
        let claude = find("claude").unwrap();
        let spec = claude.spec(vec!["--x".into()], Some("m".into()));
        assert_eq!(spec.name, "claude");
        assert_eq!(spec.format, StreamFormat::ClaudeStreamJson);
        let file = Path::new("f");
        assert_eq!(
            (spec.fresh)("p", file),
            claude.fresh("p", file, &["--x".into()], Some("m"))
        );
        let resume = spec.resume.as_ref().unwrap();
        assert_eq!(
            resume("s", "msg", file),
            claude
                .resume("s", "msg", file, &["--x".into()], Some("m"))
                .unwrap()
        );
        assert!(
            find("demo")
                .unwrap()
                .spec(Vec::new(), None)
                .resume
                .is_none()
        );
    }
}
