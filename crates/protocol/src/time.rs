//! Time as the `.ralph/` files write it: RFC 3339, UTC, to the millisecond.

use std::time::SystemTime;

/// Formats a time as RFC 3339 with milliseconds, UTC (`2026-11-22T14:17:33.123Z`).
pub fn timestamp(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

/// Parses what [`timestamp`] wrote.
pub fn parse_timestamp(s: &str) -> Option<SystemTime> {
    humantime::parse_rfc3339_weak(s).ok()
}

/// `14:05` in the user's time zone; with the day (`Tue 2 Dec 14:05`) when it is not today.
pub fn local_time(at: SystemTime, now: SystemTime) -> String {
    let zone = jiff::tz::TimeZone::system();
    let (Ok(at), Ok(now)) = (
        jiff::Timestamp::try_from(at),
        jiff::Timestamp::try_from(now),
    ) else {
        return "an unknown time".into();
    };
    let at = at.to_zoned(zone.clone());
    if at.date() == now.to_zoned(zone).date() {
        at.strftime("%H:%M").to_string()
    } else {
        at.strftime("%a %-d %b %H:%M").to_string()
    }
}
