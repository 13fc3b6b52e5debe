//! What the reconciler writes on a Node: the four reconciler annotations of the node
//! protocol, as a JSON merge patch ([`annotation_patch`]), and whether a change would
//! alter anything ([`is_noop`]).

use std::sync::Arc;
use std::time::Duration;

use kubelet_gitops_core::protocol::{ConfigRef, DESIRED_CONFIG, HEALTH_TIMEOUT, LKG_GRACE, POOL};
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
}

/// The value each reconciler annotation takes after `change` (`None`: removed).
fn annotation_values(
    pool: Option<&str>,
    change: &NodeChange,
) -> [(&'static str, Option<String>); 4] {
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
        ],
        NodeChange::Unassign => [
            (DESIRED_CONFIG, None),
            (HEALTH_TIMEOUT, None),
            (LKG_GRACE, None),
            (POOL, None),
        ],
    }
}

/// The JSON merge patch (`{"metadata":{"annotations":{...}}}`) that applies `change`:
/// `Assign` sets desired-config (`<namespace>/<configmap>`), health-timeout and lkg-grace
/// (humantime, `2m`, `1m 30s`) and pool (null when `pool` is `None`); `Unassign` sets all
/// four to null. The agent's annotations are never touched.
pub fn annotation_patch(pool: Option<&str>, change: &NodeChange) -> Value {
    let annotations: Map<String, Value> = annotation_values(pool, change)
        .into_iter()
        .map(|(key, value)| (key.to_string(), value.map_or(Value::Null, Value::String)))
        .collect();
    let mut metadata = Map::new();
    metadata.insert("annotations".to_string(), Value::Object(annotations));
    let mut root = Map::new();
    root.insert("metadata".to_string(), Value::Object(metadata));
    Value::Object(root)
}

/// Whether applying `change` to `node` would leave its annotations as they are.
pub fn is_noop(node: &NodeInfo, pool: Option<&str>, change: &NodeChange) -> bool {
    annotation_values(pool, change)
        .iter()
        .all(|(key, value)| node.annotations.get(key) == value.as_deref())
}
