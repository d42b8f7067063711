//! The command line, as clap sees it. Nothing here is validated beyond its shape: `main` turns
//! these into the loop's own types, so the libraries never see clap.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

const EXIT_CODES: &str = "\
Exit codes:
  0    DONE, verified: every criterion checked and test_command passed
  1    stopped without completion (GUTTER, too many failures, an error), or a command failed
  2    usage or configuration error (bad flag, bad RALPH_TASK.md); nothing was written
  3    max_iterations reached (for `ralph ask`: nobody answered in time)
  130  interrupted (Ctrl-C, SIGTERM, SIGHUP, SIGQUIT); state is saved and `ralph run` resumes";

/// Runs an AI coding agent in a loop until the task is really done, and lets it ask you a
/// question without stopping the world.
#[derive(Debug, Parser)]
#[command(name = "ralph", version, about, after_long_help = EXIT_CODES)]
#[command(
    after_help = "Start with `ralph demo` to see a whole loop, or `ralph init` to write a RALPH_TASK.md."
)]
pub struct Cli {
    /// Work in DIR, as if ralph were started there (`ralph -C DIR status`); a subcommand's own
    /// `-C` is then taken from DIR.
    #[arg(short = 'C', long = "dir", value_name = "DIR")]
    pub dir: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

// `defer`: a subcommand's arguments are built only when it is the one parsed, so `ralph status`
// and `ralph --version` do not pay for the flags of all the others. Descriptions belong on the
// variants: a deferred `Args` struct's own doc comment would replace them.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum Command {
    /// Write RALPH_TASK.md (from the commented example) and the .ralph/ scaffolding.
    #[command(after_help = "Examples:\n  ralph init\n  ralph init -C ~/src/myproject --force")]
    Init(InitArgs),
    /// Run the loop: start the agent, watch for DONE / QUESTION / GUTTER, repeat.
    #[command(after_long_help = RUN_HELP)]
    Run(RunArgs),
    /// Show what the loop is doing, and any question waiting for you.
    #[command(
        after_help = "Examples:\n  ralph status\n  ralph status --json | jq .pending_question\n  ralph status --all\n  ralph status --all --watch"
    )]
    Status(StatusArgs),
    /// Show the running iteration's output: what the agent printed so far, then, with -f, as it comes.
    #[command(
        after_help = "Examples:\n  ralph logs\n  ralph logs -f\n  ralph logs -C ~/src/myproject -f"
    )]
    Logs(LogsArgs),
    /// Stop the loop running in this project, as Ctrl-C in its terminal would (state saved).
    #[command(after_long_help = STOP_HELP)]
    Stop(StopArgs),
    /// Answer the question the loop is waiting on, from any terminal.
    #[command(after_long_help = ANSWER_HELP)]
    Answer(AnswerArgs),
    /// Ask the human a question and wait for the answer (for agents; prints the answer).
    #[command(after_long_help = ASK_HELP)]
    Ask(AskArgs),
    /// Answer questions from a phone: one broker for every loop on this machine (a web page).
    #[command(after_long_help = SERVE_HELP)]
    Serve(ServeArgs),
    /// Run a whole loop with the built-in demo agent in a fresh temporary directory.
    #[command(
        after_help = "Examples:\n  ralph demo\n  ralph demo --question-timeout 2m --dir /tmp/try-ralph"
    )]
    Demo(DemoArgs),
    /// Check this machine for ralph: agents, terminal, notifications, directories; every problem with its fix.
    #[command(after_long_help = DOCTOR_HELP)]
    Doctor(DoctorArgs),
    /// List the agent presets: installed or not, where, which version, whether they resume.
    #[command(after_help = "Examples:\n  ralph agents\n  ralph run --agent codex")]
    Agents,
    /// The iterations of the current (or last) run: signals, files changed, checkpoints.
    #[command(
        after_help = "Examples:\n  ralph log\n  ralph log --json | jq '.iterations[].checkpoint'"
    )]
    Log(LogArgs),
    /// What iteration N changed (default: the whole run), through git diff and your pager.
    #[command(
        after_help = "Examples:\n  ralph diff          # the whole run\n  ralph diff 3        # iteration 3 alone\n  ralph diff 3 -- src/"
    )]
    Diff(DiffArgs),
    /// Put the work tree back to how it was after iteration N (default: before the last).
    #[command(after_long_help = UNDO_HELP)]
    Undo(UndoArgs),
    /// Land a finished loop's worktree on its branch: tested on the combined tree, never in your checkout.
    #[command(after_long_help = LAND_HELP)]
    Land(LandArgs),
    /// The loops in worktrees of this repository: list, discard, remove.
    #[command(
        after_help = "Examples:\n  ralph worktree list\n  ralph worktree discard add-a-cache\n  ralph worktree remove add-a-cache"
    )]
    Worktree(WorktreeArgs),
    /// Run many tasks at once, each a loop in its own worktree; land them one at a time.
    #[command(
        after_long_help = FLEET_HELP,
        args_conflicts_with_subcommands = true,
        subcommand_negates_reqs = true
    )]
    Fleet(FleetArgs),
    /// Read ralph's docs, shipped inside it: `ralph docs` lists the topics, `ralph docs sandbox` shows one.
    #[command(
        after_help = "Examples:\n  ralph docs\n  ralph docs sandbox\n  ralph docs fleet | grep -n land\n\nExit codes:\n  0  shown\n  2  no such topic (the closest one is named)"
    )]
    Docs(DocsArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(after_long_help = COMPLETIONS_HELP)]
    Completions(CompletionsArgs),
    /// Print the man page, or write one per subcommand into a directory.
    #[command(
        after_help = "Examples:\n  ralph man | man -l -\n  ralph man --out-dir ~/.local/share/man/man1"
    )]
    Man(ManArgs),
}

/// The commands ralph runs itself, kept out of the user's command line (its help, completions
/// and man pages): `main` parses them apart when the first argument starts with `__`.
#[derive(Debug, Parser)]
#[command(name = "ralph")]
pub struct InternalCli {
    #[command(subcommand)]
    pub command: Internal,
}

/// See [`InternalCli`].
#[derive(Debug, Subcommand)]
pub enum Internal {
    /// The built-in demo agent (ralph runs it; you do not need to).
    #[command(name = "__demo-agent")]
    DemoAgent,
    /// The guard `ralph run` starts: stops the agent if ralph is killed outright.
    #[command(name = "__guard")]
    Guard {
        /// The `.ralph/` directory of the loop it guards.
        ralph_dir: std::path::PathBuf,
        /// Give the terminal back if ralph is killed with its terminal view up.
        #[arg(long)]
        terminal: bool,
        /// The run's id (`RALPH_RUN`): what still carries it when ralph is killed is stopped.
        #[arg(long)]
        run: Option<String>,
    },
    /// The sandbox `ralph run` starts the agent in where `ralph-sandbox` is not beside ralph:
    /// applies the ruleset in `RALPH_SANDBOX`, then execs the program and arguments in
    /// `RALPH_SANDBOX_COMMAND` in its place.
    #[command(name = "__sandbox")]
    Sandbox,
}

const SERVE_HELP: &str = "\
Examples:
  ralph serve                       # http://127.0.0.1:7707, this machine only
  ralph serve pair web              # a one-time link (and QR code) that pairs a browser
  ralph serve pair telegram         # a one-time t.me link that pairs you with the bot in remote.toml
  ralph serve devices               # the paired browsers and Telegram user
  ralph serve revoke 3f9a1c         # unpair one (a lost phone); `revoke telegram` for the bot's user
  tailscale serve --bg 127.0.0.1:7707   # reach it from your phone over your tailnet
  ralph serve --bind 0.0.0.0:7707 --tls-cert cert.pem --tls-key key.pem

While it runs, the loop's terminal view and plain lines and `ralph status` show a waiting
question's link (`answer_url` in `ralph status --json`), notify_command gets
RALPH_ANSWER_URL and the webhook body `answer_url`: a link that opens that one question and
nothing else. Off unless started; one per machine.";

const RUN_HELP: &str = "\
Examples:
  ralph run --agent-cmd 'my-agent --yes'
  ralph run --agent claude --question-timeout 30s
  ralph run -C ~/src/myproject --max-iterations 5 --no-tui

Flags override the keys of the same name in RALPH_TASK.md.

Exit codes:
  0    DONE, verified: every criterion checked and test_command passed
  1    stopped without completion (GUTTER, too many failures, max_cost_usd spent, a
       question timed out under `stop`, an error), or another `ralph run` works here
  2    usage or configuration error (bad flag, bad RALPH_TASK.md; nothing was written),
       or an agent command that cannot start (not found, not executable)
  3    max_iterations reached
  130  interrupted (Ctrl-C, SIGTERM, SIGHUP, SIGQUIT); state is saved and the next
       `ralph run` resumes";

const STOP_HELP: &str = "\
Examples:
  ralph stop
  ralph stop -C ~/src/myproject

The agent is stopped gracefully, the state saved, a waiting question kept; `ralph run`
resumes. Waits until the loop has ended.

Exit codes:
  0  the loop stopped
  1  no loop is running there, or it did not stop within two minutes";

const ANSWER_HELP: &str = "\
Examples:
  ralph answer \"Use Redis, we need pub/sub later\"
  ralph answer 2                  # pick option 2
  ralph answer --option 1 \"but keep the TTL short\"
  git diff | ralph answer --stdin
  ralph answer --edit              # write it in $EDITOR
  ralph answer --force \"Prefer small commits\"   # guidance when no question waits

Exit codes:
  0  the answer was written; a running loop picks it up at once
  1  nothing to answer (no question waiting), or someone answered first
  2  the answer is empty, or the option number is out of range";

const ASK_HELP: &str = "\
Examples (run by an agent inside `ralph run`, or by anyone):
  ralph ask \"Redis or Memcached?\" --option Redis --option Memcached --default Redis
  ralph ask \"May I drop the legacy table?\" --context \"It holds 3 rows from 2019\" --timeout 10m
  ralph ask \"Which caches?\" -o Redis -o Memcached --multi-select --json | jq .picks

Prints the answer on stdout and exits 0. Works with or without a running `ralph run`; the
human answers in the loop's panel or with `ralph answer` from any terminal.

Exit codes:
  0  answered: the answer is on stdout
  1  another question is already waiting, or .ralph/ could not be used
  2  usage error (empty question, bad --timeout)
  3  nobody answered in time (or the human skipped): proceed with your default or best guess";

const UNDO_HELP: &str = "\
Examples:
  ralph undo          # back to before the last iteration
  ralph undo 2        # back to the state after iteration 2 (0: where the run started)
  ralph undo 1a2b3c4d # a checkpoint's commit: what an undo prints to undo itself

The present state is checkpointed first, so every undo can be undone. Files git ignores are
never touched. Refused while a loop runs in the directory.

Exit codes:
  0  the work tree is as it was
  1  no checkpoints here, or a loop is running
  2  no such iteration";

const LAND_HELP: &str = "\
Examples:
  ralph land                     # inside a loop's worktree
  ralph land add-a-cache         # from your checkout, naming the loop
  ralph land -C ~/.local/share/ralph/worktrees/app-1a2b3c4d/add-a-cache
  ralph land --pr                # push the branch and open a pull request with gh

The loop's branch is rebased (or merged, `land_with: merge`) onto the target's tip in a
temporary worktree, test_command runs on that combined tree, a backup ref of the target is
saved, and the target moves by compare-and-swap. See `ralph docs checkpoints-and-landing`.

Exit codes:
  0  landed (or the pull request is open)
  1  not landed: needs-land (the command that finishes it is printed), needs-review, or an error
  2  usage error (no such loop)";

const FLEET_HELP: &str = "\
Examples:
  ralph fleet tasks/*.md                       # four at a time, landed by you (`ralph land`)
  ralph fleet -j 2 --land auto tasks/*.md      # land each as soon as its DONE is verified
  ralph fleet --agent codex --max-cost-usd 20 tasks/*.md
  ralph fleet tasks/*.md                       # again, after closing it: attaches to the loops
  ralph fleet prune                            # remove landed and discarded loops' worktrees

Each task file becomes an ordinary `ralph run --worktree` in a process group of its own: if
the fleet is closed or killed, its loops go on, and running it again on the same task files
attaches to them. Each loop gets RALPH_PORT, the first of ten ports no other loop has. See
`ralph docs fleet`.

Exit codes:
  0    every loop ended with DONE verified (and landed, under --land auto or pr)
  1    a loop failed, was stopped, needs review or needs land, or did not land
  2    usage error (bad flag, bad task file, two task files with the same task); nothing started
  3    no loop failed, but one reached max_iterations
  130  the fleet was left (its view closed, or Ctrl-C) while loops still run: they go on";

const DOCTOR_HELP: &str = "\
Examples:
  ralph doctor
  ralph doctor -C ~/src/myproject    # also that project's task file and .ralph/config.toml

Exit codes:
  0  nothing is wrong
  1  something is: each problem is listed with its fix";

const COMPLETIONS_HELP: &str = "\
Install (each loads the completions in every new shell):
  bash        ralph completions bash > ~/.local/share/bash-completion/completions/ralph
  zsh         ralph completions zsh > ~/.zfunc/_ralph   # with fpath+=(~/.zfunc) before compinit
  fish        ralph completions fish > ~/.config/fish/completions/ralph.fish
  elvish      ralph completions elvish >> ~/.config/elvish/rc.elv
  powershell  ralph completions powershell >> $PROFILE";

// `-C DIR`, shared by every command that works on a project. Not a doc comment: clap would make
// it the description of each subcommand that flattens it, and with `defer` (on `Command`) it
// would win.
#[derive(Debug, Args, Clone)]
pub struct DirArg {
    /// Work in DIR instead of the current directory.
    #[arg(short = 'C', long = "dir", value_name = "DIR", default_value = ".")]
    pub dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct InitArgs {
    #[command(flatten)]
    pub dir: DirArg,
    /// Overwrite an existing RALPH_TASK.md.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub dir: DirArg,
    /// The task file, relative to DIR.
    #[arg(long, value_name = "FILE", default_value = "RALPH_TASK.md")]
    pub task: PathBuf,
    #[command(flatten)]
    pub agent_flags: AgentFlags,
    /// Plain lines instead of the terminal UI (automatic when stdout is not a terminal).
    #[arg(long)]
    pub no_tui: bool,
    /// Run in a git worktree of its own, outside the repository, on a new branch
    /// `ralph/<task>`; `ralph land` brings the work back (also `worktree: true`).
    #[arg(long)]
    pub worktree: bool,
    /// With --worktree: the branch the work lands on (default: the one checked out now).
    #[arg(long, value_name = "BRANCH")]
    pub onto: Option<String>,
    /// Run a task that is already done again (without it, a task that ended with DONE verified
    /// and has not changed since is not run: there is nothing to do).
    #[arg(long)]
    pub again: bool,
    /// Take the task file's sandbox settings even where they are weaker than those the last
    /// run of this project started with (the agent can edit the task file: `ralph docs sandbox`).
    #[arg(long)]
    pub accept_sandbox: bool,
    /// With --worktree: when the work lands (overrides `land:` in the task file): `manual`
    /// (`ralph land`), `auto` (after a verified DONE), `pr` (a pull request).
    #[arg(long, value_name = "WHEN", value_enum)]
    pub land: Option<LandArg>,
}

/// `--land`'s values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LandArg {
    /// Only by `ralph land` (or `l` in the fleet's view).
    Manual,
    /// As soon as DONE is verified, tested on the combined tree, one loop at a time per
    /// repository.
    Auto,
    /// As soon as DONE is verified, as a pull request (`gh pr create`).
    Pr,
}

impl LandArg {
    /// The task file's setting this stands for.
    pub fn mode(self) -> ralph_protocol::LandMode {
        match self {
            LandArg::Manual => ralph_protocol::LandMode::Manual,
            LandArg::Auto => ralph_protocol::LandMode::Auto,
            LandArg::Pr => ralph_protocol::LandMode::PullRequest,
        }
    }
}

// The flags that choose and limit the agent: `ralph run`'s, which `ralph fleet` takes too and
// passes on to each of its loops. Not a doc comment, for the reason given at `DirArg`.
#[derive(Debug, Args, Clone, Default)]
pub struct AgentFlags {
    /// An agent preset: claude, claude-sdk, codex, cursor, gemini, opencode or amp (`ralph
    /// agents` lists them). Overrides `agent:` in the task file.
    #[arg(long, value_name = "NAME", conflicts_with = "agent_cmd", value_parser = PresetName)]
    pub agent: Option<String>,
    /// Any agent: a shell command that reads the prompt on stdin.
    #[arg(long, value_name = "CMD")]
    pub agent_cmd: Option<String>,
    /// How to read --agent-cmd's output: `text` (default), or an agent's stream format
    /// (`claude`, `codex`, `gemini`, `opencode`, `amp`, `cursor`), for wrappers around one.
    #[arg(long, value_name = "FORMAT", requires = "agent_cmd")]
    pub agent_format: Option<String>,
    /// How --agent-cmd resumes a session after an answer: a command line where `{session_id}`
    /// stands for the session; the answer arrives on stdin.
    #[arg(long, value_name = "CMD", requires = "agent_cmd")]
    pub agent_resume_cmd: Option<String>,
    /// Stop (exit 3) after this many iterations (1 to 1,000,000).
    #[arg(
        long,
        value_name = "N",
        allow_negative_numbers = true,
        value_parser = clap::value_parser!(u32).range(1..=i64::from(ralph_loop::task::MAX_COUNT))
    )]
    pub max_iterations: Option<u32>,
    /// How long a question waits: `90s`, `5m`, `1h`, `0` (do not wait), `never`.
    #[arg(long, value_name = "DUR")]
    pub question_timeout: Option<String>,
    /// How long one agent run may take: `30m`, `never`.
    #[arg(long, value_name = "DUR")]
    pub iteration_timeout: Option<String>,
    /// Run the agent without its sandbox, as `sandbox: false` does (see `ralph docs sandbox`).
    #[arg(long)]
    pub no_sandbox: bool,
}

impl AgentFlags {
    /// These flags as `ralph run` takes them, to pass on.
    pub fn to_args(&self) -> Vec<std::ffi::OsString> {
        let mut out: Vec<std::ffi::OsString> = Vec::new();
        let mut pair = |flag: &str, value: Option<String>| {
            if let Some(v) = value {
                out.push(flag.into());
                out.push(v.into());
            }
        };
        pair("--agent", self.agent.clone());
        pair("--agent-cmd", self.agent_cmd.clone());
        pair("--agent-format", self.agent_format.clone());
        pair("--agent-resume-cmd", self.agent_resume_cmd.clone());
        pair(
            "--max-iterations",
            self.max_iterations.map(|n| n.to_string()),
        );
        pair("--question-timeout", self.question_timeout.clone());
        pair("--iteration-timeout", self.iteration_timeout.clone());
        if self.no_sandbox {
            out.push("--no-sandbox".into());
        }
        out
    }
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub dir: DirArg,
    /// One JSON object, for scripts (with --all: an array).
    #[arg(long)]
    pub json: bool,
    /// Every loop on this machine (running, or resting in a worktree), the ones that need
    /// you first.
    #[arg(long, conflicts_with = "dir")]
    pub all: bool,
    /// With --all: keep showing the loops, live, in the fleet view (Enter answers, d diff,
    /// l land, x stop, r retry, q quits); plain lines when not in a terminal.
    #[arg(long, requires = "all", conflicts_with = "json")]
    pub watch: bool,
}

#[derive(Debug, Args)]
pub struct LogsArgs {
    #[command(flatten)]
    pub dir: DirArg,
    /// Keep showing the output as it comes, iteration after iteration, until the loop ends.
    #[arg(short = 'f', long)]
    pub follow: bool,
}

#[derive(Debug, Args)]
pub struct StopArgs {
    #[command(flatten)]
    pub dir: DirArg,
}

#[derive(Debug, Args)]
pub struct AnswerArgs {
    #[command(flatten)]
    pub dir: DirArg,
    /// The answer; a bare number picks that option (`1,3` several, where allowed); `-` reads
    /// standard input.
    #[arg(value_name = "ANSWER")]
    pub text: Option<String>,
    /// Pick option N (1-based); ANSWER, if given too, is added as a note.
    #[arg(
        long = "option",
        short = 'o',
        value_name = "N",
        conflicts_with = "as_text"
    )]
    pub option: Option<usize>,
    /// Send ANSWER as written, even when it is a number (which otherwise picks an option).
    #[arg(long)]
    pub as_text: bool,
    /// Read the answer from standard input.
    #[arg(long, conflicts_with_all = ["text", "edit"])]
    pub stdin: bool,
    /// Write the answer in $VISUAL / $EDITOR.
    #[arg(long, conflicts_with = "text")]
    pub edit: bool,
    /// Leave the answer even when no question is waiting: the next iteration gets it as guidance.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct AskArgs {
    /// The project (default: the one `RALPH_DIR` points into, else the current directory).
    #[arg(short = 'C', long = "dir", value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The question (markdown).
    #[arg(value_name = "QUESTION")]
    pub question: String,
    /// A suggested answer; repeat for several. Free text is always allowed.
    #[arg(long = "option", short = 'o', value_name = "TEXT")]
    pub options: Vec<String>,
    /// The answer may pick several options.
    #[arg(long)]
    pub multi_select: bool,
    /// Your best guess, used if nobody answers.
    #[arg(long, value_name = "TEXT")]
    pub default: Option<String>,
    /// Extra context shown under the question.
    #[arg(long, value_name = "TEXT")]
    pub context: Option<String>,
    /// How long to wait: `90s`, `5m`, `never` (default: the task file's question_timeout, else 5m).
    #[arg(long, value_name = "DUR")]
    pub timeout: Option<String>,
    /// Print the answer as JSON: `{"answer", "picks", "note", "answered_by"}`, the options
    /// picked as a list (`ralph docs protocol`).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where to run the demo (default: a fresh temporary directory); new or empty.
    #[arg(short = 'C', long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// How long the demo's question waits for you before the agent uses its default.
    #[arg(long, value_name = "DUR", default_value = "20s")]
    pub question_timeout: String,
    /// Plain lines instead of the terminal UI.
    #[arg(long)]
    pub no_tui: bool,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    #[command(flatten)]
    pub dir: DirArg,
    /// One JSON object, for scripts.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    #[command(flatten)]
    pub dir: DirArg,
    /// The iteration (default: the whole run, against where it started).
    #[arg(value_name = "N")]
    pub iteration: Option<u32>,
    /// Only these paths.
    #[arg(last = true, value_name = "PATH")]
    pub paths: Vec<String>,
}

impl DiffArgs {
    /// `--` before the paths, when there are any.
    pub fn paths_sep(&self) -> Vec<&'static str> {
        if self.paths.is_empty() {
            vec![]
        } else {
            vec!["--"]
        }
    }
}

#[derive(Debug, Args)]
pub struct UndoArgs {
    #[command(flatten)]
    pub dir: DirArg,
    /// An iteration number (0: where the run started), or a checkpoint's commit.
    #[arg(value_name = "N")]
    pub to: Option<String>,
}

#[derive(Debug, Args)]
pub struct LandArgs {
    #[command(flatten)]
    pub dir: DirArg,
    /// The loop (its task slug, from `ralph worktree list`); default: the worktree DIR is in.
    #[arg(value_name = "LOOP")]
    pub name: Option<String>,
    /// Push the branch and open a pull request with `gh` instead (for protected branches).
    #[arg(long)]
    pub pr: bool,
}

#[derive(Debug, Args)]
pub struct WorktreeArgs {
    #[command(subcommand)]
    pub command: WorktreeCommand,
}

#[derive(Debug, Subcommand)]
pub enum WorktreeCommand {
    /// The loops in worktrees of this repository, with their state.
    List {
        #[command(flatten)]
        dir: DirArg,
    },
    /// Give up on a loop: it may then be removed (its branch keeps its commits).
    Discard {
        #[command(flatten)]
        dir: DirArg,
        /// The loop's name (its task slug).
        #[arg(value_name = "LOOP")]
        name: String,
    },
    /// Remove a landed or discarded loop's worktree; refused while it has changes in no commit.
    Remove {
        #[command(flatten)]
        dir: DirArg,
        /// The loop's name (its task slug).
        #[arg(value_name = "LOOP")]
        name: String,
    },
}

#[derive(Debug, Args)]
pub struct FleetArgs {
    #[command(subcommand)]
    pub command: Option<FleetCommand>,
    /// The task files, one loop each (anywhere in a git repository, e.g. tasks/*.md).
    #[arg(value_name = "TASK.md", required = true)]
    pub tasks: Vec<PathBuf>,
    /// How many loops run at once; the others wait their turn.
    #[arg(short = 'j', long = "jobs", value_name = "N", default_value_t = 4,
          value_parser = clap::value_parser!(u16).range(1..=256))]
    pub jobs: u16,
    /// When finished work lands (default: as each task file's `land:` says, else manual).
    #[arg(long, value_name = "WHEN", value_enum)]
    pub land: Option<LandArg>,
    /// The branch every loop's work lands on (default: the one checked out now).
    #[arg(long, value_name = "BRANCH")]
    pub onto: Option<String>,
    /// Plain lines instead of the terminal view (automatic when stdout is not a terminal).
    #[arg(long)]
    pub no_tui: bool,
    /// Stop starting iterations once the fleet's loops together have cost this many dollars.
    #[arg(long, value_name = "USD", value_parser = positive_dollars)]
    pub max_cost_usd: Option<f64>,
    #[command(flatten)]
    pub agent_flags: AgentFlags,
}

/// `--max-cost-usd`: a positive number of dollars.
fn positive_dollars(s: &str) -> Result<f64, String> {
    match s.trim_start_matches('$').parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!(
            "{s} is not a positive number of dollars (e.g. 20 or 7.50)"
        )),
    }
}

#[derive(Debug, Subcommand)]
pub enum FleetCommand {
    /// Remove the worktrees and branches of landed and discarded loops; list what is kept and why.
    #[command(
        after_help = "Examples:\n  ralph fleet prune\n  ralph fleet prune -C ~/src/myproject\n\nEach branch's last commit is kept under refs/ralph/pruned/<branch>."
    )]
    Prune {
        #[command(flatten)]
        dir: DirArg,
    },
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub dir: DirArg,
}

#[derive(Debug, Args)]
pub struct DocsArgs {
    /// The doc to show (`sandbox`, `fleet`, ...); without it, the list of them.
    #[arg(value_name = "TOPIC")]
    pub topic: Option<String>,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete in.
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write ralph.1 and one page per subcommand (ralph-run.1, ...) into DIR, instead of
    /// printing ralph.1.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// clap checks a command's arguments (conflicts, requires, duplicate flags) when it builds
    /// it; with `defer`, only the subcommand parsed gets built, so build all of them here.
    #[test]
    fn every_subcommand_passes_clap_checks() {
        super::Cli::command().debug_assert();
        super::InternalCli::command().debug_assert();
    }

    /// Regression: `status --all -C DIR` ignored DIR without a word, listing every loop.
    #[test]
    fn status_all_refuses_a_directory() {
        use clap::Parser;
        let err = super::Cli::try_parse_from(["ralph", "status", "--all", "-C", "/tmp"])
            .expect_err("--all with -C");
        assert_eq!(err.kind(), clap::error::ErrorKind::ArgumentConflict);
        assert!(super::Cli::try_parse_from(["ralph", "status", "--all"]).is_ok());
        assert!(super::Cli::try_parse_from(["ralph", "status", "-C", "/tmp"]).is_ok());
    }

    /// Regression: with `defer`, the doc comment of the flattened `DirArg` replaced the
    /// description of `run`, `status`, `init` and `answer` once they were built, in their help.
    #[test]
    fn building_a_subcommand_keeps_its_description() {
        let eager = super::Cli::command();
        let mut built = super::Cli::command();
        built.build();
        for (before, after) in eager.get_subcommands().zip(built.get_subcommands()) {
            assert_eq!(
                before.get_about().map(ToString::to_string),
                after.get_about().map(ToString::to_string),
                "{}",
                before.get_name()
            );
        }
    }
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Pair a device (the broker must be running), list or revoke paired ones, instead of
    /// serving.
    #[command(subcommand)]
    pub pair: Option<ServeCommand>,
    /// The address to listen on. Anything but loopback needs --tls-cert/--tls-key, or
    /// --insecure-http.
    #[arg(long, default_value = ralph_remote::DEFAULT_BIND)]
    pub bind: std::net::SocketAddr,
    /// A PEM certificate chain, to serve https (with --tls-key).
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Serve plain http on a non-loopback address (only on a network that is yours alone).
    #[arg(long)]
    pub insecure_http: bool,
    /// The URL links start with when the broker is reached through a proxy, e.g.
    /// `https://box.tailnet.ts.net` (from `tailscale serve`).
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum ServeCommand {
    /// List the paired browsers and the paired Telegram user.
    Devices,
    /// Unpair a browser (by the id `ralph serve devices` shows) or the Telegram user
    /// (`telegram`), as for a lost phone: it gets nothing from the broker any more.
    #[command(
        after_help = "Examples:\n  ralph serve devices\n  ralph serve revoke 3f9a1c\n  ralph serve revoke telegram\n  ralph serve revoke --all"
    )]
    Revoke {
        /// A browser's id (from `ralph serve devices`), or `telegram`.
        #[arg(value_name = "ID", required_unless_present = "all")]
        which: Option<String>,
        /// Every paired browser and the Telegram user.
        #[arg(long, conflicts_with = "which")]
        all: bool,
    },
    /// Print a one-time link (and QR code) that pairs a device with the running broker.
    Pair {
        /// What to pair: `web` (a browser: the dashboard of every loop) or `telegram` (a
        /// Telegram user, through the bot whose token is in remote.toml).
        #[arg(value_enum)]
        what: PairWhat,
    },
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum PairWhat {
    /// A browser, for the dashboard of every loop.
    Web,
    /// A Telegram user, through the bot in remote.toml: questions arrive as messages.
    Telegram,
}

/// `--agent`'s value: any name (ralph's own error, with its "did you mean", refuses one that
/// is no preset), with the presets offered to shell completion (`--agent <TAB>`) and help. The
/// demo's is left out: it runs only in `ralph demo`.
#[derive(Debug, Clone, Copy)]
struct PresetName;

impl clap::builder::TypedValueParser for PresetName {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        clap::builder::StringValueParser::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            ralph_loop::agents::presets()
                .iter()
                .filter(|p| p.program != ralph_loop::agents::Program::Ralph)
                .map(|p| clap::builder::PossibleValue::new(p.name)),
        ))
    }
}
