//! Where commit statuses go and how they are posted: the `run` options, and the
//! [`StatusWriter`] built from them.

use std::sync::Arc;
use std::time::Duration;

use kubelet_gitops_core::message::error_chain;

use super::azure::{AzureDevOps, AzureDevOpsConfig};
use super::backend::Backend;
use super::bitbucket::{Bitbucket, BitbucketConfig};
use super::bitbucket_dc::{BitbucketDataCenter, BitbucketDataCenterConfig};
use super::error::StatusError;
use super::forge::{GitHub, GitHubConfig, Gitea, GiteaConfig};
use super::gitlab::{GitLab, GitLabConfig};
use super::notes::{Notes, NotesConfig, NotesRemote};
use super::retry::RetryPolicy;
use super::writer::StatusWriter;
use crate::git::{self, GitConfig, GitRepo};
use crate::metrics::Metrics;

/// Fetches GitHub's and Gitea's pull-request heads into the cache, under the same names.
pub const PULL_REFSPEC: &str = "+refs/pull/*/head:refs/pull/*/head";
/// Fetches GitLab's merge-request heads into the cache, under the same names.
pub const MERGE_REQUEST_REFSPEC: &str = "+refs/merge-requests/*/head:refs/merge-requests/*/head";
/// Fetches Bitbucket Data Center's pull-request heads (the source branch's commit) into
/// the cache, under the same names.
pub const BITBUCKET_PULL_REFSPEC: &str = "+refs/pull-requests/*/from:refs/pull-requests/*/from";
/// Fetches Azure DevOps' pull-request refs into the cache, under the same names. Azure
/// publishes no head ref, only the merge of the pull request into its target, which it
/// computes itself: that merge is what is reviewed.
pub const AZURE_PULL_REFSPEC: &str = "+refs/pull/*/merge:refs/pull/*/merge";
/// Fetches every branch of a Bitbucket Cloud repository into the cache, under
/// `refs/bitbucket/heads/`. Bitbucket Cloud publishes no pull-request refs: the reviewer
/// lists the open pull requests through the API and finds each one's source branch here.
pub const BITBUCKET_CLOUD_BRANCHES_REFSPEC: &str = "+refs/heads/*:refs/bitbucket/heads/*";

/// Where commit statuses go.
#[derive(Debug, Clone)]
pub enum StatusBackendConfig {
    /// Nowhere.
    None,
    /// git notes (`refs/notes/kubelet-gitops`) in the git cache, pushed to the config
    /// repository with the git source's credentials when it accepts pushes.
    Notes,
    /// GitHub or GitHub Enterprise commit statuses.
    GitHub(GitHubConfig),
    /// GitLab commit statuses.
    GitLab(GitLabConfig),
    /// Gitea or Forgejo commit statuses.
    Gitea(GiteaConfig),
    /// Bitbucket Cloud build statuses.
    BitbucketCloud(BitbucketConfig),
    /// Bitbucket Data Center (or Server) build statuses.
    BitbucketDataCenter(BitbucketDataCenterConfig),
    /// Azure DevOps commit statuses.
    AzureDevOps(AzureDevOpsConfig),
    /// A backend built by the caller (tests: a [`Recorder`](super::Recorder)).
    Custom(Backend),
}

impl StatusBackendConfig {
    /// The backend's name, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            StatusBackendConfig::None => "none",
            StatusBackendConfig::Notes => "git notes",
            StatusBackendConfig::GitHub(_) => "GitHub",
            StatusBackendConfig::GitLab(_) => "GitLab",
            StatusBackendConfig::Gitea(_) => "Gitea",
            StatusBackendConfig::BitbucketCloud(_) => "Bitbucket Cloud",
            StatusBackendConfig::BitbucketDataCenter(_) => "Bitbucket Data Center",
            StatusBackendConfig::AzureDevOps(_) => "Azure DevOps",
            StatusBackendConfig::Custom(b) => b.name(),
        }
    }

    /// The refspecs that fetch this forge's pull-request heads for review: GitHub and
    /// Gitea keep them under `refs/pull/<n>/head`, GitLab under
    /// `refs/merge-requests/<n>/head`, Bitbucket Data Center under
    /// `refs/pull-requests/<n>/from`, Azure DevOps only the merge, `refs/pull/<n>/merge`;
    /// for git notes (any host), GitHub's and GitLab's. Bitbucket Cloud publishes no
    /// pull-request refs: every branch, under `refs/bitbucket/heads/`, where the reviewer
    /// finds the source branches of the pull requests the API lists.
    pub fn review_refspecs(&self) -> Vec<String> {
        let refspecs: &[&str] = match self {
            StatusBackendConfig::None => &[],
            StatusBackendConfig::BitbucketCloud(_) => &[BITBUCKET_CLOUD_BRANCHES_REFSPEC],
            StatusBackendConfig::BitbucketDataCenter(_) => &[BITBUCKET_PULL_REFSPEC],
            StatusBackendConfig::AzureDevOps(_) => &[AZURE_PULL_REFSPEC],
            StatusBackendConfig::GitHub(_) | StatusBackendConfig::Gitea(_) => &[PULL_REFSPEC],
            StatusBackendConfig::GitLab(_) => &[MERGE_REQUEST_REFSPEC],
            StatusBackendConfig::Notes | StatusBackendConfig::Custom(_) => {
                &[PULL_REFSPEC, MERGE_REQUEST_REFSPEC]
            }
        };
        refspecs.iter().map(|s| s.to_string()).collect()
    }
}

/// Commit statuses and review: the `run` options `--status-backend`, `--forge-*`,
/// `--status-target-url`, `--review`, `--comment`, `--review-max-age`.
#[derive(Debug, Clone)]
pub struct StatusConfig {
    /// Where statuses go.
    pub backend: StatusBackendConfig,
    /// A link shown next to every status (a dashboard).
    pub target_url: Option<String>,
    /// Fetch pull-request heads and post a `kubelet-gitops/plan` status on each.
    pub review: bool,
    /// Also post the Markdown plan as a pull-request comment, updated in place.
    pub comment: bool,
    /// Pull-request heads whose commit is older than this are not reviewed (forges keep
    /// the heads of closed pull requests forever).
    pub review_max_age: Duration,
    /// How each delivery is retried, and how long a rate limit or a refused token holds
    /// the forge.
    pub retry: RetryPolicy,
    /// Progress within `pending` is posted at most this often per context.
    pub progress_interval: Duration,
    /// How often the outbox is flushed (statuses queued during a forge outage).
    pub redeliver_interval: Duration,
    /// At shutdown, how long the last statuses may take to go out.
    pub shutdown_grace: Duration,
}

impl Default for StatusConfig {
    /// git notes, no review, a minute between progress updates.
    fn default() -> StatusConfig {
        StatusConfig {
            backend: StatusBackendConfig::Notes,
            target_url: None,
            review: false,
            comment: false,
            review_max_age: Duration::from_secs(30 * 24 * 3600),
            retry: RetryPolicy::default(),
            progress_interval: Duration::from_secs(60),
            redeliver_interval: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

impl StatusConfig {
    /// Whether anything is posted at all.
    pub fn enabled(&self) -> bool {
        !matches!(self.backend, StatusBackendConfig::None)
    }

    /// The writer statuses go through (`None` for no backend), counting the forge's
    /// refusals in `metrics`. The git-notes backend writes in the git cache, which is
    /// created here if absent (no network), and pushes to the config repository with the
    /// git source's credentials ([`git::remote_callbacks`]).
    pub(crate) async fn writer(
        &self,
        git: &GitConfig,
        metrics: Arc<Metrics>,
    ) -> Result<Option<Arc<StatusWriter>>, StatusError> {
        let backend = match &self.backend {
            StatusBackendConfig::None => return Ok(None),
            StatusBackendConfig::GitHub(c) => Backend::GitHub(GitHub::new(c.clone())?),
            StatusBackendConfig::GitLab(c) => Backend::GitLab(GitLab::new(c.clone())?),
            StatusBackendConfig::Gitea(c) => Backend::Gitea(Gitea::new(c.clone())?),
            StatusBackendConfig::BitbucketCloud(c) => {
                Backend::BitbucketCloud(Bitbucket::new(c.clone())?)
            }
            StatusBackendConfig::BitbucketDataCenter(c) => {
                Backend::BitbucketDataCenter(BitbucketDataCenter::new(c.clone())?)
            }
            StatusBackendConfig::AzureDevOps(c) => {
                Backend::AzureDevOps(AzureDevOps::new(c.clone())?)
            }
            StatusBackendConfig::Custom(b) => b.clone(),
            StatusBackendConfig::Notes => {
                let git = git.clone();
                let cache = git.cache_dir.clone();
                let opened = tokio::task::spawn_blocking(move || {
                    // Creates the bare cache if this is the first start; the poller reuses it.
                    GitRepo::open(git.clone()).map(|_| git)
                })
                .await
                .map_err(|e| StatusError::NotesTask {
                    repo: cache.clone(),
                    reason: e.to_string(),
                })?;
                let git = opened.map_err(|e| StatusError::Config {
                    forge: "git notes",
                    reason: format!(
                        "cannot open the git cache {}: {}",
                        cache.display(),
                        error_chain(&e)
                    ),
                })?;
                let factory_config = git.clone();
                let remote = NotesRemote::with_callbacks(git.url.clone(), move || {
                    git::remote_callbacks(&factory_config)
                });
                Backend::Notes(Notes::new(NotesConfig::new(&cache).with_remote(remote))?)
            }
        };
        tracing::info!(
            backend = backend.name(),
            review = self.review,
            comment = self.comment,
            "commit statuses enabled"
        );
        Ok(Some(Arc::new(
            StatusWriter::new(backend, self.retry).with_metrics(metrics),
        )))
    }
}
