//! The agent's sandbox, as a run sets it up: what the agent may write and read, the line the
//! run starts with, and the line ralph adds when the agent is refused a path.
//!
//! The ruleset itself is Landlock's, applied by `ralph-sandbox` (or `ralph __sandbox`; [`ralph_process::sandbox_main`]):
//! for an agent, that process is started ahead of the start it is for ([`Sandbox::ahead`]) and
//! told what to exec when the time comes ([`Sandbox::start`]); a `test_command` is
//! [`Sandbox::wrap`]ped into that process's command line.
//! What goes in it ([`plan`]):
//!
//! - **write**: the project (for a git worktree, what a commit writes of the repository's
//!   git directory, not its config or hooks; for a subdirectory of a checkout, its `.git`), a private `TMPDIR` made for the run and removed
//!   after it, the agent's own state and caches ([`profile`], per preset), the caches of common
//!   toolchains, the few devices every program writes (`/dev/null`, a terminal), and
//!   `sandbox_write:`;
//! - **read and execute**: the system (`/usr`, `/etc`, `/proc`, ...), the toolchains in the
//!   home directory (not the home directory itself: `~/.ssh`, `~/.gnupg`, `~/.aws`, `~/.config`
//!   and every other repository stay out), the agent's program, ralph's own binary (so `ralph
//!   ask` works inside), and `sandbox_read:`;
//! - **network**: open, or only the TCP ports of `sandbox_net:`.
//!
//! ralph's state directory (the registry of loops, a broker's lock and links) and its user
//! config (`remote.toml`) are never in it: a `sandbox_read:` or `sandbox_write:` path that
//! holds either is left out, with a warning.
//!
//! `.ralph/` is inside the project, so the agent can write it: it must (its question,
//! `ralph ask`'s claim). What that does and does not let it do is in docs/sandbox.md.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

pub mod record;

use ralph_process::{
    SANDBOX_COMMAND_ENV, SANDBOX_POLICY_ENV, SandboxExec, SandboxPolicy, SandboxStart,
    SandboxStdin, SandboxSupport,
};
use ralph_protocol::{UserDir, user_dir};

/// `sandbox:` in the task file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// `true` (the default): sandboxed where the kernel can, with a warning where it cannot.
    #[default]
    On,
    /// `false`, or `--no-sandbox`: as ralph ran before the sandbox.
    Off,
    /// `required`: refuse to run where the kernel cannot sandbox the agent.
    Required,
}

/// What the task file says about the sandbox.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SandboxSettings {
    /// `sandbox:`.
    pub mode: Mode,
    /// `sandbox_write:`: more paths the agent may write (and read).
    pub write: Vec<String>,
    /// `sandbox_read:`: more paths the agent may read and execute.
    pub read: Vec<String>,
    /// `sandbox_net:`: the only TCP ports the agent may connect to; `None`: any.
    pub net: Option<Vec<u16>>,
}

/// A run's sandbox: the policy, the private temporary directory, and the watch on the agent's
/// output for refusals.
#[derive(Debug)]
pub struct Sandbox {
    policy: SandboxPolicy,
    /// What applies the ruleset and execs the agent: `ralph-sandbox` beside `ralph`, or
    /// `ralph __sandbox` where it is not there.
    helper: String,
    /// The agent's `TMPDIR`, removed when the run ends.
    tmp: tempfile::TempDir,
    home: Option<PathBuf>,
    /// ralph's own directories, never the agent's: for the refusal lines.
    never: Vec<(PathBuf, &'static str)>,
    watch: [DenialWatch; 2],
    said: HashSet<PathBuf>,
}

/// The command line of the process that applies the ruleset and execs the agent: the small
/// `ralph-sandbox` beside `ralph` (it starts in a fraction of ralph's time: docs/benchmarks.md),
/// or `ralph __sandbox` where it is not installed.
fn helper(ralph: &Path) -> String {
    let small = ralph.with_file_name(ralph_process::SANDBOX_HELPER);
    if ralph_process::is_executable(&small) {
        quote(&small.to_string_lossy())
    } else {
        format!("{} __sandbox", quote(&ralph.to_string_lossy()))
    }
}

/// Whether and how the agent is sandboxed this run.
#[derive(Debug)]
pub enum Plan {
    /// Sandboxed.
    On(Box<Sandbox>),
    /// Not, and the line that says why; `warn` when the user did not ask for that.
    Off {
        /// The run's line.
        line: String,
        /// Whether it is a warning.
        warn: bool,
    },
}

/// What [`plan`] needs to know about the run.
#[derive(Debug)]
pub struct Inputs<'a> {
    /// The settings from the task file (and `--no-sandbox`).
    pub settings: &'a SandboxSettings,
    /// What turned it off, for the run's line, when it is off: `--no-sandbox` or the task file.
    pub off_by: &'a str,
    /// The project.
    pub root: &'a Path,
    /// The task file, read by the agent.
    pub task_file: &'a Path,
    /// The preset's name, when the agent is one.
    pub preset: Option<&'a str>,
    /// The agent's command line as it starts (for its program).
    pub command: &'a str,
}

/// The sandbox for a run, or why there is none; `Err` when `sandbox: required` and the kernel
/// cannot (the message refusing the run).
pub fn plan(inputs: &Inputs<'_>) -> Result<(Plan, Vec<String>), String> {
    let settings = inputs.settings;
    if settings.mode == Mode::Off {
        return Ok((
            Plan::Off {
                line: format!(
                    "not sandboxed ({}): the agent can read and write whatever you can",
                    inputs.off_by
                ),
                warn: false,
            },
            Vec::new(),
        ));
    }
    if let SandboxSupport::Missing { why } = ralph_process::sandbox_support() {
        if settings.mode == Mode::Required {
            return Err(format!(
                "`sandbox: required` in the task file, and the agent cannot be sandboxed here: {why}. Run it where Landlock is (Linux 5.13 or later), or set `sandbox: true` to run unsandboxed with a warning"
            ));
        }
        return Ok((
            Plan::Off {
                line: format!(
                    "not sandboxed: {why}; the agent can read and write whatever you can (`sandbox: required` refuses to run like this)"
                ),
                warn: true,
            },
            Vec::new(),
        ));
    }
    let mut warnings = Vec::new();
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let never: Vec<(PathBuf, &'static str)> = [
        (user_dir(UserDir::State), "ralph's state directory"),
        (user_dir(UserDir::Config), "ralph's user config"),
    ]
    .into_iter()
    .filter_map(|(dir, what)| Some((canonical(&dir?), what)))
    .collect();
    let tmp = tempfile::Builder::new()
        .prefix("ralph-agent-tmp-")
        .tempdir()
        .map_err(|e| format!("could not make the agent's temporary directory: {e}"))?;
    let root = canonical(inputs.root);
    let expand = |p: &str| -> PathBuf {
        match (p.strip_prefix("~/").or((p == "~").then_some("")), &home) {
            (Some(rest), Some(home)) => home.join(rest),
            _ => root.join(p),
        }
    };
    let in_home = |rel: &str| home.as_ref().map(|h| h.join(rel));

    let mut write = vec![root.clone(), canonical(tmp.path())];
    let (git_write, git_read) = git_dirs_outside(&root);
    write.extend(git_write);
    let profile = inputs.preset.map(profile).unwrap_or_default();
    write.extend(profile.write.iter().filter_map(|d| agent_dir(d, &home)));
    write.extend(CACHES.iter().filter_map(|c| agent_dir(c, &home)));
    write.extend(DEVICES.iter().map(PathBuf::from));
    let mut read: Vec<PathBuf> = SYSTEM.iter().map(PathBuf::from).collect();
    read.extend(git_read);
    read.extend(TOOLCHAINS.iter().filter_map(|t| in_home(t)));
    read.extend(profile.read.iter().filter_map(|d| agent_dir(d, &home)));
    read.push(absolute(inputs.task_file));
    let ralph = std::env::current_exe()
        .map_err(|e| format!("could not find ralph's own binary for the sandbox: {e}"))?;
    read.push(ralph.clone());
    read.extend(program_dirs(inputs.command, &root));

    for (given, list, key) in [
        (&settings.write, &mut write, "sandbox_write"),
        (&settings.read, &mut read, "sandbox_read"),
    ] {
        for p in given {
            let path = canonical(&expand(p));
            if let Some((_, what)) = never.iter().find(|(n, _)| n.starts_with(&path)) {
                warnings.push(format!(
                    "{key}: {p} holds {what}, which the agent is never given; left out"
                ));
            } else if !path.exists() {
                warnings.push(format!("{key}: {p} does not exist; left out"));
            } else {
                list.push(path);
            }
        }
    }
    for (n, what) in &never {
        if n.starts_with(&root) {
            warnings.push(format!(
                "the project {} holds {what} ({}): the agent can write it; move the project, or set RALPH_STATE_DIR / XDG_CONFIG_HOME elsewhere",
                root.display(),
                n.display()
            ));
        }
    }
    // Nothing that holds ralph's own directories, however it came in (the program's
    // directory, say).
    let clear = |p: &PathBuf| p.exists() && !never.iter().any(|(n, _)| n.starts_with(p));
    write.retain(|p| clear(p) || p == &root);
    read.retain(clear);
    dedup(&mut write);
    dedup(&mut read);
    let policy = SandboxPolicy {
        write,
        read,
        ports: settings.net.clone(),
        required: settings.mode == Mode::Required,
    };
    Ok((
        Plan::On(Box::new(Sandbox {
            policy,
            helper: helper(&ralph),
            tmp,
            home,
            never,
            watch: Default::default(),
            said: HashSet::new(),
        })),
        warnings,
    ))
}

impl Sandbox {
    /// The run's line: "sandboxed: writes only to ...".
    pub fn describe(&self) -> String {
        let mut writes: Vec<String> = self
            .policy
            .write
            .iter()
            .filter(|p| !p.starts_with("/dev"))
            .map(|p| self.show(p))
            .collect();
        writes.push("/dev/null and the terminal".into());
        let net = match &self.policy.ports {
            None => "network open".to_owned(),
            Some(ports) if ports.is_empty() => "no outgoing TCP".to_owned(),
            Some(ports) => format!(
                "outgoing TCP only to port{} {}",
                if ports.len() == 1 { "" } else { "s" },
                ports
                    .iter()
                    .map(u16::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        format!(
            "sandboxed: writes only to {}; reads the system, toolchains and those; {net} (`ralph docs sandbox`)",
            writes.join(", ")
        )
    }

    /// The policy (for `ralph doctor` and tests).
    pub fn policy(&self) -> &SandboxPolicy {
        &self.policy
    }

    /// The agent's private temporary directory.
    pub fn tmp(&self) -> &Path {
        self.tmp.path()
    }

    /// The command line that runs `command` (in `dir`) in the sandbox, with what it needs
    /// added to `env`: the policy, the command line itself, and the private `TMPDIR`. A
    /// program that cannot be found or run is the same error it is without the sandbox.
    pub fn wrap(
        &self,
        command: &str,
        dir: &Path,
        env: &mut Vec<(String, String)>,
    ) -> std::io::Result<String> {
        let exec = self.resolve(command, dir, env)?;
        env.extend([
            (SANDBOX_POLICY_ENV.to_owned(), self.policy.encode()),
            (SANDBOX_COMMAND_ENV.to_owned(), exec.encode()),
        ]);
        Ok(self.helper.clone())
    }

    /// The command line of a process that applies the ruleset ahead of the agent start it is
    /// for, with the policy added to `env`: started in the agent's directory and process
    /// group, it then waits for [`Sandbox::start`]'s header on its stdin, or its end.
    pub fn ahead(&self, env: &mut Vec<(String, String)>) -> String {
        env.push((SANDBOX_POLICY_ENV.to_owned(), self.policy.encode()));
        self.helper.clone()
    }

    /// What tells a process started by [`Sandbox::ahead`] to run `command` (in `dir`) with
    /// `env` (and the private `TMPDIR`) on top of the environment it was started with, its
    /// stdin the rest of the pipe when `piped`, else `/dev/null`. A program that cannot be
    /// found or run is the same error it is without the sandbox.
    pub fn start(
        &self,
        command: &str,
        dir: &Path,
        env: &[(String, String)],
        piped: bool,
    ) -> std::io::Result<Vec<u8>> {
        let mut env = env.to_vec();
        let exec = self.resolve(command, dir, &mut env)?;
        let stdin = if piped {
            SandboxStdin::Rest
        } else {
            SandboxStdin::Null
        };
        Ok(SandboxStart { exec, env, stdin }.header())
    }

    /// `command`'s program and arguments, as `sh -c` or `execvp` would find them with `env`'s
    /// `PATH`; the private `TMPDIR` added to `env`.
    fn resolve(
        &self,
        command: &str,
        dir: &Path,
        env: &mut Vec<(String, String)>,
    ) -> std::io::Result<SandboxExec> {
        let path = env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| std::ffi::OsString::from(v))
            .or_else(|| std::env::var_os("PATH"));
        let exec = ralph_process::resolve(command, dir, path.as_deref())?;
        let tmp = self.tmp.path().display().to_string();
        env.extend([
            ("TMPDIR".to_owned(), tmp.clone()),
            ("TMP".to_owned(), tmp.clone()),
            ("TEMP".to_owned(), tmp),
        ]);
        Ok(exec)
    }

    /// Reads a piece of the agent's output (`stderr` or stdout) and returns a line for each
    /// path it was newly refused by the sandbox: the path, and the setting that would allow it.
    pub fn denials(&mut self, stderr: bool, bytes: &[u8]) -> Vec<String> {
        let paths = self.watch[usize::from(stderr)].feed(bytes);
        let mut lines = Vec::new();
        for path in paths {
            let path = match (path.strip_prefix("~"), &self.home) {
                (Ok(rest), Some(home)) => home.join(rest),
                _ => path,
            };
            if !path.is_absolute() || self.said.contains(&path) {
                continue;
            }
            if let Some(line) = self.explain(&path) {
                self.said.insert(path);
                lines.push(line);
            }
        }
        lines
    }

    /// Why the sandbox refuses `path`, and what would allow it; `None` if it allows writing it
    /// (the refusal was the file's own permissions, not the sandbox's).
    pub fn explain(&self, path: &Path) -> Option<String> {
        let beneath = |list: &[PathBuf]| list.iter().any(|p| path.starts_with(p));
        if beneath(&self.policy.write) {
            return None;
        }
        let shown = self.show(path);
        if let Some((_, what)) = self.never.iter().find(|(n, _)| path.starts_with(n)) {
            return Some(format!(
                "sandbox: the agent was refused {shown}: it is {what}, which no agent is given"
            ));
        }
        Some(if beneath(&self.policy.read) {
            format!(
                "sandbox: the agent may read but not write {shown}; to let it, add it to sandbox_write: in the task file"
            )
        } else {
            format!(
                "sandbox: the agent was refused {shown} (outside its sandbox); to let it, add it to sandbox_read: (read) or sandbox_write: (write) in the task file"
            )
        })
    }

    fn show(&self, path: &Path) -> String {
        match self.home.as_ref().and_then(|h| path.strip_prefix(h).ok()) {
            Some(rest) if rest.as_os_str().is_empty() => "~".into(),
            Some(rest) => format!("~/{}", rest.display()),
            None => path.display().to_string(),
        }
    }
}

/// What a preset's CLI writes and reads of its own, outside the project. Each entry is a
/// path relative to the home directory, or `$VAR/rest|fallback` (`$VAR/rest` when the CLI's
/// variable is set, else the home-relative fallback, if any); one ending in `/` is a
/// directory, made (with its parents) if it is not there yet, since Landlock can only grant
/// what exists. Measured with the real CLIs under `make e2e` (tests/real-agents) for claude,
/// codex, gemini and opencode.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Profile {
    /// Its state, config and caches: written.
    pub write: &'static [&'static str],
    /// Read only.
    pub read: &'static [&'static str],
}

/// The profile of the preset `name` (none for a command line of the user's own).
pub fn profile(name: &str) -> Profile {
    match name {
        // `~/.claude.json` is rewritten through a temporary file beside it, in the home
        // directory, which no rule can allow without the whole home: refused, and Claude Code
        // goes on without saving it (measured: `done` and questions pass under `make e2e`).
        "claude" | "claude-sdk" => Profile {
            write: &[
                "$CLAUDE_CONFIG_DIR/|.claude/",
                ".claude.json",
                ".claude.json.backup",
                ".local/share/claude",
                ".local/state/claude",
            ],
            read: &[],
        },
        "codex" => Profile {
            write: &["$CODEX_HOME/|.codex/"],
            read: &[],
        },
        "gemini" => Profile {
            write: &["$GEMINI_CLI_HOME/.gemini/|.gemini/"],
            read: &[],
        },
        // It also installs its providers' packages with npm's cache.
        "opencode" => Profile {
            write: &[
                "$XDG_DATA_HOME/opencode/|.local/share/opencode/",
                "$XDG_CONFIG_HOME/opencode/|.config/opencode/",
                "$XDG_CACHE_HOME/opencode/|.cache/opencode/",
                "$XDG_STATE_HOME/opencode/|.local/state/opencode/",
                ".npm/",
            ],
            read: &[],
        },
        "cursor" => Profile {
            write: &[".cursor", ".config/cursor", ".local/share/cursor-agent"],
            read: &[],
        },
        "amp" => Profile {
            write: &[".config/amp", ".local/share/amp", ".cache/amp"],
            read: &[],
        },
        _ => Profile::default(),
    }
}

/// A profile entry as a path (see [`Profile`]), its directory made if it should be one.
fn agent_dir(entry: &str, home: &Option<PathBuf>) -> Option<PathBuf> {
    let (primary, fallback) = match entry.split_once('|') {
        Some((p, f)) => (p, Some(f)),
        None => (entry, None),
    };
    let from_var = primary.strip_prefix('$').and_then(|var| {
        let (name, rest) = var.split_once('/').unwrap_or((var, ""));
        let base = std::env::var_os(name).filter(|v| !v.is_empty())?;
        Some((
            PathBuf::from(base).join(rest),
            rest.is_empty() || rest.ends_with('/'),
        ))
    });
    let (path, dir) = match from_var {
        Some(found) => found,
        None => {
            let rel = if primary.starts_with('$') {
                fallback?
            } else {
                primary
            };
            (home.as_ref()?.join(rel), rel.ends_with('/'))
        }
    };
    if dir && !path.exists() {
        // The CLI would make it on its first write; it must exist to be granted.
        let _ = std::fs::DirBuilder::new().recursive(true).create(&path);
    }
    Some(path)
}

/// Caches of common toolchains, written (home-relative).
const CACHES: &[&str] = &[
    "$XDG_CACHE_HOME|.cache",
    ".cargo/registry",
    ".cargo/git",
    ".npm",
    ".pnpm-store",
    ".local/share/pnpm",
    ".yarn",
    ".bun/install/cache",
    "go/pkg",
    ".gradle",
    ".m2/repository",
];

/// Toolchains in the home directory, read and executed (home-relative). Not `~/.cargo` whole:
/// `~/.cargo/credentials.toml` is a registry token.
const TOOLCHAINS: &[&str] = &[
    ".cargo/bin",
    ".cargo/config.toml",
    ".cargo/config",
    ".cargo/env",
    ".rustup",
    ".nvm",
    ".volta",
    ".bun/bin",
    ".deno",
    ".local/bin",
    ".local/lib",
    ".pyenv",
    ".rbenv",
    ".gem",
    "go/bin",
    ".sdkman",
    ".asdf",
    ".local/share/mise",
    ".elan",
    ".ghcup",
    ".opam",
    ".gitconfig",
    ".config/git",
];

/// The system, read and executed.
const SYSTEM: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix",
    "/snap", "/gnu", "/var/lib", "/run", "/sys", "/proc", "/dev",
];

/// Devices every program may write.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
    "/dev/shm",
];

/// What of git's directory a project writes and reads when it is outside the project.
///
/// A linked worktree (`.git` is a file naming its directory, in the repository's
/// `worktrees/`) writes its own directory (its `HEAD`, index, pseudo-refs) and, in the common
/// directory, `objects`, `refs` and `logs`: a commit needs no more. Not the common directory's
/// `config` or `hooks`, which run in the user's own checkout the next time they use git; those
/// are read only. A subdirectory of an ordinary checkout writes the repository's whole `.git`
/// (its index and `HEAD` are at its top): the agent can write that checkout anyway.
fn git_dirs_outside(root: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let none = (Vec::new(), Vec::new());
    let Some(dot_git) = root
        .ancestors()
        .map(|d| d.join(".git"))
        .find(|g| g.exists())
    else {
        return none;
    };
    if !dot_git.is_file() {
        let git_dir = canonical(&dot_git);
        return if git_dir.starts_with(root) {
            none
        } else {
            (vec![git_dir], Vec::new())
        };
    }
    let Some(git_dir) = std::fs::read_to_string(&dot_git).ok().and_then(|text| {
        let dir = text.strip_prefix("gitdir:")?.trim().to_owned();
        Some(canonical(&dot_git.parent()?.join(dir)))
    }) else {
        return none;
    };
    let common = match std::fs::read_to_string(git_dir.join("commondir")) {
        Ok(rel) => canonical(&git_dir.join(rel.trim())),
        Err(_) => return (vec![git_dir], Vec::new()),
    };
    let mut write = vec![git_dir];
    write.extend(["objects", "refs", "logs"].map(|d| common.join(d)));
    write.retain(|d| !d.starts_with(root));
    let read = if common.starts_with(root) {
        Vec::new()
    } else {
        vec![common]
    };
    (write, read)
}

/// What the agent's program needs read and executed: the program itself and the directory it
/// lives in (its real one, through symlinks), or the whole `node_modules` a JavaScript CLI
/// runs from; for a wrapper script (`exec node /…/cli.js "$@"`), the same for each absolute
/// path it names.
fn program_dirs(command: &str, root: &Path) -> Vec<PathBuf> {
    let path = std::env::var_os("PATH");
    let Ok(cmd) = ralph_process::std_command(command, root, path.as_deref()) else {
        return Vec::new();
    };
    let program = PathBuf::from(cmd.get_program());
    let mut dirs = vec![program.clone()];
    dirs.extend(home_of(&program));
    for named in script_paths(&program) {
        dirs.extend(home_of(&named));
    }
    // A program started by another (`env /…/agent`, `node /…/cli.js`, `python agent.py`): the
    // files the command line names, and where a program or script among them lives.
    for named in paths_in(command) {
        let named = root.join(named);
        if !named.is_file() || SYSTEM.iter().any(|s| named.starts_with(s)) {
            continue;
        }
        let runs = ralph_process::is_executable(&named)
            || named.extension().is_some_and(|e| {
                ["js", "mjs", "cjs", "ts", "py", "rb", "sh"]
                    .iter()
                    .any(|x| e == *x)
            });
        if runs {
            dirs.extend(home_of(&named));
        }
        dirs.push(named);
    }
    dirs
}

/// The words of `text` that look like paths (they hold a `/`), split at spaces, quotes and
/// shell punctuation.
fn paths_in(text: &str) -> impl Iterator<Item = PathBuf> + '_ {
    text.split(|c: char| c.is_whitespace() || "'\"`;:=()|&<>".contains(c))
        .filter(|w| w.contains('/') && !w.starts_with('~') && !w.contains('$'))
        .map(PathBuf::from)
}

/// Where a program's files are: the directory holding its `node_modules` (a JavaScript CLI
/// looks for its `package.json` up to there; measured with Gemini CLI), else its real
/// directory.
fn home_of(program: &Path) -> Option<PathBuf> {
    let real = canonical(program);
    if real.is_dir() {
        return Some(real);
    }
    match real
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == "node_modules"))
    {
        Some(modules) => modules.parent().map(Path::to_path_buf),
        None => real.parent().map(Path::to_path_buf),
    }
}

/// The absolute paths a script (`#!` in its first bytes) names that exist; none for a binary.
fn script_paths(program: &Path) -> Vec<PathBuf> {
    use std::io::Read as _;
    let mut head = Vec::new();
    let read = std::fs::File::open(program).and_then(|f| f.take(4096).read_to_end(&mut head));
    if read.is_err() || !head.starts_with(b"#!") {
        return Vec::new();
    }
    paths_in(&String::from_utf8_lossy(&head))
        // The system's are readable already; the rest (a home-installed node, the CLI's own
        // files) are what the wrapper needs.
        .filter(|p| p.is_absolute() && p.exists() && !SYSTEM.iter().any(|s| p.starts_with(s)))
        .collect()
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

fn canonical(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| absolute(p))
}

fn dedup(list: &mut Vec<PathBuf>) {
    let mut seen = HashSet::new();
    list.retain(|p| seen.insert(p.clone()));
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Finds the paths named on "Permission denied" lines of a stream, across reads.
#[derive(Debug, Default)]
struct DenialWatch {
    /// The unfinished last line (at most [`LINE_MAX`] bytes of it).
    carry: Vec<u8>,
}

/// The longest line looked at whole; a longer one's head is dropped.
const LINE_MAX: usize = 8 * 1024;

impl DenialWatch {
    fn feed(&mut self, bytes: &[u8]) -> Vec<PathBuf> {
        let mut found = Vec::new();
        let mut rest = bytes;
        while let Some(nl) = memchr::memchr(b'\n', rest) {
            if self.carry.is_empty() {
                scan(&rest[..nl], &mut found);
            } else {
                self.carry.extend_from_slice(&rest[..nl]);
                scan(&std::mem::take(&mut self.carry), &mut found);
            }
            rest = &rest[nl + 1..];
        }
        self.carry.extend_from_slice(rest);
        if self.carry.len() > LINE_MAX {
            let cut = self.carry.len() - LINE_MAX;
            self.carry.drain(..cut);
        }
        found
    }
}

/// The absolute (or `~/`) paths on `line` if it says "Permission denied" (or `EACCES`), as
/// shells, coreutils, Python, Node and Rust say it; a JSON-escaped line (a tool's output
/// inside an agent's event) reads the same.
fn scan(line: &[u8], found: &mut Vec<PathBuf>) {
    let denied = memchr::memmem::find(line, b"ermission denied").is_some()
        || memchr::memmem::find(line, b"EACCES").is_some();
    if !denied {
        return;
    }
    let text = String::from_utf8_lossy(line);
    let ends = |c: char| c.is_whitespace() || "'\"`:,;()[]{}<>\\‘’".contains(c);
    let mut at = 0;
    while let Some(i) = text[at..].find(['/', '~']).map(|i| at + i) {
        let starts_word =
            i == 0 || text[..i].ends_with(|c: char| ends(c) || c == '=' || !c.is_ascii());
        let path: &str = text[i..].split(ends).next().unwrap_or("");
        at = i + path.len().max(1);
        // Not `//host/path` (a URL's).
        let path_like =
            (path.starts_with('/') && !path.starts_with("//")) || path.starts_with("~/");
        if starts_word && path_like && path.len() > 1 {
            let path = path.trim_end_matches(['.', '/']);
            if !path.is_empty() {
                found.push(PathBuf::from(path));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    /// `ralph-sandbox` beside `ralph` is what applies the ruleset; without it, `ralph
    /// __sandbox` does.
    #[test]
    fn the_small_helper_beside_ralph_is_used_and_ralph_itself_where_it_is_missing() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let ralph = dir.path().join("ralph");
        std::fs::write(&ralph, "").unwrap();
        assert_eq!(
            helper(&ralph),
            format!("{} __sandbox", quote(&ralph.to_string_lossy()))
        );
        let small = dir.path().join("ralph-sandbox");
        std::fs::write(&small, "").unwrap();
        assert!(
            helper(&ralph).ends_with("__sandbox"),
            "not executable: not used"
        );
        std::fs::set_permissions(&small, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(helper(&ralph), quote(&small.to_string_lossy()));
    }

    use super::*;

    fn paths(lines: &str) -> Vec<PathBuf> {
        let mut found = Vec::new();
        for line in lines.lines() {
            scan(line.as_bytes(), &mut found);
        }
        found
    }

    #[test]
    fn the_path_is_found_on_every_common_way_of_saying_permission_denied() {
        let said = "\
sh: 1: cannot create /home/u/.ssh/authorized_keys: Permission denied
cat: /home/u/.config/ralph/remote.toml: Permission denied
touch: cannot touch '/srv/other/repo/file': Permission denied
PermissionError: [Errno 13] Permission denied: '/tmp/x y'
Error: EACCES: permission denied, open '/var/lib/thing'
{\"content\":\"mkdir: cannot create directory ‘/opt/z’: Permission denied\\n\"}
{\"output\":\"bash: /etc/hosts: Permission denied\\nnext\"}
a line about /usr/bin that is fine
Permission denied (os error 13)
fetch https://example.com/x: permission denied";
        assert_eq!(
            paths(said),
            [
                "/home/u/.ssh/authorized_keys",
                "/home/u/.config/ralph/remote.toml",
                "/srv/other/repo/file",
                "/tmp/x",
                "/var/lib/thing",
                "/opt/z",
                "/etc/hosts",
            ]
            .map(PathBuf::from)
        );
    }

    #[test]
    fn a_line_split_across_reads_is_read_whole_at_every_split() {
        let line = b"cat: /home/u/.ssh/id_ed25519: Permission denied\nok\n";
        for split in 0..=line.len() {
            let mut watch = DenialWatch::default();
            let mut found = watch.feed(&line[..split]);
            found.extend(watch.feed(&line[split..]));
            assert_eq!(found, [PathBuf::from("/home/u/.ssh/id_ed25519")], "{split}");
        }
    }
}
