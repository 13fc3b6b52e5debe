//! What decoding a body into upstream's Go types and encoding the object back does to it,
//! for the fields of the served kinds that clients write (the sim has no schemas; this
//! is the part of them a client sees):
//!
//! - Times: a `metav1.Time` field is parsed as Go's `time.Parse` reads RFC 3339 and
//!   stored in UTC to the second; a `metav1.MicroTime` field must have exactly six
//!   fractional digits and is stored in UTC to the microsecond. A time that does not
//!   parse is the decoder's error, in Go's words.
//! - Types: labels, annotations and ConfigMap and Secret data are maps of strings (a null
//!   value decodes as ""), Secret and ConfigMap binary data is base64, `immutable` is a
//!   boolean.
//! - Zero values: a field whose Go type is a struct, or that has no `omitempty`, is always
//!   encoded: a Node's `spec`, `status.daemonEndpoints` and `status.nodeInfo`, a
//!   condition's times (null), an Event's `source`, times and reporting fields, a Lease's
//!   `spec`.
//! - `omitempty`: an empty list, or an empty map-typed field (labels, data, capacity ...),
//!   is not encoded.
//! - Defaults: a Node's `status.allocatable` from its capacity, `spec.podCIDRs` from
//!   `spec.podCIDR`.
//!
//! Errors are the Go decoder's text; the caller words the status (400 for a create or an
//! update body, 422 for a patched object).

use base64::Engine as _;
use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::patch::go_json_type;
use crate::resources::ResourceType;
use crate::time::parse_go;

/// Which time type a field has, and whether it is a pointer (absent when unset) or a
/// struct (encoded as null when unset).
#[derive(Clone, Copy)]
enum TimeField {
    /// `metav1.Time` struct: null when unset.
    Time,
    /// `*metav1.Time`: absent when unset.
    TimePtr,
    /// `metav1.MicroTime` struct: null when unset.
    Micro,
    /// `*metav1.MicroTime`: absent when unset.
    MicroPtr,
}

/// Decodes `obj` (a whole object of `rt`, in its stored form) as the API server does;
/// the Go decoder's error text when it cannot.
pub(super) fn decode(rt: &ResourceType, obj: &mut Value) -> Result<(), String> {
    let Value::Object(root) = obj else {
        return Ok(());
    };
    if let Some(Value::Object(meta)) = root.get_mut("metadata") {
        for f in ["labels", "annotations"] {
            string_map(meta, f, "ObjectMeta", &format!("metadata.{f}"))?;
        }
        for f in ["labels", "annotations", "finalizers", "ownerReferences"] {
            drop_empty(meta, f);
        }
    }
    match (rt.group, rt.kind) {
        ("", "ConfigMap") => {
            string_map(root, "data", "ConfigMap", "data")?;
            bytes_map(root, "binaryData", "ConfigMap", "binaryData")?;
            boolean(root, "immutable", "ConfigMap", "immutable")?;
            drop_empty(root, "data");
            drop_empty(root, "binaryData");
        }
        ("", "Secret") => {
            bytes_map(root, "data", "Secret", "data")?;
            string_map(root, "stringData", "Secret", "stringData")?;
            boolean(root, "immutable", "Secret", "immutable")?;
            drop_empty(root, "data");
            drop_empty(root, "stringData");
        }
        ("", "Node") => node(root)?,
        ("", "Namespace") => {
            struct_field(root, "spec");
            struct_field(root, "status");
            if let Some(Value::Object(status)) = root.get_mut("status") {
                each_item(status, "conditions", |c| {
                    zero_strings(c, &["type", "status"]);
                    time(c, "lastTransitionTime", TimeField::Time)
                })?;
            }
        }
        ("", "Event") => event(root)?,
        ("coordination.k8s.io", "Lease") => {
            struct_field(root, "spec");
            if let Some(Value::Object(spec)) = root.get_mut("spec") {
                time(spec, "acquireTime", TimeField::MicroPtr)?;
                time(spec, "renewTime", TimeField::MicroPtr)?;
            }
        }
        _ => {}
    }
    drop_empty_lists(obj);
    Ok(())
}

/// The kind's zero object: what decoding `{}` gives (the fields every object of the kind
/// encodes).
pub(super) fn zero_object(rt: &ResourceType) -> Value {
    let mut v = json!({});
    let _ = decode(rt, &mut v);
    v
}

/// 400 for a create or update body that does not decode: `Lease in version "v1" cannot
/// be handled as a Lease: <the decoder's error>`.
pub(super) fn body_error(rt: &ResourceType, err: &str) -> ApiError {
    ApiError::bad_request(format!(
        "{kind} in version \"{}\" cannot be handled as a {kind}: {err}",
        rt.version,
        kind = rt.kind
    ))
}

/// 422 for a patched object that does not decode: upstream's ` "" is invalid: patch:
/// Invalid value: "<the patched object>": <the decoder's error>` (the object as JSON, its
/// keys in the sim's order where upstream has its Go types' order).
pub(super) fn patch_error(patched: &Value, err: &str) -> ApiError {
    let quoted = crate::rules::go_quote(&patched.to_string());
    ApiError {
        code: 422,
        reason: "Invalid",
        message: format!(" \"\" is invalid: patch: Invalid value: {quoted}: {err}"),
        details: Some(json!({"causes": [{
            "reason": "FieldValueInvalid",
            "message": format!("Invalid value: {quoted}: {err}"),
            "field": "patch",
        }]})),
        retry_after_seconds: None,
    }
}

fn node(root: &mut Map<String, Value>) -> Result<(), String> {
    struct_field(root, "spec");
    struct_field(root, "status");
    if let Some(Value::Object(spec)) = root.get_mut("spec") {
        each_item(spec, "taints", |t| {
            zero_strings(t, &["key", "effect"]);
            time(t, "timeAdded", TimeField::TimePtr)
        })?;
        // SetDefaults_NodeSpec.
        let cidr = spec.get("podCIDR").and_then(Value::as_str).unwrap_or("");
        let has_cidrs = spec
            .get("podCIDRs")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
        if !cidr.is_empty() && !has_cidrs {
            let cidrs = json!([cidr]);
            spec.insert("podCIDRs".into(), cidrs);
        }
    }
    if let Some(Value::Object(status)) = root.get_mut("status") {
        each_item(status, "conditions", |c| {
            zero_strings(c, &["type", "status"]);
            time(c, "lastHeartbeatTime", TimeField::Time)?;
            time(c, "lastTransitionTime", TimeField::Time)
        })?;
        each_item(status, "addresses", |a| {
            zero_strings(a, &["type", "address"]);
            Ok(())
        })?;
        // SetDefaults_NodeStatus.
        if status.get("allocatable").is_none_or(Value::is_null)
            && let Some(cap) = status.get("capacity").filter(|c| c.is_object()).cloned()
        {
            status.insert("allocatable".into(), cap);
        }
        drop_empty(status, "capacity");
        drop_empty(status, "allocatable");
        struct_field(status, "daemonEndpoints");
        if let Some(Value::Object(d)) = status.get_mut("daemonEndpoints") {
            struct_field(d, "kubeletEndpoint");
            if let Some(Value::Object(k)) = d.get_mut("kubeletEndpoint") {
                k.entry("Port").or_insert(json!(0));
            }
        }
        struct_field(status, "nodeInfo");
        if let Some(Value::Object(info)) = status.get_mut("nodeInfo") {
            zero_strings(
                info,
                &[
                    "machineID",
                    "systemUUID",
                    "bootID",
                    "kernelVersion",
                    "osImage",
                    "containerRuntimeVersion",
                    "kubeletVersion",
                    "kubeProxyVersion",
                    "operatingSystem",
                    "architecture",
                ],
            );
        }
    }
    Ok(())
}

fn event(root: &mut Map<String, Value>) -> Result<(), String> {
    struct_field(root, "involvedObject");
    struct_field(root, "source");
    time(root, "firstTimestamp", TimeField::Time)?;
    time(root, "lastTimestamp", TimeField::Time)?;
    time(root, "eventTime", TimeField::Micro)?;
    if let Some(Value::Object(series)) = root.get_mut("series") {
        time(series, "lastObservedTime", TimeField::Micro)?;
    }
    zero_strings(root, &["reportingComponent", "reportingInstance"]);
    if root.get("count").and_then(Value::as_i64) == Some(0) {
        root.shift_remove("count");
    }
    Ok(())
}

/// A struct-typed field: always encoded, `{}` when unset.
fn struct_field(m: &mut Map<String, Value>, f: &str) {
    let v = m.entry(f).or_insert_with(|| json!({}));
    if v.is_null() {
        *v = json!({});
    }
}

/// String fields without `omitempty`: `""` when unset.
fn zero_strings(m: &mut Map<String, Value>, fields: &[&str]) {
    for f in fields {
        let v = m.entry(*f).or_insert_with(|| json!(""));
        if v.is_null() {
            *v = json!("");
        }
    }
}

/// Runs `each` on every object in the list at `f`.
fn each_item(
    m: &mut Map<String, Value>,
    f: &str,
    mut each: impl FnMut(&mut Map<String, Value>) -> Result<(), String>,
) -> Result<(), String> {
    if let Some(Value::Array(items)) = m.get_mut(f) {
        for item in items.iter_mut() {
            if let Value::Object(o) = item {
                each(o)?;
            }
        }
    }
    Ok(())
}

/// Parses and re-encodes the time at `f`.
fn time(m: &mut Map<String, Value>, f: &str, kind: TimeField) -> Result<(), String> {
    let micro = matches!(kind, TimeField::Micro | TimeField::MicroPtr);
    match m.get(f) {
        None | Some(Value::Null) => match kind {
            TimeField::Time | TimeField::Micro => {
                m.insert(f.to_string(), Value::Null);
            }
            TimeField::TimePtr | TimeField::MicroPtr => {
                m.shift_remove(f);
            }
        },
        Some(Value::String(s)) => {
            let t = parse_go(s, micro)?;
            let encoded = if micro {
                t.to_micro_time()
            } else {
                t.to_time()
            };
            m.insert(f.to_string(), Value::String(encoded));
        }
        Some(other) => {
            return Err(format!(
                "json: cannot unmarshal {} into Go value of type string",
                go_json_type(other)
            ));
        }
    }
    Ok(())
}

fn type_error(found: &Value, owner: &str, path: &str, go_type: &str) -> String {
    format!(
        "json: cannot unmarshal {} into Go struct field {owner}.{path} of type {go_type}",
        go_json_type(found)
    )
}

/// A `map[string]string` field: strings only, null values as "".
fn string_map(m: &mut Map<String, Value>, f: &str, owner: &str, path: &str) -> Result<(), String> {
    match m.get_mut(f) {
        None => {}
        Some(Value::Null) => {
            m.shift_remove(f);
        }
        Some(Value::Object(entries)) => {
            for v in entries.values_mut() {
                match v {
                    Value::String(_) => {}
                    Value::Null => *v = json!(""),
                    other => return Err(type_error(other, owner, path, "string")),
                }
            }
        }
        Some(other) => return Err(type_error(other, owner, path, "map[string]string")),
    }
    Ok(())
}

/// A `map[string][]byte` field: base64 strings, as Go's decoder checks them.
fn bytes_map(m: &mut Map<String, Value>, f: &str, owner: &str, path: &str) -> Result<(), String> {
    match m.get_mut(f) {
        None => {}
        Some(Value::Null) => {
            m.shift_remove(f);
        }
        Some(Value::Object(entries)) => {
            for v in entries.values_mut() {
                match v {
                    Value::String(s) => {
                        if let Err(e) =
                            base64::engine::general_purpose::STANDARD.decode(s.as_bytes())
                        {
                            let at = match e {
                                base64::DecodeError::InvalidByte(i, _)
                                | base64::DecodeError::InvalidLastSymbol(i, _) => i,
                                _ => s.len(),
                            };
                            return Err(format!("illegal base64 data at input byte {at}"));
                        }
                    }
                    Value::Null => *v = json!(""),
                    other => return Err(type_error(other, owner, path, "[]uint8")),
                }
            }
        }
        Some(other) => return Err(type_error(other, owner, path, "map[string][]uint8")),
    }
    Ok(())
}

/// A `*bool` field.
fn boolean(m: &mut Map<String, Value>, f: &str, owner: &str, path: &str) -> Result<(), String> {
    match m.get(f) {
        None | Some(Value::Bool(_)) => {}
        Some(Value::Null) => {
            m.shift_remove(f);
        }
        Some(other) => return Err(type_error(other, owner, path, "bool")),
    }
    Ok(())
}

/// Drops the map or list at `f` when it is empty (`omitempty`).
fn drop_empty(m: &mut Map<String, Value>, f: &str) {
    let empty = match m.get(f) {
        Some(Value::Object(o)) => o.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Null) => true,
        _ => false,
    };
    if empty {
        m.shift_remove(f);
    }
}

/// Drops every empty list inside `v` (the served kinds' lists are all `omitempty`).
fn drop_empty_lists(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, x| !matches!(x, Value::Array(a) if a.is_empty()));
            for x in m.values_mut() {
                drop_empty_lists(x);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(drop_empty_lists),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::decode;
    use crate::resources::kinds;

    #[test]
    fn times_are_parsed_and_stored_in_utc() {
        let mut ev =
            json!({"metadata": {"name": "e"}, "firstTimestamp": "2025-01-02T03:04:05.678+01:00"});
        decode(kinds::core_events(), &mut ev).unwrap();
        assert_eq!(ev["firstTimestamp"], "2025-01-02T02:04:05Z");
        assert_eq!(ev["lastTimestamp"], json!(null));
        assert_eq!(ev["eventTime"], json!(null));
        assert_eq!(ev["source"], json!({}));
        assert_eq!(ev["reportingComponent"], "");
        let mut lease =
            json!({"metadata": {"name": "l"}, "spec": {"renewTime": "2025-01-02T03:04:05Z"}});
        let e = decode(kinds::leases(), &mut lease).unwrap_err();
        assert!(e.ends_with(r#"cannot parse "Z" as ".000000""#), "{e}");
    }

    #[test]
    fn nodes_get_their_defaults_and_zero_values() {
        let mut n = json!({"metadata": {"name": "n", "labels": {}},
            "spec": {"podCIDR": "10.0.0.0/24", "taints": []},
            "status": {"capacity": {"cpu": "8"}, "conditions": [{"type": "Ready", "status": "True"}]}});
        decode(kinds::nodes(), &mut n).unwrap();
        assert_eq!(n["metadata"], json!({"name": "n"}));
        assert_eq!(
            n["spec"],
            json!({"podCIDR": "10.0.0.0/24", "podCIDRs": ["10.0.0.0/24"]})
        );
        assert_eq!(n["status"]["allocatable"], json!({"cpu": "8"}));
        assert_eq!(
            n["status"]["daemonEndpoints"],
            json!({"kubeletEndpoint": {"Port": 0}})
        );
        assert_eq!(n["status"]["nodeInfo"]["kubeletVersion"], "");
        assert_eq!(
            n["status"]["conditions"][0]["lastHeartbeatTime"],
            json!(null)
        );
    }

    #[test]
    fn configmap_fields_have_their_types() {
        let mut cm = json!({"metadata": {"name": "c"}, "data": {"k": 1}});
        assert_eq!(
            decode(kinds::configmaps(), &mut cm).unwrap_err(),
            "json: cannot unmarshal number into Go struct field ConfigMap.data of type string"
        );
        let mut cm = json!({"metadata": {"name": "c", "labels": {"a": true}}});
        assert_eq!(
            decode(kinds::configmaps(), &mut cm).unwrap_err(),
            "json: cannot unmarshal bool into Go struct field ObjectMeta.metadata.labels of type string"
        );
        let mut cm = json!({"metadata": {"name": "c"}, "binaryData": {"a": "!!"}});
        assert_eq!(
            decode(kinds::configmaps(), &mut cm).unwrap_err(),
            "illegal base64 data at input byte 0"
        );
        let mut cm = json!({"metadata": {"name": "c"}, "data": {"k": null}, "binaryData": {}});
        decode(kinds::configmaps(), &mut cm).unwrap();
        assert_eq!(cm, json!({"metadata": {"name": "c"}, "data": {"k": ""}}));
    }
}
