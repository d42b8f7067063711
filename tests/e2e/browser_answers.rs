//! The answer page and the dashboard in chromium as a person uses them by hand: answering in
//! their own words when the question has options, a phone and a long line, a long paste, the
//! deadline passing, the question closed from the terminal while they write, a dashboard left
//! open. Each test is named after what was wrong when the pages were first used by hand.

use std::time::Duration;

use fantoccini::Locator;
use serde_json::{Value, json};

use super::browser::{have_chromium, in_chromium, wait_for_text, wait_live};
use super::remote::{ASK_CACHE_THEN_WAIT, Broker, loop_asking, pairing_link, waiting_loop};
use super::util::*;

/// Clicks the element `css` selects.
async fn click(c: &fantoccini::Client, css: &str) {
    c.find(Locator::Css(css))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
}

/// Types `text` into the answer box.
async fn write(c: &fantoccini::Client, text: &str) {
    c.find(Locator::Id("text"))
        .await
        .unwrap()
        .send_keys(text)
        .await
        .unwrap();
}

/// A page's script result, as JSON.
async fn js(c: &fantoccini::Client, script: &str) -> Value {
    c.execute(script, vec![]).await.unwrap()
}

/// The page pre-picked the default option, and a radio button cannot be unpicked: an answer
/// written in the user's own words ("Use Valkey") reached the agent as the default's pick with
/// the words as a note under it ("Redis\n\nUse Valkey").
#[test]
fn an_answer_in_your_own_words_is_not_sent_as_the_default_pick() {
    if !have_chromium() {
        return;
    }
    let broker = Broker::start();
    let (p, _child) = loop_asking(
        &broker,
        "10m",
        "[iteration 1]\nquestion \"Which cache?\" --option Redis --option Memcached --default Redis\nsignal QUESTION\n[iteration 2]\nsave-prompt prompt-2.txt\n",
    );
    let url = broker.answer_url(&p);
    in_chromium((390, 844), &url, async |c| {
        let picked = js(
            c,
            "return document.querySelectorAll('input[name=option]:checked').length;",
        )
        .await;
        assert_eq!(picked, json!(0), "nothing is picked for the user");
        let default = c.find(Locator::Css("label.option.default")).await.unwrap();
        assert!(default.text().await.unwrap().contains("default"));
        // A pick made, then undone: the button to clear it shows only while something is picked.
        let unpick = c.find(Locator::Id("unpick")).await.unwrap();
        assert!(!unpick.is_displayed().await.unwrap());
        click(c, "input[name=option][value='2']").await;
        assert!(unpick.is_displayed().await.unwrap());
        unpick.click().await.unwrap();
        let picked = js(
            c,
            "return document.querySelectorAll('input[name=option]:checked').length;",
        )
        .await;
        assert_eq!(picked, json!(0));
        write(c, "Use Valkey, it is already deployed").await;
        click(c, "button.send").await;
        wait_for_text(c, "result", |t| t.starts_with("Answered.")).await;
    });
    wait_until(Duration::from_secs(30), "the next iteration", || {
        p.exists("prompt-2.txt").then_some(())
    });
    let prompt = p.read("prompt-2.txt");
    assert!(
        prompt.contains("> Use Valkey, it is already deployed"),
        "{prompt}"
    );
    assert!(!prompt.contains("> Redis"), "sent as a pick: {prompt}");
}

/// On a phone, a question with a long word (a path, a hash) made the whole page wider than the
/// screen; and a long paste into the answer box was cut by the browser (`maxlength`) without a
/// word, the rest sent as if whole.
#[test]
fn a_long_line_wraps_on_a_phone_and_a_long_paste_is_kept_whole_and_refused() {
    if !have_chromium() {
        return;
    }
    let broker = Broker::start();
    let long = "a".repeat(300);
    let (p, _child) = loop_asking(
        &broker,
        "10m",
        &format!(
            "[iteration 1]\nquestion \"Is /srv/{long} the right path?\" --option \"Yes: /srv/{long}\" --option No --context \"It is /srv/{long} today.\"\nsignal QUESTION\n[iteration 2]\n"
        ),
    );
    let url = broker.answer_url(&p);
    in_chromium((390, 844), &url, async |c| {
        // A window set at start may keep a desktop's least width; set now, it is a phone's.
        c.set_window_size(390, 844).await.unwrap();
        click(c, "details.context summary").await;
        let width = js(
            c,
            "const d = document.documentElement; return [window.innerWidth, d.scrollWidth - d.clientWidth];",
        )
        .await;
        assert_eq!(
            width,
            json!([390, 0]),
            "[phone, how much wider the page is]"
        );

        // As a paste is typed: the browser's own limit, if any, applies.
        let kept = js(
            c,
            "const t = document.getElementById('text'); t.focus(); \
             document.execCommand('insertText', false, 'y'.repeat(20000)); return t.value.length;",
        )
        .await;
        assert_eq!(kept, json!(20000), "the paste was cut");
        let size = c.find(Locator::Id("size")).await.unwrap();
        assert!(size.is_displayed().await.unwrap());
        let said = size.text().await.unwrap();
        assert!(said.starts_with("Too long to send: 20000 bytes"), "{said}");
        click(c, "button.send").await;
        let refused = wait_for_text(c, "result", |t| !t.is_empty()).await;
        assert!(
            refused.starts_with("The answer is too long: 20000 bytes"),
            "{refused}"
        );
        let left = js(c, "return document.getElementById('text').value.length;").await;
        assert_eq!(left, json!(20000), "the text stays to be shortened");
    });
    assert!(!p.exists(".ralph/answer.md"));
}

/// After the deadline the page still offered "+5 min", and its reply ("5 min more to answer.")
/// said it worked while the agent had gone on already; the page said "its best guess" where
/// the terminal said the agent took the default.
#[test]
fn after_the_deadline_the_page_offers_no_more_time_and_names_the_default_taken() {
    if !have_chromium() {
        return;
    }
    let broker = Broker::start();
    let (p, _child) = loop_asking(&broker, "5s", ASK_CACHE_THEN_WAIT);
    let url = broker.answer_url(&p);
    in_chromium((390, 844), &url, async |c| {
        let said = wait_for_text(c, "countdown", |t| t.starts_with("deadline passed")).await;
        assert_eq!(
            said,
            "deadline passed: the agent went on with its default (Redis); a late answer still reaches it"
        );
        let extend = c.find(Locator::Css("button[value=extend]")).await.unwrap();
        assert!(
            !extend.is_displayed().await.unwrap(),
            "+5 min after the deadline"
        );
        let skip = c.find(Locator::Css("button[value=skip]")).await.unwrap();
        assert_eq!(skip.text().await.unwrap(), "Skip (use default)");
    });
}

/// A question answered in the terminal while the page was open closed the page, and what the
/// user had half written there vanished with the form.
#[test]
fn a_question_answered_in_the_terminal_keeps_what_the_page_had_written() {
    if !have_chromium() {
        return;
    }
    let broker = Broker::start();
    let (p, _child) = loop_asking(&broker, "10m", ASK_CACHE_THEN_WAIT);
    let url = broker.answer_url(&p);
    in_chromium((390, 844), &url, async |c| {
        wait_live(c).await;
        write(c, "Memcached, because the ops team").await;
        let answered = broker.ralph(&p).args(["answer", "Redis"]).output().unwrap();
        assert!(answered.status.success());
        let said = wait_for_text(c, "result", |t| t.starts_with("This question closed")).await;
        assert!(said.contains("answered from `ralph answer`"), "{said}");
        let text = c.find(Locator::Id("text")).await.unwrap();
        assert!(text.is_displayed().await.unwrap(), "the draft is gone");
        assert_eq!(
            text.prop("value").await.unwrap().as_deref(),
            Some("Memcached, because the ops team")
        );
        assert_eq!(
            text.prop("readOnly").await.unwrap().as_deref(),
            Some("true")
        );
        let send = c.find(Locator::Css("button.send")).await.unwrap();
        assert!(!send.is_displayed().await.unwrap());
    });
}

/// A dashboard left open said "elapsed 4s" for as long as nothing else changed: its stream
/// sends nothing when only the clock moves, and the page did not count.
#[test]
fn an_open_dashboard_counts_a_running_loops_elapsed_time() {
    if !have_chromium() {
        return;
    }
    let broker = Broker::start();
    let (_p, _child) = waiting_loop(&broker);
    let (link, _) = pairing_link(&broker);
    in_chromium((1100, 900), &link, async |c| {
        // The stream's first list replaces the page's: from then on, nothing is sent.
        wait_live(c).await;
        let read = "return document.querySelector('dd.elapsed').textContent;";
        let first = js(c, read).await;
        assert!(first.as_str().unwrap().ends_with('s'), "{first}");
        let mut now = first.clone();
        for _ in 0..50 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            now = js(c, read).await;
            if now != first {
                break;
            }
        }
        assert_ne!(now, first, "the elapsed time stood still");
    });
}

/// "Stop this loop" on the dashboard, clicked in a real browser, was refused as "sent from
/// another site's page": the form's POST carries `Origin: null` (the page's referrer policy
/// keeps even the origin back), which the broker took for a foreign one. Only programs that
/// set a right `Origin` by hand could stop a loop.
#[test]
fn the_dashboards_stop_button_stops_the_loop_in_chromium() {
    if !have_chromium() {
        return;
    }
    let broker = Broker::start();
    let (p, child) = waiting_loop(&broker);
    let (link, _) = pairing_link(&broker);
    in_chromium((390, 844), &link, async |c| {
        // The stream's first list replaces the page's buttons.
        wait_live(c).await;
        click(c, "form.stop button").await;
        let main = c
            .wait()
            .at_most(Duration::from_secs(30))
            .for_element(Locator::Css("main.message"))
            .await
            .unwrap();
        let text = main.text().await.unwrap();
        assert!(text.starts_with("Stopping\nAsked the loop in "), "{text}");
        assert!(text.ends_with("Back to the loops"), "{text}");
    });
    Run::finish(child, Duration::from_secs(30)).expect_code(130);
    assert_eq!(p.state()["status"], "stopped");
}

/// A loop stopped (`ralph stop`, Ctrl-C) with its question's page open: the page went on
/// counting down to a deadline no longer running, then said the agent had gone on with the
/// default, and offered Skip and "+5 min", which were refused. The question waits for the
/// next `ralph run`; an answer now is kept for it.
#[test]
fn a_stopped_loops_question_page_says_the_answer_waits_for_the_next_run() {
    if !have_chromium() {
        return;
    }
    let broker = Broker::start();
    let (p, child) = loop_asking(&broker, "10m", ASK_CACHE_THEN_WAIT);
    let url = broker.answer_url(&p);
    in_chromium((390, 844), &url, async |c| {
        wait_live(c).await;
        let stopped = broker.ralph(&p).arg("stop").output().unwrap();
        assert!(stopped.status.success());
        let said = wait_for_text(c, "countdown", |t| t.starts_with("the loop is stopped")).await;
        assert_eq!(
            said,
            "the loop is stopped: an answer waits for its next `ralph run`, which delivers it"
        );
        for button in ["button[value=skip]", "button[value=extend]"] {
            let b = c.find(Locator::Css(button)).await.unwrap();
            assert!(!b.is_displayed().await.unwrap(), "{button} shown");
        }
        write(c, "Memcached").await;
        click(c, "button.send").await;
        let saved = wait_for_text(c, "result", |t| t.starts_with("Answer saved.")).await;
        assert!(
            saved.contains("the next `ralph run` delivers it"),
            "{saved}"
        );
    });
    Run::finish(child, Duration::from_secs(30)).expect_code(130);
    // Opened afresh, the page says the same.
    assert!(p.read(".ralph/answer.md").contains("Memcached"));
}
