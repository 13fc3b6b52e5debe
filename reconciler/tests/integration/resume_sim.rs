//! A reconciler restarted while the branch head does not validate, or while the remote is
//! unreachable, resumes from the commit the cluster is on: a node that joins a pool gets
//! that pool's config, and nothing that never went out is rolled out.

use std::collections::BTreeSet;

use crate::support::*;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kubelet_gitops_core::inventory::Inventory;
use serde_json::json;

/// Four nodes, two labelled pool a (managed) and two pool b (in no pool of the repo).
async fn harness_with_pool_a_applied() -> (Harness, String, String) {
    let h = Harness::with_agent(Inventory::generate(4, &["a", "b"]), AgentOptions::default()).await;
    h.repo.write("kubelet-gitops.yaml", &settings_yaml()).write(
        "pools/a.yaml",
        &pool_yaml("a", "a", "maxUnavailable: 2", "    maxPods: 60\n"),
    );
    let applied = h.repo.commit("pool a");
    let first = h.reconciler(h.run_config("first")).await;
    let mut sync = first.sync_state();
    wait_state(&mut sync, "pool a complete", LONG, |s| {
        s.applied.as_ref().is_some_and(|a| a.commit == applied) && all_complete(s, 1)
    })
    .await;
    first.stop().await.unwrap();
    let cm = only_configmap(&h);
    (h, applied, cm)
}

fn only_configmap(h: &Harness) -> String {
    let names = configmap_names(h);
    assert_eq!(names.len(), 1, "{names:?}");
    names.into_iter().next().unwrap()
}

fn configmap_names(h: &Harness) -> BTreeSet<String> {
    h.configmaps()
        .iter()
        .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

/// Moves node `name` into pool `pool` (its inventory label), as a person would.
async fn relabel(h: &Harness, name: &str, pool: &str) {
    let api: Api<Node> = Api::all(client(&h.sim, "test-admin").await);
    let patch = json!({"metadata": {"labels": {POOL_LABEL: pool}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

fn first_in_pool<'a>(nodes: &'a [serde_json::Value], pool: &str) -> &'a str {
    nodes
        .iter()
        .find(|n| pool_of(n) == Some(pool))
        .map(name)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_on_an_invalid_head_resumes_the_commit_the_cluster_is_on() {
    init_tracing();
    let (h, applied, cm) = harness_with_pool_a_applied().await;

    // While no reconciler runs: a valid change that never goes out, then a typo on top.
    h.repo.write(
        "pools/a.yaml",
        &pool_yaml("a", "a", "maxUnavailable: 2", "    maxPods: 61\n"),
    );
    let unseen = h.repo.commit("61 pods");
    h.repo.write(
        "pools/a.yaml",
        &pool_yaml("a", "a", "maxUnavailable: 2", "    maxPod: 62\n"),
    );
    let bad = h.repo.commit("typo");
    h.sim.request_log().reset();

    let second = h.reconciler(h.run_config("second")).await;
    let mut sync = second.sync_state();
    let state = wait_state(&mut sync, "resumed on the applied commit", LONG, |s| {
        s.rejected.as_ref().is_some_and(|r| r.commit == bad)
            && s.applied.as_ref().is_some_and(|a| a.commit == applied)
    })
    .await;
    assert_ne!(state.applied.as_ref().unwrap().commit, unseen);

    // A node joins pool a: it gets the config the cluster is on, at once.
    let joining = first_in_pool(&h.nodes(), "b").to_string();
    relabel(&h, &joining, "a").await;
    h.wait_nodes("the joining node Done on pool a's config", LONG, |nodes| {
        nodes
            .iter()
            .any(|n| name(n) == joining && settled_done(n) && desired_name(n) == Some(cm.clone()))
    })
    .await;
    assert!(
        h.nodes()
            .iter()
            .filter(|n| pool_of(n) == Some("a"))
            .all(|n| desired_name(n) == Some(cm.clone())),
        "every pool-a node on the applied commit's ConfigMap:\n{}",
        summary(&h.nodes())
    );
    // The valid commit nobody saw go out was not published, let alone rolled out.
    assert_eq!(configmap_names(&h), BTreeSet::from([cm.clone()]));
    let creates = h
        .sim
        .request_log()
        .entries()
        .iter()
        .filter(|e| e.verb == "create" && e.resource == "configmaps" && !is_record(e))
        .count();
    assert_eq!(creates, 0, "no ConfigMap created after the restart");
    let (_, body) = http_get(second.admin_addr().unwrap(), "/readyz").await;
    assert!(body.contains(&bad), "{body}");
    second.stop().await.unwrap();
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_while_the_remote_is_unreachable_resumes_from_the_git_cache() {
    init_tracing();
    let (h, applied, cm) = harness_with_pool_a_applied().await;

    // The remote goes away; the restarted reconciler reuses the first one's cache.
    let moved = h.dir.path().join("repo-away");
    std::fs::rename(&h.repo.path, &moved).unwrap();
    let mut config = h.run_config("second");
    config.git.cache_dir = h.run_config("first").git.cache_dir;
    let second = h.reconciler(config).await;
    let mut sync = second.sync_state();
    wait_state(&mut sync, "resumed from the cache", LONG, |s| {
        s.unreachable.is_some() && s.applied.as_ref().is_some_and(|a| a.commit == applied)
    })
    .await;

    let joining = first_in_pool(&h.nodes(), "b").to_string();
    relabel(&h, &joining, "a").await;
    h.wait_nodes("the joining node Done on pool a's config", LONG, |nodes| {
        nodes
            .iter()
            .any(|n| name(n) == joining && settled_done(n) && desired_name(n) == Some(cm.clone()))
    })
    .await;
    assert_eq!(configmap_names(&h), BTreeSet::from([cm.clone()]));

    // Once the remote answers again, its head is followed as usual.
    std::fs::rename(&moved, &h.repo.path).unwrap();
    h.repo.write(
        "pools/a.yaml",
        &pool_yaml("a", "a", "maxUnavailable: 2", "    maxPods: 63\n"),
    );
    let next = h.repo.commit("63 pods");
    wait_state(&mut sync, "the next commit complete", LONG, |s| {
        s.unreachable.is_none()
            && s.applied.as_ref().is_some_and(|a| a.commit == next)
            && all_complete(s, 1)
    })
    .await;
    second.stop().await.unwrap();
    h.shutdown().await;
}
