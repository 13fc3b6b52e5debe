//! `disruption.classes`: the disruption class a repository gives KubeletConfiguration
//! fields ([`kubelet_gitops_core::disruption`]), in the settings' `spec.disruption` (every
//! pool) and in a pool's `spec.disruption` (that pool, over the settings').
//!
//! ```yaml
//! disruption:
//!   classes:
//!     cpuManagerPolicy: restart-clear-state   # the built-in drain, lowered
//!     evictionHard: drain                     # a path covers the fields under it
//! ```
//!
//! Each key is a field path whose first segment must be a KubeletConfiguration field
//! (a misspelling gets the closest one), each value a class; a class below the field's
//! floor is an error.

use std::collections::BTreeMap;

use kubelet_gitops_core::decode::{SourceMap, join_key};
use kubelet_gitops_core::disruption::{Class, Overrides, floor_of};
use serde::Deserialize;
use serde_json::Value;

use super::error::{RepoError, decode_part};
use super::settings::check_field_path;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct DisruptionDoc {
    classes: Option<BTreeMap<String, String>>,
}

/// Decodes `value`, the `disruption` object at `prefix` (`spec.disruption`) of `file`:
/// the overrides it sets. Every problem goes to `errors` at its line; a bad entry is left
/// out.
pub(super) fn decode(
    file: &str,
    map: &SourceMap,
    prefix: &str,
    value: &Value,
    errors: &mut Vec<RepoError>,
) -> Overrides {
    let mut out = Overrides::default();
    if value.is_null() {
        return out;
    }
    let doc: DisruptionDoc = match decode_part(file, value, map, prefix) {
        Ok(d) => d,
        Err(e) => {
            errors.push(e);
            return out;
        }
    };
    let classes_at = join_key(prefix, "classes");
    for (field, class) in doc.classes.unwrap_or_default() {
        let at = join_key(&classes_at, &field);
        if let Err(m) = check_field_path(file, &field) {
            errors.push(RepoError::at_field(file, map, at, m));
            continue;
        }
        let class = match class.parse::<Class>() {
            Ok(c) => c,
            Err(m) => {
                errors.push(RepoError::at_field(file, map, at, m));
                continue;
            }
        };
        let (floor, builtin) = floor_of(&field);
        if class < floor {
            let covered = builtin.map(|b| b.field).unwrap_or(field.as_str());
            errors.push(RepoError::at_field(
                file,
                map,
                at,
                format!(
                    "{field} cannot be `{class}`: a change of {covered} makes the kubelet's \
                     CPU or memory manager state file stale, and the node agent removes it \
                     before the kubelet starts whatever the class says, so the class is at \
                     least `{floor}`"
                ),
            ));
            continue;
        }
        out.set(field, class, file);
    }
    out
}
