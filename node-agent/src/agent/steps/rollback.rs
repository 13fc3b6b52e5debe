//! Rolling back: the verdict on the failed config and the fallback recorded together,
//! nothing else, so that the node's recovery never waits for the API server; and, without
//! the Node, the recorded fallback carried as far as the kubelet's restart.

use kubelet_gitops_core::protocol::ConfigRef;
use tracing::{error, instrument, warn};

use crate::agent::AgentError;
use crate::agent::decide::Observed;
use crate::agent::drive::{Driver, unix_now};
use crate::agent::metrics::Outcome;
use crate::agent::publish::in_flight_is_desired;
use crate::checkpoint::{ApplyPhase, Assigned, Checkpoint, Verdict};

impl Driver {
    /// The assignment in flight failed verification: record the verdict and assign the
    /// fallback `to` (phase `Checkpointed`), in one atomic write of `meta/assigned`, and
    /// nothing else. The next steps write the fallback, restart the kubelet and verify
    /// it, and only then is the rollback reported: nothing here or in those steps waits
    /// for the API server, so a kubelet that cannot start is back on its fallback even
    /// while the API server is unreachable, and a restarted agent never tries the failed
    /// config again (the verdict is on the node's disk, not only on the Node object).
    #[instrument(skip(self, o), fields(to = %to))]
    pub(in crate::agent) fn roll_back(
        &mut self,
        o: &Observed,
        to: ConfigRef,
        reason: String,
    ) -> Result<(), AgentError> {
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
        error!(failed = %failed.checkpoint.config, to = %to, %reason, desired = in_flight_is_desired(o, &failed.checkpoint.config), "rolling back");
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
    pub(in crate::agent) async fn roll_back_without_node(&mut self) -> Result<(), AgentError> {
        let setup = self.setup(None);
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
                    self.write(None, &setup).await?;
                }
                ApplyPhase::Written => {
                    warn!(fallback = %a.checkpoint.config, "restarting the kubelet on the fallback without the Node");
                    self.restart(None, &setup).await?;
                }
                ApplyPhase::Restarted | ApplyPhase::Verified => return Ok(()),
            }
        }
    }
}
