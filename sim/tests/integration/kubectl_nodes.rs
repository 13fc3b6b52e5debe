//! kubectl 1.32 against the sim: get (table, wide, yaml, jsonpath), describe, label,
//! annotate, patch (strategic, merge, json, status subresource) and a bounded watch of
//! Nodes, asserting on kubectl's output and on the stored objects.

use std::time::Duration;

use crate::support::api::{Sim, kubectl_path, node, read_until};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

async fn node_json(sim: &Sim, name: &str) -> serde_json::Value {
    let r = sim.get(&format!("/api/v1/nodes/{name}")).await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_describe_nodes() {
    let Some(k) = kubectl_path("kubectl_get_describe_nodes") else {
        return;
    };
    let sim = Sim::start().await;
    let mut cp = node("cp-1");
    cp["metadata"]["labels"]["node-role.kubernetes.io/control-plane"] = json!("");
    sim.send_json("POST", "/api/v1/nodes", "application/json", &cp)
        .await;
    sim.send_json("POST", "/api/v1/nodes", "application/json", &node("n1"))
        .await;

    let out = sim.kubectl_ok(&k, &["get", "nodes"]).await;
    let lines: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines[0],
        ["NAME", "STATUS", "ROLES", "AGE", "VERSION"],
        "{out}"
    );
    assert_eq!(lines.len(), 3, "{out}");
    assert_eq!(lines[1][0..3], ["cp-1", "Ready", "control-plane"]);
    assert_eq!(lines[1][4], "v1.36.0");
    assert_eq!(lines[2][0..3], ["n1", "Ready", "<none>"]);

    let out = sim.kubectl_ok(&k, &["get", "nodes", "-o", "wide"]).await;
    assert!(
        out.lines()
            .next()
            .is_some_and(|h| h.contains("INTERNAL-IP") && h.contains("CONTAINER-RUNTIME")),
        "{out}"
    );
    assert!(
        out.contains("10.0.0.1") && out.contains("containerd://2.1.0"),
        "{out}"
    );

    let out = sim
        .kubectl_ok(&k, &["get", "node", "n1", "-o", "yaml"])
        .await;
    let doc: serde_json::Value = serde_saphyr::from_str(&out).expect("kubectl yaml parses");
    assert_eq!(doc["kind"], "Node");
    assert_eq!(doc["apiVersion"], "v1");
    assert_eq!(doc["metadata"]["name"], "n1");
    assert_eq!(
        doc["metadata"]["uid"],
        node_json(&sim, "n1").await["metadata"]["uid"]
    );

    let out = sim
        .kubectl_ok(
            &k,
            &[
                "get",
                "no",
                "n1",
                "-o",
                "jsonpath={.status.nodeInfo.kubeletVersion}",
            ],
        )
        .await;
    assert_eq!(out, "v1.36.0");

    let out = sim
        .kubectl_ok(
            &k,
            &[
                "get",
                "nodes",
                "-l",
                "node-role.kubernetes.io/control-plane",
                "-o",
                "name",
            ],
        )
        .await;
    assert_eq!(out.trim(), "node/cp-1");

    let out = sim.kubectl_ok(&k, &["describe", "node", "n1"]).await;
    assert!(
        out.lines()
            .any(|l| l.starts_with("Name:") && l.ends_with(" n1")),
        "{out}"
    );
    assert!(
        out.contains("Conditions:") && out.contains("KubeletReady"),
        "{out}"
    );
    assert!(
        out.contains("Kubelet Version:") && out.contains("v1.36.0"),
        "{out}"
    );

    // Nothing kubectl asked for was refused as malformed or unsupported.
    let refused: Vec<_> = sim
        .server
        .log
        .entries()
        .into_iter()
        .filter(|e| e.status >= 400 && e.status != 404)
        .collect();
    assert!(refused.is_empty(), "{refused:?}");

    let out = sim.kubectl(&k, &["get", "node", "ghost"]).await;
    assert!(!out.success);
    assert!(
        out.stderr
            .contains("Error from server (NotFound): nodes \"ghost\" not found"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_label_annotate_patch_nodes() {
    let Some(k) = kubectl_path("kubectl_label_annotate_patch_nodes") else {
        return;
    };
    let sim = Sim::start().await;
    sim.send_json("POST", "/api/v1/nodes", "application/json", &node("n1"))
        .await;

    let out = sim
        .kubectl_ok(&k, &["label", "node", "n1", "pool=gpu"])
        .await;
    assert_eq!(out.trim(), "node/n1 labeled");
    assert_eq!(
        node_json(&sim, "n1").await["metadata"]["labels"]["pool"],
        "gpu"
    );
    let out = sim.kubectl(&k, &["label", "node", "n1", "pool=cpu"]).await;
    assert!(!out.success, "relabel without --overwrite fails");
    assert!(
        out.stderr.contains("already has a value (gpu)"),
        "{}",
        out.stderr
    );
    sim.kubectl_ok(&k, &["label", "node", "n1", "pool=cpu", "--overwrite"])
        .await;
    assert_eq!(
        node_json(&sim, "n1").await["metadata"]["labels"]["pool"],
        "cpu"
    );
    let out = sim.kubectl_ok(&k, &["label", "node", "n1", "pool-"]).await;
    assert_eq!(out.trim(), "node/n1 unlabeled");
    assert!(
        node_json(&sim, "n1").await["metadata"]["labels"]
            .get("pool")
            .is_none()
    );
    let out = sim.kubectl(&k, &["label", "node", "n1", "bad key=x"]).await;
    assert!(!out.success);

    let out = sim
        .kubectl_ok(
            &k,
            &[
                "annotate",
                "node",
                "n1",
                "kubelet-gitops.io/desired=kube-system/kubelet-gpu-abc",
            ],
        )
        .await;
    assert_eq!(out.trim(), "node/n1 annotated");
    assert_eq!(
        node_json(&sim, "n1").await["metadata"]["annotations"]["kubelet-gitops.io/desired"],
        "kube-system/kubelet-gpu-abc"
    );

    let out = sim
        .kubectl_ok(
            &k,
            &[
                "patch",
                "node",
                "n1",
                "-p",
                r#"{"metadata":{"labels":{"strategic":"yes"}}}"#,
            ],
        )
        .await;
    assert_eq!(out.trim(), "node/n1 patched");
    let out = sim
        .kubectl_ok(
            &k,
            &[
                "patch",
                "node",
                "n1",
                "--type",
                "merge",
                "-p",
                r#"{"spec":{"unschedulable":true}}"#,
            ],
        )
        .await;
    assert_eq!(out.trim(), "node/n1 patched");
    let out = sim
        .kubectl_ok(
            &k,
            &[
                "patch",
                "node",
                "n1",
                "--type",
                "json",
                "-p",
                r#"[{"op":"add","path":"/metadata/labels/json","value":"yes"}]"#,
            ],
        )
        .await;
    assert_eq!(out.trim(), "node/n1 patched");
    let patched = node_json(&sim, "n1").await;
    assert_eq!(patched["metadata"]["labels"]["strategic"], "yes");
    assert_eq!(patched["metadata"]["labels"]["json"], "yes");
    assert_eq!(patched["spec"]["unschedulable"], true);
    let out = sim.kubectl_ok(&k, &["get", "node", "n1"]).await;
    assert!(out.contains("Ready,SchedulingDisabled"), "{out}");

    // Status subresource, strategic: conditions merge by type.
    let cond = r#"{"status":{"conditions":[{"type":"KubeletConfigApplied","status":"True","reason":"Applied","message":"ok","lastHeartbeatTime":"2026-01-01T00:00:00Z","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}"#;
    let out = sim
        .kubectl_ok(
            &k,
            &["patch", "node", "n1", "--subresource=status", "-p", cond],
        )
        .await;
    assert_eq!(out.trim(), "node/n1 patched");
    let types: Vec<String> = node_json(&sim, "n1").await["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["type"].as_str().map(String::from))
        .collect();
    // A new condition goes first, as a v1.36 server merges it (tests/tests/api_parity.rs).
    assert_eq!(types, ["KubeletConfigApplied", "Ready"]);

    // A patch that no-ops is reported as such.
    let out = sim
        .kubectl_ok(
            &k,
            &[
                "patch",
                "node",
                "n1",
                "-p",
                r#"{"metadata":{"labels":{"strategic":"yes"}}}"#,
            ],
        )
        .await;
    assert_eq!(out.trim(), "node/n1 patched (no change)");

    assert!(sim.server.log.count("patch", "nodes") >= 8);
    assert_eq!(sim.server.log.count("patch", "nodes/status"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_watch_nodes() {
    let Some(k) = kubectl_path("kubectl_watch_nodes") else {
        return;
    };
    let sim = Sim::start().await;
    sim.send_json("POST", "/api/v1/nodes", "application/json", &node("n1"))
        .await;
    let mut child = sim.kubectl_spawn(&k, &["get", "nodes", "--watch", "--output-watch-events"]);
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let first = read_until(&mut lines, "n1", Duration::from_secs(20)).await;
    assert!(
        first
            .iter()
            .any(|l| l.contains("EVENT") && l.contains("NAME") && l.contains("STATUS")),
        "{first:?}"
    );
    // A change shows up as a MODIFIED row; a new node as ADDED.
    sim.send_json(
        "PATCH",
        "/api/v1/nodes/n1",
        "application/merge-patch+json",
        &json!({"spec": {"unschedulable": true}}),
    )
    .await;
    let seen = read_until(&mut lines, "SchedulingDisabled", Duration::from_secs(20)).await;
    assert!(
        seen.last()
            .is_some_and(|l| l.starts_with("MODIFIED") && l.contains("n1")),
        "{seen:?}"
    );
    sim.send_json("POST", "/api/v1/nodes", "application/json", &node("n2"))
        .await;
    let seen = read_until(&mut lines, "n2", Duration::from_secs(20)).await;
    assert!(
        seen.last().is_some_and(|l| l.starts_with("ADDED")),
        "{seen:?}"
    );
    child.kill().await.expect("stop kubectl");
    assert!(sim.server.log.count("watch", "nodes") >= 1);
}
