//! Generated fleets whose Nodes look like a managed cloud's, for measurements at scale.
//!
//! [`Inventory::generate`] gives each node two labels (pool and zone); a Node of an EKS
//! managed node group carries about twenty (instance type, node group, AMI, launch
//! template, region, zone and zone id, the EBS CSI driver's topology ...), and a
//! measurement of memory or of list sizes should see Nodes of that size.
//! [`eks_inventory`] generates those: the same names and pools as
//! [`Inventory::generate`], so code written for one works with the other.

use kubelet_gitops_core::inventory::Inventory;

/// The label generated nodes carry their pool in (as [`Inventory::generate`]).
pub const POOL_LABEL: &str = "node.kubernetes.io/pool";

/// The AWS region of generated nodes.
const REGION: &str = "us-west-2";

/// Zones and their zone ids.
const ZONES: [(&str, &str); 3] = [
    ("us-west-2a", "usw2-az1"),
    ("us-west-2b", "usw2-az2"),
    ("us-west-2c", "usw2-az3"),
];

/// `n` nodes over `pools` as [`Inventory::generate`] names and spreads them
/// (`<pool>-<i>`, the pool in [`POOL_LABEL`]), each with the labels of an EKS managed
/// node group's Node: 15 from the inventory and the 5 every kubelet sets, 20 in all.
pub fn eks_inventory(n: usize, pools: &[&str]) -> Inventory {
    let mut inventory = Inventory::generate(n, pools);
    for (i, node) in inventory.nodes.iter_mut().enumerate() {
        let (zone, zone_id) = ZONES[i % ZONES.len()];
        let pool = node
            .labels
            .get(POOL_LABEL)
            .cloned()
            .unwrap_or_else(|| "default".into());
        let instance_type = "m6i.2xlarge";
        let labels = [
            (
                "beta.kubernetes.io/instance-type",
                instance_type.to_string(),
            ),
            ("eks.amazonaws.com/capacityType", "ON_DEMAND".into()),
            ("eks.amazonaws.com/nodegroup", format!("{pool}-ng")),
            (
                "eks.amazonaws.com/nodegroup-image",
                "ami-0c2d3e4f5a6b7c8d9".into(),
            ),
            (
                "eks.amazonaws.com/sourceLaunchTemplateId",
                format!("lt-0{:016x}", fnv(&pool)),
            ),
            ("eks.amazonaws.com/sourceLaunchTemplateVersion", "3".into()),
            ("failure-domain.beta.kubernetes.io/region", REGION.into()),
            ("failure-domain.beta.kubernetes.io/zone", zone.into()),
            (
                "k8s.io/cloud-provider-aws",
                "5f1c0a9e3b7d2c4e6a8b0d1f3e5c7a9b".into(),
            ),
            ("node.kubernetes.io/instance-type", instance_type.into()),
            ("topology.ebs.csi.aws.com/zone", zone.into()),
            ("topology.k8s.aws/zone-id", zone_id.into()),
            ("topology.kubernetes.io/region", REGION.into()),
            ("topology.kubernetes.io/zone", zone.into()),
        ];
        for (k, v) in labels {
            node.labels.insert(k.to_string(), v);
        }
        node.labels.insert(POOL_LABEL.into(), pool);
    }
    inventory
}

/// FNV-1a of `s`: a stable fake id.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eks_nodes_have_twenty_labels_and_the_generated_names_and_pools() {
        let inv = eks_inventory(7, &["general", "gpu"]);
        inv.validate().expect("a valid inventory");
        let plain = Inventory::generate(7, &["general", "gpu"]);
        for (eks, plain) in inv.nodes.iter().zip(&plain.nodes) {
            assert_eq!(eks.name, plain.name);
            assert_eq!(eks.labels[POOL_LABEL], plain.labels[POOL_LABEL]);
            assert_eq!(eks.registered_labels().len(), 20, "{:?}", eks.labels);
        }
        assert_eq!(
            inv.nodes[1].labels["topology.kubernetes.io/zone"],
            "us-west-2b"
        );
        assert_eq!(inv.nodes[1].labels["eks.amazonaws.com/nodegroup"], "gpu-ng");
    }
}
