//! Server-side `meta.k8s.io` Table output, with the columns kube-apiserver's printers
//! give each kind (pkg/printers/internalversion/printers.go): `kubectl get` asks for
//! Tables and prints them as they come. The server always sends every column; kubectl
//! hides priority-1 columns unless `-o wide`.

use serde_json::{Map, Value, json};

use crate::resources::ResourceType;
pub(crate) use crate::time::{now_secs, parse_timestamp};

/// What a row's `object` holds (`includeObject` query parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` query parameter (empty or absent = Metadata).
    pub(crate) fn parse(v: Option<&str>) -> Option<IncludeObject> {
        match v.unwrap_or("") {
            "" | "Metadata" => Some(IncludeObject::Metadata),
            "None" => Some(IncludeObject::None),
            "Object" => Some(IncludeObject::Object),
            _ => None,
        }
    }
}

const NAME_DOC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const AGE_DOC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

fn col(name: &str, ty: &str, priority: u8, description: &str) -> Value {
    let format = if name == "Name" { "name" } else { "" };
    json!({ "name": name, "type": ty, "format": format, "description": description, "priority": priority })
}

/// The column definitions for `rt`.
pub(crate) fn columns(rt: &ResourceType) -> Vec<Value> {
    let name = col("Name", "string", 0, NAME_DOC);
    let age = col("Age", "string", 0, AGE_DOC);
    match (rt.group, rt.kind) {
        ("", "Node") => vec![
            name,
            col("Status", "string", 0, "The status of the node"),
            col("Roles", "string", 0, "The roles of the node"),
            age,
            col(
                "Version",
                "string",
                0,
                "Kubelet Version reported by the node.",
            ),
            col(
                "Internal-IP",
                "string",
                1,
                "List of addresses reachable to the node.",
            ),
            col(
                "External-IP",
                "string",
                1,
                "List of addresses reachable to the node.",
            ),
            col(
                "OS-Image",
                "string",
                1,
                "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
            ),
            col(
                "Kernel-Version",
                "string",
                1,
                "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
            ),
            col(
                "Container-Runtime",
                "string",
                1,
                "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
            ),
        ],
        ("", "ConfigMap") => vec![
            name,
            col(
                "Data",
                "integer",
                0,
                "Data contains the configuration data.",
            ),
            age,
        ],
        ("", "Namespace") => {
            vec![
                name,
                col("Status", "string", 0, "The status of the namespace"),
                age,
            ]
        }
        ("", "Secret") => vec![
            name,
            col(
                "Type",
                "string",
                0,
                "Used to facilitate programmatic handling of secret data.",
            ),
            col("Data", "integer", 0, "Data contains the secret data."),
            age,
        ],
        ("", "Pod") => vec![
            name,
            col(
                "Ready",
                "string",
                0,
                "The aggregate readiness state of this pod for accepting traffic.",
            ),
            col(
                "Status",
                "string",
                0,
                "The aggregate status of the containers in this pod.",
            ),
            col(
                "Restarts",
                "string",
                0,
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
            ),
            age,
            col(
                "IP",
                "string",
                1,
                "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
            ),
            col(
                "Node",
                "string",
                1,
                "NodeName is a request to schedule this pod onto a specific node.",
            ),
            col(
                "Nominated Node",
                "string",
                1,
                "nominatedNodeName is set only when this pod preempts other pods on the node.",
            ),
            col(
                "Readiness Gates",
                "string",
                1,
                "If specified, all readiness gates will be evaluated for pod readiness.",
            ),
        ],
        ("coordination.k8s.io", "Lease") => vec![
            name,
            col(
                "Holder",
                "string",
                0,
                "holderIdentity contains the identity of the holder of a current lease.",
            ),
            age,
        ],
        (_, "Event") => vec![
            col(
                "Last Seen",
                "string",
                0,
                "The time at which the most recent occurrence of this event was recorded.",
            ),
            col(
                "Type",
                "string",
                0,
                "Type of this event (Normal, Warning), new types could be added in the future.",
            ),
            col(
                "Reason",
                "string",
                0,
                "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
            ),
            col(
                "Object",
                "string",
                0,
                "The object that this event is about.",
            ),
            col(
                "Message",
                "string",
                0,
                "A human-readable description of the status of this operation.",
            ),
        ],
        ("policy", "PodDisruptionBudget") => vec![
            name,
            col(
                "Min Available",
                "string",
                0,
                "The minimum number of pods that must be available.",
            ),
            col(
                "Max Unavailable",
                "string",
                0,
                "The maximum number of pods that may be unavailable.",
            ),
            col(
                "Allowed Disruptions",
                "integer",
                0,
                "Calculated number of pods that may be disrupted at this time.",
            ),
            age,
        ],
        ("apps", "DaemonSet") => vec![
            name,
            col(
                "Desired",
                "integer",
                0,
                "The number of nodes that should be running the daemon pod.",
            ),
            col(
                "Current",
                "integer",
                0,
                "The number of nodes running at least one daemon pod.",
            ),
            col(
                "Ready",
                "integer",
                0,
                "The number of nodes that should be running the daemon pod and have one or more running and ready.",
            ),
            col(
                "Up-to-date",
                "integer",
                0,
                "The total number of nodes that are running updated daemon pod.",
            ),
            col(
                "Available",
                "integer",
                0,
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available.",
            ),
            col(
                "Node Selector",
                "string",
                0,
                "NodeSelector is a selector which must be true for the pod to fit on a node.",
            ),
            age,
        ],
        _ => vec![name, col("Created At", "date", 0, AGE_DOC)],
    }
}

fn s<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut cur = v;
    for p in path {
        match cur.get(p) {
            Some(next) => cur = next,
            None => return "",
        }
    }
    cur.as_str().unwrap_or("")
}

fn or_none(v: &str) -> String {
    if v.is_empty() {
        "<none>".into()
    } else {
        v.to_string()
    }
}

fn or_unknown(v: &str) -> String {
    if v.is_empty() {
        "<unknown>".into()
    } else {
        v.to_string()
    }
}

fn count_keys(v: Option<&Value>) -> usize {
    v.and_then(Value::as_object).map_or(0, Map::len)
}

/// `duration.HumanDuration` of apimachinery, for whole seconds.
pub(crate) fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let sec = seconds % 60;
        return if sec == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{sec}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{}h", hours / 24, h)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{}d", hours / 24 / 365, dy)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// `translateTimestampSince`: the age of a timestamp, `<unknown>` when unset.
fn since(ts: &str, now: i64) -> String {
    match parse_timestamp(ts) {
        Some(t) => human_duration(now - t),
        None => "<unknown>".into(),
    }
}

fn node_cells(obj: &Value, age: String) -> Vec<Value> {
    let conditions = obj.pointer("/status/conditions").and_then(Value::as_array);
    let ready = conditions.and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"));
    let mut status = vec![match ready {
        Some(c) if c["status"] == "True" => "Ready".to_string(),
        Some(_) => "NotReady".to_string(),
        None => "Unknown".to_string(),
    }];
    if obj.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push("SchedulingDisabled".into());
    }
    let mut roles: Vec<String> = Vec::new();
    if let Some(labels) = obj.pointer("/metadata/labels").and_then(Value::as_object) {
        for (k, v) in labels {
            let role = if let Some(r) = k.strip_prefix("node-role.kubernetes.io/") {
                r.to_string()
            } else if k == "kubernetes.io/role" {
                v.as_str().unwrap_or("").to_string()
            } else {
                continue;
            };
            if !role.is_empty() && !roles.contains(&role) {
                roles.push(role);
            }
        }
    }
    roles.sort();
    let address = |ty: &str| -> String {
        obj.pointer("/status/addresses")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().find(|x| x["type"] == ty))
            .map(|x| s(x, &["address"]).to_string())
            .filter(|a| !a.is_empty())
            .unwrap_or_else(|| "<none>".into())
    };
    let info = |f: &str| or_unknown(s(obj, &["status", "nodeInfo", f]));
    vec![
        json!(s(obj, &["metadata", "name"])),
        json!(status.join(",")),
        json!(if roles.is_empty() {
            "<none>".to_string()
        } else {
            roles.join(",")
        }),
        json!(age),
        json!(s(obj, &["status", "nodeInfo", "kubeletVersion"])),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(info("osImage")),
        json!(info("kernelVersion")),
        json!(info("containerRuntimeVersion")),
    ]
}

fn pod_cells(obj: &Value, age: String) -> Vec<Value> {
    let statuses = obj
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array);
    let total = obj
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let ready = statuses.map_or(0, |cs| cs.iter().filter(|c| c["ready"] == true).count());
    let restarts: i64 = statuses.map_or(0, |cs| {
        cs.iter().filter_map(|c| c["restartCount"].as_i64()).sum()
    });
    let reason = s(obj, &["status", "reason"]);
    let phase = if reason.is_empty() {
        s(obj, &["status", "phase"])
    } else {
        reason
    };
    vec![
        json!(s(obj, &["metadata", "name"])),
        json!(format!("{ready}/{total}")),
        json!(phase),
        json!(restarts.to_string()),
        json!(age),
        json!(or_none(s(obj, &["status", "podIP"]))),
        json!(or_none(s(obj, &["spec", "nodeName"]))),
        json!(or_none(s(obj, &["status", "nominatedNodeName"]))),
        json!("<none>"),
    ]
}

fn event_cells(obj: &Value, now: i64) -> Vec<Value> {
    // core/v1 and events.k8s.io/v1 name the same things differently.
    let regarding = obj
        .get("involvedObject")
        .or_else(|| obj.get("regarding"))
        .unwrap_or(&Value::Null);
    let last = [
        s(obj, &["lastTimestamp"]),
        s(obj, &["deprecatedLastTimestamp"]),
        s(obj, &["eventTime"]),
        s(obj, &["metadata", "creationTimestamp"]),
    ]
    .into_iter()
    .find(|t| !t.is_empty())
    .unwrap_or("");
    let message = obj
        .get("message")
        .or_else(|| obj.get("note"))
        .and_then(Value::as_str)
        .unwrap_or("");
    vec![
        json!(since(last, now)),
        json!(s(obj, &["type"])),
        json!(s(obj, &["reason"])),
        json!(format!(
            "{}/{}",
            s(regarding, &["kind"]).to_lowercase(),
            s(regarding, &["name"])
        )),
        json!(message.trim()),
    ]
}

/// The cells of one row for `obj`.
fn cells(rt: &ResourceType, obj: &Value, now: i64) -> Vec<Value> {
    let name = json!(s(obj, &["metadata", "name"]));
    let created = s(obj, &["metadata", "creationTimestamp"]);
    let age = since(created, now);
    match (rt.group, rt.kind) {
        ("", "Node") => node_cells(obj, age),
        ("", "ConfigMap") => {
            let n = count_keys(obj.get("data")) + count_keys(obj.get("binaryData"));
            vec![name, json!(n), json!(age)]
        }
        ("", "Namespace") => vec![name, json!(s(obj, &["status", "phase"])), json!(age)],
        ("", "Secret") => {
            vec![
                name,
                json!(s(obj, &["type"])),
                json!(count_keys(obj.get("data"))),
                json!(age),
            ]
        }
        ("", "Pod") => pod_cells(obj, age),
        ("coordination.k8s.io", "Lease") => {
            vec![name, json!(s(obj, &["spec", "holderIdentity"])), json!(age)]
        }
        (_, "Event") => event_cells(obj, now),
        ("policy", "PodDisruptionBudget") => {
            let int_or_string = |f: &str| match obj.pointer(&format!("/spec/{f}")) {
                Some(Value::String(v)) => v.clone(),
                Some(Value::Number(n)) => n.to_string(),
                _ => "N/A".to_string(),
            };
            vec![
                name,
                json!(int_or_string("minAvailable")),
                json!(int_or_string("maxUnavailable")),
                json!(
                    obj.pointer("/status/disruptionsAllowed")
                        .and_then(Value::as_i64)
                        .unwrap_or(0)
                ),
                json!(age),
            ]
        }
        ("apps", "DaemonSet") => {
            let n = |f: &str| {
                json!(
                    obj.pointer(&format!("/status/{f}"))
                        .and_then(Value::as_i64)
                        .unwrap_or(0)
                )
            };
            let selector: Vec<String> = obj
                .pointer("/spec/template/spec/nodeSelector")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                        .collect()
                })
                .unwrap_or_default();
            let selector = if selector.is_empty() {
                "<none>".to_string()
            } else {
                selector.join(",")
            };
            vec![
                name,
                n("desiredNumberScheduled"),
                n("currentNumberScheduled"),
                n("numberReady"),
                n("updatedNumberScheduled"),
                n("numberAvailable"),
                json!(selector),
                json!(age),
            ]
        }
        _ => vec![name, json!(created)],
    }
}

/// `PartialObjectMetadata` of `obj` in `meta.k8s.io/{version}`.
pub(crate) fn partial_metadata(obj: &Value, version: &str) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// [`partial_metadata`] of an object given as its JSON encoding, encoded: the
/// object's `metadata` is copied as it is encoded, nothing is decoded.
pub(crate) fn partial_metadata_json(encoded: &str, version: &str) -> String {
    let meta = crate::store::raw_field(encoded, "metadata").unwrap_or("{}");
    format!(
        "{{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"meta.k8s.io/{version}\",\"metadata\":{meta}}}"
    )
}

fn row(rt: &ResourceType, obj: &Value, include: IncludeObject, now: i64) -> Value {
    let mut r = Map::new();
    r.insert("cells".into(), Value::Array(cells(rt, obj, now)));
    match include {
        IncludeObject::None => {}
        IncludeObject::Metadata => {
            r.insert("object".into(), partial_metadata(obj, "v1"));
        }
        IncludeObject::Object => {
            r.insert("object".into(), obj.clone());
        }
    }
    Value::Object(r)
}

/// A Table of `objects`, with `list_meta` as its metadata; column definitions are left
/// out when `with_columns` is false (watch events after the first).
pub(crate) fn table<'a>(
    rt: &ResourceType,
    objects: impl IntoIterator<Item = &'a Value>,
    list_meta: Value,
    version: &str,
    include: IncludeObject,
    with_columns: bool,
) -> Value {
    let now = now_secs();
    let rows: Vec<Value> = objects
        .into_iter()
        .map(|o| row(rt, o, include, now))
        .collect();
    let columns = if with_columns {
        columns(rt)
    } else {
        Vec::new()
    };
    json!({
        "kind": "Table",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": list_meta,
        "columnDefinitions": columns,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::kinds;

    #[test]
    fn timestamps_and_durations() {
        assert_eq!(parse_timestamp("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_timestamp("2000-03-01T00:00:00Z"), Some(951_868_800));
        assert_eq!(
            parse_timestamp("2000-03-01T01:00:00.123456Z"),
            Some(951_872_400)
        );
        assert_eq!(
            parse_timestamp("2000-03-01T01:00:00+01:00"),
            Some(951_868_800)
        );
        assert_eq!(parse_timestamp("garbage"), None);
        assert_eq!(parse_timestamp("2000-13-01T00:00:00Z"), None);
        assert_eq!(human_duration(-5), "<invalid>");
        assert_eq!(human_duration(-1), "0s");
        assert_eq!(human_duration(119), "119s");
        assert_eq!(human_duration(125), "2m5s");
        assert_eq!(human_duration(600), "10m");
        assert_eq!(human_duration(3 * 3600 + 60), "3h1m");
        assert_eq!(human_duration(10 * 3600), "10h");
        assert_eq!(human_duration(3 * 86400 + 3600), "3d1h");
        assert_eq!(human_duration(30 * 86400), "30d");
        assert_eq!(human_duration(3 * 365 * 86400 + 86400), "3y1d");
        assert_eq!(human_duration(9 * 365 * 86400), "9y");
    }

    #[test]
    fn node_row() {
        let node = json!({
            "metadata": {"name": "n1", "creationTimestamp": "2000-01-01T00:00:00Z",
                "labels": {"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/gpu": "", "kubernetes.io/role": "edge"}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "False"}],
                "nodeInfo": {"kubeletVersion": "v1.36.0", "osImage": "Debian"},
                "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]},
        });
        let t = table(
            kinds::nodes(),
            [&node],
            json!({"resourceVersion": "5"}),
            "v1",
            IncludeObject::Metadata,
            true,
        );
        assert_eq!(t["kind"], "Table");
        assert_eq!(t["columnDefinitions"][0]["name"], "Name");
        assert_eq!(t["columnDefinitions"].as_array().map(Vec::len), Some(10));
        let c = &t["rows"][0]["cells"];
        assert_eq!(c[0], "n1");
        assert_eq!(c[1], "NotReady,SchedulingDisabled");
        assert_eq!(c[2], "edge,gpu,worker");
        assert!(c[3].as_str().is_some_and(|a| a.ends_with('y')));
        assert_eq!(c[4], "v1.36.0");
        assert_eq!(c[5], "10.0.0.1");
        assert_eq!(c[6], "<none>");
        assert_eq!(c[7], "Debian");
        assert_eq!(c[8], "<unknown>");
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(t["rows"][0]["object"]["metadata"]["name"], "n1");
    }

    #[test]
    fn configmap_and_default_rows() {
        let cm = json!({"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}});
        let t = table(
            kinds::configmaps(),
            [&cm],
            json!({}),
            "v1beta1",
            IncludeObject::None,
            false,
        );
        assert_eq!(t["apiVersion"], "meta.k8s.io/v1beta1");
        assert_eq!(t["columnDefinitions"], json!([]));
        assert_eq!(t["rows"][0]["cells"], json!(["c", 3, "<unknown>"]));
        assert!(t["rows"][0].get("object").is_none());
        let ev = json!({"metadata": {"name": "e"}, "type": "Normal", "reason": "Started",
            "involvedObject": {"kind": "Node", "name": "n1"}, "message": "hello "});
        let t = table(
            kinds::core_events(),
            [&ev],
            json!({}),
            "v1",
            IncludeObject::Object,
            true,
        );
        assert_eq!(t["rows"][0]["cells"][3], "node/n1");
        assert_eq!(t["rows"][0]["cells"][4], "hello");
        assert_eq!(t["rows"][0]["object"]["reason"], "Started");
    }
}
