//! Settings that belong to a person or a machine rather than to the task: notifications and
//! the default agent.
//!
//! Two files hold them, with the same keys:
//!
//! - the user's, `$XDG_CONFIG_HOME/ralph/config.toml` (`~/.config/ralph/config.toml`): under
//!   every project's task file, so a task file that sets a key wins;
//! - the project's, `.ralph/config.toml` (kept out of git): over the task file, since the task
//!   file is often committed and shared, and a webhook URL or a desktop preference is personal.
//!
//! The project's file also holds the budget of `.ralph/logs/` (`keep_log_runs`, `max_log_mib`).
//! Flags on the command line win over all three. An unknown key is a warning with a "did you
//! mean", as in the task file, and is ignored; a value of the wrong type is an error with file,
//! line and column, so a typo never silently turns a notification off.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ralph_protocol::{UserDir, user_dir};
use serde::Deserialize;

use crate::logs::LogBudget;
use crate::task::{CONFIG_KEYS, Key, TaskFile, TaskWarning, WarningKind};
use ralph_protocol::{Workspace, read_text};

/// What a config file may set.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Config {
    /// The agent: a preset name or a command line, as `agent:` in the task file.
    pub agent: Option<String>,
    /// Ring the terminal bell when a question comes.
    pub bell: Option<bool>,
    /// Show a desktop notification when a question comes.
    pub desktop_notification: Option<bool>,
    /// A shell command to run when a question comes (the question is in its environment).
    pub notify_command: Option<String>,
    /// An http(s) URL to POST a JSON body to when a question comes.
    pub webhook_url: Option<String>,
    /// How many runs' logs `.ralph/logs/` keeps, the running one included.
    pub keep_log_runs: Option<u32>,
    /// The most `.ralph/logs/` may hold, in MiB.
    pub max_log_mib: Option<u64>,
    /// Keys ralph does not know, kept to be warned about.
    #[serde(flatten)]
    unknown: BTreeMap<String, toml::Value>,
    /// The unknown keys, as warnings with their line and a suggestion.
    #[serde(skip)]
    pub warnings: Vec<TaskWarning>,
}

/// A config file that could not be used.
#[derive(Debug, thiserror::Error)]
#[error("{path}:{line}:{column}: {message}. Fix it, or delete the file to do without it.")]
pub struct ConfigError {
    /// The file.
    pub path: String,
    /// 1-based line of the problem.
    pub line: usize,
    /// 1-based column of the problem.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

/// The user's config file: `config.toml` in [`UserDir::Config`]
/// (`$XDG_CONFIG_HOME/ralph/config.toml`, else `~/.config/ralph/config.toml` on Linux).
/// `None` without a home directory.
pub fn user_path() -> Option<PathBuf> {
    Some(user_dir(UserDir::Config)?.join("config.toml"))
}

/// The project's config file: `.ralph/config.toml`.
pub fn project_path(ws: &Workspace) -> PathBuf {
    ws.dir().join("config.toml")
}

impl Config {
    /// Reads `.ralph/config.toml`; `Ok(None)` when there is none.
    pub fn load(ws: &Workspace) -> Result<Option<Config>, ConfigError> {
        // A file where `.ralph/` should be holds no config: the workspace refuses it when the
        // run makes `.ralph/`, saying what is in the way.
        if ws.dir().symlink_metadata().is_ok_and(|m| m.is_file()) {
            return Ok(None);
        }
        Config::load_file(&project_path(ws))
    }

    /// Reads the user's config file ([`user_path`]); `Ok(None)` when there is none.
    pub fn load_user() -> Result<Option<Config>, ConfigError> {
        match user_path() {
            Some(path) => Config::load_file(&path),
            None => Ok(None),
        }
    }

    /// Reads a config file; `Ok(None)` when there is none.
    pub fn load_file(path: &Path) -> Result<Option<Config>, ConfigError> {
        let text = match read_text(path) {
            Ok(Some(t)) => t,
            Ok(None) => return Ok(None),
            Err(e) => {
                return Err(ConfigError {
                    path: path.display().to_string(),
                    line: 1,
                    column: 1,
                    message: e.to_string(),
                });
            }
        };
        Config::parse(path, &text).map(Some)
    }

    /// Parses the file's text; errors carry its line and column.
    pub fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
        let mut config: Config = toml::from_str(text).map_err(|e| {
            let (line, column) = e
                .span()
                .map(|span| line_col(text, span.start))
                .unwrap_or((1, 1));
            ConfigError {
                path: path.display().to_string(),
                line,
                column,
                message: e.message().trim().to_string(),
            }
        })?;
        if let Some(url) = &config.webhook_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            let (line, column) = text
                .find(url.as_str())
                .map(|i| line_col(text, i))
                .unwrap_or((1, 1));
            return Err(ConfigError {
                path: path.display().to_string(),
                line,
                column,
                message: format!(
                    "webhook_url must start with http:// or https://, found \"{url}\""
                ),
            });
        }
        if let Some(agent) = &config.agent
            && agent.trim().is_empty()
        {
            let (line, column) = key_position(text, "agent");
            return Err(ConfigError {
                path: path.display().to_string(),
                line,
                column,
                message: "agent is empty: name a preset (agent = \"claude\") or a command line"
                    .into(),
            });
        }
        if config.keep_log_runs == Some(0) {
            let (line, column) = key_position(text, "keep_log_runs");
            return Err(ConfigError {
                path: path.display().to_string(),
                line,
                column,
                message: "keep_log_runs must be 1 or more: the running loop's logs are always kept"
                    .into(),
            });
        }
        config.warnings = std::mem::take(&mut config.unknown)
            .into_keys()
            .map(|key| {
                let (line, column) = key_position(text, &key);
                TaskWarning {
                    path: path.to_owned(),
                    line,
                    column,
                    kind: WarningKind::UnknownConfigKey {
                        suggestion: suggest(&key),
                        key,
                    },
                }
            })
            .collect();
        Ok(config)
    }

    /// Lays this file's keys over the task file's: for `.ralph/config.toml`.
    pub fn apply_over(&self, task: &mut TaskFile) {
        self.apply(task, |_| true);
    }

    /// `budget` with this file's `keep_log_runs` and `max_log_mib` laid over it.
    pub fn log_budget(&self, mut budget: LogBudget) -> LogBudget {
        if let Some(n) = self.keep_log_runs {
            budget.keep_runs = n;
        }
        if let Some(m) = self.max_log_mib {
            budget.max_mib = m;
        }
        budget
    }

    /// Fills in the keys the task file does not set: for the user's config file.
    pub fn apply_under(&self, task: &mut TaskFile) {
        let given = task.given.clone();
        self.apply(task, |key| !given.contains(&key));
    }

    fn apply(&self, task: &mut TaskFile, wanted: impl Fn(Key) -> bool) {
        let notify = &mut task.notify;
        if let Some(a) = &self.agent
            && wanted(Key::Agent)
        {
            task.agent = Some(a.trim().to_owned());
        }
        if let Some(b) = self.bell
            && wanted(Key::Bell)
        {
            notify.bell = b;
        }
        if let Some(d) = self.desktop_notification
            && wanted(Key::DesktopNotification)
        {
            notify.desktop_notification = d;
        }
        if let Some(c) = &self.notify_command
            && wanted(Key::NotifyCommand)
        {
            notify.notify_command = Some(c.clone());
        }
        if let Some(w) = &self.webhook_url
            && wanted(Key::WebhookUrl)
        {
            notify.webhook_url = Some(w.clone());
        }
        task.warnings.extend(self.warnings.iter().cloned());
    }
}

/// Loads the user's and the project's config files and lays them under and over `task`;
/// returns the log budget they set over `budget`.
pub fn apply_all(
    ws: &Workspace,
    task: &mut TaskFile,
    budget: LogBudget,
) -> Result<LogBudget, ConfigError> {
    let mut budget = budget;
    if let Some(user) = Config::load_user()? {
        user.apply_under(task);
        budget = user.log_budget(budget);
    }
    if let Some(project) = Config::load(ws)? {
        project.apply_over(task);
        budget = project.log_budget(budget);
    }
    Ok(budget)
}

/// The config key an unknown one was most likely meant to be, if any is close.
fn suggest(unknown: &str) -> Option<Key> {
    let names = CONFIG_KEYS.map(Key::name);
    crate::task::nearest(unknown, &names).and_then(Key::from_name)
}

/// Where `key` is set in `text`: the line that starts with it (1, 1 if none does).
fn key_position(text: &str, key: &str) -> (usize, usize) {
    text.lines()
        .enumerate()
        .find_map(|(i, line)| {
            let rest = line.trim_start();
            let after = rest.strip_prefix(key).or_else(|| {
                rest.strip_prefix('"')
                    .and_then(|r| r.strip_prefix(key))
                    .and_then(|r| r.strip_prefix('"'))
            })?;
            after
                .trim_start()
                .starts_with('=')
                .then(|| (i + 1, line.len() - rest.len() + 1))
        })
        .unwrap_or((1, 1))
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(frontmatter: &str) -> TaskFile {
        let text = format!("---\ntask: t\n{frontmatter}---\n- [ ] x\n");
        TaskFile::parse(Path::new("RALPH_TASK.md"), text.as_bytes()).unwrap()
    }

    #[test]
    fn the_project_file_overrides_the_task_file() {
        let c = Config::parse(
            Path::new("c.toml"),
            "bell = false\nwebhook_url = \"https://h.example/x\"\nagent = \"codex\"\n",
        )
        .unwrap();
        let mut t = task("bell: true\nagent: claude\n");
        c.apply_over(&mut t);
        assert!(!t.notify.bell);
        assert!(t.notify.desktop_notification);
        assert_eq!(t.notify.webhook_url.as_deref(), Some("https://h.example/x"));
        assert_eq!(t.agent.as_deref(), Some("codex"));
    }

    #[test]
    fn the_user_file_gives_way_to_the_task_file() {
        let c = Config::parse(
            Path::new("c.toml"),
            "bell = false\ndesktop_notification = false\nagent = \"codex\"\n",
        )
        .unwrap();
        // The task file says bell: true (the default value, but said): it wins.
        let mut t = task("bell: true\n");
        c.apply_under(&mut t);
        assert!(t.notify.bell);
        assert!(!t.notify.desktop_notification);
        assert_eq!(t.agent.as_deref(), Some("codex"));
        let mut t = task("agent: claude\nbell: ~\n");
        c.apply_under(&mut t);
        assert_eq!(t.agent.as_deref(), Some("claude"));
        assert!(!t.notify.bell, "a null key is not set");
    }

    #[test]
    fn an_unknown_key_is_a_warning_with_a_suggestion() {
        let c = Config::parse(
            Path::new(".ralph/config.toml"),
            "bell = true\n  webhok_url = \"x\"\nfavourite_colour = 3\n",
        )
        .unwrap();
        let warnings: Vec<String> = c.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(
            warnings,
            [
                ".ralph/config.toml:3:1: unknown key 'favourite_colour' is ignored. The keys \
                 this file may set are: agent, bell, desktop_notification, notify_command, \
                 webhook_url",
                ".ralph/config.toml:2:3: unknown key 'webhok_url': did you mean 'webhook_url'? \
                 Until it is renamed it is ignored",
            ]
        );
        let mut t = task("");
        c.apply_over(&mut t);
        assert_eq!(t.warnings.len(), 2);
    }

    #[test]
    fn a_wrong_type_is_an_error() {
        let e = Config::parse(Path::new("c.toml"), "bell = \"yes\"\n").unwrap_err();
        assert_eq!(e.line, 1, "{e}");
    }

    #[test]
    fn a_webhook_must_be_http() {
        let e = Config::parse(Path::new("c.toml"), "\nwebhook_url = \"ftp://x\"\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
    }
}
