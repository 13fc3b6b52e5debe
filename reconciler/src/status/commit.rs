//! A commit status in our terms, before a backend maps it onto its forge: the contexts
//! we post under, our states, and how a description is cut to a forge's limit.

use std::fmt;

use kubelet_gitops_core::message::{self, Limit};
use sha2::Digest;

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

/// How many hex digits of the context's SHA-256 a shortened key ends with.
const KEY_HASH_DIGITS: usize = 12;

/// `context` made to fit a forge whose status key holds at most `limit` characters
/// (Bitbucket Cloud: 40). A context that fits is the key as it is; a longer one keeps its
/// first characters and ends with `~` and the first 12 hex digits of its SHA-256
/// (`kubelet-gitops/a-very-long-p~1f3a9c0d2b7e`): the same context gives the same key on
/// every run and every replica, and, since `~` appears in no context of ours (pool names
/// are DNS labels), a shortened key is never the key of another, unshortened context.
pub fn fit_key(context: &str, limit: usize) -> String {
    if context.chars().count() <= limit {
        return context.to_string();
    }
    let digest = sha2::Sha256::digest(context.as_bytes());
    let hex: String = digest
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>()
        .chars()
        .take(KEY_HASH_DIGITS)
        .collect();
    let keep = limit.saturating_sub(KEY_HASH_DIGITS + 1);
    let prefix: String = context.chars().take(keep).collect();
    format!("{prefix}~{hex}")
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
    fn keys_fit_the_limit_deterministically() {
        assert_eq!(fit_key("kubelet-gitops/gpu", 40), "kubelet-gitops/gpu");
        let exact = format!("kubelet-gitops/{}", "p".repeat(25));
        assert_eq!(fit_key(&exact, 40), exact);
        let long = format!("kubelet-gitops/{}", "high-memory-".repeat(5));
        let key = fit_key(&long, 40);
        assert_eq!(key.chars().count(), 40, "{key}");
        assert!(key.starts_with("kubelet-gitops/high-"), "{key}");
        assert_eq!(key.split_once('~').unwrap().1.len(), 12, "{key}");
        assert_eq!(fit_key(&long, 40), key, "the same context, the same key");
        // Two long contexts with the same first characters differ in their hash.
        let other = format!("{long}x");
        assert_ne!(fit_key(&other, 40), key);
        assert_eq!(fit_key(&other, 40)[..27], key[..27]);
    }

    #[test]
    fn commit_ids_are_checked() {
        assert!(is_commit_id(&"a".repeat(40)));
        assert!(is_commit_id(&"0123456789abcdef".repeat(4)));
        assert!(!is_commit_id("abc123"));
        assert!(!is_commit_id(&"g".repeat(40)));
    }
}
