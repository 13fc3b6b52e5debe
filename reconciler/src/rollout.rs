//! Rollout planning: which nodes get which config this round ([`plan_rollout`]), and how
//! far each pool has come ([`PoolReport`]).
//!
//! Pure and synchronous: the controller sends the [`NodeAction`]s it returns (as
//! [`annotation_patch`]es). No clock is read: `now` is an argument, and the other times
//! are creation timestamps, also inputs. Everything is derived from the node annotations
//! of the node protocol (`kubelet_gitops_core::protocol`), so a restarted reconciler
//! plans what the previous one would have, but for one time per pool with waves: when
//! its current wave opened ([`PoolTarget::wave_opened`], given back from the last
//! round's [`PoolReport::wave_opened`]; unknown after a restart, when the wave counts as
//! opening then, so a soak starts over and is never cut short).
//!
//! # Rules
//!
//! - **Membership.** Nodes belong to pools by [`model::assign`]:
//!   highest priority wins. A node that two pools of the same priority select is an
//!   [`Overlap`]: it is listed in [`RolloutPlan::overlaps`] and gets no action at all, its
//!   annotations stay as they are.
//! - **Classification.** Each node of a pool is classified against the pool's target `T`
//!   by [`node_status`], from desired-config, current-config, state, observed-config and
//!   message. A report is about `T` only when observed-config equals desired-config:
//!   - *Done*: desired, observed and current are `T`, state `Done`;
//!   - *Failed*: desired and observed are `T`, state `Degraded` or `RolledBack`;
//!   - *busy*: desired names a ConfigMap and the node has not settled on it (observed
//!     differs, or the state is `Downloading`/`Applying`/`Verifying`, absent or unknown,
//!     or `Done` without current-config naming it). Busy nodes count against
//!     maxUnavailable whatever config they are busy with: on `T` they are *in progress*,
//!     on another ConfigMap (the previous target, mid-rollout) they are *busy* elsewhere;
//!   - *Waiting*: desired is not `T` and the node is not busy (no desired-config, or a
//!     config it has settled on, a failure about an older target included).
//! - **maxUnavailable.** `m = rollout.maxUnavailable.resolve(pool size)` (a percentage
//!   rounds down, never below 1). This round assigns `T` to at most `m - busy` Waiting
//!   nodes (never negative), taken in canary order.
//! - **Canary.** The canary nodes are the first `rollout.canary` nodes of the pool in
//!   canary order: nodes labelled `kubelet-gitops.io/canary=true` ([`CANARY_LABEL`])
//!   first, then by name; a pool with fewer nodes than `canary` treats all as canary.
//!   Until every canary node is Done on `T`, only canary nodes may be assigned `T`.
//!   Membership decides the canary set each round, so a node joining or leaving the
//!   front of the order can move it; the gate then waits for the new set.
//! - **Halt.** Any Failed node halts the pool ([`PoolPhase::Halted`]): nothing new is
//!   assigned to `T`. The failed node keeps its desired-config (its agent has already
//!   returned to last-known-good; the report shows why). A new commit changes `T` and the
//!   rollout restarts: the failed node is then Waiting, its report being about the old
//!   target.
//! - **Maintenance windows.** With `rollout.maintenance`, when the pool's change waits
//!   for a window (`appliesTo: all`, or [`PoolTarget::class`] `drain` or unknown) and
//!   `now` is outside every window ([`window::window_state`]), the rolling update assigns
//!   nothing, canary included, and the report says why ([`Hold::Window`]). New nodes and
//!   settings-only rewrites are not held; nodes already assigned are never touched.
//! - **Waves.** With `rollout.waves`, once the canary is Done the rolling update takes one
//!   wave at a time ([`wave::group`]: the label's values sorted, then the unlabelled
//!   nodes): the first wave not all Done, maxUnavailable resolved for its size. A wave
//!   after the first that has not started waits `soak` from when it opened
//!   ([`Hold::Soak`]); each node of the wave waits its jitter ([`wave::jitter_offset`])
//!   after that. [`PoolReport::wake_at`] says when time alone could change the plan.
//! - **Paused.** `rollout.paused` assigns nothing new ([`PoolPhase::Paused`]); reports are
//!   still computed.
//! - **New nodes.** A node with no desired-config whose creation time is later than the
//!   target ConfigMap's joined after the config was published: it gets `T` at once
//!   (reason `"new node"`), outside canary and maxUnavailable, unless the pool is paused
//!   or halted. A node (or target) whose creation time is unknown is never new. A new
//!   node is busy from the next round on and counts against maxUnavailable then.
//! - **Leaving.** A node in no pool (and in no overlap) whose desired-config names a
//!   ConfigMap in the reconciler's namespace left every pool (its labels changed, or its
//!   pool was removed from the repository): it gets [`NodeChange::Unassign`] at once
//!   (reason `"left every pool"`) and returns to its local config. A desired-config naming
//!   another namespace, `local` or something unparseable is not ours and is left alone.
//!   Reconciler annotations left without a desired-config (someone removed it by hand)
//!   are cleared the same way (reason `"stale annotations"`).
//! - **Settings.** A node whose desired-config is already `T` but whose health-timeout,
//!   lkg-grace or pool annotation differs from the pool's (the rollout settings changed,
//!   not the config) gets them rewritten (reason `"rollout settings changed"`). This does
//!   not change what the node runs, so neither canary, maxUnavailable, pause nor halt
//!   holds it back.
//! - **No-op suppression.** No action is emitted whose patch would leave the node's
//!   annotations as they are, so a converged cluster costs no writes.
//! - **Determinism.** Actions are sorted by pool (unassignments, which have none, first)
//!   then node; reports by pool. The order of the input slices does not matter.
//! - **Reports.** Counts are about the pool's current target: `done + in_progress +
//!   waiting + failed == nodes`. Phase: [`PoolPhase::Empty`] when the pool selects no node,
//!   else Halted when a node failed, else Complete when every node is Done on `T`, else
//!   Paused when paused, else Progressing.

pub mod drain;
#[cfg(test)]
mod drain_tests;
mod node;
mod patch;
#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod timed_tests;
pub mod wave;
pub mod window;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use kubelet_gitops_core::disruption::Class;
use kubelet_gitops_core::protocol::{
    CORDONED, ConfigRef, DESIRED_CONFIG, DRAIN, DRAIN_BLOCKED, DRAIN_SINCE, HEALTH_TIMEOUT,
    LKG_GRACE, POOL,
};

use crate::model::{self, NodeInfo, Overlap, PoolSpec};

pub use drain::{DrainObservations, DrainSeen, DrainTask, DrainWork};
pub use node::{
    CANARY_LABEL, Failure, NodeRolloutStatus, canary_order, is_canary_labelled, node_status,
};
pub use patch::{NodeChange, annotation_patch, is_noop};

use node::parse_time;

/// A pool and the config its nodes should run for the commit being rolled out.
#[derive(Debug, Clone)]
pub struct PoolTarget<'a> {
    pub spec: &'a PoolSpec,
    /// The pool's ConfigMap for this commit.
    pub target: ConfigRef,
    /// RFC 3339 `creationTimestamp` of that ConfigMap, if it exists yet. Nodes created
    /// later are new nodes.
    pub target_created: Option<String>,
    /// The disruption class of the change the pool's nodes go through, when known
    /// (`None`: unknown, taken as `drain` by maintenance windows).
    pub class: Option<Class>,
    /// When the pool's current wave opened, as the last round's report said
    /// ([`PoolReport::wave_opened`]); `None` at first, when the wave opens now.
    pub wave_opened: Option<WaveOpened>,
}

/// When a wave of a pool was first seen open (the canary Done for the first wave, the
/// previous wave all Done for the others): what its soak and jitter count from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaveOpened {
    /// The wave's position in the pool's wave order.
    pub index: usize,
    /// Its label value (`None`: the unlabelled nodes).
    pub value: Option<String>,
    pub at: Timestamp,
}

/// Why a pool that has nodes to assign assigns none this round, for the status and
/// `/readyz`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    /// Outside the pool's maintenance windows; `next` labels the next opening
    /// (`Tue 02:00 UTC`), `None` when none ever opens.
    Window { next: Option<String> },
    /// The previous wave is Done; the next starts after the soak.
    Soak { after: String, until: Timestamp },
    /// `drain: manual`: the nodes next in turn wait for a person to cordon and drain them.
    Manual { nodes: Vec<String> },
}

impl fmt::Display for Hold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Hold::Window { next: Some(next) } => write!(f, "waiting for the window {next}"),
            Hold::Window { next: None } => f.write_str("waiting for a window: none ever opens"),
            Hold::Soak { after, until } => write!(
                f,
                "soaking after wave {after} until {}",
                until.strftime("%Y-%m-%d %H:%M:%S UTC")
            ),
            Hold::Manual { nodes } => write!(
                f,
                "waiting for a person to drain {} (drain: manual; `kubectl drain {} \
                 --ignore-daemonsets --delete-emptydir-data`)",
                nodes.join(", "),
                nodes.first().map_or("NODE", String::as_str)
            ),
        }
    }
}

/// Which wave a pool with waves is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaveProgress {
    /// 1-based position of the current wave.
    pub number: usize,
    /// How many waves the pool has.
    pub count: usize,
    /// The label and the wave's value (`(unlabelled)` for the last wave of nodes without
    /// the label).
    pub label: String,
    pub value: String,
    /// Nodes in the wave.
    pub nodes: usize,
}

impl fmt::Display for WaveProgress {
    /// `wave 2/3 topology.kubernetes.io/zone=b`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "wave {}/{} {}={}",
            self.number, self.count, self.label, self.value
        )
    }
}

/// One round of rollout: what to write, and where every pool stands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RolloutPlan {
    /// Node writes, sorted by pool then node; none is a no-op.
    pub actions: Vec<NodeAction>,
    /// One report per pool, sorted by pool name.
    pub pools: Vec<PoolReport>,
    /// Nodes two pools of the same priority select; they get no action.
    pub overlaps: Vec<Overlap>,
}

/// A write to one node's reconciler annotations. Cheap to clone (shared strings): a first
/// plan of a large fleet holds one per node, kept with each pool's last plan and copied
/// into the round's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAction {
    pub node: Arc<str>,
    /// The node's pool (`None` for an unassignment).
    pub pool: Option<Arc<str>>,
    pub change: NodeChange,
    /// Why, for logs: `"canary"`, `"rollout"`, `"new node"`, `"left every pool"`,
    /// `"stale annotations"`, `"rollout settings changed"`.
    pub reason: &'static str,
}

impl NodeAction {
    /// The JSON merge patch that performs this action.
    pub fn patch(&self) -> serde_json::Value {
        annotation_patch(self.pool.as_deref(), &self.change)
    }
}

/// A node whose agent reported a failure about the pool's target (or whose drain gave up).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFailure {
    pub node: String,
    /// `Degraded`, `RolledBack` or `DrainTimeout`.
    pub state: Failure,
    /// The agent's message, if it wrote one.
    pub message: Option<String>,
}

/// Where a pool's rollout stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PoolPhase {
    /// The pool selects no node.
    Empty,
    /// Nodes are being (or waiting to be) moved to the target.
    Progressing,
    /// Every node is Done on the target.
    Complete,
    /// A node failed on the target; nothing new is assigned until the target changes.
    Halted,
    /// `rollout.paused`: nothing new is assigned.
    Paused,
}

impl PoolPhase {
    /// The phase's name, for logs, metrics and statuses.
    pub fn as_str(self) -> &'static str {
        match self {
            PoolPhase::Empty => "Empty",
            PoolPhase::Progressing => "Progressing",
            PoolPhase::Complete => "Complete",
            PoolPhase::Halted => "Halted",
            PoolPhase::Paused => "Paused",
        }
    }
}

impl fmt::Display for PoolPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How far a pool has come on its current target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolReport {
    pub pool: String,
    pub target: ConfigRef,
    /// Nodes in the pool.
    pub nodes: usize,
    /// Done on the target.
    pub done: usize,
    /// Assigned the target, not settled yet.
    pub in_progress: usize,
    /// Not assigned the target yet (busy elsewhere included).
    pub waiting: usize,
    /// Failed on the target, sorted by node.
    pub failed: Vec<NodeFailure>,
    /// Nodes between assignment and an outcome on any config (before this round's
    /// actions): what counts against maxUnavailable.
    pub busy: usize,
    pub phase: PoolPhase,
    /// The canary nodes, in canary order.
    pub canary: Vec<String>,
    /// maxUnavailable resolved for the pool's size (for the current wave's, in a pool
    /// with waves).
    pub max_unavailable: usize,
    /// Why nothing more is assigned now although nodes wait (a window, a soak).
    pub hold: Option<Hold>,
    /// The current wave, in a pool with waves that is past its canary.
    pub wave: Option<WaveProgress>,
    /// When the current wave opened: given back as [`PoolTarget::wave_opened`] next round.
    pub wave_opened: Option<WaveOpened>,
    /// When planning this pool again could come out differently with nothing else
    /// changed (a window opens or closes, a soak ends, a jittered node's turn, a drain
    /// to look at again).
    pub wake_at: Option<Timestamp>,
    /// The controller's drain work for this pool's nodes before the next round.
    pub drains: Vec<DrainTask>,
    /// Nodes being drained, for people: `node: 2 pod(s) left; <why one did not go>`.
    pub draining: Vec<String>,
}

impl PoolReport {
    /// A report of `pool` on `target` with nothing counted yet: no nodes, `Progressing`,
    /// no canary, no hold, no wave, no drain. The planner fills it in (and tests set
    /// what they need on top of it).
    pub fn new(pool: impl Into<String>, target: ConfigRef) -> PoolReport {
        PoolReport {
            pool: pool.into(),
            target,
            nodes: 0,
            done: 0,
            in_progress: 0,
            waiting: 0,
            failed: Vec::new(),
            busy: 0,
            phase: PoolPhase::Progressing,
            canary: Vec::new(),
            max_unavailable: 0,
            hold: None,
            wave: None,
            wave_opened: None,
            wake_at: None,
            drains: Vec::new(),
            draining: Vec::new(),
        }
    }
}

/// Plans one round of rollout for `pools` over `nodes` at `now` (see the module docs for
/// the rules). `namespace` is where the reconciler publishes its ConfigMaps: a
/// desired-config elsewhere is not ours.
pub fn plan_rollout(
    namespace: &str,
    pools: &[PoolTarget<'_>],
    nodes: &[NodeInfo],
    now: Timestamp,
    drains: &DrainObservations,
) -> RolloutPlan {
    // Pool names are unique (rendering rejects duplicates); a repeated one is planned once.
    let mut seen = HashSet::new();
    let pools: Vec<&PoolTarget<'_>> = pools
        .iter()
        .filter(|p| seen.insert(p.spec.name.as_str()))
        .collect();
    let specs: Vec<PoolSpec> = pools.iter().map(|p| p.spec.clone()).collect();
    let assignment = model::assign(&specs, nodes);
    let by_name: HashMap<&str, &NodeInfo> = nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let members = |names: &[String]| -> Vec<&NodeInfo> {
        names
            .iter()
            .filter_map(|n| by_name.get(n.as_str()).copied())
            .collect()
    };

    let mut actions = Vec::new();
    let mut reports = Vec::with_capacity(pools.len());
    for pool in &pools {
        let names = assignment
            .pools
            .get(&pool.spec.name)
            .map(Vec::as_slice)
            .unwrap_or_default();
        reports.push(plan_pool(pool, members(names), now, drains, &mut actions));
    }
    for node in members(&assignment.unassigned) {
        if let Some(reason) = leave_reason(namespace, node) {
            push_leaving(&mut actions, node, reason);
        }
    }

    actions.sort_by(|a, b| a.pool.cmp(&b.pool).then_with(|| a.node.cmp(&b.node)));
    reports.sort_by(|a, b| a.pool.cmp(&b.pool));
    RolloutPlan {
        actions,
        pools: reports,
        overlaps: assignment.overlaps,
    }
}

/// Why a node outside every pool must be unassigned, if it must.
pub(crate) fn leave_reason(namespace: &str, node: &NodeInfo) -> Option<&'static str> {
    match node.annotations.get(DESIRED_CONFIG) {
        Some(desired) => match desired.parse::<ConfigRef>() {
            Ok(ConfigRef::ConfigMap { namespace: ns, .. }) if ns == namespace => {
                Some("left every pool")
            }
            _ => None,
        },
        None => [
            HEALTH_TIMEOUT,
            LKG_GRACE,
            POOL,
            DRAIN,
            DRAIN_SINCE,
            CORDONED,
            DRAIN_BLOCKED,
        ]
        .iter()
        .any(|k| node.annotations.contains_key(k))
        .then_some("stale annotations"),
    }
}

/// The writes for a node that left every pool (`reason`, from [`leave_reason`]): its
/// reconciler annotations go, and a drain of ours on it is released (uncordoned).
pub(crate) fn push_leaving(actions: &mut Vec<NodeAction>, node: &NodeInfo, reason: &'static str) {
    push_action(actions, node, None, NodeChange::Unassign, reason);
    let view = drain::DrainView::of(node);
    if view.present {
        let release = NodeChange::Release {
            uncordon: view.cordoned,
        };
        push_action(
            actions,
            node,
            None,
            release,
            "left every pool while drained",
        );
    }
}

/// Appends an action unless it is a no-op.
pub(crate) fn push_action(
    actions: &mut Vec<NodeAction>,
    node: &NodeInfo,
    pool: Option<&Arc<str>>,
    change: NodeChange,
    reason: &'static str,
) {
    if !is_noop(node, pool.map(|p| &**p), &change) {
        actions.push(NodeAction {
            node: Arc::from(node.name.as_str()),
            pool: pool.cloned(),
            change,
            reason,
        });
    }
}

/// Plans one pool: classifies its nodes, appends its actions, returns its report.
/// `drains` is what the controller last saw of the pods of nodes being drained.
pub(crate) fn plan_pool(
    pool: &PoolTarget<'_>,
    nodes: Vec<&NodeInfo>,
    now: Timestamp,
    drains: &DrainObservations,
    actions: &mut Vec<NodeAction>,
) -> PoolReport {
    let mut drain_wake = None;
    let mut report = plan_pool_steps(pool, nodes, now, drains, &mut drain_wake, actions);
    if let Some(w) = drain_wake {
        report.wake_at = Some(report.wake_at.map_or(w, |r| r.min(w)));
    }
    report.drains.sort_by(|a, b| a.node.cmp(&b.node));
    report
}

fn plan_pool_steps(
    pool: &PoolTarget<'_>,
    mut nodes: Vec<&NodeInfo>,
    now: Timestamp,
    drains: &DrainObservations,
    drain_wake: &mut Option<Timestamp>,
    actions: &mut Vec<NodeAction>,
) -> PoolReport {
    let name = pool.spec.name.as_str();
    let shared_name: Arc<str> = Arc::from(name);
    let rollout = &pool.spec.rollout;
    let target = &pool.target;
    let assign_change = NodeChange::Assign {
        desired: Arc::new(target.clone()),
        health_timeout: rollout.health_timeout,
        lkg_grace: rollout.lkg_grace,
    };

    canary_order(&mut nodes);
    let canary_count = (rollout.canary as usize).min(nodes.len());
    let max_unavailable = rollout.max_unavailable.resolve(nodes.len());
    let statuses: Vec<NodeRolloutStatus> = nodes.iter().map(|n| node_status(n, target)).collect();

    let mut report = PoolReport {
        nodes: nodes.len(),
        canary: nodes[..canary_count]
            .iter()
            .map(|n| n.name.clone())
            .collect(),
        max_unavailable,
        ..PoolReport::new(name, target.clone())
    };
    for (node, status) in nodes.iter().zip(&statuses) {
        match status {
            NodeRolloutStatus::Done => report.done += 1,
            NodeRolloutStatus::Failed { state, message } => report.failed.push(NodeFailure {
                node: node.name.clone(),
                state: *state,
                message: message.clone(),
            }),
            NodeRolloutStatus::InProgress | NodeRolloutStatus::Draining => report.in_progress += 1,
            NodeRolloutStatus::Busy { .. } | NodeRolloutStatus::Waiting => report.waiting += 1,
        }
        if status.is_busy() {
            report.busy += 1;
        }
    }
    report.failed.sort_by(|a, b| a.node.cmp(&b.node));
    report.phase = if nodes.is_empty() {
        PoolPhase::Empty
    } else if !report.failed.is_empty() {
        PoolPhase::Halted
    } else if report.done == nodes.len() {
        PoolPhase::Complete
    } else if rollout.paused {
        PoolPhase::Paused
    } else {
        PoolPhase::Progressing
    };

    // Nodes already pointed at the target keep the pool's current rollout settings.
    let target_value = target.to_string();
    for node in &nodes {
        if node.annotations.get(DESIRED_CONFIG) == Some(&target_value) {
            push_action(
                actions,
                node,
                Some(&shared_name),
                assign_change.clone(),
                "rollout settings changed",
            );
        }
    }

    // Drains: lift the ones that are over, carry on with the others (see `drain`).
    let mode = if pool.class == Some(Class::Drain) {
        rollout.drain.mode
    } else {
        drain::DrainMode::Never
    };
    let may_assign = !rollout.paused && report.failed.is_empty();
    for (i, node) in nodes.iter().enumerate() {
        let view = drain::DrainView::of(node);
        if !view.present {
            continue;
        }
        let release = NodeChange::Release {
            uncordon: view.cordoned,
        };
        match &statuses[i] {
            NodeRolloutStatus::Draining if may_assign && mode == drain::DrainMode::Auto => {
                continue_drain(
                    &shared_name,
                    node,
                    &view,
                    &rollout.drain,
                    &assign_change,
                    now,
                    drains,
                    drain_wake,
                    &mut report,
                    actions,
                );
            }
            NodeRolloutStatus::Draining => push_action(
                actions,
                node,
                Some(&shared_name),
                release,
                "drain stopped (pool paused or halted, or its drain setting changed)",
            ),
            NodeRolloutStatus::Failed {
                state: Failure::DrainTimeout,
                ..
            }
            | NodeRolloutStatus::InProgress
            | NodeRolloutStatus::Busy { .. } => {}
            NodeRolloutStatus::Done
            | NodeRolloutStatus::Failed { .. }
            | NodeRolloutStatus::Waiting => {
                let reason = if view.target.as_ref() == Some(target) {
                    "drained node applied: back in service"
                } else {
                    "drain for an older config"
                };
                push_action(actions, node, Some(&shared_name), release, reason);
            }
        }
    }

    if rollout.paused || !report.failed.is_empty() {
        return report;
    }

    // New nodes get the target at once.
    let target_created = parse_time(pool.target_created.as_deref());
    let is_new = |node: &NodeInfo| {
        !node.annotations.contains_key(DESIRED_CONFIG)
            && matches!(
                (parse_time(node.created.as_deref()), target_created),
                (Some(node), Some(target)) if node > target
            )
    };
    let mut new_nodes = vec![false; nodes.len()];
    for (i, node) in nodes.iter().enumerate() {
        if statuses[i] == NodeRolloutStatus::Waiting && is_new(node) {
            new_nodes[i] = true;
            push_action(
                actions,
                node,
                Some(&shared_name),
                assign_change.clone(),
                "new node",
            );
        }
    }

    // Then the rolling update: canary first, at most maxUnavailable busy, inside the
    // maintenance windows when they apply, wave by wave when the pool has waves.
    let canary_done = statuses[..canary_count]
        .iter()
        .all(|s| *s == NodeRolloutStatus::Done);
    let to_assign = |i: usize| statuses[i] == NodeRolloutStatus::Waiting && !new_nodes[i];
    if !(0..nodes.len()).any(to_assign) {
        return report;
    }
    if let Some(m) = &rollout.maintenance {
        let gated =
            m.applies_to == window::AppliesTo::All || pool.class.is_none_or(|c| c == Class::Drain);
        if gated {
            match window::window_state(&m.windows, now) {
                window::WindowState::Open { closes } => report.wake_at = Some(closes),
                window::WindowState::Closed { next } => {
                    report.wake_at = next.as_ref().map(|n| n.at);
                    report.hold = Some(Hold::Window {
                        next: next.map(|n| n.label),
                    });
                    return report;
                }
            }
        }
    }
    // Starts the chosen nodes: assign, or begin their drain (`drain: auto`), or check
    // whether a person has drained them (`drain: manual`).
    let drain_target = Arc::new(target.clone());
    let start = |chosen: &[usize], report: &mut PoolReport, actions: &mut Vec<NodeAction>| {
        let mut manual = Vec::new();
        for &i in chosen {
            let canary = i < canary_count;
            let node = nodes[i];
            let name: Arc<str> = Arc::from(node.name.as_str());
            let (change, reason) = match mode {
                drain::DrainMode::Never => (
                    assign_change.clone(),
                    if canary { "canary" } else { "rollout" },
                ),
                drain::DrainMode::Auto => (
                    NodeChange::Cordon {
                        drain: drain_target.clone(),
                        since: now,
                    },
                    if canary {
                        "canary: drain first"
                    } else {
                        "rollout: drain first"
                    },
                ),
                drain::DrainMode::Manual => {
                    let ready = drains
                        .get(&name)
                        .is_some_and(|s| s.unschedulable && s.pods_left == 0);
                    if !ready {
                        report.drains.push(DrainTask {
                            node: name,
                            work: drain::DrainWork::Check,
                        });
                        manual.push(node.name.clone());
                        continue;
                    }
                    (
                        assign_change.clone(),
                        if canary {
                            "canary: drained by a person"
                        } else {
                            "rollout: drained by a person"
                        },
                    )
                }
            };
            push_action(actions, node, Some(&shared_name), change, reason);
        }
        if !manual.is_empty() {
            report.hold = Some(Hold::Manual { nodes: manual });
            let retry = drain::retry_at(now);
            report.wake_at = Some(report.wake_at.map_or(retry, |w| w.min(retry)));
        }
    };
    let slots = max_unavailable.saturating_sub(report.busy);
    let waves = rollout.waves.as_ref().filter(|_| canary_done);
    let Some(waves) = waves else {
        let eligible = if canary_done {
            nodes.len()
        } else {
            canary_count
        };
        let chosen: Vec<usize> = (0..eligible)
            .filter(|&i| to_assign(i))
            .take(slots)
            .collect();
        start(&chosen, &mut report, actions);
        return report;
    };

    // Waves: the first wave not all Done is the current one.
    let groups = wave::group(&nodes, &waves.by);
    let Some(k) = groups.iter().position(|w| {
        w.members
            .iter()
            .any(|&i| statuses[i] != NodeRolloutStatus::Done)
    }) else {
        return report;
    };
    let current = &groups[k];
    report.max_unavailable = rollout.max_unavailable.resolve(current.members.len());
    report.wave = Some(WaveProgress {
        number: k + 1,
        count: groups.len(),
        label: waves.by.clone(),
        value: current.name().to_string(),
        nodes: current.members.len(),
    });
    let opened = match &pool.wave_opened {
        Some(o) if o.index == k && o.value == current.value => o.at,
        _ => now,
    };
    report.wave_opened = Some(WaveOpened {
        index: k,
        value: current.value.clone(),
        at: opened,
    });
    // A wave has started once a node of it other than a canary is past Waiting; until
    // then, every wave after the first waits for the soak.
    let started = current
        .members
        .iter()
        .any(|&i| i >= canary_count && statuses[i] != NodeRolloutStatus::Waiting);
    let since = if k > 0 && !started {
        let soak = SignedDuration::try_from(waves.soak).unwrap_or(SignedDuration::MAX);
        let until = opened.checked_add(soak).unwrap_or(Timestamp::MAX);
        if now < until {
            report.hold = Some(Hold::Soak {
                after: groups[k - 1].name().to_string(),
                until,
            });
            report.wake_at = Some(until);
            return report;
        }
        until
    } else {
        opened
    };
    let slots = report.max_unavailable.saturating_sub(report.busy);
    let mut later: Option<Timestamp> = None;
    let ready: Vec<usize> = current
        .members
        .iter()
        .copied()
        .filter(|&i| to_assign(i))
        .filter(|&i| {
            let offset = wave::jitter_offset(&nodes[i].name, waves.jitter);
            let at = since
                .checked_add(SignedDuration::try_from(offset).unwrap_or(SignedDuration::ZERO))
                .unwrap_or(Timestamp::MAX);
            if now < at {
                later = Some(later.map_or(at, |l| l.min(at)));
            }
            now >= at
        })
        .take(slots)
        .collect();
    if let Some(later) = later.filter(|_| slots > ready.len()) {
        report.wake_at = Some(report.wake_at.map_or(later, |w| w.min(later)));
    }
    start(&ready, &mut report, actions);
    report
}

/// One round of a drain in progress on `node` (`drain: auto`): assign the target once
/// the node is empty, else evict again (or force, or give up after the timeout).
#[allow(clippy::too_many_arguments)]
fn continue_drain(
    pool: &Arc<str>,
    node: &NodeInfo,
    view: &drain::DrainView,
    settings: &drain::Drain,
    assign_change: &NodeChange,
    now: Timestamp,
    drains: &DrainObservations,
    drain_wake: &mut Option<Timestamp>,
    report: &mut PoolReport,
    actions: &mut Vec<NodeAction>,
) {
    let name: Arc<str> = Arc::from(node.name.as_str());
    let seen = drains.get(&name);
    if seen.is_some_and(|s| s.pods_left == 0) {
        push_action(actions, node, Some(pool), assign_change.clone(), "drained");
        return;
    }
    let timeout = SignedDuration::try_from(settings.timeout).unwrap_or(SignedDuration::MAX);
    let deadline = view
        .since
        .and_then(|s| s.checked_add(timeout).ok())
        .unwrap_or(Timestamp::MAX);
    let work = if now < deadline {
        drain::DrainWork::Evict
    } else if settings.force {
        drain::DrainWork::Force
    } else {
        push_action(
            actions,
            node,
            Some(pool),
            NodeChange::GiveUp {
                message: drain::blocked_message(settings.timeout, seen),
                uncordon: view.cordoned,
            },
            "drain timed out",
        );
        return;
    };
    report.drains.push(DrainTask { node: name, work });
    if let Some(s) = seen {
        report.draining.push(format!(
            "{}: {} pod(s) left{}",
            node.name,
            s.pods_left,
            s.blocker
                .as_deref()
                .map(|b| format!("; {b}"))
                .unwrap_or_default()
        ));
    } else {
        report
            .draining
            .push(format!("{}: cordoned, evicting", node.name));
    }
    let wake = drain::retry_at(now).min(deadline);
    *drain_wake = Some(drain_wake.map_or(wake, |w: Timestamp| w.min(wake)));
}
