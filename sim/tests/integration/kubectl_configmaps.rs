//! kubectl 1.32 against the sim for ConfigMaps (and the Namespace they live in):
//! create, get, describe, label, annotate, patch, delete and a bounded watch.

use std::time::Duration;

use crate::support::api::{Sim, kubectl_path, read_until};
use tokio::io::{AsyncBufReadExt, BufReader};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_configmaps() {
    let Some(k) = kubectl_path("kubectl_configmaps") else {
        return;
    };
    let sim = Sim::start().await;
    let file = sim.dir.path().join("objects.yaml");
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c1\n  namespace: x\ndata:\n  a: \"1\"\n  b: \"2\"\n",
    )
    .expect("write manifest");
    let out = sim
        .kubectl_ok(&k, &["create", "-f", &file.display().to_string()])
        .await;
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["namespace/x created", "configmap/c1 created"]
    );
    // kubectl's typed clients send protobuf bodies (create namespace/configmap/secret).
    assert_eq!(
        sim.kubectl_ok(&k, &["create", "namespace", "y"])
            .await
            .trim(),
        "namespace/y created"
    );
    let out = sim
        .kubectl_ok(
            &k,
            &[
                "create",
                "configmap",
                "typed",
                "-n",
                "y",
                "--from-literal=a=1",
                "--from-literal=b=two words",
            ],
        )
        .await;
    assert_eq!(out.trim(), "configmap/typed created");
    let typed = sim
        .get("/api/v1/namespaces/y/configmaps/typed")
        .await
        .json();
    assert_eq!(
        typed["data"],
        serde_json::json!({"a": "1", "b": "two words"})
    );
    assert!(
        typed["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| !u.is_empty())
    );
    let out = sim
        .kubectl_ok(
            &k,
            &[
                "create",
                "secret",
                "generic",
                "s",
                "-n",
                "y",
                "--from-literal=k=v",
            ],
        )
        .await;
    assert_eq!(out.trim(), "secret/s created");
    let secret = sim.get("/api/v1/namespaces/y/secrets/s").await.json();
    assert_eq!(secret["data"]["k"], "dg==");
    assert_eq!(secret["type"], "Opaque");

    let out = sim.kubectl_ok(&k, &["get", "ns", "x"]).await;
    assert!(
        out.lines()
            .nth(1)
            .is_some_and(|l| l.split_whitespace().take(2).eq(["x", "Active"])),
        "{out}"
    );

    let out = sim.kubectl_ok(&k, &["get", "cm", "-n", "x"]).await;
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0], ["NAME", "DATA", "AGE"], "{out}");
    assert_eq!(rows[1][0..2], ["c1", "2"], "{out}");

    let out = sim
        .kubectl_ok(
            &k,
            &["get", "cm", "c1", "-n", "x", "-o", "jsonpath={.data.a}"],
        )
        .await;
    assert_eq!(out, "1");
    let out = sim
        .kubectl_ok(&k, &["describe", "cm", "c1", "-n", "x"])
        .await;
    assert!(
        out.contains("Name:")
            && out.contains("c1")
            && out.contains("Namespace:")
            && out.contains("Data"),
        "{out}"
    );

    assert_eq!(
        sim.kubectl_ok(&k, &["label", "cm", "c1", "-n", "x", "pool=gpu"])
            .await
            .trim(),
        "configmap/c1 labeled"
    );
    assert_eq!(
        sim.kubectl_ok(&k, &["annotate", "cm", "c1", "-n", "x", "note=hi"])
            .await
            .trim(),
        "configmap/c1 annotated"
    );
    let out = sim
        .kubectl_ok(
            &k,
            &[
                "patch",
                "cm",
                "c1",
                "-n",
                "x",
                "--type",
                "merge",
                "-p",
                r#"{"data":{"c":"3"}}"#,
            ],
        )
        .await;
    assert_eq!(out.trim(), "configmap/c1 patched");
    let stored = sim.get("/api/v1/namespaces/x/configmaps/c1").await.json();
    assert_eq!(stored["metadata"]["labels"]["pool"], "gpu");
    assert_eq!(stored["metadata"]["annotations"]["note"], "hi");
    assert_eq!(stored["data"]["c"], "3");
    let out = sim
        .kubectl_ok(&k, &["get", "cm", "-n", "x", "--show-labels"])
        .await;
    assert!(out.contains("pool=gpu"), "{out}");

    // Bounded watch: an update and a new ConfigMap show up.
    let mut child = sim.kubectl_spawn(&k, &["get", "cm", "-n", "x", "--watch"]);
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    read_until(&mut lines, "c1", Duration::from_secs(20)).await;
    sim.kubectl_ok(
        &k,
        &["create", "configmap", "c2", "-n", "x", "--from-literal=z=1"],
    )
    .await;
    let seen = read_until(&mut lines, "c2", Duration::from_secs(20)).await;
    assert!(
        seen.last()
            .is_some_and(|l| l.split_whitespace().take(2).eq(["c2", "1"])),
        "{seen:?}"
    );
    child.kill().await.expect("stop kubectl");

    // Errors come back with the server's text.
    let out = sim.kubectl(&k, &["get", "cm", "missing", "-n", "x"]).await;
    assert!(!out.success);
    assert!(
        out.stderr
            .contains("Error from server (NotFound): configmaps \"missing\" not found"),
        "{}",
        out.stderr
    );
    let out = sim
        .kubectl(&k, &["create", "configmap", "c1", "-n", "x"])
        .await;
    // The typed client's wording (no "Error from server" prefix), as real kubectl prints it.
    assert!(!out.success);
    assert!(
        out.stderr
            .contains("failed to create configmap: configmaps \"c1\" already exists"),
        "{}",
        out.stderr
    );
    let out = sim
        .kubectl(&k, &["create", "configmap", "c3", "-n", "nope"])
        .await;
    assert!(
        out.stderr.contains("namespaces \"nope\" not found"),
        "{}",
        out.stderr
    );

    // Server-side and client-side apply.
    let applied = sim.dir.path().join("applied.yaml");
    std::fs::write(&applied, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\n  namespace: x\ndata:\n  k: one\n").expect("write");
    let out = sim
        .kubectl_ok(
            &k,
            &[
                "apply",
                "--server-side",
                "-f",
                &applied.display().to_string(),
            ],
        )
        .await;
    assert_eq!(out.trim(), "configmap/ssa serverside-applied");
    std::fs::write(&applied, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\n  namespace: x\ndata:\n  k: two\n").expect("write");
    sim.kubectl_ok(
        &k,
        &[
            "apply",
            "--server-side",
            "-f",
            &applied.display().to_string(),
        ],
    )
    .await;
    assert_eq!(
        sim.get("/api/v1/namespaces/x/configmaps/ssa").await.json()["data"]["k"],
        "two"
    );
    let csa = sim.dir.path().join("csa.yaml");
    std::fs::write(&csa, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: csa\n  namespace: x\ndata:\n  k: one\n").expect("write");
    assert_eq!(
        sim.kubectl_ok(&k, &["apply", "-f", &csa.display().to_string()])
            .await
            .trim(),
        "configmap/csa created"
    );
    std::fs::write(&csa, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: csa\n  namespace: x\ndata:\n  k: two\n").expect("write");
    assert_eq!(
        sim.kubectl_ok(&k, &["apply", "-f", &csa.display().to_string()])
            .await
            .trim(),
        "configmap/csa configured"
    );
    assert_eq!(
        sim.get("/api/v1/namespaces/x/configmaps/csa").await.json()["data"]["k"],
        "two"
    );

    let out = sim.kubectl_ok(&k, &["delete", "cm", "c1", "-n", "x"]).await;
    assert_eq!(out.trim(), "configmap \"c1\" deleted");
    assert_eq!(
        sim.get("/api/v1/namespaces/x/configmaps/c1").await.status,
        404
    );
    assert!(sim.server.log.count("delete", "configmaps") == 1);
}
