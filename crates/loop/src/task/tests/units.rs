//! Small pieces: durations, waits, suggestions, the delimiter rules.

use std::time::Duration;

use super::{error, parse};
use crate::task::{Key, OnQuestionTimeout, Wait, parse_limit, parse_wait};

#[test]
fn parse_wait_accepts_the_documented_forms() {
    let secs = |s| Wait::For(Duration::from_secs(s));
    assert_eq!(parse_wait("90s"), Ok(secs(90)));
    assert_eq!(parse_wait("5m"), Ok(secs(300)));
    assert_eq!(parse_wait("1h"), Ok(secs(3600)));
    assert_eq!(parse_wait("1h30m"), Ok(secs(5400)));
    assert_eq!(parse_wait("1h 30m"), Ok(secs(5400)));
    assert_eq!(parse_wait("2d"), Ok(secs(2 * 86_400)));
    assert_eq!(
        parse_wait("1s500ms"),
        Ok(Wait::For(Duration::from_millis(1500)))
    );
    assert_eq!(parse_wait("90"), Ok(secs(90)));
    assert_eq!(parse_wait("0"), Ok(Wait::For(Duration::ZERO)));
    assert_eq!(parse_wait(" 0s "), Ok(Wait::For(Duration::ZERO)));
    assert_eq!(parse_wait("never"), Ok(Wait::Never));
    assert_eq!(parse_wait("Never"), Ok(Wait::Never));
    assert_eq!(parse_wait("30d"), Ok(secs(30 * 86_400)));
}

#[test]
fn parse_limit_is_parse_wait_without_zero() {
    assert_eq!(parse_limit("30m"), Ok(Wait::For(Duration::from_secs(1800))));
    assert_eq!(parse_limit("never"), Ok(Wait::Never));
    for zero in ["0", "0s", "0m"] {
        let e = parse_limit(zero).unwrap_err();
        assert!(e.contains("longer than 0"), "{zero}: {e}");
    }
    assert_eq!(parse_limit("soon"), parse_wait("soon"));
}

#[test]
fn parse_wait_refuses_other_forms_and_says_which_work() {
    for bad in [
        "",
        "5 minutes",
        "5min",
        "1.5h",
        "-5s",
        "5m1h",
        "1m1m",
        "m",
        "5x",
        "forever",
        "1w",
    ] {
        let message = parse_wait(bad).unwrap_err();
        assert!(
            message.contains("90s, 5m, 1h or 1h30m"),
            "{bad:?}: {message}"
        );
        assert!(message.contains("never"), "{bad:?}: {message}");
    }
    let message = parse_wait("31d").unwrap_err();
    assert!(message.contains("30 days"), "{message}");
    assert!(
        parse_wait("99999999999999999999999s")
            .unwrap_err()
            .contains("30 days")
    );
}

#[test]
fn wait_display_round_trips() {
    for text in ["never", "0s", "90ms", "5m", "1m30s", "1h30m", "2d3h", "30d"] {
        let wait = parse_wait(text).unwrap();
        assert_eq!(wait.to_string(), text);
        assert_eq!(parse_wait(&wait.to_string()), Ok(wait));
    }
    assert_eq!(Wait::For(Duration::from_secs(90)).to_string(), "1m30s");
}

#[test]
fn wait_and_on_question_timeout_serialize_as_lowercase_text() {
    let wait = Wait::For(Duration::from_secs(300));
    assert_eq!(serde_json::to_string(&wait).unwrap(), "\"5m\"");
    assert_eq!(serde_json::to_string(&Wait::Never).unwrap(), "\"never\"");
    assert_eq!(serde_json::from_str::<Wait>("\"5m\"").unwrap(), wait);
    assert!(serde_json::from_str::<Wait>("\"soon\"").is_err());
    assert_eq!(
        serde_json::to_string(&OnQuestionTimeout::Continue).unwrap(),
        "\"continue\""
    );
    assert_eq!(
        serde_json::from_str::<OnQuestionTimeout>("\"stop\"").unwrap(),
        OnQuestionTimeout::Stop
    );
    assert_eq!(Wait::Never.duration(), None);
    assert_eq!(wait.duration(), Some(Duration::from_secs(300)));
}

#[test]
fn unknown_keys_get_the_nearest_known_key() {
    assert_eq!(Key::suggest("max_iteration"), Some(Key::MaxIterations));
    assert_eq!(
        Key::suggest("MaxIterations"),
        None.or(Key::suggest("max-iterations"))
    );
    assert_eq!(Key::suggest("max-iterations"), Some(Key::MaxIterations));
    assert_eq!(Key::suggest("Task"), Some(Key::Task));
    assert_eq!(Key::suggest("tests_command"), Some(Key::TestCommand));
    assert_eq!(Key::suggest("webhook"), Some(Key::WebhookUrl));
    assert_eq!(Key::suggest("colour"), None);
    assert_eq!(Key::suggest("description"), None);
    for key in Key::ALL {
        assert_eq!(Key::from_name(key.name()), Some(key));
        assert_eq!(Key::suggest(key.name()), Some(key));
    }
}

#[test]
fn delimiters_allow_trailing_spaces_but_nothing_else() {
    assert!(parse("---  \ntask: x\n---\t\n").is_ok());
    assert!(error("--- # settings\ntask: x\n---\n").contains(":1:1: no frontmatter"));
    assert!(error(" ---\ntask: x\n---\n").contains(":1:1: no frontmatter"));
}

#[test]
fn yaml_error_positions_are_file_lines() {
    // The YAML starts on line 2, so libyaml's line 2 is the file's line 3.
    let message = error("---\ntask: x\nv: [a, b\n---\n");
    assert!(message.starts_with("RALPH_TASK.md:4:1: "), "{message}");
    assert!(
        message.contains("that starts at line 3, column 4"),
        "{message}"
    );
}

#[test]
fn body_may_contain_delimiter_lines() {
    let task = parse("---\ntask: x\n---\n# Title\n---\n- [ ] Still counted\n").unwrap();
    assert_eq!(task.criteria.len(), 1);
    assert_eq!(task.criteria[0].line, 6);
}

#[test]
fn tabs_after_a_colon_are_fine_but_not_before_a_key() {
    assert!(parse("---\ntask:\tx\n---\n").is_ok());
    let message = error("---\ntask: x\n  \tmodel: y\n---\n");
    assert!(message.starts_with("RALPH_TASK.md:3:3: a tab"), "{message}");
}

#[test]
fn agent_args_accept_integers_as_text() {
    let task = parse("---\ntask: x\nagent_args: [--max-turns, 5, -1]\n---\n").unwrap();
    assert_eq!(task.agent_args, ["--max-turns", "5", "-1"]);
}

#[test]
fn numbers_and_flags_accept_quoted_and_yaml_1_1_spellings() {
    let task = parse(
        "---\ntask: x\nmax_iterations: \"7\"\nbell: off\ndesktop_notification: Yes\nmax_cost_usd: \"$2.5\"\n---\n",
    )
    .unwrap();
    assert_eq!(task.max_iterations, 7);
    assert!(!task.notify.bell);
    assert!(task.notify.desktop_notification);
    assert_eq!(task.max_cost_usd, Some(2.5));
}

#[test]
fn limits_are_inclusive() {
    let task =
        parse("---\ntask: x\nmax_iterations: 1000000\nquestion_timeout: 30d\n---\n").unwrap();
    assert_eq!(task.max_iterations, 1_000_000);
    assert!(error("---\ntask: x\nmax_iterations: 1000001\n---\n").contains("1,000,000"));
    assert!(error("---\ntask: x\nquestion_timeout: 2592001\n---\n").contains("30 days"));
}
