//! Which nodes would refuse a pool's config, before it reaches them: each pool's
//! rendered config checked against every distinct kubelet set-up of the nodes it would
//! reach, exactly as the node agent will check it
//! ([`kubelet_gitops_core::node_setup::NodeSetup::check`]: the node's drop-ins and
//! command-line flags over the config, the kubelet's validation, the runtime's cgroup
//! driver).
//!
//! A node's set-up comes from its agent's report (the Node's
//! `kubelet-gitops.io/node-setup` annotation) or from a node inventory
//! ([`NodeInfo::setup`]). Nodes are grouped by the report's exact text, so a pool costs
//! one check per distinct set-up, not one per node. A node without a report (an agent
//! older than the report, or not started yet) or with one that cannot be used is not
//! checked, and said so ([`Unchecked`]); it never blocks anything.
//!
//! `kubelet-gitops plan` ([`crate::plan`]) makes a refusal an error of the plan, and
//! `run` refuses a commit with one before it publishes anything
//! ([`crate::controller`]). Pure.

use std::collections::BTreeMap;
use std::fmt;

use kubelet_gitops_core::effective::Effective;
use kubelet_gitops_core::node_setup::{NodeSetup, Refusal, Verdict};
use kubelet_gitops_core::protocol::{ConfigRef, DESIRED_CONFIG};

use crate::model::NodeInfo;
use crate::render::{RenderedPool, RenderedRepo};

/// Node names listed in one message at most; the rest are counted.
const LISTED: usize = 10;

/// A pool's config that some nodes would refuse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRefusal {
    /// The pool.
    pub pool: String,
    /// The pool's file, relative to the repository root.
    pub source_path: String,
    /// The nodes of one set-up that would refuse it, sorted.
    pub nodes: Vec<String>,
    /// What they would say, in the kubelet's words (the flag that set the field named).
    pub refusal: Refusal,
}

impl fmt::Display for NodeRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let first = self.nodes.first().map(String::as_str).unwrap_or("?");
        write!(
            f,
            "node {first} would refuse the config of pool {}: {}",
            self.pool, self.refusal
        )?;
        let rest = &self.nodes[1.min(self.nodes.len())..];
        if !rest.is_empty() {
            write!(
                f,
                " (so would {} with the same kubelet set-up: {})",
                count(rest.len(), "more node"),
                listed(rest)
            )?;
        }
        Ok(())
    }
}

/// Nodes of a pool that were not checked, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unchecked {
    /// The pool.
    pub pool: String,
    /// The nodes, sorted.
    pub nodes: Vec<String>,
    /// Why: no report, or why the report cannot be used.
    pub why: String,
}

impl fmt::Display for Unchecked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of pool {} not checked against the pool's config ({}): {}",
            count(self.nodes.len(), "node"),
            self.pool,
            self.why,
            listed(&self.nodes)
        )
    }
}

/// Why a node without a report is not checked.
pub const NO_REPORT: &str =
    "no report of the node's kubelet set-up: its agent predates the report or is not running";

/// What checking one pool against its nodes found.
#[derive(Debug, Clone, Default)]
pub struct PoolCheck {
    /// Each distinct set-up that takes the config: its nodes (sorted) and the effective
    /// config they would run (with the fields their flags override).
    pub accepted: Vec<(Vec<String>, Box<Effective>)>,
    /// Each distinct set-up that would refuse it.
    pub refused: Vec<NodeRefusal>,
    /// Nodes not checked, grouped by why.
    pub unchecked: Vec<Unchecked>,
    /// How many checks ran (distinct set-ups with a usable report).
    pub checks: usize,
}

/// Checks `pool`'s config against `nodes` (those it would reach), once per distinct
/// set-up.
pub fn check_pool(pool: &RenderedPool, nodes: &[&NodeInfo]) -> PoolCheck {
    let mut by_setup: BTreeMap<Option<&str>, Vec<&str>> = BTreeMap::new();
    for n in nodes {
        by_setup
            .entry(n.setup.as_deref())
            .or_default()
            .push(n.name.as_str());
    }
    let mut out = PoolCheck::default();
    let mut unchecked: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (setup, mut names) in by_setup {
        names.sort_unstable();
        let names: Vec<String> = names.into_iter().map(str::to_string).collect();
        let Some(text) = setup else {
            unchecked
                .entry(NO_REPORT.to_string())
                .or_default()
                .extend(names);
            continue;
        };
        let verdict = match NodeSetup::from_annotation(text) {
            Ok(setup) => setup.check(&pool.spec.source_path, pool.rendered.as_bytes()),
            Err(why) => Verdict::Unchecked(why),
        };
        match verdict {
            Verdict::Accepted(eff) => {
                out.checks += 1;
                out.accepted.push((names, eff));
            }
            Verdict::Refused(refusal) => {
                out.checks += 1;
                out.refused.push(NodeRefusal {
                    pool: pool.spec.name.clone(),
                    source_path: pool.spec.source_path.clone(),
                    nodes: names,
                    refusal,
                });
            }
            Verdict::Unchecked(why) => unchecked
                .entry(format!("its report cannot be used: {why}"))
                .or_default()
                .extend(names),
        }
    }
    out.refused.sort_by(|a, b| a.nodes.cmp(&b.nodes));
    out.unchecked = unchecked
        .into_iter()
        .map(|(why, mut nodes)| {
            nodes.sort();
            Unchecked {
                pool: pool.spec.name.clone(),
                nodes,
                why,
            }
        })
        .collect();
    out
}

/// What checking a whole commit against the cluster's nodes found ([`check_selected`]).
#[derive(Debug, Clone, Default)]
pub struct CommitCheck {
    /// The nodes that would refuse their pool's config, per pool and set-up.
    pub refused: Vec<NodeRefusal>,
    /// The nodes not checked, per pool and reason.
    pub unchecked: Vec<Unchecked>,
    /// How many checks ran (distinct set-ups per pool).
    pub checks: usize,
    /// How many nodes the commit would reach (assign a config they do not have yet).
    pub reached: usize,
}

/// Checks every pool of `rendered` (its ConfigMaps in `namespace`) against the nodes it
/// would reach: `selected[i]`, the nodes `rendered.pools[i]` selects (overlaps excepted,
/// as the rollout leaves them alone; the reconciler finds them in its fleet by the label
/// index, without copying a node: [`crate::fleet::Fleet::selected_by`]), less those whose
/// desired config is already the pool's ConfigMap: a node that runs or is being given
/// that config already is not checked again.
pub fn check_selected(
    rendered: &RenderedRepo,
    namespace: &str,
    selected: &[Vec<&NodeInfo>],
) -> CommitCheck {
    let mut out = CommitCheck::default();
    for (pool, nodes) in rendered.pools.iter().zip(selected) {
        let target = ConfigRef::configmap(namespace, &pool.configmap_name).to_string();
        let reached: Vec<&NodeInfo> = nodes
            .iter()
            .copied()
            .filter(|n| n.annotations.get(DESIRED_CONFIG) != Some(&target))
            .collect();
        if reached.is_empty() {
            continue;
        }
        out.reached += reached.len();
        let checked = check_pool(pool, &reached);
        out.checks += checked.checks;
        out.refused.extend(checked.refused);
        out.unchecked.extend(checked.unchecked);
    }
    out
}

fn count(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// `a, b, c` (at most [`LISTED`], then `and N more`).
fn listed(names: &[String]) -> String {
    let mut out = names
        .iter()
        .take(LISTED)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > LISTED {
        out.push_str(&format!(" and {} more", names.len() - LISTED));
    }
    out
}

#[cfg(test)]
mod tests {
    use kubelet_gitops_core::inventory::Inventory;

    use super::*;
    use crate::model;
    use crate::render::{self, RenderOptions};
    use crate::source::MemorySource;

    /// [`check_selected`] over `nodes`, each pool's found by the whole-fleet assignment.
    fn check_commit(rendered: &RenderedRepo, namespace: &str, nodes: &[NodeInfo]) -> CommitCheck {
        let assignment = model::assign(&rendered.specs(), nodes);
        let by_name: BTreeMap<&str, &NodeInfo> =
            nodes.iter().map(|n| (n.name.as_str(), n)).collect();
        let selected: Vec<Vec<&NodeInfo>> = rendered
            .pools
            .iter()
            .map(|pool| {
                assignment
                    .pools
                    .get(&pool.spec.name)
                    .into_iter()
                    .flatten()
                    .filter_map(|n| by_name.get(n.as_str()).copied())
                    .collect()
            })
            .collect();
        check_selected(rendered, namespace, &selected)
    }

    fn pool(kubelet: &str) -> RenderedPool {
        let src = MemorySource::new([(
            "pools/general.yaml".to_string(),
            format!(
                "apiVersion: kubelet-gitops.io/v1alpha1\nkind: NodePool\nmetadata: {{name: general}}\nspec:\n  nodeSelector: {{}}\n  kubelet:\n{kubelet}"
            ),
        )]);
        render::render_repo(&src, &RenderOptions::default())
            .expect("renders")
            .pools
            .remove(0)
    }

    fn node(name: &str, inventory_fields: &str) -> NodeInfo {
        let yaml = format!(
            "nodes:\n- name: {name}\n  capacity: {{cpu: \"8\", memory: 32Gi, ephemeral-storage: 100Gi, pods: \"110\"}}\n{inventory_fields}"
        );
        let inv = Inventory::parse("inv.yaml", yaml.as_bytes()).expect("inventory");
        NodeInfo {
            name: name.into(),
            setup: Some(inv.nodes[0].setup().to_annotation().into()),
            ..NodeInfo::default()
        }
    }

    #[test]
    fn one_check_per_distinct_setup_and_every_refusing_node_named() {
        let p = pool("    maxPods: 64\n    cgroupDriver: systemd\n");
        let qos = "  kubeletFlags: \"--cgroups-per-qos=false\"\n";
        let nodes = [
            node("w3", qos),
            node("w1", ""),
            node("w2", qos),
            NodeInfo {
                name: "old".into(),
                ..NodeInfo::default()
            },
        ];
        let refs: Vec<&NodeInfo> = nodes.iter().collect();
        let check = check_pool(&p, &refs);
        assert_eq!(check.checks, 2, "w2 and w3 share a set-up");
        assert_eq!(check.accepted.len(), 1);
        assert_eq!(check.accepted[0].0, ["w1"]);
        assert_eq!(check.refused.len(), 1);
        let r = &check.refused[0];
        assert_eq!(r.nodes, ["w2", "w3"]);
        assert_eq!(
            r.to_string(),
            "node w2 would refuse the config of pool general: failed to validate config: invalid configuration: cgroupsPerQOS (--cgroups-per-qos) must be set to true when \"pods\" contained in enforceNodeAllocatable (--enforce-node-allocatable) (value set by the kubelet flag --cgroups-per-qos) (so would 1 more node with the same kubelet set-up: w3)"
        );
        assert_eq!(check.unchecked.len(), 1);
        assert_eq!(check.unchecked[0].nodes, ["old"]);
        assert!(
            check.unchecked[0].to_string().starts_with(
                "1 node of pool general not checked against the pool's config (no report"
            ),
            "{}",
            check.unchecked[0]
        );
    }

    #[test]
    fn the_runtimes_cgroup_driver_is_checked() {
        let p = pool("    maxPods: 64\n");
        let n = node("w1", "  runtimeCgroupDriver: systemd\n");
        let check = check_pool(&p, &[&n]);
        assert_eq!(check.refused.len(), 1);
        assert!(
            check.refused[0]
                .refusal
                .detail
                .contains("set cgroupDriver: systemd in the pool or the base"),
            "{}",
            check.refused[0]
        );
    }

    #[test]
    fn a_report_that_does_not_parse_is_not_checked() {
        let p = pool("    maxPods: 64\n");
        let n = NodeInfo {
            name: "w1".into(),
            setup: Some("{not json".into()),
            ..NodeInfo::default()
        };
        let check = check_pool(&p, &[&n]);
        assert_eq!(check.checks, 0);
        assert!(
            check.unchecked[0]
                .why
                .starts_with("its report cannot be used: "),
            "{:?}",
            check.unchecked
        );
    }

    #[test]
    fn long_node_lists_are_cut() {
        let names: Vec<String> = (0..13).map(|i| format!("n{i:02}")).collect();
        assert_eq!(
            listed(&names),
            "n00, n01, n02, n03, n04, n05, n06, n07, n08, n09 and 3 more"
        );
    }

    #[test]
    fn a_commit_is_checked_against_the_nodes_it_would_reach_only() {
        let src = MemorySource::new([
            (
                "pools/general.yaml".to_string(),
                "apiVersion: kubelet-gitops.io/v1alpha1\nkind: NodePool\nmetadata: {name: general}\nspec:\n  nodeSelector: {matchLabels: {pool: general}}\n  kubelet:\n    maxPods: 64\n".to_string(),
            ),
        ]);
        let rendered = render::render_repo(&src, &RenderOptions::default()).expect("renders");
        let target = format!("kubelet-gitops/{}", rendered.pools[0].configmap_name);
        let labelled = |mut n: NodeInfo| {
            n.labels.insert("pool", "general");
            n
        };
        let qos = "  kubeletFlags: \"--cgroups-per-qos=false\"\n";
        let mut on_target = labelled(node("done", qos));
        on_target.annotations.insert(DESIRED_CONFIG, target.clone());
        let nodes = vec![
            labelled(node("new", qos)),
            on_target,
            node("elsewhere", qos),
            labelled(node("fine", "")),
        ];
        let check = check_commit(&rendered, "kubelet-gitops", &nodes);
        assert_eq!(
            check.reached, 2,
            "not the node on the target, not the one outside"
        );
        assert_eq!(check.refused.len(), 1);
        assert_eq!(check.refused[0].nodes, ["new"]);
        assert_eq!(check.refused[0].source_path, "pools/general.yaml");
    }
}
