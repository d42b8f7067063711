//! One running process group's life, as a state its owner drives from its own `select!` loop.
//!
//! [`stop_group`](crate::supervisor::stop_group) stops a group in one call, waiting as it goes.
//! An agent cannot be stopped that way: its output must be read while it stops (or its pipes
//! fill and it never exits), and a second Ctrl-C must cut the grace short. So its owner keeps
//! a [`Group`] and tells it what happened: [`Group::terminate`] when the run should end
//! (SIGTERM, once), [`Group::kill`] when it must end now, [`Group::leader_exited`] when the
//! leader is reaped. The group answers with the next instant it needs attention
//! ([`Group::deadline`]), and [`Group::on_deadline`] moves it on: SIGKILL when the grace is
//! over, and at last an end to reading output that something outside the group holds open.

use std::time::Duration;

use tokio::time::Instant;

use crate::supervisor::{kill_group_now, terminate_group};

/// How long output is still read after SIGKILL, or after the leader exited and its grace
/// passed: long enough for what was written to arrive, short enough that a process outside
/// the group that holds the pipe open cannot hold the loop.
const DRAIN: Duration = Duration::from_secs(2);

/// Where a process group is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    /// Running; nobody asked it to stop.
    Running,
    /// SIGTERM was sent; SIGKILL follows at `kill_at` unless it is gone by then.
    Terminating {
        /// When the grace ends.
        kill_at: Instant,
    },
    /// SIGKILL was sent.
    Killed,
}

/// What [`Group::on_deadline`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupDue {
    /// The grace after SIGTERM ran out: the group was sent SIGKILL.
    Killed,
    /// Output has been read long enough after the end: stop reading it.
    StopReading,
    /// Nothing was due yet.
    Nothing,
}

/// A running process group and the deadlines that move it on (see the module docs).
#[derive(Debug)]
pub struct Group {
    pgid: i32,
    grace: Duration,
    state: GroupState,
    leader_exited: bool,
    drain_until: Option<Instant>,
}

impl Group {
    /// A group just started, stopped with `grace` between SIGTERM and SIGKILL.
    pub fn new(pgid: i32, grace: Duration) -> Self {
        Group {
            pgid,
            grace,
            state: GroupState::Running,
            leader_exited: false,
            drain_until: None,
        }
    }

    /// The process group id.
    pub fn pgid(&self) -> i32 {
        self.pgid
    }

    /// Where the group is in its life.
    pub fn state(&self) -> GroupState {
        self.state
    }

    /// Whether the group was asked to stop (SIGTERM or SIGKILL sent).
    pub fn stopping(&self) -> bool {
        self.state != GroupState::Running
    }

    /// Whether the leader has been reaped.
    pub fn leader_exited(&self) -> bool {
        self.leader_exited
    }

    /// The graceful stop: SIGTERM (and SIGCONT, so a stopped process can act on it) to the
    /// whole group, and SIGKILL when the grace is over. Sent once; later calls do nothing.
    pub fn terminate(&mut self, now: Instant) {
        if self.state == GroupState::Running {
            terminate_group(self.pgid);
            self.state = GroupState::Terminating {
                kill_at: now + self.grace,
            };
        }
    }

    /// SIGKILL to the whole group now (a second Ctrl-C); output is read a little longer.
    pub fn kill(&mut self, now: Instant) {
        kill_group_now(self.pgid);
        self.state = GroupState::Killed;
        self.drain_by(now + DRAIN);
    }

    /// The leader was reaped (`status` is `None` when waiting on it failed, in which case the
    /// group is killed so nothing is left behind). What still holds the output open (the
    /// leader's children, in the group or outside it) is stopped and its output read for the
    /// grace and a little longer.
    pub fn exited(&mut self, status_known: bool, output_open: bool, now: Instant) {
        self.leader_exited = true;
        if !status_known {
            kill_group_now(self.pgid);
        }
        if output_open {
            self.terminate(now);
        }
        self.drain_by(now + self.grace + DRAIN);
    }

    fn drain_by(&mut self, at: Instant) {
        self.drain_until = Some(self.drain_until.map_or(at, |d| d.min(at)));
    }

    /// The next instant the group needs [`Group::on_deadline`], if any.
    pub fn deadline(&self) -> Option<Instant> {
        let kill_at = match self.state {
            GroupState::Terminating { kill_at } => Some(kill_at),
            GroupState::Running | GroupState::Killed => None,
        };
        match (kill_at, self.drain_until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Acts on the deadline that passed by `now`: SIGKILL after the grace, else the end of
    /// reading output.
    pub fn on_deadline(&mut self, now: Instant) -> GroupDue {
        if let GroupState::Terminating { kill_at } = self.state
            && kill_at <= now
        {
            self.kill(now);
            return GroupDue::Killed;
        }
        if self.drain_until.is_some_and(|d| d <= now) {
            return GroupDue::StopReading;
        }
        GroupDue::Nothing
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supervisor::{group_alive, spawn_shell};

    fn sleeper(script: &str) -> (crate::supervisor::Spawned, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let s = spawn_shell(script, dir.path(), std::iter::empty::<(&str, &str)>(), None).unwrap();
        (s, dir)
    }

    /// Waits until nothing is left alive in `pgid`, failing after 10 s: `signal` did not work.
    async fn wait_gone(pgid: i32, signal: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while group_alive(pgid) {
            assert!(
                std::time::Instant::now() < deadline,
                "{signal} did not stop the group"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn terminate_is_sent_once_and_kill_follows_the_grace() {
        let (mut s, _dir) = sleeper("trap '' TERM; sleep 300 & echo started; wait");
        use tokio::io::AsyncReadExt;
        let mut buf = [0u8; 16];
        let _ = s.stdout.read(&mut buf).await.unwrap();
        let grace = Duration::from_millis(100);
        let mut group = Group::new(s.pgid, grace);
        assert_eq!(group.deadline(), None, "a running group needs no timer");
        let now = Instant::now();
        group.terminate(now);
        assert_eq!(
            group.state(),
            GroupState::Terminating {
                kill_at: now + grace
            }
        );
        group.terminate(now + Duration::from_secs(1));
        assert_eq!(
            group.deadline(),
            Some(now + grace),
            "the grace is not restarted"
        );
        assert_eq!(group.on_deadline(now), GroupDue::Nothing);
        assert_eq!(group.on_deadline(now + grace), GroupDue::Killed);
        assert_eq!(group.state(), GroupState::Killed);
        let _ = s.child.wait().await;
        wait_gone(s.pgid, "SIGKILL").await;
        let drain = group.deadline().expect("output is read a little longer");
        assert_eq!(group.on_deadline(drain), GroupDue::StopReading);
    }

    #[tokio::test]
    async fn a_leader_that_exits_with_its_output_closed_leaves_only_the_drain() {
        let (mut s, _dir) = sleeper("exit 0");
        let _ = s.child.wait().await;
        let mut group = Group::new(s.pgid, Duration::from_secs(3));
        let now = Instant::now();
        group.exited(true, false, now);
        assert!(group.leader_exited());
        assert_eq!(group.state(), GroupState::Running, "nothing to stop");
        assert_eq!(group.deadline(), Some(now + Duration::from_secs(3) + DRAIN));
    }

    #[tokio::test]
    async fn a_leader_that_exits_with_its_output_held_open_has_the_group_stopped() {
        let (mut s, _dir) = sleeper("sleep 300 & exit 0");
        let _ = s.child.wait().await;
        let mut group = Group::new(s.pgid, Duration::from_secs(3));
        let now = Instant::now();
        group.exited(true, true, now);
        assert!(group.stopping());
        assert_eq!(group.deadline(), Some(now + Duration::from_secs(3)));
        wait_gone(s.pgid, "SIGTERM").await;
    }
}
