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
//!    (`failed to validate config`).
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
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use kubelet_gitops_core::allocatable::{
    self, Allocatable, AllocatableInput, CgroupLayout, CgroupVersion, cgroup_layout,
    node_allocatable,
};
use kubelet_gitops_core::effective::{self, Effective, EffectiveError, Source};
use kubelet_gitops_core::features;
use kubelet_gitops_core::flags::{FlagOverride, KubeletFlags};
use kubelet_gitops_core::message::error_chain;
use kubelet_gitops_core::protocol::reason;
use kubelet_gitops_core::quantity::{Format, Quantity};
use kubelet_gitops_core::types::KubeletConfiguration;
use kubelet_gitops_core::validation::{self, HostInfo};
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

/// Why a payload was not applied, in the kubelet's words (`reason`) with the detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// [`reason::LOAD_ERROR`], [`reason::VALIDATE_ERROR`] or [`reason::INTERNAL_ERROR`].
    pub reason: &'static str,
    /// What exactly, naming files, fields and lines.
    pub detail: String,
}

impl Rejection {
    fn load(detail: impl Into<String>) -> Self {
        Rejection {
            reason: reason::LOAD_ERROR,
            detail: detail.into(),
        }
    }
    fn invalid(detail: impl Into<String>) -> Self {
        Rejection {
            reason: reason::VALIDATE_ERROR,
            detail: detail.into(),
        }
    }
    fn internal(detail: impl Into<String>) -> Self {
        Rejection {
            reason: reason::INTERNAL_ERROR,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.reason, self.detail)
    }
}

impl std::error::Error for Rejection {}

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
    let eff = effective_config(Some(payload), node)?;
    let config = eff.config;
    let version = node.cgroups.version;

    let problems = validation::validate(
        &config,
        &HostInfo {
            cgroup_v2: Some(version == CgroupVersion::V2),
        },
    );
    if !problems.is_empty() {
        let messages: Vec<&str> = problems.iter().map(|p| p.message.as_str()).collect();
        let detail = if messages.len() == 1 {
            messages[0].to_string()
        } else {
            format!("[{}]", messages.join(", "))
        };
        return Err(Rejection::invalid(detail));
    }

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

    let configured_driver = config.cgroup_driver.as_deref().unwrap_or("cgroupfs");
    if configured_driver != node.cgroups.driver.as_str() {
        warnings.push(format!(
            "cgroupDriver is {configured_driver:?} but the node's runtime uses {:?}; kubelets since 1.34 take the runtime's driver when it reports one",
            node.cgroups.driver.as_str()
        ));
    }

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

/// The effective config the kubelet would build with `payload` in place (`None`: the
/// node's files as they are now; in drop-in mode an empty payload is no drop-in of
/// ours, the node's local config), with the flag overrides. Reads the node's config file
/// and drop-ins under the host root; changes nothing.
pub fn effective_config(
    payload: Option<&[u8]>,
    node: &NodeContext,
) -> Result<Effective, Rejection> {
    let flags = &node.flags;
    let config_file = flags.config_file().map(PathBuf::from);
    let config_dir = flags.config_dir().map(PathBuf::from);
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
        }
    }

    // The config file: the payload in replace mode, else the node's file.
    let (file_name, file_bytes) = match (&node.placement, payload) {
        (Placement::ConfigFile { path }, Some(p)) => {
            (Some(path.display().to_string()), Some(p.to_vec()))
        }
        (_, _) => match &config_file {
            Some(path) => {
                let bytes = std::fs::read(host_path(&node.host_root, path)).map_err(|e| {
                    Rejection::load(format!(
                        "failed to load kubelet config file, path: {}, error: {}",
                        path.display(),
                        go_io_error(&e)
                    ))
                })?;
                (Some(path.display().to_string()), Some(bytes))
            }
            None => (None, None),
        },
    };

    // The drop-ins, with the payload in place of its namesake in drop-in mode.
    let mut drop_ins: Vec<(String, Vec<u8>)> = Vec::new();
    if let Some(dir) = &config_dir {
        drop_ins = read_drop_ins(&node.host_root, dir)?;
        if let (Placement::DropIn { dir, name }, Some(p)) = (&node.placement, payload) {
            let ours = dir.join(name).display().to_string();
            drop_ins.retain(|(n, _)| *n != ours);
            // An empty payload in drop-in mode is the node's local config: no drop-in.
            if !p.is_empty() {
                drop_ins.push((ours, p.to_vec()));
            }
        }
        let order = effective::drop_in_order(drop_ins.iter().map(|(n, _)| n.clone()).collect());
        drop_ins.sort_by_key(|(n, _)| order.iter().position(|o| o == n));
        drop_ins.retain(|(n, _)| order.contains(n));
    }

    let payload_name = match (&node.placement, payload) {
        (_, None) => None,
        (p, Some(_)) => Some(p.target().display().to_string()),
    };
    let file = match (&file_name, &file_bytes) {
        (Some(n), Some(b)) => Some(Source::new(n, b)),
        _ => None,
    };
    let sources: Vec<Source<'_>> = drop_ins.iter().map(|(n, b)| Source::new(n, b)).collect();
    effective::effective(file, &sources, Some(flags)).map_err(|e| match e {
        EffectiveError::Decode(d) if Some(&d.file) == payload_name.as_ref() => {
            Rejection::load(d.to_string())
        }
        EffectiveError::Decode(d) => Rejection::load(format!("node file {d}")),
        other => Rejection::load(other.to_string()),
    })
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
