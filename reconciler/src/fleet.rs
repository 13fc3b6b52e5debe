//! The fleet as the controller plans it: every node (name, labels, the node protocol's
//! annotations, creation time, set-up), kept up to date one watch event at a time, with
//! each node's pool and each pool's last plan, so that a round costs what changed, not
//! the size of the fleet.
//!
//! - **A Node event** ([`Fleet::upsert`]) compares the node with what is kept: a status
//!   heartbeat (nothing planning reads changed) costs the comparison and nothing else; a
//!   label change places that node again, through the [`PoolIndex`]; an annotation change
//!   marks its pool for planning.
//! - **A new commit** ([`Fleet::set_pools`]) places every node again only when pools were
//!   added, removed, reordered or re-selected (through the index: a few lookups per node,
//!   not one selector per pool); a new config or new rollout settings only mark the pools
//!   concerned.
//! - **Planning** ([`Fleet::plan`]) plans each marked pool with the rollout planner's own
//!   per-pool step ([`crate::rollout::plan_pool`]) and reuses every other pool's last
//!   plan. The result is, by construction and by test, exactly
//!   [`crate::rollout::plan_rollout`] over [`Fleet::snapshot`].
//! - **Own writes** ([`Fleet::node_patched`]) are laid over a node until the watch shows
//!   them (or [`PENDING_TTL`] passes: someone else changed the same annotations, and the
//!   watch shows theirs), so a round plans against what the cluster has, not against a
//!   cache one event behind (which would assign a node twice, or count a busy node as
//!   idle and exceed maxUnavailable).
//! - **Memory**: strings are shared through an [`Interner`] (a fleet's nodes repeat their
//!   label keys and values, and a pool's nodes their desired-config); annotations other
//!   than the protocol's are never kept.
//!
//! No I/O and no clock: times are arguments.

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::api::PartialObjectMeta;
use kubelet_gitops_core::protocol::{DOMAIN, NODE_SETUP};
use serde_json::Value;

use crate::gc::REFERENCING;
use crate::model::{Interner, NodeInfo, Overlap, Placement, PoolIndex, PoolSpec, StrMap, place};
use crate::rollout::{
    DrainObservations, NodeAction, PoolReport, PoolTarget, RolloutPlan, WaveOpened, leave_reason,
    plan_pool, push_leaving,
};
use jiff::Timestamp;
use kubelet_gitops_core::disruption::Class;
use kubelet_gitops_core::protocol::ConfigRef;

/// How long a write may stay unseen before the overlay stops trusting it.
pub const PENDING_TTL: Duration = Duration::from_secs(30);

/// Whether an annotation key is part of the node protocol (ours or the agent's).
pub fn is_protocol_key(key: &str) -> bool {
    key.strip_prefix(DOMAIN)
        .is_some_and(|rest| rest.starts_with('/'))
}

/// Every node, its pool, and every pool's last plan.
#[derive(Debug, Default)]
pub struct Fleet {
    strings: Interner,
    nodes: HashMap<Arc<str>, Slot>,
    /// The pools, in the repository's order (an overlap names the first two).
    specs: Vec<PoolSpec>,
    pools: Vec<PoolEntry>,
    /// Positions into `pools`, sorted by pool name (the plan's order).
    by_name: Vec<usize>,
    index: PoolIndex,
    namespace: String,
    overlaps: BTreeMap<Arc<str>, Overlap>,
    /// Nodes in no pool that must be unassigned, and why.
    leaving: BTreeMap<Arc<str>, &'static str>,
    /// Annotation values naming ConfigMaps (desired, current, last-known-good) to how
    /// many nodes use them.
    refs: HashMap<Arc<str>, usize>,
    pending: HashMap<Arc<str>, Pending>,
    /// The nodes seen since a relist began ([`Fleet::begin_relist`]).
    relisted: Option<HashSet<Arc<str>>>,
    scratch: Vec<usize>,
}

#[derive(Debug)]
struct Slot {
    info: NodeInfo,
    place: Placement,
}

#[derive(Debug)]
struct PoolEntry {
    target: ConfigRef,
    target_created: Option<String>,
    class: Option<Class>,
    members: HashSet<Arc<str>>,
    /// The last plan (report, actions sorted by node); `None`: to plan again.
    planned: Option<(PoolReport, Vec<NodeAction>)>,
    /// When the current wave opened, by the last plan; forgotten when the target changes.
    wave_opened: Option<WaveOpened>,
}

/// A write of ours the watch has not shown yet.
#[derive(Debug)]
struct Pending {
    /// Annotation to its new value (`None`: removed), in shared strings: a rollout's
    /// writes can run ahead of the watch by tens of thousands of nodes, each pending.
    annotations: Vec<(Arc<str>, Option<Arc<str>>)>,
    at: Instant,
    /// The annotations as the watch last showed them.
    observed: StrMap,
}

impl Pending {
    fn shown_in(&self, annotations: &StrMap) -> bool {
        self.annotations
            .iter()
            .all(|(k, v)| annotations.get(k) == v.as_deref())
    }

    fn lay_over(&self, annotations: &mut StrMap) {
        for (k, v) in &self.annotations {
            match v {
                Some(v) => annotations.insert(k.clone(), v.clone()),
                None => {
                    annotations.remove(k);
                }
            }
        }
    }
}

impl Fleet {
    pub fn new() -> Fleet {
        Fleet::default()
    }

    /// Nodes kept.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Every node as planning sees it (pending writes laid over), sorted by name.
    pub fn snapshot(&self) -> Vec<NodeInfo> {
        let mut out: Vec<NodeInfo> = self.nodes.values().map(|s| s.info.clone()).collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// One node as planning sees it.
    pub fn node(&self, name: &str) -> Option<&NodeInfo> {
        self.nodes.get(name).map(|s| &s.info)
    }

    /// The annotation values (desired, current, last-known-good config) some node uses.
    pub fn referenced(&self) -> impl Iterator<Item = &str> {
        self.refs.keys().map(|k| k.as_ref())
    }

    /// Whether none of this replica's writes waits to be seen by the watch.
    pub fn settled(&self) -> bool {
        self.pending.is_empty()
    }

    /// Sets the pools and their targets (a new commit, or a target's creation time now
    /// known). `namespace` is where the reconciler publishes: a desired-config elsewhere
    /// is not ours. Pool names are unique (rendering rejects duplicates); a repeated one
    /// counts once, as in [`crate::rollout::plan_rollout`].
    pub fn set_pools(&mut self, namespace: &str, pools: &[PoolTarget<'_>]) {
        let mut seen = HashSet::new();
        let pools: Vec<&PoolTarget<'_>> = pools
            .iter()
            .filter(|p| seen.insert(p.spec.name.as_str()))
            .collect();
        let placement_key = |s: &PoolSpec| {
            (
                s.name.clone(),
                s.source_path.clone(),
                s.selector.clone(),
                s.priority,
            )
        };
        let same_placement = pools.len() == self.specs.len()
            && pools
                .iter()
                .zip(&self.specs)
                .all(|(p, s)| placement_key(p.spec) == placement_key(s));
        if namespace != self.namespace {
            self.namespace = namespace.to_string();
            let names: Vec<Arc<str>> = self
                .nodes
                .iter()
                .filter(|(_, s)| s.place == Placement::None)
                .map(|(n, _)| n.clone())
                .collect();
            for name in names {
                self.update_leaving(&name);
            }
            for p in &mut self.pools {
                p.planned = None;
            }
        }
        if same_placement {
            for (i, p) in pools.iter().enumerate() {
                let entry = &mut self.pools[i];
                if self.specs[i] != *p.spec
                    || entry.target != p.target
                    || entry.target_created != p.target_created
                    || entry.class != p.class
                {
                    self.specs[i] = p.spec.clone();
                    if entry.target != p.target {
                        entry.wave_opened = None;
                    }
                    entry.target = p.target.clone();
                    entry.target_created = p.target_created.clone();
                    entry.class = p.class;
                    entry.planned = None;
                }
            }
            return;
        }
        // Pools added, removed, reordered or re-selected: place every node again.
        self.specs = pools.iter().map(|p| p.spec.clone()).collect();
        self.pools = pools
            .iter()
            .map(|p| PoolEntry {
                target: p.target.clone(),
                target_created: p.target_created.clone(),
                class: p.class,
                members: HashSet::new(),
                planned: None,
                wave_opened: None,
            })
            .collect();
        self.by_name = (0..self.specs.len()).collect();
        self.by_name
            .sort_by(|&a, &b| self.specs[a].name.cmp(&self.specs[b].name));
        self.index = PoolIndex::new(&self.specs);
        self.overlaps.clear();
        self.leaving.clear();
        let names: Vec<Arc<str>> = self.nodes.keys().cloned().collect();
        for name in names {
            if let Some(slot) = self.nodes.get_mut(&name) {
                slot.place = Placement::None;
            }
            self.place(&name);
        }
    }

    /// A node as the watch shows it: `annotations` may hold any (only the protocol's are
    /// kept). Returns whether anything kept changed (planning may come out differently,
    /// or a held commit's check).
    pub fn upsert<'a>(
        &mut self,
        name: &str,
        labels: impl IntoIterator<Item = (&'a str, &'a str)>,
        annotations: impl IntoIterator<Item = (&'a str, &'a str)>,
        created: Option<String>,
        now: Instant,
    ) -> bool {
        let mut setup = None;
        let mut protocol = Vec::new();
        for (k, v) in annotations {
            if k == NODE_SETUP {
                setup = Some(self.strings.intern(v));
            } else if is_protocol_key(k) {
                protocol.push((k, v));
            }
        }
        let name: Arc<str> = match self.nodes.get_key_value(name) {
            Some((k, _)) => k.clone(),
            None => Arc::from(name),
        };
        let mut info = NodeInfo {
            name: name.to_string(),
            labels: self.strings.map(labels),
            annotations: self.strings.map(protocol),
            created,
            resource_version: None,
            setup,
        };
        if let Some(relisted) = self.relisted.as_mut() {
            relisted.insert(name.clone());
        }
        if let Some(p) = self.pending.get_mut(&name) {
            if p.shown_in(&info.annotations) || now.duration_since(p.at) > PENDING_TTL {
                self.pending.remove(&name);
            } else {
                p.observed = info.annotations.clone();
                p.lay_over(&mut info.annotations);
            }
        }
        self.store(name, info)
    }

    /// [`Fleet::upsert`] of a Node's metadata as the watch delivers it.
    pub fn upsert_meta(&mut self, meta: &PartialObjectMeta<Node>, now: Instant) -> bool {
        fn pairs(map: &Option<BTreeMap<String, String>>) -> impl Iterator<Item = (&str, &str)> {
            map.iter().flatten().map(|(k, v)| (k.as_str(), v.as_str()))
        }
        let m = &meta.metadata;
        self.upsert(
            m.name.as_deref().unwrap_or_default(),
            pairs(&m.labels),
            pairs(&m.annotations),
            m.creation_timestamp.as_ref().map(|t| t.0.to_string()),
            now,
        )
    }

    /// Keeps `info` for `name`; returns whether anything changed.
    fn store(&mut self, name: Arc<str>, info: NodeInfo) -> bool {
        let Some(slot) = self.nodes.get_mut(&name) else {
            count_refs(&mut self.refs, &info, true);
            self.nodes.insert(
                name.clone(),
                Slot {
                    info,
                    place: Placement::None,
                },
            );
            self.place(&name);
            return true;
        };
        let old = &slot.info;
        let labels_changed = old.labels != info.labels;
        let planned_changed =
            labels_changed || old.annotations != info.annotations || old.created != info.created;
        if !planned_changed {
            let changed = old.setup != info.setup;
            slot.info.setup = info.setup;
            return changed;
        }
        count_refs(&mut self.refs, &slot.info, false);
        count_refs(&mut self.refs, &info, true);
        slot.info = info;
        if labels_changed {
            self.unplace(&name);
            self.place(&name);
        } else {
            self.touch(&name);
        }
        true
    }

    /// The node is gone; returns whether it was kept.
    pub fn remove(&mut self, name: &str) -> bool {
        let Some(name) = self.nodes.get_key_value(name).map(|(k, _)| k.clone()) else {
            return false;
        };
        self.pending.remove(&name);
        self.unplace(&name);
        if let Some(slot) = self.nodes.remove(&name) {
            count_refs(&mut self.refs, &slot.info, false);
        }
        true
    }

    /// A relist begins: the nodes it does not show are removed at its end.
    pub fn begin_relist(&mut self) {
        self.relisted = Some(HashSet::new());
    }

    /// The relist is complete: removes the nodes it did not show; returns how many.
    pub fn end_relist(&mut self) -> usize {
        let Some(seen) = self.relisted.take() else {
            return 0;
        };
        let gone: Vec<Arc<str>> = self
            .nodes
            .keys()
            .filter(|n| !seen.contains(*n))
            .cloned()
            .collect();
        for n in &gone {
            self.remove(n);
        }
        gone.len()
    }

    /// Records a merge patch of ours (`{"metadata":{"annotations":{...}}}`) the API server
    /// accepted, and lays it over the node at once.
    pub fn node_patched(&mut self, node: &str, patch: &Value, now: Instant) {
        let Some(annotations) = patch
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
        else {
            return;
        };
        let Some((name, slot)) = self.nodes.get_key_value(node) else {
            return;
        };
        let name = name.clone();
        let earlier = self.pending.remove(&name);
        let had_earlier = earlier.is_some();
        let observed = match earlier {
            Some(earlier) => earlier.observed,
            None => slot.info.annotations.clone(),
        };
        let pending = Pending {
            annotations: annotations
                .iter()
                .map(|(k, v)| {
                    let value = v.as_str().map(|v| self.strings.intern(v));
                    (self.strings.intern(k), value)
                })
                .collect(),
            at: now,
            observed,
        };
        let mut info = slot.info.clone();
        if pending.shown_in(&pending.observed) {
            // The watch showed the write before its response came back (often so when
            // the agent answers at once): nothing waits to be seen, and the fleet is
            // settled without waiting for the next event of the node or PENDING_TTL.
            if had_earlier {
                info.annotations = pending.observed;
                self.store(name, info);
            }
            return;
        }
        pending.lay_over(&mut info.annotations);
        self.pending.insert(name.clone(), pending);
        self.store(name, info);
    }

    /// Drops the writes the watch has not shown within [`PENDING_TTL`]: the node returns
    /// to what the watch showed last. Returns whether any was dropped.
    pub fn expire_pending(&mut self, now: Instant) -> bool {
        let expired: Vec<Arc<str>> = self
            .pending
            .iter()
            .filter(|(_, p)| now.duration_since(p.at) > PENDING_TTL)
            .map(|(n, _)| n.clone())
            .collect();
        for name in &expired {
            let Some(p) = self.pending.remove(name) else {
                continue;
            };
            if let Some(slot) = self.nodes.get(name) {
                let mut info = slot.info.clone();
                info.annotations = p.observed;
                self.store(name.clone(), info);
            }
        }
        !expired.is_empty()
    }

    /// This round's plan at `now`: the marked pools planned again, and those whose last
    /// plan said time alone could change it by now ([`PoolReport::wake_at`]); the others'
    /// last plans reused. Equal to [`crate::rollout::plan_rollout`] over
    /// [`Fleet::snapshot`], each pool given the wave its last plan saw open
    /// ([`PoolReport::wave_opened`]).
    pub fn plan(&mut self, now: Timestamp, drains: &DrainObservations) -> RolloutPlan {
        let mut actions = Vec::new();
        for (name, reason) in &self.leaving {
            if let Some(slot) = self.nodes.get(name) {
                push_leaving(&mut actions, &slot.info, reason);
            }
        }
        let mut reports = Vec::with_capacity(self.pools.len());
        for &i in &self.by_name {
            let entry = &mut self.pools[i];
            let due = entry
                .planned
                .as_ref()
                .is_none_or(|(r, _)| r.wake_at.is_some_and(|w| w <= now));
            if due {
                let wave_opened = entry.wave_opened.clone();
                let members: Vec<&NodeInfo> = entry
                    .members
                    .iter()
                    .filter_map(|n| self.nodes.get(n).map(|s| &s.info))
                    .collect();
                let target = PoolTarget {
                    spec: &self.specs[i],
                    target: entry.target.clone(),
                    target_created: entry.target_created.clone(),
                    class: entry.class,
                    wave_opened,
                };
                let mut pool_actions = Vec::new();
                let report = plan_pool(&target, members, now, drains, &mut pool_actions);
                entry.wave_opened = report.wave_opened.clone();
                pool_actions.sort_by(|a, b| a.node.cmp(&b.node));
                entry.planned = Some((report, pool_actions));
            }
            let (report, pool_actions) = entry.planned.as_ref().expect("planned above");
            actions.extend(pool_actions.iter().cloned());
            reports.push(report.clone());
        }
        RolloutPlan {
            actions,
            pools: reports,
            overlaps: self.overlaps.values().cloned().collect(),
        }
    }

    /// The nodes each of `specs` (a commit's pools, which need not be the fleet's yet)
    /// would select, placed as [`Fleet::set_pools`] would place them (by the label index,
    /// overlaps left out), borrowed: `out[i]` for `specs[i]`, each sorted by name. What
    /// a new commit is checked against before it is applied
    /// ([`crate::nodecheck::check_selected`]), without copying the fleet.
    pub fn selected_by(&self, specs: &[PoolSpec]) -> Vec<Vec<&NodeInfo>> {
        let index = PoolIndex::new(specs);
        let mut scratch = Vec::new();
        let mut out: Vec<Vec<&NodeInfo>> = vec![Vec::new(); specs.len()];
        for slot in self.nodes.values() {
            if let Placement::Pool(i) = place(specs, &index, &slot.info.labels, &mut scratch) {
                out[i].push(&slot.info);
            }
        }
        for nodes in &mut out {
            nodes.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        }
        out
    }

    /// Marks the pool of `node` to be planned again (what the controller saw of its pods
    /// changed).
    pub fn mark_node(&mut self, node: &str) {
        if let Some((name, _)) = self.nodes.get_key_value(node) {
            let name = name.clone();
            self.touch(&name);
        }
    }

    /// Pools that will be planned again at the next [`Fleet::plan`].
    pub fn marked_pools(&self) -> usize {
        self.pools.iter().filter(|p| p.planned.is_none()).count()
    }

    /// Places `name` (currently in no pool) by its labels.
    fn place(&mut self, name: &Arc<str>) {
        let Some(slot) = self.nodes.get_mut(name) else {
            return;
        };
        let placement = place(
            &self.specs,
            &self.index,
            &slot.info.labels,
            &mut self.scratch,
        );
        slot.place = placement;
        match placement {
            Placement::Pool(i) => {
                let entry = &mut self.pools[i];
                entry.members.insert(name.clone());
                entry.planned = None;
            }
            Placement::Overlap(a, b) => {
                let o = Overlap::new(name, &self.specs[a], &self.specs[b]);
                self.overlaps.insert(name.clone(), o);
            }
            Placement::None => self.update_leaving(name),
        }
    }

    /// Takes `name` out of its pool (or overlap, or the leaving list).
    fn unplace(&mut self, name: &Arc<str>) {
        let Some(slot) = self.nodes.get_mut(name) else {
            return;
        };
        match std::mem::replace(&mut slot.place, Placement::None) {
            Placement::Pool(i) => {
                let entry = &mut self.pools[i];
                entry.members.remove(name);
                entry.planned = None;
            }
            Placement::Overlap(..) => {
                self.overlaps.remove(name);
            }
            Placement::None => {
                self.leaving.remove(name);
            }
        }
    }

    /// `name`'s annotations (or creation time) changed: its pool plans again.
    fn touch(&mut self, name: &Arc<str>) {
        match self.nodes.get(name).map(|s| s.place) {
            Some(Placement::Pool(i)) => self.pools[i].planned = None,
            Some(Placement::None) => self.update_leaving(name),
            Some(Placement::Overlap(..)) | None => {}
        }
    }

    fn update_leaving(&mut self, name: &Arc<str>) {
        match self
            .nodes
            .get(name)
            .and_then(|s| leave_reason(&self.namespace, &s.info))
        {
            Some(reason) => {
                self.leaving.insert(name.clone(), reason);
            }
            None => {
                self.leaving.remove(name);
            }
        }
    }
}

/// Adds (or removes) `info`'s ConfigMap references to `refs`.
fn count_refs(refs: &mut HashMap<Arc<str>, usize>, info: &NodeInfo, add: bool) {
    for (key, value) in info.annotations.iter_shared() {
        if !REFERENCING.contains(&key) {
            continue;
        }
        if add {
            *refs.entry(value.clone()).or_default() += 1;
        } else if let Some(n) = refs.get_mut(value.as_ref()) {
            *n -= 1;
            if *n == 0 {
                refs.remove(value.as_ref());
            }
        }
    }
}
