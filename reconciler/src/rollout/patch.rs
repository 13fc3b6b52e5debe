//! What the reconciler writes on a Node: the reconciler annotations of the node protocol
//! (and, for a drain, `spec.unschedulable`), as a JSON merge patch ([`annotation_patch`]),
//! and whether a change would alter anything ([`is_noop`]).

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use kubelet_gitops_core::protocol::{
    CORDONED, ConfigRef, DESIRED_CONFIG, DRAIN, DRAIN_BLOCKED, DRAIN_SINCE, HEALTH_TIMEOUT,
    LKG_GRACE, POOL,
};
use serde_json::{Map, Value};

use crate::model::NodeInfo;

/// A change to one node's reconciler annotations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeChange {
    /// Point the node at `desired`, with the pool's rollout timings for the agent.
    Assign {
        /// Shared by the pool's actions.
        desired: Arc<ConfigRef>,
        health_timeout: Duration,
        lkg_grace: Duration,
    },
    /// Remove the reconciler's annotations: the node returns to its local config.
    Unassign,
    /// Begin a drain for `drain`: cordon (`spec.unschedulable: true`) and record it, in one
    /// write. The controller leaves the cordon (and [`CORDONED`]) out when a person had
    /// cordoned the node already.
    Cordon {
        drain: Arc<ConfigRef>,
        since: Timestamp,
    },
    /// End a drain: the drain annotations go, and `spec.unschedulable` too when `uncordon`
    /// (the reconciler had set it).
    Release { uncordon: bool },
    /// Give a drain up after `drainTimeout`: uncordon (when ours) and say why.
    GiveUp { message: String, uncordon: bool },
}

impl NodeChange {
    /// Whether the write also lifts or sets `spec.unschedulable` (and which).
    pub fn unschedulable(&self) -> Option<bool> {
        match self {
            NodeChange::Cordon { .. } => Some(true),
            NodeChange::Release { uncordon: true } | NodeChange::GiveUp { uncordon: true, .. } => {
                Some(false)
            }
            _ => None,
        }
    }
}

/// The value each reconciler annotation takes after `change` (`None`: removed).
fn annotation_values(
    pool: Option<&str>,
    change: &NodeChange,
) -> Vec<(&'static str, Option<String>)> {
    match change {
        NodeChange::Assign {
            desired,
            health_timeout,
            lkg_grace,
        } => [
            (DESIRED_CONFIG, Some(desired.to_string())),
            (
                HEALTH_TIMEOUT,
                Some(humantime::format_duration(*health_timeout).to_string()),
            ),
            (
                LKG_GRACE,
                Some(humantime::format_duration(*lkg_grace).to_string()),
            ),
            (POOL, pool.map(str::to_string)),
        ]
        .into(),
        NodeChange::Unassign => [
            (DESIRED_CONFIG, None),
            (HEALTH_TIMEOUT, None),
            (LKG_GRACE, None),
            (POOL, None),
        ]
        .into(),
        NodeChange::Cordon { drain, since } => [
            (DRAIN, Some(drain.to_string())),
            (
                DRAIN_SINCE,
                Some(since.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()),
            ),
            (CORDONED, Some("true".to_string())),
            (DRAIN_BLOCKED, None),
        ]
        .into(),
        NodeChange::Release { .. } => [
            (DRAIN, None),
            (DRAIN_SINCE, None),
            (CORDONED, None),
            (DRAIN_BLOCKED, None),
        ]
        .into(),
        NodeChange::GiveUp { message, .. } => {
            [(CORDONED, None), (DRAIN_BLOCKED, Some(message.clone()))].into()
        }
    }
}

/// The JSON merge patch (`{"metadata":{"annotations":{...}}}`) that applies `change`:
/// `Assign` sets desired-config (`<namespace>/<configmap>`), health-timeout and lkg-grace
/// (humantime, `2m`, `1m 30s`) and pool (null when `pool` is `None`); `Unassign` sets all
/// four to null. A drain's changes set or clear the drain annotations, with
/// `spec.unschedulable` (`true`, or null to lift it) when [`NodeChange::unschedulable`]
/// says so. The agent's annotations are never touched.
pub fn annotation_patch(pool: Option<&str>, change: &NodeChange) -> Value {
    let annotations: Map<String, Value> = annotation_values(pool, change)
        .into_iter()
        .map(|(key, value)| (key.to_string(), value.map_or(Value::Null, Value::String)))
        .collect();
    let mut metadata = Map::new();
    metadata.insert("annotations".to_string(), Value::Object(annotations));
    let mut root = Map::new();
    root.insert("metadata".to_string(), Value::Object(metadata));
    if let Some(cordon) = change.unschedulable() {
        let value = if cordon {
            Value::Bool(true)
        } else {
            Value::Null
        };
        root.insert(
            "spec".to_string(),
            Value::Object(Map::from_iter([("unschedulable".to_string(), value)])),
        );
    }
    Value::Object(root)
}

/// Whether applying `change` to `node` would leave its annotations as they are.
pub fn is_noop(node: &NodeInfo, pool: Option<&str>, change: &NodeChange) -> bool {
    annotation_values(pool, change)
        .iter()
        .all(|(key, value)| node.annotations.get(key) == value.as_deref())
}
