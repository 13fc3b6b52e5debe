//! The status model: what `kubelet-gitops status` shows, as a pure function of the Nodes,
//! the published ConfigMaps and the time ([`survey`], [`node_report`]). No client call
//! here: `cli/status.rs` reads the cluster and hands the objects in.
//!
//! # What the cluster says, and what it does not
//!
//! A pool's rollout is what its Nodes' annotations say (the reconciler itself plans from
//! them after a restart), the ConfigMaps say which commit and file produced each config,
//! and the reconciler's rollout record ([`crate::record`]), when there is one, says the
//! commit applied and each pool's target, size and hold: with it, a pool's target is the
//! record's and its nodes not reached yet count as waiting. Without it:
//!
//! - **A pool's nodes** are the Nodes whose `kubelet-gitops.io/pool` names it. The
//!   reconciler writes it together with desired-config, so during a pool's very first
//!   rollout the nodes it has not reached yet are not counted (their pool is known only
//!   from the repository's selectors).
//! - **The config being rolled out** (the target) is, of the ConfigMaps the pool's nodes
//!   are told to run, the one created last. After a revert to an older config this names
//!   the newer, reverted one until the last node has moved back.
//! - **The phase** is derived from the nodes, with the reconciler's own classification
//!   ([`crate::rollout::node_status`]): `halted` when a node failed on the target,
//!   `complete` when every node is Done on it, `canary` while no node is Done on it yet
//!   (or only nodes labelled `kubelet-gitops.io/canary=true` have it), `rolling` while
//!   nodes are in flight, `waiting` when nothing is in flight but the pool is not
//!   complete: the reconciler is holding it (`rollout.paused`, outside a maintenance
//!   window, a wave's soak or jitter; the repository and the reconciler's `/readyz` say
//!   which) or has not run its next round yet. `pending`: ConfigMaps are published for
//!   the pool but no node carries it yet (or none of its nodes is told to run one).

use std::collections::BTreeMap;

use jiff::Timestamp;
use kubelet_gitops_core::protocol::{
    self as protocol, CURRENT_CONFIG, ConfigRef, DESIRED_CONFIG, LAST_KNOWN_GOOD, MESSAGE,
    OBSERVED_CONFIG, POOL, STATE,
};
use serde::{Serialize, Serializer};

use crate::model::NodeInfo;
use crate::record::{PoolRecord, RolloutRecord};
use crate::rollout::{Failure, NodeRolloutStatus, is_canary_labelled, node_status};

/// The version of the `-o json|yaml` structure; it changes only when a field changes
/// meaning or goes away (new fields may be added).
pub const VERSION: u32 = 1;

/// What status reads of a Node.
#[derive(Debug, Clone, Default)]
pub struct NodeObs {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// The `KubeletConfigReady` condition, when the agent has written one.
    pub condition: Option<Condition>,
}

impl NodeObs {
    fn ann(&self, key: &str) -> Option<&str> {
        self.annotations.get(key).map(String::as_str)
    }

    fn info(&self) -> NodeInfo {
        NodeInfo {
            name: self.name.clone(),
            labels: self
                .labels
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect(),
            annotations: self
                .annotations
                .iter()
                .filter(|(k, _)| k.starts_with(protocol::DOMAIN))
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect(),
            ..NodeInfo::default()
        }
    }

    /// When the agent last changed its report: the condition's heartbeat (written only
    /// when the condition's status, reason or message changes), else its transition.
    fn since(&self) -> Option<Timestamp> {
        let c = self.condition.as_ref()?;
        c.last_heartbeat_time.or(c.last_transition_time)
    }
}

/// The `KubeletConfigReady` condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    pub status: String,
    pub reason: Option<String>,
    pub message: Option<String>,
    #[serde(serialize_with = "time")]
    pub last_transition_time: Option<Timestamp>,
    #[serde(serialize_with = "time")]
    pub last_heartbeat_time: Option<Timestamp>,
}

/// What status reads of one of our ConfigMaps (metadata only).
#[derive(Debug, Clone, Default)]
pub struct ConfigMapObs {
    pub name: String,
    /// `kubelet-gitops.io/pool` label.
    pub pool: Option<String>,
    /// `kubelet-gitops.io/source-commit`: the commit that first produced this content.
    pub commit: Option<String>,
    /// `kubelet-gitops.io/source-path`: the pool file.
    pub source_path: Option<String>,
    pub created: Option<Timestamp>,
}

/// A core/v1 Event about a Node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventObs {
    #[serde(serialize_with = "time")]
    pub time: Option<Timestamp>,
    #[serde(rename = "type")]
    pub type_: String,
    pub reason: String,
    pub message: String,
    pub count: i32,
}

/// Every pool: the `status` document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub kind: &'static str,
    pub version: u32,
    #[serde(serialize_with = "time_required")]
    pub time: Timestamp,
    /// The commit the reconciler applies, from its rollout record (absent without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applied_commit: Option<String>,
    pub pools: Vec<PoolStatus>,
}

/// A pool's rollout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolStatus {
    pub pool: String,
    pub phase: Phase,
    /// The config being rolled out, `<namespace>/<configmap>`.
    pub config_map: Option<String>,
    /// The commit that produced it (`source-commit`).
    pub commit: Option<String>,
    /// The pool file it was rendered from (`source-path`).
    pub source_path: Option<String>,
    pub nodes: Counts,
    /// Why the reconciler assigns nothing more while nodes wait (its rollout record).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hold: Option<String>,
    /// The nodes not Done on the target: failed first, then in flight, then waiting; by
    /// name within each. Nodes of the pool the reconciler has not reached yet are
    /// counted as waiting but not listed (no annotation names their pool yet).
    pub not_done: Vec<NodeLine>,
}

/// Node counts of a pool; `done + inProgress + busy + failed + waiting == total`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    pub total: usize,
    pub done: usize,
    pub in_progress: usize,
    pub busy: usize,
    pub failed: usize,
    pub waiting: usize,
}

/// A node that is not Done on its pool's target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeLine {
    pub node: String,
    pub progress: NodeProgress,
    /// The agent's state (about `observedConfig`), as written.
    pub state: Option<String>,
    pub desired_config: Option<String>,
    pub current_config: Option<String>,
    pub message: Option<String>,
    /// When the agent last changed its report (the condition's times), if it wrote one.
    #[serde(serialize_with = "time")]
    pub since: Option<Timestamp>,
}

/// Where a node is with respect to its pool's target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeProgress {
    /// Degraded or RolledBack on the target: the pool halts.
    Failed,
    /// Assigned the target, not settled yet.
    InProgress,
    /// Cordoned by the reconciler, its pods being evicted, before the target is assigned.
    Draining,
    /// Busy with another config (the previous target).
    Busy,
    /// Not assigned the target yet.
    Waiting,
}

impl NodeProgress {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeProgress::Failed => "failed",
            NodeProgress::InProgress => "in-progress",
            NodeProgress::Draining => "draining",
            NodeProgress::Busy => "busy",
            NodeProgress::Waiting => "waiting",
        }
    }
}

/// A pool's phase, derived from its nodes (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Pending,
    Canary,
    Rolling,
    Waiting,
    Complete,
    Halted,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "pending",
            Phase::Canary => "canary",
            Phase::Rolling => "rolling",
            Phase::Waiting => "waiting",
            Phase::Complete => "complete",
            Phase::Halted => "halted",
        }
    }
}

/// The status of every pool (or of `only`), sorted by pool name. With the reconciler's
/// rollout `record`, each pool's target and size are the record's (the module docs say
/// what is inferred without one).
pub fn survey(
    nodes: &[NodeObs],
    configmaps: &[ConfigMapObs],
    namespace: &str,
    only: Option<&str>,
    now: Timestamp,
    record: Option<&RolloutRecord>,
) -> Report {
    let mut pools: BTreeMap<&str, Vec<&NodeObs>> = BTreeMap::new();
    for n in nodes {
        if let Some(p) = n.ann(POOL) {
            pools.entry(p).or_default().push(n);
        }
    }
    for cm in configmaps {
        if let Some(p) = cm.pool.as_deref() {
            pools.entry(p).or_default();
        }
    }
    for p in record.iter().flat_map(|r| r.pools.keys()) {
        pools.entry(p.as_str()).or_default();
    }
    let cms: BTreeMap<&str, &ConfigMapObs> =
        configmaps.iter().map(|c| (c.name.as_str(), c)).collect();
    let pools = pools
        .into_iter()
        .filter(|(p, _)| only.is_none_or(|o| o == *p))
        .map(|(p, members)| {
            let rec = record.and_then(|r| r.pools.get(p));
            pool_status(p, &members, &cms, namespace, rec)
        })
        .collect();
    Report {
        kind: "KubeletGitopsStatus",
        version: VERSION,
        time: now,
        applied_commit: record.map(|r| r.commit.clone()),
        pools,
    }
}

fn pool_status(
    pool: &str,
    members: &[&NodeObs],
    cms: &BTreeMap<&str, &ConfigMapObs>,
    namespace: &str,
    rec: Option<&PoolRecord>,
) -> PoolStatus {
    let mut status = pool_status_of_nodes(pool, members, cms, namespace, rec);
    if let Some(rec) = rec {
        // Nodes the reconciler has not reached yet: the pool's, not yet annotated.
        let unseen = rec.nodes.saturating_sub(status.nodes.total);
        status.nodes.total += unseen;
        status.nodes.waiting += unseen;
        status.hold = rec.hold.clone();
        if unseen > 0 && status.phase == Phase::Complete {
            status.phase = Phase::Waiting;
        }
        if status.phase == Phase::Pending && rec.nodes > 0 {
            status.phase = Phase::Waiting;
        }
    }
    status
}

fn pool_status_of_nodes(
    pool: &str,
    members: &[&NodeObs],
    cms: &BTreeMap<&str, &ConfigMapObs>,
    namespace: &str,
    rec: Option<&PoolRecord>,
) -> PoolStatus {
    // The target: the reconciler's record; without one, of the ConfigMaps in our
    // namespace the nodes are told to run, the one created last (a ConfigMap not listed
    // sorts first).
    let recorded = rec.and_then(|r| r.target.parse::<ConfigRef>().ok());
    let target = recorded.or_else(|| {
        members
            .iter()
            .filter_map(|n| n.ann(DESIRED_CONFIG)?.parse::<ConfigRef>().ok())
            .filter(|r| matches!(r, ConfigRef::ConfigMap { namespace: ns, .. } if ns == namespace))
            .max_by_key(|r| {
                let name = r.configmap_name().unwrap_or_default().to_string();
                (cms.get(name.as_str()).and_then(|c| c.created), name)
            })
    });
    let Some(target) = target else {
        return PoolStatus {
            pool: pool.to_string(),
            phase: Phase::Pending,
            config_map: None,
            commit: None,
            source_path: None,
            nodes: Counts {
                total: members.len(),
                waiting: members.len(),
                ..Counts::default()
            },
            hold: None,
            not_done: members
                .iter()
                .map(|n| line(n, NodeProgress::Waiting))
                .collect(),
        };
    };
    let cm = target.configmap_name().and_then(|n| cms.get(n));
    let mut counts = Counts {
        total: members.len(),
        ..Counts::default()
    };
    let mut not_done = Vec::new();
    let mut canary_only = true;
    for n in members {
        let info = n.info();
        let progress = match node_status(&info, &target) {
            NodeRolloutStatus::Done => {
                counts.done += 1;
                canary_only &= is_canary_labelled(&info);
                continue;
            }
            NodeRolloutStatus::Failed { state, message } => {
                counts.failed += 1;
                if state == Failure::DrainTimeout {
                    let mut l = line(n, NodeProgress::Failed);
                    l.state = Some(state.to_string());
                    l.message = message;
                    not_done.push(l);
                    continue;
                }
                NodeProgress::Failed
            }
            NodeRolloutStatus::Draining => {
                counts.in_progress += 1;
                canary_only &= is_canary_labelled(&info);
                NodeProgress::Draining
            }
            NodeRolloutStatus::InProgress => {
                counts.in_progress += 1;
                canary_only &= is_canary_labelled(&info);
                NodeProgress::InProgress
            }
            NodeRolloutStatus::Busy { .. } => {
                counts.busy += 1;
                NodeProgress::Busy
            }
            NodeRolloutStatus::Waiting => {
                counts.waiting += 1;
                NodeProgress::Waiting
            }
        };
        not_done.push(line(n, progress));
    }
    not_done.sort_by(|a, b| (a.progress, &a.node).cmp(&(b.progress, &b.node)));
    let phase = if counts.failed > 0 {
        Phase::Halted
    } else if counts.done == counts.total {
        Phase::Complete
    } else if counts.in_progress + counts.busy == 0 {
        Phase::Waiting
    } else if counts.done == 0 || canary_only {
        Phase::Canary
    } else {
        Phase::Rolling
    };
    PoolStatus {
        pool: pool.to_string(),
        phase,
        config_map: Some(target.to_string()),
        commit: cm.and_then(|c| c.commit.clone()),
        source_path: cm.and_then(|c| c.source_path.clone()),
        nodes: counts,
        hold: None,
        not_done,
    }
}

fn line(n: &NodeObs, progress: NodeProgress) -> NodeLine {
    let own = |k: &str| n.ann(k).map(str::to_string);
    NodeLine {
        node: n.name.clone(),
        progress,
        state: own(STATE),
        desired_config: own(DESIRED_CONFIG),
        current_config: own(CURRENT_CONFIG),
        message: own(MESSAGE),
        since: n.since(),
    }
}

/// One node: `status node NAME`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeReport {
    pub kind: &'static str,
    pub version: u32,
    #[serde(serialize_with = "time_required")]
    pub time: Timestamp,
    pub node: String,
    pub pool: Option<String>,
    pub state: Option<String>,
    /// The desired-config value `state` and `message` are about.
    pub observed_config: Option<String>,
    pub message: Option<String>,
    pub desired: Option<ConfigView>,
    pub current: Option<ConfigView>,
    pub last_known_good: Option<ConfigView>,
    pub condition: Option<Condition>,
    /// The agent's Events about the node, newest last.
    pub events: Vec<EventObs>,
}

/// A config a node names, with where it came from when it is one of our ConfigMaps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigView {
    /// `local` or `<namespace>/<configmap>`, as the annotation says.
    pub config: String,
    pub commit: Option<String>,
    pub source_path: Option<String>,
}

/// The most Events [`node_report`] keeps.
pub const EVENTS: usize = 10;

/// The report of one node; `events` in any order (the last [`EVENTS`] by time are kept).
pub fn node_report(
    node: &NodeObs,
    configmaps: &[ConfigMapObs],
    mut events: Vec<EventObs>,
    now: Timestamp,
) -> NodeReport {
    let view = |key: &str| {
        let value = node.ann(key)?;
        let cm = value
            .parse::<ConfigRef>()
            .ok()
            .and_then(|r| r.configmap_name().map(str::to_string))
            .and_then(|name| configmaps.iter().find(|c| c.name == name));
        Some(ConfigView {
            config: value.to_string(),
            commit: cm.and_then(|c| c.commit.clone()),
            source_path: cm.and_then(|c| c.source_path.clone()),
        })
    };
    events.sort_by_key(|e| e.time);
    let skip = events.len().saturating_sub(EVENTS);
    events.drain(..skip);
    let own = |k: &str| node.ann(k).map(str::to_string);
    NodeReport {
        kind: "KubeletGitopsNodeStatus",
        version: VERSION,
        time: now,
        node: node.name.clone(),
        pool: own(POOL),
        state: own(STATE),
        observed_config: own(OBSERVED_CONFIG),
        message: own(MESSAGE),
        desired: view(DESIRED_CONFIG),
        current: view(CURRENT_CONFIG),
        last_known_good: view(LAST_KNOWN_GOOD),
        condition: node.condition.clone(),
        events,
    }
}

/// How `--wait` stands on a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Every targeted pool is complete.
    Complete,
    /// A targeted pool halted.
    Halted,
    /// Keep waiting.
    Pending,
}

/// `--wait`'s verdict. With `only`, that pool must exist with nodes and be complete;
/// without, every pool that has nodes (at least one), pools without any (`pending`)
/// being left out: a pool whose nodes no reconciler write reached yet looks the same as
/// a leftover ConfigMap.
pub fn verdict(report: &Report, only: Option<&str>, commit: Option<&str>) -> Verdict {
    // Waiting for a commit: until the reconciler's record says it applies it, the pools'
    // state is about an earlier one.
    if let Some(want) = commit
        && !report
            .applied_commit
            .as_deref()
            .is_some_and(|c| !want.is_empty() && c.starts_with(want))
    {
        return Verdict::Pending;
    }
    let targeted: Vec<&PoolStatus> = report
        .pools
        .iter()
        .filter(|p| only.is_some() || p.phase != Phase::Pending)
        .collect();
    if targeted.iter().any(|p| p.phase == Phase::Halted) {
        Verdict::Halted
    } else if !targeted.is_empty() && targeted.iter().all(|p| p.phase == Phase::Complete) {
        Verdict::Complete
    } else {
        Verdict::Pending
    }
}

fn time<S: Serializer>(t: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.serialize_str(&t.to_string()),
        None => s.serialize_none(),
    }
}

fn time_required<S: Serializer>(t: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&t.to_string())
}

#[cfg(test)]
mod tests;
