//! Hostile input: task files that are not files, agent output built to attack a terminal or
//! exhaust memory, a `.ralph/` full of traps, and text built to reach a shell.
//!
//! The output checks read ralph's stdout as raw bytes (not lossily decoded), so an invalid
//! UTF-8 byte or a lone C1 control that ralph passed through is seen, and the memory checks
//! read ralph's own peak resident set (`VmHWM`) while it runs, not the agent's.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::util::*;

/// The repository's `fixtures/hostile/` directory.
pub fn hostile_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/hostile")
        .join(name)
}

/// Scans a byte stream, chunk by chunk, for anything a terminal would act on.
///
/// What ralph prints in plain mode is text: printable characters, newlines and tabs, valid
/// UTF-8. Anything else (ESC, BEL, CR, other C0 controls, DEL, a C1 control in UTF-8 or as a
/// raw byte, invalid UTF-8) is a violation. Keeps the first 8 MiB and the last 64 KiB.
#[derive(Debug, Default)]
pub struct OutputCheck {
    pub total: u64,
    pub head: Vec<u8>,
    pub tail: std::collections::VecDeque<u8>,
    pub violations: Vec<String>,
    violation_count: u64,
    carry: Vec<u8>,
}

const HEAD_CAP: usize = 8 * 1024 * 1024;
const TAIL_CAP: usize = 64 * 1024;

impl OutputCheck {
    pub fn push(&mut self, bytes: &[u8]) {
        let room = HEAD_CAP.saturating_sub(self.head.len());
        self.head.extend_from_slice(&bytes[..bytes.len().min(room)]);
        let keep = &bytes[bytes.len().saturating_sub(TAIL_CAP)..];
        let overflow = (self.tail.len() + keep.len()).saturating_sub(TAIL_CAP);
        self.tail.drain(..overflow);
        self.tail.extend(keep);

        let mut data = std::mem::take(&mut self.carry);
        data.extend_from_slice(bytes);
        let base = self.total - (data.len() - bytes.len()) as u64;
        self.total += bytes.len() as u64;
        let mut i = 0;
        while i < data.len() {
            match std::str::from_utf8(&data[i..]) {
                Ok(s) => {
                    self.check_text(s, base + i as u64);
                    i = data.len();
                }
                Err(e) => {
                    let good = e.valid_up_to();
                    let s = std::str::from_utf8(&data[i..i + good]).unwrap();
                    self.check_text(s, base + i as u64);
                    i += good;
                    match e.error_len() {
                        Some(n) => {
                            self.violation(base + i as u64, &data[i..], "invalid UTF-8");
                            i += n;
                        }
                        None => {
                            // An incomplete character at the end: wait for the next chunk.
                            self.carry = data[i..].to_vec();
                            return;
                        }
                    }
                }
            }
        }
    }

    /// Ends the stream: a character still incomplete is invalid.
    pub fn finish(&mut self) {
        if !self.carry.is_empty() {
            let carry = std::mem::take(&mut self.carry);
            self.violation(self.total, &carry, "truncated UTF-8 at the end");
        }
    }

    fn check_text(&mut self, s: &str, base: u64) {
        for (at, c) in s.char_indices() {
            let bad = match c {
                '\n' | '\t' => None,
                '\u{1b}' => Some("ESC"),
                '\u{7}' => Some("BEL"),
                '\r' => Some("CR"),
                '\0' => Some("NUL"),
                '\u{0}'..='\u{1f}' => Some("C0 control"),
                '\u{7f}' => Some("DEL"),
                '\u{80}'..='\u{9f}' => Some("C1 control"),
                _ => None,
            };
            if let Some(what) = bad {
                self.violation(base + at as u64, &s.as_bytes()[at..], what);
            }
        }
    }

    fn violation(&mut self, at: u64, rest: &[u8], what: &str) {
        self.violation_count += 1;
        if self.violations.len() < 20 {
            let shown = &rest[..rest.len().min(24)];
            self.violations.push(format!(
                "{what} at byte {at}: {:?}",
                shown.escape_ascii().to_string()
            ));
        }
    }

    /// Fails the test if anything a terminal would act on was seen.
    #[track_caller]
    pub fn assert_clean(&self) {
        assert!(
            self.violations.is_empty(),
            "{} control sequences or bad bytes reached ralph's stdout; the first: {:#?}",
            self.violation_count,
            self.violations
        );
    }

    /// What was kept of the output (the head, and the tail if the two do not overlap), as text.
    pub fn text(&self) -> String {
        let mut bytes = self.head.clone();
        if self.total > self.head.len() as u64 {
            bytes.extend_from_slice(b"\n[...]\n");
            bytes.extend(self.tail.iter());
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// A `ralph` run watched while it ran.
#[derive(Debug)]
pub struct Watched {
    pub code: Option<i32>,
    pub out: OutputCheck,
    pub stderr: String,
    /// ralph's own peak resident set size (`VmHWM`), in KiB.
    pub peak_kib: u64,
    /// The most file descriptors ralph had open at one time.
    pub max_fds: usize,
    pub elapsed: Duration,
}

impl Watched {
    #[track_caller]
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code,
            Some(code),
            "unexpected exit code\n--- stdout\n{}\n--- stderr\n{}",
            tail_of(&self.out.text(), 6000),
            self.stderr
        );
        self
    }

    pub fn stdout(&self) -> String {
        self.out.text()
    }
}

fn tail_of(s: &str, n: usize) -> &str {
    let mut start = s.len().saturating_sub(n);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// `VmHWM` of `pid` in KiB, if it can be read.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// How many file descriptors `pid` has open.
pub fn open_fds(pid: u32) -> Option<usize> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
}

/// Runs `cmd` (a `ralph` command) to the end, streaming its stdout through an [`OutputCheck`]
/// and sampling its memory and open files every few milliseconds; fails the test after `limit`.
pub fn run_watched(cmd: Command, limit: Duration) -> Watched {
    watch(spawn(cmd), limit)
}

/// [`run_watched`] for a child already started with piped output.
pub fn watch(mut child: Guarded, limit: Duration) -> Watched {
    let start = Instant::now();
    let pid = child.id();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut check = OutputCheck::default();
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            match stdout.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => check.push(&buf[..n]),
            }
        }
        check.finish();
        check
    });
    let err_t = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stderr.read_to_end(&mut s);
        String::from_utf8_lossy(&s).into_owned()
    });
    let peak = Arc::new(AtomicU64::new(0));
    let fds = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, fds, done) = (peak.clone(), fds.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                if let Some(kib) = peak_rss_kib(pid) {
                    peak.fetch_max(kib, Ordering::Relaxed);
                }
                if let Some(n) = open_fds(pid) {
                    fds.fetch_max(n, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            done.store(true, Ordering::Relaxed);
            let out = out_t.join().unwrap();
            panic!(
                "ralph did not finish within {limit:?}; the end of its output:\n{}",
                tail_of(&out.text(), 4000)
            );
        }
        // Sample here too: the last reading before the process goes away counts.
        if let Some(kib) = peak_rss_kib(pid) {
            peak.fetch_max(kib, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    done.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    Watched {
        code: status.code(),
        out: out_t.join().unwrap(),
        stderr: err_t.join().unwrap(),
        peak_kib: peak.load(Ordering::Relaxed),
        max_fds: fds.load(Ordering::Relaxed),
        elapsed: start.elapsed(),
    }
}

/// `ralph run --no-tui --agent-cmd AGENT EXTRA...` in `p`, watched.
pub fn run_agent_watched(p: &Project, agent: &str, extra: &[&str], limit: Duration) -> Watched {
    let mut cmd = p.ralph();
    cmd.args(["run", "--no-tui", "--agent-cmd", agent])
        .args(extra);
    run_watched(cmd, limit)
}

/// ralph's resident set for a trivial run is well under this; anything the agent can make it
/// hold (a line, a question, a flood) must keep it there.
const MEMORY_BOUND_KIB: u64 = 96 * 1024;

// ---------------------------------------------------------------------------------------------
// 1. Task files that are not readable files.

#[test]
fn a_task_file_that_is_a_symlink_to_a_directory_exits_2_and_writes_nothing() {
    let p = Project::new();
    std::fs::create_dir(p.path("somewhere")).unwrap();
    std::os::unix::fs::symlink(p.path("somewhere"), p.path("RALPH_TASK.md")).unwrap();
    let run = p.exec(&["run", "--no-tui", "--agent-cmd", "true"]);
    run.expect_code(2);
    assert!(run.stderr.contains("RALPH_TASK.md"), "{}", run.stderr);
    assert!(run.stderr.contains("directory"), "{}", run.stderr);
    assert!(!p.exists(".ralph"));
}

#[test]
fn a_task_file_that_is_a_fifo_or_a_device_exits_2_without_blocking() {
    for kind in ["fifo", "device"] {
        let p = Project::new();
        match kind {
            "fifo" => nix::unistd::mkfifo(
                &p.path("RALPH_TASK.md"),
                nix::sys::stat::Mode::from_bits_truncate(0o644),
            )
            .unwrap(),
            _ => std::os::unix::fs::symlink("/dev/zero", p.path("RALPH_TASK.md")).unwrap(),
        }
        let mut cmd = p.ralph();
        cmd.args(["run", "--no-tui", "--agent-cmd", "true"]);
        // A blocking open of the FIFO, or reading /dev/zero to the end, would hang here.
        let run = Run::finish(spawn(cmd), Duration::from_secs(20));
        run.expect_code(2);
        assert!(
            run.stderr.contains("RALPH_TASK.md"),
            "{kind}: {}",
            run.stderr
        );
        assert!(!p.exists(".ralph"), "{kind}");
    }
}

#[test]
fn a_fifo_the_agent_plants_in_ralph_dir_is_named_and_never_hangs_the_loop() {
    // Regression: opening it waited for a writer forever, inside the runtime, and Ctrl-C and
    // SIGTERM could no longer stop the loop.
    for file in ["progress.md", "question.md", "events.jsonl"] {
        let p = Project::with_task("task: x\nmax_iterations: 3", "- [ ] x\n");
        let agent = format!(
            "cat >/dev/null; rm -f \"$RALPH_DIR/{file}\"; mkfifo \"$RALPH_DIR/{file}\"; echo '<ralph>QUESTION</ralph>'"
        );
        let run = p.run(&agent, &[]);
        let said = format!("{}{}", run.stdout, run.stderr);
        assert!(
            said.contains(&format!(".ralph/{file}: not a plain file")),
            "{file}: {said}"
        );
        // The agent's memory stops the run, saying why; a question or an event that cannot
        // be written or read is reported and the loop goes on.
        if file == "progress.md" {
            run.expect_code(1);
            assert_eq!(p.state()["status"], "failed", "{file}");
        } else {
            run.expect_code(3);
        }
    }
}

#[test]
fn a_directory_or_fifo_the_agent_plants_at_answer_md_is_set_aside_and_the_loop_goes_on() {
    // Regression: reading it failed, and every run stopped on it (exit 1) until a human
    // removed it; `ralph answer` could not write there either.
    for (kind, plant) in [
        (
            "directory",
            "mkdir -p \"$RALPH_DIR/answer.md/sub\"; echo keep >\"$RALPH_DIR/answer.md/sub/notes\"",
        ),
        ("pipe", "mkfifo \"$RALPH_DIR/answer.md\""),
    ] {
        let p = Project::with_task("task: x\nmax_iterations: 2", "- [ ] x\n");
        let agent = format!(
            "cat >/dev/null; if [ \"$RALPH_ITERATION\" = 1 ]; then {plant}; else echo two > iteration-2; fi"
        );
        let run = p.run(&agent, &[]);
        run.expect_code(3);
        let said = format!("{}{}", run.stdout, run.stderr);
        assert!(
            said.contains(&format!("answer.md was a {kind}")),
            "{kind}: {said}"
        );
        assert!(p.exists("iteration-2"), "{kind}: the loop went on");
        assert!(!p.exists(".ralph/answer.md"), "{kind}: the name is free");
        if kind == "directory" {
            let aside = std::fs::read_dir(p.path(".ralph"))
                .unwrap()
                .flatten()
                .find(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with("answer.md.not-a-file-")
                })
                .expect("moved aside");
            let notes = aside.path().join("sub/notes");
            assert_eq!(
                std::fs::read_to_string(notes).unwrap(),
                "keep\n",
                "kept whole"
            );
        }
    }
}

/// `chmod 000` does not stop root, and these tests often run as root (containers, CI). As root,
/// ralph is run as `nobody` instead, so the unreadable file really is unreadable to it.
#[test]
fn an_unreadable_task_file_exits_2_and_writes_nothing() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let p = Project::with_task("task: Secret\nmax_iterations: 1", "- [ ] x\n");
    std::fs::set_permissions(
        p.path("RALPH_TASK.md"),
        std::fs::Permissions::from_mode(0o000),
    )
    .unwrap();
    let mut cmd = p.ralph();
    cmd.args(["run", "--no-tui", "--agent-cmd", "true"]);
    if nix::unistd::geteuid().is_root() {
        // nobody must be able to reach the project and the binary; the file stays 000.
        std::fs::set_permissions(p.root(), std::fs::Permissions::from_mode(0o755)).unwrap();
        if !ralph_bin().ancestors().skip(1).all(|d| {
            d.metadata()
                .is_ok_and(|m| m.permissions().mode() & 0o001 != 0)
        }) {
            eprintln!(
                "skipped: running as root and {} is not reachable by nobody, so an unreadable file cannot be made",
                ralph_bin().display()
            );
            return;
        }
        cmd.uid(65534).gid(65534);
    }
    let run = Run::from_output(cmd.output().unwrap());
    run.expect_code(2);
    assert!(run.stderr.contains("RALPH_TASK.md"), "{}", run.stderr);
    assert!(
        run.stderr.to_lowercase().contains("permission denied"),
        "{}",
        run.stderr
    );
    assert!(!p.exists(".ralph"));
}

// ---------------------------------------------------------------------------------------------
// 2. Hostile agent output.

#[test]
fn terminal_attacks_in_agent_output_never_reach_ralphs_stdout() {
    let fixture = hostile_fixture("terminal-attacks.txt");
    // The fixture is outside the project, so outside the agent's sandbox unless listed.
    let p = Project::with_task(
        &format!(
            "task: Attack the terminal\nmax_iterations: 1\nsandbox_read: [\"{}\"]",
            fixture.display()
        ),
        "- [ ] x\n",
    );
    let agent = p.agent(&format!(
        "[iteration 1]\n\
         stream-json '{}'\n\
         eprint \"stderr title\\e]0;pwned\\x07 clear\\e[2J c1\\xc2\\x9b31m raw\\x9b nul\\0 end\"\n\
         eprint-raw \"unterminated stderr \\e]52;c;cm0=\"\n\
         check-all\n\
         signal DONE\n",
        fixture.display()
    ));
    let run = run_agent_watched(&p, &agent, &[], Duration::from_secs(60));
    run.expect_code(0);
    run.out.assert_clean();
    let out = run.stdout();
    // The words survive; the sequences and what they would have done do not.
    for kept in [
        "Clear screen, scrollback and title above.",
        "the docs here",
        "clipboard write and clipboard read  done",
        "progress 100%",
        "next line is fine",
        "stderr title clear",
    ] {
        assert!(out.contains(kept), "{kept:?} is missing:\n{out}");
    }
    for gone in [
        "pwned",
        "cm0gLXJmIH4K",
        "https://evil.example",
        "progress 10%",
        "544e",
        "Gf=100",
        "and this",
    ] {
        assert!(!out.contains(gone), "{gone:?} was shown:\n{out}");
    }
    // Only the real DONE counted: nothing hidden in a title, a DCS or an open OSC.
    let signals: Vec<_> = p
        .events()
        .into_iter()
        .filter(|e| e["event"] == "signal")
        .map(|e| e["signal"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(signals, ["DONE"]);
    // The raw log keeps what the agent really sent.
    let log = std::fs::read(p.path(".ralph/logs/run-0001-iter-0001.out")).unwrap();
    assert!(log.windows(4).any(|w| w == b"\x1b]52"), "the log is raw");
}

#[test]
fn invalid_utf8_and_nul_bytes_are_shown_replaced_and_signals_still_count() {
    let p = Project::with_task("task: Binary\nmax_iterations: 1", "- [ ] x\n");
    let agent = p.agent(
        "[iteration 1]\n\
         print-raw \"before\\xff\\xfe\\0\\0after\\xc3\\x28\\xed\\xa0\\x80\\n\"\n\
         print-raw \"\\0\\0\\0\\n\\xf0\\x90\\x80\"\n\
         print \"\"\n\
         check-all\n\
         print \"binary\\xff then the real one: <ralph>DONE</ralph>\"\n",
    );
    let run = run_agent_watched(&p, &agent, &[], Duration::from_secs(60));
    run.expect_code(0);
    run.out.assert_clean();
    let out = run.stdout();
    assert!(
        out.contains("before\u{fffd}\u{fffd}after\u{fffd}("),
        "{out}"
    );
    let signals = p
        .events()
        .into_iter()
        .filter(|e| e["event"] == "signal")
        .count();
    assert_eq!(signals, 1, "only the real tag counts");
}

#[test]
fn carriage_return_overwrites_show_only_the_final_text() {
    let p = Project::with_task("task: Progress\nmax_iterations: 1", "- [ ] x\n");
    let agent = p.agent(
        "[iteration 1]\n\
         print-raw \"downloading 10%\\rdownloading 55%\\rdownloading 100%\\n\"\n\
         print-raw \"line ending in CRLF\\r\\n\"\n\
         print-raw \"spinner |\\r\"\n\
         sleep 50ms\n\
         print-raw \"spinner /\\rdone spinning\\n\"\n\
         print-raw \"<ralph>GUTTER</ralph>\\rhidden by progress, so never said\\n\"\n",
    );
    let run = run_agent_watched(&p, &agent, &[], Duration::from_secs(60));
    run.out.assert_clean();
    let out = run.stdout();
    assert!(out.contains("downloading 100%"), "{out}");
    assert!(!out.contains("downloading 10%"), "{out}");
    assert!(out.contains("line ending in CRLF\n"), "{out}");
    assert!(out.contains("done spinning"), "{out}");
    assert!(!out.contains("spinner |"), "{out}");
    // Lines are judged as the human sees them: a tag a CR overwrote was never said.
    assert!(out.contains("hidden by progress, so never said"), "{out}");
    run.expect_code(3);
    assert!(!p.events().iter().any(|e| e["event"] == "signal"));
}

/// A fake `claude` on PATH, so that `--agent claude` (the stream-json preset itself, not just
/// its decoder as with `--agent-format`) runs the fake agent with `script`.
fn fake_claude(p: &Project, script: &str) -> String {
    p.write("fake-claude-script.txt", script);
    let bin = p.path("fake-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let claude = bin.join("claude");
    std::fs::write(
        &claude,
        format!(
            "#!/bin/sh\n# stands in for `claude -p --output-format stream-json ...`\nexec '{}' --script '{}'\n",
            fake_agent_bin().display(),
            p.path("fake-claude-script.txt").display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn a_claude_stream_of_malformed_lines_tool_results_and_escapes_yields_only_the_real_signal() {
    let p = Project::with_task(
        &format!(
            "task: Hostile stream\nmax_iterations: 2\nquestion_timeout: 0\nsandbox_read: [\"{}\"]",
            hostile_fixture("claude-hostile.jsonl").display()
        ),
        "- [ ] x\n",
    );
    let path = fake_claude(
        &p,
        &format!(
            "[iteration 1]\nquestion \"Is the stream survived?\"\nstream-json '{}'\n[iteration 2]\nsave-prompt prompt-2.txt\n",
            hostile_fixture("claude-hostile.jsonl").display()
        ),
    );
    let mut cmd = p.ralph();
    cmd.env("PATH", path)
        .args(["run", "--no-tui", "--agent", "claude"]);
    let run = run_watched(cmd, Duration::from_secs(60));
    run.expect_code(3);
    run.out.assert_clean();
    let out = run.stdout();
    assert!(out.contains("title and clear"), "{out}");
    assert!(!out.contains("pwned"), "{out}");
    let signals: Vec<_> = p
        .events()
        .into_iter()
        .filter(|e| e["event"] == "signal")
        .map(|e| {
            (
                e["iteration"].clone(),
                e["signal"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        signals,
        [(serde_json::json!(1), "QUESTION".to_string())],
        "tool results, file contents, echoes, thinking, subagents, results, broken and \
         trailing-garbage lines never count"
    );
    assert!(
        p.read("prompt-2.txt").contains("Is the stream survived?"),
        "the one real QUESTION was acted on"
    );
    assert!(p.events().iter().any(|e| e["event"] == "usage"));
}

/// The same hostile stream through every JSON decoder (`--agent-format`, as for a wrapper
/// script): none crashes or shows a control sequence, and none finds the DONE and GUTTER tags
/// hidden in tool results, file contents, echoes and broken lines.
#[test]
fn every_json_decoder_survives_the_hostile_stream_and_finds_no_hidden_signal() {
    for format in ["claude", "amp", "cursor", "codex", "gemini", "opencode"] {
        let p = Project::with_task(
            "task: Hostile stream\nmax_iterations: 1\nquestion_timeout: 0",
            "- [ ] x\n",
        );
        let agent = p.agent(&format!(
            "[iteration 1]\nstream-json '{}'\n",
            hostile_fixture("claude-hostile.jsonl").display()
        ));
        let run = run_agent_watched(
            &p,
            &agent,
            &["--agent-format", format],
            Duration::from_secs(60),
        );
        assert_eq!(run.code, Some(3), "{format}: {}", run.stderr);
        run.out.assert_clean();
        let signals: Vec<(String, String)> = p
            .events()
            .into_iter()
            .filter(|e| e["event"] == "signal")
            .map(|e| {
                (
                    e["signal"].as_str().unwrap().to_string(),
                    e["line"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        for (kind, line) in &signals {
            // Claude's `parent_tool_use_id` (a subagent's words) means nothing in the other
            // formats, so there that line is the agent's own, and its DONE counts.
            let subagent = line.starts_with("a subagent says");
            assert!(
                kind == "QUESTION"
                    || (kind == "DONE" && subagent && !["claude", "amp"].contains(&format)),
                "{format}: {signals:?}"
            );
        }
    }
}

#[test]
fn a_100_mb_line_keeps_ralphs_memory_bounded() {
    let p = Project::with_task("task: One long line\nmax_iterations: 1", "- [ ] x\n");
    let agent = p.agent("[iteration 1]\nflood 100M --line-len 104857600\ncheck-all\nsignal DONE\n");
    let run = run_agent_watched(&p, &agent, &[], Duration::from_secs(180));
    eprintln!(
        "a 100 MB line: {:?}, ralph's peak RSS {} KiB",
        run.elapsed, run.peak_kib
    );
    run.expect_code(0);
    run.out.assert_clean();
    assert!(
        run.peak_kib < MEMORY_BOUND_KIB,
        "ralph peaked at {} KiB for one 100 MB line",
        run.peak_kib
    );
    assert!(
        run.stdout().contains("more bytes]"),
        "the line is cut for display"
    );
    assert!(run.out.total < 1024 * 1024, "{} bytes shown", run.out.total);
}

#[test]
fn a_flood_of_output_on_both_streams_keeps_ralphs_memory_bounded() {
    let p = Project::with_task("task: Flood\nmax_iterations: 1", "- [ ] x\n");
    // 48 MB of lines on stdout; 32 MB of NUL bytes with no newline on stderr.
    let agent = p.agent(
        "[iteration 1]\n\
         run sh -c \"head -c 32000000 /dev/zero >&2\"\n\
         flood 48M --line-len 120\n\
         check-all\n\
         signal DONE\n",
    );
    let run = run_agent_watched(&p, &agent, &[], Duration::from_secs(240));
    eprintln!(
        "80 MB on stdout and stderr: {:?}, ralph's peak RSS {} KiB, at most {} files open",
        run.elapsed, run.peak_kib, run.max_fds
    );
    run.expect_code(0);
    run.out.assert_clean();
    assert!(
        run.peak_kib < MEMORY_BOUND_KIB,
        "ralph peaked at {} KiB",
        run.peak_kib
    );
    assert!(run.out.total > 48_000_000, "every line was shown");
    let err_log = std::fs::metadata(p.path(".ralph/logs/run-0001-iter-0001.err")).unwrap();
    assert_eq!(err_log.len(), 32_000_000, "stderr is logged raw");
}

// ---------------------------------------------------------------------------------------------
// 3. A hostile workspace.

/// A file outside the project that the agent points `.ralph/` files at.
struct Secret {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

const SECRET: &str = "SECRET-TOKEN-do-not-show-or-overwrite";

fn secret() -> Secret {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("secret.txt");
    std::fs::write(&path, SECRET).unwrap();
    Secret { _dir: dir, path }
}

#[test]
fn a_question_file_symlinked_outside_is_refused_never_shown() {
    let s = secret();
    let p = Project::with_task(
        "task: Symlinked question\nmax_iterations: 2\nquestion_timeout: 0",
        "- [ ] x\n",
    );
    let agent = p.agent(&format!(
        "[iteration 1]\nrun ln -s '{}' .ralph/question.md\nsignal QUESTION\n[iteration 2]\nsave-prompt prompt-2.txt\n",
        s.path.display()
    ));
    let run = run_agent_watched(&p, &agent, &[], Duration::from_secs(60));
    run.expect_code(3);
    run.out.assert_clean();
    let out = run.stdout();
    assert!(!out.contains(SECRET), "{out}");
    assert!(!run.stderr.contains(SECRET), "{}", run.stderr);
    assert!(
        run.stderr.contains("question.md") && run.stderr.contains("symlink"),
        "it says what it refused: {}",
        run.stderr
    );
    assert_eq!(std::fs::read_to_string(&s.path).unwrap(), SECRET);
    let prompt = p.read("prompt-2.txt");
    assert!(!prompt.contains(SECRET), "{prompt}");
    assert!(prompt.contains("Your question was lost"), "{prompt}");
    assert!(
        !std::fs::read_to_string(p.path(".ralph/state.json"))
            .unwrap()
            .contains(SECRET)
    );
    assert!(!p.read(".ralph/events.jsonl").contains(SECRET));
}

/// Regression: an agent that planted `.ralph/answer.md` as a link to a file outside ended the
/// whole run (exit 1, "Remove it and run again"), and the next `ralph run` stopped on the same
/// link while re-presenting the question. Nothing leaked, but an agent could end an unattended
/// loop. Now the loop removes the link unread, says so, and keeps waiting for a real answer.
#[test]
fn a_symlinked_answer_file_planted_by_the_agent_stopped_the_loop() {
    let s = secret();
    let p = Project::with_task(
        "task: Symlinked answer\nmax_iterations: 2\nquestion_timeout: 1m",
        "- [ ] x\n",
    );
    let agent = p.agent(&format!(
        "[iteration 1]\n\
         question \"Which one?\" --option A --option B\n\
         run ln -s '{}' .ralph/answer.md\n\
         signal QUESTION\n\
         [iteration 2]\nsave-prompt prompt-2.txt\n",
        s.path.display()
    ));
    let child = p.start(&agent, &[]);
    p.wait_for_status("waiting_input", Duration::from_secs(30));
    // `ralph answer` racing the loop's cleanup sees the link and refuses it; once the loop has
    // removed it, the answer goes through.
    let by_answer = wait_until(Duration::from_secs(20), "an accepted answer", || {
        let r = p.exec(&["answer", "B"]);
        assert!(
            !r.stderr.contains(SECRET) && !r.stdout.contains(SECRET),
            "{r:?}"
        );
        assert_eq!(
            std::fs::read_to_string(&s.path).unwrap(),
            SECRET,
            "written through"
        );
        if r.code != Some(0) {
            assert!(r.stderr.contains("symlink"), "{}", r.stderr);
            std::thread::sleep(Duration::from_millis(50));
        }
        (r.code == Some(0)).then_some(r)
    });
    let run = watch(child, Duration::from_secs(60));
    run.expect_code(3);
    run.out.assert_clean();
    assert_eq!(
        std::fs::read_to_string(&s.path).unwrap(),
        SECRET,
        "written through"
    );
    for (what, text) in [
        ("ralph run stdout", run.stdout()),
        ("ralph run stderr", run.stderr.clone()),
        ("ralph answer", format!("{by_answer:?}")),
        ("events", p.read(".ralph/events.jsonl")),
        ("state", p.read(".ralph/state.json")),
        ("prompt", p.read("prompt-2.txt")),
        ("clarifications", p.read(".ralph/clarifications.md")),
    ] {
        assert!(!text.contains(SECRET), "{what} shows the secret:\n{text}");
    }
    let out = &run.stderr;
    assert!(
        out.contains("answer.md was a symlink") && out.contains("removed the link unread"),
        "it says what it refused:\n{out}"
    );
    assert!(
        p.read("prompt-2.txt").contains("> B"),
        "the real answer arrived"
    );
}

/// An agent may link its memory files elsewhere; ralph refuses to read through the link, stops
/// with a message naming the file, and shows nothing of what the link points at.
#[test]
fn a_symlinked_progress_file_is_refused_with_a_message_and_never_read() {
    let s = secret();
    let p = Project::with_task("task: Linked progress\nmax_iterations: 2", "- [ ] x\n");
    let agent = p.agent(&format!(
        "[iteration 1]\nrun rm .ralph/progress.md\nrun ln -s '{}' .ralph/progress.md\n\
         [iteration 2]\nsave-prompt prompt-2.txt\n",
        s.path.display()
    ));
    let run = run_agent_watched(&p, &agent, &[], Duration::from_secs(60));
    run.out.assert_clean();
    assert_eq!(std::fs::read_to_string(&s.path).unwrap(), SECRET);
    let all = format!("{}{}", run.stdout(), run.stderr);
    assert!(!all.contains(SECRET), "{all}");
    assert!(!p.exists("prompt-2.txt") || !p.read("prompt-2.txt").contains(SECRET));
    assert!(
        all.contains("progress.md") && all.contains("symlink"),
        "it says what it refused ({:?}):\n{all}",
        run.code
    );
    // The run ended on it: the state says so and why (it said `running` forever before).
    let state = p.state();
    assert_eq!(state["status"], "failed", "{state}");
    assert!(
        state["reason"].as_str().unwrap().contains("progress.md"),
        "{state}"
    );
    assert!(p.events().iter().any(|e| e["event"] == "run_end"));
}

#[test]
fn a_symlinked_ralph_dir_is_refused_by_every_command() {
    let elsewhere = tempfile::tempdir().unwrap();
    let p = Project::with_task("task: Linked\nmax_iterations: 1", "- [ ] x\n");
    std::os::unix::fs::symlink(elsewhere.path(), p.path(".ralph")).unwrap();
    let agent = p.agent("[iteration 1]\nprint hello\n");
    for (args, code) in [
        (vec!["run", "--no-tui", "--agent-cmd", agent.as_str()], 2),
        (vec!["answer", "--force", "hello"], 1),
        (vec!["status"], 1),
    ] {
        let run = Run::from_output(p.ralph().args(&args).output().unwrap());
        assert_eq!(run.code, Some(code), "{args:?}: {run:?}");
        assert!(
            run.stderr.contains(".ralph") && run.stderr.contains("symlink"),
            "{args:?}: {}",
            run.stderr
        );
    }
    assert_eq!(
        std::fs::read_dir(elsewhere.path()).unwrap().count(),
        0,
        "nothing was written through the link"
    );
}

#[test]
fn a_50_mb_question_is_shown_cut_with_a_note_in_bounded_memory() {
    let p = Project::with_task(
        "task: Huge question\nmax_iterations: 2\nquestion_timeout: 0",
        "- [ ] x\n",
    );
    let agent = p.agent(
        "[iteration 1]\n\
         run sh -c \"{ echo 'Which of these?'; yes 'an endless line of question text \\e[2J' | head -c 50000000; } > .ralph/question.md\"\n\
         signal QUESTION\n\
         [iteration 2]\nsave-prompt prompt-2.txt\n",
    );
    let run = run_agent_watched(&p, &agent, &[], Duration::from_secs(120));
    run.expect_code(3);
    run.out.assert_clean();
    let out = run.stdout();
    assert!(out.contains("Which of these?"), "{}", tail_of(&out, 2000));
    assert!(
        run.stderr
            .contains("question cut: the file is 50000016 bytes"),
        "the note gives the size: {}",
        tail_of(&run.stderr, 2000)
    );
    assert!(
        run.out.total < 2 * 1024 * 1024,
        "{} bytes shown",
        run.out.total
    );
    assert!(
        run.peak_kib < MEMORY_BOUND_KIB,
        "ralph peaked at {} KiB",
        run.peak_kib
    );
    let prompt_len = std::fs::metadata(p.path("prompt-2.txt")).unwrap().len();
    assert!(
        prompt_len < 2 * 1024 * 1024,
        "the prompt carries the cut question: {prompt_len}"
    );
    let state_len = std::fs::metadata(p.path(".ralph/state.json"))
        .unwrap()
        .len();
    assert!(state_len < 2 * 1024 * 1024, "state.json: {state_len}");
}

#[test]
fn a_question_file_that_changes_while_shown_keeps_the_question_that_was_shown() {
    let p = Project::with_task(
        "task: Shifting question\nmax_iterations: 2\nquestion_timeout: 1m",
        "- [ ] x\n",
    );
    let agent = p.agent(
        "[iteration 1]\n\
         question \"The original question?\" --option Yes --option No\n\
         signal QUESTION\n\
         [iteration 2]\nsave-prompt prompt-2.txt\n",
    );
    let child = p.start(&agent, &[]);
    p.wait_for_status("waiting_input", Duration::from_secs(30));
    // Rewrite it in place, swap it, empty it, break it: each wakes the loop's file watch.
    for (i, text) in [
        "A rewritten question?\n",
        "---\noptions: [broken\n",
        "",
        "\x1b]0;pwned\x07Replaced by escapes?\n",
    ]
    .iter()
    .enumerate()
    {
        if i % 2 == 0 {
            std::fs::write(p.path(".ralph/question.md"), text).unwrap();
        } else {
            std::fs::write(p.path(".ralph/q.tmp"), text).unwrap();
            std::fs::rename(p.path(".ralph/q.tmp"), p.path(".ralph/question.md")).unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
        let status = p.exec(&["status", "--json"]);
        let json: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
        assert_eq!(json["status"], "waiting_input");
        assert_eq!(json["pending_question"]["text"], "The original question?");
    }
    p.exec(&["answer", "2"]).expect_code(0);
    let run = watch(child, Duration::from_secs(60));
    run.expect_code(3);
    run.out.assert_clean();
    let out = run.stdout();
    assert!(!out.contains("A rewritten question?"), "{out}");
    assert!(!out.contains("pwned"), "{out}");
    let prompt = p.read("prompt-2.txt");
    assert!(prompt.contains("> The original question?"), "{prompt}");
    assert!(prompt.contains("> No"), "{prompt}");
    let log = p.read(".ralph/clarifications.md");
    assert!(
        log.contains("The original question?") && log.contains("No"),
        "{log}"
    );
}

// ---------------------------------------------------------------------------------------------
// 6. Shell safety: what the agent and the human write is data, never a command.

/// Text built to run something if it ever went through a shell string.
const NASTY_ANSWER: &str = "Use $(touch pwned-answer) and `touch pwned-answer2`; touch pwned-answer3 && echo \"quoted\" 'single' \\ back\nsecond line | touch pwned-answer4 > x";

fn assert_nothing_ran(p: &Project) {
    let pwned: Vec<_> = std::fs::read_dir(p.root())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("pwned"))
        .collect();
    assert!(pwned.is_empty(), "text was run as a command: {pwned:?}");
}

/// An agent that asks the question in `fixtures/hostile/questions/{name}` (copied into the
/// project, then into `.ralph/question.md`) and signals QUESTION; its second iteration runs
/// `then` (fake-agent commands; empty for none).
fn asks_fixture(p: &Project, name: &str, then: &str) -> String {
    std::fs::copy(
        hostile_fixture(&format!("questions/{name}")),
        p.path("question-source.md"),
    )
    .unwrap();
    let mut script = String::from(
        "[iteration 1]\ncopy question-source.md .ralph/question.md\nsignal QUESTION\n",
    );
    if !then.is_empty() {
        script.push_str("[iteration 2]\n");
        script.push_str(then);
    }
    p.agent(&script)
}

#[test]
fn question_option_and_answer_text_with_shell_syntax_stay_verbatim_everywhere() {
    let p = Project::with_task(
        "task: Shell safety\nmax_iterations: 2\nquestion_timeout: 1m\nnotify_command: for v in \"$RALPH_QUESTION\" \"$RALPH_QUESTION_OPTIONS\" \"$RALPH_QUESTION_DEFAULT\"; do printf '%s\\n--\\n' \"$v\"; done > notified.txt",
        "- [ ] x\n",
    );
    let agent = asks_fixture(
        &p,
        "shell-metacharacters.md",
        "save-prompt prompt-2.txt\ncopy .ralph/answer.md answer-2.md\n",
    );
    let child = p.start(&agent, &[]);
    p.wait_for_status("waiting_input", Duration::from_secs(30));

    let question = "Delete $(touch pwned-text) and `touch pwned-text2`; touch pwned-text3?";
    let options = [
        "$(touch pwned-option)",
        "`touch pwned-backtick`",
        "a; touch pwned-semicolon",
        "\"double\" 'single' \\ back",
    ];
    let status = Run::from_output(p.ralph().arg("status").output().unwrap());
    status.expect_code(0);
    // `ralph status` renders the question's markdown as the panel does (a code span shows as
    // its text); `--json` below keeps it as written.
    let rendered = "Delete $(touch pwned-text) and touch pwned-text2; touch pwned-text3?";
    assert!(status.stdout.contains(rendered), "{}", status.stdout);
    for o in options {
        assert!(status.stdout.contains(o), "{o} in {}", status.stdout);
    }
    let json = p.exec(&["status", "--json"]);
    let json: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(json["pending_question"]["text"], question);
    assert_eq!(
        json["pending_question"]["default"],
        "$(touch pwned-default)"
    );

    let answered = p.exec(&["answer", NASTY_ANSWER]);
    answered.expect_code(0);
    let run = watch(child, Duration::from_secs(60));
    run.expect_code(3);
    run.out.assert_clean();

    let notified = wait_until(Duration::from_secs(10), "notified.txt", || {
        std::fs::read_to_string(p.path("notified.txt"))
            .ok()
            .filter(|s| s.matches("--\n").count() == 3)
    });
    assert_eq!(
        notified,
        format!(
            "{question}\n--\n{}\n--\n$(touch pwned-default)\n--\n",
            options.join("\n")
        )
    );
    let prompt = p.read("prompt-2.txt");
    for line in NASTY_ANSWER.lines() {
        assert!(
            prompt.contains(&format!("> {line}")),
            "{line:?} in {prompt}"
        );
    }
    assert!(prompt.contains(question), "{prompt}");
    assert!(
        p.read("answer-2.md").contains(NASTY_ANSWER),
        "answer.md is verbatim"
    );
    let log = p.read(".ralph/clarifications.md");
    assert!(log.contains(question), "{log}");
    for line in NASTY_ANSWER.lines() {
        assert!(log.contains(line), "{line:?} in {log}");
    }
    assert!(run.stdout().contains(rendered), "{}", run.stdout());
    assert_nothing_ran(&p);
}

#[test]
fn an_option_label_with_shell_syntax_picked_by_number_is_delivered_verbatim() {
    let p = Project::with_task(
        "task: Shell safety\nmax_iterations: 2\nquestion_timeout: 1m",
        "- [ ] x\n",
    );
    let agent = asks_fixture(&p, "shell-metacharacters.md", "save-prompt prompt-2.txt\n");
    let child = p.start(&agent, &[]);
    p.wait_for_status("waiting_input", Duration::from_secs(30));
    // Option 4 with a note: `--option` and the note are both data.
    let answered = p.exec(&["answer", "--option", "4", "and $(touch pwned-note)"]);
    answered.expect_code(0);
    let run = watch(child, Duration::from_secs(60));
    run.expect_code(3);
    // The label on its line, the note after a blank line (issue 25, item 12).
    for want in ["\"double\" 'single' \\ back", "and $(touch pwned-note)"] {
        assert!(
            p.read("prompt-2.txt").contains(&format!("> {want}")),
            "{}",
            p.read("prompt-2.txt")
        );
        assert!(p.read(".ralph/clarifications.md").contains(want));
    }
    assert!(
        run.stdout().contains("\"double\" 'single' \\ back"),
        "{}",
        run.stdout()
    );
    assert_nothing_ran(&p);
}

/// Regression: plain mode (`--no-tui`, pipes, CI) and `ralph status` printed the question
/// file's text, options, default and context raw, so an agent could clear the screen, retitle
/// the terminal or write the clipboard through its question. The terminal view sanitized; these
/// two did not. Fixed in `crates/ui/src/plain.rs` and `crates/cli/src/cmd_status.rs`.
#[test]
fn plain_mode_and_status_showed_escape_sequences_from_the_question_file_raw() {
    let p = Project::with_task(
        "task: Escapes in the question\nmax_iterations: 2\nquestion_timeout: 0",
        "- [ ] x\n",
    );
    let agent = asks_fixture(&p, "escapes-everywhere.md", "print next\n");
    let run = run_agent_watched(&p, &agent, &[], Duration::from_secs(60));
    run.expect_code(3);
    run.out.assert_clean();
    let out = run.stdout();
    assert!(out.contains("Which cache?"), "{out}");
    assert!(out.contains("Redis"), "{out}");
    assert!(!out.contains("pwned"), "{out}");
    // `ralph status` shows a question too, and must be just as careful.
    let p2 = Project::with_task(
        "task: Status\nmax_iterations: 1\nquestion_timeout: 1m",
        "- [ ] x\n",
    );
    let agent = asks_fixture(&p2, "escapes-everywhere.md", "");
    let mut cmd = p2.ralph();
    cmd.args(["run", "--no-tui", "--agent-cmd", &agent]);
    let mut child = spawn(cmd);
    p2.wait_for_status("waiting_input", Duration::from_secs(30));
    let status = p2.ralph().arg("status").output().unwrap();
    let mut check = OutputCheck::default();
    check.push(&status.stdout);
    check.finish();
    let _ = child.kill();
    let _ = child.wait();
    check.assert_clean();
    assert!(check.text().contains("Which cache?"), "{}", check.text());
}
