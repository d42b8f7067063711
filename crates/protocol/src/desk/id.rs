//! [`QuestionId`]: which question a file, an answer, a link or a request is about.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::answer::Answer;

/// A question's identity: unique per question, random, never a time.
///
/// Every file that speaks of a question names it by this id (`state.json`'s
/// `pending_question.id`, `answer.md`'s `question_id`, `ask.json`, answer links, the broker's
/// requests), and [`QuestionId::is_answered_by`] is the one rule for "this answer is for that
/// question". Files written before ids existed named a question by its `asked_at` text; read
/// back, that text is the id, so a question asked before an upgrade is still answered after it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct QuestionId(String);

impl QuestionId {
    /// A new id: `q-` and 16 random hex digits (from the OS; a clock and a counter if the OS
    /// cannot give randomness, which still never repeats within a process).
    pub fn new() -> QuestionId {
        let mut raw = [0u8; 8];
        if getrandom::fill(&mut raw).is_err() {
            use std::sync::atomic::{AtomicU64, Ordering};
            static NEXT: AtomicU64 = AtomicU64::new(0);
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos() as u64;
            let mixed = nanos
                ^ (u64::from(std::process::id()) << 40)
                ^ NEXT.fetch_add(1, Ordering::Relaxed).rotate_left(17);
            raw = mixed.to_le_bytes();
        }
        let hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
        QuestionId(format!("q-{hex}"))
    }

    /// The id as written in a file (and how an older file's `asked_at` is read back).
    pub fn from_file(text: impl Into<String>) -> QuestionId {
        QuestionId(text.into())
    }

    /// The id as text, for files and links.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `answer` answers this question: it names this question, or (hand-written into
    /// `answer.md`, naming none) it answers whatever question waits.
    pub fn is_answered_by(&self, answer: &Answer) -> bool {
        answer.question.as_ref().is_none_or(|q| q == self)
    }
}

impl Default for QuestionId {
    fn default() -> Self {
        QuestionId::new()
    }
}

impl fmt::Display for QuestionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answer::AnsweredBy;

    #[test]
    fn ids_are_unique_and_not_times() {
        let ids: std::collections::HashSet<QuestionId> =
            (0..1000).map(|_| QuestionId::new()).collect();
        assert_eq!(ids.len(), 1000);
        let one = QuestionId::new();
        assert!(
            one.as_str().starts_with("q-") && one.as_str().len() == 18,
            "{one}"
        );
        assert!(crate::time::parse_timestamp(one.as_str()).is_none());
    }

    #[test]
    fn one_rule_says_which_answer_is_for_which_question() {
        let asked = QuestionId::new();
        let other = QuestionId::new();
        let ours = Answer::new("Redis", AnsweredBy::Web, Some(asked.clone()));
        let theirs = Answer::new("Redis", AnsweredBy::Web, Some(other));
        let hand_written = Answer::parse("just use Redis");
        assert!(asked.is_answered_by(&ours));
        assert!(!asked.is_answered_by(&theirs));
        assert!(asked.is_answered_by(&hand_written));
    }

    #[test]
    fn an_older_files_asked_at_reads_back_as_the_id() {
        let raw = "---\nanswered_by: terminal\nanswered_at: 2026-11-22T14:00:01.000Z\nquestion_asked_at: 2026-11-22T14:00:00.000Z\n---\nRedis\n";
        let a = Answer::parse(raw);
        assert_eq!(
            a.question,
            Some(QuestionId::from_file("2026-11-22T14:00:00.000Z"))
        );
    }
}
