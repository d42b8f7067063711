//! The Telegram bot of `ralph serve`: the same broker, one more front end of the question desk.
//!
//! # Theory of operation
//!
//! Settings live only in the user's `$XDG_CONFIG_HOME/ralph/remote.toml` (mode 0600; a file
//! others can read is refused), never in a project: a cloned repository must not be able to
//! send your questions to someone else's bot. The bot talks to the Bot API by hand over ureq,
//! outbound only: a thread of its own long-polls `getUpdates`, and a task sends each new
//! waiting question, edits the message of each one that closed (how it closed, buttons
//! removed) and the header of each one given more time, when a loop's files change. Nothing
//! polls the loops: inotify on the registry and on each loop's `.ralph/`
//! ([`crate::streams::Streams`]) wakes the task, so a broker waiting with fifty idle loops wakes for
//! nothing but the long poll's answers (`make bench` counts). Both hold [`Bot::posted`] while
//! they work, so a question is sent once and a tap sees the state the last edit showed. If the
//! API cannot be reached the bot waits and retries; the loops never wait for it.
//!
//! Pairing binds one Telegram user: `ralph serve pair telegram` stores a one-time code (hashed,
//! like the web's) and prints `https://t.me/BOT?start=CODE`; `/start CODE` from a user binds
//! their id (in `telegram.json` in the state directory). Every update from anyone else is dropped
//! without a reply, so a stranger learns nothing, not even that the bot is alive.
//!
//! A question's buttons carry opaque callback data (`q7:2`, `q7:send`, `q7:skip`, `q7:more`):
//! `7` numbers the message in this broker, the label stays here. The phone can answer (a button,
//! or a message: a reply to the question's, or any message while only one question is open),
//! skip, or ask for an hour more ([`loops::TELEGRAM_EXTEND`]: a phone
//! is looked at less often than the page, whose button adds five minutes), through
//! [`loops::answer_link`] and [`loops::act`] like the web page; nothing else.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;
use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use ralph_protocol::{UserDir, user_dir};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use ralph_protocol::{
    Channel, LinkRecord, QuestionId, Reply, StopBy, describe_span, mint_link, timestamp,
};

use crate::bot_text;
use crate::devices;
use crate::loops::{self, Action, QuestionView, Receipt, Sender};
use crate::page::{duration, esc as html};
use crate::streams::Subscription;

/// The Bot API's address unless `api_url` says otherwise.
pub(crate) const DEFAULT_API_URL: &str = "https://api.telegram.org";

/// How long one `getUpdates` waits for an update, in seconds.
const POLL_SECS: u64 = 50;

/// How long after a failed send the bot tries again.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// Telegram's limit on a message's text.
const MAX_MESSAGE_CHARS: usize = 4096;

/// The most of a message the options may take; more are left to the page.
const MAX_OPTIONS_CHARS: usize = 2500;

/// The file in the state directory that names the paired user.
const PAIRED_FILE: &str = "telegram.json";

/// `[telegram]` in `remote.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The bot's token, from BotFather.
    pub token: String,
    /// The Bot API's address (a mock in tests).
    #[serde(default = "default_api_url")]
    pub api_url: String,
    /// Send only "a question is waiting in PROJECT" and the web answer link.
    #[serde(default)]
    pub redact: bool,
}

fn default_api_url() -> String {
    DEFAULT_API_URL.into()
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RemoteToml {
    telegram: Option<Settings>,
}

/// `remote.toml`'s path: `$XDG_CONFIG_HOME/ralph/remote.toml`, else `~/.config/ralph/...`.
pub(crate) fn config_path() -> Option<PathBuf> {
    Some(user_dir(UserDir::Config)?.join("remote.toml"))
}

/// The bot's settings from `remote.toml`; `Ok(None)` when there is no file or no `[telegram]`.
pub fn settings() -> Result<Option<Settings>, String> {
    match config_path() {
        Some(path) => settings_at(&path),
        None => Ok(None),
    }
}

/// The bot's settings from the `remote.toml` at `path`.
fn settings_at(path: &Path) -> Result<Option<Settings>, String> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("could not read {}: {e}", path.display())),
    };
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "{} holds the bot's token but others can read it (mode {mode:o}): run `chmod 600 {}` and start again",
            path.display(),
            path.display()
        ));
    }
    // Opened as `.ralph/`'s files are: a pipe in its place is refused, never waited on.
    let text = ralph_protocol::open_plain(std::fs::OpenOptions::new().read(true), path)
        .and_then(|f| std::io::read_to_string(std::io::Read::take(f, 1024 * 1024)))
        .map_err(|e| format!("could not read {}: {e}", path.display()))?;
    let parsed: RemoteToml =
        toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    match parsed.telegram {
        Some(s) if s.token.trim().is_empty() => Err(format!(
            "{}: [telegram] token is empty: paste the token BotFather gave you",
            path.display()
        )),
        other => Ok(other),
    }
}

/// A Bot API call that failed.
#[derive(Debug)]
struct ApiError {
    /// Telegram's `error_code`, or 0 when it could not be reached.
    code: i64,
    what: String,
}

impl ApiError {
    /// Whether Telegram refused the call for good (a bad request, a chat that blocked the
    /// bot): trying again gives the same answer. Too many requests (429) is worth a retry.
    fn permanent(&self) -> bool {
        (400..500).contains(&self.code) && self.code != 429
    }
}

/// The Bot API, by hand: JSON in, `result` out.
#[derive(Debug)]
struct Api {
    agent: ureq::Agent,
    base: String,
    token: String,
}

impl Api {
    fn new(s: &Settings) -> Api {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(POLL_SECS + 15)))
            .http_status_as_error(false)
            .build()
            .into();
        Api {
            agent,
            base: format!("{}/bot{}", s.api_url.trim_end_matches('/'), s.token),
            token: s.token.clone(),
        }
    }

    fn call(&self, method: &str, body: &Value) -> Result<Value, ApiError> {
        let url = format!("{}/{method}", self.base);
        // An error may quote the URL, which holds the token.
        let hide = |e: String| e.replace(&self.token, "<token>");
        let mut resp = self
            .agent
            .post(&url)
            .header("content-type", "application/json")
            .send(body.to_string())
            .map_err(|e| ApiError {
                code: 0,
                what: hide(e.to_string()),
            })?;
        let text = resp.body_mut().read_to_string().map_err(|e| ApiError {
            code: 0,
            what: hide(e.to_string()),
        })?;
        let v: Value = serde_json::from_str(&text).map_err(|_| ApiError {
            code: i64::from(resp.status().as_u16()),
            what: format!("HTTP {} from the Bot API", resp.status()),
        })?;
        if v["ok"].as_bool() == Some(true) {
            Ok(v["result"].clone())
        } else {
            Err(ApiError {
                code: v["error_code"].as_i64().unwrap_or(0),
                what: hide(v["description"].as_str().unwrap_or("refused").to_string()),
            })
        }
    }

    fn username(&self) -> Result<String, ApiError> {
        let me = self.call("getMe", &json!({}))?;
        me["username"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| ApiError {
                code: 0,
                what: "getMe gave no username".into(),
            })
    }
}

/// The paired Telegram user, as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Paired {
    user_id: i64,
    chat_id: i64,
    paired_at: String,
}

fn paired(state_dir: &Path) -> Option<Paired> {
    let raw = std::fs::read(state_dir.join(PAIRED_FILE)).ok()?;
    serde_json::from_slice(&raw).ok()
}

/// The paired Telegram user, as `ralph serve devices` lists it: their id and when they
/// paired.
pub fn paired_user(state_dir: &Path) -> Option<(i64, String)> {
    paired(state_dir).map(|p| (p.user_id, p.paired_at))
}

/// Forgets the paired Telegram user: from now on their taps and messages are dropped as a
/// stranger's, and no question is sent to them. Whether one was paired.
pub fn unpair(state_dir: &Path) -> std::io::Result<bool> {
    match std::fs::remove_file(state_dir.join(PAIRED_FILE)) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

fn store_paired(state_dir: &Path, p: &Paired) -> std::io::Result<()> {
    let path = state_dir.join(PAIRED_FILE);
    let tmp = state_dir.join(".telegram.json.tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(&serde_json::to_vec(p).map_err(std::io::Error::other)?)?;
    std::fs::rename(tmp, path)
}

/// The one-time `t.me` start link that pairs a Telegram user with this machine's broker.
pub(crate) fn start_link(state_dir: &Path) -> Result<String, String> {
    let s = settings()?.ok_or_else(|| {
        format!(
            "no [telegram] token in {}: create a bot with @BotFather, put these two lines there (chmod 600):\n\n    [telegram]\n    token = \"...\"\n\nthen restart `ralph serve` and pair again",
            config_path().map_or_else(|| "remote.toml".into(), |p| p.display().to_string())
        )
    })?;
    let name = Api::new(&s)
        .username()
        .map_err(|e| format!("could not ask Telegram for the bot's name: {}", e.what))?;
    let code =
        devices::new_pairing_code(state_dir, "telegram", SystemTime::now()).map_err(|e| {
            format!(
                "could not store the pairing code in {}: {e}",
                state_dir.display()
            )
        })?;
    Ok(format!("https://t.me/{name}?start={code}"))
}

/// `/stop` from the paired user: with one loop running, it stops; with several, `/stop N`
/// names the N-th of the list a bare `/stop` shows. The words to reply with.
fn stop_command(which: &str) -> String {
    let running: Vec<_> = loops::all().into_iter().filter(|l| l.row.running).collect();
    let list = || {
        let mut s = String::from("Several loops are running; send /stop N to stop one:");
        for (i, l) in running.iter().enumerate() {
            let _ = write!(
                s,
                "\n/stop {} — {} ({})",
                i + 1,
                loops::project_name(&l.row.root),
                ralph_fleet::rows::state_words(&l.row)
            );
        }
        s
    };
    let chosen = match (which, running.len()) {
        (_, 0) => return "No loop is running on this machine.".into(),
        ("", 1) => &running[0],
        ("", _) => return list(),
        (n, _) => match n
            .parse::<usize>()
            .ok()
            .and_then(|n| running.get(n.checked_sub(1)?))
        {
            Some(l) => l,
            None => return list(),
        },
    };
    loops::stop_loop(&chosen.row.root, StopBy::Telegram).unwrap_or_else(|e| e)
}

/// A question's message, as sent.
#[derive(Debug)]
struct Posted {
    /// Its number in the callback data.
    number: u32,
    root: PathBuf,
    question: QuestionId,
    chat_id: i64,
    message_id: i64,
    /// The message as sent (or last edited).
    text: String,
    /// Its first line without the time left (`project · iteration N`), for the closed message.
    head: String,
    /// The question and its options, between the header and the footer.
    content: String,
    /// The label of its Skip button.
    skip: &'static str,
    options: usize,
    labels: Vec<String>,
    multi: bool,
    picked: BTreeSet<usize>,
    redacted: bool,
    open: bool,
    /// The deadline its header was written with.
    deadline: Option<SystemTime>,
    /// Whether its loop ran when its header was written.
    live: bool,
}

impl Posted {
    /// The message once its question closed (`<b>{label}</b> {how}`, buttons gone): no time
    /// left, no footer that invites an answer.
    fn closed_text_as(&self, label: &str, how: &str) -> String {
        match self.redacted {
            true => format!("{}\n\n<b>{label}</b> {}", self.text, html(how)),
            false => format!(
                "{}\n\n{}\n\n<b>{label}</b> {}",
                self.head,
                self.content,
                html(how)
            ),
        }
    }

    fn link(&self) -> LinkRecord {
        LinkRecord {
            hash: String::new(),
            root: self.root.clone(),
            question: self.question.clone(),
        }
    }
}

#[derive(Debug, Default)]
struct Posts {
    next: u32,
    by_number: HashMap<u32, Posted>,
    /// No sending before this (the API failed).
    retry_at: Option<Instant>,
    /// Questions Telegram refused for good (a 4xx but 429): not sent again.
    refused: HashSet<(PathBuf, QuestionId)>,
}

/// The running bot.
#[derive(Debug)]
struct Bot {
    api: Api,
    state_dir: PathBuf,
    broker_url: String,
    redact: bool,
    posted: Mutex<Posts>,
    pairing: devices::Attempts,
    /// Someone paired: questions already waiting go to them now.
    paired_now: tokio::sync::Notify,
}

/// Starts the bot: a thread that long-polls the Bot API, and a task that sends and edits the
/// questions' messages whenever a loop's files change (inotify, [`crate::streams::Streams`]). Both
/// run as long as the process. Must be called in a Tokio runtime.
pub(crate) fn start(
    settings: &Settings,
    state_dir: PathBuf,
    broker_url: String,
    mut changes: Subscription,
) -> std::io::Result<()> {
    let bot = Arc::new(Bot {
        api: Api::new(settings),
        state_dir,
        broker_url,
        redact: settings.redact,
        posted: Mutex::default(),
        pairing: devices::Attempts::default(),
        paired_now: tokio::sync::Notify::new(),
    });
    let poller = Arc::clone(&bot);
    std::thread::Builder::new()
        .name("telegram-poll".into())
        .spawn(move || poller.poll())?;
    tokio::spawn(async move {
        loop {
            let syncing = Arc::clone(&bot);
            let retry_at = tokio::task::spawn_blocking(move || syncing.sync())
                .await
                .ok()
                .flatten();
            let retry = async {
                match retry_at {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                changed = changes.next() => if changed.is_none() { return },
                () = bot.paired_now.notified() => {}
                () = retry => {}
            }
        }
    });
    Ok(())
}

fn warn(what: &str) {
    eprintln!("ralph serve: telegram: {what}");
}

impl Bot {
    fn lock(&self) -> std::sync::MutexGuard<'_, Posts> {
        self.posted.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn poll(&self) {
        let mut backoff = Duration::from_secs(1);
        let mut failing = false;
        let mut offset: i64 = 0;
        // getUpdates answers 409 while a webhook is set.
        let _ = self.api.call("deleteWebhook", &json!({}));
        loop {
            let body = json!({
                "offset": offset,
                "timeout": POLL_SECS,
                "allowed_updates": ["message", "callback_query"],
            });
            match self.api.call("getUpdates", &body) {
                Ok(updates) => {
                    if failing {
                        warn("the Bot API answers again");
                        failing = false;
                    }
                    backoff = Duration::from_secs(1);
                    for u in updates.as_array().into_iter().flatten() {
                        offset = offset.max(u["update_id"].as_i64().unwrap_or(0) + 1);
                        self.on_update(u);
                    }
                }
                Err(e) => {
                    if !failing {
                        warn(&if e.code == 409 {
                            format!(
                                "{}: another program polls this bot's updates; only one may (is a second `ralph serve` using the same token?)",
                                e.what
                            )
                        } else {
                            format!(
                                "could not get updates ({}); retrying, loops are not affected",
                                e.what
                            )
                        });
                        failing = true;
                    }
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(30));
                }
            }
        }
    }

    fn on_update(&self, u: &Value) {
        if let Some(cb) = u.get("callback_query") {
            let from = cb["from"]["id"].as_i64();
            if from.is_some() && from == paired(&self.state_dir).map(|p| p.user_id) {
                self.on_tap(cb, from.unwrap_or_default());
            }
        } else if let Some(m) = u.get("message") {
            self.on_message(m);
        }
    }

    fn on_message(&self, m: &Value) {
        let (Some(from), Some(chat)) = (m["from"]["id"].as_i64(), m["chat"]["id"].as_i64()) else {
            return;
        };
        let text = m["text"].as_str().unwrap_or("");
        let me = paired(&self.state_dir);
        // Pairing binds a person's private chat, never a group everyone in it could answer from.
        let private = m["chat"]["type"] == "private";
        if let Some(code) = text.strip_prefix("/start ").filter(|_| private) {
            let now = SystemTime::now();
            if !self.pairing.allow(&from.to_string(), now) {
                return;
            }
            if devices::take_pairing_code(&self.state_dir, "telegram", code.trim(), now) {
                let p = Paired {
                    user_id: from,
                    chat_id: chat,
                    paired_at: timestamp(now),
                };
                if let Err(e) = store_paired(&self.state_dir, &p) {
                    warn(&format!("could not store the paired user: {e}"));
                    return;
                }
                self.paired_now.notify_one();
                self.send(chat, "Paired. Questions from the loops on this machine will arrive here: tap an option, or write your answer (as a reply to the question's message when several wait); /stop stops a loop.", None);
            } else {
                self.pairing.failed(&from.to_string(), now);
            }
            return;
        }
        if me.as_ref().map(|p| (p.user_id, p.chat_id)) != Some((from, chat)) {
            return;
        }
        if let Some(which) = text
            .strip_prefix("/stop")
            .filter(|w| w.is_empty() || w.starts_with(' '))
        {
            let answer = stop_command(which.trim());
            self.send(chat, &answer, m["message_id"].as_i64());
            return;
        }
        let reply_to = m["reply_to_message"]["message_id"].as_i64();
        let posts = self.lock();
        let open: Vec<&Posted> = posts
            .by_number
            .values()
            .filter(|p| p.open && p.chat_id == chat)
            .collect();
        let target = match reply_to {
            Some(id) => posts
                .by_number
                .values()
                .find(|p| p.message_id == id && p.chat_id == chat),
            // Not a reply: with one question open there is no doubt which it answers.
            None if open.len() == 1 => open.first().copied(),
            None => None,
        };
        let answer = match target {
            None if open.is_empty() => "No question is waiting here now.".to_string(),
            None => "Several questions are waiting: reply to the message of the one you answer (swipe it, or tap and hold it, then Reply).".to_string(),
            Some(p) if p.redacted => "Answer this one on the web page its message links to.".into(),
            Some(p) => {
                let text = ralph_protocol::clean(text);
                loops::answer_link(
                    &p.link(),
                    &Reply::Text(text),
                    &Sender::Telegram(from.to_string()),
                )
                .message()
            }
        };
        drop(posts);
        self.send(chat, &answer, m["message_id"].as_i64());
    }

    fn on_tap(&self, cb: &Value, from: i64) {
        let id = cb["id"].as_str().unwrap_or("");
        let data = cb["data"].as_str().unwrap_or("");
        let message_id = cb["message"]["message_id"].as_i64();
        let mut posts = self.lock();
        let found = data
            .strip_prefix('q')
            .and_then(|d| d.split_once(':'))
            .and_then(|(n, what)| Some((n.parse::<u32>().ok()?, what)));
        let note = match found {
            Some((n, what)) => match posts.by_number.get_mut(&n) {
                Some(p) if Some(p.message_id) == message_id => self.tap(p, what, from),
                _ => "This question is not waiting here.".into(),
            },
            None => String::new(),
        };
        drop(posts);
        let text: String = note.chars().take(190).collect();
        let _ = self.api.call(
            "answerCallbackQuery",
            &json!({"callback_query_id": id, "text": text}),
        );
    }

    /// Acts on a tap of `what` under `p`; the words for the tapper.
    fn tap(&self, p: &mut Posted, what: &str, from: i64) -> String {
        if !p.open || loops::pending(&p.link()).is_none() {
            return format!(
                "This question was already answered or closed ({}).",
                loops::closed_how(&p.link())
            );
        }
        let sender = Sender::Telegram(from.to_string());
        let outcome = match what {
            "skip" => loops::act(&p.link(), Action::Skip),
            "more" => loops::act(&p.link(), Action::Extend(loops::TELEGRAM_EXTEND)),
            // The desk's "empty" speaks of writing; here nothing was ticked.
            "send" if p.picked.is_empty() => {
                return "Nothing is ticked: tick one or more options first, or reply to this message to write an answer.".into();
            }
            "send" => loops::answer_link(
                &p.link(),
                &Reply::Picks(p.picked.iter().copied().collect(), String::new()),
                &sender,
            ),
            n => match n.parse::<usize>() {
                Ok(i) if (1..=p.options).contains(&i) && p.multi => {
                    if !p.picked.remove(&i) {
                        p.picked.insert(i);
                    }
                    let _ = self.api.call(
                        "editMessageReplyMarkup",
                        &json!({"chat_id": p.chat_id, "message_id": p.message_id, "reply_markup": keyboard(p)}),
                    );
                    return String::new();
                }
                Ok(i) => {
                    loops::answer_link(&p.link(), &Reply::Picks(vec![i], String::new()), &sender)
                }
                Err(_) => Receipt::Invalid("Unknown button.".into()),
            },
        };
        outcome.message()
    }

    fn send(&self, chat: i64, text: &str, reply_to: Option<i64>) {
        let mut body = json!({"chat_id": chat, "text": text});
        if let Some(id) = reply_to {
            body["reply_parameters"] =
                json!({"message_id": id, "allow_sending_without_reply": true});
        }
        if let Err(e) = self.api.call("sendMessage", &body) {
            warn(&format!("could not send a message: {}", e.what));
        }
    }

    /// Sends each new waiting question and edits each closed one; when the API failed, the
    /// time to try again.
    fn sync(&self) -> Option<Instant> {
        let me = paired(&self.state_dir)?;
        let mut posts = self.lock();
        if posts.retry_at.is_some_and(|t| Instant::now() < t) {
            return posts.retry_at;
        }
        let waiting: Vec<QuestionView> = loops::all()
            .into_iter()
            .filter_map(|l| l.question)
            .collect();
        let mut failed = false;
        for p in posts.by_number.values_mut().filter(|p| p.open) {
            let still = waiting
                .iter()
                .find(|q| q.root == p.root && q.id == p.question);
            if let Some(q) = still {
                // More time given (here, on the page, in the panel): the header says so.
                // Or its loop stopped (or runs again): the header says so.
                if (q.deadline != p.deadline || q.live != p.live) && !p.redacted {
                    p.text = self.render(q, p.chat_id, p.number).text;
                    p.deadline = q.deadline;
                    p.live = q.live;
                    let body = json!({"chat_id": p.chat_id, "message_id": p.message_id, "text": p.text, "parse_mode": "HTML", "link_preview_options": {"is_disabled": true}, "reply_markup": keyboard(p)});
                    match self.api.call("editMessageText", &body) {
                        Ok(_) => {}
                        Err(e) if e.permanent() => {}
                        Err(_) => failed = true,
                    }
                }
                continue;
            }
            // A loop that stopped leaves the registry and keeps its question for its next run,
            // which sends it anew (an edit would not ring the phone).
            let text = match loops::pending(&p.link()) {
                Some(_) => p.closed_text_as(
                    "The loop stopped:",
                    "this question waits for its next run, which sends it here again; a reply to this message is kept for it",
                ),
                None => p.closed_text_as("Closed:", &loops::closed_how(&p.link())),
            };
            let body = json!({"chat_id": p.chat_id, "message_id": p.message_id, "text": text, "parse_mode": "HTML", "link_preview_options": {"is_disabled": true}});
            match self.api.call("editMessageText", &body) {
                Ok(_) => p.open = false,
                // Gone or unchanged: nothing more to do with it.
                Err(e) if e.permanent() => p.open = false,
                Err(_) => failed = true,
            }
        }
        for q in &waiting {
            let key = (q.root.clone(), q.id.clone());
            // An open message only: a question closed (its loop stopped) and resumed is sent anew.
            if posts.refused.contains(&key)
                || posts
                    .by_number
                    .values()
                    .any(|p| p.open && p.root == q.root && p.question == q.id)
            {
                continue;
            }
            posts.next += 1;
            let n = posts.next;
            let mut p = self.render(q, me.chat_id, n);
            let mut body = json!({"chat_id": me.chat_id, "text": p.text, "parse_mode": "HTML", "link_preview_options": {"is_disabled": true}});
            if !p.redacted {
                body["reply_markup"] = keyboard(&p);
            }
            match self.api.call("sendMessage", &body) {
                Ok(m) => {
                    p.message_id = m["message_id"].as_i64().unwrap_or_default();
                    posts.by_number.insert(n, p);
                }
                Err(e) if e.permanent() => {
                    warn(&format!(
                        "Telegram refused a question of {} ({}); it is not sent again: answer it on the page or in the terminal",
                        q.project(),
                        e.what
                    ));
                    posts.refused.insert(key);
                }
                // Tried again later; the other questions are still sent now.
                Err(e) => {
                    warn(&format!("could not send a question: {}; retrying", e.what));
                    failed = true;
                }
            }
        }
        posts
            .refused
            .retain(|(root, id)| waiting.iter().any(|q| &q.root == root && &q.id == id));
        posts.retry_at = failed.then(|| Instant::now() + RETRY_AFTER);
        posts.retry_at
    }

    /// The web page of `q`: its Telegram answer link.
    fn page_link(&self, q: &QuestionView) -> std::io::Result<String> {
        mint_link(&self.state_dir, &q.root, &q.id, Channel::Telegram)
            .map(|t| format!("{}/a/{t}", self.broker_url))
    }

    fn render(&self, q: &QuestionView, chat_id: i64, number: u32) -> Posted {
        let head = format!("<b>{}</b> · iteration {}", html(&q.project()), q.iteration);
        let mut text = format!("{head} · {}", time_left(q));
        let redacted = self.redact;
        let mut content = String::new();
        if redacted {
            let link = self.page_link(q);
            text = format!("A question is waiting in <b>{}</b>.", html(&q.project()));
            if let Ok(l) = link {
                let _ = write!(text, "\nAnswer it here: {}", html(&l));
            }
        } else {
            let mut options = String::new();
            for (i, (label, desc)) in q.options.iter().enumerate() {
                let mut line = format!("{}. {}", i + 1, ralph_protocol::clean(label));
                if let Some(d) = desc {
                    let _ = write!(line, " — {}", ralph_protocol::clean(d));
                }
                let line = format!("\n{}", html(&cut(&line, 300)));
                if options.chars().count() + line.chars().count() > MAX_OPTIONS_CHARS {
                    let _ = write!(
                        options,
                        "\n…and {} more options, on the page",
                        q.options.len() - i
                    );
                    break;
                }
                options.push_str(&line);
            }
            if let Some(d) = &q.default {
                let _ = write!(
                    options,
                    "\n<i>Default:</i> {}",
                    html(&cut(&ralph_protocol::clean(d), 300))
                );
            }
            // The options (and the default) a paragraph of their own, under the question.
            if !options.is_empty() {
                options.insert(0, '\n');
            }
            let footer = format!("\n\n<i>{}</i>", footer(q));
            // The question and its context as Telegram shows markdown; too long for one
            // message, the plain text cut (a cut could not keep every tag closed) and the page.
            let mut body = bot_text::markdown(&q.text);
            if let Some(c) = &q.context {
                let _ = write!(body, "\n\n<i>Context:</i>\n{}", bot_text::markdown(c));
            }
            let used = text.chars().count() + 2 + options.chars().count() + footer.chars().count();
            let body = if used + body.chars().count() <= MAX_MESSAGE_CHARS {
                body
            } else {
                let mut plain = html(&ralph_protocol::clean(&q.text));
                if let Some(c) = &q.context {
                    let _ = write!(plain, "\n\nContext:\n{}", html(&ralph_protocol::clean(c)));
                }
                let link = self.page_link(q);
                let note = match link {
                    Ok(l) => format!(" …(cut; the whole question: {})", html(&l)),
                    Err(_) => " …(cut)".to_string(),
                };
                let room = MAX_MESSAGE_CHARS.saturating_sub(used + note.chars().count());
                format!("{}{note}", cut_html(&plain, room))
            };
            content = format!("{body}{options}");
            let _ = write!(text, "\n\n{content}{footer}");
        }
        Posted {
            number,
            root: q.root.clone(),
            question: q.id.clone(),
            chat_id,
            message_id: 0,
            text,
            head,
            content,
            skip: loops::skip_label(q),
            options: q.options.len(),
            labels: q
                .options
                .iter()
                .map(|(l, _)| ralph_protocol::clean(l))
                .collect(),
            multi: q.multi_select,
            picked: BTreeSet::new(),
            redacted,
            open: true,
            deadline: q.deadline,
            live: q.live,
        }
    }
}

/// What a question's message says to do, by the kind of question.
fn footer(q: &QuestionView) -> &'static str {
    match (q.options.is_empty(), q.multi_select) {
        (true, _) => "Reply to this message to answer.",
        (false, true) => {
            "Tick the options you want, then Send; or reply to this message to write an answer."
        }
        (false, false) => "Tap an option, or reply to this message to write an answer.",
    }
}

/// At most `max` characters of `s`, with `…` when cut.
fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_string(),
    }
}

/// At most `max` characters of escaped text `s`, never cutting inside an entity (`&amp;`).
fn cut_html(s: &str, max: usize) -> &str {
    let Some((mut at, _)) = s.char_indices().nth(max) else {
        return s;
    };
    if let Some(amp) = s[..at].rfind('&')
        && !s[amp..at].contains(';')
    {
        at = amp;
    }
    &s[..at]
}

/// The inline keyboard under a question's message.
fn keyboard(p: &Posted) -> Value {
    let n = p.number;
    let mut rows: Vec<Value> = Vec::new();
    for (i, label) in p.labels.iter().enumerate() {
        let tick = if p.multi {
            if p.picked.contains(&(i + 1)) {
                "☑ "
            } else {
                "☐ "
            }
        } else {
            ""
        };
        let label: String = label.chars().take(60).collect();
        rows.push(
            json!([{"text": format!("{tick}{label}"), "callback_data": format!("q{n}:{}", i + 1)}]),
        );
    }
    if p.multi {
        rows.push(json!([{"text": "Send", "callback_data": format!("q{n}:send")}]));
    }
    rows.push(json!([
        {"text": p.skip, "callback_data": format!("q{n}:skip")},
        {"text": format!("+{}", describe_span(loops::TELEGRAM_EXTEND)), "callback_data": format!("q{n}:more")},
    ]));
    json!({ "inline_keyboard": rows })
}

fn time_left(q: &QuestionView) -> String {
    if !q.live {
        return "the loop is stopped; an answer waits for its next run".into();
    }
    if q.timed_out {
        return "past its deadline".into();
    }
    match q
        .deadline
        .and_then(|d| d.duration_since(SystemTime::now()).ok())
    {
        Some(left) => format!("{} left", duration(left)),
        None if q.deadline.is_none() => "no deadline".into(),
        None => "past its deadline".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, text: &str, mode: u32) -> PathBuf {
        let path = dir.join("remote.toml");
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn remote_toml_is_read_only_when_private_and_well_formed() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("none.toml");
        assert!(settings_at(&missing).unwrap().is_none());
        let ok = write(dir.path(), "[telegram]\ntoken = \"1:abc\"\n", 0o600);
        let s = settings_at(&ok).unwrap().unwrap();
        assert_eq!((s.api_url.as_str(), s.redact), (DEFAULT_API_URL, false));
        for mode in [0o640, 0o604] {
            let open = write(dir.path(), "[telegram]\ntoken = \"1:abc\"\n", mode);
            let err = settings_at(&open).unwrap_err();
            assert!(err.contains("chmod 600") && !err.contains("1:abc"), "{err}");
        }
        let empty = write(dir.path(), "[telegram]\ntoken = \" \"\n", 0o600);
        assert!(settings_at(&empty).unwrap_err().contains("BotFather"));
        let typo = write(
            dir.path(),
            "[telegram]\ntoken = \"1:abc\"\nredcat = true\n",
            0o600,
        );
        let err = settings_at(&typo).unwrap_err();
        assert!(
            err.contains("remote.toml") && err.contains("redcat"),
            "{err}"
        );
    }

    #[test]
    fn buttons_carry_opaque_data_and_multi_select_shows_ticks() {
        let mut p = Posted {
            number: 7,
            root: PathBuf::from("/p"),
            question: QuestionId::from_file("q"),
            chat_id: 1,
            message_id: 2,
            text: String::new(),
            head: String::new(),
            content: String::new(),
            skip: "Skip (use default)",
            options: 2,
            labels: vec!["Redis".into(), "a".repeat(100)],
            multi: true,
            picked: BTreeSet::from([2]),
            redacted: false,
            open: true,
            deadline: None,
            live: true,
        };
        let k = keyboard(&p)["inline_keyboard"].clone();
        assert_eq!(k[0][0]["text"], "☐ Redis");
        assert_eq!(k[0][0]["callback_data"], "q7:1");
        assert_eq!(k[1][0]["text"].as_str().unwrap().chars().count(), 62);
        assert_eq!(k[2][0]["callback_data"], "q7:send");
        assert_eq!(k[3][1]["callback_data"], "q7:more");
        p.multi = false;
        let k = keyboard(&p)["inline_keyboard"].clone();
        assert_eq!(k[0][0]["text"], "Redis");
        assert_eq!(k[2][0]["callback_data"], "q7:skip");
    }
}
