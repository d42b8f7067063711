//! The answer page in a real browser: Debian's chromium, headless, driven over WebDriver
//! (chromium-driver) with fantoccini. `.ci/run` installs both; without them locally the test
//! says why it did nothing.
//!
//! `RALPH_UPDATE_SCREENSHOTS=1` also saves the page at desktop and phone width in `docs/`.

use std::net::TcpListener;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use fantoccini::{ClientBuilder, Locator};
use serde_json::json;

use super::remote::{Broker, pairing_link, post, start_asking, waiting_loop};
use super::util::*;

const CHROMIUM: &str = "/usr/bin/chromium";
const DRIVER: &str = "/usr/bin/chromedriver";

/// `chromedriver` and the chromium it starts, in a process group of their own.
struct Driver(Guarded);

impl Drop for Driver {
    /// A test that fails never closes its session: chromium would outlive the driver killed,
    /// and keep its CPU, memory and inotify instances for the rest of the suite.
    fn drop(&mut self) {
        let group = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
    }
}

/// `chromedriver` on a free port; the URL to reach it.
fn driver() -> (Driver, String) {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cmd = Command::new(DRIVER);
    cmd.arg(format!("--port={port}")).process_group(0);
    let child = Driver(spawn(cmd));
    let url = format!("http://127.0.0.1:{port}");
    wait_until(Duration::from_secs(60), "chromedriver to listen", || {
        ureq::get(format!("{url}/status")).call().ok()
    });
    (child, url)
}

/// A headless chromium session at `size`, with a fresh profile in `profile`.
async fn session(driver_url: &str, profile: &Path, size: (u32, u32)) -> fantoccini::Client {
    // A fresh profile, and none of chromium's calls home: on a machine with no network they are
    // refused many at a time and slow its start.
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({"binary": CHROMIUM, "args": [
            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--disable-quic", format!("--window-size={},{}", size.0, size.1),
            format!("--user-data-dir={}", profile.display()),
        ]}),
    );
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    ClientBuilder::new(connector)
        .capabilities(caps)
        .connect(driver_url)
        .await
        .expect("a chromium session")
}

/// Whether chromium and its driver are here; says why not when they are not.
pub(super) fn have_chromium() -> bool {
    let here = Path::new(CHROMIUM).exists() && Path::new(DRIVER).exists();
    if !here {
        eprintln!(
            "skipped: the real-browser test needs {CHROMIUM} and {DRIVER} (apt-get install chromium chromium-driver; .ci/run does)"
        );
    }
    here
}

/// Opens `url` in a headless chromium session at `size` (a driver of its own, a fresh profile)
/// and runs `steps` on it, then closes the session. Chromium and its driver are killed whatever
/// happens, a failing step included.
pub(super) fn in_chromium<T>(
    size: (u32, u32),
    url: &str,
    steps: impl AsyncFnOnce(&fantoccini::Client) -> T,
) -> T {
    let (_driver, driver_url) = driver();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let profile = tempfile::tempdir().unwrap();
            let c = session(&driver_url, profile.path(), size).await;
            c.goto(url).await.unwrap();
            let out = steps(&c).await;
            c.close().await.unwrap();
            out
        })
}

#[test]
fn a_phone_answers_from_the_answer_link_in_chromium_and_the_agent_gets_it() {
    if !have_chromium() {
        return;
    }
    let broker = Broker::start();
    let p = Project::with_task(
        "task: Pick a cache for the session store\nmax_iterations: 2\nquestion_timeout: 10m",
        "- [ ] cache\n",
    );
    let child = start_asking(
        &broker,
        &p,
        "[iteration 1]\n\
question \"Which cache should the **session store** use?\\n\\nBoth work; Redis adds pub/sub, which the chat feature may want later.\" --option Redis --option Memcached --default Redis --context \"Sessions are 2 KiB on average, 40k active.\"\n\
signal QUESTION\n\
[iteration 2]\n\
save-prompt prompt-2.txt\n",
    );
    let url = broker.answer_url(&p);
    in_chromium((1100, 900), &url, async |c| {
        let text = c
            .find(Locator::Css("section.text"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(
            text.contains("Which cache should the session store use?"),
            "{text}"
        );
        // The countdown is the page's script at work (it is not inline: the CSP allows none).
        let countdown = c.find(Locator::Id("countdown")).await.unwrap();
        let first = countdown.text().await.unwrap();
        assert!(first.ends_with(" left") && first.contains('m'), "{first}");
        let ticked = wait_for_text(c, "countdown", |t| t != first).await;
        assert!(ticked.ends_with(" left"), "{ticked}");
        let screenshots = std::env::var_os("RALPH_UPDATE_SCREENSHOTS").is_some();
        if screenshots {
            let png = c.screenshot().await.unwrap();
            std::fs::write(docs("remote-page-desktop.png"), png).unwrap();
        }
        c.set_window_size(390, 844).await.unwrap();
        c.find(Locator::Css("input[name=option][value='2']"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        c.find(Locator::Id("text"))
            .await
            .unwrap()
            .send_keys("it is already deployed")
            .await
            .unwrap();
        if screenshots {
            let png = c.screenshot().await.unwrap();
            std::fs::write(docs("remote-page-phone.png"), png).unwrap();
        }
        c.find(Locator::Css("button.send"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        // The page's event stream may say first that the question closed (answered from the
        // web page); the POST's own reply follows and has the last word.
        let result = wait_for_text(c, "result", |t| t.starts_with("Answered.")).await;
        assert!(result.contains("picks it up now"), "{result}");
        // ...even when the stream's news of the close comes after the reply.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let later = c
            .find(Locator::Id("result"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(later, result);
    });

    let run = Run::finish(child, Duration::from_secs(30));
    run.expect_code(3);
    let prompt = p.read("prompt-2.txt");
    // The pick and the note as every front end writes them: the label, a blank line, the note.
    assert!(
        prompt.contains("> Memcached\n>\n> it is already deployed"),
        "{prompt}"
    );
    assert_eq!(p.events_of("answer")[0]["by"], "web");
}

/// The text of the element with id `id` once `ready` says so (30 s at most).
pub(super) async fn wait_for_text(
    c: &fantoccini::Client,
    id: &str,
    ready: impl Fn(&str) -> bool,
) -> String {
    let mut text = String::new();
    for _ in 0..300 {
        text = c.find(Locator::Id(id)).await.unwrap().text().await.unwrap();
        if ready(&text) {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Whether the page closed itself says which way it went wrong.
    let main = c
        .execute("return document.querySelector('main').className;", vec![])
        .await
        .unwrap();
    panic!("#{id} never changed as expected; it says {text:?} (main's class: {main})");
}

/// Waits (30 s at most) until the question page's event stream is connected: a change from
/// then on reaches the page.
pub(super) async fn wait_live(c: &fantoccini::Client) {
    for _ in 0..300 {
        let live = c
            .execute(
                "return document.querySelector('main').dataset.live || '';",
                vec![],
            )
            .await
            .unwrap();
        if live == json!("open") {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the page's event stream never opened");
}

fn docs(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs")
        .join(name)
}

/// The bot's real message (as the mock Bot API recorded its `sendMessage`) drawn as Telegram
/// draws it: a chat bubble with the inline keyboard under it. There is no Telegram here, so
/// this is the payload rendered in Telegram's style, not a capture of the app;
/// `RALPH_UPDATE_SCREENSHOTS=1` saves it as `docs/remote-telegram.png`.
#[test]
fn the_bots_question_drawn_as_telegram_shows_it() {
    if !have_chromium() {
        return;
    }
    let bot = super::telegram::Bot::start(false);
    bot.pair();
    let (_p, _child) = bot.waiting_loop(
        "Which cache should the session store use? Both work; Redis adds pub/sub, which the chat feature may want <later>.",
        false,
    );
    let sent = bot.sent_to(super::telegram::OWNER, "Which cache");
    let html = telegram_bubble(&sent.body);
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("telegram.html");
    std::fs::write(&page, &html).unwrap();
    let url = format!("file://{}", page.display());
    in_chromium((420, 900), &url, async |c| {
        let bubble = c.find(Locator::Css(".bubble")).await.unwrap();
        let text = bubble.text().await.unwrap();
        // The agent's `<later>` is text, as Telegram shows it, never a tag.
        assert!(text.contains("may want <later>."), "{text}");
        assert!(text.contains("iteration 1"), "{text}");
        let buttons = c.find_all(Locator::Css(".keyboard button")).await.unwrap();
        let mut labels = Vec::new();
        for b in &buttons {
            labels.push(b.text().await.unwrap());
        }
        assert_eq!(labels, ["Redis", "Memcached", "Skip (use default)", "+1 h"]);
        if std::env::var_os("RALPH_UPDATE_SCREENSHOTS").is_some() {
            let chat = c.find(Locator::Css(".chat")).await.unwrap();
            std::fs::write(
                docs("remote-telegram.png"),
                chat.screenshot().await.unwrap(),
            )
            .unwrap();
        }
    });
}

#[test]
fn the_telegram_drawing_keeps_only_telegrams_tags_and_escapes_the_rest() {
    let body = json!({
        "text": "<b>p</b> <script>alert(1)</script> <img src=x onerror=alert(2)> &lt;i&gt; & \"q\"\n<i>x</i>",
        "reply_markup": {"inline_keyboard": [[{"text": "<b>bold?</b>", "callback_data": "q1:1"}]]},
    });
    let html = telegram_bubble(&body);
    let bubble = html.split("<div class=\"bubble\">").nth(1).unwrap();
    assert!(
        !bubble.contains("<script") && !bubble.contains("<img"),
        "{bubble}"
    );
    assert!(bubble.contains("<b>p</b>"), "{bubble}");
    assert!(
        bubble.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{bubble}"
    );
    assert!(
        bubble.contains("&lt;i&gt; &amp; &quot;q&quot;<br><i>x</i>"),
        "{bubble}"
    );
    assert!(
        bubble.contains(">&lt;b&gt;bold?&lt;/b&gt;</button>"),
        "{bubble}"
    );
}

/// A page that draws a `sendMessage` body (`text` in Telegram's HTML, `reply_markup`'s inline
/// keyboard) in Telegram's style. The text is the agent's, so untrusted: only the tags
/// Telegram itself renders pass, and every other `<`, `&` or quote is escaped.
fn telegram_bubble(body: &serde_json::Value) -> String {
    let text = telegram_html(body["text"].as_str().unwrap_or(""));
    let mut keyboard = String::new();
    for row in body["reply_markup"]["inline_keyboard"]
        .as_array()
        .into_iter()
        .flatten()
    {
        keyboard.push_str("<div class=\"row\">");
        for b in row.as_array().into_iter().flatten() {
            keyboard.push_str(&format!(
                "<button>{}</button>",
                escape(b["text"].as_str().unwrap_or(""))
            ));
        }
        keyboard.push_str("</div>");
    }
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><style>{TELEGRAM_CSS}</style></head>\
<body><div class=\"chat\"><div class=\"header\"><span class=\"avatar\">r</span><div><b>ralph</b><br><small>bot</small></div></div>\
<div class=\"message\"><div class=\"bubble\">{text}<span class=\"time\">14:05</span></div>\
<div class=\"keyboard\">{keyboard}</div></div></div></body></html>"
    )
}

const TELEGRAM_TAGS: &[&str] = &["b", "i", "u", "s", "code", "pre"];
const TELEGRAM_ENTITIES: &[&str] = &["&lt;", "&gt;", "&amp;", "&quot;"];

/// Telegram's HTML (what `parse_mode: HTML` renders) as safe HTML.
fn telegram_html(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let tag = (c == '<')
            .then(|| rest.find('>').map(|end| &rest[..=end]))
            .flatten()
            .filter(|t| {
                let name = t[1..t.len() - 1].trim_start_matches('/');
                TELEGRAM_TAGS.contains(&name)
            });
        let entity = (c == '&')
            .then(|| TELEGRAM_ENTITIES.iter().find(|e| rest.starts_with(**e)))
            .flatten();
        let taken = if let Some(t) = tag {
            out.push_str(t);
            t.len()
        } else if let Some(e) = entity {
            out.push_str(e);
            e.len()
        } else {
            match c {
                '\n' => out.push_str("<br>"),
                c => out.push_str(&escape(&c.to_string())),
            }
            c.len_utf8()
        };
        rest = &rest[taken..];
    }
    out
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// Telegram's look (its light theme), drawn by hand: no asset from elsewhere.
const TELEGRAM_CSS: &str = "body{margin:0;font:15px/1.35 -apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif}\
.chat{width:420px;padding:0 0 16px;background:#c6d7b3 linear-gradient(160deg,#d5e3b9,#a9c7a0)}\
.header{display:flex;gap:10px;align-items:center;padding:8px 12px;background:#fff;color:#000;border-bottom:1px solid #ddd}\
.header small{color:#707579}\
.avatar{width:38px;height:38px;border-radius:50%;background:#5fa0de;color:#fff;display:flex;align-items:center;justify-content:center;font-weight:bold;font-size:18px}\
.message{margin:14px 12px 0;max-width:340px}\
.bubble{background:#fff;border-radius:12px 12px 12px 4px;padding:7px 10px 18px;position:relative;box-shadow:0 1px 1px rgba(0,0,0,.15);word-wrap:break-word}\
.time{position:absolute;right:8px;bottom:3px;font-size:12px;color:#a0acb6}\
.keyboard .row{display:flex;gap:4px;margin-top:4px}\
.keyboard button{flex:1;border:0;border-radius:8px;padding:8px 6px;background:rgba(62,88,55,.35);color:#fff;font:500 14px/1.2 inherit}";

/// The dashboard, open in chromium before any loop starts, shows a new loop and its question
/// from its event stream, without a reload.
#[test]
fn an_open_dashboard_in_chromium_shows_a_new_question_without_a_reload() {
    if !have_chromium() {
        return;
    }
    let broker = Broker::start();
    let (link, _) = pairing_link(&broker);
    // The link sets the device cookie and leads to the dashboard.
    in_chromium((1100, 900), &link, async |c| {
        let main = c.find(Locator::Css("main.dashboard")).await.unwrap();
        assert!(
            main.text()
                .await
                .unwrap()
                .contains("No ralph loop is running")
        );
        c.execute("window.sameDocument = true;", vec![])
            .await
            .unwrap();

        // Blocks this runtime a moment; the browser session waits meanwhile.
        let (p, _child) = waiting_loop(&broker);
        let name = p.root().file_name().unwrap().to_string_lossy().to_string();
        let mut text = String::new();
        for _ in 0..300 {
            text = c
                .find(Locator::Css("main.dashboard"))
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            if text.contains("Answer: Redis or Memcached?") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(text.contains("Answer: Redis or Memcached?"), "{text}");
        assert!(text.contains(&name), "{text}");
        let same = c
            .execute("return window.sameDocument === true;", vec![])
            .await
            .unwrap();
        assert_eq!(same, json!(true), "the page was reloaded");
    });
}

/// Issue 34, item 1: "+5 min" reloaded the page (its `changed` event did), and the note typed
/// and the option picked were gone; so did a deadline moved from elsewhere (Ctrl+E in the
/// terminal, Telegram's "+1 hour"). The countdown moves in place and the page says so.
#[test]
fn more_time_keeps_what_the_user_typed_and_moves_the_countdown_in_place() {
    more_time_in_chromium(false);
}

/// "+5 min" closed the page as if answered when the stream's news of the moved deadline came
/// before the POST's 202 reply (a fast loop, an idle machine): the page took the reply for a
/// final one, said "5 min more to answer." and ignored every later change. The test was
/// ignored for it, as failing "after the suite"; it failed alone one run in two as well. Here
/// the reply is held until the news is shown, so that order happens every time.
#[test]
fn more_time_keeps_the_page_open_when_the_moved_deadline_arrives_before_the_reply() {
    more_time_in_chromium(true);
}

/// A loop's question open in chromium: "+5 min" with an option picked and a note half typed,
/// then more time from elsewhere, then the answer. With `news_first`, the page's reply to
/// "+5 min" waits until the stream's news of the moved deadline is on the page.
fn more_time_in_chromium(news_first: bool) {
    if !have_chromium() {
        return;
    }
    let broker = Broker::start();
    // Ten minutes: under load the page may take a while to open, and a deadline passed takes
    // no more time.
    let p = Project::with_task(
        "task: Cache\nmax_iterations: 2\nquestion_timeout: 10m",
        "- [ ] cache\n",
    );
    let _child = start_asking(
        &broker,
        &p,
        "[iteration 1]\nquestion \"Redis or Memcached?\" --option Redis --option Memcached\nsignal QUESTION\n[iteration 2]\n",
    );
    let url = broker.answer_url(&p);
    in_chromium((390, 844), &url, async |c| {
        c.execute("window.sameDocument = true;", vec![])
            .await
            .unwrap();
        wait_for_text(c, "countdown", |t| t.ends_with("s left")).await;
        wait_live(c).await;
        c.find(Locator::Css("input[name=option][value='2']"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        c.find(Locator::Id("text"))
            .await
            .unwrap()
            .send_keys("half of my answer")
            .await
            .unwrap();
        if news_first {
            // The next reply (to "+5 min") is handed to the page only once the stream's news
            // of the moved deadline shows.
            c.execute(
                "const real = window.fetch; \
                 window.fetch = async (...args) => { \
                   window.fetch = real; \
                   const res = await real(...args); \
                   const result = document.getElementById('result'); \
                   for (let i = 0; i < 300 && !result.textContent.startsWith('5 more minutes: '); i++) \
                     await new Promise((r) => setTimeout(r, 100)); \
                   window.replied = true; \
                   return res; \
                 };",
                vec![],
            )
            .await
            .unwrap();
        }
        c.find(Locator::Css("button[value=extend]"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        let said = wait_for_text(c, "result", |t| t.starts_with("5 more minutes: ")).await;
        assert!(said.ends_with(" left"), "{said}");
        if news_first {
            for _ in 0..300 {
                let replied = c.execute("return window.replied === true;", vec![]).await;
                if replied.unwrap() == json!(true) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            // The reply came after the news: the question is still open, and the page says
            // so.
            let after = c
                .execute(
                    "return [window.replied === true, document.querySelector('main').className, \
                     document.getElementById('result').textContent];",
                    vec![],
                )
                .await
                .unwrap();
            assert_eq!(after[0], json!(true), "{after}");
            assert!(!after[1].as_str().unwrap().contains("closed"), "{after}");
            assert!(
                after[2].as_str().unwrap().starts_with("5 more minutes: "),
                "{after}"
            );
        }
        let countdown = wait_for_text(c, "countdown", |t| {
            t.starts_with("14m") || t.starts_with("15m")
        })
        .await;
        assert!(countdown.ends_with(" left"), "{countdown}");

        // A deadline moved elsewhere (here by another device) reaches the open page the same way.
        let extended = post(&url, Some(broker.origin()), r#"{"action": "extend"}"#);
        assert_eq!(extended.status, 202, "{}", extended.body);
        wait_for_text(c, "countdown", |t| {
            t.starts_with("19m") || t.starts_with("20m")
        })
        .await;

        let kept = c
            .execute(
                "return [window.sameDocument === true, document.getElementById('text').value, \
                 document.querySelector('input[name=option]:checked').value];",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(kept, json!([true, "half of my answer", "2"]));

        c.find(Locator::Css("button.send"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        wait_for_text(c, "result", |t| t.starts_with("Answered.")).await;
    });
    assert_eq!(p.events_of("answer")[0]["by"], "web");
}
