//! Fields whose change does more than restart the kubelet: state files to remove, pods to
//! recreate, cgroups to prepare. The plan names each one that changes and what it
//! disrupts, so a reviewer can decide to drain nodes or split the change.

use kubelet_gitops_core::disruption::{self, ChangeClass, Overrides};

use super::diff::FieldChange;
use crate::render::is_within;

/// Every disruptive field (a path covers the fields under it) and what changing it does.
pub const DISRUPTIVE_FIELDS: &[(&str, &str)] = &[
    (
        "cpuManagerPolicy",
        "the kubelet refuses to start while its CPU manager state file \
         (/var/lib/kubelet/cpu_manager_state) records another policy: drain the node and \
         remove the file before the kubelet restarts; pods get the new CPU placement only \
         when recreated",
    ),
    (
        "cpuManagerPolicyOptions",
        "checked against the CPU manager state file: drain the node and remove \
         /var/lib/kubelet/cpu_manager_state; pods get the new placement only when recreated",
    ),
    (
        "reservedSystemCPUs",
        "changes the CPUs the static CPU manager may hand out: a state file that assigned \
         them makes the kubelet fail to start (drain, remove \
         /var/lib/kubelet/cpu_manager_state); exclusive CPUs of running pods move only when \
         the pods are recreated",
    ),
    (
        "memoryManagerPolicy",
        "the kubelet refuses to start while /var/lib/kubelet/memory_manager_state records \
         another policy: drain the node and remove the file first",
    ),
    (
        "reservedMemory",
        "checked against the memory manager state file: drain the node and remove \
         /var/lib/kubelet/memory_manager_state; it must also equal kubeReserved + \
         systemReserved + the hard eviction threshold per NUMA node",
    ),
    (
        "topologyManagerPolicy",
        "applies at pod admission: running pods keep their placement until recreated, and \
         new pods that cannot be aligned fail with TopologyAffinityError",
    ),
    (
        "topologyManagerScope",
        "applies at pod admission: running pods keep their placement until recreated, and \
         new pods that cannot be aligned fail with TopologyAffinityError",
    ),
    (
        "topologyManagerPolicyOptions",
        "applies at pod admission: running pods keep their placement until recreated",
    ),
    (
        "cgroupDriver",
        "must match the container runtime's cgroup driver (containerd, CRI-O): a mismatch \
         keeps pods from starting; change both together on a drained node",
    ),
    (
        "cgroupRoot",
        "moves the pods' cgroup hierarchy: running pods stay under the old root, outside \
         node-allocatable enforcement, until recreated; drain the node",
    ),
    (
        "cgroupsPerQOS",
        "creates or removes the QoS cgroup hierarchy (kubepods, burstable, besteffort): \
         running pods are not moved; drain the node",
    ),
    (
        "enforceNodeAllocatable",
        "changes which cgroups the kubelet limits (pods, system-reserved, kube-reserved): \
         limits apply at restart and can OOM-kill processes already above them; the named \
         cgroups must exist",
    ),
    (
        "systemReservedCgroup",
        "when system-reserved is enforced this cgroup must exist before the kubelet \
         starts, or it fails to start",
    ),
    (
        "kubeReservedCgroup",
        "when kube-reserved is enforced this cgroup must exist before the kubelet starts, \
         or it fails to start",
    ),
    (
        "systemReserved",
        "changes Allocatable: with `pods` enforced the kubepods cgroup limit changes at \
         restart; pods above the new limit may be OOM-killed or evicted",
    ),
    (
        "kubeReserved",
        "changes Allocatable: with `pods` enforced the kubepods cgroup limit changes at \
         restart; pods above the new limit may be OOM-killed or evicted",
    ),
    (
        "containerRuntimeEndpoint",
        "the kubelet talks to another container runtime: the old runtime's containers are \
         no longer managed (orphaned); drain the node first",
    ),
    (
        "staticPodPath",
        "static pods of the old path are stopped and those of the new path started \
         (control-plane nodes run their API server this way)",
    ),
    (
        "featureGates",
        "a feature gate changes kubelet behaviour at restart, some only for new pods; check \
         the gate's notes (a gate locked to its default makes the kubelet refuse to start)",
    ),
];

/// A disruptive field that changes, and what the change disrupts.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Disruption {
    /// The field as in the diff (`featureGates.MemoryQoS`).
    pub field: String,
    pub old: Option<String>,
    pub new: Option<String>,
    /// What it disrupts and what to do about it.
    pub effect: &'static str,
}

/// What changing `field` disrupts, if it is disruptive.
pub fn disruption_of(field: &str) -> Option<&'static str> {
    DISRUPTIVE_FIELDS
        .iter()
        .find(|(f, _)| is_within(field, f))
        .map(|(_, effect)| *effect)
}

/// The disruptive changes among `diff`.
pub(super) fn of_diff(diff: &[FieldChange]) -> Vec<Disruption> {
    diff.iter()
        .filter_map(|c| {
            disruption_of(&c.field).map(|effect| Disruption {
                field: c.field.clone(),
                old: c.old.clone(),
                new: c.new.clone(),
                effect,
            })
        })
        .collect()
}

/// The disruption class of `diff` ([`disruption::classify`]) with the classes `overrides`
/// give (a pool's, over the built-in ones); `None` for an empty diff.
pub(super) fn class_of_diff(diff: &[FieldChange], overrides: &Overrides) -> Option<ChangeClass> {
    (!diff.is_empty())
        .then(|| disruption::classify(diff.iter().map(|c| c.field.as_str()), overrides))
}
