//! `ralph doctor`: what ralph finds on this machine, and every problem with its fix.
//!
//! It reads and probes; it changes nothing. Exit 0 when nothing is wrong, 1 otherwise.

use std::path::Path;
use std::process::{Command, Stdio};

use ralph_loop::config;
use ralph_loop::task::TaskFile;
use ralph_protocol::{STATE_DIR_ENV, UserDir, Workspace, user_dir};
use ralph_signal::sanitize;

use crate::args::DoctorArgs;
use crate::{CmdResult, agents, cmd_agents};

/// One thing that is wrong, and what to do about it.
#[derive(Debug)]
struct Problem {
    what: String,
    fix: String,
}

/// The report, section by section, and the problems found on the way.
#[derive(Debug, Default)]
struct Report {
    lines: Vec<String>,
    problems: Vec<Problem>,
}

impl Report {
    fn section(&mut self, title: &str) {
        if !self.lines.is_empty() {
            self.lines.push(String::new());
        }
        self.lines.push(title.to_owned());
    }

    fn item(&mut self, text: impl AsRef<str>) {
        self.lines.push(format!("  {}", text.as_ref()));
    }

    fn problem(&mut self, what: impl Into<String>, fix: impl Into<String>) {
        self.problems.push(Problem {
            what: what.into(),
            fix: fix.into(),
        });
    }
}

/// Checks the machine, and the project in `-C DIR` (default: here).
pub fn run(args: &DoctorArgs) -> CmdResult {
    let root = crate::locate::project_root(&args.dir.dir)?;
    let mut report = Report::default();
    platform(&mut report);
    let task = project(&mut report, &root);
    agents_section(&mut report, &task);
    sandbox_section(&mut report, &task);
    terminal(&mut report);
    notifications(&mut report, &task);
    directories(&mut report);
    broker(&mut report);
    for line in &report.lines {
        outln!("{line}");
    }
    outln!();
    if report.problems.is_empty() {
        outln!("No problems found.");
        return Ok(0);
    }
    let n = report.problems.len();
    outln!("{n} problem{}:", if n == 1 { "" } else { "s" });
    for p in &report.problems {
        outln!("  - {}", p.what);
        outln!("    fix: {}", p.fix);
    }
    Ok(1)
}

fn platform(report: &mut Report) {
    report.section("Platform");
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    report.item(format!(
        "ralph {} on {} {}{}",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
        std::env::consts::ARCH,
        if kernel.trim().is_empty() {
            String::new()
        } else {
            format!(" (kernel {})", kernel.trim())
        }
    ));
    report.item(format!(
        "process backend: {} (see `ralph docs platforms`)",
        ralph_process::BACKEND
    ));
    if !matches!(
        std::env::consts::OS,
        "linux" | "macos" | "freebsd" | "openbsd" | "netbsd" | "dragonfly"
    ) {
        report.problem(
            format!(
                "ralph is built and tested for Linux and macOS, and this is {}",
                std::env::consts::OS
            ),
            "run it on Linux or macOS, or in a Linux container or VM",
        );
    }
}

/// The project's task file and config files, merged as `ralph run` merges them; without a
/// task file (or with a broken one), the config files alone.
fn project(report: &mut Report, root: &Path) -> TaskFile {
    report.section("Project");
    report.item(format!("directory: {}", root.display()));
    let task_path = root.join("RALPH_TASK.md");
    let ws = Workspace::new(root);
    let mut task = if task_path.exists() {
        match TaskFile::load(&task_path) {
            Ok(mut task) => {
                report.item(format!("task file: {} (valid)", task_path.display()));
                let unrunnable = task.test_command_warning(std::env::var_os("PATH").as_deref());
                task.warnings.extend(unrunnable);
                task
            }
            Err(e) => {
                report.item(format!("task file: {} (not valid)", task_path.display()));
                report.problem(
                    sanitize(&e.to_string()),
                    "edit the file as the message says; `ralph run` refuses it until then",
                );
                placeholder_task(&task_path)
            }
        }
    } else {
        report.item("task file: none here (`ralph init` writes one)");
        placeholder_task(&task_path)
    };
    if let Err(e) = config::apply_all(&ws, &mut task, Default::default()) {
        report.problem(
            sanitize(&e.to_string()),
            "fix the line it names; `ralph run` refuses to start until then",
        );
    }
    for warning in std::mem::take(&mut task.warnings) {
        report.problem(sanitize(&warning.to_string()), warning.kind.fix());
    }
    task
}

/// A task file with nothing set, for laying the config files over when there is none.
fn placeholder_task(path: &Path) -> TaskFile {
    let mut none = TaskFile::parse(path, b"---\ntask: (none)\n---\n").expect("a valid placeholder");
    // What it lacks is no problem of the user's.
    none.warnings.clear();
    none
}

/// The kernel's Landlock, what the task file asks of the sandbox, and what each preset's CLI
/// may write of its own (see docs/sandbox.md).
fn sandbox_section(report: &mut Report, task: &TaskFile) {
    use ralph_loop::sandbox::{Mode, profile};
    use ralph_process::{SandboxSupport, sandbox_support};
    report.section("Sandbox");
    let mode = task.sandbox.mode;
    let setting = match mode {
        Mode::On => "sandbox: true (the default)",
        Mode::Off => "sandbox: false: agents run unsandboxed",
        Mode::Required => "sandbox: required",
    };
    match sandbox_support() {
        SandboxSupport::Available { abi } => {
            report.item(format!(
                "Landlock ABI {abi}: agents run sandboxed{}; {setting}",
                if abi < 4 && task.sandbox.net.is_some() {
                    " (sandbox_net needs ABI 4, Linux 6.7: the network stays open here)"
                } else {
                    ""
                }
            ));
        }
        SandboxSupport::Missing { why } => {
            report.item(format!("no Landlock: {why}; {setting}"));
            if mode != Mode::Off {
                report.problem(
                    format!("agents cannot be sandboxed here: {why}"),
                    if mode == Mode::Required {
                        "`sandbox: required` refuses to run: use a kernel with Landlock (Linux 5.13 or later), or set `sandbox: true` to run unsandboxed with a warning"
                    } else {
                        "use a kernel with Landlock (Linux 5.13 or later); until then every run warns and the agent can reach whatever you can"
                    },
                );
            }
        }
    }
    for (key, list) in [
        ("sandbox_write", &task.sandbox.write),
        ("sandbox_read", &task.sandbox.read),
    ] {
        if !list.is_empty() {
            report.item(format!("{key}: {}", list.join(", ")));
        }
    }
    if let Some(ports) = &task.sandbox.net {
        let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
        report.item(format!(
            "sandbox_net: outgoing TCP only to [{}]",
            ports.join(", ")
        ));
    }
    report.item("every agent writes its project, a private TMPDIR and toolchain caches; besides:");
    let presets = ralph_loop::agents::presets();
    let width = presets.iter().map(|p| p.name.len()).max().unwrap_or(0);
    for preset in presets {
        let profile = profile(preset.name);
        let shown = |entry: &&str| {
            let home = |rel: &str| format!("~/{}", rel.trim_end_matches('/'));
            match entry.split_once('|') {
                Some((var, rel)) => format!("{} (else {})", var.trim_end_matches('/'), home(rel)),
                None => home(entry),
            }
        };
        let mut own: Vec<String> = profile.write.iter().map(shown).collect();
        own.extend(profile.read.iter().map(|r| format!("{} (read)", shown(r))));
        let own = if own.is_empty() {
            "nothing of its own".to_owned()
        } else {
            own.join(", ")
        };
        report.item(format!("  {:<width$}  {own}", preset.name));
    }
}

fn agents_section(report: &mut Report, task: &TaskFile) {
    report.section("Agents");
    let path = std::env::var_os("PATH");
    let found = cmd_agents::probe(path.as_deref());
    let width = found.iter().map(|f| f.preset.name.len()).max().unwrap_or(0);
    for f in &found {
        let state = match (&f.path, &f.version) {
            (Some(p), Some(v)) => format!("{v}, {}", p.display()),
            (Some(p), None) => format!(
                "{} (`--version` said nothing within {} s)",
                p.display(),
                cmd_agents::VERSION_TIMEOUT.as_secs()
            ),
            (None, _) => format!(
                "not installed (`{}` is not on PATH)",
                cmd_agents::program_name(f.preset)
            ),
        };
        report.item(format!("{:<width$}  {state}", f.preset.name));
    }
    let from_task = task.agent.as_deref();
    match agents::resolve_with(
        None,
        None,
        from_task,
        &task.agent_args,
        task.model.as_deref(),
    ) {
        Ok(resolved) => {
            let how = match (&resolved.detected, from_task) {
                (Some(_), _) => "the first installed; `--agent NAME` or `agent:` picks another",
                (None, Some(_)) => "from `agent:` in the task file or a config file",
                (None, None) => "",
            };
            report.item(format!(
                "`ralph run` with no --agent runs: {} ({how})",
                resolved.spec.name
            ));
        }
        // No preset installed and none asked for: a machine that runs its agent with
        // --agent-cmd has nothing to fix.
        Err(_) if from_task.is_none() => {
            report.item(
                "`ralph run` with no --agent runs: nothing, none is installed; give the agent with --agent-cmd \"my-agent --flags\", or install one above (`ralph demo` tries ralph with none)",
            );
        }
        Err(e) => {
            report.item("`ralph run` with no --agent runs: nothing (see the problems)");
            // The message's first sentence says what is wrong; the rest, how to fix it.
            let what = e.split(". ").next().unwrap_or(&e);
            report.problem(
                sanitize(what),
                "install that agent, or give any agent with --agent-cmd \"my-agent --flags\"",
            );
        }
    }
    report.section("What each preset may do unattended");
    for f in &found {
        report.item(format!(
            "{:<width$}  {}",
            f.preset.name,
            cmd_agents::unattended(f.preset)
        ));
    }
    logins_section(report, &found);
}

/// Whether the installed agents' logins are safe for many loops at once (`ralph fleet`): a
/// login that rotates is a warning, not a problem, since one loop at a time is fine with it.
fn logins_section(report: &mut Report, found: &[cmd_agents::Found]) {
    report.section("Logins, for many loops at once");
    let mut formats = Vec::new();
    let mut warned = false;
    for f in found.iter().filter(|f| f.path.is_some()) {
        // `claude` and `claude-sdk` share one login: say it once.
        if formats.contains(&f.preset.format) {
            continue;
        }
        formats.push(f.preset.format);
        if let Some(warning) = ralph_loop::agents::login_rotates(&f.preset.spec(Vec::new(), None)) {
            report.item(format!("warning: {warning}"));
            warned = true;
        }
    }
    if !warned {
        report.item(
            "no installed agent uses a login ralph knows to rotate (Claude Code's and Codex's are checked); see `ralph docs budget`",
        );
    }
}

fn terminal(report: &mut Report) {
    report.section("Terminal");
    let term = std::env::var("TERM").unwrap_or_default();
    let view = if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        "stdout is a terminal"
    } else {
        "stdout is not a terminal here"
    };
    match term.as_str() {
        "" => report.item(format!(
            "TERM: not set, so `ralph run` shows plain lines ({view})"
        )),
        "dumb" => report.item(format!(
            "TERM: dumb, so `ralph run` shows plain lines ({view})"
        )),
        t => report.item(format!("TERM: {} ({view})", sanitize(t))),
    }
    if std::env::var_os("TMUX").is_none_or(|v| v.is_empty()) {
        report.item("tmux: not inside tmux");
        return;
    }
    let version = tmux(&["-V"]).unwrap_or_else(|| "tmux (version unknown)".into());
    match tmux(&["show-options", "-gv", "allow-passthrough"]) {
        Some(v) if v == "on" || v == "all" => report.item(format!(
            "{version}, allow-passthrough {v}: desktop notifications reach your terminal"
        )),
        Some(v) => {
            report.item(format!("{version}, allow-passthrough {v}"));
            report.problem(
                "inside tmux with allow-passthrough off, a question's desktop notification (OSC 9) never leaves tmux",
                "tmux set -g allow-passthrough on (and add `set -g allow-passthrough on` to ~/.tmux.conf)",
            );
        }
        None => {
            report.item(format!("{version}, no allow-passthrough option"));
            report.problem(
                "this tmux has no allow-passthrough (it came in tmux 3.3): desktop notifications stay inside tmux",
                "upgrade tmux to 3.3 or later, then `set -g allow-passthrough on`; or use notify_command or webhook_url",
            );
        }
    }
}

/// `tmux ARGS`, its first line of output when it succeeds.
fn tmux(args: &[&str]) -> Option<String> {
    let out = Command::new("tmux")
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = sanitize(text.lines().next()?.trim());
    (out.status.success() && !line.is_empty()).then_some(line)
}

fn notifications(report: &mut Report, task: &TaskFile) {
    report.section("Notifications (when the agent asks)");
    let notify = &task.notify;
    report.item(format!("bell: {}", on_off(notify.bell)));
    let desktop = if !notify.desktop_notification {
        "off".to_owned()
    } else {
        match ralph_loop::notify::desktop_notifier() {
            Some(p) => format!("on: to the terminal (OSC 9), and {}", p.display()),
            None => "on: to the terminal (OSC 9); no notify-send here (no desktop session, or not installed)".into(),
        }
    };
    report.item(format!("desktop_notification: {desktop}"));
    report.item(format!(
        "notify_command: {}",
        notify
            .notify_command
            .as_deref()
            .map_or("none".into(), sanitize)
    ));
    report.item(format!(
        "webhook_url: {}",
        notify
            .webhook_url
            .as_deref()
            .map_or("none".into(), |u| sanitize(
                &ralph_loop::notify::redact_url(u)
            ))
    ));
}

fn directories(report: &mut Report) {
    report.section("Directories");
    match config::user_path() {
        Some(p) => report.item(format!(
            "user config: {} ({})",
            p.display(),
            if p.exists() {
                "exists"
            } else {
                "not there; optional"
            }
        )),
        None => report.item("user config: none (no home directory)"),
    }
    match user_dir(UserDir::State) {
        Some(dir) => {
            let writable = writable(&dir);
            report.item(format!(
                "state: {} ({})",
                dir.display(),
                if writable { "writable" } else { "not writable" }
            ));
            if !writable {
                report.problem(
                    format!(
                        "{} cannot be written: `ralph status --all` will not list running loops",
                        dir.display()
                    ),
                    format!("make it writable, or set {STATE_DIR_ENV} to a directory that is"),
                );
            }
        }
        None => {
            report.item("state: none (no home directory)");
            report.problem(
                "no directory for the list of running loops",
                format!("set HOME, or {STATE_DIR_ENV}"),
            );
        }
    }
}

/// Whether a directory exists and can be written to, or could be created.
fn writable(dir: &Path) -> bool {
    let mut existing = dir;
    while !existing.exists() {
        match existing.parent() {
            Some(parent) => existing = parent,
            None => return false,
        }
    }
    tempfile::tempfile_in(existing).is_ok()
}

fn broker(report: &mut Report) {
    report.section("Broker (ralph serve)");
    let Some(lock) = user_dir(UserDir::State).map(|d| d.join("serve.lock")) else {
        report.item("none running");
        return;
    };
    #[derive(serde::Deserialize)]
    struct ServeLock {
        pid: u32,
        url: String,
    }
    let held = std::fs::read_to_string(&lock)
        .ok()
        .and_then(|text| serde_json::from_str::<ServeLock>(&text).ok());
    match held {
        Some(l) if ralph_process::is_alive(l.pid) => {
            report.item(format!("running: pid {}, {}", l.pid, sanitize(&l.url)));
        }
        Some(l) => report.item(format!(
            "none running ({} names pid {}, which has ended)",
            lock.display(),
            l.pid
        )),
        None => report.item("none running"),
    }
}

fn on_off(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}
