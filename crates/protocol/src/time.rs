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
