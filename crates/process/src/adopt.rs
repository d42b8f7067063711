//! Adopting orphans: ralph as the subreaper of what it starts (where the backend can be one,
//! [`sys::SUBREAPER`](crate::sys::SUBREAPER)), and the record of the children it started itself, which [`sweep`](crate::orphans::sweep) must leave to whoever waits for
//! them (see [`orphans`](crate::orphans)).

use std::io;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether this process adopts orphans: [`adopt`] was called and the kernel agreed.
static ADOPTING: AtomicBool = AtomicBool::new(false);

/// The pids of the children this process started itself (through [`spawn`]) and that were
/// still its children at the last sweep.
static STARTED: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// Makes this process the subreaper of every process it starts (`PR_SET_CHILD_SUBREAPER` on
/// Linux; nothing where there is no subreaper, and the sweep walks the process table), and
/// turns [`sweep`](crate::sweep) on. For `ralph run` alone, before it starts anything.
pub fn adopt() -> io::Result<()> {
    crate::sys::become_subreaper()?;
    ADOPTING.store(true, Ordering::SeqCst);
    Ok(())
}

/// Whether [`adopt`] took effect.
pub fn adopting() -> bool {
    ADOPTING.load(Ordering::SeqCst)
}

pub(crate) fn started() -> std::sync::MutexGuard<'static, Vec<i32>> {
    STARTED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Starts a child with `start` and records its pid (`pid`), so that [`sweep`](crate::sweep)
/// leaves it, and its exit status, to whoever waits for it. Every process ralph starts while it
/// adopts orphans must be started through here; so one started ahead of its time
/// ([`spawn_waiting`](crate::spawn_waiting)), waiting beside an agent's iterations, is never
/// taken for something an agent left.
pub fn spawn<C>(
    start: impl FnOnce() -> io::Result<C>,
    pid: impl FnOnce(&C) -> Option<u32>,
) -> io::Result<C> {
    if !adopting() {
        return start();
    }
    // Held across the start: a sweep sees the child only once it is recorded.
    let mut started = started();
    let child = start()?;
    if let Some(pid) = pid(&child).and_then(|p| i32::try_from(p).ok()) {
        started.push(pid);
    }
    Ok(child)
}
