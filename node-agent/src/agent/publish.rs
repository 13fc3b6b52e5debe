//! What the agent says on its Node: the report of each step (annotations and condition,
//! through [`crate::report::Reporter`], skipped when the Node shows it already) with an
//! Event when the state or the config it is about changes, and the wording of both. In the
//! middle of a rollback nothing waits for the API server: reports and Events there are
//! bounded ([`REPORT_TIMEOUT`]) and a failure is logged; the next decision reports again.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kubelet_gitops_core::flags::FlagOverride;
use kubelet_gitops_core::message::{error_chain, escape_line};
use kubelet_gitops_core::protocol::{ConfigRef, LOCAL, State};
use tracing::{debug, warn};

use super::AgentError;
use super::decide::{Desired, Observed, PodsCgroup};
use super::drive::Driver;
use crate::checkpoint::{Assigned, Verdict};
use crate::report::{EventType, Report, event_reason};

/// Bound on a report or Event sent in the middle of a rollback: the API server must never
/// hold up the node's recovery (the report is made again by the next decision, retried
/// with back-off, until it lands).
const REPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// The report while the desired config is in flight: `state` about `observed`, the
/// current and last-known-good as last reported.
pub(super) fn transitional(o: &Observed, state: State, message: String) -> Report {
    Report {
        state: Some(state),
        observed: Some(o.desired.observed_value()),
        current: o.report.current.clone().or_else(|| Some(LOCAL.to_string())),
        last_known_good: Some(o.last_known_good.to_string()),
        message: Some(message),
    }
}

/// Whether the assignment in flight is what the node should run (then its progress is
/// reported; a rollback's is not, so the failure stays on the Node).
pub(super) fn in_flight_is_desired(o: &Observed, config: &ConfigRef) -> bool {
    match &o.desired {
        Desired::Local => *config == ConfigRef::Local,
        Desired::Config(x) => x == config,
        Desired::Invalid { .. } => false,
    }
}

/// The Event of a report in `state`: its type, its reason and the message when the report
/// has none.
fn state_event(state: Option<State>) -> (EventType, &'static str, &'static str) {
    match state {
        Some(State::Downloading) => (EventType::Normal, event_reason::DOWNLOADING, "downloading"),
        Some(State::Applying) => (EventType::Normal, event_reason::APPLYING, "applying"),
        Some(State::Verifying) => (EventType::Normal, event_reason::VERIFYING, "verifying"),
        Some(State::Done) => (EventType::Normal, event_reason::APPLIED, "applied"),
        Some(State::Degraded) => (EventType::Warning, event_reason::REJECTED, "degraded"),
        Some(State::RolledBack) => (EventType::Warning, event_reason::ROLLED_BACK, "rolled back"),
        None => (
            EventType::Normal,
            event_reason::LOCAL,
            "the kubelet runs the node's local config",
        ),
    }
}

/// The message of the Event for `report`: the config it is about, then its message (or
/// `default`).
fn event_message(report: &Report, default: &str) -> String {
    let subject = report.observed.as_deref().unwrap_or(LOCAL);
    match &report.message {
        Some(m) if !m.is_empty() => format!("{subject}: {m}"),
        _ => format!("{subject}: {default}"),
    }
}

/// A pods-cgroup finding of `o` that the Node's message does not show yet.
pub(super) fn new_pods_cgroup_finding(o: &Observed) -> Option<String> {
    match &o.pods_cgroup {
        // The Node shows the finding as the agent writes it: escaped.
        Some(PodsCgroup::Differs(m))
            if !o
                .report
                .message
                .as_deref()
                .is_some_and(|s| s.contains(escape_line(m).as_ref())) =>
        {
            Some(m.clone())
        }
        _ => None,
    }
}

/// What the message says about fields the kubelet's command-line flags override; `None`
/// when none is.
pub(super) fn overrides_note(overrides: &[FlagOverride]) -> Option<String> {
    if overrides.is_empty() {
        return None;
    }
    let list: Vec<String> = overrides
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
    Some(format!(
        "the kubelet's command-line flags override {}: {}",
        if list.len() == 1 {
            "1 field"
        } else {
            "these fields"
        },
        list.join(", ")
    ))
}

impl Driver {
    /// Writes `wanted` on the Node (skipped when it shows it already) and posts an Event
    /// when the state or the observed config changes. Compares with the newest Node
    /// (`fallback` when none is known), never with one from before our last write.
    pub(super) async fn publish(
        &mut self,
        fallback: &Node,
        wanted: &Report,
    ) -> Result<(), AgentError> {
        self.publish_as(fallback, wanted, None).await
    }

    /// [`Driver::publish`], with the Event's type and reason given instead of the
    /// state's (a failed download is `Degraded` with `KubeletConfigDownloadFailed`).
    pub(super) async fn publish_as(
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
            let (kind, why, default) = state_event(wanted.state);
            let (kind, why) = event.unwrap_or((kind, why));
            let message = event_message(wanted, default);
            self.reporter.event(node, kind, why, &message).await;
        }
        Ok(())
    }

    /// [`Driver::publish`] in the middle of a rollback: bounded by [`REPORT_TIMEOUT`], a
    /// failure logged and not returned. The node's recovery never waits for the API
    /// server; the next decision reports again (with back-off) until the report lands.
    pub(super) async fn publish_best_effort(&mut self, fallback: &Node, wanted: &Report) {
        match tokio::time::timeout(REPORT_TIMEOUT, self.publish(fallback, wanted)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                warn!(error = %error_chain(&e), "report not written; the rollback goes on and the report is retried")
            }
            Err(_) => {
                warn!(timeout = ?REPORT_TIMEOUT, "no answer to the report; the rollback goes on and the report is retried")
            }
        }
    }

    /// An Event on `node` (the one this agent's Node, `None` while it sees none) that
    /// must not hold up a rollback (bounded by [`REPORT_TIMEOUT`]).
    pub(super) async fn event_best_effort(
        &self,
        node: Option<&Node>,
        kind: EventType,
        why: &str,
        message: &str,
    ) {
        let post = async {
            match node {
                Some(node) => self.reporter.event(node, kind, why, message).await,
                None => self.reporter.event_without_node(kind, why, message).await,
            }
        };
        if tokio::time::timeout(REPORT_TIMEOUT, post).await.is_err() {
            warn!(reason = why, timeout = ?REPORT_TIMEOUT, "no answer to the event; not posted");
        }
    }

    /// After the Node (`node`, as it was before the write) was made to show `wanted`, a
    /// `RolledBack` report: records in `meta/assigned` that the verdict it carries reached
    /// this Node object, so that its later disappearance is read as a person clearing it
    /// (see [`super::decide`]). A failure is logged: the record is made again at the next
    /// report.
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
            Err(e) => {
                warn!(error = %error_chain(&e), "cannot record that the verdict was reported")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use kubelet_gitops_core::flags::FlagOverride;
    use serde_json::json;

    use super::*;
    use crate::agent::decide::tests::node;

    fn cm(name: &str) -> ConfigRef {
        ConfigRef::configmap("kubelet-gitops", name)
    }

    #[test]
    fn a_transitional_report_is_about_the_desired_config() {
        let o = node().desired("b").0;
        let r = transitional(&o, State::Applying, "applying".into());
        assert_eq!(r.state, Some(State::Applying));
        assert_eq!(r.observed.as_deref(), Some("kubelet-gitops/b"));
        assert_eq!(r.current.as_deref(), Some(LOCAL), "nothing reported yet");
        assert_eq!(r.last_known_good.as_deref(), Some(LOCAL));
        assert!(in_flight_is_desired(&o, &cm("b")));
        assert!(!in_flight_is_desired(&o, &ConfigRef::Local));
        let local = node().0;
        assert!(in_flight_is_desired(&local, &ConfigRef::Local));
        let invalid = Observed {
            desired: Desired::Invalid {
                value: "x".into(),
                reason: "y".into(),
            },
            ..local
        };
        assert!(!in_flight_is_desired(&invalid, &ConfigRef::Local));
    }

    #[test]
    fn events_name_the_config_and_say_the_state() {
        let (kind, why, default) = state_event(Some(State::RolledBack));
        assert_eq!((kind, why), (EventType::Warning, event_reason::ROLLED_BACK));
        let mut r = Report {
            state: Some(State::RolledBack),
            observed: Some("kubelet-gitops/b".into()),
            ..Report::default()
        };
        assert_eq!(event_message(&r, default), "kubelet-gitops/b: rolled back");
        r.message = Some("why".into());
        assert_eq!(event_message(&r, default), "kubelet-gitops/b: why");
        let (_, why, default) = state_event(None);
        assert_eq!(why, event_reason::LOCAL);
        assert_eq!(
            event_message(&Report::default(), default),
            "local: the kubelet runs the node's local config"
        );
    }

    #[test]
    fn a_pods_cgroup_finding_is_new_until_the_node_shows_it() {
        let mut o = node().desired("b").0;
        assert_eq!(new_pods_cgroup_finding(&o), None);
        o.pods_cgroup = Some(PodsCgroup::Differs("pods cgroup memory.max: x".into()));
        assert_eq!(
            new_pods_cgroup_finding(&o).as_deref(),
            Some("pods cgroup memory.max: x")
        );
        o.report.message = Some("applied; pods cgroup memory.max: x".into());
        assert_eq!(new_pods_cgroup_finding(&o), None);
        // A finding with a control character is on the Node escaped: not new either.
        o.pods_cgroup = Some(PodsCgroup::Differs("pods cgroup\nmemory.max".into()));
        o.report.message = Some("applied; pods cgroup\\nmemory.max".into());
        assert_eq!(new_pods_cgroup_finding(&o), None);
    }

    #[test]
    fn overridden_fields_are_listed() {
        assert_eq!(overrides_note(&[]), None);
        let ov = FlagOverride {
            field: "maxPods".into(),
            flag: "--max-pods".into(),
            flag_value: json!(50),
            file_value: Some(json!(110)),
        };
        assert_eq!(
            overrides_note(std::slice::from_ref(&ov)).as_deref(),
            Some(
                "the kubelet's command-line flags override 1 field: maxPods (--max-pods gives 50, not 110)"
            )
        );
        let unset = FlagOverride {
            file_value: None,
            ..ov.clone()
        };
        let two = overrides_note(&[ov, unset]).unwrap();
        assert!(
            two.contains("override these fields:") && two.ends_with("gives 50, not unset)"),
            "{two}"
        );
    }
}
