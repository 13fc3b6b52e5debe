//! Strategic merge patch: maps merge, lists by their [`ListKind`], and the directives
//! (`$patch`, `$retainKeys`, `$deleteFromPrimitiveList/`, `$setElementOrder/`) as
//! k8s.io/apimachinery/pkg/util/strategicpatch applies them.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::{ListKind, PatchError, child_path, key_of, list_kind};

const DIRECTIVE: &str = "$patch";

const RETAIN_KEYS: &str = "$retainKeys";

const DELETE_PRIMITIVE: &str = "$deleteFromPrimitiveList/";

const SET_ORDER: &str = "$setElementOrder/";

/// Remove directives and nulls from a value that is being added as a whole.
fn clean(v: &Value) -> Option<Value> {
    match v {
        Value::Object(m) => {
            if m.get(DIRECTIVE).and_then(Value::as_str) == Some("delete") {
                return None;
            }
            let mut out = Map::new();
            for (k, x) in m {
                if k == DIRECTIVE
                    || k == RETAIN_KEYS
                    || k.starts_with(DELETE_PRIMITIVE)
                    || k.starts_with(SET_ORDER)
                    || x.is_null()
                {
                    continue;
                }
                if let Some(c) = clean(x) {
                    out.insert(k.clone(), c);
                }
            }
            Some(Value::Object(out))
        }
        Value::Array(a) => Some(Value::Array(
            a.iter()
                .filter(|x| {
                    !(x.get(DIRECTIVE).and_then(Value::as_str) == Some("replace")
                        && x.as_object().is_some_and(|m| m.len() == 1))
                })
                .filter_map(clean)
                .collect(),
        )),
        other => Some(other.clone()),
    }
}

/// Apply a strategic merge patch to `original` (an object of `kind`).
pub fn strategic_merge(original: &Value, patch: &Value, kind: &str) -> Result<Value, PatchError> {
    let Value::Object(pm) = patch else {
        return Err(PatchError::BadRequest(
            "json: cannot unmarshal array into Go value of type map[string]interface {}".into(),
        ));
    };
    let mut out = match original {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    match smp_map(&mut out, pm, "", kind)? {
        MapOutcome::Keep => Ok(Value::Object(out)),
        MapOutcome::Delete => Ok(Value::Object(Map::new())),
    }
}

enum MapOutcome {
    Keep,
    Delete,
}

fn smp_map(
    orig: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    path: &str,
    kind: &str,
) -> Result<MapOutcome, PatchError> {
    if let Some(d) = patch.get(DIRECTIVE) {
        match d.as_str() {
            Some("delete") => return Ok(MapOutcome::Delete),
            Some("replace") => {
                if let Some(Value::Object(m)) = clean(&Value::Object(patch.clone())) {
                    *orig = m;
                }
                return Ok(MapOutcome::Keep);
            }
            Some("merge") => {}
            _ => {
                return Err(PatchError::Internal(format!(
                    "unknown patch type: {d} in map: {}",
                    Value::Object(patch.clone())
                )));
            }
        }
    }
    let mut orders: Vec<(String, Vec<Value>)> = Vec::new();
    for (k, pv) in patch {
        if k == DIRECTIVE || k == RETAIN_KEYS {
            continue;
        }
        if let Some(field) = k.strip_prefix(DELETE_PRIMITIVE) {
            let Value::Array(del) = pv else {
                return Err(PatchError::BadRequest(
                    "invalid patch format of primitive list".into(),
                ));
            };
            if let Some(Value::Array(a)) = orig.get_mut(field) {
                a.retain(|x| !del.contains(x));
            }
            continue;
        }
        if let Some(field) = k.strip_prefix(SET_ORDER) {
            let Value::Array(order) = pv else {
                return Err(PatchError::BadRequest(
                    "invalid patch format of setElementOrder list".into(),
                ));
            };
            orders.push((field.to_string(), order.clone()));
            continue;
        }
        let cp = child_path(path, k);
        match pv {
            Value::Null => {
                orig.shift_remove(k);
            }
            Value::Object(pm) => match orig.get_mut(k) {
                Some(Value::Object(om)) => {
                    if let MapOutcome::Delete = smp_map(om, pm, &cp, kind)? {
                        orig.shift_remove(k);
                    }
                }
                _ => match clean(pv) {
                    Some(c) => {
                        orig.insert(k.clone(), c);
                    }
                    None => {
                        orig.shift_remove(k);
                    }
                },
            },
            Value::Array(pa) => {
                let merged = match (list_kind(kind, &cp), orig.get(k)) {
                    (ListKind::Map(key), Some(Value::Array(oa))) => {
                        merge_list_by_key(oa, pa, key, &cp, kind)?
                    }
                    (ListKind::Map(key), _) => merge_list_by_key(&[], pa, key, &cp, kind)?,
                    (ListKind::Set, Some(Value::Array(oa))) => {
                        let mut out = oa.clone();
                        for x in pa {
                            if !out.contains(x) {
                                out.push(x.clone());
                            }
                        }
                        // Upstream returns a scalar list's merge at once, unordered.
                        out
                    }
                    _ => match clean(pv) {
                        Some(Value::Array(a)) => a,
                        _ => Vec::new(),
                    },
                };
                orig.insert(k.clone(), Value::Array(merged));
            }
            scalar => {
                orig.insert(k.clone(), scalar.clone());
            }
        }
    }
    for (field, order) in orders {
        let cp = child_path(path, &field);
        if let Some(Value::Array(a)) = orig.get_mut(&field) {
            reorder(a, &order, list_kind(kind, &cp));
        }
    }
    if let Some(rk) = patch.get(RETAIN_KEYS) {
        let Value::Array(keep) = rk else {
            return Err(PatchError::BadRequest(
                "invalid patch format of retainKeys".into(),
            ));
        };
        let keep: BTreeSet<&str> = keep.iter().filter_map(Value::as_str).collect();
        orig.retain(|k, _| keep.contains(k.as_str()));
    }
    Ok(MapOutcome::Keep)
}

fn merge_list_by_key(
    orig: &[Value],
    patch: &[Value],
    key: &'static str,
    path: &str,
    kind: &str,
) -> Result<Vec<Value>, PatchError> {
    if patch.iter().any(|e| {
        e.get(DIRECTIVE).and_then(Value::as_str) == Some("replace")
            && e.as_object().is_some_and(|m| m.len() == 1)
    }) {
        return match clean(&Value::Array(patch.to_vec())) {
            Some(Value::Array(a)) => Ok(a),
            _ => Ok(Vec::new()),
        };
    }
    let mut out: Vec<Value> = orig.to_vec();
    let same = |a: &Value, b: &Value| key_of(a, key).is_some() && key_of(a, key) == key_of(b, key);
    // The patch's elements without the deletions: the order the merged list follows.
    let order: Vec<Value> = patch
        .iter()
        .filter(|e| e.get(DIRECTIVE).and_then(Value::as_str) != Some("delete"))
        .cloned()
        .collect();
    for pe in patch {
        let Value::Object(pm) = pe else {
            // A scalar in a list of maps: upstream's merge fails.
            return Err(PatchError::Internal(format!(
                "unable to find api field in struct for the list element {pe}"
            )));
        };
        let Some(kv) = pm.get(key) else {
            return Err(PatchError::Internal(format!(
                "map: {} does not contain declared merge key: {key}",
                go_map_string(pm)
            )));
        };
        let pos = out.iter().position(|o| key_of(o, key) == Some(kv));
        if pm.get(DIRECTIVE).and_then(Value::as_str) == Some("delete") {
            out.retain(|o| key_of(o, key) != Some(kv));
            continue;
        }
        match pos {
            Some(i) => {
                if let Value::Object(om) = &mut out[i] {
                    if let MapOutcome::Delete = smp_map(om, pm, path, kind)? {
                        out.remove(i);
                    }
                } else if let Some(c) = clean(pe) {
                    out[i] = c;
                }
            }
            None => {
                if let Some(c) = clean(pe) {
                    out.push(c);
                }
            }
        }
    }
    Ok(enforce_order(out, &order, orig, same))
}

/// The order of a merged list, as upstream's `mergeSlice` enforces it: the elements the
/// patch names in the patch's order, the others in the original's, interleaved so that
/// an element the patch names goes before the server's elements unless both are in the
/// original and the server's came first there (`normalizeElementOrder`,
/// `mergeSortedSlice`). So a new element goes first, and elements that both sides have
/// keep their places.
fn enforce_order(
    merged: Vec<Value>,
    patch: &[Value],
    original: &[Value],
    same: impl Fn(&Value, &Value) -> bool,
) -> Vec<Value> {
    if patch.is_empty() {
        return merged;
    }
    let index = |list: &[Value], v: &Value| list.iter().position(|x| same(x, v));
    let (mut named, mut server): (Vec<Value>, Vec<Value>) =
        merged.into_iter().partition(|m| index(patch, m).is_some());
    named.sort_by_key(|v| index(patch, v));
    server.sort_by_key(|v| index(original, v));
    let mut out = Vec::with_capacity(named.len() + server.len());
    let (mut left, mut right) = (server.into_iter().peekable(), named.into_iter().peekable());
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => match (index(original, l), index(original, r)) {
                (Some(li), Some(ri)) => li < ri,
                _ => false,
            },
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    out
}

fn go_map_string(m: &Map<String, Value>) -> String {
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    let parts: Vec<String> = keys
        .iter()
        .map(|k| {
            let v = &m[*k];
            let s = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            format!("{k}:{s}")
        })
        .collect();
    format!("map[{}]", parts.join(" "))
}

fn reorder(a: &mut Vec<Value>, order: &[Value], lk: ListKind) {
    let matches = |el: &Value, o: &Value| match lk {
        ListKind::Map(key) => key_of(el, key).is_some() && key_of(el, key) == key_of(o, key),
        _ => el == o,
    };
    let mut ordered: Vec<Value> = Vec::with_capacity(a.len());
    let mut rest: Vec<Value> = Vec::new();
    let mut taken = vec![false; a.len()];
    for o in order {
        if let Some(i) = a
            .iter()
            .enumerate()
            .position(|(i, el)| !taken[i] && matches(el, o))
        {
            taken[i] = true;
            ordered.push(a[i].clone());
        }
    }
    for (i, el) in a.iter().enumerate() {
        if !taken[i] {
            rest.push(el.clone());
        }
    }
    ordered.extend(rest);
    *a = ordered;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn smp_maps_and_nulls() {
        let o = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "data": {"k": "v"}});
        let p = json!({"metadata": {"labels": {"a": null, "c": "3"}}, "data": {"$patch": "replace", "n": "1"}});
        let r = strategic_merge(&o, &p, "ConfigMap").unwrap();
        assert_eq!(r["metadata"]["labels"], json!({"b": "2", "c": "3"}));
        assert_eq!(r["data"], json!({"n": "1"}));
        let r = strategic_merge(&o, &json!({"data": {"$patch": "delete"}}), "ConfigMap").unwrap();
        assert!(r.get("data").is_none());
    }

    #[test]
    fn smp_conditions_by_type() {
        let o = json!({"status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady"},
            {"type": "MemoryPressure", "status": "False"}
        ]}});
        let p = json!({"status": {"conditions": [
            {"type": "Ready", "status": "False"},
            {"type": "ConfigApplied", "status": "True"}
        ]}});
        let r = strategic_merge(&o, &p, "Node").unwrap();
        // Upstream's order: Ready keeps its place before MemoryPressure; the new
        // condition comes before the server's MemoryPressure, after the patch's Ready.
        assert_eq!(
            r["status"]["conditions"],
            json!([
                {"type": "Ready", "status": "False", "reason": "KubeletReady"},
                {"type": "ConfigApplied", "status": "True"},
                {"type": "MemoryPressure", "status": "False"}
            ])
        );
        // Delete one element by key.
        let p = json!({"status": {"conditions": [{"type": "MemoryPressure", "$patch": "delete"}]}});
        let r = strategic_merge(&o, &p, "Node").unwrap();
        assert_eq!(r["status"]["conditions"].as_array().unwrap().len(), 1);
        // Replace the whole list.
        let p = json!({"status": {"conditions": [{"$patch": "replace"}, {"type": "X", "status": "True"}]}});
        let r = strategic_merge(&o, &p, "Node").unwrap();
        assert_eq!(
            r["status"]["conditions"],
            json!([{"type": "X", "status": "True"}])
        );
        // Missing merge key is an error (500 upstream).
        let p = json!({"status": {"conditions": [{"status": "True"}]}});
        let e = strategic_merge(&o, &p, "Node").unwrap_err();
        assert_eq!(
            e,
            PatchError::Internal(
                "map: map[status:True] does not contain declared merge key: type".into()
            )
        );
        // The same list on a kind without a merge key is replaced.
        let r = strategic_merge(
            &o,
            &json!({"status": {"conditions": [{"a": 1}]}}),
            "ConfigMap",
        )
        .unwrap();
        assert_eq!(r["status"]["conditions"], json!([{"a": 1}]));
    }

    #[test]
    fn smp_addresses_owner_refs_finalizers_taints() {
        let o = json!({
            "metadata": {"finalizers": ["a"], "ownerReferences": [{"uid": "1", "name": "x"}]},
            "spec": {"taints": [{"key": "k1", "effect": "NoSchedule"}]},
            "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}
        });
        let p = json!({
            "metadata": {"finalizers": ["b", "a"], "ownerReferences": [{"uid": "2", "name": "y"}],
                         "$deleteFromPrimitiveList/finalizers": ["a"]},
            "spec": {"taints": [{"key": "k2", "effect": "NoExecute"}]},
            "status": {"addresses": [{"type": "Hostname", "address": "n1"}, {"type": "InternalIP", "address": "10.0.0.2"}]}
        });
        let r = strategic_merge(&o, &p, "Node").unwrap();
        assert_eq!(r["metadata"]["finalizers"], json!(["b"]));
        assert_eq!(
            r["metadata"]["ownerReferences"].as_array().unwrap().len(),
            2
        );
        // NodeSpec.taints has no patch strategy upstream: replaced.
        assert_eq!(
            r["spec"]["taints"],
            json!([{"key": "k2", "effect": "NoExecute"}])
        );
        // In the patch's order (upstream's `normalizeElementOrder`).
        assert_eq!(
            r["status"]["addresses"],
            json!([
                {"type": "Hostname", "address": "n1"},
                {"type": "InternalIP", "address": "10.0.0.2"}
            ])
        );
    }

    #[test]
    fn smp_puts_new_elements_first_and_keeps_existing_ones_in_place() {
        // As a v1.36 API server orders a Node's conditions (tests/tests/api_parity.rs).
        let o = json!({"status": {"conditions": [{"type": "Ready"}]}});
        let r = strategic_merge(
            &o,
            &json!({"status": {"conditions": [{"type": "Mine", "status": "True"}]}}),
            "Node",
        )
        .unwrap();
        let types = |r: &Value| -> Vec<String> {
            r["status"]["conditions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["type"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(types(&r), ["Mine", "Ready"]);
        let r = strategic_merge(
            &r,
            &json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
            "Node",
        )
        .unwrap();
        assert_eq!(types(&r), ["Mine", "Ready"]);
        let r = strategic_merge(
            &r,
            &json!({"status": {"conditions": [{"type": "A"}, {"type": "B"}]}}),
            "Node",
        )
        .unwrap();
        assert_eq!(types(&r), ["A", "B", "Mine", "Ready"]);
        // Not sets of scalars: those append what is new (checked on a v1.36 server).
        let r = strategic_merge(
            &json!({"metadata": {"finalizers": ["a", "b"]}}),
            &json!({"metadata": {"finalizers": ["c", "b"]}}),
            "ConfigMap",
        )
        .unwrap();
        assert_eq!(r["metadata"]["finalizers"], json!(["a", "b", "c"]));
    }

    #[test]
    fn smp_set_element_order_and_retain_keys() {
        let o = json!({"status": {"conditions": [{"type": "A"}, {"type": "B"}]}, "spec": {"x": 1, "y": 2}});
        let p = json!({
            "status": {"$setElementOrder/conditions": [{"type": "B"}, {"type": "A"}]},
            "spec": {"$retainKeys": ["y", "z"], "z": 3}
        });
        let r = strategic_merge(&o, &p, "Node").unwrap();
        assert_eq!(
            r["status"]["conditions"],
            json!([{"type": "B"}, {"type": "A"}])
        );
        assert_eq!(r["spec"], json!({"y": 2, "z": 3}));
    }
}
