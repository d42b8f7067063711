//! A fleet's spend: what each of its loops has cost, and the fleet's total.
//!
//! `ralph fleet` starts each loop with `RALPH_FLEET=<fleet id>` (and, with a cap,
//! `RALPH_FLEET_MAX_COST_USD`). Each loop keeps what it has cost so far in
//! `$RALPH_STATE_DIR/fleets/<fleet id>/spent/<loop>.json` ([`record_spent`], after every
//! iteration), `<loop>` being a hash of its project's path:
//!
//! ```json
//! { "root": "/home/me/.local/share/ralph/worktrees/shop-fix-login", "cost_usd": 0.42,
//!   "updated_at": "2026-11-29T00:50:00.000Z" }
//! ```
//!
//! The fleet's total ([`fleet_spent`]) is the sum over those files: every loop checks it before
//! it starts an iteration, and the fleet's summary shows it. A loop's file holds its running
//! total (not the last iteration's cost), so a loop resumed later replaces its own figure
//! rather than adding to it. Files that do not parse, or hold a negative or non-finite cost,
//! are skipped.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::time::timestamp;

/// The environment variable that names the fleet a loop belongs to.
pub const FLEET_ENV: &str = "RALPH_FLEET";
/// The environment variable that caps a fleet's total cost, in US dollars.
pub const FLEET_MAX_COST_ENV: &str = "RALPH_FLEET_MAX_COST_USD";

/// A fleet id that is not safe as one directory name.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "{FLEET_ENV}={0:?} is not a fleet id: use 1 to 64 letters, digits, '-', '_' or '.', not starting with '.'"
)]
pub struct BadFleetId(pub String);

/// Checks that `id` can name a fleet's directory: 1 to 64 of `[A-Za-z0-9._-]`, not starting
/// with a dot (no `..`, no hidden names, no path separators).
pub fn check_fleet_id(id: &str) -> Result<(), BadFleetId> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(BadFleetId(id.to_string()))
    }
}

/// The file's shape.
#[derive(Debug, Serialize, Deserialize)]
struct SpentFile {
    root: PathBuf,
    cost_usd: f64,
    updated_at: String,
}

/// `fleets` in ralph's state directory.
pub fn fleets_dir() -> std::io::Result<PathBuf> {
    super::state_subdir("fleets")
}

/// The directory of a fleet's spend records, under `fleets`.
fn spent_dir(fleets: &Path, fleet: &str) -> Result<PathBuf, BadFleetId> {
    check_fleet_id(fleet)?;
    Ok(fleets.join(fleet).join("spent"))
}

/// Records that the loop in `root` has cost `cost_usd` so far, as one of `fleet`'s loops.
pub fn record_spent_in(
    fleets: &Path,
    fleet: &str,
    root: &Path,
    cost_usd: f64,
    now: SystemTime,
) -> std::io::Result<()> {
    let dir = spent_dir(fleets, fleet).map_err(std::io::Error::other)?;
    let name = format!(
        "{}.json",
        super::stable_hash(root.as_os_str().as_encoded_bytes())
    );
    let file = SpentFile {
        root: root.to_path_buf(),
        cost_usd,
        updated_at: timestamp(now),
    };
    super::write_record(&dir, &name, &file)
}

/// [`record_spent_in`] in [`fleets_dir`].
pub fn record_spent(fleet: &str, root: &Path, cost_usd: f64) -> std::io::Result<()> {
    record_spent_in(&fleets_dir()?, fleet, root, cost_usd, SystemTime::now())
}

/// What `fleet`'s loops have cost together, in US dollars (0 for a fleet nothing recorded).
pub fn fleet_spent_in(fleets: &Path, fleet: &str) -> f64 {
    let Ok(dir) = spent_dir(fleets, fleet) else {
        return 0.0;
    };
    super::records_in(&dir, "")
        .filter_map(|(path, _)| super::read_record::<SpentFile>(&path))
        .map(|f| f.cost_usd)
        .filter(|c| c.is_finite() && *c >= 0.0)
        .sum()
}

/// [`fleet_spent_in`] in [`fleets_dir`]: the fleet's total, for its summary and its cap.
pub fn fleet_spent(fleet: &str) -> f64 {
    fleets_dir().map_or(0.0, |dir| fleet_spent_in(&dir, fleet))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fleet_total_sums_each_loop_s_latest_figure() {
        let fleets = tempfile::tempdir().unwrap();
        let now = SystemTime::now();
        assert_eq!(fleet_spent_in(fleets.path(), "f1"), 0.0);
        record_spent_in(fleets.path(), "f1", Path::new("/a"), 0.25, now).unwrap();
        record_spent_in(fleets.path(), "f1", Path::new("/b"), 0.5, now).unwrap();
        // A loop's later figure replaces its earlier one.
        record_spent_in(fleets.path(), "f1", Path::new("/a"), 0.75, now).unwrap();
        // Another fleet's loops are not this one's.
        record_spent_in(fleets.path(), "f2", Path::new("/c"), 9.0, now).unwrap();
        assert!((fleet_spent_in(fleets.path(), "f1") - 1.25).abs() < 1e-9);
        // Junk is skipped.
        let dir = fleets.path().join("f1/spent");
        std::fs::write(dir.join("junk.json"), "{").unwrap();
        std::fs::write(
            dir.join("neg.json"),
            r#"{"root":"/n","cost_usd":-5,"updated_at":"x"}"#,
        )
        .unwrap();
        std::fs::write(dir.join(".tmp-x"), "{}").unwrap();
        assert!((fleet_spent_in(fleets.path(), "f1") - 1.25).abs() < 1e-9);
    }

    #[test]
    fn a_fleet_id_must_be_one_plain_name() {
        for good in ["f1", "fleet-2026.11.29_a", "A"] {
            assert_eq!(check_fleet_id(good), Ok(()), "{good}");
        }
        for bad in ["", "..", ".hidden", "a/b", "a b", &"x".repeat(65), "é"] {
            assert!(check_fleet_id(bad).is_err(), "{bad}");
        }
        let fleets = tempfile::tempdir().unwrap();
        let err = record_spent_in(
            fleets.path(),
            "../x",
            Path::new("/a"),
            1.0,
            SystemTime::now(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("is not a fleet id"), "{err}");
        assert_eq!(fleet_spent_in(fleets.path(), "../x"), 0.0);
    }
}
