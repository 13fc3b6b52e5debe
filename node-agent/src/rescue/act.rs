//! The rescue's effects: reading the checkpoint directory for [`decide`], and carrying
//! the decision out in an order that makes every interruption safe (see [`execute`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use kubelet_gitops_core::protocol::ConfigRef;
use tracing::{debug, error, info, warn};

use super::decide::{Action, Idle, Observed, Sighting, decide};
use super::{RescueError, SIGHTING_FILE, io_err};
use crate::checkpoint::{
    ASSIGNED_FILE, ApplyPhase, Assigned, Checkpoint, CheckpointStore, meta_path, read_framed,
    write_framed,
};
use crate::config_file::{ConfigFile, Placement};
use crate::kubelet::remove_state_files;
use crate::lock::AgentLock;

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
/// flight and no agent runs; see [`super`].
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
    let file = ConfigFile::new(settings.placement.clone(), Path::new("/"));
    file.write(&payload)?;
    info!(config = %a.checkpoint.config, path = %file.path().display(), sha256 = %a.checkpoint.sha256, "fallback written");
    store.set_assigned(&Assigned {
        phase: ApplyPhase::Restarted,
        since: now,
        ..a.clone()
    })?;
    info!(config = %a.checkpoint.config, "phase Restarted recorded; the kubelet starts on the fallback, and the agent verifies it when it runs");
    Ok(a.checkpoint.config)
}
