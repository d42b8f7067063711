//! Telling a rate limit from other errors, in formats that report it only as error text.
//!
//! Claude Code says so in fields (`api_retry` with `error_status: 429`, `api_error_status`,
//! `rate_limit_event`); opencode gives the HTTP status. Codex, Gemini and Cursor give only a
//! message, so the message is read: an HTTP 429, "Too Many Requests", "rate limit",
//! `RESOURCE_EXHAUSTED`, "quota" or "usage limit" (`usage_limit_reached`) marks a rate limit, and "try again in 20s"
//! (or "retry in", "retry after") gives the wait. A message that matches none of these is an
//! ordinary error.

use std::time::Duration;

use crate::AgentEvent;
use crate::summary::first_line;

/// Phrases that mark a rate-limit or quota refusal, lowercase.
const PHRASES: [&str; 9] = [
    "too many requests",
    "rate limit",
    "rate_limit",
    "ratelimit",
    "resource_exhausted",
    "resource exhausted",
    "quota",
    "usage limit",
    // Codex's error code for a ChatGPT plan's limit, `usage_limit_reached`, when only the code
    // is given.
    "usage_limit",
];

/// Whether an error message reads like a rate limit or quota refusal.
pub(crate) fn mentions_rate_limit(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    PHRASES.iter().any(|p| lower.contains(p)) || has_number(&lower, "429")
}

/// Whether `number` occurs in `text` on its own (not inside a longer number or an id).
fn has_number(text: &str, number: &str) -> bool {
    text.match_indices(number).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + number.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_alphanumeric())
            && !after.is_some_and(|c| c.is_ascii_alphanumeric())
    })
}

/// The wait a message asks for ("try again in 1.5s", "retry after 2 minutes"), if it says.
pub(crate) fn retry_after_in(message: &str) -> Option<Duration> {
    let lower = message.to_ascii_lowercase();
    ["try again in ", "retry in ", "retry after ", "retrying in "]
        .iter()
        .find_map(|lead| {
            let at = lower.find(lead)?;
            duration_at(&lower[at + lead.len()..])
        })
}

/// Reads "1.5s", "20 seconds", "2 hours 5 minutes", "500ms" at the start of `text`.
fn duration_at(text: &str) -> Option<Duration> {
    let mut total = 0.0f64;
    let mut rest = text;
    let mut found = false;
    loop {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let Ok(number) = rest[..number_len].parse::<f64>() else {
            break;
        };
        let after = rest[number_len..].trim_start();
        let unit_len = after
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(after.len());
        let seconds = match &after[..unit_len] {
            "ms" | "millisecond" | "milliseconds" => 0.001,
            "s" | "sec" | "secs" | "second" | "seconds" => 1.0,
            "m" | "min" | "mins" | "minute" | "minutes" => 60.0,
            "h" | "hr" | "hrs" | "hour" | "hours" => 3600.0,
            "d" | "day" | "days" => 86_400.0,
            _ => break,
        };
        total += number * seconds;
        found = true;
        rest = after[unit_len..].trim_start_matches([' ', ',']);
        rest = rest.strip_prefix("and ").unwrap_or(rest);
    }
    (found && total.is_finite()).then(|| Duration::from_secs_f64(total))
}

/// A [`AgentEvent::RateLimited`] for an error message, if it reads like a rate limit.
pub(crate) fn from_message(message: &str) -> Option<AgentEvent> {
    mentions_rate_limit(message).then(|| AgentEvent::RateLimited {
        retry_after: retry_after_in(message),
        resets_at: None,
        message: first_line(message),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognizes_the_messages_agents_give() {
        for yes in [
            "exceeded retry limit, last status: 429 Too Many Requests, request id: 9c84b52ce87fbe62-SJC",
            r#"[API Error: {"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}]"#,
            "You've hit your usage limit. Try again in 2 hours 5 minutes.",
            "Rate limit reached for gpt-5 in organization org-x on tokens per min. Please try again in 1.5s.",
            "API Error: 429",
            "usage_limit_reached",
        ] {
            assert!(mentions_rate_limit(yes), "{yes}");
        }
        for no in [
            "We’re currently experiencing high demand, which may cause temporary errors.",
            "request id 14290, status 500",
            "mock internal error",
            "line 429x of the file",
        ] {
            assert!(!mentions_rate_limit(no), "{no}");
        }
    }

    #[test]
    fn reads_the_wait_when_the_message_gives_one() {
        assert_eq!(
            retry_after_in("Please try again in 1.5s."),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            retry_after_in("Try again in 2 hours 5 minutes."),
            Some(Duration::from_secs(2 * 3600 + 5 * 60))
        );
        assert_eq!(
            retry_after_in("retry after 500ms"),
            Some(Duration::from_millis(500))
        );
        assert_eq!(retry_after_in("try again later"), None);
        assert_eq!(retry_after_in("try again in a moment"), None);
    }
}
