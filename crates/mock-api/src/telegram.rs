//! A stand-in for the Telegram Bot API (`POST /bot<TOKEN>/<method>`), for the tests of
//! `ralph serve`'s bot: a test pushes updates, which `getUpdates` hands out by offset (long
//! polling: it waits for one up to the request's `timeout`), and reads back every other call
//! the bot made (`sendMessage`, `editMessageText`, `answerCallbackQuery`, ...), which are
//! answered as Telegram answers them. [`TelegramMock::set_down`] makes every call fail with 502,
//! as an unreachable API would for a proxy in front of it.

use std::io::BufReader;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::http;

/// The bot's username, as `getMe` gives it.
pub const BOT_USERNAME: &str = "ralph_test_bot";

/// A call the bot made: its method and JSON body.
#[derive(Debug, Clone)]
pub struct Call {
    /// `sendMessage`, `editMessageText`, ...
    pub method: String,
    /// The body as sent.
    pub body: Value,
    /// What the mock answered (`sendMessage`: the message, with its `message_id`).
    pub result: Value,
}

#[derive(Debug, Default)]
struct Inner {
    updates: Vec<Value>,
    next_update_id: i64,
    next_message_id: i64,
    calls: Vec<Call>,
    down: bool,
    /// `getUpdates` calls answered.
    polls: u64,
}

#[derive(Debug, Default)]
struct Shared {
    inner: Mutex<Inner>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A running mock Bot API on 127.0.0.1 (until the process ends).
#[derive(Debug, Clone)]
pub struct TelegramMock {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl TelegramMock {
    /// Listens on a free port.
    pub fn start() -> std::io::Result<TelegramMock> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let accept = Arc::clone(&shared);
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let shared = Arc::clone(&accept);
                std::thread::spawn(move || serve(conn, &shared));
            }
        });
        Ok(TelegramMock { addr, shared })
    }

    /// The `api_url` to give the bot.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Queues an update (its `update_id` is added); returns that id.
    pub fn push(&self, mut update: Value) -> i64 {
        let mut inner = self.shared.lock();
        inner.next_update_id += 1;
        let id = inner.next_update_id;
        update["update_id"] = json!(id);
        inner.updates.push(update);
        self.shared.changed.notify_all();
        id
    }

    /// Queues a text message from user `from` in their private chat, optionally replying to a
    /// message of the bot.
    pub fn message(&self, from: i64, text: &str, reply_to: Option<i64>) -> i64 {
        let mut message = json!({
            "message_id": 100_000 + self.shared.lock().next_update_id,
            "from": {"id": from, "is_bot": false, "first_name": "user"},
            "chat": {"id": from, "type": "private"},
            "date": 0,
            "text": text,
        });
        if let Some(id) = reply_to {
            message["reply_to_message"] =
                json!({"message_id": id, "chat": {"id": from}, "date": 0});
        }
        self.push(json!({ "message": message }))
    }

    /// Queues a tap by user `from` on a button with `data` under the bot's message `message_id`.
    pub fn tap(&self, from: i64, message_id: i64, data: &str) -> i64 {
        let n = self.shared.lock().next_update_id;
        self.push(json!({"callback_query": {
            "id": format!("cb{n}"),
            "from": {"id": from, "is_bot": false, "first_name": "user"},
            "message": {"message_id": message_id, "chat": {"id": from}, "date": 0},
            "chat_instance": "1",
            "data": data,
        }}))
    }

    /// Every call made so far (`getUpdates` and `getMe` left out).
    pub fn calls(&self) -> Vec<Call> {
        self.shared.lock().calls.clone()
    }

    /// How many `getUpdates` calls have been answered so far.
    pub fn polls(&self) -> u64 {
        self.shared.lock().polls
    }

    /// Makes every call fail with 502 (`true`) or work again.
    pub fn set_down(&self, down: bool) {
        self.shared.lock().down = down;
    }

    /// Waits up to `timeout` for a call matching `pred`, and returns it.
    pub fn wait_for(&self, timeout: Duration, pred: impl Fn(&Call) -> bool) -> Option<Call> {
        let end = Instant::now() + timeout;
        let mut inner = self.shared.lock();
        loop {
            if let Some(c) = inner.calls.iter().find(|c| pred(c)) {
                return Some(c.clone());
            }
            let left = end.checked_duration_since(Instant::now())?;
            inner = self
                .shared
                .changed
                .wait_timeout(inner, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

fn serve(conn: TcpStream, shared: &Shared) {
    let Ok(mut out) = conn.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(conn);
    while let Ok(Some(req)) = http::read_request(&mut reader) {
        let (status, body) = handle(&req, shared);
        let bytes = serde_json::to_vec(&body).unwrap_or_default();
        if http::write_response(&mut out, status, "application/json", &bytes, false).is_err()
            || req.wants_close()
        {
            return;
        }
    }
}

fn handle(req: &http::Request, shared: &Shared) -> (u16, Value) {
    let Some(method) = req
        .path()
        .strip_prefix("/bot")
        .and_then(|rest| rest.split_once('/'))
        .map(|(_, m)| m.to_string())
    else {
        return (
            404,
            json!({"ok": false, "error_code": 404, "description": "Not Found"}),
        );
    };
    let body: Value = serde_json::from_slice(&req.body).unwrap_or(json!({}));
    if shared.lock().down {
        return (
            502,
            json!({"ok": false, "error_code": 502, "description": "Bad Gateway"}),
        );
    }
    // As Telegram: a text over 4096 characters is refused.
    let too_long = body["text"]
        .as_str()
        .is_some_and(|t| t.chars().count() > 4096);
    if too_long && matches!(method.as_str(), "sendMessage" | "editMessageText") {
        return (
            400,
            json!({"ok": false, "error_code": 400, "description": "Bad Request: message is too long"}),
        );
    }
    let result = match method.as_str() {
        "getMe" => {
            json!({"id": 1, "is_bot": true, "first_name": "ralph", "username": BOT_USERNAME})
        }
        "getUpdates" => return (200, get_updates(&body, shared)),
        "sendMessage" => {
            let mut inner = shared.lock();
            inner.next_message_id += 1;
            json!({"message_id": inner.next_message_id, "chat": {"id": body["chat_id"]}, "date": 0, "text": body["text"]})
        }
        "editMessageText" | "editMessageReplyMarkup" => {
            json!({"message_id": body["message_id"], "chat": {"id": body["chat_id"]}, "date": 0})
        }
        _ => json!(true),
    };
    let mut inner = shared.lock();
    inner.calls.push(Call {
        method,
        body,
        result: result.clone(),
    });
    shared.changed.notify_all();
    (200, json!({"ok": true, "result": result}))
}

fn get_updates(body: &Value, shared: &Shared) -> Value {
    let offset = body["offset"].as_i64().unwrap_or(0);
    let wait = Duration::from_secs(body["timeout"].as_u64().unwrap_or(0));
    let end = Instant::now() + wait;
    let mut inner = shared.lock();
    inner
        .updates
        .retain(|u| u["update_id"].as_i64() >= Some(offset));
    while inner.updates.is_empty() && !inner.down {
        let Some(left) = end.checked_duration_since(Instant::now()) else {
            break;
        };
        inner = shared
            .changed
            .wait_timeout(inner, left)
            .unwrap_or_else(|p| p.into_inner())
            .0;
        inner
            .updates
            .retain(|u| u["update_id"].as_i64() >= Some(offset));
    }
    inner.polls += 1;
    json!({"ok": true, "result": inner.updates.clone()})
}
