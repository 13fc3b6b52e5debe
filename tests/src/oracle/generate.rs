//! The seeded case generator: deterministic for a seed, and of six kinds ([`Kind`]):
//! fields one to three at a time (every field of the kubelet's defaulted config, nested
//! ones included, at valid, boundary and invalid values), groups of fields upstream's
//! checks relate, feature-gate combinations, drop-ins that override and remove, malformed
//! files (unknown, misspelled, duplicate fields, wrong types, YAML 1.1 forms, wrong
//! headers) and kubelet flags.

use std::collections::BTreeSet;

use kubelet_gitops_core::features;
use rand::{RngExt as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;
use serde_json::{Map, Value, json};

use super::{Case, HEAD};

/// What a generated case exercises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One to three fields of the config, nested ones included.
    Fields,
    /// A group of fields that upstream's checks relate.
    Related,
    /// Feature gates, with a field one of them unlocks.
    Gates,
    /// Drop-ins that override, add and remove.
    DropIns,
    /// A file the kubelet decodes only leniently, or not at all.
    Malformed,
    /// Kubelet flags over a file.
    Flags,
}

impl Kind {
    fn pick(rng: &mut ChaCha8Rng) -> Kind {
        match rng.random_range(0..20) {
            0..=5 => Kind::Fields,
            6..=10 => Kind::Related,
            11..=12 => Kind::Gates,
            13..=15 => Kind::DropIns,
            16..=17 => Kind::Malformed,
            _ => Kind::Flags,
        }
    }
}

/// Maps among the config's objects: a leaf for the generator, not a struct to go into.
const MAP_FIELDS: &[&str] = &["evictionHard", "featureGates"];

/// `count` cases from `seed`. Every file starts with `failCgroupV1: false` (so that
/// validation does not stop at this machine's cgroup version) unless a case is about
/// that. `defaults` is the kubelet's effective config of that file ([`super::defaults`]):
/// its fields, nested ones included, and their types.
pub fn generate(seed: u64, count: usize, defaults: &Value) -> Vec<Case> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut leaves = Vec::new();
    collect_leaves("", defaults, &mut leaves);
    leaves.extend(extra_fields().into_iter().map(|(k, v)| (k.to_string(), v)));
    let related = related();
    (0..count)
        .map(|i| {
            let kind = Kind::pick(&mut rng);
            let mut case = match kind {
                Kind::Fields => fields_case(&mut rng, &leaves),
                Kind::Related => related_case(&mut rng, &related),
                Kind::Gates => gates_case(&mut rng, &related),
                Kind::DropIns => drop_ins_case(&mut rng, &leaves),
                Kind::Malformed => malformed_case(&mut rng),
                Kind::Flags => flags_case(&mut rng, &leaves),
            };
            case.name = format!("#{i} {kind:?}: {}", case.name);
            case
        })
        .collect()
}

/// A config file's body, built field by field (dotted paths go into nested objects), with
/// raw lines for what JSON cannot say (a duplicate key).
#[derive(Default)]
struct Body {
    fields: Map<String, Value>,
    raw: Vec<String>,
    names: Vec<String>,
}

impl Body {
    fn base() -> Body {
        let mut b = Body::default();
        b.fields.insert("failCgroupV1".into(), json!(false));
        b
    }

    /// Sets `path` (dotted) to `value`.
    fn set(&mut self, path: &str, value: Value) {
        self.names.push(format!("{path}={value}"));
        set_path(&mut self.fields, path, value);
    }

    fn text(&self) -> String {
        let mut out = String::from(HEAD);
        for (k, v) in &self.fields {
            out.push_str(&format!("{k}: {v}\n"));
        }
        for line in &self.raw {
            out.push_str(line);
            out.push('\n');
        }
        out
    }
}

fn set_path(map: &mut Map<String, Value>, path: &str, value: Value) {
    match path.split_once('.') {
        Some((head, rest)) if !MAP_FIELDS.contains(&head) => {
            let slot = map
                .entry(head.to_string())
                .or_insert_with(|| Value::Object(Map::new()));
            if !slot.is_object() {
                *slot = Value::Object(Map::new());
            }
            if let Value::Object(inner) = slot {
                set_path(inner, rest, value);
            }
        }
        _ => {
            map.insert(path.to_string(), value);
        }
    }
}

/// Every leaf of the defaulted config (objects are gone into, but for [`MAP_FIELDS`]),
/// with values to try.
fn collect_leaves(prefix: &str, value: &Value, out: &mut Vec<(String, Vec<Value>)>) {
    let Some(map) = value.as_object() else {
        return;
    };
    for (k, v) in map {
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        if matches!(path.as_str(), "apiVersion" | "kind" | "failCgroupV1") {
            continue;
        }
        match v {
            Value::Object(_) if !MAP_FIELDS.contains(&path.as_str()) => {
                collect_leaves(&path, v, out);
            }
            _ => out.push((path, values_for(v))),
        }
    }
}

/// Values to try for a field whose default is `default`.
fn values_for(default: &Value) -> Vec<Value> {
    match default {
        Value::Bool(b) => vec![json!(!b), json!(b), json!("true")],
        Value::Number(n) if n.is_f64() => vec![
            json!(-0.5),
            json!(0),
            json!(0.5),
            json!(1),
            json!(1.5),
            json!("1"),
        ],
        Value::Number(n) => {
            let n = n.as_i64().unwrap_or(0);
            vec![
                json!(-1),
                json!(0),
                json!(1),
                json!(n - 1),
                json!(n + 1),
                json!(100),
                json!(101),
                json!(65535),
                json!(65536),
                json!(2_147_483_647),
                json!(2_147_483_648_i64),
                json!(1.5),
                json!("1"),
            ]
        }
        Value::String(s) if looks_like_duration(s) => vec![
            json!("0s"),
            json!("-1s"),
            json!("1s"),
            json!("90s"),
            json!("1h"),
            json!("1h30m"),
            json!("1.5s"),
            json!("100ms"),
            json!("1x"),
            json!(""),
            json!(5),
        ],
        Value::String(_) => vec![
            json!(""),
            json!("x"),
            json!("none"),
            json!("static"),
            json!("/var/lib/x"),
            json!("relative/x"),
            json!("é"),
        ],
        Value::Array(_) => vec![json!([]), json!(["x"]), json!(null)],
        Value::Object(_) => vec![json!({}), json!({"x": "y"}), json!(null)],
        Value::Null => vec![json!(null)],
    }
}

fn looks_like_duration(s: &str) -> bool {
    !s.is_empty()
        && s.chars().next().is_some_and(|c| c.is_ascii_digit())
        && s.ends_with(['s', 'm', 'h'])
}

/// Fields absent from the defaulted config (omitted when empty), with values to try.
fn extra_fields() -> Vec<(&'static str, Vec<Value>)> {
    vec![
        (
            "systemReserved",
            vec![
                json!({"cpu": "500m", "memory": "1Gi"}),
                json!({"cpu": "-1"}),
                json!({"memory": "1x"}),
                json!({"ephemeral-storage": "1Gi", "pid": "1000"}),
            ],
        ),
        (
            "kubeReserved",
            vec![
                json!({"cpu": "250m"}),
                json!({"pid": "100"}),
                json!({"bogus": "1"}),
            ],
        ),
        (
            "qosReserved",
            vec![
                json!({"memory": "50%"}),
                json!({"memory": "101%"}),
                json!({"memory": "x"}),
                json!({"cpu": "10%"}),
            ],
        ),
        (
            "reservedSystemCPUs",
            vec![json!("0"), json!("0-1"), json!("a"), json!("1-0")],
        ),
        (
            "evictionSoft",
            vec![
                json!({"memory.available": "1Gi"}),
                json!({"nodefs.available": "10%"}),
                json!({"x": "1"}),
            ],
        ),
        (
            "evictionSoftGracePeriod",
            vec![
                json!({"memory.available": "1m"}),
                json!({"memory.available": "x"}),
            ],
        ),
        (
            "evictionMinimumReclaim",
            vec![
                json!({"memory.available": "256Mi"}),
                json!({"memory.available": "-1"}),
            ],
        ),
        (
            "evictionHard",
            vec![
                json!({"memory.available": "500Mi"}),
                json!({"memory.available": "101%"}),
                json!({"memory.available": "0%"}),
                json!({}),
            ],
        ),
        (
            "featureGates",
            vec![
                json!({"KubeletTracing": false}),
                json!({"NoSuchGate": true}),
                json!({"AllAlpha": true}),
            ],
        ),
        (
            "tlsCipherSuites",
            vec![
                json!(["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]),
                json!(["nope"]),
                json!(["TLS_RSA_WITH_RC4_128_SHA"]),
            ],
        ),
        (
            "tlsMinVersion",
            vec![json!("VersionTLS12"), json!("VersionTLS99")],
        ),
        (
            "tlsCurvePreferences",
            vec![json!([23, 29]), json!([23, 23]), json!([0]), json!([99])],
        ),
        ("shutdownGracePeriod", vec![json!("30s"), json!("-1s")]),
        (
            "shutdownGracePeriodCriticalPods",
            vec![json!("10s"), json!("40s")],
        ),
        (
            "cpuManagerPolicyOptions",
            vec![json!({"full-pcpus-only": "true"}), json!({"bogus": "true"})],
        ),
        (
            "topologyManagerPolicyOptions",
            vec![
                json!({"prefer-closest-numa-nodes": "true"}),
                json!({"bogus": "true"}),
            ],
        ),
        (
            "allowedUnsafeSysctls",
            vec![
                json!(["net.core.somaxconn"]),
                json!(["kernel.msg*"]),
                json!(["bad sysctl"]),
                json!(["net.ipv4.conf.eth0/100.rp_filter"]),
                json!(["kernel.domainname"]),
            ],
        ),
        (
            "clusterDNS",
            vec![
                json!(["10.96.0.10"]),
                json!(["not-an-ip"]),
                json!(["::1", "010.1.1.1"]),
            ],
        ),
        (
            "clusterDomain",
            vec![json!("cluster.local"), json!("Bad_Domain"), json!("")],
        ),
        (
            "registerWithTaints",
            vec![
                json!([{"key": "a", "effect": "NoSchedule"}]),
                json!([{"key": "a", "effect": "Bogus"}]),
                json!([{"key": "", "effect": "NoSchedule"}]),
                json!([{"key": "a", "value": "b c", "effect": "NoExecute"}]),
            ],
        ),
        ("staticPodURLHeader", vec![json!({"a": ["b"]})]),
        (
            "staticPodURL",
            vec![json!("http://example.com/pods"), json!("")],
        ),
        ("providerID", vec![json!("aws:///x")]),
        (
            "podLogsDir",
            vec![
                json!("/var/log/pods2"),
                json!("relative"),
                json!("/var/log/../x"),
                json!("/var/log/pöds"),
            ],
        ),
        (
            "memorySwap",
            vec![
                json!({"swapBehavior": "LimitedSwap"}),
                json!({"swapBehavior": "Bogus"}),
                json!({"swapBehavior": "NoSwap"}),
            ],
        ),
        (
            "reservedMemory",
            vec![
                json!([{"numaNode": 0, "limits": {"memory": "1Gi"}}]),
                json!([{"numaNode": -1, "limits": {"memory": "1Gi"}}]),
                json!([{"numaNode": 0, "limits": {"cpu": "1"}}]),
            ],
        ),
        (
            "shutdownGracePeriodByPodPriority",
            vec![
                json!([{"priority": 0, "shutdownGracePeriodSeconds": 30}]),
                json!([{"priority": 1, "shutdownGracePeriodSeconds": -1}]),
            ],
        ),
        (
            "tracing",
            vec![
                json!({"endpoint": "localhost:4317", "samplingRatePerMillion": 100}),
                json!({"samplingRatePerMillion": -1}),
                json!({"endpoint": "::bad::"}),
            ],
        ),
        (
            "userNamespaces",
            vec![
                json!({"idsPerPod": 65536}),
                json!({"idsPerPod": 100000}),
                json!({"idsPerPod": 0}),
                json!({"idsPerPod": 4_294_967_296_i64}),
            ],
        ),
        (
            "systemReservedCgroup",
            vec![json!("/system.slice"), json!("")],
        ),
        ("kubeReservedCgroup", vec![json!("/kube.slice")]),
        ("kubeletCgroups", vec![json!("/kubelet.slice")]),
        ("systemCgroups", vec![json!("/system.slice"), json!("")]),
        ("singleProcessOOMKill", vec![json!(true), json!(false)]),
        (
            "imageMaximumGCAge",
            vec![json!("1h"), json!("1m"), json!("-1s")],
        ),
    ]
}

type Group = (&'static str, Vec<(&'static str, Vec<Value>)>);

/// Groups of fields that upstream's checks relate, each field with values to try.
fn related() -> Vec<Group> {
    vec![
        (
            "node allocatable enforcement",
            vec![
                ("cgroupsPerQOS", vec![json!(true), json!(false)]),
                (
                    "enforceNodeAllocatable",
                    vec![
                        json!([]),
                        json!(["pods"]),
                        json!(["pods", "system-reserved"]),
                        json!(["kube-reserved"]),
                        json!(["none"]),
                        json!(["none", "pods"]),
                        json!(["bogus"]),
                        json!(["pods", "pods"]),
                        json!(["system-reserved-compressible"]),
                    ],
                ),
                (
                    "systemReservedCgroup",
                    vec![json!(""), json!("/system.slice")],
                ),
                ("kubeReservedCgroup", vec![json!(""), json!("/kube.slice")]),
                (
                    "systemReserved",
                    vec![json!({"cpu": "100m"}), json!({"memory": "1Gi"})],
                ),
                (
                    "cgroupRoot",
                    vec![json!("/"), json!(""), json!("/kubepods")],
                ),
            ],
        ),
        (
            "eviction",
            vec![
                (
                    "evictionHard",
                    vec![
                        json!({"memory.available": "100Mi"}),
                        json!({"memory.available": "0%"}),
                        json!({"nodefs.available": "10%"}),
                        json!({"imagefs.available": "15%", "nodefs.inodesFree": "5%"}),
                        json!({"pid.available": "10%"}),
                        json!({"bogus": "1"}),
                        json!({"memory.available": "-1Mi"}),
                    ],
                ),
                (
                    "evictionSoft",
                    vec![
                        json!({"memory.available": "200Mi"}),
                        json!({"nodefs.available": "20%"}),
                    ],
                ),
                (
                    "evictionSoftGracePeriod",
                    vec![
                        json!({"memory.available": "1m30s"}),
                        json!({"memory.available": "-1s"}),
                        json!({"nodefs.available": "x"}),
                        json!({"memory.available": "0s"}),
                    ],
                ),
                (
                    "evictionMaxPodGracePeriod",
                    vec![json!(-1), json!(0), json!(30)],
                ),
                (
                    "evictionPressureTransitionPeriod",
                    vec![json!("0s"), json!("-1s"), json!("5m")],
                ),
                (
                    "evictionMinimumReclaim",
                    vec![
                        json!({"memory.available": "0"}),
                        json!({"memory.available": "10%"}),
                        json!({"memory.available": "-1Mi"}),
                    ],
                ),
                (
                    "mergeDefaultEvictionSettings",
                    vec![json!(true), json!(false)],
                ),
                ("enforceNodeAllocatable", vec![json!([]), json!(["pods"])]),
            ],
        ),
        (
            "CPU, topology and memory managers",
            vec![
                (
                    "cpuManagerPolicy",
                    vec![json!("none"), json!("static"), json!("Static"), json!("")],
                ),
                (
                    "reservedSystemCPUs",
                    vec![
                        json!("0"),
                        json!("0-1"),
                        json!("0,2"),
                        json!("a"),
                        json!(""),
                    ],
                ),
                (
                    "systemReserved",
                    vec![
                        json!({"cpu": "500m"}),
                        json!({"cpu": "0"}),
                        json!({"memory": "1Gi"}),
                        json!({"cpu": "1m"}),
                    ],
                ),
                (
                    "kubeReserved",
                    vec![json!({"cpu": "1"}), json!({"cpu": "100u"})],
                ),
                ("systemReservedCgroup", vec![json!("/system.slice")]),
                ("kubeReservedCgroup", vec![json!("/kube.slice")]),
                (
                    "cpuManagerPolicyOptions",
                    vec![
                        json!({"full-pcpus-only": "true"}),
                        json!({"full-pcpus-only": "x"}),
                        json!({"align-by-socket": "true"}),
                    ],
                ),
                ("cpuManagerReconcilePeriod", vec![json!("0s"), json!("10s")]),
                (
                    "topologyManagerPolicy",
                    vec![
                        json!("none"),
                        json!("single-numa-node"),
                        json!("restricted"),
                        json!("best-effort"),
                        json!("x"),
                    ],
                ),
                (
                    "topologyManagerScope",
                    vec![json!("container"), json!("pod"), json!("x")],
                ),
                (
                    "topologyManagerPolicyOptions",
                    vec![
                        json!({"prefer-closest-numa-nodes": "true"}),
                        json!({"bogus": "true"}),
                    ],
                ),
                (
                    "memoryManagerPolicy",
                    vec![json!("None"), json!("BestEffort"), json!("none")],
                ),
            ],
        ),
        (
            "swap",
            vec![
                ("failSwapOn", vec![json!(true), json!(false)]),
                (
                    "memorySwap.swapBehavior",
                    vec![
                        json!("NoSwap"),
                        json!("LimitedSwap"),
                        json!(""),
                        json!("Bogus"),
                    ],
                ),
                (
                    "featureGates",
                    vec![json!({"NodeSwap": true}), json!({"NodeSwap": false})],
                ),
                (
                    "memoryThrottlingFactor",
                    vec![json!(0), json!(0.5), json!(1), json!(1.5)],
                ),
            ],
        ),
        (
            "graceful shutdown",
            vec![
                (
                    "shutdownGracePeriod",
                    vec![json!("0s"), json!("30s"), json!("-1s"), json!("10s")],
                ),
                (
                    "shutdownGracePeriodCriticalPods",
                    vec![json!("0s"), json!("10s"), json!("40s"), json!("-1s")],
                ),
                (
                    "shutdownGracePeriodByPodPriority",
                    vec![
                        json!([{"priority": 0, "shutdownGracePeriodSeconds": 30}]),
                        json!([
                            {"priority": 100000, "shutdownGracePeriodSeconds": 10},
                            {"priority": 0, "shutdownGracePeriodSeconds": -1}
                        ]),
                    ],
                ),
                (
                    "featureGates",
                    vec![
                        json!({"GracefulNodeShutdown": false}),
                        json!({"GracefulNodeShutdownBasedOnPodPriority": false}),
                    ],
                ),
            ],
        ),
        (
            "image garbage collection",
            vec![
                (
                    "imageGCHighThresholdPercent",
                    vec![
                        json!(-1),
                        json!(0),
                        json!(50),
                        json!(85),
                        json!(100),
                        json!(101),
                    ],
                ),
                (
                    "imageGCLowThresholdPercent",
                    vec![
                        json!(-1),
                        json!(0),
                        json!(50),
                        json!(80),
                        json!(85),
                        json!(101),
                    ],
                ),
                (
                    "imageMinimumGCAge",
                    vec![json!("0s"), json!("2m"), json!("-1s")],
                ),
                (
                    "imageMaximumGCAge",
                    vec![json!("0s"), json!("1m"), json!("1h"), json!("-1s")],
                ),
            ],
        ),
        (
            "gated fields",
            vec![
                (
                    "crashLoopBackOff.maxContainerRestartPeriod",
                    vec![json!("1s"), json!("500ms"), json!("301s"), json!("5m")],
                ),
                (
                    "featureGates",
                    vec![
                        json!({"KubeletCrashLoopBackOffMax": true}),
                        json!({"KubeletCrashLoopBackOffMax": false}),
                        json!({"KubeletEnsureSecretPulledImages": false}),
                        json!({"KubeletTracing": true}),
                        json!({"UserNamespacesSupport": false}),
                    ],
                ),
                (
                    "imagePullCredentialsVerificationPolicy",
                    vec![
                        json!("NeverVerify"),
                        json!("AlwaysVerify"),
                        json!("NeverVerifyAllowlistedImages"),
                        json!("Bogus"),
                    ],
                ),
                (
                    "preloadedImagesVerificationAllowlist",
                    vec![json!(["docker.io/library/*"]), json!(["bad path"])],
                ),
                (
                    "tracing",
                    vec![
                        json!({"samplingRatePerMillion": 1000001}),
                        json!({"endpoint": "localhost:4317"}),
                    ],
                ),
                (
                    "userNamespaces.idsPerPod",
                    vec![json!(65536), json!(131072), json!(70000)],
                ),
            ],
        ),
        (
            "logging",
            vec![
                (
                    "logging.format",
                    vec![json!("text"), json!("json"), json!("bogus")],
                ),
                ("logging.verbosity", vec![json!(0), json!(5), json!(-1)]),
                (
                    "logging.flushFrequency",
                    vec![json!("5s"), json!("0s"), json!("-1s"), json!(100)],
                ),
                (
                    "logging.vmodule",
                    vec![
                        json!([{"filePattern": "x", "verbosity": 2}]),
                        json!([{"filePattern": "", "verbosity": 1}]),
                        json!([{"filePattern": "a=b", "verbosity": 1}]),
                    ],
                ),
                (
                    "logging.options.json.infoBufferSize",
                    vec![json!("0"), json!("1Mi"), json!("-1")],
                ),
                (
                    "logging.options.json.splitStream",
                    vec![json!(true), json!(false)],
                ),
                (
                    "featureGates",
                    vec![
                        json!({"LoggingAlphaOptions": true}),
                        json!({"LoggingBetaOptions": false}),
                    ],
                ),
            ],
        ),
        (
            "server",
            vec![
                ("enableServer", vec![json!(true), json!(false)]),
                (
                    "readOnlyPort",
                    vec![json!(0), json!(10255), json!(-1), json!(65536)],
                ),
                ("port", vec![json!(0), json!(10250), json!(65536)]),
                ("healthzPort", vec![json!(0), json!(-1), json!(10248)]),
                (
                    "healthzBindAddress",
                    vec![json!(""), json!("127.0.0.1"), json!("x")],
                ),
                (
                    "address",
                    vec![json!("0.0.0.0"), json!("::"), json!("x"), json!("")],
                ),
                (
                    "authentication.anonymous.enabled",
                    vec![json!(true), json!(false)],
                ),
                (
                    "authentication.webhook.enabled",
                    vec![json!(true), json!(false)],
                ),
                (
                    "authorization.mode",
                    vec![
                        json!("Webhook"),
                        json!("AlwaysAllow"),
                        json!(""),
                        json!("x"),
                    ],
                ),
                ("serverTLSBootstrap", vec![json!(true), json!(false)]),
                ("tlsCertFile", vec![json!("/pki/k.crt"), json!("")]),
                ("tlsPrivateKeyFile", vec![json!("/pki/k.key")]),
            ],
        ),
        (
            "node status",
            vec![
                (
                    "nodeStatusUpdateFrequency",
                    vec![json!("0s"), json!("10s"), json!("1m"), json!("-1s")],
                ),
                (
                    "nodeStatusReportFrequency",
                    vec![json!("0s"), json!("5m"), json!("1s")],
                ),
                (
                    "nodeLeaseDurationSeconds",
                    vec![json!(0), json!(-1), json!(40)],
                ),
                (
                    "nodeStatusMaxImages",
                    vec![json!(-2), json!(-1), json!(0), json!(50)],
                ),
            ],
        ),
        (
            "pods and pulls",
            vec![
                (
                    "maxPods",
                    vec![json!(-1), json!(0), json!(110), json!(1000)],
                ),
                ("podsPerCore", vec![json!(-1), json!(0), json!(10)]),
                (
                    "podPidsLimit",
                    vec![json!(-2), json!(-1), json!(0), json!(100)],
                ),
                (
                    "maxParallelImagePulls",
                    vec![json!(0), json!(1), json!(5), json!(-1)],
                ),
                ("serializeImagePulls", vec![json!(true), json!(false)]),
                ("registryPullQPS", vec![json!(-1), json!(0), json!(5)]),
                ("registryBurst", vec![json!(-1), json!(0), json!(10)]),
                ("eventRecordQPS", vec![json!(-1), json!(0), json!(50)]),
                ("eventBurst", vec![json!(-1), json!(0), json!(100)]),
                ("kubeAPIQPS", vec![json!(-1), json!(0), json!(50)]),
                ("kubeAPIBurst", vec![json!(-1), json!(0), json!(100)]),
            ],
        ),
        (
            "container logs",
            vec![
                (
                    "containerLogMaxSize",
                    vec![
                        json!("10Mi"),
                        json!("0"),
                        json!("-1"),
                        json!("1500m"),
                        json!("10MB"),
                    ],
                ),
                (
                    "containerLogMaxFiles",
                    vec![json!(0), json!(1), json!(2), json!(5)],
                ),
                (
                    "containerLogMaxWorkers",
                    vec![json!(0), json!(1), json!(-1)],
                ),
                (
                    "containerLogMonitorInterval",
                    vec![json!("0s"), json!("1s"), json!("500ms"), json!("10s")],
                ),
                (
                    "podLogsDir",
                    vec![
                        json!("/var/log/pods"),
                        json!("logs"),
                        json!("/var/log/./pods"),
                    ],
                ),
            ],
        ),
    ]
}

fn pick<'a, T>(rng: &mut ChaCha8Rng, items: &'a [T]) -> &'a T {
    &items[rng.random_range(0..items.len())]
}

fn case_of(body: Body, drop_ins: Vec<(String, String)>, args: Vec<String>) -> Case {
    let mut names = body.names.clone();
    names.extend(
        drop_ins
            .iter()
            .map(|(n, t)| format!("drop-in {n}: {}", t.trim_end().replace('\n', "; "))),
    );
    names.extend(args.iter().cloned());
    Case {
        name: names.join(", "),
        config: Some(body.text()),
        drop_ins,
        args,
    }
}

fn fields_case(rng: &mut ChaCha8Rng, leaves: &[(String, Vec<Value>)]) -> Case {
    let mut body = Body::base();
    let mut used = BTreeSet::new();
    for _ in 0..rng.random_range(1..=3) {
        let (field, values) = pick(rng, leaves);
        if used.insert(field.clone()) {
            let value = pick(rng, values).clone();
            body.set(field, value);
        }
    }
    case_of(body, Vec::new(), Vec::new())
}

/// Some fields of one related group (each in with even odds, at least one).
fn related_body(rng: &mut ChaCha8Rng, group: &Group, body: &mut Body) {
    let (_, fields) = group;
    let mut any = false;
    for (field, values) in fields {
        if rng.random_range(0..2) == 0 {
            body.set(field, pick(rng, values).clone());
            any = true;
        }
    }
    if !any {
        let (field, values) = pick(rng, fields);
        body.set(field, pick(rng, values).clone());
    }
}

fn related_case(rng: &mut ChaCha8Rng, related: &[Group]) -> Case {
    let group = pick(rng, related);
    let mut body = Body::base();
    related_body(rng, group, &mut body);
    let mut case = case_of(body, Vec::new(), Vec::new());
    case.name = format!("{}: {}", group.0, case.name);
    case
}

/// One to three gates (any of the kubelet's, locked ones too), sometimes `AllAlpha` or
/// `AllBeta` or a gate that does not exist, and sometimes a group of fields besides.
fn gates_case(rng: &mut ChaCha8Rng, related: &[Group]) -> Case {
    let all = features::all();
    let mut gates = Map::new();
    for _ in 0..rng.random_range(1..=3) {
        let spec = pick(rng, all);
        let on = if rng.random_range(0..3) == 0 {
            spec.default
        } else {
            !spec.default
        };
        gates.insert(spec.name.to_string(), json!(on));
    }
    match rng.random_range(0..12) {
        0 => {
            gates.insert(
                features::ALL_ALPHA.into(),
                json!(rng.random_range(0..2) == 0),
            );
        }
        1 => {
            gates.insert(
                features::ALL_BETA.into(),
                json!(rng.random_range(0..2) == 0),
            );
        }
        2 => {
            gates.insert("NoSuchGate".into(), json!(true));
        }
        _ => {}
    }
    let mut body = Body::base();
    body.set("featureGates", Value::Object(gates));
    if rng.random_range(0..2) == 0 {
        let group = pick(rng, related);
        let (field, values) = pick(rng, &group.1);
        if *field != "featureGates" {
            body.set(field, pick(rng, values).clone());
        }
    }
    case_of(body, Vec::new(), Vec::new())
}

/// A file with a field or two, and one to three drop-ins (some ignored for their name, one
/// sometimes without its type header) that set fields, remove them (`null`), or change
/// part of a map.
fn drop_ins_case(rng: &mut ChaCha8Rng, leaves: &[(String, Vec<Value>)]) -> Case {
    const NAMES: &[&str] = &[
        "10-a.conf",
        "20-b.conf",
        "05-early.conf",
        "99-z.conf",
        "50-x.yaml",
        "30.conf.bak",
        "A.conf",
    ];
    let mut body = Body::base();
    let mut set_in_file = Vec::new();
    for _ in 0..rng.random_range(0..=2) {
        let (field, values) = pick(rng, leaves);
        body.set(field, pick(rng, values).clone());
        set_in_file.push(field.clone());
    }
    let mut drop_ins = Vec::new();
    let mut names = BTreeSet::new();
    for _ in 0..rng.random_range(1..=3) {
        let name = *pick(rng, NAMES);
        if !names.insert(name) {
            continue;
        }
        let mut patch = Map::new();
        match rng.random_range(0..6) {
            0 if !set_in_file.is_empty() => {
                let field: &String = pick(rng, &set_in_file);
                set_path(&mut patch, field, Value::Null);
            }
            1 => {
                let (field, _) = pick(rng, leaves);
                set_path(&mut patch, field, Value::Null);
            }
            2 => {
                let partial = pick(
                    rng,
                    &[
                        json!({"memory.available": null}),
                        json!({"nodefs.available": "5%"}),
                        json!({"memory.available": "1Gi", "imagefs.available": null}),
                    ],
                )
                .clone();
                patch.insert("evictionHard".into(), partial);
            }
            3 => {
                patch.insert(
                    "featureGates".into(),
                    pick(
                        rng,
                        &[
                            json!({"KubeletCrashLoopBackOffMax": true}),
                            json!({"NoSuchGate": true}),
                            json!({"KubeletTracing": null}),
                        ],
                    )
                    .clone(),
                );
            }
            _ => {
                let (field, values) = pick(rng, leaves);
                set_path(&mut patch, field, pick(rng, values).clone());
            }
        }
        let head = if rng.random_range(0..15) == 0 {
            ""
        } else {
            HEAD
        };
        let mut text = String::from(head);
        for (k, v) in &patch {
            text.push_str(&format!("{k}: {v}\n"));
        }
        drop_ins.push((name.to_string(), text));
    }
    case_of(body, drop_ins, Vec::new())
}

/// Files the kubelet decodes only leniently (it warns, core refuses: the deliberate
/// difference) or not at all, and YAML forms where YAML 1.1 and 1.2 part.
fn malformed_case(rng: &mut ChaCha8Rng) -> Case {
    const BODIES: &[&str] = &[
        "maxPod: 10",
        "MaxPods: 10",
        "maxpods: 10",
        "maxPods: 10\nmaxPods: 20",
        "authentication: {webhok: {enabled: true}}",
        "authentication:\n  webhook:\n    enabled: true\n  webhook:\n    enabled: false",
        "maxPods: \"10\"",
        "maxPods: 1.5",
        "maxPods: 1e3",
        "maxPods: 0x10",
        "maxPods: 010",
        "maxPods: 0o17",
        "maxPods: +10",
        "maxPods: 1_000",
        "maxPods: 2147483648",
        "maxPods: ~",
        "maxPods:",
        "failSwapOn: yes",
        "failSwapOn: on",
        "failSwapOn: True",
        "failSwapOn: TRUE",
        "failSwapOn: \"false\"",
        "evictionHard: [a]",
        "evictionHard: {memory.available: 100}",
        "staticPodURLHeader: {a: b}",
        "featureGates: {KubeletTracing: \"true\"}",
        "featureGates: {KubeletCrashLoopBackOffMax: yes}",
        "syncFrequency: 1",
        "syncFrequency: 1.5h",
        "syncFrequency: 1us",
        "syncFrequency: 1µs",
        "syncFrequency: \"\"",
        "clusterDNS: 10.0.0.1",
        "clusterDNS: [a",
        "authentication:\n\twebhook: {}",
        "providerID: \"é\\u2028\"",
        "providerID: !!binary aGVsbG8=",
        "maxPods: &m 10\nkubeAPIBurst: *m",
        "? maxPods\n: 10",
        "maxPods: 10 # comment",
        "\"maxPods\": 10",
        "maxPods: !!str 10",
    ];
    const WHOLE: &[&str] = &[
        "",
        "---\n",
        "apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\nfailCgroupV1: false\n",
        "apiVersion: kubelet.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\nfailCgroupV1: false\n",
        "kind: KubeletConfiguration\nfailCgroupV1: false\n",
        "apiVersion: kubelet.config.k8s.io/v1beta1\nfailCgroupV1: false\n",
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: Kubelet\nfailCgroupV1: false\n",
        "{\"apiVersion\": \"kubelet.config.k8s.io/v1beta1\", \"kind\": \"KubeletConfiguration\", \"failCgroupV1\": false, \"maxPods\": 5}\n",
        "\u{feff}apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfailCgroupV1: false\n",
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfailCgroupV1: false\n---\napiVersion: v1\nkind: ConfigMap\n",
        "apiVersion: kubelet.config.k8s.io/v1beta1\r\nkind: KubeletConfiguration\r\nfailCgroupV1: false\r\nmaxPods: 7\r\n",
        "- a\n- b\n",
        "just text\n",
    ];
    if rng.random_range(0..4) == 0 {
        let text = pick(rng, WHOLE);
        return Case {
            name: format!("file {text:?}"),
            config: Some(text.to_string()),
            drop_ins: Vec::new(),
            args: Vec::new(),
        };
    }
    let raw = pick(rng, BODIES);
    let mut body = Body::base();
    body.raw.push(raw.to_string());
    body.names.push(format!("{raw:?}"));
    case_of(body, Vec::new(), Vec::new())
}

/// A field or two and a flag or two.
fn flags_case(rng: &mut ChaCha8Rng, leaves: &[(String, Vec<Value>)]) -> Case {
    const FLAGS: &[&str] = &[
        "--max-pods=90",
        "--max-pods=-1",
        "--fail-swap-on=false",
        "--eviction-hard=memory.available<1Gi",
        "--eviction-hard=",
        "--system-reserved=cpu=1,memory=2Gi",
        "--kube-reserved=cpu=x",
        "--feature-gates=KubeletTracing=false",
        "--feature-gates=KubeletCrashLoopBackOffMax=true",
        "--cgroups-per-qos=false",
        "--enforce-node-allocatable=",
        "--read-only-port=10255",
        "--node-status-update-frequency=0s",
        "--pod-manifest-path=manifests",
        "--reserved-cpus=0",
        "--cpu-manager-policy=static",
        "--v=4",
        "--address=x",
    ];
    let mut body = Body::base();
    if rng.random_range(0..2) == 0 {
        let (field, values) = pick(rng, leaves);
        body.set(field, pick(rng, values).clone());
    }
    let args = (0..rng.random_range(1..=2))
        .map(|_| pick(rng, FLAGS).to_string())
        .collect();
    case_of(body, Vec::new(), args)
}
