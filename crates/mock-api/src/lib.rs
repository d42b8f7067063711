//! `ralph-mock-api`: a scripted stand-in for the Anthropic Messages API, so the real Claude Code
//! CLI can run offline in ralph's tests.
//!
//! # How it works
//!
//! [`Server::start`] listens on 127.0.0.1 and answers what Claude Code 2.1.x calls when
//! `ANTHROPIC_BASE_URL` points at it: `HEAD /` (a reachability probe) and
//! `POST /v1/messages?beta=true`. Every Messages call is answered from a [`Scenario`]: an ordered
//! list of rules, each matching a request by its number and/or a substring of the last user
//! message, and replying with a model turn (text and tool_use blocks, streamed as Server-Sent
//! Events when the request asks for a stream) or an HTTP error. The CLI runs the tools itself,
//! so a scripted `Write` really writes a file, and the tool's result comes back in the next
//! request, where a rule can match it.
//!
//! Every request is appended to a JSONL log (its number, the rule that answered, the working
//! directory, the last user message and the whole body) so a test can check what the CLI sent.
//!
//! Modules: [`scenario`] (the file format and rule selection), [`reply`] (SSE and JSON
//! rendering), [`http`] (minimal HTTP/1.1), [`server`] (the accept loop, state and log).

pub mod http;
pub mod reply;
pub mod scenario;
pub mod server;

pub use scenario::Scenario;
pub use server::Server;
