//! Maintenance windows and zone waves, `kubelet-gitops run` against the simulated
//! cluster with the agent double, the reconciler's clock set by the test
//! ([`ManualClock`]): a rollout held outside its window starts when the clock enters it;
//! a drain-class change waits where a restart-class one flows; a pool rolls zone by zone
//! with a soak between the waves.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use kubelet_gitops_core::inventory::Inventory;
use kubelet_gitops_core::protocol::DESIRED_CONFIG;
use reconciler::clock::ManualClock;
use reconciler::controller::SyncState;
use reconciler::rollout::{Hold, PoolPhase};

use crate::support::*;

/// Tuesdays 02:00 UTC for two hours.
const WINDOW: &str = "windows: [{days: [Tue], start: \"02:00\", duration: 2h}]";

fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn hold_of(s: &SyncState, pool: &str) -> Option<String> {
    s.pools
        .iter()
        .find(|p| p.pool == pool)
        .and_then(|p| p.hold.as_ref())
        .map(ToString::to_string)
}

fn assigned(nodes: &[serde_json::Value]) -> usize {
    nodes
        .iter()
        .filter(|n| ann(n, DESIRED_CONFIG).is_some())
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_waits_for_its_window_and_only_drain_changes_wait() {
    let h = Harness::with_agent(Inventory::generate(4, &["w"]), AgentOptions::default()).await;
    h.repo.settings_and_pools(&[(
        "w",
        &format!("maxUnavailable: 2, maintenance: {{appliesTo: all, {WINDOW}}}"),
        "    maxPods: 70\n",
    )]);
    h.repo.commit("windowed pool");
    // Monday noon.
    let clock = Arc::new(ManualClock::new(at("2026-11-30T12:00:00Z")));
    let mut config = h.run_config("r1");
    config.clock = clock.clone();
    let r = h.reconciler(config).await;
    let mut sync = r.sync_state();

    let s = wait_state(&mut sync, "held for the window", LONG, |s| {
        hold_of(s, "w").is_some()
    })
    .await;
    assert_eq!(
        hold_of(&s, "w").as_deref(),
        Some("waiting for the window Tue 02:00 UTC")
    );
    let (code, body) = http_get(r.admin_addr().unwrap(), "/readyz").await;
    assert_eq!(code, 200, "{body}");
    assert!(
        body.contains("\"waiting_for\":\"waiting for the window Tue 02:00 UTC\""),
        "{body}"
    );
    // Polls come and go (every 300 ms): nothing is assigned while the clock stays.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(assigned(&h.nodes()), 0, "{}", summary(&h.nodes()));

    // The clock enters the window: the rollout starts and completes.
    clock.set(at("2026-12-01T02:00:00Z"));
    wait_state(&mut sync, "complete in the window", LONG, |s| {
        all_complete(s, 1)
    })
    .await;
    assert!(
        h.nodes().iter().all(settled_done),
        "{}",
        summary(&h.nodes())
    );

    // Outside the window again, with windows for drain-class changes only: a restart
    // change (maxPods) flows at once.
    clock.set(at("2026-12-01T05:00:00Z"));
    h.repo.pool(
        "w",
        &format!("maxUnavailable: 2, maintenance: {{appliesTo: drain, {WINDOW}}}"),
        "    maxPods: 60\n",
    );
    let restart = h.repo.commit("restart-class change");
    wait_state(&mut sync, "the restart change rolled out", LONG, |s| {
        s.applied.as_ref().is_some_and(|a| a.commit == restart) && all_complete(s, 1)
    })
    .await;

    // A drain-class change (maxPods made drain by the pool's classes) waits.
    h.repo.pool(
        "w",
        &format!("maxUnavailable: 2, maintenance: {{appliesTo: drain, {WINDOW}}}"),
        "    maxPods: 50\n  disruption:\n    classes: {maxPods: drain}\n",
    );
    let drain = h.repo.commit("drain-class change");
    let s = wait_state(&mut sync, "the drain change held", LONG, |s| {
        s.applied.as_ref().is_some_and(|a| a.commit == drain) && hold_of(s, "w").is_some()
    })
    .await;
    assert_eq!(
        hold_of(&s, "w").as_deref(),
        Some("waiting for the window Tue 02:00 UTC")
    );
    let pool = s.pools.iter().find(|p| p.pool == "w").unwrap();
    assert_eq!((pool.done, pool.waiting), (0, 4), "{pool:?}");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let target = s.applied.as_ref().unwrap().configmaps["w"].clone();
    assert!(
        h.nodes()
            .iter()
            .all(|n| desired_name(n).as_deref() != Some(target.as_str())),
        "{}",
        summary(&h.nodes())
    );
    // Next Tuesday's window.
    clock.set(at("2026-12-08T02:30:00Z"));
    wait_state(
        &mut sync,
        "the drain change rolled out in the window",
        LONG,
        |s| all_complete(s, 1),
    )
    .await;
    assert!(
        h.nodes()
            .iter()
            .all(|n| desired_name(n).as_deref() == Some(target.as_str())),
        "{}",
        summary(&h.nodes())
    );
    h.finish(r).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_rolls_zone_by_zone_with_a_soak_between_waves() {
    // 9 nodes, zones a, b, c in turn (w-0 zone-a, w-1 zone-b, ...).
    let h = Harness::with_agent(Inventory::generate(9, &["w"]), AgentOptions::default()).await;
    h.repo.settings_and_pools(&[(
        "w",
        "maxUnavailable: 2, canary: 1, waves: {soak: 10m, jitter: 2s}",
        "    maxPods: 70\n",
    )]);
    h.repo.commit("waves");
    let t0 = at("2026-12-01T00:00:00Z");
    let clock = Arc::new(ManualClock::new(t0));
    let mut config = h.run_config("r1");
    config.clock = clock.clone();
    let r = h.reconciler(config).await;
    let mut sync = r.sync_state();
    let zone_of: BTreeMap<String, String> = h
        .nodes()
        .iter()
        .map(|n| {
            (
                name(n).to_string(),
                n["metadata"]["labels"]["topology.kubernetes.io/zone"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect();
    let done_in = |nodes: &[serde_json::Value], zone: &str| {
        nodes
            .iter()
            .filter(|n| zone_of[name(n)] == zone && settled_done(n))
            .count()
    };

    // The canary (w-0, zone-a), then zone-a, its nodes spread over the jitter (2 s):
    // the clock ticks a second at a time until zone-a is done and the soak begins.
    let soaking_after = |zone: &'static str| {
        move |s: &SyncState| {
            matches!(
                s.pools.first().and_then(|p| p.hold.as_ref()),
                Some(Hold::Soak { after, .. }) if after == zone
            )
        }
    };
    let ticking = async {
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            clock.advance(Duration::from_secs(1));
        }
    };
    let s = tokio::select! {
        s = wait_state(&mut sync, "zone-a done, soaking", LONG, soaking_after("zone-a")) => s,
        () = ticking => unreachable!(),
    };
    let nodes = h.nodes();
    assert_eq!(done_in(&nodes, "zone-a"), 3, "{}", summary(&nodes));
    assert_eq!(assigned(&nodes), 3, "only zone-a: {}", summary(&nodes));
    let pool = &s.pools[0];
    assert_eq!(
        pool.wave.as_ref().unwrap().to_string(),
        "wave 2/3 topology.kubernetes.io/zone=zone-b"
    );
    let Some(Hold::Soak { until, .. }) = pool.hold.clone() else {
        unreachable!()
    };
    let (code, body) = http_get(r.admin_addr().unwrap(), "/readyz").await;
    assert_eq!(code, 200);
    assert!(body.contains("soaking after wave zone-a until"), "{body}");

    // The soak: nothing moves until the clock passes it.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(assigned(&h.nodes()), 3);
    let past = |t: Timestamp| t.checked_add(jiff::SignedDuration::from_secs(3)).unwrap();
    clock.set(past(until));
    let s = wait_state(
        &mut sync,
        "zone-b done, soaking",
        LONG,
        soaking_after("zone-b"),
    )
    .await;
    let nodes = h.nodes();
    assert_eq!(done_in(&nodes, "zone-b"), 3, "{}", summary(&nodes));
    assert_eq!(assigned(&nodes), 6, "zone-c untouched: {}", summary(&nodes));
    // Zone-b finished while the clock stood at `past(until)`: the soak counts from there.
    let until_a = until;
    let Some(Hold::Soak { until, .. }) = s.pools[0].hold.clone() else {
        unreachable!()
    };
    assert_eq!(
        until,
        past(until_a)
            .checked_add(jiff::SignedDuration::from_secs(600))
            .unwrap()
    );

    clock.set(past(until));
    wait_state(&mut sync, "every wave done", LONG, |s| all_complete(s, 1)).await;

    // The order, from the sim's request log: zone by zone, at most 2 in flight.
    let entries = h.sim.request_log().entries();
    let Replay {
        max_in_flight,
        order,
    } = replay(&entries, &|n| {
        zone_of.contains_key(n).then(|| "w".to_string())
    });
    assert!(max_in_flight["w"] <= 2, "{max_in_flight:?}");
    let zones: Vec<&str> = order["w"]
        .iter()
        .filter(|(_, assigned)| *assigned)
        .map(|(n, _)| zone_of[n].as_str())
        .collect();
    assert_eq!(
        zones,
        [
            "zone-a", "zone-a", "zone-a", "zone-b", "zone-b", "zone-b", "zone-c", "zone-c",
            "zone-c"
        ]
    );
    assert_eq!(sync.borrow().pools[0].phase, PoolPhase::Complete);
    h.finish(r).await;
}
