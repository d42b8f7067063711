//! The channels against local commands and a local HTTP server.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;

use super::command::run_limited;
use super::notice::TITLE;
use super::*;

fn notice(root: &Path, question: &str) -> QuestionNotice {
    QuestionNotice {
        root: root.display().to_string(),
        question: question.into(),
        options: vec!["Postgres".into(), "SQLite\n(embedded)".into()],
        default: Some("SQLite".into()),
        deadline: Some("2026-11-22T14:17:33.123Z".into()),
        iteration: 3,
        answer_command: format!("ralph answer -C {} \"your answer\"", root.display()),
        answer_url: None,
    }
}

/// Waits until every channel thread has finished, collecting their warnings.
fn drain(rx: &Receiver<String>) -> Vec<String> {
    let mut warnings = Vec::new();
    loop {
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(w) => warnings.push(w),
            Err(mpsc::RecvTimeoutError::Disconnected) => return warnings,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("channels still running: {warnings:?}")
            }
        }
    }
}

/// Reads one HTTP request: its header lines and its body.
fn read_request(stream: &mut std::net::TcpStream) -> (Vec<String>, Vec<u8>) {
    let mut reader = BufReader::new(stream);
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end().to_string();
        if line.is_empty() {
            break;
        }
        headers.push(line);
    }
    let length: usize = headers
        .iter()
        .find_map(|h| {
            let (name, value) = h.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    (headers, body)
}

#[test]
fn webhook_posts_json_with_every_field() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let request = read_request(&mut stream);
        stream
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .unwrap();
        request
    });
    let dir = tempfile::tempdir().unwrap();
    let notifier = Notifier::new(NotifyConfig {
        webhook_url: Some(format!("http://127.0.0.1:{port}/hooks/secret-token")),
        ..NotifyConfig::default()
    });
    let question = "Which database? <!channel> @everyone";

    let warnings = drain(&notifier.question_raised(&notice(dir.path(), question)));

    assert_eq!(warnings, Vec::<String>::new());
    let (headers, body) = server.join().unwrap();
    assert!(
        headers[0].starts_with("POST /hooks/secret-token "),
        "{headers:?}"
    );
    assert!(
        headers
            .iter()
            .any(|h| h.eq_ignore_ascii_case("content-type: application/json")),
        "{headers:?}"
    );
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(json["question"], question);
    assert_eq!(
        json["options"],
        serde_json::json!(["Postgres", "SQLite\n(embedded)"])
    );
    assert_eq!(json["default"], "SQLite");
    assert_eq!(json["deadline"], "2026-11-22T14:17:33.123Z");
    assert_eq!(json["iteration"], 3);
    assert_eq!(json["root"], dir.path().display().to_string());
    assert!(
        json["answer_command"]
            .as_str()
            .unwrap()
            .starts_with("ralph answer -C ")
    );
    assert_eq!(json["title"], TITLE);
    for field in ["content", "message"] {
        let text = json[field].as_str().unwrap();
        assert!(text.contains(question), "{field}: {text}");
        assert!(text.contains("1. Postgres") && text.contains("Answer with: ralph answer"));
    }
    // Agent text cannot ping a Slack channel or a Discord server.
    let slack = json["text"].as_str().unwrap();
    assert!(
        slack.contains("&lt;!channel&gt;") && !slack.contains("<!channel>"),
        "{slack}"
    );
    assert_eq!(json["allowed_mentions"], serde_json::json!({ "parse": [] }));
}

#[test]
fn dead_webhook_never_blocks_and_warns_after_the_timeout() {
    // Bound but never accepted: the kernel completes the handshake, nobody ever answers.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let notifier = Notifier::new(NotifyConfig {
        webhook_url: Some(format!("http://127.0.0.1:{port}/T000/B000/secret")),
        webhook_timeout: Duration::from_millis(300),
        ..NotifyConfig::default()
    });

    let start = Instant::now();
    let rx = notifier.question_raised(&notice(dir.path(), "Anyone there?"));
    assert!(
        start.elapsed() < Duration::from_millis(50),
        "blocked for {:?}",
        start.elapsed()
    );

    let warning = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(
        start.elapsed() >= Duration::from_millis(300),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(
        warning,
        format!("webhook http://127.0.0.1:{port}/…: timed out after 300ms")
    );
    drop(listener);
}

#[test]
fn webhook_error_status_is_a_warning() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        read_request(&mut stream);
        stream
            .write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .unwrap();
    });
    let dir = tempfile::tempdir().unwrap();
    let notifier = Notifier::new(NotifyConfig {
        webhook_url: Some(format!("http://127.0.0.1:{port}/hook")),
        ..NotifyConfig::default()
    });
    let warnings = drain(&notifier.question_raised(&notice(dir.path(), "?")));
    server.join().unwrap();
    assert_eq!(
        warnings,
        [format!(
            "webhook http://127.0.0.1:{port}/…: the server answered HTTP 404"
        )]
    );
}

#[test]
fn notify_command_gets_the_question_only_through_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let question = "Run $(touch pwned) or `touch pwned2`? \"double\" 'single' \\ ; | & $HOME";
    let notifier = Notifier::new(NotifyConfig {
        command: Some(r#"printf '%s' "$RALPH_QUESTION" > got.txt"#.into()),
        ..NotifyConfig::default()
    });

    let warnings = drain(&notifier.question_raised(&notice(dir.path(), question)));

    assert_eq!(warnings, Vec::<String>::new());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("got.txt")).unwrap(),
        question
    );
    assert!(!dir.path().join("pwned").exists());
    assert!(!dir.path().join("pwned2").exists());
}

#[test]
fn notify_command_sees_every_variable() {
    let dir = tempfile::tempdir().unwrap();
    let notifier = Notifier::new(NotifyConfig {
        command: Some(
            r#"for v in "$RALPH_QUESTION_OPTIONS" "$RALPH_QUESTION_DEFAULT" "$RALPH_QUESTION_DEADLINE" "$RALPH_QUESTION_ITERATION" "$RALPH_ANSWER_COMMAND" "$RALPH_ROOT"; do printf '%s\n--\n' "$v"; done > vars.txt"#
                .into(),
        ),
        ..NotifyConfig::default()
    });
    let n = notice(dir.path(), "q");

    assert_eq!(drain(&notifier.question_raised(&n)), Vec::<String>::new());

    let got = std::fs::read_to_string(dir.path().join("vars.txt")).unwrap();
    let expected = format!(
        "Postgres\nSQLite (embedded)\n--\nSQLite\n--\n2026-11-22T14:17:33.123Z\n--\n3\n--\n{}\n--\n{}\n--\n",
        n.answer_command, n.root
    );
    assert_eq!(got, expected);
}

#[test]
fn failing_notify_command_warns_with_its_output() {
    let dir = tempfile::tempdir().unwrap();
    let notifier = Notifier::new(NotifyConfig {
        command: Some("echo 'no route to phone' >&2; exit 3".into()),
        ..NotifyConfig::default()
    });
    let warnings = drain(&notifier.question_raised(&notice(dir.path(), "q")));
    assert_eq!(
        warnings,
        [
            "notify_command `echo 'no route to phone' >&2; exit 3`: failed (exit status: 3): no route to phone"
        ]
    );
}

#[test]
fn a_command_past_its_limit_is_killed_with_its_group() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("survived");
    let mut cmd = Command::new("sh");
    // The background `sleep` is a grandchild: only killing the group stops it.
    cmd.arg("-c").arg(format!(
        "(sleep 1; touch '{}') & sleep 30",
        marker.display()
    ));
    let start = Instant::now();

    let err = run_limited(cmd, Duration::from_millis(200), &Groups::default()).unwrap_err();

    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(err, "still running after 200ms, so it was stopped");
    thread::sleep(Duration::from_millis(1500));
    assert!(!marker.exists(), "the background job outlived the kill");
}

/// Regression (issue 25, item 8): `notify_command` outlived ralph. Its time limit was a
/// thread inside ralph, and it did not carry `RALPH_RUN`, so after ralph was killed it ran
/// on forever.
#[test]
fn a_notify_command_ends_with_its_notifier_and_carries_the_run_id() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("survived");
    let notifier = Notifier::new(NotifyConfig {
        command: Some(format!(
            "env > env.txt; (sleep 3; touch '{}') & sleep 30",
            marker.display()
        )),
        ..NotifyConfig::default()
    });
    let warnings = notifier.question_raised(&notice(dir.path(), "Stop me?"));
    let start = Instant::now();
    while !std::fs::read_to_string(dir.path().join("env.txt"))
        .is_ok_and(|e| e.contains("RALPH_ROOT"))
    {
        assert!(start.elapsed() < Duration::from_secs(10), "never started");
        thread::sleep(Duration::from_millis(10));
    }
    let env = std::fs::read_to_string(dir.path().join("env.txt")).unwrap();
    let mark = format!("RALPH_RUN={}", ralph_process::run_id());
    assert!(env.lines().any(|l| l == mark), "{env}");

    drop(notifier);
    // Killed after the end's grace, far before its 30 s limit.
    let _ = drain(&warnings);
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    thread::sleep(Duration::from_millis(3500));
    assert!(!marker.exists(), "its background job outlived the run");
}

#[test]
fn urls_lose_their_secrets_in_messages() {
    assert_eq!(
        redact_url("https://hooks.slack.com/services/T0/B0/XXXX"),
        "https://hooks.slack.com/…"
    );
    assert_eq!(
        redact_url("https://user:pw@gotify.example?token=abc"),
        "https://gotify.example/…"
    );
    assert_eq!(redact_url("http://localhost:8080"), "http://localhost:8080");
}
