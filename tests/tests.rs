//! End-to-end tests: the real `ralph` binary, driven against the scripted fake agent.
//!
//! One integration-test binary (as in ripgrep) with a module per area. `util` holds the
//! harness: a temporary project, a task file, a fake-agent script, and `ralph` runs with a
//! timeout so a hang fails the test instead of the CI run.

mod e2e;
