//! Each loop's block of ten ports (`RALPH_PORT` is the first), so that the test servers of two
//! loops on this machine never collide, whichever fleet started them.
//!
//! A block is claimed by a file `<state dir>/ports/<first port>.json` naming the loop's
//! worktree, made while holding `ports/.lock` (`flock`), so two fleets claiming at once get
//! different blocks. A claim lasts as long as its loop: it is free again once the worktree is
//! gone or its loop landed or was discarded (and is not running), which every later claim
//! checks; a loop started again keeps the block it had. A block any of whose ports something
//! else already listens on (on loopback) is skipped.

use std::path::{Path, PathBuf};

use ralph_git::worktree::{LandState, LoopInfo};
use serde::{Deserialize, Serialize};

/// The first port of the first block.
pub const FIRST_PORT: u16 = 20_000;
/// Ports in a block.
pub const BLOCK: u16 = 10;
/// Blocks there are: 20000 to 59999.
pub const BLOCKS: u16 = 4_000;

/// A claim's file.
#[derive(Debug, Serialize, Deserialize)]
struct Claim {
    worktree: PathBuf,
}

/// Why no block could be claimed.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    /// The claims directory could not be used.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// Every block is claimed or busy.
    #[error(
        "every block of ports from {FIRST_PORT} to {} is taken; `ralph fleet prune` frees those of landed and discarded loops",
        FIRST_PORT + BLOCK * BLOCKS - 1
    )]
    Exhausted,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> PortError + '_ {
    move |source| PortError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The claims directory: `<state dir>/ports`.
pub fn ports_dir(state: &Path) -> PathBuf {
    state.join("ports")
}

/// The first port of the block of the loop in `worktree`: the one it holds already, else a
/// free one, claimed now.
pub fn claim(dir: &Path, worktree: &Path) -> Result<u16, PortError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let lock_path = dir.join(".lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io(&lock_path))?;
    let _lock =
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive).map_err(|(_, e)| {
            PortError::Io {
                path: lock_path.clone(),
                source: e.into(),
            }
        })?;
    let claims = read_claims(dir);
    if let Some((first, _)) = claims.iter().find(|(_, w)| w == worktree) {
        return Ok(*first);
    }
    for k in 0..BLOCKS {
        let first = FIRST_PORT + k * BLOCK;
        if claims.iter().any(|(f, holder)| *f == first && held(holder)) {
            continue;
        }
        if !free_on_loopback(first) {
            continue;
        }
        let path = claim_path(dir, first);
        let json = serde_json::to_vec(&Claim {
            worktree: worktree.to_path_buf(),
        })
        .expect("serializes");
        ralph_protocol::write_atomic(&path, &json)
            .map_err(|e| io(&path)(std::io::Error::other(e)))?;
        return Ok(first);
    }
    Err(PortError::Exhausted)
}

/// A claim whose worktree does not exist yet is left alone this long: its loop's `ralph run`
/// may be making the worktree right now.
const MAKING_WORKTREE: std::time::Duration = std::time::Duration::from_secs(600);

/// Gives back the blocks whose worktree is gone (a `ralph run` that ended before making it,
/// its fleet dead before it could give the block back): what `ralph fleet prune` frees
/// besides the landed and discarded loops'. Returns them.
pub fn release_orphans(dir: &Path) -> Vec<(u16, PathBuf)> {
    let old = |first: u16| {
        std::fs::metadata(claim_path(dir, first))
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > MAKING_WORKTREE)
    };
    let gone: Vec<(u16, PathBuf)> = read_claims(dir)
        .into_iter()
        .filter(|(first, w)| !w.exists() && old(*first))
        .collect();
    for (first, _) in &gone {
        let _ = std::fs::remove_file(claim_path(dir, *first));
    }
    gone
}

/// Gives back the block of the loop in `worktree`, if it holds one.
pub fn release(dir: &Path, worktree: &Path) {
    for (first, holder) in read_claims(dir) {
        if holder == worktree {
            let _ = std::fs::remove_file(claim_path(dir, first));
        }
    }
}

fn claim_path(dir: &Path, first: u16) -> PathBuf {
    dir.join(format!("{first}.json"))
}

/// Every claim: its first port and the worktree holding it.
fn read_claims(dir: &Path) -> Vec<(u16, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let first: u16 = name.to_str()?.strip_suffix(".json")?.parse().ok()?;
            let text = std::fs::read_to_string(e.path()).ok()?;
            let claim: Claim = serde_json::from_str(&text).ok()?;
            Some((first, claim.worktree))
        })
        .collect()
}

/// Whether the loop in `worktree` still needs its ports: it exists, and is running or not yet
/// landed or discarded.
fn held(worktree: &Path) -> bool {
    let ralph_dir = worktree.join(".ralph");
    if !worktree.exists() {
        // Claimed for a loop whose `ralph run` is still making its worktree; the fleet gives
        // the block back if that run ends without one, `ralph fleet prune` if the fleet died.
        return true;
    }
    let running = ralph_protocol::Workspace::new(worktree).is_locked();
    let over = LoopInfo::load(&ralph_dir)
        .and_then(|i| i.land)
        .is_some_and(|l| matches!(l, LandState::Landed | LandState::Discarded));
    running || !over
}

/// Whether nothing listens on any port of the block on loopback.
fn free_on_loopback(first: u16) -> bool {
    (first..first + BLOCK).all(|p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_loops_never_share_a_block_and_a_loop_keeps_its_own() {
        let state = tempfile::tempdir().unwrap();
        let dir = ports_dir(state.path());
        let a = claim(&dir, Path::new("/nowhere/a")).unwrap();
        let b = claim(&dir, Path::new("/nowhere/b")).unwrap();
        assert!(a.abs_diff(b) >= BLOCK, "{a} and {b} overlap");
        assert_eq!(claim(&dir, Path::new("/nowhere/a")).unwrap(), a);
        release(&dir, Path::new("/nowhere/a"));
        let c = claim(&dir, Path::new("/nowhere/c")).unwrap();
        assert_ne!(c, b);
    }

    #[test]
    fn a_block_whose_loop_landed_is_free_again() {
        let state = tempfile::tempdir().unwrap();
        let dir = ports_dir(state.path());
        let wt = state.path().join("wt");
        std::fs::create_dir_all(wt.join(".ralph")).unwrap();
        let mut info = crate::test_support::loop_info(&wt, "ralph/x");
        info.save(&wt.join(".ralph")).unwrap();
        let first = claim(&dir, &wt).unwrap();
        assert_ne!(claim(&dir, Path::new("/nowhere/b")).unwrap(), first);
        info.set_land(&wt.join(".ralph"), LandState::Landed, None)
            .unwrap();
        let taken_over = claim(&dir, Path::new("/nowhere/c")).unwrap();
        assert_eq!(taken_over, first, "the landed loop's block is reused");
    }
}
