//! Real-agent end-to-end tests: `ralph run` with the real coding-agent CLIs, pinned and
//! installed from npm by `install.sh`, each talking to `ralph-mock-api` on 127.0.0.1.
//!
//! | module | preset | CLI | API the mock speaks |
//! | --- | --- | --- | --- |
//! | [`claude`] | `claude` | Claude Code 2.1.332 | Anthropic Messages |
//! | [`claude_sdk`] | `claude-sdk` | Claude Code 2.1.332 | Anthropic Messages |
//! | [`opencode`] | `opencode` | opencode 1.18.33 | OpenAI Chat Completions |
//! | [`codex`] | `codex` | Codex 0.171.0 | OpenAI Responses |
//! | [`gemini`] | `gemini` | Gemini CLI 0.61.0 | Gemini `streamGenerateContent` |
//!
//! Everything is offline: the mock stands in for the model API and is scripted per test
//! (`scenarios/`, one directory per CLI since each has its own tool names), each CLI's other
//! traffic is switched off by its config and environment ([`clis`]), and `HOME` and `TMPDIR`
//! are scratch directories. The CLIs themselves are real: they read ralph's prompt, run the
//! scripted tool calls (a write really writes), stream their JSON to ralph, and send the mock
//! what a real model would see, which the mock logs for the assertions. [`protocol`] holds the
//! scenarios every CLI runs: DONE, a question delivered by resuming the session, an API error.
//!
//! The CLIs take about 900 MB (Claude Code 235, opencode 180, Codex 405, Gemini CLI 100), so
//! these tests are `#[ignore]`d and not part of `make test`. Run them with `make e2e`, or:
//!
//! ```sh
//! tests/real-agents/install.sh        # or: install.sh claude codex
//! cargo build --bin ralph
//! cargo test -p ralph-mock-api --test real_agents -- --ignored   # or: -- --ignored codex::
//! ```

mod claude;
mod claude_sdk;
mod clis;
mod codex;
mod gemini;
mod harness;
mod opencode;
mod protocol;
