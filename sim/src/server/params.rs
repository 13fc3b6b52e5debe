//! Query parameters, and the request options they make, validated as upstream's
//! `Validate{Create,Update,Patch}Options` words its 422s.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::table::IncludeObject;
use crate::error::{ApiError, Cause};
use crate::store::{PatchType, WriteOptions};

/// The query parameters the handlers read.
pub(super) struct Params(pub(super) HashMap<String, String>);

impl Params {
    pub(super) fn get(&self, k: &str) -> Option<&str> {
        self.0.get(k).map(String::as_str).filter(|v| !v.is_empty())
    }

    pub(super) fn owned(&self, k: &str) -> Option<String> {
        self.get(k).map(str::to_string)
    }

    pub(super) fn flag(&self, k: &str) -> bool {
        matches!(self.get(k), Some("true" | "1"))
    }
}

/// 422 for invalid request options (`CreateOptions.meta.k8s.io "" is invalid: ...`).
pub(super) fn invalid_options(kind: &str, causes: Vec<Cause>) -> ApiError {
    let texts: Vec<String> = causes.iter().map(ToString::to_string).collect();
    let message = match texts.as_slice() {
        [one] => format!("{kind}.meta.k8s.io \"\" is invalid: {one}"),
        many => format!("{kind}.meta.k8s.io \"\" is invalid: [{}]", many.join(", ")),
    };
    let causes: Vec<Value> = causes
        .iter()
        .map(|c| json!({ "reason": c.reason, "message": c.message, "field": c.field }))
        .collect();
    ApiError {
        code: 422,
        reason: "Invalid",
        message,
        details: Some(json!({ "group": "meta.k8s.io", "kind": kind, "causes": causes })),
        retry_after_seconds: None,
    }
}

/// Write options from the query, validated as upstream's `Validate{Create,Update,Patch}Options`.
/// Without a `fieldManager`, a write other than an apply is recorded under the
/// User-Agent's product (`kubectl` for `kubectl/v1.32.0 (linux/amd64) ...`), or `unknown`
/// without one, as upstream's `managerOrUserAgent`.
pub(super) fn write_options(
    params: &Params,
    kind: &str,
    patch_type: Option<PatchType>,
    user_agent: Option<&str>,
) -> Result<WriteOptions, ApiError> {
    let mut causes = Vec::new();
    let field_manager = params.owned("fieldManager");
    let force = params.get("force");
    if let Some(pt) = patch_type {
        if pt == PatchType::Apply {
            if field_manager.is_none() {
                causes.push(Cause {
                    field: "fieldManager".into(),
                    reason: "FieldValueRequired",
                    message: "Required value: is required for apply patch".into(),
                });
            }
        } else if force.is_some() {
            causes.push(Cause {
                field: "force".into(),
                reason: "FieldValueForbidden",
                message: "Forbidden: may not be specified for non-apply patch".into(),
            });
        }
    }
    if let Some(fm) = &field_manager {
        if fm.chars().count() > 128 {
            causes.push(Cause {
                field: "fieldManager".into(),
                reason: "FieldValueTooLong",
                message: "Too long: may not be more than 128 bytes".into(),
            });
        }
        if let Some((i, c)) = fm.chars().enumerate().find(|(_, c)| c.is_control()) {
            causes.push(Cause {
                field: "fieldManager".into(),
                reason: "FieldValueInvalid",
                message: format!(
                    "Invalid value: {fm:?}: invalid character U+{:04X} (at position {i})",
                    u32::from(c)
                ),
            });
        }
    }
    let dry_run = match params.get("dryRun") {
        None => false,
        Some("All") => true,
        Some(other) => {
            causes.push(Cause {
                field: "dryRun".into(),
                reason: "FieldValueNotSupported",
                message: format!("Unsupported value: [\"{other}\"]: supported values: \"All\""),
            });
            false
        }
    };
    if !causes.is_empty() {
        return Err(invalid_options(kind, causes));
    }
    let field_manager = match field_manager {
        None if patch_type != Some(PatchType::Apply) => {
            Some(crate::reqlog::client_name(user_agent))
        }
        other => other,
    };
    Ok(WriteOptions {
        dry_run,
        field_manager,
        force: force == Some("true"),
    })
}

pub(super) fn include_object(params: &Params) -> Result<IncludeObject, ApiError> {
    IncludeObject::parse(params.get("includeObject")).ok_or_else(|| {
        invalid_options(
            "TableOptions",
            vec![Cause {
                field: "includeObject".into(),
                reason: "FieldValueInvalid",
                message: format!(
                    "Invalid value: {:?}: must be 'Metadata', 'Object', 'None', or empty",
                    params.get("includeObject").unwrap_or("")
                ),
            }],
        )
    })
}

pub(super) fn parse_limit(params: &Params) -> Result<Option<usize>, ApiError> {
    match params.get("limit") {
        None => Ok(None),
        Some(v) => {
            let n: i64 = v.parse().map_err(|_| {
                ApiError::bad_request(format!("invalid value for limit: {v:?} is not an integer"))
            })?;
            Ok(usize::try_from(n).ok().filter(|n| *n > 0))
        }
    }
}

pub(super) fn field_selector(params: &Params) -> Option<String> {
    params.owned("fieldSelector")
}
