//! A commit status in our terms, before a backend maps it onto its forge: the contexts
//! we post under, our states, and how a description is cut to a forge's limit.

use std::fmt;

use kubelet_gitops_core::message::{self, Limit};

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
/// states (GitLab has no `error`: it becomes `failed`, see [`GitLab`](super::GitLab)).
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

/// `text` cut to the `limit` a forge puts on a description: characters (Unicode scalar
/// values, which is what the forges count), ending with `…` when it was cut.
pub fn truncate_description(text: &str, limit: usize) -> String {
    message::truncate(text, Limit::Chars(limit), "…")
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
    fn commit_ids_are_checked() {
        assert!(is_commit_id(&"a".repeat(40)));
        assert!(is_commit_id(&"0123456789abcdef".repeat(4)));
        assert!(!is_commit_id("abc123"));
        assert!(!is_commit_id(&"g".repeat(40)));
    }
}
