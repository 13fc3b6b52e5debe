//! Gets and lists. A list shows the store at one resourceVersion: later pages, and an
//! `Exact` resourceVersion, undo from the history whatever changed since, so a page is
//! consistent with the first. Continue tokens are upstream's encoding (base64 of
//! `{"v":"meta.k8s.io/v1","rv":..,"start":..}`): an expired one gets upstream's 410.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::{Value, json};

use super::encoded::Selectable;
use super::events::{parse_field_selector_for, storage, user_error, view};
use super::{Key, SharedObject, Store, object_key};
use crate::error::ApiError;
use crate::resources::ResourceType;
use crate::selector::{FieldSelector, LabelSelector};

/// Options of a list request.
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    /// `labelSelector` query parameter.
    pub label_selector: Option<String>,
    /// `fieldSelector` query parameter.
    pub field_selector: Option<String>,
    /// `limit` query parameter.
    pub limit: Option<usize>,
    /// `continue` query parameter.
    pub continue_token: Option<String>,
    /// `resourceVersion` query parameter.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch` query parameter (`Exact`, `NotOlderThan`).
    pub resource_version_match: Option<String>,
}

/// One page of a list.
#[derive(Debug, Clone, Default)]
pub struct ListResult {
    /// Items, sorted by namespace then name, with kind and apiVersion filled in.
    pub items: Vec<Value>,
    /// `metadata.resourceVersion` of the list.
    pub resource_version: String,
    /// `metadata.continue`, when more items remain.
    pub continue_token: Option<String>,
    /// `metadata.remainingItemCount`, when more items remain and no selector was given.
    pub remaining_item_count: Option<u64>,
}

/// One page of a list whose items are shared with the store (no deep copy): see
/// [`Store::list_shared`].
#[derive(Debug, Clone, Default)]
pub struct SharedList {
    /// Items, sorted by namespace then name.
    pub items: Vec<SharedObject>,
    /// `metadata.resourceVersion` of the list.
    pub resource_version: String,
    /// `metadata.continue`, when more items remain.
    pub continue_token: Option<String>,
    /// `metadata.remainingItemCount`, when more items remain and no selector was given.
    pub remaining_item_count: Option<u64>,
}

const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.";

const LIST_EXPIRED: &str = "The resourceVersion for the provided list is too old.";

impl Store {
    /// The object `name` (in `ns`).
    pub fn get(&self, rt: &ResourceType, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
        let (srt, conv) = storage(rt);
        self.get_impl(srt, ns, name)
            .map(|v| view(rt, conv, v))
            .map_err(|e| user_error(rt, conv, e))
    }

    fn get_impl(&self, rt: &ResourceType, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
        let found = self.read().stored(rt, &object_key(rt, ns, name));
        match found {
            Some(o) => Ok(o.object()),
            None => Err(ApiError::not_found(rt, name)),
        }
    }

    /// The object `name` (in `ns`) as stored: its encoding, shared, nothing decoded
    /// (`None` if there is no such object). Events are in their core/v1 form.
    pub fn get_shared(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
    ) -> Option<SharedObject> {
        let (rt, _) = storage(rt);
        self.read().stored(rt, &object_key(rt, ns, name))
    }

    /// The names of every object of `rt` (in `ns`, for a namespaced kind; across
    /// namespaces without one), in list order.
    pub fn names(&self, rt: &ResourceType, ns: Option<&str>) -> Vec<String> {
        let (rt, _) = storage(rt);
        let st = self.read();
        let Some(table) = st.tables.get(&rt.key()) else {
            return Vec::new();
        };
        let ns = ns.filter(|n| rt.namespaced && !n.is_empty());
        table
            .objects
            .keys()
            .filter(|k| ns.is_none_or(|n| k.0 == n))
            .map(|k| k.1.clone())
            .collect()
    }

    /// A page of objects (deep copies).
    pub fn list(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        opts: &ListOptions,
    ) -> Result<ListResult, ApiError> {
        let shared = self.list_shared(rt, ns, opts)?;
        Ok(ListResult {
            items: shared.items.iter().map(SharedObject::object).collect(),
            resource_version: shared.resource_version,
            continue_token: shared.continue_token,
            remaining_item_count: shared.remaining_item_count,
        })
    }

    /// A page of objects shared with the store: no copy, and each item's JSON encoding
    /// ([`SharedObject::encoded`]) is the stored one.
    pub fn list_shared(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        opts: &ListOptions,
    ) -> Result<SharedList, ApiError> {
        let (srt, conv) = storage(rt);
        let mut list = self
            .list_impl(srt, conv, ns, opts)
            .map_err(|e| user_error(rt, conv, e))?;
        if conv {
            for item in list.items.iter_mut() {
                *item = SharedObject::new(&view(rt, conv, item.object()));
            }
        }
        Ok(list)
    }

    fn list_impl(
        &self,
        rt: &ResourceType,
        conv: bool,
        ns: Option<&str>,
        opts: &ListOptions,
    ) -> Result<SharedList, ApiError> {
        let label = parse_label_selector(opts.label_selector.as_deref())?;
        let field = parse_field_selector_for(rt, conv, opts.field_selector.as_deref())?;
        let ns = ns.filter(|n| rt.namespaced && !n.is_empty());
        let limit = opts.limit.filter(|l| *l > 0);
        let rv_param = opts.resource_version.as_deref().filter(|s| !s.is_empty());
        let token = opts.continue_token.as_deref().filter(|s| !s.is_empty());
        if token.is_some() && rv_param.is_some_and(|r| r != "0") {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        let st = self.read();
        let current = st.rv;
        let table = st
            .tables
            .get(&rt.key())
            .ok_or_else(|| ApiError::not_found(rt, ""))?;

        // Which resourceVersion the list shows, and where it starts.
        let (snapshot, start) = match token {
            Some(t) => {
                let (rv, start) = decode_continue(t)?;
                if table.too_old(rv) {
                    return Err(ApiError::gone(CONTINUE_EXPIRED));
                }
                (rv, Some(parse_key_string(start.trim_end_matches('\0'))))
            }
            None => match rv_param {
                None | Some("0") => (current, None),
                Some(r) => {
                    // A list answers a resourceVersion that is not a number with a 400
                    // (a get and a watch with a 500, see `parse_rv`).
                    let rv = parse_rv(r).map_err(|_| {
                        ApiError::bad_request(format!(
                            "invalid resource version: {}",
                            ApiError::invalid_resource_version_param(r)
                        ))
                    })?;
                    if rv > current {
                        return Err(ApiError::too_large_resource_version(rv, current));
                    }
                    let exact = match opts.resource_version_match.as_deref() {
                        Some("Exact") => true,
                        Some("NotOlderThan") => false,
                        // Legacy semantics: a resourceVersion with a limit is exact.
                        _ => limit.is_some(),
                    };
                    if exact {
                        if table.too_old(rv) {
                            return Err(ApiError::gone(LIST_EXPIRED));
                        }
                        (rv, None)
                    } else {
                        (current, None)
                    }
                }
            },
        };
        let inclusive_start = token.is_none();

        // Objects as they were at `snapshot`: undo every later change.
        let mut overrides: BTreeMap<&Key, Option<&SharedObject>> = BTreeMap::new();
        if snapshot < current {
            for ev in table.history.iter().rev() {
                if ev.rv <= snapshot {
                    break;
                }
                overrides.insert(&ev.key, ev.prev.as_ref());
            }
        }
        let in_scope = |k: &Key| -> bool {
            if let Some(n) = ns
                && k.0 != n
            {
                return false;
            }
            match &start {
                None => true,
                Some(s) => {
                    if inclusive_start {
                        k >= s
                    } else {
                        k > s
                    }
                }
            }
        };
        let selects = |k: &Key, o: &SharedObject| -> bool {
            Selectable::new(k, o).selected_by(&label, &field)
        };
        let no_selector = label.is_empty() && field.is_empty();

        let mut items: Vec<SharedObject> = Vec::new();
        let mut last_key: Option<Key> = None;
        let mut more = false;
        let mut remaining: u64 = 0;
        let range_start: Key = match (&start, ns) {
            (Some(s), _) => s.clone(),
            (None, Some(n)) => (n.to_string(), String::new()),
            (None, None) => (String::new(), String::new()),
        };
        let mut visit = |k: &Key, o: &SharedObject| -> bool {
            // Returns false to stop.
            if !in_scope(k) {
                return ns.is_none_or(|n| k.0.as_str() <= n);
            }
            if !selects(k, o) {
                return true;
            }
            if limit.is_some_and(|l| items.len() >= l) {
                more = true;
                remaining += 1;
                return no_selector;
            }
            items.push(o.clone());
            last_key = Some(k.clone());
            true
        };
        // The objects from `range_start` on, merged with the changes since the snapshot
        // (an object changed since reads as it was; one created since is left out; one
        // deleted since is back), in key order, without copying either: a page of a
        // paginated list costs the page (and a walk of the keys after it for the count of
        // the rest), not a sorted copy of the table per page (at 100,000 Nodes, a relist
        // in pages of 500 during a rollout cost 200 copies of 100,000 keys).
        let mut objects = table.objects.range(range_start.clone()..).peekable();
        let mut changed = overrides.range::<Key, _>(range_start..).peekable();
        loop {
            let next: (&Key, Option<&SharedObject>) = match (objects.peek(), changed.peek()) {
                (None, None) => break,
                (Some((ok, _)), Some((ck, _))) if *ok < **ck => {
                    let (k, o) = objects.next().expect("peeked");
                    (k, Some(o))
                }
                (Some((ok, _)), Some((ck, _))) if *ok == **ck => {
                    objects.next();
                    let (k, o) = changed.next().expect("peeked");
                    (*k, *o)
                }
                (Some(_), None) => {
                    let (k, o) = objects.next().expect("peeked");
                    (k, Some(o))
                }
                (_, Some(_)) => {
                    let (k, o) = changed.next().expect("peeked");
                    (*k, *o)
                }
            };
            if let (k, Some(o)) = next
                && !visit(k, o)
            {
                break;
            }
        }
        drop(st);
        let continue_token = if more {
            last_key.map(|k| encode_continue(snapshot, &format!("{}\0", key_string(&k))))
        } else {
            None
        };
        Ok(SharedList {
            items,
            resource_version: snapshot.to_string(),
            remaining_item_count: (more && no_selector).then_some(remaining),
            continue_token,
        })
    }
}

fn key_string(key: &Key) -> String {
    if key.0.is_empty() {
        key.1.clone()
    } else {
        format!("{}/{}", key.0, key.1)
    }
}

fn parse_key_string(s: &str) -> Key {
    match s.split_once('/') {
        Some((ns, name)) => (ns.to_string(), name.to_string()),
        None => (String::new(), s.to_string()),
    }
}

fn encode_continue(rv: u64, start: &str) -> String {
    let raw = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": start}).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn decode_continue(token: &str) -> Result<(u64, String), ApiError> {
    let bad = |e: String| {
        ApiError::bad_request(format!(
            "invalid continue token: continue key is not valid: {e}"
        ))
    };
    if let Some(at) = go_base64_error_offset(token) {
        return Err(bad(format!("illegal base64 data at input byte {at}")));
    }
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|e| bad(e.to_string()))?;
    let v: Value = serde_json::from_slice(&raw).map_err(|e| bad(e.to_string()))?;
    if v.get("v").and_then(Value::as_str) != Some("meta.k8s.io/v1") {
        return Err(bad("server does not recognize this encoded version".into()));
    }
    let rv = v.get("rv").and_then(Value::as_u64).ok_or_else(|| {
        bad("incorrect encoded start resourceVersion (version meta.k8s.io/v1)".into())
    })?;
    let start = v
        .get("start")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("encoded start key must not be empty".into()))?
        .to_string();
    Ok((rv, start))
}

/// Where Go's `base64.RawURLEncoding.DecodeString` (upstream's continue tokens) fails on
/// `token`: the first byte outside the alphabet (padding included), or the last byte of
/// a length that leaves one character over.
fn go_base64_error_offset(token: &str) -> Option<usize> {
    let ok = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
    match token.bytes().position(|b| !ok(b)) {
        Some(i) => Some(i),
        None if token.len() % 4 == 1 => Some(token.len() - 1),
        None => None,
    }
}

/// A `resourceVersion` query parameter of a get or a watch: one that is not a number is
/// a 500 without a reason, as the real server's storage layer answers it.
pub(super) fn parse_rv(s: &str) -> Result<u64, ApiError> {
    s.parse::<u64>()
        .map_err(|_| ApiError::reasonless(500, ApiError::invalid_resource_version_param(s)))
}

pub(super) fn parse_label_selector(s: Option<&str>) -> Result<LabelSelector, ApiError> {
    match s {
        None => Ok(LabelSelector::default()),
        Some(s) => LabelSelector::parse(s).map_err(ApiError::bad_request),
    }
}

pub(super) fn parse_field_selector(
    rt: &ResourceType,
    s: Option<&str>,
) -> Result<FieldSelector, ApiError> {
    match s {
        None => Ok(FieldSelector::default()),
        Some(s) => FieldSelector::parse_for(rt, s).map_err(ApiError::bad_request),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::resources::kinds::{configmaps, namespaces};
    use crate::store::fixtures::*;
    use crate::store::meta::meta_str;
    use crate::store::{ListOptions, PatchType, Store};

    #[test]
    fn list_sorted_paginated_and_consistent() {
        let s = Store::new();
        s.create(
            namespaces(),
            None,
            json!({"metadata": {"name": "b-ns"}}),
            &wo("m"),
        )
        .unwrap();
        for i in 0..5 {
            s.create(
                configmaps(),
                Some("default"),
                cm(&format!("c{i}"), json!({"i": i.to_string()})),
                &wo("m"),
            )
            .unwrap();
        }
        s.create(configmaps(), Some("b-ns"), cm("z", json!({})), &wo("m"))
            .unwrap();
        let all = s.list(configmaps(), None, &ListOptions::default()).unwrap();
        let names: Vec<String> = all
            .items
            .iter()
            .map(|o| format!("{}/{}", meta_str(o, "namespace"), meta_str(o, "name")))
            .collect();
        assert_eq!(
            names,
            vec![
                "b-ns/z",
                "default/c0",
                "default/c1",
                "default/c2",
                "default/c3",
                "default/c4"
            ]
        );
        assert_eq!(
            all.resource_version,
            s.current_resource_version().to_string()
        );
        assert!(all.continue_token.is_none());
        // Pages of 2 within a namespace.
        let p1 = s
            .list(
                configmaps(),
                Some("default"),
                &ListOptions {
                    limit: Some(2),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(p1.items.len(), 2);
        assert_eq!(p1.remaining_item_count, Some(3));
        let snapshot = p1.resource_version.clone();
        // Changes after the first page do not show in later pages.
        s.delete(configmaps(), Some("default"), "c3", None).unwrap();
        s.patch(
            configmaps(),
            Some("default"),
            "c2",
            None,
            PatchType::Merge,
            br#"{"data":{"i":"changed"}}"#,
            &wo("m"),
        )
        .unwrap();
        s.create(configmaps(), Some("default"), cm("c5", json!({})), &wo("m"))
            .unwrap();
        let p2 = s
            .list(
                configmaps(),
                Some("default"),
                &ListOptions {
                    limit: Some(2),
                    continue_token: p1.continue_token.clone(),
                    ..Default::default()
                },
            )
            .unwrap();
        let names: Vec<&str> = p2.items.iter().map(|o| meta_str(o, "name")).collect();
        assert_eq!(names, vec!["c2", "c3"]);
        assert_eq!(
            p2.items[0]["data"]["i"], "2",
            "the page shows the list's resourceVersion"
        );
        assert_eq!(p2.resource_version, snapshot);
        let p3 = s
            .list(
                configmaps(),
                Some("default"),
                &ListOptions {
                    limit: Some(2),
                    continue_token: p2.continue_token.clone(),
                    ..Default::default()
                },
            )
            .unwrap();
        let names: Vec<&str> = p3.items.iter().map(|o| meta_str(o, "name")).collect();
        assert_eq!(names, vec!["c4"]);
        assert!(p3.continue_token.is_none());
        assert!(p3.remaining_item_count.is_none());
        // Selectors.
        let l = s
            .list(
                configmaps(),
                None,
                &ListOptions {
                    field_selector: Some("metadata.namespace=b-ns".into()),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(l.items.len(), 1);
        let l = s
            .list(
                configmaps(),
                None,
                &ListOptions {
                    field_selector: Some("metadata.name!=z".into()),
                    limit: Some(1),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(l.items.len(), 1);
        assert!(l.continue_token.is_some());
        assert!(
            l.remaining_item_count.is_none(),
            "no remainingItemCount with a selector"
        );
        let e = s
            .list(
                configmaps(),
                None,
                &ListOptions {
                    field_selector: Some("spec.nodeName=x".into()),
                    ..Default::default()
                },
            )
            .unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (400, "field label not supported: spec.nodeName")
        );
        let e = s
            .list(
                configmaps(),
                None,
                &ListOptions {
                    label_selector: Some("a in".into()),
                    ..Default::default()
                },
            )
            .unwrap_err();
        assert_eq!(e.code, 400);
        let e = s
            .list(
                configmaps(),
                None,
                &ListOptions {
                    continue_token: Some("garbage!".into()),
                    ..Default::default()
                },
            )
            .unwrap_err();
        assert_eq!(e.code, 400);
        let e = s
            .list(
                configmaps(),
                None,
                &ListOptions {
                    resource_version: Some("999999".into()),
                    ..Default::default()
                },
            )
            .unwrap_err();
        assert_eq!(e.code, 504);
    }

    #[test]
    fn list_labels_and_exact_rv() {
        let s = Store::new();
        for (n, app) in [("a", "web"), ("b", "db"), ("c", "web")] {
            let mut o = cm(n, json!({}));
            o["metadata"]["labels"] = json!({"app": app});
            s.create(configmaps(), Some("default"), o, &wo("m"))
                .unwrap();
        }
        let rv_before = s.current_resource_version();
        s.delete(configmaps(), Some("default"), "a", None).unwrap();
        let l = s
            .list(
                configmaps(),
                None,
                &ListOptions {
                    label_selector: Some("app=web".into()),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(l.items.len(), 1);
        let old = s
            .list(
                configmaps(),
                None,
                &ListOptions {
                    label_selector: Some("app in (web)".into()),
                    resource_version: Some(rv_before.to_string()),
                    resource_version_match: Some("Exact".into()),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(old.items.len(), 2, "Exact shows the deleted object");
        assert_eq!(old.resource_version, rv_before.to_string());
    }

    /// Pages of a list read at the first page's resourceVersion, with creates, changes
    /// and deletes interleaved between pages on keys before, inside and after each page,
    /// add up to the list as it was.
    #[test]
    fn pages_show_the_snapshot_through_any_changes() {
        let s = Store::new();
        for i in (0..60).step_by(2) {
            s.create(
                configmaps(),
                Some("default"),
                cm(&format!("c{i:02}"), json!({"v": "0"})),
                &wo("m"),
            )
            .unwrap();
        }
        let name_and_v = |o: &serde_json::Value| {
            format!(
                "{}={}",
                meta_str(o, "name"),
                o["data"]["v"].as_str().unwrap()
            )
        };
        let before: Vec<String> = s
            .list(configmaps(), None, &ListOptions::default())
            .unwrap()
            .items
            .iter()
            .map(name_and_v)
            .collect();
        let mut token = None;
        let mut paged = Vec::new();
        let mut round = 0;
        loop {
            let page = s
                .list(
                    configmaps(),
                    None,
                    &ListOptions {
                        limit: Some(7),
                        continue_token: token.clone(),
                        ..Default::default()
                    },
                )
                .unwrap();
            paged.extend(page.items.iter().map(name_and_v));
            let Some(next) = page.continue_token else {
                break;
            };
            token = Some(next);
            // Change the store: a new odd key, a change and a delete of even ones.
            round += 1;
            let new = format!("c{:02}", ((round * 13) % 60) | 1);
            let _ = s.create(configmaps(), Some("default"), cm(&new, json!({})), &wo("m"));
            let changed = format!("c{:02}", ((round * 7) % 60) & !1);
            let _ = s.patch(
                configmaps(),
                Some("default"),
                &changed,
                None,
                PatchType::Merge,
                br#"{"data":{"v":"1"}}"#,
                &wo("m"),
            );
            let gone = format!("c{:02}", ((round * 11 + 4) % 60) & !1);
            let _ = s.delete(configmaps(), Some("default"), &gone, None);
        }
        assert!(round >= 4, "{round} pages");
        assert_eq!(paged, before);
    }

    #[test]
    fn continue_token_too_old() {
        let s = Store::with_history(3);
        for i in 0..4 {
            s.create(
                configmaps(),
                Some("default"),
                cm(&format!("c{i}"), json!({})),
                &wo("m"),
            )
            .unwrap();
        }
        let p1 = s
            .list(
                configmaps(),
                None,
                &ListOptions {
                    limit: Some(1),
                    ..Default::default()
                },
            )
            .unwrap();
        for i in 0..4 {
            s.patch(
                configmaps(),
                Some("default"),
                &format!("c{i}"),
                None,
                PatchType::Merge,
                br#"{"data":{"x":"1"}}"#,
                &wo("m"),
            )
            .unwrap();
        }
        let e = s
            .list(
                configmaps(),
                None,
                &ListOptions {
                    limit: Some(1),
                    continue_token: p1.continue_token,
                    ..Default::default()
                },
            )
            .unwrap_err();
        assert_eq!((e.code, e.reason), (410, "Expired"));
        assert!(
            e.message
                .starts_with("The provided continue parameter is too old"),
            "{}",
            e.message
        );
    }
}
