//! Revoking a device (issue 34, item 15): `ralph serve devices` lists the paired browsers and
//! the Telegram user, `ralph serve revoke` unpairs one, and what was revoked is treated as a
//! stranger from then on.

use super::remote::{Broker, dashboard, get, no_redirects, pair_browser, waiting_loop};
use super::telegram::{Bot, OWNER};
use super::util::*;

fn serve(broker: &Broker, args: &[&str]) -> Run {
    let mut cmd = std::process::Command::new(ralph_bin());
    cmd.arg("serve")
        .args(args)
        .env("RALPH_STATE_DIR", broker.state.path());
    Run::from_output(cmd.output().unwrap())
}

/// Regression (issue 34, item 15): a lost phone stayed paired; nothing listed or revoked it.
#[test]
fn a_revoked_browser_gets_what_a_stranger_gets() {
    let broker = Broker::start();
    let (_p, _child) = waiting_loop(&broker);
    let none = serve(&broker, &["devices"]);
    none.expect_code(0);
    assert!(none.stdout.contains("Nothing is paired"), "{}", none.stdout);

    let (_, _, first) = pair_browser(&broker);
    let (_, _, second) = pair_browser(&broker);
    let first = first.split(';').next().unwrap().to_string();
    let second = second.split(';').next().unwrap().to_string();
    assert_eq!(dashboard(&broker, Some(&first)).0, 200);

    let listed = serve(&broker, &["devices"]);
    listed.expect_code(0);
    let ids: Vec<String> = listed
        .stdout
        .lines()
        .filter(|l| l.contains("  browser, paired "))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 2, "{}", listed.stdout);
    // The browser's User-Agent tells the two apart.
    assert!(listed.stdout.contains("ureq"), "{}", listed.stdout);
    assert!(
        listed.stdout.contains("serve revoke ID"),
        "{}",
        listed.stdout
    );

    // Which id is the first cookie's: revoke one and see which cookie stops working.
    serve(&broker, &["revoke", &ids[0]]).expect_code(0);
    let (a, _) = dashboard(&broker, Some(&first));
    let (b, _) = dashboard(&broker, Some(&second));
    assert_eq!([a, b].iter().filter(|s| **s == 404).count(), 1, "{a} {b}");
    let revoked = if a == 404 { &first } else { &second };
    let kept = if a == 404 { &second } else { &first };
    // The same answer as a stranger's, on every route a paired device has.
    assert_eq!(
        dashboard(&broker, Some(revoked)),
        dashboard(&broker, None),
        "a revoked browser is a stranger"
    );
    let events = no_redirects()
        .get(format!("{}/events", broker.url))
        .header("cookie", revoked)
        .call()
        .unwrap();
    assert_eq!(events.status().as_u16(), 404);
    assert_eq!(get(&format!("{}/events", broker.url)).status, 404);
    assert_eq!(
        dashboard(&broker, Some(kept)).0,
        200,
        "the other stays paired"
    );

    let unknown = serve(&broker, &["revoke", "ffffff"]);
    unknown.expect_code(1);
    assert!(
        unknown.stderr.contains("no paired browser is ffffff"),
        "{}",
        unknown.stderr
    );
    serve(&broker, &["revoke", "--all"]).expect_code(0);
    assert_eq!(dashboard(&broker, Some(kept)).0, 404);
}

/// A revoked Telegram user's taps and messages are dropped as a stranger's.
#[test]
fn a_revoked_telegram_user_is_ignored() {
    let bot = Bot::start(false);
    bot.pair();
    let (p, _child) = bot.waiting_loop("Redis or Memcached?", false);
    let id = bot.sent_to(OWNER, "Redis or Memcached?").result["message_id"]
        .as_i64()
        .unwrap();
    let run = |args: &[&str]| {
        let mut cmd = std::process::Command::new(ralph_bin());
        cmd.arg("serve")
            .args(args)
            .env("RALPH_STATE_DIR", bot.broker.state.path())
            .env("XDG_CONFIG_HOME", bot.config.path());
        Run::from_output(cmd.output().unwrap())
    };
    let listed = run(&["devices"]);
    assert!(
        listed
            .stdout
            .contains(&format!("telegram  Telegram user {OWNER}, paired ")),
        "{}",
        listed.stdout
    );
    run(&["revoke", "telegram"]).expect_code(0);
    assert!(!run(&["devices"]).stdout.contains("Telegram user"));

    let before = bot.mock.calls().len();
    bot.mock.tap(OWNER, id, "q1:2");
    bot.mock.message(OWNER, "/stop", None);
    // Updates are read in order: once someone else has paired after them, both were read,
    // and neither got a word.
    let code = {
        let out = run(&["pair", "telegram"]);
        out.expect_code(0);
        let prefix = format!(
            "https://t.me/{}?start=",
            ralph_mock_api::telegram::BOT_USERNAME
        );
        let link = out
            .stdout
            .split_whitespace()
            .find(|w| w.starts_with(&prefix))
            .unwrap()
            .to_string();
        link[prefix.len()..].to_string()
    };
    bot.mock.message(777, &format!("/start {code}"), None);
    bot.sent_to(777, "Paired");
    let after: Vec<_> = bot.mock.calls().into_iter().skip(before).collect();
    assert!(
        !after.iter().any(|c| c.method == "answerCallbackQuery"
            || (c.method == "sendMessage" && c.body["chat_id"] == OWNER)),
        "{after:#?}"
    );
    assert_eq!(
        p.state()["status"],
        "waiting_input",
        "not answered, not stopped"
    );
    run(&["revoke", "telegram"]).expect_code(0);
    run(&["revoke", "telegram"]).expect_code(1);
}
