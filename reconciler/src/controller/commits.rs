//! From the poller's events to the desired state: the fetched commit, its signature
//! verified when `--require-signed-commits` asks for it ([`signature::verify`]: an
//! unsigned commit, or one signed by a key the trust files do not list, is rejected like
//! one that does not validate, before anything of it is rendered), rendered and
//! validated on the blocking pool, then checked against the nodes it would reach
//! ([`crate::nodecheck::check_selected`], before anything of it is published), or rejected
//! (logged once, in one line with the error count and the first errors of each file, kept
//! in [`SyncState`](crate::state::SyncState) for `/readyz` and the commit statuses) while
//! the last valid commit stays in force. A commit some nodes would refuse is held and
//! checked again at every reconcile: when those nodes change (their flags fixed, the nodes
//! gone) it goes out without a new commit.

use std::collections::BTreeMap;
use std::sync::Arc;

use kubelet_gitops_core::message::{cap_per_file, error_chain};
use tokio::task::JoinSet;

use super::observe::NodeCache;
use super::reconcile::Desired;
use super::task::{ConfigMaps, Controller, LoopState};
use crate::git::signature::{self, SignatureRefusal};
use crate::git::{CommitSource, PollEvent};
use crate::nodecheck;
use crate::render::{RepoError, render_repo_cached};
use crate::state::{RejectedCommit, set};

/// Why a fetched commit did not become the desired state.
pub(super) enum RenderFailure {
    /// The commit could not be read from the cache (retried).
    Source(String),
    /// The commit does not render or validate (stays rejected).
    Invalid(Vec<RepoError>),
    /// Signed commits are required and this one's signature is not accepted (stays
    /// rejected; nothing of it was rendered).
    Signature(SignatureRefusal),
}

/// What a signature refusal names as its "file" in a [`RepoError`].
pub(super) const SIGNATURE_SUBJECT: &str = "commit signature";

/// A signature refusal as the one problem of the rejected commit, for `/readyz` and the
/// `error` commit status.
fn signature_error(refusal: &SignatureRefusal) -> RepoError {
    RepoError::new(SIGNATURE_SUBJECT, "", refusal.to_string())
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
        nodes: &NodeCache,
    ) {
        let unreachable = matches!(event, PollEvent::Unreachable { .. });
        self.on_poll(event, st);
        if unreachable {
            self.fetched_from_cache(st).await;
        }
        self.render_fetched(st, nodes).await;
        self.resume_from_cluster(st, configmaps, tasks).await;
    }

    /// Renders `commit` from the poller's cache on the blocking pool.
    pub(super) async fn render(&self, commit: &str) -> Result<Desired, RenderFailure> {
        let cache = self.config.git.cache_dir.clone();
        let url = self.config.git.url.clone();
        let id = commit.to_string();
        let opts = self.config.render.clone();
        let render_cache = self.render_cache.clone();
        let policy = self.config.signatures.clone();
        let joined = tokio::task::spawn_blocking(move || {
            let src = CommitSource::open(&cache, &id, &url)
                .map_err(|e| RenderFailure::Source(error_chain(&e)))?;
            // The signature first: nothing of a commit it refuses is even parsed.
            let signer = match policy.as_deref() {
                None => None,
                Some(policy) => {
                    let carried = src
                        .signature()
                        .map_err(|e| RenderFailure::Source(error_chain(&e)))?;
                    Some(signature::verify(policy, &carried).map_err(RenderFailure::Signature)?)
                }
            };
            let mut render_cache = render_cache.lock().unwrap_or_else(|p| p.into_inner());
            let started = std::time::Instant::now();
            let rendered =
                render_repo_cached(&src, &opts, &mut render_cache).map_err(RenderFailure::Invalid);
            if rendered.is_ok() {
                let (pools_rendered, pools_reused) = render_cache.last_render();
                tracing::debug!(commit = %id, pools_rendered, pools_reused, took = ?started.elapsed(), "rendered");
            }
            rendered.map(|r| (r, signer))
        })
        .await;
        let (rendered, signer) = match joined {
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
            signer,
            classes: BTreeMap::new(),
        })
    }

    /// Renders the fetched commit if not done yet and checks it against the nodes; logs
    /// and records a rejection.
    pub(super) async fn render_fetched(&self, st: &mut LoopState, nodes: &NodeCache) {
        let Some(commit) = st.fetched.clone() else {
            return;
        };
        if st.rendered.as_deref() == Some(commit.as_str()) {
            return;
        }
        match self.render(&commit).await {
            Ok(desired) => {
                st.rendered = Some(commit.clone());
                if let Some(signer) = &desired.signer {
                    self.metrics.commit_signature("verified");
                    tracing::info!(
                        commit = %commit,
                        format = %signer.format,
                        key = %signer.fingerprint,
                        signer = %signer.identity,
                        listed_at = %signer.listed_at,
                        "commit signature verified"
                    );
                }
                let desired = Arc::new(desired);
                if self.node_gate(&desired, nodes, true) {
                    self.accept(st, desired);
                } else {
                    st.held = Some(desired);
                }
            }
            // Not the commit's fault: tried again at the next poll.
            Err(RenderFailure::Source(error)) => {
                tracing::error!(commit = %commit, %error, "cannot read the commit from the cache; retrying at the next poll");
            }
            Err(RenderFailure::Signature(refusal)) => {
                st.rendered = Some(commit.clone());
                st.held = None;
                tracing::error!(
                    commit = %commit,
                    reason = %refusal,
                    refusal = refusal.kind(),
                    key = refusal.fingerprint().unwrap_or("none"),
                    kept = st.desired.as_ref().map(|d| d.commit.as_str()).unwrap_or("none"),
                    "commit signature refused: nothing of the commit is applied; the last applied commit stays in force"
                );
                self.metrics.commit_signature(refusal.kind());
                self.metrics.repo_validity(1);
                self.update(|s| {
                    set(
                        &mut s.rejected,
                        Some(RejectedCommit {
                            commit: commit.clone(),
                            errors: vec![signature_error(&refusal)],
                        }),
                    )
                });
            }
            Err(RenderFailure::Invalid(errors)) => {
                st.rendered = Some(commit.clone());
                st.held = None;
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
                    set(
                        &mut s.rejected,
                        Some(RejectedCommit {
                            commit: commit.clone(),
                            errors,
                        }),
                    )
                });
            }
        }
    }

    /// Makes `desired` the commit in force.
    fn accept(&self, st: &mut LoopState, mut desired: Arc<Desired>) {
        let classes = super::reconcile::change_classes(st.desired.as_deref(), &desired.rendered);
        if classes != desired.classes {
            Arc::make_mut(&mut desired).classes = classes;
        }
        tracing::info!(
            commit = %desired.commit,
            namespace = %desired.namespace,
            pools = desired.rendered.pools.len(),
            "commit validated"
        );
        self.metrics.repo_validity(0);
        self.update(|s| set(&mut s.rejected, None));
        st.desired = Some(desired);
        st.held = None;
    }

    /// Checks `desired` against the nodes it would reach, as their agents will
    /// ([`nodecheck::check_selected`]): true when none would refuse it. Otherwise the
    /// commit is rejected (status `error`, `/readyz`), each refusal naming the pool file,
    /// the node, the kubelet flag and the kubelet's message; logged once per outcome, with
    /// the count. `first`: the commit's first check (the nodes not checked are logged
    /// then).
    fn node_gate(&self, desired: &Desired, nodes: &NodeCache, first: bool) -> bool {
        // Under the fleet's lock, borrowing its nodes: a copy of a 100,000-node fleet
        // was 80 MiB at each new commit, and the assignment a scan of nodes × pools.
        let check = {
            let fleet = nodes.lock();
            let selected = fleet.selected_by(&desired.rendered.specs());
            nodecheck::check_selected(&desired.rendered, &desired.namespace, &selected)
        };
        if first && !check.unchecked.is_empty() {
            let count: usize = check.unchecked.iter().map(|u| u.nodes.len()).sum();
            tracing::warn!(
                commit = %desired.commit,
                nodes = count,
                first = %check.unchecked[0],
                "some nodes the commit reaches were not checked against it (no usable report of their kubelet set-up); their agents check it when it arrives"
            );
        }
        if check.refused.is_empty() {
            if first {
                tracing::debug!(commit = %desired.commit, reached = check.reached, checks = check.checks, "commit checked against the nodes");
            }
            return true;
        }
        let errors: Vec<RepoError> = check
            .refused
            .iter()
            .map(|r| RepoError::new(&r.source_path, "", r.to_string()))
            .collect();
        let rejected = RejectedCommit {
            commit: desired.commit.clone(),
            errors,
        };
        if self.sync.borrow().rejected.as_ref() != Some(&rejected) {
            let nodes: usize = check.refused.iter().map(|r| r.nodes.len()).sum();
            tracing::error!(
                commit = %desired.commit,
                nodes,
                problems = rejected.errors.len(),
                first = %rejected.errors[0],
                "commit refused: nodes it would reach would refuse their pool's config; nothing of it is published or applied, the last valid commit stays in force (checked again as the nodes change)"
            );
            self.metrics.repo_validity(rejected.errors.len());
            self.update(|s| set(&mut s.rejected, Some(rejected)));
        }
        false
    }

    /// Checks the held commit (one some nodes would refuse) again; it becomes the commit
    /// in force once none would.
    pub(super) fn recheck_held(&self, st: &mut LoopState, nodes: &NodeCache) {
        let Some(held) = st.held.clone() else {
            return;
        };
        if self.node_gate(&held, nodes, false) {
            tracing::info!(commit = %held.commit, "no node refuses the held commit any more");
            self.accept(st, held);
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
                self.update(|s| set(&mut s.fetched, Some(id)) | set(&mut s.unreachable, None));
            }
            PollEvent::Unchanged => self.update(|s| set(&mut s.unreachable, None)),
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
                self.update(|s| set(&mut s.unreachable, Some(error)));
            }
        }
    }
}
