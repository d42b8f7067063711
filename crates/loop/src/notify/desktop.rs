//! Desktop notifications, through `notify-send`.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;
use std::sync::mpsc::Sender;
use std::time::Duration;

use ralph_protocol::one_line;

use super::command::{run_limited, strip_nul};
use super::notice::{Groups, QuestionNotice, TITLE, project_name, warn};

/// How long `notify-send` may run; it normally returns in milliseconds, but hangs when the
/// session bus does.
const DESKTOP_TIME_LIMIT: Duration = Duration::from_secs(10);

/// The `notify-send` that desktop notifications go through: `None` without a desktop session
/// (no `DISPLAY`, `WAYLAND_DISPLAY` or session bus) or without `notify-send` on `PATH`.
pub fn desktop_notifier() -> Option<PathBuf> {
    let has_session = ["DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS"]
        .iter()
        .any(|var| std::env::var_os(var).is_some_and(|v| !v.is_empty()));
    if !has_session {
        return None;
    }
    find_on_path("notify-send")
}

pub(super) fn desktop(notice: &QuestionNotice, groups: &Groups, tx: &Sender<String>) {
    // No display or no notify-send means this machine has no desktop to notify: not a failure
    // worth a warning, which would show on every question of every headless run.
    let Some(program) = desktop_notifier() else {
        return;
    };
    let mut body = escape_markup(&one_line(&notice.question, 400));
    body.push_str("\n\n");
    body.push_str(&escape_markup(&one_line(&notice.answer_command, 200)));
    let mut cmd = Command::new(program);
    // `--` so that a question starting with `-` is text, not an option.
    cmd.arg("--app-name=ralph")
        .arg("--")
        .arg(format!("{TITLE} ({})", project_name(&notice.root)))
        .arg(strip_nul(&body));
    if let Err(e) = run_limited(cmd, DESKTOP_TIME_LIMIT, groups) {
        warn(tx, &format!("desktop notification (notify-send): {e}"));
    }
}

/// Finds an executable called `name` on `PATH`.
fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| {
            candidate
                .metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Escapes the few characters notification servers read as markup: most of them render a
/// subset of HTML in the body, where a question about `Vec<String>` would lose its type.
fn escape_markup(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}
