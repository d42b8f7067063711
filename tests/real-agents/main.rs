//! Real-agent end-to-end tests: `ralph run --agent claude` with the real Claude Code CLI
//! (pinned `@anthropic-ai/claude-code@2.1.197`), talking to `ralph-mock-api` on 127.0.0.1.
//!
//! Everything is offline: the mock stands in for the Anthropic API and is scripted per test
//! (`scenarios/*.json`), the CLI's other traffic is switched off by environment variables, and
//! `HOME` is a scratch directory. The CLI itself is real: it reads ralph's prompt from stdin,
//! runs the scripted tool calls (a `Write` really writes), streams stream-json to ralph, and
//! sends the mock what a real model would see, which the mock logs for the assertions.
//!
//! The CLI is installed by `install.sh` (about 235 MB, from npm), so these tests are
//! `#[ignore]`d and not part of `make test`. Run them with `make e2e`, or:
//!
//! ```sh
//! tests/real-agents/install.sh
//! cargo build --bin ralph
//! cargo test -p ralph-mock-api --test real_agents -- --ignored
//! ```

mod claude;
mod harness;
