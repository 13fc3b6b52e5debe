//! The cluster the demo plays on: the embedded simulator (the default: no Go, under a
//! minute) or real Kubernetes v1.36 built from its modules ([`super::real`]). Everything
//! the acts need from it goes through [`DemoCluster`]; the product (reconciler, agents)
//! talks to either as to a production cluster.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kubelet_gitops_sim::cluster::Sim;

use super::error::DemoError;
use super::nodes::{self, NodePaths};
use super::real::RealDemo;
use super::repo::GPU_POD_LOGS;
use super::view::{self, NodeView};

/// Which cluster `kubelet-gitops demo` runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ClusterKind {
    /// The embedded simulated API server with a stand-in kubelet per node.
    #[default]
    Sim,
    /// etcd, kube-apiserver, controller-manager, scheduler and 12 real kubelets on
    /// loopback, from the binaries `upstream/build.sh` builds.
    Real,
}

/// A running cluster of either kind.
pub enum DemoCluster {
    Sim(Sim),
    Real(Box<RealDemo>),
}

impl DemoCluster {
    /// The API server's URL.
    pub fn server(&self) -> String {
        match self {
            DemoCluster::Sim(sim) => sim.url(),
            DemoCluster::Real(r) => r.server().to_string(),
        }
    }

    /// A kubeconfig for a person watching (the sim's, or the real cluster's admin).
    pub fn admin_kubeconfig(&self) -> PathBuf {
        match self {
            DemoCluster::Sim(sim) => sim.kubeconfig_path().to_path_buf(),
            DemoCluster::Real(r) => r.admin_kubeconfig().to_path_buf(),
        }
    }

    /// The reconciler's kubeconfig: on the real cluster its ServiceAccount's token.
    pub fn reconciler_kubeconfig(&self) -> PathBuf {
        match self {
            DemoCluster::Sim(sim) => sim.kubeconfig_path().to_path_buf(),
            DemoCluster::Real(r) => r.reconciler_kubeconfig().to_path_buf(),
        }
    }

    /// The node names, sorted.
    pub fn node_names(&self) -> Vec<String> {
        match self {
            DemoCluster::Sim(sim) => sim.kubelets().keys().cloned().collect(),
            DemoCluster::Real(r) => r.node_names(),
        }
    }

    /// Every Node as the node protocol shows it, sorted by name.
    pub async fn nodes(&self) -> Result<Vec<NodeView>, DemoError> {
        match self {
            DemoCluster::Sim(sim) => Ok(view::snapshot(sim)),
            DemoCluster::Real(r) => r.nodes().await,
        }
    }

    /// How many times each node's kubelet has started.
    pub fn kubelet_starts(&self) -> BTreeMap<String, u64> {
        match self {
            DemoCluster::Sim(sim) => sim
                .kubelets()
                .iter()
                .map(|(name, k)| (name.clone(), k.state().starts))
                .collect(),
            DemoCluster::Real(r) => r.kubelet_starts(),
        }
    }

    /// Whether the kubelet of `node` runs (the sim's state; a real one's `/healthz`).
    pub async fn kubelet_running(&self, node: &str) -> bool {
        match self {
            DemoCluster::Sim(sim) => sim.kubelet(node).is_some_and(|k| k.is_running()),
            DemoCluster::Real(r) => r.kubelet_healthy(node).await,
        }
    }

    /// Makes act 3's `podLogsDir` unusable on `nodes`: a file stands where the directory
    /// would be, so a kubelet given it cannot create it and exits. Returns the path the
    /// pool's config names: [`GPU_POD_LOGS`] on each simulated node (under its root); on
    /// the real cluster, whose kubelets all run on this machine, the same path under
    /// `workdir`.
    pub fn block_pod_logs(&self, workdir: &Path, nodes: &[String]) -> Result<String, DemoError> {
        match self {
            DemoCluster::Sim(sim) => {
                for node in nodes {
                    let paths = NodePaths::new(&sim.node_root(node));
                    nodes::block_path(&paths.root, GPU_POD_LOGS)?;
                }
                Ok(GPU_POD_LOGS.to_string())
            }
            DemoCluster::Real(_) => {
                let path = nodes::block_path(workdir, GPU_POD_LOGS)?;
                Ok(path.display().to_string())
            }
        }
    }

    /// The last line of `node`'s kubelet log (`nodes/<node>/var/log/kubelet.log` on both
    /// kinds of cluster) that contains `needle`.
    pub fn kubelet_log_line(&self, workdir: &Path, node: &str, needle: &str) -> Option<String> {
        let log = workdir.join("nodes").join(node).join("var/log/kubelet.log");
        let text = std::fs::read_to_string(log).ok()?;
        text.lines()
            .rev()
            .find(|l| l.contains(needle))
            .map(|l| l.trim().to_string())
    }

    /// An error when part of the cluster stopped by itself (the real cluster's processes).
    pub fn check(&mut self) -> Result<(), DemoError> {
        match self {
            DemoCluster::Sim(_) => Ok(()),
            DemoCluster::Real(r) => r.check(),
        }
    }

    /// Stops it.
    pub async fn shutdown(self) {
        match self {
            DemoCluster::Sim(sim) => sim.shutdown().await,
            DemoCluster::Real(r) => r.stop().await,
        }
    }
}

/// Whether `workdir` is short enough for the real kubelets' unix sockets (the harness's
/// rule, [`kubelet_gitops_e2e::real::check_root_length`], for the node root of
/// `longest_node`).
pub fn check_socket_room(workdir: &Path, longest_node: &str) -> Result<(), DemoError> {
    let root = workdir.join("nodes").join(longest_node);
    kubelet_gitops_e2e::real::check_root_length(&root).map_err(|e| DemoError::WorkdirTooLong {
        path: workdir.to_path_buf(),
        why: e.to_string(),
    })
}
