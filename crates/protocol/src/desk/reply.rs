//! How an answer is written, whoever gives it: one encoding and one size limit.
//!
//! A front end (the panel, `ralph answer`, the web page, Telegram) turns what its human did
//! into a [`Reply`] and hands it to [`compose`], which checks it and writes the answer's text:
//! the labels of the options picked, one per line, then the note after a blank line
//! (`docs/protocol.md`). [`read_back`] reads that text again (for `ralph ask --json`'s
//! `picks`). Every refusal comes from [`Refusal`], so the same bad answer gets the same words
//! from every front end.

use crate::question::Question;

/// The largest answer taken, in bytes, from any front end (the labels and the note together).
///
/// Small enough for the web page's request, a Telegram message's worth many times over, and far
/// more than a person types; a longer answer belongs in a file in the project, named in the
/// answer.
pub const MAX_ANSWER_BYTES: usize = 16 * 1024;

/// What a human did to answer: wrote text, or picked options (by number, from 1) and perhaps
/// added a note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Free text (typed option numbers are not read here: see [`Question::picks`]).
    Text(String),
    /// Options by number, from 1, in the order picked, with a note (may be empty).
    Picks(Vec<usize>, String),
}

/// Why an answer was refused, in the words every front end shows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Nothing to read in it (blank, or only invisible characters).
    #[error(
        "the answer is empty. Write one, pick an option, or let the deadline pass so the agent uses its best guess."
    )]
    Empty,
    /// Over [`MAX_ANSWER_BYTES`].
    #[error(
        "the answer is too long: {size} bytes, more than the {MAX_ANSWER_BYTES} bytes an answer may have. Put the long part in a file in the project and answer with its path."
    )]
    TooLong {
        /// Its size in bytes.
        size: u64,
    },
    /// Options picked where there are none.
    #[error("the question offers no options to pick from; write the answer out instead")]
    NoOptions,
    /// Several options picked for a question that takes one.
    #[error("this question takes one option, and {count} were picked: pick one")]
    NotOne {
        /// How many were picked.
        count: usize,
    },
    /// The same option picked twice (`1,1`).
    #[error("option {pick} is picked twice: pick each option once")]
    Twice {
        /// The number picked twice.
        pick: usize,
    },
    /// A number that is no option's.
    #[error("option {pick} is out of range: the question has options 1 to {count}")]
    OutOfRange {
        /// The number as given.
        pick: String,
        /// How many options there are.
        count: usize,
    },
}

/// The answer's text for `reply` to `question` (`None`: guidance with no question), checked:
/// picks named by label, one per line, then the note; [`MAX_ANSWER_BYTES`] at most.
pub fn compose(question: Option<&Question>, reply: &Reply) -> Result<String, Refusal> {
    let text = match reply {
        Reply::Text(text) => text.trim().to_string(),
        Reply::Picks(picked, note) => {
            let options = question.map_or(&[][..], |q| &q.options[..]);
            if options.is_empty() {
                return Err(Refusal::NoOptions);
            }
            if picked.len() > 1 && !question.is_some_and(|q| q.multi_select) {
                return Err(Refusal::NotOne {
                    count: picked.len(),
                });
            }
            let mut labels: Vec<&str> = Vec::new();
            for &n in picked {
                let Some(option) = n.checked_sub(1).and_then(|i| options.get(i)) else {
                    return Err(Refusal::OutOfRange {
                        pick: n.to_string(),
                        count: options.len(),
                    });
                };
                if labels.contains(&option.label.as_str()) {
                    return Err(Refusal::Twice { pick: n });
                }
                labels.push(&option.label);
            }
            encode(&labels, note)
        }
    };
    check(&text)?;
    Ok(text)
}

/// Refuses an answer's text that is empty (nothing visible in it) or over
/// [`MAX_ANSWER_BYTES`]: the one place both are checked.
pub(crate) fn check(text: &str) -> Result<(), Refusal> {
    if text.len() > MAX_ANSWER_BYTES {
        return Err(Refusal::TooLong {
            size: text.len() as u64,
        });
    }
    if !text.chars().any(is_visible) {
        return Err(Refusal::Empty);
    }
    Ok(())
}

/// Whether `c` shows as something: not white space, not a control or format character.
fn is_visible(c: char) -> bool {
    !c.is_whitespace() && !c.is_control() && !crate::text::is_invisible(c)
}

/// The answer that picks `labels` (in order) with an optional `note`: one label per line, so
/// a label with a comma in it stays one pick, then the note after a blank line.
pub fn encode(labels: &[&str], note: &str) -> String {
    let note = note.trim();
    let mut out = labels.join("\n");
    if !note.is_empty() {
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(note);
    }
    out
}

/// What an answer picked, read back: the option labels its first lines are (one label per
/// line, as [`encode`] writes them), and the rest as a note (`None` when there is none). An
/// answer that starts with no label is all note.
pub fn read_back<'a>(question: &'a Question, answer: &'a str) -> (Vec<&'a str>, Option<&'a str>) {
    let mut picks: Vec<&str> = Vec::new();
    let mut rest = answer.trim();
    loop {
        // The longest label that is the whole next line (or lines: a label may hold a line
        // break), so a label that starts another is never taken for it.
        let found = question
            .options
            .iter()
            .map(|o| o.label.as_str())
            .filter(|l| {
                !l.is_empty()
                    && rest
                        .strip_prefix(l)
                        .is_some_and(|after| after.is_empty() || after.starts_with('\n'))
            })
            .max_by_key(|l| l.len());
        let Some(label) = found else { break };
        if !picks.contains(&label) {
            picks.push(label);
        }
        rest = rest[label.len()..].strip_prefix('\n').unwrap_or_default();
        if rest.starts_with('\n') || rest.is_empty() {
            break;
        }
    }
    let note = rest.trim();
    (picks, (!note.is_empty()).then_some(note))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::question::QuestionOption;

    fn cache(multi: bool) -> Question {
        Question {
            options: ["Redis", "Valkey", "Memcached, sharded"]
                .into_iter()
                .map(QuestionOption::new)
                .collect(),
            multi_select: multi,
            ..Question::plain("Which caches?")
        }
    }

    /// Regression (issue 31): the page and Telegram wrote `Redis, Valkey: both`, so
    /// `ralph ask --multi-select --json` answered from a phone printed `"picks": []`.
    #[test]
    fn picks_are_one_label_per_line_then_the_note_and_read_back() {
        let q = cache(true);
        let text = compose(Some(&q), &Reply::Picks(vec![1, 2], " both ".into())).unwrap();
        assert_eq!(text, "Redis\nValkey\n\nboth");
        assert_eq!(
            read_back(&q, &text),
            (vec!["Redis", "Valkey"], Some("both"))
        );
        let text = compose(Some(&q), &Reply::Picks(vec![3], String::new())).unwrap();
        assert_eq!(read_back(&q, &text), (vec!["Memcached, sharded"], None));
    }

    #[test]
    fn every_refusal_has_its_words() {
        let one = cache(false);
        let picks = |p: Vec<usize>| compose(Some(&one), &Reply::Picks(p, String::new()));
        assert_eq!(picks(vec![1, 2]), Err(Refusal::NotOne { count: 2 }));
        assert_eq!(
            picks(vec![4]).unwrap_err().to_string(),
            "option 4 is out of range: the question has options 1 to 3"
        );
        assert_eq!(
            compose(
                Some(&Question::plain("Q")),
                &Reply::Picks(vec![1], String::new())
            ),
            Err(Refusal::NoOptions)
        );
        assert_eq!(
            compose(None, &Reply::Text(" \n\t".into())),
            Err(Refusal::Empty)
        );
        assert_eq!(
            compose(None, &Reply::Text("\0\0\u{200b}".into())),
            Err(Refusal::Empty)
        );
        assert_eq!(compose(None, &Reply::Text("ok".into())), Ok("ok".into()));
    }

    #[test]
    fn one_limit_for_every_answer() {
        let just = "x".repeat(MAX_ANSWER_BYTES);
        assert_eq!(compose(None, &Reply::Text(just.clone())), Ok(just));
        let over = "x".repeat(MAX_ANSWER_BYTES + 1);
        let refused = compose(None, &Reply::Text(over)).unwrap_err();
        assert_eq!(
            refused,
            Refusal::TooLong {
                size: MAX_ANSWER_BYTES as u64 + 1
            }
        );
        assert!(refused.to_string().contains("too long"), "{refused}");
        // The note counts with the labels.
        let q = cache(true);
        let note = "y".repeat(MAX_ANSWER_BYTES);
        assert!(matches!(
            compose(Some(&q), &Reply::Picks(vec![1], note)),
            Err(Refusal::TooLong { .. })
        ));
    }

    /// Regression (issue 25, item 12): picks were joined with `, `, so two picks read the same
    /// as one label with a comma in it.
    #[test]
    fn picked_labels_with_commas_stay_apart_and_read_back() {
        let q = Question {
            options: [
                "Redis, clustered",
                "Memcached",
                "Memcached, sharded",
                "two\nlines",
            ]
            .into_iter()
            .map(QuestionOption::new)
            .collect(),
            multi_select: true,
            ..Question::plain("Which?")
        };
        let answer = encode(
            &["Memcached, sharded", "two\nlines", "Redis, clustered"],
            "a TTL, please\nand logs",
        );
        assert_eq!(
            answer,
            "Memcached, sharded\ntwo\nlines\nRedis, clustered\n\na TTL, please\nand logs"
        );
        assert_eq!(
            read_back(&q, &answer),
            (
                vec!["Memcached, sharded", "two\nlines", "Redis, clustered"],
                Some("a TTL, please\nand logs")
            )
        );
        assert_eq!(read_back(&q, "Memcached\n"), (vec!["Memcached"], None));
        assert_eq!(
            read_back(&q, "Memcached, please"),
            (vec![], Some("Memcached, please"))
        );
        assert_eq!(read_back(&q, "Redis"), (vec![], Some("Redis")));
        assert_eq!(encode(&[], " just text "), "just text");
    }
}
