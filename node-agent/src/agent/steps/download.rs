//! The first step of an apply: the desired ConfigMap fetched from its watch, checked to
//! hold what its content-derived name says, checkpointed and validated against the node, or, for a return to the local config, the node's saved
//! original taken; either is recorded as the assignment in flight, phase `Checkpointed`.
//! A config that fails here never reaches the kubelet: a transport failure is retried with
//! back-off, a rejection only now and then (the content is immutable).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kubelet_gitops_core::hash::check_content_name;
use kubelet_gitops_core::message::error_chain;
use kubelet_gitops_core::protocol::{CONFIGMAP_KEY, ConfigRef, State, reason};
use tracing::{info, instrument, warn};

use crate::agent::AgentError;
use crate::agent::context::NodeSetup;
use crate::agent::decide::{Observed, Retry};
use crate::agent::drive::{Driver, secs_ceil, unix_now};
use crate::agent::metrics::Outcome;
use crate::agent::publish::{overrides_note, transitional};
use crate::checkpoint::{ApplyPhase, Assigned, Checkpoint};
use crate::report::{EventType, event_reason};
use crate::validate::{self, Rejection};
use crate::watch::{ConfigMapState, ConfigMapWatch};

/// How long a download waits for the ConfigMap watch's first list.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(30);
/// Back-off of a failed download: first and longest.
const DOWNLOAD_BACKOFF: (u64, u64) = (5, 300);
/// A rejected config is validated again after this many resync intervals.
const REJECTED_RETRY_FACTOR: u64 = 10;

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

/// Whether the ConfigMap holds the content its name was derived from
/// ([`check_content_name`]: the name's suffix is the hash `kubectl --append-hash` gives
/// its `data` and `binaryData`). The reconciler names every ConfigMap it publishes after
/// its content and never changes one, so a mismatch means someone replaced or altered it
/// (a ConfigMap deleted and created again under the same name with other content): it
/// is refused like a config that does not load, and the node stays where it is.
fn content_matches_name(cm: &ConfigMap, config: &ConfigRef) -> Result<(), Failure> {
    let name = config
        .configmap_name()
        .or(cm.metadata.name.as_deref())
        .unwrap_or_default();
    let data = cm.data.clone().unwrap_or_default();
    let binary_data = cm
        .binary_data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    check_content_name(name, &data, &binary_data).map_err(|e| Failure {
        reason: reason::LOAD_ERROR,
        detail: e.to_string(),
        download: false,
    })
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

impl Driver {
    #[instrument(skip(self, node, o, setup), fields(config = %config))]
    pub(in crate::agent) async fn download(
        &mut self,
        node: &Node,
        o: &Observed,
        config: ConfigRef,
        setup: &NodeSetup,
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
            let wanted = transitional(o, State::Downloading, format!("downloading {config}"));
            self.publish(node, &wanted).await?;
        }
        match self.fetch_and_validate(node, &config, setup).await {
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
                let wanted = transitional(o, State::Applying, message);
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
                let wanted = transitional(o, State::Degraded, message);
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
        setup: &NodeSetup,
    ) -> Result<(Checkpoint, Option<String>), Failure> {
        let cm = self.configmap_now(config).await?;
        content_matches_name(&cm, config)?;
        let payload = payload_bytes(&cm, config)?;
        let uid = cm.metadata.uid.clone().unwrap_or_default();
        let rv = cm.metadata.resource_version.clone().unwrap_or_default();
        let checkpoint = self.store.save(config, &uid, &rv, &payload).map_err(|e| {
            Failure::download(format!(
                "failed to checkpoint {config}: {}",
                error_chain(&e)
            ))
        })?;
        let ctx = setup.context().map_err(|e| Failure {
            reason: reason::INTERNAL_ERROR,
            detail: error_chain(e),
            download: false,
        })?;
        let validated = validate::validate_payload(&payload, ctx)?;
        for c in &validated.created_cgroups {
            info!(cgroup = %c, "created reserved cgroup");
        }
        let mut parts = Vec::new();
        if let Some(text) = overrides_note(&validated.overrides) {
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
    pub(in crate::agent) fn watch_configmap(&mut self, target: Option<&ConfigRef>) {
        if target == self.configmap.as_ref().map(|(w, _)| w.target()) {
            return;
        }
        self.configmap = target
            .and_then(|t| ConfigMapWatch::start(self.client.clone(), t, self.config.watch_timeout))
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

    /// Back to the node's own config: its saved original is the assignment in flight.
    pub(in crate::agent) async fn return_to_local(
        &mut self,
        node: &Node,
        o: &Observed,
    ) -> Result<(), AgentError> {
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
        let wanted = transitional(
            o,
            State::Applying,
            "returning to the node's local config".into(),
        );
        self.publish(node, &wanted).await
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;

    use super::*;

    #[test]
    fn a_configmap_whose_content_is_not_its_names_is_refused_as_a_load_error() {
        let yaml = "maxPods: 10\n";
        let name = kubelet_gitops_core::protocol::configmap_name("general", yaml.as_bytes());
        let config = ConfigRef::configmap("kubelet-gitops", &name);
        let cm = |text: &str| ConfigMap {
            data: Some([(CONFIGMAP_KEY.to_string(), text.to_string())].into()),
            ..ConfigMap::default()
        };
        assert!(content_matches_name(&cm(yaml), &config).is_ok());
        let Err(f) = content_matches_name(&cm("maxPods: 11\n"), &config) else {
            panic!("altered content accepted");
        };
        assert_eq!(f.reason, reason::LOAD_ERROR);
        assert!(!f.download, "the content, not the transport");
        let expected = kubelet_gitops_core::protocol::configmap_name("general", b"maxPods: 11\n");
        assert_eq!(
            f.detail,
            format!(
                "ConfigMap {name} does not hold the content its name was derived from (that \
                 content would be named {expected}): it was changed or replaced after it was \
                 published"
            )
        );
        // A key added beside the kubelet's changes the content too.
        let mut extra = cm(yaml);
        extra
            .data
            .as_mut()
            .unwrap()
            .insert("note".into(), "x".into());
        assert!(content_matches_name(&extra, &config).is_err());
    }

    #[test]
    fn the_payload_is_the_kubelet_key_of_data_or_binary_data() {
        let config = ConfigRef::configmap("kubelet-gitops", "kubelet-general-abc");
        let text = ConfigMap {
            data: Some([(CONFIGMAP_KEY.to_string(), "maxPods: 10\n".to_string())].into()),
            ..ConfigMap::default()
        };
        assert_eq!(
            payload_bytes(&text, &config).ok().unwrap(),
            b"maxPods: 10\n"
        );
        let binary = ConfigMap {
            binary_data: Some([(CONFIGMAP_KEY.to_string(), ByteString(b"\x00".to_vec()))].into()),
            ..ConfigMap::default()
        };
        assert_eq!(payload_bytes(&binary, &config).ok().unwrap(), b"\x00");
        let Err(f) = payload_bytes(&ConfigMap::default(), &config) else {
            panic!("no key");
        };
        assert_eq!(f.reason, reason::LOAD_ERROR);
        assert!(!f.download, "the content, not the transport");
        assert_eq!(
            f.detail,
            "ConfigMap kubelet-gitops/kubelet-general-abc has no key \"kubelet\""
        );
    }
}
