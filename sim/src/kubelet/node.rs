//! The Node object as a kubelet registers and updates it, its Lease and its Events.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use kubelet_gitops_core::allocatable::{AllocatableInput, node_allocatable};
use kubelet_gitops_core::effective;
use kubelet_gitops_core::flags::KubeletFlags;
use kubelet_gitops_core::quantity::{Format, Quantity};
use kubelet_gitops_core::types::KubeletConfiguration;
use serde_json::{Value, json};

use kubelet_gitops_core::inventory::InventoryNode;

/// The version every stand-in kubelet reports.
pub const KUBELET_VERSION: &str = "v1.36.0";
/// The container runtime every simulated node reports.
pub const CONTAINER_RUNTIME_VERSION: &str = "containerd://2.1.4";
/// The OS image every simulated node reports.
pub const OS_IMAGE: &str = "Ubuntu 24.04.3 LTS";
/// The kernel every simulated node reports.
pub const KERNEL_VERSION: &str = "6.8.0-85-generic";
/// The kubelet's internal `pid` capacity when a node's `/proc/sys/kernel/pid_max` cannot
/// be read: the largest `pid_max` of a 64-bit kernel.
pub const DEFAULT_PID_MAX: i128 = 4_194_304;

/// Where this host's `pid_max` is read: the value the sim writes into each node's root
/// ([`super::KubeletPaths::prepare`]), so a node agrees with agents that read the host's.
pub const HOST_PID_MAX_FILE: &str = "/proc/sys/kernel/pid_max";

/// Namespace of the kubelets' Leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";

/// What the kubelet says in the Ready condition while it runs.
pub const READY_MESSAGE: &str = "kubelet is posting ready status";

/// The node's `InternalIP`: the first address of `--node-ip` when the flags give one,
/// else `10.0.<i / 256>.<i % 256>` counted from 10.0.0.10 for node `index`.
pub fn internal_ip(node: &InventoryNode, index: usize) -> String {
    if let Ok(args) = node.kubelet_args()
        && let Ok(flags) = KubeletFlags::parse(&args)
        && let Some(ip) = flags.node_ip()
        && let Some(first) = ip.split(',').next().filter(|s| !s.is_empty())
    {
        return first.to_string();
    }
    let n = (index as u64).saturating_add(10) & 0x00ff_ffff;
    Ipv4Addr::new(10, (n >> 16) as u8, (n >> 8) as u8, n as u8).to_string()
}

/// The KubeletConfiguration the sim writes as a node's `config.yaml` before anything else
/// touches it: what kubeadm writes, trimmed to fields that need no files, with the
/// inventory's pods capacity as `maxPods`, and `failCgroupV1: false` on a cgroup v1 host
/// (the v1.36 kubelet refuses to start on cgroup v1 otherwise).
pub fn initial_config_yaml(node: &InventoryNode, cgroup_v2: bool) -> String {
    let max_pods = node.capacity.pods.value();
    let mut s = String::from(
        "apiVersion: kubelet.config.k8s.io/v1beta1\n\
         kind: KubeletConfiguration\n\
         authentication:\n  anonymous:\n    enabled: false\n  webhook:\n    enabled: true\n\
         authorization:\n  mode: Webhook\n\
         cgroupDriver: systemd\n\
         clusterDNS:\n- 10.96.0.10\n\
         clusterDomain: cluster.local\n",
    );
    if !cgroup_v2 {
        s.push_str("failCgroupV1: false\n");
    }
    s.push_str(&format!("maxPods: {max_pods}\n"));
    s.push_str("rotateCertificates: true\n");
    s
}

/// The effective config of a node whose kubelet has not started yet: its initial
/// `config.yaml` ([`initial_config_yaml`]), defaulted, with its inventory flags applied.
/// Falls back to the bare defaults if the inventory flags do not parse.
pub fn initial_effective_config(node: &InventoryNode, cgroup_v2: bool) -> KubeletConfiguration {
    let yaml = initial_config_yaml(node, cgroup_v2);
    let flags = node
        .kubelet_args()
        .ok()
        .and_then(|args| KubeletFlags::parse(&args).ok());
    effective::effective(
        Some(effective::Source::new("config.yaml", yaml.as_bytes())),
        &[],
        flags.as_ref(),
    )
    .map(|e| e.config)
    .unwrap_or_else(|_| kubelet_gitops_core::defaults::defaults())
}

/// The node's capacity as its kubelet reports it running `cfg`: cpu, memory and
/// ephemeral-storage from the inventory, no huge pages, and `pods` = `maxPods` (capped by
/// `podsPerCore` × CPUs when that is set), as the kubelet computes it.
pub fn reported_capacity(
    node: &InventoryNode,
    cfg: &KubeletConfiguration,
) -> BTreeMap<String, Quantity> {
    let mut cap = node.capacity.resources();
    let max_pods = i128::from(cfg.max_pods.unwrap_or(110));
    let pods = match cfg.pods_per_core {
        Some(per_core) if per_core > 0 => {
            let cores = node.capacity.cpu.value();
            max_pods.min(i128::from(per_core).saturating_mul(cores))
        }
        _ => max_pods,
    };
    cap.insert("pods".into(), Quantity::from_units(pods, Format::DecimalSI));
    for hp in ["hugepages-1Gi", "hugepages-2Mi"] {
        cap.insert(hp.into(), Quantity::from_units(0, Format::DecimalSI));
    }
    cap
}

/// The `pid_max` in `path` (a `/proc/sys/kernel/pid_max` file): `None` when the file
/// cannot be read or does not hold a positive integer.
pub fn read_pid_max(path: &Path) -> Option<i128> {
    std::fs::read_to_string(path)
        .ok()?
        .trim()
        .parse()
        .ok()
        .filter(|n: &i128| *n > 0)
}

/// This host's `pid_max` ([`HOST_PID_MAX_FILE`]), or [`DEFAULT_PID_MAX`] when it cannot
/// be read.
pub fn host_pid_max() -> i128 {
    read_pid_max(Path::new(HOST_PID_MAX_FILE)).unwrap_or(DEFAULT_PID_MAX)
}

/// The kubelet's allocatable input for `node` running `cfg`: [`reported_capacity`] plus
/// the internal `pid` capacity, `pid_max` (the kubelet reads it from the host's
/// `/proc/sys/kernel/pid_max`).
pub fn allocatable_input(
    node: &InventoryNode,
    cfg: &KubeletConfiguration,
    pid_max: i128,
    ignore_eviction_threshold: bool,
) -> Result<AllocatableInput, kubelet_gitops_core::allocatable::AllocatableError> {
    let mut capacity = reported_capacity(node, cfg);
    capacity.insert(
        "pid".into(),
        Quantity::from_units(pid_max, Format::DecimalSI),
    );
    let mut input = AllocatableInput::from_config(cfg, capacity)?;
    input.ignore_eviction_threshold = ignore_eviction_threshold;
    Ok(input)
}

fn quantities(map: &BTreeMap<String, Quantity>) -> Value {
    Value::Object(
        map.iter()
            .map(|(k, q)| (k.clone(), Value::String(q.canonical())))
            .collect(),
    )
}

/// What a Node's status says, apart from its conditions.
#[derive(Debug, Clone)]
pub struct NodeStatus {
    /// `status.capacity`.
    pub capacity: BTreeMap<String, Quantity>,
    /// `status.allocatable`.
    pub allocatable: BTreeMap<String, Quantity>,
    /// `status.addresses[type=InternalIP]`.
    pub internal_ip: String,
    /// `status.daemonEndpoints.kubeletEndpoint.Port`.
    pub kubelet_port: u16,
}

impl NodeStatus {
    /// The status of `node` (number `index` in its inventory) with kubelet `port`, for
    /// the effective config `cfg`, with this host's `pid_max` ([`host_pid_max`]; `pid` is
    /// not in the Node's status, but reservations beyond it are). Allocatable that cannot
    /// be computed (reservations beyond capacity) is reported as capacity, as no kubelet
    /// would be running to say otherwise.
    pub fn new(
        node: &InventoryNode,
        index: usize,
        kubelet_port: u16,
        cfg: &KubeletConfiguration,
    ) -> NodeStatus {
        let capacity = reported_capacity(node, cfg);
        let allocatable = allocatable_input(node, cfg, host_pid_max(), false)
            .and_then(|input| node_allocatable(&input))
            .map(|a| a.node_status())
            .unwrap_or_else(|_| capacity.clone());
        NodeStatus {
            capacity,
            allocatable,
            internal_ip: internal_ip(node, index),
            kubelet_port,
        }
    }

    /// The `status` fields the kubelet sets on every update (not the conditions).
    pub fn to_json(&self, node_name: &str) -> Value {
        json!({
            "capacity": quantities(&self.capacity),
            "allocatable": quantities(&self.allocatable),
            "addresses": [
                {"type": "InternalIP", "address": self.internal_ip},
                {"type": "Hostname", "address": node_name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.kubelet_port}},
            "nodeInfo": node_info(node_name),
            "features": {"supplementalGroupsPolicy": true},
            "runtimeHandlers": [
                {"name": "", "features": {"recursiveReadOnlyMounts": true, "userNamespaces": true}},
                {"name": "runc", "features": {"recursiveReadOnlyMounts": true, "userNamespaces": true}},
            ],
        })
    }
}

/// A stable fake hex id from `seed` (machine and boot ids).
fn hex_id(seed: &str, salt: u64) -> String {
    // FNV-1a, twice with different salts, for 32 hex digits.
    let mut out = String::with_capacity(32);
    for round in 0..2u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ salt.wrapping_add(round);
        for b in seed.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        out.push_str(&format!("{h:016x}"));
    }
    out
}

fn node_info(node_name: &str) -> Value {
    let machine = hex_id(node_name, 1);
    let uuid = hex_id(node_name, 2);
    let boot = hex_id(node_name, 3);
    let dashed = |s: &str| {
        format!(
            "{}-{}-{}-{}-{}",
            &s[0..8],
            &s[8..12],
            &s[12..16],
            &s[16..20],
            &s[20..32]
        )
    };
    json!({
        "machineID": machine,
        "systemUUID": dashed(&uuid),
        "bootID": dashed(&boot),
        "kernelVersion": KERNEL_VERSION,
        "osImage": OS_IMAGE,
        "containerRuntimeVersion": CONTAINER_RUNTIME_VERSION,
        "kubeletVersion": KUBELET_VERSION,
        "kubeProxyVersion": "",
        "operatingSystem": "linux",
        "architecture": "amd64",
    })
}

/// The Node object of `node` (number `index` in its inventory) as a kubelet listening on
/// `kubelet_port` registers it: labels, the attach-detach annotation, capacity and
/// allocatable for the config the node starts with ([`initial_effective_config`] on a
/// cgroup v2 host), addresses, node info, and the four conditions of a healthy kubelet
/// (`Ready=True`, no pressure).
pub fn node_object(node: &InventoryNode, index: usize, kubelet_port: u16) -> Value {
    let cfg = initial_effective_config(node, true);
    node_object_with(
        node,
        &NodeStatus::new(node, index, kubelet_port, &cfg),
        &now(),
    )
}

/// [`node_object`] with a given status and time.
pub fn node_object_with(node: &InventoryNode, status: &NodeStatus, now: &str) -> Value {
    let mut st = status.to_json(&node.name);
    if let Value::Object(m) = &mut st {
        m.insert(
            "conditions".into(),
            Value::Array(conditions(None, &Readiness::Ready, now)),
        );
    }
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": node.registered_labels(),
            "annotations": {
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {},
        "status": st,
    })
}

/// What the Ready condition should say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// The kubelet runs and posts ready status.
    Ready,
    /// The kubelet is down; the message says why.
    NotReady(String),
}

fn find_condition<'a>(existing: Option<&'a Value>, kind: &str) -> Option<&'a Value> {
    existing?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
}

/// The Node's conditions after an update at `now`, given the `existing` conditions list:
/// `lastTransitionTime` changes only when a status changes. While the kubelet runs, it
/// heartbeats every condition; once it is down only `Ready` changes (to `False`, reason
/// `KubeletNotReady`), keeping its last heartbeat, and the pressure conditions are left
/// as they were. Only the kubelet's own four: they go out in a strategic merge patch,
/// which leaves the conditions of other writers on the Node.
pub fn conditions(existing: Option<&Value>, readiness: &Readiness, now: &str) -> Vec<Value> {
    let pressure = [
        (
            "MemoryPressure",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
        (
            "DiskPressure",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure",
        ),
        (
            "PIDPressure",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
        ),
    ];
    let field = |c: Option<&Value>, name: &str| {
        c.and_then(|c| c.get(name))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let mut out = Vec::with_capacity(4);
    for (kind, reason, message) in pressure {
        let old = find_condition(existing, kind);
        match (readiness, old) {
            (Readiness::NotReady(_), Some(old)) => out.push(old.clone()),
            _ => {
                let transition = match field(old, "status").as_deref() {
                    Some("False") => field(old, "lastTransitionTime"),
                    _ => None,
                }
                .unwrap_or_else(|| now.to_string());
                out.push(json!({
                    "type": kind,
                    "status": "False",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": transition,
                    "reason": reason,
                    "message": message,
                }));
            }
        }
    }
    let old = find_condition(existing, "Ready");
    let (status, reason, message, heartbeat) = match readiness {
        Readiness::Ready => (
            "True",
            "KubeletReady",
            READY_MESSAGE.to_string(),
            now.to_string(),
        ),
        Readiness::NotReady(message) => (
            "False",
            "KubeletNotReady",
            message.clone(),
            field(old, "lastHeartbeatTime").unwrap_or_else(|| now.to_string()),
        ),
    };
    let transition = match field(old, "status") {
        Some(s) if s == status => field(old, "lastTransitionTime"),
        _ => None,
    }
    .unwrap_or_else(|| now.to_string());
    out.push(json!({
        "type": "Ready",
        "status": status,
        "lastHeartbeatTime": heartbeat,
        "lastTransitionTime": transition,
        "reason": reason,
        "message": message,
    }));
    out
}

/// The status of the Node's `Ready` condition (`True`, `False`, `Unknown`), if any.
pub fn ready_status(node: &Value) -> Option<&str> {
    find_condition(node.pointer("/status/conditions"), "Ready")?
        .get("status")
        .and_then(Value::as_str)
}

/// The kubelet's Lease for node `name` (uid `node_uid` for the owner reference).
pub fn lease_object(
    name: &str,
    node_uid: Option<&str>,
    duration_seconds: u32,
    now_micro: &str,
) -> Value {
    let mut lease = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": LEASE_NAMESPACE},
        "spec": {
            "holderIdentity": name,
            "leaseDurationSeconds": duration_seconds,
            "renewTime": now_micro,
        },
    });
    if let (Some(uid), Value::Object(meta)) = (node_uid, &mut lease["metadata"]) {
        meta.insert(
            "ownerReferences".into(),
            json!([{"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}]),
        );
    }
    lease
}

/// A core/v1 Event about node `name` from `component` (`kubelet`, `node-controller`).
pub fn event_object(name: &str, component: &str, kind: &str, reason: &str, message: &str) -> Value {
    let now = now();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": format!("{name}.{nanos:x}"), "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": name, "uid": name, "apiVersion": "v1"},
        "reason": reason,
        "message": message,
        "source": {"component": component, "host": name},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "type": kind,
        "reportingComponent": component,
        "reportingInstance": name,
    })
}

/// Now as RFC 3339 with seconds (`metav1.Time`).
pub fn now() -> String {
    rfc3339(SystemTime::now(), false)
}

/// Now as RFC 3339 with microseconds (`metav1.MicroTime`).
pub fn now_micro() -> String {
    rfc3339(SystemTime::now(), true)
}

pub use crate::time::{klog_time, rfc3339};

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn node(flags: Option<&str>) -> InventoryNode {
        kubelet_gitops_core::inventory::Inventory::parse(
            "inv.yaml",
            format!(
                "nodes:\n- name: w1\n  labels: {{pool: gpu}}\n  capacity: {{cpu: \"4\", memory: 16Gi, ephemeral-storage: 50Gi, pods: \"30\"}}\n{}",
                flags.map(|f| format!("  kubeletFlags: \"{f}\"\n")).unwrap_or_default()
            )
            .as_bytes(),
        )
        .expect("inventory")
        .nodes
        .remove(0)
    }

    #[test]
    fn dates() {
        assert_eq!(rfc3339(UNIX_EPOCH, false), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_micros(1_709_251_199_123_456);
        assert_eq!(rfc3339(t, true), "2024-02-29T23:59:59.123456Z");
        assert_eq!(klog_time(t), "0229 23:59:59.123456");
    }

    #[test]
    fn addresses_from_index_or_node_ip() {
        assert_eq!(internal_ip(&node(None), 0), "10.0.0.10");
        assert_eq!(internal_ip(&node(None), 300), "10.0.1.54");
        assert_eq!(
            internal_ip(&node(Some("--node-ip=192.168.1.7")), 3),
            "192.168.1.7"
        );
    }

    #[test]
    fn pods_capacity_follows_max_pods_and_pods_per_core() {
        let n = node(Some("--pods-per-core=5"));
        let cfg = initial_effective_config(&n, true);
        assert_eq!(cfg.max_pods, Some(30));
        let cap = reported_capacity(&n, &cfg);
        assert_eq!(cap["pods"].value(), 20, "4 cores x 5");
        assert_eq!(cap["memory"].as_str(), "16Gi");
    }

    #[test]
    fn conditions_keep_transition_times() {
        let first = conditions(None, &Readiness::Ready, "T1");
        let list = Value::Array(first);
        let again = conditions(Some(&list), &Readiness::Ready, "T2");
        let ready = &again[3];
        assert_eq!(ready["lastTransitionTime"], "T1");
        assert_eq!(ready["lastHeartbeatTime"], "T2");
        let list = Value::Array(again);
        let down = conditions(Some(&list), &Readiness::NotReady("gone".into()), "T3");
        assert_eq!(down[3]["status"], "False");
        assert_eq!(down[3]["reason"], "KubeletNotReady");
        assert_eq!(down[3]["lastTransitionTime"], "T3");
        assert_eq!(down[3]["lastHeartbeatTime"], "T2");
        assert_eq!(down[0]["lastHeartbeatTime"], "T2", "pressure untouched");
    }
}
