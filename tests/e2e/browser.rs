//! The answer page in a real browser: Debian's chromium, headless, driven over WebDriver
//! (chromium-driver) with fantoccini. `.ci/run` installs both; without them locally the test
//! says why it did nothing.
//!
//! `RALPH_UPDATE_SCREENSHOTS=1` also saves the page at desktop and phone width in `docs/`.

use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use fantoccini::{ClientBuilder, Locator};
use serde_json::json;

use super::remote::Broker;
use super::util::*;

const CHROMIUM: &str = "/usr/bin/chromium";
const DRIVER: &str = "/usr/bin/chromedriver";

/// `chromedriver` on a free port; the URL to reach it.
fn driver() -> (Guarded, String) {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cmd = Command::new(DRIVER);
    cmd.arg(format!("--port={port}"));
    let child = spawn(cmd);
    let url = format!("http://127.0.0.1:{port}");
    wait_until(Duration::from_secs(60), "chromedriver to listen", || {
        ureq::get(format!("{url}/status")).call().ok()
    });
    (child, url)
}

#[test]
fn a_phone_answers_from_the_answer_link_in_chromium_and_the_agent_gets_it() {
    if !Path::new(CHROMIUM).exists() || !Path::new(DRIVER).exists() {
        eprintln!(
            "skipped: the real-browser test needs {CHROMIUM} and {DRIVER} (apt-get install chromium chromium-driver; .ci/run does)"
        );
        return;
    }
    let broker = Broker::start();
    let p = Project::with_task(
        "task: Pick a cache for the session store\nmax_iterations: 2\nquestion_timeout: 10m",
        "- [ ] cache\n",
    );
    let agent = p.agent(
        "[iteration 1]\n\
question \"Which cache should the **session store** use?\\n\\nBoth work; Redis adds pub/sub, which the chat feature may want later.\" --option Redis --option Memcached --default Redis --context \"Sessions are 2 KiB on average, 40k active.\"\n\
signal QUESTION\n\
[iteration 2]\n\
save-prompt prompt-2.txt\n",
    );
    let mut cmd = broker.ralph(&p);
    cmd.args(["run", "--no-tui", "--agent-cmd", &agent]);
    let child = spawn(cmd);
    p.wait_for_status("waiting_input", Duration::from_secs(20));
    let url = broker.answer_url(&p);
    let (_driver, driver_url) = driver();

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // A fresh profile, and none of chromium's calls home: on a machine with no network
        // they are refused many at a time and slow its start.
        let profile = tempfile::tempdir().unwrap();
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({"binary": CHROMIUM, "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-quic", "--window-size=1100,900",
                format!("--user-data-dir={}", profile.path().display()),
            ]}),
        );
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let c = ClientBuilder::new(connector)
            .capabilities(caps)
            .connect(&driver_url)
            .await
            .expect("a chromium session");
        c.goto(&url).await.unwrap();
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
        let ticked = wait_for_text(&c, "countdown", |t| t != first).await;
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
        let result = wait_for_text(&c, "result", |t| t.starts_with("Answered.")).await;
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
        c.close().await.unwrap();
    });

    let run = Run::finish(child, Duration::from_secs(30));
    run.expect_code(3);
    let prompt = p.read("prompt-2.txt");
    assert!(
        prompt.contains("Memcached: it is already deployed"),
        "{prompt}"
    );
    assert_eq!(p.events_of("answer")[0]["by"], "web");
}

/// The text of the element with id `id` once `ready` says so (30 s at most).
async fn wait_for_text(c: &fantoccini::Client, id: &str, ready: impl Fn(&str) -> bool) -> String {
    let mut text = String::new();
    for _ in 0..300 {
        text = c.find(Locator::Id(id)).await.unwrap().text().await.unwrap();
        if ready(&text) {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("#{id} never changed as expected; it says {text:?}");
}

fn docs(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs")
        .join(name)
}
