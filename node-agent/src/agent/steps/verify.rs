//! Verifying that the kubelet runs the assigned config after its restart, and, once it
//! has run it healthily for the grace, promoting it to last-known-good. A failed
//! verification is kept in memory for the next decision, which rolls back.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kubelet_gitops_core::message::error_chain;
use kubelet_gitops_core::protocol::{ConfigRef, reason};
use tracing::{error, info, instrument, warn};

use super::MAX_REASON;
use crate::agent::AgentError;
use crate::agent::context::NodeSetup;
use crate::agent::decide::{self as plan, Observed, VerifyFailure};
use crate::agent::drive::{Driver, human, unix_now};
use crate::agent::metrics::Outcome;
use crate::agent::publish::in_flight_is_desired;
use crate::agent::ready;
use crate::checkpoint::{ApplyPhase, Assigned};
use crate::error::{KubeletError, brief, cap};
use crate::report::{EventType, event_reason};
use crate::validate;

/// How often the pods are looked at while waiting for them.
const POD_POLL: Duration = Duration::from_secs(1);
/// The longest part of a reason quoted from the Node's `Ready` condition.
const MAX_NODE_MESSAGE: usize = 400;

/// What [`Driver::kubelet_runs`] found.
enum Check {
    /// The kubelet runs the config and the Node is Ready.
    Runs,
    /// It does not: why.
    Fails(String),
    /// The Node is gone; nothing to verify against.
    NodeGone,
}

impl Driver {
    /// Records a failed verification (or restart) of the assignment `a` in flight, for
    /// the next decision. When `a` is a rollback's fallback, this is the rollback failing:
    /// an Event `KubeletConfigRollbackFailed` on `node` (`None`: no Node) says so (once per
    /// attempt; bounded, it never holds up anything), and the report (state `RolledBack`,
    /// a message that a person must act) follows from the next decision.
    pub(super) async fn record_failure(
        &mut self,
        node: Option<&Node>,
        a: &Assigned,
        reason: String,
    ) {
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
        let view = self.assignment_view(a, node.and_then(|n| n.metadata.uid.as_deref()));
        if let Some(f) = &view.failed {
            let message = plan::rollback_failed_message(f, &view, &reason);
            error!(failed = %f.config, fallback = %view.config, detail = %message, "the fallback failed too");
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
    pub(in crate::agent) async fn verify(
        &mut self,
        node: &Node,
        o: &Observed,
        deadline: u64,
        setup: &NodeSetup,
    ) -> Result<(), AgentError> {
        let a = self.in_flight()?;
        let detail = match self.kubelet_runs(&a, deadline, setup).await? {
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
            self.record_failure(Some(node), &a, reason).await;
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
        if in_flight_is_desired(o, &config) {
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
            warn!(error = %error_chain(&e), "pruning old checkpoints failed");
        }
        Ok(())
    }

    /// Whether the kubelet runs the checkpoint of `a` (see [`Driver::verify`]).
    async fn kubelet_runs(
        &mut self,
        a: &Assigned,
        deadline: u64,
        setup: &NodeSetup,
    ) -> Result<Check, AgentError> {
        let budget = Duration::from_secs(deadline.saturating_sub(unix_now()).max(1));
        // The file first: one that is not the checkpoint's (put back by hand, or by a
        // config-management run) is not the config being verified, whatever the kubelet
        // says about it.
        if let Some(why) = self.file.read_back(&a.checkpoint.sha256)? {
            return Ok(Check::Fails(why));
        }
        let payload = self.payload_of(&a.checkpoint)?;
        let expected = match setup.context().map_err(|e| error_chain(e)).and_then(|ctx| {
            validate::effective_config(Some(&payload), ctx)
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
        if let Some(why) = self.file.read_back(&a.checkpoint.sha256)? {
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

    #[instrument(skip(self, node))]
    pub(in crate::agent) async fn promote(
        &mut self,
        node: &Node,
        config: ConfigRef,
    ) -> Result<(), AgentError> {
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
            warn!(error = %error_chain(&e), "pruning old checkpoints failed");
        }
        Ok(())
    }
}
