//! What a pass observes for [`super::decide::decide`]: the Node's annotations, the
//! checkpoint store (a corrupt file counts as absent, logged), the kubelet's config file
//! against what the agent wrote or saved, the pods cgroup of the config the node runs, and
//! the kubelet's healthz when a promotion is due.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kubelet_gitops_core::message::error_chain;
use kubelet_gitops_core::protocol::{ConfigRef, DESIRED_CONFIG, HEALTH_TIMEOUT, LKG_GRACE};
use tracing::{debug, warn};

use super::AgentError;
use super::context::NodeSetup;
use super::decide::{Assignment, Desired, Disk, Failed, Observed, PodsCgroup};
use super::drive::{Driver, secs_ceil, unix_now};
use crate::checkpoint::{ApplyPhase, Assigned, Checkpoint, sha256_hex};
use crate::config_file::Placement;
use crate::report::Report;
use crate::validate;

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

/// The file checked against the checkpoint it should hold.
fn disk(found: Option<String>, expected: &Checkpoint) -> Disk {
    match found {
        Some(sha) if sha == expected.sha256 => Disk::Matches,
        found => Disk::Differs { found },
    }
}

impl Driver {
    pub(super) async fn observe(
        &mut self,
        node: &Node,
        setup: &NodeSetup,
    ) -> Result<Observed, AgentError> {
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
                warn!(error = %error_chain(&e), "the saved local config is corrupt; it will not be used");
                None
            }
            Err(e) => return Err(e.into()),
        };
        let has_local_original = local_original.is_some();
        let view = assigned
            .as_ref()
            .map(|a| self.assignment_view(a, node.metadata.uid.as_deref()));
        let mut disk_check = None;
        let mut pods_cgroup = None;
        let mut kubelet_healthy = None;
        let on_local = match &assigned {
            None => true,
            Some(a) => a.phase == ApplyPhase::Verified && a.checkpoint.config == ConfigRef::Local,
        };
        if on_local {
            if let Some(saved) = &local_original {
                disk_check = self.local_check(saved)?;
            }
        } else if let Some(a) = &assigned
            && a.phase == ApplyPhase::Verified
        {
            let d = disk(self.file.sha256()?, &a.checkpoint);
            // The pods cgroup of the desired config once it runs (after its verification,
            // then at every resync), when the file is the one the kubelet was verified on.
            if d == Disk::Matches
                && matches!(&desired, Desired::Config(x) if *x == a.checkpoint.config)
            {
                pods_cgroup = pods_cgroup_check(setup);
            }
            disk_check = Some(d);
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
            disk: disk_check,
            pods_cgroup,
            kubelet_healthy,
            verification: self.memory.verification.clone(),
            retry: self.memory.retry.clone(),
            note,
        })
    }

    /// `meta/assigned`; a corrupt one counts as none (the node on its local config).
    pub(super) fn assigned(&self) -> Result<Option<Assigned>, AgentError> {
        match self.store.assigned() {
            Ok(a) => Ok(a),
            Err(e) if e.is_corrupt() => {
                warn!(error = %error_chain(&e), "meta/assigned is corrupt; treating the node as on its local config");
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// `meta/last-known-good`; a corrupt one counts as none (the local config).
    pub(super) fn last_known_good(&self) -> Result<Option<Checkpoint>, AgentError> {
        match self.store.last_known_good() {
            Ok(c) => Ok(c),
            Err(e) if e.is_corrupt() => {
                warn!(error = %error_chain(&e), "meta/last-known-good is corrupt; falling back to the local config");
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The checkpoint of the config the node runs, when it is a ConfigMap.
    pub(super) fn current_checkpoint(&self) -> Result<Option<Checkpoint>, AgentError> {
        Ok(self
            .assigned()?
            .filter(|a| a.phase == ApplyPhase::Verified && a.checkpoint.config != ConfigRef::Local)
            .map(|a| a.checkpoint))
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

    /// `meta/assigned` as [`super::decide::decide`] sees it, with its verdict's report
    /// checked against the Node object of uid `node_uid` (`None`: no Node).
    pub(super) fn assignment_view(&self, a: &Assigned, node_uid: Option<&str>) -> Assignment {
        let failed = a.failed.as_ref().map(|v| Failed {
            config: v.config.clone(),
            reason: v.reason.clone(),
            file: a
                .previous
                .as_ref()
                .filter(|p| p.config == v.config)
                .map(|p| self.payload_file(p))
                .unwrap_or_else(|| "not kept".into()),
            reported: v.reported_to.is_some() && v.reported_to.as_deref() == node_uid,
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
        if matches!(self.file.placement(), Placement::DropIn { .. }) {
            return Ok(None);
        }
        Ok(self.file.read_if_present()?.map(|bytes| {
            if bytes == saved {
                Disk::Matches
            } else {
                Disk::Differs {
                    found: Some(sha256_hex(&bytes)),
                }
            }
        }))
    }
}

/// The pods cgroup of the config the node's files give (the one the kubelet runs)
/// against node allocatable; `None` when it cannot be checked (logged).
fn pods_cgroup_check(setup: &NodeSetup) -> Option<PodsCgroup> {
    let ctx = match setup.context() {
        Ok(c) => c,
        Err(e) => {
            warn!(error = %error_chain(e), "cannot check the pods cgroup");
            return None;
        }
    };
    match validate::check_pods_cgroup(ctx) {
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kubelet_gitops_core::protocol::ConfigRef;

    use super::*;

    fn annotated(pairs: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                annotations: Some(
                    pairs
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect::<BTreeMap<_, _>>(),
                ),
                ..ObjectMeta::default()
            },
            ..Node::default()
        }
    }

    #[test]
    fn duration_annotations_fall_back_to_the_default() {
        let default = Duration::from_secs(120);
        let node = annotated(&[
            (HEALTH_TIMEOUT, "30s"),
            (LKG_GRACE, "0s"),
            ("other", "soon"),
        ]);
        assert_eq!(
            duration_annotation(&node, HEALTH_TIMEOUT, default),
            Duration::from_secs(30)
        );
        assert_eq!(
            duration_annotation(&node, LKG_GRACE, default),
            default,
            "zero"
        );
        assert_eq!(
            duration_annotation(&node, "other", default),
            default,
            "invalid"
        );
        assert_eq!(duration_annotation(&node, "absent", default), default);
    }

    #[test]
    fn the_file_matches_the_checkpoint_by_sha256() {
        let cp = Checkpoint::local(b"x");
        assert_eq!(disk(Some(sha256_hex(b"x")), &cp), Disk::Matches);
        assert_eq!(
            disk(Some(sha256_hex(b"y")), &cp),
            Disk::Differs {
                found: Some(sha256_hex(b"y"))
            }
        );
        assert_eq!(disk(None, &cp), Disk::Differs { found: None });
        assert_eq!(cp.config, ConfigRef::Local);
    }
}
