//! What the loops and `ralph status` share with `ralph serve`: the broker's lock file and the
//! answer links.
//!
//! # How it works
//!
//! `ralph serve` (the broker) holds an `flock` on `serve.lock` in ralph's state directory (the
//! parent of the registry, see [`crate::registry::registry_dir`]) for as long as it runs, and
//! writes `{"pid": …, "url": …}` into it. [`running`] tells whether a broker holds the lock and
//! where it listens: the kernel drops the lock when the broker dies, so a crashed broker never
//! looks alive.
//!
//! An answer link is `URL/a/TOKEN`: 128 bits, written out in hex. A question has one link per
//! [`Channel`] (the notification, `ralph status --json`, the dashboard, Telegram), the same
//! however often it is asked for and valid for as long as the question waits: the token is an
//! HMAC-SHA-256 of the project root, the question's id and the channel, under a key of
//! 256 random bits kept in the state directory (`link.key`, mode 0600). Whoever prints a link
//! ([`mint`]) stores only the token's SHA-256 in the state directory's `links/` (mode 0700),
//! one file per link named by the first half of that hash and holding the whole hash, the
//! project root and the question's id. The broker hashes the token it is given, opens the file of that name and
//! compares the whole hash in constant time ([`verify`]). Nothing in a project's `.ralph/` is
//! trusted for this: an agent can write there, and must not be able to make a link of its own.
//! A link answers only the question it was made for: [`verify`] returns its root and
//! question id, and the broker checks that this question still waits.
//!
//! The page and the bot can also skip a question or give it more time (the page five minutes,
//! Telegram an hour; [`MIN_EXTEND`] to [`MAX_EXTEND`]): the broker writes `.ralph/request.json`
//! ([`request`]), and the loop, which watches `.ralph/`, takes it ([`take_request`]) and acts
//! as if the key had been pressed in its panel, adding the time asked for (five minutes, as
//! `Ctrl+E`, when a request does not say: an older broker's). A request names the question it
//! is for; one for another question, or for an amount out of bounds, is dropped.
//!
//! Link files of questions that are no longer waiting, and any older than
//! [`LINK_MAX_AGE`], are removed by the next [`mint`].

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use rustix::fs::{FlockOperation, OFlags, flock};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::desk::QuestionId;

/// `O_NOFOLLOW`, for `OpenOptions`: a lock or link file that is a symlink is not ours.
const NOFOLLOW: i32 = OFlags::NOFOLLOW.bits() as i32;

/// The broker's lock file, in ralph's state directory.
pub const LOCK_FILE: &str = "serve.lock";

/// How long an answer link's file is kept at most, whatever its question.
pub const LINK_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);

/// The largest lock or link file read; anything bigger is not one of ours.
const MAX_FILE_BYTES: u64 = 16 * 1024;

/// ralph's state directory (`$RALPH_STATE_DIR`, else `~/.local/state/ralph`).
pub fn state_dir() -> Option<PathBuf> {
    crate::user_dirs::user_dir(crate::user_dirs::UserDir::State)
}

/// What `serve.lock` says about the running broker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerInfo {
    /// The broker's process id.
    pub pid: u32,
    /// The base URL answer links start with (no trailing slash).
    pub url: String,
}

/// Proof that this process is the machine's broker; dropping it lets another one start.
#[derive(Debug)]
pub struct BrokerLock {
    /// Holds the `flock`; the kernel releases it when the file is closed.
    lock: File,
    path: PathBuf,
}

impl BrokerLock {
    /// Takes `serve.lock` in `dir`; `Err(Some(info))` when another broker holds it.
    pub fn acquire(dir: &Path) -> Result<BrokerLock, AcquireError> {
        make_private_dir(dir).map_err(|source| AcquireError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(NOFOLLOW)
            .open(&path)
            .map_err(|source| AcquireError::Io {
                path: path.clone(),
                source,
            })?;
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(BrokerLock { lock: file, path }),
            Err(_) => Err(AcquireError::Held(read_info(&path))),
        }
    }

    /// Records where this broker listens, for [`running`].
    pub fn publish(&mut self, url: &str) -> io::Result<()> {
        let info = BrokerInfo {
            pid: std::process::id(),
            url: url.trim_end_matches('/').to_string(),
        };
        let json = serde_json::to_vec(&info).map_err(io::Error::other)?;
        self.lock.set_len(0)?;
        (&self.lock).write_all(&json)?;
        (&self.lock).write_all(b"\n")?;
        self.lock.sync_data()
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for BrokerLock {
    fn drop(&mut self) {
        // An emptied file tells a reader at once that nobody serves; errors change nothing
        // (the kernel releases the lock anyway).
        let _ = self.lock.set_len(0);
    }
}

/// Why [`BrokerLock::acquire`] failed.
#[derive(Debug, thiserror::Error)]
pub enum AcquireError {
    /// Another broker runs (what its lock file says, if readable).
    #[error("{}", held_message(.0.as_ref()))]
    Held(Option<BrokerInfo>),
    /// The state directory or lock file could not be made.
    #[error("{}: {source}", path.display())]
    Io {
        /// The directory or file.
        path: PathBuf,
        /// What went wrong.
        source: io::Error,
    },
}

fn held_message(info: Option<&BrokerInfo>) -> String {
    match info {
        Some(i) => format!(
            "`ralph serve` already runs on this machine (pid {}, {}); one broker serves every loop",
            i.pid, i.url
        ),
        None => "`ralph serve` already runs on this machine; one broker serves every loop".into(),
    }
}

/// The broker running on this machine, if any.
pub fn running() -> Option<BrokerInfo> {
    running_in(&state_dir()?)
}

/// [`running`] with the state directory `dir`.
pub fn running_in(dir: &Path) -> Option<BrokerInfo> {
    let path = dir.join(LOCK_FILE);
    let file = crate::workspace::open_plain(OpenOptions::new().read(true), &path).ok()?;
    // A shared lock we can take means nobody holds the exclusive one: no broker.
    if flock(&file, FlockOperation::NonBlockingLockShared).is_ok() {
        return None;
    }
    let info = read_info(&path)?;
    // The pid written must be the lock's holder: a file rewritten by another process of the
    // user (to send links elsewhere) names a pid the kernel does not show holding it.
    match lock_holder(&file) {
        Some(pid) if pid != info.pid => None,
        _ => Some(info),
    }
}

/// The pid holding an exclusive `flock` on `file`, as `/proc/locks` shows it (`None` when it
/// cannot be read).
fn lock_holder(file: &File) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let inode = file.metadata().ok()?.ino().to_string();
    let locks = fs::read_to_string("/proc/locks").ok()?;
    locks.lines().find_map(|line| {
        // `1: FLOCK  ADVISORY  WRITE 7013 fe:00:7397430 0 EOF`; waiters have a `->` and are
        // not holders.
        let f: Vec<&str> = line.split_whitespace().collect();
        let [_, "FLOCK", _, "WRITE", pid, dev_inode, ..] = f.as_slice() else {
            return None;
        };
        (dev_inode.rsplit(':').next() == Some(inode.as_str()))
            .then(|| pid.parse().ok())
            .flatten()
    })
}

fn read_info(path: &Path) -> Option<BrokerInfo> {
    let raw = read_small(path)?;
    serde_json::from_slice(&raw).ok()
}

/// Reads a file of the state directory as `.ralph/`'s are read: never through a symlink, never
/// a pipe or device (whose open or read could block whoever looks), at most
/// [`MAX_FILE_BYTES`].
fn read_small(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let file = crate::workspace::open_plain(OpenOptions::new().read(true), path).ok()?;
    let mut raw = Vec::new();
    file.take(MAX_FILE_BYTES).read_to_end(&mut raw).ok()?;
    Some(raw)
}

fn make_private_dir(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// The file in `.ralph/` a request from the broker is written to.
pub const REQUEST_FILE: &str = "request.json";

/// What the broker asks a loop to do with its open question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RequestAction {
    /// Skip it: the agent decides on its own (as Esc in the panel).
    Skip,
    /// More time: [`Request::extend_secs`], or five minutes ([`crate::countdown::EXTEND_BY`],
    /// as `Ctrl+E` in the panel) in a request that does not say.
    Extend,
}

/// The least time one request may add to a question's deadline.
pub const MIN_EXTEND: Duration = Duration::from_secs(60);

/// The most time one request may add to a question's deadline.
pub const MAX_EXTEND: Duration = Duration::from_secs(24 * 3600);

/// A request from the broker to the loop, for the question `question`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// The question it is for.
    #[serde(alias = "asked_at")]
    pub question: QuestionId,
    /// What to do.
    pub action: RequestAction,
    /// How many seconds [`RequestAction::Extend`] adds ([`MIN_EXTEND`] to [`MAX_EXTEND`]).
    /// Absent in requests of older brokers: five minutes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extend_secs: Option<u64>,
}

impl Request {
    /// Skip the question `question`.
    pub fn skip(question: &QuestionId) -> Request {
        Request {
            question: question.clone(),
            action: RequestAction::Skip,
            extend_secs: None,
        }
    }

    /// Give the question `question` `by` more time; an amount out of bounds is
    /// refused with the words for the user.
    pub fn extend(question: &QuestionId, by: Duration) -> Result<Request, String> {
        if !(MIN_EXTEND..=MAX_EXTEND).contains(&by) {
            return Err(format!(
                "a question can be given {} to {} more at a time, not {}",
                describe_span(MIN_EXTEND),
                describe_span(MAX_EXTEND),
                describe_span(by)
            ));
        }
        Ok(Request {
            question: question.clone(),
            action: RequestAction::Extend,
            extend_secs: Some(by.as_secs()),
        })
    }

    /// How much time an extend request adds: `None` for a skip, or an amount out of bounds
    /// (not one of ours: the request is dropped).
    pub fn extend_by(&self) -> Option<Duration> {
        match (self.action, self.extend_secs) {
            (RequestAction::Skip, _) => None,
            (RequestAction::Extend, None) => Some(crate::countdown::EXTEND_BY),
            (RequestAction::Extend, Some(secs)) => {
                Some(Duration::from_secs(secs)).filter(|d| (MIN_EXTEND..=MAX_EXTEND).contains(d))
            }
        }
    }
}

/// `5 min`, `1 h`, `1 h 30 min`, `90 s`: a span as the buttons and notes say it.
pub fn describe_span(d: Duration) -> String {
    let s = d.as_secs();
    let (h, m, rest) = (s / 3600, (s % 3600) / 60, s % 60);
    match (h, m, rest) {
        (0, 0, s) => format!("{s} s"),
        (0, m, 0) => format!("{m} min"),
        (h, 0, 0) => format!("{h} h"),
        (h, m, 0) => format!("{h} h {m} min"),
        _ => format!("{s} s"),
    }
}

/// Asks the loop in `ws` to act on its question (written atomically; a newer request replaces
/// an older one not yet taken).
pub fn request(
    ws: &crate::workspace::Workspace,
    req: &Request,
) -> Result<(), crate::workspace::WorkspaceError> {
    let json = serde_json::to_vec(req).expect("a request serializes");
    crate::workspace::write_atomic(&ws.dir().join(REQUEST_FILE), &json)
}

/// Takes the waiting request, if any (it is removed: each is acted on once). One that does not
/// parse, or asks for an amount of time out of bounds, is dropped.
pub fn take_request(ws: &crate::workspace::Workspace) -> Option<Request> {
    let path = ws.dir().join(REQUEST_FILE);
    let raw = read_small(&path)?;
    let _ = fs::remove_file(&path);
    let req: Request = serde_json::from_slice(&raw).ok()?;
    (req.action == RequestAction::Skip || req.extend_by().is_some()).then_some(req)
}

/// One answer link, as stored: never the token, only its hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkRecord {
    /// SHA-256 of the token, hex.
    pub hash: String,
    /// The project root whose question it answers.
    pub root: PathBuf,
    /// That question.
    #[serde(alias = "asked_at")]
    pub question: QuestionId,
}

/// Where an answer link is given out: each question has one link per channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// The loop's notification (`notify_command`, the webhook).
    Notify,
    /// `ralph status --json`.
    Status,
    /// The broker's dashboard.
    Dashboard,
    /// The Telegram bot.
    Telegram,
}

impl Channel {
    fn name(self) -> &'static str {
        match self {
            Channel::Notify => "notify",
            Channel::Status => "status",
            Channel::Dashboard => "dashboard",
            Channel::Telegram => "telegram",
        }
    }
}

/// The answer link of `channel` to the question `question` in `root`, if a broker
/// runs.
pub fn answer_url(root: &Path, question: &QuestionId, channel: Channel) -> Option<String> {
    let dir = state_dir()?;
    let broker = running_in(&dir)?;
    let token = mint(&dir, root, question, channel).ok()?;
    Some(format!("{}/a/{token}", broker.url))
}

/// The token of `channel`'s link to the question `question` in `root` (the same at
/// every call), its hash stored in `dir/links/`.
pub fn mint(
    dir: &Path,
    root: &Path,
    question: &QuestionId,
    channel: Channel,
) -> io::Result<String> {
    use hmac::{Hmac, Mac};
    use std::os::unix::ffi::OsStrExt;
    let links = dir.join(LINKS);
    make_private_dir(&links)?;
    prune(&links, root, question);
    let mut mac = Hmac::<Sha256>::new_from_slice(&link_key(dir)?).map_err(io::Error::other)?;
    for part in [
        root.as_os_str().as_bytes(),
        question.as_str().as_bytes(),
        channel.name().as_bytes(),
    ] {
        mac.update(&(part.len() as u64).to_be_bytes());
        mac.update(part);
    }
    let token = hex(&mac.finalize().into_bytes()[..16]);
    let hash = hash_token(&token);
    let record = LinkRecord {
        hash: hash.clone(),
        root: root.to_path_buf(),
        question: question.clone(),
    };
    // Written again each time: its age is what pruning goes by.
    store(&links, &hash, &record)?;
    Ok(token)
}

const LINK_KEY: &str = "link.key";

/// The key links are derived from, made on first use.
fn link_key(dir: &Path) -> io::Result<Vec<u8>> {
    state_key(dir, LINK_KEY)
}

/// The key of 256 random bits kept in `dir/name` (mode 0600), made on first use: the first
/// process to make it wins, and every other one reads theirs.
pub(crate) fn state_key(dir: &Path, name: &str) -> io::Result<Vec<u8>> {
    let path = dir.join(name);
    if let Some(key) = read_small(&path).filter(|k| k.len() == 32) {
        return Ok(key);
    }
    make_private_dir(dir)?;
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).map_err(|e| io::Error::other(e.to_string()))?;
    let mut tmp = tempfile::Builder::new().prefix(".tmp-").tempfile_in(dir)?;
    tmp.write_all(&key)?;
    tmp.as_file().sync_data()?;
    match tmp.persist_noclobber(&path) {
        Ok(_) => Ok(key.to_vec()),
        // Another process made it first: theirs is the key.
        Err(_) => read_small(&path)
            .filter(|k| k.len() == 32)
            .ok_or_else(|| io::Error::other(format!("{} is not a key of ralph's", path.display()))),
    }
}

/// The link `token` stands for, if it is one: its root and question.
pub fn verify(dir: &Path, token: &str) -> Option<LinkRecord> {
    get_secret(dir, LINKS, token, |r: &LinkRecord| &r.hash).map(|(r, _)| r)
}

const LINKS: &str = "links";

/// Stores a record made by `record` (given the new token's hash, which it must keep) in
/// `dir/kind/`, and returns the token. The token itself is never stored.
///
/// Every secret of the broker (answer links, pairing codes, paired devices) is kept this way:
/// 128 random bits from the OS, written in hex; the file is named by half the token's SHA-256
/// and holds the whole hash, which [`get_secret`] compares in constant time.
pub fn put_secret<T: Serialize>(
    dir: &Path,
    kind: &str,
    record: impl FnOnce(String) -> T,
) -> io::Result<String> {
    let mut raw = [0u8; 16];
    getrandom::fill(&mut raw).map_err(|e| io::Error::other(e.to_string()))?;
    let token = hex(&raw);
    let hash = hash_token(&token);
    let sub = dir.join(kind);
    make_private_dir(&sub)?;
    store(&sub, &hash.clone(), &record(hash))?;
    Ok(token)
}

/// Writes the record of the token hashed `hash` into `sub`, atomically.
fn store<T: Serialize>(sub: &Path, hash: &str, record: &T) -> io::Result<()> {
    let json = serde_json::to_vec(record).map_err(io::Error::other)?;
    let mut tmp = tempfile::Builder::new().prefix(".tmp-").tempfile_in(sub)?;
    tmp.write_all(&json)?;
    tmp.persist(sub.join(file_name(hash)))
        .map_err(|e| e.error)?;
    Ok(())
}

/// The record stored for `token` in `dir/kind/`, and its file; `None` for anything that is not
/// a token stored there (`hash` names the record's hash field).
pub fn get_secret<T: serde::de::DeserializeOwned>(
    dir: &Path,
    kind: &str,
    token: &str,
    hash: impl Fn(&T) -> &String,
) -> Option<(T, PathBuf)> {
    // Anything but 32 lowercase hex digits was never made here; refusing it early also keeps
    // odd bytes out of the file name below.
    if token.len() != 32
        || !token
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return None;
    }
    let expected = hash_token(token);
    let path = dir.join(kind).join(file_name(&expected));
    let raw = read_small(&path)?;
    let record: T = serde_json::from_slice(&raw).ok()?;
    bool::from(hash(&record).as_bytes().ct_eq(expected.as_bytes())).then_some((record, path))
}

fn hash_token(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

fn file_name(hash: &str) -> String {
    format!("{}.json", &hash[..32])
}

/// Removes the links of `root`'s other questions and those past [`LINK_MAX_AGE`] (a waiting
/// question's links are written again whenever they are given out).
fn prune(links: &Path, root: &Path, question: &QuestionId) {
    let Ok(read_dir) = fs::read_dir(links) else {
        return;
    };
    let now = SystemTime::now();
    for dirent in read_dir.flatten() {
        let path = dirent.path();
        let old = dirent
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .is_some_and(|age| age > LINK_MAX_AGE);
        let record = read_small(&path).and_then(|r| serde_json::from_slice::<LinkRecord>(&r).ok());
        match record {
            _ if old => {
                let _ = fs::remove_file(&path);
            }
            Some(r) if r.root == root && &r.question != question => {
                let _ = fs::remove_file(&path);
            }
            _ => {}
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minted_token_verifies_and_a_changed_one_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let token = mint(
            dir.path(),
            Path::new("/p"),
            &QuestionId::from_file("t1"),
            Channel::Status,
        )
        .unwrap();
        assert_eq!(token.len(), 32);
        let rec = verify(dir.path(), &token).unwrap();
        assert_eq!(
            (rec.root.as_path(), rec.question.as_str()),
            (Path::new("/p"), "t1")
        );
        let mut wrong = token.clone().into_bytes();
        wrong[31] = if wrong[31] == b'0' { b'1' } else { b'0' };
        assert_eq!(verify(dir.path(), &String::from_utf8(wrong).unwrap()), None);
        assert_eq!(verify(dir.path(), "../../etc/passwd"), None);
        // Only the hash is stored, never the token.
        let stored: String = fs::read_dir(dir.path().join("links"))
            .unwrap()
            .flatten()
            .map(|d| fs::read_to_string(d.path()).unwrap())
            .collect();
        assert!(!stored.contains(&token), "{stored}");
    }

    #[test]
    fn a_new_question_prunes_the_links_of_the_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let old = mint(
            dir.path(),
            Path::new("/p"),
            &QuestionId::from_file("t1"),
            Channel::Status,
        )
        .unwrap();
        let other = mint(
            dir.path(),
            Path::new("/q"),
            &QuestionId::from_file("t1"),
            Channel::Status,
        )
        .unwrap();
        let new = mint(
            dir.path(),
            Path::new("/p"),
            &QuestionId::from_file("t2"),
            Channel::Status,
        )
        .unwrap();
        assert_eq!(verify(dir.path(), &old), None);
        assert!(verify(dir.path(), &other).is_some());
        assert!(verify(dir.path(), &new).is_some());
    }

    /// Every `ralph status --json` minted a new link and only the newest 32 per question were
    /// kept, so a script polling status killed the link a phone had been sent.
    #[test]
    fn a_question_has_one_link_per_channel_for_as_long_as_it_waits() {
        let dir = tempfile::tempdir().unwrap();
        let root = Path::new("/p");
        let sent = mint(
            dir.path(),
            root,
            &QuestionId::from_file("t1"),
            Channel::Notify,
        )
        .unwrap();
        let polled: Vec<String> = (0..40)
            .map(|_| {
                mint(
                    dir.path(),
                    root,
                    &QuestionId::from_file("t1"),
                    Channel::Status,
                )
                .unwrap()
            })
            .collect();
        assert!(polled.iter().all(|t| *t == polled[0]), "one status link");
        assert_ne!(sent, polled[0], "a link per channel");
        assert!(
            verify(dir.path(), &sent).is_some(),
            "the notified link still works"
        );
        assert!(verify(dir.path(), &polled[0]).is_some());
        let files = fs::read_dir(dir.path().join(LINKS)).unwrap().count();
        assert_eq!(files, 2);
        // Another state directory (another key) gives other links.
        let elsewhere = tempfile::tempdir().unwrap();
        assert_ne!(
            mint(
                elsewhere.path(),
                root,
                &QuestionId::from_file("t1"),
                Channel::Notify
            )
            .unwrap(),
            sent
        );
    }

    #[test]
    fn a_request_carries_how_long_and_an_old_one_means_five_minutes() {
        let dir = tempfile::tempdir().unwrap();
        let ws = crate::workspace::Workspace::new(dir.path());
        fs::create_dir_all(ws.dir()).unwrap();
        let hour =
            Request::extend(&QuestionId::from_file("t1"), Duration::from_secs(3600)).unwrap();
        request(&ws, &hour).unwrap();
        let taken = take_request(&ws).unwrap();
        assert_eq!(taken.extend_by(), Some(Duration::from_secs(3600)));
        assert_eq!(take_request(&ws), None, "taken once");
        // Written by a broker from before the amount existed.
        let file = ws.dir().join(REQUEST_FILE);
        fs::write(&file, r#"{"asked_at":"t1","action":"extend"}"#).unwrap();
        assert_eq!(
            take_request(&ws).unwrap().extend_by(),
            Some(crate::countdown::EXTEND_BY)
        );
        fs::write(&file, r#"{"asked_at":"t1","action":"skip"}"#).unwrap();
        assert_eq!(take_request(&ws).unwrap().action, RequestAction::Skip);
        // Out of bounds, whoever wrote it: dropped, not clamped.
        for secs in [0, 59, 86_401, u64::MAX] {
            fs::write(
                &file,
                format!(r#"{{"asked_at":"t1","action":"extend","extend_secs":{secs}}}"#),
            )
            .unwrap();
            assert_eq!(take_request(&ws), None, "{secs} s");
        }
    }

    #[test]
    fn an_extension_out_of_bounds_is_refused_with_the_bounds() {
        let err =
            Request::extend(&QuestionId::from_file("t1"), Duration::from_secs(30)).unwrap_err();
        assert!(
            err.contains("1 min to 24 h") && err.contains("30 s"),
            "{err}"
        );
        assert!(
            Request::extend(&QuestionId::from_file("t1"), Duration::from_secs(25 * 3600)).is_err()
        );
        assert!(Request::extend(&QuestionId::from_file("t1"), MAX_EXTEND).is_ok());
        assert_eq!(describe_span(Duration::from_secs(300)), "5 min");
        assert_eq!(describe_span(Duration::from_secs(3600)), "1 h");
        assert_eq!(describe_span(Duration::from_secs(5400)), "1 h 30 min");
        assert_eq!(describe_span(Duration::from_secs(61)), "61 s");
    }

    #[test]
    fn the_lock_says_who_serves_until_it_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(running_in(dir.path()), None);
        let mut lock = BrokerLock::acquire(dir.path()).unwrap();
        lock.publish("http://127.0.0.1:7777/").unwrap();
        let info = running_in(dir.path()).unwrap();
        assert_eq!(info.url, "http://127.0.0.1:7777");
        assert!(matches!(
            BrokerLock::acquire(dir.path()),
            Err(AcquireError::Held(Some(_)))
        ));
        drop(lock);
        assert_eq!(running_in(dir.path()), None);
    }

    /// Another process of the user could rewrite `serve.lock` so that loops print links to
    /// its own server; a pid that does not hold the lock is now not believed.
    #[test]
    fn a_lock_file_rewritten_by_another_process_is_not_believed() {
        let dir = tempfile::tempdir().unwrap();
        let mut lock = BrokerLock::acquire(dir.path()).unwrap();
        lock.publish("http://127.0.0.1:7777").unwrap();
        assert!(running_in(dir.path()).is_some());
        let forged = serde_json::to_vec(&BrokerInfo {
            pid: std::process::id() + 1,
            url: "http://evil.example".into(),
        })
        .unwrap();
        fs::write(dir.path().join(LOCK_FILE), forged).unwrap();
        assert_eq!(running_in(dir.path()), None);
    }
}
