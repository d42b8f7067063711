//! Starting an agent, and the sandbox's process for the next one, started ahead of time.
//!
//! Applying the sandbox costs one more exec per agent start (`ralph-sandbox`, which makes the
//! Landlock ruleset and execs the agent): about a millisecond, which would fall between two
//! agents. So the process for an agent start is started long before it is needed: as the run
//! begins (for the first agent), and as soon as each agent has started (for the next one). It
//! applies the ruleset and waits on its stdin while the agent runs, the iteration is
//! checkpointed and the next prompt built. The agent's start then only writes it what to exec
//! ([`Sandbox::start`](crate::sandbox::Sandbox::start)). Started any later (after the agent's
//! end), it would still be starting when an iteration with little to checkpoint wants it.
//!
//! While it waits beside an agent, that agent cannot tamper with it: each `restrict_self`
//! makes a Landlock domain of its own, and a process may not trace one outside its domain
//! (nor signal it, from ABI 6). Were it killed anyway, the next agent would be started the
//! direct way, in the same sandbox.
//!
//! It is started through `ralph_process::spawn_waiting`, so the sweeps that follow an agent or
//! a test run leave it alone (it is ralph's own child, recorded as started). When the run ends
//! without starting it (a stop, a verified DONE, an error), its stdin is closed, at which it
//! ends having run nothing, and it is waited for: nothing of it is left, and nothing about it
//! is logged, since no agent ran.

use ralph_process::{Spawned, Waiting, feed_stdin, spawn_shell, spawn_shell_open};
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;

use super::groups::marks;
use super::{RunError, Runner};
use crate::agent_spec::Invocation;

impl Runner {
    /// Starts the sandbox's process for the next agent start, unless the run has no sandbox
    /// or one is waiting already. From a thread of the blocking pool: its start (a `vfork`
    /// and an exec) is not the loop's to wait for either.
    pub(super) fn get_agent_ready(&mut self) {
        let Some(sandbox) = &self.processes.sandbox else {
            return;
        };
        if self.processes.ready.is_some() {
            return;
        }
        let mut env: Vec<(String, String)> = marks(self.ws.dir())
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value))
            .collect();
        let helper = sandbox.ahead(&mut env);
        let root = self.ws.root().to_path_buf();
        self.processes.ready = Some(tokio::task::spawn_blocking(move || {
            ralph_process::spawn_waiting(&helper, &root, env)
        }));
    }

    /// Starts the agent of `invocation` with `env` (on top of ralph's own) in its process
    /// group: through the sandbox's process started ahead, else the direct way (in the
    /// sandbox, or not). Its stdin, when the agent converses.
    pub(super) async fn start_agent(
        &mut self,
        invocation: &Invocation,
        mut env: Vec<(String, String)>,
    ) -> Result<(Spawned, Option<ChildStdin>), RunError> {
        let spawn_error = |reason| RunError::Spawn {
            command: invocation.command.clone(),
            reason,
        };
        let root = self.ws.root();
        let piped = invocation.conversation || invocation.stdin.is_some();
        let header = match &self.processes.sandbox {
            Some(sandbox) => Some(
                sandbox
                    .start(&invocation.command, root, &env, piped)
                    .map_err(spawn_error)?,
            ),
            None => None,
        };
        let ready = match header {
            Some(header) => self.start_ready(&header).await,
            None => None,
        };
        let root = self.ws.root();
        let (spawned, stdin) = match ready {
            Some((spawned, stdin)) => (spawned, Some(stdin)),
            None => {
                let command = match &self.processes.sandbox {
                    Some(sandbox) => sandbox
                        .wrap(&invocation.command, root, &mut env)
                        .map_err(spawn_error)?,
                    None => invocation.command.clone(),
                };
                if piped {
                    let (spawned, stdin) =
                        spawn_shell_open(&command, root, env).map_err(spawn_error)?;
                    (spawned, Some(stdin))
                } else {
                    let spawned = spawn_shell(&command, root, env, None).map_err(spawn_error)?;
                    (spawned, None)
                }
            }
        };
        let conversation = match stdin {
            Some(mut stdin) if invocation.conversation => {
                if let Some(first) = &invocation.stdin {
                    // An agent that dies before reading shows up when it exits; nothing to do
                    // here.
                    let _ = stdin.write_all(first).await;
                    let _ = stdin.flush().await;
                }
                Some(stdin)
            }
            // The prompt, written as the agent reads it; none: closed, the agent reads nothing.
            Some(stdin) => {
                if let Some(data) = invocation.stdin.clone() {
                    feed_stdin(stdin, data);
                }
                None
            }
            None => None,
        };
        // The next agent's sandbox, ready long before it is wanted.
        self.get_agent_ready();
        Ok((spawned, conversation))
    }

    /// The process started ahead of this agent start, told to go with `header`; `None` when
    /// there is none, or it could not be started or is gone (the agent is then started the
    /// direct way, which says what is wrong, if anything is).
    pub(super) async fn start_ready(&mut self, header: &[u8]) -> Option<(Spawned, ChildStdin)> {
        let ready = self.processes.ready.take()?.await.ok()?.ok()?;
        ready.go(header).await.ok()
    }

    /// The run ends: the process waiting for an agent start that will not come ends, and is
    /// waited for.
    pub(super) async fn dismiss_ready(&mut self) {
        if let Some(ready) = self.processes.ready.take()
            && let Ok(Ok(waiting)) = ready.await
        {
            Waiting::dismiss(waiting, self.cfg.settings.kill_grace).await;
        }
    }
}
