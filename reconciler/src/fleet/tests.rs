use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use kubelet_gitops_core::protocol::{DESIRED_CONFIG, NODE_SETUP, STATE, State};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::json;

use super::*;
use crate::gc::references;
use crate::model::{LabelSelector, Operator, Requirement};
use crate::rollout::testing::{NS, agent_step, apply_patch, cm, node, pool};
use crate::rollout::{PoolTarget, plan_rollout};

/// Shows `n` to the fleet as the watch would.
fn show(fleet: &mut Fleet, n: &NodeInfo, now: Instant) -> bool {
    let setup = n.setup.as_deref().map(|s| (NODE_SETUP, s));
    fleet.upsert(
        &n.name,
        n.labels.iter(),
        n.annotations.iter().chain(setup),
        n.created.clone(),
        now,
    )
}

fn targets<'a>(specs: &'a [PoolSpec], names: &[String]) -> Vec<PoolTarget<'a>> {
    specs
        .iter()
        .zip(names)
        .map(|(spec, name)| PoolTarget {
            spec,
            target: cm(name),
            target_created: Some("2026-01-01T00:00:00Z".into()),
            class: None,
            wave_opened: None,
        })
        .collect()
}

#[test]
fn only_the_protocols_annotations_are_kept() {
    let mut fleet = Fleet::new();
    let now = Instant::now();
    assert!(fleet.upsert(
        "n1",
        [("pool", "gpu")],
        [
            (DESIRED_CONFIG, "kubelet-gitops/kubelet-a-1"),
            (NODE_SETUP, "{}"),
            ("node.alpha.kubernetes.io/ttl", "0"),
            ("kubectl.kubernetes.io/last-applied-configuration", "{...}"),
            ("kubelet-gitops.iox/not-ours", "x"),
        ],
        None,
        now,
    ));
    let n = fleet.node("n1").unwrap();
    assert_eq!(n.annotations.keys().collect::<Vec<_>>(), [DESIRED_CONFIG]);
    assert_eq!(n.setup.as_deref(), Some("{}"));
    assert!(is_protocol_key(DESIRED_CONFIG));
    assert!(!is_protocol_key("kubelet-gitops.iox/y"));
    assert!(!is_protocol_key("node.alpha.kubernetes.io/ttl"));
}

#[test]
fn a_heartbeat_is_not_news_and_plans_nothing_again() {
    let specs = [pool("gpu").build(), pool("cpu").build()];
    let mut fleet = Fleet::new();
    let now = Instant::now();
    fleet.set_pools(
        NS,
        &targets(&specs, &["kubelet-gpu-1".into(), "kubelet-cpu-1".into()]),
    );
    let a = node("a").labels(&[("pool", "gpu")]).build();
    let b = node("b").labels(&[("pool", "cpu")]).build();
    assert!(show(&mut fleet, &a, now));
    assert!(show(&mut fleet, &b, now));
    fleet.plan(jiff::Timestamp::UNIX_EPOCH, &Default::default());
    assert_eq!(fleet.marked_pools(), 0);
    // The same node again (a status heartbeat: only its resourceVersion moved).
    assert!(!show(&mut fleet, &a, now), "nothing kept changed");
    assert_eq!(fleet.marked_pools(), 0);
    // Its agent reports: only its pool plans again.
    let mut a2 = a.clone();
    a2.annotations.insert(STATE, State::Applying.as_str());
    assert!(show(&mut fleet, &a2, now));
    assert_eq!(fleet.marked_pools(), 1);
    fleet.plan(jiff::Timestamp::UNIX_EPOCH, &Default::default());
    // A label change moves it: both pools plan again, no other.
    let mut a3 = a2.clone();
    a3.labels.insert("pool", "cpu");
    assert!(show(&mut fleet, &a3, now));
    assert_eq!(fleet.marked_pools(), 2);
    let plan = fleet.plan(jiff::Timestamp::UNIX_EPOCH, &Default::default());
    let cpu = plan.pools.iter().find(|p| p.pool == "cpu").unwrap();
    assert_eq!(cpu.nodes, 2);
}

#[test]
fn a_new_config_plans_only_its_pool_again() {
    let specs: Vec<PoolSpec> = (0..50).map(|i| pool(&format!("p{i}")).build()).collect();
    let mut names: Vec<String> = (0..50).map(|i| format!("kubelet-p{i}-1")).collect();
    let mut fleet = Fleet::new();
    let now = Instant::now();
    fleet.set_pools(NS, &targets(&specs, &names));
    for i in 0..500 {
        let n = node(&format!("n{i}"))
            .labels(&[("pool", &format!("p{}", i % 50))])
            .build();
        show(&mut fleet, &n, now);
    }
    fleet.plan(jiff::Timestamp::UNIX_EPOCH, &Default::default());
    names[7] = "kubelet-p7-2".into();
    fleet.set_pools(NS, &targets(&specs, &names));
    assert_eq!(fleet.marked_pools(), 1);
    let plan = fleet.plan(jiff::Timestamp::UNIX_EPOCH, &Default::default());
    assert_eq!(
        plan,
        plan_rollout(
            NS,
            &targets(&specs, &names),
            &fleet.snapshot(),
            jiff::Timestamp::UNIX_EPOCH,
            &Default::default()
        )
    );
    // A changed selector places every node again.
    let mut specs2 = specs.clone();
    specs2[3]
        .selector
        .match_labels
        .insert("zone".into(), "a".into());
    fleet.set_pools(NS, &targets(&specs2, &names));
    assert_eq!(fleet.marked_pools(), 50);
    let plan = fleet.plan(jiff::Timestamp::UNIX_EPOCH, &Default::default());
    assert_eq!(plan.pools.iter().find(|p| p.pool == "p3").unwrap().nodes, 0);
    assert_eq!(
        plan,
        plan_rollout(
            NS,
            &targets(&specs2, &names),
            &fleet.snapshot(),
            jiff::Timestamp::UNIX_EPOCH,
            &Default::default()
        )
    );
}

#[test]
fn own_writes_show_until_the_watch_does() {
    let specs = [pool("gpu").build()];
    let names = ["kubelet-gpu-1".to_string()];
    let mut fleet = Fleet::new();
    let t0 = Instant::now();
    fleet.set_pools(NS, &targets(&specs, &names));
    let n1 = node("n1")
        .labels(&[("pool", "gpu")])
        .annotation("kubelet-gitops.io/pool", "old")
        .state(State::Done)
        .build();
    show(&mut fleet, &n1, t0);
    let patch = json!({"metadata": {"annotations": {DESIRED_CONFIG: "kubelet-gitops/cm-1", "kubelet-gitops.io/pool": null}}});
    fleet.node_patched("n1", &patch, t0);
    assert!(!fleet.settled());
    let seen = fleet.node("n1").unwrap();
    assert_eq!(
        seen.annotations.get(DESIRED_CONFIG),
        Some("kubelet-gitops/cm-1")
    );
    assert!(!seen.annotations.contains_key("kubelet-gitops.io/pool"));
    assert_eq!(
        seen.annotations.get(STATE),
        Some("Done"),
        "other annotations stay"
    );
    // A stale event (the watch is behind): the write stays laid over.
    show(&mut fleet, &n1, t0 + Duration::from_secs(1));
    assert_eq!(
        fleet.node("n1").unwrap().annotations.get(DESIRED_CONFIG),
        Some("kubelet-gitops/cm-1")
    );
    // The watch catches up (and the agent wrote since): the overlay is dropped.
    let mut shown = n1.clone();
    apply_patch(&mut shown, &patch);
    shown.annotations.insert(STATE, "Applying");
    show(&mut fleet, &shown, t0 + Duration::from_secs(2));
    assert!(fleet.settled());
    assert_eq!(
        fleet.node("n1").unwrap().annotations.get(STATE),
        Some("Applying")
    );

    // A write the watch never shows is dropped after the TTL: back to what it showed.
    fleet.node_patched(
        "n1",
        &json!({"metadata": {"annotations": {STATE: "Bogus"}}}),
        t0,
    );
    assert!(!fleet.expire_pending(t0 + PENDING_TTL));
    assert!(fleet.expire_pending(t0 + PENDING_TTL + Duration::from_secs(1)));
    assert!(fleet.settled());
    assert_eq!(
        fleet.node("n1").unwrap().annotations.get(STATE),
        Some("Applying")
    );
}

/// The watch may show a write (and the agent's answers to it) before the write's
/// response comes back: the write then waits for nothing, and the fleet is settled at
/// once rather than after the next event of the node or PENDING_TTL (at 20,000 nodes
/// the reconciler went on reconciling for 26 s after a rollout for such writes).
#[test]
fn a_write_the_watch_showed_first_leaves_nothing_pending() {
    let specs = [pool("gpu").build()];
    let names = ["kubelet-gpu-1".to_string()];
    let mut fleet = Fleet::new();
    let t0 = Instant::now();
    fleet.set_pools(NS, &targets(&specs, &names));
    let n1 = node("n1").labels(&[("pool", "gpu")]).build();
    show(&mut fleet, &n1, t0);
    let patch = json!({"metadata": {"annotations": {DESIRED_CONFIG: "kubelet-gitops/cm-1"}}});
    let mut shown = n1.clone();
    apply_patch(&mut shown, &patch);
    shown.annotations.insert(STATE, "Done");
    show(&mut fleet, &shown, t0);
    fleet.node_patched("n1", &patch, t0);
    assert!(fleet.settled());
    assert_eq!(
        fleet.node("n1").unwrap().annotations.get(STATE),
        Some("Done"),
        "the node as the watch showed it"
    );
    // Not yet shown: pending, as before.
    let patch2 = json!({"metadata": {"annotations": {DESIRED_CONFIG: "kubelet-gitops/cm-2"}}});
    fleet.node_patched("n1", &patch2, t0);
    assert!(!fleet.settled());
}

#[test]
fn a_relist_removes_the_nodes_it_does_not_show() {
    let mut fleet = Fleet::new();
    let now = Instant::now();
    for n in ["a", "b", "c"] {
        show(&mut fleet, &node(n).build(), now);
    }
    fleet.begin_relist();
    show(&mut fleet, &node("b").build(), now);
    show(&mut fleet, &node("d").build(), now);
    assert_eq!(fleet.len(), 4, "nothing is removed before the relist ends");
    assert_eq!(fleet.end_relist(), 2);
    let names: Vec<String> = fleet.snapshot().into_iter().map(|n| n.name).collect();
    assert_eq!(names, ["b", "d"]);
    assert!(fleet.remove("b"));
    assert!(!fleet.remove("b"));
}

#[test]
fn nodes_share_their_strings() {
    let mut fleet = Fleet::new();
    let now = Instant::now();
    for i in 0..100 {
        let host = format!("ip-10-0-0-{i}.ec2.internal");
        fleet.upsert(
            &host,
            [
                ("kubernetes.io/hostname", host.as_str()),
                ("topology.kubernetes.io/zone", "eu-west-1a"),
                ("node.kubernetes.io/instance-type", "m7i.2xlarge"),
            ],
            [(DESIRED_CONFIG, "kubelet-gitops/kubelet-general-0123456789")],
            None,
            now,
        );
    }
    // 3 keys, 2 shared values, 1 annotation key and value, 100 host names.
    assert_eq!(fleet.strings.len(), 3 + 2 + 2 + 100);
}

/// A pool set: selectors of every kind (matchLabels, In, NotIn, Exists), priorities with
/// ties, some pools paused.
fn random_specs(rng: &mut ChaCha8Rng) -> Vec<PoolSpec> {
    let count = 2 + rng.random_range(0..5);
    (0..count)
        .map(|i| {
            let name = format!("p{i}");
            let mut spec = pool(&name).canary(rng.random_range(0..3) as u32).build();
            spec.priority = rng.random_range(0..3);
            spec.rollout.paused = rng.random_bool(0.1);
            spec.selector = match rng.random_range(0..5) {
                0 => LabelSelector::default(),
                1 => LabelSelector {
                    match_labels: BTreeMap::new(),
                    match_expressions: vec![Requirement {
                        key: "pool".into(),
                        operator: Operator::In,
                        values: vec![name.clone(), format!("p{}", rng.random_range(0..count))],
                    }],
                },
                2 => LabelSelector {
                    match_labels: BTreeMap::from([(
                        "zone".into(),
                        format!("z{}", rng.random_range(0..3)),
                    )]),
                    match_expressions: vec![Requirement {
                        key: "pool".into(),
                        operator: Operator::NotIn,
                        values: vec![name.clone()],
                    }],
                },
                3 => LabelSelector {
                    match_labels: BTreeMap::new(),
                    match_expressions: vec![Requirement {
                        key: "gpu".into(),
                        operator: Operator::Exists,
                        values: Vec::new(),
                    }],
                },
                _ => spec.selector.clone(),
            };
            spec
        })
        .collect()
}

fn random_labels(rng: &mut ChaCha8Rng, n: &mut NodeInfo) {
    n.labels
        .insert("pool", format!("p{}", rng.random_range(0..7)));
    n.labels
        .insert("zone", format!("z{}", rng.random_range(0..3)));
    if rng.random_bool(0.2) {
        n.labels.insert("gpu", "true");
    } else {
        n.labels.remove("gpu");
    }
    if rng.random_bool(0.15) {
        n.labels.insert(crate::rollout::CANARY_LABEL, "true");
    } else {
        n.labels.remove(crate::rollout::CANARY_LABEL);
    }
}

/// What a new commit's pools would select, found in the fleet by the label index
/// ([`Fleet::selected_by`]), is what the whole-fleet assignment finds for the same pools,
/// whichever pools the fleet follows now.
#[test]
fn a_commits_pools_select_from_the_fleet_what_the_full_assignment_does() {
    for seed in 1..=40u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let now = Instant::now();
        let mut fleet = Fleet::new();
        let current = random_specs(&mut rng);
        let names: Vec<String> = (0..current.len())
            .map(|i| format!("kubelet-p{i}-0"))
            .collect();
        fleet.set_pools(NS, &targets(&current, &names));
        for i in 0..60 {
            let mut n = node(&format!("n{i:02}")).build();
            random_labels(&mut rng, &mut n);
            show(&mut fleet, &n, now);
        }
        let next = random_specs(&mut rng);
        let selected = fleet.selected_by(&next);
        let assignment = crate::model::assign(&next, &fleet.snapshot());
        assert_eq!(selected.len(), next.len());
        for (spec, nodes) in next.iter().zip(&selected) {
            let got: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
            let mut want: Vec<&str> = assignment
                .pools
                .get(&spec.name)
                .into_iter()
                .flatten()
                .map(String::as_str)
                .collect();
            want.sort_unstable();
            assert_eq!(got, want, "seed {seed}, pool {}", spec.name);
        }
    }
}

/// The fleet, fed events in random order with its own writes delayed and stale events
/// replayed, plans exactly what the whole-fleet planner plans over the same nodes, and
/// converges on the cluster's contents once the watch has caught up.
#[test]
fn incremental_planning_equals_planning_from_scratch() {
    for seed in 1..=40u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let t0 = Instant::now();
        let mut now = t0;
        let mut cluster: BTreeMap<String, NodeInfo> = BTreeMap::new();
        let mut queue: VecDeque<NodeInfo> = VecDeque::new();
        let mut fleet = Fleet::new();
        let mut specs = random_specs(&mut rng);
        let mut names: Vec<String> = (0..specs.len())
            .map(|i| format!("kubelet-p{i}-0"))
            .collect();
        let mut ns = NS.to_string();
        let mut version = 0;
        fleet.set_pools(&ns, &targets(&specs, &names));
        for i in 0..30 {
            let mut n = node(&format!("n{i:02}"))
                .created(&format!(
                    "2026-01-0{}T00:00:00Z",
                    1 + rng.random_range(0..3)
                ))
                .build();
            random_labels(&mut rng, &mut n);
            cluster.insert(n.name.clone(), n.clone());
            queue.push_back(n);
        }
        for step in 0..400 {
            now += Duration::from_millis(200);
            match rng.random_range(0..12) {
                // The watch delivers some events, in order.
                0..=3 => {
                    for _ in 0..rng.random_range(0..6) {
                        if let Some(n) = queue.pop_front()
                            && cluster.contains_key(&n.name)
                        {
                            show(&mut fleet, &n, now);
                        }
                    }
                }
                // An agent moves on.
                4 | 5 => {
                    let name = format!("n{:02}", rng.random_range(0..30));
                    if let Some(n) = cluster.get_mut(&name)
                        && agent_step(n)
                    {
                        if rng.random_bool(0.2) {
                            n.annotations.insert(STATE, State::RolledBack.as_str());
                        }
                        queue.push_back(n.clone());
                    }
                }
                // Labels change, or a heartbeat.
                6 => {
                    let name = format!("n{:02}", rng.random_range(0..30));
                    if let Some(n) = cluster.get_mut(&name) {
                        if rng.random_bool(0.5) {
                            random_labels(&mut rng, n);
                        }
                        queue.push_back(n.clone());
                    }
                }
                // A round: plan, compare, write some of the actions.
                7..=9 => {
                    fleet.expire_pending(now);
                    let plan = fleet.plan(jiff::Timestamp::UNIX_EPOCH, &Default::default());
                    let snapshot = fleet.snapshot();
                    assert_eq!(
                        plan,
                        plan_rollout(
                            &ns,
                            &targets(&specs, &names),
                            &snapshot,
                            jiff::Timestamp::UNIX_EPOCH,
                            &Default::default()
                        ),
                        "seed {seed} step {step}"
                    );
                    let mut referenced: Vec<&str> = fleet.referenced().collect();
                    referenced.sort_unstable();
                    let mut expected: Vec<&str> = references(&snapshot);
                    expected.sort_unstable();
                    expected.dedup();
                    assert_eq!(referenced, expected, "seed {seed} step {step}");
                    for action in plan.actions.iter().filter(|_| rng.random_bool(0.7)) {
                        let n = cluster.get_mut(&*action.node).expect("known node");
                        apply_patch(n, &action.patch());
                        fleet.node_patched(&action.node, &action.patch(), now);
                        queue.push_back(n.clone());
                    }
                }
                // A new commit: a new config for one pool, or new pools.
                10 => {
                    version += 1;
                    if rng.random_bool(0.7) {
                        let i = rng.random_range(0..specs.len());
                        names[i] = format!("kubelet-p{i}-{version}");
                        if rng.random_bool(0.3) {
                            specs[i].rollout.paused = !specs[i].rollout.paused;
                        }
                    } else {
                        specs = random_specs(&mut rng);
                        names = (0..specs.len())
                            .map(|i| format!("kubelet-p{i}-{version}"))
                            .collect();
                    }
                    if rng.random_bool(0.05) {
                        ns = if ns == NS { "other".into() } else { NS.into() };
                    }
                    fleet.set_pools(&ns, &targets(&specs, &names));
                }
                // Nodes come and go; sometimes the watch relists.
                _ => {
                    let name = format!("n{:02}", rng.random_range(0..30));
                    if cluster.remove(&name).is_some() {
                        fleet.remove(&name);
                    } else {
                        let mut n = node(&name).created("2026-02-01T00:00:00Z").build();
                        random_labels(&mut rng, &mut n);
                        cluster.insert(name, n.clone());
                        queue.push_back(n);
                    }
                    if rng.random_bool(0.2) {
                        queue.clear();
                        fleet.begin_relist();
                        for n in cluster.values() {
                            show(&mut fleet, n, now);
                        }
                        fleet.end_relist();
                    }
                }
            }
        }
        // The watch catches up: the fleet is the cluster.
        while let Some(n) = queue.pop_front() {
            if cluster.contains_key(&n.name) {
                show(&mut fleet, &n, now);
            }
        }
        let names_seen: BTreeSet<String> = fleet.snapshot().into_iter().map(|n| n.name).collect();
        assert_eq!(names_seen, cluster.keys().cloned().collect(), "seed {seed}");
        for n in fleet.snapshot() {
            assert_eq!(
                n.annotations, cluster[&n.name].annotations,
                "seed {seed} node {}",
                n.name
            );
            assert_eq!(
                n.labels, cluster[&n.name].labels,
                "seed {seed} node {}",
                n.name
            );
        }
        assert!(fleet.settled(), "seed {seed}: every write was shown");
    }
}

#[test]
fn a_pool_waiting_on_time_is_planned_again_when_its_time_comes_and_keeps_its_soak() {
    use crate::model::{IntOrPercent, Waves};
    use jiff::{SignedDuration, Timestamp};
    let at = |s: i64| {
        "2026-12-01T00:00:00Z"
            .parse::<Timestamp>()
            .unwrap()
            .checked_add(SignedDuration::from_secs(s))
            .unwrap()
    };
    let specs = [pool("gpu")
        .canary(0)
        .max_unavailable(IntOrPercent::Int(1))
        .waves(Waves {
            by: "zone".into(),
            soak: Duration::from_secs(600),
            jitter: Duration::ZERO,
        })
        .build()];
    let mut fleet = Fleet::new();
    let now = Instant::now();
    fleet.set_pools(NS, &targets(&specs, &["kubelet-gpu-2".into()]));
    let old = format!("{NS}/kubelet-gpu-1");
    let a = node("a")
        .labels(&[("pool", "gpu"), ("zone", "a")])
        .done_on("gpu", &old)
        .build();
    let b = node("b")
        .labels(&[("pool", "gpu"), ("zone", "b")])
        .done_on("gpu", &old)
        .build();
    show(&mut fleet, &a, now);
    show(&mut fleet, &b, now);
    let plan = fleet.plan(at(0), &Default::default());
    assert_eq!(plan.actions.len(), 1, "wave a: node a");
    let mut a = a;
    apply_patch(&mut a, &plan.actions[0].patch());
    while agent_step(&mut a) {}
    show(&mut fleet, &a, now);
    // Wave a Done at +60: wave b soaks until +660.
    let plan = fleet.plan(at(60), &Default::default());
    assert!(plan.actions.is_empty());
    assert_eq!(plan.pools[0].wake_at, Some(at(660)));
    // Another event of the pool during the soak does not start it over.
    let mut b2 = b.clone();
    b2.annotations.insert(STATE, State::Done.as_str());
    b2.annotations
        .insert("kubelet-gitops.io/message", "still fine");
    show(&mut fleet, &b2, now);
    assert!(fleet.plan(at(300), &Default::default()).actions.is_empty());
    assert_eq!(fleet.marked_pools(), 0);
    // Nothing changes but the time: the pool is planned again and b goes.
    let plan = fleet.plan(at(660), &Default::default());
    assert_eq!(
        plan.actions.iter().map(|a| &*a.node).collect::<Vec<_>>(),
        ["b"]
    );
}
