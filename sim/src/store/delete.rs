//! Delete, at once (no finalizers or garbage collection) except for a pod bound to a
//! Node, which terminates for its grace period (`pods`). A namespace's content goes
//! first, each object with its own DELETED event, and the answer is the namespace as
//! the real server's first answer shows it (`Terminating`).

use serde_json::{Value, json};

use super::events::{storage, user_error, view};
use super::meta::{meta_str, now_rfc3339, set_meta};
use super::{Key, State, Store, object_key};
use crate::error::ApiError;
use crate::resources::{RESOURCES, ResourceType};

/// Namespaces the real server refuses to delete.
const UNDELETABLE_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

impl Store {
    /// Delete an object; returns the deleted object (for a namespace: with
    /// `deletionTimestamp` and phase `Terminating`, as the real server answers).
    /// Deleting a namespace deletes every object in it first.
    pub fn delete(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        preconditions: Option<Value>,
    ) -> Result<Value, ApiError> {
        self.delete_with(rt, ns, name, preconditions, None)
    }

    /// Delete with a grace period (`DeleteOptions.gracePeriodSeconds`; only pods have
    /// one): a pod bound to a Node gets a `deletionTimestamp` and goes once the grace
    /// period has passed (its own `terminationGracePeriodSeconds` when none is given),
    /// and the answer is the terminating pod.
    pub fn delete_with(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        preconditions: Option<Value>,
        grace_period_seconds: Option<i64>,
    ) -> Result<Value, ApiError> {
        let (srt, conv) = storage(rt);
        let mut st = self.write();
        self.delete_locked(&mut st, srt, ns, name, preconditions, grace_period_seconds)
            .map(|v| view(rt, conv, v))
            .map_err(|e| user_error(rt, conv, e))
    }

    pub(super) fn delete_locked(
        &self,
        st: &mut State,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        preconditions: Option<Value>,
        grace_period_seconds: Option<i64>,
    ) -> Result<Value, ApiError> {
        let key = object_key(rt, ns, name);
        let existing = st
            .stored(rt, &key)
            .ok_or_else(|| ApiError::not_found(rt, name))?;
        let existing_obj = existing.object();
        if let Some(p) = preconditions.as_ref().and_then(Value::as_object) {
            if let Some(uid) = p.get("uid").and_then(Value::as_str) {
                let have = meta_str(&existing_obj, "uid");
                if uid != have {
                    return Err(ApiError::precondition_failed(
                        rt,
                        name,
                        &format!(
                            "the UID in the precondition ({uid}) does not match the UID in record ({have}). The object might have been deleted and then recreated"
                        ),
                    ));
                }
            }
            if let Some(rv) = p.get("resourceVersion").and_then(Value::as_str) {
                let have = meta_str(&existing_obj, "resourceVersion");
                if rv != have {
                    return Err(ApiError::precondition_failed(
                        rt,
                        name,
                        &format!(
                            "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({have}). The object might have been modified"
                        ),
                    ));
                }
            }
        }
        if super::pods::is_pod(rt) {
            return Ok(self.delete_pod_locked(st, key, existing, grace_period_seconds));
        }
        let is_namespace = rt.group.is_empty() && rt.plural == "namespaces";
        if is_namespace {
            if UNDELETABLE_NAMESPACES.contains(&name) {
                return Err(ApiError {
                    code: 403,
                    reason: "Forbidden",
                    message: format!(
                        "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
                    ),
                    details: Some(json!({"name": name, "kind": "namespaces"})),
                    retry_after_seconds: None,
                });
            }
            // Delete the namespace's content, type by type.
            for crt in RESOURCES.iter().filter(|r| r.namespaced) {
                let keys: Vec<Key> = st
                    .tables
                    .get(&crt.key())
                    .map(|t| {
                        t.objects
                            .range((name.to_string(), String::new())..)
                            .take_while(|(k, _)| k.0 == name)
                            .map(|(k, _)| k.clone())
                            .collect()
                    })
                    .unwrap_or_default();
                for k in keys {
                    let prev = st
                        .tables
                        .get(&crt.key())
                        .and_then(|t| t.objects.get(&k))
                        .cloned();
                    if let Some(prev) = prev {
                        let obj = prev.object();
                        self.commit(st, crt, k, "DELETED", obj, Some(prev));
                    }
                }
            }
        }
        let mut out = existing_obj.clone();
        self.commit(st, rt, key, "DELETED", existing_obj, Some(existing));
        if is_namespace {
            set_meta(&mut out, "deletionTimestamp", Value::String(now_rfc3339()));
            if let Value::Object(m) = &mut out {
                m.insert("status".into(), json!({"phase": "Terminating"}));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::resources::kinds::{configmaps, namespaces};
    use crate::store::fixtures::*;
    use crate::store::meta::meta_str;
    use crate::store::{Store, WatchOptions};

    #[test]
    fn delete_and_namespaces() {
        let s = Store::new();
        s.create(
            namespaces(),
            None,
            json!({"metadata": {"name": "team"}}),
            &wo("m"),
        )
        .unwrap();
        let a = s
            .create(configmaps(), Some("team"), cm("a", json!({})), &wo("m"))
            .unwrap();
        s.create(configmaps(), Some("team"), cm("b", json!({})), &wo("m"))
            .unwrap();
        s.create(configmaps(), Some("default"), cm("a", json!({})), &wo("m"))
            .unwrap();
        let e = s
            .delete(configmaps(), Some("team"), "a", Some(json!({"uid": "x"})))
            .unwrap_err();
        assert_eq!(e.code, 409);
        assert!(
            e.message
                .contains("the UID in the precondition (x) does not match"),
            "{}",
            e.message
        );
        let e = s
            .delete(
                configmaps(),
                Some("team"),
                "a",
                Some(json!({"resourceVersion": "1"})),
            )
            .unwrap_err();
        assert_eq!(e.code, 409);
        let mut w = s
            .watch(
                configmaps(),
                None,
                &WatchOptions {
                    resource_version: Some(s.current_resource_version().to_string()),
                    ..Default::default()
                },
            )
            .unwrap();
        let d = s
            .delete(
                configmaps(),
                Some("team"),
                "a",
                Some(json!({"uid": meta_str(&a, "uid")})),
            )
            .unwrap();
        assert_eq!(d["metadata"]["name"], "a");
        assert_eq!(
            s.get(configmaps(), Some("team"), "a").unwrap_err().code,
            404
        );
        assert_eq!(
            s.delete(configmaps(), Some("team"), "a", None)
                .unwrap_err()
                .code,
            404
        );
        let ns = s.delete(namespaces(), None, "team", None).unwrap();
        assert_eq!(ns["status"]["phase"], "Terminating");
        assert!(ns["metadata"]["deletionTimestamp"].is_string());
        assert_eq!(
            s.get(configmaps(), Some("team"), "b").unwrap_err().code,
            404
        );
        assert!(s.get(configmaps(), Some("default"), "a").is_ok());
        let evs = drain(&mut w);
        let kinds_names: Vec<(&str, &str)> = evs
            .iter()
            .map(|(k, n, _)| (k.as_str(), n.as_str()))
            .collect();
        assert_eq!(kinds_names, vec![("DELETED", "a"), ("DELETED", "b")]);
        assert!(
            evs[1].2 > evs[0].2,
            "each deletion has its own resourceVersion"
        );
        let e = s
            .create(configmaps(), Some("team"), cm("c", json!({})), &wo("m"))
            .unwrap_err();
        assert_eq!(e.message, "namespaces \"team\" not found");
        let e = s.delete(namespaces(), None, "default", None).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                403,
                "namespaces \"default\" is forbidden: this namespace may not be deleted"
            )
        );
    }
}
