//! The sim holding a large fleet: how much memory each Node costs the sim and how long
//! the fleet takes to create, before and after a rollout writes to every Node.
//!
//! Run: `cargo bench -p kubelet-gitops-sim --bench scale` (100,000 Nodes), or with
//! another size: `cargo bench -p kubelet-gitops-sim --bench scale -- --nodes 20000`
//! (or `KUBELET_GITOPS_SIM_BENCH_NODES=20000`). A plain `main` that prints one table.
//!
//! The Nodes look like an EKS managed node group's ([`eks_inventory`]: 20 labels,
//! capacity and allocatable, addresses, node info, four conditions) and are created as
//! the reconciler's benchmark creates them: [`Sim::start`] with the inventory and no
//! stand-in kubelets. Then, over HTTP with each client's User-Agent, what a rollout
//! writes to every Node: the reconciler's annotations (a merge patch), and the agent's
//! report (its annotations and its status condition in one strategic merge patch of
//! `nodes/status`, as the agent writes them). Then one round of status churn (each Node's
//! kubelet heartbeat, [`StatusChurn`], at 5,000 reports a second). Then the fleet at
//! rest: the kubelets' own churn (one report per Node every 5 minutes) for longer than the
//! watch history keeps events for their freshness, so the history is what it is in a
//! steady cluster. Memory is this process's VmRSS less its VmRSS before the sim started,
//! divided by the number of Nodes, and the live heap (bytes allocated and not freed,
//! counted by the allocator) per Node; the clients run in this process too, with next
//! to nothing of their own kept between requests. The allocator is the sim binary's
//! (mimalloc).

use std::time::{Duration, Instant};

#[path = "support/memory.rs"]
mod memory;

use anyhow::Context as _;
use cap::Cap;
use futures::{StreamExt as _, stream};
use kube::api::{Patch, PatchParams};
use kubelet_gitops_sim::cluster::{Sim, SimConfig, StatusChurn};
use kubelet_gitops_sim::fleet::eks_inventory;
use kubelet_gitops_sim::store::HISTORY_FRESHNESS;
use memory::Memory;
use mimalloc::MiMalloc;
use serde_json::json;

/// The sim binary's allocator, counting the bytes in use (the `cap` crate: the workspace
/// forbids `unsafe`).
#[global_allocator]
static ALLOC: Cap<MiMalloc> = Cap::new(MiMalloc, usize::MAX);

/// Nodes unless `--nodes` or the environment says otherwise.
const DEFAULT_NODES: usize = 100_000;
/// Node pools the nodes are spread over.
const POOLS: usize = 50;
/// Status reports a second in the churn phase (real kubelets: 333 at 100,000 Nodes).
const CHURN_RATE: f64 = 5_000.0;
/// Requests in flight at once during the rollout.
const CONCURRENCY: usize = 32;
/// The reconciler's User-Agent (its product is `kubelet-gitops`).
const RECONCILER_UA: &str = "kubelet-gitops/0.1.0 (bench)";
/// The agents' User-Agent.
const AGENT_UA: &str = "kubelet-gitops-agent/0.1.0 (bench)";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let nodes = nodes_wanted()?;
    let started = Instant::now();
    let mut report = Report::new(nodes);
    let baseline = Memory::read()?;
    report.memory("baseline (runtime up, nothing loaded)", &baseline, None);

    let pools: Vec<String> = (0..POOLS).map(|i| format!("p{i:02}")).collect();
    let refs: Vec<&str> = pools.iter().map(String::as_str).collect();
    let inventory = eks_inventory(nodes, &refs);
    let names: Vec<String> = inventory.nodes.iter().map(|n| n.name.clone()).collect();
    let dir = tempfile::tempdir().context("creating a temp dir")?;
    let mut config = SimConfig::new(inventory, dir.path());
    config.kubelets = false;
    let t = Instant::now();
    let sim = Sim::start(config).await.context("starting the sim")?;
    let created = t.elapsed();
    report.line(format!(
        "{nodes} Nodes created in {} ({:.0} µs per Node)",
        secs(created),
        created.as_secs_f64() * 1e6 / nodes as f64
    ));
    report.memory("Nodes created", &Memory::read()?, Some(&baseline));

    let t = Instant::now();
    let list_bytes = full_list(&sim, false).await?;
    report.line(format!(
        "a full list (GET /api/v1/nodes): {}, {} bytes per Node",
        secs(t.elapsed()),
        list_bytes / nodes
    ));
    let t = Instant::now();
    let meta_bytes = full_list(&sim, true).await?;
    report.line(format!(
        "a metadata-only list (as=PartialObjectMetadataList, the reconciler's): {}, {} bytes per Node",
        secs(t.elapsed()),
        meta_bytes / nodes
    ));
    report.memory("after the lists", &Memory::read()?, Some(&baseline));

    let reconciler = kube_client(&sim, RECONCILER_UA).await?;
    let agent = kube_client(&sim, AGENT_UA).await?;
    let t = Instant::now();
    rollout(&reconciler, &agent, &names).await?;
    let took = t.elapsed();
    report.line(format!(
        "rollout: 2 writes to each of {nodes} Nodes over HTTP in {} ({:.0} writes/s)",
        secs(took),
        2.0 * nodes as f64 / took.as_secs_f64()
    ));
    report.memory("after the rollout", &Memory::read()?, Some(&baseline));

    // One round of status churn, faster than real kubelets' (one report per Node every
    // 5 minutes) so that it takes seconds.
    let rate = CHURN_RATE.min(nodes as f64 / 2.0);
    let log = sim.request_log();
    let t = Instant::now();
    sim.set_status_churn(StatusChurn::PerSecond(rate));
    while log.client_count("kubelet", "patch", "nodes/status") < nodes as u64 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    sim.set_status_churn(StatusChurn::Off);
    let took = t.elapsed();
    report.line(format!(
        "status churn: a report from each of {nodes} Nodes in {} ({:.0} reports/s, asked {rate:.0}/s)",
        secs(took),
        nodes as f64 / took.as_secs_f64()
    ));
    report.memory(
        "after a round of status churn",
        &Memory::read()?,
        Some(&baseline),
    );

    // At rest: the kubelets' own churn, until every event of the rollout and the churn
    // round is older than the history keeps events for their freshness.
    let rest = HISTORY_FRESHNESS + Duration::from_secs(15);
    sim.set_status_churn(StatusChurn::KUBELETS);
    tokio::time::sleep(rest).await;
    report.memory(
        &format!("at rest ({} s of the kubelets' churn)", rest.as_secs()),
        &Memory::read()?,
        Some(&baseline),
    );
    sim.set_status_churn(StatusChurn::Off);

    report.section("requests served, per client (the sim's request log)");
    for ((client, verb, resource), n) in sim.request_log().counts_by_client() {
        report.line(format!("{client:<22} {verb:<8} {resource:<16} {n:>9}"));
    }
    report.print(started.elapsed());
    sim.shutdown().await;
    Ok(())
}

/// `--nodes N`, else `KUBELET_GITOPS_SIM_BENCH_NODES`, else [`DEFAULT_NODES`].
fn nodes_wanted() -> anyhow::Result<usize> {
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if let Some(v) = a.strip_prefix("--nodes=") {
            return v.parse().context("--nodes");
        }
        if a == "--nodes" {
            return args.next().context("--nodes N")?.parse().context("--nodes");
        }
    }
    match std::env::var("KUBELET_GITOPS_SIM_BENCH_NODES") {
        Ok(v) => v.parse().context("KUBELET_GITOPS_SIM_BENCH_NODES"),
        Err(_) => Ok(DEFAULT_NODES),
    }
}

async fn kube_client(sim: &Sim, ua: &str) -> anyhow::Result<kube::Client> {
    let kc = kube::config::Kubeconfig::read_from(sim.kubeconfig_path())?;
    let mut config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await?;
    config.headers.push((
        axum::http::header::USER_AGENT,
        axum::http::HeaderValue::from_str(ua)?,
    ));
    Ok(kube::Client::try_from(config)?)
}

/// Bytes of one list of every Node (of their metadata only with `metadata`), read and
/// dropped.
async fn full_list(sim: &Sim, metadata: bool) -> anyhow::Result<usize> {
    let client = kube_client(sim, "sim-bench/0").await?;
    let nodes = kube::core::Request::new("/api/v1/nodes");
    let req = if metadata {
        nodes.list_metadata(&Default::default())
    } else {
        nodes.list(&Default::default())
    }
    .context("building the list request")?;
    Ok(client.request_text(req).await?.len())
}

/// What a rollout writes to each Node, `CONCURRENCY` Nodes at a time: the reconciler's
/// annotations, then the agent's annotations and its status condition in one write.
async fn rollout(
    reconciler: &kube::Client,
    agent: &kube::Client,
    names: &[String],
) -> anyhow::Result<()> {
    let results: Vec<anyhow::Result<()>> = stream::iter(names)
        .map(|name| async move {
            let pool = name.split('-').next().unwrap_or_default();
            let desired = format!("kubelet-gitops/kubelet-{pool}-3f2a9c1b");
            let nodes = kube::core::Request::new("/api/v1/nodes");
            let pp = PatchParams::default();
            let assign = json!({"metadata": {"annotations": {
                "kubelet-gitops.io/desired-config": desired,
                "kubelet-gitops.io/health-timeout": "2m",
                "kubelet-gitops.io/lkg-grace": "10m",
                "kubelet-gitops.io/pool": pool,
            }}});
            send(reconciler, nodes.patch(name, &pp, &Patch::Merge(&assign))?).await?;
            let now = kubelet_gitops_sim::store::now_rfc3339();
            let report = json!({"metadata": {"annotations": {
                "kubelet-gitops.io/current-config": desired,
                "kubelet-gitops.io/last-known-good": desired,
                "kubelet-gitops.io/state": "Done",
                "kubelet-gitops.io/observed-config": desired,
                "kubelet-gitops.io/node-setup": r#"{"configFlags":{"config":"/var/lib/kubelet/config.yaml","configDir":"/etc/kubernetes/kubelet.conf.d"},"dropIns":[],"mode":"drop-in","runtimeCgroupDriver":"systemd","cgroupVersion":"v2"}"#,
            }}, "status": {"conditions": [{
                "type": "KubeletConfigReady",
                "status": "True",
                "reason": "Done",
                "message": format!("running {desired}"),
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }]}});
            send(
                agent,
                nodes.patch_subresource("status", name, &pp, &Patch::Strategic(&report))?,
            )
            .await
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    results.into_iter().collect()
}

async fn send(client: &kube::Client, req: axum::http::Request<Vec<u8>>) -> anyhow::Result<()> {
    let what = format!("{} {}", req.method(), req.uri());
    client.request_text(req).await.context(what)?;
    Ok(())
}

// ---------------------------------------------------------------------------------
// Measuring

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

fn mib(kib: usize) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// The printed table.
struct Report {
    nodes: usize,
    lines: Vec<String>,
    /// Bytes allocated when the report began (the baseline).
    live_base: usize,
}

impl Report {
    fn new(nodes: usize) -> Report {
        Report {
            nodes,
            lines: Vec::new(),
            live_base: ALLOC.allocated(),
        }
    }

    fn section(&mut self, title: &str) {
        self.lines.push(String::new());
        self.lines.push(title.to_string());
    }

    fn line(&mut self, text: String) {
        self.lines.push(format!("  {text}"));
    }

    fn memory(&mut self, what: &str, m: &Memory, baseline: Option<&Memory>) {
        let per_node = baseline.map_or(String::new(), |b| {
            let delta = m.rss_kib.saturating_sub(b.rss_kib);
            let live = ALLOC.allocated().saturating_sub(self.live_base) as f64 / 1024.0;
            format!(
                "  +{} over baseline, {:.2} KiB per Node (live heap {:.2} KiB per Node)",
                mib(delta),
                delta as f64 / self.nodes as f64,
                live / self.nodes as f64
            )
        });
        self.lines.push(format!(
            "  {what:<40} VmRSS {:>11}  VmHWM {:>11}{per_node}",
            mib(m.rss_kib),
            mib(m.hwm_kib)
        ));
    }

    fn print(&self, total: Duration) {
        let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
        println!(
            "kubelet-gitops-sim scale benchmark: {} Nodes (EKS-like, {POOLS} pools), {cores} cores",
            self.nodes
        );
        for l in &self.lines {
            println!("{l}");
        }
        println!("\nbenchmark took {}", secs(total));
    }
}
