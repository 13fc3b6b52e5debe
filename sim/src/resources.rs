//! The resource table: every kind the simulated API server serves, with the names,
//! verbs and subresources that discovery reports and the store keys its tables on.

/// One served resource (a `metav1.APIResource` plus its group/version).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceType {
    /// API group; `""` for the core group.
    pub group: &'static str,
    /// API version within the group (`v1`).
    pub version: &'static str,
    /// Plural resource name used in URLs (`configmaps`).
    pub plural: &'static str,
    /// Singular name (`configmap`).
    pub singular: &'static str,
    /// Kind (`ConfigMap`).
    pub kind: &'static str,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// kubectl short names (`cm`).
    pub short_names: &'static [&'static str],
    /// Verbs as discovery reports them.
    pub verbs: &'static [&'static str],
    /// Subresources served (`["status"]` for nodes).
    pub subresources: &'static [&'static str],
}

const ALL_VERBS: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];

/// Every resource the sim serves.
pub static RESOURCES: &[ResourceType] = &[
    ResourceType {
        group: "",
        version: "v1",
        plural: "nodes",
        singular: "node",
        kind: "Node",
        namespaced: false,
        short_names: &["no"],
        verbs: ALL_VERBS,
        subresources: &["status"],
    },
    ResourceType {
        group: "",
        version: "v1",
        plural: "namespaces",
        singular: "namespace",
        kind: "Namespace",
        namespaced: false,
        short_names: &["ns"],
        verbs: ALL_VERBS,
        subresources: &["status"],
    },
    ResourceType {
        group: "",
        version: "v1",
        plural: "configmaps",
        singular: "configmap",
        kind: "ConfigMap",
        namespaced: true,
        short_names: &["cm"],
        verbs: ALL_VERBS,
        subresources: &[],
    },
    ResourceType {
        group: "",
        version: "v1",
        plural: "secrets",
        singular: "secret",
        kind: "Secret",
        namespaced: true,
        short_names: &[],
        verbs: ALL_VERBS,
        subresources: &[],
    },
    ResourceType {
        group: "",
        version: "v1",
        plural: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        short_names: &["ev"],
        verbs: ALL_VERBS,
        subresources: &[],
    },
    ResourceType {
        group: "",
        version: "v1",
        plural: "pods",
        singular: "pod",
        kind: "Pod",
        namespaced: true,
        short_names: &["po"],
        verbs: ALL_VERBS,
        subresources: &["status", "eviction"],
    },
    ResourceType {
        group: "events.k8s.io",
        version: "v1",
        plural: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        short_names: &["ev"],
        verbs: ALL_VERBS,
        subresources: &[],
    },
    ResourceType {
        group: "coordination.k8s.io",
        version: "v1",
        plural: "leases",
        singular: "lease",
        kind: "Lease",
        namespaced: true,
        short_names: &[],
        verbs: ALL_VERBS,
        subresources: &[],
    },
    ResourceType {
        group: "apps",
        version: "v1",
        plural: "daemonsets",
        singular: "daemonset",
        kind: "DaemonSet",
        namespaced: true,
        short_names: &["ds"],
        verbs: ALL_VERBS,
        subresources: &["status"],
    },
    ResourceType {
        group: "policy",
        version: "v1",
        plural: "poddisruptionbudgets",
        singular: "poddisruptionbudget",
        kind: "PodDisruptionBudget",
        namespaced: true,
        short_names: &["pdb"],
        verbs: ALL_VERBS,
        subresources: &["status"],
    },
];

/// The resource served at `group`/`version`/`plural`, if any.
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static ResourceType> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The resource for `kind` in `group` (first version served), if any.
pub fn find_kind(group: &str, kind: &str) -> Option<&'static ResourceType> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.kind == kind)
}

impl ResourceType {
    /// `apiVersion` of this resource's objects: `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The group-qualified resource as upstream prints it in messages:
    /// `configmaps`, `leases.coordination.k8s.io`.
    pub fn qualified_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// The group-qualified kind as upstream prints it in messages:
    /// `ConfigMap`, `Lease.coordination.k8s.io`.
    pub fn qualified_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.to_string()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    /// Whether `verb` is served.
    pub fn supports(&self, verb: &str) -> bool {
        self.verbs.contains(&verb)
    }

    /// A unique key for this resource: `group/version/plural`.
    pub fn key(&self) -> String {
        format!("{}/{}/{}", self.group, self.version, self.plural)
    }
}

/// Shorthand accessors for the commonly used resource types.
pub mod kinds {
    use super::{RESOURCES, ResourceType};

    /// core/v1 nodes.
    pub fn nodes() -> &'static ResourceType {
        &RESOURCES[0]
    }
    /// core/v1 namespaces.
    pub fn namespaces() -> &'static ResourceType {
        &RESOURCES[1]
    }
    /// core/v1 configmaps.
    pub fn configmaps() -> &'static ResourceType {
        &RESOURCES[2]
    }
    /// core/v1 secrets.
    pub fn secrets() -> &'static ResourceType {
        &RESOURCES[3]
    }
    /// core/v1 events.
    pub fn core_events() -> &'static ResourceType {
        &RESOURCES[4]
    }
    /// core/v1 pods.
    pub fn pods() -> &'static ResourceType {
        &RESOURCES[5]
    }
    /// events.k8s.io/v1 events.
    pub fn events() -> &'static ResourceType {
        &RESOURCES[6]
    }
    /// coordination.k8s.io/v1 leases.
    pub fn leases() -> &'static ResourceType {
        &RESOURCES[7]
    }
    /// apps/v1 daemonsets.
    pub fn daemonsets() -> &'static ResourceType {
        &RESOURCES[8]
    }
    /// policy/v1 poddisruptionbudgets.
    pub fn pdbs() -> &'static ResourceType {
        &RESOURCES[9]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_and_api_version() {
        let l = find("coordination.k8s.io", "v1", "leases").expect("leases");
        assert_eq!(l.api_version(), "coordination.k8s.io/v1");
        assert_eq!(l.qualified_resource(), "leases.coordination.k8s.io");
        assert_eq!(l.qualified_kind(), "Lease.coordination.k8s.io");
        let n = find("", "v1", "nodes").expect("nodes");
        assert_eq!(n.api_version(), "v1");
        assert_eq!(n.subresources, &["status"]);
        assert!(find("", "v1", "deployments").is_none());
        assert_eq!(kinds::events().group, "events.k8s.io");
        assert_eq!(kinds::pods().kind, "Pod");
        assert!(kinds::pods().supports("create"));
        assert_eq!(kinds::daemonsets().kind, "DaemonSet");
        assert_eq!(
            kinds::pdbs().qualified_resource(),
            "poddisruptionbudgets.policy"
        );
    }
}
