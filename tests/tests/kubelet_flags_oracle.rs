//! core's flags against the kubelet's own v1.36 flag code (issue 14), with
//! `upstream/bin/kubelet-oracle` (built by `upstream/build.sh`):
//!
//! - the flag table: every flag the kubelet registers is in core's table with the same
//!   shorthand, group, value parser, need of a value, deprecation mark and (config
//!   flags) the field it sets, found by the oracle parsing the flag over the defaults;
//!   and every flag of core's table is the kubelet's;
//! - command lines: 3,000 seeded cases drawn from the whole table (valid, boundary and
//!   invalid values, every spelling pflag reads, repeats, misspellings) given to core
//!   and to the kubelet's start-up steps must agree (`oracle::compare`: the flags parse
//!   or not, the verdict, the errors, the effective config field by field).
//!
//! Skipped without the oracle unless KUBELET_GITOPS_E2E_REQUIRE is set (CI).

use std::path::PathBuf;
use std::time::Instant;

use kubelet_gitops_e2e::oracle;
use kubelet_gitops_e2e::oracle_flags::{compare_flags, generate_flag_cases, upstream_flags};

fn oracle_bin() -> Option<PathBuf> {
    oracle::oracle_bin_or_skip("kubelet_flags_oracle")
}

#[test]
fn the_flag_table_is_the_kubelets_flag_set() {
    let Some(bin) = oracle_bin() else {
        return;
    };
    let upstream = upstream_flags(&bin).expect("the oracle lists the kubelet's flags");
    let config = upstream.iter().filter(|f| f.group == "config").count();
    let with_field = upstream
        .iter()
        .filter(|f| f.group == "config" && f.fields.len() == 1)
        .count();
    eprintln!(
        "the kubelet registers {} flags, {config} of them config flags ({with_field} setting one field each)",
        upstream.len()
    );
    let problems = compare_flags(&upstream, kubelet_gitops_core::flags::FLAGS);
    assert!(
        problems.is_empty(),
        "core's flag table differs from the kubelet's flag set in {} ways:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn generated_command_lines_agree_with_the_kubelet() {
    let Some(bin) = oracle_bin() else {
        return;
    };
    const CASES: usize = 3_000;
    const SEED: u64 = 14;
    let cases = generate_flag_cases(SEED, CASES);
    let started = Instant::now();
    let answers = oracle::ask(&bin, &cases).expect("the oracle answers");
    let oracle_time = started.elapsed();
    let started = Instant::now();
    let mut report = Vec::new();
    let mut refused = 0;
    for (case, answer) in cases.iter().zip(&answers) {
        if answer.stage != "ok" {
            refused += 1;
        }
        let problems = oracle::compare(case, answer);
        if problems.is_empty() {
            continue;
        }
        report.push(format!(
            "{}\n  args: {:?}\n  config: {:?}\n  {}",
            case.name,
            case.args,
            case.config,
            problems.join("\n  ")
        ));
    }
    eprintln!(
        "{CASES} flag cases (seed {SEED}), {refused} refused by the kubelet: oracle {:.1}s, core {:.1}s",
        oracle_time.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        report.is_empty(),
        "{} of {CASES} flag cases disagree with the kubelet (seed {SEED}):\n{}",
        report.len(),
        report.join("\n")
    );
}
