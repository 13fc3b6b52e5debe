//! The topology, CPU and memory managers' policies.

use crate::go;
use crate::types::KubeletConfiguration;

use super::{ValidationError, err};

/// `topologyManagerPolicy` and `topologyManagerScope` (`ValidateKubeletConfiguration`).
pub(super) fn check_topology(c: &KubeletConfiguration, out: &mut Vec<ValidationError>) {
    let tm_policy = c.topology_manager_policy.as_deref().unwrap_or("");
    if !matches!(
        tm_policy,
        "none" | "best-effort" | "restricted" | "single-numa-node"
    ) {
        out.push(err(
            "topologyManagerPolicy",
            format!(
                "invalid configuration: topologyManagerPolicy (--topology-manager-policy) {} must be one of: [\"none\" \"best-effort\" \"restricted\" \"single-numa-node\"]",
                go::quote(tm_policy)
            ),
        ));
    }
    let tm_scope = c.topology_manager_scope.as_deref().unwrap_or("");
    if !matches!(tm_scope, "container" | "pod") {
        out.push(err(
            "topologyManagerScope",
            format!(
                "invalid configuration: topologyManagerScope (--topology-manager-scope) {} must be one of: \"container\", or \"pod\"",
                go::quote(tm_scope)
            ),
        ));
    }
}

/// `cm.NewContainerManager`: the CPU manager's policy, whose `static` form needs
/// `reserved_cpu_milli` above zero, and the memory manager's.
pub(super) fn check_policies(
    c: &KubeletConfiguration,
    reserved_cpu_milli: i128,
    out: &mut Vec<ValidationError>,
) {
    match c.cpu_manager_policy.as_deref().unwrap_or("") {
        "none" => {}
        "static" => {
            if reserved_cpu_milli <= 0 {
                out.push(err(
                    "cpuManagerPolicy",
                    "[cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero",
                ));
            }
        }
        other => out.push(err(
            "cpuManagerPolicy",
            format!("unknown policy: \"{other}\""),
        )),
    }
    let memory_policy = c.memory_manager_policy.as_deref().unwrap_or("");
    if !matches!(memory_policy, "None" | "Static") {
        out.push(err(
            "memoryManagerPolicy",
            format!("unknown policy: \"{memory_policy}\""),
        ));
    }
}
