//! Decode + default + validate of a full KubeletConfiguration, the work `validate`, the
//! reconciler (per pool) and the agent (per apply) do. Target: at least 20,000 configs
//! per second on one core. Run: `cargo bench -p kubelet-gitops-core --bench pipeline`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use kubelet_gitops_core::{decode, defaults, effective, flags, validation};

const FULL: &str = include_str!("../tests/data/full.yaml");

fn pipeline(c: &mut Criterion) {
    let host = validation::HostInfo::default();
    // The fixture must be valid, or the benchmark measures the error path.
    let (cfg, _) = decode::decode_kubelet_configuration("full.yaml", FULL.as_bytes())
        .expect("full.yaml decodes");
    let errors = validation::validate(&defaults::defaulted(&cfg), &host);
    assert!(errors.is_empty(), "full.yaml must be valid: {errors:?}");

    let mut g = c.benchmark_group("kubelet-config");
    g.throughput(Throughput::Elements(1));
    g.bench_function("decode", |b| {
        b.iter(|| decode::decode_kubelet_configuration("full.yaml", FULL.as_bytes()).unwrap())
    });
    g.bench_function("decode+default+validate", |b| {
        b.iter(|| {
            let (cfg, _) =
                decode::decode_kubelet_configuration("full.yaml", FULL.as_bytes()).unwrap();
            let cfg = defaults::defaulted(&cfg);
            validation::validate(&cfg, &host)
        })
    });
    let args: Vec<String> = [
        "--max-pods=64",
        "--node-ip=10.0.0.5",
        "--system-reserved=cpu=1,memory=2Gi",
        "--v=2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let kf = flags::KubeletFlags::parse(&args).unwrap();
    g.bench_function("effective(file+flags)+validate", |b| {
        b.iter(|| {
            let eff = effective::effective(
                Some(effective::Source::new("full.yaml", FULL.as_bytes())),
                &[],
                Some(&kf),
            )
            .unwrap();
            validation::validate(&eff.config, &host)
        })
    });
    g.finish();
}

criterion_group!(benches, pipeline);
criterion_main!(benches);
