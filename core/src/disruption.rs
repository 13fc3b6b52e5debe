//! Disruption classes: what applying a change of each `KubeletConfiguration` field takes
//! on a node, as data.
//!
//! - [`Class::Restart`]: the kubelet restarts with the new config; pods keep running.
//! - [`Class::RestartClearState`]: the kubelet restarts, and the CPU or memory manager
//!   state file the change makes stale is removed first ([`crate::state_files`]); pods
//!   keep running with the CPUs or memory the old state gave them.
//! - [`Class::Drain`]: the node is emptied first (cordon, evict), then the kubelet restarts
//!   (with the state files removed as above).
//!
//! Every field is [`Class::Restart`] unless [`BUILTIN`] says otherwise; each entry there
//! carries why and where upstream says so. A repository overrides the class per field
//! ([`Overrides`]: the settings' `spec.disruption.classes`, a pool's own); an override may
//! not put a field below its floor (a field whose change makes the agent remove a state
//! file is at least [`Class::RestartClearState`]: the agent removes it whatever the class
//! says, or the kubelet would not start).
//!
//! The class of a change ([`classify`]) is the highest class of the fields that change,
//! with those fields: pure, for the plan, the rollout and the agent alike.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::decode::is_within;

/// What applying a change takes on a node, in increasing order of disruption.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// The kubelet restarts; pods keep running.
    Restart,
    /// The kubelet restarts after the stale CPU or memory manager state file is removed.
    RestartClearState,
    /// The node is drained before the kubelet restarts.
    Drain,
}

impl Class {
    /// Every class, in increasing order.
    pub const ALL: [Class; 3] = [Class::Restart, Class::RestartClearState, Class::Drain];

    /// The class's name in the repository settings, the plan and annotations.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Restart => "restart",
            Class::RestartClearState => "restart-clear-state",
            Class::Drain => "drain",
        }
    }

    /// What the class means for the node, for people.
    pub fn meaning(self) -> &'static str {
        match self {
            Class::Restart => "the kubelet restarts, pods keep running",
            Class::RestartClearState => {
                "the kubelet restarts after its stale CPU or memory manager state file is \
                 removed; pods keep running"
            }
            Class::Drain => "the node is drained before the kubelet restarts",
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Class {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Class::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<String> = Class::ALL
                    .iter()
                    .map(|c| format!("`{}`", c.as_str()))
                    .collect();
                let hint = Class::ALL
                    .iter()
                    .map(|c| (strsim::levenshtein(s, c.as_str()), c.as_str()))
                    .filter(|(d, _)| *d <= 3)
                    .min()
                    .map(|(_, c)| format!(" (did you mean `{c}`?)"))
                    .unwrap_or_default();
                format!(
                    "unknown disruption class {s:?}{hint}: expected one of {}",
                    names.join(", ")
                )
            })
    }
}

/// One built-in class: a field (a path covers the fields under it), its class, the least
/// class an override may give it, why, and where upstream says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Builtin {
    /// A `KubeletConfiguration` field path in its JSON names (`systemReserved.cpu`).
    pub field: &'static str,
    pub class: Class,
    /// The least class an override may set: [`Class::RestartClearState`] where the node
    /// agent removes a state file when the field changes ([`crate::state_files`]).
    pub floor: Class,
    /// Why the field has its class.
    pub reason: &'static str,
    /// Where upstream documents it (a kubernetes.io page, a file of the kubelet's source
    /// at v1.36.3), or that it is kubelet-gitops's own reading.
    pub source: &'static str,
}

const CPU_DOC: &str = "kubernetes.io/docs/tasks/administer-cluster/cpu-management-policies \
    (Changing the CPU Manager Policy); pkg/kubelet/cm/cpumanager/state/state_checkpoint.go";
const CPU_STATIC: &str = "kubernetes.io/docs/tasks/administer-cluster/cpu-management-policies; \
    pkg/kubelet/cm/cpumanager/policy_static.go (validateState)";
const MEMORY_SRC: &str = "kubernetes.io/docs/tasks/administer-cluster/memory-manager; \
    pkg/kubelet/cm/memorymanager/state/state_checkpoint.go, policy_static.go (validateState)";
const TOPOLOGY_SRC: &str = "kubernetes.io/docs/tasks/administer-cluster/topology-manager; \
    issue 16 (the topology manager keeps no state file: the drain is for the pods' placement)";

const RESERVED_CPU: &str = "under the static CPU policy the reserved CPUs change, so the agent \
    removes cpu_manager_state (the kubelet would refuse it); with another policy a plain \
    restart. Override to `drain` for static-policy pools";

/// The fields whose built-in class is not [`Class::Restart`]. Looked up most specific
/// first ([`builtin_of`]).
pub const BUILTIN: &[Builtin] = &[
    Builtin {
        field: "cpuManagerPolicy",
        class: Class::Drain,
        floor: Class::RestartClearState,
        reason: "the kubelet refuses to start while cpu_manager_state records another \
                 policy (\"configured policy ... differs from state checkpoint policy\"), and \
                 the policy applies only to pods it admits: upstream's procedure is drain, \
                 stop the kubelet, remove the state file, start it",
        source: CPU_DOC,
    },
    Builtin {
        field: "cpuManagerPolicyOptions",
        class: Class::Drain,
        floor: Class::RestartClearState,
        reason: "the static policy's options decide which CPUs pods get: under `static` \
                 the state file is removed, and running pods keep CPUs given under the old \
                 options until recreated",
        source: CPU_STATIC,
    },
    Builtin {
        field: "reservedSystemCPUs",
        class: Class::Drain,
        floor: Class::RestartClearState,
        reason: "under the static policy the kubelet refuses a state file whose shared \
                 pool lacks a reserved CPU (\"invalid state, please drain node and remove \
                 policy state file\"); pods with exclusive CPUs may hold the newly reserved \
                 ones",
        source: CPU_STATIC,
    },
    Builtin {
        field: "memoryManagerPolicy",
        class: Class::Drain,
        floor: Class::RestartClearState,
        reason: "the kubelet refuses to start while memory_manager_state records another \
                 policy (\"please drain this node and delete the memory manager checkpoint \
                 file\"); the policy applies only to pods it admits",
        source: MEMORY_SRC,
    },
    Builtin {
        field: "reservedMemory",
        class: Class::Drain,
        floor: Class::RestartClearState,
        reason: "under the Static policy the kubelet refuses a state file whose machine \
                 state no longer matches (\"Invalid state, please drain node and remove \
                 policy state file\"); running pods keep their NUMA memory",
        source: MEMORY_SRC,
    },
    Builtin {
        field: "topologyManagerPolicy",
        class: Class::Drain,
        floor: Class::Restart,
        reason: "applied at pod admission only: running pods keep an alignment made under \
                 the old policy until recreated",
        source: TOPOLOGY_SRC,
    },
    Builtin {
        field: "topologyManagerScope",
        class: Class::Drain,
        floor: Class::Restart,
        reason: "applied at pod admission only: running pods keep an alignment made under \
                 the old scope until recreated",
        source: TOPOLOGY_SRC,
    },
    Builtin {
        field: "topologyManagerPolicyOptions",
        class: Class::Drain,
        floor: Class::Restart,
        reason: "applied at pod admission only: running pods keep an alignment made under \
                 the old options until recreated",
        source: TOPOLOGY_SRC,
    },
    Builtin {
        field: "cgroupDriver",
        class: Class::Drain,
        floor: Class::Restart,
        reason: "upstream's migration to another cgroup driver drains the node, then \
                 changes the runtime's and the kubelet's driver together; running pods stay \
                 in cgroups of the old driver",
        source: "kubernetes.io/docs/tasks/administer-cluster/kubeadm/configure-cgroup-driver \
                 (Migrating to the systemd driver)",
    },
    Builtin {
        field: "containerRuntimeEndpoint",
        class: Class::Drain,
        floor: Class::Restart,
        reason: "the kubelet talks to another runtime and no longer manages the old one's \
                 containers; upstream cordons and drains the node to change runtimes",
        source: "kubernetes.io/docs/tasks/administer-cluster/migrating-from-dockershim/\
                 change-runtime-containerd",
    },
    Builtin {
        field: "cgroupRoot",
        class: Class::Drain,
        floor: Class::Restart,
        reason: "moves the pods' cgroup hierarchy: running pods stay under the old root, \
                 outside node-allocatable enforcement, until recreated",
        source: "kubelet-gitops's reading of the kubelet (pkg/kubelet/cm); not stated \
                 upstream",
    },
    Builtin {
        field: "cgroupsPerQOS",
        class: Class::Drain,
        floor: Class::Restart,
        reason: "creates or removes the QoS cgroup hierarchy: running pods are not moved \
                 into or out of it",
        source: "kubelet-gitops's reading of the kubelet (pkg/kubelet/cm); not stated \
                 upstream",
    },
    Builtin {
        field: "systemReserved.cpu",
        class: Class::RestartClearState,
        floor: Class::RestartClearState,
        reason: RESERVED_CPU,
        source: CPU_STATIC,
    },
    Builtin {
        field: "kubeReserved.cpu",
        class: Class::RestartClearState,
        floor: Class::RestartClearState,
        reason: RESERVED_CPU,
        source: CPU_STATIC,
    },
];

/// The built-in entry that covers `field` (the most specific one), if any.
pub fn builtin_of(field: &str) -> Option<&'static Builtin> {
    BUILTIN
        .iter()
        .filter(|b| is_within(field, b.field))
        .max_by_key(|b| b.field.len())
}

/// The least class an override may give `field` (or a field under it): the highest floor
/// of the built-in entries it covers or lies under.
pub fn floor_of(field: &str) -> (Class, Option<&'static Builtin>) {
    BUILTIN
        .iter()
        .filter(|b| is_within(field, b.field) || is_within(b.field, field))
        .map(|b| (b.floor, Some(b)))
        .max_by_key(|(floor, _)| *floor)
        .unwrap_or((Class::Restart, None))
}

/// Where an override was written: the file and its field path (for the plan's "why").
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OverrideSource {
    /// The file, relative to the repository root (`kubelet-gitops.yaml`, `pools/gpu.yaml`).
    pub file: String,
}

/// Classes a repository gives fields, by field path (a path covers the fields under it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Overrides(BTreeMap<String, (Class, OverrideSource)>);

impl Overrides {
    /// Sets `field`'s class, written in `file`.
    pub fn set(&mut self, field: impl Into<String>, class: Class, file: impl Into<String>) {
        self.0
            .insert(field.into(), (class, OverrideSource { file: file.into() }));
    }

    /// `self`, then `other`'s entries over them.
    pub fn overlaid(&self, other: &Overrides) -> Overrides {
        let mut out = self.clone();
        out.0
            .extend(other.0.iter().map(|(k, v)| (k.clone(), v.clone())));
        out
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every override: field, class, file.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Class, &OverrideSource)> {
        self.0.iter().map(|(f, (c, s))| (f.as_str(), *c, s))
    }

    /// The most specific override covering `field`.
    fn of(&self, field: &str) -> Option<(&str, Class, &OverrideSource)> {
        self.iter()
            .filter(|(f, _, _)| is_within(field, f))
            .max_by_key(|(f, _, _)| f.len())
    }

    /// The overrides as a JSON object `{"field": "class"}` (sorted), for an annotation.
    pub fn to_json(&self) -> String {
        let map: serde_json::Map<String, serde_json::Value> = self
            .0
            .iter()
            .map(|(f, (c, _))| (f.clone(), serde_json::Value::from(c.as_str())))
            .collect();
        serde_json::Value::Object(map).to_string()
    }
}

/// Why a field has its class.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Why {
    /// No entry covers it: every field restarts the kubelet.
    Default,
    /// A built-in entry ([`BUILTIN`]).
    Builtin(&'static str),
    /// The repository's override of `field` in `file`.
    Override { field: String, file: String },
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Why::Default => f.write_str("a kubelet restart applies it"),
            Why::Builtin(reason) => f.write_str(reason),
            Why::Override { field, file } => {
                write!(f, "set for {field} in {file}")
            }
        }
    }
}

/// The class of one field, and why.
pub fn class_of(field: &str, overrides: &Overrides) -> (Class, Why) {
    if let Some((f, class, source)) = overrides.of(field) {
        return (
            class,
            Why::Override {
                field: f.to_string(),
                file: source.file.clone(),
            },
        );
    }
    match builtin_of(field) {
        Some(b) => (b.class, Why::Builtin(b.reason)),
        None => (Class::Restart, Why::Default),
    }
}

/// A changed field that decides a change's class.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FieldClass {
    /// The field as the diff names it (`featureGates.MemoryQoS`).
    pub field: String,
    pub why: Why,
}

/// The class of a change and the fields that make it so.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChangeClass {
    pub class: Class,
    /// The changed fields of class [`ChangeClass::class`], in the order given. Empty for a
    /// change of nothing (class [`Class::Restart`]).
    pub fields: Vec<FieldClass>,
}

/// The class of a change of `fields` (the changed field paths): the highest class of
/// them, with the fields of that class. No field: [`Class::Restart`] with no field.
pub fn classify<'a>(
    fields: impl IntoIterator<Item = &'a str>,
    overrides: &Overrides,
) -> ChangeClass {
    let mut out = ChangeClass {
        class: Class::Restart,
        fields: Vec::new(),
    };
    for field in fields {
        let (class, why) = class_of(field, overrides);
        if class > out.class {
            out.class = class;
            out.fields.clear();
        }
        if class == out.class {
            out.fields.push(FieldClass {
                field: field.to_string(),
                why,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_manager_policy_change_is_a_drain_because_of_that_field() {
        let c = classify(
            [
                "maxPods",
                "cpuManagerPolicy",
                "evictionHard.memory.available",
            ],
            &Overrides::default(),
        );
        assert_eq!(c.class, Class::Drain);
        assert_eq!(c.fields.len(), 1);
        assert_eq!(c.fields[0].field, "cpuManagerPolicy");
        assert!(matches!(c.fields[0].why, Why::Builtin(r) if r.contains("cpu_manager_state")));
    }

    #[test]
    fn eviction_thresholds_restart_the_kubelet() {
        let c = classify(["evictionHard.memory.available"], &Overrides::default());
        assert_eq!(c.class, Class::Restart);
        assert_eq!(c.fields[0].why, Why::Default);
        assert_eq!(classify([], &Overrides::default()).class, Class::Restart);
    }

    #[test]
    fn every_field_of_the_highest_class_is_named() {
        let c = classify(
            ["kubeReserved.cpu", "reservedMemory", "topologyManagerScope"],
            &Overrides::default(),
        );
        assert_eq!(c.class, Class::Drain);
        let names: Vec<&str> = c.fields.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(names, ["reservedMemory", "topologyManagerScope"]);
        let c = classify(["systemReserved.cpu", "maxPods"], &Overrides::default());
        assert_eq!(c.class, Class::RestartClearState);
        assert_eq!(c.fields[0].field, "systemReserved.cpu");
        // The memory of a reservation is no CPU: a restart.
        assert_eq!(
            classify(["systemReserved.memory"], &Overrides::default()).class,
            Class::Restart
        );
    }

    #[test]
    fn an_override_moves_a_field_and_the_most_specific_one_wins() {
        let mut o = Overrides::default();
        o.set("evictionHard", Class::Drain, "kubelet-gitops.yaml");
        o.set(
            "cpuManagerPolicy",
            Class::RestartClearState,
            "pools/gpu.yaml",
        );
        o.set("systemReserved", Class::Drain, "kubelet-gitops.yaml");
        o.set(
            "systemReserved.cpu",
            Class::RestartClearState,
            "pools/gpu.yaml",
        );
        let c = classify(["evictionHard.memory.available", "cpuManagerPolicy"], &o);
        assert_eq!(c.class, Class::Drain);
        assert_eq!(
            c.fields,
            [FieldClass {
                field: "evictionHard.memory.available".into(),
                why: Why::Override {
                    field: "evictionHard".into(),
                    file: "kubelet-gitops.yaml".into()
                }
            }]
        );
        assert_eq!(class_of("cpuManagerPolicy", &o).0, Class::RestartClearState);
        assert_eq!(
            class_of("systemReserved.cpu", &o).0,
            Class::RestartClearState
        );
        assert_eq!(class_of("systemReserved.memory", &o).0, Class::Drain);
        // A path covers its subtree only: kubeReservedCgroup is not under kubeReserved.
        assert_eq!(class_of("cpuManagerPolicyOptions", &o).0, Class::Drain);
    }

    #[test]
    fn floors_follow_the_state_files_the_agent_removes() {
        assert_eq!(floor_of("cpuManagerPolicy").0, Class::RestartClearState);
        assert_eq!(floor_of("systemReserved").0, Class::RestartClearState);
        assert_eq!(floor_of("systemReserved.memory").0, Class::Restart);
        assert_eq!(floor_of("topologyManagerPolicy").0, Class::Restart);
        assert_eq!(floor_of("maxPods").0, Class::Restart);
        // Every floor is at most the built-in class, and every field the agent clears a
        // state file for has a floor.
        for b in BUILTIN {
            assert!(b.floor <= b.class, "{}", b.field);
        }
        use crate::types::KubeletConfiguration;
        let old = KubeletConfiguration::default();
        let new = KubeletConfiguration {
            cpu_manager_policy: Some("static".into()),
            memory_manager_policy: Some("Static".into()),
            ..KubeletConfiguration::default()
        };
        assert_eq!(
            crate::state_files::state_files_to_clear(&old, &new).len(),
            2
        );
        for field in ["cpuManagerPolicy", "memoryManagerPolicy"] {
            assert_eq!(floor_of(field).0, Class::RestartClearState, "{field}");
        }
    }

    #[test]
    fn class_names_parse_and_a_misspelling_gets_a_suggestion() {
        for c in Class::ALL {
            assert_eq!(c.as_str().parse::<Class>(), Ok(c));
        }
        let e = "drian".parse::<Class>().unwrap_err();
        assert!(e.contains("did you mean `drain`?"), "{e}");
        assert!(e.contains("`restart-clear-state`"), "{e}");
        assert!(Class::Restart < Class::RestartClearState);
        assert!(Class::RestartClearState < Class::Drain);
    }

    #[test]
    fn every_builtin_field_is_a_kubelet_configuration_field() {
        for b in BUILTIN {
            let top = b.field.split('.').next().unwrap_or_default();
            let probe = serde_json::json!({ top: null });
            crate::decode::from_value::<crate::types::KubeletConfiguration>(
                "t",
                &probe,
                &crate::decode::SourceMap::new(),
            )
            .unwrap_or_else(|e| panic!("{}: {e:?}", b.field));
        }
    }

    #[test]
    fn overrides_serialize_for_an_annotation() {
        let mut o = Overrides::default();
        o.set("maxPods", Class::Drain, "kubelet-gitops.yaml");
        o.set("cpuManagerPolicy", Class::RestartClearState, "pools/a.yaml");
        assert_eq!(
            o.to_json(),
            r#"{"cpuManagerPolicy":"restart-clear-state","maxPods":"drain"}"#
        );
    }
}
