//! One node's standing with respect to its pool's target config ([`node_status`]), and
//! the order in which a pool's nodes are rolled ([`canary_order`]).

use std::time::SystemTime;

use kubelet_gitops_core::protocol::{
    CURRENT_CONFIG, ConfigRef, DESIRED_CONFIG, DRAIN, MESSAGE, OBSERVED_CONFIG, STATE, State,
};

use super::drain::DrainView;
use crate::model::NodeInfo;

/// Why a node failed on its pool's target: the agent's report, or the drain before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The agent reported `Degraded` or `RolledBack`.
    Agent(State),
    /// The drain gave up after the pool's `drainTimeout` (the node was never assigned).
    DrainTimeout,
}

impl Failure {
    pub fn as_str(self) -> &'static str {
        match self {
            Failure::Agent(s) => s.as_str(),
            Failure::DrainTimeout => "DrainTimeout",
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The label that puts a node at the front of its pool's canary order
/// (`kubelet-gitops.io/canary=true`).
pub const CANARY_LABEL: &str = "kubelet-gitops.io/canary";

/// Where a node is with respect to a target config `T`.
///
/// A node "settles" on the config named in its desired-config annotation when the agent
/// reports about exactly that config (observed-config equals desired-config) with an
/// outcome: `Done` with current-config equal to it, `Degraded` or `RolledBack`. Until then
/// the node is busy, whatever config it is busy with, and counts against maxUnavailable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeRolloutStatus {
    /// Desired, observed and current config are `T` and the agent reports `Done`.
    Done,
    /// The agent reports `Degraded` or `RolledBack` about `T`, which is still desired, or
    /// the drain for `T` gave up. The pool halts.
    Failed {
        state: Failure,
        /// The agent's message, if it wrote one.
        message: Option<String>,
    },
    /// `T` is desired and the node has not settled on it yet (not yet observed, still
    /// `Downloading`/`Applying`/`Verifying`, no or an unknown state, or `Done` without
    /// current-config naming `T`).
    InProgress,
    /// Being drained for `T` (cordoned, its pods leaving), not assigned yet.
    Draining,
    /// Another ConfigMap is desired and the node has not settled on it (typically the
    /// previous target, mid-rollout). Not on `T` yet, but unavailable all the same.
    Busy {
        /// The config the node is busy with.
        desired: ConfigRef,
    },
    /// Not given `T` yet, and idle: no desired-config, the node's local config, or another
    /// ConfigMap it has settled on (including a failure about an older target).
    Waiting,
}

impl NodeRolloutStatus {
    /// Between assignment and an outcome, on any config: counts against maxUnavailable.
    pub fn is_busy(&self) -> bool {
        matches!(
            self,
            NodeRolloutStatus::InProgress
                | NodeRolloutStatus::Draining
                | NodeRolloutStatus::Busy { .. }
        )
    }
}

/// The protocol annotations of a node, parsed. A value that does not parse counts as
/// absent: an unparseable desired-config is not a ConfigMap of ours, an unparseable
/// observed-config is "not reported yet", an unknown state is no outcome.
pub(crate) struct NodeView<'a> {
    pub desired: Option<ConfigRef>,
    pub current: Option<ConfigRef>,
    pub observed: Option<ConfigRef>,
    pub state: Option<State>,
    pub message: Option<&'a str>,
}

impl<'a> NodeView<'a> {
    pub fn of(node: &'a NodeInfo) -> NodeView<'a> {
        let get = |key: &str| node.annotations.get(key);
        let parse = |key: &str| get(key).and_then(|v| v.parse::<ConfigRef>().ok());
        NodeView {
            desired: parse(DESIRED_CONFIG),
            current: parse(CURRENT_CONFIG),
            observed: parse(OBSERVED_CONFIG),
            state: get(STATE).and_then(|v| v.parse().ok()),
            message: get(MESSAGE).filter(|m| !m.is_empty()),
        }
    }

    /// Whether the agent reports an outcome about `config`.
    fn settled_on(&self, config: &ConfigRef) -> bool {
        self.observed.as_ref() == Some(config)
            && match self.state {
                Some(State::Done) => self.current.as_ref() == Some(config),
                Some(state) => state.is_failure(),
                None => false,
            }
    }
}

/// Classifies `node` with respect to `target` (see [`NodeRolloutStatus`]).
pub fn node_status(node: &NodeInfo, target: &ConfigRef) -> NodeRolloutStatus {
    let view = NodeView::of(node);
    // Only a node with a drain record has a drain to classify (most have none).
    let drain = if node.annotations.get(DRAIN).is_some() {
        DrainView::of(node)
    } else {
        DrainView::default()
    };
    match view.desired {
        Some(ref desired) if desired == target => {
            if view.observed.as_ref() != Some(desired) {
                return NodeRolloutStatus::InProgress;
            }
            match view.state {
                Some(State::Done) if view.current.as_ref() == Some(desired) => {
                    NodeRolloutStatus::Done
                }
                Some(state) if state.is_failure() => NodeRolloutStatus::Failed {
                    state: Failure::Agent(state),
                    message: view.message.map(str::to_string),
                },
                _ => NodeRolloutStatus::InProgress,
            }
        }
        _ if drain.draining_for(target) => NodeRolloutStatus::Draining,
        _ if drain.blocked_for(target).is_some() => NodeRolloutStatus::Failed {
            state: Failure::DrainTimeout,
            message: drain.blocked_for(target).map(str::to_string),
        },
        Some(ref desired @ ConfigRef::ConfigMap { .. }) if !view.settled_on(desired) => {
            NodeRolloutStatus::Busy {
                desired: desired.clone(),
            }
        }
        _ => NodeRolloutStatus::Waiting,
    }
}

/// Whether `node` carries `kubelet-gitops.io/canary=true`.
pub fn is_canary_labelled(node: &NodeInfo) -> bool {
    node.labels.get(CANARY_LABEL).is_some_and(|v| v == "true")
}

/// Sorts a pool's nodes into canary order: nodes labelled [`CANARY_LABEL`]`=true` first,
/// then by name.
pub fn canary_order(nodes: &mut [&NodeInfo]) {
    nodes.sort_by(|a, b| {
        is_canary_labelled(b)
            .cmp(&is_canary_labelled(a))
            .then_with(|| a.name.cmp(&b.name))
    });
}

/// A `metadata.creationTimestamp` (RFC 3339, UTC as the API server writes it). `None`
/// when absent or unparseable: such a time is unknown.
pub(crate) fn parse_time(rfc3339: Option<&str>) -> Option<SystemTime> {
    rfc3339.and_then(|s| humantime::parse_rfc3339_weak(s).ok())
}
