//! core against the kubelet's own v1.36 code: `upstream/bin/kubelet-oracle` (built by
//! `upstream/build.sh`, source in `upstream/cmd/kubelet-oracle`) runs a kubelet's start-up
//! steps on a case (a config file, drop-ins, a command line); [`compare`] says where core
//! answers otherwise; [`generate`] makes seeded cases.
//!
//! Used by `tests/tests/kubelet_oracle.rs` (CI) and `oracle-compare` (by hand, any seed
//! and count).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use kubelet_gitops_core::configz::config_diff;
use kubelet_gitops_core::effective::{Source, effective};
use kubelet_gitops_core::flags::KubeletFlags;
use kubelet_gitops_core::validation::{HostInfo, validate};
use rand::{RngExt as _, SeedableRng as _};
use serde_json::{Value, json};

use crate::E2eError;

/// The type header every file of a case starts with.
pub const HEAD: &str = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";

/// One case: the config file (`None`: no `--config`), drop-ins (file name, content; only
/// `*.conf` are read, by both) and more kubelet flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    pub name: String,
    pub config: Option<String>,
    pub drop_ins: Vec<(String, String)>,
    pub args: Vec<String>,
}

/// What the kubelet's code said about a case.
#[derive(Debug, Clone)]
pub struct Answer {
    /// `ok`, or the step that failed.
    pub stage: String,
    pub error: Option<String>,
    /// The strict decoding error when the kubelet fell back to lenient decoding.
    pub strict_error: Option<String>,
    /// The drop-ins' strict decoding errors, which the kubelet never looks for.
    pub drop_in_strict_errors: Vec<String>,
    pub validation_errors: Vec<String>,
    /// The effective config (v1beta1 JSON) after the steps that succeeded.
    pub effective: Option<Value>,
    pub cgroup_v2: bool,
    /// Failures later in the kubelet's start that it words otherwise than one message (an
    /// address the server cannot listen on): a verdict, not a message to match.
    pub inexact: Vec<String>,
    /// What the oracle's fixed machine decided (a static CPU or memory policy it cannot
    /// satisfy): not a verdict, since core does not know the node's machine.
    pub machine: Vec<String>,
    /// The `--config` path the kubelet read (its directory resolves relative paths).
    pub config_path: Option<String>,
    /// How long the kubelet's steps took.
    pub nanos: u64,
}

/// The oracle binary: in [`crate::real::UPSTREAM_BIN_ENV`] or `upstream/bin`.
pub fn oracle_bin() -> Result<PathBuf, E2eError> {
    let dir = std::env::var_os(crate::real::UPSTREAM_BIN_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(crate::real::UpstreamBinaries::default_dir);
    let bin = dir.join("kubelet-oracle");
    if bin.is_file() {
        Ok(bin)
    } else {
        Err(E2eError::MissingUpstream {
            dir,
            missing: vec!["kubelet-oracle".into()],
        })
    }
}

/// Runs `kubelet-oracle batch` on `cases`; an answer per case, in order.
pub fn ask(bin: &std::path::Path, cases: &[Case]) -> Result<Vec<Answer>, E2eError> {
    let mut input = String::new();
    for c in cases {
        let drop_ins: serde_json::Map<String, Value> = c
            .drop_ins
            .iter()
            .map(|(n, t)| (n.clone(), Value::String(t.clone())))
            .collect();
        input.push_str(
            &json!({"config": c.config, "dropIns": drop_ins, "args": c.args}).to_string(),
        );
        input.push('\n');
    }
    let mut child = Command::new(bin)
        .arg("batch")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| E2eError::Spawn {
            program: bin.display().to_string(),
            source,
        })?;
    let mut stdin = child.stdin.take().ok_or_else(|| E2eError::Unexpected {
        what: "kubelet-oracle".into(),
        message: "no stdin".into(),
    })?;
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child
        .wait_with_output()
        .map_err(E2eError::io("waiting for kubelet-oracle"))?;
    let written = writer.join().map_err(|_| E2eError::Unexpected {
        what: "kubelet-oracle".into(),
        message: "the writer panicked".into(),
    })?;
    written.map_err(E2eError::io("writing the cases to kubelet-oracle"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(30).collect();
        return Err(E2eError::Command {
            command: format!("{} batch", bin.display()),
            detail: format!(
                "exited with {} after {} answers; the end of its stderr:\n{}",
                out.status,
                String::from_utf8_lossy(&out.stdout).lines().count(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            ),
        });
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let answers: Vec<Answer> = text
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or(Value::Null);
            let s = |k: &str| v[k].as_str().map(str::to_string);
            let list = |k: &str| -> Vec<String> {
                v[k].as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|e| e.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            Answer {
                stage: s("stage").unwrap_or_default(),
                error: s("error"),
                strict_error: s("strictError"),
                validation_errors: list("validationErrors"),
                drop_in_strict_errors: list("dropInStrictErrors"),
                inexact: list("inexact"),
                machine: list("machine"),
                config_path: s("configPath"),
                effective: v.get("effective").cloned().filter(|e| !e.is_null()),
                cgroup_v2: v["host"]["cgroupV2"].as_bool().unwrap_or(false),
                nanos: v["nanos"].as_u64().unwrap_or(0),
            }
        })
        .collect();
    if answers.len() != cases.len() {
        return Err(E2eError::Unexpected {
            what: "kubelet-oracle batch".into(),
            message: format!("{} answers for {} cases", answers.len(), cases.len()),
        });
    }
    Ok(answers)
}

/// Where core answers `case` otherwise than the kubelet did (`answer`); empty when they
/// agree. A file the kubelet decodes only leniently (unknown or duplicate fields) is one
/// core refuses: the deliberate difference of docs/upstream.md.
pub fn compare(case: &Case, answer: &Answer) -> Vec<String> {
    let mut args = Vec::new();
    if case.config.is_some() {
        args.push("--config=/case/config.yaml".to_string());
    }
    let mut drop_ins: Vec<&(String, String)> = case
        .drop_ins
        .iter()
        .filter(|(n, _)| n.ends_with(".conf"))
        .collect();
    drop_ins.sort();
    if !case.drop_ins.is_empty() {
        args.push("--config-dir=/case/conf.d".to_string());
    }
    args.extend(case.args.iter().cloned());
    let flags = match KubeletFlags::parse(&args) {
        Ok(f) => f,
        Err(e) => {
            return if answer.stage == "flags" {
                Vec::new()
            } else {
                vec![format!(
                    "core cannot parse the flags ({e}); the kubelet: stage {}",
                    answer.stage
                )]
            };
        }
    };
    if answer.stage == "flags" {
        return vec![format!(
            "the kubelet refuses the flags ({:?}); core parses them",
            answer.error
        )];
    }
    let sources: Vec<Source<'_>> = drop_ins
        .iter()
        .map(|(n, t)| Source::new(n, t.as_bytes()))
        .collect();
    // Core is told where the kubelet's file was, as the agent tells it the node's
    // --config: relative paths resolve against its directory.
    let config_name = answer
        .config_path
        .clone()
        .unwrap_or_else(|| "config.yaml".to_string());
    let file = case
        .config
        .as_deref()
        .map(|c| Source::new(&config_name, c.as_bytes()));
    let built = effective(file, &sources, Some(&flags));
    let host = HostInfo {
        cgroup_v2: Some(answer.cgroup_v2),
    };
    let strict = answer
        .strict_error
        .iter()
        .chain(&answer.drop_in_strict_errors)
        .next();
    if let Some(strict) = strict {
        // The deliberate difference: core refuses what the kubelet decodes leniently (the
        // config file) or merges without decoding (a drop-in): unknown or duplicate
        // fields.
        return match built {
            Err(_) => Vec::new(),
            Ok(_) => vec![format!(
                "the kubelet decodes leniently ({strict}); core accepts the file"
            )],
        };
    }
    // A kubelet that stops before validation (a file that does not load, a drop-in that
    // does not merge, a locked feature gate, a panic) does not start: core must refuse,
    // in building the effective config or in validating it.
    if matches!(
        answer.stage.as_str(),
        "load" | "merge" | "precedence" | "feature-gates" | "panic"
    ) {
        let refused = match &built {
            Err(_) => true,
            Ok(c) => !validate(&c.config, &host).is_empty(),
        };
        return if refused {
            Vec::new()
        } else {
            vec![format!(
                "the kubelet stops at {} ({:?}); core accepts the case",
                answer.stage, answer.error
            )]
        };
    }
    let core = match built {
        Ok(c) => c,
        Err(e) => {
            return vec![format!(
                "core cannot build the effective config ({e}); the kubelet: stage {} {:?}",
                answer.stage, answer.error
            )];
        }
    };
    let mut problems = Vec::new();
    let errors = validate(&core.config, &host);
    let starts = answer.stage == "ok";
    if starts != errors.is_empty() {
        problems.push(format!(
            "verdict: the kubelet {} (stage {}: {:?}); core {}",
            if starts { "starts" } else { "refuses" },
            answer.stage,
            answer.error,
            if errors.is_empty() {
                "finds nothing".to_string()
            } else {
                format!(
                    "finds {:?}",
                    errors
                        .iter()
                        .map(|e| e.message.as_str())
                        .collect::<Vec<_>>()
                )
            }
        ));
    }
    // Core's message is the kubelet's, or the kubelet's followed by the reason (`invalid
    // taint: {...}: invalid taint effect: ...`, where the kubelet drops the reason): a
    // deliberate difference, docs/upstream.md.
    let same = |ours: &str, upstream: &str| {
        ours == upstream
            || ours
                .strip_prefix(upstream)
                .is_some_and(|rest| rest.starts_with(": "))
    };
    for upstream in &answer.validation_errors {
        if !errors.iter().any(|e| same(&e.message, upstream)) {
            problems.push(format!(
                "the kubelet's error {upstream:?} is not among core's {:?}",
                errors
                    .iter()
                    .map(|e| e.message.as_str())
                    .collect::<Vec<_>>()
            ));
        }
    }
    if let Some(upstream) = &answer.effective {
        for d in config_diff(&core.config, upstream) {
            problems.push(format!("effective config: {d}"));
        }
    }
    problems
}

/// Values to try for a field whose default (as the kubelet's code gives it) is `default`.
fn values_for(default: &Value) -> Vec<Value> {
    match default {
        Value::Bool(b) => vec![json!(!b)],
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
            json!("1x"),
            json!(""),
            json!(5),
        ],
        Value::String(_) => vec![json!(""), json!("x"), json!("none"), json!("static")],
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
            ],
        ),
        (
            "tlsMinVersion",
            vec![json!("VersionTLS12"), json!("VersionTLS99")],
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
            "allowedUnsafeSysctls",
            vec![
                json!(["net.core.somaxconn"]),
                json!(["kernel.msg*"]),
                json!(["bad sysctl"]),
            ],
        ),
        (
            "clusterDNS",
            vec![json!(["10.96.0.10"]), json!(["not-an-ip"])],
        ),
        (
            "registerWithTaints",
            vec![
                json!([{"key": "a", "effect": "NoSchedule"}]),
                json!([{"key": "a", "effect": "Bogus"}]),
            ],
        ),
        ("staticPodURLHeader", vec![json!({"a": ["b"]})]),
        ("providerID", vec![json!("aws:///x")]),
        (
            "podLogsDir",
            vec![
                json!("/var/log/pods2"),
                json!("relative"),
                json!("/var/log/../x"),
            ],
        ),
        (
            "memorySwap",
            vec![
                json!({"swapBehavior": "LimitedSwap"}),
                json!({"swapBehavior": "Bogus"}),
            ],
        ),
    ]
}

/// `count` cases from `seed`: each the file `failCgroupV1: false` (so that validation
/// does not stop at this machine's cgroup version) with one to three fields set to a
/// valid, boundary or invalid value, sometimes a drop-in or a flag as well. `defaults` is
/// the kubelet's effective config of that file (its fields and their types).
pub fn generate(seed: u64, count: usize, defaults: &Value) -> Vec<Case> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut fields: Vec<(String, Vec<Value>)> = defaults
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "apiVersion" | "kind" | "failCgroupV1"))
                .map(|(k, v)| (k.clone(), values_for(v)))
                .collect()
        })
        .unwrap_or_default();
    fields.extend(extra_fields().into_iter().map(|(k, v)| (k.to_string(), v)));
    let flags = [
        "--max-pods=90",
        "--max-pods=-1",
        "--fail-swap-on=false",
        "--eviction-hard=memory.available<1Gi",
        "--system-reserved=cpu=1,memory=2Gi",
        "--kube-reserved=cpu=x",
        "--feature-gates=KubeletTracing=false",
        "--cgroups-per-qos=false",
        "--read-only-port=10255",
        "--node-status-update-frequency=0s",
    ];
    let mut cases = Vec::with_capacity(count);
    for i in 0..count {
        let mut lines = vec!["failCgroupV1: false".to_string()];
        let mut names = Vec::new();
        let n = rng.random_range(1..=3);
        let mut used = std::collections::BTreeSet::new();
        for _ in 0..n {
            let (field, values) = &fields[rng.random_range(0..fields.len())];
            if !used.insert(field.clone()) {
                continue;
            }
            let value = &values[rng.random_range(0..values.len())];
            lines.push(format!("{field}: {value}"));
            names.push(format!("{field}={value}"));
        }
        let mut drop_ins = Vec::new();
        if rng.random_range(0..8) == 0 {
            let (field, values) = &fields[rng.random_range(0..fields.len())];
            let value = &values[rng.random_range(0..values.len())];
            drop_ins.push((
                "10-case.conf".to_string(),
                format!("{HEAD}{field}: {value}\n"),
            ));
            names.push(format!("drop-in {field}={value}"));
        }
        let mut args = Vec::new();
        if rng.random_range(0..6) == 0 {
            let flag = flags[rng.random_range(0..flags.len())];
            args.push(flag.to_string());
            names.push(flag.to_string());
        }
        cases.push(Case {
            name: format!("#{i} {}", names.join(", ")),
            config: Some(format!("{HEAD}{}\n", lines.join("\n"))),
            drop_ins,
            args,
        });
    }
    cases
}

/// The kubelet's effective config of the generator's base file.
pub fn defaults(bin: &std::path::Path) -> Result<Value, E2eError> {
    let base = Case {
        name: "base".into(),
        config: Some(format!("{HEAD}failCgroupV1: false\n")),
        drop_ins: Vec::new(),
        args: Vec::new(),
    };
    let answer = ask(bin, &[base])?.remove(0);
    answer.effective.ok_or_else(|| E2eError::Unexpected {
        what: "kubelet-oracle".into(),
        message: format!("no effective config for the base file: {:?}", answer.error),
    })
}
