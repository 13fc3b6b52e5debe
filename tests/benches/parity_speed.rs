//! Speed, side by side (issue 14): the kubelet's own v1.36 code and core decode, default
//! and validate the same generated config files, each on one core, in one run.
//!
//! `cargo bench -p kubelet-gitops-e2e --bench parity_speed [-- --configs N --rounds R
//! --seed S]` (or the environment variables below). The configs are
//! `oracle::generate(seed, configs, ..)`'s files (drop-ins and flags of the cases left
//! out). `kubelet-oracle bench` times the kubelet's decode (strict, else lenient),
//! defaulting and `ValidateKubeletConfiguration` with the config's feature gates, with
//! GOMAXPROCS=1; this process then times core's `decode_kubelet_configuration`,
//! `set_defaults` and `validate` on one thread. Both run one warm-up round, then the
//! rounds counted.
//!
//! Skipped (exit 0) without `upstream/bin/kubelet-oracle` (`upstream/build.sh`), unless
//! `KUBELET_GITOPS_E2E_REQUIRE` is set, which makes that a failure.

use std::hint::black_box;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use kubelet_gitops_core::decode::decode_kubelet_configuration;
use kubelet_gitops_core::defaults::set_defaults;
use kubelet_gitops_core::validation::{HostInfo, validate};
use kubelet_gitops_e2e::{E2eError, oracle};
use serde_json::Value;

#[derive(Parser)]
#[command(about = "configs per second per core: the kubelet's own code and core, same inputs")]
struct Args {
    /// How many generated configs.
    #[arg(long, env = "KUBELET_GITOPS_BENCH_CONFIGS", default_value_t = 5_000)]
    configs: usize,
    /// Timed rounds over every config (after one warm-up round).
    #[arg(long, env = "KUBELET_GITOPS_BENCH_ROUNDS", default_value_t = 5)]
    rounds: u32,
    /// The generator's seed.
    #[arg(long, env = "KUBELET_GITOPS_BENCH_SEED", default_value_t = 14)]
    seed: u64,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

/// One side's figures.
struct Side {
    /// Over every counted round.
    configs_per_second: f64,
    /// In the fastest round: the figure least disturbed by other work on the machine.
    best_configs_per_second: f64,
    valid: u64,
    invalid: u64,
    /// Of `invalid`, how many the decoder refused.
    decode_failed: u64,
    panicked: u64,
    peak_rss_bytes: Option<u64>,
    alloc_bytes_per_config: Option<f64>,
}

/// What core made of one config.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Valid,
    DecodeFailed,
    Invalid,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let bin = match oracle::oracle_bin() {
        Ok(bin) => bin,
        Err(e) if kubelet_gitops_e2e::required() => {
            eprintln!(
                "parity_speed: {e} ({} is set, so this is a failure)",
                kubelet_gitops_e2e::REQUIRE_ENV
            );
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("parity_speed: SKIPPED: {e}");
            return ExitCode::SUCCESS;
        }
    };
    match run(&args, &bin) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("parity_speed: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args, bin: &Path) -> Result<(), E2eError> {
    let Args {
        configs: count,
        rounds,
        seed,
        bench: _,
    } = *args;
    if rounds == 0 {
        return Err(unexpected("--rounds must be at least 1"));
    }
    let defaults = oracle::defaults(bin)?;
    let configs: Vec<String> = oracle::generate(seed, count, &defaults)
        .into_iter()
        .filter_map(|c| c.config)
        .collect();
    eprintln!(
        "parity_speed: {} configs (seed {seed}), {rounds} rounds after a warm-up; the kubelet's code first",
        configs.len()
    );
    let (kubelet, host) = kubelet_side(bin, &configs, rounds)?;
    eprintln!("parity_speed: core");
    let core = core_side(&configs, rounds, &host);
    print_table(configs.len(), rounds, seed, &host, &kubelet, &core);
    Ok(())
}

/// Runs `kubelet-oracle bench --rounds R` on `configs`: its figures, and the host its
/// validation saw.
fn kubelet_side(bin: &Path, configs: &[String], rounds: u32) -> Result<(Side, HostInfo), E2eError> {
    let mut input = String::new();
    for c in configs {
        input.push_str(&serde_json::json!({ "config": c }).to_string());
        input.push('\n');
    }
    let command = format!("{} bench --rounds {rounds}", bin.display());
    let mut child = Command::new(bin)
        .args(["bench", "--rounds", &rounds.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| E2eError::Spawn {
            program: bin.display().to_string(),
            source,
        })?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| unexpected("kubelet-oracle has no stdin"))?;
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child
        .wait_with_output()
        .map_err(E2eError::io("waiting for kubelet-oracle bench"))?;
    writer
        .join()
        .map_err(|_| unexpected("the writer panicked"))?
        .map_err(E2eError::io("writing the configs to kubelet-oracle bench"))?;
    if !out.status.success() {
        return Err(E2eError::Command {
            command,
            detail: format!(
                "exited with {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    let v: Value = serde_json::from_slice(&out.stdout).map_err(|e| E2eError::Command {
        command: command.clone(),
        detail: format!(
            "printed no JSON object ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        ),
    })?;
    let n = |k: &str| v[k].as_u64().unwrap_or(0);
    if n("configs") != configs.len() as u64 {
        return Err(E2eError::Command {
            command,
            detail: format!("read {} configs of {}", n("configs"), configs.len()),
        });
    }
    let side = Side {
        configs_per_second: v["configsPerSecond"].as_f64().unwrap_or(0.0),
        best_configs_per_second: v["bestConfigsPerSecond"].as_f64().unwrap_or(0.0),
        valid: n("valid"),
        invalid: n("invalid"),
        decode_failed: n("decodeFailed"),
        panicked: n("panicked"),
        peak_rss_bytes: v["peakRssBytes"].as_u64().filter(|&b| b > 0),
        alloc_bytes_per_config: v["allocBytesPerConfig"].as_f64(),
    };
    let host = HostInfo {
        cgroup_v2: v["host"]["cgroupV2"].as_bool(),
    };
    Ok((side, host))
}

/// Core's decode + defaults + validation of every config, `rounds` times after a warm-up
/// round, on this thread.
fn core_side(configs: &[String], rounds: u32, host: &HostInfo) -> Side {
    let mut verdicts = vec![Verdict::Valid; configs.len()];
    let round = |verdicts: &mut [Verdict]| {
        for (c, v) in configs.iter().zip(verdicts.iter_mut()) {
            *v = black_box(decode_default_validate(black_box(c.as_bytes()), host));
        }
    };
    round(&mut verdicts);
    let mut elapsed = Duration::ZERO;
    let mut best = Duration::MAX;
    for _ in 0..rounds {
        let start = Instant::now();
        round(&mut verdicts);
        let took = start.elapsed();
        elapsed += took;
        best = best.min(took);
    }
    let count = |want: Verdict| verdicts.iter().filter(|v| **v == want).count() as u64;
    let decode_failed = count(Verdict::DecodeFailed);
    Side {
        configs_per_second: per_second(configs.len() as u64 * u64::from(rounds), elapsed),
        best_configs_per_second: per_second(configs.len() as u64, best),
        valid: count(Verdict::Valid),
        invalid: decode_failed + count(Verdict::Invalid),
        decode_failed,
        panicked: 0,
        peak_rss_bytes: peak_rss(),
        alloc_bytes_per_config: None,
    }
}

fn decode_default_validate(bytes: &[u8], host: &HostInfo) -> Verdict {
    match decode_kubelet_configuration("config.yaml", bytes) {
        Err(_) => Verdict::DecodeFailed,
        Ok((mut cfg, _)) => {
            set_defaults(&mut cfg);
            if validate(&cfg, host).is_empty() {
                Verdict::Valid
            } else {
                Verdict::Invalid
            }
        }
    }
}

fn per_second(n: u64, elapsed: Duration) -> f64 {
    n as f64 / elapsed.as_secs_f64().max(f64::MIN_POSITIVE)
}

/// This process's peak resident set (VmHWM), when /proc says.
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    let kb: u64 = line.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kb * 1024)
}

fn print_table(
    configs: usize,
    rounds: u32,
    seed: u64,
    host: &HostInfo,
    kubelet: &Side,
    core: &Side,
) {
    let mib = |b: Option<u64>| {
        b.map_or("-".to_string(), |b| {
            format!("{:.1} MiB", b as f64 / 1048576.0)
        })
    };
    let alloc = |b: Option<f64>| b.map_or("-".to_string(), |b| format!("{:.1} KiB", b / 1024.0));
    println!();
    println!(
        "decode + default + validate, {configs} generated configs (seed {seed}), {rounds} rounds after a warm-up, one core each, cgroup v2: {}",
        host.cgroup_v2
            .map_or("unknown".to_string(), |v| v.to_string())
    );
    println!(
        "{:<22} {:>15} {:>11} {:>10} {:>6} {:>8} {:>11} {:>9} {:>10} {:>13}",
        "",
        "configs/s/core",
        "best round",
        "µs/config",
        "valid",
        "invalid",
        "decode err",
        "panicked",
        "peak RSS",
        "alloc/config",
    );
    for (name, side) in [("kubelet v1.36.3 (Go)", kubelet), ("core (Rust)", core)] {
        println!(
            "{:<22} {:>15.0} {:>11.0} {:>10.1} {:>6} {:>8} {:>11} {:>9} {:>10} {:>13}",
            name,
            side.configs_per_second,
            side.best_configs_per_second,
            1e6 / side.configs_per_second.max(f64::MIN_POSITIVE),
            side.valid,
            side.invalid,
            side.decode_failed,
            side.panicked,
            mib(side.peak_rss_bytes),
            alloc(side.alloc_bytes_per_config),
        );
    }
    let ratio = |c: f64, k: f64| c / k.max(f64::MIN_POSITIVE);
    println!(
        "core / kubelet: {:.1}x the kubelet's configs per second ({:.1}x in the best rounds)",
        ratio(core.configs_per_second, kubelet.configs_per_second),
        ratio(
            core.best_configs_per_second,
            kubelet.best_configs_per_second
        ),
    );
    println!(
        "µs/config over every round; decode err: of the invalid, those refused in decoding; alloc/config: heap allocated (Go's MemStats)"
    );
    println!(
        "verdicts differ by design: core refuses what the kubelet decodes only leniently (unknown or duplicate fields) and a file naming an unknown feature gate (the kubelet panics), and its validate also makes the checks the kubelet makes later in its start"
    );
}

fn unexpected(message: &str) -> E2eError {
    E2eError::Unexpected {
        what: "parity_speed".into(),
        message: message.into(),
    }
}
