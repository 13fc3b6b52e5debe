//! [`Recorder`]: every change of every Node, in resourceVersion order, from one watch
//! held open for the whole scenario. Scenarios replay it to check the order of a
//! rollout (canary first, at most maxUnavailable busy) and that something never
//! happened (a node assigned a config it must not get).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::TryStreamExt as _;
use k8s_openapi::api::core::v1::Node;
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::E2eError;
use crate::nodes::{NodeView, summary};

#[derive(Debug, Default)]
struct History {
    events: Vec<NodeView>,
    latest: BTreeMap<String, NodeView>,
    /// Why the history has a gap, if it has one.
    broken: Option<String>,
}

impl History {
    fn record(&mut self, view: NodeView) {
        if view.deleted {
            self.latest.remove(&view.name);
        } else {
            self.latest.insert(view.name.clone(), view.clone());
        }
        self.events.push(view);
    }
}

/// Records every Node change from a watch. Stops when dropped.
#[derive(Debug)]
pub struct Recorder {
    history: Arc<Mutex<History>>,
    changes: watch::Receiver<u64>,
    task: JoinHandle<()>,
}

fn lock(h: &Mutex<History>) -> MutexGuard<'_, History> {
    // A panic while holding the lock leaves a consistent history (each update is one
    // push): keep using it.
    h.lock().unwrap_or_else(|e| e.into_inner())
}

impl Recorder {
    /// Lists the Nodes and watches them from the list's resourceVersion.
    pub async fn start(client: Client) -> Result<Recorder, E2eError> {
        let api: Api<Node> = Api::all(client);
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(E2eError::kube("listing nodes"))?;
        let mut history = History::default();
        for n in &list.items {
            history.record(NodeView::from_node(n));
        }
        let rv = list.metadata.resource_version.unwrap_or_default();
        let history = Arc::new(Mutex::new(history));
        let (tx, changes) = watch::channel(0u64);
        let task = tokio::spawn(follow(api, rv, history.clone(), tx));
        Ok(Recorder {
            history,
            changes,
            task,
        })
    }

    /// Every recorded view, oldest first; an error if the watch lost events.
    pub fn history(&self) -> Result<Vec<NodeView>, E2eError> {
        let h = lock(&self.history);
        match &h.broken {
            Some(why) => Err(E2eError::Recorder(why.clone())),
            None => Ok(h.events.clone()),
        }
    }

    /// The nodes as last seen.
    pub fn latest(&self) -> BTreeMap<String, NodeView> {
        lock(&self.history).latest.clone()
    }

    /// Waits (reacting to each event, not polling) until `check` returns something for
    /// the nodes as last seen.
    pub async fn wait_for<T>(
        &self,
        what: &str,
        patience: Duration,
        mut check: impl FnMut(&BTreeMap<String, NodeView>) -> Option<T>,
    ) -> Result<T, E2eError> {
        let deadline = Instant::now() + patience;
        let mut changes = self.changes.clone();
        loop {
            changes.borrow_and_update();
            {
                let h = lock(&self.history);
                if let Some(why) = &h.broken {
                    return Err(E2eError::Recorder(why.clone()));
                }
                if let Some(t) = check(&h.latest) {
                    return Ok(t);
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || tokio::time::timeout(left, changes.changed()).await.is_err() {
                return Err(E2eError::Timeout {
                    what: what.to_string(),
                    waited: patience,
                    state: summary(self.latest().values()),
                });
            }
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Follows the Nodes from `rv`, reconnecting from the last seen resourceVersion when a
/// watch ends. A watch the server expires (410) means events were missed.
async fn follow(
    api: Api<Node>,
    mut rv: String,
    history: Arc<Mutex<History>>,
    tx: watch::Sender<u64>,
) {
    let params = WatchParams::default().timeout(290);
    let mut failures = 0u32;
    loop {
        let stream = match api.watch(&params, &rv).await {
            Ok(s) => s,
            Err(e) => {
                failures += 1;
                if failures > 50 {
                    lock(&history).broken = Some(format!("cannot watch nodes: {e}"));
                    tx.send_modify(|n| *n += 1);
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        futures::pin_mut!(stream);
        // Until the watch ends (its timeout, or the connection dropped): then resume
        // from the last resourceVersion seen.
        while let Ok(Some(event)) = stream.try_next().await {
            let view = match event {
                WatchEvent::Added(n) | WatchEvent::Modified(n) => NodeView::from_node(&n),
                WatchEvent::Deleted(n) => NodeView {
                    deleted: true,
                    ..NodeView::from_node(&n)
                },
                WatchEvent::Bookmark(b) => {
                    rv = b.metadata.resource_version;
                    continue;
                }
                WatchEvent::Error(status) => {
                    lock(&history).broken = Some(format!(
                        "watch from resourceVersion {rv} failed: {} ({})",
                        status.message, status.code
                    ));
                    tx.send_modify(|n| *n += 1);
                    return;
                }
            };
            failures = 0;
            rv = view.resource_version.to_string();
            lock(&history).record(view);
            tx.send_modify(|n| *n += 1);
        }
    }
}
