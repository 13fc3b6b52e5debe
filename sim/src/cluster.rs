//! A whole simulated cluster: the API server, the Nodes of an inventory, and a stand-in
//! kubelet per node ([`Sim`]), and the `kubelet-gitops-sim` command line ([`cli`]).

pub mod churn;
pub mod cli;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kubelet_gitops_core::inventory::{Inventory, InventoryError};
use serde_json::json;

pub use churn::StatusChurn;

use crate::faults::FaultConfig;
use crate::kubelet::{
    KubeletHandle, KubeletOptions, KubeletPaths, KubeletSpec, Kubelets, NodeApi, NodeStatus,
    ReservedPort, control_router, initial_effective_config, node_object_with,
};
use crate::reqlog::RequestLog;
use crate::resources::kinds;
use crate::server::ApiServer;
use crate::store::{Store, WriteOptions};

/// The namespaces every cluster has.
pub const NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

/// The kubelet port a Node reports when the sim runs no stand-in kubelets.
pub const DEFAULT_KUBELET_PORT: u16 = 10250;

/// What to start.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// The nodes.
    pub inventory: Inventory,
    /// Where the node roots (`nodes/<name>/`) and, by default, the kubeconfig go.
    pub workdir: PathBuf,
    /// Faults the API server injects into requests it serves over HTTP (the sim's own
    /// writes, and in-process kubelets, are not subject to them).
    pub faults: FaultConfig,
    /// The nodes' cgroup hierarchy: v2 (true, the default) or v1. Overrides
    /// `kubelet.cgroup_v2`.
    pub cgroup_v2: bool,
    /// Run a stand-in kubelet per node (default true). Without them the Nodes are
    /// registered Ready and stay as they are, and no node roots are laid out.
    pub kubelets: bool,
    /// How the stand-in kubelets behave.
    pub kubelet: KubeletOptions,
    /// Where to write the kubeconfig; default `<workdir>/kubeconfig`.
    pub kubeconfig_out: Option<PathBuf>,
    /// How long [`Sim::start`] waits for every kubelet's first start to have an outcome.
    pub settle_timeout: Duration,
    /// How many entries the request log keeps in full (the newest; 0: none). Counts are
    /// kept for every request whatever this says. Default
    /// [`DEFAULT_ENTRY_LIMIT`](crate::reqlog::DEFAULT_ENTRY_LIMIT).
    pub request_log_entries: usize,
    /// Status reports of the Nodes that have no stand-in kubelet (all of them without
    /// kubelets): [`StatusChurn::KUBELETS`] is what real kubelets do (one per Node every
    /// 5 minutes). Default [`StatusChurn::Off`], so that tests see only the writes they
    /// make; the `kubelet-gitops-sim serve` command defaults to real kubelets' churn.
    /// See [`churn`].
    pub status_churn: StatusChurn,
}

impl SimConfig {
    /// The defaults for `inventory` in `workdir`: no faults, cgroup v2, kubelets on.
    pub fn new(inventory: Inventory, workdir: impl Into<PathBuf>) -> SimConfig {
        SimConfig {
            inventory,
            workdir: workdir.into(),
            faults: FaultConfig::default(),
            cgroup_v2: true,
            kubelets: true,
            kubelet: KubeletOptions::default(),
            kubeconfig_out: None,
            settle_timeout: Duration::from_secs(30),
            request_log_entries: crate::reqlog::DEFAULT_ENTRY_LIMIT,
            status_churn: StatusChurn::Off,
        }
    }
}

/// Why a sim cannot start.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The inventory breaks the rules.
    #[error(transparent)]
    Inventory(#[from] InventoryError),
    /// A file or socket operation failed.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// A node cannot be set up.
    #[error("{0}")]
    Node(String),
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SimError {
    let what = what.into();
    move |source| SimError::Io { what, source }
}

/// A running simulated cluster.
pub struct Sim {
    server: ApiServer,
    kubelets: Kubelets,
    churn: tokio::sync::watch::Sender<StatusChurn>,
    churn_task: tokio::task::JoinHandle<()>,
    kubeconfig: PathBuf,
    workdir: PathBuf,
    /// Kept while stand-in kubelets run (they are built from it); a fleet without them,
    /// like the benchmarks' 100,000 Nodes, does not keep it: 20 labels a Node in maps
    /// cost about 2.7 KiB a Node, more than a third of what the stored Node costs.
    inventory: Option<Inventory>,
    nodes: usize,
}

impl std::fmt::Debug for Sim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sim")
            .field("url", &self.server.url())
            .field("kubeconfig", &self.kubeconfig)
            .field("nodes", &self.nodes)
            .finish()
    }
}

/// The root directory of node `name` under `workdir`.
pub fn node_root(workdir: &Path, name: &str) -> PathBuf {
    workdir.join("nodes").join(name)
}

impl Sim {
    /// Starts the API server, creates the namespaces and the inventory's Nodes, lays out
    /// each node's root and starts its stand-in kubelet (unless `kubelets` is off), writes
    /// the kubeconfig, and waits until every kubelet's first start has an outcome.
    pub async fn start(config: SimConfig) -> Result<Sim, SimError> {
        let SimConfig {
            inventory,
            workdir,
            faults,
            cgroup_v2,
            kubelets: run_kubelets,
            mut kubelet,
            kubeconfig_out,
            settle_timeout,
            request_log_entries,
            status_churn,
        } = config;
        inventory.validate()?;
        kubelet.cgroup_v2 = cgroup_v2;
        std::fs::create_dir_all(&workdir)
            .map_err(io_err(format!("creating {}", workdir.display())))?;

        let store = Store::new();
        let opts = WriteOptions::default();
        for ns in NAMESPACES {
            let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            match store.create(kinds::namespaces(), None, obj, &opts) {
                Ok(_) => {}
                Err(e) if e.code == 409 => {}
                Err(e) => return Err(SimError::Node(format!("creating namespace {ns}: {e}"))),
            }
        }

        // Ports first, so each Node names its kubelet's port from the start.
        let mut specs = Vec::new();
        let mut shapes = std::collections::HashMap::new();
        for (index, node) in inventory.nodes.iter().enumerate() {
            // Reserved for the node's life: no other socket takes it while it is down.
            let reserved = if run_kubelets {
                Some(Arc::new(
                    ReservedPort::reserve(0).map_err(io_err("reserving a kubelet port"))?,
                ))
            } else {
                None
            };
            let port = reserved.as_ref().map_or(DEFAULT_KUBELET_PORT, |r| r.port());
            // Nodes with the same flags and capacity start with the same config, capacity
            // and allocatable: computed once (a generated fleet has a handful).
            let (capacity, allocatable) = shapes
                .entry((node.kubelet_flags.clone(), format!("{:?}", node.capacity)))
                .or_insert_with(|| {
                    let cfg = initial_effective_config(node, cgroup_v2);
                    let s = NodeStatus::new(node, index, port, &cfg);
                    (s.capacity, s.allocatable)
                })
                .clone();
            let status = NodeStatus {
                capacity,
                allocatable,
                internal_ip: crate::kubelet::internal_ip(node, index),
                kubelet_port: port,
            };
            let obj = node_object_with(
                node,
                &status,
                &crate::kubelet::rfc3339(std::time::SystemTime::now(), false),
            );
            store
                .create(kinds::nodes(), None, obj, &opts)
                .map_err(|e| SimError::Node(format!("creating node {}: {e}", node.name)))?;
            if let Some(port) = reserved {
                let paths = KubeletPaths::new(&node_root(&workdir, &node.name));
                paths.prepare(node, cgroup_v2).map_err(SimError::Node)?;
                specs.push(KubeletSpec {
                    node: node.clone(),
                    index,
                    paths,
                    port,
                    options: kubelet.clone(),
                });
            }
        }

        let mut handles = BTreeMap::new();
        for spec in specs {
            let name = spec.node.name.clone();
            let handle = KubeletHandle::spawn(spec, NodeApi::InProcess(store.clone()))
                .map_err(io_err(format!("starting the kubelet of {name}")))?;
            handles.insert(name, handle);
        }
        let kubelets: Kubelets = Arc::new(handles);

        let server = ApiServer::start_with(store, faults, control_router(kubelets.clone()))
            .await
            .map_err(io_err("starting the API server"))?;
        server.log.set_entry_limit(request_log_entries);
        let (churn, churn_rx) = tokio::sync::watch::channel(status_churn);
        let churn_task = tokio::spawn(churn::run(
            server.store.clone(),
            server.log.clone(),
            kubelets.keys().cloned().collect(),
            churn_rx,
        ));
        let kubeconfig = kubeconfig_out.unwrap_or_else(|| workdir.join("kubeconfig"));
        server
            .write_kubeconfig(&kubeconfig)
            .map_err(io_err(format!("writing {}", kubeconfig.display())))?;

        for handle in kubelets.values() {
            // A kubelet that is slow to settle is reported through its state; not an error.
            let _ = handle.settled(settle_timeout).await;
        }
        let nodes = inventory.nodes.len();
        tracing::info!(url = %server.url(), nodes, "sim started");
        Ok(Sim {
            server,
            kubelets,
            churn,
            churn_task,
            kubeconfig,
            workdir,
            inventory: run_kubelets.then_some(inventory),
            nodes,
        })
    }

    /// The API server's URL (`http://127.0.0.1:PORT`).
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// The API server.
    pub fn server(&self) -> &ApiServer {
        &self.server
    }

    /// The API server's store.
    pub fn store(&self) -> &Store {
        &self.server.store
    }

    /// Every API request served over HTTP (in-process kubelets do not appear in it),
    /// counted per (verb, resource) and per client; the newest
    /// [`SimConfig::request_log_entries`] in full.
    pub fn request_log(&self) -> &RequestLog {
        &self.server.log
    }

    /// Changes the Nodes' status churn (see [`SimConfig::status_churn`]); a round in
    /// progress ends and the next starts at once.
    pub fn set_status_churn(&self, churn: StatusChurn) {
        self.churn.send_replace(churn);
    }

    /// The Nodes' status churn.
    pub fn status_churn(&self) -> StatusChurn {
        *self.churn.borrow()
    }

    /// Replaces the API server's faults.
    pub fn set_faults(&self, faults: FaultConfig) {
        self.server.set_faults(faults);
    }

    /// The kubeconfig written for the API server.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The work directory.
    pub fn workdir(&self) -> &Path {
        &self.workdir
    }

    /// The inventory the sim runs, kept while it runs stand-in kubelets (`None` without
    /// them).
    pub fn inventory(&self) -> Option<&Inventory> {
        self.inventory.as_ref()
    }

    /// How many Nodes the sim started with.
    pub fn node_count(&self) -> usize {
        self.nodes
    }

    /// Node `name`'s stand-in kubelet (`None` for an unknown node or without kubelets).
    pub fn kubelet(&self, name: &str) -> Option<&KubeletHandle> {
        self.kubelets.get(name)
    }

    /// Every stand-in kubelet, by node name.
    pub fn kubelets(&self) -> &BTreeMap<String, KubeletHandle> {
        &self.kubelets
    }

    /// The root directory of node `name` (laid out only when kubelets run).
    pub fn node_root(&self, name: &str) -> PathBuf {
        node_root(&self.workdir, name)
    }

    /// Stops the status churn and every kubelet, then the API server.
    pub async fn shutdown(self) {
        self.churn_task.abort();
        for handle in self.kubelets.values() {
            handle.shutdown().await;
        }
        self.server.shutdown().await;
    }
}
