//! [`SyncState`]: what the reconciler has fetched, applied and rejected, for `/readyz`,
//! logs, and the commit-status reporter to read.

use std::collections::BTreeMap;

use kubelet_gitops_core::message::cap_per_file;
use serde::Serialize;

use crate::model::Overlap;
use crate::render::RepoError;
use crate::rollout::PoolReport;

/// This replica's part in leader election.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// No leader election: this replica writes.
    #[default]
    Standalone,
    /// Holds the lease: writes.
    Leader,
    /// Another replica holds the lease: reads only.
    Follower,
}

impl Role {
    /// Whether this replica may write.
    pub fn writes(self) -> bool {
        matches!(self, Role::Standalone | Role::Leader)
    }
}

/// A commit whose pools were all published and whose rollout is under way (or done).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AppliedCommit {
    /// The full commit id.
    pub commit: String,
    /// Where its ConfigMaps are.
    pub namespace: String,
    /// Pool name to ConfigMap name.
    pub configmaps: BTreeMap<String, String>,
    /// Pool name to the commit that produced the pool's ConfigMap (its source-commit
    /// annotation): this commit when it changed the pool, an earlier one when it left
    /// the pool as it was (ConfigMaps are named after their content, so the earlier
    /// commit's ConfigMap is the one in force). A pool whose ConfigMap the cache does
    /// not show yet is missing until it does. Commit statuses go on these commits.
    pub sources: BTreeMap<String, String>,
}

/// The newest fetched commit, when it does not render or validate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedCommit {
    /// The full commit id.
    pub commit: String,
    /// Every problem, `file:line:col: field: message`.
    pub errors: Vec<RepoError>,
}

/// Everything the controller knows about its progress. Published on a
/// `tokio::sync::watch` channel ([`crate::controller::RunningController::sync_state`]):
/// readers get every change, and nothing in it changes unless something happened.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SyncState {
    /// This replica's role.
    pub role: Role,
    /// Leader: a reconcile has succeeded. Follower: it can read the Lease.
    pub ready: bool,
    /// The newest commit fetched from the branch.
    pub fetched: Option<String>,
    /// The commit being rolled out (the last one that validated and was published).
    pub applied: Option<AppliedCommit>,
    /// The newest commit, when it failed to render or validate; cleared by a commit that
    /// validates. While set, `applied` is older than `fetched`.
    pub rejected: Option<RejectedCommit>,
    /// Set when this replica started on a head that does not validate and found no recent
    /// commit of the branch on the cluster: nothing is applied, and that is known (while
    /// `applied` and this are both unset, what the cluster runs is not known yet).
    pub nothing_applied: bool,
    /// Why the last fetch failed, while the remote is unreachable.
    pub unreachable: Option<String>,
    /// Why the last reconcile failed, until one succeeds.
    pub last_error: Option<String>,
    /// Where every pool of the applied commit stands, from the last reconcile.
    pub pools: Vec<PoolReport>,
    /// Nodes two pools of the same priority select.
    pub overlaps: Vec<Overlap>,
}

/// Sets `slot` to `value`; whether that changed it (for [`SyncState`] updates that wake
/// watchers only on a change).
pub fn set<T: PartialEq>(slot: &mut T, value: T) -> bool {
    if *slot == value {
        false
    } else {
        *slot = value;
        true
    }
}

/// The JSON `/readyz` answers with.
#[derive(Debug, Serialize)]
pub struct ReadyDetail<'a> {
    pub ready: bool,
    pub role: Role,
    pub fetched: Option<&'a str>,
    pub applied: Option<&'a AppliedCommit>,
    pub rejected: Option<RejectedDetail<'a>>,
    pub unreachable: Option<&'a str>,
    pub last_error: Option<&'a str>,
    pub overlaps: Vec<String>,
    pub pools: Vec<PoolDetail<'a>>,
}

/// A rejected commit in `/readyz`.
#[derive(Debug, Serialize)]
pub struct RejectedDetail<'a> {
    pub commit: &'a str,
    /// How many errors the commit has.
    pub problems: usize,
    /// The errors, at most
    /// [`MAX_ERRORS_SHOWN`](kubelet_gitops_core::message::MAX_ERRORS_SHOWN) of each file,
    /// then how many more it has.
    pub errors: Vec<String>,
}

/// A pool in `/readyz`.
#[derive(Debug, Serialize)]
pub struct PoolDetail<'a> {
    pub pool: &'a str,
    pub target: String,
    pub phase: &'static str,
    pub nodes: usize,
    pub done: usize,
    pub in_progress: usize,
    pub waiting: usize,
    pub failed: Vec<String>,
    /// Why nothing more is assigned while nodes wait: `waiting for the window Tue 02:00
    /// UTC`, `soaking after wave a until ...`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<String>,
    /// The current wave of a pool with waves: `wave 2/3 topology.kubernetes.io/zone=b`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wave: Option<String>,
    /// Nodes being drained: `node: 2 pod(s) left; <why one did not go>`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub draining: Vec<String>,
}

impl SyncState {
    /// The `/readyz` body.
    pub fn detail(&self) -> ReadyDetail<'_> {
        ReadyDetail {
            ready: self.ready,
            role: self.role,
            fetched: self.fetched.as_deref(),
            applied: self.applied.as_ref(),
            rejected: self.rejected.as_ref().map(|r| RejectedDetail {
                commit: &r.commit,
                problems: r.errors.len(),
                errors: cap_per_file(&r.errors, |e| &e.file)
                    .iter()
                    .map(ToString::to_string)
                    .collect(),
            }),
            unreachable: self.unreachable.as_deref(),
            last_error: self.last_error.as_deref(),
            overlaps: self.overlaps.iter().map(ToString::to_string).collect(),
            pools: self
                .pools
                .iter()
                .map(|p| PoolDetail {
                    pool: &p.pool,
                    target: p.target.to_string(),
                    phase: p.phase.as_str(),
                    nodes: p.nodes,
                    done: p.done,
                    in_progress: p.in_progress,
                    waiting: p.waiting,
                    failed: p
                        .failed
                        .iter()
                        .map(|f| match &f.message {
                            Some(m) => format!("{}: {}: {m}", f.node, f.state),
                            None => format!("{}: {}", f.node, f.state),
                        })
                        .collect(),
                    waiting_for: p.hold.as_ref().map(ToString::to_string),
                    wave: p.wave.as_ref().map(ToString::to_string),
                    draining: p.draining.clone(),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use kubelet_gitops_core::message::MAX_ERRORS_SHOWN;

    use super::*;

    #[test]
    fn readyz_counts_a_rejected_commits_errors_and_lists_the_first_of_each_file() {
        let errors: Vec<RepoError> = (0..MAX_ERRORS_SHOWN + 5)
            .map(|i| RepoError::new("pools/a.yaml", format!("featureGates.G{i}"), "unknown"))
            .chain([RepoError::new("pools/b.yaml", "maxPods", "too many")])
            .collect();
        let state = SyncState {
            rejected: Some(RejectedCommit {
                commit: "abc".into(),
                errors,
            }),
            ..SyncState::default()
        };
        let detail = state.detail();
        let rejected = detail.rejected.expect("rejected");
        assert_eq!(rejected.problems, MAX_ERRORS_SHOWN + 6);
        assert_eq!(rejected.errors.len(), MAX_ERRORS_SHOWN + 2);
        assert!(
            rejected.errors[MAX_ERRORS_SHOWN].starts_with("pools/a.yaml: and 5 more errors"),
            "{:?}",
            rejected.errors
        );
        assert_eq!(
            rejected.errors[MAX_ERRORS_SHOWN + 1],
            "pools/b.yaml: maxPods: too many"
        );
    }
}
