//! The agent's figures, against the sim and a stand-in kubelet, with the built binary:
//!
//! - idle RSS: the agent on a node with nothing to do, after its first sync;
//! - reaction: from the desired-config annotation change to the kubelet restart command
//!   being run (download, checkpoint, validate, write, all fsyncs and API round trips
//!   included; the kubelet's own restart excluded), p50 / p99 / max over N applies.
//!
//! `cargo bench -p node-agent --bench agent` (N from `AGENT_BENCH_APPLIES`, default 50).

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use kubelet_gitops_core::inventory::Inventory;
use kubelet_gitops_core::protocol::{self, DESIRED_CONFIG, HEALTH_TIMEOUT, LKG_GRACE};
use kubelet_gitops_sim::cluster::{Sim, SimConfig};
use kubelet_gitops_sim::kubelet::{KubeletOptions, KubeletPaths};
use kubelet_gitops_sim::resources::kinds;
use serde_json::json;

const INVENTORY: &str = "\
nodes:
  - name: w1
    capacity: {cpu: \"8\", memory: 32Gi, ephemeral-storage: 100Gi, pods: \"110\"}
    kubeletFlags: \"--max-pods=50\"
";

const BASE: &str = "\
apiVersion: kubelet.config.k8s.io/v1beta1
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

fn unix_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn annotation(sim: &Sim, key: &str) -> Option<String> {
    sim.store()
        .get(kinds::nodes(), None, "w1")
        .ok()?
        .pointer(&format!("/metadata/annotations/{}", key.replace('/', "~1")))?
        .as_str()
        .map(str::to_string)
}

async fn wait(what: &str, mut pred: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !pred() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn restarts(path: &Path) -> Vec<u128> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let applies: usize = std::env::var("AGENT_BENCH_APPLIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let dir = tempfile::tempdir().expect("tempdir");
    let inventory = Inventory::parse("inventory.yaml", INVENTORY.as_bytes()).expect("inventory");
    let mut config = SimConfig::new(inventory, dir.path().join("sim"));
    config.kubelet = KubeletOptions {
        start_delay: Duration::from_millis(20),
        not_ready_delay: Duration::from_millis(500),
        restart_after_exit: None,
        events: false,
        ..KubeletOptions::default()
    };
    let sim = Sim::start(config).await.expect("sim");
    let kc = kube::config::Kubeconfig::read_from(sim.kubeconfig_path()).expect("kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .expect("kube config");
    let client = Client::try_from(cfg).expect("client");
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some("kubelet-gitops".into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace");

    let root = sim.node_root("w1");
    let kubelet_url = sim.kubelet("w1").expect("kubelet").url();
    let stamps = dir.path().join("restarts");
    let restart = format!(
        "sh -c 'date +%s%N >> {} && exec curl -fsS -X POST {}/sim/v1/nodes/w1/kubelet/restart -o /dev/null'",
        stamps.display(),
        sim.url()
    );
    let log = std::fs::File::create(dir.path().join("agent.log")).expect("log");
    let mut agent = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubelet-gitops-agent"))
        .args([
            "--node-name=w1".to_string(),
            format!("--kubeconfig={}", sim.kubeconfig_path().display()),
            // As a DaemonSet runs it: the node's root is the host root, and every path
            // is a path on the node (the agent reads the node's pid_max there, the one
            // its kubelet reads).
            format!("--host-root={}", root.display()),
            "--checkpoint-dir=/var/lib/kubelet-gitops".into(),
            format!("--kubelet-config={}", KubeletPaths::CONFIG),
            format!("--flags-file={}", KubeletPaths::FLAGS_ENV),
            "--restart-method=command".into(),
            format!("--restart-command={restart}"),
            format!("--healthz-url={kubelet_url}/healthz"),
            format!("--configz-url={kubelet_url}/configz"),
            format!("--cgroup-root={}", KubeletPaths::CGROUP_ROOT),
            "--admin-addr=127.0.0.1:0".into(),
            "--log=warn".into(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .expect("agent");
    let pid = agent.id().expect("pid");

    // Idle: first sync done (current-config reported), then a few quiet seconds.
    wait("the first sync", || {
        annotation(&sim, protocol::CURRENT_CONFIG).is_some()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let idle_rss = rss_kib(pid).expect("rss");

    let nodes: Api<Node> = Api::all(client.clone());
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "kubelet-gitops");
    let mut reaction = Vec::with_capacity(applies);
    for i in 0..applies {
        let yaml = format!("{BASE}kubeAPIQPS: {}\n", 100 + i);
        let name = protocol::configmap_name("bench", yaml.as_bytes());
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..ObjectMeta::default()
            },
            immutable: Some(true),
            data: Some([(protocol::CONFIGMAP_KEY.to_string(), yaml)].into()),
            ..ConfigMap::default()
        };
        cms.create(&PostParams::default(), &cm)
            .await
            .expect("configmap");
        let desired = format!("kubelet-gitops/{name}");
        let seen = restarts(&stamps).len();
        let patch = json!({"metadata": {"annotations": {
            DESIRED_CONFIG: desired, HEALTH_TIMEOUT: "30s", LKG_GRACE: "1h",
        }}});
        let t0 = unix_nanos();
        nodes
            .patch("w1", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("patch");
        wait("the restart command", || restarts(&stamps).len() > seen).await;
        let t1 = restarts(&stamps)[seen];
        reaction.push(Duration::from_nanos(t1.saturating_sub(t0) as u64));
        wait("Done", || {
            annotation(&sim, protocol::STATE).as_deref() == Some("Done")
                && annotation(&sim, protocol::OBSERVED_CONFIG).as_deref() == Some(desired.as_str())
        })
        .await;
    }
    let busy_rss = rss_kib(pid).expect("rss");
    reaction.sort();
    println!(
        "agent idle RSS: {:.1} MiB (after {applies} applies: {:.1} MiB)",
        idle_rss as f64 / 1024.0,
        busy_rss as f64 / 1024.0
    );
    println!(
        "annotation change -> restart command, {applies} applies: p50 {:?}, p99 {:?}, max {:?}",
        percentile(&reaction, 0.5),
        percentile(&reaction, 0.99),
        reaction[reaction.len() - 1]
    );
    agent.start_kill().ok();
    let _ = agent.wait().await;
    sim.shutdown().await;
}
