//! The rollout record: what the reconciler is rolling out, written to the cluster for
//! `kubelet-gitops status` (which reads only the cluster) to know what the Nodes alone
//! cannot say: the commit in force, each pool's target config and size (nodes the
//! reconciler has not reached yet included), its phase and why it holds.
//!
//! One ConfigMap in the reconciler's namespace, [`RECORD_NAME`], key [`RECORD_KEY`]
//! holding [`RolloutRecord`] as JSON, written by the leader when the record changes (a
//! new commit, a phase, a hold: not every node's progress, which the Nodes say). It is
//! not one of the published configs: it carries none of their labels, so garbage
//! collection and the agents never see it.
//!
//! Pure: [`RolloutRecord::of`] builds it, [`RolloutRecord::configmap`] and
//! [`RolloutRecord::from_configmap`] convert; the controller writes it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::rollout::PoolReport;

/// The record's ConfigMap.
pub const RECORD_NAME: &str = "kubelet-gitops-rollout";
/// Its data key.
pub const RECORD_KEY: &str = "rollout.json";
/// The record's format version.
pub const RECORD_VERSION: u32 = 1;

/// What the reconciler rolls out now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutRecord {
    pub version: u32,
    /// The commit applied (rendered, validated, its ConfigMaps published).
    pub commit: String,
    /// Pool name to its rollout.
    pub pools: BTreeMap<String, PoolRecord>,
}

/// One pool's rollout, as the reconciler plans it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolRecord {
    /// `<namespace>/<configmap>`.
    pub target: String,
    /// Nodes the pool selects.
    pub nodes: usize,
    /// `Empty`, `Progressing`, `Complete`, `Halted` or `Paused`.
    pub phase: String,
    /// Why nothing more is assigned while nodes wait (a window, a soak, a manual drain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<String>,
}

impl RolloutRecord {
    /// The record of `commit` rolled out as `reports` say.
    pub fn of(commit: &str, reports: &[PoolReport]) -> RolloutRecord {
        RolloutRecord {
            version: RECORD_VERSION,
            commit: commit.to_string(),
            pools: reports
                .iter()
                .map(|r| {
                    (
                        r.pool.clone(),
                        PoolRecord {
                            target: r.target.to_string(),
                            nodes: r.nodes,
                            phase: r.phase.as_str().to_string(),
                            hold: r.hold.as_ref().map(ToString::to_string),
                        },
                    )
                })
                .collect(),
        }
    }

    /// The ConfigMap holding it in `namespace`.
    pub fn configmap(&self, namespace: &str) -> ConfigMap {
        let json = serde_json::to_string_pretty(self).unwrap_or_default();
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(RECORD_NAME.to_string()),
                namespace: Some(namespace.to_string()),
                labels: Some(BTreeMap::from([
                    (
                        "app.kubernetes.io/name".to_string(),
                        "kubelet-gitops".to_string(),
                    ),
                    (
                        "app.kubernetes.io/component".to_string(),
                        "rollout-record".to_string(),
                    ),
                ])),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([(RECORD_KEY.to_string(), json)])),
            ..ConfigMap::default()
        }
    }

    /// The record a ConfigMap holds; `Err` says why it is not one we can read (another
    /// version, not JSON).
    pub fn from_configmap(cm: &ConfigMap) -> Result<RolloutRecord, String> {
        let text = cm
            .data
            .as_ref()
            .and_then(|d| d.get(RECORD_KEY))
            .ok_or_else(|| format!("no {RECORD_KEY} in ConfigMap {RECORD_NAME}"))?;
        let record: RolloutRecord = serde_json::from_str(text)
            .map_err(|e| format!("ConfigMap {RECORD_NAME}: {RECORD_KEY}: {e}"))?;
        if record.version != RECORD_VERSION {
            return Err(format!(
                "ConfigMap {RECORD_NAME}: version {} (this kubelet-gitops reads {RECORD_VERSION})",
                record.version
            ));
        }
        Ok(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::{Hold, PoolPhase};
    use kubelet_gitops_core::protocol::ConfigRef;

    fn report(pool: &str, phase: PoolPhase, hold: Option<Hold>) -> PoolReport {
        PoolReport {
            nodes: 3,
            done: 1,
            in_progress: 1,
            waiting: 1,
            busy: 1,
            phase,
            max_unavailable: 1,
            hold,
            ..PoolReport::new(
                pool,
                ConfigRef::configmap("kubelet-gitops", format!("kubelet-{pool}-abc")),
            )
        }
    }

    #[test]
    fn the_record_round_trips_through_its_configmap_and_says_what_the_nodes_cannot() {
        let r = RolloutRecord::of(
            "0123abc",
            &[
                report("gpu", PoolPhase::Progressing, None),
                report(
                    "cpu",
                    PoolPhase::Progressing,
                    Some(Hold::Manual {
                        nodes: vec!["cpu-1".into()],
                    }),
                ),
            ],
        );
        assert_eq!(r.pools["gpu"].target, "kubelet-gitops/kubelet-gpu-abc");
        assert_eq!(r.pools["gpu"].nodes, 3);
        assert!(r.pools["cpu"].hold.as_deref().unwrap().contains("cpu-1"));
        let cm = r.configmap("kubelet-gitops");
        assert_eq!(cm.metadata.name.as_deref(), Some(RECORD_NAME));
        assert!(
            !cm.metadata
                .labels
                .as_ref()
                .unwrap()
                .contains_key(kubelet_gitops_core::protocol::MANAGED_BY_LABEL),
            "not one of the published configs"
        );
        assert_eq!(RolloutRecord::from_configmap(&cm).unwrap(), r);
        let mut other = cm.clone();
        other.data.as_mut().unwrap().insert(
            RECORD_KEY.into(),
            r#"{"version": 2, "commit": "x", "pools": {}}"#.into(),
        );
        assert_eq!(
            RolloutRecord::from_configmap(&other).unwrap_err(),
            "ConfigMap kubelet-gitops-rollout: version 2 (this kubelet-gitops reads 1)"
        );
    }
}
