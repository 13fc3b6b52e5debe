//! The simulated API server under the load kubelet-gitops puts on a large cluster:
//! 10,000 Nodes listed, 1,000 concurrent watchers receiving a Node update, and what the
//! server costs in memory.
//!
//! Run: `cargo bench -p kubelet-gitops-sim --bench api`. A plain `main`, not criterion:
//! the figures wanted are the p50, p99 and max of a few dozen expensive operations (and
//! 5,000 watch deliveries) and memory, where criterion reports the mean of many
//! iterations. It prints one table; docs/sim.md quotes it.
//!
//! The server (an in-process [`Sim`] without stand-in kubelets) and every client share
//! this process and its cores, so each latency includes the client's share of the CPU
//! and the memory figures include the clients' buffers (the bench prints both).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "support/memory.rs"]
mod memory;

use anyhow::{Context as _, bail, ensure};
use futures::{StreamExt as _, stream};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kubelet_gitops_core::inventory::Inventory;
use kubelet_gitops_sim::cluster::{Sim, SimConfig};
use kubelet_gitops_sim::resources::kinds;
use memory::Memory;
use serde::Deserialize;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::sync::{Barrier, mpsc};

/// Nodes in the cluster.
const NODES: usize = 10_000;
/// Node pools the nodes are spread over.
const POOLS: &[&str] = &["general", "gpu", "storage", "infra"];
/// Timed full lists per client kind.
const LIST_RUNS: usize = 20;
/// Page size of the paginated lists.
const PAGE: usize = 500;
/// Timed paginated lists per client kind.
const PAGED_RUNS: usize = 5;
/// Concurrent watchers.
const WATCHERS: usize = 1_000;
/// Connections opened at once while establishing the watchers.
const CONNECT_CONCURRENCY: usize = 100;
/// Node updates each watcher must receive.
const UPDATES: usize = 5;
/// The label each update patches.
const UPDATE_LABEL: &str = "bench.kubelet-gitops.io/update";
/// How long an update may take to reach every watcher before the bench fails.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(30);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let started = Instant::now();
    let baseline = Memory::read()?;

    let dir = tempfile::tempdir().context("creating a temp dir")?;
    let mut config = SimConfig::new(Inventory::generate(NODES, POOLS), dir.path());
    config.kubelets = false;
    let t = Instant::now();
    let sim = Sim::start(config).await.context("starting the sim")?;
    let load_time = t.elapsed();
    let loaded = Memory::read()?;
    let nodes: Api<Node> = Api::all(kube_client(&sim).await?);

    // Watchers first: measured after the lists, their memory would hide in the heap the
    // lists freed and the allocator kept.
    let watch = watch_phase(&sim, &nodes).await?;
    let lists = list_phase(&sim, &nodes).await?;
    let after_lists = Memory::read()?;

    let log = sim.request_log();
    let requests = format!(
        "list nodes: {}, watch nodes: {}, patch nodes: {}",
        log.count("list", "nodes"),
        log.count("watch", "nodes"),
        log.count("patch", "nodes")
    );
    let mut report = Report::default();
    lists.report(&mut report);
    watch.report(&mut report);

    report.section("c. memory (VmRSS / VmHWM of this process, from /proc/self/status)");
    report.note(
        "server and clients run in this one process: the figures include the clients' \
         share (kube-rs decoding during the lists, the watchers' read buffers)",
    );
    report.memory("baseline (runtime up, nothing loaded)", &baseline, None);
    report.memory(
        &format!("{NODES} Nodes loaded (load took {})", ms(load_time)),
        &loaded,
        Some(&baseline),
    );
    report.memory(
        &format!("+ {WATCHERS} watchers open (no event yet)"),
        &watch.idle_memory,
        Some(&baseline),
    );
    report.memory(
        &format!("+ {WATCHERS} watchers open, after the updates"),
        &watch.memory,
        Some(&baseline),
    );
    report.memory(
        "after the lists (watchers closed)",
        &after_lists,
        Some(&baseline),
    );
    let per_watcher = |m: &Memory| m.rss_kib.saturating_sub(loaded.rss_kib) * 1024 / WATCHERS;
    report.note(format!(
        "{WATCHERS} watchers: {} RSS per watcher idle, {} after {UPDATES} events; the client \
         side's read buffers hold {} per watcher of that at the end ({} in all)",
        kib(per_watcher(&watch.idle_memory)),
        kib(per_watcher(&watch.memory)),
        kib(watch.client_buffers / WATCHERS),
        mib(watch.client_buffers),
    ));
    report.note(format!(
        "after the lists: the server keeps each Node's JSON encoding ({} in all) for the \
         next list and watch event; the rest is heap the lists (mostly kube-rs decoding \
         {} per list) freed and glibc malloc kept; VmHWM is the peak",
        mib(lists.full_bytes),
        mib(lists.full_bytes)
    ));

    report.section("requests served (the sim's request log)");
    report.line(requests);

    report.print(started.elapsed());
    sim.shutdown().await;
    Ok(())
}

/// What part a measured.
struct ListFigures {
    full_bytes: usize,
    raw_first: Duration,
    kube_full: Stats,
    raw_full: Stats,
    kube_paged: Stats,
    raw_paged: Stats,
}

/// a: full and paginated lists of every Node, through kube and raw HTTP.
async fn list_phase(sim: &Sim, nodes: &Api<Node>) -> anyhow::Result<ListFigures> {
    let addr = sim.server().addr;
    let t = Instant::now();
    let (status, body) = raw_get(addr, "/api/v1/nodes").await?;
    let raw_first = t.elapsed();
    ensure!(status == 200, "GET /api/v1/nodes: {status}");
    let full_bytes = body.len();
    let list: ListHead = serde_json::from_slice(&body).context("decoding the node list")?;
    ensure!(
        list.items.len() == NODES,
        "raw list: {} items",
        list.items.len()
    );
    drop(body);

    let kube_full = time_runs(LIST_RUNS, || async {
        let list = nodes.list(&ListParams::default()).await?;
        ensure!(
            list.items.len() == NODES,
            "kube list: {} items",
            list.items.len()
        );
        Ok(())
    })
    .await?;
    let raw_full = time_runs(LIST_RUNS, || async {
        let (status, body) = raw_get(addr, "/api/v1/nodes").await?;
        ensure!(
            status == 200 && body.len() == full_bytes,
            "raw list: {status}"
        );
        Ok(())
    })
    .await?;
    let kube_paged = time_runs(PAGED_RUNS, || kube_paged_list(nodes)).await?;
    let raw_paged = time_runs(PAGED_RUNS, || raw_paged_list(addr)).await?;
    Ok(ListFigures {
        full_bytes,
        raw_first,
        kube_full,
        raw_full,
        kube_paged,
        raw_paged,
    })
}

impl ListFigures {
    fn report(&self, report: &mut Report) {
        let pages = NODES.div_ceil(PAGE);
        report.section("a. list 10,000 Nodes (timed runs after a warm-up run each)");
        report.line(format!(
            "first raw GET /api/v1/nodes after the load: {} (encodes every Node once; later \
             lists reuse each Node's encoding until it changes)",
            ms(self.raw_first)
        ));
        report.row(
            "kube Api::<Node>::list (decoded to k8s-openapi Node)",
            &self.kube_full,
            format!("{LIST_RUNS} runs"),
        );
        report.row(
            "raw GET /api/v1/nodes (body read, not decoded)",
            &self.raw_full,
            format!("{LIST_RUNS} runs, {} per response", mib(self.full_bytes)),
        );
        report.row(
            "kube paginated list, limit=500 + continue (total)",
            &self.kube_paged,
            format!("{PAGED_RUNS} runs, {pages} pages"),
        );
        report.row(
            "raw paginated list, limit=500 + continue (total)",
            &self.raw_paged,
            format!("{PAGED_RUNS} runs, {pages} pages"),
        );
        report.note(format!(
            "average Node: {} bytes of JSON (labels, annotations, managedFields, capacity, \
             allocatable, conditions, addresses, nodeInfo)",
            self.full_bytes / NODES
        ));
    }
}

/// What part b measured.
struct WatchFigures {
    resource_version: String,
    establish: Duration,
    registered: usize,
    client_buffers: usize,
    patches: Stats,
    per_update: Vec<(String, Stats)>,
    all: Stats,
    deliveries: usize,
    idle_memory: Memory,
    memory: Memory,
}

/// b: `WATCHERS` raw watch streams on nodes, then `UPDATES` label patches, each timed
/// from the patch being sent to its MODIFIED event at every watcher.
async fn watch_phase(sim: &Sim, nodes: &Api<Node>) -> anyhow::Result<WatchFigures> {
    let addr = sim.server().addr;
    let resource_version = nodes
        .list_metadata(&ListParams::default().limit(1))
        .await?
        .metadata
        .resource_version
        .context("list without resourceVersion")?;
    let (receipts_tx, mut receipts) = mpsc::unbounded_channel::<Receipt>();
    let path = format!("/api/v1/nodes?watch=true&resourceVersion={resource_version}");
    let barrier = Arc::new(Barrier::new(WATCHERS + 1));
    let t = Instant::now();
    let watchers: Vec<Watcher> = stream::iter(0..WATCHERS)
        .map(|_| Watcher::open(addr, &path, receipts_tx.clone(), barrier.clone()))
        .buffer_unordered(CONNECT_CONCURRENCY)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<anyhow::Result<_>>()?;
    let establish = t.elapsed();
    drop(receipts_tx); // the watchers hold the only senders now
    let idle_memory = Memory::read()?;
    let registered = sim.store().watcher_count(kinds::nodes());
    ensure!(registered == WATCHERS, "{registered} watchers registered");
    let handles: Vec<_> = watchers
        .into_iter()
        .map(|w| tokio::spawn(w.run()))
        .collect();
    barrier.wait().await;

    let mut all = Vec::with_capacity(WATCHERS * UPDATES);
    let mut per_update = Vec::new();
    let mut patch_times = Vec::new();
    let mut client_buffers = 0;
    for update in 0..UPDATES {
        // Inventory::generate names node i `<pool of i>-<i, 4 digits>`.
        let i = (update * 1_999 + 17) % NODES;
        let name = format!("{}-{i:04}", POOLS[i % POOLS.len()]);
        let patch = serde_json::json!({"metadata": {"labels": {UPDATE_LABEL: update.to_string()}}});
        let sent = Instant::now();
        let patched = nodes
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("patching node {name}"))?;
        patch_times.push(sent.elapsed());
        let want: u64 = patched
            .metadata
            .resource_version
            .as_deref()
            .and_then(|v| v.parse().ok())
            .context("patched node without a numeric resourceVersion")?;
        let mut latencies = Vec::with_capacity(WATCHERS);
        client_buffers = 0;
        let deadline = tokio::time::Instant::now() + DELIVERY_TIMEOUT;
        while latencies.len() < WATCHERS {
            let receipt = tokio::time::timeout_at(deadline, receipts.recv())
                .await
                .with_context(|| {
                    format!(
                        "update {update}: {} of {WATCHERS} watchers got it",
                        latencies.len()
                    )
                })?
                .context("every watcher ended")?;
            ensure!(
                receipt.resource_version == want,
                "update {update}: a watcher received resourceVersion {} (want {want})",
                receipt.resource_version
            );
            latencies.push(receipt.at.saturating_duration_since(sent));
            client_buffers += receipt.buffers;
        }
        per_update.push((name, Stats::of(&latencies)));
        all.extend(latencies);
    }
    let memory = Memory::read()?;
    for h in &handles {
        h.abort();
    }
    for h in handles {
        // Aborted: the JoinError says so; a watcher that failed earlier says why.
        if let Ok(Err(e)) = h.await {
            return Err(e.context("a watcher failed"));
        }
    }
    Ok(WatchFigures {
        resource_version,
        establish,
        registered,
        client_buffers,
        patches: Stats::of(&patch_times),
        per_update,
        all: Stats::of(&all),
        deliveries: all.len(),
        idle_memory,
        memory,
    })
}

impl WatchFigures {
    fn report(&self, report: &mut Report) {
        report.section("b. 1,000 watchers on nodes, one Node label patched (merge patch)");
        report.line(format!(
            "{WATCHERS} raw HTTP watch streams (watch=true&resourceVersion={}) established in \
             {} ({CONNECT_CONCURRENCY} connecting at a time); {} registered in the store",
            self.resource_version,
            ms(self.establish),
            self.registered
        ));
        report.row(
            "patch request (kube client, send to response)",
            &self.patches,
            format!("{UPDATES} patches"),
        );
        for (i, (name, stats)) in self.per_update.iter().enumerate() {
            report.row(
                &format!(
                    "update {} ({name}): patch sent -> MODIFIED at each watcher",
                    i + 1
                ),
                stats,
                format!("{WATCHERS} watchers"),
            );
        }
        report.row(
            "all updates: patch sent -> MODIFIED at each watcher",
            &self.all,
            format!("{} deliveries", self.deliveries),
        );
        report.note(
            "the watchers are raw HTTP streams: each reads its chunked stream and takes the \
             resourceVersion out of the MODIFIED line without decoding the Node, so the figure \
             is the server's fan-out (encode once, one write per connection) plus the socket, \
             not 1,000 kube-rs clients each deserializing the same Node on the same 2 cores",
        );
    }
}

// ---------------------------------------------------------------------------------
// Clients

async fn kube_client(sim: &Sim) -> anyhow::Result<kube::Client> {
    let kc = kube::config::Kubeconfig::read_from(sim.kubeconfig_path())?;
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await?;
    Ok(kube::Client::try_from(config)?)
}

/// Every Node through kube, `PAGE` at a time.
async fn kube_paged_list(nodes: &Api<Node>) -> anyhow::Result<()> {
    let mut token: Option<String> = None;
    let mut seen = 0;
    loop {
        let mut lp = ListParams::default().limit(PAGE as u32);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = nodes.list(&lp).await?;
        seen += page.items.len();
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            break;
        }
    }
    ensure!(seen == NODES, "kube paginated list: {seen} items");
    Ok(())
}

/// The parts of a list response the bench checks; items are skipped, not decoded.
#[derive(Deserialize)]
struct ListHead {
    #[serde(default)]
    metadata: ListMeta,
    items: Vec<serde::de::IgnoredAny>,
}

#[derive(Deserialize, Default)]
struct ListMeta {
    #[serde(rename = "continue", default)]
    continue_token: Option<String>,
}

/// Every Node over raw HTTP, `PAGE` at a time (each page's items skipped, not decoded).
async fn raw_paged_list(addr: SocketAddr) -> anyhow::Result<()> {
    let mut token: Option<String> = None;
    let mut seen = 0;
    loop {
        let path = match &token {
            None => format!("/api/v1/nodes?limit={PAGE}"),
            Some(t) => format!("/api/v1/nodes?limit={PAGE}&continue={}", percent_encode(t)),
        };
        let (status, body) = raw_get(addr, &path).await?;
        ensure!(status == 200, "GET {path}: {status}");
        let page: ListHead = serde_json::from_slice(&body)?;
        seen += page.items.len();
        token = page.metadata.continue_token.filter(|t| !t.is_empty());
        if token.is_none() {
            break;
        }
    }
    ensure!(seen == NODES, "raw paginated list: {seen} items");
    Ok(())
}

/// Percent-encodes everything but unreserved characters (continue tokens are base64).
fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn request(addr: SocketAddr, path: &str) -> Vec<u8> {
    format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: sim-bench\r\n\
         Accept: application/json\r\nConnection: close\r\n\r\n"
    )
    .into_bytes()
}

/// One GET on a new connection, read to EOF: the status and the (de-chunked) body.
async fn raw_get(addr: SocketAddr, path: &str) -> anyhow::Result<(u16, Vec<u8>)> {
    let mut conn = TcpStream::connect(addr).await?;
    conn.write_all(&request(addr, path)).await?;
    let mut buf = Vec::new();
    conn.read_to_end(&mut buf).await?;
    let end = find(&buf, b"\r\n\r\n").context("response without a header end")?;
    let head = std::str::from_utf8(&buf[..end])?;
    let status = status_code(head)?;
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase()
            .starts_with("transfer-encoding: chunked")
    });
    let body = buf.split_off(end + 4);
    if chunked {
        let mut out = Vec::with_capacity(body.len());
        let mut rest = &body[..];
        while let Some((chunk, after)) = next_chunk(rest)? {
            out.extend_from_slice(chunk);
            rest = after;
        }
        Ok((status, out))
    } else {
        Ok((status, body))
    }
}

fn status_code(head: &str) -> anyhow::Result<u16> {
    head.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("bad status line in {head:?}"))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The first complete chunk of chunked transfer encoding in `data` and what follows
/// it; `None` when `data` holds no complete chunk yet or at the last (empty) chunk.
fn next_chunk(data: &[u8]) -> anyhow::Result<Option<(&[u8], &[u8])>> {
    let Some(eol) = find(data, b"\r\n") else {
        return Ok(None);
    };
    let size_text = std::str::from_utf8(&data[..eol])?;
    let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
        .with_context(|| format!("bad chunk size {size_text:?}"))?;
    let start = eol + 2;
    if size == 0 || data.len() < start + size + 2 {
        return Ok(None);
    }
    Ok(Some((
        &data[start..start + size],
        &data[start + size + 2..],
    )))
}

/// A watcher saw the MODIFIED event of `resource_version` at `at`.
struct Receipt {
    resource_version: u64,
    at: Instant,
    /// Bytes the watcher's buffers hold allocated.
    buffers: usize,
}

/// One raw HTTP watch stream, headers read.
struct Watcher {
    conn: TcpStream,
    buf: Vec<u8>,
    receipts: mpsc::UnboundedSender<Receipt>,
    ready: Arc<Barrier>,
}

/// Bytes a watcher reads at a time.
const READ_BUFFER: usize = 8 * 1024;

impl Watcher {
    async fn open(
        addr: SocketAddr,
        path: &str,
        receipts: mpsc::UnboundedSender<Receipt>,
        ready: Arc<Barrier>,
    ) -> anyhow::Result<Watcher> {
        let mut conn = TcpStream::connect(addr).await?;
        conn.write_all(&request(addr, path)).await?;
        let mut buf = Vec::with_capacity(READ_BUFFER);
        let end = loop {
            if conn.read_buf(&mut buf).await? == 0 {
                bail!("watch closed before its headers");
            }
            if let Some(end) = find(&buf, b"\r\n\r\n") {
                break end;
            }
        };
        let status = status_code(std::str::from_utf8(&buf[..end])?)?;
        ensure!(status == 200, "watch answered {status}");
        buf.drain(..end + 4);
        Ok(Watcher {
            conn,
            buf,
            receipts,
            ready,
        })
    }

    /// Reads events until the stream or the bench ends, reporting each MODIFIED.
    async fn run(mut self) -> anyhow::Result<()> {
        self.ready.wait().await;
        let mut pending: Vec<u8> = Vec::new();
        loop {
            while let Some((chunk, rest)) = next_chunk(&self.buf)? {
                pending.extend_from_slice(chunk);
                let consumed = self.buf.len() - rest.len();
                self.buf.drain(..consumed);
            }
            while let Some(nl) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=nl).collect();
                if line.starts_with(br#"{"type":"MODIFIED""#) {
                    let resource_version = resource_version(&line)?;
                    let receipt = Receipt {
                        resource_version,
                        at: Instant::now(),
                        buffers: self.buf.capacity() + pending.capacity(),
                    };
                    if self.receipts.send(receipt).is_err() {
                        return Ok(());
                    }
                }
            }
            if self.buf.capacity() - self.buf.len() < 1024 {
                self.buf.reserve(READ_BUFFER);
            }
            if self.conn.read_buf(&mut self.buf).await? == 0 {
                return Ok(());
            }
        }
    }
}

/// The object's `metadata.resourceVersion` in a watch event line, found without decoding
/// the object (the first `"resourceVersion"` key in a sim Node is its metadata's).
fn resource_version(line: &[u8]) -> anyhow::Result<u64> {
    const KEY: &[u8] = br#""resourceVersion":""#;
    let start = find(line, KEY).context("event without a resourceVersion")? + KEY.len();
    let len = line[start..]
        .iter()
        .position(|b| *b == b'"')
        .context("unterminated resourceVersion")?;
    Ok(std::str::from_utf8(&line[start..start + len])?.parse()?)
}

// ---------------------------------------------------------------------------------
// Measuring

async fn time_runs<F, Fut>(runs: usize, mut f: F) -> anyhow::Result<Stats>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    f().await?; // warm-up: connections, caches, allocator
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        f().await?;
        times.push(t.elapsed());
    }
    Ok(Stats::of(&times))
}

/// p50, p99 and max of a sample (nearest-rank percentiles).
struct Stats {
    p50: Duration,
    p99: Duration,
    max: Duration,
}

impl Stats {
    fn of(sample: &[Duration]) -> Stats {
        let mut s = sample.to_vec();
        s.sort_unstable();
        let rank = |p: f64| s[((p * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1];
        Stats {
            p50: rank(0.50),
            p99: rank(0.99),
            max: s[s.len() - 1],
        }
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn mib(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

fn kib(bytes: usize) -> String {
    format!("{:.1} KiB", bytes as f64 / 1024.0)
}

/// The printed table.
#[derive(Default)]
struct Report {
    lines: Vec<String>,
}

impl Report {
    fn section(&mut self, title: &str) {
        self.lines.push(String::new());
        self.lines.push(title.to_string());
    }

    fn line(&mut self, text: String) {
        self.lines.push(format!("  {text}"));
    }

    fn note(&mut self, text: impl Into<String>) {
        self.lines.push(format!("  note: {}", text.into()));
    }

    fn row(&mut self, what: &str, s: &Stats, extra: String) {
        self.lines.push(format!(
            "  {what:<66} p50 {:>9}  p99 {:>9}  max {:>9}  ({extra})",
            ms(s.p50),
            ms(s.p99),
            ms(s.max)
        ));
    }

    fn memory(&mut self, what: &str, m: &Memory, baseline: Option<&Memory>) {
        let delta = baseline.map_or(String::new(), |b| {
            format!(
                "  (+{} RSS over baseline)",
                mib(m.rss_kib.saturating_sub(b.rss_kib) * 1024)
            )
        });
        self.lines.push(format!(
            "  {what:<48} VmRSS {:>10}  VmHWM {:>10}{delta}",
            mib(m.rss_kib * 1024),
            mib(m.hwm_kib * 1024)
        ));
    }

    fn print(&self, total: Duration) {
        let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("model name"))
                    .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
            })
            .unwrap_or_else(|| "unknown CPU".into());
        println!(
            "kubelet-gitops-sim API benchmark: {NODES} Nodes, {WATCHERS} watchers; \
             {cores} cores ({cpu}); server and clients in one process, one tokio runtime"
        );
        for l in &self.lines {
            println!("{l}");
        }
        println!("\nbenchmark took {:.1} s", total.as_secs_f64());
    }
}
