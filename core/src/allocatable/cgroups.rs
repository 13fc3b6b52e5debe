//! The cgroups the kubelet limits at start, named as its cgroup driver names them, and
//! what it writes into them.
//!
//! Upstream: `pkg/kubelet/cm/node_container_manager_linux.go`
//! (`enforceNodeAllocatableCgroups`, `getCgroupConfigInternal`),
//! `pkg/kubelet/cm/helpers_linux.go` (`MilliCPUToShares`),
//! `pkg/kubelet/cm/cgroup_manager_linux.go` at afd5df58bd7dcb7b8c3f00e2065936bd0c508b77
//! (`CgroupName.ToSystemd`, `ParseSystemdToCgroupName`, `ToCgroupfs`,
//! `ParseCgroupfsToCgroupName`, `getCPUWeight`, `toResources`, `maybeSetHugetlb`),
//! `pkg/kubelet/cm/container_manager_linux.go` (`NewContainerManager`, `Start`,
//! `setupNode`), and libcontainer's `ExpandSlice` and its fs/fs2 writers (a zero memory
//! or pids limit means "unset" and is not written).

use std::collections::BTreeMap;

use crate::quantity::Quantity;

use super::{
    Allocatable, AllocatableError, AllocatableInput, HUGEPAGES_PREFIX, RESOURCE_CPU,
    RESOURCE_MEMORY, RESOURCE_PID,
};

/// `enforceNodeAllocatable` keys (`pkg/kubelet/types/constants.go`).
pub const ENFORCE_PODS: &str = "pods";
/// Enforce `systemReserved` on `systemReservedCgroup`.
pub const ENFORCE_SYSTEM_RESERVED: &str = "system-reserved";
/// Enforce only the cpu part of `systemReserved`.
pub const ENFORCE_SYSTEM_RESERVED_COMPRESSIBLE: &str = "system-reserved-compressible";
/// Enforce `kubeReserved` on `kubeReservedCgroup`.
pub const ENFORCE_KUBE_RESERVED: &str = "kube-reserved";
/// Enforce only the cpu part of `kubeReserved`.
pub const ENFORCE_KUBE_RESERVED_COMPRESSIBLE: &str = "kube-reserved-compressible";

/// The name of the node-allocatable cgroup under `cgroupRoot`.
pub const NODE_ALLOCATABLE_CGROUP: &str = "kubepods";

const MIN_SHARES: i128 = 2;
const MAX_SHARES: i128 = 262_144;
const SHARES_PER_CPU: i128 = 1024;
const MILLI_CPU_TO_CPU: i128 = 1000;

/// The cgroup hierarchy in use on the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    /// Legacy hierarchy: one directory per controller.
    V1,
    /// Unified hierarchy.
    V2,
}

/// One value the kubelet writes into a cgroup interface file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupLimit {
    /// The controller: `cpu`, `memory`, `pids` or `hugetlb`.
    pub controller: &'static str,
    /// The interface file: `cpu.shares`, `cpu.weight`, `memory.limit_in_bytes`,
    /// `memory.max`, `pids.max`, `hugetlb.2MB.limit_in_bytes`, `hugetlb.2MB.max`.
    pub file: String,
    /// The file's path relative to the cgroup mount (`/sys/fs/cgroup`):
    /// `memory/kubepods/memory.limit_in_bytes` (v1), `kubepods.slice/memory.max` (v2).
    pub path: String,
    /// The value written, as written.
    pub value: String,
}

/// One cgroup the kubelet sets limits on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupSpec {
    /// The cgroup as configured (`/system.slice`, or `cgroupRoot` for the pods cgroup).
    pub configured: String,
    /// The cgroup's absolute path in the hierarchy, as the driver names it
    /// (`/kubepods`, `/kubepods.slice`, `/system.slice`).
    pub path: String,
    /// The values the kubelet writes, in a fixed order (memory, cpu, pids, hugetlb).
    pub limits: Vec<CgroupLimit>,
}

impl CgroupSpec {
    /// The value written to `file`, if the kubelet writes it.
    pub fn limit(&self, file: &str) -> Option<&str> {
        self.limits
            .iter()
            .find(|l| l.file == file)
            .map(|l| l.value.as_str())
    }
}

/// The QoS cgroups under the pods cgroup (Guaranteed pods live in the pods cgroup itself).
/// Their limits follow the running pods, so only their paths are given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QosCgroups {
    /// `/kubepods/burstable` or `/kubepods.slice/kubepods-burstable.slice`.
    pub burstable: String,
    /// `/kubepods/besteffort` or `/kubepods.slice/kubepods-besteffort.slice`.
    pub besteffort: String,
}

/// The cgroups the kubelet limits at start, in the order it applies them: pods (retried
/// every minute until it succeeds), then system-reserved, then kube-reserved.
///
/// Besides these limits the kubelet, on every cgroup it updates and when the `hugetlb`
/// controller is available, writes 0 to the huge page limit of each page size the host
/// supports and the list omits; that depends on the host and is not listed here. With the
/// `MemoryQoS` feature gate it also writes `memory.min` on the reserved cgroups (v2), and
/// with the `none` CPU manager policy on v2 it writes `cpuset.cpus`; neither is modelled.
/// The reserved cgroups must already exist: the kubelet does not create them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupLayout {
    /// The hierarchy the paths and files are for.
    pub version: CgroupVersion,
    /// The node-allocatable cgroup; `None` when the kubelet leaves it alone
    /// (`cgroupsPerQOS: false` with `cgroupRoot` `/` or empty).
    pub pods: Option<CgroupSpec>,
    /// The QoS cgroups, when `cgroupsPerQOS` is on.
    pub qos: Option<QosCgroups>,
    /// `systemReservedCgroup`, when `system-reserved` or `system-reserved-compressible`
    /// is enforced.
    pub system_reserved: Option<CgroupSpec>,
    /// `kubeReservedCgroup`, when `kube-reserved` or `kube-reserved-compressible` is
    /// enforced.
    pub kube_reserved: Option<CgroupSpec>,
}

impl CgroupLayout {
    /// The limited cgroups in the order the kubelet applies them.
    pub fn specs(&self) -> impl Iterator<Item = &CgroupSpec> {
        [&self.pods, &self.system_reserved, &self.kube_reserved]
            .into_iter()
            .flatten()
    }
}

/// Upstream `MilliCPUToShares`: cgroup v1 `cpu.shares` for a cpu amount in millicores.
pub fn milli_cpu_to_shares(milli_cpu: i128) -> u64 {
    if milli_cpu == 0 {
        return MIN_SHARES as u64;
    }
    let shares =
        (milli_cpu.saturating_mul(SHARES_PER_CPU) / MILLI_CPU_TO_CPU).clamp(MIN_SHARES, MAX_SHARES);
    shares as u64
}

/// Upstream `getCPUWeight`: cgroup v2 `cpu.weight` for cgroup v1 shares, the linear map of
/// `[2, 262144]` onto `[1, 10000]` the kubelet uses for the cgroups it manages itself.
pub fn cpu_shares_to_weight(shares: u64) -> u64 {
    if shares >= MAX_SHARES as u64 {
        return 10_000;
    }
    1 + (shares.saturating_sub(2) * 9999) / 262_142
}

/// Upstream `HugePageUnitSizeFromByteSize`: `2097152` -> `2MB`.
fn huge_page_unit(bytes: i128) -> Option<String> {
    const UNITS: [&str; 6] = ["B", "KB", "MB", "GB", "TB", "PB"];
    if bytes <= 0 {
        return None;
    }
    let mut size = bytes;
    let mut idx = 0;
    while size % 1024 == 0 && idx < UNITS.len() - 1 {
        size /= 1024;
        idx += 1;
    }
    if size > 1024 && idx < UNITS.len() - 1 {
        return None;
    }
    Some(format!("{size}{}", UNITS[idx]))
}

/// The values upstream `getCgroupConfigInternal` and `toResources` turn a resource list
/// into, as the files libcontainer writes (a zero memory or pids limit is "unset").
fn cgroup_limits<'a>(
    resources: impl Iterator<Item = (&'a str, &'a Quantity)>,
    compressible_only: bool,
    version: CgroupVersion,
    cgroup_path: &str,
) -> Vec<CgroupLimit> {
    let mut memory = None;
    let mut cpu = None;
    let mut pids = None;
    let mut huge: BTreeMap<i128, i128> = BTreeMap::new();
    for (name, quantity) in resources {
        match name {
            RESOURCE_MEMORY => memory = Some(quantity.value()),
            RESOURCE_CPU => cpu = Some(milli_cpu_to_shares(quantity.milli_value())),
            RESOURCE_PID => pids = Some(quantity.value()),
            _ => {
                if let Some(size) = name.strip_prefix(HUGEPAGES_PREFIX)
                    && let Ok(size) = Quantity::parse(size)
                {
                    let entry = huge.entry(size.value()).or_insert(0);
                    *entry = entry.saturating_add(quantity.value());
                }
            }
        }
    }
    let relative = cgroup_path.trim_start_matches('/');
    let limit = |controller: &'static str, file: String, value: String| {
        let path = match (version, relative.is_empty()) {
            (CgroupVersion::V1, true) => format!("{controller}/{file}"),
            (CgroupVersion::V1, false) => format!("{controller}/{relative}/{file}"),
            (CgroupVersion::V2, true) => file.clone(),
            (CgroupVersion::V2, false) => format!("{relative}/{file}"),
        };
        CgroupLimit {
            controller,
            file,
            path,
            value,
        }
    };
    let mut limits = Vec::new();
    if !compressible_only && let Some(bytes) = memory.filter(|b| *b != 0) {
        let file = match version {
            CgroupVersion::V1 => "memory.limit_in_bytes",
            CgroupVersion::V2 => "memory.max",
        };
        limits.push(limit("memory", file.to_string(), bytes.to_string()));
    }
    if let Some(shares) = cpu {
        let (file, value) = match version {
            CgroupVersion::V1 => ("cpu.shares", shares),
            CgroupVersion::V2 => ("cpu.weight", cpu_shares_to_weight(shares)),
        };
        limits.push(limit("cpu", file.to_string(), value.to_string()));
    }
    if !compressible_only && let Some(max) = pids.filter(|p| *p != 0) {
        let value = if max > 0 {
            max.to_string()
        } else {
            "max".to_string()
        };
        limits.push(limit("pids", "pids.max".to_string(), value));
    }
    if !compressible_only {
        for (page, bytes) in huge {
            let Some(unit) = huge_page_unit(page) else {
                continue; // upstream logs "Invalid pageSize" and skips it
            };
            let file = match version {
                CgroupVersion::V1 => format!("hugetlb.{unit}.limit_in_bytes"),
                CgroupVersion::V2 => format!("hugetlb.{unit}.max"),
            };
            limits.push(limit("hugetlb", file, bytes.max(0).to_string()));
        }
    }
    limits
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Driver {
    Cgroupfs,
    Systemd,
}

impl Driver {
    fn parse(name: &str) -> Result<Self, AllocatableError> {
        match name {
            "" | "cgroupfs" => Ok(Driver::Cgroupfs),
            "systemd" => Ok(Driver::Systemd),
            other => Err(AllocatableError::UnknownCgroupDriver(other.to_string())),
        }
    }

    /// Upstream `CgroupManager.CgroupName`: a name as the driver writes it, to components.
    fn components(self, name: &str) -> Vec<String> {
        match self {
            Driver::Cgroupfs => parse_cgroupfs(name),
            Driver::Systemd => parse_systemd(name),
        }
    }

    /// Upstream `CgroupManager.Name`: components to the driver's cgroupfs path.
    fn path(self, components: &[String]) -> Result<String, AllocatableError> {
        match self {
            Driver::Cgroupfs => Ok(to_cgroupfs(components)),
            Driver::Systemd => to_systemd(components),
        }
    }
}

/// Upstream `ParseCgroupfsToCgroupName`.
fn parse_cgroupfs(name: &str) -> Vec<String> {
    let trimmed = name.strip_prefix('/').unwrap_or(name);
    if trimmed.is_empty() {
        return Vec::new();
    }
    trimmed.split('/').map(str::to_string).collect()
}

/// Upstream `CgroupName.ToCgroupfs`: `"/" + path.Join(components...)`.
fn to_cgroupfs(components: &[String]) -> String {
    let mut clean: Vec<&str> = Vec::new();
    for part in components.iter().flat_map(|c| c.split('/')) {
        match part {
            "" | "." => {}
            ".." => {
                if clean.last().is_some_and(|last| *last != "..") {
                    clean.pop();
                } else {
                    clean.push("..");
                }
            }
            other => clean.push(other),
        }
    }
    format!("/{}", clean.join("/"))
}

/// Go's `path.Base`.
fn go_path_base(path: &str) -> &str {
    if path.is_empty() {
        return ".";
    }
    let stripped = path.trim_end_matches('/');
    if stripped.is_empty() {
        return "/";
    }
    match stripped.rfind('/') {
        Some(i) => &stripped[i + 1..],
        None => stripped,
    }
}

/// Upstream `ParseSystemdToCgroupName`: only the last path element counts, `-` separates
/// components and `_` stands for `-`.
fn parse_systemd(name: &str) -> Vec<String> {
    let base = go_path_base(name);
    let base = base.strip_suffix(".slice").unwrap_or(base);
    base.split('-').map(|part| part.replace('_', "-")).collect()
}

/// Upstream `CgroupName.ToSystemd`: `-` becomes `_` in each component, components join
/// with `-`, and the slice expands into its parents.
fn to_systemd(components: &[String]) -> Result<String, AllocatableError> {
    if components.is_empty() || (components.len() == 1 && components[0].is_empty()) {
        return Ok("/".to_string());
    }
    let slice = format!(
        "{}.slice",
        components
            .iter()
            .map(|c| c.replace('-', "_"))
            .collect::<Vec<_>>()
            .join("-")
    );
    expand_slice(&slice).map_err(|reason| AllocatableError::SystemdSlice {
        name: format!("/{}", components.join("/")),
        reason,
    })
}

/// libcontainer's `systemd.ExpandSlice`: `a-b.slice` -> `/a.slice/a-b.slice`.
fn expand_slice(slice: &str) -> Result<String, String> {
    let Some(name) = slice.strip_suffix(".slice") else {
        return Err(format!("invalid slice name: {slice}"));
    };
    if slice.contains('/') {
        return Err(format!("invalid slice name {slice}: contains a /"));
    }
    if name == "-" {
        return Ok("/".to_string());
    }
    let mut path = String::new();
    let mut prefix = String::new();
    for component in name.split('-') {
        if component.is_empty() {
            return Err(format!("invalid slice name {slice}: empty component"));
        }
        path.push('/');
        path.push_str(&prefix);
        path.push_str(component);
        path.push_str(".slice");
        prefix.push_str(component);
        prefix.push('-');
    }
    Ok(path)
}

/// The cgroups the kubelet limits at start and what it writes into them
/// (`createNodeAllocatableCgroups`, `enforceNodeAllocatableCgroups`), for the driver and
/// cgroup version given. `alloc` is [`node_allocatable`]'s result for the same input.
pub fn cgroup_layout(
    input: &AllocatableInput,
    alloc: &Allocatable,
    version: CgroupVersion,
) -> Result<CgroupLayout, AllocatableError> {
    let driver = Driver::parse(&input.cgroup_driver)?;
    let enforced = |key: &str| input.enforce_node_allocatable.iter().any(|k| k == key);

    // NewContainerManager: cgroupRoot is always cgroupfs-form; with cgroupsPerQOS the
    // node-allocatable cgroup `kubepods` goes under it (server.go defaults it to `/`).
    let configured_root = if input.cgroups_per_qos && input.cgroup_root.is_empty() {
        "/"
    } else {
        input.cgroup_root.as_str()
    };
    let mut root = parse_cgroupfs(configured_root);
    let (pods, qos) = if input.cgroups_per_qos || !root.is_empty() {
        if input.cgroups_per_qos {
            root.push(NODE_ALLOCATABLE_CGROUP.to_string());
        }
        let path = driver.path(&root)?;
        let enforce_pods = input.cgroups_per_qos && enforced(ENFORCE_PODS);
        let values = alloc.resources.iter().map(|(name, r)| {
            let q = if enforce_pods {
                &r.without_eviction
            } else {
                &r.capacity
            };
            (name.as_str(), q)
        });
        let limits = cgroup_limits(values, false, version, &path);
        let qos = if input.cgroups_per_qos {
            let child = |name: &str| {
                let mut c = root.clone();
                c.push(name.to_string());
                driver.path(&c)
            };
            Some(QosCgroups {
                burstable: child("burstable")?,
                besteffort: child("besteffort")?,
            })
        } else {
            None
        };
        let spec = CgroupSpec {
            configured: configured_root.to_string(),
            path,
            limits,
        };
        (Some(spec), qos)
    } else {
        (None, None)
    };

    let reserved = |full_key: &'static str,
                    compressible_key: &'static str,
                    cgroup_field: &'static str,
                    reserved_field: &'static str,
                    cgroup: &str,
                    reservation: &BTreeMap<String, Quantity>|
     -> Result<Option<CgroupSpec>, AllocatableError> {
        let full = enforced(full_key);
        if !full && !enforced(compressible_key) {
            return Ok(None);
        }
        let key = if full { full_key } else { compressible_key };
        if cgroup.is_empty() {
            return Err(AllocatableError::MissingReservedCgroup {
                field: cgroup_field,
                key,
            });
        }
        if reservation.is_empty() {
            return Err(AllocatableError::EmptyReservation {
                key,
                field: reserved_field,
                cgroup: cgroup.to_string(),
            });
        }
        let path = driver.path(&driver.components(cgroup))?;
        let values = reservation.iter().map(|(n, q)| (n.as_str(), q));
        let limits = cgroup_limits(values, !full, version, &path);
        Ok(Some(CgroupSpec {
            configured: cgroup.to_string(),
            path,
            limits,
        }))
    };
    let system_reserved = reserved(
        ENFORCE_SYSTEM_RESERVED,
        ENFORCE_SYSTEM_RESERVED_COMPRESSIBLE,
        "systemReservedCgroup",
        "systemReserved",
        &input.system_reserved_cgroup,
        &input.system_reserved,
    )?;
    let kube_reserved = reserved(
        ENFORCE_KUBE_RESERVED,
        ENFORCE_KUBE_RESERVED_COMPRESSIBLE,
        "kubeReservedCgroup",
        "kubeReserved",
        &input.kube_reserved_cgroup,
        &input.kube_reserved,
    )?;
    Ok(CgroupLayout {
        version,
        pods,
        qos,
        system_reserved,
        kube_reserved,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::allocatable::node_allocatable;
    use crate::allocatable::tests::{GI, MI, docs_example, q};

    #[test]
    fn shares_and_weights() {
        assert_eq!(milli_cpu_to_shares(0), 2);
        assert_eq!(milli_cpu_to_shares(1), 2);
        assert_eq!(milli_cpu_to_shares(500), 512);
        assert_eq!(milli_cpu_to_shares(1000), 1024);
        assert_eq!(milli_cpu_to_shares(14_500), 14_848);
        assert_eq!(milli_cpu_to_shares(300_000), 262_144);
        assert_eq!(cpu_shares_to_weight(2), 1);
        assert_eq!(cpu_shares_to_weight(512), 20);
        assert_eq!(cpu_shares_to_weight(1024), 39);
        // kubernetes/kubernetes#139807: 16 cores, systemReserved cpu 8 -> kubepods 313.
        assert_eq!(cpu_shares_to_weight(milli_cpu_to_shares(8000)), 313);
        assert_eq!(cpu_shares_to_weight(14_848), 567);
        assert_eq!(cpu_shares_to_weight(262_143), 9999);
        assert_eq!(cpu_shares_to_weight(262_144), 10_000);
    }

    #[test]
    fn pods_cgroup_enforced_v1_cgroupfs() {
        let input = docs_example();
        let alloc = node_allocatable(&input).unwrap();
        let layout = cgroup_layout(&input, &alloc, CgroupVersion::V1).unwrap();
        let pods = layout.pods.as_ref().unwrap();
        assert_eq!(pods.path, "/kubepods");
        // capacity - systemReserved - kubeReserved; the eviction threshold is not in it.
        assert_eq!(pods.limit("cpu.shares"), Some("14848"));
        assert_eq!(pods.limit("memory.limit_in_bytes"), Some("31138512896"));
        assert_eq!(pods.limit("pids.max"), Some("4194304"));
        assert_eq!(pods.limit("cpu.weight"), None);
        let memory = pods
            .limits
            .iter()
            .find(|l| l.controller == "memory")
            .unwrap();
        assert_eq!(memory.path, "memory/kubepods/memory.limit_in_bytes");
        let qos = layout.qos.as_ref().unwrap();
        assert_eq!(qos.burstable, "/kubepods/burstable");
        assert_eq!(qos.besteffort, "/kubepods/besteffort");
        assert!(layout.system_reserved.is_none() && layout.kube_reserved.is_none());
    }

    #[test]
    fn pods_cgroup_enforced_v2_systemd() {
        let mut input = docs_example();
        input.cgroup_driver = "systemd".into();
        input.system_reserved.insert("pid".into(), q("1000"));
        input.kube_reserved.insert("pid".into(), q("1000"));
        let alloc = node_allocatable(&input).unwrap();
        let layout = cgroup_layout(&input, &alloc, CgroupVersion::V2).unwrap();
        let pods = layout.pods.as_ref().unwrap();
        assert_eq!(pods.path, "/kubepods.slice");
        assert_eq!(pods.limit("cpu.weight"), Some("567"));
        assert_eq!(pods.limit("memory.max"), Some("31138512896"));
        assert_eq!(pods.limit("pids.max"), Some("4192304"));
        assert_eq!(pods.limit("cpu.shares"), None);
        let cpu = pods.limits.iter().find(|l| l.controller == "cpu").unwrap();
        assert_eq!(cpu.path, "kubepods.slice/cpu.weight");
        let qos = layout.qos.as_ref().unwrap();
        assert_eq!(qos.burstable, "/kubepods.slice/kubepods-burstable.slice");
        assert_eq!(qos.besteffort, "/kubepods.slice/kubepods-besteffort.slice");
    }

    #[test]
    fn pods_cgroup_not_enforced_gets_capacity() {
        for enforce in [
            vec![],
            vec!["none".to_string()],
            vec!["kube-reserved-compressible".into()],
        ] {
            let mut input = docs_example();
            input.kube_reserved_cgroup = "/kube.slice".into();
            input.enforce_node_allocatable = enforce.clone();
            let alloc = node_allocatable(&input).unwrap();
            let layout = cgroup_layout(&input, &alloc, CgroupVersion::V1).unwrap();
            let pods = layout.pods.unwrap();
            assert_eq!(pods.limit("cpu.shares"), Some("16384"), "{enforce:?}");
            assert_eq!(pods.limit("memory.limit_in_bytes"), Some("34359738368"));
            assert_eq!(pods.limit("pids.max"), Some("4194304"));
        }
    }

    #[test]
    fn reserved_cgroups_enforced() {
        let mut input = docs_example();
        input.enforce_node_allocatable = vec![
            "pods".into(),
            "system-reserved".into(),
            "kube-reserved".into(),
        ];
        input.system_reserved_cgroup = "/system.slice".into();
        input.kube_reserved_cgroup = "/kube-reserved.slice".into();
        input.system_reserved.insert("pid".into(), q("1000"));
        input.cgroup_driver = "systemd".into();
        let alloc = node_allocatable(&input).unwrap();

        let v1 = cgroup_layout(&input, &alloc, CgroupVersion::V1).unwrap();
        let sys = v1.system_reserved.as_ref().unwrap();
        assert_eq!(sys.path, "/system.slice");
        assert_eq!(sys.limit("cpu.shares"), Some("512"));
        assert_eq!(sys.limit("memory.limit_in_bytes"), Some("1073741824"));
        assert_eq!(sys.limit("pids.max"), Some("1000"));
        let kube = v1.kube_reserved.as_ref().unwrap();
        assert_eq!(kube.path, "/kube.slice/kube-reserved.slice");
        assert_eq!(kube.limit("cpu.shares"), Some("1024"));
        assert_eq!(kube.limit("memory.limit_in_bytes"), Some("2147483648"));
        assert_eq!(kube.limit("pids.max"), None, "no pid in kubeReserved");
        let paths: Vec<_> = v1.specs().map(|s| s.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/kubepods.slice",
                "/system.slice",
                "/kube.slice/kube-reserved.slice"
            ]
        );

        let v2 = cgroup_layout(&input, &alloc, CgroupVersion::V2).unwrap();
        let sys = v2.system_reserved.unwrap();
        assert_eq!(sys.limit("cpu.weight"), Some("20"));
        assert_eq!(sys.limit("memory.max"), Some("1073741824"));
        assert_eq!(
            sys.limits
                .iter()
                .map(|l| l.path.as_str())
                .collect::<Vec<_>>(),
            [
                "system.slice/memory.max",
                "system.slice/cpu.weight",
                "system.slice/pids.max"
            ]
        );
        assert_eq!(v2.kube_reserved.unwrap().limit("cpu.weight"), Some("39"));
    }

    #[test]
    fn compressible_enforcement_writes_cpu_only() {
        let mut input = docs_example();
        input.enforce_node_allocatable = vec!["pods".into(), "system-reserved-compressible".into()];
        input.system_reserved_cgroup = "/system.slice".into();
        let alloc = node_allocatable(&input).unwrap();
        let layout = cgroup_layout(&input, &alloc, CgroupVersion::V1).unwrap();
        let sys = layout.system_reserved.unwrap();
        assert_eq!(sys.limits.len(), 1);
        assert_eq!(sys.limit("cpu.shares"), Some("512"));
        // Listing both: the full enforcement wins (the compressible pass rewrites cpu only).
        input
            .enforce_node_allocatable
            .push("system-reserved".into());
        let layout = cgroup_layout(&input, &alloc, CgroupVersion::V1).unwrap();
        assert_eq!(layout.system_reserved.unwrap().limits.len(), 2);
    }

    #[test]
    fn enforcement_needs_a_cgroup_and_a_reservation() {
        let mut input = docs_example();
        input.enforce_node_allocatable = vec!["pods".into(), "kube-reserved".into()];
        let alloc = node_allocatable(&input).unwrap();
        let err = cgroup_layout(&input, &alloc, CgroupVersion::V2).unwrap_err();
        assert_eq!(
            err.to_string(),
            "kubeReservedCgroup must be specified when \"kube-reserved\" is contained in enforceNodeAllocatable"
        );
        input.kube_reserved_cgroup = "/kube.slice".into();
        input.kube_reserved.clear();
        let alloc = node_allocatable(&input).unwrap();
        let err = cgroup_layout(&input, &alloc, CgroupVersion::V2).unwrap_err();
        assert!(
            matches!(
                err,
                AllocatableError::EmptyReservation {
                    key: "kube-reserved",
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn without_cgroups_per_qos() {
        let mut input = docs_example();
        input.cgroups_per_qos = false;
        let alloc = node_allocatable(&input).unwrap();
        let layout = cgroup_layout(&input, &alloc, CgroupVersion::V1).unwrap();
        assert!(layout.pods.is_none() && layout.qos.is_none());
        // A non-root cgroupRoot is updated with capacity (pods enforcement needs QoS cgroups).
        input.cgroup_root = "/custom".into();
        let layout = cgroup_layout(&input, &alloc, CgroupVersion::V1).unwrap();
        let pods = layout.pods.unwrap();
        assert_eq!(pods.path, "/custom");
        assert_eq!(pods.limit("memory.limit_in_bytes"), Some("34359738368"));
        assert!(layout.qos.is_none());
    }

    #[test]
    fn cgroup_root_conversion() {
        let cases: &[(&str, &str, &str)] = &[
            ("cgroupfs", "", "/kubepods"),
            ("cgroupfs", "/", "/kubepods"),
            ("cgroupfs", "/custom//root/", "/custom/root/kubepods"),
            ("systemd", "/", "/kubepods.slice"),
            (
                "systemd",
                "/my-root",
                "/my_root.slice/my_root-kubepods.slice",
            ),
            ("systemd", "/a/b", "/a.slice/a-b.slice/a-b-kubepods.slice"),
        ];
        for (driver, root, expected) in cases {
            let mut input = docs_example();
            input.cgroup_driver = driver.to_string();
            input.cgroup_root = root.to_string();
            let alloc = node_allocatable(&input).unwrap();
            let layout = cgroup_layout(&input, &alloc, CgroupVersion::V2).unwrap();
            assert_eq!(layout.pods.unwrap().path, *expected, "{driver} {root:?}");
        }
        let mut input = docs_example();
        input.cgroup_driver = "systemd".into();
        input.cgroup_root = "/a//b".into();
        let alloc = node_allocatable(&input).unwrap();
        let err = cgroup_layout(&input, &alloc, CgroupVersion::V2).unwrap_err();
        assert!(
            matches!(err, AllocatableError::SystemdSlice { .. }),
            "{err}"
        );
        input.cgroup_driver = "docker".into();
        let err = cgroup_layout(&input, &alloc, CgroupVersion::V2).unwrap_err();
        assert_eq!(err, AllocatableError::UnknownCgroupDriver("docker".into()));
    }

    #[test]
    fn reserved_cgroup_names_per_driver() {
        let cases: &[(&str, &str, &str)] = &[
            ("systemd", "/system.slice", "/system.slice"),
            (
                "systemd",
                "/kube-reserved.slice",
                "/kube.slice/kube-reserved.slice",
            ),
            (
                "systemd",
                "/kube.slice/kube-reserved.slice",
                "/kube.slice/kube-reserved.slice",
            ),
            ("systemd", "/my_daemons.slice", "/my_daemons.slice"),
            // systemd names only the last element, and always as a slice.
            (
                "systemd",
                "/runtime.slice/kubelet.service",
                "/kubelet.service.slice",
            ),
            ("cgroupfs", "/system.slice", "/system.slice"),
            (
                "cgroupfs",
                "/runtime.slice/kubelet.service",
                "/runtime.slice/kubelet.service",
            ),
            ("cgroupfs", "system", "/system"),
        ];
        for (driver, name, expected) in cases {
            let mut input = docs_example();
            input.cgroup_driver = driver.to_string();
            input.enforce_node_allocatable = vec!["system-reserved".into()];
            input.system_reserved_cgroup = name.to_string();
            let alloc = node_allocatable(&input).unwrap();
            let layout = cgroup_layout(&input, &alloc, CgroupVersion::V1).unwrap();
            let sys = layout.system_reserved.unwrap();
            assert_eq!(sys.path, *expected, "{driver} {name}");
            assert_eq!(sys.configured, *name);
        }
    }

    #[test]
    fn systemd_names_match_upstream() {
        let name: Vec<String> = ["kubepods", "burstable", "pod1234-abcd-5678-efgh"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            to_systemd(&name).unwrap(),
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_abcd_5678_efgh.slice"
        );
        assert_eq!(to_systemd(&[]).unwrap(), "/");
        assert_eq!(
            parse_systemd(
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_abcd.slice"
            ),
            ["kubepods", "burstable", "pod1234-abcd"]
        );
        assert_eq!(expand_slice("-.slice").unwrap(), "/");
        assert_eq!(
            expand_slice("test-a-b.slice").unwrap(),
            "/test.slice/test-a.slice/test-a-b.slice"
        );
        assert!(expand_slice("test--a.slice").is_err());
        assert!(expand_slice("-test.slice").is_err());
        assert!(expand_slice("test").is_err());
        assert_eq!(to_cgroupfs(&["a".into(), "..".into(), "b".into()]), "/b");
        assert_eq!(parse_cgroupfs("/"), Vec::<String>::new());
        assert_eq!(go_path_base("/a/b/"), "b");
        assert_eq!(go_path_base(""), ".");
    }

    #[test]
    fn huge_page_units() {
        assert_eq!(huge_page_unit(2 * MI).as_deref(), Some("2MB"));
        assert_eq!(huge_page_unit(GI).as_deref(), Some("1GB"));
        assert_eq!(huge_page_unit(64 * 1024).as_deref(), Some("64KB"));
        assert_eq!(huge_page_unit(0), None);
    }
}
