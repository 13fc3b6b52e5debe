//! What the kubelet refuses on a cgroup v1 host; nothing when the host is unknown.

use crate::types::KubeletConfiguration;

use super::{HostInfo, ValidationError, err};

/// `validateKubeletOSConfiguration` on Linux: returns at the first problem.
pub(super) fn check_os(c: &KubeletConfiguration, host: &HostInfo, out: &mut Vec<ValidationError>) {
    let Some(cgroup_v2) = host.cgroup_v2 else {
        return;
    };
    if cgroup_v2 {
        return;
    }
    if c.fail_cgroup_v1.unwrap_or(false) {
        out.push(err(
            "failCgroupV1",
            "kubelet is configured to not run on a host using cgroup v1. cgroup v1 support is unsupported and will be removed in a future release",
        ));
    } else if c.single_process_oom_kill == Some(false) {
        out.push(err(
            "singleProcessOOMKill",
            "invalid configuration: singleProcessOOMKill must not be explicitly set to false when using cgroup v1",
        ));
    }
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
