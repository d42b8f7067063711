//! A preset filled in: the command line of a fresh run or a resumed session, every piece that
//! came from outside shell-quoted, as the runner's [`Invocation`].

use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;

use ralph_process::is_executable;
use ralph_protocol::shell_quote;
use ralph_signal::StreamFormat;

use super::preset::Arg::{Extra, Lit, Model, Prompt, Resume, Session};
use super::preset::{Preset, Program, PromptVia};
use crate::agent_spec::{AgentSpec, FreshFn, Invocation, ResumeFn};

/// Longest prompt passed whole as an argument (Cursor), in bytes: well under Linux's 128 KiB
/// limit on one argument, leaving room for the environment.
pub const ARGV_PROMPT_MAX: usize = 32 * 1024;

/// What the user adds to a preset: `agent_args` and `model` from the task file.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Options<'a> {
    pub(super) extra_args: &'a [String],
    pub(super) model: Option<&'a str>,
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
        self.invocation(None, prompt, prompt_file, options)
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
        self.can_resume()
            .then(|| self.invocation(Some(session_id), message, prompt_file, options))
    }

    /// How its stdout is decoded.
    pub fn format(&self) -> StreamFormat {
        self.format
    }

    /// Whether it can continue a session with a new message.
    pub fn can_resume(&self) -> bool {
        self.resume.is_some()
    }

    /// The runner's [`AgentSpec`] for this preset with the task's `agent_args` and `model`.
    pub fn spec(&'static self, extra_args: Vec<String>, model: Option<String>) -> AgentSpec {
        let extra_args = Arc::new(extra_args);
        let model = model.map(Arc::<str>::from);
        let fresh: FreshFn = {
            let (extra_args, model) = (Arc::clone(&extra_args), model.clone());
            Arc::new(move |prompt, file| self.fresh(prompt, file, &extra_args, model.as_deref()))
        };
        let resume = self.resume.map(|_| -> ResumeFn {
            Arc::new(move |session, message, file| {
                let options = Options {
                    extra_args: &extra_args,
                    model: model.as_deref(),
                };
                self.invocation(Some(session), message, file, options)
            })
        });
        AgentSpec {
            name: self.name.to_owned(),
            format: self.format,
            fresh,
            resume,
        }
    }

    /// The words of the command line, unquoted: the program, then its arguments filled in (a
    /// resumed run's with `session`).
    pub(super) fn words(
        &self,
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
        let resume = session.and(self.resume).unwrap_or_default();
        let args = self.args.iter().flat_map(|arg| match arg {
            Resume => resume,
            arg => std::slice::from_ref(arg),
        });
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
                // Replaced by the resume words above.
                Resume => {}
            }
        }
        words
    }

    fn invocation(
        &self,
        session: Option<&str>,
        prompt: &str,
        prompt_file: &Path,
        options: Options<'_>,
    ) -> Invocation {
        let words = self.words(session, prompt, prompt_file, options);
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

pub(super) fn running_as_root() -> bool {
    nix::unistd::geteuid().is_root()
}
