//! The reconciler at scale: 5,000 nodes in 50 pools on the simulated API server (no
//! kubelets; a test double plays the agents), the real `kubelet-gitops run` binary as a
//! child process so its CPU time and peak memory are its own.
//!
//! 1. Initial rollout: every pool at maxUnavailable 100%, canary 0.
//! 2. Idle: polls that find no new commit (each one followed by a resync reconcile) must
//!    make zero API writes; their CPU time is measured from the child's
//!    `/proc/<pid>/task/*/schedstat` (nanoseconds on CPU, every thread).
//! 3. One pool (1,000 nodes) changes: exactly one write per node plus the ConfigMap.
//!
//! Run: `cargo bench -p reconciler --bench reconcile`. Prints a table.

#[path = "../tests/integration/support/mod.rs"]
mod support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kubelet_gitops_core::inventory::Inventory;
use kubelet_gitops_core::protocol::DESIRED_CONFIG;
use support::*;

const POOLS: usize = 50;
const NODES: usize = 5_000;
const BIG: usize = 1_000;
const IDLE_POLLS: u64 = 10;
const INTERVAL: &str = "500ms";

/// CPU time of every thread of `pid`, in nanoseconds.
fn cpu_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// A `/proc/<pid>/status` field in kB (VmHWM, VmRSS).
fn status_kb(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix(field)?
                .strip_prefix(':')?
                .trim()
                .trim_end_matches(" kB")
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

fn pool_names() -> Vec<String> {
    (0..POOLS - 1).map(|i| format!("p{i:02}")).collect()
}

/// 4,000 nodes over 49 pools, and 1,000 in pool `big`.
fn inventory() -> Inventory {
    let names = pool_names();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut inv = Inventory::generate(NODES - BIG, &refs);
    let template = inv.nodes[0].clone();
    for i in 0..BIG {
        let mut n = template.clone();
        n.name = format!("big-{i:04}");
        n.labels.insert(POOL_LABEL.into(), "big".into());
        inv.nodes.push(n);
    }
    inv
}

fn write_repo(h: &Harness, big_max_pods: u32) {
    h.repo.write("kubelet-gitops.yaml", &settings_yaml());
    let rollout = "maxUnavailable: 100%, canary: 0";
    for (i, p) in pool_names().iter().enumerate() {
        h.repo.write(
            &format!("pools/{p}.yaml"),
            &pool_yaml(p, p, rollout, &format!("    maxPods: {}\n", 50 + i)),
        );
    }
    h.repo.write(
        "pools/big.yaml",
        &pool_yaml(
            "big",
            "big",
            rollout,
            &format!("    maxPods: {big_max_pods}\n"),
        ),
    );
}

fn spawn_reconciler(h: &Harness, admin: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_kubelet-gitops"))
        .arg("run")
        .args(["--repo-url", &h.repo.url()])
        .args([
            "--kubeconfig",
            &h.sim.kubeconfig_path().display().to_string(),
        ])
        .args([
            "--cache-dir",
            &h.dir.path().join("cache").display().to_string(),
        ])
        .args(["--interval", INTERVAL])
        .args(["--admin-addr", admin])
        .args(["--identity", "bench"])
        .args(["--log", "warn"])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start kubelet-gitops run")
}

async fn metric(admin: std::net::SocketAddr, series: &str) -> f64 {
    let (_, body) = http_get(admin, "/metrics").await;
    sample(&body, series).unwrap_or(0.0)
}

fn row(what: &str, value: String, target: &str) {
    println!("| {what:<58} | {value:>14} | {target:<22} |");
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(bench());
}

async fn bench() {
    let started = Instant::now();
    let mut h = Harness::start(inventory()).await;
    h.start_agent(AgentOptions {
        apply_delay: Duration::from_millis(0),
        ..AgentOptions::default()
    })
    .await;
    write_repo(&h, 100);
    h.repo.commit("50 pools");
    let admin_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port");
    let admin = admin_port.to_string();
    eprintln!("sim with {NODES} nodes up in {:?}", started.elapsed());

    let t = Instant::now();
    let mut child = spawn_reconciler(&h, &admin);
    let pid = child.id();
    eprintln!("kubelet-gitops run is pid {pid}");
    h.wait_nodes("initial rollout", Duration::from_secs(600), |nodes| {
        nodes.iter().all(settled_done)
    })
    .await;
    let initial = t.elapsed();

    // Idle: let the caches settle, then measure whole poll cycles.
    tokio::time::sleep(Duration::from_secs(2)).await;
    h.sim.request_log().reset();
    let polls = "kubelet_gitops_git_polls_total{result=\"unchanged\"}";
    let (p0, c0) = (metric(admin_port, polls).await, cpu_ns(pid));
    let r_sum0 = metric(admin_port, "kubelet_gitops_reconcile_duration_seconds_sum").await;
    let r_cnt0 = metric(
        admin_port,
        "kubelet_gitops_reconcile_duration_seconds_count",
    )
    .await;
    // BENCH_IDLE_POLLS lengthens the idle phase (to attach a profiler to the pid above).
    let idle_polls = std::env::var("BENCH_IDLE_POLLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(IDLE_POLLS);
    // Scraping /metrics costs the reconciler CPU too: only at the start and the end.
    let interval: Duration = INTERVAL
        .parse::<humantime::Duration>()
        .expect("interval")
        .into();
    tokio::time::sleep(interval * idle_polls as u32 + interval / 2).await;
    while metric(admin_port, polls).await < p0 + idle_polls as f64 {
        tokio::time::sleep(interval).await;
    }
    let (p1, c1) = (metric(admin_port, polls).await, cpu_ns(pid));
    let r_sum1 = metric(admin_port, "kubelet_gitops_reconcile_duration_seconds_sum").await;
    let r_cnt1 = metric(
        admin_port,
        "kubelet_gitops_reconcile_duration_seconds_count",
    )
    .await;
    let idle_entries = h.sim.request_log().entries();
    let idle_writes: usize = reconciler_writes(&idle_entries).values().sum();
    let idle_requests = idle_entries
        .iter()
        .filter(|e| matches!(writer(e), Writer::Reconciler(_)))
        .count();
    let cpu_per_poll = Duration::from_nanos((c1 - c0) / ((p1 - p0) as u64).max(1));
    let reconcile_wall = Duration::from_secs_f64((r_sum1 - r_sum0) / (r_cnt1 - r_cnt0).max(1.0));

    // One pool changes.
    let old: Vec<Option<String>> = h
        .nodes()
        .iter()
        .filter(|n| pool_of(n) == Some("big"))
        .map(desired_name)
        .collect();
    h.sim.request_log().reset();
    write_repo(&h, 101);
    let t = Instant::now();
    h.repo.commit("change pool big");
    h.wait_nodes("pool big rolled out", Duration::from_secs(600), |nodes| {
        let big: Vec<_> = nodes.iter().filter(|n| pool_of(n) == Some("big")).collect();
        big.iter().all(|n| settled_done(n))
            && big.iter().zip(&old).all(|(n, o)| desired_name(n) != *o)
    })
    .await;
    let change = t.elapsed();
    let entries = h.sim.request_log().entries();
    let writes = reconciler_writes(&entries);
    let patches = writes
        .get(&("patch".into(), "nodes".into()))
        .copied()
        .unwrap_or(0);
    let creates = writes
        .get(&("create".into(), "configmaps".into()))
        .copied()
        .unwrap_or(0);
    let other: usize = writes.values().sum::<usize>() - patches - creates;
    let per_node = assignments_per_node(&entries);
    let changed_nodes = h
        .nodes()
        .iter()
        .filter(|n| {
            pool_of(n) == Some("big") && n["metadata"]["annotations"][DESIRED_CONFIG].is_string()
        })
        .count();
    let hwm_mb = status_kb(pid, "VmHWM") as f64 / 1024.0;
    let rss_mb = status_kb(pid, "VmRSS") as f64 / 1024.0;
    let _ = child.kill();
    let _ = child.wait();

    println!();
    println!(
        "kubelet-gitops run: {NODES} nodes, {POOLS} pools (simulated API server, agents played by a test double)"
    );
    println!();
    println!("| {:<58} | {:>14} | {:<22} |", "measure", "value", "target");
    println!("|{}|{}|{}|", "-".repeat(60), "-".repeat(16), "-".repeat(24));
    row(
        "initial rollout, 5,000 nodes at maxUnavailable 100% (wall)",
        format!("{initial:.2?}"),
        "",
    );
    row(
        &format!("idle: API writes during {} unchanged polls", p1 - p0),
        idle_writes.to_string(),
        "0",
    );
    row(
        "idle: API requests of any kind by the reconciler",
        idle_requests.to_string(),
        "",
    );
    row(
        "idle: CPU per poll cycle (fetch + resync reconcile)",
        format!("{cpu_per_poll:.2?}"),
        "< 50 ms",
    );
    row(
        "idle: wall time of one resync reconcile",
        format!("{reconcile_wall:.2?}"),
        "",
    );
    row(
        "change 1 pool of 1,000 nodes: wall, commit to all Done",
        format!("{change:.2?}"),
        "",
    );
    row(
        "change: node patches",
        patches.to_string(),
        &format!("= {BIG} (one per node)"),
    );
    row(
        "change: most patches of one node",
        per_node.values().max().copied().unwrap_or(0).to_string(),
        "1",
    );
    row("change: ConfigMaps created", creates.to_string(), "1");
    row("change: other writes", other.to_string(), "0");
    row(
        "change: nodes of pool big on the new ConfigMap",
        changed_nodes.to_string(),
        &BIG.to_string(),
    );
    row(
        "reconciler peak RSS (VmHWM)",
        format!("{hwm_mb:.1} MiB"),
        "",
    );
    row("reconciler RSS at the end", format!("{rss_mb:.1} MiB"), "");
    println!();
    let ok = idle_writes == 0
        && cpu_per_poll < Duration::from_millis(50)
        && patches == BIG
        && creates == 1
        && other == 0
        && per_node.values().all(|&n| n == 1);
    println!(
        "{}",
        if ok {
            "all targets met"
        } else {
            "TARGETS MISSED"
        }
    );
    h.shutdown().await;
    if !ok {
        std::process::exit(1);
    }
}
