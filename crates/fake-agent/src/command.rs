//! Parses one command line's words into a checked [`Command`].
//!
//! Arguments are validated here, at load time, so a bad duration or a misspelt option is a
//! script error with a line number, not a surprise halfway through a test.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::time::Duration;

/// Which output stream a print command writes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// One script command, with its arguments decoded and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `print`, `print-raw`, `eprint`: write text, with a newline unless raw.
    Print {
        stream: Stream,
        text: Vec<u8>,
        newline: bool,
    },
    /// `signal KIND`: print `<ralph>KIND</ralph>` on its own line.
    Signal(&'static str),
    /// `write PATH TEXT` / `append PATH TEXT`.
    Write {
        path: PathBuf,
        text: Vec<u8>,
        append: bool,
    },
    /// `question TEXT [--option A]... [--multi-select] [--default D] [--context C]`.
    Question(Question),
    /// `check N` (`Some(N)`) or `check-all` (`None`).
    Check(Option<usize>),
    /// `save-prompt PATH`.
    SavePrompt(PathBuf),
    /// `save-env PATH`.
    SaveEnv(PathBuf),
    /// `copy SRC DST`.
    Copy { src: PathBuf, dst: PathBuf },
    /// `expect-file PATH [--wait D]`.
    ExpectFile { path: PathBuf, wait: Duration },
    /// `expect-prompt-contains TEXT`.
    ExpectPromptContains(Vec<u8>),
    /// `sleep D`.
    Sleep(Duration),
    /// `exit CODE`.
    Exit(u8),
    /// `no-stdin`: a directive, read before the run starts; does nothing when reached.
    NoStdin,
    /// `ignore-sigterm` / `ignore-sigint`.
    IgnoreSignal(IgnoredSignal),
    /// `spawn-grandchild [D] [--pid-file PATH] [--quiet] [--new-session] [--ignore-sigterm]`.
    SpawnGrandchild {
        lifetime: Duration,
        pid_file: Option<PathBuf>,
        quiet: bool,
        /// In a session (and process group) of its own, as Claude Code's Bash tool runs
        /// every command: out of reach of a signal to our group.
        new_session: bool,
        /// SIGTERM blocked, as a stubborn server has it: only SIGKILL ends it early.
        ignore_sigterm: bool,
    },
    /// `close-stdout`.
    CloseStdout,
    /// `hang`.
    Hang,
    /// `read-line PATH`: one line from stdin (the section needs `no-stdin`), appended to PATH.
    ReadLine(PathBuf),
    /// `flood BYTES [--line-len N] [--signal-at-end]`.
    Flood {
        bytes: u64,
        line_len: usize,
        signal_at_end: bool,
    },
    /// `stream-json FILE [--line-delay D]`.
    StreamFile {
        path: PathBuf,
        line_delay: Option<Duration>,
    },
    /// `run CMD ARGS...` / `run-capture PATH CMD ARGS...`.
    Run {
        capture: Option<PathBuf>,
        program: OsString,
        args: Vec<OsString>,
    },
}

/// What `question` writes to `question.md`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Question {
    /// The question, as markdown.
    pub text: Vec<u8>,
    /// Suggested answers, in order.
    pub options: Vec<Vec<u8>>,
    /// Whether the answer may pick several options.
    pub multi_select: bool,
    /// The agent's best guess.
    pub default: Option<Vec<u8>>,
    /// Background shown under the question.
    pub context: Option<Vec<u8>>,
}

/// A signal the script can make the fake shrug off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IgnoredSignal {
    /// SIGTERM.
    Term,
    /// SIGINT.
    Int,
}

/// The command words of a line, consumed front to back.
struct Words {
    name: String,
    rest: VecDeque<Vec<u8>>,
}

impl Words {
    fn next(&mut self, what: &str) -> Result<Vec<u8>, String> {
        self.rest
            .pop_front()
            .ok_or_else(|| format!("'{}' needs {what}", self.name))
    }

    fn next_str(&mut self, what: &str) -> Result<String, String> {
        String::from_utf8(self.next(what)?).map_err(|_| format!("{what} must be UTF-8"))
    }

    fn path(&mut self) -> Result<PathBuf, String> {
        self.next("a path").map(to_path)
    }

    /// Everything left, joined with single spaces, as `echo` would.
    fn text(&mut self) -> Vec<u8> {
        let words: Vec<_> = self.rest.drain(..).collect();
        words.join(&b' ')
    }

    fn done(&self) -> Result<(), String> {
        match self.rest.front() {
            None => Ok(()),
            Some(extra) => Err(format!(
                "'{}' got an unexpected argument '{}'; quote text with spaces",
                self.name,
                String::from_utf8_lossy(extra)
            )),
        }
    }

    /// Removes `--flag [value]` options, leaving positional words in place.
    fn options(&mut self, valued: &[&str], switches: &[&str]) -> Result<Options, String> {
        let mut options = Options::default();
        let mut positional = VecDeque::new();
        while let Some(word) = self.rest.pop_front() {
            let flag = std::str::from_utf8(&word).unwrap_or("");
            if valued.contains(&flag) {
                let value = self.next(&format!("a value after {flag}"))?;
                options.values.push((flag.to_owned(), value));
            } else if switches.contains(&flag) {
                options.switches.push(flag.to_owned());
            } else if flag.starts_with("--") {
                return Err(format!("'{}' has no option {flag}", self.name));
            } else {
                positional.push_back(word);
            }
        }
        self.rest = positional;
        Ok(options)
    }
}

#[derive(Default)]
struct Options {
    values: Vec<(String, Vec<u8>)>,
    switches: Vec<String>,
}

impl Options {
    fn all(&self, flag: &str) -> Vec<Vec<u8>> {
        self.values
            .iter()
            .filter(|(f, _)| f == flag)
            .map(|(_, v)| v.clone())
            .collect()
    }

    fn last(&self, flag: &str) -> Option<Vec<u8>> {
        self.all(flag).pop()
    }

    fn has(&self, switch: &str) -> bool {
        self.switches.iter().any(|s| s == switch)
    }
}

fn to_path(bytes: Vec<u8>) -> PathBuf {
    PathBuf::from(OsString::from_vec(bytes))
}

pub fn parse_command(words: Vec<Vec<u8>>) -> Result<Command, String> {
    let mut rest: VecDeque<_> = words.into();
    let name = String::from_utf8_lossy(&rest.pop_front().unwrap_or_default()).into_owned();
    let mut w = Words { name, rest };
    let print = |w: &mut Words, stream, newline| Command::Print {
        stream,
        text: w.text(),
        newline,
    };
    let command = match w.name.as_str() {
        "print" => print(&mut w, Stream::Stdout, true),
        "print-raw" => print(&mut w, Stream::Stdout, false),
        "eprint" => print(&mut w, Stream::Stderr, true),
        "eprint-raw" => print(&mut w, Stream::Stderr, false),
        "signal" => {
            let kind = w.next_str("a signal kind (DONE, QUESTION or GUTTER)")?;
            let kind = match kind.as_str() {
                "DONE" => "DONE",
                "QUESTION" => "QUESTION",
                "GUTTER" => "GUTTER",
                other => {
                    return Err(format!(
                        "unknown signal '{other}'; use DONE, QUESTION or GUTTER \
                         (print-raw can print anything else)"
                    ));
                }
            };
            Command::Signal(kind)
        }
        "write" | "append" => {
            let path = w.path()?;
            Command::Write {
                path,
                text: w.text(),
                append: w.name == "append",
            }
        }
        "question" => {
            let o = w.options(&["--option", "--default", "--context"], &["--multi-select"])?;
            Command::Question(Question {
                text: w.text(),
                options: o.all("--option"),
                multi_select: o.has("--multi-select"),
                default: o.last("--default"),
                context: o.last("--context"),
            })
        }
        "check" => {
            let n = w.next_str("a checkbox number")?;
            match n.parse::<usize>() {
                Ok(n) if n >= 1 => Command::Check(Some(n)),
                _ => return Err(format!("'check' needs a number from 1 up, got '{n}'")),
            }
        }
        "check-all" => Command::Check(None),
        "save-prompt" => Command::SavePrompt(w.path()?),
        "save-env" => Command::SaveEnv(w.path()?),
        "copy" => Command::Copy {
            src: w.path()?,
            dst: w.path()?,
        },
        "expect-file" => {
            let o = w.options(&["--wait"], &[])?;
            let wait = o.last("--wait").map(|d| parse_duration(&d)).transpose()?;
            Command::ExpectFile {
                path: w.path()?,
                wait: wait.unwrap_or_default(),
            }
        }
        "expect-prompt-contains" => Command::ExpectPromptContains(w.text()),
        "sleep" => Command::Sleep(parse_duration(&w.next("a duration like 150ms or 2s")?)?),
        "exit" => {
            let code = w.next_str("an exit code")?;
            Command::Exit(
                code.parse()
                    .map_err(|_| format!("exit code must be 0 to 255, got '{code}'"))?,
            )
        }
        "no-stdin" => Command::NoStdin,
        "ignore-sigterm" => Command::IgnoreSignal(IgnoredSignal::Term),
        "ignore-sigint" => Command::IgnoreSignal(IgnoredSignal::Int),
        "spawn-grandchild" => {
            let o = w.options(
                &["--pid-file"],
                &["--quiet", "--new-session", "--ignore-sigterm"],
            )?;
            let lifetime = match w.rest.pop_front() {
                Some(d) => parse_duration(&d)?,
                None => Duration::from_secs(300),
            };
            Command::SpawnGrandchild {
                lifetime,
                pid_file: o.last("--pid-file").map(to_path),
                quiet: o.has("--quiet"),
                new_session: o.has("--new-session"),
                ignore_sigterm: o.has("--ignore-sigterm"),
            }
        }
        "close-stdout" => Command::CloseStdout,
        "hang" => Command::Hang,
        "read-line" => Command::ReadLine(to_path(w.next("a file to append the line to")?)),
        "flood" => {
            let o = w.options(&["--line-len"], &["--signal-at-end"])?;
            let bytes = parse_size(&w.next("a byte count like 65536 or 1M")?)?;
            let line_len = match o.last("--line-len") {
                Some(n) => match String::from_utf8_lossy(&n).parse::<usize>() {
                    Ok(n) if n >= 1 => n,
                    _ => return Err("--line-len needs a number from 1 up".into()),
                },
                None => 100,
            };
            Command::Flood {
                bytes,
                line_len,
                signal_at_end: o.has("--signal-at-end"),
            }
        }
        "stream-json" => {
            let o = w.options(&["--line-delay"], &[])?;
            let line_delay = o
                .last("--line-delay")
                .map(|d| parse_duration(&d))
                .transpose()?;
            Command::StreamFile {
                path: w.path()?,
                line_delay,
            }
        }
        "run" | "run-capture" => {
            let capture = if w.name == "run-capture" {
                Some(w.path()?)
            } else {
                None
            };
            let program = OsString::from_vec(w.next("a program to run")?);
            let args = w.rest.drain(..).map(OsString::from_vec).collect();
            Command::Run {
                capture,
                program,
                args,
            }
        }
        other => return Err(format!("unknown command '{other}'")),
    };
    w.done()?;
    Ok(command)
}

/// Parses `150ms`, `2s`, `1.5s` or `1m`; a bare number is seconds.
pub fn parse_duration(word: &[u8]) -> Result<Duration, String> {
    let text = String::from_utf8_lossy(word);
    let bad = || format!("'{text}' is not a duration; write e.g. 150ms, 2s or 1m");
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().map_err(|_| bad())?;
    let seconds = match unit {
        "ms" => number / 1000.0,
        "s" | "" => number,
        "m" => number * 60.0,
        _ => return Err(bad()),
    };
    Duration::try_from_secs_f64(seconds).map_err(|_| bad())
}

/// Parses a byte count with an optional binary `K`, `M` or `G` suffix.
fn parse_size(word: &[u8]) -> Result<u64, String> {
    let text = String::from_utf8_lossy(word);
    let (number, scale) = match text.as_bytes().last() {
        Some(b'K') => (&text[..text.len() - 1], 1 << 10),
        Some(b'M') => (&text[..text.len() - 1], 1 << 20),
        Some(b'G') => (&text[..text.len() - 1], 1 << 30),
        _ => (&text[..], 1),
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("'{text}' is not a byte count; write e.g. 65536, 64K or 1M"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lex::split_words;

    fn parse(line: &str) -> Result<Command, String> {
        parse_command(split_words(line).unwrap())
    }

    #[test]
    fn commands_parse_their_arguments() {
        let cmds: Vec<Command> = [
            r#"print-raw "\e[2J" x"#,
            r#"question "Which DB?" --option Postgres --option SQLite --default SQLite"#,
            "flood 1M --signal-at-end",
            "spawn-grandchild 2s --pid-file gc.pid --new-session --ignore-sigterm",
            r#"run-capture out.txt ralph answer "use sqlite""#,
            "expect-file .ralph/answer.md --wait 2s",
        ]
        .into_iter()
        .map(|line| parse(line).unwrap())
        .collect();
        assert_eq!(
            cmds[0],
            Command::Print {
                stream: Stream::Stdout,
                text: b"\x1b[2J x".to_vec(),
                newline: false
            }
        );
        assert_eq!(
            cmds[1],
            Command::Question(Question {
                text: b"Which DB?".to_vec(),
                options: vec![b"Postgres".to_vec(), b"SQLite".to_vec()],
                default: Some(b"SQLite".to_vec()),
                ..Question::default()
            })
        );
        assert_eq!(
            cmds[2],
            Command::Flood {
                bytes: 1 << 20,
                line_len: 100,
                signal_at_end: true
            }
        );
        assert_eq!(
            cmds[3],
            Command::SpawnGrandchild {
                lifetime: Duration::from_secs(2),
                pid_file: Some("gc.pid".into()),
                quiet: false,
                new_session: true,
                ignore_sigterm: true
            }
        );
        assert_eq!(
            cmds[4],
            Command::Run {
                capture: Some("out.txt".into()),
                program: "ralph".into(),
                args: vec!["answer".into(), "use sqlite".into()]
            }
        );
        assert_eq!(
            cmds[5],
            Command::ExpectFile {
                path: ".ralph/answer.md".into(),
                wait: Duration::from_secs(2)
            }
        );
    }

    #[test]
    fn bad_arguments_are_errors() {
        for bad in [
            "signal DONE!",
            "exit 256",
            "exit",
            "check 0",
            "sleep 5h",
            "sleep",
            "flood lots",
            "copy only-one",
            "question x --colour red",
            "hang now",
            "write",
            "foo",
        ] {
            assert!(parse(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn durations() {
        let d = |s: &str| parse_duration(s.as_bytes()).unwrap();
        assert_eq!(d("150ms"), Duration::from_millis(150));
        assert_eq!(d("2s"), Duration::from_secs(2));
        assert_eq!(d("1.5s"), Duration::from_millis(1500));
        assert_eq!(d("3"), Duration::from_secs(3));
        assert_eq!(d("1m"), Duration::from_secs(60));
        assert!(parse_duration(b"-1s").is_err());
        assert!(parse_duration(b"ms").is_err());
    }
}
