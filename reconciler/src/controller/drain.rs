//! The effects of a drain: the cordon's read of the node, and each round's work on a
//! node's pods ([`DrainTask`]): list them, evict them through the Eviction API
//! (PodDisruptionBudgets respected: a 429 is recorded and tried again next round), or
//! delete them (`drainForce`), and report what is left ([`DrainSeen`]) for the planner.
//!
//! Which pods must leave ([`must_leave`]): every pod on the node but DaemonSet pods (the
//! DaemonSet controller would put them back at once; they tolerate the cordon), mirror
//! pods (the kubelet's static pods: the API cannot delete them) and finished pods
//! (Succeeded or Failed: they hold nothing). kubectl drain's `--ignore-daemonsets
//! --delete-emptydir-data --force`: a pod with no controller is evicted too, and an
//! emptyDir's data goes with its pod.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{DeleteParams, EvictParams, ListParams};

use crate::metrics::Metrics;
use crate::rollout::{DrainSeen, DrainTask, DrainWork};

/// The annotation the kubelet puts on the mirror pod of a static pod.
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// Whether `pod` must leave the node before a drain-class change (module docs).
pub(crate) fn must_leave(pod: &Pod) -> bool {
    let meta = &pod.metadata;
    let daemon = meta
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.kind == "DaemonSet");
    let mirror = meta
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_ANNOTATION));
    let finished = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Succeeded" || p == "Failed");
    !(daemon || mirror || finished)
}

/// `namespace/name` of a pod.
fn pod_name(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Why an eviction was refused, in the API server's words: the disruption budget's
/// cause (`The disruption budget web needs 2 healthy pods and has 2 currently`) when
/// there is one.
fn refusal(pod: &str, e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => {
            let causes: Vec<&str> = status
                .details
                .iter()
                .flat_map(|d| d.causes.iter())
                .map(|c| c.message.as_str())
                .filter(|m| !m.is_empty())
                .collect();
            let why = if causes.is_empty() {
                status.message.clone()
            } else {
                causes.join("; ")
            };
            if status.code == 429 {
                format!("eviction of pod {pod} refused (PodDisruptionBudget): {why}")
            } else {
                format!("eviction of pod {pod} failed ({}): {why}", status.code)
            }
        }
        other => format!(
            "eviction of pod {pod} failed: {}",
            kubelet_gitops_core::message::error_chain(other)
        ),
    }
}

/// Whether a person (or anyone) has already cordoned `node`: the cordon then leaves
/// `spec.unschedulable` alone and does not claim it. Also the node's resourceVersion,
/// for the cordon's precondition.
pub(crate) async fn read_cordon(
    client: &kube::Client,
    node: &str,
) -> Result<(bool, Option<String>), kube::Error> {
    let n = Api::<Node>::all(client.clone()).get(node).await?;
    let unschedulable = n.spec.and_then(|s| s.unschedulable).unwrap_or(false);
    Ok((unschedulable, n.metadata.resource_version))
}

/// Does one round of `task` and says what is left.
pub(crate) async fn run(client: &kube::Client, metrics: &Metrics, task: &DrainTask) -> DrainSeen {
    let node = &*task.node;
    let mut seen = DrainSeen::default();
    if task.work == DrainWork::Check {
        match read_cordon(client, node).await {
            Ok((unschedulable, _)) => seen.unschedulable = unschedulable,
            Err(e) => {
                metrics.api_error("get", "nodes", crate::api::error_code(&e));
                seen.blocker = Some(format!("reading the node failed: {e}"));
                seen.pods_left = usize::MAX;
                return seen;
            }
        }
    }
    let pods: Api<Pod> = Api::all(client.clone());
    let list = match pods
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await
    {
        Ok(l) => l,
        Err(e) => {
            metrics.api_error("list", "pods", crate::api::error_code(&e));
            seen.blocker = Some(format!("listing the node's pods failed: {e}"));
            seen.pods_left = usize::MAX;
            return seen;
        }
    };
    let leaving: Vec<&Pod> = list.items.iter().filter(|p| must_leave(p)).collect();
    seen.pods_left = leaving.len();
    for pod in leaving {
        let name = pod_name(pod);
        if pod.metadata.deletion_timestamp.is_some() {
            seen.blocker
                .get_or_insert_with(|| format!("pod {name} is terminating"));
            continue;
        }
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let api: Api<Pod> = Api::namespaced(client.clone(), ns);
        let pod_short = pod.metadata.name.as_deref().unwrap_or_default();
        let result = match task.work {
            DrainWork::Check => continue,
            DrainWork::Evict => api
                .evict(pod_short, &EvictParams::default())
                .await
                .map(|_| ()),
            DrainWork::Force => api
                .delete(pod_short, &DeleteParams::default())
                .await
                .map(|_| ()),
        };
        match result {
            Ok(()) => {
                tracing::info!(node, pod = %name, work = ?task.work, "pod evicted for a drain");
                seen.blocker
                    .get_or_insert_with(|| format!("pod {name} is terminating"));
            }
            // Gone already.
            Err(kube::Error::Api(s)) if s.code == 404 => seen.pods_left -= 1,
            Err(e) => {
                let why = refusal(&name, &e);
                if crate::api::error_code(&e) != 429 {
                    let (verb, resource) = match task.work {
                        DrainWork::Force => ("delete", "pods"),
                        _ => ("create", "pods/eviction"),
                    };
                    metrics.api_error(verb, resource, crate::api::error_code(&e));
                }
                tracing::info!(node, pod = %name, reason = %why, "eviction refused; trying again next round");
                // A budget's refusal says more than "terminating": it goes first.
                seen.blocker = Some(why);
            }
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn daemonset_mirror_and_finished_pods_stay_the_rest_leave() {
        let plain = pod(json!({"metadata": {"name": "a", "namespace": "n"}}));
        let replica = pod(
            json!({"metadata": {"name": "b", "namespace": "n", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "uid": "1", "controller": true}]}}),
        );
        let daemon = pod(
            json!({"metadata": {"name": "c", "namespace": "n", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "2", "controller": true}]}}),
        );
        // Owned by a DaemonSet but not as its controller: it leaves.
        let not_controlled = pod(
            json!({"metadata": {"name": "d", "namespace": "n", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "2"}]}}),
        );
        let mirror = pod(json!({"metadata": {"name": "e", "namespace": "kube-system",
            "annotations": {"kubernetes.io/config.mirror": "abc"}}}));
        let done = pod(
            json!({"metadata": {"name": "f", "namespace": "n"}, "status": {"phase": "Succeeded"}}),
        );
        let failed = pod(
            json!({"metadata": {"name": "g", "namespace": "n"}, "status": {"phase": "Failed"}}),
        );
        let running = pod(
            json!({"metadata": {"name": "h", "namespace": "n"}, "status": {"phase": "Running"}}),
        );
        assert!(must_leave(&plain));
        assert!(must_leave(&replica));
        assert!(!must_leave(&daemon));
        assert!(must_leave(&not_controlled));
        assert!(!must_leave(&mirror));
        assert!(!must_leave(&done));
        assert!(!must_leave(&failed));
        assert!(must_leave(&running));
    }

    #[test]
    fn a_budget_refusal_names_the_budget() {
        let status: kube::core::Status = serde_json::from_value(json!({
            "status": "Failure", "code": 429, "reason": "TooManyRequests",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "details": {"causes": [{"reason": "DisruptionBudget",
                "message": "The disruption budget web needs 2 healthy pods and has 2 currently"}]}
        }))
        .unwrap();
        let e = kube::Error::Api(Box::new(status));
        assert_eq!(
            refusal("shop/web-1", &e),
            "eviction of pod shop/web-1 refused (PodDisruptionBudget): The disruption budget \
             web needs 2 healthy pods and has 2 currently"
        );
    }
}
