//! get, list, create, update, patch and delete of Nodes and ConfigMaps through a real
//! `kube::Client` built from the sim's kubeconfig, and through raw HTTP where the exact
//! status code, headers or message matter.

use crate::support::api::{Sim, configmap, node};
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

fn api_err(e: kube::Error) -> Box<kube::core::Status> {
    match e {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn node_lifecycle_through_kube_client() {
    let sim = Sim::start().await;
    let nodes: Api<Node> = Api::all(sim.client().await);
    let created = nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(node("n1")).expect("node"),
        )
        .await
        .expect("create node");
    let meta = &created.metadata;
    assert!(
        meta.uid.as_deref().is_some_and(|u| !u.is_empty()),
        "uid set by server"
    );
    assert!(meta.creation_timestamp.is_some());
    let rv1: u64 = meta
        .resource_version
        .as_deref()
        .and_then(|r| r.parse().ok())
        .expect("numeric rv");

    let got = nodes.get("n1").await.expect("get");
    assert_eq!(got.metadata.uid, created.metadata.uid);

    // Merge patch of labels (what `kubectl label` sends).
    let patched = nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"pool": "gpu"}}})),
        )
        .await
        .expect("merge patch");
    let labels = patched.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("pool").map(String::as_str), Some("gpu"));
    assert_eq!(
        labels.get("kubernetes.io/hostname").map(String::as_str),
        Some("n1"),
        "merge keeps other labels"
    );
    let rv2: u64 = patched
        .metadata
        .resource_version
        .as_deref()
        .and_then(|r| r.parse().ok())
        .expect("rv");
    assert!(rv2 > rv1, "resourceVersion grows: {rv1} -> {rv2}");

    // Strategic merge on the status subresource: conditions merged by type.
    let status_patch = json!({"status": {"conditions": [
        {"type": "ConfigDrift", "status": "True", "reason": "Pending", "message": "m",
         "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    ]}});
    let patched = nodes
        .patch_status(
            "n1",
            &PatchParams::default(),
            &Patch::Strategic(status_patch),
        )
        .await
        .expect("strategic status patch");
    let types: Vec<String> = patched
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.type_)
        .collect();
    assert!(
        types.contains(&"Ready".to_string()) && types.contains(&"ConfigDrift".to_string()),
        "{types:?}"
    );

    // Update (PUT) with the current resourceVersion works; with a stale one it is 409.
    let mut current = nodes.get("n1").await.expect("get");
    current.metadata.annotations = Some([("a".to_string(), "b".to_string())].into());
    let updated = nodes
        .replace("n1", &PostParams::default(), &current)
        .await
        .expect("replace");
    assert_eq!(
        updated
            .metadata
            .annotations
            .unwrap_or_default()
            .get("a")
            .map(String::as_str),
        Some("b")
    );
    let err = api_err(
        nodes
            .replace("n1", &PostParams::default(), &current)
            .await
            .expect_err("stale"),
    );
    assert_eq!(err.code, 409);
    assert_eq!(err.reason, "Conflict");
    assert_eq!(
        err.message,
        "Operation cannot be fulfilled on nodes \"n1\": the object has been modified; please apply your changes to the latest version and try again"
    );

    let list = nodes.list(&ListParams::default()).await.expect("list");
    assert_eq!(list.items.len(), 1);

    nodes
        .delete("n1", &DeleteParams::default())
        .await
        .expect("delete");
    let err = api_err(nodes.get("n1").await.expect_err("gone"));
    assert_eq!(
        (err.code, err.reason.as_str(), err.message.as_str()),
        (404, "NotFound", "nodes \"n1\" not found")
    );
}

#[tokio::test]
async fn configmap_rules_and_error_messages() {
    let sim = Sim::start().await;
    let client = sim.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm: ConfigMap =
        serde_json::from_value(configmap("default", "x", &[("k", "v")])).expect("cm");
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("create");

    let err = api_err(
        cms.create(&PostParams::default(), &cm)
            .await
            .expect_err("duplicate"),
    );
    assert_eq!((err.code, err.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(err.message, "configmaps \"x\" already exists");

    let err = api_err(cms.get("missing").await.expect_err("missing"));
    assert_eq!(
        (err.code, err.message.as_str()),
        (404, "configmaps \"missing\" not found")
    );

    let elsewhere: Api<ConfigMap> = Api::namespaced(client.clone(), "nope");
    let in_nope: ConfigMap = serde_json::from_value(configmap("nope", "x", &[])).expect("cm");
    let err = api_err(
        elsewhere
            .create(&PostParams::default(), &in_nope)
            .await
            .expect_err("no namespace"),
    );
    assert_eq!(err.code, 404);
    assert_eq!(err.message, "namespaces \"nope\" not found");
    // A body namespace that differs from the path's: 400.
    let err = api_err(
        elsewhere
            .create(&PostParams::default(), &cm)
            .await
            .expect_err("mismatch"),
    );
    assert_eq!((err.code, err.reason.as_str()), (400, "BadRequest"));

    // Invalid name: 422 with the real reason.
    let bad: ConfigMap =
        serde_json::from_value(configmap("default", "Not_Valid", &[])).expect("cm");
    let err = api_err(
        cms.create(&PostParams::default(), &bad)
            .await
            .expect_err("invalid name"),
    );
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    assert!(
        err.message.starts_with(
            "ConfigMap \"Not_Valid\" is invalid: metadata.name: Invalid value: \"Not_Valid\""
        ),
        "{}",
        err.message
    );

    // An immutable ConfigMap's data cannot change.
    let mut imm = configmap("default", "frozen", &[("k", "v")]);
    imm["immutable"] = json!(true);
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(imm).expect("cm"),
    )
    .await
    .expect("create immutable");
    let err = api_err(
        cms.patch(
            "frozen",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "w"}})),
        )
        .await
        .expect_err("immutable"),
    );
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    assert!(
        err.message
            .contains("field is immutable when `immutable` is set"),
        "{}",
        err.message
    );

    // Server-side apply creates, then updates.
    let pp = PatchParams::apply("kubelet-gitops-test");
    let applied = cms
        .patch(
            "applied",
            &pp,
            &Patch::Apply(configmap("default", "applied", &[("a", "1")])),
        )
        .await
        .expect("apply creates");
    assert_eq!(
        applied
            .data
            .unwrap_or_default()
            .get("a")
            .map(String::as_str),
        Some("1")
    );
    let applied = cms
        .patch(
            "applied",
            &pp,
            &Patch::Apply(configmap("default", "applied", &[("a", "2")])),
        )
        .await
        .expect("apply updates");
    assert_eq!(
        applied
            .data
            .unwrap_or_default()
            .get("a")
            .map(String::as_str),
        Some("2")
    );

    // Dry run does not store.
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let dry_cm: ConfigMap = serde_json::from_value(configmap("default", "dry", &[])).expect("cm");
    cms.create(&dry, &dry_cm).await.expect("dry-run create");
    assert_eq!(
        api_err(cms.get("dry").await.expect_err("not stored")).code,
        404
    );

    // Delete through kube-rs: a Success Status for an object that is gone.
    let deleted = cms
        .delete("x", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(deleted.is_right(), "immediate delete answers a Status");
    let err = api_err(
        cms.delete("x", &DeleteParams::default())
            .await
            .expect_err("second delete"),
    );
    assert_eq!(
        (err.code, err.message.as_str()),
        (404, "configmaps \"x\" not found")
    );
}

#[tokio::test]
async fn raw_status_codes_and_headers() {
    let sim = Sim::start().await;
    let r = sim.get("/api/v1/namespaces/default/configmaps/nope").await;
    assert_eq!(r.status, 404);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let s = r.json();
    assert_eq!(s["kind"], "Status");
    assert_eq!(s["apiVersion"], "v1");
    assert_eq!(s["status"], "Failure");
    assert_eq!(s["reason"], "NotFound");
    assert_eq!(s["code"], 404);
    assert_eq!(s["details"], json!({"name": "nope", "kind": "configmaps"}));

    // Create answers 201 with the stored object.
    let r = sim
        .send_json(
            "POST",
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            &configmap("default", "c", &[("a", "b")]),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["metadata"]["name"], "c");

    // Unknown patch content type: 415 Status.
    let r = sim
        .send_json(
            "PATCH",
            "/api/v1/namespaces/default/configmaps/c",
            "text/plain",
            &json!({}),
        )
        .await;
    assert_eq!(r.status, 415);
    assert_eq!(r.json()["reason"], "UnsupportedMediaType");

    // A body that does not parse: 400 Status.
    let r = sim
        .raw(
            "POST",
            "/api/v1/namespaces/default/configmaps",
            &[("Content-Type", "application/json")],
            Some(b"{not json"),
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["reason"], "BadRequest");
    let r = sim
        .raw(
            "PATCH",
            "/api/v1/namespaces/default/configmaps/c",
            &[("Content-Type", "application/merge-patch+json")],
            Some(b"{oops"),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text());

    // JSON patch (RFC 6902), including a failing test op.
    let ops = json!([{"op": "add", "path": "/data/x", "value": "y"}]);
    let r = sim
        .send_json(
            "PATCH",
            "/api/v1/namespaces/default/configmaps/c",
            "application/json-patch+json",
            &ops,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["data"], json!({"a": "b", "x": "y"}));

    // Apply without fieldManager: 422 from the options validation.
    let r = sim
        .raw(
            "PATCH",
            "/api/v1/namespaces/default/configmaps/c",
            &[("Content-Type", "application/apply-patch+yaml")],
            Some(b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n"),
        )
        .await;
    assert_eq!(r.status, 422);
    assert_eq!(
        r.json()["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
    // Apply with a YAML body.
    let r = sim
        .raw(
            "PATCH",
            "/api/v1/namespaces/default/configmaps/c?fieldManager=yaml-test",
            &[("Content-Type", "application/apply-patch+yaml")],
            Some(b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: default\ndata:\n  z: \"1\"\n"),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["data"]["z"], "1");

    // Pods are written, and validated as upstream validates them.
    let r = sim
        .send_json(
            "POST",
            "/api/v1/namespaces/default/pods",
            "application/json",
            &json!({"metadata": {"name": "p"}}),
        )
        .await;
    assert_eq!(r.status, 422);
    assert_eq!(
        r.json()["message"],
        "Pod \"p\" is invalid: spec.containers: Required value"
    );
    // POST to a subresource that is not the eviction: 405.
    let r = sim
        .raw(
            "POST",
            "/api/v1/namespaces/default/pods/p/status",
            &[],
            Some(b"{}"),
        )
        .await;
    assert_eq!(r.status, 405);

    // A method the path does not serve, and deletecollection (not served): 405.
    let r = sim.raw("POST", "/api/v1/nodes/n1", &[], Some(b"{}")).await;
    assert_eq!(r.status, 405);
    assert_eq!(r.json()["reason"], "MethodNotAllowed");
    let r = sim
        .raw("DELETE", "/api/v1/namespaces/default/pods", &[], None)
        .await;
    assert_eq!(r.status, 405);

    // Unknown resource or path: 404 Status.
    let r = sim.get("/api/v1/deployments").await;
    assert_eq!(
        (r.status, r.json()["reason"].clone()),
        (404, json!("NotFound"))
    );
    let r = sim.get("/nothing/here").await;
    assert_eq!(r.status, 404);
    assert_eq!(r.header("content-type"), Some("application/json"));

    // Only protobuf accepted: 406.
    let r = sim
        .raw(
            "GET",
            "/api/v1/nodes",
            &[("Accept", "application/vnd.kubernetes.protobuf")],
            None,
        )
        .await;
    assert_eq!(r.status, 406);

    // Unparseable limit: 400.
    let r = sim.get("/api/v1/nodes?limit=abc").await;
    assert_eq!(r.status, 400);

    // Delete: Success Status with the uid.
    let uid = sim
        .get("/api/v1/namespaces/default/configmaps/c")
        .await
        .json()["metadata"]["uid"]
        .clone();
    let r = sim
        .raw(
            "DELETE",
            "/api/v1/namespaces/default/configmaps/c",
            &[],
            None,
        )
        .await;
    assert_eq!(r.status, 200);
    let s = r.json();
    assert_eq!(s["status"], "Success");
    assert_eq!(s["details"]["uid"], uid);
    assert_eq!(s["details"]["name"], "c");
}

#[tokio::test]
async fn lists_paginate_and_omit_item_type_meta() {
    let sim = Sim::start().await;
    let client = sim.client().await;
    let nodes: Api<Node> = Api::all(client.clone());
    for i in 0..5 {
        let mut n = node(&format!("n{i}"));
        n["metadata"]["labels"]["pool"] = json!(if i % 2 == 0 { "even" } else { "odd" });
        nodes
            .create(
                &PostParams::default(),
                &serde_json::from_value(n).expect("node"),
            )
            .await
            .expect("create");
    }
    let r = sim.get("/api/v1/nodes?limit=2").await;
    assert_eq!(r.status, 200);
    let page = r.json();
    assert_eq!(page["kind"], "NodeList");
    assert_eq!(page["apiVersion"], "v1");
    assert_eq!(page["items"].as_array().map(Vec::len), Some(2));
    assert!(page["items"][0].get("kind").is_none() && page["items"][0].get("apiVersion").is_none());
    assert_eq!(page["metadata"]["remainingItemCount"], 3);
    let token = page["metadata"]["continue"]
        .as_str()
        .expect("continue token")
        .to_string();
    let mut names: Vec<String> = page["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["metadata"]["name"].as_str().map(String::from))
        .collect();
    let mut token = Some(token);
    while let Some(t) = token {
        let r = sim
            .get(&format!("/api/v1/nodes?limit=2&continue={t}"))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        let page = r.json();
        names.extend(
            page["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|i| i["metadata"]["name"].as_str().map(String::from)),
        );
        token = page["metadata"]["continue"]
            .as_str()
            .filter(|c| !c.is_empty())
            .map(String::from);
    }
    assert_eq!(names, ["n0", "n1", "n2", "n3", "n4"]);

    // Through kube-rs: limit + continue, and a label selector.
    let first = nodes
        .list(&ListParams::default().limit(3))
        .await
        .expect("page 1");
    assert_eq!(first.items.len(), 3);
    let next = first.metadata.continue_.clone().expect("continue");
    let second = nodes
        .list(&ListParams::default().limit(3).continue_token(&next))
        .await
        .expect("page 2");
    assert_eq!(second.items.len(), 2);
    let odd = nodes
        .list(&ListParams::default().labels("pool=odd"))
        .await
        .expect("selector");
    let odd_names: Vec<_> = odd
        .items
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    assert_eq!(odd_names, ["n1", "n3"]);
    let set = nodes
        .list(&ListParams::default().labels("pool in (even),kubernetes.io/hostname!=n0"))
        .await
        .expect("set selector");
    assert_eq!(set.items.len(), 2);
    let by_name = nodes
        .list(&ListParams::default().fields("metadata.name=n4"))
        .await
        .expect("field selector");
    assert_eq!(by_name.items.len(), 1);

    // Metadata-only list, as the reconciler does at scale.
    let metas = nodes
        .list_metadata(&ListParams::default())
        .await
        .expect("metadata list");
    assert_eq!(metas.items.len(), 5);
    let r = sim
        .raw(
            "GET",
            "/api/v1/nodes",
            &[(
                "Accept",
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
            )],
            None,
        )
        .await;
    let m = r.json();
    assert_eq!(m["kind"], "PartialObjectMetadataList");
    assert_eq!(m["items"][0]["kind"], "PartialObjectMetadata");
    assert!(m["items"][0].get("status").is_none());
}

#[tokio::test]
async fn table_output_for_kubectl_get() {
    let sim = Sim::start().await;
    let mut n = node("worker-1");
    n["metadata"]["labels"]["node-role.kubernetes.io/worker"] = json!("");
    sim.send_json("POST", "/api/v1/nodes", "application/json", &n)
        .await;
    sim.send_json(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        &configmap("default", "c", &[("a", "1"), ("b", "2")]),
    )
    .await;
    let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    let t = sim
        .raw("GET", "/api/v1/nodes", &[("Accept", accept)], None)
        .await
        .json();
    assert_eq!(t["kind"], "Table");
    assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
    let cols: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["priority"] == 0)
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(cols, ["Name", "Status", "Roles", "Age", "Version"]);
    let cells = &t["rows"][0]["cells"];
    assert_eq!(cells[0], "worker-1");
    assert_eq!(cells[1], "Ready");
    assert_eq!(cells[2], "worker");
    assert_eq!(cells[4], "v1.36.0");
    assert_eq!(t["rows"][0]["object"]["metadata"]["name"], "worker-1");
    let t = sim
        .raw(
            "GET",
            "/api/v1/namespaces/default/configmaps/c",
            &[("Accept", accept)],
            None,
        )
        .await
        .json();
    let cols: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(cols, ["Name", "Data", "Age"]);
    assert_eq!(t["rows"][0]["cells"][1], 2);
    // Writes ignore the Table part of Accept.
    let r = sim
        .raw(
            "GET",
            "/api/v1/namespaces/default/configmaps/c",
            &[("Accept", "application/json")],
            None,
        )
        .await
        .json();
    assert_eq!(r["kind"], "ConfigMap");
}

#[tokio::test]
async fn discovery_documents() {
    let sim = Sim::start().await;
    let v = sim.get("/version").await.json();
    assert!(
        v["gitVersion"]
            .as_str()
            .is_some_and(|g| g.starts_with("v1.36."))
    );
    let api = sim.get("/api").await.json();
    assert_eq!(api["kind"], "APIVersions");
    assert_eq!(api["versions"], json!(["v1"]));
    let core = sim
        .raw("GET", "/api/v1", &[("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json")], None)
        .await;
    assert_eq!(
        core.header("content-type"),
        Some("application/json"),
        "plain form, so clients fall back"
    );
    let core = core.json();
    let names: Vec<&str> = core["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["name"].as_str())
        .collect();
    for n in [
        "nodes",
        "nodes/status",
        "configmaps",
        "secrets",
        "namespaces",
        "events",
        "pods",
    ] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }
    let groups = sim.get("/apis").await.json();
    assert_eq!(groups["kind"], "APIGroupList");
    let leases = sim.get("/apis/coordination.k8s.io/v1").await.json();
    assert_eq!(leases["groupVersion"], "coordination.k8s.io/v1");
    assert_eq!(sim.get("/apis/apps/v1").await.status, 200);
    assert_eq!(
        sim.get("/apis/policy/v1").await.json()["resources"][0]["name"],
        "poddisruptionbudgets"
    );
    assert_eq!(sim.get("/apis/batch/v1").await.status, 404);
    assert_eq!(sim.get("/openapi/v2").await.status, 404);
    for p in ["/healthz", "/readyz", "/livez"] {
        let r = sim.get(p).await;
        assert_eq!((r.status, r.text().as_str()), (200, "ok"));
    }
    // kube-rs discovery over the plain documents.
    let discovery = kube::discovery::Discovery::new(sim.client().await)
        .run()
        .await
        .expect("discovery");
    let (ar, caps) = discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .find(|(ar, _)| ar.kind == "Lease")
        .expect("Lease discovered");
    assert_eq!(ar.group, "coordination.k8s.io");
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
    // Discovery and health are not in the request log.
    assert!(
        sim.server
            .log
            .entries()
            .iter()
            .all(|e| e.verb != "get" || e.resource != "version")
    );
}

#[tokio::test]
async fn request_log_counts() {
    let sim = Sim::start().await;
    let client = sim.client().await;
    let nodes: Api<Node> = Api::all(client);
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(node("n1")).expect("node"),
        )
        .await
        .expect("create");
    nodes.get("n1").await.expect("get");
    nodes.get("n1").await.expect("get");
    let _ = nodes.get("n2").await;
    nodes.list(&ListParams::default()).await.expect("list");
    nodes
        .patch_status(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running"}})),
        )
        .await
        .expect("patch");
    let log = &sim.server.log;
    assert_eq!(log.count("create", "nodes"), 1);
    assert_eq!(log.count("get", "nodes"), 3);
    assert_eq!(log.count("list", "nodes"), 1);
    assert_eq!(log.count("patch", "nodes/status"), 1);
    let entries = log.entries();
    let miss = entries
        .iter()
        .find(|e| e.name.as_deref() == Some("n2"))
        .expect("n2 entry");
    assert_eq!(miss.status, 404);
    sim.get("/api/v1/nodes/n1").await;
    let last = log.entries().pop().expect("entry");
    assert_eq!(
        (last.verb.as_str(), last.user_agent.as_deref()),
        ("get", Some("sim-raw-test"))
    );
    let entries = log.entries();
    let total: u64 = log.counts().values().sum();
    assert_eq!(total as usize, entries.len());
    // Per client: the raw GET's User-Agent product, and kube's (whatever it sends).
    assert_eq!(log.client_count("sim-raw-test", "get", "nodes"), 1);
    let kube = entries[0].client();
    assert_ne!(kube, "sim-raw-test");
    assert_eq!(log.client_count(&kube, "get", "nodes"), 3);
    assert_eq!(log.client_count(&kube, "patch", "nodes/status"), 1);
    assert_eq!(log.client_writes(&kube), 2, "{:?}", log.counts_by_client());
    assert_eq!(log.client_writes("sim-raw-test"), 0);
    let by_client: u64 = log.counts_by_client().values().sum();
    assert_eq!(by_client, total);
}
