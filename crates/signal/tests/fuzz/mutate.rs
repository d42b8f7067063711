//! Seeded byte-level mutation for property-based fuzzing, shared by the fuzz targets of
//! `ralph-signal` and `ralph-loop` (the latter includes this file by path).
//!
//! cargo-fuzz needs a nightly toolchain with libFuzzer; this is the stable stand-in: a corpus of
//! real files (the repository's fixtures) as seeds, mutated the way a coverage-guided fuzzer
//! would (insert, delete, flip, duplicate, splice, truncate, insert a dictionary token), with a
//! fixed number of cases. `PROPTEST_CASES` sets the count (`make fuzz` uses 20000); without it
//! a small count keeps `make test` quick. Each target prints how many inputs it ran.

use std::cell::Cell;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// Cases per target when `PROPTEST_CASES` is not set.
const DEFAULT_CASES: u32 = 96;

/// Seeds larger than this are cut: the fuzzer is after structure, not volume.
const SEED_CAP: usize = 16 * 1024;

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every regular file under `dir` (recursively), sorted, each cut to [`SEED_CAP`] bytes.
pub fn corpus(dir: &Path) -> Vec<Vec<u8>> {
    let mut paths = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_none_or(|x| x != "snap" && x != "expect") {
                paths.push(p);
            }
        }
    }
    paths.sort();
    paths
        .into_iter()
        .filter_map(|p| std::fs::read(p).ok())
        .map(|mut b| {
            b.truncate(SEED_CAP);
            b
        })
        .collect()
}

/// One edit to an input; positions are taken modulo the input's length.
#[derive(Debug, Clone)]
pub enum Mutation {
    Insert(usize, Vec<u8>),
    Token(usize, usize),
    Delete(usize, usize),
    Flip(usize, u8),
    Duplicate(usize, usize, usize),
    Splice(usize, usize, usize, usize),
    Truncate(usize),
}

fn mutation(tokens: usize, seeds: usize) -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<usize>(), prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(at, b)| Mutation::Insert(at, b)),
        4 => (any::<usize>(), 0..tokens).prop_map(|(at, t)| Mutation::Token(at, t)),
        2 => (any::<usize>(), 1..64usize).prop_map(|(at, n)| Mutation::Delete(at, n)),
        2 => (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Mutation::Flip(at, b)),
        1 => (any::<usize>(), 1..256usize, any::<usize>())
            .prop_map(|(at, n, to)| Mutation::Duplicate(at, n, to)),
        1 => (0..seeds, any::<usize>(), 1..512usize, any::<usize>())
            .prop_map(|(s, at, n, to)| Mutation::Splice(s, at, n, to)),
        1 => any::<usize>().prop_map(Mutation::Truncate),
    ]
}

/// Applies `edits` to a copy of `seed`.
pub fn apply(seed: &[u8], edits: &[Mutation], tokens: &[&[u8]], seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for edit in edits {
        let at = |i: usize, b: &Vec<u8>| i % (b.len() + 1);
        match edit {
            Mutation::Insert(i, bytes) => {
                let i = at(*i, &b);
                b.splice(i..i, bytes.iter().copied());
            }
            Mutation::Token(i, t) => {
                let i = at(*i, &b);
                b.splice(i..i, tokens[*t].iter().copied());
            }
            Mutation::Delete(i, n) => {
                let i = at(*i, &b);
                let end = (i + n).min(b.len());
                b.drain(i..end);
            }
            Mutation::Flip(i, x) => {
                if !b.is_empty() {
                    let i = i % b.len();
                    b[i] ^= x | 1;
                }
            }
            Mutation::Duplicate(i, n, to) => {
                let i = at(*i, &b);
                let part = b[i..(i + n).min(b.len())].to_vec();
                let to = at(*to, &b);
                b.splice(to..to, part);
            }
            Mutation::Splice(s, i, n, to) => {
                let other = &seeds[*s];
                let i = i % (other.len() + 1);
                let part = &other[i..(i + n).min(other.len())];
                let to = at(*to, &b);
                b.splice(to..to, part.iter().copied());
            }
            Mutation::Truncate(i) => {
                let i = at(*i, &b);
                b.truncate(i.max(b.len() / 2));
            }
        }
    }
    b
}

/// Inputs: a seed from `seeds`, with up to 23 mutations (sometimes none, so every seed is
/// also tried as it is).
pub fn mutated(
    seeds: Vec<Vec<u8>>,
    tokens: &'static [&'static [u8]],
) -> impl Strategy<Value = Vec<u8>> {
    assert!(!seeds.is_empty(), "no seeds");
    let n = seeds.len();
    let seeds = std::sync::Arc::new(seeds);
    (
        0..n,
        prop::collection::vec(mutation(tokens.len(), n), 0..24),
    )
        .prop_map(move |(s, edits)| apply(&seeds[s], &edits, tokens, &seeds))
}

/// The runner's configuration: `PROPTEST_CASES` or [`DEFAULT_CASES`]; no failure files (a
/// failure found becomes a named regression test instead).
pub fn config() -> Config {
    let mut c = Config::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        c.cases = DEFAULT_CASES;
    }
    c.failure_persistence = None;
    c
}

/// Runs `test` on inputs from `strategy`, prints how many it ran, and fails on the first
/// counterexample (shrunk).
pub fn fuzz<S: Strategy>(
    name: &str,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    let count = Cell::new(0u64);
    let started = std::time::Instant::now();
    let result = TestRunner::new(config()).run(&strategy, |v| {
        count.set(count.get() + 1);
        test(v)
    });
    eprintln!(
        "fuzz {name}: {} executions in {:.1?}",
        count.get(),
        started.elapsed()
    );
    if let Err(e) = result {
        panic!("fuzz {name}: {e}");
    }
}
