//! The text of the files ralph owns that an agent edits: `question.md` and the task's
//! checkboxes. Pure functions, no I/O, so the exact formats are easy to test and to change
//! when ralph's readers change.

use crate::command::Question;

/// The body of `question.md`: YAML frontmatter for the extras, then the question as markdown.
pub fn question_markdown(question: &Question) -> String {
    let Question {
        text,
        options,
        multi_select,
        default,
        context,
    } = question;
    let mut out = String::new();
    if !options.is_empty() || *multi_select || default.is_some() || context.is_some() {
        out.push_str("---\n");
        if !options.is_empty() {
            out.push_str("options:\n");
            for option in options {
                out.push_str(&format!("  - {}\n", yaml_string(option)));
            }
        }
        if *multi_select {
            out.push_str("multi_select: true\n");
        }
        if let Some(default) = default {
            out.push_str(&format!("default: {}\n", yaml_string(default)));
        }
        if let Some(context) = context {
            out.push_str(&format!("context: {}\n", yaml_string(context)));
        }
        out.push_str("---\n");
    }
    out.push_str(&String::from_utf8_lossy(text));
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// A YAML double-quoted scalar, so any text (colons, quotes, newlines) round-trips.
fn yaml_string(bytes: &[u8]) -> String {
    let mut out = String::from("\"");
    for c in String::from_utf8_lossy(bytes).chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Returns `text` with the `n`-th open checkbox (or all) ticked, and how many were open.
pub fn tick(text: &str, n: Option<usize>) -> (String, usize) {
    let mut out = String::with_capacity(text.len());
    let mut open = 0;
    for line in text.split_inclusive('\n') {
        let indent = line.len() - line.trim_start().len();
        let rest = &line[indent..];
        let is_open = rest.len() >= 5
            && matches!(rest.as_bytes()[0], b'-' | b'*' | b'+')
            && rest[1..].starts_with(" [ ]")
            && rest[5..].chars().next().is_none_or(char::is_whitespace);
        if is_open {
            open += 1;
            if n.is_none_or(|n| n == open) {
                out.push_str(&line[..indent + 2]);
                out.push_str("[x]");
                out.push_str(&line[indent + 5..]);
                continue;
            }
        }
        out.push_str(line);
    }
    (out, open)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_counts_only_open_boxes() {
        let task = "# Task\n- [x] done\n- [ ] one\n  * [ ] two\n- [ ]three is not a box\n+ [ ]\n";
        let (out, open) = tick(task, Some(2));
        assert_eq!(open, 3);
        assert_eq!(
            out,
            "# Task\n- [x] done\n- [ ] one\n  * [x] two\n- [ ]three is not a box\n+ [ ]\n"
        );
        let (all, _) = tick(task, None);
        assert_eq!(
            all,
            "# Task\n- [x] done\n- [x] one\n  * [x] two\n- [ ]three is not a box\n+ [x]\n"
        );
    }

    #[test]
    fn question_without_extras_is_plain_markdown() {
        assert_eq!(
            question_markdown(&Question {
                text: b"Which **DB**?".to_vec(),
                ..Question::default()
            }),
            "Which **DB**?\n"
        );
    }

    #[test]
    fn question_extras_go_in_frontmatter() {
        let md = question_markdown(&Question {
            text: b"Which DB?".to_vec(),
            options: vec![b"Postgres".to_vec(), b"say \"lite\": yes".to_vec()],
            multi_select: true,
            default: Some(b"Postgres".to_vec()),
            context: Some(b"line 1\nline 2".to_vec()),
        });
        assert_eq!(
            md,
            "---\noptions:\n  - \"Postgres\"\n  - \"say \\\"lite\\\": yes\"\n\
             multi_select: true\ndefault: \"Postgres\"\ncontext: \"line 1\\nline 2\"\n---\nWhich DB?\n"
        );
    }
}
