//! What the controller sees of the cluster: a watch on Node metadata feeding the
//! [`Fleet`], a reflector on the published ConfigMaps' metadata, the "something changed"
//! signal they raise, and the overlay of the controller's own ConfigMap writes that the
//! watch has not shown yet.
//!
//! - Nodes are watched as `PartialObjectMeta<Node>` (no spec, no status) and each event
//!   goes straight into the [`Fleet`] (no reflector store: the fleet keeps, per node,
//!   only what planning reads, in shared strings). A change wakes the controller only
//!   when a node's labels, its `kubelet-gitops.io/*` annotations or its existence changed
//!   (kube-rs #279: a status heartbeat, or the watch echoing a write, is not news).
//! - ConfigMaps are watched in the repository's namespace with the managed-by label,
//!   metadata only: their names are their content.
//! - [`PendingWrites`] holds the ConfigMaps the controller has just created or deleted
//!   until the watch shows them (the node writes' overlay is the fleet's).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kubelet_gitops_core::protocol::POOL_LABEL;
use tokio::sync::{Notify, watch};

use crate::api::error_code;
use crate::fleet::Fleet;
use crate::gc::PublishedConfigMap;
use crate::metrics::Metrics;
use crate::publish::managed_selector;

/// The published-ConfigMap cache of one namespace.
pub(crate) type ConfigMapStore = Store<PartialObjectMeta<ConfigMap>>;

/// The node cache: the [`Fleet`] the node watch keeps up to date, and whether its first
/// list is complete.
#[derive(Debug, Clone)]
pub(crate) struct NodeCache {
    fleet: Arc<Mutex<Fleet>>,
    ready: watch::Receiver<bool>,
}

impl NodeCache {
    /// The fleet, locked (the watch waits meanwhile: keep it short).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Fleet> {
        self.fleet.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for the first complete list; false if the watch is gone first.
    pub(crate) async fn wait_until_ready(&self) -> bool {
        let mut ready = self.ready.clone();
        ready.wait_for(|r| *r).await.is_ok()
    }
}

/// Starts the node watch: returns the cache and the task that drives it (which runs
/// until dropped). `changed` is notified whenever planning could come out differently.
pub(crate) fn node_watch(
    client: kube::Client,
    metrics: Arc<Metrics>,
    changed: Arc<Notify>,
) -> (NodeCache, impl Future<Output = ()> + Send + 'static) {
    let api: Api<PartialObjectMeta<Node>> = Api::all(client);
    let fleet = Arc::new(Mutex::new(Fleet::new()));
    let (ready_tx, ready) = watch::channel(false);
    let cache = NodeCache {
        fleet: fleet.clone(),
        ready,
    };
    let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
    let driver = drive(stream, "nodes", metrics, move |_, event| {
        let mut fleet = fleet.lock().unwrap_or_else(|p| p.into_inner());
        let news = match event {
            watcher::Event::Apply(m) | watcher::Event::InitApply(m) => {
                let changed = fleet.upsert_meta(m, Instant::now());
                changed && matches!(event, watcher::Event::Apply(_))
            }
            watcher::Event::Delete(m) => {
                fleet.remove(m.metadata.name.as_deref().unwrap_or_default())
            }
            watcher::Event::Init => {
                fleet.begin_relist();
                false
            }
            watcher::Event::InitDone => {
                fleet.end_relist();
                ready_tx.send_replace(true);
                true
            }
        };
        drop(fleet);
        if news {
            changed.notify_one();
        }
    });
    (cache, driver)
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

/// The controller's own ConfigMap writes, until the watch shows them.
#[derive(Debug, Default)]
pub(crate) struct PendingWrites {
    /// ConfigMaps created (name to creationTimestamp), until the ConfigMap store has them.
    created: HashMap<String, Option<String>>,
    /// ConfigMaps deleted, until the ConfigMap store drops them.
    deleted: HashSet<String>,
}

impl PendingWrites {
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

    /// Whether no write waits to be seen: planning reads the caches alone.
    pub(crate) fn is_empty(&self) -> bool {
        self.created.is_empty() && self.deleted.is_empty()
    }

    /// Forgets everything (the namespace changed).
    pub(crate) fn clear(&mut self) {
        *self = PendingWrites::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(p.is_empty());
    }
}
