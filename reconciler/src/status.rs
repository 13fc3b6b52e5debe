//! Commit statuses: what a rollout looks like on the user's forge.
//!
//! The controller turns each pool's [`PoolReport`](crate::rollout::PoolReport) into a
//! [`CommitStatus`] with the pure functions of [`aggregate`] ([`pool_status`],
//! [`invalid_commit_status`], [`summary_status`]) and hands it to a [`StatusWriter`], which
//! posts it to one [`Backend`]:
//!
//! - [`GitHub`]: REST commit statuses (`api.github.com` or GitHub Enterprise `/api/v3`);
//! - [`GitLab`]: the commit status API (project id or path);
//! - [`Gitea`]: Gitea's and Forgejo's commit status API;
//! - [`Notes`]: git notes on `refs/notes/kubelet-gitops` in the config repository itself,
//!   pushed to its remote when the remote accepts pushes (the embedded default);
//! - [`Recorder`]: keeps what it is given, for tests of the code that posts.
//!
//! The writer posts a status only when it changes (the last posted state and description
//! per commit and context are remembered), truncates descriptions to the forge's limit,
//! retries with exponential backoff and jitter honouring `Retry-After` and rate-limit
//! headers ([`retry`]), and keeps an outbox of the latest wanted status per commit and
//! context so that a forge outage loses no final status: it is delivered by the next
//! [`StatusWriter::post`] or [`StatusWriter::flush`] once the forge answers again. The
//! outbox and the memory of posted statuses live in memory only: after a restart the
//! controller derives every status again from the cluster and posts it once more.
//!
//! For review, [`StatusWriter::comment`] creates or updates in place the pull-request
//! comment that carries [`PLAN_MARKER`]; it is never duplicated.
//!
//! Tokens are read from files at each request (a rotated Secret is picked up without a
//! restart) and never logged: [`Secret`] has a redacted `Debug` and no `Display`.

pub mod aggregate;
mod config;
mod error;
mod gitea;
mod github;
mod gitlab;
mod http;
pub mod notes;
mod reporter;
pub mod retry;
mod writer;

use std::fmt;
use std::path::{Path, PathBuf};

pub use aggregate::{invalid_commit_status, pool_status, summary_status};
pub use config::{MERGE_REQUEST_REFSPEC, PULL_REFSPEC, StatusBackendConfig, StatusConfig};
pub use error::StatusError;
pub use gitea::{Gitea, GiteaConfig};
pub use github::{GitHub, GitHubConfig};
pub use gitlab::{GitLab, GitLabConfig, GitLabProject};
pub use notes::{Notes, NotesConfig, NotesRemote};
pub use reporter::commit_statuses;
pub(crate) use reporter::{StatusReporter, count_delivery};
pub use retry::RetryPolicy;
pub use writer::{Backend, CommentOutcome, Delivery, FlushReport, Recorder, StatusWriter};

/// The context of the summary status, and the prefix of every pool's context.
pub const CONTEXT: &str = "kubelet-gitops";

/// The context of the review status on pull-request heads.
pub const PLAN_CONTEXT: &str = "kubelet-gitops/plan";

/// The hidden marker that identifies our plan comment on a pull request.
pub const PLAN_MARKER: &str = "<!-- kubelet-gitops plan -->";

/// The context of a pool's status: `kubelet-gitops/<pool>`.
pub fn pool_context(pool: &str) -> String {
    format!("{CONTEXT}/{pool}")
}

/// The state of a commit status, in our terms. Each backend maps it to its forge's
/// states (GitLab has no `error`: it becomes `failed`, see [`GitLab`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StatusState {
    /// Rolling out, in canary or paused.
    Pending,
    /// Every node of the pool is Done on the commit's config.
    Success,
    /// A node failed on the commit's config (rolled back or degraded).
    Failure,
    /// The commit itself does not validate.
    Error,
}

impl StatusState {
    /// The name GitHub uses (and the one git notes carry).
    pub fn as_str(self) -> &'static str {
        match self {
            StatusState::Pending => "pending",
            StatusState::Success => "success",
            StatusState::Failure => "failure",
            StatusState::Error => "error",
        }
    }

    /// How bad the state is: the worst wins in a summary (success < pending < failure
    /// < error).
    pub fn severity(self) -> u8 {
        match self {
            StatusState::Success => 0,
            StatusState::Pending => 1,
            StatusState::Failure => 2,
            StatusState::Error => 3,
        }
    }
}

impl fmt::Display for StatusState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One status on one commit, in one context.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CommitStatus {
    /// The full commit id (40 or 64 hex digits).
    pub sha: String,
    /// `kubelet-gitops` for the summary, `kubelet-gitops/<pool>` per pool,
    /// `kubelet-gitops/plan` for review.
    pub context: String,
    pub state: StatusState,
    /// One line; each backend truncates it to its forge's limit.
    pub description: String,
    /// A link shown next to the status, if there is somewhere to point.
    pub target_url: Option<String>,
}

impl CommitStatus {
    /// A status without a link.
    pub fn new(
        sha: impl Into<String>,
        context: impl Into<String>,
        state: StatusState,
        description: impl Into<String>,
    ) -> CommitStatus {
        CommitStatus {
            sha: sha.into(),
            context: context.into(),
            state,
            description: description.into(),
            target_url: None,
        }
    }

    /// The same status, linking to `url`.
    pub fn with_target_url(mut self, url: impl Into<String>) -> CommitStatus {
        self.target_url = Some(url.into());
        self
    }
}

/// Cuts `text` to at most `limit` characters (Unicode scalar values, which is what the
/// forges count), ending with `…` when it was cut. Never splits a character.
pub fn truncate_description(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        return text.to_string();
    }
    if limit == 0 {
        return String::new();
    }
    let mut out: String = text.chars().take(limit - 1).collect();
    // Do not leave a dangling space before the ellipsis.
    let trimmed = out.trim_end().len();
    out.truncate(trimmed);
    out.push('…');
    out
}

/// A secret read from a file. `Debug` prints `Secret(<redacted>)`; there is no
/// `Display`, so it cannot end up in a log line or an error message by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Reads the secret in `path`, without trailing whitespace (a newline from `echo`).
    pub fn from_file(path: &Path, forge: &'static str) -> Result<Secret, StatusError> {
        let text = std::fs::read_to_string(path).map_err(|source| StatusError::TokenFile {
            forge,
            path: path.to_path_buf(),
            source,
        })?;
        let token = text.trim_end();
        if token.is_empty() {
            return Err(StatusError::EmptyToken {
                forge,
                path: path.to_path_buf(),
            });
        }
        Ok(Secret(token.to_string()))
    }

    /// The secret itself, for building a request header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Where a forge token lives. The file is read at each request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenFile(pub PathBuf);

impl TokenFile {
    /// Reads the token now.
    pub fn read(&self, forge: &'static str) -> Result<Secret, StatusError> {
        Secret::from_file(&self.0, forge)
    }
}

/// A full commit id: 40 (SHA-1) or 64 (SHA-256) hex digits.
pub(crate) fn is_commit_id(sha: &str) -> bool {
    (sha.len() == 40 || sha.len() == 64) && sha.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_keeps_short_text() {
        assert_eq!(truncate_description("10/10 nodes", 140), "10/10 nodes");
        assert_eq!(truncate_description("", 3), "");
    }

    #[test]
    fn truncation_cuts_on_a_char_boundary_with_an_ellipsis() {
        let text = "ééééé".repeat(40); // 200 two-byte chars
        let cut = truncate_description(&text, 140);
        assert_eq!(cut.chars().count(), 140);
        assert!(cut.ends_with('…'));
        assert!(cut.starts_with("éé"));
        let exact = "a".repeat(140);
        assert_eq!(truncate_description(&exact, 140), exact);
        let over = "a".repeat(141);
        let cut = truncate_description(&over, 140);
        assert_eq!(cut.chars().count(), 140);
        assert_eq!(cut, format!("{}…", "a".repeat(139)));
    }

    #[test]
    fn truncation_drops_a_trailing_space_before_the_ellipsis() {
        let cut = truncate_description("abc defgh", 5);
        assert_eq!(cut, "abc…");
    }

    #[test]
    fn severity_orders_states() {
        let mut states = [
            StatusState::Error,
            StatusState::Success,
            StatusState::Failure,
            StatusState::Pending,
        ];
        states.sort_by_key(|s| s.severity());
        assert_eq!(
            states,
            [
                StatusState::Success,
                StatusState::Pending,
                StatusState::Failure,
                StatusState::Error
            ]
        );
    }

    #[test]
    fn secrets_are_redacted_and_trimmed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "ghp_supersecret\n").unwrap();
        let secret = Secret::from_file(&path, "GitHub").unwrap();
        assert_eq!(secret.expose(), "ghp_supersecret");
        assert_eq!(format!("{secret:?}"), "Secret(<redacted>)");
        std::fs::write(&path, "  \n").unwrap();
        let err = Secret::from_file(&path, "GitHub").unwrap_err();
        assert!(err.to_string().contains("empty"), "{err}");
        let missing = Secret::from_file(&dir.path().join("nope"), "GitHub").unwrap_err();
        assert!(missing.to_string().contains("nope"), "{missing}");
    }

    #[test]
    fn commit_ids_are_checked() {
        assert!(is_commit_id(&"a".repeat(40)));
        assert!(is_commit_id(&"0123456789abcdef".repeat(4)));
        assert!(!is_commit_id("abc123"));
        assert!(!is_commit_id(&"g".repeat(40)));
    }
}
