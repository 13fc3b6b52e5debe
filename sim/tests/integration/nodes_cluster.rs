//! Nodes of an inventory appear in the API server as a kubelet registers them.

use crate::support::kubelet::start;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{Api, ListParams};
use kubelet_gitops_core::quantity::Quantity;

const INVENTORY: &str = "\
nodes:
  - name: gpu-1
    labels: {node.kubernetes.io/pool: gpu, topology.kubernetes.io/zone: a}
    capacity: {cpu: \"8\", memory: 32Gi, ephemeral-storage: 100Gi, pods: \"110\"}
    kubeletFlags: \"--system-reserved=cpu=500m,memory=1Gi --kube-reserved=cpu=250m --node-labels=extra=yes --node-ip=192.168.7.7\"
  - name: general-1
    labels: {node.kubernetes.io/pool: general}
    capacity: {cpu: \"4\", memory: 16Gi, ephemeral-storage: 50Gi, pods: \"40\"}
";

async fn client(sim: &kubelet_gitops_sim::cluster::Sim) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(sim.kubeconfig_path()).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config");
    kube::Client::try_from(config).expect("client")
}

fn q(node: &Node, field: &str, resource: &str) -> Quantity {
    let status = node.status.as_ref().expect("status");
    let map = match field {
        "capacity" => status.capacity.as_ref(),
        _ => status.allocatable.as_ref(),
    }
    .expect("resource list");
    Quantity::parse(
        &map.get(resource)
            .unwrap_or_else(|| panic!("{field}.{resource}"))
            .0,
    )
    .expect("quantity")
}

const GI: i128 = 1 << 30;
const MI: i128 = 1 << 20;

async fn check_nodes(kubelets: bool) {
    let dir = tempfile::tempdir().unwrap();
    let sim = start(dir.path(), INVENTORY, kubelets).await;
    let client = client(&sim).await;
    let nodes: Api<Node> = Api::all(client.clone());
    let list = nodes
        .list(&ListParams::default())
        .await
        .expect("list nodes");
    let names: Vec<_> = list
        .items
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    assert_eq!(names, ["general-1", "gpu-1"]);

    let gpu = nodes.get("gpu-1").await.expect("gpu-1");
    let labels = gpu.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels["node.kubernetes.io/pool"], "gpu");
    assert_eq!(labels["topology.kubernetes.io/zone"], "a");
    assert_eq!(labels["kubernetes.io/hostname"], "gpu-1");
    assert_eq!(labels["kubernetes.io/os"], "linux");
    assert_eq!(labels["kubernetes.io/arch"], "amd64");
    assert_eq!(labels["extra"], "yes", "--node-labels");

    assert_eq!(q(&gpu, "capacity", "cpu").milli_value(), 8000);
    assert_eq!(q(&gpu, "capacity", "memory").value(), 32 * GI);
    assert_eq!(q(&gpu, "capacity", "pods").value(), 110);
    assert_eq!(q(&gpu, "capacity", "ephemeral-storage").value(), 100 * GI);
    // Flags reserve 500m + 250m CPU and 1Gi memory; the default evictionHard takes
    // memory.available 100Mi and nodefs.available 10%.
    assert_eq!(q(&gpu, "allocatable", "cpu").milli_value(), 7250);
    assert_eq!(q(&gpu, "allocatable", "memory").value(), 31 * GI - 100 * MI);
    let eph = q(&gpu, "allocatable", "ephemeral-storage").value();
    assert!(eph > 89 * GI && eph <= 90 * GI, "{eph}");
    assert_eq!(q(&gpu, "allocatable", "pods").value(), 110);

    let general = nodes.get("general-1").await.expect("general-1");
    assert_eq!(
        q(&general, "capacity", "pods").value(),
        40,
        "maxPods from the inventory"
    );
    assert_eq!(q(&general, "allocatable", "cpu").milli_value(), 4000);
    assert_eq!(
        q(&general, "allocatable", "memory").value(),
        16 * GI - 100 * MI
    );

    let status = gpu.status.clone().expect("status");
    let ready = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .expect("Ready");
    assert_eq!(ready.status, "True");
    assert_eq!(ready.reason.as_deref(), Some("KubeletReady"));
    assert_eq!(
        ready.message.as_deref(),
        Some("kubelet is posting ready status")
    );
    let info = status.node_info.expect("nodeInfo");
    assert_eq!(info.kubelet_version, "v1.36.0");
    assert_eq!(info.operating_system, "linux");
    let addresses = status.addresses.unwrap_or_default();
    assert!(
        addresses
            .iter()
            .any(|a| a.type_ == "InternalIP" && a.address == "192.168.7.7")
    );
    assert!(
        addresses
            .iter()
            .any(|a| a.type_ == "Hostname" && a.address == "gpu-1")
    );
    let general_ip = general
        .status
        .clone()
        .unwrap()
        .addresses
        .unwrap_or_default();
    assert!(
        general_ip
            .iter()
            .any(|a| a.type_ == "InternalIP" && a.address == "10.0.0.11"),
        "{general_ip:?}"
    );
    let port = status
        .daemon_endpoints
        .and_then(|d| d.kubelet_endpoint)
        .map(|e| e.port);
    match sim.kubelet("gpu-1") {
        Some(k) => {
            assert!(kubelets);
            assert_eq!(port, Some(i32::from(k.port())));
        }
        None => {
            assert!(!kubelets);
            assert_eq!(port, Some(10250));
        }
    }

    let namespaces: Api<Namespace> = Api::all(client);
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        namespaces
            .get(ns)
            .await
            .unwrap_or_else(|e| panic!("namespace {ns}: {e}"));
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn nodes_are_registered_without_kubelets() {
    check_nodes(false).await;
}

#[tokio::test]
async fn nodes_are_registered_and_kept_by_their_kubelets() {
    check_nodes(true).await;
}

#[tokio::test]
async fn a_generated_inventory_registers_every_node() {
    let dir = tempfile::tempdir().unwrap();
    let inventory = kubelet_gitops_core::inventory::Inventory::generate(200, &["a", "b"]);
    let mut config = kubelet_gitops_sim::cluster::SimConfig::new(inventory, dir.path());
    config.kubelets = false;
    let sim = kubelet_gitops_sim::cluster::Sim::start(config)
        .await
        .expect("sim");
    let nodes: Api<Node> = Api::all(client(&sim).await);
    let pool_a = nodes
        .list(&ListParams::default().labels("node.kubernetes.io/pool=a"))
        .await
        .expect("list");
    assert_eq!(pool_a.items.len(), 100);
    sim.shutdown().await;
}

/// Without stand-in kubelets the Nodes report their status as quiet kubelets do, once
/// the churn is on: every Node gets a MODIFIED event with a new resourceVersion, each
/// write counted under the client `kubelet`; off (the default of `SimConfig::new`), no
/// Node is written.
#[tokio::test]
async fn nodes_without_kubelets_report_their_status_at_the_churn_rate() {
    use kubelet_gitops_sim::cluster::{Sim, SimConfig, StatusChurn};
    use kubelet_gitops_sim::resources::kinds;
    use kubelet_gitops_sim::store::WatchOptions;
    use std::collections::BTreeSet;
    use std::time::Duration;

    let dir = tempfile::tempdir().unwrap();
    let inventory = kubelet_gitops_core::inventory::Inventory::generate(6, &["a", "b"]);
    let mut config = SimConfig::new(inventory, dir.path());
    config.kubelets = false;
    let sim = Sim::start(config).await.expect("sim");
    let log = sim.request_log();
    assert_eq!(sim.status_churn(), StatusChurn::Off, "off for tests");
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert_eq!(
        log.client_requests("kubelet"),
        0,
        "{:?}",
        log.counts_by_client()
    );

    let from = sim.store().current_resource_version();
    let mut events = sim
        .store()
        .watch(
            kinds::nodes(),
            None,
            &WatchOptions {
                resource_version: Some(from.to_string()),
                ..WatchOptions::default()
            },
        )
        .expect("watch");
    // Two rounds of 1.2 s: the second report of each Node is more than a second after
    // its creation, so its heartbeat (to the second) has moved.
    sim.set_status_churn(StatusChurn::PerNode(Duration::from_millis(1200)));
    let mut modified = BTreeSet::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while modified.len() < 6 {
        let ev = tokio::time::timeout_at(deadline, events.recv())
            .await
            .unwrap_or_else(|_| panic!("only {modified:?} reported their status"))
            .expect("watch open");
        assert_eq!(ev.kind, "MODIFIED");
        let rv: u64 = ev.object()["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|r| r.parse().ok())
            .expect("resourceVersion");
        assert!(rv > from);
        modified.insert(
            ev.object()["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    assert!(log.client_count("kubelet", "patch", "nodes/status") >= 6);
    assert_eq!(log.client_writes("kubelet"), log.client_requests("kubelet"));

    sim.set_status_churn(StatusChurn::Off);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stopped = log.client_requests("kubelet");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        log.client_requests("kubelet"),
        stopped,
        "off stops the reports"
    );
    sim.shutdown().await;
}
