//! For the `host_*` tests that run against the sim's stand-in kubelet.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kubelet_gitops_core::inventory::Inventory;
use kubelet_gitops_core::quantity::Quantity;
use kubelet_gitops_sim::cluster::{Sim, SimConfig};
use kubelet_gitops_sim::kubelet::{KubeletHandle, KubeletOptions, KubeletPaths};
use node_agent::cgroups::{CgroupConfig, CgroupDriver};
use node_agent::config_file::Placement;
use node_agent::hostflags::{FlagSource, read_flags};
use node_agent::kubelet::{Kubelet, KubeletSettings, RestartMethod};
use node_agent::validate::NodeContext;
use tokio::sync::RwLockReadGuard;

use super::NODE;

pub fn inventory(flags: Option<&str>) -> String {
    let mut s = format!(
        "nodes:\n  - name: {NODE}\n    capacity: {{cpu: \"4\", memory: 8Gi, ephemeral-storage: 40Gi, pods: \"30\"}}\n"
    );
    if let Some(f) = flags {
        s.push_str(&format!("    kubeletFlags: \"{f}\"\n"));
    }
    s
}

/// A sim started for a test, holding the test's share of [`super::children`]: its
/// stand-in kubelets keep the machine busy, and a test that runs [`super::alone`] runs
/// beside none.
pub struct HostSim {
    sim: Sim,
    _processes: RwLockReadGuard<'static, ()>,
}

impl HostSim {
    pub async fn shutdown(self) {
        self.sim.shutdown().await;
    }
}

impl std::ops::Deref for HostSim {
    type Target = Sim;

    fn deref(&self) -> &Sim {
        &self.sim
    }
}

/// A sim of one node with fast stand-in kubelets that stay down after a failed start.
pub async fn start_sim(dir: &Path, flags: Option<&str>, cgroup_v2: bool) -> HostSim {
    let processes = super::children().await;
    let inventory =
        Inventory::parse("inventory.yaml", inventory(flags).as_bytes()).expect("inventory");
    let mut config = SimConfig::new(inventory, dir);
    config.cgroup_v2 = cgroup_v2;
    config.kubelet = KubeletOptions {
        start_delay: Duration::from_millis(50),
        not_ready_delay: Duration::from_millis(300),
        lease_renew_interval: Duration::from_millis(200),
        restart_after_exit: None,
        ..KubeletOptions::default()
    };
    HostSim {
        sim: Sim::start(config).await.expect("sim starts"),
        _processes: processes,
    }
}

pub fn handle(sim: &Sim) -> KubeletHandle {
    sim.kubelet(NODE).expect("stand-in kubelet").clone()
}

/// `curl -fsS -X POST <sim>/sim/v1/nodes/<node>/kubelet/restart`.
pub fn curl_restart(sim: &Sim) -> RestartMethod {
    RestartMethod::Command(vec![
        "curl".into(),
        "-fsS".into(),
        "-X".into(),
        "POST".into(),
        format!("{}/sim/v1/nodes/{NODE}/kubelet/restart", sim.url()),
    ])
}

/// A client for the stand-in: restart with curl, healthz and configz on its port.
pub fn kubelet_client(sim: &Sim) -> Kubelet {
    let k = handle(sim);
    let mut settings = KubeletSettings::new(curl_restart(sim), format!("{}/healthz", k.url()));
    settings.configz_url = Some(format!("{}/configz", k.url()));
    settings.poll_interval = Duration::from_millis(100);
    Kubelet::new(settings).expect("kubelet client")
}

/// The node as the sim reports it: the inventory's capacity and no huge pages. No `pid`:
/// the agent reads it from the node's `/proc/sys/kernel/pid_max` under its host root, the
/// file the stand-in reads.
pub fn capacity() -> BTreeMap<String, Quantity> {
    [
        ("cpu", "4"),
        ("memory", "8Gi"),
        ("ephemeral-storage", "40Gi"),
        ("pods", "30"),
        ("hugepages-1Gi", "0"),
        ("hugepages-2Mi", "0"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.parse().expect("quantity")))
    .collect()
}

/// The agent's view of the sim's node, as a DaemonSet's agent sees it: the node's root is
/// the host root, the flags come from kubeadm's files there (they name paths on the
/// node), its cgroup tree, replace mode on the `--config` file (a path on the node).
pub fn node_context(sim: &Sim) -> NodeContext {
    let k = handle(sim);
    let paths = k.paths();
    let flags = read_flags(&FlagSource::kubeadm_files(), &paths.root).expect("the sim's flags");
    NodeContext {
        flags,
        host_root: paths.root.clone(),
        capacity: capacity(),
        cgroups: CgroupConfig::detect(&paths.cgroup_root, CgroupDriver::Systemd)
            .expect("cgroup tree"),
        placement: Placement::ConfigFile {
            path: PathBuf::from(KubeletPaths::CONFIG),
        },
    }
}

/// The sim's initial config (as `initial_config_yaml` writes it) with `maxPods: max_pods`
/// and the lines of `extra` appended.
pub fn config(sim: &Sim, max_pods: u32, extra: &str) -> String {
    let node = &sim.inventory().expect("the sim runs kubelets").nodes[0];
    let base = kubelet_gitops_sim::kubelet::initial_config_yaml(node, cgroup_v2(sim));
    let mut out: String = base
        .lines()
        .filter(|l| !l.starts_with("maxPods:"))
        .map(|l| format!("{l}\n"))
        .collect();
    out.push_str(&format!("maxPods: {max_pods}\n{extra}"));
    out
}

/// Whether the sim's nodes run cgroup v2 (their tree has `cgroup.controllers`).
pub fn cgroup_v2(sim: &Sim) -> bool {
    handle(sim)
        .paths()
        .cgroup_root
        .join("cgroup.controllers")
        .exists()
}
