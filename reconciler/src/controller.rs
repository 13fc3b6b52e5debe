//! `kubelet-gitops run`: the reconciler's loop, the effects side of the design.
//!
//! ```text
//!  Poller (own task) ──NewCommit──> render (blocking pool) ──valid──> Desired
//!        │                                  └─invalid─> SyncState.rejected, nothing applied
//!  Node / ConfigMap reflectors ──changed──┐
//!  lease (leader.rs) ──role changed───────┤
//!  poll tick / webhook ───────────────────┴─> reconcile (at most every 200 ms)
//!                                              publish -> plan -> patch Nodes -> GC
//! ```
//!
//! - **Observe**: Node metadata and the published ConfigMaps come from reflectors
//!   ([`observe`]); nothing is read from the API server during a reconcile, so a
//!   converged cluster costs no request at all.
//! - **Plan** is pure ([`crate::rollout::plan_rollout`], [`crate::gc::plan_gc`]).
//! - **Apply** ([`reconcile`]) is the only code that writes, and only while this
//!   replica may (leader election, not shutting down). A failed round is retried with
//!   backoff; every request is retried inside it ([`api`]).
//! - **Triggers**: a new commit, every poll (a resync), node changes (labels, agent
//!   annotations), ConfigMap changes, gaining the lease. Bursts coalesce: at most one
//!   reconcile per `min_reconcile_interval`, and a change during a reconcile always
//!   causes another (the wake-up is a stored permit, never dropped).
//! - **Stateless**: everything comes from git and the cluster; a restart plans exactly
//!   what the previous process would have, and a ConfigMap already there is not created
//!   again. A restart while the head does not validate, or while the remote is
//!   unreachable, resumes from the commit the cluster is on ([`resume`]).
//! - **A commit that does not validate applies nothing**: its errors are logged once,
//!   kept in [`SyncState::rejected`] (for `/readyz` and commit statuses), and the last
//!   valid commit stays in force.
//! - **Commit statuses** ([`statuses`]) are posted by their own task from the
//!   [`SyncState`] channel, and pull-request heads are reviewed by another
//!   ([`crate::review`]): neither ever holds up the loop, and neither writes to the
//!   cluster.

pub mod api;
mod observe;
mod reconcile;
mod resume;
mod state;
pub mod statuses;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::git::{self, CommitSource, GitConfig, GitError, PollEvent, Poller};
use crate::leader::{LeaderElector, LeaderStatus, LeaseConfig};
use crate::metrics::{Metrics, ReconcileResult};
use crate::render::{RenderOptions, RepoError, render_repo};
use crate::review::{ReviewConfig, Reviewer};
use crate::status::{StatusError, StatusWriter};
use crate::webhook::{self, WebhookConfig};

pub use api::RetryPolicy;
pub use reconcile::ReconcileError;
pub use state::{
    AppliedCommit, PoolDetail, ReadyDetail, RejectedCommit, RejectedDetail, Role, SyncState,
};
pub use statuses::{StatusBackendConfig, StatusConfig, commit_statuses};

pub(crate) use statuses::count_delivery;

use observe::{ConfigMapStore, NodeStore};
use reconcile::{Desired, Reconciler};

/// Where the Kubernetes client configuration comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KubeSource {
    /// This kubeconfig file (its current context).
    Kubeconfig(PathBuf),
    /// `$KUBECONFIG` or `~/.kube/config`, else the in-cluster service account.
    Infer,
}

/// Everything `run` needs, validated ([`crate::args::RunArgs::into_config`]).
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The branch to follow.
    pub git: GitConfig,
    /// How often to poll it.
    pub interval: Duration,
    /// How the poller backs off while the remote is unreachable.
    pub poll_backoff: git::Backoff,
    /// Root and globs.
    pub render: RenderOptions,
    /// Overrides the repository's namespace.
    pub namespace: Option<String>,
    /// The cluster.
    pub kube: KubeSource,
    /// This replica's name (User-Agent, Lease holder, logs).
    pub identity: String,
    /// Leader election, when enabled.
    pub leader: Option<LeaseConfig>,
    /// Where to serve the admin port (`None`: nowhere).
    pub admin_addr: Option<SocketAddr>,
    /// Serve the push webhook with this secret.
    pub webhook_secret_file: Option<PathBuf>,
    /// One reconcile, then exit.
    pub once: bool,
    /// Reconciles start at most this often (bursts of events coalesce).
    pub min_reconcile_interval: Duration,
    /// Retries of each API request.
    pub retry: RetryPolicy,
    /// Node writes in flight at once.
    pub write_concurrency: usize,
    /// Backoff after a failed reconcile: first wait, and longest.
    pub failure_backoff: (Duration, Duration),
    /// Commit statuses and pull-request review (default: git notes, no review).
    pub status: StatusConfig,
}

impl RunConfig {
    /// A configuration with the defaults of the command line.
    pub fn new(git: GitConfig, kube: KubeSource, identity: impl Into<String>) -> RunConfig {
        RunConfig {
            git,
            interval: Duration::from_secs(30),
            poll_backoff: git::Backoff::default(),
            render: RenderOptions::default(),
            namespace: None,
            kube,
            identity: identity.into(),
            leader: None,
            admin_addr: None,
            webhook_secret_file: None,
            once: false,
            min_reconcile_interval: Duration::from_millis(200),
            retry: RetryPolicy::default(),
            write_concurrency: 16,
            failure_backoff: (Duration::from_secs(1), Duration::from_secs(60)),
            status: StatusConfig::default(),
        }
    }
}

/// Why `run` stopped.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot load kubeconfig {path}")]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("cannot find a Kubernetes configuration (no kubeconfig, not in a cluster)")]
    InferConfig(#[source] kube::config::InferConfigError),
    #[error("cannot build the Kubernetes client")]
    Client(#[source] kube::Error),
    #[error("cannot serve the admin port on {addr}")]
    Admin {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot fetch branch {branch} of {url}")]
    Git {
        url: String,
        branch: String,
        #[source]
        source: Box<GitError>,
    },
    #[error("commit {commit} does not validate ({count} problems); nothing was applied")]
    Invalid { commit: String, count: usize },
    #[error("reconcile failed")]
    Reconcile(#[source] Box<ReconcileError>),
    #[error("cannot read commit {commit} from the git cache {cache}")]
    CommitUnreadable { commit: String, cache: PathBuf },
    #[error("the controller task failed: {0}")]
    Task(String),
    #[error("cannot set up commit statuses ({backend})")]
    Status {
        backend: &'static str,
        #[source]
        source: StatusError,
    },
}

impl RunError {
    /// The repository does not validate (exit code 1 for `--once`).
    pub fn is_invalid_repo(&self) -> bool {
        matches!(self, RunError::Invalid { .. })
    }
}

/// `e` and its sources, `: `-separated, for one log field.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let text = s.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cur = s.source();
    }
    out
}

/// The User-Agent of every request: `kubelet-gitops/<version> (<identity>)`, so the API
/// server's audit log says which replica wrote.
pub fn user_agent(identity: &str) -> String {
    format!("kubelet-gitops/{} ({identity})", env!("CARGO_PKG_VERSION"))
}

/// A Kubernetes client for `source`, sending [`user_agent`].
pub async fn client(source: &KubeSource, identity: &str) -> Result<kube::Client, RunError> {
    let mut config = match source {
        KubeSource::Kubeconfig(path) => {
            let kc = Kubeconfig::read_from(path).map_err(|source| RunError::Kubeconfig {
                path: path.clone(),
                source,
            })?;
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|source| RunError::Kubeconfig {
                    path: path.clone(),
                    source,
                })?
        }
        KubeSource::Infer => kube::Config::infer().await.map_err(RunError::InferConfig)?,
    };
    // An identity that is not a valid header value (it comes from flags) is left out.
    if let Ok(v) = axum::http::HeaderValue::from_str(&user_agent(identity)) {
        config.headers.push((axum::http::header::USER_AGENT, v));
    }
    kube::Client::try_from(config).map_err(RunError::Client)
}

/// A controller running in the background.
#[derive(Debug)]
pub struct RunningController {
    admin_addr: Option<SocketAddr>,
    sync: watch::Receiver<SyncState>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), RunError>>,
}

impl RunningController {
    /// Where the admin port listens (the bound address when port 0 was asked for).
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// The controller's progress; `changed()` wakes on every change.
    pub fn sync_state(&self) -> watch::Receiver<SyncState> {
        self.sync.clone()
    }

    /// The metrics registry.
    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// Cancelling this token stops the controller (as [`RunningController::stop`]).
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Stops the controller (finishing the write in flight, releasing the lease) and waits.
    pub async fn stop(self) -> Result<(), RunError> {
        self.shutdown.cancel();
        self.wait().await
    }

    /// Waits until the controller ends (`--once`, or after a shutdown).
    pub async fn wait(self) -> Result<(), RunError> {
        let result = self
            .task
            .await
            .unwrap_or_else(|e| Err(RunError::Task(e.to_string())));
        self.shutdown.cancel();
        result
    }
}

/// Connects, binds the admin port and starts the controller in the background.
pub async fn start(config: RunConfig) -> Result<RunningController, RunError> {
    let client = client(&config.kube, &config.identity).await?;
    start_with_client(config, client).await
}

/// [`start`] with a client built elsewhere.
pub async fn start_with_client(
    mut config: RunConfig,
    client: kube::Client,
) -> Result<RunningController, RunError> {
    if config.status.review && !config.once {
        // The forge's pull-request heads are fetched with the branch.
        for refspec in config.status.backend.review_refspecs() {
            if !config.git.extra_refspecs.contains(&refspec) {
                config.git.extra_refspecs.push(refspec);
            }
        }
    }
    let writer = statuses::writer(&config.status, &config.git)
        .await
        .map_err(|source| RunError::Status {
            backend: config.status.backend.name(),
            source,
        })?;
    let metrics = Arc::new(Metrics::new());
    let shutdown = CancellationToken::new();
    let role = if config.leader.is_some() {
        Role::Follower
    } else {
        Role::Standalone
    };
    metrics.set_leader(role.writes());
    let (sync_tx, sync_rx) = watch::channel(SyncState {
        role,
        ..SyncState::default()
    });
    let wake = Arc::new(Notify::new());

    let mut admin_addr = None;
    if let Some(addr) = config.admin_addr {
        let (listener, bound) = crate::admin::bind(addr)
            .await
            .map_err(|source| RunError::Admin { addr, source })?;
        let hook = config
            .webhook_secret_file
            .as_ref()
            .map(|f| webhook::router(WebhookConfig::new(f), wake.clone()));
        let router = crate::admin::router(metrics.clone(), sync_rx.clone(), hook);
        let stop = shutdown.clone();
        tokio::spawn(async move {
            if let Err(e) = crate::admin::serve(listener, router, stop).await {
                tracing::error!(error = %e, "admin server failed");
            }
        });
        tracing::info!(addr = %bound, "serving /metrics, /healthz, /readyz");
        admin_addr = Some(bound);
    }

    let controller = Controller {
        config,
        client,
        writer,
        metrics: metrics.clone(),
        sync: sync_tx,
        shutdown: shutdown.clone(),
        changed: Arc::new(Notify::new()),
        wake,
    };
    let stopped = shutdown.clone();
    let task = tokio::spawn(async move {
        let result = controller.run().await;
        // Stopping by itself (an error, or `--once` done) stops the admin server too.
        stopped.cancel();
        result
    });
    Ok(RunningController {
        admin_addr,
        sync: sync_rx,
        metrics,
        shutdown,
        task,
    })
}

/// Decides whether a write may go out now.
#[derive(Clone)]
struct WriteGate {
    leader: Option<watch::Receiver<LeaderStatus>>,
    shutdown: CancellationToken,
}

impl WriteGate {
    fn allowed(&self) -> bool {
        !self.shutdown.is_cancelled() && self.leader.as_ref().is_none_or(|l| l.borrow().leading)
    }
}

struct Controller {
    config: RunConfig,
    client: kube::Client,
    /// Where commit statuses and review go (`None`: nowhere).
    writer: Option<Arc<StatusWriter>>,
    metrics: Arc<Metrics>,
    sync: watch::Sender<SyncState>,
    shutdown: CancellationToken,
    /// Raised by the reflectors when planning could come out differently.
    changed: Arc<Notify>,
    /// Wakes the poller (the webhook).
    wake: Arc<Notify>,
}

/// Why a fetched commit did not become the desired state.
enum RenderFailure {
    /// The commit could not be read from the cache (retried).
    Source(String),
    /// The commit does not render or validate (stays rejected).
    Invalid(Vec<RepoError>),
}

/// The ConfigMap reflector of the namespace in use.
struct ConfigMaps {
    namespace: String,
    store: ConfigMapStore,
    task: tokio::task::AbortHandle,
}

/// The loop's memory between events.
#[derive(Default)]
struct LoopState {
    /// The commit the poller reported last.
    fetched: Option<String>,
    /// The commit rendering was last attempted for.
    rendered: Option<String>,
    /// The last commit that validated.
    desired: Option<Arc<Desired>>,
    /// The fetched head a resume ([`resume`]) was last tried for.
    resume_tried: Option<String>,
    /// When the next reconcile may start.
    next_run: Option<Instant>,
    /// When the last one started.
    last_start: Option<Instant>,
    /// Consecutive failed reconciles.
    failures: u32,
}

impl Controller {
    fn update(&self, f: impl FnOnce(&mut SyncState)) {
        self.sync.send_if_modified(|s| {
            let before = s.clone();
            f(s);
            *s != before
        });
    }

    async fn run(self) -> Result<(), RunError> {
        let mut tasks = JoinSet::new();
        let (nodes, node_driver) = observe::node_reflector(
            self.client.clone(),
            self.metrics.clone(),
            self.changed.clone(),
        );
        tasks.spawn(node_driver);

        let elector_stop = CancellationToken::new();
        let mut elector = None;
        let leader_rx = match &self.config.leader {
            Some(lease) => {
                let (tx, rx) = watch::channel(LeaderStatus::default());
                let e = LeaderElector::new(self.client.clone(), lease.clone());
                let metrics = self.metrics.clone();
                let stop = elector_stop.clone();
                elector = Some(tokio::spawn(async move { e.run(tx, &metrics, stop).await }));
                Some(rx)
            }
            None => None,
        };
        let gate = WriteGate {
            leader: leader_rx.clone(),
            shutdown: self.shutdown.clone(),
        };

        // Commit statuses: their own task, reading the state channel; stopped last, so
        // that it posts the final state.
        let reporter_stop = CancellationToken::new();
        let reporter = self.writer.clone().map(|writer| {
            let reporter =
                statuses::StatusReporter::new(writer, self.metrics.clone(), &self.config.status);
            tokio::spawn(reporter.run(self.sync.subscribe(), reporter_stop.clone()))
        });

        let result = if self.config.once {
            self.run_once(&nodes, &gate, &mut tasks).await
        } else {
            self.run_loop(&nodes, &gate, leader_rx, &mut tasks).await
        };

        tasks.shutdown().await;
        elector_stop.cancel();
        if let Some(e) = elector {
            let _ = e.await;
        }
        reporter_stop.cancel();
        if let Some(r) = reporter {
            let _ = r.await;
        }
        result
    }

    /// Waits for a cache's first list (`ready`), or shutdown (false).
    async fn wait_ready(
        &self,
        ready: impl Future<Output = Result<(), kube::runtime::reflector::store::WriterDropped>>,
        what: &str,
    ) -> bool {
        tokio::select! {
            () = self.shutdown.cancelled() => false,
            r = ready => {
                if r.is_err() {
                    tracing::error!(cache = what, "cache writer dropped before its first sync");
                }
                r.is_ok()
            }
        }
    }

    /// The ConfigMap reflector for `namespace`, (re)started when the namespace changes.
    async fn configmaps_for(
        &self,
        current: &mut Option<ConfigMaps>,
        namespace: &str,
        tasks: &mut JoinSet<()>,
    ) -> Option<ConfigMapStore> {
        if let Some(c) = current.as_ref().filter(|c| c.namespace == namespace) {
            return Some(c.store.clone());
        }
        if let Some(old) = current.take() {
            tracing::info!(from = %old.namespace, to = %namespace, "ConfigMap namespace changed");
            old.task.abort();
        }
        let (store, driver) = observe::configmap_reflector(
            self.client.clone(),
            namespace,
            self.metrics.clone(),
            self.changed.clone(),
        );
        let task = tasks.spawn(driver);
        *current = Some(ConfigMaps {
            namespace: namespace.to_string(),
            store: store.clone(),
            task,
        });
        self.wait_ready(store.wait_until_ready(), "configmaps")
            .await
            .then_some(store)
    }

    /// Renders `commit` from the poller's cache on the blocking pool.
    async fn render(&self, commit: &str) -> Result<Desired, RenderFailure> {
        let cache = self.config.git.cache_dir.clone();
        let url = self.config.git.url.clone();
        let id = commit.to_string();
        let opts = self.config.render.clone();
        let joined = tokio::task::spawn_blocking(move || {
            let src = CommitSource::open(&cache, &id, &url)
                .map_err(|e| RenderFailure::Source(error_chain(&e)))?;
            render_repo(&src, &opts).map_err(RenderFailure::Invalid)
        })
        .await;
        let rendered = match joined {
            Ok(r) => r?,
            Err(e) => return Err(RenderFailure::Source(format!("rendering stopped: {e}"))),
        };
        let namespace = self
            .config
            .namespace
            .clone()
            .unwrap_or_else(|| rendered.settings.namespace.clone());
        Ok(Desired {
            commit: commit.to_string(),
            rendered,
            namespace,
        })
    }

    /// Renders the fetched commit if not done yet; logs and records a rejection.
    async fn render_fetched(&self, st: &mut LoopState) {
        let Some(commit) = st.fetched.clone() else {
            return;
        };
        if st.rendered.as_deref() == Some(commit.as_str()) {
            return;
        }
        match self.render(&commit).await {
            Ok(desired) => {
                st.rendered = Some(commit.clone());
                tracing::info!(
                    commit = %commit,
                    namespace = %desired.namespace,
                    pools = desired.rendered.pools.len(),
                    "commit validated"
                );
                self.metrics.repo_validity(0);
                self.update(|s| s.rejected = None);
                st.desired = Some(Arc::new(desired));
            }
            // Not the commit's fault: tried again at the next poll.
            Err(RenderFailure::Source(error)) => {
                tracing::error!(commit = %commit, %error, "cannot read the commit from the cache; retrying at the next poll");
            }
            Err(RenderFailure::Invalid(errors)) => {
                st.rendered = Some(commit.clone());
                for e in &errors {
                    tracing::error!(
                        commit = %commit,
                        file = %e.file,
                        line = e.line,
                        column = e.column,
                        field = %e.field,
                        "{e}"
                    );
                }
                tracing::error!(
                    commit = %commit,
                    problems = errors.len(),
                    kept = st.desired.as_ref().map(|d| d.commit.as_str()).unwrap_or("none"),
                    "commit does not validate: nothing of it is applied; the last valid commit stays in force"
                );
                self.metrics.repo_validity(errors.len());
                self.update(|s| {
                    s.rejected = Some(RejectedCommit {
                        commit: commit.clone(),
                        errors,
                    });
                });
            }
        }
    }

    fn on_poll(&self, event: PollEvent, st: &mut LoopState) {
        match event {
            PollEvent::NewCommit { id, forced } => {
                if forced {
                    tracing::warn!(commit = %id, "branch was force-pushed; following it");
                } else {
                    tracing::info!(commit = %id, "new commit on the branch");
                }
                st.fetched = Some(id.clone());
                self.update(|s| {
                    s.fetched = Some(id);
                    s.unreachable = None;
                });
            }
            PollEvent::Unchanged => self.update(|s| s.unreachable = None),
            PollEvent::Unreachable {
                error,
                attempt,
                retry_in,
            } => {
                let error = error_chain(&error);
                tracing::warn!(
                    url = %crate::publish::redact_url(&self.config.git.url),
                    attempt,
                    retry_in = ?retry_in,
                    %error,
                    "cannot fetch the branch; the last applied commit stays in force"
                );
                self.update(|s| s.unreachable = Some(error));
            }
        }
    }

    /// Runs one reconcile of `desired` and records the outcome.
    async fn reconcile_once(
        &self,
        reconciler: &mut Reconciler,
        desired: &Desired,
        store: &ConfigMapStore,
        gate: &WriteGate,
    ) -> Result<(), ReconcileError> {
        let mut timer = self.metrics.reconcile_timer();
        let allowed = || gate.allowed();
        let result = reconciler.reconcile(desired, store, &allowed).await;
        match &result {
            Ok(outcome) => {
                timer.set_result(if outcome.wrote {
                    ReconcileResult::Ok
                } else {
                    ReconcileResult::Skipped
                });
                let wrote = outcome.wrote;
                self.update(|s| {
                    if wrote {
                        s.applied = Some(desired.applied(outcome.sources.clone()));
                        s.ready = true;
                    }
                    s.last_error = None;
                    s.pools = outcome.plan.pools.clone();
                    s.overlaps = outcome.plan.overlaps.clone();
                });
                if outcome.node_writes > 0
                    || !outcome.created.is_empty()
                    || !outcome.deleted.is_empty()
                {
                    tracing::debug!(
                        node_writes = outcome.node_writes,
                        created = outcome.created.len(),
                        deleted = outcome.deleted.len(),
                        "reconciled"
                    );
                }
            }
            Err(e) => {
                let error = error_chain(e);
                tracing::error!(commit = %desired.commit, %error, "reconcile failed; retrying with backoff");
                self.update(|s| s.last_error = Some(error));
            }
        }
        result.map(|_| ())
    }

    async fn run_loop(
        &self,
        nodes: &NodeStore,
        gate: &WriteGate,
        mut leader_rx: Option<watch::Receiver<LeaderStatus>>,
        tasks: &mut JoinSet<()>,
    ) -> Result<(), RunError> {
        let (poll_tx, mut poll_rx) = mpsc::channel(1);
        // The pull-request heads of the last successful poll, for review.
        let (heads_tx, heads_rx) = watch::channel(BTreeMap::new());
        let metrics = self.metrics.clone();
        let mut poller = Poller::new(
            self.config.git.clone(),
            self.config.interval,
            self.wake.clone(),
        )
        .with_backoff(self.config.poll_backoff)
        .with_observer(move |record| metrics.git_poll(record));
        tasks.spawn(async move {
            loop {
                let event = poller.next().await;
                if !matches!(event, PollEvent::Unreachable { .. }) {
                    heads_tx.send_if_modified(|heads| {
                        let changed = heads != poller.extra_refs();
                        if changed {
                            heads.clone_from(poller.extra_refs());
                        }
                        changed
                    });
                }
                if poll_tx.send(event).await.is_err() {
                    break;
                }
            }
        });
        if let Some(writer) = self.writer.clone().filter(|_| self.config.status.review) {
            let store = nodes.clone();
            let reviewer = Reviewer::new(
                ReviewConfig {
                    cache_dir: self.config.git.cache_dir.clone(),
                    repo_url: self.config.git.url.clone(),
                    branch: self.config.git.branch.clone(),
                    render: self.config.render.clone(),
                    comment: self.config.status.comment,
                    target_url: self.config.status.target_url.clone(),
                    max_age: self.config.status.review_max_age,
                },
                writer,
                self.metrics.clone(),
                Box::new(move || {
                    store
                        .state()
                        .iter()
                        .map(|m| observe::node_info(m))
                        .collect()
                }),
                self.shutdown.child_token(),
            );
            tasks.spawn(reviewer.run(heads_rx, self.sync.subscribe()));
        }

        if !self.wait_ready(nodes.wait_until_ready(), "nodes").await {
            return Ok(());
        }
        tracing::info!(nodes = nodes.len(), "node cache synced");

        let mut reconciler = Reconciler::new(
            self.client.clone(),
            self.metrics.clone(),
            self.config.retry,
            self.config.write_concurrency,
            self.config.git.url.clone(),
            nodes.clone(),
        );
        let mut configmaps: Option<ConfigMaps> = None;
        let mut st = LoopState::default();
        let min_interval = self.config.min_reconcile_interval;
        let trigger = |st: &mut LoopState| {
            let earliest = st
                .last_start
                .map_or_else(Instant::now, |t| (t + min_interval).max(Instant::now()));
            st.next_run = Some(st.next_run.map_or(earliest, |n| n.min(earliest)));
        };

        loop {
            let leader_changed = async {
                match leader_rx.as_mut() {
                    Some(rx) => rx.changed().await.is_ok(),
                    None => std::future::pending().await,
                }
            };
            let due = async {
                match st.next_run {
                    Some(t) => tokio::time::sleep_until(t.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                () = self.shutdown.cancelled() => break,
                event = poll_rx.recv() => {
                    let Some(event) = event else { break };
                    let unreachable = matches!(event, PollEvent::Unreachable { .. });
                    self.on_poll(event, &mut st);
                    if unreachable {
                        self.fetched_from_cache(&mut st).await;
                    }
                    self.render_fetched(&mut st).await;
                    self.resume_from_cluster(&mut st, &mut configmaps, tasks).await;
                    trigger(&mut st);
                }
                true = leader_changed => {
                    let status = leader_rx.as_ref().map(|rx| rx.borrow().clone()).unwrap_or_default();
                    let role = if status.leading { Role::Leader } else { Role::Follower };
                    self.update(|s| {
                        s.role = role;
                        if !status.leading {
                            // A follower is ready when it can follow the lease.
                            s.ready = status.lease_reachable;
                        }
                    });
                    trigger(&mut st);
                }
                () = self.changed.notified() => trigger(&mut st),
                () = due => {
                    st.next_run = None;
                    let Some(desired) = st.desired.clone() else { continue };
                    let Some(store) = self
                        .configmaps_for(&mut configmaps, &desired.namespace, tasks)
                        .await
                    else {
                        break;
                    };
                    st.last_start = Some(Instant::now());
                    match self.reconcile_once(&mut reconciler, &desired, &store, gate).await {
                        Ok(()) => st.failures = 0,
                        Err(_) => {
                            st.failures = st.failures.saturating_add(1);
                            let (first, max) = self.config.failure_backoff;
                            let wait = first
                                .saturating_mul(1 << st.failures.saturating_sub(1).min(16))
                                .min(max);
                            st.next_run = Some(Instant::now() + wait);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    async fn run_once(
        &self,
        nodes: &NodeStore,
        gate: &WriteGate,
        tasks: &mut JoinSet<()>,
    ) -> Result<(), RunError> {
        let metrics = self.metrics.clone();
        let mut poller = Poller::new(
            self.config.git.clone(),
            self.config.interval,
            self.wake.clone(),
        )
        .with_observer(move |record| metrics.git_poll(record));
        let commit = match poller.poll_now().await {
            PollEvent::NewCommit { id, .. } => id,
            PollEvent::Unchanged => match poller.last_good() {
                Some(id) => id.to_string(),
                None => return Ok(()),
            },
            PollEvent::Unreachable { error, .. } => {
                return Err(RunError::Git {
                    url: crate::publish::redact_url(&self.config.git.url),
                    branch: self.config.git.branch.clone(),
                    source: Box::new(error),
                });
            }
        };
        let mut st = LoopState {
            fetched: Some(commit.clone()),
            ..LoopState::default()
        };
        self.update(|s| s.fetched = Some(commit.clone()));
        self.render_fetched(&mut st).await;
        let Some(desired) = st.desired else {
            let count = self
                .sync
                .borrow()
                .rejected
                .as_ref()
                .map_or(0, |r| r.errors.len());
            if count == 0 {
                return Err(RunError::CommitUnreadable {
                    commit,
                    cache: self.config.git.cache_dir.clone(),
                });
            }
            return Err(RunError::Invalid { commit, count });
        };
        if !self.wait_ready(nodes.wait_until_ready(), "nodes").await {
            return Ok(());
        }
        let mut configmaps = None;
        let Some(store) = self
            .configmaps_for(&mut configmaps, &desired.namespace, tasks)
            .await
        else {
            return Ok(());
        };
        let mut reconciler = Reconciler::new(
            self.client.clone(),
            self.metrics.clone(),
            self.config.retry,
            self.config.write_concurrency,
            self.config.git.url.clone(),
            nodes.clone(),
        );
        self.reconcile_once(&mut reconciler, &desired, &store, gate)
            .await
            .map_err(|e| RunError::Reconcile(Box::new(e)))
    }
}
