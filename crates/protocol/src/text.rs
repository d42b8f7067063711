//! Agent text made safe to show: the one place that decides what of it reaches a terminal.
//!
//! Everything an agent writes is untrusted. [`clean`] removes escape sequences whole (via
//! [`ralph_signal::sanitize`]) and the invisible format characters ([`is_invisible`]: the
//! bidirectional overrides and isolates, which make text read differently from what it is,
//! and zero-width ones), keeping line breaks, for text shown as lines (a question, its
//! context). [`one_line`] does the same and also turns every line break and other control
//! character into a space, collapses whitespace, and cuts to a length: for anything shown on
//! one line of ralph's own (an option's label, a status line, a notification), where a line
//! break in the agent's text would print a line that looks like one of ralph's.

/// `text` on one line with no control characters, cut to `max` characters.
///
/// Escape sequences go whole (via `ralph_signal::sanitize`); then every remaining control
/// character, and the bidirectional overrides that can make text read differently from what
/// it is, becomes a space, and runs of whitespace collapse to one.
pub fn one_line(text: &str, max: usize) -> String {
    let clean = ralph_signal::sanitize(text);
    let mut out = String::with_capacity(clean.len().min(max * 4));
    for c in clean.chars() {
        let c = if c.is_control() || is_invisible(c) {
            ' '
        } else {
            c
        };
        if c.is_whitespace() && (out.is_empty() || out.ends_with(' ')) {
            continue;
        }
        out.push(if c.is_whitespace() { ' ' } else { c });
    }
    cut(out.trim_end(), max)
}

/// `text` with escape sequences and invisible format characters removed; line breaks and tabs
/// kept. Text with none of them comes back unchanged.
pub fn clean(text: &str) -> String {
    let clean = ralph_signal::sanitize(text);
    if clean.chars().any(is_invisible) {
        clean.chars().filter(|&c| !is_invisible(c)).collect()
    } else {
        clean
    }
}

/// Whether `c` is a bidirectional override or isolate, which can make text read differently
/// from what it is.
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
}

/// Whether `c` is shown as nothing yet changes what text means or how it reads: a
/// bidirectional control ([`is_bidi_control`]), a zero-width space or word joiner, an
/// invisible operator, a byte order mark, a soft hyphen, the Mongolian vowel separator, an
/// interlinear annotation mark, or a tag character. The zero-width joiner and non-joiner are
/// kept: scripts and emoji sequences need them, and they cannot reorder or hide text.
pub(crate) fn is_invisible(c: char) -> bool {
    is_bidi_control(c)
        || matches!(
            c,
            '\u{00AD}'
                | '\u{180E}'
                | '\u{200B}'
                | '\u{2060}'..='\u{2064}'
                | '\u{FEFF}'
                | '\u{FFF9}'..='\u{FFFB}'
                | '\u{E0000}'..='\u{E007F}'
        )
}

/// `text` cut to at most `max` characters, ending with `…` when cut.
pub fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max.saturating_sub(1)) {
        Some((i, _)) if text[i..].chars().nth(1).is_some() => format!("{}…", &text[..i]),
        _ => text.to_string(),
    }
}

/// Quotes `s` for `sh` if it needs it (for commands shown to the human).
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_cut_with_an_ellipsis() {
        assert_eq!(cut("abcdef", 4), "abc…");
        assert_eq!(cut("abcd", 4), "abcd");
        assert_eq!(cut("ééééé", 3), "éé…");
        assert_eq!(one_line("  a\n\n b\t c  ", 10), "a b c");
    }

    /// Regression (issue 25, item 9): bidi overrides and other invisible characters in a
    /// question reached the terminal in plain mode, `ralph status` and the scrollback.
    #[test]
    fn invisible_format_characters_are_removed_and_lines_kept_or_joined() {
        let hostile = "pay \u{202E}gnp.exe\u{202C} now\u{2066}\u{2069}\u{200B}\u{FEFF}\u{E0041}\u{00AD}!\nline 2\x1b[31m";
        assert_eq!(clean(hostile), "pay gnp.exe now!\nline 2");
        assert_eq!(one_line(hostile, 100), "pay gnp.exe now ! line 2");
        assert_eq!(one_line("Yes\nralph: answered", 100), "Yes ralph: answered");
        // What scripts and emoji need stays.
        assert_eq!(
            clean("می\u{200C}خواهم 👨\u{200D}👩"),
            "می\u{200C}خواهم 👨\u{200D}👩"
        );
    }
}
