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
use serde_json::{Value, json};

use crate::E2eError;

mod generate;

pub use generate::{Kind, generate};

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

/// [`oracle_bin`] for a test named `test`: `None` (with a `SKIPPED` line) when it is
/// missing, unless the upstream binaries are required (CI), where that is a failure.
pub fn oracle_bin_or_skip(test: &str) -> Option<PathBuf> {
    match oracle_bin() {
        Ok(bin) => Some(bin),
        Err(e) => {
            assert!(
                !crate::required(),
                "{e} ({} is set, so this is a failure)",
                crate::REQUIRE_ENV
            );
            eprintln!("{test}: SKIPPED: {e}");
            None
        }
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

/// [`ask`], with the cases split among `jobs` oracle processes run at once; the answers
/// in the cases' order.
pub fn ask_parallel(
    bin: &std::path::Path,
    cases: &[Case],
    jobs: usize,
) -> Result<Vec<Answer>, E2eError> {
    let jobs = jobs.max(1);
    let chunk = cases.len().div_ceil(jobs).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = cases
            .chunks(chunk)
            .map(|part| scope.spawn(move || ask(bin, part)))
            .collect();
        let mut answers = Vec::with_capacity(cases.len());
        for h in handles {
            let part = h.join().map_err(|_| E2eError::Unexpected {
                what: "kubelet-oracle batch".into(),
                message: "a thread asking the oracle panicked".into(),
            })??;
            answers.extend(part);
        }
        Ok(answers)
    })
}

/// How many oracle processes and comparison threads to use: the machine's CPUs.
pub fn parallelism() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}

/// Each case's disagreements ([`compare`]), computed on `jobs` threads; in order.
pub fn compare_all(cases: &[Case], answers: &[Answer], jobs: usize) -> Vec<Vec<String>> {
    let chunk = cases.len().div_ceil(jobs.max(1)).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = cases
            .chunks(chunk)
            .zip(answers.chunks(chunk))
            .map(|(c, a)| {
                scope.spawn(move || {
                    c.iter()
                        .zip(a)
                        .map(|(c, a)| compare(c, a))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    })
}

/// Files core refuses and the kubelet reads, on purpose (docs/upstream.md): a marker of
/// core's error, and why.
pub const DELIBERATE: &[(&str, &str)] = &[
    (
        "a second YAML document starts here",
        "the kubelet reads the first document of a file and silently drops the rest; core refuses a file with more than one, which is never what its author meant",
    ),
    (
        "!!binary is not supported",
        "the kubelet's YAML-to-JSON conversion turns a !!binary scalar into its decoded bytes as a string; core refuses the tag rather than guess",
    ),
];

/// Which deliberate difference `case` falls under, if any (for the counts): `strict`
/// (unknown or duplicate fields the kubelet only warns about or never sees, in the file
/// or a drop-in) or a [`DELIBERATE`] marker.
pub fn deliberate(case: &Case, answer: &Answer) -> Option<&'static str> {
    if answer.strict_error.is_some() || !answer.drop_in_strict_errors.is_empty() {
        return Some("unknown or duplicate fields");
    }
    let file = case.config.as_deref()?;
    let name = answer.config_path.as_deref().unwrap_or("config.yaml");
    let message =
        match kubelet_gitops_core::decode::decode_kubelet_configuration(name, file.as_bytes()) {
            Ok(_) => return None,
            Err(e) => e.to_string(),
        };
    DELIBERATE
        .iter()
        .find(|(marker, _)| message.contains(marker))
        .map(|(marker, _)| *marker)
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
            // The kubelet refuses them too: at its parse, or by panicking on them (an IP
            // flag set after an empty one).
            return if matches!(answer.stage.as_str(), "flags" | "panic") {
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
    // The other deliberate differences: files core refuses that the kubelet reads.
    if let Err(e) = &built {
        let message = e.to_string();
        if DELIBERATE
            .iter()
            .any(|(marker, _)| message.contains(marker))
        {
            return Vec::new();
        }
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

/// `case` made smaller while it still disagrees: its lines of the config (each top-level
/// field, with what is indented under it), its flags and its drop-ins left out one at a
/// time, as long as one can go; each round one oracle call on every candidate.
pub fn shrink(bin: &std::path::Path, case: &Case) -> Case {
    let mut best = case.clone();
    for _ in 0..32 {
        let candidates = smaller(&best);
        if candidates.is_empty() {
            break;
        }
        let Ok(answers) = ask(bin, &candidates) else {
            break;
        };
        match candidates
            .iter()
            .zip(&answers)
            .find(|(c, a)| !compare(c, a).is_empty())
        {
            Some((c, _)) => best = c.clone(),
            None => break,
        }
    }
    best
}

/// Every case one piece smaller than `case`.
fn smaller(case: &Case) -> Vec<Case> {
    let mut out = Vec::new();
    if let Some(config) = &case.config {
        let (head, body) = match config.strip_prefix(HEAD) {
            Some(body) => (HEAD, body),
            None => ("", config.as_str()),
        };
        let mut fields: Vec<String> = Vec::new();
        for line in body.lines() {
            match fields.last_mut() {
                Some(last) if line.starts_with([' ', '\t']) || line.is_empty() => {
                    last.push('\n');
                    last.push_str(line);
                }
                _ => fields.push(line.to_string()),
            }
        }
        for i in 0..fields.len() {
            let rest: Vec<&str> = fields
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, f)| f.as_str())
                .collect();
            let mut text = String::from(head);
            for f in rest {
                text.push_str(f);
                text.push('\n');
            }
            out.push(Case {
                config: Some(text),
                ..case.clone()
            });
        }
    }
    for i in 0..case.args.len() {
        let mut c = case.clone();
        c.args.remove(i);
        out.push(c);
    }
    for i in 0..case.drop_ins.len() {
        let mut c = case.clone();
        c.drop_ins.remove(i);
        out.push(c);
    }
    out
}

/// A disagreement as a report: the case, what differs, and how to see the kubelet's side
/// by hand.
pub fn reproducer(case: &Case, answer: &Answer, problems: &[String]) -> String {
    let mut out = format!("{}\n  {}", case.name, problems.join("\n  "));
    let mut command = String::from("upstream/bin/kubelet-oracle effective");
    if case.config.is_some() {
        command.push_str(" --config=config.yaml");
    }
    if !case.drop_ins.is_empty() {
        command.push_str(" --config-dir=conf.d");
    }
    for a in &case.args {
        command.push(' ');
        command.push_str(&shell_word(a));
    }
    out.push_str(&format!(
        "\n  the kubelet: stage {} {}\n  reproduce with the files below: {command}",
        answer.stage,
        answer.error.as_deref().unwrap_or("")
    ));
    if let Some(c) = &case.config {
        out.push_str(&format!(
            "\n  config.yaml:\n    {}",
            c.trim_end().replace('\n', "\n    ")
        ));
    }
    for (name, text) in &case.drop_ins {
        out.push_str(&format!(
            "\n  conf.d/{name}:\n    {}",
            text.trim_end().replace('\n', "\n    ")
        ));
    }
    out
}

fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_=.,/:<%".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
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
