//! What the kubelet does with its configuration when it starts, up to the point where it
//! serves: flags, config file, drop-ins, flag precedence, validation, node allocatable,
//! the container runtime's connection, and the container manager's cgroup pre-flight.
//! Every failure carries the kubelet's own words. Every path the flags and the config
//! name is a path on the node, read under the node's root ([`KubeletPaths::resolve`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use kubelet_gitops_core::allocatable::{
    AllocatableError, CgroupSpec, CgroupVersion, cgroup_layout, node_allocatable,
};
use kubelet_gitops_core::effective::{self, EffectiveError, Source};
use kubelet_gitops_core::flags::{self, FlagError, KubeletFlags};
use kubelet_gitops_core::hostpath::host_path;
use kubelet_gitops_core::types::KubeletConfiguration;
use kubelet_gitops_core::validation::{self, HostInfo};
use serde_json::{Value, json};

use kubelet_gitops_core::inventory::InventoryNode;

use super::KubeletPaths;
use super::node::{self, NodeStatus};

/// The cgroup v1 controllers the kubelet's cgroupfs manager requires a cgroup in
/// (`cgroupManagerImpl.Exists`); the sim's v1 tree has one directory per controller.
pub const V1_CONTROLLERS: &[&str] = &[
    "cpu", "cpuacct", "cpuset", "hugetlb", "memory", "pids", "systemd",
];

/// A kubelet that got through its start.
#[derive(Debug, Clone)]
pub(crate) struct Started {
    /// The effective configuration.
    pub config: KubeletConfiguration,
    /// The `/configz` body.
    pub configz: String,
    /// What the Node's status says.
    pub status: NodeStatus,
    /// `nodeStatusReportFrequency`.
    pub status_report_frequency: Duration,
    /// Informational log lines: (source, message).
    pub log: Vec<(&'static str, String)>,
}

/// A kubelet that exited while starting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    /// The error, as the kubelet prints it (`failed to validate kubelet configuration, ...`).
    pub error: String,
    /// The klog message the error is logged under (`command failed`,
    /// `Failed to start ContainerManager`).
    pub klog_message: &'static str,
    /// The klog source location.
    pub klog_source: &'static str,
}

impl Failure {
    fn command(error: String) -> Failure {
        Failure {
            error,
            klog_message: "command failed",
            klog_source: "run.go:72",
        }
    }

    fn container_manager(error: String) -> Failure {
        Failure {
            error,
            klog_message: "Failed to start ContainerManager",
            klog_source: "kubelet.go:1703",
        }
    }

    /// The reason recorded for the exit: the error, prefixed with the klog message when
    /// it is not the generic `command failed`.
    pub fn reason(&self) -> String {
        if self.klog_message == "command failed" {
            self.error.clone()
        } else {
            format!("{}: {}", self.klog_message, self.error)
        }
    }
}

/// What a start needs to know about the node.
pub(crate) struct StartInput<'a> {
    pub node: &'a InventoryNode,
    pub index: usize,
    pub port: u16,
    pub cgroup_v2: bool,
    pub paths: &'a KubeletPaths,
}

/// Go's rendering of common I/O errors (`open x: no such file or directory`).
fn go_io_error(op: &str, path: &Path, e: &std::io::Error) -> String {
    let text = match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => e.to_string(),
    };
    format!("{op} {}: {text}", path.display())
}

/// The kubelet's command line as the sim's kubelet unit passes it: the
/// `KUBELET_KUBEADM_ARGS` of `kubeadm-flags.env` (an optional environment file, as in
/// kubeadm's unit: absent means no flags).
pub(crate) fn command_line(paths: &KubeletPaths) -> Result<Vec<String>, Failure> {
    match std::fs::read_to_string(&paths.flags_env) {
        Ok(text) => flags::kubeadm_args(&text)
            .map_err(|e| Failure::command(format!("failed to parse kubelet flag: {e}"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(Failure::command(format!(
            "failed to load environment file: {}",
            go_io_error("open", &paths.flags_env, &e)
        ))),
    }
}

fn parse_flags(args: &[String]) -> Result<KubeletFlags, Failure> {
    KubeletFlags::parse(args).map_err(|e| match e {
        FlagError::UnknownCommand { .. } => Failure::command(e.to_string()),
        FlagError::InvalidNodeLabels { .. } => {
            Failure::command(format!("failed to validate kubelet flags: {e}"))
        }
        other => Failure::command(format!("failed to parse kubelet flag: {other}")),
    })
}

/// The drop-in files under `dir` (a path on the node), named by their paths on the node,
/// in the kubelet's order.
fn drop_in_files(paths: &KubeletPaths, dir: &Path) -> Result<Vec<String>, String> {
    fn walk(paths: &KubeletPaths, dir: &Path, out: &mut Vec<String>) -> Result<(), String> {
        let real = paths
            .resolve(dir)
            .map_err(|e| go_io_error("lstat", dir, &e))?;
        let entries = std::fs::read_dir(&real).map_err(|e| go_io_error("lstat", dir, &e))?;
        for entry in entries {
            let entry = entry.map_err(|e| go_io_error("readdir", dir, &e))?;
            let name = dir.join(entry.file_name());
            let is_dir = paths.resolve(&name).is_ok_and(|p| p.is_dir());
            if is_dir {
                walk(paths, &name, out)?;
            } else {
                out.push(name.display().to_string());
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(paths, dir, &mut out)?;
    Ok(effective::drop_in_order(out))
}

/// Reads `path`, a file on the node, under the node's root.
fn read_node_file(paths: &KubeletPaths, path: &Path) -> std::io::Result<Vec<u8>> {
    std::fs::read(paths.resolve(path)?)
}

/// The socket of a CRI endpoint as the kubelet dials it: `unix://PATH`, or a bare path
/// (which the kubelet takes as `unix://`, with a deprecation warning). `None` for other
/// schemes, which the stand-in does not dial.
fn unix_socket(endpoint: &str) -> Option<&str> {
    match endpoint.strip_prefix("unix://") {
        Some(path) => Some(path),
        None => (!endpoint.contains("://")).then_some(endpoint),
    }
}

/// `PreInitRuntimeService`: the kubelet dials its runtime and image endpoints and exits
/// when nothing answers (`validate service connection: ...`).
fn dial_runtime(paths: &KubeletPaths, config: &KubeletConfiguration) -> Result<(), Failure> {
    let runtime = config
        .container_runtime_endpoint
        .clone()
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| format!("unix://{}", KubeletPaths::CONTAINERD_SOCKET));
    let image = config
        .image_service_endpoint
        .clone()
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| runtime.clone());
    for (api, endpoint) in [("runtime", &runtime), ("image", &image)] {
        let Some(socket) = unix_socket(endpoint) else {
            continue;
        };
        let dialled = paths
            .resolve(socket)
            .and_then(|real| super::runtime::dial(&real));
        if let Err(e) = dialled {
            let cause = match e.kind() {
                std::io::ErrorKind::NotFound => "no such file or directory".to_string(),
                std::io::ErrorKind::ConnectionRefused => "connection refused".to_string(),
                std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
                _ => e.to_string(),
            };
            return Err(Failure::command(format!(
                "failed to run Kubelet: validate service connection: validate CRI v1 {api} API for endpoint {endpoint:?}: rpc error: code = Unavailable desc = connection error: desc = \"transport: Error while dialing: dial unix {socket}: connect: {cause}\""
            )));
        }
    }
    Ok(())
}

/// `initializeModules`: the kubelet creates its pod logs directory (`podLogsDir`) and
/// exits when it cannot (a file in the way, say), as a v1.36 kubelet was seen to do:
/// `Failed to initialize internal modules: error creating pod logs root directory
/// "/x": mkdir /x: not a directory`.
fn create_pod_logs_dir(paths: &KubeletPaths, config: &KubeletConfiguration) -> Result<(), Failure> {
    let dir = config
        .pod_logs_dir
        .clone()
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| kubelet_gitops_core::defaults::DEFAULT_POD_LOGS_DIR.to_string());
    let created = paths
        .resolve(Path::new(&dir))
        .and_then(|real| std::fs::create_dir_all(&real).map(|()| real));
    created.map(drop).map_err(|e| {
        let cause = match e.kind() {
            // Go's MkdirAll on a file: ENOTDIR, where Rust's create_dir_all says it exists.
            std::io::ErrorKind::NotADirectory | std::io::ErrorKind::AlreadyExists => {
                format!("mkdir {dir}: not a directory")
            }
            _ => go_io_error("mkdir", Path::new(&dir), &e),
        };
        Failure {
            error: format!("error creating pod logs root directory {dir:?}: {cause}"),
            klog_message: "Failed to initialize internal modules",
            klog_source: "kubelet.go:1893",
        }
    })
}

/// Runs the kubelet's start sequence.
pub(crate) fn start(input: &StartInput<'_>) -> Result<Started, Failure> {
    let mut log = vec![
        (
            "server.go:529",
            format!(
                "\"Kubelet version\" kubeletVersion=\"{}\"",
                node::KUBELET_VERSION
            ),
        ),
        (
            "server.go:531",
            "\"Golang settings\" GOGC=\"\" GOMAXPROCS=\"\" GOTRACEBACK=\"\"".into(),
        ),
    ];
    let args = command_line(input.paths)?;
    let flags = parse_flags(&args)?;
    let mut config = load_config(input.paths, &flags)?;

    let host = HostInfo {
        cgroup_v2: Some(input.cgroup_v2),
    };
    let problems = validation::validate(&config, &host);
    if !problems.is_empty() {
        let messages: Vec<&str> = problems.iter().map(|p| p.message.as_str()).collect();
        let aggregate = if messages.len() == 1 {
            messages[0].to_string()
        } else {
            format!("[{}]", messages.join(", "))
        };
        return Err(Failure::command(format!(
            "failed to validate kubelet configuration, error: {aggregate}, path: {}",
            flags.config_file().unwrap_or_default()
        )));
    }

    // getCgroupDriverFromCRI: a runtime that reports its cgroup driver (containerd 2.x,
    // what the sim's nodes run, when the inventory gives its driver) decides, whatever
    // the config says; configz, registered after, shows it.
    if let Some(driver) = &input.node.runtime_cgroup_driver {
        config.cgroup_driver = Some(driver.clone());
    }
    let ignore_eviction = flags.value("experimental-allocatable-ignore-eviction") == Some("true");
    // The kubelet reads the host's pid_max for its internal `pid` capacity; the node's is
    // under its root, and a missing or unreadable file leaves the 64-bit maximum.
    let pid_max = node::read_pid_max(&input.paths.pid_max).unwrap_or(node::DEFAULT_PID_MAX);
    let alloc_input = node::allocatable_input(input.node, &config, pid_max, ignore_eviction)
        .map_err(|e| Failure::command(format!("failed to run Kubelet: {e}")))?;
    let alloc = node_allocatable(&alloc_input).map_err(|e| match e {
        AllocatableError::ExceedsCapacity(_) => Failure::container_manager(e.to_string()),
        other => Failure::command(format!("failed to run Kubelet: {other}")),
    })?;
    dial_runtime(input.paths, &config)?;
    create_pod_logs_dir(input.paths, &config)?;
    let version = if input.cgroup_v2 {
        CgroupVersion::V2
    } else {
        CgroupVersion::V1
    };
    let layout = cgroup_layout(&alloc_input, &alloc, version)
        .map_err(|e| Failure::container_manager(e.to_string()))?;
    let cgroups = CgroupTree {
        root: &input.paths.cgroup_root,
        version,
    };
    // setupNode: the pods cgroup and the QoS cgroups are created if missing.
    if let Some(pods) = &layout.pods {
        cgroups
            .create(&pods.path)
            .and_then(|()| cgroups.write_limits(pods))
            .map_err(|e| {
                Failure::container_manager(format!("failed to create {:?} cgroup: {e}", pods.path))
            })?;
    }
    if let Some(qos) = &layout.qos {
        for path in [&qos.burstable, &qos.besteffort] {
            cgroups.create(path).map_err(|e| {
                Failure::container_manager(format!("failed to create {path:?} cgroup: {e}"))
            })?;
        }
    }
    // enforceNodeAllocatableCgroups: the reserved cgroups must already exist.
    let driver_systemd = alloc_input.cgroup_driver == "systemd";
    for (spec, what) in [
        (&layout.system_reserved, "System Reserved"),
        (&layout.kube_reserved, "Kube Reserved"),
    ] {
        let Some(spec) = spec else { continue };
        if !cgroups.exists(&spec.path) {
            return Err(Failure::container_manager(format!(
                "Failed to enforce {what} Cgroup Limits on {:?}: {} cgroup does not exist",
                spec.configured,
                cgroup_name_repr(&spec.configured, driver_systemd)
            )));
        }
        cgroups.write_limits(spec).map_err(|e| {
            Failure::container_manager(format!(
                "Failed to enforce {what} Cgroup Limits on {:?}: {e}",
                spec.configured
            ))
        })?;
    }
    if let Some(pods) = &layout.pods {
        log.push((
            "node_container_manager_linux.go:75",
            format!(
                "\"Attempting to enforce Node Allocatable\" config=\"{}\"",
                pods.path
            ),
        ));
    }

    // What configz shows: the config, with the CPU reservations as reservedSystemCPUs
    // rewrites them after configz is registered.
    let shown = kubelet_gitops_core::configz::shown_by_configz(&config);
    let mut config_json = serde_json::to_value(shown.as_ref()).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut config_json {
        m.remove("apiVersion");
        m.remove("kind");
    }
    let configz = json!({ "kubeletconfig": config_json }).to_string();
    let status_report_frequency = config
        .node_status_report_frequency
        .and_then(|d| d.to_std())
        .filter(|d| !d.is_zero())
        .unwrap_or(Duration::from_secs(300));
    let status = NodeStatus {
        capacity: node::reported_capacity(input.node, &config),
        allocatable: alloc.node_status(),
        internal_ip: node::internal_ip(input.node, input.index),
        kubelet_port: input.port,
    };
    Ok(Started {
        config,
        configz,
        status,
        status_report_frequency,
        log,
    })
}

/// Defaults, `--config`, `--config-dir`, then the explicit flags, with the kubelet's
/// error messages. The files are read under the node's root; sources and messages name
/// them by their paths on the node.
fn load_config(
    paths: &KubeletPaths,
    flags: &KubeletFlags,
) -> Result<KubeletConfiguration, Failure> {
    let config_path = flags.config_file().map(str::to_string);
    let config_bytes = match &config_path {
        Some(path) => Some(read_node_file(paths, Path::new(path)).map_err(|e| {
            Failure::command(format!(
                "failed to load kubelet config file, path: {path}, error: failed to load Kubelet config file {path}, error failed to read kubelet config file {path:?}, error: {}",
                go_io_error("open", Path::new(path), &e)
            ))
        })?),
        None => None,
    };
    let mut drop_ins: Vec<(String, Vec<u8>)> = Vec::new();
    if let Some(dir) = flags.config_dir() {
        let files = drop_in_files(paths, Path::new(dir))
            .map_err(|e| Failure::command(format!("failed to merge kubelet configs: {e}")))?;
        for file in files {
            let bytes = read_node_file(paths, Path::new(&file)).map_err(|e| {
                Failure::command(format!(
                    "failed to merge kubelet configs: failed to load kubelet dropin file, path: {file}, error: {}",
                    go_io_error("open", Path::new(&file), &e)
                ))
            })?;
            drop_ins.push((file, bytes));
        }
    }
    let file = match (&config_path, &config_bytes) {
        (Some(p), Some(b)) => Some(Source::new(p, b)),
        _ => None,
    };
    let sources: Vec<Source<'_>> = drop_ins
        .iter()
        .map(|(name, bytes)| Source::new(name, bytes))
        .collect();
    match effective::effective(file, &sources, Some(flags)) {
        Ok(eff) => Ok(eff.config),
        Err(EffectiveError::Decode(e)) if Some(e.file.as_str()) == config_path.as_deref() => {
            Err(Failure::command(format!(
                "failed to load kubelet config file, path: {}, error: {e}",
                e.file
            )))
        }
        Err(EffectiveError::Decode(e)) => Err(Failure::command(format!(
            "failed to merge kubelet configs: failed to load kubelet dropin file, path: {}, error: {e}",
            e.file
        ))),
        Err(other) => Err(Failure::command(format!(
            "failed to precedence kubeletConfigFlag: {other}"
        ))),
    }
}

/// How Go's `%q` prints the kubelet's `CgroupName` (a `[]string`) for a configured cgroup:
/// cgroupfs splits the path (`/a/b` is `["a" "b"]`), systemd takes the slice's base name
/// apart (`/system.slice` is `["system"]`, `/a-b.slice` is `["a" "b"]`).
pub fn cgroup_name_repr(configured: &str, systemd: bool) -> String {
    let parts: Vec<String> = if systemd {
        let base = configured.rsplit('/').find(|s| !s.is_empty()).unwrap_or("");
        let base = base.strip_suffix(".slice").unwrap_or(base);
        if base.is_empty() {
            Vec::new()
        } else {
            base.split('-').map(|p| p.replace('_', "-")).collect()
        }
    } else {
        configured
            .split('/')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    };
    let quoted: Vec<String> = parts
        .iter()
        .map(|p| Value::String(p.clone()).to_string())
        .collect();
    format!("[{}]", quoted.join(" "))
}

/// The stand-in's cgroup filesystem: plain directories under the node's cgroup root,
/// one tree (v2) or one tree per controller (v1).
pub(crate) struct CgroupTree<'a> {
    pub root: &'a Path,
    pub version: CgroupVersion,
}

impl CgroupTree<'_> {
    /// The directories that make up cgroup `path` (`/kubepods.slice`); `..` in a cgroup
    /// name stops at its hierarchy's root.
    pub fn dirs(&self, path: &str) -> Vec<PathBuf> {
        match self.version {
            CgroupVersion::V2 => vec![host_path(self.root, path)],
            CgroupVersion::V1 => V1_CONTROLLERS
                .iter()
                .map(|c| host_path(&self.root.join(c), path))
                .collect(),
        }
    }

    pub fn exists(&self, path: &str) -> bool {
        self.dirs(path).iter().all(|d| d.is_dir())
    }

    pub fn create(&self, path: &str) -> std::io::Result<()> {
        for d in self.dirs(path) {
            std::fs::create_dir_all(&d)?;
        }
        Ok(())
    }

    /// Writes the values the kubelet writes into `spec`'s interface files.
    pub fn write_limits(&self, spec: &CgroupSpec) -> std::io::Result<()> {
        for limit in &spec.limits {
            let file = host_path(self.root, &limit.path);
            if let Some(parent) = file.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&file, format!("{}\n", limit.value))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_names_print_like_go() {
        assert_eq!(cgroup_name_repr("/system.slice", true), r#"["system"]"#);
        assert_eq!(cgroup_name_repr("/a-b.slice", true), r#"["a" "b"]"#);
        assert_eq!(
            cgroup_name_repr("/system.slice", false),
            r#"["system.slice"]"#
        );
        assert_eq!(cgroup_name_repr("/x/y", false), r#"["x" "y"]"#);
    }

    fn pods_pids_max(paths: &KubeletPaths, node: &InventoryNode) -> String {
        start_on(paths, node).expect("the kubelet starts");
        std::fs::read_to_string(paths.cgroup_root.join("kubepods.slice/pids.max"))
            .expect("pods cgroup pids.max")
            .trim()
            .to_string()
    }

    fn one_node() -> kubelet_gitops_core::inventory::Inventory {
        kubelet_gitops_core::inventory::Inventory::parse(
            "i.yaml",
            b"nodes:\n- name: node-a\n  capacity: {cpu: \"2\", memory: 4Gi, ephemeral-storage: 10Gi, pods: \"110\"}\n",
        )
        .expect("inventory")
    }

    fn start_on(paths: &KubeletPaths, node: &InventoryNode) -> Result<Started, Failure> {
        start(&StartInput {
            node,
            index: 0,
            port: 0,
            cgroup_v2: true,
            paths,
        })
    }

    const HEAD: &str = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";

    #[tokio::test]
    async fn the_files_the_flags_name_are_read_under_the_node_root() {
        let inv = one_node();
        let node = &inv.nodes[0];
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("node");
        let paths = KubeletPaths::new(&root);
        paths.prepare(node, true).expect("prepare");
        let _runtime = super::super::runtime::RuntimeSocket::listen(&paths.containerd_socket)
            .expect("runtime socket");
        std::fs::write(
            paths.drop_in_dir.join("50-pods.conf"),
            format!("{HEAD}maxPods: 42\n"),
        )
        .expect("drop-in");
        let started = start_on(&paths, node).expect("starts");
        assert_eq!(started.config.max_pods, Some(42), "the drop-in is read");

        // A symlink on the node is followed on the node: an absolute target counts from
        // the node's /.
        std::fs::write(
            root.join("etc/kubelet-alt.yaml"),
            format!("{HEAD}maxPods: 33\n"),
        )
        .expect("alt config");
        std::fs::remove_file(&paths.config).expect("remove config");
        std::os::unix::fs::symlink("/etc/kubelet-alt.yaml", &paths.config).expect("link");
        std::fs::remove_file(paths.drop_in_dir.join("50-pods.conf")).expect("rm drop-in");
        let started = start_on(&paths, node).expect("starts through the link");
        assert_eq!(started.config.max_pods, Some(33));

        // `..` cannot climb out of the root: a file next to the root is not found, and
        // the message names the path as the flags give it.
        std::fs::write(
            dir.path().join("outside.yaml"),
            format!("{HEAD}maxPods: 9\n"),
        )
        .expect("outside");
        std::fs::write(
            &paths.flags_env,
            "KUBELET_KUBEADM_ARGS=\"--config=/../../../../../../outside.yaml\"\n",
        )
        .expect("flags");
        let failure = start_on(&paths, node).expect_err("outside the root");
        assert!(
            failure.error.starts_with(
                "failed to load kubelet config file, path: /../../../../../../outside.yaml,"
            ),
            "{failure:?}"
        );
        assert!(
            failure.error.contains("no such file or directory"),
            "{failure:?}"
        );
        assert!(
            !failure.error.contains(&root.display().to_string()),
            "the message names node paths: {failure:?}"
        );
    }

    #[tokio::test]
    async fn without_its_runtime_the_kubelet_exits() {
        let inv = one_node();
        let node = &inv.nodes[0];
        let dir = tempfile::tempdir().expect("tempdir");
        let paths = KubeletPaths::new(dir.path());
        paths.prepare(node, true).expect("prepare");
        let failure = start_on(&paths, node).expect_err("no containerd");
        assert_eq!(
            failure.reason(),
            "failed to run Kubelet: validate service connection: validate CRI v1 runtime API for endpoint \"unix:///run/containerd/containerd.sock\": rpc error: code = Unavailable desc = connection error: desc = \"transport: Error while dialing: dial unix /run/containerd/containerd.sock: connect: no such file or directory\""
        );
        let _runtime = super::super::runtime::RuntimeSocket::listen(&paths.containerd_socket)
            .expect("runtime socket");
        start_on(&paths, node).expect("containerd is up");

        // Another endpoint, with nothing there; then the image endpoint on its own.
        let crio = format!("{HEAD}containerRuntimeEndpoint: unix:///run/crio/crio.sock\n");
        std::fs::write(&paths.config, &crio).expect("config");
        let failure = start_on(&paths, node).expect_err("no crio");
        assert!(
            failure.error.contains(
                "validate CRI v1 runtime API for endpoint \"unix:///run/crio/crio.sock\""
            ) && failure
                .error
                .contains("dial unix /run/crio/crio.sock: connect: no such file or directory"),
            "{failure:?}"
        );
        std::fs::write(
            &paths.config,
            format!("{HEAD}imageServiceEndpoint: unix:///run/images.sock\n"),
        )
        .expect("config");
        let failure = start_on(&paths, node).expect_err("no image service");
        assert!(
            failure
                .error
                .contains("validate CRI v1 image API for endpoint \"unix:///run/images.sock\""),
            "{failure:?}"
        );
    }

    #[tokio::test]
    async fn a_pod_logs_dir_it_cannot_create_makes_the_kubelet_exit() {
        let inv = one_node();
        let node = &inv.nodes[0];
        let dir = tempfile::tempdir().expect("tempdir");
        let paths = KubeletPaths::new(dir.path());
        paths.prepare(node, true).expect("prepare");
        let _runtime = super::super::runtime::RuntimeSocket::listen(&paths.containerd_socket)
            .expect("runtime socket");
        // The default, /var/log/pods, is created under the node's root.
        start_on(&paths, node).expect("starts");
        assert!(dir.path().join("var/log/pods").is_dir());
        // A file where the directory should be: the words of a real v1.36 kubelet.
        std::fs::write(dir.path().join("var/log/blocked"), "a file\n").expect("file");
        std::fs::write(
            &paths.config,
            format!("{HEAD}podLogsDir: /var/log/blocked\n"),
        )
        .expect("config");
        let failure = start_on(&paths, node).expect_err("a file in the way");
        assert_eq!(
            failure.reason(),
            "Failed to initialize internal modules: error creating pod logs root directory \"/var/log/blocked\": mkdir /var/log/blocked: not a directory"
        );
    }

    #[tokio::test]
    async fn pid_capacity_is_the_nodes_pid_max_read_at_each_start() {
        let inv = one_node();
        let node = &inv.nodes[0];
        let dir = tempfile::tempdir().expect("tempdir");
        let paths = KubeletPaths::new(dir.path());
        paths.prepare(node, true).expect("prepare");
        let _runtime = super::super::runtime::RuntimeSocket::listen(&paths.containerd_socket)
            .expect("runtime socket");
        let written = std::fs::read_to_string(&paths.pid_max).expect("pid_max written");
        assert_eq!(written, format!("{}\n", node::host_pid_max()));
        assert_eq!(
            pods_pids_max(&paths, node),
            node::host_pid_max().to_string()
        );

        std::fs::write(&paths.pid_max, "12345\n").expect("write pid_max");
        paths.prepare(node, true).expect("prepare again");
        assert_eq!(
            std::fs::read_to_string(&paths.pid_max).expect("pid_max"),
            "12345\n",
            "an existing pid_max is kept"
        );
        assert_eq!(pods_pids_max(&paths, node), "12345");

        std::fs::remove_file(&paths.pid_max).expect("remove pid_max");
        assert_eq!(
            pods_pids_max(&paths, node),
            node::DEFAULT_PID_MAX.to_string()
        );
    }
}
