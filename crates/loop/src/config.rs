//! `.ralph/config.toml`: this machine's own settings, kept out of the task file.
//!
//! The task file is often committed and shared; a webhook URL or a desktop preference is
//! personal. Keys set here override the task file's keys of the same name. Notification
//! settings live here, and the budget of `.ralph/logs/`; unknown keys are errors (with file, line and column), so a typo does not
//! silently turn a notification off.

use std::path::Path;

use serde::Deserialize;

use crate::runner::logs::LogBudget;
use crate::task::NotifySettings;
use crate::workspace::{self, Workspace};

/// What `.ralph/config.toml` may set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
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
}

/// A `.ralph/config.toml` that could not be used.
#[derive(Debug, thiserror::Error)]
#[error(
    "{path}:{line}:{column}: {message}. Fix it, or delete the file to use the task file's settings alone."
)]
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

impl Config {
    /// Reads `.ralph/config.toml`; `Ok(None)` when there is none.
    pub fn load(ws: &Workspace) -> Result<Option<Config>, ConfigError> {
        let path = ws.dir().join("config.toml");
        let text = match workspace::read_text(&path) {
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
        Config::parse(&path, &text).map(Some)
    }

    /// Parses the file's text; errors carry its line and column.
    pub fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| {
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
        if config.keep_log_runs == Some(0) {
            let (line, column) = text
                .find("keep_log_runs")
                .map(|i| line_col(text, i))
                .unwrap_or((1, 1));
            return Err(ConfigError {
                path: path.display().to_string(),
                line,
                column,
                message: "keep_log_runs must be 1 or more: the running loop's logs are always kept"
                    .into(),
            });
        }
        Ok(config)
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

    /// The task file's notification settings with this file's keys laid over them.
    pub fn apply(&self, mut settings: NotifySettings) -> NotifySettings {
        if let Some(b) = self.bell {
            settings.bell = b;
        }
        if let Some(d) = self.desktop_notification {
            settings.desktop_notification = d;
        }
        if let Some(c) = &self.notify_command {
            settings.notify_command = Some(c.clone());
        }
        if let Some(w) = &self.webhook_url {
            settings.webhook_url = Some(w.clone());
        }
        settings
    }
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

    #[test]
    fn keys_override_the_task_file() {
        let c = Config::parse(
            Path::new("c.toml"),
            "bell = false\nwebhook_url = \"https://h.example/x\"\n",
        )
        .unwrap();
        let s = c.apply(NotifySettings::default());
        assert!(!s.bell);
        assert!(s.desktop_notification);
        assert_eq!(s.webhook_url.as_deref(), Some("https://h.example/x"));
    }

    #[test]
    fn an_unknown_key_names_its_line_and_column() {
        let e = Config::parse(
            Path::new(".ralph/config.toml"),
            "bell = true\nwebhok_url = \"x\"\n",
        )
        .unwrap_err();
        assert_eq!((e.line, e.column), (2, 1), "{e}");
        assert!(e.to_string().starts_with(".ralph/config.toml:2:1: "), "{e}");
        assert!(e.to_string().contains("webhok_url"), "{e}");
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
