use std::time::Instant;

use ralph_protocol::{PendingQuestion, Question, QuestionId, RaisedBy, State, Status, Workspace};

use super::*;

/// A loop's `.ralph/` in a new directory, with `status`, a task file of two criteria (one
/// ticked) and what the agent "said".
fn a_loop(task: &str, status: Status) -> (tempfile::TempDir, Workspace, State) {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::new(dir.path());
    ws.ensure().unwrap();
    std::fs::write(
        dir.path().join("RALPH_TASK.md"),
        format!("---\ntask: {task}\n---\n- [x] one\n- [ ] two\n"),
    )
    .unwrap();
    let mut state = State::fresh(&ws, "fake", 5);
    state.task = task.into();
    state.status = status;
    state.iteration = 2;
    state.total_cost_usd = Some(0.25);
    state.save(&ws).unwrap();
    (dir, ws, state)
}

fn ask(ws: &Workspace, state: &mut State, text: &str) {
    state.status = Status::WaitingInput;
    state.pending_question = Some(PendingQuestion::new(
        QuestionId::new(),
        &Question::plain(text),
        SystemTime::now(),
        None,
        2,
        RaisedBy::Signal,
    ));
    state.save(ws).unwrap();
}

/// Answers the question `id` as `ralph answer` does, sealed with the key in `keys` (the test's
/// own state directory, never the user's).
fn answer(ws: &Workspace, keys: &Path, id: &QuestionId) {
    ralph_protocol::answer_question(
        &ws.clone().with_state_dir(keys),
        Some(id),
        &ralph_protocol::Reply::Text("Postgres".into()),
        ralph_protocol::AnsweredBy::RalphAnswer,
        None,
    )
    .unwrap();
}

/// `git ARGS` in `dir`, with an identity; its output.
fn git_in(dir: &Path, args: &[&str]) -> String {
    ralph_git::Git::new(dir).with_identity().run(args).unwrap()
}

fn said() -> Box<LastSaid> {
    Box::new(|_, _| Some("\u{1b}[31mall\u{202e} green\u{1b}[0m\nnext".into()))
}

#[test]
fn a_waiting_question_comes_first_and_is_counted_and_an_answer_moves_it_down() {
    let (a, ws_a, _) = a_loop("Alpha task", Status::Running);
    let (b, ws_b, mut st_b) = a_loop("Beta task", Status::Running);
    let (c, _, _) = a_loop("Gamma task", Status::Failed);
    let _lock_a = ws_a.lock().unwrap();
    let _lock_b = ws_b.lock().unwrap();
    ask(&ws_b, &mut st_b, "Which \u{1b}]0;evil\u{7}database?");
    let only = [a.path().into(), b.path().into(), c.path().into()];
    // Answers are sealed and checked with a key of the test's own, never the user's.
    let keys = tempfile::tempdir().unwrap();
    let mut collector = Collector::new(said()).with_state_dir(keys.path());
    let rows = collector.collect(Some(&only), Instant::now());
    let states: Vec<_> = rows.iter().map(|r| (r.task.as_str(), r.state)).collect();
    assert_eq!(
        states,
        [
            ("Beta task", RowState::NeedsYou),
            ("Gamma task", RowState::Failed),
            ("Alpha task", RowState::Running)
        ]
    );
    assert_eq!(needing_you(&rows), 1);
    let beta = &rows[0];
    assert_eq!(beta.question.as_deref(), Some("Which database?"));
    assert!(beta.question_id.is_some());
    assert_eq!(
        (beta.criteria_done, beta.criteria_total),
        (Some(1), Some(2))
    );
    assert_eq!((beta.iteration, beta.max_iterations), (2, 5));
    assert_eq!(beta.cost_usd, Some(0.25));
    // Escapes and the bidi override are gone, the line break is a space.
    assert_eq!(beta.last_line.as_deref(), Some("all green next"));
    // Not a git repository: no diff to show.
    assert_eq!(beta.diff, None);

    // Answered (the answer waits for the loop to take it): no longer waiting on its human.
    let id = st_b.pending_question.as_ref().unwrap().id.clone();
    answer(&ws_b, keys.path(), &id);
    let rows = collector.collect(Some(&only), Instant::now());
    assert_eq!(needing_you(&rows), 0);
    assert_eq!(rows.last().unwrap().task, "Beta task");
    assert_eq!(rows.last().unwrap().state, RowState::Running);
}

/// Regression: the rows took any `answer.md` that named the question, so an answer the agent
/// wrote itself (no seal) showed its loop as answered while its question still waited.
#[test]
fn a_forged_answer_leaves_the_question_waiting_and_a_sealed_one_answers_it() {
    let (a, ws, mut state) = a_loop("Alpha task", Status::Running);
    let _lock = ws.lock().unwrap();
    ask(&ws, &mut state, "Which database?");
    let id = state.pending_question.as_ref().unwrap().id.clone();
    let keys = tempfile::tempdir().unwrap();
    let only = [a.path().into()];
    let mut collector = Collector::new(said()).with_state_dir(keys.path());

    let forged = ralph_protocol::Answer::new(
        "Postgres",
        ralph_protocol::AnsweredBy::RalphAnswer,
        Some(id.clone()),
    );
    std::fs::write(ws.answer(), forged.to_file()).unwrap();
    // Sealed, but under another key than ralph's.
    let other_key = forged.clone().sealed(b"not ralph's key");
    for file in [forged.to_file(), other_key.to_file()] {
        std::fs::write(ws.answer(), &file).unwrap();
        let rows = collector.collect(Some(&only), Instant::now());
        assert_eq!(rows[0].state, RowState::NeedsYou, "{file}");
        assert_eq!(rows[0].question_id.as_deref(), Some(id.as_str()));
    }
    // The rows only read: the forged file is the desk's to refuse, not theirs to remove.
    assert!(ws.answer().exists());

    std::fs::remove_file(ws.answer()).unwrap();
    answer(&ws, keys.path(), &id);
    let rows = collector.collect(Some(&only), Instant::now());
    assert_eq!(rows[0].state, RowState::Running);
}

#[test]
fn a_loop_whose_process_is_gone_while_its_state_says_running_is_failed() {
    let (a, _, _) = a_loop("Alpha", Status::Running);
    let rows = collect(Some(&[a.path().into()]), said());
    assert_eq!(rows[0].state, RowState::Failed);
    assert!(!rows[0].running);
    assert!(rows[0].reason.as_deref().unwrap().contains("ralph run"));
}

#[test]
fn a_rate_limited_loop_says_until_when() {
    let (a, ws, mut st) = a_loop("Alpha", Status::Running);
    let _lock = ws.lock().unwrap();
    st.rate_limited_until = Some("2026-11-29T01:00:00Z".into());
    st.save(&ws).unwrap();
    let rows = collect(Some(&[a.path().into()]), said());
    assert_eq!(rows[0].state, RowState::RateLimited);
    assert_eq!(
        rows[0].rate_limited_until.as_deref(),
        Some("2026-11-29T01:00:00Z")
    );
}

#[test]
fn a_directory_that_never_held_a_loop_has_no_row_and_rows_serialize_kebab_case() {
    let empty = tempfile::tempdir().unwrap();
    assert!(collect(Some(&[empty.path().into()]), said()).is_empty());
    let row = LoopRow::bare("/tmp/x".into(), "Queued task", RowState::Queued);
    let json = serde_json::to_value(&row).unwrap();
    assert_eq!(json["state"], "queued");
    assert_eq!(
        serde_json::to_value(RowState::NeedsYou).unwrap(),
        "needs-you"
    );
}

#[test]
fn a_worktree_loop_shows_its_landing_state_and_its_diff_against_its_base() {
    let (a, ws, _) = a_loop("Alpha", Status::Done);
    let git = |args: &[&str]| git_in(a.path(), args);
    git(&["init", "-q"]);
    git(&["add", "RALPH_TASK.md"]);
    git(&["commit", "-q", "-m", "base"]);
    let base = git(&["rev-parse", "HEAD"]);
    std::fs::write(a.path().join("new.txt"), "a\nb\n").unwrap();
    let info = LoopInfo {
        base,
        land: Some(LandState::NeedsReview),
        reason: Some("tests fail on the combined tree\u{1b}[2J".into()),
        attempts: 2,
        task_file: Some("RALPH_TASK.md".into()),
        ..crate::test_support::loop_info(a.path(), "ralph/alpha")
    };
    info.save(ws.dir()).unwrap();
    let rows = collect(Some(&[a.path().into()]), said());
    let row = &rows[0];
    assert_eq!(row.state, RowState::NeedsReview);
    assert_eq!(
        row.reason.as_deref(),
        Some("tests fail on the combined tree")
    );
    assert_eq!(row.branch.as_deref(), Some("ralph/alpha"));
    assert_eq!(
        row.diff,
        Some(Diff {
            added: 2,
            removed: 0,
            files: 1
        })
    );
    assert_eq!(row.diff.unwrap().to_string(), "+2 -0");
}

/// `read` (what the broker's dashboard and bot show of each loop) gives the collector's row
/// without what costs a process or a log: the same state, task, signal and question, no diff,
/// last line or criteria.
#[test]
fn read_gives_the_collected_row_without_diff_last_line_or_criteria() {
    let (a, ws, mut st) = a_loop("Alpha\u{1b}[2J task", Status::Running);
    let _lock = ws.lock().unwrap();
    st.last_signal = Some("QUESTION\u{202e}".into());
    ask(&ws, &mut st, "Redis or Memcached?");
    let collected = collect(Some(&[a.path().into()]), said()).remove(0);
    let row = read(&Workspace::new(std::fs::canonicalize(a.path()).unwrap())).unwrap();
    assert_eq!(row.state, RowState::NeedsYou);
    assert_eq!(row.last_signal.as_deref(), Some("QUESTION"));
    assert_eq!(row.question.as_deref(), Some("Redis or Memcached?"));
    assert_eq!(
        (row.diff, &row.last_line, row.criteria_done),
        (None, &None, None)
    );
    let mut expected = collected;
    (expected.diff, expected.last_line) = (None, None);
    (expected.criteria_done, expected.criteria_total) = (None, None);
    expected.elapsed_seconds = row.elapsed_seconds;
    assert_eq!(row, expected);
    assert!(read(&Workspace::new(tempfile::tempdir().unwrap().path())).is_none());
}

/// Regression: after the user ran the command a needs-land row gave to finish the landing, the
/// row went on telling them to run it, until `ralph land` recorded the landing.
#[test]
fn a_needs_land_row_whose_command_ran_says_ralph_land_records_it() {
    let (a, ws, _) = a_loop("Alpha", Status::Done);
    let git = |args: &[&str]| git_in(a.path(), args);
    git(&["init", "-q", "-b", "main"]);
    git(&["add", "RALPH_TASK.md"]);
    git(&["commit", "-q", "-m", "base"]);
    let base = git(&["rev-parse", "HEAD"]);
    git(&["commit", "-q", "--allow-empty", "-m", "combined"]);
    let combined = git(&["rev-parse", "HEAD"]);
    git(&["update-ref", "refs/ralph/land/ralph/alpha", &combined]);
    git(&["update-ref", "refs/heads/main", &base]);
    let info = LoopInfo {
        repo: a.path().into(),
        base,
        land: Some(LandState::NeedsLand),
        reason: Some("To finish: git -C /r merge --ff-only refs/ralph/land/ralph/alpha".into()),
        ..crate::test_support::loop_info(a.path(), "ralph/alpha")
    };
    info.save(ws.dir()).unwrap();
    let reason = || read(&ws).unwrap().reason.unwrap();
    assert!(reason().starts_with("To finish: git"), "{}", reason());
    // The user's `git merge --ff-only`: main now holds the combined commit.
    git(&["update-ref", "refs/heads/main", &combined]);
    assert_eq!(read(&ws).unwrap().state, RowState::NeedsLand);
    assert!(reason().contains("`ralph land`"), "{}", reason());
    assert!(!reason().contains("To finish"), "{}", reason());
}
