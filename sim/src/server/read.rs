//! get and list in the negotiated representation. A JSON list is assembled from the
//! store's cached encodings of its items ([`encode_list`]), so a repeated list of a large
//! table costs a copy, not an encoding.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::negotiate::Output;
use super::params::{Params, field_selector, include_object, parse_limit};
use super::response::{json_bytes, json_response, object_response, yaml_response};
use super::table::{self, IncludeObject};
use super::{AppState, Target};
use crate::error::ApiError;
use crate::resources::ResourceType;
use crate::store::{ListOptions, SharedObject};

pub(super) fn do_get(
    st: &AppState,
    t: &Target,
    params: &Params,
    output: Output,
) -> Result<Response, ApiError> {
    let name = t.name.as_deref().unwrap_or("");
    // A resourceVersion that is not a number fails before the object is looked up.
    if let Some(rv) = params.get("resourceVersion").filter(|r| !r.is_empty())
        && rv.parse::<u64>().is_err()
    {
        return Err(ApiError::reasonless(
            500,
            ApiError::invalid_resource_version_param(rv),
        ));
    }
    let obj = st.store.get(t.rt, t.ns.as_deref(), name)?;
    match output {
        Output::Table(v) => {
            let include = include_object(params)?;
            let meta = json!({ "resourceVersion": obj.pointer("/metadata/resourceVersion").cloned().unwrap_or(json!("")) });
            Ok(json_response(
                StatusCode::OK,
                &table::table(t.rt, [&obj], meta, v, include, true),
            ))
        }
        _ => Ok(object_response(StatusCode::OK, &obj, output)),
    }
}

pub(super) fn do_list(
    st: &AppState,
    t: &Target,
    params: &Params,
    output: Output,
) -> Result<Response, ApiError> {
    let opts = ListOptions {
        label_selector: params.owned("labelSelector"),
        field_selector: field_selector(params),
        limit: parse_limit(params)?,
        continue_token: params.owned("continue"),
        resource_version: params.owned("resourceVersion"),
        resource_version_match: params.owned("resourceVersionMatch"),
    };
    let include = match output {
        Output::Table(_) => Some(include_object(params)?),
        _ => None,
    };
    // Items shared with the store as their JSON encodings: a JSON list, or a list of
    // their metadata, is a copy; a Table or YAML decodes them.
    let list = st.store.list_shared(t.rt, t.ns.as_deref(), &opts)?;
    let decoded = || {
        list.items
            .iter()
            .map(SharedObject::object)
            .collect::<Vec<_>>()
    };
    let mut meta = Map::new();
    meta.insert("resourceVersion".into(), json!(list.resource_version));
    if let Some(c) = &list.continue_token {
        meta.insert("continue".into(), json!(c));
    }
    if let Some(n) = list.remaining_item_count {
        meta.insert("remainingItemCount".into(), json!(n));
    }
    let meta = Value::Object(meta);
    Ok(match output {
        Output::Table(v) => {
            let include = include.unwrap_or(IncludeObject::Metadata);
            json_response(
                StatusCode::OK,
                &table::table(t.rt, decoded().iter(), meta, v, include, true),
            )
        }
        Output::Meta(v) => json_bytes(StatusCode::OK, encode_metadata_list(v, &meta, &list.items)),
        Output::Json => json_bytes(StatusCode::OK, encode_list(t.rt, &meta, &list.items)),
        Output::Yaml => {
            let items: Vec<Value> = decoded().iter().map(strip_type_meta).collect();
            yaml_response(
                StatusCode::OK,
                &json!({
                    "kind": format!("{}List", t.rt.kind),
                    "apiVersion": t.rt.api_version(),
                    "metadata": meta,
                    "items": items,
                }),
            )
        }
    })
}

/// An object without `kind` and `apiVersion`, as the real server encodes list items.
fn strip_type_meta(obj: &Value) -> Value {
    match obj {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| k.as_str() != "kind" && k.as_str() != "apiVersion")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Serializes `value` skipping the top-level `kind` and `apiVersion`, without copying it.
struct WithoutTypeMeta<'a>(&'a Value);

impl serde::Serialize for WithoutTypeMeta<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self.0 {
            Value::Object(m) => {
                let mut map = s.serialize_map(None)?;
                for (k, v) in m {
                    if k != "kind" && k != "apiVersion" {
                        map.serialize_entry(k, v)?;
                    }
                }
                map.end()
            }
            other => other.serialize(s),
        }
    }
}

/// `{"kind":"NodeList","apiVersion":"v1","metadata":{..},"items":[..]}` with items
/// encoded as the real server does (no kind/apiVersion on items).
///
/// Each item is taken from its stored encoding ([`SharedObject::encoded`]): the store
/// keeps `kind` and `apiVersion` as an object's first two keys, so dropping them is
/// dropping that exact prefix. An item without that prefix is encoded afresh.
fn encode_list(rt: &ResourceType, meta: &Value, items: &[SharedObject]) -> Vec<u8> {
    let prefix = type_meta_prefix(rt);
    let encoded: Vec<&str> = items.iter().map(SharedObject::encoded).collect();
    let total: usize = encoded.iter().map(|e| e.len() + 1).sum();
    let mut out = Vec::with_capacity(256 + total);
    out.extend_from_slice(b"{\"kind\":");
    let _ = serde_json::to_writer(&mut out, &format!("{}List", rt.kind));
    out.extend_from_slice(b",\"apiVersion\":");
    let _ = serde_json::to_writer(&mut out, &rt.api_version());
    out.extend_from_slice(b",\"metadata\":");
    let _ = serde_json::to_writer(&mut out, meta);
    out.extend_from_slice(b",\"items\":[");
    for (i, (item, enc)) in items.iter().zip(&encoded).enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match enc.strip_prefix(prefix.as_str()) {
            Some(rest) => {
                out.push(b'{');
                out.extend_from_slice(rest.as_bytes());
            }
            None => {
                let _ = serde_json::to_writer(&mut out, &WithoutTypeMeta(&item.object()));
            }
        }
    }
    out.extend_from_slice(b"]}");
    out
}

/// `{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/<v>","metadata":{..},
/// "items":[..]}`, each item's metadata copied from its encoding (nothing is decoded).
fn encode_metadata_list(version: &str, meta: &Value, items: &[SharedObject]) -> Vec<u8> {
    let total: usize = items.iter().map(|o| o.metadata_json().len() + 80).sum();
    let mut out = Vec::with_capacity(256 + total);
    out.extend_from_slice(b"{\"kind\":\"PartialObjectMetadataList\",\"apiVersion\":");
    let _ = serde_json::to_writer(&mut out, &format!("meta.k8s.io/{version}"));
    out.extend_from_slice(b",\"metadata\":");
    let _ = serde_json::to_writer(&mut out, meta);
    out.extend_from_slice(b",\"items\":[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(table::partial_metadata_json(item.encoded(), version).as_bytes());
    }
    out.extend_from_slice(b"]}");
    out
}

/// `{"kind":"<Kind>","apiVersion":"<apiVersion>",`: how a stored object's encoding
/// starts when it has more than its type meta.
fn type_meta_prefix(rt: &ResourceType) -> String {
    format!(
        "{{\"kind\":{},\"apiVersion\":{},",
        Value::String(rt.kind.to_string()),
        Value::String(rt.api_version())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::kinds;
    use crate::store::{Store, WriteOptions};

    /// The list as encoded from scratch: every item without its kind and apiVersion.
    fn reference(rt: &ResourceType, meta: &Value, items: &[SharedObject]) -> Vec<u8> {
        let items: Vec<Value> = items.iter().map(|o| strip_type_meta(&o.object())).collect();
        serde_json::to_vec(&json!({
            "kind": format!("{}List", rt.kind),
            "apiVersion": rt.api_version(),
            "metadata": meta,
            "items": items,
        }))
        .unwrap()
    }

    #[test]
    fn encode_list_from_cached_encodings_matches_a_fresh_encoding() {
        let store = Store::new();
        let opts = WriteOptions::default();
        for name in ["b", "a"] {
            let node = json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"k": "v"}}, "status": {"capacity": {"cpu": "2"}}});
            store.create(kinds::nodes(), None, node, &opts).unwrap();
        }
        let event = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e1", "namespace": "default"},
            "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "c",
            "reportingInstance": "i", "action": "A", "reason": "R", "type": "Normal",
            "regarding": {"kind": "Node", "name": "a"}, "note": "n"});
        store
            .create(kinds::events(), Some("default"), event, &opts)
            .unwrap();
        let meta = json!({"resourceVersion": "7"});
        for rt in [kinds::nodes(), kinds::events(), kinds::namespaces()] {
            let list = store
                .list_shared(rt, None, &ListOptions::default())
                .unwrap();
            assert!(!list.items.is_empty(), "{}", rt.plural);
            for _ in 0..2 {
                let got = encode_list(rt, &meta, &list.items);
                assert_eq!(
                    String::from_utf8(got).unwrap(),
                    String::from_utf8(reference(rt, &meta, &list.items)).unwrap(),
                    "{}",
                    rt.plural
                );
            }
            let first = &list.items[0].object();
            assert!(
                first.get("kind").is_some(),
                "stored objects keep their kind"
            );
        }
    }

    #[test]
    fn type_meta_prefix_is_how_a_stored_object_encoding_starts() {
        assert_eq!(
            type_meta_prefix(kinds::events()),
            r#"{"kind":"Event","apiVersion":"events.k8s.io/v1","#
        );
    }
}
