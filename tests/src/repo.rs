//! The config repository the scenarios start from, and builders for its files.
//!
//! Each pool sets `kubeAPIQPS` to a number of its own: a field the kubelet does not
//! override from its flags here, which shows in `/configz`, and which no other default
//! depends on, so changing it is a harmless config change to roll out.

use crate::{NAMESPACE, POOL_LABEL};

/// Repository settings: publish in [`NAMESPACE`], keep ten ConfigMaps per pool, and the
/// rollout every pool starts from.
pub fn settings(rollout: &Rollout) -> String {
    format!(
        "apiVersion: kubelet-gitops.io/v1alpha1
kind: RepoSettings
spec:
  namespace: {NAMESPACE}
  keepConfigMaps: 10
  rollout:
    maxUnavailable: {}
    canary: {}
    healthTimeout: {}
    lkgGrace: {}
",
        rollout.max_unavailable, rollout.canary, rollout.health_timeout, rollout.lkg_grace
    )
}

/// The base every pool starts from: what the stand-in kubelets' own config file holds
/// (the agent replaces that file with the rendered config).
pub const BASE: &str = "apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
authorization:
  mode: Webhook
cgroupDriver: systemd
clusterDNS:
  - 10.96.0.10
clusterDomain: cluster.local
rotateCertificates: true
";

/// The rollout settings of the repository.
#[derive(Debug, Clone)]
pub struct Rollout {
    /// `maxUnavailable`.
    pub max_unavailable: String,
    /// `canary`.
    pub canary: u32,
    /// `healthTimeout` (humantime).
    pub health_timeout: String,
    /// `lkgGrace` (humantime).
    pub lkg_grace: String,
}

impl Default for Rollout {
    /// One node at a time after one canary; a kubelet has 5 s to come back healthy
    /// (the stand-in restarts in a fraction of that), and a config is last-known-good
    /// after 2 s.
    fn default() -> Rollout {
        Rollout {
            max_unavailable: "1".into(),
            canary: 1,
            health_timeout: "5s".into(),
            lkg_grace: "2s".into(),
        }
    }
}

/// A pool file: `pools/<pool>.yaml`.
#[derive(Debug, Clone)]
pub struct Pool {
    /// The pool's name (also the value of the `node.kubernetes.io/pool` label it selects).
    pub name: String,
    /// Its priority.
    pub priority: u32,
    /// `kubeAPIQPS` of its kubelets.
    pub qps: u32,
    /// Extra `spec.rollout` lines (`paused: true`), each without indentation.
    pub rollout: Vec<String>,
    /// Extra `spec.kubelet` lines (`cgroupRoot: /blocked`), each without indentation.
    pub kubelet: Vec<String>,
    /// `spec.disruption.classes` (field to class: `kubeAPIQPS: drain`).
    pub classes: Vec<(String, String)>,
}

impl Pool {
    /// A pool selecting `node.kubernetes.io/pool=<name>` with `kubeAPIQPS: <qps>`.
    pub fn new(name: &str, priority: u32, qps: u32) -> Pool {
        Pool {
            name: name.into(),
            priority,
            qps,
            rollout: Vec::new(),
            kubelet: Vec::new(),
            classes: Vec::new(),
        }
    }

    /// Its path in the repository.
    pub fn path(&self) -> String {
        format!("pools/{}.yaml", self.name)
    }

    /// The file's content.
    pub fn yaml(&self) -> String {
        let mut s = format!(
            "apiVersion: kubelet-gitops.io/v1alpha1
kind: NodePool
metadata:
  name: {name}
spec:
  nodeSelector:
    matchLabels:
      {POOL_LABEL}: {name}
  priority: {priority}
",
            name = self.name,
            priority = self.priority
        );
        if !self.rollout.is_empty() {
            s.push_str("  rollout:\n");
            for l in &self.rollout {
                s.push_str(&format!("    {l}\n"));
            }
        }
        s.push_str(&format!("  kubelet:\n    kubeAPIQPS: {}\n", self.qps));
        for l in &self.kubelet {
            s.push_str(&format!("    {l}\n"));
        }
        if !self.classes.is_empty() {
            s.push_str("  disruption:\n    classes:\n");
            for (field, class) in &self.classes {
                s.push_str(&format!("      {field}: {class}\n"));
            }
        }
        s
    }
}
