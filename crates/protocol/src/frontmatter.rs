//! The one frontmatter splitter: where a file's YAML header (`---` ... `---`) ends and its
//! body starts. The task file, `question.md` and `answer.md` all use it; what each does with a
//! missing or unclosed header is its own business.

/// Where the frontmatter is, as byte offsets into the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fences {
    /// The end of the opening `---` line (its newline included): where the YAML starts.
    pub yaml_start: usize,
    /// The start of the closing line: where the YAML ends.
    pub close_start: usize,
    /// The end of the closing line (its newline included): where the body starts.
    pub body_start: usize,
}

/// What [`split`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// The first line is not `---`: no frontmatter.
    None,
    /// An opening `---` and no closing line.
    Unclosed,
    /// A whole frontmatter.
    At(Fences),
}

/// Whether `line` (with or without its line end) is a `---` fence.
pub fn is_fence(line: &str) -> bool {
    line.trim_end_matches(['\n', '\r', ' ', '\t']) == "---"
}

/// Finds the frontmatter of `text`: an opening `---` on the first line, closed by the next
/// line that is a fence or, where `dots_close`, `...` (YAML's document end). Only an
/// unindented line closes it: YAML block scalars indent their lines, so a value holding `---`
/// cannot end it early.
pub fn split(text: &str, dots_close: bool) -> Found {
    let mut lines = text.split_inclusive('\n').scan(0, |at, line| {
        let start = *at;
        *at += line.len();
        Some((line, start))
    });
    match lines.next() {
        Some((first, _)) if is_fence(first) => {}
        _ => return Found::None,
    }
    let closes = |line: &str| {
        is_fence(line) || (dots_close && line.trim_end_matches(['\n', '\r', ' ', '\t']) == "...")
    };
    match lines.find(|(line, _)| closes(line)) {
        Some((line, start)) => Found::At(Fences {
            yaml_start: text.find('\n').map_or(text.len(), |i| i + 1),
            close_start: start,
            body_start: start + line.len(),
        }),
        None => Found::Unclosed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_ends_at_the_first_unindented_fence() {
        let text = "---\na: |\n  ---\nb: 1\n---\nbody\n";
        let Found::At(f) = split(text, false) else {
            panic!()
        };
        assert_eq!(&text[f.yaml_start..f.close_start], "a: |\n  ---\nb: 1\n");
        assert_eq!(&text[f.body_start..], "body\n");
        assert_eq!(split("---  \r\nx: 1\n...\nbody", false), Found::Unclosed);
        assert!(matches!(split("---\nx: 1\n...\nbody", true), Found::At(_)));
        assert_eq!(split("x: 1\n---\n", false), Found::None);
        assert_eq!(split("", false), Found::None);
        let Found::At(f) = split("---\n---", false) else {
            panic!()
        };
        assert_eq!((f.yaml_start, f.close_start, f.body_start), (4, 4, 7));
    }
}
