//! One reconcile: observe (the caches), plan (pure: `rollout::plan_rollout`,
//! `gc::plan_gc`), apply (create ConfigMaps, patch Nodes, delete ConfigMaps).
//!
//! Order matters for safety:
//! 1. every pool's ConfigMap is published before any node is pointed at one; if one
//!    cannot be published, no node is written this round (a pool missing from the plan
//!    would look like "left every pool" and unassign its nodes);
//! 2. node writes go out only while this replica may write (checked before each one);
//! 3. garbage collection runs last, and only after every node write of the round went
//!    through, against the nodes as they are after those writes.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Api, Patch, PatchParams};
use kubelet_gitops_core::disruption::{Class, classify};
use kubelet_gitops_core::protocol::{CHANGE_CLASS, ConfigRef, SOURCE_COMMIT};

use super::observe::{ConfigMapStore, NodeCache, PendingWrites, published_configmap};
use crate::api::{Call, RetryPolicy, retrying};
use crate::gc::plan_gc;
use crate::git::signature::Signer;
use crate::metrics::Metrics;
use crate::model::Overlap;
use crate::publish::{self, FIELD_MANAGER, PublishError, Published, SourceInfo};
use crate::render::RenderedRepo;
use crate::rollout::{
    DrainObservations, NodeAction, NodeChange, PoolPhase, PoolReport, PoolTarget, RolloutPlan,
};
use crate::state::AppliedCommit;

/// A commit that rendered and validated: what the cluster should converge to.
#[derive(Debug, Clone)]
pub(crate) struct Desired {
    /// The full commit id.
    pub commit: String,
    /// Every pool's rendered config.
    pub rendered: RenderedRepo,
    /// Where the ConfigMaps go (the command line's override, else the settings').
    pub namespace: String,
    /// Who signed the commit, when signed commits are required.
    pub signer: Option<Signer>,
    /// Pool to the disruption class of the change its nodes go through, where known
    /// ([`change_classes`]); a pool missing is unknown (maintenance windows take it as
    /// `drain`).
    pub classes: BTreeMap<String, Class>,
}

/// The disruption class of each pool's change from `previous` (the commit in force
/// before) to `next`: the class of the effective diff between the two configs, by
/// `next`'s classes for the pool. A pool whose config is unchanged keeps the class
/// `previous` knew (its rollout may still be under way); a pool new to `next`, or any
/// pool without a `previous` (the first commit after a start), is unknown.
pub(crate) fn change_classes(
    previous: Option<&Desired>,
    next: &RenderedRepo,
) -> BTreeMap<String, Class> {
    let Some(previous) = previous else {
        return BTreeMap::new();
    };
    let mut out = BTreeMap::new();
    for pool in &next.pools {
        let name = &pool.spec.name;
        let Some(old) = previous
            .rendered
            .pools
            .iter()
            .find(|p| &p.spec.name == name)
        else {
            continue;
        };
        if old.configmap_name == pool.configmap_name {
            if let Some(c) = previous.classes.get(name) {
                out.insert(name.clone(), *c);
            }
            continue;
        }
        let diff = crate::plan::effective_diff(&old.config, &pool.config);
        let class = classify(diff.iter().map(|c| c.field.as_str()), &pool.disruption).class;
        out.insert(name.clone(), class);
    }
    out
}

impl Desired {
    /// Pool name to ConfigMap name.
    pub(crate) fn configmaps(&self) -> BTreeMap<String, String> {
        self.rendered
            .pools
            .iter()
            .map(|p| (p.spec.name.clone(), p.configmap_name.clone()))
            .collect()
    }

    /// What `/readyz` and the commit statuses say is applied; `sources` names the
    /// commit that produced each pool's ConfigMap ([`Outcome::sources`]).
    pub(crate) fn applied(&self, sources: BTreeMap<String, String>) -> AppliedCommit {
        AppliedCommit {
            commit: self.commit.clone(),
            namespace: self.namespace.clone(),
            configmaps: self.configmaps(),
            sources,
        }
    }
}

/// A reconcile that did not complete; the next one retries.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// A ConfigMap could not be published: no node was written.
    #[error("publishing the ConfigMaps of commit {commit} failed; no node was changed")]
    Publish {
        commit: String,
        #[source]
        source: PublishError,
    },
    /// Some node writes failed after their retries.
    #[error("{failed} of {total} node writes failed (first: node {node})")]
    NodeWrites {
        failed: usize,
        total: usize,
        node: String,
        #[source]
        source: kube::Error,
    },
}

/// What one reconcile did.
#[derive(Debug, Clone, Default)]
pub(crate) struct Outcome {
    /// The plan (reports and overlaps included).
    pub plan: RolloutPlan,
    /// Node patches accepted.
    pub node_writes: usize,
    /// ConfigMaps created.
    pub created: Vec<String>,
    /// ConfigMaps deleted.
    pub deleted: Vec<String>,
    /// Whether writes were allowed (false: a follower only planned).
    pub wrote: bool,
    /// Whether this round's drain work saw something new (a pod gone, a budget's
    /// answer): the next round plans again at once.
    pub drain_changed: bool,
    /// Pool to the commit that produced its ConfigMap, where known: the ConfigMap's
    /// source-commit annotation as the cache shows it, or this commit for a ConfigMap
    /// this replica created and the cache does not show yet.
    pub sources: BTreeMap<String, String>,
}

/// The effects side of the loop: owns the caches' overlay of its own writes.
pub(crate) struct Reconciler {
    client: kube::Client,
    /// For evictions: without kube's retries ([`super::client::drain_client`]).
    drain_client: kube::Client,
    metrics: Arc<Metrics>,
    retry: RetryPolicy,
    /// Node writes in flight at once.
    concurrency: usize,
    /// The repository URL, for the ConfigMaps' source annotation.
    repo_url: String,
    /// The fleet (nodes, pools, last plans, pending node writes), fed by the node watch.
    nodes: NodeCache,
    pending: PendingWrites,
    /// The namespace the pending ConfigMap writes were made in.
    pending_namespace: String,
    /// The overlaps logged last, to log each one once (until it goes away).
    logged_overlaps: HashSet<String>,
    /// Each pool's phase and target at the last round, to log transitions once.
    phases: BTreeMap<String, (PoolPhase, ConfigRef)>,
    /// ConfigMaps this replica created, to the commit it created them for, until the
    /// cache shows their annotations (only the desired pools' names are kept).
    created_for: HashMap<String, String>,
    /// What the last round's drain work saw of each node it worked on (only those).
    drain_seen: DrainObservations,
    /// The rollout record last written (namespace, record), to write only changes.
    record: Option<(String, crate::record::RolloutRecord)>,
}

impl Reconciler {
    /// Whether none of this replica's writes waits to be seen by the watches: then a
    /// reconcile over unchanged caches plans what the last one planned.
    pub(crate) fn settled(&self) -> bool {
        self.pending.is_empty() && self.nodes.lock().settled()
    }

    pub(crate) fn new(
        client: kube::Client,
        drain_client: kube::Client,
        metrics: Arc<Metrics>,
        retry: RetryPolicy,
        concurrency: usize,
        repo_url: String,
        nodes: NodeCache,
    ) -> Reconciler {
        Reconciler {
            client,
            drain_client,
            metrics,
            retry,
            concurrency: concurrency.max(1),
            repo_url,
            nodes,
            pending: PendingWrites::default(),
            pending_namespace: String::new(),
            logged_overlaps: HashSet::new(),
            phases: BTreeMap::new(),
            created_for: HashMap::new(),
            drain_seen: DrainObservations::new(),
            record: None,
        }
    }

    /// Publishes, plans and applies `desired` once. `may_write` is asked before every
    /// write; when it says no, the round only plans (a follower keeps its reports fresh).
    #[tracing::instrument(skip_all, fields(commit = %desired.commit, namespace = %desired.namespace))]
    pub(crate) async fn reconcile(
        &mut self,
        desired: &Desired,
        configmaps: &ConfigMapStore,
        now: Timestamp,
        may_write: &(dyn Fn() -> bool + Sync),
    ) -> Result<Outcome, ReconcileError> {
        let started = Instant::now();
        let ns = desired.namespace.as_str();
        let cm_api: Api<ConfigMap> = Api::namespaced(self.client.clone(), ns);
        let mut outcome = Outcome {
            wrote: may_write(),
            ..Outcome::default()
        };
        if self.pending_namespace != ns {
            // ConfigMaps created elsewhere say nothing about this namespace.
            self.pending.clear();
            self.pending_namespace = ns.to_string();
        }

        // Observe the published ConfigMaps.
        let snapshot = configmaps.state();
        let listed: Vec<_> = snapshot
            .iter()
            .filter_map(|m| published_configmap(m))
            .collect();
        let pool_of_name: BTreeMap<String, String> = desired
            .rendered
            .pools
            .iter()
            .map(|p| (p.configmap_name.clone(), p.spec.name.clone()))
            .collect();
        let mut published = self
            .pending
            .configmaps(&listed, |n| pool_of_name.get(n).cloned());

        // Publish what is missing: all pools, or no node write this round.
        for pool in &desired.rendered.pools {
            let name = &pool.configmap_name;
            if published.iter().any(|c| &c.name == name) {
                continue;
            }
            if !may_write() {
                continue;
            }
            let cm = publish::configmap(
                ns,
                pool,
                &SourceInfo {
                    repo_url: &self.repo_url,
                    commit: &desired.commit,
                    signing_key: desired.signer.as_ref().map(|s| s.fingerprint.as_str()),
                    change_class: desired.classes.get(&pool.spec.name).copied(),
                },
            );
            let call = Call {
                verb: "create",
                resource: "configmaps",
                name,
            };
            let result = retrying(call, &self.retry, &self.metrics, || async {
                match publish::create_if_absent(&cm_api, &cm).await {
                    Ok(p) => Ok(Ok(p)),
                    Err(e @ PublishError::NamespaceMissing { .. }) => Ok(Err(e)),
                    Err(e) => Err(into_kube(e)),
                }
            })
            .await;
            let created = match result {
                Ok(Ok(Published::Created { created })) => {
                    self.metrics.configmap_created();
                    self.created_for
                        .insert(name.clone(), desired.commit.clone());
                    outcome.created.push(name.clone());
                    tracing::info!(configmap = %name, pool = %pool.spec.name, "published ConfigMap");
                    created
                }
                Ok(Ok(Published::Existed)) => None,
                Ok(Err(e)) => {
                    return Err(ReconcileError::Publish {
                        commit: desired.commit.clone(),
                        source: e,
                    });
                }
                Err(source) => {
                    return Err(ReconcileError::Publish {
                        commit: desired.commit.clone(),
                        source: PublishError::Create {
                            namespace: ns.to_string(),
                            name: name.clone(),
                            source,
                        },
                    });
                }
            };
            self.pending.configmap_created(name, created.clone());
            published.push(crate::gc::PublishedConfigMap {
                name: name.clone(),
                pool: pool.spec.name.clone(),
                created: created.unwrap_or_default(),
            });
        }

        outcome.sources = self.sources(desired, configmaps);

        // Plan.
        let created_of = |name: &str| {
            published
                .iter()
                .find(|c| c.name == name)
                .map(|c| c.created.clone())
                .filter(|c| !c.is_empty())
        };
        let recorded = if desired.classes.len() < desired.rendered.pools.len() {
            recorded_classes(&snapshot)
        } else {
            HashMap::new()
        };
        let targets: Vec<PoolTarget<'_>> = desired
            .rendered
            .pools
            .iter()
            .map(|p| PoolTarget {
                spec: &p.spec,
                target: ConfigRef::configmap(ns, &p.configmap_name),
                target_created: created_of(&p.configmap_name),
                // Known from the commits this process saw go by, else from the
                // ConfigMap's record of the reconciler that published it.
                class: desired
                    .classes
                    .get(&p.spec.name)
                    .copied()
                    .or_else(|| recorded.get(p.configmap_name.as_str()).copied()),
                wave_opened: None,
            })
            .collect();
        let all_published = desired
            .rendered
            .pools
            .iter()
            .all(|p| published.iter().any(|c| c.name == p.configmap_name));
        let (plan, node_count, replanned) = {
            let mut fleet = self.nodes.lock();
            fleet.expire_pending(Instant::now());
            fleet.set_pools(ns, &targets);
            let replanned = fleet.marked_pools();
            (fleet.plan(now, &self.drain_seen), fleet.len(), replanned)
        };
        self.log_overlaps(&plan.overlaps);
        self.log_phases(&plan.pools);
        self.metrics.set_pools(&plan.pools, plan.overlaps.len());
        tracing::debug!(
            nodes = node_count,
            actions = plan.actions.len(),
            pools_planned = replanned,
            planned_in = ?started.elapsed(),
            "planned"
        );

        // Writes stopped while publishing (leadership lost, shutting down): plan only.
        outcome.wrote = outcome.wrote && may_write();
        if !outcome.wrote || !all_published {
            outcome.plan = plan;
            return Ok(outcome);
        }

        // Apply: node writes.
        let (written, failures) = self.apply_actions(&plan.actions, may_write).await;
        outcome.node_writes = written;
        let failed = failures.len();
        if let Some((node, source)) = failures.into_iter().next() {
            let total = plan.actions.len();
            outcome.plan = plan;
            return Err(ReconcileError::NodeWrites {
                failed,
                total,
                node,
                source,
            });
        }

        // Drain work: evict (or check) the pods of the nodes being drained.
        outcome.drain_changed = self.drain(&plan, may_write).await;

        // Garbage collection, against the nodes as they are now (with this round's writes).
        let target_refs: Vec<ConfigRef> = targets.iter().map(|t| t.target.clone()).collect();
        let doomed = {
            let fleet = self.nodes.lock();
            let referenced: Vec<&str> = fleet.referenced().collect();
            plan_gc(
                desired.rendered.settings.keep_configmaps,
                &published,
                &referenced,
                &target_refs,
                ns,
            )
        };
        for name in doomed {
            if !may_write() {
                break;
            }
            let call = Call {
                verb: "delete",
                resource: "configmaps",
                name: &name,
            };
            let result = retrying(call, &self.retry, &self.metrics, || async {
                publish::delete_if_present(&cm_api, ns, &name)
                    .await
                    .map_err(into_kube)
            })
            .await;
            match result {
                Ok(existed) => {
                    if existed {
                        self.metrics.configmap_deleted();
                        tracing::info!(configmap = %name, "garbage-collected ConfigMap");
                        outcome.deleted.push(name.clone());
                    }
                    self.pending.configmap_deleted(&name);
                }
                // Not fatal: the next round tries again.
                Err(e) => tracing::warn!(
                    configmap = %name,
                    error = %kubelet_gitops_core::message::error_chain(&e),
                    "garbage collection failed; will retry"
                ),
            }
        }
        self.write_record(desired, &plan, may_write).await;
        outcome.plan = plan;
        Ok(outcome)
    }

    /// Writes the rollout record ([`crate::record`]) when it changed. A failure is logged
    /// and tried again next round: nothing of the rollout depends on it.
    async fn write_record(
        &mut self,
        desired: &Desired,
        plan: &RolloutPlan,
        may_write: &(dyn Fn() -> bool + Sync),
    ) {
        use crate::record::{RECORD_NAME, RolloutRecord};
        let record = RolloutRecord::of(&desired.commit, &plan.pools);
        let ns = desired.namespace.as_str();
        if self
            .record
            .as_ref()
            .is_some_and(|(n, r)| n == ns && *r == record)
            || !may_write()
        {
            return;
        }
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), ns);
        let cm = record.configmap(ns);
        let call = Call {
            verb: "update",
            resource: "configmaps",
            name: RECORD_NAME,
        };
        // An unconditional update (the leader is its only writer), created when absent
        // (only the first write in the cluster's life finds it so).
        let result = retrying(call, &self.retry, &self.metrics, || async {
            match api.replace(RECORD_NAME, &Default::default(), &cm).await {
                Err(kube::Error::Api(s)) if s.code == 404 => {
                    api.create(&Default::default(), &cm).await
                }
                other => other,
            }
        })
        .await;
        match result {
            Ok(_) => {
                tracing::debug!(commit = %desired.commit, "rollout record written");
                self.record = Some((ns.to_string(), record));
            }
            Err(e) => tracing::warn!(
                configmap = RECORD_NAME,
                namespace = ns,
                error = %kubelet_gitops_core::message::error_chain(&e),
                "writing the rollout record failed (kubelet-gitops status reads it); will retry"
            ),
        }
    }

    /// Which commit produced each pool's ConfigMap: the source-commit annotation the
    /// cache shows (a ConfigMap published without one counts as this commit's), else this
    /// commit if this replica created it; unknown (left out) when the cache does not
    /// show a ConfigMap someone else created.
    fn sources(
        &mut self,
        desired: &Desired,
        configmaps: &ConfigMapStore,
    ) -> BTreeMap<String, String> {
        let wanted: HashMap<&str, &str> = desired
            .rendered
            .pools
            .iter()
            .map(|p| (p.configmap_name.as_str(), p.spec.name.as_str()))
            .collect();
        self.created_for
            .retain(|name, _| wanted.contains_key(name.as_str()));
        let mut sources = BTreeMap::new();
        for meta in configmaps.state() {
            let m = &meta.metadata;
            let Some(pool) = m.name.as_deref().and_then(|n| wanted.get(n)) else {
                continue;
            };
            let commit = m
                .annotations
                .as_ref()
                .and_then(|a| a.get(SOURCE_COMMIT))
                .filter(|c| !c.is_empty())
                .unwrap_or(&desired.commit);
            sources.insert(pool.to_string(), commit.clone());
        }
        for (name, commit) in &self.created_for {
            if let Some(pool) = wanted.get(name.as_str()) {
                sources
                    .entry(pool.to_string())
                    .or_insert_with(|| commit.clone());
            }
        }
        sources
    }

    /// Runs the plan's drain work (a few nodes at a time) and keeps what it saw for the
    /// next round's plan. Returns whether anything changed since the last round.
    async fn drain(&mut self, plan: &RolloutPlan, may_write: &(dyn Fn() -> bool + Sync)) -> bool {
        let tasks: Vec<_> = plan.pools.iter().flat_map(|p| p.drains.iter()).collect();
        if tasks.is_empty() && self.drain_seen.is_empty() {
            return false;
        }
        // The futures are built first, as in `apply_actions` (rust-lang/rust#102211).
        let work: Vec<_> = tasks
            .into_iter()
            .map(|task| {
                let (client, metrics, task) = (
                    self.drain_client.clone(),
                    self.metrics.clone(),
                    task.clone(),
                );
                async move {
                    if !may_write() {
                        return None;
                    }
                    let seen = super::drain::run(&client, &metrics, &task).await;
                    Some((task.node, seen))
                }
            })
            .collect();
        let results: Vec<_> = futures::stream::iter(work)
            .buffer_unordered(self.concurrency)
            .collect()
            .await;
        let seen: DrainObservations = results.into_iter().flatten().collect();
        let mut changed = false;
        {
            let mut fleet = self.nodes.lock();
            for (node, s) in &seen {
                if self.drain_seen.get(node) != Some(s) {
                    fleet.mark_node(node);
                    changed = true;
                }
            }
            for node in self.drain_seen.keys() {
                if !seen.contains_key(node) {
                    fleet.mark_node(node);
                }
            }
        }
        self.drain_seen = seen;
        changed
    }

    /// Sends every action (a few at a time). Returns how many went through and the
    /// failures (node, error).
    async fn apply_actions(
        &mut self,
        actions: &[NodeAction],
        may_write: &(dyn Fn() -> bool + Sync),
    ) -> (usize, Vec<(String, kube::Error)>) {
        let api: Api<Node> = Api::all(self.client.clone());
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            ..PatchParams::default()
        };
        let retry = self.retry;
        let metrics = self.metrics.clone();
        // The futures are built first, a chunk at a time: a closure inside the stream
        // adapter would make the whole loop's future fail to be `Send`
        // (rust-lang/rust#102211), and an unstarted request future is as large as a started
        // one (kilobytes: 20,000 of them at once were most of the reconciler's peak memory
        // in a 20,000-node rollout).
        let mut written = 0;
        let mut failures = Vec::new();
        let chunk_len = self.concurrency * 32;
        for (c, chunk) in actions.chunks(chunk_len).enumerate() {
            let sends: Vec<_> = chunk
                .iter()
                .enumerate()
                .map(|(j, action)| {
                    let i = c * chunk_len + j;
                    let (api, params, metrics) = (api.clone(), params.clone(), metrics.clone());
                    let value = action.patch();
                    let node = action.node.clone();
                    let cordon = matches!(action.change, NodeChange::Cordon { .. });
                    let client = self.client.clone();
                    async move {
                        if !may_write() {
                            return (i, None);
                        }
                        let call = Call {
                            verb: "patch",
                            resource: "nodes",
                            name: &node,
                        };
                        let r = retrying(call, &retry, &metrics, || async {
                            // A cordon reads the node first: one a person cordoned keeps
                            // their cordon (no claim on it), and the write is conditional
                            // on what was read (a 409 reads again).
                            let value = if cordon {
                                let (unschedulable, rv) =
                                    super::drain::read_cordon(&client, &node).await?;
                                cordon_patch(&value, unschedulable, rv)
                            } else {
                                value.clone()
                            };
                            api.patch_metadata(&node, &params, &Patch::Merge(&value))
                                .await
                                .map(|_| value)
                        })
                        .await;
                        (i, Some(r))
                    }
                })
                .collect();
            let results: Vec<(usize, Option<Result<serde_json::Value, kube::Error>>)> =
                futures::stream::iter(sends)
                    .buffer_unordered(self.concurrency)
                    .collect()
                    .await;
            for (i, result) in results {
                let action = &actions[i];
                match result {
                    None => {}
                    Some(Ok(sent)) => {
                        written += 1;
                        self.metrics.node_written();
                        self.nodes
                            .lock()
                            .node_patched(&action.node, &sent, Instant::now());
                        tracing::info!(
                            node = %action.node,
                            pool = action.pool.as_deref().unwrap_or(""),
                            change = %describe(action),
                            reason = %action.reason,
                            "node assigned"
                        );
                    }
                    Some(Err(e)) => {
                        tracing::warn!(
                            node = %action.node,
                            error = %kubelet_gitops_core::message::error_chain(&e),
                            "node write failed"
                        );
                        failures.push((action.node.to_string(), e));
                    }
                }
            }
        }
        (written, failures)
    }

    /// Logs each pool's phase when it changes: a halt as an error naming the failed
    /// nodes and the agents' messages, completion as info.
    fn log_phases(&mut self, reports: &[PoolReport]) {
        let mut now = BTreeMap::new();
        for r in reports {
            let key = (r.phase, r.target.clone());
            if self.phases.get(&r.pool) != Some(&key) {
                match r.phase {
                    PoolPhase::Halted => {
                        for f in &r.failed {
                            tracing::error!(
                                pool = %r.pool,
                                configmap = %r.target,
                                node = %f.node,
                                state = %f.state,
                                agent_message = f.message.as_deref().unwrap_or(""),
                                "rollout halted: a node failed on the pool's config; nothing more is assigned until a new commit changes it"
                            );
                        }
                    }
                    PoolPhase::Complete => tracing::info!(
                        pool = %r.pool,
                        configmap = %r.target,
                        nodes = r.nodes,
                        "rollout complete"
                    ),
                    PoolPhase::Paused => {
                        tracing::info!(pool = %r.pool, configmap = %r.target, "rollout paused")
                    }
                    PoolPhase::Progressing | PoolPhase::Empty => tracing::debug!(
                        pool = %r.pool,
                        configmap = %r.target,
                        phase = %r.phase,
                        "rollout phase"
                    ),
                }
            }
            now.insert(r.pool.clone(), key);
        }
        self.phases = now;
    }

    fn log_overlaps(&mut self, overlaps: &[Overlap]) {
        let now: HashSet<String> = overlaps.iter().map(ToString::to_string).collect();
        for o in overlaps {
            let msg = o.to_string();
            if !self.logged_overlaps.contains(&msg) {
                tracing::error!(
                    node = %o.node,
                    pool = %o.first.0,
                    other_pool = %o.second.0,
                    priority = o.priority,
                    "{msg}; the node is left as it is"
                );
            }
        }
        self.logged_overlaps = now;
    }
}

/// The change class each published ConfigMap records ([`CHANGE_CLASS`]), by name.
fn recorded_classes(
    configmaps: &[Arc<kube::api::PartialObjectMeta<ConfigMap>>],
) -> HashMap<String, Class> {
    configmaps
        .iter()
        .filter_map(|m| {
            let name = m.metadata.name.clone()?;
            let class = m
                .metadata
                .annotations
                .as_ref()?
                .get(CHANGE_CLASS)?
                .parse()
                .ok()?;
            Some((name, class))
        })
        .collect()
}

/// A cordon's patch for a node as read: conditional on its resourceVersion; when the
/// node is unschedulable already (a person cordoned it), without the cordon and without
/// claiming it (no `cordoned` annotation), so that it is never lifted by us.
fn cordon_patch(
    value: &serde_json::Value,
    unschedulable: bool,
    resource_version: Option<String>,
) -> serde_json::Value {
    let mut value = value.clone();
    if unschedulable {
        if let Some(root) = value.as_object_mut() {
            root.remove("spec");
        }
        if let Some(a) = value
            .pointer_mut("/metadata/annotations")
            .and_then(serde_json::Value::as_object_mut)
        {
            a.remove(kubelet_gitops_core::protocol::CORDONED);
        }
    }
    if let (Some(rv), Some(meta)) = (
        resource_version,
        value
            .pointer_mut("/metadata")
            .and_then(serde_json::Value::as_object_mut),
    ) {
        meta.insert("resourceVersion".to_string(), serde_json::Value::String(rv));
    }
    value
}

/// `desired-config=<ref>` or `unassigned`, for logs.
fn describe(action: &NodeAction) -> String {
    match &action.change {
        crate::rollout::NodeChange::Assign { desired, .. } => desired.to_string(),
        crate::rollout::NodeChange::Unassign => "local (unassigned)".to_string(),
        crate::rollout::NodeChange::Cordon { drain, .. } => format!("cordon, drain for {drain}"),
        crate::rollout::NodeChange::Release { uncordon: true } => {
            "uncordon, drain over".to_string()
        }
        crate::rollout::NodeChange::Release { uncordon: false } => {
            "drain over (cordoned by someone else: left cordoned)".to_string()
        }
        crate::rollout::NodeChange::GiveUp { message, .. } => format!("drain given up: {message}"),
    }
}

/// The API error under a publish error, for the retry loop to classify.
fn into_kube(e: PublishError) -> kube::Error {
    match e {
        PublishError::NamespaceMissing { source, .. }
        | PublishError::Create { source, .. }
        | PublishError::Delete { source, .. } => source,
    }
}
