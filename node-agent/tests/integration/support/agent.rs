//! For the `agent_*` and `rescue` tests: a sim with one node and its stand-in kubelet,
//! the agent running in-process against that node's root, and the test in the
//! reconciler's seat (immutable ConfigMaps, desired-config annotations).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Node};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use kubelet_gitops_core::inventory::Inventory;
use kubelet_gitops_core::protocol::{
    self, CURRENT_CONFIG, DESIRED_CONFIG, HEALTH_TIMEOUT, LKG_GRACE,
};
use kubelet_gitops_sim::cluster::{Sim, SimConfig};
use kubelet_gitops_sim::kubelet::{HttpTarget, KubeletOptions, KubeletPaths};
use kubelet_gitops_sim::resources::kinds;
use kubelet_gitops_sim::store::WriteOptions;
use serde_json::{Value, json};
use tokio::sync::{RwLockReadGuard, RwLockWriteGuard};
use tokio::task::JoinHandle;

use super::NODE;

pub const NAMESPACE: &str = "kubelet-gitops";
/// The agent's checkpoint directory, as a path on the node.
pub const CHECKPOINT_DIR: &str = "/var/lib/kubelet-gitops";

/// One node; its kubelet runs with `--max-pods=50` on the command line. Its `--root-dir`
/// (where its state files live) is the default `/var/lib/kubelet` of the node, which the
/// agent reads under its host root, the node's root: it never touches this machine's.
const INVENTORY: &str = "\
nodes:
  - name: w1
    labels: {node.kubernetes.io/pool: general}
    capacity: {cpu: \"8\", memory: 32Gi, ephemeral-storage: 100Gi, pods: \"110\"}
    kubeletFlags: \"--max-pods=50 --node-ip=10.0.0.5\"
";

/// The sim's own config.yaml for the node, which a pool config typically restates.
pub const BASE_CONFIG: &str = "\
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

/// Every wait in these tests gives up after this long (a failure, not a timing check).
pub const PATIENCE: Duration = Duration::from_secs(60);

pub fn init_tracing() {
    kubelet_gitops_core::logging::init_for_tests();
}

/// What a [`Harness`] holds of [`super::PROCESSES`]: the agent restarts the kubelet with
/// a command (`curl`), so every harness starts child processes.
enum Processes {
    Shared {
        _guard: RwLockReadGuard<'static, ()>,
    },
    Alone {
        _guard: RwLockWriteGuard<'static, ()>,
    },
}

pub struct Harness {
    pub dir: tempfile::TempDir,
    pub sim: Sim,
    pub client: Client,
    agent: Option<JoinHandle<Result<(), node_agent::AgentError>>>,
    _processes: Processes,
}

/// What a refused config must leave as it was ([`Harness::start_agent_on_local`]).
pub struct Untouched {
    /// The kubelet's config file.
    pub original: Vec<u8>,
    /// How many times the kubelet had started.
    pub starts: u64,
}

impl Harness {
    /// A sim with one node and fast stand-in kubelets that stay down after a failed
    /// start (no systemd-style restart), so only the agent restarts them.
    pub async fn start() -> Harness {
        Self::start_holding(
            Processes::Shared {
                _guard: super::children().await,
            },
            INVENTORY,
        )
        .await
    }

    /// [`Harness::start`] with more inventory fields for the node (`runtimeCgroupDriver:
    /// systemd`), one a line, as they go under the node's entry.
    pub async fn start_with_node_fields(fields: &[&str]) -> Harness {
        let mut inventory = INVENTORY.to_string();
        for f in fields {
            inventory.push_str(&format!("    {f}\n"));
        }
        Self::start_holding(
            Processes::Shared {
                _guard: super::children().await,
            },
            &inventory,
        )
        .await
    }

    /// [`Harness::start`] for a test that runs alone ([`super::alone`]): one that checks
    /// who holds a `flock`, or one whose timing other tests beside it would upset.
    pub async fn start_alone() -> Harness {
        Self::start_holding(
            Processes::Alone {
                _guard: super::alone().await,
            },
            INVENTORY,
        )
        .await
    }

    async fn start_holding(processes: Processes, inventory: &str) -> Harness {
        init_tracing();
        let dir = tempfile::tempdir().expect("tempdir");
        let sim_dir = dir.path().join("sim");
        let inventory =
            Inventory::parse("inventory.yaml", inventory.as_bytes()).expect("inventory");
        let mut config = SimConfig::new(inventory, sim_dir);
        config.kubelet = KubeletOptions {
            start_delay: Duration::from_millis(50),
            not_ready_delay: Duration::from_millis(500),
            lease_renew_interval: Duration::from_millis(500),
            restart_after_exit: None,
            ..KubeletOptions::default()
        };
        let sim = Sim::start(config).await.expect("sim starts");
        let kc = kube::config::Kubeconfig::read_from(sim.kubeconfig_path()).expect("kubeconfig");
        let cfg =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .expect("kube config");
        let client = Client::try_from(cfg).expect("client");
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(NAMESPACE.into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .expect("namespace");
        let h = Harness {
            dir,
            sim,
            client,
            agent: None,
            _processes: processes,
        };
        h.wait_node(|n| ready(n) == "True", "Ready").await;
        h
    }

    /// The pods cgroup's memory limit file of the stand-in kubelet (cgroup v2, systemd
    /// driver, no cgroupRoot: `/kubepods.slice`).
    pub fn pods_memory_limit_file(&self) -> PathBuf {
        self.root().join("sys/fs/cgroup/kubepods.slice/memory.max")
    }

    /// The node's root: its `/`, and the agent's `--host-root`.
    pub fn root(&self) -> PathBuf {
        self.sim.node_root(NODE)
    }

    /// `path`, a path on the node, as a path on this machine.
    pub fn on_node(&self, path: &str) -> PathBuf {
        self.root().join(path.trim_start_matches('/'))
    }

    /// The kubelet's `--config` file, as a path on this machine.
    pub fn config_file(&self) -> PathBuf {
        self.on_node(KubeletPaths::CONFIG)
    }

    /// The kubelet's `--root-dir` (its default), where its state files live.
    pub fn kubelet_root_dir(&self) -> PathBuf {
        self.on_node("/var/lib/kubelet")
    }

    /// The kubelet's `--config-dir`.
    pub fn drop_in_dir(&self) -> PathBuf {
        self.on_node(KubeletPaths::DROP_IN_DIR)
    }

    /// The agent's checkpoint directory (its default on the node).
    pub fn checkpoint_dir(&self) -> PathBuf {
        self.on_node(CHECKPOINT_DIR)
    }

    pub fn kubelet_url(&self) -> String {
        self.sim.kubelet(NODE).expect("kubelet").url()
    }

    /// The agent's options for the node, as a DaemonSet runs it: the node's root is the
    /// host root and every path is a path on the node; replace mode on the kubelet's
    /// config.yaml, flags from kubeadm-flags.env, restart through the sim's control
    /// endpoint with curl.
    pub fn agent_args(&self) -> Vec<String> {
        let url = self.kubelet_url();
        vec![
            "kubelet-gitops-agent".into(),
            format!("--node-name={NODE}"),
            format!("--kubeconfig={}", self.sim.kubeconfig_path().display()),
            format!("--host-root={}", self.root().display()),
            format!("--checkpoint-dir={CHECKPOINT_DIR}"),
            "--mode=replace".into(),
            format!("--kubelet-config={}", KubeletPaths::CONFIG),
            "--flags-from=files".into(),
            format!("--flags-file={}", KubeletPaths::FLAGS_ENV),
            "--restart-method=command".into(),
            format!(
                "--restart-command=curl -fsS -X POST {}/sim/v1/nodes/{NODE}/kubelet/restart",
                self.sim.url()
            ),
            format!("--healthz-url={url}/healthz"),
            format!("--configz-url={url}/configz"),
            format!("--cgroup-root={}", KubeletPaths::CGROUP_ROOT),
            "--cgroup-driver=systemd".into(),
            "--health-timeout=2m".into(),
            "--lkg-grace=1h".into(),
            "--resync-interval=1s".into(),
            "--admin-addr=127.0.0.1:0".into(),
        ]
    }

    /// [`Harness::agent_args`] in drop-in mode: the agent writes its drop-in into the
    /// kubelet's `--config-dir` and leaves `config.yaml` alone.
    pub fn drop_in_args(&self) -> Vec<String> {
        self.agent_args()
            .into_iter()
            .filter(|a| !a.starts_with("--kubelet-config="))
            .map(|a| {
                if a == "--mode=replace" {
                    "--mode=drop-in".to_string()
                } else {
                    a
                }
            })
            .chain([format!("--drop-in-dir={}", KubeletPaths::DROP_IN_DIR)])
            .collect()
    }

    /// Starts the agent in-process with [`Harness::agent_args`] plus `extra`.
    pub fn start_agent(&mut self, extra: &[&str]) {
        let mut args = self.agent_args();
        args.extend(extra.iter().map(|s| s.to_string()));
        self.start_agent_with(args);
    }

    /// Starts the agent in-process with exactly `args` (the program name first).
    pub fn start_agent_with(&mut self, args: Vec<String>) {
        use clap::Parser;
        let config = node_agent::Args::try_parse_from(args)
            .expect("args parse")
            .into_config()
            .expect("valid config");
        assert!(self.agent.is_none(), "one agent at a time");
        self.agent = Some(tokio::spawn(node_agent::run(config)));
    }

    /// Whether the in-process agent is still running (it never returns by itself).
    pub fn agent_running(&self) -> bool {
        self.agent.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// `meta/assigned`'s value as JSON (`Null` when absent), read without opening the
    /// store (whose `open` tidies the directory, which must not race the agent).
    pub fn assigned(&self) -> Value {
        std::fs::read_to_string(self.checkpoint_dir().join("meta/assigned"))
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .map(|v| v["value"].clone())
            .unwrap_or(Value::Null)
    }

    /// Waits until `meta/assigned` names `config` in `phase`; polls every millisecond so
    /// that a test can act between two phases.
    pub async fn wait_phase(&self, config: &str, phase: &str) -> Value {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let a = self.assigned();
            if a["checkpoint"]["config"] == config && a["phase"] == phase {
                return a;
            }
            assert!(
                Instant::now() < deadline,
                "meta/assigned never reached {phase} for {config}: {a}"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Stops the agent abruptly (its future is dropped at its next await).
    pub async fn kill_agent(&mut self) {
        if let Some(task) = self.agent.take() {
            task.abort();
            let _ = task.await;
        }
    }

    /// Publishes `yaml` as an immutable ConfigMap, as the reconciler does; returns
    /// `<namespace>/<name>`.
    pub async fn publish(&self, pool: &str, yaml: &str) -> String {
        let name = protocol::configmap_name(pool, yaml.as_bytes());
        self.publish_named(&name, pool, yaml).await
    }

    /// Publishes `yaml` as the ConfigMap `name` of `pool`, whatever name its content would
    /// have (a ConfigMap replaced behind the reconciler's back); returns
    /// `<namespace>/<name>`.
    pub async fn publish_named(&self, name: &str, pool: &str, yaml: &str) -> String {
        let name = name.to_string();
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(NAMESPACE.into()),
                labels: Some(
                    [
                        (
                            protocol::MANAGED_BY_LABEL.to_string(),
                            protocol::MANAGED_BY.to_string(),
                        ),
                        (protocol::POOL_LABEL.to_string(), pool.to_string()),
                    ]
                    .into(),
                ),
                ..ObjectMeta::default()
            },
            immutable: Some(true),
            data: Some([(protocol::CONFIGMAP_KEY.to_string(), yaml.to_string())].into()),
            ..ConfigMap::default()
        };
        Api::<ConfigMap>::namespaced(self.client.clone(), NAMESPACE)
            .create(&PostParams::default(), &cm)
            .await
            .expect("configmap created");
        format!("{NAMESPACE}/{name}")
    }

    /// Sets (or with `None` removes) the node's desired-config, with the rollout timings.
    pub async fn assign(&self, desired: Option<&str>, health_timeout: &str, lkg_grace: &str) {
        let patch = match desired {
            Some(d) => json!({"metadata": {"annotations": {
                DESIRED_CONFIG: d, HEALTH_TIMEOUT: health_timeout, LKG_GRACE: lkg_grace,
            }}}),
            None => json!({"metadata": {"annotations": {
                DESIRED_CONFIG: null, HEALTH_TIMEOUT: null, LKG_GRACE: null,
            }}}),
        };
        Api::<Node>::all(self.client.clone())
            .patch(NODE, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("node patched");
    }

    /// Creates or replaces pod `default/<name>` on the node, Ready or not, in the sim's
    /// store (over the sim's API pods are read-only: their status is the kubelet's).
    pub fn put_pod(&self, name: &str, ready: bool) {
        let store = self.sim.store();
        let opts = WriteOptions::default();
        if store.get(kinds::pods(), Some("default"), name).is_err() {
            let pod = json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"nodeName": NODE, "containers": [{"name": "app", "image": "app:1"}]},
            });
            store
                .create(kinds::pods(), Some("default"), pod, &opts)
                .expect("pod stored");
        }
        // The sim plays the kubelet for a bound pod (Running and Ready); the readiness
        // this test wants goes through the status subresource, as a kubelet writes it.
        let mut pod = store
            .get(kinds::pods(), Some("default"), name)
            .expect("pod read");
        pod["status"] = json!({"phase": "Running", "conditions": [
            {"type": "Ready", "status": if ready { "True" } else { "False" }},
        ]});
        store
            .update(
                kinds::pods(),
                Some("default"),
                name,
                Some("status"),
                pod,
                &opts,
            )
            .expect("pod status stored");
    }

    /// The Node from the sim's store.
    pub fn node(&self) -> Value {
        self.sim
            .store()
            .get(kinds::nodes(), None, NODE)
            .expect("node exists")
    }

    /// Waits until the agent reports the node's own (local) config, Ready.
    pub async fn wait_local_reported(&self) -> Value {
        self.wait_node(
            |n| {
                annotation(n, CURRENT_CONFIG) == Some("local")
                    && condition(n, "KubeletConfigReady")["status"] == "True"
            },
            "local reported",
        )
        .await
    }

    /// Waits until `pred` holds for the Node; panics with the Node's annotations after
    /// [`PATIENCE`].
    pub async fn wait_node(&self, pred: impl Fn(&Value) -> bool, what: &str) -> Value {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let n = self.node();
            if pred(&n) {
                return n;
            }
            assert!(
                Instant::now() < deadline,
                "node never reached {what}: annotations {} conditions {}",
                n["metadata"]["annotations"],
                n["status"]["conditions"]
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the agent reports `state` about `observed`, in the annotations and in
    /// the `KubeletConfigReady` condition (written right after them).
    pub async fn wait_state(&self, observed: &str, state: &str) -> Value {
        self.wait_node(
            |n| {
                annotation(n, protocol::OBSERVED_CONFIG) == Some(observed)
                    && annotation(n, protocol::STATE) == Some(state)
                    && condition(n, protocol::CONDITION_TYPE)["reason"] == state
            },
            &format!("state {state} for {observed}"),
        )
        .await
    }

    /// Waits until an Event about the node has `reason` and a message containing
    /// `text`; returns its message.
    pub async fn wait_event(&self, reason: &str, text: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let events = self.events().await;
            if let Some((_, m)) = events.iter().find(|(r, m)| r == reason && m.contains(text)) {
                return m.clone();
            }
            assert!(
                Instant::now() < deadline,
                "no event {reason} containing {text:?}: {events:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// configz of the stand-in kubelet (`kubeletconfig`).
    pub async fn configz(&self) -> Value {
        let target = HttpTarget::parse(&self.kubelet_url()).expect("url");
        let (code, body) = target
            .request("GET", "/configz", None, None)
            .await
            .expect("configz answers");
        assert_eq!(code, 200);
        let v: Value = serde_json::from_slice(&body).expect("json");
        v["kubeletconfig"].clone()
    }

    /// The Events about the node, as `(reason, message)`.
    pub async fn events(&self) -> Vec<(String, String)> {
        Api::<Event>::namespaced(self.client.clone(), "default")
            .list(&ListParams::default())
            .await
            .expect("events")
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(NODE))
            .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
            .collect()
    }

    /// The config file, checked to be a complete, valid KubeletConfiguration.
    /// Starts the agent with no options and waits until the node runs its local config:
    /// what a config refused later must leave as it was.
    pub async fn start_agent_on_local(&mut self) -> Untouched {
        let original = std::fs::read(self.config_file()).unwrap();
        self.start_agent(&[]);
        self.wait_node(|n| annotation(n, CURRENT_CONFIG) == Some("local"), "local")
            .await;
        Untouched {
            original,
            starts: self.sim.kubelet("w1").unwrap().state().starts,
        }
    }

    /// Asserts that a refused config touched nothing since `before`: the kubelet's config
    /// file holds what it held, and the kubelet was not restarted.
    pub fn assert_untouched(&self, before: &Untouched) {
        assert_eq!(
            std::fs::read(self.config_file()).unwrap(),
            before.original,
            "file untouched"
        );
        assert_eq!(
            self.sim.kubelet("w1").unwrap().state().starts,
            before.starts,
            "kubelet untouched"
        );
    }

    pub fn config_file_valid(&self) -> Vec<u8> {
        let bytes = std::fs::read(self.config_file()).expect("config file readable");
        kubelet_gitops_core::decode::decode_kubelet_configuration("config.yaml", &bytes)
            .unwrap_or_else(|e| panic!("config file is not a valid KubeletConfiguration: {e}"));
        bytes
    }

    pub async fn shutdown(mut self) {
        self.kill_agent().await;
        self.sim.shutdown().await;
    }
}

pub fn annotation<'a>(node: &'a Value, key: &str) -> Option<&'a str> {
    node["metadata"]["annotations"][key].as_str()
}

pub fn ready(node: &Value) -> &str {
    condition(node, "Ready")["status"].as_str().unwrap_or("")
}

pub fn condition<'a>(node: &'a Value, kind: &str) -> &'a Value {
    node["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind))
        .unwrap_or(&Value::Null)
}

/// [`BASE_CONFIG`] with `extra` YAML lines appended.
pub fn config_with(extra: &str) -> String {
    format!("{BASE_CONFIG}{extra}")
}
