//! The worst inputs under 1 MiB (the most a ConfigMap holds) that we know how to build:
//! many unknown keys, many invalid values, long lists, duplicate keys, deep nesting, long
//! keys, long lines, YAML (the fast path and the full parser) and JSON. Shared by the
//! benchmarks of `kubelet-gitops validate` (core's `worst`) and of the reconciler's
//! rendering (`render`), which wraps each config in a pool file, with the table both
//! print and the environment variables both read:
//!
//! - `WORST_BYTES=65536` builds smaller inputs (to see how time grows with size);
//! - `WORST_ONLY=substring` keeps the inputs whose name contains it;
//! - `WORST_SHOW=1` prints each input's first two lines of output;
//! - `WORST_TABLE_ONLY=1` prints the table and skips criterion.

use std::fmt::Write as _;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// One input: a name for the table and its bytes.
pub struct Input {
    pub name: &'static str,
    pub bytes: Vec<u8>,
}

/// Where the kubelet configuration's fields go.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A KubeletConfiguration file (`kubelet-gitops validate`); JSON inputs included.
    Kubelet,
    /// `spec.kubelet` of a pool file, `pools/big.yaml` (the reconciler); YAML only.
    Pool,
}

impl Shape {
    /// The document up to the first field of the kubelet configuration.
    fn head(self) -> &'static str {
        match self {
            Shape::Kubelet => {
                "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
            }
            Shape::Pool => {
                "apiVersion: kubelet-gitops.io/v1alpha1\nkind: NodePool\nmetadata:\n  name: big\n\
                 spec:\n  nodeSelector: {}\n  kubelet:\n"
            }
        }
    }

    /// The indentation of the kubelet configuration's fields.
    fn indent(self) -> &'static str {
        match self {
            Shape::Kubelet => "",
            Shape::Pool => "    ",
        }
    }

    /// `text` with every line indented for this shape.
    fn lines(self, text: &str) -> String {
        let mut out = String::with_capacity(text.len() + 16);
        for line in text.split_inclusive('\n') {
            out.push_str(self.indent());
            out.push_str(line);
        }
        out
    }
}

/// `head`, then `line(i)` for i = 0, 1, ... as long as the result (with `tail`) stays
/// within `limit` bytes.
fn fill(head: &str, tail: &str, limit: usize, line: impl Fn(usize) -> String) -> Vec<u8> {
    let mut out = String::from(head);
    for i in 0.. {
        let next = line(i);
        if out.len() + next.len() + tail.len() > limit {
            break;
        }
        out.push_str(&next);
    }
    out.push_str(tail);
    out.into_bytes()
}

/// Block YAML: `text` (already in the shape's indentation), then lines of `line(i)`.
fn yaml(
    shape: Shape,
    text: &str,
    tail: &str,
    limit: usize,
    line: impl Fn(usize) -> String,
) -> Vec<u8> {
    let head = format!("{}{}", shape.head(), shape.lines(text));
    fill(&head, tail, limit, |i| shape.lines(&line(i)))
}

/// The start of a JSON KubeletConfiguration, up to the opening quote of its next key.
const JSON_HEAD: &str =
    "{\"apiVersion\": \"kubelet.config.k8s.io/v1beta1\", \"kind\": \"KubeletConfiguration\",\n\"";

/// One JSON object with `field` holding one member per line.
fn json_object(field: &str, limit: usize, member: impl Fn(usize) -> String) -> Vec<u8> {
    let head = format!("{JSON_HEAD}{field}\": {{\n");
    fill(&head, "\n}}\n", limit, |i| {
        format!("{}{}", if i == 0 { "" } else { ",\n" }, member(i))
    })
}

/// A flow list on one line: `field: [item(0), item(1), ...]`, with `first` before it.
fn flow_line(
    shape: Shape,
    field: &str,
    first: &str,
    limit: usize,
    item: impl Fn(usize) -> String,
) -> Vec<u8> {
    let head = format!("{}{}{field}: [{first}", shape.head(), shape.indent());
    fill(&head, "]\n", limit, |i| {
        format!("{}{}", if i == 0 { "" } else { ", " }, item(i))
    })
}

/// Every input of `shape`, each at most `limit` bytes.
pub fn inputs(shape: Shape, limit: usize) -> Vec<Input> {
    let crlf = |bytes: Vec<u8>| {
        String::from_utf8(bytes)
            .unwrap_or_default()
            .replace('\n', "\r\n")
            .into_bytes()
    };
    let block = |field: &str, line: &dyn Fn(usize) -> String| {
        yaml(shape, &format!("{field}:\n"), "", limit, line)
    };
    let quarter = |fields: &[&str], line: &dyn Fn(usize) -> String| {
        let mut out = String::new();
        let part = (limit - shape.head().len()) / fields.len();
        for field in fields {
            let chunk = fill(&shape.lines(&format!("{field}:\n")), "", part, |i| {
                shape.lines(&line(i))
            });
            out.push_str(&String::from_utf8(chunk).unwrap_or_default());
        }
        format!("{}{out}", shape.head()).into_bytes()
    };
    let deep = |levels: usize, key: &str| {
        let mut text = String::new();
        for d in 0..levels {
            let _ = writeln!(text, "{}{key}{d}:", "  ".repeat(d));
        }
        let indent = "  ".repeat(levels);
        yaml(shape, &text, "", limit, move |i| {
            format!("{indent}x{i}: 1\n")
        })
    };

    let mut out = vec![
        Input {
            name: "featureGates: unknown keys (YAML)",
            bytes: block("featureGates", &|i| format!("  G{i:06}: true\n")),
        },
        Input {
            name: "featureGates: unknown keys (YAML, CRLF: full parser)",
            bytes: crlf(yaml(
                shape,
                "featureGates:\n",
                "",
                limit - limit / 12,
                |i| format!("  G{i:06}: true\n"),
            )),
        },
        Input {
            name: "evictionHard: unknown signals (YAML)",
            bytes: block("evictionHard", &|i| format!("  s{i:06}: 1Mi\n")),
        },
        Input {
            name: "evictionSoft, grace periods, minimum reclaim: unknown signals",
            bytes: quarter(
                &[
                    "evictionSoft",
                    "evictionSoftGracePeriod",
                    "evictionMinimumReclaim",
                    "systemReserved",
                ],
                &|i| format!("  s{i:06}: 1m\n"),
            ),
        },
        Input {
            name: "kubeReserved, qosReserved: unknown resources",
            bytes: quarter(&["kubeReserved", "qosReserved"], &|i| {
                format!("  r{i:06}: \"1\"\n")
            }),
        },
        Input {
            name: "registerWithTaints: invalid taints",
            bytes: block("registerWithTaints", &|i| {
                format!("- {{key: -k{i}, effect: Bad}}\n")
            }),
        },
        Input {
            name: "enforceNodeAllocatable: distinct invalid values",
            bytes: block("enforceNodeAllocatable", &|i| format!("- x{i}\n")),
        },
        Input {
            name: "enforceNodeAllocatable: one value repeated",
            bytes: block("enforceNodeAllocatable", &|_| "- pods\n".to_string()),
        },
        Input {
            name: "tlsCipherSuites: unknown suites",
            bytes: block("tlsCipherSuites", &|i| format!("- TLS_{i}\n")),
        },
        Input {
            name: "tlsCurvePreferences: distinct values",
            bytes: block("tlsCurvePreferences", &|i| format!("- {}\n", i % 65535 + 1)),
        },
        Input {
            name: "allowedUnsafeSysctls: invalid patterns",
            bytes: block("allowedUnsafeSysctls", &|i| format!("- Bad{i}\n")),
        },
        Input {
            name: "reservedMemory: distinct NUMA nodes, bad limits",
            bytes: block("reservedMemory", &|i| {
                format!("- numaNode: {i}\n  limits: {{cpu: \"0\"}}\n")
            }),
        },
        Input {
            name: "logging.vmodule: invalid items",
            bytes: yaml(
                shape,
                "logging:\n  format: json\n  vmodule:\n",
                "",
                limit,
                |i| format!("  - {{filePattern: \"a=,{i}\", verbosity: 1}}\n"),
            ),
        },
        Input {
            name: "preloadedImagesVerificationAllowlist: invalid patterns",
            bytes: yaml(
                shape,
                "imagePullCredentialsVerificationPolicy: NeverVerifyAllowlistedImages\n\
                 preloadedImagesVerificationAllowlist:\n",
                "",
                limit,
                |i| format!("- Bad*{i}\n"),
            ),
        },
        Input {
            name: "unknown fields",
            bytes: yaml(shape, "", "", limit, |i| format!("maxPodz{i}: 1\n")),
        },
        Input {
            name: "duplicate keys: every key twice",
            bytes: yaml(shape, "", "", limit, |_| "maxPods: 1\n".to_string()),
        },
        Input {
            name: "duplicate keys: one repeat after 40,000 distinct keys",
            bytes: yaml(
                shape,
                "featureGates:\n",
                &shape.lines("  G000000: true\n"),
                limit,
                |i| format!("  G{i:06}: true\n"),
            ),
        },
        Input {
            name: "deep nesting (60 levels), then many keys",
            bytes: deep(60, "k"),
        },
        Input {
            name: "30 levels of 1,000-character keys, then many keys (YAML)",
            bytes: deep(30, &"k".repeat(1000)),
        },
        Input {
            name: "tlsCipherSuites: one flow list on one line (YAML)",
            bytes: flow_line(shape, "tlsCipherSuites", "", limit, |i| format!("T{i}")),
        },
        Input {
            name: "tlsCipherSuites: one non-ASCII flow list on one line (YAML)",
            bytes: flow_line(shape, "tlsCipherSuites", "", limit, |i| format!("é{i}")),
        },
        Input {
            name: "tlsCipherSuites: one flow list on one line (YAML, full parser)",
            bytes: flow_line(shape, "tlsCipherSuites", "\t", limit, |i| format!("T{i}")),
        },
    ];
    if shape == Shape::Kubelet {
        out.extend(json_inputs(limit));
    }
    out.retain(|input| !input.bytes.is_empty());
    out
}

fn json_inputs(limit: usize) -> Vec<Input> {
    vec![
        Input {
            name: "featureGates: unknown keys (JSON)",
            bytes: json_object("featureGates", limit, |i| format!("\"G{i:06}\": true")),
        },
        Input {
            name: "evictionHard: unknown signals (JSON)",
            bytes: json_object("evictionHard", limit, |i| format!("\"s{i:06}\": \"1Mi\"")),
        },
        Input {
            name: "featureGates: unknown keys, minified JSON on one line",
            bytes: {
                let head = format!("{JSON_HEAD}featureGates\": {{");
                fill(&head, "}}", limit, |i| {
                    format!("{}\"G{i:06}\":true", if i == 0 { "" } else { "," })
                })
            },
        },
        Input {
            name: "one key of 512 KiB, then many keys under it (JSON)",
            bytes: {
                let head = format!("{JSON_HEAD}{}\": {{", "k".repeat(limit / 2));
                fill(&head, "}}", limit, |i| {
                    format!("{}\"{i}\":1", if i == 0 { "" } else { "," })
                })
            },
        },
        // YAML refuses keys over 1,024 characters; JSON takes any.
        Input {
            name: "one unknown key of 1 MiB (JSON)",
            bytes: format!(
                "{JSON_HEAD}{}\": 1}}\n",
                "maxPodz".repeat((limit - JSON_HEAD.len() - 8) / 7)
            )
            .into_bytes(),
        },
        Input {
            name: "one unknown feature gate of 1 MiB (JSON)",
            bytes: format!(
                "{JSON_HEAD}featureGates\": {{\"{}\": true}}}}\n",
                "G".repeat(limit - JSON_HEAD.len() - 32)
            )
            .into_bytes(),
        },
    ]
}

/// What deciding an input gave: the number of errors found and what a person reads.
pub struct Decided {
    pub errors: usize,
    pub output: String,
}

/// The inputs of `shape` the environment asks for (`WORST_BYTES`, `WORST_ONLY`), after
/// `first`.
pub fn selected(shape: Shape, max: usize, first: Option<Input>) -> Vec<Input> {
    let limit = std::env::var("WORST_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(max)
        .min(max);
    let only = std::env::var("WORST_ONLY").unwrap_or_default();
    let all: Vec<Input> = first.into_iter().chain(inputs(shape, limit)).collect();
    for input in &all {
        assert!(input.bytes.len() <= max, "{} is over the limit", input.name);
    }
    all.into_iter()
        .filter(|i| i.name.contains(only.as_str()))
        .collect()
}

/// Time this thread has spent on a CPU (from the scheduler's statistics), so that the
/// figures hold on a machine shared with other work; `None` where /proc does not say.
pub fn thread_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = stat.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Prints a row per input: its size, the errors found, the lines a person reads, and the
/// slowest of three runs of `decide` in wall time and in this thread's CPU time; `detail`
/// adds a line under a row.
pub fn table(
    inputs: &[Input],
    decide: impl Fn(&Input) -> Decided,
    detail: impl Fn(&Input) -> Option<String>,
) {
    println!(
        "{:<62} {:>9} {:>7} {:>6} {:>10} {:>10}",
        "input", "bytes", "errors", "lines", "wall", "cpu"
    );
    let (mut worst, mut worst_cpu) = (Duration::ZERO, Duration::ZERO);
    for input in inputs {
        let (mut slowest, mut slowest_cpu) = (Duration::ZERO, Duration::ZERO);
        let mut decided = None;
        for _ in 0..3 {
            let cpu = thread_cpu();
            let start = Instant::now();
            let d = decide(black_box(input));
            slowest = slowest.max(start.elapsed());
            if let (Some(before), Some(after)) = (cpu, thread_cpu()) {
                slowest_cpu = slowest_cpu.max(after.saturating_sub(before));
            }
            decided = Some(d);
        }
        worst = worst.max(slowest);
        worst_cpu = worst_cpu.max(slowest_cpu);
        let d = decided.unwrap_or(Decided {
            errors: 0,
            output: String::new(),
        });
        println!(
            "{:<62} {:>9} {:>7} {:>6} {:>8.1}ms {:>8.1}ms",
            input.name,
            input.bytes.len(),
            d.errors,
            d.output.lines().count(),
            ms(slowest),
            ms(slowest_cpu)
        );
        if let Some(text) = detail(input) {
            println!("    {text}");
        }
        if std::env::var_os("WORST_SHOW").is_some() {
            for line in d.output.lines().take(2) {
                println!("    {}", line.chars().take(160).collect::<String>());
            }
        }
    }
    println!(
        "slowest input: {:.1} ms wall, {:.1} ms CPU",
        ms(worst),
        ms(worst_cpu)
    );
}

/// Criterion over `inputs` in the group `group`, `run` deciding one input, unless
/// `WORST_TABLE_ONLY` asks for the table alone.
pub fn criterion(group: &str, inputs: &[Input], run: impl Fn(&Input) -> Decided) {
    if std::env::var_os("WORST_TABLE_ONLY").is_some() {
        return;
    }
    let mut c = criterion::Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    let mut g = c.benchmark_group(group);
    for input in inputs {
        g.throughput(criterion::Throughput::Bytes(input.bytes.len() as u64));
        g.bench_function(input.name, |b| b.iter(|| run(black_box(input))));
    }
    g.finish();
    c.final_summary();
}
