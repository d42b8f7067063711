//! `.ralph/clarifications.md`: a readable record of every question and what became of it.
//!
//! Questions and answers are removed from `.ralph/` once delivered, so this log is where a
//! human (or a later agent) looks up what was decided and by whom. Each entry is appended in a
//! single write.

use std::fmt::Write as _;
use std::time::SystemTime;

use crate::question::Question;
use crate::time::timestamp;
use crate::workspace::{self, Workspace, WorkspaceError};

/// What became of a question.
#[derive(Debug, Clone, Copy)]
pub enum How<'a> {
    /// Someone answered.
    Answered {
        /// The answer.
        text: &'a str,
        /// Who: [`crate::answer::Answer::source`].
        by: &'a str,
        /// When.
        at: SystemTime,
        /// After the deadline.
        late: bool,
    },
    /// The deadline passed.
    Unanswered,
    /// The human skipped it.
    Skipped,
}

/// One entry of the record.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    /// The question, or `None` for guidance given without one.
    pub question: Option<&'a Question>,
    /// When it was asked (RFC 3339).
    pub asked_at: Option<&'a str>,
    /// What became of it.
    pub outcome: How<'a>,
}

/// Appends `entry` to `.ralph/clarifications.md`, creating it with a title if needed.
pub fn record(ws: &Workspace, entry: &Entry<'_>) -> Result<(), WorkspaceError> {
    let path = ws.clarifications();
    let mut text = String::new();
    // Missing, or empty: an empty file has no title yet (an older ralph could leave one).
    if !std::fs::symlink_metadata(&path).is_ok_and(|m| m.len() > 0) {
        text.push_str(
            "# Clarifications\n\nEvery question the agent asked, and what became of it.\n",
        );
    }
    let _ = write!(text, "\n## {}\n\n", timestamp(SystemTime::now()));
    match entry.question {
        Some(q) => {
            let _ = writeln!(
                text,
                "**Question** (asked {}):\n",
                entry.asked_at.unwrap_or("?")
            );
            for line in q.text.lines() {
                let _ = writeln!(text, "> {line}");
            }
            text.push('\n');
            if !q.options.is_empty() {
                let labels: Vec<String> = q
                    .options
                    .iter()
                    .enumerate()
                    .map(|(i, o)| format!("{}. {}", i + 1, o.label))
                    .collect();
                let _ = writeln!(text, "Options: {}", labels.join(" · "));
            }
            if let Some(d) = &q.default {
                let _ = writeln!(text, "Default: {d}");
            }
            text.push('\n');
        }
        None => text.push_str("**Guidance** (given when no question was waiting)\n\n"),
    }
    match entry.outcome {
        How::Answered {
            text: answer,
            by,
            at,
            late,
        } => {
            let _ = writeln!(
                text,
                "**Answer**{} from {}, at {}:\n",
                if late {
                    " (late: after the deadline)"
                } else {
                    ""
                },
                by,
                timestamp(at)
            );
            for line in answer.lines() {
                let _ = writeln!(text, "> {line}");
            }
        }
        How::Unanswered => {
            text.push_str(
                "**Unanswered**: the deadline passed; the agent went on with its best guess.\n",
            );
        }
        How::Skipped => {
            text.push_str("**Skipped** by the human: the agent decides.\n");
        }
    }
    workspace::append(&path, text.as_bytes())
}
