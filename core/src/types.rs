//! The typed model of `kubelet.config.k8s.io/v1beta1` `KubeletConfiguration`.
//!
//! Field for field the upstream v1beta1 types (`k8s.io/kubelet/config/v1beta1/types.go`,
//! with `LoggingConfiguration` from `k8s.io/component-base/logs/api/v1` and
//! `TracingConfiguration` from `k8s.io/component-base/tracing/api/v1`), with the upstream
//! JSON names. docs/upstream.md says which upstream commit this matches.
//!
//! Every field of the top-level and nested objects is an `Option`: `None` means "not set
//! in this file", which is what drop-in merging, flag-override reports and rendering need
//! (defaults are not baked into a rendered config). Items of lists (taints, vmodule, NUMA
//! reservations ...) use Go's zero values for absent fields, as upstream decoding does.
//! Enumerations (`cgroupDriver`, `cpuManagerPolicy` ...) stay strings, as upstream: an
//! unknown value decodes and is then rejected by validation with the kubelet's message.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::duration::Duration;

mod component_base;
mod field_names;
mod nested;

pub use component_base::{
    FormatOptions, LoggingConfiguration, OutputRoutingOptions, TimeOrMetaDuration,
    TracingConfiguration, VModuleItem,
};
pub use field_names::KUBELET_CONFIGURATION_FIELDS;
pub use nested::{
    CrashLoopBackOffConfig, KubeletAnonymousAuthentication, KubeletAuthentication,
    KubeletAuthorization, KubeletWebhookAuthentication, KubeletWebhookAuthorization,
    KubeletX509Authentication, MemoryReservation, MemorySwapConfiguration,
    ShutdownGracePeriodByPodPriority, Taint, UserNamespaces,
};

/// The API version this model decodes.
pub const API_VERSION: &str = "kubelet.config.k8s.io/v1beta1";
/// The kind this model decodes.
pub const KIND: &str = "KubeletConfiguration";

/// The kubelet's configuration file, `kubelet.config.k8s.io/v1beta1` `KubeletConfiguration`.
///
/// Every field is optional: `None` means the file does not set it, and the kubelet's
/// defaulting ([`crate::defaults`]) decides its value.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubeletConfiguration {
    /// API version of the object: `kubelet.config.k8s.io/v1beta1`.
    #[serde(
        rename = "apiVersion",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub api_version: Option<String>,
    /// Kind of the object: `KubeletConfiguration`.
    #[serde(rename = "kind", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Enables the kubelet's secured server. Default: true.
    #[serde(
        rename = "enableServer",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub enable_server: Option<bool>,
    /// Directory (or single file) of static pods to run. Default: "".
    #[serde(
        rename = "staticPodPath",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub static_pod_path: Option<String>,
    /// Root directory for pod log files. Default: "/var/log/pods".
    #[serde(
        rename = "podLogsDir",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub pod_logs_dir: Option<String>,
    /// Max period between synchronizing running containers and config. Default: "1m".
    #[serde(
        rename = "syncFrequency",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub sync_frequency: Option<Duration>,
    /// Duration between checking config files for new data. Default: "20s".
    #[serde(
        rename = "fileCheckFrequency",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub file_check_frequency: Option<Duration>,
    /// Duration between checking http for new data. Default: "20s".
    #[serde(
        rename = "httpCheckFrequency",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub http_check_frequency: Option<Duration>,
    /// URL for accessing static pods to run. Default: "".
    #[serde(
        rename = "staticPodURL",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub static_pod_url: Option<String>,
    /// HTTP headers to use when accessing staticPodURL.
    #[serde(
        rename = "staticPodURLHeader",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub static_pod_url_header: Option<BTreeMap<String, Vec<String>>>,
    /// IP address for the kubelet to serve on. Default: "0.0.0.0".
    #[serde(rename = "address", default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Port for the kubelet to serve on (1-65535). Default: 10250.
    #[serde(rename = "port", default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    /// Read-only, unauthenticated port (0 disables). Default: 0.
    #[serde(
        rename = "readOnlyPort",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub read_only_port: Option<i32>,
    /// x509 certificate file for HTTPS.
    #[serde(
        rename = "tlsCertFile",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub tls_cert_file: Option<String>,
    /// x509 private key matching tlsCertFile.
    #[serde(
        rename = "tlsPrivateKeyFile",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub tls_private_key_file: Option<String>,
    /// Allowed cipher suites for the server (Go crypto/tls names).
    #[serde(
        rename = "tlsCipherSuites",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub tls_cipher_suites: Option<Vec<String>>,
    /// Allowed key exchange mechanisms, as numeric Go crypto/tls CurveID values.
    #[serde(
        rename = "tlsCurvePreferences",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub tls_curve_preferences: Option<Vec<i32>>,
    /// Minimum TLS version supported (VersionTLS12, VersionTLS13).
    #[serde(
        rename = "tlsMinVersion",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub tls_min_version: Option<String>,
    /// Enables client certificate rotation. Default: false.
    #[serde(
        rename = "rotateCertificates",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub rotate_certificates: Option<bool>,
    /// Enables server certificate bootstrap via the certificates API. Default: false.
    #[serde(
        rename = "serverTLSBootstrap",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub server_tls_bootstrap: Option<bool>,
    /// How requests to the kubelet's server are authenticated.
    #[serde(
        rename = "authentication",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub authentication: Option<KubeletAuthentication>,
    /// How requests to the kubelet's server are authorized.
    #[serde(
        rename = "authorization",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub authorization: Option<KubeletAuthorization>,
    /// Limit of registry pulls per second (0 = no limit). Default: 5.
    #[serde(
        rename = "registryPullQPS",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub registry_pull_qps: Option<i32>,
    /// Maximum size of bursty pulls. Default: 10.
    #[serde(
        rename = "registryBurst",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub registry_burst: Option<i32>,
    /// How credentials are verified for images already on the node (NeverVerify, NeverVerifyPreloadedImages, NeverVerifyAllowlistedImages, AlwaysVerify).
    #[serde(
        rename = "imagePullCredentialsVerificationPolicy",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub image_pull_credentials_verification_policy: Option<String>,
    /// Images exempt from credential re-verification under NeverVerifyAllowlistedImages.
    #[serde(
        rename = "preloadedImagesVerificationAllowlist",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub preloaded_images_verification_allowlist: Option<Vec<String>>,
    /// Maximum event creations per second (0 = no limit). Default: 50.
    #[serde(
        rename = "eventRecordQPS",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub event_record_qps: Option<i32>,
    /// Maximum size of a burst of event creations. Default: 100.
    #[serde(
        rename = "eventBurst",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub event_burst: Option<i32>,
    /// Enables log access, exec, attach, port-forward endpoints. Default: true.
    #[serde(
        rename = "enableDebuggingHandlers",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub enable_debugging_handlers: Option<bool>,
    /// Enables block profiling if debugging handlers are on. Default: false.
    #[serde(
        rename = "enableContentionProfiling",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub enable_contention_profiling: Option<bool>,
    /// Port of the localhost healthz endpoint (0 disables). Default: 10248.
    #[serde(
        rename = "healthzPort",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub healthz_port: Option<i32>,
    /// IP address for the healthz server. Default: "127.0.0.1".
    #[serde(
        rename = "healthzBindAddress",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub healthz_bind_address: Option<String>,
    /// oom-score-adj for the kubelet process, in [-1000, 1000]. Default: -999.
    #[serde(
        rename = "oomScoreAdj",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub oom_score_adj: Option<i32>,
    /// DNS domain for this cluster.
    #[serde(
        rename = "clusterDomain",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub cluster_domain: Option<String>,
    /// IP addresses of the cluster DNS servers.
    #[serde(
        rename = "clusterDNS",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub cluster_dns: Option<Vec<String>>,
    /// Deprecated, no effect. Default: "4h".
    #[serde(
        rename = "streamingConnectionIdleTimeout",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub streaming_connection_idle_timeout: Option<Duration>,
    /// How often the kubelet computes node status. Default: "10s".
    #[serde(
        rename = "nodeStatusUpdateFrequency",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub node_status_update_frequency: Option<Duration>,
    /// How often the kubelet posts an unchanged node status. Default: "5m" (or nodeStatusUpdateFrequency when that is set).
    #[serde(
        rename = "nodeStatusReportFrequency",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub node_status_report_frequency: Option<Duration>,
    /// Duration of the node Lease. Default: 40.
    #[serde(
        rename = "nodeLeaseDurationSeconds",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub node_lease_duration_seconds: Option<i32>,
    /// Minimum age of an unused image before it is garbage collected. Default: "2m".
    #[serde(
        rename = "imageMinimumGCAge",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub image_minimum_gc_age: Option<Duration>,
    /// Maximum age an image can be unused before it is garbage collected (0 disables). Default: "0s".
    #[serde(
        rename = "imageMaximumGCAge",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub image_maximum_gc_age: Option<Duration>,
    /// Disk usage percent after which image GC always runs. Default: 85.
    #[serde(
        rename = "imageGCHighThresholdPercent",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub image_gc_high_threshold_percent: Option<i32>,
    /// Disk usage percent before which image GC never runs. Default: 80.
    #[serde(
        rename = "imageGCLowThresholdPercent",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub image_gc_low_threshold_percent: Option<i32>,
    /// How often volume disk usage is computed. Default: "1m".
    #[serde(
        rename = "volumeStatsAggPeriod",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub volume_stats_agg_period: Option<Duration>,
    /// Absolute name of the cgroup to isolate the kubelet in.
    #[serde(
        rename = "kubeletCgroups",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub kubelet_cgroups: Option<String>,
    /// Absolute name of the cgroup for all non-kernel processes not already in a container.
    #[serde(
        rename = "systemCgroups",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub system_cgroups: Option<String>,
    /// Root cgroup for pods.
    #[serde(
        rename = "cgroupRoot",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub cgroup_root: Option<String>,
    /// Enables the QoS based cgroup hierarchy. Default: true.
    #[serde(
        rename = "cgroupsPerQOS",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub cgroups_per_qos: Option<bool>,
    /// Driver used to manipulate cgroups: cgroupfs or systemd. Default: "cgroupfs".
    #[serde(
        rename = "cgroupDriver",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub cgroup_driver: Option<String>,
    /// CPU manager policy: none or static. Default: "none".
    #[serde(
        rename = "cpuManagerPolicy",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub cpu_manager_policy: Option<String>,
    /// If true, processes in a container are OOM killed individually (cgroup v2).
    #[serde(
        rename = "singleProcessOOMKill",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub single_process_oom_kill: Option<bool>,
    /// Options to fine-tune the CPU manager policy.
    #[serde(
        rename = "cpuManagerPolicyOptions",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub cpu_manager_policy_options: Option<BTreeMap<String, String>>,
    /// Reconciliation period of the CPU manager. Default: "10s".
    #[serde(
        rename = "cpuManagerReconcilePeriod",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub cpu_manager_reconcile_period: Option<Duration>,
    /// Memory manager policy: None or Static. Default: "None".
    #[serde(
        rename = "memoryManagerPolicy",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub memory_manager_policy: Option<String>,
    /// Topology manager policy: none, best-effort, restricted, single-numa-node. Default: "none".
    #[serde(
        rename = "topologyManagerPolicy",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub topology_manager_policy: Option<String>,
    /// Topology manager scope: container or pod. Default: "container".
    #[serde(
        rename = "topologyManagerScope",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub topology_manager_scope: Option<String>,
    /// Options to fine-tune the topology manager policy.
    #[serde(
        rename = "topologyManagerPolicyOptions",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub topology_manager_policy_options: Option<BTreeMap<String, String>>,
    /// Resource -> percentage reserved for the guaranteed QoS tier (memory only).
    #[serde(
        rename = "qosReserved",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub qos_reserved: Option<BTreeMap<String, String>>,
    /// Timeout for runtime requests except long-running ones. Default: "2m".
    #[serde(
        rename = "runtimeRequestTimeout",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub runtime_request_timeout: Option<Duration>,
    /// How the kubelet configures hairpin packets: promiscuous-bridge, hairpin-veth, none. Default: "promiscuous-bridge".
    #[serde(
        rename = "hairpinMode",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub hairpin_mode: Option<String>,
    /// Maximum number of pods on this kubelet. Default: 110.
    #[serde(rename = "maxPods", default, skip_serializing_if = "Option::is_none")]
    pub max_pods: Option<i32>,
    /// CIDR for pod IPs, standalone mode only.
    #[serde(rename = "podCIDR", default, skip_serializing_if = "Option::is_none")]
    pub pod_cidr: Option<String>,
    /// Maximum number of PIDs in any pod (-1 = node allocatable). Default: -1.
    #[serde(
        rename = "podPidsLimit",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub pod_pids_limit: Option<i64>,
    /// Resolver configuration file for container DNS. Default: "/etc/resolv.conf".
    #[serde(
        rename = "resolvConf",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub resolv_conf: Option<String>,
    /// Run pods once and exit. Default: false.
    #[serde(rename = "runOnce", default, skip_serializing_if = "Option::is_none")]
    pub run_once: Option<bool>,
    /// Enables CPU CFS quota enforcement for containers with CPU limits. Default: true.
    #[serde(
        rename = "cpuCFSQuota",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub cpu_cfs_quota: Option<bool>,
    /// CPU CFS quota period, between 1ms and 1s. Default: "100ms".
    #[serde(
        rename = "cpuCFSQuotaPeriod",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub cpu_cfs_quota_period: Option<Duration>,
    /// Cap on images reported in Node.status.images (-1 = no cap). Default: 50.
    #[serde(
        rename = "nodeStatusMaxImages",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub node_status_max_images: Option<i32>,
    /// Number of files the kubelet process can open. Default: 1000000.
    #[serde(
        rename = "maxOpenFiles",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub max_open_files: Option<i64>,
    /// Content type of requests sent to the API server. Default: "application/vnd.kubernetes.protobuf".
    #[serde(
        rename = "contentType",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub content_type: Option<String>,
    /// QPS to the API server. Default: 50.
    #[serde(
        rename = "kubeAPIQPS",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub kube_api_qps: Option<i32>,
    /// Burst to the API server. Default: 100.
    #[serde(
        rename = "kubeAPIBurst",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub kube_api_burst: Option<i32>,
    /// Pull images one at a time. Default: true (false when maxParallelImagePulls > 1).
    #[serde(
        rename = "serializeImagePulls",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub serialize_image_pulls: Option<bool>,
    /// Maximum number of image pulls in parallel.
    #[serde(
        rename = "maxParallelImagePulls",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub max_parallel_image_pulls: Option<i32>,
    /// Signal -> hard eviction threshold, e.g. memory.available: 100Mi.
    #[serde(
        rename = "evictionHard",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub eviction_hard: Option<BTreeMap<String, String>>,
    /// Signal -> soft eviction threshold.
    #[serde(
        rename = "evictionSoft",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub eviction_soft: Option<BTreeMap<String, String>>,
    /// Signal -> grace period of the soft threshold.
    #[serde(
        rename = "evictionSoftGracePeriod",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub eviction_soft_grace_period: Option<BTreeMap<String, String>>,
    /// Wait before leaving an eviction pressure condition. Default: "5m".
    #[serde(
        rename = "evictionPressureTransitionPeriod",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub eviction_pressure_transition_period: Option<Duration>,
    /// Maximum grace period (s) for pods terminated by soft eviction. Default: 0.
    #[serde(
        rename = "evictionMaxPodGracePeriod",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub eviction_max_pod_grace_period: Option<i32>,
    /// Signal -> minimum amount reclaimed when under pressure.
    #[serde(
        rename = "evictionMinimumReclaim",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub eviction_minimum_reclaim: Option<BTreeMap<String, String>>,
    /// Merge default eviction settings into the ones given here. Default: false.
    #[serde(
        rename = "mergeDefaultEvictionSettings",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub merge_default_eviction_settings: Option<bool>,
    /// Maximum pods per core (0 = no limit). Default: 0.
    #[serde(
        rename = "podsPerCore",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub pods_per_core: Option<i32>,
    /// Let the attach/detach controller manage this node's volumes. Default: true.
    #[serde(
        rename = "enableControllerAttachDetach",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub enable_controller_attach_detach: Option<bool>,
    /// Error if kernel flags are not as the kubelet expects. Default: false.
    #[serde(
        rename = "protectKernelDefaults",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub protect_kernel_defaults: Option<bool>,
    /// Create the KUBE-IPTABLES-HINT chain. Default: true.
    #[serde(
        rename = "makeIPTablesUtilChains",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub make_iptables_util_chains: Option<bool>,
    /// Deprecated, no effect. Default: 14.
    #[serde(
        rename = "iptablesMasqueradeBit",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub iptables_masquerade_bit: Option<i32>,
    /// Deprecated, no effect. Default: 15.
    #[serde(
        rename = "iptablesDropBit",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub iptables_drop_bit: Option<i32>,
    /// Feature name -> enabled, over the built-in defaults.
    #[serde(
        rename = "featureGates",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub feature_gates: Option<BTreeMap<String, bool>>,
    /// Fail to start if swap is enabled on the node. Default: true.
    #[serde(
        rename = "failSwapOn",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub fail_swap_on: Option<bool>,
    /// Swap memory available to container workloads.
    #[serde(
        rename = "memorySwap",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub memory_swap: Option<MemorySwapConfiguration>,
    /// Maximum size of a container log file before rotation, e.g. "10Mi". Default: "10Mi".
    #[serde(
        rename = "containerLogMaxSize",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub container_log_max_size: Option<String>,
    /// Maximum number of log files per container. Default: 5.
    #[serde(
        rename = "containerLogMaxFiles",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub container_log_max_files: Option<i32>,
    /// Maximum concurrent log rotation workers. Default: 1.
    #[serde(
        rename = "containerLogMaxWorkers",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub container_log_max_workers: Option<i32>,
    /// How often container logs are checked for rotation. Default: "10s".
    #[serde(
        rename = "containerLogMonitorInterval",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub container_log_monitor_interval: Option<Duration>,
    /// How ConfigMap and Secret changes are detected: Get, Cache, Watch. Default: "Watch".
    #[serde(
        rename = "configMapAndSecretChangeDetectionStrategy",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub config_map_and_secret_change_detection_strategy: Option<String>,
    /// Resources reserved for non-kubernetes components, e.g. cpu: 500m, memory: 1Gi.
    #[serde(
        rename = "systemReserved",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub system_reserved: Option<BTreeMap<String, String>>,
    /// Resources reserved for kubernetes system components.
    #[serde(
        rename = "kubeReserved",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub kube_reserved: Option<BTreeMap<String, String>>,
    /// CPU list reserved for system and kubernetes threads, e.g. "0-1".
    #[serde(
        rename = "reservedSystemCPUs",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub reserved_system_cpus: Option<String>,
    /// Previous minor version whose hidden metrics to show, e.g. "1.35".
    #[serde(
        rename = "showHiddenMetricsForVersion",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub show_hidden_metrics_for_version: Option<String>,
    /// Absolute name of the cgroup enforcing systemReserved.
    #[serde(
        rename = "systemReservedCgroup",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub system_reserved_cgroup: Option<String>,
    /// Absolute name of the cgroup enforcing kubeReserved.
    #[serde(
        rename = "kubeReservedCgroup",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub kube_reserved_cgroup: Option<String>,
    /// Node allocatable enforcements: none, pods, system-reserved(-compressible), kube-reserved(-compressible). Default: ["pods"].
    #[serde(
        rename = "enforceNodeAllocatable",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub enforce_node_allocatable: Option<Vec<String>>,
    /// Unsafe sysctls or patterns (ending in *) pods may set.
    #[serde(
        rename = "allowedUnsafeSysctls",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub allowed_unsafe_sysctls: Option<Vec<String>>,
    /// Directory of third-party volume plugins.
    #[serde(
        rename = "volumePluginDir",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub volume_plugin_dir: Option<String>,
    /// Unique ID of the instance for an external provider.
    #[serde(
        rename = "providerID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    /// Use kernel memcg notification for memory eviction thresholds. Default: false.
    #[serde(
        rename = "kernelMemcgNotification",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub kernel_memcg_notification: Option<bool>,
    /// Logging options.
    #[serde(rename = "logging", default, skip_serializing_if = "Option::is_none")]
    pub logging: Option<LoggingConfiguration>,
    /// Enables system logs at /logs/. Default: true.
    #[serde(
        rename = "enableSystemLogHandler",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub enable_system_log_handler: Option<bool>,
    /// Enables node log query on /logs. Default: false.
    #[serde(
        rename = "enableSystemLogQuery",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub enable_system_log_query: Option<bool>,
    /// Total delay of a node shutdown for pod termination. Default: "0s".
    #[serde(
        rename = "shutdownGracePeriod",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub shutdown_grace_period: Option<Duration>,
    /// Part of shutdownGracePeriod for critical pods. Default: "0s".
    #[serde(
        rename = "shutdownGracePeriodCriticalPods",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub shutdown_grace_period_critical_pods: Option<Duration>,
    /// Shutdown grace period per pod priority range.
    #[serde(
        rename = "shutdownGracePeriodByPodPriority",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub shutdown_grace_period_by_pod_priority: Option<Vec<ShutdownGracePeriodByPodPriority>>,
    /// Node-level container restart backoff settings.
    #[serde(
        rename = "crashLoopBackOff",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub crash_loop_backoff: Option<CrashLoopBackOffConfig>,
    /// Memory reservations per NUMA node for the memory manager.
    #[serde(
        rename = "reservedMemory",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub reserved_memory: Option<Vec<MemoryReservation>>,
    /// Enables /debug/pprof/. Default: true.
    #[serde(
        rename = "enableProfilingHandler",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub enable_profiling_handler: Option<bool>,
    /// Enables /debug/flags/v. Default: true.
    #[serde(
        rename = "enableDebugFlagsHandler",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub enable_debug_flags_handler: Option<bool>,
    /// Use RuntimeDefault as the default seccomp profile. Default: false.
    #[serde(
        rename = "seccompDefault",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub seccomp_default: Option<bool>,
    /// Factor for the cgroup v2 memory.high value (MemoryQoS). Default: 0.9.
    #[serde(
        rename = "memoryThrottlingFactor",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub memory_throttling_factor: Option<f64>,
    /// cgroup v2 memory protection: None or TieredReservation (MemoryQoS).
    #[serde(
        rename = "memoryReservationPolicy",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub memory_reservation_policy: Option<String>,
    /// Taints added to the Node when the kubelet registers it.
    #[serde(
        rename = "registerWithTaints",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub register_with_taints: Option<Vec<Taint>>,
    /// Register the node with the API server. Default: true.
    #[serde(
        rename = "registerNode",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub register_node: Option<bool>,
    /// OpenTelemetry tracing client configuration.
    #[serde(rename = "tracing", default, skip_serializing_if = "Option::is_none")]
    pub tracing: Option<TracingConfiguration>,
    /// Enables local ephemeral storage isolation. Default: true.
    #[serde(
        rename = "localStorageCapacityIsolation",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub local_storage_capacity_isolation: Option<bool>,
    /// Endpoint of the container runtime. Default: "unix:///run/containerd/containerd.sock".
    #[serde(
        rename = "containerRuntimeEndpoint",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub container_runtime_endpoint: Option<String>,
    /// Endpoint of the image service (defaults to containerRuntimeEndpoint).
    #[serde(
        rename = "imageServiceEndpoint",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub image_service_endpoint: Option<String>,
    /// Refuse to start on cgroup v1 hosts.
    #[serde(
        rename = "failCgroupV1",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub fail_cgroup_v1: Option<bool>,
    /// User namespace configuration.
    #[serde(
        rename = "userNamespaces",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub user_namespaces: Option<UserNamespaces>,
}

impl KubeletConfiguration {
    /// Whether a feature gate is set to `enabled` in this config's `featureGates`
    /// (`None` when the config does not mention it; see [`crate::features`] for defaults).
    pub fn feature_gate(&self, name: &str) -> Option<bool> {
        self.feature_gates.as_ref()?.get(name).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_nested_values() {
        let json = serde_json::json!({
            "apiVersion": API_VERSION,
            "kind": KIND,
            "staticPodURL": "http://x",
            "kubeAPIQPS": 20,
            "authentication": {"x509": {"clientCAFile": "/ca"}, "webhook": {"enabled": true, "cacheTTL": "2m0s"}},
            "evictionHard": {"memory.available": "100Mi"},
            "logging": {"flushFrequency": 5000000000u64, "verbosity": 2, "vmodule": [{"filePattern": "x*", "verbosity": 4}],
                        "options": {"json": {"infoBufferSize": "1Mi", "splitStream": true}}},
            "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}],
            "registerWithTaints": [{"key": "k", "value": "v", "effect": "NoSchedule"}],
            "shutdownGracePeriodByPodPriority": [{"priority": 10, "shutdownGracePeriodSeconds": 30}],
            "memoryThrottlingFactor": 0.9,
            "featureGates": {"NodeSwap": true},
        });
        let cfg: KubeletConfiguration = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(cfg.kube_api_qps, Some(20));
        assert_eq!(cfg.feature_gate("NodeSwap"), Some(true));
        assert_eq!(serde_json::to_value(&cfg).unwrap(), json);
    }
    #[test]
    fn unknown_fields_are_rejected() {
        let err =
            serde_json::from_str::<KubeletConfiguration>(r#"{"sytemReserved": {}}"#).unwrap_err();
        assert!(
            err.to_string().contains("unknown field `sytemReserved`"),
            "{err}"
        );
    }
}
