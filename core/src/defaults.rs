//! The kubelet's defaulting of `kubelet.config.k8s.io/v1beta1` `KubeletConfiguration` on
//! Linux, as a kubelet v1.36 applies it to a config file it loads.
//!
//! Upstream does this in three places, and so do we, in the same order:
//!
//! 1. `SetDefaults_KubeletConfiguration` (`pkg/kubelet/apis/config/v1beta1/defaults.go`),
//!    which fills every unset field; some defaults depend on feature gates, evaluated
//!    over the config's own `featureGates` ([`crate::features::enabled`]).
//! 2. The generated `SetObjectDefaults_KubeletConfiguration` (`zz_generated.defaults.go`),
//!    which runs (1) and then rounds every `reservedMemory[].limits` quantity up to
//!    milli precision (`core/v1.SetDefaults_ResourceList`).
//!    [`set_object_defaults`] is (1) + (2): what the kubelet re-applies after merging
//!    drop-in files.
//! 3. `loadConfigFile` (`cmd/kubelet/app/server.go`): `evictionHard` has no scheme
//!    default because it is OS-specific; when the config file leaves it unset
//!    (`nil`), the kubelet uses [`DEFAULT_EVICTION_HARD`]; when it sets it and
//!    `mergeDefaultEvictionSettings` is true, the default signals it omits are added.
//!    [`apply_default_eviction_hard`] is this step; [`set_defaults`] is all three.
//!
//! Go semantics in the `Option` model: upstream tests a non-pointer field against its
//! zero value, so for those `None` and the zero value (`Some(0)`, `Some("")`,
//! `Some(Duration::ZERO)`) are both "unset"; a pointer field (`*int32`, `*bool`,
//! `*metav1.Duration` ...) is unset only when `None`, so `healthzPort: 0` or
//! `resolvConf: ""` stay as written. Lists and maps are unset only when absent
//! (upstream checks `== nil`, and an empty list in a file decodes to a non-nil one).
//!
//! Nested objects that are plain structs upstream (`authentication`, `authorization`,
//! `logging`, `memorySwap`, `crashLoopBackOff`) always serialize upstream, so after
//! defaulting they are `Some`, and so are their sub-objects and the fields upstream
//! serializes without `omitempty` (`logging.verbosity`, `logging.options.*`).
//!
//! Left unset, as upstream's defaulting leaves them, although some doc comments name a
//! default: `userNamespaces.idsPerPod` (65536, applied by the kubelet at runtime),
//! `singleProcessOOMKill` (decided from the host's cgroup version at runtime),
//! `imageMaximumGCAge` and `shutdownGracePeriod*` (zero).

use std::collections::BTreeMap;

use crate::duration::Duration;
use crate::features;
use crate::quantity::{Format, Quantity};
use crate::types::{
    API_VERSION, CrashLoopBackOffConfig, FormatOptions, KIND, KubeletAnonymousAuthentication,
    KubeletAuthentication, KubeletAuthorization, KubeletConfiguration,
    KubeletWebhookAuthentication, KubeletWebhookAuthorization, KubeletX509Authentication,
    LoggingConfiguration, MemorySwapConfiguration, OutputRoutingOptions, TimeOrMetaDuration,
};

/// `ports.KubeletPort`: the kubelet's secured port.
pub const KUBELET_PORT: i32 = 10250;
/// The default `healthzPort`.
pub const KUBELET_HEALTHZ_PORT: i32 = 10248;
/// `qos.KubeletOOMScoreAdj`: the kubelet process's own OOM score adjustment.
pub const KUBELET_OOM_SCORE_ADJ: i32 = -999;
/// `kubetypes.ResolvConfDefault`.
pub const RESOLV_CONF_DEFAULT: &str = "/etc/resolv.conf";
/// `DefaultIPTablesMasqueradeBit`.
pub const DEFAULT_IPTABLES_MASQUERADE_BIT: i32 = 14;
/// `DefaultIPTablesDropBit`.
pub const DEFAULT_IPTABLES_DROP_BIT: i32 = 15;
/// `DefaultVolumePluginDir`.
pub const DEFAULT_VOLUME_PLUGIN_DIR: &str = "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/";
/// `DefaultPodLogsDir`.
pub const DEFAULT_POD_LOGS_DIR: &str = "/var/log/pods";
/// `DefaultMemoryThrottlingFactor` (KEP-2570).
pub const DEFAULT_MEMORY_THROTTLING_FACTOR: f64 = 0.9;
/// The default `containerRuntimeEndpoint`.
pub const DEFAULT_CONTAINER_RUNTIME_ENDPOINT: &str = "unix:///run/containerd/containerd.sock";
/// `MaxContainerBackOff`: default `crashLoopBackOff.maxContainerRestartPeriod` when the
/// `KubeletCrashLoopBackOffMax` gate is on.
pub const MAX_CONTAINER_BACKOFF: Duration = Duration::from_secs(300);
/// `logsapi.LogFlushFreqDefault`: the default `logging.flushFrequency`.
pub const LOG_FLUSH_FREQ_DEFAULT: Duration = Duration::from_secs(5);
/// `DefaultNodeAllocatableEnforcement`.
pub const DEFAULT_NODE_ALLOCATABLE_ENFORCEMENT: &[&str] = &["pods"];
/// `eviction.DefaultEvictionHard` on Linux (`pkg/kubelet/eviction/defaults_linux.go`).
pub const DEFAULT_EVICTION_HARD: &[(&str, &str)] = &[
    ("imagefs.available", "15%"),
    ("imagefs.inodesFree", "5%"),
    ("memory.available", "100Mi"),
    ("nodefs.available", "10%"),
    ("nodefs.inodesFree", "5%"),
];

/// Gate that makes `crashLoopBackOff.maxContainerRestartPeriod` default to 300s.
const GATE_CRASH_LOOP_BACKOFF_MAX: &str = "KubeletCrashLoopBackOffMax";
/// Gate that makes `imagePullCredentialsVerificationPolicy` default to
/// `NeverVerifyPreloadedImages`.
const GATE_ENSURE_SECRET_PULLED_IMAGES: &str = "KubeletEnsureSecretPulledImages";

/// [`DEFAULT_EVICTION_HARD`] as the map `evictionHard` holds.
pub fn default_eviction_hard() -> BTreeMap<String, String> {
    DEFAULT_EVICTION_HARD
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect()
}

/// Fills every field the kubelet defaults when it loads `cfg` as its config file:
/// [`set_object_defaults`], then [`apply_default_eviction_hard`].
pub fn set_defaults(cfg: &mut KubeletConfiguration) {
    set_object_defaults(cfg);
    apply_default_eviction_hard(cfg);
}

/// A defaulted copy of `cfg` (see [`set_defaults`]).
pub fn defaulted(cfg: &KubeletConfiguration) -> KubeletConfiguration {
    let mut out = cfg.clone();
    set_defaults(&mut out);
    out
}

/// The configuration a kubelet runs with when its config file sets nothing but
/// `apiVersion` and `kind`.
pub fn defaults() -> KubeletConfiguration {
    let mut cfg = KubeletConfiguration {
        api_version: Some(API_VERSION.to_string()),
        kind: Some(KIND.to_string()),
        ..KubeletConfiguration::default()
    };
    set_defaults(&mut cfg);
    cfg
}

/// The kubelet's scheme defaulting (`SetObjectDefaults_KubeletConfiguration`):
/// `SetDefaults_KubeletConfiguration`, then `reservedMemory[].limits` rounded up to
/// milli precision. It does not touch `evictionHard` (see
/// [`apply_default_eviction_hard`]).
pub fn set_object_defaults(cfg: &mut KubeletConfiguration) {
    set_kubelet_configuration_defaults(cfg);
    round_reserved_memory(cfg);
}

/// `loadConfigFile`'s eviction step: an unset `evictionHard` becomes
/// [`DEFAULT_EVICTION_HARD`]; a set one gains the default signals it omits when
/// `mergeDefaultEvictionSettings` is true, and is kept as written otherwise (an empty
/// map stays empty: every hard threshold is then off).
pub fn apply_default_eviction_hard(cfg: &mut KubeletConfiguration) {
    let merge = cfg.merge_default_eviction_settings == Some(true);
    match cfg.eviction_hard.as_mut() {
        None => cfg.eviction_hard = Some(default_eviction_hard()),
        Some(map) if merge => {
            for (signal, threshold) in DEFAULT_EVICTION_HARD {
                map.entry((*signal).to_string())
                    .or_insert_with(|| (*threshold).to_string());
            }
        }
        Some(_) => {}
    }
}

/// `SetDefaults_KubeletConfiguration`, field for field in upstream's order.
fn set_kubelet_configuration_defaults(obj: &mut KubeletConfiguration) {
    let gates = obj.feature_gates.clone();
    let gate = |name: &str| features::enabled(gates.as_ref(), name);

    ptr(&mut obj.enable_server, true);
    duration(&mut obj.sync_frequency, Duration::from_mins(1));
    duration(&mut obj.file_check_frequency, Duration::from_secs(20));
    duration(&mut obj.http_check_frequency, Duration::from_secs(20));
    string(&mut obj.address, "0.0.0.0");
    int32(&mut obj.port, KUBELET_PORT);
    set_authentication_defaults(obj.authentication.get_or_insert_with(Default::default));
    set_authorization_defaults(obj.authorization.get_or_insert_with(Default::default));
    ptr(&mut obj.registry_pull_qps, 5);
    int32(&mut obj.registry_burst, 10);
    ptr(&mut obj.event_record_qps, 50);
    int32(&mut obj.event_burst, 100);
    ptr(&mut obj.enable_debugging_handlers, true);
    ptr(&mut obj.healthz_port, KUBELET_HEALTHZ_PORT);
    string(&mut obj.healthz_bind_address, "127.0.0.1");
    ptr(&mut obj.oom_score_adj, KUBELET_OOM_SCORE_ADJ);
    duration(
        &mut obj.streaming_connection_idle_timeout,
        Duration::from_hours(4),
    );
    if is_zero_duration(obj.node_status_report_frequency) {
        // For backward compatibility, an explicitly set nodeStatusUpdateFrequency is
        // also the default nodeStatusReportFrequency.
        obj.node_status_report_frequency = match obj.node_status_update_frequency {
            Some(update) if !update.is_zero() => Some(update),
            _ => Some(Duration::from_mins(5)),
        };
    }
    duration(
        &mut obj.node_status_update_frequency,
        Duration::from_secs(10),
    );
    int32(&mut obj.node_lease_duration_seconds, 40);
    duration(&mut obj.image_minimum_gc_age, Duration::from_mins(2));
    ptr(&mut obj.image_gc_high_threshold_percent, 85);
    ptr(&mut obj.image_gc_low_threshold_percent, 80);
    duration(&mut obj.volume_stats_agg_period, Duration::from_mins(1));
    ptr(&mut obj.cgroups_per_qos, true);
    string(&mut obj.cgroup_driver, "cgroupfs");
    string(&mut obj.cpu_manager_policy, "none");
    duration(
        &mut obj.cpu_manager_reconcile_period,
        Duration::from_secs(10),
    );
    string(&mut obj.memory_manager_policy, "None");
    string(&mut obj.topology_manager_policy, "none");
    string(&mut obj.topology_manager_scope, "container");
    duration(&mut obj.runtime_request_timeout, Duration::from_mins(2));
    string(&mut obj.hairpin_mode, "promiscuous-bridge");
    int32(&mut obj.max_pods, 110);
    // nil or negative means "node allocatable pid limit", written -1.
    if obj.pod_pids_limit.is_none_or(|limit| limit < 0) {
        obj.pod_pids_limit = Some(-1);
    }
    ptr(&mut obj.resolv_conf, RESOLV_CONF_DEFAULT.to_string());
    ptr(&mut obj.cpu_cfs_quota, true);
    ptr(&mut obj.cpu_cfs_quota_period, Duration::from_millis(100));
    ptr(&mut obj.node_status_max_images, 50);
    if obj.max_open_files.is_none_or(|n| n == 0) {
        obj.max_open_files = Some(1_000_000);
    }
    string(&mut obj.content_type, "application/vnd.kubernetes.protobuf");
    ptr(&mut obj.kube_api_qps, 50);
    int32(&mut obj.kube_api_burst, 100);
    if obj.serialize_image_pulls.is_none() {
        // Pulls are serialized unless maxParallelImagePulls asks for parallel ones.
        let parallel = obj.max_parallel_image_pulls.is_some_and(|n| n >= 2);
        obj.serialize_image_pulls = Some(!parallel);
    }
    duration(
        &mut obj.eviction_pressure_transition_period,
        Duration::from_mins(5),
    );
    ptr(&mut obj.merge_default_eviction_settings, false);
    ptr(&mut obj.enable_controller_attach_detach, true);
    ptr(&mut obj.make_iptables_util_chains, true);
    ptr(
        &mut obj.iptables_masquerade_bit,
        DEFAULT_IPTABLES_MASQUERADE_BIT,
    );
    ptr(&mut obj.iptables_drop_bit, DEFAULT_IPTABLES_DROP_BIT);
    ptr(&mut obj.fail_swap_on, true);
    string(&mut obj.container_log_max_size, "10Mi");
    ptr(&mut obj.container_log_max_files, 5);
    ptr(&mut obj.container_log_max_workers, 1);
    ptr(
        &mut obj.container_log_monitor_interval,
        Duration::from_secs(10),
    );
    string(
        &mut obj.config_map_and_secret_change_detection_strategy,
        "Watch",
    );
    if obj.enforce_node_allocatable.is_none() {
        obj.enforce_node_allocatable = Some(
            DEFAULT_NODE_ALLOCATABLE_ENFORCEMENT
                .iter()
                .map(|s| (*s).to_string())
                .collect(),
        );
    }
    string(&mut obj.volume_plugin_dir, DEFAULT_VOLUME_PLUGIN_DIR);
    set_recommended_logging_configuration(obj.logging.get_or_insert_with(Default::default));
    ptr(&mut obj.enable_system_log_handler, true);
    ptr(&mut obj.enable_profiling_handler, true);
    ptr(&mut obj.enable_debug_flags_handler, true);
    ptr(&mut obj.seccomp_default, false);
    // cgroup v1 is refused by default since v1.35.
    ptr(&mut obj.fail_cgroup_v1, true);
    ptr(
        &mut obj.memory_throttling_factor,
        DEFAULT_MEMORY_THROTTLING_FACTOR,
    );
    // v1.36: memory protection (memory.min/low) is opt-in through TieredReservation.
    string(&mut obj.memory_reservation_policy, "None");
    ptr(&mut obj.register_node, true);
    ptr(&mut obj.local_storage_capacity_isolation, true);
    string(
        &mut obj.container_runtime_endpoint,
        DEFAULT_CONTAINER_RUNTIME_ENDPOINT,
    );
    string(&mut obj.pod_logs_dir, DEFAULT_POD_LOGS_DIR);

    // Plain structs upstream: present (as `{}`) in every defaulted config.
    obj.memory_swap
        .get_or_insert_with(MemorySwapConfiguration::default);
    let crash_loop_backoff = obj
        .crash_loop_backoff
        .get_or_insert_with(CrashLoopBackOffConfig::default);
    if gate(GATE_CRASH_LOOP_BACKOFF_MAX) {
        ptr(
            &mut crash_loop_backoff.max_container_restart_period,
            MAX_CONTAINER_BACKOFF,
        );
    }
    if gate(GATE_ENSURE_SECRET_PULLED_IMAGES) {
        string(
            &mut obj.image_pull_credentials_verification_policy,
            "NeverVerifyPreloadedImages",
        );
    }
}

/// Defaults of `authentication` (`x509` is an empty struct upstream, kept as `{}`).
fn set_authentication_defaults(auth: &mut KubeletAuthentication) {
    auth.x509
        .get_or_insert_with(KubeletX509Authentication::default);
    let anonymous = auth
        .anonymous
        .get_or_insert_with(KubeletAnonymousAuthentication::default);
    ptr(&mut anonymous.enabled, false);
    let webhook = auth
        .webhook
        .get_or_insert_with(KubeletWebhookAuthentication::default);
    ptr(&mut webhook.enabled, true);
    duration(&mut webhook.cache_ttl, Duration::from_mins(2));
}

/// Defaults of `authorization`.
fn set_authorization_defaults(authz: &mut KubeletAuthorization) {
    string(&mut authz.mode, "Webhook");
    let webhook = authz
        .webhook
        .get_or_insert_with(KubeletWebhookAuthorization::default);
    duration(&mut webhook.cache_authorized_ttl, Duration::from_mins(5));
    duration(&mut webhook.cache_unauthorized_ttl, Duration::from_secs(30));
}

/// `logsapi.SetRecommendedLoggingConfiguration`: format `text`, flushFrequency `"5s"`
/// (written as a string) when zero, and a zero `infoBufferSize` for both formats.
/// `verbosity` has no default (0) but always serializes upstream, so it is filled too.
fn set_recommended_logging_configuration(logging: &mut LoggingConfiguration) {
    string(&mut logging.format, "text");
    if logging.flush_frequency.is_none_or(|f| f.duration.is_zero()) {
        logging.flush_frequency = Some(TimeOrMetaDuration {
            duration: LOG_FLUSH_FREQ_DEFAULT,
            serialize_as_string: true,
        });
    }
    logging.verbosity.get_or_insert(0);
    let options = logging.options.get_or_insert_with(FormatOptions::default);
    set_recommended_output_routing(options.text.get_or_insert_with(Default::default));
    set_recommended_output_routing(options.json.get_or_insert_with(Default::default));
}

/// `setRecommendedOutputRouting`: an absent `infoBufferSize` becomes `"0"`.
fn set_recommended_output_routing(routing: &mut OutputRoutingOptions) {
    routing
        .info_buffer_size
        .get_or_insert_with(|| Quantity::from_units(0, Format::DecimalSI));
}

/// `core/v1.SetDefaults_ResourceList` over every `reservedMemory[].limits`: each
/// quantity is rounded up (away from zero) to milli precision.
fn round_reserved_memory(cfg: &mut KubeletConfiguration) {
    for reservation in cfg.reserved_memory.iter_mut().flatten() {
        for quantity in reservation.limits.values_mut() {
            if let Some(rounded) = round_up_to_milli(quantity) {
                *quantity = rounded;
            }
        }
    }
}

/// `Quantity.RoundUp(-3)`: `None` when the value already has milli precision (upstream
/// then keeps the quantity, and its text, unchanged).
fn round_up_to_milli(q: &Quantity) -> Option<Quantity> {
    const MILLI_IN_NANOS: i128 = 1_000_000;
    let nanos = q.nanos();
    let rem = nanos % MILLI_IN_NANOS;
    if rem == 0 {
        return None;
    }
    let truncated = nanos - rem;
    let rounded = if nanos > 0 {
        truncated.checked_add(MILLI_IN_NANOS)?
    } else {
        truncated.checked_sub(MILLI_IN_NANOS)?
    };
    Some(Quantity::from_nanos(rounded, q.format()))
}

/// A pointer field upstream: set only when absent.
fn ptr<T>(slot: &mut Option<T>, value: T) {
    slot.get_or_insert(value);
}

/// A `metav1.Duration` field upstream: absent or zero is unset.
fn duration(slot: &mut Option<Duration>, value: Duration) {
    if is_zero_duration(*slot) {
        *slot = Some(value);
    }
}

fn is_zero_duration(d: Option<Duration>) -> bool {
    d.is_none_or(Duration::is_zero)
}

/// A `string` field upstream: absent or `""` is unset.
fn string(slot: &mut Option<String>, value: &str) {
    if slot.as_deref().is_none_or(str::is_empty) {
        *slot = Some(value.to_string());
    }
}

/// An `int32` field upstream: absent or `0` is unset.
fn int32(slot: &mut Option<i32>, value: i32) {
    if slot.is_none_or(|v| v == 0) {
        *slot = Some(value);
    }
}

#[cfg(test)]
mod tests;
