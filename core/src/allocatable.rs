//! Node allocatable, computed exactly as the kubelet computes it, and the cgroups the
//! kubelet limits with it.
//!
//! Upstream, read at kubernetes/kubernetes master (2025-2026, the `klog.Logger` era):
//! `pkg/kubelet/cm/node_container_manager_linux.go` (`enforceNodeAllocatableCgroups`,
//! `getCgroupConfigInternal`, `getNodeAllocatableAbsoluteImpl`,
//! `GetNodeAllocatableReservation`, `validateNodeAllocatable`), `pkg/kubelet/cm/helpers.go`
//! (`hardEvictionReservation`), `pkg/kubelet/cm/helpers_linux.go` (`MilliCPUToShares`),
//! `pkg/kubelet/cm/cgroup_manager_linux.go` at afd5df58bd7dcb7b8c3f00e2065936bd0c508b77
//! (`CgroupName.ToSystemd`, `ParseSystemdToCgroupName`, `ToCgroupfs`,
//! `ParseCgroupfsToCgroupName`, `getCPUWeight`, `toResources`, `maybeSetHugetlb`),
//! `pkg/kubelet/cm/container_manager_linux.go` (`NewContainerManager`, `Start`,
//! `setupNode`), `pkg/kubelet/eviction/helpers.go` (`parseThresholdStatement`,
//! `parsePercentage`), `pkg/kubelet/eviction/api/types.go` at
//! b547a95d14430b903f638946ca291778632f8726 (`GetThresholdQuantity`),
//! `pkg/kubelet/nodestatus/setters.go` (`MachineInfo`: huge pages leave allocatable memory),
//! `cmd/kubelet/app/server.go` (`parseResourceList`), and libcontainer's `ExpandSlice` and
//! its fs/fs2 writers (a zero memory or pids limit means "unset" and is not written).
//!
//! The arithmetic:
//!
//! * `reservation = systemReserved + kubeReserved + hard eviction`, where only two hard
//!   eviction signals reserve anything: `memory.available` (from `memory`) and
//!   `nodefs.available` (from `ephemeral-storage`). A percentage is a `float32`, so
//!   `nodefs.available: 10%` of `100Gi` reserves 10737418400 bytes, 160 more than `10Gi`.
//! * `allocatable = capacity - reservation`; the kubelet refuses to start when that is
//!   negative for a resource it knows (`validateNodeAllocatable`).
//! * Allocatable memory then loses every `hugepages-*` capacity (clamped at zero).
//! * The pods (node-allocatable) cgroup is limited to `capacity - systemReserved -
//!   kubeReserved` (no eviction term) when `pods` is enforced, and to plain capacity when
//!   it is not: the kubelet always writes cpu shares, memory and pids to it.

use std::collections::BTreeMap;
use std::fmt;

use crate::quantity::{Format, Quantity, QuantityError};

/// The resource names the kubelet reserves (`cmd/kubelet/app/server.go` `parseResourceList`).
pub const RESOURCE_CPU: &str = "cpu";
/// Memory, in bytes.
pub const RESOURCE_MEMORY: &str = "memory";
/// Local ephemeral storage, in bytes.
pub const RESOURCE_EPHEMERAL_STORAGE: &str = "ephemeral-storage";
/// Process IDs (`pidlimit.PIDs`). Internal to the kubelet: never in `Node.status`.
pub const RESOURCE_PID: &str = "pid";
/// The pod count (`maxPods`); never reserved.
pub const RESOURCE_PODS: &str = "pods";
/// Prefix of huge page resources (`hugepages-2Mi`).
pub const HUGEPAGES_PREFIX: &str = "hugepages-";

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

/// Eviction signals the kubelet accepts (`pkg/kubelet/eviction/helpers.go` `signalToResource`).
const EVICTION_SIGNALS: &[&str] = &[
    "memory.available",
    "allocatableMemory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "containerfs.available",
    "containerfs.inodesFree",
    "pid.available",
];

const MIN_SHARES: i128 = 2;
const MAX_SHARES: i128 = 262_144;
const SHARES_PER_CPU: i128 = 1024;
const MILLI_CPU_TO_CPU: i128 = 1000;

/// What the kubelet needs to know to compute allocatable and its cgroups. The lead builds
/// it from an effective `KubeletConfiguration` and a node's capacity.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AllocatableInput {
    /// The node's capacity: `cpu`, `memory`, `ephemeral-storage`, `pods`, `hugepages-*`,
    /// and `pid` (the node's max PID; the kubelet's internal capacity).
    pub capacity: BTreeMap<String, Quantity>,
    /// `systemReserved`, parsed.
    pub system_reserved: BTreeMap<String, Quantity>,
    /// `kubeReserved`, parsed.
    pub kube_reserved: BTreeMap<String, Quantity>,
    /// `evictionHard`: signal to `"100Mi"` or `"10%"`.
    pub eviction_hard: BTreeMap<String, String>,
    /// The flag `--experimental-allocatable-ignore-eviction`: hard eviction thresholds do
    /// not reduce allocatable (they are still parsed and must still be valid).
    pub ignore_eviction_threshold: bool,
    /// `enforceNodeAllocatable`.
    pub enforce_node_allocatable: Vec<String>,
    /// `cgroupsPerQOS`.
    pub cgroups_per_qos: bool,
    /// `cgroupDriver`: `cgroupfs` or `systemd` (empty means the default, `cgroupfs`).
    pub cgroup_driver: String,
    /// `cgroupRoot`, in cgroupfs form; empty means `/` when `cgroupsPerQOS` is on.
    pub cgroup_root: String,
    /// `systemReservedCgroup`, as the driver names it (`/system.slice`).
    pub system_reserved_cgroup: String,
    /// `kubeReservedCgroup`, as the driver names it.
    pub kube_reserved_cgroup: String,
}

impl AllocatableInput {
    /// The input for a node of `capacity` running the (effective, defaulted) `cfg`.
    ///
    /// As the kubelet's `run()` does, a non-empty `reservedSystemCPUs` replaces the cpu of
    /// the reservations: systemReserved gets the number of reserved CPUs, kubeReserved none.
    pub fn from_config(
        cfg: &crate::types::KubeletConfiguration,
        capacity: BTreeMap<String, Quantity>,
    ) -> Result<Self, AllocatableError> {
        let parse = |field: &'static str, map: Option<&BTreeMap<String, String>>| {
            let mut out = BTreeMap::new();
            for (resource, value) in map.into_iter().flatten() {
                let q = Quantity::parse(value).map_err(|source| {
                    AllocatableError::ReservationQuantity {
                        field,
                        resource: resource.clone(),
                        value: value.clone(),
                        source,
                    }
                })?;
                out.insert(resource.clone(), q);
            }
            Ok::<_, AllocatableError>(out)
        };
        let mut system_reserved = parse("systemReserved", cfg.system_reserved.as_ref())?;
        let mut kube_reserved = parse("kubeReserved", cfg.kube_reserved.as_ref())?;
        if let Some(cpus) = cfg
            .reserved_system_cpus
            .as_deref()
            .filter(|s| !s.is_empty())
            .and_then(count_cpuset)
        {
            system_reserved.insert("cpu".into(), Quantity::from_units(cpus, Format::DecimalSI));
            kube_reserved.remove("cpu");
        }
        Ok(AllocatableInput {
            capacity,
            system_reserved,
            kube_reserved,
            eviction_hard: cfg.eviction_hard.clone().unwrap_or_default(),
            ignore_eviction_threshold: false,
            enforce_node_allocatable: cfg.enforce_node_allocatable.clone().unwrap_or_default(),
            cgroups_per_qos: cfg.cgroups_per_qos.unwrap_or(true),
            cgroup_driver: cfg.cgroup_driver.clone().unwrap_or_default(),
            cgroup_root: cfg.cgroup_root.clone().unwrap_or_default(),
            system_reserved_cgroup: cfg.system_reserved_cgroup.clone().unwrap_or_default(),
            kube_reserved_cgroup: cfg.kube_reserved_cgroup.clone().unwrap_or_default(),
        })
    }
}

/// The number of CPUs in a Linux cpuset list (`0-3,8`); `None` when malformed
/// (validation reports that).
fn count_cpuset(list: &str) -> Option<i128> {
    let mut n: i128 = 0;
    for part in list.split(',').map(str::trim) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (i128, i128) = (a.parse().ok()?, b.parse().ok()?);
                if b < a {
                    return None;
                }
                n += b - a + 1;
            }
            None => {
                part.parse::<u32>().ok()?;
                n += 1;
            }
        }
    }
    Some(n)
}

/// The cgroup hierarchy in use on the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    /// Legacy hierarchy: one directory per controller.
    V1,
    /// Unified hierarchy.
    V2,
}

/// One resource's figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceAllocatable {
    /// The node's capacity.
    pub capacity: Quantity,
    /// `systemReserved` for this resource (zero when absent).
    pub system_reserved: Quantity,
    /// `kubeReserved` for this resource (zero when absent).
    pub kube_reserved: Quantity,
    /// What the hard eviction thresholds reserve (zero but for memory and ephemeral-storage).
    pub hard_eviction: Quantity,
    /// What the node publishes as allocatable (and the scheduler uses).
    pub allocatable: Quantity,
    /// `capacity - systemReserved - kubeReserved`, clamped at zero: the limit of the pods
    /// cgroup when `pods` is enforced (upstream `getNodeAllocatableInternalAbsolute`).
    pub without_eviction: Quantity,
}

/// Node allocatable for every resource of the capacity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocatable {
    /// Per resource name, in name order.
    pub resources: BTreeMap<String, ResourceAllocatable>,
}

impl Allocatable {
    /// The allocatable the kubelet publishes in `Node.status.allocatable` (every resource
    /// but `pid`, which is internal to the kubelet).
    pub fn node_status(&self) -> BTreeMap<String, Quantity> {
        self.resources
            .iter()
            .filter(|(name, _)| name.as_str() != RESOURCE_PID)
            .map(|(name, r)| (name.clone(), r.allocatable.clone()))
            .collect()
    }

    /// The allocatable of one resource.
    pub fn get(&self, resource: &str) -> Option<&Quantity> {
        self.resources.get(resource).map(|r| &r.allocatable)
    }
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

/// A resource whose reservations exceed its capacity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overcommit {
    /// The resource name.
    pub resource: String,
    /// Its capacity, canonical.
    pub capacity: String,
    /// The total reservation, canonical.
    pub reservation: String,
    /// `systemReserved`, canonical.
    pub system_reserved: String,
    /// `kubeReserved`, canonical.
    pub kube_reserved: String,
    /// The hard eviction reservation, canonical.
    pub hard_eviction: String,
}

impl fmt::Display for Overcommit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Resource {:?} has a reservation of {} (systemReserved {} + kubeReserved {} + evictionHard {}) but capacity of {}. Expected capacity >= reservation.",
            self.resource,
            self.reservation,
            self.system_reserved,
            self.kube_reserved,
            self.hard_eviction,
            self.capacity
        )
    }
}

/// Why allocatable or the cgroup layout cannot be computed; each is a reason the kubelet
/// refuses to start (or, where noted, a case it mishandles).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocatableError {
    /// `parseResourceList`: only cpu, memory, ephemeral-storage and pid can be reserved.
    #[error(
        "{field}: cannot reserve {resource:?} resource (only cpu, memory, ephemeral-storage and pid can be reserved)"
    )]
    UnsupportedReservation {
        field: &'static str,
        resource: String,
    },
    /// `parseResourceList`: a reservation that is not a quantity.
    #[error("{field}: invalid quantity {value:?} for {resource:?}: {source}")]
    ReservationQuantity {
        field: &'static str,
        resource: String,
        value: String,
        #[source]
        source: QuantityError,
    },
    /// `parseResourceList`: a negative reservation.
    #[error("{field}: resource quantity for {resource:?} cannot be negative: {value}")]
    NegativeReservation {
        field: &'static str,
        resource: String,
        value: String,
    },
    /// `parseThresholdStatement`: not an eviction signal.
    #[error("evictionHard: unsupported eviction signal {signal:?}")]
    UnsupportedSignal { signal: String },
    /// A percentage threshold that is not a number, negative, or over 100%.
    #[error("evictionHard[{signal}]: invalid percentage threshold {value:?}: {reason}")]
    InvalidPercentage {
        signal: String,
        value: String,
        reason: String,
    },
    /// A quantity threshold that does not parse.
    #[error("evictionHard[{signal}]: invalid quantity {value:?}: {source}")]
    InvalidQuantity {
        signal: String,
        value: String,
        #[source]
        source: QuantityError,
    },
    /// A quantity threshold that is zero or negative.
    #[error("evictionHard[{signal}]: eviction threshold {signal} must be positive: {value}")]
    NonPositiveThreshold { signal: String, value: String },
    /// `validateNodeAllocatable`: reservations exceed capacity. The kubelet checks cpu,
    /// memory and ephemeral-storage; we also check pid, which the kubelet silently clamps
    /// (leaving the pods cgroup without a pids limit).
    #[error("invalid Node Allocatable configuration. {}", join_overcommits(.0))]
    ExceedsCapacity(Vec<Overcommit>),
    /// A cgroup driver other than cgroupfs or systemd.
    #[error("cgroupDriver {0:?} is neither \"cgroupfs\" nor \"systemd\"")]
    UnknownCgroupDriver(String),
    /// An enforced reservation without its cgroup (upstream checks this in config validation).
    #[error("{field} must be specified when {key:?} is contained in enforceNodeAllocatable")]
    MissingReservedCgroup {
        field: &'static str,
        key: &'static str,
    },
    /// `enforceExistingCgroup`: enforcing an empty reservation fails the kubelet's start
    /// with "cgroup is not configured properly".
    #[error(
        "{key:?} is enforced on {cgroup:?} but {field} is empty: the kubelet fails to start (cgroup is not configured properly)"
    )]
    EmptyReservation {
        key: &'static str,
        field: &'static str,
        cgroup: String,
    },
    /// A cgroup name systemd cannot express as a slice (upstream panics).
    #[error("cgroup {name:?} cannot be converted to a systemd slice: {reason}")]
    SystemdSlice { name: String, reason: String },
}

fn join_overcommits(items: &[Overcommit]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The format the kubelet prints a resource's quantities in.
fn format_for(resource: &str) -> Format {
    if resource == RESOURCE_MEMORY
        || resource == RESOURCE_EPHEMERAL_STORAGE
        || resource.starts_with(HUGEPAGES_PREFIX)
    {
        Format::BinarySI
    } else {
        Format::DecimalSI
    }
}

/// A parsed hard eviction threshold value (upstream `ThresholdValue`).
#[derive(Debug, Clone, PartialEq)]
enum ThresholdValue {
    Quantity(Quantity),
    /// A fraction in `[0, 1]`, as a `float32` like upstream.
    Percentage(f32),
}

/// Upstream `parseThresholdStatement` for one `evictionHard` entry; `None` for the
/// thresholds upstream ignores (`0%` and `100%`, exactly as written).
fn parse_threshold(signal: &str, value: &str) -> Result<Option<ThresholdValue>, AllocatableError> {
    if !EVICTION_SIGNALS.contains(&signal) {
        return Err(AllocatableError::UnsupportedSignal {
            signal: signal.to_string(),
        });
    }
    if value.ends_with('%') {
        if value == "0%" || value == "100%" {
            return Ok(None);
        }
        let invalid = |reason: &str| AllocatableError::InvalidPercentage {
            signal: signal.to_string(),
            value: value.to_string(),
            reason: reason.to_string(),
        };
        // Upstream: strconv.ParseFloat(strings.TrimRight(v, "%"), 32), then float32 / 100.
        let number: f32 = value
            .trim_end_matches('%')
            .parse()
            .map_err(|_| invalid("not a number"))?;
        if number.is_nan() {
            return Err(invalid("not a number"));
        }
        let fraction = number / 100.0;
        if fraction < 0.0 {
            return Err(invalid("eviction percentage threshold must be >= 0%"));
        }
        if fraction > 1.0 {
            return Err(invalid("eviction percentage threshold must be <= 100%"));
        }
        return Ok(Some(ThresholdValue::Percentage(fraction)));
    }
    let quantity = Quantity::parse(value).map_err(|source| AllocatableError::InvalidQuantity {
        signal: signal.to_string(),
        value: value.to_string(),
        source,
    })?;
    if quantity.nanos() <= 0 {
        return Err(AllocatableError::NonPositiveThreshold {
            signal: signal.to_string(),
            value: quantity.canonical(),
        });
    }
    Ok(Some(ThresholdValue::Quantity(quantity)))
}

/// Upstream `GetThresholdQuantity`: a quantity as is, or the percentage of the capacity's
/// whole units, computed in floating point and truncated.
fn threshold_quantity(value: &ThresholdValue, capacity: Option<&Quantity>) -> Quantity {
    match value {
        ThresholdValue::Quantity(q) => q.clone(),
        ThresholdValue::Percentage(fraction) => {
            let units = capacity.map(Quantity::value).unwrap_or(0);
            let reserved = (units as f64 * f64::from(*fraction)) as i64;
            Quantity::from_units(i128::from(reserved), Format::BinarySI)
        }
    }
}

/// Upstream `hardEvictionReservation`: only `memory.available` and `nodefs.available`
/// reserve capacity.
fn hard_eviction_reservation(
    thresholds: &BTreeMap<String, ThresholdValue>,
    capacity: &BTreeMap<String, Quantity>,
) -> BTreeMap<&'static str, Quantity> {
    let mut reserved = BTreeMap::new();
    for (signal, resource) in [
        ("memory.available", RESOURCE_MEMORY),
        ("nodefs.available", RESOURCE_EPHEMERAL_STORAGE),
    ] {
        if let Some(value) = thresholds.get(signal) {
            reserved.insert(resource, threshold_quantity(value, capacity.get(resource)));
        }
    }
    reserved
}

fn check_reservations(
    field: &'static str,
    reserved: &BTreeMap<String, Quantity>,
) -> Result<(), AllocatableError> {
    for (resource, quantity) in reserved {
        if ![
            RESOURCE_CPU,
            RESOURCE_MEMORY,
            RESOURCE_EPHEMERAL_STORAGE,
            RESOURCE_PID,
        ]
        .contains(&resource.as_str())
        {
            return Err(AllocatableError::UnsupportedReservation {
                field,
                resource: resource.clone(),
            });
        }
        if quantity.is_negative() {
            return Err(AllocatableError::NegativeReservation {
                field,
                resource: resource.clone(),
                value: quantity.as_str().to_string(),
            });
        }
    }
    Ok(())
}

/// Upstream `Quantity.Add` onto a zero `DecimalSI` quantity keeps the format of the first
/// non-zero addend; that is the format the kubelet prints a reservation in.
fn sum_format(parts: &[&Quantity]) -> Format {
    parts
        .iter()
        .find(|q| !q.is_zero())
        .map(|q| q.format())
        .unwrap_or(Format::DecimalSI)
}

/// Computes node allocatable as the kubelet does (`GetNodeAllocatableReservation` and the
/// node status setter), and refuses what the kubelet refuses at start: unsupported or
/// negative reservations, malformed hard eviction thresholds, and reservations that exceed
/// capacity (`validateNodeAllocatable`).
pub fn node_allocatable(input: &AllocatableInput) -> Result<Allocatable, AllocatableError> {
    check_reservations("systemReserved", &input.system_reserved)?;
    check_reservations("kubeReserved", &input.kube_reserved)?;
    let mut thresholds = BTreeMap::new();
    for (signal, value) in &input.eviction_hard {
        if let Some(parsed) = parse_threshold(signal, value)? {
            thresholds.insert(signal.clone(), parsed);
        }
    }
    let eviction = if input.ignore_eviction_threshold {
        BTreeMap::new()
    } else {
        hard_eviction_reservation(&thresholds, &input.capacity)
    };

    let mut resources = BTreeMap::new();
    let mut overcommits = Vec::new();
    for (name, capacity) in &input.capacity {
        let format = format_for(name);
        let zero = Quantity::from_units(0, format);
        let system = input.system_reserved.get(name).unwrap_or(&zero);
        let kube = input.kube_reserved.get(name).unwrap_or(&zero);
        let evict = eviction.get(name.as_str()).unwrap_or(&zero);
        let reserved_nanos = system
            .nanos()
            .saturating_add(kube.nanos())
            .saturating_add(evict.nanos());
        let remaining = capacity.nanos().saturating_sub(reserved_nanos);
        if remaining < 0 {
            overcommits.push(Overcommit {
                resource: name.clone(),
                capacity: capacity.canonical(),
                reservation: Quantity::from_nanos(
                    reserved_nanos,
                    sum_format(&[system, kube, evict]),
                )
                .canonical(),
                system_reserved: system.canonical(),
                kube_reserved: kube.canonical(),
                hard_eviction: evict.canonical(),
            });
        }
        let without_eviction = capacity
            .nanos()
            .saturating_sub(system.nanos())
            .saturating_sub(kube.nanos())
            .max(0);
        resources.insert(
            name.clone(),
            ResourceAllocatable {
                capacity: capacity.clone(),
                system_reserved: system.clone(),
                kube_reserved: kube.clone(),
                hard_eviction: evict.clone(),
                allocatable: Quantity::from_nanos(remaining.max(0), format),
                without_eviction: Quantity::from_nanos(without_eviction, format),
            },
        );
    }
    if !overcommits.is_empty() {
        return Err(AllocatableError::ExceedsCapacity(overcommits));
    }

    // The node status setter takes every huge page capacity out of allocatable memory.
    let huge_pages = input
        .capacity
        .iter()
        .filter(|(name, _)| name.starts_with(HUGEPAGES_PREFIX))
        .fold(0i128, |sum, (_, q)| sum.saturating_add(q.nanos()));
    if huge_pages != 0
        && let Some(memory) = resources.get_mut(RESOURCE_MEMORY)
    {
        let left = memory.allocatable.nanos().saturating_sub(huge_pages).max(0);
        memory.allocatable = Quantity::from_nanos(left, Format::BinarySI);
    }
    Ok(Allocatable { resources })
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

    const GI: i128 = 1 << 30;
    const MI: i128 = 1 << 20;
    const NANO: i128 = 1_000_000_000;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).expect("test quantity")
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        pairs.iter().map(|(k, v)| (k.to_string(), q(v))).collect()
    }

    fn strings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn bytes(q: &Quantity) -> i128 {
        q.nanos() / NANO
    }

    /// The "Example Scenario" of the Kubernetes docs page "Reserve Compute Resources for
    /// System Daemons" (kubernetes/website content/en/docs/tasks/administer-cluster/
    /// reserve-compute-resources.md).
    fn docs_example() -> AllocatableInput {
        AllocatableInput {
            capacity: map(&[
                ("cpu", "16"),
                ("memory", "32Gi"),
                ("ephemeral-storage", "100Gi"),
                ("pods", "110"),
                ("pid", "4194304"),
            ]),
            kube_reserved: map(&[
                ("cpu", "1"),
                ("memory", "2Gi"),
                ("ephemeral-storage", "1Gi"),
            ]),
            system_reserved: map(&[
                ("cpu", "500m"),
                ("memory", "1Gi"),
                ("ephemeral-storage", "1Gi"),
            ]),
            eviction_hard: strings(&[("memory.available", "500Mi"), ("nodefs.available", "10%")]),
            enforce_node_allocatable: vec!["pods".into()],
            cgroups_per_qos: true,
            cgroup_driver: "cgroupfs".into(),
            cgroup_root: "/".into(),
            ..Default::default()
        }
    }

    #[test]
    fn docs_example_allocatable() {
        let alloc = node_allocatable(&docs_example()).unwrap();
        // "Allocatable will be 14.5 CPUs, 28.5Gi of memory and 88Gi of local storage."
        let cpu = alloc.get("cpu").unwrap();
        assert_eq!(cpu, &q("14.5"));
        assert_eq!(cpu.canonical(), "14500m");
        // The docs round memory too: 32Gi - 2Gi - 1Gi - 500Mi is 29196Mi, 12Mi over 28.5Gi
        // (500Mi is not half a Gi).
        let memory = alloc.get("memory").unwrap();
        assert_eq!(bytes(memory), 32 * GI - 3 * GI - 500 * MI);
        assert_eq!(memory.canonical(), "29196Mi");
        assert_eq!(bytes(memory) - bytes(&q("28.5Gi")), 12 * MI);
        // And storage: `10%` is a float32 (0.100000001490116...), so the kubelet reserves
        // 10737418400 bytes, 160 more than 10Gi, and publishes 88Gi - 160 bytes.
        let storage = alloc.get("ephemeral-storage").unwrap();
        assert_eq!(bytes(storage), 88 * GI - 160);
        let r = &alloc.resources["ephemeral-storage"];
        assert_eq!(bytes(&r.hard_eviction), 10_737_418_400);
        assert_eq!(alloc.resources["memory"].hard_eviction, q("500Mi"));
        assert!(alloc.resources["cpu"].hard_eviction.is_zero());
        // pods is never reserved; pid is not published in the node status.
        assert_eq!(alloc.get("pods"), Some(&q("110")));
        let status = alloc.node_status();
        assert!(status.contains_key("pods") && !status.contains_key("pid"));
    }

    #[test]
    fn docs_example_eviction_only() {
        // "kubelet evicts pods whenever the overall node memory usage is higher than
        // 31.5Gi or storage is greater than 90Gi": capacity minus the eviction thresholds.
        let mut input = docs_example();
        input.kube_reserved.clear();
        input.system_reserved.clear();
        let alloc = node_allocatable(&input).unwrap();
        // Exactly: 32Gi - 500Mi = 32268Mi (docs: 31.5Gi), 100Gi - 10737418400 (docs: 90Gi).
        assert_eq!(alloc.get("memory"), Some(&q("32268Mi")));
        assert_eq!(
            bytes(alloc.get("ephemeral-storage").unwrap()),
            90 * GI - 160
        );
        assert_eq!(alloc.get("cpu"), Some(&q("16")));
    }

    #[test]
    fn percentages_are_float32_like_upstream() {
        let mut input = docs_example();
        input.eviction_hard = strings(&[("memory.available", "5%")]);
        let alloc = node_allocatable(&input).unwrap();
        // float32(5)/100 = 13421773 / 2^28; 2^35 * that = 1717986944 (exactly: 1717986918.4).
        assert_eq!(
            bytes(&alloc.resources["memory"].hard_eviction),
            1_717_986_944
        );
        // No nodefs threshold: storage loses only the reservations.
        assert_eq!(alloc.get("ephemeral-storage"), Some(&q("98Gi")));
    }

    #[test]
    fn only_memory_and_nodefs_signals_reserve() {
        let mut input = docs_example();
        input.eviction_hard = strings(&[
            ("imagefs.available", "15%"),
            ("nodefs.inodesFree", "5%"),
            ("pid.available", "1000"),
            ("allocatableMemory.available", "1Gi"),
        ]);
        let alloc = node_allocatable(&input).unwrap();
        assert_eq!(alloc.get("memory"), Some(&q("29Gi")));
        assert_eq!(alloc.get("ephemeral-storage"), Some(&q("98Gi")));
        assert_eq!(alloc.get("pid"), Some(&q("4194304")));
    }

    #[test]
    fn zero_and_hundred_percent_are_ignored_as_written() {
        let mut input = docs_example();
        input.eviction_hard = strings(&[("memory.available", "100%"), ("nodefs.available", "0%")]);
        let alloc = node_allocatable(&input).unwrap();
        assert_eq!(alloc.get("memory"), Some(&q("29Gi")));
        // "100.0%" is not the literal "100%": it reserves the whole capacity.
        input.eviction_hard = strings(&[("memory.available", "100.0%")]);
        let err = node_allocatable(&input).unwrap_err();
        assert!(matches!(err, AllocatableError::ExceedsCapacity(_)), "{err}");
    }

    #[test]
    fn ignore_eviction_threshold_still_validates() {
        let mut input = docs_example();
        input.ignore_eviction_threshold = true;
        let alloc = node_allocatable(&input).unwrap();
        assert_eq!(alloc.get("memory"), Some(&q("29Gi")));
        assert_eq!(alloc.get("ephemeral-storage"), Some(&q("98Gi")));
        input.eviction_hard = strings(&[("memory.available", "101%")]);
        assert!(node_allocatable(&input).is_err());
    }

    #[test]
    fn malformed_thresholds_are_errors() {
        let cases: &[(&str, &str, &str)] = &[
            ("memory.available", "110%", "must be <= 100%"),
            ("memory.available", "-5%", "must be >= 0%"),
            ("memory.available", "ten%", "not a number"),
            ("memory.available", "NaN%", "not a number"),
            ("memory.available", "%", "not a number"),
            ("memory.available", "0", "must be positive"),
            ("memory.available", "-1Gi", "must be positive"),
            ("memory.available", "lots", "invalid quantity"),
            ("memory.free", "1Gi", "unsupported eviction signal"),
        ];
        for (signal, value, expected) in cases {
            let mut input = docs_example();
            input.eviction_hard = strings(&[(signal, value)]);
            let err = node_allocatable(&input).unwrap_err();
            let msg = err.to_string();
            assert!(msg.contains(expected), "{signal}={value}: {msg}");
            assert!(msg.contains(signal), "{msg} names the signal");
        }
        // Go's TrimRight strips every trailing %.
        let mut input = docs_example();
        input.eviction_hard = strings(&[("nodefs.available", "10%%")]);
        let alloc = node_allocatable(&input).unwrap();
        assert_eq!(
            bytes(&alloc.resources["ephemeral-storage"].hard_eviction),
            10_737_418_400
        );
    }

    #[test]
    fn reservations_beyond_capacity_are_refused_with_the_figures() {
        let input = AllocatableInput {
            capacity: map(&[("cpu", "2"), ("memory", "4Gi")]),
            system_reserved: map(&[("cpu", "1500m"), ("memory", "2Gi")]),
            kube_reserved: map(&[("cpu", "1"), ("memory", "2Gi")]),
            eviction_hard: strings(&[("memory.available", "100Mi")]),
            ..Default::default()
        };
        let err = node_allocatable(&input).unwrap_err();
        let AllocatableError::ExceedsCapacity(items) = &err else {
            panic!("{err}");
        };
        assert_eq!(items.len(), 2);
        let msg = err.to_string();
        assert!(
            msg.starts_with("invalid Node Allocatable configuration. "),
            "{msg}"
        );
        assert!(
            msg.contains(
                "Resource \"cpu\" has a reservation of 2500m (systemReserved 1500m + kubeReserved 1 + evictionHard 0) but capacity of 2. Expected capacity >= reservation."
            ),
            "{msg}"
        );
        assert!(
            msg.contains("Resource \"memory\" has a reservation of 4196Mi"),
            "{msg}"
        );
        assert!(msg.contains("but capacity of 4Gi"), "{msg}");
    }

    #[test]
    fn reservation_equal_to_capacity_is_allowed_and_leaves_zero() {
        let input = AllocatableInput {
            capacity: map(&[("memory", "4Gi"), ("cpu", "2")]),
            system_reserved: map(&[("memory", "2Gi")]),
            kube_reserved: map(&[("memory", "2Gi")]),
            enforce_node_allocatable: vec!["pods".into()],
            cgroups_per_qos: true,
            ..Default::default()
        };
        let alloc = node_allocatable(&input).unwrap();
        assert!(alloc.get("memory").unwrap().is_zero());
        // A zero memory limit is "unset" to libcontainer: the kubelet writes none.
        let layout = cgroup_layout(&input, &alloc, CgroupVersion::V2).unwrap();
        let pods = layout.pods.unwrap();
        assert_eq!(pods.limit("memory.max"), None);
        assert_eq!(pods.limit("cpu.weight"), Some("79"));
    }

    #[test]
    fn pid_overcommit_is_refused() {
        let input = AllocatableInput {
            capacity: map(&[("pid", "1000")]),
            system_reserved: map(&[("pid", "600")]),
            kube_reserved: map(&[("pid", "600")]),
            ..Default::default()
        };
        let msg = node_allocatable(&input).unwrap_err().to_string();
        assert!(
            msg.contains("Resource \"pid\" has a reservation of 1200"),
            "{msg}"
        );
    }

    #[test]
    fn unsupported_and_negative_reservations() {
        let mut input = docs_example();
        input.kube_reserved.insert("pods".into(), q("10"));
        let err = node_allocatable(&input).unwrap_err();
        assert!(
            err.to_string()
                .contains("kubeReserved: cannot reserve \"pods\""),
            "{err}"
        );
        let mut input = docs_example();
        input
            .system_reserved
            .insert("nvidia.com/gpu".into(), q("1"));
        assert!(matches!(
            node_allocatable(&input),
            Err(AllocatableError::UnsupportedReservation {
                field: "systemReserved",
                ..
            })
        ));
        let mut input = docs_example();
        input.system_reserved.insert("cpu".into(), q("-1"));
        let msg = node_allocatable(&input).unwrap_err().to_string();
        assert_eq!(
            msg,
            "systemReserved: resource quantity for \"cpu\" cannot be negative: -1"
        );
    }

    #[test]
    fn huge_pages_leave_allocatable_memory() {
        let mut input = docs_example();
        input.capacity.insert("hugepages-2Mi".into(), q("1Gi"));
        input.capacity.insert("hugepages-1Gi".into(), q("2Gi"));
        let alloc = node_allocatable(&input).unwrap();
        assert_eq!(alloc.get("memory"), Some(&q("26124Mi")), "29196Mi - 3Gi");
        assert_eq!(alloc.get("hugepages-2Mi"), Some(&q("1Gi")));
        // The pods cgroup keeps the memory limit without that subtraction, plus hugetlb.
        let layout = cgroup_layout(&input, &alloc, CgroupVersion::V1).unwrap();
        let pods = layout.pods.unwrap();
        assert_eq!(pods.limit("memory.limit_in_bytes"), Some("31138512896"));
        assert_eq!(pods.limit("hugetlb.2MB.limit_in_bytes"), Some("1073741824"));
        assert_eq!(pods.limit("hugetlb.1GB.limit_in_bytes"), Some("2147483648"));
        let v2 = cgroup_layout(&input, &alloc, CgroupVersion::V2).unwrap();
        assert_eq!(
            v2.pods.unwrap().limit("hugetlb.2MB.max"),
            Some("1073741824")
        );
    }

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

    #[test]
    fn from_config_reads_the_effective_config() {
        let mut cfg = crate::defaults::defaults();
        cfg.system_reserved = Some(BTreeMap::from([
            ("cpu".into(), "500m".into()),
            ("memory".into(), "1Gi".into()),
        ]));
        cfg.kube_reserved = Some(BTreeMap::from([("cpu".into(), "1".into())]));
        let cap = BTreeMap::from([
            ("cpu".to_string(), Quantity::parse("8").unwrap()),
            ("memory".to_string(), Quantity::parse("32Gi").unwrap()),
        ]);
        let input = AllocatableInput::from_config(&cfg, cap.clone()).unwrap();
        assert_eq!(input.enforce_node_allocatable, ["pods"]);
        let alloc = node_allocatable(&input).unwrap();
        assert_eq!(alloc.get("cpu").unwrap().milli_value(), 6500);
        // memory: 32Gi - 1Gi - the default memory.available 100Mi
        assert_eq!(
            alloc.get("memory").unwrap().value(),
            (31i128 << 30) - (100 << 20)
        );

        cfg.reserved_system_cpus = Some("0-1,4".into());
        let input = AllocatableInput::from_config(&cfg, cap.clone()).unwrap();
        assert_eq!(input.system_reserved["cpu"].value(), 3);
        assert!(!input.kube_reserved.contains_key("cpu"));

        cfg.system_reserved = Some(BTreeMap::from([("memory".into(), "lots".into())]));
        let err = AllocatableInput::from_config(&cfg, cap).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("systemReserved: invalid quantity \"lots\""),
            "{err}"
        );
    }
}
