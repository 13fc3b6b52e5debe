//! Carrying out the [`Step`](super::decide::Step)s [`super::decide`] chooses. A step that
//! changes the node persists its phase in `meta/assigned` before the next decision, so a
//! restarted agent resumes where it was:
//!
//! - [`download`]: the ConfigMap downloaded, checkpointed and validated (or, back to
//!   local, the saved original taken): phase `Checkpointed`;
//! - [`apply`]: the stale state files removed and the file written (`Written`), the kubelet
//!   restarted (`Restarted`);
//! - [`verify`]: the kubelet verified (`Verified`), later promoted to last-known-good;
//! - [`rollback`]: the verdict and the fallback recorded, and without the Node the
//!   fallback carried as far as the restart;
//! - [`drift`]: a file changed on the node restored, or taken as the node's own config;
//! - and, when there is nothing to do, the report and the waits ([`Driver::idle`]).

mod apply;
mod download;
mod drift;
mod rollback;
mod verify;

use k8s_openapi::api::core::v1::Node;
use kubelet_gitops_core::protocol::{ConfigRef, LOCAL};
use tracing::{debug, info, warn};

use super::AgentError;
use super::decide::{Desired, Observed};
use super::drive::{Driver, unix_now};
use super::publish::new_pods_cgroup_finding;
use crate::checkpoint::{ApplyPhase, Assigned, Checkpoint};
use crate::report::{EventType, Report, event_reason};

/// The longest verification failure reason (the Node's message cap is larger; a rollback
/// message holds one or two reasons).
const MAX_REASON: usize = 1024;

/// The Node a step reports to and what the pass observed of it; `None` when the step is
/// carried on without the Node (a rollback, see [`rollback`]): then nothing is reported.
type Seen<'a> = Option<(&'a Node, &'a Observed)>;

impl Driver {
    /// `meta/assigned`, which a step in flight needs.
    fn in_flight(&self) -> Result<Assigned, AgentError> {
        self.assigned()?
            .ok_or_else(|| AgentError::Setup("meta/assigned disappeared during an apply".into()))
    }

    /// Persists `a` at `phase`, since now.
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

    /// Nothing to do: `report` on the Node, an Event for a pods-cgroup finding it does not
    /// show yet, the ConfigMap watched only while it is still to be downloaded, and the
    /// agent ready after its first such pass.
    pub(in crate::agent) async fn idle(
        &mut self,
        node: &Node,
        o: &Observed,
        report: &Report,
    ) -> Result<(), AgentError> {
        let new_finding = new_pods_cgroup_finding(o);
        self.publish(node, report).await?;
        if let Some(m) = new_finding {
            // Reported, not rolled back: the kubelet computed and wrote these limits
            // itself when it started with this config, and it runs healthily with it. A
            // difference means something else on the node rewrote the cgroup, or the
            // kubelet sees the node otherwise than its Node object says (its capacity,
            // its pid_max). Restarting the kubelet on another config would disrupt the
            // node without fixing either; a person has to look.
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
        Ok(())
    }
}
