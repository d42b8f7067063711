//! How long the human has left to answer a question, with the clock passed in.
//!
//! The loop owns the one [`Countdown`] of a question and is the only one to change it; front
//! ends ask it to (typing, extend) and show the countdown it sends back. Nothing here sleeps
//! or reads the clock: every method takes `now`, so tests use synthetic instants and the loop
//! sleeps until [`Countdown::next_wake`] instead of polling.
//!
//! # Theory of operation
//!
//! A running countdown is a deadline. Typing pauses it: the time left at the first keystroke
//! is frozen, and every further keystroke pushes the resume point to [`IDLE_RESUME`] after
//! itself. Once that point passes, the countdown runs again from the frozen time left, so a
//! person who types for ten minutes loses none of their time. Resuming needs no event: it is
//! worked out from `now`, and the next mutating call folds it back into a plain deadline.
//!
//! Once expired, a countdown stays expired: the loop acts on expiry at once (it answers with
//! the default), so a late keystroke or `Ctrl+E` must not make the UI claim there is time left.

use std::time::{Duration, Instant};

/// Quiet time after the last keystroke before a paused countdown runs again.
pub const IDLE_RESUME: Duration = Duration::from_secs(5);

/// How much one `Ctrl+E` adds.
pub const EXTEND_BY: Duration = Duration::from_secs(300);

/// A deadline for answering that pauses while the human types and can be extended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Countdown {
    state: State,
    /// The wait plus every extension, for the gauge's ratio. `None` waits forever.
    total: Option<Duration>,
    extended_by: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// No deadline.
    Forever,
    /// Running towards `deadline`.
    Running { deadline: Instant },
    /// Frozen with `remaining` left until `last_typing + IDLE_RESUME`, then running again.
    Paused {
        remaining: Duration,
        last_typing: Instant,
    },
}

impl Countdown {
    /// Starts a countdown of `wait` at `now`; `None` waits forever.
    ///
    /// A wait too long to represent as an [`Instant`] is treated as forever.
    pub fn new(wait: Option<Duration>, now: Instant) -> Self {
        match wait.and_then(|w| now.checked_add(w).map(|deadline| (w, deadline))) {
            Some((wait, deadline)) => Self {
                state: State::Running { deadline },
                total: Some(wait),
                extended_by: Duration::ZERO,
            },
            None => Self {
                state: State::Forever,
                total: None,
                extended_by: Duration::ZERO,
            },
        }
    }

    /// The human is typing: pause now (keeping the time left), or push the resume point back
    /// if already paused. No effect once expired or without a deadline.
    pub fn typing(&mut self, now: Instant) {
        self.settle(now);
        match self.state {
            State::Forever => {}
            State::Running { deadline } => {
                let remaining = deadline.saturating_duration_since(now);
                if !remaining.is_zero() {
                    self.state = State::Paused {
                        remaining,
                        last_typing: now,
                    };
                }
            }
            State::Paused {
                remaining,
                last_typing,
            } => {
                self.state = State::Paused {
                    remaining,
                    // Events can arrive slightly out of order between UI and loop; never move
                    // the resume point backwards.
                    last_typing: last_typing.max(now),
                };
            }
        }
    }

    /// Adds `by` to the time left (`Ctrl+E`), paused or not. No effect once expired or
    /// without a deadline.
    pub fn extend(&mut self, by: Duration, now: Instant) {
        self.settle(now);
        if self.expired(now) {
            return;
        }
        match &mut self.state {
            State::Forever => return,
            State::Running { deadline } => match deadline.checked_add(by) {
                Some(later) => *deadline = later,
                None => {
                    self.state = State::Forever;
                    self.total = None;
                    return;
                }
            },
            State::Paused { remaining, .. } => *remaining = remaining.saturating_add(by),
        }
        self.total = self.total.map(|t| t.saturating_add(by));
        self.extended_by = self.extended_by.saturating_add(by);
    }

    /// Time left at `now`; `None` means no deadline. Zero once expired.
    pub fn remaining(&self, now: Instant) -> Option<Duration> {
        match self.state {
            State::Forever => None,
            State::Running { deadline } => Some(deadline.saturating_duration_since(now)),
            State::Paused {
                remaining,
                last_typing,
            } => {
                let resume = last_typing + IDLE_RESUME;
                if now < resume {
                    Some(remaining)
                } else {
                    Some(remaining.saturating_sub(now - resume))
                }
            }
        }
    }

    /// The whole time allowed, extensions included (the gauge's denominator); `None` means no
    /// deadline.
    pub fn total(&self) -> Option<Duration> {
        self.total
    }

    /// Whether the countdown is held because the human typed less than [`IDLE_RESUME`] ago.
    pub fn is_paused(&self, now: Instant) -> bool {
        matches!(self.state, State::Paused { last_typing, .. } if now < last_typing + IDLE_RESUME)
    }

    /// Whether the time is up at `now`. Never true without a deadline.
    pub fn expired(&self, now: Instant) -> bool {
        self.remaining(now) == Some(Duration::ZERO)
    }

    /// The next instant after which [`expired`](Self::expired) or
    /// [`is_paused`](Self::is_paused) may change, if no further event arrives. The loop sleeps
    /// until exactly then. `None` when nothing will change by itself (expired, or forever).
    pub fn next_wake(&self, now: Instant) -> Option<Instant> {
        if self.expired(now) {
            return None;
        }
        match self.state {
            State::Forever => None,
            State::Running { deadline } => Some(deadline),
            State::Paused {
                remaining,
                last_typing,
            } => {
                let resume = last_typing + IDLE_RESUME;
                if now < resume {
                    Some(resume)
                } else {
                    Some(resume + remaining)
                }
            }
        }
    }

    /// How much `extend` has added so far.
    pub fn extended_by(&self) -> Duration {
        self.extended_by
    }

    /// Turns a pause whose idle time has run out back into a plain deadline, so the next
    /// change starts from what `remaining` reports.
    fn settle(&mut self, now: Instant) {
        if let State::Paused {
            remaining,
            last_typing,
        } = self.state
        {
            let resume = last_typing + IDLE_RESUME;
            if now >= resume {
                self.state = State::Running {
                    deadline: resume + remaining,
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn start() -> Instant {
        Instant::now()
    }

    #[test]
    fn runs_down_from_the_wait() {
        let t0 = start();
        let c = Countdown::new(Some(secs(60)), t0);
        assert_eq!(c.remaining(t0), Some(secs(60)));
        assert_eq!(c.remaining(t0 + secs(45)), Some(secs(15)));
        assert_eq!(c.total(), Some(secs(60)));
        assert!(!c.expired(t0 + secs(59)));
        assert!(c.expired(t0 + secs(60)));
        assert!(c.expired(t0 + secs(3600)));
        assert_eq!(c.remaining(t0 + secs(3600)), Some(Duration::ZERO));
        assert_eq!(c.next_wake(t0), Some(t0 + secs(60)));
        assert!(!c.is_paused(t0));
    }

    #[test]
    fn zero_wait_expires_immediately() {
        let t0 = start();
        let c = Countdown::new(Some(Duration::ZERO), t0);
        assert!(c.expired(t0));
        assert_eq!(c.next_wake(t0), None);
    }

    #[test]
    fn forever_never_expires_or_pauses() {
        let t0 = start();
        let mut c = Countdown::new(None, t0);
        c.typing(t0 + secs(1));
        c.extend(EXTEND_BY, t0 + secs(2));
        let later = t0 + secs(1_000_000);
        assert_eq!(c.remaining(later), None);
        assert!(!c.expired(later));
        assert!(!c.is_paused(t0 + secs(1)));
        assert_eq!(c.total(), None);
        assert_eq!(c.next_wake(later), None);
        assert_eq!(c.extended_by(), Duration::ZERO);
    }

    #[test]
    fn a_wait_too_long_for_an_instant_is_forever() {
        let t0 = start();
        let c = Countdown::new(Some(Duration::MAX), t0);
        assert_eq!(c.remaining(t0), None);
    }

    #[test]
    fn typing_pauses_and_holds_the_remaining_time() {
        let t0 = start();
        let mut c = Countdown::new(Some(secs(60)), t0);
        c.typing(t0 + secs(20));
        assert!(c.is_paused(t0 + secs(20)));
        assert_eq!(c.remaining(t0 + secs(20)), Some(secs(40)));
        assert_eq!(c.remaining(t0 + secs(24)), Some(secs(40)));
        assert_eq!(c.next_wake(t0 + secs(21)), Some(t0 + secs(25)));
    }

    #[test]
    fn further_typing_keeps_it_paused() {
        let t0 = start();
        let mut c = Countdown::new(Some(secs(60)), t0);
        c.typing(t0 + secs(20));
        c.typing(t0 + secs(24));
        c.typing(t0 + secs(28));
        assert!(c.is_paused(t0 + secs(32)));
        assert_eq!(c.remaining(t0 + secs(32)), Some(secs(40)));
        assert_eq!(c.next_wake(t0 + secs(32)), Some(t0 + secs(33)));
    }

    #[test]
    fn resumes_after_idle_with_the_time_it_had() {
        let t0 = start();
        let mut c = Countdown::new(Some(secs(60)), t0);
        c.typing(t0 + secs(20));
        let resume = t0 + secs(20) + IDLE_RESUME;
        assert!(!c.is_paused(resume));
        assert_eq!(c.remaining(resume), Some(secs(40)));
        assert_eq!(c.remaining(resume + secs(10)), Some(secs(30)));
        assert_eq!(c.next_wake(resume), Some(resume + secs(40)));
        assert!(!c.expired(resume + secs(39)));
        assert!(c.expired(resume + secs(40)));
    }

    #[test]
    fn typing_again_after_resuming_pauses_at_the_new_remaining_time() {
        let t0 = start();
        let mut c = Countdown::new(Some(secs(60)), t0);
        c.typing(t0 + secs(20)); // 40 s left, resumes at 25
        c.typing(t0 + secs(35)); // ran 10 s since 25: 30 s left
        assert!(c.is_paused(t0 + secs(35)));
        assert_eq!(c.remaining(t0 + secs(36)), Some(secs(30)));
    }

    #[test]
    fn typing_out_of_order_never_shortens_the_pause() {
        let t0 = start();
        let mut c = Countdown::new(Some(secs(60)), t0);
        c.typing(t0 + secs(20));
        c.typing(t0 + secs(22));
        c.typing(t0 + secs(21));
        assert_eq!(c.next_wake(t0 + secs(23)), Some(t0 + secs(27)));
    }

    #[test]
    fn extend_adds_time_and_grows_the_total() {
        let t0 = start();
        let mut c = Countdown::new(Some(secs(60)), t0);
        c.extend(EXTEND_BY, t0 + secs(50));
        c.extend(EXTEND_BY, t0 + secs(50));
        assert_eq!(c.remaining(t0 + secs(50)), Some(secs(610)));
        assert_eq!(c.total(), Some(secs(660)));
        assert_eq!(c.extended_by(), secs(600));
        assert_eq!(c.next_wake(t0 + secs(50)), Some(t0 + secs(660)));
    }

    #[test]
    fn extend_while_paused_adds_to_the_held_time() {
        let t0 = start();
        let mut c = Countdown::new(Some(secs(60)), t0);
        c.typing(t0 + secs(30));
        c.extend(EXTEND_BY, t0 + secs(32));
        assert!(c.is_paused(t0 + secs(32)));
        assert_eq!(c.remaining(t0 + secs(33)), Some(secs(330)));
        let resume = t0 + secs(35);
        assert_eq!(c.remaining(resume + secs(30)), Some(secs(300)));
        assert_eq!(c.next_wake(resume), Some(resume + secs(330)));
    }

    #[test]
    fn typing_after_expiry_does_not_revive_it() {
        let t0 = start();
        let mut c = Countdown::new(Some(secs(10)), t0);
        c.typing(t0 + secs(11));
        assert!(c.expired(t0 + secs(11)));
        assert!(!c.is_paused(t0 + secs(11)));
        assert_eq!(c.remaining(t0 + secs(12)), Some(Duration::ZERO));
        assert_eq!(c.next_wake(t0 + secs(12)), None);
    }

    #[test]
    fn typing_exactly_at_the_deadline_does_not_revive_it() {
        let t0 = start();
        let mut c = Countdown::new(Some(secs(10)), t0);
        c.typing(t0 + secs(10));
        assert!(c.expired(t0 + secs(10)));
    }

    #[test]
    fn extend_after_expiry_does_not_revive_it() {
        let t0 = start();
        let mut c = Countdown::new(Some(secs(10)), t0);
        c.extend(EXTEND_BY, t0 + secs(10));
        assert!(c.expired(t0 + secs(10)));
        assert_eq!(c.extended_by(), Duration::ZERO);
        assert_eq!(c.total(), Some(secs(10)));
    }

    #[test]
    fn a_paused_countdown_expires_only_after_resuming_and_running_out() {
        let t0 = start();
        let mut c = Countdown::new(Some(secs(10)), t0);
        c.typing(t0 + secs(9)); // 1 s left, resumes at 14
        assert!(!c.expired(t0 + secs(14)));
        assert_eq!(c.next_wake(t0 + secs(14)), Some(t0 + secs(15)));
        assert!(c.expired(t0 + secs(15)));
    }

    #[test]
    fn next_wake_is_the_exact_instant_of_change() {
        let t0 = start();
        let mut c = Countdown::new(Some(secs(100)), t0);
        c.typing(t0 + secs(1));
        let mut now = t0 + secs(1);
        let mut wakes = Vec::new();
        while let Some(wake) = c.next_wake(now) {
            let before = (c.is_paused(now), c.expired(now));
            // Just before the wake nothing has changed yet; at the wake something has.
            let just_before = wake - Duration::from_nanos(1);
            assert_eq!((c.is_paused(just_before), c.expired(just_before)), before);
            assert_ne!((c.is_paused(wake), c.expired(wake)), before);
            wakes.push(wake - t0);
            now = wake;
        }
        assert_eq!(wakes, vec![secs(6), secs(105)]);
    }
}
