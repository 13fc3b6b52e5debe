//! Draining a node before a `drain`-class change: the pool's choice ([`Drain`]), what the
//! node's annotations say of a drain ([`DrainView`]), what the reconciler last saw of the
//! node's pods ([`DrainSeen`]), and the work the controller does between rounds
//! ([`DrainTask`]). Pure: the controller lists and evicts (`controller::drain`); the
//! planner decides from the annotations and the last observation.
//!
//! # The steps of one node (`drain: auto`)
//!
//! 1. **Cordon**: the node gets `spec.unschedulable: true` and the drain annotations
//!    ([`DRAIN`] naming the target, [`DRAIN_SINCE`], [`CORDONED`] when the reconciler set
//!    the flag) in one write: a node is never cordoned without the record that lets a
//!    restarted reconciler lift it. A node a person cordoned before keeps their cordon:
//!    no [`CORDONED`], never uncordoned by us.
//! 2. **Evict** (between rounds, [`DrainWork::Evict`]): every pod on the node but
//!    DaemonSet pods, mirror pods and finished pods, through the Eviction API; a 429 (a
//!    PodDisruptionBudget) is retried every round until `drainTimeout`.
//! 3. **Assign** once an observation shows no such pod left: the agent applies as usual.
//! 4. **Uncordon** when the agent reports an outcome (Done, RolledBack or Degraded):
//!    `spec.unschedulable` is lifted if [`CORDONED`] says we set it, and the drain
//!    annotations go, in one write.
//!
//! A drain past `drainTimeout` with pods left gives up: the node is uncordoned and
//! [`DRAIN_BLOCKED`] says which pod or budget blocked; the pool halts on it like on a
//! failed node, until a new commit ([`DrainWork::Force`] instead, with `drainForce`).
//! A drain for a config that is no longer the target, or in a pool that may not assign
//! (paused, halted), is released (uncordoned) as soon as the node is not busy.
//!
//! # `drain: manual`
//! A node to assign waits until a person has cordoned it and emptied it (the controller
//! checks, [`DrainWork::Check`]); the reconciler never cordons nor uncordons it.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use kubelet_gitops_core::protocol::{CORDONED, ConfigRef, DRAIN, DRAIN_BLOCKED, DRAIN_SINCE};

use crate::model::NodeInfo;

/// How a pool empties a node before a `drain`-class change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DrainMode {
    /// The reconciler cordons, evicts, applies and uncordons.
    #[default]
    Auto,
    /// A person cordons and drains; the reconciler waits for an empty, cordoned node.
    Manual,
    /// No drain: the change is applied with the pods running (the kubelet restarts).
    Never,
}

impl DrainMode {
    pub fn as_str(self) -> &'static str {
        match self {
            DrainMode::Auto => "auto",
            DrainMode::Manual => "manual",
            DrainMode::Never => "never",
        }
    }

    /// Parses the repository's spelling.
    pub fn parse(s: &str) -> Result<DrainMode, String> {
        match s {
            "auto" => Ok(DrainMode::Auto),
            "manual" => Ok(DrainMode::Manual),
            "never" => Ok(DrainMode::Never),
            other => Err(format!(
                "invalid value {other:?}: expected `auto` (the reconciler cordons, evicts \
                 and uncordons), `manual` (it waits for a person to drain the node) or \
                 `never` (apply with the pods running)"
            )),
        }
    }
}

impl fmt::Display for DrainMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A pool's drain settings (`rollout.drain`, `rollout.drainTimeout`, `rollout.drainForce`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drain {
    pub mode: DrainMode,
    /// How long pods may keep a node from emptying before the pool halts.
    pub timeout: Duration,
    /// After the timeout, delete the pods left (budgets overridden) instead of halting.
    pub force: bool,
}

impl Default for Drain {
    fn default() -> Self {
        Drain {
            mode: DrainMode::Auto,
            timeout: Duration::from_secs(30 * 60),
            force: false,
        }
    }
}

/// How often a drain in progress is looked at again (pods gone, a budget that allows an
/// eviction now): kubectl drain's own retry interval.
pub const DRAIN_RETRY: Duration = Duration::from_secs(5);

/// When a drain (or a manual pool's check) waiting at `now` is looked at again.
pub fn retry_at(now: Timestamp) -> Timestamp {
    SignedDuration::try_from(DRAIN_RETRY)
        .ok()
        .and_then(|d| now.checked_add(d).ok())
        .unwrap_or(Timestamp::MAX)
}

/// What the controller last saw of a node's pods.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DrainSeen {
    /// `spec.unschedulable` (read for `drain: manual`).
    pub unschedulable: bool,
    /// Pods that must leave before the change: not owned by a DaemonSet, not mirror pods,
    /// not finished (terminating ones included, until they are gone).
    pub pods_left: usize,
    /// Why one of them did not go at the last try: a PodDisruptionBudget's refusal, a pod
    /// still terminating, an API error.
    pub blocker: Option<String>,
}

/// The controller's observations, by node.
pub type DrainObservations = HashMap<Arc<str>, DrainSeen>;

/// What the controller does for a node between rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrainWork {
    /// Evict the node's pods (respecting PodDisruptionBudgets), then observe.
    Evict,
    /// Delete the node's pods left (the pool's `drainForce` after `drainTimeout`).
    Force,
    /// Only observe (is it cordoned, which pods are left): `drain: manual`.
    Check,
}

/// One node's drain work for the controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainTask {
    pub node: Arc<str>,
    pub work: DrainWork,
}

/// The drain annotations of a node, parsed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct DrainView {
    /// The config the node is (or was) drained for; `None` when not parseable.
    pub target: Option<ConfigRef>,
    /// Whether any drain annotation is present (to clean up, even unparseable ones).
    pub present: bool,
    pub since: Option<Timestamp>,
    /// The reconciler set `spec.unschedulable`.
    pub cordoned: bool,
    pub blocked: Option<String>,
}

impl DrainView {
    pub fn of(node: &NodeInfo) -> DrainView {
        let get = |k: &str| node.annotations.get(k);
        DrainView {
            target: get(DRAIN).and_then(|v| v.parse().ok()),
            present: [DRAIN, DRAIN_SINCE, CORDONED, DRAIN_BLOCKED]
                .iter()
                .any(|k| get(k).is_some()),
            since: get(DRAIN_SINCE).and_then(|v| v.parse().ok()),
            cordoned: get(CORDONED).is_some_and(|v| v == "true"),
            blocked: get(DRAIN_BLOCKED).map(str::to_string),
        }
    }

    /// Whether the node is being drained for `target` (cordoned, not given up).
    pub fn draining_for(&self, target: &ConfigRef) -> bool {
        self.target.as_ref() == Some(target) && self.blocked.is_none()
    }

    /// Whether the drain for `target` gave up (the pool halts).
    pub fn blocked_for(&self, target: &ConfigRef) -> Option<&str> {
        (self.target.as_ref() == Some(target))
            .then_some(self.blocked.as_deref())
            .flatten()
    }
}

/// The message a drain that gave up leaves on the node.
pub fn blocked_message(timeout: Duration, seen: Option<&DrainSeen>) -> String {
    let left = seen.map_or(0, |s| s.pods_left);
    let why = seen
        .and_then(|s| s.blocker.as_deref())
        .unwrap_or("no observation of its pods yet");
    format!(
        "drain gave up after drainTimeout {}: {left} pod(s) left; {why}",
        humantime::format_duration(timeout)
    )
}
