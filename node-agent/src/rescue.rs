//! The host-side rescue: rolls a node back to its last-known-good config when the kubelet
//! keeps failing with a config in flight and no agent is running to roll it back.
//!
//! The agent rolls back a config the kubelet does not come back healthy with, but the agent
//! is a pod, started by the kubelet. When the node reboots (or the agent's pod is gone)
//! while a config the kubelet cannot start with is on disk, the kubelet crash-loops, the
//! agent never starts, and nothing rolls back. `kubelet-gitops-rescue` closes that gap: it
//! runs on the host as an `ExecStartPre=-` of `kubelet.service`, before every start of the
//! kubelet, and decides from the checkpoint directory alone:
//!
//! 1. Nothing in flight (`meta/assigned` is absent, `Verified`, or `Checkpointed` without a
//!    verdict: the kubelet's file was not touched yet): nothing to do, nothing written.
//! 2. The agent runs (it holds [`LOCK_FILE`] for its whole life; see [`AgentLock`]): it
//!    handles the node, nothing to do.
//! 3. A config in flight (`Written` or `Restarted`, no verdict) and no agent: the first
//!    time, the sighting is recorded in `meta/rescue` ([`Sighting`]) and the kubelet gets
//!    its chance. Each later start updates it. Once the kubelet has kept starting for the
//!    health timeout since the first sighting (systemd restarts it every `RestartSec`),
//!    the rescue rolls back exactly as the agent would: the verdict and the fallback
//!    (last-known-good, else the node's own config) go into `meta/assigned` first, in one
//!    atomic write, then the fallback is written where the kubelet reads it, and the
//!    phase becomes `Restarted`: the kubelet start that follows the rescue is the restart.
//!    When the agent starts later, it verifies the fallback and reports `RolledBack` from
//!    the verdict, as after a rollback of its own, and never retries the failed config.
//! 4. A rollback whose verdict is recorded but whose fallback is not written yet
//!    (`Checkpointed` or `Written` with a verdict: the rescue or the agent was stopped in
//!    the middle) and no agent: the rescue carries it on at once.
//!
//! A start that comes more than the health timeout after the previous one means the
//! kubelet ran that long (or the node was off): the sighting starts over, so a kubelet
//! that ran well while the agent was away is never rolled back for one later restart.
//!
//! Every write is atomic ([`write_atomic`]); a kill between any two leaves a state that
//! the next run of the rescue (or the agent) completes: see [`execute`].
//!
//! ```text
//! pub const LOCK_FILE: &str; pub const SIGHTING_FILE: &str
//! pub struct AgentLock;  impl AgentLock { pub fn try_acquire(dir: &Path) -> io::Result<Option<AgentLock>>; pub async fn acquire(dir: &Path) -> io::Result<AgentLock> }
//! pub struct Sighting { pub checkpoint: Checkpoint, pub since: u64, pub first_seen: u64, pub last_seen: u64, pub starts: u32 }
//! pub struct Observed { pub now, pub health_timeout, pub agent_running, pub assigned, pub last_known_good, pub local_original, pub sighting }
//! pub enum Action { Nothing(Idle), Watch { sighting: Sighting, fresh: bool }, RollBack { to: Checkpoint, record: Box<Assigned> }, CarryOn }
//! pub fn decide(o: &Observed) -> Action
//! pub struct Settings { pub checkpoint_dir: PathBuf, pub placement: Placement, pub kubelet_root_dir: PathBuf, pub health_timeout: Duration }
//! pub enum Outcome { Idle(Idle), Watching(Sighting), RolledBack { failed: Option<ConfigRef>, to: ConfigRef } }
//! pub fn run(settings: &Settings, now: u64) -> Result<Outcome, RescueError>
//! pub struct RescueArgs;  impl RescueArgs { pub fn command() -> clap::Command; pub fn parse() -> RescueArgs; pub fn into_settings(self) -> Result<Settings, RescueError> }
//! ```

use std::fmt;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{CommandFactory as _, FromArgMatches as _, Parser};
use kubelet_gitops_core::flags::DEFAULT_ROOT_DIR;
use kubelet_gitops_core::protocol::{ConfigRef, reason};
use serde::{Deserialize, Serialize};
use tracing::{debug, error, info, warn};

use crate::args::{DROP_IN_FILE, Mode};
use crate::checkpoint::{
    ASSIGNED_FILE, ApplyPhase, Assigned, Checkpoint, CheckpointStore, Verdict, meta_path,
    read_framed, write_atomic, write_framed,
};
use crate::error::CheckpointError;
use crate::kubelet::remove_state_files;
use crate::validate::Placement;

/// The file in the checkpoint directory the running agent holds an exclusive advisory
/// lock (`flock`) on for its whole life. The rescue leaves the node alone while it is held,
/// and holds it itself while it works, so the two never write at the same time.
pub const LOCK_FILE: &str = "agent.lock";

/// The rescue's record in the checkpoint directory's `meta/`: [`Sighting`].
pub const SIGHTING_FILE: &str = "rescue";

/// What the rescue ran into.
#[derive(Debug, thiserror::Error)]
pub enum RescueError {
    /// The checkpoint directory.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// A file operation outside the checkpoint store.
    #[error("failed to {op} {path}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// On what.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
    /// The fallback chosen cannot be read, so nothing was changed.
    #[error("cannot roll back to {config}: its payload cannot be read")]
    Fallback {
        /// The fallback.
        config: ConfigRef,
        /// Why.
        #[source]
        source: CheckpointError,
    },
    /// An option the rescue cannot run with.
    #[error("{0}")]
    Usage(String),
}

fn io_err<'p>(op: &'static str, path: &'p Path) -> impl FnOnce(io::Error) -> RescueError + 'p {
    move |source| RescueError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

// ---------------------------------------------------------------------------------------
// The agent's lock

/// An exclusive advisory lock (`flock(2)`, through [`File::try_lock`]) on
/// [`LOCK_FILE`] in the checkpoint directory, released when dropped or when the process
/// ends, however it ends. The agent holds it from its start; the rescue takes it while it
/// works. A lock works across the container boundary: the agent's hostPath and the host
/// see the same file.
#[derive(Debug)]
pub struct AgentLock {
    _file: File,
    path: PathBuf,
}

impl AgentLock {
    /// Where the lock lives in checkpoint directory `dir`.
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(LOCK_FILE)
    }

    /// The lock, when nobody else holds it; `None` when someone does. Creates `dir` and
    /// the lock file when missing.
    pub fn try_acquire(dir: &Path) -> io::Result<Option<AgentLock>> {
        fs::create_dir_all(dir)?;
        let path = Self::path(dir);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(AgentLock { _file: file, path })),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(e),
        }
    }

    /// The lock, waiting for whoever holds it (a rescue run takes milliseconds; an agent
    /// of a DaemonSet update that overlaps this one holds it until it stops).
    pub async fn acquire(dir: &Path) -> io::Result<AgentLock> {
        let mut told = false;
        loop {
            if let Some(lock) = Self::try_acquire(dir)? {
                debug!(path = %lock.path.display(), "holding the agent lock");
                return Ok(lock);
            }
            if !told {
                warn!(path = %Self::path(dir).display(), "another process holds the agent lock (kubelet-gitops-rescue, or another agent); waiting");
                told = true;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

// ---------------------------------------------------------------------------------------
// The decision

/// `meta/rescue`: when the rescue first and last saw the apply in flight, identified by its
/// checkpoint and the `since` of its phase (a later attempt of the same config is another
/// apply). A record about anything else is stale and ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sighting {
    /// The config in flight.
    pub checkpoint: Checkpoint,
    /// Its `meta/assigned` `since`.
    pub since: u64,
    /// When the rescue first saw it (unix seconds).
    pub first_seen: u64,
    /// When the rescue last saw it: the kubelet's previous start.
    pub last_seen: u64,
    /// Kubelet starts seen with it.
    pub starts: u32,
}

impl Sighting {
    fn first(a: &Assigned, now: u64) -> Sighting {
        Sighting {
            checkpoint: a.checkpoint.clone(),
            since: a.since,
            first_seen: now,
            last_seen: now,
            starts: 1,
        }
    }

    fn is_about(&self, a: &Assigned) -> bool {
        self.checkpoint == a.checkpoint && self.since == a.since
    }
}

/// Everything [`decide`] looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// Now (unix seconds).
    pub now: u64,
    /// How long the kubelet has to come back healthy, in seconds.
    pub health_timeout: u64,
    /// Someone holds [`LOCK_FILE`].
    pub agent_running: bool,
    /// `meta/assigned`.
    pub assigned: Option<Assigned>,
    /// `meta/last-known-good` (`None` also when it is corrupt, as the agent reads it).
    pub last_known_good: Option<Checkpoint>,
    /// The checkpoint of the node's own saved config, when one was saved.
    pub local_original: Option<Checkpoint>,
    /// `meta/rescue` (`None` also when it is corrupt).
    pub sighting: Option<Sighting>,
}

/// Why the rescue leaves the node alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Idle {
    /// No config is in flight.
    NothingInFlight,
    /// The agent runs; it handles the node.
    AgentRunning,
    /// A rollback's fallback is on trial (`Restarted` with a verdict): a fallback that
    /// fails too is not rolled back in turn (nothing is safer); a person must act.
    FallbackOnTrial {
        /// The fallback.
        fallback: ConfigRef,
        /// The config that failed before it.
        failed: ConfigRef,
    },
    /// The kubelet kept failing but there is nothing to fall back to.
    NoFallback {
        /// The config in flight.
        config: ConfigRef,
        /// Why there is nothing.
        why: String,
    },
}

impl fmt::Display for Idle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Idle::NothingInFlight => f.write_str("no config in flight"),
            Idle::AgentRunning => f.write_str("the agent is running and handles the node"),
            Idle::FallbackOnTrial { fallback, failed } => write!(
                f,
                "the fallback {fallback} of a rollback from {failed} is on trial; a fallback is not rolled back in turn"
            ),
            Idle::NoFallback { config, why } => {
                write!(f, "{config} is in flight but there is no fallback: {why}")
            }
        }
    }
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Nothing, and nothing is written.
    Nothing(Idle),
    /// Record `sighting` in `meta/rescue` and let the kubelet start. `fresh`: the first
    /// sighting of this apply, or a new start of the clock.
    Watch {
        /// The record to write.
        sighting: Sighting,
        /// It starts a new count.
        fresh: bool,
    },
    /// Roll back to `to`: write `record` (the verdict, the fallback, phase `Checkpointed`)
    /// as `meta/assigned`, then [`Action::CarryOn`].
    RollBack {
        /// The fallback.
        to: Checkpoint,
        /// The new `meta/assigned`.
        record: Box<Assigned>,
    },
    /// A rollback is recorded: write the fallback where the kubelet reads it (removing
    /// the state files the assignment lists first) and record phase `Restarted`.
    CarryOn,
}

/// The rescue's decision. See the module documentation.
pub fn decide(o: &Observed) -> Action {
    let Some(a) = &o.assigned else {
        return Action::Nothing(Idle::NothingInFlight);
    };
    match (a.phase, &a.failed) {
        (ApplyPhase::Verified, _) | (ApplyPhase::Checkpointed, None) => {
            Action::Nothing(Idle::NothingInFlight)
        }
        (ApplyPhase::Restarted, Some(v)) => Action::Nothing(Idle::FallbackOnTrial {
            fallback: a.checkpoint.config.clone(),
            failed: v.config.clone(),
        }),
        _ if o.agent_running => Action::Nothing(Idle::AgentRunning),
        (ApplyPhase::Checkpointed | ApplyPhase::Written, Some(_)) => Action::CarryOn,
        (ApplyPhase::Written | ApplyPhase::Restarted, None) => applying(o, a),
    }
}

/// A config in flight, no verdict, no agent.
fn applying(o: &Observed, a: &Assigned) -> Action {
    let Some(seen) = o.sighting.as_ref().filter(|s| s.is_about(a)) else {
        return Action::Watch {
            sighting: Sighting::first(a, o.now),
            fresh: true,
        };
    };
    if o.now.saturating_sub(seen.last_seen) > o.health_timeout {
        // The kubelet ran longer than the health timeout since its last start, or the
        // node was off: it gets a whole new chance.
        return Action::Watch {
            sighting: Sighting::first(a, o.now),
            fresh: true,
        };
    }
    let starts = seen.starts.saturating_add(1);
    let elapsed = o.now.saturating_sub(seen.first_seen);
    if elapsed < o.health_timeout {
        return Action::Watch {
            sighting: Sighting {
                last_seen: o.now,
                starts,
                ..seen.clone()
            },
            fresh: false,
        };
    }
    let failed = &a.checkpoint.config;
    // The agent's choice: last-known-good, else the node's own config.
    let to = match (&o.last_known_good, &o.local_original) {
        (Some(lkg), _) => lkg.clone(),
        (None, Some(local)) => local.clone(),
        (None, None) => {
            return Action::Nothing(Idle::NoFallback {
                config: failed.clone(),
                why: "there is no last-known-good and the node's own config was never saved".into(),
            });
        }
    };
    if to.config == *failed {
        return Action::Nothing(Idle::NoFallback {
            config: failed.clone(),
            why: format!("it is the last-known-good ({})", to.config),
        });
    }
    let verdict = Verdict {
        config: failed.clone(),
        reason: format!(
            "{}: the kubelet kept failing to start with {failed} while no agent was running (after a reboot, or with the agent's pod gone): {starts} starts in {}; kubelet-gitops-rescue acted before the kubelet's next start",
            reason::UNHEALTHY,
            humantime::format_duration(Duration::from_secs(elapsed)),
        ),
        at: o.now,
        reported_to: None,
    };
    let record = Assigned {
        // The change back undoes the change forward: the state files the failed apply
        // made stale (a policy change) are stale again, now with the failed config's
        // policy in them.
        state_files: a.state_files.clone(),
        failed: Some(verdict),
        ..Assigned::new(
            to.clone(),
            ApplyPhase::Checkpointed,
            o.now,
            Some(a.checkpoint.clone()),
        )
    };
    Action::RollBack {
        to,
        record: Box::new(record),
    }
}

// ---------------------------------------------------------------------------------------
// The effects

/// Where the rescue works: the agent's settings it must agree with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The agent's checkpoint directory.
    pub checkpoint_dir: PathBuf,
    /// Where the agent writes the config.
    pub placement: Placement,
    /// The kubelet's `--root-dir`, where its state files live.
    pub kubelet_root_dir: PathBuf,
    /// The health timeout.
    pub health_timeout: Duration,
}

/// What a run of the rescue did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing.
    Idle(Idle),
    /// Recorded a sighting; the kubelet starts with the config in flight.
    Watching(Sighting),
    /// Rolled back from `failed` to `to` (or carried a recorded rollback on).
    RolledBack {
        /// The failed config.
        failed: Option<ConfigRef>,
        /// The fallback now in place.
        to: ConfigRef,
    },
}

fn assigned_path(dir: &Path) -> PathBuf {
    meta_path(dir, ASSIGNED_FILE)
}

fn sighting_path(dir: &Path) -> PathBuf {
    meta_path(dir, SIGHTING_FILE)
}

/// What the rescue decides from `meta/assigned` alone, read without the lock and without
/// opening the store (which writes): `Some` when the node is to be left alone whatever
/// else is found, `None` when a config is in flight and a closer look is needed.
fn first_look(dir: &Path) -> Result<Option<Idle>, RescueError> {
    let path = assigned_path(dir);
    match read_framed::<Assigned>(&path) {
        Ok(assigned) => {
            let o = Observed {
                now: 0,
                health_timeout: 0,
                agent_running: false,
                assigned,
                last_known_good: None,
                local_original: None,
                sighting: None,
            };
            Ok(match decide(&o) {
                Action::Nothing(idle) => Some(idle),
                _ => None,
            })
        }
        Err(e) if e.is_corrupt() => {
            // The agent treats a corrupt meta/assigned as the local config; so does the
            // rescue: nothing it could complete.
            warn!(path = %path.display(), reason = %e, "meta/assigned is unreadable; leaving the node alone");
            Ok(Some(Idle::NothingInFlight))
        }
        Err(e) => Err(e.into()),
    }
}

fn log_idle(idle: &Idle) {
    match idle {
        Idle::NoFallback { .. } | Idle::FallbackOnTrial { .. } => {
            error!(reason = %idle, "if the kubelet does not start, the rescue has nothing safer to roll back to; a person must act")
        }
        Idle::AgentRunning => {
            info!(reason = %idle, "a config is in flight; the agent handles it")
        }
        Idle::NothingInFlight => debug!(reason = %idle, "nothing to do"),
    }
}

/// One run of the rescue at `now` (unix seconds). Writes nothing unless a config is in
/// flight and no agent runs; see the module documentation.
pub fn run(settings: &Settings, now: u64) -> Result<Outcome, RescueError> {
    let dir = &settings.checkpoint_dir;
    if let Some(idle) = first_look(dir)? {
        log_idle(&idle);
        return Ok(Outcome::Idle(idle));
    }
    let lock_path = AgentLock::path(dir);
    let Some(_lock) = AgentLock::try_acquire(dir).map_err(io_err("lock", &lock_path))? else {
        log_idle(&Idle::AgentRunning);
        return Ok(Outcome::Idle(Idle::AgentRunning));
    };
    // Under the lock: the agent cannot start writing until the rescue is done.
    let store = CheckpointStore::open(dir)?;
    let observed = observe(&store, settings, now)?;
    let action = decide(&observed);
    debug!(?action, "decided");
    execute(&store, settings, &observed, action, now)
}

fn observe(
    store: &CheckpointStore,
    settings: &Settings,
    now: u64,
) -> Result<Observed, RescueError> {
    let assigned = match store.assigned() {
        Ok(a) => a,
        Err(e) if e.is_corrupt() => None,
        Err(e) => return Err(e.into()),
    };
    let last_known_good = match store.last_known_good() {
        Ok(c) => c,
        Err(e) if e.is_corrupt() => {
            warn!(error = %e, "meta/last-known-good is corrupt; the fallback is the node's own config, as for the agent");
            None
        }
        Err(e) => return Err(e.into()),
    };
    let local_original = match store.local_original() {
        Ok(o) => o.map(|bytes| Checkpoint::local(&bytes)),
        Err(e) if e.is_corrupt() => {
            warn!(error = %e, "the saved local config is corrupt; it will not be used");
            None
        }
        Err(e) => return Err(e.into()),
    };
    let path = sighting_path(store.dir());
    let sighting = match read_framed::<Sighting>(&path) {
        Ok(s) => s,
        Err(e) if e.is_corrupt() => {
            warn!(path = %path.display(), reason = %e, "meta/rescue is unreadable; starting over");
            None
        }
        Err(e) => return Err(e.into()),
    };
    Ok(Observed {
        now,
        health_timeout: settings.health_timeout.as_secs().max(1),
        agent_running: false,
        assigned,
        last_known_good,
        local_original,
        sighting,
    })
}

/// The payload of `cp`: its checkpoint, or the node's saved config.
fn payload_of(store: &CheckpointStore, cp: &Checkpoint) -> Result<Vec<u8>, RescueError> {
    let fallback = |source| RescueError::Fallback {
        config: cp.config.clone(),
        source,
    };
    if cp.config == ConfigRef::Local {
        store
            .local_original()
            .map_err(fallback)?
            .ok_or_else(|| RescueError::Usage("the node's own config was never saved".into()))
    } else {
        store.load(cp).map_err(fallback)
    }
}

/// Carries `action` out. The order makes every interruption safe:
///
/// - `RollBack`: the fallback's payload is read first (nothing is changed when it cannot
///   be); then `meta/assigned` gets the verdict and the fallback in one atomic write, so
///   from here on nobody retries the failed config; then as `CarryOn`.
/// - `CarryOn`: the listed kubelet state files are removed, the fallback is written
///   atomically, and phase `Restarted` is recorded. Killed before the last write, the
///   next run (or the agent: `Checkpointed` -> write, `Written` -> restart) does it all
///   again, each step being idempotent.
fn execute(
    store: &CheckpointStore,
    settings: &Settings,
    o: &Observed,
    action: Action,
    now: u64,
) -> Result<Outcome, RescueError> {
    match action {
        Action::Nothing(idle) => {
            log_idle(&idle);
            Ok(Outcome::Idle(idle))
        }
        Action::Watch { sighting, fresh } => {
            write_framed(&sighting_path(store.dir()), &sighting)?;
            let deadline = sighting.first_seen.saturating_add(o.health_timeout);
            if fresh {
                warn!(config = %sighting.checkpoint.config, health_timeout = o.health_timeout, "a config is in flight and the agent is not running; the kubelet gets its chance, and is rolled back if it keeps failing");
            } else {
                warn!(config = %sighting.checkpoint.config, starts = sighting.starts, rollback_after = deadline, "the kubelet starts again with the config in flight and no agent running");
            }
            Ok(Outcome::Watching(sighting))
        }
        Action::RollBack { to, record } => {
            payload_of(store, &to)?;
            let failed = record.failed.as_ref().map(|v| v.config.clone());
            error!(failed = ?failed.as_ref().map(ToString::to_string), to = %to.config, "the kubelet kept failing with no agent running: rolling back");
            store.set_assigned(&record)?;
            carry_on(store, settings, now)?;
            Ok(Outcome::RolledBack {
                failed,
                to: to.config,
            })
        }
        Action::CarryOn => {
            let to = carry_on(store, settings, now)?;
            let failed = o
                .assigned
                .as_ref()
                .and_then(|a| a.failed.as_ref())
                .map(|v| v.config.clone());
            Ok(Outcome::RolledBack { failed, to })
        }
    }
}

/// Writes the recorded fallback and records phase `Restarted` (the kubelet start that
/// follows is its restart). Returns the fallback.
fn carry_on(
    store: &CheckpointStore,
    settings: &Settings,
    now: u64,
) -> Result<ConfigRef, RescueError> {
    let a = store
        .assigned()?
        .ok_or_else(|| RescueError::Usage("meta/assigned disappeared during a rollback".into()))?;
    let payload = payload_of(store, &a.checkpoint)?;
    if let Some(names) = a.state_files.as_deref()
        && !names.is_empty()
    {
        let root = settings.kubelet_root_dir.to_string_lossy();
        remove_state_files(Path::new("/"), &root, names).map_err(io_err(
            "remove kubelet state files in",
            &settings.kubelet_root_dir,
        ))?;
    }
    let target = settings.placement.target();
    write_target(&settings.placement, &target, &payload)?;
    info!(config = %a.checkpoint.config, path = %target.display(), sha256 = %a.checkpoint.sha256, "fallback written");
    store.set_assigned(&Assigned {
        phase: ApplyPhase::Restarted,
        since: now,
        ..a.clone()
    })?;
    info!(config = %a.checkpoint.config, "phase Restarted recorded; the kubelet starts on the fallback, and the agent verifies it when it runs");
    Ok(a.checkpoint.config)
}

/// Writes `payload` as the agent does: atomically; in drop-in mode an empty payload (the
/// node's own config) removes the drop-in.
fn write_target(placement: &Placement, target: &Path, payload: &[u8]) -> Result<(), RescueError> {
    if payload.is_empty() && matches!(placement, Placement::DropIn { .. }) {
        match fs::remove_file(target) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err("remove", target)(e)),
        }
        if let Some(dir) = target.parent() {
            File::open(dir)
                .and_then(|f| f.sync_all())
                .map_err(io_err("sync directory", dir))?;
        }
        return Ok(());
    }
    if let Some(dir) = target.parent() {
        fs::create_dir_all(dir).map_err(io_err("create directory", dir))?;
    }
    write_atomic(target, payload).map_err(io_err("write", target))
}

// ---------------------------------------------------------------------------------------
// The command line

/// Rolls the kubelet back to its last-known-good config when it keeps failing with a
/// kubelet-gitops config in flight and no agent is running to do it.
///
/// Runs on the host, before every start of the kubelet, from a systemd drop-in on
/// kubelet.service: ExecStartPre=-/opt/kubelet-gitops/bin/kubelet-gitops-rescue ...
/// (deploy/host/). It reads the agent's checkpoint directory and, unless a config is in
/// flight (meta/assigned phase Written or Restarted, no verdict) and the agent is not
/// running (it holds <checkpoint-dir>/agent.lock), exits at once without writing anything.
/// With a config in flight and no agent, it records when it first saw it (meta/rescue) and
/// lets the kubelet start; once the kubelet has kept restarting for the health timeout, it
/// records the verdict in meta/assigned, as the agent does, and writes the fallback
/// (last-known-good, else the node's own config) so that the kubelet start that follows
/// uses it. The agent reports RolledBack when it runs again.
///
/// It runs before every start, not on failure: kubeadm's kubelet.service has
/// Restart=always, so a crash-looping kubelet never reaches the failed state and an
/// OnFailure= unit would never run. Exit codes: 0 whatever it did, 1 on an error, 2 on
/// invalid options; the `-` of ExecStartPre ignores them all: the kubelet always starts.
///
/// Options must match the agent's (same names and environment variables).
#[derive(Debug, Parser)]
#[command(name = "kubelet-gitops-rescue", version, max_term_width = 100)]
pub struct RescueArgs {
    /// The agent's checkpoint directory, as a host path (the agent's --checkpoint-dir).
    #[arg(
        long,
        env = "KUBELET_GITOPS_CHECKPOINT_DIR",
        value_name = "DIR",
        required = false
    )]
    pub checkpoint_dir: PathBuf,

    /// How the agent writes the config (the agent's --mode): `replace` writes
    /// --kubelet-config, `drop-in` writes 50-kubelet-gitops.conf into --drop-in-dir.
    #[arg(long, env = "KUBELET_GITOPS_MODE", value_enum, required = false)]
    pub mode: Mode,

    /// The kubelet's config file (replace mode; required there): the kubelet's --config,
    /// the agent's --kubelet-config.
    #[arg(long, env = "KUBELET_GITOPS_KUBELET_CONFIG", value_name = "FILE")]
    pub kubelet_config: Option<PathBuf>,

    /// The kubelet's drop-in directory (drop-in mode; required there): the kubelet's
    /// --config-dir, the agent's --drop-in-dir.
    #[arg(long, env = "KUBELET_GITOPS_DROP_IN_DIR", value_name = "DIR")]
    pub drop_in_dir: Option<PathBuf>,

    /// The kubelet's --root-dir, where the state files a policy change makes stale
    /// (cpu_manager_state, memory_manager_state) are removed on a rollback.
    #[arg(
        long,
        env = "KUBELET_GITOPS_KUBELET_ROOT_DIR",
        value_name = "DIR",
        default_value = DEFAULT_ROOT_DIR
    )]
    pub kubelet_root_dir: PathBuf,

    /// How long the kubelet keeps restarting with the config in flight before it is
    /// rolled back (the agent's --health-timeout; the Node's health-timeout annotation is
    /// not read: there is no API server access here).
    #[arg(
        long,
        env = "KUBELET_GITOPS_HEALTH_TIMEOUT",
        value_name = "DURATION",
        required = false
    )]
    pub health_timeout: humantime::Duration,

    /// Log filter (tracing-subscriber EnvFilter syntax). Logs go to stderr: the
    /// kubelet's journal.
    #[arg(
        long,
        env = "KUBELET_GITOPS_LOG",
        value_name = "FILTER",
        default_value = "info"
    )]
    pub log: String,
}

/// The options the rescue shares with the agent: their defaults are the agent's.
const SHARED_DEFAULTS: &[&str] = &["checkpoint_dir", "mode", "health_timeout"];

impl RescueArgs {
    /// The command line, with the agent's defaults for the options it shares with the
    /// agent (read from the agent's own definition, so they cannot drift apart).
    pub fn command() -> clap::Command {
        let agent = crate::args::Args::command();
        // The derived command (the trait's; this inherent function shadows it).
        let mut cmd = <RescueArgs as clap::CommandFactory>::command();
        for id in SHARED_DEFAULTS {
            let default = agent
                .get_arguments()
                .find(|a| a.get_id() == *id)
                .and_then(|a| a.get_default_values().first().cloned());
            if let Some(d) = default {
                cmd = cmd.mut_arg(*id, |a| a.default_value(d));
            }
        }
        cmd
    }

    /// Parses `argv` (clap's errors as they are).
    pub fn try_parse_from<I, T>(argv: I) -> Result<RescueArgs, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let mut matches = Self::command().try_get_matches_from(argv)?;
        RescueArgs::from_arg_matches_mut(&mut matches)
    }

    /// Parses the process's command line, exiting with clap's usage error (code 2) on a
    /// bad one.
    pub fn parse() -> RescueArgs {
        Self::try_parse_from(std::env::args_os()).unwrap_or_else(|e| e.exit())
    }

    /// Validates the options.
    pub fn into_settings(self) -> Result<Settings, RescueError> {
        let RescueArgs {
            checkpoint_dir,
            mode,
            kubelet_config,
            drop_in_dir,
            kubelet_root_dir,
            health_timeout,
            log: _,
        } = self;
        let absolute = |option: &str, path: &Path| {
            if path.is_absolute() {
                Ok(())
            } else {
                Err(RescueError::Usage(format!(
                    "--{option} {} must be an absolute path",
                    path.display()
                )))
            }
        };
        absolute("checkpoint-dir", &checkpoint_dir)?;
        absolute("kubelet-root-dir", &kubelet_root_dir)?;
        let placement = match mode {
            Mode::Replace => {
                let path = kubelet_config.ok_or_else(|| {
                    RescueError::Usage(
                        "--mode=replace needs --kubelet-config (the kubelet's --config)".into(),
                    )
                })?;
                absolute("kubelet-config", &path)?;
                Placement::ConfigFile { path }
            }
            Mode::DropIn => {
                let dir = drop_in_dir.ok_or_else(|| {
                    RescueError::Usage(
                        "--mode=drop-in needs --drop-in-dir (the kubelet's --config-dir)".into(),
                    )
                })?;
                absolute("drop-in-dir", &dir)?;
                Placement::DropIn {
                    dir,
                    name: DROP_IN_FILE.to_string(),
                }
            }
        };
        let health_timeout: Duration = health_timeout.into();
        if health_timeout.is_zero() {
            return Err(RescueError::Usage(
                "--health-timeout must be longer than zero".into(),
            ));
        }
        Ok(Settings {
            checkpoint_dir,
            placement,
            kubelet_root_dir,
            health_timeout,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::sha256_hex;

    fn cm(name: &str) -> ConfigRef {
        ConfigRef::configmap("kubelet-gitops", name)
    }

    fn cp(name: &str, rv: &str) -> Checkpoint {
        Checkpoint {
            config: cm(name),
            uid: format!("u-{name}"),
            resource_version: rv.into(),
            sha256: sha256_hex(name.as_bytes()),
        }
    }

    /// A node with `b` written (phase `Written` since 500), `a` last-known-good, the
    /// local config saved, no agent, at t=1000 with a 120s timeout.
    fn obs() -> Observed {
        Observed {
            now: 1000,
            health_timeout: 120,
            agent_running: false,
            assigned: Some(Assigned::new(
                cp("b", "2"),
                ApplyPhase::Written,
                500,
                Some(cp("a", "1")),
            )),
            last_known_good: Some(cp("a", "1")),
            local_original: Some(Checkpoint::local(b"local")),
            sighting: None,
        }
    }

    fn seen(first: u64, last: u64, starts: u32) -> Option<Sighting> {
        Some(Sighting {
            checkpoint: cp("b", "2"),
            since: 500,
            first_seen: first,
            last_seen: last,
            starts,
        })
    }

    #[test]
    fn nothing_in_flight_is_left_alone() {
        let mut o = obs();
        o.assigned = None;
        assert_eq!(decide(&o), Action::Nothing(Idle::NothingInFlight));
        for phase in [ApplyPhase::Verified, ApplyPhase::Checkpointed] {
            o.assigned = Some(Assigned::new(cp("b", "2"), phase, 500, None));
            assert_eq!(
                decide(&o),
                Action::Nothing(Idle::NothingInFlight),
                "{phase}"
            );
        }
    }

    #[test]
    fn a_running_agent_is_left_to_do_it() {
        let mut o = obs();
        o.agent_running = true;
        o.sighting = seen(800, 990, 20);
        assert_eq!(decide(&o), Action::Nothing(Idle::AgentRunning));
        let mut rolling = o.clone();
        rolling.assigned.as_mut().unwrap().failed = Some(Verdict {
            config: cm("c"),
            reason: "x".into(),
            at: 1,
            reported_to: None,
        });
        assert_eq!(decide(&rolling), Action::Nothing(Idle::AgentRunning));
    }

    #[test]
    fn the_first_sighting_is_recorded_and_the_kubelet_gets_its_chance() {
        for phase in [ApplyPhase::Written, ApplyPhase::Restarted] {
            let mut o = obs();
            o.assigned.as_mut().unwrap().phase = phase;
            assert_eq!(
                decide(&o),
                Action::Watch {
                    sighting: seen(1000, 1000, 1).unwrap(),
                    fresh: true
                },
                "{phase}"
            );
        }
        // A record of another apply (another checkpoint, or the same config's earlier
        // attempt) is stale.
        let mut o = obs();
        o.sighting = seen(100, 990, 9).map(|s| Sighting { since: 400, ..s });
        assert!(matches!(decide(&o), Action::Watch { fresh: true, .. }));
        o.sighting = seen(100, 990, 9).map(|s| Sighting {
            checkpoint: cp("b", "3"),
            ..s
        });
        assert!(matches!(decide(&o), Action::Watch { fresh: true, .. }));
    }

    #[test]
    fn later_starts_are_counted_until_the_timeout() {
        let mut o = obs();
        o.sighting = seen(900, 990, 9);
        assert_eq!(
            decide(&o),
            Action::Watch {
                sighting: seen(900, 1000, 10).unwrap(),
                fresh: false
            }
        );
    }

    #[test]
    fn a_kubelet_that_ran_longer_than_the_timeout_gets_a_new_chance() {
        let mut o = obs();
        o.sighting = seen(100, 870, 9);
        assert_eq!(
            decide(&o),
            Action::Watch {
                sighting: seen(1000, 1000, 1).unwrap(),
                fresh: true
            }
        );
    }

    #[test]
    fn after_the_timeout_it_rolls_back_to_last_known_good_recording_the_verdict() {
        let mut o = obs();
        o.sighting = seen(880, 990, 12);
        o.assigned.as_mut().unwrap().state_files = Some(vec!["cpu_manager_state".into()]);
        let Action::RollBack { to, record } = decide(&o) else {
            panic!("{:?}", decide(&o));
        };
        assert_eq!(to, cp("a", "1"));
        assert_eq!(record.checkpoint, cp("a", "1"));
        assert_eq!(record.phase, ApplyPhase::Checkpointed);
        assert_eq!(record.since, 1000);
        assert_eq!(record.previous, Some(cp("b", "2")));
        assert_eq!(record.state_files, Some(vec!["cpu_manager_state".into()]));
        let v = record.failed.unwrap();
        assert_eq!(v.config, cm("b"));
        assert_eq!(v.at, 1000);
        assert_eq!(v.reported_to, None);
        assert!(v.reason.starts_with(reason::UNHEALTHY), "{}", v.reason);
        assert!(
            v.reason.contains("kubelet-gitops/b")
                && v.reason.contains("no agent was running")
                && v.reason.contains("13 starts in 2m"),
            "{}",
            v.reason
        );
    }

    #[test]
    fn without_last_known_good_it_rolls_back_to_the_local_config() {
        let mut o = obs();
        o.sighting = seen(880, 990, 12);
        o.last_known_good = None;
        let Action::RollBack { to, record } = decide(&o) else {
            panic!("{:?}", decide(&o));
        };
        assert_eq!(to, Checkpoint::local(b"local"));
        assert_eq!(record.checkpoint.config, ConfigRef::Local);
        // Nothing saved either: nothing to go to.
        o.local_original = None;
        assert!(matches!(
            decide(&o),
            Action::Nothing(Idle::NoFallback { .. })
        ));
    }

    #[test]
    fn the_last_known_good_itself_failing_is_not_rolled_back() {
        let mut o = obs();
        o.sighting = seen(880, 990, 12);
        o.last_known_good = Some(cp("b", "2"));
        let Action::Nothing(Idle::NoFallback { config, why }) = decide(&o) else {
            panic!("{:?}", decide(&o));
        };
        assert_eq!(config, cm("b"));
        assert!(why.contains("last-known-good"), "{why}");
    }

    #[test]
    fn a_recorded_rollback_is_carried_on_and_its_fallback_is_not_rolled_back() {
        let verdict = Verdict {
            config: cm("b"),
            reason: "kubelet did not become healthy: x".into(),
            at: 900,
            reported_to: None,
        };
        let mut o = obs();
        for (phase, action) in [
            (ApplyPhase::Checkpointed, Action::CarryOn),
            (ApplyPhase::Written, Action::CarryOn),
            (
                ApplyPhase::Restarted,
                Action::Nothing(Idle::FallbackOnTrial {
                    fallback: cm("a"),
                    failed: cm("b"),
                }),
            ),
            (ApplyPhase::Verified, Action::Nothing(Idle::NothingInFlight)),
        ] {
            o.assigned = Some(Assigned {
                failed: Some(verdict.clone()),
                ..Assigned::new(cp("a", "1"), phase, 900, Some(cp("b", "2")))
            });
            assert_eq!(decide(&o), action, "{phase}");
        }
    }

    #[test]
    fn the_command_line_takes_the_agents_names_and_defaults() {
        let agent = crate::args::Args::command();
        let rescue = RescueArgs::command();
        for id in [
            "checkpoint_dir",
            "mode",
            "kubelet_config",
            "drop_in_dir",
            "health_timeout",
            "log",
        ] {
            let a = agent.get_arguments().find(|a| a.get_id() == id).unwrap();
            let r = rescue.get_arguments().find(|a| a.get_id() == id).unwrap();
            assert_eq!(a.get_long(), r.get_long(), "{id}");
            assert_eq!(a.get_env(), r.get_env(), "{id}");
            assert_eq!(a.get_default_values(), r.get_default_values(), "{id}");
            assert_eq!(a.get_possible_values(), r.get_possible_values(), "{id}");
        }
        rescue.clone().debug_assert();
        let s =
            RescueArgs::try_parse_from(["x", "--kubelet-config", "/var/lib/kubelet/config.yaml"])
                .unwrap()
                .into_settings()
                .unwrap();
        assert_eq!(s.checkpoint_dir, Path::new("/var/lib/kubelet-gitops"));
        assert_eq!(s.health_timeout, Duration::from_secs(120));
        assert_eq!(s.kubelet_root_dir, Path::new(DEFAULT_ROOT_DIR));
        assert_eq!(
            s.placement,
            Placement::ConfigFile {
                path: "/var/lib/kubelet/config.yaml".into()
            }
        );
        let s = RescueArgs::try_parse_from([
            "x",
            "--mode=drop-in",
            "--drop-in-dir=/etc/kubernetes/kubelet.conf.d",
        ])
        .unwrap()
        .into_settings()
        .unwrap();
        assert_eq!(
            s.placement.target(),
            Path::new("/etc/kubernetes/kubelet.conf.d/50-kubelet-gitops.conf")
        );
        for (argv, want) in [
            (&["x"][..], "--kubelet-config"),
            (&["x", "--mode=drop-in"][..], "--drop-in-dir"),
            (&["x", "--kubelet-config=rel"][..], "absolute"),
            (
                &["x", "--kubelet-config=/k", "--health-timeout=0s"][..],
                "zero",
            ),
        ] {
            let e = RescueArgs::try_parse_from(argv)
                .unwrap()
                .into_settings()
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{argv:?}: {e}");
        }
    }
}
