//! Input that must be refused, with a message that says where, what and how to fix it.

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use super::{error, fixtures, markdown_files, parse};
use crate::task::{FILE_SIZE_LIMIT, FRONTMATTER_SIZE_LIMIT, Problem, TaskError, TaskFile};

/// Every case in `fixtures/bad-tasks` fails, at its place, with its fragments and a fix.
#[test]
fn every_bad_task_fixture_fails_with_position_and_fix() {
    let dir = fixtures("bad-tasks");
    let cases = markdown_files(&dir);
    assert!(cases.len() >= 45, "only {} bad cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy();
        let expect_path = case.with_extension("md.expect");
        let Ok(expected) = fs::read_to_string(&expect_path) else {
            failures.push(format!("{name}: no {}", expect_path.display()));
            continue;
        };
        let err = match TaskFile::load(case) {
            Ok(_) => {
                failures.push(format!("{name}: parsed without error"));
                continue;
            }
            Err(err) => err,
        };
        let message = err.to_string();
        let Some((line, column)) = err.position() else {
            failures.push(format!("{name}: no position in {message}"));
            continue;
        };
        let prefix = format!("{}:{line}:{column}: ", case.display());
        if !message.starts_with(&prefix) {
            failures.push(format!("{name}: does not start with {prefix:?}: {message}"));
        }
        let fix = err.problem().map(Problem::fix).unwrap_or_default();
        if fix.len() < 10 || !message.ends_with(&fix) {
            failures.push(format!("{name}: no fix at the end of {message}"));
        }
        for fragment in expected.lines().filter(|l| !l.is_empty()) {
            if !message.contains(fragment) {
                failures.push(format!("{name}: missing {fragment:?} in {message}"));
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// An `.expect` file without its case would silently test nothing.
#[test]
fn every_bad_task_expectation_has_its_case() {
    let dir = fixtures("bad-tasks");
    for entry in fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if let Some(case) = name.strip_suffix(".expect") {
            assert!(dir.join(case).is_file(), "{name} has no {case}");
        }
    }
}

#[test]
fn task_file_that_is_missing_says_how_to_create_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("RALPH_TASK.md");
    let err = TaskFile::load(&path).unwrap_err();
    assert!(matches!(err, TaskError::NotFound { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.starts_with(&format!("{}: ", path.display())),
        "{message}"
    );
    assert!(message.contains("ralph init"), "{message}");
}

#[test]
fn task_file_that_is_a_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let err = TaskFile::load(dir.path()).unwrap_err();
    assert!(matches!(err, TaskError::IsDirectory { .. }), "{err:?}");
    assert!(err.to_string().contains("is a directory"), "{err}");
}

/// `ralph run --task tasks/cache.md`, missing, was told to run `ralph init`, which writes
/// RALPH_TASK.md, not tasks/cache.md.
#[test]
fn a_missing_task_file_of_another_name_is_not_promised_to_ralph_init() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks/cache.md");
    let message = TaskFile::load(&path).unwrap_err().to_string();
    assert!(
        message.starts_with(&format!(
            "{}: no such task file. Check its path",
            path.display()
        )),
        "{message}"
    );
    assert!(
        message.contains("as RALPH_TASK.md, which you can move there"),
        "{message}"
    );
}

/// A directory named RALPH_TASK.md was told to give `RALPH_TASK.md/RALPH_TASK.md`, which is
/// not there either; a directory that holds a task file gets that file's path.
#[test]
fn a_directory_in_the_task_file_s_place_gets_a_fix_that_exists() {
    let dir = tempfile::tempdir().unwrap();
    let in_the_way = dir.path().join("RALPH_TASK.md");
    fs::create_dir(&in_the_way).unwrap();
    let message = TaskFile::load(&in_the_way).unwrap_err().to_string();
    assert!(
        !message.contains("RALPH_TASK.md/RALPH_TASK.md"),
        "{message}"
    );
    assert!(message.contains("move or rename it"), "{message}");

    let project = dir.path().join("project");
    fs::create_dir(&project).unwrap();
    fs::write(project.join("RALPH_TASK.md"), "---\ntask: x\n---\n").unwrap();
    let message = TaskFile::load(&project).unwrap_err().to_string();
    assert!(
        message.ends_with(&format!(
            "Give the path of the task file inside it: {}",
            project.join("RALPH_TASK.md").display()
        )),
        "{message}"
    );
    let message = TaskFile::load(dir.path()).unwrap_err().to_string();
    assert!(message.ends_with("not of a directory"), "{message}");
}

#[test]
fn task_file_that_is_a_symlink_to_a_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("real-dir");
    fs::create_dir(&target).unwrap();
    let link = dir.path().join("RALPH_TASK.md");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let err = TaskFile::load(&link).unwrap_err();
    assert!(matches!(err, TaskError::IsDirectory { .. }), "{err:?}");
    assert!(
        err.to_string()
            .starts_with(&format!("{}: ", link.display()))
    );
}

#[test]
fn task_file_that_is_a_device_is_refused_without_reading_it() {
    let err = TaskFile::load(Path::new("/dev/zero")).unwrap_err();
    assert!(matches!(err, TaskError::NotRegularFile { .. }), "{err:?}");
    assert!(err.to_string().contains("not a regular file"), "{err}");
}

#[test]
fn task_file_without_read_permission_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("RALPH_TASK.md");
    fs::write(&path, "---\ntask: x\n---\n").unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o000)).unwrap();
    if fs::read(&path).is_ok() {
        // Running as root: permissions do not stop reads, so there is nothing to test.
        return;
    }
    let err = TaskFile::load(&path).unwrap_err();
    assert!(matches!(err, TaskError::Unreadable { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("cannot read the task file"), "{message}");
    assert!(message.contains("chmod u+r"), "{message}");
}

#[test]
fn task_file_over_the_size_limit_is_refused_naming_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("RALPH_TASK.md");
    let mut contents = b"---\ntask: x\n---\n".to_vec();
    contents.resize(usize::try_from(FILE_SIZE_LIMIT).unwrap() + 1, b'a');
    fs::write(&path, &contents).unwrap();

    let err = TaskFile::load(&path).unwrap_err();
    assert!(matches!(err, TaskError::TooLarge { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("16 MiB"), "{message}");
    assert!(message.contains(&FILE_SIZE_LIMIT.to_string()), "{message}");
    // The pure parser applies the same limit.
    let err = TaskFile::parse(&path, &contents).unwrap_err();
    assert!(matches!(err, TaskError::TooLarge { .. }), "{err:?}");
}

#[test]
fn frontmatter_over_its_size_limit_is_refused() {
    let mut text = String::from("---\ntask: x\n");
    while text.len() <= FRONTMATTER_SIZE_LIMIT {
        text.push_str("# a comment to make the frontmatter long enough\n");
    }
    text.push_str("---\n");
    let message = error(&text);
    assert!(message.starts_with("RALPH_TASK.md:1:1: "), "{message}");
    assert!(message.contains("256 KiB"), "{message}");
    assert!(
        message.contains("move long text into the markdown body"),
        "{message}"
    );
}

/// libyaml's scanner is quadratic in flow depth: 64 000 unclosed `[` took 15 s (release
/// build) before the nesting check existed.
#[test]
fn deep_flow_nesting_is_refused_fast() {
    for opener in ["[", "{", "[{"] {
        let text = format!("---\ntask: x\nv: {}\n---\n", opener.repeat(60_000));
        let started = Instant::now();
        let message = error(&text);
        assert!(message.contains("levels deep"), "{message}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }
}

/// The worst YAML the limits still allow must parse in reasonable time.
#[test]
fn largest_allowed_frontmatter_at_the_nesting_limit_finishes() {
    let mut text = String::from("---\ntask: x\nv: ");
    text.push_str(&"[".repeat(crate::task::MAX_FLOW_NESTING));
    while text.len() < FRONTMATTER_SIZE_LIMIT - 100 {
        text.push_str("a, ");
    }
    text.push_str(&"]".repeat(crate::task::MAX_FLOW_NESTING));
    text.push_str("\n---\n- [ ] x\n");
    let started = Instant::now();
    let task = parse(&text).unwrap();
    assert_eq!(task.warnings.len(), 1);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}

/// A billion-laughs bomb must hit serde_yaml_ng's repetition limit, not expand.
#[test]
fn alias_bomb_errors_fast() {
    let mut text = String::from("---\ntask: x\na: &a [lol, lol, lol, lol, lol, lol, lol, lol]\n");
    let names: Vec<char> = ('b'..='p').collect();
    let mut previous = 'a';
    for name in names {
        let refs = vec![format!("*{previous}"); 10].join(", ");
        text.push_str(&format!("{name}: &{name} [{refs}]\n"));
        previous = name;
    }
    text.push_str("---\n");
    let started = Instant::now();
    let message = error(&text);
    assert!(message.contains("billion laughs"), "{message}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn hostile_body_markdown_is_parsed_in_reasonable_time() {
    let shapes = [
        ">".repeat(100_000),
        "- ".repeat(50_000),
        "[".repeat(200_000),
        "*a ".repeat(100_000),
        "- [ ] x\n  ".repeat(50_000),
    ];
    for shape in shapes {
        let text = format!("---\ntask: x\n---\n{shape}\n");
        let started = Instant::now();
        parse(&text).unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
    }
}

#[test]
fn empty_task_and_missing_task_are_errors() {
    assert!(error("---\ntask: ''\n---\n").contains(":2:7: task must be"));
    assert!(error("---\nmodel: x\n---\n").contains(":1:1: the frontmatter has no 'task' key"));
}

#[test]
fn a_problem_after_a_bom_and_crlf_has_the_same_position() {
    let plain = error("---\ntask: x\nmax_iterations: ten\n---\n");
    let windows = TaskFile::parse(
        Path::new("RALPH_TASK.md"),
        b"\xEF\xBB\xBF---\r\ntask: x\r\nmax_iterations: ten\r\n---\r\n",
    )
    .unwrap_err()
    .to_string();
    assert_eq!(plain, windows);
    assert!(plain.starts_with("RALPH_TASK.md:3:17: "), "{plain}");
}

#[test]
fn columns_count_characters_not_bytes() {
    // "è" is two bytes: `[a]` starts at character 29 but byte 30.
    let message = error("---\n{task: x, modèle: 1, model: [a]}\n---\n");
    assert!(message.starts_with("RALPH_TASK.md:2:29: "), "{message}");
    let bytes = b"---\ntask: \xC3\xA9\xC3\xA9\xFF\n---\n";
    let message = TaskFile::parse(Path::new("T.md"), bytes)
        .unwrap_err()
        .to_string();
    assert!(message.starts_with("T.md:2:9: "), "{message}");
}

/// `task: [WIP] Fix the login` was refused as "found a list", with "write it as one line of
/// text" for a fix, though it is one line: the brackets made it a list, and quotes keep them.
#[test]
fn a_value_in_brackets_is_told_that_quotes_keep_them() {
    let err = parse("---\ntask: [WIP] Fix the login\n---\n- [ ] x\n").unwrap_err();
    assert_eq!(err.position(), Some((2, 7)));
    let message = err.to_string();
    assert!(
        message.contains(
            "A value that starts with '[' is a list to YAML: to keep the '[', put the whole value in quotes, like task: \"[WIP] Fix the login\""
        ),
        "{message}"
    );
    let quoted = parse("---\ntask: \"[WIP] Fix the login\"\n---\n- [ ] x\n").unwrap();
    assert_eq!(quoted.task, "[WIP] Fix the login");
}
