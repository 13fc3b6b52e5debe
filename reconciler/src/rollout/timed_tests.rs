//! Plans that depend on time: maintenance windows and zone waves (soak, jitter).

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use kubelet_gitops_core::disruption::Class;

use super::testing::{NS, agent_step, apply_plan, new_target as target, node, pool};
use super::window::{AppliesTo, Maintenance, Window, parse_days, parse_start, parse_zone};
use super::*;
use crate::model::{IntOrPercent, Waves};

const OLD: &str = "kubelet-gpu-old";
const NEW: &str = super::testing::NEW_TARGET;

fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn plus(t: Timestamp, secs: i64) -> Timestamp {
    t.checked_add(SignedDuration::from_secs(secs)).unwrap()
}

/// Tuesdays 02:00 UTC for 2h (2026-12-01 is a Tuesday).
fn tuesday_window(applies_to: AppliesTo) -> Maintenance {
    Maintenance {
        applies_to,
        windows: vec![Window {
            days: parse_days(&["Tue".to_string()]).unwrap(),
            start: parse_start("02:00").unwrap(),
            duration: Duration::from_secs(7200),
            zone_name: "UTC".into(),
            zone: parse_zone("UTC").unwrap(),
        }],
    }
}

fn gpu_nodes(zones: &[(&str, Option<&str>)]) -> Vec<NodeInfo> {
    zones
        .iter()
        .map(|(name, zone)| {
            let mut labels = vec![("pool", "gpu")];
            if let Some(z) = zone {
                labels.push(("zone", z));
            }
            node(name)
                .labels(&labels)
                .done_on("gpu", &format!("{NS}/{OLD}"))
                .build()
        })
        .collect()
}

fn assigned(p: &RolloutPlan) -> Vec<&str> {
    p.actions.iter().map(|a| &*a.node).collect()
}

#[test]
fn a_drain_change_waits_outside_the_window_and_starts_inside() {
    let spec = pool("gpu")
        .maintenance(tuesday_window(AppliesTo::Drain))
        .build();
    let nodes = gpu_nodes(&[("n1", None), ("n2", None)]);
    let pools = [target(&spec, Some(Class::Drain))];

    let monday = at("2026-11-30T12:00:00Z");
    let p = plan_rollout(NS, &pools, &nodes, monday, &Default::default());
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    let r = &p.pools[0];
    assert_eq!(
        r.hold,
        Some(Hold::Window {
            next: Some("Tue 02:00 UTC".into())
        })
    );
    assert_eq!(
        r.hold.as_ref().unwrap().to_string(),
        "waiting for the window Tue 02:00 UTC"
    );
    assert_eq!(r.wake_at, Some(at("2026-12-01T02:00:00Z")));
    assert_eq!(r.phase, PoolPhase::Progressing);

    let inside = at("2026-12-01T02:00:00Z");
    let p = plan_rollout(NS, &pools, &nodes, inside, &Default::default());
    assert_eq!(assigned(&p), ["n1"], "the canary starts");
    assert_eq!(p.pools[0].hold, None);
    assert_eq!(p.pools[0].wake_at, Some(at("2026-12-01T04:00:00Z")));
}

#[test]
fn only_drain_changes_wait_unless_the_windows_apply_to_all() {
    let monday = at("2026-11-30T12:00:00Z");
    let nodes = gpu_nodes(&[("n1", None)]);
    let drain_only = pool("gpu")
        .maintenance(tuesday_window(AppliesTo::Drain))
        .build();
    for class in [Class::Restart, Class::RestartClearState] {
        let p = plan_rollout(
            NS,
            &[target(&drain_only, Some(class))],
            &nodes,
            monday,
            &Default::default(),
        );
        assert_eq!(assigned(&p), ["n1"], "{class} flows at any time");
        assert_eq!(p.pools[0].hold, None);
    }
    // Unknown (the reconciler has just started): taken as drain.
    let p = plan_rollout(
        NS,
        &[target(&drain_only, None)],
        &nodes,
        monday,
        &Default::default(),
    );
    assert!(p.actions.is_empty());
    let all = pool("gpu")
        .maintenance(tuesday_window(AppliesTo::All))
        .build();
    let p = plan_rollout(
        NS,
        &[target(&all, Some(Class::Restart))],
        &nodes,
        monday,
        &Default::default(),
    );
    assert!(
        p.actions.is_empty(),
        "appliesTo: all holds a restart change"
    );
    assert!(p.pools[0].hold.is_some());
}

#[test]
fn a_window_closing_interrupts_no_node_and_a_complete_pool_waits_for_nothing() {
    let spec = pool("gpu")
        .max_unavailable(IntOrPercent::Int(2))
        .canary(0)
        .maintenance(tuesday_window(AppliesTo::All))
        // The window alone: the drain's own steps are drain_tests'.
        .drain(crate::model::DrainMode::Never)
        .build();
    let pools = [target(&spec, Some(Class::Drain))];
    let mut nodes = gpu_nodes(&[("n1", None), ("n2", None), ("n3", None)]);
    let p = plan_rollout(
        NS,
        &pools,
        &nodes,
        at("2026-12-01T03:59:00Z"),
        &Default::default(),
    );
    assert_eq!(assigned(&p), ["n1", "n2"]);
    apply_plan(&mut nodes, &p);
    // The window closes: n1 and n2 go on (no action touches them), n3 waits.
    let after = at("2026-12-01T04:00:00Z");
    let p = plan_rollout(NS, &pools, &nodes, after, &Default::default());
    assert!(p.actions.is_empty());
    assert_eq!(p.pools[0].in_progress, 2);
    assert!(p.pools[0].hold.is_some());
    for n in &mut nodes {
        while agent_step(n) {}
    }
    let p = plan_rollout(NS, &pools, &nodes, after, &Default::default());
    assert!(p.actions.is_empty());
    assert_eq!(p.pools[0].done, 2);
    // Everything Done: no hold shown.
    let done = gpu_nodes(&[("n1", None)])
        .into_iter()
        .map(|mut n| {
            let p = plan_rollout(
                NS,
                &pools,
                std::slice::from_ref(&n),
                at("2026-12-01T02:00:00Z"),
                &Default::default(),
            );
            apply_plan(std::slice::from_mut(&mut n), &p);
            while agent_step(&mut n) {}
            n
        })
        .collect::<Vec<_>>();
    let p = plan_rollout(NS, &pools, &done, after, &Default::default());
    assert_eq!(p.pools[0].phase, PoolPhase::Complete);
    assert_eq!(p.pools[0].hold, None);
    assert_eq!(p.pools[0].wake_at, None);
}

#[test]
fn a_window_list_that_never_opens_holds_forever_and_says_so() {
    let spec = pool("gpu")
        .maintenance(Maintenance {
            applies_to: AppliesTo::All,
            windows: Vec::new(),
        })
        .build();
    let nodes = gpu_nodes(&[("n1", None)]);
    let p = plan_rollout(
        NS,
        &[target(&spec, None)],
        &nodes,
        at("2026-11-30T12:00:00Z"),
        &Default::default(),
    );
    assert!(p.actions.is_empty());
    assert_eq!(p.pools[0].hold, Some(Hold::Window { next: None }));
    assert_eq!(p.pools[0].wake_at, None);
    assert_eq!(
        p.pools[0].hold.as_ref().unwrap().to_string(),
        "waiting for a window: none ever opens"
    );
}

/// Runs a pool with waves to completion: each round plans at `now`, remembers the wave
/// opening as the fleet does, applies, lets every agent finish, and moves time on by
/// `step`. Returns the rounds' assignments with their time.
fn run_waves(
    spec: &PoolSpec,
    nodes: &mut [NodeInfo],
    start: Timestamp,
    step: i64,
) -> Vec<(Timestamp, Vec<String>, Option<Hold>)> {
    let mut now = start;
    let mut opened = None;
    let mut out = Vec::new();
    for _ in 0..500 {
        let pools = [PoolTarget {
            wave_opened: opened.clone(),
            ..target(spec, Some(Class::Restart))
        }];
        let p = plan_rollout(NS, &pools, nodes, now, &Default::default());
        let r = &p.pools[0];
        opened = r.wave_opened.clone();
        if r.phase == PoolPhase::Complete {
            return out;
        }
        out.push((
            now,
            p.actions.iter().map(|a| a.node.to_string()).collect(),
            r.hold.clone(),
        ));
        apply_plan(nodes, &p);
        for n in nodes.iter_mut() {
            while agent_step(n) {}
        }
        now = plus(now, step);
    }
    panic!("did not complete");
}

#[test]
fn waves_roll_one_zone_at_a_time_after_the_canary_with_a_soak_between() {
    let spec = pool("gpu")
        .max_unavailable(IntOrPercent::Int(1))
        .waves(Waves {
            by: "zone".into(),
            soak: Duration::from_secs(600),
            jitter: Duration::ZERO,
        })
        .build();
    // The canary (first by name) is in zone b; zone a comes first among the waves;
    // n5 has no zone: the last wave.
    let mut nodes = gpu_nodes(&[
        ("n1", Some("b")),
        ("n2", Some("a")),
        ("n3", Some("a")),
        ("n4", Some("b")),
        ("n5", None),
    ]);
    let start = at("2026-12-01T00:00:00Z");
    let rounds = run_waves(&spec, &mut nodes, start, 60);
    let order: Vec<&str> = rounds
        .iter()
        .flat_map(|(_, a, _)| a.iter().map(String::as_str))
        .collect();
    assert_eq!(order, ["n1", "n2", "n3", "n4", "n5"]);
    let when = |node: &str| {
        rounds
            .iter()
            .find(|(_, a, _)| a.iter().any(|n| n == node))
            .map(|(t, _, _)| *t)
            .unwrap()
    };
    // Canary at 0; wave a opens once it is Done (round 1) and starts at once (no soak
    // before the first wave); n3 after n2 (maxUnavailable 1 within the wave).
    assert_eq!(when("n1"), start);
    assert_eq!(when("n2"), plus(start, 60));
    assert_eq!(when("n3"), plus(start, 120));
    // Wave a is all Done at +180: wave b (n4; n1 already Done) waits 10 minutes.
    assert_eq!(when("n4"), plus(start, 180 + 600));
    assert!(rounds.iter().any(|(_, _, h)| matches!(
        h,
        Some(Hold::Soak { after, .. }) if after == "a"
    )));
    // Then the unlabelled wave, after another soak.
    assert_eq!(when("n5"), plus(start, 180 + 600 + 60 + 600));
}

#[test]
fn max_unavailable_is_a_share_of_the_wave_and_the_report_names_it() {
    let spec = pool("gpu")
        .canary(0)
        .max_unavailable(IntOrPercent::Percent(50))
        .waves(Waves {
            by: "zone".into(),
            ..Waves::default()
        })
        .build();
    let nodes = gpu_nodes(&[
        ("a1", Some("a")),
        ("a2", Some("a")),
        ("a3", Some("a")),
        ("a4", Some("a")),
        ("b1", Some("b")),
    ]);
    let p = plan_rollout(
        NS,
        &[target(&spec, None)],
        &nodes,
        at("2026-12-01T00:00:00Z"),
        &Default::default(),
    );
    assert_eq!(assigned(&p), ["a1", "a2"], "50% of wave a's 4 nodes");
    let r = &p.pools[0];
    assert_eq!(r.max_unavailable, 2);
    let w = r.wave.as_ref().unwrap();
    assert_eq!((w.number, w.count, w.nodes), (1, 2, 4));
    assert_eq!(w.to_string(), "wave 1/2 zone=a");
}

#[test]
fn all_nodes_unlabelled_make_one_wave_and_an_empty_pool_has_none() {
    let spec = pool("gpu")
        .canary(0)
        .max_unavailable(IntOrPercent::Int(5))
        .waves(Waves::default())
        .build();
    let nodes = gpu_nodes(&[("n1", None), ("n2", None)]);
    let p = plan_rollout(
        NS,
        &[target(&spec, None)],
        &nodes,
        at("2026-12-01T00:00:00Z"),
        &Default::default(),
    );
    assert_eq!(assigned(&p), ["n1", "n2"]);
    assert_eq!(
        p.pools[0].wave.as_ref().unwrap().to_string(),
        "wave 1/1 topology.kubernetes.io/zone=(unlabelled)"
    );
    let p = plan_rollout(
        NS,
        &[target(&spec, None)],
        &[],
        at("2026-12-01T00:00:00Z"),
        &Default::default(),
    );
    assert_eq!(p.pools[0].phase, PoolPhase::Empty);
    assert!(p.pools[0].wave.is_none());
}

#[test]
fn jitter_spreads_a_wave_deterministically() {
    let jitter = Duration::from_secs(30);
    let spec = pool("gpu")
        .canary(0)
        .max_unavailable(IntOrPercent::Int(10))
        .waves(Waves {
            by: "zone".into(),
            soak: Duration::ZERO,
            jitter,
        })
        .build();
    let names: Vec<String> = (0..6).map(|i| format!("n{i}")).collect();
    let zones: Vec<(&str, Option<&str>)> = names.iter().map(|n| (n.as_str(), Some("a"))).collect();
    let nodes = gpu_nodes(&zones);
    let t0 = at("2026-12-01T00:00:00Z");
    // First round: the wave opens now; only nodes whose offset is zero could go.
    let p = plan_rollout(NS, &[target(&spec, None)], &nodes, t0, &Default::default());
    let opened = p.pools[0].wave_opened.clone().unwrap();
    assert_eq!(opened.at, t0);
    let offsets: Vec<(Duration, &str)> = names
        .iter()
        .map(|n| (wave::jitter_offset(n, jitter), n.as_str()))
        .collect();
    let first = offsets.iter().map(|(o, _)| *o).min().unwrap();
    assert!(
        p.actions.is_empty() || first.is_zero(),
        "nobody before their offset"
    );
    assert_eq!(
        p.pools[0].wake_at,
        Some(
            plus(t0, 0)
                .checked_add(SignedDuration::try_from(first).unwrap())
                .unwrap()
        )
    );
    // Each second, exactly the nodes whose offset has passed are assigned.
    for s in 1..=30 {
        let now = plus(t0, s);
        let pools = [PoolTarget {
            wave_opened: Some(opened.clone()),
            ..target(&spec, None)
        }];
        let p = plan_rollout(NS, &pools, &nodes, now, &Default::default());
        let mut expected: Vec<&str> = offsets
            .iter()
            .filter(|(o, _)| *o <= Duration::from_secs(s as u64))
            .map(|(_, n)| *n)
            .collect();
        expected.sort();
        assert_eq!(assigned(&p), expected, "at +{s}s");
    }
    let distinct: std::collections::BTreeSet<u64> =
        offsets.iter().map(|(o, _)| o.as_secs()).collect();
    assert!(
        distinct.len() > 1,
        "not all in the same second: {offsets:?}"
    );
}

#[test]
fn a_canary_in_a_later_zone_counts_as_done_in_its_wave_and_a_window_gates_waves_too() {
    let spec = pool("gpu")
        .max_unavailable(IntOrPercent::Int(1))
        .maintenance(tuesday_window(AppliesTo::All))
        .waves(Waves {
            by: "zone".into(),
            ..Waves::default()
        })
        .build();
    let mut nodes = gpu_nodes(&[("c1", Some("z")), ("n2", Some("a"))]);
    nodes[0] = node("c1")
        .labels(&[("pool", "gpu"), ("zone", "z")])
        .done_on("gpu", &format!("{NS}/{NEW}"))
        .build();
    let inside = at("2026-12-01T02:30:00Z");
    let p = plan_rollout(
        NS,
        &[target(&spec, None)],
        &nodes,
        inside,
        &Default::default(),
    );
    assert_eq!(assigned(&p), ["n2"]);
    assert_eq!(p.pools[0].wave.as_ref().unwrap().value, "a");
    apply_plan(&mut nodes, &p);
    for n in &mut nodes {
        while agent_step(n) {}
    }
    // Wave z has only the canary, Done: the pool is complete.
    let p = plan_rollout(
        NS,
        &[target(&spec, None)],
        &nodes,
        inside,
        &Default::default(),
    );
    assert_eq!(p.pools[0].phase, PoolPhase::Complete);
    // Outside the window the wave waits like everything else.
    let nodes = gpu_nodes(&[("c1", Some("z")), ("n2", Some("a"))]);
    let p = plan_rollout(
        NS,
        &[target(&spec, None)],
        &nodes,
        at("2026-12-01T05:00:00Z"),
        &Default::default(),
    );
    assert!(p.actions.is_empty());
    assert_eq!(
        p.pools[0].hold,
        Some(Hold::Window {
            next: Some("Tue 02:00 UTC".into())
        })
    );
}
