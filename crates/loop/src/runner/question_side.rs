//! [`QuestionSide`]: the runner's part in a question's life: the answer on its way to the next
//! iteration, the question the last run left waiting, the `ralph ask` claims already shown,
//! and the notifications of a question.

use std::collections::HashSet;

use ralph_protocol::state::PendingQuestion;

use super::delivery::Delivery;
use crate::notify::Notifier;

/// The runner's question state (see the module docs).
#[derive(Debug)]
pub(super) struct QuestionSide {
    /// The answer being delivered to the next iteration, if any.
    pub(super) delivering: Option<Delivery>,
    /// The question the last run left waiting, shown first.
    pub(super) from_last_run: Option<PendingQuestion>,
    /// `ralph ask` claims already shown (by `asked_at`), so each is asked once.
    pub(super) asks_seen: HashSet<String>,
    /// Bell, desktop notification, command and webhook for a question.
    pub(super) notifier: Notifier,
}
