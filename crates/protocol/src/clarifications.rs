//! `.ralph/clarifications.md`: a readable record of every question and what became of it.
//!
//! Questions and answers are removed from `.ralph/` once delivered, so this log is where a
//! human (or a later agent) looks up what was decided and by whom. Each entry is appended in a
//! single write.

use std::fmt::Write as _;
use std::time::SystemTime;

use crate::desk::Ended;
use crate::question::Question;
use crate::time::timestamp;
use crate::workspace::{self, Workspace, WorkspaceError};

/// One entry of the record.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry<'a> {
    /// The question, or `None` for guidance given without one.
    pub question: Option<&'a Question>,
    /// When it was asked (RFC 3339).
    pub asked_at: Option<&'a str>,
    /// What became of it.
    pub outcome: &'a Ended,
}

/// Appends `entry` to `.ralph/clarifications.md`, creating it with a title if needed.
pub(crate) fn record(ws: &Workspace, entry: &Entry<'_>) -> Result<(), WorkspaceError> {
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
        Ended::Answered { answer, late, .. } => {
            let _ = writeln!(
                text,
                "**Answer**{} from {}, at {}:\n",
                if *late {
                    " (late: after the deadline)"
                } else {
                    ""
                },
                answer.source(),
                timestamp(answer.at)
            );
            for line in answer.text.lines() {
                let _ = writeln!(text, "> {line}");
            }
        }
        Ended::TimedOut => {
            text.push_str(
                "**Unanswered**: the deadline passed; the agent went on with its best guess.\n",
            );
        }
        Ended::Skipped => {
            text.push_str("**Skipped** by the human: the agent decides.\n");
        }
        Ended::Interrupted => {
            text.push_str(
                "**Interrupted**: ralph stopped while it waited; the question stays for the next run.\n",
            );
        }
    }
    workspace::append(&path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::answer::{Answer, AnsweredBy};

    /// The file as it is written, with each entry's own timestamp line (the time of writing)
    /// blanked.
    fn recorded(entries: &[(Option<&Question>, &Ended)]) -> String {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path());
        ws.ensure().unwrap();
        for (question, ended) in entries {
            let entry = Entry {
                question: *question,
                asked_at: question.map(|_| "2026-11-22T14:00:00.000Z"),
                outcome: ended,
            };
            record(&ws, &entry).unwrap();
        }
        std::fs::read_to_string(ws.clarifications())
            .unwrap()
            .lines()
            .map(|l| if l.starts_with("## ") { "## (now)" } else { l })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The format other tools and people read: each way a question ends, word for word.
    #[test]
    fn every_ending_is_recorded_in_the_same_words() {
        let q = Question {
            options: vec![
                crate::question::QuestionOption::new("Redis"),
                crate::question::QuestionOption::new("Memcached"),
            ],
            default: Some("Redis".into()),
            ..Question::plain("Which cache?\nSay why.")
        };
        let mut answer = Answer::new("Memcached\nsimpler", AnsweredBy::RalphAnswer, None);
        answer.at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_000_000);
        let late = Ended::Answered {
            answer: answer.clone().with_who("laptop"),
            here: false,
            late: true,
        };
        let text = recorded(&[
            (Some(&q), &Ended::answered(answer.clone(), false)),
            (Some(&q), &late),
            (Some(&q), &Ended::TimedOut),
            (Some(&q), &Ended::Skipped),
            (None, &Ended::answered(answer, false)),
        ]);
        let asked = "**Question** (asked 2026-11-22T14:00:00.000Z):\n\n> Which cache?\n> Say why.\n\nOptions: 1. Redis · 2. Memcached\nDefault: Redis\n";
        let expected = [
            "# Clarifications\n\nEvery question the agent asked, and what became of it.".to_owned(),
            format!("## (now)\n\n{asked}\n**Answer** from `ralph answer`, at 2026-11-18T11:06:40.000Z:\n\n> Memcached\n> simpler"),
            format!("## (now)\n\n{asked}\n**Answer** (late: after the deadline) from `ralph answer` (laptop), at 2026-11-18T11:06:40.000Z:\n\n> Memcached\n> simpler"),
            format!("## (now)\n\n{asked}\n**Unanswered**: the deadline passed; the agent went on with its best guess."),
            format!("## (now)\n\n{asked}\n**Skipped** by the human: the agent decides."),
            "## (now)\n\n**Guidance** (given when no question was waiting)\n\n**Answer** from `ralph answer`, at 2026-11-18T11:06:40.000Z:\n\n> Memcached\n> simpler".to_owned(),
        ]
        .join("\n\n");
        assert_eq!(text, expected);
    }
}
