//! `metadata.managedFields`: which manager owns which fields (upstream's `fieldsV1`
//! sets), and the ownership an Update-operation write moves.

use serde_json::{Map, Value, json};

use super::meta::{meta, now_rfc3339};
use super::strategy::has_status_subresource;
use crate::patch::{self, FieldSet};
use crate::resources::ResourceType;
use crate::rules;

#[derive(Debug, Clone)]
pub(super) struct ManagedEntry {
    pub(super) manager: String,
    pub(super) operation: String,
    pub(super) api_version: String,
    pub(super) time: String,
    pub(super) subresource: String,
    pub(super) fields: FieldSet,
}

impl ManagedEntry {
    pub(super) fn same_owner(&self, manager: &str, operation: &str, sub: &str) -> bool {
        self.manager == manager && self.operation == operation && self.subresource == sub
    }

    /// Upstream's `printManager`.
    pub(super) fn printed(&self) -> String {
        let mut s = rules::go_quote(&self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(
                " with subresource {}",
                rules::go_quote(&self.subresource)
            ));
        }
        if self.operation == "Update" {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }
}

pub(super) enum ManagedUpdate<'a> {
    /// Track an Update operation by (manager, subresource).
    Track(&'a str, &'a str),
    /// Entries already computed (server-side apply).
    Given(Vec<ManagedEntry>),
}

pub(super) fn parse_managed(obj: &Value) -> Vec<ManagedEntry> {
    let Some(list) = meta(obj)
        .and_then(|m| m.get("managedFields"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    list.iter()
        .map(|e| {
            let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            ManagedEntry {
                manager: s("manager"),
                operation: s("operation"),
                api_version: s("apiVersion"),
                time: s("time"),
                subresource: s("subresource"),
                fields: e
                    .get("fieldsV1")
                    .map(FieldSet::from_fields_v1)
                    .unwrap_or_default(),
            }
        })
        .collect()
}

/// managedFields as upstream encodes them: in upstream's order (`Apply` entries first,
/// then by time to the second, manager, apiVersion and subresource).
pub(super) fn render_managed(entries: &[ManagedEntry]) -> Value {
    let mut sorted: Vec<&ManagedEntry> = entries.iter().collect();
    sorted.sort_by(|a, b| {
        (
            &a.operation,
            &a.time,
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                &b.operation,
                &b.time,
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
    Value::Array(
        sorted
            .into_iter()
            .filter(|e| !e.fields.is_empty())
            .map(|e| {
                let mut m = Map::new();
                m.insert("manager".into(), json!(e.manager));
                m.insert("operation".into(), json!(e.operation));
                m.insert("apiVersion".into(), json!(e.api_version));
                m.insert("time".into(), json!(e.time));
                m.insert("fieldsType".into(), json!("FieldsV1"));
                m.insert("fieldsV1".into(), e.fields.to_fields_v1());
                if !e.subresource.is_empty() {
                    m.insert("subresource".into(), json!(e.subresource));
                }
                Value::Object(m)
            })
            .collect(),
    )
}

/// Record an Update-operation write by `manager`: it takes the changed fields from
/// every other manager; removed fields leave every manager.
pub(super) fn track_update(
    rt: &ResourceType,
    old: Option<&Value>,
    new: &Value,
    manager: &str,
    sub: &str,
) -> Vec<ManagedEntry> {
    // managedFields the write itself carries replace the stored ones (a client may edit
    // them, as kubectl does to move ownership from client-side to server-side apply);
    // `[{}]` clears them. Otherwise the stored ones, none on a create.
    let mut entries = match new_managed(new) {
        Some(given) => given,
        None => old.map(parse_managed).unwrap_or_default(),
    };
    // A create compares with the kind's zero object, which has the fields every object
    // of the kind encodes (a Node's empty spec, an Event's null times): nobody owns those.
    let zero = super::decode::zero_object(rt);
    let old_v = old.unwrap_or(&zero);
    let mut changed = patch::changed_fields(old_v, new, rt.kind);
    restrict_fields(rt, sub, &mut changed);
    let removed = patch::removed_fields(old_v, new, rt.kind);
    for e in entries.iter_mut() {
        if !e.same_owner(manager, "Update", sub) {
            e.fields.paths.retain(|p| !changed.paths.contains(p));
        }
        e.fields.paths.retain(|p| !removed.paths.contains(p));
    }
    if !changed.is_empty() {
        let now = now_rfc3339();
        match entries
            .iter_mut()
            .find(|e| e.same_owner(manager, "Update", sub))
        {
            Some(e) => {
                e.fields.paths.extend(changed.paths);
                e.time = now;
                e.api_version = rt.api_version();
            }
            None => entries.push(ManagedEntry {
                manager: manager.to_string(),
                operation: "Update".into(),
                api_version: rt.api_version(),
                time: now,
                subresource: sub.to_string(),
                fields: changed,
            }),
        }
    }
    entries.retain(|e| !e.fields.is_empty());
    entries
}

/// The managedFields an update's object carries when a client set them: `Some(vec![])`
/// for `[{}]`, `None` when it carries none (or only what was stored: the caller compares).
fn new_managed(new: &Value) -> Option<Vec<ManagedEntry>> {
    let list = meta(new)?.get("managedFields")?.as_array()?;
    if list.is_empty() {
        return None;
    }
    if list.len() == 1 && list[0].as_object().is_some_and(Map::is_empty) {
        return Some(Vec::new());
    }
    Some(parse_managed(new))
}

/// Only the fields a write to `sub` owns (upstream's reset fields): everything but the
/// spec for the status subresource (its metadata changes are the writer's), everything
/// but `status` for the main resource of a kind with a status subresource (a Node
/// created with a status does not own it).
pub(super) fn restrict_fields(rt: &ResourceType, sub: &str, fs: &mut FieldSet) {
    if sub == "status" {
        fs.paths.retain(|p| p.first().is_none_or(|e| e != "f:spec"));
    } else if has_status_subresource(rt) {
        fs.paths
            .retain(|p| p.first().is_none_or(|e| e != "f:status"));
    }
}
