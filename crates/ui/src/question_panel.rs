//! The question panel: the agent's question, suggested answers, an editor and a countdown.
//!
//! # Theory of operation
//!
//! The panel is a component, not an app: the loop view owns it, feeds it key and paste
//! events, draws it into part of the screen, and acts on the [`PanelAction`] each event
//! returns. State and update live here; drawing is in `question_view`, and takes `&self`.
//!
//! Time is always passed in. The countdown shown is the loop's: the loop owns the question's
//! [`Countdown`] and sends it when the question opens and each time it changes
//! ([`QuestionPanel::show_countdown`]). The panel never changes it. A key that should pause
//! it ([`PanelAction::Typing`]) or add time ([`PanelAction::Extend`]) is a request the caller
//! forwards to the loop; the panel shows the pause or the new deadline once the loop sends
//! its countdown back. Until then an asked extension shows as pending ("asking for +5m"),
//! never as time the loop has not granted.
//!
//! # Keys
//!
//! Focus is on the option list when the question has options, otherwise on the editor.
//! `Tab` (or `Shift+Tab`) moves between them; typing a letter in the option list moves to the
//! editor with that letter.
//!
//! | key | option list | editor |
//! | --- | --- | --- |
//! | `Enter` | send the highlighted option (multi-select: the toggled ones, or the highlighted one if none) plus any note | send the picked option(s) plus the text, or the text alone |
//! | `1`-`9` | pick (multi-select: toggle) that option; again to unpick | same, while the editor is empty; otherwise types the digit |
//! | a digit that names no option, right after a digit picked one | undoes that pick and types both digits (`16` is an answer, not option 1 and the note `6`) | same |
//! | `Space` | pick (multi-select: toggle) the highlighted option | multi-select with an empty editor: toggle the highlighted option; otherwise a space |
//! | `Up`/`Down` | move the highlight; `Down` past the last option enters the editor | move in the text; `Up` on the first row goes to the option list |
//! | `Alt+Enter`, `Shift+Enter`, `Ctrl+J` | newline in the editor | newline |
//! | `PgUp`/`PgDn` | scroll a long question | same |
//! | `Ctrl+E` | five more minutes | same |
//! | `Esc` | skip: the agent goes with its default or best guess | same |
//!
//! A picked option can be annotated: pick it, then type in the editor; the answer becomes
//! `Redis: with a 5-minute TTL` (or the label, a newline and the text, for a multi-line note).
//!
//! Multi-line pastes only stay in the editor if the terminal uses bracketed paste (the loop
//! view enables it): otherwise each pasted newline arrives as `Enter` and sends the answer.
//! `Ctrl+C` is left to the caller.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant, SystemTime};

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ralph_protocol::countdown::{Countdown, EXTEND_BY};
use ralph_protocol::desk::Ended;
use ralph_protocol::question::Question;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui_textarea::{TextArea, WrapMode};

use crate::theme::Theme;
use crate::wrap::{Para, wrap};
use crate::{countdown_view, markdown};

/// What the caller should do after an event reached the panel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PanelAction {
    /// Nothing changed.
    None,
    /// The person answered; the text is what the agent receives.
    Submit(String),
    /// The person skipped the question (`Esc`): the agent goes with its default or best guess.
    Skip,
    /// The person asked for more time (`Ctrl+E`): ask the loop to extend its countdown by
    /// [`EXTEND_BY`]. The panel shows the extension as pending until the loop's countdown
    /// comes back with it. Redraw.
    Extend,
    /// The person is active (typing, picking): ask the loop to pause its countdown. Redraw.
    Typing,
    /// Something on screen changed without the person answering (scrolling). Redraw.
    Redraw,
    /// The person tried to send an empty answer; the panel now shows a hint. Redraw.
    RefusedEmpty,
}

/// Which part of the panel takes keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Focus {
    Options,
    Editor,
}

/// The question panel: state and update. See the [module docs](self) for the keys.
#[derive(Debug)]
pub struct QuestionPanel {
    pub(crate) question: Question,
    /// The loop's countdown, as the loop last sent it.
    pub(crate) countdown: Countdown,
    /// What the loop's countdown will have been extended by once the extensions asked for
    /// (`Ctrl+E`) and not yet sent back arrive; `None` when none waits.
    pub(crate) extension_asked: Option<Duration>,
    pub(crate) theme: Theme,
    asked_at: SystemTime,
    /// When the panel opened, and how long before that the question was asked: the age shown
    /// in the title is `now - opened + age_at_open`, so it follows the injected clock.
    opened: Instant,
    age_at_open: Duration,
    /// The question, context and notes, sanitized and parsed once.
    pub(crate) body: Vec<Para>,
    /// Option labels and descriptions, sanitized.
    pub(crate) options: Vec<(String, Option<String>)>,
    /// The answer being typed. In a cell so that drawing, which has the panel to read, can
    /// also settle the editor's scroll to the area it is drawn into (see `render_editor`).
    pub(crate) editor: RefCell<TextArea<'static>>,
    pub(crate) focus: Focus,
    /// The highlighted option (0-based).
    pub(crate) cursor: usize,
    /// Picked options, by index.
    pub(crate) chosen: Vec<bool>,
    /// The last send was refused as empty; cleared by the next edit.
    pub(crate) refused: bool,
    /// The digit the last key was, if it picked an option in an empty editor, and the picks
    /// before it: a digit right after it that picks nothing makes both the start of a typed
    /// answer, so that `16` is not option 1 with the note `6`.
    digit_pick: Option<(char, Vec<bool>, usize)>,
    pub(crate) closed: Option<Ended>,
    /// First body row shown when the question is taller than its share of the screen.
    pub(crate) scroll: usize,
    /// Body rows shown by the last render and the body's total rows at that width; paging
    /// needs them and the caller owns the layout.
    pub(crate) last_body: Cell<(usize, usize)>,
    /// The body wrapped at the last width asked for (wrapping a big question on every frame
    /// would be wasted work).
    pub(crate) wrapped: RefCell<Option<(u16, Vec<Line<'static>>)>>,
}

impl QuestionPanel {
    /// Opens a panel for `question`, asked at `asked_at`, showing the loop's `countdown`.
    ///
    /// Uses the colour theme; see [`QuestionPanel::with_theme`].
    pub fn new(
        question: Question,
        countdown: Countdown,
        asked_at: SystemTime,
        now: Instant,
    ) -> Self {
        // The one clock read: how long ago the question was asked, so the title's age follows
        // the injected `now` from here on.
        let age_at_open = SystemTime::now()
            .duration_since(asked_at)
            .unwrap_or_default();
        let theme = Theme::default();
        let options: Vec<(String, Option<String>)> = question
            .options
            .iter()
            .map(|o| (clean(&o.label), o.description.as_deref().map(clean)))
            .collect();
        let focus = if options.is_empty() {
            Focus::Editor
        } else {
            Focus::Options
        };
        let cursor = question.default_option().unwrap_or(0);
        let mut panel = Self {
            body: Vec::new(),
            chosen: vec![false; options.len()],
            options,
            question,
            countdown,
            extension_asked: None,
            theme,
            asked_at,
            opened: now,
            age_at_open,
            editor: RefCell::default(),
            focus,
            cursor,
            refused: false,
            digit_pick: None,
            closed: None,
            scroll: 0,
            last_body: Cell::new((0, 0)),
            wrapped: RefCell::new(None),
        };
        panel.restyle();
        panel
    }

    /// The same panel drawn with `theme` (use [`Theme::from_env`] to honour `NO_COLOR`).
    #[must_use]
    pub fn with_theme(mut self, theme: Theme) -> Self {
        self.theme = theme;
        self.restyle();
        self
    }

    /// The question being asked.
    pub fn question(&self) -> &Question {
        &self.question
    }

    /// The loop's countdown, as the loop last sent it.
    pub fn countdown(&self) -> &Countdown {
        &self.countdown
    }

    /// The loop sent its countdown (it changed: paused while the person types, extended, from
    /// here or from elsewhere): show it. An extension asked for here stops being pending
    /// once the loop's countdown has it, or can no longer be extended.
    pub fn show_countdown(&mut self, countdown: Countdown, now: Instant) {
        self.countdown = countdown;
        if self
            .extension_asked
            .is_some_and(|target| self.countdown.extended_by() >= target || !self.can_extend(now))
        {
            self.extension_asked = None;
        }
    }

    /// How much time asked for here the loop has not granted yet, if any.
    pub fn extension_pending(&self) -> Option<Duration> {
        self.extension_asked
            .map(|target| target.saturating_sub(self.countdown.extended_by()))
            .filter(|d| !d.is_zero())
    }

    /// When the question was asked.
    pub fn asked_at(&self) -> SystemTime {
        self.asked_at
    }

    /// How long ago the question was asked, at `now`.
    pub fn age(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.opened) + self.age_at_open
    }

    /// How the question was closed, if it was.
    pub fn closed(&self) -> Option<&Ended> {
        self.closed.as_ref()
    }

    /// The text typed so far (without any picked option).
    pub fn draft(&self) -> String {
        self.editor.borrow().lines().join("\n")
    }

    /// The answer the options picked and the text typed so far make (what Enter sends, once
    /// it has marked the highlighted option), or `None` if the human has done nothing (a
    /// highlight alone is not a pick): what is lost, unless said, when the question closes
    /// some other way.
    pub fn unsent(&self) -> Option<String> {
        let labels: Vec<&str> = self
            .question
            .options
            .iter()
            .zip(&self.chosen)
            .filter(|(_, chosen)| **chosen)
            .map(|(o, _)| o.label.as_str())
            .collect();
        let answer = ralph_protocol::desk::encode(&labels, &self.draft());
        (!answer.is_empty()).then_some(answer)
    }

    /// Marks the question closed: input stops and a closing line replaces the editor and the
    /// countdown.
    pub fn set_closed(&mut self, how: Ended) {
        self.closed = Some(how);
        self.extension_asked = None;
        self.refused = false;
        self.editor.get_mut().set_cursor_style(Style::new());
    }

    /// The next instant the panel looks different by itself (the countdown ticks a second,
    /// pauses, resumes or runs out), so the caller can redraw then instead of polling.
    /// `None` when nothing changes without an event.
    pub fn next_redraw(&self, now: Instant) -> Option<Instant> {
        if self.closed.is_some() {
            return None;
        }
        let countdown = countdown_view::next_change(&self.countdown, now);
        // The title's "asked 12s ago" changes once a second in its first minute, then
        // "asked 3m ago" once a minute.
        let age = self.age(now);
        let step = match age < Duration::from_secs(60) {
            true => Duration::from_secs(1),
            false => Duration::from_secs(60),
        };
        let to_next_step = step - Duration::from_nanos((age.as_nanos() % step.as_nanos()) as u64);
        let age_tick = now + to_next_step;
        Some(match countdown {
            // A countdown redraws within the second anyway, and the age with it: no second
            // redraw a moment before or after.
            Some(c) if c <= now + Duration::from_secs(1) => c,
            Some(c) => c.min(age_tick),
            None => age_tick,
        })
    }

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
    fn can_extend(&self, now: Instant) -> bool {
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

    fn set_focus(&mut self, focus: Focus) {
        self.focus = focus;
        self.restyle_editor();
    }

    /// Rebuilds everything that depends on the theme.
    fn restyle(&mut self) {
        self.body = body_paras(&self.question, &self.theme);
        self.wrapped.replace(None);
        self.editor.get_mut().set_wrap_mode(WrapMode::WordOrGlyph);
        self.editor.get_mut().set_cursor_line_style(Style::new());
        self.editor.get_mut().set_style(self.theme.text);
        self.editor
            .get_mut()
            .set_placeholder_style(self.theme.placeholder);
        let placeholder = if self.options.is_empty() {
            "Type your answer"
        } else {
            "Type your own answer, or a note for the picked option"
        };
        self.editor.get_mut().set_placeholder_text(placeholder);
        self.restyle_editor();
    }

    fn restyle_editor(&mut self) {
        let cursor = if self.focus == Focus::Editor && self.closed.is_none() {
            self.theme
                .text
                .add_modifier(ratatui::style::Modifier::REVERSED)
        } else {
            Style::new()
        };
        self.editor.get_mut().set_cursor_style(cursor);
    }

    /// The body wrapped to `width`, from the cache when the width has not changed.
    pub(crate) fn wrapped_body(&self, width: u16) -> std::cell::Ref<'_, Vec<Line<'static>>> {
        let stale = !matches!(&*self.wrapped.borrow(), Some((w, _)) if *w == width);
        if stale {
            self.wrapped.replace(Some((width, wrap(&self.body, width))));
        }
        std::cell::Ref::map(self.wrapped.borrow(), |cached| match cached {
            Some((_, lines)) => lines,
            None => unreachable!("the cache was just filled"),
        })
    }
}

/// Strips terminal control sequences and invisible format characters from agent-written text
/// (`ralph_protocol::text::clean`) and expands tabs, which a terminal cell cannot hold.
pub(crate) fn clean(text: &str) -> String {
    ralph_protocol::text::clean(text).replace('\t', "    ")
}

/// A person's paste: line ends normalized, control characters other than newline and tab
/// dropped (a paste can carry escape sequences copied from a terminal).
fn clean_paste(text: &str) -> String {
    text.replace("\r\n", "\n")
        .replace('\r', "\n")
        .chars()
        .filter(|&c| c == '\n' || c == '\t' || !c.is_control())
        .collect()
}

/// The question's markdown, its context, the default when it is not one of the options, and
/// any warning about the file.
fn body_paras(question: &Question, theme: &Theme) -> Vec<Para> {
    let text = clean(&question.text);
    let mut paras = if question.warning.is_some() && text.starts_with("---") {
        // The frontmatter did not parse and the raw file is the question: show it as the
        // agent wrote it, since markdown would turn its fences into rules and headings.
        text.lines()
            .map(|line| Para::text(vec![Span::styled(line.to_owned(), theme.text)]))
            .collect()
    } else {
        markdown::render(&text, theme)
    };
    if question.text.trim().is_empty() {
        paras.push(Para::text(vec![Span::styled(
            "(the agent asked without writing a question)",
            theme.dim,
        )]));
    }
    let mut notes: Vec<Para> = Vec::new();
    if let Some(context) = question
        .context
        .as_deref()
        .map(clean)
        .filter(|c| !c.trim().is_empty())
    {
        for line in context.trim().lines() {
            notes.push(Para::text(vec![Span::styled(line.to_owned(), theme.dim)]));
        }
    }
    if let Some(default) = &question.default
        && question.default_option().is_none()
    {
        notes.push(Para::hanging(
            vec![Span::styled("If you don't answer: ", theme.dim)],
            vec![Span::styled(clean(default), theme.dim)],
        ));
    }
    if let Some(warning) = &question.warning {
        for line in clean(warning).lines() {
            notes.push(Para::hanging(
                vec![Span::styled("! ", theme.warning)],
                vec![Span::styled(line.to_owned(), theme.warning)],
            ));
        }
    }
    if !notes.is_empty() && !paras.is_empty() {
        paras.push(Para::blank());
    }
    paras.extend(notes);
    paras
}

#[cfg(test)]
mod tests {
    use ralph_protocol::event::Control;
    use ralph_protocol::question::QuestionOption;

    use super::*;

    const fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn ctrl(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
    }

    fn question(options: &[&str], multi: bool) -> Question {
        Question {
            options: options.iter().map(|o| QuestionOption::new(*o)).collect(),
            multi_select: multi,
            ..Question::plain("Which cache?")
        }
    }

    fn panel(q: Question, t0: Instant) -> QuestionPanel {
        QuestionPanel::new(
            q,
            Countdown::new(Some(secs(300)), t0),
            SystemTime::now(),
            t0,
        )
    }

    fn type_str(p: &mut QuestionPanel, s: &str, now: Instant) {
        for c in s.chars() {
            p.handle_key(key(KeyCode::Char(c)), now);
        }
    }

    #[test]
    fn enter_sends_free_text() {
        let t0 = Instant::now();
        let mut p = panel(question(&[], false), t0);
        type_str(&mut p, "use Redis", t0);
        assert_eq!(
            p.handle_key(key(KeyCode::Enter), t0),
            PanelAction::Submit("use Redis".into())
        );
    }

    #[test]
    fn empty_answer_is_refused_with_a_hint_until_the_next_edit() {
        let t0 = Instant::now();
        let mut p = panel(question(&[], false), t0);
        assert_eq!(
            p.handle_key(key(KeyCode::Enter), t0),
            PanelAction::RefusedEmpty
        );
        assert!(p.refused);
        type_str(&mut p, "   ", t0);
        assert!(!p.refused);
        assert_eq!(
            p.handle_key(key(KeyCode::Enter), t0),
            PanelAction::RefusedEmpty
        );
    }

    #[test]
    fn alt_enter_shift_enter_and_ctrl_j_insert_newlines() {
        let t0 = Instant::now();
        let mut p = panel(question(&[], false), t0);
        type_str(&mut p, "a", t0);
        assert_eq!(
            p.handle_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT), t0),
            PanelAction::Typing
        );
        type_str(&mut p, "b", t0);
        p.handle_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::SHIFT), t0);
        type_str(&mut p, "c", t0);
        assert_eq!(p.handle_key(ctrl('j'), t0), PanelAction::Typing);
        type_str(&mut p, "d", t0);
        assert_eq!(
            p.handle_key(key(KeyCode::Enter), t0),
            PanelAction::Submit("a\nb\nc\nd".into())
        );
    }

    #[test]
    fn esc_skips_even_with_text() {
        let t0 = Instant::now();
        let mut p = panel(question(&["a"], false), t0);
        type_str(&mut p, "x", t0);
        assert_eq!(p.handle_key(key(KeyCode::Esc), t0), PanelAction::Skip);
    }

    /// The loop's side of a question: its countdown, changed only as the loop changes it.
    struct Loop(Countdown);

    impl Loop {
        fn new(t0: Instant) -> Self {
            Loop(Countdown::new(Some(secs(300)), t0))
        }

        /// The loop takes `control` and sends its countdown back to the panel.
        fn hears(&mut self, control: &Control, p: &mut QuestionPanel, now: Instant) {
            assert!(control.change_countdown(&mut self.0, now));
            p.show_countdown(self.0.clone(), now);
        }
    }

    #[test]
    fn ctrl_e_asks_the_loop_and_shows_the_time_pending_until_the_loop_grants_it() {
        let t0 = Instant::now();
        let mut p = panel(question(&[], false), t0);
        let mut the_loop = Loop::new(t0);
        let now = t0 + secs(10);
        assert_eq!(p.handle_key(ctrl('e'), now), PanelAction::Extend);
        assert_eq!(p.handle_key(ctrl('e'), now), PanelAction::Extend);
        // Asked, not granted: the time left is the loop's.
        assert_eq!(p.countdown().remaining(now), Some(secs(290)));
        assert_eq!(p.extension_pending(), Some(EXTEND_BY * 2));
        the_loop.hears(&Control::Extend, &mut p, now);
        assert_eq!(p.countdown().remaining(now), Some(secs(590)));
        assert_eq!(p.extension_pending(), Some(EXTEND_BY));
        the_loop.hears(&Control::Extend, &mut p, now);
        assert_eq!(p.countdown().remaining(now), Some(secs(890)));
        assert_eq!(p.extension_pending(), None);
    }

    #[test]
    fn an_extension_the_loop_cannot_grant_stops_being_pending() {
        let t0 = Instant::now();
        let mut p = panel(question(&[], false), t0);
        assert_eq!(p.handle_key(ctrl('e'), t0 + secs(299)), PanelAction::Extend);
        // The deadline passed before the loop heard it: it sends its countdown, run out.
        let mut theirs = Countdown::new(Some(secs(300)), t0);
        Control::Extend.change_countdown(&mut theirs, t0 + secs(300));
        p.show_countdown(theirs, t0 + secs(300));
        assert_eq!(p.extension_pending(), None);
    }

    #[test]
    fn the_loops_countdown_is_shown_whoever_changed_it() {
        let t0 = Instant::now();
        let mut p = panel(question(&[], false), t0);
        // Extended from `ralph serve`'s page: nothing was asked here.
        let mut theirs = Countdown::new(Some(secs(300)), t0);
        theirs.extend(EXTEND_BY, t0 + secs(5));
        p.show_countdown(theirs.clone(), t0 + secs(5));
        assert_eq!(p.countdown(), &theirs);
        assert_eq!(p.extension_pending(), None);
    }

    #[test]
    fn ctrl_e_does_nothing_without_a_deadline_or_after_it() {
        let t0 = Instant::now();
        let mut p = QuestionPanel::new(
            question(&[], false),
            Countdown::new(None, t0),
            SystemTime::now(),
            t0,
        );
        assert_eq!(p.handle_key(ctrl('e'), t0), PanelAction::None);
        let mut p = panel(question(&[], false), t0);
        assert_eq!(p.handle_key(ctrl('e'), t0 + secs(301)), PanelAction::None);
    }

    /// Regression (issue 24): the panel paused a copy of the countdown of its own, which
    /// the loop's and the panel's changes each overwrote.
    #[test]
    fn typing_asks_the_loop_to_pause_and_the_pause_shows_once_the_loop_has_it() {
        let t0 = Instant::now();
        let mut p = panel(question(&[], false), t0);
        let mut the_loop = Loop::new(t0);
        let now = t0 + secs(100);
        assert_eq!(
            p.handle_key(key(KeyCode::Char('x')), now),
            PanelAction::Typing
        );
        assert!(!p.countdown().is_paused(now), "the panel pauses nothing");
        the_loop.hears(&Control::Typing, &mut p, now);
        assert!(p.countdown().is_paused(t0 + secs(101)));
        assert_eq!(p.countdown().remaining(t0 + secs(104)), Some(secs(200)));
    }

    #[test]
    fn number_keys_pick_and_enter_sends_the_label() {
        let t0 = Instant::now();
        let mut p = panel(question(&["Redis", "Memcached"], false), t0);
        assert_eq!(
            p.handle_key(key(KeyCode::Char('2')), t0),
            PanelAction::Typing
        );
        assert_eq!(p.chosen, [false, true]);
        assert_eq!(
            p.handle_key(key(KeyCode::Char('1')), t0),
            PanelAction::Typing
        );
        assert_eq!(p.chosen, [true, false]);
        p.handle_key(key(KeyCode::Tab), t0);
        assert_eq!(
            p.handle_key(key(KeyCode::Enter), t0),
            PanelAction::Submit("Redis".into())
        );
    }

    #[test]
    fn number_keys_beyond_the_options_are_typed() {
        let t0 = Instant::now();
        let mut p = panel(question(&["a", "b"], false), t0);
        p.handle_key(key(KeyCode::Tab), t0);
        type_str(&mut p, "3", t0);
        assert_eq!(p.draft(), "3");
        assert_eq!(p.chosen, [false, false]);
    }

    /// Regression: `16` typed with three options was option 1 with the note `6`.
    #[test]
    fn a_number_that_names_no_option_is_typed_whole() {
        let t0 = Instant::now();
        for (multi, tab) in [(false, false), (false, true), (true, false), (true, true)] {
            let mut p = panel(question(&["a", "b", "c"], multi), t0);
            // One pick already made: the undone digit gives it back.
            p.handle_key(key(KeyCode::Char('2')), t0);
            p.handle_key(key(KeyCode::Down), t0);
            if tab {
                p.handle_key(key(KeyCode::Tab), t0);
            }
            let before = (p.chosen.clone(), p.cursor);
            type_str(&mut p, "16", t0);
            assert_eq!(p.draft(), "16", "multi {multi}, editor {tab}");
            assert_eq!(
                (p.chosen.clone(), p.cursor),
                before,
                "multi {multi}, editor {tab}"
            );
            assert_eq!(p.focus, Focus::Editor);
            assert_eq!(
                p.handle_key(key(KeyCode::Enter), t0),
                PanelAction::Submit("b\n\n16".into()),
                "multi {multi}, editor {tab}"
            );
        }
        // A second digit that names an option is a second pick, as before.
        let mut p = panel(question(&["a", "b", "c"], false), t0);
        type_str(&mut p, "13", t0);
        assert_eq!(
            (p.chosen.as_slice(), p.draft().as_str()),
            (&[false, false, true][..], "")
        );
        // Only right after: a key between them ends the number.
        let mut p = panel(question(&["a", "b", "c"], false), t0);
        type_str(&mut p, "1", t0);
        p.handle_key(key(KeyCode::Tab), t0);
        type_str(&mut p, "6", t0);
        assert_eq!(
            (p.chosen.as_slice(), p.draft().as_str()),
            (&[true, false, false][..], "6")
        );
    }

    #[test]
    fn number_keys_type_once_the_editor_has_text() {
        let t0 = Instant::now();
        let mut p = panel(question(&["a", "b"], false), t0);
        p.handle_key(key(KeyCode::Tab), t0);
        type_str(&mut p, "x1", t0);
        assert_eq!(p.draft(), "x1");
        assert_eq!(p.chosen, [false, false]);
    }

    #[test]
    fn up_down_and_enter_pick_from_the_list() {
        let t0 = Instant::now();
        let mut p = panel(question(&["a", "b", "c"], false), t0);
        assert_eq!(p.focus, Focus::Options);
        p.handle_key(key(KeyCode::Down), t0);
        p.handle_key(key(KeyCode::Down), t0);
        p.handle_key(key(KeyCode::Up), t0);
        assert_eq!(
            p.handle_key(key(KeyCode::Enter), t0),
            PanelAction::Submit("b".into())
        );
    }

    #[test]
    fn the_highlight_starts_on_the_default() {
        let t0 = Instant::now();
        let q = Question {
            default: Some("c".into()),
            ..question(&["a", "b", "c"], false)
        };
        let mut p = panel(q, t0);
        assert_eq!(
            p.handle_key(key(KeyCode::Enter), t0),
            PanelAction::Submit("c".into())
        );
    }

    #[test]
    fn down_past_the_last_option_enters_the_editor_and_up_returns() {
        let t0 = Instant::now();
        let mut p = panel(question(&["a", "b"], false), t0);
        p.handle_key(key(KeyCode::Down), t0);
        p.handle_key(key(KeyCode::Down), t0);
        assert_eq!(p.focus, Focus::Editor);
        p.handle_key(key(KeyCode::Up), t0);
        assert_eq!((p.focus, p.cursor), (Focus::Options, 1));
    }

    #[test]
    fn typing_a_letter_in_the_list_answers_in_words() {
        let t0 = Instant::now();
        let mut p = panel(question(&["a", "b"], false), t0);
        type_str(&mut p, "neither", t0);
        assert_eq!(p.focus, Focus::Editor);
        assert_eq!(
            p.handle_key(key(KeyCode::Enter), t0),
            PanelAction::Submit("neither".into())
        );
    }

    #[test]
    fn multi_select_toggles_and_sends_one_label_per_line() {
        let t0 = Instant::now();
        let mut p = panel(question(&["a", "b", "c"], true), t0);
        type_str(&mut p, "13", t0);
        p.handle_key(key(KeyCode::Char('1')), t0);
        p.handle_key(key(KeyCode::Char('1')), t0);
        assert_eq!(p.chosen, [true, false, true]);
        p.handle_key(key(KeyCode::Down), t0);
        assert_eq!(
            p.handle_key(key(KeyCode::Enter), t0),
            PanelAction::Submit("a\nc".into())
        );
    }

    /// Issue 31: the panel sends what every other front end sends for the same picks and note
    /// (`desk::compose`, which the page, Telegram and `ralph answer` go through), so the agent
    /// gets the same `answer.md` and `ralph ask --json` the same picks.
    #[test]
    fn the_panel_sends_the_desks_encoding_of_its_picks_and_note() {
        use ralph_protocol::desk::{Reply, compose, read_back};
        let t0 = Instant::now();
        let q = question(&["Redis", "Memcached", "Valkey"], true);
        let mut p = panel(q.clone(), t0);
        type_str(&mut p, "13", t0);
        p.handle_key(key(KeyCode::Tab), t0);
        type_str(&mut p, "both, for now", t0);
        let PanelAction::Submit(sent) = p.handle_key(key(KeyCode::Enter), t0) else {
            panic!("not sent")
        };
        let composed = compose(Some(&q), &Reply::Picks(vec![1, 3], "both, for now".into()));
        assert_eq!(Ok(sent.clone()), composed);
        assert_eq!(
            read_back(&q, &sent),
            (vec!["Redis", "Valkey"], Some("both, for now"))
        );
    }

    #[test]
    fn multi_select_space_toggles_in_the_list_and_in_an_empty_editor() {
        let t0 = Instant::now();
        let mut p = panel(question(&["a", "b", "c"], true), t0);
        p.handle_key(key(KeyCode::Char(' ')), t0);
        p.handle_key(key(KeyCode::Down), t0);
        p.handle_key(key(KeyCode::Tab), t0);
        p.handle_key(key(KeyCode::Char(' ')), t0);
        assert_eq!(p.chosen, [true, true, false]);
        assert_eq!(p.draft(), "");
    }

    #[test]
    fn multi_select_enter_with_nothing_toggled_sends_the_highlight() {
        let t0 = Instant::now();
        let mut p = panel(question(&["a", "b"], true), t0);
        p.handle_key(key(KeyCode::Down), t0);
        assert_eq!(
            p.handle_key(key(KeyCode::Enter), t0),
            PanelAction::Submit("b".into())
        );
    }

    #[test]
    fn a_picked_option_can_be_annotated() {
        let t0 = Instant::now();
        let mut p = panel(question(&["Redis", "Memcached"], false), t0);
        p.handle_key(key(KeyCode::Char('1')), t0);
        p.handle_key(key(KeyCode::Tab), t0);
        type_str(&mut p, "with a 5m TTL", t0);
        assert_eq!(
            p.handle_key(key(KeyCode::Enter), t0),
            PanelAction::Submit("Redis\n\nwith a 5m TTL".into())
        );
    }

    #[test]
    fn a_multi_line_note_goes_under_the_labels() {
        let t0 = Instant::now();
        let mut p = panel(question(&["a", "b"], true), t0);
        type_str(&mut p, "12", t0);
        p.handle_key(key(KeyCode::Tab), t0);
        p.handle_paste("line one\r\nline two");
        assert_eq!(
            p.handle_key(key(KeyCode::Enter), t0),
            PanelAction::Submit("a\nb\n\nline one\nline two".into())
        );
    }

    #[test]
    fn paste_inserts_text_and_drops_control_characters() {
        let t0 = Instant::now();
        let mut p = panel(question(&["a"], false), t0);
        assert_eq!(
            p.handle_paste("hi\u{1b}[31m there\tyou"),
            PanelAction::Typing
        );
        assert_eq!(p.focus, Focus::Editor);
        assert_eq!(p.draft(), "hi[31m there\tyou");
        assert_eq!(p.handle_paste(""), PanelAction::None);
    }

    #[test]
    fn a_closed_panel_ignores_input() {
        let t0 = Instant::now();
        let mut p = panel(question(&["a"], false), t0);
        p.set_closed(Ended::TimedOut);
        assert_eq!(p.handle_key(key(KeyCode::Enter), t0), PanelAction::None);
        assert_eq!(p.handle_key(key(KeyCode::Esc), t0), PanelAction::None);
        assert_eq!(p.handle_paste("x"), PanelAction::None);
        assert_eq!(p.next_redraw(t0), None);
    }

    #[test]
    fn key_releases_and_ctrl_c_are_ignored() {
        let t0 = Instant::now();
        let mut p = panel(question(&[], false), t0);
        let mut release = key(KeyCode::Char('x'));
        release.kind = KeyEventKind::Release;
        assert_eq!(p.handle_key(release, t0), PanelAction::None);
        assert_eq!(p.handle_key(ctrl('c'), t0), PanelAction::None);
        assert_eq!(p.draft(), "");
    }

    #[test]
    fn next_redraw_follows_the_countdown() {
        let t0 = Instant::now();
        let p = panel(question(&[], false), t0);
        let later = t0 + Duration::from_millis(2500);
        assert_eq!(
            p.next_redraw(later),
            Some(later + Duration::from_millis(500))
        );
        // With no countdown, the title's age still ticks: by the second in its first
        // minute ("asked 12s ago"), then by the minute.
        let mut q = question(&[], false);
        q.text = "No deadline".into();
        // Asked "in the future" (a clock set back) counts as asked at open: an exact age.
        let asked_at = SystemTime::now() + Duration::from_secs(3600);
        let p = QuestionPanel::new(q, Countdown::new(None, t0), asked_at, t0);
        let at = |s: u64| t0 + Duration::from_millis(s * 1000 + 300);
        assert_eq!(
            p.next_redraw(at(12)),
            Some(at(12) + Duration::from_millis(700))
        );
        assert_eq!(
            p.next_redraw(at(75)),
            Some(at(75) + Duration::from_millis(44_700))
        );
    }
}
