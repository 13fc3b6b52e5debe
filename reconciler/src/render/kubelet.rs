//! A pool's KubeletConfiguration: the base file, the merge, the rendered YAML, and the
//! kubelet's validation with every problem traced back to the file and line that set
//! the field.

use std::collections::BTreeMap;

use kubelet_gitops_core::decode::{self, Position, SourceMap, join_key};
use kubelet_gitops_core::disruption::Overrides;
use kubelet_gitops_core::effective::merge_patch;
use kubelet_gitops_core::types::{self as kubelet_types, KubeletConfiguration};
use kubelet_gitops_core::validation::{self, HostInfo};
use kubelet_gitops_core::{defaults, protocol};
use serde_json::Value;

use super::error::RepoError;
use super::fields::{take_type_meta, without_nulls};
use super::pool::PoolDoc;
use crate::model::PoolSpec;

/// One pool, rendered.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedPool {
    /// Name, selector, priority and rollout (defaults applied).
    pub spec: PoolSpec,
    /// The exact YAML stored under key `kubelet` of the pool's ConfigMap: a complete
    /// `kubelet.config.k8s.io/v1beta1` `KubeletConfiguration`, `apiVersion` and `kind`
    /// first, without the kubelet's defaults. The same inputs always give the same bytes.
    pub rendered: String,
    /// `rendered`, decoded (not defaulted).
    pub config: KubeletConfiguration,
    /// `kubelet-<pool>-<hash>`: [`kubelet_gitops_core::protocol::configmap_name`] of
    /// `rendered`.
    pub configmap_name: String,
    /// The disruption classes the repository gives fields for this pool (the settings',
    /// the pool's own over them); the built-in ones apply to every other field. Not part
    /// of the ConfigMap's content or name.
    pub disruption: Overrides,
}

/// `base/kubelet.yaml`, decoded and checked: the object every pool's config starts from.
#[derive(Debug, Clone, Default)]
pub(super) struct Base {
    /// The file, relative to the repository root; `None` when the repository has none.
    pub path: Option<String>,
    /// The fields it sets, without `apiVersion`/`kind`.
    pub value: Value,
    pub map: SourceMap,
}

/// Errors located in the base file, with the pools whose rendering found them: one base
/// mistake is reported once, naming every pool it breaks.
#[derive(Debug, Default)]
pub(super) struct BaseErrors(BTreeMap<RepoError, Vec<String>>);

impl BaseErrors {
    fn add(&mut self, error: RepoError, pool: &str) {
        self.0.entry(error).or_default().push(pool.to_string());
    }

    /// The errors, each saying which pools' configs it breaks.
    pub(super) fn into_errors(self) -> impl Iterator<Item = RepoError> {
        self.0.into_iter().map(|(mut e, pools)| {
            let s = if pools.len() == 1 { "" } else { "s" };
            e.message
                .push_str(&format!(" (in the config of pool{s} {})", pools.join(", ")));
            e
        })
    }
}

/// Decodes `base/kubelet.yaml`: a partial KubeletConfiguration, with or without
/// `apiVersion`/`kind` (when present they must be the kubelet's).
pub(super) fn decode_base(path: &str, bytes: &[u8], errors: &mut Vec<RepoError>) -> Option<Base> {
    let (mut value, map) = match decode::decode_value(path, bytes) {
        Ok(v) => v,
        Err(e) => {
            errors.push(e.into());
            return None;
        }
    };
    if let Err(e) = decode::from_value::<KubeletConfiguration>(path, &without_nulls(&value), &map) {
        errors.push(e.into());
        return None;
    }
    let Value::Object(fields) = &mut value else {
        // decode_value only returns mappings.
        return None;
    };
    let mut ok = true;
    for (key, other, expected) in take_type_meta(fields) {
        ok = false;
        errors.push(RepoError::at_field(
            path,
            &map,
            key,
            format!("{key} is {other}, expected {expected:?} (or leave it out)"),
        ));
    }
    ok.then(|| Base {
        path: Some(path.to_string()),
        value,
        map,
    })
}

/// Merges the pool over the base, validates the result as the kubelet would, and renders
/// the YAML of a valid one. Errors located in the pool file go to `errors`, those in the
/// base to `base_errors`.
pub(super) fn render_pool(
    mut doc: PoolDoc,
    base: &Base,
    errors: &mut Vec<RepoError>,
    base_errors: &mut BaseErrors,
) -> Option<RenderedPool> {
    let base_is_empty = match &base.value {
        Value::Null => true,
        Value::Object(fields) => fields.is_empty(),
        _ => false,
    };
    let mut config: KubeletConfiguration = if base_is_empty {
        // The merge is the pool's `spec.kubelet` without its `null`s: decoded already.
        std::mem::take(&mut doc.config)
    } else {
        let mut merged = Value::Object(serde_json::Map::new());
        merge_patch(&mut merged, &base.value);
        merge_patch(&mut merged, &doc.kubelet);
        match decode::from_value(&doc.path, &merged, &SourceMap::new()) {
            Ok(c) => c,
            Err(e) => {
                // Both parts decoded on their own; only their combination can fail here.
                let field = e.field.clone().unwrap_or_default();
                errors.push(
                    RepoError::new(
                        &doc.path,
                        join_key("spec.kubelet", &field),
                        format!(
                            "the config merged over the base does not decode: {}",
                            e.message
                        ),
                    )
                    .at(doc.map.position(&join_key("spec.kubelet", &field))),
                );
                return None;
            }
        }
    };
    config.api_version = Some(kubelet_types::API_VERSION.to_string());
    config.kind = Some(kubelet_types::KIND.to_string());

    let name = &doc.spec.name;
    let effective = defaults::defaulted(&config);
    let problems = validation::validate(&effective, &HostInfo::default());
    if !problems.is_empty() {
        // An invalid config is not rendered: nothing would ever read its YAML.
        errors.reserve(problems.len());
        for problem in problems {
            locate_problem(problem, &doc, base, errors, base_errors);
        }
        return None;
    }

    let rendered = match render_yaml(&config) {
        Ok(r) => r,
        Err(m) => {
            errors.push(RepoError::new(&doc.path, "spec.kubelet", m));
            return None;
        }
    };
    let configmap_name = protocol::configmap_name(name, rendered.as_bytes());
    Some(RenderedPool {
        spec: doc.spec,
        rendered,
        config,
        configmap_name,
        disruption: doc.disruption,
    })
}

/// Reports a validation problem of the pool's config at the file and line that set its
/// field: the pool's `errors`, or `base_errors`.
fn locate_problem(
    problem: validation::ValidationError,
    doc: &PoolDoc,
    base: &Base,
    errors: &mut Vec<RepoError>,
    base_errors: &mut BaseErrors,
) {
    // Shown after its field: the detail, not the kubelet's path a second time.
    let detail = problem.detail().to_string();
    match locate(&problem.field, doc, base) {
        Location::Pool(field, position) => {
            errors.push(RepoError::new(&doc.path, field, detail).at(Some(position)));
        }
        Location::Base(file, field, position) => base_errors.add(
            RepoError::new(file, field, detail).at(Some(position)),
            &doc.spec.name,
        ),
        Location::Default => errors.push(RepoError::new(
            &doc.path,
            join_key("spec.kubelet", &problem.field),
            format!(
                "{} (the value is the kubelet's default: neither this pool nor the base \
                 sets it)",
                detail
            ),
        )),
    }
}

/// The config as the YAML the ConfigMap holds, checked to decode back to the same config
/// with the kubelet's strict decoder (what the node agent will do with it).
pub(super) fn render_yaml(config: &KubeletConfiguration) -> Result<String, String> {
    let rendered = serde_saphyr::to_string(config)
        .map_err(|e| format!("cannot write the config as YAML: {e}"))?;
    // The node agent reads no file larger than a ConfigMap holds; a config that takes more
    // than that once written out (a long flow list on one line becomes a line per item) is
    // the repository's to shorten, not an internal error.
    if rendered.len() > decode::MAX_FILE_BYTES {
        return Err(format!(
            "the config of this pool, merged over the base and written out as the ConfigMap \
             holds it, is {} bytes: more than the {} bytes (1 MiB) a ConfigMap holds; set \
             fewer or shorter values in the pool or the base",
            rendered.len(),
            decode::MAX_FILE_BYTES
        ));
    }
    match decode::decode_kubelet_configuration("rendered", rendered.as_bytes()) {
        Ok((back, _)) if back == *config => Ok(rendered),
        Ok(_) => Err(
            "internal error: the rendered YAML decodes to a different config; please report \
             this with the pool file"
                .to_string(),
        ),
        Err(e) => Err(format!(
            "internal error: the rendered YAML does not decode ({e}); please report this with \
             the pool file"
        )),
    }
}

/// Where a validation problem's field was set.
enum Location {
    /// In the pool file: field path in the file, position.
    Pool(String, Position),
    /// In the base file: file, field path, position.
    Base(String, String, Position),
    /// Nowhere: the kubelet's default.
    Default,
}

/// The most specific place that sets `field` (or an ancestor of it), the pool before the
/// base at each level: `evictionHard.memory.available` is found at its own line if either
/// file sets it, else at `evictionHard` in the pool, else in the base. Costs the length of
/// `field`, however many levels it has.
fn locate(field: &str, doc: &PoolDoc, base: &Base) -> Location {
    const KUBELET: &str = "spec.kubelet";
    let in_pool = join_key(KUBELET, field);
    // Lengths of the ancestor of `field` found: in the pool without `spec.kubelet.`.
    let pool = doc
        .map
        .nearest(&in_pool, KUBELET.len() + 2)
        .map(|(len, p)| (len - KUBELET.len() - 1, p));
    let from_base = base
        .path
        .as_ref()
        .and_then(|file| base.map.nearest(field, 1).map(|(len, p)| (len, file, p)));
    match (pool, from_base) {
        (Some((len, p)), b) if b.is_none_or(|(base_len, ..)| len >= base_len) => {
            let mut path = in_pool;
            path.truncate(KUBELET.len() + 1 + len);
            Location::Pool(path, p)
        }
        (_, Some((len, file, p))) => Location::Base(
            file.clone(),
            field.get(..len).unwrap_or(field).to_string(),
            p,
        ),
        _ => Location::Default,
    }
}
