//! The task file, `RALPH_TASK.md`: what the agent should do and how ralph should run it.
//!
//! A task file is YAML frontmatter between two `---` lines, then a markdown body:
//!
//! ```text
//! ---
//! task: Add a session cache to the API server
//! max_iterations: 20
//! test_command: cargo test --quiet
//! ---
//! # Session cache
//! - [ ] Cache hits skip the database
//! - [x] Config has a cache section
//! ```
//!
//! The frontmatter holds the task and the harness settings (see [`TaskFile`] for each key and
//! its default; `RALPH_TASK.md.example` at the repository root documents them for users).
//! The body's checkboxes are the completion criteria the loop checks ([`parse_criteria`]).
//!
//! # How a file is read
//!
//! [`TaskFile::load`] refuses what is not a readable regular file of at most
//! [`FILE_SIZE_LIMIT`] bytes, then [`TaskFile::parse`] (pure) does, in order:
//!
//! 1. `frontmatter::decode`: UTF-8 check, byte order mark dropped.
//! 2. `frontmatter::split`: the `---` lines, with a specific message for each near miss.
//! 3. `yaml::read`: the YAML, read with visitors that check each value as serde_yaml_ng
//!    visits it, so every error has the value's own line and column.
//! 4. `ralph_protocol::parse_criteria`: the checklist, with pulldown-cmark.
//!
//! Every [`TaskError`] reads `path:line:column: what is wrong. How to fix it`. Unknown keys
//! are not errors: they become [`TaskWarning`]s with a "did you mean" when one is close.
//!
//! # Limits
//!
//! The file may be up to [`FILE_SIZE_LIMIT`] (16 MiB, so a 10 MB body is fine); the
//! frontmatter up to [`FRONTMATTER_SIZE_LIMIT`] (256 KiB) and [`MAX_FLOW_NESTING`] levels of
//! `[`/`{`. The last two bound the time libyaml can spend on hostile YAML; see `yaml`.

mod error;
mod frontmatter;
mod key;
mod keys;
mod limits;
mod near_miss;
mod wait;
mod yaml;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ralph_protocol::{Criterion, LandMode, parse_criteria};
use serde::{Deserialize, Serialize};

pub use error::{Problem, TaskError, TaskWarning, WarningKind};
pub use key::{CONFIG_KEYS, Key, nearest};
pub use limits::{FILE_SIZE_LIMIT, FRONTMATTER_SIZE_LIMIT, MAX_FLOW_NESTING};
pub use wait::{MAX_DURATION, OnQuestionTimeout, Wait, parse_limit, parse_wait};

/// The largest `max_iterations` and `max_consecutive_failures`.
pub const MAX_COUNT: u32 = 1_000_000;

/// `max_iterations` when the file does not say.
pub const DEFAULT_MAX_ITERATIONS: u32 = 10;

/// `question_timeout` when the file does not say: 5 minutes.
pub const DEFAULT_QUESTION_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// `iteration_timeout` when the file does not say: 30 minutes.
pub const DEFAULT_ITERATION_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// `test_timeout` when the file does not say: 10 minutes.
pub const DEFAULT_TEST_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// `max_consecutive_failures` when the file does not say.
pub const DEFAULT_MAX_CONSECUTIVE_FAILURES: u32 = 3;

/// A parsed, checked task file.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskFile {
    /// Where it was read from, as given.
    pub path: PathBuf,
    /// `task`: what the agent should do. Required, not empty.
    pub task: String,
    /// `completion_criteria`: extra criteria written in the frontmatter. Default: none.
    pub completion_criteria: Vec<String>,
    /// `max_iterations`: how many times the agent may run, 1 to [`MAX_COUNT`]. Default 10.
    pub max_iterations: u32,
    /// `test_command`: a shell command that must pass before the task counts as done.
    pub test_command: Option<String>,
    /// `agent`: a preset name or a command line. Default: chosen by the harness.
    pub agent: Option<String>,
    /// `agent_args`: extra arguments for the agent.
    pub agent_args: Vec<String>,
    /// `model`: the model to ask the agent for.
    pub model: Option<String>,
    /// `question_timeout`: how long a question waits for an answer. Default 5m.
    pub question_timeout: Wait,
    /// `iteration_timeout`: how long one agent run may take. Default 30m.
    pub iteration_timeout: Wait,
    /// `test_timeout`: how long `test_command` may take. Default 10m.
    pub test_timeout: Duration,
    /// `on_question_timeout`: what happens when a question times out. Default `continue`.
    pub on_question_timeout: OnQuestionTimeout,
    /// `max_consecutive_failures`: failed runs in a row before ralph stops. Default 3.
    pub max_consecutive_failures: u32,
    /// `max_cost_usd`: stop once the agent reports spending this much. Default: no limit.
    pub max_cost_usd: Option<f64>,
    /// How to get the user's attention.
    pub notify: NotifySettings,
    /// `sandbox`, `sandbox_write`, `sandbox_read`, `sandbox_net`: the agent's sandbox (see
    /// [`crate::sandbox`]). Default: on where the kernel can, writing only the project.
    pub sandbox: crate::sandbox::SandboxSettings,
    /// Checkpoints, worktrees and landing.
    pub git: GitSettings,
    /// The checkboxes of the body.
    pub criteria: Vec<Criterion>,
    /// The markdown after the closing `---` line.
    pub body: String,
    /// Things ralph ignored that the author may not have meant, such as unknown keys.
    pub warnings: Vec<TaskWarning>,
    /// The frontmatter keys the file gives a value (not `null`): what the user's config file
    /// may not override.
    pub given: Vec<Key>,
    /// Where each top-level key is written, for messages about its value.
    positions: HashMap<String, (usize, usize)>,
}

/// Checkpoints, worktrees and landing (docs/checkpoints-and-landing.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitSettings {
    /// `checkpoints`: a checkpoint of the work tree after every iteration. Default true.
    pub checkpoints: bool,
    /// `worktree`: run in a git worktree of its own, as `ralph run --worktree`. Default false.
    pub worktree: bool,
    /// `worktree_setup`: a shell command run once in a new worktree (`npm ci`).
    pub worktree_setup: Option<String>,
    /// `land`: what happens after a verified DONE in a worktree. Default `manual`.
    pub land: LandMode,
    /// `land_with`: how the loop's branch goes onto the target. Default `rebase`.
    pub land_with: LandWith,
    /// `land_attempts`: how many times a failed landing goes back to the agent. Default 2.
    pub land_attempts: u32,
}

impl Default for GitSettings {
    fn default() -> GitSettings {
        GitSettings {
            checkpoints: true,
            worktree: false,
            worktree_setup: None,
            land: LandMode::Manual,
            land_with: LandWith::Rebase,
            land_attempts: 2,
        }
    }
}

/// `land_with`: how the loop's branch is combined with the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LandWith {
    /// Rebase the loop's commits onto the target's tip (a straight history).
    Rebase,
    /// A merge commit.
    Merge,
}

/// How ralph gets the user's attention when a question or the end of the loop needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotifySettings {
    /// `bell`: ring the terminal bell. Default true.
    pub bell: bool,
    /// `desktop_notification`: show a desktop notification. Default true.
    pub desktop_notification: bool,
    /// `notify_command`: a shell command to run as well.
    pub notify_command: Option<String>,
    /// `webhook_url`: an http(s) URL to post to as well.
    pub webhook_url: Option<String>,
}

impl Default for NotifySettings {
    fn default() -> NotifySettings {
        NotifySettings {
            bell: true,
            desktop_notification: true,
            notify_command: None,
            webhook_url: None,
        }
    }
}

impl TaskFile {
    /// Reads and parses the task file at `path`.
    ///
    /// Besides what [`TaskFile::parse`] checks, refuses a missing or unreadable file, a
    /// directory (also through a symlink), a pipe or device, and a file over
    /// [`FILE_SIZE_LIMIT`].
    pub fn load(path: &Path) -> Result<TaskFile, TaskError> {
        let bytes = read_capped(path)?;
        TaskFile::parse(path, &bytes)
    }

    /// Parses task-file contents; `path` is only used in messages and kept in the result.
    pub fn parse(path: &Path, contents: &[u8]) -> Result<TaskFile, TaskError> {
        let invalid = |(line, column, problem)| TaskError::Invalid {
            path: path.to_owned(),
            line,
            column,
            problem,
        };
        if contents.len() as u64 > FILE_SIZE_LIMIT {
            return Err(TaskError::TooLarge {
                path: path.to_owned(),
                size: contents.len() as u64,
            });
        }
        let text = frontmatter::decode(contents).map_err(invalid)?;
        let parts = frontmatter::split(text).map_err(invalid)?;
        let yaml::Frontmatter {
            settings,
            unknown,
            positions,
        } = yaml::read(parts.yaml, parts.yaml_first_line).map_err(invalid)?;
        let Some(task) = settings.task else {
            // A misspelt `task:` is the likeliest cause: point at it.
            let misspelt = unknown
                .iter()
                .find(|(key, ..)| Key::suggest(key) == Some(Key::Task));
            return Err(invalid(match misspelt {
                Some((key, line, column)) => (
                    *line,
                    *column,
                    Problem::MissingTask {
                        misspelt: Some(key.clone()),
                    },
                ),
                None => (1, 1, Problem::MissingTask { misspelt: None }),
            }));
        };
        let criteria = parse_criteria(parts.body, parts.body_first_line);
        let nothing_to_check =
            (criteria.is_empty() && settings.test_command.is_none()).then(|| TaskWarning {
                path: path.to_owned(),
                line: parts.body_first_line,
                column: 1,
                kind: WarningKind::NothingToCheck {
                    listed_criteria: !settings.completion_criteria.is_empty(),
                },
            });
        let mut criteria_lines: Vec<usize> = criteria.iter().map(|c| c.line).collect();
        criteria_lines.sort_unstable();
        let near_misses =
            near_miss::near_misses(parts.body, parts.body_first_line, &criteria_lines)
                .into_iter()
                .map(|(line, fixed)| TaskWarning {
                    path: path.to_owned(),
                    line,
                    column: 1,
                    kind: WarningKind::NotACheckbox { fixed },
                });
        let warnings = unknown
            .into_iter()
            .map(|(key, line, column)| TaskWarning {
                path: path.to_owned(),
                line,
                column,
                kind: WarningKind::UnknownKey {
                    suggestion: Key::suggest(&key),
                    key,
                },
            })
            .chain(near_misses)
            .chain(nothing_to_check)
            .collect();
        Ok(TaskFile {
            path: path.to_owned(),
            task,
            completion_criteria: settings.completion_criteria,
            max_iterations: settings.max_iterations,
            test_command: settings.test_command,
            agent: settings.agent,
            agent_args: settings.agent_args,
            model: settings.model,
            question_timeout: settings.question_timeout,
            iteration_timeout: settings.iteration_timeout,
            test_timeout: settings.test_timeout,
            on_question_timeout: settings.on_question_timeout,
            max_consecutive_failures: settings.max_consecutive_failures,
            max_cost_usd: settings.max_cost_usd,
            notify: settings.notify,
            sandbox: settings.sandbox,
            git: settings.git,
            criteria,
            body: parts.body.to_owned(),
            warnings,
            given: settings.given,
            positions,
        })
    }

    /// The line and column where `key` is written, when the file has it at the top level.
    pub fn position(&self, key: Key) -> Option<(usize, usize)> {
        self.positions.get(key.name()).copied()
    }

    /// A warning when `test_command` names a program that is not on `PATH` (`path_var`): the
    /// tests could never pass, and every DONE would be rejected for it. Only a command that
    /// needs no shell, run by its bare name, is looked up: `./check.sh` may be the agent's to
    /// write, and a shell line may define what it runs.
    pub fn test_command_warning(&self, path_var: Option<&std::ffi::OsStr>) -> Option<TaskWarning> {
        let words = ralph_process::direct_words(self.test_command.as_deref()?)?;
        let program = words.first()?;
        if program.contains('/') {
            return None;
        }
        let missing = ralph_process::resolve(program, Path::new("."), path_var)
            .err()
            .is_some_and(|e| e.kind() == io::ErrorKind::NotFound);
        let (line, column) = self.position(Key::TestCommand).unwrap_or((1, 1));
        missing.then(|| TaskWarning {
            path: self.path.clone(),
            line,
            column,
            kind: WarningKind::TestCommandNotFound {
                program: program.clone(),
            },
        })
    }

    /// The body's criteria whose box is not ticked yet.
    pub fn unchecked(&self) -> impl Iterator<Item = &Criterion> {
        self.criteria.iter().filter(|c| !c.checked)
    }

    /// The file's name for someone working in `root` (the agent, in the project): relative
    /// to `root` when it is inside it (`RALPH_TASK.md`, `tasks/cache.md`), else in full.
    pub fn name_in(&self, root: &Path) -> String {
        let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        let (path, root) = (abs(&self.path), abs(root));
        match path.strip_prefix(&root) {
            Ok(inside) if !inside.as_os_str().is_empty() => inside.display().to_string(),
            _ => path.display().to_string(),
        }
    }
}

/// Reads at most `FILE_SIZE_LIMIT + 1` bytes, after making sure `path` is a regular file.
///
/// The metadata is checked before opening because opening a FIFO blocks until someone
/// writes to it, and reading a device may never end.
fn read_capped(path: &Path) -> Result<Vec<u8>, TaskError> {
    let io_error = |error: io::Error| match error.kind() {
        io::ErrorKind::NotFound => TaskError::NotFound {
            path: path.to_owned(),
        },
        _ => TaskError::Unreadable {
            path: path.to_owned(),
            error,
        },
    };
    let meta = fs::metadata(path).map_err(io_error)?;
    if meta.is_dir() {
        return Err(TaskError::IsDirectory {
            path: path.to_owned(),
        });
    }
    if !meta.is_file() {
        return Err(TaskError::NotRegularFile {
            path: path.to_owned(),
        });
    }
    if meta.len() > FILE_SIZE_LIMIT {
        return Err(TaskError::TooLarge {
            path: path.to_owned(),
            size: meta.len(),
        });
    }
    let file = fs::File::open(path).map_err(io_error)?;
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(FILE_SIZE_LIMIT + 1)
        .read_to_end(&mut bytes)
        .map_err(io_error)?;
    Ok(bytes)
}
