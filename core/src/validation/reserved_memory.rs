//! `reservedMemory`: the memory manager's per-NUMA-node reservations
//! (`validateReservedMemoryConfiguration`, `validation_reserved_memory.go`).

use std::collections::HashSet;

use crate::go;
use crate::types::MemoryReservation;

use super::{ValidationError, err};

/// Every limit must be `memory` or `hugepages-<size>`, non-zero, and appear once per NUMA
/// node across all entries.
pub(super) fn validate(reservations: &[MemoryReservation], out: &mut Vec<ValidationError>) {
    // (NUMA node, resource) of the reservations before the current one.
    let mut seen: HashSet<(i32, &str)> = HashSet::new();
    for (i, r) in reservations.iter().enumerate() {
        let node = r.numa_node;
        for (name, q) in &r.limits {
            let field = || format!("reservedMemory[{i}].limits.{name}");
            if name != "memory" && !name.starts_with("hugepages-") {
                out.push(err(
                    field(),
                    format!(
                        "invalid configuration: the limit type {} for NUMA node {node} is not supported, only [memory hugepages-<HugePageSize>] is accepted",
                        go::quote(name)
                    ),
                ));
            }
            if q.is_zero() {
                out.push(err(
                    field(),
                    format!(
                        "invalid configuration: reserved memory may not be zero for NUMA node {node} and resource {}",
                        go::quote(name)
                    ),
                ));
            }
            if seen.contains(&(node, name.as_str())) {
                out.push(err(
                    field(),
                    format!(
                        "invalid configuration: the reserved memory has a duplicate value for NUMA node {node} and resource {}",
                        go::quote(name)
                    ),
                ));
            }
        }
        seen.extend(r.limits.keys().map(|name| (node, name.as_str())));
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::quantity::Quantity;

    fn reservation(node: i32, limits: &[(&str, &str)]) -> MemoryReservation {
        MemoryReservation {
            numa_node: node,
            limits: limits
                .iter()
                .map(|(k, v)| ((*k).to_string(), Quantity::parse(v).unwrap()))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    fn run(rs: &[MemoryReservation]) -> Vec<ValidationError> {
        let mut out = Vec::new();
        validate(rs, &mut out);
        out
    }

    #[test]
    fn valid_reservations_pass() {
        let rs = [
            reservation(0, &[("memory", "1Gi"), ("hugepages-2Mi", "2Mi")]),
            reservation(1, &[("memory", "1Gi")]),
        ];
        assert_eq!(run(&rs), vec![]);
        assert_eq!(run(&[]), vec![]);
    }

    #[test]
    fn unsupported_limit_type() {
        let errs = run(&[reservation(0, &[("cpu", "1")])]);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].field, "reservedMemory[0].limits.cpu");
        assert!(errs[0].message.contains("the limit type \"cpu\" for NUMA node 0 is not supported, only [memory hugepages-<HugePageSize>] is accepted"), "{}", errs[0]);
    }

    #[test]
    fn zero_limit() {
        let errs = run(&[reservation(1, &[("memory", "0")])]);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].field, "reservedMemory[0].limits.memory");
        assert!(
            errs[0].message.contains(
                "reserved memory may not be zero for NUMA node 1 and resource \"memory\""
            )
        );
    }

    #[test]
    fn duplicate_numa_node_and_type() {
        let errs = run(&[
            reservation(0, &[("memory", "1Gi")]),
            reservation(1, &[("memory", "1Gi")]),
            reservation(0, &[("memory", "2Gi")]),
        ]);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].field, "reservedMemory[2].limits.memory");
        assert!(
            errs[0]
                .message
                .contains("duplicate value for NUMA node 0 and resource \"memory\"")
        );
    }
}
