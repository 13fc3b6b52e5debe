//! Node allocatable, computed exactly as the kubelet computes it, and the cgroups the
//! kubelet limits with it ([`cgroup_layout`]).
//!
//! Upstream, read at kubernetes/kubernetes master (2025-2026, the `klog.Logger` era):
//! `pkg/kubelet/cm/node_container_manager_linux.go` (`getNodeAllocatableAbsoluteImpl`,
//! `GetNodeAllocatableReservation`, `validateNodeAllocatable`), `pkg/kubelet/cm/helpers.go`
//! (`hardEvictionReservation`), `pkg/kubelet/eviction/api/types.go` at
//! b547a95d14430b903f638946ca291778632f8726 (`GetThresholdQuantity`),
//! `pkg/kubelet/nodestatus/setters.go` (`MachineInfo`: huge pages leave allocatable memory)
//! and `cmd/kubelet/app/server.go` (`parseResourceList`).
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

use crate::cpuset;
use crate::eviction::{self, ThresholdError, ThresholdValue};
use crate::quantity::{Format, Quantity, QuantityError};

mod cgroups;

pub use cgroups::{
    CgroupLayout, CgroupLimit, CgroupSpec, CgroupVersion, ENFORCE_KUBE_RESERVED,
    ENFORCE_KUBE_RESERVED_COMPRESSIBLE, ENFORCE_PODS, ENFORCE_SYSTEM_RESERVED,
    ENFORCE_SYSTEM_RESERVED_COMPRESSIBLE, NODE_ALLOCATABLE_CGROUP, QosCgroups, cgroup_layout,
    cpu_shares_to_weight, milli_cpu_to_shares,
};

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

/// What the kubelet needs to know to compute allocatable and its cgroups.
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
            .and_then(|s| cpuset::count(s).ok())
        {
            let cpus = i128::try_from(cpus).unwrap_or(i128::MAX);
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

/// `parseThresholdStatement` for one `evictionHard` entry, with this module's errors:
/// unlike the kubelet, a `NaN%` threshold is refused ("not a number").
fn parse_threshold(signal: &str, value: &str) -> Result<Option<ThresholdValue>, AllocatableError> {
    let invalid = |reason: &str| AllocatableError::InvalidPercentage {
        signal: signal.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    };
    const NOT_A_NUMBER: &str = "not a number";
    const BELOW_ZERO: &str = "eviction percentage threshold must be >= 0%";
    const ABOVE_HUNDRED: &str = "eviction percentage threshold must be <= 100%";
    match eviction::parse_threshold(signal, value) {
        Ok(Some(ThresholdValue::Percentage(p))) if p.is_nan() => Err(invalid(NOT_A_NUMBER)),
        Ok(threshold) => Ok(threshold),
        Err(ThresholdError::UnsupportedSignal { .. }) => Err(AllocatableError::UnsupportedSignal {
            signal: signal.to_string(),
        }),
        // A number beyond `float32` is ±Inf, out of the percentage's range.
        Err(ThresholdError::Number(e)) if e.returned == f32::INFINITY => {
            Err(invalid(ABOVE_HUNDRED))
        }
        Err(ThresholdError::Number(e)) if e.returned == f32::NEG_INFINITY => {
            Err(invalid(BELOW_ZERO))
        }
        Err(ThresholdError::Number(_)) => Err(invalid(NOT_A_NUMBER)),
        Err(ThresholdError::BelowZero { .. }) => Err(invalid(BELOW_ZERO)),
        Err(ThresholdError::AboveHundred { .. }) => Err(invalid(ABOVE_HUNDRED)),
        Err(ThresholdError::Quantity(source)) => Err(AllocatableError::InvalidQuantity {
            signal: signal.to_string(),
            value: value.to_string(),
            source,
        }),
        Err(ThresholdError::NotPositive { canonical, .. }) => {
            Err(AllocatableError::NonPositiveThreshold {
                signal: signal.to_string(),
                value: canonical,
            })
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) const GI: i128 = 1 << 30;
    pub(super) const MI: i128 = 1 << 20;
    const NANO: i128 = 1_000_000_000;

    pub(super) fn q(s: &str) -> Quantity {
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
    pub(super) fn docs_example() -> AllocatableInput {
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
