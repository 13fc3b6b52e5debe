//! Readiness beyond the kubelet's own endpoints: the Node's `Ready` condition, and the
//! pods on the node that were Ready before a restart (a kubelet restart briefly flips
//! them, kubernetes/kubernetes#100277), so that `Done` means workloads are back too.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::ListParams;
use kube::{Api, Client};

/// The Node's `Ready` condition: `(status, message)`, `None` without one.
pub fn node_ready(node: &Node) -> Option<(String, String)> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| (c.status.clone(), c.message.clone().unwrap_or_default()))
}

/// Whether the Node is Ready.
pub fn is_node_ready(node: &Node) -> bool {
    node_ready(node).is_some_and(|(s, _)| s == "True")
}

/// `namespace/name` of every pod in `pods` whose `Ready` condition is `True`.
pub fn ready_pods(pods: &[Pod]) -> BTreeSet<String> {
    pods.iter()
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(pod_key)
        .collect()
}

fn pod_key(p: &Pod) -> String {
    format!(
        "{}/{}",
        p.metadata.namespace.as_deref().unwrap_or_default(),
        p.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Of the pods in `before`, those that still exist in `now` and are not Ready. A pod
/// that is gone (deleted, evicted) is not waited for.
pub fn still_unready(before: &BTreeSet<String>, now: &[Pod]) -> Vec<String> {
    let existing: BTreeSet<String> = now.iter().map(pod_key).collect();
    let ready = ready_pods(now);
    before
        .iter()
        .filter(|p| existing.contains(*p) && !ready.contains(*p))
        .cloned()
        .collect()
}

/// The pods scheduled on `node` (field selector `spec.nodeName`).
pub async fn pods_on(client: &Client, node: &str) -> Result<Vec<Pod>, kube::Error> {
    let api: Api<Pod> = Api::all(client.clone());
    let list = api
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await?;
    Ok(list.items)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(name: &str, ready: bool) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                ..ObjectMeta::default()
            },
            status: Some(PodStatus {
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    ..PodCondition::default()
                }]),
                ..PodStatus::default()
            }),
            ..Pod::default()
        }
    }

    #[test]
    fn only_pods_ready_before_and_still_present_are_waited_for() {
        let before = ready_pods(&[pod("a", true), pod("b", true), pod("c", false)]);
        assert_eq!(before.len(), 2);
        let now = [pod("a", true), pod("c", false)];
        assert!(
            still_unready(&before, &now).is_empty(),
            "b is gone, c was never ready"
        );
        let now = [pod("a", false), pod("b", true)];
        assert_eq!(still_unready(&before, &now), vec!["default/a".to_string()]);
    }
}
