//! The worst inputs under 1 MiB (the most a ConfigMap holds) that we know how to build
//! (`support/worst_inputs.rs`), each decided the way `kubelet-gitops validate` decides a
//! file: decoded strictly, defaulted, validated, and its errors located and formatted for
//! a person (the first of them, and the count of the others).
//!
//! Bound: every input here is decided in under 200 ms on the CI machine (2 cores); see
//! README.md's Benchmarks table for the figures. Decoding and validation are linear in the
//! input, so a bigger error count costs time in proportion, never more.
//!
//! Run: `cargo bench -p kubelet-gitops-core --bench worst`. It first prints one table
//! row per input (its size, the errors found, the lines printed, the slowest of three
//! single runs in wall time and in CPU time, which a busy machine inflates less), then
//! runs criterion. The environment variables of `support/worst_inputs.rs` select and
//! size the inputs; `WORST_STAGES=1` adds the time of each step (decode, default,
//! validate, locate the errors' lines, free).

use std::fmt::Write as _;
use std::time::Instant;

use kubelet_gitops_core::decode::MAX_FILE_BYTES;
use kubelet_gitops_core::effective::{self, Source};
use kubelet_gitops_core::message::{Capped, cap_per_file, more_errors};
use kubelet_gitops_core::validation::{self, HostInfo};

// Shared with the reconciler's `render` bench, which uses other parts of it.
#[path = "support/worst_inputs.rs"]
#[allow(dead_code)]
mod worst_inputs;

use worst_inputs::{Decided, Input, Shape, ms, table};

const FULL: &str = include_str!("../tests/data/full.yaml");

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
    let located = eff.errors_by_line(&errors);
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

fn main() {
    let baseline = Input {
        name: "valid full.yaml (baseline)",
        bytes: FULL.as_bytes().to_vec(),
    };
    let inputs = worst_inputs::selected(Shape::Kubelet, MAX_FILE_BYTES, Some(baseline));
    let stages_wanted = std::env::var_os("WORST_STAGES").is_some();
    table(
        &inputs,
        |input| decide(input.name, &input.bytes),
        |input| stages_wanted.then(|| stages(input.name, &input.bytes)),
    );
    worst_inputs::criterion("decide", &inputs, |input| decide(input.name, &input.bytes));
}
