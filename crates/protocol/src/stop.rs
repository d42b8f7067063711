//! `.ralph/stop`: another process asks the running loop to stop, as Ctrl-C in its terminal
//! would (the agent is stopped gracefully, the state saved, and `ralph run` resumes).
//!
//! `ralph stop`, the broker's page and its Telegram bot write the file ([`request`]); the loop
//! watches `.ralph/` for it and, when it appears, takes it ([`take`]) and sends its runner the
//! same stop control a first Ctrl-C sends. A loop takes any request left from before it
//! started first, so a stale one never stops a new run.

use std::time::SystemTime;

use crate::workspace::{self, Workspace, WorkspaceError};

/// The file's name in `.ralph/`.
pub const FILE_NAME: &str = "stop";

/// Who asked for a stop, recorded in the file for the loop's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopBy {
    /// `ralph stop` in a terminal.
    Command,
    /// The broker's web page.
    Web,
    /// The broker's Telegram bot.
    Telegram,
}

impl StopBy {
    /// The word written in the file and the loop's log.
    pub fn as_str(self) -> &'static str {
        match self {
            StopBy::Command => "ralph stop",
            StopBy::Web => "web",
            StopBy::Telegram => "telegram",
        }
    }

    fn parse(s: &str) -> Option<StopBy> {
        [StopBy::Command, StopBy::Web, StopBy::Telegram]
            .into_iter()
            .find(|b| b.as_str() == s)
    }
}

/// Asks the loop in `ws` to stop (written atomically; a second request replaces the first).
pub fn request(ws: &Workspace, by: StopBy) -> Result<(), WorkspaceError> {
    let body = format!(
        "{}\n{}\n",
        by.as_str(),
        crate::time::timestamp(SystemTime::now())
    );
    workspace::write_atomic(&ws.stop_request(), body.as_bytes())
}

/// Takes the waiting request, if any (it is removed: each is acted on once), and says who
/// made it. A file that says nothing ralph wrote still asks for a stop, by nobody known.
pub fn take(ws: &Workspace) -> Option<Option<StopBy>> {
    let path = ws.stop_request();
    let raw = workspace::read_bounded(&path, 256).ok()??;
    workspace::remove(&path).ok()?;
    let text = String::from_utf8_lossy(&raw.bytes);
    Some(StopBy::parse(text.lines().next().unwrap_or("").trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_taken_once_and_says_who_asked() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path());
        ws.ensure().unwrap();
        assert_eq!(take(&ws), None);
        request(&ws, StopBy::Web).unwrap();
        assert_eq!(take(&ws), Some(Some(StopBy::Web)));
        assert_eq!(take(&ws), None, "taken once");
        std::fs::write(ws.stop_request(), "whatever").unwrap();
        assert_eq!(take(&ws), Some(None));
    }
}
