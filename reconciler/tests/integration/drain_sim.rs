//! Drain (issue 16 point 2), `kubelet-gitops run` against the simulated cluster with the
//! agent double: a `drain`-class change cordons each node, evicts its pods through the
//! Eviction API (a DaemonSet's pod and a mirror pod stay), assigns it once empty and
//! uncordons it after Done; a PodDisruptionBudget that allows no disruption holds the
//! drain (retried, named in the pool's report) until it is relaxed; past `drainTimeout`
//! the drain gives up, the node is uncordoned and the pool halts naming the budget.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kubelet_gitops_core::inventory::Inventory;
use kubelet_gitops_core::protocol::{
    CORDONED, DESIRED_CONFIG, DRAIN, DRAIN_BLOCKED, OBSERVED_CONFIG, STATE,
};
use reconciler::controller::SyncState;
use reconciler::rollout::{Failure, PoolPhase};
use serde_json::{Value, json};

use crate::support::*;

/// A pool whose maxPods changes are drain-class.
fn pool_yaml(max_pods: u32, rollout: &str) -> (String, String) {
    (
        format!("maxUnavailable: 1, {rollout}"),
        format!("    maxPods: {max_pods}\n  disruption:\n    classes: {{maxPods: drain}}\n"),
    )
}

fn pod(ns: &str, name: &str, node: &str, labels: Value, owner: Option<Value>) -> Pod {
    let mut v = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
        },
    });
    if let Some(o) = owner {
        v["metadata"]["ownerReferences"] = json!([o]);
    }
    serde_json::from_value(v).unwrap()
}

fn owner(kind: &str, name: &str, uid: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid, "controller": true})
}

/// A Node as the test's watch saw it change.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    unschedulable: bool,
    desired: Option<String>,
    state: Option<String>,
    observed: Option<String>,
    drain: Option<String>,
}

/// Every distinct state of every Node, in order, from a watch of its own.
#[derive(Clone, Default)]
struct History(Arc<Mutex<BTreeMap<String, Vec<Seen>>>>);

impl History {
    fn start(client: kube::Client) -> (History, tokio::task::JoinHandle<()>) {
        let h = History::default();
        let out = h.clone();
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(
                watcher(Api::<Node>::all(client), Default::default()).applied_objects()
            );
            while let Some(Ok(n)) = stream.next().await {
                let a = n.metadata.annotations.clone().unwrap_or_default();
                let seen = Seen {
                    unschedulable: n
                        .spec
                        .as_ref()
                        .and_then(|s| s.unschedulable)
                        .unwrap_or(false),
                    desired: a.get(DESIRED_CONFIG).cloned(),
                    state: a.get(STATE).cloned(),
                    observed: a.get(OBSERVED_CONFIG).cloned(),
                    drain: a.get(DRAIN).cloned(),
                };
                let mut map = out.0.lock().unwrap();
                let list = map.entry(n.metadata.name.unwrap_or_default()).or_default();
                if list.last() != Some(&seen) {
                    list.push(seen);
                }
            }
        });
        (h, task)
    }

    /// What `node` went through while `target` was rolled out: the steps of the drain
    /// in order (`cordon`, `assign`, `done`, `uncordon`), each once.
    fn steps(&self, node: &str, target: &str) -> Vec<&'static str> {
        let map = self.0.lock().unwrap();
        let mut steps = Vec::new();
        let mut push = |s: &'static str| {
            if !steps.contains(&s) {
                steps.push(s);
            }
        };
        let mut cordoned = false;
        for s in map.get(node).into_iter().flatten() {
            let on_target = s.desired.as_deref().is_some_and(|d| d.ends_with(target));
            if s.unschedulable
                && !cordoned
                && s.drain.as_deref().is_some_and(|d| d.ends_with(target))
            {
                push("cordon");
            }
            if on_target {
                push("assign");
            }
            if on_target
                && s.state.as_deref() == Some("Done")
                && s.observed.as_deref().is_some_and(|o| o.ends_with(target))
            {
                push("done");
            }
            if cordoned && !s.unschedulable {
                push("uncordon");
            }
            cordoned = s.unschedulable;
        }
        steps
    }
}

fn report<'a>(s: &'a SyncState, pool: &str) -> &'a reconciler::rollout::PoolReport {
    s.pools
        .iter()
        .find(|p| p.pool == pool)
        .expect("the pool's report")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_evicts_waits_for_the_budget_and_halts_past_its_timeout() {
    let h = Harness::with_agent(Inventory::generate(3, &["w"]), AgentOptions::default()).await;
    let (rollout, kubelet) = pool_yaml(70, "drainTimeout: 10m");
    h.repo.settings_and_pools(&[("w", &rollout, &kubelet)]);
    h.repo
        .commit("first config (adopted from the nodes' own: no drain)");
    let r = h.reconciler(h.run_config("r1")).await;
    let mut sync = r.sync_state();
    wait_state(&mut sync, "first rollout", LONG, |s| all_complete(s, 1)).await;
    assert!(
        h.nodes().iter().all(|n| ann(n, CORDONED).is_none()),
        "the first commit's class is unknown: not drained"
    );

    // w-0: a ReplicaSet's pod, a DaemonSet's pod, a mirror pod; w-1: a pod its budget
    // protects (minAvailable 1 of 1: no disruption allowed).
    let client = client(&h.sim, "drain-test").await;
    let (history, watch) = History::start(client.clone());
    let ds: Api<DaemonSet> = Api::namespaced(client.clone(), "kube-system");
    let ds = ds
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
                "metadata": {"name": "agent"},
                "spec": {"selector": {"matchLabels": {"app": "agent"}},
                    "template": {"metadata": {"labels": {"app": "agent"}},
                        "spec": {"containers": [{"name": "a", "image": "registry.k8s.io/pause:3.10"}]}}}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let ds_uid = ds.metadata.uid.unwrap();
    let create = |ns: &'static str, p: Pod| {
        let api: Api<Pod> = Api::namespaced(client.clone(), ns);
        async move { api.create(&PostParams::default(), &p).await.unwrap() }
    };
    create(
        "default",
        pod(
            "default",
            "web-0",
            "w-0",
            json!({"app": "web"}),
            Some(owner(
                "ReplicaSet",
                "web-5d8f",
                "0b7c1d2e-0000-4000-8000-000000000001",
            )),
        ),
    )
    .await;
    create(
        "kube-system",
        pod(
            "kube-system",
            "agent-w-0",
            "w-0",
            json!({"app": "agent"}),
            Some(owner("DaemonSet", "agent", &ds_uid)),
        ),
    )
    .await;
    let mut mirror = pod(
        "kube-system",
        "etcd-w-0",
        "w-0",
        json!({"component": "etcd"}),
        None,
    );
    mirror.metadata.annotations = Some(BTreeMap::from([(
        "kubernetes.io/config.mirror".to_string(),
        "3f2a".to_string(),
    )]));
    create("kube-system", mirror).await;
    create(
        "default",
        pod(
            "default",
            "db-0",
            "w-1",
            json!({"app": "db"}),
            Some(owner(
                "StatefulSet",
                "db",
                "0b7c1d2e-0000-4000-8000-000000000002",
            )),
        ),
    )
    .await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    pdbs.create(
        &PostParams::default(),
        &serde_json::from_value(
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "db"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}}),
        )
        .unwrap(),
    )
    .await
    .unwrap();

    // The drain-class change.
    h.sim.request_log().reset();
    let (rollout, kubelet) = pool_yaml(60, "drainTimeout: 10m");
    h.repo.pool("w", &rollout, &kubelet);
    let change = h.repo.commit("maxPods 60: a drain-class change");
    let s = wait_state(&mut sync, "w-1's drain held by the budget", LONG, |s| {
        s.applied.as_ref().is_some_and(|a| a.commit == change)
            && report(s, "w").draining.iter().any(|d| d.contains("db"))
    })
    .await;
    let target = s.applied.as_ref().unwrap().configmaps["w"].clone();
    let w = report(&s, "w");
    assert_eq!(w.phase, PoolPhase::Progressing);
    assert_eq!(w.done, 1, "{w:?}");
    assert!(
        w.draining[0].starts_with(
            "w-1: 1 pod(s) left; eviction of pod default/db-0 refused (PodDisruptionBudget)"
        ),
        "{:?}",
        w.draining
    );
    // The canary went through every step; its DaemonSet and mirror pods stayed.
    assert_eq!(
        history.steps("w-0", &target),
        ["cordon", "assign", "done", "uncordon"]
    );
    let pods: Api<Pod> = Api::all(client.clone());
    let left = |node: &str| {
        let pods = pods.clone();
        let node = node.to_string();
        async move {
            let mut names: Vec<String> = pods
                .list(&kube::api::ListParams::default().fields(&format!("spec.nodeName={node}")))
                .await
                .unwrap()
                .items
                .into_iter()
                .map(|p| p.metadata.name.unwrap_or_default())
                .collect();
            names.sort();
            names
        }
    };
    assert_eq!(left("w-0").await, ["agent-w-0", "etcd-w-0"]);
    // In order on w-0: cordon, the eviction, the assignment (and the uncordon after).
    let log = h.sim.request_log().entries();
    let w0: Vec<String> = log
        .iter()
        .filter(|e| accepted_write(e) && matches!(writer(e), Writer::Reconciler(_)))
        .filter(|e| e.name.as_deref() == Some("w-0") || e.name.as_deref() == Some("web-0"))
        .map(|e| format!("{} {}", e.verb, e.resource))
        .collect();
    assert_eq!(
        w0,
        [
            "patch nodes",
            "create pods/eviction",
            "patch nodes",
            "patch nodes"
        ],
        "cordon, evict, assign, uncordon"
    );
    let w1 = h.nodes().into_iter().find(|n| name(n) == "w-1").unwrap();
    assert_eq!(
        w1["spec"]["unschedulable"], true,
        "cordoned while it drains"
    );
    assert_eq!(ann(&w1, CORDONED), Some("true"));
    assert!(
        desired_name(&w1).as_deref() != Some(target.as_str()),
        "not assigned before it is empty"
    );
    let refused = log
        .iter()
        .filter(|e| {
            e.resource == "pods/eviction" && e.name.as_deref() == Some("db-0") && e.status == 429
        })
        .count();
    assert!(refused >= 1, "the budget refused the eviction");

    // A restart mid-drain: the new reconciler knows the change's class from the
    // ConfigMap's record and the drain from the Node's; it resumes (the budget still
    // holds w-1, which stays cordoned, and nothing new is cordoned meanwhile).
    r.stop().await.expect("the reconciler stops");
    let r = h.reconciler(h.run_config("r2")).await;
    let mut sync = r.sync_state();
    wait_state(
        &mut sync,
        "the restarted reconciler resumes the drain",
        LONG,
        |s| {
            s.applied.as_ref().is_some_and(|a| a.commit == change)
                && report(s, "w")
                    .draining
                    .iter()
                    .any(|d| d.contains("refused (PodDisruptionBudget)"))
        },
    )
    .await;
    let nodes = h.nodes();
    let by_name = |n: &str| nodes.iter().find(|v| name(v) == n).unwrap().clone();
    assert_eq!(by_name("w-1")["spec"]["unschedulable"], true);
    assert!(
        ann(&by_name("w-2"), DRAIN).is_none(),
        "maxUnavailable 1: w-2 waits"
    );

    // The budget relaxed: the drain goes on, and the rollout completes.
    pdbs.patch(
        "db",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"minAvailable": 0}})),
    )
    .await
    .unwrap();
    wait_state(&mut sync, "complete once the budget allows", LONG, |s| {
        all_complete(s, 1)
    })
    .await;
    // The last node's uncordon follows its Done by a round.
    h.wait_nodes("drain records cleared", LONG, |nodes| {
        nodes.iter().all(|n| {
            n["spec"]["unschedulable"].as_bool() != Some(true)
                && ann(n, DRAIN).is_none()
                && ann(n, CORDONED).is_none()
        })
    })
    .await;
    eventually("the test's watch saw every uncordon", LONG, || {
        let steps: Vec<_> = ["w-0", "w-1", "w-2"]
            .iter()
            .map(|n| history.steps(n, &target))
            .collect();
        if steps.iter().all(|s| s.len() == 4) {
            Ok(())
        } else {
            Err(format!("{steps:?}"))
        }
    })
    .await;
    for n in ["w-0", "w-1", "w-2"] {
        assert_eq!(
            history.steps(n, &target),
            ["cordon", "assign", "done", "uncordon"],
            "{n}"
        );
    }
    assert!(left("w-1").await.is_empty());

    // Past drainTimeout: a new pod the budget protects again, a short timeout.
    create(
        "default",
        pod(
            "default",
            "db-1",
            "w-1",
            json!({"app": "db"}),
            Some(owner(
                "StatefulSet",
                "db",
                "0b7c1d2e-0000-4000-8000-000000000002",
            )),
        ),
    )
    .await;
    pdbs.patch(
        "db",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"minAvailable": 1}})),
    )
    .await
    .unwrap();
    let (rollout, kubelet) = pool_yaml(50, "drainTimeout: 3s");
    h.repo.pool("w", &rollout, &kubelet);
    let change = h.repo.commit("maxPods 50, drainTimeout 3s");
    let s = wait_state(&mut sync, "halted on the drain's timeout", LONG, |s| {
        s.applied.as_ref().is_some_and(|a| a.commit == change)
            && report(s, "w").phase == PoolPhase::Halted
    })
    .await;
    let w = report(&s, "w");
    assert_eq!(w.failed.len(), 1, "{w:?}");
    assert_eq!(w.failed[0].node, "w-1");
    assert_eq!(w.failed[0].state, Failure::DrainTimeout);
    let message = w.failed[0].message.clone().unwrap_or_default();
    assert!(
        message.starts_with("drain gave up after drainTimeout 3s: 1 pod(s) left; eviction of pod default/db-1 refused (PodDisruptionBudget)"),
        "{message}"
    );
    let w1 = h.nodes().into_iter().find(|n| name(n) == "w-1").unwrap();
    assert_ne!(
        w1["spec"]["unschedulable"], true,
        "never left cordoned by us"
    );
    assert_eq!(ann(&w1, DRAIN_BLOCKED), Some(message.as_str()));
    let w2 = h.nodes().into_iter().find(|n| name(n) == "w-2").unwrap();
    assert!(ann(&w2, DRAIN).is_none(), "halted: w-2 is not drained");
    watch.abort();
    h.finish(r).await;
}

/// `drain: manual`: the reconciler cordons and evicts nothing. The node next in turn
/// waits, the pool held (`hold`, and `kubelet_gitops_pool_held{reason="manual_drain"}`
/// 1), until a person has cordoned it and its pods are gone; it is assigned then, and
/// left cordoned (the person's to lift). Then the next node waits the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_drain_waits_for_a_person_and_never_cordons_nor_evicts() {
    use reconciler::rollout::Hold;

    let h = Harness::with_agent(Inventory::generate(2, &["w"]), AgentOptions::default()).await;
    let (rollout, kubelet) = pool_yaml(70, "drain: manual");
    h.repo.settings_and_pools(&[("w", &rollout, &kubelet)]);
    h.repo.commit("first config (its class unknown: no drain)");
    let r = h.reconciler(h.run_config("r1")).await;
    let mut sync = r.sync_state();
    wait_state(&mut sync, "first rollout", LONG, |s| all_complete(s, 1)).await;
    let admin = r.admin_addr().unwrap();
    let held = |text: &str| {
        text.lines()
            .find(|l| l.starts_with("kubelet_gitops_pool_held{pool=\"w\",reason=\"manual_drain\"}"))
            .map(|l| l.rsplit(' ').next().unwrap_or_default().to_string())
    };
    let (_, metrics) = http_get(admin, "/metrics").await;
    assert_eq!(held(&metrics).as_deref(), Some("0"), "{metrics}");

    let client = client(&h.sim, "drain-test").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for (p, node) in [("web-0", "w-0"), ("web-1", "w-1")] {
        let rs = owner(
            "ReplicaSet",
            "web-5d8f",
            "0b7c1d2e-0000-4000-8000-000000000003",
        );
        pods.create(
            &PostParams::default(),
            &pod("default", p, node, json!({"app": "web"}), Some(rs)),
        )
        .await
        .unwrap();
    }

    h.sim.request_log().reset();
    let (rollout, kubelet) = pool_yaml(60, "drain: manual");
    h.repo.pool("w", &rollout, &kubelet);
    let change = h.repo.commit("maxPods 60: a drain-class change");
    let waiting_for = |s: &SyncState| match &report(s, "w").hold {
        Some(Hold::Manual { nodes }) => nodes.clone(),
        _ => Vec::new(),
    };
    let s = wait_state(&mut sync, "the canary waits for a person", LONG, |s| {
        s.applied.as_ref().is_some_and(|a| a.commit == change) && !waiting_for(s).is_empty()
    })
    .await;
    let target = s.applied.as_ref().unwrap().configmaps["w"].clone();
    let first = waiting_for(&s);
    assert_eq!(first.len(), 1, "one canary: {first:?}");
    let first = first[0].clone();
    let other = if first == "w-0" { "w-1" } else { "w-0" };
    let hold = report(&s, "w").hold.as_ref().unwrap().to_string();
    assert!(
        hold.starts_with(&format!(
            "waiting for a person to drain {first} (drain: manual; `kubectl drain {first} "
        )),
        "{hold}"
    );
    // Several checks later: still nothing done to the nodes, and the pool held.
    tokio::time::sleep(std::time::Duration::from_secs(6)).await;
    let (_, metrics) = http_get(admin, "/metrics").await;
    assert_eq!(held(&metrics).as_deref(), Some("1"), "{metrics}");
    for n in h.nodes() {
        assert_ne!(
            n["spec"]["unschedulable"],
            true,
            "{}: never cordoned by us",
            name(&n)
        );
        assert_ne!(
            desired_name(&n).as_deref(),
            Some(target.as_str()),
            "{}",
            name(&n)
        );
    }

    // A person drains the canary: cordon, then its pod goes.
    let nodes: Api<Node> = Api::all(client.clone());
    let cordon = |node: String| {
        let nodes = nodes.clone();
        async move {
            nodes
                .patch(
                    &node,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"unschedulable": true}})),
                )
                .await
                .unwrap();
        }
    };
    let web = |node: &str| if node == "w-0" { "web-0" } else { "web-1" };
    cordon(first.clone()).await;
    pods.delete(web(&first), &Default::default()).await.unwrap();
    let s = wait_state(
        &mut sync,
        "the canary applied, the other waits",
        LONG,
        |s| report(s, "w").done == 1 && waiting_for(s) == [other.to_string()],
    )
    .await;
    assert_eq!(report(&s, "w").phase, PoolPhase::Progressing);
    let canary = h.nodes().into_iter().find(|n| name(n) == first).unwrap();
    assert_eq!(desired_name(&canary).as_deref(), Some(target.as_str()));
    assert_eq!(
        canary["spec"]["unschedulable"], true,
        "the person's cordon is the person's to lift"
    );
    assert!(ann(&canary, CORDONED).is_none() && ann(&canary, DRAIN).is_none());

    // The second node, drained the same way: the rollout completes, the hold is gone.
    cordon(other.to_string()).await;
    pods.delete(web(other), &Default::default()).await.unwrap();
    wait_state(&mut sync, "complete", LONG, |s| all_complete(s, 1)).await;
    let (_, metrics) = http_get(admin, "/metrics").await;
    assert_eq!(held(&metrics).as_deref(), Some("0"), "{metrics}");
    let ours: Vec<String> = h
        .sim
        .request_log()
        .entries()
        .iter()
        .filter(|e| accepted_write(e) && matches!(writer(e), Writer::Reconciler(_)))
        .filter(|e| e.resource != "configmaps")
        .map(|e| {
            format!(
                "{} {} {}",
                e.verb,
                e.resource,
                e.name.as_deref().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        ours,
        [
            format!("patch nodes {first}"),
            format!("patch nodes {other}")
        ],
        "the reconciler's only Node writes are the two assignments; no eviction"
    );
    h.finish(r).await;
}
