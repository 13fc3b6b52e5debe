//! Everything the agent checks before it touches the kubelet: a config that fails here is
//! reported and the kubelet keeps running what it runs.
//!
//! 1. Strict decode of the payload (`failed to load config`).
//! 2. The effective config, as the kubelet builds it: defaults, then the config file, then
//!    the `--config-dir` drop-ins (read on the host), then the command-line flags. In
//!    [`Placement::ConfigFile`] mode the payload is the config file; in
//!    [`Placement::DropIn`] mode it is one more drop-in (replacing the file of that name)
//!    over the node's own config file. Every field a flag overrides is returned.
//! 3. The kubelet's validation of the effective config for this host's cgroup version
//!    (`failed to validate config`), each message naming the kubelet flag that set the
//!    field (`(value set by the kubelet flag --cgroups-per-qos)`), then the cgroup-driver
//!    rule: an effective `cgroupDriver` other than the runtime's (`--cgroup-driver`) is
//!    refused (see docs/node-agent.md, "The cgroup driver"). Steps 2 and 3 are
//!    [`kubelet_gitops_core::node_setup`]'s, which `kubelet-gitops plan` and `run` run on
//!    the node's report ([`node_setup`]) too.
//! 4. Node pre-flight (`failed to validate config` too): node allocatable must not go
//!    negative, and cpu and memory allocatable must stay above zero; the cgroup layout must
//!    be computable; files the config names must exist:
//!    - always rejected when missing, because the kubelet exits at start without them:
//!      `tlsCertFile`, `tlsPrivateKeyFile`, `authentication.x509.clientCAFile`;
//!    - rejected when the config newly names them, a warning when the running config
//!      already names them (the node works that way today): `staticPodPath` (a missing
//!      path makes the kubelet drop the static pods it runs, the control plane on a
//!      control-plane node), `resolvConf` (every new pod sandbox fails), the unix sockets
//!      of `containerRuntimeEndpoint` and `imageServiceEndpoint` (the kubelet exits when
//!      it cannot reach the runtime), and `failSwapOn` with swap active (the kubelet
//!      exits).
//!
//!    Last, the reserved cgroups that `enforceNodeAllocatable` names are created when
//!    missing ([`crate::cgroups::ensure_reserved`]); a failure there is an
//!    `internal failure`.
//!
//! "The running config" is the effective config of the node's files as they are now
//! ([`Validated::current`]), `None` when those do not load; then everything counts as
//! newly named.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use kubelet_gitops_core::allocatable::{
    self, Allocatable, AllocatableInput, CgroupLayout, CgroupVersion, cgroup_layout,
    node_allocatable,
};
use kubelet_gitops_core::effective::{Effective, Source};
use kubelet_gitops_core::features;
use kubelet_gitops_core::flags::{FlagOverride, KubeletFlags};
use kubelet_gitops_core::message::error_chain;
use kubelet_gitops_core::node_setup::{self, Mode, NodeFacts, NodeFiles, NodeSetup, Refusal};
use kubelet_gitops_core::quantity::{Format, Quantity};
use kubelet_gitops_core::types::KubeletConfiguration;
use tracing::{debug, info, instrument, warn};

use crate::cgroups::{self, CgroupConfig};
use crate::config_file::Placement;
use crate::hostflags::host_path;

/// What validation needs to know about the node.
#[derive(Debug, Clone)]
pub struct NodeContext {
    /// The kubelet's command-line flags ([`crate::hostflags::read_flags`]).
    pub flags: KubeletFlags,
    /// The prefix of every host path (`/` on the host, `/host` in a container).
    pub host_root: PathBuf,
    /// The node's capacity (`Node.status.capacity`). `pods` is replaced by what the
    /// config gives (`maxPods`, capped by `podsPerCore`); `pid`, the kubelet's internal
    /// capacity, is read from the host's `/proc/sys/kernel/pid_max` when absent.
    pub capacity: BTreeMap<String, Quantity>,
    /// The node's cgroup hierarchy.
    pub cgroups: CgroupConfig,
    /// Where the payload goes.
    pub placement: Placement,
}

/// A payload that passed every check.
#[derive(Debug, Clone)]
pub struct Validated {
    /// The config the kubelet will run: defaults, file, drop-ins, flags.
    pub effective: KubeletConfiguration,
    /// Every field a command-line flag overrides, with the file's and the flag's values.
    pub overrides: Vec<FlagOverride>,
    /// Node allocatable under the new config.
    pub allocatable: Allocatable,
    /// The cgroups the kubelet will limit, and how ([`crate::cgroups::verify_pods`]).
    pub layout: CgroupLayout,
    /// The reserved cgroups created by this validation.
    pub created_cgroups: Vec<String>,
    /// Things worth reporting that do not stop the apply.
    pub warnings: Vec<String>,
    /// The effective config of the node's files as they are now (`None` when they do not
    /// load), e.g. for [`crate::kubelet::state_files_for_change`].
    pub current: Option<KubeletConfiguration>,
}

/// Why a payload was not applied, in the kubelet's words (`reason`) with the detail: the
/// refusal `plan` and `run` predict with the same check.
pub type Rejection = Refusal;

/// Validates `payload` for the node (see the module documentation). On success the
/// reserved cgroups the config enforces exist.
#[instrument(skip_all, fields(bytes = payload.len(), config_file = %node.placement.target().display()))]
pub fn validate_payload(payload: &[u8], node: &NodeContext) -> Result<Validated, Rejection> {
    // Empty stands for "no drop-in" in `effective_config`; as a payload it is no config.
    if payload.iter().all(u8::is_ascii_whitespace) {
        return Err(Rejection::load(format!(
            "{}: the config is empty",
            node.placement.target().display()
        )));
    }
    let host = HostFiles::read(node, false)?;
    let target = node.placement.target().display().to_string();
    let eff = node_setup::check_payload(
        Source::new(&target, payload),
        &host.files(node),
        &facts(node),
    )?;
    let config = eff.config;

    let mut warnings = Vec::new();
    if let Some(gates) = &config.feature_gates {
        warnings.extend(features::warnings(gates));
    }
    let current = match effective_config(None, node) {
        Ok(e) => Some(e.config),
        Err(r) => {
            debug!(reason = %r, "the node's current config does not load; treating every named path as new");
            None
        }
    };

    let (allocatable, layout) = allocatable_and_layout(&config, node)?;
    check_files(&config, current.as_ref(), node, &mut warnings)?;

    let created_cgroups = cgroups::ensure_reserved(&node.cgroups, &layout).map_err(|e| {
        Rejection::internal(format!(
            "cannot prepare the reserved cgroups: {}",
            error_chain(&e)
        ))
    })?;
    for w in &warnings {
        warn!(warning = %w, "validation warning");
    }
    info!(
        overrides = eff.overrides.len(),
        created = created_cgroups.len(),
        "payload validated"
    );
    Ok(Validated {
        effective: config,
        overrides: eff.overrides,
        allocatable,
        layout,
        created_cgroups,
        warnings,
        current,
    })
}

/// Checks the pods cgroup of the config the node's files give now (the one the kubelet
/// runs once verified) against the node: `None` when its limits are what the kubelet
/// computes from the config and the node's capacity
/// ([`crate::cgroups::verify_pods`]), else what differs, starting with `pods cgroup `.
/// The capacity is [`NodeContext::capacity`] with `pid` from the host's
/// `/proc/sys/kernel/pid_max` when absent, as the kubelet reads it.
pub fn check_pods_cgroup(node: &NodeContext) -> Result<Option<String>, Rejection> {
    let eff = effective_config(None, node)?;
    let (_, layout) = allocatable_and_layout(&eff.config, node)?;
    cgroups::verify_pods(&node.cgroups, &layout).map_err(|e| {
        Rejection::internal(format!("cannot read the pods cgroup: {}", error_chain(&e)))
    })
}

/// What validation knows of the host: its cgroup version and the runtime's cgroup
/// driver (`--cgroup-driver`).
fn facts(node: &NodeContext) -> NodeFacts {
    NodeFacts {
        cgroup_v2: Some(node.cgroups.version == CgroupVersion::V2),
        runtime_cgroup_driver: Some(node.cgroups.driver.as_str().to_string()),
    }
}

/// The node's files that go into the effective config besides the payload, read under the
/// host root: its config file (when asked for, or in drop-in mode) and its drop-ins.
struct HostFiles {
    config_file: Option<(String, Vec<u8>)>,
    drop_ins: Vec<(String, Vec<u8>)>,
    agent_drop_in: Option<String>,
}

impl HostFiles {
    /// Reads them, after checking that the kubelet reads where the agent writes. The
    /// node's config file is read in drop-in mode, and in replace mode when
    /// `config_file_too` (the node as it is, without a payload).
    fn read(node: &NodeContext, config_file_too: bool) -> Result<HostFiles, Rejection> {
        let flags = &node.flags;
        let config_file = flags.config_file().map(PathBuf::from);
        let config_dir = flags.config_dir().map(PathBuf::from);
        let mut agent_drop_in = None;
        match &node.placement {
            Placement::ConfigFile { path } => match &config_file {
                None => {
                    return Err(Rejection::internal(format!(
                        "the kubelet runs without --config, so the agent's config file {} would not be read",
                        path.display()
                    )));
                }
                Some(file) if file != path => {
                    return Err(Rejection::internal(format!(
                        "the agent writes {} but the kubelet reads --config={}",
                        path.display(),
                        file.display()
                    )));
                }
                Some(_) => {}
            },
            Placement::DropIn { dir, name } => {
                if name.contains('/') || !name.ends_with(".conf") || name.starts_with('.') {
                    return Err(Rejection::internal(format!(
                        "drop-in name {name:?} must be a file name ending in .conf (the kubelet ignores others)"
                    )));
                }
                match &config_dir {
                    None => {
                        return Err(Rejection::internal(format!(
                            "the kubelet runs without --config-dir, so the agent's drop-in in {} would not be read",
                            dir.display()
                        )));
                    }
                    Some(d) if d != dir => {
                        return Err(Rejection::internal(format!(
                            "the agent writes drop-ins to {} but the kubelet reads --config-dir={}",
                            dir.display(),
                            d.display()
                        )));
                    }
                    Some(_) => {}
                }
                agent_drop_in = Some(dir.join(name).display().to_string());
            }
        }
        let want_file = config_file_too || matches!(node.placement, Placement::DropIn { .. });
        let config_file = match (&config_file, want_file) {
            (Some(path), true) => {
                let bytes = std::fs::read(host_path(&node.host_root, path)).map_err(|e| {
                    Rejection::load(format!(
                        "failed to load kubelet config file, path: {}, error: {}",
                        path.display(),
                        go_io_error(&e)
                    ))
                })?;
                Some((path.display().to_string(), bytes))
            }
            _ => None,
        };
        let drop_ins = match &config_dir {
            Some(dir) => read_drop_ins(&node.host_root, dir)?,
            None => Vec::new(),
        };
        Ok(HostFiles {
            config_file,
            drop_ins,
            agent_drop_in,
        })
    }

    /// The files as core's check takes them.
    fn files<'a>(&'a self, node: &'a NodeContext) -> NodeFiles<'a> {
        NodeFiles {
            mode: match node.placement {
                Placement::ConfigFile { .. } => Mode::Replace,
                Placement::DropIn { .. } => Mode::DropIn,
            },
            config_file: self.config_file.as_ref().map(|(n, b)| Source::new(n, b)),
            drop_ins: self
                .drop_ins
                .iter()
                .map(|(n, b)| Source::new(n, b))
                .collect(),
            agent_drop_in: self.agent_drop_in.as_deref(),
            flags: Some(&node.flags),
        }
    }
}

/// The effective config the kubelet would build with `payload` in place (`None`: the
/// node's files as they are now; in drop-in mode an empty payload is no drop-in of
/// ours, the node's local config), with the flag overrides. Reads the node's config file
/// and drop-ins under the host root; changes nothing.
pub fn effective_config(
    payload: Option<&[u8]>,
    node: &NodeContext,
) -> Result<Effective, Rejection> {
    let host = HostFiles::read(node, payload.is_none())?;
    let target = node.placement.target().display().to_string();
    node_setup::effective_on_node(payload.map(|p| Source::new(&target, p)), &host.files(node))
}

/// What the agent reports of the node in [`kubelet_gitops_core::protocol::NODE_SETUP`]:
/// the kubelet's config flags, its drop-ins but the agent's own (and in drop-in mode its
/// own config file), the mode, the runtime's cgroup driver and the cgroup version
/// ([`NodeSetup::report`] says what is left out). Files that cannot be read give a report
/// that says so, and the reconciler does not check the node.
pub fn node_setup(node: &NodeContext) -> NodeSetup {
    let driver = Some(node.cgroups.driver.as_str());
    let v2 = Some(node.cgroups.version == CgroupVersion::V2);
    match HostFiles::read(node, false) {
        Ok(host) => NodeSetup::report(&host.files(node), driver, v2),
        Err(r) => NodeSetup::report(&NodeFiles::default(), driver, v2).cut(format!(
            "the agent cannot read the node's kubelet files: {r}"
        )),
    }
}

/// Go's rendering of an I/O error's cause (`no such file or directory`).
fn go_io_error(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => "no such file or directory".into(),
        io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

/// Every file under drop-in dir `dir` (host path), named by host path, read under
/// `host_root`; directories are walked as the kubelet walks them.
fn read_drop_ins(host_root: &Path, dir: &Path) -> Result<Vec<(String, Vec<u8>)>, Rejection> {
    fn walk(
        host_root: &Path,
        dir: &Path,
        out: &mut Vec<(String, Vec<u8>)>,
    ) -> Result<(), Rejection> {
        let real = host_path(host_root, dir);
        let entries = std::fs::read_dir(&real).map_err(|e| {
            Rejection::load(format!(
                "failed to merge kubelet configs: lstat {}: {}",
                dir.display(),
                go_io_error(&e)
            ))
        })?;
        for entry in entries {
            let entry = entry.map_err(|e| {
                Rejection::load(format!(
                    "failed to merge kubelet configs: readdir {}: {e}",
                    dir.display()
                ))
            })?;
            let name = dir.join(entry.file_name());
            if entry.path().is_dir() {
                walk(host_root, &name, out)?;
            } else if name.to_string_lossy().ends_with(".conf") {
                let bytes = std::fs::read(entry.path()).map_err(|e| {
                    Rejection::load(format!(
                        "failed to merge kubelet configs: failed to load kubelet dropin file, path: {}, error: {}",
                        name.display(),
                        go_io_error(&e)
                    ))
                })?;
                out.push((name.display().to_string(), bytes));
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(host_root, dir, &mut out)?;
    Ok(out)
}

/// The capacity the kubelet would report under `config`, and node allocatable and the
/// cgroup layout it computes from it.
fn allocatable_and_layout(
    config: &KubeletConfiguration,
    node: &NodeContext,
) -> Result<(Allocatable, CgroupLayout), Rejection> {
    let mut capacity = node.capacity.clone();
    let max_pods = i128::from(config.max_pods.unwrap_or(110));
    let pods = match (
        config.pods_per_core,
        capacity.get(allocatable::RESOURCE_CPU),
    ) {
        (Some(per_core), Some(cpu)) if per_core > 0 => {
            max_pods.min(i128::from(per_core) * cpu.value())
        }
        _ => max_pods,
    };
    capacity.insert(
        allocatable::RESOURCE_PODS.into(),
        Quantity::from_units(pods, Format::DecimalSI),
    );
    if !capacity.contains_key(allocatable::RESOURCE_PID)
        && let Some(pid_max) = read_pid_max(&node.host_root)
    {
        capacity.insert(
            allocatable::RESOURCE_PID.into(),
            Quantity::from_units(pid_max, Format::DecimalSI),
        );
    }
    let mut input = AllocatableInput::from_config(config, capacity)
        .map_err(|e| Rejection::invalid(e.to_string()))?;
    input.ignore_eviction_threshold =
        node.flags.value("experimental-allocatable-ignore-eviction") == Some("true");
    let alloc = node_allocatable(&input).map_err(|e| Rejection::invalid(e.to_string()))?;
    for resource in [allocatable::RESOURCE_CPU, allocatable::RESOURCE_MEMORY] {
        if let Some(r) = alloc.resources.get(resource)
            && !r.allocatable.is_negative()
            && r.allocatable.nanos() == 0
        {
            return Err(Rejection::invalid(format!(
                "the reservations leave no allocatable {resource} (capacity {}, systemReserved {}, kubeReserved {}, evictionHard {}): no pod could be admitted",
                r.capacity.canonical(),
                r.system_reserved.canonical(),
                r.kube_reserved.canonical(),
                r.hard_eviction.canonical()
            )));
        }
    }
    let layout = cgroup_layout(&input, &alloc, node.cgroups.version)
        .map_err(|e| Rejection::invalid(e.to_string()))?;
    Ok((alloc, layout))
}

fn read_pid_max(host_root: &Path) -> Option<i128> {
    std::fs::read_to_string(host_path(host_root, "/proc/sys/kernel/pid_max"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Whether swap is active on the host (`/proc/swaps` lists a device).
fn swap_active(host_root: &Path) -> bool {
    std::fs::read_to_string(host_path(host_root, "/proc/swaps"))
        .map(|t| t.lines().skip(1).any(|l| !l.trim().is_empty()))
        .unwrap_or(false)
}

/// The socket path of a `unix://` (or bare path) CRI endpoint; `None` for others.
fn unix_socket(endpoint: &str) -> Option<&str> {
    if let Some(path) = endpoint.strip_prefix("unix://") {
        return Some(path);
    }
    endpoint.starts_with('/').then_some(endpoint)
}

/// The pre-flight file checks (see the module documentation).
fn check_files(
    new: &KubeletConfiguration,
    current: Option<&KubeletConfiguration>,
    node: &NodeContext,
    warnings: &mut Vec<String>,
) -> Result<(), Rejection> {
    let exists = |p: &str| host_path(&node.host_root, p).exists();
    let is_file = |p: &str| host_path(&node.host_root, p).is_file();
    let mut problems: Vec<String> = Vec::new();

    // The kubelet reads these at start and exits when one is missing.
    let client_ca = new
        .authentication
        .as_ref()
        .and_then(|a| a.x509.as_ref())
        .and_then(|x| x.client_ca_file.clone());
    for (field, value) in [
        ("tlsCertFile", new.tls_cert_file.clone()),
        ("tlsPrivateKeyFile", new.tls_private_key_file.clone()),
        ("authentication.x509.clientCAFile", client_ca),
    ] {
        if let Some(path) = value.filter(|p| !p.is_empty())
            && !is_file(&path)
        {
            problems.push(format!(
                "{field} {path}: no such file on the node (the kubelet exits at start without it)"
            ));
        }
    }

    // A missing path the running config already names is how the node runs today: a
    // warning. A newly named one: rejected.
    let mut newly = |field: &str, changed: bool, message: String| {
        if changed {
            problems.push(format!("{field} {message}"));
        } else {
            warnings.push(format!("{field} {message} (as in the running config)"));
        }
    };
    let changed = |get: &dyn Fn(&KubeletConfiguration) -> Option<String>| match current {
        Some(cur) => get(cur) != get(new),
        None => true,
    };

    let static_pod_path =
        |c: &KubeletConfiguration| c.static_pod_path.clone().filter(|s| !s.is_empty());
    if let Some(path) = static_pod_path(new)
        && !exists(&path)
    {
        newly(
            "staticPodPath",
            changed(&static_pod_path),
            format!(
                "{path}: no such file or directory on the node (the kubelet would stop the static pods it runs)"
            ),
        );
    }
    let resolv = |c: &KubeletConfiguration| c.resolv_conf.clone().filter(|s| !s.is_empty());
    if let Some(path) = resolv(new)
        && !is_file(&path)
    {
        newly(
            "resolvConf",
            changed(&resolv),
            format!("{path}: no such file on the node (every new pod sandbox would fail)"),
        );
    }
    let runtime = |c: &KubeletConfiguration| {
        c.container_runtime_endpoint
            .clone()
            .filter(|s| !s.is_empty())
    };
    let image =
        |c: &KubeletConfiguration| c.image_service_endpoint.clone().filter(|s| !s.is_empty());
    for (field, get) in [
        (
            "containerRuntimeEndpoint",
            &runtime as &dyn Fn(&KubeletConfiguration) -> Option<String>,
        ),
        ("imageServiceEndpoint", &image),
    ] {
        if let Some(endpoint) = get(new)
            && let Some(socket) = unix_socket(&endpoint)
            && !exists(socket)
        {
            newly(
                field,
                changed(get),
                format!(
                    "{endpoint}: no socket at {socket} on the node (the kubelet exits when it cannot reach the runtime)"
                ),
            );
        }
    }
    let fail_swap = |c: &KubeletConfiguration| Some(c.fail_swap_on.unwrap_or(true).to_string());
    if new.fail_swap_on.unwrap_or(true) && swap_active(&node.host_root) {
        newly(
            "failSwapOn",
            changed(&fail_swap),
            "is true and swap is on (the kubelet exits: running with swap on is not supported)"
                .into(),
        );
    }

    if problems.is_empty() {
        Ok(())
    } else {
        Err(Rejection::invalid(problems.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_sockets_are_recognised() {
        assert_eq!(
            unix_socket("unix:///run/containerd/containerd.sock"),
            Some("/run/containerd/containerd.sock")
        );
        assert_eq!(
            unix_socket("/run/crio/crio.sock"),
            Some("/run/crio/crio.sock")
        );
        assert_eq!(unix_socket("npipe:////./pipe/containerd"), None);
        assert_eq!(unix_socket("tcp://127.0.0.1:1234"), None);
    }

    #[test]
    fn placement_targets() {
        let p = Placement::DropIn {
            dir: "/etc/kubernetes/kubelet.conf.d".into(),
            name: "50-kubelet-gitops.conf".into(),
        };
        assert_eq!(
            p.target(),
            Path::new("/etc/kubernetes/kubelet.conf.d/50-kubelet-gitops.conf")
        );
        let r = Rejection::invalid("x");
        assert_eq!(r.to_string(), "failed to validate config: x");
    }
}
