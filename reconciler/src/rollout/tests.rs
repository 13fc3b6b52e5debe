use std::time::Duration;

use kubelet_gitops_core::protocol::{DESIRED_CONFIG, HEALTH_TIMEOUT, LKG_GRACE, POOL, State};
use serde_json::json;

use super::testing::{NS, agent_step, apply_plan, cm, node, pool};
use super::*;
use crate::model::IntOrPercent;

/// When every fixture target ConfigMap was created.
const PUBLISHED: &str = "2025-01-01T00:00:00Z";
const BEFORE: &str = "2024-12-01T00:00:00Z";
const AFTER: &str = "2025-01-02T00:00:00Z";

fn target<'a>(spec: &'a PoolSpec, name: &str) -> PoolTarget<'a> {
    PoolTarget {
        spec,
        target: cm(name),
        target_created: Some(PUBLISHED.to_string()),
        class: None,
        wave_opened: None,
    }
}

fn plan(pools: &[PoolTarget<'_>], nodes: &[NodeInfo]) -> RolloutPlan {
    plan_rollout(
        NS,
        pools,
        nodes,
        jiff::Timestamp::UNIX_EPOCH,
        &Default::default(),
    )
}

/// `(node, reason)` of every action.
fn actions(plan: &RolloutPlan) -> Vec<(&str, &str)> {
    plan.actions.iter().map(|a| (&*a.node, a.reason)).collect()
}

fn report<'p>(plan: &'p RolloutPlan, pool: &str) -> &'p PoolReport {
    plan.pools
        .iter()
        .find(|r| r.pool == pool)
        .unwrap_or_else(|| panic!("no report for pool {pool}"))
}

fn assigns(action: &NodeAction, target: &ConfigRef) -> bool {
    matches!(&action.change, NodeChange::Assign { desired, .. } if **desired == *target)
}

/// `n` nodes `<prefix>-01..` in pool `pool`, Done on `config`.
fn done_nodes(prefix: &str, pool: &str, n: usize, config: &str) -> Vec<NodeInfo> {
    (1..=n)
        .map(|i| {
            node(&format!("{prefix}-{i:02}"))
                .labels(&[("pool", pool)])
                .done_on(pool, &format!("{NS}/{config}"))
                .build()
        })
        .collect()
}

#[test]
fn canary_gates_the_rest_and_busy_never_exceeds_max_unavailable() {
    let spec = pool("gpu")
        .canary(2)
        .max_unavailable(IntOrPercent::Int(3))
        .build();
    let t2 = cm("kubelet-gpu-new");
    let pools = [target(&spec, "kubelet-gpu-new")];
    let mut nodes = done_nodes("gpu", "gpu", 11, "kubelet-gpu-old");
    // Labelled canary: first in canary order despite its name.
    nodes.push(
        node("gpu-zz")
            .labels(&[("pool", "gpu")])
            .canary()
            .done_on("gpu", &format!("{NS}/kubelet-gpu-old"))
            .build(),
    );
    let canary = ["gpu-zz", "gpu-01"];

    let mut max_busy = 0;
    let mut canary_done_round = None;
    let mut first_other_round = None;
    let mut converged = false;
    for round in 0..200 {
        let canary_done = canary.iter().all(|c| {
            node_status(nodes.iter().find(|n| n.name == *c).unwrap(), &t2)
                == NodeRolloutStatus::Done
        });
        if canary_done && canary_done_round.is_none() {
            canary_done_round = Some(round);
        }
        let p = plan(&pools, &nodes);
        let r = report(&p, "gpu");
        assert_eq!(r.canary, canary);
        assert_eq!(r.max_unavailable, 3);
        assert!(r.failed.is_empty());
        for a in &p.actions {
            assert!(assigns(a, &t2), "round {round}: unexpected {a:?}");
            let is_canary = canary.contains(&&*a.node);
            if is_canary {
                assert_eq!(a.reason, "canary");
            } else {
                assert!(
                    canary_done,
                    "round {round}: {} assigned before the canary was Done",
                    a.node
                );
                assert_eq!(a.reason, "rollout");
                first_other_round.get_or_insert(round);
            }
        }
        if p.actions.is_empty() && r.phase == PoolPhase::Complete {
            converged = true;
            break;
        }
        apply_plan(&mut nodes, &p);
        let busy = nodes
            .iter()
            .filter(|n| node_status(n, &t2).is_busy())
            .count();
        assert!(
            busy <= 3,
            "round {round}: {busy} nodes busy, maxUnavailable 3"
        );
        max_busy = max_busy.max(busy);
        // Nodes progress at different speeds: odd-numbered nodes only every other round.
        for (i, n) in nodes.iter_mut().enumerate() {
            if i % 2 == 0 || round % 2 == 0 {
                agent_step(n);
            }
        }
    }
    assert!(converged, "the rollout did not converge");
    assert!(
        nodes
            .iter()
            .all(|n| node_status(n, &t2) == NodeRolloutStatus::Done)
    );
    assert_eq!(max_busy, 3, "the rollout uses the whole budget");
    let (done, other) = (canary_done_round.unwrap(), first_other_round.unwrap());
    assert!(
        other >= done,
        "non-canary at round {other}, canary Done at {done}"
    );
}

#[test]
fn a_failure_halts_the_pool() {
    for failure in [State::Degraded, State::RolledBack] {
        let spec = pool("gpu")
            .canary(1)
            .max_unavailable(IntOrPercent::Int(2))
            .build();
        let t = format!("{NS}/kubelet-gpu-new");
        let mut nodes = done_nodes("gpu", "gpu", 5, "kubelet-gpu-old");
        nodes[0] = node("gpu-01")
            .labels(&[("pool", "gpu")])
            .assigned("gpu", &t)
            .observed(&t)
            .current(&format!("{NS}/kubelet-gpu-old"))
            .state(failure)
            .message("failed to validate config: maxPods must be positive")
            .build();
        nodes.push(
            node("gpu-new")
                .labels(&[("pool", "gpu")])
                .created(AFTER)
                .build(),
        );
        let p = plan(&[target(&spec, "kubelet-gpu-new")], &nodes);
        assert!(p.actions.is_empty(), "{failure}: {:?}", p.actions);
        let r = report(&p, "gpu");
        assert_eq!(r.phase, PoolPhase::Halted);
        assert_eq!(
            r.failed,
            vec![NodeFailure {
                node: "gpu-01".into(),
                state: super::Failure::Agent(failure),
                message: Some("failed to validate config: maxPods must be positive".into()),
            }]
        );
        assert_eq!((r.done, r.in_progress, r.waiting, r.nodes), (0, 0, 5, 6));

        // A new commit restarts the rollout: the failure was about the old target.
        let p = plan(&[target(&spec, "kubelet-gpu-newer")], &nodes);
        let r = report(&p, "gpu");
        assert_eq!(r.phase, PoolPhase::Progressing);
        assert!(r.failed.is_empty());
        assert_eq!(
            node_status(&nodes[0], &cm("kubelet-gpu-newer")),
            NodeRolloutStatus::Waiting
        );
        assert_eq!(
            actions(&p),
            vec![("gpu-01", "canary"), ("gpu-new", "new node")]
        );
    }
}

#[test]
fn a_paused_pool_assigns_nothing_but_reports() {
    let spec = pool("gpu")
        .paused()
        .max_unavailable(IntOrPercent::Int(5))
        .build();
    let mut nodes = done_nodes("gpu", "gpu", 4, "kubelet-gpu-old");
    nodes.push(
        node("gpu-new")
            .labels(&[("pool", "gpu")])
            .created(AFTER)
            .build(),
    );
    nodes.push(
        node("gpu-on")
            .labels(&[("pool", "gpu")])
            .done_on("gpu", &format!("{NS}/kubelet-gpu-new"))
            .build(),
    );
    let p = plan(&[target(&spec, "kubelet-gpu-new")], &nodes);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    let r = report(&p, "gpu");
    assert_eq!(r.phase, PoolPhase::Paused);
    assert_eq!((r.nodes, r.done, r.waiting, r.in_progress), (6, 1, 5, 0));

    // Unpaused, the same cluster moves.
    let spec = pool("gpu").max_unavailable(IntOrPercent::Int(5)).build();
    let p = plan(&[target(&spec, "kubelet-gpu-new")], &nodes);
    assert!(!p.actions.is_empty());
}

#[test]
fn a_new_node_gets_the_target_at_once() {
    let spec = pool("gpu")
        .canary(1)
        .max_unavailable(IntOrPercent::Int(1))
        .build();
    let t = format!("{NS}/kubelet-gpu-new");
    let l = [("pool", "gpu")];
    let nodes = vec![
        // The canary is busy: no slot, gate closed.
        node("gpu-01").labels(&l).assigned("gpu", &t).build(),
        node("gpu-02")
            .labels(&l)
            .done_on("gpu", &format!("{NS}/kubelet-gpu-old"))
            .build(),
        node("gpu-03").labels(&l).created(AFTER).build(),
        node("gpu-04").labels(&l).created(BEFORE).build(),
        node("gpu-05").labels(&l).build(),
        node("gpu-06").labels(&l).created(PUBLISHED).build(),
        node("gpu-07")
            .labels(&l)
            .created(AFTER)
            .done_on("gpu", &format!("{NS}/kubelet-gpu-old"))
            .build(),
        node("gpu-08").labels(&l).created("yesterday").build(),
    ];
    let pools = [target(&spec, "kubelet-gpu-new")];
    let p = plan(&pools, &nodes);
    assert_eq!(actions(&p), vec![("gpu-03", "new node")]);
    let a = &p.actions[0];
    assert_eq!(a.pool.as_deref(), Some("gpu"));
    assert!(assigns(a, &cm("kubelet-gpu-new")));

    // A target whose creation time is unknown makes no node new.
    let unknown = [PoolTarget {
        target_created: None,
        class: None,
        wave_opened: None,
        ..pools[0].clone()
    }];
    assert!(plan(&unknown, &nodes).actions.is_empty());

    // A new node takes no slot of the rolling update, and is assigned once.
    let spec = pool("p")
        .canary(0)
        .max_unavailable(IntOrPercent::Int(1))
        .build();
    let mut nodes = done_nodes("p", "p", 3, "kubelet-p-old");
    nodes.push(node("p-00").labels(&[("pool", "p")]).created(AFTER).build());
    let p = plan(&[target(&spec, "kubelet-p-new")], &nodes);
    assert_eq!(actions(&p), vec![("p-00", "new node"), ("p-01", "rollout")]);
}

#[test]
fn a_node_that_left_every_pool_returns_to_local() {
    let gpu = pool("gpu").build();
    let removed = pool("removed").build();
    let mut nodes = vec![
        node("gpu-01")
            .labels(&[("pool", "gpu")])
            .done_on("gpu", &format!("{NS}/kubelet-gpu-a"))
            .build(),
        // Relabelled out of gpu.
        node("moved")
            .labels(&[("pool", "cpu")])
            .done_on("gpu", &format!("{NS}/kubelet-gpu-a"))
            .build(),
        // Its pool was removed from the repository.
        node("orphan")
            .labels(&[("pool", "removed")])
            .done_on("removed", &format!("{NS}/kubelet-removed-a"))
            .build(),
        // Not ours.
        node("foreign")
            .desired("other-ns/kubelet-gpu-a")
            .annotation(POOL, "gpu")
            .build(),
        node("local").desired("local").build(),
        node("junk").desired("not a ref").build(),
        node("plain").build(),
        // Leftovers without a desired-config.
        node("stale")
            .annotation(POOL, "gpu")
            .annotation(HEALTH_TIMEOUT, "2m")
            .build(),
    ];
    let p = plan(&[target(&gpu, "kubelet-gpu-a")], &nodes);
    assert_eq!(
        actions(&p),
        vec![
            ("moved", "left every pool"),
            ("orphan", "left every pool"),
            ("stale", "stale annotations"),
        ]
    );
    for a in &p.actions {
        assert_eq!(a.pool, None);
        assert_eq!(a.change, NodeChange::Unassign);
    }
    // With the pool still in the repository, its node stays.
    let p2 = plan(
        &[
            target(&gpu, "kubelet-gpu-a"),
            target(&removed, "kubelet-removed-a"),
        ],
        &nodes,
    );
    assert!(!actions(&p2).contains(&("orphan", "left every pool")));

    apply_plan(&mut nodes, &p);
    let moved = nodes.iter().find(|n| n.name == "moved").unwrap();
    for key in [DESIRED_CONFIG, HEALTH_TIMEOUT, LKG_GRACE, POOL] {
        assert!(
            !moved.annotations.contains_key(key),
            "{key} left on the node"
        );
    }
    assert!(
        plan(&[target(&gpu, "kubelet-gpu-a")], &nodes)
            .actions
            .is_empty()
    );
}

#[test]
fn overlapping_nodes_are_left_untouched() {
    let a = pool("a").selector(&[("role", "x")]).build();
    let b = pool("b").selector(&[("zone", "1")]).build();
    let old = format!("{NS}/kubelet-a-old");
    let nodes = vec![
        node("both")
            .labels(&[("role", "x"), ("zone", "1")])
            .done_on("a", &old)
            .build(),
        node("both-new")
            .labels(&[("role", "x"), ("zone", "1")])
            .created(AFTER)
            .build(),
        node("only-a")
            .labels(&[("role", "x")])
            .done_on("a", &format!("{NS}/kubelet-a-new"))
            .build(),
    ];
    let p = plan(
        &[target(&a, "kubelet-a-new"), target(&b, "kubelet-b-new")],
        &nodes,
    );
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    let names: Vec<&str> = p.overlaps.iter().map(|o| o.node.as_str()).collect();
    assert_eq!(names, vec!["both", "both-new"]);
    assert_eq!(report(&p, "a").nodes, 1);
    assert_eq!(report(&p, "a").phase, PoolPhase::Complete);
    assert_eq!(report(&p, "b").phase, PoolPhase::Empty);
}

#[test]
fn busy_nodes_on_the_old_target_count_against_max_unavailable() {
    let spec = pool("gpu")
        .canary(0)
        .max_unavailable(IntOrPercent::Int(2))
        .build();
    let t1 = format!("{NS}/kubelet-gpu-t1");
    let mut nodes = done_nodes("gpu", "gpu", 6, "kubelet-gpu-t1");
    let l = [("pool", "gpu")];
    // Mid-rollout of t1: one not yet observed, one applying.
    nodes[4] = node("gpu-05")
        .labels(&l)
        .done_on("gpu", &format!("{NS}/kubelet-gpu-t0"))
        .assigned("gpu", &t1)
        .build();
    nodes[5] = node("gpu-06")
        .labels(&l)
        .assigned("gpu", &t1)
        .observed(&t1)
        .state(State::Applying)
        .build();
    let pools = [target(&spec, "kubelet-gpu-t2")];
    let p = plan(&pools, &nodes);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    let r = report(&p, "gpu");
    assert_eq!((r.busy, r.in_progress, r.waiting, r.done), (2, 0, 6, 0));
    assert_eq!(
        node_status(&nodes[5], &cm("kubelet-gpu-t2")),
        NodeRolloutStatus::Busy {
            desired: cm("kubelet-gpu-t1")
        }
    );

    // One settles on t1: one slot, the first waiting node in order takes it.
    agent_step(&mut nodes[5]);
    agent_step(&mut nodes[5]);
    let p = plan(&pools, &nodes);
    assert_eq!(report(&p, "gpu").busy, 1);
    assert_eq!(actions(&p), vec![("gpu-01", "rollout")]);
}

#[test]
fn percent_max_unavailable_rounds_down_but_not_below_one() {
    for (size, percent, expected) in [(10, 25, 2), (3, 10, 1), (7, 50, 3), (4, 100, 4)] {
        let spec = pool("p")
            .canary(0)
            .max_unavailable(IntOrPercent::Percent(percent))
            .build();
        let nodes = done_nodes("p", "p", size, "kubelet-p-old");
        let p = plan(&[target(&spec, "kubelet-p-new")], &nodes);
        assert_eq!(
            report(&p, "p").max_unavailable,
            expected,
            "{percent}% of {size}"
        );
        assert_eq!(p.actions.len(), expected, "{percent}% of {size}");
    }
}

#[test]
fn the_canary_covers_a_small_pool_and_zero_disables_it() {
    let spec = pool("p")
        .canary(5)
        .max_unavailable(IntOrPercent::Int(1))
        .build();
    let nodes = done_nodes("p", "p", 3, "kubelet-p-old");
    let p = plan(&[target(&spec, "kubelet-p-new")], &nodes);
    assert_eq!(report(&p, "p").canary, vec!["p-01", "p-02", "p-03"]);
    assert_eq!(actions(&p), vec![("p-01", "canary")]);

    let spec = pool("p")
        .canary(0)
        .max_unavailable(IntOrPercent::Int(3))
        .build();
    let p = plan(&[target(&spec, "kubelet-p-new")], &nodes);
    assert!(report(&p, "p").canary.is_empty());
    assert_eq!(
        actions(&p),
        vec![
            ("p-01", "rollout"),
            ("p-02", "rollout"),
            ("p-03", "rollout")
        ]
    );
}

#[test]
fn changed_rollout_settings_are_rewritten_without_a_new_config() {
    let spec = pool("gpu").paused().build();
    let t = format!("{NS}/kubelet-gpu-a");
    let nodes = vec![
        node("same")
            .labels(&[("pool", "gpu")])
            .done_on("gpu", &t)
            .build(),
        node("stale")
            .labels(&[("pool", "gpu")])
            .done_on("gpu", &t)
            .annotation(HEALTH_TIMEOUT, "1m")
            .build(),
    ];
    let p = plan(&[target(&spec, "kubelet-gpu-a")], &nodes);
    assert_eq!(actions(&p), vec![("stale", "rollout settings changed")]);
    assert_eq!(
        p.actions[0].patch()["metadata"]["annotations"][HEALTH_TIMEOUT],
        json!("2m")
    );
}

#[test]
fn planning_again_after_applying_changes_nothing() {
    let gpu = pool("gpu")
        .canary(1)
        .max_unavailable(IntOrPercent::Int(2))
        .build();
    let cpu = pool("cpu")
        .canary(0)
        .max_unavailable(IntOrPercent::Percent(50))
        .build();
    let mut nodes = done_nodes("gpu", "gpu", 5, "kubelet-gpu-old");
    nodes.extend(done_nodes("cpu", "cpu", 6, "kubelet-cpu-old"));
    nodes.push(
        node("gpu-new")
            .labels(&[("pool", "gpu")])
            .created(AFTER)
            .build(),
    );
    nodes.push(
        node("gone")
            .done_on("gpu", &format!("{NS}/kubelet-gpu-old"))
            .build(),
    );
    nodes[6].annotations.insert(LKG_GRACE, "1h");
    let pools = [
        target(&gpu, "kubelet-gpu-new"),
        target(&cpu, "kubelet-cpu-new"),
    ];

    let first = plan(&pools, &nodes);
    assert_eq!(
        actions(&first),
        vec![
            ("gone", "left every pool"),
            ("cpu-01", "rollout"),
            ("cpu-02", "rollout"),
            ("cpu-03", "rollout"),
            ("gpu-01", "canary"),
            ("gpu-new", "new node"),
        ]
    );
    apply_plan(&mut nodes, &first);
    let second = plan(&pools, &nodes);
    assert!(second.actions.is_empty(), "{:?}", second.actions);
    assert_eq!(report(&second, "cpu").busy, 3);
    assert_eq!(report(&second, "gpu").busy, 2);
}

#[test]
fn a_converged_fleet_of_5000_nodes_and_50_pools_needs_no_writes() {
    let specs: Vec<PoolSpec> = (0..50).map(|i| pool(&format!("p{i:02}")).build()).collect();
    let pools: Vec<PoolTarget<'_>> = specs
        .iter()
        .map(|s| target(s, &format!("kubelet-{}-abc", s.name)))
        .collect();
    let nodes: Vec<NodeInfo> = (0..5000)
        .map(|i| {
            let p = format!("p{:02}", i % 50);
            node(&format!("node-{i:05}"))
                .labels(&[("pool", &p)])
                .created(AFTER)
                .done_on(&p, &format!("{NS}/kubelet-{p}-abc"))
                .build()
        })
        .collect();
    let p = plan(&pools, &nodes);
    assert!(p.actions.is_empty(), "{} actions", p.actions.len());
    assert!(p.overlaps.is_empty());
    assert_eq!(p.pools.len(), 50);
    for r in &p.pools {
        assert_eq!(
            (r.phase, r.nodes, r.done),
            (PoolPhase::Complete, 100, 100),
            "{}",
            r.pool
        );
    }
}

#[test]
fn the_plan_does_not_depend_on_input_order() {
    let gpu = pool("gpu")
        .canary(1)
        .max_unavailable(IntOrPercent::Int(3))
        .build();
    let cpu = pool("cpu")
        .canary(0)
        .max_unavailable(IntOrPercent::Int(3))
        .build();
    let mut nodes = done_nodes("gpu", "gpu", 4, "kubelet-gpu-old");
    nodes[0] = node("gpu-01")
        .labels(&[("pool", "gpu")])
        .done_on("gpu", &format!("{NS}/kubelet-gpu-new"))
        .build();
    nodes.extend(done_nodes("cpu", "cpu", 4, "kubelet-cpu-old"));
    nodes.push(
        node("a-gone")
            .done_on("cpu", &format!("{NS}/kubelet-cpu-old"))
            .build(),
    );
    let pools = vec![
        target(&gpu, "kubelet-gpu-new"),
        target(&cpu, "kubelet-cpu-new"),
    ];
    let forward = plan(&pools, &nodes);

    nodes.reverse();
    let backward = plan(&pools.into_iter().rev().collect::<Vec<_>>(), &nodes);
    assert_eq!(forward, backward);
    let keys: Vec<(Option<&str>, &str)> = forward
        .actions
        .iter()
        .map(|a| (a.pool.as_deref(), &*a.node))
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
    assert_eq!(keys.first(), Some(&(None, "a-gone")));
    assert_eq!(
        forward
            .pools
            .iter()
            .map(|r| r.pool.as_str())
            .collect::<Vec<_>>(),
        ["cpu", "gpu"]
    );
}

#[test]
fn node_status_classifies_against_the_target() {
    let t = format!("{NS}/kubelet-p-new");
    let old = format!("{NS}/kubelet-p-old");
    let target = cm("kubelet-p-new");
    let cases: Vec<(&str, NodeInfo, NodeRolloutStatus)> = vec![
        (
            "done",
            node("n").done_on("p", &t).build(),
            NodeRolloutStatus::Done,
        ),
        (
            "done without current-config on it",
            node("n").done_on("p", &t).current(&old).build(),
            NodeRolloutStatus::InProgress,
        ),
        (
            "assigned, not observed",
            node("n").done_on("p", &old).desired(&t).build(),
            NodeRolloutStatus::InProgress,
        ),
        (
            "rolled back about an older config",
            node("n")
                .desired(&t)
                .observed(&old)
                .state(State::RolledBack)
                .build(),
            NodeRolloutStatus::InProgress,
        ),
        (
            "verifying",
            node("n")
                .desired(&t)
                .observed(&t)
                .state(State::Verifying)
                .build(),
            NodeRolloutStatus::InProgress,
        ),
        (
            "unknown state",
            node("n")
                .desired(&t)
                .observed(&t)
                .annotation(kubelet_gitops_core::protocol::STATE, "Weird")
                .build(),
            NodeRolloutStatus::InProgress,
        ),
        (
            "degraded",
            node("n")
                .desired(&t)
                .observed(&t)
                .state(State::Degraded)
                .build(),
            NodeRolloutStatus::Failed {
                state: super::Failure::Agent(State::Degraded),
                message: None,
            },
        ),
        ("no desired", node("n").build(), NodeRolloutStatus::Waiting),
        (
            "local",
            node("n").desired("local").build(),
            NodeRolloutStatus::Waiting,
        ),
        (
            "done on old",
            node("n").done_on("p", &old).build(),
            NodeRolloutStatus::Waiting,
        ),
        (
            "failed on old",
            node("n")
                .desired(&old)
                .observed(&old)
                .state(State::RolledBack)
                .build(),
            NodeRolloutStatus::Waiting,
        ),
        (
            "busy on old",
            node("n")
                .desired(&old)
                .observed(&old)
                .state(State::Downloading)
                .build(),
            NodeRolloutStatus::Busy {
                desired: cm("kubelet-p-old"),
            },
        ),
        (
            "busy on a foreign config",
            node("n").desired("other/kubelet-p-x").build(),
            NodeRolloutStatus::Busy {
                desired: ConfigRef::configmap("other", "kubelet-p-x"),
            },
        ),
    ];
    for (what, n, expected) in cases {
        assert_eq!(node_status(&n, &target), expected, "{what}");
    }
}

#[test]
fn canary_order_puts_labelled_nodes_first() {
    let nodes = [
        node("c").build(),
        node("b").canary().build(),
        node("a").build(),
        node("d").labels(&[(CANARY_LABEL, "false")]).build(),
        node("e").canary().build(),
    ];
    let mut refs: Vec<&NodeInfo> = nodes.iter().collect();
    canary_order(&mut refs);
    let names: Vec<&str> = refs.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["b", "e", "a", "c", "d"]);
}

#[test]
fn annotation_patches_set_and_clear_the_reconciler_annotations() {
    let assign = NodeChange::Assign {
        desired: std::sync::Arc::new(cm("kubelet-gpu-9mbkccg2cc")),
        health_timeout: Duration::from_secs(90),
        lkg_grace: Duration::from_secs(600),
    };
    assert_eq!(
        annotation_patch(Some("gpu"), &assign),
        json!({"metadata": {"annotations": {
            DESIRED_CONFIG: "kubelet-gitops/kubelet-gpu-9mbkccg2cc",
            HEALTH_TIMEOUT: "1m 30s",
            LKG_GRACE: "10m",
            POOL: "gpu",
        }}})
    );
    assert_eq!(
        annotation_patch(None, &NodeChange::Unassign),
        json!({"metadata": {"annotations": {
            DESIRED_CONFIG: null, HEALTH_TIMEOUT: null, LKG_GRACE: null, POOL: null,
        }}})
    );
    let mut n = node("n").build();
    assert!(is_noop(&n, None, &NodeChange::Unassign));
    assert!(!is_noop(&n, Some("gpu"), &assign));
    super::testing::apply_patch(&mut n, &annotation_patch(Some("gpu"), &assign));
    assert!(is_noop(&n, Some("gpu"), &assign));
    assert!(!is_noop(&n, Some("cpu"), &assign));
}
