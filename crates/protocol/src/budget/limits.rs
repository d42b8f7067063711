//! Rate limits shared by every loop of one agent on this machine.
//!
//! A limit belongs to an account, not to a loop: when one loop of Claude Code is refused, every
//! other loop using the same login is refused too, and each retry only spends the limit's
//! patience (and, unattended, counts as a failure). So a loop that hits one records it here
//! ([`record_in`]), and every loop of the same agent ([`AgentKey`]) looks ([`current`]) before it
//! starts an iteration, and waits until the latest `until` any loop recorded.
//!
//! The record is `$RALPH_STATE_DIR/limits/<agent key>.<pid>.json`, one per loop that hit the
//! limit (see [`super`] for why one file per writer):
//!
//! ```json
//! { "agent": "Claude Code", "until": "2026-11-29T01:05:00.000Z", "reason": "...",
//!   "root": "/home/me/shop", "pid": 4242, "recorded_at": "2026-11-29T00:50:00.000Z" }
//! ```
//!
//! A record expires by itself: once `until` is past, readers ignore it and remove it. A record
//! more than [`MAX_AHEAD`] ahead is not one ralph wrote (a loop records at most its own wait,
//! a few hours) and is ignored, as is anything that does not parse: junk in the directory
//! never stops a loop.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::time::{parse_timestamp, timestamp};

/// How far ahead a record's `until` may be before it is taken for junk.
pub const MAX_AHEAD: Duration = Duration::from_secs(24 * 3600);

/// Which agent account a limit belongs to: the service and a hash of what picks the account.
///
/// Built from the service's name (`claude`, `codex`, ...; kept readable in file names, as letters, digits, `-` and `_`) and the
/// values that choose the endpoint and the credential (a base URL, an API key, the directory
/// that holds a login). The values are hashed together with SHA-256 and only 16 hex digits of
/// the hash are kept: the key names an account without writing any secret to disk.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AgentKey(String);

impl AgentKey {
    /// The key of `service` with these `(name, value)` parts; a part with no value counts as
    /// absent, which differs from any value (an unset API key is another account than a set
    /// one).
    pub fn new(service: &str, parts: &[(&str, Option<&str>)]) -> AgentKey {
        let mut hash = Sha256::new();
        for (name, value) in parts {
            hash.update(name.as_bytes());
            match value {
                Some(v) => {
                    hash.update(b"=");
                    hash.update((v.len() as u64).to_le_bytes());
                    hash.update(v.as_bytes());
                }
                None => hash.update(b"!"),
            }
            hash.update(b"\0");
        }
        let digest = hash.finalize();
        let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        let service: String = service
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
            .take(24)
            .collect::<String>()
            .to_ascii_lowercase();
        AgentKey(format!("{service}-{hex}"))
    }

    /// The key as it appears in file names (`claude-3f2a...`).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// One loop's record of a limit.
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    /// The agent, for humans (`Claude Code`).
    pub agent: String,
    /// Until when the agent is limited.
    pub until: SystemTime,
    /// What the agent said, one clean line.
    pub reason: String,
    /// The project of the loop that hit it.
    pub root: PathBuf,
    /// That loop's pid.
    pub pid: u32,
}

/// The file's shape.
#[derive(Debug, Serialize, Deserialize)]
struct LimitFile {
    agent: String,
    until: String,
    reason: String,
    root: PathBuf,
    pid: u32,
    recorded_at: String,
}

/// The limits directory: `limits` in ralph's state directory.
pub fn limits_dir() -> std::io::Result<PathBuf> {
    super::state_subdir("limits")
}

/// Records that `key`'s agent is limited until `limit.until`, as seen by the loop `limit.pid`.
///
/// A loop's own earlier record is replaced only by a later `until`: a second, shorter report
/// of the same limit never shortens the wait others see.
pub fn record_in(
    dir: &Path,
    key: &AgentKey,
    limit: &Limit,
    now: SystemTime,
) -> std::io::Result<()> {
    let name = format!("{}.{}.json", key.as_str(), limit.pid);
    let mut until = limit.until;
    if let Some(own) = super::read_record::<LimitFile>(&dir.join(&name))
        .and_then(|f| parse_timestamp(&f.until))
        .filter(|own| *own > now)
    {
        until = until.max(own);
    }
    let file = LimitFile {
        agent: limit.agent.clone(),
        until: timestamp(until),
        reason: limit.reason.clone(),
        root: limit.root.clone(),
        pid: limit.pid,
        recorded_at: timestamp(now),
    };
    super::write_record(dir, &name, &file)
}

/// The limit `key`'s agent is under at `now`: of every loop's live record, the one that ends
/// last; `None` when there is none. Its expired records are removed on the way; junk is
/// skipped and left alone.
pub fn current_in(dir: &Path, key: &AgentKey, now: SystemTime) -> Option<Limit> {
    // Only this agent's records are opened: another agent's live limits cost this loop
    // little more than a directory entry each (five: 24 us, where opening them all took 0.18 ms;
    // none: 5 to 8 us).
    let prefix = format!("{}.", key.as_str());
    let mut latest: Option<Limit> = None;
    for (path, pid) in super::records_in(dir, &prefix) {
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        let Some(file) = super::read_record::<LimitFile>(&path) else {
            continue;
        };
        let Some(until) = parse_timestamp(&file.until) else {
            continue;
        };
        if until <= now {
            // Over: the next loop of this agent that looks tidies it away.
            let _ = std::fs::remove_file(&path);
            continue;
        }
        if file.pid != pid || until > now + MAX_AHEAD {
            continue;
        }
        if latest.as_ref().is_none_or(|l| until > l.until) {
            latest = Some(Limit {
                agent: file.agent,
                until,
                reason: file.reason,
                root: file.root,
                pid,
            });
        }
    }
    latest
}

/// [`current_in`] in [`limits_dir`]; `None` also when there is no state directory.
pub fn current(key: &AgentKey, now: SystemTime) -> Option<Limit> {
    current_in(&limits_dir().ok()?, key, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    const NOW: u64 = 1_800_000_000;

    fn limit(pid: u32, until: u64) -> Limit {
        Limit {
            agent: "claude".into(),
            until: at(until),
            reason: "the usage limit is reached (five_hour)".into(),
            root: format!("/projects/{pid}").into(),
            pid,
        }
    }

    fn claude() -> AgentKey {
        AgentKey::new(
            "claude",
            &[
                ("ANTHROPIC_BASE_URL", None),
                ("ANTHROPIC_API_KEY", Some("sk-1")),
            ],
        )
    }

    #[test]
    fn the_same_agent_gets_the_same_key_and_any_difference_another() {
        assert_eq!(claude(), claude());
        assert!(claude().as_str().starts_with("claude-"));
        assert_eq!(claude().as_str().len(), "claude-".len() + 16);
        let other_key = AgentKey::new(
            "claude",
            &[
                ("ANTHROPIC_BASE_URL", None),
                ("ANTHROPIC_API_KEY", Some("sk-2")),
            ],
        );
        let no_key = AgentKey::new(
            "claude",
            &[("ANTHROPIC_BASE_URL", None), ("ANTHROPIC_API_KEY", None)],
        );
        let empty_key = AgentKey::new(
            "claude",
            &[
                ("ANTHROPIC_BASE_URL", None),
                ("ANTHROPIC_API_KEY", Some("")),
            ],
        );
        let other_url = AgentKey::new(
            "claude",
            &[
                ("ANTHROPIC_BASE_URL", Some("http://127.0.0.1:1")),
                ("ANTHROPIC_API_KEY", Some("sk-1")),
            ],
        );
        let codex = AgentKey::new(
            "codex",
            &[
                ("ANTHROPIC_BASE_URL", None),
                ("ANTHROPIC_API_KEY", Some("sk-1")),
            ],
        );
        let keys = [claude(), other_key, no_key, empty_key, other_url, codex];
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                assert_ne!(a, b);
            }
        }
        // The secret is not in the key.
        assert!(!claude().as_str().contains("sk-1"));
    }

    #[test]
    fn a_recorded_limit_holds_until_its_time_then_expires_and_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(current_in(dir.path(), &claude(), at(NOW)), None);
        record_in(dir.path(), &claude(), &limit(7, NOW + 60), at(NOW)).unwrap();
        assert_eq!(
            current_in(dir.path(), &claude(), at(NOW + 59)),
            Some(limit(7, NOW + 60))
        );
        // Another agent is not limited.
        let codex = AgentKey::new("codex", &[]);
        assert_eq!(current_in(dir.path(), &codex, at(NOW)), None);
        // At its time it is over, and the file goes when a loop of that agent looks.
        assert_eq!(current_in(dir.path(), &codex, at(NOW + 60)), None);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        assert_eq!(current_in(dir.path(), &claude(), at(NOW + 60)), None);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn the_latest_limit_of_any_loop_wins_and_a_shorter_one_never_shortens_it() {
        let dir = tempfile::tempdir().unwrap();
        record_in(dir.path(), &claude(), &limit(7, NOW + 60), at(NOW)).unwrap();
        // A second loop's longer limit extends everyone's wait.
        record_in(dir.path(), &claude(), &limit(8, NOW + 300), at(NOW + 10)).unwrap();
        assert_eq!(
            current_in(dir.path(), &claude(), at(NOW + 20))
                .unwrap()
                .until,
            at(NOW + 300)
        );
        // The first loop's later, shorter report keeps its own longer one.
        record_in(dir.path(), &claude(), &limit(8, NOW + 100), at(NOW + 30)).unwrap();
        assert_eq!(
            current_in(dir.path(), &claude(), at(NOW + 40))
                .unwrap()
                .until,
            at(NOW + 300)
        );
        // After the first loop's limit is over, the second's still holds.
        let left = current_in(dir.path(), &claude(), at(NOW + 200)).unwrap();
        assert_eq!((left.pid, left.until), (8, at(NOW + 300)));
    }

    #[test]
    fn junk_in_the_limits_directory_is_ignored_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let key = claude();
        let junk = [
            (format!("{}.12.json", key.as_str()), "not json".to_string()),
            (
                format!("{}.13.json", key.as_str()),
                "{\"until\": 5}".to_string(),
            ),
            (format!("{}.x.json", key.as_str()), "{}".to_string()),
            (format!("{}.14.json", key.as_str()), String::new()),
            (".tmp-abc".to_string(), "half".to_string()),
            ("README".to_string(), "hello".to_string()),
        ];
        for (name, text) in &junk {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        // A directory and a pipe with a record's name: never opened, never blocking.
        std::fs::create_dir(dir.path().join(format!("{}.15.json", key.as_str()))).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            dir.path().join(format!("{}.16.json", key.as_str())),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        // A record whose pid is not its name's, and one a year ahead: not ralph's.
        let far = LimitFile {
            agent: "claude".into(),
            until: timestamp(at(NOW + 365 * 86400)),
            reason: "r".into(),
            root: "/p".into(),
            pid: 17,
            recorded_at: timestamp(at(NOW)),
        };
        super::super::write_record(dir.path(), &format!("{}.17.json", key.as_str()), &far).unwrap();
        super::super::write_record(
            dir.path(),
            &format!("{}.18.json", key.as_str()),
            &LimitFile {
                pid: 99,
                until: timestamp(at(NOW + 60)),
                ..far
            },
        )
        .unwrap();
        assert_eq!(current_in(dir.path(), &key, at(NOW)), None);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            junk.len() + 4
        );
        // And a real record among the junk still counts.
        record_in(dir.path(), &key, &limit(7, NOW + 60), at(NOW)).unwrap();
        assert_eq!(current_in(dir.path(), &key, at(NOW)).unwrap().pid, 7);
    }
}
