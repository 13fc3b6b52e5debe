//! Scenario 9, drain (issue 16 point 2): a `drain`-class change (the gpu pool makes
//! kubeAPIQPS one) on a pool whose nodes run pods a PodDisruptionBudget protects. The
//! reconciler, with deploy/'s least-privilege identity and admission policy on the real
//! cluster, cordons the canary and evicts its pods; the budget refuses (429) and the
//! drain waits, naming the budget in `/readyz`, the node cordoned and not assigned. Once
//! the budget allows, the drain goes on: every gpu node is cordoned, emptied, assigned,
//! Done and uncordoned in that order, and the pods run elsewhere.
//!
//! On the real cluster the pods are a Deployment's, placed by the real scheduler, run by
//! the kubelets' fake runtime, replaced by the ReplicaSet controller after each eviction;
//! the budget's status is the real disruption controller's. On the sim (no scheduler, no
//! controllers) the pods are created bound to the nodes and are not replaced.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kubelet_gitops_e2e::{Backend, E2e, E2eError, NodeView, Options, POOL_LABEL, both_backends};
use serde_json::json;

both_backends!(a_drain_waits_for_the_budget_then_cordons_evicts_and_uncordons);

fn kube_err(what: &'static str) -> impl Fn(kube::Error) -> E2eError {
    move |e| E2eError::Unexpected {
        what: what.into(),
        message: e.to_string(),
    }
}

/// The steps `node` went through for `target`, from the recorder's history: `cordon`,
/// `assign`, `done`, `uncordon`, each once, in the order first seen.
fn steps(history: &[NodeView], node: &str, target: &str) -> Vec<&'static str> {
    let mut steps = Vec::new();
    let mut push = |s: &'static str| {
        if !steps.contains(&s) {
            steps.push(s);
        }
    };
    let mut cordoned = false;
    for v in history.iter().filter(|v| v.name == node) {
        if v.unschedulable && !cordoned && v.drain.as_deref() == Some(target) {
            push("cordon");
        }
        if v.desired.as_deref() == Some(target) {
            push("assign");
        }
        if v.done_on(target) {
            push("done");
        }
        if cordoned && !v.unschedulable {
            push("uncordon");
        }
        cordoned = v.unschedulable;
    }
    steps
}

/// Names of the pods labelled `app=web`, by node, that are not being deleted.
async fn web_pods(e2e: &E2e) -> Result<BTreeMap<String, Vec<String>>, E2eError> {
    let pods = Api::<Pod>::namespaced(e2e.client.clone(), "default")
        .list(&ListParams::default().labels("app=web"))
        .await
        .map_err(kube_err("listing the web pods"))?;
    let mut by_node: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for p in pods.items {
        if p.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let node = p
            .spec
            .and_then(|s| s.node_name)
            .unwrap_or_else(|| "(unscheduled)".into());
        by_node
            .entry(node)
            .or_default()
            .push(p.metadata.name.unwrap_or_default());
    }
    Ok(by_node)
}

async fn a_drain_waits_for_the_budget_then_cordons_evicts_and_uncordons(
    backend: Backend,
) -> Result<(), E2eError> {
    let Some(mut e2e) = E2e::start("drain", Options::on(backend)).await? else {
        return Ok(());
    };
    let first = e2e.wait_converged().await?;

    // Two `app=web` pods on the gpu nodes, and a budget that allows no disruption.
    let client = e2e.client.clone();
    match backend {
        Backend::Real => {
            let deployment: Deployment = serde_json::from_value(json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {
                    "replicas": 2,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {
                            "nodeSelector": {POOL_LABEL: "gpu"},
                            "terminationGracePeriodSeconds": 1,
                            "containers": [{"name": "web", "image": "registry.k8s.io/pause:3.10"}]
                        }
                    }
                }
            }))
            .expect("a Deployment");
            Api::<Deployment>::namespaced(client.clone(), "default")
                .create(&PostParams::default(), &deployment)
                .await
                .map_err(kube_err("creating the Deployment"))?;
        }
        Backend::Sim => {
            for (name, node) in [("web-a", "gpu-1"), ("web-b", "gpu-2")] {
                let pod: Pod = serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"},
                        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                            "name": "web-5d8f", "uid": "0b7c1d2e-0000-4000-8000-000000000001",
                            "controller": true}]},
                    "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1,
                        "containers": [{"name": "web", "image": "registry.k8s.io/pause:3.10"}]}
                }))
                .expect("a Pod");
                Api::<Pod>::namespaced(client.clone(), "default")
                    .create(&PostParams::default(), &pod)
                    .await
                    .map_err(kube_err("creating a pod"))?;
            }
        }
    }
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}
    }))
    .expect("a PodDisruptionBudget");
    pdbs.create(&PostParams::default(), &pdb)
        .await
        .map_err(kube_err("creating the budget"))?;
    // Both pods running, and the budget's status computed (by the disruption
    // controller on the real cluster): 2 healthy, none allowed.
    e2e.poll(
        "two web pods running, the budget allowing none",
        async |c| {
            let pods = Api::<Pod>::namespaced(c.client.clone(), "default")
                .list(&ListParams::default().labels("app=web"))
                .await
                .map_err(kube_err("listing the web pods"))?;
            let running = pods
                .items
                .iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .count();
            let pdb = Api::<PodDisruptionBudget>::namespaced(c.client.clone(), "default")
                .get("web")
                .await
                .map_err(kube_err("reading the budget"))?;
            let status = pdb.status.unwrap_or_default();
            Ok((running == 2
                && status.current_healthy == Some(2)
                && status.disruptions_allowed == Some(0))
            .then_some(()))
        },
    )
    .await?;
    let before = web_pods(&e2e).await?;
    eprintln!("web pods by node before the change: {before:?}");

    // The drain-class change.
    let mut gpu = e2e.pool("gpu")?;
    gpu.qps = 22;
    gpu.rollout = vec!["drainTimeout: 10m".into()];
    gpu.classes = vec![("kubeAPIQPS".into(), "drain".into())];
    e2e.write_pool(&gpu)?;
    e2e.git()
        .commit_and_push("gpu: kubeAPIQPS 22, a drain-class change")
        .await?;
    // A pipeline waits on the rollout of what it merged: `kubelet-gitops status --wait
    // --commit` as an operator runs it, with the cluster's kubeconfig (the real API
    // server's admin, the sim's).
    let head = e2e.git().head().await?;
    let mut waiter = e2e.spawn_status(&[
        "--wait",
        "--commit",
        &head,
        "--timeout",
        "600s",
        "-o",
        "json",
    ])?;
    let targets = e2e.wait_applied().await?;
    let target = targets["gpu"].clone();
    assert_ne!(target, first.target("gpu"));

    // The budget holds the drain of the first gpu node that has a web pod: cordoned, not
    // assigned, the budget named in /readyz.
    let blocked = e2e
        .poll("a gpu node's drain held by the budget", async |c| {
            let r = c.readyz().await?;
            let pool = r["pools"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|p| p["pool"] == "gpu" && p["target"] == target.as_str())
                .cloned();
            Ok(pool.and_then(|p| {
                p["draining"]
                    .as_array()?
                    .iter()
                    .filter_map(|d| d.as_str())
                    .find(|d| d.contains("refused (PodDisruptionBudget)"))
                    .map(str::to_string)
            }))
        })
        .await?;
    eprintln!("held: {blocked}");
    assert!(
        blocked.contains("The disruption budget web needs 2 healthy pods"),
        "the budget's own words: {blocked}"
    );
    let node = blocked.split(':').next().unwrap_or_default().to_string();
    let nodes = e2e.nodes().await?;
    let held = &nodes[&node];
    assert!(held.unschedulable, "{node} is cordoned while it drains");
    assert_eq!(held.drain.as_deref(), Some(target.as_str()));
    assert_ne!(
        held.desired.as_deref(),
        Some(target.as_str()),
        "{node} is not assigned before it is empty"
    );
    assert!(
        !web_pods(&e2e)
            .await?
            .get(&node)
            .unwrap_or(&Vec::new())
            .is_empty(),
        "the budget kept {node}'s web pod"
    );

    assert!(
        waiter.try_wait().ok().flatten().is_none(),
        "status --wait returned while the budget holds the drain"
    );

    // The budget allows one disruption (the sim replaces no pod: it allows all).
    let relaxed = match backend {
        Backend::Real => json!({"spec": {"minAvailable": 1}}),
        Backend::Sim => json!({"spec": {"minAvailable": 0}}),
    };
    pdbs.patch("web", &PatchParams::default(), &Patch::Merge(&relaxed))
        .await
        .map_err(kube_err("relaxing the budget"))?;
    let done = e2e.wait_converged().await?;
    assert_eq!(done.target("gpu"), target);
    let (code, stdout, stderr) =
        E2e::status_exit(waiter, std::time::Duration::from_secs(60)).await?;
    assert_eq!(code, Some(0), "status --wait: {stdout}\n{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("status -o json");
    assert_eq!(report["appliedCommit"], head.as_str(), "{report}");
    let gpu_status = report["pools"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["pool"] == "gpu")
        .cloned()
        .unwrap_or_default();
    assert_eq!(gpu_status["phase"], "complete", "{report}");
    assert_eq!(gpu_status["configMap"], target.as_str(), "{report}");
    let history = e2e.recorder().history()?;
    for n in e2e.pool_nodes("gpu") {
        assert_eq!(
            steps(&history, &n, &target),
            ["cordon", "assign", "done", "uncordon"],
            "{n}"
        );
        assert_eq!(
            e2e.configz(&n).await?["kubeAPIQPS"],
            22,
            "{n} runs the change"
        );
    }
    let nodes = e2e.nodes().await?;
    for n in e2e.pool_nodes("gpu") {
        assert!(!nodes[&n].unschedulable, "{n} uncordoned");
        assert!(nodes[&n].drain.is_none(), "{n}: drain record cleared");
    }
    // The other pools' nodes were never cordoned.
    for v in history.iter().filter(|v| v.pool() != Some("gpu")) {
        assert!(!v.unschedulable, "{} cordoned", v.name);
    }
    if backend == Backend::Real {
        // The Deployment is whole again, on the uncordoned nodes.
        e2e.poll("the web Deployment available again", async |c| {
            let d = Api::<Deployment>::namespaced(c.client.clone(), "default")
                .get("web")
                .await
                .map_err(kube_err("reading the Deployment"))?;
            let available = d.status.and_then(|s| s.available_replicas).unwrap_or(0);
            Ok((available == 2).then_some(()))
        })
        .await?;
        eprintln!("web pods by node after: {:?}", web_pods(&e2e).await?);
    }
    e2e.finish().await
}
