//! What `run` is given: [`RunConfig`], validated from the command line by
//! [`crate::args::RunArgs::into_config`] or built by a test.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::api::RetryPolicy;
use crate::clock::{Clock, SystemClock};
use crate::git::signature::SignaturePolicy;
use crate::git::{self, GitConfig};
use crate::leader::LeaseConfig;
use crate::render::RenderOptions;
use crate::status::StatusConfig;

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
    /// When set, a commit is applied only if its signature is accepted by these keys
    /// (`--require-signed-commits`).
    pub signatures: Option<Arc<SignaturePolicy>>,
    /// What time it is, for maintenance windows, wave soaks and jitter (the system's;
    /// tests set their own, [`crate::clock::ManualClock`]).
    pub clock: Arc<dyn Clock>,
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
            signatures: None,
            clock: Arc::new(SystemClock),
        }
    }
}
