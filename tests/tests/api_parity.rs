//! One request script, two API servers: the simulated one (`kubelet-gitops-sim`, in this
//! process, over HTTP) and a real Kubernetes v1.36 control plane (etcd and kube-apiserver
//! from `upstream/build.sh`, no kubelets: the script creates its Nodes as objects). Every
//! step asserts the same observable answer on both: the HTTP status, the Status `reason`
//! and message text, and the fields of the resulting object that the product, kubectl or
//! a person reads. The expected values are the real server's answers, so a difference is
//! a sim bug (docs/sim.md, "The sim against the real server", lists each one found).
//!
//! The script covers what kubelet-gitops does through the API (reconciler/src and
//! node-agent/src): Node get, list and watch (metadata-only, and by field selector),
//! merge patches of annotations with a field manager, the strategic merge patch of a
//! condition through `nodes/status`; ConfigMap create (immutable, labels, annotations),
//! "already exists", get, list by label selector, delete; Lease create and conditional
//! update for leader election; Event create; Pods by `spec.nodeName`. Around those it
//! checks the answers that users and kubectl see: 404, 409 (AlreadyExists, Conflict on a
//! stale resourceVersion, preconditions, server-side apply conflicts), 422 with its
//! message, 400 and 415, watch event sequences (selector transitions, bookmarks,
//! watch-list), managedFields per manager, time formats, and a few kubectl commands.
//!
//! `parity::sim` always runs. `parity::real` needs the upstream binaries: without them it
//! prints `SKIPPED` and passes, unless `KUBELET_GITOPS_E2E_REQUIRE=1` (CI), which makes
//! it fail.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Event, EventSource, Node, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{Api, DeleteParams, ListParams, PartialObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kubelet_gitops_e2e::real::pki::CertFiles;
use kubelet_gitops_e2e::real::{self, RealCluster, UpstreamBinaries};
use serde_json::{Value, json};

/// The namespace the script works in.
const NS: &str = "parity";
/// The reconciler's field manager (reconciler/src/publish.rs).
const RECONCILER: &str = "kubelet-gitops";
/// The agent's field manager (node-agent/src/report.rs).
const AGENT: &str = "kubelet-gitops-agent";
/// How long a step waits for a watch event before it counts as missing.
const EVENT_WAIT: Duration = Duration::from_secs(20);

mod parity {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sim() {
        super::on_the_sim().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn real() {
        super::on_the_real_server().await;
    }
}

async fn on_the_sim() {
    let dir = tempfile::Builder::new()
        .prefix("kgparity-sim-")
        .tempdir()
        .expect("temp dir");
    let mut config = kubelet_gitops_sim::cluster::SimConfig::new(
        kubelet_gitops_core::inventory::Inventory { nodes: Vec::new() },
        dir.path(),
    );
    config.kubelets = false;
    let sim = kubelet_gitops_sim::cluster::Sim::start(config)
        .await
        .expect("the sim starts");
    let target = Target::new("sim", &sim.url(), sim.kubeconfig_path(), None).await;
    script(&target).await;
    sim.shutdown().await;
    target.finish();
}

async fn on_the_real_server() {
    let Some(bins) = UpstreamBinaries::locate_or_skip("api_parity real") else {
        return;
    };
    let dir = tempfile::Builder::new()
        .prefix("kgparity-")
        .tempdir()
        .expect("temp dir");
    let logs = dir.path().join("logs");
    let cluster = RealCluster::start(dir.path(), &logs, bins, &[], false)
        .await
        .expect("the real control plane starts");
    let target = Target::new(
        "real",
        cluster.server(),
        cluster.admin_kubeconfig(),
        Some((cluster.ca(), cluster.admin_cert())),
    )
    .await;
    script(&target).await;
    drop(cluster);
    if !target.failures().is_empty() {
        eprintln!(
            "api_parity real: the cluster's directory is kept: {}",
            dir.keep().display()
        );
    }
    target.finish();
}

// ---------------------------------------------------------------------------------------
// The script.
// ---------------------------------------------------------------------------------------

async fn script(t: &Target) {
    namespace(t).await;
    nodes(t).await;
    node_patches(t).await;
    node_status(t).await;
    node_watches(t).await;
    ownership(t).await;
    configmaps(t).await;
    configmap_watches(t).await;
    leases(t).await;
    events(t).await;
    secrets(t).await;
    pods(t).await;
    kubectl(t).await;
    node_delete(t).await;
}

async fn namespace(t: &Target) {
    let a = t
        .post(
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
        )
        .await;
    t.check(
        "create a Namespace",
        a.fields(&[
            "/metadata/labels",
            "/metadata/generation",
            "/spec",
            "/status",
        ]),
        json!({
            "code": 201,
            "/metadata/labels": {"kubernetes.io/metadata.name": NS},
            "/metadata/generation": null,
            "/spec": {"finalizers": ["kubernetes"]},
            "/status": {"phase": "Active"},
        }),
    );
    // The label is a default (the creator's); the finalizer and phase are the
    // strategy's (nobody's).
    t.check(
        "the Namespace's managedFields",
        managed(&a.body),
        json!([{"manager": "unknown", "operation": "Update", "apiVersion": "v1",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {
                    ".": {}, "f:kubernetes.io/metadata.name": {}}}}}]),
    );
    let plain = t
        .call_with(
            "POST",
            "/api/v1/namespaces",
            &[("Content-Type", "text/plain")],
            Some("x".into()),
        )
        .await;
    t.check(
        "create from a body of an unsupported media type",
        plain.status(),
        status(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf",
            Value::Null,
        ),
    );
}

fn node_body(name: &str, pool: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"node.kubernetes.io/pool": pool},
            "annotations": {"parity/a": "1"},
        },
        "status": {
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "conditions": [{
                "type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
                "lastHeartbeatTime": "2025-01-01T00:00:00Z",
                "lastTransitionTime": "2025-01-01T00:00:00Z",
            }],
        },
    })
}

async fn nodes(t: &Target) {
    let a = t.post("/api/v1/nodes", &node_body("parity-a", "gpu")).await;
    t.check(
        "create a Node with labels, annotations and a status",
        a.fields(&[
            "/metadata/labels",
            "/metadata/annotations",
            "/metadata/generation",
            "/status/capacity",
            "/status/allocatable",
            "/status/conditions",
            "/status/daemonEndpoints",
            "/status/nodeInfo",
        ]),
        json!({
            "code": 201,
            "/metadata/labels": {"node.kubernetes.io/pool": "gpu"},
            "/metadata/annotations": {"parity/a": "1"},
            "/metadata/generation": null,
            "/status/capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "/status/allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "/status/conditions": [{
                "type": "Ready", "status": "True",
                "lastHeartbeatTime": "2025-01-01T00:00:00Z",
                "lastTransitionTime": "2025-01-01T00:00:00Z",
                "reason": "KubeletReady", "message": "kubelet is posting ready status",
            }],
            "/status/daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
            "/status/nodeInfo": {
                "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "",
                "osImage": "", "containerRuntimeVersion": "", "kubeletVersion": "",
                "kubeProxyVersion": "", "operatingSystem": "", "architecture": "",
            },
        }),
    );
    // A write through the main resource owns no status field; a new map is owned as a
    // whole too (`.`); the manager is the User-Agent's product ("unknown" without one).
    t.check(
        "the create's managedFields",
        managed(&a.body),
        json!([{
            "manager": "unknown", "operation": "Update", "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {
                "f:annotations": {".": {}, "f:parity/a": {}},
                "f:labels": {".": {}, "f:node.kubernetes.io/pool": {}},
            }},
        }]),
    );

    let b = t
        .call_with(
            "POST",
            "/api/v1/nodes",
            &[
                ("Content-Type", "application/json"),
                ("User-Agent", "parity-test/1.0 (linux/amd64)"),
            ],
            Some(node_body("parity-b", "cpu").to_string()),
        )
        .await;
    t.check(
        "the manager of a write without fieldManager is the User-Agent's product",
        json!(b.code),
        json!(201),
    );
    t.check(
        "managers named after the User-Agent",
        managers(&b.body),
        json!(["parity-test"]),
    );

    let again = t.post("/api/v1/nodes", &node_body("parity-a", "gpu")).await;
    t.check(
        "create an existing Node",
        again.status(),
        status(
            409,
            "AlreadyExists",
            "nodes \"parity-a\" already exists",
            json!({"name": "parity-a", "kind": "nodes"}),
        ),
    );
    let missing = t.get("/api/v1/nodes/parity-missing").await;
    t.check(
        "get a missing Node",
        missing.status(),
        status(
            404,
            "NotFound",
            "nodes \"parity-missing\" not found",
            json!({"name": "parity-missing", "kind": "nodes"}),
        ),
    );
    let put_missing = t
        .put(
            "/api/v1/nodes/parity-missing",
            &json!({"metadata": {"name": "parity-missing"}}),
        )
        .await;
    t.check(
        "update a missing Node",
        put_missing.status(),
        status(
            404,
            "NotFound",
            "nodes \"parity-missing\" not found",
            json!({"name": "parity-missing", "kind": "nodes"}),
        ),
    );
    let by_label = t
        .get("/api/v1/nodes?labelSelector=node.kubernetes.io%2Fpool%3Dgpu")
        .await;
    t.check(
        "list Nodes by label selector",
        json!([by_label.code, by_label.names()]),
        json!([200, ["parity-a"]]),
    );
    let by_set = t
        .get(
            "/api/v1/nodes?labelSelector=node.kubernetes.io%2Fpool%20in%20(cpu,gpu),!parity%2Fnone",
        )
        .await;
    t.check(
        "list Nodes by a set-based selector",
        json!([by_set.code, by_set.names()]),
        json!([200, ["parity-a", "parity-b"]]),
    );
    let by_field = t
        .get("/api/v1/nodes?fieldSelector=metadata.name%3Dparity-b")
        .await;
    t.check(
        "list Nodes by field selector",
        json!([by_field.code, by_field.names()]),
        json!([200, ["parity-b"]]),
    );
    let bad_field = t.get("/api/v1/nodes?fieldSelector=spec.foo%3Dx").await;
    t.check(
        "list Nodes by an unsupported field",
        bad_field.status(),
        status(
            400,
            "BadRequest",
            "field label not supported: spec.foo",
            Value::Null,
        ),
    );
    let meta_list = t
        .call_with(
            "GET",
            "/api/v1/nodes?labelSelector=node.kubernetes.io%2Fpool",
            &[(
                "Accept",
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
            )],
            None,
        )
        .await;
    t.check(
        "list Nodes as PartialObjectMetadataList",
        json!([
            meta_list.code,
            meta_list.body["kind"],
            meta_list.body["apiVersion"],
            meta_list.body.pointer("/items/0/kind"),
            meta_list.body.pointer("/items/0/status").is_some(),
            meta_list.names(),
        ]),
        json!([
            200,
            "PartialObjectMetadataList",
            "meta.k8s.io/v1",
            "PartialObjectMetadata",
            false,
            ["parity-a", "parity-b"]
        ]),
    );
}

async fn node_patches(t: &Target) {
    // The reconciler's write: a metadata-only merge patch of its annotations
    // (reconciler/src/controller/reconcile.rs).
    let api: Api<PartialObjectMeta<Node>> = Api::all(t.client.clone());
    let params = PatchParams {
        field_manager: Some(RECONCILER.into()),
        ..PatchParams::default()
    };
    let patch = json!({"metadata": {"annotations": {
        "kubelet-gitops.io/desired-config": "kubelet-gitops/kubelet-gpu-abc",
        "parity/a": null,
    }}});
    match api
        .patch_metadata("parity-a", &params, &Patch::Merge(&patch))
        .await
    {
        Ok(m) => {
            let v = serde_json::to_value(&m).unwrap_or_default();
            t.check(
                "the reconciler's merge patch of annotations (metadata only)",
                json!([v["kind"], v["apiVersion"], v["metadata"]["annotations"]]),
                json!([
                    "PartialObjectMetadata",
                    "meta.k8s.io/v1",
                    {"kubelet-gitops.io/desired-config": "kubelet-gitops/kubelet-gpu-abc"}
                ]),
            );
            // The patch took `parity/a` from its creator, which keeps the map itself.
            t.check(
                "managedFields after the reconciler's patch",
                managed(&v),
                json!([
                    {"manager": RECONCILER, "operation": "Update", "apiVersion": "v1",
                     "fieldsType": "FieldsV1",
                     "fieldsV1": {"f:metadata": {"f:annotations": {
                         "f:kubelet-gitops.io/desired-config": {},
                     }}}},
                    {"manager": "unknown", "operation": "Update", "apiVersion": "v1",
                     "fieldsType": "FieldsV1",
                     "fieldsV1": {"f:metadata": {
                         "f:annotations": {},
                         "f:labels": {".": {}, "f:node.kubernetes.io/pool": {}},
                     }}},
                ]),
            );
        }
        Err(e) => t.fail("the reconciler's merge patch of annotations", e),
    }

    let bad_key = t
        .patch(
            "/api/v1/nodes/parity-a",
            MERGE,
            &json!({"metadata": {"annotations": {"bad key": "v"}}}),
        )
        .await;
    t.check(
        "a merge patch with an invalid annotation key",
        bad_key.status_without_causes(),
        status(
            422,
            "Invalid",
            &format!(
                "Node \"parity-a\" is invalid: metadata.annotations: Invalid value: \"bad key\": {QUALIFIED_NAME}"
            ),
            json!({"name": "parity-a", "kind": "Node"}),
        ),
    );
    let bad_label = t
        .patch(
            "/api/v1/nodes/parity-a",
            MERGE,
            &json!({"metadata": {"labels": {"parity/l": "bad value!"}}}),
        )
        .await;
    t.check(
        "a merge patch with an invalid label value",
        bad_label.status_without_causes(),
        status(
            422,
            "Invalid",
            &format!(
                "Node \"parity-a\" is invalid: metadata.labels: Invalid value: \"bad value!\": {LABEL_VALUE}"
            ),
            json!({"name": "parity-a", "kind": "Node"}),
        ),
    );

    let test_fails = t
        .patch(
            "/api/v1/nodes/parity-a",
            JSON_PATCH,
            &json!([{"op": "test", "path": "/metadata/labels/node.kubernetes.io~1pool", "value": "cpu"}]),
        )
        .await;
    t.check(
        "a JSON patch whose test fails",
        test_fails.status(),
        status(
            422,
            "Invalid",
            "the server rejected our request due to an error in our request",
            json!({}),
        ),
    );
    let test_passes = t
        .patch(
            "/api/v1/nodes/parity-a",
            JSON_PATCH,
            &json!([
                {"op": "test", "path": "/metadata/labels/node.kubernetes.io~1pool", "value": "gpu"},
                {"op": "add", "path": "/metadata/labels/parity~1jp", "value": "yes"},
            ]),
        )
        .await;
    t.check(
        "a JSON patch whose test passes",
        test_passes.fields(&["/metadata/labels"]),
        json!({"code": 200, "/metadata/labels": {"node.kubernetes.io/pool": "gpu", "parity/jp": "yes"}}),
    );
    let remove_missing = t
        .patch(
            "/api/v1/nodes/parity-a",
            JSON_PATCH,
            &json!([{"op": "remove", "path": "/metadata/labels/parity~1none"}]),
        )
        .await;
    t.check(
        "a JSON patch removing a missing key",
        remove_missing.status(),
        status(
            422,
            "Invalid",
            "the server rejected our request due to an error in our request",
            json!({}),
        ),
    );
    let not_a_list = t
        .patch("/api/v1/nodes/parity-a", JSON_PATCH, &json!({"op": "add"}))
        .await;
    t.check(
        "a JSON patch that is not a list",
        not_a_list.status(),
        status(
            400,
            "BadRequest",
            "error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp",
            Value::Null,
        ),
    );
    let merge_list = t.patch("/api/v1/nodes/parity-a", MERGE, &json!([1])).await;
    t.check(
        "a merge patch that is not an object",
        merge_list.status(),
        status(
            400,
            "BadRequest",
            "error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}",
            Value::Null,
        ),
    );
    let plain = t
        .call_with(
            "PATCH",
            "/api/v1/nodes/parity-a",
            &[("Content-Type", "text/plain")],
            Some("x".into()),
        )
        .await;
    t.check(
        "a patch of an unsupported media type",
        plain.status(),
        status(
            415,
            "UnsupportedMediaType",
            "415: Unsupported Media Type",
            json!({}),
        ),
    );

    // A stale resourceVersion on update.
    let current = t.get("/api/v1/nodes/parity-a").await;
    let mut stale = current.body.clone();
    stale["metadata"]["resourceVersion"] = json!(bump(&current.body));
    let conflict = t.put("/api/v1/nodes/parity-a", &stale).await;
    t.check(
        "an update with a stale resourceVersion",
        conflict.status(),
        status(
            409,
            "Conflict",
            "Operation cannot be fulfilled on nodes \"parity-a\": the object has been modified; please apply your changes to the latest version and try again",
            json!({"name": "parity-a", "kind": "nodes"}),
        ),
    );

    // Server-side apply: conflicts between managers, then forced.
    let apply = |v: &str| {
        json!({"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": "parity-a", "labels": {"parity/ssa": v}}})
    };
    let first = t
        .patch(
            "/api/v1/nodes/parity-a?fieldManager=one",
            APPLY,
            &apply("1"),
        )
        .await;
    t.check("apply as manager one", json!(first.code), json!(200));
    let clash = t
        .patch(
            "/api/v1/nodes/parity-a?fieldManager=two",
            APPLY,
            &apply("2"),
        )
        .await;
    t.check(
        "apply a field another manager owns",
        clash.status(),
        status(
            409,
            "Conflict",
            "Apply failed with 1 conflict: conflict with \"one\": .metadata.labels.parity/ssa",
            json!({"causes": [{"reason": "FieldManagerConflict", "message": "conflict with \"one\"", "field": ".metadata.labels.parity/ssa"}]}),
        ),
    );
    let forced = t
        .patch(
            "/api/v1/nodes/parity-a?fieldManager=two&force=true",
            APPLY,
            &apply("2"),
        )
        .await;
    t.check(
        "apply with force",
        json!([
            forced.code,
            forced.body.pointer("/metadata/labels/parity~1ssa"),
            managers(&forced.body)
        ]),
        json!([200, "2", [RECONCILER, "two", "unknown"]]),
    );
    t.check(
        "Apply entries come first in managedFields",
        json!(
            managed_order(&forced.body)
                .as_array()
                .and_then(|a| a.first().cloned())
        ),
        json!("Apply/two"),
    );
    let no_manager = t.patch("/api/v1/nodes/parity-a", APPLY, &apply("3")).await;
    t.check(
        "apply without a field manager",
        no_manager.status(),
        status(
            422,
            "Invalid",
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
            json!({"group": "meta.k8s.io", "kind": "PatchOptions", "causes": [{"reason": "FieldValueRequired", "message": "Required value: is required for apply patch", "field": "fieldManager"}]}),
        ),
    );
}

async fn node_status(t: &Target) {
    // The agent's writes (node-agent/src/report.rs): a merge patch of its annotations, a
    // strategic merge patch of its condition through the status subresource.
    let api: Api<Node> = Api::all(t.client.clone());
    let params = PatchParams {
        field_manager: Some(AGENT.into()),
        ..PatchParams::default()
    };
    let annotations = json!({"metadata": {"annotations": {"kubelet-gitops.io/state": "Applying"}}});
    if let Err(e) = api
        .patch("parity-a", &params, &Patch::Merge(&annotations))
        .await
    {
        t.fail("the agent's merge patch of annotations", e);
    }
    let condition = |status: &str, message: &str| {
        json!({"status": {"conditions": [{
            "type": "KubeletConfigReady", "status": status, "reason": "Applied",
            "message": message,
            "lastTransitionTime": "2025-02-01T00:00:00Z",
            "lastHeartbeatTime": "2025-02-01T00:00:00Z",
        }]}})
    };
    match api
        .patch_status(
            "parity-a",
            &params,
            &Patch::Strategic(&condition("True", "running kubelet-gpu-abc")),
        )
        .await
    {
        Ok(n) => {
            let v = serde_json::to_value(&n).unwrap_or_default();
            // A condition the Node did not have goes first (strategic merge puts the
            // patch's new items before the server's).
            t.check(
                "the agent's condition, merged by type",
                json!([condition_types(&v), v.pointer("/status/conditions/0")]),
                json!([["KubeletConfigReady", "Ready"], {
                    "type": "KubeletConfigReady", "status": "True",
                    "lastHeartbeatTime": "2025-02-01T00:00:00Z",
                    "lastTransitionTime": "2025-02-01T00:00:00Z",
                    "reason": "Applied", "message": "running kubelet-gpu-abc",
                }]),
            );
            t.check(
                "the agent's entries in managedFields",
                json!(managed(&v)
                    .as_array()
                    .map(|a| a
                        .iter()
                        .filter(|e| e["manager"] == AGENT)
                        .cloned()
                        .collect::<Vec<_>>())),
                json!([
                    {"manager": AGENT, "operation": "Update", "apiVersion": "v1",
                     "fieldsType": "FieldsV1",
                     "fieldsV1": {"f:metadata": {"f:annotations": {"f:kubelet-gitops.io/state": {}}}}},
                    {"manager": AGENT, "operation": "Update", "apiVersion": "v1",
                     "fieldsType": "FieldsV1", "subresource": "status",
                     "fieldsV1": {"f:status": {"f:conditions": {"k:{\"type\":\"KubeletConfigReady\"}": {
                         ".": {}, "f:lastHeartbeatTime": {}, "f:lastTransitionTime": {},
                         "f:message": {}, "f:reason": {}, "f:status": {}, "f:type": {},
                     }}}}},
                ]),
            );
        }
        Err(e) => t.fail("the agent's condition patch", e),
    }
    // The Ready condition changes (the kubelet's write): positions stay.
    let ready = t
        .patch(
            "/api/v1/nodes/parity-a/status",
            STRATEGIC,
            &json!({"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]}}),
        )
        .await;
    t.check(
        "a strategic merge patch of an existing condition",
        json!([
            ready.code,
            condition_types(&ready.body),
            ready.body.pointer("/status/conditions/1/status"),
            ready.body.pointer("/status/conditions/1/message")
        ]),
        json!([
            200,
            ["KubeletConfigReady", "Ready"],
            "False",
            "kubelet is posting ready status"
        ]),
    );
    let second = t
        .patch(
            "/api/v1/nodes/parity-a/status",
            STRATEGIC,
            &json!({"status": {"conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "DiskPressure", "status": "False"},
            ]}}),
        )
        .await;
    t.check(
        "a strategic merge patch of two new conditions",
        json!([second.code, condition_types(&second.body)]),
        json!([
            200,
            [
                "MemoryPressure",
                "DiskPressure",
                "KubeletConfigReady",
                "Ready"
            ]
        ]),
    );
    let time_parsed = t
        .patch(
            "/api/v1/nodes/parity-a/status",
            STRATEGIC,
            &json!({"status": {"conditions": [{
                "type": "MemoryPressure", "lastHeartbeatTime": "2025-01-02T03:04:05.999+01:00"}]}}),
        )
        .await;
    t.check(
        "a condition's time is stored in UTC, in seconds",
        json!([
            time_parsed.code,
            time_parsed.body.pointer("/status/conditions/0")
        ]),
        json!([200, {"type": "MemoryPressure", "status": "False",
                     "lastHeartbeatTime": "2025-01-02T02:04:05Z", "lastTransitionTime": null}]),
    );

    // Through the main resource the status stays; through `status`, the spec stays and
    // the metadata changes.
    let main = t
        .patch(
            "/api/v1/nodes/parity-a",
            MERGE,
            &json!({"metadata": {"labels": {"parity/main": "1"}}, "status": {"conditions": []}}),
        )
        .await;
    t.check(
        "a merge patch of the main resource ignores the status",
        json!([
            main.code,
            main.body.pointer("/metadata/labels/parity~1main"),
            condition_types(&main.body).as_array().map(Vec::len)
        ]),
        json!([200, "1", 4]),
    );
    let via_status = t
        .patch(
            "/api/v1/nodes/parity-a/status",
            MERGE,
            &json!({"metadata": {"labels": {"parity/status": "1"}}, "spec": {"unschedulable": true}}),
        )
        .await;
    t.check(
        "a merge patch of nodes/status changes metadata but not the spec",
        json!([
            via_status.code,
            via_status.body.pointer("/metadata/labels/parity~1status"),
            via_status.body.pointer("/spec/unschedulable")
        ]),
        json!([200, "1", null]),
    );
    let ns_status = t
        .patch(
            &format!("/api/v1/namespaces/{NS}/status"),
            MERGE,
            &json!({"metadata": {"labels": {"parity/status": "1"}}, "spec": {"finalizers": []}}),
        )
        .await;
    t.check(
        "a merge patch of namespaces/status changes metadata but not the spec",
        json!([
            ns_status.code,
            ns_status.body.pointer("/metadata/labels/parity~1status"),
            ns_status.body.pointer("/spec/finalizers")
        ]),
        json!([200, "1", ["kubernetes"]]),
    );
}

async fn node_watches(t: &Target) {
    // The agent's watch: its own Node, by field selector (node-agent/src/watch.rs).
    let api: Api<Node> = Api::all(t.client.clone());
    let config = watcher::Config::default().fields("metadata.name=parity-a");
    let mut own = watcher::watcher(api, config).boxed();
    let init = collect_init(&mut own).await;
    t.check(
        "the agent's watch of its Node lists it",
        json!(init.iter().map(node_name).collect::<Vec<_>>()),
        json!(["parity-a"]),
    );
    // The reconciler's watch: every Node, metadata only (reconciler/src/controller/observe.rs).
    let meta: Api<PartialObjectMeta<Node>> = Api::all(t.client.clone());
    let mut all = watcher::watcher(meta, watcher::Config::default()).boxed();
    let init = collect_init(&mut all).await;
    t.check(
        "the reconciler's metadata watch lists every Node",
        json!(
            init.iter()
                .map(|m| m.metadata.name.clone().unwrap_or_default())
                .collect::<Vec<_>>()
        ),
        json!(["parity-a", "parity-b"]),
    );

    let patched = t
        .patch(
            "/api/v1/nodes/parity-a",
            MERGE,
            &json!({"metadata": {"annotations": {"kubelet-gitops.io/state": "Done"}}}),
        )
        .await;
    t.check("annotate the watched Node", json!(patched.code), json!(200));
    match next_apply(&mut own).await {
        Some(n) => t.check(
            "the agent's watch sees the annotation",
            json!(n.metadata.annotations.unwrap_or_default()["kubelet-gitops.io/state"]),
            json!("Done"),
        ),
        None => t.fail("the agent's watch sees the annotation", "no event"),
    }
    match next_apply(&mut all).await {
        Some(m) => t.check(
            "the reconciler's watch sees the annotation",
            json!([
                m.metadata.name,
                m.metadata.annotations.unwrap_or_default()["kubelet-gitops.io/state"]
            ]),
            json!(["parity-a", "Done"]),
        ),
        None => t.fail("the reconciler's watch sees the annotation", "no event"),
    }
    // A status-only write reaches the agent's full watch as well.
    let heartbeat = t
        .patch(
            "/api/v1/nodes/parity-a/status",
            STRATEGIC,
            &json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}),
        )
        .await;
    t.check("a heartbeat", json!(heartbeat.code), json!(200));
    match next_apply(&mut own).await {
        Some(n) => t.check(
            "the agent's watch sees the heartbeat",
            json!(condition_types(
                &serde_json::to_value(&n).unwrap_or_default()
            )),
            json!([
                "MemoryPressure",
                "DiskPressure",
                "KubeletConfigReady",
                "Ready"
            ]),
        ),
        None => t.fail("the agent's watch sees the heartbeat", "no event"),
    }
}

/// managedFields in the cases that differ between an Update and an apply, the main
/// resource and `status`.
async fn ownership(t: &Target) {
    let of = |a: &Answer, manager: &str| {
        json!(managed(&a.body).as_array().map(|l| {
            l.iter()
                .filter(|e| e["manager"] == manager)
                .cloned()
                .collect::<Vec<_>>()
        }))
    };
    let lists = t
        .patch(
            "/api/v1/nodes/parity-b/status?fieldManager=parity-lists",
            MERGE,
            &json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.2"}],
                               "conditions": [{"type": "Ready", "status": "True"}, {"type": "PIDPressure", "status": "False"}]}}),
        )
        .await;
    // The new list and element are fields of their own (`.`); the null times a decoded
    // condition has are fields too, set (PIDPressure) or changed (Ready); Ready's
    // reason and message went, so nobody owns them.
    t.check(
        "a status write that creates a list and replaces another",
        json!([lists.code, of(&lists, "parity-lists")]),
        json!([200, [{"manager": "parity-lists", "operation": "Update", "apiVersion": "v1",
            "fieldsType": "FieldsV1", "subresource": "status", "fieldsV1": {"f:status": {
                "f:addresses": {".": {}, "k:{\"type\":\"InternalIP\"}": {".": {}, "f:address": {}, "f:type": {}}},
                "f:conditions": {
                    "k:{\"type\":\"PIDPressure\"}": {".": {}, "f:lastHeartbeatTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}},
                    "k:{\"type\":\"Ready\"}": {"f:lastHeartbeatTime": {}, "f:lastTransitionTime": {}},
                },
            }}}]]),
    );
    let labels = t
        .patch(
            "/api/v1/nodes/parity-b/status?fieldManager=parity-status-meta",
            MERGE,
            &json!({"metadata": {"labels": {"parity/by-status": "1"}}}),
        )
        .await;
    t.check(
        "a status write owns the metadata it changes",
        json!([labels.code, of(&labels, "parity-status-meta")]),
        json!([200, [{"manager": "parity-status-meta", "operation": "Update", "apiVersion": "v1",
            "fieldsType": "FieldsV1", "subresource": "status",
            "fieldsV1": {"f:metadata": {"f:labels": {"f:parity/by-status": {}}}}}]]),
    );
    let applied = t
        .patch(
            "/api/v1/nodes/parity-b?fieldManager=parity-apply",
            APPLY,
            &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "parity-b",
                    "annotations": {"parity/applied": "1"}}, "spec": {"podCIDR": "10.1.0.0/24"}}),
        )
        .await;
    t.check(
        "an apply owns what it names, no more",
        json!([
            applied.code,
            applied.body.pointer("/spec/podCIDRs"),
            of(&applied, "parity-apply")
        ]),
        json!([200, ["10.1.0.0/24"], [{"manager": "parity-apply", "operation": "Apply", "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:annotations": {"f:parity/applied": {}}}, "f:spec": {"f:podCIDR": {}}}}]]),
    );
}

async fn secrets(t: &Target) {
    let base = format!("/api/v1/namespaces/{NS}/secrets");
    let created = t
        .post(
            &base,
            &json!({"metadata": {"name": "parity-secret"}, "stringData": {"user": "admin"}}),
        )
        .await;
    t.check(
        "create a Secret from stringData",
        created.fields(&["/data", "/stringData", "/type", "/metadata/generation"]),
        json!({"code": 201, "/data": {"user": "YWRtaW4="}, "/stringData": null, "/type": "Opaque", "/metadata/generation": null}),
    );
    let bad = t
        .post(
            &base,
            &json!({"metadata": {"name": "parity-badsecret"}, "data": {"k": "not base64!"}}),
        )
        .await;
    t.check(
        "create a Secret whose data is not base64",
        bad.status(),
        status(
            400,
            "BadRequest",
            "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input byte 3",
            Value::Null,
        ),
    );
    let v1 = t
        .post(
            "/apis/events.k8s.io/v1/namespaces/default/events",
            &json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                    "metadata": {"name": "parity-a.v1"},
                    "eventTime": "2025-01-02T03:04:05.000000Z",
                    "regarding": {"kind": "Node", "name": "parity-a"},
                    "reason": "R", "note": "n", "type": "Normal", "action": "A",
                    "reportingController": "parity/test", "reportingInstance": "i"}),
        )
        .await;
    t.check(
        "create an events.k8s.io/v1 Event",
        v1.fields(&[
            "/eventTime",
            "/deprecatedSource",
            "/deprecatedFirstTimestamp",
            "/deprecatedLastTimestamp",
            "/deprecatedCount",
            "/reportingController",
        ]),
        json!({"code": 201, "/eventTime": "2025-01-02T03:04:05.000000Z", "/deprecatedSource": {},
               "/deprecatedFirstTimestamp": null, "/deprecatedLastTimestamp": null,
               "/deprecatedCount": null, "/reportingController": "parity/test"}),
    );
    let core = t.get("/api/v1/namespaces/default/events/parity-a.v1").await;
    t.check(
        "the events.k8s.io/v1 Event through core/v1",
        core.fields(&[
            "/eventTime",
            "/source",
            "/firstTimestamp",
            "/count",
            "/reportingComponent",
            "/message",
        ]),
        json!({"code": 200, "/eventTime": "2025-01-02T03:04:05.000000Z", "/source": {},
               "/firstTimestamp": null, "/count": null, "/reportingComponent": "parity/test",
               "/message": "n"}),
    );
}

async fn node_delete(t: &Target) {
    let meta: Api<PartialObjectMeta<Node>> = Api::all(t.client.clone());
    let mut all = watcher::watcher(meta, watcher::Config::default()).boxed();
    collect_init(&mut all).await;
    let deleted = t.delete("/api/v1/nodes/parity-b", None).await;
    t.check(
        "delete a Node",
        json!([
            deleted.code,
            deleted.body["kind"],
            deleted.body["status"],
            deleted.body.pointer("/details/name"),
            deleted.body.pointer("/details/kind")
        ]),
        json!([200, "Status", "Success", "parity-b", "nodes"]),
    );
    let mut seen = None;
    while let Ok(Some(Ok(e))) = tokio::time::timeout(EVENT_WAIT, all.next()).await {
        if let watcher::Event::Delete(m) = e {
            seen = m.metadata.name;
            break;
        }
    }
    t.check(
        "the reconciler's watch sees the Node go",
        json!(seen),
        json!("parity-b"),
    );
    let again = t.delete("/api/v1/nodes/parity-b", None).await;
    t.check(
        "delete a missing Node",
        again.status(),
        status(
            404,
            "NotFound",
            "nodes \"parity-b\" not found",
            json!({"name": "parity-b", "kind": "nodes"}),
        ),
    );
}

fn published(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
            labels: Some(
                [
                    ("app.kubernetes.io/managed-by", RECONCILER),
                    ("kubelet-gitops.io/pool", "gpu"),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ),
            annotations: Some(
                [("kubelet-gitops.io/source-commit", "0123abcd")]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        immutable: Some(true),
        data: Some(
            [("kubelet", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 64\n")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..ConfigMap::default()
    }
}

async fn configmaps(t: &Target) {
    // The reconciler publishes (reconciler/src/publish.rs).
    let api: Api<ConfigMap> = Api::namespaced(t.client.clone(), NS);
    let pp = PostParams {
        field_manager: Some(RECONCILER.into()),
        ..PostParams::default()
    };
    let cm = published("kubelet-gpu-abc");
    match api.create(&pp, &cm).await {
        Ok(c) => {
            let v = serde_json::to_value(&c).unwrap_or_default();
            t.check(
                "publish an immutable ConfigMap",
                json!([
                    v["immutable"],
                    v["data"],
                    v.pointer("/metadata/labels"),
                    v.pointer("/metadata/annotations"),
                    v.pointer("/metadata/generation"),
                ]),
                json!([
                    true,
                    cm.data,
                    cm.metadata.labels,
                    cm.metadata.annotations,
                    null
                ]),
            );
            t.check(
                "the published ConfigMap's managedFields",
                managed(&v),
                json!([{"manager": RECONCILER, "operation": "Update", "apiVersion": "v1",
                        "fieldsType": "FieldsV1", "fieldsV1": {
                    "f:data": {".": {}, "f:kubelet": {}},
                    "f:immutable": {},
                    "f:metadata": {
                        "f:annotations": {".": {}, "f:kubelet-gitops.io/source-commit": {}},
                        "f:labels": {".": {}, "f:app.kubernetes.io/managed-by": {}, "f:kubelet-gitops.io/pool": {}},
                    },
                }}]),
            );
        }
        Err(e) => t.fail("publish an immutable ConfigMap", e),
    }
    match api.create(&pp, &cm).await {
        Err(kube::Error::Api(s)) => t.check(
            "publish it again: AlreadyExists, which the reconciler takes as success",
            json!([s.code, s.reason, s.message, s.is_already_exists()]),
            json!([
                409,
                "AlreadyExists",
                "configmaps \"kubelet-gpu-abc\" already exists",
                true
            ]),
        ),
        other => t.fail(
            "publish it again",
            format!("{:?}", other.map(|c| c.metadata.name)),
        ),
    }
    let elsewhere: Api<ConfigMap> = Api::namespaced(t.client.clone(), "parity-none");
    let mut lost = published("kubelet-gpu-abc");
    lost.metadata.namespace = Some("parity-none".into());
    match elsewhere.create(&pp, &lost).await {
        Err(kube::Error::Api(s)) => t.check(
            "publish into a missing namespace",
            json!([s.code, s.reason, s.message]),
            json!([404, "NotFound", "namespaces \"parity-none\" not found"]),
        ),
        other => t.fail(
            "publish into a missing namespace",
            format!("{:?}", other.map(|c| c.metadata.name)),
        ),
    }

    let path = format!("/api/v1/namespaces/{NS}/configmaps/kubelet-gpu-abc");
    let got = t.get(&path).await;
    t.check(
        "get the ConfigMap",
        got.fields(&["/immutable", "/metadata/name", "/metadata/namespace"]),
        json!({"code": 200, "/immutable": true, "/metadata/name": "kubelet-gpu-abc", "/metadata/namespace": NS}),
    );
    let missing = t
        .get(&format!("/api/v1/namespaces/{NS}/configmaps/kubelet-none"))
        .await;
    t.check(
        "get a missing ConfigMap",
        missing.status(),
        status(
            404,
            "NotFound",
            "configmaps \"kubelet-none\" not found",
            json!({"name": "kubelet-none", "kind": "configmaps"}),
        ),
    );
    let immutable = |field: &str| {
        status(
            422,
            "Invalid",
            &format!(
                "ConfigMap \"kubelet-gpu-abc\" is invalid: {field}: Forbidden: field is immutable when `immutable` is set"
            ),
            json!({"name": "kubelet-gpu-abc", "kind": "ConfigMap", "causes": [{
                "reason": "FieldValueForbidden",
                "message": "Forbidden: field is immutable when `immutable` is set",
                "field": field,
            }]}),
        )
    };
    let mut changed = got.body.clone();
    changed["data"]["kubelet"] = json!("maxPods: 65\n");
    let update = t.put(&path, &changed).await;
    t.check(
        "update the data of an immutable ConfigMap",
        update.status(),
        immutable("data"),
    );
    let patch = t
        .patch(&path, MERGE, &json!({"data": {"kubelet": "x"}}))
        .await;
    t.check(
        "patch the data of an immutable ConfigMap",
        patch.status(),
        immutable("data"),
    );
    let unset = t.patch(&path, MERGE, &json!({"immutable": false})).await;
    t.check(
        "make an immutable ConfigMap mutable",
        unset.status(),
        immutable("immutable"),
    );
    let relabel = t
        .patch(
            &path,
            MERGE,
            &json!({"metadata": {"labels": {"parity/extra": "1"}}}),
        )
        .await;
    t.check(
        "label an immutable ConfigMap",
        relabel.fields(&["/metadata/labels/parity~1extra"]),
        json!({"code": 200, "/metadata/labels/parity~1extra": "1"}),
    );

    // A mutable ConfigMap, updated with a stale resourceVersion.
    let mutable = t
        .post(
            &format!("/api/v1/namespaces/{NS}/configmaps"),
            &json!({"metadata": {"name": "parity-mutable"}, "data": {"k": "1"}}),
        )
        .await;
    t.check(
        "create a mutable ConfigMap",
        json!(mutable.code),
        json!(201),
    );
    let mut stale = mutable.body.clone();
    stale["data"]["k"] = json!("2");
    let first = t
        .put(
            &format!("/api/v1/namespaces/{NS}/configmaps/parity-mutable"),
            &stale,
        )
        .await;
    t.check(
        "update it with its resourceVersion",
        first.fields(&["/data"]),
        json!({"code": 200, "/data": {"k": "2"}}),
    );
    let conflict = t
        .put(
            &format!("/api/v1/namespaces/{NS}/configmaps/parity-mutable"),
            &stale,
        )
        .await;
    t.check(
        "update it again with the old resourceVersion",
        conflict.status(),
        status(
            409,
            "Conflict",
            "Operation cannot be fulfilled on configmaps \"parity-mutable\": the object has been modified; please apply your changes to the latest version and try again",
            json!({"name": "parity-mutable", "kind": "configmaps"}),
        ),
    );
    let number = t
        .post(
            &format!("/api/v1/namespaces/{NS}/configmaps"),
            &json!({"metadata": {"name": "parity-number"}, "data": {"k": 1}}),
        )
        .await;
    t.check(
        "create a ConfigMap whose data holds a number",
        number.status(),
        status(
            400,
            "BadRequest",
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct field ConfigMap.data of type string",
            Value::Null,
        ),
    );
    let label_number = t
        .post(
            &format!("/api/v1/namespaces/{NS}/configmaps"),
            &json!({"metadata": {"name": "parity-labelnumber", "labels": {"a": 1}}}),
        )
        .await;
    t.check(
        "create a ConfigMap whose label is a number",
        label_number.status(),
        status(
            400,
            "BadRequest",
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string",
            Value::Null,
        ),
    );
    let bad_key = t
        .post(
            &format!("/api/v1/namespaces/{NS}/configmaps"),
            &json!({"metadata": {"name": "parity-badkey"}, "data": {"a b": "1"}}),
        )
        .await;
    t.check(
        "create a ConfigMap with an invalid key",
        bad_key.status(),
        status(
            422,
            "Invalid",
            "ConfigMap \"parity-badkey\" is invalid: data[a b]: Invalid value: \"a b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
            json!({"name": "parity-badkey", "kind": "ConfigMap", "causes": [{
                "reason": "FieldValueInvalid",
                "message": "Invalid value: \"a b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                "field": "data[a b]",
            }]}),
        ),
    );
    let cms = format!("/api/v1/namespaces/{NS}/configmaps");
    let empty = t
        .post(
            &cms,
            &json!({"metadata": {"name": "parity-empty", "labels": {}, "annotations": {}}, "data": {}, "binaryData": {}}),
        )
        .await;
    t.check(
        "empty maps are not stored",
        json!([
            empty.code,
            empty.body.pointer("/metadata/labels"),
            empty.body.pointer("/metadata/annotations"),
            empty.body.get("data"),
            empty.body.get("binaryData"),
            empty.body.pointer("/metadata/managedFields"),
        ]),
        json!([201, null, null, null, null, null]),
    );
    let _ = t.delete(&format!("{cms}/parity-empty"), None).await;
    let with_rv = t
        .post(
            &format!("/api/v1/namespaces/{NS}/configmaps"),
            &json!({"metadata": {"name": "parity-rv", "resourceVersion": "5"}}),
        )
        .await;
    t.check(
        "create a ConfigMap with a resourceVersion (a 500 without a reason)",
        with_rv.status(),
        status(
            500,
            "",
            "resourceVersion should not be set on objects to be created",
            Value::Null,
        ),
    );
    let rv_get = t
        .get(&format!("{cms}/parity-mutable?resourceVersion=x"))
        .await;
    t.check(
        "get with a resourceVersion that is not a number",
        rv_get.status(),
        status(500, "", PARSE_X, Value::Null),
    );
    let rv_list = t.get(&format!("{cms}?resourceVersion=x")).await;
    t.check(
        "list with a resourceVersion that is not a number",
        rv_list.status(),
        status(
            400,
            "BadRequest",
            &format!("invalid resource version: {PARSE_X}"),
            Value::Null,
        ),
    );
    let rv_put = t
        .put(
            &format!("{cms}/parity-mutable"),
            &json!({"metadata": {"name": "parity-mutable", "resourceVersion": "x"}}),
        )
        .await;
    t.check(
        "update with a resourceVersion that is not a number",
        rv_put.status(),
        status(
            500,
            "",
            "strconv.ParseUint: parsing \"x\": invalid syntax",
            Value::Null,
        ),
    );
    let bad_continue = t.get(&format!("{cms}?limit=1&continue=bogus")).await;
    t.check(
        "list with a continue token that is not one",
        bad_continue.status(),
        status(
            400,
            "BadRequest",
            "invalid continue token: continue key is not valid: illegal base64 data at input byte 4",
            Value::Null,
        ),
    );

    // The reconciler's list: by its label.
    let selected = t
        .get(&format!(
            "/api/v1/namespaces/{NS}/configmaps?labelSelector=app.kubernetes.io%2Fmanaged-by%3D{RECONCILER}"
        ))
        .await;
    t.check(
        "list ConfigMaps by label",
        json!([selected.code, selected.names()]),
        json!([200, ["kubelet-gpu-abc"]]),
    );
    let page = t
        .get(&format!("/api/v1/namespaces/{NS}/configmaps?limit=1"))
        .await;
    t.check(
        "list ConfigMaps one page at a time",
        json!([
            page.code,
            page.names(),
            page.body
                .pointer("/metadata/continue")
                .and_then(Value::as_str)
                .is_some_and(|c| !c.is_empty()),
            page.body.pointer("/metadata/remainingItemCount"),
        ]),
        json!([200, ["kubelet-gpu-abc"], true, 1]),
    );

    // Delete with preconditions, then as the reconciler's garbage collection does.
    let uid = got.body["metadata"]["uid"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let rv = relabel.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let wrong_uid = t
        .delete(
            &path,
            Some(&json!({"preconditions": {"uid": "parity-uid"}})),
        )
        .await;
    t.check(
        "delete with a uid precondition that fails",
        wrong_uid.status(),
        status(
            409,
            "Conflict",
            &format!(
                "Operation cannot be fulfilled on ConfigMap \"kubelet-gpu-abc\": the UID in the precondition (parity-uid) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
            ),
            json!({"name": "kubelet-gpu-abc", "kind": "ConfigMap"}),
        ),
    );
    let wrong_rv = t
        .delete(
            &path,
            Some(&json!({"preconditions": {"resourceVersion": "1"}})),
        )
        .await;
    t.check(
        "delete with a resourceVersion precondition that fails",
        wrong_rv.status(),
        status(
            409,
            "Conflict",
            &format!(
                "Operation cannot be fulfilled on ConfigMap \"kubelet-gpu-abc\": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record ({rv}). The object might have been modified"
            ),
            json!({"name": "kubelet-gpu-abc", "kind": "ConfigMap"}),
        ),
    );
    match api
        .delete("kubelet-gpu-abc", &DeleteParams::default())
        .await
    {
        Ok(either) => t.check(
            "delete the ConfigMap",
            json!(
                either
                    .right()
                    .map(|s| json!([s.status, s.details.map(|d| [d.name, d.kind])]))
            ),
            json!(["Success", ["kubelet-gpu-abc", "configmaps"]]),
        ),
        Err(e) => t.fail("delete the ConfigMap", e),
    }
    match api
        .delete("kubelet-gpu-abc", &DeleteParams::default())
        .await
    {
        Err(kube::Error::Api(s)) => t.check(
            "delete it again: 404, which the reconciler takes as gone",
            json!([s.code, s.reason, s.message]),
            json!([404, "NotFound", "configmaps \"kubelet-gpu-abc\" not found"]),
        ),
        other => t.fail("delete it again", format!("{:?}", other.is_ok())),
    }
}

async fn configmap_watches(t: &Target) {
    let base = format!("/api/v1/namespaces/{NS}/configmaps");
    let selector = "labelSelector=parity%2Fwatch%3D1";
    let listed = t.get(&format!("{base}?{selector}")).await;
    let rv = listed.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let mut w = t
        .watch(&format!(
            "{base}?watch=true&{selector}&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=10"
        ))
        .await;
    let labelled = |v: &str| json!({"metadata": {"labels": {"parity/watch": v}}});
    let item = format!("{base}/parity-watched");
    let steps = [
        t.post(
            &base,
            &json!({"metadata": {"name": "parity-watched", "labels": {"parity/watch": "1"}}}),
        )
        .await
        .code,
        t.patch(&item, MERGE, &json!({"data": {"k": "v"}}))
            .await
            .code,
        t.patch(&item, MERGE, &labelled("2")).await.code,
        t.patch(&item, MERGE, &json!({"data": {"k": "w"}}))
            .await
            .code,
        t.patch(&item, MERGE, &labelled("1")).await.code,
        t.delete(&item, None).await.code,
    ];
    t.check(
        "create, change, relabel twice and delete a watched ConfigMap",
        json!(steps),
        json!([201, 200, 200, 200, 200, 200]),
    );
    // Read to the end of the stream (its timeout). Bookmarks are compared apart: how
    // many come is a documented difference (every 5 s on the sim, about once a minute on
    // the real server), the one 2 s before the timeout is not.
    let (mut events, mut last) = (Vec::new(), Value::Null);
    while let Some(e) = w.next(EVENT_WAIT).await {
        last = e["type"].clone();
        if e["type"] == "BOOKMARK" {
            continue;
        }
        let o = &e["object"];
        events.push(json!([
            e["type"],
            o.pointer("/metadata/name"),
            o.pointer("/metadata/labels/parity~1watch"),
            o.pointer("/data/k")
        ]));
    }
    // Leaving the selector is a DELETED of the object as it was, arriving an ADDED.
    t.check(
        "the watch's events, from a resourceVersion",
        json!(events),
        json!([
            ["ADDED", "parity-watched", "1", null],
            ["MODIFIED", "parity-watched", "1", "v"],
            ["DELETED", "parity-watched", "1", "v"],
            ["ADDED", "parity-watched", "1", "w"],
            ["DELETED", "parity-watched", "1", "w"],
        ]),
    );
    t.check(
        "the watch ends with a bookmark before its timeout",
        last,
        json!("BOOKMARK"),
    );
    // Bookmarks go out only once the store has moved past the watch's start: a quiet
    // watch gets none (not one every 5 s); one whose store moves on (a write its selector
    // does not match) gets the one 2 s before its timeout.
    let now = t.get(&format!("{base}?{selector}")).await;
    let now = now.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let watch_types = |mut w: Watch| async move {
        let mut types = Vec::new();
        while let Some(e) = w.next(EVENT_WAIT).await {
            types.push(e["type"].clone());
        }
        json!(types)
    };
    let quiet = t
        .watch(&format!(
            "{base}?watch=true&{selector}&resourceVersion={now}&allowWatchBookmarks=true&timeoutSeconds=6"
        ))
        .await;
    t.check(
        "a watch of a quiet store gets no bookmark",
        watch_types(quiet).await,
        json!([]),
    );
    let moving = t
        .watch(&format!(
            "{base}?watch=true&{selector}&resourceVersion={now}&allowWatchBookmarks=true&timeoutSeconds=4"
        ))
        .await;
    let other = t
        .post(&base, &json!({"metadata": {"name": "parity-unwatched"}}))
        .await;
    t.check(
        "a write the watch does not see",
        json!(other.code),
        json!(201),
    );
    // How many is not the same: the real server sends one soon after the store moved as
    // well (docs/sim.md).
    let types = watch_types(moving).await;
    t.check(
        "a watch whose store moved on gets a bookmark before its timeout",
        json!(
            types
                .as_array()
                .is_some_and(|a| !a.is_empty() && a.iter().all(|x| x == "BOOKMARK"))
        ),
        json!(true),
    );
    let _ = t.delete(&format!("{base}/parity-unwatched"), None).await;

    let listed = t
        .post(
            &base,
            &json!({"metadata": {"name": "parity-listed", "labels": {"app.kubernetes.io/managed-by": "parity"}}}),
        )
        .await;
    t.check("create a ConfigMap to list", json!(listed.code), json!(201));
    let mut initial = t
        .watch(&format!(
            "{base}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&labelSelector=app.kubernetes.io%2Fmanaged-by&timeoutSeconds=30"
        ))
        .await;
    let mut events = Vec::new();
    while let Some(e) = initial.next(EVENT_WAIT).await {
        let end = e.pointer("/object/metadata/annotations/k8s.io~1initial-events-end");
        events.push(json!([e["type"], e.pointer("/object/metadata/name"), end]));
        if end.is_some() {
            break;
        }
    }
    t.check(
        "a watch-list's initial events",
        json!(events),
        json!([["ADDED", "parity-listed", null], ["BOOKMARK", null, "true"]]),
    );
    let bad_rv = t.get(&format!("{base}?watch=true&resourceVersion=x")).await;
    t.check(
        "a watch from a resourceVersion that is not a number",
        bad_rv.status(),
        status(500, "", PARSE_X, Value::Null),
    );
}

async fn leases(t: &Target) {
    // Leader election (reconciler/src/leader.rs): create, then conditional updates.
    let api: Api<Lease> = Api::namespaced(t.client.clone(), NS);
    let pp = PostParams {
        field_manager: Some(RECONCILER.into()),
        ..PostParams::default()
    };
    let at = |s: &str| {
        MicroTime(
            s.parse::<k8s_openapi::jiff::Timestamp>()
                .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
        )
    };
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some("kubelet-gitops".into()),
            namespace: Some(NS.into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("replica-1".into()),
            lease_duration_seconds: Some(15),
            acquire_time: Some(at("2025-01-02T03:04:05.5Z")),
            renew_time: Some(at("2025-01-02T03:04:05.5Z")),
            lease_transitions: Some(0),
            ..LeaseSpec::default()
        }),
    };
    let created = match api.create(&pp, &lease).await {
        Ok(l) => {
            let v = serde_json::to_value(&l).unwrap_or_default();
            t.check(
                "create the Lease",
                json!([v["spec"], v.pointer("/metadata/generation")]),
                json!([{
                    "holderIdentity": "replica-1", "leaseDurationSeconds": 15,
                    "acquireTime": "2025-01-02T03:04:05.500000Z",
                    "renewTime": "2025-01-02T03:04:05.500000Z",
                    "leaseTransitions": 0,
                }, null]),
            );
            Some(l)
        }
        Err(e) => {
            t.fail("create the Lease", e);
            None
        }
    };
    match api.create(&pp, &lease).await {
        Err(kube::Error::Api(s)) => t.check(
            "create the Lease again",
            json!([s.code, s.reason, s.message]),
            json!([
                409,
                "AlreadyExists",
                "leases.coordination.k8s.io \"kubelet-gitops\" already exists"
            ]),
        ),
        other => t.fail("create the Lease again", format!("{:?}", other.is_ok())),
    }
    if let Some(mut read) = created {
        let stale = read.clone();
        if let Some(s) = read.spec.as_mut() {
            s.renew_time = Some(at("2025-01-02T03:04:15Z"));
        }
        read.metadata.managed_fields = None;
        match api.replace("kubelet-gitops", &pp, &read).await {
            Ok(l) => t.check(
                "renew the Lease",
                json!(l.spec.and_then(|s| s.renew_time).map(|r| r.0.to_string())),
                json!("2025-01-02T03:04:15Z"),
            ),
            Err(e) => t.fail("renew the Lease", e),
        }
        match api.replace("kubelet-gitops", &pp, &stale).await {
            Err(kube::Error::Api(s)) => t.check(
                "renew the Lease from a stale read",
                json!([s.code, s.reason, s.message]),
                json!([
                    409,
                    "Conflict",
                    "Operation cannot be fulfilled on leases.coordination.k8s.io \"kubelet-gitops\": the object has been modified; please apply your changes to the latest version and try again"
                ]),
            ),
            other => t.fail(
                "renew the Lease from a stale read",
                format!("{:?}", other.is_ok()),
            ),
        }
    }
    let leases = format!("/apis/coordination.k8s.io/v1/namespaces/{NS}/leases");
    let seconds = t
        .post(
            &leases,
            &json!({"metadata": {"name": "parity-seconds"}, "spec": {"renewTime": "2025-01-02T03:04:05Z"}}),
        )
        .await;
    t.check(
        "a Lease time without microseconds",
        seconds.status(),
        status(
            400,
            "BadRequest",
            "Lease in version \"v1\" cannot be handled as a Lease: parsing time \"2025-01-02T03:04:05Z\" as \"2006-01-02T15:04:05.000000Z07:00\": cannot parse \"Z\" as \".000000\"",
            Value::Null,
        ),
    );
    let nanos = t
        .post(
            &leases,
            &json!({"metadata": {"name": "parity-nanos"}, "spec": {"renewTime": "2025-01-02T03:04:05.123456789Z"}}),
        )
        .await;
    t.check(
        "a Lease time in nanoseconds",
        nanos.status(),
        status(
            400,
            "BadRequest",
            "Lease in version \"v1\" cannot be handled as a Lease: parsing time \"2025-01-02T03:04:05.123456789Z\" as \"2006-01-02T15:04:05.000000Z07:00\": cannot parse \"789Z\" as \"Z07:00\"",
            Value::Null,
        ),
    );
    let offset = t
        .post(
            &leases,
            &json!({"metadata": {"name": "parity-offset"}, "spec": {"renewTime": "2025-01-02T03:04:05.123456+02:00"}}),
        )
        .await;
    t.check(
        "a Lease time with an offset is stored in UTC",
        offset.fields(&["/spec/renewTime"]),
        json!({"code": 201, "/spec/renewTime": "2025-01-02T01:04:05.123456Z"}),
    );
    let bare = t
        .post(&leases, &json!({"metadata": {"name": "parity-bare"}}))
        .await;
    t.check(
        "a Lease without a spec",
        bare.fields(&["/spec"]),
        json!({"code": 201, "/spec": {}}),
    );
    let zero = t
        .post(
            &leases,
            &json!({"metadata": {"name": "parity-zero"}, "spec": {"leaseDurationSeconds": 0}}),
        )
        .await;
    t.check(
        "a Lease of zero seconds",
        zero.status(),
        status(
            422,
            "Invalid",
            "Lease.coordination.k8s.io \"parity-zero\" is invalid: spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0",
            json!({"name": "parity-zero", "group": "coordination.k8s.io", "kind": "Lease", "causes": [{
                "reason": "FieldValueInvalid",
                "message": "Invalid value: 0: must be greater than 0",
                "field": "spec.leaseDurationSeconds",
            }]}),
        ),
    );
    let negative = t
        .post(
            &leases,
            &json!({"metadata": {"name": "parity-negative"}, "spec": {"leaseTransitions": -1}}),
        )
        .await;
    t.check(
        "a Lease with negative transitions",
        negative.status_without_causes(),
        status(
            422,
            "Invalid",
            "Lease.coordination.k8s.io \"parity-negative\" is invalid: spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0",
            json!({"name": "parity-negative", "group": "coordination.k8s.io", "kind": "Lease"}),
        ),
    );
}

async fn events(t: &Target) {
    // The agent's Events (node-agent/src/report.rs `event_object`).
    let api: Api<Event> = Api::namespaced(t.client.clone(), "default");
    let now = Time(
        "2025-03-04T05:06:07Z"
            .parse::<k8s_openapi::jiff::Timestamp>()
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    );
    let ev = Event {
        metadata: ObjectMeta {
            name: Some("parity-a.1833a1b2c3d4e5f6".into()),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some("parity-a".into()),
            uid: Some("parity-uid".into()),
            ..ObjectReference::default()
        },
        reason: Some("KubeletConfigApplied".into()),
        message: Some("the kubelet runs kubelet-gitops/kubelet-gpu-abc".into()),
        type_: Some("Normal".into()),
        count: Some(1),
        first_timestamp: Some(now.clone()),
        last_timestamp: Some(now),
        source: Some(EventSource {
            component: Some(AGENT.into()),
            host: Some("parity-a".into()),
        }),
        reporting_component: Some(AGENT.into()),
        reporting_instance: Some("parity-a".into()),
        ..Event::default()
    };
    match api.create(&PostParams::default(), &ev).await {
        Ok(_) => {}
        Err(e) => t.fail("post the agent's Event", e),
    }
    let got = t
        .get("/api/v1/namespaces/default/events/parity-a.1833a1b2c3d4e5f6")
        .await;
    t.check(
        "the agent's Event as stored",
        got.fields(&[
            "/involvedObject",
            "/reason",
            "/type",
            "/count",
            "/firstTimestamp",
            "/lastTimestamp",
            "/eventTime",
            "/source",
            "/reportingComponent",
            "/reportingInstance",
            "/metadata/generation",
        ]),
        json!({
            "code": 200,
            "/involvedObject": {"kind": "Node", "name": "parity-a", "uid": "parity-uid", "apiVersion": "v1"},
            "/reason": "KubeletConfigApplied",
            "/type": "Normal",
            "/count": 1,
            "/firstTimestamp": "2025-03-04T05:06:07Z",
            "/lastTimestamp": "2025-03-04T05:06:07Z",
            "/eventTime": null,
            "/source": {"component": AGENT, "host": "parity-a"},
            "/reportingComponent": AGENT,
            "/reportingInstance": "parity-a",
            "/metadata/generation": null,
        }),
    );
    // An object reference is atomic: one field for its owner.
    t.check(
        "the Event's managedFields",
        managed(&got.body),
        json!([{"manager": "unknown", "operation": "Update", "apiVersion": "v1",
                "fieldsType": "FieldsV1", "fieldsV1": {
            "f:count": {}, "f:firstTimestamp": {}, "f:involvedObject": {}, "f:lastTimestamp": {},
            "f:message": {}, "f:reason": {}, "f:reportingComponent": {}, "f:reportingInstance": {},
            "f:source": {"f:component": {}, "f:host": {}}, "f:type": {},
        }}]),
    );
    let listed = t
        .get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.kind%3DNode,involvedObject.name%3Dparity-a")
        .await;
    t.check(
        "list the Node's Events",
        json!([listed.code, listed.names()]),
        json!([200, ["parity-a.1833a1b2c3d4e5f6"]]),
    );
    let v1 = t
        .get("/apis/events.k8s.io/v1/namespaces/default/events/parity-a.1833a1b2c3d4e5f6")
        .await;
    t.check(
        "the Event through events.k8s.io/v1",
        v1.fields(&[
            "/regarding",
            "/note",
            "/reportingController",
            "/eventTime",
            "/deprecatedCount",
            "/deprecatedFirstTimestamp",
            "/deprecatedSource",
        ]),
        json!({
            "code": 200,
            "/regarding": {"kind": "Node", "name": "parity-a", "uid": "parity-uid", "apiVersion": "v1"},
            "/note": "the kubelet runs kubelet-gitops/kubelet-gpu-abc",
            "/reportingController": AGENT,
            "/eventTime": null,
            "/deprecatedCount": 1,
            "/deprecatedFirstTimestamp": "2025-03-04T05:06:07Z",
            "/deprecatedSource": {"component": AGENT, "host": "parity-a"},
        }),
    );
    let minimal = t
        .post(
            "/api/v1/namespaces/default/events",
            &json!({"metadata": {"name": "parity-a.minimal"},
                    "involvedObject": {"kind": "Node", "name": "parity-a"},
                    "reason": "R", "message": "m", "type": "Normal", "count": 0,
                    "firstTimestamp": "2025-01-02T03:04:05.678+01:00"}),
        )
        .await;
    t.check(
        "a minimal Event, as stored",
        minimal.fields(&[
            "/count",
            "/source",
            "/firstTimestamp",
            "/lastTimestamp",
            "/eventTime",
            "/reportingComponent",
            "/reportingInstance",
        ]),
        json!({
            "code": 201,
            "/count": null,
            "/source": {},
            "/firstTimestamp": "2025-01-02T02:04:05Z",
            "/lastTimestamp": null,
            "/eventTime": null,
            "/reportingComponent": "",
            "/reportingInstance": "",
        }),
    );
    let minimal_v1 = t
        .get("/apis/events.k8s.io/v1/namespaces/default/events/parity-a.minimal")
        .await;
    t.check(
        "a minimal Event through events.k8s.io/v1",
        minimal_v1.fields(&[
            "/reportingController",
            "/reportingInstance",
            "/deprecatedSource",
            "/deprecatedFirstTimestamp",
            "/deprecatedLastTimestamp",
            "/eventTime",
        ]),
        json!({
            "code": 200,
            "/reportingController": null,
            "/reportingInstance": null,
            "/deprecatedSource": {},
            "/deprecatedFirstTimestamp": "2025-01-02T02:04:05Z",
            "/deprecatedLastTimestamp": null,
            "/eventTime": null,
        }),
    );
    let bad_time = t
        .post(
            "/api/v1/namespaces/default/events",
            &json!({"metadata": {"name": "parity-a.badtime"},
                    "involvedObject": {"kind": "Node", "name": "parity-a"},
                    "firstTimestamp": "yesterday"}),
        )
        .await;
    t.check(
        "an Event with a time that is not a time",
        bad_time.status(),
        status(
            400,
            "BadRequest",
            "Event in version \"v1\" cannot be handled as a Event: parsing time \"yesterday\" as \"2006-01-02T15:04:05Z07:00\": cannot parse \"yesterday\" as \"2006\"",
            Value::Null,
        ),
    );
}

async fn pods(t: &Target) {
    // The agent's readiness check lists the node's Pods (node-agent/src/agent/ready.rs).
    let api: Api<Pod> = Api::all(t.client.clone());
    match api
        .list(&ListParams::default().fields("spec.nodeName=parity-a"))
        .await
    {
        Ok(l) => t.check("list the Node's Pods", json!(l.items.len()), json!(0)),
        Err(e) => t.fail("list the Node's Pods", e),
    }

    // The reconciler's drain evicts with kube-rs, whose Eviction body has no apiVersion
    // and kind (reconciler/src/controller/drain.rs): the server takes the subresource's
    // kind as the default. No budget selects the pod: the eviction goes through.
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), "default");
    // Without a controller-manager no one creates the namespace's `default`
    // ServiceAccount, which the real server's admission looks up for a pod.
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(t.client.clone(), "default");
    let account = serde_json::from_value(json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "default", "namespace": "default"}}))
    .expect("a ServiceAccount");
    match accounts.create(&PostParams::default(), &account).await {
        Ok(_) => {}
        // 409: there already; 404: the sim serves no ServiceAccounts and needs none.
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {}
        Err(e) => t.fail("create the default ServiceAccount", e),
    }
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "parity-evicted", "namespace": "default"},
        "spec": {"nodeName": "parity-a", "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
    }))
    .expect("a pod");
    if let Err(e) = pods.create(&PostParams::default(), &pod).await {
        t.fail("create a pod to evict", e);
        return;
    }
    match pods
        .evict("parity-evicted", &kube::api::EvictParams::default())
        .await
    {
        Ok(status) => t.check(
            "evict a pod with kube-rs's Eviction body",
            json!(status.is_success()),
            json!(true),
        ),
        Err(e) => t.fail("evict a pod with kube-rs's Eviction body", e),
    }
    let _ = pods
        .delete(
            "parity-evicted",
            &DeleteParams {
                grace_period_seconds: Some(0),
                ..DeleteParams::default()
            },
        )
        .await;
}

async fn kubectl(t: &Target) {
    let k = |args: &'static [&'static str]| t.kubectl(args);
    t.check(
        "kubectl get a missing ConfigMap",
        k(&["get", "configmap", "parity-none", "-n", NS]).await,
        json!([
            1,
            "",
            "Error from server (NotFound): configmaps \"parity-none\" not found\n"
        ]),
    );
    t.check(
        "kubectl create an existing ConfigMap",
        k(&["create", "configmap", "parity-mutable", "-n", NS]).await,
        json!([
            1,
            "",
            "error: failed to create configmap: configmaps \"parity-mutable\" already exists\n"
        ]),
    );
    t.check(
        "kubectl annotate a Node",
        k(&["annotate", "node", "parity-a", "parity/kubectl=yes"]).await,
        json!([0, "node/parity-a annotated\n", ""]),
    );
    t.check(
        "kubectl label a Node without --overwrite",
        k(&["label", "node", "parity-a", "node.kubernetes.io/pool=cpu"]).await,
        json!([
            1,
            "",
            "error: 'node.kubernetes.io/pool' already has a value (gpu), and --overwrite is false\n"
        ]),
    );
    t.check(
        "kubectl get Nodes by label",
        k(&[
            "get",
            "nodes",
            "-l",
            "node.kubernetes.io/pool=gpu",
            "-o",
            "name",
        ])
        .await,
        json!([0, "node/parity-a\n", ""]),
    );
    t.check(
        "kubectl get a Node's annotation",
        k(&[
            "get",
            "node",
            "parity-a",
            "-o",
            "jsonpath={.metadata.annotations.parity/kubectl}",
        ])
        .await,
        json!([0, "yes", ""]),
    );
    t.check(
        "kubectl get ConfigMaps (the server's table)",
        first_columns(
            k(&["get", "configmaps", "-n", NS, "-l", "parity/watch!=3"]).await,
            2,
        ),
        json!([
            ["NAME", "DATA"],
            ["parity-listed", "0"],
            ["parity-mutable", "1"]
        ]),
    );
    t.check(
        "kubectl patch a Node with a failing JSON patch test",
        k(&[
            "patch",
            "node",
            "parity-a",
            "--type=json",
            "-p",
            r#"[{"op":"test","path":"/metadata/name","value":"x"}]"#,
        ])
        .await,
        json!([
            1,
            "",
            "The request is invalid: the server rejected our request due to an error in our request\n"
        ]),
    );
    let manifest = t.dir_file(
        "parity-applied.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: parity-applied\n  namespace: parity\ndata:\n  k: \"1\"\n",
    );
    let file = manifest.display().to_string();
    t.check(
        "kubectl apply a new ConfigMap",
        t.kubectl(&["apply", "-f", &file]).await,
        json!([0, "configmap/parity-applied created\n", ""]),
    );
    let changed = t.dir_file(
        "parity-applied.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: parity-applied\n  namespace: parity\ndata:\n  k: \"2\"\n",
    );
    let file = changed.display().to_string();
    t.check(
        "kubectl apply it changed",
        t.kubectl(&["apply", "-f", &file]).await,
        json!([0, "configmap/parity-applied configured\n", ""]),
    );
    t.check(
        "kubectl apply it again",
        t.kubectl(&["apply", "-f", &file]).await,
        json!([0, "configmap/parity-applied unchanged\n", ""]),
    );
    t.check(
        "kubectl apply --server-side it",
        t.kubectl(&["apply", "--server-side", "-f", &file]).await,
        json!([0, "configmap/parity-applied serverside-applied\n", ""]),
    );
    let applied = t
        .get(&format!(
            "/api/v1/namespaces/{NS}/configmaps/parity-applied"
        ))
        .await;
    // kubectl moves client-side apply's ownership to its server-side manager by editing
    // managedFields (a JSON patch); the server keeps the last-applied annotation's owner.
    t.check(
        "the managers of kubectl's applies",
        json!([managers(&applied.body), managed_order(&applied.body)]),
        json!([
            ["kubectl", "kubectl-last-applied"],
            ["Apply/kubectl", "Apply/kubectl-last-applied"]
        ]),
    );
    t.check(
        "kubectl delete a ConfigMap",
        k(&["delete", "configmap", "parity-mutable", "-n", NS]).await,
        json!([0, "configmap \"parity-mutable\" deleted\n", ""]),
    );
}

// ---------------------------------------------------------------------------------------
// The harness.
// ---------------------------------------------------------------------------------------

const MERGE: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

const PARSE_X: &str =
    "resourceVersion: Invalid value: \"x\": strconv.ParseUint: parsing \"x\": invalid syntax";
const QUALIFIED_NAME: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// One API server under test, and the differences found on it so far.
struct Target {
    name: &'static str,
    base: String,
    http: reqwest::Client,
    client: kube::Client,
    kubeconfig: PathBuf,
    failures: Mutex<Vec<String>>,
}

/// An HTTP answer: its status code and its body (JSON, or a string when it is not).
struct Answer {
    code: u16,
    body: Value,
}

impl Target {
    /// `tls`: the cluster CA and the admin's certificate (the real server).
    async fn new(
        name: &'static str,
        base: &str,
        kubeconfig: &Path,
        tls: Option<(&Path, &CertFiles)>,
    ) -> Target {
        let builder = match tls {
            Some((ca, admin)) => real::tls_client(ca, Some(admin)).expect("a TLS client"),
            None => real::http_client(),
        };
        let builder = builder.timeout(Duration::from_secs(60));
        let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("the kubeconfig");
        let config =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .expect("a kube config");
        Target {
            name,
            base: base.trim_end_matches('/').to_string(),
            http: builder.build().expect("an HTTP client"),
            client: kube::Client::try_from(config).expect("a kube client"),
            kubeconfig: kubeconfig.to_path_buf(),
            failures: Mutex::new(Vec::new()),
        }
    }

    /// Records a difference unless `got` is `want`.
    fn check(&self, step: &str, got: Value, want: Value) {
        if got != want {
            self.fail(
                step,
                format!(
                    "\n    got:  {}\n    want: {}",
                    serde_json::to_string(&got).unwrap_or_default(),
                    serde_json::to_string(&want).unwrap_or_default()
                ),
            );
        }
    }

    fn fail(&self, step: &str, detail: impl std::fmt::Display) {
        let line = format!("[{}] {step}: {detail}", self.name);
        eprintln!("{line}");
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(line);
    }

    fn failures(&self) -> Vec<String> {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Fails the test with every difference found.
    fn finish(&self) {
        let failures = self.failures();
        assert!(
            failures.is_empty(),
            "{} step(s) answered differently from the real server on the {}:\n{}",
            failures.len(),
            self.name,
            failures.join("\n")
        );
    }

    async fn call_with(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<String>,
    ) -> Answer {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some(b) = body {
            req = req.body(b);
        }
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) => {
                self.fail(path, format!("request failed: {e}"));
                return Answer {
                    code: 0,
                    body: Value::Null,
                };
            }
        };
        let code = resp.status().as_u16();
        let bytes = resp.bytes().await.unwrap_or_default();
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        Answer { code, body }
    }

    async fn get(&self, path: &str) -> Answer {
        self.call_with("GET", path, &[], None).await
    }

    async fn send(&self, method: &str, path: &str, content_type: &str, body: &Value) -> Answer {
        self.call_with(
            method,
            path,
            &[("Content-Type", content_type)],
            Some(body.to_string()),
        )
        .await
    }

    async fn post(&self, path: &str, body: &Value) -> Answer {
        self.send("POST", path, "application/json", body).await
    }

    async fn put(&self, path: &str, body: &Value) -> Answer {
        self.send("PUT", path, "application/json", body).await
    }

    async fn patch(&self, path: &str, content_type: &str, body: &Value) -> Answer {
        self.send("PATCH", path, content_type, body).await
    }

    async fn delete(&self, path: &str, body: Option<&Value>) -> Answer {
        match body {
            Some(b) => self.send("DELETE", path, "application/json", b).await,
            None => self.call_with("DELETE", path, &[], None).await,
        }
    }

    /// Opens a watch stream.
    async fn watch(&self, path: &str) -> Watch {
        let resp = self
            .http
            .get(format!("{}{path}", self.base))
            .timeout(Duration::from_secs(300))
            .send()
            .await;
        Watch {
            resp: resp.ok(),
            buf: Vec::new(),
        }
    }

    /// Writes `text` to `name` beside the kubeconfig; its path.
    fn dir_file(&self, name: &str, text: &str) -> PathBuf {
        let path = self
            .kubeconfig
            .parent()
            .unwrap_or(Path::new("."))
            .join(name);
        std::fs::write(&path, text).expect("a manifest written");
        path
    }

    /// Runs kubectl 1.32 with this server's kubeconfig: `[exit code, stdout, stderr]`.
    async fn kubectl(&self, args: &[&str]) -> Value {
        let out = tokio::process::Command::new("kubectl")
            .arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .args(args)
            .output()
            .await;
        match out {
            Ok(o) => json!([
                o.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ]),
            Err(e) => json!([-1, "", format!("kubectl: {e}")]),
        }
    }
}

impl Answer {
    /// The code and the values at `pointers` (null where absent).
    fn fields(&self, pointers: &[&str]) -> Value {
        let mut m = serde_json::Map::new();
        m.insert("code".into(), json!(self.code));
        if !(200..300).contains(&self.code) {
            m.insert("body".into(), self.body.clone());
        }
        for p in pointers {
            m.insert(
                (*p).to_string(),
                self.body.pointer(p).cloned().unwrap_or(Value::Null),
            );
        }
        Value::Object(m)
    }

    /// The Status as code, reason, message and details (without the object's uid).
    fn status(&self) -> Value {
        let mut details = self.body.get("details").cloned().unwrap_or(Value::Null);
        if let Value::Object(d) = &mut details {
            d.remove("uid");
        }
        status(
            self.code,
            self.body["reason"].as_str().unwrap_or(""),
            self.body["message"].as_str().unwrap_or(""),
            details,
        )
    }

    /// [`Answer::status`] without the causes (their number is a documented difference).
    fn status_without_causes(&self) -> Value {
        let mut v = self.status();
        if let Some(d) = v.get_mut("details").and_then(Value::as_object_mut) {
            d.remove("causes");
        }
        v
    }

    /// The names of a list's items.
    fn names(&self) -> Value {
        json!(
            self.body["items"]
                .as_array()
                .map(|items| items
                    .iter()
                    .map(|i| i["metadata"]["name"].clone())
                    .collect::<Vec<_>>())
                .unwrap_or_default()
        )
    }
}

fn status(code: u16, reason: &str, message: &str, details: Value) -> Value {
    json!({"code": code, "reason": reason, "message": message, "details": details})
}

/// managedFields without the times, sorted by manager, operation and subresource (the
/// server sorts them by operation, time in seconds and manager: within one second the
/// order is a race, see [`managed_order`]).
fn managed(obj: &Value) -> Value {
    let mut list: Vec<Value> = obj
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for e in list.iter_mut().filter_map(Value::as_object_mut) {
        e.remove("time");
    }
    let key = |e: &Value| {
        ["manager", "operation", "subresource"].map(|k| e[k].as_str().unwrap_or("").to_string())
    };
    list.sort_by_key(key);
    Value::Array(list)
}

/// The managers in managedFields, in the server's order, as `operation/manager`.
fn managed_order(obj: &Value) -> Value {
    json!(
        obj.pointer("/metadata/managedFields")
            .and_then(Value::as_array)
            .map(|a| a
                .iter()
                .map(|e| format!(
                    "{}/{}",
                    e["operation"].as_str().unwrap_or(""),
                    e["manager"].as_str().unwrap_or("")
                ))
                .collect::<Vec<_>>())
            .unwrap_or_default()
    )
}

/// The managers in managedFields, sorted.
fn managers(obj: &Value) -> Value {
    json!(
        managed(obj)
            .as_array()
            .map(|a| a.iter().map(|e| e["manager"].clone()).collect::<Vec<_>>())
            .unwrap_or_default()
    )
}

fn condition_types(node: &Value) -> Value {
    json!(
        node.pointer("/status/conditions")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(|c| c["type"].clone()).collect::<Vec<_>>())
            .unwrap_or_default()
    )
}

/// A resourceVersion that is not the object's (one more than it).
fn bump(obj: &Value) -> String {
    let rv: u64 = obj["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (rv + 1).to_string()
}

fn node_name(n: &Node) -> String {
    n.metadata.name.clone().unwrap_or_default()
}

/// The first `n` columns of kubectl's table output, per line.
fn first_columns(out: Value, n: usize) -> Value {
    let text = out[1].as_str().unwrap_or("");
    json!(
        text.lines()
            .map(|l| l.split_whitespace().take(n).collect::<Vec<_>>())
            .collect::<Vec<_>>()
    )
}

type EventStream<K> =
    futures::stream::BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>;

/// The objects of a kube-rs watcher's initial list (up to `InitDone`).
async fn collect_init<K>(stream: &mut EventStream<K>) -> Vec<K> {
    let mut out = Vec::new();
    loop {
        match tokio::time::timeout(EVENT_WAIT, stream.try_next()).await {
            Ok(Ok(Some(watcher::Event::InitApply(k)))) => out.push(k),
            Ok(Ok(Some(watcher::Event::InitDone))) | Err(_) | Ok(Ok(None)) | Ok(Err(_)) => {
                return out;
            }
            Ok(Ok(Some(_))) => {}
        }
    }
}

/// The next object a kube-rs watcher applies.
async fn next_apply<K>(stream: &mut EventStream<K>) -> Option<K> {
    loop {
        match tokio::time::timeout(EVENT_WAIT, stream.try_next()).await {
            Ok(Ok(Some(watcher::Event::Apply(k)))) => return Some(k),
            Ok(Ok(Some(_))) => {}
            _ => return None,
        }
    }
}

/// A raw watch stream, read one JSON line at a time.
struct Watch {
    resp: Option<reqwest::Response>,
    buf: Vec<u8>,
}

impl Watch {
    /// The next event; `None` when the stream ended or nothing came within `wait`.
    async fn next(&mut self, wait: Duration) -> Option<Value> {
        loop {
            if let Some(i) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return serde_json::from_slice(&line).ok();
            }
            let resp = self.resp.as_mut()?;
            match tokio::time::timeout(wait, resp.chunk()).await {
                Ok(Ok(Some(bytes))) => self.buf.extend_from_slice(&bytes),
                _ => return None,
            }
        }
    }
}
