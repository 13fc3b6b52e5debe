//! What is reserved for the system and the kubelet, and how: `enforceNodeAllocatable`,
//! `reservedSystemCPUs`, `kubeReserved`, `systemReserved` and `qosReserved`.

use std::collections::{BTreeMap, HashSet};

use crate::cpuset;
use crate::go;
use crate::quantity::Quantity;
use crate::types::KubeletConfiguration;

use super::{ValidationError, err};

/// `enforceNodeAllocatable` and the settings its keys need (`ValidateKubeletConfiguration`).
pub(super) fn check_enforce_node_allocatable(
    c: &KubeletConfiguration,
    out: &mut Vec<ValidationError>,
) {
    const FIELD: &str = "enforceNodeAllocatable";
    let list = c.enforce_node_allocatable.as_deref().unwrap_or(&[]);
    let has = |key: &str| list.iter().any(|v| v == key);
    if has("system-reserved") && has("system-reserved-compressible") {
        out.push(err(
            FIELD,
            "invalid configuration: both \"system-reserved\" and \"system-reserved-compressible\" cannot be specified together in enforceNodeAllocatable (--enforce-node-allocatable)",
        ));
    }
    if has("kube-reserved") && has("kube-reserved-compressible") {
        out.push(err(
            FIELD,
            "invalid configuration: both \"kube-reserved\" and \"kube-reserved-compressible\" cannot be specified together in enforceNodeAllocatable (--enforce-node-allocatable)",
        ));
    }
    let cgroups_per_qos = c.cgroups_per_qos.unwrap_or(false);
    let system_cgroup = c.system_reserved_cgroup.as_deref().unwrap_or("");
    let kube_cgroup = c.kube_reserved_cgroup.as_deref().unwrap_or("");
    let mut seen = HashSet::with_capacity(list.len());
    for (i, val) in list.iter().enumerate() {
        if !seen.insert(val.as_str()) {
            out.push(err(
                format!("{FIELD}[{i}]"),
                format!("invalid configuration: duplicated enforcements {} in enforceNodeAllocatable (--enforce-node-allocatable)", go::quote(val)),
            ));
            continue;
        }
        match val.as_str() {
            "pods" => {}
            "system-reserved" | "system-reserved-compressible" => {
                if system_cgroup.is_empty() {
                    out.push(err(
                        "systemReservedCgroup",
                        "invalid configuration: systemReservedCgroup (--system-reserved-cgroup) must be specified when \"system-reserved\" or \"system-reserved-compressible\" included in enforceNodeAllocatable (--enforce-node-allocatable)",
                    ));
                }
            }
            "kube-reserved" | "kube-reserved-compressible" => {
                if kube_cgroup.is_empty() {
                    out.push(err(
                        "kubeReservedCgroup",
                        "invalid configuration: kubeReservedCgroup (--kube-reserved-cgroup) must be specified when \"kube-reserved\" or \"kube-reserved-compressible\" included in enforceNodeAllocatable (--enforce-node-allocatable)",
                    ));
                }
            }
            "none" => {
                if list.len() > 1 {
                    out.push(err(
                        FIELD,
                        "invalid configuration: enforceNodeAllocatable (--enforce-node-allocatable) may not contain additional enforcements when \"none\" is specified",
                    ));
                }
                continue;
            }
            other => {
                out.push(err(
                    format!("{FIELD}[{i}]"),
                    format!(
                        "invalid configuration: option {} specified for enforceNodeAllocatable (--enforce-node-allocatable). Valid options are \"pods\", \"system-reserved\", \"system-reserved-compressible\", \"kube-reserved\", \"kube-reserved-compressible\" or \"none\"",
                        go::quote(other)
                    ),
                ));
                continue;
            }
        }
        if !cgroups_per_qos {
            out.push(err(
                "cgroupsPerQOS",
                format!("invalid configuration: cgroupsPerQOS (--cgroups-per-qos) must be set to true when {} contained in enforceNodeAllocatable (--enforce-node-allocatable)", go::quote(val)),
            ));
        }
    }
}

/// `reservedSystemCPUs` (`ValidateKubeletConfiguration`).
pub(super) fn check_reserved_system_cpus(c: &KubeletConfiguration, out: &mut Vec<ValidationError>) {
    let reserved_cpus = c.reserved_system_cpus.as_deref().unwrap_or("");
    if !reserved_cpus.is_empty() {
        if !c.system_reserved_cgroup.as_deref().unwrap_or("").is_empty()
            || !c.kube_reserved_cgroup.as_deref().unwrap_or("").is_empty()
        {
            out.push(err(
                "reservedSystemCPUs",
                "invalid configuration: can't use reservedSystemCPUs (--reserved-cpus) with systemReservedCgroup (--system-reserved-cgroup) or kubeReservedCgroup (--kube-reserved-cgroup)",
            ));
        }
        if let Err(e) = cpuset::count(reserved_cpus) {
            out.push(err(
                "reservedSystemCPUs",
                format!("invalid configuration: unable to parse reservedSystemCPUs (--reserved-cpus) {reserved_cpus}, error: {e}"),
            ));
        }
    }
}

/// `kubeReserved` and `systemReserved` as `run()` parses them, after
/// `reservedSystemCPUs` replaced their cpu. Returns the CPU they reserve in millicores as
/// the CPU manager sees it: in nanocores, the sum `GetNodeAllocatableReservation` makes
/// (some positive amount when `reservedSystemCPUs` names CPUs).
pub(super) fn check_reserved_resources(
    c: &KubeletConfiguration,
    out: &mut Vec<ValidationError>,
) -> i128 {
    let reserved_cpus = match c.reserved_system_cpus.as_deref() {
        Some(s) if !s.is_empty() => cpuset::count(s).ok(),
        _ => None,
    };
    let cpus_override = reserved_cpus.is_some_and(|n| n > 0);
    let kube_cpu = check_reserved(
        c.kube_reserved.as_ref(),
        "kubeReserved",
        "--kube-reserved",
        cpus_override,
        out,
    );
    let system_cpu = check_reserved(
        c.system_reserved.as_ref(),
        "systemReserved",
        "--system-reserved",
        cpus_override,
        out,
    );
    if cpus_override {
        1
    } else {
        kube_cpu.saturating_add(system_cpu)
    }
}

/// `parseResourceList` on `kubeReserved` or `systemReserved`; returns the reserved CPU in
/// nanocores (0 when absent or invalid).
fn check_reserved(
    map: Option<&BTreeMap<String, String>>,
    field: &str,
    flag: &str,
    cpus_override: bool,
    out: &mut Vec<ValidationError>,
) -> i128 {
    let mut cpu_nanos = 0;
    for (k, v) in map.into_iter().flatten() {
        if cpus_override && k == "cpu" {
            // Replaced (systemReserved) or removed (kubeReserved) by reservedSystemCPUs.
            continue;
        }
        let problem = match k.as_str() {
            "cpu" | "memory" | "ephemeral-storage" | "pid" => match Quantity::parse(v) {
                Err(e) => Some(format!(
                    "failed to parse quantity {} for {} resource: {e}",
                    go::quote(v),
                    go::quote(k)
                )),
                Ok(q) if q.is_negative() => Some(format!(
                    "resource quantity for {} cannot be negative: {v}",
                    go::quote(k)
                )),
                Ok(q) => {
                    if k == "cpu" {
                        cpu_nanos = q.nanos();
                    }
                    None
                }
            },
            _ => Some(format!("cannot reserve {} resource", go::quote(k))),
        };
        if let Some(p) = problem {
            out.push(err(
                format!("{field}.{k}"),
                format!("{flag} value failed to parse: {p}"),
            ));
        }
    }
    cpu_nanos
}

/// `cm.ParseQOSReserved`.
pub(super) fn check_qos_reserved(c: &KubeletConfiguration, out: &mut Vec<ValidationError>) {
    for (k, v) in c.qos_reserved.iter().flatten() {
        let problem = if k == "memory" {
            let p = if !v.ends_with('%') {
                Some(format!("percentage expected, got '{v}'"))
            } else {
                match v.trim_end_matches('%').parse::<i64>() {
                    Err(_) => Some(format!("invalid number in percentage '{v}'")),
                    Ok(n) if !(0..=100).contains(&n) => {
                        Some("percentage must be between 0 and 100".to_string())
                    }
                    Ok(_) => None,
                }
            };
            p.map(|p| {
                format!(
                    "failed to parse percentage {} for {} resource: {p}",
                    go::quote(v),
                    go::quote(k)
                )
            })
        } else {
            Some(format!("cannot reserve {} resource", go::quote(k)))
        };
        if let Some(p) = problem {
            out.push(err(
                format!("qosReserved.{k}"),
                format!("--qos-reserved value failed to parse: {p}"),
            ));
        }
    }
}
