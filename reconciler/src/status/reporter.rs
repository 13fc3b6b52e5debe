//! Commit statuses from the controller's [`SyncState`]: which statuses a state calls for
//! ([`commit_statuses`], pure), and the task that posts them ([`StatusReporter`]) beside
//! the loop, never in it.
//!
//! - **Per pool**, context `kubelet-gitops/<pool>`, on the commit that produced the
//!   pool's ConfigMap ([`AppliedCommit::sources`]): a later commit that leaves a pool as
//!   it was does not move that pool's status; the ConfigMap in force is the earlier
//!   commit's, and its status keeps following the rollout there.
//! - **Summary**, context `kubelet-gitops`, on the applied commit: the worst state of all
//!   its pools (the unchanged ones included: they are part of what the commit asks for),
//!   naming the pools it left unchanged and where their statuses are, and nodes left
//!   alone because two pools select them.
//! - **Invalid commit**: `error` on its summary context with the first problem
//!   (`file:line:col: field: message`); nothing of it is applied.
//!
//! Only a replica that writes (standalone, or the leader) posts. The reporter reads the
//! `watch` channel, which holds only the latest state: however slow the forge, the
//! loop never waits for it and the reporter never falls behind by more than one state.
//! Progress within `pending` ("3/10 nodes", then "4/10") goes out at most once per
//! `progress_interval` per context (forges limit how many statuses a commit gets and how
//! fast they may be created); a change of state goes out at once. The statuses a state
//! lets through go to the writer as one round ([`StatusWriter::post_all`]): the forges get
//! one request per status, git notes one notes commit and one fetch and push for the
//! whole round. The writer posts only what changed and keeps undelivered statuses in its
//! outbox, which the reporter flushes every `redeliver_interval`, and as soon as a hold
//! of the forge (a rate limit, a refused token) ends.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::aggregate::{Summary, invalid_commit_status, pool_status, summary_status};
use super::commit::{CONTEXT, CommitStatus, StatusState};
use super::config::StatusConfig;
use super::writer::{Delivery, StatusWriter};
use crate::metrics::{Metrics, StatusPostResult};
use crate::state::{AppliedCommit, SyncState};

/// The statuses `state` calls for: per pool on the commit that produced its ConfigMap,
/// the summary on the applied commit, `error` on a rejected commit, each description
/// composed for `limit` characters (the backend's). Nothing for a follower (the leader
/// posts). Pure.
pub fn commit_statuses(
    state: &SyncState,
    target_url: Option<&str>,
    limit: usize,
) -> Vec<CommitStatus> {
    let mut out = Vec::new();
    if !state.role.writes() {
        return out;
    }
    if let Some(rejected) = &state.rejected {
        let errors: Vec<String> = rejected.errors.iter().map(ToString::to_string).collect();
        out.extend(invalid_commit_status(&rejected.commit, &errors, limit));
    }
    if let Some(applied) = &state.applied {
        out.extend(applied_statuses(state, applied, limit));
    }
    if let Some(url) = target_url {
        for s in &mut out {
            s.target_url = Some(url.to_string());
        }
    }
    out
}

fn applied_statuses(state: &SyncState, applied: &AppliedCommit, limit: usize) -> Vec<CommitStatus> {
    let mut out = Vec::new();
    // Short commit id to the pools it produced that the applied commit left unchanged.
    let mut unchanged: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for report in &state.pools {
        if let Some(source) = applied.sources.get(&report.pool) {
            if *source != applied.commit {
                unchanged
                    .entry(short(source).to_string())
                    .or_default()
                    .push(report.pool.clone());
            }
            out.push(pool_status(source, report, limit));
        }
    }
    let nodes: HashSet<&str> = state.overlaps.iter().map(|o| o.node.as_str()).collect();
    // Every pool counts as part of the applied commit, for its summary.
    let summary = summary_status(
        &applied.commit,
        &Summary {
            pools: &state.pools,
            unchanged,
            left_alone: nodes.len(),
        },
        limit,
    );
    debug_assert_eq!(summary.context, CONTEXT);
    out.push(summary);
    out
}

/// The first 7 characters of a commit id.
fn short(commit: &str) -> &str {
    commit.get(..7).unwrap_or(commit)
}

/// Whether a status may go out now, or later (progress within `pending` is limited to
/// one post per interval per commit and context).
#[derive(Debug, Default)]
pub(crate) struct Throttle {
    interval: Duration,
    /// The last status let through per (commit, context): state, description, when.
    last: HashMap<(String, String), (StatusState, String, Instant)>,
}

impl Throttle {
    pub(crate) fn new(interval: Duration) -> Throttle {
        Throttle {
            interval,
            last: HashMap::new(),
        }
    }

    /// `None`: send `status` now (and remember it); `Some(t)`: not before `t`.
    pub(crate) fn admit(&mut self, status: &CommitStatus, now: Instant) -> Option<Instant> {
        let key = (status.sha.clone(), status.context.clone());
        if let Some((state, description, at)) = self.last.get(&key) {
            if *state == status.state && *description == status.description {
                return None;
            }
            let due = *at + self.interval;
            if *state == StatusState::Pending && status.state == StatusState::Pending && now < due {
                return Some(due);
            }
        }
        self.last
            .insert(key, (status.state, status.description.clone(), now));
        None
    }

    /// Forgets the statuses not in `current` (commits and contexts no longer reported).
    pub(crate) fn retain(&mut self, current: &[CommitStatus]) {
        let keep: HashSet<(&str, &str)> = current
            .iter()
            .map(|s| (s.sha.as_str(), s.context.as_str()))
            .collect();
        self.last
            .retain(|(sha, context), _| keep.contains(&(sha.as_str(), context.as_str())));
    }
}

/// Posts the statuses the controller's state calls for, beside the loop.
pub(crate) struct StatusReporter {
    writer: Arc<StatusWriter>,
    metrics: Arc<Metrics>,
    target_url: Option<String>,
    throttle: Throttle,
    redeliver_interval: Duration,
    shutdown_grace: Duration,
}

impl StatusReporter {
    pub(crate) fn new(
        writer: Arc<StatusWriter>,
        metrics: Arc<Metrics>,
        config: &StatusConfig,
    ) -> StatusReporter {
        StatusReporter {
            writer,
            metrics,
            target_url: config.target_url.clone(),
            throttle: Throttle::new(config.progress_interval),
            redeliver_interval: config.redeliver_interval.max(Duration::from_millis(10)),
            shutdown_grace: config.shutdown_grace,
        }
    }

    /// Posts on every change of `sync` until `stop` fires (or the controller is gone),
    /// flushing the outbox in between; then posts the last state once more, progress
    /// included, and flushes, for at most the shutdown grace.
    pub(crate) async fn run(
        mut self,
        mut sync: watch::Receiver<SyncState>,
        stop: CancellationToken,
    ) {
        let mut next_flush = Instant::now() + self.redeliver_interval;
        // The statuses are computed when the state changes, under its borrow (no copy of
        // the state); a wake-up for the outbox (the redelivery interval, the end of a
        // forge's hold) flushes it and recomputes nothing.
        let mut statuses = self.statuses(&sync.borrow_and_update());
        let mut deferred = self.round(&statuses, false).await;
        loop {
            // The forge's hold ends: what waits goes out then, not up to an interval later.
            let hold_ends = self.writer.held_until();
            let flush_at = hold_ends.map_or(next_flush, |h| h.min(next_flush));
            let wake = deferred.map_or(flush_at, |d| d.min(flush_at));
            tokio::select! {
                biased;
                () = stop.cancelled() => break,
                changed = sync.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    statuses = self.statuses(&sync.borrow_and_update());
                    deferred = self.round(&statuses, false).await;
                }
                () = tokio::time::sleep_until(wake.into()) => {
                    let now = Instant::now();
                    if now >= flush_at {
                        self.flush().await;
                        next_flush = Instant::now() + self.redeliver_interval;
                    }
                    if deferred.is_some_and(|due| now >= due) {
                        deferred = self.round(&statuses, false).await;
                    }
                }
            }
        }
        let statuses = self.statuses(&sync.borrow());
        let grace = self.shutdown_grace;
        let last = async {
            self.round(&statuses, true).await;
            self.flush().await;
        };
        if tokio::time::timeout(grace, last).await.is_err() {
            tracing::warn!(
                backend = self.writer.backend().name(),
                queued = self.writer.queued().len(),
                "commit statuses not all delivered before shutdown; the next start posts them again"
            );
        }
    }

    /// The statuses `state` calls for.
    fn statuses(&self, state: &SyncState) -> Vec<CommitStatus> {
        let limit = self.writer.backend().description_limit();
        commit_statuses(state, self.target_url.as_deref(), limit)
    }

    /// Posts `statuses` ([`StatusReporter::statuses`]); returns when a deferred progress
    /// update is due. `final_round` lets every progress update through.
    async fn round(&mut self, statuses: &[CommitStatus], final_round: bool) -> Option<Instant> {
        self.throttle.retain(statuses);
        let mut deferred: Option<Instant> = None;
        let mut admitted = Vec::with_capacity(statuses.len());
        for status in statuses {
            let now = Instant::now();
            if !final_round && let Some(due) = self.throttle.admit(status, now) {
                deferred = Some(deferred.map_or(due, |d| d.min(due)));
                continue;
            }
            admitted.push(status.clone());
        }
        // One round, one batch: git notes fetches and pushes once for all of it.
        for delivery in self.writer.post_all(&admitted).await {
            self.count(&delivery);
        }
        self.metrics.set_status_outbox(self.writer.queued().len());
        deferred
    }

    async fn flush(&self) {
        let report = self.writer.flush().await;
        for _ in 0..report.delivered {
            self.metrics.status_posted(StatusPostResult::Ok);
        }
        for _ in 0..report.rejected {
            self.metrics.status_posted(StatusPostResult::Rejected);
        }
        self.metrics.set_status_outbox(self.writer.queued().len());
        if report.delivered > 0 {
            tracing::info!(
                backend = self.writer.backend().name(),
                delivered = report.delivered,
                still_queued = report.still_queued,
                "queued commit statuses delivered"
            );
        }
    }

    fn count(&self, delivery: &Delivery) {
        count_delivery(&self.metrics, delivery);
    }
}

/// Counts one post in the metrics (an unchanged status sent nothing).
pub(crate) fn count_delivery(metrics: &Metrics, delivery: &Delivery) {
    match delivery {
        Delivery::Posted => metrics.status_posted(StatusPostResult::Ok),
        Delivery::Queued { .. } => metrics.status_posted(StatusPostResult::Queued),
        Delivery::Rejected(_) => metrics.status_posted(StatusPostResult::Rejected),
        Delivery::Unchanged => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Overlap;
    use crate::render::RepoError;
    use crate::rollout::{NodeFailure, PoolPhase, PoolReport};
    use crate::state::{RejectedCommit, Role};
    use crate::status::{self, Backend, Recorder, StatusBackendConfig};
    use kubelet_gitops_core::protocol::{ConfigRef, State};

    const OLD: &str = "1111111111111111111111111111111111111111";
    const NEW: &str = "2222222222222222222222222222222222222222";
    const NO_LIMIT: usize = usize::MAX;

    fn report(pool: &str, nodes: usize, done: usize, phase: PoolPhase) -> PoolReport {
        PoolReport {
            nodes,
            done,
            in_progress: nodes - done,
            phase,
            max_unavailable: 1,
            ..PoolReport::new(
                pool,
                ConfigRef::configmap("kubelet-gitops", format!("kubelet-{pool}-abc")),
            )
        }
    }

    fn applied(commit: &str, sources: &[(&str, &str)]) -> AppliedCommit {
        AppliedCommit {
            commit: commit.into(),
            namespace: "kubelet-gitops".into(),
            configmaps: BTreeMap::new(),
            sources: sources
                .iter()
                .map(|(p, c)| (p.to_string(), c.to_string()))
                .collect(),
        }
    }

    fn find<'a>(statuses: &'a [CommitStatus], sha: &str, context: &str) -> &'a CommitStatus {
        statuses
            .iter()
            .find(|s| s.sha == sha && s.context == context)
            .unwrap_or_else(|| panic!("no {context} on {sha}: {statuses:#?}"))
    }

    #[test]
    fn pools_report_on_the_commit_that_produced_their_configmap() {
        let state = SyncState {
            applied: Some(applied(NEW, &[("gpu", NEW), ("cpu", OLD), ("mem", OLD)])),
            pools: vec![
                report("cpu", 4, 4, PoolPhase::Complete),
                report("gpu", 10, 3, PoolPhase::Progressing),
                report("mem", 2, 2, PoolPhase::Complete),
            ],
            ..SyncState::default()
        };
        let statuses = commit_statuses(&state, Some("https://dash.example/x"), NO_LIMIT);
        assert_eq!(statuses.len(), 4, "{statuses:#?}");
        let gpu = find(&statuses, NEW, "kubelet-gitops/gpu");
        assert_eq!(gpu.state, StatusState::Pending);
        assert_eq!(
            gpu.description,
            "rolling out: 3/10 nodes on kubelet-gpu-abc"
        );
        assert_eq!(gpu.target_url.as_deref(), Some("https://dash.example/x"));
        let cpu = find(&statuses, OLD, "kubelet-gitops/cpu");
        assert_eq!(cpu.state, StatusState::Success);
        assert!(
            !statuses
                .iter()
                .any(|s| s.sha == NEW && s.context == "kubelet-gitops/cpu")
        );
        let summary = find(&statuses, NEW, "kubelet-gitops");
        assert_eq!(summary.state, StatusState::Pending);
        assert_eq!(
            summary.description,
            "3 pools: 1 in progress, 2 done; gpu: rolling out: 3/10 nodes on kubelet-gpu-abc; \
             unchanged: cpu, mem (from 1111111)"
        );
    }

    #[test]
    fn a_pool_whose_source_is_unknown_waits_but_counts_in_the_summary() {
        let mut failing = report("gpu", 3, 1, PoolPhase::Halted);
        failing.failed = vec![NodeFailure {
            node: "node-2".into(),
            state: crate::rollout::Failure::Agent(State::RolledBack),
            message: Some("healthz failed".into()),
        }];
        let state = SyncState {
            applied: Some(applied(NEW, &[])),
            pools: vec![failing],
            ..SyncState::default()
        };
        let statuses = commit_statuses(&state, None, NO_LIMIT);
        assert_eq!(statuses.len(), 1, "{statuses:#?}");
        assert_eq!(statuses[0].context, "kubelet-gitops");
        assert_eq!(statuses[0].state, StatusState::Failure);
        assert!(
            statuses[0]
                .description
                .contains("node-2 rolled back: healthz failed"),
            "{}",
            statuses[0].description
        );
    }

    #[test]
    fn a_rejected_commit_gets_an_error_and_followers_post_nothing() {
        let mut state = SyncState {
            rejected: Some(RejectedCommit {
                commit: NEW.into(),
                errors: vec![
                    RepoError {
                        file: "pools/gpu.yaml".into(),
                        line: Some(12),
                        column: Some(5),
                        field: "spec.kubelet.maxPod".into(),
                        message: "unknown field".into(),
                    },
                    RepoError::new("pools/cpu.yaml", "", "duplicate pool"),
                ],
            }),
            applied: Some(applied(OLD, &[("cpu", OLD)])),
            pools: vec![report("cpu", 1, 1, PoolPhase::Complete)],
            ..SyncState::default()
        };
        let statuses = commit_statuses(&state, None, NO_LIMIT);
        let error = find(&statuses, NEW, "kubelet-gitops");
        assert_eq!(error.state, StatusState::Error);
        assert!(
            error
                .description
                .starts_with("pools/gpu.yaml:12:5: spec.kubelet.maxPod: unknown field"),
            "{}",
            error.description
        );
        assert!(error.description.ends_with("(+1 more error)"));
        assert_eq!(
            find(&statuses, OLD, "kubelet-gitops").state,
            StatusState::Success
        );
        state.role = Role::Follower;
        assert!(commit_statuses(&state, None, NO_LIMIT).is_empty());
    }

    #[test]
    fn overlaps_fail_the_summary() {
        let state = SyncState {
            applied: Some(applied(NEW, &[("cpu", NEW)])),
            pools: vec![report("cpu", 1, 1, PoolPhase::Complete)],
            overlaps: vec![Overlap {
                node: "n1".into(),
                priority: 0,
                first: ("a".into(), "pools/a.yaml".into()),
                second: ("b".into(), "pools/b.yaml".into()),
            }],
            ..SyncState::default()
        };
        let summary = find(
            &commit_statuses(&state, None, NO_LIMIT),
            NEW,
            "kubelet-gitops",
        )
        .clone();
        assert_eq!(summary.state, StatusState::Failure);
        assert!(
            summary
                .description
                .ends_with("; 1 node left alone: selected by two pools of the same priority"),
            "{}",
            summary.description
        );
    }

    #[test]
    fn progress_is_throttled_but_state_changes_are_not() {
        let mut t = Throttle::new(Duration::from_secs(60));
        let start = Instant::now();
        let s = |state, d: &str| CommitStatus::new(NEW, "kubelet-gitops/gpu", state, d);
        assert_eq!(t.admit(&s(StatusState::Pending, "1/10"), start), None);
        // The same status again is let through (the writer sends nothing for it).
        assert_eq!(t.admit(&s(StatusState::Pending, "1/10"), start), None);
        let due = start + Duration::from_secs(60);
        assert_eq!(
            t.admit(
                &s(StatusState::Pending, "2/10"),
                start + Duration::from_secs(1)
            ),
            Some(due)
        );
        assert_eq!(t.admit(&s(StatusState::Pending, "3/10"), due), None);
        assert_eq!(
            t.admit(
                &s(StatusState::Success, "10/10"),
                due + Duration::from_secs(1)
            ),
            None,
            "a change of state goes out at once"
        );
        t.retain(&[]);
        assert!(t.last.is_empty());
    }

    #[tokio::test]
    async fn the_reporter_posts_changes_and_the_last_state_at_shutdown() {
        let recorder = Recorder::default();
        let config = StatusConfig {
            backend: StatusBackendConfig::Custom(Backend::Recorder(recorder.clone())),
            progress_interval: Duration::from_secs(3600),
            redeliver_interval: Duration::from_millis(20),
            ..StatusConfig::default()
        };
        let writer = Arc::new(StatusWriter::new(
            Backend::Recorder(recorder.clone()),
            config.retry,
        ));
        let metrics = Arc::new(Metrics::new());
        let reporter = StatusReporter::new(writer, metrics.clone(), &config);
        let state = |done| SyncState {
            applied: Some(applied(NEW, &[("gpu", NEW)])),
            pools: vec![report(
                "gpu",
                4,
                done,
                if done == 4 {
                    PoolPhase::Complete
                } else {
                    PoolPhase::Progressing
                },
            )],
            ..SyncState::default()
        };
        let (tx, rx) = watch::channel(state(1));
        let stop = CancellationToken::new();
        let task = tokio::spawn(reporter.run(rx, stop.clone()));
        let wait_for = |n: usize| {
            let recorder = recorder.clone();
            async move {
                while recorder.statuses().len() < n {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        };
        wait_for(2).await;
        // Progress within pending is held back by the (long) interval ...
        tx.send(state(2)).unwrap();
        tokio::task::yield_now().await;
        // ... and posted at shutdown.
        stop.cancel();
        task.await.unwrap();
        let seen: Vec<String> = recorder
            .statuses()
            .iter()
            .map(|s| format!("{} {} {}", s.context, s.state, s.description))
            .collect();
        assert_eq!(
            seen,
            [
                "kubelet-gitops/gpu pending rolling out: 1/4 nodes on kubelet-gpu-abc",
                "kubelet-gitops pending 1 pool: 1 in progress; gpu: rolling out: 1/4 nodes on kubelet-gpu-abc",
                "kubelet-gitops/gpu pending rolling out: 2/4 nodes on kubelet-gpu-abc",
                "kubelet-gitops pending 1 pool: 1 in progress; gpu: rolling out: 2/4 nodes on kubelet-gpu-abc",
            ]
        );
        assert!(
            metrics
                .encode()
                .contains("kubelet_gitops_status_posts_total{result=\"ok\"} 4")
        );
    }

    #[tokio::test]
    async fn a_round_goes_to_the_writer_as_one_batch() {
        let recorder = Recorder::default().batching();
        let config = StatusConfig {
            backend: StatusBackendConfig::Custom(Backend::Recorder(recorder.clone())),
            ..StatusConfig::default()
        };
        let writer = Arc::new(StatusWriter::new(
            Backend::Recorder(recorder.clone()),
            config.retry,
        ));
        let metrics = Arc::new(Metrics::new());
        let reporter = StatusReporter::new(writer, metrics.clone(), &config);
        let state = SyncState {
            applied: Some(applied(NEW, &[("cpu", NEW), ("gpu", NEW), ("mem", OLD)])),
            pools: vec![
                report("cpu", 2, 2, PoolPhase::Complete),
                report("gpu", 4, 1, PoolPhase::Progressing),
                report("mem", 1, 1, PoolPhase::Complete),
            ],
            ..SyncState::default()
        };
        let (_tx, rx) = watch::channel(state);
        let stop = CancellationToken::new();
        let task = tokio::spawn(reporter.run(rx, stop.clone()));
        while recorder.statuses().len() < 4 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        stop.cancel();
        task.await.unwrap();
        // Three pools and the summary in one send; the shutdown round changed nothing.
        assert_eq!(recorder.sends(), [4]);
        assert!(
            metrics
                .encode()
                .contains("kubelet_gitops_status_posts_total{result=\"ok\"} 4")
        );
    }

    #[tokio::test]
    async fn an_outage_is_redelivered_by_the_periodic_flush() {
        let recorder = Recorder::default();
        recorder.set_failing(true);
        let config = StatusConfig {
            retry: status::RetryPolicy {
                attempts: 1,
                initial: Duration::from_millis(1),
                max_delay: Duration::from_millis(1),
                max_wait: Duration::from_millis(1),
                ..status::RetryPolicy::default()
            },
            redeliver_interval: Duration::from_millis(10),
            ..StatusConfig::default()
        };
        let writer = Arc::new(StatusWriter::new(
            Backend::Recorder(recorder.clone()),
            config.retry,
        ));
        let metrics = Arc::new(Metrics::new());
        let reporter = StatusReporter::new(writer.clone(), metrics.clone(), &config);
        let state = SyncState {
            applied: Some(applied(NEW, &[("gpu", NEW)])),
            pools: vec![report("gpu", 1, 1, PoolPhase::Complete)],
            ..SyncState::default()
        };
        let (_tx, rx) = watch::channel(state);
        let stop = CancellationToken::new();
        let task = tokio::spawn(reporter.run(rx, stop.clone()));
        while writer.queued().len() < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(recorder.statuses().is_empty());
        recorder.set_failing(false);
        while !writer.queued().is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        stop.cancel();
        task.await.unwrap();
        let states: Vec<StatusState> = recorder.statuses().iter().map(|s| s.state).collect();
        assert_eq!(states, [StatusState::Success, StatusState::Success]);
        let text = metrics.encode();
        assert!(
            text.contains("kubelet_gitops_status_posts_total{result=\"queued\"} 2"),
            "{text}"
        );
        assert!(text.contains("kubelet_gitops_status_posts_total{result=\"ok\"} 2"));
        assert!(text.contains("kubelet_gitops_status_outbox 0"));
    }
}
