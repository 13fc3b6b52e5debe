//! The controller task: the tasks it runs beside the loop (the Node reflector, leader
//! election, commit statuses, the poller, review), the loop, and `--once`.
//!
//! The loop reconciles at most once per `min_reconcile_interval` and never two at a time;
//! a trigger during a reconcile schedules the next one instead of being dropped. A failed
//! reconcile is retried with backoff, and sooner by any trigger.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kubelet_gitops_core::message::error_chain;
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use super::config::RunConfig;
use super::error::RunError;
use super::observe::{self, ConfigMapStore, NodeCache};
use super::reconcile::{Desired, ReconcileError, Reconciler};
use crate::git::{PollEvent, Poller};
use crate::leader::{LeaderElector, LeaderStatus};
use crate::metrics::{Metrics, ReconcileResult};
use crate::review::{ReviewConfig, Reviewer};
use crate::state::{Role, SyncState, set};
use crate::status::{StatusReporter, StatusWriter};

/// Decides whether a write may go out now.
#[derive(Clone)]
pub(super) struct WriteGate {
    leader: Option<watch::Receiver<LeaderStatus>>,
    shutdown: CancellationToken,
}

impl WriteGate {
    fn allowed(&self) -> bool {
        !self.shutdown.is_cancelled() && self.leader.as_ref().is_none_or(|l| l.borrow().leading)
    }
}

pub(super) struct Controller {
    pub(super) config: RunConfig,
    pub(super) client: kube::Client,
    /// For a drain's evictions: no retries inside a request.
    pub(super) drain_client: kube::Client,
    /// Where commit statuses and review go (`None`: nowhere).
    pub(super) writer: Option<Arc<StatusWriter>>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) sync: watch::Sender<SyncState>,
    pub(super) shutdown: CancellationToken,
    /// Raised by the reflectors when planning could come out differently.
    pub(super) changed: Arc<Notify>,
    /// Wakes the poller (the webhook).
    pub(super) wake: Arc<Notify>,
    /// The pools of the last commit that rendered: a new commit renders only the pools
    /// whose files changed.
    pub(super) render_cache: Arc<std::sync::Mutex<crate::render::RenderCache>>,
}

/// The ConfigMap reflector of the namespace in use.
pub(super) struct ConfigMaps {
    namespace: String,
    store: ConfigMapStore,
    task: tokio::task::AbortHandle,
}

/// The loop's memory between events.
#[derive(Default)]
pub(super) struct LoopState {
    /// The commit the poller reported last.
    pub(super) fetched: Option<String>,
    /// The commit rendering was last attempted for.
    pub(super) rendered: Option<String>,
    /// The last commit that validated.
    pub(super) desired: Option<Arc<Desired>>,
    /// The newest commit, when it validates but nodes it would reach would refuse it:
    /// checked again at every reconcile ([`Controller::recheck_held`]).
    pub(super) held: Option<Arc<Desired>>,
    /// The fetched head a resume ([`super::resume`]) was last tried for.
    pub(super) resume_tried: Option<String>,
    /// When the next reconcile may start.
    next_run: Option<Instant>,
    /// When the last one started.
    last_start: Option<Instant>,
    /// Consecutive failed reconciles.
    failures: u32,
    /// Whether a reconcile could plan otherwise than the last one: something changed
    /// since (a commit, a node's labels or protocol annotations, a ConfigMap, the lease),
    /// the last one failed, or it wrote (its writes are not all seen yet). While it is
    /// false, a poll that finds no new commit costs nothing but the poll.
    dirty: bool,
    /// When the last reconcile completed, for the periodic full resync.
    last_done: Option<Instant>,
    /// By the clock ([`RunConfig::clock`]), when a pool's plan could change with time
    /// alone (a window opens or closes, a soak ends, a jittered node's turn comes).
    wake_at: Option<jiff::Timestamp>,
}

/// An idle loop still reconciles this often, events or not (a resync, as controllers
/// do): the only cost of being idle that grows with the fleet.
const IDLE_RESYNC: Duration = Duration::from_secs(600);

impl LoopState {
    /// Whether a poll without news should reconcile: something is dirty, or the last
    /// full resync is [`IDLE_RESYNC`] old.
    fn poll_needs_reconcile(&self) -> bool {
        self.dirty || self.last_done.is_none_or(|t| t.elapsed() >= IDLE_RESYNC)
    }

    /// Schedules a reconcile: now, or `min_interval` after the last one started if that
    /// is later; one scheduled earlier stands.
    fn trigger(&mut self, min_interval: Duration) {
        let earliest = self
            .last_start
            .map_or_else(Instant::now, |t| (t + min_interval).max(Instant::now()));
        self.next_run = Some(self.next_run.map_or(earliest, |n| n.min(earliest)));
    }
}

/// Sleeps until `at`; forever without one.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t.into()).await,
        None => std::future::pending().await,
    }
}

/// Sleeps until the clock reads `at`; forever without one.
async fn clock_reaches(clock: &dyn crate::clock::Clock, at: Option<jiff::Timestamp>) {
    match at {
        Some(t) => clock.sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// Whether the leader status changed (false: the elector is gone); never without
/// leader election.
async fn leader_changed(leader: Option<&mut watch::Receiver<LeaderStatus>>) -> bool {
    match leader {
        Some(rx) => rx.changed().await.is_ok(),
        None => std::future::pending().await,
    }
}

impl Controller {
    /// Changes the published state; `f` says whether it changed anything ([`set`]), so
    /// that watchers are woken only then, without a copy of the state to compare with
    /// (a copy of 1,000 pools' reports at every poll was most of an idle poll's CPU).
    pub(super) fn update(&self, f: impl FnOnce(&mut SyncState) -> bool) {
        self.sync.send_if_modified(f);
    }

    pub(super) async fn run(self) -> Result<(), RunError> {
        let mut tasks = JoinSet::new();
        let (nodes, node_driver) = observe::node_watch(
            self.client.clone(),
            self.metrics.clone(),
            self.changed.clone(),
        );
        tasks.spawn(node_driver);

        let elector_stop = CancellationToken::new();
        let (leader_rx, elector) = self.spawn_elector(&elector_stop);
        let gate = WriteGate {
            leader: leader_rx.clone(),
            shutdown: self.shutdown.clone(),
        };

        // Commit statuses: their own task, reading the state channel; stopped last, so
        // that it posts the final state.
        let reporter_stop = CancellationToken::new();
        let reporter = self.writer.clone().map(|writer| {
            let reporter = StatusReporter::new(writer, self.metrics.clone(), &self.config.status);
            tokio::spawn(reporter.run(self.sync.subscribe(), reporter_stop.clone()))
        });

        let result = if self.config.once {
            self.run_once(&nodes, &gate, &mut tasks).await
        } else {
            self.run_loop(&nodes, &gate, leader_rx, &mut tasks).await
        };

        tasks.shutdown().await;
        elector_stop.cancel();
        if let Some(e) = elector {
            let _ = e.await;
        }
        reporter_stop.cancel();
        if let Some(r) = reporter {
            let _ = r.await;
        }
        result
    }

    /// Leader election, when configured: its status channel and its task.
    fn spawn_elector(
        &self,
        stop: &CancellationToken,
    ) -> (
        Option<watch::Receiver<LeaderStatus>>,
        Option<JoinHandle<()>>,
    ) {
        let Some(lease) = &self.config.leader else {
            return (None, None);
        };
        let (tx, rx) = watch::channel(LeaderStatus::default());
        let e = LeaderElector::new(self.client.clone(), lease.clone());
        let metrics = self.metrics.clone();
        let stop = stop.clone();
        let task = tokio::spawn(async move { e.run(tx, &metrics, stop).await });
        (Some(rx), Some(task))
    }

    /// The poller in a task of its own: its events, and the pull-request heads of its
    /// last successful poll (for review).
    fn spawn_poller(
        &self,
        tasks: &mut JoinSet<()>,
    ) -> (
        mpsc::Receiver<PollEvent>,
        watch::Receiver<BTreeMap<String, String>>,
    ) {
        let (poll_tx, poll_rx) = mpsc::channel(1);
        let (heads_tx, heads_rx) = watch::channel(BTreeMap::new());
        let metrics = self.metrics.clone();
        let mut poller = Poller::new(
            self.config.git.clone(),
            self.config.interval,
            self.wake.clone(),
        )
        .with_backoff(self.config.poll_backoff)
        .with_observer(move |record| metrics.git_poll(record));
        tasks.spawn(async move {
            loop {
                let event = poller.next().await;
                if !matches!(event, PollEvent::Unreachable { .. }) {
                    heads_tx.send_if_modified(|heads| {
                        let changed = heads != poller.extra_refs();
                        if changed {
                            heads.clone_from(poller.extra_refs());
                        }
                        changed
                    });
                }
                if poll_tx.send(event).await.is_err() {
                    break;
                }
            }
        });
        (poll_rx, heads_rx)
    }

    /// Review of the pull-request `heads`, in a task of its own, when enabled.
    fn spawn_reviewer(
        &self,
        nodes: &NodeCache,
        heads: watch::Receiver<BTreeMap<String, String>>,
        tasks: &mut JoinSet<()>,
    ) {
        let Some(writer) = self.writer.clone().filter(|_| self.config.status.review) else {
            return;
        };
        let store = nodes.clone();
        let reviewer = Reviewer::new(
            ReviewConfig {
                cache_dir: self.config.git.cache_dir.clone(),
                repo_url: self.config.git.url.clone(),
                branch: self.config.git.branch.clone(),
                render: self.config.render.clone(),
                comment: self.config.status.comment,
                target_url: self.config.status.target_url.clone(),
                max_age: self.config.status.review_max_age,
            },
            writer,
            self.metrics.clone(),
            Box::new(move || store.lock().snapshot()),
            self.shutdown.child_token(),
        );
        tasks.spawn(reviewer.run(heads, self.sync.subscribe()));
    }

    /// Waits for a cache's first list (`ready`), or shutdown (false).
    async fn wait_ready(&self, ready: impl Future<Output = bool>, what: &str) -> bool {
        tokio::select! {
            () = self.shutdown.cancelled() => false,
            ok = ready => {
                if !ok {
                    tracing::error!(cache = what, "cache writer dropped before its first sync");
                }
                ok
            }
        }
    }

    /// The ConfigMap reflector for `namespace`, (re)started when the namespace changes.
    pub(super) async fn configmaps_for(
        &self,
        current: &mut Option<ConfigMaps>,
        namespace: &str,
        tasks: &mut JoinSet<()>,
    ) -> Option<ConfigMapStore> {
        if let Some(c) = current.as_ref().filter(|c| c.namespace == namespace) {
            return Some(c.store.clone());
        }
        if let Some(old) = current.take() {
            tracing::info!(from = %old.namespace, to = %namespace, "ConfigMap namespace changed");
            old.task.abort();
        }
        let (store, driver) = observe::configmap_reflector(
            self.client.clone(),
            namespace,
            self.metrics.clone(),
            self.changed.clone(),
        );
        let task = tasks.spawn(driver);
        *current = Some(ConfigMaps {
            namespace: namespace.to_string(),
            store: store.clone(),
            task,
        });
        self.wait_ready(
            async { store.wait_until_ready().await.is_ok() },
            "configmaps",
        )
        .await
        .then_some(store)
    }

    fn reconciler(&self, nodes: &NodeCache) -> Reconciler {
        Reconciler::new(
            self.client.clone(),
            self.drain_client.clone(),
            self.metrics.clone(),
            self.config.retry,
            self.config.write_concurrency,
            self.config.git.url.clone(),
            nodes.clone(),
        )
    }

    /// Runs one reconcile of `desired` and records the outcome: whether it was quiet
    /// (it wrote nothing: no node patched, no ConfigMap created or deleted).
    async fn reconcile_once(
        &self,
        reconciler: &mut Reconciler,
        desired: &Desired,
        store: &ConfigMapStore,
        gate: &WriteGate,
    ) -> Result<bool, ReconcileError> {
        let mut timer = self.metrics.reconcile_timer();
        let allowed = || gate.allowed();
        let now = self.config.clock.now();
        let result = reconciler.reconcile(desired, store, now, &allowed).await;
        match &result {
            Ok(outcome) => {
                timer.set_result(if outcome.wrote {
                    ReconcileResult::Ok
                } else {
                    ReconcileResult::Skipped
                });
                let wrote = outcome.wrote;
                self.update(|s| {
                    let mut changed = false;
                    if wrote {
                        changed |= set(
                            &mut s.applied,
                            Some(desired.applied(outcome.sources.clone())),
                        );
                        changed |= set(&mut s.nothing_applied, false);
                        changed |= set(&mut s.ready, true);
                    }
                    changed |= set(&mut s.last_error, None);
                    changed |= set(&mut s.pools, outcome.plan.pools.clone());
                    changed | set(&mut s.overlaps, outcome.plan.overlaps.clone())
                });
                if outcome.node_writes > 0
                    || !outcome.created.is_empty()
                    || !outcome.deleted.is_empty()
                {
                    tracing::debug!(
                        node_writes = outcome.node_writes,
                        created = outcome.created.len(),
                        deleted = outcome.deleted.len(),
                        "reconciled"
                    );
                }
            }
            Err(e) => {
                let error = error_chain(e);
                tracing::error!(commit = %desired.commit, %error, "reconcile failed; retrying with backoff");
                self.update(|s| set(&mut s.last_error, Some(error)));
            }
        }
        result.map(|o| {
            o.node_writes == 0 && o.created.is_empty() && o.deleted.is_empty() && !o.drain_changed
        })
    }

    async fn run_loop(
        &self,
        nodes: &NodeCache,
        gate: &WriteGate,
        mut leader_rx: Option<watch::Receiver<LeaderStatus>>,
        tasks: &mut JoinSet<()>,
    ) -> Result<(), RunError> {
        let (mut polls, heads) = self.spawn_poller(tasks);
        self.spawn_reviewer(nodes, heads, tasks);
        if !self.wait_ready(nodes.wait_until_ready(), "nodes").await {
            return Ok(());
        }
        tracing::info!(nodes = nodes.lock().len(), "node cache synced");

        let mut reconciler = self.reconciler(nodes);
        let mut configmaps: Option<ConfigMaps> = None;
        let mut st = LoopState::default();
        let min_interval = self.config.min_reconcile_interval;
        loop {
            let leader_changed = leader_changed(leader_rx.as_mut());
            let due = sleep_until(st.next_run);
            let time_passed = clock_reaches(self.config.clock.as_ref(), st.wake_at);
            tokio::select! {
                biased;
                () = self.shutdown.cancelled() => break,
                () = time_passed => {
                    st.wake_at = None;
                    st.dirty = true;
                    st.trigger(min_interval);
                }
                event = polls.recv() => {
                    let Some(event) = event else { break };
                    let news = !matches!(event, PollEvent::Unchanged);
                    self.on_poll_event(event, &mut st, &mut configmaps, tasks, nodes).await;
                    if news {
                        st.dirty = true;
                    }
                    if st.poll_needs_reconcile() {
                        st.trigger(min_interval);
                    } else {
                        self.metrics.reconcile_idle();
                    }
                }
                true = leader_changed => {
                    self.on_leader_change(leader_rx.as_ref());
                    st.dirty = true;
                    st.trigger(min_interval);
                }
                () = self.changed.notified() => {
                    st.dirty = true;
                    st.trigger(min_interval);
                }
                () = due => {
                    let stopping = !self
                        .reconcile_due(&mut reconciler, &mut st, &mut configmaps, gate, tasks, nodes)
                        .await;
                    if stopping {
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    /// Records this replica's new role. A follower is ready when it can follow the lease.
    fn on_leader_change(&self, leader: Option<&watch::Receiver<LeaderStatus>>) {
        let status = leader.map(|rx| rx.borrow().clone()).unwrap_or_default();
        let role = if status.leading {
            Role::Leader
        } else {
            Role::Follower
        };
        self.update(|s| {
            let changed = set(&mut s.role, role);
            changed | (!status.leading && set(&mut s.ready, status.lease_reachable))
        });
    }

    /// The scheduled reconcile of the desired state, if there is one yet; a failure
    /// schedules the next with backoff. False when shutting down.
    async fn reconcile_due(
        &self,
        reconciler: &mut Reconciler,
        st: &mut LoopState,
        configmaps: &mut Option<ConfigMaps>,
        gate: &WriteGate,
        tasks: &mut JoinSet<()>,
        nodes: &NodeCache,
    ) -> bool {
        st.next_run = None;
        self.recheck_held(st, nodes);
        let Some(desired) = st.desired.clone() else {
            return true;
        };
        let Some(store) = self
            .configmaps_for(configmaps, &desired.namespace, tasks)
            .await
        else {
            return false;
        };
        st.last_start = Some(Instant::now());
        // Changes from now on set it again (the notification is kept while this runs).
        st.dirty = false;
        match self
            .reconcile_once(reconciler, &desired, &store, gate)
            .await
        {
            Ok(quiet) => {
                st.wake_at = self
                    .sync
                    .borrow()
                    .pools
                    .iter()
                    .filter_map(|p| p.wake_at)
                    .min();
                st.failures = 0;
                st.last_done = Some(Instant::now());
                if !quiet || !reconciler.settled() || st.held.is_some() {
                    st.dirty = true;
                }
            }
            Err(_) => {
                st.dirty = true;
                st.failures = st.failures.saturating_add(1);
                let (first, max) = self.config.failure_backoff;
                let wait = first
                    .saturating_mul(1 << st.failures.saturating_sub(1).min(16))
                    .min(max);
                st.next_run = Some(Instant::now() + wait);
            }
        }
        true
    }

    async fn run_once(
        &self,
        nodes: &NodeCache,
        gate: &WriteGate,
        tasks: &mut JoinSet<()>,
    ) -> Result<(), RunError> {
        let metrics = self.metrics.clone();
        let mut poller = Poller::new(
            self.config.git.clone(),
            self.config.interval,
            self.wake.clone(),
        )
        .with_observer(move |record| metrics.git_poll(record));
        let commit = match poller.poll_now().await {
            PollEvent::NewCommit { id, .. } => id,
            PollEvent::Unchanged => match poller.last_good() {
                Some(id) => id.to_string(),
                None => return Ok(()),
            },
            PollEvent::Unreachable { error, .. } => {
                return Err(RunError::Git {
                    url: crate::publish::redact_url(&self.config.git.url),
                    branch: self.config.git.branch.clone(),
                    source: Box::new(error),
                });
            }
        };
        let mut st = LoopState {
            fetched: Some(commit.clone()),
            ..LoopState::default()
        };
        self.update(|s| set(&mut s.fetched, Some(commit.clone())));
        // The nodes first: the commit is checked against them before anything is applied.
        if !self.wait_ready(nodes.wait_until_ready(), "nodes").await {
            return Ok(());
        }
        self.render_fetched(&mut st, nodes).await;
        let Some(desired) = st.desired else {
            let signature = self.sync.borrow().rejected.as_ref().and_then(|r| {
                r.errors
                    .first()
                    .filter(|e| e.file == super::commits::SIGNATURE_SUBJECT)
                    .map(|e| e.message.clone())
            });
            if let Some(reason) = signature {
                return Err(RunError::SignatureRefused { commit, reason });
            }
            let count = self
                .sync
                .borrow()
                .rejected
                .as_ref()
                .map_or(0, |r| r.errors.len());
            if count == 0 {
                return Err(RunError::CommitUnreadable {
                    commit,
                    cache: self.config.git.cache_dir.clone(),
                });
            }
            if st.held.is_some() {
                return Err(RunError::RefusedByNodes { commit, count });
            }
            return Err(RunError::Invalid { commit, count });
        };
        let mut configmaps = None;
        let Some(store) = self
            .configmaps_for(&mut configmaps, &desired.namespace, tasks)
            .await
        else {
            return Ok(());
        };
        let mut reconciler = self.reconciler(nodes);
        self.reconcile_once(&mut reconciler, &desired, &store, gate)
            .await
            .map(|_| ())
            .map_err(|e| RunError::Reconcile(Box::new(e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poll_without_news_reconciles_only_when_dirty_or_the_resync_is_due() {
        let mut st = LoopState::default();
        assert!(st.poll_needs_reconcile(), "never reconciled yet");
        st.last_done = Some(Instant::now());
        assert!(!st.poll_needs_reconcile(), "idle: nothing changed since");
        st.dirty = true;
        assert!(st.poll_needs_reconcile(), "something changed");
        st.dirty = false;
        st.last_done = Instant::now().checked_sub(IDLE_RESYNC + Duration::from_secs(1));
        assert!(st.poll_needs_reconcile(), "the periodic resync is due");
    }
}
