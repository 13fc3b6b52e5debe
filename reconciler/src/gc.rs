//! Garbage collection of published ConfigMaps: which ones to delete ([`plan_gc`]).
//!
//! Pure and synchronous, like the rollout planner: the controller lists the ConfigMaps
//! carrying the pool label in its namespace, passes them with the config references of
//! the nodes ([`references`], or the fleet's running count of them, as the node watch
//! shows them after its first sync: an empty list protects nothing) and the current
//! targets, and deletes what comes back.
//!
//! # Rules
//!
//! - Only the ConfigMaps given are considered: the caller lists those in the reconciler's
//!   namespace with the `kubelet-gitops.io/pool` label; anything else is never returned.
//! - **Protected**, whatever their age: a ConfigMap that any node names in desired-config,
//!   current-config or last-known-good (namespace-qualified: `other-ns/<same name>` does
//!   not protect it), and every current target.
//! - **Live pools** (those in the repository's current commit, i.e. those with a target):
//!   the `keep` newest per pool are kept, newest by `created`, then by name (the greater
//!   name counts as newer, so ties resolve the same way every time); the older ones are
//!   deleted. A `created` that does not parse counts as newest: when in doubt, keep.
//! - **Removed pools** (no target names them any more): every ConfigMap of theirs is
//!   deleted once no node names it.
//! - A pool is live when a target is one of its published ConfigMaps or its name is
//!   `kubelet-<pool>-<suffix>` as [`configmap_name`](kubelet_gitops_core::protocol::configmap_name)
//!   builds it, so a pool whose new ConfigMap is not in the list yet keeps its history.
//! - The result is sorted by name, without duplicates.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashSet};

use kubelet_gitops_core::hash::SUFFIX_LEN;
use kubelet_gitops_core::protocol::{CURRENT_CONFIG, ConfigRef, DESIRED_CONFIG, LAST_KNOWN_GOOD};

use crate::model::NodeInfo;

/// A ConfigMap the reconciler published, as listed from the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedConfigMap {
    pub name: String,
    /// The `kubelet-gitops.io/pool` label.
    pub pool: String,
    /// `metadata.creationTimestamp`, RFC 3339.
    pub created: String,
}

/// The annotations whose values name ConfigMaps a node uses: garbage collection keeps
/// those.
pub const REFERENCING: [&str; 3] = [DESIRED_CONFIG, CURRENT_CONFIG, LAST_KNOWN_GOOD];

/// What `nodes` name in desired-config, current-config and last-known-good: the
/// ConfigMaps they protect from garbage collection.
pub fn references(nodes: &[NodeInfo]) -> Vec<&str> {
    nodes
        .iter()
        .flat_map(|node| {
            REFERENCING
                .into_iter()
                .filter_map(|key| node.annotations.get(key))
        })
        .collect()
}

/// The names of the ConfigMaps to delete (see the module docs for the rules).
/// `referenced`: the nodes' config references ([`references`]).
pub fn plan_gc(
    keep: usize,
    published: &[PublishedConfigMap],
    referenced: &[&str],
    targets: &[ConfigRef],
    namespace: &str,
) -> Vec<String> {
    let in_namespace = |r: ConfigRef| match r {
        ConfigRef::ConfigMap {
            namespace: ns,
            name,
        } if ns == namespace => Some(name),
        _ => None,
    };

    let target_names: HashSet<String> = targets.iter().cloned().filter_map(in_namespace).collect();
    let mut protected: HashSet<String> = referenced
        .iter()
        .filter_map(|value| value.parse::<ConfigRef>().ok())
        .filter_map(in_namespace)
        .collect();
    protected.extend(target_names.iter().cloned());

    let mut live_pools: HashSet<&str> = published
        .iter()
        .filter(|cm| target_names.contains(&cm.name))
        .map(|cm| cm.pool.as_str())
        .collect();
    live_pools.extend(target_names.iter().filter_map(|n| pool_of_name(n)));

    let mut by_pool: BTreeMap<&str, Vec<&PublishedConfigMap>> = BTreeMap::new();
    for cm in published {
        by_pool.entry(cm.pool.as_str()).or_default().push(cm);
    }

    let mut delete = BTreeSet::new();
    for (pool, mut configmaps) in by_pool {
        let kept = if live_pools.contains(pool) {
            configmaps.sort_by(|a, b| newest_first(a, b));
            configmaps.dedup_by(|a, b| a.name == b.name);
            keep.min(configmaps.len())
        } else {
            0
        };
        delete.extend(
            configmaps[kept..]
                .iter()
                .filter(|cm| !protected.contains(&cm.name))
                .map(|cm| cm.name.clone()),
        );
    }
    delete.into_iter().collect()
}

/// Orders ConfigMaps newest first: by creation time (unparseable = newest), then by name
/// (greater = newer).
fn newest_first(a: &PublishedConfigMap, b: &PublishedConfigMap) -> Ordering {
    let time = |cm: &PublishedConfigMap| humantime::parse_rfc3339_weak(&cm.created).ok();
    let by_time = match (time(a), time(b)) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(x), Some(y)) => y.cmp(&x),
    };
    by_time.then_with(|| b.name.cmp(&a.name))
}

/// The pool in a name `kubelet-<pool>-<suffix>`, the suffix being a ConfigMap hash.
fn pool_of_name(name: &str) -> Option<&str> {
    let rest = name.strip_prefix("kubelet-")?;
    let pool_len = rest.len().checked_sub(SUFFIX_LEN + 1)?;
    let pool = rest.get(..pool_len)?;
    let suffix = rest.get(pool_len..)?;
    (!pool.is_empty() && suffix.starts_with('-')).then_some(pool)
}

#[cfg(test)]
mod tests;
