//! Why `run` stopped.

use std::net::SocketAddr;
use std::path::PathBuf;

use super::reconcile::ReconcileError;
use crate::git::GitError;
use crate::status::StatusError;

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
    /// Signed commits are required and the commit's signature is refused.
    #[error("commit {commit}: {reason}; nothing was applied")]
    SignatureRefused { commit: String, reason: String },
    /// Nodes the commit would reach would refuse their pool's config (the log names them).
    #[error(
        "commit {commit} would be refused by nodes it reaches ({count} problems: node, kubelet flag and message in the log); nothing was applied"
    )]
    RefusedByNodes { commit: String, count: usize },
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
        matches!(
            self,
            RunError::Invalid { .. }
                | RunError::RefusedByNodes { .. }
                | RunError::SignatureRefused { .. }
        )
    }
}
