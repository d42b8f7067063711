//! `ralph run --agent opencode` with the real opencode CLI, over OpenAI Chat Completions: DONE,
//! a question delivered with `--session <id>`, and an API error.

use crate::harness::Cli;
use crate::protocol;

#[test]
#[ignore = "needs the real opencode CLI: run `make e2e`"]
fn done_with_the_box_checked_and_passing_tests_exits_0() {
    protocol::done(Cli::Opencode, "opencode");
}

#[test]
#[ignore = "needs the real opencode CLI: run `make e2e`"]
fn a_question_answered_from_another_process_resumes_the_session() {
    protocol::question_answered_by_resume(Cli::Opencode, "opencode");
}

#[test]
#[ignore = "needs the real opencode CLI: run `make e2e`"]
fn an_api_error_400_is_reported_and_not_looped_on() {
    protocol::api_error_stops(Cli::Opencode, "opencode", 400, "mock bad request");
}

#[test]
#[ignore = "needs the real opencode CLI: run `make e2e`"]
fn the_cli_under_test_is_the_version_installed() {
    assert_eq!(Cli::Opencode.version(), Cli::Opencode.installed_version());
}
