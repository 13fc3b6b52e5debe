//! Every flag the kubelet registers on Linux: `KubeletFlags.AddFlags` (node-local
//! settings), `AddKubeletConfigFlags` (each writes a `KubeletConfiguration` field, the
//! logging ones included through `logsapi.AddFlags`), and `AddGlobalFlags` plus cobra's
//! `--help` (`--version`, cadvisor's leftovers).

/// How a flag's value is parsed (its pflag `Value`) and written into the config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// `BoolVar`: `--flag` means true, `--flag=false`; never consumes the next word.
    Bool,
    /// `Int32Var`: Go's `strconv.ParseInt(s, 0, 32)` (`0x1f`, `0o17`, `017`, `1_000`).
    Int32,
    /// `Int64Var`: `strconv.ParseInt(s, 0, 64)`.
    Int64,
    /// Go's `int` (cadvisor's flags): 64-bit.
    Int,
    /// `-v`: klog's level, `strconv.ParseUint(s, 10, 31)`.
    Verbosity,
    /// `StringVar`: any text, empty included.
    String,
    /// `IPVar`: an IP address; an empty value leaves the field as it was.
    Ip,
    /// `DurationVar`: Go's `time.ParseDuration`, written as Go's `Duration.String()`.
    Duration,
    /// `resource.QuantityValue`: a quantity, written in canonical form.
    Quantity,
    /// `StringSliceVar`: comma-separated (CSV quoting); the first occurrence replaces the
    /// list, later ones append.
    StringSlice,
    /// `MapStringString`: `k=v,k2=v2`; the first occurrence replaces the whole map,
    /// later ones merge into it.
    MapStringString,
    /// `NewMapStringStringNoSplit`: one `k=v` per occurrence, commas belong to the value.
    MapStringStringNoSplit,
    /// `LangleSeparatedMapStringString` (eviction thresholds): `memory.available<100Mi,...`.
    LangleMap,
    /// `MapStringBool` (`--feature-gates`): `Gate=true,...`, merged over the file's gates.
    MapStringBool,
    /// `ColonSeparatedMultimapStringString` (`--manifest-url-header`): `k:v,k:v2`.
    ColonMultimap,
    /// `ConfigurationMap` (`--node-labels`): `k=v`, a bare `k` means an empty value.
    LabelMap,
    /// `RegisterWithTaintsVar`: `key=value:Effect,...`; each occurrence replaces the list.
    Taints,
    /// `ReservedMemoryVar`: `0:memory=1Gi,hugepages-1Gi=2Gi;1:memory=2Gi`; the first
    /// occurrence replaces the list, later ones append.
    ReservedMemory,
    /// `--vmodule`: `pattern=N,...`, appended to the list the file already has.
    VModule,
    /// `--version[=raw|true|false|vX.Y.Z]`.
    Version,
}

impl ValueKind {
    /// Whether the flag needs a value. Flags with pflag's `NoOptDefVal` (booleans and
    /// `--version`) do not, and never consume the next word.
    pub fn requires_value(self) -> bool {
        !matches!(self, ValueKind::Bool | ValueKind::Version)
    }

    /// The value pflag uses when such a flag is given without one.
    pub fn no_opt_default(self) -> Option<&'static str> {
        match self {
            ValueKind::Bool | ValueKind::Version => Some("true"),
            _ => None,
        }
    }

    /// The type name `kubelet --help` prints for the flag.
    pub fn type_name(self) -> &'static str {
        match self {
            ValueKind::Bool => "bool",
            ValueKind::Int32 => "int32",
            ValueKind::Int64 | ValueKind::Int => "int",
            ValueKind::Verbosity => "Level",
            ValueKind::String => "string",
            ValueKind::Ip => "ip",
            ValueKind::Duration => "duration",
            ValueKind::Quantity => "quantity",
            ValueKind::StringSlice => "strings",
            ValueKind::MapStringString
            | ValueKind::MapStringStringNoSplit
            | ValueKind::LangleMap
            | ValueKind::LabelMap => "mapStringString",
            ValueKind::MapStringBool => "mapStringBool",
            ValueKind::ColonMultimap => "colonSeparatedMultimapStringString",
            ValueKind::Taints => "[]v1.Taint",
            ValueKind::ReservedMemory => "reserved-memory",
            ValueKind::VModule => "pattern=N,...",
            ValueKind::Version => "version",
        }
    }
}

/// Where upstream registers a flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagGroup {
    /// `AddKubeletConfigFlags`: writes a `KubeletConfiguration` field.
    Config,
    /// `KubeletFlags.AddFlags`: node-local settings that are not in the config.
    Kubelet,
    /// `AddGlobalFlags` and cobra: `--help`, `--version`, cadvisor's flags.
    Global,
}

/// One kubelet flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlagInfo {
    /// The long name, without dashes (`max-pods`, `v`).
    pub name: &'static str,
    /// The one-letter shorthand (`-v`, `-h`).
    pub shorthand: Option<char>,
    /// How the value is parsed and written.
    pub kind: ValueKind,
    /// For config flags, the dotted JSON path of the field it writes
    /// (`maxPods`, `authentication.webhook.cacheTTL`, `logging.verbosity`).
    pub field: Option<&'static str>,
    /// Marked deprecated upstream (the kubelet warns, and still honours it).
    pub deprecated: bool,
    /// Where upstream registers it.
    pub group: FlagGroup,
}

impl FlagInfo {
    /// Whether the flag needs a value (see [`ValueKind::requires_value`]).
    pub fn takes_value(&self) -> bool {
        self.kind.requires_value()
    }

    /// Whether the flag writes a `KubeletConfiguration` field.
    pub fn is_config(&self) -> bool {
        self.field.is_some()
    }

    /// The flag as written on a command line: `--max-pods`, `-v`.
    pub fn display_name(&self) -> String {
        if self.name.len() == 1 {
            format!("-{}", self.name)
        } else {
            format!("--{}", self.name)
        }
    }

    /// The name pflag puts in an "invalid argument" error: `--max-pods`, `-v, --v`.
    pub(crate) fn error_name(&self) -> String {
        match self.shorthand {
            Some(c) => format!("-{c}, --{}", self.name),
            None => format!("--{}", self.name),
        }
    }
}

/// A config flag, deprecated like all of `AddKubeletConfigFlags` ("This parameter should
/// be set via the config file specified by the Kubelet's --config flag").
const fn config(name: &'static str, kind: ValueKind, field: &'static str) -> FlagInfo {
    FlagInfo {
        name,
        shorthand: None,
        kind,
        field: Some(field),
        deprecated: true,
        group: FlagGroup::Config,
    }
}

/// A config flag on upstream's `notDeprecated` list.
const fn config_kept(name: &'static str, kind: ValueKind, field: &'static str) -> FlagInfo {
    FlagInfo {
        deprecated: false,
        ..config(name, kind, field)
    }
}

/// A `KubeletFlags` flag (not in the config).
const fn node(name: &'static str, kind: ValueKind) -> FlagInfo {
    FlagInfo {
        name,
        shorthand: None,
        kind,
        field: None,
        deprecated: false,
        group: FlagGroup::Kubelet,
    }
}

/// A deprecated `KubeletFlags` flag.
const fn node_deprecated(name: &'static str, kind: ValueKind) -> FlagInfo {
    FlagInfo {
        deprecated: true,
        ..node(name, kind)
    }
}

/// A global flag (cobra, verflag, cadvisor).
const fn global(name: &'static str, kind: ValueKind, deprecated: bool) -> FlagInfo {
    FlagInfo {
        name,
        shorthand: None,
        kind,
        field: None,
        deprecated,
        group: FlagGroup::Global,
    }
}

use ValueKind as K;

/// Every kubelet flag on Linux, in upstream's registration order.
pub static FLAGS: &[FlagInfo] = &[
    // KubeletFlags.AddFlags (options.go) and ContainerRuntimeOptions.AddFlags
    // (pkg/kubelet/config/flags.go).
    // (--pod-infra-container-image is gone in v1.36.)
    node("runtime-cgroups", K::String),
    node("image-credential-provider-config", K::String),
    node("image-credential-provider-bin-dir", K::String),
    node("config", K::String),
    node("config-dir", K::String),
    node("kubeconfig", K::String),
    node("bootstrap-kubeconfig", K::String),
    node("hostname-override", K::String),
    node("node-ip", K::String),
    node("cert-dir", K::String),
    node("cloud-provider", K::String),
    node("root-dir", K::String),
    // OR'ed with the config's seccompDefault at startup; it does not write the config.
    node("seccomp-default", K::Bool),
    node("node-labels", K::LabelMap),
    node("lock-file", K::String),
    node("exit-on-lock-contention", K::Bool),
    node_deprecated("minimum-container-ttl-duration", K::Duration),
    node_deprecated("maximum-dead-containers-per-container", K::Int32),
    node_deprecated("maximum-dead-containers", K::Int32),
    node_deprecated("experimental-mounter-path", K::String),
    node_deprecated("experimental-allocatable-ignore-eviction", K::Bool),
    // AddKubeletConfigFlags (options.go).
    config("enable-server", K::Bool, "enableServer"),
    config("fail-swap-on", K::Bool, "failSwapOn"),
    // Added in 1.31; shown without a deprecation notice in the 1.34 reference.
    config_kept("fail-cgroupv1", K::Bool, "failCgroupV1"),
    config("pod-manifest-path", K::String, "staticPodPath"),
    config("sync-frequency", K::Duration, "syncFrequency"),
    config("file-check-frequency", K::Duration, "fileCheckFrequency"),
    config("http-check-frequency", K::Duration, "httpCheckFrequency"),
    config("manifest-url", K::String, "staticPodURL"),
    config(
        "manifest-url-header",
        K::ColonMultimap,
        "staticPodURLHeader",
    ),
    config("address", K::Ip, "address"),
    config("port", K::Int32, "port"),
    config("read-only-port", K::Int32, "readOnlyPort"),
    config(
        "container-runtime-endpoint",
        K::String,
        "containerRuntimeEndpoint",
    ),
    config("image-service-endpoint", K::String, "imageServiceEndpoint"),
    config(
        "anonymous-auth",
        K::Bool,
        "authentication.anonymous.enabled",
    ),
    config(
        "authentication-token-webhook",
        K::Bool,
        "authentication.webhook.enabled",
    ),
    config(
        "authentication-token-webhook-cache-ttl",
        K::Duration,
        "authentication.webhook.cacheTTL",
    ),
    config(
        "client-ca-file",
        K::String,
        "authentication.x509.clientCAFile",
    ),
    config("authorization-mode", K::String, "authorization.mode"),
    config(
        "authorization-webhook-cache-authorized-ttl",
        K::Duration,
        "authorization.webhook.cacheAuthorizedTTL",
    ),
    config(
        "authorization-webhook-cache-unauthorized-ttl",
        K::Duration,
        "authorization.webhook.cacheUnauthorizedTTL",
    ),
    config("tls-cert-file", K::String, "tlsCertFile"),
    config("tls-private-key-file", K::String, "tlsPrivateKeyFile"),
    config("rotate-server-certificates", K::Bool, "serverTLSBootstrap"),
    config("tls-cipher-suites", K::StringSlice, "tlsCipherSuites"),
    config("tls-min-version", K::String, "tlsMinVersion"),
    config("rotate-certificates", K::Bool, "rotateCertificates"),
    config("registry-qps", K::Int32, "registryPullQPS"),
    config("registry-burst", K::Int32, "registryBurst"),
    config("event-qps", K::Int32, "eventRecordQPS"),
    config("event-burst", K::Int32, "eventBurst"),
    config(
        "enable-debugging-handlers",
        K::Bool,
        "enableDebuggingHandlers",
    ),
    config("contention-profiling", K::Bool, "enableContentionProfiling"),
    config("healthz-port", K::Int32, "healthzPort"),
    config("healthz-bind-address", K::Ip, "healthzBindAddress"),
    config("oom-score-adj", K::Int32, "oomScoreAdj"),
    config("cluster-domain", K::String, "clusterDomain"),
    config("volume-plugin-dir", K::String, "volumePluginDir"),
    config("cluster-dns", K::StringSlice, "clusterDNS"),
    config(
        "streaming-connection-idle-timeout",
        K::Duration,
        "streamingConnectionIdleTimeout",
    ),
    config(
        "node-status-update-frequency",
        K::Duration,
        "nodeStatusUpdateFrequency",
    ),
    config(
        "minimum-image-ttl-duration",
        K::Duration,
        "imageMinimumGCAge",
    ),
    config(
        "image-gc-high-threshold",
        K::Int32,
        "imageGCHighThresholdPercent",
    ),
    config(
        "image-gc-low-threshold",
        K::Int32,
        "imageGCLowThresholdPercent",
    ),
    config(
        "volume-stats-agg-period",
        K::Duration,
        "volumeStatsAggPeriod",
    ),
    config("feature-gates", K::MapStringBool, "featureGates"),
    config("kubelet-cgroups", K::String, "kubeletCgroups"),
    config("system-cgroups", K::String, "systemCgroups"),
    config_kept("provider-id", K::String, "providerID"),
    config("cgroups-per-qos", K::Bool, "cgroupsPerQOS"),
    config("cgroup-driver", K::String, "cgroupDriver"),
    config("cgroup-root", K::String, "cgroupRoot"),
    config("cpu-manager-policy", K::String, "cpuManagerPolicy"),
    config(
        "cpu-manager-policy-options",
        K::MapStringStringNoSplit,
        "cpuManagerPolicyOptions",
    ),
    config(
        "cpu-manager-reconcile-period",
        K::Duration,
        "cpuManagerReconcilePeriod",
    ),
    config("qos-reserved", K::MapStringString, "qosReserved"),
    config(
        "topology-manager-policy",
        K::String,
        "topologyManagerPolicy",
    ),
    config(
        "runtime-request-timeout",
        K::Duration,
        "runtimeRequestTimeout",
    ),
    config("hairpin-mode", K::String, "hairpinMode"),
    config("max-pods", K::Int32, "maxPods"),
    config("pod-cidr", K::String, "podCIDR"),
    config("pod-max-pids", K::Int64, "podPidsLimit"),
    config("resolv-conf", K::String, "resolvConf"),
    config("runonce", K::Bool, "runOnce"),
    config("cpu-cfs-quota", K::Bool, "cpuCFSQuota"),
    config("cpu-cfs-quota-period", K::Duration, "cpuCFSQuotaPeriod"),
    config(
        "enable-controller-attach-detach",
        K::Bool,
        "enableControllerAttachDetach",
    ),
    config(
        "make-iptables-util-chains",
        K::Bool,
        "makeIPTablesUtilChains",
    ),
    // (--iptables-masquerade-bit and --iptables-drop-bit are gone in v1.36; their fields
    // are still in the config.)
    config("container-log-max-size", K::String, "containerLogMaxSize"),
    config("container-log-max-files", K::Int32, "containerLogMaxFiles"),
    config(
        "allowed-unsafe-sysctls",
        K::StringSlice,
        "allowedUnsafeSysctls",
    ),
    config("node-status-max-images", K::Int32, "nodeStatusMaxImages"),
    config(
        "kernel-memcg-notification",
        K::Bool,
        "kernelMemcgNotification",
    ),
    config(
        "local-storage-capacity-isolation",
        K::Bool,
        "localStorageCapacityIsolation",
    ),
    config("max-open-files", K::Int64, "maxOpenFiles"),
    config("kube-api-content-type", K::String, "contentType"),
    config("kube-api-qps", K::Int32, "kubeAPIQPS"),
    config("kube-api-burst", K::Int32, "kubeAPIBurst"),
    config("serialize-image-pulls", K::Bool, "serializeImagePulls"),
    config("eviction-hard", K::LangleMap, "evictionHard"),
    config("eviction-soft", K::LangleMap, "evictionSoft"),
    config(
        "eviction-soft-grace-period",
        K::MapStringString,
        "evictionSoftGracePeriod",
    ),
    config(
        "eviction-pressure-transition-period",
        K::Duration,
        "evictionPressureTransitionPeriod",
    ),
    config(
        "eviction-max-pod-grace-period",
        K::Int32,
        "evictionMaxPodGracePeriod",
    ),
    config(
        "eviction-minimum-reclaim",
        K::MapStringString,
        "evictionMinimumReclaim",
    ),
    config("pods-per-core", K::Int32, "podsPerCore"),
    config("protect-kernel-defaults", K::Bool, "protectKernelDefaults"),
    config("reserved-cpus", K::String, "reservedSystemCPUs"),
    config("topology-manager-scope", K::String, "topologyManagerScope"),
    // NewMapStringString, unlike --cpu-manager-policy-options: commas split pairs.
    config(
        "topology-manager-policy-options",
        K::MapStringString,
        "topologyManagerPolicyOptions",
    ),
    config("system-reserved", K::MapStringString, "systemReserved"),
    config("kube-reserved", K::MapStringString, "kubeReserved"),
    config(
        "enforce-node-allocatable",
        K::StringSlice,
        "enforceNodeAllocatable",
    ),
    config("system-reserved-cgroup", K::String, "systemReservedCgroup"),
    config("kube-reserved-cgroup", K::String, "kubeReservedCgroup"),
    // logsapi.AddFlags(&c.Logging, fs) (component-base/logs/api/v1/options.go).
    config("logging-format", K::String, "logging.format"),
    config_kept("log-flush-frequency", K::Duration, "logging.flushFrequency"),
    FlagInfo {
        shorthand: Some('v'),
        ..config_kept("v", K::Verbosity, "logging.verbosity")
    },
    config_kept("vmodule", K::VModule, "logging.vmodule"),
    config(
        "log-text-split-stream",
        K::Bool,
        "logging.options.text.splitStream",
    ),
    config(
        "log-text-info-buffer-size",
        K::Quantity,
        "logging.options.text.infoBufferSize",
    ),
    // Registered because cmd/kubelet imports the JSON log format.
    config(
        "log-json-split-stream",
        K::Bool,
        "logging.options.json.splitStream",
    ),
    config(
        "log-json-info-buffer-size",
        K::Quantity,
        "logging.options.json.infoBufferSize",
    ),
    config("memory-manager-policy", K::String, "memoryManagerPolicy"),
    config("reserved-memory", K::ReservedMemory, "reservedMemory"),
    config("register-node", K::Bool, "registerNode"),
    config("register-with-taints", K::Taints, "registerWithTaints"),
    // AddGlobalFlags: cadvisor's flags (globalflags_linux.go), verflag; cobra's help.
    global("housekeeping-interval", K::Duration, false),
    global("application-metrics-count-limit", K::Int, true),
    global("boot-id-file", K::String, true),
    global("container-hints", K::String, true),
    global("containerd", K::String, true),
    global("enable-load-reader", K::Bool, true),
    global("event-storage-age-limit", K::String, true),
    global("event-storage-event-limit", K::String, true),
    global("global-housekeeping-interval", K::Duration, true),
    global("log-cadvisor-usage", K::Bool, true),
    global("machine-id-file", K::String, true),
    global("storage-driver-user", K::String, true),
    global("storage-driver-password", K::String, true),
    global("storage-driver-host", K::String, true),
    global("storage-driver-db", K::String, true),
    global("storage-driver-table", K::String, true),
    global("storage-driver-secure", K::Bool, true),
    global("storage-driver-buffer-duration", K::Duration, true),
    global("containerd-namespace", K::String, true),
    global("version", K::Version, false),
    FlagInfo {
        shorthand: Some('h'),
        ..global("help", K::Bool, false)
    },
];

/// pflag's `WordSepNormalizeFunc`: `max_pods` is `max-pods`.
pub(crate) fn normalize(name: &str) -> String {
    name.replace('_', "-")
}

/// The flag named `name`, written with or without dashes, with `_` or `-`
/// (`max-pods`, `--max-pods`, `max_pods`, `-v`). `None` for a flag the kubelet does not
/// register.
pub fn flag_info(name: &str) -> Option<&'static FlagInfo> {
    let bare = name.trim_start_matches('-');
    let wanted = normalize(bare);
    FLAGS.iter().find(|f| f.name == wanted)
}

/// The flag whose shorthand is `c` (`v`, `h`).
pub fn flag_by_shorthand(c: char) -> Option<&'static FlagInfo> {
    FLAGS.iter().find(|f| f.shorthand == Some(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Every flag in the generated kubelet reference: kubernetes/website
    /// `content/en/docs/reference/command-line-tools-reference/kubelet.md` @
    /// 00cce4136eb6507551a29d29715ff10b463cc5ad (`kubelet --help`, v1.34), less the flags
    /// v1.36 no longer registers (`--pod-infra-container-image`; the hidden
    /// `--iptables-masquerade-bit` and `--iptables-drop-bit` were never on it). The whole
    /// v1.36 flag set, from the kubelet's own code, is checked by
    /// `tests/tests/kubelet_flags_oracle.rs`.
    const REFERENCE_V1_34: &[&str] = &[
        "address",
        "allowed-unsafe-sysctls",
        "anonymous-auth",
        "authentication-token-webhook",
        "authentication-token-webhook-cache-ttl",
        "authorization-mode",
        "authorization-webhook-cache-authorized-ttl",
        "authorization-webhook-cache-unauthorized-ttl",
        "bootstrap-kubeconfig",
        "cert-dir",
        "cgroup-driver",
        "cgroup-root",
        "cgroups-per-qos",
        "client-ca-file",
        "cloud-provider",
        "cluster-dns",
        "cluster-domain",
        "config",
        "config-dir",
        "container-log-max-files",
        "container-log-max-size",
        "container-runtime-endpoint",
        "contention-profiling",
        "cpu-cfs-quota",
        "cpu-cfs-quota-period",
        "cpu-manager-policy",
        "cpu-manager-policy-options",
        "cpu-manager-reconcile-period",
        "enable-controller-attach-detach",
        "enable-debugging-handlers",
        "enable-server",
        "enforce-node-allocatable",
        "event-burst",
        "event-qps",
        "eviction-hard",
        "eviction-max-pod-grace-period",
        "eviction-minimum-reclaim",
        "eviction-pressure-transition-period",
        "eviction-soft",
        "eviction-soft-grace-period",
        "exit-on-lock-contention",
        "experimental-allocatable-ignore-eviction",
        "experimental-mounter-path",
        "fail-cgroupv1",
        "fail-swap-on",
        "feature-gates",
        "file-check-frequency",
        "hairpin-mode",
        "healthz-bind-address",
        "healthz-port",
        "help",
        "hostname-override",
        "http-check-frequency",
        "image-credential-provider-bin-dir",
        "image-credential-provider-config",
        "image-gc-high-threshold",
        "image-gc-low-threshold",
        "image-service-endpoint",
        "kernel-memcg-notification",
        "kube-api-burst",
        "kube-api-content-type",
        "kube-api-qps",
        "kube-reserved",
        "kube-reserved-cgroup",
        "kubeconfig",
        "kubelet-cgroups",
        "local-storage-capacity-isolation",
        "lock-file",
        "log-flush-frequency",
        "log-text-info-buffer-size",
        "log-text-split-stream",
        "logging-format",
        "make-iptables-util-chains",
        "manifest-url",
        "manifest-url-header",
        "max-open-files",
        "max-pods",
        "maximum-dead-containers",
        "maximum-dead-containers-per-container",
        "memory-manager-policy",
        "minimum-container-ttl-duration",
        "minimum-image-ttl-duration",
        "node-ip",
        "node-labels",
        "node-status-max-images",
        "node-status-update-frequency",
        "oom-score-adj",
        "pod-cidr",
        "pod-manifest-path",
        "pod-max-pids",
        "pods-per-core",
        "port",
        "protect-kernel-defaults",
        "provider-id",
        "qos-reserved",
        "read-only-port",
        "register-node",
        "register-with-taints",
        "registry-burst",
        "registry-qps",
        "reserved-cpus",
        "reserved-memory",
        "resolv-conf",
        "root-dir",
        "rotate-certificates",
        "rotate-server-certificates",
        "runonce",
        "runtime-cgroups",
        "runtime-request-timeout",
        "seccomp-default",
        "serialize-image-pulls",
        "streaming-connection-idle-timeout",
        "sync-frequency",
        "system-cgroups",
        "system-reserved",
        "system-reserved-cgroup",
        "tls-cert-file",
        "tls-cipher-suites",
        "tls-min-version",
        "tls-private-key-file",
        "topology-manager-policy",
        "topology-manager-policy-options",
        "topology-manager-scope",
        "v",
        "version",
        "vmodule",
        "volume-plugin-dir",
        "volume-stats-agg-period",
    ];

    /// Registered only when the JSON log format is linked in, as `cmd/kubelet` does
    /// (`staging/src/k8s.io/component-base/logs/api/v1/options.go` @
    /// 02efe09abe36ae173e70387413a5ba9e6cff1184).
    const JSON_LOGGING_FLAGS: &[&str] = &["log-json-split-stream", "log-json-info-buffer-size"];

    /// cadvisor's flags the kubelet re-registers on Linux (the deprecated ones hidden)
    /// (`cmd/kubelet/app/options/globalflags_linux.go` @
    /// f9cfc9d93491c42c0ee6b3705d4c46f7e173f356), normalized `_` to `-`.
    const CADVISOR_FLAGS: &[&str] = &[
        "housekeeping-interval",
        "application-metrics-count-limit",
        "boot-id-file",
        "container-hints",
        "containerd",
        "enable-load-reader",
        "event-storage-age-limit",
        "event-storage-event-limit",
        "global-housekeeping-interval",
        "log-cadvisor-usage",
        "machine-id-file",
        "storage-driver-user",
        "storage-driver-password",
        "storage-driver-host",
        "storage-driver-db",
        "storage-driver-table",
        "storage-driver-secure",
        "storage-driver-buffer-duration",
        "containerd-namespace",
    ];

    /// `AddKubeletConfigFlags` (options.go @ 6785e9ed..., plus `fail-cgroupv1` from the
    /// v1.34 reference and the logging flags of `logsapi.AddFlags`): flag -> field.
    const CONFIG_FLAG_FIELDS: &[(&str, &str)] = &[
        ("enable-server", "enableServer"),
        ("fail-swap-on", "failSwapOn"),
        ("fail-cgroupv1", "failCgroupV1"),
        ("pod-manifest-path", "staticPodPath"),
        ("sync-frequency", "syncFrequency"),
        ("file-check-frequency", "fileCheckFrequency"),
        ("http-check-frequency", "httpCheckFrequency"),
        ("manifest-url", "staticPodURL"),
        ("manifest-url-header", "staticPodURLHeader"),
        ("address", "address"),
        ("port", "port"),
        ("read-only-port", "readOnlyPort"),
        ("container-runtime-endpoint", "containerRuntimeEndpoint"),
        ("image-service-endpoint", "imageServiceEndpoint"),
        ("anonymous-auth", "authentication.anonymous.enabled"),
        (
            "authentication-token-webhook",
            "authentication.webhook.enabled",
        ),
        (
            "authentication-token-webhook-cache-ttl",
            "authentication.webhook.cacheTTL",
        ),
        ("client-ca-file", "authentication.x509.clientCAFile"),
        ("authorization-mode", "authorization.mode"),
        (
            "authorization-webhook-cache-authorized-ttl",
            "authorization.webhook.cacheAuthorizedTTL",
        ),
        (
            "authorization-webhook-cache-unauthorized-ttl",
            "authorization.webhook.cacheUnauthorizedTTL",
        ),
        ("tls-cert-file", "tlsCertFile"),
        ("tls-private-key-file", "tlsPrivateKeyFile"),
        ("rotate-server-certificates", "serverTLSBootstrap"),
        ("tls-cipher-suites", "tlsCipherSuites"),
        ("tls-min-version", "tlsMinVersion"),
        ("rotate-certificates", "rotateCertificates"),
        ("registry-qps", "registryPullQPS"),
        ("registry-burst", "registryBurst"),
        ("event-qps", "eventRecordQPS"),
        ("event-burst", "eventBurst"),
        ("enable-debugging-handlers", "enableDebuggingHandlers"),
        ("contention-profiling", "enableContentionProfiling"),
        ("healthz-port", "healthzPort"),
        ("healthz-bind-address", "healthzBindAddress"),
        ("oom-score-adj", "oomScoreAdj"),
        ("cluster-domain", "clusterDomain"),
        ("volume-plugin-dir", "volumePluginDir"),
        ("cluster-dns", "clusterDNS"),
        (
            "streaming-connection-idle-timeout",
            "streamingConnectionIdleTimeout",
        ),
        ("node-status-update-frequency", "nodeStatusUpdateFrequency"),
        ("minimum-image-ttl-duration", "imageMinimumGCAge"),
        ("image-gc-high-threshold", "imageGCHighThresholdPercent"),
        ("image-gc-low-threshold", "imageGCLowThresholdPercent"),
        ("volume-stats-agg-period", "volumeStatsAggPeriod"),
        ("feature-gates", "featureGates"),
        ("kubelet-cgroups", "kubeletCgroups"),
        ("system-cgroups", "systemCgroups"),
        ("provider-id", "providerID"),
        ("cgroups-per-qos", "cgroupsPerQOS"),
        ("cgroup-driver", "cgroupDriver"),
        ("cgroup-root", "cgroupRoot"),
        ("cpu-manager-policy", "cpuManagerPolicy"),
        ("cpu-manager-policy-options", "cpuManagerPolicyOptions"),
        ("cpu-manager-reconcile-period", "cpuManagerReconcilePeriod"),
        ("qos-reserved", "qosReserved"),
        ("topology-manager-policy", "topologyManagerPolicy"),
        ("runtime-request-timeout", "runtimeRequestTimeout"),
        ("hairpin-mode", "hairpinMode"),
        ("max-pods", "maxPods"),
        ("pod-cidr", "podCIDR"),
        ("pod-max-pids", "podPidsLimit"),
        ("resolv-conf", "resolvConf"),
        ("runonce", "runOnce"),
        ("cpu-cfs-quota", "cpuCFSQuota"),
        ("cpu-cfs-quota-period", "cpuCFSQuotaPeriod"),
        (
            "enable-controller-attach-detach",
            "enableControllerAttachDetach",
        ),
        ("make-iptables-util-chains", "makeIPTablesUtilChains"),
        ("container-log-max-size", "containerLogMaxSize"),
        ("container-log-max-files", "containerLogMaxFiles"),
        ("allowed-unsafe-sysctls", "allowedUnsafeSysctls"),
        ("node-status-max-images", "nodeStatusMaxImages"),
        ("kernel-memcg-notification", "kernelMemcgNotification"),
        (
            "local-storage-capacity-isolation",
            "localStorageCapacityIsolation",
        ),
        ("max-open-files", "maxOpenFiles"),
        ("kube-api-content-type", "contentType"),
        ("kube-api-qps", "kubeAPIQPS"),
        ("kube-api-burst", "kubeAPIBurst"),
        ("serialize-image-pulls", "serializeImagePulls"),
        ("eviction-hard", "evictionHard"),
        ("eviction-soft", "evictionSoft"),
        ("eviction-soft-grace-period", "evictionSoftGracePeriod"),
        (
            "eviction-pressure-transition-period",
            "evictionPressureTransitionPeriod",
        ),
        ("eviction-max-pod-grace-period", "evictionMaxPodGracePeriod"),
        ("eviction-minimum-reclaim", "evictionMinimumReclaim"),
        ("pods-per-core", "podsPerCore"),
        ("protect-kernel-defaults", "protectKernelDefaults"),
        ("reserved-cpus", "reservedSystemCPUs"),
        ("topology-manager-scope", "topologyManagerScope"),
        (
            "topology-manager-policy-options",
            "topologyManagerPolicyOptions",
        ),
        ("system-reserved", "systemReserved"),
        ("kube-reserved", "kubeReserved"),
        ("enforce-node-allocatable", "enforceNodeAllocatable"),
        ("system-reserved-cgroup", "systemReservedCgroup"),
        ("kube-reserved-cgroup", "kubeReservedCgroup"),
        ("logging-format", "logging.format"),
        ("log-flush-frequency", "logging.flushFrequency"),
        ("v", "logging.verbosity"),
        ("vmodule", "logging.vmodule"),
        ("log-text-split-stream", "logging.options.text.splitStream"),
        (
            "log-text-info-buffer-size",
            "logging.options.text.infoBufferSize",
        ),
        ("log-json-split-stream", "logging.options.json.splitStream"),
        (
            "log-json-info-buffer-size",
            "logging.options.json.infoBufferSize",
        ),
        ("memory-manager-policy", "memoryManagerPolicy"),
        ("reserved-memory", "reservedMemory"),
        ("register-node", "registerNode"),
        ("register-with-taints", "registerWithTaints"),
    ];

    #[test]
    fn table_is_exactly_the_upstream_flags() {
        let upstream: BTreeSet<&str> = REFERENCE_V1_34
            .iter()
            .chain(JSON_LOGGING_FLAGS)
            .chain(CADVISOR_FLAGS)
            .copied()
            .collect();
        let ours: BTreeSet<&str> = FLAGS.iter().map(|f| f.name).collect();
        let missing: Vec<_> = upstream.difference(&ours).collect();
        let invented: Vec<_> = ours.difference(&upstream).collect();
        assert!(
            missing.is_empty(),
            "flags missing from the table: {missing:?}"
        );
        assert!(invented.is_empty(), "flags not in upstream: {invented:?}");
        assert_eq!(ours.len(), FLAGS.len(), "a flag is listed twice");
    }

    #[test]
    fn config_flags_write_the_fields_upstream_binds() {
        let ours: Vec<(&str, &str)> = FLAGS
            .iter()
            .filter_map(|f| f.field.map(|field| (f.name, field)))
            .collect();
        assert_eq!(ours.len(), CONFIG_FLAG_FIELDS.len());
        for (name, field) in CONFIG_FLAG_FIELDS {
            let info = flag_info(name).unwrap_or_else(|| panic!("{name} missing"));
            assert_eq!(info.field, Some(*field), "{name}");
            assert_eq!(info.group, FlagGroup::Config, "{name}");
        }
    }

    #[test]
    fn every_field_path_starts_with_a_real_config_field() {
        for f in FLAGS.iter().filter(|f| f.is_config()) {
            let field = f.field.unwrap_or_default();
            let top = field.split('.').next().unwrap_or_default();
            assert!(
                crate::types::KUBELET_CONFIGURATION_FIELDS.contains(&top),
                "--{} writes {field}, whose top-level field {top} is not in the model",
                f.name
            );
        }
    }

    #[test]
    fn lookup_accepts_the_spellings_pflag_accepts() {
        assert_eq!(flag_info("max-pods").map(|f| f.name), Some("max-pods"));
        assert_eq!(flag_info("--max-pods").map(|f| f.name), Some("max-pods"));
        assert_eq!(flag_info("max_pods").map(|f| f.name), Some("max-pods"));
        assert_eq!(
            flag_info("-v").map(|f| f.field),
            Some(Some("logging.verbosity"))
        );
        assert_eq!(flag_by_shorthand('h').map(|f| f.name), Some("help"));
        assert!(flag_info("max-pod").is_none());
        assert!(flag_info("keep-terminated-pod-volumes").is_none());
    }

    #[test]
    fn deprecation_follows_upstream() {
        for kept in [
            "v",
            "vmodule",
            "log-flush-frequency",
            "provider-id",
            "config",
            "node-ip",
        ] {
            assert!(!flag_info(kept).is_some_and(|f| f.deprecated), "{kept}");
        }
        for gone in [
            "max-pods",
            "eviction-hard",
            "minimum-container-ttl-duration",
            "logging-format",
        ] {
            assert!(flag_info(gone).is_some_and(|f| f.deprecated), "{gone}");
        }
    }

    #[test]
    fn only_bool_and_version_flags_take_no_value() {
        assert!(!flag_info("fail-swap-on").is_some_and(FlagInfo::takes_value));
        assert!(!flag_info("version").is_some_and(FlagInfo::takes_value));
        assert!(flag_info("max-pods").is_some_and(FlagInfo::takes_value));
        assert!(flag_info("v").is_some_and(FlagInfo::takes_value));
        assert_eq!(
            flag_info("max-pods").map(FlagInfo::display_name).as_deref(),
            Some("--max-pods")
        );
        assert_eq!(
            flag_info("v").map(FlagInfo::display_name).as_deref(),
            Some("-v")
        );
    }
}
