//! Durations in the task file and on the command line: `90s`, `5m`, `1h30m`, `0`, `never`.
//!
//! humantime reads them, held to a narrow part of its grammar: one or more `<whole
//! number><unit>` parts, largest unit first, each unit once, with units `d`, `h`, `m`, `s` and
//! `ms`; a bare whole number is seconds. humantime alone would also take `5 minutes`, `1M` (a
//! month, beside `1m`, a minute), `2y` and `1.5h`, and a task file should mean the same thing
//! to every reader. [`Display`](std::fmt::Display) writes the same grammar, so a value
//! survives a round trip through a state file.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The longest duration any timeout accepts: 30 days. Longer waits are written `never`.
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// The accepted forms, quoted in every duration error.
pub(crate) const DURATION_FORMS: &str =
    "a duration like 90s, 5m, 1h or 1h30m (units d, h, m, s, ms; a bare number is seconds)";

/// How long to wait for something: a bounded time, or forever.
///
/// `Wait::For(Duration::ZERO)` means "do not wait at all".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Wait {
    /// Wait forever.
    Never,
    /// Wait this long; zero means do not wait.
    For(Duration),
}

impl Wait {
    /// The bounded wait, or `None` for [`Wait::Never`].
    pub fn duration(self) -> Option<Duration> {
        match self {
            Wait::Never => None,
            Wait::For(d) => Some(d),
        }
    }
}

impl fmt::Display for Wait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Wait::Never => f.write_str("never"),
            Wait::For(d) => f.write_str(&format_duration(*d)),
        }
    }
}

impl From<Wait> for String {
    fn from(wait: Wait) -> String {
        wait.to_string()
    }
}

impl TryFrom<String> for Wait {
    type Error = String;

    fn try_from(s: String) -> Result<Wait, String> {
        parse_wait(&s)
    }
}

/// What the loop does when nobody answers the agent's question in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnQuestionTimeout {
    /// Tell the agent to use its best judgement and go on (the default).
    #[default]
    Continue,
    /// Keep waiting for an answer, however long it takes.
    Wait,
    /// Stop the loop.
    Stop,
}

impl OnQuestionTimeout {
    /// Every value, in the order the docs list them.
    pub const ALL: [OnQuestionTimeout; 3] = [Self::Continue, Self::Wait, Self::Stop];

    /// The name as written in the task file.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Continue => "continue",
            Self::Wait => "wait",
            Self::Stop => "stop",
        }
    }

    /// Reads a task-file value, ignoring case and surrounding spaces.
    pub fn from_name(s: &str) -> Option<OnQuestionTimeout> {
        let s = s.trim();
        Self::ALL
            .into_iter()
            .find(|v| v.as_str().eq_ignore_ascii_case(s))
    }
}

impl fmt::Display for OnQuestionTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parses a time limit for something that runs (`iteration_timeout` on the command line):
/// [`parse_wait`]'s forms but `0`, since nothing can run in no time.
pub fn parse_limit(s: &str) -> Result<Wait, String> {
    match parse_wait(s)? {
        Wait::For(d) if d.is_zero() => Err(format!(
            "must be longer than 0; write a time such as 30m, or never for no limit; found {s:?}"
        )),
        wait => Ok(wait),
    }
}

/// Parses a wait: `90s`, `5m`, `1h`, `1h30m`, `0` (do not wait) or `never` (wait forever).
///
/// Meant for command-line flags as well as the task file; the error says which forms work.
pub fn parse_wait(s: &str) -> Result<Wait, String> {
    let trimmed = s.trim();
    if trimmed.eq_ignore_ascii_case("never") {
        return Ok(Wait::Never);
    }
    match parse_duration(trimmed) {
        Ok(d) => Ok(Wait::For(d)),
        Err(DurationError::Malformed) => Err(format!(
            "expected {DURATION_FORMS}, or 0 to not wait, or never to wait forever; found {s:?}"
        )),
        Err(DurationError::TooLong) => Err(format!(
            "{s:?} is longer than the limit of 30 days (30d); write never to wait forever"
        )),
    }
}

/// Why a duration string was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DurationError {
    /// Not in the grammar at all.
    Malformed,
    /// Well formed, but over [`MAX_DURATION`].
    TooLong,
}

/// Parses the duration grammar described in the module docs (no `never`).
pub(crate) fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let s = s.trim();
    if s.is_empty() {
        return Err(DurationError::Malformed);
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return seconds(s.parse::<u64>().map_err(|_| DurationError::TooLong)?);
    }
    // Largest first, each at most once: "5m1h" and "1m1m" are typos, not sums.
    const UNITS: [&str; 5] = ["d", "h", "m", "s", "ms"];
    let mut next_unit = 0;
    for unit in s.split(|c: char| c.is_ascii_digit() || c == ' ') {
        if unit.is_empty() {
            continue;
        }
        match UNITS[next_unit..].iter().position(|u| *u == unit) {
            Some(i) => next_unit += i + 1,
            None => return Err(DurationError::Malformed),
        }
    }
    match humantime::parse_duration(s) {
        Ok(d) if d > MAX_DURATION => Err(DurationError::TooLong),
        Ok(d) => Ok(d),
        Err(humantime::DurationError::NumberOverflow) => Err(DurationError::TooLong),
        Err(_) => Err(DurationError::Malformed),
    }
}

/// A whole number of seconds, as a YAML integer gives it.
pub(crate) fn seconds(secs: u64) -> Result<Duration, DurationError> {
    millis(secs.checked_mul(1_000).ok_or(DurationError::TooLong)?)
}

fn millis(ms: u64) -> Result<Duration, DurationError> {
    let d = Duration::from_millis(ms);
    if d > MAX_DURATION {
        Err(DurationError::TooLong)
    } else {
        Ok(d)
    }
}

/// Writes a duration in the grammar [`parse_duration`] reads: `1h30m`, `90ms`, `0s`.
///
/// Anything below a millisecond is dropped.
pub(crate) fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".to_owned();
    }
    let parts = [
        (ms / 86_400_000, "d"),
        (ms / 3_600_000 % 24, "h"),
        (ms / 60_000 % 60, "m"),
        (ms / 1_000 % 60, "s"),
        (ms % 1_000, "ms"),
    ];
    parts
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, unit)| format!("{n}{unit}"))
        .collect()
}
