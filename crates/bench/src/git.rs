//! The `git` section: what checkpoints and landing cost (`ralph_git`, in process, as the loop
//! and `ralph land` call it).
//!
//! - A checkpoint per iteration in a repository of 10,000 committed files where each iteration
//!   changes three (target: under 100 ms). The first checkpoint of a run, which seeds ralph's
//!   index from the checkout's, is reported apart.
//! - A landing: a loop's worktree with one changed file, landed onto `main` (not checked out)
//!   with `test_command: true`: commit the work, backup ref, temporary worktree, rebase, tests,
//!   compare-and-swap.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use ralph_git::checkpoint;
use ralph_git::land::{self, Method, Options};
use ralph_git::worktree::{self, NewWorktree};

/// The checkpoint target from the issue.
const CHECKPOINT_TARGET_MS: f64 = 100.0;

/// The section's numbers.
#[derive(Debug)]
pub struct GitCosts {
    pub files: usize,
    pub first_checkpoint: Duration,
    pub checkpoints: Vec<Duration>,
    /// CPU time (user + system) of the git commands of each checkpoint: what it costs on a
    /// machine that is not busy with anything else.
    pub checkpoint_cpu: Vec<Duration>,
    pub landings: Vec<Duration>,
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=bench", "-c", "user.email=bench@localhost"])
        .args([
            "-c",
            "commit.gpgsign=false",
            "-c",
            "core.hooksPath=/dev/null",
        ])
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A repository of `files` committed files, 100 to a directory, on `main`.
fn repository(dir: &Path, files: usize) {
    git(dir, &["init", "-q", "-b", "main"]);
    for i in 0..files {
        let sub = dir.join(format!("src/d{:03}", i / 100));
        if i % 100 == 0 {
            std::fs::create_dir_all(&sub).unwrap();
        }
        std::fs::write(
            sub.join(format!("f{i:05}.txt")),
            format!("file {i}\nline two\n"),
        )
        .unwrap();
    }
    std::fs::write(dir.join(".gitignore"), ".ralph/\n").unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "10,000 files"]);
}

/// Runs the section: `iterations` checkpoints and `landings` landings.
pub fn run(files: usize, iterations: usize, landings: usize) -> GitCosts {
    let tmp = tempfile::Builder::new()
        .prefix("ralph-bench-git-")
        .tempdir()
        .unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    repository(&repo, files);
    let ralph_dir = repo.join(".ralph");
    std::fs::create_dir_all(&ralph_dir).unwrap();

    let start = Instant::now();
    let mut previous = checkpoint::after_iteration(&repo, &ralph_dir, "bench", 0, None, "bench")
        .unwrap()
        .unwrap()
        .commit;
    let first_checkpoint = start.elapsed();
    let mut checkpoints = Vec::new();
    let mut checkpoint_cpu = Vec::new();
    for it in 1..=iterations {
        for k in 0..3 {
            let i = (it * 37 + k * 1013) % files;
            let path = repo.join(format!("src/d{:03}/f{i:05}.txt", i / 100));
            std::fs::write(&path, format!("file {i}\nchanged in iteration {it}\n")).unwrap();
        }
        let cpu = children_cpu();
        let start = Instant::now();
        let cp = checkpoint::after_iteration(
            &repo,
            &ralph_dir,
            "bench",
            it as u32,
            Some(&previous),
            "bench",
        )
        .unwrap()
        .unwrap();
        checkpoints.push(start.elapsed());
        checkpoint_cpu.push(children_cpu() - cpu);
        assert_eq!(cp.stat.files, 3, "each iteration changed three files");
        previous = cp.commit;
    }

    // Landings onto main, which nothing has checked out.
    git(&repo, &["checkout", "-q", "--detach"]);
    let data = tmp.path().join("data");
    let mut times = Vec::new();
    for n in 0..landings {
        let slug = format!("bench-{n}");
        let info = worktree::create(&NewWorktree {
            from: &repo,
            data: &data,
            slug: &slug,
            setup: None,
            task_file: None,
            onto: Some("main"),
        })
        .unwrap();
        std::fs::write(info.worktree.join(format!("landed-{n}.txt")), "work\n").unwrap();
        let opts = Options {
            method: Method::Rebase,
            test_command: Some("true".into()),
            test_timeout: Duration::from_secs(60),
            task_file: None,
            message: format!("bench landing {n}"),
            data: data.clone(),
        };
        let start = Instant::now();
        let landed = land::land(&info, &opts).unwrap();
        times.push(start.elapsed());
        assert!(matches!(landed, land::Landing::Landed { .. }), "{landed:?}");
        // The next worktree starts from the new main.
        git(&repo, &["checkout", "-q", "--detach", "main"]);
    }
    GitCosts {
        files,
        first_checkpoint,
        checkpoints,
        checkpoint_cpu,
        landings: times,
    }
}

/// CPU time used so far by the child processes waited for.
fn children_cpu() -> Duration {
    use nix::sys::resource::{UsageWho, getrusage};
    getrusage(UsageWho::RUSAGE_CHILDREN).map_or(Duration::ZERO, |u| {
        let tv = |t: nix::sys::time::TimeVal| {
            Duration::new(t.tv_sec() as u64, t.tv_usec() as u32 * 1000)
        };
        tv(u.user_time()) + tv(u.system_time())
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn quantile(v: &[Duration], q: f64) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[((v.len() - 1) as f64 * q).round() as usize]
}

impl GitCosts {
    /// The section's table.
    pub fn table(&self) -> String {
        let med = ms(quantile(&self.checkpoints, 0.5));
        let verdict = if med < CHECKPOINT_TARGET_MS {
            "ok"
        } else {
            "MISS"
        };
        format!(
            "git ({} files)                         median    p99       max     target\n\
             checkpoint per iteration (3 changed)  {:>6.1} ms {:>6.1} ms {:>6.1} ms  < {CHECKPOINT_TARGET_MS} ms {verdict}\n\
             its git commands' CPU time (u+s)     {:>6.1} ms {:>6.1} ms {:>6.1} ms\n\
             first checkpoint of a run (seeding)   {:>6.1} ms\n\
             landing (rebase, tests `true`, CAS)    {:>6.1} ms {:>6.1} ms {:>6.1} ms\n",
            self.files,
            med,
            ms(quantile(&self.checkpoints, 0.99)),
            ms(quantile(&self.checkpoints, 1.0)),
            ms(quantile(&self.checkpoint_cpu, 0.5)),
            ms(quantile(&self.checkpoint_cpu, 0.99)),
            ms(quantile(&self.checkpoint_cpu, 1.0)),
            ms(self.first_checkpoint),
            ms(quantile(&self.landings, 0.5)),
            ms(quantile(&self.landings, 0.99)),
            ms(quantile(&self.landings, 1.0)),
        )
    }

    /// The section's JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "files": self.files,
            "checkpoint_ms": {
                "median": ms(quantile(&self.checkpoints, 0.5)),
                "p99": ms(quantile(&self.checkpoints, 0.99)),
                "max": ms(quantile(&self.checkpoints, 1.0)),
                "target": CHECKPOINT_TARGET_MS,
                "runs": self.checkpoints.len(),
            },
            "checkpoint_cpu_ms": {
                "median": ms(quantile(&self.checkpoint_cpu, 0.5)),
                "p99": ms(quantile(&self.checkpoint_cpu, 0.99)),
                "max": ms(quantile(&self.checkpoint_cpu, 1.0)),
            },
            "first_checkpoint_ms": ms(self.first_checkpoint),
            "landing_ms": {
                "median": ms(quantile(&self.landings, 0.5)),
                "p99": ms(quantile(&self.landings, 0.99)),
                "max": ms(quantile(&self.landings, 1.0)),
                "runs": self.landings.len(),
            },
        })
    }
}
