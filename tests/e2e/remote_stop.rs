//! Stopping a loop from the phone: the dashboard's button and the bot's `/stop`, behind the
//! same pairing as everything else there (issue 34, item 12).

use std::time::Duration;

use super::remote::{Broker, dashboard, no_redirects, pair_browser, waiting_loop};
use super::telegram::{Bot, OWNER};
use super::util::*;

fn post_form(url: &str, cookie: Option<&str>, origin: &str, body: &str) -> (u16, String) {
    let mut req = no_redirects()
        .post(url)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept", "text/html")
        .header("origin", origin);
    if let Some(c) = cookie {
        req = req.header("cookie", c);
    }
    let mut resp = req.send(body.to_string()).unwrap();
    (
        resp.status().as_u16(),
        resp.body_mut().read_to_string().unwrap(),
    )
}

/// Regression (issue 34, item 12): the phone could answer a loop but not stop one.
#[test]
fn a_paired_browser_stops_a_loop_and_a_stranger_cannot() {
    let broker = Broker::start();
    let (p, child) = waiting_loop(&broker);
    let (_, _, cookie) = pair_browser(&broker);
    let cookie = cookie.split(';').next().unwrap().to_string();
    let (_, body) = dashboard(&broker, Some(&cookie));
    assert!(body.contains("Stop this loop"), "{body}");
    // The form names the loop by its directory, as the registry has it.
    let root = body
        .split("name=\"root\" value=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or_else(|| panic!("{body}"))
        .to_string();
    let form: String = url_form(&root);
    let stop = format!("{}/stop", broker.url);

    // A stranger (no cookie, or a made-up one) gets the same 404 as for anything else; another
    // site's page is refused.
    assert_eq!(post_form(&stop, None, &broker.url, &form).0, 404);
    assert_eq!(
        post_form(&stop, Some("ralph_device=0000"), &broker.url, &form).0,
        404
    );
    assert_eq!(
        post_form(&stop, Some(&cookie), "https://evil.example", &form).0,
        403
    );
    // A directory that is not a running loop's is refused, and nothing is written there.
    let elsewhere = Project::new();
    elsewhere.write(".ralph/.keep", "");
    let (status, _) = post_form(
        &stop,
        Some(&cookie),
        &broker.url,
        &url_form(&elsewhere.root().display().to_string()),
    );
    assert_eq!(status, 409);
    assert!(!elsewhere.exists(".ralph/stop"));
    assert_eq!(p.state()["status"], "waiting_input", "still running");

    let (status, page) = post_form(&stop, Some(&cookie), &broker.url, &form);
    assert_eq!(status, 202, "{page}");
    assert!(page.contains("Asked the loop in"), "{page}");
    Run::finish(child, Duration::from_secs(30)).expect_code(130);
    assert_eq!(p.state()["status"], "stopped");
    assert!(
        p.state()["pending_question"].is_object(),
        "the question is kept"
    );
    assert_eq!(p.events_of("stop_requested")[0]["by"], "web");
}

/// `root=DIR`, percent-encoded as a browser sends a form.
fn url_form(root: &str) -> String {
    let mut s = String::from("root=");
    for b in root.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                s.push(b as char)
            }
            b => s.push_str(&format!("%{b:02X}")),
        }
    }
    s
}

/// The bot's `/stop`: from the paired user it stops the one loop running; from anyone else it
/// does nothing and says nothing.
#[test]
fn the_paired_telegram_user_stops_a_loop_and_a_stranger_cannot() {
    let bot = Bot::start(false);
    bot.pair();
    let (p, child) = bot.waiting_loop("Stop me?", false);
    bot.mock.message(9999, "/stop", None);
    bot.mock.message(OWNER, "/stop", None);
    bot.sent_to(OWNER, "Asked the loop in");
    Run::finish(child, Duration::from_secs(30)).expect_code(130);
    assert_eq!(p.state()["status"], "stopped");
    let stops = p.events_of("stop_requested");
    assert_eq!(stops.len(), 1, "only the owner's /stop");
    assert_eq!(stops[0]["by"], "telegram");
    assert!(
        !bot.mock.calls().iter().any(|c| c.body["chat_id"] == 9999),
        "the stranger heard nothing"
    );
    bot.mock.message(OWNER, "/stop", None);
    bot.sent_to(OWNER, "No loop is running");
}
