//! `kubelet-gitops demo`: the whole loop on one machine in under a minute.
//!
//! 1. A simulated cluster ([`kubelet_gitops_sim`]) with the 12 nodes of
//!    `examples-repo/inventory.yaml` (pools `general`, `gpu`, `high-memory`), a stand-in
//!    kubelet per node, in-process.
//! 2. A git repository holding a copy of `examples-repo/` ([`repo`]), served by `file://`
//!    URL, with the rollout timings shortened so the demo fits in a minute.
//! 3. The reconciler in-process ([`crate::controller::start`]), polling the repository,
//!    and one real `kubelet-gitops-agent` process per node ([`agents`], [`nodes`]),
//!    restarting its stand-in kubelet through the sim's control endpoint with curl.
//! 4. Three commits, each shown live per pool ([`progress`]): the examples themselves
//!    (every node leaves its local config), a change to one pool (`general` maxPods), and
//!    a config the kubelet cannot start with (`gpu` cgroupRoot), which the canary rolls
//!    back and which halts the pool with no other node touched.
//! 5. The commit statuses from the repository's git notes, and where everything is on
//!    disk.
//!
//! The demo checks its own story: a step that does not reach its goal within its time
//! limit, or reaches another outcome (a node outside the halted canary touched), stops it
//! with an error naming the step and showing where every pool and node stood.

mod agents;
mod error;
mod nodes;
mod progress;
mod repo;
mod view;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kubelet_gitops_sim::cluster::{Sim, SimConfig};
use kubelet_gitops_sim::inventory::Inventory;
use kubelet_gitops_sim::kubelet::KubeletOptions;
use kubelet_gitops_sim::resources::kinds;
use kubelet_gitops_sim::store::WriteOptions;
use serde_json::json;

use crate::controller::{self, KubeSource, RunConfig, RunningController};
use crate::git::{Backoff, GitAuth, GitConfig};
use crate::rollout::{PoolPhase, PoolReport};
use crate::state::SyncState;

pub use error::DemoError;

use agents::Agents;
use nodes::{AgentArgs, NodePaths};
use progress::{Board, pool_lines};
use repo::{DemoRepo, GPU_CGROUP_ROOT};
use view::{NodeView, short, snapshot};

/// How fast the demo goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Speed {
    /// Pauses after each step so a person can read it.
    Normal,
    /// No pauses (tests, CI).
    Fast,
}

/// What `kubelet-gitops demo` was asked for.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Keep everything here (must be absent or empty); `None`: a temporary directory,
    /// removed at the end.
    pub workdir: Option<PathBuf>,
    /// The agent binary; `None`: next to this executable, else on `PATH`.
    pub agent_bin: Option<PathBuf>,
    pub speed: Speed,
    /// Draw progress bars (stdout is a terminal); else print plain lines.
    pub live: bool,
}

/// The rollout timings of the demo's repository (the examples' minutes and hours would
/// make the demo last an hour).
pub const HEALTH_TIMEOUT: &str = "10s";
/// See [`HEALTH_TIMEOUT`].
pub const LKG_GRACE: &str = "5s";

/// Every step's time limit. The demo itself takes well under a minute; these bound a
/// step on a slow or loaded machine.
const START_LIMIT: Duration = Duration::from_secs(60);
const ROLLOUT_LIMIT: Duration = Duration::from_secs(90);

/// How often the demo looks at the cluster while it waits.
const TICK: Duration = Duration::from_millis(100);

/// How often the reconciler polls the repository.
const POLL: Duration = Duration::from_millis(500);

/// How long the reconciler's final statuses may take to reach the remote's notes.
const NOTES_LIMIT: Duration = Duration::from_secs(30);

/// How the stand-in kubelets behave: fast restarts, and systemd's `Restart=always` after
/// 2 s, so a kubelet that cannot start crash-loops as on a real node.
fn kubelet_options() -> KubeletOptions {
    KubeletOptions {
        start_delay: Duration::from_millis(100),
        not_ready_delay: Duration::from_secs(1),
        lease_renew_interval: Duration::from_secs(1),
        restart_after_exit: Some(Duration::from_secs(2)),
        ..KubeletOptions::default()
    }
}

/// The work directory: temporary (removed at the end) or the user's (kept).
enum Workdir {
    Temp {
        dir: tempfile::TempDir,
        path: PathBuf,
    },
    Kept(PathBuf),
}

impl Workdir {
    fn path(&self) -> &Path {
        match self {
            Workdir::Temp { path, .. } | Workdir::Kept(path) => path,
        }
    }
}

/// How long each act took.
#[derive(Debug, Clone, Default)]
pub struct DemoSummary {
    /// From the start to the statuses printed.
    pub elapsed: Duration,
    /// Act name and duration.
    pub acts: Vec<(&'static str, Duration)>,
}

/// What the demo remembers from one act for the next.
struct Act1 {
    /// The pool reports once everything was Complete.
    pools: Vec<PoolReport>,
}

/// A running demo: its work directory and everything it started, so that an interrupted
/// run can still be cleaned up ([`Demo::shutdown`]).
pub struct Demo {
    options: DemoOptions,
    agent_bin: PathBuf,
    workdir: Workdir,
    sim: Option<Sim>,
    controller: Option<RunningController>,
    agents: Agents,
    repo: Option<DemoRepo>,
    started: Instant,
    summary: DemoSummary,
}

impl Demo {
    /// Checks this machine (the agent binary, curl) and the options, and creates the work
    /// directory.
    pub fn new(options: DemoOptions) -> Result<Demo, DemoError> {
        let exe = std::env::current_exe().ok();
        let path = std::env::var_os("PATH");
        let agent_bin = agents::find_agent(
            options.agent_bin.as_deref(),
            exe.as_deref(),
            path.as_deref(),
        )?;
        if agents::on_path("curl", path.as_deref()).is_none() {
            return Err(DemoError::NoCurl);
        }
        let workdir = match &options.workdir {
            Some(dir) => {
                if dir.exists() {
                    let mut entries = std::fs::read_dir(dir).map_err(error::io("read", dir))?;
                    if entries.next().is_some() {
                        return Err(DemoError::WorkdirNotEmpty { path: dir.clone() });
                    }
                }
                std::fs::create_dir_all(dir).map_err(error::io("create", dir))?;
                Workdir::Kept(dir.canonicalize().map_err(error::io("resolve", dir))?)
            }
            None => {
                let dir = tempfile::Builder::new()
                    .prefix("kubelet-gitops-demo-")
                    .tempdir()
                    .map_err(error::io("create", std::env::temp_dir()))?;
                let path = dir
                    .path()
                    .canonicalize()
                    .map_err(error::io("resolve", dir.path()))?;
                Workdir::Temp { dir, path }
            }
        };
        let logs = workdir.path().join("logs");
        std::fs::create_dir_all(&logs).map_err(error::io("create", &logs))?;
        Ok(Demo {
            options,
            agent_bin,
            workdir,
            sim: None,
            controller: None,
            agents: Agents::default(),
            repo: None,
            started: Instant::now(),
            summary: DemoSummary::default(),
        })
    }

    /// The work directory.
    pub fn workdir(&self) -> &Path {
        self.workdir.path()
    }

    /// Where the reconciler's and the sim's logs go (they run in this process).
    pub fn log_file(&self) -> PathBuf {
        self.workdir().join("logs/reconciler.log")
    }

    fn kubeconfig(&self) -> PathBuf {
        self.workdir().join("kubeconfig")
    }

    fn agent_log(&self, node: &str) -> PathBuf {
        self.workdir().join(format!("logs/agent-{node}.log"))
    }

    /// Runs the demo. Cancel-safe: whatever was started is stopped by
    /// [`Demo::shutdown`].
    pub async fn run(&mut self) -> Result<DemoSummary, DemoError> {
        self.started = Instant::now();
        println!(
            "kubelet-gitops demo: a config repository, the reconciler, 12 simulated nodes in 3 pools with a stand-in kubelet each, and a real agent per node.\n"
        );
        self.start_cluster().await?;
        let c1 = self.create_repo()?;
        self.start_loop().await?;

        let act1 = self.first_rollout(&c1).await?;
        self.pause().await;
        self.second_rollout().await?;
        self.pause().await;
        self.bad_rollout(&act1).await?;
        self.pause().await;
        self.print_statuses().await?;
        self.summary.elapsed = self.started.elapsed();
        self.print_locations();
        Ok(self.summary.clone())
    }

    async fn pause(&self) {
        if self.options.speed == Speed::Normal {
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }

    fn sim(&self) -> &Sim {
        // Set by start_cluster, the first step; every later step runs after it.
        match &self.sim {
            Some(sim) => sim,
            None => unreachable!("the cluster is started before any other step"),
        }
    }

    fn repo(&self) -> &DemoRepo {
        match &self.repo {
            Some(repo) => repo,
            None => unreachable!("the repository is created before any rollout"),
        }
    }

    /// Step 1: the simulated cluster, the namespace, the nodes' kubeadm files.
    async fn start_cluster(&mut self) -> Result<(), DemoError> {
        let t = Instant::now();
        println!("==> Starting a simulated cluster (examples-repo/inventory.yaml)");
        let inventory =
            Inventory::parse("examples-repo/inventory.yaml", repo::INVENTORY.as_bytes())
                .map_err(|e| DemoError::Inventory(Box::new(e)))?;
        let mut config = SimConfig::new(inventory, self.workdir());
        config.kubelet = kubelet_options();
        config.settle_timeout = START_LIMIT;
        let sim = tokio::time::timeout(START_LIMIT, Sim::start(config))
            .await
            .map_err(|_| DemoError::Timeout {
                step: "start the simulated cluster",
                timeout: START_LIMIT.as_secs(),
                state: String::new(),
            })?
            .map_err(|e| DemoError::Sim(Box::new(e)))?;
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kubelet-gitops"}});
        sim.store()
            .create(kinds::namespaces(), None, ns, &WriteOptions::default())
            .map_err(|e| DemoError::SimSetup {
                what: "create namespace kubelet-gitops".into(),
                message: e.message,
            })?;
        let mut pools: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for node in &sim.inventory().nodes {
            let pool = node
                .labels
                .get("node.kubernetes.io/pool")
                .cloned()
                .unwrap_or_default();
            pools.entry(pool).or_default().push(node.name.clone());
        }
        for (pool, names) in &pools {
            println!("    {pool:<12} {}", names.join(" "));
        }
        println!(
            "    API server {}, {} stand-in kubelets running ({:.1}s)",
            sim.url(),
            sim.kubelets().len(),
            t.elapsed().as_secs_f64()
        );
        if matches!(self.workdir, Workdir::Kept(_)) {
            println!(
                "    watch it: kubectl --kubeconfig {} get nodes -L node.kubernetes.io/pool -L kubelet-gitops.io/canary",
                self.kubeconfig().display()
            );
        }
        self.sim = Some(sim);
        Ok(())
    }

    /// Step 2: the config repository and its first commit.
    fn create_repo(&mut self) -> Result<String, DemoError> {
        println!("\n==> Copying examples-repo into a git repository");
        let repo = DemoRepo::create(
            &self.workdir().join("repo"),
            &self.workdir().join("remote.git"),
            HEALTH_TIMEOUT,
            LKG_GRACE,
        )?;
        let c1 = repo.commit(&format!(
            "Import the example configuration (demo timings: healthTimeout {HEALTH_TIMEOUT}, lkgGrace {LKG_GRACE})"
        ))?;
        let rendered = repo.render(&c1)?;
        println!(
            "    {}, pushed to {} (the forge), commit {}: base, pools {}",
            repo.path().display(),
            repo.url(),
            &c1[..7],
            rendered
                .pools
                .iter()
                .map(|p| p.spec.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!(
            "    demo timings: healthTimeout {HEALTH_TIMEOUT} and lkgGrace {LKG_GRACE} instead of the examples' minutes and hours"
        );
        self.repo = Some(repo);
        Ok(c1)
    }

    /// Step 3: one agent per node, then the reconciler.
    async fn start_loop(&mut self) -> Result<(), DemoError> {
        let t = Instant::now();
        println!("\n==> Starting one agent per node, then the reconciler");
        let sim_url = self.sim().url();
        let kubeconfig = self.kubeconfig();
        let mut launches = Vec::new();
        for (name, kubelet) in self.sim().kubelets() {
            let paths = NodePaths::new(&self.sim().node_root(name));
            let args = AgentArgs {
                node: name,
                paths: &paths,
                kubeconfig: &kubeconfig,
                sim_url: &sim_url,
                kubelet_url: &kubelet.url(),
            }
            .to_args();
            launches.push((name.clone(), args, self.agent_log(name)));
        }
        for (name, args, log) in &launches {
            self.agents.spawn(name, &self.agent_bin, args, log)?;
        }
        // Every agent reports the node's local config once it has synced.
        self.watch("start the agents", START_LIMIT, None, |_, nodes| {
            nodes
                .iter()
                .all(|n| n.current.is_some() && n.last_known_good.is_some())
                .then_some(())
        })
        .await?;
        println!(
            "    {} agents ({}) report their nodes' local configs ({:.1}s)",
            self.agents.len(),
            self.agent_bin.display(),
            t.elapsed().as_secs_f64()
        );

        let git = GitConfig {
            url: self.repo().url(),
            branch: repo::BRANCH.into(),
            auth: GitAuth::None,
            cache_dir: self.workdir().join("reconciler-cache"),
            extra_refspecs: Vec::new(),
        };
        let mut config = RunConfig::new(git, KubeSource::Kubeconfig(self.kubeconfig()), "demo");
        config.interval = POLL;
        config.poll_backoff = Backoff {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(5),
        };
        config.min_reconcile_interval = Duration::from_millis(100);
        config.failure_backoff = (Duration::from_millis(500), Duration::from_secs(5));
        // Statuses as git notes (the default), pushed to the remote; progress within
        // `pending` every second rather than every minute.
        config.status.progress_interval = Duration::from_secs(1);
        config.status.redeliver_interval = Duration::from_secs(1);
        let running = controller::start(config)
            .await
            .map_err(DemoError::Reconciler)?;
        self.controller = Some(running);
        println!(
            "    reconciler: follows {} of {} every {}ms, statuses as git notes",
            repo::BRANCH,
            self.repo().url(),
            POLL.as_millis()
        );
        Ok(())
    }

    /// Act 1: the example configuration reaches every node.
    async fn first_rollout(&mut self, c1: &str) -> Result<Act1, DemoError> {
        let t = Instant::now();
        println!(
            "\n==> Rollout 1: commit {} brings every pool from the nodes' local configs to its config",
            &c1[..7]
        );
        let commit = c1.to_string();
        let pools = self
            .rollout("roll out the example configuration", c1, |s, _| {
                all_complete(s, &commit).then(|| s.pools.clone())
            })
            .await?;
        self.act("rollout 1", t);
        Ok(Act1 { pools })
    }

    /// Act 2: a change to one pool.
    async fn second_rollout(&mut self) -> Result<(), DemoError> {
        let t = Instant::now();
        let (old, new) = repo::GENERAL_MAX_PODS;
        let general = self.repo().read("pools/general.yaml")?;
        self.repo().write(
            "pools/general.yaml",
            &repo::raise_general_max_pods(&general)?,
        )?;
        let c2 = self
            .repo()
            .commit(&format!("general: {new} pods per node (was {old})"))?;
        let rendered = self.repo().render(&c2)?;
        let target = rendered
            .pool("general")
            .map(|p| p.configmap_name.clone())
            .unwrap_or_default();
        println!(
            "\n==> Rollout 2: commit {} \"general: maxPods {old} -> {new}\": a new ConfigMap {target}; the other pools' are unchanged",
            &c2[..7]
        );
        let commit = c2.clone();
        self.rollout("roll out general maxPods", &c2, |s, _| {
            all_complete(s, &commit).then_some(())
        })
        .await?;
        let nodes = snapshot(self.sim());
        for n in nodes
            .iter()
            .filter(|n| n.pool.as_deref() == Some("general"))
        {
            if let Some(m) = n.message.as_deref().filter(|m| m.contains("--max-pods")) {
                println!("    {}: {m}", n.name);
            }
        }
        self.act("rollout 2", t);
        Ok(())
    }

    /// Act 3: a config the canary's kubelet cannot start with.
    async fn bad_rollout(&mut self, act1: &Act1) -> Result<(), DemoError> {
        const STEP: &str = "roll out gpu cgroupRoot";
        let t = Instant::now();
        let gpu =
            act1.pools
                .iter()
                .find(|p| p.pool == "gpu")
                .ok_or_else(|| DemoError::Unexpected {
                    step: STEP,
                    problem: "the example has no gpu pool".into(),
                })?;
        let canary = gpu
            .canary
            .first()
            .cloned()
            .ok_or_else(|| DemoError::Unexpected {
                step: STEP,
                problem: "the gpu pool has no canary".into(),
            })?;
        let good = gpu.target.to_string();

        // The canary falls back to its last-known-good: wait until the config it runs
        // became that (lkgGrace after it was Done).
        let lkg_canary = canary.clone();
        let lkg_good = good.clone();
        self.watch(
            "promote the gpu config to last-known-good",
            START_LIMIT,
            None,
            move |_, nodes| {
                nodes
                    .iter()
                    .find(|n| n.name == lkg_canary)
                    .is_some_and(|n| n.last_known_good.as_deref() == Some(lkg_good.as_str()))
                    .then_some(())
            },
        )
        .await?;

        let (root, slice) = GPU_CGROUP_ROOT;
        let gpu_nodes: Vec<String> = snapshot(self.sim())
            .into_iter()
            .filter(|n| n.pool.as_deref() == Some("gpu"))
            .map(|n| n.name)
            .collect();
        for node in &gpu_nodes {
            let paths = NodePaths::new(&self.sim().node_root(node));
            nodes::block_cgroup(&paths.root, paths.cgroup_root, slice)?;
        }
        let before = snapshot(self.sim());
        let starts_before = self.kubelet_starts();

        let text = self.repo().read("pools/gpu.yaml")?;
        self.repo()
            .write("pools/gpu.yaml", &repo::gpu_cgroup_root(&text)?)?;
        let c3 = self
            .repo()
            .commit("gpu: GPU pods in their own cgroup slice")?;
        let rendered = self.repo().render(&c3)?;
        let bad_name = rendered
            .pool("gpu")
            .map(|p| p.configmap_name.clone())
            .unwrap_or_default();
        println!(
            "\n==> Rollout 3: commit {} \"gpu: cgroupRoot: {root}\" (GPU pods in their own slice, {slice})",
            &c3[..7]
        );
        println!(
            "    It validates (repository and agent pre-flight), but the kubelet needs its cgroup root to exist,"
        );
        println!(
            "    and the gpu nodes have no usable {slice} (simulated: a file stands in its place)."
        );
        println!(
            "    Expected: the canary {canary} applies {bad_name}, its kubelet cannot start, the agent rolls back to {} after healthTimeout {HEALTH_TIMEOUT}, the pool halts.",
            short(&good)
        );

        let commit = c3.clone();
        let kubelet = self.sim().kubelet(&canary).cloned();
        let (rb_canary, rb_good) = (canary.clone(), good.clone());
        let halted = self
            .rollout(STEP, &c3, move |s, nodes| {
                if s.applied.as_ref().map(|a| a.commit.as_str()) != Some(commit.as_str()) {
                    return None;
                }
                let gpu = s.pools.iter().find(|p| p.pool == "gpu")?;
                let failed_ok = gpu.phase == PoolPhase::Halted
                    && gpu.failed.len() == 1
                    && gpu.failed[0].node == rb_canary
                    && gpu.failed[0].state == kubelet_gitops_core::protocol::State::RolledBack;
                let node = nodes.iter().find(|n| n.name == rb_canary)?;
                let back = node.current.as_deref() == Some(rb_good.as_str())
                    && node
                        .message
                        .as_deref()
                        .is_some_and(|m| m.contains("rolled back to"))
                    && kubelet.as_ref().is_some_and(|k| k.is_running());
                (failed_ok && back).then(|| (gpu.clone(), node.clone()))
            })
            .await?;
        let (report, node) = halted;
        println!(
            "    {}: {} ({})",
            node.name,
            node.state.as_deref().unwrap_or("?"),
            node.message.as_deref().unwrap_or("")
        );

        // Nobody else was touched: same desired and current config, kubelet not restarted.
        let after = snapshot(self.sim());
        let starts_after = self.kubelet_starts();
        let problems = untouched(&before, &after, &starts_before, &starts_after, &canary);
        if !problems.is_empty() {
            return Err(DemoError::Unexpected {
                step: STEP,
                problem: format!(
                    "nodes other than the canary changed: {}",
                    problems.join("; ")
                ),
            });
        }
        let others: Vec<&str> = gpu_nodes
            .iter()
            .filter(|n| **n != canary)
            .map(String::as_str)
            .collect();
        println!(
            "    gpu halted at {}/{} on {}: {} never got it and still run {}; general and high-memory unaffected; no other kubelet restarted",
            report.done,
            report.nodes,
            short(&report.target.to_string()),
            others.join(" and "),
            short(&good)
        );
        self.act("rollout 3 (rollback)", t);
        Ok(())
    }

    /// How many times each node's kubelet has started.
    fn kubelet_starts(&self) -> BTreeMap<String, u64> {
        self.sim()
            .kubelets()
            .iter()
            .map(|(name, k)| (name.clone(), k.state().starts))
            .collect()
    }

    fn act(&mut self, name: &'static str, since: Instant) {
        let took = since.elapsed();
        println!("    ({name}: {:.1}s)", took.as_secs_f64());
        self.summary.acts.push((name, took));
    }

    /// Shows the pools live, once the reconciler applies `commit`, until `done` says the
    /// rollout reached its goal.
    async fn rollout<T>(
        &mut self,
        step: &'static str,
        commit: &str,
        done: impl FnMut(&SyncState, &[NodeView]) -> Option<T>,
    ) -> Result<T, DemoError> {
        let mut board = Board::new(self.options.live);
        let result = self
            .watch(step, ROLLOUT_LIMIT, Some((&mut board, commit)), done)
            .await;
        board.finish();
        result
    }

    /// Waits until `done` holds for the reconciler's state and the nodes, at most
    /// `limit`, updating `board` while the reconciler applies its commit; fails early
    /// when an agent or the reconciler stops.
    async fn watch<T>(
        &mut self,
        step: &'static str,
        limit: Duration,
        mut board: Option<(&mut Board, &str)>,
        mut done: impl FnMut(&SyncState, &[NodeView]) -> Option<T>,
    ) -> Result<T, DemoError> {
        let deadline = Instant::now() + limit;
        let (mut sync_rx, stopped) = match &self.controller {
            Some(c) => (Some(c.sync_state()), Some(c.shutdown_token())),
            None => (None, None),
        };
        loop {
            self.agents.check()?;
            let sync = sync_rx
                .as_ref()
                .map(|rx| rx.borrow().clone())
                .unwrap_or_default();
            if stopped.as_ref().is_some_and(|t| t.is_cancelled()) {
                return Err(DemoError::ReconcilerStopped(
                    sync.last_error
                        .unwrap_or_else(|| "see the reconciler's log".into()),
                ));
            }
            let nodes = snapshot(self.sim());
            if let Some((b, commit)) = board.as_mut()
                && sync.applied.as_ref().is_some_and(|a| a.commit == *commit)
            {
                b.update(&pool_lines(&sync.pools, &nodes));
            }
            if let Some(result) = done(&sync, &nodes) {
                return Ok(result);
            }
            if Instant::now() >= deadline {
                return Err(DemoError::Timeout {
                    step,
                    timeout: limit.as_secs(),
                    state: describe(&sync, &nodes),
                });
            }
            match sync_rx.as_mut() {
                Some(rx) => {
                    let _ = tokio::time::timeout(TICK, rx.changed()).await;
                }
                None => tokio::time::sleep(TICK).await,
            }
        }
    }

    /// Step 5: the commit statuses, from the remote's git notes once they show every
    /// pool's final state; the reconciler's pool reports if they do not in time.
    async fn print_statuses(&mut self) -> Result<(), DemoError> {
        let sync = self
            .controller
            .as_ref()
            .map(|c| c.sync_state().borrow().clone())
            .unwrap_or_default();
        let expected = expected_statuses(&sync.pools);
        println!(
            "\n==> Commit statuses, as git notes the reconciler pushed to the remote (fetched into the clone): git -C {} log --notes=kubelet-gitops",
            self.repo().path().display()
        );
        let deadline = Instant::now() + NOTES_LIMIT;
        let notes = loop {
            self.agents.check()?;
            let notes = if self.repo().fetch_notes()? {
                self.repo().notes()?
            } else {
                Vec::new()
            };
            let text: String = notes
                .iter()
                .filter_map(|n| n.note.as_deref())
                .collect::<Vec<_>>()
                .join("\n");
            let complete = expected
                .iter()
                .all(|e| text.lines().any(|l| l.starts_with(e.as_str())));
            if complete || Instant::now() >= deadline {
                break notes;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        if notes.iter().any(|n| n.note.is_some()) {
            for n in &notes {
                println!("    {} {}", &n.commit[..7], n.subject);
                for line in n.note.as_deref().unwrap_or_default().lines() {
                    println!("        {line}");
                }
            }
        }
        let text: String = notes
            .iter()
            .filter_map(|n| n.note.as_deref())
            .collect::<Vec<_>>()
            .join("\n");
        let missing: Vec<&String> = expected
            .iter()
            .filter(|e| !text.lines().any(|l| l.starts_with(e.as_str())))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        println!(
            "    not in the notes after {}s: {}; the reconciler's pool reports:",
            NOTES_LIMIT.as_secs(),
            missing
                .iter()
                .map(|m| m.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        for p in &sync.pools {
            let failed: Vec<String> = p
                .failed
                .iter()
                .map(|f| match &f.message {
                    Some(m) => format!("{} {}: {m}", f.node, f.state),
                    None => format!("{} {}", f.node, f.state),
                })
                .collect();
            println!(
                "    kubelet-gitops/{}: {}: {}/{} nodes on {}{}",
                p.pool,
                p.phase,
                p.done,
                p.nodes,
                short(&p.target.to_string()),
                if failed.is_empty() {
                    String::new()
                } else {
                    format!("; {}", failed.join("; "))
                }
            );
        }
        Ok(())
    }

    /// Step 6: where everything is.
    fn print_locations(&self) {
        let wd = self.workdir();
        println!(
            "\n==> Done in {:.1}s. Where everything is:",
            self.summary.elapsed.as_secs_f64()
        );
        let rows = [
            (
                "repository",
                format!(
                    "{} (a clone; origin {} stands in for the forge)",
                    wd.join("repo").display(),
                    wd.join("remote.git").display()
                ),
            ),
            (
                "reconciler cache",
                wd.join("reconciler-cache").display().to_string(),
            ),
            ("kubeconfig", self.kubeconfig().display().to_string()),
            (
                "node roots",
                format!("{}/<node>/ (the node's /)", wd.join("nodes").display()),
            ),
            (
                "checkpoints",
                format!(
                    "{}/<node>/var/lib/kubelet-gitops/",
                    wd.join("nodes").display()
                ),
            ),
            (
                "kubelet configs",
                format!(
                    "{}/<node>/var/lib/kubelet/config.yaml",
                    wd.join("nodes").display()
                ),
            ),
            (
                "kubelet logs",
                format!("{}/<node>/var/log/kubelet.log", wd.join("nodes").display()),
            ),
            (
                "agent logs",
                format!("{}/agent-<node>.log", wd.join("logs").display()),
            ),
            ("reconciler log", self.log_file().display().to_string()),
        ];
        for (what, path) in rows {
            println!("    {what:<16} {path}");
        }
        match self.workdir {
            Workdir::Kept(_) => println!(
                "    The simulated cluster stops with the demo; everything above stays for inspection."
            ),
            Workdir::Temp { .. } => println!(
                "    All of it is removed when the demo exits: run `kubelet-gitops demo --workdir DIR` to keep it."
            ),
        }
    }

    /// Keeps a temporary work directory after the demo (its logs explain a failure).
    pub fn keep_workdir(&mut self) {
        let workdir = std::mem::replace(&mut self.workdir, Workdir::Kept(PathBuf::new()));
        self.workdir = match workdir {
            Workdir::Temp { dir, path } => {
                // No longer removed: the path is returned, and it is `path` already.
                let _ = dir.keep();
                Workdir::Kept(path)
            }
            kept => kept,
        };
    }

    /// Stops the agents, the reconciler and the sim; removes a temporary work directory
    /// unless [`Demo::keep_workdir`] was called.
    pub async fn shutdown(mut self) {
        self.agents.stop().await;
        if let Some(c) = self.controller.take()
            && let Err(e) = c.stop().await
        {
            tracing::warn!(error = %crate::message::error_chain(&e), "reconciler stopped with an error");
        }
        if let Some(sim) = self.sim.take() {
            sim.shutdown().await;
        }
        if let Workdir::Temp { dir, path } = self.workdir
            && let Err(e) = dir.close()
        {
            eprintln!("warning: cannot remove {}: {e}", path.display());
        }
    }
}

/// The start of the note line each pool's final state calls for:
/// `kubelet-gitops/<pool>: success` when Complete, `...: failure` when Halted.
fn expected_statuses(pools: &[PoolReport]) -> Vec<String> {
    pools
        .iter()
        .filter_map(|p| {
            let state = match p.phase {
                PoolPhase::Complete => "success",
                PoolPhase::Halted => "failure",
                _ => return None,
            };
            Some(format!("{}: {state}", crate::status::pool_context(&p.pool)))
        })
        .collect()
}

/// Whether `commit` is applied and every pool is Complete on its ConfigMap of it.
fn all_complete(s: &SyncState, commit: &str) -> bool {
    let Some(applied) = s.applied.as_ref().filter(|a| a.commit == commit) else {
        return false;
    };
    s.pools.len() == applied.configmaps.len()
        && s.pools.iter().all(|p| {
            p.phase == PoolPhase::Complete
                && applied.configmaps.get(&p.pool).map(String::as_str) == p.target.configmap_name()
        })
}

/// What changed on nodes other than `except` between `before` and `after`: their
/// desired or current config, or their kubelet's start count.
fn untouched(
    before: &[NodeView],
    after: &[NodeView],
    starts_before: &BTreeMap<String, u64>,
    starts_after: &BTreeMap<String, u64>,
    except: &str,
) -> Vec<String> {
    let mut problems = Vec::new();
    for b in before.iter().filter(|n| n.name != except) {
        let Some(a) = after.iter().find(|n| n.name == b.name) else {
            problems.push(format!("{} disappeared", b.name));
            continue;
        };
        if a.desired != b.desired {
            problems.push(format!(
                "{} desired-config {:?} -> {:?}",
                b.name, b.desired, a.desired
            ));
        }
        if a.current != b.current {
            problems.push(format!(
                "{} current-config {:?} -> {:?}",
                b.name, b.current, a.current
            ));
        }
        if starts_before.get(&b.name) != starts_after.get(&b.name) {
            problems.push(format!(
                "{} kubelet restarted ({:?} -> {:?} starts)",
                b.name,
                starts_before.get(&b.name),
                starts_after.get(&b.name)
            ));
        }
    }
    problems
}

/// Where every pool and node stands, for an error message.
fn describe(s: &SyncState, nodes: &[NodeView]) -> String {
    let mut out = Vec::new();
    if let Some(a) = &s.applied {
        out.push(format!("  applied commit {}", a.commit));
    }
    if let Some(r) = &s.rejected {
        out.push(format!(
            "  rejected commit {}: {} problems",
            r.commit,
            r.errors.len()
        ));
    }
    if let Some(e) = &s.last_error {
        out.push(format!("  last reconcile error: {e}"));
    }
    for line in pool_lines(&s.pools, nodes) {
        out.push(format!("  {line}"));
    }
    for n in nodes {
        out.push(format!(
            "  {}: desired {} current {} state {}{}",
            n.name,
            n.desired.as_deref().unwrap_or("-"),
            n.current.as_deref().unwrap_or("-"),
            n.state.as_deref().unwrap_or("-"),
            n.message
                .as_deref()
                .map(|m| format!(" ({m})"))
                .unwrap_or_default()
        ));
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, desired: Option<&str>, current: &str) -> NodeView {
        NodeView {
            name: name.into(),
            desired: desired.map(Into::into),
            current: Some(current.into()),
            ..NodeView::default()
        }
    }

    #[test]
    fn untouched_names_every_change_but_the_canary() {
        let before = [
            node("gpu-1", Some("ns/a"), "ns/a"),
            node("gpu-2", Some("ns/a"), "ns/a"),
            node("gpu-3", Some("ns/a"), "ns/a"),
        ];
        let after = [
            node("gpu-1", Some("ns/b"), "ns/a"),
            node("gpu-2", Some("ns/a"), "ns/a"),
            node("gpu-3", Some("ns/b"), "ns/a"),
        ];
        let starts: BTreeMap<String, u64> = [
            ("gpu-1".into(), 2),
            ("gpu-2".into(), 2),
            ("gpu-3".into(), 2),
        ]
        .into();
        let mut restarted = starts.clone();
        restarted.insert("gpu-1".into(), 5);
        restarted.insert("gpu-2".into(), 3);
        let problems = untouched(&before, &after, &starts, &restarted, "gpu-1");
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].starts_with("gpu-2 kubelet restarted"),
            "{problems:?}"
        );
        assert!(
            problems[1].starts_with("gpu-3 desired-config"),
            "{problems:?}"
        );
        assert!(untouched(&before, &before, &starts, &starts, "gpu-1").is_empty());
    }
}
