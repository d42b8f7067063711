//! The agent's sandbox: a Landlock ruleset applied by a small process of ralph's own, which
//! then execs the agent in its place.
//!
//! Landlock (Linux 5.13 and later) lets any process restrict itself, and everything it starts
//! after, to the files it names: with no privilege, no `unsafe` and no `pre_exec` hook. ralph
//! starts `ralph-sandbox` (installed beside `ralph`; `ralph __sandbox` where it is not) where it
//! would start the agent (same process group, pipes, directory and environment), with the
//! ruleset ([`Policy`]) in [`POLICY_ENV`]. [`main`] applies the ruleset to itself and execs the
//! agent's program and arguments, as ralph resolved them from its command line ([`Exec`]): the
//! agent, its tools and whatever they start can then only
//!
//! - write (create, change, remove, rename, truncate) beneath the [`Policy::write`] paths;
//! - read and execute beneath the [`Policy::read`] paths (and the write paths);
//! - connect over TCP to the [`Policy::ports`] only, when given and the kernel can (ABI 4);
//! - signal processes inside the sandbox only, where the kernel can (ABI 6): not ralph.
//!
//! Everything else on the file system is refused with `EACCES` ("Permission denied"). A path
//! that does not exist when the ruleset is made is left out (Landlock opens each one).
//!
//! The [`Exec`] comes one of two ways. A command known when the process starts (a
//! `test_command`) is in [`COMMAND_ENV`]. An agent's process is started ahead of time, while
//! the iteration before it is checkpointed and its prompt built, so that the exec it costs is
//! not between two agents: it applies the ruleset, then waits for a [`Start`] on its stdin (the
//! exec, this start's environment, and whether the agent reads the rest of the pipe or
//! `/dev/null`), and execs the agent the moment it comes. End of file instead (the iteration
//! ended the run) and it ends, having run nothing.
//!
//! Whether the kernel offers Landlock at all is [`support`]: asked once, by a thread that
//! restricts only itself and ends. The rest of ralph never runs under the ruleset.
//!
//! This crate is std and `landlock` only, and `ralph-sandbox` links nothing else: a small
//! binary starts in a fraction of the time of ralph's.

use std::borrow::Cow;
use std::io;
use std::path::PathBuf;

/// The environment variable that carries the [`Policy`] to `ralph-sandbox` (or `ralph
/// __sandbox`).
pub const POLICY_ENV: &str = "RALPH_SANDBOX";
/// The environment variable that carries the agent's program and arguments ([`Exec`]) to
/// `ralph-sandbox` (or `ralph __sandbox`).
pub const COMMAND_ENV: &str = "RALPH_SANDBOX_COMMAND";
/// The small binary that applies the sandbox, installed beside `ralph`.
pub const HELPER: &str = "ralph-sandbox";
/// For tests only: the Landlock ABI to pretend the kernel offers (`0`: none). Lets a test see
/// what a kernel without Landlock gives, on one with it. Documented in docs/sandbox.md.
pub const TEST_ABI_ENV: &str = "RALPH_SANDBOX_TEST_ABI";

/// What the sandboxed process may reach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// Written (and read, and executed) beneath these.
    pub write: Vec<PathBuf>,
    /// Read and executed beneath these.
    pub read: Vec<PathBuf>,
    /// The only TCP ports it may connect to; `None`: any.
    pub ports: Option<Vec<u16>>,
    /// Refuse to run the agent when the kernel cannot enforce the ruleset.
    pub required: bool,
}

impl Policy {
    /// The policy as one environment value: a line per rule (`w PATH`, `r PATH`, `p PORT`,
    /// `required`). A path with a line break in it cannot be said and is left out (never
    /// widening: it is simply not allowed).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let mut paths = |tag: &str, paths: &[PathBuf]| {
            for p in paths {
                let p = p.to_string_lossy();
                if !p.contains(['\n', '\r']) {
                    out.push_str(&format!("{tag} {p}\n"));
                }
            }
        };
        paths("w", &self.write);
        paths("r", &self.read);
        if let Some(ports) = &self.ports {
            out.push_str("p\n");
            for port in ports {
                out.push_str(&format!("p {port}\n"));
            }
        }
        if self.required {
            out.push_str("required\n");
        }
        out
    }

    /// The policy [`Policy::encode`] wrote; `None` if the text is not one.
    pub fn decode(text: &str) -> Option<Policy> {
        let mut policy = Policy::default();
        for line in text.lines() {
            match line.split_once(' ') {
                Some(("w", path)) => policy.write.push(path.into()),
                Some(("r", path)) => policy.read.push(path.into()),
                Some(("p", port)) => policy
                    .ports
                    .get_or_insert_with(Vec::new)
                    .push(port.parse().ok()?),
                None if line == "p" => {
                    policy.ports.get_or_insert_with(Vec::new);
                }
                None if line == "required" => policy.required = true,
                _ => return None,
            }
        }
        Some(policy)
    }
}

/// Whether this kernel can sandbox the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    /// Landlock is there, at this ABI version (the kernel's own, even if newer than ralph
    /// knows: rights it does not know are simply not asked for).
    Available {
        /// The kernel's Landlock ABI version (1 from Linux 5.13, ... 7 from Linux 6.15).
        abi: i32,
    },
    /// It is not, and why, in words for the user.
    Missing {
        /// Why, and what would give it.
        why: String,
    },
}

/// Whether (and at which ABI) the kernel offers Landlock; asked once per process.
pub fn support() -> Support {
    static SUPPORT: std::sync::OnceLock<Support> = std::sync::OnceLock::new();
    SUPPORT.get_or_init(probe).clone()
}

fn probe() -> Support {
    if let Some(abi) = std::env::var(TEST_ABI_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<i32>().ok())
    {
        return if abi > 0 {
            Support::Available { abi }
        } else {
            Support::Missing {
                why: format!(
                    "{TEST_ABI_ENV}={abi} stands in for a kernel without Landlock (a test's setting)"
                ),
            }
        };
    }
    imp::probe()
}

/// What the sandboxed process execs: the program (a path), the name it is called by, and its
/// arguments. ralph resolves the agent's command line into this (run directly, or `sh -c`) as
/// it would start it unsandboxed, so the small process searches nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exec {
    /// The file to run.
    pub program: PathBuf,
    /// `argv[0]`: the name it is called by.
    pub arg0: String,
    /// The rest of its arguments.
    pub args: Vec<String>,
}

impl Exec {
    /// As one environment value: the program, `argv[0]` and each argument on a line of its own,
    /// a backslash and a line break in them written `\\` and `\n`.
    pub fn encode(&self) -> String {
        encode_words(self.words())
    }

    /// Its words, as [`Exec::encode`] and [`Start::header`] write them: the program, `argv[0]`,
    /// then each argument.
    fn words(&self) -> impl Iterator<Item = Cow<'_, str>> {
        [
            self.program.to_string_lossy(),
            Cow::from(self.arg0.as_str()),
        ]
        .into_iter()
        .chain(self.args.iter().map(|arg| Cow::from(arg.as_str())))
    }

    /// What [`Exec::encode`] wrote; `None` if the text is not one.
    pub fn decode(text: &str) -> Option<Exec> {
        Exec::from_words(decode_words(text)?)
    }

    fn from_words(words: Vec<String>) -> Option<Exec> {
        let mut words = words.into_iter();
        Some(Exec {
            program: PathBuf::from(words.next()?),
            arg0: words.next()?,
            args: words.collect(),
        })
    }
}

/// Words on lines of their own, a backslash and a line break in them written `\\` and `\n`.
fn encode_words<'a>(words: impl IntoIterator<Item = Cow<'a, str>>) -> String {
    words
        .into_iter()
        .map(|word| word.replace('\\', "\\\\").replace('\n', "\\n"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// What [`encode_words`] wrote; `None` if the text is not that.
fn decode_words(text: &str) -> Option<Vec<String>> {
    text.split('\n').map(unescape).collect()
}

fn unescape(word: &str) -> Option<String> {
    let mut out = String::with_capacity(word.len());
    let mut chars = word.chars();
    while let Some(c) = chars.next() {
        out.push(match c {
            '\\' => match chars.next()? {
                'n' => '\n',
                '\\' => '\\',
                _ => return None,
            },
            c => c,
        });
    }
    Some(out)
}

/// What the agent's stdin is, when a helper started ahead of time starts it ([`Start`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentStdin {
    /// The rest of the helper's own stdin, after the header: the prompt, or a conversation.
    Rest,
    /// `/dev/null`.
    Null,
}

/// What tells a helper started ahead of time (without [`COMMAND_ENV`]) to start the agent,
/// sent on its stdin as a header ([`Start::header`]): the [`Exec`], the environment of this
/// start (set on top of the helper's own), and what the agent's stdin is.
///
/// The header is its length (4 bytes, big-endian) then that many bytes, so the helper reads
/// exactly the header ([`Start::read`]) and leaves whatever follows on the pipe (the prompt)
/// to the agent. Nothing at all on its stdin (end of file at once) means the start it was
/// made for did not happen: it ends, having run nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Start {
    /// What to exec.
    pub exec: Exec,
    /// Set in the agent's environment, in order (a later one wins).
    pub env: Vec<(String, String)>,
    /// The agent's stdin.
    pub stdin: AgentStdin,
}

impl Start {
    /// The longest header a helper accepts: more is not a header of ralph's.
    pub const MAX_LEN: usize = 64 << 20;

    /// The bytes that tell the helper to go: the length, then the start's words
    /// ([`Exec::encode`]'s escaping): the stdin (`rest` or `null`), the number of environment
    /// entries, each name and value, then the exec's program, `argv[0]` and arguments.
    pub fn header(&self) -> Vec<u8> {
        let count = self.env.len().to_string();
        let stdin = match self.stdin {
            AgentStdin::Rest => "rest",
            AgentStdin::Null => "null",
        };
        let words = [stdin, count.as_str()]
            .into_iter()
            .chain(self.env.iter().flat_map(|(k, v)| [k.as_str(), v.as_str()]))
            .map(Cow::from)
            .chain(self.exec.words());
        let payload = encode_words(words);
        let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
        let mut out = Vec::with_capacity(4 + payload.len());
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(payload.as_bytes());
        out
    }

    /// Reads one header from `from`, not a byte more (`read_exact` of its length, then of it:
    /// give it an unbuffered reader); `None` at end of file before its first byte (the start
    /// did not happen).
    pub fn read(from: &mut impl io::Read) -> io::Result<Option<Start>> {
        let mut len = [0u8; 4];
        let mut got = 0;
        while got < len.len() {
            match from.read(&mut len[got..]) {
                Ok(0) if got == 0 => return Ok(None),
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let len = u32::from_be_bytes(len) as usize;
        let bad = || io::Error::new(io::ErrorKind::InvalidData, "not a start header of ralph's");
        if len > Start::MAX_LEN {
            return Err(bad());
        }
        let mut payload = vec![0u8; len];
        from.read_exact(&mut payload)?;
        let text = String::from_utf8(payload).map_err(|_| bad())?;
        Start::from_words(decode_words(&text).ok_or_else(bad)?)
            .ok_or_else(bad)
            .map(Some)
    }

    fn from_words(words: Vec<String>) -> Option<Start> {
        let mut words = words.into_iter();
        let stdin = match words.next()?.as_str() {
            "rest" => AgentStdin::Rest,
            "null" => AgentStdin::Null,
            _ => return None,
        };
        let count: usize = words.next()?.parse().ok()?;
        let mut env = Vec::with_capacity(count.min(4096));
        for _ in 0..count {
            env.push((words.next()?, words.next()?));
        }
        Some(Start {
            exec: Exec::from_words(words.collect())?,
            env,
            stdin,
        })
    }
}

/// `ralph-sandbox` (and `ralph __sandbox`): applies the [`Policy`] in [`POLICY_ENV`] to this
/// process, then execs the agent in its place: the [`Exec`] in [`COMMAND_ENV`] when it is set,
/// else the one a [`Start`] header on stdin names, once it comes (started ahead of time, it
/// has the ruleset made by then). End of file instead of a header: it ends (0), having run
/// nothing. Returns only then or on failure, with the exit code: 126 when the sandbox could
/// not be applied or the header was not one (nothing ran), 127 when the program could not be
/// started. Says why on stderr, which ralph shows as the agent's.
pub fn main() -> i32 {
    let Some(policy) = std::env::var(POLICY_ENV)
        .ok()
        .and_then(|text| Policy::decode(&text))
    else {
        eprintln!("ralph: sandbox: no readable {POLICY_ENV}; it is started by `ralph run` only");
        return 126;
    };
    // First, so that a helper started ahead of time has it done before it is told to go.
    let applied = apply(&policy);
    let start = match std::env::var_os(COMMAND_ENV) {
        Some(text) => match text.to_str().and_then(Exec::decode) {
            Some(exec) => Start {
                exec,
                env: Vec::new(),
                stdin: AgentStdin::Rest,
            },
            None => {
                eprintln!(
                    "ralph: sandbox: no readable {COMMAND_ENV}; it is started by `ralph run` only"
                );
                return 126;
            }
        },
        None => match read_start() {
            Ok(Some(start)) => start,
            // The start it was made for did not happen.
            Ok(None) => return 0,
            Err(e) => {
                eprintln!("ralph: the agent was not started: its start could not be read: {e}");
                return 126;
            }
        },
    };
    match applied {
        Ok(Applied::Enforced) => {}
        Ok(Applied::NotEnforced(why)) if !policy.required => {
            eprintln!("ralph: warning: the agent runs unsandboxed: {why}");
        }
        Ok(Applied::NotEnforced(why)) => {
            eprintln!(
                "ralph: the agent was not started: `sandbox: required` and {why}. Set `sandbox: true` to run it unsandboxed where the kernel cannot"
            );
            return 126;
        }
        Err(e) => {
            eprintln!("ralph: the agent was not started: its sandbox could not be set up: {e}");
            return 126;
        }
    }
    use std::os::unix::process::CommandExt;
    let Start { exec, env, stdin } = start;
    let mut cmd = std::process::Command::new(&exec.program);
    cmd.arg0(&exec.arg0)
        .args(&exec.args)
        .envs(env)
        .env_remove(POLICY_ENV)
        .env_remove(COMMAND_ENV);
    if stdin == AgentStdin::Null {
        cmd.stdin(std::process::Stdio::null());
    }
    let e = cmd.exec();
    eprintln!("ralph: could not start `{}`: {e}", exec.program.display());
    127
}

/// The [`Start`] on stdin, read unbuffered: `Stdin`'s own buffer would take the prompt that
/// follows the header away from the agent. A duplicate of the descriptor, closed at the exec.
fn read_start() -> io::Result<Option<Start>> {
    use std::os::fd::AsFd as _;
    let mut raw = std::fs::File::from(io::stdin().as_fd().try_clone_to_owned()?);
    Start::read(&mut raw)
}

/// How applying a policy went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// The ruleset holds, for this process and everything it starts.
    Enforced,
    /// The kernel could not enforce it, and why.
    NotEnforced(String),
}

/// Restricts this process (its calling thread, and what it execs) to `policy`.
pub fn apply(policy: &Policy) -> io::Result<Applied> {
    // The ruleset's own status says whether the kernel enforced it: no probe needed, unless a
    // test stands in for a kernel without Landlock.
    if std::env::var_os(TEST_ABI_ENV).is_some()
        && let Support::Missing { why } = support()
    {
        return Ok(Applied::NotEnforced(why));
    }
    imp::apply(policy)
}

#[cfg(target_os = "linux")]
mod imp {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, LandlockStatus, NetPort,
        Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
    };

    use super::{Applied, Policy, Support};

    /// The newest ABI whose rights ralph asks for; an older kernel gets what it has (the
    /// crate's best effort), a newer one no more. Not V9: its `ResolveUnix` would cut the
    /// agent off the UNIX sockets it uses (a language server, a database) with no rule to
    /// give them back by.
    const ABI_USED: ABI = ABI::V6;

    pub(super) fn probe() -> Support {
        // A thread of its own restricts itself (a right no process uses: making block
        // devices) and ends; the status it gets back says what the kernel offers.
        let status = std::thread::spawn(|| {
            Ruleset::default()
                .handle_access(AccessFs::MakeBlock)
                .and_then(|r| r.create())
                .and_then(|r| r.restrict_self())
                .map(|s| s.landlock)
        })
        .join();
        match status {
            Ok(Ok(LandlockStatus::Available {
                effective_abi,
                kernel_abi,
            })) => Support::Available {
                abi: kernel_abi.unwrap_or(effective_abi as i32),
            },
            Ok(Ok(LandlockStatus::NotEnabled)) => Support::Missing {
                why: "this kernel has Landlock but it is not enabled (add `landlock` to the `lsm=` kernel parameter)".into(),
            },
            Ok(Ok(LandlockStatus::NotImplemented)) => Support::Missing {
                why: "this kernel has no Landlock (it needs Linux 5.13 or later, built with CONFIG_SECURITY_LANDLOCK)".into(),
            },
            Ok(Err(e)) => Support::Missing {
                why: format!("Landlock could not be used: {e}"),
            },
            Err(_) => Support::Missing {
                why: "Landlock could not be probed".into(),
            },
        }
    }

    pub(super) fn apply(policy: &Policy) -> std::io::Result<Applied> {
        let err = |e: landlock::RulesetError| std::io::Error::other(e.to_string());
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(ABI_USED))
            .map_err(err)?
            .scope(Scope::Signal)
            .map_err(err)?;
        if policy.ports.is_some() {
            ruleset = ruleset.handle_access(AccessNet::ConnectTcp).map_err(err)?;
        }
        let mut created = ruleset
            .create()
            .map_err(err)?
            .add_rules(path_beneath_rules(
                &policy.read,
                AccessFs::from_read(ABI_USED) | AccessFs::IoctlDev,
            ))
            .map_err(err)?
            .add_rules(path_beneath_rules(
                &policy.write,
                AccessFs::from_all(ABI_USED),
            ))
            .map_err(err)?;
        for &port in policy.ports.iter().flatten() {
            created = created
                .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
                .map_err(err)?;
        }
        let status = created.restrict_self().map_err(err)?;
        Ok(match status.ruleset {
            RulesetStatus::FullyEnforced | RulesetStatus::PartiallyEnforced => Applied::Enforced,
            RulesetStatus::NotEnforced => {
                Applied::NotEnforced("the kernel did not enforce the ruleset (no Landlock)".into())
            }
        })
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use super::{Applied, Policy, Support};

    pub(super) fn probe() -> Support {
        Support::Missing {
            why: "the sandbox uses Landlock, which only Linux has".into(),
        }
    }

    pub(super) fn apply(_: &Policy) -> std::io::Result<Applied> {
        Ok(Applied::NotEnforced(
            "the sandbox uses Landlock, which only Linux has".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_survives_its_encoding_and_a_path_with_a_line_break_is_left_out() {
        let policy = Policy {
            write: vec!["/p r o j".into(), "/tmp/x".into()],
            read: vec!["/usr".into()],
            ports: Some(vec![443, 8080]),
            required: true,
        };
        assert_eq!(Policy::decode(&policy.encode()), Some(policy));
        let no_ports = Policy {
            ports: Some(vec![]),
            ..Policy::default()
        };
        assert_eq!(Policy::decode(&no_ports.encode()), Some(no_ports));
        let odd = Policy {
            write: vec!["/a\nr /".into()],
            ..Policy::default()
        };
        assert_eq!(Policy::decode(&odd.encode()), Some(Policy::default()));
        assert_eq!(Policy::decode("x /"), None);
    }

    #[test]
    fn an_exec_survives_its_encoding_line_breaks_and_backslashes_included() {
        let exec = Exec {
            program: "/bin/sh".into(),
            arg0: "sh".into(),
            args: vec![
                "-c".into(),
                "printf 'a\\nb' \\\n && echo \\n".into(),
                String::new(),
            ],
        };
        assert_eq!(Exec::decode(&exec.encode()), Some(exec));
        let bare = Exec {
            program: "/usr/bin/agent".into(),
            arg0: "agent".into(),
            args: vec![],
        };
        assert_eq!(Exec::decode(&bare.encode()), Some(bare));
        assert_eq!(Exec::decode("/bin/x"), None);
        assert_eq!(Exec::decode("/bin/x\nx\nbad \\q"), None);
    }

    /// A reader that hands out `data` in pieces ending at `cuts` (and at its end), as a pipe
    /// may; what it has not handed out is what the agent would read.
    struct Pieces {
        data: Vec<u8>,
        at: usize,
        cuts: Vec<usize>,
    }

    impl io::Read for Pieces {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let end = self
                .cuts
                .iter()
                .copied()
                .find(|&c| c > self.at)
                .unwrap_or(self.data.len())
                .min(self.at + buf.len());
            let n = end - self.at;
            buf[..n].copy_from_slice(&self.data[self.at..end]);
            self.at = end;
            Ok(n)
        }
    }

    fn start() -> Start {
        Start {
            exec: Exec {
                program: "/usr/bin/agent".into(),
                arg0: "agent".into(),
                args: vec!["-p".into(), "two\nlines \\ and\n".into(), String::new()],
            },
            env: vec![
                ("RALPH_ITERATION".into(), "3".into()),
                ("ODD".into(), "a\nb\\c".into()),
                ("EMPTY".into(), String::new()),
            ],
            stdin: AgentStdin::Rest,
        }
    }

    #[test]
    fn a_start_is_read_whole_at_every_split_and_the_prompt_after_it_is_left_on_the_pipe() {
        let prompt = b"the prompt\n\x00\x01 and more".to_vec();
        let header = start().header();
        let mut data = header.clone();
        data.extend_from_slice(&prompt);
        let mut ways: Vec<Vec<usize>> = (0..=data.len()).map(|cut| vec![cut]).collect();
        // A byte at a time.
        ways.push((1..data.len()).collect());
        for cuts in ways {
            let mut pipe = Pieces {
                data: data.clone(),
                at: 0,
                cuts: cuts.clone(),
            };
            let read = Start::read(&mut pipe).unwrap();
            assert_eq!(read, Some(start()), "cuts at {cuts:?}");
            assert_eq!(pipe.at, header.len(), "cuts at {cuts:?}");
            assert_eq!(&pipe.data[pipe.at..], prompt.as_slice());
        }
        let null = Start {
            stdin: AgentStdin::Null,
            env: vec![],
            ..start()
        };
        let mut pipe = Pieces {
            data: null.header(),
            at: 0,
            cuts: vec![],
        };
        assert_eq!(Start::read(&mut pipe).unwrap(), Some(null));
    }

    /// The wire format, whole: the length, the stdin, the number of environment entries, each
    /// name and value, then the exec's words as [`Exec::encode`] writes them (one escaping for
    /// both, so the helper reads either with the same code).
    #[test]
    fn a_start_header_is_its_words_then_the_exec_as_encoded_alone() {
        let start = start();
        let payload = "rest\n3\nRALPH_ITERATION\n3\nODD\na\\nb\\\\c\nEMPTY\n\n\
                       /usr/bin/agent\nagent\n-p\ntwo\\nlines \\\\ and\\n\n";
        assert!(payload.ends_with(&format!("EMPTY\n\n{}", start.exec.encode())));
        let mut header = u32::try_from(payload.len()).unwrap().to_be_bytes().to_vec();
        header.extend_from_slice(payload.as_bytes());
        assert_eq!(start.header(), header);
    }

    /// End of file before a header is the start that did not happen; anywhere else, or a
    /// header that is not one, an error.
    #[test]
    fn end_of_file_at_once_is_no_start_and_a_cut_or_bad_header_is_an_error() {
        let read = |data: &[u8]| {
            Start::read(&mut Pieces {
                data: data.to_vec(),
                at: 0,
                cuts: vec![],
            })
        };
        assert_eq!(read(b"").unwrap(), None);
        let header = start().header();
        for cut in 1..header.len() {
            assert!(read(&header[..cut]).is_err(), "cut at {cut}");
        }
        let too_long = u32::try_from(Start::MAX_LEN + 1).unwrap().to_be_bytes();
        assert!(read(&too_long).is_err());
        let words = |text: &str| {
            let mut out = u32::try_from(text.len()).unwrap().to_be_bytes().to_vec();
            out.extend_from_slice(text.as_bytes());
            out
        };
        assert!(read(&words("rest\n0\n/bin/x\nx")).unwrap().is_some());
        assert!(read(&words("pipe\n0\n/bin/x\nx")).is_err());
        assert!(read(&words("rest\n2\nA\n1\n/bin/x\nx")).is_err());
        assert!(read(&words("rest\n0\n/bin/x")).is_err());
    }
}
