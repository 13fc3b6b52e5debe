//! Object validation as the real server does it: names, labels, annotations, sizes and
//! the per-kind rules we serve (k8s.io/apimachinery/pkg/util/validation,
//! k8s.io/apimachinery/pkg/api/validation/objectmeta.go,
//! pkg/apis/core/validation/validation.go). Field errors are [`Cause`]s whose messages
//! are upstream's `field.Error.ErrorBody()` texts.

use base64::Engine as _;
use kubelet_gitops_core::names::{self, Wording};
use serde_json::{Map, Value};

use crate::error::Cause;
use crate::resources::ResourceType;

/// Total size of all annotation keys and values: 256 KiB.
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;
/// Maximum size of a ConfigMap's data + binaryData, and of a Secret's data: 1 MiB.
pub const MAX_DATA_SIZE: usize = 1024 * 1024;
/// The immutability message for ConfigMaps and Secrets.
pub const IMMUTABLE_WHEN_SET: &str = "field is immutable when `immutable` is set";
/// `ValidateImmutableField`'s message.
pub const FIELD_IMMUTABLE: &str = "field is immutable";

pub use kubelet_gitops_core::go::quote as go_quote;

/// `field.Invalid(field, value, detail)` for a string value.
pub fn invalid(field: &str, value: &str, detail: &str) -> Cause {
    let mut message = format!("Invalid value: {}", go_quote(value));
    if !detail.is_empty() {
        message.push_str(": ");
        message.push_str(detail);
    }
    Cause {
        field: field.to_string(),
        reason: "FieldValueInvalid",
        message,
    }
}

/// `field.Invalid` for a non-string value (numbers and booleans print plainly).
pub fn invalid_value(field: &str, value: &Value, detail: &str) -> Cause {
    let shown = match value {
        Value::String(s) => go_quote(s),
        Value::Null => "null".to_string(),
        other => other.to_string(),
    };
    let mut message = format!("Invalid value: {shown}");
    if !detail.is_empty() {
        message.push_str(": ");
        message.push_str(detail);
    }
    Cause {
        field: field.to_string(),
        reason: "FieldValueInvalid",
        message,
    }
}

fn with_detail(kind: &str, detail: &str) -> String {
    if detail.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}: {detail}")
    }
}

/// `field.Required(field, detail)`.
pub fn required(field: &str, detail: &str) -> Cause {
    Cause {
        field: field.to_string(),
        reason: "FieldValueRequired",
        message: with_detail("Required value", detail),
    }
}

/// `field.Forbidden(field, detail)`.
pub fn forbidden(field: &str, detail: &str) -> Cause {
    Cause {
        field: field.to_string(),
        reason: "FieldValueForbidden",
        message: with_detail("Forbidden", detail),
    }
}

/// `field.TooLong(field, _, max)`: `Too long: must have at most N bytes`.
pub fn too_long(field: &str, max: usize) -> Cause {
    Cause {
        field: field.to_string(),
        reason: "FieldValueTooLong",
        message: format!("Too long: must have at most {max} bytes"),
    }
}

/// `field.NotSupported(field, value, valid)`.
pub fn not_supported(field: &str, value: &str, valid: &[&str]) -> Cause {
    let mut message = format!("Unsupported value: {}", go_quote(value));
    if !valid.is_empty() {
        let q: Vec<String> = valid.iter().map(|v| go_quote(v)).collect();
        message.push_str(": supported values: ");
        message.push_str(&q.join(", "));
    }
    Cause {
        field: field.to_string(),
        reason: "FieldValueNotSupported",
        message,
    }
}

/// `field.Duplicate(field, value)`.
pub fn duplicate(field: &str, value: &str) -> Cause {
    Cause {
        field: field.to_string(),
        reason: "FieldValueDuplicate",
        message: format!("Duplicate value: {}", go_quote(value)),
    }
}

/// A field path element for a map key: `data[key]`.
pub fn key_path(parent: &str, key: &str) -> String {
    format!("{parent}[{key}]")
}

pub use kubelet_gitops_core::names::{
    config_map_key_errors, dns1123_label_errors, dns1123_subdomain_errors,
};

/// `IsLabelKey`'s error strings, in the API server's words.
pub fn label_key_errors(value: &str) -> Vec<String> {
    names::label_key_errors(value, Wording::Content)
}

/// `IsLabelValue`'s error strings, in the API server's words.
pub fn label_value_errors(value: &str) -> Vec<String> {
    names::label_value_errors(value, Wording::Content)
}

/// Name rule of a resource: namespaces are DNS-1123 labels, everything else we serve
/// is a DNS-1123 subdomain.
pub fn name_errors(rt: &ResourceType, name: &str) -> Vec<String> {
    if rt.plural == "namespaces" && rt.group.is_empty() {
        dns1123_label_errors(name)
    } else {
        dns1123_subdomain_errors(name)
    }
}

fn str_map<'a>(obj: &'a Value, ptr: &str) -> Option<&'a Map<String, Value>> {
    obj.pointer(ptr).and_then(Value::as_object)
}

/// `ValidateObjectMeta` (create) for the parts we model: name, namespace, labels,
/// annotations (keys and 256 KiB total), finalizers, ownerReferences.
pub fn validate_object_meta(rt: &ResourceType, obj: &Value) -> Vec<Cause> {
    let mut errs = Vec::new();
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if name.is_empty() {
        errs.push(required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else {
        for m in name_errors(rt, name) {
            errs.push(invalid("metadata.name", name, &m));
        }
    }
    let ns = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    if rt.namespaced {
        if ns.is_empty() {
            errs.push(required("metadata.namespace", ""));
        } else {
            for m in dns1123_label_errors(ns) {
                errs.push(invalid("metadata.namespace", ns, &m));
            }
        }
    } else if !ns.is_empty() {
        errs.push(forbidden("metadata.namespace", "not allowed on this type"));
    }
    errs.extend(validate_meta_common(obj));
    errs
}

/// Labels, annotations, finalizers and owner references (shared by create and update).
pub fn validate_meta_common(obj: &Value) -> Vec<Cause> {
    let mut errs = Vec::new();
    if let Some(labels) = str_map(obj, "/metadata/labels") {
        for (k, v) in labels {
            for m in label_key_errors(k) {
                errs.push(invalid("metadata.labels", k, &m));
            }
            match v.as_str() {
                Some(v) => {
                    for m in label_value_errors(v) {
                        errs.push(invalid("metadata.labels", v, &m));
                    }
                }
                None => errs.push(invalid_value(
                    &format!("metadata.labels[{k}]"),
                    v,
                    "must be a string",
                )),
            }
        }
    }
    if let Some(ann) = str_map(obj, "/metadata/annotations") {
        let mut total = 0usize;
        for (k, v) in ann {
            for m in label_key_errors(&k.to_lowercase()) {
                errs.push(invalid("metadata.annotations", k, &m));
            }
            total += k.len() + v.as_str().map_or(0, str::len);
        }
        if total > TOTAL_ANNOTATION_SIZE_LIMIT {
            errs.push(too_long(
                "metadata.annotations",
                TOTAL_ANNOTATION_SIZE_LIMIT,
            ));
        }
    }
    if let Some(fins) = obj
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
    {
        for f in fins {
            let f = f.as_str().unwrap_or("");
            for m in label_key_errors(f) {
                errs.push(invalid("metadata.finalizers", f, &m));
            }
        }
    }
    if let Some(refs) = obj
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
    {
        for r in refs {
            let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("");
            let av = s("apiVersion");
            let version = av.rsplit('/').next().unwrap_or("");
            if version.is_empty() {
                errs.push(invalid(
                    "metadata.ownerReferences.apiVersion",
                    av,
                    "version must not be empty",
                ));
            }
            for (k, path) in [
                ("kind", "metadata.ownerReferences.kind"),
                ("name", "metadata.ownerReferences.name"),
                ("uid", "metadata.ownerReferences.uid"),
            ] {
                if s(k).is_empty() {
                    errs.push(invalid(path, "", "must not be empty"));
                }
            }
        }
    }
    errs
}

/// `ValidateObjectMetaUpdate`'s immutable fields (name, namespace, uid, creationTimestamp).
pub fn validate_object_meta_update(new: &Value, old: &Value) -> Vec<Cause> {
    let mut errs = Vec::new();
    for (ptr, field) in [
        ("/metadata/name", "metadata.name"),
        ("/metadata/namespace", "metadata.namespace"),
        ("/metadata/uid", "metadata.uid"),
        ("/metadata/creationTimestamp", "metadata.creationTimestamp"),
    ] {
        let n = new.pointer(ptr).cloned().unwrap_or(Value::Null);
        let o = old.pointer(ptr).cloned().unwrap_or(Value::Null);
        let n_empty = n.is_null() || n.as_str() == Some("");
        let o_empty = o.is_null() || o.as_str() == Some("");
        if n != o && !(n_empty && o_empty) {
            errs.push(invalid_value(field, &n, FIELD_IMMUTABLE));
        }
    }
    errs.extend(validate_meta_common(new));
    errs
}

fn data_size_and_keys(obj: &Value, field: &str, errs: &mut Vec<Cause>, decode: bool) -> usize {
    let mut total = 0usize;
    if let Some(m) = obj.get(field).and_then(Value::as_object) {
        for (k, v) in m {
            for msg in config_map_key_errors(k) {
                errs.push(invalid(&key_path(field, k), k, &msg));
            }
            let s = v.as_str().unwrap_or("");
            total += if decode {
                base64::engine::general_purpose::STANDARD
                    .decode(s)
                    .map_or(s.len(), |b| b.len())
            } else {
                s.len()
            };
        }
    }
    total
}

/// Per-kind validation of a new or updated object (`old` is the stored object for an
/// update). Returns the field errors; empty when valid.
pub fn validate(rt: &ResourceType, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut errs = match old {
        None => validate_object_meta(rt, obj),
        Some(old) => validate_object_meta_update(obj, old),
    };
    match (rt.group, rt.kind) {
        ("", "ConfigMap") => {
            let mut total = data_size_and_keys(obj, "data", &mut errs, false);
            total += data_size_and_keys(obj, "binaryData", &mut errs, true);
            if let (Some(d), Some(b)) = (
                obj.get("data").and_then(Value::as_object),
                obj.get("binaryData").and_then(Value::as_object),
            ) {
                for k in d.keys() {
                    if b.contains_key(k) {
                        errs.push(invalid(
                            &key_path("data", k),
                            k,
                            "duplicate of key present in binaryData",
                        ));
                    }
                }
            }
            if total > MAX_DATA_SIZE {
                errs.push(too_long("[]", MAX_DATA_SIZE));
            }
            if let Some(old) = old {
                errs.extend(immutable_data_rules(obj, old, &["data", "binaryData"]));
            }
        }
        ("", "Secret") => {
            let total = data_size_and_keys(obj, "data", &mut errs, true);
            if total > MAX_DATA_SIZE {
                errs.push(too_long("data", MAX_DATA_SIZE));
            }
            if let Some(old) = old {
                let t = |o: &Value| {
                    o.get("type")
                        .and_then(Value::as_str)
                        .unwrap_or("Opaque")
                        .to_string()
                };
                if t(obj) != t(old) {
                    errs.push(invalid("type", &t(obj), FIELD_IMMUTABLE));
                }
                errs.extend(immutable_data_rules(obj, old, &["data"]));
            }
        }
        ("", "Node") => {
            if let Some(taints) = obj.pointer("/spec/taints").and_then(Value::as_array) {
                let mut seen: Vec<(String, String)> = Vec::new();
                for (i, t) in taints.iter().enumerate() {
                    let key = t.get("key").and_then(Value::as_str).unwrap_or("");
                    let effect = t.get("effect").and_then(Value::as_str).unwrap_or("");
                    let base = format!("spec.taints[{i}]");
                    if key.is_empty() {
                        errs.push(required(&format!("{base}.key"), ""));
                    } else {
                        for m in label_key_errors(key) {
                            errs.push(invalid(&format!("{base}.key"), key, &m));
                        }
                    }
                    if let Some(v) = t.get("value").and_then(Value::as_str) {
                        for m in label_value_errors(v) {
                            errs.push(invalid(&format!("{base}.value"), v, &m));
                        }
                    }
                    const EFFECTS: [&str; 3] = ["NoExecute", "NoSchedule", "PreferNoSchedule"];
                    if effect.is_empty() {
                        errs.push(required(&format!("{base}.effect"), ""));
                    } else if !EFFECTS.contains(&effect) {
                        errs.push(not_supported(&format!("{base}.effect"), effect, &EFFECTS));
                    }
                    let pair = (key.to_string(), effect.to_string());
                    if seen.contains(&pair) {
                        errs.push(duplicate(&base, &format!("{key}:{effect}")));
                    }
                    seen.push(pair);
                }
            }
        }
        ("coordination.k8s.io", "Lease") => {
            // upstream's ValidateLeaseSpec: a duration must be positive, a count not
            // negative.
            for (f, min, msg) in [
                ("leaseDurationSeconds", 1, "must be greater than 0"),
                ("leaseTransitions", 0, "must be greater than or equal to 0"),
            ] {
                if let Some(v) = obj.pointer(&format!("/spec/{f}"))
                    && v.as_i64().is_some_and(|n| n < min)
                {
                    errs.push(invalid_value(&format!("spec.{f}"), v, msg));
                }
            }
        }
        ("", "Pod") => {
            errs.extend(pod_spec_rules(obj));
            if let Some(old) = old {
                let mask = |o: &Value| {
                    crate::store::immutable_pod_spec(o.get("spec").unwrap_or(&Value::Null))
                };
                if mask(obj) != mask(old) {
                    errs.push(forbidden(
                        "spec",
                        &format!(
                            "pod updates may not change fields other than {}",
                            UPDATABLE_POD_SPEC_FIELDS.join(",")
                        ),
                    ));
                }
            }
        }
        ("policy", "PodDisruptionBudget") => errs.extend(budget_spec_rules(obj)),
        _ => {}
    }
    errs
}

/// upstream `updatablePodSpecFields`, as the Forbidden message of a pod update lists them.
const UPDATABLE_POD_SPEC_FIELDS: [&str; 5] = [
    "`spec.containers[*].image`",
    "`spec.initContainers[*].image`",
    "`spec.activeDeadlineSeconds`",
    "`spec.tolerations` (only additions to existing tolerations)",
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
];

/// The part of `ValidatePodSpec` that matters here: containers (required, named as
/// DNS-1123 labels, unique, with an image) and a node name that is a DNS subdomain.
fn pod_spec_rules(obj: &Value) -> Vec<Cause> {
    let mut errs = Vec::new();
    let containers = obj.pointer("/spec/containers").and_then(Value::as_array);
    if containers.is_none_or(|c| c.is_empty()) {
        errs.push(required("spec.containers", ""));
    }
    let mut seen: Vec<&str> = Vec::new();
    for (list, cs) in [
        (
            "initContainers",
            obj.pointer("/spec/initContainers")
                .and_then(Value::as_array),
        ),
        ("containers", containers),
    ] {
        for (i, c) in cs.into_iter().flatten().enumerate() {
            let base = format!("spec.{list}[{i}]");
            let name = c.get("name").and_then(Value::as_str).unwrap_or("");
            if name.is_empty() {
                errs.push(required(&format!("{base}.name"), ""));
            } else {
                for m in names::dns1123_label_errors(name) {
                    errs.push(invalid(&format!("{base}.name"), name, &m));
                }
                if seen.contains(&name) {
                    errs.push(duplicate(&format!("{base}.name"), name));
                }
                seen.push(name);
            }
            if c.get("image")
                .and_then(Value::as_str)
                .unwrap_or("")
                .trim()
                .is_empty()
            {
                errs.push(required(&format!("{base}.image"), ""));
            }
        }
    }
    if let Some(node) = obj.pointer("/spec/nodeName").and_then(Value::as_str)
        && !node.is_empty()
    {
        for m in names::dns1123_subdomain_errors(node) {
            errs.push(invalid("spec.nodeName", node, &m));
        }
    }
    errs
}

/// `ValidatePodDisruptionBudgetSpec`: not both of minAvailable and maxUnavailable, each
/// a non-negative number or a percentage up to 100%, a known unhealthy pod eviction
/// policy.
fn budget_spec_rules(obj: &Value) -> Vec<Cause> {
    let mut errs = Vec::new();
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    let set = |f: &str| spec.get(f).filter(|v| !v.is_null());
    if set("minAvailable").is_some() && set("maxUnavailable").is_some() {
        errs.push(invalid_value(
            "spec",
            &spec,
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
    for f in ["minAvailable", "maxUnavailable"] {
        let Some(v) = set(f) else { continue };
        let path = format!("spec.{f}");
        match v {
            Value::Number(n) => {
                if n.as_i64().is_none_or(|n| n < 0) {
                    errs.push(invalid_value(
                        &path,
                        v,
                        "must be greater than or equal to 0",
                    ));
                }
            }
            Value::String(s) => {
                let digits = s
                    .strip_suffix('%')
                    .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
                match digits {
                    None => errs.push(invalid(&path, s, "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")),
                    Some(d) if d.parse::<u64>().is_ok_and(|p| p > 100) => {
                        errs.push(invalid(&path, s, "must not be greater than 100%"));
                    }
                    Some(_) => {}
                }
            }
            other => errs.push(invalid_value(
                &path,
                other,
                "must be an integer or a percentage",
            )),
        }
    }
    if let Some(p) = spec
        .get("unhealthyPodEvictionPolicy")
        .and_then(Value::as_str)
    {
        const POLICIES: [&str; 2] = ["AlwaysAllow", "IfHealthyBudget"];
        if !POLICIES.contains(&p) {
            errs.push(not_supported(
                "spec.unhealthyPodEvictionPolicy",
                p,
                &POLICIES,
            ));
        }
    }
    errs
}

fn immutable_data_rules(new: &Value, old: &Value, fields: &[&str]) -> Vec<Cause> {
    let mut errs = Vec::new();
    if old.get("immutable").and_then(Value::as_bool) == Some(true) {
        if new.get("immutable").and_then(Value::as_bool) != Some(true) {
            errs.push(forbidden("immutable", IMMUTABLE_WHEN_SET));
        }
        for f in fields {
            let empty = |v: Option<&Value>| match v {
                None | Some(Value::Null) => true,
                Some(Value::Object(m)) => m.is_empty(),
                _ => false,
            };
            let (n, o) = (new.get(*f), old.get(*f));
            let same = (empty(n) && empty(o)) || n == o;
            if !same {
                errs.push(forbidden(f, IMMUTABLE_WHEN_SET));
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ApiError;
    use crate::resources::kinds;
    use serde_json::json;

    #[test]
    fn dns_names() {
        assert!(dns1123_subdomain_errors("a.b-c").is_empty());
        assert_eq!(
            dns1123_subdomain_errors("Abc"),
            vec![
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            ]
        );
        let long = "a".repeat(254);
        assert_eq!(
            dns1123_subdomain_errors(&long),
            vec!["must be no more than 253 characters"]
        );
        assert_eq!(dns1123_label_errors("a.b"), vec!["must not contain dots"]);
        assert!(dns1123_label_errors("-a")[0].starts_with("a lowercase RFC 1123 label"));
        assert!(dns1123_label_errors("ab-1").is_empty());
    }

    #[test]
    fn label_keys_and_values() {
        assert!(label_key_errors("example.com/my-key_1.x").is_empty());
        assert_eq!(
            label_key_errors("/a"),
            vec!["prefix part must be non-empty"]
        );
        assert_eq!(
            label_key_errors("a/"),
            vec![
                "name part must be non-empty".to_string(),
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".to_string(),
            ]
        );
        assert!(label_key_errors("a/b/c")[0].starts_with("a valid label key must consist"));
        assert!(
            label_key_errors("Bad_Prefix/x")[0]
                .starts_with("prefix part a lowercase RFC 1123 subdomain")
        );
        assert!(label_value_errors("").is_empty());
        assert!(label_value_errors("v1.2_x").is_empty());
        assert_eq!(
            label_value_errors(&"a".repeat(64)),
            vec!["must be no more than 63 bytes"]
        );
        assert!(label_value_errors("-x")[0].starts_with("a valid label must be an empty string"));
    }

    #[test]
    fn config_map_keys() {
        assert!(config_map_key_errors("kubelet.yaml").is_empty());
        assert_eq!(
            config_map_key_errors("..x"),
            vec!["must not start with '..'"]
        );
        assert!(config_map_key_errors("a/b")[0].starts_with("a valid config key"));
    }

    #[test]
    fn object_meta_messages() {
        let cm = json!({"metadata": {"name": "Bad_Name", "namespace": "default"}});
        let errs = validate(kinds::configmaps(), &cm, None);
        let e = ApiError::invalid(kinds::configmaps(), "Bad_Name", errs);
        assert!(
            e.message.starts_with("ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"),
            "{}",
            e.message
        );
        let ns = json!({"metadata": {"name": "a.b"}});
        let errs = validate(kinds::namespaces(), &ns, None);
        assert_eq!(
            errs[0].message,
            "Invalid value: \"a.b\": must not contain dots"
        );
        let node = json!({"metadata": {"name": "n", "namespace": "x"}});
        let errs = validate(kinds::nodes(), &node, None);
        assert_eq!(
            errs[0].to_string(),
            "metadata.namespace: Forbidden: not allowed on this type"
        );
        let noname = json!({"metadata": {"namespace": "default"}});
        let errs = validate(kinds::configmaps(), &noname, None);
        assert_eq!(
            errs[0].to_string(),
            "metadata.name: Required value: name or generateName is required"
        );
    }

    #[test]
    fn labels_and_annotations() {
        let cm = json!({"metadata": {"name": "a", "namespace": "d", "labels": {"k": "bad value"}}});
        let errs = validate(kinds::configmaps(), &cm, None);
        assert_eq!(errs.len(), 1);
        assert!(
            errs[0]
                .to_string()
                .starts_with("metadata.labels: Invalid value: \"bad value\": a valid label")
        );
        let big = "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT);
        let cm = json!({"metadata": {"name": "a", "namespace": "d", "annotations": {"k": big}}});
        let errs = validate(kinds::configmaps(), &cm, None);
        assert_eq!(
            errs[0].to_string(),
            "metadata.annotations: Too long: must have at most 262144 bytes"
        );
        let ok = "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT - 1);
        let cm = json!({"metadata": {"name": "a", "namespace": "d", "annotations": {"k": ok}}});
        assert!(validate(kinds::configmaps(), &cm, None).is_empty());
        // Annotation keys are checked case-insensitively.
        let cm = json!({"metadata": {"name": "a", "namespace": "d", "annotations": {"Example.COM/Key": "v"}}});
        assert!(validate(kinds::configmaps(), &cm, None).is_empty());
    }

    #[test]
    fn config_map_size_and_immutability() {
        let big = "x".repeat(MAX_DATA_SIZE + 1);
        let cm = json!({"metadata": {"name": "a", "namespace": "d"}, "data": {"k": big}});
        let errs = validate(kinds::configmaps(), &cm, None);
        let e = ApiError::invalid(kinds::configmaps(), "a", errs);
        assert_eq!(
            e.message,
            "ConfigMap \"a\" is invalid: []: Too long: must have at most 1048576 bytes"
        );
        let exact = "x".repeat(MAX_DATA_SIZE);
        let cm = json!({"metadata": {"name": "a", "namespace": "d"}, "data": {"k": exact}});
        assert!(validate(kinds::configmaps(), &cm, None).is_empty());

        let old = json!({"metadata": {"name": "a", "namespace": "d"}, "data": {"k": "1"}, "immutable": true});
        let new = json!({"metadata": {"name": "a", "namespace": "d"}, "data": {"k": "2"}, "immutable": true});
        let e = ApiError::invalid(
            kinds::configmaps(),
            "a",
            validate(kinds::configmaps(), &new, Some(&old)),
        );
        assert_eq!(
            e.message,
            "ConfigMap \"a\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
        );
        let unset = json!({"metadata": {"name": "a", "namespace": "d"}, "data": {"k": "1"}, "immutable": false});
        let errs = validate(kinds::configmaps(), &unset, Some(&old));
        assert_eq!(
            errs[0].to_string(),
            "immutable: Forbidden: field is immutable when `immutable` is set"
        );
        let labels_only = json!({"metadata": {"name": "a", "namespace": "d", "labels": {"x": "y"}}, "data": {"k": "1"}, "immutable": true});
        assert!(validate(kinds::configmaps(), &labels_only, Some(&old)).is_empty());
    }

    #[test]
    fn secret_rules() {
        let s = json!({"metadata": {"name": "s", "namespace": "d"}, "data": {"bad key": "eA=="}});
        let errs = validate(kinds::secrets(), &s, None);
        assert_eq!(errs[0].field, "data[bad key]");
        let old = json!({"metadata": {"name": "s", "namespace": "d"}, "type": "Opaque"});
        let new = json!({"metadata": {"name": "s", "namespace": "d"}, "type": "kubernetes.io/tls"});
        let errs = validate(kinds::secrets(), &new, Some(&old));
        assert_eq!(
            errs[0].to_string(),
            "type: Invalid value: \"kubernetes.io/tls\": field is immutable"
        );
    }

    #[test]
    fn node_taints() {
        let n = json!({"metadata": {"name": "n"}, "spec": {"taints": [{"key": "k", "effect": "Sometimes"}]}});
        let errs = validate(kinds::nodes(), &n, None);
        assert_eq!(
            errs[0].to_string(),
            "spec.taints[0].effect: Unsupported value: \"Sometimes\": supported values: \"NoExecute\", \"NoSchedule\", \"PreferNoSchedule\""
        );
    }

    #[test]
    fn update_immutable_meta() {
        let old = json!({"metadata": {"name": "a", "uid": "1"}});
        let new = json!({"metadata": {"name": "a", "uid": "2"}});
        let errs = validate_object_meta_update(&new, &old);
        assert_eq!(
            errs[0].to_string(),
            "metadata.uid: Invalid value: \"2\": field is immutable"
        );
    }

    #[test]
    fn quoting() {
        assert_eq!(go_quote("a\"b\\\n"), "\"a\\\"b\\\\\\n\"");
    }
}
