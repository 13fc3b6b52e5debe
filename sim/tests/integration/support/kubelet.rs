//! For the nodes_* and kubelet_* tests: a whole `Sim` (nodes and stand-in kubelets) with
//! fast kubelet timings, and reads of its Nodes.

use std::path::Path;
use std::time::{Duration, Instant};

use kubelet_gitops_core::inventory::Inventory;
use kubelet_gitops_sim::cluster::{Sim, SimConfig};
use kubelet_gitops_sim::kubelet::{ApiFailure, HttpTarget, KubeletOptions};
use kubelet_gitops_sim::resources::kinds;
use serde_json::Value;

/// Kubelet timings that keep tests fast; no automatic restart after an exit.
pub fn fast_options() -> KubeletOptions {
    KubeletOptions {
        start_delay: Duration::from_millis(50),
        not_ready_delay: Duration::from_millis(300),
        lease_renew_interval: Duration::from_millis(200),
        restart_after_exit: None,
        ..KubeletOptions::default()
    }
}

/// Starts a sim of `inventory_yaml` in `dir` with fast kubelets.
pub async fn start(dir: &Path, inventory_yaml: &str, kubelets: bool) -> Sim {
    let inventory =
        Inventory::parse("inventory.yaml", inventory_yaml.as_bytes()).expect("inventory");
    let mut config = SimConfig::new(inventory, dir);
    config.kubelets = kubelets;
    config.kubelet = fast_options();
    Sim::start(config).await.expect("sim starts")
}

/// GET `path` on `url`: (code, body), or the transport error (code 0: refused).
pub async fn get(url: &str, path: &str) -> Result<(u16, String), ApiFailure> {
    let target = HttpTarget::parse(url).expect("url");
    let (code, body) = target.request("GET", path, None, None).await?;
    Ok((code, String::from_utf8_lossy(&body).into_owned()))
}

/// The Node object from the sim's store.
pub fn node(sim: &Sim, name: &str) -> Value {
    sim.store()
        .get(kinds::nodes(), None, name)
        .expect("node exists")
}

/// The Node's condition of `kind`.
pub fn condition(node: &Value, kind: &str) -> Value {
    node.pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind))
        .cloned()
        .unwrap_or(Value::Null)
}

/// Waits until node `name`'s Ready condition has `status`; returns the condition.
pub async fn wait_ready_status(sim: &Sim, name: &str, status: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let ready = condition(&node(sim, name), "Ready");
        if ready["status"] == status {
            return ready;
        }
        assert!(
            Instant::now() < deadline,
            "node {name} never Ready={status}: {ready}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub const CONFIG_HEAD: &str =
    "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";
