//! Checkpoints per iteration, `ralph log`, `ralph diff` and `ralph undo`, in a real git
//! repository with the scripted agent editing files over several iterations.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::util::*;

/// A project that is a git repository with one commit, and an environment of its own: git's
/// global config in a temporary file (`GIT_CONFIG_GLOBAL`, no system config), ralph's state,
/// config and data directories apart from the developer's.
pub struct Repo {
    pub p: Project,
    home: tempfile::TempDir,
}

impl Repo {
    /// `frontmatter` and `body` make RALPH_TASK.md; committed with `a.txt` ("zero") and a
    /// `.gitignore` that ignores `build/`.
    pub fn new(frontmatter: &str, body: &str) -> Repo {
        Repo::with_config(
            frontmatter,
            body,
            "[user]\n\tname = Tester\n\temail = t@example.com\n",
        )
    }

    /// [`Repo::new`] with this text as git's global config.
    pub fn with_config(frontmatter: &str, body: &str, gitconfig: &str) -> Repo {
        let r = Repo {
            p: Project::with_task(frontmatter, body),
            home: tempfile::tempdir().unwrap(),
        };
        std::fs::write(r.home.path().join("gitconfig"), gitconfig).unwrap();
        r.git(&["init", "-q", "-b", "main"]);
        r.p.write("a.txt", "zero\n");
        r.p.write(".gitignore", "build/\n");
        r.git(&["add", "-A"]);
        r.git(&[
            "-c",
            "user.name=Tester",
            "-c",
            "user.email=t@example.com",
            "-c",
            "commit.gpgsign=false",
            "commit",
            "-q",
            "-m",
            "first",
        ]);
        // The agent's script is the test's, not the project's.
        std::fs::write(r.p.path(".git/info/exclude"), "agent-script.txt\n").unwrap();
        r
    }

    /// The test's own directory outside the repository (for scripts, fifos, fake programs).
    pub fn home(&self) -> &Path {
        self.home.path()
    }

    /// Where ralph keeps the loops' worktrees, under the test's XDG_DATA_HOME: a directory per
    /// repository, a worktree per loop in it (none until a loop makes one).
    pub fn worktrees(&self) -> PathBuf {
        self.home.path().join("data/ralph/worktrees")
    }

    /// The worktree of this repository's loop whose task slug is `slug`.
    pub fn worktree(&self, slug: &str) -> PathBuf {
        self.repo_worktrees().join(slug)
    }

    /// The worktree of this repository's one loop.
    pub fn only_worktree(&self) -> PathBuf {
        std::fs::read_dir(self.repo_worktrees())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
            .unwrap()
    }

    /// This repository's directory of worktrees (the only one: the test has one repository).
    fn repo_worktrees(&self) -> PathBuf {
        std::fs::read_dir(self.worktrees())
            .unwrap()
            .flatten()
            .next()
            .unwrap()
            .path()
    }

    /// Sets the environment every git and ralph command of the test runs with.
    pub fn env(&self, cmd: &mut Command) {
        cmd.env("GIT_CONFIG_GLOBAL", self.home.path().join("gitconfig"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("XDG_DATA_HOME", self.home.path().join("data"))
            .env("HOME", self.home.path())
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE");
    }

    /// `git ARGS` in `dir`; its stdout, and the test fails if it fails.
    pub fn git_in(&self, dir: &Path, args: &[&str]) -> String {
        let mut cmd = Command::new("git");
        cmd.arg("-C").arg(dir).args(args);
        self.env(&mut cmd);
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// `git ARGS` in the repository.
    pub fn git(&self, args: &[&str]) -> String {
        self.git_in(self.p.root(), args)
    }

    /// `ralph` with the test's environment.
    pub fn ralph(&self) -> Command {
        let mut cmd = self.p.ralph();
        self.env(&mut cmd);
        cmd
    }

    /// `ralph run --no-tui --agent-cmd AGENT EXTRA...` to the end.
    pub fn run(&self, agent: &str, extra: &[&str]) -> Run {
        let mut cmd = self.ralph();
        cmd.args(["run", "--no-tui", "--agent-cmd", agent])
            .args(extra);
        Run::finish(spawn(cmd), Duration::from_secs(90))
    }

    /// `ralph ARGS` to the end.
    pub fn exec(&self, args: &[&str]) -> Run {
        let mut cmd = self.ralph();
        cmd.args(args);
        Run::from_output(cmd.output().unwrap())
    }

    /// The checkpoints of the last run: label and commit, in ref order.
    pub fn checkpoints(&self) -> Vec<(String, String)> {
        let run = self.p.state()["run_id"].as_str().unwrap().to_owned();
        self.git(&[
            "for-each-ref",
            "--format=%(refname) %(objectname)",
            "refs/ralph/",
        ])
        .lines()
        .filter_map(|l| {
            let (name, commit) = l.split_once(' ')?;
            let label = name.strip_prefix(&format!("refs/ralph/{run}/"))?;
            Some((label.to_owned(), commit.to_owned()))
        })
        .collect()
    }
}

const THREE_ITERATIONS: &str = "[iteration 1]\nwrite a.txt one\\n\nwrite b.txt bee\\n\n\
     [iteration 2]\nwrite a.txt two\\n\nappend b.txt more\\n\n\
     [iteration 3]\nwrite c.txt sea\\n\ncheck-all\nsignal DONE\n";

fn three_iterations() -> Repo {
    let r = Repo::new("task: Edit files\nmax_iterations: 5", "- [ ] edited\n");
    r.p.write("build/cache.bin", "ignored, precious\n");
    let agent = r.p.agent(THREE_ITERATIONS);
    r.run(&agent, &[]).expect_code(0);
    r
}

#[test]
fn every_iteration_leaves_a_checkpoint_and_the_user_s_index_head_and_branches_stay() {
    let r = Repo::new("task: Edit files\nmax_iterations: 5", "- [ ] edited\n");
    let index = std::fs::read(r.p.path(".git/index")).unwrap();
    let head = r.git(&["rev-parse", "HEAD"]);
    let branches = r.git(&["for-each-ref", "refs/heads/"]);
    let agent = r.p.agent(THREE_ITERATIONS);
    r.run(&agent, &[]).expect_code(0);

    let cps = r.checkpoints();
    let labels: Vec<&str> = cps.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(labels, ["0", "1", "2", "3"], "{cps:?}");
    // Each checkpoint holds the work tree as that iteration left it, untracked files included.
    assert_eq!(r.git(&["show", &format!("{}:a.txt", cps[1].1)]), "one\n");
    assert_eq!(r.git(&["show", &format!("{}:a.txt", cps[2].1)]), "two\n");
    assert_eq!(r.git(&["show", &format!("{}:c.txt", cps[3].1)]), "sea\n");
    // Parents chain: iteration 2's parent is iteration 1's, the start's is HEAD.
    assert_eq!(
        r.git(&["rev-parse", &format!("{}^", cps[2].1)]),
        format!("{}\n", cps[1].1)
    );
    assert_eq!(r.git(&["rev-parse", &format!("{}^", cps[0].1)]), head);
    // The ids are in state.json and events.jsonl.
    assert_eq!(r.p.state()["checkpoint"], cps[3].1.as_str());
    let events = r.p.events_of("checkpoint");
    assert_eq!(events.len(), 4);
    assert_eq!(events[1]["commit"], cps[1].1.as_str());
    assert_eq!(events[1]["insertions"], 2);
    // Nothing of the user's moved.
    assert_eq!(std::fs::read(r.p.path(".git/index")).unwrap(), index);
    assert_eq!(r.git(&["rev-parse", "HEAD"]), head);
    assert_eq!(r.git(&["for-each-ref", "refs/heads/"]), branches);
    assert_eq!(r.git(&["stash", "list"]), "");
}

#[test]
fn log_lists_each_iteration_with_its_signal_lines_and_checkpoint() {
    let r = three_iterations();
    let log = r.exec(&["log"]);
    log.expect_code(0);
    let rows: Vec<&str> = log.stdout.lines().collect();
    assert!(rows[2].trim_start().starts_with("0 "), "{}", log.stdout);
    assert!(rows[2].contains("(start)"), "{}", log.stdout);
    assert!(rows[3].contains("+2 -1"), "{}", log.stdout);
    assert!(rows[5].contains("DONE"), "{}", log.stdout);
    let json: serde_json::Value = serde_json::from_str(&r.exec(&["log", "--json"]).stdout).unwrap();
    let its = json["iterations"].as_array().unwrap();
    assert_eq!(its.len(), 4);
    assert_eq!(its[3]["signals"][0], "DONE");
    assert_eq!(its[2]["files"], 2);
    assert_eq!(its[2]["checkpoint"], r.checkpoints()[2].1.as_str());
}

/// The command an undo prints to undo itself.
fn undo_of_undo(undo: &Run) -> String {
    undo.stdout
        .lines()
        .find_map(|l| {
            l.split_once("To undo this undo: ")
                .map(|(_, c)| c.to_owned())
        })
        .expect("the undo says how to undo it")
}

/// Regression: `ralph log` printed its files column unpadded (a JSON value's `Display` takes
/// no width), so the figures stood under the wrong headings; and its hint (`ralph diff N`, as
/// `ralph undo`'s "To undo this undo") named no project, so asked with `-C` about a worktree
/// loop, it did not work as written from where the user stood.
#[test]
fn log_s_columns_line_up_and_its_hints_work_as_written_from_elsewhere() {
    let r = three_iterations();
    let elsewhere = tempfile::tempdir().unwrap();
    let root = r.p.root().display().to_string();
    let mut cmd = r.ralph();
    cmd.args(["log", "-C", &root]).current_dir(elsewhere.path());
    let log = Run::from_output(cmd.output().unwrap());
    log.expect_code(0);
    let lines: Vec<&str> = log.stdout.lines().collect();
    // Each figure ends where its heading ends.
    let end_of = |line: &str, word: &str| line.find(word).map(|i| i + word.len());
    let files_end = end_of(lines[1], "files").unwrap();
    for row in &lines[2..6] {
        let before: &str = &row[..files_end];
        assert!(
            before.ends_with(|c: char| c.is_ascii_digit()) && row[files_end..].starts_with("  "),
            "the files figure is not under its heading:\n{}",
            log.stdout
        );
    }
    // The hint, with N = 2, run through a shell from elsewhere, as a user would paste it.
    let hint = lines.last().unwrap();
    let diff = hint.split('`').nth(1).unwrap().replace(" N", " 2");
    let run = |command: &str| {
        let mut sh = Command::new("sh");
        sh.args(["-c", command]).current_dir(elsewhere.path());
        for (k, v) in r.p.user_env() {
            sh.env(k, v);
        }
        r.env(&mut sh);
        Run::from_output(sh.output().unwrap())
    };
    let shown = run(&diff);
    shown.expect_code(0);
    assert!(
        shown.stdout.contains("-one\n+two"),
        "{diff}: {}",
        shown.stdout
    );
    let undo = run(&hint.split('`').nth(3).unwrap().replace(" N", " 1"));
    undo.expect_code(0);
    assert_eq!(r.p.read("a.txt"), "one\n");
    run(&undo_of_undo(&undo)).expect_code(0);
    assert_eq!(r.p.read("a.txt"), "two\n");
}

#[test]
fn diff_shows_one_iteration_or_the_whole_run() {
    let r = three_iterations();
    let two = r.exec(&["diff", "2"]);
    two.expect_code(0);
    assert!(two.stdout.contains("-one\n+two"), "{}", two.stdout);
    assert!(!two.stdout.contains("c.txt"), "{}", two.stdout);
    let all = r.exec(&["diff"]);
    assert!(all.stdout.contains("-zero\n+two"), "{}", all.stdout);
    assert!(all.stdout.contains("+sea"), "{}", all.stdout);
    let missing = r.exec(&["diff", "9"]);
    missing.expect_code(2);
    assert!(
        missing.stderr.contains("no checkpoint after iteration 9"),
        "{}",
        missing.stderr
    );
}

#[test]
fn undo_goes_back_names_the_files_leaves_ignored_ones_and_can_itself_be_undone() {
    let r = three_iterations();
    let undo = r.exec(&["undo", "1"]);
    undo.expect_code(0);
    assert_eq!(r.p.read("a.txt"), "one\n");
    assert_eq!(r.p.read("b.txt"), "bee\n");
    assert!(!r.p.exists("c.txt"));
    assert_eq!(r.p.read("build/cache.bin"), "ignored, precious\n");
    assert!(undo.stdout.contains("restored a.txt"), "{}", undo.stdout);
    assert!(undo.stdout.contains("removed  c.txt"), "{}", undo.stdout);
    assert!(!undo.stdout.contains("build/"), "{}", undo.stdout);
    // The undo says how to undo it; doing so brings iteration 3's work back.
    let hint = undo_of_undo(&undo);
    let sha = hint.rsplit(' ').next().unwrap();
    r.exec(&["undo", sha]).expect_code(0);
    assert_eq!(r.p.read("a.txt"), "two\n");
    assert_eq!(r.p.read("c.txt"), "sea\n");
    assert_eq!(r.p.read("build/cache.bin"), "ignored, precious\n");
    // With no number: back to before the last iteration.
    r.exec(&["undo"]).expect_code(0);
    assert!(!r.p.exists("c.txt"));
    assert_eq!(r.p.read("a.txt"), "two\n");
}

#[test]
fn undo_is_refused_while_a_loop_runs_there() {
    let r = Repo::new("task: Edit files\nmax_iterations: 5", "- [ ] edited\n");
    let agent =
        r.p.agent("[iteration 1]\nwrite a.txt one\\n\n[iteration 2]\nhang\n");
    let mut cmd = r.ralph();
    cmd.args(["run", "--no-tui", "--agent-cmd", &agent]);
    let _running = spawn(cmd);
    wait_until(Duration::from_secs(30), "iteration 2", || {
        (r.p.exists(".ralph/state.json") && r.p.state()["iteration"] == 2).then_some(())
    });
    let undo = r.exec(&["undo", "0"]);
    undo.expect_code(1);
    assert!(undo.stderr.contains("a loop is running"), "{}", undo.stderr);
    assert_eq!(r.p.read("a.txt"), "one\n");
}

#[test]
fn checkpoints_false_makes_none() {
    let r = Repo::new(
        "task: Edit files\nmax_iterations: 5\ncheckpoints: false",
        "- [ ] edited\n",
    );
    let agent = r.p.agent(THREE_ITERATIONS);
    r.run(&agent, &[]).expect_code(0);
    assert_eq!(r.git(&["for-each-ref", "refs/ralph/"]), "");
    assert!(r.p.events_of("checkpoint").is_empty());
}

/// Regression guard for the wedge others hit: a `git commit` with `commit.gpgsign=true` and a
/// signer waiting on a prompt hangs an unattended loop forever.
#[test]
fn a_signing_program_that_hangs_does_not_hang_the_loop() {
    let home = tempfile::tempdir().unwrap();
    let signer = home.path().join("hanging-gpg");
    std::fs::write(&signer, "#!/bin/sh\nsleep 600\n").unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&signer, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = format!(
        "[user]\n\tname = Tester\n\temail = t@example.com\n\tsigningkey = ABC\n[commit]\n\tgpgsign = true\n[gpg]\n\tprogram = {}\n",
        signer.display()
    );
    let r = Repo::with_config(
        "task: Edit files\nmax_iterations: 5",
        "- [ ] edited\n",
        &config,
    );
    let agent = r.p.agent(THREE_ITERATIONS);
    let started = std::time::Instant::now();
    r.run(&agent, &[]).expect_code(0);
    assert!(started.elapsed() < Duration::from_secs(60));
    let cps = r.checkpoints();
    assert_eq!(cps.len(), 4);
    let commit = r.git(&["cat-file", "commit", &cps[3].1]);
    assert!(!commit.contains("gpgsig"), "{commit}");
}

#[test]
fn without_a_configured_identity_checkpoints_carry_ralph_s_own() {
    let r = Repo::with_config(
        "task: Edit files\nmax_iterations: 5",
        "- [ ] edited\n",
        "[user]\n\tuseConfigOnly = true\n",
    );
    let agent = r.p.agent(THREE_ITERATIONS);
    r.run(&agent, &[]).expect_code(0);
    let cps = r.checkpoints();
    assert_eq!(cps.len(), 4, "{:?}", r.p.events_of("warning"));
    let author = r.git(&["log", "-1", "--format=%an <%ae>", &cps[1].1]);
    assert_eq!(author, "ralph <ralph@localhost>\n");
}
