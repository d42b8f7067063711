//! `ralph run --agent codex` with the real Codex CLI, over OpenAI Responses: DONE, a question
//! delivered with `codex exec resume <id>`, and an API error.

use crate::harness::Cli;
use crate::protocol;

#[test]
#[ignore = "needs the real Codex CLI: run `make e2e`"]
fn done_with_the_box_checked_and_passing_tests_exits_0() {
    protocol::done(Cli::Codex, "codex");
}

#[test]
#[ignore = "needs the real Codex CLI: run `make e2e`"]
fn a_question_answered_from_another_process_resumes_the_session() {
    protocol::question_answered_by_resume(Cli::Codex, "codex");
}

#[test]
#[ignore = "needs the real Codex CLI: run `make e2e`"]
fn an_api_error_400_is_reported_and_not_looped_on() {
    protocol::api_error_stops(Cli::Codex, "codex", 400, "mock bad request");
}

#[test]
#[ignore = "needs the real Codex CLI: run `make e2e`"]
fn the_cli_under_test_is_the_version_installed() {
    assert_eq!(
        Cli::Codex.version(),
        format!("codex-cli {}", Cli::Codex.installed_version())
    );
}
