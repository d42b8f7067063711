//! Valid task files, and what they mean.

use std::path::Path;
use std::time::Duration;

use ralph_protocol::Criterion;

use super::{fixtures, markdown_files, parse};
use crate::task::{Key, NotifySettings, OnQuestionTimeout, TaskFile, Wait, WarningKind};

fn load(name: &str) -> TaskFile {
    let path = fixtures("good-tasks").join(name);
    TaskFile::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// (checked, line, text) of each criterion, for compact assertions.
fn boxes(task: &TaskFile) -> Vec<(bool, usize, &str)> {
    task.criteria
        .iter()
        .map(|c| (c.checked, c.line, c.text.as_str()))
        .collect()
}

#[test]
fn every_good_task_fixture_parses() {
    let files = markdown_files(&fixtures("good-tasks"));
    assert!(files.len() >= 10);
    for file in files {
        if let Err(e) = TaskFile::load(&file) {
            panic!("{e}");
        }
    }
}

#[test]
fn shipped_example_parses_without_warnings_and_documents_every_key() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../RALPH_TASK.md.example");
    let task = TaskFile::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert!(task.warnings.is_empty(), "{:?}", task.warnings);
    assert!(!task.task.is_empty());
    assert!(task.test_command.is_some());
    assert!(task.unchecked().count() >= 3);
    let text = std::fs::read_to_string(&path).unwrap();
    for key in Key::ALL {
        // Set or commented out, each key is there with a comment above it.
        let at = text
            .find(&format!("\n{}:", key.name()))
            .or_else(|| text.find(&format!("\n# {}:", key.name())))
            .unwrap_or_else(|| panic!("{} is not in the example", key.name()));
        let comment_above = text[..at].lines().last().unwrap_or("");
        assert!(
            comment_above.starts_with('#'),
            "{} has no comment",
            key.name()
        );
    }
}

#[test]
fn minimal_task_file_gets_every_default() {
    let task = load("minimal.md");
    assert_eq!(task.task, "Fix the flaky login test");
    assert!(task.completion_criteria.is_empty());
    assert_eq!(task.max_iterations, 10);
    assert_eq!(task.test_command, None);
    assert_eq!(task.agent, None);
    assert!(task.agent_args.is_empty());
    assert_eq!(task.model, None);
    assert_eq!(task.question_timeout, Wait::For(Duration::from_secs(300)));
    assert_eq!(task.iteration_timeout, Wait::For(Duration::from_secs(1800)));
    assert_eq!(task.test_timeout, Duration::from_secs(600));
    assert_eq!(task.on_question_timeout, OnQuestionTimeout::Continue);
    assert_eq!(task.max_consecutive_failures, 3);
    assert_eq!(task.max_cost_usd, None);
    assert_eq!(task.notify, NotifySettings::default());
    assert!(task.notify.bell && task.notify.desktop_notification);
    assert!(task.criteria.is_empty());
    assert_eq!(task.body, "");
    // With neither checkboxes nor a test command, nothing would check a DONE: it is said.
    let kinds: Vec<_> = task.warnings.iter().map(|w| &w.kind).collect();
    assert_eq!(
        kinds,
        [&WarningKind::NothingToCheck {
            listed_criteria: false
        }]
    );
}

/// A task with no checkbox and no test_command ran to "DONE accepted: every criterion is
/// checked" on the agent's word alone, and nothing said so before it started.
#[test]
fn a_task_nothing_can_check_is_warned_about_at_its_body() {
    let warned = |text: &str| {
        parse(text)
            .unwrap()
            .warnings
            .into_iter()
            .find(|w| matches!(w.kind, WarningKind::NothingToCheck { .. }))
    };
    let w = warned("---\ntask: x\n---\nJust do it.\n").unwrap();
    assert_eq!((w.line, w.column), (4, 1));
    assert!(
        w.with_fix().ends_with(
            "so the agent's word is taken for it. To have ralph check the work, write the criteria as checkboxes below the frontmatter (- [ ] the tests pass), or set a test_command"
        ),
        "{}",
        w.with_fix()
    );
    let listed = warned("---\ntask: x\ncompletion_criteria: [it works]\n---\n").unwrap();
    assert!(
        listed.to_string().contains("ralph cannot tick them"),
        "{listed}"
    );
    assert_eq!(warned("---\ntask: x\n---\n- [ ] it works\n"), None);
    assert_eq!(warned("---\ntask: x\ntest_command: make test\n---\n"), None);
    // A checkbox in a code block is no criterion.
    assert!(warned("---\ntask: x\n---\n```\n- [ ] not one\n```\n").is_some());
}

#[test]
fn file_ending_right_after_the_closing_delimiter_has_an_empty_body() {
    let task = load("no-trailing-newline.md");
    assert_eq!(task.body, "");
}

#[test]
fn every_key_is_read() {
    let task = load("all-keys.md");
    assert_eq!(task.task, "Add a session cache to the API server");
    assert_eq!(
        task.completion_criteria,
        ["Cache hits skip the database", "cargo test passes"]
    );
    assert_eq!(task.max_iterations, 20);
    assert_eq!(task.test_command.as_deref(), Some("cargo test --quiet"));
    assert_eq!(task.agent.as_deref(), Some("claude"));
    assert_eq!(task.agent_args, ["--verbose", "--max-turns", "40"]);
    assert_eq!(task.model.as_deref(), Some("opus"));
    assert_eq!(task.question_timeout, Wait::For(Duration::from_secs(5400)));
    assert_eq!(task.iteration_timeout, Wait::Never);
    assert_eq!(task.test_timeout, Duration::from_secs(90));
    assert_eq!(task.on_question_timeout, OnQuestionTimeout::Stop);
    assert_eq!(task.max_consecutive_failures, 5);
    assert_eq!(task.max_cost_usd, Some(12.5));
    assert_eq!(
        task.notify,
        NotifySettings {
            bell: false,
            desktop_notification: false,
            notify_command: Some("notify-send ralph".to_owned()),
            webhook_url: Some("https://hooks.example.com/ralph".to_owned()),
        }
    );
    assert_eq!(
        boxes(&task),
        [
            (false, 29, "Cache hits skip the database"),
            (true, 30, "Config has a cache section"),
        ]
    );
    assert_eq!(task.unchecked().map(|c| c.line).collect::<Vec<_>>(), [29]);
    assert_eq!(
        task.git,
        crate::task::GitSettings {
            checkpoints: false,
            worktree: true,
            worktree_setup: Some("npm ci".to_owned()),
            land: ralph_protocol::LandMode::Auto,
            land_with: crate::task::LandWith::Merge,
            land_attempts: 3,
        }
    );
    assert!(task.body.starts_with("# Session cache\n"));
    assert!(task.warnings.is_empty());
}

#[test]
fn byte_order_mark_is_dropped() {
    let task = load("bom.md");
    assert_eq!(task.task, "Handle a byte order mark");
    assert_eq!(boxes(&task), [(false, 4, "First"), (true, 5, "Second")]);
}

#[test]
fn crlf_line_endings_are_fine() {
    let raw = std::fs::read(fixtures("good-tasks").join("crlf.md")).unwrap();
    assert!(
        raw.windows(2).any(|w| w == b"\r\n"),
        "git turned crlf.md into LF"
    );
    let task = load("crlf.md");
    assert_eq!(task.task, "Handle Windows line endings");
    assert_eq!(task.max_iterations, 4);
    assert_eq!(task.completion_criteria, ["It works"]);
    assert_eq!(
        boxes(&task),
        [
            (false, 9, "First item"),
            (true, 10, "Second item continued on the next line"),
        ]
    );
}

#[test]
fn byte_order_mark_with_crlf_is_fine() {
    let task = load("bom-crlf.md");
    assert_eq!(task.task, "Both at once");
    assert_eq!(boxes(&task), [(false, 4, "Only item")]);
}

#[test]
fn checkboxes_in_code_and_html_are_not_criteria() {
    let task = load("code-fences.md");
    assert_eq!(
        boxes(&task),
        [(false, 6, "Real one"), (true, 28, "Real two")]
    );
}

#[test]
fn nested_and_mixed_lists_all_count() {
    let task = load("nested-lists.md");
    assert_eq!(
        boxes(&task),
        [
            (false, 4, "Parent"),
            (true, 5, "Child done"),
            (false, 6, "Child open"),
            (false, 7, "Grandchild"),
            (false, 9, "Box under a plain item"),
            (false, 11, "Ordered item"),
            (true, 12, "Ordered and ticked with a capital X"),
            (true, 14, "Star bullet"),
            (false, 15, "Plus bullet"),
            (false, 17, "Loose item"),
            (false, 21, "Another loose item"),
        ]
    );
}

#[test]
fn checkboxes_in_blockquotes_are_not_criteria() {
    let task = load("blockquote.md");
    assert_eq!(boxes(&task), [(false, 11, "Our own criterion")]);
}

#[test]
fn inline_markup_is_flattened_to_text() {
    let task = load("inline-markup.md");
    assert_eq!(
        boxes(&task),
        [
            (false, 4, "Bold and emphasis and code and a link"),
            (false, 5, "Wrapped over two lines"),
            (false, 7, "alt text image alt"),
        ]
    );
}

#[test]
fn unknown_keys_are_warnings_with_suggestions() {
    let task = load("unknown-key.md");
    let path = fixtures("good-tasks").join("unknown-key.md");
    let warnings: Vec<String> = task.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    assert_eq!(
        warnings[0],
        format!(
            "{}:3:1: unknown key 'max_iteration': did you mean 'max_iterations'? Until it is \
             renamed it is ignored",
            path.display()
        )
    );
    assert!(warnings[1].contains(":4:1: unknown key 'tset_command': did you mean 'test_command'?"));
    assert!(warnings[2].contains(":5:1: unknown key 'colour' is ignored. The keys ralph knows are: task, completion_criteria,"));
    assert_eq!(
        task.warnings[0].kind,
        WarningKind::UnknownKey {
            key: "max_iteration".to_owned(),
            suggestion: Some(Key::MaxIterations),
        }
    );
    // The misspelt key does not set anything.
    assert_eq!(task.max_iterations, 10);
}

#[test]
fn yaml_integers_are_seconds_and_zero_means_no_wait() {
    let task = load("yaml-integers.md");
    assert_eq!(task.question_timeout, Wait::For(Duration::ZERO));
    assert_eq!(task.iteration_timeout, Wait::For(Duration::from_secs(90)));
    assert_eq!(task.test_timeout, Duration::from_secs(45));
    assert_eq!(task.max_cost_usd, Some(3.0));
}

#[test]
fn yaml_quoting_block_scalars_and_anchors_work() {
    let task = load("yaml-forms.md");
    assert_eq!(
        task.task,
        "A long task written as a folded block scalar: it has a colon."
    );
    assert_eq!(
        task.completion_criteria,
        ["quoted: with a colon", "plain item"]
    );
    assert_eq!(task.test_command.as_deref(), Some("pytest -q"));
    assert_eq!(task.question_timeout, Wait::Never);
    assert_eq!(task.on_question_timeout, OnQuestionTimeout::Wait);
    assert_eq!(task.agent.as_deref(), Some("claude"));
    let unknown: Vec<(usize, usize)> = task.warnings.iter().map(|w| (w.line, w.column)).collect();
    assert_eq!(unknown, [(12, 1), (14, 1)]);
    assert_eq!(boxes(&task), [(false, 17, "One")]);
}

#[test]
fn flow_mapping_frontmatter_works() {
    let task = load("flow-mapping.md");
    assert_eq!(task.task, "A flow mapping");
    assert_eq!(task.max_iterations, 3);
    assert_eq!(boxes(&task), [(false, 4, "One")]);
}

#[test]
fn empty_values_mean_the_defaults() {
    let task = load("empty-optional-values.md");
    assert_eq!(task.max_iterations, 10);
    assert_eq!(task.test_command, None);
    assert!(task.completion_criteria.is_empty());
    assert_eq!(task.question_timeout, Wait::For(Duration::from_secs(300)));
}

#[test]
fn ten_megabyte_body_is_fine() {
    let mut text = String::from("---\ntask: A long checklist\n---\n");
    let item = "- [ ] Another criterion that must hold before the task is done\n";
    let items = 10_000_000 / item.len();
    for _ in 0..items {
        text.push_str(item);
    }
    assert!(text.len() >= 10_000_000);
    let task = parse(&text).unwrap();
    assert_eq!(task.criteria.len(), items);
    assert_eq!(task.criteria.last().unwrap().line, items + 3);
}

#[test]
fn criteria_can_be_reread_from_the_body_alone() {
    let task = load("all-keys.md");
    let first_body_line = 28;
    assert_eq!(
        ralph_protocol::parse_criteria(&task.body, first_body_line),
        task.criteria
    );
    let criteria = ralph_protocol::parse_criteria("- [x] done\n- [ ] todo\n", 1);
    assert_eq!(
        criteria,
        [
            Criterion {
                text: "done".to_owned(),
                checked: true,
                line: 1
            },
            Criterion {
                text: "todo".to_owned(),
                checked: false,
                line: 2
            },
        ]
    );
}

/// A test_command whose program is not installed only failed each DONE with status 127, one
/// iteration after another, until max_iterations: nothing said so before the loop started.
#[test]
fn a_test_command_that_is_not_on_path_is_warned_about_at_its_line() {
    let bin = tempfile::tempdir().unwrap();
    let tool = bin.path().join("mytests");
    std::fs::write(&tool, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path_var = Some(bin.path().as_os_str());
    let warning = |command: &str| {
        parse(&format!(
            "---\ntask: x\n\ntest_command: {command}\n---\n- [ ] x\n"
        ))
        .unwrap()
        .test_command_warning(path_var)
    };
    let missing = warning("pytest -q").unwrap();
    assert_eq!((missing.line, missing.column), (4, 1));
    assert_eq!(
        missing.kind,
        WarningKind::TestCommandNotFound {
            program: "pytest".into()
        }
    );
    assert!(
        missing
            .with_fix()
            .contains("`pytest`, which is not on PATH here"),
        "{}",
        missing.with_fix()
    );
    assert_eq!(warning("mytests --all"), None);
    // The agent may write a script; a shell line may set up what it runs.
    assert_eq!(warning("./check.sh"), None);
    assert_eq!(warning("cd web && npm test"), None);
    assert_eq!(
        parse("---\ntask: x\n---\n- [ ] x\n")
            .unwrap()
            .test_command_warning(path_var),
        None
    );
}

/// `- [] item` and `-[ ] item` are no checkboxes to markdown: the loop was done without them,
/// and nothing said why.
#[test]
fn a_line_that_only_looks_like_a_checkbox_is_warned_about_with_its_fix() {
    let task = parse("---\ntask: x\n---\n- [ ] one\n- [] two\n```\n- [] code\n```\n").unwrap();
    assert_eq!(task.criteria.len(), 1);
    let near: Vec<_> = task
        .warnings
        .iter()
        .filter(|w| matches!(w.kind, WarningKind::NotACheckbox { .. }))
        .collect();
    assert_eq!(near.len(), 1, "{near:?}");
    assert_eq!((near[0].line, near[0].column), (5, 1));
    assert!(
        near[0].with_fix().ends_with("Write it as: - [ ] two"),
        "{}",
        near[0].with_fix()
    );
    assert_eq!(near[0].kind.fix(), "write it as: - [ ] two");
}
