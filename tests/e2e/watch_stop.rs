//! Watching and stopping a loop from another terminal: `ralph logs [-f]`, `ralph stop`, and
//! what `ralph status` says of a running loop (issue 34, item 12).

use std::io::{BufRead, BufReader};
use std::time::Duration;

use super::util::*;

const TASK: &str = "task: Build the cache\nmax_iterations: 3";
const BODY: &str = "- [ ] the cache works\n";

/// Regression (issue 34, item 12): a loop could be watched only in its own terminal and
/// stopped only with Ctrl-C there. The agent's output also sat in a 256 KiB buffer until the
/// iteration ended, so nothing outside the loop could show it as it came.
#[test]
fn logs_follow_the_running_iteration_and_stop_ends_the_loop_with_its_state_saved() {
    let p = Project::with_task(TASK, BODY);
    let agent = p.agent(
        "[iteration 1]\nprint reading the code\nsleep 1500ms\nprint writing the cache module\nhang\n",
    );
    let run = p.start(&agent, &[]);
    wait_until(Duration::from_secs(30), "the first line in the log", || {
        let logs = p.exec(&["logs"]);
        logs.stdout.contains("reading the code").then_some(())
    });

    // What was printed so far, then what comes, as it comes.
    let mut follow = p.ralph();
    follow.args(["logs", "-f"]);
    let mut follow = spawn(follow);
    let mut lines = BufReader::new(follow.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    while !seen
        .iter()
        .any(|l: &String| l.contains("writing the cache module"))
    {
        let line = lines.next().expect("ralph logs -f ended early").unwrap();
        seen.push(line);
    }
    assert!(
        seen[0].starts_with("ralph: iteration 1 of run 1"),
        "{seen:?}"
    );
    assert!(seen.iter().any(|l| l == "reading the code"), "{seen:?}");

    let status = p.exec(&["status"]);
    status.expect_code(0);
    assert!(status.stdout.contains("  elapsed: "), "{}", status.stdout);
    assert!(
        status
            .stdout
            .contains("  last line: writing the cache module"),
        "{}",
        status.stdout
    );
    let json: serde_json::Value =
        serde_json::from_str(&p.exec(&["status", "--json"]).stdout).unwrap();
    assert_eq!(json["last_line"], "writing the cache module");
    assert!(json["elapsed_seconds"].as_u64().is_some(), "{json}");

    let stop = p.exec(&["stop"]);
    stop.expect_code(0);
    assert!(
        stop.stdout.contains("Stopped the loop in"),
        "{}",
        stop.stdout
    );
    assert!(stop.stdout.contains(" run -C "), "{}", stop.stdout);
    let run = Run::finish(run, Duration::from_secs(30));
    run.expect_code(130);
    assert!(
        run.stdout.contains("stopping, as asked by ralph stop"),
        "{}",
        run.stdout
    );
    assert_eq!(p.state()["status"], "stopped");
    assert_eq!(p.events_of("stop_requested")[0]["by"], "ralph stop");
    assert!(!p.exists(".ralph/stop"), "the request is taken");

    // The follower sees the loop end and ends too.
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let mut follow = follow;
    let ended = wait_until(Duration::from_secs(10), "ralph logs -f to end", || {
        follow.try_wait().unwrap()
    });
    assert!(ended.success(), "{ended:?}");
    assert!(
        rest.iter()
            .any(|l| l.starts_with("ralph: the loop is not running: stopped")),
        "{rest:?}"
    );

    // Nothing runs now: `ralph stop` says so.
    let again = p.exec(&["stop"]);
    again.expect_code(1);
    assert!(
        again.stderr.contains("no loop is running"),
        "{}",
        again.stderr
    );
}

/// Looking at a project where no loop ever ran says so and leaves nothing behind.
#[test]
fn logs_and_stop_where_no_loop_ran_change_nothing() {
    let p = Project::with_task(TASK, BODY);
    for args in [&["logs"][..], &["logs", "-f"]] {
        let logs = p.exec(args);
        logs.expect_code(0);
        assert!(
            logs.stdout.contains("no agent output in"),
            "{}",
            logs.stdout
        );
    }
    let stop = p.exec(&["stop"]);
    stop.expect_code(1);
    assert!(
        stop.stderr.contains("no loop is running in"),
        "{}",
        stop.stderr
    );
    assert!(!p.exists(".ralph"), "nothing was created");
}

/// A stop request left from before a run (its loop ended first) must not stop the next one.
#[test]
fn a_stale_stop_request_does_not_stop_the_next_run() {
    let p = Project::with_task(TASK, BODY);
    p.write(".ralph/stop", "ralph stop\n2026-01-01T00:00:00.000Z\n");
    let agent = p.agent("[iteration *]\nprint working\n");
    p.run(&agent, &["--max-iterations", "2"]).expect_code(3);
    assert!(p.events_of("stop_requested").is_empty());
    let logs = p.exec(&["logs"]);
    logs.expect_code(0);
    assert!(
        logs.stdout.contains("ralph: iteration 2 of run 1"),
        "{}",
        logs.stdout
    );
    assert!(logs.stdout.contains("\nworking\n"), "{}", logs.stdout);
}
