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
    let cmd = Cli::command();
    let Some(dir) = &args.out_dir else {
        let mut out = Vec::new();
        clap_mangen::Man::new(cmd).render(&mut out)?;
        return write_out(&out);
    };
    std::fs::create_dir_all(dir).with_context(|| format!("could not create {}", dir.display()))?;
    clap_mangen::generate_to(cmd, dir)
        .with_context(|| format!("could not write the man pages into {}", dir.display()))?;
    let mut pages: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with("ralph") && name.ends_with(".1"))
        .collect();
    pages.sort();
    outln!(
        "wrote {} man pages into {}: {}",
        pages.len(),
        dir.display(),
        pages.join(" ")
    );
    Ok(0)
}

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
