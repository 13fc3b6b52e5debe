//! The reconciler at scale: 5,000 nodes in 50 pools, the real `kubelet-gitops run` binary
//! as a child process so its CPU time and peak memory are its own, run against two API
//! servers in turn, with no kubelets (a test double plays the agents, as admin):
//!
//! - **sim**: the simulated API server, in this process. Writes are counted from its
//!   request log (by User-Agent, so the reconciler's apart from the double's).
//! - **real**: etcd and kube-apiserver v1.36 built by `upstream/build.sh` (no
//!   controller-manager, so nothing marks or deletes the Nodes), deploy/base's RBAC and
//!   admission policy applied, and the reconciler running with its service account's
//!   token, so the API server evaluates RBAC and the ValidatingAdmissionPolicy for each of
//!   its writes, as in production. The bench creates the same 5,000 Node objects the sim
//!   registers (labels, capacity, addresses, Ready), 32 at a time. The double writes as
//!   `system:masters`, which no admission policy of ours matches. kube-apiserver keeps no
//!   request log: writes are counted from its `/metrics` (`apiserver_request_total` by
//!   verb and resource, read before and after each phase), less the double's own node
//!   patches (it counts those the server accepted) and the API server's renewals of its
//!   own Lease; the reconciler's requests of any kind are those of the `service-accounts`
//!   flow schema (`apiserver_flowcontrol_dispatched_requests_total`). Without the
//!   upstream binaries this column is skipped, with a line saying why, unless
//!   `KUBELET_GITOPS_E2E_REQUIRE=1` (then it is a failure).
//!
//! The repository is served by `git daemon` on a loopback port (`git://`), as a network
//! remote: the reconciler lists its refs at each poll and pushes its status notes to it.
//!
//! On each server:
//! 1. Initial rollout: every pool at maxUnavailable 100%, canary 0.
//! 2. Idle: polls that find no new commit (since issue 15 no reconcile follows while
//!    nothing is unsettled; a full resync runs every 10 minutes) must
//!    make zero API writes; their CPU time is measured from the child's
//!    `/proc/<pid>/task/*/schedstat` (nanoseconds on CPU, every thread).
//! 3. Status churn: the bench posts Node status heartbeats as kubelets do (a strategic
//!    merge patch of the Ready condition's heartbeat time), `BENCH_CHURN_RATE` a second
//!    (1,000) for `BENCH_CHURN_SECONDS` (10): the reconciler's CPU per 1,000 events, and no
//!    write from it.
//! 4. One pool (1,000 nodes) changes: exactly one write per node plus the ConfigMap.
//!
//! Figures on the project's 2-core machine (docs/reconciler.md#figures):
//!
//! | measure | sim | real | target |
//! | --- | --- | --- | --- |
//! | setup: API server up; 5,000 Node objects created (32 at a time) | 1.6 s | 5.4 s; 10.4 s | |
//! | initial rollout, 5,000 nodes at maxUnavailable 100% (wall) | 16.9 s | 58.3 s | |
//! | initial: node patches / ConfigMaps created / other writes | 5,000 / 50 / 0 | 5,000 / 50 / 0 | 5,000 / 50 / 0 |
//! | initial: API requests of any kind by the reconciler | 5,063 | 5,066 | |
//! | idle: API writes during 10 unchanged polls | 0 | 0 | 0 |
//! | idle: API requests of any kind by the reconciler | 0 | 0 | |
//! | idle: CPU per poll cycle (fetch + resync reconcile) | 39.9 ms | 38.1 ms | < 50 ms |
//! | idle: wall time of one resync reconcile | 38.4 ms | 36.6 ms | |
//! | change 1 pool of 1,000 nodes: commit to all Done (wall) | 5.5 s | 13.2 s | |
//! | change: node patches / ConfigMaps created / other writes | 1,000 / 1 / 0 | 1,000 / 1 / 0 | 1,000 / 1 / 0 |
//! | change: API requests of any kind by the reconciler | 1,001 | 1,001 | |
//! | real API server's CPU (every client): initial rollout; change | | 85.2 s; 18.2 s | |
//! | watches the real API server closed as too slow (every client) | | 14 in the initial rollout | |
//! | reconciler peak RSS (VmHWM) | 78.7 MiB | 74.6 MiB | |
//!
//! The whole run takes about 2 minutes 15 s (sim 34 s, real 98 s). Wall times depend on
//! what else the 2 cores run: over six runs the real initial rollout took 50 to 116 s
//! and the change 12 to 25 s. The real server closes a watch whose client does not take
//! its events in time (a buffer of 10 to 100 events per watch, then a short time budget:
//! `Forcing nodes watcher close due to unresponsiveness` in its log): 2 to 14 node
//! watches in the initial rollout of each run that counted them. The reconciler's extra
//! requests (0 to 3 per phase) are its node watch started again from where it was, never
//! a new list. The sim closes a watcher only at 4,096 queued events.
//! `KUBELET_GITOPS_E2E_KEEP=1` keeps the real server's directory and logs.
//!
//! Run: `cargo bench -p reconciler --bench reconcile` (with
//! `KUBELET_GITOPS_UPSTREAM_BIN` if the binaries are not in the repository's
//! `upstream/bin`). Prints a table.

#[path = "../tests/integration/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kubelet_gitops_core::inventory::Inventory;
use kubelet_gitops_e2e::git::GitRemote;
use support::apiserver::{ApiserverMetrics, SERVICE_ACCOUNTS};
use support::real::{NodeView, RealServer, upstream};
use support::*;

const IDLE_POLLS: u64 = 10;

/// The fleet's size: 5,000 nodes in 50 pools, 1,000 of them in pool `big`, unless
/// `BENCH_NODES`, `BENCH_POOLS`, `BENCH_BIG` say otherwise; `BENCH_BIG_MAX_UNAVAILABLE`
/// is the changed pool's maxUnavailable (100%); `BENCH_SERVERS` (`sim,real`) picks the
/// servers.
struct Params {
    nodes: usize,
    pools: usize,
    big: usize,
    big_max_unavailable: String,
    servers: String,
}

/// The number `name` holds (`100_000` and `100,000` too), else `default`.
fn env_num<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .map(|v| v.replace(['_', ','], ""))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

static PARAMS: std::sync::LazyLock<Params> = std::sync::LazyLock::new(|| {
    let num = env_num::<usize>;
    let p = Params {
        nodes: num("BENCH_NODES", 5_000),
        pools: num("BENCH_POOLS", 50),
        big: num("BENCH_BIG", 1_000),
        big_max_unavailable: std::env::var("BENCH_BIG_MAX_UNAVAILABLE")
            .unwrap_or_else(|_| "100%".into()),
        servers: std::env::var("BENCH_SERVERS").unwrap_or_else(|_| "sim,real".into()),
    };
    assert!(
        p.pools >= 2 && p.big < p.nodes,
        "BENCH_POOLS >= 2 and BENCH_BIG < BENCH_NODES"
    );
    p
});
/// Nodes in all.
fn fleet_nodes() -> usize {
    PARAMS.nodes
}
/// Pools in all (`big` included).
fn fleet_pools() -> usize {
    PARAMS.pools
}
/// Nodes of pool `big`, the one the change phase changes.
fn big_pool() -> usize {
    PARAMS.big
}
const INTERVAL: &str = "500ms";
/// Node objects created on the real server at a time.
const CREATE_CONCURRENCY: usize = 32;
/// The limit of each wait: only a stuck rollout reaches it (10 minutes, and 10 ms more
/// per node beyond 5,000).
static LIMIT: std::sync::LazyLock<Duration> = std::sync::LazyLock::new(|| {
    Duration::from_secs(600)
        + Duration::from_millis(10) * fleet_nodes().saturating_sub(5_000) as u32
});

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
    (0..fleet_pools() - 1).map(|i| format!("p{i:02}")).collect()
}

/// 4,000 nodes over 49 pools, and 1,000 in pool `big`.
fn inventory() -> Inventory {
    let names = pool_names();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut inv = Inventory::generate(fleet_nodes() - big_pool(), &refs);
    let template = inv.nodes[0].clone();
    for i in 0..big_pool() {
        let mut n = template.clone();
        n.name = format!("big-{i:04}");
        n.labels.insert(POOL_LABEL.into(), "big".into());
        inv.nodes.push(n);
    }
    inv
}

fn write_repo(repo: &ConfigRepo, big_max_pods: u32) {
    repo.write("kubelet-gitops.yaml", &settings_yaml());
    let rollout = "maxUnavailable: 100%, canary: 0";
    for (i, p) in pool_names().iter().enumerate() {
        repo.write(
            &format!("pools/{p}.yaml"),
            &pool_yaml(p, p, rollout, &format!("    maxPods: {}\n", 50 + i)),
        );
    }
    let big_rollout = format!("maxUnavailable: {}, canary: 0", PARAMS.big_max_unavailable);
    repo.write(
        "pools/big.yaml",
        &pool_yaml(
            "big",
            "big",
            &big_rollout,
            &format!("    maxPods: {big_max_pods}\n"),
        ),
    );
}

/// Pushes the work tree's `main` to the repository `remote` serves, which the reconciler
/// follows over `git://` as over any network remote: it lists the refs there and pushes
/// its status notes back (libgit2 cannot push to a work tree, and a `file://` remote would
/// charge the reconciler for opening the remote repository at each poll, which a server
/// does for a network remote).
fn publish(repo: &ConfigRepo, remote: &GitRemote) {
    let out = Command::new("git")
        .arg("-C")
        .arg(&repo.path)
        .args(["push", "-q", "--force"])
        .arg(remote.bare())
        .arg("main")
        .output()
        .expect("run git push");
    assert!(
        out.status.success(),
        "git push: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `kubelet-gitops run`, killed when dropped (also when a wait fails).
struct Reconciler(Child);

impl Reconciler {
    fn spawn(url: &str, kubeconfig: &Path, cache: &Path, admin: &str) -> Reconciler {
        let child = Command::new(env!("CARGO_BIN_EXE_kubelet-gitops"))
            .arg("run")
            .args(["--repo-url", url])
            .args(["--kubeconfig", &kubeconfig.display().to_string()])
            .args(["--cache-dir", &cache.display().to_string()])
            .args(["--interval", INTERVAL])
            .args(["--admin-addr", admin])
            .args(["--identity", "bench"])
            .args(["--log", "warn"])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start kubelet-gitops run");
        Reconciler(child)
    }
}

impl Drop for Reconciler {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn metric(admin: std::net::SocketAddr, series: &str) -> f64 {
    let (_, body) = http_get(admin, "/metrics").await;
    sample(&body, series).unwrap_or(0.0)
}

/// The sum of every series of `name` (all its label sets).
async fn metric_sum(admin: std::net::SocketAddr, name: &str) -> f64 {
    let (_, body) = http_get(admin, "/metrics").await;
    body.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// Accepted writes by (verb, resource), in the sim request log's words.
type Writes = BTreeMap<(String, String), usize>;

/// What one phase cost the API server, as it counted.
#[derive(Debug, Default)]
struct Counted {
    /// The reconciler's accepted writes.
    writes: Writes,
    /// The reconciler's requests of any kind (reads, watches, writes).
    requests: usize,
    /// The most patches the reconciler sent one node (the sim's log names the node; the
    /// real server's metrics do not).
    most_per_node: Option<usize>,
    /// Writes by neither the reconciler nor the double: the real API server renewing its
    /// own Lease.
    server_own: usize,
    /// Reads by (verb, resource): the reconciler's on the sim; every client's on the real
    /// server (its metrics do not say who), for a look at list and watch behaviour.
    reads: Writes,
    /// The real API server's CPU time.
    server_cpu: Option<Duration>,
    /// Watches the real API server closed because their client fell behind (every
    /// client's).
    closed_watches: Option<usize>,
    /// The phase's wall time.
    wall: Duration,
    /// Requests of any kind by client (the User-Agent's product: `kubelet-gitops` the
    /// reconciler, `agent-double` the agents, `kubelet` the churn): the sim's log only.
    by_client: Option<BTreeMap<String, u64>>,
}

impl Counted {
    fn get(&self, verb: &str, resource: &str) -> usize {
        self.writes
            .get(&(verb.to_string(), resource.to_string()))
            .copied()
            .unwrap_or(0)
    }

    fn total(&self) -> usize {
        self.writes.values().sum()
    }

    /// Requests a second per 1,000 nodes of the fleet from `client` (None on the real
    /// server).
    fn load(&self, client: &str) -> Option<f64> {
        let n = self.by_client.as_ref()?.get(client).copied().unwrap_or(0);
        Some(n as f64 / self.wall.as_secs_f64().max(1e-9) / (fleet_nodes() as f64 / 1000.0))
    }

    /// `node patches / ConfigMaps created / other writes`.
    fn summary(&self) -> String {
        let (patches, creates) = (self.get("patch", "nodes"), self.get("create", "configmaps"));
        let other = self.total() - patches - creates;
        format!("{patches} / {creates} / {other}")
    }
}

/// Where the counting of a phase starts.
enum Mark {
    /// The sim's request log was cleared (then).
    Sim(Instant),
    /// The real server's counters and the double's accepted patches (then).
    Real(ApiserverMetrics, usize, Instant),
}

/// The API server a run goes against, with its config repository.
enum Server {
    Sim(Harness),
    Real {
        // Dropped in this order: the double, then the server (its processes killed),
        // then the directory.
        agent: AgentDouble,
        server: Box<RealServer>,
        repo: ConfigRepo,
        dir: tempfile::TempDir,
    },
}

impl Server {
    /// The simulated API server with the inventory's Nodes, and the double.
    async fn sim() -> (Server, Setup) {
        let n = fleet_nodes();
        let started = Instant::now();
        let mut h = Harness::start(inventory()).await;
        // The phases read the log's entries (the reconciler's patches node by node): keep
        // every one of a phase (the sim keeps 100,000 by default).
        h.sim.request_log().set_entry_limit(n * 16);
        h.start_agent(AgentOptions {
            apply_delay: Duration::from_millis(0),
            ..AgentOptions::default()
        })
        .await;
        let setup = Setup {
            server: started.elapsed(),
            nodes: None,
        };
        eprintln!("sim with {n} nodes up in {:.1?}", setup.server);
        (Server::Sim(h), setup)
    }

    /// etcd and kube-apiserver with deploy/base, the inventory's Nodes created, the double.
    async fn real(bins: kubelet_gitops_e2e::real::UpstreamBinaries) -> (Server, Setup) {
        let n = fleet_nodes();
        let started = Instant::now();
        let dir = tempfile::Builder::new()
            .prefix("kubelet-gitops-bench-")
            .tempdir()
            .expect("temp dir");
        let server = RealServer::start(&dir.path().join("cluster"), bins).await;
        let up = started.elapsed();
        let created = server.create_nodes(&inventory(), CREATE_CONCURRENCY).await;
        eprintln!(
            "real: control plane and deploy/base up in {up:.1?}; {n} Nodes created in {created:.1?} ({CREATE_CONCURRENCY} at a time)"
        );
        let agent = AgentDouble::start(
            server.admin_kubeconfig(),
            AgentOptions {
                apply_delay: Duration::from_millis(0),
                ..AgentOptions::default()
            },
        )
        .await;
        let repo = ConfigRepo::init(&dir.path().join("repo"));
        let server = Server::Real {
            agent,
            server: Box::new(server),
            repo,
            dir,
        };
        (
            server,
            Setup {
                server: up,
                nodes: Some(created),
            },
        )
    }

    fn repo(&self) -> &ConfigRepo {
        match self {
            Server::Sim(h) => &h.repo,
            Server::Real { repo, .. } => repo,
        }
    }

    fn dir(&self) -> &Path {
        match self {
            Server::Sim(h) => h.dir.path(),
            Server::Real { dir, .. } => dir.path(),
        }
    }

    /// A kubeconfig that may write Node status (the churn's, as the kubelets).
    fn admin_kubeconfig(&self) -> PathBuf {
        match self {
            Server::Sim(h) => h.sim.kubeconfig_path().to_path_buf(),
            Server::Real { server, .. } => server.admin_kubeconfig().to_path_buf(),
        }
    }

    /// The reconciler's kubeconfig.
    fn kubeconfig(&self) -> PathBuf {
        match self {
            Server::Sim(h) => h.sim.kubeconfig_path().to_path_buf(),
            Server::Real { server, .. } => server.reconciler_kubeconfig.clone(),
        }
    }

    fn nodes(&self) -> Vec<NodeView> {
        match self {
            Server::Sim(h) => h.nodes().iter().map(NodeView::from_value).collect(),
            Server::Real { server, .. } => server.nodes(),
        }
    }

    /// Waits until `done` holds for every node, reading them all each time. A read of
    /// 100,000 nodes takes seconds of CPU that the server, the double and the
    /// reconciler share: the wait sleeps four times as long as its last read took (at
    /// least 20 ms), so reading is at most a fifth of its time. Prints progress every
    /// 30 s.
    async fn wait_nodes(&self, what: &str, done: impl Fn(&[NodeView]) -> bool) {
        let start = Instant::now();
        let mut said = Instant::now();
        loop {
            let read = Instant::now();
            let nodes = self.nodes();
            if done(&nodes) {
                return;
            }
            let settled = nodes.iter().filter(|n| n.settled_done()).count();
            let seen = format!("{settled} of {} nodes Done", nodes.len());
            assert!(
                start.elapsed() < *LIMIT,
                "{what}: not reached in {:?}; {seen}",
                *LIMIT
            );
            if said.elapsed() > Duration::from_secs(30) {
                eprintln!(
                    "{what}: {seen} after {:.0?}{}",
                    start.elapsed(),
                    self.node_reads()
                );
                said = Instant::now();
            }
            let took = read.elapsed();
            tokio::time::sleep((took * 4).max(Duration::from_millis(20))).await;
        }
    }

    /// On the sim: the lists and watches of Nodes so far, by client (a client whose
    /// watch fell behind lists again).
    fn node_reads(&self) -> String {
        let Server::Sim(h) = self else {
            return String::new();
        };
        let reads: Vec<String> = h
            .sim
            .request_log()
            .counts_by_client()
            .into_iter()
            .filter(|((_, verb, resource), _)| {
                resource == "nodes" && (verb == "list" || verb == "watch")
            })
            .map(|((client, verb, _), n)| format!("{client} {verb} {n}"))
            .collect();
        format!("; node reads: {}", reads.join(", "))
    }

    /// Starts counting.
    async fn mark(&self) -> Mark {
        match self {
            Server::Sim(h) => {
                h.sim.request_log().reset();
                Mark::Sim(Instant::now())
            }
            Server::Real { agent, server, .. } => {
                let (metrics, patches) = server.settled_metrics(agent).await;
                Mark::Real(metrics, patches, Instant::now())
            }
        }
    }

    /// What was sent since `mark`.
    async fn count(&self, mark: Mark) -> Counted {
        match (self, mark) {
            (Server::Sim(h), Mark::Sim(at)) => {
                let wall = at.elapsed();
                let log = h.sim.request_log();
                let entries = log.entries();
                let mut by_client = BTreeMap::new();
                for ((client, _, _), n) in log.counts_by_client() {
                    *by_client.entry(client).or_default() += n;
                }
                Counted {
                    writes: reconciler_writes(&entries),
                    requests: entries
                        .iter()
                        .filter(|e| matches!(writer(e), Writer::Reconciler(_)))
                        .count(),
                    most_per_node: Some(
                        assignments_per_node(&entries)
                            .values()
                            .max()
                            .copied()
                            .unwrap_or(0),
                    ),
                    server_own: 0,
                    reads: entries
                        .iter()
                        .filter(|e| matches!(writer(e), Writer::Reconciler(_)))
                        .filter(|e| {
                            !matches!(e.verb.as_str(), "create" | "update" | "patch" | "delete")
                        })
                        .fold(Writes::new(), |mut m, e| {
                            *m.entry((e.verb.clone(), e.resource.clone())).or_default() += 1;
                            m
                        }),
                    server_cpu: None,
                    closed_watches: None,
                    wall,
                    by_client: Some(by_client),
                }
            }
            (Server::Real { agent, server, .. }, Mark::Real(before, agent_before, at)) => {
                let wall = at.elapsed();
                let (after, agent_after) = server.settled_metrics(agent).await;
                let mut writes = after.writes_since(&before);
                let key = ("patch".to_string(), "nodes".to_string());
                let agents = agent_after - agent_before;
                let nodes = writes.get(&key).copied().unwrap_or(0);
                writes.insert(key, nodes.saturating_sub(agents));
                let server_own = writes
                    .iter()
                    .filter(|((_, resource), _)| resource == "leases")
                    .map(|(_, n)| n)
                    .sum();
                writes.retain(|(_, resource), n| *n > 0 && resource != "leases");
                Counted {
                    writes,
                    requests: after.dispatched_since(&before, SERVICE_ACCOUNTS),
                    most_per_node: None,
                    server_own,
                    reads: after.reads_since(&before),
                    server_cpu: Some(after.cpu_since(&before)),
                    closed_watches: Some(after.terminated_watchers_since(&before).values().sum()),
                    wall,
                    by_client: None,
                }
            }
            _ => unreachable!("a mark of another server"),
        }
    }

    async fn shutdown(self) {
        match self {
            Server::Sim(h) => h.shutdown().await,
            Server::Real {
                agent, server, dir, ..
            } => {
                agent.stop().await;
                drop(server);
                if std::env::var_os(kubelet_gitops_e2e::KEEP_ENV).is_some() {
                    eprintln!("real: kept {} (logs in cluster/logs)", dir.keep().display());
                }
            }
        }
    }
}

/// How long the server took to be ready.
struct Setup {
    /// Up (the sim: with its Nodes; the real one: control plane and deploy/base).
    server: Duration,
    /// Creating the Node objects (the real server).
    nodes: Option<Duration>,
}

/// One server's figures.
struct Figures {
    setup: Setup,
    initial: Duration,
    initial_counted: Counted,
    idle_polls: f64,
    idle: Counted,
    cpu_per_poll: Duration,
    /// Node status patches sent by the churn phase.
    churn_events: usize,
    /// The reconciler's CPU over the churn phase.
    churn_cpu: Duration,
    /// The reconciler's writes during the churn.
    churned: Counted,
    reconcile_wall: Duration,
    change: Duration,
    changed: Counted,
    /// Nodes of pool big on a new ConfigMap, and Done on it.
    changed_nodes: usize,
    /// The reconciler's failed API requests over the run (its own count).
    api_errors: f64,
    hwm_mb: f64,
    rss_mb: f64,
}

impl Figures {
    fn patches(&self) -> usize {
        self.changed.get("patch", "nodes")
    }

    fn creates(&self) -> usize {
        self.changed.get("create", "configmaps")
    }

    fn other(&self) -> usize {
        self.changed.total() - self.patches() - self.creates()
    }

    /// Whether the targets hold: one write per node and one ConfigMap per pool in the
    /// initial rollout, none while idle, one per node of the changed pool and its
    /// ConfigMap. The sim's log shows one write per node node by node; on the real
    /// server, 1,000 patches and 1,000 nodes changed can only be one each.
    /// The reconciler's CPU per 1,000 status events.
    fn churn_per_thousand(&self) -> Duration {
        self.churn_cpu * 1000 / (self.churn_events.max(1) as u32)
    }

    fn ok(&self) -> bool {
        let (n, p) = (fleet_nodes(), fleet_pools());
        self.initial_counted.summary() == format!("{n} / {p} / 0")
            && self.idle.writes.is_empty()
            && self.churned.writes.is_empty()
            && self.churn_events > 0
            && self.cpu_per_poll < Duration::from_millis(50)
            && self.patches() == big_pool()
            && self.creates() == 1
            && self.other() == 0
            && self.changed_nodes == big_pool()
            && self.changed.most_per_node.is_none_or(|m| m == 1)
    }
}

/// Sends Node status heartbeats (a strategic merge patch of the Ready condition's
/// heartbeat time, as a kubelet's status report) to every node in turn, at
/// `BENCH_CHURN_RATE` a second (1,000) for `BENCH_CHURN_SECONDS` (10). Returns how many
/// the API server accepted.
async fn churn(server: &Server) -> usize {
    let (rate, seconds) = (
        env_num::<u64>("BENCH_CHURN_RATE", 1_000),
        env_num::<u64>("BENCH_CHURN_SECONDS", 10),
    );
    let client = client_for(&server.admin_kubeconfig(), "kubelet/v1.36.3 (bench churn)").await;
    let api: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client);
    let names: Vec<String> = server.nodes().into_iter().map(|n| n.name).collect();
    let ticks = seconds * 20;
    let per_tick = (rate / 20).max(1) as usize;
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    let mut sent = 0;
    let mut accepted = 0;
    for _ in 0..ticks {
        tick.tick().await;
        let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        let patch = serde_json::json!({"status": {"conditions": [
            {"type": "Ready", "status": "True", "lastHeartbeatTime": now}
        ]}});
        let batch = (0..per_tick).map(|k| {
            let name = &names[(sent + k) % names.len()];
            let (api, patch) = (&api, &patch);
            async move {
                api.patch_status(
                    name,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Strategic(patch),
                )
                .await
                .is_ok()
            }
        });
        accepted += futures::future::join_all(batch)
            .await
            .into_iter()
            .filter(|ok| *ok)
            .count();
        sent += per_tick;
    }
    accepted
}

/// The phases against `server`.
async fn measure(server: &Server, setup: Setup, label: &str) -> Figures {
    write_repo(server.repo(), 100);
    server.repo().commit(&format!("{} pools", fleet_pools()));
    let remote = GitRemote::start(
        &server.dir().join("remote"),
        server.dir().join("git-daemon.log"),
    )
    .await
    .expect("git daemon");
    publish(server.repo(), &remote);
    let url = remote.url();
    let admin_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port");
    let admin = admin_port.to_string();

    let mark = server.mark().await;
    let t = Instant::now();
    let child = Reconciler::spawn(
        &url,
        &server.kubeconfig(),
        &server.dir().join("cache"),
        &admin,
    );
    let pid = child.0.id();
    eprintln!("{label}: kubelet-gitops run is pid {pid}");
    server
        .wait_nodes("initial rollout", |nodes| {
            nodes.len() == fleet_nodes() && nodes.iter().all(NodeView::settled_done)
        })
        .await;
    let initial = t.elapsed();
    eprintln!("{label}: initial rollout done in {initial:.1?}");
    let initial_counted = server.count(mark).await;

    // Idle: let the caches settle (at 100,000 nodes the reconciler's watch still
    // delivers the rollout's last reports seconds after the nodes are Done, and each
    // brings a reconcile), then measure whole poll cycles.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let reconciles = "kubelet_gitops_reconcile_duration_seconds_count";
    let settling = Instant::now();
    let mut before = metric(admin_port, reconciles).await;
    loop {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let now = metric(admin_port, reconciles).await;
        if now == before || settling.elapsed() > Duration::from_secs(120) {
            break;
        }
        before = now;
    }
    eprintln!(
        "{label}: reconciler settled {:.1?} after the rollout",
        settling.elapsed() + Duration::from_secs(2)
    );
    let mark = server.mark().await;
    let polls = "kubelet_gitops_git_polls_total{result=\"unchanged\"}";
    let (p0, c0) = (metric(admin_port, polls).await, cpu_ns(pid));
    let r_sum0 = metric(admin_port, "kubelet_gitops_reconcile_duration_seconds_sum").await;
    let r_cnt0 = metric(
        admin_port,
        "kubelet_gitops_reconcile_duration_seconds_count",
    )
    .await;
    // BENCH_IDLE_POLLS lengthens the idle phase (to attach a profiler to the pid above).
    let idle_polls = env_num("BENCH_IDLE_POLLS", IDLE_POLLS);
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
    let idle = server.count(mark).await;
    eprintln!(
        "{label}: idle: {} polls in {:.1?}, {:.1?} of CPU",
        p1 - p0,
        idle.wall,
        Duration::from_nanos(c1 - c0)
    );
    let cpu_per_poll = Duration::from_nanos((c1 - c0) / ((p1 - p0) as u64).max(1));
    let polls_counted = p1 - p0;
    let reconcile_wall = Duration::from_secs_f64((r_sum1 - r_sum0) / (r_cnt1 - r_cnt0).max(1.0));

    // Status churn: heartbeats as kubelets post them, at BENCH_CHURN_RATE a second for
    // BENCH_CHURN_SECONDS; none of them is news to the reconciler.
    let mark = server.mark().await;
    let (p0, c0) = (metric(admin_port, polls).await, cpu_ns(pid));
    let churn_started = Instant::now();
    let churn_events = churn(server).await;
    let churn_wall = churn_started.elapsed();
    // The watch delivers the last events after the last patch returned.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (p1, c1) = (metric(admin_port, polls).await, cpu_ns(pid));
    // Less the polls' own CPU (measured above) meanwhile.
    let polls_cpu = cpu_per_poll.as_nanos() as u64 * (p1 - p0) as u64;
    let churn_cpu = Duration::from_nanos((c1 - c0).saturating_sub(polls_cpu));
    let mut churned = server.count(mark).await;
    // The real server's metrics do not say who wrote: the churn's status patches are its.
    if let Some(n) = churned
        .writes
        .get_mut(&("patch".to_string(), "nodes/status".to_string()))
    {
        *n = n.saturating_sub(churn_events);
    }
    churned.writes.retain(|_, n| *n > 0);
    eprintln!(
        "{label}: {churn_events} status patches in {churn_wall:.1?}; reconciler CPU {churn_cpu:.1?}"
    );

    // One pool changes.
    let old: BTreeMap<String, Option<String>> = server
        .nodes()
        .iter()
        .filter(|n| n.pool.as_deref() == Some("big"))
        .map(|n| (n.name.clone(), n.desired_name()))
        .collect();
    let moved = |n: &NodeView| {
        old.get(&n.name)
            .is_some_and(|o| n.settled_done() && n.desired_name() != *o)
    };
    let mark = server.mark().await;
    write_repo(server.repo(), 101);
    let t = Instant::now();
    server.repo().commit("change pool big");
    publish(server.repo(), &remote);
    server
        .wait_nodes("pool big rolled out", |nodes| {
            nodes.iter().filter(|n| moved(n)).count() == old.len()
        })
        .await;
    let change = t.elapsed();
    let changed = server.count(mark).await;
    let changed_nodes = server.nodes().iter().filter(|n| moved(n)).count();
    let api_errors = metric_sum(admin_port, "kubelet_gitops_api_errors_total").await;
    let hwm_mb = status_kb(pid, "VmHWM") as f64 / 1024.0;
    let rss_mb = status_kb(pid, "VmRSS") as f64 / 1024.0;
    drop(child);
    Figures {
        setup,
        initial,
        initial_counted,
        idle_polls: polls_counted,
        idle,
        cpu_per_poll,
        churn_events,
        churn_cpu,
        churned,
        reconcile_wall,
        change,
        changed,
        changed_nodes,
        api_errors,
        hwm_mb,
        rss_mb,
    }
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
    // First, so that a required but missing real server fails before the sim run.
    let bins = upstream("the reconcile benchmark's real kube-apiserver column");
    let (server, setup) = Server::sim().await;
    let sim = measure(&server, setup, "sim").await;
    server.shutdown().await;
    eprintln!("sim run took {:.1?}", started.elapsed());

    let bins = bins.and_then(|b| {
        if PARAMS.servers.contains("real") {
            Ok(b)
        } else {
            Err(format!("not asked for (BENCH_SERVERS={})", PARAMS.servers))
        }
    });
    let real = match bins {
        Ok(bins) => {
            let t = Instant::now();
            let (server, setup) = Server::real(bins).await;
            let figures = measure(&server, setup, "real").await;
            server.shutdown().await;
            eprintln!("real run took {:.1?}", t.elapsed());
            Ok(figures)
        }
        Err(why) => Err(why),
    };

    print_table(&sim, real.as_ref().ok());
    if let Err(why) = &real {
        println!("SKIPPED: the real kube-apiserver column: {why}");
    }
    println!("benchmark took {:.1?}", started.elapsed());
    let ok = sim.ok() && real.as_ref().ok().is_none_or(Figures::ok);
    println!(
        "{}",
        if ok {
            "all targets met"
        } else {
            "TARGETS MISSED"
        }
    );
    if !ok {
        std::process::exit(1);
    }
}

fn row(what: &str, sim: String, real: Option<String>, target: &str) {
    let real = real.unwrap_or_else(|| "skipped".into());
    println!("| {what:<58} | {sim:>13} | {real:>13} | {target:<23} |");
}

/// A figure of each server: the real one's `None` when skipped.
fn both<T>(sim: &Figures, real: Option<&Figures>, f: impl Fn(&Figures) -> T) -> (T, Option<T>) {
    (f(sim), real.map(f))
}

fn print_table(sim: &Figures, real: Option<&Figures>) {
    let (n, p, b) = (fleet_nodes(), fleet_pools(), big_pool());
    let line = |what: &str, (s, r): (String, Option<String>), target: &str| row(what, s, r, target);
    let dur = |d: Duration| format!("{d:.2?}");
    println!();
    println!(
        "kubelet-gitops run: {n} nodes, {p} pools; agents played by a test double; sim = simulated API server, real = kube-apiserver v1.36 + etcd"
    );
    println!();
    println!(
        "| {:<58} | {:>13} | {:>13} | {:<23} |",
        "measure", "sim", "real", "target"
    );
    println!(
        "|{}|{}|{}|{}|",
        "-".repeat(60),
        "-".repeat(15),
        "-".repeat(15),
        "-".repeat(25)
    );
    line(
        "setup: API server up (sim: with its Nodes)",
        both(sim, real, |f| dur(f.setup.server)),
        "",
    );
    line(
        &format!("setup: {n} Node objects created, {CREATE_CONCURRENCY} at a time"),
        (
            "(in setup)".into(),
            real.map(|f| f.setup.nodes.map(dur).unwrap_or_default()),
        ),
        "",
    );
    line(
        &format!("initial rollout, {n} nodes at maxUnavailable 100% (wall)"),
        both(sim, real, |f| dur(f.initial)),
        "",
    );
    line(
        "initial: node patches / ConfigMaps created / other writes",
        both(sim, real, |f| f.initial_counted.summary()),
        &format!("{n} / {p} / 0"),
    );
    line(
        "initial: API requests of any kind by the reconciler",
        both(sim, real, |f| f.initial_counted.requests.to_string()),
        "",
    );
    line(
        &format!("idle: API writes during {} unchanged polls", sim.idle_polls),
        both(sim, real, |f| f.idle.total().to_string()),
        "0",
    );
    line(
        "idle: API requests of any kind by the reconciler",
        both(sim, real, |f| f.idle.requests.to_string()),
        "",
    );
    line(
        "idle: the API server's own writes meanwhile (its Lease)",
        both(sim, real, |f| f.idle.server_own.to_string()),
        "",
    );
    line(
        "idle: CPU per poll cycle (fetch; a reconcile only when unsettled)",
        both(sim, real, |f| dur(f.cpu_per_poll)),
        "< 50 ms",
    );
    line(
        "idle: wall time of a reconcile during the idle polls (0: none ran)",
        both(sim, real, |f| dur(f.reconcile_wall)),
        "",
    );
    line(
        "status churn: Node status patches accepted (as kubelets')",
        both(sim, real, |f| f.churn_events.to_string()),
        "",
    );
    line(
        "status churn: reconciler CPU per 1,000 status events (polls' CPU taken out)",
        both(sim, real, |f| dur(f.churn_per_thousand())),
        "",
    );
    line(
        "status churn: reconciler's writes",
        both(sim, real, |f| f.churned.total().to_string()),
        "0",
    );
    line(
        &format!(
            "change 1 pool of {b} nodes (maxUnavailable {}): wall, commit to all Done",
            PARAMS.big_max_unavailable
        ),
        both(sim, real, |f| dur(f.change)),
        "",
    );
    line(
        "change: node patches",
        both(sim, real, |f| f.patches().to_string()),
        &format!("= {b} (one per node)"),
    );
    line(
        "change: most patches of one node",
        both(sim, real, |f| {
            f.changed
                .most_per_node
                .map_or_else(|| "n/a".to_string(), |m| m.to_string())
        }),
        "1",
    );
    line(
        "change: ConfigMaps created",
        both(sim, real, |f| f.creates().to_string()),
        "1",
    );
    line(
        "change: other writes",
        both(sim, real, |f| f.other().to_string()),
        "0",
    );
    line(
        "change: API requests of any kind by the reconciler",
        both(sim, real, |f| f.changed.requests.to_string()),
        "",
    );
    line(
        "change: nodes of pool big Done on the new ConfigMap",
        both(sim, real, |f| f.changed_nodes.to_string()),
        &big_pool().to_string(),
    );
    let cpu = |c: &Counted| c.server_cpu.map_or_else(|| "n/a".to_string(), dur);
    line(
        "real API server CPU, all clients: initial rollout",
        both(sim, real, |f| cpu(&f.initial_counted)),
        "",
    );
    line(
        "real API server CPU, all clients: the change",
        both(sim, real, |f| cpu(&f.changed)),
        "",
    );
    line(
        "real API server: watches it closed, client too slow (all)",
        both(sim, real, |f| {
            let phases = [&f.initial_counted, &f.idle, &f.changed].map(|c| c.closed_watches);
            match phases {
                [Some(a), Some(b), Some(c)] => format!("{a} / {b} / {c}"),
                _ => "n/a".into(),
            }
        }),
        "initial / idle / change",
    );
    line(
        "reconciler's failed API requests, whole run (its metrics)",
        both(sim, real, |f| (f.api_errors as u64).to_string()),
        "",
    );
    line(
        "reconciler peak RSS (VmHWM)",
        both(sim, real, |f| format!("{:.1} MiB", f.hwm_mb)),
        "",
    );
    line(
        "reconciler RSS at the end",
        both(sim, real, |f| format!("{:.1} MiB", f.rss_mb)),
        "",
    );
    let load = |client: &'static str| {
        move |f: &Figures| {
            let phases = [&f.idle, &f.churned, &f.changed].map(|c| c.load(client));
            match phases {
                [Some(a), Some(b), Some(c)] => format!("{a:.2} / {b:.2} / {c:.2}"),
                _ => "n/a".into(),
            }
        }
    };
    line(
        "API load, req/s per 1,000 nodes: reconciler",
        both(sim, real, load("kubelet-gitops")),
        "idle / churn / change",
    );
    line(
        "API load, req/s per 1,000 nodes: agents (the double)",
        both(sim, real, load(AGENT_UA)),
        "idle / churn / change",
    );
    line(
        "API load, req/s per 1,000 nodes: kubelets (the churn)",
        both(sim, real, load("kubelet")),
        "idle / churn / change",
    );
    println!();
    if real.is_some() {
        println!(
            "real: writes from kube-apiserver's apiserver_request_total, less the agent double's accepted node patches and the API server's Lease renewals; requests of any kind from the `service-accounts` flow schema (the reconciler's token); most patches of one node is not in the metrics: {b} patches and {b} nodes changed means one each"
        );
    }
    for (label, f) in [("sim", Some(sim)), ("real", real)].into_iter() {
        let Some(f) = f else { continue };
        let who = if label == "sim" {
            "the reconciler's"
        } else {
            "every client's"
        };
        for (phase, c) in [
            ("initial", &f.initial_counted),
            ("idle", &f.idle),
            ("change", &f.changed),
        ] {
            println!("{label} {phase}: reads ({who}): {:?}", c.reads);
        }
    }
    for (label, f) in [("sim", Some(sim)), ("real", real)] {
        if let Some(f) = f.filter(|f| !f.ok()) {
            println!(
                "{label}: idle writes {:?}; change writes {:?}",
                f.idle.writes, f.changed.writes
            );
        }
    }
}
