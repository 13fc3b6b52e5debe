//! What `meta/` records: the checkpoint of a config ([`Checkpoint`]), the apply in flight
//! ([`Assigned`], with its [`ApplyPhase`] and, on a rollback, the [`Verdict`]), as JSON
//! that older agents read and write too.

use std::fmt;

use kubelet_gitops_core::protocol::ConfigRef;
use serde::{Deserialize, Serialize};

use super::sha256_hex;

/// A checkpointed config: which ConfigMap, which version of it, and the sha256 of its
/// payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    /// The ConfigMap (`<namespace>/<name>`).
    #[serde(with = "config_ref")]
    pub config: ConfigRef,
    /// The ConfigMap's `metadata.uid`.
    pub uid: String,
    /// The ConfigMap's `metadata.resourceVersion`.
    pub resource_version: String,
    /// The sha256 of the payload, lowercase hex.
    pub sha256: String,
}

impl Checkpoint {
    /// The checkpoint standing for the node's own config file (`original`, as saved before
    /// the first apply). The agent and kubelet-gitops-rescue must agree on it: both compare
    /// it with what `meta/assigned` and `meta/last-known-good` record.
    pub fn local(original: &[u8]) -> Checkpoint {
        Checkpoint {
            config: ConfigRef::Local,
            uid: kubelet_gitops_core::protocol::LOCAL.to_string(),
            resource_version: "original".to_string(),
            sha256: sha256_hex(original),
        }
    }
}

/// Where an apply was when the agent last recorded it, so a restarted agent knows what to
/// do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ApplyPhase {
    /// The payload is checkpointed and validated; nothing on the node has changed yet.
    Checkpointed,
    /// The kubelet config file (or drop-in) has been written.
    Written,
    /// The kubelet has been restarted.
    Restarted,
    /// The kubelet runs the config (healthz and configz); waiting for last-known-good.
    Verified,
}

impl ApplyPhase {
    /// The name as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            ApplyPhase::Checkpointed => "Checkpointed",
            ApplyPhase::Written => "Written",
            ApplyPhase::Restarted => "Restarted",
            ApplyPhase::Verified => "Verified",
        }
    }
}

impl fmt::Display for ApplyPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `meta/assigned`: the config being applied, how far the apply got, and what ran before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Assigned {
    /// The config being applied.
    pub checkpoint: Checkpoint,
    /// How far the apply got.
    pub phase: ApplyPhase,
    /// When `phase` was entered, in seconds since the Unix epoch.
    pub since: u64,
    /// What the kubelet ran before this apply; `None` is the node's local config.
    pub previous: Option<Checkpoint>,
    /// The kubelet state files (names under its root directory, `cpu_manager_state`,
    /// `memory_manager_state`) this apply removes before the config is written and again
    /// right before the kubelet restart. Decided once, before anything on the node
    /// changes, and kept here so that a resumed apply removes the same files even after
    /// the config file has been overwritten. `None`: not decided yet (absent in files
    /// written by older agents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_files: Option<Vec<String>>,
    /// The pods on the node (`namespace/name`) that were Ready before the kubelet restart
    /// of this apply, recorded with phase `Written`: verification waits for them to be
    /// Ready again, also after an agent restart. Absent (older agents) is empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ready_pods: Vec<String>,
    /// Set on a rollback: the verdict on the config this assignment replaces because the
    /// kubelet failed with it. Recorded in the same atomic write that assigns the
    /// fallback, before anything is written to the kubelet's file or the API server, so
    /// a restarted agent (or one that cannot reach the API server) never retries the
    /// failed config and carries on with the fallback. Kept while the fallback runs; a
    /// new desired config clears it. Absent in files written by older agents (which
    /// ignore it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<Verdict>,
}

/// The verdict on a config the kubelet did not come back healthy with (see
/// [`Assigned::failed`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// The config that failed.
    #[serde(with = "config_ref")]
    pub config: ConfigRef,
    /// Why, in the kubelet's words: `kubelet did not become healthy within 2m: ...`.
    pub reason: String,
    /// When the verdict was reached, in seconds since the Unix epoch.
    pub at: u64,
    /// The uid of the Node object the verdict was reported on, once the API server took
    /// it. A Node that no longer shows a verdict it was shown had it cleared by a person
    /// (a retry); a Node with another uid (re-created) is told again. `None`: not
    /// reported yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported_to: Option<String>,
}

impl Assigned {
    /// An assignment of `checkpoint` in `phase` since `since`, after `previous`, with
    /// nothing decided yet about state files and no pods recorded.
    pub fn new(
        checkpoint: Checkpoint,
        phase: ApplyPhase,
        since: u64,
        previous: Option<Checkpoint>,
    ) -> Assigned {
        Assigned {
            checkpoint,
            phase,
            since,
            previous,
            state_files: None,
            ready_pods: Vec::new(),
            failed: None,
        }
    }
}

mod config_ref {
    use kubelet_gitops_core::protocol::ConfigRef;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(r: &ConfigRef, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(r)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ConfigRef, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}
