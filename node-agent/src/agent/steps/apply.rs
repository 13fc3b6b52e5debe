//! Writing the assigned config and restarting the kubelet, with the kubelet's state files
//! that the change makes stale removed before either. The order is what makes a crash at
//! any instant safe; [`Driver::write`] explains it.

use std::path::PathBuf;
use std::time::Duration;

use kubelet_gitops_core::message::error_chain;
use kubelet_gitops_core::protocol::{ConfigRef, State};
use tracing::{debug, error, info, instrument, warn};

use super::{MAX_REASON, Seen};
use crate::agent::AgentError;
use crate::agent::context::NodeSetup;
use crate::agent::decide as plan;
use crate::agent::drive::{Driver, human};
use crate::agent::publish::{in_flight_is_desired, transitional};
use crate::agent::ready;
use crate::checkpoint::{ApplyPhase, Assigned};
use crate::error::{brief, cap};
use crate::kubelet::{remove_state_files, state_files_for_change};
use crate::report::{EventType, event_reason};
use crate::validate;

/// Bound on listing the node's pods before a restart (a slow API server must not hold
/// up a rollback).
const POD_LIST_TIMEOUT: Duration = Duration::from_secs(10);

impl Driver {
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
    /// Without the Node (`seen` is `None`: a rollback carried on without it) nothing is
    /// reported.
    #[instrument(skip_all)]
    pub(in crate::agent) async fn write(
        &mut self,
        seen: Seen<'_>,
        setup: &NodeSetup,
    ) -> Result<(), AgentError> {
        let mut a = self.in_flight()?;
        let payload = self.payload_of(&a.checkpoint)?;
        if a.checkpoint.config != ConfigRef::Local {
            // Drop-in mode without a drop-in of ours: the local config is "no file".
            let original = self.file.read_if_present()?.unwrap_or_default();
            if self.store.save_local_original(&original)? {
                info!(path = %self.file.path().display(), "saved the node's own config");
            }
        }
        let root_dir = setup.root_dir();
        let state_files = match &a.state_files {
            Some(list) => list.clone(),
            None => {
                let list = self.decide_state_files(&payload, &root_dir, setup);
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
        self.file.write(&payload)?;
        info!(config = %a.checkpoint.config, path = %self.file.path().display(), sha256 = %a.checkpoint.sha256, "config written");
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
        if let Some((node, o)) = seen
            && in_flight_is_desired(o, &a.checkpoint.config)
        {
            let wanted = transitional(
                o,
                State::Applying,
                format!(
                    "wrote {}; restarting the kubelet",
                    self.file.path().display()
                ),
            );
            self.publish(node, &wanted).await?;
        }
        Ok(())
    }

    /// Which kubelet state files writing `payload` makes stale: from the node's files as
    /// they are (the config the kubelet runs, or would run at its next start) and the
    /// config the payload gives, and from what the state files themselves record. Never
    /// fails: when the new config cannot be computed, nothing is listed (logged).
    fn decide_state_files(&self, payload: &[u8], root_dir: &str, setup: &NodeSetup) -> Vec<String> {
        let ctx = match setup.context() {
            Ok(c) => c,
            Err(e) => {
                warn!(error = %error_chain(e), "cannot read the node's kubelet setup; no kubelet state file will be removed");
                return Vec::new();
            }
        };
        let new = match validate::effective_config(Some(payload), ctx) {
            Ok(e) => e.config,
            Err(r) => {
                warn!(reason = %r, "the config to write does not load; no kubelet state file will be removed");
                return Vec::new();
            }
        };
        let old = match validate::effective_config(None, ctx) {
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
    pub(in crate::agent) async fn restart(
        &mut self,
        seen: Seen<'_>,
        setup: &NodeSetup,
    ) -> Result<(), AgentError> {
        let a = self.in_flight()?;
        if let Some(names) = a.state_files.as_deref()
            && !names.is_empty()
        {
            let root_dir = setup.root_dir();
            self.remove_state_files(names, &root_dir)?;
        }
        let result = self.kubelet.restart().await;
        let next = self.set_phase(&a, ApplyPhase::Restarted)?;
        if let Err(e) = result {
            let why = cap(
                &format!("failed to restart the kubelet: {}", brief(&e)),
                MAX_REASON,
            );
            error!(reason = %why, error = %error_chain(&e), "restart failed");
            self.record_failure(seen.map(|(node, _)| node), &next, why)
                .await;
            return Ok(());
        }
        let Some((node, o)) = seen else {
            return Ok(());
        };
        if let Some(v) = &a.failed {
            let message = plan::rolling_back_message(&v.reason, &a.checkpoint.config);
            if in_flight_is_desired(o, &v.config) {
                let wanted = transitional(o, State::RolledBack, message);
                self.publish_best_effort(node, &wanted).await;
            } else {
                // The failed apply is no longer what the node should run (desired-config
                // changed while it ran): the Node's report is about the new desired
                // config, so this rollback is an Event only.
                self.event_best_effort(
                    Some(node),
                    EventType::Warning,
                    event_reason::ROLLED_BACK,
                    &format!("{}: {message}", v.config),
                )
                .await;
            }
        } else if in_flight_is_desired(o, &a.checkpoint.config) {
            let wanted = transitional(
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
}
