//! `ralph-mock-api`: a scripted stand-in for the model APIs of the coding-agent CLIs, so the
//! real CLIs can run offline in ralph's tests.
//!
//! # How it works
//!
//! [`Server::start`] listens on 127.0.0.1. A `POST` to a model API's path is a model call;
//! [`api::Api::route`] tells which API from the path: Anthropic Messages (Claude Code), OpenAI
//! Chat Completions (opencode), OpenAI Responses (Codex) or Gemini (Gemini CLI). `HEAD /` and
//! `GET /` answer 200 (Claude Code's reachability probe); anything else is a 404 naming it.
//!
//! Every model call is answered from a [`Scenario`]: an ordered list of rules, each matching a
//! call by its number and/or a substring of the newest user input (the user's words and the
//! results of the tools the model called), and replying with a model turn (text and tool
//! calls, streamed when the request asks for a stream) or an HTTP error. The scenario format is
//! the same for every API; each [`api`] module spells the turn its way. The CLI runs the tools
//! itself, so a scripted write really writes a file, and the tool's result comes back in the
//! next request, where a rule can match it.
//!
//! Every request is appended to a JSONL log (its number, the API, the rule that answered, the
//! working directory, the newest user input and the whole body) so a test can check what the
//! CLI sent.
//!
//! Modules: [`scenario`] (the file format and rule selection), [`reply`] (a turn settled for
//! one request), [`api`] (each API's requests and responses), [`http`] (minimal HTTP/1.1),
//! [`server`] (the accept loop, state and log).

#![forbid(unsafe_code)]

pub mod api;
pub mod http;
pub mod reply;
pub mod scenario;
pub mod server;
pub mod telegram;

pub use scenario::Scenario;
pub use server::Server;
