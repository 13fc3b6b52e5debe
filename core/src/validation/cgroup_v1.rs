//! `validateKubeletOSConfiguration` on Linux: what the kubelet refuses on a cgroup v1
//! host (nothing of that when the host is unknown), and `userNamespaces.idsPerPod`.

use crate::types::KubeletConfiguration;

use super::{HostInfo, ValidationError, err};

/// `validateKubeletOSConfiguration` on Linux: returns at the first problem.
pub(super) fn check_os(c: &KubeletConfiguration, host: &HostInfo, out: &mut Vec<ValidationError>) {
    if host.cgroup_v2 == Some(false) {
        if c.fail_cgroup_v1.unwrap_or(false) {
            out.push(err(
                "failCgroupV1",
                "kubelet is configured to not run on a host using cgroup v1. cgroup v1 support is unsupported and will be removed in a future release",
            ));
            return;
        }
        if c.single_process_oom_kill == Some(false) {
            out.push(err(
                "singleProcessOOMKill",
                "invalid configuration: singleProcessOOMKill must not be explicitly set to false when using cgroup v1",
            ));
            return;
        }
    }
    const UNIT: i64 = 65536;
    const FIELD: &str = "userNamespaces.idsPerPod";
    let Some(ids) = c.user_namespaces.as_ref().and_then(|u| u.ids_per_pod) else {
        return;
    };
    let message = if ids < UNIT {
        format!("invalid configuration: userNamespaces.idsPerPod must not be less than {UNIT}")
    } else if ids % UNIT != 0 {
        format!("invalid configuration: userNamespaces.idsPerPod must be a multiple of {UNIT}")
    } else if ids > i64::from(u32::MAX) {
        format!(
            "invalid configuration: userNamespaces.idsPerPod must not be more than {}",
            u32::MAX
        )
    } else {
        return;
    };
    out.push(err(FIELD, message));
}

/// `LimitedSwap` needs cgroup v2 (the kubelet's swap check at start).
pub(super) fn check_limited_swap(
    c: &KubeletConfiguration,
    on: &dyn Fn(&str) -> bool,
    host: &HostInfo,
    out: &mut Vec<ValidationError>,
) {
    if host.cgroup_v2 == Some(false)
        && c.memory_swap
            .as_ref()
            .and_then(|m| m.swap_behavior.as_deref())
            == Some("LimitedSwap")
        && on("NodeSwap")
    {
        out.push(err(
            "memorySwap.swapBehavior",
            "swap feature is enabled and LimitedSwap but it is only supported with cgroupv2",
        ));
    }
}
