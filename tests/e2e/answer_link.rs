//! The answer link where you look (issue 34, item 11): while `ralph serve` runs, plain lines
//! and plain `ralph status` show the waiting question's link, as the terminal view does
//! (tests/e2e/tui.rs); before, only `ralph status --json` and notifications had it.

use std::time::Duration;

use super::remote::{Broker, get, waiting_loop_asking};
use super::util::*;

/// The first `http…/a/TOKEN` link in `text` after `Or answer on its page: `.
fn link_in(text: &str) -> Option<String> {
    let rest = text.split("Or answer on its page: ").nth(1)?;
    Some(rest.split_whitespace().next()?.to_string())
}

/// Regression (issue 34, item 11): plain lines and `ralph status` said how to answer from a
/// terminal but not the page that answers from a phone.
#[test]
fn plain_lines_and_status_show_the_questions_link_while_serve_runs() {
    let broker = Broker::start();
    let (p, mut child) = waiting_loop_asking(
        &broker,
        "[iteration 1]\nquestion \"Redis or Memcached?\" --option Redis --option Memcached\nsignal QUESTION\n[iteration 2]\nprint done\n",
    );

    let status = broker.ralph(&p).arg("status").output().unwrap();
    let status = String::from_utf8_lossy(&status.stdout).into_owned();
    let from_status = link_in(&status).unwrap_or_else(|| panic!("no link in:\n{status}"));
    assert!(
        from_status.starts_with(&format!("{}/a/", broker.url)),
        "{status}"
    );
    let page = get(&from_status);
    assert_eq!(page.status, 200);
    assert!(page.body.contains("Redis or Memcached?"), "{}", page.body);

    // The loop's own lines: read until the link shows, then answer on the page it names.
    use std::io::{BufRead, BufReader};
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    let from_run = loop {
        let line = lines.next().expect("the run ended").unwrap();
        if let Some(link) = link_in(&line) {
            break link;
        }
        seen.push(line);
    };
    assert!(
        seen.iter().any(|l| l.contains("Redis or Memcached?")),
        "{seen:?}"
    );
    let answered = super::remote::post(&from_run, Some(broker.origin()), r#"{"option": 2}"#);
    assert_eq!(answered.status, 200, "{}", answered.body);
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let _ = wait_until(Duration::from_secs(30), "the run to end", || {
        child.try_wait().unwrap()
    });
    assert!(rest.iter().any(|l| l.contains("Memcached")), "{rest:?}");

    // Without a broker no link is promised.
    let alone = Project::with_task(
        "task: Cache\nmax_iterations: 1\nquestion_timeout: 0",
        "- [ ] cache\n",
    );
    let agent = alone.agent("[iteration 1]\nquestion \"Alone?\"\nsignal QUESTION\n");
    let run = alone.run(&agent, &[]);
    assert!(
        !run.stdout.contains("Or answer on its page"),
        "{}",
        run.stdout
    );
}

/// `ralph serve` started with `args` on a free loopback port: what it printed on stdout up to
/// its banner's end, and on stderr, once stopped.
fn serve_banner(args: &[&str]) -> (String, String) {
    use std::io::{BufRead, BufReader, Read};
    let state = tempfile::tempdir().unwrap();
    let config = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(ralph_bin());
    cmd.args(["serve", "--bind", "127.0.0.1:0"])
        .args(args)
        .env("RALPH_STATE_DIR", state.path())
        .env("XDG_CONFIG_HOME", config.path());
    let mut child = spawn(cmd);
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut stdout = String::new();
    while !stdout.contains("Ctrl-C stops.") {
        assert!(out.read_line(&mut stdout).unwrap() > 0, "{stdout}");
    }
    let _ = child.kill();
    let _ = child.wait();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (stdout, stderr)
}

/// Regression (issue 34, item 8): with --public-url the banner said it listened on the public
/// URL, and a loopback broker drew QR codes of links no phone can open, without a word.
#[test]
fn serve_says_where_it_listens_and_where_links_point_and_warns_of_loopback_links() {
    let (stdout, stderr) = serve_banner(&[]);
    assert!(
        stdout.starts_with("ralph serve: listening on http://127.0.0.1:"),
        "{stdout}"
    );
    assert!(!stdout.contains("links start with"), "{stdout}");
    assert!(
        stderr.contains("warning: its links point at 127.0.0.1:")
            && stderr.contains("tailscale serve --bg "),
        "{stderr}"
    );

    let (stdout, stderr) = serve_banner(&["--public-url", "https://box.tailnet.ts.net"]);
    assert!(
        stdout.starts_with("ralph serve: listening on http://127.0.0.1:"),
        "{stdout}"
    );
    assert!(
        stdout.contains("links start with https://box.tailnet.ts.net (--public-url)"),
        "{stdout}"
    );
    assert!(!stderr.contains("warning"), "{stderr}");

    // Pairing: the loopback broker's link is warned of; the public one's is not.
    let loopback = Broker::start();
    let pair = |broker: &Broker| {
        let out = std::process::Command::new(ralph_bin())
            .args(["serve", "pair", "web"])
            .env("RALPH_STATE_DIR", broker.state.path())
            .output()
            .unwrap();
        assert!(out.status.success());
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (stdout, stderr) = pair(&loopback);
    assert!(
        stdout.contains(&format!("{}/pair/", loopback.url)),
        "{stdout}"
    );
    assert!(
        stderr.contains("ralph: warning: this link and its QR code point at 127.0.0.1:"),
        "{stderr}"
    );
    let public = Broker::start_with(&["--public-url", "https://box.tailnet.ts.net"]);
    let (stdout, stderr) = pair(&public);
    assert!(
        stdout.contains("https://box.tailnet.ts.net/pair/"),
        "{stdout}"
    );
    assert!(!stderr.contains("warning"), "{stderr}");
}
