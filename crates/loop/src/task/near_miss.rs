//! Lines of the body that look like a checkbox to a person but are not one to a markdown
//! parser (`-[ ] x`, `- [] x`, `[ ] x`, `- [ ]x`): ralph would not count them, and the agent
//! could finish without them.

/// The body's lines that look like a checkbox and are not among `criteria_lines` (the lines
/// the markdown parser found checkboxes on, sorted), each with its file line and the line as it should
/// be written. Lines in fenced code blocks and quotes are skipped, as the parser skips them.
pub(super) fn near_misses(
    body: &str,
    first_line: usize,
    criteria_lines: &[usize],
) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut fence: Option<&str> = None;
    for (i, line) in body.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(open) = fence {
            if trimmed.starts_with(open) {
                fence = None;
            }
            continue;
        }
        if let Some(open) = ["```", "~~~"].into_iter().find(|f| trimmed.starts_with(f)) {
            fence = Some(open);
            continue;
        }
        if trimmed.starts_with('>') || criteria_lines.binary_search(&(first_line + i)).is_ok() {
            continue;
        }
        if let Some(fixed) = as_checkbox(trimmed) {
            let indent = &line[..line.len() - trimmed.len()];
            found.push((first_line + i, format!("{indent}{fixed}")));
        }
    }
    found
}

/// `- [ ] text` (or `- [x] text`) when `line` reads as a checkbox with its marker, box or
/// spaces off.
fn as_checkbox(line: &str) -> Option<String> {
    let (marker, rest) = match line.chars().next()? {
        c @ ('-' | '*' | '+') => (c.to_string(), &line[1..]),
        '[' => ("-".to_owned(), line),
        _ => {
            let digits = line.chars().take_while(char::is_ascii_digit).count();
            let after = line[digits..].chars().next()?;
            if digits == 0 || !matches!(after, '.' | ')') {
                return None;
            }
            (line[..=digits].to_owned(), &line[digits + 1..])
        }
    };
    let rest = rest.trim_start();
    let inside_and_after = rest.strip_prefix('[')?;
    let close = inside_and_after.find(']')?;
    let state = match inside_and_after[..close].trim() {
        "" => ' ',
        "x" | "X" => 'x',
        _ => return None,
    };
    let text = inside_and_after[close + 1..].trim();
    // `[link](url)` and `[ref]: url` are links, not boxes.
    if text.is_empty() || text.starts_with('(') || text.starts_with(':') {
        return None;
    }
    Some(format!("{marker} [{state}] {text}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_near_miss_gets_the_line_as_it_should_be() {
        let body = "- [ ] fine\n-[ ] no space after the dash\n- [] empty box\n[x] no marker\n\
                    - [ ]no space after the box\n  * [  ] wide box, indented\n1.[ ] numbered\n";
        let found = near_misses(body, 10, &[10]);
        assert_eq!(
            found,
            [
                (11, "- [ ] no space after the dash".to_owned()),
                (12, "- [ ] empty box".to_owned()),
                (13, "- [x] no marker".to_owned()),
                (14, "- [ ] no space after the box".to_owned()),
                (15, "  * [ ] wide box, indented".to_owned()),
                (16, "1. [ ] numbered".to_owned()),
            ]
        );
    }

    #[test]
    fn code_quotes_links_and_prose_are_not_near_misses() {
        let body = "```\n-[ ] in code\n```\n> -[ ] quoted\n[the docs](https://x)\n\
                    [ref]: https://x\n- a list item\n- [?] a question mark\nplain text\n[]\n";
        assert_eq!(near_misses(body, 1, &[]), []);
    }
}
