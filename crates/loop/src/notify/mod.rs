//! Telling a human that a question is waiting: the desktop, their own command, a webhook, and
//! the terminal itself.
//!
//! # How it works
//!
//! [`Notifier::question_raised`] starts one thread per configured channel and returns at once
//! with a receiver. Each thread does its slow part (runs `notify-send`, runs the user's
//! `notify_command`, POSTs the webhook) and, when that fails, sends one line of warning. The
//! caller can never be held up: nothing is shared but an unbounded channel, and a dropped
//! receiver only makes the threads' sends fail quietly. Every channel has a time limit, so a
//! hung command or a dead server ends in a warning instead of piling up threads and processes:
//! child processes get [`COMMAND_TIME_LIMIT`] (`notify-send` less) and are then stopped with
//! their whole process group, as the agent is ([`ralph_process::stop_group`]: SIGTERM, a short
//! grace, SIGKILL); the webhook gets `webhook_timeout` for the whole exchange, connect
//! included.
//!
//! # Shell safety
//!
//! The question is agent-written text, so it never becomes part of a command line.
//! `notify_command` is the user's own command line, run as `sh -c CMD`, and the question
//! reaches it only through environment variables (`RALPH_QUESTION` and friends, see
//! [`Notifier::question_raised`]); `notify-send` gets its title and body as separate argv
//! entries, after `--`, with no shell in between.
//!
//! # The webhook body
//!
//! One JSON object that several services read as is: Slack incoming webhooks show `text`,
//! Discord webhooks show `content`, Gotify (and other `title`/`message` services) show `title`
//! and `message`. The structured fields (`question`, `options`, `default`, `deadline`,
//! `iteration`, `root`, `answer_command`, and `answer_url` when `ralph serve` runs: a link that
//! opens the question in a browser) are there for your own endpoint. Agent text is
//! defused for the chat services: `<`, `>` and `&` are escaped in Slack's `text` (so a question
//! cannot say `<!channel>`), and Discord is told to parse no mentions (`allowed_mentions`).
//!
//! ntfy is the exception: it reads a JSON body only when it is POSTed to the server root with a
//! `topic` field; POSTed to a topic URL such as `https://ntfy.sh/mytopic`, the body becomes the
//! message verbatim, so the phone shows the JSON. Rather than guess which URLs are ntfy
//! servers, ralph posts to the URL exactly as given. For a clean ntfy notification, use
//! `notify_command` instead:
//! `curl -fsS -H "Title: ralph has a question" -d "$RALPH_QUESTION" https://ntfy.sh/mytopic`.
//!
//! The terminal's own notification (an OSC escape sequence) is the front end's: `ralph-ui`.

use ralph_process::stop_group_blocking;
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread;
use std::time::{Duration, Instant};

mod command;
mod desktop;
mod notice;
mod webhook;

use command::notify_command;
use desktop::desktop;
pub use desktop::desktop_notifier;
pub use notice::QuestionNotice;
use notice::{Groups, STOP_GRACE, warn};
pub use webhook::redact_url;
use webhook::{post_webhook, webhook_body};

#[cfg(test)]
mod tests;

/// How long the webhook gets when the configuration does not say (or says zero).
pub const DEFAULT_WEBHOOK_TIMEOUT: Duration = Duration::from_secs(5);

/// How long `notify_command` may run before it is stopped, with its process group.
pub const COMMAND_TIME_LIMIT: Duration = Duration::from_secs(30);

/// Which channels to use when a question is raised; all are off by default.
#[derive(Debug, Clone)]
pub struct NotifyConfig {
    /// Run `notify-send`, when it is on `PATH` and a display or session bus is set
    /// (`DISPLAY`, `WAYLAND_DISPLAY` or `DBUS_SESSION_BUS_ADDRESS`).
    pub desktop: bool,
    /// `notify_command` from the task file: run with `sh -c`, the question only in
    /// environment variables.
    pub command: Option<String>,
    /// A URL to POST a JSON body to (Slack, Discord, Gotify or your own endpoint).
    pub webhook_url: Option<String>,
    /// The webhook's limit for the whole exchange, connect included; zero means
    /// [`DEFAULT_WEBHOOK_TIMEOUT`].
    pub webhook_timeout: Duration,
}

impl Default for NotifyConfig {
    fn default() -> Self {
        NotifyConfig {
            desktop: false,
            command: None,
            webhook_url: None,
            webhook_timeout: DEFAULT_WEBHOOK_TIMEOUT,
        }
    }
}

/// Sends question notices to the configured channels without ever blocking the caller.
///
/// The commands it starts (`notify_command`, `notify-send`) end with it: when the last clone
/// is dropped (the run is over), any still running is stopped with its process group. They
/// carry the run's id (`RALPH_RUN`) as the agent does, so after a SIGKILL of ralph the guard,
/// or the next run, stops them too.
#[derive(Debug, Clone)]
pub struct Notifier {
    config: NotifyConfig,
    children: std::sync::Arc<StopOnDrop>,
}

/// Kills the groups in [`Groups`] when dropped.
#[derive(Debug, Default)]
struct StopOnDrop(Groups);

/// How long the commands still running when the run ends get to finish: a question asked
/// just before the end (the last iteration, the `stop` timeout policy) is still told.
const END_GRACE: Duration = Duration::from_secs(2);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let lock = || {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        let until = Instant::now() + END_GRACE;
        while !lock().is_empty() && Instant::now() < until {
            thread::sleep(Duration::from_millis(10));
        }
        // Under the lock: a group is listed only while its leader is not yet reaped, so its
        // id cannot have been reused.
        let groups = lock();
        for &pgid in groups.iter() {
            stop_group_blocking(pgid, STOP_GRACE);
        }
    }
}

impl Notifier {
    /// A notifier for `config`; nothing is checked or started until a question is raised.
    pub fn new(config: NotifyConfig) -> Self {
        Notifier {
            config,
            children: std::sync::Arc::default(),
        }
    }

    /// Tells every configured channel about `notice`, and returns at once.
    ///
    /// Each channel runs on its own thread; the returned receiver gets one line per failure
    /// (e.g. `webhook https://hooks.slack.com/…: timed out after 5s`) and disconnects when
    /// every channel has finished. The caller may drop it.
    ///
    /// `notify_command` runs in the project directory with stdin closed and these variables
    /// set: `RALPH_QUESTION`, `RALPH_QUESTION_OPTIONS` (one per line; newlines inside an option
    /// become spaces), `RALPH_QUESTION_DEFAULT`, `RALPH_QUESTION_DEADLINE` (RFC 3339),
    /// `RALPH_QUESTION_ITERATION`, `RALPH_ANSWER_COMMAND`, `RALPH_ANSWER_URL` (a link that opens
    /// the question, when `ralph serve` runs) and `RALPH_ROOT`; all are always set, and a
    /// missing default, deadline or link is an empty string.
    pub fn question_raised(&self, notice: &QuestionNotice) -> Receiver<String> {
        let (tx, rx) = mpsc::channel();
        if self.config.desktop {
            let notice = notice.clone();
            let groups = std::sync::Arc::clone(&self.children.0);
            spawn_channel("desktop", &tx, move |tx| desktop(&notice, &groups, tx));
        }
        if let Some(command) = &self.config.command {
            let command = command.clone();
            let notice = notice.clone();
            let groups = std::sync::Arc::clone(&self.children.0);
            spawn_channel("notify_command", &tx, move |tx| {
                notify_command(&command, &notice, COMMAND_TIME_LIMIT, &groups, tx)
            });
        }
        if let Some(url) = &self.config.webhook_url {
            let url = url.clone();
            let timeout = match self.config.webhook_timeout {
                Duration::ZERO => DEFAULT_WEBHOOK_TIMEOUT,
                t => t,
            };
            let body = webhook_body(notice);
            spawn_channel("webhook", &tx, move |tx| {
                if let Err(e) = post_webhook(&url, &body, timeout) {
                    warn(tx, &format!("webhook {}: {e}", redact_url(&url)));
                }
            });
        }
        rx
    }
}

/// Runs `work` on a thread of its own, or warns when no thread can be had.
fn spawn_channel(
    name: &str,
    tx: &Sender<String>,
    work: impl FnOnce(&Sender<String>) + Send + 'static,
) {
    let thread_tx = tx.clone();
    let spawned = thread::Builder::new()
        .name(format!("ralph-notify-{name}"))
        .spawn(move || work(&thread_tx));
    if let Err(e) = spawned {
        warn(
            tx,
            &format!("{name}: could not start a thread to notify ({e})"),
        );
    }
}
