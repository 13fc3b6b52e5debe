//! The rules on single settings at the head of `ValidateKubeletConfiguration`: ranges,
//! signs, ports, and the feature gates some values need, in upstream's order.

use crate::duration::{Duration, MILLISECOND, SECOND};
use crate::types::KubeletConfiguration;

use super::{ValidationError, err};

pub(super) fn check(
    c: &KubeletConfiguration,
    on: &dyn Fn(&str) -> bool,
    out: &mut Vec<ValidationError>,
) {
    let d = |v: Option<Duration>| v.unwrap_or(Duration::ZERO);

    let node_lease = c.node_lease_duration_seconds.unwrap_or(0);
    if node_lease <= 0 {
        out.push(err(
            "nodeLeaseDurationSeconds",
            "invalid configuration: nodeLeaseDurationSeconds must be greater than 0",
        ));
    }
    if !c.system_cgroups.as_deref().unwrap_or("").is_empty()
        && c.cgroup_root.as_deref().unwrap_or("").is_empty()
    {
        out.push(err(
            "systemCgroups",
            "invalid configuration: systemCgroups (--system-cgroups) was specified and cgroupRoot (--cgroup-root) was not specified",
        ));
    }
    let event_burst = c.event_burst.unwrap_or(0);
    if event_burst < 0 {
        out.push(err(
            "eventBurst",
            format!("invalid configuration: eventBurst (--event-burst) {event_burst} must not be a negative number"),
        ));
    }
    let event_qps = c.event_record_qps.unwrap_or(0);
    if event_qps < 0 {
        out.push(err(
            "eventRecordQPS",
            format!("invalid configuration: eventRecordQPS (--event-qps) {event_qps} must not be a negative number"),
        ));
    }
    let healthz_port = c.healthz_port.unwrap_or(0);
    if healthz_port != 0 && !is_valid_port(healthz_port) {
        out.push(err(
            "healthzPort",
            format!("invalid configuration: healthzPort (--healthz-port) {healthz_port} must be between 1 and 65535, inclusive"),
        ));
    }
    let cfs_period = d(c.cpu_cfs_quota_period);
    // The default period passes both rules, whatever the gate says.
    let custom_cfs = cfs_period != Duration::from_millis(100) && on("CustomCPUCFSQuotaPeriod");
    if !custom_cfs && cfs_period != Duration::from_millis(100) {
        out.push(err(
            "cpuCFSQuotaPeriod",
            format!("invalid configuration: cpuCFSQuotaPeriod (--cpu-cfs-quota-period) {{{cfs_period}}} requires feature gate CustomCPUCFSQuotaPeriod"),
        ));
    }
    if custom_cfs && !(MILLISECOND..=SECOND).contains(&cfs_period.as_nanos()) {
        out.push(err(
            "cpuCFSQuotaPeriod",
            format!("invalid configuration: cpuCFSQuotaPeriod (--cpu-cfs-quota-period) {{{cfs_period}}} must be between 1ms and 1sec, inclusive"),
        ));
    }
    let gc_high = c.image_gc_high_threshold_percent.unwrap_or(0);
    let gc_low = c.image_gc_low_threshold_percent.unwrap_or(0);
    if !(0..=100).contains(&gc_high) {
        out.push(err(
            "imageGCHighThresholdPercent",
            format!("invalid configuration: imageGCHighThresholdPercent (--image-gc-high-threshold) {gc_high} must be between 0 and 100, inclusive"),
        ));
    }
    if !(0..=100).contains(&gc_low) {
        out.push(err(
            "imageGCLowThresholdPercent",
            format!("invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) {gc_low} must be between 0 and 100, inclusive"),
        ));
    }
    if gc_low >= gc_high {
        out.push(err(
            "imageGCLowThresholdPercent",
            format!("invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) {gc_low} must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) {gc_high}"),
        ));
    }
    let max_gc_age = d(c.image_maximum_gc_age);
    let min_gc_age = d(c.image_minimum_gc_age);
    if !max_gc_age.is_zero() && !on("ImageMaximumGCAge") {
        out.push(err(
            "imageMaximumGCAge",
            "invalid configuration: ImageMaximumGCAge feature gate is required for Kubelet configuration option imageMaximumGCAge",
        ));
    }
    if min_gc_age.is_negative() {
        out.push(err(
            "imageMinimumGCAge",
            format!("invalid configuration: imageMinimumGCAge {min_gc_age} must not be negative"),
        ));
    }
    if max_gc_age.is_negative() {
        out.push(err(
            "imageMaximumGCAge",
            format!("invalid configuration: imageMaximumGCAge {max_gc_age} must not be negative"),
        ));
    }
    if max_gc_age.as_nanos() > 0 && max_gc_age <= min_gc_age {
        out.push(err(
            "imageMaximumGCAge",
            format!("invalid configuration: imageMaximumGCAge {max_gc_age} must be greater than imageMinimumGCAge {min_gc_age}"),
        ));
    }
    let drop_bit = c.iptables_drop_bit.unwrap_or(0);
    if !(0..=31).contains(&drop_bit) {
        out.push(err(
            "iptablesDropBit",
            format!("invalid configuration: iptablesDropBit (--iptables-drop-bit) {drop_bit} must be between 0 and 31, inclusive"),
        ));
    }
    let masq_bit = c.iptables_masquerade_bit.unwrap_or(0);
    if !(0..=31).contains(&masq_bit) {
        out.push(err(
            "iptablesMasqueradeBit",
            format!("invalid configuration: iptablesMasqueradeBit (--iptables-masquerade-bit) {masq_bit} must be between 0 and 31, inclusive"),
        ));
    }
    let api_burst = c.kube_api_burst.unwrap_or(0);
    if api_burst < 0 {
        out.push(err(
            "kubeAPIBurst",
            format!("invalid configuration: kubeAPIBurst (--kube-api-burst) {api_burst} must not be a negative number"),
        ));
    }
    let api_qps = c.kube_api_qps.unwrap_or(0);
    if api_qps < 0 {
        out.push(err(
            "kubeAPIQPS",
            format!("invalid configuration: kubeAPIQPS (--kube-api-qps) {api_qps} must not be a negative number"),
        ));
    }
    let max_images = c.node_status_max_images.unwrap_or(0);
    if max_images < -1 {
        out.push(err(
            "nodeStatusMaxImages",
            format!("invalid configuration: nodeStatusMaxImages (--node-status-max-images) {max_images} must be -1 or greater"),
        ));
    }
    let max_open_files = c.max_open_files.unwrap_or(0);
    if max_open_files < 0 {
        out.push(err(
            "maxOpenFiles",
            format!("invalid configuration: maxOpenFiles (--max-open-files) {max_open_files} must not be a negative number"),
        ));
    }
    let max_pods = c.max_pods.unwrap_or(0);
    if max_pods < 0 {
        out.push(err(
            "maxPods",
            format!("invalid configuration: maxPods (--max-pods) {max_pods} must not be a negative number"),
        ));
    }
    let oom = c.oom_score_adj.unwrap_or(0);
    if !(-1000..=1000).contains(&oom) {
        out.push(err(
            "oomScoreAdj",
            format!("invalid configuration: oomScoreAdj (--oom-score-adj) {oom} must be between -1000 and 1000, inclusive"),
        ));
    }
    let pods_per_core = c.pods_per_core.unwrap_or(0);
    if pods_per_core < 0 {
        out.push(err(
            "podsPerCore",
            format!("invalid configuration: podsPerCore (--pods-per-core) {pods_per_core} must not be a negative number"),
        ));
    }
    let port = c.port.unwrap_or(0);
    if !is_valid_port(port) {
        out.push(err(
            "port",
            format!(
                "invalid configuration: port (--port) {port} must be between 1 and 65535, inclusive"
            ),
        ));
    }
    let ro_port = c.read_only_port.unwrap_or(0);
    if ro_port != 0 && !is_valid_port(ro_port) {
        out.push(err(
            "readOnlyPort",
            format!("invalid configuration: readOnlyPort (--read-only-port) {ro_port} must be between 0 and 65535, inclusive"),
        ));
    }
    let registry_burst = c.registry_burst.unwrap_or(0);
    if registry_burst < 0 {
        out.push(err(
            "registryBurst",
            format!("invalid configuration: registryBurst (--registry-burst) {registry_burst} must not be a negative number"),
        ));
    }
    let registry_qps = c.registry_pull_qps.unwrap_or(0);
    if registry_qps < 0 {
        out.push(err(
            "registryPullQPS",
            format!("invalid configuration: registryPullQPS (--registry-qps) {registry_qps} must not be a negative number"),
        ));
    }
    if let Some(parallel) = c.max_parallel_image_pulls {
        if parallel < 1 {
            out.push(err(
                "maxParallelImagePulls",
                format!("invalid configuration: maxParallelImagePulls {parallel} must be a positive number"),
            ));
        }
        if c.serialize_image_pulls.unwrap_or(false) && parallel > 1 {
            out.push(err(
                "maxParallelImagePulls",
                "invalid configuration: maxParallelImagePulls cannot be larger than 1 unless SerializeImagePulls (--serialize-image-pulls) is set to false",
            ));
        }
    }
    if c.server_tls_bootstrap.unwrap_or(false) && !on("RotateKubeletServerCertificate") {
        out.push(err(
            "serverTLSBootstrap",
            "invalid configuration: serverTLSBootstrap true requires feature gate RotateKubeletServerCertificate",
        ));
    }
    if c.run_once.unwrap_or(false) {
        out.push(err(
            "runOnce",
            "invalid configuration: runOnce (--runOnce) true, Runonce mode has been deprecated and should not be set",
        ));
    }
}

/// `utilvalidation.IsValidPortNum`.
fn is_valid_port(p: i32) -> bool {
    (1..=65535).contains(&p)
}
