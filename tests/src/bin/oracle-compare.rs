//! `oracle-compare [--seed N] [--count N]`: core against the kubelet's own v1.36 code on
//! generated cases (see `kubelet_gitops_e2e::oracle`), every disagreement printed with
//! its case, then the counts and the time each side took. Needs `upstream/build.sh`'s
//! `kubelet-oracle`. Exit code 1 when any case disagrees.

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use kubelet_gitops_e2e::oracle;

#[derive(Parser)]
#[command(about = "Compare core with the kubelet's own code on generated cases")]
struct Args {
    /// The generator's seed.
    #[arg(long, default_value_t = 14)]
    seed: u64,
    /// How many cases.
    #[arg(long, default_value_t = 2_000)]
    count: usize,
    /// Make each disagreeing case as small as it goes before printing it (asks the
    /// oracle again for each).
    #[arg(long)]
    shrink: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let run = || -> Result<usize, kubelet_gitops_e2e::E2eError> {
        let bin = oracle::oracle_bin()?;
        let defaults = oracle::defaults(&bin)?;
        let cases = oracle::generate(args.seed, args.count, &defaults);
        let t = Instant::now();
        let answers = oracle::ask_parallel(&bin, &cases, oracle::parallelism())?;
        let oracle_wall = t.elapsed();
        let kubelet_nanos: u64 = answers.iter().map(|a| a.nanos).sum();
        let t = Instant::now();
        let mut disagreeing = 0;
        let all = oracle::compare_all(&cases, &answers, oracle::parallelism());
        for ((case, answer), problems) in cases.iter().zip(&answers).zip(&all) {
            if problems.is_empty() {
                continue;
            }
            disagreeing += 1;
            if args.shrink {
                let small = oracle::shrink(&bin, case);
                let answer = oracle::ask(&bin, std::slice::from_ref(&small))?.remove(0);
                let problems = oracle::compare(&small, &answer);
                println!("{}\n", oracle::reproducer(&small, &answer, &problems));
            } else {
                println!("{}\n", oracle::reproducer(case, answer, problems));
            }
        }
        let core_time = t.elapsed();
        let mut deliberate = std::collections::BTreeMap::new();
        for (case, answer) in cases.iter().zip(&answers) {
            if let Some(kind) = oracle::deliberate(case, answer) {
                *deliberate.entry(kind).or_insert(0) += 1;
            }
        }
        println!("deliberate differences (agreeing by docs/upstream.md): {deliberate:?}");
        println!(
            "\nseed {}: {} cases, {} disagree; the kubelet's steps {:.1} ms/case (oracle wall {:.1}s), core's effective+validate+compare {:.3} ms/case (on all CPUs)",
            args.seed,
            cases.len(),
            disagreeing,
            kubelet_nanos as f64 / 1e6 / cases.len() as f64,
            oracle_wall.as_secs_f64(),
            core_time.as_secs_f64() * 1e3 / cases.len() as f64
        );
        Ok(disagreeing)
    };
    match run() {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
