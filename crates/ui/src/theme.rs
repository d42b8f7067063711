//! Colours and emphasis for ralph's terminal views, or none of the colours under `NO_COLOR`.
//!
//! A [`Theme`] is a bag of [`Style`]s chosen once at start-up. The monochrome theme keeps
//! every distinction a colour makes (urgent, chosen, focused, code) with bold, reverse, italic
//! and dim instead, because `NO_COLOR` asks for no colour, not for less information.

use ratatui::style::{Color, Modifier, Style};

/// The styles ralph's views draw with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Theme {
    /// Whether this theme uses colour at all (false under `NO_COLOR`).
    pub color: bool,
    /// Ordinary text.
    pub text: Style,
    /// Secondary text: context, descriptions, key hints.
    pub dim: Style,
    /// Panel titles.
    pub title: Style,
    /// Markdown headings.
    pub heading: Style,
    /// Inline code and code blocks.
    pub code: Style,
    /// Link text; the address follows it in `dim`.
    pub link: Style,
    /// Block quotes.
    pub quote: Style,
    /// Notes about a malformed question file.
    pub warning: Style,
    /// Something the person must fix, like an empty answer.
    pub error: Style,
    /// Option numbers (`1.`).
    pub option_number: Style,
    /// The option under the cursor while the option list has focus.
    pub option_cursor: Style,
    /// A picked option.
    pub chosen: Style,
    /// Borders of unfocused inputs.
    pub border: Style,
    /// Borders of the focused input.
    pub border_focused: Style,
    /// Placeholder text in an empty editor.
    pub placeholder: Style,
    /// The countdown with plenty of time left.
    pub gauge: Style,
    /// The countdown in its last 20%.
    pub gauge_low: Style,
    /// The countdown in its last ten seconds.
    pub gauge_urgent: Style,
    /// The countdown while paused for typing.
    pub gauge_paused: Style,
    /// The empty part of the countdown bar.
    pub gauge_track: Style,
    /// The line that says how a question was closed.
    pub closed: Style,
}

impl Default for Theme {
    fn default() -> Self {
        Self::colored()
    }
}

impl Theme {
    /// The colour theme.
    pub fn colored() -> Self {
        let plain = Style::new();
        Self {
            color: true,
            text: plain,
            dim: plain.fg(Color::DarkGray),
            title: plain.fg(Color::Cyan).add_modifier(Modifier::BOLD),
            heading: plain.add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
            code: plain.fg(Color::Yellow),
            link: plain.fg(Color::Blue).add_modifier(Modifier::UNDERLINED),
            quote: plain.fg(Color::Gray).add_modifier(Modifier::ITALIC),
            warning: plain.fg(Color::Yellow),
            error: plain.fg(Color::Red).add_modifier(Modifier::BOLD),
            option_number: plain.fg(Color::Cyan),
            option_cursor: plain.fg(Color::Cyan).add_modifier(Modifier::BOLD),
            chosen: plain.fg(Color::Green).add_modifier(Modifier::BOLD),
            border: plain.fg(Color::DarkGray),
            border_focused: plain.fg(Color::Cyan),
            placeholder: plain.fg(Color::DarkGray),
            gauge: plain.fg(Color::Green),
            gauge_low: plain.fg(Color::Yellow),
            gauge_urgent: plain.fg(Color::Red).add_modifier(Modifier::BOLD),
            gauge_paused: plain.fg(Color::Blue),
            gauge_track: plain.fg(Color::DarkGray),
            closed: plain.fg(Color::Green),
        }
    }

    /// No colours: bold, reverse, italic, underline and dim carry every distinction.
    pub fn monochrome() -> Self {
        let plain = Style::new();
        let bold = plain.add_modifier(Modifier::BOLD);
        Self {
            color: false,
            text: plain,
            dim: plain.add_modifier(Modifier::DIM),
            title: bold,
            heading: plain.add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
            code: plain.add_modifier(Modifier::REVERSED),
            link: plain.add_modifier(Modifier::UNDERLINED),
            quote: plain.add_modifier(Modifier::ITALIC),
            warning: bold,
            error: plain.add_modifier(Modifier::BOLD | Modifier::REVERSED),
            option_number: bold,
            option_cursor: plain.add_modifier(Modifier::REVERSED),
            chosen: bold,
            border: plain,
            border_focused: bold,
            placeholder: plain.add_modifier(Modifier::DIM),
            gauge: plain,
            gauge_low: bold,
            gauge_urgent: plain.add_modifier(Modifier::BOLD | Modifier::REVERSED),
            gauge_paused: plain.add_modifier(Modifier::ITALIC),
            gauge_track: plain.add_modifier(Modifier::DIM),
            closed: bold,
        }
    }

    /// The theme the environment asks for: monochrome when `NO_COLOR` is set to anything but
    /// an empty string (<https://no-color.org>), colour otherwise.
    pub fn from_env() -> Self {
        Self::for_no_color(std::env::var_os("NO_COLOR").as_deref())
    }

    /// The theme for a given value of `NO_COLOR` (`None` when unset); [`Theme::from_env`]
    /// without reading the environment.
    pub fn for_no_color(value: Option<&std::ffi::OsStr>) -> Self {
        match value {
            Some(v) if !v.is_empty() => Self::monochrome(),
            _ => Self::colored(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use super::*;

    #[test]
    fn no_color_set_to_anything_but_empty_is_monochrome() {
        assert_eq!(Theme::for_no_color(None), Theme::colored());
        assert_eq!(Theme::for_no_color(Some(OsStr::new(""))), Theme::colored());
        assert_eq!(
            Theme::for_no_color(Some(OsStr::new("1"))),
            Theme::monochrome()
        );
        assert_eq!(
            Theme::for_no_color(Some(OsStr::new("0"))),
            Theme::monochrome()
        );
    }

    #[test]
    fn monochrome_uses_no_colour() {
        let t = Theme::monochrome();
        for style in [
            t.text,
            t.dim,
            t.title,
            t.heading,
            t.code,
            t.link,
            t.quote,
            t.warning,
            t.error,
            t.option_number,
            t.option_cursor,
            t.chosen,
            t.border,
            t.border_focused,
            t.placeholder,
            t.gauge,
            t.gauge_low,
            t.gauge_urgent,
            t.gauge_paused,
            t.gauge_track,
            t.closed,
        ] {
            assert_eq!((style.fg, style.bg), (None, None), "{style:?}");
        }
    }
}
