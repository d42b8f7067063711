//! The `<ralph>…</ralph>` tags and a tiny ordered set of signal kinds.

use std::sync::LazyLock;

use memchr::memmem;

use crate::SignalKind;

/// Every tag starts so; searching for it first keeps the scan a single SIMD pass.
pub(crate) const OPEN: &[u8] = b"<ralph>";

/// What may follow [`OPEN`], and what it means.
const BODIES: [(&[u8], SignalKind); 4] = [
    (b"DONE</ralph>", SignalKind::Done),
    (b"QUESTION</ralph>", SignalKind::Question),
    (b"GUTTER</ralph>", SignalKind::Gutter),
    (b"COMPLETE</ralph>", SignalKind::Done),
];

/// Length of the longest tag (`<ralph>QUESTION</ralph>`, `<ralph>COMPLETE</ralph>`).
pub(crate) const TAG_MAX: usize = 23;

/// A shared searcher for [`OPEN`]: building one costs more than a short search.
pub(crate) static OPEN_FINDER: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(OPEN));

/// The tag at the start of `at`, if a whole one is there, and its length.
pub(crate) fn match_tag(at: &[u8]) -> Option<(SignalKind, usize)> {
    let rest = at.strip_prefix(OPEN)?;
    BODIES
        .iter()
        .find(|(body, _)| rest.starts_with(body))
        .map(|&(body, kind)| (kind, OPEN.len() + body.len()))
}

/// `line` without the whole signal tags in it: what the agent said around its signal, for a
/// one-line summary (`Done. <ralph>DONE</ralph>` is `Done. `; a line of only a tag is empty).
pub fn without_tags(line: &str) -> String {
    let bytes = line.as_bytes();
    let mut out = String::with_capacity(line.len());
    let (mut kept_from, mut at) = (0, 0);
    while let Some(i) = OPEN_FINDER.find(&bytes[at..]) {
        let start = at + i;
        match match_tag(&bytes[start..]) {
            // Tags are ASCII: their ends are character boundaries.
            Some((_, len)) => {
                out.push_str(&line[kept_from..start]);
                kept_from = start + len;
                at = kept_from;
            }
            None => at = start + OPEN.len(),
        }
    }
    out.push_str(&line[kept_from..]);
    out
}

/// Signal kinds in order of first appearance, each at most once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct KindSet {
    kinds: [Option<SignalKind>; 3],
}

impl KindSet {
    /// Adds `kind` unless it is already there.
    pub(crate) fn insert(&mut self, kind: SignalKind) {
        for slot in &mut self.kinds {
            match slot {
                Some(k) if *k == kind => return,
                Some(_) => {}
                None => {
                    *slot = Some(kind);
                    return;
                }
            }
        }
    }

    /// Adds every kind of `other`, keeping order.
    pub(crate) fn extend(&mut self, other: KindSet) {
        other.iter().for_each(|k| self.insert(k));
    }

    /// The kinds, in order of first appearance.
    pub(crate) fn iter(&self) -> impl Iterator<Item = SignalKind> + '_ {
        self.kinds.iter().map_while(|k| *k)
    }

    /// Whether no kind was added.
    pub(crate) fn is_empty(&self) -> bool {
        self.kinds[0].is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn match_tag_reads_each_tag_and_its_length() {
        assert_eq!(
            match_tag(b"<ralph>DONE</ralph> more"),
            Some((SignalKind::Done, 19))
        );
        assert_eq!(
            match_tag(b"<ralph>COMPLETE</ralph>"),
            Some((SignalKind::Done, TAG_MAX))
        );
        assert_eq!(
            match_tag(b"<ralph>QUESTION</ralph>"),
            Some((SignalKind::Question, TAG_MAX))
        );
        assert_eq!(
            match_tag(b"<ralph>GUTTER</ralph>"),
            Some((SignalKind::Gutter, 21))
        );
    }

    #[test]
    fn match_tag_rejects_near_misses() {
        for near in [
            &b"<ralph>done</ralph>"[..],
            b"<ralph> DONE</ralph>",
            b"<ralph>DONE </ralph>",
            b"<ralph>DONE</ralph",
            b"<Ralph>DONE</ralph>",
            b"<ralph>DONE</Ralph>",
            b"<ralph>",
            b"",
        ] {
            assert_eq!(match_tag(near), None, "{}", String::from_utf8_lossy(near));
        }
    }

    #[test]
    fn kind_set_keeps_first_appearance_order_without_duplicates() {
        let mut set = KindSet::default();
        assert!(set.is_empty());
        set.insert(SignalKind::Gutter);
        set.insert(SignalKind::Done);
        set.insert(SignalKind::Gutter);
        let mut other = KindSet::default();
        other.insert(SignalKind::Question);
        other.insert(SignalKind::Done);
        set.extend(other);
        assert_eq!(
            set.iter().collect::<Vec<_>>(),
            [SignalKind::Gutter, SignalKind::Done, SignalKind::Question]
        );
    }

    #[test]
    fn without_tags_keeps_the_words_and_whatever_is_not_a_whole_tag() {
        assert_eq!(without_tags("<ralph>QUESTION</ralph>"), "");
        assert_eq!(
            without_tags("All green. <ralph>DONE</ralph> Bye <ralph>GUTTER</ralph>"),
            "All green.  Bye "
        );
        assert_eq!(without_tags("<ralph><ralph>COMPLETE</ralph>é"), "<ralph>é");
        for near in [
            "<ralph>done</ralph>",
            "<ralph>DONE</ralph",
            "<ralph>",
            "é<Ralph>",
        ] {
            assert_eq!(without_tags(near), near);
        }
    }
}
