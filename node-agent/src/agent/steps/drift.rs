//! The kubelet's config file changed on the node behind the agent's back. While the node
//! runs an assigned config, that is drift: the checkpoint is written again, through the
//! whole apply. While it runs its own config, the change is its owner's (a `kubeadm
//! upgrade`): the file as it is becomes the saved original.

use k8s_openapi::api::core::v1::Node;
use kubelet_gitops_core::protocol::State;
use tracing::{info, instrument, warn};

use crate::agent::AgentError;
use crate::agent::decide::Observed;
use crate::agent::drive::Driver;
use crate::agent::publish::{in_flight_is_desired, transitional};
use crate::checkpoint::{ApplyPhase, Assigned};
use crate::report::{EventType, event_reason};

/// What the drift Event and message say: the file, how it changed (`found`: its sha256,
/// `None` when removed) and the config restored.
fn drift_message(file: &str, found: Option<&str>, expected: &str, config: &str) -> String {
    let what = match found {
        Some(sha) => format!("changed on the node (sha256 {sha}, expected {expected})"),
        None => "removed on the node".to_string(),
    };
    format!("{file} was {what}; restoring {config}")
}

impl Driver {
    /// The node runs its local config and its owner changed the file (replace mode): the
    /// file as it is now becomes the config a return to local (or a rollback to local)
    /// writes back, so that a `kubeadm upgrade` is not undone later.
    pub(in crate::agent) fn refresh_local(&mut self, found: &str) -> Result<(), AgentError> {
        let bytes = self.file.read()?;
        if self.store.refresh_local_original(&bytes)? {
            info!(path = %self.file.path().display(), sha256 = %found, "the node's own config changed while it ran it; saved it again as the config to return to");
        }
        Ok(())
    }

    #[instrument(skip(self, node, o))]
    pub(in crate::agent) async fn restore_drift(
        &mut self,
        node: &Node,
        o: &Observed,
        found: Option<String>,
    ) -> Result<(), AgentError> {
        let a = self.in_flight()?;
        let message = drift_message(
            &self.file.path().display().to_string(),
            found.as_deref(),
            &a.checkpoint.sha256,
            &a.checkpoint.config.to_string(),
        );
        warn!(detail = %message, "drift");
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
        if in_flight_is_desired(o, &a.checkpoint.config) {
            let note = match self.memory.notes.get(&a.checkpoint.config) {
                Some(prev) => format!("{prev}; {message}"),
                None => message.clone(),
            };
            self.memory.notes.insert(a.checkpoint.config.clone(), note);
            let wanted = transitional(o, State::Applying, message);
            self.publish(node, &wanted).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_says_how_the_file_changed() {
        assert_eq!(
            drift_message(
                "/var/lib/kubelet/config.yaml",
                Some("ab12"),
                "cd34",
                "kubelet-gitops/b"
            ),
            "/var/lib/kubelet/config.yaml was changed on the node (sha256 ab12, expected cd34); restoring kubelet-gitops/b"
        );
        assert_eq!(
            drift_message("/f", None, "cd34", "kubelet-gitops/b"),
            "/f was removed on the node; restoring kubelet-gitops/b"
        );
    }
}
