//! The escape sequence that makes the terminal itself show a desktop notification.

use ralph_protocol::{cut, one_line};

/// The longest text in a terminal notification, in characters.
const TERMINAL_CHARS: usize = 200;

/// The longest title in a terminal notification, in characters.
const TERMINAL_TITLE_CHARS: usize = 60;

/// The escape sequence that makes the terminal itself show a desktop notification.
///
/// foot and urxvt get OSC 777 (`ESC ] 777 ; notify ; title ; body BEL`); every other terminal
/// gets OSC 9 (`ESC ] 9 ; text BEL`, read by iTerm2, WezTerm, kitty, Ghostty and Windows
/// Terminal). One sequence, not both, because terminals that read both would show two
/// notifications. Terminals that know neither ignore it. Title and body are agent text, so
/// every control character (C0, DEL, C1) and escape sequence is removed, the title is cut
/// to 60 characters and the body to 200.
///
/// Inside tmux (`TMUX` is set) the sequence goes in tmux's passthrough ([`tmux_passthrough`]):
/// tmux swallows OSC 9 and 777 itself, so a loop watched in tmux, the usual way over ssh,
/// never reached the desktop.
pub(crate) fn terminal_notification(title: &str, body: &str) -> String {
    let term = std::env::var("TERM").unwrap_or_default();
    let seq = osc_notification(title, body, TerminalKind::from_term(&term));
    if std::env::var_os("TMUX").is_some_and(|v| !v.is_empty()) {
        tmux_passthrough(&seq)
    } else {
        seq
    }
}

/// `seq` in tmux's passthrough (`ESC P tmux ;` … `ESC \`, every `ESC` inside doubled), which
/// hands it on to the terminal tmux runs in where tmux allows it: `set -g allow-passthrough on`
/// from tmux 3.3 on (earlier versions always do). Where tmux does not, it drops the whole
/// sequence, as it dropped the bare one: nothing shows in the pane either way.
fn tmux_passthrough(seq: &str) -> String {
    format!("\x1bPtmux;{}\x1b\\", seq.replace('\x1b', "\x1b\x1b"))
}

/// Which notification sequence a terminal reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TerminalKind {
    /// OSC 9.
    Osc9,
    /// OSC 777 (foot, urxvt).
    Osc777,
}

impl TerminalKind {
    fn from_term(term: &str) -> Self {
        if term.starts_with("foot") || term.starts_with("rxvt") {
            TerminalKind::Osc777
        } else {
            TerminalKind::Osc9
        }
    }
}

fn osc_notification(title: &str, body: &str, kind: TerminalKind) -> String {
    let title = one_line(title, TERMINAL_TITLE_CHARS);
    let body = one_line(body, TERMINAL_CHARS);
    match kind {
        TerminalKind::Osc9 => {
            let mut text = if title.is_empty() {
                body
            } else {
                format!("{title}: {body}")
            };
            // ConEmu and Windows Terminal read `OSC 9 ; <digits> ;` as commands (4 is the
            // progress bar), so the text must not start with a digit.
            if text.starts_with(|c: char| c.is_ascii_digit()) {
                text.insert_str(0, "ralph: ");
            }
            format!("\x1b]9;{}\x07", cut(&text, TERMINAL_CHARS))
        }
        // `;` separates the fields, so none may stay in the title; the body is the last field.
        TerminalKind::Osc777 => format!("\x1b]777;notify;{};{body}\x07", title.replace(';', ",")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ralph_protocol::is_bidi_control;

    #[test]
    fn terminal_notification_cannot_carry_control_characters() {
        let evil = "pwn\x1b]52;c;ZXZpbA==\x07ed\x1b[2J\u{9b}31m\u{9d}0;title\x07\u{202E}txt.exe\r\nnext\x00\x7f";
        for kind in [TerminalKind::Osc9, TerminalKind::Osc777] {
            let seq = osc_notification(&format!("ralph; {evil}"), &evil.repeat(100), kind);
            let (open, inner) = match kind {
                TerminalKind::Osc9 => ("\x1b]9;", seq.strip_prefix("\x1b]9;").unwrap()),
                TerminalKind::Osc777 => (
                    "\x1b]777;notify;",
                    seq.strip_prefix("\x1b]777;notify;").unwrap(),
                ),
            };
            let inner = inner
                .strip_suffix('\x07')
                .unwrap_or_else(|| panic!("{open}: {seq:?}"));
            assert!(
                !inner.chars().any(|c| c.is_control() || is_bidi_control(c)),
                "{kind:?}: {inner:?}"
            );
            assert!(
                inner.chars().count() <= TERMINAL_TITLE_CHARS + TERMINAL_CHARS + 3,
                "{kind:?}: too long"
            );
            assert!(
                inner.contains("pwned"),
                "{kind:?}: the text itself is kept: {inner:?}"
            );
            assert!(
                !inner.contains("ZXZpbA"),
                "{kind:?}: the OSC 52 payload went whole"
            );
        }
        let osc777 = osc_notification("a;b", "c;d", TerminalKind::Osc777);
        assert_eq!(osc777, "\x1b]777;notify;a,b;c;d\x07");
        assert_eq!(
            osc_notification("", "4;1;50", TerminalKind::Osc9),
            "\x1b]9;ralph: 4;1;50\x07"
        );
        assert_eq!(
            tmux_passthrough("\x1b]9;ralph: the agent asks\x07"),
            "\x1bPtmux;\x1b\x1b]9;ralph: the agent asks\x07\x1b\\"
        );
        assert_eq!(TerminalKind::from_term("foot-extra"), TerminalKind::Osc777);
        assert_eq!(TerminalKind::from_term("xterm-ghostty"), TerminalKind::Osc9);
    }
}
