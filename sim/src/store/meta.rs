//! Object metadata on untyped JSON objects, and the server's timestamps (RFC 3339 in UTC
//! to the second, as `metav1.Time` encodes).

use serde_json::{Map, Value};

use crate::resources::ResourceType;

/// Now as RFC 3339 UTC with seconds (`2024-01-02T03:04:05Z`).
pub fn now_rfc3339() -> String {
    crate::time::rfc3339(std::time::SystemTime::now(), false)
}

/// A Unix time in seconds as RFC 3339 UTC.
pub fn rfc3339(secs: u64) -> String {
    crate::time::rfc3339_secs(i64::try_from(secs).unwrap_or(i64::MAX))
}

pub(super) fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

pub(super) fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    meta(obj)
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

pub(super) fn set_meta(obj: &mut Value, field: &str, v: Value) {
    if let Value::Object(o) = obj {
        let m = o
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if !m.is_object() {
            *m = Value::Object(Map::new());
        }
        if let Value::Object(m) = m {
            m.insert(field.to_string(), v);
        }
    }
}

pub(super) fn remove_meta(obj: &mut Value, field: &str) {
    if let Some(Value::Object(m)) = obj.get_mut("metadata") {
        m.shift_remove(field);
    }
}

pub(super) fn obj_rv(obj: &Value) -> u64 {
    meta_str(obj, "resourceVersion").parse().unwrap_or(0)
}

/// Put `apiVersion` and `kind` first, as the real server's encoding does.
pub(super) fn with_type_meta(rt: &ResourceType, obj: Value) -> Value {
    let Value::Object(m) = obj else { return obj };
    let mut out = Map::with_capacity(m.len() + 2);
    out.insert("kind".into(), Value::String(rt.kind.to_string()));
    out.insert("apiVersion".into(), Value::String(rt.api_version()));
    for (k, v) in m {
        if k != "kind" && k != "apiVersion" {
            out.insert(k, v);
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        let now = now_rfc3339();
        assert_eq!(now.len(), 20);
        assert!(now.ends_with('Z'));
    }
}
