//! The reconciler's vocabulary: node pools (selector, priority, rollout), the nodes it
//! sees, and which pool each node belongs to ([`assign`]).
//!
//! Everything here is pure: the repository renderer produces [`PoolSpec`]s, the rollout
//! planner and `plan` consume them with [`NodeInfo`]s built from the cluster or from an
//! inventory file.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

mod index;
mod strmap;

pub use index::{Placement, PoolIndex, place};
pub use strmap::{Interner, StrMap};

pub use crate::rollout::drain::{Drain, DrainMode};
pub use crate::rollout::wave::Waves;
pub use crate::rollout::window::Maintenance;

/// A `metav1.LabelSelector`: every matchLabels pair and every expression must hold. An
/// empty selector matches every node (as `metav1.LabelSelectorAsSelector` does).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelector {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<Requirement>,
}

/// One `matchExpressions` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// The operators of a label selector requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

impl LabelSelector {
    /// Whether `labels` satisfy the selector.
    pub fn matches(&self, labels: &StrMap) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v.as_str()))
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }

    /// The problems `metav1.ValidateLabelSelector` reports, as `(field, message)`;
    /// `field` is relative to the selector (`matchExpressions[0].values`).
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (i, r) in self.match_expressions.iter().enumerate() {
            match r.operator {
                Operator::In | Operator::NotIn if r.values.is_empty() => out.push((
                    format!("matchExpressions[{i}].values"),
                    "must be specified when `operator` is 'In' or 'NotIn'".to_string(),
                )),
                Operator::Exists | Operator::DoesNotExist if !r.values.is_empty() => out.push((
                    format!("matchExpressions[{i}].values"),
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                        .to_string(),
                )),
                _ => {}
            }
        }
        out
    }

    /// The selector in kubectl's `-l` syntax (`a=b,c in (d,e),!f`), for messages.
    pub fn to_query(&self) -> String {
        let mut parts: Vec<String> = self
            .match_labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        for r in &self.match_expressions {
            parts.push(match r.operator {
                Operator::In => format!("{} in ({})", r.key, r.values.join(",")),
                Operator::NotIn => format!("{} notin ({})", r.key, r.values.join(",")),
                Operator::Exists => r.key.clone(),
                Operator::DoesNotExist => format!("!{}", r.key),
            });
        }
        parts.join(",")
    }
}

impl Requirement {
    /// Whether `labels` satisfy this requirement.
    pub fn matches(&self, labels: &StrMap) -> bool {
        let v = labels.get(&self.key);
        match self.operator {
            Operator::In => v.is_some_and(|v| self.values.iter().any(|x| x == v)),
            Operator::NotIn => v.is_none_or(|v| !self.values.iter().any(|x| x == v)),
            Operator::Exists => v.is_some(),
            Operator::DoesNotExist => v.is_none(),
        }
    }
}

/// A count or a percentage of a pool's nodes (`3`, `"25%"`), like `IntOrString` in a
/// Deployment's `maxUnavailable`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntOrPercent {
    Int(u32),
    Percent(u32),
}

impl IntOrPercent {
    /// The count for a pool of `total` nodes: a percentage rounds down, as a Deployment's
    /// maxUnavailable does, but never below 1 when the pool has nodes, so a rollout
    /// always makes progress.
    pub fn resolve(self, total: usize) -> usize {
        let n = match self {
            IntOrPercent::Int(n) => n as usize,
            IntOrPercent::Percent(p) => total * p as usize / 100,
        };
        if total == 0 { 0 } else { n.clamp(1, total) }
    }
}

impl fmt::Display for IntOrPercent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IntOrPercent::Int(n) => write!(f, "{n}"),
            IntOrPercent::Percent(p) => write!(f, "{p}%"),
        }
    }
}

impl FromStr for IntOrPercent {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let err = || format!("invalid value {s:?}: expected a count (3) or a percentage (25%)");
        match s.strip_suffix('%') {
            Some(p) => {
                let p: u32 = p.parse().map_err(|_| err())?;
                if p > 100 {
                    return Err(format!("invalid value {s:?}: a percentage is at most 100%"));
                }
                Ok(IntOrPercent::Percent(p))
            }
            None => s.parse().map(IntOrPercent::Int).map_err(|_| err()),
        }
    }
}

impl Serialize for IntOrPercent {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            IntOrPercent::Int(n) => s.serialize_u32(*n),
            IntOrPercent::Percent(_) => s.serialize_str(&self.to_string()),
        }
    }
}

impl<'de> Deserialize<'de> for IntOrPercent {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(u32),
            Str(String),
        }
        match Raw::deserialize(d)? {
            Raw::Int(n) => Ok(IntOrPercent::Int(n)),
            Raw::Str(s) => s.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// How a pool rolls out. Defaults: maxUnavailable 1, canary 1, not paused, healthTimeout
/// 2m, lkgGrace 10m (the removed Dynamic Kubelet Configuration's grace period), drain
/// `auto` with a 30m drainTimeout and no force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rollout {
    pub max_unavailable: IntOrPercent,
    pub canary: u32,
    pub paused: bool,
    pub health_timeout: Duration,
    pub lkg_grace: Duration,
    /// Maintenance windows: when assignments may start (`None`: at any time).
    pub maintenance: Option<Maintenance>,
    /// Roll one label value (zone) at a time (`None`: the whole pool at once).
    pub waves: Option<Waves>,
    /// How a `drain`-class change empties a node first.
    pub drain: Drain,
}

impl Default for Rollout {
    fn default() -> Self {
        Rollout {
            max_unavailable: IntOrPercent::Int(1),
            canary: 1,
            paused: false,
            health_timeout: Duration::from_secs(120),
            lkg_grace: Duration::from_secs(600),
            maintenance: None,
            waves: None,
            drain: Drain::default(),
        }
    }
}

/// A pool as the repository defines it (without its rendered config).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSpec {
    /// `metadata.name`.
    pub name: String,
    /// The file it came from, relative to the repository root (`pools/gpu.yaml`).
    pub source_path: String,
    pub selector: LabelSelector,
    /// A node selected by two pools goes to the higher priority; a tie is an error.
    pub priority: i32,
    pub rollout: Rollout,
}

/// What the reconciler (or `plan`) knows about a node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeInfo {
    pub name: String,
    /// Shared strings ([`StrMap`]): a fleet's nodes repeat their labels.
    pub labels: StrMap,
    /// The node protocol's annotations only (`kubelet-gitops.io/*`).
    pub annotations: StrMap,
    /// `metadata.creationTimestamp` as RFC 3339, when known.
    pub created: Option<String>,
    /// `metadata.resourceVersion`, when read from a cluster.
    pub resource_version: Option<String>,
    /// The node's kubelet set-up as JSON ([`kubelet_gitops_core::node_setup::NodeSetup`]),
    /// when known: the agent's `kubelet-gitops.io/node-setup` annotation, or built from an
    /// inventory node. Pools are checked against it before they reach the node
    /// ([`crate::nodecheck`]).
    pub setup: Option<Arc<str>>,
}

/// A node that two pools of the same priority select.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlap {
    pub node: String,
    pub first: (String, String),
    pub second: (String, String),
    pub priority: i32,
}

impl Overlap {
    /// `node` is selected by `first` and `second`, of the same priority.
    pub fn new(node: &str, first: &PoolSpec, second: &PoolSpec) -> Overlap {
        Overlap {
            node: node.to_string(),
            first: (first.name.clone(), first.source_path.clone()),
            second: (second.name.clone(), second.source_path.clone()),
            priority: first.priority,
        }
    }
}

impl fmt::Display for Overlap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "node {} is selected by pool {} ({}) and pool {} ({}) with the same priority {}: \
             give one pool a higher priority or narrow a nodeSelector",
            self.node, self.first.0, self.first.1, self.second.0, self.second.1, self.priority
        )
    }
}

/// Which pool every node belongs to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assignment {
    /// Pool name to its nodes' names, sorted; every pool appears, possibly empty.
    pub pools: BTreeMap<String, Vec<String>>,
    /// Nodes no pool selects.
    pub unassigned: Vec<String>,
    /// Ties; the nodes concerned are in no pool.
    pub overlaps: Vec<Overlap>,
}

impl Assignment {
    /// The pool of `node`, if any.
    pub fn pool_of(&self, node: &str) -> Option<&str> {
        self.pools
            .iter()
            .find(|(_, nodes)| nodes.binary_search_by(|n| n.as_str().cmp(node)).is_ok())
            .map(|(p, _)| p.as_str())
    }
}

/// Assigns each node to the highest-priority pool that selects it. Two pools of the same
/// (highest) priority selecting one node is an [`Overlap`]; the node is then in neither.
pub fn assign(pools: &[PoolSpec], nodes: &[NodeInfo]) -> Assignment {
    let mut out = Assignment {
        pools: pools.iter().map(|p| (p.name.clone(), Vec::new())).collect(),
        ..Assignment::default()
    };
    let index = PoolIndex::new(pools);
    let mut scratch = Vec::new();
    for node in nodes {
        match place(pools, &index, &node.labels, &mut scratch) {
            Placement::Overlap(a, b) => out
                .overlaps
                .push(Overlap::new(&node.name, &pools[a], &pools[b])),
            Placement::Pool(a) => out
                .pools
                .get_mut(&pools[a].name)
                .expect("every pool has an entry")
                .push(node.name.clone()),
            Placement::None => out.unassigned.push(node.name.clone()),
        }
    }
    for nodes in out.pools.values_mut() {
        nodes.sort();
    }
    out.unassigned.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn pool(name: &str, priority: i32, sel: LabelSelector) -> PoolSpec {
        PoolSpec {
            name: name.into(),
            source_path: format!("pools/{name}.yaml"),
            selector: sel,
            priority,
            rollout: Rollout::default(),
        }
    }

    fn node(name: &str, l: &[(&str, &str)]) -> NodeInfo {
        NodeInfo {
            name: name.into(),
            labels: labels(l).into(),
            ..NodeInfo::default()
        }
    }

    fn req(key: &str, op: Operator, values: &[&str]) -> Requirement {
        Requirement {
            key: key.into(),
            operator: op,
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    #[test]
    fn selector_operators() {
        let l: StrMap = labels(&[("pool", "gpu"), ("zone", "a")]).into();
        let sel = |r| LabelSelector {
            match_labels: BTreeMap::new(),
            match_expressions: vec![r],
        };
        assert!(sel(req("pool", Operator::In, &["gpu", "x"])).matches(&l));
        assert!(!sel(req("pool", Operator::In, &["x"])).matches(&l));
        assert!(!sel(req("missing", Operator::In, &["x"])).matches(&l));
        assert!(sel(req("pool", Operator::NotIn, &["x"])).matches(&l));
        assert!(!sel(req("pool", Operator::NotIn, &["gpu"])).matches(&l));
        assert!(sel(req("missing", Operator::NotIn, &["gpu"])).matches(&l));
        assert!(sel(req("zone", Operator::Exists, &[])).matches(&l));
        assert!(!sel(req("missing", Operator::Exists, &[])).matches(&l));
        assert!(sel(req("missing", Operator::DoesNotExist, &[])).matches(&l));
        assert!(!sel(req("zone", Operator::DoesNotExist, &[])).matches(&l));
        assert!(LabelSelector::default().matches(&l), "empty selects all");
        let both = LabelSelector {
            match_labels: labels(&[("zone", "a")]),
            match_expressions: vec![req("pool", Operator::In, &["cpu"])],
        };
        assert!(!both.matches(&l));
        assert_eq!(both.to_query(), "zone=a,pool in (cpu)");
        assert_eq!(
            sel(req("k", Operator::In, &[])).problems()[0].0,
            "matchExpressions[0].values"
        );
        assert!(
            !sel(req("k", Operator::Exists, &["v"]))
                .problems()
                .is_empty()
        );
    }

    #[test]
    fn int_or_percent() {
        assert_eq!("25%".parse(), Ok(IntOrPercent::Percent(25)));
        assert_eq!("3".parse(), Ok(IntOrPercent::Int(3)));
        assert!("101%".parse::<IntOrPercent>().is_err());
        assert!("x".parse::<IntOrPercent>().is_err());
        assert_eq!(IntOrPercent::Percent(10).resolve(30), 3);
        assert_eq!(IntOrPercent::Percent(10).resolve(5), 1, "never below 1");
        assert_eq!(IntOrPercent::Percent(100).resolve(1000), 1000);
        assert_eq!(IntOrPercent::Int(50).resolve(10), 10);
        assert_eq!(IntOrPercent::Int(0).resolve(10), 1);
        assert_eq!(IntOrPercent::Int(3).resolve(0), 0);
        let v: IntOrPercent = serde_json::from_str("\"10%\"").unwrap();
        assert_eq!(v, IntOrPercent::Percent(10));
        assert_eq!(serde_json::to_string(&IntOrPercent::Int(2)).unwrap(), "2");
    }

    #[test]
    fn assignment_priority_and_overlap() {
        let by = |k: &str, v: &str| LabelSelector {
            match_labels: labels(&[(k, v)]),
            match_expressions: vec![],
        };
        let pools = [
            pool("general", 0, LabelSelector::default()),
            pool("gpu", 10, by("pool", "gpu")),
            pool("big", 10, by("mem", "big")),
        ];
        let nodes = [
            node("n1", &[]),
            node("n2", &[("pool", "gpu")]),
            node("n3", &[("pool", "gpu"), ("mem", "big")]),
            node("n4", &[("mem", "big")]),
        ];
        let a = assign(&pools, &nodes);
        assert_eq!(a.pools["general"], vec!["n1"]);
        assert_eq!(a.pools["gpu"], vec!["n2"]);
        assert_eq!(a.pools["big"], vec!["n4"]);
        assert_eq!(a.overlaps.len(), 1);
        let msg = a.overlaps[0].to_string();
        assert!(msg.contains("node n3") && msg.contains("pool gpu") && msg.contains("pool big"));
        assert_eq!(a.pool_of("n4"), Some("big"));
        assert_eq!(a.pool_of("n3"), None);
        let only_gpu = assign(&pools[1..2], &nodes);
        assert_eq!(only_gpu.unassigned, vec!["n1", "n4"]);
    }
}
