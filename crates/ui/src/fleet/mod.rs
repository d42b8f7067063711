//! The fleet view: one row per loop on the machine, the ones that need their human first.
//!
//! # Theory of operation
//!
//! [`FleetView`] is a component like the question panel: its owner (the `ralph fleet` command,
//! `ralph status --all --watch`) reads the rows (`ralph_fleet::rows`) whenever a loop's files
//! change and hands them over ([`FleetView::set_rows`]); the view keeps the selection on the
//! same loop as rows move, draws itself with `&self` and a `now`, and answers every key with a
//! [`FleetAction`] its owner carries out. It reads no file and starts no process, so every
//! state is a TestBackend snapshot.
//!
//! Enter on a loop that waits opens its question in the same [`QuestionPanel`] as `ralph run`
//! shows; the panel's answer, skip and "more time" come back as actions for the owner to pass
//! to the question's desk. The countdown shown is the loop's: the view follows the deadline in
//! the loop's state ([`LoopRow::question_deadline`]), so time added from anywhere shows here.
//!
//! The keys are listed on [`FleetView`], where a reader of the crate's API finds them.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ralph_fleet::rows::{LoopRow, RowState};
use ralph_protocol::{Countdown, PendingQuestion, QuestionId, parse_timestamp};

use crate::question_panel::{PanelAction, QuestionPanel};
use crate::theme::Theme;

#[cfg(test)]
mod snapshots;
mod terminal;
mod view;

pub use ralph_fleet::rows::state_words;
pub use terminal::{FleetHost, TICK, leave_fleet_now, run_fleet_plain, run_fleet_tui};
pub use view::row_line;

/// What the owner of the view should do after a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FleetAction {
    /// Nothing changed.
    None,
    /// Something on screen changed: redraw.
    Redraw,
    /// Leave the view; the loops go on.
    Quit,
    /// Open the question waiting in this loop ([`FleetView::open_question`]).
    Open(PathBuf),
    /// Show this loop's diff against its base in the user's pager.
    Diff(PathBuf),
    /// Land this loop.
    Land(PathBuf),
    /// Ask this loop to stop.
    Stop(PathBuf),
    /// Run this failed or stopped loop again, in its own directory.
    Retry(PathBuf),
    /// Answer the question `id` of the loop in `root` with `text` (encoded as every front end
    /// encodes a pick and a note).
    Answer {
        /// The loop.
        root: PathBuf,
        /// The question.
        id: QuestionId,
        /// The answer.
        text: String,
    },
    /// Skip the question: the agent goes with its default or best guess.
    Skip {
        /// The loop.
        root: PathBuf,
        /// The question.
        id: QuestionId,
    },
    /// Ask the loop for more time to answer.
    Extend {
        /// The loop.
        root: PathBuf,
        /// The question.
        id: QuestionId,
        /// How much.
        by: Duration,
    },
}

/// A question opened from the list.
#[derive(Debug)]
struct Open {
    root: PathBuf,
    id: QuestionId,
    panel: QuestionPanel,
    /// The deadline the countdown was last built from, to add what the loop adds later.
    deadline: Option<SystemTime>,
}

/// The fleet view: rows, a selection, and the question opened from them.
///
/// # Keys
///
/// | key | list | question open |
/// | --- | --- | --- |
/// | `Up`/`Down`, `k`/`j` | select a loop | the panel's keys |
/// | `Enter` | open the selected loop's question; on another loop, its row's second line whole | send the answer |
/// | `d` | the loop's diff, in the pager | |
/// | `l` | land it | |
/// | `x` | stop it | |
/// | `r` | retry a failed or stopped loop | |
/// | `Esc` | quit | skip the question |
/// | `q` | quit (the loops go on) | |
/// | `Ctrl+C` | quit | back to the list, the question left waiting |
#[derive(Debug)]
pub struct FleetView {
    rows: Vec<LoopRow>,
    /// The selected loop's root: the selection follows the loop as rows move.
    selected: Option<PathBuf>,
    open: Option<Open>,
    /// A line about the last action ("Asked … to stop."), shown under the rows.
    note: Option<String>,
    theme: Theme,
}

impl FleetView {
    /// An empty view, drawn with `theme`.
    pub fn new(theme: Theme) -> Self {
        FleetView {
            rows: Vec::new(),
            selected: None,
            open: None,
            note: None,
            theme,
        }
    }

    /// The rows shown, in order.
    pub fn rows(&self) -> &[LoopRow] {
        &self.rows
    }

    /// The selected row, if any.
    pub fn selected(&self) -> Option<&LoopRow> {
        let root = self.selected.as_ref()?;
        self.rows.iter().find(|r| &r.root == root)
    }

    /// Whether a question is open.
    pub fn question_open(&self) -> bool {
        self.open.is_some()
    }

    /// New rows (already in order). The selection stays on its loop; with none, the first row
    /// is selected. An open question whose loop no longer waits on it closes.
    pub fn set_rows(&mut self, rows: Vec<LoopRow>, now: Instant) {
        self.rows = rows;
        if !self
            .selected
            .as_ref()
            .is_some_and(|s| self.rows.iter().any(|r| &r.root == s))
        {
            self.selected = self.rows.first().map(|r| r.root.clone());
        }
        let Some(open) = &mut self.open else {
            return;
        };
        let row = self.rows.iter().find(|r| r.root == open.root);
        let still = row.is_some_and(|r| r.question_id.as_deref() == Some(open.id.as_str()));
        if !still {
            let name = row.map(LoopRow::name).unwrap_or_default();
            self.note = Some(format!(
                "The question of {name} is no longer waiting (answered, skipped or its loop ended)."
            ));
            self.open = None;
            return;
        }
        // Time added by the loop (from here, the page, the bot): the countdown gets it too.
        let deadline = row
            .and_then(|r| r.question_deadline.as_deref())
            .and_then(parse_timestamp);
        if let (Some(new), Some(old)) = (deadline, open.deadline)
            && let Ok(added) = new.duration_since(old)
            && !added.is_zero()
        {
            let mut countdown = open.panel.countdown().clone();
            countdown.extend(added, now);
            open.panel.show_countdown(countdown, now);
            open.deadline = Some(new);
        }
    }

    /// Opens `pending`, the question waiting in the loop at `root`, in the question panel, at
    /// `now` (and `wall`, the same moment by the wall clock, which the deadline is in).
    pub fn open_question(
        &mut self,
        root: &Path,
        pending: &PendingQuestion,
        now: Instant,
        wall: SystemTime,
    ) {
        let deadline = pending.deadline_time();
        let wait = match (pending.timed_out, deadline) {
            (true, _) => Some(Duration::ZERO),
            (false, Some(d)) => Some(d.duration_since(wall).unwrap_or_default()),
            (false, None) => None,
        };
        let asked_at = pending.asked_at_time().unwrap_or_else(SystemTime::now);
        let panel = QuestionPanel::new(
            pending.question.clone(),
            Countdown::new(wait, now),
            asked_at,
            now,
        )
        .with_theme(self.theme.clone());
        self.note = None;
        self.open = Some(Open {
            root: root.to_path_buf(),
            id: pending.id.clone(),
            panel,
            deadline,
        });
    }

    /// Closes the open question, if any, back to the list.
    pub fn close_question(&mut self) {
        self.open = None;
    }

    /// Shows `note` under the rows until the next action.
    pub fn set_note(&mut self, note: impl Into<String>) {
        self.note = Some(note.into());
    }

    /// The next instant the view changes by itself (an open question's countdown ticks).
    pub fn next_redraw(&self, now: Instant) -> Option<Instant> {
        self.open.as_ref().and_then(|o| o.panel.next_redraw(now))
    }

    /// A key. See [`FleetView`](FleetView#keys) for what each does.
    pub fn handle_key(&mut self, key: KeyEvent, now: Instant) -> FleetAction {
        if key.kind == KeyEventKind::Release {
            return FleetAction::None;
        }
        let ctrl_c =
            key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c');
        if let Some(open) = &mut self.open {
            if ctrl_c {
                self.open = None;
                return FleetAction::Redraw;
            }
            return match open.panel.handle_key(key, now) {
                PanelAction::Submit(text) => FleetAction::Answer {
                    root: open.root.clone(),
                    id: open.id.clone(),
                    text,
                },
                PanelAction::Skip => FleetAction::Skip {
                    root: open.root.clone(),
                    id: open.id.clone(),
                },
                PanelAction::Extend => FleetAction::Extend {
                    root: open.root.clone(),
                    id: open.id.clone(),
                    by: ralph_protocol::EXTEND_BY,
                },
                PanelAction::None => FleetAction::None,
                // The countdown is the loop's, in another process: typing cannot pause it
                // from here, and the panel redraws what it changed.
                PanelAction::Typing | PanelAction::Redraw | PanelAction::RefusedEmpty => {
                    FleetAction::Redraw
                }
            };
        }
        if ctrl_c {
            return FleetAction::Quit;
        }
        let Some(row) = self.selected().cloned() else {
            return match key.code {
                KeyCode::Char('q') | KeyCode::Esc => FleetAction::Quit,
                _ => FleetAction::None,
            };
        };
        let root = row.root.clone();
        match key.code {
            KeyCode::Up | KeyCode::Char('k') => self.step(-1),
            KeyCode::Down | KeyCode::Char('j') => self.step(1),
            KeyCode::Home => self.select_index(0),
            KeyCode::End => self.select_index(self.rows.len().saturating_sub(1)),
            KeyCode::Char('q') | KeyCode::Esc => FleetAction::Quit,
            KeyCode::Enter if row.state == RowState::NeedsYou => FleetAction::Open(root),
            // What the row's second line cuts to the width (a reason, the command that
            // finishes a landing), whole.
            KeyCode::Enter => self.refuse(view::whole_detail(&row)),
            KeyCode::Char('d') if row.diff.is_some() => FleetAction::Diff(root),
            KeyCode::Char('d') => self.refuse(format!(
                "{} has no diff to show: not in a git repository, or not started.",
                row.name()
            )),
            KeyCode::Char('l') if landable(row.state) && row.branch.is_some() => {
                FleetAction::Land(root)
            }
            KeyCode::Char('l') => self.refuse(format!(
                "Only a done loop in a worktree lands; {}: {}.",
                row.name(),
                state_words(&row)
            )),
            KeyCode::Char('x') if row.running => FleetAction::Stop(root),
            KeyCode::Char('x') => self.refuse(format!("{} is not running.", row.name())),
            KeyCode::Char('r') if retriable(&row) => FleetAction::Retry(root),
            KeyCode::Char('r') => self.refuse(format!(
                "Only a failed or stopped loop runs again; {}: {}.",
                row.name(),
                state_words(&row)
            )),
            _ => FleetAction::None,
        }
    }

    /// Text pasted into an open question's editor.
    pub fn handle_paste(&mut self, text: &str) -> FleetAction {
        match &mut self.open {
            Some(open) => match open.panel.handle_paste(text) {
                PanelAction::None => FleetAction::None,
                _ => FleetAction::Redraw,
            },
            None => FleetAction::None,
        }
    }

    fn refuse(&mut self, why: String) -> FleetAction {
        self.note = Some(why);
        FleetAction::Redraw
    }

    fn step(&mut self, by: isize) -> FleetAction {
        let at = self
            .selected
            .as_ref()
            .and_then(|s| self.rows.iter().position(|r| &r.root == s))
            .unwrap_or(0);
        let to = at
            .saturating_add_signed(by)
            .min(self.rows.len().saturating_sub(1));
        self.select_index(to)
    }

    fn select_index(&mut self, i: usize) -> FleetAction {
        self.selected = self.rows.get(i).map(|r| r.root.clone());
        self.note = None;
        FleetAction::Redraw
    }
}

/// Whether `l` lands a loop in this state.
fn landable(state: RowState) -> bool {
    matches!(
        state,
        RowState::Done | RowState::NeedsLand | RowState::NeedsReview
    )
}

/// Whether `r` runs a loop in this state again: it ended without its work done, and no
/// process runs it.
fn retriable(row: &LoopRow) -> bool {
    !row.running && matches!(row.state, RowState::Failed | RowState::Stopped)
}
