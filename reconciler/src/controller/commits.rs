//! From the poller's events to the desired state: the fetched commit, rendered and
//! validated on the blocking pool, or rejected (logged once, in one line with the error
//! count and the first errors of each file, kept in
//! [`SyncState`](crate::state::SyncState) for `/readyz` and the commit statuses) while the
//! last valid commit stays in force.

use std::sync::Arc;

use kubelet_gitops_core::message::{cap_per_file, error_chain};
use tokio::task::JoinSet;

use super::reconcile::Desired;
use super::task::{ConfigMaps, Controller, LoopState};
use crate::git::{CommitSource, PollEvent};
use crate::render::{RepoError, render_repo};
use crate::state::RejectedCommit;

/// Why a fetched commit did not become the desired state.
pub(super) enum RenderFailure {
    /// The commit could not be read from the cache (retried).
    Source(String),
    /// The commit does not render or validate (stays rejected).
    Invalid(Vec<RepoError>),
}

impl Controller {
    /// A poll's event, through to the desired state: the commit it fetched (with the
    /// remote unreachable at start, the git cache's) rendered, or the commit the cluster
    /// is on resumed ([`super::resume`]).
    pub(super) async fn on_poll_event(
        &self,
        event: PollEvent,
        st: &mut LoopState,
        configmaps: &mut Option<ConfigMaps>,
        tasks: &mut JoinSet<()>,
    ) {
        let unreachable = matches!(event, PollEvent::Unreachable { .. });
        self.on_poll(event, st);
        if unreachable {
            self.fetched_from_cache(st).await;
        }
        self.render_fetched(st).await;
        self.resume_from_cluster(st, configmaps, tasks).await;
    }

    /// Renders `commit` from the poller's cache on the blocking pool.
    pub(super) async fn render(&self, commit: &str) -> Result<Desired, RenderFailure> {
        let cache = self.config.git.cache_dir.clone();
        let url = self.config.git.url.clone();
        let id = commit.to_string();
        let opts = self.config.render.clone();
        let joined = tokio::task::spawn_blocking(move || {
            let src = CommitSource::open(&cache, &id, &url)
                .map_err(|e| RenderFailure::Source(error_chain(&e)))?;
            render_repo(&src, &opts).map_err(RenderFailure::Invalid)
        })
        .await;
        let rendered = match joined {
            Ok(r) => r?,
            Err(e) => return Err(RenderFailure::Source(format!("rendering stopped: {e}"))),
        };
        let namespace = self
            .config
            .namespace
            .clone()
            .unwrap_or_else(|| rendered.settings.namespace.clone());
        Ok(Desired {
            commit: commit.to_string(),
            rendered,
            namespace,
        })
    }

    /// Renders the fetched commit if not done yet; logs and records a rejection.
    pub(super) async fn render_fetched(&self, st: &mut LoopState) {
        let Some(commit) = st.fetched.clone() else {
            return;
        };
        if st.rendered.as_deref() == Some(commit.as_str()) {
            return;
        }
        match self.render(&commit).await {
            Ok(desired) => {
                st.rendered = Some(commit.clone());
                tracing::info!(
                    commit = %commit,
                    namespace = %desired.namespace,
                    pools = desired.rendered.pools.len(),
                    "commit validated"
                );
                self.metrics.repo_validity(0);
                self.update(|s| s.rejected = None);
                st.desired = Some(Arc::new(desired));
            }
            // Not the commit's fault: tried again at the next poll.
            Err(RenderFailure::Source(error)) => {
                tracing::error!(commit = %commit, %error, "cannot read the commit from the cache; retrying at the next poll");
            }
            Err(RenderFailure::Invalid(errors)) => {
                st.rendered = Some(commit.clone());
                // One line for the whole commit, however many errors it has: the count,
                // and the first errors of each file.
                let shown: Vec<String> = cap_per_file(&errors, |e| &e.file)
                    .iter()
                    .map(ToString::to_string)
                    .collect();
                tracing::error!(
                    commit = %commit,
                    problems = errors.len(),
                    errors = ?shown,
                    kept = st.desired.as_ref().map(|d| d.commit.as_str()).unwrap_or("none"),
                    "commit does not validate: nothing of it is applied; the last valid commit stays in force"
                );
                self.metrics.repo_validity(errors.len());
                self.update(|s| {
                    s.rejected = Some(RejectedCommit {
                        commit: commit.clone(),
                        errors,
                    });
                });
            }
        }
    }

    fn on_poll(&self, event: PollEvent, st: &mut LoopState) {
        match event {
            PollEvent::NewCommit { id, forced } => {
                if forced {
                    tracing::warn!(commit = %id, "branch was force-pushed; following it");
                } else {
                    tracing::info!(commit = %id, "new commit on the branch");
                }
                st.fetched = Some(id.clone());
                self.update(|s| {
                    s.fetched = Some(id);
                    s.unreachable = None;
                });
            }
            PollEvent::Unchanged => self.update(|s| s.unreachable = None),
            PollEvent::Unreachable {
                error,
                attempt,
                retry_in,
            } => {
                let error = error_chain(&error);
                tracing::warn!(
                    url = %crate::publish::redact_url(&self.config.git.url),
                    attempt,
                    retry_in = ?retry_in,
                    %error,
                    "cannot fetch the branch; the last applied commit stays in force"
                );
                self.update(|s| s.unreachable = Some(error));
            }
        }
    }
}
