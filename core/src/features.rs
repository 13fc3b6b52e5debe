//! The kubelet's feature gates: every gate its `utilfeature.DefaultMutableFeatureGate` knows
//! when it validates `featureGates`, with default, lock and stage evaluated at Kubernetes
//! v1.36 (for versioned specs, the spec whose version is the newest <= 1.36), and
//! `featureGates` validation worded as upstream's `SetFromMap`.
//!
//! # What the kubelet's gate holds
//!
//! `pkg/features/kube_features.go` `init()` adds `defaultVersionedKubernetesFeatureGates`
//! (the kube gates plus the apiserver, apiextensions-apiserver, controller-manager and
//! zpages gates it relists), its dependency table, `zpagesfeatures.AddFeatureGates` and
//! every client-go gate (through `clientAdapter`); importing the apiserver and
//! apiextensions feature packages registers all of their gates too. The kubelet adds the
//! component-base logs gates in `cmd/kubelet/app/server.go` `init()`
//! (`logsapi.AddFeatureGates`) and the component-base metrics gates in
//! `pkg/kubelet/server/server.go` `init()` (`metricsfeatures.AddFeatureGates`).
//! `featuregate` itself adds `AllAlpha` and `AllBeta`.
//!
//! # Sources (search tool, repo kubernetes/kubernetes unless named)
//!
//! The index holds no v1.36 tag of `pkg/features/kube_features.go`; its default stored
//! version (commit 0021731de5897e81f1d576a134db15c7c301eeff) is years old and the newest
//! reachable one (stored version id 378079260, no commit reported) is early v1.36
//! development. The table therefore comes from, and was cross-checked between:
//! - `test/compatibility_lifecycle/reference/versioned_feature_list.yaml` (generated from
//!   every `VersionedSpecs` map under `pkg/` and `staging/`) in openshift/kubernetes at
//!   commit 0b0e324c800b9839e0e00c0b75c3e70674b355da, taken just after the v1.36 branch
//!   (its only later entry, `VolumeBindMountOptions`, starts at 1.37 and is left out);
//!   the same file in HarshalNeelkamal/kubernetes at
//!   dbdea4fee88fa05f388b58cf01330128a88c3fa6 (mid v1.36) names no gate the first lacks.
//!   The file lists Go identifiers: `CPUCFSQuotaPeriod` and `RuntimeClassInImageCriAPI`
//!   are registered as `CustomCPUCFSQuotaPeriod` and `RuntimeClassInImageCriApi`.
//!   `AllowServiceExternalIPs` is GA there (on, unlocked); the website's page calls it
//!   deprecated from 1.36 with the same default, so only its stage is uncertain.
//! - client-go gates (not in that file): `staging/src/k8s.io/client-go/features/
//!   known_features.go` in openshift/kubernetes at 8368e5b037a0626a4ad5010340f9b8a851a74cc8,
//!   except `ClientsAllowTLSCacheGC`, on by default in v1.36 per the next two sources.
//! - kubernetes/website `content/en/docs/reference/command-line-tools-reference/
//!   kube-scheduler.md` generated from a v1.36 binary (`kube=1.33..1.36(default:1.36)`):
//!   its `--feature-gates` list (every alpha and beta gate of the same shared gate) matches
//!   the alpha and beta gates of this table exactly, name, stage and default.
//! - `CHANGELOG/CHANGELOG-1.36.md` (v1.36.0): removals (`CSIMigrationPortworx`,
//!   `InTreePluginPortworxUnregister`, `HonorPVReclaimPolicy`,
//!   `WatchFromStorageWithoutResourceVersion`) and graduations agree with the table. Its
//!   note that #137909 turned `PLEGOnDemandRelist` off is stale: #137946 reverted it
//!   before the release, and both generated sources above keep it on.
//! - `staging/src/k8s.io/component-base/featuregate/feature_gate.go` at
//!   00c2fffd238f216a4f8820f27fa47c3a6a86c1be for `SetFromMap`'s messages, `AllAlpha` /
//!   `AllBeta` and the dependency check; `cmd/kubelet/app/server.go` at
//!   001332b0422071acf4860769f18e34b5e9b7c1bc for the logs gates.
//! - Dependencies: at first `defaultKubernetesFeatureGateDependencies` of the early v1.36
//!   `kube_features.go`; now the kubelet's own, as `kubelet-oracle gates` lists them.
//!
//! # Measured
//!
//! Since issue 14 the table is checked against a v1.36.3 kubelet's own process:
//! `kubelet-oracle gates` (upstream/cmd/kubelet-oracle, linking k8s.io/kubernetes v1.36.3
//! and the kubelet's command package) lists every gate with its default, lock, stage and
//! dependencies, and `feature_gates_are_the_kubelets` (tests/tests/kubelet_oracle.rs)
//! requires this table to equal it. The first run found the 242 gates' defaults, locks
//! and stages all right, and 18 dependency lists missing or short (added).
//!
//! # Behaviour kept from `SetFromMap` (and where we differ)
//!
//! - An unknown name: `unrecognized feature gate: NAME`. Upstream stops at the first
//!   unknown name of a randomly ordered Go map; we report every problem, in name order.
//! - A locked gate set to another value: `cannot set feature gate NAME to VALUE, feature is
//!   locked to DEFAULT`. Locked gates set to their default, and GA or deprecated gates,
//!   are accepted (upstream only logs a warning: see [`warnings`]).
//! - `AllAlpha` / `AllBeta` are gates (alpha / beta, off by default); set, they give every
//!   alpha / beta gate the config does not name their value.
//! - Only when every name passes: each enabled gate whose dependencies are not all enabled
//!   gives `NAME is enabled, but depends on features that are disabled: [DEP ...]`.
//! - No gate here is pre-alpha at 1.36, so upstream's "feature is PreAlpha" error cannot
//!   occur.

use std::collections::BTreeMap;

/// Maturity of a feature gate at the evaluated version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Alpha: off by default.
    Alpha,
    /// Beta: on or off by default.
    Beta,
    /// Generally available.
    GA,
    /// Deprecated.
    Deprecated,
}

/// One feature gate as the kubelet registers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureSpec {
    /// Gate name, as written in `featureGates`.
    pub name: &'static str,
    /// Value when the config does not set it.
    pub default: bool,
    /// Whether setting it to anything but `default` is an error.
    pub locked: bool,
    /// Maturity.
    pub stage: Stage,
}

/// The Kubernetes minor version the table is evaluated at.
pub const KUBERNETES_VERSION: &str = "1.36";

/// The gate that gives every alpha gate the config does not name its value.
pub const ALL_ALPHA: &str = "AllAlpha";

/// The gate that gives every beta gate the config does not name its value.
pub const ALL_BETA: &str = "AllBeta";

const fn f(name: &'static str, default: bool, locked: bool, stage: Stage) -> FeatureSpec {
    FeatureSpec {
        name,
        default,
        locked,
        stage,
    }
}

use Stage::{Alpha, Beta, Deprecated, GA};

/// Every gate, sorted by name (byte order, as `str::cmp`).
static FEATURES: &[FeatureSpec] = &[
    f("APIResponseCompression", true, false, Beta),
    f("APIServerIdentity", true, false, Beta),
    f("APIServerTracing", true, true, GA),
    f("APIServingWithRoutine", false, false, Alpha),
    f("AggregatedDiscoveryRemoveBetaType", true, true, Deprecated),
    f("AllAlpha", false, false, Alpha),
    f("AllBeta", false, false, Beta),
    f("AllowDNSOnlyNodeCSR", false, false, Deprecated),
    f(
        "AllowInsecureKubeletCertificateSigningRequests",
        false,
        false,
        Deprecated,
    ),
    f(
        "AllowOverwriteTerminationGracePeriodSeconds",
        false,
        true,
        Deprecated,
    ),
    f("AllowParsingUserUIDFromCertAuth", true, false, Beta),
    f("AllowServiceExternalIPs", true, false, GA),
    f("AllowUnsafeMalformedObjectDeletion", false, false, Alpha),
    f("AnonymousAuthConfigurableEndpoints", true, true, GA),
    f("AnyVolumeDataSource", true, true, GA),
    f("AtomicFIFO", true, false, Beta),
    f("AuthorizeNodeWithSelectors", true, true, GA),
    f(
        "AuthorizePodWebsocketUpgradeCreatePermission",
        true,
        false,
        Beta,
    ),
    f("AuthorizeWithSelectors", true, true, GA),
    f("BtreeWatchCache", true, true, GA),
    f("CBORServingAndStorage", false, false, Alpha),
    f("CPUManagerPolicyAlphaOptions", false, false, Alpha),
    f("CPUManagerPolicyBetaOptions", true, false, Beta),
    f("CPUManagerPolicyOptions", true, true, GA),
    f("CRDObservedGenerationTracking", true, false, Beta),
    f("CRDValidationRatcheting", true, true, GA),
    f("CRIListStreaming", false, false, Alpha),
    f("CSIServiceAccountTokenSecrets", true, true, GA),
    f("CSIVolumeHealth", false, false, Alpha),
    f(
        "ChangeContainerStatusOnKubeletRestart",
        false,
        false,
        Deprecated,
    ),
    f("ClearingNominatedNodeNameAfterBinding", true, false, Beta),
    f("ClientsAllowCARotation", true, false, Beta),
    f("ClientsAllowCBOR", false, false, Alpha),
    f("ClientsAllowTLSCacheGC", true, false, Beta),
    f("ClientsPreferCBOR", false, false, Alpha),
    f(
        "CloudControllerManagerWatchBasedRoutesReconciliation",
        false,
        false,
        Alpha,
    ),
    f("CloudControllerManagerWebhook", false, false, Alpha),
    f("ClusterTrustBundle", false, false, Beta),
    f("ClusterTrustBundleProjection", false, false, Beta),
    f("ComponentFlagz", true, false, Beta),
    f("ComponentStatusz", true, false, Beta),
    f("ConcurrentWatchObjectDecode", false, false, Beta),
    f("ConsistentListFromCache", true, true, GA),
    f("ConstrainedImpersonation", true, false, Beta),
    f("ContainerCheckpoint", true, false, Beta),
    f("ContainerRestartRules", true, false, Beta),
    f("ContainerStopSignals", false, false, Alpha),
    f("ContextualLogging", true, false, Beta),
    f(
        "ControllerManagerReleaseLeaderElectionLockOnExit",
        false,
        false,
        Alpha,
    ),
    f("CoordinatedLeaderElection", false, false, Beta),
    f("CrossNamespaceVolumeDataSource", false, false, Alpha),
    f("CustomCPUCFSQuotaPeriod", true, false, GA),
    f("CustomResourceFieldSelectors", true, true, GA),
    f("DRAAdminAccess", true, true, GA),
    f("DRAConsumableCapacity", true, false, Beta),
    f("DRADeviceBindingConditions", true, false, Beta),
    f("DRADeviceTaintRules", false, false, Beta),
    f("DRADeviceTaints", true, false, Beta),
    f("DRAExtendedResource", true, false, Beta),
    f("DRAListTypeAttributes", false, false, Alpha),
    f("DRANodeAllocatableResources", false, false, Alpha),
    f("DRAPartitionableDevices", true, false, Beta),
    f("DRAPrioritizedList", true, false, GA),
    f("DRAResourceClaimDeviceStatus", true, false, Beta),
    f(
        "DRAResourceClaimGranularStatusAuthorization",
        true,
        false,
        Beta,
    ),
    f("DRAResourcePoolStatus", false, false, Alpha),
    f("DRASchedulerFilterTimeout", true, false, Beta),
    f("DRAWorkloadResourceClaims", false, false, Alpha),
    f("DeclarativeValidation", true, true, GA),
    f("DeclarativeValidationBeta", true, false, Beta),
    f("DeclarativeValidationTakeover", false, false, Deprecated),
    f("DeploymentReplicaSetTerminatingReplicas", true, false, Beta),
    f("DetectCacheInconsistency", true, false, Beta),
    f("DisableAllocatorDualWrite", true, true, GA),
    f("DisableCPUQuotaWithExclusiveCPUs", true, false, Deprecated),
    f("DisableNodeKubeProxyVersion", true, true, Deprecated),
    f("DynamicResourceAllocation", true, true, GA),
    f("EnvFiles", true, false, Beta),
    f("EventedPLEG", false, false, Alpha),
    f("ExecProbeTimeout", true, true, GA),
    f("ExtendWebSocketsToKubelet", true, false, Beta),
    f("ExternalServiceAccountTokenSigner", true, true, GA),
    f("GangScheduling", false, false, Alpha),
    f("GenericWorkload", false, false, Alpha),
    f("GitRepoVolumeDriver", false, true, Deprecated),
    f("GracefulNodeShutdown", true, false, Beta),
    f("GracefulNodeShutdownBasedOnPodPriority", true, false, Beta),
    f("HPAConfigurableTolerance", true, false, Beta),
    f("HPAScaleToZero", false, false, Alpha),
    f("HostnameOverride", true, false, Beta),
    f("ImageMaximumGCAge", true, true, GA),
    f("ImageVolume", true, true, GA),
    f("ImageVolumeWithDigest", false, false, Alpha),
    f("InOrderInformers", true, true, GA),
    f("InOrderInformersBatchProcess", true, false, Beta),
    f("InPlacePodLevelResourcesVerticalScaling", true, false, Beta),
    f("InPlacePodVerticalScaling", true, true, GA),
    f(
        "InPlacePodVerticalScalingExclusiveCPUs",
        false,
        false,
        Alpha,
    ),
    f(
        "InPlacePodVerticalScalingExclusiveMemory",
        false,
        false,
        Alpha,
    ),
    f("InPlacePodVerticalScalingInitContainers", true, false, Beta),
    f("InformerResourceVersion", true, false, GA),
    f("JobBackoffLimitPerIndex", true, true, GA),
    f("JobManagedBy", true, true, GA),
    f("JobPodReplacementPolicy", true, true, GA),
    f("JobSuccessPolicy", true, true, GA),
    f("KMSv1", false, false, Deprecated),
    f("KubeletCgroupDriverFromCRI", true, true, GA),
    f("KubeletCrashLoopBackOffMax", true, false, Beta),
    f("KubeletEnsureSecretPulledImages", true, false, Beta),
    f("KubeletFineGrainedAuthz", true, true, GA),
    f("KubeletInUserNamespace", false, false, Alpha),
    f("KubeletPSI", true, true, GA),
    f("KubeletPodResourcesDynamicResources", true, true, GA),
    f("KubeletPodResourcesGet", true, true, GA),
    f(
        "KubeletPodResourcesListUseActivePods",
        true,
        false,
        Deprecated,
    ),
    f(
        "KubeletRegistrationGetOnExistsOnly",
        false,
        false,
        Deprecated,
    ),
    f("KubeletSeparateDiskGC", true, false, Beta),
    f(
        "KubeletServiceAccountTokenForCredentialProviders",
        true,
        false,
        Beta,
    ),
    f("KubeletTracing", true, true, GA),
    f("ListFromCacheSnapshot", true, false, Beta),
    f(
        "LocalStorageCapacityIsolationFSQuotaMonitoring",
        false,
        false,
        Beta,
    ),
    f("LogarithmicScaleDown", true, true, GA),
    f("LoggingAlphaOptions", false, false, Alpha),
    f("LoggingBetaOptions", true, false, Beta),
    f("ManifestBasedAdmissionControlConfig", false, false, Alpha),
    f("MatchLabelKeysInPodAffinity", true, true, GA),
    f("MatchLabelKeysInPodTopologySpread", true, false, Beta),
    f(
        "MatchLabelKeysInPodTopologySpreadSelectorMerge",
        true,
        false,
        Beta,
    ),
    f("MaxUnavailableStatefulSet", false, false, Beta),
    f("MemoryQoS", false, false, Alpha),
    f("MultiCIDRServiceAllocator", true, true, GA),
    f("MutableCSINodeAllocatableCount", true, true, GA),
    f("MutablePVNodeAffinity", false, false, Alpha),
    f("MutablePodResourcesForSuspendedJobs", true, false, Beta),
    f(
        "MutableSchedulingDirectivesForSuspendedJobs",
        true,
        false,
        Beta,
    ),
    f("MutatingAdmissionPolicy", true, false, GA),
    f("NFTablesProxyMode", true, true, GA),
    f("NativeHistograms", false, false, Alpha),
    f("NodeDeclaredFeatures", true, false, Beta),
    f("NodeInclusionPolicyInPodTopologySpread", true, true, GA),
    f("NodeLogQuery", true, true, GA),
    f("NodeSwap", true, true, GA),
    f("NominatedNodeNameForExpectation", true, false, Beta),
    f("OpenAPIEnums", true, false, Beta),
    f("OpportunisticBatching", true, false, Beta),
    f("OrderedNamespaceDeletion", true, true, GA),
    f("PLEGOnDemandRelist", true, false, Beta),
    f("PersistentVolumeClaimUnusedSinceTime", false, false, Alpha),
    f("PodAndContainerStatsFromCRI", false, false, Alpha),
    f("PodCertificateRequest", false, false, Beta),
    f("PodDeletionCost", true, false, Beta),
    f("PodLevelResourceManagers", false, false, Alpha),
    f("PodLevelResources", true, false, Beta),
    f("PodLifecycleSleepAction", true, true, GA),
    f("PodLifecycleSleepActionAllowZero", true, true, GA),
    f("PodLogsQuerySplitStreams", false, false, Alpha),
    f("PodObservedGenerationTracking", true, true, GA),
    f("PodReadyToStartContainersCondition", true, false, Beta),
    f("PodSchedulingReadiness", true, true, GA),
    f("PodTopologyLabelsAdmission", true, false, Beta),
    f("PodsAPI", false, false, Alpha),
    f("PortForwardWebsockets", true, false, Beta),
    f("PreferSameTrafficDistribution", true, true, GA),
    f("PreventStaticPodAPIReferences", true, false, Beta),
    f("ProcMountType", true, true, GA),
    f("QOSReserved", false, false, Alpha),
    f("RecoverVolumeExpansionFailure", true, true, GA),
    f("RecursiveReadOnlyMounts", true, true, GA),
    f("ReduceDefaultCrashLoopBackOffDecay", false, false, Alpha),
    f("RelaxedDNSSearchValidation", true, true, GA),
    f("RelaxedEnvironmentVariableValidation", true, true, GA),
    f("RelaxedServiceNameValidation", true, false, Beta),
    f("ReloadKubeletClientCAFile", true, false, Beta),
    f("ReloadKubeletServerCertificateFile", true, false, Beta),
    f("RemoteRequestHeaderUID", true, false, Beta),
    f("ResilientWatchCacheInitialization", true, true, GA),
    f("ResourceHealthStatus", true, false, Beta),
    f("ResourceHealthStatusMessage", true, false, Beta),
    f("RestartAllContainersOnContainerExits", true, false, Beta),
    f("RetryGenerateName", true, true, GA),
    f("RotateKubeletServerCertificate", true, false, Beta),
    f("RuntimeClassInImageCriApi", false, false, Alpha),
    f("SELinuxChangePolicy", true, true, GA),
    f("SELinuxMount", false, false, Beta),
    f("SELinuxMountReadWriteOncePod", true, true, GA),
    f("SchedulerAsyncAPICalls", false, false, Beta),
    f("SchedulerAsyncPreemption", true, false, Beta),
    f("SchedulerPopFromBackoffQ", true, false, Beta),
    f("SchedulerQueueingHints", true, true, GA),
    f("SeparateCacheWatchRPC", false, true, Deprecated),
    f("SeparateTaintEvictionController", true, true, GA),
    f("ServiceAccountNodeAudienceRestriction", true, false, Beta),
    f("ServiceAccountTokenJTI", true, true, GA),
    f("ServiceAccountTokenNodeBinding", true, true, GA),
    f("ServiceAccountTokenNodeBindingValidation", true, true, GA),
    f("ServiceAccountTokenPodNodeInfo", true, true, GA),
    f("ServiceCIDRStatusFieldWiping", true, false, Deprecated),
    f("ShardedListAndWatch", false, false, Alpha),
    f("SidecarContainers", true, true, GA),
    f("SizeBasedListCostEstimate", true, false, Beta),
    f("StaleControllerConsistencyDaemonSet", true, false, Beta),
    f("StaleControllerConsistencyJob", true, false, Beta),
    f("StaleControllerConsistencyReplicaSet", true, false, Beta),
    f("StaleControllerConsistencyStatefulSet", true, false, Beta),
    f("StatefulSetSemanticRevisionComparison", true, false, Beta),
    f("StorageCapacityScoring", false, false, Alpha),
    f("StorageNamespaceIndex", true, false, Deprecated),
    f("StorageVersionAPI", false, false, Alpha),
    f("StorageVersionHash", true, false, Beta),
    f("StorageVersionMigrator", false, false, Beta),
    f("StreamingCollectionEncodingToJSON", true, true, GA),
    f("StreamingCollectionEncodingToProtobuf", true, true, GA),
    f("StrictIPCIDRValidation", true, false, Beta),
    f("StructuredAuthenticationConfiguration", true, true, GA),
    f(
        "StructuredAuthenticationConfigurationEgressSelector",
        true,
        false,
        Beta,
    ),
    f(
        "StructuredAuthenticationConfigurationJWKSMetrics",
        true,
        false,
        Beta,
    ),
    f("SupplementalGroupsPolicy", true, true, GA),
    f("SystemdWatchdog", true, true, GA),
    f("TaintTolerationComparisonOperators", false, false, Alpha),
    f("TokenRequestServiceAccountUIDValidation", true, false, Beta),
    f("TopologyAwareWorkloadScheduling", false, false, Alpha),
    f("TopologyManagerPolicyAlphaOptions", false, false, Alpha),
    f("TopologyManagerPolicyBetaOptions", true, false, Beta),
    f("TopologyManagerPolicyOptions", true, true, GA),
    f("TranslateStreamCloseWebsocketRequests", true, false, Beta),
    f("UnauthenticatedHTTP2DOSMitigation", true, false, Beta),
    f("UnknownVersionInteroperabilityProxy", true, false, Beta),
    f("UnlockWhileProcessingFIFO", true, false, Beta),
    f("UserNamespacesHostNetworkSupport", false, false, Alpha),
    f("UserNamespacesSupport", true, true, GA),
    f("VolumeAttributesClass", true, true, GA),
    f("VolumeLimitScaling", false, false, Alpha),
    f("WatchCacheInitializationPostStartHook", true, false, Beta),
    f("WatchList", true, false, Beta),
    f("WatchListClient", true, false, Beta),
    f("WinDSR", true, true, GA),
    f("WinOverlay", true, true, GA),
    f("WindowsCPUAndMemoryAffinity", false, false, Alpha),
    f("WindowsGracefulNodeShutdown", true, false, Beta),
    f("WindowsHostNetwork", false, false, Deprecated),
    f("WorkloadAwarePreemption", false, false, Alpha),
    f("WorkloadWithJob", false, false, Alpha),
];

/// Gate dependencies (`AddDependencies`), sorted by gate, each list sorted as upstream
/// sorts it.
static DEPENDENCIES: &[(&str, &[&str])] = &[
    ("AuthorizeNodeWithSelectors", &["AuthorizeWithSelectors"]),
    ("ClusterTrustBundleProjection", &["ClusterTrustBundle"]),
    ("DRAAdminAccess", &["DynamicResourceAllocation"]),
    ("DRAConsumableCapacity", &["DynamicResourceAllocation"]),
    (
        "DRADeviceBindingConditions",
        &["DRAResourceClaimDeviceStatus", "DynamicResourceAllocation"],
    ),
    ("DRADeviceTaintRules", &["DRADeviceTaints"]),
    ("DRADeviceTaints", &["DynamicResourceAllocation"]),
    ("DRAExtendedResource", &["DynamicResourceAllocation"]),
    ("DRAListTypeAttributes", &["DynamicResourceAllocation"]),
    (
        "DRANodeAllocatableResources",
        &["DynamicResourceAllocation"],
    ),
    ("DRAPartitionableDevices", &["DynamicResourceAllocation"]),
    ("DRAPrioritizedList", &["DynamicResourceAllocation"]),
    (
        "DRAResourceClaimGranularStatusAuthorization",
        &["DRAResourceClaimDeviceStatus", "DynamicResourceAllocation"],
    ),
    ("DRAResourcePoolStatus", &["DynamicResourceAllocation"]),
    ("DRASchedulerFilterTimeout", &["DynamicResourceAllocation"]),
    (
        "DRAWorkloadResourceClaims",
        &["DynamicResourceAllocation", "GenericWorkload"],
    ),
    ("DeclarativeValidationBeta", &["DeclarativeValidation"]),
    ("DeclarativeValidationTakeover", &["DeclarativeValidation"]),
    ("DisableAllocatorDualWrite", &["MultiCIDRServiceAllocator"]),
    ("ExtendWebSocketsToKubelet", &["NodeDeclaredFeatures"]),
    ("GangScheduling", &["GenericWorkload"]),
    (
        "GracefulNodeShutdownBasedOnPodPriority",
        &["GracefulNodeShutdown"],
    ),
    ("ImageVolumeWithDigest", &["ImageVolume"]),
    (
        "InPlacePodLevelResourcesVerticalScaling",
        &[
            "InPlacePodVerticalScaling",
            "NodeDeclaredFeatures",
            "PodLevelResources",
        ],
    ),
    (
        "InPlacePodVerticalScalingExclusiveCPUs",
        &["InPlacePodVerticalScaling"],
    ),
    (
        "InPlacePodVerticalScalingExclusiveMemory",
        &["InPlacePodVerticalScaling"],
    ),
    (
        "InPlacePodVerticalScalingInitContainers",
        &["InPlacePodVerticalScaling", "NodeDeclaredFeatures"],
    ),
    (
        "MatchLabelKeysInPodTopologySpreadSelectorMerge",
        &["MatchLabelKeysInPodTopologySpread"],
    ),
    ("PodCertificateRequest", &["AuthorizeNodeWithSelectors"]),
    ("PodLevelResourceManagers", &["PodLevelResources"]),
    (
        "PodLifecycleSleepActionAllowZero",
        &["PodLifecycleSleepAction"],
    ),
    ("ProcMountType", &["UserNamespacesSupport"]),
    ("ResourceHealthStatus", &["DynamicResourceAllocation"]),
    ("ResourceHealthStatusMessage", &["ResourceHealthStatus"]),
    (
        "RestartAllContainersOnContainerExits",
        &["ContainerRestartRules", "NodeDeclaredFeatures"],
    ),
    (
        "ServiceAccountTokenNodeBinding",
        &["ServiceAccountTokenNodeBindingValidation"],
    ),
    ("StaleControllerConsistencyDaemonSet", &["AtomicFIFO"]),
    ("StaleControllerConsistencyJob", &["AtomicFIFO"]),
    ("StaleControllerConsistencyReplicaSet", &["AtomicFIFO"]),
    ("StaleControllerConsistencyStatefulSet", &["AtomicFIFO"]),
    ("StorageVersionAPI", &["APIServerIdentity"]),
    (
        "StructuredAuthenticationConfigurationEgressSelector",
        &["StructuredAuthenticationConfiguration"],
    ),
    (
        "StructuredAuthenticationConfigurationJWKSMetrics",
        &["StructuredAuthenticationConfiguration"],
    ),
    ("TopologyAwareWorkloadScheduling", &["GenericWorkload"]),
    (
        "UnknownVersionInteroperabilityProxy",
        &["APIServerIdentity"],
    ),
    (
        "UserNamespacesHostNetworkSupport",
        &["NodeDeclaredFeatures", "UserNamespacesSupport"],
    ),
    ("WindowsGracefulNodeShutdown", &["GracefulNodeShutdown"]),
    ("WorkloadAwarePreemption", &["GangScheduling"]),
    ("WorkloadWithJob", &["GenericWorkload"]),
];

/// Every gate the kubelet knows, sorted by name.
pub fn all() -> &'static [FeatureSpec] {
    FEATURES
}

/// The gate named `name`, if the kubelet knows it.
pub fn spec(name: &str) -> Option<&'static FeatureSpec> {
    FEATURES
        .binary_search_by(|s| s.name.cmp(name))
        .ok()
        .and_then(|i| FEATURES.get(i))
}

/// The gates `name` depends on (empty if none or unknown), sorted.
pub fn dependencies(name: &str) -> &'static [&'static str] {
    DEPENDENCIES
        .binary_search_by(|(gate, _)| (*gate).cmp(name))
        .ok()
        .and_then(|i| DEPENDENCIES.get(i))
        .map_or(&[], |(_, deps)| deps)
}

/// Whether `name` is enabled: the config's value if set; else, for an alpha (beta) gate,
/// the value of `AllAlpha` (`AllBeta`) if the config sets it; else the default (an unknown
/// gate is disabled).
pub fn enabled(gates: Option<&BTreeMap<String, bool>>, name: &str) -> bool {
    if let Some(v) = gates.and_then(|g| g.get(name)) {
        return *v;
    }
    let Some(s) = spec(name) else {
        return false;
    };
    if name != ALL_ALPHA && name != ALL_BETA {
        let toggle = match s.stage {
            Alpha => Some(ALL_ALPHA),
            Beta => Some(ALL_BETA),
            GA | Deprecated => None,
        };
        if let Some(v) = toggle.and_then(|t| gates.and_then(|g| g.get(t))) {
            return *v;
        }
    }
    s.default
}

/// Problems in a `featureGates` map, one message each, in sorted gate order, worded as
/// upstream's `SetFromMap`: unknown and locked gates first; only if there are none, the
/// enabled gates whose dependencies are disabled.
pub fn validate_gates(gates: &BTreeMap<String, bool>) -> Vec<String> {
    gate_problems(gates)
        .into_iter()
        .map(|p| p.message)
        .collect()
}

/// A problem [`validate_gates`] reports, with the gate of the map it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateProblem<'a> {
    /// The message, as [`validate_gates`] words it.
    pub message: String,
    /// The key of the map the problem is about: the gate set wrong; for an enabled gate
    /// whose dependencies are disabled, the longest of it and those dependencies that the
    /// map sets (a dependency turned off, when the gate needing it is on by default).
    /// `None` when the map sets none of them, or the name is empty.
    pub gate: Option<&'a str>,
}

/// [`validate_gates`], each message with the gate it concerns, so that a caller can point
/// at the gate without searching the message (one pass over the map).
pub fn gate_problems(gates: &BTreeMap<String, bool>) -> Vec<GateProblem<'_>> {
    let mut out = Vec::new();
    for (name, value) in gates {
        let message = match spec(name) {
            None => format!("unrecognized feature gate: {name}"),
            Some(s) if s.locked && *value != s.default => format!(
                "cannot set feature gate {name} to {value}, feature is locked to {}",
                s.default
            ),
            Some(_) => continue,
        };
        out.push(GateProblem {
            message,
            gate: Some(name.as_str()).filter(|n| !n.is_empty()),
        });
    }
    if !out.is_empty() {
        return out;
    }
    for (gate, deps) in DEPENDENCIES {
        if !enabled(Some(gates), gate) {
            continue;
        }
        let disabled: Vec<&str> = deps
            .iter()
            .copied()
            .filter(|dep| !enabled(Some(gates), dep))
            .collect();
        if !disabled.is_empty() {
            let message = format!(
                "{gate} is enabled, but depends on features that are disabled: [{}]",
                disabled.join(" ")
            );
            let set = std::iter::once(*gate)
                .chain(disabled)
                .filter_map(|name| gates.get_key_value(name).map(|(k, _)| k.as_str()))
                .max_by_key(|name| name.len());
            out.push(GateProblem { message, gate: set });
        }
    }
    out
}

/// The warnings upstream logs (but accepts) for a `featureGates` map, in gate order:
/// setting a GA or deprecated gate.
pub fn warnings(gates: &BTreeMap<String, bool>) -> Vec<String> {
    gates
        .iter()
        .filter_map(|(name, value)| {
            let s = spec(name)?;
            if s.locked && *value != s.default {
                return None; // an error, not a warning
            }
            let kind = match s.stage {
                GA => "GA",
                Deprecated => "deprecated",
                Alpha | Beta => return None,
            };
            Some(format!(
                "Setting {kind} feature gate {name}={value}. It will be removed in a future release."
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, bool)]) -> BTreeMap<String, bool> {
        pairs.iter().map(|(k, v)| ((*k).to_string(), *v)).collect()
    }

    fn order(stage: Stage) -> u8 {
        // featuregate's stabilityOrder
        match stage {
            Deprecated => 0,
            Alpha => 1,
            Beta => 2,
            GA => 3,
        }
    }

    #[test]
    fn table_is_sorted_without_duplicates() {
        for pair in FEATURES.windows(2) {
            if let [a, b] = pair {
                assert!(a.name < b.name, "{} before {}", a.name, b.name);
            }
        }
        for pair in DEPENDENCIES.windows(2) {
            if let [(a, _), (b, _)] = pair {
                assert!(a < b, "{a} before {b}");
            }
        }
    }

    #[test]
    fn every_gate_is_found_by_name() {
        for s in all() {
            assert_eq!(spec(s.name), Some(s));
            assert!(!s.name.is_empty() && s.name.bytes().all(|b| b.is_ascii_alphanumeric()));
        }
        assert_eq!(spec("NoSuchGate"), None);
        assert_eq!(spec(""), None);
    }

    #[test]
    fn stages_are_consistent_with_defaults_and_locks() {
        for s in all() {
            // verifyAlphaFeatures: an alpha gate is never on by default.
            assert!(!(s.stage == Alpha && s.default), "{}", s.name);
            // Only GA and deprecated gates are locked.
            assert!(
                !s.locked || matches!(s.stage, GA | Deprecated),
                "{}",
                s.name
            );
        }
    }

    #[test]
    fn well_known_gates_match_the_sources() {
        let check = |name: &str, default: bool, locked: bool, stage: Stage| {
            let s = spec(name).unwrap_or_else(|| panic!("{name} is missing"));
            assert_eq!(
                (s.default, s.locked, s.stage),
                (default, locked, stage),
                "{name}"
            );
        };
        // GA and locked: KubeletTracing {1.34, true, GA, locked} (kube_features.go).
        check("KubeletTracing", true, true, GA);
        // GA in 1.36: DRAAdminAccess {1.36, true, GA, locked} (CHANGELOG-1.36, yaml).
        check("DRAAdminAccess", true, true, GA);
        // GA in 1.36 without a lock: CustomCPUCFSQuotaPeriod {1.36, true, GA}.
        check("CustomCPUCFSQuotaPeriod", true, false, GA);
        // Beta, on: GracefulNodeShutdown {1.21, true, Beta}.
        check("GracefulNodeShutdown", true, false, Beta);
        // Beta, off: ClusterTrustBundle {1.33, false, Beta}.
        check("ClusterTrustBundle", false, false, Beta);
        // Alpha, off: MemoryQoS {1.22, false, Alpha}.
        check("MemoryQoS", false, false, Alpha);
        // Deprecated, unlocked: KubeletPodResourcesListUseActivePods {1.34, true, Deprecated}.
        check(
            "KubeletPodResourcesListUseActivePods",
            true,
            false,
            Deprecated,
        );
        // Deprecated, locked: AllowOverwriteTerminationGracePeriodSeconds {1.35, false, locked}.
        check(
            "AllowOverwriteTerminationGracePeriodSeconds",
            false,
            true,
            Deprecated,
        );
        // Merged gate sets: component-base logs, client-go, metrics, zpages, apiserver.
        check("LoggingBetaOptions", true, false, Beta);
        check("LoggingAlphaOptions", false, false, Alpha);
        check("ContextualLogging", true, false, Beta);
        check("WatchListClient", true, false, Beta);
        check("InOrderInformers", true, true, GA);
        check("NativeHistograms", false, false, Alpha);
        check("ComponentFlagz", true, false, Beta);
        check("AuthorizeWithSelectors", true, true, GA);
        check(ALL_ALPHA, false, false, Alpha);
        check(ALL_BETA, false, false, Beta);
        // Removed before 1.36 (CHANGELOG-1.36; gone from the 1.36 lists), or added after.
        for gone in [
            "MemoryManager",
            "CSIMigrationPortworx",
            "HonorPVReclaimPolicy",
            "WatchFromStorageWithoutResourceVersion",
            "VolumeBindMountOptions",
        ] {
            assert_eq!(spec(gone), None, "{gone}");
        }
    }

    #[test]
    fn unknown_gate_message() {
        assert_eq!(
            validate_gates(&map(&[("NoSuchGate", true), ("MemoryQoS", true)])),
            vec!["unrecognized feature gate: NoSuchGate".to_string()]
        );
        assert!(!enabled(Some(&map(&[])), "NoSuchGate"));
    }

    #[test]
    fn locked_gate_message() {
        assert_eq!(
            validate_gates(&map(&[("KubeletTracing", false)])),
            vec!["cannot set feature gate KubeletTracing to false, feature is locked to true"]
        );
        assert_eq!(
            validate_gates(&map(&[(
                "AllowOverwriteTerminationGracePeriodSeconds",
                true
            )])),
            vec![
                "cannot set feature gate AllowOverwriteTerminationGracePeriodSeconds to true, \
                 feature is locked to false"
            ]
        );
        // A locked gate set to its default, and unlocked GA / deprecated gates, pass.
        let fine = map(&[
            ("KubeletTracing", true),
            ("CustomCPUCFSQuotaPeriod", false),
            ("KubeletPodResourcesListUseActivePods", false),
        ]);
        assert!(validate_gates(&fine).is_empty());
        assert_eq!(
            warnings(&fine),
            vec![
                "Setting GA feature gate CustomCPUCFSQuotaPeriod=false. It will be removed in a \
                 future release.",
                "Setting deprecated feature gate KubeletPodResourcesListUseActivePods=false. It \
                 will be removed in a future release.",
                "Setting GA feature gate KubeletTracing=true. It will be removed in a future \
                 release.",
            ]
        );
    }

    #[test]
    fn several_problems_are_reported_in_name_order() {
        assert_eq!(
            validate_gates(&map(&[
                ("Zzz", true),
                ("KubeletTracing", false),
                ("Aaa", false),
                ("MemoryQoS", true),
            ])),
            vec![
                "unrecognized feature gate: Aaa",
                "cannot set feature gate KubeletTracing to false, feature is locked to true",
                "unrecognized feature gate: Zzz",
            ]
        );
    }

    #[test]
    fn all_alpha_and_all_beta() {
        let none = map(&[]);
        assert!(!enabled(Some(&none), "MemoryQoS"));
        assert!(!enabled(None, "MemoryQoS"));

        let alpha = map(&[(ALL_ALPHA, true)]);
        assert!(enabled(Some(&alpha), "MemoryQoS"));
        assert!(enabled(Some(&alpha), "LoggingAlphaOptions"));
        assert!(
            !enabled(Some(&alpha), "ClusterTrustBundle"),
            "beta gates keep their default"
        );
        assert!(enabled(Some(&alpha), "KubeletTracing"));
        assert!(validate_gates(&alpha).is_empty());

        let explicit = map(&[(ALL_ALPHA, true), ("MemoryQoS", false)]);
        assert!(
            !enabled(Some(&explicit), "MemoryQoS"),
            "an explicit value wins"
        );

        let beta_on = map(&[(ALL_BETA, true)]);
        assert!(enabled(Some(&beta_on), "ClusterTrustBundle"));
        assert!(!enabled(Some(&beta_on), "MemoryQoS"));

        let beta_off = map(&[(ALL_BETA, false)]);
        assert!(!enabled(Some(&beta_off), "GracefulNodeShutdown"));
        assert!(!enabled(Some(&beta_off), "LoggingBetaOptions"));
        assert!(
            enabled(Some(&beta_off), "KubeletTracing"),
            "GA gates keep their default"
        );
        assert!(!enabled(Some(&beta_off), ALL_ALPHA));
        // Turning every beta gate off keeps every dependency satisfied.
        assert!(validate_gates(&beta_off).is_empty());
    }

    #[test]
    fn disabled_dependency_message() {
        assert_eq!(
            dependencies("GracefulNodeShutdownBasedOnPodPriority"),
            ["GracefulNodeShutdown"]
        );
        assert!(dependencies("KubeletTracing").is_empty());
        assert_eq!(
            validate_gates(&map(&[("GracefulNodeShutdown", false)])),
            vec![
                "GracefulNodeShutdownBasedOnPodPriority is enabled, but depends on features \
                 that are disabled: [GracefulNodeShutdown]",
                "WindowsGracefulNodeShutdown is enabled, but depends on features that are \
                 disabled: [GracefulNodeShutdown]",
            ]
        );
        let both = map(&[
            ("GracefulNodeShutdown", false),
            ("GracefulNodeShutdownBasedOnPodPriority", false),
            ("WindowsGracefulNodeShutdown", false),
        ]);
        assert!(validate_gates(&both).is_empty());
        // Several disabled dependencies are listed in sorted order, space separated.
        assert_eq!(
            validate_gates(&map(&[
                ("PodLevelResources", false),
                ("NodeDeclaredFeatures", false)
            ])),
            vec![
                "ExtendWebSocketsToKubelet is enabled, but depends on features that are \
                 disabled: [NodeDeclaredFeatures]",
                "InPlacePodLevelResourcesVerticalScaling is enabled, but depends on features \
                 that are disabled: [NodeDeclaredFeatures PodLevelResources]",
                "InPlacePodVerticalScalingInitContainers is enabled, but depends on features \
                 that are disabled: [NodeDeclaredFeatures]",
                "RestartAllContainersOnContainerExits is enabled, but depends on features that \
                 are disabled: [NodeDeclaredFeatures]",
            ]
        );
        // Dependencies are only checked when every name passes.
        assert_eq!(
            validate_gates(&map(&[
                ("GracefulNodeShutdown", false),
                ("NoSuchGate", true)
            ])),
            vec!["unrecognized feature gate: NoSuchGate"]
        );
    }

    #[test]
    fn dependencies_obey_add_dependencies_rules() {
        // AddDependencies: known gates; no dependency on a less stable gate; a
        // default-enabled gate never depends on a default-disabled one; a locked gate only
        // on locked ones. So the defaults alone always validate.
        for (gate, deps) in DEPENDENCIES {
            let g = spec(gate).unwrap_or_else(|| panic!("unknown gate {gate}"));
            assert!(!deps.is_empty(), "{gate}");
            for pair in deps.windows(2) {
                if let [a, b] = pair {
                    assert!(a < b, "{gate}: {a} before {b}");
                }
            }
            for dep in *deps {
                let d = spec(dep).unwrap_or_else(|| panic!("{gate}: unknown dependency {dep}"));
                assert!(order(g.stage) <= order(d.stage), "{gate} -> {dep}");
                assert!(!g.default || d.default, "{gate} -> {dep}");
                assert!(!g.locked || d.locked, "{gate} -> {dep}");
            }
        }
        assert!(validate_gates(&BTreeMap::new()).is_empty());
    }
}
