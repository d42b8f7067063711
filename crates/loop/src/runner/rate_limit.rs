//! How long to wait out a rate limit before the same iteration runs again.
//!
//! A limit that says when it resets (Claude's `rate_limit_event` `resetsAt`) is waited out to
//! that moment, plus a little jitter so that loops limited together do not all retry in the
//! same second ([`spread`]), and never longer than [`RESET_WAIT_MAX`] at a time. A limit that says how long
//! to wait is waited that long; one that says neither backs off from [`BACKOFF_START`], doubling
//! while it lasts, up to [`BACKOFF_MAX`].
//! These constants are the only copy of those numbers: the policy and its tests use them.

use std::time::{Duration, SystemTime};

use ralph_protocol::local_time;

/// The first wait after a rate limit that does not say how long to wait.
pub(crate) const BACKOFF_START: Duration = Duration::from_secs(30);

/// The longest wait between retries after rate limits that do not say when they reset.
pub(crate) const BACKOFF_MAX: Duration = Duration::from_secs(15 * 60);

/// The longest single wait for a stated reset: a weekly limit may reset days away, and the
/// loop looks again (a retry that is refused costs nothing) rather than sleep that long.
pub(super) const RESET_WAIT_MAX: Duration = Duration::from_secs(6 * 3600);

/// The most added after a stated reset.
const JITTER_MAX: Duration = Duration::from_secs(30);

/// The least spread given to a reset that is near or past: loops still do not retry as one.
const JITTER_MIN_SPAN: Duration = Duration::from_secs(1);

/// What the agent reported about a rate limit in one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RateLimit {
    /// How long it said to wait, the longest of its reports.
    pub retry_after: Option<Duration>,
    /// When it said the limit resets (Unix seconds), the latest of its reports.
    pub resets_at: Option<u64>,
    /// Its words, as one sanitized line.
    pub message: String,
}

impl RateLimit {
    /// This report, merged with what the same run reported before: the longest wait and the
    /// latest reset any report suggested (a later report may not say), and the newest words.
    pub(crate) fn merged(
        before: Option<&RateLimit>,
        retry_after: Option<Duration>,
        resets_at: Option<u64>,
        message: String,
    ) -> RateLimit {
        let before = |f: fn(&RateLimit) -> Option<u64>| before.and_then(f);
        // `None` is less than any `Some`.
        let longest = |a: Option<u64>, b: Option<u64>| a.max(b);
        RateLimit {
            retry_after: longest(
                before(|r| r.retry_after.map(|d| d.as_millis() as u64)),
                retry_after.map(|d| d.as_millis() as u64),
            )
            .map(Duration::from_millis),
            resets_at: longest(before(|r| r.resets_at), resets_at),
            message,
        }
    }

    /// The wait before the next attempt, at `now`, after `streak` rate-limited attempts in a
    /// row, with `jitter` (up to [`JITTER_MAX`]) added after a stated reset; and the line that
    /// tells the user, the reset in local time ("resets at 14:05, in 3h 12m").
    pub(crate) fn wait(
        &self,
        streak: u32,
        now: SystemTime,
        jitter: Duration,
    ) -> (Duration, String) {
        if let Some(at) = self.resets_at {
            let reset = SystemTime::UNIX_EPOCH + Duration::from_secs(at);
            let until_reset = reset.duration_since(now).unwrap_or_default();
            let wait = (until_reset + spread(until_reset, jitter)).min(RESET_WAIT_MAX);
            let mut line = format!(
                "{}; it resets at {}, in {}",
                self.message,
                local_time(reset, now),
                short_span(until_reset)
            );
            if wait < until_reset {
                line.push_str(&format!("; ralph looks again in {}", short_span(wait)));
            }
            return (wait, line);
        }
        let wait = self
            .retry_after
            .unwrap_or_else(|| BACKOFF_START * 2u32.saturating_pow(streak.min(8)))
            .min(BACKOFF_MAX);
        (wait, self.message.clone())
    }
}

/// What is added after a reset `until_reset` away, for a `jitter` drawn up to [`JITTER_MAX`]:
/// a tenth of the wait, at least [`JITTER_MIN_SPAN`] and at most [`JITTER_MAX`], scaled by
/// the draw. Loops limited together then retry spread over a span that matters next to their
/// wait, and a limit a few seconds long is not stretched by half a minute.
pub(super) fn spread(until_reset: Duration, jitter: Duration) -> Duration {
    let span = (until_reset / 10).clamp(JITTER_MIN_SPAN, JITTER_MAX);
    span.mul_f64(jitter.min(JITTER_MAX).as_secs_f64() / JITTER_MAX.as_secs_f64())
}

/// A little randomness for [`RateLimit::wait`] and [`spread`]: up to [`JITTER_MAX`].
pub(super) fn jitter() -> Duration {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos();
    Duration::from_millis(u64::from(nanos) % JITTER_MAX.as_millis() as u64)
}

/// `3h 12m`, `12m`, `40s`, `2d 5h`.
pub(super) fn short_span(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s.div_ceil(60).min(59)),
        3600..86400 => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d {}h", s / 86400, (s % 86400) / 3600),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::{JITTER_MAX, RESET_WAIT_MAX, RateLimit, spread};

    fn limit(resets_at: Option<u64>, retry_after: Option<Duration>) -> RateLimit {
        RateLimit {
            retry_after,
            resets_at,
            message: "the usage limit is reached (five_hour)".into(),
        }
    }

    const NOW: u64 = 1_795_889_551 - 3 * 3600 - 12 * 60;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    /// Issue 34, item 7: a limit that said when it resets was retried every ~30 s, and the
    /// reset was shown as "Unix time 1795889551".
    #[test]
    fn a_stated_reset_is_waited_out_with_jitter_and_shown_in_local_time() {
        let (wait, line) =
            limit(Some(1_795_889_551), None).wait(0, at(NOW), Duration::from_secs(7));
        assert_eq!(wait, Duration::from_secs(3 * 3600 + 12 * 60 + 7));
        let local = jiff::Timestamp::from_second(1_795_889_551)
            .unwrap()
            .to_zoned(jiff::tz::TimeZone::system())
            .strftime("%H:%M")
            .to_string();
        assert!(
            line.ends_with(&format!("; it resets at {local}, in 3h 12m")),
            "{line}"
        );
        assert!(!line.contains("Unix"), "{line}");
    }

    #[test]
    fn a_reset_days_away_is_capped_and_says_when_ralph_looks_again() {
        let reset = NOW + 3 * 86400;
        let (wait, line) = limit(Some(reset), None).wait(0, at(NOW), Duration::from_secs(7));
        assert_eq!(wait, RESET_WAIT_MAX);
        assert!(
            line.contains(", in 3d 0h; ralph looks again in 6h 00m"),
            "{line}"
        );
        let day = jiff::Timestamp::from_second(reset as i64)
            .unwrap()
            .to_zoned(jiff::tz::TimeZone::system())
            .strftime("%a %-d %b")
            .to_string();
        assert!(line.contains(&day), "{line}");
    }

    #[test]
    fn a_reset_already_past_waits_only_a_second_s_spread() {
        let (wait, _) = limit(Some(NOW - 5), None).wait(3, at(NOW), Duration::from_secs(15));
        assert_eq!(wait, Duration::from_millis(500));
    }

    #[test]
    fn the_spread_after_a_reset_is_a_tenth_of_the_wait_within_bounds() {
        let half = Duration::from_secs(15);
        assert_eq!(
            spread(Duration::from_secs(4), half),
            Duration::from_millis(500)
        );
        assert_eq!(
            spread(Duration::from_secs(100), half),
            Duration::from_secs(5)
        );
        assert_eq!(
            spread(Duration::from_secs(3600), half),
            Duration::from_secs(15)
        );
        assert_eq!(
            spread(Duration::from_secs(3600), Duration::ZERO),
            Duration::ZERO
        );
        assert_eq!(
            spread(Duration::from_secs(3600), Duration::from_secs(99)),
            JITTER_MAX
        );
    }

    #[test]
    fn without_a_reset_the_fixed_backoff_doubles_up_to_its_cap() {
        let none = limit(None, None);
        let waits: Vec<u64> = (0..8)
            .map(|streak| none.wait(streak, at(NOW), Duration::ZERO).0.as_secs())
            .collect();
        assert_eq!(waits, [30, 60, 120, 240, 480, 900, 900, 900]);
        let (wait, line) =
            limit(None, Some(Duration::from_secs(20))).wait(5, at(NOW), Duration::ZERO);
        assert_eq!(wait, Duration::from_secs(20));
        assert_eq!(line, "the usage limit is reached (five_hour)");
    }

    #[test]
    fn merged_reports_keep_the_longest_wait_and_latest_reset() {
        let first = RateLimit::merged(None, Some(Duration::from_secs(9)), None, "a".into());
        let second = RateLimit::merged(Some(&first), None, Some(100), "b".into());
        let third = RateLimit::merged(
            Some(&second),
            Some(Duration::from_secs(3)),
            Some(50),
            "c".into(),
        );
        assert_eq!(
            third,
            RateLimit {
                retry_after: Some(Duration::from_secs(9)),
                resets_at: Some(100),
                message: "c".into()
            }
        );
    }
}
