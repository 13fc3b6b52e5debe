//! `kubelet-gitops run` against the simulated cluster (no kubelets), with real git
//! repositories in temp dirs and a test double playing the node agents. Safety properties
//! are checked from the sim's request log, replayed in order.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::support::commands::bin;
use crate::support::*;
use kubelet_gitops_core::inventory::Inventory;
use kubelet_gitops_core::protocol::{DESIRED_CONFIG, STATE};
use kubelet_gitops_sim::faults::FaultConfig;
use kubelet_gitops_sim::resources::kinds;
use reconciler::controller::{Role, SyncState};
use reconciler::leader::LeaseConfig;
use reconciler::rollout::PoolPhase;

/// The pool a node belongs to, from the sim's inventory labels.
fn pool_lookup(h: &Harness) -> impl Fn(&str) -> Option<String> + use<> {
    let map: BTreeMap<String, String> = h
        .nodes()
        .iter()
        .filter_map(|n| Some((name(n).to_string(), pool_of(n)?.to_string())))
        .collect();
    move |node| map.get(node).cloned()
}

/// Asserts that, in the assignment order of one pool, nothing beyond the first `canary`
/// nodes was assigned before those were all finished.
fn assert_canary_gated(pool: &str, order: &[(String, bool)], canary: usize) {
    let canaries: Vec<&String> = order
        .iter()
        .filter(|(_, assigned)| *assigned)
        .map(|(n, _)| n)
        .take(canary)
        .collect();
    let mut finished = BTreeSet::new();
    for (node, assigned) in order {
        if !*assigned {
            if canaries.contains(&node) {
                finished.insert(node.clone());
            }
        } else if !canaries.contains(&node) {
            assert_eq!(
                finished.len(),
                canaries.len(),
                "pool {pool}: {node} assigned before the canaries {canaries:?} were done; order {order:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_pools_converge_canary_first_within_max_unavailable() {
    let h = Harness::with_agent(
        Inventory::generate(30, &["a", "b", "c"]),
        AgentOptions::default(),
    )
    .await;
    h.repo
        .write("base/kubelet.yaml", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\n")
        .settings_and_pools(&[
            ("a", "maxUnavailable: 2, canary: 1", "    maxPods: 60\n"),
            ("b", "maxUnavailable: 3, canary: 2", "    maxPods: 70\n"),
            ("c", "maxUnavailable: 30%, canary: 1", "    maxPods: 80\n"),
        ]);
    let commit = h.repo.commit("three pools");

    let r = h.reconciler(h.run_config("r1")).await;
    let mut sync = r.sync_state();
    h.wait_nodes("every node Done", LONG, |nodes| {
        nodes.iter().all(settled_done)
    })
    .await;
    let state = wait_state(&mut sync, "every pool complete", LONG, |s| {
        all_complete(s, 3)
    })
    .await;

    let applied = state.applied.expect("applied commit");
    assert_eq!(applied.commit, commit);
    for n in h.nodes() {
        let pool = pool_of(&n).unwrap();
        assert_eq!(
            desired_name(&n).as_ref(),
            applied.configmaps.get(pool),
            "{}",
            name(&n)
        );
    }
    let cms = h.configmaps();
    assert_eq!(cms.len(), 3);
    for cm in &cms {
        assert_eq!(cm["immutable"], true);
        assert_eq!(
            cm["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "kubelet-gitops"
        );
        assert_eq!(
            cm["metadata"]["annotations"]["kubelet-gitops.io/source-commit"],
            commit.as_str()
        );
    }

    let entries = h.sim.request_log().entries();
    let writes = reconciler_writes(&entries);
    assert_eq!(
        writes.get(&("create".into(), "configmaps".into())),
        Some(&3),
        "{writes:?}"
    );
    let create_attempts = entries
        .iter()
        .filter(|e| e.verb == "create" && e.resource == "configmaps" && !is_record(e))
        .count();
    assert_eq!(create_attempts, 3, "no ConfigMap is created twice");
    let per_node = assignments_per_node(&entries);
    assert_eq!(per_node.len(), 30);
    assert!(
        per_node.values().all(|&n| n == 1),
        "one write per node: {per_node:?}"
    );

    let Replay {
        max_in_flight: max,
        order,
    } = replay(&entries, &pool_lookup(&h));
    assert!(max["a"] <= 2, "pool a: {} in flight", max["a"]);
    assert!(max["b"] <= 3, "pool b: {} in flight", max["b"]);
    assert!(max["c"] <= 3, "pool c (30% of 10): {} in flight", max["c"]);
    assert_canary_gated("a", &order["a"], 1);
    assert_canary_gated("b", &order["b"], 2);
    assert_canary_gated("c", &order["c"], 1);

    let admin = r.admin_addr().unwrap();
    let (code, body) = http_get(admin, "/metrics").await;
    assert_eq!(code, 200);
    assert_eq!(
        sample(&body, "kubelet_gitops_pool_nodes_current{pool=\"b\"}"),
        Some(10.0)
    );
    assert_eq!(
        sample(
            &body,
            "kubelet_gitops_pool_nodes{pool=\"a\",state=\"done\"}"
        ),
        Some(10.0)
    );
    assert_eq!(sample(&body, "kubelet_gitops_repo_valid"), Some(1.0));
    assert_eq!(
        sample(&body, "kubelet_gitops_node_writes_total"),
        Some(30.0)
    );
    assert!(
        sample(
            &body,
            "kubelet_gitops_git_polls_total{result=\"new_commit\"}"
        )
        .is_some()
    );
    let (code, body) = http_get(admin, "/readyz").await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains(&commit), "{body}");
    assert_eq!(http_get(admin, "/healthz").await.0, 200);

    h.finish(r).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolled_back_node_halts_its_pool_until_the_next_commit() {
    let h = Harness::with_agent(
        Inventory::generate(16, &["good", "bad"]),
        AgentOptions::rolling_back("maxPods: 13"),
    )
    .await;
    h.repo.settings_and_pools(&[
        ("good", "maxUnavailable: 2", "    maxPods: 60\n"),
        ("bad", "maxUnavailable: 4, canary: 1", "    maxPods: 13\n"),
    ]);
    h.repo.commit("bad pool");
    let r = h.reconciler(h.run_config("r1")).await;
    let mut sync = r.sync_state();

    let state = wait_state(
        &mut sync,
        "bad pool halted, good pool complete",
        LONG,
        |s| {
            s.pools
                .iter()
                .any(|p| p.pool == "bad" && p.phase == PoolPhase::Halted)
                && s.pools
                    .iter()
                    .any(|p| p.pool == "good" && p.phase == PoolPhase::Complete)
        },
    )
    .await;
    let bad = state.pools.iter().find(|p| p.pool == "bad").unwrap();
    assert_eq!(bad.failed.len(), 1);
    let failed_node = bad.failed[0].node.clone();
    assert!(
        bad.failed[0]
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("healthz failed")
    );

    // Several more rounds change nothing in the halted pool.
    let before = ok_reconciles(&r);
    wait_reconciles(&r, before, 4).await;
    let bad_nodes: Vec<_> = h
        .nodes()
        .into_iter()
        .filter(|n| pool_of(n) == Some("bad"))
        .collect();
    let assigned: Vec<_> = bad_nodes
        .iter()
        .filter(|n| ann(n, DESIRED_CONFIG).is_some())
        .map(|n| name(n).to_string())
        .collect();
    assert_eq!(
        assigned,
        std::slice::from_ref(&failed_node),
        "only the canary was tried"
    );
    let failed = bad_nodes.iter().find(|n| name(n) == failed_node).unwrap();
    assert_eq!(ann(failed, STATE), Some("RolledBack"));
    let (_, body) = http_get(r.admin_addr().unwrap(), "/metrics").await;
    assert_eq!(
        sample(
            &body,
            "kubelet_gitops_pool_phase{pool=\"bad\",phase=\"Halted\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &body,
            "kubelet_gitops_pool_nodes{pool=\"bad\",state=\"failed\"}"
        ),
        Some(1.0)
    );

    // A fixed commit gives the pool a new target: the rollout restarts and converges,
    // the node that rolled back included.
    h.repo
        .pool("bad", "maxUnavailable: 4, canary: 1", "    maxPods: 14\n");
    let fixed = h.repo.commit("fix the bad pool");
    wait_state(&mut sync, "fixed pool complete", LONG, |s| {
        s.applied.as_ref().is_some_and(|a| a.commit == fixed) && all_complete(s, 2)
    })
    .await;
    let failed = h
        .nodes()
        .into_iter()
        .find(|n| name(n) == failed_node)
        .unwrap();
    assert!(settled_done(&failed));
    h.finish(r).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overlap_is_an_error_and_its_nodes_are_not_touched() {
    // generate() puts node i in pool (a, b, c)[i % 3] and zone (zone-a, zone-b, zone-c)[i % 3]:
    // every pool-a node is in zone-a.
    let h = Harness::with_agent(
        Inventory::generate(9, &["a", "b", "c"]),
        AgentOptions::default(),
    )
    .await;
    let by_zone = "apiVersion: kubelet-gitops.io/v1alpha1\nkind: NodePool\nmetadata:\n  name: zone-a\nspec:\n  nodeSelector:\n    matchExpressions:\n      - {key: topology.kubernetes.io/zone, operator: In, values: [zone-a]}\n  kubelet:\n    maxPods: 90\n";
    h.repo
        .write("pools/zone-a.yaml", by_zone)
        .settings_and_pools(&[
            ("a", "maxUnavailable: 3", "    maxPods: 60\n"),
            ("b", "maxUnavailable: 3", "    maxPods: 70\n"),
        ]);
    h.repo.commit("overlapping pools");
    let r = h.reconciler(h.run_config("r1")).await;
    let mut sync = r.sync_state();
    let state = wait_state(&mut sync, "pool b complete, overlaps reported", LONG, |s| {
        s.overlaps.len() == 3
            && s.pools
                .iter()
                .any(|p| p.pool == "b" && p.phase == PoolPhase::Complete)
    })
    .await;
    for o in &state.overlaps {
        let msg = o.to_string();
        assert!(
            msg.contains("pool a") && msg.contains("pool zone-a"),
            "{msg}"
        );
        assert!(o.node.starts_with("a-"), "{msg}");
    }
    let before = ok_reconciles(&r);
    wait_reconciles(&r, before, 3).await;
    for n in h.nodes() {
        match pool_of(&n) {
            Some("b") => assert!(settled_done(&n), "{}", name(&n)),
            // Overlapping (a) and unselected (c) nodes keep their annotations as they were.
            _ => assert_eq!(ann(&n, DESIRED_CONFIG), None, "{}", name(&n)),
        }
    }
    let entries = h.sim.request_log().entries();
    let touched: Vec<_> = assignments_per_node(&entries)
        .into_keys()
        .filter(|n| !n.starts_with("b-"))
        .collect();
    assert!(
        touched.is_empty(),
        "nodes outside pool b were written: {touched:?}"
    );
    let (_, body) = http_get(r.admin_addr().unwrap(), "/readyz").await;
    assert!(
        body.contains("is selected by pool a (pools/a.yaml) and pool zone-a (pools/zone-a.yaml)"),
        "{body}"
    );
    let (_, body) = http_get(r.admin_addr().unwrap(), "/metrics").await;
    assert_eq!(sample(&body, "kubelet_gitops_overlapping_nodes"), Some(3.0));
    h.finish(r).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_rollout_resumes_and_creates_nothing_twice() {
    let h = Harness::with_agent(
        Inventory::generate(10, &["a"]),
        AgentOptions {
            apply_delay: Duration::from_millis(150),
            ..AgentOptions::default()
        },
    )
    .await;
    h.repo
        .settings_and_pools(&[("a", "maxUnavailable: 1, canary: 1", "    maxPods: 60\n")]);
    h.repo.commit("one pool");

    let first = h.reconciler(h.run_config("first")).await;
    h.wait_nodes("three nodes Done", LONG, |nodes| {
        nodes.iter().filter(|n| settled_done(n)).count() >= 3
    })
    .await;
    first.stop().await.unwrap();
    let done_at_restart = h.nodes().iter().filter(|n| settled_done(n)).count();
    assert!(done_at_restart < 10, "the restart happened mid-rollout");

    let second = h.reconciler(h.run_config("second")).await;
    h.wait_nodes("every node Done", LONG, |nodes| {
        nodes.iter().all(settled_done)
    })
    .await;

    let entries = h.sim.request_log().entries();
    let creates = entries
        .iter()
        .filter(|e| e.verb == "create" && e.resource == "configmaps" && !is_record(e))
        .count();
    assert_eq!(
        creates, 1,
        "the restarted reconciler found the ConfigMap and did not create it"
    );
    let per_node = assignments_per_node(&entries);
    assert_eq!(per_node.len(), 10);
    assert!(
        per_node.values().all(|&n| n == 1),
        "no node assigned twice: {per_node:?}"
    );
    // The rollout record aside (the second writes it when it starts and when the pool
    // completes): at most an assignment per node not Done at the restart, and one for a
    // node in flight then.
    let by_second = entries
        .iter()
        .filter(|e| {
            accepted_write(e) && !is_record(e) && writer(e) == Writer::Reconciler("second".into())
        })
        .count();
    assert!(
        by_second > 0 && by_second <= 10 - done_at_restart + 1,
        "{by_second} writes after the restart"
    );
    let max = replay(&entries, &pool_lookup(&h)).max_in_flight;
    assert_eq!(max["a"], 1, "maxUnavailable 1 held across the restart");
    h.finish(second).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_injected_api_errors_the_rollout_still_converges_without_duplicates() {
    let mut h = Harness::start(Inventory::generate(30, &["a", "b", "c"])).await;
    // A fifth of all requests answered 500 (the reconciler's some forty writes all pass
    // unrefused about once in 20,000 runs; at a tenth, once in a hundred) and a tenth 429.
    h.sim.set_faults(FaultConfig {
        seed: 42,
        error_500_rate: 0.2,
        throttle_429_rate: 0.1,
        retry_after_seconds: 1,
        ..FaultConfig::default()
    });
    h.start_agent(AgentOptions::default()).await;
    h.repo.settings_and_pools(&[
        ("a", "maxUnavailable: 3", "    maxPods: 60\n"),
        ("b", "maxUnavailable: 3", "    maxPods: 70\n"),
        ("c", "maxUnavailable: 3", "    maxPods: 80\n"),
    ]);
    h.repo.commit("three pools");
    let r = h.reconciler(h.run_config("r1")).await;
    h.wait_nodes(
        "every node Done despite faults",
        Duration::from_secs(240),
        |nodes| nodes.iter().all(settled_done),
    )
    .await;

    let entries = h.sim.request_log().entries();
    let status = |code: u16| entries.iter().filter(|e| e.status == code).count();
    assert!(status(500) > 0 && status(429) > 0, "faults were injected");
    let created = entries
        .iter()
        .filter(|e| {
            e.verb == "create" && e.resource == "configmaps" && !is_record(e) && e.status == 201
        })
        .count();
    assert_eq!(created, 3);
    let cms = h.configmaps();
    let pools: BTreeSet<_> = cms
        .iter()
        .map(|c| {
            c["metadata"]["labels"]["kubelet-gitops.io/pool"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(cms.len(), 3, "one ConfigMap per pool");
    assert_eq!(pools.len(), 3);
    let max = replay(&entries, &pool_lookup(&h)).max_in_flight;
    for (pool, m) in &max {
        assert!(*m <= 3, "pool {pool}: {m} in flight");
    }
    let (_, body) = http_get(r.admin_addr().unwrap(), "/metrics").await;
    assert!(
        body.contains("kubelet_gitops_api_errors_total{"),
        "errors are counted"
    );
    h.finish(r).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_commit_applies_nothing_and_says_why() {
    let h = Harness::with_agent(Inventory::generate(6, &["a", "b"]), AgentOptions::default()).await;
    h.repo.settings_and_pools(&[
        ("a", "maxUnavailable: 3", "    maxPods: 60\n"),
        ("b", "maxUnavailable: 3", "    maxPods: 70\n"),
    ]);
    let good = h.repo.commit("valid");
    let r = h.reconciler(h.run_config("r1")).await;
    let mut sync = r.sync_state();
    wait_state(&mut sync, "valid commit complete", LONG, |s| {
        all_complete(s, 2)
    })
    .await;
    let before = h.snapshot();

    // Pool a changes validly, pool b has a typo: nothing of the commit may apply.
    h.repo
        .pool("a", "maxUnavailable: 3", "    maxPods: 61\n")
        .pool("b", "maxUnavailable: 3", "    maxPod: 70\n");
    let bad = h.repo.commit("typo");
    let state = wait_state(&mut sync, "commit rejected", LONG, |s| {
        s.rejected.as_ref().is_some_and(|r| r.commit == bad)
    })
    .await;
    let errors: Vec<String> = state
        .rejected
        .unwrap()
        .errors
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("pools/b.yaml:") && e.contains("maxPod")),
        "{errors:?}"
    );
    assert_eq!(
        state.applied.unwrap().commit,
        good,
        "the last valid commit stays in force"
    );
    h.assert_nothing_applied(&r, &before, "nothing written")
        .await;
    let admin = r.admin_addr().unwrap();
    let (_, body) = http_get(admin, "/readyz").await;
    assert!(
        body.contains("pools/b.yaml:") && body.contains(&bad),
        "{body}"
    );
    let (_, body) = http_get(admin, "/metrics").await;
    assert_eq!(sample(&body, "kubelet_gitops_repo_valid"), Some(0.0));

    // The fix applies.
    h.repo.pool("b", "maxUnavailable: 3", "    maxPods: 71\n");
    let fixed = h.repo.commit("fix typo");
    wait_state(&mut sync, "fixed commit complete", LONG, |s| {
        s.rejected.is_none()
            && s.applied.as_ref().is_some_and(|a| a.commit == fixed)
            && all_complete(s, 2)
    })
    .await;
    h.finish(r).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_once_exits_1_on_an_invalid_commit_and_0_after_applying() {
    let h = Harness::start(Inventory::generate(4, &["a", "b"])).await;
    h.repo.settings_and_pools(&[
        ("a", "maxUnavailable: 2, canary: 0", "    maxPods: 60\n"),
        ("b", "maxUnavailable: 1", "    maxPodz: 70\n"),
    ]);
    h.repo.commit("typo");
    let run = |cache: &str| {
        let out = bin()
            .arg("run")
            .env("KUBELET_GITOPS_REPO_URL", h.repo.url())
            .env("KUBELET_GITOPS_KUBECONFIG", h.sim.kubeconfig_path())
            .env("KUBELET_GITOPS_CACHE_DIR", h.dir.path().join(cache))
            .env("KUBELET_GITOPS_ADMIN_ADDR", "off")
            .env("KUBELET_GITOPS_ONCE", "true")
            .env("KUBELET_GITOPS_LOG_FORMAT", "json")
            .env("KUBELET_GITOPS_IDENTITY", "ci")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, logs) = tokio::task::block_in_place(|| run("cache"));
    assert_eq!(code, Some(1), "{logs}");
    assert!(
        logs.contains("pools/b.yaml") && logs.contains("maxPodz"),
        "{logs}"
    );
    assert!(
        logs.lines().all(|l| l.starts_with('{')),
        "JSON logs: {logs}"
    );
    assert!(reconciler_writes(&h.sim.request_log().entries()).is_empty());

    h.repo.pool("b", "maxUnavailable: 1", "    maxPods: 70\n");
    h.repo.commit("fixed");
    let (code, logs) = tokio::task::block_in_place(|| run("cache"));
    assert_eq!(code, Some(0), "{logs}");
    let writes = reconciler_writes(&h.sim.request_log().entries());
    assert_eq!(
        writes.get(&("create".into(), "configmaps".into())),
        Some(&2),
        "{writes:?}"
    );
    // One round: pool a (canary 0, maxUnavailable 2) assigns both its nodes, pool b its canary.
    assert_eq!(
        writes.get(&("patch".into(), "nodes".into())),
        Some(&3),
        "{writes:?}"
    );
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_leader_election_only_the_leader_writes_and_a_successor_takes_over() {
    let h = Harness::with_agent(
        Inventory::generate(10, &["a", "b"]),
        AgentOptions::default(),
    )
    .await;
    h.repo.settings_and_pools(&[
        ("a", "maxUnavailable: 2", "    maxPods: 60\n"),
        ("b", "maxUnavailable: 2", "    maxPods: 70\n"),
    ]);
    h.repo.commit("two pools");
    let replica = |id: &str| {
        let mut c = h.run_config(id);
        c.leader = Some(LeaseConfig::new(
            "kubelet-gitops",
            NS,
            id,
            Duration::from_secs(2),
        ));
        c
    };
    let one = h.reconciler(replica("one")).await;
    let two = h.reconciler(replica("two")).await;
    let (mut s1, mut s2) = (one.sync_state(), two.sync_state());
    h.wait_nodes("every node Done", LONG, |nodes| {
        nodes.iter().all(settled_done)
    })
    .await;
    let leader_of = |s: &SyncState| s.role == Role::Leader;
    let st1 = wait_state(&mut s1, "one has a role", LONG, |s| {
        s.role != Role::Standalone && s.ready
    })
    .await;
    let st2 = wait_state(&mut s2, "two has a role", LONG, |s| {
        s.role != Role::Standalone && s.ready
    })
    .await;
    assert!(
        leader_of(&st1) != leader_of(&st2),
        "exactly one leader: {:?} {:?}",
        st1.role,
        st2.role
    );
    let (leader, follower, mut follower_state, leader_id, follower_id) = if leader_of(&st1) {
        (one, two, s2, "one", "two")
    } else {
        (two, one, s1, "two", "one")
    };

    let entries = h.sim.request_log().entries();
    let writers: BTreeSet<_> = entries
        .iter()
        .filter(|e| accepted_write(e) && e.resource != "leases")
        .filter_map(|e| match writer(e) {
            Writer::Reconciler(id) => Some(id),
            _ => None,
        })
        .collect();
    assert_eq!(
        writers,
        BTreeSet::from([leader_id.to_string()]),
        "only the leader wrote"
    );
    let (code, body) = http_get(follower.admin_addr().unwrap(), "/readyz").await;
    assert_eq!(code, 200, "a follower is ready: {body}");
    assert!(body.contains("\"role\":\"follower\""), "{body}");

    // The leader shuts down (releasing the lease); the follower takes over and applies the
    // next commit alone.
    leader.stop().await.unwrap();
    h.sim.request_log().reset();
    wait_state(&mut follower_state, "the follower leads", LONG, |s| {
        s.role == Role::Leader
    })
    .await;
    h.repo.pool("a", "maxUnavailable: 2", "    maxPods: 61\n");
    let next = h.repo.commit("change a");
    wait_state(&mut follower_state, "next commit complete", LONG, |s| {
        s.applied.as_ref().is_some_and(|a| a.commit == next) && all_complete(s, 2)
    })
    .await;
    let entries = h.sim.request_log().entries();
    let writers: BTreeSet<_> = entries
        .iter()
        .filter(|e| accepted_write(e))
        .filter_map(|e| match writer(e) {
            Writer::Reconciler(id) => Some(id),
            _ => None,
        })
        .collect();
    assert_eq!(writers, BTreeSet::from([follower_id.to_string()]));
    let lease = h
        .sim
        .store()
        .get(kinds::leases(), Some(NS), "kubelet-gitops")
        .unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], follower_id);
    h.finish(follower).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_namespace_is_a_clear_error_and_nothing_is_written() {
    let h = Harness::with_agent(Inventory::generate(4, &["a"]), AgentOptions::default()).await;
    h.repo
        .write(
            "kubelet-gitops.yaml",
            "apiVersion: kubelet-gitops.io/v1alpha1\nkind: RepoSettings\nspec:\n  namespace: node-config\n",
        )
        .pool("a", "maxUnavailable: 4", "    maxPods: 60\n");
    h.repo.commit("namespace not created yet");
    let r = h.reconciler(h.run_config("r1")).await;
    let mut sync = r.sync_state();
    let state = wait_state(&mut sync, "namespace error", LONG, |s| {
        s.last_error.is_some()
    })
    .await;
    let error = state.last_error.unwrap();
    assert!(
        error.contains("namespace node-config does not exist"),
        "{error}"
    );
    assert!(!state.ready);
    let entries = h.sim.request_log().entries();
    let node_writes = entries
        .iter()
        .filter(|e| {
            accepted_write(e) && e.resource == "nodes" && matches!(writer(e), Writer::Reconciler(_))
        })
        .count();
    assert_eq!(
        node_writes, 0,
        "no node is pointed at a ConfigMap that does not exist"
    );

    // Once the namespace exists, the retry succeeds.
    let ns = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "node-config"}});
    h.sim
        .store()
        .create(kinds::namespaces(), None, ns, &Default::default())
        .unwrap();
    h.wait_nodes("every node Done", LONG, |nodes| {
        nodes.iter().all(settled_done)
    })
    .await;
    wait_state(&mut sync, "ready", LONG, |s| {
        s.ready && s.last_error.is_none()
    })
    .await;
    h.finish(r).await;
}
