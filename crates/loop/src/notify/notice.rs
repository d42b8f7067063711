//! What every channel is told, and what they share: the notice, its title, the process
//! groups of the commands still running, and the one way a channel warns.

use std::ffi::OsStr;
use std::path::Path;
use std::sync::mpsc::Sender;
use std::time::Duration;

use ralph_protocol::one_line;

/// The title every channel uses.
pub(super) const TITLE: &str = "ralph has a question";

/// The longest warning line, in characters.
const WARNING_CHARS: usize = 300;

/// What the channels are told about a question.
#[derive(Debug, Clone, serde::Serialize)]
pub struct QuestionNotice {
    /// The project directory.
    pub root: String,
    /// The question text (markdown, agent-written).
    pub question: String,
    /// Suggested answers, in order.
    pub options: Vec<String>,
    /// The answer taken when nobody answers in time.
    pub default: Option<String>,
    /// When the wait ends (RFC 3339), or `None` for no deadline.
    pub deadline: Option<String>,
    /// The iteration that asked.
    pub iteration: u32,
    /// The command that answers, e.g. `ralph answer -C /path "your answer"`.
    pub answer_command: String,
    /// A link that opens the question in a browser, when `ralph serve` runs.
    pub answer_url: Option<String>,
}

/// The process groups of the commands still running; each is its leader's pid.
pub(super) type Groups = std::sync::Arc<std::sync::Mutex<Vec<i32>>>;

/// How long a notification command being stopped gets between SIGTERM and SIGKILL.
pub(super) const STOP_GRACE: Duration = Duration::from_secs(1);

/// Sends one warning line; a receiver that is gone is fine (the caller chose not to listen).
pub(super) fn warn(tx: &Sender<String>, line: &str) {
    let _ = tx.send(one_line(line, WARNING_CHARS));
}

/// The last component of the project path, for titles (`/home/me/shop` -> `shop`).
pub(super) fn project_name(root: &str) -> String {
    let name = Path::new(root)
        .file_name()
        .map_or_else(|| root.into(), OsStr::to_string_lossy);
    one_line(&name, 60)
}
