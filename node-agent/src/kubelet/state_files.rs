//! The kubelet's state files on the node: which ones to remove before the kubelet starts
//! with a new config (the rules are [`kubelet_gitops_core::state_files`]; what the files
//! record is read here), and removing them. When the agent removes them is explained in
//! `agent/steps/apply.rs` (`Driver::write`).

use std::io;
use std::path::{Path, PathBuf};

use kubelet_gitops_core::state_files::{self as rules, STATE_FILES, stale_state_files};
use kubelet_gitops_core::types::KubeletConfiguration;
use tracing::{debug, info};

use crate::hostflags::host_path;

/// The policy the state file at `path` was written under ([`rules::recorded_policy`]).
/// `None` when the file is missing or unreadable.
pub fn recorded_policy(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    rules::recorded_policy(&bytes)
}

/// The state files to remove before the kubelet starts with `new`, under the kubelet's
/// root directory `root_dir` (a host path, `--root-dir`) read under `host_root`:
/// [`stale_state_files`], with what the files on the node record (`old` is `None` when
/// the node's current config cannot be read).
pub fn state_files_for_change(
    host_root: &Path,
    root_dir: &str,
    old: Option<&KubeletConfiguration>,
    new: &KubeletConfiguration,
) -> Vec<String> {
    let dir = host_path(host_root, root_dir);
    stale_state_files(old, new, |name| recorded_policy(&dir.join(name)))
        .into_iter()
        .map(|stale| {
            if let Some(recorded) = &stale.recorded {
                debug!(file = stale.name, %recorded, "state file of another policy");
            }
            stale.name.to_string()
        })
        .collect()
}

/// Removes the state files `names` (those of [`STATE_FILES`]; any other name is refused)
/// from the kubelet's root directory `root_dir` (a host path, `--root-dir`) under
/// `host_root`, then fsyncs the directory. Idempotent: a file that is already gone is not
/// an error. Returns the files that existed and were removed.
pub fn remove_state_files(
    host_root: &Path,
    root_dir: &str,
    names: &[String],
) -> io::Result<Vec<PathBuf>> {
    let dir = host_path(host_root, root_dir);
    let mut removed = Vec::new();
    for name in names {
        if !STATE_FILES.contains(&name.as_str()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{name:?} is not a kubelet state file the agent removes"),
            ));
        }
        let path = dir.join(name);
        match std::fs::remove_file(&path) {
            Ok(()) => {
                info!(path = %path.display(), "removed kubelet state file for the policy change");
                removed.push(path);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("failed to remove {}: {e}", path.display()),
                ));
            }
        }
    }
    if !removed.is_empty() {
        std::fs::File::open(&dir)?.sync_all()?;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubelet_gitops_core::state_files::{CPU_MANAGER_STATE, MEMORY_MANAGER_STATE};
    use serde_json::{Value, json};

    fn cfg(v: Value) -> KubeletConfiguration {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn state_files_are_chosen_by_the_change_and_by_what_they_record() {
        let host = tempfile::tempdir().unwrap();
        let root = host.path().join("var/lib/kubelet");
        std::fs::create_dir_all(&root).unwrap();
        let none = KubeletConfiguration::default();
        let static_cpu = cfg(json!({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0"}));
        let for_change = |old: Option<&KubeletConfiguration>, new: &KubeletConfiguration| {
            state_files_for_change(host.path(), "/var/lib/kubelet", old, new)
        };
        assert_eq!(for_change(Some(&none), &static_cpu), [CPU_MANAGER_STATE]);
        assert!(for_change(None, &static_cpu).is_empty(), "no files yet");
        // Files written under the none policies, as a kubelet leaves them.
        std::fs::write(
            root.join(CPU_MANAGER_STATE),
            r#"{"policyName":"none","defaultCpuSet":"","checksum":1353318690}"#,
        )
        .unwrap();
        std::fs::write(
            root.join(MEMORY_MANAGER_STATE),
            r#"{"policyName":"None","machineState":{},"checksum":1}"#,
        )
        .unwrap();
        assert_eq!(
            recorded_policy(&root.join(CPU_MANAGER_STATE)).as_deref(),
            Some("none")
        );
        assert!(for_change(None, &none).is_empty(), "they match the config");
        assert_eq!(
            for_change(None, &static_cpu),
            [CPU_MANAGER_STATE],
            "without the old config, the file itself says it is of another policy"
        );
        let static_mem = cfg(json!({"memoryManagerPolicy": "Static"}));
        assert_eq!(
            for_change(Some(&static_mem), &static_mem),
            [MEMORY_MANAGER_STATE],
            "the config on disk claims Static but the kubelet wrote None"
        );
    }

    #[test]
    fn remove_state_files_removes_only_the_named_known_files() {
        let host = tempfile::tempdir().unwrap();
        let root = host.path().join("var/lib/kubelet");
        std::fs::create_dir_all(&root).unwrap();
        for f in [CPU_MANAGER_STATE, MEMORY_MANAGER_STATE, "kubeconfig"] {
            std::fs::write(root.join(f), "{}").unwrap();
        }
        let names = vec![CPU_MANAGER_STATE.to_string()];
        let removed = remove_state_files(host.path(), "/var/lib/kubelet", &names).unwrap();
        assert_eq!(removed, [root.join(CPU_MANAGER_STATE)]);
        assert!(!root.join(CPU_MANAGER_STATE).exists());
        assert!(root.join(MEMORY_MANAGER_STATE).exists());
        // Already gone: nothing to report, no error.
        let removed = remove_state_files(host.path(), "/var/lib/kubelet", &names).unwrap();
        assert!(removed.is_empty());
        let err = remove_state_files(host.path(), "/var/lib/kubelet", &["kubeconfig".into()])
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(root.join("kubeconfig").exists());
    }
}
