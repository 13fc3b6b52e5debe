//! What the agent tells the cluster: its annotations on its own Node, the
//! `KubeletConfigReady` condition, and core/v1 Events on the Node for each transition.
//!
//! The pure half ([`Report`], [`annotations_patch`], [`condition_patch`]) computes the
//! patches and returns `None` when the Node already shows what would be written, so a
//! steady agent never writes (its own writes come back as watch events: kube-rs #279).
//! [`Reporter`] sends them: a JSON merge patch on `metadata.annotations` (only our keys),
//! and a strategic merge patch on the status subresource for the condition, which merges
//! by condition type and so leaves the kubelet's own conditions alone.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, EventSource, Node, NodeCondition, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use kubelet_gitops_core::message::{self, Limit};
use kubelet_gitops_core::protocol::{
    self, CONDITION_TYPE, CURRENT_CONFIG, LAST_KNOWN_GOOD, MESSAGE, NODE_SETUP, OBSERVED_CONFIG,
    STATE, State,
};
use kubelet_gitops_core::retry::{self, Failure, RetryPolicy};

use crate::agent::metrics::Metrics;
use serde_json::{Map, Value, json};
use tracing::{debug, warn};

/// The field manager of every write the agent makes.
pub const FIELD_MANAGER: &str = "kubelet-gitops-agent";

/// The component name on the agent's Events.
pub const COMPONENT: &str = "kubelet-gitops-agent";

/// The longest message the agent writes into an annotation or condition; longer ones are
/// cut (with a marker) so one verbose kubelet error cannot bloat the Node object.
pub const MAX_MESSAGE: usize = 4096;

/// The agent's annotations, as they are or as they should be. `None` is an absent key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// [`protocol::STATE`].
    pub state: Option<State>,
    /// [`protocol::OBSERVED_CONFIG`]: the desired-config value the state is about.
    pub observed: Option<String>,
    /// [`protocol::CURRENT_CONFIG`].
    pub current: Option<String>,
    /// [`protocol::LAST_KNOWN_GOOD`].
    pub last_known_good: Option<String>,
    /// [`protocol::MESSAGE`].
    pub message: Option<String>,
}

impl Report {
    /// What the Node's annotations say now. A state value that does not parse counts as
    /// absent (the agent will overwrite it).
    pub fn from_annotations(annotations: &BTreeMap<String, String>) -> Report {
        let get = |k: &str| annotations.get(k).cloned();
        Report {
            state: annotations.get(STATE).and_then(|s| s.parse().ok()),
            observed: get(OBSERVED_CONFIG),
            current: get(CURRENT_CONFIG),
            last_known_good: get(LAST_KNOWN_GOOD),
            message: get(MESSAGE),
        }
    }

    /// The Node's report (empty for a Node without annotations).
    pub fn of_node(node: &Node) -> Report {
        node.metadata
            .annotations
            .as_ref()
            .map(Report::from_annotations)
            .unwrap_or_default()
    }

    fn entries(&self) -> [(&'static str, Option<String>); 5] {
        [
            (STATE, self.state.map(|s| s.as_str().to_string())),
            (OBSERVED_CONFIG, self.observed.clone()),
            (CURRENT_CONFIG, self.current.clone()),
            (LAST_KNOWN_GOOD, self.last_known_good.clone()),
            (MESSAGE, self.message.as_deref().map(node_text)),
        ]
    }

    /// The `KubeletConfigReady` condition this report implies: `True`/`Done` when the
    /// kubelet runs what it should (a `Done` state, or no assignment at all and the local
    /// config running), otherwise `False` with the state as reason and the message.
    pub fn condition(&self) -> ConditionValue {
        match self.state {
            Some(State::Done) => ConditionValue {
                status: "True",
                reason: State::Done.as_str().to_string(),
                message: self
                    .message
                    .clone()
                    .unwrap_or_else(|| format!("the kubelet runs {}", self.current_or_local())),
            },
            None => ConditionValue {
                status: "True",
                reason: State::Done.as_str().to_string(),
                message: format!("the kubelet runs {}", self.current_or_local()),
            },
            Some(state) => ConditionValue {
                status: "False",
                reason: state.as_str().to_string(),
                message: self.message.clone().unwrap_or_else(|| state.to_string()),
            },
        }
    }

    fn current_or_local(&self) -> &str {
        self.current.as_deref().unwrap_or(protocol::LOCAL)
    }
}

/// `message` as the agent writes it into an annotation, the condition or an Event: on one
/// line, each control character shown escaped ([`message::escape_line`]: a kubelet's
/// output, a path or a value of the config may hold newlines and terminal escapes that
/// `kubectl describe` and the reconciler's statuses would print), cut to what an
/// annotation may hold.
pub fn node_text(message: &str) -> String {
    message::truncate(
        &message::escape_line(message),
        Limit::Bytes(MAX_MESSAGE),
        " ... (truncated)",
    )
}

/// The JSON merge patch that turns the Node's agent annotations (`live`) into `wanted`,
/// touching only the keys that differ (`null` removes one). `None`: nothing to write.
pub fn annotations_patch(live: &BTreeMap<String, String>, wanted: &Report) -> Option<Value> {
    let mut changes = Map::new();
    for (key, value) in wanted.entries() {
        match (live.get(key), value) {
            (Some(have), Some(want)) if *have == want => {}
            (None, None) => {}
            (_, Some(want)) => {
                changes.insert(key.to_string(), Value::String(want));
            }
            (Some(_), None) => {
                changes.insert(key.to_string(), Value::Null);
            }
        }
    }
    if changes.is_empty() {
        None
    } else {
        Some(json!({ "metadata": { "annotations": changes } }))
    }
}

/// The JSON merge patch that makes the Node's [`protocol::NODE_SETUP`] annotation
/// `wanted` (the agent's report of the node's kubelet set-up). `None`: the Node shows it.
pub fn setup_patch(live: &BTreeMap<String, String>, wanted: &str) -> Option<Value> {
    if live.get(NODE_SETUP).map(String::as_str) == Some(wanted) {
        return None;
    }
    Some(json!({ "metadata": { "annotations": { NODE_SETUP: wanted } } }))
}

/// Status, reason and message of the `KubeletConfigReady` condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionValue {
    /// `True` or `False`.
    pub status: &'static str,
    /// CamelCase reason: the state.
    pub reason: String,
    /// For people.
    pub message: String,
}

/// The strategic merge patch of the Node's status that sets `wanted` as the
/// `KubeletConfigReady` condition, or `None` when the Node already shows it. The
/// transition time moves only when the status changes, as for every Node condition; the
/// heartbeat time is the time of the write.
pub fn condition_patch(
    existing: Option<&[NodeCondition]>,
    wanted: &ConditionValue,
    now: Timestamp,
) -> Option<Value> {
    let current = existing
        .into_iter()
        .flatten()
        .find(|c| c.type_ == CONDITION_TYPE);
    let message = node_text(&wanted.message);
    if let Some(c) = current
        && c.status == wanted.status
        && c.reason.as_deref() == Some(wanted.reason.as_str())
        && c.message.as_deref() == Some(message.as_str())
    {
        return None;
    }
    let transition = match current {
        Some(c) if c.status == wanted.status => c.last_transition_time.clone(),
        _ => None,
    }
    .unwrap_or(Time(now));
    let condition = NodeCondition {
        type_: CONDITION_TYPE.to_string(),
        status: wanted.status.to_string(),
        reason: Some(wanted.reason.clone()),
        message: Some(message),
        last_transition_time: Some(transition),
        last_heartbeat_time: Some(Time(now)),
    };
    let condition = serde_json::to_value(&condition).ok()?;
    Some(json!({ "status": { "conditions": [condition] } }))
}

/// One write that makes a Node show a report.
#[derive(Debug, Clone, PartialEq)]
pub enum ReportWrite {
    /// Only annotations differ: a JSON merge patch of the Node.
    Annotations(Value),
    /// The condition differs (and maybe annotations): a strategic merge patch of
    /// `nodes/status`, which takes metadata too (upstream's status strategy resets only
    /// the spec), so a phase is one write, not two, and never half-written.
    Status(Value),
}

/// The write that applies `annotations` ([`annotations_patch`]) and `condition`
/// ([`condition_patch`]); `None` when neither is needed.
pub fn report_write(annotations: Option<Value>, condition: Option<Value>) -> Option<ReportWrite> {
    match (annotations, condition) {
        (None, None) => None,
        (Some(annotations), None) => Some(ReportWrite::Annotations(annotations)),
        (annotations, Some(mut condition)) => {
            if let (Some(Value::Object(extra)), Value::Object(patch)) =
                (annotations, &mut condition)
            {
                patch.extend(extra);
            }
            Some(ReportWrite::Status(condition))
        }
    }
}

/// Normal or Warning, as core/v1 Events have it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Progress.
    Normal,
    /// Something a person should look at.
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// The reasons of the agent's Events (CamelCase, as `kubectl describe node` lists them).
pub mod event_reason {
    /// Downloading a config.
    pub const DOWNLOADING: &str = "KubeletConfigDownloading";
    /// The ConfigMap could not be fetched or checkpointed.
    pub const DOWNLOAD_FAILED: &str = "KubeletConfigDownloadFailed";
    /// The config was rejected before the kubelet was touched.
    pub const REJECTED: &str = "KubeletConfigRejected";
    /// A field the config sets is overridden by the kubelet's command-line flags.
    pub const FLAG_OVERRIDE: &str = "KubeletConfigFlagOverride";
    /// Writing the config and restarting the kubelet.
    pub const APPLYING: &str = "KubeletConfigApplying";
    /// Waiting for the restarted kubelet.
    pub const VERIFYING: &str = "KubeletConfigVerifying";
    /// The kubelet runs the config.
    pub const APPLIED: &str = "KubeletConfigApplied";
    /// The kubelet did not come back healthy; returned to last-known-good.
    pub const ROLLED_BACK: &str = "KubeletConfigRolledBack";
    /// The fallback did not come back healthy either.
    pub const ROLLBACK_FAILED: &str = "KubeletConfigRollbackFailed";
    /// A config became last-known-good.
    pub const LKG_UPDATED: &str = "KubeletConfigLastKnownGoodUpdated";
    /// The kubelet config file was changed behind the agent's back.
    pub const DRIFT: &str = "KubeletConfigDrift";
    /// The node returned to its local config.
    pub const LOCAL: &str = "KubeletConfigLocal";
    /// The node's pods cgroup does not match what the config implies.
    pub const CGROUP_MISMATCH: &str = "KubeletConfigCgroupMismatch";
    /// Something on the agent's side failed.
    pub const INTERNAL: &str = "KubeletConfigInternalError";
}

/// A core/v1 Event about `node`, as the kubelet names its own: `<node>.<hex nanos>` in the
/// `default` namespace, with the Node (and its uid) as the involved object.
pub fn event_object(
    node: &Node,
    node_name: &str,
    kind: EventType,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> Event {
    event_about(
        node.metadata.uid.clone(),
        node_name,
        kind,
        reason,
        message,
        now,
    )
}

/// [`event_object`] about the Node of uid `uid` (`None`: a Node the agent does not see).
fn event_about(
    uid: Option<String>,
    node_name: &str,
    kind: EventType,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> Event {
    let nanos = now.as_nanosecond().max(0);
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{node_name}.{nanos:x}")),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node_name.to_string()),
            uid,
            ..ObjectReference::default()
        },
        reason: Some(reason.to_string()),
        message: Some(node_text(message)),
        type_: Some(kind.as_str().to_string()),
        count: Some(1),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        source: Some(EventSource {
            component: Some(COMPONENT.to_string()),
            host: Some(node_name.to_string()),
        }),
        reporting_component: Some(COMPONENT.to_string()),
        reporting_instance: Some(node_name.to_string()),
        ..Event::default()
    }
}

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Patching the Node's annotations failed.
    #[error("failed to patch the annotations of node {node}")]
    Annotations {
        node: String,
        #[source]
        source: kube::Error,
    },
    /// Patching the Node's status failed.
    #[error("failed to patch the {CONDITION_TYPE} condition of node {node}")]
    Condition {
        node: String,
        #[source]
        source: kube::Error,
    },
}

/// How the agent retries its writes: a conflict, a 5xx or a dropped connection is tried
/// again within about two seconds before the step that wrote fails (and the driver backs
/// off).
pub const WRITE_RETRY: RetryPolicy = RetryPolicy {
    attempts: 4,
    initial: Duration::from_millis(200),
    max: Duration::from_secs(1),
};

/// The longest one write may take, its retries included: a report never holds up the
/// agent's steps (a verification, a rollback) for longer, whatever the API server does
/// (kube's client alone would retry a 503 for minutes).
pub const WRITE_DEADLINE: Duration = Duration::from_secs(10);

/// Writes the agent's report on its own Node.
#[derive(Clone)]
pub struct Reporter {
    nodes: Api<Node>,
    events: Api<Event>,
    node: String,
    retry: RetryPolicy,
    deadline: Duration,
    metrics: Option<Metrics>,
}

impl Reporter {
    /// A reporter for node `node`.
    pub fn new(client: Client, node: &str) -> Reporter {
        Reporter {
            nodes: Api::all(client.clone()),
            events: Api::namespaced(client, "default"),
            node: node.to_string(),
            retry: WRITE_RETRY,
            deadline: WRITE_DEADLINE,
            metrics: None,
        }
    }

    /// The same reporter, counting each failed attempt in `metrics`
    /// (`kubelet_gitops_agent_api_errors_total`).
    pub fn counting(mut self, metrics: Metrics) -> Reporter {
        self.metrics = Some(metrics);
        self
    }

    /// The same reporter, giving up on a write after `deadline` ([`WRITE_DEADLINE`] by
    /// default).
    pub fn with_deadline(mut self, deadline: Duration) -> Reporter {
        self.deadline = deadline;
        self
    }

    /// `f`, a `verb` on `resource`, retried by [`WRITE_RETRY`] within the deadline; each
    /// failed attempt counted, each retry logged (debug). Past the deadline the error is
    /// a [`kube::Error::Service`] saying so, counted with code 0 (no answer).
    async fn retrying<T, F, Fut>(
        &self,
        (verb, resource): (&'static str, &'static str),
        f: F,
    ) -> Result<T, kube::Error>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, kube::Error>>,
    {
        let on_failure = |failure: Failure<'_>| {
            if let Some(m) = &self.metrics {
                m.api_error(verb, resource, retry::error_code(failure.error));
            }
            if let Some(retry_in) = failure.retry_in {
                debug!(node = %self.node, verb, resource, attempt = failure.attempt, ?retry_in, error = %failure.error, "API request failed; retrying");
            }
        };
        let retried = retry::retrying(&self.retry, on_failure, f);
        match tokio::time::timeout(self.deadline, retried).await {
            Ok(result) => result,
            Err(_) => {
                if let Some(m) = &self.metrics {
                    m.api_error(verb, resource, 0);
                }
                let message = format!("no answer within {:?}", self.deadline);
                Err(kube::Error::Service(message.into()))
            }
        }
    }

    /// Makes the Node (`live`, as last seen) show `wanted`: its annotations and its
    /// condition, in one write ([`report_write`]) and only what differs. Returns the Node
    /// as the server returned it, or `None` when nothing was written.
    pub async fn publish(&self, live: &Node, wanted: &Report) -> Result<Option<Node>, ReportError> {
        let empty = BTreeMap::new();
        let annotations = live.metadata.annotations.as_ref().unwrap_or(&empty);
        let conditions = live.status.as_ref().and_then(|s| s.conditions.as_deref());
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            ..PatchParams::default()
        };
        let write = report_write(
            annotations_patch(annotations, wanted),
            condition_patch(conditions, &wanted.condition(), Timestamp::now()),
        );
        let node = match write {
            None => return Ok(None),
            Some(ReportWrite::Annotations(patch)) => {
                debug!(node = %self.node, %patch, "patching annotations");
                let patch = Patch::Merge(&patch);
                self.retrying(("patch", "nodes"), || {
                    self.nodes.patch(&self.node, &params, &patch)
                })
                .await
                .map_err(|source| ReportError::Annotations {
                    node: self.node.clone(),
                    source,
                })?
            }
            Some(ReportWrite::Status(patch)) => {
                debug!(node = %self.node, %patch, "patching the condition (and annotations)");
                let patch = Patch::Strategic(&patch);
                self.retrying(("patch", "nodes/status"), || {
                    self.nodes.patch_status(&self.node, &params, &patch)
                })
                .await
                .map_err(|source| ReportError::Condition {
                    node: self.node.clone(),
                    source,
                })?
            }
        };
        Ok(Some(node))
    }

    /// Makes the Node (`live`) show `wanted` as its [`NODE_SETUP`] annotation, when it
    /// does not already ([`setup_patch`]). Returns the Node as the server returned it, or
    /// `None` when nothing was written.
    pub async fn publish_setup(
        &self,
        live: &Node,
        wanted: &str,
    ) -> Result<Option<Node>, ReportError> {
        let empty = BTreeMap::new();
        let annotations = live.metadata.annotations.as_ref().unwrap_or(&empty);
        let Some(patch) = setup_patch(annotations, wanted) else {
            return Ok(None);
        };
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            ..PatchParams::default()
        };
        debug!(node = %self.node, bytes = wanted.len(), "reporting the node's kubelet set-up");
        let patch = Patch::Merge(&patch);
        self.retrying(("patch", "nodes"), || {
            self.nodes.patch(&self.node, &params, &patch)
        })
        .await
        .map(Some)
        .map_err(|source| ReportError::Annotations {
            node: self.node.clone(),
            source,
        })
    }

    /// Posts an Event on the Node. Events are for people: a failure is logged, not
    /// returned.
    pub async fn event(&self, live: &Node, kind: EventType, reason: &str, message: &str) {
        self.post(live.metadata.uid.clone(), kind, reason, message)
            .await
    }

    /// [`Reporter::event`] while the agent sees no Node (not listed yet, or deleted): the
    /// Event names the Node without its uid.
    pub async fn event_without_node(&self, kind: EventType, reason: &str, message: &str) {
        self.post(None, kind, reason, message).await
    }

    async fn post(&self, uid: Option<String>, kind: EventType, reason: &str, message: &str) {
        let ev = event_about(uid, &self.node, kind, reason, message, Timestamp::now());
        let post = PostParams::default();
        let create = || self.events.create(&post, &ev);
        match self.retrying(("create", "events"), create).await {
            Ok(_) => debug!(node = %self.node, reason, "event posted"),
            Err(e) => warn!(node = %self.node, reason, error = %e, "event not posted"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn done(current: &str) -> Report {
        Report {
            state: Some(State::Done),
            observed: Some(current.into()),
            current: Some(current.into()),
            last_known_good: Some("local".into()),
            message: None,
        }
    }

    #[test]
    fn a_report_round_trips_through_annotations() {
        let live = annotations(&[
            (STATE, "RolledBack"),
            (OBSERVED_CONFIG, "ns/a"),
            (CURRENT_CONFIG, "local"),
            (LAST_KNOWN_GOOD, "local"),
            (MESSAGE, "kubelet did not become healthy within 2m"),
            ("other.io/x", "kept"),
        ]);
        let r = Report::from_annotations(&live);
        assert_eq!(r.state, Some(State::RolledBack));
        assert_eq!(r.observed.as_deref(), Some("ns/a"));
        assert_eq!(
            annotations_patch(&live, &r),
            None,
            "no-op writes are skipped"
        );
    }

    #[test]
    fn the_patch_names_only_changed_keys_and_removes_with_null() {
        let live = annotations(&[
            (STATE, "Applying"),
            (OBSERVED_CONFIG, "ns/a"),
            (CURRENT_CONFIG, "local"),
            (MESSAGE, "applying"),
            ("kubelet-gitops.io/desired-config", "ns/a"),
        ]);
        let patch = annotations_patch(&live, &done("ns/a")).expect("changes");
        let a = &patch["metadata"]["annotations"];
        assert_eq!(a[STATE], "Done");
        assert_eq!(a[CURRENT_CONFIG], "ns/a");
        assert_eq!(a[LAST_KNOWN_GOOD], "local");
        assert_eq!(a[MESSAGE], Value::Null, "the message is removed");
        assert!(a.get(OBSERVED_CONFIG).is_none(), "unchanged key not sent");
        assert!(
            a.get("kubelet-gitops.io/desired-config").is_none(),
            "the reconciler's keys are never touched"
        );
    }

    #[test]
    fn a_phase_is_one_write_on_the_status_when_the_condition_changes() {
        let live = annotations(&[(STATE, "Applying"), (CURRENT_CONFIG, "local")]);
        let wanted = done("ns/a");
        let now = Timestamp::now();
        let annotations = annotations_patch(&live, &wanted);
        let condition = condition_patch(None, &wanted.condition(), now);
        assert!(annotations.is_some() && condition.is_some());
        let Some(ReportWrite::Status(patch)) = report_write(annotations.clone(), condition.clone())
        else {
            panic!("a changed condition goes to nodes/status");
        };
        assert_eq!(
            patch["metadata"]["annotations"][STATE], "Done",
            "the annotations ride along: {patch}"
        );
        assert_eq!(patch["metadata"]["annotations"][CURRENT_CONFIG], "ns/a");
        assert_eq!(patch["status"]["conditions"][0]["type"], CONDITION_TYPE);
        assert_eq!(patch["status"]["conditions"][0]["reason"], "Done");
        assert_eq!(
            patch.as_object().map(|o| o.len()),
            Some(2),
            "metadata and status only: {patch}"
        );

        assert_eq!(
            report_write(annotations.clone(), None),
            annotations.map(ReportWrite::Annotations),
            "annotations alone patch the Node"
        );
        assert_eq!(
            report_write(None, condition.clone()),
            condition.map(ReportWrite::Status)
        );
        assert_eq!(report_write(None, None), None);
    }

    #[test]
    fn an_unparsable_state_is_overwritten() {
        let live = annotations(&[(STATE, "done")]);
        let r = Report::from_annotations(&live);
        assert_eq!(r.state, None);
        let patch = annotations_patch(&live, &done("ns/a")).expect("changes");
        assert_eq!(patch["metadata"]["annotations"][STATE], "Done");
    }

    #[test]
    fn conditions_follow_the_state() {
        let c = done("ns/a").condition();
        assert_eq!((c.status, c.reason.as_str()), ("True", "Done"));
        assert_eq!(c.message, "the kubelet runs ns/a");
        let failed = Report {
            state: Some(State::Degraded),
            message: Some("failed to validate config: maxPods: Invalid value".into()),
            ..Report::default()
        };
        let c = failed.condition();
        assert_eq!((c.status, c.reason.as_str()), ("False", "Degraded"));
        assert!(c.message.starts_with("failed to validate config"));
        let local = Report {
            current: Some("local".into()),
            ..Report::default()
        };
        assert_eq!(local.condition().status, "True");
    }

    #[test]
    fn the_condition_patch_is_skipped_when_equal_and_keeps_transition_time() {
        let t0: Timestamp = "2025-01-01T00:00:00Z".parse().unwrap();
        let t1: Timestamp = "2025-01-01T01:00:00Z".parse().unwrap();
        let wanted = done("ns/a").condition();
        let ready = NodeCondition {
            type_: "Ready".into(),
            status: "True".into(),
            ..NodeCondition::default()
        };
        let first = condition_patch(Some(std::slice::from_ref(&ready)), &wanted, t0).expect("new");
        let c = &first["status"]["conditions"][0];
        assert_eq!(c["type"], CONDITION_TYPE);
        assert_eq!(
            first["status"]["conditions"].as_array().unwrap().len(),
            1,
            "only ours"
        );
        let ours: NodeCondition = serde_json::from_value(c.clone()).unwrap();
        assert_eq!(
            condition_patch(Some(&[ready.clone(), ours.clone()]), &wanted, t1),
            None
        );
        let changed = ConditionValue {
            message: "the kubelet runs ns/b".into(),
            ..wanted.clone()
        };
        let p = condition_patch(Some(&[ready, ours]), &changed, t1).expect("message changed");
        let c = &p["status"]["conditions"][0];
        assert_eq!(
            c["lastTransitionTime"], "2025-01-01T00:00:00Z",
            "same status"
        );
        assert_eq!(c["lastHeartbeatTime"], "2025-01-01T01:00:00Z");
    }

    #[test]
    fn long_messages_are_cut() {
        let r = Report {
            state: Some(State::Degraded),
            message: Some("é".repeat(MAX_MESSAGE)),
            ..Report::default()
        };
        let patch = annotations_patch(&BTreeMap::new(), &r).unwrap();
        let m = patch["metadata"]["annotations"][MESSAGE].as_str().unwrap();
        assert!(m.len() <= MAX_MESSAGE && m.ends_with("(truncated)"));
    }

    #[test]
    fn a_node_message_with_newlines_and_terminal_escapes_is_written_escaped() {
        let raw = "kubelet exited: failed to load config\nkubelet-gitops: success: all good\r\n\u{1b}[2J\u{1b}[32mhealthy\u{1b}[0m";
        let escaped = "kubelet exited: failed to load config\\nkubelet-gitops: success: all good\\r\\n\\u{1b}[2J\\u{1b}[32mhealthy\\u{1b}[0m";
        let r = Report {
            state: Some(State::RolledBack),
            observed: Some("kubelet-gitops/kubelet-gpu-abc".into()),
            message: Some(raw.into()),
            ..Report::default()
        };
        // The annotation.
        let patch = annotations_patch(&BTreeMap::new(), &r).unwrap();
        assert_eq!(patch["metadata"]["annotations"][MESSAGE], escaped);
        // Read back from the Node, it is what would be written: no write again.
        let live = annotations(&[
            (STATE, "RolledBack"),
            (OBSERVED_CONFIG, "kubelet-gitops/kubelet-gpu-abc"),
            (MESSAGE, escaped),
        ]);
        assert_eq!(annotations_patch(&live, &r), None);
        // The condition.
        let now: Timestamp = "2025-01-01T00:00:00Z".parse().unwrap();
        let p = condition_patch(None, &r.condition(), now).unwrap();
        assert_eq!(p["status"]["conditions"][0]["message"], escaped);
        let written: NodeCondition =
            serde_json::from_value(p["status"]["conditions"][0].clone()).unwrap();
        assert_eq!(condition_patch(Some(&[written]), &r.condition(), now), None);
        // The Event.
        let ev = event_object(
            &Node::default(),
            "w1",
            EventType::Warning,
            event_reason::ROLLED_BACK,
            raw,
            now,
        );
        assert_eq!(ev.message.as_deref(), Some(escaped));
        // Escaped before it is cut: the limit holds, and no escape is left half raw.
        let long = format!("{}\n{}", "x".repeat(MAX_MESSAGE), "\u{1b}".repeat(100));
        let cut = node_text(&long);
        assert!(
            cut.len() <= MAX_MESSAGE && !message::has_unsafe(&cut),
            "{cut}"
        );
    }

    #[test]
    fn events_name_the_node() {
        let node = Node {
            metadata: ObjectMeta {
                name: Some("w1".into()),
                uid: Some("u-1".into()),
                ..ObjectMeta::default()
            },
            ..Node::default()
        };
        let now: Timestamp = "2025-01-01T00:00:00Z".parse().unwrap();
        let ev = event_object(
            &node,
            "w1",
            EventType::Warning,
            event_reason::DRIFT,
            "m",
            now,
        );
        assert!(ev.metadata.name.as_deref().unwrap().starts_with("w1."));
        assert_eq!(ev.involved_object.kind.as_deref(), Some("Node"));
        assert_eq!(ev.involved_object.uid.as_deref(), Some("u-1"));
        assert_eq!(ev.type_.as_deref(), Some("Warning"));
    }

    #[test]
    fn the_setup_report_is_written_only_when_it_differs() {
        let live = annotations(&[(NODE_SETUP, "{\"version\":1}")]);
        assert_eq!(setup_patch(&live, "{\"version\":1}"), None);
        assert_eq!(
            setup_patch(&live, "{\"version\":1,\"flags\":[\"--max-pods=50\"]}"),
            Some(json!({"metadata": {"annotations": {
                NODE_SETUP: "{\"version\":1,\"flags\":[\"--max-pods=50\"]}"
            }}}))
        );
        assert!(
            setup_patch(&BTreeMap::new(), "{}").is_some(),
            "removed by hand"
        );
    }
}
