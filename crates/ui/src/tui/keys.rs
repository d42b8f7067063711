//! What the person's keys do: answer the question through the panel, or stop the loop.
//!
//! With a question open, keys go to the [`QuestionPanel`](crate::QuestionPanel) and its
//! actions become [`Control`]s: an answer, a skip, "typing" (hold the countdown), "more time".
//! The last two are requests: the panel shows their effect when the loop sends its countdown
//! back.
//! `Ctrl+C` is the loop view's own: the first stops the loop gracefully and the second kills
//! the agent; with a question open the first asks before stopping, because stopping leaves
//! the question pending and a stray `Ctrl+C` should not throw away a half-typed answer.

use std::time::Instant;

use ralph_protocol::Control;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use crate::PanelAction;
use crate::tui::app::{App, Sending, Stop};

impl App {
    /// Applies a key press; the control to send to the loop, if any.
    pub(super) fn on_key(&mut self, key: KeyEvent, now: Instant) -> Option<Control> {
        if key.kind == KeyEventKind::Release || self.is_done() {
            return None;
        }
        let ctrl_c = matches!(key.code, KeyCode::Char('c' | 'C'))
            && key.modifiers.contains(KeyModifiers::CONTROL);
        if self.confirm_stop {
            self.confirm_stop = false;
            // Anything but yes keeps waiting; a second Ctrl+C means yes.
            let yes = ctrl_c || matches!(key.code, KeyCode::Char('y' | 'Y'));
            return yes.then(|| self.stop_now());
        }
        if ctrl_c {
            return match self.stop {
                Stop::Running if self.question.is_some() => {
                    self.confirm_stop = true;
                    None
                }
                Stop::Running => Some(self.stop_now()),
                Stop::Stopping | Stop::Killing => {
                    self.stop = Stop::Killing;
                    Some(Control::Kill)
                }
            };
        }
        if self.stop != Stop::Running {
            return None;
        }
        let q = self.question.as_mut()?;
        if q.sending.is_some() {
            return None;
        }
        let action = q.panel.handle_key(key, now);
        self.act(action)
    }

    /// Applies pasted text; the control to send, if any.
    pub(super) fn on_paste(&mut self, text: &str) -> Option<Control> {
        if self.confirm_stop {
            self.confirm_stop = false;
            return None;
        }
        if self.stop != Stop::Running || self.is_done() {
            return None;
        }
        let q = self.question.as_mut()?;
        if q.sending.is_some() {
            return None;
        }
        let action = q.panel.handle_paste(text);
        self.act(action)
    }

    fn stop_now(&mut self) -> Control {
        self.stop = Stop::Stopping;
        Control::Stop
    }

    fn act(&mut self, action: PanelAction) -> Option<Control> {
        let q = self.question.as_mut()?;
        match action {
            PanelAction::Submit(text) => {
                q.sending = Some(Sending::Answer);
                q.refused = None;
                Some(Control::Answer(text))
            }
            PanelAction::Skip => {
                q.sending = Some(Sending::Skip);
                q.refused = None;
                Some(Control::Skip)
            }
            PanelAction::Typing => {
                q.refused = None;
                Some(Control::Typing)
            }
            PanelAction::Extend => Some(Control::Extend),
            PanelAction::None | PanelAction::Redraw | PanelAction::RefusedEmpty => None,
        }
    }
}
