//! Zone waves: a pool that rolls one label value at a time ([`Waves`]): the waves of a
//! pool's nodes ([`group`]) and each node's jitter ([`jitter_offset`]).
//!
//! Pure. The order of waves is the label's values sorted (byte order), then the nodes
//! without the label as a last wave; within a wave the nodes keep the pool's canary order.

use std::fmt;
use std::time::Duration;

use crate::model::NodeInfo;

/// The label a pool's waves go by unless it names another.
pub const DEFAULT_WAVE_LABEL: &str = "topology.kubernetes.io/zone";

/// `spec.rollout.waves`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waves {
    /// The node label whose values make the waves.
    pub by: String,
    /// How long after a wave is all Done the next one starts (zero: at once).
    pub soak: Duration,
    /// Assignments within a wave are spread over `[0, jitter)` after the wave opens.
    pub jitter: Duration,
}

impl Default for Waves {
    fn default() -> Self {
        Waves {
            by: DEFAULT_WAVE_LABEL.to_string(),
            soak: Duration::ZERO,
            jitter: Duration::ZERO,
        }
    }
}

impl fmt::Display for Waves {
    /// `by topology.kubernetes.io/zone, soak 10m, jitter 30s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "by {}", self.by)?;
        if !self.soak.is_zero() {
            write!(f, ", soak {}", humantime::format_duration(self.soak))?;
        }
        if !self.jitter.is_zero() {
            write!(f, ", jitter {}", humantime::format_duration(self.jitter))?;
        }
        Ok(())
    }
}

/// One wave: the label value (`None`: the nodes without the label) and its nodes, as
/// indices into the slice given to [`group`], in that slice's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wave {
    pub value: Option<String>,
    pub members: Vec<usize>,
}

impl Wave {
    /// `b`, or `(unlabelled)`.
    pub fn name(&self) -> &str {
        self.value.as_deref().unwrap_or("(unlabelled)")
    }
}

/// The waves of `nodes` by label `by`: one per value, sorted, then the unlabelled nodes.
/// No empty wave; no wave at all for no node.
pub fn group(nodes: &[&NodeInfo], by: &str) -> Vec<Wave> {
    let mut waves: Vec<Wave> = Vec::new();
    let mut unlabelled = Vec::new();
    let mut by_value: std::collections::BTreeMap<&str, Vec<usize>> = Default::default();
    for (i, n) in nodes.iter().enumerate() {
        match n.labels.get(by) {
            Some(v) => by_value.entry(v).or_default().push(i),
            None => unlabelled.push(i),
        }
    }
    for (value, members) in by_value {
        waves.push(Wave {
            value: Some(value.to_string()),
            members,
        });
    }
    if !unlabelled.is_empty() {
        waves.push(Wave {
            value: None,
            members: unlabelled,
        });
    }
    waves
}

/// A node's delay within its wave: in `[0, jitter)`, from a hash of its name (FNV-1a, a
/// fixed function: the same on every replica and after every restart), to the
/// millisecond. Zero when `jitter` is zero.
pub fn jitter_offset(node: &str, jitter: Duration) -> Duration {
    let span = jitter.as_millis() as u64;
    if span == 0 {
        return Duration::ZERO;
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in node.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    Duration::from_millis(h % span)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::testing::node;

    #[test]
    fn waves_are_sorted_values_then_the_unlabelled() {
        let nodes: Vec<NodeInfo> = vec![
            node("n1").labels(&[("zone", "b")]).build(),
            node("n2").build(),
            node("n3").labels(&[("zone", "a")]).build(),
            node("n4").labels(&[("zone", "b")]).build(),
        ];
        let refs: Vec<&NodeInfo> = nodes.iter().collect();
        let w = group(&refs, "zone");
        assert_eq!(w.len(), 3);
        assert_eq!((w[0].name(), w[0].members.clone()), ("a", vec![2]));
        assert_eq!((w[1].name(), w[1].members.clone()), ("b", vec![0, 3]));
        assert_eq!(
            (w[2].name(), w[2].members.clone()),
            ("(unlabelled)", vec![1])
        );
    }

    #[test]
    fn no_nodes_no_waves_and_all_unlabelled_is_one_wave() {
        assert!(group(&[], "zone").is_empty());
        let nodes = [node("n1").build(), node("n2").build()];
        let refs: Vec<&NodeInfo> = nodes.iter().collect();
        let w = group(&refs, "zone");
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].value, None);
        assert_eq!(w[0].members, vec![0, 1]);
    }

    #[test]
    fn jitter_is_deterministic_and_within_range() {
        let j = Duration::from_secs(30);
        let a = jitter_offset("node-a", j);
        assert_eq!(a, jitter_offset("node-a", j), "the same every time");
        assert!(a < j);
        let offsets: std::collections::BTreeSet<Duration> = (0..50)
            .map(|i| jitter_offset(&format!("node-{i}"), j))
            .collect();
        assert!(offsets.len() > 40, "spread: {offsets:?}");
        assert!(offsets.iter().all(|o| *o < j));
        assert_eq!(jitter_offset("node-a", Duration::ZERO), Duration::ZERO);
        // The fixed function: a known value, so a change of it is noticed.
        assert_eq!(
            jitter_offset("a", Duration::from_millis(1000)),
            Duration::from_millis(12_638_187_200_555_641_996 % 1000)
        );
    }
}
