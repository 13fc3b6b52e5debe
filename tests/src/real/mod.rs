//! [`RealCluster`]: Kubernetes v1.36 on loopback, from the binaries `upstream/build.sh`
//! builds: etcd, kube-apiserver (its own CA, client certificates, service-account keys,
//! `--authorization-mode=Node,RBAC`, NodeRestriction), kube-controller-manager,
//! kube-scheduler, and N real kubelets, each with a fake CRI runtime, a kubeadm-like node
//! root and a supervisor that restarts it as systemd would ([`node`]).
//!
//! It touches nothing outside its directory, its loopback ports and its cgroup subtree
//! (`/kubelet-gitops-e2e/<cluster>` in each hierarchy), except what the kubelet itself
//! insists on; docs/real-kubernetes.md says what that is. At teardown the kubelets and
//! every control-plane process are killed, the kubelets' mounts under the directory
//! unmounted and the cgroups removed.
//!
//! `cargo run -p kubelet-gitops-e2e --bin e2e-cluster -- --nodes 3` runs one by hand.

pub mod cgroup;
pub mod control_plane;
pub mod kubeconfig;
pub mod node;
pub mod pki;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::api::ListParams;
use kube::{Api, Client};

use crate::process::run;
use crate::{E2eError, PATIENCE};
pub use control_plane::ControlPlane;
pub use kubeconfig::{Credentials, write_kubeconfig};
pub use node::{NodePaths, NodeSetup, RealNode, check_root_length};

/// Overrides where the upstream binaries are taken from (default: the repository's
/// `upstream/bin`).
pub const UPSTREAM_BIN_ENV: &str = "KUBELET_GITOPS_UPSTREAM_BIN";

/// The binaries `upstream/build.sh` builds.
#[derive(Debug, Clone)]
pub struct UpstreamBinaries {
    /// etcd.
    pub etcd: PathBuf,
    /// kube-apiserver.
    pub kube_apiserver: PathBuf,
    /// kube-controller-manager.
    pub kube_controller_manager: PathBuf,
    /// kube-scheduler.
    pub kube_scheduler: PathBuf,
    /// kubelet.
    pub kubelet: PathBuf,
    /// Our fake CRI runtime.
    pub fake_cri: PathBuf,
}

impl UpstreamBinaries {
    /// The binaries in [`UPSTREAM_BIN_ENV`] or the repository's `upstream/bin`.
    pub fn locate() -> Result<UpstreamBinaries, E2eError> {
        let dir = std::env::var_os(UPSTREAM_BIN_ENV)
            .map(PathBuf::from)
            .unwrap_or_else(UpstreamBinaries::default_dir);
        UpstreamBinaries::in_dir(&dir)
    }

    /// Where `upstream/build.sh` puts them: `upstream/bin` of the checkout this was built
    /// from.
    pub fn default_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../upstream/bin")
    }

    /// The binaries in `dir`; an error naming those missing.
    pub fn in_dir(dir: &Path) -> Result<UpstreamBinaries, E2eError> {
        let dir = dir.to_path_buf();
        let bin = |n: &str| dir.join(n);
        let found = UpstreamBinaries {
            etcd: bin("etcd"),
            kube_apiserver: bin("kube-apiserver"),
            kube_controller_manager: bin("kube-controller-manager"),
            kube_scheduler: bin("kube-scheduler"),
            kubelet: bin("kubelet"),
            fake_cri: bin("fake-cri"),
        };
        let missing = crate::process::missing_files(&[
            &found.etcd,
            &found.kube_apiserver,
            &found.kube_controller_manager,
            &found.kube_scheduler,
            &found.kubelet,
            &found.fake_cri,
        ]);
        if missing.is_empty() {
            Ok(found)
        } else {
            Err(E2eError::MissingUpstream { dir, missing })
        }
    }
}

impl UpstreamBinaries {
    /// [`UpstreamBinaries::locate`] for a test named `what`: `None` after printing
    /// `<what>: SKIPPED: <why>` when they are missing; a panic instead when
    /// [`crate::REQUIRE_ENV`] is set (CI).
    pub fn locate_or_skip(what: &str) -> Option<UpstreamBinaries> {
        match UpstreamBinaries::locate() {
            Ok(bins) => Some(bins),
            Err(e) if !crate::required() => {
                eprintln!("{what}: SKIPPED: {e}");
                None
            }
            Err(e) => panic!(
                "{what}: {e} ({} is set, so this is a failure)",
                crate::REQUIRE_ENV
            ),
        }
    }
}

/// An HTTP client builder: rustls with ring (installed as the process's provider: reqwest
/// is built without one), no proxy.
pub fn http_client() -> reqwest::ClientBuilder {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().no_proxy()
}

/// An [`http_client`] builder that trusts only the cluster CA `ca` and,
/// given `identity`, presents that client certificate: for the API server's and the
/// kubelets' TLS ports.
pub fn tls_client(
    ca: &Path,
    identity: Option<&pki::CertFiles>,
) -> Result<reqwest::ClientBuilder, E2eError> {
    let tls_error = |what: String| {
        move |e: reqwest::Error| E2eError::Unexpected {
            what,
            message: e.to_string(),
        }
    };
    let read =
        |p: &Path| std::fs::read(p).map_err(E2eError::io(format!("reading {}", p.display())));
    let roots = reqwest::Certificate::from_pem_bundle(&read(ca)?)
        .map_err(tls_error(format!("the CA {}", ca.display())))?;
    let mut builder = http_client().tls_certs_only(roots);
    if let Some(id) = identity {
        let mut pem = read(&id.cert)?;
        pem.extend(read(&id.key)?);
        builder = builder.identity(
            reqwest::Identity::from_pem(&pem)
                .map_err(tls_error(format!("the certificate {}", id.cert.display())))?,
        );
    }
    Ok(builder)
}

/// Runs kubectl with `kubeconfig`; its stdout.
pub async fn run_kubectl(kubeconfig: &Path, args: &[&str]) -> Result<String, E2eError> {
    let flag = format!("--kubeconfig={}", kubeconfig.display());
    let mut all = vec![flag.as_str()];
    all.extend_from_slice(args);
    run("kubectl", &all, None).await
}

/// An agent's identity and node paths on a real node ([`RealCluster::agent_identity`]).
#[derive(Debug, Clone)]
pub struct AgentIdentity {
    /// Its kubeconfig (the agent ServiceAccount's token bound to the Node).
    pub kubeconfig: PathBuf,
    /// Its node-specific arguments, but for the restart command.
    pub args: Vec<String>,
}

/// A running real cluster.
pub struct RealCluster {
    // Nodes drop (kubelets killed, mounts and cgroups cleaned) before the control plane.
    nodes: BTreeMap<String, RealNode>,
    control: ControlPlane,
    dir: PathBuf,
    logs: PathBuf,
    bins: UpstreamBinaries,
    cgroup: String,
    client: Client,
}

impl std::fmt::Debug for RealCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealCluster")
            .field("dir", &self.dir)
            .field("server", &self.control.server)
            .field("nodes", &self.nodes.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl RealCluster {
    /// Starts the control plane in `dir` (logs in `logs`) and a kubelet per node of
    /// `nodes` (none: a control plane only, without controller-manager and scheduler
    /// when `controllers` is false), and waits until every Node is Ready.
    pub async fn start(
        dir: &Path,
        logs: &Path,
        bins: UpstreamBinaries,
        nodes: &[NodeSetup],
        controllers: bool,
    ) -> Result<RealCluster, E2eError> {
        std::fs::create_dir_all(logs).map_err(E2eError::io("creating the log directory"))?;
        ensure_inotify_instances();
        let control =
            ControlPlane::start(&dir.join("control-plane"), logs, &bins, controllers).await?;
        let client = crate::cluster::client(&control.admin_kubeconfig).await?;
        // The directory's last two components name the cgroup: unique among the
        // scenarios' temporary directories, readable in `ls /sys/fs/cgroup/memory/...`.
        let tail: Vec<String> = dir
            .components()
            .rev()
            .take(2)
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let id: String = tail
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("-")
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let mut cluster = RealCluster {
            nodes: BTreeMap::new(),
            control,
            dir: dir.to_path_buf(),
            logs: logs.to_path_buf(),
            bins,
            cgroup: format!("{}/{id}", cgroup::E2E_CGROUP),
            client,
        };
        let started = Instant::now();
        for setup in nodes {
            cluster.add_node(setup).await?;
        }
        let names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
        cluster.wait_ready(&names).await?;
        if !nodes.is_empty() {
            eprintln!(
                "real cluster: {} kubelets Ready in {:.1?}",
                nodes.len(),
                started.elapsed()
            );
        }
        Ok(cluster)
    }

    /// Starts one more kubelet (a node joining); its Node registers itself. Does not
    /// wait for it (see [`RealCluster::wait_ready`]).
    pub async fn add_node(&mut self, setup: &NodeSetup) -> Result<&RealNode, E2eError> {
        let root = self.dir.join("nodes").join(&setup.name);
        let node = RealNode::start(
            &root,
            setup,
            &self.cgroup,
            &self.control.server,
            &self.control.pki,
            &self.bins,
            &self.logs,
        )
        .await?;
        self.nodes.insert(setup.name.clone(), node);
        Ok(&self.nodes[&setup.name])
    }

    /// Waits until each Node of `names` is registered and Ready.
    pub async fn wait_ready(&mut self, names: &[String]) -> Result<(), E2eError> {
        let deadline = Instant::now() + PATIENCE;
        let api = Api::<Node>::all(self.client.clone());
        loop {
            self.check()?;
            let list = api
                .list(&ListParams::default())
                .await
                .map_err(E2eError::kube("listing nodes"))?;
            let ready: Vec<String> = list
                .items
                .iter()
                .filter(|n| crate::NodeView::from_node(n).ready.as_deref() == Some("True"))
                .filter_map(|n| n.metadata.name.clone())
                .collect();
            let waiting: Vec<&String> = names.iter().filter(|n| !ready.contains(n)).collect();
            if waiting.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(E2eError::Timeout {
                    what: "every kubelet's Node Ready".into(),
                    waited: PATIENCE,
                    state: format!(
                        "not Ready: {waiting:?} (their logs: nodes/<name>/var/log/kubelet.log)"
                    ),
                });
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// The API server's URL.
    pub fn server(&self) -> &str {
        &self.control.server
    }

    /// The cluster CA certificate file.
    pub fn ca(&self) -> &Path {
        &self.control.pki.ca
    }

    /// The admin's client certificate.
    pub fn admin_cert(&self) -> &pki::CertFiles {
        &self.control.admin
    }

    /// The admin kubeconfig (group `system:masters`): the harness's, never the product's.
    pub fn admin_kubeconfig(&self) -> &Path {
        &self.control.admin_kubeconfig
    }

    /// An admin client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The nodes.
    pub fn nodes(&self) -> &BTreeMap<String, RealNode> {
        &self.nodes
    }

    /// One node.
    pub fn node(&self, name: &str) -> Result<&RealNode, E2eError> {
        self.nodes.get(name).ok_or_else(|| E2eError::Unexpected {
            what: format!("real node {name}"),
            message: "no such node".into(),
        })
    }

    /// The cluster's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// An error naming a control-plane process or fake runtime that exited.
    pub fn check(&mut self) -> Result<(), E2eError> {
        self.control.check()?;
        self.nodes.values_mut().try_for_each(RealNode::check)
    }

    /// A token of service account `namespace/name` (the TokenRequest API, as `kubectl
    /// create token`), bound to Node `node` when given (so it carries the node's name,
    /// as a DaemonSet pod's projected token does); valid `hours`.
    pub async fn token(
        &self,
        namespace: &str,
        name: &str,
        node: Option<&str>,
        hours: u32,
    ) -> Result<String, E2eError> {
        let duration = format!("--duration={hours}h");
        let mut args = vec!["-n", namespace, "create", "token", name, duration.as_str()];
        let (kind, bound, uid);
        if let Some(node) = node {
            let n = Api::<Node>::all(self.client.clone())
                .get(node)
                .await
                .map_err(E2eError::kube(format!("reading Node {node}")))?;
            kind = "--bound-object-kind=Node".to_string();
            bound = format!("--bound-object-name={node}");
            uid = format!("--bound-object-uid={}", n.metadata.uid.unwrap_or_default());
            args.extend([kind.as_str(), bound.as_str(), uid.as_str()]);
        }
        Ok(run_kubectl(self.admin_kubeconfig(), &args)
            .await?
            .trim()
            .to_string())
    }

    /// Writes a kubeconfig at `path` for a service account's token (see
    /// [`RealCluster::token`]).
    pub async fn service_account_kubeconfig(
        &self,
        path: &Path,
        namespace: &str,
        name: &str,
        node: Option<&str>,
    ) -> Result<String, E2eError> {
        let token = self.token(namespace, name, node, 24).await?;
        write_kubeconfig(
            path,
            self.server(),
            self.ca(),
            &format!("system:serviceaccount:{namespace}:{name}"),
            &Credentials::Token(token.clone()),
        )?;
        Ok(token)
    }

    /// Writes a kubeconfig at `path` with a token of deploy/'s reconciler ServiceAccount.
    pub async fn reconciler_kubeconfig(&self, path: &Path) -> Result<(), E2eError> {
        self.service_account_kubeconfig(path, crate::NAMESPACE, "kubelet-gitops-reconciler", None)
            .await
            .map(drop)
    }

    /// How the agent of node `name` runs on this machine as on the node itself
    /// (`--host-root=/`, every path a real path), with a token of deploy/'s agent
    /// ServiceAccount bound to its Node, for the API server and the kubelet's `/configz`
    /// (its kubeconfig and token file written in `dir`).
    pub async fn agent_identity(&self, name: &str, dir: &Path) -> Result<AgentIdentity, E2eError> {
        let node = self.node(name)?;
        let kubeconfig = dir.join(format!("agent-{name}.kubeconfig"));
        let token = self
            .service_account_kubeconfig(
                &kubeconfig,
                crate::NAMESPACE,
                "kubelet-gitops-agent",
                Some(name),
            )
            .await?;
        let token_file = dir.join(format!("agent-{name}.token"));
        std::fs::write(&token_file, &token).map_err(E2eError::io("writing the agent's token"))?;
        let on_node = |p: &str| node.root.join(&p[1..]).display().to_string();
        let args = vec![
            "--host-root=/".into(),
            format!(
                "--checkpoint-dir={}",
                on_node(crate::KubeletInfo::CHECKPOINT_DIR)
            ),
            format!("--kubelet-config={}", on_node(NodePaths::CONFIG)),
            format!("--flags-file={}", on_node(NodePaths::FLAGS_ENV)),
            format!(
                "--healthz-url=http://127.0.0.1:{}/healthz",
                node.healthz_port
            ),
            format!("--configz-url=https://127.0.0.1:{}/configz", node.port),
            format!("--kubelet-token-file={}", token_file.display()),
            format!("--kubelet-ca-file={}", self.ca().display()),
            "--cgroup-root=/sys/fs/cgroup".into(),
            "--cgroup-driver=cgroupfs".into(),
        ];
        Ok(AgentIdentity { kubeconfig, args })
    }

    /// Applies the RBAC, admission policy and namespace of `deploy/base` (as `kubectl
    /// apply -k` would, after a server-side dry run), leaving out its Deployment and
    /// DaemonSet: the product runs here as processes, and their pods would make the
    /// kubelets create hostPath directories on this machine.
    pub async fn apply_deploy_base(&self) -> Result<(), E2eError> {
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/base");
        let rendered = run("kubectl", &["kustomize", &base.display().to_string()], None).await?;
        let kept: Vec<&str> = rendered
            .split("\n---\n")
            .filter(|doc| {
                !doc.lines()
                    .any(|l| l == "kind: Deployment" || l == "kind: DaemonSet")
            })
            .collect();
        let file = self.dir.join("deploy-base.yaml");
        std::fs::write(&file, kept.join("\n---\n"))
            .map_err(E2eError::io("writing the rendered deploy/base"))?;
        let f = file.display().to_string();
        // The namespace first: a server-side dry run of namespaced objects needs it.
        run_kubectl(
            self.admin_kubeconfig(),
            &["create", "namespace", crate::NAMESPACE],
        )
        .await?;
        run_kubectl(
            self.admin_kubeconfig(),
            &["apply", "--dry-run=server", "-f", &f],
        )
        .await?;
        run_kubectl(self.admin_kubeconfig(), &["apply", "-f", &f]).await?;
        Ok(())
    }

    /// Stops everything: kubelets (mounts and cgroups cleaned), then the control plane.
    pub async fn stop(&mut self) -> Result<(), E2eError> {
        for n in self.nodes.values_mut() {
            n.stop().await?;
        }
        self.control.kill().await?;
        cgroup::remove(&self.cgroup);
        cgroup::remove_top_if_empty();
        Ok(())
    }
}

impl Drop for RealCluster {
    fn drop(&mut self) {
        // The nodes clean up as they drop; then the cluster's own cgroup level.
        self.nodes.clear();
        cgroup::remove(&self.cgroup);
        cgroup::remove_top_if_empty();
    }
}

/// The KubeletConfiguration every real node starts from (kubeadm's
/// `/var/lib/kubelet/config.yaml`, and the base of the scenarios' repository): webhook
/// authentication and authorization (so the API server decides who reads `/configz`),
/// the cgroupfs driver, no swap or cgroup v1 refusal (these machines have both), and pod
/// logs kept in the cluster's directory. Everything node-specific is a flag in the
/// node's `kubeadm-flags.env`.
pub fn kubelet_base(cluster_dir: &Path) -> String {
    format!(
        "apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
authorization:
  mode: Webhook
cgroupDriver: cgroupfs
clusterDNS:
  - 10.96.0.10
clusterDomain: cluster.local
failCgroupV1: false
failSwapOn: false
podLogsDir: {}
",
        cluster_dir.join("var/log/pods").display()
    )
}

/// The inotify instances a user may hold that the suite wants: every real kubelet holds
/// several (cAdvisor, the certificate and CA file watchers, the plugin prober), the
/// scenarios run concurrently, and a kubelet that cannot get one exits at start
/// ("inotify_init: too many open files"). Many distributions keep the kernel's 128.
const INOTIFY_INSTANCES: u64 = 1024;
const INOTIFY_SYSCTL: &str = "/proc/sys/fs/inotify/max_user_instances";

/// Raises `fs.inotify.max_user_instances` to [`INOTIFY_INSTANCES`] when it is lower and
/// this process may (root); says so on stderr either way, since a kubelet that cannot
/// watch its files fails in a way that looks like a bad config.
fn ensure_inotify_instances() {
    let Some(current) = std::fs::read_to_string(INOTIFY_SYSCTL)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
    else {
        return;
    };
    if current >= INOTIFY_INSTANCES {
        return;
    }
    match std::fs::write(INOTIFY_SYSCTL, INOTIFY_INSTANCES.to_string()) {
        Ok(()) => eprintln!(
            "e2e: raised fs.inotify.max_user_instances from {current} to {INOTIFY_INSTANCES} (real kubelets run concurrently)"
        ),
        Err(e) => eprintln!(
            "e2e: WARNING: fs.inotify.max_user_instances is {current} and cannot be raised ({e}); \
             concurrent real kubelets may exit with \"inotify_init: too many open files\": \
             run `sysctl -w fs.inotify.max_user_instances={INOTIFY_INSTANCES}` as root"
        ),
    }
}
