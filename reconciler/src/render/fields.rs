//! Field paths and values of a decoded document: a path joined under a prefix, one path
//! within another, and a merge patch without the `null`s that remove fields.

use std::borrow::Cow;

use kubelet_gitops_core::decode::join_key;
use kubelet_gitops_core::types::{API_VERSION, KIND};
use serde_json::{Map, Value};

/// `prefix` followed by a relative field path (`[0].key` or `key.sub`).
pub(super) fn join_path(prefix: &str, rel: &str) -> String {
    if prefix.is_empty() {
        rel.to_string()
    } else if rel.starts_with('[') {
        format!("{prefix}{rel}")
    } else {
        join_key(prefix, rel)
    }
}

pub use kubelet_gitops_core::decode::is_within;

/// `value` without the object members that are `null` (in nested objects too, not in
/// lists): in a JSON merge patch they remove the field, so they are not values to check.
/// Borrows `value` when it has no such member (the usual case), copying nothing.
pub(super) fn without_nulls(value: &Value) -> Cow<'_, Value> {
    fn has_null_member(value: &Value) -> bool {
        match value {
            Value::Object(m) => m.values().any(|v| v.is_null() || has_null_member(v)),
            _ => false,
        }
    }
    fn strip(value: &Value) -> Value {
        match value {
            Value::Object(m) => Value::Object(
                m.iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| (k.clone(), strip(v)))
                    .collect(),
            ),
            // Lists are replaced whole, not patched: a null inside one is a value.
            other => other.clone(),
        }
    }
    if has_null_member(value) {
        Cow::Owned(strip(value))
    } else {
        Cow::Borrowed(value)
    }
}

/// `value` with each member of an object (or element of a list) that is itself an
/// object or a list replaced by an empty one of the same kind: what a struct whose
/// compound fields are [`serde::de::IgnoredAny`] needs to check a document's shape
/// (unknown fields, the kind of each value), in the time of its top-level keys rather
/// than of the whole document. Take the compound values from `value` itself afterwards
/// ([`take`]).
pub(super) fn shallow(value: &Value) -> Value {
    fn empty(value: &Value) -> Value {
        match value {
            Value::Object(_) => Value::Object(Map::new()),
            Value::Array(_) => Value::Array(Vec::new()),
            scalar => scalar.clone(),
        }
    }
    match value {
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), empty(v))).collect()),
        other => empty(other),
    }
}

/// Removes member `key` from the object `value` and returns it; `None` when it is absent
/// or `null` (or `value` is not an object).
pub(super) fn take(value: &mut Value, key: &str) -> Option<Value> {
    value
        .as_object_mut()
        .and_then(|m| m.remove(key))
        .filter(|v| !v.is_null())
}

/// Removes `apiVersion` and `kind` from KubeletConfiguration `fields` (rendering writes
/// them) and returns each that said something other than the kubelet's: (key, what it
/// said, what it must say).
pub(super) fn take_type_meta(
    fields: &mut Map<String, Value>,
) -> Vec<(&'static str, Value, &'static str)> {
    [("apiVersion", API_VERSION), ("kind", KIND)]
        .into_iter()
        .filter_map(|(key, expected)| match fields.remove(key) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if s == expected => None,
            Some(other) => Some((key, other, expected)),
        })
        .collect()
}
