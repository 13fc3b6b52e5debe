//! A stand-in kubelet per simulated node, which behaves like a kubelet from the outside.
//!
//! Each node has a root directory, the node's `/`, laid out like a kubeadm host
//! ([`KubeletPaths`]; paths as the node sees them):
//!
//! | path on the node | what |
//! | --- | --- |
//! | `/var/lib/kubelet/config.yaml` | the `--config` file (the sim writes a small valid one) |
//! | `/etc/kubernetes/kubelet.conf.d/` | the `--config-dir` drop-in directory |
//! | `/var/lib/kubelet/kubeadm-flags.env` | `KUBELET_KUBEADM_ARGS="..."`: the kubelet's command line |
//! | `/sys/fs/cgroup/` | a plain directory tree standing in for cgroupfs (v2, or v1 with one tree per controller) |
//! | `/proc/sys/kernel/pid_max` | the kubelet's internal `pid` capacity, read at each start (written once with this host's value) |
//! | `/proc/swaps` | the header only: no swap |
//! | `/run/containerd/containerd.sock` | a listening Unix socket standing in for containerd's ([`runtime`]) |
//! | `/etc/kubernetes/pki/ca.crt`, `/etc/kubernetes/manifests/`, `/etc/resolv.conf`, `/run/systemd/resolve/resolv.conf` | what a kubeadm node on Ubuntu has and kubelet configs name (`clientCAFile`, `staticPodPath`, `resolvConf`); the CA is a placeholder, not a certificate |
//! | `/var/log/kubelet.log` | klog-style lines: what it started with, why it exited |
//!
//! The flags name the files as on a real node (`--config=/var/lib/kubelet/config.yaml
//! --config-dir=/etc/kubernetes/kubelet.conf.d`): nothing in a node's files names its
//! root. The stand-in resolves every path it reads from its flags and configuration
//! under its node's root as a process chrooted there would ([`noderoot::resolve`]: `..`
//! stops at the root, symlinks are followed inside it), and whatever else reads a node's
//! files, such as a node agent, does the same with the root as its host root
//! (`--host-root=<root>`, as a DaemonSet pod reads the host's `/` at `/host`).
//!
//! On every (re)start it re-reads everything and does what the kubelet does with its
//! configuration ([`kubelet_gitops_core`]): parse the flags, build the effective config
//! (defaults, file, drop-ins, flags), validate it for the host's cgroup version, compute
//! node allocatable from the node's capacity, dial the container runtime's socket, create
//! the pods cgroup and check that the reserved cgroups that `enforceNodeAllocatable`
//! names exist. If all passes it runs:
//! it serves `/healthz` and `/configz` on `127.0.0.1:<port>` (one port for both; the port
//! stays the same across restarts), posts its Node's status (Ready, capacity,
//! allocatable), and renews its Lease in `kube-node-lease`. If anything fails it exits:
//! the port refuses connections, the reason (the kubelet's own words) is recorded in its
//! state and in `kubelet.log`, and after [`KubeletOptions::not_ready_delay`] the Node
//! turns `Ready=False` (reason `KubeletNotReady`, the exit reason in the message). Like
//! systemd's `Restart=always`, an exited kubelet is started again after
//! [`KubeletOptions::restart_after_exit`]. The runtime's socket listens for as long as
//! the node's stand-in exists, whatever its kubelet does.
//!
//! Deliberate differences from a real cluster: a real Node goes `Ready=Unknown`
//! (`NodeStatusUnknown`) 40 s after its kubelet stops renewing the Lease; here it goes
//! `Ready=False` after a short, configurable delay, with the reason in the message, so
//! tests and `kubectl describe node` see why. `/healthz` and `/configz` are plain http
//! without authentication, on one port. The runtime's socket accepts connections and
//! speaks no CRI.
//!
//! Control: [`KubeletHandle::restart`], the HTTP endpoints of [`control_router`]
//! (`POST /sim/v1/nodes/{name}/kubelet/restart`, `GET /sim/v1/nodes/{name}/kubelet`),
//! the `kubelet-gitops-sim restart-kubelet` command, and SIGHUP when the stand-in runs as
//! its own process ([`run_process`]).

mod api;
mod node;
pub mod noderoot;
pub mod runtime;
mod serve;
mod startup;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use kubelet_gitops_core::hostpath::host_path;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::inventory::InventoryNode;

pub use api::{ApiFailure, HttpTarget, Kind, NodeApi, TargetError};
pub use node::{
    CONTAINER_RUNTIME_VERSION, DEFAULT_PID_MAX, KUBELET_VERSION, LEASE_NAMESPACE, NodeStatus,
    READY_MESSAGE, Readiness, conditions, host_pid_max, initial_config_yaml,
    initial_effective_config, internal_ip, lease_object, node_labels, node_object,
    node_object_with, ready_status, reported_capacity, rfc3339,
};
pub use startup::{V1_CONTROLLERS, cgroup_name_repr};

/// How the stand-in kubelets behave. The defaults keep tests fast; the real figures are
/// in each field's documentation.
#[derive(Debug, Clone)]
pub struct KubeletOptions {
    /// The host's cgroup hierarchy: v2 (unified) or v1. Validation depends on it
    /// (`failCgroupV1`, swap), and so does the cgroup tree's layout. Default: v2.
    pub cgroup_v2: bool,
    /// The pause between stopping and starting again on a restart. Default 200 ms.
    pub start_delay: Duration,
    /// How long after the kubelet stops the Node turns NotReady. A real control plane
    /// waits for the Lease to expire (40 s). Default 3 s.
    pub not_ready_delay: Duration,
    /// How often the Lease is renewed. The real kubelet: every 10 s. Default 2 s.
    pub lease_renew_interval: Duration,
    /// `spec.leaseDurationSeconds` of the Lease (the kubelet's `nodeLeaseDurationSeconds`).
    /// Default 40.
    pub lease_duration_seconds: u32,
    /// systemd's `RestartSec=` with `Restart=always`: an exited kubelet is started again
    /// after this long; `None` leaves it down until restarted. Default 10 s, as kubeadm's
    /// kubelet unit.
    pub restart_after_exit: Option<Duration>,
    /// Post core/v1 Events as the kubelet does (`Starting`, `NodeReady`,
    /// `NodeAllocatableEnforced`, `FailedNodeAllocatableEnforcement`, `NodeNotReady`).
    /// Default true.
    pub events: bool,
}

impl Default for KubeletOptions {
    fn default() -> Self {
        KubeletOptions {
            cgroup_v2: true,
            start_delay: Duration::from_millis(200),
            not_ready_delay: Duration::from_secs(3),
            lease_renew_interval: Duration::from_secs(2),
            lease_duration_seconds: 40,
            restart_after_exit: Some(Duration::from_secs(10)),
            events: true,
        }
    }
}

/// Files a kubeadm node on Ubuntu has that kubelet configurations name, with their
/// content: (path on the node, content). Written once; a node keeps its disk.
const HOST_FILES: &[(&str, &str)] = &[
    (
        "/etc/kubernetes/pki/ca.crt",
        "# Stands in for the cluster CA certificate kubeadm writes here (clientCAFile).\n\
         # The simulated kubelet serves plain HTTP and never reads it.\n",
    ),
    (
        "/etc/resolv.conf",
        "# systemd-resolved's stub resolver (the kubelet's default resolvConf)\n\
         nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch .\n",
    ),
    (
        "/run/systemd/resolve/resolv.conf",
        "# systemd-resolved's upstream servers (resolvConf on systemd-resolved hosts)\n\
         nameserver 10.0.0.2\n",
    ),
    (
        "/proc/swaps",
        "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n",
    ),
];

/// Directories a kubeadm node has that kubelet configurations name.
const HOST_DIRS: &[&str] = &["/etc/kubernetes/manifests"];

/// Where a node's kubelet keeps its files: the node's root directory (its `/`) and, as
/// paths on this machine, the files under it. The associated constants are the same
/// files as the node sees them, which is how its flags name them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeletPaths {
    /// The node's root (its `/`).
    pub root: PathBuf,
    /// [`KubeletPaths::CONFIG`] under the root: the `--config` file.
    pub config: PathBuf,
    /// [`KubeletPaths::DROP_IN_DIR`] under the root: the `--config-dir` drop-in directory.
    pub drop_in_dir: PathBuf,
    /// [`KubeletPaths::FLAGS_ENV`] under the root: the kubelet's command line.
    pub flags_env: PathBuf,
    /// [`KubeletPaths::CGROUP_ROOT`] under the root: the cgroup tree.
    pub cgroup_root: PathBuf,
    /// [`KubeletPaths::PID_MAX`] under the root: the node's `pid_max`, the kubelet's
    /// internal `pid` capacity.
    pub pid_max: PathBuf,
    /// [`KubeletPaths::CONTAINERD_SOCKET`] under the root: the container runtime's socket.
    pub containerd_socket: PathBuf,
    /// [`KubeletPaths::LOG`] under the root.
    pub log: PathBuf,
    /// [`KubeletPaths::PID_FILE`] under the root: the process id, when the stand-in runs
    /// as its own process.
    pub pid_file: PathBuf,
}

impl KubeletPaths {
    /// The `--config` file, as the node sees it.
    pub const CONFIG: &str = "/var/lib/kubelet/config.yaml";
    /// The `--config-dir` drop-in directory, as the node sees it.
    pub const DROP_IN_DIR: &str = "/etc/kubernetes/kubelet.conf.d";
    /// kubeadm's flags file, as the node sees it.
    pub const FLAGS_ENV: &str = "/var/lib/kubelet/kubeadm-flags.env";
    /// The cgroup filesystem, as the node sees it.
    pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";
    /// The kernel's `pid_max`, as the node sees it.
    pub const PID_MAX: &str = "/proc/sys/kernel/pid_max";
    /// containerd's socket (the kubelet's default `containerRuntimeEndpoint`,
    /// `unix:///run/containerd/containerd.sock`), as the node sees it.
    pub const CONTAINERD_SOCKET: &str = "/run/containerd/containerd.sock";
    /// The kubelet's log, as the node sees it.
    pub const LOG: &str = "/var/log/kubelet.log";
    /// The stand-in's pid file, as the node sees it.
    pub const PID_FILE: &str = "/var/run/kubelet.pid";

    /// The paths under `root`.
    pub fn new(root: &Path) -> KubeletPaths {
        let under = |path: &str| host_path(root, path);
        KubeletPaths {
            root: root.to_path_buf(),
            config: under(Self::CONFIG),
            drop_in_dir: under(Self::DROP_IN_DIR),
            flags_env: under(Self::FLAGS_ENV),
            cgroup_root: under(Self::CGROUP_ROOT),
            pid_max: under(Self::PID_MAX),
            containerd_socket: under(Self::CONTAINERD_SOCKET),
            log: under(Self::LOG),
            pid_file: under(Self::PID_FILE),
        }
    }

    /// `path`, a path on the node (`/var/lib/kubelet/config.yaml`), as a path on this
    /// machine: resolved under the node's root as a process chrooted there resolves it
    /// ([`noderoot::resolve`]).
    pub fn resolve(&self, path: impl AsRef<Path>) -> std::io::Result<PathBuf> {
        noderoot::resolve(&self.root, path)
    }

    /// The kubelet's command line for `node`: `--config`, `--config-dir` (paths on the
    /// node, as kubeadm writes them), then the inventory's flags.
    pub fn command_line(&self, node: &InventoryNode) -> Result<Vec<String>, String> {
        let mut args = vec![
            format!("--config={}", Self::CONFIG),
            format!("--config-dir={}", Self::DROP_IN_DIR),
        ];
        let extra = node
            .kubelet_args()
            .map_err(|e| format!("node {}: kubeletFlags: {e}", node.name))?;
        for arg in &extra {
            let name = arg.trim_start_matches('-');
            let name = name.split('=').next().unwrap_or_default();
            if name == "config" || name == "config-dir" {
                return Err(format!(
                    "node {}: kubeletFlags sets --{name}, which the sim manages (--config={} --config-dir={})",
                    node.name,
                    Self::CONFIG,
                    Self::DROP_IN_DIR
                ));
            }
        }
        args.extend(extra);
        Ok(args)
    }

    /// Lays out the node's root for `node`: directories, `config.yaml`, the drop-in
    /// directory, `kubeadm-flags.env`, `proc/sys/kernel/pid_max` (this host's value, or
    /// [`DEFAULT_PID_MAX`] when it cannot be read), `proc/swaps` without swap, what
    /// kubelet configs name on a kubeadm host (the cluster CA placeholder,
    /// `etc/kubernetes/manifests`, both resolv.conf files), containerd's socket
    /// directory, and a cgroup tree with `system.slice` and `user.slice` (as systemd
    /// creates them; `kube.slice` and the like are left to whoever enforces them). Files
    /// that exist are kept, so a node keeps its disk across sim restarts. The socket
    /// itself is made by the stand-in ([`KubeletHandle::spawn`]).
    pub fn prepare(&self, node: &InventoryNode, cgroup_v2: bool) -> Result<(), String> {
        let io = |what: &Path, e: std::io::Error| format!("{}: {e}", what.display());
        let host_dirs: Vec<PathBuf> = HOST_DIRS.iter().map(|d| host_path(&self.root, d)).collect();
        for dir in [
            self.config.parent(),
            Some(self.drop_in_dir.as_path()),
            self.log.parent(),
            self.pid_file.parent(),
            self.pid_max.parent(),
            self.containerd_socket.parent(),
            Some(self.cgroup_root.as_path()),
        ]
        .into_iter()
        .flatten()
        .chain(host_dirs.iter().map(PathBuf::as_path))
        {
            std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        }
        if !self.config.exists() {
            write_atomic(
                &self.config,
                initial_config_yaml(node, cgroup_v2).as_bytes(),
            )
            .map_err(|e| io(&self.config, e))?;
        }
        if !self.flags_env.exists() {
            let args = self.command_line(node)?;
            write_atomic(&self.flags_env, kubeadm_flags_env(&args).as_bytes())
                .map_err(|e| io(&self.flags_env, e))?;
        }
        if !self.pid_max.exists() {
            write_atomic(&self.pid_max, format!("{}\n", host_pid_max()).as_bytes())
                .map_err(|e| io(&self.pid_max, e))?;
        }
        for (path, content) in HOST_FILES {
            let file = host_path(&self.root, path);
            if file.symlink_metadata().is_ok() {
                continue;
            }
            if let Some(dir) = file.parent() {
                std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
            }
            write_atomic(&file, content.as_bytes()).map_err(|e| io(&file, e))?;
        }
        let tree = startup::CgroupTree {
            root: &self.cgroup_root,
            version: if cgroup_v2 {
                kubelet_gitops_core::allocatable::CgroupVersion::V2
            } else {
                kubelet_gitops_core::allocatable::CgroupVersion::V1
            },
        };
        for slice in ["/system.slice", "/user.slice"] {
            tree.create(slice).map_err(|e| io(&self.cgroup_root, e))?;
        }
        if cgroup_v2 {
            let controllers = self.cgroup_root.join("cgroup.controllers");
            if !controllers.exists() {
                std::fs::write(
                    &controllers,
                    "cpuset cpu io memory hugetlb pids rdma misc\n",
                )
                .map_err(|e| io(&controllers, e))?;
            }
        }
        Ok(())
    }
}

/// `KUBELET_KUBEADM_ARGS="..."` for `args`, quoted so that systemd and
/// [`kubelet_gitops_core::flags::kubeadm_args`] give back exactly `args`.
pub fn kubeadm_flags_env(args: &[String]) -> String {
    let words: Vec<String> = args.iter().map(|a| shell_word(a)).collect();
    let line = words.join(" ");
    let mut escaped = String::with_capacity(line.len());
    for c in line.chars() {
        if matches!(c, '"' | '\\' | '$' | '`') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    format!("KUBELET_KUBEADM_ARGS=\"{escaped}\"\n")
}

fn shell_word(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_=./:,@%+".contains(c));
    if safe {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// Writes `bytes` to `path` through a temp file in the same directory and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

/// Where a stand-in kubelet is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum KubeletPhase {
    /// Reading its configuration; the port is closed.
    Starting,
    /// Serving `/healthz` and `/configz`, posting status, renewing its Lease.
    Running,
    /// Failed to start; the port is closed and the reason is recorded.
    Exited,
    /// Stopped on request (`systemctl stop`); the port is closed.
    Stopped,
}

/// A stand-in kubelet's state, as [`KubeletHandle::state`] and the control endpoint give it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeletState {
    /// The node.
    pub node: String,
    /// Where it is.
    pub phase: KubeletPhase,
    /// Why it exited, in the kubelet's own words, while `Exited` (and after a stop that
    /// followed an exit).
    pub reason: Option<String>,
    /// Its port on 127.0.0.1 (`/healthz`, `/configz`).
    pub port: u16,
    /// The node's root directory.
    pub root: PathBuf,
    /// How many times it has started (successfully or not).
    pub starts: u64,
    /// When it entered the current phase (RFC 3339).
    pub since: String,
    /// Node allocatable while running (resource to quantity).
    pub allocatable: Option<BTreeMap<String, String>>,
}

enum Command {
    Restart(oneshot::Sender<KubeletState>),
    Stop(oneshot::Sender<KubeletState>),
    Shutdown(oneshot::Sender<()>),
}

/// What one stand-in kubelet needs.
#[derive(Debug, Clone)]
pub struct KubeletSpec {
    /// The node, from the inventory.
    pub node: InventoryNode,
    /// Its number in the inventory (for its InternalIP).
    pub index: usize,
    /// Its files.
    pub paths: KubeletPaths,
    /// Its port on 127.0.0.1; 0 picks a free one (kept across restarts).
    pub port: u16,
    /// Timings and host facts.
    pub options: KubeletOptions,
}

/// A running stand-in kubelet. Cheap to clone; the kubelet stops when
/// [`KubeletHandle::shutdown`] is called or the last handle is dropped.
#[derive(Clone)]
pub struct KubeletHandle {
    inner: Arc<HandleInner>,
}

struct HandleInner {
    name: String,
    port: u16,
    paths: KubeletPaths,
    state: watch::Receiver<KubeletState>,
    commands: mpsc::Sender<Command>,
}

impl std::fmt::Debug for KubeletHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeletHandle")
            .field("node", &self.inner.name)
            .field("port", &self.inner.port)
            .finish()
    }
}

/// Picks a free port on 127.0.0.1.
fn free_port() -> std::io::Result<u16> {
    let l = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    Ok(l.local_addr()?.port())
}

impl KubeletHandle {
    /// Starts the stand-in kubelet for `spec`, talking to the API server through `api`,
    /// and the node's container runtime socket ([`runtime::RuntimeSocket`], listening
    /// until the stand-in ends). Returns at once; see [`KubeletHandle::settled`] to wait
    /// for the first start. Must be called within a tokio runtime.
    pub fn spawn(spec: KubeletSpec, api: NodeApi) -> std::io::Result<KubeletHandle> {
        let port = if spec.port == 0 {
            free_port()?
        } else {
            spec.port
        };
        let runtime = runtime::RuntimeSocket::listen(&spec.paths.containerd_socket)?;
        let initial = KubeletState {
            node: spec.node.name.clone(),
            phase: KubeletPhase::Starting,
            reason: None,
            port,
            root: spec.paths.root.clone(),
            starts: 0,
            since: node::now(),
            allocatable: None,
        };
        let (state_tx, state_rx) = watch::channel(initial);
        let (cmd_tx, cmd_rx) = mpsc::channel(16);
        let sup = Supervisor {
            log: KubeletLog {
                path: spec.paths.log.clone(),
            },
            name: spec.node.name.clone(),
            port,
            spec,
            api,
            state: state_tx,
            lease: None,
            node_uid: None,
            down_since: Some(Instant::now()),
            not_ready_posted: false,
            last_ready: None,
            _runtime: runtime,
        };
        let handle = KubeletHandle {
            inner: Arc::new(HandleInner {
                name: sup.name.clone(),
                port,
                paths: sup.spec.paths.clone(),
                state: state_rx,
                commands: cmd_tx,
            }),
        };
        tokio::spawn(sup.run(cmd_rx));
        Ok(handle)
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The kubelet's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.inner.port
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.inner.port)
    }

    /// The node's files.
    pub fn paths(&self) -> &KubeletPaths {
        &self.inner.paths
    }

    /// The current state.
    pub fn state(&self) -> KubeletState {
        self.inner.state.borrow().clone()
    }

    /// Whether it is running (serving, posting Ready).
    pub fn is_running(&self) -> bool {
        self.inner.state.borrow().phase == KubeletPhase::Running
    }

    /// Why it exited, while it is down after a failed start.
    pub fn exit_reason(&self) -> Option<String> {
        self.inner.state.borrow().reason.clone()
    }

    /// Waits until `pred` holds for the state, at most `timeout`; the last state either way.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        pred: impl Fn(&KubeletState) -> bool,
    ) -> Result<KubeletState, KubeletState> {
        let mut rx = self.inner.state.clone();
        let result = tokio::time::timeout(timeout, rx.wait_for(|s| pred(s))).await;
        match result {
            Ok(Ok(state)) => Ok(state.clone()),
            _ => Err(self.state()),
        }
    }

    /// Waits until it is past `Starting` (running, exited or stopped).
    pub async fn settled(&self, timeout: Duration) -> Result<KubeletState, KubeletState> {
        self.wait_for(timeout, |s| {
            s.phase != KubeletPhase::Starting && s.starts > 0
        })
        .await
    }

    /// Restarts it (`systemctl restart kubelet`): closes its port, waits the start delay,
    /// re-reads its flags, config file and drop-ins, and starts again. Resolves once the
    /// new start has an outcome (running or exited).
    pub async fn restart(&self) -> KubeletState {
        let (tx, rx) = oneshot::channel();
        if self
            .inner
            .commands
            .send(Command::Restart(tx))
            .await
            .is_err()
        {
            return self.state();
        }
        rx.await.unwrap_or_else(|_| self.state())
    }

    /// Stops it (`systemctl stop kubelet`) until the next restart.
    pub async fn stop(&self) -> KubeletState {
        let (tx, rx) = oneshot::channel();
        if self.inner.commands.send(Command::Stop(tx)).await.is_err() {
            return self.state();
        }
        rx.await.unwrap_or_else(|_| self.state())
    }

    /// Ends the stand-in: closes its port and stops its task.
    pub async fn shutdown(&self) {
        let (tx, rx) = oneshot::channel();
        if self
            .inner
            .commands
            .send(Command::Shutdown(tx))
            .await
            .is_ok()
        {
            let _ = rx.await;
        }
    }
}

/// Appends klog-style lines to `kubelet.log`.
struct KubeletLog {
    path: PathBuf,
}

impl KubeletLog {
    fn line(&self, level: char, source: &str, message: &str) {
        let line = format!(
            "{level}{} {:>7} {source}] {message}\n",
            node::klog_time(SystemTime::now()),
            std::process::id()
        );
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
        {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// Go's `%q` for a log value.
fn q(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

enum Next {
    Start,
    Shutdown(Option<oneshot::Sender<()>>),
}

struct Supervisor {
    spec: KubeletSpec,
    name: String,
    port: u16,
    api: NodeApi,
    state: watch::Sender<KubeletState>,
    log: KubeletLog,
    lease: Option<Value>,
    node_uid: Option<String>,
    /// When the kubelet stopped posting status; `None` while it runs.
    down_since: Option<Instant>,
    not_ready_posted: bool,
    /// The Ready status this kubelet last posted or saw.
    last_ready: Option<bool>,
    /// The node's container runtime socket: listens while the supervisor lives.
    _runtime: runtime::RuntimeSocket,
}

struct Server {
    task: JoinHandle<()>,
}

impl Server {
    /// Aborts the serving task and waits until its listener and connections are dropped.
    async fn stop(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

impl Supervisor {
    fn set_state(
        &self,
        phase: KubeletPhase,
        reason: Option<String>,
        allocatable: Option<BTreeMap<String, String>>,
        started: bool,
    ) {
        self.state.send_modify(|s| {
            s.phase = phase;
            s.reason = reason;
            s.since = node::now();
            s.allocatable = allocatable;
            if started {
                s.starts += 1;
            }
        });
    }

    async fn run(mut self, mut commands: mpsc::Receiver<Command>) {
        let mut waiters: Vec<oneshot::Sender<KubeletState>> = Vec::new();
        loop {
            if self.state.borrow().phase != KubeletPhase::Starting {
                self.set_state(KubeletPhase::Starting, None, None, false);
            }
            let input = startup::StartInput {
                node: &self.spec.node,
                index: self.spec.index,
                port: self.port,
                cgroup_v2: self.spec.options.cgroup_v2,
                paths: &self.spec.paths,
            };
            let outcome = startup::start(&input);
            let next = match outcome {
                Ok(started) => match TcpListener::bind(("127.0.0.1", self.port)).await {
                    Ok(listener) => {
                        self.running(started, listener, &mut commands, &mut waiters)
                            .await
                    }
                    Err(e) => {
                        let failure = startup::Failure {
                            error: format!("listen tcp 127.0.0.1:{}: bind: {e}", self.port),
                            klog_message: "Failed to listen and serve",
                            klog_source: "server.go:183",
                        };
                        self.exited(failure, &mut commands, &mut waiters).await
                    }
                },
                Err(failure) => self.exited(failure, &mut commands, &mut waiters).await,
            };
            match next {
                Next::Start => {
                    tokio::time::sleep(self.spec.options.start_delay).await;
                }
                Next::Shutdown(reply) => {
                    self.set_state(KubeletPhase::Stopped, None, None, false);
                    for w in waiters.drain(..) {
                        let _ = w.send(self.state.borrow().clone());
                    }
                    if let Some(reply) = reply {
                        let _ = reply.send(());
                    }
                    return;
                }
            }
        }
    }

    fn reply_all(&self, waiters: &mut Vec<oneshot::Sender<KubeletState>>) {
        let state = self.state.borrow().clone();
        for w in waiters.drain(..) {
            let _ = w.send(state.clone());
        }
    }

    async fn running(
        &mut self,
        started: startup::Started,
        listener: TcpListener,
        commands: &mut mpsc::Receiver<Command>,
        waiters: &mut Vec<oneshot::Sender<KubeletState>>,
    ) -> Next {
        let endpoints = Arc::new(serve::Endpoints {
            configz: started.configz.clone(),
        });
        let server = Server {
            task: tokio::spawn(serve::serve(listener, endpoints)),
        };
        for (source, line) in &started.log {
            self.log.line('I', source, line);
        }
        self.log.line(
            'I',
            "server.go:1445",
            &format!(
                "\"Starting to listen\" address=\"127.0.0.1\" port={}",
                self.port
            ),
        );
        self.log.line('I', "kubelet.go:2490", "\"Started kubelet\"");
        let allocatable: BTreeMap<String, String> = started
            .status
            .allocatable
            .iter()
            .map(|(k, v)| (k.clone(), v.canonical()))
            .collect();
        self.set_state(KubeletPhase::Running, None, Some(allocatable), true);
        self.reply_all(waiters);
        tracing::info!(node = %self.name, port = self.port, "stand-in kubelet running");

        self.down_since = None;
        self.not_ready_posted = false;
        self.event("Normal", "Starting", "Starting kubelet.").await;
        if started
            .config
            .enforce_node_allocatable
            .as_ref()
            .is_some_and(|e| e.iter().any(|k| k == "pods"))
        {
            self.event(
                "Normal",
                "NodeAllocatableEnforced",
                "Updated Node Allocatable limit across pods",
            )
            .await;
        }

        // As the kubelet: register (or update) the Node first, then take the Lease, which
        // names the Node as its owner.
        self.post_status(&Readiness::Ready, Some(&started.status))
            .await;
        self.renew_lease().await;
        let lease_every = self.spec.options.lease_renew_interval;
        let status_every = started.status_report_frequency;
        let now = tokio::time::Instant::now();
        let mut lease_tick = tokio::time::interval_at(now + lease_every, lease_every);
        let mut status_tick = tokio::time::interval_at(now + status_every, status_every);
        lease_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        status_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                cmd = commands.recv() => {
                    server.stop().await;
                    self.down_since = Some(Instant::now());
                    self.log.line('I', "kubelet.go:2617", "\"Shutting down kubelet\"");
                    return match cmd {
                        Some(Command::Restart(reply)) => {
                            waiters.push(reply);
                            Next::Start
                        }
                        Some(Command::Stop(reply)) => {
                            self.set_state(KubeletPhase::Stopped, None, None, false);
                            let _ = reply.send(self.state.borrow().clone());
                            self.down(commands, waiters, None).await
                        }
                        Some(Command::Shutdown(reply)) => Next::Shutdown(Some(reply)),
                        None => Next::Shutdown(None),
                    };
                }
                _ = status_tick.tick() => {
                    self.post_status(&Readiness::Ready, Some(&started.status)).await;
                }
                _ = lease_tick.tick() => {
                    self.renew_lease().await;
                }
            }
        }
    }

    async fn exited(
        &mut self,
        failure: startup::Failure,
        commands: &mut mpsc::Receiver<Command>,
        waiters: &mut Vec<oneshot::Sender<KubeletState>>,
    ) -> Next {
        let reason = failure.reason();
        self.log.line(
            'E',
            failure.klog_source,
            &format!("{} err={}", q(failure.klog_message), q(&failure.error)),
        );
        tracing::warn!(node = %self.name, %reason, "stand-in kubelet exited");
        if self.down_since.is_none() {
            self.down_since = Some(Instant::now());
        }
        self.set_state(KubeletPhase::Exited, Some(reason.clone()), None, true);
        self.reply_all(waiters);
        if reason.contains("Cgroup Limits on") {
            self.event(
                "Warning",
                "FailedNodeAllocatableEnforcement",
                &failure.error,
            )
            .await;
        }
        let restart_at = self
            .spec
            .options
            .restart_after_exit
            .map(|d| tokio::time::Instant::now() + d);
        self.down(commands, waiters, restart_at).await
    }

    /// Down (exited or stopped): waits for a command, posts NotReady when the delay has
    /// passed, restarts at `restart_at` (systemd's `Restart=always`).
    async fn down(
        &mut self,
        commands: &mut mpsc::Receiver<Command>,
        waiters: &mut Vec<oneshot::Sender<KubeletState>>,
        mut restart_at: Option<tokio::time::Instant>,
    ) -> Next {
        let since = self.down_since.unwrap_or_else(Instant::now);
        let not_ready_at =
            tokio::time::Instant::from_std(since + self.spec.options.not_ready_delay);
        loop {
            tokio::select! {
                cmd = commands.recv() => match cmd {
                    Some(Command::Restart(reply)) => {
                        waiters.push(reply);
                        return Next::Start;
                    }
                    Some(Command::Stop(reply)) => {
                        let reason = self.state.borrow().reason.clone();
                        self.set_state(KubeletPhase::Stopped, reason, None, false);
                        let _ = reply.send(self.state.borrow().clone());
                        restart_at = None;
                    }
                    Some(Command::Shutdown(reply)) => return Next::Shutdown(Some(reply)),
                    None => return Next::Shutdown(None),
                },
                _ = tokio::time::sleep_until(not_ready_at), if !self.not_ready_posted => {
                    self.not_ready_posted = true;
                    let message = match self.state.borrow().reason.clone() {
                        Some(reason) => format!("kubelet is not running: {reason}"),
                        None => "kubelet is not running".to_string(),
                    };
                    self.post_status(&Readiness::NotReady(message), None).await;
                }
                _ = sleep_until_opt(restart_at), if restart_at.is_some() => {
                    self.log.line('I', "systemd", "\"kubelet.service: Scheduled restart job\"");
                    return Next::Start;
                }
            }
        }
    }

    /// Posts an Event from the kubelet (`Starting`, `NodeAllocatableEnforced` ...) or,
    /// for `RegisteredNode` and `NodeNotReady`, from the node controller.
    async fn event(&self, kind: &str, reason: &str, message: &str) {
        if !self.spec.options.events {
            return;
        }
        let component = match reason {
            "RegisteredNode" | "NodeNotReady" => "node-controller",
            _ => "kubelet",
        };
        let ev = node::event_object(&self.name, component, kind, reason, message);
        if let Err(e) = self.api.create(Kind::Event, ev).await {
            tracing::debug!(node = %self.name, error = %e, "event not posted");
        }
    }

    /// Reads the Node, updates its conditions (and, while running, its status), and
    /// patches the status subresource. Registers the Node if it does not exist and the
    /// kubelet is running, as the kubelet does.
    async fn post_status(&mut self, readiness: &Readiness, status: Option<&NodeStatus>) {
        let now = node::now();
        let current = match self.api.get(Kind::Node, &self.name).await {
            Ok(n) => n,
            Err(e) if e.code == 404 => {
                if let Some(status) = status {
                    let obj = node_object_with(&self.spec.node, status, &now);
                    match self.api.create(Kind::Node, obj).await {
                        Ok(created) => {
                            self.node_uid = created
                                .pointer("/metadata/uid")
                                .and_then(Value::as_str)
                                .map(str::to_string);
                            self.last_ready = Some(true);
                            tracing::info!(node = %self.name, "node registered");
                            self.event(
                                "Normal",
                                "RegisteredNode",
                                &format!(
                                    "Node {} event: Registered Node {} in Controller",
                                    self.name, self.name
                                ),
                            )
                            .await;
                        }
                        Err(e) => {
                            tracing::warn!(node = %self.name, error = %e, "node registration failed")
                        }
                    }
                }
                return;
            }
            Err(e) => {
                tracing::warn!(node = %self.name, error = %e, "cannot read node");
                return;
            }
        };
        self.node_uid = current
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .map(str::to_string);
        let was_ready = ready_status(&current) == Some("True");
        let conds = conditions(current.pointer("/status/conditions"), readiness, &now);
        let mut st = match status {
            Some(s) => s.to_json(&self.name),
            None => json!({}),
        };
        if let Value::Object(m) = &mut st {
            m.insert("conditions".into(), Value::Array(conds));
        }
        let patch = json!({ "status": st });
        match self.api.patch_node_status(&self.name, &patch).await {
            Ok(_) => {
                let ready = *readiness == Readiness::Ready;
                if ready != was_ready || self.last_ready != Some(ready) {
                    let (kind, what) = if ready {
                        ("Normal", "NodeReady")
                    } else {
                        ("Normal", "NodeNotReady")
                    };
                    if ready != was_ready {
                        self.event(
                            kind,
                            what,
                            &format!("Node {} status is now: {what}", self.name),
                        )
                        .await;
                    }
                }
                self.last_ready = Some(ready);
            }
            Err(e) => tracing::warn!(node = %self.name, error = %e, "node status not posted"),
        }
    }

    async fn renew_lease(&mut self) {
        let now = node::now_micro();
        if let Some(mut lease) = self.lease.take() {
            lease["spec"]["renewTime"] = Value::String(now.clone());
            match self.api.update(Kind::Lease, &self.name, lease).await {
                Ok(updated) => {
                    self.lease = Some(updated);
                    return;
                }
                Err(e) => {
                    tracing::debug!(node = %self.name, error = %e, "lease update failed; re-reading")
                }
            }
        }
        match self.api.get(Kind::Lease, &self.name).await {
            Ok(mut lease) => {
                lease["spec"]["renewTime"] = Value::String(now);
                lease["spec"]["holderIdentity"] = Value::String(self.name.clone());
                match self.api.update(Kind::Lease, &self.name, lease).await {
                    Ok(updated) => self.lease = Some(updated),
                    Err(e) => tracing::warn!(node = %self.name, error = %e, "lease not renewed"),
                }
            }
            Err(e) if e.code == 404 => {
                let lease = lease_object(
                    &self.name,
                    self.node_uid.as_deref(),
                    self.spec.options.lease_duration_seconds,
                    &now,
                );
                match self.api.create(Kind::Lease, lease).await {
                    Ok(created) => self.lease = Some(created),
                    Err(e) => tracing::warn!(node = %self.name, error = %e, "lease not created"),
                }
            }
            Err(e) => tracing::warn!(node = %self.name, error = %e, "cannot read lease"),
        }
    }
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The stand-in kubelets of a sim, by node name.
pub type Kubelets = Arc<BTreeMap<String, KubeletHandle>>;

/// The control endpoints for `kubelets`, to mount on the API server:
///
/// - `GET /sim/v1/kubelets`: every kubelet's state;
/// - `GET /sim/v1/nodes/{name}/kubelet`: one kubelet's state;
/// - `POST /sim/v1/nodes/{name}/kubelet/restart`: restart it; answers with its state
///   once the new start has an outcome (`phase` `Running` or `Exited`, with `reason`);
/// - `POST /sim/v1/nodes/{name}/kubelet/stop`: stop it.
///
/// An unknown node is a 404 `metav1.Status`.
pub fn control_router(kubelets: Kubelets) -> axum::Router {
    use axum::extract::{Path as UrlPath, State};
    use axum::http::StatusCode;
    use axum::response::{IntoResponse, Response};
    use axum::routing::{get, post};

    fn not_found(name: &str) -> Response {
        let body = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": format!("node {name:?} has no stand-in kubelet"),
            "reason": "NotFound",
            "details": {"name": name, "kind": "nodes"},
            "code": 404,
        });
        (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
    }

    async fn list(State(k): State<Kubelets>) -> Response {
        let items: Vec<KubeletState> = k.values().map(KubeletHandle::state).collect();
        axum::Json(json!({ "items": items })).into_response()
    }
    async fn show(State(k): State<Kubelets>, UrlPath(name): UrlPath<String>) -> Response {
        match k.get(&name) {
            Some(h) => axum::Json(h.state()).into_response(),
            None => not_found(&name),
        }
    }
    async fn restart(State(k): State<Kubelets>, UrlPath(name): UrlPath<String>) -> Response {
        match k.get(&name) {
            Some(h) => axum::Json(h.restart().await).into_response(),
            None => not_found(&name),
        }
    }
    async fn stop(State(k): State<Kubelets>, UrlPath(name): UrlPath<String>) -> Response {
        match k.get(&name) {
            Some(h) => axum::Json(h.stop().await).into_response(),
            None => not_found(&name),
        }
    }

    axum::Router::new()
        .route("/sim/v1/kubelets", get(list))
        .route("/sim/v1/nodes/{name}/kubelet", get(show))
        .route("/sim/v1/nodes/{name}/kubelet/restart", post(restart))
        .route("/sim/v1/nodes/{name}/kubelet/stop", post(stop))
        .with_state(kubelets)
}

/// Asks the sim at `server` (`http://127.0.0.1:port`) to restart node `node`'s kubelet and
/// returns its state after the restart. For `kubelet-gitops-sim restart-kubelet`.
pub async fn request_restart(server: &str, node: &str) -> Result<Value, String> {
    let target = HttpTarget::parse(server).map_err(|e| e.to_string())?;
    let mut target = target;
    target.timeout = Duration::from_secs(120);
    target
        .json(
            "POST",
            &format!("/sim/v1/nodes/{node}/kubelet/restart"),
            Some("application/json"),
            Some(b"{}"),
        )
        .await
        .map_err(|e| e.to_string())
}

/// Options of a stand-in kubelet running as its own process.
#[derive(Debug, Clone)]
pub struct ProcessOptions {
    /// The node's root directory (laid out by `serve`, or prepared here when the node is
    /// in `inventory`).
    pub root: PathBuf,
    /// The node's name.
    pub node: String,
    /// The kubeconfig of the API server.
    pub kubeconfig: PathBuf,
    /// The node's inventory entry; without it, the node's capacity and labels are read
    /// from its Node object, which must then exist.
    pub inventory_node: Option<(usize, InventoryNode)>,
    /// Port; 0 picks a free one.
    pub port: u16,
    /// Timings and host facts.
    pub options: KubeletOptions,
}

/// Runs a stand-in kubelet as its own process, talking to the API server over HTTP,
/// until SIGINT or SIGTERM; SIGHUP restarts it. Writes its pid to `var/run/kubelet.pid`
/// under the root and reports every state change on stdout (one JSON object per line).
pub async fn run_process(opts: ProcessOptions) -> anyhow::Result<()> {
    use anyhow::Context as _;
    use tokio::signal::unix::{SignalKind, signal};

    let target = HttpTarget::from_kubeconfig(&opts.kubeconfig)?;
    let api = NodeApi::Http(target.clone());
    let (index, node) = match opts.inventory_node {
        Some(n) => n,
        None => {
            let obj = api.get(Kind::Node, &opts.node).await.map_err(|e| {
                anyhow::anyhow!(
                    "node {} is not in the API server at {} and no inventory was given: {e}",
                    opts.node,
                    target.url()
                )
            })?;
            (0, inventory_node_from_object(&obj)?)
        }
    };
    let paths = KubeletPaths::new(&opts.root);
    paths
        .prepare(&node, opts.options.cgroup_v2)
        .map_err(|e| anyhow::anyhow!("preparing {}: {e}", opts.root.display()))?;
    write_atomic(
        &paths.pid_file,
        format!("{}\n", std::process::id()).as_bytes(),
    )
    .with_context(|| format!("writing {}", paths.pid_file.display()))?;
    let handle = KubeletHandle::spawn(
        KubeletSpec {
            node,
            index,
            paths: paths.clone(),
            port: opts.port,
            options: opts.options,
        },
        api,
    )?;
    let mut hup = signal(SignalKind::hangup())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut states = handle.inner.state.clone();
    println!("{}", serde_json::to_string(&handle.state())?);
    loop {
        tokio::select! {
            _ = hup.recv() => {
                handle.restart().await;
            }
            _ = term.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
            changed = states.changed() => {
                if changed.is_err() {
                    break;
                }
                let s = states.borrow_and_update().clone();
                println!("{}", serde_json::to_string(&s)?);
            }
        }
    }
    handle.shutdown().await;
    let _ = std::fs::remove_file(&paths.pid_file);
    Ok(())
}

/// An inventory entry rebuilt from a Node object (name, labels without the well-known
/// ones, capacity).
fn inventory_node_from_object(obj: &Value) -> anyhow::Result<InventoryNode> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow::anyhow!("node object has no name"))?;
    let labels: BTreeMap<String, String> = obj
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter(|(k, _)| {
                    !k.starts_with("kubernetes.io/") && !k.starts_with("beta.kubernetes.io/")
                })
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default();
    let cap = |r: &str| -> anyhow::Result<kubelet_gitops_core::quantity::Quantity> {
        let text = obj
            .pointer(&format!("/status/capacity/{r}"))
            .and_then(Value::as_str)
            .ok_or_else(|| anyhow::anyhow!("node {name} has no status.capacity.{r}"))?;
        text.parse()
            .map_err(|e| anyhow::anyhow!("node {name}: status.capacity.{r} {text:?}: {e}"))
    };
    let capacity = crate::inventory::Capacity {
        cpu: cap("cpu")?,
        memory: cap("memory")?,
        ephemeral_storage: cap("ephemeral-storage")?,
        pods: cap("pods")?,
    };
    Ok(InventoryNode {
        name: name.to_string(),
        labels,
        capacity,
        kubelet_flags: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeadm_flags_env_round_trips_awkward_words() {
        let args: Vec<String> = [
            "--config=/tmp/a b/config.yaml",
            "--node-labels=a=b,c=d",
            "--x=it's \"quoted\" $HOME `cmd` \\",
            "",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let env = kubeadm_flags_env(&args);
        assert!(env.starts_with("KUBELET_KUBEADM_ARGS=\""), "{env}");
        let back = kubelet_gitops_core::flags::kubeadm_args(&env).expect("splits");
        assert_eq!(back, args);
    }

    #[test]
    fn the_sim_manages_config_paths() {
        let inv = crate::inventory::Inventory::parse(
            "i.yaml",
            b"nodes:\n- name: node-a\n  capacity: {cpu: \"1\", memory: 1Gi, ephemeral-storage: 1Gi, pods: \"1\"}\n  kubeletFlags: \"--config=/etc/k.yaml\"\n",
        )
        .expect("inventory");
        let paths = KubeletPaths::new(Path::new("/r"));
        let err = paths.command_line(&inv.nodes[0]).unwrap_err();
        assert!(err.contains("--config"), "{err}");
    }

    #[test]
    fn the_flags_name_node_paths_not_the_root() {
        let inv = crate::inventory::Inventory::parse(
            "i.yaml",
            b"nodes:\n- name: node-a\n  capacity: {cpu: \"1\", memory: 1Gi, ephemeral-storage: 1Gi, pods: \"1\"}\n  kubeletFlags: \"--max-pods=7\"\n",
        )
        .expect("inventory");
        let dir = tempfile::tempdir().expect("tempdir");
        let paths = KubeletPaths::new(dir.path());
        assert_eq!(
            paths.command_line(&inv.nodes[0]).expect("command line"),
            [
                "--config=/var/lib/kubelet/config.yaml",
                "--config-dir=/etc/kubernetes/kubelet.conf.d",
                "--max-pods=7",
            ]
        );
        paths.prepare(&inv.nodes[0], true).expect("prepare");
        let env = std::fs::read_to_string(&paths.flags_env).expect("flags env");
        assert!(
            !env.contains(&dir.path().display().to_string()),
            "the root leaks into {env}"
        );
        assert_eq!(
            paths.resolve(KubeletPaths::CONFIG).expect("resolve"),
            paths.config
        );
        // What a kubeadm host has and configs name.
        for file in [
            "etc/kubernetes/pki/ca.crt",
            "etc/resolv.conf",
            "run/systemd/resolve/resolv.conf",
            "proc/swaps",
        ] {
            assert!(dir.path().join(file).is_file(), "{file}");
        }
        assert!(dir.path().join("etc/kubernetes/manifests").is_dir());
        assert!(dir.path().join("run/containerd").is_dir());
        let swaps = std::fs::read_to_string(dir.path().join("proc/swaps")).expect("swaps");
        assert_eq!(swaps.lines().count(), 1, "no swap: {swaps}");
    }
}
