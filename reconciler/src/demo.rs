//! `kubelet-gitops demo`: the whole loop on one machine in under a minute.
//!
//! 1. A cluster with the 12 nodes of `examples-repo/inventory.yaml` (pools `general`,
//!    `gpu`, `high-memory`) ([`cluster`]): by default simulated ([`kubelet_gitops_sim`]),
//!    a stand-in kubelet per node, in-process; with `--cluster real`, a real v1.36
//!    control plane and 12 real kubelets on loopback ([`real`]).
//! 2. A git repository holding a copy of `examples-repo/` ([`repo`]), served by `file://`
//!    URL, with the rollout timings shortened so the demo fits in a minute (and, for real
//!    kubelets, the base's machine-specific paths made this machine's).
//! 3. The reconciler in-process ([`crate::controller::start`]), polling the repository,
//!    and one real `kubelet-gitops-agent` process per node ([`agents`], [`nodes`]),
//!    restarting its kubelet (the sim's control endpoint with curl; a real one as systemd
//!    would).
//! 4. Three commits, each shown live per pool ([`progress`]): the examples themselves
//!    (every node leaves its local config), a change to one pool (`general` maxPods), and
//!    a config the kubelet cannot start with (`gpu` podLogsDir where a file stands), which
//!    the canary rolls back and which halts the pool with no other node touched.
//! 5. The commit statuses from the repository's git notes, and where everything is on
//!    disk.
//!
//! [`setup`] builds 1 to 3, [`acts`] plays 4 (waiting with [`wait`]), [`report`] shows 5.
//!
//! The demo checks its own story: a step that does not reach its goal within its time
//! limit, or reaches another outcome (a node outside the halted canary touched), stops it
//! with an error naming the step and showing where every pool and node stood.

mod acts;
mod agents;
mod cluster;
mod error;
mod nodes;
mod progress;
mod real;
mod repo;
mod report;
mod setup;
mod view;
mod wait;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kubelet_gitops_e2e::real::UpstreamBinaries;

use crate::controller::RunningController;

pub use cluster::ClusterKind;
pub use error::DemoError;

use agents::Agents;
use cluster::DemoCluster;
use repo::DemoRepo;

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
    /// The simulator or real Kubernetes.
    pub cluster: ClusterKind,
    /// Where the upstream binaries are (`--cluster real`); `None`: `upstream/bin` of the
    /// checkout this binary was built from.
    pub upstream_bin: Option<PathBuf>,
}

/// The demo's timings on one kind of cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timings {
    /// The repository's rollout `healthTimeout` (the examples' minutes and hours would
    /// make the demo last an hour).
    pub health_timeout: &'static str,
    /// The repository's rollout `lkgGrace`.
    pub lkg_grace: &'static str,
    /// Time limit of a step that starts something. The demo itself takes well under a
    /// minute on the sim; these bound a step on a slow or loaded machine.
    pub start_limit: Duration,
    /// Time limit of one rollout.
    pub rollout_limit: Duration,
}

impl Timings {
    /// The timings for `kind`: a real kubelet takes seconds to start where a stand-in
    /// takes a tenth of one, and twelve of them share this machine's cores with the
    /// control plane.
    pub fn of(kind: ClusterKind) -> Timings {
        match kind {
            ClusterKind::Sim => Timings {
                health_timeout: "10s",
                lkg_grace: "5s",
                start_limit: Duration::from_secs(60),
                rollout_limit: Duration::from_secs(90),
            },
            ClusterKind::Real => Timings {
                health_timeout: "30s",
                lkg_grace: "5s",
                start_limit: Duration::from_secs(240),
                rollout_limit: Duration::from_secs(420),
            },
        }
    }
}

/// How often the demo looks at the cluster while it waits.
const TICK: Duration = Duration::from_millis(100);

/// How often the reconciler polls the repository.
const POLL: Duration = Duration::from_millis(500);

/// How long the reconciler's final statuses may take to reach the remote's notes.
const NOTES_LIMIT: Duration = Duration::from_secs(30);

/// Where the reconciler publishes its ConfigMaps: examples-repo/kubelet-gitops.yaml's
/// `spec.namespace`.
const DEMO_NAMESPACE: &str = "kubelet-gitops";

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

/// A running demo: its work directory and everything it started, so that an interrupted
/// run can still be cleaned up ([`Demo::shutdown`]).
pub struct Demo {
    options: DemoOptions,
    timings: Timings,
    agent_bin: PathBuf,
    /// The upstream binaries (`--cluster real`).
    upstream: Option<UpstreamBinaries>,
    workdir: Workdir,
    cluster: Option<DemoCluster>,
    controller: Option<RunningController>,
    agents: Agents,
    repo: Option<DemoRepo>,
    started: Instant,
    summary: DemoSummary,
}

impl Demo {
    /// Checks this machine (the agent binary; curl for the sim; the upstream binaries and
    /// kubectl for a real cluster) and the options, and creates the work directory.
    pub fn new(options: DemoOptions) -> Result<Demo, DemoError> {
        let exe = std::env::current_exe().ok();
        let path = std::env::var_os("PATH");
        let agent_bin = agents::find_agent(
            options.agent_bin.as_deref(),
            exe.as_deref(),
            path.as_deref(),
        )?;
        let upstream = match options.cluster {
            ClusterKind::Sim => {
                if agents::on_path("curl", path.as_deref()).is_none() {
                    return Err(DemoError::NoCurl);
                }
                None
            }
            ClusterKind::Real => {
                let dir = options
                    .upstream_bin
                    .clone()
                    .unwrap_or_else(UpstreamBinaries::default_dir);
                let bins = UpstreamBinaries::in_dir(&dir).map_err(|e| match e {
                    kubelet_gitops_e2e::E2eError::MissingUpstream { dir, missing } => {
                        DemoError::NoUpstream {
                            dir,
                            missing: missing.join(", "),
                        }
                    }
                    other => DemoError::Real {
                        what: "find the upstream binaries",
                        source: Box::new(other),
                    },
                })?;
                if agents::on_path("kubectl", path.as_deref()).is_none() {
                    return Err(DemoError::NoKubectl);
                }
                Some(bins)
            }
        };
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
        if options.cluster == ClusterKind::Real {
            cluster::check_socket_room(workdir.path(), "high-memory-3")?;
        }
        let logs = workdir.path().join("logs");
        std::fs::create_dir_all(&logs).map_err(error::io("create", &logs))?;
        Ok(Demo {
            timings: Timings::of(options.cluster),
            options,
            agent_bin,
            upstream,
            workdir,
            cluster: None,
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

    fn agent_log(&self, node: &str) -> PathBuf {
        self.workdir().join(format!("logs/agent-{node}.log"))
    }

    /// Runs the demo. Cancel-safe: whatever was started is stopped by
    /// [`Demo::shutdown`].
    pub async fn run(&mut self) -> Result<DemoSummary, DemoError> {
        self.started = Instant::now();
        match self.options.cluster {
            ClusterKind::Sim => println!(
                "kubelet-gitops demo: a config repository, the reconciler, 12 simulated nodes in 3 pools with a stand-in kubelet each, and a real agent per node.\n"
            ),
            ClusterKind::Real => println!(
                "kubelet-gitops demo on real Kubernetes: a config repository, the reconciler, a v1.36 control plane and 12 real kubelets in 3 pools on this machine, and an agent per node.\n"
            ),
        }
        self.start_cluster().await?;
        let c1 = self.create_repo()?;
        self.start_loop().await?;

        let act1 = self.first_rollout(&c1).await?;
        self.pause().await;
        self.second_rollout().await?;
        self.pause().await;
        self.bad_rollout(&act1).await?;
        self.pause().await;
        self.print_status().await?;
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

    fn cluster(&self) -> &DemoCluster {
        // Set by start_cluster, the first step; every later step runs after it.
        match &self.cluster {
            Some(cluster) => cluster,
            None => unreachable!("the cluster is started before any other step"),
        }
    }

    fn repo(&self) -> &DemoRepo {
        match &self.repo {
            Some(repo) => repo,
            None => unreachable!("the repository is created before any rollout"),
        }
    }

    fn act(&mut self, name: &'static str, since: Instant) {
        let took = since.elapsed();
        println!("    ({name}: {:.1}s)", took.as_secs_f64());
        self.summary.acts.push((name, took));
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

    /// Stops the agents, the reconciler and the cluster; removes a temporary work directory
    /// unless [`Demo::keep_workdir`] was called.
    pub async fn shutdown(mut self) {
        self.agents.stop().await;
        if let Some(c) = self.controller.take()
            && let Err(e) = c.stop().await
        {
            tracing::warn!(error = %kubelet_gitops_core::message::error_chain(&e), "reconciler stopped with an error");
        }
        if let Some(cluster) = self.cluster.take() {
            cluster.shutdown().await;
        }
        if let Workdir::Temp { dir, path } = self.workdir
            && let Err(e) = dir.close()
        {
            eprintln!("warning: cannot remove {}: {e}", path.display());
        }
    }
}
