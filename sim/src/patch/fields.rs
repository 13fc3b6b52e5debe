//! Field sets as managedFields' fieldsV1 spells them, paths into objects, and which
//! fields a write changed or removed (what moves ownership).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::{ListKind, child_path, is_atomic_struct, is_map_field, key_of, list_kind};

/// One element of a field path, as fieldsV1 spells it: `f:name`, `k:{"type":"Ready"}`,
/// `v:"x"`, `i:0`.
pub type PathElement = String;

/// A field path.
pub type FieldPath = Vec<PathElement>;

/// A set of field paths owned by a manager.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    /// The member paths.
    pub paths: BTreeSet<FieldPath>,
}

/// Paths never tracked by managedFields (identity and server-set metadata).
fn stripped(path: &[PathElement]) -> bool {
    match path {
        [a] => a == "f:apiVersion" || a == "f:kind",
        [m, f] if m == "f:metadata" => matches!(
            f.as_str(),
            "f:name"
                | "f:namespace"
                | "f:creationTimestamp"
                | "f:selfLink"
                | "f:uid"
                | "f:generation"
                | "f:managedFields"
                | "f:resourceVersion"
                | "f:generateName"
                | "f:deletionTimestamp"
        ),
        _ => false,
    }
}

fn key_element(el: &Value, key: &str) -> Option<PathElement> {
    let kv = key_of(el, key)?;
    let mut m = Map::new();
    m.insert(key.to_string(), kv.clone());
    Some(format!("k:{}", Value::Object(m)))
}

/// The fields of `v` at `cur`: its leaves, list elements and set values; with `created`
/// (an Update that adds `v`), also its maps and lists themselves, as upstream's field
/// comparison records a container it adds (`.` in fieldsV1); an apply records only what
/// its configuration names.
fn collect_fields(
    v: &Value,
    kind: &str,
    dotted: &str,
    cur: &mut FieldPath,
    out: &mut FieldSet,
    created: bool,
) {
    match v {
        Value::Object(_) if is_atomic_struct(kind, dotted) => {
            out.paths.insert(cur.clone());
        }
        Value::Object(m) if !m.is_empty() => {
            if created && is_map_field(kind, dotted) {
                out.paths.insert(cur.clone());
            }
            for (k, x) in m {
                cur.push(format!("f:{k}"));
                if !stripped(cur) {
                    collect_fields(x, kind, &child_path(dotted, k), cur, out, created);
                }
                cur.pop();
            }
        }
        Value::Array(a) if !cur.is_empty() => match list_kind(kind, dotted) {
            ListKind::Atomic => {
                out.paths.insert(cur.clone());
            }
            ListKind::Set => {
                if created {
                    out.paths.insert(cur.clone());
                }
                for x in a {
                    cur.push(format!("v:{x}"));
                    out.paths.insert(cur.clone());
                    cur.pop();
                }
            }
            ListKind::Map(key) => {
                if created {
                    out.paths.insert(cur.clone());
                }
                for x in a {
                    if let Some(ke) = key_element(x, key) {
                        cur.push(ke);
                        out.paths.insert(cur.clone());
                        collect_fields(x, kind, dotted, cur, out, created);
                        cur.pop();
                    }
                }
            }
        },
        _ => {
            if !cur.is_empty() {
                out.paths.insert(cur.clone());
            }
        }
    }
}

impl FieldSet {
    /// The fields set in `v` (an object of `kind`): leaves, list elements and set values.
    pub fn of(v: &Value, kind: &str) -> FieldSet {
        let mut out = FieldSet::default();
        collect_fields(v, kind, "", &mut Vec::new(), &mut out, false);
        out
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// Encode as fieldsV1 JSON.
    pub fn to_fields_v1(&self) -> Value {
        #[derive(Default)]
        struct Node {
            member: bool,
            children: BTreeMap<String, Node>,
        }
        let mut root = Node::default();
        for p in &self.paths {
            let mut n = &mut root;
            for e in p {
                n = n.children.entry(e.clone()).or_default();
            }
            n.member = true;
        }
        fn enc(n: &Node) -> Value {
            let mut m = Map::new();
            if n.member && !n.children.is_empty() {
                m.insert(".".into(), Value::Object(Map::new()));
            }
            for (k, c) in &n.children {
                m.insert(k.clone(), enc(c));
            }
            Value::Object(m)
        }
        enc(&root)
    }

    /// Decode fieldsV1 JSON.
    pub fn from_fields_v1(v: &Value) -> FieldSet {
        fn dec(v: &Value, cur: &mut FieldPath, out: &mut FieldSet) {
            let Some(m) = v.as_object() else { return };
            if (m.is_empty() || m.contains_key(".")) && !cur.is_empty() {
                out.paths.insert(cur.clone());
            }
            for (k, c) in m {
                if k == "." {
                    continue;
                }
                cur.push(k.clone());
                dec(c, cur, out);
                cur.pop();
            }
        }
        let mut out = FieldSet::default();
        dec(v, &mut Vec::new(), &mut out);
        out
    }
}

/// Upstream's printed form of a field path: `.data.key`, `.status.conditions[type="Ready"]`.
pub fn path_string(p: &[PathElement]) -> String {
    let mut s = String::new();
    for e in p {
        if let Some(f) = e.strip_prefix("f:") {
            s.push('.');
            s.push_str(f);
        } else if let Some(k) = e.strip_prefix("k:") {
            let parts: Vec<String> = match serde_json::from_str::<Value>(k) {
                Ok(Value::Object(m)) => m.iter().map(|(k, v)| format!("{k}={v}")).collect(),
                _ => vec![k.to_string()],
            };
            s.push('[');
            s.push_str(&parts.join(","));
            s.push(']');
        } else if let Some(v) = e.strip_prefix("v:") {
            s.push_str(&format!("[={v}]"));
        } else if let Some(i) = e.strip_prefix("i:") {
            s.push_str(&format!("[{i}]"));
        }
    }
    s
}

/// The value at field path `p` in `obj`, if present.
pub fn value_at<'a>(obj: &'a Value, p: &[PathElement]) -> Option<&'a Value> {
    let mut cur = obj;
    for e in p {
        cur = if let Some(f) = e.strip_prefix("f:") {
            cur.as_object()?.get(f)?
        } else if let Some(k) = e.strip_prefix("k:") {
            let want: Map<String, Value> = serde_json::from_str(k).ok()?;
            cur.as_array()?.iter().find(|el| {
                want.iter()
                    .all(|(wk, wv)| el.as_object().and_then(|m| m.get(wk)) == Some(wv))
            })?
        } else if let Some(v) = e.strip_prefix("v:") {
            let want: Value = serde_json::from_str(v).ok()?;
            cur.as_array()?.iter().find(|el| **el == want)?
        } else if let Some(i) = e.strip_prefix("i:") {
            cur.as_array()?.get(i.parse::<usize>().ok()?)?
        } else {
            return None;
        };
    }
    Some(cur)
}

/// Remove the field at path `p` from `obj` (no-op when absent).
pub fn remove_at(obj: &mut Value, p: &[PathElement]) {
    let Some((last, parent)) = p.split_last() else {
        return;
    };
    let mut cur = obj;
    for e in parent {
        let next = if let Some(f) = e.strip_prefix("f:") {
            cur.as_object_mut().and_then(|m| m.get_mut(f))
        } else {
            let idx = index_of(cur, e);
            match (idx, cur.as_array_mut()) {
                (Some(i), Some(a)) => a.get_mut(i),
                _ => None,
            }
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    if let Some(f) = last.strip_prefix("f:") {
        if let Some(m) = cur.as_object_mut() {
            m.shift_remove(f);
        }
    } else if let Some(i) = index_of(cur, last)
        && let Some(a) = cur.as_array_mut()
    {
        a.remove(i);
    }
}

fn index_of(list: &Value, e: &str) -> Option<usize> {
    let a = list.as_array()?;
    if let Some(k) = e.strip_prefix("k:") {
        let want: Map<String, Value> = serde_json::from_str(k).ok()?;
        a.iter().position(|el| {
            want.iter()
                .all(|(wk, wv)| el.as_object().and_then(|m| m.get(wk)) == Some(wv))
        })
    } else if let Some(v) = e.strip_prefix("v:") {
        let want: Value = serde_json::from_str(v).ok()?;
        a.iter().position(|el| *el == want)
    } else if let Some(i) = e.strip_prefix("i:") {
        i.parse::<usize>().ok().filter(|i| *i < a.len())
    } else {
        None
    }
}

/// The member paths of `new` whose value differs from `old` (or is absent there).
pub fn changed_fields(old: &Value, new: &Value, kind: &str) -> FieldSet {
    let mut out = FieldSet::default();
    diff_changed(Some(old), new, kind, "", &mut Vec::new(), &mut out);
    out
}

/// The member paths of `old` that are gone from `new`.
pub fn removed_fields(old: &Value, new: &Value, kind: &str) -> FieldSet {
    let mut out = FieldSet::default();
    diff_gone(old, Some(new), kind, "", &mut Vec::new(), &mut out);
    out
}

fn find_by_key<'a>(list: Option<&'a Value>, el: &Value, key: &str) -> Option<&'a Value> {
    let kv = key_of(el, key)?;
    list.and_then(Value::as_array)?
        .iter()
        .find(|o| key_of(o, key) == Some(kv))
}

fn diff_changed(
    old: Option<&Value>,
    new: &Value,
    kind: &str,
    dotted: &str,
    cur: &mut FieldPath,
    out: &mut FieldSet,
) {
    if old == Some(new) {
        // Nothing below changed: no need to walk it (most of an object, most writes).
        return;
    }
    match new {
        Value::Object(_) if is_atomic_struct(kind, dotted) => {
            if old != Some(new) {
                out.paths.insert(cur.clone());
            }
        }
        Value::Object(m) if !m.is_empty() => {
            let om = old.and_then(Value::as_object);
            if om.is_none() && is_map_field(kind, dotted) {
                out.paths.insert(cur.clone());
            }
            for (k, nv) in m {
                cur.push(format!("f:{k}"));
                if !stripped(cur) {
                    diff_changed(
                        om.and_then(|o| o.get(k)),
                        nv,
                        kind,
                        &child_path(dotted, k),
                        cur,
                        out,
                    );
                }
                cur.pop();
            }
        }
        Value::Array(a) if !cur.is_empty() => match list_kind(kind, dotted) {
            ListKind::Atomic => {
                if old != Some(new) {
                    out.paths.insert(cur.clone());
                }
            }
            ListKind::Set => {
                let oa = old.and_then(Value::as_array);
                if oa.is_none() {
                    out.paths.insert(cur.clone());
                }
                for x in a {
                    if !oa.is_some_and(|oa| oa.contains(x)) {
                        cur.push(format!("v:{x}"));
                        out.paths.insert(cur.clone());
                        cur.pop();
                    }
                }
            }
            ListKind::Map(key) => {
                if old.and_then(Value::as_array).is_none() {
                    out.paths.insert(cur.clone());
                }
                for x in a {
                    let Some(ke) = key_element(x, key) else {
                        continue;
                    };
                    cur.push(ke);
                    match find_by_key(old, x, key) {
                        Some(o) => diff_changed(Some(o), x, kind, dotted, cur, out),
                        None => {
                            out.paths.insert(cur.clone());
                            collect_fields(x, kind, dotted, cur, out, true);
                        }
                    }
                    cur.pop();
                }
            }
        },
        _ => {
            if !cur.is_empty() && old != Some(new) {
                out.paths.insert(cur.clone());
            }
        }
    }
}

fn diff_gone(
    old: &Value,
    new: Option<&Value>,
    kind: &str,
    dotted: &str,
    cur: &mut FieldPath,
    out: &mut FieldSet,
) {
    if new == Some(old) {
        // Nothing below is gone.
        return;
    }
    match old {
        Value::Object(m) if !m.is_empty() => {
            let nm = new.and_then(Value::as_object);
            for (k, ov) in m {
                cur.push(format!("f:{k}"));
                if !stripped(cur) {
                    match nm.and_then(|n| n.get(k)) {
                        Some(nv) => diff_gone(ov, Some(nv), kind, &child_path(dotted, k), cur, out),
                        None => collect_fields(ov, kind, &child_path(dotted, k), cur, out, true),
                    }
                }
                cur.pop();
            }
        }
        Value::Array(a) if !cur.is_empty() => match list_kind(kind, dotted) {
            ListKind::Atomic => {
                if new.is_none() {
                    out.paths.insert(cur.clone());
                }
            }
            ListKind::Set => {
                let na = new.and_then(Value::as_array);
                for x in a {
                    if !na.is_some_and(|na| na.contains(x)) {
                        cur.push(format!("v:{x}"));
                        out.paths.insert(cur.clone());
                        cur.pop();
                    }
                }
            }
            ListKind::Map(key) => {
                for x in a {
                    let Some(ke) = key_element(x, key) else {
                        continue;
                    };
                    cur.push(ke);
                    match find_by_key(new, x, key) {
                        Some(n) => diff_gone(x, Some(n), kind, dotted, cur, out),
                        None => {
                            out.paths.insert(cur.clone());
                            collect_fields(x, kind, dotted, cur, out, true);
                        }
                    }
                    cur.pop();
                }
            }
        },
        _ => {
            if !cur.is_empty() && new.is_none() {
                out.paths.insert(cur.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn field_sets_round_trip() {
        let obj = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n", "labels": {"a": "1"}, "finalizers": ["f"]},
            "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        });
        let fs = FieldSet::of(&obj, "Node");
        let v1 = fs.to_fields_v1();
        assert_eq!(
            v1,
            json!({
                "f:metadata": {"f:finalizers": {"v:\"f\"": {}}, "f:labels": {"f:a": {}}},
                "f:spec": {"f:taints": {}},
                "f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}, "f:type": {}}}}
            })
        );
        assert_eq!(FieldSet::from_fields_v1(&v1), fs);
        let p: FieldPath = vec![
            "f:status".into(),
            "f:conditions".into(),
            "k:{\"type\":\"Ready\"}".into(),
            "f:status".into(),
        ];
        assert_eq!(path_string(&p), ".status.conditions[type=\"Ready\"].status");
        assert_eq!(value_at(&obj, &p), Some(&json!("True")));
        let mut o2 = obj.clone();
        remove_at(&mut o2, &p[..3]);
        assert_eq!(o2["status"]["conditions"], json!([]));
    }

    #[test]
    fn changed_and_removed() {
        let old = json!({"data": {"a": "1", "b": "2"}});
        let new = json!({"data": {"a": "1", "b": "3", "c": "4"}});
        let ch = changed_fields(&old, &new, "ConfigMap");
        let strs: Vec<String> = ch.paths.iter().map(|p| path_string(p)).collect();
        assert_eq!(strs, vec![".data.b", ".data.c"]);
        // Lists: elements by key, set values, atomic lists.
        let old_n = json!({"metadata": {"finalizers": ["a"]}, "spec": {"taints": [{"key": "k"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "X", "status": "1"}]}});
        let new_n = json!({"metadata": {"finalizers": ["a", "b"]}, "spec": {"taints": [{"key": "k"}]},
            "status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "Y", "status": "2"}]}});
        let ch: Vec<String> = changed_fields(&old_n, &new_n, "Node")
            .paths
            .iter()
            .map(|p| path_string(p))
            .collect();
        assert_eq!(
            ch,
            vec![
                ".metadata.finalizers[=\"b\"]",
                ".status.conditions[type=\"Ready\"].status",
                ".status.conditions[type=\"Y\"]",
                ".status.conditions[type=\"Y\"].status",
                ".status.conditions[type=\"Y\"].type",
            ]
        );
        let rm: Vec<String> = removed_fields(&old_n, &new_n, "Node")
            .paths
            .iter()
            .map(|p| path_string(p))
            .collect();
        assert_eq!(
            rm,
            vec![
                ".status.conditions[type=\"X\"]",
                ".status.conditions[type=\"X\"].status",
                ".status.conditions[type=\"X\"].type",
            ]
        );
        let rm = removed_fields(&new, &old, "ConfigMap");
        let strs: Vec<String> = rm.paths.iter().map(|p| path_string(p)).collect();
        assert_eq!(strs, vec![".data.c"]);
    }
}
