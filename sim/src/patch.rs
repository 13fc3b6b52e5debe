//! Patches and field ownership: JSON merge patch (RFC 7386), JSON patch (RFC 6902),
//! strategic merge patch (k8s.io/apimachinery/pkg/util/strategicpatch) for the list
//! strategies of the kinds we serve, and the field sets of server-side apply
//! (`metadata.managedFields`, fieldsV1) with conflict detection.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

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
        ("Node" | "Namespace" | "Pod", "status.conditions") => ListKind::Map("type"),
        ("Node", "status.addresses") => ListKind::Map("type"),
        ("Node", "spec.podCIDRs") => ListKind::Set,
        ("Pod", "spec.containers" | "spec.initContainers" | "spec.volumes") => {
            ListKind::Map("name")
        }
        ("Pod", "status.containerStatuses" | "status.initContainerStatuses") => ListKind::Atomic,
        _ => ListKind::Atomic,
    }
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

// ---------------------------------------------------------------------------------
// JSON merge patch (RFC 7386)

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

// ---------------------------------------------------------------------------------
// JSON patch (RFC 6902)

fn parse_pointer(path: &str) -> Result<Vec<String>, PatchError> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    if !path.starts_with('/') {
        return Err(PatchError::Unprocessable(format!(
            "invalid JSON pointer: {path:?}"
        )));
    }
    Ok(path[1..]
        .split('/')
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect())
}

fn parent_mut<'a>(doc: &'a mut Value, tokens: &[String]) -> Result<&'a mut Value, PatchError> {
    let mut cur = doc;
    for t in tokens {
        cur = match cur {
            Value::Object(m) => m.get_mut(t),
            Value::Array(a) => t.parse::<usize>().ok().and_then(move |i| a.get_mut(i)),
            _ => None,
        }
        .ok_or_else(|| PatchError::Unprocessable(format!("doc is missing path: {t}")))?;
    }
    Ok(cur)
}

fn array_index(tok: &str, len: usize, allow_end: bool) -> Result<usize, PatchError> {
    if allow_end && tok == "-" {
        return Ok(len);
    }
    let i: usize = tok
        .parse()
        .map_err(|_| PatchError::Unprocessable(format!("invalid index: {tok}")))?;
    if i > len || (!allow_end && i == len) {
        return Err(PatchError::Unprocessable(format!(
            "Unable to access invalid index: {i}"
        )));
    }
    Ok(i)
}

fn pointer_get(doc: &Value, path: &str) -> Result<Value, PatchError> {
    let toks = parse_pointer(path)?;
    let mut cur = doc;
    for t in &toks {
        cur = match cur {
            Value::Object(m) => m.get(t),
            Value::Array(a) => t.parse::<usize>().ok().and_then(|i| a.get(i)),
            _ => None,
        }
        .ok_or_else(|| PatchError::Unprocessable(format!("doc is missing path: {path}")))?;
    }
    Ok(cur.clone())
}

fn pointer_add(doc: &mut Value, path: &str, value: Value) -> Result<(), PatchError> {
    let toks = parse_pointer(path)?;
    let Some((last, parent)) = toks.split_last() else {
        *doc = value;
        return Ok(());
    };
    match parent_mut(doc, parent)? {
        Value::Object(m) => {
            m.insert(last.clone(), value);
            Ok(())
        }
        Value::Array(a) => {
            let i = array_index(last, a.len(), true)?;
            a.insert(i, value);
            Ok(())
        }
        _ => Err(PatchError::Unprocessable(format!(
            "doc is missing path: {path}"
        ))),
    }
}

fn pointer_remove(doc: &mut Value, path: &str) -> Result<Value, PatchError> {
    let toks = parse_pointer(path)?;
    let Some((last, parent)) = toks.split_last() else {
        return Err(PatchError::Unprocessable(
            "unable to remove the whole document".into(),
        ));
    };
    let missing = || PatchError::Unprocessable(format!("doc is missing path: {path}"));
    match parent_mut(doc, parent)? {
        Value::Object(m) => m.shift_remove(last).ok_or_else(missing),
        Value::Array(a) => {
            let i = array_index(last, a.len(), false)?;
            Ok(a.remove(i))
        }
        _ => Err(missing()),
    }
}

fn pointer_replace(doc: &mut Value, path: &str, value: Value) -> Result<(), PatchError> {
    let toks = parse_pointer(path)?;
    let Some((last, parent)) = toks.split_last() else {
        *doc = value;
        return Ok(());
    };
    let missing = || {
        PatchError::Unprocessable(format!(
            "replace operation does not apply: doc is missing key: {path}"
        ))
    };
    match parent_mut(doc, parent)? {
        Value::Object(m) => {
            let slot = m.get_mut(last).ok_or_else(missing)?;
            *slot = value;
            Ok(())
        }
        Value::Array(a) => {
            let i = array_index(last, a.len(), false)?;
            a[i] = value;
            Ok(())
        }
        _ => Err(missing()),
    }
}

/// Apply a JSON patch (an array of operations) to `doc`; on error `doc` is unchanged.
pub fn json_patch(doc: &mut Value, ops: &Value) -> Result<(), PatchError> {
    let mut work = doc.clone();
    json_patch_in_place(&mut work, ops)?;
    *doc = work;
    Ok(())
}

fn json_patch_in_place(doc: &mut Value, ops: &Value) -> Result<(), PatchError> {
    let Value::Array(ops) = ops else {
        return Err(PatchError::BadRequest(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch".into(),
        ));
    };
    if ops.len() > 10_000 {
        return Err(PatchError::BadRequest(format!(
            "The allowed maximum operations in a JSON patch is 10000, got {}",
            ops.len()
        )));
    }
    for op in ops {
        let s = |k: &str| op.get(k).and_then(Value::as_str);
        let kind = s("op").unwrap_or("");
        let path = s("path").ok_or_else(|| {
            PatchError::Unprocessable(format!("operation missing path field: {kind}"))
        });
        let value = || {
            op.get("value").cloned().ok_or_else(|| {
                PatchError::Unprocessable(format!("operation missing value field: {kind}"))
            })
        };
        match kind {
            "add" => pointer_add(doc, path?, value()?)?,
            "remove" => {
                pointer_remove(doc, path?)?;
            }
            "replace" => pointer_replace(doc, path?, value()?)?,
            "move" => {
                let from = s("from").ok_or_else(|| {
                    PatchError::Unprocessable("operation missing from field: move".into())
                })?;
                let v = pointer_remove(doc, from)?;
                pointer_add(doc, path?, v)?;
            }
            "copy" => {
                let from = s("from").ok_or_else(|| {
                    PatchError::Unprocessable("operation missing from field: copy".into())
                })?;
                let v = pointer_get(doc, from)?;
                pointer_add(doc, path?, v)?;
            }
            "test" => {
                let path = path?;
                let want = value()?;
                let got = pointer_get(doc, path).unwrap_or(Value::Null);
                if got != want {
                    return Err(PatchError::Unprocessable(format!(
                        "testing value {path} failed: test failed"
                    )));
                }
            }
            other => {
                return Err(PatchError::Unprocessable(format!(
                    "Unexpected kind: {other}"
                )));
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------
// Strategic merge patch

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

fn key_of<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.as_object().and_then(|m| m.get(key))
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
    Ok(out)
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

// ---------------------------------------------------------------------------------
// Field sets (managedFields fieldsV1)

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

fn collect_fields(v: &Value, kind: &str, dotted: &str, cur: &mut FieldPath, out: &mut FieldSet) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                cur.push(format!("f:{k}"));
                if !stripped(cur) {
                    collect_fields(x, kind, &child_path(dotted, k), cur, out);
                }
                cur.pop();
            }
        }
        Value::Array(a) if !cur.is_empty() => match list_kind(kind, dotted) {
            ListKind::Atomic => {
                out.paths.insert(cur.clone());
            }
            ListKind::Set => {
                for x in a {
                    cur.push(format!("v:{x}"));
                    out.paths.insert(cur.clone());
                    cur.pop();
                }
            }
            ListKind::Map(key) => {
                for x in a {
                    if let Some(ke) = key_element(x, key) {
                        cur.push(ke);
                        out.paths.insert(cur.clone());
                        collect_fields(x, kind, dotted, cur, out);
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
        collect_fields(v, kind, "", &mut Vec::new(), &mut out);
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
    match new {
        Value::Object(m) if !m.is_empty() => {
            let om = old.and_then(Value::as_object);
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
                for x in a {
                    if !oa.is_some_and(|oa| oa.contains(x)) {
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
                    match find_by_key(old, x, key) {
                        Some(o) => diff_changed(Some(o), x, kind, dotted, cur, out),
                        None => {
                            out.paths.insert(cur.clone());
                            collect_fields(x, kind, dotted, cur, out);
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
    match old {
        Value::Object(m) if !m.is_empty() => {
            let nm = new.and_then(Value::as_object);
            for (k, ov) in m {
                cur.push(format!("f:{k}"));
                if !stripped(cur) {
                    match nm.and_then(|n| n.get(k)) {
                        Some(nv) => diff_gone(ov, Some(nv), kind, &child_path(dotted, k), cur, out),
                        None => collect_fields(ov, kind, &child_path(dotted, k), cur, out),
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
                            collect_fields(x, kind, dotted, cur, out);
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
    fn json_patch_ops() {
        let mut d = json!({"metadata": {"labels": {"a": "1"}}, "list": [1, 2, 3]});
        json_patch(
            &mut d,
            &json!([
                {"op": "add", "path": "/metadata/labels/b", "value": "2"},
                {"op": "remove", "path": "/metadata/labels/a"},
                {"op": "replace", "path": "/list/0", "value": 9},
                {"op": "add", "path": "/list/-", "value": 4},
                {"op": "move", "from": "/list/1", "path": "/moved"},
                {"op": "copy", "from": "/metadata/labels", "path": "/copied"},
                {"op": "test", "path": "/moved", "value": 2},
                {"op": "add", "path": "/metadata/annotations", "value": {"x~y/z": "1"}},
                {"op": "test", "path": "/metadata/annotations/x~0y~1z", "value": "1"}
            ]),
        )
        .unwrap();
        assert_eq!(d["metadata"]["labels"], json!({"b": "2"}));
        assert_eq!(d["list"], json!([9, 3, 4]));
        assert_eq!(d["moved"], json!(2));
        assert_eq!(d["copied"], json!({"b": "2"}));
    }

    #[test]
    fn json_patch_failures() {
        let mut d = json!({"a": 1});
        let e = json_patch(&mut d, &json!([{"op": "test", "path": "/a", "value": 2}])).unwrap_err();
        assert!(matches!(e, PatchError::Unprocessable(_)));
        let e = json_patch(&mut d, &json!([{"op": "remove", "path": "/nope"}])).unwrap_err();
        assert!(matches!(e, PatchError::Unprocessable(_)));
        let e = json_patch(
            &mut d,
            &json!([{"op": "replace", "path": "/nope", "value": 1}]),
        )
        .unwrap_err();
        assert!(matches!(e, PatchError::Unprocessable(_)));
        let e =
            json_patch(&mut d, &json!([{"op": "add", "path": "/x/y", "value": 1}])).unwrap_err();
        assert!(matches!(e, PatchError::Unprocessable(_)));
        let e = json_patch(
            &mut d,
            &json!([{"op": "add", "path": "/b", "value": 1}, {"op": "frob", "path": "/a"}]),
        )
        .unwrap_err();
        assert_eq!(e, PatchError::Unprocessable("Unexpected kind: frob".into()));
        let e = json_patch(&mut d, &json!({"op": "add"})).unwrap_err();
        assert!(matches!(e, PatchError::BadRequest(_)));
        assert_eq!(
            d,
            json!({"a": 1}),
            "failed ops leave the document as it was before them"
        );
    }

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
        assert_eq!(
            r["status"]["conditions"],
            json!([
                {"type": "Ready", "status": "False", "reason": "KubeletReady"},
                {"type": "MemoryPressure", "status": "False"},
                {"type": "ConfigApplied", "status": "True"}
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
        assert_eq!(
            r["status"]["addresses"],
            json!([
                {"type": "InternalIP", "address": "10.0.0.2"},
                {"type": "Hostname", "address": "n1"}
            ])
        );
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
