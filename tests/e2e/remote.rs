//! `ralph serve`: answer links over HTTP against the real broker, loop and fake agent, and the
//! security cases (wrong tokens, foreign origins, hostile questions, closed links, big bodies,
//! races with the terminal).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::util::*;

/// A running `ralph serve` with its own state directory (registry, links, lock).
pub struct Broker {
    pub state: tempfile::TempDir,
    pub url: String,
    pub child: Guarded,
}

impl Broker {
    /// Starts `ralph serve` on a free loopback port and waits until it says where it listens.
    pub fn start() -> Broker {
        Broker::start_with(&[])
    }

    /// [`Broker::start`] with more arguments for `ralph serve`.
    pub fn start_with(args: &[&str]) -> Broker {
        Broker::start_with_env(args, &[])
    }

    /// [`Broker::start_with`] with more environment variables (`XDG_CONFIG_HOME`).
    pub fn start_with_env(args: &[&str], env: &[(&str, &Path)]) -> Broker {
        let state = tempfile::Builder::new()
            .prefix("ralph-state-")
            .tempdir()
            .unwrap();
        let mut cmd = ralph_in(state.path());
        cmd.arg("serve");
        if !args.contains(&"--bind") {
            cmd.args(["--bind", "127.0.0.1:0"]);
        }
        cmd.args(args);
        cmd.envs(env.iter().copied());
        let child = spawn(cmd);
        let lock = state.path().join("serve.lock");
        let url = wait_until(Duration::from_secs(20), "serve.lock", || {
            let raw = std::fs::read_to_string(&lock).ok()?;
            let v: serde_json::Value = serde_json::from_str(&raw).ok()?;
            v["url"].as_str().map(str::to_string)
        });
        Broker { state, url, child }
    }

    /// `ralph ARGS` in `p`, seeing this broker.
    pub fn ralph(&self, p: &Project) -> Command {
        let mut cmd = p.ralph();
        cmd.env("RALPH_STATE_DIR", self.state.path());
        cmd
    }

    /// The answer link `ralph status --json` gives for `p`'s waiting question.
    pub fn answer_url(&self, p: &Project) -> String {
        let out = self.ralph(p).args(["status", "--json"]).output().unwrap();
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        json["pending_question"]["answer_url"]
            .as_str()
            .unwrap_or_else(|| panic!("no answer_url in {json}"))
            .to_string()
    }

    /// The origin a browser on the broker's own pages sends.
    pub fn origin(&self) -> &str {
        &self.url
    }
}

/// The certificate and key in `fixtures/tls/` (for `127.0.0.1` and `localhost`; how they were
/// made: `fixtures/tls/README.md`).
pub fn tls_fixture() -> (PathBuf, PathBuf) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tls");
    (dir.join("cert.pem"), dir.join("key.pem"))
}

/// A client that trusts the fixture's certificate, and nothing else.
fn https() -> ureq::Agent {
    let pem = std::fs::read(tls_fixture().0).unwrap();
    let cert = ureq::tls::Certificate::from_pem(&pem).unwrap();
    let roots = ureq::tls::RootCerts::Specific(std::sync::Arc::new(vec![cert]));
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .tls_config(ureq::tls::TlsConfig::builder().root_certs(roots).build())
        .build()
        .into()
}

pub fn http() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

/// A response's status, headers we look at, and body.
pub struct Got {
    pub status: u16,
    pub headers: ureq::http::HeaderMap,
    pub body: String,
}

pub fn get(url: &str) -> Got {
    let mut resp = http().get(url).call().unwrap();
    Got {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        body: resp.body_mut().read_to_string().unwrap(),
    }
}

pub fn post(url: &str, origin: Option<&str>, json: &str) -> Got {
    let mut req = http().post(url).header("content-type", "application/json");
    if let Some(o) = origin {
        req = req.header("origin", o);
    }
    let mut resp = req.send(json.to_string()).unwrap();
    Got {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        body: resp.body_mut().read_to_string().unwrap(),
    }
}

const ASK: &str = "\
[iteration 1]
question \"Redis or Memcached?\" --option Redis --option Memcached --default Redis
signal QUESTION
[iteration 2]
save-prompt prompt-2.txt
";

/// A loop (seeing `broker`) whose agent asked [`ASK`]'s question, with a minute to answer.
pub fn waiting_loop(broker: &Broker) -> (Project, Guarded) {
    waiting_loop_asking(broker, ASK)
}

/// [`waiting_loop`] with another fake-agent script, whose first iteration asks.
pub fn waiting_loop_asking(broker: &Broker, script: &str) -> (Project, Guarded) {
    loop_asking(broker, "1m", script)
}

/// A loop (seeing `broker`) of up to two iterations whose questions wait `question_timeout`,
/// once the first iteration of the fake agent's `script` asked.
pub fn loop_asking(broker: &Broker, question_timeout: &str, script: &str) -> (Project, Guarded) {
    let p = Project::with_task(
        &format!("task: Cache\nmax_iterations: 2\nquestion_timeout: {question_timeout}"),
        "- [ ] cache\n",
    );
    let child = start_asking(broker, &p, script);
    (p, child)
}

/// A fake agent's script: "Which cache?" with Redis (the default) and Memcached, then a second
/// iteration that keeps the loop running a minute.
pub const ASK_CACHE_THEN_WAIT: &str = "[iteration 1]\nquestion \"Which cache?\" --option Redis --option Memcached --default Redis\nsignal QUESTION\n[iteration 2]\nsleep 60s\n";

/// `ralph run` of the fake agent on `script` (whose first iteration asks) in `p`, seeing
/// `broker`, once its question waits.
pub fn start_asking(broker: &Broker, p: &Project, script: &str) -> Guarded {
    let agent = p.agent(script);
    let mut cmd = broker.ralph(p);
    cmd.args(["run", "--no-tui", "--agent-cmd", &agent]);
    let child = spawn(cmd);
    p.wait_for_status("waiting_input", Duration::from_secs(60));
    child
}

/// A lone `ralph ask` (no loop) waiting on `text`, seeing `broker`.
fn asking(broker: &Broker, p: &Project, text: &str, options: &[&str]) -> Guarded {
    let mut cmd = broker.ralph(p);
    cmd.args(["ask", text, "--timeout", "1m"]);
    for o in options {
        cmd.args(["--option", o]);
    }
    let child = spawn(cmd);
    p.wait_for_status("waiting_input", Duration::from_secs(20));
    child
}

#[test]
fn an_answer_link_answers_from_the_page_and_the_next_iteration_has_it() {
    let broker = Broker::start();
    let (p, child) = waiting_loop(&broker);
    let url = broker.answer_url(&p);
    assert!(url.starts_with(&format!("{}/a/", broker.url)), "{url}");

    let page = get(&url);
    assert_eq!(page.status, 200);
    assert!(page.body.contains("Redis or Memcached?"), "{}", page.body);
    assert!(page.body.contains("value=\"2\""), "options as inputs");
    let csp = page.headers["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    assert_eq!(page.headers["referrer-policy"], "no-referrer");

    let answered = post(
        &url,
        Some(broker.origin()),
        r#"{"option": 2, "answer": "it is already deployed"}"#,
    );
    assert_eq!(answered.status, 200, "{}", answered.body);
    assert!(answered.body.contains("Answered"), "{}", answered.body);

    let run = Run::finish(child, Duration::from_secs(30));
    run.expect_code(3);
    let prompt = p.read("prompt-2.txt");
    // The pick and the note as every front end writes them: the label, a blank line, the note.
    assert!(
        prompt.contains("> Memcached\n>\n> it is already deployed"),
        "{prompt}"
    );
    let answer = &p.events_of("answer")[0];
    assert_eq!(answer["by"], "web");
    assert!(
        answer["who"].as_str().unwrap().starts_with("answer link "),
        "{answer}"
    );
    let clarifications = p.read(".ralph/clarifications.md");
    assert!(
        clarifications.contains("from the web page of `ralph serve` (answer link "),
        "{clarifications}"
    );

    // The question closed: the link says how (as a late POST is told), and answers are
    // refused.
    let closed = get(&url);
    assert_eq!(closed.status, 410, "{}", closed.body);
    assert!(
        closed.body.contains("answered from the web page"),
        "{}",
        closed.body
    );
    let late = post(&url, Some(broker.origin()), r#"{"answer": "too late"}"#);
    assert_eq!(late.status, 409, "{}", late.body);
    assert!(late.body.contains("no longer waiting"), "{}", late.body);
}

#[test]
fn wrong_tokens_look_like_any_unknown_page() {
    let broker = Broker::start();
    let p = Project::empty();
    let _ask = asking(&broker, &p, "Ship it?", &[]);
    let good = broker.answer_url(&p);
    let token = good.rsplit('/').next().unwrap();
    let mut flipped = token.to_string().into_bytes();
    flipped[0] = if flipped[0] == b'a' { b'b' } else { b'a' };
    let flipped = String::from_utf8(flipped).unwrap();
    let pages: Vec<Got> = [
        format!("{}/a/{flipped}", broker.url),
        format!("{}/a/{}", broker.url, &token[..31]),
        format!("{}/a/{}", broker.url, token.to_uppercase()),
        format!("{}/a/..%2F..%2Fetc%2Fpasswd", broker.url),
        format!("{}/nothing/here", broker.url),
    ]
    .iter()
    .map(|u| get(u))
    .collect();
    for g in &pages {
        assert_eq!((g.status, &g.body), (pages[4].status, &pages[4].body));
    }
    assert_eq!(pages[4].status, 404);
    assert_eq!(get(&good).status, 200);
    // A POST with a wrong token answers nothing.
    let wrong = post(
        &format!("{}/a/{flipped}", broker.url),
        None,
        r#"{"answer": "yes"}"#,
    );
    assert_eq!(wrong.status, 404);
    assert!(!p.exists(".ralph/answer.md"));
}

#[test]
fn a_post_from_another_site_is_refused() {
    let broker = Broker::start();
    let p = Project::empty();
    let _ask = asking(&broker, &p, "Ship it?", &[]);
    let url = broker.answer_url(&p);
    for origin in ["https://evil.example", "null", "http://127.0.0.1:1"] {
        let refused = post(&url, Some(origin), r#"{"answer": "yes"}"#);
        assert_eq!(refused.status, 403, "{origin}: {}", refused.body);
    }
    let mut resp = http()
        .post(&url)
        .header("content-type", "application/json")
        .header("sec-fetch-site", "cross-site")
        .send(r#"{"answer": "yes"}"#)
        .unwrap();
    assert_eq!(resp.status().as_u16(), 403);
    let _ = resp.body_mut().read_to_string();
    assert!(!p.exists(".ralph/answer.md"), "nothing was answered");
    let ok = post(&url, Some(broker.origin()), r#"{"answer": "yes"}"#);
    assert_eq!(ok.status, 200, "{}", ok.body);
}

#[test]
fn script_and_javascript_links_in_a_question_stay_inert() {
    let broker = Broker::start();
    let p = Project::empty();
    let _ask = asking(
        &broker,
        &p,
        "Which? <script>alert(1)</script> [docs](javascript:alert(2)) <img src=x onerror=alert(3)>",
        &["<b onmouseover=alert(4)>bold</b>"],
    );
    let page = get(&broker.answer_url(&p));
    assert_eq!(page.status, 200);
    let body = &page.body;
    assert!(!body.contains("<script>alert"), "{body}");
    assert!(!body.contains("javascript:"), "{body}");
    assert!(!body.contains("<img"), "{body}");
    assert!(!body.contains("<b onmouseover"), "{body}");
    assert!(
        body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{body}"
    );
    // The only scripts are the broker's own file.
    assert_eq!(body.matches("<script").count(), 1, "{body}");
    assert!(body.contains("<script src=\"/assets/page.js\" defer></script>"));
}

#[test]
fn oversize_bodies_and_answers_are_refused() {
    let broker = Broker::start();
    let p = Project::empty();
    let _ask = asking(&broker, &p, "Ship it?", &["yes", "no"]);
    let url = broker.answer_url(&p);
    let huge = format!(r#"{{"answer": "{}"}}"#, "x".repeat(70 * 1024));
    let big = post(&url, Some(broker.origin()), &huge);
    assert_eq!(big.status, 413, "{}", big.body);
    let long = format!(r#"{{"answer": "{}"}}"#, "x".repeat(16 * 1024 + 1));
    let too_long = post(&url, Some(broker.origin()), &long);
    assert_eq!(too_long.status, 422, "{}", too_long.body);
    assert!(too_long.body.contains("too long"), "{}", too_long.body);
    let empty = post(&url, Some(broker.origin()), r#"{"answer": "  "}"#);
    assert_eq!(empty.status, 422);
    assert!(empty.body.contains("empty"), "{}", empty.body);
    let out = post(&url, Some(broker.origin()), r#"{"option": 3}"#);
    assert_eq!(out.status, 422);
    assert!(
        out.body.contains("Option 3 is out of range"),
        "{}",
        out.body
    );
    let junk = post(&url, Some(broker.origin()), r#"{"answr": "typo"}"#);
    assert_eq!(junk.status, 400, "{}", junk.body);
    assert!(!p.exists(".ralph/answer.md"), "nothing was answered");
}

#[test]
fn the_page_and_the_terminal_racing_have_exactly_one_winner() {
    let broker = Broker::start();
    for round in 0..3 {
        let p = Project::empty();
        let asker = asking(&broker, &p, "Ship it?", &[]);
        let url = broker.answer_url(&p);
        let origin = broker.origin().to_string();
        let web =
            std::thread::spawn(move || post(&url, Some(&origin), r#"{"answer": "from the page"}"#));
        let terminal = broker
            .ralph(&p)
            .args(["answer", "from the terminal"])
            .output()
            .unwrap();
        let web = web.join().unwrap();
        let web_won = web.status == 200;
        let terminal_won = terminal.status.success();
        assert!(
            web_won != terminal_won,
            "round {round}: exactly one wins (page {}: {}; terminal {:?}: {})",
            web.status,
            web.body,
            terminal.status,
            String::from_utf8_lossy(&terminal.stderr)
        );
        let loser = match web_won {
            true => String::from_utf8_lossy(&terminal.stderr).into_owned(),
            false => web.body.clone(),
        };
        // The loser is told who won: while the winner's answer is still on the desk
        // ("answered first"), or once it was taken and the question closed ("already answered
        // by …" from `ralph answer`, "answered from …" from the page).
        assert!(
            ["answered first", "already answered by", "answered from"]
                .iter()
                .any(|told| loser.contains(told)),
            "round {round}: {loser}"
        );
        let asked = Run::finish(asker, Duration::from_secs(20));
        let expect = if web_won {
            "from the page"
        } else {
            "from the terminal"
        };
        assert_eq!(asked.stdout.trim(), expect);
    }
}

#[test]
fn notify_command_and_webhook_get_the_answer_link() {
    let broker = Broker::start();
    let p = Project::with_task(
        "task: Notify\nmax_iterations: 2\nquestion_timeout: 0\nnotify_command: printf '%s' \"$RALPH_ANSWER_URL\" > link.txt",
        "- [ ] x\n",
    );
    let agent = p.agent("[iteration 1]\nquestion \"Go?\"\nsignal QUESTION\n[iteration 2]\n");
    let mut cmd = broker.ralph(&p);
    cmd.args(["run", "--no-tui", "--agent-cmd", &agent]);
    Run::finish(spawn(cmd), Duration::from_secs(30)).expect_code(3);
    let link = wait_until(Duration::from_secs(10), "link.txt", || {
        std::fs::read_to_string(p.path("link.txt")).ok()
    });
    assert!(link.starts_with(&format!("{}/a/", broker.url)), "{link:?}");
    // Without a broker the variable is set and empty.
    let q = Project::with_task(
        "task: Notify\nmax_iterations: 2\nquestion_timeout: 0\nnotify_command: printf '[%s]' \"$RALPH_ANSWER_URL\" > link.txt",
        "- [ ] x\n",
    );
    let agent = q.agent("[iteration 1]\nquestion \"Go?\"\nsignal QUESTION\n[iteration 2]\n");
    let lonely = tempfile::tempdir().unwrap();
    let mut cmd = q.ralph();
    cmd.env("RALPH_STATE_DIR", lonely.path())
        .args(["run", "--no-tui", "--agent-cmd", &agent]);
    Run::finish(spawn(cmd), Duration::from_secs(30)).expect_code(3);
    let none = wait_until(Duration::from_secs(10), "link.txt", || {
        std::fs::read_to_string(q.path("link.txt")).ok()
    });
    assert_eq!(none, "[]");
}

#[test]
fn one_broker_per_machine_and_loopback_unless_told() {
    let broker = Broker::start();
    let second = ralph_in(broker.state.path())
        .args(["serve", "--bind", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(1));
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("already runs on this machine"), "{err}");
    assert!(err.contains(&broker.url), "{err}");

    let state = tempfile::tempdir().unwrap();
    let open = ralph_in(state.path())
        .args(["serve", "--bind", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(open.status.code(), Some(2));
    let err = String::from_utf8_lossy(&open.stderr);
    assert!(err.contains("--tls-cert"), "{err}");
    assert!(
        !state.path().join("serve.lock").exists() || {
            let raw = std::fs::read_to_string(state.path().join("serve.lock")).unwrap();
            raw.trim().is_empty()
        }
    );
}

#[test]
fn pairing_a_browser_opens_the_dashboard_once_and_wrong_codes_are_limited() {
    let broker = Broker::start();
    let (p, _child) = waiting_loop(&broker);
    let before = get(&format!("{}/", broker.url));
    assert_eq!(before.status, 404, "no dashboard without pairing");

    let (link, stdout, cookie) = pair_browser(&broker);
    assert!(
        stdout.contains('█') || stdout.contains('▀'),
        "a QR code: {stdout}"
    );
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let cookie = cookie.split(';').next().unwrap().to_string();

    let mut dash = no_redirects()
        .get(format!("{}/", broker.url))
        .header("cookie", &cookie)
        .call()
        .unwrap();
    assert_eq!(dash.status().as_u16(), 200);
    let body = dash.body_mut().read_to_string().unwrap();
    let name = p.root().file_name().unwrap().to_str().unwrap();
    assert!(body.contains(name), "{body}");
    assert!(body.contains("Answer: Redis or Memcached?"), "{body}");
    assert!(body.contains("class=\"loop waiting\""), "{body}");

    // The link paired once; a second use, and wrong codes, find nothing, and after five failed
    // attempts in a minute (the reuse is one) every attempt is refused.
    assert_eq!(get(&link).status, 404);
    for _ in 0..4 {
        assert_eq!(
            get(&format!("{}/pair/{}", broker.url, "1".repeat(32))).status,
            404
        );
    }
    assert_eq!(
        get(&format!("{}/pair/{}", broker.url, "1".repeat(32))).status,
        429
    );
}

pub fn no_redirects() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .new_agent()
}

/// The dashboard as the browser with `cookie` (none: a stranger) gets it: status and body.
pub fn dashboard(broker: &Broker, cookie: Option<&str>) -> (u16, String) {
    let mut req = no_redirects().get(format!("{}/", broker.url));
    if let Some(c) = cookie {
        req = req.header("cookie", c);
    }
    let mut resp = req.call().unwrap();
    (
        resp.status().as_u16(),
        resp.body_mut().read_to_string().unwrap(),
    )
}

/// The one-time link `ralph serve pair web` prints for `broker`, and all it printed.
pub fn pairing_link(broker: &Broker) -> (String, String) {
    let out = ralph_in(broker.state.path())
        .args(["serve", "pair", "web"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let link = stdout
        .split_whitespace()
        .find(|w| w.starts_with(&format!("{}/pair/", broker.url)))
        .unwrap_or_else(|| panic!("{stdout}"))
        .to_string();
    (link, stdout)
}

/// Pairs a browser with `broker` as a person would: `ralph serve pair web`, then its link.
/// The link, what the command printed, and the `Set-Cookie` the link answered with.
pub fn pair_browser(broker: &Broker) -> (String, String, String) {
    let (link, stdout) = pairing_link(broker);
    let mut paired = no_redirects().get(&link).call().unwrap();
    assert_eq!(paired.status().as_u16(), 303);
    let cookie = paired.headers()["set-cookie"].to_str().unwrap().to_string();
    let _ = paired.body_mut().read_to_string();
    (link, stdout, cookie)
}

/// The events of an open server-sent event stream, `(event, data)`, as they arrive.
pub fn sse_events(url: &str, cookie: Option<&str>) -> std::sync::mpsc::Receiver<(String, String)> {
    let (tx, rx) = std::sync::mpsc::channel();
    let mut req = http().get(url);
    if let Some(c) = cookie {
        req = req.header("cookie", c);
    }
    let resp = req.call().unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let body = resp.into_body().into_reader();
    std::thread::spawn(move || {
        use std::io::BufRead as _;
        let (mut event, mut data) = (String::new(), Vec::<String>::new());
        for line in std::io::BufReader::new(body).lines().map_while(Result::ok) {
            if let Some(e) = line.strip_prefix("event: ") {
                event = e.to_string();
            } else if let Some(d) = line.strip_prefix("data: ") {
                data.push(d.to_string());
            } else if line.is_empty() && !event.is_empty() {
                if tx
                    .send((std::mem::take(&mut event), data.join("\n")))
                    .is_err()
                {
                    return;
                }
                data.clear();
            }
        }
    });
    rx
}

#[test]
fn an_open_dashboard_learns_of_a_new_loop_and_its_question_without_a_reload() {
    let broker = Broker::start();
    let (_, _, cookie) = pair_browser(&broker);
    let cookie = cookie.split(';').next().unwrap().to_string();
    let events = sse_events(&format!("{}/events", broker.url), Some(&cookie));
    let next = |what: &str, ready: &dyn Fn(&str) -> bool| loop {
        let (event, data) = events
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("no event with {what}"));
        assert_eq!(event, "loops");
        if ready(&data) {
            return data;
        }
    };
    let first = next("the list as it is", &|_| true);
    assert!(first.contains("No ralph loop is running"), "{first}");

    // A loop that starts after the page opened, and asks.
    let (p, _child) = waiting_loop(&broker);
    let name = p.root().file_name().unwrap().to_str().unwrap().to_string();
    let asked = next("the question", &|d| {
        d.contains("Answer: Redis or Memcached?")
    });
    assert!(asked.contains(&name), "{asked}");
    assert!(asked.contains("class=\"loop waiting\""), "{asked}");
    // Its link opens the question.
    let link = asked
        .split("href=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap();
    let page = get(&format!("{}{link}", broker.url));
    assert_eq!(page.status, 200);
    assert!(page.body.contains("Redis or Memcached?"));

    // Answered elsewhere: the page hears of that too, and the stream needs no cookie twice.
    let out = broker.ralph(&p).args(["answer", "Redis"]).output().unwrap();
    assert!(out.status.success());
    next("the question gone", &|d| !d.contains("Answer: Redis"));
    let without = http().get(format!("{}/events", broker.url)).call().unwrap();
    assert_eq!(
        without.status().as_u16(),
        404,
        "no stream for an unpaired browser"
    );
}

/// Where a test's state dir keeps the answer links' hashes (for the storage check).
fn links_dir(broker: &Broker) -> PathBuf {
    broker.state.path().join("links")
}

#[test]
fn answer_links_are_stored_only_as_hashes() {
    let broker = Broker::start();
    let p = Project::empty();
    let _ask = asking(&broker, &p, "Ship it?", &[]);
    let url = broker.answer_url(&p);
    let token = url.rsplit('/').next().unwrap();
    let stored = read_all(&links_dir(&broker));
    assert!(!stored.is_empty());
    assert!(!stored.contains(token), "{stored}");
    assert!(!read_all(&p.path(".ralph")).contains(token));
}

fn read_all(dir: &Path) -> String {
    let mut all = String::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.path().is_file() {
            all.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
        }
        all.push_str(&e.file_name().to_string_lossy());
    }
    all
}

#[test]
fn the_page_gives_five_more_minutes_and_skips_as_the_panel_does() {
    let broker = Broker::start();
    let (p, child) = waiting_loop(&broker);
    let url = broker.answer_url(&p);
    let before = p.state()["pending_question"]["deadline"].clone();
    let extended = post(&url, Some(broker.origin()), r#"{"action": "extend"}"#);
    assert_eq!(extended.status, 202, "{}", extended.body);
    wait_until(Duration::from_secs(10), "a later deadline", || {
        let now = p.state()["pending_question"]["deadline"].clone();
        (now.as_str() > before.as_str()).then_some(())
    });
    // Five minutes, as the button says (Telegram's adds an hour): a one-minute question now
    // has about six.
    let deadline = p.state()["pending_question"]["deadline"]
        .as_str()
        .and_then(ralph_protocol::parse_timestamp)
        .unwrap();
    let left = deadline
        .duration_since(std::time::SystemTime::now())
        .unwrap();
    assert!(
        left > Duration::from_secs(300) && left <= Duration::from_secs(360),
        "{left:?}"
    );
    assert!(
        !p.exists(".ralph/request.json"),
        "the loop took the request"
    );
    let skipped = post(&url, Some(broker.origin()), r#"{"action": "skip"}"#);
    assert_eq!(skipped.status, 202, "{}", skipped.body);
    Run::finish(child, Duration::from_secs(30)).expect_code(3);
    assert_eq!(p.events_of("question_skipped").len(), 1);
    assert!(p.read("prompt-2.txt").contains("skipped"));
    let bogus = post(&url, Some(broker.origin()), r#"{"action": "stop"}"#);
    assert_eq!(bogus.status, 400, "{}", bogus.body);

    // Regression (issue 34, item 6): the page offered Skip and "+5 min" for a lone
    // `ralph ask` and both failed ("no loop is running there"). The lone asker stands in for
    // a loop and takes them as one would.
    let q = Project::empty();
    let ask = asking(&broker, &q, "Ship it?", &[]);
    let url = broker.answer_url(&q);
    let before = q.state()["pending_question"]["deadline"].clone();
    let extended = post(&url, Some(broker.origin()), r#"{"action": "extend"}"#);
    assert_eq!(extended.status, 202, "{}", extended.body);
    wait_until(Duration::from_secs(10), "a later deadline", || {
        let now = q.state()["pending_question"]["deadline"].clone();
        (now.as_str() > before.as_str()).then_some(())
    });
    let skipped = post(&url, Some(broker.origin()), r#"{"action": "skip"}"#);
    assert_eq!(skipped.status, 202, "{}", skipped.body);
    let asked = Run::finish(ask, Duration::from_secs(30));
    asked.expect_code(3);
    assert!(asked.stderr.contains("skipped"), "{}", asked.stderr);
}

/// Behind `tailscale serve` the browser's origin is the tailnet name, not the loopback address
/// the proxy connects to: `--public-url` makes the links use it, and POSTs from it are the
/// broker's own.
/// The public URL of a broker behind a proxy, in tests.
pub const PROXIED_URL: &str = "https://box.tail1234.ts.net";

/// A broker on a free loopback port published as `public` (as behind `tailscale serve`), and
/// the `127.0.0.1:PORT` it listens on.
pub fn proxied_broker(public: &str) -> (Broker, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let bind = format!("127.0.0.1:{port}");
    let broker = Broker::start_with(&["--bind", &bind, "--public-url", public]);
    (broker, bind)
}

#[test]
fn behind_a_proxy_links_and_origins_are_the_public_url() {
    let (broker, bind) = proxied_broker(PROXIED_URL);
    let public = PROXIED_URL;
    assert_eq!(broker.url, public);
    let p = Project::empty();
    let _ask = asking(&broker, &p, "Ship it?", &[]);
    let link = broker.answer_url(&p);
    assert!(link.starts_with(&format!("{public}/a/")), "{link}");
    // What the proxy does: the same path, to the loopback port.
    let url = link.replace(public, &format!("http://{bind}"));
    let foreign = post(&url, Some("https://evil.example"), r#"{"answer": "no"}"#);
    assert_eq!(foreign.status, 403);
    let ok = post(&url, Some(public), r#"{"answer": "yes"}"#);
    assert_eq!(ok.status, 200, "{}", ok.body);
}

/// `--tls-cert` and `--tls-key`: the page over https, and every link and announcement says
/// https.
#[test]
fn tls_serves_the_page_over_https_and_announces_https_links() {
    use std::io::BufRead as _;
    let (cert, key) = tls_fixture();
    let mut broker = Broker::start_with(&[
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    assert!(
        broker.url.starts_with("https://127.0.0.1:"),
        "{}",
        broker.url
    );
    let mut said = String::new();
    std::io::BufReader::new(broker.child.stdout.as_mut().unwrap())
        .read_line(&mut said)
        .unwrap();
    assert_eq!(
        said.trim_end(),
        format!("ralph serve: listening on {}", broker.url)
    );

    let (p, _child) = waiting_loop(&broker);
    let url = broker.answer_url(&p);
    assert!(url.starts_with(&format!("{}/a/", broker.url)), "{url}");
    let mut page = https().get(&url).call().unwrap();
    assert_eq!(page.status(), 200);
    let body = page.body_mut().read_to_string().unwrap();
    assert!(body.contains("Redis or Memcached?"), "{body}");

    // A browser paired over https gets a host-only secure cookie, and the dashboard with it.
    let (link, _) = pairing_link(&broker);
    assert!(link.starts_with(&format!("{}/pair/", broker.url)), "{link}");
    let paired = https().get(&link).call().unwrap();
    assert_eq!(paired.status(), 303);
    let cookie = paired.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.starts_with("__Host-ralph_device="), "{cookie}");
    assert!(cookie.contains("; Secure"), "{cookie}");
    let mut dashboard = https()
        .get(&format!("{}/", broker.url))
        .header("cookie", cookie.split(';').next().unwrap())
        .call()
        .unwrap();
    assert_eq!(dashboard.status(), 200);
    let body = dashboard.body_mut().read_to_string().unwrap();
    assert!(body.contains("Redis or Memcached?"), "{body}");

    // Not in clear on the same port, and not to a client that does not trust the certificate.
    let clear = url.replacen("https://", "http://", 1);
    assert!(http().get(&clear).call().is_err());
    let stranger: ureq::Agent = ureq::Agent::config_builder().build().into();
    let refused = stranger.get(&url).call().unwrap_err().to_string();
    assert!(
        refused.contains("UnknownIssuer") || refused.contains("certificate"),
        "{refused}"
    );
}

/// "+5 min" on a question whose deadline had passed answered 202 "5 min more to answer.",
/// though the agent had gone on with the default and nothing got more time.
#[test]
fn more_time_after_the_deadline_is_refused_and_says_what_the_agent_took() {
    let broker = Broker::start();
    let (p, _child) = loop_asking(&broker, "2s", ASK_CACHE_THEN_WAIT);
    let url = broker.answer_url(&p);
    wait_until(Duration::from_secs(30), "the deadline to pass", || {
        (p.state()["pending_question"]["timed_out"] == true).then_some(())
    });
    let page = get(&url);
    assert!(
        page.body
            .contains("value=\"extend\" class=\"secondary\" hidden"),
        "{}",
        page.body
    );
    let extended = post(&url, Some(broker.origin()), r#"{"action": "extend"}"#);
    assert_eq!(extended.status, 422, "{}", extended.body);
    assert!(
        extended
            .body
            .contains("Too late for more time: the deadline passed and the agent went on with its default (Redis)"),
        "{}",
        extended.body
    );
    assert!(!p.exists(".ralph/request.json"));
}

/// A question with no deadline offered "+5 min" (refused when pressed: no time to add) and
/// "Skip (use default)" with no default to use.
#[test]
fn a_question_without_deadline_or_default_offers_no_more_time_and_skip_says_who_decides() {
    let broker = Broker::start();
    let (p, _child) = loop_asking(
        &broker,
        "never",
        "[iteration 1]\nquestion \"Which cache?\"\nsignal QUESTION\n[iteration 2]\n",
    );
    let page = get(&broker.answer_url(&p));
    assert!(page.body.contains("no deadline"), "{}", page.body);
    assert!(
        page.body
            .contains("value=\"extend\" class=\"secondary\" hidden"),
        "{}",
        page.body
    );
    assert!(
        page.body
            .contains("value=\"skip\" class=\"secondary\">Skip (agent decides)</button>"),
        "{}",
        page.body
    );
}

/// Reopening an answer link (a reload, the notification tapped again) after the question was
/// answered in the terminal gave "Not found. There is nothing here.": the user could not tell
/// a broken link from a closed question. For as long as a late POST is told how it closed, so
/// is the page; any other link gets one 404 that says what links do and what to run.
#[test]
fn a_closed_questions_link_says_how_it_closed_and_unknown_links_say_what_to_run() {
    let broker = Broker::start();
    let (p, _child) = waiting_loop(&broker);
    let url = broker.answer_url(&p);
    let answered = broker.ralph(&p).args(["answer", "Redis"]).output().unwrap();
    assert!(answered.status.success());
    let page = wait_until(Duration::from_secs(10), "the question to close", || {
        let g = get(&url);
        (g.status != 200).then_some(g)
    });
    assert_eq!(page.status, 410, "{}", page.body);
    assert!(
        page.body.contains(
            "This question is no longer waiting: answered from <code>ralph answer</code>."
        ),
        "{}",
        page.body
    );
    let unknown = get(&format!("{}/a/{}", broker.url, "0".repeat(32)));
    assert_eq!(unknown.status, 404);
    assert!(
        unknown
            .body
            .contains("<code>ralph status</code> shows a waiting question&#39;s link")
            && unknown.body.contains("<code>ralph serve pair web</code>"),
        "{}",
        unknown.body
    );
}

/// A question whose run ended unanswered (it timed out, the run finished) was said to have
/// "closed: closed: the run that asked it has ended" on its page and in Telegram: the words of
/// how a question closed come after "closed" already.
#[test]
fn a_question_whose_run_ended_says_so_once() {
    let broker = Broker::start();
    let (p, child) = loop_asking(
        &broker,
        "2s",
        "[iteration 1]\nquestion \"Which cache?\" --option Redis --option Memcached\nsignal QUESTION\n[iteration 2]\ncheck-all\nsignal DONE\n",
    );
    let url = broker.answer_url(&p);
    Run::finish(child, Duration::from_secs(30)).expect_code(0);
    let page = get(&url);
    assert_eq!(page.status, 410, "{}", page.body);
    assert!(
        page.body
            .contains("This question is no longer waiting: the run that asked it has ended."),
        "{}",
        page.body
    );
}
