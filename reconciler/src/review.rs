//! Review of pull-request heads: each new or moved head is rendered, validated and
//! planned against what the branch runs, and gets a `kubelet-gitops/plan` status (and,
//! with `--comment`, the Markdown plan as a pull-request comment, updated in place).
//! Nothing of a head is ever applied: this module has no Kubernetes client at all; it
//! reads the nodes from the controller's watch cache and writes only to the forge.
//!
//! - **Which heads.** The git source fetches the forge's pull-request refs alongside the
//!   branch ([`PULL_REFSPEC`](crate::status::PULL_REFSPEC) on GitHub and Gitea,
//!   [`MERGE_REQUEST_REFSPEC`](crate::status::MERGE_REQUEST_REFSPEC) on GitLab,
//!   [`BITBUCKET_PULL_REFSPEC`](crate::status::BITBUCKET_PULL_REFSPEC) on Bitbucket
//!   Data Center, [`AZURE_PULL_REFSPEC`](crate::status::AZURE_PULL_REFSPEC), the merge,
//!   on Azure DevOps). Bitbucket Cloud publishes none: the git source fetches every
//!   branch ([`BITBUCKET_CLOUD_BRANCHES_REFSPEC`](crate::status::BITBUCKET_CLOUD_BRANCHES_REFSPEC)),
//!   the open pull requests are listed through its API when a branch moved and every
//!   [`LIST_INTERVAL`] ([`listing_due`]), and each one into the followed branch from a branch of the same
//!   repository is reviewed as the head `refs/bitbucket/pull/<id>/head`: its source
//!   branch's commit, once it is the commit the API names ([`listed_heads`]).
//!   A head is reviewed when its ref is new or points at another commit than when it was
//!   last reviewed; the memory of what was reviewed is in memory only, so a restart
//!   reviews every head once more (the status writer sends nothing the forge already
//!   has, and the comment is updated in place, never duplicated). Heads whose commit is
//!   older than the maximum age are left alone: forges keep the refs of closed pull
//!   requests forever.
//! - **Against what.** The base is the merge base of the head and the applied commit of
//!   the branch (what the pull request itself changes, as a forge's diff shows it), or
//!   the applied commit when they share no history. The plan says which in a note. A
//!   base that does not validate is compared as nothing, with a note. Nothing is
//!   reviewed before the applied commit is known ([`base_known`]): after a restart on a
//!   branch head that does not validate, the controller first finds the commit the
//!   cluster is on, and the reviewer waits for it.
//! - **Same plan, same text.** The nodes are planned in name order ([`sorted_nodes`]), so
//!   the plan of an unchanged head is the same Markdown after a restart and its comment is
//!   not edited.
//! - **What is posted.** `success` with [`plan::markdown::summary`] ("2 pools change, 42 nodes;
//!   1 field overridden by flags on 3 nodes"); `failure` when the head's pools overlap
//!   (it could not be applied as it is); `error` with the first problem when the head
//!   does not validate.
//!
//! [`prepare`] (blocking: git and rendering) and [`review`] (pure) are separate from the
//! task ([`Reviewer`]) that posts.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kubelet_gitops_core::message::{error_chain, markdown_code};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::git::{CommitSource, GitError};
use crate::metrics::{Metrics, ReviewResult};
use crate::model::NodeInfo;
use crate::plan;
use crate::render::{RenderOptions, RenderedRepo, RepoError, render_repo};
use crate::state::SyncState;
use crate::status::{
    CommitStatus, PLAN_CONTEXT, PullRequest, StatusState, StatusWriter, count_delivery,
};

/// How often the open pull requests of a forge that publishes no pull-request refs
/// (Bitbucket Cloud) are listed again when no branch moved: a pull request opened on a
/// branch pushed earlier is reviewed within this (the default poll interval).
pub const LIST_INTERVAL: Duration = Duration::from_secs(30);

/// Where the git source keeps Bitbucket Cloud's branches
/// ([`BITBUCKET_CLOUD_BRANCHES_REFSPEC`](crate::status::BITBUCKET_CLOUD_BRANCHES_REFSPEC)).
const BITBUCKET_BRANCHES: &str = "refs/bitbucket/heads/";

/// The name a Bitbucket Cloud pull request's head is reviewed under:
/// `refs/bitbucket/pull/<id>/head`. Not a ref in the cache: the commit is its source
/// branch's.
pub fn bitbucket_pull_ref(id: u64) -> String {
    format!("refs/bitbucket/pull/{id}/head")
}

/// The pull- or merge-request number of a head ref: `refs/pull/7/head` (GitHub, Gitea),
/// `refs/merge-requests/7/head` (GitLab), `refs/pull-requests/7/from` (Bitbucket Data
/// Center), `refs/pull/7/merge` (Azure DevOps, which publishes only the merge) and
/// `refs/bitbucket/pull/7/head` (Bitbucket Cloud, [`bitbucket_pull_ref`]) are 7.
/// Any other ref is not a request head. Only the refs of the configured forge are
/// fetched ([`review_refspecs`](crate::status::StatusBackendConfig::review_refspecs)),
/// so GitHub's `refs/pull/7/merge` never reaches here.
pub fn request_number(refname: &str) -> Option<u64> {
    let number = [
        ("refs/pull/", "/head"),
        ("refs/merge-requests/", "/head"),
        ("refs/pull-requests/", "/from"),
        ("refs/pull/", "/merge"),
        ("refs/bitbucket/pull/", "/head"),
    ]
    .iter()
    .find_map(|(prefix, suffix)| refname.strip_prefix(prefix)?.strip_suffix(suffix))?;
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    number.parse().ok()
}

/// Whether the open pull requests are to be listed again, given how long ago and with
/// which fetched branches they were listed last (`None`: never): when a branch moved,
/// appeared or went, or [`LIST_INTERVAL`] has passed. Not at every change of the
/// controller's state (a rollout changes it at every node), which would spend the
/// forge's rate limit on listings that find nothing new. Pure.
pub fn listing_due(
    last: Option<(Duration, &BTreeMap<String, String>)>,
    branches: &BTreeMap<String, String>,
) -> bool {
    last.is_none_or(|(ago, listed_with)| listed_with != branches || ago >= LIST_INTERVAL)
}

/// Why a listed pull request is not reviewed now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotReviewed {
    /// It is into another branch than the one followed: its plan against this branch's
    /// cluster would mislead.
    OtherBranch { destination: String },
    /// Its source branch is in another repository (a fork), whose commits the git source
    /// does not fetch.
    Fork { repository: String },
    /// Its source branch is not in the cache (yet): the next poll fetches it.
    NotFetched { branch: String },
    /// The cache holds another commit of its source branch than the API names (the
    /// branch moved between the listing and the poll): reviewed once they agree.
    Moved { listed: String, fetched: String },
}

/// The heads to review on a forge that lists its pull requests instead of publishing
/// refs (Bitbucket Cloud): each open pull request into `branch` from a branch of the same
/// repository, as [`bitbucket_pull_ref`] to the commit of its source branch in
/// `branches` (the fetched refs, `refs/bitbucket/heads/<name>` to commit), when that
/// commit is the one the API names (Bitbucket gives 12 hex digits, a prefix of it); and
/// why each other one is not reviewed. Pure.
pub fn listed_heads(
    prs: &[PullRequest],
    branches: &BTreeMap<String, String>,
    branch: &str,
) -> (BTreeMap<String, String>, Vec<(u64, NotReviewed)>) {
    let mut heads = BTreeMap::new();
    let mut skipped = Vec::new();
    for pr in prs {
        if pr.destination_branch != branch {
            skipped.push((
                pr.id,
                NotReviewed::OtherBranch {
                    destination: pr.destination_branch.clone(),
                },
            ));
            continue;
        }
        if !pr.same_repository {
            skipped.push((
                pr.id,
                NotReviewed::Fork {
                    repository: pr.source_repository.clone(),
                },
            ));
            continue;
        }
        let Some(fetched) = branches.get(&format!("{BITBUCKET_BRANCHES}{}", pr.source_branch))
        else {
            skipped.push((
                pr.id,
                NotReviewed::NotFetched {
                    branch: pr.source_branch.clone(),
                },
            ));
            continue;
        };
        let listed = pr.source_commit.to_ascii_lowercase();
        // A prefix of at least 7 hex digits, as git abbreviates; an empty or odd one
        // matches nothing.
        let agrees = listed.len() >= 7
            && listed.bytes().all(|b| b.is_ascii_hexdigit())
            && fetched.starts_with(&listed);
        if !agrees {
            skipped.push((
                pr.id,
                NotReviewed::Moved {
                    listed,
                    fetched: fetched.clone(),
                },
            ));
            continue;
        }
        heads.insert(bitbucket_pull_ref(pr.id), fetched.clone());
    }
    (heads, skipped)
}

/// The heads of `now` that are new or moved since `seen` (ref name to commit), in ref
/// order.
pub fn moved_heads<'a>(
    seen: &BTreeMap<String, String>,
    now: &'a BTreeMap<String, String>,
) -> Vec<(&'a str, &'a str)> {
    now.iter()
        .filter(|(name, commit)| seen.get(*name) != Some(*commit))
        .map(|(name, commit)| (name.as_str(), commit.as_str()))
        .collect()
}

/// A head read from the cache and rendered, with the base it is compared with.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The head's full commit id.
    pub head: String,
    /// Its short id, for the plan's header.
    pub head_short: String,
    /// The head rendered, or every problem.
    pub rendered: Result<RenderedRepo, Vec<RepoError>>,
    /// The base rendered (`None`: nothing to compare with).
    pub base: Option<RenderedRepo>,
    /// The base's short id.
    pub base_short: Option<String>,
    /// What the reader should know about the base (which one, and whether it validates).
    pub notes: Vec<String>,
}

/// Reads `head` from the bare cache at `cache` and renders it, then picks and renders the
/// base: the merge base of `head` and `applied` (the commit the branch runs), else
/// `applied`. Blocking. `Ok(None)` when the head's commit is older than `not_before`
/// (Unix seconds). `branch` names the branch in the notes.
pub fn prepare(
    cache: &Path,
    origin: &str,
    branch: &str,
    head: &str,
    applied: Option<&str>,
    options: &RenderOptions,
    not_before: Option<i64>,
) -> Result<Option<Prepared>, GitError> {
    let head_src = CommitSource::open(cache, head, origin)?;
    if not_before.is_some_and(|t| head_src.time() < t) {
        return Ok(None);
    }
    let head_short = head_src.info().short_id.clone();
    let rendered = render_repo(&head_src, options);
    let mut notes = Vec::new();
    let (base, base_short) = match applied {
        None => {
            notes.push(format!(
                "Nothing of `{branch}` is applied yet: every pool is compared with nothing."
            ));
            (None, None)
        }
        Some(applied) => {
            let base_id = choose_base(cache, head, applied, branch, &mut notes)?;
            let src = CommitSource::open(cache, &base_id, origin)?;
            let short = src.info().short_id.clone();
            let base = match render_repo(&src, options) {
                Ok(r) => Some(r),
                Err(errors) => {
                    let first = errors.first().map(RepoError::to_string).unwrap_or_default();
                    notes.push(format!(
                        "The base `{short}` does not validate ({} error{}; the first: {}): \
                         every pool is compared with nothing.",
                        errors.len(),
                        if errors.len() == 1 { "" } else { "s" },
                        markdown_code(&first)
                    ));
                    None
                }
            };
            (base, Some(short))
        }
    };
    Ok(Some(Prepared {
        head: head.to_string(),
        head_short,
        rendered,
        base,
        base_short,
        notes,
    }))
}

/// The merge base of `head` and `applied`, or `applied` when there is none; a note says
/// which.
fn choose_base(
    cache: &Path,
    head: &str,
    applied: &str,
    branch: &str,
    notes: &mut Vec<String>,
) -> Result<String, GitError> {
    let git_error = |what: String| {
        move |source| GitError::Git {
            what: what.clone(),
            source,
        }
    };
    let repo = git2::Repository::open_bare(cache)
        .map_err(git_error(format!("opening {}", cache.display())))?;
    let oid = |id: &str| {
        git2::Oid::from_str(id).map_err(git_error(format!("parsing the commit id {id}")))
    };
    let (head_oid, applied_oid) = (oid(head)?, oid(applied)?);
    let applied_short = applied.get(..7).unwrap_or(applied);
    match repo.merge_base(head_oid, applied_oid) {
        Ok(base) if base == applied_oid => {
            notes.push(format!(
                "Compared with `{applied_short}`, the applied commit of `{branch}` (this head \
                 is based on it)."
            ));
            Ok(base.to_string())
        }
        Ok(base) => {
            let base = base.to_string();
            notes.push(format!(
                "Compared with `{}`, where this head branched off `{branch}` (the merge base; \
                 `{applied_short}` is applied): the plan shows what this head changes, not \
                 what `{branch}` changed since.",
                base.get(..7).unwrap_or(&base)
            ));
            Ok(base)
        }
        Err(e) if e.code() == git2::ErrorCode::NotFound => {
            notes.push(format!(
                "Compared with `{applied_short}`, the applied commit of `{branch}`: this head \
                 shares no history with it."
            ));
            Ok(applied.to_string())
        }
        Err(e) => Err(GitError::Git {
            what: format!("finding the merge base of {head} and {applied}"),
            source: e,
        }),
    }
}

/// What to post for one head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review {
    /// `kubelet-gitops/plan` on the head.
    pub status: CommitStatus,
    /// The plan (or the head's problems) as Markdown, for the comment.
    pub markdown: String,
    /// For the metrics.
    pub result: ReviewResult,
}

/// `nodes` by name. The watch cache answers in no particular order, and the plan lists
/// nodes in the order it is given them: sorted, an unchanged plan is the same text after a
/// restart, and its comment is left as it is.
pub fn sorted_nodes(mut nodes: Vec<NodeInfo>) -> Vec<NodeInfo> {
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    nodes
}

/// The status and Markdown for a prepared head, planned for `nodes`. Pure.
pub fn review(prepared: &Prepared, nodes: &[NodeInfo]) -> Review {
    let head = &prepared.rendered;
    let (state, description, markdown, result) = match head {
        Err(errors) => (
            StatusState::Error,
            plan::markdown::invalid_summary(errors),
            plan::markdown::invalid_markdown(&prepared.head_short, errors),
            ReviewResult::Invalid,
        ),
        Ok(rendered) => {
            let mut p = plan::plan(prepared.base.as_ref(), rendered, nodes);
            p.notes.splice(0..0, prepared.notes.iter().cloned());
            p.base_revision = prepared.base_short.clone();
            p.head_revision = Some(prepared.head_short.clone());
            let state = if p.has_errors() {
                StatusState::Failure
            } else {
                StatusState::Success
            };
            (
                state,
                plan::markdown::summary(&p),
                plan::markdown::to_markdown(&p),
                ReviewResult::Planned,
            )
        }
    };
    Review {
        status: CommitStatus::new(&prepared.head, PLAN_CONTEXT, state, description),
        markdown,
        result,
    }
}

/// What the reviewer needs besides the heads.
#[derive(Debug, Clone)]
pub struct ReviewConfig {
    /// The bare git cache the heads are fetched into.
    pub cache_dir: PathBuf,
    /// The repository URL (for error messages).
    pub repo_url: String,
    /// The branch the heads are compared with.
    pub branch: String,
    /// Root and globs, as for the branch.
    pub render: RenderOptions,
    /// Post the Markdown plan as a comment.
    pub comment: bool,
    /// A link shown next to the status.
    pub target_url: Option<String>,
    /// Heads older than this are not reviewed.
    pub max_age: Duration,
}

/// Whether the commit the cluster is on is known, so that heads can be compared with it:
/// a commit was applied, or the controller looked and found none on the cluster. A
/// rejected head alone says nothing: after a restart on a head that does not validate, the
/// controller first looks back along the branch for the commit the cluster is on, and a
/// review meanwhile would compare every pool with nothing.
pub fn base_known(state: &SyncState) -> bool {
    state.applied.is_some() || state.nothing_applied
}

/// The nodes as the controller's watch cache has them.
pub(crate) type NodeSource = Box<dyn Fn() -> Vec<NodeInfo> + Send + Sync>;

/// Reviews the heads the poller fetched, one at a time, beside the loop.
pub(crate) struct Reviewer {
    config: ReviewConfig,
    writer: Arc<StatusWriter>,
    metrics: Arc<Metrics>,
    nodes: NodeSource,
    stop: CancellationToken,
    /// Ref name to the commit last reviewed.
    seen: BTreeMap<String, String>,
    /// Pull requests from forks already said to be skipped (said once each).
    told_forks: BTreeSet<u64>,
}

impl Reviewer {
    /// A reviewer posting through `writer`, planning for the nodes `nodes` returns,
    /// until `stop`.
    pub(crate) fn new(
        config: ReviewConfig,
        writer: Arc<StatusWriter>,
        metrics: Arc<Metrics>,
        nodes: NodeSource,
        stop: CancellationToken,
    ) -> Reviewer {
        Reviewer {
            config,
            writer,
            metrics,
            nodes,
            stop,
            seen: BTreeMap::new(),
            told_forks: BTreeSet::new(),
        }
    }

    /// Reviews new and moved heads of `heads` whenever they or the controller's state
    /// change, until stopped. Waits until this replica writes and the commit the cluster
    /// is on is known ([`base_known`]), so that every head is compared with it. On a forge
    /// that lists its pull requests (Bitbucket Cloud), `heads` are its branches: the pull
    /// requests are listed when they moved, and every [`LIST_INTERVAL`] ([`listing_due`]).
    pub(crate) async fn run(
        mut self,
        mut heads: watch::Receiver<BTreeMap<String, String>>,
        mut sync: watch::Receiver<SyncState>,
    ) {
        let lists = self.writer.backend().lists_pull_requests();
        // When the pull requests were listed last, and the branches then.
        let mut last_listing: Option<(tokio::time::Instant, BTreeMap<String, String>)> = None;
        loop {
            let (ready, applied) = {
                let s = sync.borrow_and_update();
                let ready = s.role.writes() && base_known(&s);
                (ready, s.applied.as_ref().map(|a| a.commit.clone()))
            };
            // Marked seen even when not ready, or `changed()` would wake at once again.
            let current = heads.borrow_and_update().clone();
            if ready {
                if !lists {
                    self.round(current, applied).await;
                } else if listing_due(
                    last_listing
                        .as_ref()
                        .map(|(at, branches)| (at.elapsed(), branches)),
                    &current,
                ) {
                    // Also after a failed listing: it is tried again with the next
                    // branch change or interval, not at every state of a rollout.
                    last_listing = Some((tokio::time::Instant::now(), current.clone()));
                    if let Some(listed) = self.listed(&current).await {
                        self.round(listed, applied).await;
                    }
                }
            }
            let stop = self.stop.clone();
            tokio::select! {
                biased;
                () = stop.cancelled() => return,
                changed = heads.changed() => if changed.is_err() { return },
                changed = sync.changed() => if changed.is_err() { return },
                () = tokio::time::sleep(LIST_INTERVAL), if lists => {}
            }
        }
    }

    /// The heads of the open pull requests the forge lists ([`listed_heads`]) among the
    /// fetched `branches`; `None` when they cannot be listed now (the forge is held, or
    /// failed: logged), so that nothing is forgotten or reviewed this round.
    async fn listed(
        &mut self,
        branches: &BTreeMap<String, String>,
    ) -> Option<BTreeMap<String, String>> {
        let prs = match self.writer.open_pull_requests().await {
            Ok(Some(prs)) => prs,
            Ok(None) => {
                tracing::debug!("the forge is held; the pull requests are listed after the hold");
                return None;
            }
            Err(e) => {
                tracing::warn!(
                    error = %error_chain(&e),
                    "cannot list the open pull requests; listed again at the next round"
                );
                return None;
            }
        };
        let (heads, skipped) = listed_heads(&prs, branches, &self.config.branch);
        for (request, why) in skipped {
            match why {
                NotReviewed::Fork { repository } => {
                    if self.told_forks.insert(request) {
                        tracing::info!(
                            request,
                            repository = %repository,
                            "pull request from a fork: not reviewed (only branches of the followed repository are fetched)"
                        );
                    }
                }
                NotReviewed::OtherBranch { destination } => tracing::debug!(
                    request,
                    destination = %destination,
                    "pull request into another branch; not reviewed"
                ),
                NotReviewed::NotFetched { branch } => tracing::debug!(
                    request,
                    branch = %branch,
                    "the pull request's source branch is not fetched yet; reviewed after the poll that fetches it"
                ),
                NotReviewed::Moved { listed, fetched } => tracing::debug!(
                    request,
                    listed = %listed,
                    fetched = %fetched,
                    "the pull request's branch moved between the listing and the poll; reviewed once they agree"
                ),
            }
        }
        let open: BTreeSet<u64> = prs.iter().map(|p| p.id).collect();
        self.told_forks.retain(|id| open.contains(id));
        Some(heads)
    }

    async fn round(&mut self, heads: BTreeMap<String, String>, applied: Option<String>) {
        // Closed (pruned) requests are forgotten: a reopened one is reviewed again.
        self.seen.retain(|name, _| heads.contains_key(name));
        let moved: Vec<(String, String)> = moved_heads(&self.seen, &heads)
            .into_iter()
            .map(|(n, c)| (n.to_string(), c.to_string()))
            .collect();
        if moved.is_empty() {
            return;
        }
        let node_list = sorted_nodes((self.nodes)());
        for (refname, head) in moved {
            if self.stop.is_cancelled() {
                return;
            }
            self.review_head(&refname, &head, applied.as_deref(), &node_list)
                .await;
            // Reviewed once per commit, whatever came of it: a failure is logged, and the
            // head is reviewed again when it moves (or after a restart).
            self.seen.insert(refname, head);
        }
    }

    #[tracing::instrument(skip(self, nodes), fields(head = %head))]
    async fn review_head(
        &self,
        refname: &str,
        head: &str,
        applied: Option<&str>,
        nodes: &[NodeInfo],
    ) {
        let Some(number) = request_number(refname) else {
            tracing::debug!(refname, "not a pull-request head; not reviewed");
            return;
        };
        let not_before = SystemTime::now()
            .checked_sub(self.config.max_age)
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .and_then(|d| i64::try_from(d.as_secs()).ok());
        let (cache, origin, branch, options) = (
            self.config.cache_dir.clone(),
            self.config.repo_url.clone(),
            self.config.branch.clone(),
            self.config.render.clone(),
        );
        let (head_id, applied_id) = (head.to_string(), applied.map(str::to_string));
        let prepared = tokio::task::spawn_blocking(move || {
            prepare(
                &cache,
                &origin,
                &branch,
                &head_id,
                applied_id.as_deref(),
                &options,
                not_before,
            )
        })
        .await;
        let prepared = match prepared {
            Ok(Ok(Some(p))) => p,
            Ok(Ok(None)) => {
                tracing::debug!(
                    refname,
                    "head older than the review's maximum age; not reviewed"
                );
                self.metrics.reviewed(ReviewResult::Skipped);
                return;
            }
            Ok(Err(e)) => {
                tracing::error!(
                    refname,
                    error = %error_chain(&e),
                    "cannot read the pull-request head from the git cache; it is reviewed again when it moves"
                );
                self.metrics.reviewed(ReviewResult::Failed);
                return;
            }
            Err(e) => {
                tracing::error!(refname, error = %e, "reviewing the pull-request head stopped");
                self.metrics.reviewed(ReviewResult::Failed);
                return;
            }
        };
        let mut outcome = review(&prepared, nodes);
        if let Some(url) = &self.config.target_url {
            outcome.status.target_url = Some(url.clone());
        }
        self.metrics.reviewed(outcome.result);
        tracing::info!(
            refname,
            request = number,
            state = %outcome.status.state,
            plan = %outcome.status.description,
            "pull-request head reviewed"
        );
        let delivery = self.writer.post(&outcome.status).await;
        count_delivery(&self.metrics, &delivery);
        if self.config.comment
            && let Err(e) = self.writer.comment(number, &outcome.markdown).await
        {
            tracing::error!(
                refname,
                request = number,
                error = %error_chain(&e),
                "cannot post the plan comment; it is posted again when the head moves"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_numbers_come_from_head_refs_only() {
        assert_eq!(request_number("refs/pull/7/head"), Some(7));
        assert_eq!(request_number("refs/merge-requests/123/head"), Some(123));
        assert_eq!(request_number("refs/pull-requests/12/from"), Some(12));
        assert_eq!(request_number("refs/pull/7/merge"), Some(7));
        assert_eq!(request_number(&bitbucket_pull_ref(31)), Some(31));
        assert_eq!(request_number("refs/bitbucket/heads/main"), None);
        assert_eq!(request_number("refs/pull-requests/12/merge"), None);
        assert_eq!(request_number("refs/pull/7/from"), None);
        assert_eq!(request_number("refs/pull//head"), None);
        assert_eq!(request_number("refs/pull/x7/head"), None);
        assert_eq!(request_number("refs/heads/main"), None);
    }

    fn listed(id: u64, hash: &str, source: &str, same: bool, destination: &str) -> PullRequest {
        PullRequest {
            id,
            source_commit: hash.into(),
            source_branch: source.into(),
            source_repository: if same { "acme/fleet" } else { "someone/fleet" }.into(),
            same_repository: same,
            destination_branch: destination.into(),
        }
    }

    #[test]
    fn listed_pull_requests_are_reviewed_on_their_fetched_branch() {
        let a = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
        let b = "0123456789abcdef0123456789abcdef01234567";
        let branches: BTreeMap<String, String> = [
            ("refs/bitbucket/heads/main", b),
            ("refs/bitbucket/heads/feature/gpu", a),
            ("refs/bitbucket/heads/moved", b),
            ("refs/bitbucket/heads/staging-fix", a),
        ]
        .into_iter()
        .map(|(n, c)| (n.to_string(), c.to_string()))
        .collect();
        let prs = [
            // Bitbucket's 12-digit short hash; upper case is taken too.
            listed(7, "4b825dc642cb", "feature/gpu", true, "main"),
            listed(8, "4B825DC642CB", "feature/gpu", true, "main"),
            listed(9, "4b825dc642cb", "staging-fix", true, "staging"),
            listed(10, "4b825dc642cb", "feature/gpu", false, "main"),
            listed(11, "4b825dc642cb", "moved", true, "main"),
            listed(12, "4b825dc642cb", "not-yet", true, "main"),
            listed(13, "", "feature/gpu", true, "main"),
            listed(14, "4b82", "feature/gpu", true, "main"),
        ];
        let (heads, skipped) = listed_heads(&prs, &branches, "main");
        assert_eq!(
            heads,
            [
                ("refs/bitbucket/pull/7/head".to_string(), a.to_string()),
                ("refs/bitbucket/pull/8/head".to_string(), a.to_string()),
            ]
            .into_iter()
            .collect()
        );
        assert_eq!(
            skipped,
            [
                (
                    9,
                    NotReviewed::OtherBranch {
                        destination: "staging".into()
                    }
                ),
                (
                    10,
                    NotReviewed::Fork {
                        repository: "someone/fleet".into()
                    }
                ),
                (
                    11,
                    NotReviewed::Moved {
                        listed: "4b825dc642cb".into(),
                        fetched: b.into()
                    }
                ),
                (
                    12,
                    NotReviewed::NotFetched {
                        branch: "not-yet".into()
                    }
                ),
                (
                    13,
                    NotReviewed::Moved {
                        listed: String::new(),
                        fetched: a.into()
                    }
                ),
                (
                    14,
                    NotReviewed::Moved {
                        listed: "4b82".into(),
                        fetched: a.into()
                    }
                ),
            ]
        );
        // The same pull requests followed from `staging`: only 9.
        let (heads, _) = listed_heads(&prs, &branches, "staging");
        assert_eq!(
            heads.keys().collect::<Vec<_>>(),
            ["refs/bitbucket/pull/9/head"]
        );
    }

    #[test]
    fn pull_requests_are_listed_when_a_branch_moves_or_the_interval_passed() {
        let branches = |commit: &str| -> BTreeMap<String, String> {
            [(
                "refs/bitbucket/heads/feature".to_string(),
                commit.to_string(),
            )]
            .into_iter()
            .collect()
        };
        let (a, b) = (branches("a"), branches("b"));
        assert!(listing_due(None, &a), "never listed");
        let second = Duration::from_secs(1);
        assert!(
            !listing_due(Some((second, &a)), &a),
            "a rollout's state change"
        );
        assert!(listing_due(Some((second, &a)), &b), "a branch moved");
        assert!(
            listing_due(Some((second, &a)), &BTreeMap::new()),
            "a branch went"
        );
        assert!(
            listing_due(Some((LIST_INTERVAL, &a)), &a),
            "the interval passed"
        );
    }

    #[test]
    fn only_new_and_moved_heads_are_reviewed() {
        let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        let seen = map(&[("refs/pull/1/head", "a"), ("refs/pull/2/head", "b")]);
        let now = map(&[
            ("refs/pull/1/head", "a"),
            ("refs/pull/2/head", "c"),
            ("refs/pull/3/head", "d"),
        ]);
        assert_eq!(
            moved_heads(&seen, &now),
            [("refs/pull/2/head", "c"), ("refs/pull/3/head", "d")]
        );
        assert!(moved_heads(&now, &now).is_empty());
    }

    /// Commits `files` (path, content) as the whole tree, on `parent`, to a bare repo.
    fn commit(repo: &git2::Repository, parent: Option<&str>, files: &[(String, String)]) -> String {
        fn insert(
            repo: &git2::Repository,
            tree: Option<git2::Tree<'_>>,
            path: &[&str],
            blob: git2::Oid,
        ) -> git2::Oid {
            let mut b = repo.treebuilder(tree.as_ref()).unwrap();
            if let [name] = path {
                b.insert(name, blob, 0o100644).unwrap();
            } else {
                let sub = tree
                    .as_ref()
                    .and_then(|t| t.get_name(path[0]))
                    .map(|e| repo.find_tree(e.id()).unwrap());
                let id = insert(repo, sub, &path[1..], blob);
                b.insert(path[0], id, 0o040000).unwrap();
            }
            b.write().unwrap()
        }
        let mut tree: Option<git2::Oid> = None;
        for (path, content) in files {
            let blob = repo.blob(content.as_bytes()).unwrap();
            let parts: Vec<&str> = path.split('/').collect();
            let t = tree.map(|id| repo.find_tree(id).unwrap());
            tree = Some(insert(repo, t, &parts, blob));
        }
        let tree = repo.find_tree(tree.unwrap()).unwrap();
        let sig = git2::Signature::now("Test", "test@example.com").unwrap();
        let parents: Vec<git2::Commit<'_>> = parent
            .map(|p| repo.find_commit(git2::Oid::from_str(p).unwrap()).unwrap())
            .into_iter()
            .collect();
        let refs: Vec<&git2::Commit<'_>> = parents.iter().collect();
        repo.commit(None, &sig, &sig, "c", &tree, &refs)
            .unwrap()
            .to_string()
    }

    fn pool(name: &str, max_pods: u32) -> (String, String) {
        (
            format!("pools/{name}.yaml"),
            format!(
                "apiVersion: kubelet-gitops.io/v1alpha1\nkind: NodePool\nmetadata:\n  name: {name}\n\
                 spec:\n  nodeSelector:\n    matchLabels: {{pool: {name}}}\n  kubelet:\n    maxPods: {max_pods}\n"
            ),
        )
    }

    fn tree(pools: &[(&str, u32)]) -> Vec<(String, String)> {
        let mut files = vec![(
            "kubelet-gitops.yaml".to_string(),
            "apiVersion: kubelet-gitops.io/v1alpha1\nkind: RepoSettings\nspec:\n  namespace: kubelet-gitops\n"
                .to_string(),
        )];
        for (name, max_pods) in pools {
            files.push(pool(name, *max_pods));
        }
        files
    }

    #[test]
    fn heads_are_compared_with_their_merge_base_with_the_applied_commit() {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init_bare(dir.path()).unwrap();
        let c1 = commit(&repo, None, &tree(&[("a", 60)]));
        // The branch moves on (pool a) after the pull request branched off.
        let c2 = commit(&repo, Some(&c1), &tree(&[("a", 61)]));
        let pr = commit(&repo, Some(&c1), &tree(&[("a", 60), ("b", 50)]));
        let opts = RenderOptions::default();
        let prep = |head: &str, applied: Option<&str>, not_before| {
            prepare(
                dir.path(),
                "file:///x",
                "main",
                head,
                applied,
                &opts,
                not_before,
            )
            .unwrap()
        };

        let p = prep(&pr, Some(&c2), None).unwrap();
        assert_eq!(p.base_short.as_deref(), Some(&c1[..7]));
        assert!(p.notes[0].contains("the merge base"), "{:?}", p.notes);
        let r = review(&p, &[]);
        assert_eq!(r.result, ReviewResult::Planned);
        assert_eq!(r.status.state, StatusState::Success);
        // Only the pull request's own change: pool b, not a revert of a.
        assert_eq!(r.status.description, "1 pool changes (no nodes given)");
        assert!(
            r.markdown.contains(&format!("Base `{}`", &c1[..7])),
            "{}",
            r.markdown
        );

        let on_top = commit(&repo, Some(&c2), &tree(&[("a", 61), ("b", 50)]));
        let p = prep(&on_top, Some(&c2), None).unwrap();
        assert_eq!(p.base_short.as_deref(), Some(&c2[..7]));
        assert!(p.notes[0].contains("based on it"), "{:?}", p.notes);

        let orphan = commit(&repo, None, &tree(&[("b", 50)]));
        let p = prep(&orphan, Some(&c2), None).unwrap();
        assert_eq!(p.base_short.as_deref(), Some(&c2[..7]));
        assert!(p.notes[0].contains("shares no history"), "{:?}", p.notes);
        // Pool a is removed and b added, compared with what runs.
        assert_eq!(
            review(&p, &[]).status.description,
            "2 pools change (no nodes given)"
        );

        let p = prep(&pr, None, None).unwrap();
        assert!(p.base.is_none() && p.notes[0].contains("Nothing of `main`"));

        assert!(prep(&pr, Some(&c2), Some(i64::MAX)).is_none(), "too old");
    }

    #[test]
    fn nothing_is_reviewed_before_the_applied_commit_is_known() {
        use crate::state::{AppliedCommit, RejectedCommit};
        let rejected = SyncState {
            rejected: Some(RejectedCommit {
                commit: "b".repeat(40),
                errors: vec![RepoError::new("pools/a.yaml", "", "x")],
            }),
            ..SyncState::default()
        };
        // Restarted on an invalid head, before the resume found the cluster's commit.
        assert!(!base_known(&rejected));
        assert!(!base_known(&SyncState::default()));
        let resumed = SyncState {
            applied: Some(AppliedCommit {
                commit: "a".repeat(40),
                namespace: "kubelet-gitops".into(),
                configmaps: BTreeMap::new(),
                sources: BTreeMap::new(),
            }),
            ..rejected.clone()
        };
        assert!(base_known(&resumed));
        // The resume looked and found no commit on the cluster.
        let none = SyncState {
            nothing_applied: true,
            ..rejected
        };
        assert!(base_known(&none));
    }

    #[test]
    fn the_same_plan_is_the_same_markdown_whatever_order_the_nodes_come_in() {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init_bare(dir.path()).unwrap();
        let base = commit(&repo, None, &tree(&[("a", 60), ("b", 60)]));
        let head = commit(&repo, Some(&base), &tree(&[("a", 61), ("b", 61)]));
        let prepared = prepare(
            dir.path(),
            "file:///x",
            "main",
            &head,
            Some(&base),
            &RenderOptions::default(),
            None,
        )
        .unwrap()
        .unwrap();
        let node = |name: &str, pool: &str| NodeInfo {
            name: name.into(),
            labels: [("pool", pool)].into_iter().collect(),
            ..NodeInfo::default()
        };
        let mut nodes: Vec<NodeInfo> = (1..=5)
            .flat_map(|i| [node(&format!("a-{i}"), "a"), node(&format!("b-{i}"), "b")])
            .collect();
        let sorted = review(&prepared, &sorted_nodes(nodes.clone()));
        assert!(
            sorted.markdown.contains("a-1, a-2, a-3, a-4, a-5"),
            "{}",
            sorted.markdown
        );
        // The watch cache's order is arbitrary: reversed, rotated, interleaved.
        nodes.reverse();
        assert_eq!(review(&prepared, &sorted_nodes(nodes.clone())), sorted);
        nodes.rotate_left(3);
        assert_eq!(review(&prepared, &sorted_nodes(nodes.clone())), sorted);
        assert_ne!(
            review(&prepared, &nodes).markdown,
            sorted.markdown,
            "unsorted, the same plan reads differently"
        );
    }

    #[test]
    fn an_invalid_head_is_an_error_naming_the_first_problem() {
        let prepared = Prepared {
            head: "a".repeat(40),
            head_short: "aaaaaaa".into(),
            rendered: Err(vec![
                RepoError {
                    file: "pools/gpu.yaml".into(),
                    line: Some(9),
                    column: Some(5),
                    field: "spec.kubelet.maxPod".into(),
                    message: "unknown field".into(),
                },
                RepoError::new("pools/cpu.yaml", "", "x"),
            ]),
            base: None,
            base_short: None,
            notes: Vec::new(),
        };
        let r = review(&prepared, &[]);
        assert_eq!(r.result, ReviewResult::Invalid);
        assert_eq!(r.status.context, "kubelet-gitops/plan");
        assert_eq!(r.status.sha, "a".repeat(40));
        assert_eq!(r.status.state, StatusState::Error);
        assert!(
            r.status
                .description
                .contains("pools/gpu.yaml:9:5: spec.kubelet.maxPod: unknown field"),
            "{}",
            r.status.description
        );
        assert!(r.markdown.contains("does not validate"), "{}", r.markdown);
    }
}
