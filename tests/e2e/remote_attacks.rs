//! `ralph serve` under attack: what a link holder, a client on loopback, a page in the user's
//! browser and a stranger can no longer do to the broker (each test names what broke).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use super::remote::*;
use super::util::*;

/// The broker's pid, from its lock.
fn broker_pid(broker: &Broker) -> u32 {
    let raw = std::fs::read_to_string(broker.state.path().join("serve.lock")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&raw).unwrap();
    v["pid"].as_u64().unwrap() as u32
}

/// How many inotify instances process `pid` holds.
fn inotify_instances(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .filter(|fd| {
            std::fs::read_link(fd.path())
                .is_ok_and(|target| target.to_string_lossy().contains("inotify"))
        })
        .count()
}

/// `host:port` of `url`.
fn authority(url: &str) -> String {
    url.split("://")
        .nth(1)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string()
}

/// Sends a GET of `url` on a connection of its own and reads the response's head: the open
/// connection (a stream's body follows) and the status.
fn open_get(url: &str, extra_headers: &str) -> (TcpStream, u16) {
    let host = authority(url);
    let path = format!("/{}", url.splitn(4, '/').nth(3).unwrap_or(""));
    let mut conn = TcpStream::connect(&host).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(
        conn,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra_headers}\r\n"
    )
    .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match conn.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    let head = String::from_utf8_lossy(&head);
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (conn, status)
}

/// Every GET of a link's event stream opened an inotify instance that outlived its client:
/// about 128 of them and the user's next `ralph run` could not watch `.ralph`. Now every
/// stream shares one watch, a link holds a few streams at most, and a closed client gives its
/// place back.
#[test]
fn a_links_event_streams_share_one_watch_are_capped_and_given_back() {
    let broker = Broker::start();
    let (p, _child) = waiting_loop(&broker);
    let url = broker.answer_url(&p);
    let events = format!("{url}/events");
    let pid = broker_pid(&broker);
    let before = inotify_instances(pid);

    let mut open = Vec::new();
    for i in 0..4 {
        let (conn, status) = open_get(&events, "");
        assert_eq!(status, 200, "stream {i}");
        open.push(conn);
    }
    assert_eq!(inotify_instances(pid), before, "one watch for every stream");
    let (_, status) = open_get(&events, "");
    assert_eq!(status, 429, "a link holds a few streams at most");

    drop(open);
    let start = Instant::now();
    let again = wait_until(Duration::from_secs(30), "a place given back", || {
        let (conn, status) = open_get(&events, "");
        (status == 200).then_some(conn)
    });
    drop(again);
    eprintln!("places given back after {:?}", start.elapsed());
    assert_eq!(inotify_instances(pid), before);
}

/// How many file descriptors process `pid` holds.
fn open_files(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// Whether the server closed `conn` (EOF or reset) within `limit`, all it sent read away.
fn closed_within(conn: &mut TcpStream, limit: Duration) -> bool {
    conn.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 1024];
    loop {
        match conn.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // Still open when the wait ran out; any other error is a connection that is gone
            // (reset, aborted), however the kernel words it.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return false;
            }
            Err(_) => return true,
        }
    }
}

/// Slowloris: a client that sent one request line and nothing more held its connection
/// forever, and with about 1100 of them the broker answered nobody. Now the headers must come
/// within ten seconds, a silent connection is closed after twenty, and connections over the
/// cap are closed as they come.
#[test]
fn slow_headers_are_cut_off_and_connections_are_capped() {
    let broker = Broker::start();
    let pid = broker_pid(&broker);
    let host = authority(&broker.url);
    let before = open_files(pid);
    let slow: Vec<TcpStream> = (0..256)
        .map(|i| {
            let mut conn = TcpStream::connect(&host).unwrap();
            // Half of them send nothing at all.
            if i % 2 == 0 {
                conn.write_all(b"GET / HTTP/1.1\r\n").unwrap();
            }
            conn
        })
        .collect();
    wait_until(Duration::from_secs(10), "the broker to take them", || {
        (open_files(pid) >= before + 256).then_some(())
    });
    // Each connection takes its place in a task of its own: let them run.
    std::thread::sleep(Duration::from_millis(500));
    // Silent: served, it would stay open for the header and idle timeouts.
    let mut over = TcpStream::connect(&host).unwrap();
    assert!(
        closed_within(&mut over, Duration::from_secs(5)),
        "a connection over the cap is closed at once"
    );
    let held = open_files(pid);
    assert!(held < before + 256 + 16, "{before} files, then {held}");

    let start = Instant::now();
    for (i, mut conn) in slow.into_iter().enumerate() {
        let left = Duration::from_secs(45).saturating_sub(start.elapsed());
        assert!(
            closed_within(&mut conn, left.max(Duration::from_millis(1))),
            "slow connection {i} still open after {:?}",
            start.elapsed()
        );
    }
    let page = get(&format!("{}/assets/page.css", broker.url));
    assert_eq!(
        page.status, 200,
        "served again once the slow ones are cut off"
    );
}

/// `ralph serve` ignored Ctrl-C and SIGTERM while a page was open: the graceful shutdown
/// waited for every connection, and event streams never end by themselves.
#[test]
fn sigterm_stops_the_broker_while_pages_stream() {
    let broker = Broker::start();
    let (p, _child) = waiting_loop(&broker);
    let url = broker.answer_url(&p);
    let (mut stream, status) = open_get(&format!("{url}/events"), "");
    assert_eq!(status, 200);
    let Broker { state, child, .. } = broker;
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let run = Run::finish(child, Duration::from_secs(10));
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(closed_within(&mut stream, Duration::from_secs(1)));
    drop(state);
}

/// A certificate that could not be loaded was found only after the broker had announced its
/// URL, written it into the lock (so loops made links for it) and started the bot. Refused
/// now, each for what is wrong with it: not a certificate, a key not the certificate's, no key.
#[test]
fn a_bad_certificate_is_refused_before_anything_is_announced() {
    let state = tempfile::tempdir().unwrap();
    let bad = state.path().join("cert.pem");
    std::fs::write(&bad, "not a certificate").unwrap();
    let (cert, _) = super::remote::tls_fixture();
    let other_key = cert.with_file_name("other-key.pem");
    let missing = state.path().join("missing.pem");
    for (cert, key, why) in [
        (&bad, &bad, "private key format not supported"),
        (&cert, &other_key, "KeyMismatch"),
        (&cert, &missing, "No such file or directory"),
    ] {
        let mut cmd = Command::new(ralph_bin());
        cmd.args(["serve", "--bind", "127.0.0.1:0", "--tls-cert"])
            .arg(cert)
            .arg("--tls-key")
            .arg(key)
            .env("RALPH_STATE_DIR", state.path());
        let run = Run::finish(spawn(cmd), Duration::from_secs(20));
        assert_eq!(run.code, Some(1), "{}", run.stderr);
        let said = format!(
            "could not load the certificate {} and key {}",
            cert.display(),
            key.display()
        );
        assert!(run.stderr.contains(&said), "{}", run.stderr);
        // Said once: the cause was printed twice, as the message and again as its source.
        assert_eq!(run.stderr.matches(why).count(), 1, "{}", run.stderr);
        assert!(!run.stdout.contains("listening"), "{}", run.stdout);
        assert!(
            !state.path().join("serve.lock").exists(),
            "nothing published"
        );
    }
}

/// `--bind 0.0.0.0` without `--public-url` published links to `https://0.0.0.0:PORT`.
#[test]
fn every_address_without_a_public_url_is_refused() {
    let state = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(ralph_bin());
    cmd.args(["serve", "--bind", "0.0.0.0:0", "--insecure-http"])
        .env("RALPH_STATE_DIR", state.path());
    let run = Run::finish(spawn(cmd), Duration::from_secs(20));
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("--public-url"), "{}", run.stderr);
}

/// HTTP/2 with prior knowledge was served on the plain port (feature unification turned it
/// on): a second protocol nobody asked for.
#[test]
fn http2_with_prior_knowledge_is_not_served() {
    let broker = Broker::start();
    let mut conn = TcpStream::connect(authority(&broker.url)).unwrap();
    conn.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = Vec::new();
    let _ = conn.read_to_end(&mut got);
    // An HTTP/2 server answers with a SETTINGS frame: type 4 in the frame's fourth byte.
    assert!(
        got.len() < 4 || got[3] != 4 || got.starts_with(b"HTTP/1"),
        "{got:?}"
    );
}

/// DNS rebinding: the Host header was never checked, and the cross-site check compared
/// `Origin` with that same Host, so a page at `http://evil.example:7707` re-pointed at
/// 127.0.0.1 passed as the broker's own and could read and answer questions.
#[test]
fn a_page_under_another_name_is_refused() {
    let broker = Broker::start();
    let (p, _child) = waiting_loop(&broker);
    let url = broker.answer_url(&p);
    let port = authority(&broker.url)
        .rsplit_once(':')
        .unwrap()
        .1
        .to_string();
    let evil = format!("evil.example:{port}");
    let path = url.splitn(4, '/').nth(3).unwrap().to_string();
    let ask = |host: &str, request: &str| {
        let mut conn = TcpStream::connect(authority(&broker.url)).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        write!(conn, "{}", request.replace("HOST", host)).unwrap();
        let mut got = String::new();
        let _ = conn.read_to_string(&mut got);
        got
    };
    let page = format!("GET /{path} HTTP/1.1\r\nHost: HOST\r\nConnection: close\r\n\r\n");
    assert!(ask(&evil, &page).starts_with("HTTP/1.1 421"));
    assert!(ask(&format!("localhost:{port}"), &page).starts_with("HTTP/1.1 200"));
    let body = r#"{"answer": "from the rebound page"}"#;
    let answer = format!(
        "POST /{path} HTTP/1.1\r\nHost: HOST\r\nOrigin: http://HOST\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let got = ask(&evil, &answer);
    assert!(got.starts_with("HTTP/1.1 421"), "{got}");
    assert_eq!(get(&url).status, 200, "the question still waits");
}

/// The first half of `token`'s SHA-256, which names its file in the state directory.
fn file_of(token: &str) -> String {
    let mut sum = Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    sum.stdin
        .take()
        .unwrap()
        .write_all(token.as_bytes())
        .unwrap();
    let out = sum.wait_with_output().unwrap();
    format!("{}.json", &String::from_utf8(out.stdout).unwrap()[..32])
}

/// A named pipe planted in the state directory hung whoever opened it: every loop that asked
/// a question while the broker ran (pruning opens every link file), `ralph status --json`, and
/// through a link whose hash names it, the broker's async workers.
#[test]
fn a_named_pipe_in_the_state_directory_blocks_nobody() {
    let broker = Broker::start();
    let (p, _child) = waiting_loop(&broker);
    let links = broker.state.path().join("links");
    let token = "0123456789abcdef0123456789abcdef";
    // The loop may not have minted its first link yet.
    std::fs::create_dir_all(&links).unwrap();
    for name in [file_of(token), "planted.json".to_string()] {
        nix::unistd::mkfifo(&links.join(name), nix::sys::stat::Mode::S_IRWXU).unwrap();
    }
    let mut status = broker.ralph(&p);
    status.args(["status", "--json"]);
    let run = Run::finish(spawn(status), Duration::from_secs(10));
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(run.stdout.contains("answer_url"), "{}", run.stdout);
    let pages: Vec<_> = (0..8)
        .map(|_| {
            let url = format!("{}/a/{token}", broker.url);
            std::thread::spawn(move || get(&url).status)
        })
        .collect();
    for page in pages {
        assert_eq!(page.join().unwrap(), 404);
    }
    assert_eq!(get(&format!("{}/assets/page.css", broker.url)).status, 200);
}

/// Every `ralph status --json` minted a new link and only the newest 32 per question were
/// kept: a status-bar script polling status killed the phone's link in minutes.
#[test]
fn polling_status_keeps_one_link_that_works_while_the_question_waits() {
    let broker = Broker::start();
    let (p, _child) = waiting_loop(&broker);
    let first = broker.answer_url(&p);
    for _ in 0..40 {
        assert_eq!(broker.answer_url(&p), first, "one link for status");
    }
    assert_eq!(get(&first).status, 200);
}

/// The device cookie went to every port of the host (cookies are not kept apart by port), and
/// over https nothing stopped another server of the host from setting one in its place.
#[test]
fn over_https_the_device_cookie_is_a_host_only_secure_cookie() {
    let public = PROXIED_URL;
    let (broker, bind) = proxied_broker(public);
    let (link, _) = pairing_link(&broker);
    let local = link.replace(public, &format!("http://{bind}"));
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .into();
    let paired = agent.get(&local).call().unwrap();
    let cookie = paired.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.starts_with("__Host-ralph_device="), "{cookie}");
    for part in ["; Path=/", "; Secure", "; HttpOnly", "; SameSite=Strict"] {
        assert!(cookie.contains(part), "{cookie}");
    }
    assert!(!cookie.contains("Domain"), "{cookie}");
    let pair = cookie.split(';').next().unwrap();
    let dashboard = agent
        .get(format!("http://{bind}/"))
        .header("cookie", pair)
        .call()
        .unwrap();
    assert_eq!(dashboard.status().as_u16(), 200);
}

/// "+5 min" on a question with no deadline claimed to extend it.
#[test]
fn more_time_for_a_question_without_a_deadline_is_refused() {
    let broker = Broker::start();
    let p = Project::with_task(
        "task: Forever\nmax_iterations: 2\nquestion_timeout: never",
        "- [ ] x\n",
    );
    let agent = p.agent("[iteration 1]\nquestion \"Take your time?\"\nsignal QUESTION\n");
    let mut cmd = broker.ralph(&p);
    cmd.args(["run", "--no-tui", "--agent-cmd", &agent]);
    let _child = spawn(cmd);
    p.wait_for_status("waiting_input", Duration::from_secs(20));
    let url = broker.answer_url(&p);
    let more = post(&url, Some(broker.origin()), r#"{"action": "extend"}"#);
    assert_eq!(more.status, 422, "{}", more.body);
    assert!(more.body.contains("no deadline"), "{}", more.body);
}

/// A `remote.toml` that is a named pipe hung `ralph serve` at start-up.
#[test]
fn a_remote_toml_that_is_a_pipe_is_refused_at_once() {
    let state = tempfile::tempdir().unwrap();
    let config = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(config.path().join("ralph")).unwrap();
    nix::unistd::mkfifo(
        &config.path().join("ralph/remote.toml"),
        nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR,
    )
    .unwrap();
    let mut cmd = Command::new(ralph_bin());
    cmd.args(["serve", "--bind", "127.0.0.1:0"])
        .env("RALPH_STATE_DIR", state.path())
        .env("XDG_CONFIG_HOME", config.path());
    let run = Run::finish(spawn(cmd), Duration::from_secs(20));
    assert_ne!(run.code, Some(0));
    assert!(run.stderr.contains("remote.toml"), "{}", run.stderr);
}
