//! The agent: observe, decide, act, report, in one loop.
//!
//! - [`decide`]: the pure decision. Given the Node's annotations, the checkpoint metadata,
//!   the kubelet's probe and the clock, the next [`decide::Step`]. Most of the behaviour
//!   is here and tested without any server.
//! - `drive`: the loop; each pass observes the node (`observe`, with the node's kubelet
//!   setup read at most once per pass: `context`), decides, and carries the step out
//!   (`steps`: download, checkpoint, validate, write, restart, verify, roll back,
//!   promote, restore drift), persisting its phase in the checkpoint store before the
//!   next decision, so a restarted agent resumes where it was; `publish` says it on the
//!   Node.
//! - [`admin`] and [`metrics`]: `/healthz`, `/readyz`, `/metrics`; [`ready`]: Node and
//!   pod readiness.
//!
//! [`run`] starts everything and runs until the future is dropped or a fatal error (one
//! that a retry cannot fix, such as a kubelet without `--config` in replace mode).

pub mod admin;
mod context;
pub mod decide;
mod drive;
pub mod metrics;
mod observe;
mod publish;
pub mod ready;
mod steps;

use std::path::PathBuf;

use kube::Client;
use kubelet_gitops_core::logging::{self, LogOutput, LoggingError};
use tracing::{info, warn};

use crate::args::{Args, Config, LogFormat, Target};
use crate::checkpoint::CheckpointStore;
use crate::config_file::{ConfigFile, Placement};
use crate::error::{CheckpointError, FileError, HostError, KubeletError};
use crate::hostflags::read_flags;
use crate::kubelet::{Kubelet, KubeletSettings};
use crate::lock::AgentLock;
use crate::report::{self, ReportError, Reporter};
use crate::watch::NodeWatch;

/// Why the agent stopped, or a step failed.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The options are invalid.
    #[error(transparent)]
    Args(#[from] crate::args::ArgsError),
    /// No usable kubeconfig or in-cluster config.
    #[error("failed to configure the Kubernetes client")]
    ClientConfig(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// An API call failed.
    #[error("{what}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    /// The checkpoint directory.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// Reading the kubelet's command line.
    #[error(transparent)]
    Host(#[from] HostError),
    /// Restarting or probing the kubelet.
    #[error(transparent)]
    Kubelet(#[from] KubeletError),
    /// Writing the report.
    #[error(transparent)]
    Report(#[from] ReportError),
    /// A host file operation.
    #[error("failed to {op} {path}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The kubelet is set up in a way the agent cannot work with.
    #[error("{0}")]
    Setup(String),
    /// The admin server failed.
    #[error("admin server on {addr}")]
    Admin {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

impl From<FileError> for AgentError {
    fn from(FileError { op, path, source }: FileError) -> AgentError {
        AgentError::Io { op, path, source }
    }
}

/// Installs the tracing subscriber: text or JSON lines on stderr, filtered by `filter`
/// (`info` when it does not parse). Does nothing when one is installed already (tests).
pub fn init_logging(format: LogFormat, filter: &str) {
    if let Err(e @ LoggingError::Filter { .. }) = logging::init(format, filter, LogOutput::Stderr) {
        eprintln!("{e}; using \"info\"");
        let _ = logging::init(format, "info", LogOutput::Stderr);
    }
}

/// Where the payload goes, from the options and the kubelet's flags (host paths).
fn placement(config: &Config) -> Result<Placement, AgentError> {
    let need_flags = matches!(config.target, Target::Replace(None) | Target::DropIn(None));
    let flags = if need_flags {
        Some(read_flags(&config.flag_source, &config.host_root)?)
    } else {
        None
    };
    Ok(match &config.target {
        Target::Replace(Some(path)) => Placement::ConfigFile { path: path.clone() },
        Target::Replace(None) => {
            let file = flags.as_ref().and_then(|f| f.config_file()).ok_or_else(|| {
                AgentError::Setup(format!(
                    "the kubelet's command line ({}) has no --config: set --kubelet-config, or use --mode=drop-in",
                    config.flag_source
                ))
            })?;
            Placement::ConfigFile {
                path: PathBuf::from(file),
            }
        }
        Target::DropIn(Some(dir)) => Placement::DropIn {
            dir: dir.clone(),
            name: crate::args::DROP_IN_FILE.to_string(),
        },
        Target::DropIn(None) => {
            let dir = flags.as_ref().and_then(|f| f.config_dir()).ok_or_else(|| {
                AgentError::Setup(format!(
                    "the kubelet's command line ({}) has no --config-dir: set --drop-in-dir, or use --mode=replace",
                    config.flag_source
                ))
            })?;
            Placement::DropIn {
                dir: PathBuf::from(dir),
                name: crate::args::DROP_IN_FILE.to_string(),
            }
        }
    })
}

/// The User-Agent of the agent's API requests, `kubelet-gitops-agent/0.1.0 (node-1)`: kube's
/// client sends none, and the API server's audit log and metrics, and the sim's request
/// log, tell clients apart by it.
pub fn user_agent(node_name: &str) -> String {
    format!(
        "{}/{} ({node_name})",
        report::COMPONENT,
        env!("CARGO_PKG_VERSION")
    )
}

async fn client(config: &Config) -> Result<Client, AgentError> {
    let boxed = |e: Box<dyn std::error::Error + Send + Sync>| AgentError::ClientConfig(e);
    let mut kube_config = match &config.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path).map_err(|e| boxed(Box::new(e)))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| boxed(Box::new(e)))?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| boxed(Box::new(e)))?,
    };
    // A Node name is a DNS subdomain: a valid header value.
    let agent = http::HeaderValue::from_str(&user_agent(&config.node_name))
        .map_err(|e| boxed(Box::new(e)))?;
    kube_config.headers.push((http::header::USER_AGENT, agent));
    Client::try_from(kube_config).map_err(|e| boxed(Box::new(e)))
}

/// Runs the agent with `config` until the returned future is dropped or a fatal error.
pub async fn run(config: Config) -> Result<(), AgentError> {
    crate::kubelet::install_crypto_provider();
    let client = client(&config).await?;
    let file = ConfigFile::new(placement(&config)?, &config.host_root);
    // Held for the agent's whole life, taken before the store is opened: while it is
    // held, kubelet-gitops-rescue (run by systemd before every kubelet start) leaves the
    // node to the agent; while the rescue works, the agent waits for it.
    let _lock = AgentLock::acquire(&config.checkpoint_dir)
        .await
        .map_err(|source| AgentError::Io {
            op: "lock",
            path: AgentLock::path(&config.checkpoint_dir),
            source,
        })?;
    let store = CheckpointStore::open(&config.checkpoint_dir)?;
    let mut settings = KubeletSettings::new(config.restart.clone(), config.healthz_url.clone());
    settings.configz_url = config.configz_url.clone();
    settings.runtime_cgroup_driver = Some(config.cgroups.driver.as_str().to_string());
    settings.token_file = config.kubelet_token_file.clone();
    settings.insecure_skip_tls_verify = config.kubelet_insecure_skip_tls_verify;
    settings.ca_file = config.kubelet_ca_file.clone();
    let kubelet = Kubelet::new(settings)?;
    let metrics = metrics::Metrics::new();
    let admin_state = admin::AdminState::new(metrics.clone());
    let (bound, serve) = admin::bind(config.admin_addr, admin_state.clone())
        .await
        .map_err(|source| AgentError::Admin {
            addr: config.admin_addr,
            source,
        })?;
    info!(
        node = %config.node_name,
        admin = %bound,
        config_file = %file.path().display(),
        checkpoints = %config.checkpoint_dir.display(),
        "kubelet-gitops-agent starting"
    );
    let admin_task = tokio::spawn(async move {
        if let Err(e) = serve.await {
            warn!(error = %e, "admin server stopped");
        }
    });
    let _abort_admin = AbortOnDrop(admin_task);
    let nodes = NodeWatch::start(client.clone(), &config.node_name, config.watch_timeout);
    let reporter = Reporter::new(client.clone(), &config.node_name).counting(metrics.clone());
    let mut driver = drive::Driver::new(drive::Parts {
        config,
        client,
        store,
        kubelet,
        reporter,
        nodes,
        file,
        metrics,
        admin: admin_state,
    });
    driver.run().await
}

impl Args {
    /// Validates the options, sets up logging, and runs the agent until SIGTERM or
    /// SIGINT (an interrupted apply resumes at the next start).
    pub async fn run(self) -> Result<(), AgentError> {
        let config = self.into_config()?;
        init_logging(config.log_format, &config.log);
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(|e| AgentError::Setup(format!("cannot handle SIGTERM: {e}")))?;
        tokio::select! {
            result = run(config) => result,
            _ = term.recv() => {
                tracing::info!("SIGTERM: stopping");
                Ok(())
            }
            _ = tokio::signal::ctrl_c() => {
                tracing::info!("interrupted: stopping");
                Ok(())
            }
        }
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
