//! `ralph completions SHELL` and `ralph man`: generated from the same clap definition as the
//! parser, so they never drift from the flags.

use anyhow::Context as _;
use clap::CommandFactory;

use crate::CmdResult;
use crate::args::{Cli, CompletionsArgs, ManArgs};

/// Prints the completion script for one shell on stdout.
pub fn completions(args: &CompletionsArgs) -> CmdResult {
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "ralph", &mut out);
    write_out(&out)
}

/// Prints `ralph.1`, or with `--out-dir` writes it and one page per subcommand there.
pub fn man(args: &ManArgs) -> CmdResult {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    let Some(dir) = &args.out_dir else {
        return write_out(&man_page(&cmd, None, false)?);
    };
    std::fs::create_dir_all(dir).with_context(|| format!("could not create {}", dir.display()))?;
    let subs: Vec<clap::Command> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .cloned()
        .collect();
    let mut pages = vec!["ralph.1".to_owned()];
    let write = |name: &str, page: Vec<u8>| {
        std::fs::write(dir.join(name), page)
            .with_context(|| format!("could not write the man page {}", dir.join(name).display()))
    };
    write("ralph.1", man_page(&cmd, None, true)?)?;
    for sub in &subs {
        let name = format!("ralph-{}.1", sub.get_name());
        // Built, a subcommand's display name is `ralph-run`: the page's title and NAME.
        write(&name, man_page(sub, Some(&cmd), true)?)?;
        pages.push(name);
    }
    pages.sort();
    outln!(
        "wrote {} man pages into {}: {}",
        pages.len(),
        dir.display(),
        pages.join(" ")
    );
    Ok(0)
}

/// One man page: clap_mangen's title, NAME, SYNOPSIS, DESCRIPTION and OPTIONS; then what the
/// help says after the options, in the sections a man page reader looks for (EXAMPLES, EXIT
/// STATUS, NOTES); the top page's COMMANDS, ENVIRONMENT and FILES; and SEE ALSO, naming other
/// pages only when they are written too (`all`).
fn man_page(
    cmd: &clap::Command,
    parent: Option<&clap::Command>,
    all: bool,
) -> std::io::Result<Vec<u8>> {
    use clap_mangen::roff::{Roff, bold, roman};
    let man = clap_mangen::Man::new(cmd.clone());
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut out)?;
    }
    let mut roff = Roff::new();
    let subs: Vec<_> = cmd.get_subcommands().filter(|s| !s.is_hide_set()).collect();
    if !subs.is_empty() {
        roff.control("SH", ["COMMANDS"]);
        for sub in &subs {
            roff.control("TP", []);
            roff.text([bold(format!("{} {}", cmd.get_name(), sub.get_name()))]);
            roff.text([roman(
                sub.get_about().map(|a| a.to_string()).unwrap_or_default(),
            )]);
        }
    }
    let after = cmd
        .get_after_long_help()
        .or(cmd.get_after_help())
        .map(|h| h.to_string())
        .unwrap_or_default();
    let mut notes = Vec::new();
    for block in after.split("\n\n").filter(|b| !b.trim().is_empty()) {
        let (first, rest) = block.split_once('\n').unwrap_or((block, ""));
        let section = if first.starts_with("Examples") {
            "EXAMPLES"
        } else if first.starts_with("Exit codes") {
            "EXIT STATUS"
        } else {
            notes.push(block.to_owned());
            continue;
        };
        roff.control("SH", [section]);
        if first.contains('(') {
            roff.text([roman(first.trim_end_matches(':'))]);
        }
        preformatted(&mut roff, rest);
    }
    if parent.is_none() {
        roff.control("SH", ["ENVIRONMENT"]);
        for (name, what) in ENVIRONMENT {
            roff.control("TP", []);
            roff.text([bold(*name)]);
            roff.text([roman(*what)]);
        }
        roff.control("SH", ["FILES"]);
        for (name, what) in FILES {
            roff.control("TP", []);
            roff.text([bold(*name)]);
            roff.text([roman(*what)]);
        }
    }
    for note in &notes {
        roff.control("SH", ["NOTES"]);
        roff.text([roman(note.replace('\n', " "))]);
    }
    if all {
        roff.control("SH", ["SEE ALSO"]);
        let names: Vec<String> = match parent {
            Some(_) => vec!["ralph(1)".into()],
            None => subs
                .iter()
                .map(|s| format!("ralph-{}(1)", s.get_name()))
                .collect(),
        };
        roff.text([roman(names.join(", "))]);
    } else {
        roff.control("SH", ["SEE ALSO"]);
        roff.text([roman(
            "ralph help COMMAND; ralph man --out-dir DIR writes one page per command (ralph-run.1, ...).",
        )]);
    }
    roff.to_writer(&mut out)?;
    if cmd.get_version().is_some() {
        man.render_version_section(&mut out)?;
    }
    Ok(out)
}

/// Lines kept as written (examples, tables of exit codes), their common indent removed.
fn preformatted(roff: &mut clap_mangen::roff::Roff, text: &str) {
    let indent = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    roff.control("nf", []);
    for line in text.lines() {
        roff.text([clap_mangen::roff::roman(
            line.get(indent..).unwrap_or(line.trim()),
        )]);
        roff.control("br", []);
    }
    roff.control("fi", []);
}

/// The variables ralph reads, and the ones it gives the agent, for the ENVIRONMENT section.
const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "RALPH_STATE_DIR",
        "ralph's state: the registry of running loops, the broker's files (default ~/.local/state/ralph).",
    ),
    (
        "XDG_CONFIG_HOME",
        "where the user's config.toml and remote.toml are, under ralph/ (default ~/.config).",
    ),
    ("NO_COLOR", "set: no colour."),
    (
        "TERM",
        "the terminal view needs one that is not dumb; otherwise plain lines.",
    ),
    ("TZ", "the time zone a rate limit's reset is shown in."),
    (
        "RALPH_FLEET, RALPH_FLEET_MAX_COST_USD",
        "set by ralph fleet on its loops: the fleet's id, and the cap on what its loops cost together (US dollars); see docs/budget.md.",
    ),
    (
        "RALPH_ITERATION, RALPH_TASK_FILE, RALPH_PROMPT_FILE, RALPH_BIN, RALPH_RUN",
        "given to the agent and test_command: the iteration, the task file, the prompt, this ralph, the run's id.",
    ),
    (
        "RALPH_ANSWER_URL, RALPH_QUESTION",
        "given to notify_command: the question's answer link (empty without ralph serve) and its text.",
    ),
];

/// The files ralph reads and writes, for the FILES section.
const FILES: &[(&str, &str)] = &[
    (
        "RALPH_TASK.md",
        "the task: YAML keys between --- lines (task, max_iterations, test_command, test_timeout, question_timeout, on_question_timeout, iteration_timeout, agent, agent_args, model, completion_criteria, max_cost_usd, max_consecutive_failures, notify_command, webhook_url, bell, desktop_notification), then the criteria as markdown checkboxes. ralph init writes a commented example.",
    ),
    (
        ".ralph/",
        "the loop's workspace, kept out of git: state.json, events.jsonl, progress.md, guardrails.md, clarifications.md, question.md, answer.md, config.toml, logs/.",
    ),
    (
        "~/.config/ralph/config.toml",
        "the user's defaults for every project; .ralph/config.toml sets them for one.",
    ),
    (
        "~/.config/ralph/remote.toml",
        "ralph serve's Telegram bot token (mode 0600).",
    ),
];

/// Writes a whole generated file on stdout; a reader gone away ends the command quietly.
fn write_out(bytes: &[u8]) -> CmdResult {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(0),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
        Err(e) => Err(anyhow::anyhow!("cannot write to standard output: {e}").into()),
    }
}
