use super::*;
use crate::quantity::Quantity;
use crate::types::{
    CrashLoopBackOffConfig, LoggingConfiguration, MemoryReservation, MemorySwapConfiguration,
    ShutdownGracePeriodByPodPriority, Taint, TracingConfiguration, UserNamespaces,
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
    ("static cpuManagerPolicy without reserved CPU", |c| { c.cpu_manager_policy = s("static"); c.kube_reserved = map(&[("cpu", "0")]); }, "cpuManagerPolicy", "[cpumanager] unable to determine reserved CPU resources for static policy", 1),
    ("none cpuManagerPolicy with options", |c| { c.cpu_manager_policy = s("none"); c.cpu_manager_policy_options = map(&[("full-pcpus-only", "true"), ("align-by-socket", "true")]); }, "cpuManagerPolicyOptions", "new none policy error: None policy: received unsupported options=map[align-by-socket:true full-pcpus-only:true]", 1),
    ("memoryManagerPolicy", |c| c.memory_manager_policy = s("static"), "memoryManagerPolicy", "unknown policy: \"static\"", 1),
    ("topologyManagerPolicyOptions unknown", |c| { c.topology_manager_policy = s("best-effort"); c.topology_manager_policy_options = map(&[("bogus", "true")]); }, "topologyManagerPolicyOptions.bogus", "unknown Topology Manager Policy option: \"bogus\"", 1),
    ("topologyManagerPolicyOptions bool", |c| { c.topology_manager_policy = s("restricted"); c.topology_manager_policy_options = map(&[("prefer-closest-numa-nodes", "yes")]); }, "topologyManagerPolicyOptions.prefer-closest-numa-nodes", "bad value for option \"prefer-closest-numa-nodes\": strconv.ParseBool: parsing \"yes\": invalid syntax", 1),
    ("topologyManagerPolicyOptions minimum", |c| { c.topology_manager_policy = s("restricted"); c.topology_manager_policy_options = map(&[("max-allowable-numa-nodes", "4")]); }, "topologyManagerPolicyOptions.max-allowable-numa-nodes", "the minimum value of \"max-allowable-numa-nodes\" should not be less than 8", 1),
    ("memoryManagerPolicy of Windows", |c| c.memory_manager_policy = s("BestEffort"), "memoryManagerPolicy", "policy \"BestEffort\" is not available for platform \"linux\"", 1),
    ("configMapAndSecretChangeDetectionStrategy", |c| c.config_map_and_secret_change_detection_strategy = s("Poll"), "configMapAndSecretChangeDetectionStrategy", "unknown configmap and secret manager mode: Poll", 1),
    ("containerLogMaxSize syntax", |c| c.container_log_max_size = s("10MB"), "containerLogMaxSize", "failed to parse container log max size \"10MB\": quantities must match the regular expression", 1),
    ("containerLogMaxSize fraction", |c| c.container_log_max_size = s("1500m"), "containerLogMaxSize", "failed to parse container log max size \"1500m\": invalid max log size", 1),
    ("allowedUnsafeSysctls syntax", |c| c.allowed_unsafe_sysctls = list(&["net.core.somaxconn", "Net.*"]), "allowedUnsafeSysctls[1]", "sysctl \"Net.*\" must have at most 253 characters and match regex", 1),
    ("allowedUnsafeSysctls namespace", |c| c.allowed_unsafe_sysctls = list(&["kernel.domainname"]), "allowedUnsafeSysctls[0]", "the sysctls \"kernel.domainname\" are not known to be namespaced", 1),
    ("allowedUnsafeSysctls pattern namespace", |c| c.allowed_unsafe_sysctls = list(&["vm.*"]), "allowedUnsafeSysctls[0]", "the sysctls \"vm.\" are not known to be namespaced", 1),
    ("userNamespaces.idsPerPod multiple", |c| c.user_namespaces = Some(UserNamespaces { ids_per_pod: Some(100_000) }), "userNamespaces.idsPerPod", "invalid configuration: userNamespaces.idsPerPod must be a multiple of 65536", 1),
    ("userNamespaces.idsPerPod too small", |c| c.user_namespaces = Some(UserNamespaces { ids_per_pod: Some(0) }), "userNamespaces.idsPerPod", "invalid configuration: userNamespaces.idsPerPod must not be less than 65536", 1),
    ("userNamespaces.idsPerPod too large", |c| c.user_namespaces = Some(UserNamespaces { ids_per_pod: Some(65536 * 65536) }), "userNamespaces.idsPerPod", "invalid configuration: userNamespaces.idsPerPod must not be more than 4294967295", 1),
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
    ("failCgroupV1", |c| c.fail_cgroup_v1 = Some(true), "failCgroupV1", "kubelet is configured to not run on a host using cgroup v1. cgroup v1 support is unsupported and will be removed in a future release"),
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
