//! [`NodeView`]: the part of a Node the protocol is about, and pure checks over a
//! recorded history of them ([`trace_rollout`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kubelet_gitops_core::protocol;

use crate::POOL_LABEL;

/// A Node as the node protocol sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    /// The Node's name.
    pub name: String,
    /// Its resourceVersion (the sim's single counter: comparable across Nodes).
    pub resource_version: u64,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// `kubelet-gitops.io/desired-config` (the reconciler's).
    pub desired: Option<String>,
    /// `kubelet-gitops.io/observed-config` (the agent's).
    pub observed: Option<String>,
    /// `kubelet-gitops.io/current-config`.
    pub current: Option<String>,
    /// `kubelet-gitops.io/last-known-good`.
    pub last_known_good: Option<String>,
    /// `kubelet-gitops.io/state`.
    pub state: Option<String>,
    /// `kubelet-gitops.io/message`.
    pub message: Option<String>,
    /// The `Ready` condition's status.
    pub ready: Option<String>,
    /// The Node was deleted (a watch `DELETED` event).
    pub deleted: bool,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// `kubelet-gitops.io/drain` (the reconciler drains it for that config).
    pub drain: Option<String>,
}

impl NodeView {
    /// The view of `node`.
    pub fn from_node(node: &Node) -> NodeView {
        let meta = &node.metadata;
        let ann = |key: &str| meta.annotations.as_ref().and_then(|a| a.get(key)).cloned();
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .map(|c| c.status.clone());
        NodeView {
            name: meta.name.clone().unwrap_or_default(),
            resource_version: meta
                .resource_version
                .as_deref()
                .and_then(|rv| rv.parse().ok())
                .unwrap_or(0),
            labels: meta.labels.clone().unwrap_or_default(),
            desired: ann(protocol::DESIRED_CONFIG),
            observed: ann(protocol::OBSERVED_CONFIG),
            current: ann(protocol::CURRENT_CONFIG),
            last_known_good: ann(protocol::LAST_KNOWN_GOOD),
            state: ann(protocol::STATE),
            message: ann(protocol::MESSAGE),
            ready,
            deleted: false,
            unschedulable: node
                .spec
                .as_ref()
                .and_then(|s| s.unschedulable)
                .unwrap_or(false),
            drain: ann(protocol::DRAIN),
        }
    }

    /// The node's pool label (`node.kubernetes.io/pool`).
    pub fn pool(&self) -> Option<&str> {
        self.labels.get(POOL_LABEL).map(String::as_str)
    }

    /// Told to run `config` (`<namespace>/<configmap>`), and the agent reports it runs it.
    pub fn done_on(&self, config: &str) -> bool {
        self.desired.as_deref() == Some(config)
            && self.observed.as_deref() == Some(config)
            && self.current.as_deref() == Some(config)
            && self.state.as_deref() == Some("Done")
    }

    /// The agent has an outcome for what the node is told to run: Done on it, or a
    /// failure about it. A node without desired-config is settled (nothing to do).
    pub fn settled(&self) -> bool {
        let Some(desired) = self.desired.as_deref() else {
            return true;
        };
        if self.observed.as_deref() != Some(desired) {
            return false;
        }
        match self.state.as_deref() {
            Some("Done") => self.current.as_deref() == Some(desired),
            Some("Degraded" | "RolledBack") => true,
            _ => false,
        }
    }

    /// Back on the node's local config with nothing assigned.
    pub fn on_local(&self) -> bool {
        self.desired.is_none()
            && self.current.as_deref() == Some(protocol::LOCAL)
            && self.state.is_none()
    }

    /// One line for failure messages.
    pub fn line(&self) -> String {
        let o = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
        format!(
            "{} pool={} desired={} observed={} current={} lkg={} state={} ready={} message={}",
            self.name,
            self.pool().unwrap_or("-"),
            o(&self.desired),
            o(&self.observed),
            o(&self.current),
            o(&self.last_known_good),
            o(&self.state),
            o(&self.ready),
            o(&self.message),
        )
    }
}

/// Every node's [`NodeView::line`].
pub fn summary<'a>(nodes: impl IntoIterator<Item = &'a NodeView>) -> String {
    nodes
        .into_iter()
        .map(|n| format!("  {}", n.line()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The nodes after each event of `history` (views in resourceVersion order).
pub fn replay(history: &[NodeView]) -> impl Iterator<Item = BTreeMap<String, NodeView>> + '_ {
    let mut now: BTreeMap<String, NodeView> = BTreeMap::new();
    history.iter().map(move |v| {
        if v.deleted {
            now.remove(&v.name);
        } else {
            now.insert(v.name.clone(), v.clone());
        }
        now.clone()
    })
}

/// How the rollout of `target` in `pool` went, replayed from a node history.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RolloutTrace {
    /// Nodes in the order they were first told to run `target`.
    pub assigned: Vec<String>,
    /// Nodes in the order they first reported Done on `target`.
    pub done: Vec<String>,
    /// The most nodes of the pool that were busy at once (told to run something they
    /// had not settled on), at any point of the history.
    pub max_busy: usize,
    /// Nodes outside `canary` told to run `target` before every canary node was Done
    /// on it.
    pub assigned_before_canary_done: Vec<String>,
}

/// Replays `history` for the rollout of `target` (`<namespace>/<configmap>`) in `pool`
/// whose canary nodes are `canary`.
pub fn trace_rollout(
    history: &[NodeView],
    pool: &str,
    target: &str,
    canary: &[&str],
) -> RolloutTrace {
    let mut trace = RolloutTrace::default();
    for nodes in replay(history) {
        let members: Vec<&NodeView> = nodes.values().filter(|n| n.pool() == Some(pool)).collect();
        let canary_done = canary
            .iter()
            .all(|c| nodes.get(*c).is_some_and(|n| n.done_on(target)));
        for n in &members {
            if n.desired.as_deref() == Some(target) && !trace.assigned.contains(&n.name) {
                trace.assigned.push(n.name.clone());
                if !canary_done && !canary.contains(&n.name.as_str()) {
                    trace.assigned_before_canary_done.push(n.name.clone());
                }
            }
            if n.done_on(target) && !trace.done.contains(&n.name) {
                trace.done.push(n.name.clone());
            }
        }
        let busy = members.iter().filter(|n| !n.settled()).count();
        trace.max_busy = trace.max_busy.max(busy);
    }
    trace
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(name: &str, rv: u64, desired: Option<&str>, state: Option<&str>) -> NodeView {
        let s = |v: Option<&str>| v.map(str::to_string);
        let done = state == Some("Done");
        NodeView {
            name: name.into(),
            resource_version: rv,
            labels: [(POOL_LABEL.to_string(), "p".to_string())].into(),
            desired: s(desired),
            observed: if state.is_some() { s(desired) } else { None },
            current: if done {
                s(desired)
            } else {
                Some("local".into())
            },
            last_known_good: None,
            state: s(state),
            message: None,
            ready: Some("True".into()),
            deleted: false,
            unschedulable: false,
            drain: None,
        }
    }

    #[test]
    fn a_canary_first_rollout_one_at_a_time_traces_clean() {
        let t = Some("ns/t");
        let history = vec![
            view("a", 1, None, None),
            view("b", 2, None, None),
            view("a", 3, t, None),
            view("a", 4, t, Some("Applying")),
            view("a", 5, t, Some("Done")),
            view("b", 6, t, None),
            view("b", 7, t, Some("Done")),
        ];
        let trace = trace_rollout(&history, "p", "ns/t", &["a"]);
        assert_eq!(trace.assigned, ["a", "b"]);
        assert_eq!(trace.done, ["a", "b"]);
        assert_eq!(trace.max_busy, 1);
        assert!(trace.assigned_before_canary_done.is_empty());
    }

    #[test]
    fn assigning_past_the_canary_and_the_budget_shows() {
        let t = Some("ns/t");
        let history = vec![
            view("a", 1, t, None),
            view("b", 2, t, None),
            view("a", 3, t, Some("Done")),
            view("b", 4, t, Some("Done")),
        ];
        let trace = trace_rollout(&history, "p", "ns/t", &["a"]);
        assert_eq!(trace.assigned_before_canary_done, ["b"]);
        assert_eq!(trace.max_busy, 2);
    }
}
