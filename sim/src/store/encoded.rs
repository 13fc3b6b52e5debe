//! How the store keeps an object: its JSON encoding, nothing else.
//!
//! A `serde_json::Value` costs about nine times its JSON (each JSON object is an
//! order-preserving map of its own: a Node with managedFields has over a hundred), and
//! keeping both the value and its encoding cost a Node 31 KiB: 3 GiB for 100,000 Nodes,
//! more with the watch history's old versions. So the store keeps the encoding only
//! ([`SharedObject`], one shared string per object version) and decodes on demand: a write
//! decodes the object it changes, a list or a watch event is the encoding as it is, and
//! what selectors and metadata-only clients read is found in the encoding without decoding
//! the rest ([`raw_field`], [`Selectable`]).

use std::cell::OnceCell;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::Key;
use crate::selector::{FieldSelector, LabelSelector};

/// A stored object version: its JSON encoding, shared by the store's table, the watch
/// history, lists and watch events (cloning copies a pointer).
#[derive(Clone)]
pub struct SharedObject {
    json: Arc<str>,
}

impl std::fmt::Debug for SharedObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedObject")
            .field("json", &&*self.json)
            .finish()
    }
}

impl SharedObject {
    /// The object `v`, encoded.
    pub(super) fn new(v: &Value) -> Self {
        SharedObject {
            json: Arc::from(serde_json::to_string(v).unwrap_or_default()),
        }
    }

    /// The object serialized as JSON.
    pub fn encoded(&self) -> &str {
        &self.json
    }

    /// The encoding, shared.
    pub(super) fn shared_encoding(&self) -> Arc<str> {
        self.json.clone()
    }

    /// The object, decoded (a new value each call).
    pub fn object(&self) -> Value {
        decode(&self.json)
    }

    /// The encoding of the object's `metadata` (`{}` when it has none), found without
    /// decoding anything.
    pub fn metadata_json(&self) -> &str {
        raw_field(&self.json, "metadata").unwrap_or("{}")
    }

    /// Bytes of the encoding.
    pub(super) fn len(&self) -> usize {
        self.json.len()
    }
}

/// `json` decoded: the store encoded it, so it decodes (`null` if it somehow does not).
pub(super) fn decode(json: &str) -> Value {
    serde_json::from_str(json).unwrap_or(Value::Null)
}

/// What label and field selectors read of one object, taken from its encoding at most
/// once and only when a selector asks: the labels alone for a label selector, the name
/// and namespace (from the key) for a field selector on those, the whole object
/// otherwise.
pub(super) struct Selectable<'a> {
    key: &'a Key,
    obj: &'a SharedObject,
    labels: OnceCell<Option<Map<String, Value>>>,
    names: OnceCell<Value>,
    full: OnceCell<Value>,
}

impl<'a> Selectable<'a> {
    pub(super) fn new(key: &'a Key, obj: &'a SharedObject) -> Self {
        Selectable {
            key,
            obj,
            labels: OnceCell::new(),
            names: OnceCell::new(),
            full: OnceCell::new(),
        }
    }

    /// Whether both selectors select the object.
    pub(super) fn selected_by(&self, label: &LabelSelector, field: &FieldSelector) -> bool {
        (label.is_empty() || label.matches(self.labels().as_ref()))
            && (field.is_empty() || field.matches_object(self.field_view(field)))
    }

    fn labels(&self) -> &Option<Map<String, Value>> {
        self.labels.get_or_init(|| {
            let labels = raw_field(self.obj.metadata_json(), "labels")?;
            serde_json::from_str(labels).ok()
        })
    }

    fn field_view(&self, field: &FieldSelector) -> &Value {
        if field.only_names() {
            self.names
                .get_or_init(|| json!({"metadata": {"namespace": self.key.0, "name": self.key.1}}))
        } else {
            self.full.get_or_init(|| self.obj.object())
        }
    }
}

/// The encoding of member `key` of the JSON object `json`, without decoding anything
/// (`None` if `json` is not an object or has no such member). Keys are compared as they
/// are written: one with escapes in it is not found.
pub fn raw_field<'a>(json: &'a str, key: &str) -> Option<&'a str> {
    let b = json.as_bytes();
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        return None;
    }
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = skip_string(b, i)?;
        let name = &json[i + 1..key_end - 1];
        i = skip_ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        let start = skip_ws(b, i + 1);
        let end = skip_value(b, start)?;
        if name == key {
            return Some(&json[start..end]);
        }
        i = skip_ws(b, end);
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            _ => return None,
        }
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while b
        .get(i)
        .is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
    {
        i += 1;
    }
    i
}

/// The index after the string starting at `i` (which is its opening quote).
fn skip_string(b: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    loop {
        match b.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
}

/// The index after the value starting at `i`.
fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => skip_string(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                match b.get(j)? {
                    b'"' => {
                        j = skip_string(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            let mut j = i;
            while b
                .get(j)
                .is_some_and(|c| !matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
            {
                j += 1;
            }
            (j > i).then_some(j)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_field_finds_a_member_as_it_is_encoded() {
        let v = json!({
            "kind": "Node",
            "apiVersion": "v1",
            "metadata": {"name": "n1", "labels": {"a": "x\"}{", "b\\\"": "]["}, "n": [1, {"c": null}]},
            "spec": {},
            "status": {"conditions": [{"type": "Ready", "message": "a \\ b \" c"}]},
            "count": -1.5e3,
            "ok": true,
            "none": null
        });
        let s = serde_json::to_string(&v).unwrap();
        for key in ["kind", "metadata", "spec", "status", "count", "ok", "none"] {
            let raw = raw_field(&s, key).unwrap_or_else(|| panic!("{key} not found"));
            let back: Value = serde_json::from_str(raw).unwrap();
            assert_eq!(back, v[key], "{key}");
        }
        let meta = raw_field(&s, "metadata").unwrap();
        let labels: Value = serde_json::from_str(raw_field(meta, "labels").unwrap()).unwrap();
        assert_eq!(labels, v["metadata"]["labels"]);
        assert_eq!(raw_field(&s, "missing"), None);
        assert_eq!(raw_field(&s, "name"), None, "only top-level members");
        // Whitespace, as a pretty encoding has it.
        let pretty = serde_json::to_string_pretty(&v).unwrap();
        let raw: Value = serde_json::from_str(raw_field(&pretty, "status").unwrap()).unwrap();
        assert_eq!(raw, v["status"]);
        for not_an_object in ["", "[]", "3", "\"metadata\"", "{", "{\"a\"", "{}"] {
            assert_eq!(raw_field(not_an_object, "a"), None, "{not_an_object}");
        }
    }

    #[test]
    fn selectors_read_labels_and_names_from_the_encoding() {
        let v = json!({"kind": "Node", "apiVersion": "v1",
            "metadata": {"name": "n1", "labels": {"pool": "gpu"}}, "spec": {"unschedulable": true}});
        let obj = SharedObject::new(&v);
        let key = (String::new(), "n1".to_string());
        let sel = Selectable::new(&key, &obj);
        let label = |s: &str| LabelSelector::parse(s).unwrap();
        let field = |s: &str| FieldSelector::parse(s).unwrap();
        let all = FieldSelector::default();
        assert!(sel.selected_by(&label("pool=gpu"), &all));
        assert!(!sel.selected_by(&label("pool=cpu"), &all));
        assert!(sel.full.get().is_none(), "labels alone were read");
        assert!(sel.selected_by(&label(""), &field("metadata.name=n1")));
        assert!(!sel.selected_by(&label(""), &field("metadata.name!=n1")));
        assert!(sel.full.get().is_none(), "the name comes from the key");
        assert!(sel.selected_by(&label("pool"), &field("spec.unschedulable=true")));
        assert!(sel.full.get().is_some());
        let bare = SharedObject::new(&json!({"metadata": {"name": "n2"}}));
        let sel = Selectable::new(&key, &bare);
        assert!(sel.selected_by(&label("!pool"), &all));
        assert!(!sel.selected_by(&label("pool"), &all));
        assert_eq!(bare.metadata_json(), r#"{"name":"n2"}"#);
        assert_eq!(SharedObject::new(&json!({})).metadata_json(), "{}");
    }
}
