//! What the agent watches: its own Node (field selector `metadata.name=<node>`) and the
//! one ConfigMap its desired-config names. Nothing else, so thousands of agents cost the
//! API server one narrow watch each.
//!
//! Both are kube-runtime watchers with the default backoff (kube-rs #577) and the
//! `--watch-timeout` ([`WatchTimeout`]: 30 minutes, not kube-runtime's 290 s, so that
//! idle agents re-open their watches six times less often). The Node stream
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
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use kubelet_gitops_core::protocol::{CONDITION_TYPE, ConfigRef, DOMAIN};
use tokio::sync::watch as channel;
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use crate::args::WatchTimeout;

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

/// Turns the Node watch's events into what the agent is told: `Some(node)` when
/// something it acts on changed ([`node_relevance`]), `None` when the Node is gone, and
/// nothing (`None` from [`NodeFilter::on_event`]) for events it can ignore.
#[derive(Debug, Default)]
pub struct NodeFilter {
    /// The relevance of the Node last sent; `None` when none is (gone, or never seen).
    last: Option<u64>,
    /// The Node showed up in the list in progress.
    listed: bool,
}

impl NodeFilter {
    /// What to send for `event`: `Some(Some(node))`, `Some(None)` (gone), or `None`.
    pub fn on_event(&mut self, event: Event<Node>) -> Option<Option<Node>> {
        match event {
            Event::Init => {
                self.listed = false;
                None
            }
            Event::InitApply(node) => {
                self.listed = true;
                self.changed(node)
            }
            Event::Apply(node) => self.changed(node),
            // The list is complete without the Node: it was deleted while the watch was
            // down (or never existed).
            Event::InitDone if !self.listed => self.gone(),
            Event::InitDone => None,
            Event::Delete(_) => self.gone(),
        }
    }

    fn changed(&mut self, node: Node) -> Option<Option<Node>> {
        let relevance = node_relevance(&node);
        if relevance.is_some() && relevance == self.last {
            return None;
        }
        self.last = relevance;
        Some(Some(node))
    }

    fn gone(&mut self) -> Option<Option<Node>> {
        self.last.take().map(|_| None)
    }
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
    /// Starts watching node `name`. The channel holds the Node as last seen, `None` before
    /// the first list and while the Node does not exist: a deletion (a node lifecycle
    /// controller, a person) sets it back to `None`, also one the watch missed while it
    /// was reconnecting (the Node is absent from the next list), and a Node of the same
    /// name created later (a new uid) is sent as any change.
    pub fn start(client: Client, name: &str, timeout: WatchTimeout) -> NodeWatch {
        let api: Api<Node> = Api::all(client);
        let config = watcher::Config::default()
            .fields(&format!("metadata.name={name}"))
            .timeout(timeout.secs());
        let (tx, rx) = channel::channel(None);
        let node_name = name.to_string();
        let task = tokio::spawn(async move {
            let stream = watcher::watcher(api, config).default_backoff();
            let mut stream = std::pin::pin!(stream);
            let mut filter = NodeFilter::default();
            while let Some(item) = stream.next().await {
                let event = match item {
                    Ok(e) => e,
                    Err(e) => {
                        warn!(node = %node_name, error = %e, "node watch failed; retrying with backoff");
                        continue;
                    }
                };
                if let Some(update) = filter.on_event(event) {
                    match &update {
                        Some(_) => debug!(node = %node_name, "node changed"),
                        None => debug!(node = %node_name, "node gone"),
                    }
                    if tx.send(update).is_err() {
                        return;
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
    pub fn start(
        client: Client,
        target: &ConfigRef,
        timeout: WatchTimeout,
    ) -> Option<ConfigMapWatch> {
        let ConfigRef::ConfigMap { namespace, name } = target else {
            return None;
        };
        let api: Api<ConfigMap> = Api::namespaced(client, namespace);
        let config = watcher::Config::default()
            .fields(&format!("metadata.name={name}"))
            .timeout(timeout.secs());
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

    #[test]
    fn a_deleted_node_is_told_once_and_a_new_one_of_the_same_name_is_seen() {
        let mut f = NodeFilter::default();
        let n = node(&[], "True", "2025-01-01T00:00:00Z");
        assert!(f.on_event(Event::Init).is_none());
        assert!(matches!(
            f.on_event(Event::InitApply(n.clone())),
            Some(Some(_))
        ));
        assert!(f.on_event(Event::InitDone).is_none());
        // A heartbeat: nothing.
        let beat = node(&[], "True", "2025-01-01T00:00:10Z");
        assert!(f.on_event(Event::Apply(beat)).is_none());
        assert_eq!(f.on_event(Event::Delete(n.clone())), Some(None));
        assert_eq!(f.on_event(Event::Delete(n.clone())), None, "told once");
        // Registered again: a new object, with a new uid.
        let mut again = n.clone();
        again.metadata.uid = Some("u2".into());
        assert!(matches!(
            f.on_event(Event::Apply(again.clone())),
            Some(Some(_))
        ));
        // Deleted while the watch was down: the next list does not have it.
        assert!(f.on_event(Event::Init).is_none());
        assert_eq!(f.on_event(Event::InitDone), Some(None));
        // A re-list that still has it says nothing new.
        let mut g = NodeFilter::default();
        g.on_event(Event::Apply(again.clone()));
        g.on_event(Event::Init);
        assert_eq!(g.on_event(Event::InitApply(again)), None);
        assert_eq!(g.on_event(Event::InitDone), None);
    }
}
