//! `ralph run --worktree` and `ralph land`: the user's checkout untouched from start to
//! landing, only tested work lands, conflicts go back to the agent, a checked-out target with
//! changes waits for its human, a `kill -9` mid-landing loses nothing, and ralph never runs a
//! destructive git command.

use std::path::Path;
use std::time::Duration;

use super::checkpoints::Repo;
use super::util::*;

/// The user's checkout as the issue asks it be kept: HEAD (the file and the commit), the
/// index file's bytes, `git status` and the stash list.
pub fn checkout_bytes(r: &Repo) -> (Vec<u8>, String, Vec<u8>, String, String) {
    (
        std::fs::read(r.p.path(".git/HEAD")).unwrap(),
        r.git(&["rev-parse", "HEAD"]),
        std::fs::read(r.p.path(".git/index")).unwrap(),
        r.git(&["status", "--porcelain=v1", "--untracked-files=all"]),
        r.git(&["stash", "list"]),
    )
}

fn status_json(r: &Repo, dir: &Path) -> serde_json::Value {
    let run = r.exec(&["status", "--json", "-C", &dir.display().to_string()]);
    serde_json::from_str(&run.stdout).unwrap()
}

const EDIT_AND_DONE: &str = "write a.txt one\\n\nwrite b.txt bee\\n\ncheck-all\nsignal DONE\n";

#[test]
fn a_worktree_run_from_start_to_landing_leaves_the_user_s_checkout_byte_for_byte() {
    let r = Repo::new(
        "task: Add the bee file\nmax_iterations: 3\ntest_command: test -f b.txt",
        "- [ ] bee\n",
    );
    // The user's own work in progress: another branch, a stash, a staged change, an untracked
    // file, an ignored one.
    r.git(&["checkout", "-q", "-b", "mine"]);
    r.p.write("a.txt", "stashed\n");
    r.git(&["stash", "-q"]);
    r.p.write("a.txt", "staged\n");
    r.git(&["add", "a.txt"]);
    r.p.write("notes.txt", "mine\n");
    r.p.write(".env", "SECRET=1\n");
    r.p.write(".gitignore", "build/\n.env\n");
    r.p.write(".worktreeinclude", ".env\n");
    let before = checkout_bytes(&r);
    let agent = r.p.agent(&format!(
        "[iteration 1]\nrun-capture env-seen.txt sh -c \"cat .env; echo ${{GIT_DIR-unset}}\"\n{EDIT_AND_DONE}"
    ));
    let mut cmd = r.ralph();
    cmd.args([
        "run",
        "--no-tui",
        "--worktree",
        "--onto",
        "main",
        "--agent-cmd",
        &agent,
    ])
    .env("GIT_DIR", r.p.path(".git"))
    .env("GIT_WORK_TREE", r.p.root());
    let run = Run::finish(spawn(cmd), Duration::from_secs(90));
    run.expect_code(0);
    assert!(
        run.stderr.contains("land add-the-bee-file"),
        "{}",
        run.stderr
    );
    let wt = r.only_worktree();
    assert!(wt.starts_with(r.worktrees()), "{}", wt.display());
    assert_eq!(wt.file_name().unwrap(), "add-the-bee-file");
    // .worktreeinclude copied the ignored .env; the agent saw no GIT_DIR.
    assert_eq!(
        std::fs::read_to_string(wt.join("env-seen.txt")).unwrap(),
        "SECRET=1\nunset\n"
    );
    let st = status_json(&r, &wt);
    assert_eq!(st["worktree"]["branch"], "ralph/add-the-bee-file");
    assert_eq!(st["worktree"]["state"], "done");
    assert_eq!(st["worktree"]["target"], "main");
    assert_eq!(
        checkout_bytes(&r),
        before,
        "the run touched the user's checkout"
    );

    let land = r.exec(&["land", "add-the-bee-file"]);
    land.expect_code(0);
    assert!(land.stdout.contains("landed on main"), "{}", land.stdout);
    assert_eq!(r.git(&["show", "main:b.txt"]), "bee\n");
    assert_eq!(
        checkout_bytes(&r),
        before,
        "landing touched the user's checkout"
    );
    assert_eq!(status_json(&r, &wt)["worktree"]["state"], "landed");
    assert_eq!(status_json(&r, &wt)["state"], "landed");
    // A backup of where main was.
    assert!(
        r.git(&["for-each-ref", "refs/ralph/backup/main/"])
            .contains("commit")
    );
    // Landed, no process runs it: `ralph status --all` still shows it, with its state.
    let all: serde_json::Value =
        serde_json::from_str(&r.exec(&["status", "--all", "--json"]).stdout).unwrap();
    let row = all
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["branch"] == "ralph/add-the-bee-file")
        .expect("the landed loop is listed");
    assert_eq!(row["state"], "landed");
    assert!(r.exec(&["status", "--all"]).stdout.contains(": landed"));
    // `ralph status` in the user's checkout names the loops of this repository in worktrees.
    let here = r.exec(&["status"]).stdout;
    assert!(
        here.contains("loop in a worktree: add-the-bee-file (landed) on ralph/add-the-bee-file"),
        "{here}"
    );
    // A landed loop's worktree may go; its branch stays.
    r.exec(&["worktree", "remove", "add-the-bee-file"])
        .expect_code(0);
    assert!(!wt.exists());
    assert!(
        r.git(&["branch", "--list", "ralph/add-the-bee-file"])
            .contains("ralph/")
    );
    assert_eq!(checkout_bytes(&r), before);
}

#[test]
fn tests_failing_on_the_combined_tree_go_back_to_the_agent_then_need_review_target_unchanged() {
    let r = Repo::new(
        // No sandbox: the scripted agent counts its calls in a file outside its worktree.
        "task: Add the bee file\nmax_iterations: 3\nland_attempts: 1\nsandbox: false\ntest_command: test -f b.txt && test ! -f breaker.txt",
        "- [ ] bee\n",
    );
    let counter = r.home().join("calls");
    let agent = format!(
        "{} --counter '{}'",
        r.p.agent(&format!(
            "[call 1]\n{EDIT_AND_DONE}[call 2..]\nexpect-prompt-contains Landing your work failed\nwrite tried.txt yes\\n\nsignal DONE\n"
        )),
        counter.display()
    );
    r.run(&agent, &["--worktree"]).expect_code(0);
    // Meanwhile main gets a commit that the loop's work does not pass with.
    r.p.write("breaker.txt", "x\n");
    r.git(&["add", "breaker.txt"]);
    r.git(&["commit", "-q", "-m", "breaks the loop's tests"]);
    let main_before = r.git(&["rev-parse", "main"]);
    let land = r.exec(&["land", "add-the-bee-file"]);
    land.expect_code(1);
    assert!(land.stderr.contains("needs-review"), "{}", land.stderr);
    assert!(land.stderr.contains("the tests failed"), "{}", land.stderr);
    assert_eq!(r.git(&["rev-parse", "main"]), main_before);
    let wt = r.only_worktree();
    // The agent had its one try, with the failure in its prompt.
    assert!(wt.join("tried.txt").exists());
    assert_eq!(status_json(&r, &wt)["worktree"]["state"], "needs-review");
    // Not landed: its worktree stays.
    let rm = r.exec(&["worktree", "remove", "add-the-bee-file"]);
    rm.expect_code(1);
    assert!(
        rm.stderr.contains("neither landed nor discarded"),
        "{}",
        rm.stderr
    );
    assert!(wt.exists());
}

#[test]
fn a_target_checked_out_with_changes_gives_needs_land_and_the_command_that_finishes_it() {
    let r = Repo::new(
        "task: Add the bee file\nmax_iterations: 3\ntest_command: test -f b.txt",
        "- [ ] bee\n",
    );
    let agent = r.p.agent(&format!("[iteration 1]\n{EDIT_AND_DONE}"));
    r.run(&agent, &["--worktree"]).expect_code(0);
    r.p.write(".gitignore", "build/\ntmp/\n");
    let main_before = r.git(&["rev-parse", "main"]);
    let land = r.exec(&["land", "add-the-bee-file"]);
    land.expect_code(1);
    assert!(land.stdout.contains("needs-land"), "{}", land.stdout);
    assert_eq!(r.git(&["rev-parse", "main"]), main_before);
    assert_eq!(r.p.read(".gitignore"), "build/\ntmp/\n");
    assert_eq!(
        status_json(&r, &r.only_worktree())["worktree"]["state"],
        "needs-land"
    );
    let command = land
        .stdout
        .split("To finish: ")
        .nth(1)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .trim()
        .to_owned();
    // The one command, run as printed, finishes it (the user's edit does not collide).
    let words = shell_words(&command);
    let mut cmd = std::process::Command::new(&words[0]);
    cmd.args(&words[1..]);
    r.env(&mut cmd);
    assert!(cmd.status().unwrap().success(), "{command}");
    assert_eq!(r.p.read("b.txt"), "bee\n");
    assert_eq!(r.p.read(".gitignore"), "build/\ntmp/\n");
    // The next `ralph land`, as printed, run from elsewhere, sees it done and says so.
    let then = between(&land.stdout, "Then `", "`");
    let again = sh_elsewhere(&r, &then);
    again.expect_code(0);
    assert!(again.stdout.contains("landed on main"), "{}", again.stdout);
    assert_eq!(status_json(&r, &r.only_worktree())["state"], "landed");
}

/// The text of `s` between `before` and the next `after`.
fn between(s: &str, before: &str, after: &str) -> String {
    let rest = s
        .split(before)
        .nth(1)
        .unwrap_or_else(|| panic!("no {before:?} in {s}"));
    rest.split(after).next().unwrap().to_owned()
}

/// `command` through `sh`, from a directory outside the repository, as a user pastes it.
fn sh_elsewhere(r: &Repo, command: &str) -> Run {
    let elsewhere = tempfile::tempdir().unwrap();
    let mut sh = std::process::Command::new("sh");
    sh.args(["-c", command]).current_dir(elsewhere.path());
    for (k, v) in r.p.user_env() {
        sh.env(k, v);
    }
    r.env(&mut sh);
    Run::from_output(sh.output().unwrap())
}

/// Regression: what `ralph land` and `ralph worktree discard` print to do next (`ralph
/// worktree remove NAME`, `ralph land NAME`) named the loop alone, so from outside its
/// repository (after `ralph land -C WORKTREE`, say) it failed: "/tmp is not in a git
/// repository".
#[test]
fn what_land_and_discard_say_to_do_next_works_from_any_directory() {
    // A loop done in its worktree; `ralph worktree WHAT -C REPO add-the-bee-file` from
    // elsewhere.
    let done = |frontmatter: &str| {
        let r = Repo::new(frontmatter, "- [ ] bee\n");
        let agent = r.p.agent(&format!("[iteration 1]\n{EDIT_AND_DONE}"));
        r.run(&agent, &["--worktree"]).expect_code(0);
        r
    };
    let worktree = |r: &Repo, what: &str| {
        let bin = ralph_bin().display().to_string();
        let root = r.p.root().display().to_string();
        sh_elsewhere(
            r,
            &format!("'{bin}' worktree {what} -C '{root}' add-the-bee-file"),
        )
    };
    let r = done("task: Add the bee file\nmax_iterations: 3\ntest_command: test -f b.txt");
    let wt = r.only_worktree();
    let refused = worktree(&r, "remove");
    refused.expect_code(1);
    let land = sh_elsewhere(&r, &between(&refused.stderr, "Land it (`", "`"));
    land.expect_code(0);
    assert_eq!(r.p.read("b.txt"), "bee\n");
    let next = land.stdout.split("Its worktree can go: ").nth(1).unwrap();
    sh_elsewhere(&r, next.trim()).expect_code(0);
    assert!(!wt.exists());

    let r = done("task: Add the bee file\nmax_iterations: 3");
    let discard = worktree(&r, "discard");
    discard.expect_code(0);
    // It reaches the loop, whose work in no commit keeps its worktree.
    let remove = sh_elsewhere(&r, &between(&discard.stdout, "commits; `", "`"));
    remove.expect_code(1);
    assert!(
        remove.stderr.contains("changes that are in no commit"),
        "{}",
        remove.stderr
    );
}

fn shell_words(s: &str) -> Vec<String> {
    s.split(' ')
        .map(|w| w.trim_matches('\'').to_owned())
        .collect()
}

#[test]
fn a_conflict_goes_back_to_the_loop_s_agent_which_resolves_it_and_the_work_lands() {
    let r = Repo::new(
        // No sandbox: the scripted agent counts its calls in a file outside its worktree.
        "task: Change the shared file\nmax_iterations: 3\nsandbox: false\ntest_command: grep -q loop a.txt",
        "- [ ] changed\n",
    );
    let counter = r.home().join("calls");
    let agent = format!(
        "{} --counter '{}'",
        r.p.agent(
            "[call 1]\nwrite a.txt loop\\n\ncheck-all\nsignal DONE\n\
             [call 2..]\nexpect-prompt-contains conflict\nrun git merge -q main\n\
             write a.txt \"main and loop\\n\"\nrun git add a.txt\nrun git commit -q -m resolved\n\
             signal DONE\n"
        ),
        counter.display()
    );
    r.run(&agent, &["--worktree"]).expect_code(0);
    r.p.write("a.txt", "main\n");
    r.git(&["commit", "-q", "-am", "main changes a.txt too"]);
    let land = r.exec(&["land", "change-the-shared-file"]);
    land.expect_code(0);
    assert!(land.stderr.contains("conflict"), "{}", land.stderr);
    // No resume command: the fallback, a fresh run with the failure in its prompt.
    assert!(
        land.stderr
            .contains("as a fresh run: its agent cannot resume a session"),
        "{}",
        land.stderr
    );
    assert_eq!(r.git(&["show", "main:a.txt"]), "main and loop\n");
    // main was checked out and clean: it moved as a fast-forward, work tree included.
    assert_eq!(r.p.read("a.txt"), "main and loop\n");
    assert_eq!(
        r.git(&["status", "--porcelain", "--untracked-files=no"]),
        ""
    );
}

/// A Claude stream-json turn in session `sess-land` that signals DONE.
const DONE_TURN: &str = r#"{"type":"system","subtype":"init","session_id":"sess-land"}
{"type":"assistant","message":{"content":[{"type":"text","text":"Finished.\n<ralph>DONE</ralph>"}]},"session_id":"sess-land"}
{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"sess-land"}
"#;

#[test]
fn a_conflict_resumes_the_agent_s_own_session_with_the_files_and_hunks_and_the_work_lands() {
    let r = Repo::new(
        // No sandbox: the scripted agent keeps its counter and records outside its worktree.
        "task: Change the shared file\nmax_iterations: 3\nsandbox: false\ntest_command: grep -q loop a.txt",
        "- [ ] changed\n",
    );
    let home = r.home().to_path_buf();
    std::fs::write(home.join("done.jsonl"), DONE_TURN).unwrap();
    let at = |f: &str| home.join(f).display().to_string();
    r.p.write(
        "agent-script.txt",
        &format!(
            "[call 1]\nwrite a.txt loop\\n\ncheck-all\nstream-json '{done}'\n\
             [call 2..]\nsave-prompt '{prompt}'\nsave-env '{env}'\nrun git merge -q main\n\
             write a.txt \"main and loop\\n\"\nrun git add a.txt\nrun git commit -q -m resolved\n\
             stream-json '{done}'\n",
            done = at("done.jsonl"),
            prompt = at("resumed-prompt.txt"),
            env = at("resumed-env.txt"),
        ),
    );
    let base = format!(
        "'{}' --script '{}' --counter '{}'",
        fake_agent_bin().display(),
        r.p.path("agent-script.txt").display(),
        at("calls")
    );
    let resume = format!("RALPH_RESUMED_SESSION={{session_id}} {base}");
    let mut cmd = r.ralph();
    cmd.args([
        "run",
        "--no-tui",
        "--worktree",
        "--agent-cmd",
        &base,
        "--agent-format",
        "claude",
        "--agent-resume-cmd",
        &resume,
    ]);
    Run::finish(spawn(cmd), Duration::from_secs(90)).expect_code(0);
    let wt = r.only_worktree();
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(wt.join(".ralph/state.json")).unwrap())
            .unwrap();
    assert_eq!(
        state["agent_session"], "sess-land",
        "the session is recorded for a landing to resume"
    );
    r.p.write("a.txt", "main\n");
    r.git(&["commit", "-q", "-am", "main changes a.txt too"]);

    let land = r.exec(&["land", "change-the-shared-file"]);
    land.expect_code(0);
    assert!(
        land.stderr
            .contains("back to its agent, resuming its session sess-land"),
        "{}",
        land.stderr
    );
    let env = std::fs::read_to_string(home.join("resumed-env.txt")).unwrap();
    assert!(env.contains("RALPH_RESUMED_SESSION=sess-land"), "{env}");
    let prompt = std::fs::read_to_string(home.join("resumed-prompt.txt")).unwrap();
    assert!(
        prompt.contains("Landing your finished work failed"),
        "{prompt}"
    );
    assert!(prompt.contains("these files conflict: a.txt"), "{prompt}");
    assert!(
        prompt.contains("<<<<<<<") && prompt.contains("+main") && prompt.contains("loop"),
        "the conflicting hunks: {prompt}"
    );
    assert!(
        !prompt.contains("## Criteria still open"),
        "a resume sends only what failed, not the whole task again: {prompt}"
    );
    assert_eq!(r.git(&["show", "main:a.txt"]), "main and loop\n");
    assert_eq!(status_json(&r, &wt)["worktree"]["state"], "landed");
}

#[test]
fn kill_9_in_the_middle_of_a_landing_leaves_the_target_unchanged_and_the_backup_in_place() {
    let home = tempfile::tempdir().unwrap();
    let fifo = home.path().join("fifo");
    let started = home.path().join("started");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    // Blocks only on the landing's combined tree, not in the loop's own verification.
    let test = format!(
        "test_command: case \"$PWD\" in *.landing-*) touch '{}'; cat '{}' ;; esac; test -f b.txt",
        started.display(),
        fifo.display()
    );
    let r = Repo::new(
        &format!("task: Add the bee file\nmax_iterations: 3\n{test}"),
        "- [ ] bee\n",
    );
    let agent = r.p.agent(&format!("[iteration 1]\n{EDIT_AND_DONE}"));
    r.run(&agent, &["--worktree"]).expect_code(0);
    // main is not checked out, so a landing would move it at once.
    r.git(&["checkout", "-q", "-b", "mine"]);
    let main_before = r.git(&["rev-parse", "main"]);
    let mut cmd = r.ralph();
    cmd.args(["land", "add-the-bee-file"]);
    let mut landing = spawn(cmd);
    wait_until(Duration::from_secs(30), "the landing's tests", || {
        started.exists().then_some(())
    });
    landing.kill().unwrap();
    landing.wait().unwrap();
    // Release the orphaned test command.
    let _ = std::fs::write(&fifo, "");
    assert_eq!(
        r.git(&["rev-parse", "main"]),
        main_before,
        "the target moved half-way"
    );
    let backups = r.git(&[
        "for-each-ref",
        "--format=%(objectname)",
        "refs/ralph/backup/main/",
    ]);
    assert_eq!(backups, main_before, "the backup ref is in place");
    // A second landing finishes the job.
    std::fs::remove_file(&started).unwrap();
    let mut cmd = r.ralph();
    cmd.args(["land", "add-the-bee-file"]);
    let second = spawn(cmd);
    wait_until(
        Duration::from_secs(30),
        "the second landing's tests",
        || started.exists().then_some(()),
    );
    std::fs::write(&fifo, "").unwrap();
    Run::finish(second, Duration::from_secs(60)).expect_code(0);
    assert_eq!(r.git(&["show", "main:b.txt"]), "bee\n");
}

#[test]
fn an_agent_reaching_into_the_user_s_checkout_stops_the_loop_loudly() {
    // Without the sandbox, which refuses that write itself (tests/e2e/sandbox.rs): the check
    // of the checkout is what stops a loop wherever there is no Landlock.
    let r = Repo::new(
        "task: Add the bee file\nmax_iterations: 3\nsandbox: false",
        "- [ ] bee\n",
    );
    let agent = r.p.agent(&format!(
        "[iteration 1]\nwrite '{}' hacked\\n\nwrite b.txt bee\\n\n[iteration 2]\ncheck-all\nsignal DONE\n",
        r.p.path("a.txt").display()
    ));
    let run = r.run(&agent, &["--worktree"]);
    run.expect_code(1);
    assert!(
        run.stdout.contains("the user's checkout changed"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("files changed"), "{}", run.stdout);
    let st = status_json(&r, &r.only_worktree());
    assert_eq!(st["status"], "failed");
    assert_eq!(
        st["iteration"], 1,
        "no iteration after the one that reached out"
    );
}

#[test]
fn worktree_remove_refuses_changes_in_no_commit_and_names_them() {
    let r = Repo::new(
        "task: Add the bee file\nmax_iterations: 3\nworktree: true\nworktree_setup: echo \"$RALPH_ROOT_PATH $RALPH_WORKTREE\" > setup.txt",
        "- [ ] bee\n",
    );
    let agent = r.p.agent(&format!("[iteration 1]\n{EDIT_AND_DONE}"));
    r.run(&agent, &[]).expect_code(0);
    let wt = r.only_worktree();
    let setup = std::fs::read_to_string(wt.join("setup.txt")).unwrap();
    assert!(
        setup.starts_with(&format!("{} ", r.p.root().display())),
        "{setup}"
    );
    assert!(
        setup.trim_end().ends_with(&wt.display().to_string()),
        "{setup}"
    );
    r.exec(&["worktree", "discard", "add-the-bee-file"])
        .expect_code(0);
    let rm = r.exec(&["worktree", "remove", "add-the-bee-file"]);
    rm.expect_code(1);
    assert!(rm.stderr.contains("b.txt"), "{}", rm.stderr);
    assert!(rm.stderr.contains("setup.txt"), "{}", rm.stderr);
    assert!(wt.join("b.txt").exists());
}

#[test]
fn land_pr_pushes_the_branch_and_opens_a_pull_request_with_gh() {
    let r = Repo::new(
        "task: Add the bee file\nmax_iterations: 3\ntest_command: test -f b.txt",
        "- [ ] bee\n",
    );
    let origin = r.home().join("origin.git");
    r.git(&["init", "-q", "--bare", &origin.display().to_string()]);
    r.git(&["remote", "add", "origin", &origin.display().to_string()]);
    let bin = r.home().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let gh_log = r.home().join("gh.log");
    std::fs::write(
        bin.join("gh"),
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{}'\necho https://github.example/pr/7\n",
            gh_log.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(bin.join("gh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let agent = r.p.agent(&format!("[iteration 1]\n{EDIT_AND_DONE}"));
    r.run(&agent, &["--worktree"]).expect_code(0);
    let mut cmd = r.ralph();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    cmd.args(["land", "--pr", "add-the-bee-file"])
        .env("PATH", path);
    let land = Run::from_output(cmd.output().unwrap());
    land.expect_code(0);
    assert!(
        land.stdout.contains("https://github.example/pr/7"),
        "{}",
        land.stdout
    );
    let args = std::fs::read_to_string(&gh_log).unwrap();
    assert!(args.starts_with("pr\ncreate\n"), "{args}");
    assert!(
        args.contains("--head\nralph/add-the-bee-file\n--base\nmain\n"),
        "{args}"
    );
    let pushed = r.git_in(&origin, &["show", "ralph/add-the-bee-file:b.txt"]);
    assert_eq!(pushed, "bee\n");
    assert_eq!(r.git(&["rev-parse", "main"]), r.git(&["rev-parse", "HEAD"]));
}

/// ralph's git on PATH is a wrapper that logs every command and fails the destructive ones
/// others were caught running; a whole worktree run and landing must never call one.
#[test]
fn ralph_never_runs_a_destructive_git_command() {
    let r = Repo::new(
        "task: Add the bee file\nmax_iterations: 3\ntest_command: test -f b.txt",
        "- [ ] bee\n",
    );
    let real = String::from_utf8(
        std::process::Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let bin = r.home().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = r.home().join("git.log");
    let user = r.p.root().display().to_string();
    std::fs::write(
        bin.join("git"),
        format!(
            r#"#!/bin/sh
printf '%s\n' "$*" >> '{log}'
case " $* " in
  *" stash clear "*|*" stash drop "*|*" gc "*|*" --prune"*|*" branch -D "*|*" branch -d "*|*" reset --hard"*|*" worktree prune"*|*" clean "*)
    echo "destructive: $*" >> '{log}.bad'; exit 99 ;;
esac
case " $* " in
  *" -C {user} "*)
    case " $* " in
      *" checkout "*|*" switch "*|*" merge "*|*" reset "*|*" stash "*|*" rebase "*|*" cherry-pick "*|*" commit "*)
        echo "in the user's checkout: $*" >> '{log}.bad'; exit 99 ;;
    esac ;;
esac
exec {real} "$@"
"#,
            log = log.display(),
            real = real.trim()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(bin.join("git"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let agent = r.p.agent(&format!("[iteration 1]\n{EDIT_AND_DONE}"));
    let mut cmd = r.ralph();
    cmd.args(["run", "--no-tui", "--worktree", "--agent-cmd", &agent])
        .env("PATH", &path);
    Run::finish(spawn(cmd), Duration::from_secs(90)).expect_code(0);
    for args in [
        vec!["log"],
        vec!["diff"],
        vec!["land", "add-the-bee-file"],
        vec!["worktree", "remove", "add-the-bee-file"],
    ] {
        let mut cmd = r.ralph();
        cmd.args(&args).env("PATH", &path);
        let out = Run::from_output(cmd.output().unwrap());
        assert!(out.code != Some(99), "{args:?}: {}", out.stderr);
    }
    let calls = std::fs::read_to_string(&log).unwrap();
    assert!(
        calls.contains("worktree add"),
        "the wrapper was not used: {calls}"
    );
    assert!(calls.contains("update-ref"), "{calls}");
    assert!(
        !log.with_extension("log.bad").exists(),
        "{}",
        std::fs::read_to_string(log.with_extension("log.bad")).unwrap()
    );
    assert_eq!(r.git(&["show", "main:b.txt"]), "bee\n");
}

#[test]
fn land_auto_with_merge_lands_after_a_verified_done() {
    let r = Repo::new(
        "task: Add the bee file\nmax_iterations: 3\ntest_command: test -f b.txt\nworktree: true\nland: auto\nland_with: merge",
        "- [ ] bee\n",
    );
    let agent = r.p.agent(&format!("[iteration 1]\n{EDIT_AND_DONE}"));
    // main is ahead of where the loop starts (the user works on a branch behind it).
    r.p.write("other.txt", "x\n");
    r.git(&["add", "other.txt"]);
    r.git(&["commit", "-q", "-m", "main moves on"]);
    r.git(&["checkout", "-q", "-b", "mine", "HEAD~1"]);
    let before = checkout_bytes(&r);
    let run = r.run(&agent, &["--onto", "main"]);
    run.expect_code(0);
    assert!(run.stdout.contains("landed on main"), "{}", run.stdout);
    assert_eq!(r.git(&["show", "main:b.txt"]), "bee\n");
    // A merge commit: two parents.
    let parents = r.git(&["rev-list", "--parents", "-n", "1", "main"]);
    assert_eq!(parents.split_whitespace().count(), 3, "{parents}");
    assert_eq!(r.git(&["show", "main:other.txt"]), "x\n");
    assert_eq!(checkout_bytes(&r), before);
}

#[test]
fn a_task_file_git_does_not_track_stays_out_of_what_lands_and_does_not_block_removal() {
    let r = Repo::new("task: unused\nmax_iterations: 1", "- [ ] x\n");
    r.git(&["rm", "-q", "--cached", "RALPH_TASK.md"]);
    r.git(&[
        "commit",
        "-q",
        "-m",
        "the task file is the user's, untracked",
    ]);
    r.p.write(
        "RALPH_TASK.md",
        "---\ntask: Add the bee file\nmax_iterations: 3\ntest_command: test -f b.txt\n---\n- [ ] bee\n",
    );
    let agent = r.p.agent(&format!("[iteration 1]\n{EDIT_AND_DONE}"));
    r.run(&agent, &["--worktree"]).expect_code(0);
    r.exec(&["land", "add-the-bee-file"]).expect_code(0);
    let files = r.git(&["show", "--name-only", "--format=", "main"]);
    assert!(files.contains("b.txt"), "{files}");
    assert!(!files.contains("RALPH_TASK.md"), "{files}");
    let wt = r.only_worktree();
    r.exec(&["worktree", "remove", "add-the-bee-file"])
        .expect_code(0);
    assert!(!wt.exists());
    // The user's own task file is as they left it.
    assert!(r.p.read("RALPH_TASK.md").contains("- [ ] bee"));
}

#[test]
fn two_loops_landing_at_once_land_one_after_the_other_each_on_the_tip_the_other_left() {
    // Each loop's tests take a second, so the two landings overlap unless the lock serialises
    // them.
    let r = Repo::new(
        "task: Add the bee file\nmax_iterations: 2\ntest_command: sleep 1 && test -f b.txt",
        "- [ ] bee\n",
    );
    r.p.write(
        "SEA_TASK.md",
        "---\ntask: Add the sea file\nmax_iterations: 2\ntest_command: sleep 1 && test -f c.txt\n---\n- [ ] sea\n",
    );
    // The user works on a branch of their own; both loops land on main.
    r.git(&["checkout", "-q", "-b", "mine"]);
    r.p.write("notes.txt", "mine\n");
    let base = r.git(&["rev-parse", "main"]).trim().to_owned();
    let before = checkout_bytes(&r);
    for (task, file, script) in [
        ("RALPH_TASK.md", "b.txt", "bee-agent.txt"),
        ("SEA_TASK.md", "c.txt", "sea-agent.txt"),
    ] {
        let script_path = r.home().join(script);
        std::fs::write(
            &script_path,
            format!("[iteration 1]\nwrite {file} {file}\\n\ncheck-all\nsignal DONE\n"),
        )
        .unwrap();
        let agent = format!(
            "'{}' --script '{}'",
            fake_agent_bin().display(),
            script_path.display()
        );
        r.run(&agent, &["--worktree", "--onto", "main", "--task", task])
            .expect_code(0);
    }
    assert_eq!(r.git(&["rev-parse", "main"]).trim(), base);

    let land = |name: &str| {
        let mut cmd = r.ralph();
        cmd.args(["land", name]);
        spawn(cmd)
    };
    let bee = land("add-the-bee-file");
    let sea = land("add-the-sea-file");
    let bee = Run::finish(bee, Duration::from_secs(90));
    let sea = Run::finish(sea, Duration::from_secs(90));
    bee.expect_code(0);
    sea.expect_code(0);

    // main went base -> first landing -> second landing, the second rebased on the first.
    let line = r.git(&["rev-list", "--first-parent", "main"]);
    let line: Vec<&str> = line.lines().collect();
    assert_eq!(line.len(), 3, "{line:?}");
    assert_eq!(line[2], base);
    assert_eq!(r.git(&["show", "main:b.txt"]), "b.txt\n");
    assert_eq!(r.git(&["show", "main:c.txt"]), "c.txt\n");
    let (first, second) = if bee.stdout.contains(&format!("it was at {}", &base[..12])) {
        (&bee, &sea)
    } else {
        (&sea, &bee)
    };
    assert!(
        first
            .stdout
            .contains(&format!("at {} (it was at {}", &line[1][..12], &base[..12])),
        "{}",
        first.stdout
    );
    assert!(
        second.stdout.contains(&format!(
            "at {} (it was at {}",
            &line[0][..12],
            &line[1][..12]
        )),
        "{}",
        second.stdout
    );
    assert_eq!(
        checkout_bytes(&r),
        before,
        "the landings touched the user's checkout"
    );
}

#[test]
fn a_target_that_moves_while_the_landing_tests_is_landed_on_again_from_its_new_tip() {
    // The test command, when it runs in a landing's temporary worktree the first time, moves
    // main to a commit made meanwhile (as another landing or a push would): the
    // compare-and-swap must fail, and the landing start again from the new tip.
    let r = Repo::new("task: Add the bee file\nmax_iterations: 2", "- [ ] bee\n");
    let mark = r.home().join("moved");
    let task = format!(
        "---\ntask: Add the bee file\nmax_iterations: 2\ntest_command: \"case $PWD in *.landing-*) test -e '{mark}' || {{ touch '{mark}' && git -C '{repo}' update-ref refs/heads/main $(git -C '{repo}' rev-parse other); }};; esac; test -f b.txt\"\n---\n- [ ] bee\n",
        mark = mark.display(),
        repo = r.p.root().display(),
    );
    r.p.write("RALPH_TASK.md", &task);
    r.git(&["commit", "-q", "-am", "the task"]);
    r.git(&["checkout", "-q", "-b", "other"]);
    r.p.write("z.txt", "meanwhile\n");
    r.git(&["add", "z.txt"]);
    r.git(&["commit", "-q", "-m", "meanwhile on main"]);
    let meanwhile = r.git(&["rev-parse", "HEAD"]).trim().to_owned();
    r.git(&["checkout", "-q", "-b", "mine", "main"]);
    let before = checkout_bytes(&r);
    let agent = r.p.agent(&format!("[iteration 1]\n{EDIT_AND_DONE}"));
    r.run(&agent, &["--worktree", "--onto", "main"])
        .expect_code(0);
    let land = r.exec(&["land", "add-the-bee-file"]);
    land.expect_code(0);
    assert!(mark.exists(), "the first test run moved main");
    // Landed on the commit that came meanwhile, tested again there.
    let tip = r.git(&["rev-parse", "main"]).trim().to_owned();
    assert_eq!(r.git(&["rev-parse", "main^"]).trim(), meanwhile);
    assert_eq!(r.git(&["show", "main:z.txt"]), "meanwhile\n");
    assert_eq!(r.git(&["show", "main:b.txt"]), "bee\n");
    assert!(
        land.stdout.contains(&format!(
            "at {} (it was at {}",
            &tip[..12],
            &meanwhile[..12]
        )),
        "{}",
        land.stdout
    );
    assert_eq!(checkout_bytes(&r), before);
}
