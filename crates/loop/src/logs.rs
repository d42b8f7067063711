//! `.ralph/logs/`: each run's prompts and raw agent output, named by run and iteration, kept
//! within a budget.
//!
//! Every `ralph run` in a workspace takes the next run number; its files are
//! `run-NNNN-iter-NNNN.prompt.md`, `.out` and `.err`, with `-2`, `-3`, … for a further attempt
//! at the same iteration (a retry after a rate limit). Files from before runs were numbered
//! (`iter-NNNN…`) count as run 0, the oldest.
//!
//! The budget ([`LogBudget`]: the newest `keep_runs` runs, and `max_mib` in all) is applied
//! when a run starts and then at most once a minute: the oldest runs go first, whole; when the
//! running one alone is over the size, its oldest files go, never those of the iteration that
//! runs now. Without it, a loop left running for days filled the disk with output nobody reads.

use std::path::{Path, PathBuf};

/// How much of `.ralph/logs/` is kept (`.ralph/config.toml`: `keep_log_runs`, `max_log_mib`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogBudget {
    /// The newest runs kept, the running one included (at least 1).
    pub keep_runs: u32,
    /// The most the directory may hold, in MiB.
    pub max_mib: u64,
}

impl Default for LogBudget {
    fn default() -> Self {
        LogBudget {
            keep_runs: 20,
            max_mib: 500,
        }
    }
}

const MIB: u64 = 1024 * 1024;

/// The most one stream (`.out` or `.err`) of one agent run keeps, however large the budget.
pub const MAX_STREAM_BYTES: u64 = 256 * MIB;

/// The least one stream keeps, however small the budget: enough to see how the agent began
/// and why it was cut.
pub const MIN_STREAM_BYTES: u64 = 64 * 1024;

impl LogBudget {
    /// The most one stream (`.out` or `.err`) of one agent run keeps: half of `max_mib`, so that
    /// an iteration's two streams together fit in the budget (pruning never removes the running
    /// iteration's files), from [`MIN_STREAM_BYTES`] to [`MAX_STREAM_BYTES`]. Past it the log
    /// is cut with a note; what the agent prints is still read, shown and parsed.
    pub fn stream_cap(&self) -> u64 {
        (self.max_mib.saturating_mul(MIB) / 2).clamp(MIN_STREAM_BYTES, MAX_STREAM_BYTES)
    }
}

/// One file in `.ralph/logs/`, by the run and the iteration it belongs to.
#[derive(Debug)]
struct LogFile {
    path: PathBuf,
    run: u32,
    iteration: u32,
    size: u64,
}

/// What a prune removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Freed {
    /// Files removed.
    pub files: usize,
    /// Bytes freed.
    pub bytes: u64,
}

/// The run and iteration a log file's name gives: `run-0003-iter-0012-2.out` is run 3,
/// iteration 12; `iter-0012.out`, from before runs were numbered, run 0.
fn parse_name(name: &str) -> Option<(u32, u32)> {
    let (run, rest) = match name.strip_prefix("run-") {
        Some(rest) => {
            let (run, rest) = rest.split_once('-')?;
            (run.parse().ok()?, rest)
        }
        None => (0, name),
    };
    let digits = rest.strip_prefix("iter-")?;
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    Some((run, digits[..end].parse().ok()?))
}

/// The file stem of an attempt's files: `run-0003-iter-0012`, or `…-2` for a second attempt.
pub fn stem(run: u32, iteration: u32, attempt: u32) -> String {
    match attempt {
        0 | 1 => format!("run-{run:04}-iter-{iteration:04}"),
        n => format!("run-{run:04}-iter-{iteration:04}-{n}"),
    }
}

fn list(dir: &Path) -> Vec<LogFile> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let (run, iteration) = parse_name(entry.file_name().to_str()?)?;
            let meta = entry.metadata().ok().filter(std::fs::Metadata::is_file)?;
            Some(LogFile {
                path: entry.path(),
                run,
                iteration,
                size: meta.len(),
            })
        })
        .collect()
}

/// The number the next run in `dir` takes: one past the highest there.
pub fn next_run(dir: &Path) -> u32 {
    list(dir)
        .iter()
        .map(|f| f.run)
        .max()
        .unwrap_or(0)
        .saturating_add(1)
}

/// One attempt's agent output file (`.out`) in `.ralph/logs/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputFile {
    /// Where it is.
    pub path: PathBuf,
    /// The run it belongs to.
    pub run: u32,
    /// The iteration.
    pub iteration: u32,
    /// Which attempt at the iteration, from 1 (a retry after a rate limit is 2).
    pub attempt: u32,
}

/// The attempt a log file's name gives: `run-0003-iter-0012-2.out` is the second, a name
/// without a number after the iteration the first.
fn parse_attempt(name: &str) -> u32 {
    let stem = name.split('.').next().unwrap_or(name);
    let after_iter = stem.rsplit_once("iter-").map_or("", |(_, rest)| rest);
    after_iter
        .split_once('-')
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or(1)
}

/// The newest agent output in `dir` (`.ralph/logs/`): the last attempt at the last iteration of
/// the last run, which is what the running loop writes to now.
pub fn latest_output(dir: &Path) -> Option<OutputFile> {
    list(dir)
        .into_iter()
        .filter(|f| f.path.extension().is_some_and(|e| e == "out"))
        .filter_map(|f| {
            Some(OutputFile {
                attempt: parse_attempt(f.path.file_name()?.to_str()?),
                path: f.path,
                run: f.run,
                iteration: f.iteration,
            })
        })
        .max_by_key(|f| (f.run, f.iteration, f.attempt))
}

/// Brings `dir` within `budget`, sparing run `current`'s files of iteration `iteration`.
pub fn prune(dir: &Path, current: u32, iteration: u32, budget: LogBudget) -> Freed {
    let mut files = list(dir);
    // Oldest first: by run, then iteration.
    files.sort_by_key(|f| (f.run, f.iteration, f.path.clone()));
    let mut runs: Vec<u32> = files.iter().map(|f| f.run).collect();
    runs.dedup();
    let older: Vec<u32> = runs.into_iter().filter(|&r| r != current).collect();
    let keep_older = budget.keep_runs.saturating_sub(1) as usize;
    let dropped_runs = &older[..older.len().saturating_sub(keep_older)];
    let max_bytes = budget.max_mib.saturating_mul(1024 * 1024);
    let mut total: u64 = files.iter().map(|f| f.size).sum();
    let mut pruned = Freed::default();
    for file in &files {
        let spared = file.run == current && file.iteration >= iteration;
        let over_count = dropped_runs.contains(&file.run);
        if spared || !(over_count || total > max_bytes) {
            continue;
        }
        if std::fs::remove_file(&file.path).is_ok() {
            total -= file.size;
            pruned.files += 1;
            pruned.bytes += file.size;
        }
    }
    pruned
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_keeps_half_the_budget_within_bounds() {
        let cap = |max_mib| {
            LogBudget {
                keep_runs: 1,
                max_mib,
            }
            .stream_cap()
        };
        assert_eq!(cap(1), 512 * 1024);
        assert_eq!(cap(500), 250 * MIB);
        assert_eq!(cap(10_000), MAX_STREAM_BYTES);
        assert_eq!(cap(0), MIN_STREAM_BYTES);
        assert_eq!(cap(u64::MAX), MAX_STREAM_BYTES);
    }

    #[test]
    fn names_give_the_run_and_the_iteration() {
        assert_eq!(parse_name("run-0003-iter-0012-2.out"), Some((3, 12)));
        assert_eq!(
            parse_name("run-12345-iter-0001.prompt.md"),
            Some((12345, 1))
        );
        assert_eq!(parse_name("iter-0007.err"), Some((0, 7)));
        assert_eq!(parse_name(".tmp-abc"), None);
        assert_eq!(parse_name("notes.txt"), None);
        assert_eq!(stem(3, 12, 1), "run-0003-iter-0012");
        assert_eq!(parse_attempt("run-0003-iter-0012-2.out"), 2);
        assert_eq!(parse_attempt("run-0003-iter-0012.out"), 1);
        assert_eq!(parse_attempt("iter-0012.err"), 1);
        assert_eq!(stem(3, 12, 2), "run-0003-iter-0012-2");
    }

    /// Regression (issue 25, item 15): `.ralph/logs` grew without limit, a log per iteration
    /// and per retry, across every run.
    #[test]
    fn the_oldest_runs_go_first_then_the_running_one_s_oldest_files() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, kib: usize| {
            std::fs::write(dir.path().join(name), vec![b'x'; kib * 1024]).unwrap()
        };
        write("iter-0001.out", 1);
        for run in 1..=4 {
            write(&format!("{}.out", stem(run, 1, 1)), 1);
        }
        write("unrelated.txt", 1);
        assert_eq!(next_run(dir.path()), 5);
        let budget = LogBudget {
            keep_runs: 3,
            max_mib: 1,
        };
        let pruned = prune(dir.path(), 5, 1, budget);
        assert_eq!(pruned.files, 3, "run 0, 1 and 2 go: 3 and 4 stay, with 5");
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "run-0003-iter-0001.out",
                "run-0004-iter-0001.out",
                "unrelated.txt"
            ]
        );

        // Over the size with the running run alone: its oldest files go, the current
        // iteration's never.
        for iteration in 1..=3 {
            write(&format!("{}.out", stem(5, iteration, 1)), 400);
        }
        let pruned = prune(dir.path(), 5, 3, budget);
        assert!(!dir.path().join("run-0003-iter-0001.out").exists());
        assert!(!dir.path().join("run-0005-iter-0001.out").exists());
        assert!(dir.path().join("run-0005-iter-0002.out").exists());
        assert!(dir.path().join("run-0005-iter-0003.out").exists());
        assert_eq!(pruned.files, 3);
        let pruned = prune(
            dir.path(),
            5,
            3,
            LogBudget {
                max_mib: 0,
                ..budget
            },
        );
        assert!(dir.path().join("run-0005-iter-0003.out").exists());
        assert_eq!(pruned.files, 1);
    }
}
