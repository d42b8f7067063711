//! Agent text made safe to show on one line: in a notification, a status line, a log message.
//!
//! Everything an agent writes is untrusted. [`one_line`] removes escape sequences whole (via
//! [`ralph_signal::sanitize`]), turns every other control character and every bidirectional
//! override into a space, collapses whitespace, and cuts to a length.

/// `text` on one line with no control characters, cut to `max` characters.
///
/// Escape sequences go whole (via `ralph_signal::sanitize`); then every remaining control
/// character, and the bidirectional overrides that can make text read differently from what
/// it is, becomes a space, and runs of whitespace collapse to one.
pub fn one_line(text: &str, max: usize) -> String {
    let clean = ralph_signal::sanitize(text);
    let mut out = String::with_capacity(clean.len().min(max * 4));
    for c in clean.chars() {
        let c = if c.is_control() || is_bidi_control(c) {
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

/// Whether `c` is a bidirectional override or isolate, which can make text read differently
/// from what it is.
/// Whether `c` is a bidirectional override or isolate, which can make text read differently
/// from what it is.
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}')
}

/// `text` cut to at most `max` characters, ending with `…` when cut.
pub fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max.saturating_sub(1)) {
        Some((i, _)) if text[i..].chars().nth(1).is_some() => format!("{}…", &text[..i]),
        _ => text.to_string(),
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
}
