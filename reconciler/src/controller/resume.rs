//! Resuming after a restart when the branch head cannot be used.
//!
//! A running reconciler keeps the last valid commit in force when a new one does not
//! validate, and keeps the last fetched commit when the remote is unreachable. A restarted
//! one has no memory, so it recovers both from git and the cluster:
//!
//! - **Remote unreachable at start**: the bare cache the previous process left
//!   ([`crate::git::cached_head`]) holds the last branch head it fetched; that commit is
//!   used as if fetched, until the remote answers again.
//! - **Head does not validate at start**: the commit the cluster was on is the newest
//!   first-parent ancestor of the head that validates *and* whose ConfigMaps are all
//!   published ([`was_applied`]): every reconcile publishes a commit's ConfigMaps before
//!   it writes any node, so a commit whose ConfigMaps are missing was never applied. A
//!   valid ancestor that never reached the cluster (pushed together with the invalid head
//!   while no reconciler ran) is skipped: resuming must not roll out a commit nobody saw
//!   go out. The walk stops after [`RESUME_DEPTH`] commits.
//!
//! Until either finds a commit, nothing is applied (as before a first valid commit). A
//! search that finds none says so in [`SyncState::nothing_applied`](crate::state::SyncState):
//! until the commit the cluster is on (or that there is none) is known, pull requests are
//! not reviewed, since there is nothing to compare them with yet.
//! `--once` does neither: it applies the head or fails.

use std::collections::HashSet;
use std::sync::Arc;

use kubelet_gitops_core::message::error_chain;
use tokio::task::JoinSet;

use super::commits::RenderFailure;
use super::task::{ConfigMaps, Controller, LoopState};
use crate::git;
use crate::state::set;

/// How many first-parent ancestors of an invalid head are looked at.
pub(crate) const RESUME_DEPTH: usize = 100;

/// Whether a valid commit whose pools publish `configmaps` was applied to the cluster,
/// given the names of the ConfigMaps published in its namespace. A commit without pools
/// leaves no trace in the cluster and is not taken as applied.
pub(crate) fn was_applied<'a>(
    configmaps: impl IntoIterator<Item = &'a String>,
    published: &HashSet<String>,
) -> bool {
    let mut any = false;
    for name in configmaps {
        if !published.contains(name) {
            return false;
        }
        any = true;
    }
    any
}

impl Controller {
    /// At start, with the remote unreachable: takes the cache's branch head as fetched.
    pub(super) async fn fetched_from_cache(&self, st: &mut LoopState) {
        if st.fetched.is_some() || st.desired.is_some() {
            return;
        }
        let config = self.config.git.clone();
        let Ok(Some(head)) = tokio::task::spawn_blocking(move || git::cached_head(&config)).await
        else {
            return;
        };
        tracing::warn!(
            commit = %head,
            cache = %self.config.git.cache_dir.display(),
            "the remote is unreachable at start: resuming from the branch head in the git cache (the last commit fetched before the restart) until it answers"
        );
        st.fetched = Some(head.clone());
        self.update(|s| set(&mut s.fetched, Some(head)));
    }

    /// At start, with the fetched head rejected and nothing valid yet: finds the commit
    /// the cluster was on and makes it the desired state. Tried once per fetched head.
    pub(super) async fn resume_from_cluster(
        &self,
        st: &mut LoopState,
        configmaps: &mut Option<ConfigMaps>,
        tasks: &mut JoinSet<()>,
    ) {
        if st.desired.is_some() || st.fetched.is_none() || st.rendered != st.fetched {
            return;
        }
        let head = st.fetched.clone().unwrap_or_default();
        if st.resume_tried.as_deref() == Some(head.as_str()) {
            return;
        }
        st.resume_tried = Some(head.clone());
        let cache = self.config.git.cache_dir.clone();
        let from = head.clone();
        let history = tokio::task::spawn_blocking(move || {
            git::first_parent_history(&cache, &from, RESUME_DEPTH + 1)
        })
        .await;
        let history = match history {
            Ok(Ok(h)) => h,
            Ok(Err(e)) => {
                tracing::error!(commit = %head, error = %error_chain(&e), "cannot walk the branch history to find the commit the cluster is on; nothing is applied until a valid commit");
                return;
            }
            Err(e) => {
                tracing::error!(commit = %head, error = %e, "walking the branch history stopped");
                return;
            }
        };
        tracing::info!(
            commit = %head,
            depth = RESUME_DEPTH,
            "the branch head does not validate and this reconciler has just started: looking back along the branch for the commit the cluster is on"
        );
        for (back, commit) in history.iter().enumerate().skip(1) {
            let desired = match self.render(commit).await {
                Ok(d) => d,
                Err(RenderFailure::Invalid(errors)) => {
                    tracing::debug!(%commit, back, problems = errors.len(), "ancestor does not validate either");
                    continue;
                }
                Err(RenderFailure::Signature(refusal)) => {
                    tracing::debug!(%commit, back, reason = %refusal, "ancestor's signature is refused too");
                    continue;
                }
                Err(RenderFailure::Source(error)) => {
                    tracing::error!(%commit, back, %error, "cannot read an ancestor from the git cache; stopping the search");
                    break;
                }
            };
            let Some(store) = self
                .configmaps_for(configmaps, &desired.namespace, tasks)
                .await
            else {
                return;
            };
            let published: HashSet<String> = store
                .state()
                .iter()
                .filter_map(|cm| cm.metadata.name.clone())
                .collect();
            let names = desired.configmaps();
            if was_applied(names.values(), &published) {
                tracing::warn!(
                    commit = %commit,
                    head = %head,
                    commits_back = back,
                    namespace = %desired.namespace,
                    "resuming from the commit the cluster is on (its ConfigMaps are all published); the head stays rejected until a valid commit lands"
                );
                st.desired = Some(Arc::new(desired));
                return;
            }
            tracing::info!(
                %commit,
                back,
                "ancestor validates but its ConfigMaps were never all published (it never went out); looking further back"
            );
        }
        self.update(|s| set(&mut s.nothing_applied, true));
        tracing::error!(
            head = %head,
            searched = history.len().saturating_sub(1),
            "no recent commit of the branch is both valid and on the cluster: nothing is applied (no node assigned, nothing collected) until a valid commit lands"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> HashSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_commit_is_applied_when_all_its_configmaps_are_published() {
        let names = ["kubelet-a-1".to_string(), "kubelet-b-2".to_string()];
        let published = set(&["kubelet-a-1", "kubelet-b-2", "kubelet-a-0"]);
        assert!(was_applied(names.iter(), &published));
    }

    #[test]
    fn one_missing_configmap_means_it_never_went_out() {
        let names = ["kubelet-a-1".to_string(), "kubelet-b-3".to_string()];
        let published = set(&["kubelet-a-1", "kubelet-b-2"]);
        assert!(!was_applied(names.iter(), &published));
    }

    #[test]
    fn a_commit_without_pools_is_not_evidence() {
        assert!(!was_applied([].iter(), &set(&["kubelet-a-1"])));
    }
}
