//! Create: the body's namespace against the request's, `generateName` (upstream's
//! suffix alphabet), the server-set fields, validation, and the namespace's existence.

use rand::Rng as _;
use serde_json::Value;

use super::decode::{body_error, decode};
use super::events::{storage, stored_form, user_error, view};
use super::managed::{ManagedEntry, render_managed, track_update};
use super::meta::{meta_str, now_rfc3339, remove_meta, set_meta, with_type_meta};
use super::strategy::{prepare_for_create, strategy_for_create};
use super::{State, Store, WriteOptions, check_body};
use crate::error::ApiError;
use crate::resources::{ResourceType, kinds};
use crate::rules;

impl Store {
    /// Create an object.
    pub fn create(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        obj: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let (srt, conv) = storage(rt);
        let obj = stored_form(conv, obj);
        let mut st = self.write();
        self.create_locked(&mut st, srt, ns, obj, opts, None)
            .map(|v| view(rt, conv, v))
            .map_err(|e| user_error(rt, conv, e))
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn create_locked(
        &self,
        st: &mut State,
        rt: &ResourceType,
        ns: Option<&str>,
        obj: Value,
        opts: &WriteOptions,
        managed: Option<Vec<ManagedEntry>>,
    ) -> Result<Value, ApiError> {
        let mut obj = check_body(rt, obj)?;
        decode(rt, &mut obj).map_err(|e| body_error(rt, &e))?;
        let req_ns = if rt.namespaced { ns.unwrap_or("") } else { "" };
        // Namespace of the object against the request's.
        let obj_ns = meta_str(&obj, "namespace").to_string();
        if rt.namespaced {
            if obj_ns.is_empty() {
                set_meta(&mut obj, "namespace", Value::String(req_ns.to_string()));
            } else if obj_ns != req_ns {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
        } else {
            remove_meta(&mut obj, "namespace");
        }
        if !meta_str(&obj, "resourceVersion").is_empty() {
            // A plain error upstream: a 500 without a reason.
            return Err(ApiError::reasonless(
                500,
                "resourceVersion should not be set on objects to be created",
            ));
        }
        // generateName.
        if meta_str(&obj, "name").is_empty() {
            let gen_name = meta_str(&obj, "generateName").to_string();
            if !gen_name.is_empty() {
                let base: String = gen_name.chars().take(58).collect();
                let name = format!("{base}{}", self.generate_suffix());
                set_meta(&mut obj, "name", Value::String(name));
            }
        }
        let name = meta_str(&obj, "name").to_string();
        // System fields.
        for f in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "managedFields",
            "selfLink",
        ] {
            remove_meta(&mut obj, f);
        }
        prepare_for_create(rt, &mut obj);
        let errs = rules::validate(rt, &obj, None);
        if !errs.is_empty() {
            return Err(ApiError::invalid(rt, &name, errs));
        }
        if rt.namespaced
            && !st
                .tables
                .get(&kinds::namespaces().key())
                .is_some_and(|t| t.objects.contains_key(&(String::new(), req_ns.to_string())))
        {
            return Err(ApiError::namespace_not_found(req_ns));
        }
        let key = (req_ns.to_string(), name.clone());
        let table = st
            .tables
            .get(&rt.key())
            .ok_or_else(|| ApiError::not_found(rt, &name))?;
        if table.objects.contains_key(&key) {
            return Err(ApiError::already_exists(rt, &name));
        }
        set_meta(&mut obj, "uid", Value::String(self.uuid()));
        set_meta(&mut obj, "creationTimestamp", Value::String(now_rfc3339()));
        // Only the strategies of Pods, DaemonSets and PodDisruptionBudgets set
        // `generation` (`strategy_for_create`): for the other kinds what the client sent
        // stays, and nothing is set when it sent none.
        let entries = match managed {
            Some(m) => m,
            None => {
                let manager = opts.field_manager.as_deref().unwrap_or("unknown");
                track_update(rt, None, &obj, manager, "")
            }
        };
        strategy_for_create(rt, &mut obj);
        if !entries.is_empty() {
            set_meta(&mut obj, "managedFields", render_managed(&entries));
        }
        let obj = with_type_meta(rt, obj);
        if opts.dry_run {
            return Ok(obj);
        }
        let created = self.commit(st, rt, key.clone(), "ADDED", obj, None);
        if super::pods::is_pod(rt) {
            self.kubelet_runs(st, &key);
        }
        Ok(created)
    }

    fn uuid(&self) -> String {
        let mut rng = self.inner.rng.lock().unwrap_or_else(|e| e.into_inner());
        let hi = rng.next_u64();
        let lo = rng.next_u64();
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&hi.to_be_bytes());
        b[8..].copy_from_slice(&lo.to_be_bytes());
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
        format!(
            "{}-{}-{}-{}-{}",
            &h[0..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        )
    }

    fn generate_suffix(&self) -> String {
        const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let mut rng = self.inner.rng.lock().unwrap_or_else(|e| e.into_inner());
        (0..5)
            .map(|_| ALPHANUMS[(rng.next_u32() as usize) % ALPHANUMS.len()] as char)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::resources::kinds::{configmaps, namespaces, nodes};
    use crate::rules;
    use crate::store::fixtures::*;
    use crate::store::meta::meta_str;
    use crate::store::{Store, WriteOptions};

    #[test]
    fn create_sets_server_fields() {
        let s = Store::new();
        let start = s.current_resource_version();
        assert_eq!(start, 4, "four initial namespaces");
        let c = s
            .create(
                configmaps(),
                Some("default"),
                cm("a", json!({"k": "v"})),
                &wo("me"),
            )
            .unwrap();
        assert_eq!(c["kind"], "ConfigMap");
        assert_eq!(c["apiVersion"], "v1");
        let uid = meta_str(&c, "uid");
        assert_eq!(uid.len(), 36);
        assert_eq!(&uid[14..15], "4", "UUID version 4: {uid}");
        assert!(
            matches!(&uid[19..20], "8" | "9" | "a" | "b"),
            "RFC 4122 variant: {uid}"
        );
        assert_eq!(meta_str(&c, "creationTimestamp").len(), 20);
        assert_eq!(rv(&c), start + 1);
        // No generation: a v1.36 server sets none on a ConfigMap.
        assert!(c["metadata"].get("generation").is_none());
        assert_eq!(c["metadata"]["namespace"], "default");
        assert_eq!(c["metadata"]["managedFields"][0]["manager"], "me");
        assert_eq!(c["metadata"]["managedFields"][0]["operation"], "Update");
        // The map the create made is a field of its own (`.`), as upstream records it.
        assert_eq!(
            c["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:data": {".": {}, "f:k": {}}})
        );
        assert_eq!(s.get(configmaps(), Some("default"), "a").unwrap(), c);
        let c2 = s
            .create(configmaps(), Some("default"), cm("b", json!({})), &wo("me"))
            .unwrap();
        assert_ne!(meta_str(&c2, "uid"), uid);
        assert_eq!(s.current_resource_version(), start + 2);
    }

    #[test]
    fn create_errors() {
        let s = Store::new();
        let e = s
            .create(configmaps(), Some("nope"), cm("a", json!({})), &wo("m"))
            .unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (404, "namespaces \"nope\" not found")
        );
        s.create(configmaps(), Some("default"), cm("a", json!({})), &wo("m"))
            .unwrap();
        let e = s
            .create(configmaps(), Some("default"), cm("a", json!({})), &wo("m"))
            .unwrap_err();
        assert_eq!(
            (e.code, e.reason, e.message.as_str()),
            (409, "AlreadyExists", "configmaps \"a\" already exists")
        );
        let e = s
            .create(
                configmaps(),
                Some("default"),
                cm("Bad", json!({})),
                &wo("m"),
            )
            .unwrap_err();
        assert_eq!((e.code, e.reason), (422, "Invalid"));
        assert!(
            e.message
                .starts_with("ConfigMap \"Bad\" is invalid: metadata.name: Invalid value: \"Bad\""),
            "{}",
            e.message
        );
        let mut other_ns = cm("b", json!({}));
        other_ns["metadata"]["namespace"] = json!("kube-system");
        let e = s
            .create(configmaps(), Some("default"), other_ns, &wo("m"))
            .unwrap_err();
        assert_eq!(e.code, 400);
        let big = "x".repeat(rules::MAX_DATA_SIZE + 1);
        let e = s
            .create(
                configmaps(),
                Some("default"),
                cm("big", json!({"k": big})),
                &wo("m"),
            )
            .unwrap_err();
        assert_eq!(
            e.message,
            "ConfigMap \"big\" is invalid: []: Too long: must have at most 1048576 bytes"
        );
        let e = s
            .create(configmaps(), Some("default"), json!([1]), &wo("m"))
            .unwrap_err();
        assert_eq!(e.code, 400);
        let mut with_rv = cm("c", json!({}));
        with_rv["metadata"]["resourceVersion"] = json!("5");
        // Upstream answers with a plain error: 500, no reason.
        let e = s
            .create(configmaps(), Some("default"), with_rv, &wo("m"))
            .unwrap_err();
        assert_eq!((e.code, e.reason), (500, ""));
        // Dry run validates but stores nothing.
        let before = s.current_resource_version();
        let d = s
            .create(
                configmaps(),
                Some("default"),
                cm("dry", json!({})),
                &WriteOptions {
                    dry_run: true,
                    ..wo("m")
                },
            )
            .unwrap();
        assert_eq!(d["metadata"]["name"], "dry");
        assert_eq!(s.current_resource_version(), before);
        assert_eq!(
            s.get(configmaps(), Some("default"), "dry")
                .unwrap_err()
                .code,
            404
        );
    }

    #[test]
    fn generate_name_and_cluster_scope() {
        let s = Store::new();
        let obj = json!({"metadata": {"generateName": "cfg-"}});
        let c = s
            .create(configmaps(), Some("default"), obj, &wo("m"))
            .unwrap();
        let name = meta_str(&c, "name");
        assert!(name.starts_with("cfg-") && name.len() == 9, "{name}");
        let mut n = node("n1");
        n["metadata"]["namespace"] = json!("default");
        let n = s.create(nodes(), None, n, &wo("m")).unwrap();
        assert!(
            n["metadata"].get("namespace").is_none(),
            "cluster-scoped objects have no namespace"
        );
        assert_eq!(
            n["status"]["conditions"][0]["type"], "Ready",
            "create keeps a node's status"
        );
        let ns = s
            .create(
                namespaces(),
                None,
                json!({"metadata": {"name": "team"}}),
                &wo("m"),
            )
            .unwrap();
        assert_eq!(ns["status"]["phase"], "Active");
        assert_eq!(
            ns["metadata"]["labels"]["kubernetes.io/metadata.name"],
            "team"
        );
    }
}
