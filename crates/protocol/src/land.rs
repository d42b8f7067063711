//! When a worktree loop's finished work goes onto its target branch: the task file's `land:`,
//! `ralph run --land`, and a fleet's landing mode, one type for all three.

use serde::{Deserialize, Serialize};

/// `land` (and `--land`, and a fleet's landing mode): when a worktree loop's work goes onto its
/// target branch. Written as the word the task file and `--land` take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LandMode {
    /// Only by `ralph land` (or `l` in the fleet view).
    Manual,
    /// As soon as DONE is verified (in a fleet, one loop at a time per repository).
    Auto,
    /// As soon as DONE is verified, as a pull request (`gh pr create`).
    #[serde(rename = "pr")]
    PullRequest,
}

impl LandMode {
    /// The word `land:` and `--land` take.
    pub fn as_str(self) -> &'static str {
        match self {
            LandMode::Manual => "manual",
            LandMode::Auto => "auto",
            LandMode::PullRequest => "pr",
        }
    }

    /// Whether a loop must also have landed to count as finished well.
    pub fn lands(self) -> bool {
        self != LandMode::Manual
    }
}
