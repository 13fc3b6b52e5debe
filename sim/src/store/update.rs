//! Update and patch (merge, JSON, strategic merge; server-side apply's own steps are in
//! `apply`). Both end in `finish_update`: the server-owned metadata stays (`generation`
//! too, except that Pods, DaemonSets and PodDisruptionBudgets count spec changes), and a write that changes nothing
//! stores nothing (no new resourceVersion, no event). A resourceVersion in the body or
//! the patch is a precondition.

use serde_json::{Value, json};

use super::apply::apply_to;
use super::decode::{body_error, decode, patch_error};
use super::events::{event_view, storage, stored_form, user_error, view};
use super::managed::{ManagedUpdate, render_managed, track_update};
use super::meta::{meta, meta_str, obj_rv, remove_meta, set_meta, with_type_meta};
use super::strategy::{allow_create_on_update, prepare_secret, shape_update};
use super::{Key, SharedObject, State, Store, WriteOptions, check_body, check_name, object_key};
use crate::error::{ApiError, Cause};
use crate::patch::{self, PatchError};
use crate::resources::ResourceType;
use crate::rules;

/// Patch type, from the request's Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/strategic-merge-patch+json`.
    StrategicMerge,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

impl Store {
    /// Replace an object (or its status with `subresource = Some("status")`).
    pub fn update(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        obj: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let (srt, conv) = storage(rt);
        let obj = stored_form(conv, obj);
        self.update_impl(srt, ns, name, subresource, obj, opts)
            .map(|v| view(rt, conv, v))
            .map_err(|e| user_error(rt, conv, e))
    }

    fn update_impl(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        obj: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let mut obj = check_body(rt, obj)?;
        decode(rt, &mut obj).map_err(|e| body_error(rt, &e))?;
        check_name(rt, ns, name, &mut obj)?;
        let mut st = self.write();
        let key = object_key(rt, ns, name);
        let existing = st.stored(rt, &key);
        let Some(existing) = existing else {
            if allow_create_on_update(rt) && subresource.is_none() {
                remove_meta(&mut obj, "resourceVersion");
                return self.create_locked(&mut st, rt, ns, obj, opts, None);
            }
            return Err(ApiError::not_found(rt, name));
        };
        let old = existing.object();
        let body_rv = meta_str(&obj, "resourceVersion").to_string();
        if !body_rv.is_empty() {
            // Not a number: the plain strconv error, a 500 without a reason.
            let rv = body_rv
                .parse::<u64>()
                .map_err(|_| ApiError::reasonless(500, crate::error::parse_uint_error(&body_rv)))?;
            if rv != obj_rv(&old) {
                return Err(ApiError::stale(rt, name));
            }
        }
        let new = shape_update(rt, subresource, &old, obj);
        let manager = opts.field_manager.as_deref().unwrap_or("unknown");
        self.finish_update(
            &mut st,
            rt,
            key,
            existing,
            &old,
            new,
            opts,
            ManagedUpdate::Track(manager, subresource.unwrap_or("")),
        )
    }

    /// Validate, record managedFields and commit an update of
    /// `existing` (decoded: `old`) to `new` (which already has the shape the subresource
    /// allows).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn finish_update(
        &self,
        st: &mut State,
        rt: &ResourceType,
        key: Key,
        existing: SharedObject,
        old: &Value,
        mut new: Value,
        opts: &WriteOptions,
        managed: ManagedUpdate<'_>,
    ) -> Result<Value, ApiError> {
        // Server-owned metadata stays as stored.
        for f in [
            "generation",
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ] {
            match meta(old).and_then(|m| m.get(f)) {
                Some(v) => set_meta(&mut new, f, v.clone()),
                None => remove_meta(&mut new, f),
            }
        }
        // uid and creationTimestamp may be omitted (kept) but not changed.
        for f in ["uid", "creationTimestamp"] {
            if meta_str(&new, f).is_empty()
                && let Some(v) = meta(old).and_then(|m| m.get(f))
            {
                set_meta(&mut new, f, v.clone());
            }
        }
        prepare_secret(rt, &mut new);
        // Pods, DaemonSets and PodDisruptionBudgets count changes of their spec.
        if super::pods::has_generation(rt) && new.get("spec") != old.get("spec") {
            let g = meta(old)
                .and_then(|m| m.get("generation"))
                .and_then(Value::as_i64)
                .unwrap_or(0);
            set_meta(&mut new, "generation", json!(g + 1));
        }
        let errs = rules::validate(rt, &new, Some(old));
        if !errs.is_empty() {
            return Err(ApiError::invalid(rt, &key.1, errs));
        }
        let entries = match managed {
            ManagedUpdate::Track(manager, sub) => track_update(rt, Some(old), &new, manager, sub),
            ManagedUpdate::Given(entries) => entries,
        };
        if entries.is_empty() {
            remove_meta(&mut new, "managedFields");
        } else {
            set_meta(&mut new, "managedFields", render_managed(&entries));
        }
        let new = with_type_meta(rt, new);
        // A write that changes nothing is not a write: same resourceVersion, no event.
        if new == *old {
            return Ok(new);
        }
        if opts.dry_run {
            return Ok(new);
        }
        Ok(self.commit(st, rt, key, "MODIFIED", new, Some(existing)))
    }

    /// Patch an object.
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        patch_type: PatchType,
        body: &[u8],
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let (srt, conv) = storage(rt);
        self.patch_impl(srt, conv, ns, name, subresource, patch_type, body, opts)
            .map(|v| view(rt, conv, v))
            .map_err(|e| user_error(rt, conv, e))
    }

    #[allow(clippy::too_many_arguments)]
    fn patch_impl(
        &self,
        rt: &ResourceType,
        conv: bool,
        ns: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        patch_type: PatchType,
        body: &[u8],
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        if patch_type == PatchType::Apply {
            if opts.field_manager.as_deref().unwrap_or("").is_empty() {
                return Err(patch_options_invalid(vec![rules::required(
                    "fieldManager",
                    "is required for apply patch",
                )]));
            }
        } else if opts.force {
            return Err(patch_options_invalid(vec![rules::forbidden(
                "force",
                "may not be specified for non-apply patch",
            )]));
        }
        let sub = subresource.unwrap_or("");
        let parsed = match patch_type {
            PatchType::Apply => patch::parse_apply(body),
            _ => patch::parse_json(body),
        }
        .map_err(map_patch_error)?;
        let parsed = if patch_type == PatchType::Apply {
            stored_form(conv, parsed)
        } else {
            parsed
        };
        let mut st = self.write();
        let key = object_key(rt, ns, name);
        let existing = st.stored(rt, &key);
        let Some(existing) = existing else {
            if patch_type == PatchType::Apply && sub.is_empty() {
                return self.apply_create(&mut st, rt, ns, name, parsed, opts);
            }
            return Err(ApiError::not_found(rt, name));
        };
        let old = &existing.object();
        if patch_type == PatchType::Apply {
            let (mut new, entries) = apply_to(rt, old, parsed, name, ns, opts, sub)?;
            decode(rt, &mut new).map_err(|e| body_error(rt, &e))?;
            let new = shape_update(rt, subresource, old, new);
            return self.finish_update(
                &mut st,
                rt,
                key,
                existing.clone(),
                old,
                new,
                opts,
                ManagedUpdate::Given(entries),
            );
        }
        // The patch applies to the object as the client's version shows it.
        let old_view = if conv { event_view(old) } else { old.clone() };
        let patched = match patch_type {
            PatchType::Merge => {
                if !parsed.is_object() {
                    return Err(ApiError::bad_request(format!(
                        "error decoding patch: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                        patch::go_json_type(&parsed)
                    )));
                }
                let mut v = old_view;
                patch::merge_patch(&mut v, &parsed);
                v
            }
            PatchType::Json => {
                let mut v = old_view;
                patch::json_patch(&mut v, &parsed).map_err(map_patch_error)?;
                v
            }
            PatchType::StrategicMerge => {
                patch::strategic_merge(&old_view, &parsed, rt.kind).map_err(map_patch_error)?
            }
            PatchType::Apply => old_view,
        };
        if !patched.is_object() {
            return Err(ApiError::bad_request(
                "the patched object is not a JSON object",
            ));
        }
        let mut patched = stored_form(conv, patched);
        decode(rt, &mut patched).map_err(|e| patch_error(&patched, &e))?;
        check_name(rt, ns, name, &mut patched)?;
        // A resourceVersion in the patch is a precondition.
        let prv = meta_str(&patched, "resourceVersion").to_string();
        if !prv.is_empty() && prv != meta_str(old, "resourceVersion") {
            return Err(ApiError::stale(rt, name));
        }
        let new = shape_update(rt, subresource, old, patched);
        let manager = opts.field_manager.as_deref().unwrap_or("unknown");
        self.finish_update(
            &mut st,
            rt,
            key,
            existing.clone(),
            old,
            new,
            opts,
            ManagedUpdate::Track(manager, sub),
        )
    }
}

/// 422 for invalid patch options: `PatchOptions.meta.k8s.io "" is invalid: ...`.
fn patch_options_invalid(causes: Vec<Cause>) -> ApiError {
    let agg: Vec<String> = causes.iter().map(ToString::to_string).collect();
    let causes_json: Vec<Value> = causes
        .iter()
        .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
        .collect();
    ApiError {
        code: 422,
        reason: "Invalid",
        message: format!(
            "PatchOptions.meta.k8s.io \"\" is invalid: {}",
            if agg.len() == 1 {
                agg[0].clone()
            } else {
                format!("[{}]", agg.join(", "))
            }
        ),
        details: Some(
            json!({"group": "meta.k8s.io", "kind": "PatchOptions", "causes": causes_json}),
        ),
        retry_after_seconds: None,
    }
}

fn map_patch_error(e: PatchError) -> ApiError {
    match e {
        PatchError::BadRequest(m) => ApiError::bad_request(m),
        PatchError::Unprocessable(_) => ApiError {
            code: 422,
            reason: "Invalid",
            message: "the server rejected our request due to an error in our request".into(),
            details: Some(json!({})),
            retry_after_seconds: None,
        },
        PatchError::Internal(m) => ApiError::internal(m),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::resources::kinds::{configmaps, leases, nodes};
    use crate::store::fixtures::*;
    use crate::store::meta::meta_str;
    use crate::store::{PatchType, Store, WriteOptions};

    #[test]
    fn update_rules() {
        let s = Store::new();
        let c = s
            .create(
                configmaps(),
                Some("default"),
                cm("a", json!({"k": "1"})),
                &wo("m"),
            )
            .unwrap();
        let mut stale = c.clone();
        stale["data"]["k"] = json!("2");
        let u = s
            .update(
                configmaps(),
                Some("default"),
                "a",
                None,
                stale.clone(),
                &wo("m"),
            )
            .unwrap();
        assert_eq!(rv(&u), rv(&c) + 1);
        // A v1.36 server keeps no generation on a ConfigMap, data change or not.
        assert!(u["metadata"].get("generation").is_none());
        let e = s
            .update(configmaps(), Some("default"), "a", None, stale, &wo("m"))
            .unwrap_err();
        assert_eq!((e.code, e.reason), (409, "Conflict"));
        assert_eq!(
            e.message,
            "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your changes to the latest version and try again"
        );
        // Empty resourceVersion: unconditional.
        let mut unconditional = cm("a", json!({"k": "3"}));
        unconditional["metadata"]["labels"] = json!({"x": "y"});
        let u2 = s
            .update(
                configmaps(),
                Some("default"),
                "a",
                None,
                unconditional,
                &wo("m"),
            )
            .unwrap();
        assert_eq!(u2["data"]["k"], "3");
        assert_eq!(meta_str(&u2, "uid"), meta_str(&c, "uid"));
        assert_eq!(
            meta_str(&u2, "creationTimestamp"),
            meta_str(&c, "creationTimestamp")
        );
        // Labels only: no generation either.
        let mut labels = u2.clone();
        labels["metadata"]["labels"] = json!({"x": "z"});
        let u3 = s
            .update(configmaps(), Some("default"), "a", None, labels, &wo("m"))
            .unwrap();
        assert_eq!(u3["metadata"]["generation"], u2["metadata"]["generation"]);
        // A no-op update does not write.
        let same = s
            .update(
                configmaps(),
                Some("default"),
                "a",
                None,
                u3.clone(),
                &wo("m"),
            )
            .unwrap();
        assert_eq!(rv(&same), rv(&u3));
        assert_eq!(s.current_resource_version(), rv(&u3));
        // Name and namespace must match the URL.
        let e = s
            .update(
                configmaps(),
                Some("default"),
                "b",
                None,
                u3.clone(),
                &wo("m"),
            )
            .unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                400,
                "the name of the object (a) does not match the name on the URL (b)"
            )
        );
        let e = s
            .update(
                configmaps(),
                Some("kube-system"),
                "a",
                None,
                u3.clone(),
                &wo("m"),
            )
            .unwrap_err();
        assert_eq!(e.code, 400);
        assert!(
            e.message.contains("does not match the namespace"),
            "{}",
            e.message
        );
        let e = s
            .update(
                configmaps(),
                Some("default"),
                "zz",
                None,
                cm("zz", json!({})),
                &wo("m"),
            )
            .unwrap_err();
        assert_eq!(e.message, "configmaps \"zz\" not found");
        // Leases are created by update.
        let l = s
            .update(
                leases(),
                Some("kube-node-lease"),
                "n1",
                None,
                json!({"metadata": {"name": "n1"}, "spec": {"holderIdentity": "n1"}}),
                &wo("kubelet"),
            )
            .unwrap();
        assert_eq!(l["apiVersion"], "coordination.k8s.io/v1");
        // uid cannot change.
        let mut uid = u3.clone();
        uid["metadata"]["uid"] = json!("other");
        let e = s
            .update(configmaps(), Some("default"), "a", None, uid, &wo("m"))
            .unwrap_err();
        assert_eq!(e.code, 422);
    }

    #[test]
    fn immutable_config_map() {
        let s = Store::new();
        let mut c = cm("a", json!({"k": "1"}));
        c["immutable"] = json!(true);
        let c = s
            .create(configmaps(), Some("default"), c, &wo("m"))
            .unwrap();
        let mut changed = c.clone();
        changed["data"]["k"] = json!("2");
        let e = s
            .update(configmaps(), Some("default"), "a", None, changed, &wo("m"))
            .unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                422,
                "ConfigMap \"a\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
            )
        );
        let e = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Merge,
                br#"{"data":{"k":"3"}}"#,
                &wo("m"),
            )
            .unwrap_err();
        assert_eq!(e.code, 422);
        // Metadata may still change.
        let p = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Merge,
                br#"{"metadata":{"labels":{"a":"b"}}}"#,
                &wo("m"),
            )
            .unwrap();
        assert_eq!(p["metadata"]["labels"]["a"], "b");
    }

    #[test]
    fn node_status_subresource() {
        let s = Store::new();
        let n = s.create(nodes(), None, node("n1"), &wo("kubelet")).unwrap();
        // Main resource: status changes are ignored.
        let mut m = n.clone();
        m["status"]["conditions"][0]["status"] = json!("False");
        m["spec"]["unschedulable"] = json!(true);
        let u = s
            .update(nodes(), None, "n1", None, m, &wo("kubectl"))
            .unwrap();
        assert_eq!(u["status"]["conditions"][0]["status"], "True");
        assert_eq!(u["spec"]["unschedulable"], true);
        // Status subresource: the spec stays; status and metadata change (as upstream's
        // Node status strategy, which copies only the old spec).
        let mut st = u.clone();
        st["status"]["conditions"][0]["status"] = json!("False");
        st["spec"]["unschedulable"] = json!(false);
        st["metadata"]["labels"] = json!({"changed": "yes"});
        let u2 = s
            .update(nodes(), None, "n1", Some("status"), st, &wo("kubelet"))
            .unwrap();
        assert_eq!(u2["status"]["conditions"][0]["status"], "False");
        assert_eq!(u2["spec"]["unschedulable"], true);
        assert_eq!(u2["metadata"]["labels"], json!({"changed": "yes"}));
        let mf = u2["metadata"]["managedFields"].as_array().unwrap();
        assert!(
            mf.iter()
                .any(|e| e["manager"] == "kubelet" && e["subresource"] == "status"),
            "{mf:?}"
        );
        // Status patch with a strategic merge of conditions by type.
        let p = s
            .patch(
                nodes(),
                None,
                "n1",
                Some("status"),
                PatchType::StrategicMerge,
                br#"{"status":{"conditions":[{"type":"ConfigApplied","status":"True"}]}}"#,
                &wo("agent"),
            )
            .unwrap();
        assert_eq!(p["status"]["conditions"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn patch_types() {
        let s = Store::new();
        let c = s
            .create(
                configmaps(),
                Some("default"),
                cm("a", json!({"k": "1"})),
                &wo("m"),
            )
            .unwrap();
        let p = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Merge,
                br#"{"data":{"k":null,"n":"2"}}"#,
                &wo("m"),
            )
            .unwrap();
        assert_eq!(p["data"], json!({"n": "2"}));
        let p = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Json,
                br#"[{"op":"add","path":"/data/j","value":"3"}]"#,
                &wo("m"),
            )
            .unwrap();
        assert_eq!(p["data"]["j"], "3");
        let e = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Json,
                br#"[{"op":"test","path":"/data/j","value":"4"}]"#,
                &wo("m"),
            )
            .unwrap_err();
        assert_eq!(
            (e.code, e.reason, e.message.as_str()),
            (
                422,
                "Invalid",
                "the server rejected our request due to an error in our request"
            )
        );
        let e = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Json,
                b"{not json",
                &wo("m"),
            )
            .unwrap_err();
        assert_eq!(e.code, 400);
        let p = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::StrategicMerge,
                br#"{"metadata":{"labels":{"l":"1"}}}"#,
                &wo("m"),
            )
            .unwrap();
        assert_eq!(p["metadata"]["labels"]["l"], "1");
        // A resourceVersion in the patch is a precondition.
        let stale = format!(
            r#"{{"metadata":{{"resourceVersion":"{}"}},"data":{{"x":"1"}}}}"#,
            rv(&c)
        );
        let e = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Merge,
                stale.as_bytes(),
                &wo("m"),
            )
            .unwrap_err();
        assert_eq!(e.code, 409);
        let fresh = format!(
            r#"{{"metadata":{{"resourceVersion":"{}"}},"data":{{"x":"1"}}}}"#,
            rv(&p)
        );
        s.patch(
            configmaps(),
            Some("default"),
            "a",
            None,
            PatchType::Merge,
            fresh.as_bytes(),
            &wo("m"),
        )
        .unwrap();
        // Renaming through a patch is refused.
        let e = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Merge,
                br#"{"metadata":{"name":"b"}}"#,
                &wo("m"),
            )
            .unwrap_err();
        assert_eq!(e.code, 400);
        let e = s
            .patch(
                configmaps(),
                Some("default"),
                "nope",
                None,
                PatchType::Merge,
                b"{}",
                &wo("m"),
            )
            .unwrap_err();
        assert_eq!(e.code, 404);
        let e = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Merge,
                b"{}",
                &WriteOptions {
                    force: true,
                    ..wo("m")
                },
            )
            .unwrap_err();
        assert_eq!(
            e.message,
            "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch"
        );
    }
}
