//! `ralph docs [TOPIC]`: the docs, shipped inside the binary, since a `cargo install`ed or
//! downloaded ralph has no `docs/` beside it to point its messages at.
//!
//! `ralph completions SHELL` and `ralph man`: generated from the same clap definition as the
//! parser, so they never drift from the flags.

use anyhow::Context as _;
use clap::CommandFactory;

use crate::args::{Cli, CompletionsArgs, DocsArgs, ManArgs};
use crate::{CmdResult, Failure};

/// Every `docs/*.md` of the source repository, by its file's name (a test checks that none is
/// missing). What ralph prints points at these as `ralph docs NAME`.
pub const TOPICS: &[(&str, &str)] = &[
    ("agents", include_str!("../../../docs/agents.md")),
    (
        "architecture",
        include_str!("../../../docs/architecture.md"),
    ),
    ("benchmarks", include_str!("../../../docs/benchmarks.md")),
    ("budget", include_str!("../../../docs/budget.md")),
    (
        "checkpoints-and-landing",
        include_str!("../../../docs/checkpoints-and-landing.md"),
    ),
    ("cost", include_str!("../../../docs/cost.md")),
    ("elsewhere", include_str!("../../../docs/elsewhere.md")),
    ("fleet", include_str!("../../../docs/fleet.md")),
    ("fleet-view", include_str!("../../../docs/fleet-view.md")),
    ("platforms", include_str!("../../../docs/platforms.md")),
    ("protocol", include_str!("../../../docs/protocol.md")),
    ("reference", include_str!("../../../docs/reference.md")),
    ("remote", include_str!("../../../docs/remote.md")),
    ("sandbox", include_str!("../../../docs/sandbox.md")),
    ("security", include_str!("../../../docs/security.md")),
    ("task-file", include_str!("../../../docs/task-file.md")),
];

/// `ralph docs`: the topics, one a line with the doc's title; `ralph docs TOPIC`: that doc,
/// through the user's pager on a terminal. An unknown topic is a usage error (exit 2) that
/// names the closest one and lists them all.
pub fn docs(args: &DocsArgs) -> CmdResult {
    let Some(asked) = &args.topic else {
        outln!("{}", topic_list());
        outln!("\nRead one with `ralph docs TOPIC` (`ralph docs sandbox`).");
        return Ok(0);
    };
    let Some(text) = topic(asked) else {
        let hint = closest(asked)
            .map(|t| format!(" (did you mean `ralph docs {t}`?)"))
            .unwrap_or_default();
        return Err(Failure::usage(anyhow::anyhow!(
            "no doc named `{asked}`{hint}. The docs:\n{}",
            topic_list()
        )));
    };
    if std::io::IsTerminal::is_terminal(&std::io::stdout()) && page(text) {
        return Ok(0);
    }
    write_out(text.as_bytes())
}

/// A topic's text: its name as listed, any case, or as its file is named in the repository
/// (`sandbox.md`, `docs/sandbox.md`).
fn topic(name: &str) -> Option<&'static str> {
    let name = name.trim().to_ascii_lowercase();
    let name = name.strip_prefix("docs/").unwrap_or(&name);
    let name = name.strip_suffix(".md").unwrap_or(name);
    TOPICS
        .iter()
        .find(|(t, _)| *t == name)
        .map(|(_, text)| *text)
}

/// The topic a mistyped name most likely meant: one that contains it (`landing`:
/// checkpoints-and-landing), else the nearest by spelling, if any is near.
fn closest(name: &str) -> Option<&'static str> {
    let name = name.trim().to_ascii_lowercase();
    if name.len() >= 3
        && let Some((t, _)) = TOPICS.iter().find(|(t, _)| t.contains(name.as_str()))
    {
        return Some(t);
    }
    TOPICS
        .iter()
        .map(|(t, _)| (strsim::jaro_winkler(t, &name), *t))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, t)| t)
}

/// The topics, one a line: name, then the doc's first heading.
fn topic_list() -> String {
    let width = TOPICS.iter().map(|(t, _)| t.len()).max().unwrap_or(0);
    TOPICS
        .iter()
        .map(|(t, text)| format!("  {t:width$}  {}", title(text)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A doc's first heading, without its `#`s.
fn title(text: &str) -> &str {
    text.lines()
        .find_map(|l| l.strip_prefix('#'))
        .map_or("", |h| h.trim_start_matches('#').trim())
}

/// Shows `text` through the user's pager as git does: `PAGER` run by the shell, else `less`,
/// with `LESS=FRX` unless `LESS` is set (a short doc prints and returns). False when there is
/// none to run (`PAGER=cat` or empty, no `less`): the caller prints it instead. Ctrl-C while
/// the pager runs is the pager's; ralph waits for it to end rather than leave it on the
/// terminal.
fn page(text: &str) -> bool {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut command = match std::env::var("PAGER") {
        Ok(p) if p.trim().is_empty() || p.trim() == "cat" => return false,
        Ok(p) => {
            let mut c = Command::new("sh");
            c.args(["-c", &p]);
            c
        }
        Err(_) => Command::new("less"),
    };
    if std::env::var_os("LESS").is_none() {
        command.env("LESS", "FRX");
    }
    let interrupted = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let _ = signal_hook::flag::register(signal_hook::consts::SIGINT, interrupted);
    let Ok(mut child) = command.stdin(Stdio::piped()).spawn() else {
        return false;
    };
    if let Some(mut stdin) = child.stdin.take() {
        // A pager quit before the end closes its stdin: not an error.
        let _ = stdin.write_all(text.as_bytes());
    }
    let _ = child.wait();
    true
}

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
        "set by ralph fleet on its loops: the fleet's id, and the cap on what its loops cost together (US dollars); see ralph docs budget.",
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A doc added to docs/ is shipped too: the list is every `docs/*.md`, and each has a title
    /// for `ralph docs` to list.
    #[test]
    fn every_doc_in_the_repository_is_a_topic_with_a_title() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| {
                let name = e.unwrap().file_name().into_string().unwrap();
                name.strip_suffix(".md").map(str::to_owned)
            })
            .collect();
        on_disk.sort();
        let mut shipped: Vec<String> = TOPICS.iter().map(|(t, _)| (*t).to_owned()).collect();
        shipped.sort();
        assert_eq!(shipped, on_disk, "TOPICS in crates/cli/src/cmd_docs.rs");
        for (t, text) in TOPICS {
            assert!(!title(text).is_empty(), "{t} has no heading");
        }
    }

    #[test]
    fn a_topic_is_found_by_its_name_or_its_file_s_and_a_near_miss_is_suggested() {
        assert!(
            topic("sandbox")
                .unwrap()
                .starts_with("# The agent's sandbox")
        );
        assert_eq!(topic("Docs/Sandbox.md"), topic("sandbox"));
        assert_eq!(topic("sandbox.md"), topic("sandbox"));
        assert_eq!(topic("sand"), None);
        assert_eq!(closest("sandbx"), Some("sandbox"));
        assert_eq!(closest("landing"), Some("checkpoints-and-landing"));
        assert_eq!(closest("flet"), Some("fleet"));
        assert_eq!(closest("zzz"), None);
    }
}
