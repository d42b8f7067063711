//! `ralph agents`: the presets, whether each is installed, where, which version, and what it
//! can do. [`probe`] is shared with `ralph doctor`.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ralph_loop::agents::{self, Preset, Program};
use ralph_signal::sanitize;

use crate::CmdResult;

/// How long `<agent> --version` may take before ralph stops waiting for it.
pub const VERSION_TIMEOUT: Duration = Duration::from_secs(15);

/// What was found of one preset's program.
#[derive(Debug)]
pub struct Found {
    /// The preset.
    pub preset: &'static Preset,
    /// Where its program is; `None` when it is not installed.
    pub path: Option<PathBuf>,
    /// What `--version` said (its version number when one is in it).
    pub version: Option<String>,
}

/// Looks every preset's program up in `path_env` and asks each one found for its version,
/// all at once (a slow CLI costs its own time, not the sum).
pub fn probe(path_env: Option<&OsStr>) -> Vec<Found> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = agents::presets()
            .iter()
            .map(|preset| {
                scope.spawn(move || {
                    let path = program_path(preset, path_env);
                    let version = match preset.program {
                        Program::Ralph => Some(env!("CARGO_PKG_VERSION").to_owned()),
                        Program::Path(_) => path.as_ref().and_then(|p| version_of(p)),
                    };
                    Found {
                        preset,
                        path,
                        version,
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a version probe panicked"))
            .collect()
    })
}

/// The file a preset's program would be started from.
fn program_path(preset: &Preset, path_env: Option<&OsStr>) -> Option<PathBuf> {
    match preset.program {
        Program::Ralph => std::env::current_exe().ok(),
        Program::Path(_) => preset.locate(path_env),
    }
}

/// Runs `program --version` (stdin closed, no more than [`VERSION_TIMEOUT`]) and picks the
/// version number out of its first line: `2.1.332 (Claude Code)` and `codex-cli 0.171.0`
/// both give the number. The output is the program's, so it is sanitized and cut short.
fn version_of(program: &std::path::Path) -> Option<String> {
    let mut child = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        // Claude Code's updater and telemetry have no business in a version check.
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .spawn()
        .ok()?;
    let deadline = Instant::now() + VERSION_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take()?, &mut out).ok()?;
    let line = sanitize(out.lines().find(|l| !l.trim().is_empty())?);
    let number = line
        .split(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == ',')
        .map(|w| w.trim_start_matches('v'))
        .find(|w| w.starts_with(|c: char| c.is_ascii_digit()) && w.contains('.'));
    Some(match number {
        Some(n) => n.to_owned(),
        None => line.chars().take(40).collect(),
    })
}

/// What a preset's unattended flags let the agent do without asking.
pub fn unattended(preset: &Preset) -> &'static str {
    match preset.name {
        "claude" | "claude-sdk" => {
            "--dangerously-skip-permissions: every tool without asking (edits, shell commands, network); as root, IS_SANDBOX=1 is added"
        }
        "codex" => {
            "--dangerously-bypass-approvals-and-sandbox: no approvals and no sandbox; commands run with your user's rights, network included"
        }
        "cursor" => "--force --trust: commands and edits without asking; the workspace is trusted",
        "gemini" => "--yolo --skip-trust: every tool call approved; the folder trusted",
        "opencode" => {
            "--auto: its `ask` rules approved (edits and commands are allowed by its defaults)"
        }
        "amp" => "--dangerously-allow-all: every tool without asking",
        "demo" => "writes only the demo's own files, in the demo's directory",
        _ => "see its preset",
    }
}

/// Lists the presets.
pub fn run() -> CmdResult {
    let path = std::env::var_os("PATH");
    let found = probe(path.as_deref());
    let picked = agents::detect(path.as_deref()).map(|p| p.name);
    let rows: Vec<[String; 6]> = found
        .iter()
        .map(|f| {
            let installed = match (&f.path, picked == Some(f.preset.name)) {
                (Some(_), true) => "yes, picked",
                (Some(_), false) => "yes",
                (None, _) => "no",
            };
            [
                f.preset.name.to_owned(),
                installed.to_owned(),
                f.version.clone().unwrap_or_else(|| "-".into()),
                yes_no(f.preset.can_resume()),
                yes_no(f.preset.native_questions),
                f.path.as_ref().map_or_else(
                    || program_name(f.preset).to_owned(),
                    |p| p.display().to_string(),
                ),
            ]
        })
        .collect();
    let header = [
        "preset",
        "installed",
        "version",
        "resume",
        "native questions",
        "path (or program)",
    ];
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[&str]| {
        let mut text = String::new();
        for (cell, width) in cells.iter().zip(&widths) {
            text.push_str(&format!("{cell:<width$}  "));
        }
        text.trim_end().to_owned()
    };
    outln!("{}", line(&header));
    for row in &rows {
        outln!("{}", line(&row.each_ref().map(String::as_str)));
    }
    outln!();
    match picked {
        Some(name) => outln!(
            "With no --agent (and no agent: in the task file or config), ralph runs {name}, the first installed."
        ),
        None => outln!(
            "None is installed: install one, or give any agent with --agent-cmd \"my-agent --flags\". To try ralph first, `ralph demo` needs nothing."
        ),
    }
    Ok(0)
}

/// The program a preset runs, by name.
pub fn program_name(preset: &Preset) -> &'static str {
    match preset.program {
        Program::Path(p) => p,
        Program::Ralph => "ralph",
    }
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_says_what_its_flags_allow() {
        for preset in agents::presets() {
            assert_ne!(unattended(preset), "see its preset", "{}", preset.name);
        }
    }
}
