//! Commit statuses: what a rollout looks like on the user's forge.
//!
//! Beside the controller's loop, the reporter reads its
//! [`SyncState`](crate::state::SyncState) and asks for the statuses it calls for
//! ([`commit_statuses`], from the pure functions of [`aggregate`]); a [`StatusWriter`]
//! posts them to one [`Backend`]:
//!
//! - [`GitHub`] (`api.github.com` or GitHub Enterprise `/api/v3`) and [`Gitea`] (and
//!   Forgejo): one REST client, the two APIs' differences as data;
//! - [`GitLab`]: the commit status API (project id or path);
//! - [`Bitbucket`] (Cloud) and [`BitbucketDataCenter`]: build statuses, keyed by a
//!   context fitted to the forge's key limit;
//! - [`AzureDevOps`]: commit statuses with a `genre/name` context, comments as
//!   pull-request threads;
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
mod azure;
mod backend;
mod bitbucket;
mod bitbucket_dc;
mod commit;
mod config;
pub mod describe;
mod error;
mod forge;
mod gitlab;
mod http;
pub mod notes;
mod recorder;
mod reporter;
pub mod retry;
mod token;
mod writer;

pub use aggregate::{Summary, invalid_commit_status, pool_status, summary_status};
pub use azure::{AzureDevOps, AzureDevOpsConfig};
pub use backend::{Backend, CommentOutcome};
pub use bitbucket::{BITBUCKET_API, Bitbucket, BitbucketConfig, PullRequest};
pub use bitbucket_dc::{BitbucketDataCenter, BitbucketDataCenterConfig};
pub use commit::{
    CONTEXT, CommitStatus, PLAN_CONTEXT, PLAN_MARKER, StatusState, fit_key, pool_context,
    truncate_description,
};
pub use config::{
    AZURE_PULL_REFSPEC, BITBUCKET_CLOUD_BRANCHES_REFSPEC, BITBUCKET_PULL_REFSPEC,
    MERGE_REQUEST_REFSPEC, PULL_REFSPEC, StatusBackendConfig, StatusConfig,
};
pub use error::StatusError;
pub use forge::{GitHub, GitHubConfig, Gitea, GiteaConfig};
pub use gitlab::{GitLab, GitLabConfig, GitLabProject};
pub use notes::{Notes, NotesConfig, NotesRemote};
pub use recorder::{Recorder, RecorderFault};
pub use reporter::commit_statuses;
pub(crate) use reporter::{StatusReporter, count_delivery};
pub use retry::{FailureKind, RetryPolicy};
pub use token::{Secret, TokenFile};
pub use writer::{Delivery, FlushReport, StatusWriter};
