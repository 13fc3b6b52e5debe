//! The end-to-end harness of kubelet-gitops: every scenario runs the real binaries as
//! separate processes, as a user would.
//!
//! | process | what |
//! | --- | --- |
//! | `git-daemon` | serves the config repository on `git://127.0.0.1:<port>/config.git`; the scenario commits in a work tree and pushes to it |
//! | `kubelet-gitops-sim serve` | the simulated API server with a stand-in kubelet per inventory node (in its process; restarted through its control endpoint) |
//! | `kubelet-gitops-sim kubelet` | one more stand-in kubelet as its own process, for a node that joins later (restarted with SIGHUP) |
//! | `kubelet-gitops run` | the reconciler, polling the remote every second |
//! | `kubelet-gitops-agent` | one per node, with the node's root directory as its `--host-root` (as a DaemonSet pod has the host's `/`), restarting its kubelet with `kubelet-gitops-sim restart-kubelet` |
//!
//! The binaries are taken from the target directory of the test executable
//! ([`Binaries::locate`]). `cargo test --workspace` builds them before any test runs;
//! `cargo test -p kubelet-gitops-e2e` alone does not, and then each scenario says so and
//! passes without running, unless [`REQUIRE_ENV`] is set (CI), which makes it fail.
//!
//! Each process writes to a log file in the scenario's temporary directory. A scenario
//! that fails (panics, or returns an error) prints the tail of every log and keeps the
//! directory; every process is SIGKILLed when the harness is dropped. Scenarios share
//! nothing (each has its own directory, processes and ports), so the scenarios of the one
//! test binary run concurrently, as many at a time as the test runner's threads.

pub mod cluster;
pub mod error;
pub mod files;
pub mod git;
pub mod nodes;
pub mod oracle;
pub mod oracle_flags;
pub mod process;
pub mod real;
pub mod recorder;
pub mod repo;
pub mod scenario;

use std::time::Duration;

pub use cluster::{Cluster, Converged, KubeletInfo};
pub use error::E2eError;
pub use files::{ConfigFileWatch, FileReport};
pub use git::GitRemote;
pub use nodes::{NodeView, RolloutTrace, summary, trace_rollout};
pub use process::{Binaries, Proc};
pub use recorder::Recorder;
pub use repo::{Pool, Rollout};
pub use scenario::E2e;

/// Where the reconciler publishes ConfigMaps (the repository's settings say so).
pub const NAMESPACE: &str = "kubelet-gitops";
/// The label the pools select on.
pub const POOL_LABEL: &str = "node.kubernetes.io/pool";
/// The label that puts a node first in its pool's canary order.
pub const CANARY_LABEL: &str = "kubelet-gitops.io/canary";
/// How long any wait may take before it is a failure. Generous: it only catches a
/// stuck scenario, it measures nothing.
pub const PATIENCE: Duration = Duration::from_secs(90);
/// Set (to anything but `0` or empty) to make missing binaries a failure, not a skip.
pub const REQUIRE_ENV: &str = "KUBELET_GITOPS_E2E_REQUIRE";
/// Set to keep every scenario's directory (logs, node roots, repositories), not only a
/// failed one's.
pub const KEEP_ENV: &str = "KUBELET_GITOPS_E2E_KEEP";

/// Whether the environment variable `name` is set to something other than `0`.
pub(crate) fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Whether [`REQUIRE_ENV`] is set: a missing binary (ours or upstream's) is then a
/// failure, not a skip.
pub fn required() -> bool {
    env_flag(REQUIRE_ENV)
}

/// Lines of each log printed when a scenario fails.
pub(crate) const TAIL_LINES: usize = 40;

/// A node of the inventory.
#[derive(Debug, Clone)]
pub struct NodeSpec {
    /// Its name.
    pub name: String,
    /// Its `node.kubernetes.io/pool` label.
    pub pool: Option<String>,
    /// Labelled `kubelet-gitops.io/canary=true`.
    pub canary: bool,
}

impl NodeSpec {
    /// A node in `pool`.
    pub fn new(name: &str, pool: &str) -> NodeSpec {
        NodeSpec {
            name: name.into(),
            pool: Some(pool.into()),
            canary: false,
        }
    }

    pub(crate) fn inventory_entry(&self) -> String {
        let mut labels = Vec::new();
        if let Some(p) = &self.pool {
            labels.push(format!("{POOL_LABEL}: {p}"));
        }
        if self.canary {
            labels.push(format!("{CANARY_LABEL}: \"true\""));
        }
        format!(
            "  - name: {}\n    labels: {{{}}}\n    capacity: {{cpu: \"8\", memory: 32Gi, ephemeral-storage: 100Gi, pods: \"110\"}}\n",
            self.name,
            labels.join(", ")
        )
    }
}

/// Which cluster a scenario runs on. Every scenario runs on both, from the same code
/// ([`both_backends!`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The simulated API server and its stand-in kubelets (`kubelet-gitops-sim serve`).
    Sim,
    /// Kubernetes v1.36 on loopback: etcd, kube-apiserver, controller-manager, scheduler
    /// and a real kubelet per node ([`real::RealCluster`]), built by `upstream/build.sh`.
    Real,
}

impl Backend {
    /// `sim` or `real`.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Sim => "sim",
            Backend::Real => "real",
        }
    }
}

/// Defines, for the scenario `async fn NAME(backend: Backend) -> Result<(), E2eError>`,
/// the module `NAME` with two tests, `NAME::sim` and `NAME::real`.
#[macro_export]
macro_rules! both_backends {
    ($scenario:ident) => {
        mod $scenario {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sim() -> Result<(), $crate::E2eError> {
                super::$scenario($crate::Backend::Sim).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn real() -> Result<(), $crate::E2eError> {
                super::$scenario($crate::Backend::Real).await
            }
        }
    };
}

/// How a scenario's cluster and repository start.
#[derive(Debug, Clone)]
pub struct Options {
    /// The cluster.
    pub backend: Backend,
    /// The inventory.
    pub nodes: Vec<NodeSpec>,
    /// The pools of the first commit.
    pub pools: Vec<Pool>,
    /// The repository's rollout settings.
    pub rollout: Rollout,
    /// The stand-in kubelets' pause between stop and start on a restart (the sim only: a
    /// real kubelet takes what it takes).
    pub kubelet_start_delay: Duration,
    /// A pause the agents' restart command takes before restarting the kubelet (a slow
    /// `systemctl restart`), to widen the Applying window.
    pub restart_delay: Option<Duration>,
    /// The restart command returns without waiting for the kubelet to start (as
    /// `systemctl restart` of a `Type=simple` unit does), so the agent verifies while the
    /// kubelet is still starting: with a long `kubelet_start_delay`, a wide Verifying
    /// window.
    pub restart_detached: bool,
    /// More arguments of `kubelet-gitops-sim serve` (the sim only), e.g. its fault
    /// injection: `--fault-409-rate 0.1` answers a tenth of all writes 409 Conflict.
    pub sim_args: Vec<String>,
}

impl Options {
    /// The default options on `backend`. A real kubelet takes a second or two to
    /// restart, more on a loaded 2-core machine with 16 of them: it gets 20 s to come back
    /// healthy, where a stand-in gets 5 s.
    pub fn on(backend: Backend) -> Options {
        let mut options = Options {
            backend,
            ..Options::default()
        };
        if backend == Backend::Real {
            options.rollout.health_timeout = "20s".into();
        }
        options
    }
}

impl Default for Options {
    /// Eight nodes in three pools: `general` (four nodes, `general-3` labelled canary),
    /// `gpu` and `infra` (two each); `kubeAPIQPS` 11, 21 and 31.
    fn default() -> Options {
        let mut nodes: Vec<NodeSpec> = (1..=4)
            .map(|i| NodeSpec::new(&format!("general-{i}"), "general"))
            .collect();
        nodes[2].canary = true;
        nodes.extend((1..=2).map(|i| NodeSpec::new(&format!("gpu-{i}"), "gpu")));
        nodes.extend((1..=2).map(|i| NodeSpec::new(&format!("infra-{i}"), "infra")));
        Options {
            backend: Backend::Sim,
            nodes,
            pools: vec![
                Pool::new("general", 0, 11),
                Pool::new("gpu", 20, 21),
                Pool::new("infra", 10, 31),
            ],
            rollout: Rollout::default(),
            kubelet_start_delay: Duration::from_millis(100),
            restart_delay: None,
            restart_detached: false,
            sim_args: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inventory_entry_carries_pool_and_canary_labels() {
        let mut n = NodeSpec::new("general-3", "general");
        n.canary = true;
        let inv = format!("nodes:\n{}", n.inventory_entry());
        let parsed =
            kubelet_gitops_core::inventory::Inventory::parse("i.yaml", inv.as_bytes()).unwrap();
        let labels = &parsed.nodes[0].labels;
        assert_eq!(labels[POOL_LABEL], "general");
        assert_eq!(labels[CANARY_LABEL], "true");
    }
}
