//! The kubelet's own validation of its effective (defaulted) configuration.
//!
//! [`validate`] runs, in a stable order, every rule the kubelet applies before it starts
//! serving, with the substance of the kubelet's own messages:
//!
//! 1. `featureGates`: unknown gates, gates locked to their default, enabled gates whose
//!    dependencies are disabled ([`crate::features::validate_gates`]).
//! 2. `ValidateKubeletConfiguration` (`pkg/kubelet/apis/config/validation/validation.go`),
//!    with its Linux part (`validation_linux.go`, which needs [`HostInfo`]), reserved
//!    memory, `showHiddenMetricsForVersion`, logging (component-base `logs/api/v1`) and
//!    tracing (component-base `tracing/api/v1`).
//! 3. The checks the kubelet makes on the configuration while it starts, each of which
//!    makes it exit: sync frequency, TLS cipher suites, version and curves
//!    (`cliflag.TLSCipherSuites` ...), `kubeReserved`/`systemReserved`
//!    (`parseResourceList`), eviction thresholds (`eviction.ParseThresholdConfig`),
//!    `qosReserved`, CPU and memory manager policies, swap on cgroup v1, the ConfigMap and
//!    Secret change detection strategy, `containerLogMaxSize`, `allowedUnsafeSysctls`
//!    (`sysctl.NewAllowlist`), `userNamespaces.idsPerPod` and the server address.
//!
//! Upstream validates its internal type after defaulting; our model is v1beta1 with
//! `Option` fields, so every rule reads an unset field as Go's zero value (`0`, `""`,
//! `false`, empty). Run it on a config defaulted by [`crate::defaults`]; on an
//! undefaulted one it reports what the kubelet would report for those zero values.
//!
//! Where upstream stops at the first problem (a map parsed in random order, a helper that
//! returns one error), we report every problem, each with the JSON path of the field.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use crate::duration::{Duration, MILLISECOND, SECOND};
use crate::features;
use crate::quantity::Quantity;
use crate::types::{KubeletConfiguration, Taint};

mod logging;
mod reserved_memory;
mod tracing;

/// One problem the kubelet would refuse to start with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationError {
    /// JSON path of the offending field: dots between fields and map keys
    /// (`evictionHard.memory.available`), list indexes in brackets
    /// (`registerWithTaints[0].effect`).
    pub field: String,
    /// The kubelet's message, e.g. `invalid configuration: port (--port) 0 must be
    /// between 1 and 65535, inclusive`.
    pub message: String,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for ValidationError {}

/// What validation knows about the node the config is for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostInfo {
    /// Whether the host runs the unified cgroup v2 hierarchy; `None` when unknown, which
    /// skips the checks that depend on it (`failCgroupV1`, `singleProcessOOMKill`,
    /// `LimitedSwap`).
    pub cgroup_v2: Option<bool>,
}

/// The minor version before the one this crate models (v1.36): the only value
/// `showHiddenMetricsForVersion` may take.
const PREVIOUS_MINOR_VERSION: &str = "1.35";

/// Every problem the kubelet would find in `cfg` on a host described by `host`, in a
/// stable order (see the module documentation). Empty when the kubelet would accept it.
pub fn validate(cfg: &KubeletConfiguration, host: &HostInfo) -> Vec<ValidationError> {
    let gates = cfg.feature_gates.as_ref();
    let mut out = Vec::new();
    check_feature_gates(cfg, &mut out);
    check_kubelet_configuration(cfg, gates, host, &mut out);
    check_startup(cfg, gates, host, &mut out);
    out
}

/// Shorthand for building an error.
fn err(field: impl Into<String>, message: impl Into<String>) -> ValidationError {
    ValidationError {
        field: field.into(),
        message: message.into(),
    }
}

// ---------------------------------------------------------------------------------------
// featureGates

fn check_feature_gates(cfg: &KubeletConfiguration, out: &mut Vec<ValidationError>) {
    let Some(gates) = cfg.feature_gates.as_ref() else {
        return;
    };
    for message in features::validate_gates(gates) {
        let field = match gate_named_in(gates, &message) {
            Some(name) => format!("featureGates.{name}"),
            None => "featureGates".to_string(),
        };
        out.push(err(field, message));
    }
}

/// The gate of `gates` that `message` names (the longest one, as a whole word).
fn gate_named_in<'a>(gates: &'a BTreeMap<String, bool>, message: &str) -> Option<&'a str> {
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.';
    gates
        .keys()
        .filter(|name| {
            !name.is_empty()
                && message.match_indices(name.as_str()).any(|(i, _)| {
                    let before = i.checked_sub(1).and_then(|j| message.as_bytes().get(j));
                    let after = message.as_bytes().get(i + name.len());
                    !before.is_some_and(|b| is_word(*b)) && !after.is_some_and(|b| is_word(*b))
                })
        })
        .max_by_key(|name| name.len())
        .map(String::as_str)
}

// ---------------------------------------------------------------------------------------
// ValidateKubeletConfiguration

/// `utilvalidation.IsValidPortNum`.
fn is_valid_port(p: i32) -> bool {
    (1..=65535).contains(&p)
}

fn check_kubelet_configuration(
    c: &KubeletConfiguration,
    gates: Option<&BTreeMap<String, bool>>,
    host: &HostInfo,
    out: &mut Vec<ValidationError>,
) {
    let on = |name: &str| features::enabled(gates, name);
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
    let dra_period = d(c.dra_manager_reconcile_period);
    if dra_period.as_nanos() <= 0 {
        out.push(err(
            "draManagerReconcilePeriod",
            format!("invalid configuration: draManagerReconcilePeriod {dra_period} must be greater than zero"),
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

    for (i, taint) in c.register_with_taints.iter().flatten().enumerate() {
        if let Some((part, detail)) = check_taint(taint) {
            out.push(err(
                format!("registerWithTaints[{i}].{part}"),
                format!("invalid taint: {}: {detail}", go_taint(taint)),
            ));
        }
        if taint.time_added.is_some() {
            out.push(err(
                format!("registerWithTaints[{i}].timeAdded"),
                "invalid configuration: taint.TimeAdded is not nil",
            ));
        }
    }

    let tm_policy = c.topology_manager_policy.as_deref().unwrap_or("");
    if !matches!(
        tm_policy,
        "none" | "best-effort" | "restricted" | "single-numa-node"
    ) {
        out.push(err(
            "topologyManagerPolicy",
            format!(
                "invalid configuration: topologyManagerPolicy (--topology-manager-policy) {} must be one of: [\"none\" \"best-effort\" \"restricted\" \"single-numa-node\"]",
                go_quote(tm_policy)
            ),
        ));
    }
    let tm_scope = c.topology_manager_scope.as_deref().unwrap_or("");
    if !matches!(tm_scope, "container" | "pod") {
        out.push(err(
            "topologyManagerScope",
            format!(
                "invalid configuration: topologyManagerScope (--topology-manager-scope) {} must be one of: \"container\", or \"pod\"",
                go_quote(tm_scope)
            ),
        ));
    }

    check_shutdown(c, &on, out);
    check_swap(c, &on, out);
    check_crash_loop_backoff(c, &on, out);
    check_enforce_node_allocatable(c, out);

    let hairpin = c.hairpin_mode.as_deref().unwrap_or("");
    if !matches!(hairpin, "none" | "hairpin-veth" | "promiscuous-bridge") {
        out.push(err(
            "hairpinMode",
            format!(
                "invalid configuration: option {} specified for hairpinMode (--hairpin-mode). Valid options are \"none\", \"hairpin-veth\" or \"promiscuous-bridge\"",
                go_quote(hairpin)
            ),
        ));
    }

    check_image_pull_credentials(c, &on, out);

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
        if let Err(e) = parse_cpuset(reserved_cpus) {
            out.push(err(
                "reservedSystemCPUs",
                format!("invalid configuration: unable to parse reservedSystemCPUs (--reserved-cpus) {reserved_cpus}, error: {e}"),
            ));
        }
    }

    reserved_memory::validate(c.reserved_memory.as_deref().unwrap_or(&[]), out);

    check_os(c, host, out);

    let hidden = c.show_hidden_metrics_for_version.as_deref().unwrap_or("");
    if !hidden.is_empty() && hidden != PREVIOUS_MINOR_VERSION {
        out.push(err(
            "showHiddenMetricsForVersion",
            format!("--show-hidden-metrics-for-version must be omitted or have the value '{PREVIOUS_MINOR_VERSION}'. Only the previous minor version is allowed"),
        ));
    }

    logging::validate(c.logging.as_ref(), gates, out);
    if let Some(t) = c.tracing.as_ref() {
        tracing::validate(t, out);
    }

    let reservation_policy = c.memory_reservation_policy.as_deref().unwrap_or("");
    let memory_qos = (c.memory_throttling_factor.is_none()
        || reservation_policy == "TieredReservation")
        && on("MemoryQoS");
    if memory_qos && c.memory_throttling_factor.is_none() {
        out.push(err(
            "memoryThrottlingFactor",
            "invalid configuration: memoryThrottlingFactor is required when MemoryQoS feature flag is enabled",
        ));
    }
    if let Some(f) = c.memory_throttling_factor
        && (f <= 0.0 || f > 1.0)
    {
        out.push(err(
            "memoryThrottlingFactor",
            format!("invalid configuration: memoryThrottlingFactor {} must be greater than 0 and less than or equal to 1.0", go_float(f)),
        ));
    }
    if !memory_qos && reservation_policy == "TieredReservation" {
        out.push(err(
            "memoryReservationPolicy",
            "invalid configuration: memoryReservationPolicy \"TieredReservation\" requires MemoryQoS feature gate to be enabled",
        ));
    }
    if !matches!(reservation_policy, "None" | "TieredReservation") {
        out.push(err(
            "memoryReservationPolicy",
            format!(
                "invalid configuration: option {} specified for memoryReservationPolicy. Valid options are \"None\" or \"TieredReservation\"",
                go_quote(reservation_policy)
            ),
        ));
    }

    if c.container_runtime_endpoint
        .as_deref()
        .unwrap_or("")
        .is_empty()
    {
        out.push(err(
            "containerRuntimeEndpoint",
            "invalid configuration: the containerRuntimeEndpoint was not specified or empty",
        ));
    }

    let log_query = c.enable_system_log_query.unwrap_or(false);
    if log_query && !on("NodeLogQuery") {
        out.push(err(
            "enableSystemLogQuery",
            "invalid configuration: NodeLogQuery feature gate is required for enableSystemLogQuery",
        ));
    }
    if log_query && !c.enable_system_log_handler.unwrap_or(false) {
        out.push(err(
            "enableSystemLogHandler",
            "invalid configuration: enableSystemLogHandler is required for enableSystemLogQuery",
        ));
    }

    if c.container_log_max_workers.unwrap_or(0) < 1 {
        out.push(err(
            "containerLogMaxWorkers",
            "invalid configuration: containerLogMaxWorkers must be greater than or equal to 1",
        ));
    }
    if d(c.container_log_monitor_interval).as_nanos() < 3 * SECOND {
        out.push(err(
            "containerLogMonitorInterval",
            "invalid configuration: containerLogMonitorInterval must be a positive time duration greater than or equal to 3s",
        ));
    }
    if c.container_log_max_files.unwrap_or(0) <= 1 {
        out.push(err(
            "containerLogMaxFiles",
            "invalid configuration: containerLogMaxFiles must be greater than 1",
        ));
    }

    check_pod_logs_dir(c.pod_logs_dir.as_deref().unwrap_or(""), out);
}

fn check_shutdown(
    c: &KubeletConfiguration,
    on: &dyn Fn(&str) -> bool,
    out: &mut Vec<ValidationError>,
) {
    let period = c.shutdown_grace_period.unwrap_or(Duration::ZERO);
    let critical = c
        .shutdown_grace_period_critical_pods
        .unwrap_or(Duration::ZERO);
    let (p, cp) = (period.as_nanos(), critical.as_nanos());
    // Both periods zero pass every rule, whatever the gate says.
    let graceful = (p != 0 || cp != 0) && on("GracefulNodeShutdown");
    if graceful {
        if cp > p {
            out.push(err(
                "shutdownGracePeriodCriticalPods",
                format!("invalid configuration: shutdownGracePeriodCriticalPods {{{critical}}} must be <= shutdownGracePeriod {{{period}}}"),
            ));
        }
        if p < 0 || (p > 0 && p < SECOND) {
            out.push(err(
                "shutdownGracePeriod",
                format!("invalid configuration: shutdownGracePeriod {{{period}}} must be either zero or otherwise >= 1 sec"),
            ));
        }
        if cp < 0 || (cp > 0 && cp < SECOND) {
            out.push(err(
                "shutdownGracePeriodCriticalPods",
                format!("invalid configuration: shutdownGracePeriodCriticalPods {{{critical}}} must be either zero or otherwise >= 1 sec"),
            ));
        }
    }
    if (p > 0 || cp > 0) && !graceful {
        out.push(err(
            "shutdownGracePeriod",
            "invalid configuration: specifying shutdownGracePeriod or shutdownGracePeriodCriticalPods requires feature gate GracefulNodeShutdown",
        ));
    }
    let by_priority = c
        .shutdown_grace_period_by_pod_priority
        .as_deref()
        .is_some_and(|l| !l.is_empty());
    if !by_priority {
        return;
    }
    if on("GracefulNodeShutdownBasedOnPodPriority") {
        if p > 0 || cp > 0 {
            out.push(err(
                "shutdownGracePeriodByPodPriority",
                "invalid configuration: Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod at the same time",
            ));
        }
    } else {
        out.push(err(
            "shutdownGracePeriodByPodPriority",
            "invalid configuration: Specifying shutdownGracePeriodByPodPriority requires feature gate GracefulNodeShutdownBasedOnPodPriority",
        ));
    }
}

fn check_swap(c: &KubeletConfiguration, on: &dyn Fn(&str) -> bool, out: &mut Vec<ValidationError>) {
    let behavior = c
        .memory_swap
        .as_ref()
        .and_then(|m| m.swap_behavior.as_deref())
        .unwrap_or("");
    if behavior.is_empty() {
        return;
    }
    if on("NodeSwap") {
        if !matches!(behavior, "" | "NoSwap" | "LimitedSwap") {
            out.push(err(
                "memorySwap.swapBehavior",
                format!(
                    "invalid configuration: memorySwap.swapBehavior {} must be one of: \"\", \"LimitedSwap\" or \"NoSwap\"",
                    go_quote(behavior)
                ),
            ));
        }
    } else {
        out.push(err(
            "memorySwap.swapBehavior",
            "invalid configuration: memorySwap.swapBehavior cannot be set when NodeSwap feature flag is disabled",
        ));
    }
}

fn check_crash_loop_backoff(
    c: &KubeletConfiguration,
    on: &dyn Fn(&str) -> bool,
    out: &mut Vec<ValidationError>,
) {
    let max = c
        .crash_loop_backoff
        .as_ref()
        .and_then(|b| b.max_container_restart_period);
    const FIELD: &str = "crashLoopBackOff.maxContainerRestartPeriod";
    if on("KubeletCrashLoopBackOffMax") {
        match max {
            None => out.push(err(
                FIELD,
                "invalid configuration: FeatureGate KubeletCrashLoopBackOffMax is enabled, CrashLoopBackOff.MaxContainerRestartPeriod must be set",
            )),
            Some(m) => {
                let millis = m.as_nanos() / MILLISECOND;
                if !(1000..=300_000).contains(&millis) {
                    let secs = m.as_nanos() as f64 / SECOND as f64;
                    out.push(err(
                        FIELD,
                        format!("invalid configuration: CrashLoopBackOff.MaxContainerRestartPeriod (got: {} seconds) must be set between 1s and 300s", go_float(secs)),
                    ));
                }
            }
        }
    } else if max.is_some() {
        out.push(err(
            FIELD,
            "invalid configuration: FeatureGate KubeletCrashLoopBackOffMax not enabled, CrashLoopBackOff.MaxContainerRestartPeriod must not be set",
        ));
    }
}

fn check_enforce_node_allocatable(c: &KubeletConfiguration, out: &mut Vec<ValidationError>) {
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
    for (i, val) in list.iter().enumerate() {
        if list[..i].contains(val) {
            out.push(err(
                format!("{FIELD}[{i}]"),
                format!("invalid configuration: duplicated enforcements {} in enforceNodeAllocatable (--enforce-node-allocatable)", go_quote(val)),
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
                        go_quote(other)
                    ),
                ));
                continue;
            }
        }
        if !cgroups_per_qos {
            out.push(err(
                "cgroupsPerQOS",
                format!("invalid configuration: cgroupsPerQOS (--cgroups-per-qos) must be set to true when {} contained in enforceNodeAllocatable (--enforce-node-allocatable)", go_quote(val)),
            ));
        }
    }
}

fn check_image_pull_credentials(
    c: &KubeletConfiguration,
    on: &dyn Fn(&str) -> bool,
    out: &mut Vec<ValidationError>,
) {
    const POLICY: &str = "imagePullCredentialsVerificationPolicy";
    const ALLOWLIST: &str = "preloadedImagesVerificationAllowlist";
    let policy = c
        .image_pull_credentials_verification_policy
        .as_deref()
        .unwrap_or("");
    let allowlist = c
        .preloaded_images_verification_allowlist
        .as_deref()
        .unwrap_or(&[]);
    if on("KubeletEnsureSecretPulledImages") {
        if !matches!(
            policy,
            "NeverVerify"
                | "NeverVerifyPreloadedImages"
                | "NeverVerifyAllowlistedImages"
                | "AlwaysVerify"
        ) {
            out.push(err(
                POLICY,
                format!(
                    "invalid configuration: option {} specified for imagePullCredentialsVerificationPolicy. Valid options are \"NeverVerify\", \"NeverVerifyPreloadedImages\", \"NeverVerifyAllowlistedImages\" or \"AlwaysVerify\"",
                    go_quote(policy)
                ),
            ));
        }
        if !allowlist.is_empty() && policy != "NeverVerifyAllowlistedImages" {
            out.push(err(
                ALLOWLIST,
                "invalid configuration: can't set `preloadedImagesVerificationAllowlist` if `imagePullCredentialsVertificationPolicy` is not \"NeverVerifyAllowlistedImages\"",
            ));
        } else {
            for (i, pattern) in allowlist.iter().enumerate() {
                if let Some(e) = image_pattern_error(pattern) {
                    out.push(err(
                        format!("{ALLOWLIST}[{i}]"),
                        format!("invalid configuration: invalid image pattern in `preloadedImagesVerificationAllowlist`: {e}"),
                    ));
                }
            }
        }
    } else {
        if !policy.is_empty() {
            out.push(err(
                POLICY,
                "invalid configuration: `imagePullCredentialsVerificationPolicy` must not be set if KubeletEnsureSecretPulledImages feature gate is not enabled",
            ));
        }
        if !allowlist.is_empty() {
            out.push(err(
                ALLOWLIST,
                "invalid configuration: `preloadedImagesVerificationAllowlist` must not be set if KubeletEnsureSecretPulledImages feature gate is not enabled",
            ));
        }
    }
}

/// `imagepullmanager.ValidateAllowlistImagesPatterns` for one pattern: an image name with
/// its registry and without tag or digest, or such a prefix followed by `/*`.
fn image_pattern_error(pattern: &str) -> Option<String> {
    if pattern != pattern.trim() {
        return Some(format!(
            "leading/trailing spaces are not allowed: {pattern}"
        ));
    }
    let (trimmed, wildcard) = match pattern.strip_suffix("/*") {
        Some(prefix) => (&pattern[..prefix.len() + 1], true),
        None => (pattern, false),
    };
    if trimmed.is_empty() {
        return Some(format!("the supplied pattern is too short: {pattern}"));
    }
    if trimmed.contains('*') {
        return Some(format!(
            "not a valid wildcard pattern, only patterns ending with '/*' are allowed: {pattern}"
        ));
    }
    if wildcard {
        if trimmed.len() == 1 {
            return Some("at least registry hostname is required".to_string());
        }
        return None;
    }
    match normalized_image_name(trimmed) {
        Err(e) => Some(format!("failed to parse as an image name: {e}")),
        Ok(name) if name != trimmed => Some(format!(
            "neither tag nor digest is accepted in an image reference: {pattern}"
        )),
        Ok(_) => None,
    }
}

/// The repository name (`registry/path`, without tag or digest) that docker's
/// `reference.ParseNormalizedNamed` gives `s`, adding `docker.io` (and `library/`) when
/// the first component is not a registry host.
fn normalized_image_name(s: &str) -> Result<Cow<'_, str>, String> {
    const INVALID: &str = "invalid reference format";
    let (domain, remainder) = match s.find('/') {
        Some(i)
            if s[..i].contains(['.', ':'])
                || &s[..i] == "localhost"
                || s[..i].bytes().any(|b| b.is_ascii_uppercase()) =>
        {
            (Some(&s[..i]), &s[i + 1..])
        }
        _ => (None, s),
    };
    if remainder.bytes().any(|b| b.is_ascii_uppercase()) {
        let path = remainder.split(['@', ':']).next().unwrap_or(remainder);
        return Err(format!(
            "{INVALID}: repository name ({path}) must be lowercase"
        ));
    }
    // Split off a digest, then a tag (a ':' after the last '/').
    let (named, digest) = match remainder.split_once('@') {
        Some((n, dg)) => (n, Some(dg)),
        None => (remainder, None),
    };
    let (path, tag) = match named.rfind(':') {
        Some(i) if !named[i..].contains('/') => (&named[..i], Some(&named[i + 1..])),
        _ => (named, None),
    };
    let domain_ok = domain.is_none_or(valid_registry_host);
    let path_ok = !path.is_empty() && path.split('/').all(valid_path_component);
    let tag_ok = tag.is_none_or(|t| {
        let b = t.as_bytes();
        !b.is_empty()
            && b.len() <= 128
            && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
    });
    let digest_ok = digest.is_none_or(|dg| {
        dg.split_once(':').is_some_and(|(alg, hex)| {
            !alg.is_empty()
                && alg
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'.' | b'_' | b'-'))
                && hex.len() >= 32
                && hex.bytes().all(|c| c.is_ascii_hexdigit())
        })
    });
    if !(domain_ok && path_ok && tag_ok && digest_ok) {
        return Err(INVALID.to_string());
    }
    Ok(match domain {
        Some(dom) => Cow::Borrowed(&s[..dom.len() + 1 + path.len()]),
        None if path.contains('/') => Cow::Owned(format!("docker.io/{path}")),
        None => Cow::Owned(format!("docker.io/library/{path}")),
    })
}

/// A registry host as the docker reference grammar has it: DNS-ish components joined by
/// dots or a bracketed IPv6 address, with an optional numeric port.
fn valid_registry_host(h: &str) -> bool {
    let (host, port) = if let Some(rest) = h.strip_prefix('[') {
        match rest.split_once(']') {
            Some((ip, after)) => {
                if ip.parse::<std::net::Ipv6Addr>().is_err() {
                    return false;
                }
                match after {
                    "" => return true,
                    p => match p.strip_prefix(':') {
                        Some(port) => ("", Some(port)),
                        None => return false,
                    },
                }
            }
            None => return false,
        }
    } else {
        match h.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (h, None),
        }
    };
    if port.is_some_and(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit())) {
        return false;
    }
    if h.starts_with('[') {
        return true;
    }
    !host.is_empty()
        && host.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        })
}

/// `[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*`
fn valid_path_component(p: &str) -> bool {
    let b = p.as_bytes();
    if b.is_empty() || !is_lower_alnum(b[0]) || !is_lower_alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if is_lower_alnum(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && !is_lower_alnum(b[i]) {
            i += 1;
        }
        let sep = &p[start..i];
        let ok = sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|c| c == b'-');
        if !ok {
            return false;
        }
    }
    true
}

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// `validateKubeletOSConfiguration` on Linux: returns at the first problem.
fn check_os(c: &KubeletConfiguration, host: &HostInfo, out: &mut Vec<ValidationError>) {
    let Some(cgroup_v2) = host.cgroup_v2 else {
        return;
    };
    if cgroup_v2 {
        return;
    }
    if c.fail_cgroup_v1.unwrap_or(false) {
        out.push(err(
            "failCgroupV1",
            "kubelet is configured to not run on a host using cgroup v1. cgroup v1 support is in maintenance mode",
        ));
    } else if c.single_process_oom_kill == Some(false) {
        out.push(err(
            "singleProcessOOMKill",
            "invalid configuration: singleProcessOOMKill must not be explicitly set to false when using cgroup v1",
        ));
    }
}

fn check_pod_logs_dir(dir: &str, out: &mut Vec<ValidationError>) {
    const FIELD: &str = "podLogsDir";
    if dir.is_empty() {
        out.push(err(
            FIELD,
            "invalid configuration: podLogsDir was not specified",
        ));
    }
    if !dir.starts_with('/') {
        out.push(err(
            FIELD,
            format!(
                "invalid configuration: pod logs path {} must be absolute path",
                go_quote(dir)
            ),
        ));
    }
    if !is_clean_path(dir) {
        out.push(err(
            FIELD,
            format!(
                "invalid configuration: pod logs path {} must be normalized",
                go_quote(dir)
            ),
        ));
    }
    if !dir.is_ascii() {
        // Upstream's wording, typo included.
        out.push(err(
            FIELD,
            format!(
                "invalid configuration: pod logs path {} mut contains ASCII characters only",
                go_quote(dir)
            ),
        ));
    }
}

/// Whether Go's `filepath.Clean(p) == p` on Linux.
fn is_clean_path(p: &str) -> bool {
    if p == "/" || p == "." {
        return true;
    }
    if p.is_empty() || p.ends_with('/') {
        return false;
    }
    let rooted = p.starts_with('/');
    let rest = if rooted { &p[1..] } else { p };
    let mut leading_dotdots = true;
    for seg in rest.split('/') {
        match seg {
            "" | "." => return false,
            ".." => {
                if rooted || !leading_dotdots {
                    return false;
                }
            }
            _ => leading_dotdots = false,
        }
    }
    true
}

// ---------------------------------------------------------------------------------------
// Taints (`utiltaints.CheckTaintValidation`)

/// The first problem with `t`: which part of it, and why.
fn check_taint(t: &Taint) -> Option<(&'static str, String)> {
    let key_errs = qualified_name_errors(&t.key);
    if !key_errs.is_empty() {
        return Some(("key", format!("invalid taint key: {}", key_errs.join("; "))));
    }
    let value = t.value.as_deref().unwrap_or("");
    if !value.is_empty() {
        let errs = label_value_errors(value);
        if !errs.is_empty() {
            return Some(("value", format!("invalid taint value: {}", errs.join("; "))));
        }
    }
    if !t.effect.is_empty()
        && !matches!(
            t.effect.as_str(),
            "NoSchedule" | "PreferNoSchedule" | "NoExecute"
        )
    {
        return Some((
            "effect",
            format!(
                "invalid taint effect: {}, unsupported taint effect",
                t.effect
            ),
        ));
    }
    None
}

/// A taint as Go's `%v` prints a `v1.Taint`: `{key value effect <nil>}`.
fn go_taint(t: &Taint) -> String {
    format!(
        "{{{} {} {} {}}}",
        t.key,
        t.value.as_deref().unwrap_or(""),
        t.effect,
        t.time_added.as_deref().unwrap_or("<nil>")
    )
}

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn matches_qualified_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// `validation.IsQualifiedName`.
fn qualified_name_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let name = match value.split_once('/') {
        None => value,
        Some((prefix, name)) if !name.contains('/') => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    dns1123_subdomain_errors(prefix)
                        .into_iter()
                        .map(|e| format!("prefix part {e}")),
                );
            }
            name
        }
        Some(_) => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".to_string());
    }
    if !matches_qualified_name(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_ERR,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// `validation.IsValidLabelValue`.
fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !value.is_empty() && !matches_qualified_name(value) {
        errs.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            &format!("({QUALIFIED_NAME_FMT})?"),
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// `validation.IsDNS1123Subdomain`.
fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    let ok = value.split('.').all(|label| {
        let b = label.as_bytes();
        !b.is_empty()
            && is_lower_alnum(b[0])
            && is_lower_alnum(b[b.len() - 1])
            && b.iter().all(|c| is_lower_alnum(*c) || *c == b'-')
    });
    if !ok {
        errs.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
            &["example.com"],
        ));
    }
    errs
}

/// `validation.RegexError`.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let mut s = msg.to_string();
    s.push_str(" (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push('\'');
        s.push_str(e);
        s.push_str("', ");
    }
    s.push_str("regex used for validation is '");
    s.push_str(fmt);
    s.push_str("')");
    s
}

// ---------------------------------------------------------------------------------------
// Checks the kubelet makes while it starts

fn check_startup(
    c: &KubeletConfiguration,
    gates: Option<&BTreeMap<String, bool>>,
    host: &HostInfo,
    out: &mut Vec<ValidationError>,
) {
    let on = |name: &str| features::enabled(gates, name);

    // kubelet.NewMainKubelet
    let sync = c.sync_frequency.unwrap_or(Duration::ZERO);
    if sync.as_nanos() <= 0 {
        out.push(err(
            "syncFrequency",
            format!("invalid sync frequency {}", sync.as_nanos()),
        ));
    }

    check_address(c, out);
    check_tls(c, out);
    check_authorization_mode(c, out);

    // run(): --reserved-cpus replaces the cpu of kubeReserved and systemReserved.
    let reserved_cpus = match c.reserved_system_cpus.as_deref() {
        Some(s) if !s.is_empty() => parse_cpuset(s).ok(),
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

    check_eviction(c, out);
    check_qos_reserved(c, out);

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

    // cm.NewContainerManager: the CPU and memory managers.
    match c.cpu_manager_policy.as_deref().unwrap_or("") {
        "none" => {}
        "static" => {
            let reserved_milli = if cpus_override {
                1
            } else {
                kube_cpu.saturating_add(system_cpu)
            };
            if reserved_milli <= 0 {
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

    let strategy = c
        .config_map_and_secret_change_detection_strategy
        .as_deref()
        .unwrap_or("");
    if !matches!(strategy, "Get" | "Cache" | "Watch") {
        out.push(err(
            "configMapAndSecretChangeDetectionStrategy",
            format!("unknown configmap and secret manager mode: {strategy}"),
        ));
    }

    let max_size = c.container_log_max_size.as_deref().unwrap_or("");
    let size_error = match Quantity::parse(max_size) {
        Err(e) => Some(e.to_string()),
        Ok(q) if q.nanos() % 1_000_000_000 != 0 || i64::try_from(q.value()).is_err() => {
            Some("invalid max log size".to_string())
        }
        Ok(_) => None,
    };
    if let Some(e) = size_error {
        out.push(err(
            "containerLogMaxSize",
            format!(
                "failed to initialize container log manager: failed to parse container log max size {}: {e}",
                go_quote(max_size)
            ),
        ));
    }

    for (i, s) in c.allowed_unsafe_sysctls.iter().flatten().enumerate() {
        if let Some(e) = sysctl_pattern_error(s) {
            out.push(err(format!("allowedUnsafeSysctls[{i}]"), e));
        }
    }

    // userns.MakeUserNsManager, when the gate is on (the kubelet then uses 65536 if unset).
    if let Some(ids) = c.user_namespaces.as_ref().and_then(|u| u.ids_per_pod)
        && on("UserNamespacesSupport")
    {
        if ids <= 0 || ids > i64::from(u32::MAX) {
            out.push(err(
                "userNamespaces.idsPerPod",
                format!("invalid configuration: userNamespaces.idsPerPod {ids} must be a positive multiple of 65536 that fits in 32 bits"),
            ));
        } else if ids % 65536 != 0 {
            out.push(err(
                "userNamespaces.idsPerPod",
                format!("kubelet user namespace length {ids} is not a multiple of 65536"),
            ));
        }
    }
}

/// The server binds `address` (as `netutils.ParseIPSloppy` reads it) when it serves at
/// all; an address that is not an IP makes the listener, and so the kubelet, exit.
/// cmd/kubelet/app/auth.go BuildAuthz: the kubelet refuses to start with another mode
/// (only when the server is enabled does it build the authorizer).
fn check_authorization_mode(c: &KubeletConfiguration, out: &mut Vec<ValidationError>) {
    if c.enable_server == Some(false) {
        return;
    }
    match c
        .authorization
        .as_ref()
        .and_then(|a| a.mode.as_deref())
        .unwrap_or("")
    {
        "AlwaysAllow" | "Webhook" => {}
        "" => out.push(err("authorization.mode", "no authorization mode specified")),
        other => out.push(err(
            "authorization.mode",
            format!("unknown authorization mode {other}"),
        )),
    }
}

fn check_address(c: &KubeletConfiguration, out: &mut Vec<ValidationError>) {
    let serves = c.enable_server.unwrap_or(false) || c.read_only_port.unwrap_or(0) > 0;
    let address = c.address.as_deref().unwrap_or("");
    if serves && !is_ip_sloppy(address) {
        out.push(err(
            "address",
            format!(
                "invalid configuration: address {} is not a valid IP address",
                go_quote(address)
            ),
        ));
    }
}

/// `netutils.ParseIPSloppy(s) != nil`: Go's `net.ParseIP`, which also accepts IPv4
/// octets with leading zeros.
fn is_ip_sloppy(s: &str) -> bool {
    if s.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    let mut n = 0;
    for part in s.split('.') {
        n += 1;
        if part.is_empty() || part.len() > 10 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
        if part.parse::<u32>().map_or(true, |v| v > 255) {
            return false;
        }
    }
    n == 4
}

/// Go crypto/tls cipher suite names `cliflag.TLSCipherSuites` accepts: `tls.CipherSuites()`,
/// `tls.InsecureCipherSuites()` and two legacy names.
const TLS_CIPHER_SUITES: &[&str] = &[
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
    "TLS_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
];

/// `tls.CurveID` values Go 1.26 names: P-256, P-384, P-521, X25519 and the three hybrid
/// ML-KEM groups.
const TLS_CURVES: &[i32] = &[23, 24, 25, 29, 4587, 4588, 4589];

/// `InitializeTLS`: `cliflag.TLSCipherSuites`, `cliflag.TLSVersion`,
/// `cliflag.TLSCurvePreferences`.
fn check_tls(c: &KubeletConfiguration, out: &mut Vec<ValidationError>) {
    for (i, name) in c.tls_cipher_suites.iter().flatten().enumerate() {
        if !TLS_CIPHER_SUITES.contains(&name.as_str()) {
            out.push(err(
                format!("tlsCipherSuites[{i}]"),
                format!("Cipher suite {name} not supported or doesn't exist"),
            ));
        }
    }
    let version = c.tls_min_version.as_deref().unwrap_or("");
    if !matches!(
        version,
        "" | "VersionTLS10" | "VersionTLS11" | "VersionTLS12" | "VersionTLS13"
    ) {
        out.push(err(
            "tlsMinVersion",
            format!("unknown tls version {}", go_quote(version)),
        ));
    }
    let curves = c.tls_curve_preferences.as_deref().unwrap_or(&[]);
    for (i, &id) in curves.iter().enumerate() {
        let field = || format!("tlsCurvePreferences[{i}]");
        if id <= 0 || id > i32::from(u16::MAX) {
            out.push(err(
                field(),
                format!("curve preference {id} is out of range (must be 1-65535)"),
            ));
        } else if curves[..i].contains(&id) {
            out.push(err(field(), format!("duplicate curve preference {id}")));
        } else if !TLS_CURVES.contains(&id) {
            out.push(err(
                field(),
                format!("curve preference {id} is not supported by the current Go version"),
            ));
        }
    }
}

/// `parseResourceList` on `kubeReserved` or `systemReserved`; returns the reserved CPU in
/// millicores as the kubelet rounds it (0 when absent or invalid).
fn check_reserved(
    map: Option<&BTreeMap<String, String>>,
    field: &str,
    flag: &str,
    cpus_override: bool,
    out: &mut Vec<ValidationError>,
) -> i128 {
    let mut cpu_milli = 0;
    for (k, v) in map.into_iter().flatten() {
        if cpus_override && k == "cpu" {
            // Replaced (systemReserved) or removed (kubeReserved) by reservedSystemCPUs.
            continue;
        }
        let problem = match k.as_str() {
            "cpu" | "memory" | "ephemeral-storage" | "pid" => match Quantity::parse(v) {
                Err(e) => Some(format!(
                    "failed to parse quantity {} for {} resource: {e}",
                    go_quote(v),
                    go_quote(k)
                )),
                Ok(q) if q.is_negative() => Some(format!(
                    "resource quantity for {} cannot be negative: {v}",
                    go_quote(k)
                )),
                Ok(q) => {
                    if k == "cpu" {
                        // q.SetMilli((q.ScaledValue(resource.Micro) + 500) / 1000)
                        let micro = ceil_div(q.nanos(), 1000);
                        cpu_milli = (micro + 500) / 1000;
                    }
                    None
                }
            },
            _ => Some(format!("cannot reserve {} resource", go_quote(k))),
        };
        if let Some(p) = problem {
            out.push(err(
                format!("{field}.{k}"),
                format!("{flag} value failed to parse: {p}"),
            ));
        }
    }
    cpu_milli
}

fn ceil_div(a: i128, b: i128) -> i128 {
    let q = a / b;
    if a % b != 0 && (a > 0) == (b > 0) {
        q + 1
    } else {
        q
    }
}

/// `cm.ParseQOSReserved`.
fn check_qos_reserved(c: &KubeletConfiguration, out: &mut Vec<ValidationError>) {
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
                    go_quote(v),
                    go_quote(k)
                )
            })
        } else {
            Some(format!("cannot reserve {} resource", go_quote(k)))
        };
        if let Some(p) = problem {
            out.push(err(
                format!("qosReserved.{k}"),
                format!("--qos-reserved value failed to parse: {p}"),
            ));
        }
    }
}

// ---------------------------------------------------------------------------------------
// Eviction thresholds (`eviction.ParseThresholdConfig`)

/// The signals `eviction` knows (`signalToResource`).
const EVICTION_SIGNALS: &[&str] = &[
    "memory.available",
    "allocatableMemory.available",
    "imagefs.available",
    "imagefs.inodesFree",
    "containerfs.available",
    "containerfs.inodesFree",
    "nodefs.available",
    "nodefs.inodesFree",
    "pid.available",
];

fn check_eviction(c: &KubeletConfiguration, out: &mut Vec<ValidationError>) {
    for (signal, val) in c.eviction_hard.iter().flatten() {
        if let Err(e) = parse_threshold(signal, val) {
            out.push(err(format!("evictionHard.{signal}"), e));
        }
    }
    let grace = c.eviction_soft_grace_period.as_ref();
    for (signal, val) in c.eviction_soft.iter().flatten() {
        match parse_threshold(signal, val) {
            Err(e) => out.push(err(format!("evictionSoft.{signal}"), e)),
            Ok(true) if !grace.is_some_and(|g| g.contains_key(signal)) => out.push(err(
                format!("evictionSoftGracePeriod.{signal}"),
                format!("grace period must be specified for the soft eviction threshold {signal}"),
            )),
            Ok(_) => {}
        }
    }
    for (signal, val) in grace.into_iter().flatten() {
        let problem = if !EVICTION_SIGNALS.contains(&signal.as_str()) {
            Some(format!("unsupported eviction signal {signal}"))
        } else {
            match Duration::parse(val) {
                Err(e) => Some(e.to_string()),
                Ok(d) if d.is_negative() => Some(format!(
                    "invalid eviction grace period specified: {val}, must be a positive value"
                )),
                Ok(_) => None,
            }
        };
        if let Some(p) = problem {
            out.push(err(format!("evictionSoftGracePeriod.{signal}"), p));
        }
    }
    for (signal, val) in c.eviction_minimum_reclaim.iter().flatten() {
        let problem = if !EVICTION_SIGNALS.contains(&signal.as_str()) {
            Some(format!("unsupported eviction signal {signal}"))
        } else if val.ends_with('%') {
            match parse_percentage(val) {
                Err(e) => Some(e),
                Ok(p) if p <= 0.0 => Some(format!(
                    "eviction percentage minimum reclaim {signal} must be positive: {val}"
                )),
                Ok(_) => None,
            }
        } else {
            match Quantity::parse(val) {
                Err(e) => Some(e.to_string()),
                Ok(q) if q.is_negative() => Some(format!(
                    "negative eviction minimum reclaim specified for {signal}"
                )),
                Ok(_) => None,
            }
        };
        if let Some(p) = problem {
            out.push(err(format!("evictionMinimumReclaim.{signal}"), p));
        }
    }
}

/// `parseThresholdStatement`: `Ok(false)` when the threshold is ignored (`0%`, `100%`).
fn parse_threshold(signal: &str, val: &str) -> Result<bool, String> {
    if !EVICTION_SIGNALS.contains(&signal) {
        return Err(format!("unsupported eviction signal {signal}"));
    }
    if val.ends_with('%') {
        if val == "0%" || val == "100%" {
            return Ok(false);
        }
        let p = parse_percentage(val)?;
        if p < 0.0 {
            return Err(format!(
                "eviction percentage threshold {signal} must be >= 0%: {val}"
            ));
        }
        if p > 1.0 {
            return Err(format!(
                "eviction percentage threshold {signal} must be <= 100%: {val}"
            ));
        }
        return Ok(true);
    }
    let q = Quantity::parse(val).map_err(|e| e.to_string())?;
    if q.is_negative() || q.is_zero() {
        return Err(format!(
            "eviction threshold {signal} must be positive: {}",
            q.canonical()
        ));
    }
    Ok(true)
}

/// `parsePercentage`: `strconv.ParseFloat(strings.TrimRight(v, "%"), 32)`, divided by 100
/// in `float32`.
fn parse_percentage(v: &str) -> Result<f32, String> {
    let num = v.trim_end_matches('%');
    let f = go_parse_float32(num)?;
    Ok(f / 100.0)
}

/// `strconv.ParseFloat(s, 32)` for decimal input, with Go's error messages.
fn go_parse_float32(s: &str) -> Result<f32, String> {
    let syntax = || {
        format!(
            "strconv.ParseFloat: parsing {}: invalid syntax",
            go_quote(s)
        )
    };
    // Rust's parser accepts Go's decimal syntax (and `inf`, `infinity`, `nan`); Go's hex
    // floats (`0x1p-2`) are rejected here, a form no one writes for a percentage.
    let f: f32 = s.parse().map_err(|_| syntax())?;
    let lower = s.trim_start_matches(['+', '-']).to_ascii_lowercase();
    if f.is_infinite() && lower != "inf" && lower != "infinity" {
        return Err(format!(
            "strconv.ParseFloat: parsing {}: value out of range",
            go_quote(s)
        ));
    }
    Ok(f)
}

// ---------------------------------------------------------------------------------------
// cpusets (`cpuset.Parse`)

/// Parses a Linux CPU list (`0-3,8`) as `cpuset.Parse` does; returns how many CPUs it
/// names (saturating). Errors are worded as Go's `strconv.Atoi` and `cpuset.Parse`.
fn parse_cpuset(s: &str) -> Result<usize, String> {
    if s.is_empty() {
        return Ok(0);
    }
    let mut count = 0usize;
    for r in s.split(',') {
        match r.split_once('-') {
            None => {
                go_atoi(r)?;
                count = count.saturating_add(1);
            }
            Some((a, b)) => {
                let start = go_atoi(a)?;
                let end = go_atoi(b)?;
                if start > end {
                    return Err(format!("invalid range {} ({start} > {end})", go_quote(r)));
                }
                let n = end.abs_diff(start).saturating_add(1);
                count = count.saturating_add(usize::try_from(n).unwrap_or(usize::MAX));
            }
        }
    }
    Ok(count)
}

/// `strconv.Atoi`.
fn go_atoi(s: &str) -> Result<i64, String> {
    s.parse::<i64>().map_err(|e| {
        let why = match e.kind() {
            std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                "value out of range"
            }
            _ => "invalid syntax",
        };
        format!("strconv.Atoi: parsing {}: {why}", go_quote(s))
    })
}

// ---------------------------------------------------------------------------------------
// Sysctls (`sysctl.NewAllowlist`)

/// Why the kubelet rejects `s` as an entry of `allowedUnsafeSysctls`, if it does.
fn sysctl_pattern_error(s: &str) -> Option<String> {
    if !is_valid_sysctl_pattern(s) {
        return Some(format!(
            "sysctl {} must have at most 253 characters and match regex ([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]",
            go_quote(s)
        ));
    }
    let s = sysctl_to_dots(s);
    if let Some(prefix) = s.strip_suffix('*') {
        if !sysctl_namespaced(prefix) {
            return Some(format!(
                "the sysctls {} are not known to be namespaced",
                go_quote(&s)
            ));
        }
    } else if !sysctl_namespaced(&s) {
        return Some(format!(
            "the sysctl {} are not known to be namespaced",
            go_quote(&s)
        ));
    }
    None
}

/// `policyvalidation.IsValidSysctlPattern`: at most 253 characters and
/// `([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]`.
fn is_valid_sysctl_pattern(s: &str) -> bool {
    if s.len() > 253 || s.is_empty() {
        return false;
    }
    let segs: Vec<&str> = s.split(['.', '/']).collect();
    let Some((last, init)) = segs.split_last() else {
        return false;
    };
    let seg_ok = |seg: &str| {
        let b = seg.as_bytes();
        !b.is_empty()
            && is_lower_alnum(b[0])
            && is_lower_alnum(b[b.len() - 1])
            && b.iter()
                .all(|c| is_lower_alnum(*c) || matches!(c, b'-' | b'_'))
    };
    let last_ok = {
        let b = last.as_bytes();
        match b.split_last() {
            None => false,
            Some((end, rest)) => {
                (is_lower_alnum(*end) || *end == b'*')
                    && (rest.is_empty()
                        || (is_lower_alnum(rest[0])
                            && rest
                                .iter()
                                .all(|c| is_lower_alnum(*c) || matches!(c, b'-' | b'_'))))
            }
        }
    };
    last_ok && init.iter().all(|seg| seg_ok(seg))
}

/// `ConvertSysctlVariableToDotsSeparator`: `net/ipv4/conf/eth0.100/x` becomes
/// `net.ipv4.conf.eth0/100.x` when the first separator is a slash.
fn sysctl_to_dots(s: &str) -> Cow<'_, str> {
    match s.find(['.', '/']) {
        Some(i) if s.as_bytes()[i] == b'/' => Cow::Owned(
            s.chars()
                .map(|ch| match ch {
                    '.' => '/',
                    '/' => '.',
                    other => other,
                })
                .collect(),
        ),
        _ => Cow::Borrowed(s),
    }
}

/// `utilsysctl.NamespacedBy(s) != UnknownNamespace`.
fn sysctl_namespaced(s: &str) -> bool {
    s == "kernel.sem"
        || ["kernel.shm", "kernel.msg", "fs.mqueue.", "net."]
            .iter()
            .any(|p| s.starts_with(p))
}

// ---------------------------------------------------------------------------------------
// Go formatting

/// Go's `%q` (`strconv.Quote`).
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() || c == '\u{feff}' => {
                if (c as u32) <= 0xffff {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `%v` for a `float64` (`strconv.FormatFloat(f, 'g', -1, 64)`): the shortest
/// digits, in exponent form when the exponent is below -4 or at least 6: `1.1`, `0.5`,
/// `300`, `1e+06`, `1e-05`.
fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    // Rust's `{:e}` gives the shortest round-trip digits, as Go's shortest form does.
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if f < 0.0 { "-" } else { "" };
    if !(-4..6).contains(&exp) {
        let (first, rest) = digits.split_at(1.min(digits.len()));
        let dot = if rest.is_empty() { "" } else { "." };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{dot}{rest}e{esign}{:02}", exp.unsigned_abs());
    }
    let nd = digits.len() as i32;
    let dp = exp + 1;
    if dp <= 0 {
        format!("{sign}0.{}{digits}", "0".repeat(dp.unsigned_abs() as usize))
    } else if dp >= nd {
        format!("{sign}{digits}{}", "0".repeat((dp - nd) as usize))
    } else {
        let (int, frac) = digits.split_at(dp as usize);
        format!("{sign}{int}.{frac}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{
        CrashLoopBackOffConfig, LoggingConfiguration, MemoryReservation, MemorySwapConfiguration,
        ShutdownGracePeriodByPodPriority, TracingConfiguration, UserNamespaces,
    };

    type Cfg = KubeletConfiguration;

    fn s(v: &str) -> Option<String> {
        Some(v.to_string())
    }

    fn map(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
        Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
        )
    }

    fn list(items: &[&str]) -> Option<Vec<String>> {
        Some(items.iter().map(|v| (*v).to_string()).collect())
    }

    fn gate(c: &mut Cfg, name: &str, on: bool) {
        c.feature_gates
            .get_or_insert_with(BTreeMap::new)
            .insert(name.to_string(), on);
    }

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: s(value),
            effect: effect.into(),
            time_added: None,
        }
    }

    fn memory(node: i32, name: &str, q: &str) -> MemoryReservation {
        MemoryReservation {
            numa_node: node,
            limits: [(name.to_string(), Quantity::parse(q).unwrap())].into(),
        }
    }

    /// A config as the kubelet's defaulting leaves it (built by hand, independent of
    /// `crate::defaults`), which the kubelet accepts on any host.
    fn baseline() -> Cfg {
        Cfg {
            enable_server: Some(true),
            authorization: Some(crate::types::KubeletAuthorization {
                mode: s("Webhook"),
                ..Default::default()
            }),
            pod_logs_dir: s("/var/log/pods"),
            sync_frequency: Some(Duration::from_mins(1)),
            file_check_frequency: Some(Duration::from_secs(20)),
            http_check_frequency: Some(Duration::from_secs(20)),
            address: s("0.0.0.0"),
            port: Some(10250),
            registry_pull_qps: Some(5),
            registry_burst: Some(10),
            event_record_qps: Some(50),
            event_burst: Some(100),
            enable_debugging_handlers: Some(true),
            healthz_port: Some(10248),
            healthz_bind_address: s("127.0.0.1"),
            oom_score_adj: Some(-999),
            node_status_update_frequency: Some(Duration::from_secs(10)),
            node_status_report_frequency: Some(Duration::from_mins(5)),
            node_lease_duration_seconds: Some(40),
            image_minimum_gc_age: Some(Duration::from_mins(2)),
            image_gc_high_threshold_percent: Some(85),
            image_gc_low_threshold_percent: Some(80),
            volume_stats_agg_period: Some(Duration::from_mins(1)),
            cgroups_per_qos: Some(true),
            cgroup_driver: s("cgroupfs"),
            cpu_manager_policy: s("none"),
            cpu_manager_reconcile_period: Some(Duration::from_secs(10)),
            dra_manager_reconcile_period: Some(Duration::from_secs(60)),
            memory_manager_policy: s("None"),
            topology_manager_policy: s("none"),
            topology_manager_scope: s("container"),
            runtime_request_timeout: Some(Duration::from_mins(2)),
            hairpin_mode: s("promiscuous-bridge"),
            max_pods: Some(110),
            pod_pids_limit: Some(-1),
            resolv_conf: s("/etc/resolv.conf"),
            cpu_cfs_quota: Some(true),
            cpu_cfs_quota_period: Some(Duration::from_millis(100)),
            node_status_max_images: Some(50),
            max_open_files: Some(1_000_000),
            content_type: s("application/vnd.kubernetes.protobuf"),
            kube_api_qps: Some(50),
            kube_api_burst: Some(100),
            serialize_image_pulls: Some(true),
            eviction_hard: map(&[
                ("imagefs.available", "15%"),
                ("imagefs.inodesFree", "5%"),
                ("memory.available", "100Mi"),
                ("nodefs.available", "10%"),
                ("nodefs.inodesFree", "5%"),
            ]),
            eviction_pressure_transition_period: Some(Duration::from_mins(5)),
            merge_default_eviction_settings: Some(false),
            enable_controller_attach_detach: Some(true),
            make_iptables_util_chains: Some(true),
            iptables_masquerade_bit: Some(14),
            iptables_drop_bit: Some(15),
            fail_swap_on: Some(true),
            memory_swap: Some(MemorySwapConfiguration::default()),
            container_log_max_size: s("10Mi"),
            container_log_max_files: Some(5),
            container_log_max_workers: Some(1),
            container_log_monitor_interval: Some(Duration::from_secs(10)),
            config_map_and_secret_change_detection_strategy: s("Watch"),
            enforce_node_allocatable: list(&["pods"]),
            volume_plugin_dir: s("/usr/libexec/kubernetes/kubelet-plugins/volume/exec/"),
            logging: Some(LoggingConfiguration {
                format: s("text"),
                verbosity: Some(0),
                ..Default::default()
            }),
            enable_system_log_handler: Some(true),
            enable_profiling_handler: Some(true),
            enable_debug_flags_handler: Some(true),
            seccomp_default: Some(false),
            fail_cgroup_v1: Some(false),
            memory_throttling_factor: Some(0.9),
            memory_reservation_policy: s("None"),
            register_node: Some(true),
            local_storage_capacity_isolation: Some(true),
            container_runtime_endpoint: s("unix:///run/containerd/containerd.sock"),
            // Defaults of the gates that are on by default at v1.36.
            crash_loop_backoff: Some(CrashLoopBackOffConfig {
                max_container_restart_period: Some(Duration::from_secs(300)),
            }),
            image_pull_credentials_verification_policy: s("NeverVerifyPreloadedImages"),
            ..Cfg::default()
        }
    }

    const ANY_HOST: HostInfo = HostInfo { cgroup_v2: None };
    const V1_HOST: HostInfo = HostInfo {
        cgroup_v2: Some(false),
    };
    const V2_HOST: HostInfo = HostInfo {
        cgroup_v2: Some(true),
    };

    type Mutation = fn(&mut Cfg);

    fn run(mutate: Mutation, host: &HostInfo) -> Vec<ValidationError> {
        let mut c = baseline();
        mutate(&mut c);
        validate(&c, host)
    }

    #[test]
    fn baseline_is_valid_on_any_host() {
        for host in [ANY_HOST, V1_HOST, V2_HOST] {
            assert_eq!(validate(&baseline(), &host), vec![], "{host:?}");
        }
    }

    /// A rule broken by a mutation of the baseline: (rule, mutation, field, part of the
    /// message, number of errors the mutation causes).
    type Bad = (&'static str, Mutation, &'static str, &'static str, usize);

    #[rustfmt::skip]
    const BAD: &[Bad] = &[
        ("unknown feature gate", |c| gate(c, "NoSuchGate", true), "featureGates.NoSuchGate", "unrecognized feature gate: NoSuchGate", 1),
        ("locked feature gate", |c| gate(c, "NodeSwap", false), "featureGates.NodeSwap", "cannot set feature gate NodeSwap to false, feature is locked to true", 1),
        ("nodeLeaseDurationSeconds", |c| c.node_lease_duration_seconds = Some(0), "nodeLeaseDurationSeconds", "invalid configuration: nodeLeaseDurationSeconds must be greater than 0", 1),
        ("systemCgroups without cgroupRoot", |c| c.system_cgroups = s("/"), "systemCgroups", "systemCgroups (--system-cgroups) was specified and cgroupRoot (--cgroup-root) was not specified", 1),
        ("eventBurst", |c| c.event_burst = Some(-1), "eventBurst", "eventBurst (--event-burst) -1 must not be a negative number", 1),
        ("eventRecordQPS", |c| c.event_record_qps = Some(-1), "eventRecordQPS", "eventRecordQPS (--event-qps) -1 must not be a negative number", 1),
        ("healthzPort", |c| c.healthz_port = Some(65536), "healthzPort", "healthzPort (--healthz-port) 65536 must be between 1 and 65535, inclusive", 1),
        ("cpuCFSQuotaPeriod without gate", |c| { gate(c, "CustomCPUCFSQuotaPeriod", false); c.cpu_cfs_quota_period = Some(Duration::from_millis(200)); }, "cpuCFSQuotaPeriod", "cpuCFSQuotaPeriod (--cpu-cfs-quota-period) {200ms} requires feature gate CustomCPUCFSQuotaPeriod", 1),
        ("cpuCFSQuotaPeriod range", |c| { gate(c, "CustomCPUCFSQuotaPeriod", true); c.cpu_cfs_quota_period = Some(Duration::from_secs(2)); }, "cpuCFSQuotaPeriod", "cpuCFSQuotaPeriod (--cpu-cfs-quota-period) {2s} must be between 1ms and 1sec, inclusive", 1),
        ("imageGCHighThresholdPercent", |c| c.image_gc_high_threshold_percent = Some(101), "imageGCHighThresholdPercent", "imageGCHighThresholdPercent (--image-gc-high-threshold) 101 must be between 0 and 100, inclusive", 1),
        ("imageGCLowThresholdPercent", |c| c.image_gc_low_threshold_percent = Some(-1), "imageGCLowThresholdPercent", "imageGCLowThresholdPercent (--image-gc-low-threshold) -1 must be between 0 and 100, inclusive", 1),
        ("imageGC low not below high", |c| { c.image_gc_high_threshold_percent = Some(0); c.image_gc_low_threshold_percent = Some(0); }, "imageGCLowThresholdPercent", "imageGCLowThresholdPercent (--image-gc-low-threshold) 0 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 0", 1),
        ("imageMaximumGCAge without gate", |c| { gate(c, "ImageMaximumGCAge", false); c.image_maximum_gc_age = Some(Duration::from_mins(10)); }, "imageMaximumGCAge", "ImageMaximumGCAge feature gate is required for Kubelet configuration option imageMaximumGCAge", 2),
        ("imageMinimumGCAge negative", |c| c.image_minimum_gc_age = Some(Duration::from_secs(-1)), "imageMinimumGCAge", "imageMinimumGCAge -1s must not be negative", 1),
        ("imageMaximumGCAge negative", |c| { gate(c, "ImageMaximumGCAge", true); c.image_maximum_gc_age = Some(Duration::from_nanos(-1)); }, "imageMaximumGCAge", "imageMaximumGCAge -1ns must not be negative", 1),
        ("imageMaximumGCAge not above minimum", |c| { gate(c, "ImageMaximumGCAge", true); c.image_maximum_gc_age = Some(Duration::from_nanos(1)); c.image_minimum_gc_age = Some(Duration::from_nanos(2)); }, "imageMaximumGCAge", "imageMaximumGCAge 1ns must be greater than imageMinimumGCAge 2ns", 1),
        ("draManagerReconcilePeriod", |c| c.dra_manager_reconcile_period = Some(Duration::ZERO), "draManagerReconcilePeriod", "draManagerReconcilePeriod 0s must be greater than zero", 1),
        ("iptablesDropBit", |c| c.iptables_drop_bit = Some(32), "iptablesDropBit", "iptablesDropBit (--iptables-drop-bit) 32 must be between 0 and 31, inclusive", 1),
        ("iptablesMasqueradeBit", |c| c.iptables_masquerade_bit = Some(32), "iptablesMasqueradeBit", "iptablesMasqueradeBit (--iptables-masquerade-bit) 32 must be between 0 and 31, inclusive", 1),
        ("kubeAPIBurst", |c| c.kube_api_burst = Some(-1), "kubeAPIBurst", "kubeAPIBurst (--kube-api-burst) -1 must not be a negative number", 1),
        ("kubeAPIQPS", |c| c.kube_api_qps = Some(-1), "kubeAPIQPS", "kubeAPIQPS (--kube-api-qps) -1 must not be a negative number", 1),
        ("nodeStatusMaxImages", |c| c.node_status_max_images = Some(-2), "nodeStatusMaxImages", "nodeStatusMaxImages (--node-status-max-images) -2 must be -1 or greater", 1),
        ("maxOpenFiles", |c| c.max_open_files = Some(-1), "maxOpenFiles", "maxOpenFiles (--max-open-files) -1 must not be a negative number", 1),
        ("maxPods", |c| c.max_pods = Some(-1), "maxPods", "maxPods (--max-pods) -1 must not be a negative number", 1),
        ("oomScoreAdj", |c| c.oom_score_adj = Some(1001), "oomScoreAdj", "oomScoreAdj (--oom-score-adj) 1001 must be between -1000 and 1000, inclusive", 1),
        ("podsPerCore", |c| c.pods_per_core = Some(-1), "podsPerCore", "podsPerCore (--pods-per-core) -1 must not be a negative number", 1),
        ("authorization.mode unknown", |c| c.authorization.get_or_insert_with(Default::default).mode = s("Sometimes"), "authorization.mode", "unknown authorization mode Sometimes", 1),
        ("authorization.mode empty", |c| c.authorization.get_or_insert_with(Default::default).mode = None, "authorization.mode", "no authorization mode specified", 1),
        ("port", |c| c.port = Some(65536), "port", "invalid configuration: port (--port) 65536 must be between 1 and 65535, inclusive", 1),
        ("port unset", |c| c.port = None, "port", "port (--port) 0 must be between 1 and 65535, inclusive", 1),
        ("readOnlyPort", |c| c.read_only_port = Some(65536), "readOnlyPort", "readOnlyPort (--read-only-port) 65536 must be between 0 and 65535, inclusive", 1),
        ("registryBurst", |c| c.registry_burst = Some(-1), "registryBurst", "registryBurst (--registry-burst) -1 must not be a negative number", 1),
        ("registryPullQPS", |c| c.registry_pull_qps = Some(-1), "registryPullQPS", "registryPullQPS (--registry-qps) -1 must not be a negative number", 1),
        ("maxParallelImagePulls", |c| { c.serialize_image_pulls = Some(false); c.max_parallel_image_pulls = Some(0); }, "maxParallelImagePulls", "maxParallelImagePulls 0 must be a positive number", 1),
        ("maxParallelImagePulls with serializeImagePulls", |c| c.max_parallel_image_pulls = Some(3), "maxParallelImagePulls", "maxParallelImagePulls cannot be larger than 1 unless SerializeImagePulls (--serialize-image-pulls) is set to false", 1),
        ("serverTLSBootstrap without gate", |c| { gate(c, "RotateKubeletServerCertificate", false); c.server_tls_bootstrap = Some(true); }, "serverTLSBootstrap", "serverTLSBootstrap true requires feature gate RotateKubeletServerCertificate", 1),
        ("runOnce", |c| c.run_once = Some(true), "runOnce", "runOnce (--runOnce) true, Runonce mode has been deprecated and should not be set", 1),
        ("taint key", |c| c.register_with_taints = Some(vec![taint("bad key", "v", "NoSchedule")]), "registerWithTaints[0].key", "invalid taint: {bad key v NoSchedule <nil>}: invalid taint key: name part must consist of alphanumeric characters", 1),
        ("taint key prefix", |c| c.register_with_taints = Some(vec![taint("Example.com/k", "", "NoSchedule")]), "registerWithTaints[0].key", "invalid taint key: prefix part a lowercase RFC 1123 subdomain", 1),
        ("taint value", |c| c.register_with_taints = Some(vec![taint("ok", "ok", "NoSchedule"), taint("k", "-v", "NoExecute")]), "registerWithTaints[1].value", "invalid taint value: a valid label must be an empty string or consist of alphanumeric characters", 1),
        ("taint effect", |c| c.register_with_taints = Some(vec![taint("k", "v", "Sometimes")]), "registerWithTaints[0].effect", "invalid taint effect: Sometimes, unsupported taint effect", 1),
        ("taint timeAdded", |c| c.register_with_taints = Some(vec![Taint { time_added: s("2024-01-01T00:00:00Z"), ..taint("k", "v", "NoExecute") }]), "registerWithTaints[0].timeAdded", "invalid configuration: taint.TimeAdded is not nil", 1),
        ("topologyManagerPolicy", |c| c.topology_manager_policy = s("invalid-policy"), "topologyManagerPolicy", "topologyManagerPolicy (--topology-manager-policy) \"invalid-policy\" must be one of: [\"none\" \"best-effort\" \"restricted\" \"single-numa-node\"]", 1),
        ("topologyManagerScope", |c| c.topology_manager_scope = s("invalid-scope"), "topologyManagerScope", "topologyManagerScope (--topology-manager-scope) \"invalid-scope\" must be one of: \"container\", or \"pod\"", 1),
        ("shutdownGracePeriodCriticalPods above shutdownGracePeriod", |c| { c.shutdown_grace_period = Some(Duration::from_secs(1)); c.shutdown_grace_period_critical_pods = Some(Duration::from_secs(2)); }, "shutdownGracePeriodCriticalPods", "shutdownGracePeriodCriticalPods {2s} must be <= shutdownGracePeriod {1s}", 1),
        ("shutdownGracePeriod below 1s", |c| c.shutdown_grace_period = Some(Duration::from_millis(1)), "shutdownGracePeriod", "shutdownGracePeriod {1ms} must be either zero or otherwise >= 1 sec", 1),
        ("shutdownGracePeriodCriticalPods below 1s", |c| { c.shutdown_grace_period = Some(Duration::from_secs(30)); c.shutdown_grace_period_critical_pods = Some(Duration::from_millis(1)); }, "shutdownGracePeriodCriticalPods", "shutdownGracePeriodCriticalPods {1ms} must be either zero or otherwise >= 1 sec", 1),
        ("shutdownGracePeriod without gate", |c| { gate(c, "GracefulNodeShutdown", false); gate(c, "GracefulNodeShutdownBasedOnPodPriority", false); gate(c, "WindowsGracefulNodeShutdown", false); c.shutdown_grace_period = Some(Duration::from_secs(1)); }, "shutdownGracePeriod", "specifying shutdownGracePeriod or shutdownGracePeriodCriticalPods requires feature gate GracefulNodeShutdown", 1),
        ("shutdownGracePeriodByPodPriority with shutdownGracePeriod", |c| { c.shutdown_grace_period = Some(Duration::from_secs(30)); c.shutdown_grace_period_by_pod_priority = Some(vec![ShutdownGracePeriodByPodPriority::default()]); }, "shutdownGracePeriodByPodPriority", "Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod at the same time", 1),
        ("shutdownGracePeriodByPodPriority without gate", |c| { gate(c, "GracefulNodeShutdownBasedOnPodPriority", false); c.shutdown_grace_period_by_pod_priority = Some(vec![ShutdownGracePeriodByPodPriority::default()]); }, "shutdownGracePeriodByPodPriority", "Specifying shutdownGracePeriodByPodPriority requires feature gate GracefulNodeShutdownBasedOnPodPriority", 1),
        ("memorySwap.swapBehavior", |c| c.memory_swap = Some(MemorySwapConfiguration { swap_behavior: s("invalid-behavior") }), "memorySwap.swapBehavior", "memorySwap.swapBehavior \"invalid-behavior\" must be one of: \"\", \"LimitedSwap\" or \"NoSwap\"", 1),
        ("crashLoopBackOff unset with gate", |c| c.crash_loop_backoff = None, "crashLoopBackOff.maxContainerRestartPeriod", "FeatureGate KubeletCrashLoopBackOffMax is enabled, CrashLoopBackOff.MaxContainerRestartPeriod must be set", 1),
        ("crashLoopBackOff range", |c| { gate(c, "KubeletCrashLoopBackOffMax", true); c.crash_loop_backoff = Some(CrashLoopBackOffConfig { max_container_restart_period: Some(Duration::from_millis(500)) }); }, "crashLoopBackOff.maxContainerRestartPeriod", "CrashLoopBackOff.MaxContainerRestartPeriod (got: 0.5 seconds) must be set between 1s and 300s", 1),
        ("crashLoopBackOff without gate", |c| gate(c, "KubeletCrashLoopBackOffMax", false), "crashLoopBackOff.maxContainerRestartPeriod", "FeatureGate KubeletCrashLoopBackOffMax not enabled, CrashLoopBackOff.MaxContainerRestartPeriod must not be set", 1),
        ("system-reserved with its compressible form", |c| { c.system_reserved_cgroup = s("/system.slice"); c.enforce_node_allocatable = list(&["system-reserved-compressible", "system-reserved"]); }, "enforceNodeAllocatable", "both \"system-reserved\" and \"system-reserved-compressible\" cannot be specified together", 1),
        ("kube-reserved with its compressible form", |c| { c.kube_reserved_cgroup = s("/kubelet.slice"); c.enforce_node_allocatable = list(&["kube-reserved", "kube-reserved-compressible"]); }, "enforceNodeAllocatable", "both \"kube-reserved\" and \"kube-reserved-compressible\" cannot be specified together", 1),
        ("duplicated enforcement", |c| c.enforce_node_allocatable = list(&["pods", "pods"]), "enforceNodeAllocatable[1]", "duplicated enforcements \"pods\" in enforceNodeAllocatable (--enforce-node-allocatable)", 1),
        ("system-reserved without cgroup", |c| c.enforce_node_allocatable = list(&["pods", "system-reserved"]), "systemReservedCgroup", "systemReservedCgroup (--system-reserved-cgroup) must be specified when \"system-reserved\" or \"system-reserved-compressible\" included", 1),
        ("kube-reserved-compressible without cgroup", |c| c.enforce_node_allocatable = list(&["kube-reserved-compressible"]), "kubeReservedCgroup", "kubeReservedCgroup (--kube-reserved-cgroup) must be specified when \"kube-reserved\" or \"kube-reserved-compressible\" included", 1),
        ("none with other enforcements", |c| c.enforce_node_allocatable = list(&["none", "pods"]), "enforceNodeAllocatable", "may not contain additional enforcements when \"none\" is specified", 1),
        ("unknown enforcement", |c| c.enforce_node_allocatable = list(&["invalid-enforce-node-allocatable"]), "enforceNodeAllocatable[0]", "option \"invalid-enforce-node-allocatable\" specified for enforceNodeAllocatable (--enforce-node-allocatable). Valid options are \"pods\", \"system-reserved\", \"system-reserved-compressible\", \"kube-reserved\", \"kube-reserved-compressible\" or \"none\"", 1),
        ("enforcement without cgroupsPerQOS", |c| c.cgroups_per_qos = Some(false), "cgroupsPerQOS", "cgroupsPerQOS (--cgroups-per-qos) must be set to true when \"pods\" contained in enforceNodeAllocatable (--enforce-node-allocatable)", 1),
        ("hairpinMode", |c| c.hairpin_mode = s("invalid-hair-pin-mode"), "hairpinMode", "option \"invalid-hair-pin-mode\" specified for hairpinMode (--hairpin-mode). Valid options are \"none\", \"hairpin-veth\" or \"promiscuous-bridge\"", 1),
        ("imagePullCredentialsVerificationPolicy value", |c| { gate(c, "KubeletEnsureSecretPulledImages", true); c.image_pull_credentials_verification_policy = s("Sometimes"); }, "imagePullCredentialsVerificationPolicy", "option \"Sometimes\" specified for imagePullCredentialsVerificationPolicy. Valid options are", 1),
        ("allowlist needs NeverVerifyAllowlistedImages", |c| { gate(c, "KubeletEnsureSecretPulledImages", true); c.image_pull_credentials_verification_policy = s("AlwaysVerify"); c.preloaded_images_verification_allowlist = list(&["registry.k8s.io/pause"]); }, "preloadedImagesVerificationAllowlist", "can't set `preloadedImagesVerificationAllowlist` if `imagePullCredentialsVertificationPolicy` is not \"NeverVerifyAllowlistedImages\"", 1),
        ("allowlist pattern", |c| { gate(c, "KubeletEnsureSecretPulledImages", true); c.image_pull_credentials_verification_policy = s("NeverVerifyAllowlistedImages"); c.preloaded_images_verification_allowlist = list(&["registry.k8s.io/*", "registry.k8s.io/pause:3.10"]); }, "preloadedImagesVerificationAllowlist[1]", "invalid image pattern in `preloadedImagesVerificationAllowlist`: neither tag nor digest is accepted in an image reference: registry.k8s.io/pause:3.10", 1),
        ("imagePullCredentialsVerificationPolicy without gate", |c| { gate(c, "KubeletEnsureSecretPulledImages", false); c.image_pull_credentials_verification_policy = s("AlwaysVerify"); }, "imagePullCredentialsVerificationPolicy", "`imagePullCredentialsVerificationPolicy` must not be set if KubeletEnsureSecretPulledImages feature gate is not enabled", 1),
        ("allowlist without gate", |c| { gate(c, "KubeletEnsureSecretPulledImages", false); c.image_pull_credentials_verification_policy = None; c.preloaded_images_verification_allowlist = list(&["registry.k8s.io/*"]); }, "preloadedImagesVerificationAllowlist", "`preloadedImagesVerificationAllowlist` must not be set if KubeletEnsureSecretPulledImages feature gate is not enabled", 1),
        ("reservedSystemCPUs with a reserved cgroup", |c| { c.reserved_system_cpus = s("0-3"); c.system_reserved_cgroup = s("/system.slice"); }, "reservedSystemCPUs", "can't use reservedSystemCPUs (--reserved-cpus) with systemReservedCgroup (--system-reserved-cgroup) or kubeReservedCgroup (--kube-reserved-cgroup)", 1),
        ("reservedSystemCPUs syntax", |c| c.reserved_system_cpus = s("invalid-reserved-system-cpus"), "reservedSystemCPUs", "unable to parse reservedSystemCPUs (--reserved-cpus) invalid-reserved-system-cpus, error: strconv.Atoi: parsing \"invalid\": invalid syntax", 1),
        ("reservedSystemCPUs range", |c| c.reserved_system_cpus = s("3-1"), "reservedSystemCPUs", "error: invalid range \"3-1\" (3 > 1)", 1),
        ("reservedMemory", |c| c.reserved_memory = Some(vec![memory(0, "cpu", "1")]), "reservedMemory[0].limits.cpu", "the limit type \"cpu\" for NUMA node 0 is not supported", 1),
        ("showHiddenMetricsForVersion", |c| c.show_hidden_metrics_for_version = s("1.20"), "showHiddenMetricsForVersion", "--show-hidden-metrics-for-version must be omitted or have the value '1.35'. Only the previous minor version is allowed", 1),
        ("logging", |c| c.logging = Some(LoggingConfiguration { format: s("invalid"), ..Default::default() }), "logging.format", "Invalid value: \"invalid\": Unsupported log format", 1),
        ("tracing", |c| c.tracing = Some(TracingConfiguration { endpoint: None, sampling_rate_per_million: Some(-1) }), "tracing.samplingRatePerMillion", "Invalid value: -1: sampling rate must be positive", 1),
        ("memoryThrottlingFactor required by MemoryQoS", |c| { gate(c, "MemoryQoS", true); c.memory_throttling_factor = None; }, "memoryThrottlingFactor", "memoryThrottlingFactor is required when MemoryQoS feature flag is enabled", 1),
        ("memoryThrottlingFactor range", |c| c.memory_throttling_factor = Some(1.1), "memoryThrottlingFactor", "memoryThrottlingFactor 1.1 must be greater than 0 and less than or equal to 1.0", 1),
        ("TieredReservation without MemoryQoS", |c| c.memory_reservation_policy = s("TieredReservation"), "memoryReservationPolicy", "memoryReservationPolicy \"TieredReservation\" requires MemoryQoS feature gate to be enabled", 1),
        ("memoryReservationPolicy value", |c| c.memory_reservation_policy = s("Some"), "memoryReservationPolicy", "option \"Some\" specified for memoryReservationPolicy. Valid options are \"None\" or \"TieredReservation\"", 1),
        ("containerRuntimeEndpoint", |c| c.container_runtime_endpoint = s(""), "containerRuntimeEndpoint", "the containerRuntimeEndpoint was not specified or empty", 1),
        ("enableSystemLogQuery without gate", |c| { gate(c, "NodeLogQuery", false); c.enable_system_log_query = Some(true); }, "enableSystemLogQuery", "NodeLogQuery feature gate is required for enableSystemLogQuery", 2),
        ("enableSystemLogQuery without handler", |c| { gate(c, "NodeLogQuery", true); c.enable_system_log_handler = Some(false); c.enable_system_log_query = Some(true); }, "enableSystemLogHandler", "enableSystemLogHandler is required for enableSystemLogQuery", 1),
        ("containerLogMaxWorkers", |c| c.container_log_max_workers = Some(0), "containerLogMaxWorkers", "containerLogMaxWorkers must be greater than or equal to 1", 1),
        ("containerLogMonitorInterval", |c| c.container_log_monitor_interval = Some(Duration::from_secs(2)), "containerLogMonitorInterval", "containerLogMonitorInterval must be a positive time duration greater than or equal to 3s", 1),
        ("containerLogMaxFiles", |c| c.container_log_max_files = Some(1), "containerLogMaxFiles", "containerLogMaxFiles must be greater than 1", 1),
        ("podLogsDir empty", |c| c.pod_logs_dir = s(""), "podLogsDir", "invalid configuration: podLogsDir was not specified", 3),
        ("podLogsDir relative", |c| c.pod_logs_dir = s("./test"), "podLogsDir", "pod logs path \"./test\" must be absolute path", 2),
        ("podLogsDir not normalized", |c| c.pod_logs_dir = s("/path/../"), "podLogsDir", "pod logs path \"/path/../\" must be normalized", 1),
        ("podLogsDir not ASCII", |c| c.pod_logs_dir = s("/🧪"), "podLogsDir", "pod logs path \"/🧪\" mut contains ASCII characters only", 1),
        ("syncFrequency", |c| c.sync_frequency = Some(Duration::ZERO), "syncFrequency", "invalid sync frequency 0", 1),
        ("address", |c| c.address = s("localhost"), "address", "address \"localhost\" is not a valid IP address", 1),
        ("tlsCipherSuites", |c| c.tls_cipher_suites = list(&["TLS_AES_128_GCM_SHA256", "TLS_FOO"]), "tlsCipherSuites[1]", "Cipher suite TLS_FOO not supported or doesn't exist", 1),
        ("tlsMinVersion", |c| c.tls_min_version = s("VersionTLS14"), "tlsMinVersion", "unknown tls version \"VersionTLS14\"", 1),
        ("tlsCurvePreferences range", |c| c.tls_curve_preferences = Some(vec![29, 70000]), "tlsCurvePreferences[1]", "curve preference 70000 is out of range (must be 1-65535)", 1),
        ("tlsCurvePreferences duplicate", |c| c.tls_curve_preferences = Some(vec![29, 23, 29]), "tlsCurvePreferences[2]", "duplicate curve preference 29", 1),
        ("tlsCurvePreferences unknown", |c| c.tls_curve_preferences = Some(vec![42]), "tlsCurvePreferences[0]", "curve preference 42 is not supported by the current Go version", 1),
        ("kubeReserved resource", |c| c.kube_reserved = map(&[("gpu", "1")]), "kubeReserved.gpu", "--kube-reserved value failed to parse: cannot reserve \"gpu\" resource", 1),
        ("systemReserved quantity", |c| c.system_reserved = map(&[("memory", "1GB")]), "systemReserved.memory", "--system-reserved value failed to parse: failed to parse quantity \"1GB\" for \"memory\" resource: quantities must match the regular expression", 1),
        ("systemReserved negative", |c| c.system_reserved = map(&[("cpu", "-1")]), "systemReserved.cpu", "--system-reserved value failed to parse: resource quantity for \"cpu\" cannot be negative: -1", 1),
        ("evictionHard signal", |c| c.eviction_hard = map(&[("memory.free", "1Gi")]), "evictionHard.memory.free", "unsupported eviction signal memory.free", 1),
        ("evictionHard percentage", |c| c.eviction_hard = map(&[("nodefs.available", "101%")]), "evictionHard.nodefs.available", "eviction percentage threshold nodefs.available must be <= 100%: 101%", 1),
        ("evictionHard negative percentage", |c| c.eviction_hard = map(&[("nodefs.available", "-5%")]), "evictionHard.nodefs.available", "eviction percentage threshold nodefs.available must be >= 0%: -5%", 1),
        ("evictionHard percentage syntax", |c| c.eviction_hard = map(&[("nodefs.available", "ten%")]), "evictionHard.nodefs.available", "strconv.ParseFloat: parsing \"ten\": invalid syntax", 1),
        ("evictionHard quantity", |c| c.eviction_hard = map(&[("memory.available", "0")]), "evictionHard.memory.available", "eviction threshold memory.available must be positive: 0", 1),
        ("evictionHard quantity syntax", |c| c.eviction_hard = map(&[("memory.available", "lots")]), "evictionHard.memory.available", "quantities must match the regular expression", 1),
        ("evictionSoft without grace period", |c| c.eviction_soft = map(&[("memory.available", "500Mi")]), "evictionSoftGracePeriod.memory.available", "grace period must be specified for the soft eviction threshold memory.available", 1),
        ("evictionSoft threshold", |c| { c.eviction_soft = map(&[("memory.available", "-1Gi")]); c.eviction_soft_grace_period = map(&[("memory.available", "1m")]); }, "evictionSoft.memory.available", "eviction threshold memory.available must be positive: -1Gi", 1),
        ("evictionSoftGracePeriod duration", |c| { c.eviction_soft = map(&[("memory.available", "500Mi")]); c.eviction_soft_grace_period = map(&[("memory.available", "soon")]); }, "evictionSoftGracePeriod.memory.available", "time: invalid duration \"soon\"", 1),
        ("evictionSoftGracePeriod negative", |c| { c.eviction_soft = map(&[("memory.available", "500Mi")]); c.eviction_soft_grace_period = map(&[("memory.available", "-1m")]); }, "evictionSoftGracePeriod.memory.available", "invalid eviction grace period specified: -1m, must be a positive value", 1),
        ("evictionSoftGracePeriod signal", |c| c.eviction_soft_grace_period = map(&[("cpu.available", "1m")]), "evictionSoftGracePeriod.cpu.available", "unsupported eviction signal cpu.available", 1),
        ("evictionMinimumReclaim percentage", |c| c.eviction_minimum_reclaim = map(&[("imagefs.available", "0%")]), "evictionMinimumReclaim.imagefs.available", "eviction percentage minimum reclaim imagefs.available must be positive: 0%", 1),
        ("evictionMinimumReclaim negative", |c| c.eviction_minimum_reclaim = map(&[("imagefs.available", "-2Gi")]), "evictionMinimumReclaim.imagefs.available", "negative eviction minimum reclaim specified for imagefs.available", 1),
        ("evictionMinimumReclaim signal", |c| c.eviction_minimum_reclaim = map(&[("disk.available", "1Gi")]), "evictionMinimumReclaim.disk.available", "unsupported eviction signal disk.available", 1),
        ("qosReserved resource", |c| c.qos_reserved = map(&[("cpu", "50%")]), "qosReserved.cpu", "--qos-reserved value failed to parse: cannot reserve \"cpu\" resource", 1),
        ("qosReserved percentage", |c| c.qos_reserved = map(&[("memory", "50")]), "qosReserved.memory", "failed to parse percentage \"50\" for \"memory\" resource: percentage expected, got '50'", 1),
        ("qosReserved range", |c| c.qos_reserved = map(&[("memory", "150%")]), "qosReserved.memory", "percentage must be between 0 and 100", 1),
        ("cpuManagerPolicy", |c| c.cpu_manager_policy = s("Static"), "cpuManagerPolicy", "unknown policy: \"Static\"", 1),
        ("static cpuManagerPolicy without reserved CPU", |c| { c.cpu_manager_policy = s("static"); c.kube_reserved = map(&[("cpu", "100u")]); }, "cpuManagerPolicy", "[cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero", 1),
        ("memoryManagerPolicy", |c| c.memory_manager_policy = s("static"), "memoryManagerPolicy", "unknown policy: \"static\"", 1),
        ("configMapAndSecretChangeDetectionStrategy", |c| c.config_map_and_secret_change_detection_strategy = s("Poll"), "configMapAndSecretChangeDetectionStrategy", "unknown configmap and secret manager mode: Poll", 1),
        ("containerLogMaxSize syntax", |c| c.container_log_max_size = s("10MB"), "containerLogMaxSize", "failed to parse container log max size \"10MB\": quantities must match the regular expression", 1),
        ("containerLogMaxSize fraction", |c| c.container_log_max_size = s("1500m"), "containerLogMaxSize", "failed to parse container log max size \"1500m\": invalid max log size", 1),
        ("allowedUnsafeSysctls syntax", |c| c.allowed_unsafe_sysctls = list(&["net.core.somaxconn", "Net.*"]), "allowedUnsafeSysctls[1]", "sysctl \"Net.*\" must have at most 253 characters and match regex", 1),
        ("allowedUnsafeSysctls namespace", |c| c.allowed_unsafe_sysctls = list(&["kernel.domainname"]), "allowedUnsafeSysctls[0]", "the sysctl \"kernel.domainname\" are not known to be namespaced", 1),
        ("allowedUnsafeSysctls pattern namespace", |c| c.allowed_unsafe_sysctls = list(&["vm.*"]), "allowedUnsafeSysctls[0]", "the sysctls \"vm.*\" are not known to be namespaced", 1),
        ("userNamespaces.idsPerPod multiple", |c| c.user_namespaces = Some(UserNamespaces { ids_per_pod: Some(100_000) }), "userNamespaces.idsPerPod", "kubelet user namespace length 100000 is not a multiple of 65536", 1),
        ("userNamespaces.idsPerPod range", |c| c.user_namespaces = Some(UserNamespaces { ids_per_pod: Some(0) }), "userNamespaces.idsPerPod", "userNamespaces.idsPerPod 0 must be a positive multiple of 65536", 1),
    ];

    #[test]
    fn every_rule_rejects_its_bad_value() {
        let mut failures = Vec::new();
        for (rule, mutate, field, part, n) in BAD {
            let errs = run(*mutate, &ANY_HOST);
            let found = errs
                .iter()
                .any(|e| e.field == *field && e.message.contains(part));
            if errs.len() != *n || !found {
                failures.push(format!(
                    "{rule}: want {n} error(s), one on {field} containing {part:?}; got {errs:#?}"
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    /// A host-dependent rule: (rule, mutation, field, part of the message).
    type BadOnCgroupV1 = (&'static str, Mutation, &'static str, &'static str);

    #[rustfmt::skip]
    const BAD_ON_CGROUP_V1: &[BadOnCgroupV1] = &[
        ("failCgroupV1", |c| c.fail_cgroup_v1 = Some(true), "failCgroupV1", "kubelet is configured to not run on a host using cgroup v1. cgroup v1 support is in maintenance mode"),
        ("singleProcessOOMKill", |c| c.single_process_oom_kill = Some(false), "singleProcessOOMKill", "singleProcessOOMKill must not be explicitly set to false when using cgroup v1"),
        ("LimitedSwap", |c| c.memory_swap = Some(MemorySwapConfiguration { swap_behavior: s("LimitedSwap") }), "memorySwap.swapBehavior", "swap feature is enabled and LimitedSwap but it is only supported with cgroupv2"),
    ];

    #[test]
    fn host_rules_apply_only_where_the_host_is_known() {
        for (rule, mutate, field, part) in BAD_ON_CGROUP_V1 {
            let errs = run(*mutate, &V1_HOST);
            assert_eq!(errs.len(), 1, "{rule}: {errs:#?}");
            assert_eq!(errs[0].field, *field, "{rule}");
            assert!(errs[0].message.contains(part), "{rule}: {}", errs[0]);
            assert_eq!(run(*mutate, &V2_HOST), vec![], "{rule} on cgroup v2");
            assert_eq!(run(*mutate, &ANY_HOST), vec![], "{rule} on an unknown host");
        }
        // failCgroupV1 is reported alone: upstream returns at the first OS problem.
        let both = run(
            |c| {
                c.fail_cgroup_v1 = Some(true);
                c.single_process_oom_kill = Some(false);
            },
            &V1_HOST,
        );
        assert_eq!(both.len(), 1, "{both:#?}");
        assert_eq!(both[0].field, "failCgroupV1");
        let true_on_v1 = run(|c| c.single_process_oom_kill = Some(true), &V1_HOST);
        assert_eq!(true_on_v1, vec![]);
    }

    /// Values at the edge of each rule that the kubelet accepts: (what, mutation).
    type Good = (&'static str, Mutation);

    #[rustfmt::skip]
    const GOOD: &[Good] = &[
        ("known feature gates", |c| { gate(c, "MemoryQoS", false); gate(c, "NodeSwap", true); }),
        ("healthzPort disabled", |c| c.healthz_port = Some(0)),
        ("authorization AlwaysAllow", |c| c.authorization.get_or_insert_with(Default::default).mode = s("AlwaysAllow")),
        ("no authorizer without the server", |c| { c.enable_server = Some(false); c.authorization.get_or_insert_with(Default::default).mode = s("Sometimes"); }),
        ("ports at the edges", |c| { c.port = Some(1); c.healthz_port = Some(65535); c.read_only_port = Some(65535); }),
        ("cpuCFSQuotaPeriod 1ms with gate", |c| { gate(c, "CustomCPUCFSQuotaPeriod", true); c.cpu_cfs_quota_period = Some(Duration::from_millis(1)); }),
        ("cpuCFSQuotaPeriod 1s with gate", |c| { gate(c, "CustomCPUCFSQuotaPeriod", true); c.cpu_cfs_quota_period = Some(Duration::from_secs(1)); }),
        ("imageGC thresholds at the edges", |c| { c.image_gc_high_threshold_percent = Some(100); c.image_gc_low_threshold_percent = Some(0); }),
        ("imageMaximumGCAge with gate", |c| { gate(c, "ImageMaximumGCAge", true); c.image_maximum_gc_age = Some(Duration::from_hours(24)); }),
        ("iptables bits at the edges", |c| { c.iptables_drop_bit = Some(0); c.iptables_masquerade_bit = Some(31); }),
        ("zero limits", |c| { c.event_burst = Some(0); c.event_record_qps = Some(0); c.kube_api_burst = Some(0); c.kube_api_qps = Some(0); c.max_open_files = Some(0); c.max_pods = Some(0); c.pods_per_core = Some(0); c.registry_burst = Some(0); c.registry_pull_qps = Some(0); }),
        ("nodeStatusMaxImages -1", |c| c.node_status_max_images = Some(-1)),
        ("oomScoreAdj at the edge", |c| c.oom_score_adj = Some(-1000)),
        ("maxParallelImagePulls 1 with serializeImagePulls", |c| c.max_parallel_image_pulls = Some(1)),
        ("maxParallelImagePulls 5 without serializeImagePulls", |c| { c.serialize_image_pulls = Some(false); c.max_parallel_image_pulls = Some(5); }),
        ("serverTLSBootstrap with gate", |c| { gate(c, "RotateKubeletServerCertificate", true); c.server_tls_bootstrap = Some(true); }),
        ("valid taints", |c| c.register_with_taints = Some(vec![taint("node-role.kubernetes.io/control-plane", "", "NoSchedule"), taint("example.com/dedicated", "gpu_v1.2", "PreferNoSchedule"), taint("k", "v", "")])),
        ("topology manager policy and scope", |c| { c.topology_manager_policy = s("single-numa-node"); c.topology_manager_scope = s("pod"); }),
        ("graceful shutdown", |c| { c.shutdown_grace_period = Some(Duration::from_secs(30)); c.shutdown_grace_period_critical_pods = Some(Duration::from_secs(10)); }),
        ("graceful shutdown by priority", |c| c.shutdown_grace_period_by_pod_priority = Some(vec![ShutdownGracePeriodByPodPriority { priority: 0, shutdown_grace_period_seconds: 30 }])),
        ("swap behavior", |c| c.memory_swap = Some(MemorySwapConfiguration { swap_behavior: s("NoSwap") })),
        ("crashLoopBackOff 300s with gate", |c| { gate(c, "KubeletCrashLoopBackOffMax", true); c.crash_loop_backoff = Some(CrashLoopBackOffConfig { max_container_restart_period: Some(Duration::from_secs(300)) }); }),
        ("crashLoopBackOff 1s with gate", |c| { gate(c, "KubeletCrashLoopBackOffMax", true); c.crash_loop_backoff = Some(CrashLoopBackOffConfig { max_container_restart_period: Some(Duration::from_secs(1)) }); }),
        ("enforcements with their cgroups", |c| { c.system_reserved_cgroup = s("/system.slice"); c.kube_reserved_cgroup = s("/kubelet.slice"); c.enforce_node_allocatable = list(&["pods", "system-reserved-compressible", "kube-reserved"]); }),
        ("enforcement none", |c| { c.cgroups_per_qos = Some(false); c.enforce_node_allocatable = list(&["none"]); }),
        ("no enforcement without cgroupsPerQOS", |c| { c.cgroups_per_qos = Some(false); c.enforce_node_allocatable = Some(vec![]); }),
        ("hairpin veth", |c| c.hairpin_mode = s("hairpin-veth")),
        ("image credential verification with gate", |c| { gate(c, "KubeletEnsureSecretPulledImages", true); c.image_pull_credentials_verification_policy = s("NeverVerifyAllowlistedImages"); c.preloaded_images_verification_allowlist = list(&["registry.k8s.io/*", "registry.k8s.io/pause", "localhost:5000/team/app"]); }),
        ("reservedSystemCPUs", |c| c.reserved_system_cpus = s("0-1,4")),
        ("reservedMemory", |c| c.reserved_memory = Some(vec![memory(0, "memory", "1Gi"), memory(1, "memory", "1Gi")])),
        ("showHiddenMetricsForVersion", |c| c.show_hidden_metrics_for_version = s("1.35")),
        ("tracing", |c| c.tracing = Some(TracingConfiguration { endpoint: s("otel-collector:4317"), sampling_rate_per_million: Some(100) })),
        ("MemoryQoS with throttling factor", |c| { gate(c, "MemoryQoS", true); c.memory_throttling_factor = Some(1.0); c.memory_reservation_policy = s("TieredReservation"); }),
        ("no throttling factor without MemoryQoS", |c| c.memory_throttling_factor = None),
        ("node log query", |c| { gate(c, "NodeLogQuery", true); c.enable_system_log_query = Some(true); }),
        ("container log settings at the edges", |c| { c.container_log_max_workers = Some(1); c.container_log_monitor_interval = Some(Duration::from_secs(3)); c.container_log_max_files = Some(2); c.container_log_max_size = s("-1"); }),
        ("podLogsDir", |c| c.pod_logs_dir = s("/var/log/pods-2")),
        ("sync frequency", |c| c.sync_frequency = Some(Duration::from_nanos(1))),
        ("IPv6 address", |c| c.address = s("::")),
        ("sloppy IPv4 address", |c| c.address = s("010.000.000.001")),
        ("no address needed without a server", |c| { c.enable_server = Some(false); c.address = s("localhost"); }),
        ("TLS settings", |c| { c.tls_cipher_suites = list(&["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", "TLS_RSA_WITH_AES_128_CBC_SHA"]); c.tls_min_version = s("VersionTLS12"); c.tls_curve_preferences = Some(vec![4588, 29, 23]); }),
        ("reserved resources", |c| { c.kube_reserved = map(&[("cpu", "500m"), ("memory", "1Gi"), ("ephemeral-storage", "1Gi"), ("pid", "1000")]); c.system_reserved = map(&[("cpu", "0"), ("memory", "0")]); }),
        ("reservedSystemCPUs replaces reserved cpu", |c| { c.reserved_system_cpus = s("0"); c.kube_reserved = map(&[("cpu", "-1")]); c.cpu_manager_policy = s("static"); }),
        ("static cpu manager with reserved cpu", |c| { c.cpu_manager_policy = s("static"); c.system_reserved = map(&[("cpu", "100m")]); }),
        ("eviction settings", |c| { c.eviction_hard = map(&[("memory.available", "0%"), ("pid.available", "100%"), ("nodefs.available", "10.5%"), ("allocatableMemory.available", "1Mi")]); c.eviction_soft = map(&[("memory.available", "1Gi"), ("nodefs.available", "0%")]); c.eviction_soft_grace_period = map(&[("memory.available", "1m30s")]); c.eviction_minimum_reclaim = map(&[("memory.available", "0"), ("imagefs.available", "5%")]); }),
        ("empty evictionHard", |c| c.eviction_hard = Some(BTreeMap::new())),
        ("qosReserved", |c| c.qos_reserved = map(&[("memory", "100%")])),
        ("managers", |c| { c.memory_manager_policy = s("Static"); c.config_map_and_secret_change_detection_strategy = s("Cache"); }),
        ("allowedUnsafeSysctls", |c| c.allowed_unsafe_sysctls = list(&["kernel.shm*", "kernel.msg*", "kernel.sem", "fs.mqueue.*", "net.*", "net/ipv4/conf/eth0.100/forwarding", "net.ipv4.ip_local_port_range"])),
        ("userNamespaces.idsPerPod", |c| c.user_namespaces = Some(UserNamespaces { ids_per_pod: Some(131_072) })),
        ("no image credential verification without gate", |c| { gate(c, "KubeletEnsureSecretPulledImages", false); c.image_pull_credentials_verification_policy = None; }),
        ("no crashLoopBackOff without gate", |c| { gate(c, "KubeletCrashLoopBackOffMax", false); c.crash_loop_backoff = Some(CrashLoopBackOffConfig::default()); }),
    ];

    #[test]
    fn every_rule_accepts_its_edge_values() {
        let failures: Vec<String> = GOOD
            .iter()
            .filter_map(|(what, mutate)| {
                let errs = run(*mutate, &ANY_HOST);
                (!errs.is_empty()).then(|| format!("{what}: {errs:#?}"))
            })
            .collect();
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn errors_are_all_reported_in_a_stable_order() {
        let mutate: Mutation = |c| {
            gate(c, "Unknown", true);
            c.port = Some(0);
            c.hairpin_mode = s("x");
            c.eviction_hard = map(&[("b.available", "1"), ("a.available", "1")]);
            c.container_log_max_files = Some(0);
        };
        let fields: Vec<String> = run(mutate, &ANY_HOST)
            .into_iter()
            .map(|e| e.field)
            .collect();
        assert_eq!(
            fields,
            [
                "featureGates.Unknown",
                "port",
                "hairpinMode",
                "containerLogMaxFiles",
                "evictionHard.a.available",
                "evictionHard.b.available"
            ]
        );
        assert_eq!(run(mutate, &ANY_HOST), run(mutate, &ANY_HOST));
    }

    #[test]
    fn unset_fields_read_as_go_zero_values() {
        let errs = validate(&Cfg::default(), &ANY_HOST);
        for field in [
            "nodeLeaseDurationSeconds",
            "port",
            "imageGCLowThresholdPercent",
            "topologyManagerPolicy",
            "hairpinMode",
            "logging.format",
            "containerRuntimeEndpoint",
            "podLogsDir",
            "syncFrequency",
            "memoryReservationPolicy",
            "configMapAndSecretChangeDetectionStrategy",
        ] {
            assert!(
                errs.iter().any(|e| e.field == field),
                "{field} missing from {errs:#?}"
            );
        }
        // The (unset, so false) server does not bind the (unset) address.
        assert!(!errs.iter().any(|e| e.field == "address"));
    }

    #[test]
    fn display_is_field_then_message() {
        let errs = run(|c| c.port = Some(0), &ANY_HOST);
        assert_eq!(
            errs[0].to_string(),
            "port: invalid configuration: port (--port) 0 must be between 1 and 65535, inclusive"
        );
    }

    #[test]
    fn go_formatting_helpers() {
        assert_eq!(go_float(1.1), "1.1");
        assert_eq!(go_float(0.5), "0.5");
        assert_eq!(go_float(300.0), "300");
        assert_eq!(go_float(123456.0), "123456");
        assert_eq!(go_float(1e6), "1e+06");
        assert_eq!(go_float(1234567.0), "1.234567e+06");
        assert_eq!(go_float(0.0001), "0.0001");
        assert_eq!(go_float(0.00001), "1e-05");
        assert_eq!(go_float(-2.5), "-2.5");
        assert_eq!(go_quote("a\"b\\c\n\u{1}é"), "\"a\\\"b\\\\c\\n\\x01é\"");
    }

    #[test]
    fn clean_paths_as_go_cleans_them() {
        for p in ["/", "/var/log/pods", ".", "a/b", "../a", "../../a"] {
            assert!(is_clean_path(p), "{p}");
        }
        for p in [
            "",
            "/var/",
            "//var",
            "/var//log",
            "/./var",
            "/var/.",
            "/..",
            "/a/../b",
            "a/../b",
            "a/..",
        ] {
            assert!(!is_clean_path(p), "{p}");
        }
    }

    #[test]
    fn cpusets_parse_as_upstream() {
        assert_eq!(parse_cpuset(""), Ok(0));
        assert_eq!(parse_cpuset("0-3,8"), Ok(5));
        assert_eq!(parse_cpuset("1-1"), Ok(1));
        assert_eq!(
            parse_cpuset("0,,1"),
            Err("strconv.Atoi: parsing \"\": invalid syntax".to_string())
        );
        assert_eq!(
            parse_cpuset("99999999999999999999"),
            Err("strconv.Atoi: parsing \"99999999999999999999\": value out of range".to_string())
        );
    }

    #[test]
    fn image_names_normalize_as_docker_does() {
        assert_eq!(
            normalized_image_name("nginx").unwrap(),
            "docker.io/library/nginx"
        );
        assert_eq!(
            normalized_image_name("team/app:1").unwrap(),
            "docker.io/team/app"
        );
        assert_eq!(
            normalized_image_name("registry.k8s.io/pause:3.10").unwrap(),
            "registry.k8s.io/pause"
        );
        assert_eq!(
            normalized_image_name("localhost/app").unwrap(),
            "localhost/app"
        );
        assert_eq!(
            normalized_image_name("[::1]:5000/app").unwrap(),
            "[::1]:5000/app"
        );
        assert!(
            normalized_image_name("Nginx")
                .unwrap_err()
                .contains("must be lowercase")
        );
        assert_eq!(
            normalized_image_name("reg.io/a..b").unwrap_err(),
            "invalid reference format"
        );
        assert!(
            image_pattern_error("nginx")
                .unwrap()
                .contains("neither tag nor digest")
        );
        assert_eq!(
            image_pattern_error(" reg.io/a").unwrap(),
            "leading/trailing spaces are not allowed:  reg.io/a"
        );
        assert_eq!(
            image_pattern_error("/*").unwrap(),
            "at least registry hostname is required"
        );
        assert!(
            image_pattern_error("reg.io/*/x")
                .unwrap()
                .contains("only patterns ending with '/*'")
        );
    }

    #[test]
    fn sysctl_patterns_match_upstream_regex() {
        for ok in [
            "net.ipv4.tcp_syncookies",
            "net.*",
            "net.ipv4-*",
            "kernel.shm_rmid_forced",
            "a",
            "*",
            "net/ipv4/ip_forward",
        ] {
            assert!(is_valid_sysctl_pattern(ok), "{ok}");
        }
        let long = "a".repeat(254);
        for bad in [
            "",
            "net..a",
            "net.*.a",
            "-net",
            "net-.a",
            "Net",
            "net.a*b",
            long.as_str(),
        ] {
            assert!(!is_valid_sysctl_pattern(bad), "{bad}");
        }
        assert_eq!(
            sysctl_to_dots("net/ipv4/conf/eth0.100/forwarding"),
            "net.ipv4.conf.eth0/100.forwarding"
        );
        assert_eq!(
            sysctl_to_dots("net.ipv4.conf.eth0/100.forwarding"),
            "net.ipv4.conf.eth0/100.forwarding"
        );
    }

    #[test]
    fn defaulted_empty_config_is_valid() {
        let cfg = crate::defaults::defaults();
        for host in [ANY_HOST, V2_HOST] {
            assert_eq!(validate(&cfg, &host), vec![], "{host:?}");
        }
        // failCgroupV1 defaults to true in 1.36: a default kubelet refuses a cgroup v1 host.
        let v1 = validate(&cfg, &V1_HOST);
        assert_eq!(v1.len(), 1, "{v1:?}");
        assert_eq!(v1[0].field, "failCgroupV1");
    }
}
