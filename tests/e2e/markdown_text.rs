//! A question's markdown rendered, not shown raw, wherever its text appears outside the panel
//! (issue 34, item 14): plain lines, `ralph status`, the dashboard's link. The scrollback's
//! echo is checked in tmux (tests/e2e/tui.rs), the panel's context line in its unit tests.

use std::time::Duration;

use super::remote::{Broker, dashboard, pair_browser, waiting_loop_asking};
use super::util::*;

const ASK: &str = "[iteration 1]\nquestion \"Should we use **Redis** or *Memcached*? See [the docs](https://redis.io).\" --option Redis --option Memcached --context \"Both are in `Cargo.toml`; **latency** matters.\"\nsignal QUESTION\n[iteration 2]\nprint done\n";

/// Regression (issue 34, item 14): plain lines, `ralph status` and the dashboard showed the
/// agent's `**Redis**` and `*Memcached*` as typed.
#[test]
fn plain_lines_status_and_the_dashboard_show_the_question_rendered() {
    let broker = Broker::start();
    let (p, child) = waiting_loop_asking(&broker, ASK);
    let rendered = "Should we use Redis or Memcached? See the docs <https://redis.io>.";
    let context = "(Both are in Cargo.toml; latency matters.)";

    let status = broker.ralph(&p).arg("status").output().unwrap();
    let status = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(status.contains(&format!("    {rendered}\n")), "{status}");
    assert!(status.contains(&format!("    {context}\n")), "{status}");
    assert!(!status.contains("**") && !status.contains('`'), "{status}");

    let (_, _, cookie) = pair_browser(&broker);
    let cookie = cookie.split(';').next().unwrap().to_string();
    let (_, body) = dashboard(&broker, Some(&cookie));
    assert!(
        body.contains("Answer: Should we use Redis or Memcached? See the docs.</a>"),
        "{body}"
    );

    broker.ralph(&p).args(["answer", "1"]).output().unwrap();
    let run = Run::finish(child, Duration::from_secs(30));
    assert!(
        run.stdout.contains(&format!("  {rendered}\n")),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains(&format!("  {context}\n")),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("**Redis**"), "{}", run.stdout);
}
