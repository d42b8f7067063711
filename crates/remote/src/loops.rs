//! The broker's views of the loops on this machine, and what it may ask of them.
//!
//! The rest of the crate works on the plain views below ([`LoopView`], [`QuestionView`], read
//! from each loop's `state.json`) and goes through [`answer_link`] to answer a question and
//! [`act`] to skip it or give it more time (each says what became of it in a [`Receipt`], in
//! the words every front end shows), and [`stop_loop`] to stop a loop.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use ralph_protocol::{
    AnsweredBy, DeskError, PendingQuestion, Request, State, Status, Submitted, Workspace,
    answer_question, answer_to, describe_span, send_request,
};

use ralph_fleet::rows::LoopRow;
use ralph_protocol::{LinkRecord, QuestionId, Reply, StopBy};

/// One loop on this machine, for the dashboard and the bot: its row as every fleet view shows
/// it, and its question whole.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LoopView {
    /// The loop, as `ralph status --all` and the fleet view show it.
    pub row: LoopRow,
    /// The question, while one waits.
    pub question: Option<QuestionView>,
}

/// A waiting question.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct QuestionView {
    /// The project root of the loop that asks.
    pub root: PathBuf,
    /// Which question it is.
    pub id: QuestionId,
    /// The text (markdown, agent-written).
    pub text: String,
    /// Extra context (markdown, agent-written).
    pub context: Option<String>,
    /// The options' labels and descriptions, in order.
    pub options: Vec<(String, Option<String>)>,
    /// Whether several options may be picked.
    pub multi_select: bool,
    /// The answer taken when nobody answers.
    pub default: Option<String>,
    /// When the wait ends; `None` for no deadline.
    pub deadline: Option<SystemTime>,
    /// Whether the deadline passed (a late answer still reaches the agent).
    pub timed_out: bool,
    /// Whether the run that asked still runs. A stopped loop keeps its question for the next
    /// `ralph run`: no deadline runs, nothing can skip it or give it time, an answer waits.
    pub live: bool,
    /// The iteration that asked.
    pub iteration: u32,
}

impl QuestionView {
    fn new(root: &Path, p: &PendingQuestion, status: Status) -> QuestionView {
        QuestionView {
            root: root.to_path_buf(),
            id: p.id.clone(),
            text: p.question.text.clone(),
            context: p.question.context.clone(),
            options: p
                .question
                .options
                .iter()
                .map(|o| (o.label.clone(), o.description.clone()))
                .collect(),
            multi_select: p.question.multi_select,
            default: p.question.default.clone(),
            deadline: p.deadline_time(),
            timed_out: p.timed_out,
            live: matches!(status, Status::Running | Status::WaitingInput),
            iteration: p.iteration,
        }
    }

    /// The project's directory name, for headers.
    pub(crate) fn project(&self) -> String {
        project_name(&self.root)
    }
}

/// The last path component of `root`, or the whole path.
pub(crate) fn project_name(root: &Path) -> String {
    root.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| root.display().to_string())
}

/// Every registered loop, waiting ones first.
pub(crate) fn all() -> Vec<LoopView> {
    let mut all: Vec<LoopView> = ralph_protocol::registered_loops()
        .into_iter()
        .filter_map(|e| load(&e.root))
        .collect();
    all.sort_by(|a, b| {
        (a.question.is_none(), &a.row.root).cmp(&(b.question.is_none(), &b.row.root))
    });
    all
}

/// The loop in `root`, from its `state.json`.
pub(crate) fn load(root: &Path) -> Option<LoopView> {
    let question = question(root)?;
    let row = ralph_fleet::rows::read(&Workspace::new(root))?;
    Some(LoopView { row, question })
}

/// The question waiting in the loop in `root`; `None` when it has no `state.json`.
fn question(root: &Path) -> Option<Option<QuestionView>> {
    let ws = Workspace::new(root);
    ws.check_not_symlink().ok()?;
    let state = State::load(&ws).ok().flatten()?;
    Some(
        state
            .pending_question
            .as_ref()
            .filter(|p| !answer_waiting(&ws, &p.id))
            .map(|p| QuestionView::new(root, p, state.status)),
    )
}

/// Whether an answer to the question `id` waits to be delivered: the question is answered,
/// though the loop has not taken it yet.
fn answer_waiting(ws: &Workspace, id: &QuestionId) -> bool {
    answer_to(ws, id).ok().flatten().is_some()
}

/// The question `link` opens, while it waits.
pub(crate) fn pending(link: &LinkRecord) -> Option<QuestionView> {
    question(&link.root)?.filter(|q| q.id == link.question)
}

/// Which front end sends an answer, and who there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Sender {
    /// The web page, opened by an answer link or a paired device (its name).
    Web(String),
    /// The Telegram bot (the user's id).
    Telegram(String),
}

/// What became of an answer or a request from a front end: the same outcomes, and words, as
/// `ralph answer`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Receipt {
    /// Taken; `live` when a running loop picks it up now.
    Accepted {
        /// A loop runs there.
        live: bool,
    },
    /// The reply was not a valid answer; the message says why and what to do.
    Invalid(String),
    /// Someone answered first (who, and the first line of their answer).
    AlreadyAnswered(String),
    /// The question was skipped first.
    Skipped,
    /// No such question waits any more (how it closed, if known).
    NotWaiting(String),
    /// The loop was asked to skip the question or give it more time (what it was told).
    Requested(String),
}

impl Receipt {
    /// The words the user sees.
    pub(crate) fn message(&self) -> String {
        match self {
            Receipt::Accepted { live: true } => "Answered. The loop picks it up now.".into(),
            Receipt::Accepted { live: false } => {
                "Answer saved. No loop is running there; the next `ralph run` delivers it.".into()
            }
            // The desk's refusals are clauses ("the answer is too long: …"); here they stand
            // alone, as a sentence.
            Receipt::Invalid(why) => sentence(why),
            Receipt::AlreadyAnswered(who) => {
                format!("Someone answered first ({who}); your answer was not used.")
            }
            Receipt::Skipped => {
                "The question was skipped before your answer arrived; your answer was not used."
                    .into()
            }
            Receipt::NotWaiting(how) => format!("This question is no longer waiting: {how}."),
            Receipt::Requested(what) => what.clone(),
        }
    }
}

/// `text` with its first letter capitalised and a full stop at its end, as a sentence that
/// stands alone on a page or in a chat.
fn sentence(text: &str) -> String {
    let text = text.trim();
    let mut chars = text.chars();
    let mut out: String = match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => return String::new(),
    };
    if !out.ends_with(['.', '!', '?']) {
        out.push('.');
    }
    out
}

/// The label of the button that skips `q`: what the agent then goes on with.
pub(crate) fn skip_label(q: &QuestionView) -> &'static str {
    match q.default {
        Some(_) => "Skip (use default)",
        None => "Skip (agent decides)",
    }
}

/// Answers the question `link` stands for, through the same path as every front end
/// ([`answer_question`]: one encoding, one limit, first answer wins).
pub(crate) fn answer_link(link: &LinkRecord, reply: &Reply, sender: &Sender) -> Receipt {
    let ws = Workspace::new(&link.root);
    let (by, who) = match sender {
        Sender::Web(who) => (AnsweredBy::Web, who),
        Sender::Telegram(who) => (AnsweredBy::Telegram, who),
    };
    match answer_question(&ws, Some(&link.question), reply, by, Some(who.clone())) {
        Ok(Submitted::Accepted) => Receipt::Accepted {
            live: ws.is_locked(),
        },
        Ok(Submitted::AlreadyAnswered(theirs)) => {
            Receipt::AlreadyAnswered(match theirs.text.lines().next() {
                Some(line) if !line.is_empty() => format!("{}: \"{line}\"", theirs.source()),
                _ => theirs.source(),
            })
        }
        Ok(Submitted::Skipped) => Receipt::Skipped,
        Ok(Submitted::RunEnded) => Receipt::NotWaiting("the run that asked it has ended".into()),
        Err(DeskError::NotWaiting { closed, .. }) => Receipt::NotWaiting(match closed {
            Some(c) if c.run_ended => "the run that asked it has ended".into(),
            Some(c) => match c.answered_by {
                Some(by) => format!("it was answered from {}", by.describe()),
                None => "it was skipped".into(),
            },
            None => "it was closed".into(),
        }),
        Err(DeskError::Refused(why)) => Receipt::Invalid(why.to_string()),
        Err(e) => Receipt::Invalid(format!("could not write the answer: {e}")),
    }
}

/// How long after its loop last changed a closed question's link still says how it closed
/// (to a page that answered too late); then it is like any unknown link.
pub(crate) const CLOSED_TOLD_FOR: Duration = Duration::from_secs(10 * 60);

/// Whether `link`'s question is no longer waiting and its loop has not changed for
/// [`CLOSED_TOLD_FOR`]: the link then answers as any unknown one.
pub(crate) fn closed_long_ago(link: &LinkRecord, now: SystemTime) -> bool {
    let quiet = std::fs::metadata(Workspace::new(&link.root).state())
        .and_then(|m| m.modified())
        .map_or(true, |changed| {
            now.duration_since(changed)
                .is_ok_and(|d| d > CLOSED_TOLD_FOR)
        });
    quiet && pending(link).is_none()
}

/// How the question `link` stands for closed, in words for a page that still shows it.
pub(crate) fn closed_how(link: &LinkRecord) -> String {
    let ws = Workspace::new(&link.root);
    if let Some(a) = answer_to(&ws, &link.question).ok().flatten() {
        return format!("answered from {}", a.source());
    }
    match State::load(&ws).ok().flatten() {
        Some(state) => match state.closed(&link.question) {
            // A clause after "This question closed:" or "Closed:", so no "closed" of its own.
            Some(c) if c.run_ended => "the run that asked it has ended".into(),
            Some(c) => match c.answered_by {
                Some(by) => format!("answered from {}", by.describe()),
                None => "skipped".into(),
            },
            None if state
                .pending_question
                .as_ref()
                .is_some_and(|p| p.id == link.question) =>
            {
                "still waiting".into()
            }
            None => "its loop stopped, or a new question replaced it".into(),
        },
        None => "its loop's state is gone".into(),
    }
}

/// What the web page's "+5 min" adds: as `Ctrl+E` in the panel.
pub(crate) const PAGE_EXTEND: Duration = ralph_protocol::EXTEND_BY;

/// What Telegram's "+1 h" adds: a phone in a pocket is looked at less often than a page.
pub(crate) const TELEGRAM_EXTEND: Duration = Duration::from_secs(3600);

/// What a front end may do to a waiting question besides answering it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Skip it: the agent goes on with its best guess.
    Skip,
    /// More time: the web page's "+5 min", Telegram's "+1 h" (within
    /// [`MIN_EXTEND`](ralph_protocol::MIN_EXTEND)..=[`MAX_EXTEND`](ralph_protocol::MAX_EXTEND)).
    Extend(Duration),
}

/// Asks the loop waiting on `link`'s question to skip it or give it more time, as the keys in
/// its panel do. A running loop does, and so does a lone `ralph ask`, which stands in for one.
pub(crate) fn act(link: &LinkRecord, action: Action) -> Receipt {
    let ws = Workspace::new(&link.root);
    let Some(q) = pending(link) else {
        return Receipt::NotWaiting(closed_how(link));
    };
    if matches!(action, Action::Extend(_)) && q.deadline.is_none() {
        return Receipt::Invalid(
            "This question has no deadline: it waits until it is answered, so there is no time to add."
                .into(),
        );
    }
    if matches!(action, Action::Extend(_)) && q.timed_out {
        return Receipt::Invalid(format!(
            "Too late for more time: the deadline passed and the agent went on with {}. An answer still reaches it, at its next iteration.",
            ralph_protocol::fallback_words(q.default.as_deref())
        ));
    }
    // A running loop (or a lone `ralph ask`) is registered; with none, nobody would act.
    if !ralph_protocol::registered_loops()
        .iter()
        .any(|e| e.root == link.root)
    {
        return Receipt::Invalid(
            "No loop is running there to skip the question or give it more time; answer it instead."
                .into(),
        );
    }
    let req = match action {
        Action::Skip => Request::skip(&link.question),
        Action::Extend(by) => match Request::extend(&link.question, by) {
            Ok(r) => r,
            Err(why) => return Receipt::Invalid(why),
        },
    };
    match send_request(&ws, &req) {
        Ok(()) => Receipt::Requested(match action {
            Action::Skip => format!(
                "Skipped: the agent goes on with {}.",
                ralph_protocol::fallback_words(q.default.as_deref())
            ),
            Action::Extend(by) => format!("{} more to answer.", describe_span(by)),
        }),
        Err(e) => Receipt::Invalid(format!("could not reach the loop: {e}")),
    }
}

/// Asks the loop in `root` to stop, as `ralph stop` does, when it is one of the loops running
/// on this machine (a path from a request names no other); the words for the asker.
pub(crate) fn stop_loop(root: &Path, by: StopBy) -> Result<String, String> {
    let running = ralph_protocol::registered_loops()
        .into_iter()
        .any(|e| e.root == root);
    let ws = Workspace::new(root);
    if !running || ws.check_not_symlink().is_err() || !ws.is_locked() {
        return Err("That loop is not running.".into());
    }
    ralph_protocol::request_stop(&ws, by)
        .map_err(|e| format!("Could not ask the loop to stop: {e}"))?;
    Ok(format!(
        "Asked the loop in {} to stop: the agent is stopped and the state saved; `ralph run` there resumes it.",
        project_name(root)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer of only NULs passed the "empty" check, and duplicate picks (`1,1`) were
    /// taken, from the page and Telegram (which answer through `compose_answer`).
    #[test]
    fn control_characters_only_are_empty_and_a_pick_counts_once() {
        use ralph_protocol::{Question, QuestionOption, Refusal, compose_answer};
        let option = |label: &str| QuestionOption {
            label: label.into(),
            description: None,
        };
        let q = Question {
            options: vec![option("Redis"), option("Memcached")],
            multi_select: true,
            ..Question::plain("Which?")
        };
        let nuls = compose_answer(Some(&q), &Reply::Text("\0\0\0".into())).unwrap_err();
        assert_eq!(nuls, Refusal::Empty);
        let twice = compose_answer(Some(&q), &Reply::Picks(vec![1, 1], String::new())).unwrap_err();
        assert_eq!(twice, Refusal::Twice { pick: 1 });
        assert_eq!(
            compose_answer(Some(&q), &Reply::Picks(vec![2, 1], String::new())).unwrap(),
            "Memcached\nRedis"
        );
    }

    /// A POST to a closed link said for days how it was answered, where a GET gives 404.
    #[test]
    fn a_closed_questions_link_goes_quiet_after_a_while() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path());
        std::fs::create_dir_all(ws.dir()).unwrap();
        std::fs::write(ws.state(), "{}").unwrap();
        let link = LinkRecord {
            hash: String::new(),
            root: dir.path().to_path_buf(),
            question: ralph_protocol::QuestionId::from_file("t1"),
        };
        let now = SystemTime::now();
        assert!(
            !closed_long_ago(&link, now),
            "just closed: the page is told how"
        );
        assert!(closed_long_ago(
            &link,
            now + CLOSED_TOLD_FOR + Duration::from_secs(1)
        ));
    }
}
