//! What a change to the config repository would do, before anything is applied: per pool
//! the effective field-level diff, the old and new ConfigMap names, the nodes whose
//! desired config changes, the fields their kubelet flags override, the disruptive
//! fields that change, the disruption class of each change
//! ([`kubelet_gitops_core::disruption`]), and the nodes that would refuse their new config
//! ([`crate::nodecheck`]: an error, like an overlap).
//!
//! [`plan`] is pure; [`markdown`] only formats it: `kubelet-gitops plan` prints the
//! Markdown, the pull-request status (`kubelet-gitops/plan`) carries the summary.

mod diff;
mod disruptive;
pub mod markdown;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use kubelet_gitops_core::disruption::ChangeClass;
use kubelet_gitops_core::message::markdown_text;
use kubelet_gitops_core::types::KubeletConfiguration;

use crate::model::{self, Assignment, NodeInfo, Overlap, Rollout};
use crate::nodecheck::{self, NodeRefusal};
use crate::render::{RenderedPool, RenderedRepo};

pub use diff::{FieldChange, effective_diff};
pub use disruptive::{DISRUPTIVE_FIELDS, Disruption, disruption_of};

/// Everything a change would do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Every pool of either revision, sorted by name (unchanged ones included).
    pub pools: Vec<PoolPlan>,
    /// Nodes the head's pools select with a tie: the head cannot be applied as it is.
    pub overlaps: Vec<Overlap>,
    /// Nodes that would refuse the config their pool gives them (by the kubelet set-up
    /// they report, or the inventory gives): the head cannot be applied as it is.
    pub refusals: Vec<NodeRefusal>,
    /// Changes to the repository settings (`namespace`, `keepConfigMaps`, policy).
    pub settings: Vec<FieldChange>,
    /// How many nodes the plan was computed for (0: no inventory, no nodes listed).
    pub node_count: usize,
    /// Whether there was a base revision to compare with.
    pub has_base: bool,
    /// Remarks for the reader (a base that does not validate, a node whose flags do not
    /// parse ...), printed before the pools.
    pub notes: Vec<String>,
    /// The base revision's short id, for the header (set by the caller).
    pub base_revision: Option<String>,
    /// The head revision's short id, for the header (set by the caller).
    pub head_revision: Option<String>,
}

impl Plan {
    /// Whether the head cannot be applied as it is (overlapping pools, nodes that would
    /// refuse their config).
    pub fn has_errors(&self) -> bool {
        !self.overlaps.is_empty() || !self.refusals.is_empty()
    }

    /// The pools that are added, removed or changed.
    pub fn changed_pools(&self) -> impl Iterator<Item = &PoolPlan> {
        self.pools
            .iter()
            .filter(|p| p.change != PoolChange::Unchanged)
    }

    /// Every node whose desired config changes, once.
    pub fn changed_nodes(&self) -> BTreeSet<&str> {
        self.pools
            .iter()
            .flat_map(|p| p.moves.iter())
            .flat_map(|m| m.nodes.iter().map(String::as_str))
            .collect()
    }
}

/// What happens to one pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PoolChange {
    /// Only in the head.
    Added,
    /// Only in the base: its nodes return to their local config.
    Removed,
    /// Its config or its spec (selector, priority, rollout) differ.
    Changed,
    /// Identical in both (nodes may still move in, when another pool changes).
    Unchanged,
}

impl fmt::Display for PoolChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PoolChange::Added => "added",
            PoolChange::Removed => "removed",
            PoolChange::Changed => "changed",
            PoolChange::Unchanged => "unchanged",
        })
    }
}

/// One pool's part of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolPlan {
    pub name: String,
    pub change: PoolChange,
    /// The pool file (the head's, or the base's for a removed pool).
    pub source_path: String,
    /// The base's ConfigMap, `namespace/name`.
    pub old_configmap: Option<String>,
    /// The head's ConfigMap, `namespace/name`.
    pub new_configmap: Option<String>,
    /// The effective config's changes, the kubelet's defaults applied on both sides. For
    /// an added pool: the fields that differ from the kubelet's defaults.
    pub config_diff: Vec<FieldChange>,
    /// Changes to `nodeSelector`, `priority` and `rollout`.
    pub spec_diff: Vec<FieldChange>,
    /// The disruptive fields among `config_diff`.
    pub disruptive: Vec<Disruption>,
    /// The disruption class of `config_diff` (the highest class of its fields, with the
    /// fields of that class), by the pool's classes in the head; `None` when the config
    /// does not change or the pool is removed. For an added pool, against the kubelet's
    /// defaults (as `config_diff`).
    pub class: Option<ChangeClass>,
    /// Nodes whose desired config changes, grouped by where they come from and go to:
    /// into this pool, or (for nodes that leave every pool) out of it.
    pub moves: Vec<Move>,
    /// Fields of this pool's new config that the kubelet flags of the moving nodes
    /// override.
    pub overrides: Vec<Override>,
    /// The head's rollout for the pool (`None` for a removed pool).
    pub rollout: Option<Rollout>,
    /// How many of the given nodes the pool has in the head.
    pub node_total: usize,
    /// With `rollout.waves`: the waves the given nodes make, in order, as (label value or
    /// `(unlabelled)`, node count).
    pub waves: Vec<(String, usize)>,
}

/// Which config a node is told to run.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Desired {
    /// No desired-config annotation: the node's own config file.
    Local,
    /// A pool's ConfigMap.
    Config {
        pool: String,
        /// `namespace/name`.
        configmap: String,
    },
}

impl Desired {
    fn pool(&self) -> Option<&str> {
        match self {
            Desired::Local => None,
            Desired::Config { pool, .. } => Some(pool),
        }
    }
}

impl fmt::Display for Desired {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Desired::Local => f.write_str("local config"),
            Desired::Config { configmap, .. } => f.write_str(configmap),
        }
    }
}

/// Nodes that go from one config to another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    pub from: Desired,
    pub to: Desired,
    /// Sorted.
    pub nodes: Vec<String>,
    /// For nodes that change pools: the effective diff between the two pools' configs.
    /// `None` within one pool (the pool's own diff applies), and from or to a node's
    /// local config (unknown here).
    pub diff: Option<Vec<FieldChange>>,
    /// The disruptive fields of `diff`.
    pub disruptive: Vec<Disruption>,
    /// The disruption class of `diff`, by the destination pool's classes; `None` without
    /// a diff (or an empty one).
    pub class: Option<ChangeClass>,
}

/// A field the kubelet flags of some nodes set to another value than the config does.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Override {
    /// The config field (`maxPods`).
    pub field: String,
    /// The flag (`--max-pods`).
    pub flag: String,
    /// What the config (with defaults) says, compact JSON.
    pub config_value: Option<String>,
    /// What the flag makes it, compact JSON.
    pub flag_value: String,
    /// The nodes, sorted.
    pub nodes: Vec<String>,
}

/// Compares two rendered revisions for `nodes`. `base` is `None` when there is nothing
/// to compare with (a first commit): every pool is added and every node comes from its
/// local config.
pub fn plan(base: Option<&RenderedRepo>, head: &RenderedRepo, nodes: &[NodeInfo]) -> Plan {
    let head_specs = head.specs();
    let head_assign = model::assign(&head_specs, nodes);
    let base_assign = base.map(|b| model::assign(&b.specs(), nodes));
    let head_pool_of = pool_by_node(&head_assign);
    let base_pool_of = base_assign.as_ref().map(pool_by_node).unwrap_or_default();
    let overlapped: BTreeSet<&str> = head_assign
        .overlaps
        .iter()
        .map(|o| o.node.as_str())
        .collect();

    let desired = |repo: Option<&RenderedRepo>, pool: Option<&str>| -> Desired {
        match (repo, pool) {
            (Some(repo), Some(pool)) => match repo.pool(pool) {
                Some(p) => Desired::Config {
                    pool: pool.to_string(),
                    configmap: format!("{}/{}", repo.settings.namespace, p.configmap_name),
                },
                None => Desired::Local,
            },
            _ => Desired::Local,
        }
    };

    // Group the nodes that change by section (pool) and by (from, to).
    let mut moves: BTreeMap<String, BTreeMap<(Desired, Desired), Vec<String>>> = BTreeMap::new();
    for node in nodes {
        if overlapped.contains(node.name.as_str()) {
            continue;
        }
        let from = desired(base, base_pool_of.get(node.name.as_str()).copied());
        let to = desired(Some(head), head_pool_of.get(node.name.as_str()).copied());
        if from == to {
            continue;
        }
        let Some(section) = to.pool().or(from.pool()).map(str::to_string) else {
            continue;
        };
        moves
            .entry(section)
            .or_default()
            .entry((from, to))
            .or_default()
            .push(node.name.clone());
    }

    let nodes_by_name: BTreeMap<&str, &NodeInfo> =
        nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let mut notes = Vec::new();
    let mut refusals = Vec::new();
    let names: BTreeSet<&str> = head
        .pools
        .iter()
        .map(|p| p.spec.name.as_str())
        .chain(
            base.iter()
                .flat_map(|b| b.pools.iter().map(|p| p.spec.name.as_str())),
        )
        .collect();
    let pools = names
        .into_iter()
        .map(|name| {
            let old = base.and_then(|b| b.pool(name));
            let new = head.pool(name);
            let section_moves = moves.remove(name).unwrap_or_default();
            let mut p = pool_plan(
                name,
                base,
                head,
                old,
                new,
                section_moves,
                &nodes_by_name,
                &mut notes,
                &mut refusals,
            );
            let members = head_assign
                .pools
                .get(name)
                .map(Vec::as_slice)
                .unwrap_or_default();
            p.node_total = members.len();
            if let Some(w) = p.rollout.as_ref().and_then(|r| r.waves.as_ref()) {
                let mut nodes: Vec<&NodeInfo> = members
                    .iter()
                    .filter_map(|n| nodes_by_name.get(n.as_str()).copied())
                    .collect();
                crate::rollout::canary_order(&mut nodes);
                p.waves = crate::rollout::wave::group(&nodes, &w.by)
                    .iter()
                    .map(|g| (g.name().to_string(), g.members.len()))
                    .collect();
            }
            p
        })
        .collect();

    Plan {
        pools,
        overlaps: head_assign.overlaps,
        refusals,
        settings: base
            .map(|b| diff::settings_diff(&b.settings, &head.settings))
            .unwrap_or_default(),
        node_count: nodes.len(),
        has_base: base.is_some(),
        notes,
        base_revision: None,
        head_revision: None,
    }
}

fn pool_by_node(a: &Assignment) -> BTreeMap<&str, &str> {
    a.pools
        .iter()
        .flat_map(|(pool, nodes)| nodes.iter().map(move |n| (n.as_str(), pool.as_str())))
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn pool_plan(
    name: &str,
    base: Option<&RenderedRepo>,
    head: &RenderedRepo,
    old: Option<&RenderedPool>,
    new: Option<&RenderedPool>,
    moves: BTreeMap<(Desired, Desired), Vec<String>>,
    nodes: &BTreeMap<&str, &NodeInfo>,
    notes: &mut Vec<String>,
    refusals: &mut Vec<NodeRefusal>,
) -> PoolPlan {
    let reference = |repo: &RenderedRepo, p: &RenderedPool| {
        format!("{}/{}", repo.settings.namespace, p.configmap_name)
    };
    let old_configmap = base.zip(old).map(|(b, p)| reference(b, p));
    let new_configmap = new.map(|p| reference(head, p));
    let config_diff = match (old, new) {
        (Some(o), Some(n)) => effective_diff(&o.config, &n.config),
        (None, Some(n)) => effective_diff(&KubeletConfiguration::default(), &n.config),
        _ => Vec::new(),
    };
    let spec_diff = match (old, new) {
        (Some(o), Some(n)) => diff::spec_diff(&o.spec, &n.spec),
        _ => Vec::new(),
    };
    let change = match (old, new) {
        (None, _) => PoolChange::Added,
        (_, None) => PoolChange::Removed,
        _ if old_configmap != new_configmap || !spec_diff.is_empty() => PoolChange::Changed,
        _ => PoolChange::Unchanged,
    };
    let disruptive = disruptive::of_diff(&config_diff);
    let class = new.and_then(|n| disruptive::class_of_diff(&config_diff, &n.disruption));
    let source_path = new
        .or(old)
        .map(|p| p.spec.source_path.clone())
        .unwrap_or_default();

    let mut receiving: Vec<String> = Vec::new();
    let moves: Vec<Move> = moves
        .into_iter()
        .map(|((from, to), nodes)| {
            let diff = match (&from, &to) {
                (Desired::Config { pool: a, .. }, Desired::Config { pool: b, .. }) if a != b => {
                    let old = base.and_then(|r| r.pool(a));
                    let new = head.pool(b);
                    old.zip(new)
                        .map(|(o, n)| effective_diff(&o.config, &n.config))
                }
                _ => None,
            };
            if to.pool() == Some(name) {
                receiving.extend(nodes.iter().cloned());
            }
            let disruptive = diff.as_deref().map(disruptive::of_diff).unwrap_or_default();
            let class = match (&to, diff.as_deref()) {
                (Desired::Config { pool, .. }, Some(d)) => head
                    .pool(pool)
                    .and_then(|p| disruptive::class_of_diff(d, &p.disruption)),
                _ => None,
            };
            Move {
                from,
                to,
                nodes,
                diff,
                disruptive,
                class,
            }
        })
        .collect();
    let overrides = match new {
        Some(p) => check(p, &receiving, nodes, notes, refusals),
        None => Vec::new(),
    };
    PoolPlan {
        name: name.to_string(),
        change,
        source_path,
        old_configmap,
        new_configmap,
        config_diff,
        spec_diff,
        disruptive,
        class,
        moves,
        overrides,
        rollout: new.map(|p| p.spec.rollout.clone()),
        node_total: 0,
        waves: Vec::new(),
    }
}

/// Checks `pool`'s config against the `receiving` nodes, once per distinct kubelet
/// set-up ([`nodecheck::check_pool`]): the nodes that would refuse it go to `refusals`,
/// those not checked to `notes`; returns the fields their flags override where they take
/// it.
fn check(
    pool: &RenderedPool,
    receiving: &[String],
    nodes: &BTreeMap<&str, &NodeInfo>,
    notes: &mut Vec<String>,
    refusals: &mut Vec<NodeRefusal>,
) -> Vec<Override> {
    let reached: Vec<&NodeInfo> = receiving
        .iter()
        .filter_map(|n| nodes.get(n.as_str()).copied())
        .collect();
    let checked = nodecheck::check_pool(pool, &reached);
    refusals.extend(checked.refused);
    notes.extend(
        checked
            .unchecked
            .iter()
            .map(|u| markdown_text(&u.to_string())),
    );
    let mut out: BTreeMap<(String, String, Option<String>, String), Vec<String>> = BTreeMap::new();
    for (names, eff) in checked.accepted {
        for o in eff.overrides {
            let key = (
                o.field,
                o.flag,
                o.file_value.as_ref().map(diff::compact),
                diff::compact(&o.flag_value),
            );
            out.entry(key).or_default().extend(names.iter().cloned());
        }
    }
    out.into_iter()
        .map(|((field, flag, config_value, flag_value), mut nodes)| {
            nodes.sort();
            Override {
                field,
                flag,
                config_value,
                flag_value,
                nodes,
            }
        })
        .collect()
}
