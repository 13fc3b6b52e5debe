//! What the kubelet does with its configuration when it starts, up to the point where it
//! serves: flags, config file, drop-ins, flag precedence, validation, node allocatable,
//! and the container manager's cgroup pre-flight. Every failure carries the kubelet's
//! own words.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kubelet_gitops_core::allocatable::{
    AllocatableError, CgroupSpec, CgroupVersion, cgroup_layout, node_allocatable,
};
use kubelet_gitops_core::effective::{self, EffectiveError, Source};
use kubelet_gitops_core::flags::{self, FlagError, KubeletFlags};
use kubelet_gitops_core::types::KubeletConfiguration;
use kubelet_gitops_core::validation::{self, HostInfo};
use serde_json::{Value, json};

use crate::inventory::InventoryNode;

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
        other => Failure::command(format!("failed to parse kubelet flag: {other}")),
    })
}

fn drop_in_files(dir: &Path) -> Result<Vec<String>, String> {
    fn walk(dir: &Path, out: &mut Vec<String>) -> Result<(), String> {
        let entries = std::fs::read_dir(dir).map_err(|e| go_io_error("lstat", dir, &e))?;
        for entry in entries {
            let entry = entry.map_err(|e| go_io_error("readdir", dir, &e))?;
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out)?;
            } else {
                out.push(path.display().to_string());
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(dir, &mut out)?;
    Ok(effective::drop_in_order(out))
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
    let config = load_config(&flags)?;

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

    let mut config_json = serde_json::to_value(&config).unwrap_or(Value::Null);
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
/// error messages.
fn load_config(flags: &KubeletFlags) -> Result<KubeletConfiguration, Failure> {
    let config_path = flags.config_file().map(str::to_string);
    let config_bytes = match &config_path {
        Some(path) => Some(std::fs::read(path).map_err(|e| {
            Failure::command(format!(
                "failed to load kubelet config file, path: {path}, error: failed to load Kubelet config file {path}, error failed to read kubelet config file {path:?}, error: {}",
                go_io_error("open", Path::new(path), &e)
            ))
        })?),
        None => None,
    };
    let mut drop_ins: Vec<(String, Vec<u8>)> = Vec::new();
    if let Some(dir) = flags.config_dir() {
        let files = drop_in_files(Path::new(dir))
            .map_err(|e| Failure::command(format!("failed to merge kubelet configs: {e}")))?;
        for file in files {
            let bytes = std::fs::read(&file).map_err(|e| {
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
    /// The directories that make up cgroup `path` (`/kubepods.slice`).
    pub fn dirs(&self, path: &str) -> Vec<PathBuf> {
        let rel = path.trim_start_matches('/');
        match self.version {
            CgroupVersion::V2 => vec![self.root.join(rel)],
            CgroupVersion::V1 => V1_CONTROLLERS
                .iter()
                .map(|c| self.root.join(c).join(rel))
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
            let file = self.root.join(limit.path.trim_start_matches('/'));
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
        let input = StartInput {
            node,
            index: 0,
            port: 0,
            cgroup_v2: true,
            paths,
        };
        start(&input).expect("the kubelet starts");
        std::fs::read_to_string(paths.cgroup_root.join("kubepods.slice/pids.max"))
            .expect("pods cgroup pids.max")
            .trim()
            .to_string()
    }

    #[test]
    fn pid_capacity_is_the_nodes_pid_max_read_at_each_start() {
        let inv = crate::inventory::Inventory::parse(
            "i.yaml",
            b"nodes:\n- name: node-a\n  capacity: {cpu: \"2\", memory: 4Gi, ephemeral-storage: 10Gi, pods: \"110\"}\n",
        )
        .expect("inventory");
        let node = &inv.nodes[0];
        let dir = tempfile::tempdir().expect("tempdir");
        let paths = KubeletPaths::new(dir.path());
        paths.prepare(node, true).expect("prepare");
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
