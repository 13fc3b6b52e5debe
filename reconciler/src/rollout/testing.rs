//! Test fixtures for rollout and GC planning: node and pool builders, a merge-patch
//! applier and a fake agent.

use std::collections::BTreeMap;

use kubelet_gitops_core::protocol::{
    CURRENT_CONFIG, ConfigRef, DESIRED_CONFIG, LAST_KNOWN_GOOD, MESSAGE, OBSERVED_CONFIG, STATE,
    State,
};

use super::{NodeAction, PoolTarget, RolloutPlan};
use crate::model::{IntOrPercent, LabelSelector, NodeInfo, PoolSpec, Rollout};
use kubelet_gitops_core::disruption::Class;

/// The namespace the fixtures publish in.
pub const NS: &str = "kubelet-gitops";

/// `kubelet-gitops/<name>`.
pub fn cm(name: &str) -> ConfigRef {
    ConfigRef::configmap(NS, name)
}

/// Builds a [`NodeInfo`].
#[derive(Debug, Clone)]
pub struct NodeBuilder(NodeInfo);

pub fn node(name: &str) -> NodeBuilder {
    NodeBuilder(NodeInfo {
        name: name.to_string(),
        ..NodeInfo::default()
    })
}

impl NodeBuilder {
    pub fn labels(mut self, pairs: &[(&str, &str)]) -> Self {
        for (k, v) in pairs {
            self.0.labels.insert(k.to_string(), v.to_string());
        }
        self
    }
    pub fn canary(self) -> Self {
        self.labels(&[(super::CANARY_LABEL, "true")])
    }
    pub fn created(mut self, rfc3339: &str) -> Self {
        self.0.created = Some(rfc3339.to_string());
        self
    }
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.0
            .annotations
            .insert(key.to_string(), value.to_string());
        self
    }
    pub fn desired(self, r: &str) -> Self {
        self.annotation(DESIRED_CONFIG, r)
    }
    pub fn current(self, r: &str) -> Self {
        self.annotation(CURRENT_CONFIG, r)
    }
    pub fn observed(self, r: &str) -> Self {
        self.annotation(OBSERVED_CONFIG, r)
    }
    pub fn lkg(self, r: &str) -> Self {
        self.annotation(LAST_KNOWN_GOOD, r)
    }
    pub fn state(self, s: State) -> Self {
        self.annotation(STATE, s.as_str())
    }
    pub fn message(self, m: &str) -> Self {
        self.annotation(MESSAGE, m)
    }
    /// Assigned `r` by `pool` with the default rollout settings, and Done on it.
    pub fn done_on(self, pool: &str, r: &str) -> Self {
        self.assigned(pool, r)
            .observed(r)
            .current(r)
            .lkg(r)
            .state(State::Done)
    }
    /// Assigned `r` by `pool` with the default rollout settings (no report yet).
    pub fn assigned(mut self, pool: &str, r: &str) -> Self {
        let change = super::NodeChange::Assign {
            desired: std::sync::Arc::new(r.parse().expect("fixture config ref")),
            health_timeout: Rollout::default().health_timeout,
            lkg_grace: Rollout::default().lkg_grace,
        };
        apply_patch(&mut self.0, &super::annotation_patch(Some(pool), &change));
        self
    }
    pub fn build(self) -> NodeInfo {
        self.0
    }
}

impl From<NodeBuilder> for NodeInfo {
    fn from(b: NodeBuilder) -> NodeInfo {
        b.0
    }
}

/// Builds a [`PoolSpec`] selecting `pool=<name>`.
#[derive(Debug, Clone)]
pub struct PoolBuilder(PoolSpec);

pub fn pool(name: &str) -> PoolBuilder {
    PoolBuilder(PoolSpec {
        name: name.to_string(),
        source_path: format!("pools/{name}.yaml"),
        selector: LabelSelector {
            match_labels: BTreeMap::from([("pool".to_string(), name.to_string())]),
            match_expressions: Vec::new(),
        },
        priority: 0,
        rollout: Rollout::default(),
    })
}

impl PoolBuilder {
    pub fn selector(mut self, pairs: &[(&str, &str)]) -> Self {
        self.0.selector.match_labels = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self
    }
    pub fn max_unavailable(mut self, m: IntOrPercent) -> Self {
        self.0.rollout.max_unavailable = m;
        self
    }
    pub fn canary(mut self, n: u32) -> Self {
        self.0.rollout.canary = n;
        self
    }
    pub fn maintenance(mut self, m: crate::model::Maintenance) -> Self {
        self.0.rollout.maintenance = Some(m);
        self
    }
    pub fn waves(mut self, w: crate::model::Waves) -> Self {
        self.0.rollout.waves = Some(w);
        self
    }
    pub fn drain(mut self, mode: crate::model::DrainMode) -> Self {
        self.0.rollout.drain.mode = mode;
        self
    }
    pub fn paused(mut self) -> Self {
        self.0.rollout.paused = true;
        self
    }
    pub fn build(self) -> PoolSpec {
        self.0
    }
}

/// Applies a JSON merge patch's annotations to `node` (null removes), as the API server
/// would.
pub fn apply_patch(node: &mut NodeInfo, patch: &serde_json::Value) {
    let annotations = patch["metadata"]["annotations"]
        .as_object()
        .expect("a merge patch of annotations");
    for (key, value) in annotations {
        match value {
            serde_json::Value::Null => {
                node.annotations.remove(key);
            }
            serde_json::Value::String(s) => {
                node.annotations.insert(key.clone(), s.clone());
            }
            other => panic!("annotation {key} set to a non-string {other}"),
        }
    }
}

/// Applies every action of `plan` to `nodes`.
pub fn apply_plan(nodes: &mut [NodeInfo], plan: &RolloutPlan) {
    for action in &plan.actions {
        apply_action(nodes, action);
    }
}

pub fn apply_action(nodes: &mut [NodeInfo], action: &NodeAction) {
    let node = nodes
        .iter_mut()
        .find(|n| *n.name == *action.node)
        .expect("action for a known node");
    apply_patch(node, &action.patch());
}

/// A fake agent: moves a node one step towards its desired config (observe and start
/// Downloading, then Applying, Verifying, Done). Returns whether it changed anything.
pub fn agent_step(node: &mut NodeInfo) -> bool {
    let Some(desired) = node.annotations.get(DESIRED_CONFIG).map(str::to_string) else {
        return false;
    };
    let observed = node.annotations.get(OBSERVED_CONFIG);
    let state = node
        .annotations
        .get(STATE)
        .and_then(|s| s.parse::<State>().ok());
    let next = if observed != Some(desired.as_str()) {
        State::Downloading
    } else {
        match state {
            Some(State::Downloading) => State::Applying,
            Some(State::Applying) => State::Verifying,
            Some(State::Verifying) => State::Done,
            _ => return false,
        }
    };
    let a = &mut node.annotations;
    a.insert(OBSERVED_CONFIG, desired.as_str());
    a.insert(STATE, next.as_str());
    a.remove(MESSAGE);
    if next == State::Done {
        a.insert(CURRENT_CONFIG, desired.as_str());
        a.insert(LAST_KNOWN_GOOD, desired);
    }
    true
}

/// The ConfigMap [`new_target`] names.
pub const NEW_TARGET: &str = "kubelet-gpu-new";

/// `spec`'s target [`NEW_TARGET`], published 2025-01-01 (before every test node), of
/// change class `class`.
pub fn new_target(spec: &PoolSpec, class: Option<Class>) -> PoolTarget<'_> {
    PoolTarget {
        spec,
        target: cm(NEW_TARGET),
        target_created: Some("2025-01-01T00:00:00Z".into()),
        class,
        wave_opened: None,
    }
}
