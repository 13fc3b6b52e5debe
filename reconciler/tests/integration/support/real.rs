//! The reconciler against a real API server: etcd and kube-apiserver v1.36 from
//! `upstream/build.sh` (kubelet-gitops-e2e's `RealCluster` with no kubelets and no
//! controller-manager, so nothing heartbeats, marks or deletes the Nodes), deploy/base's
//! RBAC and admission policy applied, a kubeconfig with the token of deploy/'s reconciler
//! service account (so RBAC and the ValidatingAdmissionPolicy are evaluated for every
//! write the reconciler sends, as in production), Node objects created from an inventory
//! as the sim registers them, and a watch of their metadata for the test to wait on.
//!
//! The harness's own reads and writes (creating Nodes, the agent double, `/metrics`) use
//! the admin kubeconfig (`system:masters`), which no admission policy of ours matches.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PartialObjectMeta, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kubelet_gitops_core::inventory::Inventory;
use kubelet_gitops_core::protocol::{CURRENT_CONFIG, DESIRED_CONFIG, OBSERVED_CONFIG, STATE};
use kubelet_gitops_e2e::REQUIRE_ENV;
use kubelet_gitops_e2e::real::{RealCluster, UpstreamBinaries};
use kubelet_gitops_sim::cluster::DEFAULT_KUBELET_PORT;
use serde_json::Value;

use super::apiserver::ApiserverMetrics;
use super::{AgentDouble, NS, POOL_LABEL, eventually};

/// deploy/base's ServiceAccount of the reconciler.
pub const RECONCILER_SA: &str = "kubelet-gitops-reconciler";

/// The upstream binaries, or why they cannot be used; with `KUBELET_GITOPS_E2E_REQUIRE`
/// set, missing binaries panic instead (`what` says what needed them).
pub fn upstream(what: &str) -> Result<UpstreamBinaries, String> {
    match UpstreamBinaries::locate() {
        Ok(bins) => Ok(bins),
        Err(e) if kubelet_gitops_e2e::required() => {
            panic!("{what}: {e} ({REQUIRE_ENV} is set, so this is a failure)")
        }
        Err(e) => Err(e.to_string()),
    }
}

/// [`upstream`], or `None` after printing `SKIPPED: <what>: <why>`.
pub fn upstream_or_skip(what: &str) -> Option<UpstreamBinaries> {
    upstream(what)
        .map_err(|why| println!("SKIPPED: {what}: {why}"))
        .ok()
}

/// What the waits look at of a Node: its pool and the protocol annotations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    pub name: String,
    pub pool: Option<String>,
    pub desired: Option<String>,
    pub observed: Option<String>,
    pub current: Option<String>,
    pub state: Option<String>,
}

impl NodeView {
    /// From a Node's metadata.
    pub fn from_meta(m: &ObjectMeta) -> NodeView {
        let ann = |k: &str| m.annotations.as_ref().and_then(|a| a.get(k).cloned());
        NodeView {
            name: m.name.clone().unwrap_or_default(),
            pool: m.labels.as_ref().and_then(|l| l.get(POOL_LABEL).cloned()),
            desired: ann(DESIRED_CONFIG),
            observed: ann(OBSERVED_CONFIG),
            current: ann(CURRENT_CONFIG),
            state: ann(STATE),
        }
    }

    /// From a Node as JSON (the sim's store).
    pub fn from_value(node: &Value) -> NodeView {
        let text = |v: &Value| v.as_str().map(str::to_string);
        let ann = |k: &str| text(&node["metadata"]["annotations"][k]);
        NodeView {
            name: super::name(node).to_string(),
            pool: text(&node["metadata"]["labels"][POOL_LABEL]),
            desired: ann(DESIRED_CONFIG),
            observed: ann(OBSERVED_CONFIG),
            current: ann(CURRENT_CONFIG),
            state: ann(STATE),
        }
    }

    /// Whether the agent reports Done on what the node is told to run (see
    /// [`super::settled_done`]).
    pub fn settled_done(&self) -> bool {
        self.desired.is_some()
            && self.observed == self.desired
            && self.current == self.desired
            && self.state.as_deref() == Some("Done")
    }

    /// The ConfigMap name the node is told to run.
    pub fn desired_name(&self) -> Option<String> {
        self.desired
            .as_deref()
            .and_then(|d| d.parse::<kubelet_gitops_core::protocol::ConfigRef>().ok())
            .and_then(|r| r.configmap_name().map(str::to_string))
    }
}

/// A real control plane with deploy/base applied; stopped when dropped.
pub struct RealServer {
    /// The kubeconfig of deploy/'s reconciler service account (a 24-hour token).
    pub reconciler_kubeconfig: PathBuf,
    nodes: Store<PartialObjectMeta<Node>>,
    watch: tokio::task::JoinHandle<()>,
    // Last: the processes are killed when it drops.
    pub cluster: RealCluster,
}

impl RealServer {
    /// Starts etcd and kube-apiserver in `dir` (logs in `dir/logs`), applies deploy/base
    /// and writes the reconciler's service-account kubeconfig.
    pub async fn start(dir: &Path, bins: UpstreamBinaries) -> RealServer {
        let logs = dir.join("logs");
        let cluster = RealCluster::start(dir, &logs, bins, &[], false)
            .await
            .unwrap_or_else(|e| panic!("real control plane: {e} (logs in {})", logs.display()));
        cluster
            .apply_deploy_base()
            .await
            .unwrap_or_else(|e| panic!("applying deploy/base: {e}"));
        let reconciler_kubeconfig = dir.join("reconciler.kubeconfig");
        cluster
            .service_account_kubeconfig(&reconciler_kubeconfig, NS, RECONCILER_SA, None)
            .await
            .unwrap_or_else(|e| panic!("the reconciler's token: {e}"));
        let api: Api<PartialObjectMeta<Node>> = Api::all(cluster.client().clone());
        let (nodes, writer) = reflector::store();
        let stream = watcher::watcher(api, watcher::Config::default())
            .default_backoff()
            .modify(|n| n.metadata.managed_fields = None)
            .reflect(writer);
        let watch = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while stream.next().await.is_some() {}
        });
        RealServer {
            reconciler_kubeconfig,
            nodes,
            watch,
            cluster,
        }
    }

    /// The admin kubeconfig (`system:masters`): the harness's, never the reconciler's.
    pub fn admin_kubeconfig(&self) -> &Path {
        self.cluster.admin_kubeconfig()
    }

    /// Creates the Node objects of `inventory` as the sim registers them (labels, the
    /// attach-detach annotation, capacity, addresses, node info, Ready), `concurrency`
    /// at a time, as admin; waits until the watch shows them all. How long it took.
    pub async fn create_nodes(&self, inventory: &Inventory, concurrency: usize) -> Duration {
        let started = Instant::now();
        let api: Api<Node> = Api::all(self.cluster.client().clone());
        let creates = inventory.nodes.iter().enumerate().map(|(i, node)| {
            let api = api.clone();
            let object = kubelet_gitops_sim::kubelet::node_object(node, i, DEFAULT_KUBELET_PORT);
            async move {
                let object: Node = serde_json::from_value(object).expect("a Node");
                api.create(&PostParams::default(), &object)
                    .await
                    .unwrap_or_else(|e| panic!("creating Node {}: {e}", node.name));
            }
        });
        futures::stream::iter(creates)
            .buffer_unordered(concurrency)
            .collect::<Vec<()>>()
            .await;
        let n = inventory.nodes.len();
        self.wait_nodes("the watch shows every Node", super::LONG, |nodes| {
            nodes.len() == n
        })
        .await;
        started.elapsed()
    }

    /// The API server's request counters now (`GET /metrics` as admin).
    pub async fn metrics(&self) -> ApiserverMetrics {
        let request = axum::http::Request::get("/metrics")
            .body(Vec::new())
            .expect("a request");
        let text = self
            .cluster
            .client()
            .request_text(request)
            .await
            .unwrap_or_else(|e| panic!("reading kube-apiserver's /metrics: {e}"));
        ApiserverMetrics::parse(&text)
    }

    /// The metrics and `agent`'s count of accepted patches once a phase's writes have
    /// all been answered: read until neither changes over 500 ms (a write shows in the
    /// watch before its response has reached the agent double and the counters).
    pub async fn settled_metrics(&self, agent: &AgentDouble) -> (ApiserverMetrics, usize) {
        let mut last = (self.metrics().await, agent.patches());
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let now = (self.metrics().await, agent.patches());
            if now.0.writes_since(&last.0).is_empty() && now.1 == last.1 {
                return now;
            }
            last = now;
        }
    }

    /// Every Node as the watch shows it now.
    pub fn nodes(&self) -> Vec<NodeView> {
        let mut out: Vec<NodeView> = self
            .nodes
            .state()
            .iter()
            .map(|n| NodeView::from_meta(&n.metadata))
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Waits until `done` holds for the Nodes (a safety net of `limit`; not a speed
    /// assertion).
    pub async fn wait_nodes(
        &self,
        what: &str,
        limit: Duration,
        done: impl Fn(&[NodeView]) -> bool,
    ) {
        eventually(what, limit, || {
            let nodes = self.nodes();
            if done(&nodes) {
                Ok(())
            } else {
                let waiting: Vec<&NodeView> = nodes.iter().take(5).collect();
                Err(format!("{} nodes; the first: {waiting:?}", nodes.len()))
            }
        })
        .await;
    }
}

impl Drop for RealServer {
    fn drop(&mut self) {
        self.watch.abort();
    }
}
