//! The reconciler deciding a commit whose one pool file is one of the worst inputs under
//! 1 MiB (core's `benches/support/worst_inputs.rs`, wrapped in `pools/big.yaml`), and
//! commits whose settings and pool are both large (a long `forbiddenPoolFields` against a
//! pool setting many fields; many globs): the commit rendered and validated
//! (`render_repo`), and its rejection formatted as `run` logs it (the error count and the
//! first errors of each file).
//!
//! Bound: every input decided in under 200 ms (wall, release build) on the project's
//! 2-core machine, as core's `worst` bench, but one. Measured there (the slowest of three
//! runs): idle, 12 to 194 ms for every input but one; shared with other builds, up to
//! 202 ms. `tlsCipherSuites: one flow list on one line (YAML, full parser)` takes 219 ms
//! idle (170 to 298 ms under load), so its bound is 250 ms idle: half of it is core's
//! full YAML parser and most of the rest core's validation and
//! source map (the same input takes 134 to 183 ms in core's `worst` bench). The globs of
//! `kubelet-gitops.yaml` and of `--include`/`--exclude` are bounded (`MAX_GLOBS`, 256 per
//! list; `MAX_GLOB_BYTES`, 256 bytes each) because a glob set compiles in time that grows
//! with it: 30,000 globs in 1 MiB took 1.1 to 1.5 s, 1,000 took 0.19 s, 256 take 45 to
//! 80 ms; a longer list is refused, before anything is compiled, in 26 to 44 ms (the time
//! to decode the 1 MiB settings file).
//!
//! Run: `cargo bench -p reconciler --bench render`. Prints a table (the slowest of three
//! runs per input, wall and CPU time), then runs criterion; the same environment
//! variables as core's `worst` bench select and size the inputs.

// Shared with core's `worst` bench, which uses other parts of it.
#[path = "../../core/benches/support/worst_inputs.rs"]
#[allow(dead_code)]
mod worst_inputs;

use std::collections::HashMap;

use kubelet_gitops_core::decode::MAX_FILE_BYTES;
use kubelet_gitops_core::message::cap_per_file;
use reconciler::render::{MAX_GLOB_BYTES, MAX_GLOBS, RenderOptions, render_repo};
use reconciler::source::MemorySource;
use worst_inputs::{Decided, Input, Shape, table};

const POOL: &str = "pools/big.yaml";
const SETTINGS: &str = "kubelet-gitops.yaml";

/// `kubelet-gitops.yaml` with a list under `spec` of one item per line, at most `count`
/// items, within 1 MiB.
fn settings(list: &str, count: usize, item: impl Fn(usize) -> String) -> Vec<u8> {
    let mut out =
        format!("apiVersion: kubelet-gitops.io/v1alpha1\nkind: RepoSettings\nspec:\n{list}\n");
    for i in 0..count {
        let next = item(i);
        if out.len() + next.len() > MAX_FILE_BYTES {
            break;
        }
        out.push_str(&next);
    }
    out.into_bytes()
}

/// Commits of two large files, each within 1 MiB: the settings, and the pool of `bytes`.
fn two_file_cases() -> Vec<(Input, Vec<u8>)> {
    let glob = |i: usize| format!("    - \"pools/p{i}*/**/x?.yaml\"\n");
    // As many wildcards, classes and alternatives as fit in the longest glob allowed.
    let long_glob = |i: usize| {
        let mut g = format!("pools/p{i:03}");
        while g.len() + 16 + 8 <= MAX_GLOB_BYTES {
            g.push_str("/*a?[bc]{d,e}/**");
        }
        g.push_str("/x?.yaml");
        format!("    - \"{g}\"\n")
    };
    let gates = |n: usize| {
        let mut pool = String::from(
            "apiVersion: kubelet-gitops.io/v1alpha1\nkind: NodePool\nmetadata:\n  name: big\n\
             spec:\n  nodeSelector: {}\n  kubelet:\n    featureGates:\n",
        );
        for i in 0..n {
            pool.push_str(&format!("      G{i:06}: true\n"));
        }
        pool.into_bytes()
    };
    vec![
        (
            Input {
                name: "forbiddenPoolFields x featureGates set by the pool",
                bytes: gates(30_000),
            },
            settings("  policy:\n    forbiddenPoolFields:", usize::MAX, |i| {
                format!("    - featureGates.F{i:06}\n")
            }),
        ),
        (
            Input {
                name: "include: 256 globs (the most allowed)",
                bytes: gates(10),
            },
            settings("  include:", MAX_GLOBS, glob),
        ),
        (
            Input {
                name: "include: 256 globs of 256 bytes (the longest allowed)",
                bytes: gates(10),
            },
            settings("  include:", MAX_GLOBS, long_glob),
        ),
        (
            Input {
                name: "include: many globs (refused)",
                bytes: gates(10),
            },
            settings("  include:", usize::MAX, glob),
        ),
    ]
}

/// What `run` does with a fetched commit holding `bytes` as its pool file (and
/// `settings` as its kubelet-gitops.yaml).
fn decide(bytes: &[u8], settings: Option<&[u8]>) -> Decided {
    let mut files = vec![(POOL, bytes.to_vec())];
    if let Some(s) = settings {
        files.push((SETTINGS, s.to_vec()));
    }
    let src = MemorySource::new(files);
    match render_repo(&src, &RenderOptions::default()) {
        Ok(_) => Decided {
            errors: 0,
            output: String::new(),
        },
        Err(errors) => {
            let shown: Vec<String> = cap_per_file(&errors, |e| &e.file)
                .iter()
                .map(ToString::to_string)
                .collect();
            Decided {
                errors: errors.len(),
                output: format!("problems={} errors={shown:?}", errors.len())
                    .replace("\", \"", "\"\n\""),
            }
        }
    }
}

fn main() {
    let valid = Input {
        name: "valid pool (baseline)",
        bytes: b"apiVersion: kubelet-gitops.io/v1alpha1\nkind: NodePool\nmetadata:\n  name: big\n\
                 spec:\n  nodeSelector: {}\n  kubelet:\n    maxPods: 110\n"
            .to_vec(),
    };
    let mut inputs = worst_inputs::selected(Shape::Pool, MAX_FILE_BYTES, Some(valid));
    let only = std::env::var("WORST_ONLY").unwrap_or_default();
    let mut with_settings: HashMap<&str, Vec<u8>> = HashMap::new();
    for (input, settings) in two_file_cases() {
        if input.name.contains(only.as_str()) {
            with_settings.insert(input.name, settings);
            inputs.push(input);
        }
    }
    let run = |input: &Input| {
        decide(
            &input.bytes,
            with_settings.get(input.name).map(Vec::as_slice),
        )
    };
    table(&inputs, run, |_| None);
    worst_inputs::criterion("render", &inputs, run);
}
