//! Patches and field ownership: JSON merge patch (RFC 7386, here), JSON patch (RFC 6902,
//! `json`), strategic merge patch (k8s.io/apimachinery/pkg/util/strategicpatch, `strategic`)
//! for the list strategies of the kinds we serve, the merge of server-side apply (here),
//! and its field sets (`metadata.managedFields`, fieldsV1, `fields`) with conflict
//! detection.

mod fields;
mod json;
mod strategic;

use serde_json::{Map, Value};

pub use fields::{
    FieldPath, FieldSet, PathElement, changed_fields, path_string, remove_at, removed_fields,
    value_at,
};
pub use json::json_patch;
pub use strategic::strategic_merge;

/// How a list field merges, from the Go types' `patchStrategy`/`patchMergeKey` and
/// `listType`/`listMapKey` markers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    /// Replaced as a whole (`listType=atomic`, no patch strategy).
    Atomic,
    /// Merged element by element on a key field (`listType=map`, `patchMergeKey`).
    Map(&'static str),
    /// A set of scalars (`listType=set`, `patchStrategy=merge` on scalars).
    Set,
}

/// The list strategy of the field at dotted `path` (`status.conditions`) of `kind`.
pub fn list_kind(kind: &str, path: &str) -> ListKind {
    match (kind, path) {
        (_, "metadata.ownerReferences") => ListKind::Map("uid"),
        (_, "metadata.finalizers") => ListKind::Set,
        ("Node" | "Namespace" | "Pod" | "PodDisruptionBudget", "status.conditions") => {
            ListKind::Map("type")
        }
        ("Node", "status.addresses") => ListKind::Map("type"),
        ("Node", "spec.podCIDRs") => ListKind::Set,
        ("Pod", "spec.containers" | "spec.initContainers" | "spec.volumes") => {
            ListKind::Map("name")
        }
        ("Pod", "status.containerStatuses" | "status.initContainerStatuses") => ListKind::Atomic,
        _ => ListKind::Atomic,
    }
}

/// Whether the field at dotted `path` of `kind` is a Go map (each key a field of its
/// own, the map itself a field an Update that creates it owns: fieldsV1's `.`).
pub fn is_map_field(kind: &str, path: &str) -> bool {
    matches!(
        (kind, path),
        (_, "metadata.labels" | "metadata.annotations")
            | ("ConfigMap" | "Secret", "data" | "binaryData" | "stringData")
            | ("Node", "status.capacity" | "status.allocatable")
            | ("Pod", "spec.nodeSelector")
            | ("PodDisruptionBudget", "status.disruptedPods")
    )
}

/// Whether the struct at dotted `path` of `kind` is atomic (`+structType=atomic`, as
/// `ObjectReference`): one field, owned whole.
pub fn is_atomic_struct(kind: &str, path: &str) -> bool {
    matches!((kind, path), ("Event", "involvedObject" | "related"))
}

fn child_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Errors of applying a patch. The store maps each to upstream's status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// The patch body is not valid JSON (or YAML for apply), or not the right shape:
    /// the server answers 400 BadRequest.
    #[error("{0}")]
    BadRequest(String),
    /// A JSON patch operation failed (e.g. `test`, or a missing path): the server answers
    /// 422 with a generic message.
    #[error("{0}")]
    Unprocessable(String),
    /// A strategic merge patch the merge code rejects (e.g. a list element without its
    /// merge key): the server answers 500.
    #[error("{0}")]
    Internal(String),
}

/// The JSON type of `v` as Go's `encoding/json` names it in an `UnmarshalTypeError`.
pub fn go_json_type(v: &Value) -> &'static str {
    match v {
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        Value::Null => "null",
    }
}

/// Parse a patch body as JSON (decode errors are BadRequest).
pub fn parse_json(body: &[u8]) -> Result<Value, PatchError> {
    serde_json::from_slice(body).map_err(|e| PatchError::BadRequest(e.to_string()))
}

/// Parse a server-side apply body: YAML (JSON is YAML too).
pub fn parse_apply(body: &[u8]) -> Result<Value, PatchError> {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return Ok(v);
    }
    let text = std::str::from_utf8(body)
        .map_err(|e| PatchError::BadRequest(format!("error decoding YAML: {e}")))?;
    serde_saphyr::from_str::<Value>(text)
        .map_err(|e| PatchError::BadRequest(format!("error decoding YAML: {e}")))
}

/// Apply a JSON merge patch to `target`.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(pm) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(tm) = target {
        for (k, v) in pm {
            if v.is_null() {
                tm.remove(k);
            } else {
                merge_patch(tm.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// Merge an applied configuration over the live object: maps merge recursively,
/// lists merge by their [`ListKind`] (map lists by key, sets by union, atomic lists are
/// replaced). Used by server-side apply.
pub fn apply_merge(live: &mut Value, applied: &Value, kind: &str, path: &str) {
    match (live, applied) {
        (Value::Object(lm), Value::Object(am)) => {
            for (k, av) in am {
                let cp = child_path(path, k);
                match lm.get_mut(k) {
                    Some(lv) if av.is_object() || av.is_array() => {
                        apply_merge(lv, av, kind, &cp);
                    }
                    _ => {
                        lm.insert(k.clone(), av.clone());
                    }
                }
            }
        }
        (lv @ Value::Array(_), Value::Array(aa)) => match list_kind(kind, path) {
            ListKind::Atomic => *lv = Value::Array(aa.clone()),
            ListKind::Set => {
                if let Value::Array(la) = lv {
                    for x in aa {
                        if !la.contains(x) {
                            la.push(x.clone());
                        }
                    }
                }
            }
            ListKind::Map(key) => {
                if let Value::Array(la) = lv {
                    for ae in aa {
                        let kv = key_of(ae, key);
                        match la.iter_mut().find(|l| kv.is_some() && key_of(l, key) == kv) {
                            Some(le) => apply_merge(le, ae, kind, path),
                            None => la.push(ae.clone()),
                        }
                    }
                }
            }
        },
        (lv, av) => *lv = av.clone(),
    }
}

fn key_of<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.as_object().and_then(|m| m.get(key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_rfc7386() {
        let mut t = json!({"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]});
        merge_patch(
            &mut t,
            &json!({"a": "z", "c": {"f": null}, "l": [3], "n": {"x": 1}}),
        );
        assert_eq!(
            t,
            json!({"a": "z", "c": {"d": "e"}, "l": [3], "n": {"x": 1}})
        );
        let mut t = json!({"a": 1});
        merge_patch(&mut t, &json!([1]));
        assert_eq!(t, json!([1]));
    }

    #[test]
    fn apply_merge_lists() {
        let mut live =
            json!({"status": {"conditions": [{"type": "A", "status": "1"}]}, "data": {"x": "1"}});
        apply_merge(
            &mut live,
            &json!({"status": {"conditions": [{"type": "B", "status": "2"}, {"type": "A", "status": "3"}]}, "data": {"y": "2"}}),
            "Node",
            "",
        );
        assert_eq!(
            live["status"]["conditions"],
            json!([{"type": "A", "status": "3"}, {"type": "B", "status": "2"}])
        );
        assert_eq!(live["data"], json!({"x": "1", "y": "2"}));
    }

    #[test]
    fn apply_yaml_body() {
        let v =
            parse_apply(b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  k: v\n")
                .unwrap();
        assert_eq!(v["data"]["k"], "v");
        assert!(matches!(
            parse_apply(b"a: [").unwrap_err(),
            PatchError::BadRequest(_)
        ));
    }
}
