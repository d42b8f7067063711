//! The agent's sandbox: a Landlock ruleset applied by a small process of ralph's own, which
//! then execs the agent in its place.
//!
//! Landlock (Linux 5.13 and later) lets any process restrict itself, and everything it starts
//! after, to the files it names: with no privilege, no `unsafe` and no `pre_exec` hook. ralph
//! starts `ralph __sandbox` where it would start the agent (same process group, pipes,
//! directory and environment), with the ruleset ([`Policy`]) in [`POLICY_ENV`] and the agent's
//! command line in [`COMMAND_ENV`]. [`main`] applies the ruleset to itself and execs the command
//! line as ralph would have run it ([`command_line::std_command`]): the agent, its tools and
//! whatever they start can then only
//!
//! - write (create, change, remove, rename, truncate) beneath the [`Policy::write`] paths;
//! - read and execute beneath the [`Policy::read`] paths (and the write paths);
//! - connect over TCP to the [`Policy::ports`] only, when given and the kernel can (ABI 4);
//! - signal processes inside the sandbox only, where the kernel can (ABI 6): not ralph.
//!
//! Everything else on the file system is refused with `EACCES` ("Permission denied"). A path
//! that does not exist when the ruleset is made is left out (Landlock opens each one).
//!
//! Whether the kernel offers Landlock at all is [`support`]: asked once, by a thread that
//! restricts only itself and ends. The rest of ralph never runs under the ruleset.

use std::ffi::OsString;
use std::io;
use std::path::PathBuf;

use crate::command_line;

/// The environment variable that carries the [`Policy`] to `ralph __sandbox`.
pub const POLICY_ENV: &str = "RALPH_SANDBOX";
/// The environment variable that carries the agent's command line to `ralph __sandbox`.
pub const COMMAND_ENV: &str = "RALPH_SANDBOX_COMMAND";
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

/// `ralph __sandbox`: applies the [`Policy`] in [`POLICY_ENV`] to this process, then execs the
/// command line in [`COMMAND_ENV`] in its place. Returns only on failure, with the exit code:
/// 126 when the sandbox could not be applied (nothing ran), 127 when the command could not be
/// started. Says why on stderr, which ralph shows as the agent's.
pub fn main() -> i32 {
    let Some(policy) = std::env::var(POLICY_ENV)
        .ok()
        .and_then(|text| Policy::decode(&text))
    else {
        eprintln!("ralph: __sandbox: no readable {POLICY_ENV}; it is started by `ralph run` only");
        return 126;
    };
    let Ok(line) = std::env::var(COMMAND_ENV) else {
        eprintln!("ralph: __sandbox: no {COMMAND_ENV}; it is started by `ralph run` only");
        return 126;
    };
    match apply(&policy) {
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
    let dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let path: Option<OsString> = std::env::var_os("PATH");
    let mut cmd = match command_line::std_command(&line, &dir, path.as_deref()) {
        Ok(cmd) => cmd,
        Err(e) => {
            eprintln!("ralph: {e}");
            return 127;
        }
    };
    cmd.env_remove(POLICY_ENV).env_remove(COMMAND_ENV);
    let e = std::os::unix::process::CommandExt::exec(&mut cmd);
    eprintln!("ralph: could not start `{line}`: {e}");
    127
}

/// How applying a policy went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Applied {
    /// The ruleset holds, for this process and everything it starts.
    Enforced,
    /// The kernel could not enforce it, and why.
    NotEnforced(String),
}

/// Restricts this process (its calling thread, and what it execs) to `policy`.
pub(crate) fn apply(policy: &Policy) -> io::Result<Applied> {
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
}
