//! `kubelet-gitops demo --cluster real`: the demo's 12 nodes as real v1.36 kubelets on
//! this machine, under a real control plane (etcd, kube-apiserver, controller-manager,
//! scheduler), all built by `upstream/build.sh` and run by the e2e harness's
//! [`RealCluster`] (docs/real-kubernetes.md).
//!
//! What differs from the simulator, and only here:
//!
//! - Each node is a kubelet with a fake CRI runtime, a kubeadm-like root under
//!   `<workdir>/nodes/<name>` and its own cgroup root; its node-specific settings are
//!   flags in its `kubeadm-flags.env`, its labels those of the example inventory. Of the
//!   inventory's `kubeletFlags`, `--node-ip` is left out (10.0.x.y is no address of this
//!   machine, and a kubelet refuses a node IP it does not have); `--max-pods` stays, so
//!   the flag override of act 2 is the real kubelet's.
//! - deploy/base's RBAC and admission policy are applied; the reconciler runs with its
//!   ServiceAccount's token and each agent with a token bound to its Node, never as admin.
//! - The agents run as on the node itself (`--host-root=/`, every path a real path) and
//!   restart their kubelet as `systemctl restart kubelet` would (a SIGTERM, then the
//!   harness's supervisor starts it again); they read the real `/configz` over HTTPS with
//!   their token, which the kubelet has the API server authorize.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;
use kubelet_gitops_core::inventory::{Inventory, InventoryNode};
use kubelet_gitops_e2e::E2eError;
use kubelet_gitops_e2e::real::{NodeSetup, RealCluster, UpstreamBinaries};

use super::error::{DemoError, io};
use super::view::NodeView;

/// The demo's real cluster and the identities of the product in it.
pub struct RealDemo {
    cluster: RealCluster,
    reconciler_kubeconfig: PathBuf,
    http: reqwest::Client,
}

/// A [`DemoError::Real`] for the step `what`.
fn real(what: &'static str) -> impl FnOnce(E2eError) -> DemoError {
    move |e| DemoError::Real {
        what,
        source: Box::new(e),
    }
}

/// An inventory node's kubelet flags as a kubelet on this machine takes them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsableFlags {
    /// The flags kept.
    pub flags: Vec<String>,
    /// The labels of its `--node-labels`.
    pub labels: Vec<(String, String)>,
}

/// The kubelet flags of an inventory node that a kubelet on this machine can take:
/// `--node-labels` become labels, `--node-ip` is left out (see the module doc).
pub fn usable_flags(node: &InventoryNode) -> Result<UsableFlags, String> {
    let words = node.kubelet_args().map_err(|e| e.to_string())?;
    let mut flags = Vec::new();
    let mut labels = Vec::new();
    let mut words = words.into_iter();
    while let Some(word) = words.next() {
        let (name, value) = match word.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (word.clone(), None),
        };
        match name.as_str() {
            "--node-ip" => {
                if value.is_none() {
                    words.next();
                }
            }
            "--node-labels" => {
                let value = value.or_else(|| words.next()).unwrap_or_default();
                for pair in value.split(',').filter(|p| !p.is_empty()) {
                    let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                    labels.push((k.to_string(), v.to_string()));
                }
            }
            _ => flags.push(word),
        }
    }
    Ok(UsableFlags { flags, labels })
}

/// How kubeadm would set up `node` for a kubelet on this machine: its labels, the
/// usable kubelet flags, and `config` as its `config.yaml`.
pub fn node_setup(node: &InventoryNode, config: &str) -> Result<NodeSetup, DemoError> {
    let usable = usable_flags(node)
        .map_err(|e| DemoError::ExampleChanged(format!("{}'s kubeletFlags: {e}", node.name)))?;
    let mut labels: BTreeMap<String, String> = node.labels.clone();
    labels.extend(usable.labels);
    Ok(NodeSetup {
        name: node.name.clone(),
        labels: labels.into_iter().collect(),
        config: config.to_string(),
        flags: usable.flags,
    })
}

impl RealDemo {
    /// Starts the control plane and one kubelet per inventory node in `workdir`, waits
    /// until every Node is Ready, applies deploy/base, and writes the reconciler's
    /// kubeconfig (its ServiceAccount's token).
    pub async fn start(
        workdir: &Path,
        inventory: &Inventory,
        bins: UpstreamBinaries,
    ) -> Result<RealDemo, DemoError> {
        // What the pools' configs name on this machine (real_kubelet_base).
        for dir in ["etc/kubernetes/manifests", "var/log/pods"] {
            let d = workdir.join(dir);
            std::fs::create_dir_all(&d).map_err(io("create", &d))?;
        }
        let base = kubelet_gitops_e2e::real::kubelet_base(workdir);
        let setups = inventory
            .nodes
            .iter()
            .map(|n| node_setup(n, &base))
            .collect::<Result<Vec<_>, _>>()?;
        let cluster = RealCluster::start(workdir, &workdir.join("logs"), bins, &setups, true)
            .await
            .map_err(real("start the control plane and the kubelets"))?;
        cluster
            .apply_deploy_base()
            .await
            .map_err(real("apply deploy/base"))?;
        let reconciler_kubeconfig = workdir.join("reconciler.kubeconfig");
        cluster
            .reconciler_kubeconfig(&reconciler_kubeconfig)
            .await
            .map_err(real("issue the reconciler's token"))?;
        let http = kubelet_gitops_e2e::real::http_client()
            .timeout(Duration::from_secs(2))
            .build()
            .map_err(|e| DemoError::Real {
                what: "build an HTTP client",
                source: Box::new(E2eError::Unexpected {
                    what: "reqwest".into(),
                    message: e.to_string(),
                }),
            })?;
        Ok(RealDemo {
            cluster,
            reconciler_kubeconfig,
            http,
        })
    }

    /// The API server's URL.
    pub fn server(&self) -> &str {
        self.cluster.server()
    }

    /// The cluster CA certificate.
    pub fn ca(&self) -> &Path {
        self.cluster.ca()
    }

    /// The admin kubeconfig (for a person watching; the product never uses it).
    pub fn admin_kubeconfig(&self) -> &Path {
        self.cluster.admin_kubeconfig()
    }

    /// The reconciler's kubeconfig (deploy/'s reconciler ServiceAccount).
    pub fn reconciler_kubeconfig(&self) -> &Path {
        &self.reconciler_kubeconfig
    }

    /// The node names.
    pub fn node_names(&self) -> Vec<String> {
        self.cluster.nodes().keys().cloned().collect()
    }

    /// The agent's node-specific arguments for `name`: its identity and paths
    /// ([`RealCluster::agent_identity`], files written in `workdir`) and its kubelet's
    /// restart command.
    pub async fn agent_args(&self, name: &str, workdir: &Path) -> Result<Vec<String>, DemoError> {
        let node = self.cluster.node(name).map_err(real("find a node"))?;
        let agent = self
            .cluster
            .agent_identity(name, workdir)
            .await
            .map_err(real("issue an agent's token"))?;
        let restart: Vec<String> = node
            .restart_command()
            .iter()
            .map(|w| kubelet_gitops_e2e::process::shell_quote(w))
            .collect();
        let mut args = vec![
            format!("--kubeconfig={}", agent.kubeconfig.display()),
            format!("--restart-command={}", restart.join(" ")),
        ];
        args.extend(agent.args);
        Ok(args)
    }

    /// Every Node as the node protocol shows it, read from the API server.
    pub async fn nodes(&self) -> Result<Vec<NodeView>, DemoError> {
        let list = Api::<Node>::all(self.cluster.client().clone())
            .list(&ListParams::default())
            .await
            .map_err(|e| DemoError::Real {
                what: "list the Nodes",
                source: Box::new(E2eError::Kube {
                    what: "listing nodes".into(),
                    source: e,
                }),
            })?;
        let mut nodes: Vec<NodeView> = list
            .items
            .iter()
            .filter_map(|n| serde_json::to_value(n).ok())
            .map(|v| NodeView::from_node(&v))
            .collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(nodes)
    }

    /// How many times each kubelet has started (its supervisor counts).
    pub fn kubelet_starts(&self) -> BTreeMap<String, u64> {
        self.cluster
            .nodes()
            .iter()
            .map(|(name, n)| (name.clone(), u64::from(n.starts())))
            .collect()
    }

    /// Whether the kubelet of `name` answers `/healthz` with `ok`.
    pub async fn kubelet_healthy(&self, name: &str) -> bool {
        let Some(node) = self.cluster.nodes().get(name) else {
            return false;
        };
        let url = format!("http://127.0.0.1:{}/healthz", node.healthz_port);
        match self.http.get(&url).send().await {
            Ok(r) if r.status().is_success() => r.text().await.is_ok_and(|t| t.trim() == "ok"),
            _ => false,
        }
    }

    /// An error naming a control-plane process or fake runtime that exited.
    pub fn check(&mut self) -> Result<(), DemoError> {
        self.cluster
            .check()
            .map_err(real("keep the cluster running"))
    }

    /// Stops the kubelets (their mounts and cgroups cleaned up) and the control plane.
    pub async fn stop(mut self) {
        if let Err(e) = self.cluster.stop().await {
            tracing::warn!(error = %e, "stopping the real cluster");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(flags: Option<&str>) -> InventoryNode {
        let text = format!(
            "nodes:\n  - name: gpu-3\n    labels: {{node.kubernetes.io/pool: gpu}}\n    capacity: {{cpu: \"4\", memory: 8Gi, ephemeral-storage: 50Gi, pods: \"110\"}}\n{}",
            flags
                .map(|f| format!("    kubeletFlags: \"{f}\"\n"))
                .unwrap_or_default()
        );
        Inventory::parse("inventory.yaml", text.as_bytes())
            .unwrap()
            .nodes
            .remove(0)
    }

    #[test]
    fn node_ips_are_left_out_and_node_labels_become_labels() {
        let usable = usable_flags(&node(Some(
            "--max-pods=110 --node-ip=10.0.2.13 --node-labels=nvidia.com/gpu.present=true,a=b",
        )))
        .unwrap();
        assert_eq!(usable.flags, ["--max-pods=110"]);
        assert_eq!(
            usable.labels,
            [
                ("nvidia.com/gpu.present".to_string(), "true".to_string()),
                ("a".to_string(), "b".to_string())
            ]
        );
        let usable = usable_flags(&node(Some("--node-ip 10.0.2.13 --max-pods 90"))).unwrap();
        assert_eq!(usable.flags, ["--max-pods", "90"]);
        assert_eq!(usable_flags(&node(None)).unwrap(), UsableFlags::default());

        let setup = node_setup(
            &node(Some("--node-labels=nvidia.com/gpu.present=true")),
            "kind: KubeletConfiguration\n",
        )
        .unwrap();
        assert_eq!(
            setup.labels,
            [
                ("node.kubernetes.io/pool".to_string(), "gpu".to_string()),
                ("nvidia.com/gpu.present".to_string(), "true".to_string())
            ]
        );
        assert!(setup.flags.is_empty());
    }
}
