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
}

fn main() -> ExitCode {
    let args = Args::parse();
    let run = || -> Result<usize, kubelet_gitops_e2e::E2eError> {
        let bin = oracle::oracle_bin()?;
        let defaults = oracle::defaults(&bin)?;
        let cases = oracle::generate(args.seed, args.count, &defaults);
        let t = Instant::now();
        let answers = oracle::ask(&bin, &cases)?;
        let oracle_wall = t.elapsed();
        let kubelet_nanos: u64 = answers.iter().map(|a| a.nanos).sum();
        let t = Instant::now();
        let mut disagreeing = 0;
        for (case, answer) in cases.iter().zip(&answers) {
            let problems = oracle::compare(case, answer);
            if !problems.is_empty() {
                disagreeing += 1;
                println!("{}\n  {}", case.name, problems.join("\n  "));
                if let Some(c) = &case.config {
                    println!(
                        "  config.yaml:\n    {}",
                        c.trim_end().replace('\n', "\n    ")
                    );
                }
            }
        }
        let core_time = t.elapsed();
        println!(
            "\nseed {}: {} cases, {} disagree; the kubelet's steps {:.1} ms/case (oracle wall {:.1}s), core's effective+validate+compare {:.3} ms/case",
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
