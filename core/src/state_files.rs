//! The kubelet's CPU and memory manager checkpoints ("state files", under its
//! `--root-dir`), and which of them a config change makes stale.
//!
//! The kubelet refuses to start when a state file records another policy than its
//! config's (`configured policy "static" differs from state checkpoint policy "none"`), or
//! when, under the `static` policies, what the file was computed from has changed. Such a
//! file has to go before the kubelet starts with the new config; a kubelet that finds none
//! creates a fresh one for the policy it runs. The topology manager keeps no checkpoint: a
//! `topologyManagerPolicy` change needs no file removed.
//!
//! Reading the files and removing them is the caller's; here are the kubelet's rules.

use crate::types::KubeletConfiguration;

/// The CPU manager's checkpoint under the kubelet's root directory.
pub const CPU_MANAGER_STATE: &str = "cpu_manager_state";
/// The memory manager's checkpoint under the kubelet's root directory.
pub const MEMORY_MANAGER_STATE: &str = "memory_manager_state";
/// Every state file, in the order they are judged.
pub const STATE_FILES: [&str; 2] = [CPU_MANAGER_STATE, MEMORY_MANAGER_STATE];

fn policy(v: &Option<String>, default: &str) -> String {
    v.clone()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| default.to_string())
}

/// The state files that the change from `old` to `new` requires removing before the
/// kubelet starts:
///
/// - `cpu_manager_state` when `cpuManagerPolicy` changes (the kubelet refuses a checkpoint
///   of another policy), or, under the `static` policy, when the CPUs it may not hand
///   out change (`reservedSystemCPUs`, the cpu of `systemReserved` or `kubeReserved`, or
///   `cpuManagerPolicyOptions`): the checkpoint's default set would no longer match;
/// - `memory_manager_state` when `memoryManagerPolicy` changes, or, under `Static`, when
///   `reservedMemory` changes (its machine state would no longer match).
pub fn state_files_to_clear(
    old: &KubeletConfiguration,
    new: &KubeletConfiguration,
) -> Vec<&'static str> {
    let mut out = Vec::new();
    let (old_cpu, new_cpu) = (
        policy(&old.cpu_manager_policy, "none"),
        policy(&new.cpu_manager_policy, "none"),
    );
    let reserved_cpu = |c: &KubeletConfiguration| {
        (
            c.reserved_system_cpus.clone().unwrap_or_default(),
            c.system_reserved
                .as_ref()
                .and_then(|m| m.get("cpu").cloned()),
            c.kube_reserved.as_ref().and_then(|m| m.get("cpu").cloned()),
            c.cpu_manager_policy_options.clone().unwrap_or_default(),
        )
    };
    if old_cpu != new_cpu || (new_cpu == "static" && reserved_cpu(old) != reserved_cpu(new)) {
        out.push(CPU_MANAGER_STATE);
    }
    let (old_mem, new_mem) = (
        policy(&old.memory_manager_policy, "None"),
        policy(&new.memory_manager_policy, "None"),
    );
    if old_mem != new_mem
        || (new_mem == "Static"
            && old.reserved_memory.clone().unwrap_or_default()
                != new.reserved_memory.clone().unwrap_or_default())
    {
        out.push(MEMORY_MANAGER_STATE);
    }
    out
}

/// The policy a state file (its bytes) was written under: its `policyName` (both managers'
/// checkpoints are JSON objects with one). `None` when it has none.
pub fn recorded_policy(state_file: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(state_file).ok()?;
    value.get("policyName")?.as_str().map(str::to_string)
}

/// The policy `config` sets for the manager whose state file is `name`, as the kubelet
/// compares it with the file's `policyName` (`none` / `None` when unset).
pub fn configured_policy(name: &str, config: &KubeletConfiguration) -> Option<String> {
    match name {
        CPU_MANAGER_STATE => Some(policy(&config.cpu_manager_policy, "none")),
        MEMORY_MANAGER_STATE => Some(policy(&config.memory_manager_policy, "None")),
        _ => None,
    }
}

/// A state file the kubelet would refuse with the new config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stale {
    /// [`CPU_MANAGER_STATE`] or [`MEMORY_MANAGER_STATE`].
    pub name: &'static str,
    /// The policy the file records, when that is why it is stale (another policy than
    /// the new config's); `None` when the change itself makes it stale.
    pub recorded: Option<String>,
}

/// The state files to remove before the kubelet starts with `new`: those the change from
/// `old` requires ([`state_files_to_clear`]; `old` is `None` when the node's current
/// config is not known), then every file that records a policy other than the one `new`
/// sets, whatever ran before. `recorded` gives a file's recorded policy ([`recorded_policy`]
/// of its bytes; `None` when it is missing or has none); it is asked only about the files
/// the change does not list.
pub fn stale_state_files(
    old: Option<&KubeletConfiguration>,
    new: &KubeletConfiguration,
    mut recorded: impl FnMut(&'static str) -> Option<String>,
) -> Vec<Stale> {
    let mut out: Vec<Stale> = old
        .map(|old| state_files_to_clear(old, new))
        .unwrap_or_default()
        .into_iter()
        .map(|name| Stale {
            name,
            recorded: None,
        })
        .collect();
    for name in STATE_FILES {
        if out.iter().any(|s| s.name == name) {
            continue;
        }
        if let Some(policy) = recorded(name)
            && Some(&policy) != configured_policy(name, new).as_ref()
        {
            out.push(Stale {
                name,
                recorded: Some(policy),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn cfg(v: Value) -> KubeletConfiguration {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn policy_changes_name_their_state_files() {
        let none = KubeletConfiguration::default();
        let static_cpu = cfg(json!({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0"}));
        assert_eq!(state_files_to_clear(&none, &none), Vec::<&str>::new());
        assert_eq!(
            state_files_to_clear(&none, &static_cpu),
            [CPU_MANAGER_STATE]
        );
        assert_eq!(
            state_files_to_clear(&static_cpu, &none),
            [CPU_MANAGER_STATE]
        );
        let more_reserved = cfg(json!({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0-1"}));
        assert_eq!(
            state_files_to_clear(&static_cpu, &more_reserved),
            [CPU_MANAGER_STATE]
        );
        let explicit_none =
            cfg(json!({"cpuManagerPolicy": "none", "topologyManagerPolicy": "single-numa-node"}));
        assert_eq!(
            state_files_to_clear(&none, &explicit_none),
            Vec::<&str>::new(),
            "none is the default; topology keeps no state"
        );
        let mem = cfg(json!({"memoryManagerPolicy": "Static",
            "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}]}));
        assert_eq!(state_files_to_clear(&none, &mem), [MEMORY_MANAGER_STATE]);
        let mem2 = cfg(json!({"memoryManagerPolicy": "Static",
            "reservedMemory": [{"numaNode": 0, "limits": {"memory": "2Gi"}}]}));
        assert_eq!(state_files_to_clear(&mem, &mem2), [MEMORY_MANAGER_STATE]);
        assert_eq!(state_files_to_clear(&mem, &mem), Vec::<&str>::new());
    }

    #[test]
    fn a_state_file_records_its_policy_name() {
        assert_eq!(
            recorded_policy(br#"{"policyName":"none","defaultCpuSet":"","checksum":1}"#).as_deref(),
            Some("none")
        );
        assert_eq!(recorded_policy(b"{}"), None);
        assert_eq!(recorded_policy(b"not json"), None);
    }

    #[test]
    fn stale_files_come_from_the_change_then_from_what_they_record() {
        let none = KubeletConfiguration::default();
        let static_cpu = cfg(json!({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0"}));
        let nothing_recorded = |_: &str| None;
        assert_eq!(
            stale_state_files(Some(&none), &static_cpu, nothing_recorded),
            [Stale {
                name: CPU_MANAGER_STATE,
                recorded: None,
            }]
        );
        assert!(stale_state_files(None, &static_cpu, nothing_recorded).is_empty());
        // Files as a kubelet under the none policies leaves them.
        let none_recorded = |name: &str| {
            Some(
                if name == CPU_MANAGER_STATE {
                    "none"
                } else {
                    "None"
                }
                .to_string(),
            )
        };
        assert!(stale_state_files(None, &none, none_recorded).is_empty());
        assert_eq!(
            stale_state_files(None, &static_cpu, none_recorded),
            [Stale {
                name: CPU_MANAGER_STATE,
                recorded: Some("none".into()),
            }]
        );
        // A file the change lists is not asked about.
        let mut asked = Vec::new();
        stale_state_files(Some(&none), &static_cpu, |name| {
            asked.push(name);
            None
        });
        assert_eq!(asked, [MEMORY_MANAGER_STATE]);
    }
}
