//! What can go wrong with a git source, and what happens next: retry with backoff, or
//! wait for a person to fix the configuration or the remote.

use std::path::PathBuf;

/// A git operation failed. [`GitError::is_retryable`] says whether waiting may fix it.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// The path is not a git repository (work tree or bare).
    #[error("{path}: not a git repository")]
    NotARepository {
        path: PathBuf,
        #[source]
        source: git2::Error,
    },
    /// A revision does not resolve in a repository.
    #[error("revision {rev:?} not found in {repo}")]
    NoSuchRevision {
        rev: String,
        repo: String,
        #[source]
        source: git2::Error,
    },
    /// A revision resolves to something that is not a commit (a tree or a blob).
    #[error("revision {rev:?} in {repo} does not name a commit")]
    NotACommit {
        rev: String,
        repo: String,
        #[source]
        source: git2::Error,
    },
    /// The remote URL cannot be used (unsupported scheme, malformed, or not matching the
    /// configured authentication).
    #[error("invalid git URL {url:?}: {reason}")]
    BadUrl { url: String, reason: String },
    /// The branch name is not a valid git ref name.
    #[error("invalid branch name {branch:?}")]
    BadBranch { branch: String },
    /// An extra refspec is malformed.
    #[error("invalid refspec {refspec:?}: {reason}")]
    BadRefspec { refspec: String, reason: String },
    /// The remote answered but has no such branch.
    #[error(
        "branch {branch:?} not found on {url}; the remote has {}",
        list_or_none(available)
    )]
    NoSuchBranch {
        url: String,
        branch: String,
        /// Every `refs/heads/*` the remote advertised.
        available: Vec<String>,
    },
    /// The remote could not be reached or the transfer broke off.
    #[error("cannot fetch from {url}: {source}")]
    Unreachable {
        url: String,
        #[source]
        source: git2::Error,
    },
    /// The remote rejected the credentials.
    #[error("authentication to {url} as {username:?} failed: {message}")]
    Auth {
        url: String,
        username: String,
        message: String,
    },
    /// A credential file (token, SSH key, known_hosts) cannot be read.
    #[error("cannot read {what} {path}")]
    CredentialFile {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The SSH server's host key is not listed in the known_hosts file.
    #[error("host key of {host} ({key_type}) is not in {known_hosts}")]
    UnknownHostKey {
        host: String,
        key_type: String,
        known_hosts: PathBuf,
    },
    /// The SSH server's host key differs from the one(s) the known_hosts file lists.
    #[error(
        "host key of {host} ({key_type}) does not match {known_hosts} (line {}); \
         the host key changed or someone is intercepting the connection",
        lines_list(lines)
    )]
    HostKeyMismatch {
        host: String,
        key_type: String,
        known_hosts: PathBuf,
        /// The known_hosts lines that name the host.
        lines: Vec<usize>,
    },
    /// The SSH server's host key is marked `@revoked` in the known_hosts file.
    #[error("host key of {host} is revoked in {known_hosts} line {line}")]
    RevokedHostKey {
        host: String,
        known_hosts: PathBuf,
        line: usize,
    },
    /// The local cache repository cannot be created or opened.
    #[error("cannot use git cache repository {path}")]
    Cache {
        path: PathBuf,
        #[source]
        source: git2::Error,
    },
    /// Any other libgit2 failure, with what was being done.
    #[error("git: {what}")]
    Git {
        what: String,
        #[source]
        source: git2::Error,
    },
    /// The blocking git task panicked or was cancelled.
    #[error("git task did not complete: {0}")]
    Task(String),
}

impl GitError {
    /// Whether retrying later, without a person changing anything, may succeed.
    ///
    /// Retryable: the network and the remote (`Unreachable`), rejected credentials
    /// (`Auth`: tokens are read from their file at each fetch, so a rotated Secret fixes it
    /// without a restart, and forges answer 401 during their own incidents), unreadable
    /// credential files (a Secret volume being updated) and a broken task.
    ///
    /// Not retryable (a person must act): a bad URL, a missing branch or revision, an unknown,
    /// changed or revoked SSH host key, a cache directory that cannot be used. The poller still
    /// retries those, at its longest backoff, so a fix is picked up without a restart.
    pub fn is_retryable(&self) -> bool {
        match self {
            GitError::Unreachable { .. }
            | GitError::Auth { .. }
            | GitError::CredentialFile { .. }
            | GitError::Task(_) => true,
            GitError::NotARepository { .. }
            | GitError::NoSuchRevision { .. }
            | GitError::NotACommit { .. }
            | GitError::BadUrl { .. }
            | GitError::BadBranch { .. }
            | GitError::BadRefspec { .. }
            | GitError::NoSuchBranch { .. }
            | GitError::UnknownHostKey { .. }
            | GitError::HostKeyMismatch { .. }
            | GitError::RevokedHostKey { .. }
            | GitError::Cache { .. }
            | GitError::Git { .. } => false,
        }
    }
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "no branches".to_string()
    } else {
        items.join(", ")
    }
}

fn lines_list(lines: &[usize]) -> String {
    lines
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
