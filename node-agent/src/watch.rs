//! What the agent watches: its own Node (field selector `metadata.name=<node>`) and the
//! one ConfigMap its desired-config names. Nothing else, so thousands of agents cost the
//! API server one narrow watch each.
//!
//! Both are kube-runtime watchers with the default backoff (kube-rs #577). The Node stream
//! is filtered to the changes the agent acts on, [`node_relevance`]: our annotations and
//! the reconciler's, the Node's `Ready` status and our own condition. The kubelet's
//! heartbeats (status every few seconds, `lastHeartbeatTime`) change none of these, so
//! they do not wake the agent.
//!
//! Each watch runs in a task that publishes the latest value on a
//! [`tokio::sync::watch`] channel; the agent's loop waits on `changed()` and always reads
//! the newest value, so a burst of events is one wake-up.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{PredicateConfig, WatchStreamExt};
use kube::{Api, Client};
use kubelet_gitops_core::protocol::{CONDITION_TYPE, ConfigRef, DOMAIN};
use tokio::sync::watch as channel;
use tokio::task::JoinHandle;
use tracing::{debug, warn};

/// The hash of everything on a Node that the agent acts on; equal hashes mean an event
/// the agent can ignore. Covers: the uid (a re-created Node), every `kubelet-gitops.io/`
/// annotation, the `Ready` status, and our `KubeletConfigReady` condition (status,
/// reason, message), so an edit of our report by someone else is seen and corrected.
pub fn node_relevance(node: &Node) -> Option<u64> {
    let mut h = DefaultHasher::new();
    node.metadata.uid.hash(&mut h);
    let prefix = format!("{DOMAIN}/");
    for (k, v) in node.metadata.annotations.iter().flatten() {
        if k.starts_with(&prefix) {
            (k, v).hash(&mut h);
        }
    }
    for c in node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
    {
        if c.type_ == "Ready" {
            ("Ready", &c.status).hash(&mut h);
        } else if c.type_ == CONDITION_TYPE {
            (CONDITION_TYPE, &c.status, &c.reason, &c.message).hash(&mut h);
        }
    }
    Some(h.finish())
}

/// Aborts the watch task when dropped.
#[derive(Debug)]
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The agent's own Node, as last seen (filtered by [`node_relevance`]).
#[derive(Debug)]
pub struct NodeWatch {
    rx: channel::Receiver<Option<Node>>,
    _task: AbortOnDrop,
}

impl NodeWatch {
    /// Starts watching node `name`.
    pub fn start(client: Client, name: &str) -> NodeWatch {
        let api: Api<Node> = Api::all(client);
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let (tx, rx) = channel::channel(None);
        let node_name = name.to_string();
        let task = tokio::spawn(async move {
            let stream = watcher::watcher(api, config)
                .default_backoff()
                .applied_objects()
                .predicate_filter(node_relevance, PredicateConfig::default());
            let mut stream = std::pin::pin!(stream);
            while let Some(item) = stream.next().await {
                match item {
                    Ok(node) => {
                        debug!(node = %node_name, "node changed");
                        if tx.send(Some(node)).is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        warn!(node = %node_name, error = %e, "node watch failed; retrying with backoff")
                    }
                }
            }
        });
        NodeWatch {
            rx,
            _task: AbortOnDrop(task),
        }
    }

    /// The Node as last seen, `None` before the first event.
    pub fn latest(&self) -> Option<Node> {
        self.rx.borrow().clone()
    }

    /// A receiver that wakes on every relevant change of the Node.
    pub fn receiver(&self) -> channel::Receiver<Option<Node>> {
        self.rx.clone()
    }
}

/// What the ConfigMap watch knows about the one ConfigMap.
#[derive(Debug, Clone, Default)]
pub struct ConfigMapState {
    /// The initial list finished: `object` is authoritative.
    pub listed: bool,
    /// The ConfigMap, or `None` when it does not exist.
    pub object: Option<ConfigMap>,
    /// The last watch error, cleared by the next successful event.
    pub error: Option<String>,
}

/// A watch on the one ConfigMap a desired-config names.
#[derive(Debug)]
pub struct ConfigMapWatch {
    target: ConfigRef,
    rx: channel::Receiver<ConfigMapState>,
    _task: AbortOnDrop,
}

impl ConfigMapWatch {
    /// Starts watching the ConfigMap `target` names. `None` for [`ConfigRef::Local`].
    pub fn start(client: Client, target: &ConfigRef) -> Option<ConfigMapWatch> {
        let ConfigRef::ConfigMap { namespace, name } = target else {
            return None;
        };
        let api: Api<ConfigMap> = Api::namespaced(client, namespace);
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let (tx, rx) = channel::channel(ConfigMapState::default());
        let shown = target.to_string();
        let task = tokio::spawn(async move {
            let stream = watcher::watcher(api, config).default_backoff();
            let mut stream = std::pin::pin!(stream);
            // Objects seen during a (re-)list, published when the list completes.
            let mut listing: Option<ConfigMap> = None;
            while let Some(item) = stream.next().await {
                let sent = match item {
                    Ok(Event::Init) => {
                        listing = None;
                        true
                    }
                    Ok(Event::InitApply(cm)) => {
                        listing = Some(cm);
                        true
                    }
                    Ok(Event::InitDone) => tx
                        .send(ConfigMapState {
                            listed: true,
                            object: listing.take(),
                            error: None,
                        })
                        .is_ok(),
                    Ok(Event::Apply(cm)) => tx
                        .send(ConfigMapState {
                            listed: true,
                            object: Some(cm),
                            error: None,
                        })
                        .is_ok(),
                    Ok(Event::Delete(_)) => tx
                        .send(ConfigMapState {
                            listed: true,
                            object: None,
                            error: None,
                        })
                        .is_ok(),
                    Err(e) => {
                        warn!(configmap = %shown, error = %e, "configmap watch failed; retrying with backoff");
                        tx.send_modify(|s| s.error = Some(e.to_string()));
                        !tx.is_closed()
                    }
                };
                if !sent {
                    return;
                }
            }
        });
        Some(ConfigMapWatch {
            target: target.clone(),
            rx,
            _task: AbortOnDrop(task),
        })
    }

    /// The ConfigMap this watch is about.
    pub fn target(&self) -> &ConfigRef {
        &self.target
    }

    /// What is known now.
    pub fn state(&self) -> ConfigMapState {
        self.rx.borrow().clone()
    }

    /// A receiver that wakes on every change.
    pub fn receiver(&self) -> channel::Receiver<ConfigMapState> {
        self.rx.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use k8s_openapi::jiff::Timestamp;

    fn node(annotations: &[(&str, &str)], ready: &str, heartbeat: &str) -> Node {
        let t: Timestamp = heartbeat.parse().unwrap();
        Node {
            metadata: ObjectMeta {
                name: Some("w1".into()),
                uid: Some("u1".into()),
                resource_version: Some(heartbeat.into()),
                annotations: Some(
                    annotations
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            status: Some(NodeStatus {
                conditions: Some(vec![
                    NodeCondition {
                        type_: "Ready".into(),
                        status: ready.into(),
                        last_heartbeat_time: Some(Time(t)),
                        ..NodeCondition::default()
                    },
                    NodeCondition {
                        type_: "MemoryPressure".into(),
                        status: "False".into(),
                        last_heartbeat_time: Some(Time(t)),
                        ..NodeCondition::default()
                    },
                ]),
                ..NodeStatus::default()
            }),
            ..Node::default()
        }
    }

    #[test]
    fn heartbeats_and_foreign_annotations_do_not_count() {
        let a = node(&[("x.io/y", "1")], "True", "2025-01-01T00:00:00Z");
        let b = node(&[("x.io/y", "2")], "True", "2025-01-01T00:00:10Z");
        assert_eq!(node_relevance(&a), node_relevance(&b));
    }

    #[test]
    fn our_annotations_and_ready_count() {
        let base = node(&[], "True", "2025-01-01T00:00:00Z");
        let desired = node(
            &[("kubelet-gitops.io/desired-config", "ns/a")],
            "True",
            "2025-01-01T00:00:00Z",
        );
        let not_ready = node(&[], "False", "2025-01-01T00:00:00Z");
        assert_ne!(node_relevance(&base), node_relevance(&desired));
        assert_ne!(node_relevance(&base), node_relevance(&not_ready));
        let mut ours = base.clone();
        ours.status
            .as_mut()
            .unwrap()
            .conditions
            .as_mut()
            .unwrap()
            .push(NodeCondition {
                type_: CONDITION_TYPE.into(),
                status: "True".into(),
                reason: Some("Done".into()),
                ..NodeCondition::default()
            });
        assert_ne!(node_relevance(&base), node_relevance(&ours));
    }
}
