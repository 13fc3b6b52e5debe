//! Carries out the steps [`decide`] chooses. Every step that changes the node persists
//! its phase in the checkpoint store before the next decision; nothing here decides what
//! comes next.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::Client;
use kubelet_gitops_core::flags::{DEFAULT_ROOT_DIR, KubeletFlags};
use kubelet_gitops_core::protocol::{
    CONFIGMAP_KEY, ConfigRef, DESIRED_CONFIG, HEALTH_TIMEOUT, LKG_GRACE, LOCAL, State, reason,
};
use kubelet_gitops_core::quantity::Quantity;
use tokio::sync::watch as channel;
use tracing::{debug, error, info, instrument, warn};

use super::AgentError;
use super::admin::AdminState;
use super::decide::{
    self as plan, Assignment, Desired, Disk, Failed, Observed, PodsCgroup, Retry, Step,
    VerifyFailure, decide,
};
use super::metrics::{Metrics, Outcome};
use super::ready;
use crate::args::Config;
use crate::checkpoint::{
    ApplyPhase, Assigned, Checkpoint, CheckpointStore, Verdict, sha256_hex, write_atomic,
};
use crate::error::{KubeletError, brief, cap};
use crate::hostflags::read_flags;
use crate::kubelet::{Kubelet, remove_state_files, state_files_for_change};
use crate::report::{EventType, Report, Reporter, event_reason};
use crate::validate::{self, NodeContext, Placement, Rejection};
use crate::watch::{ConfigMapState, ConfigMapWatch, NodeWatch};

/// How long a download waits for the ConfigMap watch's first list.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(30);
/// Back-off of a failed download: first and longest.
const DOWNLOAD_BACKOFF: (u64, u64) = (5, 300);
/// Back-off after a step failed with an error: first and longest.
const ERROR_BACKOFF: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(60));
/// A rejected config is validated again after this many resync intervals.
const REJECTED_RETRY_FACTOR: u64 = 10;
/// How often the pods are looked at while waiting for them.
const POD_POLL: Duration = Duration::from_secs(1);
/// Bound on listing the node's pods before a restart (a slow API server must not hold
/// up a rollback).
const POD_LIST_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest verification failure reason (the Node's message cap is larger; a rollback
/// message holds one or two reasons).
const MAX_REASON: usize = 1024;
/// The longest part of a reason quoted from the Node's `Ready` condition.
const MAX_NODE_MESSAGE: usize = 400;
/// Bound on a report or Event sent in the middle of a rollback: the API server must never
/// hold up the node's recovery (the report is made again by the next decision, retried
/// with back-off, until it lands).
const REPORT_TIMEOUT: Duration = Duration::from_secs(5);
/// How soon a rollback carried on without the Node is tried again after a failure.
const OFFLINE_RETRY: Duration = Duration::from_secs(5);

/// What [`Driver::kubelet_runs`] found.
enum Check {
    /// The kubelet runs the config and the Node is Ready.
    Runs,
    /// It does not: why.
    Fails(String),
    /// The Node is gone; nothing to verify against.
    NodeGone,
}

/// The pieces a [`Driver`] runs with.
pub(crate) struct Parts {
    pub config: Config,
    pub client: Client,
    pub store: CheckpointStore,
    pub kubelet: Kubelet,
    pub reporter: Reporter,
    pub nodes: NodeWatch,
    pub placement: Placement,
    pub target_file: PathBuf,
    pub metrics: Metrics,
    pub admin: AdminState,
}

/// What the agent keeps in memory. Losing it (a restart) costs at most one extra retry or
/// verification; see [`super::decide`].
#[derive(Default)]
struct Memory {
    verification: Option<VerifyFailure>,
    retry: Option<Retry>,
    retry_is_download: bool,
    download_attempts: u32,
    /// Flag overrides, warnings and pod notes per config, for the Done message.
    notes: HashMap<ConfigRef, String>,
    /// A Node was seen (so its absence later means it was deleted).
    node_seen: bool,
    /// The Node is deleted (logged once per deletion).
    node_gone: bool,
    /// When the apply of the desired config started.
    apply_started: Option<(ConfigRef, Instant)>,
    /// The Node as our last write returned it.
    written: Option<Node>,
    error_backoff: Option<Duration>,
}

/// The agent's loop around [`decide`].
pub struct Driver {
    config: Config,
    client: Client,
    store: CheckpointStore,
    kubelet: Kubelet,
    reporter: Reporter,
    /// Holds the Node watch task (its receiver is `node_rx`).
    _nodes: NodeWatch,
    node_rx: channel::Receiver<Option<Node>>,
    /// The watch on the ConfigMap still to be downloaded, and our receiver of it.
    configmap: Option<(ConfigMapWatch, channel::Receiver<ConfigMapState>)>,
    placement: Placement,
    target_file: PathBuf,
    metrics: Metrics,
    admin: AdminState,
    memory: Memory,
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn secs_ceil(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

fn human(secs: u64) -> String {
    humantime::format_duration(Duration::from_secs(secs)).to_string()
}

/// A duration annotation, or the default when absent or invalid (logged).
fn duration_annotation(node: &Node, key: &str, default: Duration) -> Duration {
    let Some(text) = node.metadata.annotations.as_ref().and_then(|a| a.get(key)) else {
        return default;
    };
    match humantime::parse_duration(text) {
        Ok(d) if !d.is_zero() => d,
        Ok(_) => default,
        Err(e) => {
            warn!(annotation = key, value = %text, error = %e, "invalid duration annotation; using the default");
            default
        }
    }
}

fn resource_version(node: &Node) -> Option<u64> {
    node.metadata.resource_version.as_deref()?.parse().ok()
}

/// An error and its causes, `: `-joined.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cur = s.source();
    }
    out
}

/// A failed download or validation: the kubelet's reason, the detail, whether it is a
/// transport problem (retried with back-off) or about the content (retried at resync).
struct Failure {
    reason: &'static str,
    detail: String,
    download: bool,
}

impl Failure {
    fn download(detail: impl Into<String>) -> Failure {
        Failure {
            reason: reason::DOWNLOAD_ERROR,
            detail: detail.into(),
            download: true,
        }
    }
}

impl From<Rejection> for Failure {
    fn from(r: Rejection) -> Failure {
        Failure {
            reason: r.reason,
            detail: r.detail,
            download: false,
        }
    }
}

impl Driver {
    pub(crate) fn new(parts: Parts) -> Driver {
        let Parts {
            config,
            client,
            store,
            kubelet,
            reporter,
            nodes,
            placement,
            target_file,
            metrics,
            admin,
        } = parts;
        let node_rx = nodes.receiver();
        Driver {
            config,
            client,
            store,
            kubelet,
            reporter,
            _nodes: nodes,
            node_rx,
            configmap: None,
            placement,
            target_file,
            metrics,
            admin,
            memory: Memory::default(),
        }
    }

    /// Decides and acts until dropped.
    pub async fn run(&mut self) -> Result<(), AgentError> {
        loop {
            let Some(node) = self.fresh_node() else {
                if self.memory.node_seen && !self.memory.node_gone {
                    // Deleted (a node lifecycle controller, a person). Without the Node
                    // there is nothing to decide on or report to: the kubelet keeps what
                    // it runs, nothing is written or restarted, and the agent waits for a
                    // Node of this name to appear again (the kubelet registers it on its
                    // next start), then goes on with that Node's annotations.
                    warn!(node = %self.config.node_name, "the Node was deleted; the kubelet is left as it is until the Node is back");
                    self.memory.node_gone = true;
                } else {
                    debug!(node = %self.config.node_name, "waiting for the Node");
                }
                // A rollback in flight does not wait for the Node (an agent restarted while
                // the API server is unreachable has none): the fallback is written and the
                // kubelet restarted now; verification and the report follow once the Node
                // is known.
                let retry = match self.roll_back_without_node().await {
                    Ok(()) => None,
                    Err(e) => {
                        error!(error = %chain(&e), retry_in = ?OFFLINE_RETRY, "carrying on the rollback without the Node failed");
                        Some(OFFLINE_RETRY)
                    }
                };
                let changed = match retry {
                    Some(delay) => tokio::select! {
                        changed = self.node_rx.changed() => changed,
                        _ = tokio::time::sleep(delay) => Ok(()),
                    },
                    None => self.node_rx.changed().await,
                };
                if changed.is_err() {
                    return Err(AgentError::Setup("the node watch stopped".into()));
                }
                continue;
            };
            if std::mem::replace(&mut self.memory.node_gone, false) {
                info!(node = %self.config.node_name, uid = ?node.metadata.uid, "the Node is back");
            }
            self.memory.node_seen = true;
            let result = match self.observe(&node).await {
                Ok(observed) => {
                    let step = decide(&observed);
                    debug!(?step, "decided");
                    self.execute(step, &node, &observed).await
                }
                Err(e) => Err(e),
            };
            match result {
                Ok(None) => self.memory.error_backoff = None,
                Ok(Some(wake_at)) => {
                    self.memory.error_backoff = None;
                    self.wait(wake_at).await;
                }
                Err(e) => {
                    let delay = self
                        .memory
                        .error_backoff
                        .map(|d| (d * 2).min(ERROR_BACKOFF.1))
                        .unwrap_or(ERROR_BACKOFF.0);
                    self.memory.error_backoff = Some(delay);
                    self.metrics.error();
                    let message = chain(&e);
                    error!(error = %message, retry_in = ?delay, "step failed");
                    if delay >= ERROR_BACKOFF.1 / 2 {
                        self.reporter
                            .event(
                                &node,
                                EventType::Warning,
                                event_reason::INTERNAL,
                                &format!("{}: {message}", reason::INTERNAL_ERROR),
                            )
                            .await;
                    }
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    /// [`Driver::node`], marking the watch's value as seen: the next `changed()` waits
    /// for a newer one.
    fn fresh_node(&mut self) -> Option<Node> {
        self.node_rx.borrow_and_update();
        self.node()
    }

    /// The newest Node: the watch's, or the one our last write returned when that is newer;
    /// `None` when the watch has none (not listed yet, or deleted). Does not mark the
    /// watch's value as seen, so a change that arrives while a step runs still wakes the
    /// next wait.
    fn node(&mut self) -> Option<Node> {
        let watched = self.node_rx.borrow().clone();
        match (watched, self.memory.written.take()) {
            // Our last write is about a Node that is gone now.
            (None, _) => None,
            (Some(w), Some(mine)) => {
                let same_node = w.metadata.uid == mine.metadata.uid;
                let newer_mine = match (resource_version(&w), resource_version(&mine)) {
                    (Some(a), Some(b)) => same_node && b > a,
                    _ => false,
                };
                if newer_mine {
                    self.memory.written = Some(mine.clone());
                    Some(mine)
                } else {
                    Some(w)
                }
            }
            (Some(w), None) => Some(w),
        }
    }

    fn node_context(&self, node: &Node) -> Result<NodeContext, AgentError> {
        let flags = read_flags(&self.config.flag_source, &self.config.host_root)?;
        let capacity = node
            .status
            .as_ref()
            .and_then(|s| s.capacity.as_ref())
            .map(|c| {
                c.iter()
                    .filter_map(|(k, q)| match Quantity::parse(&q.0) {
                        Ok(q) => Some((k.clone(), q)),
                        Err(e) => {
                            warn!(resource = %k, value = %q.0, error = %e, "unparsable capacity; ignored");
                            None
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(NodeContext {
            flags,
            host_root: self.config.host_root.clone(),
            capacity,
            cgroups: self.config.cgroups.clone(),
            placement: self.placement.clone(),
        })
    }

    async fn observe(&mut self, node: &Node) -> Result<Observed, AgentError> {
        let now = unix_now();
        let annotations = node.metadata.annotations.clone().unwrap_or_default();
        let desired = Desired::parse(annotations.get(DESIRED_CONFIG).map(String::as_str));
        let health_timeout = secs_ceil(duration_annotation(
            node,
            HEALTH_TIMEOUT,
            self.config.health_timeout,
        ));
        let lkg_grace = secs_ceil(duration_annotation(node, LKG_GRACE, self.config.lkg_grace));
        let assigned = self.assigned()?;
        let last_known_good = self
            .last_known_good()?
            .map(|c| c.config)
            .unwrap_or(ConfigRef::Local);
        let local_original = match self.store.local_original() {
            Ok(o) => o,
            Err(e) if e.is_corrupt() => {
                warn!(error = %chain(&e), "the saved local config is corrupt; it will not be used");
                None
            }
            Err(e) => return Err(e.into()),
        };
        let has_local_original = local_original.is_some();
        let view = assigned.as_ref().map(|a| self.assignment_view(a, node));
        let mut disk = None;
        let mut pods_cgroup = None;
        let mut kubelet_healthy = None;
        let on_local = match &assigned {
            None => true,
            Some(a) => a.phase == ApplyPhase::Verified && a.checkpoint.config == ConfigRef::Local,
        };
        if on_local {
            if let Some(saved) = &local_original {
                disk = self.local_check(saved)?;
            }
        } else if let Some(a) = &assigned
            && a.phase == ApplyPhase::Verified
        {
            let d = self.disk_check(&a.checkpoint)?;
            // The pods cgroup of the desired config once it runs (after its verification,
            // then at every resync), when the file is the one the kubelet was verified on.
            if d == Disk::Matches
                && matches!(&desired, Desired::Config(x) if *x == a.checkpoint.config)
            {
                pods_cgroup = self.pods_cgroup_check(node);
            }
            disk = Some(d);
        }
        if let Some(a) = &assigned
            && a.phase == ApplyPhase::Verified
            && a.checkpoint.config != last_known_good
            && now >= a.since.saturating_add(lkg_grace)
        {
            kubelet_healthy = Some(self.kubelet.healthz().await.is_ok());
        }
        let note = match &desired {
            Desired::Config(x) => self.memory.notes.get(x).cloned(),
            _ => None,
        };
        Ok(Observed {
            now,
            desired,
            health_timeout,
            lkg_grace,
            recheck: secs_ceil(self.config.resync_interval),
            report: Report::of_node(node),
            assigned: view,
            last_known_good,
            has_local_original,
            disk,
            pods_cgroup,
            kubelet_healthy,
            verification: self.memory.verification.clone(),
            retry: self.memory.retry.clone(),
            note,
        })
    }

    fn assigned(&self) -> Result<Option<Assigned>, AgentError> {
        match self.store.assigned() {
            Ok(a) => Ok(a),
            Err(e) if e.is_corrupt() => {
                warn!(error = %chain(&e), "meta/assigned is corrupt; treating the node as on its local config");
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    fn last_known_good(&self) -> Result<Option<Checkpoint>, AgentError> {
        match self.store.last_known_good() {
            Ok(c) => Ok(c),
            Err(e) if e.is_corrupt() => {
                warn!(error = %chain(&e), "meta/last-known-good is corrupt; falling back to the local config");
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Where the payload of `cp` is kept on the node (for messages to people).
    fn payload_file(&self, cp: &Checkpoint) -> String {
        if cp.config == ConfigRef::Local {
            return self
                .store
                .dir()
                .join("local")
                .join(crate::checkpoint::PAYLOAD_FILE)
                .display()
                .to_string();
        }
        match self.store.payload_path(cp) {
            Ok(p) => p.display().to_string(),
            Err(_) => format!(
                "{} (checkpoint {}/{})",
                self.store.dir().display(),
                cp.uid,
                cp.resource_version
            ),
        }
    }

    /// `meta/assigned` as [`decide`] sees it, with its verdict's report checked against
    /// `node` (the Node object it was reported on, by uid).
    fn assignment_view(&self, a: &Assigned, node: &Node) -> Assignment {
        let failed = a.failed.as_ref().map(|v| Failed {
            config: v.config.clone(),
            reason: v.reason.clone(),
            file: a
                .previous
                .as_ref()
                .filter(|p| p.config == v.config)
                .map(|p| self.payload_file(p))
                .unwrap_or_else(|| "not kept".into()),
            reported: v.reported_to.is_some() && v.reported_to == node.metadata.uid,
        });
        Assignment {
            config: a.checkpoint.config.clone(),
            phase: a.phase,
            since: a.since,
            file: self.payload_file(&a.checkpoint),
            failed,
        }
    }

    /// On the local config (replace mode): the node's file against the saved original.
    /// `None` in drop-in mode (the node's own file is never the agent's), and when the
    /// file is missing (nothing to save; the node's owner has work to do).
    fn local_check(&self, saved: &[u8]) -> Result<Option<Disk>, AgentError> {
        if matches!(self.placement, Placement::DropIn { .. }) {
            return Ok(None);
        }
        match std::fs::read(&self.target_file) {
            Ok(bytes) if bytes == saved => Ok(Some(Disk::Matches)),
            Ok(bytes) => Ok(Some(Disk::Differs {
                found: Some(sha256_hex(&bytes)),
            })),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(AgentError::Io {
                op: "read",
                path: self.target_file.clone(),
                source,
            }),
        }
    }

    /// The pods cgroup of the config the node's files give (the one the kubelet runs)
    /// against node allocatable; `None` when it cannot be checked (logged).
    fn pods_cgroup_check(&self, node: &Node) -> Option<PodsCgroup> {
        let ctx = match self.node_context(node) {
            Ok(c) => c,
            Err(e) => {
                warn!(error = %chain(&e), "cannot check the pods cgroup");
                return None;
            }
        };
        match validate::check_pods_cgroup(&ctx) {
            Ok(None) => Some(PodsCgroup::Matches),
            Ok(Some(m)) => {
                debug!(finding = %m, "pods cgroup differs");
                Some(PodsCgroup::Differs(m))
            }
            Err(r) => {
                warn!(reason = %r, "cannot check the pods cgroup");
                None
            }
        }
    }

    /// The kubelet config file (or drop-in) against what the agent wrote.
    fn disk_check(&self, cp: &Checkpoint) -> Result<Disk, AgentError> {
        match std::fs::read(&self.target_file) {
            Ok(bytes) => {
                let found = sha256_hex(&bytes);
                Ok(if found == cp.sha256 {
                    Disk::Matches
                } else {
                    Disk::Differs { found: Some(found) }
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Disk::Differs { found: None }),
            Err(source) => Err(AgentError::Io {
                op: "read",
                path: self.target_file.clone(),
                source,
            }),
        }
    }

    /// Without configz, the check that the kubelet loaded the config: the file it reads
    /// at start (read after it answered healthz) is the one written, byte for byte; in
    /// drop-in mode the local config is no drop-in at all. `None` when it is; else what
    /// was found.
    fn read_back(&self, cp: &Checkpoint) -> Result<Option<String>, AgentError> {
        let short = |sha: &str| sha.chars().take(12).collect::<String>();
        let expected =
            if matches!(self.placement, Placement::DropIn { .. }) && cp.sha256 == sha256_hex(b"") {
                None
            } else {
                Some(cp.sha256.clone())
            };
        let found = match std::fs::read(&self.target_file) {
            Ok(bytes) => Some(sha256_hex(&bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => {
                return Err(AgentError::Io {
                    op: "read back",
                    path: self.target_file.clone(),
                    source,
                });
            }
        };
        let path = self.target_file.display();
        Ok(match (&expected, &found) {
            _ if expected == found => None,
            (Some(want), Some(got)) => Some(format!(
                "{path} read back is not the config written (sha256 {}..., expected {}...)",
                short(got),
                short(want)
            )),
            (Some(_), None) => Some(format!("{path} is missing after the restart")),
            (None, _) => Some(format!(
                "{path} exists after the return to the local config, which has no drop-in"
            )),
        })
    }

    /// The payload of `cp`: the checkpoint, or the saved original for the local config.
    fn payload_of(&self, cp: &Checkpoint) -> Result<Vec<u8>, AgentError> {
        if cp.config == ConfigRef::Local {
            self.store.local_original()?.ok_or_else(|| {
                AgentError::Setup("the node's original config was never saved".into())
            })
        } else {
            Ok(self.store.load(cp)?)
        }
    }

    fn current_checkpoint(&self) -> Result<Option<Checkpoint>, AgentError> {
        Ok(self
            .assigned()?
            .filter(|a| a.phase == ApplyPhase::Verified && a.checkpoint.config != ConfigRef::Local)
            .map(|a| a.checkpoint))
    }

    /// The report while the desired config is in flight: `state` about `observed`, the
    /// current and last-known-good as last reported.
    fn transitional(o: &Observed, state: State, message: String) -> Report {
        Report {
            state: Some(state),
            observed: Some(o.desired.observed_value()),
            current: o.report.current.clone().or_else(|| Some(LOCAL.to_string())),
            last_known_good: Some(o.last_known_good.to_string()),
            message: Some(message),
        }
    }

    /// Whether the assignment in flight is what the node should run (then its progress
    /// is reported; a rollback's is not, so the failure stays on the Node).
    fn in_flight_is_desired(o: &Observed, config: &ConfigRef) -> bool {
        match &o.desired {
            Desired::Local => *config == ConfigRef::Local,
            Desired::Config(x) => x == config,
            Desired::Invalid { .. } => false,
        }
    }

    /// Writes `wanted` on the Node (skipped when it shows it already) and posts an Event
    /// when the state or the observed config changes. Compares with the newest Node
    /// (`fallback` when none is known), never with one from before our last write.
    async fn publish(&mut self, fallback: &Node, wanted: &Report) -> Result<(), AgentError> {
        self.publish_as(fallback, wanted, None).await
    }

    /// [`Driver::publish`], with the Event's type and reason given instead of the
    /// state's (a failed download is `Degraded` with `KubeletConfigDownloadFailed`).
    async fn publish_as(
        &mut self,
        fallback: &Node,
        wanted: &Report,
        event: Option<(EventType, &'static str)>,
    ) -> Result<(), AgentError> {
        let node = &self.node().unwrap_or_else(|| fallback.clone());
        let before = Report::of_node(node);
        if let Some(written) = self.reporter.publish(node, wanted).await? {
            self.memory.written = Some(written);
        }
        self.metrics.set_state(wanted.state);
        if wanted.state == Some(State::RolledBack) {
            self.verdict_reported(node, wanted);
        }
        let changed = before.state != wanted.state || before.observed != wanted.observed;
        if changed {
            let (kind, why, default) = match wanted.state {
                Some(State::Downloading) => {
                    (EventType::Normal, event_reason::DOWNLOADING, "downloading")
                }
                Some(State::Applying) => (EventType::Normal, event_reason::APPLYING, "applying"),
                Some(State::Verifying) => (EventType::Normal, event_reason::VERIFYING, "verifying"),
                Some(State::Done) => (EventType::Normal, event_reason::APPLIED, "applied"),
                Some(State::Degraded) => (EventType::Warning, event_reason::REJECTED, "degraded"),
                Some(State::RolledBack) => {
                    (EventType::Warning, event_reason::ROLLED_BACK, "rolled back")
                }
                None => (
                    EventType::Normal,
                    event_reason::LOCAL,
                    "the kubelet runs the node's local config",
                ),
            };
            let (kind, why) = event.unwrap_or((kind, why));
            let subject = wanted.observed.as_deref().unwrap_or(LOCAL);
            let message = match &wanted.message {
                Some(m) if !m.is_empty() => format!("{subject}: {m}"),
                _ => format!("{subject}: {default}"),
            };
            self.reporter.event(node, kind, why, &message).await;
        }
        Ok(())
    }

    /// [`Driver::publish`] in the middle of a rollback: bounded by [`REPORT_TIMEOUT`], a
    /// failure logged and not returned. The node's recovery never waits for the API
    /// server; the next decision reports again (with back-off) until the report lands.
    async fn publish_best_effort(&mut self, fallback: &Node, wanted: &Report) {
        match tokio::time::timeout(REPORT_TIMEOUT, self.publish(fallback, wanted)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                warn!(error = %chain(&e), "report not written; the rollback goes on and the report is retried")
            }
            Err(_) => {
                warn!(timeout = ?REPORT_TIMEOUT, "no answer to the report; the rollback goes on and the report is retried")
            }
        }
    }

    /// An Event that must not hold up a rollback (bounded by [`REPORT_TIMEOUT`]).
    async fn event_best_effort(&self, node: &Node, kind: EventType, why: &str, message: &str) {
        if tokio::time::timeout(
            REPORT_TIMEOUT,
            self.reporter.event(node, kind, why, message),
        )
        .await
        .is_err()
        {
            warn!(reason = why, timeout = ?REPORT_TIMEOUT, "no answer to the event; not posted");
        }
    }

    /// After the Node (`node`, as it was before the write) was made to show `wanted`, a
    /// `RolledBack` report: records in `meta/assigned` that the verdict it carries reached
    /// this Node object, so that its later disappearance is read as a person clearing it
    /// (see [`decide`]). A failure is logged: the record is made again at the next report.
    fn verdict_reported(&self, node: &Node, wanted: &Report) {
        let uid = node.metadata.uid.clone();
        let a = match self.store.assigned() {
            Ok(Some(a)) => a,
            Ok(None) | Err(_) => return,
        };
        let Some(v) = &a.failed else { return };
        if uid.is_none()
            || v.reported_to == uid
            || wanted.observed.as_deref() != Some(v.config.to_string().as_str())
        {
            return;
        }
        let failed = Some(Verdict {
            reported_to: uid,
            ..v.clone()
        });
        match self.store.set_assigned(&Assigned { failed, ..a }) {
            Ok(()) => debug!(config = %v.config, "verdict reported on the Node"),
            Err(e) => warn!(error = %chain(&e), "cannot record that the verdict was reported"),
        }
    }

    async fn execute(
        &mut self,
        step: Step,
        node: &Node,
        o: &Observed,
    ) -> Result<Option<Option<u64>>, AgentError> {
        match step {
            Step::Download { config } => self.download(node, o, config).await?,
            Step::ReturnToLocal => self.return_to_local(node, o).await?,
            Step::Write => self.write(node, Some(o)).await?,
            Step::Restart => self.restart(node, Some(o)).await?,
            Step::Verify { deadline } => self.verify(node, o, deadline).await?,
            Step::RollBack { to, reason } => self.roll_back(o, to, reason)?,
            Step::RestoreDrift { found } => self.restore_drift(node, o, found).await?,
            Step::RefreshLocal { found } => self.refresh_local(&found)?,
            Step::Promote { config } => self.promote(node, config).await?,
            Step::Idle { report, wake_at } => {
                // A pods-cgroup finding the Node does not show yet gets its Event.
                let new_finding = match &o.pods_cgroup {
                    Some(PodsCgroup::Differs(m))
                        if !o
                            .report
                            .message
                            .as_deref()
                            .is_some_and(|s| s.contains(m.as_str())) =>
                    {
                        Some(m.clone())
                    }
                    _ => None,
                };
                self.publish(node, &report).await?;
                if let Some(m) = new_finding {
                    // Reported, not rolled back: the kubelet computed and wrote these
                    // limits itself when it started with this config, and it runs
                    // healthily with it. A difference means something else on the node
                    // rewrote the cgroup, or the kubelet sees the node otherwise than its
                    // Node object says (its capacity, its pid_max). Restarting the kubelet
                    // on another config would disrupt the node without fixing either; a
                    // person has to look.
                    let subject = report.observed.as_deref().unwrap_or(LOCAL);
                    warn!(config = %subject, finding = %m, "pods cgroup mismatch");
                    self.reporter
                        .event(
                            node,
                            EventType::Warning,
                            event_reason::CGROUP_MISMATCH,
                            &format!("{subject}: {m}"),
                        )
                        .await;
                }
                // Keep watching the ConfigMap only while it is still to be downloaded.
                let pending = match &o.desired {
                    Desired::Config(x) if *x != o.current() => Some(x.clone()),
                    _ => None,
                };
                self.watch_configmap(pending.as_ref());
                if !self.admin.is_ready() {
                    info!(node = %self.config.node_name, state = ?report.state, "first sync done");
                    self.admin.set_ready();
                }
                return Ok(Some(wake_at));
            }
        }
        Ok(None)
    }

    /// Sleeps until the Node or the ConfigMap changes, `wake_at`, or the resync interval.
    async fn wait(&mut self, wake_at: Option<u64>) {
        let resync = tokio::time::Instant::now() + self.config.resync_interval;
        let until = match wake_at {
            Some(at) => {
                let secs = at.saturating_sub(unix_now());
                (tokio::time::Instant::now() + Duration::from_secs(secs)).min(resync)
            }
            None => resync,
        };
        let cm_changed = async {
            match self.configmap.as_mut().map(|(_, rx)| rx) {
                Some(rx) => {
                    let _ = rx.changed().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = self.node_rx.changed() => debug!("woken by the Node"),
            _ = cm_changed => {
                debug!("woken by the ConfigMap");
                if self.memory.retry_is_download {
                    self.memory.retry = None;
                }
            }
            _ = tokio::time::sleep_until(until) => debug!("woken by the clock"),
        }
    }

    #[instrument(skip(self, node, o), fields(config = %config))]
    async fn download(
        &mut self,
        node: &Node,
        o: &Observed,
        config: ConfigRef,
    ) -> Result<(), AgentError> {
        if self.memory.apply_started.as_ref().map(|(c, _)| c) != Some(&config) {
            self.memory.apply_started = Some((config.clone(), Instant::now()));
        }
        // A new desired config (or a verdict a person cleared on the Node) ends the
        // verdict recorded with the last rollback.
        if let Some(a) = self.assigned()?
            && let Some(v) = &a.failed
        {
            info!(failed = %v.config, "verdict cleared");
            self.store.set_assigned(&Assigned { failed: None, ..a })?;
        }
        // A retry of a config that failed already stays quiet unless the outcome changes.
        let retry = o.report.state == Some(State::Degraded)
            && o.report.observed.as_deref() == Some(config.to_string().as_str());
        if !retry {
            let wanted = Self::transitional(o, State::Downloading, format!("downloading {config}"));
            self.publish(node, &wanted).await?;
        }
        match self.fetch_and_validate(node, &config).await {
            Ok((checkpoint, note)) => {
                self.memory.retry = None;
                self.memory.download_attempts = 0;
                let assigned = Assigned::new(
                    checkpoint,
                    ApplyPhase::Checkpointed,
                    unix_now(),
                    self.current_checkpoint()?,
                );
                self.store.set_assigned(&assigned)?;
                let message = match &note {
                    Some(n) => format!("applying {config}; {n}"),
                    None => format!("applying {config}"),
                };
                match note {
                    Some(n) => self.memory.notes.insert(config.clone(), n),
                    None => self.memory.notes.remove(&config),
                };
                let wanted = Self::transitional(o, State::Applying, message);
                self.publish(node, &wanted).await?;
            }
            Err(f) => {
                let message = format!("{}: {}", f.reason, f.detail);
                warn!(config = %config, reason = f.reason, detail = %f.detail, "config not applied");
                let now = unix_now();
                let delay = if f.download {
                    let n = self.memory.download_attempts.min(16);
                    self.memory.download_attempts += 1;
                    (DOWNLOAD_BACKOFF.0 << n).min(DOWNLOAD_BACKOFF.1)
                } else {
                    if !retry {
                        self.metrics.applied(Outcome::Rejected, None);
                    }
                    self.memory.apply_started = None;
                    // The content is immutable; only a change on the node (flags, files)
                    // can make it pass, so look again only now and then.
                    secs_ceil(self.config.resync_interval) * REJECTED_RETRY_FACTOR
                };
                self.memory.retry = Some(Retry {
                    config: config.clone(),
                    at: now + delay,
                });
                self.memory.retry_is_download = f.download;
                let wanted = Self::transitional(o, State::Degraded, message);
                let event = f
                    .download
                    .then_some((EventType::Warning, event_reason::DOWNLOAD_FAILED));
                self.publish_as(node, &wanted, event).await?;
            }
        }
        Ok(())
    }

    /// Gets the ConfigMap, checkpoints it and validates it; the checkpoint and the note
    /// (flag overrides and warnings) for the message.
    async fn fetch_and_validate(
        &mut self,
        node: &Node,
        config: &ConfigRef,
    ) -> Result<(Checkpoint, Option<String>), Failure> {
        let cm = self.configmap_now(config).await?;
        let payload = payload_bytes(&cm, config)?;
        let uid = cm.metadata.uid.clone().unwrap_or_default();
        let rv = cm.metadata.resource_version.clone().unwrap_or_default();
        let checkpoint = self.store.save(config, &uid, &rv, &payload).map_err(|e| {
            Failure::download(format!("failed to checkpoint {config}: {}", chain(&e)))
        })?;
        let ctx = self.node_context(node).map_err(|e| Failure {
            reason: reason::INTERNAL_ERROR,
            detail: chain(&e),
            download: false,
        })?;
        let validated = validate::validate_payload(&payload, &ctx)?;
        for c in &validated.created_cgroups {
            info!(cgroup = %c, "created reserved cgroup");
        }
        let mut parts = Vec::new();
        if !validated.overrides.is_empty() {
            let list: Vec<String> = validated
                .overrides
                .iter()
                .map(|ov| {
                    let file = ov
                        .file_value
                        .as_ref()
                        .map(|v| v.to_string())
                        .unwrap_or_else(|| "unset".into());
                    format!(
                        "{} ({} gives {}, not {file})",
                        ov.field, ov.flag, ov.flag_value
                    )
                })
                .collect();
            let text = format!(
                "the kubelet's command-line flags override {}: {}",
                if list.len() == 1 {
                    "1 field"
                } else {
                    "these fields"
                },
                list.join(", ")
            );
            self.reporter
                .event(
                    node,
                    EventType::Warning,
                    event_reason::FLAG_OVERRIDE,
                    &format!("{config}: {text}"),
                )
                .await;
            parts.push(text);
        }
        if !validated.created_cgroups.is_empty() {
            parts.push(format!(
                "created the reserved cgroups {}",
                validated.created_cgroups.join(", ")
            ));
        }
        for w in &validated.warnings {
            parts.push(format!("warning: {w}"));
        }
        let note = if parts.is_empty() {
            None
        } else {
            Some(parts.join("; "))
        };
        Ok((checkpoint, note))
    }

    /// Watches the ConfigMap `target` names (stopping the watch of any other), or none.
    fn watch_configmap(&mut self, target: Option<&ConfigRef>) {
        if target == self.configmap.as_ref().map(|(w, _)| w.target()) {
            return;
        }
        self.configmap = target
            .and_then(|t| ConfigMapWatch::start(self.client.clone(), t))
            .map(|w| {
                let rx = w.receiver();
                (w, rx)
            });
    }

    /// The ConfigMap, from its watch (started if needed), once the watch has listed.
    async fn configmap_now(&mut self, config: &ConfigRef) -> Result<ConfigMap, Failure> {
        self.watch_configmap(Some(config));
        let Some((_, rx)) = self.configmap.as_mut() else {
            return Err(Failure::download(format!("{config} is not a ConfigMap")));
        };
        let deadline = tokio::time::Instant::now() + DOWNLOAD_TIMEOUT;
        let state: ConfigMapState = loop {
            let st = rx.borrow_and_update().clone();
            if st.listed {
                break st;
            }
            tokio::select! {
                changed = rx.changed() => if changed.is_err() { break st },
                _ = tokio::time::sleep_until(deadline) => break st,
            }
        };
        if !state.listed {
            return Err(Failure::download(format!(
                "no answer for ConfigMap {config} within {}: {}",
                humantime::format_duration(DOWNLOAD_TIMEOUT),
                state
                    .error
                    .as_deref()
                    .unwrap_or("the watch has not listed yet")
            )));
        }
        state
            .object
            .ok_or_else(|| Failure::download(format!("ConfigMap {config} not found")))
    }

    async fn return_to_local(&mut self, node: &Node, o: &Observed) -> Result<(), AgentError> {
        let original = self.store.local_original()?.ok_or_else(|| {
            AgentError::Setup("the node's original config was never saved".into())
        })?;
        let assigned = Assigned::new(
            Checkpoint::local(&original),
            ApplyPhase::Checkpointed,
            unix_now(),
            self.current_checkpoint()?,
        );
        self.store.set_assigned(&assigned)?;
        self.memory.apply_started = Some((ConfigRef::Local, Instant::now()));
        let wanted = Self::transitional(
            o,
            State::Applying,
            "returning to the node's local config".into(),
        );
        self.publish(node, &wanted).await
    }

    fn in_flight(&self) -> Result<Assigned, AgentError> {
        self.assigned()?
            .ok_or_else(|| AgentError::Setup("meta/assigned disappeared during an apply".into()))
    }

    fn set_phase(&self, a: &Assigned, phase: ApplyPhase) -> Result<Assigned, AgentError> {
        let next = Assigned {
            phase,
            since: unix_now(),
            ..a.clone()
        };
        self.store.set_assigned(&next)?;
        debug!(config = %next.checkpoint.config, phase = %phase, "phase persisted");
        Ok(next)
    }

    /// The kubelet's root directory (`--root-dir`, a host path), where its state files live.
    fn kubelet_root_dir(&self) -> String {
        let flags: Option<KubeletFlags> = match read_flags(
            &self.config.flag_source,
            &self.config.host_root,
        ) {
            Ok(f) => Some(f),
            Err(e) => {
                warn!(error = %chain(&e), default = DEFAULT_ROOT_DIR, "cannot read the kubelet's flags for --root-dir; using the default");
                None
            }
        };
        flags
            .as_ref()
            .and_then(|f| f.value("root-dir").map(str::to_string))
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| DEFAULT_ROOT_DIR.to_string())
    }

    /// Which kubelet state files writing `payload` makes stale: from the node's files as
    /// they are (the config the kubelet runs, or would run at its next start) and the
    /// config the payload gives, and from what the state files themselves record. Never
    /// fails: when the new config cannot be computed, nothing is listed (logged).
    fn decide_state_files(&self, node: &Node, payload: &[u8], root_dir: &str) -> Vec<String> {
        let ctx = match self.node_context(node) {
            Ok(c) => c,
            Err(e) => {
                warn!(error = %chain(&e), "cannot read the node's kubelet setup; no kubelet state file will be removed");
                return Vec::new();
            }
        };
        let new = match validate::effective_config(Some(payload), &ctx) {
            Ok(e) => e.config,
            Err(r) => {
                warn!(reason = %r, "the config to write does not load; no kubelet state file will be removed");
                return Vec::new();
            }
        };
        let old = match validate::effective_config(None, &ctx) {
            Ok(e) => Some(e.config),
            Err(r) => {
                debug!(reason = %r, "the node's current config does not load; judging the state files by what they record");
                None
            }
        };
        state_files_for_change(&self.config.host_root, root_dir, old.as_ref(), &new)
    }

    /// Removes the kubelet state files `names` (idempotent: a missing file is fine).
    fn remove_state_files(&self, names: &[String], root_dir: &str) -> Result<(), AgentError> {
        if names.is_empty() {
            return Ok(());
        }
        remove_state_files(&self.config.host_root, root_dir, names).map_err(|source| {
            AgentError::Io {
                op: "remove kubelet state files in",
                path: PathBuf::from(root_dir),
                source,
            }
        })?;
        Ok(())
    }

    /// Writes the assigned config: `Checkpointed` -> `Written`. Every step can be redone
    /// after a crash at any instant, and no crash leaves the node with a config the
    /// kubelet would refuse at its next start:
    ///
    /// 1. Decide which kubelet state files the change makes stale (a `cpuManagerPolicy` or
    ///    `memoryManagerPolicy` change, or a change of what the `static` policies reserve)
    ///    and persist the list in `meta/assigned`, phase still `Checkpointed`, before
    ///    anything on the node changes. It is decided from the node's files as they still
    ///    are; once the file is overwritten the old config cannot be read back from it,
    ///    so a resumed apply must find the list in the checkpoint.
    /// 2. Remove those files, **before** the config is written. The kubelet refuses to
    ///    start when a state file records another policy than its config's. Removed
    ///    after the write, a crash in between would leave the new config with the old
    ///    state file: the next start of the kubelet, by anyone (systemd after a kubelet
    ///    crash, a reboot, a person), fails, and without a running agent nothing rolls it
    ///    back. Removed first, the worst a crash leaves is the old config without its
    ///    state file, which the kubelet handles: a kubelet that starts and finds no
    ///    checkpoint creates a fresh one for the policy it runs (cpumanager
    ///    `restoreState`: `ErrCheckpointNotFound` -> `storeState`), so it comes back under
    ///    the old config as before, and a resumed agent removes the file again. A kubelet
    ///    that keeps running keeps its state in memory and writes all of it back, under
    ///    its old policy, on its next change (with the `static` policies, when a pod with
    ///    exclusive CPUs or memory comes or goes); so [`Driver::restart`] removes the
    ///    listed files once more right before the restart, which leaves only the restart
    ///    itself as a window. Closing that would need the kubelet stopped while the files
    ///    go, which a crashed agent would leave stopped.
    /// 3. Write the config atomically.
    /// 4. Record the pods that are Ready now, with phase `Written`: after the restart,
    ///    verification waits for them to be Ready again, also in a restarted agent.
    ///
    /// `o` is `None` when the Node is not known (a rollback carried on without it): then
    /// nothing is reported.
    #[instrument(skip_all)]
    async fn write(&mut self, node: &Node, o: Option<&Observed>) -> Result<(), AgentError> {
        let mut a = self.in_flight()?;
        let payload = self.payload_of(&a.checkpoint)?;
        if a.checkpoint.config != ConfigRef::Local {
            let original = match std::fs::read(&self.target_file) {
                Ok(b) => b,
                // Drop-in mode without a drop-in of ours: the local config is "no file".
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
                Err(source) => {
                    return Err(AgentError::Io {
                        op: "read",
                        path: self.target_file.clone(),
                        source,
                    });
                }
            };
            if self.store.save_local_original(&original)? {
                info!(path = %self.target_file.display(), "saved the node's own config");
            }
        }
        let root_dir = self.kubelet_root_dir();
        let state_files = match &a.state_files {
            Some(list) => list.clone(),
            None => {
                let list = self.decide_state_files(node, &payload, &root_dir);
                a = Assigned {
                    state_files: Some(list.clone()),
                    ..a
                };
                self.store.set_assigned(&a)?;
                if !list.is_empty() {
                    info!(files = ?list, root_dir = %root_dir, "the change makes kubelet state files stale; they are removed before the write");
                }
                list
            }
        };
        self.remove_state_files(&state_files, &root_dir)?;
        self.write_target(&payload)?;
        info!(config = %a.checkpoint.config, path = %self.target_file.display(), sha256 = %a.checkpoint.sha256, "config written");
        let listed = tokio::time::timeout(
            POD_LIST_TIMEOUT,
            ready::pods_on(&self.client, &self.config.node_name),
        )
        .await;
        let ready_pods = match listed {
            Ok(Ok(pods)) => ready::ready_pods(&pods).into_iter().collect(),
            Ok(Err(e)) => {
                warn!(error = %e, "cannot list the node's pods; their readiness will not be waited for");
                Vec::new()
            }
            Err(_) => {
                warn!(timeout = ?POD_LIST_TIMEOUT, "no pod list in time; their readiness will not be waited for");
                Vec::new()
            }
        };
        let a = Assigned { ready_pods, ..a };
        self.set_phase(&a, ApplyPhase::Written)?;
        if let Some(o) = o
            && Self::in_flight_is_desired(o, &a.checkpoint.config)
        {
            let wanted = Self::transitional(
                o,
                State::Applying,
                format!(
                    "wrote {}; restarting the kubelet",
                    self.target_file.display()
                ),
            );
            self.publish(node, &wanted).await?;
        }
        Ok(())
    }

    /// Writes `payload` atomically; in drop-in mode an empty payload (the local config)
    /// removes the drop-in.
    fn write_target(&self, payload: &[u8]) -> Result<(), AgentError> {
        let io = |op: &'static str, path: &std::path::Path| {
            let path = path.to_path_buf();
            move |source| AgentError::Io { op, path, source }
        };
        if payload.is_empty() && matches!(self.placement, Placement::DropIn { .. }) {
            match std::fs::remove_file(&self.target_file) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io("remove", &self.target_file)(e)),
            }
            if let Some(dir) = self.target_file.parent() {
                std::fs::File::open(dir)
                    .and_then(|f| f.sync_all())
                    .map_err(io("sync directory", dir))?;
            }
            return Ok(());
        }
        if let Some(dir) = self.target_file.parent() {
            std::fs::create_dir_all(dir).map_err(io("create directory", dir))?;
        }
        write_atomic(&self.target_file, payload).map_err(io("write", &self.target_file))
    }

    /// Restarts the kubelet: `Written` -> `Restarted`. The state files the apply lists are
    /// removed once more first: the kubelet that ran until now may have written them
    /// back under its old policy since the write (see [`Driver::write`]), for instance
    /// while this agent was down between the two steps. When this step is redone after a
    /// crash that followed the restart itself, the file removed is the one the new
    /// kubelet just created; it creates it again, losing only what the policy change
    /// discards anyway.
    ///
    /// On a rollback, the report of it follows the restart command (bounded, never
    /// failing the step): the kubelet is already coming back on the fallback.
    #[instrument(skip_all)]
    async fn restart(&mut self, node: &Node, o: Option<&Observed>) -> Result<(), AgentError> {
        let a = self.in_flight()?;
        if let Some(names) = a.state_files.as_deref()
            && !names.is_empty()
        {
            let root_dir = self.kubelet_root_dir();
            self.remove_state_files(names, &root_dir)?;
        }
        let result = self.kubelet.restart().await;
        let next = self.set_phase(&a, ApplyPhase::Restarted)?;
        if let Err(e) = result {
            let why = cap(
                &format!("failed to restart the kubelet: {}", brief(&e)),
                MAX_REASON,
            );
            error!(reason = %why, error = %chain(&e), "restart failed");
            self.record_failure(node, &next, why).await;
            return Ok(());
        }
        let Some(o) = o else { return Ok(()) };
        if let Some(v) = &a.failed {
            let message = plan::rolling_back_message(&v.reason, &a.checkpoint.config);
            if Self::in_flight_is_desired(o, &v.config) {
                let wanted = Self::transitional(o, State::RolledBack, message);
                self.publish_best_effort(node, &wanted).await;
            } else {
                // The failed apply is no longer what the node should run (desired-config
                // changed while it ran): the Node's report is about the new desired
                // config, so this rollback is an Event only.
                self.event_best_effort(
                    node,
                    EventType::Warning,
                    event_reason::ROLLED_BACK,
                    &format!("{}: {message}", v.config),
                )
                .await;
            }
        } else if Self::in_flight_is_desired(o, &a.checkpoint.config) {
            let wanted = Self::transitional(
                o,
                State::Verifying,
                format!(
                    "kubelet restarted; waiting up to {} for it to run {}",
                    human(o.health_timeout),
                    a.checkpoint.config
                ),
            );
            self.publish(node, &wanted).await?;
        }
        Ok(())
    }

    /// Records a failed verification (or restart) of the assignment `a` in flight, for
    /// [`decide`]. When `a` is a rollback's fallback, this is the rollback failing: an
    /// Event `KubeletConfigRollbackFailed` says so (once per attempt; bounded, it never
    /// holds up anything), and the report (state `RolledBack`, a message that a person
    /// must act) follows from the next decision.
    async fn record_failure(&mut self, node: &Node, a: &Assigned, reason: String) {
        let again = self
            .memory
            .verification
            .as_ref()
            .is_some_and(|f| f.config == a.checkpoint.config && f.since == a.since);
        self.memory.verification = Some(VerifyFailure {
            config: a.checkpoint.config.clone(),
            since: a.since,
            reason: reason.clone(),
            at: unix_now(),
        });
        if again {
            return;
        }
        let view = self.assignment_view(a, node);
        if let Some(f) = &view.failed {
            let message = plan::rollback_failed_message(f, &view, &reason);
            error!(failed = %f.config, fallback = %view.config, %message, "the fallback failed too");
            self.event_best_effort(
                node,
                EventType::Warning,
                event_reason::ROLLBACK_FAILED,
                &format!("{}: {message}", f.config),
            )
            .await;
        }
    }

    /// Verifies the kubelet runs the assigned config: `Restarted` -> `Verified`, or a
    /// [`VerifyFailure`]. The config is the checkpoint's, the bytes the agent wrote, never
    /// whatever the file holds now: the file must still be those bytes (a file put back
    /// by hand fails verification, and the apply is rolled back rather than taken as
    /// done), and healthz answers and configz shows the checkpoint's config (without a
    /// configz URL: the file read back once healthz answers), by the deadline; the Node
    /// is Ready by the same deadline; then the pods recorded as Ready before the restart
    /// get up to the health timeout to be Ready again (never a failure).
    #[instrument(skip_all, fields(deadline))]
    async fn verify(&mut self, node: &Node, o: &Observed, deadline: u64) -> Result<(), AgentError> {
        let a = self.in_flight()?;
        let detail = match self.kubelet_runs(node, &a, deadline).await? {
            Check::Runs => None,
            Check::Fails(detail) => Some(detail),
            // Deleted: nothing to verify against. The phase stays `Restarted`, and the
            // main loop waits for the Node to come back (see `Driver::run`).
            Check::NodeGone => return Ok(()),
        };
        if let Some(detail) = detail {
            let reason = cap(
                &format!(
                    "{} within {}: {detail}",
                    reason::UNHEALTHY,
                    human(o.health_timeout)
                ),
                MAX_REASON,
            );
            warn!(config = %a.checkpoint.config, %reason, "verification failed");
            self.record_failure(node, &a, reason).await;
            return Ok(());
        }
        // The pods that were Ready before the restart (recorded in `meta/assigned`, so a
        // restarted agent waits for them too), for up to the health timeout.
        let mut pod_note = None;
        if !a.ready_pods.is_empty() {
            let before: BTreeSet<String> = a.ready_pods.iter().cloned().collect();
            let end = tokio::time::Instant::now() + Duration::from_secs(o.health_timeout);
            loop {
                let unready = match ready::pods_on(&self.client, &self.config.node_name).await {
                    Ok(pods) => ready::still_unready(&before, &pods),
                    Err(e) => {
                        warn!(error = %e, "cannot list the node's pods");
                        Vec::new()
                    }
                };
                if unready.is_empty() {
                    break;
                }
                if tokio::time::Instant::now() >= end {
                    pod_note = Some(cap(
                        &format!(
                            "pods Ready before the restart and not Ready {} after it: {}",
                            human(o.health_timeout),
                            unready.join(", ")
                        ),
                        MAX_REASON,
                    ));
                    break;
                }
                tokio::time::sleep(POD_POLL).await;
            }
        }
        // The recorded pods have served their purpose.
        let a = Assigned {
            ready_pods: Vec::new(),
            ..a
        };
        let done = self.set_phase(&a, ApplyPhase::Verified)?;
        self.memory.verification = None;
        let config = done.checkpoint.config.clone();
        info!(config = %config, "kubelet verified");
        if let Some(n) = pod_note {
            let note = match self.memory.notes.remove(&config) {
                Some(prev) => format!("{prev}; {n}"),
                None => n,
            };
            self.memory.notes.insert(config.clone(), note);
        }
        if Self::in_flight_is_desired(o, &config) {
            let took = self
                .memory
                .apply_started
                .take()
                .filter(|(c, _)| *c == config)
                .map(|(_, t)| t.elapsed());
            self.metrics.applied(Outcome::Done, took);
        }
        // A finished rollback is reported by the next decision (`RolledBack`, `... rolled
        // back to <config>`), from the verdict in `meta/assigned`, retried until it lands.
        if let Err(e) = self.store.prune(&[]) {
            warn!(error = %chain(&e), "pruning old checkpoints failed");
        }
        Ok(())
    }

    /// Whether the kubelet runs the checkpoint of `a` (see [`Driver::verify`]).
    async fn kubelet_runs(
        &mut self,
        node: &Node,
        a: &Assigned,
        deadline: u64,
    ) -> Result<Check, AgentError> {
        let budget = Duration::from_secs(deadline.saturating_sub(unix_now()).max(1));
        // The file first: one that is not the checkpoint's (put back by hand, or by a
        // config-management run) is not the config being verified, whatever the kubelet
        // says about it.
        if let Some(why) = self.read_back(&a.checkpoint)? {
            return Ok(Check::Fails(why));
        }
        let payload = self.payload_of(&a.checkpoint)?;
        let expected = match self
            .node_context(node)
            .map_err(|e| chain(&e))
            .and_then(|ctx| {
                validate::effective_config(Some(&payload), &ctx)
                    .map(|e| e.config)
                    .map_err(|r| r.to_string())
            }) {
            Ok(c) => c,
            Err(why) => {
                return Ok(Check::Fails(format!(
                    "the written config does not load: {why}"
                )));
            }
        };
        if let Err(e) = self.kubelet.wait_ready(&expected, budget).await {
            let mut detail = match e {
                KubeletError::NotReady { last, .. } => last,
                other => brief(&other),
            };
            // What the kubelet (or the node controller) says on the Node: on a kubelet
            // that exited, its reason.
            if let Some(n) = self.node()
                && let Some((status, message)) = ready::node_ready(&n)
                && status != "True"
                && !message.is_empty()
            {
                detail = format!(
                    "{detail}; node Ready={status}: {}",
                    cap(&message, MAX_NODE_MESSAGE)
                );
            }
            return Ok(Check::Fails(detail));
        }
        // Once more: the file the kubelet loads at its next start is still the config.
        if let Some(why) = self.read_back(&a.checkpoint)? {
            return Ok(Check::Fails(why));
        }
        // The Node Ready again, by the same deadline.
        let end =
            tokio::time::Instant::now() + Duration::from_secs(deadline.saturating_sub(unix_now()));
        loop {
            let Some(current) = self.fresh_node() else {
                return Ok(Check::NodeGone);
            };
            if ready::is_node_ready(&current) {
                return Ok(Check::Runs);
            }
            if tokio::time::Instant::now() >= end {
                let why = ready::node_ready(&current)
                    .map(|(s, m)| format!("node Ready={s}: {}", cap(&m, MAX_NODE_MESSAGE)))
                    .unwrap_or_else(|| "the node has no Ready condition".into());
                return Ok(Check::Fails(why));
            }
            tokio::select! {
                _ = self.node_rx.changed() => {}
                _ = tokio::time::sleep_until(end) => {}
            }
        }
    }

    /// The assignment in flight failed verification: record the verdict and assign the
    /// fallback `to` (phase `Checkpointed`), in one atomic write of `meta/assigned`, and
    /// nothing else. The next steps write the fallback, restart the kubelet and verify
    /// it, and only then is the rollback reported: nothing here or in those steps waits
    /// for the API server, so a kubelet that cannot start is back on its fallback even
    /// while the API server is unreachable, and a restarted agent never tries the failed
    /// config again (the verdict is on the node's disk, not only on the Node object).
    #[instrument(skip(self, o), fields(to = %to))]
    fn roll_back(&mut self, o: &Observed, to: ConfigRef, reason: String) -> Result<(), AgentError> {
        let failed = self.in_flight()?;
        let target = if to == ConfigRef::Local {
            let original = self.store.local_original()?.ok_or_else(|| {
                AgentError::Setup("the node's original config was never saved".into())
            })?;
            Checkpoint::local(&original)
        } else {
            self.last_known_good()?
                .filter(|c| c.config == to)
                .ok_or_else(|| {
                    AgentError::Setup(format!("last-known-good {to} is not checkpointed"))
                })?
        };
        error!(failed = %failed.checkpoint.config, to = %to, %reason, desired = Self::in_flight_is_desired(o, &failed.checkpoint.config), "rolling back");
        let now = unix_now();
        let verdict = Verdict {
            config: failed.checkpoint.config.clone(),
            reason,
            at: now,
            reported_to: None,
        };
        self.store.set_assigned(&Assigned {
            failed: Some(verdict),
            ..Assigned::new(
                target,
                ApplyPhase::Checkpointed,
                now,
                Some(failed.checkpoint.clone()),
            )
        })?;
        self.memory.verification = None;
        let took = self.memory.apply_started.take().map(|(_, t)| t.elapsed());
        self.metrics.applied(Outcome::RolledBack, took);
        Ok(())
    }

    /// Without the Node (not listed yet, or deleted), carries a rollback in flight as far
    /// as the kubelet restart: the fallback's write and restart are decided by
    /// `meta/assigned` alone, and must not wait for an API server that may be what keeps
    /// the Node from the agent. Verification needs the Node's `Ready` condition; it
    /// follows, with the report, once the Node is known.
    async fn roll_back_without_node(&mut self) -> Result<(), AgentError> {
        let placeholder = Node {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(self.config.node_name.clone()),
                ..Default::default()
            },
            ..Node::default()
        };
        loop {
            let Some(a) = self.assigned()? else {
                return Ok(());
            };
            if a.failed.is_none() {
                return Ok(());
            }
            match a.phase {
                ApplyPhase::Checkpointed => {
                    warn!(fallback = %a.checkpoint.config, "writing the fallback without the Node");
                    self.write(&placeholder, None).await?;
                }
                ApplyPhase::Written => {
                    warn!(fallback = %a.checkpoint.config, "restarting the kubelet on the fallback without the Node");
                    self.restart(&placeholder, None).await?;
                }
                ApplyPhase::Restarted | ApplyPhase::Verified => return Ok(()),
            }
        }
    }

    /// The node runs its local config and its owner changed the file (replace mode): the
    /// file as it is now becomes the config a return to local (or a rollback to local)
    /// writes back, so that a `kubeadm upgrade` is not undone later.
    fn refresh_local(&mut self, found: &str) -> Result<(), AgentError> {
        let bytes = std::fs::read(&self.target_file).map_err(|source| AgentError::Io {
            op: "read",
            path: self.target_file.clone(),
            source,
        })?;
        if self.store.refresh_local_original(&bytes)? {
            info!(path = %self.target_file.display(), sha256 = %found, "the node's own config changed while it ran it; saved it again as the config to return to");
        }
        Ok(())
    }

    #[instrument(skip(self, node, o))]
    async fn restore_drift(
        &mut self,
        node: &Node,
        o: &Observed,
        found: Option<String>,
    ) -> Result<(), AgentError> {
        let a = self.in_flight()?;
        let what = match &found {
            Some(sha) => format!(
                "changed on the node (sha256 {sha}, expected {})",
                a.checkpoint.sha256
            ),
            None => "removed on the node".to_string(),
        };
        let message = format!(
            "{} was {what}; restoring {}",
            self.target_file.display(),
            a.checkpoint.config
        );
        warn!(%message, "drift");
        self.reporter
            .event(node, EventType::Warning, event_reason::DRIFT, &message)
            .await;
        self.metrics.drift_restored();
        // A new write: the state files are decided again against the file as it is now,
        // and the pods are recorded again.
        let again = Assigned {
            state_files: None,
            ready_pods: Vec::new(),
            ..a.clone()
        };
        self.set_phase(&again, ApplyPhase::Checkpointed)?;
        if Self::in_flight_is_desired(o, &a.checkpoint.config) {
            let note = match self.memory.notes.get(&a.checkpoint.config) {
                Some(prev) => format!("{prev}; {message}"),
                None => message.clone(),
            };
            self.memory.notes.insert(a.checkpoint.config.clone(), note);
            let wanted = Self::transitional(o, State::Applying, message);
            self.publish(node, &wanted).await?;
        }
        Ok(())
    }

    #[instrument(skip(self, node))]
    async fn promote(&mut self, node: &Node, config: ConfigRef) -> Result<(), AgentError> {
        let a = self.in_flight()?;
        if config == ConfigRef::Local {
            self.store.clear_last_known_good()?;
        } else {
            self.store.set_last_known_good(&a.checkpoint)?;
        }
        info!(config = %config, "last-known-good updated");
        self.reporter
            .event(
                node,
                EventType::Normal,
                event_reason::LKG_UPDATED,
                &format!("last-known-good is now {config}"),
            )
            .await;
        if let Err(e) = self.store.prune(&[]) {
            warn!(error = %chain(&e), "pruning old checkpoints failed");
        }
        Ok(())
    }
}

/// The `kubelet` key of the ConfigMap (`data`, or `binaryData`).
fn payload_bytes(cm: &ConfigMap, config: &ConfigRef) -> Result<Vec<u8>, Failure> {
    if let Some(text) = cm.data.as_ref().and_then(|d| d.get(CONFIGMAP_KEY)) {
        return Ok(text.as_bytes().to_vec());
    }
    if let Some(bytes) = cm.binary_data.as_ref().and_then(|d| d.get(CONFIGMAP_KEY)) {
        return Ok(bytes.0.clone());
    }
    Err(Failure {
        reason: reason::LOAD_ERROR,
        detail: format!("ConfigMap {config} has no key {CONFIGMAP_KEY:?}"),
        download: false,
    })
}
