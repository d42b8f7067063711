//! How a command line becomes a process: run directly when it needs no shell, through
//! `sh -c` otherwise, as GNU make runs a recipe line.
//!
//! Starting `sh` only for it to start the agent costs a process image and a `PATH` search per
//! iteration (most of ralph's overhead between two agents). A line made only of words, plain or
//! quoted (`claude -p --output-format stream-json`, `my-agent --flag 'two words'`), means the
//! same to `sh` as its words do to `execve`: it is split with `shell-words` (POSIX quoting
//! rules) and the program is started itself. Anything the shell would act on (a variable, a
//! glob, a pipe, a redirection, `;`, `&&`, a backslash, a `VAR=value` prefix, a builtin such
//! as `cd` or `exec`) sends the whole line to `sh -c`, unchanged. Either way the process is
//! started the same: the leader of its own process group, with the same environment, working
//! directory, stdin and pipes, so it is stopped the same way.

use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use tokio::process::Command;

use crate::sandbox::Exec;
use crate::sys::is_executable;

/// The characters that make a line need a shell, wherever they stand (inside quotes too: a
/// line with one goes to `sh`, which is never wrong, only slower): expansions (`$`, `` ` ``,
/// `~`, globs, braces), operators (`;`, `&`, `|`, `<`, `>`, parentheses), comments, escapes
/// and line breaks. GNU make's list, less `"` and `'`, which `shell-words` reads.
const SHELL_CHARS: &[char] = &[
    '#', ';', '&', '|', '<', '>', '(', ')', '{', '}', '$', '`', '\\', '*', '?', '[', ']', '~', '!',
    '^', '\n', '\r',
];

/// Words that are the shell's own when they come first (special builtins, builtins with no
/// program of the same name, and keywords): a line starting with one goes to `sh`.
const SHELL_WORDS: &[&str] = &[
    ".", ":", "alias", "bg", "break", "case", "cd", "command", "continue", "do", "done", "elif",
    "else", "esac", "eval", "exec", "exit", "export", "fc", "fg", "fi", "for", "getopts", "hash",
    "if", "jobs", "local", "read", "readonly", "return", "set", "shift", "source", "then", "times",
    "trap", "type", "ulimit", "umask", "unalias", "unset", "until", "wait", "while",
];

/// The words of `line` when it needs no shell to run, the program first; `None` when it does
/// (or is empty, or its quotes do not close: `sh` says what is wrong with it).
pub fn direct_words(line: &str) -> Option<Vec<String>> {
    if line.contains(SHELL_CHARS) {
        return None;
    }
    let words = shell_words::split(line).ok()?;
    let program = words.first()?;
    if program.is_empty() || program.contains('=') || SHELL_WORDS.contains(&program.as_str()) {
        return None;
    }
    Some(words)
}

/// The command that runs `line` in `dir` with the child's `PATH` (`path_var`): its program
/// directly ([`direct_words`]) or `sh -c line`. A program that is not there is an error that
/// says so, as `sh` would have said on stderr.
pub fn command(line: &str, dir: &Path, path_var: Option<&OsStr>) -> io::Result<Command> {
    std_command(line, dir, path_var).map(Command::from)
}

/// [`command`], as the standard library's command.
pub fn std_command(
    line: &str,
    dir: &Path,
    path_var: Option<&OsStr>,
) -> io::Result<std::process::Command> {
    use std::os::unix::process::CommandExt;
    let exec = resolve(line, dir, path_var)?;
    let mut cmd = std::process::Command::new(exec.program);
    cmd.arg0(exec.arg0).args(exec.args);
    Ok(cmd)
}

/// What runs `line` in `dir` with the child's `PATH` (`path_var`): its program found
/// ([`direct_words`]), or `sh -c line`; for [`std_command`], and for the sandbox, which execs
/// it in its own place ([`crate::sandbox_main`]).
pub fn resolve(line: &str, dir: &Path, path_var: Option<&OsStr>) -> io::Result<Exec> {
    let Some(words) = direct_words(line) else {
        return Ok(Exec {
            program: find_program("sh", path_var, dir).unwrap_or("/bin/sh".into()),
            arg0: "sh".into(),
            args: vec!["-c".into(), line.into()],
        });
    };
    let (program, args) = words.split_first().expect("direct_words gives a program");
    let path = find_program(program, path_var, dir).ok_or_else(|| {
        if program.contains('/') && dir.join(program).is_file() {
            return io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "`{program}` was found but cannot be run (not executable: `chmod +x` it, or start it with `sh {program}`)"
                ),
            );
        }
        if program.starts_with('/') {
            return io::Error::new(
                io::ErrorKind::NotFound,
                format!("no executable file `{program}`"),
            );
        }
        let where_ = if program.contains('/') {
            format!("in {}", dir.display())
        } else {
            "in any directory of PATH".to_owned()
        };
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("no executable `{program}` {where_}"),
        )
    })?;
    // As a shell would: the program sees the name it was called by.
    Ok(Exec {
        program: path,
        arg0: program.clone(),
        args: args.to_vec(),
    })
}

/// The file `execvp` would run for `program` with the child's `PATH`, as an absolute path.
///
/// The standard library starts a child with `posix_spawn` (a `vfork`-like clone that copies
/// nothing) only when it need not search a `PATH` that differs from ralph's own; the agent's
/// `PATH` always does (ralph's directory comes first), so a bare name would make every spawn a
/// full `fork` of the multi-threaded process and a `PATH` search in the child. Searching here,
/// the same way, keeps which program runs unchanged. Relative entries (an empty one means `.`)
/// and a program with a `/` in it are taken from `dir`, the child's working directory.
///
/// The answer for the last program, `PATH` and directory is kept (the loop asks the same every
/// iteration: ten failed `stat` calls on a typical `PATH`) and used while the file is there.
fn find_program(program: &str, path_var: Option<&OsStr>, dir: &Path) -> Option<PathBuf> {
    type Found = (String, std::ffi::OsString, PathBuf, PathBuf);
    static LAST: Mutex<Option<Found>> = Mutex::new(None);
    if program.contains('/') {
        let path = dir.join(program);
        return is_executable(&path).then_some(path);
    }
    let path_var = path_var.unwrap_or(OsStr::new("/bin:/usr/bin"));
    let mut last = LAST.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((p, v, d, found)) = last.as_ref()
        && p == program
        && v == path_var
        && d == dir
        && is_executable(found)
    {
        return Some(found.clone());
    }
    let found = std::env::split_paths(path_var)
        .map(|entry| dir.join(entry).join(program))
        .find(|candidate| is_executable(candidate))?;
    *last = Some((
        program.to_owned(),
        path_var.to_owned(),
        dir.to_owned(),
        found.clone(),
    ));
    Some(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Option<Vec<String>> {
        direct_words(line)
    }

    fn owned(words: &[&str]) -> Option<Vec<String>> {
        Some(words.iter().map(|&w| w.to_owned()).collect())
    }

    #[test]
    fn plain_and_quoted_words_run_without_a_shell() {
        assert_eq!(words("claude -p"), owned(&["claude", "-p"]));
        assert_eq!(
            words("agent --say 'two words' \"and three more\"  x"),
            owned(&["agent", "--say", "two words", "and three more", "x"])
        );
        assert_eq!(words("a ''"), owned(&["a", ""]));
        assert_eq!(words("./bin/agent --x=1"), owned(&["./bin/agent", "--x=1"]));
    }

    #[test]
    fn anything_the_shell_would_act_on_goes_to_sh() {
        for line in [
            "a; b",
            "a && b",
            "a | b",
            "a > out",
            "a < in",
            "echo $HOME",
            "echo \"$HOME\"",
            "echo `id`",
            "ls *.rs",
            "a [x]",
            "~/bin/agent",
            "a # comment",
            "a \\ b",
            "(a)",
            "a\nb",
            "FOO=1 agent",
            "cd sub",
            "exec agent",
            "a 'unclosed",
            "",
            "   ",
            "'' a",
        ] {
            assert_eq!(direct_words(line), None, "{line:?}");
        }
    }

    #[test]
    fn a_missing_program_is_an_error_that_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let err = command(
            "no-such-agent-xyz --flag",
            dir.path(),
            Some(OsStr::new("/bin")),
        )
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert_eq!(
            err.to_string(),
            "no executable `no-such-agent-xyz` in any directory of PATH"
        );
        let err = command("./agent", dir.path(), None).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("no executable `./agent` in {}", dir.path().display())
        );
        let err = command("/no/such/agent", dir.path(), None).unwrap_err();
        assert_eq!(err.to_string(), "no executable file `/no/such/agent`");
    }

    #[test]
    fn a_program_is_found_on_the_childs_path_relative_entries_from_its_directory() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        let agent = dir.path().join("bin/agent");
        std::fs::write(&agent, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
        let found = find_program("agent", Some(OsStr::new("/nonexistent:bin")), dir.path());
        assert_eq!(found, Some(dir.path().join("bin").join("agent")));
        assert_eq!(
            find_program("bin/agent", None, dir.path()),
            Some(dir.path().join("bin/agent"))
        );
    }
}
