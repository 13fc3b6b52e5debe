use super::*;
use serde_json::{Map, Value, json};

/// JSON text (large fixtures; `json!` would exceed the macro recursion limit).
fn j(text: &str) -> Value {
    match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => panic!("test fixture is not JSON: {e}"),
    }
}

fn config(v: Value) -> KubeletConfiguration {
    match serde_json::from_value(v) {
        Ok(cfg) => cfg,
        Err(e) => panic!("test fixture does not decode: {e}"),
    }
}

fn as_object(cfg: &KubeletConfiguration) -> Map<String, Value> {
    match serde_json::to_value(cfg) {
        Ok(Value::Object(m)) => m,
        other => panic!("config does not serialize to an object: {other:?}"),
    }
}

/// Compares field by field and names every field that differs.
fn assert_fields(got: &KubeletConfiguration, want: &Value) {
    let got = as_object(got);
    let Value::Object(want) = want else {
        panic!("expectation is not an object")
    };
    let mut diffs = Vec::new();
    for (key, w) in want {
        match got.get(key) {
            Some(g) if g == w => {}
            Some(g) => diffs.push(format!("{key}: got {g}, want {w}")),
            None => diffs.push(format!("{key}: missing, want {w}")),
        }
    }
    for (key, g) in &got {
        if !want.contains_key(key) {
            diffs.push(format!("{key}: unexpected {g}"));
        }
    }
    assert!(
        diffs.is_empty(),
        "defaulted config differs:\n{}",
        diffs.join("\n")
    );
}

/// The gate-dependent defaults follow the gates as `features` evaluates them, so
/// the expectations (written with both v1.35+ beta gates on, as upstream) fall back
/// to what `input` wrote when a gate is off.
fn with_gates(mut want: Value, gates: Option<&BTreeMap<String, bool>>, input: &Value) -> Value {
    if let Value::Object(m) = &mut want {
        let policy = "imagePullCredentialsVerificationPolicy";
        if !features::enabled(gates, GATE_ENSURE_SECRET_PULLED_IMAGES)
            && m.get(policy) == Some(&json!("NeverVerifyPreloadedImages"))
        {
            match input.get(policy) {
                Some(v) => m.insert(policy.into(), v.clone()),
                None => m.remove(policy),
            };
        }
        let backoff = "crashLoopBackOff";
        if !features::enabled(gates, GATE_CRASH_LOOP_BACKOFF_MAX)
            && m.get(backoff) == Some(&json!({"maxContainerRestartPeriod": "5m0s"}))
        {
            let written = input.get(backoff).cloned().unwrap_or_else(|| json!({}));
            m.insert(backoff.into(), written);
        }
    }
    want
}

/// Upstream's expected defaulting of an empty config (defaults_test.go "empty
/// config"), for v1.36 on Linux, plus loadConfigFile's evictionHard and the nested
/// fields upstream serializes.
fn empty_config_expectation() -> Value {
    j(r#"{
            "enableServer": true,
            "podLogsDir": "/var/log/pods",
            "syncFrequency": "1m0s",
            "fileCheckFrequency": "20s",
            "httpCheckFrequency": "20s",
            "address": "0.0.0.0",
            "port": 10250,
            "authentication": {
                "x509": {},
                "webhook": {"enabled": true, "cacheTTL": "2m0s"},
                "anonymous": {"enabled": false}
            },
            "authorization": {
                "mode": "Webhook",
                "webhook": {"cacheAuthorizedTTL": "5m0s", "cacheUnauthorizedTTL": "30s"}
            },
            "registryPullQPS": 5,
            "registryBurst": 10,
            "imagePullCredentialsVerificationPolicy": "NeverVerifyPreloadedImages",
            "eventRecordQPS": 50,
            "eventBurst": 100,
            "enableDebuggingHandlers": true,
            "healthzPort": 10248,
            "healthzBindAddress": "127.0.0.1",
            "oomScoreAdj": -999,
            "streamingConnectionIdleTimeout": "4h0m0s",
            "nodeStatusUpdateFrequency": "10s",
            "nodeStatusReportFrequency": "5m0s",
            "nodeLeaseDurationSeconds": 40,
            "imageMinimumGCAge": "2m0s",
            "imageGCHighThresholdPercent": 85,
            "imageGCLowThresholdPercent": 80,
            "volumeStatsAggPeriod": "1m0s",
            "cgroupsPerQOS": true,
            "cgroupDriver": "cgroupfs",
            "cpuManagerPolicy": "none",
            "cpuManagerReconcilePeriod": "10s",
            "memoryManagerPolicy": "None",
            "topologyManagerPolicy": "none",
            "topologyManagerScope": "container",
            "runtimeRequestTimeout": "2m0s",
            "hairpinMode": "promiscuous-bridge",
            "maxPods": 110,
            "podPidsLimit": -1,
            "resolvConf": "/etc/resolv.conf",
            "cpuCFSQuota": true,
            "cpuCFSQuotaPeriod": "100ms",
            "nodeStatusMaxImages": 50,
            "maxOpenFiles": 1000000,
            "contentType": "application/vnd.kubernetes.protobuf",
            "kubeAPIQPS": 50,
            "kubeAPIBurst": 100,
            "serializeImagePulls": true,
            "evictionHard": {
                "imagefs.available": "15%",
                "imagefs.inodesFree": "5%",
                "memory.available": "100Mi",
                "nodefs.available": "10%",
                "nodefs.inodesFree": "5%"
            },
            "evictionPressureTransitionPeriod": "5m0s",
            "mergeDefaultEvictionSettings": false,
            "enableControllerAttachDetach": true,
            "makeIPTablesUtilChains": true,
            "iptablesMasqueradeBit": 14,
            "iptablesDropBit": 15,
            "failSwapOn": true,
            "memorySwap": {},
            "containerLogMaxSize": "10Mi",
            "containerLogMaxFiles": 5,
            "containerLogMaxWorkers": 1,
            "containerLogMonitorInterval": "10s",
            "configMapAndSecretChangeDetectionStrategy": "Watch",
            "enforceNodeAllocatable": ["pods"],
            "volumePluginDir": "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/",
            "logging": {
                "format": "text",
                "flushFrequency": "5s",
                "verbosity": 0,
                "options": {"text": {"infoBufferSize": "0"}, "json": {"infoBufferSize": "0"}}
            },
            "enableSystemLogHandler": true,
            "crashLoopBackOff": {"maxContainerRestartPeriod": "5m0s"},
            "enableProfilingHandler": true,
            "enableDebugFlagsHandler": true,
            "seccompDefault": false,
            "memoryThrottlingFactor": 0.9,
            "memoryReservationPolicy": "None",
            "registerNode": true,
            "localStorageCapacityIsolation": true,
            "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
            "failCgroupV1": true
        }"#)
}

#[test]
fn empty_config_gets_every_upstream_default() {
    let got = defaulted(&KubeletConfiguration::default());
    assert_fields(
        &got,
        &with_gates(empty_config_expectation(), None, &json!({})),
    );
}

#[test]
fn defaults_carries_api_version_and_kind() {
    let d = defaults();
    assert_eq!(d.api_version.as_deref(), Some(API_VERSION));
    assert_eq!(d.kind.as_deref(), Some(KIND));
    let mut want = with_gates(empty_config_expectation(), None, &json!({}));
    if let Value::Object(m) = &mut want {
        m.insert("apiVersion".into(), json!(API_VERSION));
        m.insert("kind".into(), json!(KIND));
    }
    assert_fields(&d, &want);
    // What it serializes to decodes back to the same config.
    let round_trip = config(serde_json::to_value(&d).unwrap_or(Value::Null));
    assert_eq!(round_trip, d);
}

#[test]
fn gate_dependent_defaults_follow_the_config_gates() {
    let on = BTreeMap::from([
        (GATE_CRASH_LOOP_BACKOFF_MAX.to_string(), true),
        (GATE_ENSURE_SECRET_PULLED_IMAGES.to_string(), true),
    ]);
    let got = defaulted(&KubeletConfiguration {
        feature_gates: Some(on),
        ..Default::default()
    });
    assert_eq!(
        got.crash_loop_backoff
            .and_then(|c| c.max_container_restart_period),
        Some(MAX_CONTAINER_BACKOFF)
    );
    assert_eq!(
        got.image_pull_credentials_verification_policy.as_deref(),
        Some("NeverVerifyPreloadedImages")
    );

    let off = BTreeMap::from([
        (GATE_CRASH_LOOP_BACKOFF_MAX.to_string(), false),
        (GATE_ENSURE_SECRET_PULLED_IMAGES.to_string(), false),
    ]);
    let got = defaulted(&KubeletConfiguration {
        feature_gates: Some(off),
        ..Default::default()
    });
    // The struct is still there (upstream serializes `crashLoopBackOff: {}`).
    assert_eq!(
        got.crash_loop_backoff,
        Some(CrashLoopBackOffConfig::default())
    );
    assert_eq!(got.image_pull_credentials_verification_policy, None);
}

#[test]
fn gated_fields_keep_what_the_file_sets() {
    let got = defaulted(&config(json!({
        "featureGates": {"KubeletCrashLoopBackOffMax": true, "KubeletEnsureSecretPulledImages": true},
        "crashLoopBackOff": {"maxContainerRestartPeriod": "55s"},
        "imagePullCredentialsVerificationPolicy": "AlwaysVerify"
    })));
    assert_eq!(
        got.crash_loop_backoff
            .and_then(|c| c.max_container_restart_period),
        Some(Duration::from_secs(55))
    );
    assert_eq!(
        got.image_pull_credentials_verification_policy.as_deref(),
        Some("AlwaysVerify")
    );
}

/// Upstream's "all negative" case: every field at its zero value. Pointer fields
/// keep their zero, non-pointer fields take the default.
#[test]
fn zero_values_follow_go_semantics() {
    let input = j(r#"{
            "enableServer": false,
            "staticPodPath": "",
            "syncFrequency": "0s",
            "fileCheckFrequency": "0s",
            "httpCheckFrequency": "0s",
            "staticPodURL": "",
            "staticPodURLHeader": {},
            "address": "",
            "port": 0,
            "readOnlyPort": 0,
            "tlsCertFile": "",
            "tlsPrivateKeyFile": "",
            "tlsCipherSuites": [],
            "tlsMinVersion": "",
            "rotateCertificates": false,
            "serverTLSBootstrap": false,
            "authentication": {
                "x509": {"clientCAFile": ""},
                "webhook": {"enabled": false, "cacheTTL": "0s"},
                "anonymous": {"enabled": false}
            },
            "authorization": {
                "mode": "",
                "webhook": {"cacheAuthorizedTTL": "0s", "cacheUnauthorizedTTL": "0s"}
            },
            "registryPullQPS": 0,
            "registryBurst": 0,
            "imagePullCredentialsVerificationPolicy": "",
            "eventRecordQPS": 0,
            "eventBurst": 0,
            "enableDebuggingHandlers": false,
            "enableContentionProfiling": false,
            "healthzPort": 0,
            "healthzBindAddress": "",
            "oomScoreAdj": 0,
            "clusterDomain": "",
            "clusterDNS": [],
            "streamingConnectionIdleTimeout": "0s",
            "nodeStatusUpdateFrequency": "0s",
            "nodeStatusReportFrequency": "0s",
            "nodeLeaseDurationSeconds": 0,
            "imageMinimumGCAge": "0s",
            "imageMaximumGCAge": "0s",
            "imageGCHighThresholdPercent": 0,
            "imageGCLowThresholdPercent": 0,
            "volumeStatsAggPeriod": "0s",
            "kubeletCgroups": "",
            "systemCgroups": "",
            "cgroupRoot": "",
            "cgroupsPerQOS": false,
            "cgroupDriver": "",
            "cpuManagerPolicy": "",
            "singleProcessOOMKill": false,
            "cpuManagerPolicyOptions": {},
            "cpuManagerReconcilePeriod": "0s",
            "memoryManagerPolicy": "",
            "topologyManagerPolicy": "",
            "topologyManagerScope": "",
            "qosReserved": {},
            "runtimeRequestTimeout": "0s",
            "hairpinMode": "",
            "maxPods": 0,
            "podCIDR": "",
            "podPidsLimit": 0,
            "resolvConf": "",
            "runOnce": false,
            "cpuCFSQuota": false,
            "cpuCFSQuotaPeriod": "0s",
            "nodeStatusMaxImages": 0,
            "maxOpenFiles": 0,
            "contentType": "",
            "kubeAPIQPS": 0,
            "kubeAPIBurst": 0,
            "serializeImagePulls": false,
            "evictionHard": {},
            "evictionSoft": {},
            "evictionSoftGracePeriod": {},
            "evictionPressureTransitionPeriod": "0s",
            "evictionMaxPodGracePeriod": 0,
            "evictionMinimumReclaim": {},
            "mergeDefaultEvictionSettings": false,
            "podsPerCore": 0,
            "enableControllerAttachDetach": false,
            "protectKernelDefaults": false,
            "makeIPTablesUtilChains": false,
            "iptablesMasqueradeBit": 0,
            "iptablesDropBit": 0,
            "featureGates": {},
            "failSwapOn": false,
            "memorySwap": {"swapBehavior": ""},
            "containerLogMaxSize": "",
            "containerLogMaxFiles": 0,
            "containerLogMaxWorkers": 0,
            "containerLogMonitorInterval": "0s",
            "configMapAndSecretChangeDetectionStrategy": "",
            "systemReserved": {},
            "kubeReserved": {},
            "reservedSystemCPUs": "",
            "showHiddenMetricsForVersion": "",
            "systemReservedCgroup": "",
            "kubeReservedCgroup": "",
            "enforceNodeAllocatable": [],
            "allowedUnsafeSysctls": [],
            "volumePluginDir": "",
            "providerID": "",
            "kernelMemcgNotification": false,
            "logging": {"format": "", "flushFrequency": 0, "verbosity": 0},
            "enableSystemLogHandler": false,
            "shutdownGracePeriod": "0s",
            "shutdownGracePeriodCriticalPods": "0s",
            "reservedMemory": [],
            "enableProfilingHandler": false,
            "enableDebugFlagsHandler": false,
            "seccompDefault": false,
            "memoryThrottlingFactor": 0.0,
            "memoryReservationPolicy": "",
            "registerNode": false,
            "localStorageCapacityIsolation": false,
            "containerRuntimeEndpoint": "",
            "podLogsDir": "",
            "failCgroupV1": false
        }"#);
    // The fields defaulting changes; every other field stays as written.
    let changed = j(r#"{
            "syncFrequency": "1m0s",
            "fileCheckFrequency": "20s",
            "httpCheckFrequency": "20s",
            "address": "0.0.0.0",
            "port": 10250,
            "authentication": {
                "x509": {"clientCAFile": ""},
                "webhook": {"enabled": false, "cacheTTL": "2m0s"},
                "anonymous": {"enabled": false}
            },
            "authorization": {
                "mode": "Webhook",
                "webhook": {"cacheAuthorizedTTL": "5m0s", "cacheUnauthorizedTTL": "30s"}
            },
            "registryBurst": 10,
            "imagePullCredentialsVerificationPolicy": "NeverVerifyPreloadedImages",
            "eventBurst": 100,
            "healthzBindAddress": "127.0.0.1",
            "streamingConnectionIdleTimeout": "4h0m0s",
            "nodeStatusUpdateFrequency": "10s",
            "nodeStatusReportFrequency": "5m0s",
            "nodeLeaseDurationSeconds": 40,
            "imageMinimumGCAge": "2m0s",
            "volumeStatsAggPeriod": "1m0s",
            "cgroupDriver": "cgroupfs",
            "cpuManagerPolicy": "none",
            "cpuManagerReconcilePeriod": "10s",
            "memoryManagerPolicy": "None",
            "topologyManagerPolicy": "none",
            "topologyManagerScope": "container",
            "runtimeRequestTimeout": "2m0s",
            "hairpinMode": "promiscuous-bridge",
            "maxPods": 110,
            "maxOpenFiles": 1000000,
            "contentType": "application/vnd.kubernetes.protobuf",
            "kubeAPIBurst": 100,
            "evictionPressureTransitionPeriod": "5m0s",
            "containerLogMaxSize": "10Mi",
            "configMapAndSecretChangeDetectionStrategy": "Watch",
            "volumePluginDir": "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/",
            "logging": {
                "format": "text",
                "flushFrequency": "5s",
                "verbosity": 0,
                "options": {"text": {"infoBufferSize": "0"}, "json": {"infoBufferSize": "0"}}
            },
            "crashLoopBackOff": {"maxContainerRestartPeriod": "5m0s"},
            "memoryReservationPolicy": "None",
            "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
            "podLogsDir": "/var/log/pods"
        }"#);
    let mut want = input.clone();
    if let (Value::Object(w), Value::Object(c)) = (&mut want, changed) {
        w.extend(c);
    }
    let cfg = config(input.clone());
    let gates = cfg.feature_gates.clone();
    assert_fields(&defaulted(&cfg), &with_gates(want, gates.as_ref(), &input));
}

/// Upstream's "all positive" case: a config that sets every field keeps it.
#[test]
fn fully_set_config_is_unchanged() {
    let input = j(r#"{
            "featureGates": {"KubeletCrashLoopBackOffMax": true},
            "enableServer": true,
            "staticPodPath": "static/pod/path",
            "podLogsDir": "/custom/path",
            "syncFrequency": "1m0s",
            "fileCheckFrequency": "1m0s",
            "httpCheckFrequency": "1m0s",
            "staticPodURL": "static-pod-url",
            "staticPodURLHeader": {"Static-Pod-URL-Header": ["true"]},
            "address": "192.168.1.2",
            "port": 10250,
            "readOnlyPort": 10251,
            "tlsCertFile": "tls-cert-file",
            "tlsPrivateKeyFile": "tls-private-key-file",
            "tlsCipherSuites": ["TLS_AES_128_GCM_SHA256"],
            "tlsMinVersion": "1.3",
            "rotateCertificates": true,
            "serverTLSBootstrap": true,
            "authentication": {
                "x509": {"clientCAFile": "client-ca-file"},
                "webhook": {"enabled": true, "cacheTTL": "1m0s"},
                "anonymous": {"enabled": true}
            },
            "authorization": {
                "mode": "AlwaysAllow",
                "webhook": {"cacheAuthorizedTTL": "1m0s", "cacheUnauthorizedTTL": "1m0s"}
            },
            "registryPullQPS": 1,
            "registryBurst": 1,
            "imagePullCredentialsVerificationPolicy": "AlwaysVerify",
            "preloadedImagesVerificationAllowlist": ["test.test/repo/image"],
            "eventRecordQPS": 1,
            "eventBurst": 1,
            "enableDebuggingHandlers": true,
            "enableContentionProfiling": true,
            "healthzPort": 1,
            "healthzBindAddress": "127.0.0.2",
            "oomScoreAdj": 1,
            "clusterDomain": "cluster-domain",
            "clusterDNS": ["192.168.1.3"],
            "streamingConnectionIdleTimeout": "1m0s",
            "nodeStatusUpdateFrequency": "1m0s",
            "nodeStatusReportFrequency": "1m0s",
            "nodeLeaseDurationSeconds": 1,
            "imageMinimumGCAge": "1m0s",
            "imageGCHighThresholdPercent": 1,
            "imageGCLowThresholdPercent": 1,
            "volumeStatsAggPeriod": "1m0s",
            "kubeletCgroups": "kubelet-cgroup",
            "systemCgroups": "system-cgroup",
            "cgroupRoot": "root-cgroup",
            "cgroupsPerQOS": true,
            "cgroupDriver": "systemd",
            "cpuManagerPolicy": "cpu-manager-policy",
            "singleProcessOOMKill": true,
            "cpuManagerPolicyOptions": {"key": "value"},
            "cpuManagerReconcilePeriod": "1m0s",
            "memoryManagerPolicy": "Static",
            "topologyManagerPolicy": "restricted",
            "topologyManagerScope": "pod",
            "qosReserved": {"memory": "10%"},
            "runtimeRequestTimeout": "1m0s",
            "hairpinMode": "hairpin-veth",
            "maxPods": 1,
            "podCIDR": "192.168.1.0/24",
            "podPidsLimit": 1,
            "resolvConf": "resolver-config",
            "runOnce": true,
            "cpuCFSQuota": true,
            "cpuCFSQuotaPeriod": "1m0s",
            "nodeStatusMaxImages": 1,
            "maxOpenFiles": 1,
            "contentType": "application/protobuf",
            "kubeAPIQPS": 1,
            "kubeAPIBurst": 1,
            "serializeImagePulls": true,
            "maxParallelImagePulls": 5,
            "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
            "evictionSoft": {"memory.available": "2Mi", "nodefs.available": "2%", "imagefs.available": "2%"},
            "evictionSoftGracePeriod": {"memory.available": "60s", "nodefs.available": "60s", "imagefs.available": "60s"},
            "evictionPressureTransitionPeriod": "1m0s",
            "evictionMaxPodGracePeriod": 1,
            "evictionMinimumReclaim": {"imagefs.available": "1Gi"},
            "mergeDefaultEvictionSettings": false,
            "podsPerCore": 1,
            "enableControllerAttachDetach": true,
            "protectKernelDefaults": true,
            "makeIPTablesUtilChains": true,
            "iptablesMasqueradeBit": 1,
            "iptablesDropBit": 1,
            "failSwapOn": true,
            "memorySwap": {"swapBehavior": "NoSwap"},
            "containerLogMaxSize": "1Mi",
            "containerLogMaxFiles": 1,
            "containerLogMaxWorkers": 1,
            "containerLogMonitorInterval": "10s",
            "configMapAndSecretChangeDetectionStrategy": "Cache",
            "systemReserved": {"memory": "1Gi"},
            "kubeReserved": {"memory": "1Gi"},
            "reservedSystemCPUs": "0,1",
            "showHiddenMetricsForVersion": "1.16",
            "systemReservedCgroup": "system-reserved-cgroup",
            "kubeReservedCgroup": "kube-reserved-cgroup",
            "enforceNodeAllocatable": ["system-reserved"],
            "allowedUnsafeSysctls": ["kernel.msg*"],
            "volumePluginDir": "volume-plugin-dir",
            "providerID": "provider-id",
            "kernelMemcgNotification": true,
            "logging": {
                "format": "json",
                "flushFrequency": "5s",
                "verbosity": 2,
                "options": {"text": {"infoBufferSize": "0"}, "json": {"infoBufferSize": "1Mi"}}
            },
            "enableSystemLogHandler": true,
            "shutdownGracePeriod": "1m0s",
            "shutdownGracePeriodCriticalPods": "1m0s",
            "crashLoopBackOff": {"maxContainerRestartPeriod": "55s"},
            "reservedMemory": [{"numaNode": 1, "limits": {"memory": "1Gi"}}],
            "enableProfilingHandler": true,
            "enableDebugFlagsHandler": true,
            "seccompDefault": true,
            "memoryThrottlingFactor": 1.0,
            "memoryReservationPolicy": "TieredReservation",
            "registerNode": true,
            "localStorageCapacityIsolation": true,
            "containerRuntimeEndpoint": "unix:///run/crio/crio.sock",
            "failCgroupV1": false
        }"#);
    let cfg = config(input.clone());
    assert_fields(&defaulted(&cfg), &input);
}

#[test]
fn node_status_report_frequency_follows_an_explicit_update_frequency() {
    let got = defaulted(&config(json!({"nodeStatusUpdateFrequency": "1m"})));
    assert_eq!(
        got.node_status_update_frequency,
        Some(Duration::from_mins(1))
    );
    assert_eq!(
        got.node_status_report_frequency,
        Some(Duration::from_mins(1))
    );

    let got = defaulted(&config(
        json!({"nodeStatusUpdateFrequency": "1m", "nodeStatusReportFrequency": "30s"}),
    ));
    assert_eq!(
        got.node_status_report_frequency,
        Some(Duration::from_secs(30))
    );

    // An update frequency of zero is unset: both take their own defaults.
    let got = defaulted(&config(json!({"nodeStatusUpdateFrequency": "0s"})));
    assert_eq!(
        got.node_status_update_frequency,
        Some(Duration::from_secs(10))
    );
    assert_eq!(
        got.node_status_report_frequency,
        Some(Duration::from_mins(5))
    );
}

#[test]
fn pod_pids_limit_negative_becomes_minus_one() {
    for (input, want) in [
        (Some(-5), -1),
        (Some(-1), -1),
        (Some(0), 0),
        (Some(4096), 4096),
        (None, -1),
    ] {
        let got = defaulted(&KubeletConfiguration {
            pod_pids_limit: input,
            ..Default::default()
        });
        assert_eq!(got.pod_pids_limit, Some(want), "podPidsLimit {input:?}");
    }
}

#[test]
fn serialize_image_pulls_depends_on_max_parallel_image_pulls() {
    for (parallel, serialize, want) in [
        (None, None, true),
        (Some(0), None, true),
        (Some(1), None, true),
        (Some(2), None, false),
        (Some(5), None, false),
        (Some(5), Some(true), true),
        (None, Some(false), false),
    ] {
        let got = defaulted(&KubeletConfiguration {
            max_parallel_image_pulls: parallel,
            serialize_image_pulls: serialize,
            ..Default::default()
        });
        assert_eq!(
            got.serialize_image_pulls,
            Some(want),
            "maxParallelImagePulls {parallel:?}, serializeImagePulls {serialize:?}"
        );
        assert_eq!(got.max_parallel_image_pulls, parallel, "never defaulted");
    }
}

#[test]
fn pointer_zero_stays_and_value_zero_is_defaulted() {
    let got = defaulted(&config(json!({
        "port": 0,
        "readOnlyPort": 0,
        "healthzPort": 0,
        "registryPullQPS": 0,
        "registryBurst": 0,
        "resolvConf": "",
        "cpuCFSQuotaPeriod": "0s",
        "containerLogMonitorInterval": "0s",
        "syncFrequency": "0s",
        "address": "",
        "enforceNodeAllocatable": [],
        "memoryThrottlingFactor": 0.0
    })));
    assert_eq!(got.port, Some(KUBELET_PORT));
    assert_eq!(got.read_only_port, Some(0));
    assert_eq!(got.healthz_port, Some(0));
    assert_eq!(got.registry_pull_qps, Some(0));
    assert_eq!(got.registry_burst, Some(10));
    assert_eq!(got.resolv_conf.as_deref(), Some(""));
    assert_eq!(got.cpu_cfs_quota_period, Some(Duration::ZERO));
    assert_eq!(got.container_log_monitor_interval, Some(Duration::ZERO));
    assert_eq!(got.sync_frequency, Some(Duration::from_mins(1)));
    assert_eq!(got.address.as_deref(), Some("0.0.0.0"));
    assert_eq!(got.enforce_node_allocatable, Some(vec![]));
    assert_eq!(got.memory_throttling_factor, Some(0.0));

    // Absent fields with no upstream default stay absent.
    assert_eq!(got.image_maximum_gc_age, None);
    assert_eq!(got.single_process_oom_kill, None);
    assert_eq!(got.user_namespaces, None);
    assert_eq!(got.tracing, None);
    assert_eq!(got.max_parallel_image_pulls, None);
}

#[test]
fn nested_structs_are_completed() {
    let got = defaulted(&config(json!({
        "authentication": {"webhook": {"cacheTTL": "0s"}},
        "authorization": {"mode": ""},
        "logging": {"flushFrequency": 0, "options": {"json": {"splitStream": true}}}
    })));
    let auth = got.authentication.unwrap_or_default();
    assert_eq!(auth.x509, Some(KubeletX509Authentication::default()));
    assert_eq!(auth.anonymous.and_then(|a| a.enabled), Some(false));
    let webhook = auth.webhook.unwrap_or_default();
    assert_eq!(webhook.enabled, Some(true));
    assert_eq!(webhook.cache_ttl, Some(Duration::from_mins(2)));
    assert_eq!(
        got.authorization.and_then(|a| a.mode).as_deref(),
        Some("Webhook")
    );
    assert_eq!(got.memory_swap, Some(MemorySwapConfiguration::default()));

    let logging = got.logging.unwrap_or_default();
    // A zero flushFrequency, even written as an integer, becomes the string "5s".
    let flush = logging.flush_frequency.unwrap_or_default();
    assert_eq!(flush.duration, LOG_FLUSH_FREQ_DEFAULT);
    assert!(flush.serialize_as_string);
    let json_opts = logging.options.and_then(|o| o.json).unwrap_or_default();
    assert_eq!(json_opts.split_stream, Some(true));
    assert_eq!(
        json_opts.info_buffer_size.map(|q| q.to_string()).as_deref(),
        Some("0")
    );
}

#[test]
fn flush_frequency_keeps_the_form_it_was_written_in() {
    let got = defaulted(&config(
        json!({"logging": {"flushFrequency": 2_000_000_000u64}}),
    ));
    let value = serde_json::to_value(got.logging.unwrap_or_default()).unwrap_or(Value::Null);
    assert_eq!(value["flushFrequency"], json!(2_000_000_000u64));
    assert_eq!(value["format"], json!("text"));
}

#[test]
fn eviction_hard_defaults_and_merging() {
    // Unset: the Linux defaults.
    let got = defaulted(&KubeletConfiguration::default());
    assert_eq!(got.eviction_hard, Some(default_eviction_hard()));

    // Set without merging: replaces the defaults; the other signals are off.
    let got = defaulted(&config(
        json!({"evictionHard": {"memory.available": "200Mi"}}),
    ));
    assert_eq!(
        got.eviction_hard,
        Some(BTreeMap::from([(
            "memory.available".into(),
            "200Mi".into()
        )]))
    );

    // Set with mergeDefaultEvictionSettings: the omitted signals keep their defaults.
    let got = defaulted(&config(json!({
        "evictionHard": {"memory.available": "200Mi", "pid.available": "5%"},
        "mergeDefaultEvictionSettings": true
    })));
    let mut want = default_eviction_hard();
    want.insert("memory.available".into(), "200Mi".into());
    want.insert("pid.available".into(), "5%".into());
    assert_eq!(got.eviction_hard, Some(want));

    // An empty map is set: it stays empty, or takes every default when merging.
    let got = defaulted(&config(json!({"evictionHard": {}})));
    assert_eq!(got.eviction_hard, Some(BTreeMap::new()));
    let got = defaulted(&config(
        json!({"evictionHard": {}, "mergeDefaultEvictionSettings": true}),
    ));
    assert_eq!(got.eviction_hard, Some(default_eviction_hard()));

    // The scheme defaulting alone (re-applied after drop-ins) leaves it alone.
    let mut cfg = KubeletConfiguration::default();
    set_object_defaults(&mut cfg);
    assert_eq!(cfg.eviction_hard, None);
}

#[test]
fn reserved_memory_is_rounded_up_to_milli_precision() {
    let got = defaulted(&config(json!({"reservedMemory": [
        {"numaNode": 0, "limits": {"memory": "1024Mi", "hugepages-2Mi": "1500u"}},
        {"numaNode": 1, "limits": {"memory": "-1500u", "hugepages-1Gi": "0.0001"}}
    ]})));
    let limits: Vec<Vec<(String, String)>> = got
        .reserved_memory
        .unwrap_or_default()
        .into_iter()
        .map(|r| {
            r.limits
                .into_iter()
                .map(|(k, q)| (k, q.to_string()))
                .collect()
        })
        .collect();
    assert_eq!(
        limits,
        vec![
            vec![
                ("hugepages-2Mi".into(), "2m".into()),
                ("memory".into(), "1024Mi".into())
            ],
            vec![
                ("hugepages-1Gi".into(), "1m".into()),
                ("memory".into(), "-2m".into())
            ],
        ]
    );
}

#[test]
fn defaulting_twice_is_defaulting_once() {
    let fixtures = [
        json!({}),
        json!({"nodeStatusUpdateFrequency": "1m", "podPidsLimit": -7, "maxParallelImagePulls": 3}),
        json!({"evictionHard": {"memory.available": "1Gi"}, "mergeDefaultEvictionSettings": true}),
        json!({"reservedMemory": [{"numaNode": 0, "limits": {"memory": "1500u"}}]}),
        json!({"featureGates": {"KubeletCrashLoopBackOffMax": false}, "logging": {"flushFrequency": 0}}),
        json!({"port": 0, "healthzPort": 0, "resolvConf": "", "enforceNodeAllocatable": []}),
    ];
    for fixture in fixtures {
        let once = defaulted(&config(fixture.clone()));
        let twice = defaulted(&once);
        assert_eq!(twice, once, "not idempotent for {fixture}");
    }
}

#[test]
fn rounding_stays_in_range() {
    // Values near the i128 limit are left as they are rather than overflowing.
    let huge = Quantity::from_nanos(i128::MAX, Format::DecimalSI);
    assert!(round_up_to_milli(&huge).is_none());
    let small = Quantity::from_nanos(1, Format::DecimalSI);
    assert_eq!(
        round_up_to_milli(&small).map(|q| q.nanos()),
        Some(1_000_000)
    );
}
