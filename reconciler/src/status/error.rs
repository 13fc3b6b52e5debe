//! What can go wrong posting a status or a comment, and what happens next: retry (the
//! forge is down, rate limited, or the token file is not mounted yet), or stop until a
//! person fixes the configuration (a rejected token, an unknown repository).

use std::path::PathBuf;
use std::time::Duration;

use super::retry::FailureKind;

/// Posting a status or a comment failed. [`StatusError::is_retryable`] says whether
/// waiting may fix it; [`StatusError::retry_after`] how long the forge asked to wait.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// The token file cannot be read (not mounted yet, wrong path).
    #[error("cannot read the {forge} token file {path}")]
    TokenFile {
        forge: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The token file holds nothing but whitespace.
    #[error("the {forge} token file {path} is empty")]
    EmptyToken { forge: &'static str, path: PathBuf },
    /// The backend's configuration cannot work (a base URL without a scheme, an empty
    /// owner, a commit id that is not one).
    #[error("invalid {forge} status configuration: {reason}")]
    Config { forge: &'static str, reason: String },
    /// The request did not get an answer: connection refused, timeout, TLS failure.
    #[error("{forge}: {method} {url} got no answer: {source}")]
    Transport {
        forge: &'static str,
        method: &'static str,
        url: String,
        #[source]
        source: reqwest::Error,
    },
    /// The forge answered with an error status.
    #[error("{forge}: {method} {url} answered {status}: {message}")]
    Rejected {
        forge: &'static str,
        method: &'static str,
        url: String,
        status: u16,
        /// The forge's own message (its JSON `message`, or the start of the body).
        message: String,
        /// What the answer asks of us ([`super::retry::classify`]).
        kind: FailureKind,
        /// How long the forge asked to wait (`Retry-After`, rate-limit reset headers).
        retry_after: Option<Duration>,
    },
    /// The forge answered 2xx with a body we cannot read.
    #[error("{forge}: {method} {url}: unexpected answer: {reason}")]
    BadResponse {
        forge: &'static str,
        method: &'static str,
        url: String,
        reason: String,
    },
    /// A git operation on the notes ref failed.
    #[error("git notes in {repo}: {what}: {source}")]
    Notes {
        repo: PathBuf,
        what: String,
        #[source]
        source: git2::Error,
    },
    /// The blocking notes task did not finish (the runtime is shutting down).
    #[error("git notes task for {repo} did not finish: {reason}")]
    NotesTask { repo: PathBuf, reason: String },
    /// The backend has no pull requests to comment on (git notes, the recorder).
    #[error("{backend} cannot comment on pull requests")]
    CommentsUnsupported { backend: &'static str },
}

impl StatusError {
    /// What the failure asks of us: retry with backoff, hold the forge (a rate limit, a
    /// refused token), or give up (a configuration mistake, any other 4xx).
    pub fn kind(&self) -> FailureKind {
        match self {
            StatusError::TokenFile { .. }
            | StatusError::EmptyToken { .. }
            | StatusError::Transport { .. }
            | StatusError::Notes { .. }
            | StatusError::NotesTask { .. } => FailureKind::Transient,
            StatusError::Rejected { kind, .. } => *kind,
            StatusError::Config { .. }
            | StatusError::BadResponse { .. }
            | StatusError::CommentsUnsupported { .. } => FailureKind::Permanent,
        }
    }

    /// Whether trying again later may succeed: everything but configuration mistakes and
    /// 4xx answers other than 401, 408, 429 and GitHub's rate-limit 403s. (A refused
    /// token may be fixed by rotating the token file, which is read at each request.)
    pub fn is_retryable(&self) -> bool {
        self.kind() != FailureKind::Permanent
    }

    /// How long the forge asked to wait before the next request, if it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            StatusError::Rejected { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The HTTP status the forge answered, if it answered.
    pub fn http_status(&self) -> Option<u16> {
        match self {
            StatusError::Rejected { status, .. } => Some(*status),
            _ => None,
        }
    }
}
