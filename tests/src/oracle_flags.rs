//! core's flag table against the kubelet's own v1.36 flag set (issue 14):
//! `kubelet-oracle flags` lists every flag the kubelet registers, with the field each
//! config flag sets found by parsing it over the defaults (not from a list);
//! [`compare_flags`] says where `kubelet_gitops_core::flags::FLAGS` differs from it; and
//! [`generate_flag_cases`] makes seeded kubelet command lines from the whole table, for
//! [`crate::oracle::compare`].
//!
//! Used by `tests/tests/kubelet_flags_oracle.rs` (CI).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use kubelet_gitops_core::flags::{FLAGS, FlagGroup, FlagInfo, ValueKind};
use rand::{RngExt as _, SeedableRng as _};
use serde_json::Value;

use crate::E2eError;
use crate::oracle::{Case, HEAD};

/// One flag of the kubelet's flag set, as `kubelet-oracle flags` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamFlag {
    pub name: String,
    pub shorthand: Option<char>,
    /// The pflag type (`flag.Value.Type()`): `int32`, `mapStringString`, `[]v1.Taint`.
    pub pflag_type: String,
    /// The value's Go type, `<package path>.<name>`: tells apart the parsers that share
    /// a pflag type (`...cli/flag.LangleSeparatedMapStringString`).
    pub go_type: String,
    /// A `MapStringString` taking one pair per occurrence.
    pub no_split: bool,
    /// What the flag takes when given without a value (`true` for booleans).
    pub no_opt_default: Option<String>,
    pub deprecated: bool,
    pub hidden: bool,
    /// `config`, `kubelet` or `global`.
    pub group: String,
    /// For a config flag, every field the oracle's probe changed (one, normally).
    pub fields: Vec<String>,
    /// Why no probe value changed a field, when none did.
    pub probe_error: Option<String>,
}

/// Runs `kubelet-oracle flags`.
pub fn upstream_flags(bin: &Path) -> Result<Vec<UpstreamFlag>, E2eError> {
    let out = Command::new(bin)
        .arg("flags")
        .output()
        .map_err(|source| E2eError::Spawn {
            program: bin.display().to_string(),
            source,
        })?;
    if !out.status.success() {
        return Err(E2eError::Command {
            command: format!("{} flags", bin.display()),
            detail: format!(
                "exited with {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ),
        });
    }
    parse_listing(&String::from_utf8_lossy(&out.stdout))
}

/// The JSON lines of `kubelet-oracle flags`.
pub fn parse_listing(text: &str) -> Result<Vec<UpstreamFlag>, E2eError> {
    let unexpected = |message: String| E2eError::Unexpected {
        what: "kubelet-oracle flags".into(),
        message,
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let v: Value =
                serde_json::from_str(line).map_err(|e| unexpected(format!("{e} in {line:?}")))?;
            let s = |k: &str| v[k].as_str().map(str::to_string);
            let name = s("name").ok_or_else(|| unexpected(format!("no name in {line}")))?;
            Ok(UpstreamFlag {
                name,
                shorthand: s("shorthand").and_then(|c| c.chars().next()),
                pflag_type: s("type").unwrap_or_default(),
                go_type: s("goType").unwrap_or_default(),
                no_split: v["noSplit"].as_bool().unwrap_or(false),
                no_opt_default: s("noOptDefVal").filter(|d| !d.is_empty()),
                deprecated: v["deprecated"].as_bool().unwrap_or(false),
                hidden: v["hidden"].as_bool().unwrap_or(false),
                group: s("group").unwrap_or_default(),
                fields: v["fields"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|f| f.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default(),
                probe_error: s("probeError").filter(|e| !e.is_empty()),
            })
        })
        .collect()
}

/// The oracle's name for a group.
fn group_name(group: FlagGroup) -> &'static str {
    match group {
        FlagGroup::Config => "config",
        FlagGroup::Kubelet => "kubelet",
        FlagGroup::Global => "global",
    }
}

/// The pflag value a flag of `kind` has upstream: its pflag type, the Go type's name
/// where the pflag type is shared, and `NoSplit`.
fn pflag_shape(kind: ValueKind) -> (&'static str, Option<&'static str>, bool) {
    match kind {
        ValueKind::Bool => ("bool", None, false),
        ValueKind::Int32 => ("int32", None, false),
        ValueKind::Int64 => ("int64", None, false),
        // Go's `flag.Int` (cadvisor's), wrapped by pflag.
        ValueKind::Int => ("int", None, false),
        ValueKind::Verbosity => ("Level", None, false),
        ValueKind::String => ("string", None, false),
        ValueKind::Ip => ("ip", None, false),
        ValueKind::Duration => ("duration", None, false),
        ValueKind::Quantity => ("quantity", None, false),
        ValueKind::StringSlice => ("stringSlice", None, false),
        ValueKind::MapStringString => ("mapStringString", Some("MapStringString"), false),
        ValueKind::MapStringStringNoSplit => ("mapStringString", Some("MapStringString"), true),
        ValueKind::LangleMap => (
            "mapStringString",
            Some("LangleSeparatedMapStringString"),
            false,
        ),
        ValueKind::LabelMap => ("mapStringString", Some("ConfigurationMap"), false),
        ValueKind::MapStringBool => ("mapStringBool", None, false),
        ValueKind::ColonMultimap => ("colonSeparatedMultimapStringString", None, false),
        ValueKind::Taints => ("[]v1.Taint", None, false),
        ValueKind::ReservedMemory => ("reserved-memory", None, false),
        ValueKind::VModule => ("pattern=N,...", None, false),
        ValueKind::Version => ("version", None, false),
    }
}

/// Whether `kind` parses as the upstream flag `u` does.
fn same_kind(kind: ValueKind, u: &UpstreamFlag) -> bool {
    let (pflag_type, go_name, no_split) = pflag_shape(kind);
    pflag_type == u.pflag_type
        && go_name.is_none_or(|n| u.go_type.rsplit('.').next() == Some(n))
        && no_split == u.no_split
}

/// Where core's flag table (`core`, normally [`FLAGS`]) differs from the kubelet's flag
/// set (`upstream`): a flag on one side only, or a different shorthand, group, value
/// kind, need of a value, deprecation mark or (config flags) field. Empty when they are
/// the same.
pub fn compare_flags(upstream: &[UpstreamFlag], core: &[FlagInfo]) -> Vec<String> {
    let mut problems = Vec::new();
    for u in upstream {
        let Some(c) = core.iter().find(|c| c.name == u.name) else {
            problems.push(format!(
                "--{}: the kubelet registers it ({}, {}{}), core's table does not know it",
                u.name,
                u.group,
                u.pflag_type,
                match u.fields.as_slice() {
                    [] => String::new(),
                    fields => format!(", sets {}", fields.join(", ")),
                }
            ));
            continue;
        };
        let name = &u.name;
        if c.shorthand != u.shorthand {
            problems.push(format!(
                "--{name}: shorthand {:?} in core, {:?} upstream",
                c.shorthand, u.shorthand
            ));
        }
        if group_name(c.group) != u.group {
            problems.push(format!(
                "--{name}: group {} in core, {} upstream",
                group_name(c.group),
                u.group
            ));
        }
        if !same_kind(c.kind, u) {
            problems.push(format!(
                "--{name}: core parses it as {:?} (pflag {:?}), upstream's value is {} ({}{})",
                c.kind,
                pflag_shape(c.kind),
                u.pflag_type,
                u.go_type,
                if u.no_split { ", NoSplit" } else { "" }
            ));
        }
        let core_default = c.kind.no_opt_default();
        if core_default != u.no_opt_default.as_deref() {
            problems.push(format!(
                "--{name}: without a value core takes {core_default:?}, upstream {:?}",
                u.no_opt_default
            ));
        }
        if c.deprecated != u.deprecated {
            problems.push(format!(
                "--{name}: {} in core, {} upstream",
                if c.deprecated {
                    "deprecated"
                } else {
                    "not deprecated"
                },
                if u.deprecated {
                    "deprecated"
                } else {
                    "not deprecated"
                }
            ));
        }
        if u.group == "config" {
            match u.fields.as_slice() {
                [field] => {
                    if c.field != Some(field.as_str()) {
                        problems.push(format!(
                            "--{name}: sets {:?} in core, {field} upstream",
                            c.field
                        ));
                    }
                }
                fields => problems.push(format!(
                    "--{name}: upstream's probe changed {} fields ({fields:?}{}); core says {:?}",
                    fields.len(),
                    u.probe_error
                        .as_deref()
                        .map(|e| format!(": {e}"))
                        .unwrap_or_default(),
                    c.field
                )),
            }
        } else if let Some(field) = c.field {
            problems.push(format!(
                "--{name}: core says it sets {field}, upstream registers it outside the config flags"
            ));
        }
    }
    let upstream_names: BTreeSet<&str> = upstream.iter().map(|u| u.name.as_str()).collect();
    for c in core {
        if !upstream_names.contains(c.name) {
            problems.push(format!(
                "--{}: in core's table ({}{}), the kubelet does not register it",
                c.name,
                group_name(c.group),
                c.field.map(|f| format!(", sets {f}")).unwrap_or_default()
            ));
        }
    }
    let mut seen = BTreeSet::new();
    for c in core {
        if !seen.insert(c.name) {
            problems.push(format!("--{}: twice in core's table", c.name));
        }
    }
    problems
}

/// Values to try for a flag: valid ones (`good`), boundary ones (valid or not, at an
/// edge of the parser or of validation) and invalid ones.
struct Values {
    good: Vec<&'static str>,
    edge: Vec<&'static str>,
    bad: Vec<&'static str>,
}

/// Values valid for one flag in particular (what its validation accepts).
fn flag_hints(name: &str) -> &'static [&'static str] {
    match name {
        "cgroup-driver" => &["systemd", "cgroupfs"],
        "cpu-manager-policy" => &["none", "static"],
        "topology-manager-policy" => &["none", "best-effort", "restricted", "single-numa-node"],
        "topology-manager-scope" => &["container", "pod"],
        "memory-manager-policy" => &["None", "Static", "BestEffort"],
        "hairpin-mode" => &["promiscuous-bridge", "hairpin-veth", "none"],
        "authorization-mode" => &["AlwaysAllow", "Webhook"],
        "tls-min-version" => &["VersionTLS12", "VersionTLS13", "VersionTLS10"],
        "tls-cipher-suites" => &[
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256",
            "TLS_RSA_WITH_RC4_128_SHA",
        ],
        "logging-format" => &["text", "json"],
        "container-log-max-size" => &["10Mi", "100Ki", "1Gi"],
        "kube-api-content-type" => &["application/json", "application/vnd.kubernetes.protobuf"],
        "reserved-cpus" => &["0", "0-1", "0,2", "1-3"],
        "enforce-node-allocatable" => &[
            "pods",
            "none",
            "pods,system-reserved",
            "pods,kube-reserved",
            "system-reserved-compressible",
        ],
        "system-reserved-cgroup" | "kube-reserved-cgroup" => &["/system.slice", "/kube.slice"],
        "cgroup-root" => &["/", "/kubepods"],
        "kubelet-cgroups" | "system-cgroups" => &["/system.slice/kubelet.service"],
        "cluster-dns" => &["10.96.0.10", "10.96.0.10,fd00::10", "not-an-ip"],
        "allowed-unsafe-sysctls" => &["net.core.somaxconn", "kernel.msg*", "net.ipv4.*"],
        "pod-cidr" => &["10.244.0.0/24", "fd00::/64"],
        "cpu-manager-policy-options" => &[
            "full-pcpus-only=true",
            "distribute-cpus-across-numa=true",
            "full-pcpus-only=true,distribute-cpus-across-numa=true",
        ],
        "topology-manager-policy-options" => &[
            "prefer-closest-numa-nodes=true",
            "max-allowable-numa-nodes=8",
            "prefer-closest-numa-nodes=true,max-allowable-numa-nodes=8",
        ],
        "qos-reserved" => &["memory=50%", "memory=100%"],
        "system-reserved" | "kube-reserved" => &[
            "cpu=500m,memory=1Gi",
            "pid=1000",
            "ephemeral-storage=1Gi",
            "memory=1Gi",
            "cpu=100m",
        ],
        "eviction-soft-grace-period" => &["memory.available=1m30s", "nodefs.available=2m"],
        "eviction-minimum-reclaim" => &["memory.available=100Mi", "nodefs.available=1Gi"],
        "eviction-hard" | "eviction-soft" => &[
            "memory.available<1Gi",
            "nodefs.available<10%,imagefs.available<15%",
            "memory.available<100Mi,nodefs.available<10%,imagefs.available<15%,nodefs.inodesFree<5%",
            "pid.available<10%",
        ],
        "feature-gates" => &[
            "KubeletTracing=true",
            "CPUManagerPolicyAlphaOptions=true",
            "GracefulNodeShutdown=false",
            "AllAlpha=false",
        ],
        "register-with-taints" => &["dedicated=gpu:NoSchedule", "spot:PreferNoSchedule"],
        "reserved-memory" => &["0:memory=1Gi", "0:memory=1Gi,hugepages-1Gi=2Gi"],
        "manifest-url" => &["http://example.com/pods"],
        "manifest-url-header" => &["Authorization:Bearer x", "a:b,a:c"],
        "pod-manifest-path" => &["/etc/kubernetes/manifests"],
        "volume-plugin-dir" => &["/usr/libexec/kubernetes/kubelet-plugins/volume/exec/"],
        "resolv-conf" => &["/etc/resolv.conf", "/run/systemd/resolve/resolv.conf"],
        "provider-id" => &["aws:///us-east-1a/i-123"],
        "container-runtime-endpoint" | "image-service-endpoint" => &[
            "unix:///run/containerd/containerd.sock",
            "/run/crio/crio.sock",
        ],
        "tls-cert-file" | "tls-private-key-file" | "client-ca-file" => {
            &["/etc/kubernetes/pki/kubelet.crt"]
        }
        "cluster-domain" => &["cluster.local", "example.org"],
        "vmodule" => &["kubelet*=4", "a=1,b=2"],
        "port" | "read-only-port" | "healthz-port" => &["10250", "10255", "0", "65535", "65536"],
        "oom-score-adj" => &["-999", "-1000", "1000", "1001"],
        "image-gc-high-threshold" | "image-gc-low-threshold" => &["85", "80", "100", "0", "101"],
        "max-pods" => &["110", "250", "0"],
        "node-status-max-images" => &["50", "-1", "0"],
        "container-log-max-files" => &["5", "2", "1"],
        "v" => &["2", "4", "10"],
        _ => &[],
    }
}

/// Generic values for a flag of `kind`.
fn kind_values(kind: ValueKind) -> Values {
    let (good, edge, bad): (&[&str], &[&str], &[&str]) = match kind {
        ValueKind::Bool => (
            &["true", "false"],
            &["1", "0", "t", "F", "TRUE", "True", "FALSE"],
            &["yes", "", "tRUE", "2"],
        ),
        ValueKind::Int32 => (
            &["1", "10", "100", "5"],
            &[
                "0",
                "-1",
                "2147483647",
                "-2147483648",
                "0x1f",
                "010",
                "1_000",
                "+5",
                "0o17",
            ],
            &["2147483648", "08", "1.5", "x", "", "1_", " 1"],
        ),
        ValueKind::Int64 | ValueKind::Int => (
            &["1", "4096", "1000000"],
            &[
                "0",
                "-1",
                "9223372036854775807",
                "0x10",
                "-9223372036854775808",
            ],
            &["9223372036854775808", "x", "", "1e3"],
        ),
        ValueKind::Verbosity => (
            &["0", "2", "4"],
            &["10", "2147483647", "007"],
            &["-1", "2147483648", "x", "", "0x1"],
        ),
        ValueKind::String => (&["x", "/tmp/x"], &["", " spaced ", "none", "a,b"], &[]),
        ValueKind::Ip => (
            &["0.0.0.0", "127.0.0.1", "::", "10.0.0.5"],
            &["::1", "010.000.000.001", "", "::ffff:10.0.0.1"],
            &["256.1.1.1", "x", "10.0.0", "1.2.3.4/24"],
        ),
        ValueKind::Duration => (
            &["1s", "90s", "1m30s", "5m", "1h"],
            &[
                "0s", "0", "-1s", "1.5h", "300ms", "1h2m3s", "1ns", "1us", "1µs", ".5s",
            ],
            &["5", "1x", "", "s", "1d"],
        ),
        ValueKind::Quantity => (
            &["0", "1Ki", "512", "1M"],
            &["-1", "1.5", "1e3", "0.1"],
            &["1x", "", "Ki"],
        ),
        ValueKind::StringSlice => (
            &["a", "a,b"],
            &["", "\"a,b\",c", "a,", " a"],
            &["a\"b", "\"ab"],
        ),
        ValueKind::MapStringString => (
            &["a=b", "a=b,c=d"],
            &["", " a = b ", "a=b=c", "a=", ",a=b,"],
            &["a", "a=b,c"],
        ),
        ValueKind::MapStringStringNoSplit => (&["a=b"], &["a=b,c=d", " a = b ", "a="], &["a", ""]),
        ValueKind::LangleMap => (
            &["memory.available<1Gi"],
            &["", "memory.available<101%", "memory.available<-1", "a<b"],
            &["memory.available=1Gi", "memory.available"],
        ),
        ValueKind::MapStringBool => (
            &["KubeletTracing=true"],
            &["", "AllBeta=true", "kubelettracing=true"],
            &["NoSuchGate=true", "x", "KubeletTracing=maybe"],
        ),
        ValueKind::ColonMultimap => (
            &["a:b", "a:b,a:c,b:d"],
            &["", "a:", ":b", "a:b:c"],
            &["a", "a=b"],
        ),
        ValueKind::LabelMap => (
            &["a=b", "example.com/x=y"],
            &["a", "", "a=b,c"],
            &["kubernetes.io/x=y", "a=b c", "-a=b"],
        ),
        ValueKind::Taints => (
            &["k=v:NoSchedule", "k:NoExecute"],
            &["", "k:NoSchedule-", "k=v:NoSchedule,j=w:PreferNoSchedule"],
            &["k=v:Bogus", "k", "k=v:NoSchedule,k=w:NoSchedule", "k=v"],
        ),
        ValueKind::ReservedMemory => (
            &["0:memory=1Gi", "0:memory=1Gi;1:memory=2Gi"],
            &["", "0:memory=0"],
            &["x:memory=1Gi", "0:cpu=1", "memory=1Gi", "0:memory=lots"],
        ),
        ValueKind::VModule => (
            &["a=1", "a=1,b*=2"],
            &["", "a=0", ",a=1,"],
            &["a", "a=x", "=1"],
        ),
        ValueKind::Version => (&["true"], &["raw"], &["x"]),
    };
    Values {
        good: good.to_vec(),
        edge: edge.to_vec(),
        bad: bad.to_vec(),
    }
}

/// A value for `flag`: valid most of the time, sometimes at an edge, sometimes invalid.
fn pick_value(rng: &mut rand_chacha::ChaCha8Rng, flag: &FlagInfo) -> String {
    let Values {
        mut good,
        edge,
        bad,
    } = kind_values(flag.kind);
    let hints = flag_hints(flag.name);
    if !hints.is_empty() {
        good = hints.to_vec();
    }
    let pool = match rng.random_range(0..10) {
        0..=6 => &good,
        7..=8 => &edge,
        _ => &bad,
    };
    let pool = if pool.is_empty() { &good } else { pool };
    pool[rng.random_range(0..pool.len())].to_string()
}

/// `name` as a command line may spell it: sometimes with `_` for `-` (the kubelet
/// normalizes word separators).
fn spell(rng: &mut rand_chacha::ChaCha8Rng, name: &str) -> String {
    match rng.random_range(0..8) {
        0 => name.replace('-', "_"),
        1 => name.replacen('-', "_", 1),
        _ => name.to_string(),
    }
}

/// The arguments giving `flag` the value `value`, in one of the forms pflag reads.
fn occurrence(rng: &mut rand_chacha::ChaCha8Rng, flag: &FlagInfo, value: &str) -> Vec<String> {
    let long = format!("--{}", spell(rng, flag.name));
    if !flag.takes_value() {
        return match (value, rng.random_range(0..6)) {
            // The bare flag.
            ("true", 0..=2) => vec![long],
            // A separate word is not the flag's value: a stray argument.
            (_, 5) => vec![long, value.to_string()],
            _ => vec![format!("{long}={value}")],
        };
    }
    match (flag.shorthand, rng.random_range(0..6)) {
        (Some(c), 0) => vec![format!("-{c}"), value.to_string()],
        (Some(c), 1) => vec![format!("-{c}={value}")],
        (Some(c), 2) if !value.is_empty() => vec![format!("-{c}{value}")],
        (_, 3..=4) => vec![long, value.to_string()],
        _ => vec![format!("{long}={value}")],
    }
}

/// Fields a case's file may set besides `failCgroupV1`, most of them fields a config flag
/// writes too (the flag must win, merge or append as upstream does).
const FILE_FIELDS: &[&str] = &[
    "maxPods: 150",
    "systemReserved:\n  cpu: 100m",
    "kubeReserved:\n  memory: 1Gi",
    "evictionHard:\n  memory.available: 200Mi",
    "evictionSoft:\n  memory.available: 300Mi\nevictionSoftGracePeriod:\n  memory.available: 1m",
    "featureGates:\n  KubeletTracing: true",
    "tlsCipherSuites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]",
    "clusterDNS: [10.96.0.10]",
    "logging:\n  vmodule:\n  - filePattern: x\n    verbosity: 2",
    "logging:\n  format: json\n  verbosity: 3",
    "registerWithTaints:\n- key: a\n  effect: NoSchedule",
    "reservedMemory:\n- numaNode: 0\n  limits:\n    memory: 1Gi",
    "address: 10.0.0.1",
    "healthzBindAddress: 127.0.0.2",
    "staticPodURLHeader:\n  a: [b]",
    "cpuManagerPolicy: static\ncpuManagerPolicyOptions:\n  full-pcpus-only: \"true\"",
    "port: 10251",
    "syncFrequency: 30s",
    "enforceNodeAllocatable: [pods]",
    "allowedUnsafeSysctls: [net.core.somaxconn]",
    "cgroupDriver: cgroupfs",
    "readOnlyPort: 10255",
    "qosReserved:\n  memory: 50%",
    "topologyManagerPolicyOptions:\n  prefer-closest-numa-nodes: \"true\"",
];

/// A misspelling of `name`: a letter dropped, doubled or changed, or a word added.
fn misspell(rng: &mut rand_chacha::ChaCha8Rng, name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let at = rng.random_range(0..chars.len());
    let mut out = chars.clone();
    match rng.random_range(0..4) {
        0 => {
            out.remove(at);
        }
        1 => out.insert(at, chars[at]),
        2 => out[at] = 'x',
        _ => out.extend("-extra".chars()),
    }
    out.into_iter().collect()
}

/// `count` kubelet command lines from `seed`, drawn from the whole flag table: each case
/// the file `failCgroupV1: false` (sometimes with one or two more fields) and one to four
/// flags, most of them config flags, some node-local ones (`--hostname-override`,
/// `--node-ip`, `--cert-dir`, `--root-dir`, `--node-labels`, ...), with valid, boundary
/// and invalid values, written `--flag=value` or `--flag value` (or `-v3`), a bare or
/// `=false` boolean, `_` for `-` in a name, a flag repeated (map and list flags merge or
/// append, others last-wins), and now and then a misspelled flag. Deterministic.
pub fn generate_flag_cases(seed: u64, count: usize) -> Vec<Case> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let config: Vec<&FlagInfo> = FLAGS.iter().filter(|f| f.is_config()).collect();
    // The node-local flags a case may carry: not --config/--config-dir (the case's own),
    // not --help or --version (the kubelet prints and exits).
    let node: Vec<&FlagInfo> = FLAGS
        .iter()
        .filter(|f| {
            f.group == FlagGroup::Kubelet && !matches!(f.name, "config" | "config-dir")
                || f.group == FlagGroup::Global && !matches!(f.name, "help" | "version")
        })
        .collect();
    let mut cases = Vec::with_capacity(count);
    for i in 0..count {
        let mut file = vec!["failCgroupV1: false"];
        for _ in 0..[0, 0, 1, 2][rng.random_range(0..4)] {
            let field = FILE_FIELDS[rng.random_range(0..FILE_FIELDS.len())];
            let key = field.split(':').next().unwrap_or_default();
            if !file.iter().any(|f| f.starts_with(&format!("{key}:"))) {
                file.push(field);
            }
        }
        let mut args = Vec::new();
        for _ in 0..[1, 1, 2, 2, 3, 4][rng.random_range(0..6)] {
            let flag = if rng.random_range(0..6) == 0 {
                node[rng.random_range(0..node.len())]
            } else {
                config[rng.random_range(0..config.len())]
            };
            let repeats = if rng.random_range(0..6) == 0 { 2 } else { 1 };
            for _ in 0..repeats {
                let value = pick_value(&mut rng, flag);
                args.extend(occurrence(&mut rng, flag, &value));
            }
        }
        if rng.random_range(0..30) == 0 {
            let flag = config[rng.random_range(0..config.len())];
            let at = rng.random_range(0..=args.len());
            args.insert(at, format!("--{}=1", misspell(&mut rng, flag.name)));
        }
        cases.push(Case {
            name: format!("#{i} {}", args.join(" ")),
            config: Some(format!("{HEAD}{}\n", file.join("\n"))),
            drop_ins: Vec::new(),
            args,
        });
    }
    cases
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flag(
        name: &str,
        pflag_type: &str,
        go_type: &str,
        group: &str,
        fields: &[&str],
    ) -> UpstreamFlag {
        UpstreamFlag {
            name: name.into(),
            shorthand: None,
            pflag_type: pflag_type.into(),
            go_type: go_type.into(),
            no_split: false,
            no_opt_default: None,
            deprecated: true,
            hidden: false,
            group: group.into(),
            fields: fields.iter().map(|f| f.to_string()).collect(),
            probe_error: None,
        }
    }

    #[test]
    fn the_listing_parses() {
        let text = r#"{"name":"v","shorthand":"v","type":"Level","goType":"k8s.io/component-base/logs/api/v1.verbosityLevelPflag","default":"0","deprecated":false,"hidden":false,"group":"config","field":"logging.verbosity","fields":["logging.verbosity"],"probe":"7"}
{"name":"help","shorthand":"h","type":"bool","goType":"github.com/spf13/pflag.boolValue","noOptDefVal":"true","default":"false","deprecated":false,"hidden":false,"group":"global","fields":null}
"#;
        let flags = parse_listing(text).unwrap();
        assert_eq!(flags.len(), 2);
        assert_eq!(flags[0].shorthand, Some('v'));
        assert_eq!(flags[0].fields, ["logging.verbosity"]);
        assert_eq!(flags[1].no_opt_default.as_deref(), Some("true"));
        assert!(flags[1].fields.is_empty());
    }

    #[test]
    fn differences_are_named() {
        let max_pods = FLAGS
            .iter()
            .find(|f| f.name == "max-pods")
            .copied()
            .unwrap();
        let upstream = [flag(
            "max-pods",
            "int32",
            "github.com/spf13/pflag.int32Value",
            "config",
            &["maxPods"],
        )];
        assert!(compare_flags(&upstream, &[max_pods]).is_empty());

        let wrong = [flag("max-pods", "int64", "x", "config", &["maxPodz"])];
        let problems = compare_flags(&wrong, &[max_pods]);
        assert_eq!(problems.len(), 2, "{problems:?}");

        let several = [flag("max-pods", "int32", "x", "config", &["a", "b"])];
        assert!(compare_flags(&several, &[max_pods])[0].contains("2 fields"));

        let extra = [flag("nope", "bool", "x", "kubelet", &[])];
        let problems = compare_flags(&extra, &[max_pods]);
        assert_eq!(problems.len(), 2, "{problems:?}");

        let langle = FLAGS
            .iter()
            .find(|f| f.name == "eviction-hard")
            .copied()
            .unwrap();
        let plain = [flag(
            "eviction-hard",
            "mapStringString",
            "k8s.io/component-base/cli/flag.MapStringString",
            "config",
            &["evictionHard"],
        )];
        assert_eq!(compare_flags(&plain, &[langle]).len(), 1);
    }

    #[test]
    fn generated_cases_are_deterministic_and_varied() {
        let a = generate_flag_cases(14, 300);
        assert_eq!(a, generate_flag_cases(14, 300));
        assert_ne!(a, generate_flag_cases(15, 300));
        let args: Vec<&String> = a.iter().flat_map(|c| &c.args).collect();
        assert!(args.iter().any(|a| a.contains('_')));
        assert!(args.iter().any(|a| !a.starts_with('-')), "a separate value");
        let names: BTreeSet<&str> = args
            .iter()
            .filter_map(|a| a.strip_prefix("--"))
            .map(|a| a.split('=').next().unwrap_or_default())
            .collect();
        assert!(names.len() > 60, "{} distinct flags", names.len());
    }
}
