//! Option numbers typed as an answer (`2`, `1,3`): one rule for every way of answering.

use super::Question;

impl Question {
    /// The options a typed answer picks, when it is option numbers and nothing else: one
    /// (`2`), or for a multi-select question several (`1,3` or `1 3`). One rule for every
    /// such answer: numbers (digits, separated by commas or spaces) are always picks, and a
    /// pick that names no option ([`Picks::OutOfRange`], however big the number) or several
    /// for a question that takes one ([`Picks::NotOne`]) is refused, never sent as text. `None`
    /// for any other text, and for any text when the question offers no options. Each way of
    /// answering (`ralph answer`, the plain view, the panel's list) reads numbers this way.
    pub fn picks(&self, text: &str) -> Option<Picks> {
        if self.options.is_empty() {
            return None;
        }
        let words: Vec<&str> = text
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|s| !s.is_empty())
            .collect();
        if words.is_empty() || !words.iter().all(|w| w.bytes().all(|b| b.is_ascii_digit())) {
            return None;
        }
        if words.len() > 1 && !self.multi_select {
            return Some(Picks::NotOne(words.len()));
        }
        let mut labels: Vec<&str> = Vec::new();
        for word in words {
            let Some(option) = word.parse().ok().and_then(|n| self.resolve_option(n)) else {
                return Some(Picks::OutOfRange(word.to_owned()));
            };
            if !labels.contains(&option.label.as_str()) {
                labels.push(&option.label);
            }
        }
        Some(Picks::Labels(crate::desk::encode(&labels, "")))
    }
}

/// What option numbers typed as an answer pick: [`Question::picks`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Picks {
    /// The labels of the options picked, in the order typed, one per line
    /// ([`crate::desk::encode`]).
    Labels(String),
    /// A number that is no option's, as typed (it may be too big for any number type).
    OutOfRange(String),
    /// Several numbers (how many) for a question that takes one option.
    NotOne(usize),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::question::opts;

    #[test]
    fn picks_reads_option_numbers_and_nothing_else() {
        let one = Question {
            options: opts(&["Redis", "Memcached", "none"]),
            ..Question::plain("Q")
        };
        let labels = |s: &str| Some(Picks::Labels(s.into()));
        assert_eq!(one.picks("2"), labels("Memcached"));
        assert_eq!(one.picks(" 3\n"), labels("none"));
        assert_eq!(one.picks("4"), Some(Picks::OutOfRange("4".into())));
        assert_eq!(one.picks("0"), Some(Picks::OutOfRange("0".into())));
        // Regression (issue 25, item 10): a number too big for any option, and several
        // numbers for a question that takes one, were sent as the answer's text.
        let huge = "99999999999999999999";
        assert_eq!(one.picks(huge), Some(Picks::OutOfRange(huge.into())));
        assert_eq!(one.picks("1,3"), Some(Picks::NotOne(2)));
        for text in ["", "Redis", "2 nodes", "-1", "1.5"] {
            assert_eq!(one.picks(text), None, "{text:?}");
        }
        assert_eq!(Question::plain("Q").picks("1"), None);

        let many = Question {
            multi_select: true,
            ..one
        };
        assert_eq!(many.picks("1,3"), labels("Redis\nnone"));
        assert_eq!(many.picks("3 1, 3"), labels("none\nRedis"));
        assert_eq!(many.picks("1,5"), Some(Picks::OutOfRange("5".into())));
        assert_eq!(many.picks(" , "), None);
    }
}
