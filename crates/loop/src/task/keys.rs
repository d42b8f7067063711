//! The frontmatter keys ralph knows, and what each accepts.
//!
//! The YAML reader ([`super::yaml`]) hands every value to [`Settings::set`] (or, for list
//! keys, each item to [`Settings::push`]) as a [`Node`]. Conversion and range checks live
//! here, as plain functions of a value, so the rules read in one place and the messages
//! share one voice. A `Problem` returned from here is given its line and column by the
//! YAML reader.

use std::time::Duration;

use super::error::Problem;
use super::key::{Key, nearest};
use super::wait::{self, DURATION_FORMS, DurationError, OnQuestionTimeout, Wait};
use super::{
    DEFAULT_MAX_CONSECUTIVE_FAILURES, DEFAULT_MAX_ITERATIONS, GitSettings, LandMode, LandWith,
    MAX_COUNT, NotifySettings,
};

/// One YAML value, reduced to what the checks need.
///
/// Lists and mappings carry no contents: a key that takes a list receives its items one by
/// one through [`Settings::push`], and everywhere else a list or mapping is an error.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Node<'a> {
    /// `~`, `null` or nothing at all.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// Any integer YAML reads, wide enough for huge ones.
    Int(i128),
    /// A float, including `.inf` and `.nan`.
    Float(f64),
    /// Text, quoted or not.
    Str(&'a str),
    /// A list (`[a, b]` or `- a` lines).
    List,
    /// A mapping (`{a: b}` or indented `a: b` lines).
    Mapping,
}

impl Node<'_> {
    /// How an error message names what was found.
    pub(super) fn describe(&self) -> String {
        match self {
            Node::Null => "an empty value".to_owned(),
            Node::Bool(b) => b.to_string(),
            Node::Int(n) => n.to_string(),
            // `{:?}` keeps the point of `1.0`, which `{}` drops ("a whole number ..., found 1").
            Node::Float(f) => format!("{f:?}"),
            Node::Str(s) if s.trim().is_empty() => "an empty string".to_owned(),
            Node::Str(s) => format!("{:?}", shorten(s)),
            Node::List => "a list".to_owned(),
            Node::Mapping => "a mapping (indented 'key: value' lines)".to_owned(),
        }
    }
}

/// Keeps error messages one line long when a value is a novel.
fn shorten(s: &str) -> String {
    const MAX: usize = 60;
    if s.chars().count() <= MAX {
        s.to_owned()
    } else {
        let mut cut: String = s.chars().take(MAX).collect();
        cut.push('…');
        cut
    }
}

/// Every frontmatter setting, holding its default until the file sets it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Settings {
    pub(super) task: Option<String>,
    pub(super) completion_criteria: Vec<String>,
    pub(super) max_iterations: u32,
    pub(super) test_command: Option<String>,
    pub(super) agent: Option<String>,
    pub(super) agent_args: Vec<String>,
    pub(super) model: Option<String>,
    pub(super) question_timeout: Wait,
    pub(super) iteration_timeout: Wait,
    pub(super) test_timeout: Duration,
    pub(super) on_question_timeout: OnQuestionTimeout,
    pub(super) max_consecutive_failures: u32,
    pub(super) max_cost_usd: Option<f64>,
    pub(super) notify: NotifySettings,
    pub(super) sandbox: crate::sandbox::SandboxSettings,
    pub(super) git: GitSettings,
    /// The keys given a value (not `null`), in the order they came.
    pub(super) given: Vec<Key>,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            task: None,
            completion_criteria: Vec::new(),
            max_iterations: DEFAULT_MAX_ITERATIONS,
            test_command: None,
            agent: None,
            agent_args: Vec::new(),
            model: None,
            question_timeout: Wait::For(super::DEFAULT_QUESTION_TIMEOUT),
            iteration_timeout: Wait::For(super::DEFAULT_ITERATION_TIMEOUT),
            test_timeout: super::DEFAULT_TEST_TIMEOUT,
            on_question_timeout: OnQuestionTimeout::default(),
            max_consecutive_failures: DEFAULT_MAX_CONSECUTIVE_FAILURES,
            max_cost_usd: None,
            notify: NotifySettings::default(),
            sandbox: Default::default(),
            git: GitSettings::default(),
            given: Vec::new(),
        }
    }
}

impl Settings {
    /// Sets a key from its value. `null` leaves an optional key at its default.
    ///
    /// A list key's items arrive through [`Settings::push`]; here it only sees `null` (an
    /// empty list) or a value that is not a list.
    pub(super) fn set(&mut self, key: Key, value: Node<'_>) -> Result<(), Problem> {
        if value != Node::Null && !self.given.contains(&key) {
            self.given.push(key);
        }
        match key {
            Key::Task => {
                const WHAT: &str = "a one-line description of the work";
                let task = text(key, value, WHAT)?;
                self.task = Some(task.ok_or_else(|| bad(key, WHAT, &value, key.write_it_like()))?);
            }
            Key::CompletionCriteria | Key::AgentArgs | Key::SandboxWrite | Key::SandboxRead => {
                if value != Node::Null {
                    let fix = format!(
                        "Write it like: {}, or one '- item' per line below the key",
                        key.example()
                    );
                    return Err(bad(key, "a list of strings", &value, fix));
                }
            }
            Key::TestCommand => self.test_command = text(key, value, "a shell command")?,
            Key::Agent => {
                self.agent = text(key, value, "an agent preset name or a command line")?;
            }
            Key::Model => self.model = text(key, value, "a model name")?,
            Key::NotifyCommand => {
                self.notify.notify_command = text(key, value, "a shell command")?;
            }
            Key::WebhookUrl => self.notify.webhook_url = url(key, value)?,
            Key::MaxIterations => {
                if let Some(n) = count(key, value)? {
                    self.max_iterations = n;
                }
            }
            Key::MaxConsecutiveFailures => {
                if let Some(n) = count(key, value)? {
                    self.max_consecutive_failures = n;
                }
            }
            Key::QuestionTimeout => {
                if let Some(w) = wait_value(key, value, Zero::MeansNoWait)? {
                    self.question_timeout = w;
                }
            }
            Key::IterationTimeout => {
                if let Some(w) = wait_value(key, value, Zero::Refused)? {
                    self.iteration_timeout = w;
                }
            }
            Key::TestTimeout => {
                if let Some(d) = duration_value(key, value)? {
                    self.test_timeout = d;
                }
            }
            Key::OnQuestionTimeout => {
                if let Some(choice) = on_question_timeout(key, value)? {
                    self.on_question_timeout = choice;
                }
            }
            Key::MaxCostUsd => self.max_cost_usd = dollars(key, value)?,
            Key::Bell => {
                if let Some(b) = flag(key, value)? {
                    self.notify.bell = b;
                }
            }
            Key::DesktopNotification => {
                if let Some(b) = flag(key, value)? {
                    self.notify.desktop_notification = b;
                }
            }
            Key::Checkpoints => {
                if let Some(b) = flag(key, value)? {
                    self.git.checkpoints = b;
                }
            }
            Key::Worktree => {
                if let Some(b) = flag(key, value)? {
                    self.git.worktree = b;
                }
            }
            Key::WorktreeSetup => self.git.worktree_setup = text(key, value, "a shell command")?,
            Key::Land => {
                if let Some(s) = choice(key, value, &["manual", "auto", "pr"])? {
                    self.git.land = match s {
                        "auto" => LandMode::Auto,
                        "pr" => LandMode::PullRequest,
                        _ => LandMode::Manual,
                    };
                }
            }
            Key::LandWith => {
                if let Some(s) = choice(key, value, &["rebase", "merge"])? {
                    self.git.land_with = if s == "merge" {
                        LandWith::Merge
                    } else {
                        LandWith::Rebase
                    };
                }
            }
            Key::LandAttempts => {
                if let Some(n) = count(key, value)? {
                    self.git.land_attempts = n;
                }
            }
            Key::Sandbox => {
                if let Some(mode) = sandbox_mode(key, value)? {
                    self.sandbox.mode = mode;
                }
            }
            Key::SandboxNet => {
                // `null` leaves the network open; `[]` (see `yaml`) closes it.
                if value != Node::Null {
                    let fix = format!(
                        "Write it like: {}, the TCP ports the agent may connect to",
                        key.example()
                    );
                    return Err(bad(key, "a list of TCP ports", &value, fix));
                }
            }
        }
        Ok(())
    }

    /// Appends one item of a list key.
    pub(super) fn push(&mut self, key: Key, item: Node<'_>) -> Result<(), Problem> {
        if key == Key::SandboxNet && item == Node::List {
            // The list itself, before its items: `sandbox_net: []` allows no port at all.
            self.sandbox.net.get_or_insert_with(Vec::new);
            return Ok(());
        }
        let (list, what) = match key {
            Key::CompletionCriteria => {
                (&mut self.completion_criteria, "a criterion written as text")
            }
            Key::AgentArgs => (&mut self.agent_args, "a string"),
            Key::SandboxWrite => (&mut self.sandbox.write, "a path"),
            Key::SandboxRead => (&mut self.sandbox.read, "a path"),
            Key::SandboxNet => {
                if !self.given.contains(&key) {
                    self.given.push(key);
                }
                let port = match item {
                    Node::Int(n) => u16::try_from(n).ok().filter(|p| *p > 0),
                    Node::Str(s) => s.trim().parse::<u16>().ok().filter(|p| *p > 0),
                    _ => None,
                };
                let Some(port) = port else {
                    return Err(Problem::BadValue {
                        key,
                        expected: "a list where each item is a TCP port, 1 to 65535".into(),
                        found: format!("an item that is {}", item.describe()),
                        example: key.write_it_like(),
                    });
                };
                self.sandbox.net.get_or_insert_with(Vec::new).push(port);
                return Ok(());
            }
            // Only list keys have items; anything else is a list where it does not belong.
            _ => return self.set(key, Node::List),
        };
        if !self.given.contains(&key) {
            self.given.push(key);
        }
        let fix = match item {
            Node::Str(s) if !s.trim().is_empty() => {
                list.push(s.trim().to_owned());
                return Ok(());
            }
            // `agent_args: [--max-turns, 5]` plainly means the text "5".
            Node::Int(n) if key == Key::AgentArgs => {
                list.push(n.to_string());
                return Ok(());
            }
            Node::Mapping => {
                "An item containing ': ' must be in quotes, like: - \"Cache: hits skip the \
                 database\""
            }
            Node::Str(_) | Node::Null => "Delete the empty item",
            _ => "Put the item in quotes, or write the list as '- text' lines",
        };
        Err(Problem::BadValue {
            key,
            expected: format!("a list where each item is {what}"),
            found: format!("an item that is {}", item.describe()),
            example: fix.to_owned(),
        })
    }
}

fn bad(key: Key, expected: impl Into<String>, found: &Node<'_>, example: String) -> Problem {
    Problem::BadValue {
        key,
        expected: expected.into(),
        found: found.describe(),
        example,
    }
}

/// Text for a string key: `null` is unset, an empty string is refused.
fn text(key: Key, value: Node<'_>, expected: &str) -> Result<Option<String>, Problem> {
    match value {
        Node::Null => Ok(None),
        Node::Str(s) if s.trim().is_empty() => {
            let example = if key == Key::Task {
                key.write_it_like()
            } else {
                format!("{}, or delete the line", key.write_it_like())
            };
            Err(bad(key, expected, &value, example))
        }
        Node::Str(s) => Ok(Some(s.trim().to_owned())),
        Node::Bool(_) | Node::Int(_) | Node::Float(_) => {
            let example = format!("Put it in quotes: {}: \"{}\"", key.name(), value.describe());
            Err(bad(key, expected, &value, example))
        }
        Node::List | Node::Mapping => {
            // `task: [WIP] Fix the login` is a list to YAML, which the author rarely means.
            let (opening, word) = match value {
                Node::List => ('[', "list"),
                _ => ('{', "mapping"),
            };
            let example = format!(
                "Write it as one line of text, like: {}. A value that starts with '{opening}' is a \
                 {word} to YAML: to keep the '{opening}', put the whole value in quotes, like {}: \
                 \"{opening}WIP{} Fix the login\"",
                key.example(),
                key.name(),
                if opening == '[' { ']' } else { '}' },
            );
            Err(bad(key, expected, &value, example))
        }
    }
}

/// A count from 1 to [`MAX_COUNT`]; a quoted number is fine.
fn count(key: Key, value: Node<'_>) -> Result<Option<u32>, Problem> {
    const AT_LEAST_ONE: &str = "a whole number of at least 1";
    let n: i128 = match value {
        Node::Null => return Ok(None),
        Node::Int(n) => n,
        Node::Str(s) => match s.trim().parse::<i128>() {
            Ok(n) => n,
            Err(_) => return Err(bad(key, AT_LEAST_ONE, &value, key.write_it_like())),
        },
        Node::Float(f) if f.is_finite() && f.fract() == 0.0 && f > f64::from(MAX_COUNT) => {
            i128::MAX
        }
        _ => return Err(bad(key, AT_LEAST_ONE, &value, key.write_it_like())),
    };
    if n < 1 {
        return Err(bad(key, AT_LEAST_ONE, &value, key.write_it_like()));
    }
    u32::try_from(n)
        .ok()
        .filter(|n| *n <= MAX_COUNT)
        .map(Some)
        .ok_or_else(|| {
            bad(
                key,
                "at most 1,000,000 (the limit)",
                &value,
                key.write_it_like(),
            )
        })
}

/// Whether a zero duration means "do not wait" or makes no sense.
#[derive(Clone, Copy, PartialEq)]
enum Zero {
    MeansNoWait,
    Refused,
}

/// A [`Wait`]: a duration, `never`, or a YAML integer of seconds.
fn wait_value(key: Key, value: Node<'_>, zero: Zero) -> Result<Option<Wait>, Problem> {
    let expected = match zero {
        Zero::MeansNoWait => format!("{DURATION_FORMS}, 0 to not wait, or never to wait forever"),
        Zero::Refused => format!("{DURATION_FORMS}, or never for no limit"),
    };
    if let Node::Str(s) = value
        && s.trim().eq_ignore_ascii_case("never")
    {
        return Ok(Some(Wait::Never));
    }
    let Some(d) = duration(key, value, &expected, zero)? else {
        return Ok(None);
    };
    if d.is_zero() && zero == Zero::Refused {
        return Err(bad(
            key,
            "longer than 0",
            &value,
            format!("{}, or never for no limit", key.write_it_like()),
        ));
    }
    Ok(Some(Wait::For(d)))
}

/// A duration that must be bounded and above zero.
fn duration_value(key: Key, value: Node<'_>) -> Result<Option<Duration>, Problem> {
    if let Node::Str(s) = value
        && s.trim().eq_ignore_ascii_case("never")
    {
        return Err(bad(
            key,
            format!("a bounded time: {DURATION_FORMS}"),
            &value,
            format!("{} (never is not allowed here)", key.write_it_like()),
        ));
    }
    let d = duration(key, value, DURATION_FORMS, Zero::Refused)?;
    if d.is_some_and(|d| d.is_zero()) {
        return Err(bad(key, "longer than 0", &value, key.write_it_like()));
    }
    Ok(d)
}

/// The duration grammar, or a YAML integer meaning seconds.
fn duration(
    key: Key,
    value: Node<'_>,
    expected: &str,
    zero: Zero,
) -> Result<Option<Duration>, Problem> {
    let parsed = match value {
        Node::Null => return Ok(None),
        Node::Int(n) if n < 0 => {
            let expected = match zero {
                Zero::MeansNoWait => "0 or more",
                Zero::Refused => "longer than 0",
            };
            return Err(bad(key, expected, &value, key.write_it_like()));
        }
        Node::Int(n) => u64::try_from(n)
            .map_err(|_| DurationError::TooLong)
            .and_then(wait::seconds),
        Node::Str(s) => wait::parse_duration(s),
        _ => Err(DurationError::Malformed),
    };
    match parsed {
        Ok(d) => Ok(Some(d)),
        Err(DurationError::Malformed) => Err(bad(key, expected, &value, key.write_it_like())),
        Err(DurationError::TooLong) => Err(bad(
            key,
            "at most 30 days (30d)",
            &value,
            match key {
                Key::QuestionTimeout => {
                    format!("{}, or never to wait forever", key.write_it_like())
                }
                Key::IterationTimeout => format!("{}, or never for no limit", key.write_it_like()),
                _ => key.write_it_like(),
            },
        )),
    }
}

fn on_question_timeout(key: Key, value: Node<'_>) -> Result<Option<OnQuestionTimeout>, Problem> {
    const EXPECTED: &str = "one of continue, wait or stop";
    match value {
        Node::Null => Ok(None),
        Node::Str(s) => match OnQuestionTimeout::from_name(s) {
            Some(choice) => Ok(Some(choice)),
            None => {
                let names = OnQuestionTimeout::ALL.map(OnQuestionTimeout::as_str);
                let example = match nearest(s, &names) {
                    Some(near) => format!(
                        "Did you mean '{near}'? Write it like: {}: {near}",
                        key.name()
                    ),
                    None => format!(
                        "Write it like: {}: stop (continue: the agent goes on with its best \
                         guess; wait: keep waiting; stop: end the loop)",
                        key.name()
                    ),
                };
                Err(bad(key, EXPECTED, &value, example))
            }
        },
        other => Err(bad(key, EXPECTED, &other, key.write_it_like())),
    }
}

fn dollars(key: Key, value: Node<'_>) -> Result<Option<f64>, Problem> {
    const EXPECTED: &str = "an amount of US dollars above 0";
    let amount = match value {
        Node::Null => return Ok(None),
        // Any plausible sum of dollars converts exactly.
        Node::Int(n) => n as f64,
        Node::Float(f) => f,
        Node::Str(s) => match s.trim().trim_start_matches('$').trim().parse::<f64>() {
            Ok(f) => f,
            Err(_) => {
                return Err(bad(
                    key,
                    EXPECTED,
                    &value,
                    format!("{} (a plain number, no $ sign)", key.write_it_like()),
                ));
            }
        },
        other => return Err(bad(key, EXPECTED, &other, key.write_it_like())),
    };
    if amount.is_finite() && amount > 0.0 {
        Ok(Some(amount))
    } else {
        Err(bad(
            key,
            EXPECTED,
            &value,
            format!("{}, or delete the line for no limit", key.write_it_like()),
        ))
    }
}

/// `sandbox:`: `true`, `false` or `required`.
fn sandbox_mode(key: Key, value: Node<'_>) -> Result<Option<crate::sandbox::Mode>, Problem> {
    use crate::sandbox::Mode;
    const EXPECTED: &str = "true, false or required";
    let fix = || {
        format!(
            "{} (false: no sandbox; required: refuse to run where the kernel cannot sandbox)",
            key.write_it_like()
        )
    };
    if let Node::Str(s) = value
        && s.trim().eq_ignore_ascii_case("required")
    {
        return Ok(Some(Mode::Required));
    }
    match flag(key, value) {
        Ok(b) => Ok(b.map(|on| if on { Mode::On } else { Mode::Off })),
        Err(_) => Err(bad(key, EXPECTED, &value, fix())),
    }
}
/// One of a few words, as written in `names`.
fn choice(
    key: Key,
    value: Node<'_>,
    names: &[&'static str],
) -> Result<Option<&'static str>, Problem> {
    let expected = format!("one of {}", names.join(", "));
    match value {
        Node::Null => Ok(None),
        Node::Str(s) => match names.iter().find(|n| **n == s.trim()) {
            Some(n) => Ok(Some(n)),
            None => {
                let example = match nearest(s, names) {
                    Some(near) => format!(
                        "Did you mean '{near}'? Write it like: {}: {near}",
                        key.name()
                    ),
                    None => key.write_it_like(),
                };
                Err(bad(key, expected, &value, example))
            }
        },
        other => Err(bad(key, expected, &other, key.write_it_like())),
    }
}

fn flag(key: Key, value: Node<'_>) -> Result<Option<bool>, Problem> {
    match value {
        Node::Null => Ok(None),
        Node::Bool(b) => Ok(Some(b)),
        // YAML 1.1 habits: the key can only mean a yes/no, so accept the old spellings.
        Node::Str(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" => Ok(Some(true)),
            "false" | "no" | "off" => Ok(Some(false)),
            _ => Err(bad(key, "true or false", &value, key.write_it_like())),
        },
        other => Err(bad(key, "true or false", &other, key.write_it_like())),
    }
}

fn url(key: Key, value: Node<'_>) -> Result<Option<String>, Problem> {
    const EXPECTED: &str = "an http:// or https:// URL";
    let Some(s) = text(key, value, EXPECTED)? else {
        return Ok(None);
    };
    let lower = s.to_ascii_lowercase();
    let host = ["http://", "https://"]
        .iter()
        .find_map(|scheme| lower.strip_prefix(scheme));
    match host {
        Some(rest)
            if !rest.is_empty() && !rest.starts_with('/') && !s.contains(char::is_whitespace) =>
        {
            Ok(Some(s))
        }
        _ => Err(bad(key, EXPECTED, &value, key.write_it_like())),
    }
}
