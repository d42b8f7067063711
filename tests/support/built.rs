//! Shared by the two test harnesses (`tests/e2e`, `tests/real-agents`): a binary of this
//! workspace that a test needs, built once with cargo if a partial build left it out.

use std::path::PathBuf;
use std::process::Command;

/// `path`, after `cargo ARGS` if it does not exist yet; fails the test if it still does not.
pub fn built(path: PathBuf, cargo_args: &[&str]) -> PathBuf {
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(cargo_args)
            .status()
            .expect("cargo runs");
        assert!(status.success(), "cargo {} failed", cargo_args.join(" "));
    }
    assert!(
        path.exists(),
        "{} is missing; run `make build`",
        path.display()
    );
    path
}
