//! The panel's keys: what each does to the panel, and the [`PanelAction`] it asks of the loop.

use std::time::Instant;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ralph_protocol::EXTEND_BY;

use super::{Focus, PanelAction, QuestionPanel, clean_paste};

impl QuestionPanel {
    /// Handles a key press.
    pub fn handle_key(&mut self, key: KeyEvent, now: Instant) -> PanelAction {
        if key.kind == KeyEventKind::Release || self.closed.is_some() {
            return PanelAction::None;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        let shift = key.modifiers.contains(KeyModifiers::SHIFT);
        let digit_pick = self.digit_pick.take();
        match key.code {
            KeyCode::Esc => return PanelAction::Skip,
            KeyCode::Char('c' | 'C') if ctrl => return PanelAction::None,
            KeyCode::Char('e' | 'E') if ctrl => return self.extend(now),
            KeyCode::Enter if alt || shift || ctrl => return self.newline(),
            KeyCode::Char('j' | 'J') if ctrl => return self.newline(),
            KeyCode::Enter => return self.submit(),
            KeyCode::Tab | KeyCode::BackTab if !self.options.is_empty() && !ctrl && !alt => {
                let focus = match self.focus {
                    Focus::Options => Focus::Editor,
                    Focus::Editor => Focus::Options,
                };
                self.set_focus(focus);
                return self.typed();
            }
            KeyCode::PageUp => return self.scroll_by(-1),
            KeyCode::PageDown => return self.scroll_by(1),
            _ => {}
        }
        let plain = !ctrl && !alt;
        if let (KeyCode::Char(c), Some((first, before, cursor))) = (key.code, digit_pick)
            && plain
            && c.is_ascii_digit()
            && self.digit_option(c).is_none()
            && self.editor.get_mut().is_empty()
        {
            // Not a second pick but a number: the first digit's pick is undone.
            self.chosen = before;
            self.cursor = cursor;
            self.set_focus(Focus::Editor);
            self.editor.get_mut().insert_char(first);
            self.editor.get_mut().insert_char(c);
            return self.typed();
        }
        match self.focus {
            Focus::Options => self.options_key(key, plain),
            Focus::Editor => self.editor_key(key, plain),
        }
    }

    /// Picks the option digit `c` names, remembering what was picked before (see
    /// `digit_pick`).
    fn pick_digit(&mut self, c: char, i: usize) {
        self.digit_pick = Some((c, self.chosen.clone(), self.cursor));
        self.pick(i);
    }

    /// Handles pasted text (bracketed paste): it goes into the editor as typed.
    pub fn handle_paste(&mut self, text: &str) -> PanelAction {
        if self.closed.is_some() {
            return PanelAction::None;
        }
        self.digit_pick = None;
        let text = clean_paste(text);
        if text.is_empty() {
            return PanelAction::None;
        }
        self.set_focus(Focus::Editor);
        self.editor.get_mut().insert_str(text);
        self.typed()
    }

    fn options_key(&mut self, key: KeyEvent, plain: bool) -> PanelAction {
        let last = self.options.len().saturating_sub(1);
        match key.code {
            KeyCode::Up => self.cursor = self.cursor.saturating_sub(1),
            KeyCode::Down if self.cursor >= last => self.set_focus(Focus::Editor),
            KeyCode::Down => self.cursor += 1,
            KeyCode::Home => self.cursor = 0,
            KeyCode::End => self.cursor = last,
            KeyCode::Char(' ') if plain => self.pick(self.cursor),
            KeyCode::Char(c) if plain && self.digit_option(c).is_some() => {
                self.pick_digit(c, self.digit_option(c).unwrap_or_default());
            }
            KeyCode::Backspace => self.chosen[self.cursor] = false,
            KeyCode::Char(c) if plain => {
                // Typing in the list means answering in words.
                self.set_focus(Focus::Editor);
                self.editor.get_mut().insert_char(c);
            }
            _ => return PanelAction::None,
        }
        self.typed()
    }

    fn editor_key(&mut self, key: KeyEvent, plain: bool) -> PanelAction {
        let empty = self.editor.get_mut().is_empty();
        match key.code {
            KeyCode::Char(c) if plain && empty && self.digit_option(c).is_some() => {
                self.pick_digit(c, self.digit_option(c).unwrap_or_default());
                return self.typed();
            }
            KeyCode::Char(' ')
                if plain && empty && self.question.multi_select && !self.options.is_empty() =>
            {
                self.pick(self.cursor);
                return self.typed();
            }
            KeyCode::Up
                if plain && !self.options.is_empty() && self.editor.get_mut().cursor().0 == 0 =>
            {
                self.cursor = self.options.len() - 1;
                self.set_focus(Focus::Options);
                return self.typed();
            }
            _ => {}
        }
        let before = self.editor.get_mut().cursor();
        if self.editor.get_mut().input(key) {
            self.typed()
        } else if self.editor.get_mut().cursor() != before {
            // Moving the cursor means the person is at the keyboard.
            self.typed()
        } else {
            PanelAction::None
        }
    }

    /// The option index a digit key refers to, if the question has that many options.
    fn digit_option(&self, c: char) -> Option<usize> {
        let n = c.to_digit(10)? as usize;
        self.question.resolve_option(n).map(|_| n - 1)
    }

    /// Picks option `i`: toggles it in a multi-select, makes it the only pick otherwise.
    fn pick(&mut self, i: usize) {
        if i >= self.options.len() {
            return;
        }
        if self.question.multi_select {
            self.chosen[i] = !self.chosen[i];
        } else {
            let was = self.chosen[i];
            self.chosen.iter_mut().for_each(|c| *c = false);
            self.chosen[i] = !was;
        }
        self.cursor = i;
    }

    fn newline(&mut self) -> PanelAction {
        self.set_focus(Focus::Editor);
        self.editor.get_mut().insert_newline();
        self.typed()
    }

    fn extend(&mut self, now: Instant) -> PanelAction {
        if !self.can_extend(now) {
            return PanelAction::None;
        }
        let granted = self.countdown.extended_by();
        self.extension_asked = Some(self.extension_asked.unwrap_or(granted) + EXTEND_BY);
        PanelAction::Extend
    }

    /// Whether the loop's countdown takes an extension: not without a deadline, nor once
    /// it has run out.
    pub(super) fn can_extend(&self, now: Instant) -> bool {
        self.countdown.total().is_some() && !self.countdown.expired(now)
    }

    fn submit(&mut self) -> PanelAction {
        if self.focus == Focus::Options && !self.options.is_empty() {
            // Enter on the list sends what is highlighted, like any menu.
            if !self.question.multi_select {
                self.chosen.iter_mut().for_each(|c| *c = false);
                self.chosen[self.cursor] = true;
            } else if !self.chosen.contains(&true) {
                self.chosen[self.cursor] = true;
            }
        }
        match self.unsent() {
            Some(answer) => PanelAction::Submit(answer),
            None => {
                self.refused = true;
                PanelAction::RefusedEmpty
            }
        }
    }

    fn scroll_by(&mut self, pages: isize) -> PanelAction {
        let (shown, total) = self.last_body.get();
        let page = shown.saturating_sub(1).max(1);
        let max = total.saturating_sub(shown);
        let scroll = if pages < 0 {
            self.scroll.saturating_sub(page)
        } else {
            (self.scroll + page).min(max)
        };
        if scroll == self.scroll {
            return PanelAction::None;
        }
        self.scroll = scroll;
        PanelAction::Redraw
    }

    /// The person did something: drop the empty-answer hint, and ask the loop to pause the
    /// countdown.
    fn typed(&mut self) -> PanelAction {
        self.refused = false;
        PanelAction::Typing
    }
}
