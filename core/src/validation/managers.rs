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

/// `cm.NewContainerManager`: the CPU manager's policy (`none` takes no options; `static`
/// needs some CPU reserved: `reserved_cpu_nanos` above zero, else the node allocatable
/// reservation has no cpu at all), and the memory manager's.
pub(super) fn check_policies(
    c: &KubeletConfiguration,
    reserved_cpu_nanos: i128,
    out: &mut Vec<ValidationError>,
) {
    match c.cpu_manager_policy.as_deref().unwrap_or("") {
        "none" => {
            // NewNonePolicy; Go prints the map with its keys sorted.
            let options = c
                .cpu_manager_policy_options
                .as_ref()
                .filter(|o| !o.is_empty());
            if let Some(options) = options {
                let printed: Vec<String> =
                    options.iter().map(|(k, v)| format!("{k}:{v}")).collect();
                out.push(err(
                    "cpuManagerPolicyOptions",
                    format!(
                        "new none policy error: None policy: received unsupported options=map[{}]",
                        printed.join(" ")
                    ),
                ));
            }
        }
        "static" => {
            // GetNodeAllocatableReservation leaves out a zero cpu, so the manager's
            // "requires ... greater than zero" cannot be reached: this is what it says.
            if reserved_cpu_nanos <= 0 {
                out.push(err(
                    "cpuManagerPolicy",
                    "[cpumanager] unable to determine reserved CPU resources for static policy",
                ));
            }
        }
        other => out.push(err(
            "cpuManagerPolicy",
            format!("unknown policy: \"{other}\""),
        )),
    }
    match c.memory_manager_policy.as_deref().unwrap_or("") {
        "None" | "Static" => {}
        // memorymanager.NewManager: a policy of Windows only.
        "BestEffort" => out.push(err(
            "memoryManagerPolicy",
            "policy \"BestEffort\" is not available for platform \"linux\"",
        )),
        other => out.push(err(
            "memoryManagerPolicy",
            format!("unknown policy: {}", go::quote(other)),
        )),
    }
}

/// `topologymanager.NewManager` (in `cm.NewContainerManager`): for a policy other than
/// `none`, `NewPolicyOptions` reads `topologyManagerPolicyOptions` (each option known, its
/// value of the right form). Go walks the map in random order and stops at the first
/// problem; this reports each.
pub(super) fn check_topology_options(c: &KubeletConfiguration, out: &mut Vec<ValidationError>) {
    if c.topology_manager_policy.as_deref().unwrap_or("") == "none" {
        return;
    }
    for (name, value) in c.topology_manager_policy_options.iter().flatten() {
        let problem = match name.as_str() {
            "prefer-closest-numa-nodes" => go::parse_bool(value)
                .err()
                .map(|e| format!("bad value for option {}: {e}", go::quote(name))),
            "max-allowable-numa-nodes" => match go::atoi(value) {
                Err(e) => Some(format!(
                    "unable to convert policy option to integer {}: {e}",
                    go::quote(name)
                )),
                Ok(n) if n < 8 => Some(format!(
                    "the minimum value of {} should not be less than 8",
                    go::quote(name)
                )),
                Ok(_) => None,
            },
            _ => Some(format!(
                "unknown Topology Manager Policy option: {}",
                go::quote(name)
            )),
        };
        if let Some(p) = problem {
            out.push(err(format!("topologyManagerPolicyOptions.{name}"), p));
        }
    }
}
