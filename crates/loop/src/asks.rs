//! Whether a `ralph ask` that claimed the question (`.ralph/ask.json`) is still there to
//! receive its answer: what the loop and a second `ralph ask` both need to know.

use ralph_protocol::{AskClaim, parse_timestamp};

/// Whether the `ralph ask` that wrote `claim` is gone (killed with its agent, or by the agent's
/// tool timeout): no process has its pid, or the one that has it now started after the claim
/// was written, its pid reused.
pub fn claim_is_stale(claim: &AskClaim) -> bool {
    match parse_timestamp(&claim.asked_at) {
        Some(asked) => ralph_process::gone_since(claim.pid, asked),
        None => !ralph_process::is_alive(claim.pid),
    }
}
