//! What the controller sees of the cluster: reflectors on Node metadata and on the
//! published ConfigMaps' metadata, the "something changed" signal they raise, and the
//! overlay of the controller's own writes that the watch has not shown yet.
//!
//! - Nodes are watched as `PartialObjectMeta<Node>` (no spec, no status) with
//!   `managedFields` stripped, so 5,000 nodes cost little memory, and a kubelet's status
//!   heartbeats carry no payload. A change wakes the controller only when a node's labels,
//!   its `kubelet-gitops.io/*` annotations or its existence changed (kube-rs #279: a
//!   status heartbeat, or the watch echoing a write, is not news).
//! - ConfigMaps are watched in the repository's namespace with the managed-by label,
//!   metadata only: their names are their content.
//! - [`PendingWrites`] holds the annotations the controller has just written until the
//!   watch shows them, so the next round plans against what the cluster has, not against
//!   a cache one event behind (which would assign a node twice, or count a busy node as
//!   idle and exceed maxUnavailable).

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kubelet_gitops_core::protocol::{DOMAIN, NODE_SETUP, POOL_LABEL};
use serde_json::Value;
use tokio::sync::Notify;

use crate::api::error_code;
use crate::gc::PublishedConfigMap;
use crate::metrics::Metrics;
use crate::model::NodeInfo;
use crate::publish::managed_selector;

/// The node cache.
pub(crate) type NodeStore = Store<PartialObjectMeta<Node>>;
/// The published-ConfigMap cache of one namespace.
pub(crate) type ConfigMapStore = Store<PartialObjectMeta<ConfigMap>>;

/// Whether an annotation key is part of the node protocol (ours or the agent's).
fn is_protocol_key(key: &str) -> bool {
    key.strip_prefix(DOMAIN)
        .is_some_and(|rest| rest.starts_with('/'))
}

/// A hash of what planning reads from a node: labels and protocol annotations.
fn fingerprint(meta: &PartialObjectMeta<Node>) -> u64 {
    let mut h = DefaultHasher::new();
    if let Some(labels) = &meta.metadata.labels {
        labels.hash(&mut h);
    }
    if let Some(annotations) = &meta.metadata.annotations {
        for (k, v) in annotations.iter().filter(|(k, _)| is_protocol_key(k)) {
            (k, v).hash(&mut h);
        }
    }
    h.finish()
}

/// What the node cache keeps of a Node: its metadata without `managedFields` and without
/// the annotations that are not the node protocol's (kubeadm's, the CSI drivers', the
/// CNI's, `last-applied-configuration`: nothing the controller reads), so that a
/// fleet's cache holds only what planning uses.
fn slim(node: &mut PartialObjectMeta<Node>) {
    node.metadata.managed_fields = None;
    if let Some(annotations) = node.metadata.annotations.as_mut() {
        annotations.retain(|k, _| is_protocol_key(k));
    }
}

/// Starts the node reflector: returns its store and the task that drives it (which runs
/// until dropped). `changed` is notified whenever planning could come out differently.
pub(crate) fn node_reflector(
    client: kube::Client,
    metrics: Arc<Metrics>,
    changed: Arc<Notify>,
) -> (NodeStore, impl Future<Output = ()> + Send + 'static) {
    let api: Api<PartialObjectMeta<Node>> = Api::all(client);
    let (reader, writer) = reflector::store();
    let stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(slim)
        .reflect(writer);
    let driver = drive(stream, "nodes", metrics, move |seen, event| {
        let name = |m: &PartialObjectMeta<Node>| m.metadata.name.clone().unwrap_or_default();
        match event {
            watcher::Event::Apply(m) => {
                let fp = fingerprint(m);
                if seen.insert(name(m), fp) != Some(fp) {
                    changed.notify_one();
                }
            }
            watcher::Event::Delete(m) => {
                seen.remove(&name(m));
                changed.notify_one();
            }
            watcher::Event::Init => seen.clear(),
            watcher::Event::InitApply(m) => {
                seen.insert(name(m), fingerprint(m));
            }
            watcher::Event::InitDone => changed.notify_one(),
        }
    });
    (reader, driver)
}

/// Starts a reflector on the published ConfigMaps of `namespace`.
pub(crate) fn configmap_reflector(
    client: kube::Client,
    namespace: &str,
    metrics: Arc<Metrics>,
    changed: Arc<Notify>,
) -> (ConfigMapStore, impl Future<Output = ()> + Send + 'static) {
    let api: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(client, namespace);
    let (reader, writer) = reflector::store();
    let stream = watcher::watcher(api, watcher::Config::default().labels(&managed_selector()))
        .default_backoff()
        .modify(|cm| cm.metadata.managed_fields = None)
        .reflect(writer);
    let driver = drive(
        stream,
        "configmaps",
        metrics,
        move |_: &mut HashMap<String, u64>, event| {
            if !matches!(event, watcher::Event::InitApply(_) | watcher::Event::Init) {
                changed.notify_one();
            }
        },
    );
    (reader, driver)
}

/// Polls a reflector stream forever, handing each event to `on_event` and counting
/// errors (the watcher backs off and resumes by itself).
async fn drive<K, S>(
    stream: S,
    resource: &'static str,
    metrics: Arc<Metrics>,
    mut on_event: impl FnMut(&mut HashMap<String, u64>, &watcher::Event<K>) + Send,
) where
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
{
    let mut seen = HashMap::new();
    let mut stream = std::pin::pin!(stream);
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => on_event(&mut seen, &event),
            Err(e) => {
                let code = match &e {
                    watcher::Error::InitialListFailed(e)
                    | watcher::Error::WatchStartFailed(e)
                    | watcher::Error::WatchFailed(e) => error_code(e),
                    watcher::Error::WatchError(s) => s.code,
                    _ => 0,
                };
                let verb = if matches!(e, watcher::Error::InitialListFailed(_)) {
                    "list"
                } else {
                    "watch"
                };
                metrics.api_error(verb, resource, code);
                tracing::warn!(resource, error = %kubelet_gitops_core::message::error_chain(&e), "watch failed; retrying with backoff");
            }
        }
    }
}

/// What planning needs of a node: name, labels, protocol annotations, creation time, the
/// agent's report of its kubelet set-up.
pub(crate) fn node_info(meta: &PartialObjectMeta<Node>) -> NodeInfo {
    let m = &meta.metadata;
    NodeInfo {
        name: m.name.clone().unwrap_or_default(),
        labels: m.labels.clone().unwrap_or_default(),
        annotations: m
            .annotations
            .iter()
            .flatten()
            .filter(|(k, _)| is_protocol_key(k) && *k != NODE_SETUP)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        created: m.creation_timestamp.as_ref().map(|t| t.0.to_string()),
        resource_version: m.resource_version.clone(),
        setup: m
            .annotations
            .as_ref()
            .and_then(|a| a.get(NODE_SETUP))
            .cloned(),
    }
}

/// A published ConfigMap as garbage collection sees it; `None` without the pool label.
pub(crate) fn published_configmap(
    meta: &PartialObjectMeta<ConfigMap>,
) -> Option<PublishedConfigMap> {
    let m = &meta.metadata;
    Some(PublishedConfigMap {
        name: m.name.clone()?,
        pool: m.labels.as_ref()?.get(POOL_LABEL)?.clone(),
        created: m
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default(),
    })
}

/// The nodes as planning sees them, kept between reconciles so that a node is converted
/// (labels and protocol annotations copied out of the cache) only when it changed: at
/// 5,000 nodes, converting all of them costs more than planning does.
#[derive(Debug, Default)]
pub(crate) struct NodeView {
    /// Sorted by name; pending writes laid over.
    infos: Vec<NodeInfo>,
    index: HashMap<String, usize>,
    /// The cache's resourceVersion each entry was built from (`None`: a pending write was
    /// laid over it, so it is rebuilt next time).
    built_from: Vec<Option<String>>,
}

impl NodeView {
    /// The nodes as of the last refresh.
    pub(crate) fn current(&self) -> &[NodeInfo] {
        &self.infos
    }

    /// Brings the view up to date with `store` and `pending`.
    pub(crate) fn refresh(
        &mut self,
        store: &NodeStore,
        pending: &mut PendingWrites,
    ) -> &[NodeInfo] {
        let state = store.state();
        let same_members = state.len() == self.infos.len()
            && state.iter().all(|m| {
                m.metadata
                    .name
                    .as_ref()
                    .is_some_and(|n| self.index.contains_key(n))
            });
        if !same_members {
            let mut infos: Vec<NodeInfo> = state.iter().map(|m| node_info(m)).collect();
            infos.sort_by(|a, b| a.name.cmp(&b.name));
            self.index = infos
                .iter()
                .enumerate()
                .map(|(i, n)| (n.name.clone(), i))
                .collect();
            pending.retain_nodes(|n| self.index.contains_key(n));
            self.built_from = infos
                .iter_mut()
                .map(|info| {
                    let rv = info.resource_version.clone();
                    if pending.overlay(info) { None } else { rv }
                })
                .collect();
            self.infos = infos;
            return &self.infos;
        }
        for meta in &state {
            let Some(i) = meta
                .metadata
                .name
                .as_ref()
                .and_then(|n| self.index.get(n))
                .copied()
            else {
                continue;
            };
            let rv = meta.metadata.resource_version.as_ref();
            if self.built_from[i].as_ref() != rv
                || rv.is_none()
                || pending.has_node(&self.infos[i].name)
            {
                let mut info = node_info(meta);
                self.built_from[i] = if pending.overlay(&mut info) {
                    None
                } else {
                    rv.cloned()
                };
                self.infos[i] = info;
            }
        }
        &self.infos
    }
}

/// How long a write may stay unseen before the overlay stops trusting it (someone else
/// changed the same annotations in between, and the watch will show theirs).
const PENDING_TTL: Duration = Duration::from_secs(30);

/// The controller's own writes, until the watch shows them.
#[derive(Debug, Default)]
pub(crate) struct PendingWrites {
    nodes: HashMap<String, PendingNode>,
    /// ConfigMaps created (name to creationTimestamp), until the ConfigMap store has them.
    created: HashMap<String, Option<String>>,
    /// ConfigMaps deleted, until the ConfigMap store drops them.
    deleted: HashSet<String>,
}

#[derive(Debug)]
struct PendingNode {
    /// Annotation to its new value (`None`: removed).
    annotations: BTreeMap<String, Option<String>>,
    at: Instant,
}

impl PendingWrites {
    /// Records a merge patch sent to `node` (`{"metadata":{"annotations":{...}}}`).
    pub(crate) fn node_patched(&mut self, node: &str, patch: &Value) {
        let Some(annotations) = patch
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
        else {
            return;
        };
        let annotations = annotations
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().map(str::to_string)))
            .collect();
        self.nodes.insert(
            node.to_string(),
            PendingNode {
                annotations,
                at: Instant::now(),
            },
        );
    }

    /// Applies the pending writes to `node` (as the store shows it), and forgets those
    /// the store already reflects or that are too old to trust. Returns whether anything
    /// was laid over the node.
    pub(crate) fn overlay(&mut self, node: &mut NodeInfo) -> bool {
        let Some(pending) = self.nodes.get(&node.name) else {
            return false;
        };
        let shown = pending
            .annotations
            .iter()
            .all(|(k, v)| node.annotations.get(k) == v.as_ref());
        if shown || pending.at.elapsed() > PENDING_TTL {
            self.nodes.remove(&node.name);
            return false;
        }
        for (k, v) in &pending.annotations {
            match v {
                Some(v) => node.annotations.insert(k.clone(), v.clone()),
                None => node.annotations.remove(k),
            };
        }
        true
    }

    /// Whether a write to `node` is pending.
    pub(crate) fn has_node(&self, node: &str) -> bool {
        self.nodes.contains_key(node)
    }

    /// Forgets pending writes to nodes that no longer exist.
    pub(crate) fn retain_nodes(&mut self, exists: impl Fn(&str) -> bool) {
        self.nodes.retain(|name, _| exists(name));
    }

    /// Records a ConfigMap this replica created (or found existing).
    pub(crate) fn configmap_created(&mut self, name: &str, created: Option<String>) {
        self.deleted.remove(name);
        self.created.insert(name.to_string(), created);
    }

    /// Records a ConfigMap this replica deleted.
    pub(crate) fn configmap_deleted(&mut self, name: &str) {
        self.created.remove(name);
        self.deleted.insert(name.to_string());
    }

    /// The published ConfigMaps: the store's, without those deleted, with those created
    /// that it does not show yet (`pool_of` names their pool).
    pub(crate) fn configmaps(
        &mut self,
        store: &[PublishedConfigMap],
        pool_of: impl Fn(&str) -> Option<String>,
    ) -> Vec<PublishedConfigMap> {
        let in_store: HashSet<&str> = store.iter().map(|c| c.name.as_str()).collect();
        self.deleted.retain(|n| in_store.contains(n.as_str()));
        self.created.retain(|n, _| !in_store.contains(n.as_str()));
        let mut out: Vec<PublishedConfigMap> = store
            .iter()
            .filter(|c| !self.deleted.contains(&c.name))
            .cloned()
            .collect();
        for (name, created) in &self.created {
            if let Some(pool) = pool_of(name) {
                out.push(PublishedConfigMap {
                    name: name.clone(),
                    pool,
                    created: created.clone().unwrap_or_default(),
                });
            }
        }
        out
    }

    /// Forgets everything (the namespace changed, or leadership was regained).
    /// Whether no write waits to be seen: planning reads the caches alone.
    pub(crate) fn is_empty(&self) -> bool {
        self.nodes.is_empty() && self.created.is_empty() && self.deleted.is_empty()
    }

    pub(crate) fn clear(&mut self) {
        *self = PendingWrites::default();
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_cache_keeps_only_the_protocols_annotations() {
        let mut meta = PartialObjectMeta::<Node>::default();
        meta.metadata.annotations = Some(
            [
                ("kubelet-gitops.io/desired-config", "ns/kubelet-a-1"),
                ("kubelet-gitops.io/node-setup", "{}"),
                ("node.alpha.kubernetes.io/ttl", "0"),
                ("kubectl.kubernetes.io/last-applied-configuration", "{...}"),
                ("kubelet-gitops.iox/not-ours", "x"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        );
        meta.metadata.managed_fields = Some(Vec::new());
        slim(&mut meta);
        let kept: Vec<&str> = meta
            .metadata
            .annotations
            .as_ref()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            kept,
            [
                "kubelet-gitops.io/desired-config",
                "kubelet-gitops.io/node-setup"
            ]
        );
        assert!(meta.metadata.managed_fields.is_none());
    }

    use super::*;
    use kubelet_gitops_core::protocol::{DESIRED_CONFIG, STATE};
    use serde_json::json;

    fn node(name: &str, ann: &[(&str, &str)]) -> NodeInfo {
        NodeInfo {
            name: name.into(),
            annotations: ann
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..NodeInfo::default()
        }
    }

    #[test]
    fn overlay_until_the_watch_shows_the_write() {
        let mut p = PendingWrites::default();
        p.node_patched(
            "n1",
            &json!({"metadata": {"annotations": {DESIRED_CONFIG: "ns/cm-1", "kubelet-gitops.io/pool": null}}}),
        );
        // The store is behind: the overlay applies.
        let mut stale = node("n1", &[("kubelet-gitops.io/pool", "old"), (STATE, "Done")]);
        p.overlay(&mut stale);
        assert_eq!(
            stale.annotations.get(DESIRED_CONFIG).map(String::as_str),
            Some("ns/cm-1")
        );
        assert!(!stale.annotations.contains_key("kubelet-gitops.io/pool"));
        assert_eq!(stale.annotations[STATE], "Done", "other annotations stay");
        // The store caught up (and the agent wrote since): the overlay is dropped.
        let mut fresh = node("n1", &[(DESIRED_CONFIG, "ns/cm-1"), (STATE, "Applying")]);
        p.overlay(&mut fresh);
        assert!(p.nodes.is_empty());
        // Nothing pending for other nodes.
        let mut other = node("n2", &[]);
        p.overlay(&mut other);
        assert!(other.annotations.is_empty());
    }

    #[test]
    fn configmaps_merge_store_and_own_writes() {
        let mut p = PendingWrites::default();
        let cm = |n: &str| PublishedConfigMap {
            name: n.into(),
            pool: "gpu".into(),
            created: "2026-01-01T00:00:00Z".into(),
        };
        p.configmap_created("kubelet-gpu-new", Some("2026-01-02T00:00:00Z".into()));
        p.configmap_deleted("kubelet-gpu-old");
        let listed = p.configmaps(&[cm("kubelet-gpu-old"), cm("kubelet-gpu-a")], |_| {
            Some("gpu".into())
        });
        let names: Vec<_> = listed.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["kubelet-gpu-a", "kubelet-gpu-new"]);
        // The store caught up with both writes: nothing pending any more.
        let listed = p.configmaps(&[cm("kubelet-gpu-a"), cm("kubelet-gpu-new")], |_| None);
        assert_eq!(listed.len(), 2);
        assert!(p.created.is_empty() && p.deleted.is_empty());
    }

    fn meta(name: &str, rv: &str, ann: &[(&str, &str)]) -> PartialObjectMeta<Node> {
        let mut m = PartialObjectMeta::<Node>::default();
        m.metadata.name = Some(name.into());
        m.metadata.resource_version = Some(rv.into());
        m.metadata.annotations = Some(
            ann.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .chain([("unrelated/annotation".to_string(), "x".to_string())])
                .collect(),
        );
        m
    }

    #[test]
    fn node_view_follows_the_cache_and_pending_writes() {
        use kube::runtime::watcher::Event;
        let (store, mut writer) = reflector::store::<PartialObjectMeta<Node>>();
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitApply(meta("n2", "1", &[])));
        writer.apply_watcher_event(&Event::InitApply(meta("n1", "1", &[(STATE, "Done")])));
        writer.apply_watcher_event(&Event::InitDone);
        let mut view = NodeView::default();
        let mut pending = PendingWrites::default();
        let names = |v: &[NodeInfo]| v.iter().map(|n| n.name.clone()).collect::<Vec<_>>();
        let nodes = view.refresh(&store, &mut pending);
        assert_eq!(names(nodes), ["n1", "n2"]);
        assert_eq!(
            nodes[0].annotations.len(),
            1,
            "only protocol annotations are kept"
        );

        // A write of ours shows before the watch does, then the watch catches up.
        pending.node_patched(
            "n2",
            &json!({"metadata": {"annotations": {DESIRED_CONFIG: "ns/cm"}}}),
        );
        let nodes = view.refresh(&store, &mut pending);
        assert_eq!(nodes[1].annotations[DESIRED_CONFIG], "ns/cm");
        writer.apply_watcher_event(&Event::Apply(meta(
            "n2",
            "2",
            &[(DESIRED_CONFIG, "ns/cm"), (STATE, "Applying")],
        )));
        let nodes = view.refresh(&store, &mut pending);
        assert_eq!(nodes[1].annotations[STATE], "Applying");
        assert!(!pending.has_node("n2"));

        // A changed node is rebuilt; a new node rebuilds the view.
        writer.apply_watcher_event(&Event::Apply(meta("n1", "3", &[(STATE, "RolledBack")])));
        writer.apply_watcher_event(&Event::Apply(meta("n0", "4", &[])));
        let nodes = view.refresh(&store, &mut pending);
        assert_eq!(names(nodes), ["n0", "n1", "n2"]);
        assert_eq!(nodes[1].annotations[STATE], "RolledBack");
        writer.apply_watcher_event(&Event::Delete(meta("n1", "5", &[])));
        assert_eq!(names(view.refresh(&store, &mut pending)), ["n0", "n2"]);
    }

    #[test]
    fn protocol_keys() {
        assert!(is_protocol_key(DESIRED_CONFIG));
        assert!(!is_protocol_key("kubelet-gitops.iox/y"));
        assert!(!is_protocol_key("node.alpha.kubernetes.io/ttl"));
    }
}
