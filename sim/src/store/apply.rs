//! Server-side apply: conflicts with the other managers' fields (unless forced), the
//! merge, removal of the fields this manager applied before and no longer applies when
//! nobody else owns them, and upstream's conflict message.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::managed::{ManagedEntry, parse_managed, restrict_fields};
use super::meta::{meta_str, now_rfc3339, remove_meta, set_meta};
use super::{State, Store, WriteOptions, check_name};
use crate::error::{ApiError, Cause};
use crate::patch::{self, FieldSet};
use crate::resources::ResourceType;

impl Store {
    pub(super) fn apply_create(
        &self,
        st: &mut State,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        applied: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let empty = json!({});
        let (mut new, entries) = apply_to(rt, &empty, applied, name, ns, opts, "")?;
        set_meta(&mut new, "name", Value::String(name.to_string()));
        remove_meta(&mut new, "resourceVersion");
        self.create_locked(st, rt, ns, new, opts, Some(entries))
    }
}

/// Server-side apply of `applied` by `opts.field_manager` over `live` (`{}` when the
/// object does not exist): conflicts, merge, removal of fields the manager no longer
/// applies, and the new managedFields.
pub(super) fn apply_to(
    rt: &ResourceType,
    live: &Value,
    applied: Value,
    name: &str,
    ns: Option<&str>,
    opts: &WriteOptions,
    sub: &str,
) -> Result<(Value, Vec<ManagedEntry>), ApiError> {
    let manager = opts.field_manager.as_deref().unwrap_or("");
    let mut applied = applied;
    if !applied.is_object() {
        return Err(ApiError::bad_request(
            "error decoding YAML: the applied configuration is not an object",
        ));
    }
    let av = applied
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if av != rt.api_version() {
        return Err(ApiError::bad_request(format!(
            "Incorrect version specified in apply patch. Specified patch version: {av}, expected: {}",
            rt.api_version()
        )));
    }
    if let Some(k) = applied.get("kind").and_then(Value::as_str)
        && k != rt.kind
    {
        return Err(ApiError::bad_request(format!(
            "Incorrect kind specified in apply patch. Specified patch kind: {k}, expected: {}",
            rt.kind
        )));
    }
    check_name(rt, ns, name, &mut applied)?;
    for f in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "generation",
        "managedFields",
    ] {
        if f != "resourceVersion" {
            remove_meta(&mut applied, f);
        }
    }
    // A resourceVersion in the applied configuration is a precondition.
    let arv = meta_str(&applied, "resourceVersion").to_string();
    if !arv.is_empty() && arv != meta_str(live, "resourceVersion") {
        return Err(ApiError::stale(rt, name));
    }
    remove_meta(&mut applied, "resourceVersion");
    let mut applied_fields = FieldSet::of(&applied, rt.kind);
    restrict_fields(rt, sub, &mut applied_fields);

    let mut entries = parse_managed(live);
    // Conflicts with every other manager that owns an applied field with another value.
    let mut conflicts: Vec<(usize, patch::FieldPath)> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if e.same_owner(manager, "Apply", sub) {
            continue;
        }
        for p in applied_fields.paths.intersection(&e.fields.paths) {
            if p.last()
                .is_some_and(|x| x.starts_with("k:") || x.starts_with("v:"))
            {
                continue;
            }
            let a = patch::value_at(&applied, p);
            let l = patch::value_at(live, p);
            if a != l {
                conflicts.push((i, p.clone()));
            }
        }
    }
    if !conflicts.is_empty() {
        if !opts.force {
            return Err(apply_conflict_error(&entries, &conflicts));
        }
        for (i, p) in &conflicts {
            if let Some(e) = entries.get_mut(*i) {
                e.fields.paths.remove(p);
            }
        }
    }
    let mut new = live.clone();
    patch::apply_merge(&mut new, &applied, rt.kind, "");
    // Fields this manager applied before and no longer does, owned by nobody else.
    let previous: FieldSet = entries
        .iter()
        .find(|e| e.same_owner(manager, "Apply", sub))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let dropped: Vec<&patch::FieldPath> = previous
        .paths
        .iter()
        .filter(|p| !applied_fields.paths.contains(*p))
        .filter(|p| {
            !entries
                .iter()
                .any(|e| !e.same_owner(manager, "Apply", sub) && e.fields.paths.contains(*p))
        })
        .collect();
    for p in dropped.into_iter().rev() {
        patch::remove_at(&mut new, p);
    }
    let now = now_rfc3339();
    match entries
        .iter_mut()
        .find(|e| e.same_owner(manager, "Apply", sub))
    {
        Some(e) => {
            if e.fields != applied_fields {
                e.time = now;
            }
            e.fields = applied_fields;
            e.api_version = rt.api_version();
        }
        None => entries.push(ManagedEntry {
            manager: manager.to_string(),
            operation: "Apply".into(),
            api_version: rt.api_version(),
            time: now,
            subresource: sub.to_string(),
            fields: applied_fields,
        }),
    }
    entries.retain(|e| !e.fields.is_empty());
    remove_meta(&mut new, "managedFields");
    Ok((new, entries))
}

/// Upstream's apply conflict: `Apply failed with 1 conflict: conflict with "m" using v1: .data.k`.
fn apply_conflict_error(
    entries: &[ManagedEntry],
    conflicts: &[(usize, patch::FieldPath)],
) -> ApiError {
    let printed = |i: usize| {
        entries
            .get(i)
            .map(ManagedEntry::printed)
            .unwrap_or_default()
    };
    let causes: Vec<Cause> = conflicts
        .iter()
        .map(|(i, p)| Cause {
            field: patch::path_string(p),
            reason: "FieldManagerConflict",
            message: format!("conflict with {}", printed(*i)),
        })
        .collect();
    let message = if conflicts.len() == 1 {
        format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            printed(conflicts[0].0),
            patch::path_string(&conflicts[0].1)
        )
    } else {
        // Grouped by manager, in the order of upstream's encoded manager identifiers.
        let mut by_manager: BTreeMap<(String, String, String), (usize, Vec<String>)> =
            BTreeMap::new();
        for (i, p) in conflicts {
            let Some(e) = entries.get(*i) else { continue };
            by_manager
                .entry((
                    e.manager.clone(),
                    e.operation.clone(),
                    e.subresource.clone(),
                ))
                .or_insert_with(|| (*i, Vec::new()))
                .1
                .push(patch::path_string(p));
        }
        let mut lines = Vec::new();
        for (i, paths) in by_manager.values() {
            lines.push(format!("conflicts with {}:", printed(*i)));
            for p in paths {
                lines.push(format!("- {p}"));
            }
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    };
    ApiError::apply_conflict(causes, message)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::resources::kinds::{configmaps, nodes};
    use crate::store::fixtures::*;
    use crate::store::{PatchType, Store, WriteOptions};

    #[test]
    fn server_side_apply() {
        let s = Store::new();
        let e = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Apply,
                b"{}",
                &WriteOptions::default(),
            )
            .unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                422,
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
            )
        );
        let body = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels:\n    app: x\ndata:\n  k: \"1\"\n  j: \"2\"\n";
        let c = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Apply,
                body,
                &wo("gitops"),
            )
            .unwrap();
        assert_eq!(c["data"], json!({"k": "1", "j": "2"}));
        let mf = &c["metadata"]["managedFields"][0];
        assert_eq!(
            (mf["manager"].as_str(), mf["operation"].as_str()),
            (Some("gitops"), Some("Apply"))
        );
        assert_eq!(
            mf["fieldsV1"],
            json!({"f:data": {"f:j": {}, "f:k": {}}, "f:metadata": {"f:labels": {"f:app": {}}}})
        );
        // Same apply again: no write.
        let again = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Apply,
                body,
                &wo("gitops"),
            )
            .unwrap();
        assert_eq!(rv(&again), rv(&c));
        // Another manager changes k with an update: it takes ownership.
        s.patch(
            configmaps(),
            Some("default"),
            "a",
            None,
            PatchType::Merge,
            br#"{"data":{"k":"changed"}}"#,
            &wo("kubectl-edit"),
        )
        .unwrap();
        let e = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Apply,
                body,
                &wo("gitops"),
            )
            .unwrap_err();
        assert_eq!((e.code, e.reason), (409, "Conflict"));
        assert_eq!(
            e.message,
            "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using v1: .data.k"
        );
        assert_eq!(
            e.to_status()["details"]["causes"][0]["reason"],
            "FieldManagerConflict"
        );
        assert_eq!(e.to_status()["details"]["causes"][0]["field"], ".data.k");
        // Force takes it back.
        let f = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Apply,
                body,
                &WriteOptions {
                    force: true,
                    ..wo("gitops")
                },
            )
            .unwrap();
        assert_eq!(f["data"]["k"], "1");
        let mf = f["metadata"]["managedFields"].as_array().unwrap();
        assert!(
            mf.iter().all(|e| e["manager"] != "kubectl-edit"),
            "kubectl-edit lost its only field: {mf:?}"
        );
        // Dropping a field from the applied configuration removes it.
        let smaller = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: \"1\"\n";
        let r = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Apply,
                smaller,
                &wo("gitops"),
            )
            .unwrap();
        assert_eq!(r["data"], json!({"k": "1"}));
        assert!(
            r["metadata"]
                .get("labels")
                .is_none_or(|l| l.as_object().is_some_and(|m| m.is_empty()))
        );
        // Two conflicts: the multi-line message.
        s.patch(
            configmaps(),
            Some("default"),
            "a",
            None,
            PatchType::Merge,
            br#"{"data":{"k":"x","z":"1"}}"#,
            &wo("other"),
        )
        .unwrap();
        let both = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: \"1\"\n  z: \"2\"\n";
        let e = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Apply,
                both,
                &wo("gitops"),
            )
            .unwrap_err();
        assert_eq!(
            e.message,
            "Apply failed with 2 conflicts: conflicts with \"other\" using v1:\n- .data.k\n- .data.z"
        );
        // Wrong apiVersion.
        let e = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Apply,
                br#"{"apiVersion":"v2","kind":"ConfigMap"}"#,
                &wo("gitops"),
            )
            .unwrap_err();
        assert_eq!(
            e.message,
            "Incorrect version specified in apply patch. Specified patch version: v2, expected: v1"
        );
    }

    #[test]
    fn apply_node_conditions_and_shared_ownership() {
        let s = Store::new();
        s.create(nodes(), None, node("n1"), &wo("kubelet")).unwrap();
        let body = br#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"},"status":{"conditions":[{"type":"ConfigApplied","status":"True"}]}}"#;
        let n = s
            .patch(
                nodes(),
                None,
                "n1",
                Some("status"),
                PatchType::Apply,
                body,
                &wo("agent"),
            )
            .unwrap();
        let conds = n["status"]["conditions"].as_array().unwrap();
        assert_eq!(conds.len(), 2, "merged by type: {conds:?}");
        // Applying the same value another manager owns is not a conflict.
        let body =
            br#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","labels":{"pool":"a"}}}"#;
        s.patch(
            nodes(),
            None,
            "n1",
            None,
            PatchType::Apply,
            body,
            &wo("labeler"),
        )
        .unwrap();
        let body =
            br#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","labels":{"pool":"b"}}}"#;
        let e = s
            .patch(
                nodes(),
                None,
                "n1",
                None,
                PatchType::Apply,
                body,
                &wo("other"),
            )
            .unwrap_err();
        assert_eq!(
            e.message,
            "Apply failed with 2 conflicts: conflicts with \"kubelet\" using v1:\n- .metadata.labels.pool\nconflicts with \"labeler\":\n- .metadata.labels.pool"
        );
        // With force, both lose the label and the new value wins.
        let n = s
            .patch(
                nodes(),
                None,
                "n1",
                None,
                PatchType::Apply,
                body,
                &WriteOptions {
                    force: true,
                    ..wo("other")
                },
            )
            .unwrap();
        assert_eq!(n["metadata"]["labels"]["pool"], "b");
        // Apply creates a missing object.
        let body =
            br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"new"},"data":{"a":"b"}}"#;
        let c = s
            .patch(
                configmaps(),
                Some("default"),
                "new",
                None,
                PatchType::Apply,
                body,
                &wo("m"),
            )
            .unwrap();
        assert_eq!(c["data"]["a"], "b");
        assert_eq!(c["metadata"]["managedFields"][0]["operation"], "Apply");
        assert!(c["metadata"].get("generation").is_none());
    }
}
