//! The drain's steps as the planner takes them (`drain`'s module docs): cordon, evict
//! until empty, assign, uncordon after the outcome; the timeout; a person's cordon; the
//! modes; a drain that is no one's any more.

use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use kubelet_gitops_core::disruption::Class;
use kubelet_gitops_core::protocol::{CORDONED, DRAIN, DRAIN_BLOCKED, DRAIN_SINCE, State};

use super::drain::{Drain, DrainMode, DrainSeen, DrainWork};
use super::testing::{NS, agent_step, apply_plan, cm, new_target as target, node, pool};
use super::*;
use crate::model::IntOrPercent;

const OLD: &str = "kubelet-gpu-old";
const NEW: &str = super::testing::NEW_TARGET;
const T0: &str = "2026-12-01T02:00:00Z";

fn at(secs: i64) -> Timestamp {
    T0.parse::<Timestamp>()
        .unwrap()
        .checked_add(SignedDuration::from_secs(secs))
        .unwrap()
}

fn nodes(names: &[&str]) -> Vec<NodeInfo> {
    names
        .iter()
        .map(|n| {
            node(n)
                .labels(&[("pool", "gpu")])
                .done_on("gpu", &format!("{NS}/{OLD}"))
                .build()
        })
        .collect()
}

fn seen(pairs: &[(&str, usize)]) -> DrainObservations {
    pairs
        .iter()
        .map(|(n, left)| {
            (
                Arc::from(*n),
                DrainSeen {
                    unschedulable: true,
                    pods_left: *left,
                    blocker: (*left > 0).then(|| "pod shop/web-1 is terminating".into()),
                },
            )
        })
        .collect()
}

fn changes(p: &RolloutPlan) -> Vec<(String, &'static str)> {
    p.actions
        .iter()
        .map(|a| {
            let kind = match &a.change {
                NodeChange::Assign { .. } => "assign",
                NodeChange::Unassign => "unassign",
                NodeChange::Cordon { .. } => "cordon",
                NodeChange::Release { uncordon: true } => "uncordon",
                NodeChange::Release { uncordon: false } => "release",
                NodeChange::GiveUp { .. } => "give-up",
            };
            (a.node.to_string(), kind)
        })
        .collect()
}

fn pairs(v: &[(&str, &'static str)]) -> Vec<(String, &'static str)> {
    v.iter().map(|(n, k)| (n.to_string(), *k)).collect()
}

#[test]
fn a_node_is_cordoned_emptied_assigned_and_uncordoned_in_that_order() {
    let spec = pool("gpu").build();
    let pools = [target(&spec, Some(Class::Drain))];
    let mut ns = nodes(&["n1", "n2"]);
    let none = DrainObservations::new();

    // Round 1: the canary is cordoned, not assigned; the write records the drain.
    let p = plan_rollout(NS, &pools, &ns, at(0), &none);
    assert_eq!(changes(&p), pairs(&[("n1", "cordon")]));
    let patch = p.actions[0].patch();
    assert_eq!(patch["spec"]["unschedulable"], true, "{patch}");
    let a = &patch["metadata"]["annotations"];
    assert_eq!(a[DRAIN], format!("{NS}/{NEW}"));
    assert_eq!(a[DRAIN_SINCE], T0);
    assert_eq!(a[CORDONED], "true");
    apply_plan(&mut ns, &p);

    // Round 2: draining: busy, counted in progress, and the controller evicts.
    let p = plan_rollout(NS, &pools, &ns, at(1), &none);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    let r = &p.pools[0];
    assert_eq!((r.in_progress, r.busy, r.waiting), (1, 1, 1));
    assert_eq!(
        r.drains,
        [DrainTask {
            node: "n1".into(),
            work: DrainWork::Evict
        }]
    );
    assert_eq!(r.wake_at, Some(at(6)), "looked at again after DRAIN_RETRY");
    assert_eq!(
        node_status(&ns[0], &cm(NEW)),
        NodeRolloutStatus::Draining,
        "the status command sees it too"
    );

    // Pods left: still evicting, and the report says why.
    let p = plan_rollout(NS, &pools, &ns, at(6), &seen(&[("n1", 2)]));
    assert!(p.actions.is_empty());
    assert_eq!(
        p.pools[0].draining,
        ["n1: 2 pod(s) left; pod shop/web-1 is terminating"]
    );

    // Empty: assigned; the drain annotations stay until the outcome.
    let p = plan_rollout(NS, &pools, &ns, at(11), &seen(&[("n1", 0)]));
    assert_eq!(changes(&p), pairs(&[("n1", "assign")]));
    apply_plan(&mut ns, &p);
    assert_eq!(ns[0].annotations.get(CORDONED), Some("true"));
    assert_eq!(node_status(&ns[0], &cm(NEW)), NodeRolloutStatus::InProgress);
    let p = plan_rollout(NS, &pools, &ns, at(12), &none);
    assert!(p.actions.is_empty(), "in progress: left alone");

    // Done: uncordoned, in one write that clears the drain; then n2's turn.
    while agent_step(&mut ns[0]) {}
    let p = plan_rollout(NS, &pools, &ns, at(20), &none);
    assert_eq!(
        changes(&p),
        pairs(&[("n1", "uncordon"), ("n2", "cordon")]),
        "the canary Done opens the rest"
    );
    let patch = p.actions[0].patch();
    assert_eq!(patch["spec"]["unschedulable"], serde_json::Value::Null);
    for key in [DRAIN, DRAIN_SINCE, CORDONED, DRAIN_BLOCKED] {
        assert_eq!(
            patch["metadata"]["annotations"][key],
            serde_json::Value::Null
        );
    }
    apply_plan(&mut ns, &p);
    assert!(ns[0].annotations.get(DRAIN).is_none());
}

#[test]
fn draining_nodes_count_against_max_unavailable() {
    let spec = pool("gpu")
        .canary(0)
        .max_unavailable(IntOrPercent::Int(2))
        .build();
    let pools = [target(&spec, Some(Class::Drain))];
    let mut ns = nodes(&["n1", "n2", "n3"]);
    let p = plan_rollout(NS, &pools, &ns, at(0), &DrainObservations::new());
    assert_eq!(changes(&p), pairs(&[("n1", "cordon"), ("n2", "cordon")]));
    apply_plan(&mut ns, &p);
    let p = plan_rollout(NS, &pools, &ns, at(1), &seen(&[("n1", 0), ("n2", 3)]));
    assert_eq!(changes(&p), pairs(&[("n1", "assign")]), "n3 waits");
}

#[test]
fn a_drain_past_its_timeout_gives_up_uncordons_and_halts_the_pool() {
    let spec = pool("gpu").build();
    let pools = [target(&spec, Some(Class::Drain))];
    let mut ns = nodes(&["n1", "n2"]);
    let p = plan_rollout(NS, &pools, &ns, at(0), &DrainObservations::new());
    apply_plan(&mut ns, &p);
    let blocked: DrainObservations = [(
        Arc::from("n1"),
        DrainSeen {
            unschedulable: true,
            pods_left: 1,
            blocker: Some(
                "eviction of pod shop/web-1 refused (PodDisruptionBudget): The disruption \
                 budget web needs 2 healthy pods and has 2 currently"
                    .into(),
            ),
        },
    )]
    .into();
    let timeout = Drain::default().timeout.as_secs() as i64;
    let p = plan_rollout(NS, &pools, &ns, at(timeout - 1), &blocked);
    assert!(p.actions.is_empty(), "still inside drainTimeout");
    assert_eq!(
        p.pools[0].wake_at,
        Some(at(timeout)),
        "woken at the deadline"
    );

    let p = plan_rollout(NS, &pools, &ns, at(timeout), &blocked);
    assert_eq!(changes(&p), pairs(&[("n1", "give-up")]));
    let patch = p.actions[0].patch();
    assert_eq!(patch["spec"]["unschedulable"], serde_json::Value::Null);
    let message = patch["metadata"]["annotations"][DRAIN_BLOCKED]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        message,
        "drain gave up after drainTimeout 30m: 1 pod(s) left; eviction of pod shop/web-1 \
         refused (PodDisruptionBudget): The disruption budget web needs 2 healthy pods and \
         has 2 currently"
    );
    apply_plan(&mut ns, &p);

    let p = plan_rollout(NS, &pools, &ns, at(timeout + 1), &DrainObservations::new());
    let r = &p.pools[0];
    assert_eq!(r.phase, PoolPhase::Halted);
    assert_eq!(r.failed.len(), 1);
    assert_eq!(r.failed[0].state, Failure::DrainTimeout);
    assert_eq!(r.failed[0].message.as_deref(), Some(message.as_str()));
    assert!(p.actions.is_empty(), "halted: n2 is not drained");

    // A new commit: the old drain record is cleared, the node is Waiting again.
    let pools = [PoolTarget {
        target: cm("kubelet-gpu-newer"),
        ..target(&spec, Some(Class::Drain))
    }];
    let p = plan_rollout(NS, &pools, &ns, at(timeout + 2), &DrainObservations::new());
    assert_eq!(
        changes(&p),
        pairs(&[("n1", "release"), ("n1", "cordon")]),
        "released (ours no longer: the give-up lifted it) then drained for the new target"
    );
}

#[test]
fn drain_force_deletes_after_the_timeout_instead_of_halting() {
    let mut spec = pool("gpu").build();
    spec.rollout.drain.force = true;
    spec.rollout.drain.timeout = Duration::from_secs(60);
    let pools = [target(&spec, Some(Class::Drain))];
    let mut ns = nodes(&["n1"]);
    let p = plan_rollout(NS, &pools, &ns, at(0), &DrainObservations::new());
    apply_plan(&mut ns, &p);
    let p = plan_rollout(NS, &pools, &ns, at(60), &seen(&[("n1", 1)]));
    assert!(p.actions.is_empty());
    assert_eq!(p.pools[0].drains[0].work, DrainWork::Force);
    assert_ne!(p.pools[0].phase, PoolPhase::Halted);
}

#[test]
fn a_node_a_person_cordoned_is_never_uncordoned() {
    let spec = pool("gpu").build();
    let pools = [target(&spec, Some(Class::Drain))];
    // The controller's cordon found the node unschedulable: no `cordoned` claim.
    let mut ns = vec![
        node("n1")
            .labels(&[("pool", "gpu")])
            .done_on("gpu", &format!("{NS}/{OLD}"))
            .annotation(DRAIN, &format!("{NS}/{NEW}"))
            .annotation(DRAIN_SINCE, T0)
            .build(),
    ];
    let p = plan_rollout(NS, &pools, &ns, at(1), &seen(&[("n1", 0)]));
    apply_plan(&mut ns, &p);
    while agent_step(&mut ns[0]) {}
    let p = plan_rollout(NS, &pools, &ns, at(2), &DrainObservations::new());
    assert_eq!(changes(&p), pairs(&[("n1", "release")]));
    assert!(
        p.actions[0].patch().get("spec").is_none(),
        "spec.unschedulable is left as the person set it"
    );
}

#[test]
fn an_agent_failure_uncordons_and_halts() {
    let spec = pool("gpu").build();
    let pools = [target(&spec, Some(Class::Drain))];
    let mut ns = nodes(&["n1", "n2"]);
    let p = plan_rollout(NS, &pools, &ns, at(0), &DrainObservations::new());
    apply_plan(&mut ns, &p);
    let p = plan_rollout(NS, &pools, &ns, at(1), &seen(&[("n1", 0)]));
    apply_plan(&mut ns, &p);
    let a = &mut ns[0].annotations;
    a.insert(
        kubelet_gitops_core::protocol::OBSERVED_CONFIG,
        format!("{NS}/{NEW}").as_str(),
    );
    a.insert(
        kubelet_gitops_core::protocol::STATE,
        State::RolledBack.as_str(),
    );
    let p = plan_rollout(NS, &pools, &ns, at(2), &DrainObservations::new());
    assert_eq!(p.pools[0].phase, PoolPhase::Halted);
    assert_eq!(
        changes(&p),
        pairs(&[("n1", "uncordon")]),
        "back on last-known-good: in service again; n2 is not drained"
    );
}

#[test]
fn pausing_releases_a_drain_not_yet_assigned() {
    let spec = pool("gpu").build();
    let pools = [target(&spec, Some(Class::Drain))];
    let mut ns = nodes(&["n1"]);
    let p = plan_rollout(NS, &pools, &ns, at(0), &DrainObservations::new());
    apply_plan(&mut ns, &p);
    let paused = pool("gpu").paused().build();
    let pools = [target(&paused, Some(Class::Drain))];
    let p = plan_rollout(NS, &pools, &ns, at(1), &seen(&[("n1", 2)]));
    assert_eq!(changes(&p), pairs(&[("n1", "uncordon")]));
    assert_eq!(p.pools[0].phase, PoolPhase::Paused);
}

#[test]
fn a_node_leaving_its_pool_mid_drain_is_uncordoned() {
    let spec = pool("gpu").build();
    let pools = [target(&spec, Some(Class::Drain))];
    let mut ns = nodes(&["n1"]);
    let p = plan_rollout(NS, &pools, &ns, at(0), &DrainObservations::new());
    apply_plan(&mut ns, &p);
    ns[0].labels = crate::model::StrMap::default();
    let p = plan_rollout(NS, &pools, &ns, at(1), &DrainObservations::new());
    assert_eq!(
        changes(&p),
        pairs(&[("n1", "unassign"), ("n1", "uncordon")]),
        "{:?}",
        p.actions
    );
}

#[test]
fn only_a_known_drain_class_drains_and_never_assigns_at_once() {
    let ns = nodes(&["n1"]);
    for (class, mode, expect) in [
        (Some(Class::Drain), DrainMode::Auto, "cordon"),
        (Some(Class::Drain), DrainMode::Never, "assign"),
        (Some(Class::Restart), DrainMode::Auto, "assign"),
        (Some(Class::RestartClearState), DrainMode::Auto, "assign"),
        (None, DrainMode::Auto, "assign"),
    ] {
        let spec = pool("gpu").drain(mode).build();
        let p = plan_rollout(
            NS,
            &[target(&spec, class)],
            &ns,
            at(0),
            &DrainObservations::new(),
        );
        assert_eq!(changes(&p), pairs(&[("n1", expect)]), "{class:?} {mode:?}");
    }
}

#[test]
fn manual_waits_for_a_person_to_cordon_and_empty_the_node() {
    let spec = pool("gpu").drain(DrainMode::Manual).build();
    let pools = [target(&spec, Some(Class::Drain))];
    let ns = nodes(&["n1", "n2"]);
    let p = plan_rollout(NS, &pools, &ns, at(0), &DrainObservations::new());
    assert!(p.actions.is_empty(), "never cordons by itself");
    let r = &p.pools[0];
    assert_eq!(
        r.drains,
        [DrainTask {
            node: "n1".into(),
            work: DrainWork::Check
        }]
    );
    assert_eq!(
        r.hold.as_ref().map(ToString::to_string).as_deref(),
        Some(
            "waiting for a person to drain n1 (drain: manual; `kubectl drain n1 \
             --ignore-daemonsets --delete-emptydir-data`)"
        )
    );
    assert_eq!(r.wake_at, Some(at(5)));
    // Cordoned but pods left: still waiting.
    let p = plan_rollout(NS, &pools, &ns, at(5), &seen(&[("n1", 1)]));
    assert!(p.actions.is_empty());
    // Not cordoned, no pods: still waiting (the person has not cordoned it).
    let open: DrainObservations = [(Arc::from("n1"), DrainSeen::default())].into();
    let p = plan_rollout(NS, &pools, &ns, at(5), &open);
    assert!(p.actions.is_empty());
    // Cordoned and empty: assigned, with no drain record (the cordon is the person's).
    let p = plan_rollout(NS, &pools, &ns, at(10), &seen(&[("n1", 0)]));
    assert_eq!(changes(&p), pairs(&[("n1", "assign")]));
    assert!(p.actions[0].patch().get("spec").is_none());
}
