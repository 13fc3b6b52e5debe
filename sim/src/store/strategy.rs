//! Per-kind behaviour of writes, upstream's registry strategies: the status subresource
//! splits an object into what the main resource and the status may change, Namespaces
//! and Secrets get their defaults, and an update of a missing Lease or Event creates it.

use base64::Engine as _;
use serde_json::{Value, json};

use super::meta::{meta_str, set_meta};
use crate::resources::ResourceType;

/// Whether `rt` has a status subresource whose fields the main resource ignores.
pub(super) fn has_status_subresource(rt: &ResourceType) -> bool {
    rt.subresources.contains(&"status")
}

/// Whether an update of a missing object creates it (upstream `AllowCreateOnUpdate`).
pub(super) fn allow_create_on_update(rt: &ResourceType) -> bool {
    matches!(rt.kind, "Lease" | "Event")
}

/// The object an update leaves: the main resource of a kind with a status subresource
/// keeps the stored status; the status subresource keeps the stored spec (everything but
/// metadata and status) and changes the rest. Metadata goes through `status` too, as
/// upstream's Node and Namespace status strategies copy only the old spec over the new
/// object: a label or annotation patched through `nodes/status` is written.
pub(super) fn shape_update(
    rt: &ResourceType,
    sub: Option<&str>,
    old: &Value,
    mut new: Value,
) -> Value {
    match sub {
        Some("status") => {
            let kept = |k: &str| !matches!(k, "metadata" | "status" | "kind" | "apiVersion");
            if let (Value::Object(n), Value::Object(o)) = (&mut new, old) {
                n.retain(|k, _| !kept(k));
                for (k, v) in o.iter().filter(|(k, _)| kept(k)) {
                    n.insert(k.clone(), v.clone());
                }
            }
            new
        }
        _ => {
            if has_status_subresource(rt)
                && let Value::Object(m) = &mut new
            {
                match old.get("status") {
                    Some(s) => {
                        m.insert("status".into(), s.clone());
                    }
                    None => {
                        m.shift_remove("status");
                    }
                }
                if rt.kind == "Namespace" {
                    let fins = old.pointer("/spec/finalizers").cloned();
                    if let Some(spec) = m.entry("spec").or_insert_with(|| json!({})).as_object_mut()
                    {
                        match fins {
                            Some(f) => {
                                spec.insert("finalizers".into(), f);
                            }
                            None => {
                                spec.shift_remove("finalizers");
                            }
                        }
                    }
                }
            }
            new
        }
    }
}

/// Per-kind defaults on create (applied as the body is decoded, so the creator owns the
/// fields they set).
pub(super) fn prepare_for_create(rt: &ResourceType, obj: &mut Value) {
    if rt.group.is_empty() && rt.kind == "Namespace" {
        let name = meta_str(obj, "name").to_string();
        if !name.is_empty() {
            let labels = obj
                .pointer_mut("/metadata/labels")
                .filter(|l| l.is_object())
                .map(|l| l.take())
                .unwrap_or_else(|| json!({}));
            let mut labels = labels;
            if let Value::Object(l) = &mut labels {
                l.insert("kubernetes.io/metadata.name".into(), Value::String(name));
            }
            set_meta(obj, "labels", labels);
        }
    }
    prepare_secret(rt, obj);
    if super::pods::is_pod(rt) {
        super::pods::default_pod(obj);
    }
}

/// Per-kind strategy on create (upstream's `PrepareForCreate`, after the managedFields
/// are computed: nobody owns what it sets): a Namespace's finalizer and phase; a Pod's,
/// DaemonSet's or PodDisruptionBudget's `generation` 1 and initial status.
pub(super) fn strategy_for_create(rt: &ResourceType, obj: &mut Value) {
    if super::pods::has_generation(rt) {
        set_meta(obj, "generation", json!(1));
    }
    if super::pods::is_pod(rt) {
        super::pods::pod_for_create(obj);
    }
    if super::pods::is_budget(rt) {
        super::pods::budget_for_create(obj);
    }
    if rt.group.is_empty()
        && rt.kind == "Namespace"
        && let Value::Object(m) = obj
    {
        m.insert("spec".into(), json!({"finalizers": ["kubernetes"]}));
        m.insert("status".into(), json!({"phase": "Active"}));
    }
}

/// Secrets: `stringData` is folded into `data` (base64), `type` defaults to Opaque.
pub(super) fn prepare_secret(rt: &ResourceType, obj: &mut Value) {
    if !(rt.group.is_empty() && rt.kind == "Secret") {
        return;
    }
    let Value::Object(m) = obj else { return };
    if let Some(Value::Object(sd)) = m.shift_remove("stringData") {
        let data = m.entry("data").or_insert_with(|| json!({}));
        if !data.is_object() {
            *data = json!({});
        }
        if let Value::Object(d) = data {
            for (k, v) in sd {
                let s = v.as_str().unwrap_or("");
                d.insert(
                    k,
                    Value::String(base64::engine::general_purpose::STANDARD.encode(s)),
                );
            }
        }
    }
    if m.get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        m.insert("type".into(), json!("Opaque"));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::resources::kinds::secrets;
    use crate::store::Store;
    use crate::store::fixtures::*;

    #[test]
    fn secrets_string_data() {
        let s = Store::new();
        let sec = s
            .create(
                secrets(),
                Some("default"),
                json!({"metadata": {"name": "s"}, "stringData": {"u": "admin"}}),
                &wo("m"),
            )
            .unwrap();
        assert_eq!(sec["data"]["u"], "YWRtaW4=");
        assert_eq!(sec["type"], "Opaque");
        assert!(sec.get("stringData").is_none());
    }
}
