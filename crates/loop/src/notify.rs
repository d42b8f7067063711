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
//! their whole process group, as the agent is ([`supervisor::stop_group`]: SIGTERM, a short
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

use std::ffi::OsStr;
use std::io::{self, Read};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread;
use std::time::{Duration, Instant};

use ralph_protocol::text::{cut, one_line};

use ralph_process::supervisor;

/// How long the webhook gets when the configuration does not say (or says zero).
pub const DEFAULT_WEBHOOK_TIMEOUT: Duration = Duration::from_secs(5);

/// How long `notify_command` may run before it is stopped, with its process group.
pub const COMMAND_TIME_LIMIT: Duration = Duration::from_secs(30);

/// How long a notification command being stopped gets between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(1);

/// How long `notify-send` may run; it normally returns in milliseconds, but hangs when the
/// session bus does.
const DESKTOP_TIME_LIMIT: Duration = Duration::from_secs(10);

/// How long to wait for a finished child's output when something it started in the
/// background still holds the pipe open.
const OUTPUT_GRACE: Duration = Duration::from_millis(500);

/// How much of a failed child's output is kept for the warning.
const OUTPUT_KEEP: usize = 4 * 1024;

/// The longest warning line, in characters.
const WARNING_CHARS: usize = 300;

/// The longest environment variable value ralph passes. Linux refuses a single string longer
/// than 128 KiB in `execve` (`MAX_ARG_STRLEN`), which would make the spawn fail outright.
const ENV_VALUE_BYTES: usize = 64 * 1024;

/// The longest human-readable text in the webhook body, in characters: Discord refuses
/// `content` over 2000.
const WEBHOOK_TEXT_CHARS: usize = 1900;

/// The title every channel uses.
const TITLE: &str = "ralph has a question";

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

/// What the channels are told about a question.
#[derive(Debug, Clone, serde::Serialize)]
pub struct QuestionNotice {
    /// The project directory.
    pub root: String,
    /// The question text (markdown, agent-written).
    pub question: String,
    /// Suggested answers, in order.
    pub options: Vec<String>,
    /// The answer taken when nobody answers in time.
    pub default: Option<String>,
    /// When the wait ends (RFC 3339), or `None` for no deadline.
    pub deadline: Option<String>,
    /// The iteration that asked.
    pub iteration: u32,
    /// The command that answers, e.g. `ralph answer -C /path "your answer"`.
    pub answer_command: String,
    /// A link that opens the question in a browser, when `ralph serve` runs.
    pub answer_url: Option<String>,
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

/// The process groups of the commands still running; each is its leader's pid.
type Groups = std::sync::Arc<std::sync::Mutex<Vec<i32>>>;

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
            supervisor::stop_group_blocking(pgid, STOP_GRACE);
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

/// Sends one warning line; a receiver that is gone is fine (the caller chose not to listen).
fn warn(tx: &Sender<String>, line: &str) {
    let _ = tx.send(one_line(line, WARNING_CHARS));
}

// ---------------------------------------------------------------------------------------------
// Desktop: notify-send

/// The `notify-send` that desktop notifications go through: `None` without a desktop session
/// (no `DISPLAY`, `WAYLAND_DISPLAY` or session bus) or without `notify-send` on `PATH`.
pub fn desktop_notifier() -> Option<PathBuf> {
    let has_session = ["DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS"]
        .iter()
        .any(|var| std::env::var_os(var).is_some_and(|v| !v.is_empty()));
    if !has_session {
        return None;
    }
    find_on_path("notify-send")
}

fn desktop(notice: &QuestionNotice, groups: &Groups, tx: &Sender<String>) {
    // No display or no notify-send means this machine has no desktop to notify: not a failure
    // worth a warning, which would show on every question of every headless run.
    let Some(program) = desktop_notifier() else {
        return;
    };
    let mut body = escape_markup(&one_line(&notice.question, 400));
    body.push_str("\n\n");
    body.push_str(&escape_markup(&one_line(&notice.answer_command, 200)));
    let mut cmd = Command::new(program);
    // `--` so that a question starting with `-` is text, not an option.
    cmd.arg("--app-name=ralph")
        .arg("--")
        .arg(format!("{TITLE} ({})", project_name(&notice.root)))
        .arg(strip_nul(&body));
    if let Err(e) = run_limited(cmd, DESKTOP_TIME_LIMIT, groups) {
        warn(tx, &format!("desktop notification (notify-send): {e}"));
    }
}

/// Finds an executable called `name` on `PATH`.
fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| {
            candidate
                .metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Escapes the few characters notification servers read as markup: most of them render a
/// subset of HTML in the body, where a question about `Vec<String>` would lose its type.
fn escape_markup(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// notify_command

fn notify_command(
    command: &str,
    notice: &QuestionNotice,
    limit: Duration,
    groups: &Groups,
    tx: &Sender<String>,
) {
    let options: Vec<String> = notice
        .options
        .iter()
        .map(|o| o.replace(['\r', '\n'], " "))
        .collect();
    let vars: [(&str, String); 8] = [
        ("RALPH_QUESTION", notice.question.clone()),
        ("RALPH_QUESTION_OPTIONS", options.join("\n")),
        (
            "RALPH_QUESTION_DEFAULT",
            notice.default.clone().unwrap_or_default(),
        ),
        (
            "RALPH_QUESTION_DEADLINE",
            notice.deadline.clone().unwrap_or_default(),
        ),
        ("RALPH_QUESTION_ITERATION", notice.iteration.to_string()),
        ("RALPH_ANSWER_COMMAND", notice.answer_command.clone()),
        (
            "RALPH_ANSWER_URL",
            notice.answer_url.clone().unwrap_or_default(),
        ),
        ("RALPH_ROOT", notice.root.clone()),
    ];
    let mut cmd = Command::new("sh");
    // The command line is the user's own; the question is only ever in the environment.
    cmd.arg("-c").arg(command);
    for (name, value) in vars {
        cmd.env(name, env_value(&value));
    }
    if !notice.root.is_empty() {
        cmd.current_dir(&notice.root);
    }
    // Marked as the agent is: after a SIGKILL of ralph, the guard or the next run stops it.
    cmd.env(
        ralph_process::orphans::RUN_VAR,
        ralph_process::orphans::run_id(),
    );
    if let Err(e) = run_limited(cmd, limit, groups) {
        warn(
            tx,
            &format!("notify_command `{}`: {e}", one_line(command, 80)),
        );
    }
}

/// Makes `value` safe to pass in the environment: no NUL (which would make the spawn fail)
/// and no longer than [`ENV_VALUE_BYTES`].
fn env_value(value: &str) -> String {
    let value = strip_nul(value);
    let mut end = value.len().min(ENV_VALUE_BYTES);
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    value[..end].to_string()
}

fn strip_nul(text: &str) -> String {
    text.replace('\0', "")
}

/// Runs `cmd` with stdin closed and stdout and stderr captured, for at most `limit`.
///
/// The child leads a process group of its own, so that on timeout the whole group is killed
/// (a `sh -c` with a pipeline has children of its own). The error says how it failed, with the
/// start of its output when it exited non-zero.
fn run_limited(mut cmd: Command, limit: Duration, groups: &Groups) -> Result<(), String> {
    let (mut reader, writer) = io::pipe().map_err(|e| format!("could not make a pipe: {e}"))?;
    let writer_2 = writer
        .try_clone()
        .map_err(|e| format!("could not make a pipe: {e}"))?;
    cmd.stdin(Stdio::null())
        .stdout(writer)
        .stderr(writer_2)
        .process_group(0);
    let program = cmd.get_program().to_owned();
    let spawned = ralph_process::orphans::spawn(|| cmd.spawn(), |c| Some(c.id()));
    // `cmd` holds the pipe's write ends; until it is gone, the reader never sees end of file.
    drop(cmd);
    let mut child = spawned.map_err(|e| format!("could not run {}: {e}", program.display()))?;
    let Ok(pgid) = i32::try_from(child.id()) else {
        return Err("its pid is out of range".into());
    };
    groups
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(pgid);

    let (out_tx, out_rx) = mpsc::channel();
    // Without this reader thread the child would get SIGPIPE or block on a full pipe; if the
    // thread cannot be had, the child is still bounded by the limit and its output is lost.
    let _ = thread::Builder::new()
        .name("ralph-notify-output".into())
        .spawn(move || {
            let _ = out_tx.send(read_capped(&mut reader, OUTPUT_KEEP));
        });

    let status = match wait_until(&mut child, Instant::now() + limit, pgid, groups) {
        Ok(Some(status)) => status,
        Ok(None) => {
            // The group id is the child's pid (process_group(0)); a group already gone is fine.
            supervisor::stop_group_blocking(pgid, STOP_GRACE);
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "still running after {}, so it was stopped",
                humantime::format_duration(limit)
            ));
        }
        Err(e) => return Err(format!("could not wait for it: {e}")),
    };
    if status.success() {
        return Ok(());
    }
    // Something the child started in the background may still hold the pipe open: wait a
    // little for the output, then report without it rather than wait for that to end.
    let output = out_rx.recv_timeout(OUTPUT_GRACE).unwrap_or_default();
    Err(describe_failure(status, &output))
}

/// Polls `child` until it exits or `deadline` passes (`Ok(None)`).
///
/// Polling, not a blocking wait, so the same thread can kill it at the deadline; it runs on a
/// notification thread, never the loop's. Once it is reaped, its group (`pgid`) leaves
/// `groups`, in the same step, under the lock.
fn wait_until(
    child: &mut Child,
    deadline: Instant,
    pgid: i32,
    groups: &Groups,
) -> io::Result<Option<ExitStatus>> {
    loop {
        let reaped = {
            let mut listed = groups
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let reaped = child.try_wait();
            if !matches!(reaped, Ok(None)) {
                listed.retain(|&g| g != pgid);
            }
            reaped
        };
        if let Some(status) = reaped? {
            return Ok(Some(status));
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(None);
        }
        thread::sleep((deadline - now).min(Duration::from_millis(20)));
    }
}

/// Reads to end of file, keeping the first `keep` bytes (the rest is drained so the writer
/// never blocks on a full pipe).
fn read_capped(reader: &mut impl Read, keep: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let room = keep.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    kept
}

fn describe_failure(status: ExitStatus, output: &[u8]) -> String {
    let output = one_line(&String::from_utf8_lossy(output), 200);
    if output.is_empty() {
        format!("failed ({status})")
    } else {
        format!("failed ({status}): {output}")
    }
}

// ---------------------------------------------------------------------------------------------
// Webhook

/// The JSON body posted to the webhook; see the module docs for who reads which field.
fn webhook_body(notice: &QuestionNotice) -> String {
    let text = cut(&summary(notice), WEBHOOK_TEXT_CHARS);
    serde_json::json!({
        "text": escape_slack(&text),
        "content": text,
        "allowed_mentions": { "parse": [] },
        "title": TITLE,
        "message": text,
        "question": notice.question,
        "options": notice.options,
        "default": notice.default,
        "deadline": notice.deadline,
        "iteration": notice.iteration,
        "root": notice.root,
        "answer_command": notice.answer_command,
        "answer_url": notice.answer_url,
    })
    .to_string()
}

/// The question as a short message for a person reading it on a phone.
fn summary(notice: &QuestionNotice) -> String {
    let mut text = format!(
        "{TITLE} ({}, iteration {}):\n{}",
        project_name(&notice.root),
        notice.iteration,
        cut(notice.question.trim(), 1200)
    );
    if !notice.options.is_empty() {
        text.push_str("\nOptions:");
        for (i, option) in notice.options.iter().enumerate() {
            text.push_str(&format!("\n{}. {}", i + 1, one_line(option, 100)));
        }
    }
    if let Some(default) = &notice.default {
        text.push_str(&format!("\nIf nobody answers: {}", one_line(default, 100)));
    }
    if let Some(deadline) = &notice.deadline {
        text.push_str(&format!("\nDeadline: {deadline}"));
    }
    text.push_str(&format!("\nAnswer with: {}", notice.answer_command));
    if let Some(url) = &notice.answer_url {
        text.push_str(&format!("\nor open: {url}"));
    }
    text
}

/// Escapes what Slack reads as control sequences (`<!channel>`, `<@U123>`, links).
fn escape_slack(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn post_webhook(url: &str, body: &str, timeout: Duration) -> Result<(), String> {
    use ureq::tls::{RootCerts, TlsConfig};
    // The system's certificate store (SSL_CERT_FILE and SSL_CERT_DIR are honoured), so a CA
    // that a company installs on its machines for its proxy is trusted here as well.
    let tls = TlsConfig::builder()
        .root_certs(RootCerts::PlatformVerifier)
        .unversioned_rustls_crypto_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .build();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .timeout_connect(Some(timeout))
        .http_status_as_error(true)
        .tls_config(tls)
        .build()
        .into();
    let result = agent
        .post(url)
        .content_type("application/json")
        .send(body.as_bytes());
    match result {
        Ok(_) => Ok(()),
        Err(ureq::Error::Timeout(_)) => Err(format!(
            "timed out after {}",
            humantime::format_duration(timeout)
        )),
        Err(ureq::Error::StatusCode(code)) => Err(format!("the server answered HTTP {code}")),
        Err(ureq::Error::HostNotFound) => Err("host not found".into()),
        Err(ureq::Error::ConnectionFailed) => Err("could not connect".into()),
        Err(ureq::Error::Io(e)) => Err(e.to_string()),
        // Other errors may quote the URL; webhook URLs carry their secret in the path.
        Err(e) => Err(e.to_string().replace(url, &redact_url(url))),
    }
}

/// The URL without its secrets, for messages: scheme and host only (`https://hooks.slack.com/…`).
///
/// Slack and Discord put the webhook's secret in the path, Gotify in the query, basic auth in
/// the user info; a warning on screen or in a log must show none of them.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(i) => (&url[..i + 3], &url[i + 3..]),
        None => ("", url),
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let tail = if end < rest.len() { "/…" } else { "" };
    format!("{scheme}{host}{tail}")
}

// ---------------------------------------------------------------------------------------------
// Text helpers

/// The last component of the project path, for titles (`/home/me/shop` -> `shop`).
fn project_name(root: &str) -> String {
    let name = Path::new(root)
        .file_name()
        .map_or_else(|| root.into(), OsStr::to_string_lossy);
    one_line(&name, 60)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;

    fn notice(root: &Path, question: &str) -> QuestionNotice {
        QuestionNotice {
            root: root.display().to_string(),
            question: question.into(),
            options: vec!["Postgres".into(), "SQLite\n(embedded)".into()],
            default: Some("SQLite".into()),
            deadline: Some("2026-11-22T14:17:33.123Z".into()),
            iteration: 3,
            answer_command: format!("ralph answer -C {} \"your answer\"", root.display()),
            answer_url: None,
        }
    }

    /// Waits until every channel thread has finished, collecting their warnings.
    fn drain(rx: &Receiver<String>) -> Vec<String> {
        let mut warnings = Vec::new();
        loop {
            match rx.recv_timeout(Duration::from_secs(20)) {
                Ok(w) => warnings.push(w),
                Err(mpsc::RecvTimeoutError::Disconnected) => return warnings,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!("channels still running: {warnings:?}")
                }
            }
        }
    }

    /// Reads one HTTP request: its header lines and its body.
    fn read_request(stream: &mut std::net::TcpStream) -> (Vec<String>, Vec<u8>) {
        let mut reader = BufReader::new(stream);
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let line = line.trim_end().to_string();
            if line.is_empty() {
                break;
            }
            headers.push(line);
        }
        let length: usize = headers
            .iter()
            .find_map(|h| {
                let (name, value) = h.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse().unwrap())
            })
            .unwrap_or(0);
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        (headers, body)
    }

    #[test]
    fn webhook_posts_json_with_every_field() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let request = read_request(&mut stream);
            stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .unwrap();
            request
        });
        let dir = tempfile::tempdir().unwrap();
        let notifier = Notifier::new(NotifyConfig {
            webhook_url: Some(format!("http://127.0.0.1:{port}/hooks/secret-token")),
            ..NotifyConfig::default()
        });
        let question = "Which database? <!channel> @everyone";

        let warnings = drain(&notifier.question_raised(&notice(dir.path(), question)));

        assert_eq!(warnings, Vec::<String>::new());
        let (headers, body) = server.join().unwrap();
        assert!(
            headers[0].starts_with("POST /hooks/secret-token "),
            "{headers:?}"
        );
        assert!(
            headers
                .iter()
                .any(|h| h.eq_ignore_ascii_case("content-type: application/json")),
            "{headers:?}"
        );
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(json["question"], question);
        assert_eq!(
            json["options"],
            serde_json::json!(["Postgres", "SQLite\n(embedded)"])
        );
        assert_eq!(json["default"], "SQLite");
        assert_eq!(json["deadline"], "2026-11-22T14:17:33.123Z");
        assert_eq!(json["iteration"], 3);
        assert_eq!(json["root"], dir.path().display().to_string());
        assert!(
            json["answer_command"]
                .as_str()
                .unwrap()
                .starts_with("ralph answer -C ")
        );
        assert_eq!(json["title"], TITLE);
        for field in ["content", "message"] {
            let text = json[field].as_str().unwrap();
            assert!(text.contains(question), "{field}: {text}");
            assert!(text.contains("1. Postgres") && text.contains("Answer with: ralph answer"));
        }
        // Agent text cannot ping a Slack channel or a Discord server.
        let slack = json["text"].as_str().unwrap();
        assert!(
            slack.contains("&lt;!channel&gt;") && !slack.contains("<!channel>"),
            "{slack}"
        );
        assert_eq!(json["allowed_mentions"], serde_json::json!({ "parse": [] }));
    }

    #[test]
    fn dead_webhook_never_blocks_and_warns_after_the_timeout() {
        // Bound but never accepted: the kernel completes the handshake, nobody ever answers.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let dir = tempfile::tempdir().unwrap();
        let notifier = Notifier::new(NotifyConfig {
            webhook_url: Some(format!("http://127.0.0.1:{port}/T000/B000/secret")),
            webhook_timeout: Duration::from_millis(300),
            ..NotifyConfig::default()
        });

        let start = Instant::now();
        let rx = notifier.question_raised(&notice(dir.path(), "Anyone there?"));
        assert!(
            start.elapsed() < Duration::from_millis(50),
            "blocked for {:?}",
            start.elapsed()
        );

        let warning = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(
            start.elapsed() >= Duration::from_millis(300),
            "{:?}",
            start.elapsed()
        );
        assert_eq!(
            warning,
            format!("webhook http://127.0.0.1:{port}/…: timed out after 300ms")
        );
        drop(listener);
    }

    #[test]
    fn webhook_error_status_is_a_warning() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            read_request(&mut stream);
            stream
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )
                .unwrap();
        });
        let dir = tempfile::tempdir().unwrap();
        let notifier = Notifier::new(NotifyConfig {
            webhook_url: Some(format!("http://127.0.0.1:{port}/hook")),
            ..NotifyConfig::default()
        });
        let warnings = drain(&notifier.question_raised(&notice(dir.path(), "?")));
        server.join().unwrap();
        assert_eq!(
            warnings,
            [format!(
                "webhook http://127.0.0.1:{port}/…: the server answered HTTP 404"
            )]
        );
    }

    #[test]
    fn notify_command_gets_the_question_only_through_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let question = "Run $(touch pwned) or `touch pwned2`? \"double\" 'single' \\ ; | & $HOME";
        let notifier = Notifier::new(NotifyConfig {
            command: Some(r#"printf '%s' "$RALPH_QUESTION" > got.txt"#.into()),
            ..NotifyConfig::default()
        });

        let warnings = drain(&notifier.question_raised(&notice(dir.path(), question)));

        assert_eq!(warnings, Vec::<String>::new());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("got.txt")).unwrap(),
            question
        );
        assert!(!dir.path().join("pwned").exists());
        assert!(!dir.path().join("pwned2").exists());
    }

    #[test]
    fn notify_command_sees_every_variable() {
        let dir = tempfile::tempdir().unwrap();
        let notifier = Notifier::new(NotifyConfig {
            command: Some(
                r#"for v in "$RALPH_QUESTION_OPTIONS" "$RALPH_QUESTION_DEFAULT" "$RALPH_QUESTION_DEADLINE" "$RALPH_QUESTION_ITERATION" "$RALPH_ANSWER_COMMAND" "$RALPH_ROOT"; do printf '%s\n--\n' "$v"; done > vars.txt"#
                    .into(),
            ),
            ..NotifyConfig::default()
        });
        let n = notice(dir.path(), "q");

        assert_eq!(drain(&notifier.question_raised(&n)), Vec::<String>::new());

        let got = std::fs::read_to_string(dir.path().join("vars.txt")).unwrap();
        let expected = format!(
            "Postgres\nSQLite (embedded)\n--\nSQLite\n--\n2026-11-22T14:17:33.123Z\n--\n3\n--\n{}\n--\n{}\n--\n",
            n.answer_command, n.root
        );
        assert_eq!(got, expected);
    }

    #[test]
    fn failing_notify_command_warns_with_its_output() {
        let dir = tempfile::tempdir().unwrap();
        let notifier = Notifier::new(NotifyConfig {
            command: Some("echo 'no route to phone' >&2; exit 3".into()),
            ..NotifyConfig::default()
        });
        let warnings = drain(&notifier.question_raised(&notice(dir.path(), "q")));
        assert_eq!(
            warnings,
            [
                "notify_command `echo 'no route to phone' >&2; exit 3`: failed (exit status: 3): no route to phone"
            ]
        );
    }

    #[test]
    fn a_command_past_its_limit_is_killed_with_its_group() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("survived");
        let mut cmd = Command::new("sh");
        // The background `sleep` is a grandchild: only killing the group stops it.
        cmd.arg("-c").arg(format!(
            "(sleep 1; touch '{}') & sleep 30",
            marker.display()
        ));
        let start = Instant::now();

        let err = run_limited(cmd, Duration::from_millis(200), &Groups::default()).unwrap_err();

        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
        assert_eq!(err, "still running after 200ms, so it was stopped");
        thread::sleep(Duration::from_millis(1500));
        assert!(!marker.exists(), "the background job outlived the kill");
    }

    /// Regression (issue 25, item 8): `notify_command` outlived ralph. Its time limit was a
    /// thread inside ralph, and it did not carry `RALPH_RUN`, so after ralph was killed it ran
    /// on forever.
    #[test]
    fn a_notify_command_ends_with_its_notifier_and_carries_the_run_id() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("survived");
        let notifier = Notifier::new(NotifyConfig {
            command: Some(format!(
                "env > env.txt; (sleep 3; touch '{}') & sleep 30",
                marker.display()
            )),
            ..NotifyConfig::default()
        });
        let warnings = notifier.question_raised(&notice(dir.path(), "Stop me?"));
        let start = Instant::now();
        while !std::fs::read_to_string(dir.path().join("env.txt"))
            .is_ok_and(|e| e.contains("RALPH_ROOT"))
        {
            assert!(start.elapsed() < Duration::from_secs(10), "never started");
            thread::sleep(Duration::from_millis(10));
        }
        let env = std::fs::read_to_string(dir.path().join("env.txt")).unwrap();
        let mark = format!("RALPH_RUN={}", ralph_process::orphans::run_id());
        assert!(env.lines().any(|l| l == mark), "{env}");

        drop(notifier);
        // Killed after the end's grace, far before its 30 s limit.
        let _ = drain(&warnings);
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{:?}",
            start.elapsed()
        );
        thread::sleep(Duration::from_millis(3500));
        assert!(!marker.exists(), "its background job outlived the run");
    }

    #[test]
    fn urls_lose_their_secrets_in_messages() {
        assert_eq!(
            redact_url("https://hooks.slack.com/services/T0/B0/XXXX"),
            "https://hooks.slack.com/…"
        );
        assert_eq!(
            redact_url("https://user:pw@gotify.example?token=abc"),
            "https://gotify.example/…"
        );
        assert_eq!(redact_url("http://localhost:8080"), "http://localhost:8080");
    }
}
