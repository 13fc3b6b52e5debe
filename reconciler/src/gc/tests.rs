use super::*;
use crate::rollout::testing::{NS, cm, node};

fn published(pool: &str, name: &str, created: &str) -> PublishedConfigMap {
    PublishedConfigMap {
        name: name.to_string(),
        pool: pool.to_string(),
        created: created.to_string(),
    }
}

/// Five gpu ConfigMaps, `kubelet-gpu-0000000001` (oldest) to `...5` (newest), and the
/// newest is the target.
fn gpu_history() -> Vec<PublishedConfigMap> {
    (1..=5)
        .map(|i| {
            published(
                "gpu",
                &format!("kubelet-gpu-000000000{i}"),
                &format!("2025-01-0{i}T00:00:00Z"),
            )
        })
        .collect()
}

fn gpu(i: u32) -> String {
    format!("kubelet-gpu-000000000{i}")
}

#[test]
fn keeps_the_newest_per_pool() {
    let mut cms = gpu_history();
    cms.push(published(
        "cpu",
        "kubelet-cpu-000000000a",
        "2025-01-01T00:00:00Z",
    ));
    cms.push(published(
        "cpu",
        "kubelet-cpu-000000000b",
        "2025-01-02T00:00:00Z",
    ));
    cms.reverse();
    let targets = [cm(&gpu(5)), cm("kubelet-cpu-000000000b")];
    assert_eq!(
        plan_gc(2, &cms, &[], &targets, NS),
        vec![gpu(1), gpu(2), gpu(3)]
    );
    assert_eq!(plan_gc(5, &cms, &[], &targets, NS), Vec::<String>::new());
    // keep 0: only what is protected stays.
    assert_eq!(
        plan_gc(0, &cms, &[], &targets, NS),
        vec![
            "kubelet-cpu-000000000a".to_string(),
            gpu(1),
            gpu(2),
            gpu(3),
            gpu(4)
        ]
    );
}

#[test]
fn never_deletes_what_a_node_names_or_a_target() {
    let cms = gpu_history();
    let nodes = [
        node("a").desired(&format!("{NS}/{}", gpu(1))).build(),
        node("b").current(&format!("{NS}/{}", gpu(2))).build(),
        node("c")
            .lkg(&format!("{NS}/{}", gpu(3)))
            .current("local")
            .build(),
        // Another namespace's ConfigMap of the same name protects nothing here.
        node("d").desired(&format!("elsewhere/{}", gpu(4))).build(),
        node("e").desired("garbage").build(),
    ];
    // The target is an old one (a revert): it stays too.
    let targets = [cm(&gpu(4)), ConfigRef::configmap("elsewhere", gpu(5))];
    assert_eq!(
        plan_gc(0, &cms, &references(&nodes), &targets, NS),
        vec![gpu(5)]
    );
}

#[test]
fn a_removed_pool_goes_once_no_node_names_it() {
    let mut cms = gpu_history();
    cms.push(published(
        "old",
        "kubelet-old-000000000a",
        "2025-01-01T00:00:00Z",
    ));
    cms.push(published(
        "old",
        "kubelet-old-000000000b",
        "2025-01-02T00:00:00Z",
    ));
    let targets = [cm(&gpu(5))];
    let nodes = [node("n")
        .lkg(&format!("{NS}/kubelet-old-000000000b"))
        .build()];
    assert_eq!(
        plan_gc(10, &cms, &references(&nodes), &targets, NS),
        vec!["kubelet-old-000000000a".to_string()]
    );
    assert_eq!(
        plan_gc(10, &cms, &[], &targets, NS),
        vec![
            "kubelet-old-000000000a".to_string(),
            "kubelet-old-000000000b".to_string()
        ]
    );
}

#[test]
fn a_pool_whose_new_target_is_not_listed_yet_keeps_its_history() {
    let cms = gpu_history();
    let targets = [cm("kubelet-gpu-000000000x")];
    assert_eq!(plan_gc(3, &cms, &[], &targets, NS), vec![gpu(1), gpu(2)]);
    // A pool name with dashes is recognised from the target's name as well.
    let dashed = [published(
        "gpu-a100",
        "kubelet-gpu-a100-0000000001",
        "2025-01-01T00:00:00Z",
    )];
    let targets = [cm("kubelet-gpu-a100-000000000x")];
    assert!(plan_gc(1, &dashed, &[], &targets, NS).is_empty());
    assert_eq!(
        pool_of_name("kubelet-gpu-a100-9mbkccg2cc"),
        Some("gpu-a100")
    );
    assert_eq!(pool_of_name("kubelet--9mbkccg2cc"), None);
    assert_eq!(pool_of_name("kubelet-9mbkccg2cc"), None);
    assert_eq!(pool_of_name("other-gpu-9mbkccg2cc"), None);
}

#[test]
fn ties_and_unparseable_times_resolve_deterministically() {
    let cms = [
        published("p", "kubelet-p-000000000b", "2025-01-01T00:00:00Z"),
        published("p", "kubelet-p-000000000a", "2025-01-01T00:00:00Z"),
        published("p", "kubelet-p-000000000c", "2025-01-01T00:00:00Z"),
        published("p", "kubelet-p-000000000z", "not a time"),
        published("p", "kubelet-p-000000000t", "2025-01-03T00:00:00.5Z"),
    ];
    let targets = [cm("kubelet-p-000000000t")];
    // Newest first: z (unknown time), t, then c, b, a by name.
    assert_eq!(
        plan_gc(3, &cms, &[], &targets, NS),
        vec![
            "kubelet-p-000000000a".to_string(),
            "kubelet-p-000000000b".to_string()
        ]
    );
    let mut shuffled = cms.to_vec();
    shuffled.rotate_left(2);
    assert_eq!(
        plan_gc(3, &shuffled, &[], &targets, NS),
        plan_gc(3, &cms, &[], &targets, NS)
    );
}
