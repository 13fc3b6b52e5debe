//! The worst inputs under 1 MiB (the most a ConfigMap holds) that we know how to build,
//! each decided the way `kubelet-gitops validate` decides a file: decoded strictly,
//! defaulted, validated, and its errors located and formatted for a person.
//!
//! Bound: every input here is decided in under 200 ms on the CI machine (2 cores); see
//! docs/troubleshooting.md for the figures. Decoding and validation are linear in the
//! input, so a bigger error count costs time in proportion, never more.
//!
//! Run: `cargo bench -p kubelet-gitops-core --bench worst`. It first prints one table
//! row per input (its size, the errors found, the lines printed, the slowest of three
//! single runs in wall time and in CPU time, which a busy machine does not inflate), then
//! runs criterion. `WORST_TABLE_ONLY=1` prints only the table;
//! `WORST_SHOW=1` adds each input's first two lines of output, `WORST_STAGES=1` the time
//! of each step (decode, default, validate, locate the errors' lines, free);
//! `WORST_BYTES=65536` builds smaller inputs (for measuring how time grows with size);
//! `WORST_ONLY=substring` keeps the inputs whose name contains it.

use std::fmt::Write as _;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use kubelet_gitops_core::decode::MAX_FILE_BYTES;
use kubelet_gitops_core::effective::{self, Source};
use kubelet_gitops_core::message::{Capped, cap_per_file, more_errors};
use kubelet_gitops_core::validation::{self, HostInfo, ValidationError};

const HEADER: &str = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";
const FULL: &str = include_str!("../tests/data/full.yaml");

/// One input: a name for the table and its bytes.
struct Input {
    name: &'static str,
    bytes: Vec<u8>,
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

/// Block YAML: the header, `field:`, then an entry per line.
fn yaml_block(field: &str, limit: usize, line: impl Fn(usize) -> String) -> Vec<u8> {
    fill(&format!("{HEADER}{field}:\n"), "", limit, line)
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

fn inputs(limit: usize) -> Vec<Input> {
    let crlf = |bytes: Vec<u8>| {
        String::from_utf8(bytes)
            .unwrap_or_default()
            .replace('\n', "\r\n")
            .into_bytes()
    };
    // YAML refuses keys over 1,024 characters; JSON takes any.
    let long_key = format!(
        "{JSON_HEAD}{}\": 1}}\n",
        "maxPodz".repeat((limit - JSON_HEAD.len() - 8) / 7)
    );
    let long_gate = format!(
        "{JSON_HEAD}featureGates\": {{\"{}\": true}}}}\n",
        "G".repeat(limit - JSON_HEAD.len() - 32)
    );
    let deep_depth = 60;
    let mut deep = String::from(HEADER);
    for d in 0..deep_depth {
        let _ = writeln!(deep, "{}k{d}:", "  ".repeat(d));
    }
    let deep = fill(&deep, "", limit, |i| {
        format!("{}x{i}: 1\n", "  ".repeat(deep_depth))
    });

    vec![
        Input {
            name: "valid full.yaml (baseline)",
            bytes: FULL.as_bytes().to_vec(),
        },
        Input {
            name: "featureGates: unknown keys (YAML)",
            bytes: yaml_block("featureGates", limit, |i| format!("  G{i:06}: true\n")),
        },
        Input {
            name: "featureGates: unknown keys (YAML, CRLF: full parser)",
            bytes: crlf(yaml_block("featureGates", limit - limit / 12, |i| {
                format!("  G{i:06}: true\n")
            })),
        },
        Input {
            name: "featureGates: unknown keys (JSON)",
            bytes: json_object("featureGates", limit, |i| format!("\"G{i:06}\": true")),
        },
        Input {
            name: "evictionHard: unknown signals (YAML)",
            bytes: yaml_block("evictionHard", limit, |i| format!("  s{i:06}: 1Mi\n")),
        },
        Input {
            name: "evictionHard: unknown signals (JSON)",
            bytes: json_object("evictionHard", limit, |i| format!("\"s{i:06}\": \"1Mi\"")),
        },
        Input {
            name: "evictionSoft, grace periods, minimum reclaim: unknown signals",
            bytes: {
                let quarter = (limit - HEADER.len()) / 4;
                let mut out = HEADER.to_string();
                for field in [
                    "evictionSoft",
                    "evictionSoftGracePeriod",
                    "evictionMinimumReclaim",
                    "systemReserved",
                ] {
                    let part = fill(&format!("{field}:\n"), "", quarter, |i| {
                        format!("  s{i:06}: 1m\n")
                    });
                    out.push_str(&String::from_utf8(part).unwrap_or_default());
                }
                out.into_bytes()
            },
        },
        Input {
            name: "kubeReserved, qosReserved: unknown resources",
            bytes: {
                let half = (limit - HEADER.len()) / 2;
                let mut out = HEADER.to_string();
                for field in ["kubeReserved", "qosReserved"] {
                    let part = fill(&format!("{field}:\n"), "", half, |i| {
                        format!("  r{i:06}: \"1\"\n")
                    });
                    out.push_str(&String::from_utf8(part).unwrap_or_default());
                }
                out.into_bytes()
            },
        },
        Input {
            name: "registerWithTaints: invalid taints",
            bytes: yaml_block("registerWithTaints", limit, |i| {
                format!("- {{key: -k{i}, effect: Bad}}\n")
            }),
        },
        Input {
            name: "enforceNodeAllocatable: distinct invalid values",
            bytes: yaml_block("enforceNodeAllocatable", limit, |i| format!("- x{i}\n")),
        },
        Input {
            name: "enforceNodeAllocatable: one value repeated",
            bytes: yaml_block("enforceNodeAllocatable", limit, |_| "- pods\n".to_string()),
        },
        Input {
            name: "tlsCipherSuites: unknown suites",
            bytes: yaml_block("tlsCipherSuites", limit, |i| format!("- TLS_{i}\n")),
        },
        Input {
            name: "tlsCurvePreferences: distinct values",
            bytes: yaml_block("tlsCurvePreferences", limit, |i| {
                format!("- {}\n", i % 65535 + 1)
            }),
        },
        Input {
            name: "allowedUnsafeSysctls: invalid patterns",
            bytes: yaml_block("allowedUnsafeSysctls", limit, |i| format!("- Bad{i}\n")),
        },
        Input {
            name: "reservedMemory: distinct NUMA nodes, bad limits",
            bytes: yaml_block("reservedMemory", limit, |i| {
                format!("- numaNode: {i}\n  limits: {{cpu: \"0\"}}\n")
            }),
        },
        Input {
            name: "logging.vmodule: invalid items",
            bytes: fill(
                &format!("{HEADER}logging:\n  format: json\n  vmodule:\n"),
                "",
                limit,
                |i| format!("  - {{filePattern: \"a=,{i}\", verbosity: 1}}\n"),
            ),
        },
        Input {
            name: "preloadedImagesVerificationAllowlist: invalid patterns",
            bytes: fill(
                &format!(
                    "{HEADER}imagePullCredentialsVerificationPolicy: NeverVerifyAllowlistedImages\n\
                     preloadedImagesVerificationAllowlist:\n"
                ),
                "",
                limit,
                |i| format!("- Bad*{i}\n"),
            ),
        },
        Input {
            name: "unknown top-level fields",
            bytes: fill(HEADER, "", limit, |i| format!("maxPodz{i}: 1\n")),
        },
        Input {
            name: "duplicate keys: every top-level key twice",
            bytes: fill(HEADER, "", limit, |_| "maxPods: 1\n".to_string()),
        },
        Input {
            name: "duplicate keys: one repeat after 40,000 distinct keys",
            bytes: {
                let mut bytes =
                    yaml_block("featureGates", limit - 32, |i| format!("  G{i:06}: true\n"));
                bytes.extend_from_slice(b"  G000000: true\n");
                bytes
            },
        },
        Input {
            name: "deep nesting (60 levels), then many keys",
            bytes: deep,
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
            name: "tlsCipherSuites: one flow list on one line (YAML)",
            bytes: {
                let head = format!("{HEADER}tlsCipherSuites: [");
                fill(&head, "]\n", limit, |i| {
                    format!("{}T{i}", if i == 0 { "" } else { ", " })
                })
            },
        },
        Input {
            name: "tlsCipherSuites: one non-ASCII flow list on one line (YAML)",
            bytes: {
                let head = format!("{HEADER}tlsCipherSuites: [");
                fill(&head, "]\n", limit, |i| {
                    format!("{}é{i}", if i == 0 { "" } else { ", " })
                })
            },
        },
        Input {
            name: "tlsCipherSuites: one flow list on one line (YAML, full parser)",
            bytes: {
                let head = format!("{HEADER}tlsCipherSuites: [\t");
                fill(&head, "]\n", limit, |i| {
                    format!("{}T{i}", if i == 0 { "" } else { ", " })
                })
            },
        },
        Input {
            name: "30 levels of 1,000-character keys, then many keys (YAML)",
            bytes: {
                let mut head = String::from(HEADER);
                for d in 0..30 {
                    let _ = writeln!(head, "{}{}{d}:", "  ".repeat(d), "k".repeat(1000));
                }
                fill(&head, "", limit, |i| {
                    format!("{}x{i}: 1\n", "  ".repeat(30))
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
        Input {
            name: "one unknown key of 1 MiB (JSON)",
            bytes: long_key.into_bytes(),
        },
        Input {
            name: "one unknown feature gate of 1 MiB (JSON)",
            bytes: long_gate.into_bytes(),
        },
    ]
    .into_iter()
    .filter(|input| !input.bytes.is_empty())
    .collect()
}

/// What deciding a file gives: the number of errors and what would be printed.
struct Decided {
    errors: usize,
    output: String,
}

/// What `kubelet-gitops validate` does with one file, printing into a string.
fn decide(name: &str, bytes: &[u8]) -> Decided {
    let eff = match effective::effective(Some(Source::new(name, bytes)), &[], None) {
        Ok(eff) => eff,
        Err(e) => {
            return Decided {
                errors: 1,
                output: format!("{e}\n"),
            };
        }
    };
    let errors = validation::validate(&eff.config, &HostInfo::default());
    let line_of = |err: &ValidationError| {
        eff.file_map
            .as_ref()
            .and_then(|m| m.line_of(&err.field))
            .unwrap_or(1)
    };
    let mut located: Vec<(usize, &ValidationError)> =
        errors.iter().map(|e| (line_of(e), e)).collect();
    located.sort_by_key(|(line, _)| *line);
    let mut output = String::new();
    for item in cap_per_file(&located, |_| name) {
        let _ = match item {
            Capped::Shown((line, err)) => {
                writeln!(output, "{name}:{line}: {}: {}", err.field, err.message)
            }
            Capped::More { file, hidden } => writeln!(output, "{}", more_errors(file, hidden)),
        };
    }
    Decided {
        errors: errors.len(),
        output,
    }
}

/// Time this thread has spent on a CPU (from the scheduler's statistics), so that the
/// figures hold on a machine shared with other work; `None` where /proc does not say.
fn thread_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = stat.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The time of each step of [`decide`] for one input, in milliseconds of wall time.
fn stages(name: &str, bytes: &[u8]) -> String {
    let start = Instant::now();
    let decoded = kubelet_gitops_core::decode::decode_kubelet_configuration(name, bytes);
    let decode = start.elapsed();
    let Ok((mut cfg, map)) = decoded else {
        return format!("decode {:.1}", ms(decode));
    };
    let start = Instant::now();
    kubelet_gitops_core::defaults::set_defaults(&mut cfg);
    let default = start.elapsed();
    let start = Instant::now();
    let errors = validation::validate(&cfg, &HostInfo::default());
    let validate = start.elapsed();
    let start = Instant::now();
    let mut lines: Vec<usize> = errors
        .iter()
        .map(|e| map.line_of(&e.field).unwrap_or(1))
        .collect();
    lines.sort_unstable();
    let locate = start.elapsed();
    let start = Instant::now();
    drop((cfg, map, errors, lines));
    let free = start.elapsed();
    format!(
        "decode {:.1}, default {:.1}, validate {:.1}, locate {:.1}, free {:.1}",
        ms(decode),
        ms(default),
        ms(validate),
        ms(locate),
        ms(free)
    )
}

fn table(inputs: &[Input]) {
    println!(
        "{:<62} {:>9} {:>7} {:>6} {:>10} {:>10}",
        "input", "bytes", "errors", "lines", "wall", "cpu"
    );
    let (mut worst, mut worst_cpu) = (Duration::ZERO, Duration::ZERO);
    for input in inputs {
        // The slowest of three runs, in wall time and in this thread's CPU time.
        let (mut slowest, mut slowest_cpu) = (Duration::ZERO, Duration::ZERO);
        let mut decided = None;
        for _ in 0..3 {
            let cpu = thread_cpu();
            let start = Instant::now();
            let d = decide(input.name, black_box(&input.bytes));
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
        if std::env::var_os("WORST_STAGES").is_some() {
            println!("    {}", stages(input.name, &input.bytes));
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

fn main() {
    let limit = std::env::var("WORST_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(MAX_FILE_BYTES)
        .min(MAX_FILE_BYTES);
    let only = std::env::var("WORST_ONLY").unwrap_or_default();
    let inputs: Vec<Input> = inputs(limit)
        .into_iter()
        .filter(|i| i.name.contains(only.as_str()))
        .collect();
    for input in &inputs {
        assert!(input.bytes.len() <= MAX_FILE_BYTES, "{}", input.name);
    }
    table(&inputs);
    if std::env::var_os("WORST_TABLE_ONLY").is_some() {
        return;
    }
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    let mut g = c.benchmark_group("decide");
    for input in &inputs {
        g.throughput(Throughput::Bytes(input.bytes.len() as u64));
        g.bench_function(input.name, |b| {
            b.iter(|| decide(input.name, black_box(&input.bytes)))
        });
    }
    g.finish();
    c.final_summary();
}
