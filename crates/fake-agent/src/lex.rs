//! Splits one script line into words, shell-style, decoding backslash escapes.
//!
//! Words are bytes, not strings, because tests need to print invalid UTF-8 (`\xff`) and raw
//! control bytes. Escapes are decoded in one place, here, so every command sees the same rules:
//!
//! - whitespace separates words; a word starting with `#` starts a comment;
//! - `"..."` groups words and decodes escapes; `'...'` groups words literally;
//! - quoted and unquoted parts glue together (`a"b c"` is the word `ab c`);
//! - escapes, quoted or not: `\n \r \t \0 \e \\ \" \' \# \xHH` and `\` + space.
//!
//! An unknown escape is an error rather than a literal backslash, so a typo in a test script
//! fails loudly instead of printing something subtly different.

use std::iter::Peekable;
use std::str::Chars;

/// Splits `line` into decoded words; the error says what is wrong, without a location.
pub fn split_words(line: &str) -> Result<Vec<Vec<u8>>, String> {
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        match chars.peek() {
            None | Some('#') => return Ok(words),
            Some(_) => {}
        }
        let mut word = Vec::new();
        while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
            match c {
                '"' => loop {
                    match chars.next() {
                        None => return Err("unterminated double quote".into()),
                        Some('"') => break,
                        Some('\\') => unescape(&mut chars, &mut word)?,
                        Some(c) => push_char(&mut word, c),
                    }
                },
                '\'' => loop {
                    match chars.next() {
                        None => return Err("unterminated single quote".into()),
                        Some('\'') => break,
                        Some(c) => push_char(&mut word, c),
                    }
                },
                '\\' => unescape(&mut chars, &mut word)?,
                c => push_char(&mut word, c),
            }
        }
        words.push(word);
    }
}

/// Decodes the escape whose backslash was just consumed, appending its bytes to `out`.
fn unescape(chars: &mut Peekable<Chars<'_>>, out: &mut Vec<u8>) -> Result<(), String> {
    let byte = match chars.next() {
        None => return Err("a backslash ends the line; write \\\\ for a backslash".into()),
        Some('n') => b'\n',
        Some('r') => b'\r',
        Some('t') => b'\t',
        Some('0') => 0,
        Some('e') => 0x1b,
        Some(c @ ('\\' | '"' | '\'' | '#' | ' ')) => c as u8,
        Some('x') => {
            let hex: String = [chars.next(), chars.next()].into_iter().flatten().collect();
            // Checked by hand: from_str_radix would also accept "+1".
            if hex.len() != 2 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(format!("\\x needs two hex digits, got '\\x{hex}'"));
            }
            u8::from_str_radix(&hex, 16).expect("two hex digits fit in a byte")
        }
        Some(c) => {
            return Err(format!(
                "unknown escape '\\{c}'; known: \\n \\r \\t \\0 \\e \\xHH \\\\ \\\" \\' \\# and '\\ '"
            ));
        }
    };
    out.push(byte);
    Ok(())
}

fn push_char(out: &mut Vec<u8>, c: char) {
    out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::split_words;

    fn words(line: &str) -> Vec<Vec<u8>> {
        split_words(line).unwrap()
    }

    #[test]
    fn splits_on_whitespace() {
        assert_eq!(
            words("  print  hello\tworld "),
            [&b"print"[..], b"hello", b"world"]
        );
    }

    #[test]
    fn blank_and_comment_lines_have_no_words() {
        assert!(words("").is_empty());
        assert!(words("   ").is_empty());
        assert!(words("# a comment").is_empty());
        assert_eq!(words("print hi # trailing"), [&b"print"[..], b"hi"]);
    }

    #[test]
    fn hash_inside_a_word_is_literal() {
        assert_eq!(words("print a#b"), [&b"print"[..], b"a#b"]);
        assert_eq!(words(r"print \#b"), [&b"print"[..], b"#b"]);
    }

    #[test]
    fn double_quotes_group_and_decode_escapes() {
        assert_eq!(
            words(r#"print "a b\n\"c\" \\ d""#),
            [&b"print"[..], b"a b\n\"c\" \\ d"]
        );
    }

    #[test]
    fn single_quotes_are_literal() {
        assert_eq!(words(r"print 'a \n b'"), [&b"print"[..], br"a \n b"]);
    }

    #[test]
    fn quoted_and_unquoted_parts_glue_together() {
        assert_eq!(words(r#"a"b c"'d e'f"#), [b"ab cd ef"]);
    }

    #[test]
    fn empty_quotes_make_an_empty_word() {
        assert_eq!(words(r#"write f.txt """#), [&b"write"[..], b"f.txt", b""]);
    }

    #[test]
    fn escapes_work_unquoted_too() {
        assert_eq!(words(r"\e[2J\r\t\0"), [b"\x1b[2J\r\t\0"]);
        assert_eq!(words(r"a\ b"), [b"a b"]);
    }

    #[test]
    fn hex_escapes_make_arbitrary_bytes() {
        assert_eq!(words(r"\xff\x1B\x00"), [[0xff, 0x1b, 0x00]]);
    }

    #[test]
    fn non_ascii_text_stays_utf8() {
        assert_eq!(
            words("print \"héllo ✓\""),
            [&b"print"[..], "héllo ✓".as_bytes()]
        );
    }

    #[test]
    fn bad_input_is_an_error() {
        for bad in [
            r#"print "open"#,
            "print 'open",
            r"print \q",
            r"print \xZ1",
            r"\x+1",
            r"\x1",
            "a\\",
        ] {
            assert!(split_words(bad).is_err(), "{bad:?} should be rejected");
        }
    }
}
