//! The agent's loop around [`decide`]: each pass takes the newest Node, observes the node
//! ([`super::observe`]), decides, and carries the step out ([`super::steps`]), which
//! persists its phase in the checkpoint store before the next pass; nothing here decides
//! what comes next. Without a Node, a rollback in flight is still carried as far as the
//! kubelet's restart.

use std::collections::HashMap;
use std::mem::Discriminant;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kubelet_gitops_core::message::error_chain;
use kubelet_gitops_core::protocol::{ConfigRef, reason};
use tokio::sync::watch as channel;
use tracing::{debug, error, info, warn};

use super::AgentError;
use super::admin::AdminState;
use super::context::NodeSetup;
use super::decide::{Observed, Retry, Step, VerifyFailure, decide};
use super::metrics::Metrics;
use crate::args::Config;
use crate::checkpoint::CheckpointStore;
use crate::config_file::ConfigFile;
use crate::kubelet::Kubelet;
use crate::report::{EventType, Reporter, event_reason};
use crate::watch::{ConfigMapState, ConfigMapWatch, NodeWatch};

/// Back-off after a step failed with an error: first and longest.
const ERROR_BACKOFF: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(60));
/// How soon a rollback carried on without the Node is tried again after a failure.
const OFFLINE_RETRY: Duration = Duration::from_secs(5);
/// Bound on the report of the node's kubelet set-up: it never holds up a pass.
const SETUP_REPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// The pieces a [`Driver`] runs with.
pub(crate) struct Parts {
    pub config: Config,
    pub client: Client,
    pub store: CheckpointStore,
    pub kubelet: Kubelet,
    pub reporter: Reporter,
    pub nodes: NodeWatch,
    pub file: ConfigFile,
    pub metrics: Metrics,
    pub admin: AdminState,
}

/// What the agent keeps in memory. Losing it (a restart) costs at most one extra retry or
/// verification; see [`super::decide`].
#[derive(Default)]
pub(super) struct Memory {
    pub(super) verification: Option<VerifyFailure>,
    pub(super) retry: Option<Retry>,
    pub(super) retry_is_download: bool,
    pub(super) download_attempts: u32,
    /// Flag overrides, warnings and pod notes per config, for the Done message.
    pub(super) notes: HashMap<ConfigRef, String>,
    /// A Node was seen (so its absence later means it was deleted).
    node_seen: bool,
    /// The Node is deleted (logged once per deletion).
    node_gone: bool,
    /// When the apply of the desired config started.
    pub(super) apply_started: Option<(ConfigRef, Instant)>,
    /// The Node as our last write returned it.
    pub(super) written: Option<Node>,
    /// After a failed report of the node's set-up: not before then again (and said once).
    setup_retry_at: Option<Instant>,
    error_backoff: ErrorBackoff,
}

/// The wait after a step failed with an error: it doubles while the same kind of step
/// keeps failing ([`ERROR_BACKOFF`]), and starts again from the first when another kind
/// fails: a pass that failed only to report (a flaky API server) while its work moved
/// the node on (a download, then a write, then a restart) is not held to the back-off of
/// the step before. The kind, not the whole step: an idle report whose content or due
/// time changes while the API server stays down still backs off to a minute, so that a
/// fleet of agents does not hammer a recovering server every second.
#[derive(Debug, Default)]
pub(super) struct ErrorBackoff {
    /// The kind of step that failed last (`None`: the observation failed) and the wait
    /// after it.
    last: Option<(Option<Discriminant<Step>>, Duration)>,
}

impl ErrorBackoff {
    /// The wait after `step` failed.
    pub(super) fn failed(&mut self, step: Option<&Step>) -> Duration {
        let kind = step.map(std::mem::discriminant);
        let delay = match &self.last {
            Some((last, d)) if *last == kind => (*d * 2).min(ERROR_BACKOFF.1),
            _ => ERROR_BACKOFF.0,
        };
        self.last = Some((kind, delay));
        delay
    }

    /// A pass succeeded.
    pub(super) fn reset(&mut self) {
        self.last = None;
    }
}

/// The agent's loop around [`decide`].
pub struct Driver {
    pub(super) config: Arc<Config>,
    pub(super) client: Client,
    pub(super) store: CheckpointStore,
    pub(super) kubelet: Kubelet,
    pub(super) reporter: Reporter,
    /// Holds the Node watch task (its receiver is `node_rx`).
    _nodes: NodeWatch,
    pub(super) node_rx: channel::Receiver<Option<Node>>,
    /// The watch on the ConfigMap still to be downloaded, and our receiver of it.
    pub(super) configmap: Option<(ConfigMapWatch, channel::Receiver<ConfigMapState>)>,
    /// The kubelet's config file (or the agent's drop-in).
    pub(super) file: ConfigFile,
    pub(super) metrics: Metrics,
    pub(super) admin: AdminState,
    pub(super) memory: Memory,
}

/// What a pass leaves the loop to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Next {
    /// Decide again at once: the step changed something.
    Decide,
    /// Nothing until the Node or the ConfigMap changes, `wake_at` (unix seconds) or the
    /// resync interval.
    Wait { wake_at: Option<u64> },
}

/// Now, in unix seconds.
pub(super) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `d` in whole seconds, rounded up.
pub(super) fn secs_ceil(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// `secs` for people: `2m`.
pub(super) fn human(secs: u64) -> String {
    humantime::format_duration(Duration::from_secs(secs)).to_string()
}

fn resource_version(node: &Node) -> Option<u64> {
    node.metadata.resource_version.as_deref()?.parse().ok()
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
            file,
            metrics,
            admin,
        } = parts;
        let node_rx = nodes.receiver();
        Driver {
            config: Arc::new(config),
            client,
            store,
            kubelet,
            reporter,
            _nodes: nodes,
            node_rx,
            configmap: None,
            file,
            metrics,
            admin,
            memory: Memory::default(),
        }
    }

    /// What this pass reads of the node's kubelet setup ([`NodeSetup`]), for `node`.
    pub(super) fn setup(&self, node: Option<&Node>) -> NodeSetup {
        NodeSetup::new(
            self.config.clone(),
            self.file.placement().clone(),
            node.and_then(|n| n.status.as_ref())
                .and_then(|s| s.capacity.clone()),
        )
    }

    /// Decides and acts until dropped.
    pub async fn run(&mut self) -> Result<(), AgentError> {
        loop {
            let Some(node) = self.fresh_node() else {
                self.without_node().await?;
                continue;
            };
            if std::mem::replace(&mut self.memory.node_gone, false) {
                info!(node = %self.config.node_name, uid = ?node.metadata.uid, "the Node is back");
            }
            self.memory.node_seen = true;
            let setup = self.setup(Some(&node));
            self.report_setup(&node, &setup).await;
            let (step, result) = match self.observe(&node, &setup).await {
                Ok(observed) => {
                    let step = decide(&observed);
                    debug!(?step, "decided");
                    let result = self.execute(step.clone(), &node, &observed, &setup).await;
                    (Some(step), result)
                }
                Err(e) => (None, Err(e)),
            };
            match result {
                Ok(Next::Decide) => self.memory.error_backoff.reset(),
                Ok(Next::Wait { wake_at }) => {
                    self.memory.error_backoff.reset();
                    self.wait(wake_at).await;
                }
                Err(e) => {
                    let delay = self.memory.error_backoff.failed(step.as_ref());
                    self.metrics.error();
                    let message = error_chain(&e);
                    // Within a quarter either side, so that agents that failed together
                    // (an API server going away) do not all come back in the same second.
                    let wait = delay.mul_f64(0.75 + 0.5 * kubelet_gitops_core::retry::jitter());
                    error!(error = %message, retry_in = ?wait, "step failed");
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
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    /// Writes the node's kubelet set-up on the Node ([`crate::validate::node_setup`]) when
    /// the Node does not show it: at the first pass, after a change on the node (its
    /// flags, its drop-ins), or after someone removed it. The reconciler checks commits
    /// against it. Best effort: a failure is logged and the next pass tries again; nothing
    /// waits for it.
    async fn report_setup(&mut self, node: &Node, setup: &NodeSetup) {
        let Ok(ctx) = setup.context() else {
            // The flags cannot be read: validation says so when it runs.
            return;
        };
        let retry_at = self.memory.setup_retry_at;
        if retry_at.is_some_and(|at| Instant::now() < at) {
            return;
        }
        let wanted = crate::validate::node_setup(ctx).to_annotation();
        let live = self.node().unwrap_or_else(|| node.clone());
        let sent = tokio::time::timeout(
            SETUP_REPORT_TIMEOUT,
            self.reporter.publish_setup(&live, &wanted),
        )
        .await;
        let error = match sent {
            Ok(Ok(written)) => {
                if let Some(written) = written {
                    info!(bytes = wanted.len(), "reported the node's kubelet set-up");
                    self.memory.written = Some(written);
                }
                self.memory.setup_retry_at = None;
                return;
            }
            Ok(Err(e)) => error_chain(&e),
            Err(_) => format!("no answer within {SETUP_REPORT_TIMEOUT:?}"),
        };
        let retry_in = self.config.resync_interval;
        if retry_at.is_none() {
            warn!(%error, ?retry_in, "cannot report the node's kubelet set-up on the Node (the reconciler does not check commits against this node meanwhile); trying again every resync interval");
        } else {
            debug!(%error, "the report of the node's kubelet set-up failed again");
        }
        self.memory.setup_retry_at = Some(Instant::now() + retry_in);
    }

    /// A pass without the Node (not listed yet, or deleted): a rollback in flight is
    /// carried on; then the pass waits for the Node (or retries the rollback).
    async fn without_node(&mut self) -> Result<(), AgentError> {
        if self.memory.node_seen && !self.memory.node_gone {
            // Deleted (a node lifecycle controller, a person). Without the Node there is
            // nothing to decide on or report to: the kubelet keeps what it runs, nothing is
            // written or restarted, and the agent waits for a Node of this name to appear
            // again (the kubelet registers it on its next start), then goes on with that
            // Node's annotations.
            warn!(node = %self.config.node_name, "the Node was deleted; the kubelet is left as it is until the Node is back");
            self.memory.node_gone = true;
        } else {
            debug!(node = %self.config.node_name, "waiting for the Node");
        }
        // A rollback in flight does not wait for the Node (an agent restarted while the
        // API server is unreachable has none): the fallback is written and the kubelet
        // restarted now; verification and the report follow once the Node is known.
        let retry = match self.roll_back_without_node().await {
            Ok(()) => None,
            Err(e) => {
                error!(error = %error_chain(&e), retry_in = ?OFFLINE_RETRY, "carrying on the rollback without the Node failed");
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
        changed.map_err(|_| AgentError::Setup("the node watch stopped".into()))
    }

    /// [`Driver::node`], marking the watch's value as seen: the next `changed()` waits
    /// for a newer one.
    pub(super) fn fresh_node(&mut self) -> Option<Node> {
        self.node_rx.borrow_and_update();
        self.node()
    }

    /// The newest Node: the watch's, or the one our last write returned when that is newer;
    /// `None` when the watch has none (not listed yet, or deleted). Does not mark the
    /// watch's value as seen, so a change that arrives while a step runs still wakes the
    /// next wait.
    pub(super) fn node(&mut self) -> Option<Node> {
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

    /// Carries `step` out.
    async fn execute(
        &mut self,
        step: Step,
        node: &Node,
        o: &Observed,
        setup: &NodeSetup,
    ) -> Result<Next, AgentError> {
        let seen = Some((node, o));
        match step {
            Step::Download { config } => self.download(node, o, config, setup).await?,
            Step::ReturnToLocal => self.return_to_local(node, o).await?,
            Step::Write => self.write(seen, setup).await?,
            Step::Restart => self.restart(seen, setup).await?,
            Step::Verify { deadline } => self.verify(node, o, deadline, setup).await?,
            Step::RollBack { to, reason } => self.roll_back(o, to, reason)?,
            Step::RestoreDrift { found } => self.restore_drift(node, o, found).await?,
            Step::RefreshLocal { found } => self.refresh_local(&found)?,
            Step::Promote { config } => self.promote(node, config).await?,
            Step::Idle { report, wake_at } => {
                self.idle(node, o, &report).await?;
                return Ok(Next::Wait { wake_at });
            }
        }
        Ok(Next::Decide)
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_round_up_to_whole_seconds() {
        assert_eq!(secs_ceil(Duration::from_secs(2)), 2);
        assert_eq!(secs_ceil(Duration::from_millis(2001)), 3);
        assert_eq!(secs_ceil(Duration::ZERO), 0);
        assert_eq!(human(150), "2m 30s");
    }

    #[test]
    fn the_error_backoff_doubles_per_step_and_starts_over_when_another_step_fails() {
        let mut b = ErrorBackoff::default();
        let secs = |d: Duration| d.as_secs();
        assert_eq!(secs(b.failed(Some(&Step::Write))), 1);
        assert_eq!(secs(b.failed(Some(&Step::Write))), 2);
        assert_eq!(secs(b.failed(Some(&Step::Write))), 4);
        // The write went through, the report of it did not: the next step starts over.
        assert_eq!(secs(b.failed(Some(&Step::Restart))), 1);
        assert_eq!(secs(b.failed(Some(&Step::Restart))), 2);
        // The same kind of step with other contents (a due time that moved) keeps
        // backing off.
        let verify = |deadline| Step::Verify { deadline };
        assert_eq!(secs(b.failed(Some(&verify(100)))), 1);
        assert_eq!(secs(b.failed(Some(&verify(160)))), 2);
        assert_eq!(secs(b.failed(None)), 1, "an observation that failed");
        for _ in 0..10 {
            b.failed(None);
        }
        assert_eq!(b.failed(None), ERROR_BACKOFF.1, "capped");
        b.reset();
        assert_eq!(secs(b.failed(None)), 1, "a pass that succeeded starts over");
    }
}
