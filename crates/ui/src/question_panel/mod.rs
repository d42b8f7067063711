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
//! The keys are listed on [`QuestionPanel`], where the crate's public docs show them.
//!
//! The panel's state and what it shows are here; its keys are in `keys.rs`.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant, SystemTime};

use ralph_protocol::{Countdown, Ended, Question};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui_textarea::{TextArea, WrapMode};

use crate::theme::Theme;
use crate::wrap::{Para, wrap};
use crate::{countdown_view, markdown};

mod keys;

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
    /// [`EXTEND_BY`](ralph_protocol::EXTEND_BY). The panel shows the extension as pending
    /// until the loop's countdown comes back with it. Redraw.
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

/// The question panel: state and update.
///
/// # Keys
///
/// Focus is on the option list when the question has options, otherwise on the editor.
/// `Tab` (or `Shift+Tab`) moves between them; typing a letter in the option list moves to the
/// editor with that letter.
///
/// | key | option list | editor |
/// | --- | --- | --- |
/// | `Enter` | send the highlighted option (multi-select: the toggled ones, or the highlighted one if none) plus any note | send the picked option(s) plus the text, or the text alone |
/// | `1`-`9` | pick (multi-select: toggle) that option; again to unpick | same, while the editor is empty; otherwise types the digit |
/// | a digit that names no option, right after a digit picked one | undoes that pick and types both digits (`16` is an answer, not option 1 and the note `6`) | same |
/// | `Space` | pick (multi-select: toggle) the highlighted option | multi-select with an empty editor: toggle the highlighted option; otherwise a space |
/// | `Up`/`Down` | move the highlight; `Down` past the last option enters the editor | move in the text; `Up` on the first row goes to the option list |
/// | `Alt+Enter`, `Shift+Enter`, `Ctrl+J` | newline in the editor | newline |
/// | `PgUp`/`PgDn` | scroll a long question | same |
/// | `Ctrl+E` | five more minutes | same |
/// | `Esc` | skip: the agent goes with its default or best guess | same |
///
/// A picked option can be annotated: pick it, then type in the editor; the answer is written
/// as every front end writes it ([`ralph_protocol::encode_answer`]): the label, a blank line, the
/// note.
///
/// Multi-line pastes only stay in the editor if the terminal uses bracketed paste (the loop
/// view enables it): otherwise each pasted newline arrives as `Enter` and sends the answer.
/// `Ctrl+C` is left to the caller.
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
        let answer = ralph_protocol::encode_answer(&labels, &self.draft());
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
}

impl QuestionPanel {
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
/// (`ralph_protocol::clean`) and expands tabs, which a terminal cell cannot hold.
pub(crate) fn clean(text: &str) -> String {
    ralph_protocol::clean(text).replace('\t', "    ")
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
        // Markdown, as the question is, but all of it dim: it is the question's background.
        let dim = Theme {
            text: theme.dim,
            ..theme.clone()
        };
        notes.extend(markdown::render(context.trim(), &dim));
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
mod tests;
