//! `ralph docs`: the docs shipped inside the binary, so that every pointer ralph prints (its
//! messages, `ralph init`'s task file, `ralph doctor`, the help) can be followed on a machine
//! that has the binary alone.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::util::*;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The files whose text reaches the user: the crates' sources and the task file's template.
fn user_facing_sources() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                // A crate's own tests and snapshots are not shown to users.
                if !path.ends_with("tests") && !path.ends_with("snapshots") {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = vec![repo().join("RALPH_TASK.md.example")];
    walk(&repo().join("crates"), &mut files);
    files
}

/// Every `ralph docs TOPIC` the sources mention, with where.
fn pointers() -> Vec<(String, String)> {
    let mut found = Vec::new();
    for file in user_facing_sources() {
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            for (i, _) in line.match_indices("ralph docs ") {
                let topic: String = line[i + "ralph docs ".len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '-')
                    .collect();
                if !topic.is_empty() {
                    let at = file.strip_prefix(repo()).unwrap().display();
                    found.push((topic, format!("{at}:{}", n + 1)));
                }
            }
        }
    }
    found
}

#[test]
fn every_ralph_docs_pointer_in_the_sources_names_a_topic_that_exists() {
    let p = Project::new();
    let found = pointers();
    // The messages of the sandbox, `ralph doctor`, `ralph serve`, the help and the template.
    assert!(found.len() >= 10, "{found:?}");
    for (topic, at) in &found {
        let run = p.exec(&["docs", topic]);
        assert_eq!(
            run.code,
            Some(0),
            "{at}: `ralph docs {topic}`: {}",
            run.stderr
        );
        assert!(run.stdout.starts_with('#'), "{at}: {topic}");
    }
}

/// Regression: the messages, the task file's template, `ralph doctor` and the help pointed at
/// `docs/sandbox.md` and the like, files a user who installed the binary does not have.
#[test]
fn nothing_shown_to_a_user_points_at_a_file_in_docs() {
    let mut left = Vec::new();
    for file in user_facing_sources() {
        let text = std::fs::read_to_string(&file).unwrap();
        // The help is the doc comments of args.rs; elsewhere comments are for developers.
        let help = file.ends_with("crates/cli/src/args.rs");
        for (n, line) in text.lines().enumerate() {
            let trimmed = line.trim_start();
            let comment = trimmed.starts_with("//") && !(help && trimmed.starts_with("///"));
            if comment || line.contains("include_str!") {
                continue;
            }
            if line.contains("docs/") && line.contains(".md") {
                left.push(format!(
                    "{}:{}: {line}",
                    file.strip_prefix(repo()).unwrap().display(),
                    n + 1
                ));
            }
        }
    }
    assert!(
        left.is_empty(),
        "point at `ralph docs TOPIC` instead:\n{left:#?}"
    );
}

#[test]
fn a_topic_prints_its_doc_and_the_bare_command_lists_them_all() {
    let p = Project::new();
    let run = p.exec(&["docs", "sandbox"]);
    run.expect_code(0);
    let file = std::fs::read_to_string(repo().join("docs/sandbox.md")).unwrap();
    assert_eq!(run.stdout, file);

    let run = p.exec(&["docs"]);
    run.expect_code(0);
    for entry in std::fs::read_dir(repo().join("docs")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if let Some(topic) = name.strip_suffix(".md") {
            assert!(
                run.stdout
                    .lines()
                    .any(|l| l.trim_start().starts_with(topic)),
                "{topic}: {}",
                run.stdout
            );
        }
    }
    assert!(run.stdout.contains("  sandbox  "), "{}", run.stdout);
    assert!(run.stdout.contains("The agent's sandbox"), "{}", run.stdout);
}

#[test]
fn an_unknown_topic_exits_2_naming_the_closest_and_listing_them() {
    let p = Project::new();
    let run = p.exec(&["docs", "sandbx"]);
    run.expect_code(2);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert!(
        run.stderr.contains("no doc named `sandbx`")
            && run.stderr.contains("did you mean `ralph docs sandbox`?"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("  fleet  "), "{}", run.stderr);
}

/// On a terminal the doc goes through `PAGER`, run by the shell as git runs it.
#[test]
fn on_a_terminal_the_doc_goes_through_the_pager() {
    let p = Project::new();
    let ralph = ralph_bin();
    let out = Command::new("script")
        .args([
            "-qec",
            &format!("{} docs fleet", ralph.display()),
            "/dev/null",
        ])
        .envs(p.user_env())
        .env("PAGER", "cat > paged.txt")
        .current_dir(p.root())
        .output()
        .expect("script (util-linux) gives ralph a terminal");
    assert!(out.status.success(), "{out:?}");
    let file = std::fs::read_to_string(repo().join("docs/fleet.md")).unwrap();
    assert_eq!(p.read("paged.txt"), file);
}

#[test]
fn the_man_pages_and_completions_have_it() {
    let p = Project::new();
    p.exec(&["man", "--out-dir", "pages"]).expect_code(0);
    assert!(p.exists("pages/ralph-docs.1"));
    let top = p.exec(&["man"]);
    assert!(top.stdout.contains("ralph docs"), "{}", top.stdout);
    let fish = p.exec(&["completions", "fish"]);
    assert!(fish.stdout.contains("docs"), "{}", fish.stdout);
}
