//! [`Backend`]: where statuses and comments go, one forge (or git notes, or a recorder)
//! behind one interface for the writer.

use super::azure::{self, AzureDevOps};
use super::bitbucket::{self, Bitbucket, PullRequest};
use super::bitbucket_dc::{self, BitbucketDataCenter};
use super::commit::{CommitStatus, PLAN_MARKER};
use super::error::StatusError;
use super::forge::{GitHub, Gitea};
use super::gitlab::{self, GitLab};
use super::notes::{self, Notes};
use super::recorder::Recorder;
use super::token::TokenFile;

/// What [`StatusWriter::comment`](super::StatusWriter::comment) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommentOutcome {
    /// No comment carried the marker: one was created (its id).
    Created(u64),
    /// Our comment was updated in place.
    Updated(u64),
    /// Our comment already said exactly this.
    Unchanged(u64),
    /// Not delivered yet: the forge is held (a rate limit, a refused token) or failed
    /// passingly. The comment waits in the writer's outbox (the newest per pull request)
    /// and goes out with the next flush.
    Queued,
}

/// Where statuses go.
#[derive(Debug, Clone)]
pub enum Backend {
    GitHub(GitHub),
    GitLab(GitLab),
    Gitea(Gitea),
    BitbucketCloud(Bitbucket),
    BitbucketDataCenter(BitbucketDataCenter),
    AzureDevOps(AzureDevOps),
    Notes(Notes),
    Recorder(Recorder),
}

impl Backend {
    /// The backend's name, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::GitHub(GitHub(c)) | Backend::Gitea(Gitea(c)) => c.dialect.name,
            Backend::GitLab(_) => "GitLab",
            Backend::BitbucketCloud(_) => "Bitbucket Cloud",
            Backend::BitbucketDataCenter(_) => "Bitbucket Data Center",
            Backend::AzureDevOps(_) => "Azure DevOps",
            Backend::Notes(_) => "git notes",
            Backend::Recorder(_) => "recorder",
        }
    }

    /// The longest description the backend takes, in characters.
    pub fn description_limit(&self) -> usize {
        match self {
            Backend::GitHub(GitHub(c)) | Backend::Gitea(Gitea(c)) => c.dialect.description_limit,
            Backend::GitLab(_) => gitlab::DESCRIPTION_LIMIT,
            Backend::BitbucketCloud(_) => bitbucket::DESCRIPTION_LIMIT,
            Backend::BitbucketDataCenter(_) => bitbucket_dc::DESCRIPTION_LIMIT,
            Backend::AzureDevOps(_) => azure::DESCRIPTION_LIMIT,
            Backend::Notes(_) => notes::DESCRIPTION_LIMIT,
            Backend::Recorder(r) => r.description_limit,
        }
    }

    /// The file the forge token is read from (`None`: git notes, the recorder).
    pub(super) fn token_file(&self) -> Option<&TokenFile> {
        match self {
            Backend::GitHub(GitHub(c)) | Backend::Gitea(Gitea(c)) => Some(c.token_file()),
            Backend::GitLab(b) => Some(b.token_file()),
            Backend::BitbucketCloud(b) => Some(b.token_file()),
            Backend::BitbucketDataCenter(b) => Some(b.token_file()),
            Backend::AzureDevOps(b) => Some(b.token_file()),
            Backend::Notes(_) | Backend::Recorder(_) => None,
        }
    }

    /// A fingerprint of the token as its file holds it now ([`TokenFile::fingerprint`];
    /// the recorder's token for tests).
    pub(super) fn token_fingerprint(&self) -> Option<u64> {
        match self {
            Backend::Recorder(r) => Some(r.token_fingerprint()),
            _ => self.token_file().and_then(TokenFile::fingerprint),
        }
    }

    pub(super) fn comment_limit(&self) -> Result<usize, StatusError> {
        match self {
            Backend::GitHub(GitHub(c)) | Backend::Gitea(Gitea(c)) => Ok(c.dialect.comment_limit),
            Backend::GitLab(_) => Ok(gitlab::COMMENT_LIMIT),
            Backend::BitbucketCloud(_) => Ok(bitbucket::COMMENT_LIMIT),
            Backend::BitbucketDataCenter(_) => Ok(bitbucket_dc::COMMENT_LIMIT),
            Backend::AzureDevOps(_) => Ok(azure::COMMENT_LIMIT),
            Backend::Recorder(_) => Ok(usize::MAX),
            Backend::Notes(_) => Err(StatusError::CommentsUnsupported {
                backend: self.name(),
            }),
        }
    }

    /// Whether review finds the pull requests through the forge's API rather than
    /// through fetched refs: Bitbucket Cloud, which publishes no pull-request refs.
    pub fn lists_pull_requests(&self) -> bool {
        matches!(self, Backend::BitbucketCloud(_))
    }

    /// The open pull requests, from a forge that [lists them](Self::lists_pull_requests);
    /// none from any other.
    pub(super) async fn open_pull_requests(&self) -> Result<Vec<PullRequest>, StatusError> {
        match self {
            Backend::BitbucketCloud(b) => b.open_pull_requests().await,
            _ => Ok(Vec::new()),
        }
    }

    pub(super) async fn send(&self, status: &CommitStatus) -> Result<(), StatusError> {
        match self {
            Backend::GitHub(GitHub(c)) | Backend::Gitea(Gitea(c)) => c.post_status(status).await,
            Backend::GitLab(b) => b.post_status(status).await,
            Backend::BitbucketCloud(b) => b.post_status(status).await,
            Backend::BitbucketDataCenter(b) => b.post_status(status).await,
            Backend::AzureDevOps(b) => b.post_status(status).await,
            Backend::Notes(b) => b.post_status(status).await,
            Backend::Recorder(b) => b.post_status(status),
        }
    }

    /// Finds our comment on `pr` and creates or updates it to `body`. Listing first on
    /// every attempt means a retried create whose first try did land is an update, not
    /// a duplicate.
    pub(super) async fn upsert_comment(
        &self,
        pr: u64,
        body: &str,
    ) -> Result<CommentOutcome, StatusError> {
        let existing = match self {
            Backend::GitHub(GitHub(c)) | Backend::Gitea(Gitea(c)) => {
                c.find_comment(pr, PLAN_MARKER).await?
            }
            Backend::GitLab(b) => b.find_comment(pr, PLAN_MARKER).await?,
            Backend::BitbucketCloud(b) => b.find_comment(pr, PLAN_MARKER).await?,
            Backend::BitbucketDataCenter(b) => b.find_comment(pr, PLAN_MARKER).await?,
            Backend::AzureDevOps(b) => b.find_comment(pr, PLAN_MARKER).await?,
            Backend::Recorder(b) => b.find_comment(pr)?,
            Backend::Notes(_) => {
                return Err(StatusError::CommentsUnsupported {
                    backend: self.name(),
                });
            }
        };
        match existing {
            Some((id, old)) if old == body => Ok(CommentOutcome::Unchanged(id)),
            Some((id, _)) => {
                match self {
                    Backend::GitHub(GitHub(c)) | Backend::Gitea(Gitea(c)) => {
                        c.update_comment(id, body).await?
                    }
                    Backend::GitLab(b) => b.update_comment(pr, id, body).await?,
                    Backend::BitbucketCloud(b) => b.update_comment(pr, id, body).await?,
                    Backend::BitbucketDataCenter(b) => b.update_comment(pr, id, body).await?,
                    Backend::AzureDevOps(b) => b.update_comment(pr, id, body).await?,
                    Backend::Recorder(b) => b.update_comment(pr, id, body)?,
                    Backend::Notes(_) => {}
                }
                Ok(CommentOutcome::Updated(id))
            }
            None => {
                let id = match self {
                    Backend::GitHub(GitHub(c)) | Backend::Gitea(Gitea(c)) => {
                        c.create_comment(pr, body).await?
                    }
                    Backend::GitLab(b) => b.create_comment(pr, body).await?,
                    Backend::BitbucketCloud(b) => b.create_comment(pr, body).await?,
                    Backend::BitbucketDataCenter(b) => b.create_comment(pr, body).await?,
                    Backend::AzureDevOps(b) => b.create_comment(pr, body).await?,
                    Backend::Recorder(b) => b.create_comment(pr, body)?,
                    Backend::Notes(_) => 0,
                };
                Ok(CommentOutcome::Created(id))
            }
        }
    }

    /// Whether a round of statuses goes out as one unit ([`Notes`]: one notes commit, one
    /// fetch and one push) rather than one request per status (the forges).
    pub(super) fn batches(&self) -> bool {
        match self {
            Backend::Notes(_) => true,
            Backend::Recorder(r) => r.batching,
            Backend::GitHub(_)
            | Backend::GitLab(_)
            | Backend::Gitea(_)
            | Backend::BitbucketCloud(_)
            | Backend::BitbucketDataCenter(_)
            | Backend::AzureDevOps(_) => false,
        }
    }

    /// Sends `statuses` as one unit; one result per status, in order.
    pub(super) async fn send_batch(
        &self,
        statuses: &[CommitStatus],
    ) -> Vec<Result<(), StatusError>> {
        match self {
            Backend::Notes(b) => b.post_statuses(statuses).await,
            Backend::Recorder(b) => b.post_batch(statuses),
            Backend::GitHub(_)
            | Backend::GitLab(_)
            | Backend::Gitea(_)
            | Backend::BitbucketCloud(_)
            | Backend::BitbucketDataCenter(_)
            | Backend::AzureDevOps(_) => {
                let mut results = Vec::with_capacity(statuses.len());
                for status in statuses {
                    results.push(self.send(status).await);
                }
                results
            }
        }
    }

    pub(super) async fn flush(&self) -> Result<(), StatusError> {
        match self {
            Backend::Notes(b) => b.flush().await,
            _ => Ok(()),
        }
    }
}
