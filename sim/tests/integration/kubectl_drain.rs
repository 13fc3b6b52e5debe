//! Draining a node against the sim: Pods written and listed by node, a
//! PodDisruptionBudget the sim keeps the status of, the eviction subresource over raw
//! HTTP (its status codes and bodies), and kubectl 1.32's `cordon`, `uncordon` and
//! `drain --ignore-daemonsets` end to end: blocked by the budget (kubectl retries the
//! 429s until its timeout), then done once the budget is relaxed, leaving the DaemonSet's
//! pod and the mirror pod.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::api::{RawWatch, Sim, kubectl_path, node};

fn pod(ns: &str, name: &str, node: &str, labels: Value, owner: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels, "ownerReferences": [owner]},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
        },
    })
}

fn replica_set_owner() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f", "uid": "0b7c1d2e-0000-4000-8000-000000000001",
           "controller": true, "blockOwnerDeletion": true})
}

async fn post(sim: &Sim, path: &str, body: &Value) -> Value {
    let r = sim.send_json("POST", path, "application/json", body).await;
    assert_eq!(r.status, 201, "POST {path}: {}", r.text());
    r.json()
}

/// Nodes n1 and n2; on n1 two pods of a ReplicaSet (`app=web`), a DaemonSet's pod and a
/// mirror pod; on n2 a third `app=web` pod.
async fn cluster(sim: &Sim) {
    for n in ["n1", "n2"] {
        post(sim, "/api/v1/nodes", &node(n)).await;
    }
    let ds = post(
        sim,
        "/apis/apps/v1/namespaces/kube-system/daemonsets",
        &json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
                "spec": {"selector": {"matchLabels": {"app": "agent"}},
                         "template": {"metadata": {"labels": {"app": "agent"}},
                                      "spec": {"containers": [{"name": "agent", "image": "registry.k8s.io/pause:3.10"}]}}}}),
    )
    .await;
    let pods = "/api/v1/namespaces/default/pods";
    for (name, node) in [("web-0", "n1"), ("web-1", "n1"), ("web-2", "n2")] {
        post(
            sim,
            pods,
            &pod(
                "default",
                name,
                node,
                json!({"app": "web"}),
                replica_set_owner(),
            ),
        )
        .await;
    }
    let ds_owner = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent",
                          "uid": ds["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true});
    post(
        sim,
        "/api/v1/namespaces/kube-system/pods",
        &pod(
            "kube-system",
            "agent-n1",
            "n1",
            json!({"app": "agent"}),
            ds_owner,
        ),
    )
    .await;
    let n1 = sim.get("/api/v1/nodes/n1").await.json();
    let node_owner = json!({"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": n1["metadata"]["uid"], "controller": true});
    let mut mirror = pod(
        "kube-system",
        "etcd-n1",
        "n1",
        json!({"component": "etcd"}),
        node_owner,
    );
    mirror["metadata"]["annotations"] =
        json!({"kubernetes.io/config.mirror": "3f2a", "kubernetes.io/config.source": "file"});
    post(sim, "/api/v1/namespaces/kube-system/pods", &mirror).await;
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|p| {
            format!(
                "{}/{}",
                p["metadata"]["namespace"].as_str().unwrap_or(""),
                p["metadata"]["name"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_by_node_budgets_and_evictions_over_http() {
    let sim = Sim::start().await;
    cluster(&sim).await;

    // What kubectl drain and our drain list: a node's pods across namespaces.
    let r = sim
        .get("/api/v1/pods?fieldSelector=spec.nodeName%3Dn1")
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        names(&r.json()),
        [
            "default/web-0",
            "default/web-1",
            "kube-system/agent-n1",
            "kube-system/etcd-n1"
        ]
    );
    let r = sim
        .get("/api/v1/pods?fieldSelector=spec.nodeName%3Dn1&labelSelector=app%3Dweb")
        .await;
    assert_eq!(names(&r.json()), ["default/web-0", "default/web-1"]);
    let web0 = sim
        .get("/api/v1/namespaces/default/pods/web-0")
        .await
        .json();
    assert_eq!(web0["status"]["phase"], "Running");
    assert_eq!(web0["metadata"]["ownerReferences"][0]["kind"], "ReplicaSet");
    assert_eq!(web0["spec"]["nodeName"], "n1");
    let r = sim
        .send_json(
            "POST",
            "/api/v1/namespaces/default/pods",
            "application/json",
            &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad"}, "spec": {}}),
        )
        .await;
    assert_eq!(r.status, 422);
    assert_eq!(
        r.json()["message"],
        "Pod \"bad\" is invalid: spec.containers: Required value"
    );

    // A budget that allows no disruption: 3 healthy, 3 wanted.
    let pdb = post(
        &sim,
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
        &json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
                "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "web"}}}}),
    )
    .await;
    assert_eq!(pdb["metadata"]["generation"], 1);
    let pdb_path = "/apis/policy/v1/namespaces/default/poddisruptionbudgets/web";
    let status = sim.get(pdb_path).await.json()["status"].clone();
    assert_eq!(
        (
            &status["currentHealthy"],
            &status["desiredHealthy"],
            &status["expectedPods"],
            &status["disruptionsAllowed"],
            &status["observedGeneration"]
        ),
        (&json!(3), &json!(3), &json!(3), &json!(0), &json!(1))
    );
    assert_eq!(status["conditions"][0]["reason"], "InsufficientPods");

    let eviction = |name: &str| json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "default"}});
    let evict_path = |name: &str| format!("/api/v1/namespaces/default/pods/{name}/eviction");
    let r = sim
        .send_json(
            "POST",
            &evict_path("web-0"),
            "application/json",
            &eviction("web-0"),
        )
        .await;
    assert_eq!(r.status, 429, "{}", r.text());
    assert_eq!(r.header("retry-after"), None);
    assert_eq!(
        r.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "Cannot evict pod as it would violate the pod's disruption budget.",
               "reason": "TooManyRequests",
               "details": {"causes": [{"reason": "DisruptionBudget",
                   "message": "The disruption budget web needs 3 healthy pods and has 3 currently"}]},
               "code": 429})
    );
    let r = sim
        .send_json(
            "POST",
            &evict_path("nope"),
            "application/json",
            &eviction("nope"),
        )
        .await;
    assert_eq!(
        (r.status, r.json()["message"].clone()),
        (404, json!("pods \"nope\" not found"))
    );
    let r = sim
        .send_json(
            "POST",
            &evict_path("web-0"),
            "application/json",
            &eviction("web-1"),
        )
        .await;
    assert_eq!(r.status, 400);

    // Relaxed: one may go. A dry run changes nothing; the eviction itself answers 201.
    let r = sim
        .send_json(
            "PATCH",
            pdb_path,
            "application/merge-patch+json",
            &json!({"spec": {"minAvailable": 2}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = sim
        .send_json(
            "POST",
            &format!("{}?dryRun=All", evict_path("web-0")),
            "application/json",
            &eviction("web-0"),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(
        sim.get(pdb_path).await.json()["status"]["disruptionsAllowed"],
        1
    );
    let mut watch = RawWatch::open(
        sim.addr(),
        "/api/v1/pods?watch=true&fieldSelector=spec.nodeName%3Dn1&labelSelector=app%3Dweb&resourceVersion=0",
        &[],
    )
    .await;
    for _ in 0..2 {
        let ev = watch
            .next_event(Duration::from_secs(5))
            .await
            .expect("initial event");
        assert_eq!(ev["type"], "ADDED");
    }
    let r = sim
        .send_json(
            "POST",
            &evict_path("web-0"),
            "application/json",
            &eviction("web-0"),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
    );
    // Terminating for its grace period (1 s), then gone.
    let ev = watch
        .next_event(Duration::from_secs(5))
        .await
        .expect("condition");
    assert_eq!(ev["type"], "MODIFIED");
    let ev = watch
        .next_event(Duration::from_secs(5))
        .await
        .expect("terminating");
    assert_eq!(ev["type"], "MODIFIED");
    assert!(
        ev["object"]["metadata"]["deletionTimestamp"].is_string(),
        "{ev}"
    );
    let status = sim.get(pdb_path).await.json()["status"].clone();
    assert_eq!(
        (&status["currentHealthy"], &status["disruptionsAllowed"]),
        (&json!(2), &json!(0))
    );
    let ev = watch
        .next_event(Duration::from_secs(5))
        .await
        .expect("deleted");
    assert_eq!(ev["type"], "DELETED");
    assert_eq!(ev["object"]["metadata"]["name"], "web-0");
    assert_eq!(
        sim.get("/api/v1/namespaces/default/pods/web-0")
            .await
            .status,
        404
    );

    // Two budgets over one pod: upstream's Failure Status with code 500, in a 201.
    post(
        &sim,
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
        &json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "all"},
                "spec": {"maxUnavailable": "50%", "selector": {}}}),
    )
    .await;
    let r = sim
        .send_json(
            "POST",
            &evict_path("web-1"),
            "application/json",
            &eviction("web-1"),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let body = r.json();
    assert_eq!(
        (&body["status"], &body["code"]),
        (&json!("Failure"), &json!(500))
    );
    assert_eq!(
        body["message"],
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_cordon_and_drain_with_a_budget() {
    let Some(k) = kubectl_path("kubectl_cordon_and_drain_with_a_budget") else {
        return;
    };
    let sim = Sim::start().await;
    cluster(&sim).await;
    let out = sim
        .kubectl_ok(
            &k,
            &[
                "get",
                "pods",
                "-A",
                "-o",
                "wide",
                "--field-selector",
                "spec.nodeName=n1",
            ],
        )
        .await;
    assert_eq!(out.lines().count(), 5, "{out}");
    assert!(
        out.lines()
            .skip(1)
            .all(|l| l.contains("Running") && l.contains("1/1")),
        "{out}"
    );

    let manifest = sim.dir.path().join("pdb.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: web\n  namespace: default\nspec:\n  minAvailable: 3\n  selector:\n    matchLabels:\n      app: web\n",
    )
    .expect("manifest");
    let out = sim
        .kubectl_ok(&k, &["apply", "-f", manifest.to_str().expect("utf-8")])
        .await;
    assert_eq!(out.trim(), "poddisruptionbudget.policy/web created");
    let out = sim.kubectl_ok(&k, &["get", "pdb", "-n", "default"]).await;
    let row: Vec<&str> = out
        .lines()
        .nth(1)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(row[..4], ["web", "3", "N/A", "0"], "{out}");

    // cordon and uncordon: spec.unschedulable.
    let out = sim.kubectl_ok(&k, &["cordon", "n1"]).await;
    assert_eq!(out.trim(), "node/n1 cordoned");
    assert_eq!(
        sim.get("/api/v1/nodes/n1").await.json()["spec"]["unschedulable"],
        true
    );
    let out = sim.kubectl_ok(&k, &["get", "node", "n1"]).await;
    assert!(out.contains("Ready,SchedulingDisabled"), "{out}");
    let out = sim.kubectl_ok(&k, &["uncordon", "n1"]).await;
    assert_eq!(out.trim(), "node/n1 uncordoned");
    assert!(
        sim.get("/api/v1/nodes/n1").await.json()["spec"]
            .get("unschedulable")
            .is_none()
    );

    // The budget blocks: kubectl retries the 429s until its timeout.
    let out = sim
        .kubectl(&k, &["drain", "n1", "--ignore-daemonsets", "--timeout=7s"])
        .await;
    assert!(!out.success, "{out:?}");
    assert!(out.stdout.contains("node/n1 cordoned"), "{out:?}");
    assert!(
        out.stderr
            .contains("Warning: ignoring DaemonSet-managed Pods: kube-system/agent-n1"),
        "{out:?}"
    );
    assert!(
        out.stderr.contains(
            "error when evicting pods/\"web-0\" -n \"default\" (will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget."
        ),
        "{out:?}"
    );
    assert!(out.stderr.contains("global timeout reached: 7s"), "{out:?}");
    assert_eq!(
        sim.get("/api/v1/namespaces/default/pods/web-0")
            .await
            .status,
        200
    );
    assert_eq!(
        sim.get("/api/v1/nodes/n1").await.json()["spec"]["unschedulable"],
        true
    );

    // Relaxed to one: both of n1's web pods may go (web-2 on n2 stays).
    sim.kubectl_ok(
        &k,
        &[
            "patch",
            "pdb",
            "web",
            "-n",
            "default",
            "--type=merge",
            "-p",
            r#"{"spec":{"minAvailable":1}}"#,
        ],
    )
    .await;
    let out = sim
        .kubectl(&k, &["drain", "n1", "--ignore-daemonsets", "--timeout=30s"])
        .await;
    assert!(out.success, "{out:?}");
    for expected in ["pod/web-0 evicted", "pod/web-1 evicted", "node/n1 drained"] {
        assert!(out.stdout.contains(expected), "{expected}: {out:?}");
    }
    assert!(
        !out.stdout.contains("etcd-n1") && !out.stdout.contains("agent-n1"),
        "{out:?}"
    );
    let left = sim
        .get("/api/v1/pods?fieldSelector=spec.nodeName%3Dn1")
        .await
        .json();
    assert_eq!(
        names(&left),
        ["kube-system/agent-n1", "kube-system/etcd-n1"]
    );
    let status = sim
        .get("/apis/policy/v1/namespaces/default/poddisruptionbudgets/web")
        .await
        .json()["status"]
        .clone();
    assert_eq!(
        (
            &status["currentHealthy"],
            &status["expectedPods"],
            &status["disruptionsAllowed"]
        ),
        (&json!(1), &json!(1), &json!(0))
    );
    let out = sim.kubectl_ok(&k, &["uncordon", "n1"]).await;
    assert_eq!(out.trim(), "node/n1 uncordoned");
}
