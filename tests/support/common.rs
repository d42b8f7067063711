//! Shared by the two test harnesses (`tests/e2e`, `tests/real-agents`): a binary of this
//! workspace that a test needs, built with cargo if a partial build left it out; and a child's
//! output read to the end on a thread of its own.

use std::io::Read;
use std::path::PathBuf;
use std::process::Command;
use std::thread::JoinHandle;

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

/// Reads `pipe` to its end on a thread, so that a child writing to two pipes never blocks on
/// the one not being read; the text (invalid UTF-8 ends it) when joined.
pub fn read_to_end_in_background(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = pipe.read_to_string(&mut s);
        s
    })
}
