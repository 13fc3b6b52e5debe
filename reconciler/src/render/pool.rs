//! A pool file, `pools/<name>.yaml`: a `kubelet-gitops.io/v1alpha1` `NodePool`.
//!
//! Each part of the document (metadata, selector, priority, rollout, kubelet) is decoded
//! on its own, so that one file reports all of its problems at once rather than the
//! first one only.

use std::collections::HashMap;

use kubelet_gitops_core::decode::{self, SourceMap, join_index, join_key};
use kubelet_gitops_core::disruption::Overrides;
use kubelet_gitops_core::names::{self, Wording, label_key_errors, label_value_errors};
use kubelet_gitops_core::types::KubeletConfiguration;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;

use super::error::{RepoError, decode_part};
use super::fields::{is_within, join_path, shallow, take, take_type_meta, without_nulls};
use super::settings::RepoSettings;
use super::settings::{API_VERSION, POOL_KIND, RolloutDoc, resolve_rollout};
use crate::model::{LabelSelector, Operator, PoolSpec};

/// A pool file, decoded and checked, before merging with the base.
#[derive(Debug, Clone)]
pub(super) struct PoolDoc {
    /// The file, relative to the repository root.
    pub path: String,
    /// Name, selector, priority, rollout (settings' defaults applied).
    pub spec: PoolSpec,
    /// `spec.kubelet` as written (an object; `{}` when absent), without
    /// `apiVersion`/`kind`.
    pub kubelet: Value,
    /// Positions in the file, paths from the document root (`spec.kubelet.maxPods`).
    pub map: SourceMap,
    /// `kubelet` decoded, its `null`s left out: the pool's config when the base sets
    /// nothing.
    pub config: KubeletConfiguration,
    /// The disruption classes in force for the pool: the settings', then the pool's own
    /// `spec.disruption.classes` over them.
    pub disruption: Overrides,
}

/// The document's shape (its fields and, of each, whether it is a scalar): decoded from
/// [`shallow`] of the document, its values then taken from the document itself, so that
/// nothing is copied.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PoolTop {
    // Checked by `check_type_meta` before this struct is decoded.
    #[serde(rename = "apiVersion")]
    _api_version: IgnoredAny,
    #[serde(rename = "kind")]
    _kind: IgnoredAny,
    #[serde(rename = "metadata")]
    _metadata: Option<IgnoredAny>,
    #[serde(rename = "spec")]
    _spec: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Metadata {
    name: Option<String>,
}

/// `spec`'s shape, as [`PoolTop`]: `priority` decoded, the other values taken from the
/// document.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SpecDoc {
    #[serde(rename = "nodeSelector")]
    _node_selector: Option<IgnoredAny>,
    priority: Option<i32>,
    #[serde(rename = "rollout")]
    _rollout: Option<IgnoredAny>,
    #[serde(rename = "kubelet")]
    _kubelet: Option<IgnoredAny>,
    #[serde(rename = "disruption")]
    _disruption: Option<IgnoredAny>,
}

/// Decodes and checks the pool file `path`. `None` when anything is wrong (every problem
/// is in `errors`).
pub(super) fn decode(
    path: &str,
    bytes: &[u8],
    settings: &RepoSettings,
    errors: &mut Vec<RepoError>,
) -> Option<PoolDoc> {
    let before = errors.len();
    let (mut value, map) = match decode::decode_value(path, bytes) {
        Ok(v) => v,
        Err(e) => {
            errors.push(e.into());
            return None;
        }
    };
    if let Err(e) = decode::check_type_meta(path, &value, &map, API_VERSION, POOL_KIND) {
        let mut e = RepoError::from(e);
        e.message.push_str(&format!(
            " (every YAML file in pools/ must be a {POOL_KIND}; exclude other files with \
             `exclude` in kubelet-gitops.yaml)"
        ));
        errors.push(e);
        return None;
    }
    if let Err(e) = decode_part::<PoolTop>(path, &shallow(&value), &map, "") {
        errors.push(e);
        return None;
    }
    let metadata = take(&mut value, "metadata");
    let spec_value = take(&mut value, "spec");

    let name = decode_name(path, metadata.as_ref(), &map, errors);

    let Some(mut spec_value) = spec_value else {
        errors.push(RepoError::new(
            path,
            "spec",
            "spec is required: a NodePool needs at least spec.nodeSelector",
        ));
        return None;
    };
    let spec: SpecDoc = match decode_part(path, &shallow(&spec_value), &map, "spec") {
        Ok(s) => s,
        Err(e) => {
            errors.push(e);
            return None;
        }
    };
    let node_selector = take(&mut spec_value, "nodeSelector");
    let rollout = take(&mut spec_value, "rollout");
    let kubelet = take(&mut spec_value, "kubelet");
    let disruption = take(&mut spec_value, "disruption").map_or_else(
        || settings.disruption.clone(),
        |v| {
            let own = super::disruption::decode(path, &map, "spec.disruption", &v, errors);
            settings.disruption.overlaid(&own)
        },
    );

    let selector = match node_selector.as_ref() {
        None => {
            errors.push(RepoError::at_field(
                path,
                &map,
                "spec.nodeSelector",
                "spec.nodeSelector is required; write `nodeSelector: {}` to select every node",
            ));
            None
        }
        Some(v) => match decode_part::<LabelSelector>(path, v, &map, "spec.nodeSelector") {
            Ok(sel) => {
                check_selector(path, &map, &sel, errors);
                Some(sel)
            }
            Err(e) => {
                errors.push(e);
                None
            }
        },
    };

    let rollout = match rollout.as_ref() {
        None => settings.rollout_defaults.clone(),
        Some(v) => match decode_part::<RolloutDoc>(path, v, &map, "spec.rollout") {
            Ok(doc) => resolve_rollout(
                path,
                &map,
                "spec.rollout",
                &doc,
                &settings.rollout_defaults,
                errors,
            ),
            Err(e) => {
                errors.push(e);
                settings.rollout_defaults.clone()
            }
        },
    };

    let kubelet = decode_kubelet(path, kubelet, &map, settings, errors);

    if errors.len() > before {
        return None;
    }
    let (Some(name), Some(selector), Some((kubelet, config))) = (name, selector, kubelet) else {
        return None;
    };
    Some(PoolDoc {
        path: path.to_string(),
        spec: PoolSpec {
            name,
            source_path: path.to_string(),
            selector,
            priority: spec.priority.unwrap_or(0),
            rollout,
        },
        kubelet,
        map,
        config,
        disruption,
    })
}

/// `metadata.name`: present, a DNS-1123 label, equal to the file's stem.
fn decode_name(
    path: &str,
    metadata: Option<&Value>,
    map: &SourceMap,
    errors: &mut Vec<RepoError>,
) -> Option<String> {
    let stem = path
        .rsplit('/')
        .next()
        .and_then(|f| f.strip_suffix(".yaml").or_else(|| f.strip_suffix(".yml")))
        .unwrap_or(path);
    let name = match metadata.filter(|v| !v.is_null()) {
        None => None,
        Some(v) => match decode_part::<Metadata>(path, v, map, "metadata") {
            Ok(m) => m.name,
            Err(e) => {
                errors.push(e);
                return None;
            }
        },
    };
    let Some(name) = name else {
        errors.push(RepoError::at_field(
            path,
            map,
            "metadata.name",
            format!("metadata.name is required and must be the file's name, {stem:?}"),
        ));
        return None;
    };
    if let Some(m) = names::joined(names::dns1123_label_errors(&name)) {
        errors.push(RepoError::at_field(
            path,
            map,
            "metadata.name",
            format!(
                "invalid pool name {name:?}: {m} (the name is the value of the \
                 kubelet-gitops.io/pool label and part of the ConfigMap name \
                 kubelet-<pool>-<hash>)"
            ),
        ));
        return None;
    }
    if name == "plan" {
        errors.push(RepoError::at_field(
            path,
            map,
            "metadata.name",
            "the pool name \"plan\" is reserved: its status context kubelet-gitops/plan is the \
             pull-request review status; choose another name"
                .to_string(),
        ));
        return None;
    }
    if name != stem {
        errors.push(RepoError::at_field(
            path,
            map,
            "metadata.name",
            format!(
                "metadata.name {name:?} must equal the file's name {stem:?} (pools/<name>.yaml): \
                 rename the file or the pool"
            ),
        ));
        return None;
    }
    Some(name)
}

/// `metav1.ValidateLabelSelector`: operators and values, label keys and values.
fn check_selector(path: &str, map: &SourceMap, sel: &LabelSelector, errors: &mut Vec<RepoError>) {
    const PREFIX: &str = "spec.nodeSelector";
    let mut fail = |field: String, message: String| {
        errors.push(RepoError::at_field(path, map, field, message));
    };
    for (field, message) in sel.problems() {
        fail(join_path(PREFIX, &field), message);
    }
    for (k, v) in &sel.match_labels {
        let field = join_key(&join_key(PREFIX, "matchLabels"), k);
        for m in label_key_errors(k, Wording::Validation) {
            fail(field.clone(), format!("invalid label key {k:?}: {m}"));
        }
        for m in label_value_errors(v, Wording::Validation) {
            fail(field.clone(), format!("invalid label value {v:?}: {m}"));
        }
    }
    for (i, r) in sel.match_expressions.iter().enumerate() {
        let at = join_index(&join_key(PREFIX, "matchExpressions"), i);
        for m in label_key_errors(&r.key, Wording::Validation) {
            fail(
                join_key(&at, "key"),
                format!("invalid label key {:?}: {m}", r.key),
            );
        }
        if matches!(r.operator, Operator::In | Operator::NotIn) {
            for (j, v) in r.values.iter().enumerate() {
                for m in label_value_errors(v, Wording::Validation) {
                    fail(
                        join_index(&join_key(&at, "values"), j),
                        format!("invalid label value {v:?}: {m}"),
                    );
                }
            }
        }
    }
}

/// `spec.kubelet`: a strictly valid partial KubeletConfiguration (the kubelet decoder's
/// errors and suggestions, at their lines in the pool file), `apiVersion`/`kind` removed,
/// and nothing the policy forbids; with it decoded.
fn decode_kubelet(
    path: &str,
    kubelet: Option<Value>,
    map: &SourceMap,
    settings: &RepoSettings,
    errors: &mut Vec<RepoError>,
) -> Option<(Value, KubeletConfiguration)> {
    const PREFIX: &str = "spec.kubelet";
    let mut value = match kubelet {
        None | Some(Value::Null) => {
            return Some((
                Value::Object(serde_json::Map::new()),
                KubeletConfiguration::default(),
            ));
        }
        Some(v) => v,
    };
    // `null` removes a field of the base (JSON merge patch): check what remains.
    let config =
        match decode_part::<KubeletConfiguration>(path, &without_nulls(&value), map, PREFIX) {
            Ok(c) => c,
            Err(e) => {
                errors.push(e);
                return None;
            }
        };
    let Value::Object(fields) = &mut value else {
        // A typed decode of a non-object into the config struct fails above.
        return None;
    };
    let mut ok = true;
    for (key, other, expected) in take_type_meta(fields) {
        ok = false;
        errors.push(RepoError::at_field(
            path,
            map,
            join_key(PREFIX, key),
            format!("{key} is {other}; spec.kubelet may only say {expected:?} (or leave it out)"),
        ));
    }
    let forbidden_fields = &settings.policy.forbidden_pool_fields;
    // Without a policy there is nothing to look for: no paths to list.
    let set = if forbidden_fields.is_empty() {
        Vec::new()
    } else {
        set_paths(&value)
    };
    let hits = first_hits(&set, forbidden_fields);
    for forbidden in forbidden_fields {
        // The pool sets the field or something under it, or removes (null) an ancestor.
        let hit = hits.get(forbidden.as_str()).and_then(|&i| set.get(i));
        if let Some((p, _)) = hit {
            ok = false;
            let settings_file = settings
                .source_path
                .as_deref()
                .unwrap_or("kubelet-gitops.yaml");
            errors.push(RepoError::at_field(
                path,
                map,
                join_key(PREFIX, p),
                format!(
                    "pools may not set {forbidden}: {settings_file} lists it in \
                     spec.policy.forbiddenPoolFields (set it in base/kubelet.yaml, or change \
                     the policy)"
                ),
            ));
        }
    }
    ok.then_some((value, config))
}

/// For each of `forbidden` that the pool touches, the index in `set` of the first path
/// that does: the field itself or a path under it, or a `null` (a removal) of an ancestor.
/// Both lists are sorted once and each forbidden field is looked up by prefix, so the cost
/// is linear in the paths (a path is visited once per forbidden field that is a prefix of
/// it), not the product of the two lists.
fn first_hits<'f>(set: &[(String, &Value)], forbidden: &'f [String]) -> HashMap<&'f str, usize> {
    let mut hits: HashMap<&str, usize> = HashMap::new();
    let mut keep = |field: &'f str, index: usize| {
        let first = hits.entry(field).or_insert(index);
        *first = (*first).min(index);
    };
    let mut paths: Vec<(&str, usize)> = set
        .iter()
        .enumerate()
        .map(|(i, (p, _))| (p.as_str(), i))
        .collect();
    paths.sort_unstable();
    let mut fields: Vec<&str> = forbidden.iter().map(String::as_str).collect();
    fields.sort_unstable();
    fields.dedup();
    // Paths within a forbidden field: among those it is a prefix of.
    for &field in &fields {
        let from = paths.partition_point(|(p, _)| *p < field);
        for &(p, i) in paths[from..]
            .iter()
            .take_while(|(p, _)| p.starts_with(field))
        {
            if is_within(p, field) {
                keep(field, i);
            }
        }
    }
    // Forbidden fields under a path the pool removes.
    for (i, (p, v)) in set.iter().enumerate() {
        if !v.is_null() {
            continue;
        }
        let from = fields.partition_point(|f| *f < p.as_str());
        for &field in fields[from..]
            .iter()
            .take_while(|f| f.starts_with(p.as_str()))
        {
            if is_within(field, p) {
                keep(field, i);
            }
        }
    }
    hits
}

/// Every path the value sets (objects and list elements, recursively), with its value.
pub(super) fn set_paths(value: &Value) -> Vec<(String, &Value)> {
    fn walk<'v>(prefix: &str, value: &'v Value, out: &mut Vec<(String, &'v Value)>) {
        match value {
            Value::Object(m) => {
                for (k, v) in m {
                    let p = join_key(prefix, k);
                    out.push((p.clone(), v));
                    walk(&p, v, out);
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    let p = join_index(prefix, i);
                    out.push((p.clone(), v));
                    walk(&p, v, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk("", value, &mut out);
    out
}
