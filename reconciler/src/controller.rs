//! `kubelet-gitops run`: the reconciler's loop, the effects side of the design.
//!
//! ```text
//!  Poller (own task) ──NewCommit──> render (blocking pool) ──valid──> Desired
//!        │                                  └─invalid─> SyncState.rejected, nothing applied
//!  Node watch (fleet) / ConfigMaps ──changed──┐
//!  lease (leader.rs) ──role changed───────┤
//!  poll tick / webhook ───────────────────┴─> reconcile (at most every 200 ms)
//!                                              publish -> plan -> patch Nodes -> GC
//! ```
//!
//! - **Observe**: Node metadata feeds the [`crate::fleet::Fleet`] one watch event at a
//!   time, and the published ConfigMaps come from a reflector ([`observe`]); nothing is
//!   read from the API server during a reconcile, so a converged cluster costs no
//!   request at all, and a round plans again only the pools whose nodes or target
//!   changed.
//! - **Plan** is pure ([`crate::rollout::plan_rollout`], [`crate::gc::plan_gc`]).
//! - **Apply** ([`reconcile`]) is the only code that writes, and only while this
//!   replica may (leader election, not shutting down). A failed round is retried with
//!   backoff; every request is retried inside it ([`crate::api`]).
//! - **Triggers**: a new commit, a poll while anything is unsettled (the last reconcile
//!   failed or wrote, writes not yet seen, a held commit; an idle poll costs only the
//!   poll, and a full resync runs every 10 minutes), node changes (labels, agent
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
//! - **Commit statuses** ([`crate::status`]) are posted by their own task from the
//!   [`SyncState`] channel, and pull-request heads are reviewed by another
//!   ([`crate::review`]): neither ever holds up the loop, and neither writes to the
//!   cluster.
//!
//! [`task`] holds the loop; [`commits`] turns polls into the desired state.

mod client;
mod commits;
mod config;
mod drain;
mod error;
mod observe;
mod reconcile;
mod resume;
mod task;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::webhook::{self, WebhookConfig};

pub use crate::api::RetryPolicy;
pub use crate::state::{AppliedCommit, RejectedCommit, Role, SyncState};
pub use crate::status::{StatusBackendConfig, StatusConfig};
pub use client::{client, drain_client, user_agent};
pub use config::{KubeSource, RunConfig};
pub use error::RunError;
pub use reconcile::ReconcileError;

use task::Controller;

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
    let drain = drain_client(&config.kube, &config.identity).await?;
    start_with_client(config, client, drain).await
}

/// [`start`] with clients built elsewhere: `drain_client` is for a drain's evictions
/// ([`drain_client`]).
pub async fn start_with_client(
    mut config: RunConfig,
    client: kube::Client,
    drain_client: kube::Client,
) -> Result<RunningController, RunError> {
    if config.status.review && !config.once {
        // The forge's pull-request heads are fetched with the branch.
        for refspec in config.status.backend.review_refspecs() {
            if !config.git.extra_refspecs.contains(&refspec) {
                config.git.extra_refspecs.push(refspec);
            }
        }
    }
    let metrics = Arc::new(Metrics::new());
    let writer = config
        .status
        .writer(&config.git, metrics.clone())
        .await
        .map_err(|source| RunError::Status {
            backend: config.status.backend.name(),
            source,
        })?;
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
        drain_client,
        writer,
        metrics: metrics.clone(),
        sync: sync_tx,
        shutdown: shutdown.clone(),
        changed: Arc::new(Notify::new()),
        wake,
        render_cache: Arc::default(),
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
