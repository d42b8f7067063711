//! `ralph serve`'s Telegram bot against a mock Bot API (crates/mock-api), the real broker, loop
//! and fake agent: pairing, strangers, answering by a tap or a reply, the terminal first, two
//! loops, the API down, `redact`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use ralph_mock_api::telegram::{BOT_USERNAME, Call, TelegramMock};
use serde_json::Value;

use super::remote::{Broker, get};
use super::util::*;

pub const OWNER: i64 = 4242;
const WAIT: Duration = Duration::from_secs(20);

/// A broker whose Telegram bot talks to a mock Bot API.
pub struct Bot {
    pub mock: TelegramMock,
    pub config: tempfile::TempDir,
    pub broker: Broker,
}

fn write_config(dir: &Path, body: &str, mode: u32) {
    let path = dir.join("ralph/remote.toml");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, body).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
}

impl Bot {
    pub fn start(redact: bool) -> Bot {
        let mock = TelegramMock::start().unwrap();
        let config = tempfile::tempdir().unwrap();
        write_config(
            config.path(),
            &format!(
                "[telegram]\ntoken = \"123:SECRET\"\napi_url = \"{}\"\nredact = {redact}\n",
                mock.url()
            ),
            0o600,
        );
        let broker = Broker::start_with_env(&[], &[("XDG_CONFIG_HOME", config.path())]);
        Bot {
            mock,
            config,
            broker,
        }
    }

    /// The code in the link `ralph serve pair telegram` prints.
    fn pairing_code(&self) -> String {
        let out = ralph_in(self.broker.state.path())
            .args(["serve", "pair", "telegram"])
            .env("XDG_CONFIG_HOME", self.config.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let prefix = format!("https://t.me/{BOT_USERNAME}?start=");
        let link = stdout
            .split_whitespace()
            .find(|w| w.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no link in {stdout}"));
        link[prefix.len()..].to_string()
    }

    pub fn pair(&self) {
        let code = self.pairing_code();
        self.mock.message(OWNER, &format!("/start {code}"), None);
        self.sent_to(OWNER, "Paired");
    }

    /// The first message sent to `chat` containing `text`.
    pub fn sent_to(&self, chat: i64, text: &str) -> Call {
        self.mock
            .wait_for(WAIT, |c| {
                c.method == "sendMessage"
                    && c.body["chat_id"] == chat
                    && c.body["text"].as_str().is_some_and(|t| t.contains(text))
            })
            .unwrap_or_else(|| {
                panic!(
                    "no message with {text:?} to {chat}: {:#?}",
                    self.mock.calls()
                )
            })
    }

    /// The message id of the question mentioning `text`.
    fn question(&self, text: &str) -> i64 {
        self.sent_to(OWNER, text).result["message_id"]
            .as_i64()
            .unwrap()
    }

    fn edited(&self, message_id: i64, text: &str) -> Call {
        self.mock
            .wait_for(WAIT, |c| {
                c.method == "editMessageText"
                    && c.body["message_id"] == message_id
                    && c.body["text"].as_str().is_some_and(|t| t.contains(text))
            })
            .unwrap_or_else(|| {
                panic!(
                    "message {message_id} not edited with {text:?}: {:#?}",
                    self.mock.calls()
                )
            })
    }

    fn tap_reply(&self, text: &str) -> Call {
        self.mock
            .wait_for(WAIT, |c| {
                c.method == "answerCallbackQuery"
                    && c.body["text"].as_str().is_some_and(|t| t.contains(text))
            })
            .unwrap_or_else(|| panic!("no tap answered with {text:?}: {:#?}", self.mock.calls()))
    }

    fn nothing_to(&self, chat: i64) {
        let calls = self.mock.calls();
        assert!(
            !calls.iter().any(|c| c.body["chat_id"] == chat),
            "{chat} got something: {calls:#?}"
        );
    }

    /// A loop whose agent asks `question` (options Redis and Memcached) and saves its next
    /// prompt.
    pub fn waiting_loop(&self, question: &str, multi: bool) -> (Project, Guarded) {
        let multi = if multi { " --multi-select" } else { "" };
        self.asking(
            "2m",
            &format!(
                "[iteration 1]\nquestion \"{question}\" --option Redis --option Memcached --default Redis{multi}\nsignal QUESTION\n[iteration 2]\nsave-prompt prompt-2.txt\n"
            ),
        )
    }

    /// A loop whose questions wait `question_timeout`, once the first iteration of the fake
    /// agent's `script` asked.
    fn asking(&self, question_timeout: &str, script: &str) -> (Project, Guarded) {
        super::remote::loop_asking(&self.broker, question_timeout, script)
    }
}

fn finished(p: &Project, child: Guarded) -> String {
    Run::finish(child, Duration::from_secs(30)).expect_code(3);
    p.read("prompt-2.txt")
}

#[test]
fn pairing_takes_the_right_code_once_and_never_a_wrong_or_expired_one() {
    let bot = Bot::start(false);
    // An expired code: every stored pairing code made to have run out.
    let expired = bot.pairing_code();
    for f in std::fs::read_dir(bot.broker.state.path().join("pairing")).unwrap() {
        let path = f.unwrap().path();
        let mut v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        v["expires_at"] = "2020-01-01T00:00:00Z".into();
        std::fs::write(&path, v.to_string()).unwrap();
    }
    bot.mock.message(8, &format!("/start {expired}"), None);
    bot.mock
        .message(9, "/start 0123456789abcdef0123456789abcdef", None);
    bot.mock.message(9, "hello?", None);
    let code = bot.pairing_code();
    // In a group the code pairs nobody (everyone there could answer) and stays unused.
    bot.mock.push(serde_json::json!({"message": {
        "message_id": 1, "date": 0, "text": format!("/start {code}"),
        "from": {"id": 11, "is_bot": false, "first_name": "g"},
        "chat": {"id": -100, "type": "group"},
    }}));
    bot.mock.message(OWNER, &format!("/start {code}"), None);
    bot.sent_to(OWNER, "Paired");
    // The used code pairs nobody else; the owner's next message shows all before it were read.
    bot.mock.message(10, &format!("/start {code}"), None);
    bot.mock.message(OWNER, "hi", None);
    bot.sent_to(OWNER, "No question is waiting here now.");
    for stranger in [8, 9, 10, 11, -100] {
        bot.nothing_to(stranger);
    }
    let paired: Value = serde_json::from_slice(
        &std::fs::read(bot.broker.state.path().join("telegram.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(paired["user_id"], OWNER);
}

#[test]
fn a_remote_toml_others_can_read_is_refused() {
    let config = tempfile::tempdir().unwrap();
    write_config(config.path(), "[telegram]\ntoken = \"123:SECRET\"\n", 0o644);
    let state = tempfile::tempdir().unwrap();
    let out = ralph_in(state.path())
        .args(["serve", "--bind", "127.0.0.1:0"])
        .env("XDG_CONFIG_HOME", config.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("chmod 600"), "{stderr}");
    assert!(!stderr.contains("SECRET"), "{stderr}");
}

#[test]
fn an_option_tap_answers_and_a_strangers_tap_is_ignored() {
    let bot = Bot::start(false);
    bot.pair();
    let (p, child) = bot.waiting_loop("Redis or <b>Memcached</b>?", false);
    let sent = bot.sent_to(OWNER, "Redis or");
    let id = sent.result["message_id"].as_i64().unwrap();
    let text = sent.body["text"].as_str().unwrap();
    assert!(
        text.contains("Redis or &lt;b&gt;Memcached&lt;/b&gt;?"),
        "{text}"
    );
    assert!(text.contains("iteration 1"), "{text}");
    let keyboard = sent.body["reply_markup"]["inline_keyboard"].to_string();
    assert!(keyboard.contains("Skip (use default)"), "{keyboard}");
    assert!(
        !keyboard.contains("\"callback_data\":\"Memcached\""),
        "opaque data: {keyboard}"
    );

    bot.mock.tap(666, id, "q1:2");
    bot.mock.tap(OWNER, id, "q1:2");
    bot.tap_reply("Answered");
    let prompt = finished(&p, child);
    assert!(prompt.contains("Memcached"), "{prompt}");
    let answer = &p.events_of("answer")[0];
    assert_eq!(answer["by"], "telegram");
    assert_eq!(answer["who"], OWNER.to_string());
    bot.edited(id, "Closed");
    bot.nothing_to(666);
    let taps = bot
        .mock
        .calls()
        .iter()
        .filter(|c| c.method == "answerCallbackQuery")
        .count();
    assert_eq!(taps, 1, "only the owner's tap got an answer");
}

#[test]
fn a_reply_to_the_message_answers_in_free_text() {
    let bot = Bot::start(false);
    bot.pair();
    let (p, child) = bot.waiting_loop("Which cache?", false);
    let id = bot.question("Which cache?");
    bot.mock.message(OWNER, "Redis, with a 5 min TTL", Some(id));
    bot.sent_to(OWNER, "Answered");
    let prompt = finished(&p, child);
    assert!(prompt.contains("Redis, with a 5 min TTL"), "{prompt}");
}

#[test]
fn multi_select_ticks_toggle_and_send_answers_the_picks() {
    let bot = Bot::start(false);
    bot.pair();
    let (p, child) = bot.waiting_loop("Which caches?", true);
    let id = bot.question("Which caches?");
    // Send with nothing ticked was told "The answer is empty. Write one, pick an option, …".
    bot.mock.tap(OWNER, id, "q1:send");
    bot.tap_reply("Nothing is ticked: tick one or more options first");
    bot.mock.tap(OWNER, id, "q1:1");
    bot.mock.tap(OWNER, id, "q1:2");
    bot.mock.tap(OWNER, id, "q1:1");
    bot.mock
        .wait_for(WAIT, |c| {
            c.method == "editMessageReplyMarkup"
                && c.body["reply_markup"].to_string().contains("☐ Redis")
                && c.body["reply_markup"].to_string().contains("☑ Memcached")
        })
        .expect("ticks shown");
    bot.mock.tap(OWNER, id, "q1:send");
    bot.tap_reply("Answered");
    let prompt = finished(&p, child);
    assert!(
        prompt.contains("> Memcached\n"),
        "only the ticked option: {prompt}"
    );
}

#[test]
fn the_terminal_answering_first_closes_the_message_and_a_late_tap_is_refused() {
    let bot = Bot::start(false);
    bot.pair();
    let (p, child) = bot.waiting_loop("Ship it?", false);
    let id = bot.question("Ship it?");
    let out = bot
        .broker
        .ralph(&p)
        .args(["answer", "from the terminal"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let edit = bot.edited(id, "Closed");
    assert!(
        edit.body.get("reply_markup").is_none(),
        "buttons removed: {:?}",
        edit.body
    );
    bot.mock.tap(OWNER, id, "q1:1");
    bot.tap_reply("already answered");
    let prompt = finished(&p, child);
    assert!(prompt.contains("from the terminal"), "{prompt}");
    assert_eq!(p.events_of("answer")[0]["by"], "ralph-answer");
}

#[test]
fn two_loops_each_get_their_own_answer() {
    let bot = Bot::start(false);
    bot.pair();
    let (a, a_child) = bot.waiting_loop("First loop asks", false);
    let (b, b_child) = bot.waiting_loop("Second loop asks", false);
    let a_id = bot.question("First loop asks");
    let b_id = bot.question("Second loop asks");
    assert_ne!(a_id, b_id);
    let a_n = bot.sent_to(OWNER, "First loop asks").body["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        .as_str()
        .unwrap()
        .to_string();
    bot.mock.message(OWNER, "answer for the second", Some(b_id));
    bot.mock.tap(OWNER, a_id, &a_n);
    assert!(finished(&b, b_child).contains("answer for the second"));
    let prompt_a = finished(&a, a_child);
    assert!(
        prompt_a.contains("Redis") && !prompt_a.contains("second"),
        "{prompt_a}"
    );
}

#[test]
fn the_api_down_leaves_the_loops_and_the_broker_alone() {
    let bot = Bot::start(false);
    bot.pair();
    bot.mock.set_down(true);
    let (p, child) = bot.waiting_loop("Anyone there?", false);
    let out = bot
        .broker
        .ralph(&p)
        .args(["answer", "yes"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(finished(&p, child).contains("yes"));
    assert_eq!(
        get(&format!("{}/nothing", bot.broker.url)).status,
        404,
        "the broker still serves"
    );
    // Back up: the next question arrives.
    bot.mock.set_down(false);
    let (_p2, _child2) = bot.waiting_loop("After the outage", false);
    bot.question("After the outage");
}

#[test]
fn redact_sends_only_the_project_and_the_web_link() {
    let bot = Bot::start(true);
    bot.pair();
    let (p, _child) = bot.waiting_loop("Secret plans?", false);
    let sent = bot.sent_to(OWNER, "A question is waiting in");
    let text = sent.body["text"].as_str().unwrap();
    assert!(!text.contains("Secret"), "{text}");
    assert!(text.contains(&format!("{}/a/", bot.broker.url)), "{text}");
    assert!(sent.body.get("reply_markup").is_none());
    let name = p.root().file_name().unwrap().to_string_lossy().to_string();
    assert!(text.contains(&name), "{text}");
}

#[test]
fn plus_one_hour_gives_the_question_an_hour_and_the_loop_says_so() {
    let bot = Bot::start(false);
    bot.pair();
    let (p, child) = bot.waiting_loop("Can it wait?", false);
    let sent = bot.sent_to(OWNER, "Can it wait?");
    let id = sent.result["message_id"].as_i64().unwrap();
    let keyboard = &sent.body["reply_markup"]["inline_keyboard"];
    let last_row = keyboard.as_array().unwrap().last().unwrap();
    assert_eq!(last_row[0]["text"], "Skip (use default)");
    assert_eq!(last_row[1]["text"], "+1 h", "{keyboard}");
    let more = last_row[1]["callback_data"].as_str().unwrap();

    let left = || {
        let deadline = p.state()["pending_question"]["deadline"]
            .as_str()
            .and_then(ralph_protocol::parse_timestamp)?;
        deadline.duration_since(std::time::SystemTime::now()).ok()
    };
    assert!(
        left().unwrap() < Duration::from_secs(130),
        "two minutes to begin with"
    );
    bot.mock.tap(OWNER, id, more);
    bot.tap_reply("1 h more to answer");
    wait_until(WAIT, "the deadline an hour on", || {
        left()
            .filter(|l| *l > Duration::from_secs(3600))
            .map(|_| ())
    });
    assert!(left().unwrap() < Duration::from_secs(3600 + 130));
    // The message's header says the new time left; its buttons stay.
    let edit = bot.edited(id, "1h 0");
    assert!(edit.body["reply_markup"]["inline_keyboard"].is_array());
    assert!(
        !p.exists(".ralph/request.json"),
        "the loop took the request"
    );

    // Still waiting, still answerable from the same message.
    bot.mock.tap(OWNER, id, "q1:1");
    bot.tap_reply("Answered");
    let run = Run::finish(child, Duration::from_secs(30));
    run.expect_code(3);
    assert!(
        run.stdout.contains("1 h more to answer"),
        "the loop says it: {}",
        run.stdout
    );
    assert!(p.read("prompt-2.txt").contains("Redis"));
}

/// Nothing polls the loops: a question already waiting when the user pairs changes no file
/// the bot watches, so the pairing itself must wake the bot to send it.
#[test]
fn a_question_waiting_before_pairing_arrives_once_paired() {
    let bot = Bot::start(false);
    let (_p, _child) = bot.waiting_loop("Asked before pairing", false);
    bot.pair();
    bot.question("Asked before pairing");
}

/// A question over 4096 characters once its options were appended was never sent, and while
/// it failed no other loop's question was sent either (the round stopped at the first
/// failure).
#[test]
fn a_long_question_arrives_cut_with_the_pages_link_and_blocks_no_other() {
    let bot = Bot::start(false);
    bot.pair();
    let long = format!("Which cache? {}", "All the details. ".repeat(300));
    let (_long_p, _long_child) = bot.waiting_loop(&long, false);
    let (_p, _child) = bot.waiting_loop("Short one?", false);
    bot.sent_to(OWNER, "Short one?");
    let sent = bot.sent_to(OWNER, "Which cache?");
    let text = sent.body["text"].as_str().unwrap();
    assert!(
        text.chars().count() <= 4096,
        "{} chars",
        text.chars().count()
    );
    assert!(
        text.contains("the whole question: http://127.0.0.1:"),
        "{text}"
    );
    assert!(
        text.contains("1. Redis") && text.contains("2. Memcached"),
        "{text}"
    );
}

/// A question whose loop was stopped and resumed never reached the phone again: its message
/// said closed, and the resumed question was not sent anew.
#[test]
fn a_resumed_question_is_sent_anew() {
    let bot = Bot::start(false);
    bot.pair();
    let (p, child) = bot.waiting_loop("Resumed or not?", false);
    let first = bot.question("Resumed or not?");
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    Run::finish(child, Duration::from_secs(20));
    bot.edited(first, "The loop stopped");
    let agent = p.agent("[iteration 1]\nsave-prompt prompt-2.txt\n");
    let mut cmd = bot.broker.ralph(&p);
    cmd.args(["run", "--no-tui", "--agent-cmd", &agent]);
    let _resumed = spawn(cmd);
    p.wait_for_status("waiting_input", WAIT);
    let again = bot
        .mock
        .wait_for(WAIT, |c| {
            c.method == "sendMessage"
                && c.result["message_id"].as_i64() != Some(first)
                && c.body["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("Resumed or not?"))
        })
        .unwrap_or_else(|| panic!("not sent anew: {:#?}", bot.mock.calls()));
    assert_eq!(again.body["chat_id"], OWNER);
}

/// The failed-pairing limit was one counter for the whole bot: any stranger who knew the
/// bot's name could block the owner's valid code, silently.
#[test]
fn a_strangers_wrong_codes_never_block_the_owners_pairing() {
    let bot = Bot::start(false);
    for i in 0..10 {
        bot.mock.message(
            666,
            &format!("/start {}", "0".repeat(31) + &i.to_string()),
            None,
        );
    }
    bot.pair();
    bot.nothing_to(666);
}

/// Invisible format characters (bidi overrides and isolates, zero-width, tags) in a question
/// reached the web page and the Telegram message and buttons, where the terminal strips them.
#[test]
fn invisible_characters_reach_neither_the_page_nor_telegram() {
    const HIDDEN: [char; 4] = ['\u{202E}', '\u{2066}', '\u{200B}', '\u{E0041}'];
    let bot = Bot::start(false);
    bot.pair();
    let p = Project::with_task(
        "task: Cache\nmax_iterations: 2\nquestion_timeout: 2m",
        "- [ ] cache\n",
    );
    let agent = p.agent(
        "[iteration 1]\nquestion \"Deploy \u{202E}txt.exe\u{2066} to prod\u{200B}?\" --option \"Y\u{E0041}es\u{202E}\" --option No\nsignal QUESTION\n",
    );
    let mut cmd = bot.broker.ralph(&p);
    cmd.args(["run", "--no-tui", "--agent-cmd", &agent]);
    let _child = spawn(cmd);
    p.wait_for_status("waiting_input", WAIT);
    let sent = bot.sent_to(OWNER, "Deploy");
    let message = sent.body.to_string();
    let page = get(&bot.broker.answer_url(&p)).body;
    for c in HIDDEN {
        assert!(
            !sent.body["text"].as_str().unwrap().contains(c),
            "{message}"
        );
        assert!(
            !sent.body["reply_markup"].to_string().contains(c),
            "{message}"
        );
        assert!(!page.contains(c), "U+{:04X} on the page", c as u32);
    }
    assert!(page.contains("Deploy txt.exe to prod?"), "{page}");
}

/// The front ends an answer can come from, for [`a_multi_select_answer_is_the_same_from_every_front_end`].
#[derive(Debug, Clone, Copy)]
enum FrontEnd {
    Page,
    Telegram,
    RalphAnswer,
}

impl FrontEnd {
    /// Picks options 1 and 3 of the question waiting in `p`, whose Telegram message mentions
    /// `text`.
    fn pick_first_and_third(self, bot: &Bot, p: &Project, text: &str) {
        match self {
            FrontEnd::Page => {
                let url = bot.broker.answer_url(p);
                let got =
                    super::remote::post(&url, Some(bot.broker.origin()), r#"{"options": [1, 3]}"#);
                assert_eq!(got.status, 200, "{}", got.body);
            }
            FrontEnd::Telegram => {
                let sent = bot.sent_to(OWNER, text);
                let id = sent.result["message_id"].as_i64().unwrap();
                let first = sent.body["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
                    .as_str()
                    .unwrap()
                    .to_string();
                let prefix = first.rsplit_once(':').unwrap().0;
                bot.mock.tap(OWNER, id, &format!("{prefix}:1"));
                bot.mock.tap(OWNER, id, &format!("{prefix}:3"));
                bot.mock.tap(OWNER, id, &format!("{prefix}:send"));
            }
            FrontEnd::RalphAnswer => {
                bot.broker
                    .ralph(p)
                    .args(["answer", "1,3"])
                    .output()
                    .unwrap();
            }
        }
    }
}

/// Regression (issue 31; issue 35, item 13): the page and Telegram wrote a multi-select answer
/// as `Redis, Valkey`, where the panel and `ralph answer` write one label per line, so
/// `ralph ask --multi-select --json` answered from a phone printed `"picks": []`. Now every
/// front end writes the same `answer.md`, the agent gets the same prompt and `ralph ask` the
/// same picks. (The panel's side is `question_panel`'s unit test: it hands the same text to
/// the same desk.)
#[test]
fn a_multi_select_answer_is_the_same_from_every_front_end() {
    let bot = Bot::start(false);
    bot.pair();
    let mut answers = Vec::new();
    let mut prompts = Vec::new();
    let mut picks = Vec::new();
    for (n, front) in [FrontEnd::Page, FrontEnd::Telegram, FrontEnd::RalphAnswer]
        .into_iter()
        .enumerate()
    {
        // A loop's QUESTION: `answer.md` as the next iteration finds it, and its prompt.
        let p = Project::with_task(
            "task: Cache\nmax_iterations: 2\nquestion_timeout: 2m",
            "- [ ] cache\n",
        );
        let text = format!("Which caches, loop {n}?");
        let agent = p.agent(&format!(
            "[iteration 1]\nquestion \"{text}\" --option Redis --option Memcached --option Valkey --multi-select\nsignal QUESTION\n[iteration 2]\ncopy .ralph/answer.md answer-copy.md\nsave-prompt prompt-2.txt\n"
        ));
        let mut cmd = bot.broker.ralph(&p);
        cmd.args(["run", "--no-tui", "--agent-cmd", &agent]);
        let child = spawn(cmd);
        p.wait_for_status("waiting_input", WAIT);
        front.pick_first_and_third(&bot, &p, &text);
        let prompt = finished(&p, child);
        let copy = p.read("answer-copy.md");
        let body = copy.rsplit_once("---\n").unwrap().1.to_string();
        answers.push((front, body));
        let start = prompt
            .find("> Redis")
            .unwrap_or_else(|| panic!("{front:?}: {prompt}"));
        prompts.push((
            front,
            prompt[start..start + "> Redis\n> Valkey\n".len()].to_string(),
        ));

        // A lone `ralph ask --json`: its picks.
        let q = Project::empty();
        let text = format!("Which caches, ask {n}?");
        let mut cmd = bot.broker.ralph(&q);
        cmd.args([
            "ask",
            &text,
            "-o",
            "Redis",
            "-o",
            "Memcached",
            "-o",
            "Valkey",
            "--multi-select",
            "--json",
            "--timeout",
            "2m",
        ]);
        let asker = spawn(cmd);
        q.wait_for_status("waiting_input", WAIT);
        front.pick_first_and_third(&bot, &q, &text);
        let asked = Run::finish(asker, WAIT);
        asked.expect_code(0);
        let json: Value = serde_json::from_str(asked.stdout.trim()).unwrap();
        picks.push((front, json["picks"].clone(), json["answer"].clone()));
    }
    for (front, body) in &answers {
        assert_eq!(body, "Redis\nValkey\n", "{front:?}");
    }
    for (front, prompt) in &prompts {
        assert_eq!(prompt, "> Redis\n> Valkey\n", "{front:?}");
    }
    for (front, picked, answer) in &picks {
        assert_eq!(picked, &serde_json::json!(["Redis", "Valkey"]), "{front:?}");
        assert_eq!(answer, "Redis\nValkey", "{front:?}");
    }
}

/// A question reached Telegram with its markdown as typed (`**session store**`), without the
/// context the agent gave, and with a footer saying "Tap an option" under a question that had
/// none; a multi-select one did not say to tick and Send, and Skip said "use default" where
/// there was none.
#[test]
fn the_bot_shows_the_questions_markdown_context_and_what_to_do_by_kind() {
    let bot = Bot::start(false);
    bot.pair();
    let (_p, _child) = bot.asking(
        "2m",
        "[iteration 1]\nquestion \"Should the **session store** use `Redis` or <b>Memcached</b>?\" --context \"Sessions are *2 KiB*; see [the doc](https://example.com/doc) and [this](javascript:alert(1)).\"\nsignal QUESTION\n[iteration 2]\nsleep 60s\n",
    );
    let sent = bot.sent_to(OWNER, "session store");
    let text = sent.body["text"].as_str().unwrap();
    assert!(
        text.contains(
            "Should the <b>session store</b> use <code>Redis</code> or &lt;b&gt;Memcached&lt;/b&gt;?"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "<i>Context:</i>\nSessions are <i>2 KiB</i>; see <a href=\"https://example.com/doc\">the doc</a> and this."
        ),
        "{text}"
    );
    assert!(
        text.ends_with("<i>Reply to this message to answer.</i>"),
        "{text}"
    );
    let keyboard = sent.body["reply_markup"]["inline_keyboard"].to_string();
    assert!(keyboard.contains("\"Skip (agent decides)\""), "{keyboard}");

    let (_q, _other) = bot.waiting_loop("Which features?", true);
    let multi = bot.sent_to(OWNER, "Which features?");
    let text = multi.body["text"].as_str().unwrap();
    assert!(
        text.contains("Which features?\n\n1. Redis\n2. Memcached\n<i>Default:</i> Redis"),
        "{text}"
    );
    assert!(
        text.ends_with(
            "<i>Tick the options you want, then Send; or reply to this message to write an answer.</i>"
        ),
        "{text}"
    );
}

/// A question's message, once closed, still said "1m 59s left" at its top and "Tap an
/// option, or reply to this message" above "Closed": it invited an answer it would refuse.
#[test]
fn a_closed_questions_message_has_no_time_left_and_no_invitation_to_answer() {
    let bot = Bot::start(false);
    bot.pair();
    let (p, child) = bot.waiting_loop("Redis or Memcached?", false);
    let id = bot.question("Redis or Memcached?");
    bot.mock.tap(OWNER, id, "q1:1");
    finished(&p, child);
    let closed = bot.edited(id, "Closed");
    let text = closed.body["text"].as_str().unwrap();
    assert!(
        text.starts_with("<b>")
            && text.contains(" · iteration 1\n\nRedis or Memcached?\n\n1. Redis"),
        "{text}"
    );
    assert!(
        !text.contains(" left") && !text.contains("Tap an option"),
        "{text}"
    );
    assert!(
        text.ends_with(&format!("<b>Closed:</b> answered from Telegram ({OWNER})")),
        "{text}"
    );
}

/// "+1 h" tapped after the deadline passed was answered "1 h more to answer." while the agent
/// had gone on with the default and nothing got more time.
#[test]
fn more_time_tapped_after_the_deadline_is_refused() {
    let bot = Bot::start(false);
    bot.pair();
    let (p, _child) = bot.asking("2s", super::remote::ASK_CACHE_THEN_WAIT);
    let id = bot.question("Which cache?");
    wait_until(Duration::from_secs(30), "the deadline to pass", || {
        (p.state()["pending_question"]["timed_out"] == true).then_some(())
    });
    bot.mock.tap(OWNER, id, "q1:more");
    bot.tap_reply("Too late for more time: the deadline passed and the agent went on with its default (Redis).");
    assert!(!p.exists(".ralph/request.json"));
}

/// A loop stopped with its question's message in Telegram: the message said "Closed: still
/// waiting" (or went on saying "1m 59s left", for a deadline that no longer ran).
#[test]
fn a_stopped_loops_question_message_says_an_answer_waits_for_the_next_run() {
    let bot = Bot::start(false);
    bot.pair();
    let (p, child) = bot.waiting_loop("Redis or Memcached?", false);
    let id = bot.question("Redis or Memcached?");
    let stopped = bot.broker.ralph(&p).arg("stop").output().unwrap();
    assert!(stopped.status.success());
    Run::finish(child, Duration::from_secs(30)).expect_code(130);
    let edited = bot.edited(id, "The loop stopped");
    let text = edited.body["text"].as_str().unwrap();
    assert!(
        text.ends_with("<b>The loop stopped:</b> this question waits for its next run, which sends it here again; a reply to this message is kept for it"),
        "{text}"
    );
    assert!(
        !text.contains(" left") && !text.contains("still waiting"),
        "{text}"
    );
}

/// With one question waiting, an answer written in the chat (not as a reply to the question's
/// message, as people do) was refused: "Reply to a question's message to answer it." With one
/// open, it answers that one; with several, the bot says how to pick.
#[test]
fn a_plain_message_answers_the_one_waiting_question() {
    let bot = Bot::start(false);
    bot.pair();
    let (first, _child) = bot.waiting_loop("Redis or Memcached?", false);
    bot.question("Redis or Memcached?");
    let (_q, _other) = bot.waiting_loop("Which second cache?", false);
    bot.question("Which second cache?");
    bot.mock.message(OWNER, "Valkey", None);
    bot.sent_to(
        OWNER,
        "Several questions are waiting: reply to the message of the one",
    );
    assert!(!first.exists(".ralph/answer.md"));

    let second = Bot::start(false);
    second.pair();
    let (p, child) = second.waiting_loop("Redis or Memcached?", false);
    second.question("Redis or Memcached?");
    second.mock.message(OWNER, "Valkey, it is deployed", None);
    second.sent_to(OWNER, "Answered.");
    let prompt = finished(&p, child);
    assert!(prompt.contains("> Valkey, it is deployed"), "{prompt}");
}
