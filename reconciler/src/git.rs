//! The git side of the reconciler: reading a commit's files without a work tree
//! ([`CommitSource`], [`open_revision`]), keeping a bare cache of a remote branch
//! ([`GitRepo`]), polling it with backoff ([`Poller`]), and verifying commit signatures
//! ([`signature`]).
//!
//! Everything here is blocking libgit2 work except [`Poller`], which moves it onto tokio's
//! blocking pool.

mod commit;
mod error;
pub mod known_hosts;
mod poll;
mod repo;
pub mod signature;
mod url;

pub use commit::{CommitInfo, CommitSource, first_parent_history, open_revision};
pub use error::GitError;
pub use poll::{Backoff, PollEvent, PollRecord, PollResult, Poller};
pub use repo::{FetchOutcome, GitAuth, GitConfig, GitRepo, cached_head, remote_callbacks};
pub use url::{is_plain_http, redact as redact_url};
