//! Watch: the chunked newline-delimited stream, resourceVersion semantics, bookmarks,
//! 410 for a too old resourceVersion, timeoutSeconds, and kube-runtime's watcher.

use std::time::Duration;

use crate::support::api::{RawWatch, Sim, configmap, node};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, PartialObjectMeta, Patch, PatchParams};
use kube::runtime::watcher;
use kubelet_gitops_sim::faults::FaultConfig;
use kubelet_gitops_sim::store::Store;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(10);

async fn label(sim: &Sim, name: &str, value: &str) -> String {
    let r = sim
        .send_json(
            "PATCH",
            &format!("/api/v1/nodes/{name}"),
            "application/merge-patch+json",
            &json!({"metadata": {"labels": {"step": value}}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_string()
}

#[tokio::test]
async fn raw_watch_stream_is_chunked_json_lines() {
    let sim = Sim::start().await;
    sim.send_json("POST", "/api/v1/nodes", "application/json", &node("n1"))
        .await;
    let mut w = RawWatch::open(
        sim.addr(),
        "/api/v1/nodes?watch=true&timeoutSeconds=30",
        &[],
    )
    .await;
    assert_eq!(w.status, 200);
    assert_eq!(w.header("transfer-encoding"), Some("chunked"));
    assert_eq!(w.header("content-type"), Some("application/json"));
    // Without a resourceVersion: the current state first, as ADDED.
    let ev = w.next_event(WAIT).await.expect("initial ADDED");
    assert_eq!(ev["type"], "ADDED");
    assert_eq!(ev["object"]["kind"], "Node");
    assert_eq!(ev["object"]["metadata"]["name"], "n1");
    let rv = label(&sim, "n1", "one").await;
    let ev = w.next_event(WAIT).await.expect("MODIFIED");
    assert_eq!(ev["type"], "MODIFIED");
    assert_eq!(ev["object"]["metadata"]["resourceVersion"], rv.as_str());
    assert_eq!(ev["object"]["metadata"]["labels"]["step"], "one");
    let r = sim.raw("DELETE", "/api/v1/nodes/n1", &[], None).await;
    assert_eq!(r.status, 200);
    let ev = w.next_event(WAIT).await.expect("DELETED");
    assert_eq!(ev["type"], "DELETED");
    assert_eq!(sim.server.log.count("watch", "nodes"), 1);
}

#[tokio::test]
async fn watch_from_resource_version_and_timeout() {
    let sim = Sim::start().await;
    sim.send_json("POST", "/api/v1/nodes", "application/json", &node("n1"))
        .await;
    let rv1 = label(&sim, "n1", "one").await;
    let _rv2 = label(&sim, "n1", "two").await;
    // From rv1: only what happened after it.
    let mut w = RawWatch::open(
        sim.addr(),
        &format!("/api/v1/nodes?watch=1&resourceVersion={rv1}&timeoutSeconds=1"),
        &[],
    )
    .await;
    let ev = w.next_event(WAIT).await.expect("event after rv1");
    assert_eq!(ev["type"], "MODIFIED");
    assert_eq!(ev["object"]["metadata"]["labels"]["step"], "two");
    // timeoutSeconds=1: the server closes the stream.
    assert!(
        w.ended_within(Duration::from_secs(5)).await,
        "stream closed after timeoutSeconds"
    );

    // A watch on one object's path, and on a field selector, sees only that object.
    sim.send_json("POST", "/api/v1/nodes", "application/json", &node("n2"))
        .await;
    let mut w = RawWatch::open(
        sim.addr(),
        "/api/v1/nodes?watch=true&fieldSelector=metadata.name%3Dn2&timeoutSeconds=5",
        &[],
    )
    .await;
    let ev = w.next_event(WAIT).await.expect("ADDED n2");
    assert_eq!(ev["object"]["metadata"]["name"], "n2");
    label(&sim, "n1", "three").await;
    label(&sim, "n2", "three").await;
    let ev = w.next_event(WAIT).await.expect("MODIFIED n2");
    assert_eq!(ev["object"]["metadata"]["name"], "n2");
    assert_eq!(ev["type"], "MODIFIED");
}

#[tokio::test]
async fn too_old_resource_version_is_410_expired() {
    let sim = Sim::start_with_store(Store::with_history(5), FaultConfig::default()).await;
    let r = sim
        .send_json("POST", "/api/v1/nodes", "application/json", &node("n1"))
        .await;
    let first_rv = r.json()["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_string();
    for i in 0..20 {
        label(&sim, "n1", &format!("s{i}")).await;
    }
    let mut w = RawWatch::open(
        sim.addr(),
        &format!("/api/v1/nodes?watch=true&resourceVersion={first_rv}"),
        &[],
    )
    .await;
    assert_eq!(
        w.status, 200,
        "the real server reports 410 inside the stream"
    );
    let ev = w.next_event(WAIT).await.expect("ERROR event");
    assert_eq!(ev["type"], "ERROR");
    assert_eq!(ev["object"]["kind"], "Status");
    assert_eq!(ev["object"]["code"], 410);
    assert_eq!(ev["object"]["reason"], "Expired");
    assert!(
        ev["object"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("too old resource version")),
        "{ev}"
    );
}

#[tokio::test]
async fn bookmarks_and_initial_events_end() {
    let sim = Sim::start().await;
    sim.send_json("POST", "/api/v1/nodes", "application/json", &node("n1"))
        .await;
    sim.send_json("POST", "/api/v1/nodes", "application/json", &node("n2"))
        .await;
    let mut w = RawWatch::open(
        sim.addr(),
        "/api/v1/nodes?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=10",
        &[],
    )
    .await;
    assert_eq!(w.status, 200);
    let mut added = Vec::new();
    let bookmark = loop {
        let ev = w.next_event(WAIT).await.expect("event");
        match ev["type"].as_str() {
            Some("ADDED") => added.push(
                ev["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            ),
            Some("BOOKMARK") => break ev,
            other => panic!("unexpected {other:?}: {ev}"),
        }
    };
    added.sort();
    assert_eq!(added, ["n1", "n2"]);
    assert_eq!(
        bookmark["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert!(
        bookmark["object"]["metadata"]["resourceVersion"]
            .as_str()
            .is_some_and(|r| !r.is_empty())
    );
}

#[tokio::test]
async fn kube_runtime_watcher_on_one_node() {
    let sim = Sim::start().await;
    sim.send_json("POST", "/api/v1/nodes", "application/json", &node("n1"))
        .await;
    sim.send_json("POST", "/api/v1/nodes", "application/json", &node("n2"))
        .await;
    let nodes: Api<Node> = Api::all(sim.client().await);
    let mut stream = watcher(
        nodes.clone(),
        watcher::Config::default().fields("metadata.name=n1"),
    )
    .boxed();
    let mut seen_init = Vec::new();
    loop {
        let ev = tokio::time::timeout(WAIT, stream.try_next())
            .await
            .expect("in time")
            .expect("no error")
            .expect("event");
        match ev {
            watcher::Event::InitApply(n) => seen_init.push(n.metadata.name.unwrap_or_default()),
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(seen_init, ["n1"]);
    nodes
        .patch(
            "n2",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "ignored"}}})),
        )
        .await
        .expect("patch n2");
    nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"kubelet-gitops.io/desired": "abc"}}}),
            ),
        )
        .await
        .expect("patch n1");
    let ev = tokio::time::timeout(WAIT, stream.try_next())
        .await
        .expect("in time")
        .expect("ok")
        .expect("event");
    match ev {
        watcher::Event::Apply(n) => {
            assert_eq!(n.metadata.name.as_deref(), Some("n1"));
            assert_eq!(
                n.metadata
                    .annotations
                    .unwrap_or_default()
                    .get("kubelet-gitops.io/desired")
                    .map(String::as_str),
                Some("abc")
            );
        }
        other => panic!("expected Apply of n1, got {other:?}"),
    }
    // The watcher listed and then watched, both recorded.
    assert!(sim.server.log.count("list", "nodes") >= 1);
    assert!(sim.server.log.count("watch", "nodes") >= 1);
}

#[tokio::test]
async fn metadata_watcher_and_configmap_watch_in_namespace() {
    let sim = Sim::start().await;
    let client = sim.client().await;
    let nodes: Api<PartialObjectMeta<Node>> = Api::all(client.clone());
    sim.send_json("POST", "/api/v1/nodes", "application/json", &node("n1"))
        .await;
    let mut stream = watcher(nodes, watcher::Config::default()).boxed();
    loop {
        let ev = tokio::time::timeout(WAIT, stream.try_next())
            .await
            .expect("in time")
            .expect("ok")
            .expect("event");
        if matches!(ev, watcher::Event::InitDone) {
            break;
        }
    }
    label(&sim, "n1", "meta").await;
    let ev = tokio::time::timeout(WAIT, stream.try_next())
        .await
        .expect("in time")
        .expect("ok")
        .expect("event");
    match ev {
        watcher::Event::Apply(m) => {
            assert_eq!(
                m.metadata
                    .labels
                    .unwrap_or_default()
                    .get("step")
                    .map(String::as_str),
                Some("meta")
            );
        }
        other => panic!("expected Apply, got {other:?}"),
    }

    // Raw metadata watch: objects are PartialObjectMetadata.
    let mut w = RawWatch::open(
        sim.addr(),
        "/api/v1/namespaces/kube-system/configmaps?watch=true&timeoutSeconds=5",
        &[(
            "Accept",
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        )],
    )
    .await;
    assert_eq!(w.status, 200);
    sim.send_json(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        &configmap("default", "other", &[]),
    )
    .await;
    sim.send_json(
        "POST",
        "/api/v1/namespaces/kube-system/configmaps",
        "application/json",
        &configmap("kube-system", "mine", &[("k", "v")]),
    )
    .await;
    let ev = w.next_event(WAIT).await.expect("ADDED in kube-system");
    assert_eq!(ev["type"], "ADDED");
    assert_eq!(ev["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(ev["object"]["metadata"]["name"], "mine");
    assert!(ev["object"].get("data").is_none());
}

#[tokio::test]
async fn table_watch_for_kubectl() {
    let sim = Sim::start().await;
    sim.send_json("POST", "/api/v1/nodes", "application/json", &node("n1"))
        .await;
    let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    let mut w = RawWatch::open(
        sim.addr(),
        "/api/v1/nodes?watch=true&timeoutSeconds=5",
        &[("Accept", accept)],
    )
    .await;
    let ev = w.next_event(WAIT).await.expect("ADDED");
    assert_eq!(ev["object"]["kind"], "Table");
    assert_eq!(ev["object"]["rows"][0]["cells"][0], "n1");
    assert!(
        ev["object"]["columnDefinitions"]
            .as_array()
            .is_some_and(|c| !c.is_empty())
    );
    label(&sim, "n1", "t").await;
    let ev = w.next_event(WAIT).await.expect("MODIFIED");
    assert_eq!(ev["type"], "MODIFIED");
    assert_eq!(ev["object"]["rows"][0]["cells"][1], "Ready");
}

#[tokio::test]
async fn shutdown_ends_open_watches() {
    let sim = Sim::start().await;
    let mut w = RawWatch::open(sim.addr(), "/api/v1/nodes?watch=true", &[]).await;
    assert_eq!(w.status, 200);
    let Sim {
        server, dir: _dir, ..
    } = sim;
    let started = std::time::Instant::now();
    server.shutdown().await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "graceful stop does not wait for watch timeouts"
    );
    assert!(w.ended_within(Duration::from_secs(5)).await);
}
