//! What a loop shares with the other loops of the machine (`crate::budget`): an agent's rate
//! limit, and a fleet's spend.
//!
//! - Before each iteration the loop looks for a limit another loop of the same agent recorded
//!   ([`Runner::wait_out_shared_limit`]) and waits it out, saying until when, with
//!   `rate_limited_until` in `state.json`. It looks again while it waits, so a later, longer
//!   limit lengthens the wait. A wait is not an iteration: nothing is counted.
//! - When its own agent hits a limit, the loop records it for the others
//!   ([`Runner::share_limit`]) and backs off as before.
//! - In a fleet, the loop records what it has cost after each iteration
//!   ([`Runner::record_fleet_spend`]), and before each it stops as after `max_cost_usd` once
//!   the fleet's total reached the fleet's cap ([`Runner::fleet_cap_reached`]).

use std::time::{Duration, SystemTime};

use ralph_protocol::{LoopEvent, Outcome, budget::fleet, budget::limits, local_time, timestamp};
use serde_json::json;
use tokio::time::Instant;

use super::Runner;
use super::error::RunError;
use super::policy::Stop;
use super::rate_limit::{jitter, short_span, spread};
use crate::budget::FleetBudget;

/// How often a loop waiting on another loop's limit reads the record again, to see a longer
/// limit recorded meanwhile (and show its new end).
const RECHECK: Duration = Duration::from_secs(10);

/// What the runner keeps for the shared budget.
#[derive(Debug)]
pub(super) struct Shared {
    /// The agent's account, as limits are keyed.
    pub(super) key: limits::AgentKey,
    /// Where limits are recorded (looked up once: it is read before every iteration); `None`
    /// without a state directory, when limits are neither shared nor read.
    pub(super) limits_dir: Option<std::path::PathBuf>,
    /// The fleet this loop belongs to, if any.
    pub(super) fleet: Option<FleetBudget>,
    /// The cost last recorded for the fleet: an iteration that cost nothing writes nothing.
    pub(super) recorded_spend: Option<f64>,
}

impl Runner {
    /// Waits while a loop of the same agent has recorded a rate limit that is not over; `true`
    /// if the human stopped the loop meanwhile.
    pub(super) async fn wait_out_shared_limit(&mut self) -> Result<bool, RunError> {
        let mut shown: Option<SystemTime> = None;
        let mut stopped = false;
        let spread_draw = jitter();
        loop {
            let now = SystemTime::now();
            let Some(limit) = self
                .record
                .shared
                .limits_dir
                .as_deref()
                .and_then(|dir| limits::current_in(dir, &self.record.shared.key, now))
            else {
                break;
            };
            let left = limit.until.duration_since(now).unwrap_or_default();
            if shown != Some(limit.until) {
                shown = Some(limit.until);
                self.state.rate_limited_until = Some(timestamp(limit.until));
                self.save_state().await?;
                let reason = shared_reason(&limit, now);
                self.log(
                    "shared_limit",
                    json!({"iteration": self.state.iteration + 1, "until": timestamp(limit.until), "seconds": left.as_secs_f64(), "root": limit.root, "reason": reason}),
                );
                self.emit(LoopEvent::Backoff {
                    until: (Instant::now() + left).into_std(),
                    reason,
                })
                .await;
            }
            // Past the end by a little, so that loops waiting together do not start as one;
            // sooner when it is time to look for a longer limit.
            let wake = if left <= RECHECK {
                left + spread(left, spread_draw)
            } else {
                RECHECK
            };
            tokio::select! {
                () = tokio::time::sleep(wake) => {}
                () = self.io.controls.stop_requested() => {
                    stopped = true;
                    break;
                }
            }
        }
        if shown.is_some() && !stopped {
            self.state.rate_limited_until = None;
            self.save_state().await?;
            self.log("shared_limit_over", json!({}));
        }
        Ok(stopped)
    }

    /// Records, for every loop of the same agent, that it is limited for `wait` from now
    /// (what this loop is about to wait), with the agent's words.
    pub(super) fn share_limit(&self, wait: Duration, message: &str) -> SystemTime {
        let now = SystemTime::now();
        let until = now + wait;
        let limit = limits::Limit {
            agent: crate::budget::service_name(&self.cfg.agent),
            until,
            reason: message.to_string(),
            root: self.ws.root().to_path_buf(),
            pid: std::process::id(),
        };
        let recorded = match &self.record.shared.limits_dir {
            Some(dir) => limits::record_in(dir, &self.record.shared.key, &limit, now),
            None => limits::limits_dir().map(drop),
        };
        if let Err(e) = recorded {
            // The other loops find the limit themselves, a little later: not a reason to stop.
            let _ = self.io.events.try_send(LoopEvent::Warning(format!(
                "could not tell the other loops of this agent about the rate limit: {e}"
            )));
        }
        until
    }

    /// In a fleet, records what this loop has cost so far, for the fleet's total.
    pub(super) fn record_fleet_spend(&mut self) {
        let (Some(fleet), Some(cost)) = (&self.record.shared.fleet, self.state.total_cost_usd)
        else {
            return;
        };
        if self.record.shared.recorded_spend == Some(cost) {
            return;
        }
        match fleet::record_spent(&fleet.id, self.ws.root(), cost) {
            Ok(()) => self.record.shared.recorded_spend = Some(cost),
            Err(e) => {
                let _ = self.io.events.try_send(LoopEvent::Warning(format!(
                    "could not record this loop's cost for fleet {}: {e}",
                    fleet.id
                )));
            }
        }
    }

    /// The stop when this loop's fleet has reached its cap: no new iteration starts.
    pub(super) fn fleet_cap_reached(&self) -> Option<Stop> {
        let fleet = self.record.shared.fleet.as_ref()?;
        let cap = fleet.max_cost_usd?;
        let spent = fleet::fleet_spent(&fleet.id);
        (spent >= cap).then(|| Stop {
            outcome: Outcome::CostLimit,
            reason: format!(
                "the fleet {} has cost ${spent:.2} in all, reaching its cap (--max-cost-usd ${cap:.2}); no new iteration starts",
                fleet.id
            ),
        })
    }
}

/// What a loop waiting on another loop's limit says: whose limit, the agent's words, and
/// until when, in local time.
fn shared_reason(limit: &limits::Limit, now: SystemTime) -> String {
    let by = if limit.pid == std::process::id() {
        "this loop".to_string()
    } else {
        format!("the loop in {}", limit.root.display())
    };
    format!(
        "{}'s limit, hit by {by}, holds for every loop of it on this machine: {}; it ends at {}, in {}",
        limit.agent,
        limit.reason,
        local_time(limit.until, now),
        short_span(limit.until.duration_since(now).unwrap_or_default())
    )
}
