//! Parses a script file into sections of commands, and picks the section for this run.
//!
//! The whole file is parsed up front, every section included, so a typo in the section for
//! iteration 5 fails the test at iteration 1 instead of silently doing nothing later.
//!
//! A section header is `[iteration SPEC]`, `[call SPEC]` or `[default]`, where SPEC is `N`,
//! `A..B` (inclusive), `A..` or `*`. A file with no headers at all is one `[default]` section.
//! When several sections match, the most specific wins: an exact number, then a range (the
//! first one in the file), then `*`, then `[default]`.

use crate::command::{Command, parse_command};
use crate::lex::split_words;

/// A parsed script: its sections in file order.
#[derive(Debug)]
pub struct Script {
    /// Sections in the order they appear in the file.
    pub sections: Vec<Section>,
}

/// One `[...]` section and the commands under it.
#[derive(Debug)]
pub struct Section {
    /// Which runs this section is for.
    pub selector: Selector,
    /// The commands, each with its 1-based line number for error messages.
    pub commands: Vec<(usize, Command)>,
}

/// Which runs a section applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selector {
    /// `[iteration SPEC]`: matched against `RALPH_ITERATION`.
    Iteration(Spec),
    /// `[call SPEC]`: matched against the counter file.
    Call(Spec),
    /// `[default]`: any run no other section matches.
    Default,
}

/// The numbers a section header names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spec {
    /// `N`.
    Exact(u64),
    /// `A..B` (inclusive) or `A..` (`hi` is `u64::MAX`).
    Range { lo: u64, hi: u64 },
    /// `*`.
    Any,
}

/// What a run is keyed by: the iteration ralph passed, or the count of starts so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// `RALPH_ITERATION`, if set.
    Iteration(Option<u64>),
    /// The counter file's value after this start's increment.
    Call(u64),
}

impl Script {
    /// Parses a whole script; errors are `LINE: message`, ready to prefix with the file name.
    pub fn parse(text: &str) -> Result<Script, String> {
        let mut sections: Vec<Section> = Vec::new();
        let has_headers = text.lines().any(|l| l.trim_start().starts_with('['));
        if !has_headers {
            sections.push(Section {
                selector: Selector::Default,
                commands: Vec::new(),
            });
        }
        for (index, line) in text.lines().enumerate() {
            let line_no = index + 1;
            let trimmed = line.trim();
            if trimmed.starts_with('[') {
                let selector = parse_header(trimmed).map_err(|e| format!("{line_no}: {e}"))?;
                sections.push(Section {
                    selector,
                    commands: Vec::new(),
                });
                continue;
            }
            let words = split_words(line).map_err(|e| format!("{line_no}: {e}"))?;
            if words.is_empty() {
                continue;
            }
            let command = parse_command(words).map_err(|e| format!("{line_no}: {e}"))?;
            let Some(section) = sections.last_mut() else {
                return Err(format!(
                    "{line_no}: this command comes before any section header; \
                     put it under one, e.g. [default]"
                ));
            };
            section.commands.push((line_no, command));
        }
        Ok(Script { sections })
    }

    /// Whether any section is keyed by the call counter.
    pub fn uses_calls(&self) -> bool {
        self.sections
            .iter()
            .any(|s| matches!(s.selector, Selector::Call(_)))
    }

    /// The section for this run: the most specific match, the first in the file on a tie.
    pub fn select(&self, key: Key) -> Option<&Section> {
        self.sections
            .iter()
            .filter_map(|s| rank(s.selector, key).map(|r| (r, s)))
            // min_by_key keeps the first of equal elements, which is the file-order tie-break.
            .min_by_key(|(r, _)| *r)
            .map(|(_, s)| s)
    }
}

/// How specific a match is (lower wins), or `None` if the selector doesn't match `key`.
fn rank(selector: Selector, key: Key) -> Option<u8> {
    let (spec, n) = match (selector, key) {
        (Selector::Default, _) => return Some(3),
        (Selector::Iteration(spec), Key::Iteration(n)) => (spec, n),
        (Selector::Call(spec), Key::Call(n)) => (spec, Some(n)),
        _ => return None,
    };
    match (spec, n) {
        (Spec::Any, _) => Some(2),
        (Spec::Exact(e), Some(n)) if e == n => Some(0),
        (Spec::Range { lo, hi }, Some(n)) if (lo..=hi).contains(&n) => Some(1),
        _ => None,
    }
}

fn parse_header(line: &str) -> Result<Selector, String> {
    let inner = line
        .strip_prefix('[')
        .and_then(|l| l.strip_suffix(']'))
        .ok_or_else(|| format!("a section header must look like [iteration 2]; got '{line}'"))?;
    let mut parts = inner.split_whitespace();
    let selector = match (parts.next(), parts.next(), parts.next()) {
        (Some("default"), None, _) => Selector::Default,
        (Some("iteration"), Some(spec), None) => Selector::Iteration(parse_spec(spec)?),
        (Some("call"), Some(spec), None) => Selector::Call(parse_spec(spec)?),
        _ => {
            return Err(format!(
                "unknown section header '{line}'; use [iteration N], [call N] or [default], \
                 where N is 3, 3..5, 3.. or *"
            ));
        }
    };
    Ok(selector)
}

fn parse_spec(spec: &str) -> Result<Spec, String> {
    let number = |s: &str| {
        s.parse::<u64>()
            .map_err(|_| format!("'{s}' in section header '{spec}' is not a number"))
    };
    if spec == "*" {
        return Ok(Spec::Any);
    }
    let Some((lo, hi)) = spec.split_once("..") else {
        return Ok(Spec::Exact(number(spec)?));
    };
    let lo = number(lo)?;
    let hi = if hi.is_empty() { u64::MAX } else { number(hi)? };
    if lo > hi {
        return Err(format!(
            "range {spec} is empty; write the smaller number first"
        ));
    }
    Ok(Spec::Range { lo, hi })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Script {
        Script::parse(text).unwrap()
    }

    /// The first command of the section selected for `key`, to tell sections apart.
    fn chosen(script: &Script, key: Key) -> Option<Vec<u8>> {
        let section = script.select(key)?;
        match &section.commands[0].1 {
            Command::Print { text, .. } => Some(text.clone()),
            other => panic!("test sections start with print, got {other:?}"),
        }
    }

    const SECTIONS: &str = "\
[default]
print default
[iteration *]
print star
[iteration 2]
print two
[iteration 3..5]
print three-to-five
[iteration 4..]
print four-on
[iteration 4]
print four
";

    #[test]
    fn exact_beats_range_beats_star() {
        let s = parse(SECTIONS);
        let it = |n| chosen(&s, Key::Iteration(Some(n)));
        assert_eq!(it(1).unwrap(), b"star");
        assert_eq!(it(2).unwrap(), b"two");
        assert_eq!(it(3).unwrap(), b"three-to-five");
        assert_eq!(it(4).unwrap(), b"four");
        // 5 is in both ranges; the first in the file wins.
        assert_eq!(it(5).unwrap(), b"three-to-five");
        assert_eq!(it(9).unwrap(), b"four-on");
    }

    #[test]
    fn default_catches_what_nothing_else_does() {
        let s = parse("[iteration 1]\nprint one\n[default]\nprint default\n");
        assert_eq!(chosen(&s, Key::Iteration(Some(1))).unwrap(), b"one");
        assert_eq!(chosen(&s, Key::Iteration(Some(2))).unwrap(), b"default");
        assert_eq!(chosen(&s, Key::Iteration(None)).unwrap(), b"default");
        assert_eq!(chosen(&s, Key::Call(1)).unwrap(), b"default");
    }

    #[test]
    fn no_matching_section_selects_nothing() {
        let s = parse("[iteration 1]\nprint one\n");
        assert!(s.select(Key::Iteration(Some(2))).is_none());
        assert!(s.select(Key::Iteration(None)).is_none());
    }

    #[test]
    fn call_sections_match_only_call_keys() {
        let s = parse("[call 1]\nprint c1\n[call 2..]\nprint c2\n[iteration 1]\nprint i1\n");
        assert!(s.uses_calls());
        assert_eq!(chosen(&s, Key::Call(1)).unwrap(), b"c1");
        assert_eq!(chosen(&s, Key::Call(7)).unwrap(), b"c2");
        assert_eq!(chosen(&s, Key::Iteration(Some(1))).unwrap(), b"i1");
        assert!(s.select(Key::Iteration(Some(2))).is_none());
    }

    #[test]
    fn a_script_without_headers_is_one_default_section() {
        let s = parse("# just commands\nprint hi\nexit 3\n");
        assert!(!s.uses_calls());
        let section = s.select(Key::Iteration(Some(42))).unwrap();
        assert_eq!(section.commands.len(), 2);
        assert_eq!(section.commands[1], (3, Command::Exit(3)));
    }

    #[test]
    fn commands_before_the_first_header_are_an_error() {
        let err = Script::parse("print hi\n[default]\n").unwrap_err();
        assert!(err.starts_with("1: "), "{err}");
    }

    #[test]
    fn errors_name_the_line() {
        let err = Script::parse("[default]\nprint ok\n\n# c\nfoo bar\n").unwrap_err();
        assert_eq!(err, "5: unknown command 'foo'");
        for bad in [
            "[iteration]",
            "[iteration x]",
            "[iteration 5..3]",
            "[calls 1]",
            "[default 1]",
        ] {
            assert!(Script::parse(bad).is_err(), "{bad} should be rejected");
        }
    }

    /// The example scripts in fixtures/scripts are for the lead's tests; keep them valid.
    #[test]
    fn every_fixture_script_parses() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/scripts");
        let mut count = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            if let Err(e) = Script::parse(&text) {
                panic!("{}:{e}", path.display());
            }
            count += 1;
        }
        assert!(count >= 3, "expected the example scripts in {dir}");
    }
}
