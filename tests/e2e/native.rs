//! `--agent claude-sdk`: Claude Code's own AskUserQuestion tool, answered by ralph as the host.
//!
//! A `claude` shim on PATH runs the fake agent, which speaks the real protocol: it reads the
//! prompt as a stream-json user message, prints a `control_request` (verbatim from Claude Code
//! 2.1.197), reads ralph's `control_response`, then finishes its turn.

use std::time::Duration;

use super::util::*;

const ASK: &str = r#"{"type":"system","subtype":"init","session_id":"sdk-1"}
{"type":"assistant","message":{"content":[{"type":"tool_use","id":"toolu_1","name":"AskUserQuestion","input":{"questions":[{"question":"Redis or Memcached?","header":"Cache","options":[{"label":"Redis","description":"Persistent"},{"label":"Memcached","description":"Volatile"}],"multiSelect":false}]}}]},"session_id":"sdk-1"}
{"type":"control_request","request_id":"c83776ac-0989-492e-b387-aa0e7c17d0ee","request":{"subtype":"can_use_tool","tool_name":"AskUserQuestion","display_name":"AskUserQuestion","input":{"questions":[{"question":"Redis or Memcached?","header":"Cache","options":[{"label":"Redis","description":"Persistent"},{"label":"Memcached","description":"Volatile"}],"multiSelect":false}]},"tool_use_id":"toolu_1"}}
"#;

const FINISH: &str = r#"{"type":"assistant","message":{"content":[{"type":"text","text":"Going with the answer.\n<ralph>DONE</ralph>"}]},"session_id":"sdk-1"}
{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"sdk-1","total_cost_usd":0.002}
"#;

const SCRIPT: &str = "\
[default]
no-stdin
read-line first-message.txt
stream-json ask.jsonl
read-line control-response.txt
stream-json finish.jsonl
read-line after-turn.txt
";

/// A project whose PATH has a `claude` that is really the scripted fake agent.
fn project(timeout: &str) -> (Project, String) {
    let p = Project::with_task(
        &format!(
            "task: Native\nmax_iterations: 1\nquestion_timeout: {timeout}\ntest_command: \"true\""
        ),
        "- [x] decided\n",
    );
    p.write("ask.jsonl", ASK);
    p.write("finish.jsonl", FINISH);
    p.write("agent-script.txt", SCRIPT);
    p.write(
        "bin/claude",
        &format!(
            "#!/bin/sh\nexec '{}' --script '{}'\n",
            fake_agent_bin().display(),
            p.path("agent-script.txt").display()
        ),
    );
    let shim = p.path("bin/claude");
    std::fs::set_permissions(&shim, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        p.path("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    (p, path)
}

#[test]
fn ask_user_question_is_shown_answered_and_the_answer_goes_back_on_stdin() {
    let (p, path) = project("1m");
    let mut cmd = p.ralph();
    cmd.env("PATH", &path)
        .args(["run", "--no-tui", "--agent", "claude-sdk"]);
    let child = spawn(cmd);
    let state = p.wait_for_status("waiting_input", Duration::from_secs(20));
    assert_eq!(state["pending_question"]["raised_by"], "tool");
    assert_eq!(state["pending_question"]["text"], "Redis or Memcached?");
    assert_eq!(
        state["pending_question"]["options"][1]["label"],
        "Memcached"
    );
    p.exec(&["answer", "1"]).expect_code(0);
    let run = Run::finish(child, Duration::from_secs(30));
    run.expect_code(0);

    let first: serde_json::Value = serde_json::from_str(&p.read("first-message.txt")).unwrap();
    assert_eq!(first["type"], "user");
    assert!(
        first["message"]["content"]
            .as_str()
            .unwrap()
            .contains("Native"),
        "the prompt"
    );
    let response: serde_json::Value =
        serde_json::from_str(&p.read("control-response.txt")).unwrap();
    assert_eq!(response["type"], "control_response");
    assert_eq!(
        response["response"]["request_id"],
        "c83776ac-0989-492e-b387-aa0e7c17d0ee"
    );
    let body = &response["response"]["response"];
    assert_eq!(body["behavior"], "allow");
    assert_eq!(
        body["updatedInput"]["answers"]["Redis or Memcached?"],
        "Redis"
    );
    // After the turn, stdin is closed: the agent read nothing more.
    assert_eq!(p.read("after-turn.txt"), "");
    assert!(
        p.read(".ralph/clarifications.md")
            .contains("Redis or Memcached?")
    );
}

#[test]
fn an_unanswered_native_question_is_refused_with_the_best_guess_instruction() {
    let (p, path) = project("300ms");
    let mut cmd = p.ralph();
    cmd.env("PATH", &path)
        .args(["run", "--no-tui", "--agent", "claude-sdk"]);
    let run = Run::finish(spawn(cmd), Duration::from_secs(30));
    run.expect_code(0);
    let response: serde_json::Value =
        serde_json::from_str(&p.read("control-response.txt")).unwrap();
    let body = &response["response"]["response"];
    assert_eq!(body["behavior"], "deny");
    assert!(
        body["message"].as_str().unwrap().contains("best guess"),
        "{body}"
    );
}
