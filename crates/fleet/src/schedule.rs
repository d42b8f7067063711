//! Scheduling: at most `jobs` loops at once, the rest queued; each loop an ordinary
//! `ralph run --worktree` in a process group of its own, so that the fleet's death (Ctrl-C,
//! a closed terminal, `kill -9`) leaves it running.
//!
//! A [`Scheduler`] is made from the fleet's record and what the disk says of each loop
//! ([`crate::observe`]): a loop still running (started by an earlier `ralph fleet` on the same
//! task files) is attached to, not started again; one that ended is left as it is (a finished
//! one that must land and has not is started again, which lands it); one never started, or
//! interrupted, or stopped, is queued. [`Scheduler::tick`], called every fraction of a
//! second, reaps the loops that ended, starts queued ones into the free places and says
//! whether the fleet is finished. Landing is each loop's own (`ralph run --land auto` lands
//! after a verified DONE): the repository's landing lock makes them land one at a time, each
//! on the tip the previous one left, and a conflict goes back to that loop's agent.

use std::collections::{HashMap, VecDeque};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use ralph_protocol::LandMode;

use crate::fleet_file::{Fleet, Member};
use crate::observe::{self, End, Phase};
use crate::ports;

/// How to start one loop.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The `ralph` program.
    pub program: PathBuf,
    /// ralph's state directory (ports, fleets).
    pub state_dir: PathBuf,
}

/// The fleet at work.
#[derive(Debug)]
pub struct Scheduler {
    fleet: Fleet,
    launch: Launch,
    /// The `ralph run` processes this fleet process started, by member.
    children: HashMap<usize, Child>,
    /// Members waiting for a place, in order.
    queue: VecDeque<usize>,
    /// How a member ended when its `ralph run` left no loop to read it from.
    early_ends: HashMap<usize, End>,
}

/// A loop of the fleet, as the summary shows it.
#[derive(Debug, Clone)]
pub struct MemberOutcome {
    /// The member.
    pub member: Member,
    /// Where it stands.
    pub phase: Phase,
    /// Whether it must land to count as finished well.
    pub must_land: bool,
}

impl Scheduler {
    /// Takes over the fleet `fleet` (its record saved under the state directory), attaching to
    /// the loops that still run and queuing the ones that must run (again).
    pub fn new(mut fleet: Fleet, launch: Launch) -> std::io::Result<Scheduler> {
        fleet.pid = std::process::id();
        let mut queue = VecDeque::new();
        for (i, m) in fleet.members.iter_mut().enumerate() {
            let alive = m.pid.is_some_and(observe::pid_alive);
            match observe::phase(&m.worktree, alive) {
                Phase::Running => m.started = true,
                Phase::Ended(End::Done) if m.must_land => {
                    m.started = false;
                    queue.push_back(i);
                }
                Phase::Ended(End::Stopped(_)) | Phase::Interrupted | Phase::NotStarted => {
                    m.started = false;
                    m.pid = None;
                    m.failed_to_start = None;
                    queue.push_back(i);
                }
                Phase::Ended(_) => m.started = true,
            }
        }
        let s = Scheduler {
            fleet,
            launch,
            children: HashMap::new(),
            queue,
            early_ends: HashMap::new(),
        };
        s.save()?;
        Ok(s)
    }

    /// The fleet's record.
    pub fn fleet(&self) -> &Fleet {
        &self.fleet
    }

    fn fleets_dir(&self) -> PathBuf {
        crate::fleet_file::fleets_dir(&self.launch.state_dir)
    }

    fn save(&self) -> std::io::Result<()> {
        self.fleet.save(&self.fleets_dir())
    }

    /// Reaps the loops that ended, starts queued ones into the free places, and says whether
    /// every loop has ended.
    pub fn tick(&mut self) -> std::io::Result<bool> {
        let mut changed = false;
        let ended: Vec<(usize, std::process::ExitStatus)> = self
            .children
            .iter_mut()
            .filter_map(|(i, c)| c.try_wait().ok().flatten().map(|st| (*i, st)))
            .collect();
        for (i, status) in ended {
            self.children.remove(&i);
            self.fleet.members[i].pid = None;
            let m = &self.fleet.members[i];
            changed = true;
            if matches!(
                observe::phase(&m.worktree, false),
                Phase::NotStarted | Phase::Interrupted
            ) {
                let log = self.log_path(&m.worktree);
                let why = format!(
                    "`ralph run` ended ({status}) before its loop did; its output is in {}",
                    log.display()
                );
                if !m.worktree.exists() {
                    ports::release(&ports::ports_dir(&self.launch.state_dir), &m.worktree);
                }
                self.fleet.members[i].failed_to_start = Some(why.clone());
                self.early_ends.insert(i, End::Failed(why));
            }
        }
        let running = self
            .fleet
            .members
            .iter()
            .enumerate()
            .filter(|(i, m)| self.is_running(*i, m))
            .count();
        let free = self.fleet.jobs.saturating_sub(running);
        for _ in 0..free {
            let Some(i) = self.queue.pop_front() else {
                break;
            };
            self.start(i)?;
            changed = true;
        }
        if changed {
            self.save()?;
        }
        let finished = self.queue.is_empty()
            && self
                .fleet
                .members
                .iter()
                .enumerate()
                .all(|(i, m)| !self.is_running(i, m));
        Ok(finished)
    }

    fn is_running(&self, i: usize, m: &Member) -> bool {
        if self.early_ends.contains_key(&i) {
            return false;
        }
        if self.children.contains_key(&i) {
            return true;
        }
        m.started
            && observe::phase(&m.worktree, m.pid.is_some_and(observe::pid_alive)) == Phase::Running
    }

    fn log_path(&self, worktree: &Path) -> PathBuf {
        let name = worktree
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "loop".into());
        crate::fleet_file::Fleet::own_dir(&self.fleets_dir(), &self.fleet.id)
            .join("logs")
            .join(format!("{name}.log"))
    }

    /// Starts member `i`'s `ralph run --worktree` in a process group of its own.
    fn start(&mut self, i: usize) -> std::io::Result<()> {
        let port = ports::claim(
            &ports::ports_dir(&self.launch.state_dir),
            &self.fleet.members[i].worktree,
        )
        .map_err(std::io::Error::other)?;
        let log_path = self.log_path(&self.fleet.members[i].worktree);
        if let Some(dir) = log_path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)?;
        let mut cmd = member_command(
            &self.launch.program,
            &self.fleet,
            &self.fleet.members[i],
            port,
        );
        cmd.stdout(log.try_clone()?).stderr(log);
        let child = cmd.spawn().map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("could not start {}: {e}", self.launch.program.display()),
            )
        })?;
        let m = &mut self.fleet.members[i];
        m.pid = Some(child.id());
        m.port = Some(port);
        m.started = true;
        self.children.insert(i, child);
        Ok(())
    }

    /// Every loop and where it stands now.
    pub fn outcomes(&self) -> Vec<MemberOutcome> {
        self.fleet
            .members
            .iter()
            .enumerate()
            .map(|(i, m)| MemberOutcome {
                member: m.clone(),
                phase: match self.early_ends.get(&i) {
                    Some(end) => Phase::Ended(end.clone()),
                    None if self.children.contains_key(&i) => Phase::Running,
                    None => observe::phase(&m.worktree, m.pid.is_some_and(observe::pid_alive)),
                },
                must_land: m.must_land,
            })
            .collect()
    }

    /// The landing mode in force, when the fleet gives one.
    pub fn land(&self) -> Option<LandMode> {
        self.fleet.land
    }
}

/// The `ralph run` of `member` of `fleet`, holding the ports from `port` on: its arguments
/// (the fleet's landing mode and flags) and its environment (`RALPH_PORT`, `RALPH_FLEET`, the
/// fleet's cost cap), in a process group of its own so that the fleet's Ctrl-C, or its
/// terminal closing, is not the loop's. The fleet's first start of a loop and every later one
/// (the view's `r`, [`rerun`]) go through here, so a loop run again is as much its fleet's
/// member as it was. The caller says where its output goes.
pub fn member_command(program: &Path, fleet: &Fleet, member: &Member, port: u16) -> Command {
    let mut cmd = Command::new(program);
    cmd.arg("run")
        .arg("-C")
        .arg(&member.repo)
        .arg("--task")
        .arg(&member.task_rel)
        .arg("--worktree")
        .arg("--no-tui");
    if let Some(land) = fleet.land {
        cmd.arg("--land").arg(land.as_str());
    }
    cmd.args(&fleet.run_args)
        .env("RALPH_PORT", port.to_string())
        .env(ralph_protocol::budget::fleet::FLEET_ENV, &fleet.id)
        .stdin(Stdio::null())
        .process_group(0);
    if let Some(cap) = fleet.max_cost_usd {
        cmd.env(
            ralph_protocol::budget::fleet::FLEET_MAX_COST_ENV,
            cap.to_string(),
        );
    }
    cmd
}

/// The `ralph run` that runs the loop in `worktree` again as a member of the fleet on record
/// under `state_dir` that has it ([`member_command`], with the block of ports it holds);
/// `None` when no fleet has it.
pub fn rerun(
    program: &Path,
    state_dir: &Path,
    worktree: &Path,
) -> Option<std::io::Result<Command>> {
    let fleet =
        crate::fleet_file::of_worktree(&crate::fleet_file::fleets_dir(state_dir), worktree)?;
    let member = fleet.member(worktree)?;
    Some(
        ports::claim(&ports::ports_dir(state_dir), &member.worktree)
            .map_err(std::io::Error::other)
            .map(|port| member_command(program, &fleet, member, port)),
    )
}

/// The fleet's exit code from how its loops stand (docs/fleet.md, `ralph fleet --help`):
/// 0 every loop done (and landed, where it must land); 3 none failed, but one ran out of
/// iterations; 1 otherwise; 130 when a loop still runs (the fleet was left before the end).
pub fn exit_code(outcomes: &[MemberOutcome]) -> u8 {
    let mut code = 0;
    for o in outcomes {
        let this = match &o.phase {
            Phase::Ended(End::Landed) => 0,
            Phase::Ended(End::Done) if !o.must_land => 0,
            Phase::Ended(End::Limit(_)) => 3,
            Phase::Running => return 130,
            _ => 1,
        };
        code = match (code, this) {
            (1, _) | (_, 1) => 1,
            (3, _) | (_, 3) => 3,
            _ => 0,
        };
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(phase: Phase, must_land: bool) -> MemberOutcome {
        MemberOutcome {
            member: Member {
                task_file: "/r/t.md".into(),
                task_rel: "t.md".into(),
                repo: "/r".into(),
                task: "t".into(),
                worktree: "/d/t".into(),
                port: None,
                pid: None,
                started: true,
                must_land,
                failed_to_start: None,
            },
            phase,
            must_land,
        }
    }

    /// The environment and arguments of a command, to compare two of them.
    fn spelled(cmd: &Command) -> (Vec<String>, Vec<(String, Option<String>)>) {
        let s = |o: &std::ffi::OsStr| o.to_string_lossy().into_owned();
        (
            cmd.get_args().map(s).collect(),
            cmd.get_envs().map(|(k, v)| (s(k), v.map(s))).collect(),
        )
    }

    /// Regression: the view's `r` ran a fleet's loop again with its flags but without its
    /// fleet's environment (`RALPH_FLEET`, the cost cap, its ports), so the loop run again
    /// spent outside the fleet's cap. It is now the very command the fleet starts it with.
    #[test]
    fn a_fleet_s_loop_run_again_is_started_as_its_fleet_started_it() {
        let state = tempfile::tempdir().unwrap();
        let worktree = tempfile::tempdir().unwrap();
        let mut member = outcome(Phase::Running, true).member;
        member.worktree = worktree.path().into();
        let mut fleet = crate::test_support::fleet(vec![member.clone()]);
        fleet
            .run_args
            .extend(["--max-iterations".into(), "7".into()]);
        fleet
            .save(&crate::fleet_file::fleets_dir(state.path()))
            .unwrap();
        let program = Path::new("/bin/ralph");
        let port = ports::claim(&ports::ports_dir(state.path()), worktree.path()).unwrap();
        let first = member_command(program, &fleet, &member, port);
        let again = rerun(program, state.path(), worktree.path())
            .expect("the worktree is the fleet's")
            .unwrap();
        assert_eq!(spelled(&again), spelled(&first));
        assert_eq!(again.get_program(), program);
        let (args, env) = spelled(&again);
        let has = |k: &str, v: &str| env.contains(&(k.into(), Some(v.into())));
        assert!(has("RALPH_FLEET", "abc"), "{env:?}");
        assert!(has("RALPH_FLEET_MAX_COST_USD", "2.5"), "{env:?}");
        assert!(has("RALPH_PORT", &port.to_string()), "{env:?}");
        for flag in ["--no-sandbox", "--land", "auto", "--worktree"] {
            assert!(args.iter().any(|a| a == flag), "{args:?}");
        }
        let alone = tempfile::tempdir().unwrap();
        assert!(rerun(program, state.path(), alone.path()).is_none());
    }

    #[test]
    fn the_fleet_exits_0_only_when_every_loop_is_done_and_landed_where_it_must() {
        let landed = outcome(Phase::Ended(End::Landed), true);
        let done = outcome(Phase::Ended(End::Done), false);
        let unlanded = outcome(Phase::Ended(End::Done), true);
        let limit = outcome(Phase::Ended(End::Limit(String::new())), false);
        let failed = outcome(Phase::Ended(End::Failed("x".into())), false);
        let review = outcome(Phase::Ended(End::NeedsReview("x".into())), true);
        assert_eq!(exit_code(&[landed.clone(), done.clone()]), 0);
        assert_eq!(exit_code(&[landed, unlanded]), 1);
        assert_eq!(exit_code(&[done.clone(), limit.clone()]), 3);
        assert_eq!(exit_code(&[limit.clone(), failed]), 1);
        assert_eq!(exit_code(&[review, limit]), 1);
        assert_eq!(exit_code(&[done, outcome(Phase::Running, false)]), 130);
    }
}
