//! The reconciler's Prometheus metrics: one [`Registry`] with the prefix
//! `kubelet_gitops_`, served as text on the admin port's `/metrics`.
//!
//! | metric | type | labels | meaning |
//! | --- | --- | --- | --- |
//! | `kubelet_gitops_pool_nodes` | gauge | `pool`, `state` | nodes of a pool by rollout state on the pool's target: `done`, `in_progress`, `waiting`, `failed` |
//! | `kubelet_gitops_pool_nodes_desired` | gauge | `pool` | nodes whose desired-config names the pool's target |
//! | `kubelet_gitops_pool_nodes_current` | gauge | `pool` | nodes that run the pool's target (Done on it) |
//! | `kubelet_gitops_pool_phase` | gauge | `pool`, `phase` | 1 for the pool's phase (`Empty`, `Progressing`, `Complete`, `Halted`, `Paused`) |
//! | `kubelet_gitops_pool_held` | gauge | `pool`, `reason` | 1 while the reconciler holds back a pool whose nodes wait, for `reason`: `window` (outside its maintenance windows), `soak` (between two waves), `manual_drain` (`drain: manual`: waiting for a person to drain the next nodes); 0 otherwise |
//! | `kubelet_gitops_overlapping_nodes` | gauge | | nodes two pools of the same priority select (none is written) |
//! | `kubelet_gitops_git_polls_total` | counter | `result` | polls of the branch: `new_commit`, `unchanged`, `error_retryable`, `error_fatal` |
//! | `kubelet_gitops_git_poll_duration_seconds` | histogram | | how long one fetch took |
//! | `kubelet_gitops_repo_valid` | gauge | | 1 when the newest fetched commit renders and validates (and no node would refuse it), 0 when it does not |
//! | `kubelet_gitops_repo_errors` | gauge | | problems found in the newest fetched commit |
//! | `kubelet_gitops_reconcile_duration_seconds` | histogram | | one reconcile: publish, plan, node writes, GC |
//! | `kubelet_gitops_reconciles_total` | counter | `result` | reconciles by outcome: `ok`, `error`, `skipped` (follower); `idle`: a poll with no new commit while nothing changed, where no reconcile ran |
//! | `kubelet_gitops_api_errors_total` | counter | `verb`, `resource`, `code` | failed Kubernetes API requests (`code` 0: no HTTP answer) |
//! | `kubelet_gitops_node_writes_total` | counter | | node annotation patches sent and accepted |
//! | `kubelet_gitops_configmaps_created_total` | counter | | ConfigMaps created |
//! | `kubelet_gitops_configmaps_deleted_total` | counter | | ConfigMaps garbage-collected |
//! | `kubelet_gitops_leader` | gauge | | 1 while this replica holds the lease (always 1 without `--leader-elect`) |
//! | `kubelet_gitops_status_posts_total` | counter | `result` | commit statuses sent: `ok` (the forge took it), `queued` (forge down or rate limited: in the outbox), `rejected` (refused for good); unchanged ones are not sent |
//! | `kubelet_gitops_status_outbox` | gauge | | statuses waiting in the outbox for the forge to come back |
//! | `kubelet_gitops_status_forge_refusals_total` | counter | `reason` | forge answers that hold every request to the forge: `unauthorized` (the token was refused, 401), `rate_limited` (429, GitHub's rate-limit 403) |
//! | `kubelet_gitops_commit_signatures_total` | counter | `result` | signatures of fetched branch heads checked (with `--require-signed-commits`): `verified`, `unsigned`, `unknown_key`, `bad_signature` (does not verify, or malformed), `key_not_valid` (outside its valid-after/valid-before window, not for namespace git, revoked), `untrusted_format` (a format no trust file covers) |
//! | `kubelet_gitops_reviews_total` | counter | `result` | pull-request heads reviewed: `planned`, `invalid` (the head does not validate), `skipped` (older than `--review-max-age`), `failed` (the head could not be read) |
//!
//! Pool series are replaced as a whole each reconcile: a pool removed from the repository
//! stops being exported. The counters with a fixed set of label values (`git_polls`,
//! `reconciles`, `status_posts`, `status_forge_refusals`, `reviews`) are exported at 0
//! for each value from the start, so `increase()` counts their first event.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Instant;

use prometheus_client::encoding::{EncodeLabelSet, text};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::git::{PollRecord, PollResult};
use crate::rollout::{Hold, PoolPhase, PoolReport};

/// The prefix of every metric name.
pub const PREFIX: &str = "kubelet_gitops";

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabels {
    pool: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolStateLabels {
    pool: String,
    state: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolPhaseLabels {
    pool: String,
    phase: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolHeldLabels {
    pool: String,
    reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ApiErrorLabels {
    verb: &'static str,
    resource: &'static str,
    code: u16,
}

/// What happened to one commit status sent to the forge, for `status_posts_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusPostResult {
    /// The forge took it.
    Ok,
    /// Not delivered yet: it waits in the outbox.
    Queued,
    /// Refused for good (bad token, unknown repository, invalid field).
    Rejected,
}

impl StatusPostResult {
    fn as_str(self) -> &'static str {
        match self {
            StatusPostResult::Ok => "ok",
            StatusPostResult::Queued => "queued",
            StatusPostResult::Rejected => "rejected",
        }
    }
}

/// Why a forge answer held every request to the forge, for `status_forge_refusals_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForgeRefusal {
    /// The forge refused the token (401).
    Unauthorized,
    /// A rate limit (429, GitHub's rate-limit 403).
    RateLimited,
}

impl ForgeRefusal {
    fn as_str(self) -> &'static str {
        match self {
            ForgeRefusal::Unauthorized => "unauthorized",
            ForgeRefusal::RateLimited => "rate_limited",
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

/// How the review of one pull-request head ended, for `reviews_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewResult {
    /// Planned; the plan status was posted.
    Planned,
    /// The head does not validate; an `error` status was posted.
    Invalid,
    /// Older than the review's maximum age: left alone.
    Skipped,
    /// The head could not be read from the git cache.
    Failed,
}

impl ReviewResult {
    fn as_str(self) -> &'static str {
        match self {
            ReviewResult::Planned => "planned",
            ReviewResult::Invalid => "invalid",
            ReviewResult::Skipped => "skipped",
            ReviewResult::Failed => "failed",
        }
    }
}

/// The outcome of one reconcile, for `reconciles_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReconcileResult {
    Ok,
    Error,
    /// Not the leader: nothing was written.
    Skipped,
}

impl ReconcileResult {
    fn as_str(self) -> &'static str {
        match self {
            ReconcileResult::Ok => "ok",
            ReconcileResult::Error => "error",
            ReconcileResult::Skipped => "skipped",
        }
    }
}

const POOL_STATES: [&str; 4] = ["done", "in_progress", "waiting", "failed"];
const HOLD_REASONS: [&str; 3] = ["window", "soak", "manual_drain"];

/// The `reason` label of a pool held by `hold`.
fn hold_reason(hold: &Hold) -> &'static str {
    match hold {
        Hold::Window { .. } => "window",
        Hold::Soak { .. } => "soak",
        Hold::Manual { .. } => "manual_drain",
    }
}
const PHASES: [PoolPhase; 5] = [
    PoolPhase::Empty,
    PoolPhase::Progressing,
    PoolPhase::Complete,
    PoolPhase::Halted,
    PoolPhase::Paused,
];

/// Every metric of the reconciler, and the registry that exports them.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pool_nodes: Family<PoolStateLabels, Gauge>,
    pool_desired: Family<PoolLabels, Gauge>,
    pool_current: Family<PoolLabels, Gauge>,
    pool_phase: Family<PoolPhaseLabels, Gauge>,
    pool_held: Family<PoolHeldLabels, Gauge>,
    overlapping_nodes: Gauge,
    git_polls: Family<ResultLabels, Counter>,
    git_poll_duration: Histogram,
    repo_valid: Gauge,
    repo_errors: Gauge,
    reconcile_duration: Histogram,
    reconciles: Family<ResultLabels, Counter>,
    api_errors: Family<ApiErrorLabels, Counter>,
    node_writes: Counter,
    configmaps_created: Counter,
    configmaps_deleted: Counter,
    leader: Gauge,
    status_posts: Family<ResultLabels, Counter>,
    status_outbox: Gauge,
    forge_refusals: Family<ReasonLabels, Counter>,
    reviews: Family<ResultLabels, Counter>,
    commit_signatures: Family<ResultLabels, Counter>,
    /// Pools exported by the last [`Metrics::set_pools`], to retire removed ones.
    exported_pools: Mutex<BTreeSet<String>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// A fresh registry with every metric registered.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix(PREFIX);
        let pool_nodes = Family::<PoolStateLabels, Gauge>::default();
        registry.register(
            "pool_nodes",
            "Nodes of a pool by rollout state on the pool's target config",
            pool_nodes.clone(),
        );
        let pool_desired = Family::<PoolLabels, Gauge>::default();
        registry.register(
            "pool_nodes_desired",
            "Nodes whose desired-config names the pool's target config",
            pool_desired.clone(),
        );
        let pool_current = Family::<PoolLabels, Gauge>::default();
        registry.register(
            "pool_nodes_current",
            "Nodes that run the pool's target config",
            pool_current.clone(),
        );
        let pool_phase = Family::<PoolPhaseLabels, Gauge>::default();
        registry.register(
            "pool_phase",
            "1 for the phase the pool's rollout is in",
            pool_phase.clone(),
        );
        let pool_held = Family::<PoolHeldLabels, Gauge>::default();
        registry.register(
            "pool_held",
            "1 while the reconciler holds back the pool's waiting nodes, by reason: window, soak, manual_drain",
            pool_held.clone(),
        );
        let overlapping_nodes = Gauge::default();
        registry.register(
            "overlapping_nodes",
            "Nodes selected by two pools of the same priority (left untouched)",
            overlapping_nodes.clone(),
        );
        let git_polls = Family::<ResultLabels, Counter>::default();
        registry.register(
            "git_polls",
            "Polls of the config branch by result",
            git_polls.clone(),
        );
        let git_poll_duration = Histogram::new(exponential_buckets(0.005, 2.0, 14));
        registry.register_with_unit(
            "git_poll_duration",
            "Time one fetch of the config branch took",
            Unit::Seconds,
            git_poll_duration.clone(),
        );
        let repo_valid = Gauge::default();
        registry.register(
            "repo_valid",
            "1 when the newest fetched commit renders and validates (and no node would refuse it), 0 when it does not",
            repo_valid.clone(),
        );
        let repo_errors = Gauge::default();
        registry.register(
            "repo_errors",
            "Problems found in the newest fetched commit",
            repo_errors.clone(),
        );
        let reconcile_duration = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        registry.register_with_unit(
            "reconcile_duration",
            "Time one reconcile (publish, plan, node writes, garbage collection) took",
            Unit::Seconds,
            reconcile_duration.clone(),
        );
        let reconciles = Family::<ResultLabels, Counter>::default();
        registry.register("reconciles", "Reconciles by result", reconciles.clone());
        let api_errors = Family::<ApiErrorLabels, Counter>::default();
        registry.register(
            "api_errors",
            "Failed Kubernetes API requests by verb, resource and HTTP code (0: no answer)",
            api_errors.clone(),
        );
        let node_writes = Counter::default();
        registry.register(
            "node_writes",
            "Node annotation patches accepted by the API server",
            node_writes.clone(),
        );
        let configmaps_created = Counter::default();
        registry.register(
            "configmaps_created",
            "ConfigMaps created",
            configmaps_created.clone(),
        );
        let configmaps_deleted = Counter::default();
        registry.register(
            "configmaps_deleted",
            "ConfigMaps deleted by garbage collection",
            configmaps_deleted.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica holds the leader lease (always 1 without leader election)",
            leader.clone(),
        );
        let status_posts = Family::<ResultLabels, Counter>::default();
        registry.register(
            "status_posts",
            "Commit statuses sent to the forge by result (ok, queued, rejected)",
            status_posts.clone(),
        );
        let status_outbox = Gauge::default();
        registry.register(
            "status_outbox",
            "Commit statuses waiting in the outbox for the forge",
            status_outbox.clone(),
        );
        let forge_refusals = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "status_forge_refusals",
            "Forge answers that hold every request to the forge by reason (unauthorized, rate_limited)",
            forge_refusals.clone(),
        );
        let reviews = Family::<ResultLabels, Counter>::default();
        registry.register(
            "reviews",
            "Pull-request heads reviewed by result (planned, invalid, skipped, failed)",
            reviews.clone(),
        );
        let commit_signatures = Family::<ResultLabels, Counter>::default();
        registry.register(
            "commit_signatures",
            "Signatures of fetched branch heads checked, by result (verified, unsigned, unknown_key, bad_signature, key_not_valid, untrusted_format)",
            commit_signatures.clone(),
        );
        // Counters whose label values are a fixed set start at 0 with each value: a
        // series that first appears at 1 shows no `increase()` (an alert on one rejected
        // status would never fire), and dashboards find every series from the start.
        // `api_errors` (verb, resource and code are open-ended) appears at its first
        // error; `commit_signatures` only with `--require-signed-commits`.
        let results = |family: &Family<ResultLabels, Counter>, results: &[&'static str]| {
            for &result in results {
                let _ = family.get_or_create(&ResultLabels { result });
            }
        };
        results(
            &git_polls,
            &[
                PollResult::NewCommit,
                PollResult::Unchanged,
                PollResult::Retryable,
                PollResult::Fatal,
            ]
            .map(|r| r.as_str()),
        );
        results(
            &reconciles,
            &[
                ReconcileResult::Ok.as_str(),
                ReconcileResult::Error.as_str(),
                ReconcileResult::Skipped.as_str(),
                "idle",
            ],
        );
        results(
            &status_posts,
            &[
                StatusPostResult::Ok,
                StatusPostResult::Queued,
                StatusPostResult::Rejected,
            ]
            .map(StatusPostResult::as_str),
        );
        results(
            &reviews,
            &[
                ReviewResult::Planned,
                ReviewResult::Invalid,
                ReviewResult::Skipped,
                ReviewResult::Failed,
            ]
            .map(ReviewResult::as_str),
        );
        for reason in [ForgeRefusal::Unauthorized, ForgeRefusal::RateLimited] {
            let _ = forge_refusals.get_or_create(&ReasonLabels {
                reason: reason.as_str(),
            });
        }
        Metrics {
            registry,
            pool_nodes,
            pool_desired,
            pool_current,
            pool_phase,
            pool_held,
            overlapping_nodes,
            git_polls,
            git_poll_duration,
            repo_valid,
            repo_errors,
            reconcile_duration,
            reconciles,
            api_errors,
            node_writes,
            configmaps_created,
            configmaps_deleted,
            leader,
            status_posts,
            status_outbox,
            forge_refusals,
            reviews,
            commit_signatures,
            exported_pools: Mutex::new(BTreeSet::new()),
        }
    }

    /// The metrics in the Prometheus text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = text::encode(&mut out, &self.registry);
        out
    }

    /// Records one poll of the branch: its result and how long its fetch took.
    pub fn git_poll(&self, record: &PollRecord) {
        self.git_polls
            .get_or_create(&ResultLabels {
                result: record.result.as_str(),
            })
            .inc();
        self.git_poll_duration.observe(record.latency.as_secs_f64());
    }

    /// Records whether the newest fetched commit validates, and how many problems it has.
    pub fn repo_validity(&self, errors: usize) {
        self.repo_valid.set(i64::from(errors == 0));
        self.repo_errors
            .set(i64::try_from(errors).unwrap_or(i64::MAX));
    }

    /// Starts timing a reconcile; the time is recorded when the guard drops, with the
    /// result set on it (default [`ReconcileResult::Error`], so an early return counts as
    /// a failure).
    pub fn reconcile_timer(&self) -> ReconcileTimer<'_> {
        ReconcileTimer {
            metrics: self,
            start: Instant::now(),
            result: ReconcileResult::Error,
        }
    }

    /// Counts a poll that found no new commit while nothing had changed since the last
    /// reconcile: no reconcile ran (`reconciles_total{result="idle"}`).
    pub fn reconcile_idle(&self) {
        self.reconciles
            .get_or_create(&ResultLabels { result: "idle" })
            .inc();
    }

    /// Counts a failed API request.
    pub fn api_error(&self, verb: &'static str, resource: &'static str, code: u16) {
        self.api_errors
            .get_or_create(&ApiErrorLabels {
                verb,
                resource,
                code,
            })
            .inc();
    }

    /// Counts an accepted node patch.
    pub fn node_written(&self) {
        self.node_writes.inc();
    }

    /// Counts a created ConfigMap.
    pub fn configmap_created(&self) {
        self.configmaps_created.inc();
    }

    /// Counts a deleted ConfigMap.
    pub fn configmap_deleted(&self) {
        self.configmaps_deleted.inc();
    }

    /// Sets whether this replica leads.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Counts a commit status sent to the forge.
    pub fn status_posted(&self, result: StatusPostResult) {
        self.status_posts
            .get_or_create(&ResultLabels {
                result: result.as_str(),
            })
            .inc();
    }

    /// Sets how many statuses wait in the outbox.
    pub fn set_status_outbox(&self, queued: usize) {
        self.status_outbox.set(count(queued));
    }

    /// Counts a forge answer that holds every request to the forge.
    pub fn forge_refused(&self, reason: ForgeRefusal) {
        self.forge_refusals
            .get_or_create(&ReasonLabels {
                reason: reason.as_str(),
            })
            .inc();
    }

    /// Counts a checked commit signature: `verified`, or the refusal's kind
    /// ([`SignatureRefusal::kind`](crate::git::signature::SignatureRefusal::kind)).
    pub fn commit_signature(&self, result: &'static str) {
        self.commit_signatures
            .get_or_create(&ResultLabels { result })
            .inc();
    }

    /// Counts a reviewed pull-request head.
    pub fn reviewed(&self, result: ReviewResult) {
        self.reviews
            .get_or_create(&ResultLabels {
                result: result.as_str(),
            })
            .inc();
    }

    /// Replaces every pool series with `reports`, and the overlap count.
    pub fn set_pools(&self, reports: &[PoolReport], overlapping_nodes: usize) {
        let mut exported = self
            .exported_pools
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let now: BTreeSet<String> = reports.iter().map(|r| r.pool.clone()).collect();
        for gone in exported.difference(&now) {
            self.remove_pool(gone);
        }
        for r in reports {
            let desired = r.in_progress + r.done + r.failed.len();
            let counts = [r.done, r.in_progress, r.waiting, r.failed.len()];
            for (state, n) in POOL_STATES.into_iter().zip(counts) {
                self.pool_nodes
                    .get_or_create(&PoolStateLabels {
                        pool: r.pool.clone(),
                        state,
                    })
                    .set(count(n));
            }
            let pool = PoolLabels {
                pool: r.pool.clone(),
            };
            self.pool_desired.get_or_create(&pool).set(count(desired));
            self.pool_current.get_or_create(&pool).set(count(r.done));
            for phase in PHASES {
                self.pool_phase
                    .get_or_create(&PoolPhaseLabels {
                        pool: r.pool.clone(),
                        phase: phase.as_str(),
                    })
                    .set(i64::from(phase == r.phase));
            }
            let held = r.hold.as_ref().map(hold_reason);
            for reason in HOLD_REASONS {
                self.pool_held
                    .get_or_create(&PoolHeldLabels {
                        pool: r.pool.clone(),
                        reason,
                    })
                    .set(i64::from(held == Some(reason)));
            }
        }
        self.overlapping_nodes.set(count(overlapping_nodes));
        *exported = now;
    }

    fn remove_pool(&self, pool: &str) {
        for state in POOL_STATES {
            self.pool_nodes.remove(&PoolStateLabels {
                pool: pool.to_string(),
                state,
            });
        }
        let labels = PoolLabels {
            pool: pool.to_string(),
        };
        self.pool_desired.remove(&labels);
        self.pool_current.remove(&labels);
        for phase in PHASES {
            self.pool_phase.remove(&PoolPhaseLabels {
                pool: pool.to_string(),
                phase: phase.as_str(),
            });
        }
        for reason in HOLD_REASONS {
            self.pool_held.remove(&PoolHeldLabels {
                pool: pool.to_string(),
                reason,
            });
        }
    }
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Times one reconcile (controller-rs's drop guard): records the duration and the result
/// when dropped.
#[derive(Debug)]
pub struct ReconcileTimer<'a> {
    metrics: &'a Metrics,
    start: Instant,
    result: ReconcileResult,
}

impl ReconcileTimer<'_> {
    /// Sets the result recorded on drop.
    pub fn set_result(&mut self, result: ReconcileResult) {
        self.result = result;
    }
}

impl Drop for ReconcileTimer<'_> {
    fn drop(&mut self) {
        self.metrics
            .reconcile_duration
            .observe(self.start.elapsed().as_secs_f64());
        self.metrics
            .reconciles
            .get_or_create(&ResultLabels {
                result: self.result.as_str(),
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubelet_gitops_core::protocol::ConfigRef;
    use std::time::Duration;

    fn report(pool: &str, done: usize, waiting: usize, phase: PoolPhase) -> PoolReport {
        PoolReport {
            nodes: done + waiting,
            done,
            waiting,
            phase,
            max_unavailable: 1,
            ..PoolReport::new(
                pool,
                ConfigRef::configmap("kubelet-gitops", format!("kubelet-{pool}-abc")),
            )
        }
    }

    #[test]
    fn exports_prefixed_series_and_retires_removed_pools() {
        let m = Metrics::new();
        m.set_pools(
            &[
                report("gpu", 2, 1, PoolPhase::Progressing),
                report("cpu", 3, 0, PoolPhase::Complete),
            ],
            1,
        );
        m.git_poll(&PollRecord {
            latency: Duration::from_millis(3),
            result: crate::git::PollResult::Unchanged,
            received_bytes: 0,
        });
        m.api_error("patch", "nodes", 500);
        m.status_posted(StatusPostResult::Ok);
        m.status_posted(StatusPostResult::Queued);
        m.set_status_outbox(2);
        m.forge_refused(ForgeRefusal::Unauthorized);
        m.reviewed(ReviewResult::Planned);
        {
            let mut t = m.reconcile_timer();
            t.set_result(ReconcileResult::Ok);
        }
        let _failed = m.reconcile_timer();
        drop(_failed);
        let text = m.encode();
        assert!(
            text.contains("kubelet_gitops_pool_nodes{pool=\"gpu\",state=\"done\"} 2"),
            "{text}"
        );
        assert!(text.contains("kubelet_gitops_pool_nodes_current{pool=\"cpu\"} 3"));
        assert!(text.contains("kubelet_gitops_pool_nodes_desired{pool=\"gpu\"} 2"));
        assert!(text.contains("kubelet_gitops_pool_phase{pool=\"cpu\",phase=\"Complete\"} 1"));
        assert!(text.contains("kubelet_gitops_pool_phase{pool=\"cpu\",phase=\"Halted\"} 0"));
        assert!(text.contains("kubelet_gitops_overlapping_nodes 1"));
        assert!(text.contains("kubelet_gitops_git_polls_total{result=\"unchanged\"} 1"));
        assert!(text.contains("kubelet_gitops_git_poll_duration_seconds_count 1"));
        assert!(
            text.contains(
                "kubelet_gitops_api_errors_total{verb=\"patch\",resource=\"nodes\",code=\"500\"} 1"
            ),
            "{text}"
        );
        assert!(text.contains("kubelet_gitops_reconciles_total{result=\"ok\"} 1"));
        assert!(text.contains("kubelet_gitops_status_posts_total{result=\"ok\"} 1"));
        assert!(text.contains("kubelet_gitops_status_posts_total{result=\"queued\"} 1"));
        assert!(text.contains("kubelet_gitops_status_outbox 2"));
        assert!(
            text.contains("kubelet_gitops_status_forge_refusals_total{reason=\"unauthorized\"} 1")
        );
        assert!(text.contains("kubelet_gitops_reviews_total{result=\"planned\"} 1"));
        // Fixed label sets start at 0.
        assert!(text.contains("kubelet_gitops_reviews_total{result=\"failed\"} 0"));
        assert!(text.contains("kubelet_gitops_git_polls_total{result=\"error_fatal\"} 0"));
        assert!(text.contains("kubelet_gitops_status_posts_total{result=\"rejected\"} 0"));
        assert!(
            text.contains("kubelet_gitops_status_forge_refusals_total{reason=\"rate_limited\"} 0")
        );
        assert!(text.contains("kubelet_gitops_reconciles_total{result=\"idle\"} 0"));
        assert!(text.contains("kubelet_gitops_reconciles_total{result=\"error\"} 1"));
        assert!(text.contains("kubelet_gitops_reconcile_duration_seconds_count 2"));

        m.set_pools(&[report("cpu", 3, 0, PoolPhase::Complete)], 0);
        let text = m.encode();
        assert!(!text.contains("pool=\"gpu\""), "{text}");
        assert!(text.contains("pool=\"cpu\""));
    }

    #[test]
    fn a_held_pool_says_why_and_a_pool_that_moves_on_says_nothing() {
        let m = Metrics::new();
        let mut gpu = report("gpu", 1, 2, PoolPhase::Progressing);
        gpu.hold = Some(Hold::Manual {
            nodes: vec!["gpu-2".into()],
        });
        m.set_pools(&[gpu.clone(), report("cpu", 3, 0, PoolPhase::Complete)], 0);
        let text = m.encode();
        for line in [
            "kubelet_gitops_pool_held{pool=\"gpu\",reason=\"manual_drain\"} 1",
            "kubelet_gitops_pool_held{pool=\"gpu\",reason=\"window\"} 0",
            "kubelet_gitops_pool_held{pool=\"gpu\",reason=\"soak\"} 0",
            "kubelet_gitops_pool_held{pool=\"cpu\",reason=\"manual_drain\"} 0",
        ] {
            assert!(text.contains(line), "{line}\n{text}");
        }
        gpu.hold = Some(Hold::Window { next: None });
        m.set_pools(std::slice::from_ref(&gpu), 0);
        let text = m.encode();
        assert!(text.contains("kubelet_gitops_pool_held{pool=\"gpu\",reason=\"window\"} 1"));
        assert!(text.contains("kubelet_gitops_pool_held{pool=\"gpu\",reason=\"manual_drain\"} 0"));
        assert!(!text.contains("pool_held{pool=\"cpu\""), "retired: {text}");
        gpu.hold = None;
        m.set_pools(std::slice::from_ref(&gpu), 0);
        assert!(
            !m.encode()
                .contains("pool_held{pool=\"gpu\",reason=\"window\"} 1")
        );
    }
}
