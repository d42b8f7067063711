//! `ralph serve` under attack: what a link holder, a client on loopback, a page in the user's
//! browser and a stranger can no longer do to the broker (each test names what broke).

use std::io::{Read, Write};
use std::net::TcpStream;
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
