//! Paired devices: pairing codes, the device cookie, and the limit on pairing attempts.
//!
//! `ralph serve pair web` stores a one-time pairing code (hashed, like every secret of the
//! broker, in the state directory's `pairing/`, valid for [`PAIRING_TTL`]) and prints the link
//! `URL/pair/CODE`. Opening it takes the code (its file is removed: one use) and stores a new
//! device secret in `devices/`; the browser keeps the secret in an HttpOnly, SameSite=Strict
//! cookie. Failed attempts are counted per broker: after [`MAX_FAILED_PER_MINUTE`] in a
//! minute every attempt is refused until the minute has passed.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use axum::http::{HeaderMap, header};
use serde::{Deserialize, Serialize};

use ralph_protocol::{get_secret, parse_timestamp, put_secret, timestamp};

/// The device cookie's name.
pub(crate) const COOKIE: &str = "ralph_device";

/// The device cookie's name over https: the `__Host-` prefix makes browsers refuse it unless it
/// is `Secure`, for `/` and for this host only (no `Domain`), so no other server of the host
/// or its parent domain can set or replace it.
pub(crate) const SECURE_COOKIE: &str = "__Host-ralph_device";

/// How long a pairing code works.
pub(crate) const PAIRING_TTL: Duration = Duration::from_secs(10 * 60);

/// Failed pairing attempts allowed per minute, before every attempt is refused.
pub(crate) const MAX_FAILED_PER_MINUTE: usize = 5;

const PAIRING: &str = "pairing";
const DEVICES: &str = "devices";

/// A pairing code, as stored.
#[derive(Debug, Serialize, Deserialize)]
struct PairingCode {
    hash: String,
    /// `web` or `telegram`.
    kind: String,
    expires_at: String,
}

/// A paired device, as stored.
#[derive(Debug, Serialize, Deserialize)]
struct Device {
    hash: String,
    name: String,
    paired_at: String,
    /// The browser's `User-Agent` when it paired, to tell devices apart when revoking one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    user_agent: Option<String>,
}

/// Makes a one-time pairing code of `kind` (`web`, `telegram`).
pub(crate) fn new_pairing_code(
    state_dir: &Path,
    kind: &str,
    now: SystemTime,
) -> std::io::Result<String> {
    // Codes nobody used: gone once expired, by the next one made.
    if let Ok(codes) = std::fs::read_dir(state_dir.join(PAIRING)) {
        for code in codes.flatten() {
            let expired = code
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|made| now.duration_since(made).is_ok_and(|age| age > PAIRING_TTL));
            if expired {
                let _ = std::fs::remove_file(code.path());
            }
        }
    }
    put_secret(state_dir, PAIRING, |hash| PairingCode {
        hash,
        kind: kind.to_string(),
        expires_at: timestamp(now + PAIRING_TTL),
    })
}

/// Takes the pairing code `code` of `kind` (once: its file is removed); whether it was valid.
pub(crate) fn take_pairing_code(state_dir: &Path, kind: &str, code: &str, now: SystemTime) -> bool {
    let Some((record, path)) = get_secret(state_dir, PAIRING, code, |p: &PairingCode| &p.hash)
    else {
        return false;
    };
    // Whoever removes the file took the code; a second opener finds it gone.
    if std::fs::remove_file(&path).is_err() {
        return false;
    }
    record.kind == kind && parse_timestamp(&record.expires_at).is_some_and(|e| now < e)
}

/// Pairs a browser with the web pairing `code`, recording its `User-Agent` for `ralph serve
/// devices`: the new device cookie's value.
pub(crate) fn pair_browser(
    state_dir: &Path,
    code: &str,
    user_agent: Option<&str>,
) -> Option<String> {
    let now = SystemTime::now();
    if !take_pairing_code(state_dir, "web", code, now) {
        return None;
    }
    put_secret(state_dir, DEVICES, |hash| Device {
        name: format!("browser {}", &hash[..6]),
        hash,
        paired_at: timestamp(now),
        user_agent: user_agent.map(|ua| ralph_protocol::clean(ua).chars().take(200).collect()),
    })
    .ok()
}

/// A paired browser, as `ralph serve devices` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairedBrowser {
    /// What names it for `ralph serve revoke`: the start of its secret's hash (`3f9a1c`).
    pub id: String,
    /// When it paired (RFC 3339).
    pub paired_at: String,
    /// Its `User-Agent` when it paired, if it sent one.
    pub user_agent: Option<String>,
    path: std::path::PathBuf,
}

/// Every paired browser, oldest first.
pub fn browsers(state_dir: &Path) -> Vec<PairedBrowser> {
    let Ok(entries) = std::fs::read_dir(state_dir.join(DEVICES)) else {
        return Vec::new();
    };
    let mut all: Vec<PairedBrowser> = entries
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.ends_with(".json")))
        .filter_map(|e| {
            let raw = std::fs::read(e.path()).ok()?;
            let d: Device = serde_json::from_slice(&raw).ok()?;
            Some(PairedBrowser {
                id: d.hash.get(..6)?.to_string(),
                paired_at: d.paired_at,
                user_agent: d.user_agent,
                path: e.path(),
            })
        })
        .collect();
    all.sort_by(|a, b| (&a.paired_at, &a.id).cmp(&(&b.paired_at, &b.id)));
    all
}

/// Revokes the paired browser `id` names (its id, or any start of it that names one alone):
/// its cookie opens nothing from now on. The browser revoked, or why none was.
pub fn revoke_browser(state_dir: &Path, id: &str) -> Result<PairedBrowser, String> {
    let id = id.trim().to_ascii_lowercase();
    let matching: Vec<PairedBrowser> = browsers(state_dir)
        .into_iter()
        .filter(|b| !id.is_empty() && b.id.starts_with(&id))
        .collect();
    match matching.as_slice() {
        [one] => {
            std::fs::remove_file(&one.path)
                .map_err(|e| format!("could not remove {}: {e}", one.path.display()))?;
            Ok(one.clone())
        }
        [] => Err(format!("no paired browser is {id}")),
        _ => Err(format!(
            "{id} names {} paired browsers: give more of the id",
            matching.len()
        )),
    }
}

/// The paired device a request's cookie names (its name), if any.
pub(crate) fn device(state_dir: &Path, headers: &HeaderMap) -> Option<String> {
    let token = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE || *k == SECURE_COOKIE)
        .map(|(_, v)| v.to_string())?;
    get_secret(state_dir, DEVICES, &token, |d: &Device| &d.hash).map(|(d, _)| d.name)
}

/// Failed pairing attempts of the last minute, by sender (a Telegram user; the web's one
/// sender is anyone, whose codes are 128 random bits): a stranger's failures never count
/// against the owner's valid code.
#[derive(Debug, Default)]
pub(crate) struct Attempts(Mutex<HashMap<String, Vec<SystemTime>>>);

impl Attempts {
    /// Whether `who` may make another attempt at `now`.
    pub(crate) fn allow(&self, who: &str, now: SystemTime) -> bool {
        let mut failed = self.0.lock().unwrap_or_else(|p| p.into_inner());
        failed.retain(|_, times| {
            times.retain(|t| {
                now.duration_since(*t)
                    .is_ok_and(|d| d < Duration::from_secs(60))
            });
            !times.is_empty()
        });
        failed
            .get(who)
            .is_none_or(|t| t.len() < MAX_FAILED_PER_MINUTE)
    }

    /// Counts a failed attempt of `who`.
    pub(crate) fn failed(&self, who: &str, now: SystemTime) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(who.to_string())
            .or_default()
            .push(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expired pairing codes were never removed.
    #[test]
    fn expired_codes_are_removed_by_the_next_one() {
        let dir = tempfile::tempdir().unwrap();
        let now = SystemTime::now();
        let old = new_pairing_code(dir.path(), "web", now).unwrap();
        let later = now + PAIRING_TTL + Duration::from_secs(60);
        let new = new_pairing_code(dir.path(), "web", later).unwrap();
        let files = std::fs::read_dir(dir.path().join(PAIRING)).unwrap().count();
        assert_eq!(files, 1, "only the new code is kept");
        assert!(!take_pairing_code(dir.path(), "web", &old, later));
        assert!(take_pairing_code(dir.path(), "web", &new, later));
    }

    #[test]
    fn a_code_pairs_once_and_an_expired_or_wrong_one_never() {
        let dir = tempfile::tempdir().unwrap();
        let now = SystemTime::now();
        let code = new_pairing_code(dir.path(), "web", now).unwrap();
        assert!(!take_pairing_code(
            dir.path(),
            "web",
            "0123456789abcdef0123456789abcdef",
            now
        ));
        assert!(take_pairing_code(dir.path(), "web", &code, now));
        assert!(
            !take_pairing_code(dir.path(), "web", &code, now),
            "one use only"
        );
        let late = new_pairing_code(dir.path(), "web", now).unwrap();
        assert!(!take_pairing_code(
            dir.path(),
            "web",
            &late,
            now + PAIRING_TTL
        ));
        let other = new_pairing_code(dir.path(), "telegram", now).unwrap();
        assert!(!take_pairing_code(dir.path(), "web", &other, now));
    }

    #[test]
    fn attempts_are_limited_per_minute() {
        let a = Attempts::default();
        let now = SystemTime::now();
        for _ in 0..MAX_FAILED_PER_MINUTE {
            assert!(a.allow("666", now));
            a.failed("666", now);
        }
        assert!(!a.allow("666", now));
        assert!(a.allow("4242", now), "another sender is not held back");
        assert!(a.allow("666", now + Duration::from_secs(61)));
    }
}
